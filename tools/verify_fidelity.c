/*
 * tools/verify_fidelity.c — the fidelity half of `edgert verify`: how far is
 * a backend's output from dense fp32 of the unquantized weights? (verify.c
 * runs it after the correctness cases of verify_correct.c.)
 *
 * For each workload shape (with --quick: shapes of at most 8M weights, and the
 * output head with N capped at 16384), dense W from gen_dense(std
 * 0.02) and the same W quantized by RTN in the backend's layout
 * (gen_qtensor gives exactly edgert_quantize_rtn of those dense
 * weights); y_dense = x W^T from the UNQUANTIZED W with products and sums in
 * double (on all threads), y_B from the backend: SQNR in dB over M = 8 tokens
 * of LLM-like activations. The output head (the workload's `head: true` shape,
 * else K = 2048, N = 131072; N <= 16384 with --quick) runs T = --tokens
 * tokens: top-1 agreement of argmax(y_B) with argmax(y_dense), and mean
 * KL(softmax(y_dense) || softmax(y_B)). The head's first 8 tokens are the SQNR
 * tokens of its shape (the activation generator is a prefix-stable stream).
 * Head weights are scaled for a realistic logit spread: see head_std().
 *
 * With --weights FILE the weights are the file's: per shape its first layer
 * (dense values, or GPTQ dequantized, as the dense reference; the layer's
 * own codes for the backend), the head being the file's lm_head when it has
 * one; the activations are generated as above.
 */
#define _GNU_SOURCE
#include "verify_internal.h"
#include "generate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

#define QUICK_MAX_WEIGHTS (8u * 1024u * 1024u)
#define QUICK_HEAD_N 16384u
#define HEAD_K 2048u
#define HEAD_N 131072u
/* Std of the head's dense logits over the vocabulary; see head_std(). */
#define HEAD_LOGIT_STD 5.0

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* ---- the dense reference -------------------------------------------------------------- */

typedef struct dense_job {
    const float *w; /* [n][k] */
    const float *x; /* [m][k] */
    uint32_t m, n, k;
    float *yt;      /* [n][m]: transposed, so each W row writes one contiguous run */
} dense_job;

/* y[t][r] = Σ_k x[t][k] w[r][k], products and sums in double (a float
 * product is exact in double). Four tokens per pass over a W row, four
 * partial sums each: short dependency chains, vectorizable lanes. */
static void dense_rows(void *arg, size_t begin, size_t end, unsigned worker)
{
    const dense_job *j = arg;
    const uint32_t k = j->k;
    for (size_t r = begin; r < end; r++) {
        const float *w = j->w + r * k;
        uint32_t t = 0;
        for (; t + 4 <= j->m; t += 4) {
            const float *x0 = j->x + (size_t)t * k, *x1 = x0 + k, *x2 = x1 + k, *x3 = x2 + k;
            double a0[4] = {0}, a1[4] = {0}, a2[4] = {0}, a3[4] = {0};
            uint32_t c = 0;
            for (; c + 4 <= k; c += 4)
                for (unsigned l = 0; l < 4; l++) {
                    double wv = (double)w[c + l];
                    a0[l] += wv * (double)x0[c + l];
                    a1[l] += wv * (double)x1[c + l];
                    a2[l] += wv * (double)x2[c + l];
                    a3[l] += wv * (double)x3[c + l];
                }
            double s0 = (a0[0] + a0[1]) + (a0[2] + a0[3]);
            double s1 = (a1[0] + a1[1]) + (a1[2] + a1[3]);
            double s2 = (a2[0] + a2[1]) + (a2[2] + a2[3]);
            double s3 = (a3[0] + a3[1]) + (a3[2] + a3[3]);
            for (; c < k; c++) {
                double wv = (double)w[c];
                s0 += wv * (double)x0[c];
                s1 += wv * (double)x1[c];
                s2 += wv * (double)x2[c];
                s3 += wv * (double)x3[c];
            }
            float *yr = j->yt + r * j->m + t;
            yr[0] = (float)s0;
            yr[1] = (float)s1;
            yr[2] = (float)s2;
            yr[3] = (float)s3;
        }
        for (; t < j->m; t++) {
            const float *x0 = j->x + (size_t)t * k;
            double a[4] = {0};
            uint32_t c = 0;
            for (; c + 4 <= k; c += 4)
                for (unsigned l = 0; l < 4; l++)
                    a[l] += (double)w[c + l] * (double)x0[c + l];
            double s = (a[0] + a[1]) + (a[2] + a[3]);
            for (; c < k; c++)
                s += (double)w[c] * (double)x0[c];
            j->yt[r * j->m + t] = (float)s;
        }
    }
}

