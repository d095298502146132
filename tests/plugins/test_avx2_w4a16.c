/*
 * tests/plugins/test_avx2_w4a16.c — the vendor example avx2-w4a16
 * (examples/vendor-plugin) through the public API (edgert_open /
 * edgert_backend_open / edgert_pack / edgert_gemm): every forced path against
 * the reference backend ref-w4a16 and against an exact (double) sum, on odd
 * shapes; its refusals; its packed bytes mapped back (plugin ABI 2, the
 * cases of tests/test_packed.h); `edgert verify` on it end to end.
 *
 * Each path is its own case; a path whose CPU flag this machine lacks is
 * reported skipped (tu_skip: "SKIPPED: test_avx2_w4a16: ...: <the flag>"),
 * never passed. Path avxvnni (AVX-VNNI, VEX-encoded) also runs as the
 * test-only build avx2-w4a16-evex (tests/CMakeLists.txt): the same sources
 * with the EVEX encoding of the same instructions on ymm (AVX512_VNNI +
 * AVX512VL), so its kernels are checked on AVX-512 CPUs without AVX-VNNI.
 * Length: over 700 lines because one backend's three paths are each run on
 * every shape family (groups of 128, 64 and 32, decode and prefill), with
 * its refusals and its mapped bytes, all against one fixture and bound.
 *
 * Tolerance, per output y[i][r] (derivation; the plugin's self-test uses the
 * same bound, examples/vendor-plugin/a2_selftest.c), with w_k = s (q_k - z)
 * the exact weight and x~ the activation as the kernel sees it:
 *   - activations: per block b of 128 inputs (whatever the weights' group:
 *     128, 64 or 32; the last block cut at k), integers a = round(x 2^sh)
 *     with m_b 2^sh in [2^13, 2^14) (m_b = max |x| of the block), so
 *     |a 2^-sh - x| <= 2^-sh <= 2^-13 m_b (the clamp of +16384 included):
 *     the output moves by at most sum_k 2^-13 m_b(k) |w_k|; and
 *     |x~| <= 2 |x| (rounding to nearest). Integer group sums are exact.
 *   - the scale is stored with 20 significant bits: 2^-20 sum |x~ w|
 *     <= 2^-19 sum |x w|.
 *   - fp32 after the integer sums: per weight group at most 3 roundings
 *     (int32 -> fp32, the scale's multiply(-add), the zero point's) and per
 *     block of 128 inputs at most 2 more (the prefill's combination of its
 *     groups, the add into the row's sum), each of a value no larger than
 *     sum_k 2 * 15 |x~_k s_k|: for G groups in B blocks
 *     (3 G + 2 B) 2^-24 * 4 * sum_k 15 |x_k s_k|.
 *   Against ref-w4a16 add its own fp32 error: Higham's (K + 2) 2^-24 sum |x w|
 *   for a dot product of K terms in any order.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h> /* cmocka needs these before its header */
#include <cmocka.h>

#include "edgert/edgert.h"
#include "generate.h"
#include "common/internal.h" /* er_yaml, for test_cli_util.h */
#include "test_util.h"
#include "test_cli_util.h"
#include "test_fake_host.h"
#include "test_packed.h"

#define A2 "avx2-w4a16"
#define A2_EVEX "avx2-w4a16-evex"
#define A2_PANEL 16u
#define A2_BLOCK_BYTES 1088u /* per (panel of 16 columns, group of 128) */
#define A2_HEADERS 256u      /* the handle's 128 bytes, the packed bytes' header's 128 */

typedef struct path_def {
    const char *backend; /* plugin name */
    const char *option;
    const char *name; /* what describe() says */
    edgert_cpu_flag flags[2];
    const char *flag_names[2];
    unsigned nflags;
} path_def;

static const path_def paths[] = {
    {A2, "path=avx2", "avx2: AVX2", {EDGERT_CPU_AVX2, EDGERT_CPU_FMA}, {"avx2", "fma"}, 2},
    {A2, "path=avxvnni", "avxvnni: AVX-VNNI", {EDGERT_CPU_AVX_VNNI}, {"avx_vnni"}, 1},
    {A2_EVEX, "path=avxvnni", "EVEX-encoded test build",
     {EDGERT_CPU_AVX512_VNNI, EDGERT_CPU_AVX512VL}, {"avx512_vnni", "avx512vl"}, 2},
};

typedef struct fx {
    edgert_ctx *ctx;
    edgert_backend *ref;
    char *evex_dir; /* the EVEX test build's manifest */
    size_t pi;      /* the path of a per-path case: paths[pi] */
} fx;

