/*
 * core/select/selector.c — ranking eligible candidates for a priority.
 *
 * The order is total (names break every tie) so the same facts always give
 * the same answer. See edgert.h for the key, repeated here in code:
 *   tier       0 accelerator backend on its device class, 1 CPU, 2 reference
 *   speed      decode tokens/s, measured here if known, else declared, else 0;
 *              measured rates within each other's rounds form one decode
 *              group (decode_groups), inside which prefill decides first
 *   fidelity   top-1 agreement (measured > declared > unknown), KL (same; lower
 *              first), then activation bits, weight bits
 *   then       the backend that requires or uses more of this device's CPU
 *              flags (for fidelity before speed), then the name
 * "measured > declared" is per candidate: a figure measured on this device
 * replaces the manifest's, and a candidate with no figure at all sorts after
 * those with one (evidence beats taste), which keeps the order transitive.
 * What "measured" means for decode is one source per tier (decode_source):
 * calibrate's rounds or first contact's quick figure, never both at once.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "select/selector.h"
#include "discover/discover.h"
#include "load/load.h"
#include "sandbox/sandbox.h"


/* Return the order of a and b when they differ (descending: the larger
 * first), and the key that told them apart in *why. */
#define DESC(a, b, key)                                                                          \
    do {                                                                                         \
        if ((a) != (b)) {                                                                        \
            *why = (key);                                                                        \
            return (a) > (b) ? -1 : 1;                                                           \
        }                                                                                        \
    } while (0)
#define KEY(f)                                                                                   \
    do {                                                                                         \
        int f_ = (f);                                                                            \
        if (f_)                                                                                  \
            return f_;                                                                           \
    } while (0)

/* Fidelity key alone (no tier, no name). Negative: a is more faithful. */
static int fidelity_key(const er_cand *a, const er_cand *b, edgert_decider *why)
{
    double ta = er_sel_top1_of(a, NULL), tb = er_sel_top1_of(b, NULL);
    DESC(ta, tb, EDGERT_DECIDER_TOP1);
    double ka = er_sel_kl_of(a), kb = er_sel_kl_of(b);
    DESC(-ka, -kb, EDGERT_DECIDER_KL);
    DESC(a->m.activation_bits, b->m.activation_bits, EDGERT_DECIDER_BITS);
    DESC(a->m.weight_bits, b->m.weight_bits, EDGERT_DECIDER_BITS);
    return 0;
}

/* Speed key alone: the worth of the figure, then the figure. */
static int speed_key(const er_cand *a, const er_cand *b, decode_src src, edgert_decider *why)
{
    DESC(er_sel_speed_class(a, src), er_sel_speed_class(b, src), EDGERT_DECIDER_DECODE);
    DESC(er_sel_speed_of(a, src, NULL), er_sel_speed_of(b, src, NULL), EDGERT_DECIDER_DECODE);
    return 0;
}

/* When speeds say nothing (none known, or equal), the cheaper arithmetic is
 * the faster guess: fewer activation bits, then fewer stored bits per
 * weight. (Fidelity would prefer the opposite, and used to decide here: a
 * plain-C fp32 plugin outranked neon-w4a16 for speed.) */
static int cost_key(const er_cand *a, const er_cand *b, edgert_decider *why)
{
    DESC(-a->m.activation_bits, -b->m.activation_bits, EDGERT_DECIDER_COST);
    DESC(-a->m.bits_per_weight, -b->m.bits_per_weight, EDGERT_DECIDER_COST);
    return 0;
}

/* At equal evidence, the backend written for more of this device ranks
 * first: more of the CPU flags it requires or uses when present are flags
 * this device has (amx-w4a8's decode is avx512-w4a8's, on the same
 * library, plus AMX tiles for prefill; avx512-w4a16 uses VNNI and BF16
 * where the AVX2 vendor example only uses AVX2 and AVX-VNNI). A fact of
 * the manifests and the probe, never a measurement. */
