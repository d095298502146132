/*
 * tests/test_ref.c — the quantizer (core/weights.c), the thread pool
 * (core/threadpool.c) and the reference backend plugin (plugins/ref-w4a16),
 * tested directly, without the loader.
 *
 * The plugin is dlopen'ed by path: argv[1], else $EDGERT_TEST_REF_PLUGIN.
 * The test builds its own edgert_host: logging to stderr, aligned_alloc with
 * a live-allocation count (so leaks inside the plugin show up as a number,
 * not only under ASan), and parallel_for backed by a 2-thread er_pool so the
 * pool is exercised by real work too.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h> /* cmocka needs these before its header */
#include <cmocka.h>

#include "internal.h"
#include "generate.h"

static const char *g_plugin_path; /* set once in main, read-only afterwards */

/* ======================================================================== */
/* quantizer                                                                 */
/* ======================================================================== */

static size_t groups_of(uint32_t k, uint32_t group)
{
    return (k + (size_t)group - 1u) / group;
}

/* Check |w - dequant(w)| <= s/2 for every element (plus the rounding of one
 * fp32 multiply: |s * (q - z)| <= 15 s, so 15 s * 2^-24 < 1e-6 s). The
 * asymmetric quantizer widens the range to include 0, so its extremes clamp
 * to the nearest representable value and the bound holds for all elements;
 * the symmetric one never clamps (|w / s| <= 7). */
static void check_rtn_error(const float *w, uint32_t n, uint32_t k, uint32_t group, int sym)
{
    edgert_qtensor t;
    float *d = malloc((size_t)n * k * sizeof *d);
    assert_non_null(d);
    assert_int_equal(edgert_quantize_rtn(w, n, k, group, sym, &t), EDGERT_OK);
    assert_int_equal(t.view.struct_size, sizeof(edgert_qweights));
    assert_int_equal(t.view.n, n);
    assert_int_equal(t.view.k, k);
    assert_int_equal(t.view.group, group);
    assert_ptr_equal(t.view.codes, t.codes);
    assert_ptr_equal(t.view.scales, t.scales);
    if (sym) {
        assert_null(t.zeros);
        assert_null(t.view.zeros);
    } else {
        assert_non_null(t.zeros);
        assert_ptr_equal(t.view.zeros, t.zeros);
    }
    edgert_dequantize(&t.view, d);

    size_t groups = groups_of(k, group);
    for (uint32_t r = 0; r < n; r++) {
        for (uint32_t c = 0; c < k; c++) {
            size_t gi = (size_t)r * groups + c / group;
            float s = t.scales[gi];
            unsigned z = sym ? 8u : t.zeros[gi];
            unsigned q = edgert_qcode(&t.view, r, c);
            assert_true(s >= 0.0f);
            assert_true(z <= 15u);
            assert_true(q <= 15u);
            /* dequantize is exactly the documented expression */
            float expect = s * (float)((int)q - (int)z);
            assert_memory_equal(&d[(size_t)r * k + c], &expect, sizeof expect);
            double err = fabs((double)w[(size_t)r * k + c] - (double)d[(size_t)r * k + c]);
            double bound = 0.5 * s + 2e-6 * s;
            if (!(err <= bound))
                fail_msg("%s n=%u k=%u group=%u: w[%u][%u]=%.9g dequantizes to %.9g, |err| %.3g > "
                         "s/2 = %.3g",
                         sym ? "symmetric" : "asymmetric", n, k, group, r, c,
                         (double)w[(size_t)r * k + c], (double)d[(size_t)r * k + c], err, 0.5 * s);
        }
        if (k & 1u) /* padding nibble of an odd row is 0 */
            assert_int_equal(t.codes[(size_t)r * ((k + 1u) / 2u) + k / 2u] >> 4, 0);
    }
    edgert_qtensor_free(&t);
    assert_null(t.codes);
    free(d);
}