/* Per-path cases: the case's own setup picks the path, the case is named
 * "<function>[<path>]". */
#define PATH_SETUP(tag, index)                                                                    \
    static int on_##tag(void **state)                                                             \
    {                                                                                             \
        ((fx *)*state)->pi = (index);                                                             \
        return 0;                                                                                 \
    }
PATH_SETUP(avx2, 0)
PATH_SETUP(avxvnni, 1)
PATH_SETUP(avxvnni_evex, 2)
#define PATH_TEST(fn, tag) {#fn "[" #tag "]", fn, on_##tag, NULL, NULL}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    f->evex_dir = tu_tmpdir();
    char *lib = tu_plugin("tp_avx2_evex");
    /* x86-64 with AVX-512 VNNI only: elsewhere the gates keep it out */
    char *mf = tu_manifest_abi(f->evex_dir, "evex.yaml", A2_EVEX, lib, 2u, /* ABI 2: mappable */
                           "{format: int4-asym-g128, weight_bits: 4, group_size: 128, "
                           "group_sizes: [32, 64, 128], "
                           "symmetric: false, activation_dtype: int16, bits_per_weight: 4.25}",
                           "requires:\n  cpu_flags: [avx, avx2, fma, avx512vl, avx512_vnni]\n");
    free(lib);
    free(mf);
    const char *dirs[2] = {EDGERT_TEST_BACKEND_DIR, f->evex_dir};
    edgert_options o = {.struct_size = sizeof o};
    o.manifest_paths = dirs;
    o.manifest_path_count = 2;
    o.ignore_env = 1;
    o.threads = 2;
    o.log_level = EDGERT_LOG_ERROR;
    char err[512] = "";
    if (edgert_open(&o, &f->ctx, err, sizeof err) != EDGERT_OK) {
        fprintf(stderr, "edgert_open: %s\n", err);
        goto fail;
    }
    if (edgert_backend_open(f->ctx, "ref-w4a16", NULL, &f->ref, err, sizeof err) != EDGERT_OK) {
        fprintf(stderr, "ref-w4a16: %s\n", err);
        edgert_close(f->ctx);
        goto fail;
    }
    *state = f;
    return 0;
fail:
    tu_rmrf(f->evex_dir);
    free(f);
    return -1;
}

static int teardown(void **state)
{
    fx *f = *state;
    edgert_backend_close(f->ref);
    edgert_close(f->ctx);
    tu_rmrf(f->evex_dir);
    free(f);
    return 0;
}

/* 0 when this CPU has every flag of path pi, else 1 with the reason in why. */
static int path_lacks(fx *f, size_t pi, char *why, size_t len)
{
    const edgert_device *d = edgert_device_facts(f->ctx);
    for (unsigned i = 0; i < paths[pi].nflags; i++) {
        if (!EDGERT_HAS_FLAG(d->cpu_flags, paths[pi].flags[i])) {
            snprintf(why, len, "%s %s: this CPU lacks %s", paths[pi].backend, paths[pi].option,
                     paths[pi].flag_names[i]);
            return 1;
        }
    }
    return 0;
}

/* The case reports skipped when this CPU lacks its path (paths[f->pi]). */
#define PATH_OR_SKIP(f)                                                                           \
    do {                                                                                          \
        char why_[256];                                                                           \
        if (path_lacks(f, (f)->pi, why_, sizeof why_))                                            \
            tu_skip("%s", why_);                                                                  \
    } while (0)

/* avx2-w4a16 itself needs avx, avx2 and fma (its manifest's gate). */
#define A2_OR_SKIP(f)                                                                             \
    do {                                                                                          \
        const edgert_candidate *c_ = edgert_candidate_find((f)->ctx, A2);                         \
        assert_non_null(c_);                                                                      \
        if (!c_->eligible)                                                                        \
            tu_skip(A2 " is not eligible on this CPU: %s",                                        \
                    c_->reason_count ? c_->reasons[0] : "?");                                     \
    } while (0)

static edgert_backend *open_path(fx *f, const path_def *p)
{
    edgert_backend *b = NULL;
    char err[512] = "";
    /* a forced path runs the plugin's self-test inside backend_open */
    edgert_status st = edgert_backend_open(f->ctx, p->backend, p->option, &b, err, sizeof err);
    if (st != EDGERT_OK)
        fail_msg("%s %s: %s", p->backend, p->option, err);
    if (!strstr(edgert_backend_describe(b), p->name))
        fail_msg("%s %s: describe() says '%s', not '%s'", p->backend, p->option,
                 edgert_backend_describe(b), p->name);
    return b;
}

