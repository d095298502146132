/*
 * tests/plugins/test_neon_w4a16.c — the neon-w4a16 backend through the public API:
 * every code path the CPU has against ref-w4a16 and against an exact oracle
 * of the path's own arithmetic, on odd shapes; the path gates (a path whose
 * CPU flag is missing is refused, naming the flag, and auto falls back); the
 * clean refusals of the packing.
 *
 * On ARM64 this runs under qemu in the cross build, once per emulated CPU
 * model (QEMU_CPU=cortex-a72: asimd only; neoverse-n1: + dotprod; max: +
 * i8mm, bf16): every expectation is taken from the probe's flags, and when
 * QEMU_CPU names a known model the flags are checked against it too. On any
 * other arch the backend must be gated out by arch before load (checked by
 * every case), and then every case reports skipped (tu_skip), so ctest lists
 * the program as skipped there.
 *
 * The packed-weight cache (plugin ABI 2, tests/test_packed.h): on every path
 * the CPU has, packed bytes copied elsewhere or mmap'ed from a file map back
 * and give y bit for bit equal to the packed handle's (m = 1 and 17, odd n,
 * symmetric and asymmetric); the bytes are the same on every path (one
 * layout id, "neon-w4a16/1"); corrupt bytes are refused with a message.
 *
 * Tolerances (y = sum_k x_k w_k, w = s (q - z), S = sum_k |x_k w_k|):
 *   - Against ref-w4a16 (fp32 activations): the backend rounds x to fp16
 *     (11 significant bits, round to nearest: |x16 - x| <= 2^-11 |x|, or
 *     <= 2^-25 below the fp16 normal range, and values past +-65504 are not
 *     used here). Products with w are exact in both, so the activation part of
 *     the difference is at most 2^-11 S + 2^-25 sum|w|. The int8 dot-product
 *     paths (dotprod, i8mm) put the fp16 values of each (row, weight group)
 *     on an int16 grid of step 2^E, E = floor(log2 max|x16|) - 14: at most
 *     2^(E-1) more per element, so + sum_g 2^(E_g - 1) sum_{k in g} |w_k|.
 *     (A bf16 path that rounded x to bf16 would need 2^-8 S; this backend's
 *     bf16 path splits each fp16 value into two bf16 numbers and keeps the
 *     fp16 bound.) Both sides sum in fp32: each at most (K + 16) 2^-24 S
 *     (a generous bound on their summation depths), so 2 (K + 16) 2^-24 S.
 *   - Against the oracle (the path's own activation values, exact products,
 *     double sums): only the backend's fp32 sums remain, per group at most
 *     ~20 rounding steps plus one add per group into y, i.e. below
 *     (36 + K / 32) 2^-24 S for these K and groups of 32 or more (at most
 *     100 2^-24 S < 2^-17 S); the test allows 2^-16 S, still
 *     8x tighter than one dropped term at K = 2048 (S / 2048 = 2^-11 S on
 *     average), so a kernel that skips or repeats a column fails.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "edgert/edgert.h"
#include "test_util.h"
#include "test_packed.h"

#define NAME "neon-w4a16"

typedef struct path_def {
    const char *name;
    edgert_cpu_flag flag;
    const char *flag_name;
    int int16_grid; /* activations on the per-group int16 grid */
} path_def;

static const path_def paths[] = {
    {"neon", EDGERT_CPU_ASIMD, "asimd", 0},
    {"bf16", EDGERT_CPU_BF16, "bf16", 0},
    {"dotprod", EDGERT_CPU_ASIMDDP, "asimddp", 1},
    {"i8mm", EDGERT_CPU_I8MM, "i8mm", 1},
};
#define NPATHS (sizeof paths / sizeof paths[0])

static edgert_ctx *open_live(unsigned threads)
{
    const char *dirs[1] = {EDGERT_TEST_BACKEND_DIR};
    edgert_options o = {.struct_size = sizeof o};
    o.manifest_paths = dirs;
    o.manifest_path_count = 1;
    o.ignore_env = 1;
    o.threads = threads;
    o.log_level = EDGERT_LOG_ERROR;
    edgert_ctx *ctx = NULL;
    char err[512] = "";
    if (edgert_open(&o, &ctx, err, sizeof err) != EDGERT_OK)
        fail_msg("edgert_open: %s", err);
    return ctx;
}

