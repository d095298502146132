/*
 * runner/gptq.c — edgert_gptq_quantize: a dense model folder to a GPTQ
 * checkpoint, each linear layer quantized by GPTQ (gptq_math.c) on its real
 * inputs, collected by running the model itself (runner.h has the contract).
 *
 * Layer by layer, as GPTQ does: the residual stream of every calibration
 * token at the current layer's input is kept (tokens x hidden floats); the
 * layer runs on it once with its dense weights, summing x x^T at each of its
 * four GEMMs' inputs (q/k/v share one, gate/up one, o and down their own);
 * each of its linear layers is quantized against its sum; the layer runs
 * again with the quantized weights, and its output is the next layer's
 * input. So each layer's inputs carry the error of the layers before it,
 * which GPTQ then compensates. After the last layer the final norm's output
 * is the head's input. The held-out prompts (optional) go the same way, and
 * their sums S measure each layer: the energy of its outputs w^T S w and the
 * error (w - q)^T S (w - q) for GPTQ's codes and for round to nearest's.
 *
 * Memory: the four sums of one layer (and the held-out ones), one k x k
 * scratch, the residual streams, one layer's dequantized weights (the next
 * pass runs on them), rows of a layer in slices of 64 MiB, and every
 * layer's codes until the checkpoint is written (half a byte a weight).
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <libgen.h>
#include <time.h>
#include <unistd.h>

#include "gptq.h"
#include "internal.h"

#define SLICE_FLOATS (16u << 20) /* rows of a layer quantized at once: 64 MiB of each copy */

/* The default dampening: 0.1 of the mean diagonal, not GPTQ's 0.01. With
 * few calibration tokens per input channel (a device quantizing at install
 * time has prompts, not GPTQ's 262,144 tokens) x x^T is a noisy estimate,
 * and the ridge keeps GPTQ from fitting its noise. Held-out output SQNR,
 * worst layer's gain over round to nearest (median), 0.01 -> 0.1:
 * SmolLM2 6,938 tokens (K up to 1536) sym g128 +0.90 -> +1.45 dB (+4.78 ->
 * +4.93), asym g64 +1.04 -> +1.51 (+4.67 -> +4.81); the small test model,
 * 2,048 tokens +1.16 -> +1.77 (+5.41 -> +5.45), 512 tokens -0.78 -> +0.92;
 * at 8,192 tokens 0.1 costs 0.1 dB (+1.98 -> +1.85, +5.91 -> +5.83). */
#define GQ_DAMP 0.1

typedef struct gq_result {
    char *name;
    edgert_qtensor q;
    uint32_t *perm; /* act order: q.view.perm, until the file is written */
} gq_result;

typedef struct gq_set {
    const int32_t *const *ids;
    const uint32_t *len;
    size_t count, tokens;
    float *X; /* [tokens][hidden]: the residual stream at the current layer's input */
} gq_set;

typedef struct gq_state {
    edgert_model *m;
    const edgert_gptq_options *o;
    uint32_t group;
    int sym;
    gq_set cal, ho;
    float *H[4], *S[4], *scratch;
    float **acc; /* H or S during a pass */
    gq_result *res;
    size_t nres;
    int act_order; /* options.act_order, where its struct_size covers it */
    uint32_t index, count; /* layers reported, of */
} gq_state;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static rn_linears *group_of(rn_layer *L, int kind)
{
    return kind == RN_OP_QKV ? &L->qkv : kind == RN_OP_O ? &L->o
                                       : kind == RN_OP_GU ? &L->gate_up : &L->down;
}

/* Each GEMM of a pass: its input summed into s->acc (when summing), and
 * the GEMM itself on GPTQ's tiles when the layer's values are fp32 (the
 * dequantized ones always; a dense file's when it is F32). */
