/*
 * tests/runner/test_gptq_math.c — GPTQ's arithmetic (runner/gptq.h) against
 * double-precision loops written here, over odd shapes.
 *
 *  - the GEMM tile, every set this CPU runs (the AVX2 one reported skipped
 *    without AVX2 and FMA): R, C, T of 1, 3, 4, 17, 130, 300 (the 4 x 16
 *    tiles whole and cut, the 128-column and 256-deep cache blocks crossed),
 *    up to 3 million products (200,000 under qemu: the same shapes but the
 *    largest, in a tenth of the time);
 *  - gq_prepare's factor: (H / rows + damp I) U^T U = I, k from 1 to 200
 *    (the 64-wide blocks whole and cut); a dead channel decoupled; a NaN
 *    refused;
 *  - gq_quantize: with no factor, the round-to-nearest codes of
 *    edgert_quantize_rtn (symmetric: the same rules); every code within
 *    s / 2 of its (updated) weight, zero points 1 to 15; with the factor,
 *    the output error on held-out inputs of the same distribution at least
 *    2 dB under round to nearest's (inputs with real activations' spread:
 *    channel scales log-normal, a correlated part carrying most of the
 *    variance), groups of 32 and 64,
 *    K a multiple of them and not; the same bytes on 1 and 2 threads.
 *
 * Tolerances, derived: a sum of T fp32 products in any order is within
 * (T + 2) u S of the exact one, u = 2^-24, S the sum of |terms|. The
 * factor: U comes from a Cholesky factorization and a triangular inverse of
 * a k x k matrix whose condition number kappa is computed here; each
 * carries a backward error of a few k u, amplified by kappa in the
 * product, so |H U^T U - I| <= 4 k kappa u (kappa under 1e4 here: the
 * dampening of 1% of the mean diagonal bounds it by 100 (max/mean diag)).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "edgert/edgert.h"
#include "gptq.h"
#include "test_util.h"

#define U_ (1.0 / 16777216.0)

static edgert_ctx *open_ctx(unsigned threads)
{
    static const char *none[] = {EDGERT_TEST_FIXTURES "/manifests/good"}; /* none loaded */
    edgert_options o = {.struct_size = sizeof o, .ignore_env = 1, .no_evidence = 1,
                        .defer_load = 1, .threads = threads, .manifest_paths = none,
                        .manifest_path_count = 1};
    edgert_ctx *ctx = NULL;
    char err[1024] = "";
    if (edgert_open(&o, &ctx, err, sizeof err) != EDGERT_OK)
        fail_msg("edgert_open: %s", err);
    return ctx;
}

static uint64_t rng_state = 88172645463325252ull;
static double unif(void) /* [0, 1) */
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}
static double gauss(void)
{
    double a = unif() + 1e-300, b = unif();
    return sqrt(-2 * log(a)) * cos(2 * M_PI * b);
}

/* ---- the tile ------------------------------------------------------------------------ */

static void check_gemm(gq_tile_fn tile, size_t R, size_t C, size_t T)
{
    size_t ar = T + 3, ldb = C + 5, ldc = C + 1; /* strides past the shapes */
    float *A = malloc(R * ar * sizeof *A), *B = malloc(T * ldb * sizeof *B);
    float *Cm = malloc(R * ldc * sizeof *Cm);
    assert_non_null(A), assert_non_null(B), assert_non_null(Cm);
    for (size_t i = 0; i < R * ar; i++)
        A[i] = (float)gauss();
    for (size_t i = 0; i < T * ldb; i++)
        B[i] = (float)gauss();
    for (size_t i = 0; i < R * ldc; i++)
        Cm[i] = (float)gauss();
    float *C0 = malloc(R * ldc * sizeof *C0);
    memcpy(C0, Cm, R * ldc * sizeof *C0);
    gq_gemm(tile, R, C, T, A, ar, 1, B, ldb, Cm, ldc);
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < C; c++) {
            double s = C0[r * ldc + c], S = fabs(s);
            for (size_t t = 0; t < T; t++) {
                s += (double)A[r * ar + t] * B[t * ldb + c];
                S += fabs((double)A[r * ar + t] * B[t * ldb + c]);
            }
            double bound = (T + 3) * U_ * S + 1e-30;
            if (fabs(Cm[r * ldc + c] - s) > bound)
                fail_msg("R=%zu C=%zu T=%zu [%zu][%zu]: %.9g, exact %.9g (bound %.3g)", R, C, T,
                         r, c, (double)Cm[r * ldc + c], s, bound);
        }
    for (size_t r = 0; r < R; r++) /* the columns past C untouched */
        for (size_t c = C; c < ldc; c++)
            assert_true(Cm[r * ldc + c] == C0[r * ldc + c]);
    free(A), free(B), free(Cm), free(C0);
}

