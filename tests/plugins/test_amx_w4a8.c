/*
 * tests/plugins/test_amx_w4a8.c — the amx-w4a8 backend (plugins/amx-w4a8: symmetric
 * int4 weights with fp16 scales, int8 activations per token) through the
 * public API (edgert_open / edgert_backend_open / edgert_pack / edgert_gemm),
 * every forced path against the reference backend ref-w4a16 and against an
 * exact sum, on odd shapes; its refusals; its packed size and packed-map
 * round trip; its flag checks on a host that lacks the flags.
 *
 * Length: over 700 lines because one backend with three paths (VNNI, real
 * tiles, the tile model) is checked here end to end: the error bound's
 * derivation below, the odd-shape sweep, bit equality between the paths,
 * refusals, options, packed sizes and maps; split, each file would repeat
 * the fixture that opens the paths and skips the ones this CPU lacks.
 *
 * Paths, each its own case "<function>[<path>]":
 *   vnni       amx-w4a8 path=vnni: AVX512_VNNI decode and prefill;
 *   amx        amx-w4a8 path=amx on REAL AMX-INT8 tiles: needs amx_tile and
 *              amx_int8 usable (CPU and OS); where they are not, the case
 *              reports SKIPPED (tu_skip) naming the flag, never passed;
 *   amx_model  amx-w4a8-amxemu path=amx: the same sources built on the
 *              software tile model (tests/plugins/amxemu), on any AVX512_VNNI
 *              CPU, so the tile path's blocking, tile layout and epilogue are
 *              checked where there is no AMX;
 *   avx2       amx-w4a8-256 path=avx2 (a test manifest for the library that
 *              requires avx2, fma and f16c, as the shipped avx2-w4a8 does):
 *              the vpmaddubsw GEMV for every m, on any x86 CPU of the last
 *              decade;
 *   avxvnni    amx-w4a8-256 path=avxvnni: the same GEMV on AVX-VNNI's
 *              vpdpbusd (Intel since Alder Lake and Sapphire Rapids);
 *   avxvnni_evex  amx-w4a8-amxemu path=avxvnni: that loop's instructions
 *              encoded as EVEX (the test build's A8_VNNI_EVEX), on any
 *              AVX512_VNNI CPU, so the loop is checked where AVX-VNNI is not.
 * A path whose flag this CPU lacks reports skipped, naming the flag. The
 * program prints one line saying which AMX it has: "AMX: real tiles" or
 * "AMX: not on this CPU, tile model only".
 *
 * How the backend is reached: the shipped manifests cannot serve here.
 * amx-w4a8.yaml requires amx_tile and amx_int8 (so on a CPU without AMX the
 * gates reject it before loading anything, as they must), and avx512-w4a8.yaml,
 * the path=vnni manifest, names the library's plugin through `plugin_name`,
 * which the core does not read yet. So the fixture writes, into a temp
 * folder searched first (first wins), a manifest "amx-w4a8" for the built
 * library that requires what every path of the library needs (avx512f,
 * avx512bw, avx512vl, avx512_vnni; exactly the plugin's own init check), and
 * one for the tile-model build. Whether path=amx may run is then the
 * plugin's own decision (its init checks amx_tile, amx_int8 and Linux's
 * tile-data permission), and that decision is what the cases test. The
 * flag refusals are also checked on the library itself, dlopen'ed with a
 * host table whose cpu_flags lack them (test_missing_flags).
 *
 * ---- Weights and activations -----------------------------------------------
 * Canonical weights: edgert_quantize_rtn(group 128), symmetric or not, then
 * every scale rounded to fp16 (as tools/verify_correct.c does, as GPTQ
 * stores them): the plugin's fp16 scales hold them exactly, so w_k = s_g
 * (q_k - z) (z = 8, or the column's zero point for the group) is the same
 * real number for the plugin, for ref-w4a16 and for the test.
 * Activations are quantized by the plugin per group of 128 (the default) or
 * per token (act_scale=token; a8_internal.h); the test does it the same
 * way, in the same fp32 operations as a8_prep and the plugin's
 * a8_effective_x: m = max |x_k| over the scale's span (the group, or the
 * token), inv = 127 / m, s = m / 127, a_k = rint(x_k * inv) clamped to
 * [-127, 127], x_e,k = s a_k; as the plugin, s_g = s, s_x = 1 per group,
 * s_g = 1, s_x = s per token. Same operations, same codes: the test knows
 * the plugin's activations exactly.
 *
 * ---- Tolerance (derivation) ------------------------------------------------
 * u = 2^-24. For one output y[i][r], G = k / 128 groups, integer codes
 * a_k (token i) and q_k (column r), d_g = sum_{k in g} a_k (q_k - 8):
 *   exact  y* = sum_g s_x s_g s_w,g d_g,   S = sum_k |x_e,k w_k| >= its terms,
 * s_g the group's activation scale, s_w,g the column's weight scale (one of
 * s_x and s_g is 1). The test forms y* in double: the product of the
 * scales is exact (24 + 11 significant bits),
 * times d_g (|d_g| <= 128 * 127 * 15 < 2^18) exact (53 bits), G <= 16 terms
 * summed with error <= G 2^-53 S (the 2^-40 S below).
 * The plugin:
 *   - d_g is an exact int32 (vpdpbusd products <= 127 * 15 with the exact
 *     z sum a correction; TDPBSSD products <= 127 * 15 of the codes minus
 *     z; sums < 2^18, no saturation), and its conversion to fp32 is exact
 *     (|d_g| < 2^24). No error before the epilogue.
 *   - the GEMV (m <= decode_max_m on either path), path vnni's register-
 *     tile prefill and path amx's tiles alike: y = fma(d_g, s_w,g s_g, y)
 *     per group (the product and the fma, two roundings each: 2G; the
 *     product is exact per token, s_g = 1), then y * s_x (one): 2G + 1;
 *   So |y - y*| <= gamma_{2G+1} S, gamma_n = n u / (1 - n u) < (n + 1) u here.
 *   Bound used:  B = (2G + 3) u S + 2^-40 S + 1e-30
 *   ((2G + 3) u: gamma_{2G+1}'s 2G + 1 roundings plus two u of room for its
 *   higher-order term; 2^-40 S: the double sum's own rounding; 1e-30: S = 0
 *   and underflow, which these magnitudes never reach). For k = 2048 that
 *   is 35 u S ~ 2.1e-6 S: one wrong activation code or a lost group fails,
 *   and so does a scale off by one fp16 ulp, on most outputs (the test
 *   prints the largest |y - y*| / B it met: about 0.3).
 * ref-w4a16 computes in fp32 on fp32 activations: it is given fl(x_e) (the
 * int8 activations as fp32, |fl(x_e) - x_e| <= u |x_e|) — the plugin's own
 * activations, so the difference x - x_e, W4A8's fidelity cost and no kernel
 * error, stays out, as `edgert verify` does for int8 activations. Its weights
 * s_g (q - 8) are exact in fp32 (11 + 4 bits); its products and sums over k
 * in any order give at most gamma_k (1 + u) S, so
 *   |y_ref - y*| <= (k + 2) u S               (checked too: the oracle's own)
 *   |y - y_ref|  <= B + (k + 2) u S.
 * Path amx's tiles (real or modelled) against path vnni's GEMV: the same
 * integers and the same fp32 operations in the same order, so the SAME
 * BITS, checked with memcmp (test_prefill_bits_equal_vnni).
 *
 * Every x row has NaN in its ldx padding (ldx > k) and every y row sentinels
 * in its ldy padding (ldy > n): reading past k or writing past n is caught.
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
#include "edgert/plugin.h"
#include "generate.h"
#include "common/internal.h" /* er_yaml, for test_cli_util.h */
#include "formats/safetensors.h" /* st_f32_to_f16, st_f16_to_f32: the fp16 rounding of verify */
#include "test_util.h"
#include "test_cli_util.h"
#include "test_fake_host.h"
#include "test_packed.h"

/* An unoptimized or sanitized build (the ASan/UBSan suite is a Debug build
 * at -Og) runs the tile model some 70 times slower than Release (measured:
 * 100 s for the full shape set of test_paths_against_ref[amx_model]; at
 * -Og under ASan on an AVX-512 Zen 4 with both scale modes and both weight
 * forms 142 s, and verify on the model 121 s: over ctest's 300). There the tile
 * model's cases leave out the largest products, which cross no boundary
 * the others do not (k = 2048 only for n <= 17, n = 1001 only with k = 128,
 * m = 512 and 600 only for n <= 17 and k <= 256; the map round trip on
 * [256, 2048]),
 * and `edgert verify` on the model is left to the optimized suite. The
 * test build's other path, avxvnni as EVEX, takes the same reduced set:
 * with it in full the sanitized program took 296 s of ctest's 300 on a
 * 2-core Xeon with AMX and AVX-VNNI (every path real there). */
#if defined(__OPTIMIZE__) && !defined(__SANITIZE_ADDRESS__)
#define A8_LIGHT 0
#else
#define A8_LIGHT 1
#endif

#define A8 "amx-w4a8"
#define A8_EMU "amx-w4a8-amxemu"
#define A8_LIB "libedgert-amx-w4a8.so" /* the shipped manifests' library */

#define FLAG(f) (1ull << (f))
#define BASE_FLAGS                                                                                \
    (FLAG(EDGERT_CPU_AVX512F) | FLAG(EDGERT_CPU_AVX512BW) | FLAG(EDGERT_CPU_AVX512VL))

typedef struct path_def {
    const char *backend; /* plugin name */
    const char *path;    /* the path option: "path=<this>" */
    const char *name;    /* what describe() says of it */
    edgert_cpu_flag flags[6];
    const char *flag_names[6];
    unsigned nflags;
} path_def;