static float rng_unit(uint64_t *s) /* uniform in [-1, 1) */
{
    return (float)((double)(gen_splitmix64(s) >> 11) * 0x1.0p-52 - 1.0);
}

/* Activations with LLM-like spread: most around 1, a few outliers 30x
 * larger, some groups much smaller (the per-group scale's case), one exact
 * zero per row; NaN in the ldx padding (never to be read into a result). */
static void fill_x(float *x, uint32_t m, uint32_t k, size_t ldx, uint64_t seed)
{
    for (uint32_t i = 0; i < m; i++) {
        for (size_t c = 0; c < ldx; c++) {
            float v = rng_unit(&seed);
            uint64_t u = gen_splitmix64(&seed) % 64u;
            if (u == 0)
                v *= 30.0f;
            else if (u < 4)
                v *= 1e-3f;
            if ((c / 128u) % 3u == 2u)
                v *= 0.01f;
            x[i * ldx + c] = c < k ? v : NAN;
        }
        x[i * ldx + (i * 7u) % k] = 0.0f;
    }
}

/* The exact output (row x, weight row r) and its bounds (header comment):
 * against the exact sum, and against ref-w4a16. */
static double exact_and_bounds(const edgert_qweights *w, const float *x, uint32_t r,
                               double *bound, double *bound_ref)
{
    const uint32_t G = w->group, groups = w->k / G;
    double exact = 0, sum_xw = 0, sum_grid = 0, sum_xs15 = 0, mx = 0;
    for (uint32_t g = 0; g < groups; g++) {
        double s = w->scales[(size_t)r * groups + g];
        int z = w->zeros ? w->zeros[(size_t)r * groups + g] : 8;
        for (uint32_t c = g * G; c < (g + 1u) * G; c++) {
            if (c % 128u == 0u) { /* a block of 128 inputs begins: its max |x| */
                mx = 0;
                for (uint32_t d = c; d < c + 128u && d < w->k; d++)
                    mx = fmax(mx, fabs((double)x[d]));
            }
            double xv = x[c], wv = s * ((int)edgert_qcode(w, r, c) - z);
            exact += xv * wv;
            sum_xw += fabs(xv * wv);
            sum_xs15 += 15.0 * fabs(xv * s);
            sum_grid += ldexp(mx, -13) * fabs(wv);
        }
    }
    const double blocks = (w->k + 127u) / 128u;
    *bound = sum_grid + ldexp(sum_xw, -19) + ldexp((3.0 * groups + 2.0 * blocks) * sum_xs15, -22) +
             1e-30;
    *bound_ref = *bound + ldexp((w->k + 2.0) * sum_xw, -24);
    return exact;
}

/* Every output of y (and the ref's yr) within its bounds, nothing past n. */
static void check_outputs(const path_def *p, const edgert_qweights *w, uint32_t m, const float *x,
                          size_t ldx, const float *y, const float *yr, size_t ldy, float sentinel)
{
    const uint32_t n = w->n, k = w->k;
    for (uint32_t i = 0; i < m; i++) {
        for (size_t c = n; c < ldy; c++)
            if (y[i * ldy + c] != sentinel)
                fail_msg("%s m=%u n=%u k=%u: y[%u][%zu] beyond n was written", p->name, m, n, k,
                         i, c);
        for (uint32_t r = 0; r < n; r++) {
            double bound, bref;
            double exact = exact_and_bounds(w, x + i * ldx, r, &bound, &bref);
            double got = y[i * ldy + r], ref = yr[i * ldy + r];
            if (!(fabs(got - exact) <= bound))
                fail_msg("%s m=%u n=%u k=%u: y[%u][%u] = %.9g, exact %.9g: |err| %.3g > bound %.3g",
                         p->name, m, n, k, i, r, got, exact, fabs(got - exact), bound);
            if (!(fabs(got - ref) <= bref))
                fail_msg("%s m=%u n=%u k=%u: y[%u][%u] = %.9g, ref-w4a16 %.9g: |diff| %.3g > %.3g",
                         p->name, m, n, k, i, r, got, ref, fabs(got - ref), bref);
        }
    }
}