static int hook(void *user, uint32_t layer, int kind, const rn_linear *lin, const float *x,
                uint32_t rows, size_t ldx, float *y, size_t ldy)
{
    gq_state *s = user;
    if (s->acc && kind <= RN_OP_DOWN && lin == &group_of(&s->m->layers[layer], kind)->part[0])
        gq_hessian_add(s->m->ctx, s->acc[kind], lin->k, x, rows, ldx);
    if (lin->dt != ST_F32)
        return 0;
    gq_linear(s->m->ctx, lin->w, lin->n, lin->k, x, rows, ldx, y, ldy);
    return 1;
}

/* Layer l over every prompt of `set`: with `h`, summing inputs into s->acc;
 * with `advance`, its output becomes the set's residual stream; with
 * `head`, the final norm's output is summed into head (k = hidden). */
static edgert_status run_set(gq_state *s, gq_set *set, uint32_t l, rn_gemm_hook h,
                             int advance, float *head, char *err, size_t len)
{
    edgert_model *m = s->m;
    uint32_t hd = m->c.hidden;
    edgert_status st = EDGERT_OK;
    float *X = set->X;
    for (size_t p = 0; !st && p < set->count; p++) {
        m->pos = 0;
        for (uint32_t at = 0; !st && at < set->len[p]; at += EDGERT_RUNNER_CHUNK) {
            uint32_t n = set->len[p] - at < EDGERT_RUNNER_CHUNK ? set->len[p] - at
                                                                : EDGERT_RUNNER_CHUNK;
            memcpy(m->x, X, (size_t)n * hd * sizeof *X);
            st = rn_forward_layers(m, n, l, l + 1, h, s, err, len);
            if (!st && advance)
                memcpy(X, m->x, (size_t)n * hd * sizeof *X);
            if (!st && head)
                gq_hessian_add(m->ctx, head, hd, m->xn, n, hd);
            X += (size_t)n * hd;
        }
    }
    m->pos = 0;
    return st;
}

static void symmetrize(float *S, uint32_t k)
{
    for (uint32_t i = 0; i < k; i++)
        for (uint32_t j = 0; j < i; j++)
            S[(size_t)i * k + j] = S[(size_t)j * k + i];
}

/* An empty tensor of edgert_quantize_rtn's layout, its buffers malloc'd
 * (edgert_qtensor_free frees them). */
static int q_alloc(edgert_qtensor *q, uint32_t n, uint32_t k, uint32_t group, int sym)
{
    size_t G = (k + group - 1) / group;
    memset(q, 0, sizeof *q);
    q->codes = calloc((size_t)n * ((k + 1) / 2), 1);
    q->scales = malloc((size_t)n * G * sizeof(float));
    q->zeros = sym ? NULL : malloc((size_t)n * G);
    q->view = (edgert_qweights){.struct_size = EDGERT_QWEIGHTS_V1_SIZE, .n = n, .k = k,
                                .group = group, .codes = q->codes, .scales = q->scales,
                                .zeros = q->zeros};
    if (!q->codes || !q->scales || (!sym && !q->zeros)) {
        edgert_qtensor_free(q);
        return -1;
    }
    return 0;
}

/* Rows [r0, r0 + R) of q, as a tensor of their own (no buffers owned). */
static edgert_qtensor q_rows(const edgert_qtensor *q, uint32_t r0, uint32_t R)
{
    const edgert_qweights *v = &q->view;
    size_t G = (v->k + v->group - 1) / v->group;
    edgert_qtensor s = *q;
    s.codes += (size_t)r0 * ((v->k + 1) / 2);
    s.scales += (size_t)r0 * G;
    if (s.zeros)
        s.zeros += (size_t)r0 * G;
    s.view.n = R, s.view.codes = s.codes, s.view.scales = s.scales, s.view.zeros = s.zeros;
    return s;
}

typedef struct gq_err {
    double signal, rtn, gptq;
} gq_err;

/* One slice of rows: GPTQ's codes into q and their values into Wg; with S,
 * the errors it and round to nearest leave. */
