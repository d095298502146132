/*
 * tools/generate.h — deterministic, seeded workloads for bench, verify,
 * export and the tests. Not part of the integrator API (edgert.h): these
 * serve edgert's own measurements. Built as the static library edgert_gen
 * on the public API only (edgert_parallel_for, edgert_quantize_rtn).
 *
 * One random number generator serves the whole tree: splitmix64 (seeding,
 * and gen_mix64 for deriving seeds) feeding xoshiro256**. The same seed
 * gives the same numbers on every run, thread count and build of the same
 * libm (the normal deviates use log/sqrt/cos, whose last bit may differ
 * between C libraries; the integer stream never does), so a failure can be
 * reproduced from its seed alone.
 */
#ifndef EDGERT_TOOLS_GENERATE_H
#define EDGERT_TOOLS_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "edgert/edgert.h"

/** xoshiro256** state plus a spare Box-Muller deviate. Plain data owned by
 *  the caller: one per thread, no shared state. */
typedef struct gen_rng {
    uint64_t s[4];
    double spare;  /**< second Box-Muller deviate, valid when has_spare */
    int has_spare;
} gen_rng;

/** One splitmix64 step: advances *state, returns the next output. */
uint64_t gen_splitmix64(uint64_t *state);
/** splitmix64's output for the state x (a bijective 64-bit mix): derives
 *  independent seeds from (seed, index) pairs. */
uint64_t gen_mix64(uint64_t x);

/** Seed the generator; every seed (including 0) gives a valid, distinct stream. */
void gen_rng_seed(gen_rng *r, uint64_t seed);
/** Next 64 uniformly distributed bits. */
uint64_t gen_rng_next(gen_rng *r);
/** A standard normal deviate (mean 0, standard deviation 1). */
float gen_rng_normal(gen_rng *r);

/**
 * Fill w[0..count) with LLM-like weights: normal, mean 0, standard deviation
 * 0.02 (the usual initialisation scale of transformer projections, and the
 * order of magnitude trained 1-2B models keep). Deterministic in `seed`.
 */
void gen_fill_weights(float *w, size_t count, uint64_t seed);

/**
 * Dense LLM-like weights W[n][k]: approximately normal (sum of four uniforms),
 * mean 0, standard deviation `std`. Row r depends only on (seed, r), so the
 * result is the same for any thread count. `ctx` may be NULL (serial).
 */
void gen_dense(edgert_ctx *ctx, float *w, uint32_t n, uint32_t k, uint64_t seed, float std);

/**
 * The same dense weights, quantized to canonical int4 (edgert_quantize_rtn)
 * without ever holding the n x k fp32 matrix: the transient is one block of
 * GEN_QBLOCK_ROWS rows per thread. For the bench's 1.7-billion-weight model.
 * The result is freed with edgert_qtensor_free.
 */
edgert_status gen_qtensor(edgert_ctx *ctx, uint32_t n, uint32_t k, uint32_t group, int symmetric,
                          uint64_t seed, float std, edgert_qtensor *out);

/**
 * LLM-like activations x[m][k]: heavy-tailed (a normal times a log-normal
 * scale, kurtosis well above 3) with RMS about 1, and a few outlier channels
 * (max(2, k/256) columns chosen by the seed, the same for every row) scaled
 * by 30, as real transformer activations have.
 */
void gen_activations(float *x, uint32_t m, uint32_t k, uint64_t seed);

#endif /* EDGERT_TOOLS_GENERATE_H */
