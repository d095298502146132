/*
 * core/run/pool.h — the thread pool every GEMM and pack runs on (threadpool.c).
 * Not installed.
 */
#ifndef EDGERT_CORE_POOL_H
#define EDGERT_CORE_POOL_H

#include <stddef.h>
#include "edgert/plugin.h"

/* ---- thread pool (threadpool.c) ---------------------------------------- */

typedef struct er_pool er_pool;
/** threads >= 1; threads - 1 workers are started lazily on first use. */
er_pool *er_pool_create(unsigned threads);
void er_pool_destroy(er_pool *p);
unsigned er_pool_threads(const er_pool *p);
/** Run fn over [0,n) in chunks of >= grain; the caller participates. Nested
 *  calls (from inside fn) and concurrent calls from other threads run serially
 *  on the calling thread. */
void er_pool_run(er_pool *p, size_t n, size_t grain, edgert_range_fn fn, void *arg);
/* The region the runs this thread dispatches from now on read ahead while
 * their last chunks finish (the next GEMM's packed bytes; at most 256 KiB
 * of its head); NULL: none. Thread-local (edgert_step). */
void er_pool_readahead(const void *base, size_t len);

#endif /* EDGERT_CORE_POOL_H */
