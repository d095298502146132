/*
 * core/run/threadpool.c — the persistent thread pool behind edgert_host.parallel_for.
 *
 * One pool per handle; nothing here is shared between pools except two
 * thread-local markers (which pool's work, if any, the current thread is
 * executing, and as which worker).
 *
 * Shape of a run (er_pool_run):
 *   - [0, n) is handed out in chunks of decreasing size ("guided"
 *     self-scheduling): each claim takes 1 / threads of what is left, at
 *     least `grain` items, by compare-and-swap on the next unclaimed item.
 *     Early chunks are long (one contiguous stream per thread, which the
 *     hardware prefetcher likes), the last ones short, so a thread slowed
 *     by a neighbour leaves the others a short tail instead of a whole
 *     chunk (fixed threads * 4 chunks left up to an eighth of a decode GEMM
 *     to one thread at the end). Every claim starts a new stream: with
 *     1 / (2 * threads) a decode GEMM took ~18 chunks, with 1 / threads
 *     ~8, and the decode step got 3-5% shorter (Xeon with AMX, bench
 *     decode, 5 interleaved rounds on three backends; prefill unchanged).
 *   - The calling thread is worker 0 and works too. Workers 1..threads-1 are
 *     started lazily the first time a run is big enough to split.
 *   - The caller publishes the job (fields, then `open`, then a new
 *     `generation`), works, waits until every chunk has *finished*, then
 *     closes the job and waits until no worker is still *inside* it.
 *
 * Why the two waits: a worker that wakes late may see the new generation
 * after the caller already did every chunk alone. It announces itself
 * (`active`++), and only then looks at `open`. The caller clears `open`
 * before it waits for `active` to drain. Both sides use sequentially
 * consistent operations, so either the caller sees the worker's increment
 * (and waits for it), or the worker sees `open == 0` (and touches nothing).
 * The job fields can therefore be rewritten by the next run without a
 * latecomer reading half of them. The same store-then-load pattern guards the
 * two sleeps (workers on `wake`, the caller on `done`): whoever is about to
 * sleep publishes that fact before re-checking the condition, and the waker
 * publishes the condition before checking for sleepers.
 *
 * Latency: a decode step makes ~113 runs of ~0.2 ms each. A futex wake costs
 * tens of microseconds, so both sides spin for up to ER_POOL_SPIN_NS (time
 * based, because the cost of one `pause` varies from ~10 to ~140 cycles
 * between CPU generations) before sleeping on a condition variable.
 *
 * Serial fallbacks, all on the calling thread as a single [0, n) call:
 * threads == 1, a run too small to split, a call from inside a pool's work
 * function (nested), and a call while another thread's run is in flight
 * (the dispatch mutex is only ever try-locked, so none of these can block or
 * deadlock). A nested serial call reports the worker index of the thread it
 * runs on, so per-worker scratch indexed by `worker` stays private to the
 * thread that uses it.
 *
 * Read-ahead (edgert_step): the thread that dispatches a run may name a
 * region (er_pool_readahead, thread-local, so one thread's step never
 * touches another's runs): the next GEMM's packed weights. A thread that
 * finds no chunk left to claim while others still work prefetches that
 * region's head, ER_POOL_RA_SLICE bytes per claim, until the run finishes
 * or ER_POOL_RA_MAX bytes are covered: the tail of one dependent GEMM pays
 * for the DRAM latency at the head of the next. Prefetches never fault, so
 * a region freed meanwhile is harmless.
 *
 * er_pool_destroy must not race with er_pool_run on the same pool.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_setname_np */
#endif
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/internal.h"
#include "run/pool.h"

#define ER_POOL_CACHELINE 64
#define ER_POOL_GUIDED_DIV 1 /* a claim takes (left) / threads */
#define ER_POOL_SPIN_NS 40000L /* 40 µs of spinning before a condvar sleep */
#define ER_POOL_RA_SLICE 4096u /* read-ahead bytes per claim */
#define ER_POOL_RA_MAX (256u * 1024u) /* read-ahead per run, at most: well within L2 */

typedef struct er_pool_worker {
    er_pool *pool;
    unsigned index;      /* 1..threads-1 */
    uint64_t start_gen;  /* generation when started: the run that started it counts */
    pthread_t tid;
} er_pool_worker;