static void test_rtn_error_bound(void **state)
{
    (void)state;
    static const uint32_t shapes[][3] = {
        {4, 128, 128}, {3, 200, 128}, {5, 77, 32}, {2, 1, 1}, {1, 129, 128}, {7, 33, 7},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        uint32_t n = shapes[i][0], k = shapes[i][1], g = shapes[i][2];
        float *w = malloc((size_t)n * k * sizeof *w);
        assert_non_null(w);
        gen_fill_weights(w, (size_t)n * k, 1000u + i);
        check_rtn_error(w, n, k, g, 1);
        check_rtn_error(w, n, k, g, 0);
        /* all-positive and all-negative rows: the asymmetric range must
         * still include 0, so nothing clamps far away */
        for (size_t j = 0; j < (size_t)n * k; j++)
            w[j] = 1.0f + fabsf(w[j]);
        check_rtn_error(w, n, k, g, 0);
        check_rtn_error(w, n, k, g, 1);
        for (size_t j = 0; j < (size_t)n * k; j++)
            w[j] = -w[j];
        check_rtn_error(w, n, k, g, 0);
        free(w);
    }
}

static void test_rtn_codes_layout(void **state)
{
    (void)state;
    /* symmetric, one group of 3, max|w| = 7 => s = 1, codes = w + 8 */
    const float w[3] = {-7.0f, 0.0f, 3.0f};
    edgert_qtensor t;
    assert_int_equal(edgert_quantize_rtn(w, 1, 3, 128, 1, &t), EDGERT_OK);
    assert_true(t.scales[0] == 1.0f);
    assert_int_equal(t.codes[0], 1u | (8u << 4)); /* low nibble first */
    assert_int_equal(t.codes[1], 11u);            /* high nibble padding 0 */
    assert_int_equal(edgert_qcode(&t.view, 0, 2), 11u);
    edgert_qtensor_free(&t);

    /* asymmetric: [-1, 2] over 15 steps: s = 0.2, z = round(5) = 5 */
    const float w2[4] = {-1.0f, 2.0f, 0.0f, 0.4f};
    assert_int_equal(edgert_quantize_rtn(w2, 1, 4, 4, 0, &t), EDGERT_OK);
    assert_true(fabsf(t.scales[0] - 0.2f) < 1e-7f);
    assert_int_equal(t.zeros[0], 5);
    assert_int_equal(edgert_qcode(&t.view, 0, 0), 0);
    assert_int_equal(edgert_qcode(&t.view, 0, 1), 15);
    assert_int_equal(edgert_qcode(&t.view, 0, 2), 5);
    assert_int_equal(edgert_qcode(&t.view, 0, 3), 7);
    edgert_qtensor_free(&t);

    /* two rows with odd k: the second row starts on its own byte */
    const float w3[6] = {7, 7, 7, -7, -7, -7};
    assert_int_equal(edgert_quantize_rtn(w3, 2, 3, 3, 1, &t), EDGERT_OK);
    assert_int_equal(t.codes[0], 15u | (15u << 4));
    assert_int_equal(t.codes[1], 15u);
    assert_int_equal(t.codes[2], 1u | (1u << 4));
    assert_int_equal(t.codes[3], 1u);
    edgert_qtensor_free(&t);
}