static int has_reason(const edgert_candidate *c, const char *prefix)
{
    for (size_t i = 0; i < c->reason_count; i++)
        if (strncmp(c->reasons[i], prefix, strlen(prefix)) == 0)
            return 1;
    return 0;
}

/* The path auto must pick: the first of i8mm, dotprod, bf16, neon the CPU has. */
static const char *expected_auto(uint64_t flags)
{
    if (EDGERT_HAS_FLAG(flags, EDGERT_CPU_I8MM))
        return "i8mm";
    if (EDGERT_HAS_FLAG(flags, EDGERT_CPU_ASIMDDP))
        return "dotprod";
    if (EDGERT_HAS_FLAG(flags, EDGERT_CPU_BF16))
        return "bf16";
    return "neon";
}

/* describe() starts with the path's name, then a blank or a colon */
static int describes(const char *desc, const char *path)
{
    size_t n = strlen(path);
    return desc != NULL && strncmp(desc, path, n) == 0 && (desc[n] == ' ' || desc[n] == ':');
}

/* NULL on a non-ARM64 host (after checking the gate), else the live handle. */
#define NOT_ARM64                                                                                 \
    "not an ARM64 CPU: " NAME " was refused by its arch gate before load (checked); none of "   \
    "its code can run here"
static edgert_ctx *open_arm64_or_skip(unsigned threads)
{
    edgert_ctx *ctx = open_live(threads);
    const edgert_device *d = edgert_device_facts(ctx);
    const edgert_candidate *c = edgert_candidate_find(ctx, NAME);
    assert_non_null(c);
    if (d->arch != EDGERT_ARCH_ARM64) {
        /* gated by arch before any load: nothing of the plugin ran */
        assert_false(c->eligible);
        assert_false(c->loaded);
        assert_true(has_reason(c, "WRONG_ARCH"));
        edgert_close(ctx);
        return NULL;
    }
    return ctx;
}

/* ---- gates -------------------------------------------------------------- */