struct er_pool {
    unsigned threads;
    unsigned started;      /* workers running; written only under `dispatch` */
    bool start_tried;      /* lazy start attempted (once) */
    er_pool_worker *workers;

    pthread_mutex_t dispatch; /* held (try-locked) by the thread whose run is in flight */
    pthread_mutex_t lock;     /* guards the sleeps below */
    pthread_cond_t wake;      /* workers: new generation or stop */
    pthread_cond_t done;      /* caller: all chunks finished */

    /* The job. Written by the caller while no worker is inside a job,
     * published by the store to `open`. */
    edgert_range_fn fn;
    void *arg;
    size_t n, grain;
    const char *ra_base; /* read-ahead region of this run (ra_len 0: none) */
    size_t ra_len;

    /* Hot atomics on their own cache lines: workers poll `generation` while
     * they take chunks from `next`. */
    alignas(ER_POOL_CACHELINE) atomic_uint_least64_t generation;
    atomic_int open;
    atomic_int stop;
    atomic_uint sleepers;
    alignas(ER_POOL_CACHELINE) atomic_size_t next;     /* first unclaimed item */
    alignas(ER_POOL_CACHELINE) atomic_size_t finished; /* items done */
    atomic_int caller_waiting;
    alignas(ER_POOL_CACHELINE) atomic_uint active;
    alignas(ER_POOL_CACHELINE) atomic_size_t ra_next; /* first read-ahead byte unclaimed */
};

/* Which pool's work function this thread is running (NULL: none), and as
 * which worker. Thread-local, so not state shared between handles. */
static __thread const er_pool *er_tl_pool;
static __thread unsigned er_tl_worker;
/* The read-ahead region this thread's next dispatched runs carry. */
static __thread const char *er_tl_ra_base;
static __thread size_t er_tl_ra_len;

/* ---- small helpers -------------------------------------------------------- */

static inline void er_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

static long long er_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Run fn over [0, n) as one call on this thread, marked as inside `p` so
 * that calls nested in fn stay serial too. */
static void er_pool_serial(const er_pool *p, size_t n, edgert_range_fn fn, void *arg)
{
    const er_pool *prev_pool = er_tl_pool;
    unsigned prev_worker = er_tl_worker;
    /* Keep the enclosing worker's index (nested call) when it is in range
     * for this pool; a call nested across pools of different sizes or from
     * outside any pool is worker 0. */
    unsigned worker = prev_pool != NULL && prev_worker < p->threads ? prev_worker : 0u;

    er_tl_pool = p;
    er_tl_worker = worker;
    fn(arg, 0, n, worker);
    er_tl_pool = prev_pool;
    er_tl_worker = prev_worker;
}

/* ---- the work loop shared by caller and workers --------------------------- */

static void er_pool_notify_done(er_pool *p)
{
    /* seq_cst load after the seq_cst increment of `finished`: pairs with the
     * caller's store of caller_waiting before its re-check. */
    if (atomic_load(&p->caller_waiting)) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->lock);
    }
}

/* No chunk left to claim: prefetch the run's read-ahead region, a slice at
 * a time, while the others finish theirs. */
static void er_pool_read_ahead(er_pool *p)
{
    const size_t n = p->n, len = p->ra_len;
    while (atomic_load_explicit(&p->finished, memory_order_relaxed) != n) {
        size_t off = atomic_fetch_add_explicit(&p->ra_next, ER_POOL_RA_SLICE,
                                               memory_order_relaxed);
        if (off >= len)
            return;
        size_t end = len - off > ER_POOL_RA_SLICE ? off + ER_POOL_RA_SLICE : len;
        for (; off < end; off += ER_POOL_CACHELINE)
            __builtin_prefetch(p->ra_base + off, 0, 2);
    }
}

static void er_pool_work(er_pool *p, unsigned worker)
{
    const size_t n = p->n, grain = p->grain;
    const size_t div = (size_t)p->threads * ER_POOL_GUIDED_DIV;
    edgert_range_fn fn = p->fn;
    void *arg = p->arg;

    size_t begin = atomic_load_explicit(&p->next, memory_order_relaxed);
    while (begin < n) {
        size_t left = n - begin, size = left / div;
        if (size < grain)
            size = grain;
        if (size > left)
            size = left;
        /* on failure `begin` is reloaded with the current value */
        if (!atomic_compare_exchange_weak_explicit(&p->next, &begin, begin + size,
                                                   memory_order_relaxed, memory_order_relaxed))
            continue;
        fn(arg, begin, begin + size, worker);
        if (atomic_fetch_add(&p->finished, size) + size == n)
            er_pool_notify_done(p);
        begin = atomic_load_explicit(&p->next, memory_order_relaxed);
    }
    if (p->ra_len != 0u)
        er_pool_read_ahead(p);
}