#define P_VNNI 0u
#define P_AMX 1u
#define P_MODEL 2u
#define P_AVX2 3u
#define P_AVXVNNI 4u
#define P_AVXVNNI_EVEX 5u
#define A8_256 "amx-w4a8-256" /* the test manifest of the 256-bit paths */
#define A8_AVX2 "avx2-w4a8"   /* the shipped manifest: path=avxvnni,avx2 */
static const path_def paths[] = {
    [P_VNNI] = {A8, "vnni", "vnni: int8 activations",
                {EDGERT_CPU_AVX512F, EDGERT_CPU_AVX512BW, EDGERT_CPU_AVX512VL,
                 EDGERT_CPU_AVX512_VNNI},
                {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"}, 4},
    [P_AMX] = {A8, "amx", "prefill on AMX-INT8 tiles",
               {EDGERT_CPU_AMX_TILE, EDGERT_CPU_AMX_INT8, EDGERT_CPU_AVX512F,
                EDGERT_CPU_AVX512BW, EDGERT_CPU_AVX512VL, EDGERT_CPU_AVX512_VNNI},
               {"amx_tile", "amx_int8", "avx512f", "avx512bw", "avx512vl", "avx512_vnni"}, 6},
    [P_MODEL] = {A8_EMU, "amx", "prefill on the AMX tile MODEL",
                 {EDGERT_CPU_AVX512F, EDGERT_CPU_AVX512BW, EDGERT_CPU_AVX512VL,
                  EDGERT_CPU_AVX512_VNNI},
                 {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"}, 4},
    [P_AVX2] = {A8_256, "avx2", "avx2: int8 activations",
                {EDGERT_CPU_AVX2, EDGERT_CPU_FMA, EDGERT_CPU_F16C}, {"avx2", "fma", "f16c"}, 3},
    [P_AVXVNNI] = {A8_256, "avxvnni", "AVX-VNNI vpdpbusd GEMV",
                   {EDGERT_CPU_AVX2, EDGERT_CPU_FMA, EDGERT_CPU_F16C, EDGERT_CPU_AVX_VNNI},
                   {"avx2", "fma", "f16c", "avx_vnni"}, 4},
    [P_AVXVNNI_EVEX] = {A8_EMU, "avxvnni", "vpdpbusd on ymm (EVEX, test build) GEMV",
                        {EDGERT_CPU_AVX2, EDGERT_CPU_FMA, EDGERT_CPU_F16C, EDGERT_CPU_AVX512VL,
                         EDGERT_CPU_AVX512_VNNI},
                        {"avx2", "fma", "f16c", "avx512vl", "avx512_vnni"}, 5},
};

typedef struct fx {
    edgert_ctx *ctx;
    edgert_backend *ref;
    char *dir;       /* the test manifests */
    char *lib;       /* the built amx-w4a8 library */
    int real_tiles;  /* this CPU and OS provide amx_tile and amx_int8 */
    size_t pi;       /* the path of a per-path case: paths[pi] */
} fx;

#define PATH_SETUP(tag, index)                                                                    \
    static int on_##tag(void **state)                                                             \
    {                                                                                             \
        ((fx *)*state)->pi = (index);                                                             \
        return 0;                                                                                 \
    }
PATH_SETUP(vnni, P_VNNI)
PATH_SETUP(amx, P_AMX)
PATH_SETUP(amx_model, P_MODEL)
PATH_SETUP(avx2, P_AVX2)
PATH_SETUP(avxvnni, P_AVXVNNI)
PATH_SETUP(avxvnni_evex, P_AVXVNNI_EVEX)
/* The paths of the test-only build (tp_amx_w4a8_amxemu): the tile model,
 * and avxvnni's loop encoded as EVEX; A8_LIGHT gives them the reduced set. */
#define TEST_BUILD(pi) ((pi) == P_MODEL || (pi) == P_AVXVNNI_EVEX)
#define PATH_TEST(fn, tag) {#fn "[" #tag "]", fn, on_##tag, NULL, NULL}

/* A manifest for `library` under `name` that requires what every path of
 * the library needs; path=amx is left to the plugin's own checks. */
static char *write_manifest(const char *dir, const char *file, const char *name,
                            const char *library, const char *flags)
{
    return tu_write(dir, file,
                    "manifest_version: 1\n"
                    "name: %s\n"
                    "version: \"0.0.1\"\n"
                    "vendor: tests\n"
                    "library: \"%s\"\n"
                    "%s"
                    "abi: {min: 2, max: 2}\n"
                    "arch: x86_64\n"
                    "device_classes: [x86_cpu]\n"
                    "requires:\n"
                    "  cpu_flags: [%s]\n"
                    "processor: cpu\n"
                    "layout: {format: int4-asym-g128, weight_bits: 4, group_size: 128, "
                    "symmetric: false, activation_dtype: int8, activation_group_size: 128, "
                    "bits_per_weight: 4.1875}\n"
                    "runs_in_process: true\n"
                    "verified: false\n"
                    "rationale: \"test manifest (tests/plugins/test_amx_w4a8.c): the library on "
                    "the flags of its vnni path, or of its 256-bit paths; path=amx and "
                    "avx_vnni are the plugin's own checks\"\n",
                    name, library,
                    strcmp(name, A8_256) == 0 ? "plugin_name: " A8 "\n" : "", flags);
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    f->dir = tu_tmpdir();
    char *emu = tu_plugin("tp_amx_w4a8_amxemu");
    if (!f->dir || !emu || asprintf(&f->lib, "%s/%s", EDGERT_TEST_BACKEND_DIR, A8_LIB) < 0) {
        free(emu);
        return -1;
    }
    const char *f512 = "avx512f, avx512bw, avx512vl, avx512_vnni";
    free(write_manifest(f->dir, "a8.yaml", A8, f->lib, f512));
    free(write_manifest(f->dir, "a8emu.yaml", A8_EMU, emu, f512));
    free(write_manifest(f->dir, "a8-256.yaml", A8_256, f->lib, "avx2, fma, f16c"));
    free(emu);
    /* the test folder first: its amx-w4a8 shadows the shipped one */
    const char *dirs[2] = {f->dir, EDGERT_TEST_BACKEND_DIR};
    edgert_options o = {.struct_size = sizeof o};
    o.manifest_paths = dirs;
    o.manifest_path_count = 2;
    o.ignore_env = 1;
    o.threads = 2;
    o.log_level = EDGERT_LOG_ERROR;
    char err[512] = "";
    if (edgert_open(&o, &f->ctx, err, sizeof err) != EDGERT_OK) {
        fprintf(stderr, "edgert_open: %s\n", err);
        return -1;
    }
    if (edgert_backend_open(f->ctx, "ref-w4a16", NULL, &f->ref, err, sizeof err) != EDGERT_OK) {
        fprintf(stderr, "ref-w4a16: %s\n", err);
        return -1;
    }
    const edgert_device *d = edgert_device_facts(f->ctx);
    f->real_tiles = EDGERT_HAS_FLAG(d->cpu_flags, EDGERT_CPU_AMX_TILE) &&
                    EDGERT_HAS_FLAG(d->cpu_flags, EDGERT_CPU_AMX_INT8);
#if defined(__x86_64__)
    printf("%s\n", f->real_tiles ? "AMX: real tiles" : "AMX: not on this CPU, tile model only");
#else
    printf("AMX: not on this arch (x86-64 only)\n");
#endif
    fflush(stdout);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    edgert_backend_close(f->ref);
    edgert_close(f->ctx);
    tu_rmrf(f->dir);
    free(f->lib);
    free(f);
    return 0;
}

/* ---- data ------------------------------------------------------------------------ */

static float rng_unit(uint64_t *s) /* uniform in [-1, 1) */
{
    return (float)((double)(gen_splitmix64(s) >> 11) * 0x1.0p-52 - 1.0);
}

/* Activations with LLM-like spread: most around 1, a few outliers 30x
 * larger, some much smaller, every third group 100x smaller, one exact zero
 * per row; then NaN in each row's padding [k, ldx). */
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
        if (i % 5u == 3u && k >= 256u) /* a group of zeros in a live row: its scale 0 */
            memset(x + i * ldx + 128u, 0, 128u * sizeof *x);
        for (size_t c = k; c < ldx; c++)
            x[i * ldx + c] = NAN; /* padding of x must never be read into a result */
    }
}

/* Every scale of t rounded to fp16, as verify and GPTQ files have them (the
 * plugin's layout then holds them exactly), and its name. */
static void fp16_scales(edgert_qtensor *t, const char *name)
{
    for (size_t i = 0; i < (size_t)t->view.n * (t->view.k / 128u); i++)
        t->scales[i] = st_f16_to_f32(st_f32_to_f16(t->scales[i]));
    t->view.name = name;
}

/* The canonical SYMMETRIC tensor [n][k] from `seed`, group 128, scales
 * rounded to fp16 (exact in the plugin's layout). */
static void sym_weights(uint32_t n, uint32_t k, uint64_t seed, const char *name, edgert_qtensor *t)
{
    float *w = malloc(sizeof(float) * n * k);
    assert_non_null(w);
    for (size_t i = 0; i < (size_t)n * k; i++)
        w[i] = 0.05f * rng_unit(&seed) + (i % 7u == 0 ? 0.01f : 0.0f);
    assert_int_equal(edgert_quantize_rtn(w, n, k, 128, 1, t), EDGERT_OK);
    assert_null(t->zeros);
    free(w);
    fp16_scales(t, name);
}

/* The activations' scale modes (option act_scale): the span of one scale. */
#define SPAN_GROUP 128u
#define SPAN_TOKEN 0u

/* The canonical ASYMMETRIC tensor [n][k] (round to nearest, group 128,
 * fp16 scales): zero points all over 0..15, which the plugin packs with its
 * zero-point lines (a8_internal.h). */
static void asym_weights(uint32_t n, uint32_t k, uint64_t seed, const char *name,
                         edgert_qtensor *t)
{
    float *w = malloc(sizeof(float) * n * k);
    assert_non_null(w);
    for (size_t i = 0; i < (size_t)n * k; i++) /* skewed: zero points away from 8 */
        w[i] = 0.05f * rng_unit(&seed) + 0.02f * (float)((i / 128u) % 5u) - 0.03f;
    assert_int_equal(edgert_quantize_rtn(w, n, k, 128, 0, t), EDGERT_OK);
    assert_non_null(t->zeros);
    free(w);
    fp16_scales(t, name);
}

/* One token's activations as the plugin quantizes them (a8_prep and
 * a8_effective_x, in the same fp32 operations): the codes into a, each
 * group's scale s_g into sg[k / 128], s_x returned (NaN for a non-finite
 * x, 0 for a zero row). span SPAN_GROUP: a scale per group of 128 (s_g =
 * max_g / 127, 0 for a group of zeros; s_x = 1); SPAN_TOKEN: one per token
 * (s_g = 1, s_x = max / 127). */
static float quantize_token(const float *x, uint32_t k, uint32_t span, int8_t *a, float *sg)
{
    float m = 0.0f;
    int bad = 0;
    for (uint32_t c = 0; c < k; c++) {
        bad |= !isfinite(x[c]);
        m = fabsf(x[c]) > m ? fabsf(x[c]) : m;
    }
    if (bad || m == 0.0f) {
        memset(a, 0, k);
        for (uint32_t g = 0; g < k / 128u; g++)
            sg[g] = 0.0f;
        return bad ? NAN : 0.0f;
    }
    for (uint32_t g = 0; g < k / 128u; g++) {
        float mg = m;
        if (span == SPAN_GROUP) {
            mg = 0.0f;
            for (uint32_t c = 128u * g; c < 128u * (g + 1u); c++)
                mg = fabsf(x[c]) > mg ? fabsf(x[c]) : mg;
        }
        const float inv = mg != 0.0f ? 127.0f / mg : 0.0f;
        for (uint32_t c = 128u * g; c < 128u * (g + 1u); c++) {
            float q = rintf(x[c] * inv);
            q = q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q;
            a[c] = (int8_t)q;
        }
        sg[g] = span == SPAN_GROUP ? mg / 127.0f : 1.0f;
    }
    return span == SPAN_GROUP ? 1.0f : m / 127.0f;
}

/* The weights as integers the exact sums use: q - 8 per (column, input). */
static int8_t *weight_ints(const edgert_qtensor *t)
{
    const uint32_t n = t->view.n, k = t->view.k;
    int8_t *wq = malloc((size_t)n * k);
    assert_non_null(wq);
    for (uint32_t r = 0; r < n; r++)
        for (uint32_t c = 0; c < k; c++)
            wq[(size_t)r * k + c] =
                (int8_t)((int)edgert_qcode(&t->view, r, c) -
                         (t->view.zeros ? (int)t->view.zeros[(size_t)r * (k / 128u) + c / 128u]
                                        : 8));
    return wq;
}

/* y* and S for token codes a (scales sx and sg), column r (see the header). */
static void exact_dot(const int8_t *a, float sx, const float *sg, const int8_t *wq,
                      const float *scales, uint32_t k, double *exact, double *sum_xw)
{
    const uint32_t groups = k / 128u;
    double y = 0.0, s = 0.0;
    for (uint32_t g = 0; g < groups; g++) {
        int32_t d = 0, ad = 0;
        const int8_t *ag = a + (size_t)g * 128u, *wg = wq + (size_t)g * 128u;
        for (unsigned c = 0; c < 128u; c++) {
            const int32_t p = (int32_t)ag[c] * (int32_t)wg[c];
            d += p;
            ad += p < 0 ? -p : p;
        }
        /* exact: 24 + 11 bits (sx or sg[g] is 1) */
        const double ss = (double)sx * (double)sg[g] * (double)scales[g];
        y += ss * (double)d;                              /* exact: 35 + 17 bits */
        s += fabs(ss) * (double)ad;
    }
    *exact = y;
    *sum_xw = s;
}

/* The plugin's bound against y* (header: B). */
static double a8_bound(uint32_t k, double sum_xw)
{
    return ldexp(sum_xw * (double)(2u * (k / 128u) + 3u), -24) + ldexp(sum_xw, -40) + 1e-30;
}

/* ref-w4a16's own error against y*, on fl(x_e). */
static double ref_bound(uint32_t k, double sum_xw)
{
    return ldexp(sum_xw * (double)(k + 2u), -24);
}

/* ---- opening paths ---------------------------------------------------------------- */

/* 0 when this CPU has every flag of path pi, else 1 with the reason in why. */
static int path_lacks(const fx *f, size_t pi, char *why, size_t len)
{
    const edgert_device *d = edgert_device_facts(f->ctx);
    if (pi == P_AVXVNNI_EVEX && EDGERT_HAS_FLAG(d->cpu_flags, EDGERT_CPU_AVX_VNNI)) {
        /* the same loop runs as shipped here: [avxvnni] */
        snprintf(why, len, "%s path=%s: this CPU has avx_vnni, so case [avxvnni] runs this loop "
                 "as shipped; the EVEX test build is for CPUs without it", paths[pi].backend,
                 paths[pi].path);
        return 1;
    }
    for (unsigned i = 0; i < paths[pi].nflags; i++) {
        if (!EDGERT_HAS_FLAG(d->cpu_flags, paths[pi].flags[i])) {
            snprintf(why, len, "%s path=%s: this CPU lacks %s", paths[pi].backend, paths[pi].path,
                     paths[pi].flag_names[i]);
            return 1;
        }
    }
    return 0;
}

#define PATH_OR_SKIP(f, pi)                                                                       \
    do {                                                                                          \
        char lacks_[256];                                                                         \
        if (path_lacks(f, pi, lacks_, sizeof lacks_))                                             \
            tu_skip("%s", lacks_);                                                                \
    } while (0)

/* The instance of path pi with extra options (NULL: none). A path this CPU
 * lacks never gets here (PATH_OR_SKIP first). The one failure that is the
 * machine's and not the plugin's: Linux refusing the tile-data permission
 * on an AMX CPU; then *why says so and NULL is returned. */
static edgert_backend *open_path_opts(fx *f, size_t pi, const char *extra, char *why, size_t len)
{
    const path_def *p = &paths[pi];
    const edgert_candidate *c = edgert_candidate_find(f->ctx, p->backend);
    assert_non_null(c);
    if (!c->eligible)
        fail_msg("%s is not eligible on a CPU with its flags: %s %s", p->backend,
                 c->reason_count ? c->reasons[0] : "-", c->detail);
    char opt[128];
    snprintf(opt, sizeof opt, "path=%s%s%s", p->path, extra ? " " : "", extra ? extra : "");
    edgert_backend *b = NULL;
    char err[512] = "";
    /* a forced path runs the plugin's self-test inside backend_open */
    edgert_status st = edgert_backend_open(f->ctx, p->backend, opt, &b, err, sizeof err);
    if (st == EDGERT_E_UNSUPPORTED && pi == P_AMX && strstr(err, "permission") && why) {
        snprintf(why, len, "%s: %s", opt, err);
        return NULL;
    }
    if (st != EDGERT_OK)
        fail_msg("%s %s: %s", p->backend, opt, err);
    if (!strstr(edgert_backend_describe(b), p->name))
        fail_msg("%s %s: describe() says '%s', not '%s'", p->backend, opt,
                 edgert_backend_describe(b), p->name);
    return b;
}

#define OPEN_OR_SKIP(f, pi, extra, out)                                                           \
    do {                                                                                          \
        char why_[1024] = "";                                                                     \
        PATH_OR_SKIP(f, pi);                                                                      \
        (out) = open_path_opts(f, pi, extra, why_, sizeof why_);                                  \
        if (!(out))                                                                               \
            tu_skip("%s", why_);                                                                  \
    } while (0)

static edgert_packed *pack_or_fail(edgert_backend *b, const edgert_qtensor *t)
{
    edgert_packed *pk = NULL;
    char err[512] = "";
    if (edgert_pack(b, &t->view, &pk, err, sizeof err) != EDGERT_OK)
        fail_msg("%s: pack %s [n=%u k=%u]: %s", edgert_backend_name(b), t->view.name,
                 t->view.n, t->view.k, err);
    return pk;
}

static void gemm_or_fail(edgert_backend *b, const edgert_packed *pk, uint32_t m, const float *x,
                         size_t ldx, float *y, size_t ldy)
{
    edgert_gemm_args a = {sizeof a, m, x, ldx, y, ldy};
    char err[512] = "";
    if (edgert_gemm(b, pk, &a, err, sizeof err) != EDGERT_OK)
        fail_msg("%s: gemm m=%u: %s", edgert_backend_name(b), m, err);
}

#define SENTINEL (-777.25f)

static float *sentinel_y(uint32_t m, size_t ldy)
{
    float *y = malloc(sizeof(float) * m * ldy);
    assert_non_null(y);
    for (size_t i = 0; i < (size_t)m * ldy; i++)
        y[i] = SENTINEL;
    return y;
}

static void padding_untouched(const char *who, const float *y, uint32_t m, uint32_t n,
                              size_t ldy)
{
    for (uint32_t i = 0; i < m; i++)
        for (size_t c = n; c < ldy; c++)
            if (y[i * ldy + c] != SENTINEL)
                fail_msg("%s m=%u n=%u: y[%u][%zu] beyond n was written", who, m, n, i, c);
}

/* ---- 1. every path against the exact sum and ref-w4a16 ----------------------------- */

/* One (path, m) check on a packed tensor; the largest |y - y*| / B seen is
 * kept in *worst (to show the bound is not vacuous). */
static void check_shape(fx *f, edgert_backend *b, const path_def *p, uint32_t span,
                        const edgert_qtensor *t, const int8_t *wq, const edgert_packed *pk,
                        const edgert_packed *pref, uint32_t m, uint64_t seed, double *worst)
{
    const uint32_t n = t->view.n, k = t->view.k, groups = k / 128u;
    const size_t ldx = (size_t)k + 5u, ldy = (size_t)n + 3u;
    float *x = malloc(sizeof(float) * m * ldx), *xe = malloc(sizeof(float) * m * ldx);
    int8_t *a = malloc((size_t)m * k);
    float *sx = malloc(sizeof(float) * m), *sg = malloc(sizeof(float) * m * groups);
    assert_true(x && xe && a && sx && sg);
    fill_x(x, m, k, ldx, seed);
    for (uint32_t i = 0; i < m; i++) {
        sx[i] = quantize_token(x + i * ldx, k, span, a + (size_t)i * k, sg + (size_t)i * groups);
        for (size_t c = 0; c < ldx; c++) /* ref's input: fl(x_e), the same NaN padding */
            xe[i * ldx + c] =
                c < k ? sx[i] * sg[(size_t)i * groups + c / 128u] * (float)a[(size_t)i * k + c]
                      : NAN;
    }
    float *y = sentinel_y(m, ldy), *yr = sentinel_y(m, ldy);
    gemm_or_fail(b, pk, m, x, ldx, y, ldy);
    gemm_or_fail(f->ref, pref, m, xe, ldx, yr, ldy);
    padding_untouched(p->path, y, m, n, ldy);
    padding_untouched("ref-w4a16", yr, m, n, ldy);

    for (uint32_t i = 0; i < m; i++) {
        for (uint32_t r = 0; r < n; r++) {
            double exact, sum_xw;
            exact_dot(a + (size_t)i * k, sx[i], sg + (size_t)i * groups, wq + (size_t)r * k,
                      t->view.scales + (size_t)r * groups, k, &exact, &sum_xw);
            const double got = y[i * ldy + r], ref = yr[i * ldy + r];
            const double bound = a8_bound(k, sum_xw), bref = ref_bound(k, sum_xw);
            if (fabs(got - exact) / bound > *worst)
                *worst = fabs(got - exact) / bound;
            if (!(fabs(got - exact) <= bound))
                fail_msg("%s %s m=%u n=%u k=%u: y[%u][%u] = %.9g, exact %.9g: |err| %.3g > "
                         "bound %.3g",
                         p->backend, p->path, m, n, k, i, r, got, exact, fabs(got - exact),
                         bound);
            if (!(fabs(ref - exact) <= bref))
                fail_msg("ref-w4a16 m=%u n=%u k=%u: y[%u][%u] = %.9g, exact %.9g: |err| %.3g > "
                         "its bound %.3g",
                         m, n, k, i, r, ref, exact, fabs(ref - exact), bref);
            if (!(fabs(got - ref) <= bound + bref))
                fail_msg("%s %s m=%u n=%u k=%u: y[%u][%u] = %.9g, ref-w4a16 %.9g: |diff| %.3g > "
                         "%.3g",
                         p->backend, p->path, m, n, k, i, r, got, ref, fabs(got - ref),
                         bound + bref);
        }
    }
    free(x);
    free(xe);
    free(a);
    free(sx);
    free(sg);
    free(y);
    free(yr);
}

/* Every shape of the set against the exact sum and ref-w4a16, with the
 * activation scale mode `span` of instance b; `few`: a subset of n and k
 * (the second mode's: its kernels are the same, only prep and the scales'
 * product differ). */
static void shapes_against_ref(fx *f, edgert_backend *b, uint32_t span, int few, int asym)
{
    const path_def *p = &paths[f->pi];
    /* decode (<= 8 on path amx) and prefill: AMX blocks of 16 tokens,
     * full and partial; panels of 16 columns, full and partial, items of 3
     * (vnni) and 2 (amx) panels, full and partial; 1, 2, 3 and 16 groups */
    static const uint32_t ms[] = {1, 2, 3, 4, 5, 8, 9, 17, 31, 32, 33, 64};
    static const uint32_t ns[] = {1, 15, 16, 17, 33, 48, 87, 1001};
    static const uint32_t ks[] = {128, 256, 384, 2048};
    uint64_t seed = asym ? 4343u : span == SPAN_GROUP ? 42u : 4242u;
    char name[64];
    double worst = 0.0;

    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            const uint32_t n = ns[ni], k = ks[ki];
            const int light = A8_LIGHT && TEST_BUILD(f->pi);
            if (light && ((k == 2048u && n > 17u) || (n == 1001u && k > 128u)))
                continue;
            if (few && (n == 15u || n == 16u || n == 48u || n == 1001u || k == 256u))
                continue;
            snprintf(name, sizeof name, "blk.%zu.shape_n%u_k%u", ni, n, k);
            edgert_qtensor t;
            if (asym)
                asym_weights(n, k, seed++, name, &t);
            else
                sym_weights(n, k, seed++, name, &t);
            int8_t *wq = weight_ints(&t);
            edgert_packed *pk = pack_or_fail(b, &t), *pref = pack_or_fail(f->ref, &t);
            for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
                check_shape(f, b, p, span, &t, wq, pk, pref, ms[mi], seed++, &worst);
            if (n <= 48u && !(light && (n > 17u || k > 256u))) { /* prefill-sized m, small n */
                check_shape(f, b, p, span, &t, wq, pk, pref, 512u, seed++, &worst);
                /* beyond one chunk of path amx's accumulators (512 tokens:
                 * A8_AMX_RC), the second partial, not whole token blocks */
                check_shape(f, b, p, span, &t, wq, pk, pref, 600u, seed++, &worst);
            }
            edgert_packed_free(pk);
            edgert_packed_free(pref);
            edgert_qtensor_free(&t);
            free(wq);
        }
    }
    print_message("%s path=%s act_scale=%s, %s weights: largest |y - y*| / bound %.3f%s\n",
                  p->backend, p->path, span == SPAN_GROUP ? "group" : "token",
                  asym ? "asymmetric" : "symmetric", worst,
                  A8_LIGHT && TEST_BUILD(f->pi) ? " (unoptimized or sanitized: the reduced set)"
                                                : "");
}