static int specialization_key(const struct edgert_ctx *ctx, const er_cand *a, const er_cand *b,
                              edgert_decider *why)
{
    const uint64_t dev = ctx->dev.cpu_flags;
    DESC(__builtin_popcountll((a->m.requires_flags | a->m.uses_flags) & dev),
         __builtin_popcountll((b->m.requires_flags | b->m.uses_flags) & dev),
         EDGERT_DECIDER_SPECIALIZATION);
    return 0;
}

/* Two candidates of one group (or any two, ungrouped) for priority speed. */
static int speed_order(const edgert_selection *s, const er_cand *a, const er_cand *b, int t,
                       int grouped, edgert_decider *why)
{
    if (grouped) {
        /* one decode group: prefill decides first */
        DESC(er_sel_prefill_class(a, s->src[t]), er_sel_prefill_class(b, s->src[t]),
             EDGERT_DECIDER_PREFILL);
        DESC(er_sel_prefill_of(a, s->src[t]), er_sel_prefill_of(b, s->src[t]),
             EDGERT_DECIDER_PREFILL);
    }
    KEY(speed_key(a, b, s->src[t], why));
    KEY(cost_key(a, b, why));
    return fidelity_key(a, b, why);
}

/* The same for priority fidelity. */
static int fidelity_order(const edgert_selection *s, const er_cand *a, const er_cand *b, int t,
                          int grouped, edgert_decider *why)
{
    if (grouped) /* one fidelity group: top-1 cannot be told apart, mean KL decides */
        DESC(-er_sel_kl_of(a), -er_sel_kl_of(b), EDGERT_DECIDER_KL);
    /* Equally faithful: the backend written for more of this device
     * first, a fact rather than a measurement, so the choice does not
     * flip between calibrations when two backends of the same
     * arithmetic stream at the same memory bandwidth (avx512-w4a16 and
     * the AVX2 vendor example measure within 1% of each other, in
     * either order); then speed. */
    KEY(fidelity_key(a, b, why));
    KEY(specialization_key(s->ctx, a, b, why));
    return speed_key(a, b, s->src[t], why);
}

int er_sel_compare(const edgert_selection *s, size_t ia, size_t ib, int grouped,
                   edgert_decider *why)
{
    edgert_decider unused;
    if (!why)
        why = &unused;
    *why = EDGERT_DECIDER_NONE;
    const er_cand *a = s->ctx->cands[ia], *b = s->ctx->cands[ib];
    int ta = er_sel_tier(s->ctx, a), tb = er_sel_tier(s->ctx, b);
    DESC(-ta, -tb, EDGERT_DECIDER_TIER);
    /* Groups are numbered in the order of the priority's key (the first
     * pass), so candidates of two groups are in the first pass's order,
     * and what told them apart there is why. */
    if (grouped && s->group[ia] != s->group[ib])
        return er_sel_compare(s, ia, ib, 0, why);
    if (s->priority == EDGERT_PRIORITY_SPEED)
        KEY(speed_order(s, a, b, ta, grouped, why));
    else
        KEY(fidelity_order(s, a, b, ta, grouped, why));
    KEY(specialization_key(s->ctx, a, b, why));
    *why = EDGERT_DECIDER_NAME;
    return strcmp(a->m.name, b->m.name);
}

/* Insertion sort: a handful of candidates, and it keeps the comparator's
 * context without a global (qsort has no user pointer in C11). */
static void sort_indices(const edgert_selection *s, int grouped, size_t *idx, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        size_t v = idx[i], j = i;
        while (j > 0 && er_sel_compare(s, v, idx[j - 1], grouped, NULL) < 0) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = v;
    }
}

