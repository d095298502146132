/*
 * tools/bench_internal.h — what tools/bench.c and tools/bench_decode.c
 * share: one backend's run (its instance and packed weights) and the decode
 * phase that times it. Private to `edgert bench`.
 */
#ifndef EDGERT_TOOLS_BENCH_INTERNAL_H
#define EDGERT_TOOLS_BENCH_INTERNAL_H

#include "bench.h"

/* One bench run: the backend instance, its packed weights (packed[s][l]: layer
 * l of shape s) and the result being filled. */
typedef struct bench_run {
    edgert_ctx *ctx;
    const cli *c;
    const workload *w;
    const edgert_candidate *cand;
    edgert_backend *be;
    edgert_packed **packed[WL_MAX_SHAPES];
    bench_result *r;
    unsigned salt; /* generated weights: 0, or another seed (--versus: no two runs alike) */
    unsigned group; /* generated weights' group: 0, --group's or the layout's */
} bench_run;

/** Progress on stderr, when it is a terminal (bench.c). */
void bench_progress(const char *what, size_t done, size_t total);

/** The decode phase of one run, M = 1 (bench_decode.c): the read ceiling
 *  before the steps, the timed steps, the step read, the ceiling after and
 *  the in-cache rate (all but the steps not with BENCH_STEPS_ONLY). With `vs`, a second run over
 *  the same workload, its steps alternate with b's, pair by pair, and
 *  b->r->vs gets its figures. x holds activations for the widest k, y
 *  outputs for the widest n. */
edgert_status bench_decode(bench_run *b, bench_run *vs, unsigned flags, const float *x, float *y,
                           char *err, size_t err_len);

#endif