static void gemm_set(gq_tile_fn tile)
{
    static const size_t sz[] = {1, 3, 4, 17, 130, 300};
    for (size_t a = 0; a < 6; a++)
        for (size_t b = 0; b < 6; b++)
            for (size_t c = 0; c < 6; c++)
                if (sz[a] * sz[b] * sz[c] <= (EDGERT_TEST_EMULATED ? 200000u : 3000000u))
                    check_gemm(tile, sz[a], sz[b], sz[c]);
}

static void test_gemm_portable(void **state)
{
    (void)state;
    gemm_set(gq_tile_portable);
}

static void test_gemm_avx2(void **state)
{
    (void)state;
#if defined(__x86_64__)
    edgert_ctx *ctx = open_ctx(1);
    uint64_t f = edgert_device_facts(ctx)->cpu_flags;
    edgert_close(ctx);
    if (!((f >> EDGERT_CPU_AVX2 & 1u) && (f >> EDGERT_CPU_FMA & 1u)))
        tu_skip("the AVX2 tile: this CPU lacks AVX2 or FMA");
    gemm_set(gq_tile_avx2);
#else
    tu_skip("the AVX2 tile is x86-64's");
#endif
}

/* ---- the factor ---------------------------------------------------------------------- */

/* X[rows][k]: channel scales log-normal (sigma 1), a rank-k/8 correlated
 * part with 80% of the variance (with half, GPTQ gains 1.4 dB here: the
 * gain is the inputs' correlation, which real activations have more of);
 * dead: that channel 0 in every row. */
static float *inputs(size_t rows, uint32_t k, const float *scale, const float *mix, int dead)
{
    uint32_t r = k / 8 ? k / 8 : 1;
    float *X = malloc(rows * k * sizeof *X), *z = malloc(r * sizeof *z);
    assert_non_null(X), assert_non_null(z);
    for (size_t t = 0; t < rows; t++) {
        for (uint32_t j = 0; j < r; j++)
            z[j] = (float)gauss();
        for (uint32_t i = 0; i < k; i++) {
            double v = sqrt(0.2) * gauss();
            for (uint32_t j = 0; j < r; j++)
                v += mix[(size_t)i * r + j] * z[j] * sqrt(0.8 / r);
            X[t * k + i] = (int)i == dead ? 0.0f : (float)(v * scale[i]);
        }
    }
    free(z);
    return X;
}

typedef struct dist {
    float *scale, *mix;
} dist;

static dist make_dist(uint32_t k)
{
    uint32_t r = k / 8 ? k / 8 : 1;
    dist d = {malloc(k * sizeof(float)), malloc((size_t)k * r * sizeof(float))};
    for (uint32_t i = 0; i < k; i++)
        d.scale[i] = (float)exp(gauss());
    for (size_t i = 0; i < (size_t)k * r; i++)
        d.mix[i] = (float)gauss();
    return d;
}

static void free_dist(dist *d)
{
    free(d->scale);
    free(d->mix);
}

static void check_factor(edgert_ctx *ctx, uint32_t k, int dead)
{
    size_t rows = 4 * (size_t)k + 16;
    dist d = make_dist(k);
    float *X = inputs(rows, k, d.scale, d.mix, dead);
    float *H = calloc((size_t)k * k, sizeof *H), *scratch = malloc((size_t)k * k * sizeof *H);
    double *Hd = calloc((size_t)k * k, sizeof *Hd);
    assert_non_null(H), assert_non_null(scratch), assert_non_null(Hd);
    gq_hessian_add(ctx, H, k, X, rows, k);
    for (uint32_t i = 0; i < k; i++) /* the exact sums, both triangles */
        for (uint32_t j = 0; j < k; j++) {
            double s = 0, S = 0;
            for (size_t t = 0; t < rows; t++) {
                s += (double)X[t * k + i] * X[t * k + j];
                S += fabs((double)X[t * k + i] * X[t * k + j]);
            }
            Hd[(size_t)i * k + j] = s / rows;
            if (j >= i && fabs(H[(size_t)i * k + j] - s) > (rows + 2) * U_ * S)
                fail_msg("k=%u: H[%u][%u] = %.9g, exact %.9g", k, i, j,
                         (double)H[(size_t)i * k + j], s);
        }
    gq_prep p;
    assert_int_equal(gq_prepare(ctx, H, k, rows, 0.01, scratch, &p), 0);
    assert_int_equal(p.dead, dead >= 0 ? 1 : 0);
    double mean = 0, dmax = 0;
    for (uint32_t i = 0; i < k; i++) {
        mean += Hd[(size_t)i * k + i] / k;
        dmax = fmax(dmax, Hd[(size_t)i * k + i]);
    }
    assert_true(fabs(p.damp - 0.01 * mean) <= 1e-5 * p.damp);
    for (uint32_t i = 0; i < k; i++)
        Hd[(size_t)i * k + i] += p.damp;
    double kappa = (dmax + p.damp) / p.damp, tol = 4.0 * k * kappa * U_ + 1e-6, worst = 0;
    for (uint32_t i = 0; i < k; i++) /* U upper, (H + damp I) U^T U = I */
        for (uint32_t j = 0; j < k; j++) {
            if (j < i)
                assert_true(H[(size_t)i * k + j] == 0.0f);
            double s = 0;
            for (uint32_t a = 0; a < k; a++) {
                double uu = 0; /* (U^T U)[a][j] */
                for (uint32_t b = 0; b <= (a < j ? a : j); b++)
                    uu += (double)H[(size_t)b * k + a] * H[(size_t)b * k + j];
                s += Hd[(size_t)i * k + a] * uu;
            }
            worst = fmax(worst, fabs(s - (i == j)));
        }
    if (worst > tol)
        fail_msg("k=%u: |H U^T U - I| = %.3g past %.3g (kappa <= %.3g)", k, worst, tol, kappa);
    for (uint32_t j = 0; dead >= 0 && j < k; j++) /* decoupled: nothing spread to or from it */
        if (j != (uint32_t)dead)
            assert_true(H[(size_t)dead * k + j] == 0.0f && H[(size_t)j * k + dead] == 0.0f);
    free(X), free(H), free(scratch), free(Hd);
    free_dist(&d);
}