/*
 * Decode groups (priority speed). A measured decode rate is the median of a
 * few rounds in memory-bandwidth windows that move with the neighbours;
 * two backends streaming the same bytes (amx-w4a8 and avx512-w4a8 share
 * their decode kernel) swap places from one calibration to the next. Two
 * rates are taken as indistinguishable when each median lies within the
 * other's rounds [min, max]: the median, not the range, stands for the
 * backend, so one busy round that stretches a range down does not pull a
 * much slower backend in (ranges that merely overlap would). A pairwise
 * test like this is not transitive, which breaks a sort; so the groups are
 * fixed before the final sort: walking `order` (sorted by the speed key
 * alone), a candidate joins the current group when it is in the same tier,
 * it and every member were measured here with a range, and the test holds
 * against every member; else it starts the next group (a candidate without
 * a range, or of another tier, closes the group). Each candidate gets one
 * number, so the final key (tier, group, prefill, speed, ...) is a plain
 * lexicographic order, and outside multi-member groups the first pass's.
 */
static void decode_groups(const struct edgert_ctx *ctx, const decode_src *src,
                          const size_t *order, size_t n, int *group)
{
    int g = -1, open = 0; /* open: the current group takes members */
    /* the members' ranges intersected, and their medians' span */
    double lo_max = 0.0, hi_min = 0.0, med_min = 0.0, med_max = 0.0;
    const er_cand *lead = NULL;
    for (size_t r = 0; r < n; r++) {
        const er_cand *c = ctx->cands[order[r]];
        double lo, hi, v = er_sel_decode_measured(c, src[er_sel_tier(ctx, c)]);
        int ranged = er_sel_measured_range(c, src[er_sel_tier(ctx, c)], &lo, &hi);
        /* one kind of figure per group: in a mixed tier a calibrated rate
         * (rounds; prefill at M = 512) never groups with a quick one (calls;
         * prefill at M = 64) */
        decode_src s = src[er_sel_tier(ctx, c)];
        if (open && ranged && er_sel_tier(ctx, c) == er_sel_tier(ctx, lead) &&
            er_sel_by_first_contact(c, s) == er_sel_by_first_contact(lead, s) && v >= lo_max &&
            v <= hi_min && med_min >= lo && med_max <= hi) {
            lo_max = fmax(lo_max, lo);
            hi_min = fmin(hi_min, hi);
            med_min = fmin(med_min, v);
            med_max = fmax(med_max, v);
        } else {
            g++;
            lead = c;
            open = ranged;
            lo_max = lo;
            hi_min = hi;
            med_min = med_max = v;
        }
        group[order[r]] = g;
    }
}

/* Whether c's top-1 agreement was measured here over a known number of
 * tokens: then its sampling noise is known. */
static int top1_counted(const er_cand *c)
{
    return !isnan(c->pub.measured.top1_agreement) && c->pub.measured_top1_tokens > 0;
}

/* Two top-1 agreements, counted over n_a and n_b tokens, that differ by no
 * more than two standard errors of their difference under one common
 * agreement rate p (pooled: both counts of agreed tokens over all tokens):
 * sqrt(p (1 - p) (1/n_a + 1/n_b)). The two are counted as independent,
 * which errs toward "cannot be told apart": both backends see the same
 * tokens, and what they get right together cancels. At the default 64
 * tokens and p = 0.77 the bound is 0.15, so avx512-w4a16's 0.797 and the
 * W4A8 backends' 0.734 on spark-1.7b (4 tokens of 64 apart) are one group
 * and mean KL (0.099 against 0.130) decides, as it does where one token of
 * 64 had put W4A8 first on a 4096-wide head. The test finds no difference;
 * it does not show the two equal: at 64 tokens gaps up to ~10 tokens are
 * ties, so mean KL nearly always decides there. */
static int top1_indistinct(const er_cand *a, const er_cand *b)
{
    double pa = a->pub.measured.top1_agreement, pb = b->pub.measured.top1_agreement;
    double na = a->pub.measured_top1_tokens, nb = b->pub.measured_top1_tokens;
    double p = (pa * na + pb * nb) / (na + nb); /* pooled: the agreed tokens over all */
    double se = sqrt(p * (1.0 - p) * (1.0 / na + 1.0 / nb));
    return fabs(pa - pb) <= 2.0 * se;
}

