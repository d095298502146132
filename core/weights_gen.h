/*
 * core/weights_gen.h — a deterministic, seeded generator of test weights.
 * Not installed. Implemented in core/weights.c next to the quantizer it feeds.
 *
 * The same seed gives the same numbers on every run and every build of the
 * same libm (the normal deviates use log/sqrt/cos, whose last bit may differ
 * between C libraries; the integer stream never does). Tests and the bench
 * use it so a failure can be reproduced from the seed alone.
 */
#ifndef EDGERT_CORE_WEIGHTS_GEN_H
#define EDGERT_CORE_WEIGHTS_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/**
 * xoshiro256** state, seeded through splitmix64. Plain data owned by the
 * caller: one per thread, no shared state.
 */
typedef struct er_rng {
    uint64_t s[4];
    double spare;  /**< second Box-Muller deviate, valid when has_spare */
    int has_spare;
} er_rng;

/** Seed the generator; every seed (including 0) gives a valid, distinct stream. */
ER_HIDDEN void er_rng_seed(er_rng *r, uint64_t seed);
/** Next 64 uniformly distributed bits. */
ER_HIDDEN uint64_t er_rng_next(er_rng *r);
/** A standard normal deviate (mean 0, standard deviation 1). */
ER_HIDDEN float er_rng_normal(er_rng *r);
/**
 * Fill w[0..count) with LLM-like weights: normal, mean 0, standard deviation
 * 0.02 (the usual initialisation scale of transformer projections, and the
 * order of magnitude trained 1-2B models keep). Deterministic in `seed`.
 */
ER_HIDDEN void er_fill_weights(float *w, size_t count, uint64_t seed);

#endif /* EDGERT_CORE_WEIGHTS_GEN_H */