/* One (path, m, n, k) check against the exact sum and ref-w4a16. */
static void check_shape(fx *f, edgert_backend *b, const path_def *p, const edgert_qtensor *t,
                        const edgert_packed *pk, const edgert_packed *pref, uint32_t m,
                        uint64_t seed)
{
    const uint32_t n = t->view.n, k = t->view.k;
    const size_t ldx = (size_t)k + 5u, ldy = (size_t)n + 3u;
    const float sentinel = -777.25f;
    float *x = malloc(sizeof(float) * m * ldx);
    float *y = malloc(sizeof(float) * m * ldy), *yr = malloc(sizeof(float) * m * ldy);
    assert_non_null(x);
    assert_non_null(y);
    assert_non_null(yr);
    fill_x(x, m, k, ldx, seed);
    for (size_t i = 0; i < (size_t)m * ldy; i++)
        y[i] = yr[i] = sentinel;

    char err[512] = "";
    edgert_gemm_args a = {sizeof a, m, x, ldx, y, ldy};
    if (edgert_gemm(b, pk, &a, err, sizeof err) != EDGERT_OK)
        fail_msg("%s m=%u n=%u k=%u: gemm: %s", p->name, m, n, k, err);
    a.y = yr;
    if (edgert_gemm(f->ref, pref, &a, err, sizeof err) != EDGERT_OK)
        fail_msg("ref m=%u n=%u k=%u: gemm: %s", m, n, k, err);
    check_outputs(p, &t->view, m, x, ldx, y, yr, ldy, sentinel);
    free(x);
    free(y);
    free(yr);
}

/* Canonical weights n x k in groups of `group` with a spread like a model's. */
static void make_weights_g(uint32_t n, uint32_t k, uint32_t group, int sym, uint64_t *seed,
                           edgert_qtensor *t)
{
    float *w = malloc(sizeof(float) * n * k);
    assert_non_null(w);
    for (size_t i = 0; i < (size_t)n * k; i++)
        w[i] = 0.05f * rng_unit(seed) + (i % 7u == 0 ? 0.01f : 0.0f);
    assert_int_equal(edgert_quantize_rtn(w, n, k, group, sym, t), EDGERT_OK);
    free(w);
}

static void make_weights(uint32_t n, uint32_t k, int sym, uint64_t *seed, edgert_qtensor *t)
{
    make_weights_g(n, k, 128u, sym, seed, t);
}

/* Decode (m <= 4: one row over both halves, two rows per pass and a tail)
 * and prefill (full row tiles, tails), on n that leave a half, a single
 * column, or a second half of one column; m = 512 on the smaller ones. */
static void test_against_ref(void **state)
{
    fx *f = *state;
    PATH_OR_SKIP(f);
    const path_def *p = &paths[f->pi];
    static const uint32_t ms[] = {1, 2, 3, 4, 5, 17};
    static const uint32_t ns[] = {1, 7, 9, 33, 129, 1001};
    static const uint32_t ks[] = {128, 256, 2048};
    char err[512] = "";
    uint64_t seed = 42;
    edgert_backend *b = open_path(f, p);
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            uint32_t n = ns[ni], k = ks[ki];
            edgert_qtensor t;
            make_weights(n, k, (ni + ki) % 4u == 3u, &seed, &t);
            edgert_packed *pk = NULL, *pref = NULL;
            if (edgert_pack(b, &t.view, &pk, err, sizeof err) != EDGERT_OK)
                fail_msg("%s n=%u k=%u: pack: %s", p->name, n, k, err);
            assert_int_equal(edgert_pack(f->ref, &t.view, &pref, err, sizeof err), EDGERT_OK);
            /* header + 1088 bytes per (panel of 16 columns, group of 128) */
            size_t expect = A2_HEADERS + (size_t)((n + A2_PANEL - 1u) / A2_PANEL) * (k / 128u) *
                                      A2_BLOCK_BYTES;
            assert_int_equal(edgert_packed_bytes(pk), expect);
            for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
                check_shape(f, b, p, &t, pk, pref, ms[mi], seed++);
            if (n <= 129u)
                check_shape(f, b, p, &t, pk, pref, 512u, seed++);
            edgert_packed_free(pk);
            edgert_packed_free(pref);
            edgert_qtensor_free(&t);
        }
    }
    edgert_backend_close(b);
}

/* Groups of 64 and 32, and k no multiple of 128 (the last block half or a
 * quarter full: SmolLM2's hidden 576 in groups of 64), decode and prefill,
 * symmetric and not; a block holds 128 / group meta rows of 64 bytes. */