static void test_rtn_constant_groups(void **state)
{
    (void)state;
    /* k = 200, group 64: groups [0,64) 0.37, [64,128) -1.5, [128,192) 0,
     * [192,200) 3e-3; plus a row whose partial last group holds 1 element */
    enum { K = 200, G = 64 };
    float w[2 * K], d[2 * K];
    for (int c = 0; c < K; c++) {
        w[c] = c < 64 ? 0.37f : c < 128 ? -1.5f : c < 192 ? 0.0f : 3e-3f;
        w[K + c] = 0.01f * (float)(c % 13) - 0.05f;
    }
    edgert_qtensor t;
    assert_int_equal(edgert_quantize_rtn(w, 2, K, G, 0, &t), EDGERT_OK);
    edgert_dequantize(&t.view, d);
    /* row 0: every group constant, reproduced bit for bit */
    assert_memory_equal(d, w, K * sizeof(float));
    edgert_qtensor_free(&t);

    /* symmetric: all-zero group is exactly 0; constant groups within s/2 */
    assert_int_equal(edgert_quantize_rtn(w, 2, K, G, 1, &t), EDGERT_OK);
    assert_null(t.zeros);
    edgert_dequantize(&t.view, d);
    for (int c = 128; c < 192; c++)
        assert_true(d[c] == 0.0f);
    assert_true(t.scales[2] == 0.0f);
    assert_int_equal(edgert_qcode(&t.view, 0, 130), 8);
    for (int c = 0; c < K; c++)
        assert_true(fabs((double)d[c] - (double)w[c]) <= 0.5 * t.scales[c / G] + 1e-9);
    edgert_qtensor_free(&t);

    /* Many constant groups with arbitrary values (most c are not
     * reproduced by (c / 15) * 15 in fp32): every one exactly. */
    enum { NC = 64, GC = 4 };
    float wc[NC * GC], dc[NC * GC];
    gen_fill_weights(wc, NC, 11u);
    for (int i = NC - 1; i >= 0; i--)
        for (int j = 0; j < GC; j++)
            wc[i * GC + j] = wc[i];
    assert_int_equal(edgert_quantize_rtn(wc, 2, NC * GC / 2, GC, 0, &t), EDGERT_OK);
    edgert_dequantize(&t.view, dc);
    assert_memory_equal(dc, wc, sizeof wc);
    edgert_qtensor_free(&t);

    /* k = 129, group 128: the last group has one element, stored exactly */
    float w1[129], d1[129];
    gen_fill_weights(w1, 129, 7u);
    assert_int_equal(edgert_quantize_rtn(w1, 1, 129, 128, 0, &t), EDGERT_OK);
    edgert_dequantize(&t.view, d1);
    assert_memory_equal(&d1[128], &w1[128], sizeof(float));
    edgert_qtensor_free(&t);

    /* all zeros, both modes: exactly zero out */
    float z[16] = {0}, dz[16];
    for (int sym = 0; sym < 2; sym++) {
        assert_int_equal(edgert_quantize_rtn(z, 2, 8, 4, sym, &t), EDGERT_OK);
        edgert_dequantize(&t.view, dz);
        for (int i = 0; i < 16; i++)
            assert_true(dz[i] == 0.0f && !signbit(dz[i]));
        edgert_qtensor_free(&t);
    }
}

static void test_rtn_argument_errors(void **state)
{
    (void)state;
    float w[16] = {0};
    edgert_qtensor t;
    memset(&t, 0xAB, sizeof t);
    assert_int_equal(edgert_quantize_rtn(NULL, 2, 8, 4, 0, &t), EDGERT_E_USAGE);
    assert_null(t.codes); /* out is cleared even on failure */
    assert_null(t.scales);
    assert_int_equal(edgert_quantize_rtn(w, 0, 8, 4, 0, &t), EDGERT_E_USAGE);
    assert_int_equal(edgert_quantize_rtn(w, 2, 0, 4, 0, &t), EDGERT_E_USAGE);
    assert_int_equal(edgert_quantize_rtn(w, 2, 8, 0, 1, &t), EDGERT_E_USAGE);
    assert_int_equal(edgert_quantize_rtn(w, 2, 8, 4, 0, NULL), EDGERT_E_USAGE);

    /* non-finite input is refused, nothing leaks (ASan checks the latter) */
    w[5] = NAN;
    assert_int_equal(edgert_quantize_rtn(w, 2, 8, 4, 0, &t), EDGERT_E_USAGE);
    assert_null(t.codes);
    w[5] = INFINITY;
    assert_int_equal(edgert_quantize_rtn(w, 2, 8, 4, 1, &t), EDGERT_E_USAGE);
    w[5] = 0.0f;

    /* sizes that cannot be represented are refused before any allocation
     * or read of w: n * groups * 4 overflows size_t here */
    assert_int_equal(edgert_quantize_rtn(w, UINT32_MAX, UINT32_MAX, 1, 0, &t), EDGERT_E_NOMEM);
    assert_null(t.codes);

    /* group larger than k: one partial group per row */
    assert_int_equal(edgert_quantize_rtn(w, 2, 8, 1000, 0, &t), EDGERT_OK);
    edgert_qtensor_free(&t);
    edgert_qtensor_free(&t); /* idempotent */
    edgert_qtensor_free(NULL);

    /* dequantize ignores obviously bad input instead of crashing */
    float out[4] = {1, 2, 3, 4};
    edgert_dequantize(NULL, out);
    edgert_qweights bad = {.struct_size = sizeof bad, .n = 1, .k = 4, .group = 0};
    edgert_dequantize(&bad, out);
    assert_true(out[0] == 1.0f && out[3] == 4.0f);
}