/*
 * Fidelity groups (priority fidelity), fixed before the final sort as the
 * decode groups are (the test is not transitive): walking `order` (sorted
 * by the fidelity key alone), a candidate joins the current group when it
 * is in the same tier, it and every member have a counted top-1, and
 * top1_indistinct holds against every member; else it starts the next.
 */
static void fidelity_groups(const struct edgert_ctx *ctx, const size_t *order, size_t n,
                            int *group)
{
    int g = -1;
    size_t first = 0; /* the current group's first rank */
    for (size_t r = 0; r < n; r++) {
        const er_cand *c = ctx->cands[order[r]];
        int join = r > 0 && top1_counted(c) &&
                   er_sel_tier(ctx, c) == er_sel_tier(ctx, ctx->cands[order[first]]);
        for (size_t q = first; join && q < r; q++)
            join = top1_counted(ctx->cands[order[q]]) &&
                   top1_indistinct(c, ctx->cands[order[q]]);
        if (!join) {
            g++;
            first = r;
        }
        group[order[r]] = g;
    }
}

/* s->order, rank and group for s->priority, over the eligible candidates:
 * sorted by the priority's key, grouped (decode groups for speed, fidelity
 * groups for fidelity), then sorted again with the groups. */
static void rank_eligible(const struct edgert_ctx *ctx, edgert_selection *s)
{
    for (size_t i = 0; i < ctx->ncands; i++) {
        s->rank[i] = -1;
        s->group[i] = -1;
        if (ctx->cands[i]->pub.eligible)
            s->order[s->count++] = i;
    }
    for (int t = 0; t < TIERS; t++)
        s->src[t] = er_sel_decode_source(ctx, t);
    sort_indices(s, 0, s->order, s->count);
    if (s->priority == EDGERT_PRIORITY_SPEED)
        decode_groups(ctx, s->src, s->order, s->count, s->group);
    else
        fidelity_groups(ctx, s->order, s->count, s->group);
    sort_indices(s, 1, s->order, s->count);
    for (size_t r = 0; r < s->count; r++)
        s->rank[s->order[r]] = (int)r;
}

static const char *evidence_of(const struct edgert_ctx *ctx, const edgert_selection *s,
                               const er_cand *c)
{
    int measured = 0;
    if (ctx->no_evidence)
        return "declared";
    if (s->priority == EDGERT_PRIORITY_SPEED)
        er_sel_speed_of(c, s->src[er_sel_tier(ctx, c)], &measured);
    else
        er_sel_top1_of(c, &measured);
    return measured ? "measured" : "declared";
}

/* With defer_load, what is ranked is loaded now (live mode): the forced
 * backend alone when one is named, else every candidate that passed its
 * gates. A plan loads nothing. */
static void load_for_selection(edgert_ctx *ctx, const char *forced)
{
    if (!ctx->defer_load || ctx->dev.planned)
        return;
    ctx->sb_batch = 1; /* first contacts under one hold of the lock (sandbox.c) */
    for (size_t i = 0; i < ctx->ncands; i++) {
        er_cand *c = ctx->cands[i];
        if (forced && strcmp(c->m.name, forced) != 0)
            continue;
        er_ensure_loaded(ctx, c);
        c->pub.eligible = c->failed == 0;
    }
    er_sb_batch_end(ctx);
}

/* Why nothing is eligible when no manifest was taken: none found in the
 * folders searched, or every one found refused. */