static void test_gates(void **state)
{
    (void)state;
    edgert_ctx *ctx = open_arm64_or_skip(2);
    if (ctx == NULL)
        tu_skip(NOT_ARM64);
    const uint64_t flags = edgert_device_facts(ctx)->cpu_flags;
    const char *model = getenv("QEMU_CPU");
    print_message("QEMU_CPU=%s, flags:%s%s%s%s\n", model ? model : "(unset)",
                  EDGERT_HAS_FLAG(flags, EDGERT_CPU_ASIMD) ? " asimd" : "",
                  EDGERT_HAS_FLAG(flags, EDGERT_CPU_ASIMDDP) ? " asimddp" : "",
                  EDGERT_HAS_FLAG(flags, EDGERT_CPU_I8MM) ? " i8mm" : "",
                  EDGERT_HAS_FLAG(flags, EDGERT_CPU_BF16) ? " bf16" : "");

    /* the emulated model really is the one asked for */
    if (model != NULL && strcmp(model, "cortex-a72") == 0) {
        assert_false(EDGERT_HAS_FLAG(flags, EDGERT_CPU_ASIMDDP));
        assert_false(EDGERT_HAS_FLAG(flags, EDGERT_CPU_I8MM));
        assert_false(EDGERT_HAS_FLAG(flags, EDGERT_CPU_BF16));
    } else if (model != NULL &&
               (strcmp(model, "neoverse-n1") == 0 || strcmp(model, "cortex-a76") == 0)) {
        assert_true(EDGERT_HAS_FLAG(flags, EDGERT_CPU_ASIMDDP));
        assert_false(EDGERT_HAS_FLAG(flags, EDGERT_CPU_I8MM));
        assert_false(EDGERT_HAS_FLAG(flags, EDGERT_CPU_BF16));
    } else if (model != NULL && strcmp(model, "max") == 0) {
        assert_true(EDGERT_HAS_FLAG(flags, EDGERT_CPU_ASIMDDP));
        assert_true(EDGERT_HAS_FLAG(flags, EDGERT_CPU_I8MM));
        assert_true(EDGERT_HAS_FLAG(flags, EDGERT_CPU_BF16));
    }
    assert_true(EDGERT_HAS_FLAG(flags, EDGERT_CPU_ASIMD));

    /* loaded and self-tested with the auto path */
    const edgert_candidate *c = edgert_candidate_find(ctx, NAME);
    assert_true(c->eligible);
    assert_true(c->loaded);
    if (!describes(c->path_chosen, expected_auto(flags)))
        fail_msg("auto path: got '%s', expected %s", c->path_chosen ? c->path_chosen : "(null)",
                 expected_auto(flags));
    print_message("auto: %s\n", c->path_chosen);

    char err[512];
    edgert_backend *be = NULL;
    for (size_t i = 0; i < NPATHS; i++) {
        char opt[32];
        snprintf(opt, sizeof opt, "path=%s", paths[i].name);
        err[0] = '\0';
        edgert_status st = edgert_backend_open(ctx, NAME, opt, &be, err, sizeof err);
        if (EDGERT_HAS_FLAG(flags, paths[i].flag)) {
            if (st != EDGERT_OK)
                fail_msg("%s: %s", opt, err);
            assert_true(describes(edgert_backend_describe(be), paths[i].name));
            edgert_backend_close(be);
            be = NULL;
        } else {
            /* refused at init, naming the missing flag: its kernel never ran */
            assert_int_equal(st, EDGERT_E_UNSUPPORTED);
            assert_null(be);
            assert_non_null(strstr(err, paths[i].flag_name));
            print_message("%s refused: %s\n", opt, err);
        }
    }
    /* auto spelled out, blanks, and the empty string */
    const char *autos[] = {"path=auto", " path=auto ", ""};
    for (size_t i = 0; i < sizeof autos / sizeof autos[0]; i++) {
        assert_int_equal(edgert_backend_open(ctx, NAME, autos[i], &be, err, sizeof err), EDGERT_OK);
        assert_true(describes(edgert_backend_describe(be), expected_auto(flags)));
        edgert_backend_close(be);
        be = NULL;
    }
    /* unknown options and paths: usage errors */
    const char *bad[] = {"path=warp-drive", "fast=1", "path=", "path=neon,threads=2", "PATH=neon"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(edgert_backend_open(ctx, NAME, bad[i], &be, err, sizeof err),
                         EDGERT_E_USAGE);
        assert_null(be);
        assert_true(strlen(err) > 0);
    }
    edgert_close(ctx);
}

/* ---- numerics ------------------------------------------------------------ */

#if defined(__aarch64__)
static float to_fp16(float v)
{
    if (v > 65504.0f)
        v = 65504.0f;
    else if (v < -65504.0f)
        v = -65504.0f;
    return (float)(__fp16)v;
}
#else
static float to_fp16(float v)
{
    return v; /* never used: the backend only exists on ARM64 */
}
#endif

/* The activation values a path multiplies with, per the plugin's documented
 * arithmetic (written here independently); *grid_half[g] = 2^(E_g - 1) for
 * the int16 paths, 0 otherwise. */
static void path_activations(const path_def *p, const float *x, uint32_t k, uint32_t G,
                             double *xe, double *grid_half)
{
    for (uint32_t g = 0; g < k / G; g++) {
        double mx = 0.0;
        for (uint32_t c = 0; c < G; c++) {
            xe[g * G + c] = to_fp16(x[g * G + c]);
            if (fabs(xe[g * G + c]) > mx)
                mx = fabs(xe[g * G + c]);
        }
        grid_half[g] = 0.0;
        if (!p->int16_grid || mx == 0.0)
            continue;
        int e;
        (void)frexp(mx, &e);
        const double step = ldexp(1.0, e - 1 - 14);
        for (uint32_t c = 0; c < G; c++)
            xe[g * G + c] = nearbyint(xe[g * G + c] / step) * step;
        grid_half[g] = step / 2.0;
    }
}

/* Deterministic data: x mostly in [-1, 1], with a few outliers (the int16
 * grid's rounding case) and a few values in the fp16 subnormal range. */
