/*
 * core/common/workload.h — the reference workload, spark-1.7b
 * (docs/architecture.md, Reference workload), defined once: first contact
 * converts its quick measurement to this model's decode tokens/s, and the
 * CLI's bench, verify and calibrate run its shapes. Not installed.
 */
#ifndef EDGERT_CORE_WORKLOAD_H
#define EDGERT_CORE_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#define ER_REFERENCE_WORKLOAD "spark-1.7b"

/** One weight shape of a decode step: W[n][k], `count` times per step. */
typedef struct er_ref_shape {
    const char *name;
    uint32_t k, n, count;
    int head; /**< the output head: once per step in decode, M = 1 in prefill */
} er_ref_shape;

/** The shapes of one decode step of spark-1.7b, in model order; *count set. */
const er_ref_shape *er_reference_shapes(size_t *count);
/** Weights one decode step reads: the sum of n * k * count (1,707,081,728). */
uint64_t er_reference_weights(void);

#endif /* EDGERT_CORE_WORKLOAD_H */