static int slice(gq_state *s, const float *Wd, float *Wg, float *Wr, const float *U,
                 const float *S, edgert_qtensor *q, gq_err *e)
{
    edgert_ctx *ctx = s->m->ctx;
    const edgert_qweights *v = &q->view;
    size_t count = (size_t)v->n * v->k;
    if (v->perm) /* act order: the columns in its order, as U's are */
        for (size_t r = 0; r < v->n; r++)
            for (uint32_t j = 0; j < v->k; j++)
                Wg[r * v->k + j] = Wd[r * v->k + v->perm[j]];
    else
        memcpy(Wg, Wd, count * sizeof *Wg);
    gq_quantize(ctx, Wg, U, q);
    edgert_dequantize(v, Wg); /* in the model's order (perm: scattered back) */
    if (!S)
        return 0;
    edgert_qtensor r;
    if (q_alloc(&r, v->n, v->k, v->group, s->sym))
        return -1;
    memcpy(Wr, Wd, count * sizeof *Wr);
    gq_quantize(ctx, Wr, NULL, &r);
    edgert_dequantize(&r.view, Wr);
    edgert_qtensor_free(&r);
    e->signal += gq_quad(ctx, Wd, NULL, v->n, v->k, S);
    e->rtn += gq_quad(ctx, Wd, Wr, v->n, v->k, S);
    e->gptq += gq_quad(ctx, Wd, Wg, v->n, v->k, S);
    return 0;
}

/* Quantize one linear layer; keep: its dequantized values replace its
 * dense ones (the layer runs again on them). */
static edgert_status quantize_part(gq_state *s, rn_linear *lin, const float *U, const float *S,
                                   const gq_prep *prep, const uint32_t *perm, int keep, char *err,
                                   size_t len)
{
    double t0 = now();
    uint32_t n = lin->n, k = lin->k;
    size_t rs = SLICE_FLOATS / k < 16 ? 16 : SLICE_FLOATS / k / 16 * 16;
    rs = rs > n ? n : rs;
    gq_result *r = &s->res[s->nres];
    float *Wd = malloc(rs * k * sizeof(float)), *Wg = malloc(rs * k * sizeof(float));
    float *Wr = S ? malloc(rs * k * sizeof(float)) : NULL;
    float *kept = keep ? malloc((size_t)n * k * sizeof(float)) : NULL;
    gq_err e = {0};
    int fail = !Wd || !Wg || (S && !Wr) || (keep && !kept) ||
               q_alloc(&r->q, n, k, s->group, s->sym) || !(r->name = strdup(lin->name)) ||
               (perm && !(r->perm = malloc((size_t)k * sizeof *r->perm)));
    if (!fail && perm) { /* the codes' order: version 2 of the view */
        memcpy(r->perm, perm, (size_t)k * sizeof *r->perm);
        r->q.view.struct_size = (uint32_t)sizeof r->q.view;
        r->q.view.perm = r->perm;
    }
    for (uint32_t r0 = 0; !fail && r0 < n; r0 += (uint32_t)rs) {
        uint32_t R = n - r0 < rs ? n - r0 : (uint32_t)rs;
        rn_row_f32(lin->w, lin->dt, (uint64_t)r0 * k, R * k, Wd);
        edgert_qtensor part = q_rows(&r->q, r0, R);
        fail = slice(s, Wd, Wg, Wr, U, S, &part, &e);
        if (!fail && keep)
            memcpy(kept + (size_t)r0 * k, Wg, (size_t)R * k * sizeof *Wg);
    }
    s->nres++; /* its codes are freed with the state, named or not */
    free(Wd);
    free(Wg);
    free(Wr);
    if (fail) {
        free(kept);
        return er_fail(EDGERT_E_NOMEM, err, len, "%s [n=%u k=%u]: out of memory", lin->name, n,
                       k);
    }
    if (keep) {
        free(lin->owned);
        lin->owned = kept, lin->w = kept, lin->dt = ST_F32;
    }
    edgert_gptq_layer rep = {.struct_size = sizeof rep, .name = lin->name, .n = n, .k = k,
                             .index = ++s->index, .count = s->count, .seconds = now() - t0,
                             .damp = prep->damp, .dead = prep->dead,
                             .sqnr_rtn_db = NAN, .sqnr_gptq_db = NAN};
    if (S) {
        rep.sqnr_rtn_db = 10 * log10(e.signal / e.rtn);
        rep.sqnr_gptq_db = 10 * log10(e.signal / e.gptq);
    }
    if (s->o->progress)
        s->o->progress(s->o->user, &rep);
    return EDGERT_OK;
}