static void test_groups_against_ref(void **state)
{
    fx *f = *state;
    PATH_OR_SKIP(f);
    const path_def *p = &paths[f->pi];
    static const uint32_t ms[] = {1, 2, 3, 5, 17, 100};
    static const uint32_t ns[] = {7, 33, 129};
    static const struct {
        uint32_t group, k;
    } gk[] = {{64, 576}, {32, 96}, {64, 192}, {32, 320}, {64, 1536}, {32, 2048}};
    char err[512] = "";
    uint64_t seed = 4242;
    edgert_backend *b = open_path(f, p);
    for (size_t ci = 0; ci < sizeof gk / sizeof gk[0]; ci++) {
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            uint32_t n = ns[ni], k = gk[ci].k, g = gk[ci].group;
            edgert_qtensor t;
            make_weights_g(n, k, g, (ci + ni) % 2u == 1u, &seed, &t);
            edgert_packed *pk = NULL, *pref = NULL;
            if (edgert_pack(b, &t.view, &pk, err, sizeof err) != EDGERT_OK)
                fail_msg("%s n=%u k=%u group %u: pack: %s", p->name, n, k, g, err);
            assert_int_equal(edgert_pack(f->ref, &t.view, &pref, err, sizeof err), EDGERT_OK);
            size_t expect = A2_HEADERS + (size_t)((n + A2_PANEL - 1u) / A2_PANEL) *
                                             ((k + 127u) / 128u) * (1024u + 64u * (128u / g));
            assert_int_equal(edgert_packed_bytes(pk), expect);
            for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
                check_shape(f, b, p, &t, pk, pref, ms[mi], seed++);
            edgert_packed_free(pk);
            edgert_packed_free(pref);
            edgert_qtensor_free(&t);
        }
    }
    edgert_backend_close(b);
}

/* The same packed weights give the same numbers whatever the strides, and
 * x = 0 gives exactly 0 (no bias from the zero-point correction). */
static void test_strides_and_zero_x(void **state)
{
    fx *f = *state;
    PATH_OR_SKIP(f);
    enum { M = 5, N = 45, K = 384 };
    char err[512] = "";
    uint64_t seed = 7;
    edgert_qtensor t;
    make_weights(N, K, 0, &seed, &t);
    edgert_backend *b = open_path(f, &paths[f->pi]);
    edgert_packed *pk = NULL;
    assert_int_equal(edgert_pack(b, &t.view, &pk, err, sizeof err), EDGERT_OK);
    for (uint32_t m = 1; m <= M; m += M - 1) { /* decode (1) and prefill (5) kernels */
        float x1[M * K], y1[M * N], x2[M * (K + 64)], y2[M * (N + 17)];
        fill_x(x1, m, K, K, seed++);
        for (uint32_t i = 0; i < m; i++)
            memcpy(x2 + i * (K + 64), x1 + i * K, sizeof(float) * K);
        for (size_t i = 0; i < sizeof y2 / sizeof y2[0]; i++)
            y2[i] = 3.5f;
        edgert_gemm_args a1 = {sizeof a1, m, x1, K, y1, N};
        edgert_gemm_args a2 = {sizeof a2, m, x2, K + 64, y2, N + 17};
        assert_int_equal(edgert_gemm(b, pk, &a1, err, sizeof err), EDGERT_OK);
        assert_int_equal(edgert_gemm(b, pk, &a2, err, sizeof err), EDGERT_OK);
        for (uint32_t i = 0; i < m; i++) {
            assert_memory_equal(y1 + i * N, y2 + i * (N + 17), sizeof(float) * N);
            for (uint32_t c = N; c < N + 17; c++)
                assert_true(y2[i * (N + 17) + c] == 3.5f);
        }
        memset(x1, 0, sizeof x1);
        assert_int_equal(edgert_gemm(b, pk, &a1, err, sizeof err), EDGERT_OK);
        for (uint32_t i = 0; i < m * N; i++)
            assert_true(y1[i] == 0.0f);
    }
    edgert_packed_free(pk);
    edgert_backend_close(b);
    edgert_qtensor_free(&t);
}

/* Pack refusals: K no multiple of the group and a group size the layout
 * does not hold (E_UNSUPPORTED, with the numbers and the tensor's name);
 * values the layout cannot hold. */