static void test_fill_weights(void **state)
{
    (void)state;
    enum { N = 200000 };
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    gen_fill_weights(a, N, 42u);
    gen_fill_weights(b, N, 42u);
    assert_memory_equal(a, b, N * sizeof *a);
    gen_fill_weights(b, N, 43u);
    assert_memory_not_equal(a, b, N * sizeof *a);

    double sum = 0, sq = 0;
    for (int i = 0; i < N; i++) {
        assert_true(isfinite(a[i]));
        sum += a[i];
        sq += (double)a[i] * a[i];
    }
    double mean = sum / N, sd = sqrt(sq / N - mean * mean);
    /* standard error of the mean is 0.02 / sqrt(2e5) = 4.5e-5 */
    assert_true(fabs(mean) < 3e-4);
    assert_true(sd > 0.0197 && sd < 0.0203);

    gen_rng r1, r2;
    gen_rng_seed(&r1, 0u);
    gen_rng_seed(&r2, 0u);
    assert_true(gen_rng_next(&r1) == gen_rng_next(&r2));
    assert_true(gen_rng_next(&r1) != 0u || gen_rng_next(&r1) != 0u);
    free(a);
    free(b);
}

/* ======================================================================== */
/* thread pool                                                               */
/* ======================================================================== */

typedef struct cover_ctx {
    atomic_uchar *hits;
    size_t n, grain;
    unsigned threads;
    atomic_size_t calls;
    atomic_size_t short_chunks; /* chunks shorter than grain that do not end at n */
    atomic_uint bad_worker;
} cover_ctx;

static void cover_fn(void *arg, size_t begin, size_t end, unsigned worker)
{
    cover_ctx *c = arg;
    atomic_fetch_add(&c->calls, 1u);
    if (worker >= c->threads)
        atomic_fetch_add(&c->bad_worker, 1u);
    if (end - begin < c->grain && end != c->n)
        atomic_fetch_add(&c->short_chunks, 1u);
    for (size_t i = begin; i < end; i++)
        atomic_fetch_add(&c->hits[i], 1u);
}

static void run_cover(er_pool *p, unsigned threads, size_t n, size_t grain)
{
    cover_ctx c = {.n = n, .grain = grain, .threads = threads};
    c.hits = calloc(n ? n : 1u, sizeof *c.hits);
    assert_non_null(c.hits);
    atomic_init(&c.calls, 0u);
    atomic_init(&c.short_chunks, 0u);
    atomic_init(&c.bad_worker, 0u);

    er_pool_run(p, n, grain, cover_fn, &c);

    if (n == 0u)
        assert_int_equal(atomic_load(&c.calls), 0);
    for (size_t i = 0; i < n; i++)
        if (atomic_load(&c.hits[i]) != 1u)
            fail_msg("threads=%u n=%zu grain=%zu: index %zu visited %u times", threads, n, grain,
                     i, (unsigned)atomic_load(&c.hits[i]));
    assert_int_equal(atomic_load(&c.short_chunks), 0);
    assert_int_equal(atomic_load(&c.bad_worker), 0);
    free(c.hits);
}

static void test_pool_coverage(void **state)
{
    (void)state;
    static const size_t ns[] = {0, 1, 2, 3, 1000, 100003};
    static const size_t grains[] = {1, 7, 4096};
    static const unsigned threads[] = {1, 2, 4};
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        er_pool *p = er_pool_create(threads[t]);
        assert_non_null(p);
        assert_int_equal(er_pool_threads(p), threads[t]);
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
            for (size_t g = 0; g < sizeof grains / sizeof grains[0]; g++)
                run_cover(p, threads[t], ns[i], grains[g]);
        er_pool_destroy(p);
    }
}

