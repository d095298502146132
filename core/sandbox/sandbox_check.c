/*
 * core/sandbox/sandbox_check.c — first contact's arithmetic check, run in the
 * child (sandbox.c) once the plugin loaded and passed its own self-test, and
 * before the quick measurement. A self-test is the plugin's word about its
 * arithmetic; this is the core's: a kernel whose self-test checks nothing
 * (a vendor's walkthrough: the last group of K skipped, "loaded and
 * self-tested", selected, and only `edgert verify` saw 191 of 196 cases
 * wrong) is WRONG_RESULTS here, with its first bad output named, and never
 * loaded in-process. The verdict is cached with the others.
 *
 * The core draws the weights, in the manifest's own layout (its group, 128
 * when it has none; zero points only when it is asymmetric), 37 rows (odd:
 * no tile's multiple) with what a kernel gets wrong at the edges: a row of
 * code 0, a row of code 15, a row alternating the two, a group whose scale
 * is 0 and a row of large scales (8.0), the rest drawn at random; every
 * scale rounded through fp16, as checkpoints store them, so a layout with
 * fp16 scales holds them exactly. K is two groups, and, where the manifest
 * says partial_groups, two and a half groups plus one (odd: the padding
 * nibble). Activations in [-1, 1) (the first token: M = 1 sees no
 * outlier, so that a coarse form's bound, int8's, still catches a group
 * left out), every odd token with outlier channels (x40), an all-zero
 * token, one scaled by 2^-10, one outlier of 1000. The GEMM runs at M = 1, 3,
 * 17 and 64 (the thresholds where kernels change path lie among them), with
 * NaN in each row's ldx padding and sentinels in each y row's ldy padding.
 *
 * Each output is compared with the exact sum, in double, over the weights
 * as dequantized exactly, under the bound core/common/tolerance.h derives
 * from the manifest's activation type (the model `edgert verify` judges by;
 * for int8 the bound every int8 form meets, per token or finer, where
 * verify emulates the per-token one): no figure picked to pass. An output
 * over its bound, NaN or infinite, a write past n, or a GEMM that fails is
 * WRONG_RESULTS. A pack that refuses
 * the core's weights leaves the check not run (said by the quick
 * measurement's warning when it refuses the manifest's layout outright),
 * as for a plugin without a GEMM. Cost: at most 8 GEMM calls on 37 rows of
 * two and a half groups, well under a millisecond of a real kernel's time.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tolerance.h"
#include "formats/safetensors.h" /* st_f32_to_f16: scales as checkpoints hold them */
#include "sandbox/sandbox.h"

#define CK_N 37u
#define CK_TOKENS 64u
#define CK_LDX_PAD 3u
#define CK_LDY_PAD 5u
#define CK_SENTINEL -7777.25f

/* The core's weights of one K: the canonical tensor, and in double the exact
 * weights s (q - z) and their |s| (q + z), which the bound needs. */
typedef struct ck_weights {
    uint32_t k, group;
    uint8_t *codes;
    float *scales;
    uint8_t *zeros;
    double *wd, *wz;
    edgert_qweights view;
} ck_weights;

static uint64_t ck_next(uint64_t *x)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

static void ck_free(ck_weights *w)
{
    free(w->codes);
    free(w->scales);
    free(w->zeros);
    free(w->wd);
    free(w->wz);
    memset(w, 0, sizeof *w);
}

/* The code of row r, column c (the edge rows first, then random). */
static unsigned ck_code(uint32_t r, uint32_t c, uint64_t *x)
{
    if (r == 0u)
        return 0u;
    if (r == 1u)
        return 15u;
    if (r == 2u)
        return c & 1u ? 15u : 0u;
    return (unsigned)(ck_next(x) >> 60);
}

/* The scale of row r, group g: 0 for row 3's first group, 8 for row 4,
 * else in [0.005, 0.05); rounded through fp16. */
static float ck_scale(uint32_t r, uint32_t g, uint64_t *x)
{
    float s = r == 3u && g == 0u ? 0.0f
              : r == 4u          ? 8.0f
                                 : 0.005f + 0.045f * (float)(ck_next(x) >> 40) * 0x1p-24f;
    return st_f16_to_f32(st_f32_to_f16(s));
}