static void test_pack_refusals(void **state)
{
    fx *f = *state;
    A2_OR_SKIP(f);
    char err[512] = "";
    edgert_backend *b = NULL;
    assert_int_equal(edgert_backend_open(f->ctx, A2, NULL, &b, err, sizeof err), EDGERT_OK);
    uint64_t seed = 5;
    edgert_qtensor t;
    float w[3 * 200];
    for (int i = 0; i < 3 * 200; i++)
        w[i] = 0.01f * (float)(i % 17 - 8);
    assert_int_equal(edgert_quantize_rtn(w, 3, 200, 128, 0, &t), EDGERT_OK);
    t.view.name = "blk.0.attn_q";
    edgert_packed *pk = (edgert_packed *)(uintptr_t)1;
    assert_int_equal(edgert_pack(b, &t.view, &pk, err, sizeof err), EDGERT_E_UNSUPPORTED);
    assert_null(pk);
    assert_non_null(strstr(err, "k=200"));
    assert_non_null(strstr(err, "128"));
    assert_non_null(strstr(err, "blk.0.attn_q"));
    edgert_qtensor_free(&t);

    float w2[2 * 256];
    for (int i = 0; i < 512; i++)
        w2[i] = 0.01f * (float)(i % 11 - 5);
    assert_int_equal(edgert_quantize_rtn(w2, 2, 256, 16, 0, &t), EDGERT_OK);
    assert_int_equal(edgert_pack(b, &t.view, &pk, err, sizeof err), EDGERT_E_UNSUPPORTED);
    assert_non_null(strstr(err, "group size 16"));
    edgert_qtensor_free(&t);

    /* a zero point above 15, a non-finite scale: E_USAGE, naming where */
    make_weights(2, 256, 0, &seed, &t);
    uint8_t zeros[4] = {1, 2, 16, 3};
    float scales[4] = {0.1f, 0.1f, INFINITY, 0.1f};
    edgert_qweights q = t.view;
    q.zeros = zeros;
    assert_int_equal(edgert_pack(b, &q, &pk, err, sizeof err), EDGERT_E_USAGE);
    assert_non_null(strstr(err, "zero point 16 at row 1 group 0"));
    zeros[2] = 15;
    q.scales = scales;
    assert_int_equal(edgert_pack(b, &q, &pk, err, sizeof err), EDGERT_E_USAGE);
    assert_non_null(strstr(err, "scale at row 1 group 0 is not finite"));
    edgert_qtensor_free(&t);
    edgert_backend_close(b);
}

/* Option and GEMM-argument refusals: E_USAGE with the plugin's message. */
static void test_usage_refusals(void **state)
{
    fx *f = *state;
    A2_OR_SKIP(f);
    char err[512] = "";
    edgert_backend *b = NULL;
    static const char *bad[] = {"path=warp-drive", "threads=3", "path=avx2 extra", "path="};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(edgert_backend_open(f->ctx, A2, bad[i], &b, err, sizeof err),
                         EDGERT_E_USAGE);
        assert_null(b);
        assert_non_null(strstr(err, A2));
    }
    assert_int_equal(edgert_backend_open(f->ctx, A2, " path=auto ", &b, err, sizeof err),
                     EDGERT_OK);
    uint64_t seed = 9;
    edgert_qtensor t;
    make_weights(2, 256, 0, &seed, &t);
    edgert_packed *pk = NULL;
    assert_int_equal(edgert_pack(b, &t.view, &pk, err, sizeof err), EDGERT_OK);
    float x[256] = {0}, y[2] = {0};
    edgert_gemm_args a = {sizeof a, 1, x, 255, y, 2};
    assert_int_equal(edgert_gemm(b, pk, &a, err, sizeof err), EDGERT_E_USAGE);
    assert_non_null(strstr(err, "ldx is less than k")); /* the core's (plugin's: test_ref) */
    a.ldx = 256;
    a.ldy = 1;
    assert_int_equal(edgert_gemm(b, pk, &a, err, sizeof err), EDGERT_E_USAGE);
    a.ldy = 2;
    a.m = 0;
    assert_int_equal(edgert_gemm(b, pk, &a, err, sizeof err), EDGERT_E_USAGE);
    a.m = 1;
    assert_int_equal(edgert_gemm(b, pk, &a, err, sizeof err), EDGERT_OK);
    edgert_packed_free(pk);
    edgert_qtensor_free(&t);
    edgert_backend_close(b);
}