static void test_paths_against_ref(void **state)
{
    fx *f = *state;
    edgert_backend *b = NULL, *bt = NULL;
    OPEN_OR_SKIP(f, f->pi, NULL, b);
    shapes_against_ref(f, b, SPAN_GROUP, 0, 0);
    shapes_against_ref(f, b, SPAN_GROUP, 1, 1); /* the zero points' lines and products */
    edgert_backend_close(b);
    if (A8_LIGHT && TEST_BUILD(f->pi)) { /* its preps are vnni's and avx2's, run there */
        tu_skip_line(__func__, "",
                     "act_scale=token on a test build's path: unoptimized or sanitized build "
                     "(paths vnni and avx2 run it)");
        return;
    }
    OPEN_OR_SKIP(f, f->pi, "act_scale=token", bt);
    shapes_against_ref(f, bt, SPAN_TOKEN, 1, 0);
    shapes_against_ref(f, bt, SPAN_TOKEN, 1, 1);
    edgert_backend_close(bt);
}

/* ---- 2. every prefill gives the GEMV's bits ----------------------------------------- */

/* y of path pi and of path vnni on the same weights and x, padding and all,
 * memcmp'ed. */
static void same_bits(fx *f, edgert_backend *b, edgert_backend *v, uint32_t m, uint32_t n,
                      uint32_t k, uint64_t seed, int asym)
{
    char name[64];
    snprintf(name, sizeof name, "bits.m%u.n%u.k%u%s", m, n, k, asym ? ".asym" : "");
    edgert_qtensor t;
    if (asym)
        asym_weights(n, k, seed, name, &t);
    else
        sym_weights(n, k, seed, name, &t);
    edgert_packed *pb = pack_or_fail(b, &t), *pv = pack_or_fail(v, &t);
    const size_t ldx = (size_t)k + 3u, ldy = (size_t)n + 1u;
    float *x = malloc(sizeof(float) * m * ldx);
    assert_non_null(x);
    fill_x(x, m, k, ldx, seed ^ 0x5555u);
    float *yv = sentinel_y(m, ldy);
    gemm_or_fail(v, pv, m, x, ldx, yv, ldy);
    /* b twice: prefetch=auto runs a weight's first two m = 1 calls in its
     * two modes (plugins/kit/x86/decode_tuning.c) */
    for (int call = 0; call < 2; call++) {
        float *yb = sentinel_y(m, ldy);
        gemm_or_fail(b, pb, m, x, ldx, yb, ldy);
        if (memcmp(yb, yv, sizeof(float) * m * ldy) != 0) {
            size_t i = 0;
            while (memcmp(&yb[i], &yv[i], sizeof(float)) == 0)
                i++;
            fail_msg("%s m=%u n=%u k=%u call %d: not the GEMV's bits (%s): y[%zu][%zu] = %a, "
                     "GEMV %a",
                     edgert_backend_describe(b), m, n, k, call, edgert_backend_describe(v),
                     i / ldy, i % ldy, (double)yb[i], (double)yv[i]);
        }
        free(yb);
    }
    free(x);
    free(yv);
    edgert_packed_free(pb);
    edgert_packed_free(pv);
    edgert_qtensor_free(&t);
}

