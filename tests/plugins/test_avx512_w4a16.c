/*
 * tests/plugins/test_avx512_w4a16.c — the avx512-w4a16 backend (plugins/avx512-w4a16)
 * through the public API (edgert_open / edgert_backend_open / edgert_pack /
 * edgert_gemm), every forced path against the reference backend ref-w4a16
 * and against an exact (double) sum, on odd shapes.
 *
 * Each path is its own case; a path whose CPU flag this machine lacks is
 * reported skipped (tu_skip: "SKIPPED: ...: <the flag>"), and so is every
 * case on an x86-64 CPU without the AVX-512 the backend requires. Path amx
 * (AMX-BF16 tiles for prefill) also runs on a software model of the tiles:
 * the plugin's sources built as the test-only backend avx512-w4a16-amxemu
 * (tests/plugins/amxemu), on any AVX512_BF16 + VNNI CPU.
 *
 * Length: over 700 lines because one backend with five paths (fma, bf16,
 * int16, real and emulated AMX tiles), its options, refusals and gates
 * shares one fixture and one exact-sum checker; split, each program would
 * repeat them.
 *
 * Tolerance, per output y[i][r] (derivation; the plugin's self-test uses the
 * same bound, aw_bound in avx512_w4a16.c):
 *   - bf16 rounding of activations: bf16 keeps 8 significant bits and rounds
 *     to nearest, so |bf16(x) - x| <= 2^-8 |x| per element and the output
 *     moves by at most 2^-8 * sum_k |x_k w_k|. Products of a bf16 activation
 *     and a code 0..15 are exact in fp32.
 *   - int16 path: per block g of 128 inputs (whatever the weights' group:
 *     128, 64 or 32), activations are integers a = round(x 2^sh) with
 *     m_g 2^sh in [2^13, 2^14) (m_g = max |x| of the block), so
 *     |a 2^-sh - x| <= 2^-sh <= 2^-13 m_g (the clamp of +16384 included):
 *     the output moves by at most sum_k 2^-13 m_g(k) |w_k|. Integer group
 *     sums are exact.
 *   - fma path: fp32 activations, no rounding of x.
 *   - all paths: the scale is stored with 20 significant bits (2^-20 relative,
 *     counted as 2^-19 sum |x w|), and fp32 accumulation. The zero point is
 *     applied per group as s * (sum x q - z sum x), so the terms that cancel
 *     reach 15 |x s| per input; fp32 sums of at most a few hundred terms per
 *     group plus one add per group stay below 2^-14 * sum_k 15 |x_k s_k|.
 *   Against ref-w4a16 (fp32 sums over k <= 2048 terms) add its own
 *   accumulation error, <= 2048 * 2^-24 = 2^-13 of sum |x w|.
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

#define AW "avx512-w4a16"

#define AW_EMU "avx512-w4a16-amxemu"

/* Activation arithmetic, for the tolerance: */
typedef enum act_kind { ACT_FP32, ACT_BF16, ACT_INT16 } act_kind;

typedef struct path_def {
    const char *backend; /* plugin name */
    const char *option;
    const char *name;    /* the path describe() names */
    edgert_cpu_flag flags[3];
    const char *flag_names[3];
    unsigned nflags;
    act_kind decode, prefill; /* m <= 4, m > 4 */
} path_def;

/* Path amx runs here only on the emulated tiles (tests/plugins/amxemu): the
 * same plugin sources built as AW_EMU, whose amx path needs no AMX flag. On
 * an AMX machine the real path runs too. */
static const path_def paths[] = {
    {AW, "path=fma", "fma", {EDGERT_CPU_AVX512F}, {"avx512f"}, 1, ACT_FP32, ACT_FP32},
    {AW, "path=bf16", "bf16", {EDGERT_CPU_AVX512_BF16}, {"avx512_bf16"}, 1, ACT_BF16, ACT_BF16},
    {AW, "path=int16", "int16", {EDGERT_CPU_AVX512_VNNI}, {"avx512_vnni"}, 1, ACT_INT16, ACT_INT16},
    {AW, "path=amx", "AMX-BF16 tiles",
     {EDGERT_CPU_AMX_BF16, EDGERT_CPU_AMX_TILE, EDGERT_CPU_AVX512_VNNI},
     {"amx_bf16", "amx_tile", "avx512_vnni"}, 3, ACT_INT16, ACT_BF16},
    {AW_EMU, "path=amx", "EMULATED AMX-BF16 tiles",
     {EDGERT_CPU_AVX512_BF16, EDGERT_CPU_AVX512_VNNI}, {"avx512_bf16", "avx512_vnni"}, 2,
     ACT_INT16, ACT_BF16},
};

typedef struct fx {
    edgert_ctx *ctx;
    edgert_backend *ref;
    char *emu_dir; /* the emulated build's manifest */
    size_t pi;     /* the path of a per-path case: paths[pi] */
} fx;

/* Per-path cases: the case's own setup picks the path (the group's state
 * reaches it), the case is named "<function>[<path>]". */