static uint32_t rng(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

static float uniform(uint32_t *s)
{
    return (float)(rng(s) % 20001u) / 10000.0f - 1.0f;
}

typedef struct shape_run {
    edgert_backend *be, *ref;
    const path_def *path;
    uint32_t m, n, k;
    uint32_t group; /* 0: 128 */
    int symmetric;
    size_t pad; /* extra columns in ldx and ldy */
    double worst_ref, worst_oracle; /* largest err / tolerance seen */
} shape_run;

#define SENTINEL -7777.0f

static void run_shape(shape_run *r, uint32_t seed)
{
    const uint32_t m = r->m, n = r->n, k = r->k, G = r->group ? r->group : 128u;
    const size_t ldx = k + r->pad, ldy = n + r->pad;
    float *w = malloc(sizeof(float) * n * k);
    float *x = malloc(sizeof(float) * m * ldx);
    float *y = malloc(sizeof(float) * m * ldy), *yr = malloc(sizeof(float) * m * n);
    float *deq = malloc(sizeof(float) * n * k);
    double *xe = malloc(sizeof(double) * k), *gh = malloc(sizeof(double) * (k / G));
    assert_true(w && x && y && yr && deq && xe && gh);

    for (size_t i = 0; i < (size_t)n * k; i++)
        w[i] = uniform(&seed) * 0.05f;
    for (size_t i = 0; i < (size_t)m * ldx; i++) {
        uint32_t u = rng(&seed) % 64u;
        float v = uniform(&seed);
        x[i] = u == 0 ? v * 40.0f : u == 1 ? v * 3e-6f : v;
    }
    for (size_t i = 0; i < m; i++) /* never read: NaN would reach y (as verify checks) */
        for (size_t c = k; c < ldx; c++)
            x[i * ldx + c] = NAN;
    for (size_t i = 0; i < (size_t)m * ldy; i++)
        y[i] = SENTINEL;

    edgert_qtensor q;
    assert_int_equal(edgert_quantize_rtn(w, n, k, G, r->symmetric, &q), EDGERT_OK);
    edgert_dequantize(&q.view, deq);
    char err[512] = "";
    edgert_packed *pb = NULL, *pr = NULL;
    if (edgert_pack(r->be, &q.view, &pb, err, sizeof err) != EDGERT_OK)
        fail_msg("pack m=%u n=%u k=%u g=%u: %s", m, n, k, G, err);
    assert_int_equal(edgert_pack(r->ref, &q.view, &pr, err, sizeof err), EDGERT_OK);
    edgert_gemm_args a = {sizeof a, m, x, ldx, y, ldy};
    if (edgert_gemm(r->be, pb, &a, err, sizeof err) != EDGERT_OK)
        fail_msg("gemm m=%u n=%u k=%u: %s", m, n, k, err);
    edgert_gemm_args ar = {sizeof ar, m, x, ldx, yr, n};
    assert_int_equal(edgert_gemm(r->ref, pr, &ar, err, sizeof err), EDGERT_OK);

    const double u = ldexp(1.0, -24);
    for (uint32_t i = 0; i < m; i++) {
        const float *xi = x + (size_t)i * ldx;
        path_activations(r->path, xi, k, G, xe, gh);
        for (uint32_t j = 0; j < ldy; j++) {
            const float got = y[(size_t)i * ldy + j];
            if (j >= n) {
                if (got != SENTINEL)
                    fail_msg("%s m=%u n=%u k=%u: y[%u][%u] beyond n was written", r->path->name,
                             m, n, k, i, j);
                continue;
            }
            const float *wj = deq + (size_t)j * k;
            double exact = 0.0, s_abs = 0.0, se_abs = 0.0, w_abs = 0.0, grid = 0.0;
            for (uint32_t c = 0; c < k; c++) {
                exact += xe[c] * (double)wj[c];
                s_abs += fabs((double)xi[c] * (double)wj[c]);
                se_abs += fabs(xe[c] * (double)wj[c]);
                w_abs += fabs((double)wj[c]);
                grid += gh[c / G] * fabs((double)wj[c]);
            }
            const double tol_ref = ldexp(s_abs, -11) + ldexp(w_abs, -25) + grid +
                                   2.0 * (k + 16.0) * u * s_abs + 1e-30;
            const double tol_oracle = ldexp(se_abs, -16) + 1e-30;
            const double e_ref = fabs((double)got - (double)yr[(size_t)i * n + j]);
            const double e_or = fabs((double)got - exact);
            if (!(e_ref <= tol_ref) || !(e_or <= tol_oracle))
                fail_msg("%s m=%u n=%u k=%u g=%u %s: y[%u][%u] = %.9g, ref-w4a16 %.9g (|err| "
                         "%.3g, tolerance %.3g), oracle %.9g (|err| %.3g, tolerance %.3g)",
                         r->path->name, m, n, k, G, r->symmetric ? "symmetric" : "asymmetric", i, j,
                         (double)got, (double)yr[(size_t)i * n + j], e_ref, tol_ref, exact, e_or,
                         tol_oracle);
            if (e_ref / tol_ref > r->worst_ref)
                r->worst_ref = e_ref / tol_ref;
            if (e_or / tol_oracle > r->worst_oracle)
                r->worst_oracle = e_or / tol_oracle;
        }
    }
    edgert_packed_free(pb);
    edgert_packed_free(pr);
    edgert_qtensor_free(&q);
    free(w); free(x); free(y); free(yr); free(deq); free(xe); free(gh);
}

/* Every path the CPU has, on the odd-shape set: M in {1,2,3,16,17,64} (and
 * 512 with K <= 256), N
 * odd and no multiple of the 4-row panel or the 2-row pairs, K in {128,
 * 256, 2048}; some with strides past k and n, some symmetric. */
static void test_paths_against_ref(void **state)
{
    (void)state;
    edgert_ctx *ctx = open_arm64_or_skip(2);
    if (ctx == NULL)
        tu_skip(NOT_ARM64);
    const uint64_t flags = edgert_device_facts(ctx)->cpu_flags;
    /* M = 512 (a prefill) only with k <= 256: under qemu every
     * multiply-add costs, and the row loops are what it tests */
    static const uint32_t ms[] = {1, 2, 3, 16, 17, 64, 512};
    static const uint32_t ns[] = {1, 7, 37};
    static const uint32_t ks[] = {128, 256, 2048};
    char err[512];
    edgert_backend *ref = NULL;
    assert_int_equal(edgert_backend_open(ctx, "ref-w4a16", NULL, &ref, err, sizeof err), EDGERT_OK);

    unsigned ran = 0;
    for (size_t pi = 0; pi < NPATHS; pi++) {
        if (!EDGERT_HAS_FLAG(flags, paths[pi].flag)) {
            tu_skip_line(__func__, "", "path=%s: this CPU lacks %s (refused: test_gates)",
                         paths[pi].name, paths[pi].flag_name);
            continue;
        }
        char opt[32];
        snprintf(opt, sizeof opt, "path=%s", paths[pi].name);
        shape_run r = {.ref = ref, .path = &paths[pi]};
        if (edgert_backend_open(ctx, NAME, opt, &r.be, err, sizeof err) != EDGERT_OK)
            fail_msg("%s: %s", opt, err);
        unsigned cases = 0;
        for (size_t a = 0; a < sizeof ms / sizeof ms[0]; a++)
            for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++)
                for (size_t c = 0; c < sizeof ks / sizeof ks[0]; c++) {
                    if (ms[a] > 64 && ks[c] > 256)
                        continue;
                    r.m = ms[a];
                    r.n = ns[b];
                    r.k = ks[c];
                    r.symmetric = (a + b + c) % 4u == 3u;
                    r.pad = (a + c) % 3u == 1u ? 3u : 0u;
                    run_shape(&r, 0x9E3779B9u ^ (uint32_t)(a * 131u + b * 17u + c * 7u + pi));
                    cases++;
                }
        /* groups of 64 and 32: K of 1, 3 and 9 groups (not multiples of 128:
         * 192, 576 as SmolLM2's, 96, 288), one of each M kind */
        static const uint32_t gs[] = {64, 32}, gk[] = {1, 3, 9}, gm[] = {1, 3, 17, 64};
        for (size_t gi = 0; gi < 2u; gi++)
            for (size_t c = 0; c < 3u; c++)
                for (size_t a = 0; a < 4u; a++) {
                    r.m = gm[a];
                    r.n = ns[(a + c) % 3u];
                    r.group = gs[gi];
                    r.k = gs[gi] * gk[c];
                    r.symmetric = (a + c) % 4u == 3u;
                    r.pad = a % 2u;
                    run_shape(&r, 0x7F4A7C15u ^ (uint32_t)(gi * 97u + c * 13u + a * 5u + pi));
                    cases++;
                }
        r.group = 0;
        print_message("%-8s %u shapes passed; worst err/tolerance: %.3f vs ref-w4a16, %.3f vs "
                      "exact oracle (%s)\n",
                      paths[pi].name, cases, r.worst_ref, r.worst_oracle,
                      edgert_backend_describe(r.be));
        edgert_backend_close(r.be);
        ran++;
    }
    assert_true(ran >= 1); /* the base path at least */
    edgert_backend_close(ref);
    edgert_close(ctx);
}