/* ---- workers ---------------------------------------------------------------- */

/* Wait until the generation differs from `seen` or stop is set. */
static uint64_t er_pool_wait_generation(er_pool *p, uint64_t seen)
{
    uint64_t g;
    long long deadline = 0;

    for (unsigned spins = 0;; spins++) {
        g = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (g != seen || atomic_load_explicit(&p->stop, memory_order_relaxed))
            return g;
        if ((spins & 31u) == 0u) {
            long long now = er_now_ns();
            if (deadline == 0)
                deadline = now + ER_POOL_SPIN_NS;
            else if (now >= deadline)
                break;
        }
        er_cpu_relax();
    }

    pthread_mutex_lock(&p->lock);
    atomic_fetch_add(&p->sleepers, 1u);
    while ((g = atomic_load(&p->generation)) == seen && !atomic_load(&p->stop))
        pthread_cond_wait(&p->wake, &p->lock);
    atomic_fetch_sub(&p->sleepers, 1u);
    pthread_mutex_unlock(&p->lock);
    return g;
}

static void *er_pool_worker_main(void *argp)
{
    er_pool_worker *self = argp;
    er_pool *p = self->pool;
    uint64_t seen = self->start_gen;

    /* A worker only ever runs this pool's work functions. */
    er_tl_pool = p;
    er_tl_worker = self->index;

    for (;;) {
        seen = er_pool_wait_generation(p, seen);
        if (atomic_load(&p->stop))
            break;
        /* Announce, then look (see the comment at the top of the file). */
        atomic_fetch_add(&p->active, 1u);
        if (atomic_load(&p->open))
            er_pool_work(p, self->index);
        atomic_fetch_sub_explicit(&p->active, 1u, memory_order_release);
    }
    return NULL;
}

/* Start the workers once, under `dispatch`. A failed pthread_create leaves
 * fewer workers; the pool still works (and with none, runs serially). */
static void er_pool_start_workers(er_pool *p)
{
    sigset_t all, old;

    if (p->start_tried)
        return;
    p->start_tried = true;

    /* Workers inherit a fully blocked signal mask: signals are the
     * integrator's business and belong on the integrator's threads. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    uint64_t gen = atomic_load(&p->generation);
    for (unsigned i = 0; i + 1u < p->threads; i++) {
        er_pool_worker *w = &p->workers[i];
        w->pool = p;
        w->index = i + 1u;
        w->start_gen = gen;
        if (pthread_create(&w->tid, NULL, er_pool_worker_main, w) != 0)
            break;
        char name[16];
        snprintf(name, sizeof name, "edgert-w%u", w->index);
        pthread_setname_np(w->tid, name); /* best effort, for debuggers */
        p->started++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ---- public (internal) API ------------------------------------------------ */

er_pool *er_pool_create(unsigned threads)
{
    er_pool *p = NULL;
    int have_dispatch = 0, have_lock = 0, have_wake = 0, have_done = 0;

    if (threads == 0u)
        threads = 1u;

    /* aligned_alloc wants a size that is a multiple of the alignment */
    size_t size = (sizeof *p + ER_POOL_CACHELINE - 1u) & ~(size_t)(ER_POOL_CACHELINE - 1u);
    p = aligned_alloc(ER_POOL_CACHELINE, size);
    if (p == NULL)
        return NULL;
    memset(p, 0, size);
    p->threads = threads;
    atomic_init(&p->generation, 0u);
    atomic_init(&p->open, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->sleepers, 0u);
    atomic_init(&p->next, 0u);
    atomic_init(&p->finished, 0u);
    atomic_init(&p->caller_waiting, 0);
    atomic_init(&p->active, 0u);
    atomic_init(&p->ra_next, 0u);

    if (threads > 1u) {
        p->workers = calloc(threads - 1u, sizeof *p->workers);
        if (p->workers == NULL)
            goto fail;
    }
    if (pthread_mutex_init(&p->dispatch, NULL) != 0)
        goto fail;
    have_dispatch = 1;
    if (pthread_mutex_init(&p->lock, NULL) != 0)
        goto fail;
    have_lock = 1;
    if (pthread_cond_init(&p->wake, NULL) != 0)
        goto fail;
    have_wake = 1;
    if (pthread_cond_init(&p->done, NULL) != 0)
        goto fail;
    have_done = 1;
    return p;

fail:
    if (have_done)
        pthread_cond_destroy(&p->done);
    if (have_wake)
        pthread_cond_destroy(&p->wake);
    if (have_lock)
        pthread_mutex_destroy(&p->lock);
    if (have_dispatch)
        pthread_mutex_destroy(&p->dispatch);
    free(p->workers);
    free(p);
    return NULL;
}

void er_pool_destroy(er_pool *p)
{
    if (p == NULL)
        return;

    if (p->started > 0u) {
        atomic_store(&p->stop, 1);
        atomic_fetch_add(&p->generation, 1u);
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
        for (unsigned i = 0; i < p->started; i++)
            pthread_join(p->workers[i].tid, NULL);
    }
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->dispatch);
    free(p->workers);
    free(p);
}