#define PATH_SETUP(tag, index)                                                                    \
    static int on_##tag(void **state)                                                             \
    {                                                                                             \
        ((fx *)*state)->pi = (index);                                                             \
        return 0;                                                                                 \
    }
PATH_SETUP(fma, 0)
PATH_SETUP(bf16, 1)
PATH_SETUP(int16, 2)
PATH_SETUP(amx, 3)
PATH_SETUP(amx_emulated, 4)
#define PATH_TEST(fn, tag) {#fn "[" #tag "]", fn, on_##tag, NULL, NULL}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    f->emu_dir = tu_tmpdir();
    char *lib = tu_plugin("tp_avx512_amxemu");
    /* x86-64 only: elsewhere the arch gate keeps it out before any load */
    char *mf = tu_manifest(f->emu_dir, "amxemu.yaml", AW_EMU, lib, NULL,
                           "requires:\n  cpu_flags: [avx512f, avx512bw, avx512vl]\n");
    free(lib);
    free(mf);
    const char *paths_[2] = {EDGERT_TEST_BACKEND_DIR, f->emu_dir};
    edgert_options o = {.struct_size = sizeof o};
    o.manifest_paths = paths_;
    o.manifest_path_count = 2;
    o.ignore_env = 1;
    o.threads = 2;
    o.log_level = EDGERT_LOG_ERROR;
    char err[512] = "";
    if (edgert_open(&o, &f->ctx, err, sizeof err) != EDGERT_OK) {
        fprintf(stderr, "edgert_open: %s\n", err);
        tu_rmrf(f->emu_dir);
        free(f);
        return -1;
    }
    /* which tiles path=amx ran on, for ctest's log and .ci/run's summary */
    const uint64_t cpu = edgert_device_facts(f->ctx)->cpu_flags;
    printf("AMX: %s (" AW " path=amx)\n",
           EDGERT_HAS_FLAG(cpu, EDGERT_CPU_AMX_TILE) && EDGERT_HAS_FLAG(cpu, EDGERT_CPU_AMX_BF16)
               ? "real tiles, and the tile model"
               : "not on this CPU, tile model only");
    if (edgert_backend_open(f->ctx, "ref-w4a16", NULL, &f->ref, err, sizeof err) != EDGERT_OK) {
        fprintf(stderr, "ref-w4a16: %s\n", err);
        edgert_close(f->ctx);
        tu_rmrf(f->emu_dir);
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    edgert_backend_close(f->ref);
    edgert_close(f->ctx);
    tu_rmrf(f->emu_dir);
    free(f);
    return 0;
}

static float rng_unit(uint64_t *s) /* uniform in [-1, 1) */
{
    return (float)((double)(gen_splitmix64(s) >> 11) * 0x1.0p-52 - 1.0);
}

/* Activations with LLM-like spread: most around 1, a few outliers 30x
 * larger, some groups much smaller (the int16 path's small-value case), one
 * exact zero per row. */
