/*
 * tools/metrics.h — fidelity metrics, in double precision.
 */
#ifndef EDGERT_TOOLS_METRICS_H
#define EDGERT_TOOLS_METRICS_H

#include <stddef.h>

/** Signal-to-quantization-noise ratio in dB: 10 log10(Σ ref² / Σ (test - ref)²).
 *  +inf when test == ref exactly; NaN when ref is all zero. */
double metric_sqnr_db(const float *ref, const float *test, size_t n);
/** KL(softmax(p_logits) || softmax(q_logits)) in nats, computed stably
 *  (log-sum-exp); >= 0. */
double metric_kl(const float *p_logits, const float *q_logits, size_t n);
/** Index of the largest value (the first one on ties). */
size_t metric_argmax(const float *v, size_t n);

#endif