static void test_prefill_bits_equal_vnni(void **state)
{
    fx *f = *state;
    edgert_backend *b = NULL;
    OPEN_OR_SKIP(f, f->pi, "decode_max_m=4", b);
    /* the GEMV (path vnni with decode_max_m=512), path vnni's register tile
     * (the default above m = 16; f->pi vnni with decode_max_m=4 here),
     * path amx's tiles and path avx2's GEMV share one arithmetic: the same
     * exact d per group, one FMA per group in group order, times s_x at the
     * end. Path avx2 on a CPU without VNNI: against its own GEMV at every m
     * (its items of panels over group-major tokens above decode_max_m),
     * and the comparison with path vnni's bits said skipped. */
    char why[256];
    size_t vp = P_VNNI;
    if (path_lacks(f, P_VNNI, why, sizeof why)) {
        vp = f->pi;
        tu_skip_line(__func__, "", "against path vnni's bits: %s (against its own GEMV only)",
                     why);
    }
    edgert_backend *v = open_path_opts(f, vp, "decode_max_m=512", NULL, 0);
    /* token blocks of 32 and chunks of 256 (A8_AMX_RC), full and partial;
     * items of 2 panels and a last item of 1 (n = 33, 1001); every second
     * shape asymmetric (its zero points in the tiles' codes, in the VNNI
     * tile's and the GEMV's products) */
    static const uint32_t shapes[][3] = {
        {5, 87, 256},    {8, 1001, 128},  {9, 33, 384},  {17, 15, 128},
        {31, 48, 2048},  {32, 16, 256},   {33, 1001, 384}, {64, 87, 2048},
        {512, 17, 256},  {40, 87, 256},   {300, 33, 384},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        same_bits(f, b, v, shapes[i][0], shapes[i][1], shapes[i][2], 900u + i, (int)(i & 1u));
    edgert_backend_close(b);
    edgert_backend_close(v);

    /* decode_max_m=1: m = 2..4 take the tiles too, and still agree */
    b = open_path_opts(f, f->pi, "decode_max_m=1", NULL, 0);
    v = open_path_opts(f, vp, "decode_max_m=512", NULL, 0);
    for (uint32_t m = 2; m <= 4; m++)
        same_bits(f, b, v, m, 33, 384, 950u + m, 0);
    edgert_backend_close(b);
    edgert_backend_close(v);
}

/* ---- 4. refusals and options -------------------------------------------------------- */

static void expect_pack_refused(edgert_backend *b, const edgert_qweights *w, edgert_status want,
                                const char *const *needles)
{
    edgert_packed *pk = (edgert_packed *)(uintptr_t)1;
    char err[512] = "";
    edgert_status st = edgert_pack(b, w, &pk, err, sizeof err);
    if (st != want)
        fail_msg("pack %s [n=%u k=%u group=%u]: %s, expected %s: %s", w->name, w->n, w->k,
                 w->group, edgert_status_name(st), edgert_status_name(want), err);
    assert_null(pk);
    for (size_t i = 0; needles[i]; i++)
        if (!strstr(err, needles[i]))
            fail_msg("pack %s: the refusal does not say '%s': %s", w->name, needles[i], err);
}

/* The shipped avx512-w4a8 is this library with plugin_options path=vnni:
 * options from edgert_backend_open come after those and cannot contradict
 * them (an integrator's walkthrough ran path=amx under its name). */
static void test_manifest_options_fixed(void **state)
{
    fx *f = *state;
    PATH_OR_SKIP(f, P_VNNI);
    char err[512] = "";
    edgert_backend *b = NULL;
    const char *name = "avx512-w4a8";
    if (!edgert_candidate_find(f->ctx, name) || !edgert_candidate_find(f->ctx, name)->eligible)
        fail_msg("the shipped %s is not eligible on a CPU with its flags", name);
    static const char *const more[] = {NULL, "", "prefetch=near", "path=vnni prefetch=far"};
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
        if (edgert_backend_open(f->ctx, name, more[i], &b, err, sizeof err) != EDGERT_OK)
            fail_msg("%s with '%s': %s", name, more[i] ? more[i] : "(null)", err);
        if (!strstr(edgert_backend_describe(b), paths[P_VNNI].name))
            fail_msg("%s with '%s' runs '%s', not path vnni", name, more[i] ? more[i] : "(null)",
                     edgert_backend_describe(b));
        edgert_backend_close(b);
    }
    static const char *const against[] = {"path=amx", "prefetch=near path=auto", "path="};
    for (size_t i = 0; i < sizeof against / sizeof against[0]; i++) {
        b = (edgert_backend *)(uintptr_t)1;
        edgert_status st = edgert_backend_open(f->ctx, name, against[i], &b, err, sizeof err);
        if (st != EDGERT_E_USAGE || b != NULL || !strstr(err, name) || !strstr(err, "path=vnni"))
            fail_msg("%s with '%s': %s (expected EDGERT_E_USAGE naming the manifest's "
                     "path=vnni): %s", name, against[i], edgert_status_name(st), err);
    }
}