static void fill_x(float *x, uint32_t m, uint32_t k, size_t ldx, uint64_t seed)
{
    for (uint32_t i = 0; i < m; i++) {
        for (uint32_t c = 0; c < k; c++) {
            float v = rng_unit(&seed);
            uint64_t u = gen_splitmix64(&seed) % 64u;
            if (u == 0)
                v *= 30.0f;
            else if (u < 4)
                v *= 1e-3f;
            if ((c / 128u) % 3u == 2u)
                v *= 0.01f;
            x[i * ldx + c] = v;
        }
        x[i * ldx + (i * 7u) % k] = 0.0f;
    }
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

/* 0 when avx512-w4a16 is eligible here, else 1 with the reason in why when
 * it is not for want of CPU flags (any other reason fails the case). */
static int aw_lacks_flags(fx *f, char *why, size_t len)
{
    const edgert_candidate *c = edgert_candidate_find(f->ctx, AW);
    assert_non_null(c);
    if (c->eligible)
        return 0;
    size_t n = (size_t)snprintf(why, len, AW " is not eligible on this CPU:");
    int flags = 0;
    for (size_t i = 0; i < c->reason_count; i++) {
        flags |= strncmp(c->reasons[i], "MISSING_CPU_FLAG(", 17) == 0;
        if (n < len)
            n += (size_t)snprintf(why + n, len - n, " %s", c->reasons[i]);
    }
    if (!flags)
        fail_msg("%s", why);
    return 1;
}

#define AW_OR_SKIP(f)                                                                             \
    do {                                                                                          \
        char why_[512];                                                                           \
        if (aw_lacks_flags(f, why_, sizeof why_))                                                 \
            tu_skip("%s", why_);                                                                  \
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

/* One (path, m, n, k) check against the exact sum and ref-w4a16. */
static void check_shape(fx *f, edgert_backend *b, const path_def *p, const edgert_qtensor *t,
                        const edgert_packed *pk, const edgert_packed *pref, uint32_t m,
                        uint64_t seed)
{
    const uint32_t n = t->view.n, k = t->view.k, G = t->view.group, groups = k / G;
    const size_t ldx = (size_t)k + 5u, ldy = (size_t)n + 3u;
    const float sentinel = -777.25f;
    float *x = malloc(sizeof(float) * m * ldx);
    float *y = malloc(sizeof(float) * m * ldy), *yr = malloc(sizeof(float) * m * ldy);
    assert_non_null(x);
    assert_non_null(y);
    assert_non_null(yr);
    fill_x(x, m, k, ldx, seed);
    if (k == 2048u) /* groups at the ends of fp32's range: path int16's exponent per group */
        for (uint32_t i = 0; i < m; i++)
            for (uint32_t c = 0; c < k; c++) {
                uint32_t g = c / 128u;
                x[i * ldx + c] *= g % 8u == 1u   ? 0x1p-140f  /* subnormal maximum */
                                  : g % 8u == 3u ? 0x1p-118f  /* shift clamped to 126 */
                                  : g % 8u == 5u ? 0x1p+90f
                                                 : 1.0f;
            }
    for (size_t i = 0; i < (size_t)m * ldx; i++)
        if (i % ldx >= k)
            x[i] = NAN; /* padding of x must never be read into a result */
    for (size_t i = 0; i < (size_t)m * ldy; i++)
        y[i] = yr[i] = sentinel;

    char err[512] = "";
    edgert_gemm_args a = {sizeof a, m, x, ldx, y, ldy};
    if (edgert_gemm(b, pk, &a, err, sizeof err) != EDGERT_OK)
        fail_msg("%s m=%u n=%u k=%u: gemm: %s", p->name, m, n, k, err);
    a.y = yr;
    if (edgert_gemm(f->ref, pref, &a, err, sizeof err) != EDGERT_OK)
        fail_msg("ref m=%u n=%u k=%u: gemm: %s", m, n, k, err);

    for (uint32_t i = 0; i < m; i++) {
        const float *xi = x + i * ldx;
        for (uint32_t c = n; c < ldy; c++)
            if (y[i * ldy + c] != sentinel)
                fail_msg("%s m=%u n=%u k=%u: y[%u][%u] beyond n was written", p->name, m, n, k, i,
                         c);
        /* path int16's activation error: 2^-13 of the maximum of the block
         * of 128 inputs (the last one cut at k) the input is in, whatever
         * the weights' group */
        double bmax[64] = {0};
        for (uint32_t c = 0; c < k; c++)
            bmax[c / 128u] = fabs((double)xi[c]) > bmax[c / 128u] ? fabs((double)xi[c])
                                                                  : bmax[c / 128u];
        for (uint32_t r = 0; r < n; r++) {
            double exact = 0, sum_xw = 0, sum_act = 0, sum_xs15 = 0;
            for (uint32_t g = 0; g < groups; g++) {
                double s = t->view.scales[(size_t)r * groups + g];
                int z = t->view.zeros ? t->view.zeros[(size_t)r * groups + g] : 8;
                for (uint32_t c = g * G; c < (g + 1u) * G; c++) {
                    double xv = xi[c];
                    double wv = s * ((int)edgert_qcode(&t->view, r, c) - z);
                    exact += xv * wv;
                    sum_xw += fabs(xv * wv);
                    sum_xs15 += 15.0 * fabs(xv * s);
                    sum_act += ldexp(bmax[c / 128u], -13) * fabs(wv);
                }
            }
            act_kind kind = m <= 4u ? p->decode : p->prefill;
            double act = kind == ACT_BF16 ? ldexp(sum_xw, -8) : kind == ACT_INT16 ? sum_act : 0.0;
            double bound = act + ldexp(sum_xw, -19) + ldexp(sum_xs15, -14) + 1e-30;
            double got = y[i * ldy + r];
            if (!(fabs(got - exact) <= bound))
                fail_msg("%s m=%u n=%u k=%u: y[%u][%u] = %.9g, exact %.9g: |err| %.3g > bound %.3g",
                         p->name, m, n, k, i, r, got, exact, fabs(got - exact), bound);
            double bref = bound + ldexp(sum_xw, -13);
            if (!(fabs(got - yr[i * ldy + r]) <= bref))
                fail_msg("%s m=%u n=%u k=%u: y[%u][%u] = %.9g, ref-w4a16 %.9g: |diff| %.3g > %.3g",
                         p->name, m, n, k, i, r, got, (double)yr[i * ldy + r],
                         fabs(got - yr[i * ldy + r]), bref);
        }
    }
    free(x);
    free(y);
    free(yr);
}

/* One case per path (the seeds start over for each). */
static void test_paths_against_ref(void **state)
{
    fx *f = *state;
    PATH_OR_SKIP(f);
    const path_def *p = &paths[f->pi];
    /* decode (<= 4) and prefill; path amx: 32-row blocks, full and partial */
    static const uint32_t ms[] = {1, 2, 3, 5, 16, 17, 33, 64};
    static const uint32_t ns[] = {1, 7, 33, 129, 1000};
    static const uint32_t ks[] = {128, 256, 2048};
    char err[512] = "";
    uint64_t seed = 42;

    edgert_backend *b = open_path(f, p);
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            uint32_t n = ns[ni], k = ks[ki];
            int sym = (ni + ki) % 4u == 3u;
            float *w = malloc(sizeof(float) * n * k);
            assert_non_null(w);
            for (size_t i = 0; i < (size_t)n * k; i++)
                w[i] = 0.05f * rng_unit(&seed) + (i % 7u == 0 ? 0.01f : 0.0f);
            edgert_qtensor t;
            assert_int_equal(edgert_quantize_rtn(w, n, k, 128, sym, &t), EDGERT_OK);
            edgert_packed *pk = NULL, *pref = NULL;
            if (edgert_pack(b, &t.view, &pk, err, sizeof err) != EDGERT_OK)
                fail_msg("%s n=%u k=%u: pack: %s", p->name, n, k, err);
            assert_int_equal(edgert_pack(f->ref, &t.view, &pref, err, sizeof err), EDGERT_OK);
            /* the in-memory handle (128 bytes with its alignment), the 128-byte
             * header of the mappable bytes, then 1088 bytes per (panel of 16
             * columns, group of 128) */
            size_t expect = 256u + (size_t)((n + 15u) / 16u) * (k / 128u) * 1088u;
            assert_int_equal(edgert_packed_bytes(pk), expect);
            for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
                check_shape(f, b, p, &t, pk, pref, ms[mi], seed++);
            if (n <= 33u && k <= 256u) { /* prefill-sized m on a small matrix; */
                check_shape(f, b, p, &t, pk, pref, 512u, seed++);
                /* beyond one chunk of path amx's accumulators (512 rows:
                 * AW_AMX_RC), the second partial, not whole 32-row blocks */
                check_shape(f, b, p, &t, pk, pref, 600u, seed++);
            }
            edgert_packed_free(pk);
            edgert_packed_free(pref);
            edgert_qtensor_free(&t);
            free(w);
        }
    }
    /* groups of 64 and 32, and k no multiple of 128 (the last block half or
     * a quarter full: SmolLM2's hidden 576 in groups of 64), decode and
     * prefill; the block holds 128 / group meta rows of 64 bytes */
    static const struct {
        uint32_t group, k;
    } gk[] = {{64, 576}, {32, 96}, {32, 320}};
    static const uint32_t gms[] = {1, 3, 17, 64};
    for (size_t ci = 0; ci < sizeof gk / sizeof gk[0]; ci++) {
        for (size_t ni = 1; ni < 4; ni += 2) {
            uint32_t n = ns[ni], k = gk[ci].k, g = gk[ci].group;
            int sym = ci % 2u == 1u;
            float *w = malloc(sizeof(float) * n * k);
            assert_non_null(w);
            for (size_t i = 0; i < (size_t)n * k; i++)
                w[i] = 0.05f * rng_unit(&seed) + (i % 7u == 0 ? 0.01f : 0.0f);
            edgert_qtensor t;
            assert_int_equal(edgert_quantize_rtn(w, n, k, g, sym, &t), EDGERT_OK);
            edgert_packed *pk = NULL, *pref = NULL;
            if (edgert_pack(b, &t.view, &pk, err, sizeof err) != EDGERT_OK)
                fail_msg("%s n=%u k=%u group %u: pack: %s", p->name, n, k, g, err);
            assert_int_equal(edgert_pack(f->ref, &t.view, &pref, err, sizeof err), EDGERT_OK);
            size_t expect = 256u + (size_t)((n + 15u) / 16u) * ((k + 127u) / 128u) *
                                       (1024u + 64u * (128u / g));
            assert_int_equal(edgert_packed_bytes(pk), expect);
            for (size_t mi = 0; mi < sizeof gms / sizeof gms[0]; mi++)
                check_shape(f, b, p, &t, pk, pref, gms[mi], seed++);
            edgert_packed_free(pk);
            edgert_packed_free(pref);
            edgert_qtensor_free(&t);
            free(w);
        }
    }
    edgert_backend_close(b);
}