static edgert_status no_manifest(const struct edgert_ctx *ctx, char *err, size_t err_len)
{
    char dirs[1024] = "";
    size_t used = 0;
    for (size_t i = 0; i < ctx->ndirs && used + 2 < sizeof dirs; i++) {
        int w = snprintf(dirs + used, sizeof dirs - used, "%s%s", i ? ", " : "",
                         ctx->dirs[i].path);
        if (w < 0)
            break;
        used += (size_t)w < sizeof dirs - used ? (size_t)w : sizeof dirs - used - 1;
    }
    if (ctx->nskipped) /* found, but each refused: invalid, or writable by others */
        edgert_errf(err, err_len,
                    "no backend is eligible: %zu manifest%s found in the folders searched "
                    "(%s), none usable (the handle's diagnostics say why)",
                    ctx->nskipped, ctx->nskipped == 1 ? "" : "s", dirs[0] ? dirs : "none");
    else
        edgert_errf(err, err_len,
                    "no backend is eligible: no backend manifest was found in any folder "
                    "searched (%s); point EDGERT_ADD_MANIFEST_PATH or --manifests at a "
                    "folder of manifests",
                    dirs[0] ? dirs : "none");
    return EDGERT_E_NOT_ELIGIBLE;
}

edgert_status edgert_select(edgert_ctx *ctx, edgert_priority priority, const char *forced,
                            edgert_selection **out, char *err, size_t err_len)
{
    if (out)
        *out = NULL;
    if (!ctx || !out ||
        (priority != EDGERT_PRIORITY_SPEED && priority != EDGERT_PRIORITY_FIDELITY)) {
        edgert_errf(err, err_len, "edgert_select: bad arguments");
        return EDGERT_E_USAGE;
    }
    /* The operator's override: the application's arguments are the default. */
    const char *via = "";
    if (!ctx->ignore_env && !ctx->no_env_selection) {
        const char *p = er_getenv(0, "EDGERT_PRIORITY"), *b = er_getenv(0, "EDGERT_BACKEND");
        if (p && edgert_priority_parse(p, &priority) != 0) {
            edgert_errf(err, err_len, "EDGERT_PRIORITY must be 'speed' or 'fidelity', not '%s'",
                        p);
            return EDGERT_E_USAGE;
        }
        if (b) {
            forced = b;
            via = " (named by EDGERT_BACKEND)"; /* the application may never have named it */
        }
    }
    load_for_selection(ctx, forced);
    edgert_selection *s = calloc(1, sizeof *s);
    if (!s)
        goto nomem;
    s->priority = priority;
    s->ctx = ctx;
    s->ncands = ctx->ncands;
    s->selected = -1;
    s->evidence = "declared";
    for (int t = 0; t < TIERS; t++)
        s->src[t] = (decode_src){SRC_DECLARED, NAN};
    s->order = calloc(ctx->ncands + 1, sizeof *s->order);
    s->rank = calloc(ctx->ncands + 1, sizeof *s->rank);
    s->group = calloc(ctx->ncands + 1, sizeof *s->group);
    if (!s->order || !s->rank || !s->group)
        goto nomem;
    rank_eligible(ctx, s);
    *out = s;

    if (forced) {
        const er_cand *c = er_cand_find(ctx, forced);
        if (!c) {
            char known[512] = "";
            size_t used = 0;
            for (size_t i = 0; i < ctx->ncands && used + 2 < sizeof known; i++) {
                int w = snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "",
                                 ctx->cands[i]->m.name);
                if (w < 0)
                    break;
                used += (size_t)w < sizeof known - used ? (size_t)w : sizeof known - used - 1;
            }
            char why[2048] = "";
            er_discover_why_missing(ctx, forced, why, sizeof why);
            edgert_errf(err, err_len, "no backend named '%s'%s (manifests found: %s)%s", forced,
                        via, known[0] ? known : "none", why);
            return EDGERT_E_NOT_FOUND;
        }
        if (!c->pub.eligible) {
            char why[1024];
            er_cand_why_not(c, why, sizeof why);
            edgert_errf(err, err_len, "backend '%s'%s was asked for but is not eligible: %s",
                        forced, via, why);
            return EDGERT_E_NOT_ELIGIBLE;
        }
        size_t ci = 0;
        while (ctx->cands[ci] != c)
            ci++;
        s->selected = (int)ci;
    } else if (s->count > 0) {
        s->selected = (int)s->order[0];
    } else if (ctx->ncands == 0) {
        return no_manifest(ctx, err, err_len);
    } else {
        edgert_errf(err, err_len, "no backend is eligible on this device%s",
                    ctx->strict ? " (strict mode excludes the reference backend)" : "");
        return EDGERT_E_NOT_ELIGIBLE;
    }
    s->sel = &ctx->cands[s->selected]->pub;
    s->evidence = evidence_of(ctx, s, ctx->cands[s->selected]);
    return EDGERT_OK;