/* The shipped avx2-w4a8 (plugin_options path=avxvnni,avx2): eligible on
 * any CPU with avx2, fma and f16c, on path avxvnni where avx_vnni is
 * usable and avx2 elsewhere; a path option of a caller contradicts it. */
static void test_shipped_256(void **state)
{
    fx *f = *state;
    PATH_OR_SKIP(f, P_AVX2);
    const edgert_candidate *c = edgert_candidate_find(f->ctx, A8_AVX2);
    if (c == NULL || !c->eligible)
        fail_msg("the shipped " A8_AVX2 " is not eligible on a CPU with avx2, fma and f16c");
    const int vnni = !path_lacks(f, P_AVXVNNI, NULL, 0);
    edgert_backend *b = NULL;
    char err[512] = "";
    if (edgert_backend_open(f->ctx, A8_AVX2, NULL, &b, err, sizeof err) != EDGERT_OK)
        fail_msg(A8_AVX2 ": %s", err);
    if (!strstr(edgert_backend_describe(b), vnni ? "avxvnni:" : "avx2:"))
        fail_msg(A8_AVX2 " on a CPU %s avx_vnni runs '%s'", vnni ? "with" : "without",
                 edgert_backend_describe(b));
    edgert_backend_close(b);
    b = (edgert_backend *)(uintptr_t)1;
    edgert_status st = edgert_backend_open(f->ctx, A8_AVX2, "path=avx2", &b, err, sizeof err);
    if (st != EDGERT_E_USAGE || b != NULL || !strstr(err, "path=avxvnni,avx2"))
        fail_msg(A8_AVX2 " with path=avx2: %s (expected EDGERT_E_USAGE naming the manifest's "
                 "list): %s", edgert_status_name(st), err);
}

/* Length: a table-like list of independent refusals (zero points past 15,
 * scale range, group size, k, options), each with the words its error must
 * say; one function so a refusal is never left out of the list. */
