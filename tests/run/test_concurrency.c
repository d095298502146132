/*
 * tests/run/test_concurrency.c — several threads packing and running GEMM at
 * once: on one handle (each thread with its own backend instance, and all of
 * them on one shared instance and packed weights, which the plugin contract
 * allows for gemm), on two handles at once, and two handles opened, used and
 * closed by two threads at the same time. For ref-w4a16, and avx512-w4a16
 * (also with prefetch=auto, whose records the calls share) and avx2-w4a16
 * where they are eligible.
 *
 * What it guards: the thread pool's concurrent callers (a call made while
 * another thread's call is in flight runs serially on its caller), the host
 * table the plugins reach the pool through, and the plugins' pack and gemm.
 * Every result must match the one computed alone before the threads start.
 * .ci/tsan runs this under ThreadSanitizer, where a data race is a failure
 * even when the numbers come out right. Worker threads never call cmocka's
 * asserts (they are not thread-safe): they count failures, the test's
 * thread asserts the counts.
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "edgert/edgert.h"
#include "test_util.h"

/* Large enough that both plugins split pack and gemm over the pool (ref:
 * chunks of >= 32768 multiply-adds; avx512: decode chunks of ~64 KiB of
 * codes, prefill above m = 8), small enough for ThreadSanitizer's speed. */
#define CN 512u
#define CK 1024u
#define CGROUP 128u
#define NTHREADS 4
#define ITERS 3
static const uint32_t cms[2] = {1u, 17u}; /* decode and prefill shapes */

typedef struct work {
    float *x;             /* [17][CK] */
    float *want[2];       /* per shape of cms: the result computed alone */
    edgert_qtensor q;
} work;

typedef struct job {
    edgert_ctx *ctx;
    const char *backend;
    const char *options; /* the instances' options, or NULL */
    const work *w;
    edgert_backend *shared;      /* a shared instance ... */
    const edgert_packed *packed; /* ... and its packed weights, or NULL */
    pthread_barrier_t *start;
    atomic_int *failures;
} job;

static edgert_ctx *open_handle(void)
{
    char err[512] = "";
    edgert_ctx *ctx = tu_open(EDGERT_TEST_BACKEND_DIR, 2, err, sizeof err);
    if (!ctx)
        fprintf(stderr, "edgert_open: %s\n", err);
    return ctx;
}

/* Results of one backend equal its lone run bit for bit: each output is
 * summed by one worker in an order fixed by the shape, whichever worker and
 * however the pool's contention cut the columns (test_ref, and
 * test_avx512_w4a16's same bits in every mode, prefetch=auto's included). */
static int same(const float *got, const float *want, size_t count)
{
    return memcmp(got, want, sizeof(float) * count) == 0;
}

/* y for every shape with instance b and packed p; 0 when each matches w's. */
static int run_shapes(edgert_backend *b, const edgert_packed *p, const work *w, float *y)
{
    char err[512];
    for (int s = 0; s < 2; s++) {
        for (size_t i = 0; i < (size_t)cms[s] * CN; i++) /* an output not written stays NaN */
            y[i] = NAN;
        edgert_gemm_args a = {sizeof a, cms[s], w->x, CK, y, CN};
        if (edgert_gemm(b, p, &a, err, sizeof err) != EDGERT_OK) {
            fprintf(stderr, "gemm: %s\n", err);
            return -1;
        }
        if (w->want[s] && !same(y, w->want[s], (size_t)cms[s] * CN))
            return -1;
    }
    return 0;
}

/* Open an instance, pack, gemm every shape, close: with `record` the results
 * become w's expected ones, else they are checked against them. 0 when all
 * went well. */
static int pack_and_run(edgert_ctx *ctx, const char *backend, const char *options, work *w,
                        int record)
{
    char err[512];
    edgert_backend *b = NULL;
    edgert_packed *p = NULL;
    float *y = malloc(sizeof(float) * cms[1] * CN);
    int rc = -1;
    if (!y || edgert_backend_open(ctx, backend, options, &b, err, sizeof err) != EDGERT_OK ||
        edgert_pack(b, &w->q.view, &p, err, sizeof err) != EDGERT_OK) {
        fprintf(stderr, "%s: %s\n", backend, err);
        goto out;
    }
    if (record) {
        for (int s = 0; s < 2; s++) {
            w->want[s] = calloc((size_t)cms[s] * CN, sizeof(float));
            edgert_gemm_args a = {sizeof a, cms[s], w->x, CK, w->want[s], CN};
            if (!w->want[s] || edgert_gemm(b, p, &a, err, sizeof err) != EDGERT_OK)
                goto out;
        }
        rc = 0;
    } else {
        rc = run_shapes(b, p, w, y);
    }
out:
    edgert_packed_free(p);
    edgert_backend_close(b);
    free(y);
    return rc;
}