/* One fidelity projection: the shape's SQNR and, for the head, top-1 / KL. */
typedef struct fid_shape {
    const char *name;
    uint32_t n, k;
    int head;
    edgert_checkpoint *ck; /* --weights: the layer's checkpoint, else NULL */
    size_t layer;
} fid_shape;

/*
 * Head weights. The head's logits are y_t = x_t W^T with W iid of std σ_w,
 * so across the vocabulary they are normal with std σ_w ||x_t||. With the
 * activation generator (RMS ~1 per channel plus max(2, k/256) outlier
 * channels 30x larger, ||x_t|| ~ 95 at k = 2048) the projections' σ_w = 0.02
 * gives logits of std ~1.9 — and measured on this generator, the dense
 * softmax over N = 131072 is then nearly FLAT: mean entropy 10.1 of
 * log N = 11.8 nats, 0.8% on the top token (N = 16384: 7.9 of 9.7 nats, 2%).
 * A language model's next-token distribution is far sharper (a few nats of
 * entropy, tens of percent on the top token), because its top logits stand
 * out of the bulk. Normal logits reach that only with a std near
 * sqrt(2 ln N) ~ 4.4-4.8: at std 5 the dense softmax has entropy ~2.8-3.3
 * nats and puts ~35% on its top token for N = 16384..131072 (neither one-hot
 * nor flat). So the head's weights are scaled to give logits of std
 * HEAD_LOGIT_STD for a token of the generator's expected norm:
 * E||x||^2 = (k - k_out) + 900 k_out with k_out = max(2, k/256) outlier
 * channels (generate.h), σ_w = HEAD_LOGIT_STD / sqrt(E||x||^2) (0.052 at
 * k = 2048) — a constant of k, whatever the seed or --tokens. Heavy tails
 * make ||x_t|| vary, so the measured mean logit std is somewhat below 5.
 * Scaling W scales the quantization error with it, so SQNR and top-1
 * agreement do not depend on this choice; KL does (about quadratically), and
 * this is the spread at which it resembles what a real head sees. The output
 * reports the dense logit std, top-1 probability and entropy measured.
 */
static float head_std(uint32_t k)
{
    double k_out = k / 256u > 2u ? (double)(k / 256u) : 2.0;
    if (k_out > k)
        k_out = k;
    return (float)(HEAD_LOGIT_STD / sqrt((double)k - k_out + 900.0 * k_out));
}

/* y_dense = x W^T of the unquantized W in double, into yd[rows][n]; yt is
 * scratch of the same size. */
static void dense_reference(const vrun *v, const float *w, const float *x, uint32_t rows,
                            uint32_t n, uint32_t k, float *yd, float *yt)
{
    dense_job j = {w, x, rows, n, k, yt};
    /* on the handle's pool: no backend call is running now */
    edgert_parallel_for(v->ctx, n, 64, dense_rows, &j);
    for (uint32_t r0 = 0; r0 < n; r0 += 64) /* yd[t][r] = yt[r][t], in cache-sized tiles */
        for (uint32_t t = 0; t < rows; t++)
            for (uint32_t q = r0; q < n && q < r0 + 64; q++)
                yd[(size_t)t * n + q] = yt[(size_t)q * rows + t];
}