void er_pool_readahead(const void *base, size_t len)
{
    er_tl_ra_base = base;
    er_tl_ra_len = base != NULL ? (len < ER_POOL_RA_MAX ? len : ER_POOL_RA_MAX) : 0u;
}

unsigned er_pool_threads(const er_pool *p)
{
    return p != NULL ? p->threads : 1u;
}

void er_pool_run(er_pool *p, size_t n, size_t grain, edgert_range_fn fn, void *arg)
{
    if (fn == NULL || n == 0u)
        return;
    if (grain == 0u)
        grain = 1u;
    if (p == NULL) {
        fn(arg, 0, n, 0u);
        return;
    }

    if (p->threads == 1u || n <= grain || er_tl_pool != NULL) {
        er_pool_serial(p, n, fn, arg);
        return;
    }
    if (pthread_mutex_trylock(&p->dispatch) != 0) {
        /* another thread's run is in flight: do ours alone */
        er_pool_serial(p, n, fn, arg);
        return;
    }
    er_pool_start_workers(p);
    if (p->started == 0u) {
        pthread_mutex_unlock(&p->dispatch);
        er_pool_serial(p, n, fn, arg);
        return;
    }

    /* Publish. No worker is inside a job here (the previous run drained
     * `active` under this same mutex), so plain writes are safe. */
    p->fn = fn;
    p->arg = arg;
    p->n = n;
    p->grain = grain;
    p->ra_base = er_tl_ra_base;
    p->ra_len = er_tl_ra_len;
    atomic_store_explicit(&p->ra_next, 0u, memory_order_relaxed);
    atomic_store_explicit(&p->next, 0u, memory_order_relaxed);
    atomic_store_explicit(&p->finished, 0u, memory_order_relaxed);
    atomic_store(&p->open, 1);
    atomic_fetch_add(&p->generation, 1u);
    if (atomic_load(&p->sleepers) > 0u) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
    }

    /* Work as worker 0. */
    er_tl_pool = p;
    er_tl_worker = 0u;
    er_pool_work(p, 0u);
    er_tl_pool = NULL;

    /* Wait for every chunk to finish: spin briefly, then sleep. */
    long long deadline = 0;
    for (unsigned spins = 0; atomic_load(&p->finished) != n; spins++) {
        if ((spins & 31u) == 0u) {
            long long now = er_now_ns();
            if (deadline == 0)
                deadline = now + ER_POOL_SPIN_NS;
            else if (now >= deadline)
                break;
        }
        er_cpu_relax();
    }
    if (atomic_load(&p->finished) != n) {
        pthread_mutex_lock(&p->lock);
        atomic_store(&p->caller_waiting, 1);
        while (atomic_load(&p->finished) != n)
            pthread_cond_wait(&p->done, &p->lock);
        atomic_store(&p->caller_waiting, 0);
        pthread_mutex_unlock(&p->lock);
    }

    /* Close the job and let latecomers leave. Anyone still counted in
     * `active` has no chunk left to run, so this wait is short unless the
     * worker was preempted between its two atomic operations. */
    atomic_store(&p->open, 0);
    for (unsigned spins = 0; atomic_load(&p->active) != 0u; spins++) {
        if (spins < 1024u)
            er_cpu_relax();
        else
            sched_yield();
    }
    pthread_mutex_unlock(&p->dispatch);
}