/* The same packed weights give the same numbers whatever the strides, write
 * nothing past n, and give exactly 0 for x = 0. (Packed bytes mapped back
 * into another handle: test_packed_map, tests/test_packed.h.) */
static void test_strides_and_zero_x(void **state)
{
    fx *f = *state;
    PATH_OR_SKIP(f);
    const path_def *p = &paths[f->pi];
    enum { M = 5, N = 45, K = 384 };
    char err[512] = "";
    uint64_t seed = 7;
    float *w = malloc(sizeof(float) * N * K);
    assert_non_null(w);
    for (size_t i = 0; i < (size_t)N * K; i++)
        w[i] = 0.02f * rng_unit(&seed);
    edgert_qtensor t;
    assert_int_equal(edgert_quantize_rtn(w, N, K, 128, 0, &t), EDGERT_OK);
    edgert_backend *b = open_path(f, p);
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
        /* x = 0 gives exactly 0 (no bias from the zero-point correction) */
        memset(x1, 0, sizeof x1);
        assert_int_equal(edgert_gemm(b, pk, &a1, err, sizeof err), EDGERT_OK);
        for (uint32_t i = 0; i < m * N; i++)
            assert_true(y1[i] == 0.0f);
    }
    edgert_packed_free(pk);
    edgert_backend_close(b);
    edgert_qtensor_free(&t);
    free(w);
}