static int ck_make(ck_weights *w, uint32_t k, uint32_t group, int symmetric)
{
    const uint32_t groups = (k + group - 1u) / group, stride = (k + 1u) / 2u;
    memset(w, 0, sizeof *w);
    w->k = k;
    w->group = group;
    w->codes = calloc((size_t)CK_N * stride, 1);
    w->scales = malloc((size_t)CK_N * groups * sizeof *w->scales);
    w->zeros = symmetric ? NULL : malloc((size_t)CK_N * groups);
    w->wd = malloc((size_t)CK_N * k * sizeof *w->wd);
    w->wz = malloc((size_t)CK_N * k * sizeof *w->wz);
    if (!w->codes || !w->scales || (!symmetric && !w->zeros) || !w->wd || !w->wz)
        return -1;
    uint64_t x = 0x243F6A8885A308D3ull ^ k;
    for (uint32_t r = 0; r < CK_N; r++)
        for (uint32_t g = 0; g < groups; g++) {
            w->scales[(size_t)r * groups + g] = ck_scale(r, g, &x);
            if (w->zeros) /* 0 and 15 among them: the first groups of rows 5 and 6 */
                w->zeros[(size_t)r * groups + g] = r == 5u && g == 0u   ? 0u
                                                   : r == 6u && g == 0u ? 15u
                                                   : (uint8_t)(ck_next(&x) >> 60);
        }
    for (uint32_t r = 0; r < CK_N; r++)
        for (uint32_t c = 0; c < k; c++) {
            unsigned q = ck_code(r, c, &x);
            w->codes[(size_t)r * stride + c / 2u] |= (uint8_t)(c & 1u ? q << 4 : q);
            size_t gi = (size_t)r * groups + c / group;
            double s = (double)w->scales[gi];
            int z = w->zeros ? w->zeros[gi] : 8;
            w->wd[(size_t)r * k + c] = s * ((double)q - z);
            w->wz[(size_t)r * k + c] = fabs(s) * ((double)q + z);
        }
    w->view = (edgert_qweights){.struct_size = sizeof(edgert_qweights), .n = CK_N, .k = k,
                                .group = group, .codes = w->codes, .scales = w->scales,
                                .zeros = w->zeros, .name = "first contact's arithmetic check"};
    return 0;
}

/* CK_TOKENS rows of k activations at stride ldx, NaN in the padding. */
static void ck_activations(float *x, uint32_t k, size_t ldx)
{
    uint64_t s = 0x13198A2E03707344ull ^ k;
    for (uint32_t i = 0; i < CK_TOKENS; i++) {
        float *row = x + (size_t)i * ldx;
        for (uint32_t c = 0; c < k; c++) {
            float v = (float)(ck_next(&s) >> 40) * 0x1p-23f - 1.0f; /* [-1, 1) */
            if ((i & 1u) && (c % 37u == 5u || c % 61u == 17u))
                v *= 40.0f; /* outlier channels, as real activations have */
            row[c] = i == 2u ? 0.0f : i == 4u ? v * 0x1p-10f : v;
        }
        if (i == 6u)
            row[k / 2u] = 1000.0f;
        for (size_t c = k; c < ldx; c++)
            row[c] = NAN; /* a kernel reading past k poisons its output */
    }
}