static void test_refusals(void **state)
{
    fx *f = *state;
    PATH_OR_SKIP(f, P_VNNI);
    char err[512] = "";
    edgert_backend *b = NULL;

    /* options: anything unknown or out of range is EDGERT_E_USAGE, named */
    static const char *bad[] = {
        "path=warp-drive", "threads=3", "path=", "path=vnni extra", "path=avx2,avx2",
        "path=avx2,", "path=,avx2", "path=vnni,,avx2", "path=auto,avx2", "decode_max_m=0",
        "decode_max_m=513", "decode_max_m=abc", "decode_max_m=-1", "decode_max_m=",
        "decode_max_m=+4", "decode_max_m=4x", "decode_max_m=99999999999999999999",
        "prefetch=sideways", "prefetch=", "prefetch=far-l2", "prefetch=far-l",
        "streams=3", "streams=", "streams=44", "streams=0",
        "prefetch=auto streams=auto", "streams=auto prefetch=far prefetch=auto",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        b = (edgert_backend *)(uintptr_t)1;
        edgert_status st = edgert_backend_open(f->ctx, A8, bad[i], &b, err, sizeof err);
        if (st != EDGERT_E_USAGE || b != NULL || !strstr(err, A8))
            fail_msg("options '%s': %s (expected EDGERT_E_USAGE naming " A8 "): %s", bad[i],
                     edgert_status_name(st), err);
        if (strncmp(bad[i], "decode_max_m=", 13) == 0 && !strstr(err, "decode_max_m"))
            fail_msg("options '%s': the refusal does not name decode_max_m: %s", bad[i], err);
    }
    static const char *good[] = {"decode_max_m=1", "decode_max_m=512", "path=vnni decode_max_m=64",
                                 "path=vnni,avx2", "path=avxvnni,vnni",
                                 "  path=auto\tdecode_max_m=07 ", "", "prefetch=far",
                                 "path=vnni prefetch=near", "prefetch=none streams=2"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        if (edgert_backend_open(f->ctx, A8, good[i], &b, err, sizeof err) != EDGERT_OK)
            fail_msg("options '%s' refused: %s", good[i], err);
        edgert_backend_close(b);
    }
    /* the decode prefetch (a8_kern.h) changes no result */
    b = open_path_opts(f, P_VNNI, "prefetch=near", NULL, 0);
    edgert_backend *v = open_path_opts(f, P_VNNI, "prefetch=far", NULL, 0);
    edgert_backend *l1 = open_path_opts(f, P_VNNI, "prefetch=far-l1", NULL, 0);
    assert_non_null(strstr(edgert_backend_describe(b), "L2 4 KiB and L1 512 B ahead"));
    assert_non_null(strstr(edgert_backend_describe(v), "L2 8 KiB ahead"));
    assert_non_null(strstr(edgert_backend_describe(l1), "decode prefetch: L1 6 KiB ahead"));
    for (uint32_t m = 1; m <= 5; m++) {
        same_bits(f, b, v, m, 1001, 2048, 970u + m, 0);
        same_bits(f, l1, v, m, 1001, 2048, 975u + m, 0);
    }
    edgert_backend_close(b);
    edgert_backend_close(l1);
    /* nor do the streams the m = 1 GEMV reads side by side, with a part of
     * the panels left over (1001 columns: 63 panels) or fewer panels than
     * streams (37 columns: 3) */
    /* the defaults (a8_decode_defaults) last: on Intel near for one stream
     * and none beside several, elsewhere auto (far-l1 against none) for both */
    const int intel = tu_cpu_is_intel();
    static const char *const streams[] = {"streams=2 prefetch=none", "streams=4 prefetch=far",
                                          "streams=4 prefetch=far-l1",
                                          "prefetch=near streams=4", "streams=4 prefetch=auto",
                                          "prefetch=auto", "streams=4", "streams=auto",
                                          "prefetch=none streams=auto", ""};
    const char *const said[] = {
        "prefetch: none, 2 streams per thread at m = 1 (prefetch: none)",
        "4 streams per thread at m = 1 (prefetch: L2 8 KiB ahead)",
        "4 streams per thread at m = 1 (prefetch: L1 6 KiB ahead)",
        "4 streams per thread at m = 1 (prefetch: L2 4 KiB and L1 512 B ahead)",
        /* near on Intel, else far-l1 */
        intel ? "4 streams per thread at m = 1 (prefetch: auto (L2 4 KiB and L1 512 B ahead "
              : "4 streams per thread at m = 1 (prefetch: auto (L1 6 KiB ahead or ",
        intel ? "decode prefetch: auto (L2 4 KiB and L1 512 B ahead or none"
              : "decode prefetch: auto (L1 6 KiB ahead or none",
        intel ? "4 streams per thread at m = 1 (prefetch: none)"
              : "4 streams per thread at m = 1 (prefetch: auto (L1 6 KiB ahead or none",
        intel ? "decode prefetch: L2 4 KiB and L1 512 B ahead, or 4 streams per thread at m = 1 "
                "(prefetch: none), whichever the last calls ran faster (streams=auto)"
              : "decode prefetch: L1 6 KiB ahead, or 4 streams per thread at m = 1 (prefetch: "
                "none), whichever the last calls ran faster (streams=auto)",
        "decode prefetch: none, or 4 streams per thread at m = 1 (prefetch: none), whichever",
        intel ? "decode prefetch: L2 4 KiB and L1 512 B ahead"
              : "decode prefetch: auto (L1 6 KiB ahead or none, whichever the last calls ran "
                "faster)"};
    for (size_t i = 0; i < sizeof streams / sizeof streams[0]; i++) {
        b = open_path_opts(f, P_VNNI, streams[i], NULL, 0);
        if (!strstr(edgert_backend_describe(b), said[i]))
            fail_msg("'%s' describes itself as '%s'", streams[i], edgert_backend_describe(b));
        for (uint32_t m = 1; m <= 2; m++) {
            same_bits(f, b, v, m, 1001, 2048, 980u + m, 0);
            same_bits(f, b, v, m, 37, 384, 990u + m, 1);
        }
        edgert_backend_close(b);
    }
    edgert_backend_close(v);
    b = open_path_opts(f, P_VNNI, NULL, NULL, 0);

    enum { N = 5, K = 256, G = K / 128 };
    edgert_qtensor t;
    /* a zeros array of all 8 is symmetric: accepted, the same packed bytes
     * and the same results as zeros = NULL; one zero point of 7 refused */
    edgert_qtensor s;
    sym_weights(N, K, 12, "blk.3.attn_v", &s);
    uint8_t zeros[N * G];
    memset(zeros, 8, sizeof zeros);
    edgert_qweights wz = s.view;
    wz.zeros = zeros;
    edgert_packed *p0 = pack_or_fail(b, &s), *p8 = NULL;
    if (edgert_pack(b, &wz, &p8, err, sizeof err) != EDGERT_OK)
        fail_msg("zeros all 8: pack refused: %s", err);
    const void *d0 = NULL, *d8 = NULL;
    size_t n0 = 0, n8 = 0;
    assert_int_equal(edgert_packed_data(p0, &d0, &n0, err, sizeof err), EDGERT_OK);
    assert_int_equal(edgert_packed_data(p8, &d8, &n8, err, sizeof err), EDGERT_OK);
    assert_int_equal(n0, n8);
    assert_memory_equal(d0, d8, n0);
    float x[3 * K], y0[3 * N], y8[3 * N];
    fill_x(x, 3, K, K, 13);
    gemm_or_fail(b, p0, 3, x, K, y0, N);
    gemm_or_fail(b, p8, 3, x, K, y8, N);
    assert_memory_equal(y0, y8, sizeof y0);
    edgert_packed_free(p0);
    edgert_packed_free(p8);
    /* one zero point of 7: the asymmetric layout (its zero-point line: 64
     * bytes more per panel), no longer refused; a zero point past 15 is */
    zeros[N * G - 1] = 7;
    edgert_packed *p7 = NULL;
    if (edgert_pack(b, &wz, &p7, err, sizeof err) != EDGERT_OK)
        fail_msg("one zero point of 7: pack refused: %s", err);
    const void *d7 = NULL;
    size_t n7 = 0;
    assert_int_equal(edgert_packed_data(p7, &d7, &n7, err, sizeof err), EDGERT_OK);
    assert_int_equal(n7, n0 + 64u);
    edgert_packed_free(p7);
    zeros[N * G - 1] = 16;
    static const char *const z16_says[] = {"blk.3.attn_v", "zero point 16", "[0, 15]", NULL};
    expect_pack_refused(b, &wz, EDGERT_E_USAGE, z16_says);

    /* scales beyond fp16 (the layout stores fp16): refused, named; the
     * largest fp16 (65504) and what rounds to it are accepted */
    const float keep = s.scales[3];
    static const char *const big_says[] = {"blk.3.attn_v", "fp16", NULL};
    const float too_big[] = {1e6f, -1e6f, 65520.0f, INFINITY};
    for (size_t i = 0; i < sizeof too_big / sizeof too_big[0]; i++) {
        s.scales[3] = too_big[i];
        if (isfinite(too_big[i]))
            expect_pack_refused(b, &s.view, EDGERT_E_UNSUPPORTED, big_says);
        else {
            edgert_packed *pk = NULL;
            assert_int_not_equal(edgert_pack(b, &s.view, &pk, err, sizeof err), EDGERT_OK);
            assert_null(pk);
        }
    }
    s.scales[3] = NAN;
    {
        edgert_packed *pk = NULL;
        assert_int_not_equal(edgert_pack(b, &s.view, &pk, err, sizeof err), EDGERT_OK);
        assert_null(pk);
        assert_non_null(strstr(err, "blk.3.attn_v"));
    }
    const float fit[] = {65504.0f, 65519.0f, -65504.0f};
    for (size_t i = 0; i < sizeof fit / sizeof fit[0]; i++) {
        s.scales[3] = fit[i];
        edgert_packed *pk = pack_or_fail(b, &s);
        gemm_or_fail(b, pk, 3, x, K, y0, N);
        for (int j = 0; j < 3 * N; j++)
            assert_true(isfinite(y0[j]));
        edgert_packed_free(pk);
    }
    s.scales[3] = keep;
    edgert_qtensor_free(&s);

    /* k not a multiple of 128: refused cleanly, naming k */
    float w2[3 * 200];
    for (int i = 0; i < 3 * 200; i++)
        w2[i] = 0.01f * (float)(i % 17 - 8);
    assert_int_equal(edgert_quantize_rtn(w2, 3, 200, 128, 1, &t), EDGERT_OK);
    t.view.name = "blk.0.attn_q";
    static const char *const k_says[] = {A8, "blk.0.attn_q", "k=200", "128", NULL};
    expect_pack_refused(b, &t.view, EDGERT_E_UNSUPPORTED, k_says);
    edgert_qtensor_free(&t);

    /* another group size: refused, naming it */
    static const uint32_t groups[] = {32, 64, 256};
    float w3[2 * 512];
    for (int i = 0; i < 2 * 512; i++)
        w3[i] = 0.01f * (float)(i % 11 - 5);
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        char says[32];
        snprintf(says, sizeof says, "group size %u", groups[i]);
        const char *const g_says[] = {A8, "blk.1.ffn_down", says, NULL};
        assert_int_equal(edgert_quantize_rtn(w3, 2, 512, groups[i], 1, &t), EDGERT_OK);
        t.view.name = "blk.1.ffn_down";
        expect_pack_refused(b, &t.view, EDGERT_E_UNSUPPORTED, g_says);
        edgert_qtensor_free(&t);
    }
    edgert_backend_close(b);
}

/* decode_max_m=64: m up to 64 runs the GEMV — each row's bits are then
 * those of a gemm with m = 1 — and agrees with the default (prefill above
 * m = 4) within twice the bound. */
static void test_decode_max_m(void **state)
{
    fx *f = *state;
    edgert_backend *b = NULL;
    OPEN_OR_SKIP(f, f->pi, NULL, b);
    edgert_backend *g = open_path_opts(f, f->pi, "decode_max_m=64", NULL, 0);
    enum { N = 87, K = 384 };
    const size_t ldx = K + 1u, ldy = N + 2u;
    edgert_qtensor t;
    sym_weights(N, K, 21, "blk.5.ffn_up", &t);
    int8_t *wq = weight_ints(&t);
    edgert_packed *pb = pack_or_fail(b, &t), *pg = pack_or_fail(g, &t);
    static const uint32_t ms[] = {5, 17, 33, 64};
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
        const uint32_t m = ms[mi];
        float *x = malloc(sizeof(float) * m * ldx);
        int8_t *a = malloc((size_t)K * m);
        assert_true(x && a);
        fill_x(x, m, K, ldx, 300u + m);
        float *yd = sentinel_y(m, ldy), *yg = sentinel_y(m, ldy), *y1 = sentinel_y(1, ldy);
        gemm_or_fail(b, pb, m, x, ldx, yd, ldy);
        gemm_or_fail(g, pg, m, x, ldx, yg, ldy);
        padding_untouched("decode_max_m=64", yg, m, N, ldy);
        for (uint32_t i = 0; i < m; i++) {
            gemm_or_fail(g, pg, 1, x + i * ldx, ldx, y1, ldy);
            if (memcmp(y1, yg + i * ldy, sizeof(float) * ldy) != 0)
                fail_msg("decode_max_m=64 m=%u: row %u differs from the same row alone (m = 1): "
                         "not the GEMV",
                         m, i);
            float sg[K / 128u];
            const float sx = quantize_token(x + i * ldx, K, SPAN_GROUP, a, sg);
            for (uint32_t r = 0; r < N; r++) {
                double exact, sum_xw;
                exact_dot(a, sx, sg, wq + (size_t)r * K, t.view.scales + (size_t)r * (K / 128u),
                          K, &exact, &sum_xw);
                const double bound = a8_bound(K, sum_xw);
                if (!(fabs(yg[i * ldy + r] - exact) <= bound) ||
                    !(fabs((double)yg[i * ldy + r] - yd[i * ldy + r]) <= 2.0 * bound))
                    fail_msg("decode_max_m=64 m=%u: y[%u][%u] = %.9g, default %.9g, exact %.9g "
                             "(bound %.3g)",
                             m, i, r, (double)yg[i * ldy + r], (double)yd[i * ldy + r], exact,
                             bound);
            }
        }
        free(x);
        free(a);
        free(yd);
        free(yg);
        free(y1);
    }
    edgert_packed_free(pb);
    edgert_packed_free(pg);
    edgert_qtensor_free(&t);
    free(wq);
    edgert_backend_close(b);
    edgert_backend_close(g);
}

/* ---- 5. packed size and the packed-map round trip ------------------------------------ */

/* The round trip (tests/test_packed.h) of packed weights pk of shape
 * [n, k]: y of m = 1 (decode) and m = 17 (prefill) from pk, then from a
 * heap copy of its bytes and from a read-only mmap of a file holding them,
 * bit for bit. Frees pk. */