static void test_factor(void **state)
{
    (void)state;
    edgert_ctx *ctx = open_ctx(2);
    static const uint32_t ks[] = {1, 3, 17, 64, 65, 130, 200};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        check_factor(ctx, ks[i], -1);
    check_factor(ctx, 70, 5);
    check_factor(ctx, 130, 129);
    edgert_close(ctx);
}

static void test_factor_nan(void **state)
{
    (void)state;
    edgert_ctx *ctx = open_ctx(2);
    uint32_t k = 20;
    float *H = calloc(k * k, sizeof *H), *scratch = malloc(k * k * sizeof *H);
    for (uint32_t i = 0; i < k; i++)
        H[i * k + i] = 1;
    H[3 * k + 7] = NAN;
    gq_prep p;
    assert_int_equal(gq_prepare(ctx, H, k, 1, 0.01, scratch, &p), -1);
    assert_int_equal(p.retries, 4);
    free(H), free(scratch);
    edgert_close(ctx);
}

/* ---- the quantization ------------------------------------------------------------------ */

static float *weights(uint32_t n, uint32_t k)
{
    float *W = malloc((size_t)n * k * sizeof *W);
    assert_non_null(W);
    for (size_t i = 0; i < (size_t)n * k; i++)
        W[i] = (float)(gauss() / sqrt(k));
    return W;
}

static edgert_qtensor empty(uint32_t n, uint32_t k, uint32_t group, int sym, const float *W)
{
    edgert_qtensor q; /* the layout and buffers, by the library's own allocator */
    assert_int_equal(edgert_quantize_rtn(W, n, k, group, sym, &q), EDGERT_OK);
    memset(q.codes, 0xA5, (size_t)n * ((k + 1) / 2)); /* every nibble must be written */
    return q;
}

static void test_rtn_rules(void **state)
{
    (void)state;
    edgert_ctx *ctx = open_ctx(2);
    uint32_t n = 17, k = 200, group = 64; /* a last group of 8 */
    float *W = weights(n, k), *Wc = malloc((size_t)n * k * sizeof *Wc);
    edgert_qtensor ref, q;
    assert_int_equal(edgert_quantize_rtn(W, n, k, group, 1, &ref), EDGERT_OK);
    q = empty(n, k, group, 1, W);
    memcpy(Wc, W, (size_t)n * k * sizeof *W);
    gq_quantize(ctx, Wc, NULL, &q);
    assert_memory_equal(q.codes, ref.codes, (size_t)n * ((k + 1) / 2));
    assert_memory_equal(q.scales, ref.scales, (size_t)n * 4 * sizeof(float));
    edgert_qtensor_free(&q);
    q = empty(n, k, group, 0, W); /* asymmetric: GPTQ v1's z >= 1 */
    memcpy(Wc, W, (size_t)n * k * sizeof *W);
    gq_quantize(ctx, Wc, NULL, &q);
    float *D = malloc((size_t)n * k * sizeof *D);
    edgert_dequantize(&q.view, D);
    for (uint32_t r = 0; r < n; r++)
        for (uint32_t g = 0; g < 4; g++) {
            unsigned z = q.zeros[r * 4 + g];
            float s = q.scales[r * 4 + g];
            assert_true(z >= 1 && z <= 15);
            for (uint32_t c = g * group; c < k && c < (g + 1) * group; c++)
                assert_true(fabs(D[r * k + c] - W[r * k + c]) <= s * (0.5 + 4 * U_));
        }
    edgert_qtensor_free(&q), edgert_qtensor_free(&ref);
    free(W), free(Wc), free(D);
    edgert_close(ctx);
}