/* Results do not depend on the thread count (the panel split only moves
 * whole output columns between threads). */
static void test_threads_bitwise(void **state)
{
    (void)state;
    edgert_ctx *c1 = open_arm64_or_skip(1);
    if (c1 == NULL)
        tu_skip(NOT_ARM64);
    edgert_ctx *c2 = open_live(2);
    const uint32_t m = 17, n = 37, k = 256;
    float *w = malloc(sizeof(float) * n * k), *x = malloc(sizeof(float) * m * k);
    float *y1 = malloc(sizeof(float) * m * n), *y2 = malloc(sizeof(float) * m * n);
    uint32_t seed = 12345u;
    for (size_t i = 0; i < (size_t)n * k; i++)
        w[i] = uniform(&seed) * 0.1f;
    for (size_t i = 0; i < (size_t)m * k; i++)
        x[i] = uniform(&seed);
    edgert_qtensor q;
    assert_int_equal(edgert_quantize_rtn(w, n, k, 128, 0, &q), EDGERT_OK);
    const uint64_t flags = edgert_device_facts(c1)->cpu_flags;
    char err[512];
    for (size_t pi = 0; pi < NPATHS; pi++) {
        if (!EDGERT_HAS_FLAG(flags, paths[pi].flag)) {
            tu_skip_line(__func__, "", "path=%s: this CPU lacks %s", paths[pi].name,
                         paths[pi].flag_name);
            continue;
        }
        char opt[32];
        snprintf(opt, sizeof opt, "path=%s", paths[pi].name);
        edgert_ctx *ctxs[2] = {c1, c2};
        float *ys[2] = {y1, y2};
        for (int t = 0; t < 2; t++) {
            edgert_backend *be = NULL;
            edgert_packed *p = NULL;
            assert_int_equal(edgert_backend_open(ctxs[t], NAME, opt, &be, err, sizeof err),
                             EDGERT_OK);
            assert_int_equal(edgert_pack(be, &q.view, &p, err, sizeof err), EDGERT_OK);
            edgert_gemm_args a = {sizeof a, m, x, k, ys[t], n};
            assert_int_equal(edgert_gemm(be, p, &a, err, sizeof err), EDGERT_OK);
            edgert_packed_free(p);
            edgert_backend_close(be);
        }
        assert_memory_equal(y1, y2, sizeof(float) * m * n);
    }
    edgert_qtensor_free(&q);
    free(w); free(x); free(y1); free(y2);
    edgert_close(c2);
    edgert_close(c1);
}

