/*
 * core/select/reasons.c — the selector's account of each rank
 * (edgert_selection_reason): the key that put it below the rank above
 * (er_sel_compare, the ranking's own comparison), its group, the figures
 * it was compared by with where each came from, and why a decode group
 * ends where it does (the test decode_groups in selector.c applies). Read
 * from the ranking; nothing here ranks again.
 */
#include <math.h>
#include <string.h>

#include "select/selector.h"

static const er_cand *cand_at(const edgert_selection *s, size_t r)
{
    return s->ctx->cands[s->order[r]];
}

/* The first and last rank of rank r's group (groups are consecutive ranks). */
static void group_span(const edgert_selection *s, size_t r, size_t *first, size_t *last)
{
    const int g = s->group[s->order[r]];
    *first = *last = r;
    while (*first > 0 && s->group[s->order[*first - 1]] == g)
        (*first)--;
    while (*last + 1 < s->count && s->group[s->order[*last + 1]] == g)
        (*last)++;
}

/* Rank r's measured decode median and the range it was grouped by: 1 when
 * it has both (a range around the median, above zero). */
static int ranged(const edgert_selection *s, size_t r, double *med, double *lo, double *hi)
{
    const er_cand *c = cand_at(s, r);
    decode_src src = s->src[er_sel_tier(s->ctx, c)];
    *med = er_sel_decode_measured(c, src);
    return er_sel_measured_range(c, src, lo, hi) && !isnan(*med) && *lo > 0.0 && *lo <= *hi;
}

/* Whether ranks a and b are compared by one tier's source and one kind of
 * figure (calibrate's rounds or first contact's calls). */
static int same_kind(const edgert_selection *s, size_t a, size_t b)
{
    const er_cand *ca = cand_at(s, a), *cb = cand_at(s, b);
    int t = er_sel_tier(s->ctx, ca);
    return t == er_sel_tier(s->ctx, cb) &&
           er_sel_by_first_contact(ca, s->src[t]) == er_sel_by_first_contact(cb, s->src[t]);
}

/* Rank r starts a decode group right after one of its tier and kind of
 * figure: against which member (in rank order) the group test failed,
 * and how — r's median outside the member's range, or the member's median
 * outside r's. A member without a range, or of another kind, means the
 * group closed for that reason instead: no split. */
static void decode_split(const edgert_selection *s, size_t r, edgert_rank_reason *o)
{
    double med, lo, hi, pm, plo, phi;
    if (s->priority != EDGERT_PRIORITY_SPEED || r == 0 ||
        s->group[s->order[r]] == s->group[s->order[r - 1]] || !ranged(s, r, &med, &lo, &hi))
        return;
    size_t first, last;
    group_span(s, r - 1, &first, &last);
    for (size_t m = first; m <= last; m++) {
        if (!same_kind(s, m, r) || !ranged(s, m, &pm, &plo, &phi))
            return;
        if (med < plo || med > phi)
            o->split = EDGERT_SPLIT_MEDIAN_OUTSIDE;
        else if (pm < lo || pm > hi)
            o->split = EDGERT_SPLIT_RANGE_EXCLUDES;
        else
            continue;
        o->split_rank = m;
        return;
    }
}

/* The figures rank r was compared by, each measured here or declared. */
static void figures(const edgert_selection *s, size_t r, const er_cand *c,
                    edgert_rank_reason *o)
{
    decode_src src = s->src[o->tier];
    double v = er_sel_decode_measured(c, src);
    o->decode_measured = isnan(v) ? 0 : 1;
    o->decode = isnan(v) ? c->pub.declared.decode_tokens_per_s : v;
    if (isnan(o->decode))
        o->decode_measured = -1;
    o->source = er_sel_decode_source_name(src);
    o->quick = !isnan(v) && er_sel_by_first_contact(c, src);
    edgert_selection_decode_range(s, r, &o->decode_lo, &o->decode_hi);
    o->read_gbs = edgert_selection_decode_read_gbs(s, r);
    o->calibrated = er_sel_has_calibrated_decode(c);
    o->series = o->calibrated ? c->pub.measured_series : NULL;
    double p = er_sel_prefill_measured(c, src);
    o->prefill_measured = isnan(p) ? 0 : 1;
    o->prefill = isnan(p) ? c->pub.declared.prefill_gflops : p;
    int measured = 0;
    o->top1 = er_sel_top1_of(c, &measured);
    o->top1_measured = measured;
    if (o->top1 < 0.0) {
        o->top1 = NAN;
        o->top1_measured = -1;
    }
    o->kl_measured = !isnan(c->pub.measured.kl_mean);
    o->kl = er_sel_kl_of(c);
    if (isinf(o->kl)) {
        o->kl = NAN;
        o->kl_measured = -1;
    }
    if (isnan(o->prefill))
        o->prefill_measured = -1;
}

edgert_status edgert_selection_reason(const edgert_selection *s, size_t r,
                                      edgert_rank_reason *out)
{
    if (!s || !out || out->struct_size < EDGERT_RANK_REASON_V1_SIZE || r >= s->count)
        return EDGERT_E_USAGE;
    size_t have = out->struct_size;
    edgert_rank_reason o = {.struct_size = sizeof o, .candidate = s->order[r]};
    const er_cand *c = cand_at(s, r);
    o.tier = er_sel_tier(s->ctx, c);
    o.decider = EDGERT_DECIDER_NONE;
    if (r > 0)
        er_sel_compare(s, s->order[r - 1], s->order[r], 1, &o.decider);
    o.group = s->group[s->order[r]];
    group_span(s, r, &o.group_first, &o.group_last);
    figures(s, r, c, &o);
    decode_split(s, r, &o);
    if (have > sizeof o)
        have = sizeof o;
    o.struct_size = have;
    memcpy(out, &o, have);
    return EDGERT_OK;
}

const char *edgert_decider_name(edgert_decider d)
{
    switch (d) {
    case EDGERT_DECIDER_NONE: return "none";
    case EDGERT_DECIDER_TIER: return "tier";
    case EDGERT_DECIDER_DECODE: return "decode";
    case EDGERT_DECIDER_PREFILL: return "prefill";
    case EDGERT_DECIDER_COST: return "cost";
    case EDGERT_DECIDER_TOP1: return "top1";
    case EDGERT_DECIDER_KL: return "kl";
    case EDGERT_DECIDER_BITS: return "bits";
    case EDGERT_DECIDER_SPECIALIZATION: return "specialization";
    case EDGERT_DECIDER_NAME: return "name";
    }
    return NULL;
}
