/*
 * tests/plugins/test_ref.c — the reference backend plugin (plugins/ref-w4a16),
 * tested directly, without the loader: its ABI answers (1 and 2), packing,
 * GEMM, refusals, and the map of its packed bytes (ABI 2).
 *
 * The plugin is dlopen'ed by path: argv[1], else $EDGERT_TEST_REF_PLUGIN.
 * The test builds its own edgert_host: logging to stderr, aligned_alloc with
 * a live-allocation count (so leaks inside the plugin show up as a number,
 * not only under ASan), and parallel_for backed by a 2-thread er_pool so the
 * pool is exercised by real work too.
 *
 * (The quantizer and the thread pool, once in this file too, have their own
 * suites: tests/weights/test_weights.c and tests/run/test_threadpool.c.)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h> /* cmocka needs these before its header */
#include <cmocka.h>

#include "common/internal.h"
#include "generate.h"
#include "test_util.h"
#include "run/pool.h"

static const char *g_plugin_path; /* set once in main, read-only afterwards */

typedef struct test_host {
    er_pool *pool;
    atomic_long live_allocs;
    atomic_long bad_align;
    atomic_long last_size; /* bytes of the latest allocation */
} test_host;

typedef struct plugin_fx {
    void *dl;
    edgert_plugin_entry_fn entry;
    test_host th;
    edgert_host host;
    const edgert_plugin *desc;
    void *inst;
} plugin_fx;