/* s with each '@' replaced by one stream's default prefetch in describe's
 * words: far on Intel, far-l1 elsewhere (aw_decode_defaults). */
static void with_default(const char *s, char *out, size_t len)
{
    const char *def = tu_cpu_is_intel() ? "L2 8 KiB ahead" : "L1 6 KiB ahead";
    out[0] = '\0';
    for (; *s != '\0'; s++)
        snprintf(out + strlen(out), len - strlen(out), "%.*s",
                 *s == '@' ? (int)strlen(def) : 1, *s == '@' ? def : s);
}

/* The decode options (aw_kern.h, aw_kern_int16.c) change no result: every
 * prefetch mode and stream count gives prefetch=far streams=1's bits, on
 * every decode m, for N that leaves a part of the panels over (1000 columns:
 * 63 panels, the last short) and N below one panel per stream (37).
 * prefetch=auto and streams=auto run a weight's first m = 1 calls in their
 * two modes in turn (plugins/kit/x86/decode_tuning.c): four calls each,
 * every one checked. In the describe strings '@' is with_default's.
 * Length: a table of 13 option sets, each with the words describe must
 * say, and one loop over them. */
static void test_decode_options_same_bits(void **state)
{
    fx *f = *state;
    AW_OR_SKIP(f);
    enum { NMAX = 1000, K = 2048, M = 4, V = 13 };
    static const uint32_t ns[] = {NMAX, 37};
    char err[512] = "";
    float *w = malloc(sizeof(float) * NMAX * K), *x = malloc(sizeof(float) * M * K);
    float *y[V];
    for (int v = 0; v < V; v++)
        assert_non_null(y[v] = malloc(sizeof(float) * M * NMAX));
    assert_true(w && x);
    uint64_t seed = 5;
    for (size_t i = 0; i < (size_t)NMAX * K; i++)
        w[i] = 0.05f * rng_unit(&seed);
    for (size_t i = 0; i < (size_t)M * K; i++)
        x[i] = rng_unit(&seed);
    static const struct {
        const char *opts, *said;
    } var[V] = {
        {"prefetch=far streams=1", "prefetch: L2 8 KiB ahead"},
        {"path=auto prefetch=near streams=1", "L2 8 KiB and L1 512 B ahead"},
        {"prefetch=none streams=1", "prefetch: none"},
        {"prefetch=far-l1 streams=1", "prefetch: L1 6 KiB ahead"},
        {"prefetch=none streams=2", "none, 2 streams per thread at m = 1 (prefetch: none)"},
        {"streams=4", "@, 4 streams per thread at m = 1 (prefetch: none)"},
        {"prefetch=far streams=4", "4 streams per thread at m = 1 (prefetch: L2 8 KiB ahead)"},
        {"prefetch=far-l1 streams=4", "4 streams per thread at m = 1 (prefetch: L1 6 KiB ahead)"},
        {"path=int16 prefetch=near streams=2",
         "2 streams per thread at m = 1 (prefetch: L2 8 KiB and L1 512 B ahead)"},
        {"prefetch=auto streams=1",
         "prefetch: auto (@ or none, whichever the last calls ran faster)"},
        {"streams=4 prefetch=auto", "@, 4 streams per thread at m = 1 (prefetch: "
                                    "auto (@ or none, whichever the last"},
        {"streams=auto", "@, or 4 streams per thread at m = 1 (prefetch: none), "
                         "whichever the last calls ran faster (streams=auto)"},
        {"prefetch=near streams=auto", "L2 8 KiB and L1 512 B ahead, or 4 streams per thread at "
                                       "m = 1 (prefetch: L2 8 KiB and L1 512 B ahead)"},
    };
    /* more than one stream is the int16 GEMV's (avx512_vnni) */
    const int vnni =
        EDGERT_HAS_FLAG(edgert_device_facts(f->ctx)->cpu_flags, EDGERT_CPU_AVX512_VNNI);
    if (!vnni)
        tu_skip_line(__func__, "", "the option sets with more than one stream: this CPU "
                                   "lacks avx512_vnni, which they need");
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        const uint32_t N = ns[ni];
        edgert_qtensor t;
        assert_int_equal(edgert_quantize_rtn(w, N, K, 128, 0, &t), EDGERT_OK);
        for (unsigned m = 1; m <= M; m++) {
            for (int v = 0; v < V; v++) {
                edgert_backend *b = NULL;
                edgert_packed *pk = NULL;
                if (!vnni && strstr(var[v].opts, "streams=1") == NULL)
                    continue;
                if (edgert_backend_open(f->ctx, AW, var[v].opts, &b, err, sizeof err) !=
                    EDGERT_OK)
                    fail_msg("%s: %s", var[v].opts, err);
                char said[256];
                with_default(var[v].said, said, sizeof said);
                if (strstr(edgert_backend_describe(b), said) == NULL)
                    fail_msg("%s: describe says '%s', not '%s'", var[v].opts,
                             edgert_backend_describe(b), said);
                assert_int_equal(edgert_pack(b, &t.view, &pk, err, sizeof err), EDGERT_OK);
                const int calls = strstr(var[v].opts, "auto") != NULL ? 4 : 1;
                for (int c = 0; c < calls; c++) {
                    edgert_gemm_args a = {sizeof a, m, x, K, y[v], N};
                    memset(y[v], 0xFF, sizeof(float) * m * N);
                    assert_int_equal(edgert_gemm(b, pk, &a, err, sizeof err), EDGERT_OK);
                    if (v > 0 && memcmp(y[0], y[v], sizeof(float) * m * N) != 0)
                        fail_msg("N=%u m=%u: '%s' changed the results (call %d)", N, m,
                                 var[v].opts, c);
                }
                edgert_packed_free(pk);
                edgert_backend_close(b);
            }
        }
        edgert_qtensor_free(&t);
    }
    /* streams belong to the int16 decode: the other paths refuse them */
    edgert_backend *b = NULL;
    if (EDGERT_HAS_FLAG(edgert_device_facts(f->ctx)->cpu_flags, EDGERT_CPU_AVX512_BF16)) {
        assert_int_equal(edgert_backend_open(f->ctx, AW, "path=bf16 streams=2", &b, err,
                                             sizeof err),
                         EDGERT_E_USAGE);
        assert_non_null(strstr(err, "applies to the int16 decode"));
    }
    assert_int_equal(edgert_backend_open(f->ctx, AW, "path=fma streams=4", &b, err, sizeof err),
                     EDGERT_E_USAGE);
    assert_null(b);
    assert_int_equal(edgert_backend_open(f->ctx, AW, "path=fma streams=auto", &b, err, sizeof err),
                     EDGERT_E_USAGE);
    assert_non_null(strstr(err, "streams=auto applies to the int16 decode"));
    assert_null(b);
    /* the default: the int16 decode weighs one stream against 4 except on
     * Intel, which reads one (aw_decode_defaults) */
    if (vnni) {
        assert_int_equal(edgert_backend_open(f->ctx, AW, "", &b, err, sizeof err), EDGERT_OK);
        const int weighs = strstr(edgert_backend_describe(b), "(streams=auto)") != NULL;
        print_message("  default decode: %s\n", edgert_backend_describe(b));
        assert_int_equal(weighs, !tu_cpu_is_intel());
        edgert_backend_close(b);
    }
    assert_int_equal(edgert_backend_open(f->ctx, AW, "path=fma streams=1", &b, err, sizeof err),
                     EDGERT_OK);
    edgert_backend_close(b);
    free(w);
    free(x);
    for (int v = 0; v < V; v++)
        free(y[v]);
}