/* Act order: perm = the inputs by their diagonal of H, largest first (ties
 * in order: deterministic), and H (its upper triangle) permuted to match,
 * through `scratch` (k x k). */
static void act_order(float *H, uint32_t k, uint32_t *perm, float *scratch)
{
    for (uint32_t i = 0; i < k; i++)
        perm[i] = i;
    for (uint32_t i = 1; i < k; i++) { /* insertion sort, stable; k^2 beside U's k^3 / 3 */
        uint32_t p = perm[i], j = i;
        float d = H[(size_t)p * k + p];
        for (; j > 0 && H[(size_t)perm[j - 1] * k + perm[j - 1]] < d; j--)
            perm[j] = perm[j - 1];
        perm[j] = p;
    }
    for (uint32_t i = 0; i < k; i++)
        for (uint32_t j = i; j < k; j++) {
            uint32_t a = perm[i] < perm[j] ? perm[i] : perm[j], b = perm[i] ^ perm[j] ^ a;
            scratch[(size_t)i * k + j] = H[(size_t)a * k + b];
        }
    for (uint32_t i = 0; i < k; i++)
        memcpy(H + (size_t)i * k + i, scratch + (size_t)i * k + i, (k - i) * sizeof *H);
}

/* Every part of a group of layers sharing input k, against H (and S). */
static edgert_status quantize_group(gq_state *s, rn_linears *g, float *H, float *S, size_t rows,
                                    int keep, char *err, size_t len)
{
    uint32_t k = g->part[0].k;
    uint32_t *perm = NULL;
    if (s->act_order) {
        if (!(perm = malloc((size_t)k * sizeof *perm)))
            return er_fail(EDGERT_E_NOMEM, err, len, "out of memory");
        act_order(H, k, perm, s->scratch);
    }
    gq_prep prep;
    int rc = gq_prepare(s->m->ctx, H, k, rows, s->o->damp > 0 ? s->o->damp : GQ_DAMP, s->scratch,
                        &prep);
    if (rc)
        free(perm);
    if (rc)
        return rc == -2 ? er_fail(EDGERT_E_NOMEM, err, len, "out of memory")
                        : er_fail(EDGERT_E_UNSUPPORTED, err, len, "%s: the inputs' second moments "
                                  "are not finite (a NaN or Inf in the model's values), or "
                                  "stay singular dampened by %g (x 10, three times): calibrate "
                                  "with more tokens, or raise --damp", g->part[0].name,
                                  prep.damp);
    if (S)
        symmetrize(S, k);
    edgert_status st = EDGERT_OK;
    for (unsigned p = 0; !st && p < g->count; p++)
        st = quantize_part(s, &g->part[p], H, S, &prep, perm, keep, err, len);
    free(perm);
    return st;
}

/* A layer's dense values as fp32 of its own (a BF16 or F16 file's
 * converted once), so its GEMMs run on GPTQ's tiles. */
static edgert_status to_f32(rn_linears *g, char *err, size_t len)
{
    for (unsigned p = 0; p < g->count; p++) {
        rn_linear *lin = &g->part[p];
        if (lin->dt == ST_F32)
            continue;
        size_t count = (size_t)lin->n * lin->k;
        float *w = malloc(count * sizeof *w);
        if (!w)
            return er_fail(EDGERT_E_NOMEM, err, len, "%s: out of memory", lin->name);
        for (size_t at = 0; at < count; at += 1u << 24)
            rn_row_f32(lin->w, lin->dt, at, (uint32_t)(count - at < (1u << 24) ? count - at
                                                                              : 1u << 24),
                       w + at);
        free(lin->owned);
        lin->owned = w, lin->w = w, lin->dt = ST_F32;
    }
    return EDGERT_OK;
}

