/*
 * tests/run/test_threadpool.c — the thread pool (core/run/threadpool.c) tested
 * directly: coverage of [0, n) in chunks of at least grain, repeated runs,
 * nested and concurrent callers, real parallelism, life cycle.
 *
 * (Split out of tests/plugins/test_ref.c, which held three unrelated suites; the
 * reference plugin's suite, tests/plugins/test_ref.c, still runs its GEMMs on a
 * 2-thread pool, so the pool is exercised by real work too.)
 */
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

#include "common/internal.h"
#include "test_util.h"
#include "run/pool.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_coverage),
        cmocka_unit_test(test_pool_repeated_runs),
        cmocka_unit_test(test_pool_nested),
        cmocka_unit_test(test_pool_parallel),
        cmocka_unit_test(test_pool_concurrent_callers),
        cmocka_unit_test(test_pool_lifecycle),
    };
    return tu_run_group("threadpool", tests, NULL, NULL);
}