static void round_trip(edgert_backend *b, edgert_packed *pk, uint32_t n, uint32_t k,
                       const char *name)
{
    char err[512] = "";
    const void *data = NULL;
    size_t size = 0;
    assert_int_equal(edgert_packed_data(pk, &data, &size, err, sizeof err), EDGERT_OK);
    const pm_shape s = {n, k, 128, 1};
    const edgert_qweights shape = {.struct_size = sizeof shape, .n = n, .k = k, .group = 128,
                                   .name = name};
    void *copy = pm_copy(data, size);
    const size_t ldx = (size_t)k + 3u, ldy = (size_t)n + 2u;
    float *x = malloc(sizeof(float) * PM_M_MAX * ldx);
    float *want[2] = {malloc(sizeof(float) * ldy), malloc(sizeof(float) * PM_M_MAX * ldy)};
    assert_true(x && want[0] && want[1]);
    fill_x(x, PM_M_MAX, k, ldx, 32);
    pm_gemm(b, pk, &s, 1u, x, want[0]);
    pm_gemm(b, pk, &s, PM_M_MAX, x, want[1]);
    edgert_packed_free(pk); /* the mapped handle owes nothing to it */
    pm_check_mapped(b, &shape, copy, size, x, want, "heap copy");
    pm_check_file(b, &shape, copy, size, x, want);
    free(copy);
    free(x);
    free(want[0]);
    free(want[1]);
}

static void test_packed_bits_and_map(void **state)
{
    fx *f = *state;
    edgert_backend *b = NULL;
    OPEN_OR_SKIP(f, f->pi, NULL, b);
    enum { N = 2048, K = 2048, G = K / 128 };
    char err[512] = "";
    edgert_qtensor t;
    sym_weights(N, K, 31, "blk.7.ffn_gate", &t);
    edgert_packed *pk = pack_or_fail(b, &t);
    const double bpw = (double)edgert_packed_bytes(pk) * 8.0 / ((double)N * K);
    print_message("%s path=%s: packed %u x %u: %zu bytes, %.6f bits per weight\n",
                  paths[f->pi].backend, paths[f->pi].path, N, K, edgert_packed_bytes(pk), bpw);
    assert_true(bpw <= 4.15);
    assert_string_equal(edgert_backend_packed_layout(b), "amx-w4a8/1");

    const void *data = NULL;
    size_t size = 0;
    assert_int_equal(edgert_packed_data(pk, &data, &size, err, sizeof err), EDGERT_OK);
    /* a8_internal.h: a 128-byte header, then N / 16 panels of G blocks of
     * 1024 code bytes and G rows of 16 fp16 scales (rounded up to 64 bytes) */
    assert_int_equal(size, 128u + (size_t)(N / 16) * (G * 1024u + (G * 32u + 63u) / 64u * 64u));
    assert_true(size <= edgert_packed_bytes(pk));

    /* one layout for every path: the bytes equal path vnni's (where this
     * CPU can open it; pack is plain C, one function for every path) */
    char why[256];
    if (f->pi != P_VNNI && path_lacks(f, P_VNNI, why, sizeof why)) {
        tu_skip_line(__func__, "", "the bytes against path vnni's: %s", why);
    } else if (f->pi != P_VNNI) {
        edgert_backend *v = open_path_opts(f, P_VNNI, NULL, NULL, 0);
        edgert_packed *pv = pack_or_fail(v, &t);
        const void *dv = NULL;
        size_t sv = 0;
        assert_int_equal(edgert_packed_data(pv, &dv, &sv, err, sizeof err), EDGERT_OK);
        assert_int_equal(sv, size);
        assert_memory_equal(dv, data, size);
        edgert_packed_free(pv);
        edgert_backend_close(v);
    }
    edgert_qtensor_free(&t);

    /* asymmetric: a zero-point line per four groups, 4.1875 bits per weight;
     * k = 640 (5 groups): a whole quad and a partial one */
    {
        enum { KA = 640, GA = KA / 128 };
        edgert_qtensor ta;
        asym_weights(48, KA, 35, "blk.7.ffn_up.asym", &ta);
        edgert_packed *pa = pack_or_fail(b, &ta);
        const void *da = NULL;
        size_t sa = 0;
        assert_int_equal(edgert_packed_data(pa, &da, &sa, err, sizeof err), EDGERT_OK);
        assert_int_equal(sa, 128u + 3u * (GA * 1024u + 3u * 64u + 2u * 64u));
        edgert_qtensor_free(&ta);
        round_trip(b, pa, 48, KA, "blk.7.ffn_up.asym");
        edgert_qtensor big;
        asym_weights(N, K, 36, "blk.7.ffn_gate.asym", &big);
        edgert_packed *pb = pack_or_fail(b, &big);
        const double bpa = (double)edgert_packed_bytes(pb) * 8.0 / ((double)N * K);
        print_message("%s path=%s: asymmetric %u x %u: %.6f bits per weight\n",
                      paths[f->pi].backend, paths[f->pi].path, N, K, bpa);
        assert_true(bpa <= 4.19);
        edgert_packed_free(pb);
        edgert_qtensor_free(&big);
    }

    if (A8_LIGHT && f->pi == P_MODEL) {
        /* unoptimized build: the tile model's m = 17 on [2048, 2048] takes
         * minutes; the round trip on [256, 2048] (16 items of 4 panels) */
        edgert_packed_free(pk);
        sym_weights(256, K, 33, "blk.7.ffn_gate.light", &t);
        pk = pack_or_fail(b, &t);
        edgert_qtensor_free(&t);
        round_trip(b, pk, 256, K, "blk.7.ffn_gate.light");
    } else {
        round_trip(b, pk, N, K, "blk.7.ffn_gate");
    }
    edgert_backend_close(b);
}

/* ---- 6. zero and non-finite activation rows ------------------------------------------- */

static void test_zero_and_nan_rows(void **state)
{
    fx *f = *state;
    edgert_backend *b = NULL;
    OPEN_OR_SKIP(f, f->pi, NULL, b);
    enum { N = 33, K = 256 };
    edgert_qtensor t;
    sym_weights(N, K, 41, "blk.2.attn_o", &t);
    edgert_packed *pk = pack_or_fail(b, &t);
    static const uint32_t ms[] = {1, 3, 4, 5, 37}; /* decode, and prefill over a token block */
    const size_t ldx = K + 7u, ldy = N + 1u;
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
        const uint32_t m = ms[mi];
        float *x = malloc(sizeof(float) * m * ldx), *y = sentinel_y(m, ldy),
              *yc = sentinel_y(m, ldy);
        assert_non_null(x);
        fill_x(x, m, K, ldx, 500u + m);
        /* row 0 zero; with m > 1 the last row gets a NaN, with m > 2 row 1 an
         * infinity: those rows all NaN, the others as if clean */
        memset(x, 0, sizeof(float) * K);
        gemm_or_fail(b, pk, m, x, ldx, yc, ldy);
        if (m > 1)
            x[(m - 1u) * ldx + 100] = NAN;
        if (m > 2)
            x[1 * ldx + 7] = -INFINITY;
        gemm_or_fail(b, pk, m, x, ldx, y, ldy);
        padding_untouched("nan rows", y, m, N, ldy);
        for (uint32_t i = 0; i < m; i++) {
            const int bad = (m > 1 && i == m - 1u) || (m > 2 && i == 1u);
            for (uint32_t r = 0; r < N; r++) {
                const float v = y[i * ldy + r];
                if (i == 0 && !(v == 0.0f))
                    fail_msg("m=%u: zero row: y[0][%u] = %g, not 0", m, r, (double)v);
                if (bad && !isnan(v))
                    fail_msg("m=%u: row %u holds a NaN or infinity: y[%u][%u] = %g, not NaN", m,
                             i, i, r, (double)v);
            }
            if (!bad && memcmp(y + i * ldy, yc + i * ldy, sizeof(float) * N) != 0)
                fail_msg("m=%u: row %u changed because another row holds a NaN", m, i);
        }
        free(x);
        free(y);
        free(yc);
    }
    edgert_packed_free(pk);
    edgert_qtensor_free(&t);
    edgert_backend_close(b);
}

/* ---- 7. the plugin's flag checks on a host that lacks the flags ------------------------ */

static void init_refused(const edgert_plugin *p, const edgert_host *host, const char *options,
                         const char *flag)
{
    void *inst = (void *)(uintptr_t)1;
    char err[512] = "";
    edgert_status st = p->init(host, options, &inst, err, sizeof err);
    if (st != EDGERT_E_UNSUPPORTED || inst != NULL || !strstr(err, flag) || !strstr(err, A8))
        fail_msg("init '%s' on flags %#llx: %s (expected EDGERT_E_UNSUPPORTED naming %s): %s",
                 options ? options : "(NULL)", (unsigned long long)host->cpu_flags,
                 edgert_status_name(st), flag, err);
}

/* A host with AVX2, FMA and F16C and no AVX-512 (cpu: this CPU's flags,
 * to self-test only what runs here): auto is path avx2, the AVX-512 paths
 * and avxvnni name the first flag they lack, a list takes the first path
 * that runs; with AVX-VNNI added, auto and the shipped avx2-w4a8's list
 * are path avxvnni. */