/* One layer: its inputs summed, its linear layers quantized, then run
 * again on their quantized values to make the next layer's inputs. */
static edgert_status one_layer(gq_state *s, uint32_t l, char *err, size_t len)
{
    edgert_model *m = s->m;
    rn_layer *L = &m->layers[l];
    int last = l + 1 == m->c.layers;
    edgert_status st = EDGERT_OK;
    for (int kind = 0; !st && kind <= RN_OP_DOWN; kind++)
        st = to_f32(group_of(L, kind), err, len);
    for (int kind = 0; kind <= RN_OP_DOWN; kind++) {
        uint32_t k = group_of(L, kind)->part[0].k;
        memset(s->H[kind], 0, (size_t)k * k * sizeof(float));
        if (s->ho.count)
            memset(s->S[kind], 0, (size_t)k * k * sizeof(float));
    }
    s->acc = s->H;
    st = st ? st : run_set(s, &s->cal, l, hook, 0, NULL, err, len);
    s->acc = s->S;
    if (!st && s->ho.count)
        st = run_set(s, &s->ho, l, hook, 0, NULL, err, len);
    s->acc = NULL;
    for (int kind = 0; !st && kind <= RN_OP_DOWN; kind++)
        st = quantize_group(s, group_of(L, kind), s->H[kind], s->ho.count ? s->S[kind] : NULL,
                            s->cal.tokens, 1, err, len);
    /* H[0] and S[0] (k = hidden) are free now: after the last layer they
     * sum the head's inputs */
    uint32_t h = m->c.hidden;
    if (last) {
        memset(s->H[0], 0, (size_t)h * h * sizeof(float));
        if (s->ho.count)
            memset(s->S[0], 0, (size_t)h * h * sizeof(float));
    }
    if (!st)
        st = run_set(s, &s->cal, l, hook, 1, last ? s->H[0] : NULL, err, len);
    if (!st && s->ho.count)
        st = run_set(s, &s->ho, l, hook, 1, last ? s->S[0] : NULL, err, len);
    for (int kind = 0; kind <= RN_OP_DOWN; kind++) { /* never run again */
        rn_linears *g = group_of(L, kind);
        for (unsigned p = 0; p < g->count; p++) {
            free(g->part[p].owned);
            g->part[p].owned = NULL, g->part[p].w = NULL;
        }
    }
    return st;
}

/* A set of prompts checked against the model and its embedding looked up. */
static edgert_status load_set(edgert_model *m, gq_set *set, const char *what,
                              const int32_t *const *ids, const uint32_t *lens, size_t count,
                              char *err, size_t len)
{
    const rn_config *c = &m->c;
    memset(set, 0, sizeof *set);
    set->ids = ids, set->len = lens, set->count = count;
    for (size_t p = 0; p < count; p++) {
        if (lens[p] == 0 || lens[p] > m->ctx_len)
            return er_fail(EDGERT_E_USAGE, err, len, "%s prompt %zu: %u tokens; a prompt holds "
                           "1 to %u (the model's context)", what, p + 1, lens[p], m->ctx_len);
        for (uint32_t i = 0; i < lens[p]; i++)
            if (ids[p][i] < 0 || (uint32_t)ids[p][i] >= c->vocab)
                return er_fail(EDGERT_E_USAGE, err, len, "%s prompt %zu, token %u: id %d is "
                               "outside the vocabulary [0, %u)", what, p + 1, i + 1, ids[p][i],
                               c->vocab);
        set->tokens += lens[p];
    }
    if (!(set->X = malloc(set->tokens * c->hidden * sizeof(float))))
        return er_fail(EDGERT_E_NOMEM, err, len, "out of memory for %zu tokens' activations",
                       set->tokens);
    float *x = set->X;
    for (size_t p = 0; p < count; p++)
        for (uint32_t i = 0; i < lens[p]; i++, x += c->hidden)
            rn_row_f32(st_data(m->embed_file, m->embed), m->embed->dtype,
                       (uint64_t)ids[p][i] * c->hidden, c->hidden, x);
    return EDGERT_OK;
}