/* Many back-to-back runs, some after a pause long enough for the workers to
 * leave their spin and sleep on the condition variable. */
typedef struct sum_ctx {
    atomic_ullong sum;
} sum_ctx;

static void sum_fn(void *arg, size_t begin, size_t end, unsigned worker)
{
    (void)worker;
    sum_ctx *s = arg;
    unsigned long long local = 0;
    for (size_t i = begin; i < end; i++)
        local += i;
    atomic_fetch_add(&s->sum, local);
}

static void test_pool_repeated_runs(void **state)
{
    (void)state;
    er_pool *p = er_pool_create(2);
    assert_non_null(p);
    for (int it = 0; it < 3000; it++) {
        size_t n = 1000u + (size_t)(it % 97);
        sum_ctx s;
        atomic_init(&s.sum, 0u);
        er_pool_run(p, n, 1, sum_fn, &s);
        assert_true(atomic_load(&s.sum) == (unsigned long long)n * (n - 1u) / 2u);
        if (it % 500 == 0)
            usleep(2000); /* > spin time: workers go to sleep */
    }
    er_pool_destroy(p);
}

/* Nested: the work function calls er_pool_run on the same pool (or on
 * another pool). The inner call must run serially, as one [0, 50) call on
 * the thread and with the worker index of the outer call. */
typedef struct nest_ctx {
    er_pool *outer_pool, *inner_pool;
    atomic_size_t inner_items;
    atomic_uint inner_not_serial; /* inner call split, or on another thread */
    atomic_uint worker_mismatch;
    atomic_uint workers_seen;     /* bit w: outer worker w ran a chunk */
} nest_ctx;

typedef struct nest_inner {
    nest_ctx *outer;
    pthread_t thread;
    unsigned worker;
} nest_inner;

static void nest_inner_fn(void *arg, size_t begin, size_t end, unsigned worker)
{
    nest_inner *in = arg;
    if (begin != 0u || end != 50u || !pthread_equal(in->thread, pthread_self()))
        atomic_fetch_add(&in->outer->inner_not_serial, 1u);
    if (worker != in->worker)
        atomic_fetch_add(&in->outer->worker_mismatch, 1u);
    atomic_fetch_add(&in->outer->inner_items, end - begin);
}

static void nest_outer_fn(void *arg, size_t begin, size_t end, unsigned worker)
{
    nest_ctx *c = arg;
    atomic_fetch_or(&c->workers_seen, 1u << worker);
    for (size_t i = begin; i < end; i++) {
        nest_inner in = {.outer = c, .thread = pthread_self(), .worker = worker};
        er_pool_run(c->inner_pool, 50, 1, nest_inner_fn, &in);
        usleep(1000); /* slow enough that worker 1 surely takes chunks too */
    }
}

static void run_nested(er_pool *outer, er_pool *inner)
{
    nest_ctx c = {.outer_pool = outer, .inner_pool = inner};
    atomic_init(&c.inner_items, 0u);
    atomic_init(&c.inner_not_serial, 0u);
    atomic_init(&c.worker_mismatch, 0u);
    atomic_init(&c.workers_seen, 0u);
    er_pool_run(outer, 32, 1, nest_outer_fn, &c);
    assert_int_equal(atomic_load(&c.inner_items), 32 * 50);
    assert_int_equal(atomic_load(&c.inner_not_serial), 0);
    assert_int_equal(atomic_load(&c.worker_mismatch), 0);
    assert_int_equal(atomic_load(&c.workers_seen), 3u); /* both workers did outer chunks */
}

static void test_pool_nested(void **state)
{
    (void)state;
    er_pool *a = er_pool_create(2), *b = er_pool_create(2);
    assert_non_null(a);
    assert_non_null(b);
    run_nested(a, a); /* same pool */
    run_nested(a, b); /* another pool: also serial, no oversubscription */
    er_pool_destroy(a);
    er_pool_destroy(b);
}

/* The pool really runs chunks at the same time: with two items on two
 * threads, each item waits (bounded) until the other one has started. A
 * serial pool would time out here. */