static void paths_256(const edgert_plugin *p, edgert_host *host, uint64_t cpu)
{
    void *inst = NULL;
    char err[512] = "";
    init_refused(p, host, "path=vnni", "avx512f");
    init_refused(p, host, "path=amx", "avx512f");
    init_refused(p, host, "path=avxvnni", "avx_vnni");
    init_refused(p, host, "path=vnni,avxvnni", "avx_vnni");
    const int avx2_here = EDGERT_HAS_FLAG(cpu, EDGERT_CPU_AVX2) &&
                          EDGERT_HAS_FLAG(cpu, EDGERT_CPU_FMA) &&
                          EDGERT_HAS_FLAG(cpu, EDGERT_CPU_F16C);
    static const char *const to_avx2[] = {NULL, "path=avxvnni,avx2", "path=vnni,avx2"};
    for (size_t i = 0; i < sizeof to_avx2 / sizeof to_avx2[0]; i++) {
        assert_int_equal(p->init(host, to_avx2[i], &inst, err, sizeof err), EDGERT_OK);
        assert_non_null(strstr(p->describe(inst), "avx2:"));
        if (avx2_here && i == 0) /* its kernels run on this CPU */
            assert_int_equal(p->self_test(inst, err, sizeof err), EDGERT_OK);
        p->fini(inst);
        inst = NULL;
    }

    /* and AVX-VNNI: auto and the shipped avx2-w4a8's list are path avxvnni */
    host->cpu_flags |= FLAG(EDGERT_CPU_AVX_VNNI);
    static const char *const to_vnni256[] = {NULL, "path=avxvnni,avx2", "path=amx,avxvnni"};
    for (size_t i = 0; i < sizeof to_vnni256 / sizeof to_vnni256[0]; i++) {
        assert_int_equal(p->init(host, to_vnni256[i], &inst, err, sizeof err), EDGERT_OK);
        assert_non_null(strstr(p->describe(inst), "avxvnni:"));
        if (avx2_here && EDGERT_HAS_FLAG(cpu, EDGERT_CPU_AVX_VNNI) && i == 0)
            assert_int_equal(p->self_test(inst, err, sizeof err), EDGERT_OK);
        p->fini(inst);
        inst = NULL;
    }
}

static void test_missing_flags(void **state)
{
    fx *f = *state;
    const edgert_device *d = edgert_device_facts(f->ctx);

    /* through the public API: forced path=amx on this CPU */
    {
        edgert_backend *b = NULL;
        char err[512] = "";
        edgert_status st = edgert_backend_open(f->ctx, A8, "path=amx", &b, err, sizeof err);
        const char *lacks = !EDGERT_HAS_FLAG(d->cpu_flags, EDGERT_CPU_AMX_TILE)   ? "amx_tile"
                            : !EDGERT_HAS_FLAG(d->cpu_flags, EDGERT_CPU_AMX_INT8) ? "amx_int8"
                                                                                  : NULL;
        if (!edgert_candidate_find(f->ctx, A8)->eligible) {
            assert_int_not_equal(st, EDGERT_OK); /* this CPU lacks even the vnni flags */
        } else if (lacks) {
            if (st != EDGERT_E_UNSUPPORTED || b != NULL || !strstr(err, lacks))
                fail_msg("path=amx without %s: %s: %s", lacks, edgert_status_name(st), err);
        } else if (st == EDGERT_OK) {
            edgert_backend_close(b);
        } else if (!(st == EDGERT_E_UNSUPPORTED && strstr(err, "permission"))) {
            fail_msg("path=amx on an AMX CPU: %s: %s", edgert_status_name(st), err);
        }
    }

    /* the library itself, on a host table that lacks the flags */
    void *h = NULL;
    edgert_plugin_entry_fn entry = fh_entry(f->lib, &h);
    edgert_host host = fh_host(2, BASE_FLAGS);
    const edgert_plugin *p = NULL;
    char err[512] = "";
    assert_int_equal(entry(2, 2, &host, &p, err, sizeof err), EDGERT_OK);
    assert_string_equal(p->name, A8);
    void *inst = NULL;

    /* AVX-512 without VNNI: every path refused, naming avx512_vnni */
    init_refused(p, &host, NULL, "avx512_vnni");
    init_refused(p, &host, "path=vnni", "avx512_vnni");
    init_refused(p, &host, "path=amx", "avx512_vnni");
    host.cpu_flags = FLAG(EDGERT_CPU_AVX2) | FLAG(EDGERT_CPU_FMA); /* no AVX-512 at all */
    init_refused(p, &host, NULL, "avx512f");
    init_refused(p, &host, "path=avx2", "f16c");
    init_refused(p, &host, "path=avxvnni,avx2", "f16c");

    host.cpu_flags |= FLAG(EDGERT_CPU_F16C);
    paths_256(p, &host, d->cpu_flags);

    /* VNNI without AMX: path=amx names the first flag it lacks; auto is vnni */
    host.cpu_flags = BASE_FLAGS | FLAG(EDGERT_CPU_AVX512_VNNI);
    init_refused(p, &host, "path=amx", "amx_tile");
    host.cpu_flags |= FLAG(EDGERT_CPU_AMX_TILE);
    init_refused(p, &host, "path=amx", "amx_int8");
    host.cpu_flags &= ~FLAG(EDGERT_CPU_AMX_TILE);
    host.cpu_flags |= FLAG(EDGERT_CPU_AMX_INT8);
    init_refused(p, &host, "path=amx", "amx_tile");
    host.cpu_flags &= ~FLAG(EDGERT_CPU_AMX_INT8);
    assert_int_equal(p->init(&host, NULL, &inst, err, sizeof err), EDGERT_OK);
    assert_non_null(strstr(p->describe(inst), "vnni:"));
    if (EDGERT_HAS_FLAG(d->cpu_flags, EDGERT_CPU_AVX512_VNNI)) /* its kernels run on this CPU */
        assert_int_equal(p->self_test(inst, err, sizeof err), EDGERT_OK);
    p->fini(inst);
    inst = NULL;

    /* A host that claims AMX on a CPU whose OS grants no tile data (this
     * one, when it has no AMX): forced amx refused with the reason, auto
     * goes on with vnni. */
    if (!EDGERT_HAS_FLAG(d->cpu_flags, EDGERT_CPU_AMX_TILE)) {
        host.cpu_flags |= FLAG(EDGERT_CPU_AMX_TILE) | FLAG(EDGERT_CPU_AMX_INT8);
        init_refused(p, &host, "path=amx", "permission");
        assert_int_equal(p->init(&host, NULL, &inst, err, sizeof err), EDGERT_OK);
        assert_non_null(strstr(p->describe(inst), "vnni:"));
        p->fini(inst);
        inst = NULL;
    }
    dlclose(h);
}

/* ---- `edgert verify` end to end on the tile model ------------------------------------- */

static void test_verify_amx_model(void **state)
{
    fx *f = *state;
    PATH_OR_SKIP(f, P_MODEL);
    if (A8_LIGHT)
        tu_skip("unoptimized build: `edgert verify` on the AMX tile model takes minutes here; "
                "the optimized suite runs it");
    char args[4096], *out = NULL;
    snprintf(args, sizeof args,
             "verify --quick --backend " A8_EMU " --options path=amx --manifests %s --manifests %s",
             f->dir, EDGERT_TEST_BACKEND_DIR);
    int rc = run(args, &out);
    if (rc != 0 || !strstr(out, A8_EMU " (amx: prefill on the AMX tile MODEL") ||
        !strstr(out, "all correct"))
        fail_msg("edgert %s: exit %d\n%.4000s", args, rc, out);
    free(out);
}

#if !defined(__x86_64__)
/* On another arch the plugin folder builds nothing and the shipped
 * manifest's arch gate refuses amx-w4a8 before any load. */
static void test_gated_out_on_other_arch(void **state)
{
    (void)state;
    char err[512] = "";
    edgert_ctx *ctx = tu_open(EDGERT_TEST_BACKEND_DIR, 1, err, sizeof err);
    if (ctx == NULL)
        fail_msg("edgert_open: %s", err);
    const edgert_candidate *c = edgert_candidate_find(ctx, A8);
    assert_non_null(c);
    assert_false(c->eligible);
    assert_false(c->loaded);
    int wrong_arch = 0;
    for (size_t i = 0; i < c->reason_count; i++)
        wrong_arch |= strcmp(c->reasons[i], "WRONG_ARCH") == 0;
    assert_true(wrong_arch);
    edgert_close(ctx);
}
#endif

int main(void)
{
#if !defined(__x86_64__)
    const struct CMUnitTest other_arch[] = {cmocka_unit_test(test_gated_out_on_other_arch)};
    return tu_run_group(A8, other_arch, setup, teardown);
#endif
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_manifest_options_fixed),
        cmocka_unit_test(test_missing_flags),
        cmocka_unit_test(test_shipped_256),
        PATH_TEST(test_decode_max_m, vnni),
        PATH_TEST(test_decode_max_m, amx),
        PATH_TEST(test_decode_max_m, amx_model),
        PATH_TEST(test_decode_max_m, avx2),
        PATH_TEST(test_decode_max_m, avxvnni),
        PATH_TEST(test_decode_max_m, avxvnni_evex),
        PATH_TEST(test_zero_and_nan_rows, vnni),
        PATH_TEST(test_zero_and_nan_rows, amx),
        PATH_TEST(test_zero_and_nan_rows, amx_model),
        PATH_TEST(test_zero_and_nan_rows, avx2),
        PATH_TEST(test_zero_and_nan_rows, avxvnni),
        PATH_TEST(test_zero_and_nan_rows, avxvnni_evex),
        PATH_TEST(test_packed_bits_and_map, vnni),
        PATH_TEST(test_packed_bits_and_map, amx),
        PATH_TEST(test_packed_bits_and_map, amx_model),
        PATH_TEST(test_packed_bits_and_map, avx2),
        PATH_TEST(test_packed_bits_and_map, avxvnni),
        PATH_TEST(test_packed_bits_and_map, avxvnni_evex),
        PATH_TEST(test_prefill_bits_equal_vnni, vnni),
        PATH_TEST(test_prefill_bits_equal_vnni, amx),
        PATH_TEST(test_prefill_bits_equal_vnni, amx_model),
        PATH_TEST(test_prefill_bits_equal_vnni, avx2),
        PATH_TEST(test_prefill_bits_equal_vnni, avxvnni),
        PATH_TEST(test_prefill_bits_equal_vnni, avxvnni_evex),
        PATH_TEST(test_paths_against_ref, vnni),
        PATH_TEST(test_paths_against_ref, amx),
        PATH_TEST(test_paths_against_ref, amx_model),
        PATH_TEST(test_paths_against_ref, avx2),
        PATH_TEST(test_paths_against_ref, avxvnni),
        PATH_TEST(test_paths_against_ref, avxvnni_evex),
        cmocka_unit_test(test_verify_amx_model),
    };
    return tu_run_group(A8, tests, setup, teardown);
}