nomem:
    edgert_selection_free(s);
    edgert_errf(err, err_len, "out of memory");
    return EDGERT_E_NOMEM;
}

const edgert_candidate *edgert_selection_selected(const edgert_selection *s)
{
    return s ? s->sel : NULL;
}

edgert_priority edgert_selection_priority(const edgert_selection *s)
{
    return s ? s->priority : EDGERT_PRIORITY_SPEED;
}

int edgert_selection_rank(const edgert_selection *s, size_t i)
{
    return (s && i < s->ncands) ? s->rank[i] : -1;
}

const char *edgert_selection_evidence(const edgert_selection *s)
{
    return s ? s->evidence : "declared";
}

size_t edgert_selection_count(const edgert_selection *s)
{
    return s ? s->count : 0;
}

size_t edgert_selection_index(const edgert_selection *s, size_t r)
{
    return (s && r < s->count) ? s->order[r] : (size_t)-1;
}

int edgert_selection_decode_group(const edgert_selection *s, size_t r)
{
    if (!s || r >= s->count || s->priority != EDGERT_PRIORITY_SPEED)
        return -1;
    return s->group[s->order[r]];
}

int edgert_selection_fidelity_group(const edgert_selection *s, size_t r)
{
    if (!s || r >= s->count || s->priority != EDGERT_PRIORITY_FIDELITY)
        return -1;
    return s->group[s->order[r]];
}

const char *edgert_selection_decode_source(const edgert_selection *s, size_t r)
{
    if (!s || r >= s->count)
        return er_sel_decode_source_name((decode_src){SRC_DECLARED, NAN});
    return er_sel_decode_source_name(s->src[er_sel_tier(s->ctx, s->ctx->cands[s->order[r]])]);
}

double edgert_selection_decode_rate(const edgert_selection *s, size_t r)
{
    if (!s || r >= s->count)
        return NAN;
    const er_cand *c = s->ctx->cands[s->order[r]];
    return er_sel_decode_measured(c, s->src[er_sel_tier(s->ctx, c)]);
}

int edgert_selection_decode_range(const edgert_selection *s, size_t r, double *lo, double *hi)
{
    double l = NAN, h = NAN;
    int ok = 0;
    if (s && r < s->count) {
        const er_cand *c = s->ctx->cands[s->order[r]];
        ok = er_sel_measured_range(c, s->src[er_sel_tier(s->ctx, c)], &l, &h);
    }
    if (lo)
        *lo = ok ? l : NAN;
    if (hi)
        *hi = ok ? h : NAN;
    return ok;
}

double edgert_selection_decode_read_gbs(const edgert_selection *s, size_t r)
{
    if (!s || r >= s->count)
        return NAN;
    const er_cand *c = s->ctx->cands[s->order[r]];
    decode_src src = s->src[er_sel_tier(s->ctx, c)];
    if (!er_sel_by_first_contact(c, src) || !(c->pub.first_contact_read_gbs > 0.0))
        return NAN;
    return src.read_gbs;
}

void edgert_selection_free(edgert_selection *s)
{
    if (!s)
        return;
    free(s->order);
    free(s->rank);
    free(s->group);
    free(s);
}