/* Bits per weight on a spark-1.7b shape: 4.25 plus the 256 bytes of headers. */
static void test_packed_bits(void **state)
{
    fx *f = *state;
    A2_OR_SKIP(f);
    char err[512] = "";
    edgert_backend *b = NULL;
    assert_int_equal(edgert_backend_open(f->ctx, A2, NULL, &b, err, sizeof err), EDGERT_OK);
    enum { N = 3072, K = 2048 };
    uint64_t seed = 3;
    edgert_qtensor t;
    make_weights(N, K, 0, &seed, &t);
    edgert_packed *pk = NULL;
    assert_int_equal(edgert_pack(b, &t.view, &pk, err, sizeof err), EDGERT_OK);
    double bpw = (double)edgert_packed_bytes(pk) * 8.0 / ((double)N * K);
    printf("packed %u x %u: %zu bytes, %.6f bits per weight\n", N, K, edgert_packed_bytes(pk),
           bpw);
    assert_true(bpw <= 4.25 + A2_HEADERS * 8.0 / ((double)N * K) + 1e-9);
    edgert_packed_free(pk);
    edgert_qtensor_free(&t);
    edgert_backend_close(b);
}

/* ---- the plugin's own refusals, with a fake host lacking flags ---------------- */

/* init with the given flags and options: its status, the instance's
 * description (or "") in desc; the instance is freed again. */
static edgert_status try_init(const edgert_plugin *p, edgert_host *host, uint64_t flags,
                              const char *options, char *err, size_t len, char *desc)
{
    void *inst = NULL;
    host->cpu_flags = flags;
    err[0] = desc[0] = '\0';
    edgert_status st = p->init(host, options, &inst, err, len);
    if (st != EDGERT_OK) {
        assert_null(inst);
        return st;
    }
    snprintf(desc, 256, "%s", p->describe(inst));
    p->fini(inst);
    return st;
}

static void test_missing_flags(void **state)
{
    fx *f = *state;
    A2_OR_SKIP(f);
    const edgert_candidate *c = edgert_candidate_find(f->ctx, A2);
    assert_non_null(c->library_path);
    void *h = NULL;
    edgert_plugin_entry_fn entry = fh_entry(c->library_path, &h);
    const uint64_t base = (1ull << EDGERT_CPU_AVX) | (1ull << EDGERT_CPU_AVX2) |
                          (1ull << EDGERT_CPU_FMA);
    edgert_host host = fh_host(1, base);
    const edgert_plugin *p = NULL;
    char err[512] = "", desc[256];
    assert_int_equal(entry(1, 1, &host, &p, err, sizeof err), EDGERT_OK);

    /* AVX2 without AVX-VNNI: avx2 works (and passes its self-test here),
     * forced avxvnni is refused by the flag's name */
    assert_int_equal(try_init(p, &host, base, "path=avxvnni", err, sizeof err, desc),
                     EDGERT_E_UNSUPPORTED);
    assert_non_null(strstr(err, "avx_vnni"));
    void *inst = NULL;
    assert_int_equal(p->init(&host, NULL, &inst, err, sizeof err), EDGERT_OK);
    assert_non_null(strstr(p->describe(inst), "avx2:"));
    assert_int_equal(p->self_test(inst, err, sizeof err), EDGERT_OK);
    p->fini(inst);

    /* auto prefers avxvnni (init only: no kernel runs without the flag) */
    uint64_t vnni = base | (1ull << EDGERT_CPU_AVX_VNNI);
    assert_int_equal(try_init(p, &host, vnni, NULL, err, sizeof err, desc), EDGERT_OK);
    assert_non_null(strstr(desc, "avxvnni:"));
    assert_int_equal(try_init(p, &host, vnni, "path=avx2", err, sizeof err, desc), EDGERT_OK);
    assert_non_null(strstr(desc, "avx2:"));

    /* without a base flag init refuses, naming it, and runs no kernel */
    assert_int_equal(try_init(p, &host, base & ~(1ull << EDGERT_CPU_FMA), NULL, err, sizeof err,
                              desc), EDGERT_E_UNSUPPORTED);
    assert_non_null(strstr(err, "lacks fma"));
    assert_int_equal(try_init(p, &host, (1ull << EDGERT_CPU_AVX) | (1ull << EDGERT_CPU_FMA),
                              "path=avx2", err, sizeof err, desc), EDGERT_E_UNSUPPORTED);
    assert_non_null(strstr(err, "lacks avx2"));

    /* a host table of another size: refused before it is read further */
    host.struct_size = 8;
    assert_int_equal(try_init(p, &host, base, NULL, err, sizeof err, desc), EDGERT_E_USAGE);
    assert_non_null(strstr(err, "host table"));
    dlclose(h);
}