/* ---- the backend's side ------------------------------------------------------------------ */

/* The same W quantized in the backend's layout (seed and std as the dense
 * one), packed by the backend into *p. For the head, the reference also runs
 * it on x into *yr (NULL when it could not: reported as unknown). */
static edgert_status pack_quantized(const vrun *v, const fid_shape *s, uint32_t rows,
                                    uint64_t wseed, float std, const float *x, edgert_packed **p,
                                    float **yr, char *err, size_t err_len)
{
    const uint32_t n = s->n, k = s->k;
    edgert_qtensor qt = {0};
    edgert_packed *pr = NULL;
    char perr[1024] = "";
    edgert_status rc;
    if (s->ck && v->symmetric && edgert_checkpoint_layer_at(s->ck, s->layer)->symmetric < 0) {
        /* a dense layer for a symmetric layout: quantized as pack does for
         * it (edgert_checkpoint_layer_packed: symmetric, groups of 128 or
         * one group when k is smaller); layer_weights would give the
         * asymmetric form, which such a backend refuses */
        float *w = malloc((size_t)n * k * sizeof *w);
        rc = w ? edgert_checkpoint_layer_dense(s->ck, s->layer, 0, n, w, err, err_len)
               : EDGERT_E_NOMEM;
        rc = rc ? rc : edgert_quantize_rtn(w, n, k, k < 128u ? k : 128u, 1, &qt);
        free(w);
        if (rc != EDGERT_OK)
            return rc;
        qt.view.name = s->name;
    } else if (s->ck) { /* the file's own quantized layer, its first n rows */
        rc = edgert_checkpoint_layer_weights_v2(s->ck, s->layer, &qt, err, err_len);
        if (rc != EDGERT_OK)
            return rc;
        qt.view.n = n;
    } else {
        rc = gen_qtensor(v->ctx, n, k, v->group, v->symmetric, wseed, std, &qt);
        if (rc != EDGERT_OK) {
            edgert_errf(err, err_len, "quantizing shape %s (n=%u k=%u): %s", s->name, n, k,
                        edgert_status_name(rc));
            return rc;
        }
        qt.view.name = s->name;
    }
    rc = edgert_pack(v->b, &qt.view, p, perr, sizeof perr);
    /* The head is also run by the reference on the same quantized weights, so
     * agreement with the reference isolates the kernel's own error. */
    if (rc == EDGERT_OK && s->head && !v->self) {
        *yr = malloc((size_t)rows * n * sizeof **yr);
        if (!*yr || edgert_pack(v->ref, &qt.view, &pr, perr, sizeof perr) != EDGERT_OK ||
            verify_gemm(v->ref, pr, rows, x, k, *yr, n, perr, sizeof perr) != EDGERT_OK) {
            free(*yr);
            *yr = NULL; /* reported as unknown (NaN), never as agreement */
        }
    }
    edgert_packed_free(pr);
    edgert_qtensor_free(&qt);
    if (rc != EDGERT_OK)
        edgert_errf(err, err_len, "pack of shape %s (n=%u k=%u) failed: %s", s->name, n, k,
                    perr);
    return rc;
}

/* ---- the measures -------------------------------------------------------------------------- */

/* The head over `tokens` tokens: top-1 agreement and mean KL against dense,
 * what the dense softmax looks like, and top-1 agreement with the reference
 * (yr; NULL: unknown). */