/* ---- packing: what it refuses, what it takes ------------------------------ */

static void test_pack_refusals(void **state)
{
    (void)state;
    edgert_ctx *ctx = open_arm64_or_skip(2);
    if (ctx == NULL)
        tu_skip(NOT_ARM64);
    char err[512];
    edgert_backend *be = NULL;
    assert_int_equal(edgert_backend_open(ctx, NAME, NULL, &be, err, sizeof err), EDGERT_OK);
    edgert_packed *p = NULL;

    /* K = 200: not a multiple of 128, refused cleanly, naming the tensor */
    float *w = calloc(5u * 200u, sizeof(float));
    for (size_t i = 0; i < 5u * 200u; i++)
        w[i] = (float)(i % 17u) * 0.01f - 0.08f;
    edgert_qtensor q;
    assert_int_equal(edgert_quantize_rtn(w, 5, 200, 128, 0, &q), EDGERT_OK);
    q.view.name = "blk.0.ffn_down";
    err[0] = '\0';
    assert_int_equal(edgert_pack(be, &q.view, &p, err, sizeof err), EDGERT_E_UNSUPPORTED);
    assert_null(p);
    assert_non_null(strstr(err, "multiple of 128"));
    assert_non_null(strstr(err, "blk.0.ffn_down"));
    print_message("k=200: %s\n", err);
    edgert_qtensor_free(&q);

    /* group 16: no tile holds it, refused naming the groups it takes */
    assert_int_equal(edgert_quantize_rtn(w, 5, 128, 16, 0, &q), EDGERT_OK);
    assert_int_equal(edgert_pack(be, &q.view, &p, err, sizeof err), EDGERT_E_UNSUPPORTED);
    assert_null(p);
    assert_non_null(strstr(err, "groups of 32, 64 and 128"));
    edgert_qtensor_free(&q);
    /* K = 200 in groups of 64: not whole groups, refused */
    assert_int_equal(edgert_quantize_rtn(w, 5, 200, 64, 0, &q), EDGERT_OK);
    assert_int_equal(edgert_pack(be, &q.view, &p, err, sizeof err), EDGERT_E_UNSUPPORTED);
    assert_null(p);
    assert_non_null(strstr(err, "multiple of 64"));
    edgert_qtensor_free(&q);

    /* a zero point outside [0, 15] */
    assert_int_equal(edgert_quantize_rtn(w, 5, 128, 128, 0, &q), EDGERT_OK);
    q.zeros[3] = 16;
    assert_int_equal(edgert_pack(be, &q.view, &p, err, sizeof err), EDGERT_E_USAGE);
    assert_null(p);
    assert_non_null(strstr(err, "[n=5 k=128 group=128]: zero point 16 at row 3 group 0 is "
                                "outside [0, 15]"));
    edgert_qtensor_free(&q);

    /* packed size: 4.3125 bits per weight over whole 4-row panels + a header */
    const uint32_t n = 37, k = 256;
    float *w2 = calloc((size_t)n * k, sizeof(float));
    for (size_t i = 0; i < (size_t)n * k; i++)
        w2[i] = (float)(i % 23u) * 0.01f - 0.1f;
    assert_int_equal(edgert_quantize_rtn(w2, n, k, 128, 1, &q), EDGERT_OK);
    assert_int_equal(edgert_pack(be, &q.view, &p, err, sizeof err), EDGERT_OK);
    const size_t panel_rows = (n + 3u) / 4u * 4u;
    const size_t body = panel_rows * k / 2u + panel_rows * (k / 128u) * 5u;
    assert_true(edgert_packed_bytes(p) >= body);
    assert_true(edgert_packed_bytes(p) <= body + 512u);
    edgert_packed_free(p);
    /* ... 4.625 and 5.25 in groups of 64 and 32 */
    for (uint32_t g = 32; g <= 64u; g *= 2u) {
        edgert_qtensor qg;
        assert_int_equal(edgert_quantize_rtn(w2, n, k, g, 0, &qg), EDGERT_OK);
        assert_int_equal(edgert_pack(be, &qg.view, &p, err, sizeof err), EDGERT_OK);
        const size_t bg = panel_rows * k / 2u + panel_rows * (k / g) * 5u;
        assert_true(edgert_packed_bytes(p) >= bg && edgert_packed_bytes(p) <= bg + 512u);
        edgert_packed_free(p);
        edgert_qtensor_free(&qg);
    }

    /* bad gemm arguments: refused, not crashed */
    assert_int_equal(edgert_pack(be, &q.view, &p, err, sizeof err), EDGERT_OK);
    float x[256], y[37];
    for (size_t i = 0; i < 256u; i++)
        x[i] = 0.5f;
    edgert_gemm_args a = {sizeof a, 1, x, k - 1u, y, n};
    assert_int_equal(edgert_gemm(be, p, &a, err, sizeof err), EDGERT_E_USAGE);
    edgert_gemm_args a2 = {sizeof a2, 0, x, k, y, n};
    assert_int_equal(edgert_gemm(be, p, &a2, err, sizeof err), EDGERT_E_USAGE);
    edgert_packed_free(p);
    edgert_qtensor_free(&q);

    free(w);
    free(w2);
    edgert_backend_close(be);
    edgert_close(ctx);
}