static edgert_status take_codes(void *user, const char *layer, uint32_t n, uint32_t k,
                                edgert_qtensor *out, char *err, size_t len)
{
    gq_state *s = user;
    (void)n, (void)k, (void)err, (void)len;
    for (size_t i = 0; i < s->nres; i++)
        if (s->res[i].name && strcmp(s->res[i].name, layer) == 0 && s->res[i].q.codes) {
            *out = s->res[i].q;
            memset(&s->res[i].q, 0, sizeof s->res[i].q); /* the library's now */
            return EDGERT_OK;
        }
    return EDGERT_E_NOT_FOUND;
}

static edgert_status check_options(const edgert_gptq_options *o, char *err, size_t len)
{
    if (!o || o->struct_size < EDGERT_GPTQ_OPTIONS_V1_SIZE)
        return er_fail(EDGERT_E_USAGE, err, len, "edgert_gptq_quantize: options missing or "
                       "older than version 1");
    if (o->symmetric != 0 && o->symmetric != 1)
        return er_fail(EDGERT_E_USAGE, err, len, "edgert_gptq_quantize: symmetric is 0 or 1");
    if (!o->prompts || !o->prompt_len || o->prompt_count == 0)
        return er_fail(EDGERT_E_USAGE, err, len, "edgert_gptq_quantize: no calibration prompts");
    if (o->held_out_count && (!o->held_out || !o->held_out_len))
        return er_fail(EDGERT_E_USAGE, err, len, "edgert_gptq_quantize: held_out_count without "
                       "held_out prompts");
    if (o->struct_size >= offsetof(edgert_gptq_options, act_order) + sizeof(int) &&
        o->act_order != 0 && o->act_order != 1)
        return er_fail(EDGERT_E_USAGE, err, len, "edgert_gptq_quantize: act_order is 0 or 1");
    if (!(o->damp >= 0 && o->damp < 1))
        return er_fail(EDGERT_E_USAGE, err, len, "edgert_gptq_quantize: damp is from 0 (the "
                       "default, %g) to below 1, not %g", GQ_DAMP, o->damp);
    return EDGERT_OK;
}

static void state_free(gq_state *s)
{
    for (int i = 0; i < 4; i++) {
        free(s->H[i]);
        free(s->S[i]);
    }
    free(s->scratch);
    free(s->cal.X);
    free(s->ho.X);
    for (size_t i = 0; s->res && i < s->nres; i++) {
        free(s->res[i].name);
        edgert_qtensor_free(&s->res[i].q);
        free(s->res[i].perm);
    }
    free(s->res);
}

/* The model opened on the fp32 reference, its sums and scratch allocated. */
static edgert_status setup(gq_state *s, char *err, size_t len)
{
    edgert_model *m = s->m;
    const edgert_gptq_options *o = s->o;
    const rn_config *c = &m->c;
    if (strncmp(m->info.weights, "dense", 5) != 0 || m->nshards != 1)
        return er_fail(EDGERT_E_USAGE, err, len, "%s: %s; calibrated quantize reads a dense "
                       "model in one model.safetensors", m->dir, m->nshards != 1
                       ? "the weights are in shards" : "already quantized");
    edgert_status st = load_set(m, &s->cal, "calibration", o->prompts, o->prompt_len,
                                o->prompt_count, err, len);
    if (!st && o->held_out_count)
        st = load_set(m, &s->ho, "held-out", o->held_out, o->held_out_len, o->held_out_count,
                      err, len);
    uint32_t nq = c->heads * c->head_dim, ks[4] = {c->hidden, nq, c->hidden, c->mlp};
    uint32_t kmax = 0;
    for (int i = 0; !st && i < 4; i++) {
        kmax = ks[i] > kmax ? ks[i] : kmax;
        s->H[i] = malloc((size_t)ks[i] * ks[i] * sizeof(float));
        s->S[i] = o->held_out_count ? malloc((size_t)ks[i] * ks[i] * sizeof(float)) : NULL;
        if (!s->H[i] || (o->held_out_count && !s->S[i]))
            st = er_fail(EDGERT_E_NOMEM, err, len, "out of memory");
    }
    s->count = c->layers * 7 + 1;
    if (!st && (!(s->scratch = malloc((size_t)kmax * kmax * sizeof(float))) ||
                !(s->res = calloc(s->count, sizeof *s->res))))
        st = er_fail(EDGERT_E_NOMEM, err, len, "out of memory");
    return st;
}