static void head_measures(verify_result *r, const float *yd, const float *yb, const float *yr,
                          uint32_t n, uint32_t k, uint32_t tokens, float std)
{
    size_t agree = 0;
    double kl = 0, lstd = 0, ptop = 0, ent = 0;
    for (uint32_t t = 0; t < tokens; t++) {
        const float *d = yd + (size_t)t * n, *b = yb + (size_t)t * n;
        agree += metric_argmax(d, n) == metric_argmax(b, n);
        kl += metric_kl(d, b, n);
        /* the dense softmax: spread, top probability, entropy */
        double mean = 0, sq = 0, mx = -INFINITY, z = 0, ez = 0;
        for (uint32_t q = 0; q < n; q++) {
            mean += d[q];
            if (d[q] > mx)
                mx = d[q];
        }
        mean /= n;
        for (uint32_t q = 0; q < n; q++) {
            double e = exp((double)d[q] - mx);
            sq += ((double)d[q] - mean) * ((double)d[q] - mean);
            z += e;
            ez += e * ((double)d[q] - mx);
        }
        lstd += sqrt(sq / n);
        ptop += 1.0 / z;
        ent += log(z) - ez / z;
    }
    r->head_n = n;
    r->head_k = k;
    r->tokens = tokens;
    r->top1_agreement = (double)agree / tokens;
    r->kl_mean = kl / tokens;
    r->head_weight_std = std;
    r->head_logit_std = lstd / tokens;
    r->head_dense_top1_prob = ptop / tokens;
    r->head_dense_entropy = ent / tokens;
    r->top1_vs_reference = NAN;
    if (yr) {
        size_t same = 0;
        for (uint32_t t = 0; t < tokens; t++)
            same += metric_argmax(yb + (size_t)t * n, n) == metric_argmax(yr + (size_t)t * n, n);
        r->top1_vs_reference = (double)same / tokens;
    }
}

static float weights_std(const float *w, size_t n)
{
    double s = 0, sq = 0;
    for (size_t i = 0; i < n; i++)
        s += w[i], sq += (double)w[i] * w[i];
    double m = s / (double)n, var = sq / (double)n - m * m;
    return (float)sqrt(var > 0 ? var : 0);
}

/* One projection: dense reference, the backend's output, and the measures:
 * the SQNR row `index` of the table (SIZE_MAX: none), the head's. */
static edgert_status fidelity_one(const vrun *v, const fid_shape *s, uint32_t rows,
                                  uint32_t tokens, size_t index, char *err, size_t err_len)
{
    verify_result *r = v->r;
    const uint32_t n = s->n, k = s->k;
    float std = s->head ? head_std(k) : WEIGHT_STD;
    const uint64_t wseed =
        verify_seed(v->c->seed, 0xF1DE, name_hash(s->name), (uint64_t)n << 32 | k);
    const uint64_t xseed = verify_seed(v->c->seed, 0xAC71, name_hash(s->name), k);
    size_t nk = (size_t)n * k;
    edgert_status rc = EDGERT_OK;
    float *w = NULL, *x = NULL, *yd = NULL, *yb = NULL, *yr = NULL;
    edgert_packed *p = NULL;
    char perr[1024] = "";

    if (nk / k != n || nk > SIZE_MAX / sizeof(float)) {
        edgert_errf(err, err_len, "shape %s (%ux%u) is too large", s->name, n, k);
        return EDGERT_E_NOMEM;
    }
    w = malloc(nk * sizeof *w);
    x = malloc((size_t)rows * k * sizeof *x);
    yd = malloc((size_t)rows * n * sizeof *yd);
    yb = malloc((size_t)rows * n * sizeof *yb);
    if (!w || !x || !yd || !yb) {
        edgert_errf(err, err_len,
                    "out of memory for shape %s (n=%u k=%u: %.2f GiB of fp32 weights)", s->name,
                    n, k, (double)nk * 4.0 / 1073741824.0);
        rc = EDGERT_E_NOMEM;
        goto out;
    }
    verify_progress(v, "fidelity %s (n=%u k=%u): dense fp32 weights", s->name, n, k);
    gen_activations(x, rows, k, xseed);
    if (s->ck) {
        rc = edgert_checkpoint_layer_dense(s->ck, s->layer, 0, n, w, err, err_len);
        if (rc != EDGERT_OK)
            goto out;
        std = weights_std(w, nk);
    } else {
        gen_dense(v->ctx, w, n, k, wseed, std);
    }
    verify_progress(v, "fidelity %s (n=%u k=%u): dense reference in double", s->name, n, k);
    dense_reference(v, w, x, rows, n, k, yd, yb); /* yb is free until the backend runs */
    free(w);
    w = NULL;
    verify_progress(v, "fidelity %s (n=%u k=%u): quantize and pack", s->name, n, k);
    rc = pack_quantized(v, s, rows, wseed, std, x, &p, &yr, err, err_len);
    if (rc != EDGERT_OK)
        goto out;
    verify_progress(v, "fidelity %s (n=%u k=%u): backend gemm, %u tokens", s->name, n, k, rows);
    rc = verify_gemm(v->b, p, rows, x, k, yb, n, perr, sizeof perr);
    if (rc != EDGERT_OK) {
        edgert_errf(err, err_len, "gemm on shape %s (m=%u n=%u k=%u) failed: %s", s->name, rows,
                    n, k, perr);
        goto out;
    }
    if (index < WL_MAX_SHAPES) {
        verify_shape *vs = &r->shapes[index];
        snprintf(vs->name, sizeof vs->name, "%s", s->name);
        vs->m = SQNR_TOKENS;
        vs->n = n;
        vs->k = k;
        vs->sqnr_db = metric_sqnr_db(yd, yb, (size_t)SQNR_TOKENS * n);
        if (index + 1 > r->nshapes)
            r->nshapes = index + 1;
    }
    if (s->head)
        head_measures(r, yd, yb, yr, n, k, tokens, std);
out:
    edgert_packed_free(p);
    free(yr);
    free(w);
    free(x);
    free(yd);
    free(yb);
    return rc;
}