static void test_refusals(void **state)
{
    fx *f = *state;
    AW_OR_SKIP(f);
    char err[512] = "";
    edgert_backend *b = NULL;

    /* unknown options: EDGERT_E_USAGE with the plugin's message */
    static const char *bad[] = {"path=warp-drive", "threads=3", "path=int16 extra", "path=",
                                "prefetch=sideways", "prefetch=near prefetch=far",
                                "streams=3", "streams=", "streams=44", "streams=2 streams=2",
                                "streams=auto streams=4", "prefetch=auto streams=auto",
                                "path=fma path=bf16"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(edgert_backend_open(f->ctx, AW, bad[i], &b, err, sizeof err),
                         EDGERT_E_USAGE);
        assert_null(b);
        assert_non_null(strstr(err, AW));
    }
    assert_int_equal(edgert_backend_open(f->ctx, AW, "path=auto", &b, err, sizeof err), EDGERT_OK);

    /* K not a multiple of 128: refused cleanly, with the numbers */
    enum { N = 3, K = 200 };
    float w[N * K];
    for (int i = 0; i < N * K; i++)
        w[i] = 0.01f * (float)(i % 17 - 8);
    edgert_qtensor t;
    assert_int_equal(edgert_quantize_rtn(w, N, K, 128, 0, &t), EDGERT_OK);
    t.view.name = "blk.0.attn_q";
    edgert_packed *pk = (edgert_packed *)(uintptr_t)1;
    err[0] = '\0';
    assert_int_equal(edgert_pack(b, &t.view, &pk, err, sizeof err), EDGERT_E_UNSUPPORTED);
    assert_null(pk);
    assert_non_null(strstr(err, "k=200"));
    assert_non_null(strstr(err, "128"));
    assert_non_null(strstr(err, "blk.0.attn_q"));
    edgert_qtensor_free(&t);

    /* a group size the layout does not hold (32, 64 and 128 it does): refused,
     * names it */
    float w2[2 * 256];
    for (int i = 0; i < 512; i++)
        w2[i] = 0.01f * (float)(i % 11 - 5);
    assert_int_equal(edgert_quantize_rtn(w2, 2, 256, 16, 0, &t), EDGERT_OK);
    err[0] = '\0';
    assert_int_equal(edgert_pack(b, &t.view, &pk, err, sizeof err), EDGERT_E_UNSUPPORTED);
    assert_non_null(strstr(err, "group size 16"));
    edgert_qtensor_free(&t);

    /* bad gemm arguments */
    assert_int_equal(edgert_quantize_rtn(w2, 2, 256, 128, 0, &t), EDGERT_OK);
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

/* Bits per weight on the spark-1.7b shapes: <= 4.25 + the 256 bytes of
 * headers (the handle and the mappable bytes' header: 3.3e-4 bits here). */
static void test_packed_bits(void **state)
{
    fx *f = *state;
    AW_OR_SKIP(f);
    char err[512] = "";
    edgert_backend *b = NULL;
    assert_int_equal(edgert_backend_open(f->ctx, AW, NULL, &b, err, sizeof err), EDGERT_OK);
    enum { N = 3072, K = 2048 };
    float *w = calloc((size_t)N * K, sizeof *w);
    assert_non_null(w);
    uint64_t seed = 3;
    for (size_t i = 0; i < (size_t)N * K; i += 97)
        w[i] = rng_unit(&seed);
    edgert_qtensor t;
    assert_int_equal(edgert_quantize_rtn(w, N, K, 128, 0, &t), EDGERT_OK);
    edgert_packed *pk = NULL;
    assert_int_equal(edgert_pack(b, &t.view, &pk, err, sizeof err), EDGERT_OK);
    double bpw = (double)edgert_packed_bytes(pk) * 8.0 / ((double)N * K);
    printf("packed %u x %u: %zu bytes, %.6f bits per weight\n", N, K, edgert_packed_bytes(pk),
           bpw);
    assert_true(bpw <= 4.25 + 256.0 * 8.0 / ((double)N * K) + 1e-12);
    edgert_packed_free(pk);
    edgert_qtensor_free(&t);
    free(w);
    edgert_backend_close(b);
}

/* ---- the plugin's own refusals, with a fake host lacking flags ---------------- */

static void test_missing_flags(void **state)
{
    fx *f = *state;
    AW_OR_SKIP(f); /* the fma path's self-test runs AVX-512 code on this CPU */
    const edgert_candidate *c = edgert_candidate_find(f->ctx, AW);
    assert_non_null(c);
    assert_true(c->loaded); /* the auto path passed its self-test at open */
    assert_non_null(c->library_path);
    void *h = NULL;
    edgert_plugin_entry_fn entry = fh_entry(c->library_path, &h);

    const uint64_t base = (1ull << EDGERT_CPU_AVX512F) | (1ull << EDGERT_CPU_AVX512BW) |
                          (1ull << EDGERT_CPU_AVX512VL) | (1ull << EDGERT_CPU_FMA);
    edgert_host host = fh_host(1, base);
    const edgert_plugin *p = NULL;
    char err[512] = "";
    assert_int_equal(entry(1, 1, &host, &p, err, sizeof err), EDGERT_OK);
    void *inst = NULL;

    /* AVX-512F without BF16 or VNNI: fma works, the others are refused by name */
    err[0] = '\0';
    assert_int_equal(p->init(&host, "path=bf16", &inst, err, sizeof err), EDGERT_E_UNSUPPORTED);
    assert_null(inst);
    assert_non_null(strstr(err, "avx512_bf16"));
    assert_int_equal(p->init(&host, "path=int16", &inst, err, sizeof err), EDGERT_E_UNSUPPORTED);
    assert_non_null(strstr(err, "avx512_vnni"));
    assert_int_equal(p->init(&host, NULL, &inst, err, sizeof err), EDGERT_OK);
    assert_non_null(strstr(p->describe(inst), "fma"));
    assert_int_equal(p->self_test(inst, err, sizeof err), EDGERT_OK);
    p->fini(inst);
    inst = NULL;
    /* streams are the int16 GEMV's: a forced fma refuses them, auto reads
     * one stream where it lands on fma (the same options work everywhere) */
    assert_int_equal(p->init(&host, "path=fma streams=4", &inst, err, sizeof err),
                     EDGERT_E_USAGE);
    assert_non_null(strstr(err, "applies to the int16 decode"));
    assert_int_equal(p->init(&host, "streams=4", &inst, err, sizeof err), EDGERT_OK);
    assert_non_null(strstr(p->describe(inst), "fma"));
    assert_null(strstr(p->describe(inst), "streams"));
    /* one stream's default prefetch (aw_decode_defaults) */
    assert_non_null(strstr(p->describe(inst), tu_cpu_is_intel() ? "prefetch: L2 8 KiB ahead"
                                                                 : "prefetch: L1 6 KiB ahead"));
    p->fini(inst);
    inst = NULL;

    /* auto prefers int16, then bf16 */
    host.cpu_flags = base | (1ull << EDGERT_CPU_AVX512_BF16);
    assert_int_equal(p->init(&host, "", &inst, err, sizeof err), EDGERT_OK);
    assert_non_null(strstr(p->describe(inst), "bf16"));
    p->fini(inst);
    inst = NULL;

    /* path amx names the first flag it lacks */
    err[0] = '\0';
    assert_int_equal(p->init(&host, "path=amx", &inst, err, sizeof err), EDGERT_E_UNSUPPORTED);
    assert_non_null(strstr(err, "avx512_vnni"));
    host.cpu_flags |= 1ull << EDGERT_CPU_AVX512_VNNI;
    assert_int_equal(p->init(&host, "path=amx", &inst, err, sizeof err), EDGERT_E_UNSUPPORTED);
    assert_non_null(strstr(err, "amx_bf16"));
    assert_int_equal(p->init(&host, NULL, &inst, err, sizeof err), EDGERT_OK);
    assert_non_null(strstr(p->describe(inst), "int16"));
    p->fini(inst);
    inst = NULL;

    /* A host that claims AMX on a CPU whose OS refuses tile data (this
     * CPU, when it has no AMX): forced amx is refused with the reason, auto
     * falls back to int16 instead of failing. */
    const edgert_device *d = edgert_device_facts(f->ctx);
    if (!EDGERT_HAS_FLAG(d->cpu_flags, EDGERT_CPU_AMX_TILE)) {
        host.cpu_flags |= (1ull << EDGERT_CPU_AMX_BF16) | (1ull << EDGERT_CPU_AMX_TILE);
        err[0] = '\0';
        assert_int_equal(p->init(&host, "path=amx", &inst, err, sizeof err),
                         EDGERT_E_UNSUPPORTED);
        assert_null(inst);
        assert_non_null(strstr(err, "permission"));
        assert_int_equal(p->init(&host, NULL, &inst, err, sizeof err), EDGERT_OK);
        assert_non_null(strstr(p->describe(inst), "int16"));
        p->fini(inst);
        inst = NULL;
    }

    /* no AVX-512 at all: init refuses, naming the flag, and runs no kernel */
    host.cpu_flags = (1ull << EDGERT_CPU_AVX2) | (1ull << EDGERT_CPU_FMA);
    err[0] = '\0';
    assert_int_equal(p->init(&host, NULL, &inst, err, sizeof err), EDGERT_E_UNSUPPORTED);
    assert_non_null(strstr(err, "avx512f"));
    dlclose(h);
}

/* `edgert verify` end to end on the emulated tiles: correctness against
 * ref-w4a16 on every odd shape (m up to 512), SQNR and head top-1 on the
 * tiny workload (the default workload's fidelity, on the scalar tile model,
 * was most of this program's 3 minutes under ASan). */
static void test_verify_amx_emulated(void **state)
{
    fx *f = *state;
    f->pi = sizeof paths / sizeof paths[0] - 1u;
    PATH_OR_SKIP(f);
    char args[4096], *out = NULL;
    snprintf(args, sizeof args,
             "verify --quick --tokens 16 --workload %s/workloads/tiny.yaml --backend " AW_EMU
             " --options path=amx --manifests %s --manifests %s",
             EDGERT_TEST_FIXTURES, f->emu_dir, EDGERT_TEST_BACKEND_DIR);
    int rc = run(args, &out);
    if (rc != 0 || !strstr(out, AW_EMU " (amx: prefill on EMULATED AMX-BF16 tiles") ||
        !strstr(out, "all correct"))
        fail_msg("edgert %s: exit %d\n%.4000s", args, rc, out);
    free(out);
}

#if !defined(__x86_64__)
/* On another arch (the ARM64 cross build, run under qemu) the plugin folder
 * builds nothing and the manifest's arch gate must refuse the backend before
 * any load: that is all there is to test there. */
static void test_gated_out_on_other_arch(void **state)
{
    fx *f = *state;
    const edgert_candidate *c = edgert_candidate_find(f->ctx, AW);
    assert_non_null(c);
    assert_int_not_equal(edgert_device_facts(f->ctx)->arch, EDGERT_ARCH_X86_64);
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
    return tu_run_group(AW, other_arch, setup, teardown);
#endif
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_decode_options_same_bits),
        cmocka_unit_test(test_missing_flags),
        cmocka_unit_test(test_packed_bits),
        PATH_TEST(test_strides_and_zero_x, fma),
        PATH_TEST(test_strides_and_zero_x, bf16),
        PATH_TEST(test_strides_and_zero_x, int16),
        PATH_TEST(test_strides_and_zero_x, amx),
        PATH_TEST(test_strides_and_zero_x, amx_emulated),
        PATH_TEST(test_paths_against_ref, fma),
        PATH_TEST(test_paths_against_ref, bf16),
        PATH_TEST(test_paths_against_ref, int16),
        PATH_TEST(test_paths_against_ref, amx),
        PATH_TEST(test_paths_against_ref, amx_emulated),
        cmocka_unit_test(test_verify_amx_emulated),
    };
    return tu_run_group(AW, tests, setup, teardown);
}