static void *worker(void *arg)
{
    job *j = arg;
    float *y = malloc(sizeof(float) * cms[1] * CN);
    pthread_barrier_wait(j->start);
    for (int it = 0; it < ITERS && y; it++) {
        if (pack_and_run(j->ctx, j->backend, j->options, (work *)j->w, 0) != 0)
            atomic_fetch_add(j->failures, 1);
        if (j->shared && run_shapes(j->shared, j->packed, j->w, y) != 0)
            atomic_fetch_add(j->failures, 1);
    }
    if (!y)
        atomic_fetch_add(j->failures, 1);
    free(y);
    return NULL;
}

static void make_work(work *w)
{
    float *dense = malloc(sizeof(float) * CN * CK);
    w->x = malloc(sizeof(float) * cms[1] * CK);
    assert_non_null(dense);
    assert_non_null(w->x);
    for (uint32_t i = 0; i < CN * CK; i++)
        dense[i] = sinf((float)i * 0.37f) * 0.05f;
    for (uint32_t i = 0; i < cms[1] * CK; i++)
        w->x[i] = cosf((float)i * 0.11f);
    assert_int_equal(edgert_quantize_rtn(dense, CN, CK, CGROUP, 0, &w->q), EDGERT_OK);
    free(dense);
}

static void free_work(work *w)
{
    edgert_qtensor_free(&w->q);
    free(w->x);
    free(w->want[0]);
    free(w->want[1]);
}

/* NTHREADS threads, thread i on handles[i % nhandles]; with `shared`, every
 * thread also runs gemm on one instance and packed weights per handle. */