typedef struct meet_ctx {
    atomic_uint arrived;
    atomic_uint met;
} meet_ctx;

static void meet_fn(void *arg, size_t begin, size_t end, unsigned worker)
{
    (void)worker;
    meet_ctx *m = arg;
    for (size_t i = begin; i < end; i++) {
        atomic_fetch_add(&m->arrived, 1u);
        for (int t = 0; t < 2000 && atomic_load(&m->arrived) < 2u; t++)
            usleep(1000); /* up to 2 s */
        if (atomic_load(&m->arrived) >= 2u)
            atomic_fetch_add(&m->met, 1u);
    }
}

static void test_pool_parallel(void **state)
{
    (void)state;
    er_pool *p = er_pool_create(2);
    assert_non_null(p);
    for (int it = 0; it < 3; it++) {
        meet_ctx m;
        atomic_init(&m.arrived, 0u);
        atomic_init(&m.met, 0u);
        er_pool_run(p, 2, 1, meet_fn, &m);
        assert_int_equal(atomic_load(&m.met), 2);
        usleep(it == 0 ? 0 : 5000); /* later rounds start from sleeping workers */
    }
    er_pool_destroy(p);
}

/* Two threads run on one pool at the same time, many times over. */
typedef struct conc_arg {
    er_pool *pool;
    pthread_barrier_t *start;
    int failures;
} conc_arg;

static void *conc_thread(void *argp)
{
    conc_arg *a = argp;
    pthread_barrier_wait(a->start);
    for (int it = 0; it < 300; it++) {
        size_t n = 10007u + (size_t)it;
        cover_ctx c = {.n = n, .grain = 1, .threads = er_pool_threads(a->pool)};
        c.hits = calloc(n, sizeof *c.hits);
        if (c.hits == NULL) {
            a->failures++;
            break;
        }
        atomic_init(&c.calls, 0u);
        atomic_init(&c.short_chunks, 0u);
        atomic_init(&c.bad_worker, 0u);
        er_pool_run(a->pool, n, 1, cover_fn, &c);
        for (size_t i = 0; i < n; i++)
            if (atomic_load(&c.hits[i]) != 1u) {
                a->failures++;
                break;
            }
        if (atomic_load(&c.bad_worker) != 0u)
            a->failures++;
        free(c.hits);
    }
    return NULL;
}

static void test_pool_concurrent_callers(void **state)
{
    (void)state;
    er_pool *p = er_pool_create(2);
    assert_non_null(p);
    pthread_barrier_t start;
    assert_int_equal(pthread_barrier_init(&start, NULL, 2), 0);
    conc_arg a = {.pool = p, .start = &start}, b = {.pool = p, .start = &start};
    pthread_t ta, tb;
    assert_int_equal(pthread_create(&ta, NULL, conc_thread, &a), 0);
    assert_int_equal(pthread_create(&tb, NULL, conc_thread, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_barrier_destroy(&start);
    assert_int_equal(a.failures, 0);
    assert_int_equal(b.failures, 0);
    er_pool_destroy(p);
}

typedef struct serial_ctx {
    pthread_t caller;
    int calls, wrong;
} serial_ctx;

static void serial_fn(void *arg, size_t begin, size_t end, unsigned worker)
{
    serial_ctx *s = arg;
    s->calls++;
    if (begin != 0u || end != 100000u || worker != 0u || !pthread_equal(s->caller, pthread_self()))
        s->wrong++;
}

static void test_pool_lifecycle(void **state)
{
    (void)state;
    /* create/destroy without use: no workers were ever started */
    for (unsigned t = 0; t < 5; t++) {
        er_pool *p = er_pool_create(t); /* 0 is treated as 1 */
        assert_non_null(p);
        assert_int_equal(er_pool_threads(p), t ? t : 1u);
        er_pool_destroy(p);
    }
    er_pool_destroy(NULL);

    /* threads == 1: one call on the caller's thread, whatever n and grain */
    er_pool *p = er_pool_create(1);
    assert_non_null(p);
    serial_ctx s = {.caller = pthread_self()};
    er_pool_run(p, 100000, 1, serial_fn, &s);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.wrong, 0);
    er_pool_destroy(p);

    /* grain >= n: not worth splitting, also one call on the caller */
    p = er_pool_create(4);
    assert_non_null(p);
    s.calls = 0;
    er_pool_run(p, 100000, 100000, serial_fn, &s);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.wrong, 0);
    er_pool_destroy(p);
}