/* ---- the packed-weight cache (plugin ABI 2) ------------------------------- */

/* The bytes of one tensor packed on `be`, copied (the caller frees them). */
static void *packed_bytes_of(edgert_backend *be, const edgert_qtensor *q, size_t *size)
{
    char err[512];
    edgert_packed *p = NULL;
    const void *data = NULL;
    assert_int_equal(edgert_pack(be, &q->view, &p, err, sizeof err), EDGERT_OK);
    assert_int_equal(edgert_packed_data(p, &data, size, err, sizeof err), EDGERT_OK);
    void *copy = pm_copy(data, *size);
    edgert_packed_free(p);
    return copy;
}

/* Every path this CPU has: the round trip of every odd shape, and the same
 * bytes on every path (so one layout id serves them all). */
static void test_packed_round_trip(void **state)
{
    (void)state;
    edgert_ctx *ctx = open_arm64_or_skip(2);
    if (ctx == NULL)
        tu_skip(NOT_ARM64);
    const uint64_t flags = edgert_device_facts(ctx)->cpu_flags;
    assert_int_equal(edgert_candidate_find(ctx, NAME)->abi_version, 2);
    const pm_shape same = {33, 256, 128, 0};
    edgert_qtensor q;
    pm_weights(&same, 21u, "blk.2.ffn_gate", &q);
    void *first = NULL;
    size_t first_size = 0;
    char err[512];
    for (size_t pi = 0; pi < NPATHS; pi++) {
        if (!EDGERT_HAS_FLAG(flags, paths[pi].flag)) {
            tu_skip_line(__func__, "", "path=%s: this CPU lacks %s", paths[pi].name,
                         paths[pi].flag_name);
            continue;
        }
        char opt[32];
        snprintf(opt, sizeof opt, "path=%s", paths[pi].name);
        edgert_backend *be = NULL;
        if (edgert_backend_open(ctx, NAME, opt, &be, err, sizeof err) != EDGERT_OK)
            fail_msg("%s: %s", opt, err);
        assert_string_equal(edgert_backend_packed_layout(be), "neon-w4a16/1");
        size_t ran = 0;
        for (size_t i = 0; i < PM_NSHAPES; i++)
            ran += pm_round_trip(be, &pm_shapes[i], 2000u + i) == 0;
        assert_true(ran >= 6u);
        size_t size = 0;
        void *bytes = packed_bytes_of(be, &q, &size);
        if (first == NULL) {
            first = bytes;
            first_size = size;
        } else {
            assert_int_equal(size, first_size);
            assert_memory_equal(bytes, first, size);
            free(bytes);
        }
        print_message("%-8s %zu shapes mapped back bit for bit (layout %s)\n", paths[pi].name,
                      ran, edgert_backend_packed_layout(be));
        edgert_backend_close(be);
    }
    free(first);
    edgert_qtensor_free(&q);
    edgert_close(ctx);
}

static void test_packed_refusals(void **state)
{
    (void)state;
    edgert_ctx *ctx = open_arm64_or_skip(2);
    if (ctx == NULL)
        tu_skip(NOT_ARM64);
    char err[512];
    edgert_backend *be = NULL;
    assert_int_equal(edgert_backend_open(ctx, NAME, NULL, &be, err, sizeof err), EDGERT_OK);
    pm_refusals(be, 2); /* codes, scales, zero points: section 2 */
    edgert_backend_close(be);
    edgert_close(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gates),
        cmocka_unit_test(test_pack_refusals),
        cmocka_unit_test(test_threads_bitwise),
        cmocka_unit_test(test_paths_against_ref),
        cmocka_unit_test(test_packed_round_trip),
        cmocka_unit_test(test_packed_refusals),
    };
    return tu_run_group("neon-w4a16", tests, NULL, NULL);
}