/* `edgert verify` end to end on path avx2: correctness against ref-w4a16 on
 * every odd shape (m up to 512, K not a multiple of 128 refused cleanly),
 * the tolerance the CLI derives from the manifest's int16 activations;
 * fidelity on the tiny workload (the default one's was most of this
 * program's time under ASan). */
static void test_verify_cli(void **state)
{
    fx *f = *state;
    f->pi = 0;
    PATH_OR_SKIP(f);
    char args[4096], *out = NULL;
    snprintf(args, sizeof args, "verify --quick --tokens 16 --workload %s/workloads/tiny.yaml "
             "--backend " A2 " --options path=avx2 --manifests %s",
             EDGERT_TEST_FIXTURES, EDGERT_TEST_BACKEND_DIR);
    int rc = run(args, &out);
    if (rc != 0 || !strstr(out, A2 " (avx2: AVX2") || !strstr(out, "all correct"))
        fail_msg("edgert %s: exit %d\n%.4000s", args, rc, out);
    free(out);
}

/* ---- the packed-weight cache (plugin ABI 2; tests/test_packed.h) ------------- */

/* The round trip on every shape (those the layout cannot hold refused by
 * pack and map alike), bit for bit from a heap copy and from a read-only
 * mmap of a file, on this path's kernels. */
static void test_packed_round_trip(void **state)
{
    fx *f = *state;
    PATH_OR_SKIP(f);
    edgert_backend *b = open_path(f, &paths[f->pi]);
    const char *layout = edgert_backend_packed_layout(b);
    if (layout == NULL || strcmp(layout, "avx2-w4a16/1") != 0)
        fail_msg("%s: packed layout '%s', not avx2-w4a16/1", paths[f->pi].backend,
                 layout ? layout : "(none)");
    size_t ran = 0;
    for (size_t i = 0; i < PM_NSHAPES; i++)
        ran += pm_round_trip(b, &pm_shapes[i], 2000u + i) == 0;
    assert_true(ran >= 6u); /* every group-128 shape with whole groups */
    edgert_backend_close(b);
}

/* Every corruption of the header refused with a message; garbage in the
 * blocks maps and computes. The zero points live in the scales' low bits:
 * no section of them to put out of range (-1). */
static void test_packed_refusals(void **state)
{
    fx *f = *state;
    PATH_OR_SKIP(f);
    edgert_backend *b = open_path(f, &paths[f->pi]);
    pm_refusals(b, -1);
    edgert_backend_close(b);
}

#if !defined(__x86_64__)
/* On another arch the plugin builds nothing and the manifest's arch gate
 * must refuse the backend before any load: that is all there is to test. */
static void test_gated_out_on_other_arch(void **state)
{
    fx *f = *state;
    const edgert_candidate *c = edgert_candidate_find(f->ctx, A2);
    assert_non_null(c);
    assert_false(c->eligible);
    assert_false(c->loaded);
    int wrong_arch = 0;
    for (size_t i = 0; i < c->reason_count; i++)
        wrong_arch |= strcmp(c->reasons[i], "WRONG_ARCH") == 0;
    assert_true(wrong_arch);
}
#endif

int main(void)
{
#if !defined(__x86_64__)
    const struct CMUnitTest other_arch[] = {cmocka_unit_test(test_gated_out_on_other_arch)};
    return tu_run_group(A2, other_arch, setup, teardown);
#endif
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack_refusals),
        cmocka_unit_test(test_usage_refusals),
        cmocka_unit_test(test_missing_flags),
        cmocka_unit_test(test_packed_bits),
        PATH_TEST(test_strides_and_zero_x, avx2),
        PATH_TEST(test_strides_and_zero_x, avxvnni),
        PATH_TEST(test_strides_and_zero_x, avxvnni_evex),
        PATH_TEST(test_against_ref, avx2),
        PATH_TEST(test_against_ref, avxvnni),
        PATH_TEST(test_against_ref, avxvnni_evex),
        PATH_TEST(test_groups_against_ref, avx2),
        PATH_TEST(test_groups_against_ref, avxvnni),
        PATH_TEST(test_groups_against_ref, avxvnni_evex),
        PATH_TEST(test_packed_round_trip, avx2),
        PATH_TEST(test_packed_round_trip, avxvnni),
        PATH_TEST(test_packed_round_trip, avxvnni_evex),
        PATH_TEST(test_packed_refusals, avx2),
        cmocka_unit_test(test_verify_cli),
    };
    return tu_run_group(A2, tests, setup, teardown);
}