/* ======================================================================== */
/* the reference plugin                                                      */
/* ======================================================================== */

typedef struct test_host {
    er_pool *pool;
    atomic_long live_allocs;
    atomic_long bad_align;
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

    /* a host offering more than the plugin knows gets the newest common one */
    d = NULL;
    assert_int_equal(f->entry(0, 3, &f->host, &d, err, sizeof err), EDGERT_OK);
    assert_non_null(d);
    assert_int_equal(d->abi_version, 1);

    static const uint32_t refused[][2] = {{2, 5}, {0, 0}, {3, 1}, {7, 7}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        d = (const edgert_plugin *)(uintptr_t)1; /* must be cleared */
        err[0] = '\0';
        assert_int_equal(f->entry(refused[i][0], refused[i][1], &f->host, &d, err, sizeof err),
                         EDGERT_E_ABI);
        assert_null(d);
        assert_true(strlen(err) > 0);
        assert_non_null(strstr(err, "[1, 1]")); /* names the plugin's range */
    }
    /* the message names the host's range too, and respects err_len */
    assert_int_equal(f->entry(2, 5, &f->host, &d, err, sizeof err), EDGERT_E_ABI);
    assert_non_null(strstr(err, "[2, 5]"));
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    assert_int_equal(f->entry(2, 5, &f->host, &d, tiny, sizeof tiny), EDGERT_E_ABI);
    assert_int_equal(strlen(tiny), sizeof tiny - 1u);
    assert_int_equal(f->entry(2, 5, &f->host, &d, NULL, 0), EDGERT_E_ABI);
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
    static const uint32_t ms[] = {1, 3, 17, 64};
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
                    size_t groups_n = (size_t)n * groups_of(k, g);
                    size_t payload = (size_t)n * ((k + 1u) / 2u) + groups_n * 5u;
                    assert_true(bytes >= payload);
                    assert_true(bytes <= payload + 512u);
                    /* pack keeps no pointer into the canonical tensor */
                    edgert_qtensor_free(&t);

                    for (size_t mi = 0; mi < 4; mi++)
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

int main(int argc, char **argv)
{
    g_plugin_path = argc > 1 ? argv[1] : getenv("EDGERT_TEST_REF_PLUGIN");

    const struct CMUnitTest weight_tests[] = {
        cmocka_unit_test(test_rtn_error_bound),
        cmocka_unit_test(test_rtn_codes_layout),
        cmocka_unit_test(test_rtn_constant_groups),
        cmocka_unit_test(test_rtn_argument_errors),
        cmocka_unit_test(test_fill_weights),
    };
    const struct CMUnitTest pool_tests[] = {
        cmocka_unit_test(test_pool_coverage),
        cmocka_unit_test(test_pool_repeated_runs),
        cmocka_unit_test(test_pool_nested),
        cmocka_unit_test(test_pool_parallel),
        cmocka_unit_test(test_pool_concurrent_callers),
        cmocka_unit_test(test_pool_lifecycle),
    };
    const struct CMUnitTest plugin_tests[] = {
        cmocka_unit_test(test_plugin_abi),
        cmocka_unit_test(test_plugin_init_options),
        cmocka_unit_test(test_plugin_self_test),
        cmocka_unit_test(test_plugin_gemm_shapes),
        cmocka_unit_test(test_plugin_packed_bytes),
        cmocka_unit_test(test_plugin_errors),
    };

    int failed = 0;
    failed += cmocka_run_group_tests_name("weights", weight_tests, NULL, NULL);
    failed += cmocka_run_group_tests_name("threadpool", pool_tests, NULL, NULL);
    failed += cmocka_run_group_tests_name("ref-w4a16", plugin_tests, plugin_setup,
                                          plugin_teardown);
    return failed != 0 ? 1 : 0;
}