/* sum over rows of (w - q)^T X^T X (w - q) / sum of w^T X^T X w, in double */
static double rel_err(const float *W, const float *Q, uint32_t n, uint32_t k, const float *X,
                      size_t rows)
{
    double e = 0, sig = 0;
    for (size_t t = 0; t < rows; t++)
        for (uint32_t r = 0; r < n; r++) {
            double y = 0, d = 0;
            for (uint32_t c = 0; c < k; c++) {
                y += (double)W[(size_t)r * k + c] * X[t * k + c];
                d += ((double)W[(size_t)r * k + c] - Q[(size_t)r * k + c]) * X[t * k + c];
            }
            e += d * d, sig += y * y;
        }
    return e / sig;
}

static void check_gain(uint32_t n, uint32_t k, uint32_t group, int sym)
{
    edgert_ctx *ctx1 = open_ctx(1), *ctx2 = open_ctx(2);
    size_t rows = 8 * (size_t)k, held = 2 * (size_t)k;
    dist d = make_dist(k);
    float *X = inputs(rows, k, d.scale, d.mix, -1), *Xh = inputs(held, k, d.scale, d.mix, -1);
    float *W = weights(n, k), *H = calloc((size_t)k * k, sizeof *H);
    float *scratch = malloc((size_t)k * k * sizeof *H), *Wg = malloc((size_t)n * k * 4);
    float *Wr = malloc((size_t)n * k * 4), *Dg = malloc((size_t)n * k * 4);
    float *Dr = malloc((size_t)n * k * 4);
    gq_hessian_add(ctx2, H, k, X, rows, k);
    gq_prep p;
    assert_int_equal(gq_prepare(ctx2, H, k, rows, 0.01, scratch, &p), 0);
    edgert_qtensor g1 = empty(n, k, group, sym, W), g2 = empty(n, k, group, sym, W);
    edgert_qtensor r = empty(n, k, group, sym, W);
    memcpy(Wg, W, (size_t)n * k * 4);
    gq_quantize(ctx1, Wg, H, &g1);
    memcpy(Wg, W, (size_t)n * k * 4);
    gq_quantize(ctx2, Wg, H, &g2);
    size_t G = (k + group - 1) / group; /* one thread or two: the same bytes */
    assert_memory_equal(g1.codes, g2.codes, (size_t)n * ((k + 1) / 2));
    assert_memory_equal(g1.scales, g2.scales, (size_t)n * G * sizeof(float));
    memcpy(Wr, W, (size_t)n * k * 4);
    gq_quantize(ctx2, Wr, NULL, &r);
    edgert_dequantize(&g1.view, Dg);
    edgert_dequantize(&r.view, Dr);
    double eg = rel_err(W, Dg, n, k, Xh, held), er = rel_err(W, Dr, n, k, Xh, held);
    double gain = 10 * log10(er / eg);
    print_message("n=%u k=%u group %u %s: held-out SQNR %.2f dB by round to nearest, %.2f by "
                  "GPTQ (%+.2f)\n", n, k, group, sym ? "sym" : "asym", -10 * log10(er),
                  -10 * log10(eg), gain);
    if (!(gain >= 2.0))
        fail_msg("GPTQ gains %.2f dB over round to nearest on held-out inputs, under 2", gain);
    edgert_qtensor_free(&g1), edgert_qtensor_free(&g2), edgert_qtensor_free(&r);
    free(X), free(Xh), free(W), free(H), free(scratch), free(Wg), free(Wr), free(Dg), free(Dr);
    free_dist(&d);
    edgert_close(ctx1), edgert_close(ctx2);
}

static void test_gain(void **state)
{
    (void)state;
    check_gain(64, 256, 64, 0);
    check_gain(33, 256, 32, 1);
    check_gain(17, 200, 64, 0); /* K not a multiple of the group */
    check_gain(1, 96, 32, 1);   /* one row */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_portable), cmocka_unit_test(test_gemm_avx2),
        cmocka_unit_test(test_factor),        cmocka_unit_test(test_factor_nan),
        cmocka_unit_test(test_rtn_rules),     cmocka_unit_test(test_gain),
    };
    return tu_run_group("test_gptq_math", tests, NULL, NULL);
}