__attribute__((format(printf, 3, 4))) static void th_log(void *ctx, edgert_log_level level,
                                                         const char *fmt, ...)
{
    (void)ctx;
    if (level > EDGERT_LOG_INFO) /* debug chatter stays quiet */
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[plugin log %d] ", (int)level);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void *th_alloc(void *ctx, size_t size, size_t align)
{
    test_host *th = ctx;
    if (align < sizeof(void *) || (align & (align - 1u)) != 0u) {
        atomic_fetch_add(&th->bad_align, 1);
        return NULL;
    }
    size_t rounded = (size + align - 1u) & ~(align - 1u); /* C11 aligned_alloc rule */
    void *p = aligned_alloc(align, rounded ? rounded : align);
    if (p != NULL)
        atomic_fetch_add(&th->live_allocs, 1);
    atomic_store(&th->last_size, (long)size);
    return p;
}

static void th_free(void *ctx, void *ptr)
{
    test_host *th = ctx;
    if (ptr == NULL)
        return;
    atomic_fetch_sub(&th->live_allocs, 1);
    free(ptr);
}

static void th_parallel_for(void *ctx, size_t n, size_t grain, edgert_range_fn fn, void *arg)
{
    test_host *th = ctx;
    er_pool_run(th->pool, n, grain, fn, arg);
}

static unsigned th_thread_count(void *ctx)
{
    test_host *th = ctx;
    return er_pool_threads(th->pool);
}

static int plugin_setup(void **state)
{
    char err[256] = "";
    plugin_fx *f = calloc(1, sizeof *f);
    if (f == NULL)
        return -1;
    if (g_plugin_path == NULL || g_plugin_path[0] == '\0') {
        fprintf(stderr, "test_ref: no plugin path: pass libedgert-ref-w4a16.so as argv[1] or "
                        "set EDGERT_TEST_REF_PLUGIN\n");
        free(f);
        return -1;
    }
    f->dl = dlopen(g_plugin_path, RTLD_NOW | RTLD_LOCAL);
    if (f->dl == NULL) {
        fprintf(stderr, "test_ref: dlopen %s: %s\n", g_plugin_path, dlerror());
        free(f);
        return -1;
    }
    void *sym = dlsym(f->dl, EDGERT_PLUGIN_ENTRY_SYMBOL);
    if (sym == NULL) {
        fprintf(stderr, "test_ref: %s has no symbol %s\n", g_plugin_path,
                EDGERT_PLUGIN_ENTRY_SYMBOL);
        goto fail;
    }
    /* object-to-function pointer conversion, as POSIX dlsym requires */
    memcpy(&f->entry, &sym, sizeof f->entry);

    f->th.pool = er_pool_create(2);
    if (f->th.pool == NULL)
        goto fail;
    atomic_init(&f->th.live_allocs, 0);
    atomic_init(&f->th.bad_align, 0);
    atomic_init(&f->th.last_size, 0);
    f->host = (edgert_host){
        .struct_size = sizeof(edgert_host),
        .abi_version = 1,
        .host_ctx = &f->th,
        .log = th_log,
        .alloc = th_alloc,
        .free = th_free,
        .parallel_for = th_parallel_for,
        .thread_count = th_thread_count,
        .cpu_flags = 0,
    };
    if (f->entry(1, 1, &f->host, &f->desc, err, sizeof err) != EDGERT_OK) {
        fprintf(stderr, "test_ref: entry refused ABI 1: %s\n", err);
        goto fail;
    }
    if (f->desc->init(&f->host, NULL, &f->inst, err, sizeof err) != EDGERT_OK) {
        fprintf(stderr, "test_ref: init: %s\n", err);
        goto fail;
    }
    *state = f;
    return 0;

fail:
    if (f->th.pool != NULL)
        er_pool_destroy(f->th.pool);
    dlclose(f->dl);
    free(f);
    return -1;
}

static int plugin_teardown(void **state)
{
    plugin_fx *f = *state;
    int rc = 0;
    if (f == NULL)
        return 0;
    f->desc->fini(f->inst);
    if (atomic_load(&f->th.live_allocs) != 0) {
        fprintf(stderr, "test_ref: plugin left %ld host allocations behind\n",
                atomic_load(&f->th.live_allocs));
        rc = -1;
    }
    if (atomic_load(&f->th.bad_align) != 0) {
        fprintf(stderr, "test_ref: plugin asked for a bad alignment %ld times\n",
                atomic_load(&f->th.bad_align));
        rc = -1;
    }
    er_pool_destroy(f->th.pool);
    dlclose(f->dl);
    free(f);
    return rc;
}

static void test_plugin_abi(void **state)
{
    plugin_fx *f = *state;
    const edgert_plugin *d = NULL;
    char err[256];

    err[0] = '\0';
    assert_int_equal(f->entry(1, 1, &f->host, &d, err, sizeof err), EDGERT_OK);
    assert_non_null(d);
    assert_int_equal(d->struct_size, sizeof(edgert_plugin));
    assert_int_equal(d->abi_version, 1);
    assert_string_equal(d->name, "ref-w4a16");
    assert_non_null(d->version);
    assert_true(d->caps & EDGERT_CAP_GEMM);
    assert_false(d->caps & EDGERT_CAP_EXPORT);
    assert_null(d->export_graph);
    assert_non_null(d->init);
    assert_non_null(d->fini);
    assert_non_null(d->self_test);
    assert_non_null(d->pack);
    assert_non_null(d->packed_free);
    assert_non_null(d->gemm);

    /* ABI 1's descriptor carries nothing of ABI 2 */
    assert_int_equal(d->packed_flags, 0);
    assert_null(d->packed_layout);
    assert_null(d->packed_data);
    assert_null(d->packed_map);

    /* a host offering more than the plugin knows gets the newest common one:
     * ABI 2, with the mappable packed form */
    d = NULL;
    assert_int_equal(f->entry(0, 3, &f->host, &d, err, sizeof err), EDGERT_OK);
    assert_non_null(d);
    assert_int_equal(d->abi_version, 2);
    assert_true(d->struct_size >= EDGERT_PLUGIN_V2_SIZE);
    assert_int_equal(d->packed_flags, EDGERT_PACKED_MAPPABLE);
    assert_string_equal(d->packed_layout, "ref-w4a16/1");
    assert_non_null(d->packed_data);
    assert_non_null(d->packed_map);
    assert_ptr_equal(d->gemm, f->desc->gemm); /* the same functions as ABI 1 */
    assert_int_equal(f->entry(2, 5, &f->host, &d, err, sizeof err), EDGERT_OK);
    assert_int_equal(d->abi_version, 2);

    static const uint32_t refused[][2] = {{3, 5}, {0, 0}, {3, 1}, {7, 7}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        d = (const edgert_plugin *)(uintptr_t)1; /* must be cleared */
        err[0] = '\0';
        assert_int_equal(f->entry(refused[i][0], refused[i][1], &f->host, &d, err, sizeof err),
                         EDGERT_E_ABI);
        assert_null(d);
        assert_true(strlen(err) > 0);
        assert_non_null(strstr(err, "[1, 2]")); /* names the plugin's range */
    }
    /* the message names the host's range too, and respects err_len */
    assert_int_equal(f->entry(3, 5, &f->host, &d, err, sizeof err), EDGERT_E_ABI);
    assert_non_null(strstr(err, "[3, 5]"));
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    assert_int_equal(f->entry(3, 5, &f->host, &d, tiny, sizeof tiny), EDGERT_E_ABI);
    assert_int_equal(strlen(tiny), sizeof tiny - 1u);
    assert_int_equal(f->entry(3, 5, &f->host, &d, NULL, 0), EDGERT_E_ABI);
    assert_int_equal(f->entry(1, 1, &f->host, NULL, err, sizeof err), EDGERT_E_USAGE);
}

static void test_plugin_init_options(void **state)
{
    plugin_fx *f = *state;
    char err[256];
    void *inst = (void *)(uintptr_t)1;

    static const char *const bogus[] = {"path=fma", "bogus", " "};
    for (size_t i = 0; i < sizeof bogus / sizeof bogus[0]; i++) {
        err[0] = '\0';
        assert_int_equal(f->desc->init(&f->host, bogus[i], &inst, err, sizeof err),
                         EDGERT_E_USAGE);
        assert_null(inst);
        assert_non_null(strstr(err, bogus[i]));
    }
    assert_int_equal(f->desc->init(NULL, NULL, &inst, err, sizeof err), EDGERT_E_USAGE);

    /* NULL and empty options are both accepted; instances are independent */
    void *a = NULL, *b = NULL;
    assert_int_equal(f->desc->init(&f->host, NULL, &a, err, sizeof err), EDGERT_OK);
    assert_int_equal(f->desc->init(&f->host, "", &b, err, sizeof err), EDGERT_OK);
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    assert_int_equal(f->desc->self_test(b, err, sizeof err), EDGERT_OK);
    f->desc->fini(a);
    f->desc->fini(b);
    f->desc->fini(NULL);
}

static void test_plugin_self_test(void **state)
{
    plugin_fx *f = *state;
    char err[256] = "";
    edgert_status rc = f->desc->self_test(f->inst, err, sizeof err);
    if (rc != EDGERT_OK)
        fail_msg("self_test failed (%d): %s", (int)rc, err);
    const char *what = f->desc->describe(f->inst);
    assert_non_null(what);
    assert_string_equal(what, "portable C, fp32 activations");
    assert_int_equal(atomic_load(&f->th.live_allocs), 1); /* just the instance */
}

/* Tolerance for comparing the plugin's fp32 GEMM with a double-precision
 * GEMM over the same dequantized weights.
 *
 * Both use bit-identical weights (s * (q - z) in fp32, the expression
 * edgert_dequantize documents), so the only difference is fp32 arithmetic:
 * each product x*w is rounded once (relative 2^-24) and each sum of the
 * plugin's fixed summation tree adds at most its depth d of roundings.
 * Standard forward-error analysis bounds |err| by about d * 2^-24 *
 * sum_k |x_k w_k|. The plugin's tree is 4 lanes of <= 64 terms per 256-column
 * segment, 2 adds to merge lanes, 1 add per segment: d < 70 for k <= 256,
 * giving 70 * 6e-8 = 4.2e-6 < 1e-5. The 1e-7 absolute term covers rows whose
 * terms cancel to (almost) 0. A wrong code, scale, zero point or index moves
 * a result by ~s * |x| ~ 1e-3, far above this. */
static double gemm_tolerance(double abs_sum)
{
    return 1e-5 * abs_sum + 1e-7;
}

#define Y_SENTINEL 4242.5f

static void check_gemm(plugin_fx *f, const void *packed, const float *wd, uint32_t m, uint32_t n,
                       uint32_t k, const char *what, uint64_t seed)
{
    char err[256] = "";
    size_t ldx = (size_t)k + 3u, ldy = (size_t)n + 5u;
    float *x = malloc((size_t)m * ldx * sizeof *x);
    float *y = malloc((size_t)m * ldy * sizeof *y);
    float *y2 = malloc((size_t)m * n * sizeof *y2);
    assert_non_null(x);
    assert_non_null(y);
    assert_non_null(y2);

    gen_rng r;
    gen_rng_seed(&r, seed);
    for (size_t i = 0; i < m; i++)
        for (size_t c = 0; c < ldx; c++)
            /* padding columns are NaN: reading them would poison y */
            x[i * ldx + c] = c < k ? gen_rng_normal(&r) : NAN;
    for (size_t i = 0; i < (size_t)m * ldy; i++)
        y[i] = Y_SENTINEL;

    edgert_gemm_args ga = {
        .struct_size = sizeof ga, .m = m, .x = x, .ldx = ldx, .y = y, .ldy = ldy,
    };
    edgert_status rc = f->desc->gemm(f->inst, packed, &ga, err, sizeof err);
    if (rc != EDGERT_OK)
        fail_msg("%s m=%u: gemm failed (%d): %s", what, m, (int)rc, err);

    for (size_t i = 0; i < m; i++) {
        for (size_t j = 0; j < ldy; j++) {
            float got = y[i * ldy + j];
            if (j >= n) {
                if (memcmp(&got, &(float){Y_SENTINEL}, sizeof got) != 0)
                    fail_msg("%s m=%u: y[%zu][%zu] (padding, ldy=%zu) was overwritten with %g",
                             what, m, i, j, ldy, (double)got);
                continue;
            }
            double acc = 0.0, mag = 0.0;
            for (size_t c = 0; c < k; c++) {
                double t = (double)x[i * ldx + c] * (double)wd[j * k + c];
                acc += t;
                mag += fabs(t);
            }
            double tol = gemm_tolerance(mag);
            if (!(fabs((double)got - acc) <= tol))
                fail_msg("%s m=%u: y[%zu][%zu] = %.9g, reference %.9g, |err| %.3g > tol %.3g",
                         what, m, i, j, (double)got, acc, fabs((double)got - acc), tol);
        }
    }

    /* Same call with tight strides (ldx == k, ldy == n): the result must be
     * bit-identical, since each output's summation order is fixed. */
    float *xt = malloc((size_t)m * k * sizeof *xt);
    assert_non_null(xt);
    for (size_t i = 0; i < m; i++)
        memcpy(xt + i * k, x + i * ldx, k * sizeof *xt);
    edgert_gemm_args gt = {
        .struct_size = sizeof gt, .m = m, .x = xt, .ldx = k, .y = y2, .ldy = n,
    };
    assert_int_equal(f->desc->gemm(f->inst, packed, &gt, err, sizeof err), EDGERT_OK);
    for (size_t i = 0; i < m; i++)
        assert_memory_equal(y2 + i * n, y + i * ldy, n * sizeof *y2);

    free(xt);
    free(x);
    free(y);
    free(y2);
}

static void test_plugin_gemm_shapes(void **state)
{
    plugin_fx *f = *state;
    static const uint32_t ms[] = {1, 3, 17, 64, 512}; /* 512 (a prefill) for n <= 33 */
    static const uint32_t ns[] = {1, 7, 33, 129};
    static const uint32_t ks[] = {128, 256, 200, 77};
    /* 128 and 32 as deployed; 17 makes groups start on odd columns (high
     * nibble) and end mid-byte */
    static const uint32_t groups[] = {128, 32, 17};
    char err[256], what[128];
    uint64_t seed = 1;

    for (size_t ni = 0; ni < 4; ni++)
        for (size_t ki = 0; ki < 4; ki++)
            for (size_t gi = 0; gi < 3; gi++)
                for (int sym = 0; sym < 2; sym++) {
                    uint32_t n = ns[ni], k = ks[ki], g = groups[gi];
                    snprintf(what, sizeof what, "%s n=%u k=%u group=%u",
                             sym ? "symmetric" : "asymmetric", n, k, g);
                    float *w = malloc((size_t)n * k * sizeof *w);
                    float *wd = malloc((size_t)n * k * sizeof *wd);
                    assert_non_null(w);
                    assert_non_null(wd);
                    gen_fill_weights(w, (size_t)n * k, seed++);
                    edgert_qtensor t;
                    assert_int_equal(edgert_quantize_rtn(w, n, k, g, sym, &t), EDGERT_OK);
                    t.view.name = what;
                    edgert_dequantize(&t.view, wd);

                    void *packed = NULL;
                    size_t bytes = 0;
                    edgert_status rc = f->desc->pack(f->inst, &t.view, &packed, &bytes, err,
                                                     sizeof err);
                    if (rc != EDGERT_OK)
                        fail_msg("%s: pack failed (%d): %s", what, (int)rc, err);
                    /* the packed form holds codes, fp32 scales, u8 zeros,
                     * plus a header and alignment padding */
                    size_t groups_n = (size_t)n * tu_groups_of(k, g);
                    size_t payload = (size_t)n * ((k + 1u) / 2u) + groups_n * 5u;
                    assert_true(bytes >= payload);
                    assert_true(bytes <= payload + 512u);
                    /* pack keeps no pointer into the canonical tensor */
                    edgert_qtensor_free(&t);

                    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
                        if (ms[mi] <= 64 || n <= 33)
                            check_gemm(f, packed, wd, ms[mi], n, k, what, seed++);

                    f->desc->packed_free(f->inst, packed);
                    free(w);
                    free(wd);
                }
    assert_int_equal(atomic_load(&f->th.live_allocs), 1);
}

/* Bits per weight the manifest declares (4.3125 at group 128) must match
 * what pack actually stores for a realistically sized matrix. */
static void test_plugin_packed_bytes(void **state)
{
    plugin_fx *f = *state;
    char err[256];
    enum { N = 256, K = 1024 };
    float *w = malloc((size_t)N * K * sizeof *w);
    assert_non_null(w);
    gen_fill_weights(w, (size_t)N * K, 99u);
    for (int sym = 0; sym < 2; sym++) {
        edgert_qtensor t;
        assert_int_equal(edgert_quantize_rtn(w, N, K, 128, sym, &t), EDGERT_OK);
        void *packed = NULL;
        size_t bytes = 0;
        assert_int_equal(f->desc->pack(f->inst, &t.view, &packed, &bytes, err, sizeof err),
                         EDGERT_OK);
        double bpw = (double)bytes * 8.0 / ((double)N * K);
        assert_true(bpw >= 4.3125 && bpw < 4.3125 + 0.01);
        f->desc->packed_free(f->inst, packed);
        edgert_qtensor_free(&t);
    }
    free(w);
}

static void test_plugin_errors(void **state)
{
    plugin_fx *f = *state;
    char err[256];
    uint8_t codes[2 * 4] = {0};
    float scales[2 * 2] = {0.1f, 0.1f, 0.1f, 0.1f};
    uint8_t zeros[2 * 2] = {8, 8, 16, 8};
    edgert_qweights qw = {
        .struct_size = sizeof qw, .n = 2, .k = 8, .group = 4,
        .codes = codes, .scales = scales, .zeros = zeros, .name = "blk.3.ffn_down",
    };
    void *packed = (void *)(uintptr_t)1;
    size_t bytes = 77;

    /* zero point out of range: refused, names the tensor and the place */
    err[0] = '\0';
    assert_int_equal(f->desc->pack(f->inst, &qw, &packed, &bytes, err, sizeof err),
                     EDGERT_E_USAGE);
    assert_null(packed);
    assert_int_equal(bytes, 0);
    assert_non_null(strstr(err, "blk.3.ffn_down"));
    assert_non_null(strstr(err, "row 1 group 0"));

    zeros[2] = 15;
    edgert_qweights bad = qw;
    bad.n = 0;
    err[0] = '\0';
    assert_int_equal(f->desc->pack(f->inst, &bad, &packed, &bytes, err, sizeof err),
                     EDGERT_E_USAGE);
    assert_non_null(strstr(err, "blk.3.ffn_down"));
    bad = qw;
    bad.codes = NULL;
    assert_int_equal(f->desc->pack(f->inst, &bad, &packed, &bytes, err, sizeof err),
                     EDGERT_E_USAGE);
    bad = qw;
    bad.struct_size = 8;
    assert_int_equal(f->desc->pack(f->inst, &bad, &packed, &bytes, err, sizeof err),
                     EDGERT_E_USAGE);
    assert_int_equal(f->desc->pack(f->inst, NULL, &packed, &bytes, err, sizeof err),
                     EDGERT_E_USAGE);

    assert_int_equal(f->desc->pack(f->inst, &qw, &packed, &bytes, err, sizeof err), EDGERT_OK);

    float x[2 * 8] = {0}, y[2 * 2] = {0};
    edgert_gemm_args ok = {.struct_size = sizeof ok, .m = 2, .x = x, .ldx = 8, .y = y, .ldy = 2};
    assert_int_equal(f->desc->gemm(f->inst, packed, &ok, err, sizeof err), EDGERT_OK);

    edgert_gemm_args ga;
    ga = ok;
    ga.m = 0;
    err[0] = '\0';
    assert_int_equal(f->desc->gemm(f->inst, packed, &ga, err, sizeof err), EDGERT_E_USAGE);
    assert_non_null(strstr(err, "blk.3.ffn_down"));
    ga = ok;
    ga.ldx = 7;
    err[0] = '\0';
    assert_int_equal(f->desc->gemm(f->inst, packed, &ga, err, sizeof err), EDGERT_E_USAGE);
    assert_non_null(strstr(err, "ldx 7"));
    ga = ok;
    ga.ldy = 1;
    assert_int_equal(f->desc->gemm(f->inst, packed, &ga, err, sizeof err), EDGERT_E_USAGE);
    ga = ok;
    ga.x = NULL;
    assert_int_equal(f->desc->gemm(f->inst, packed, &ga, err, sizeof err), EDGERT_E_USAGE);
    ga = ok;
    ga.y = NULL;
    assert_int_equal(f->desc->gemm(f->inst, packed, &ga, err, sizeof err), EDGERT_E_USAGE);
    ga = ok;
    ga.struct_size = 4;
    assert_int_equal(f->desc->gemm(f->inst, packed, &ga, err, sizeof err), EDGERT_E_USAGE);
    assert_int_equal(f->desc->gemm(f->inst, packed, NULL, err, sizeof err), EDGERT_E_USAGE);
    assert_int_equal(f->desc->gemm(f->inst, NULL, &ok, err, sizeof err), EDGERT_E_USAGE);
    /* a buffer that is not a packed handle of this plugin */
    uint64_t junk[32] = {0};
    assert_int_equal(f->desc->gemm(f->inst, junk, &ok, err, sizeof err), EDGERT_E_USAGE);

    f->desc->packed_free(f->inst, packed);
    f->desc->packed_free(f->inst, NULL);
    assert_int_equal(atomic_load(&f->th.live_allocs), 1);
}

/* The plugin's own map, without the core: a handle over bytes it did not
 * allocate (one small header allocation, no copy), results bit for bit equal
 * to the packed handle's, and the plugin's own argument checks (the core
 * checks alignment before them; the plugin checks again). */
static void test_plugin_packed_map(void **state)
{
    plugin_fx *f = *state;
    const edgert_plugin *d = NULL;
    char err[256] = "";
    assert_int_equal(f->entry(1, 2, &f->host, &d, err, sizeof err), EDGERT_OK);
    enum { N = 5, K = 200, G = 64 };
    float w[N * K], x[2 * K], y0[2 * N], y1[2 * N];
    gen_fill_weights(w, N * K, 7u);
    for (int i = 0; i < 2 * K; i++)
        x[i] = (float)(i % 7) * 0.25f - 0.75f;
    edgert_qtensor t;
    assert_int_equal(edgert_quantize_rtn(w, N, K, G, 0, &t), EDGERT_OK);
    t.view.name = "blk.0.attn_q";
    void *packed = NULL, *mapped = NULL;
    size_t bytes = 0, size = 0;
    const void *data = NULL;
    assert_int_equal(d->pack(f->inst, &t.view, &packed, &bytes, err, sizeof err), EDGERT_OK);
    assert_int_equal(d->packed_data(f->inst, packed, &data, &size, err, sizeof err), EDGERT_OK);
    assert_true(size <= bytes && (uintptr_t)data % EDGERT_PACKED_ALIGN == 0);
    unsigned char *copy = aligned_alloc(EDGERT_PACKED_ALIGN, (size + 127u) & ~(size_t)63u);
    assert_non_null(copy);
    memcpy(copy, data, size);
    edgert_qweights shape = {.struct_size = sizeof shape, .n = N, .k = K, .group = G,
                             .name = "blk.0.attn_q"};
    long before = atomic_load(&f->th.live_allocs);
    assert_int_equal(d->packed_map(f->inst, &shape, copy, size, &mapped, err, sizeof err),
                     EDGERT_OK);
    assert_int_equal(atomic_load(&f->th.live_allocs), before + 1); /* its header only */
    assert_true(atomic_load(&f->th.last_size) < 256);
    edgert_gemm_args ga = {.struct_size = sizeof ga, .m = 2, .x = x, .ldx = K, .y = y0, .ldy = N};
    assert_int_equal(d->gemm(f->inst, packed, &ga, err, sizeof err), EDGERT_OK);
    d->packed_free(f->inst, packed);
    edgert_qtensor_free(&t);
    ga.y = y1;
    assert_int_equal(d->gemm(f->inst, mapped, &ga, err, sizeof err), EDGERT_OK);
    assert_memory_equal(y0, y1, sizeof y0);
    assert_int_equal(d->packed_data(f->inst, mapped, &data, &size, err, sizeof err), EDGERT_OK);
    assert_ptr_equal(data, copy);
    d->packed_free(f->inst, mapped);

    /* the plugin's own checks: misaligned, NULLs, a zero shape, a handle not its own */
    void *out = (void *)(uintptr_t)1;
    err[0] = '\0';
    assert_int_equal(d->packed_map(f->inst, &shape, copy + 8, size - 8, &out, err, sizeof err),
                     EDGERT_E_USAGE);
    assert_null(out);
    assert_non_null(strstr(err, "aligned"));
    assert_non_null(strstr(err, "blk.0.attn_q"));
    assert_int_equal(d->packed_map(f->inst, NULL, copy, size, &out, err, sizeof err),
                     EDGERT_E_USAGE);
    assert_int_equal(d->packed_map(f->inst, &shape, NULL, size, &out, err, sizeof err),
                     EDGERT_E_USAGE);
    assert_int_equal(d->packed_map(f->inst, &shape, copy, size, NULL, err, sizeof err),
                     EDGERT_E_USAGE);
    shape.k = 0;
    assert_int_equal(d->packed_map(f->inst, &shape, copy, size, &out, err, sizeof err),
                     EDGERT_E_USAGE);
    uint64_t junk[32] = {0};
    assert_int_equal(d->packed_data(f->inst, junk, &data, &size, err, sizeof err),
                     EDGERT_E_USAGE);
    assert_null(data);
    assert_int_equal(d->packed_data(f->inst, NULL, &data, &size, err, sizeof err),
                     EDGERT_E_USAGE);
    free(copy);
    assert_int_equal(atomic_load(&f->th.live_allocs), 1);
}

int main(int argc, char **argv)
{
    g_plugin_path = argc > 1 ? argv[1] : getenv("EDGERT_TEST_REF_PLUGIN");

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plugin_abi),
        cmocka_unit_test(test_plugin_init_options),
        cmocka_unit_test(test_plugin_self_test),
        cmocka_unit_test(test_plugin_gemm_shapes),
        cmocka_unit_test(test_plugin_packed_bytes),
        cmocka_unit_test(test_plugin_errors),
        cmocka_unit_test(test_plugin_packed_map),
    };
    return tu_run_group("ref-w4a16", tests, plugin_setup, plugin_teardown);
}