edgert_status edgert_gptq_quantize(edgert_ctx *ctx, const char *dir, const char *out,
                                   const edgert_gptq_options *o, char *err, size_t len)
{
    edgert_status st = check_options(o, err, len);
    if (st)
        return st;
    if (!ctx || !dir || !out)
        return er_fail(EDGERT_E_USAGE, err, len, "edgert_gptq_quantize: NULL argument");
    /* before the minutes of work: a folder OUT cannot be written into (the
     * rest of what edgert_checkpoint_quantize checks costs nothing later) */
    char *copy = strdup(out);
    const char *folder = copy ? dirname(copy) : NULL;
    int writable = folder && access(folder, W_OK | X_OK) == 0;
    st = writable ? EDGERT_OK : er_fail(copy ? EDGERT_E_IO : EDGERT_E_NOMEM, err, len, "%s: "
                                        "cannot write into it: %s", folder ? folder : out,
                                        strerror(errno));
    free(copy);
    if (st)
        return st;
    uint32_t longest = 1;
    for (size_t p = 0; p < o->prompt_count + o->held_out_count; p++) {
        uint32_t l = p < o->prompt_count ? o->prompt_len[p]
                                         : o->held_out_len[p - o->prompt_count];
        longest = l > longest ? l : longest;
    }
    edgert_model_options mo = {.struct_size = sizeof mo, .backend = "fp32",
                               .context = longest};
    edgert_model *m = NULL;
    st = edgert_model_open(ctx, dir, &mo, &m, err, len);
    if (st == EDGERT_E_USAGE && err && len) { /* the context: a prompt is too long */
        char why[512];
        snprintf(why, sizeof why, "%s", err);
        return er_fail(st, err, len, "the longest prompt, %u tokens: %s", longest, why);
    }
    if (st)
        return st;
    gq_state s = {.m = m, .o = o, .group = o->group ? o->group : 128, .sym = o->symmetric,
                  .act_order = o->struct_size >= offsetof(edgert_gptq_options, act_order) +
                                                     sizeof(int) && o->act_order};
    st = setup(&s, err, len);
    for (uint32_t l = 0; !st && l < m->c.layers; l++)
        st = one_layer(&s, l, err, len);
    if (!st)
        st = quantize_group(&s, &m->head, s.H[0], s.ho.count ? s.S[0] : NULL, s.cal.tokens, 0,
                            err, len);
    char method[96];
    snprintf(method, sizeof method, "gptq damp=%g tokens=%zu%s",
             o->damp > 0 ? o->damp : GQ_DAMP, s.cal.tokens, s.act_order ? " act-order" : "");
    edgert_quantize_options qo = {.struct_size = sizeof qo, .symmetric = o->symmetric,
                                  .group = s.group, .layer_codes = take_codes, .user = &s,
                                  .method = method, .act_order = s.act_order};
    if (!st)
        st = edgert_checkpoint_quantize(m->shards[0].path, out, &qo, err, len);
    state_free(&s);
    edgert_model_close(m);
    return st;
}