/* Say the first failure into r (WRONG_RESULTS); -1. */
static int ck_fail(sb_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int ck_fail(sb_result *r, const char *fmt, ...)
{
    va_list ap;
    r->gate = ER_GATE_WRONG_RESULTS;
    snprintf(r->reason, sizeof r->reason, "WRONG_RESULTS");
    int n = snprintf(r->detail, sizeof r->detail, "the core's arithmetic check: ");
    va_start(ap, fmt);
    vsnprintf(r->detail + n, sizeof r->detail - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* Judge the m rows of y against the exact sums; 0, or -1 with r's reason. */
static int ck_judge(const er_tol_model *tm, const ck_weights *w, uint32_t m, const float *xr,
                    const double *dx, const float *y, size_t ldy, sb_result *r)
{
    const uint32_t k = w->k;
    for (uint32_t i = 0; i < m; i++) {
        for (size_t c = CK_N; c < ldy; c++)
            if (memcmp(&y[i * ldy + c], &(float){CK_SENTINEL}, sizeof(float)) != 0)
                return ck_fail(r, "m=%u n=%u k=%u: the GEMM wrote y[%u][%zu], past n (ldy %zu)",
                               m, CK_N, k, i, c, ldy);
        for (uint32_t o = 0; o < CK_N; o++) {
            er_tol_sums t;
            er_tol_sums_of(tm, xr + (size_t)i * k, dx ? dx + (size_t)i * k : NULL,
                           w->wd + (size_t)o * k, w->wz + (size_t)o * k, k, &t);
            double got = (double)y[i * ldy + o], e = fabs(got - t.y);
            double tol = er_tol_vs_exact(k, &t);
            r->checked_outputs++;
            if (!isfinite(got) || e > tol)
                return ck_fail(r, "m=%u n=%u k=%u group %u: y[%u][%u] = %.9g, exact %.9g "
                               "(|err| %.3g > tolerance %.3g, %s activations)", m, CK_N, k,
                               w->group, i, o, got, t.y, e, tol, tm->dtype);
        }
    }
    return 0;
}

/* The check on one K: pack, then each M. 0 passed (or not run: the pack
 * refused), -1 failed with r's reason. */
static int ck_one_k(er_cand *c, const er_tol_model *tm, uint32_t k, uint32_t group, sb_result *r)
{
    static const uint32_t ms[] = {1u, 3u, 17u, CK_TOKENS};
    const size_t ldx = (size_t)k + CK_LDX_PAD, ldy = CK_N + CK_LDY_PAD;
    ck_weights w;
    void *packed = NULL;
    size_t bytes = 0;
    char err[256] = "";
    float *x = malloc(CK_TOKENS * ldx * sizeof *x), *y = malloc(CK_TOKENS * ldy * sizeof *y);
    float *xr = malloc((size_t)CK_TOKENS * k * sizeof *xr);
    double *dx = calloc((size_t)CK_TOKENS * k, sizeof *dx);
    int rc = 0;
    if (ck_make(&w, k, group, c->m.symmetric) != 0 || !x || !y || !xr || !dx)
        goto out; /* no memory for it: not run (the child's own state is at stake) */
    ck_activations(x, k, ldx);
    for (uint32_t i = 0; i < CK_TOKENS; i++)
        er_tol_token(tm, x + i * ldx, k, group, xr + (size_t)i * k, dx + (size_t)i * k);
    if (c->plugin->pack(c->state, &w.view, &packed, &bytes, err, sizeof err) != EDGERT_OK)
        goto out;
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0] && rc == 0; mi++) {
        for (size_t i = 0; i < CK_TOKENS * ldy; i++)
            y[i] = CK_SENTINEL;
        edgert_gemm_args a = {.struct_size = sizeof a, .m = ms[mi], .x = x, .ldx = ldx, .y = y,
                              .ldy = ldy};
        err[0] = '\0';
        edgert_status st = c->plugin->gemm(c->state, packed, &a, err, sizeof err);
        err[sizeof err - 1] = '\0';
        if (st != EDGERT_OK)
            rc = ck_fail(r, "m=%u n=%u k=%u: the GEMM failed: %s%s%s", ms[mi], CK_N, k,
                         edgert_status_name(st), err[0] ? ": " : "", err);
        else
            rc = ck_judge(tm, &w, ms[mi], xr, tm->kind == ER_TOL_FP32 ? NULL : dx, y, ldy, r);
    }
    c->plugin->packed_free(c->state, packed);
out:
    ck_free(&w);
    free(x);
    free(y);
    free(xr);
    free(dx);
    return rc;
}

int er_sb_check_arithmetic(er_cand *c, sb_result *r)
{
    if (!(c->plugin->caps & EDGERT_CAP_GEMM) || !c->plugin->gemm)
        return 0; /* nothing of it computes here */
    const char *dtype = c->pub.effective_activation_dtype ? c->pub.effective_activation_dtype
                                                          : c->m.activation_dtype;
    er_tol_model tm;
    char err[300];
    if (er_tol_model_for(c->m.name, dtype, c->m.activation_bits, c->m.activation_group_size, 0u,
                         &tm, err, sizeof err) != 0)
        return ck_fail(r, "%s", err); /* no bound: not judged, so not trusted */
    const uint32_t g = c->m.group_size > 0 ? (uint32_t)c->m.group_size : 128u;
    if (ck_one_k(c, &tm, 2u * g, g, r) != 0)
        return -1;
    if (c->m.partial_groups && ck_one_k(c, &tm, 2u * g + g / 2u + 1u, g, r) != 0)
        return -1;
    return 0;
}