edgert_status verify_fidelity(vrun *v, const workload *wl, char *err, size_t err_len)
{
    const cli *c = v->c;
    fid_shape list[WL_MAX_SHAPES + 1];
    size_t count = 0;
    int have_head = 0;
    for (size_t i = 0; i < wl->nshapes && count < WL_MAX_SHAPES; i++) {
        const wl_shape *s = &wl->shapes[i];
        fid_shape f = {s->name, s->n, s->k, s->head && !have_head, wl->ck,
                       wl->ck ? wl->layers[i][0] : 0};
        if (f.head) {
            have_head = 1;
            if (c->quick && f.n > QUICK_HEAD_N)
                f.n = QUICK_HEAD_N;
        } else if (c->quick && (uint64_t)s->n * s->k > QUICK_MAX_WEIGHTS) {
            continue;
        }
        list[count++] = f;
    }
    size_t table = count;
    if (!have_head) /* a head-shaped projection outside the SQNR table */
        list[count++] = (fid_shape){"head", c->quick ? QUICK_HEAD_N : HEAD_N, HEAD_K, 1, NULL, 0};
    v->r->head_source = have_head ? "file" : "generated"; /* said beside the figures */
    uint32_t tokens = c->tokens ? c->tokens : 64;
    v->r->nshapes = 0;
    v->r->sqnr_min_db = NAN;
    for (size_t i = 0; i < count; i++) {
        uint32_t rows = list[i].head ? (tokens > SQNR_TOKENS ? tokens : SQNR_TOKENS) : SQNR_TOKENS;
        edgert_status rc = fidelity_one(v, &list[i], rows, tokens, i < table ? i : SIZE_MAX, err,
                                        err_len);
        if (rc != EDGERT_OK)
            return rc;
    }
    double mn = INFINITY;
    for (size_t i = 0; i < v->r->nshapes; i++)
        if (!(v->r->shapes[i].sqnr_db >= mn)) /* NaN propagates */
            mn = v->r->shapes[i].sqnr_db;
    v->r->sqnr_min_db = v->r->nshapes ? mn : NAN;
    return EDGERT_OK;
}