static void run_threads(edgert_ctx **handles, int nhandles, const char *backend,
                        const char *options, work *w, int shared)
{
    char err[512];
    edgert_backend *sb[2] = {NULL, NULL};
    edgert_packed *sp[2] = {NULL, NULL};
    for (int h = 0; shared && h < nhandles; h++) {
        assert_int_equal(
            edgert_backend_open(handles[h], backend, options, &sb[h], err, sizeof err),
            EDGERT_OK);
        assert_int_equal(edgert_pack(sb[h], &w->q.view, &sp[h], err, sizeof err), EDGERT_OK);
    }
    pthread_barrier_t start;
    assert_int_equal(pthread_barrier_init(&start, NULL, NTHREADS), 0);
    atomic_int failures;
    atomic_init(&failures, 0);
    pthread_t t[NTHREADS];
    job jobs[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        int h = i % nhandles;
        jobs[i] = (job){handles[h], backend, options, w, sb[h], sp[h], &start, &failures};
        assert_int_equal(pthread_create(&t[i], NULL, worker, &jobs[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start);
    for (int h = 0; h < nhandles; h++) {
        edgert_packed_free(sp[h]);
        edgert_backend_close(sb[h]);
    }
    assert_int_equal(atomic_load(&failures), 0);
}

/* Whether `backend` is loaded and eligible on this device. */
static int usable(edgert_ctx *ctx, const char *backend)
{
    const edgert_candidate *c = edgert_candidate_find(ctx, backend);
    return c && c->eligible && c->loaded;
}

static void one_handle(const char *backend, const char *options)
{
    edgert_ctx *ctx = open_handle();
    assert_non_null(ctx);
    if (!usable(ctx, backend)) {
        edgert_close(ctx);
        tu_skip("%s is not eligible on this CPU", backend);
    }
    work w = {0};
    make_work(&w);
    assert_int_equal(pack_and_run(ctx, backend, options, &w, 1), 0);
    edgert_ctx *handles[1] = {ctx};
    run_threads(handles, 1, backend, options, &w, 0); /* an instance per thread */
    run_threads(handles, 1, backend, options, &w, 1); /* and one shared by all */
    free_work(&w);
    edgert_close(ctx);
}

static void two_handles(const char *backend)
{
    edgert_ctx *a = open_handle(), *b = open_handle();
    assert_non_null(a);
    assert_non_null(b);
    if (!usable(a, backend)) {
        edgert_close(a);
        edgert_close(b);
        tu_skip("%s is not eligible on this CPU", backend);
    }
    work w = {0};
    make_work(&w);
    assert_int_equal(pack_and_run(a, backend, NULL, &w, 1), 0);
    edgert_ctx *handles[2] = {a, b};
    run_threads(handles, 2, backend, NULL, &w, 1);
    free_work(&w);
    edgert_close(b);
    edgert_close(a);
}

typedef struct life_job {
    const char *backend;
    const work *w;
    pthread_barrier_t *start;
    atomic_int *failures;
} life_job;

/* A whole handle's life on one thread: open (probe, manifests, gates,
 * dlopen, self-test), select, pack, gemm, close. */
static void *handle_life(void *arg)
{
    life_job *j = arg;
    pthread_barrier_wait(j->start);
    for (int it = 0; it < ITERS; it++) {
        edgert_ctx *ctx = open_handle();
        edgert_selection *sel = NULL;
        if (!ctx || edgert_select(ctx, EDGERT_PRIORITY_FIDELITY, NULL, &sel, NULL, 0) !=
                        EDGERT_OK ||
            pack_and_run(ctx, j->backend, NULL, (work *)j->w, 0) != 0)
            atomic_fetch_add(j->failures, 1);
        edgert_selection_free(sel);
        edgert_close(ctx);
    }
    return NULL;
}

static void handles_opened_at_once(const char *backend)
{
    edgert_ctx *ctx = open_handle();
    assert_non_null(ctx);
    if (!usable(ctx, backend)) {
        edgert_close(ctx);
        tu_skip("%s is not eligible on this CPU", backend);
    }
    work w = {0};
    make_work(&w);
    assert_int_equal(pack_and_run(ctx, backend, NULL, &w, 1), 0);
    edgert_close(ctx);
    pthread_barrier_t start;
    assert_int_equal(pthread_barrier_init(&start, NULL, 2), 0);
    atomic_int failures;
    atomic_init(&failures, 0);
    life_job j = {backend, &w, &start, &failures};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, handle_life, &j), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start);
    assert_int_equal(atomic_load(&failures), 0);
    free_work(&w);
}

static void test_ref_one_handle(void **state)
{
    (void)state;
    one_handle("ref-w4a16", NULL);
}

static void test_ref_two_handles(void **state)
{
    (void)state;
    two_handles("ref-w4a16");
}

static void test_ref_handles_opened_at_once(void **state)
{
    (void)state;
    handles_opened_at_once("ref-w4a16");
}

static void test_avx512_one_handle(void **state)
{
    (void)state;
    one_handle("avx512-w4a16", NULL);
}

/* prefetch=auto (plugins/kit/x86/decode_tuning.c): its per-weight records and
 * per-instance choice, under gemm calls from every thread on one shared
 * instance and packed weights */
static void test_avx512_one_handle_prefetch_auto(void **state)
{
    (void)state;
    one_handle("avx512-w4a16", "prefetch=auto");
}

static void test_avx512_two_handles(void **state)
{
    (void)state;
    two_handles("avx512-w4a16");
}

static void test_avx512_handles_opened_at_once(void **state)
{
    (void)state;
    handles_opened_at_once("avx512-w4a16");
}

/* avx2-w4a16, the vendor example: what x86 CPUs without AVX-512 select */
static void test_avx2_one_handle(void **state)
{
    (void)state;
    one_handle("avx2-w4a16", NULL);
}

static void test_avx2_two_handles(void **state)
{
    (void)state;
    two_handles("avx2-w4a16");
}

static void test_avx2_handles_opened_at_once(void **state)
{
    (void)state;
    handles_opened_at_once("avx2-w4a16");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ref_one_handle),
        cmocka_unit_test(test_ref_two_handles),
        cmocka_unit_test(test_ref_handles_opened_at_once),
        cmocka_unit_test(test_avx512_one_handle),
        cmocka_unit_test(test_avx512_one_handle_prefetch_auto),
        cmocka_unit_test(test_avx512_two_handles),
        cmocka_unit_test(test_avx512_handles_opened_at_once),
        cmocka_unit_test(test_avx2_one_handle),
        cmocka_unit_test(test_avx2_two_handles),
        cmocka_unit_test(test_avx2_handles_opened_at_once),
    };
    return tu_run_group("test_concurrency", tests, NULL, NULL);
}
