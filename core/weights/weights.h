/*
 * core/weights/weights.h — canonical int4 tensors and the round-to-nearest quantizer
 * (weights.c).
 * Not installed.
 */
#ifndef EDGERT_CORE_WEIGHTS_H
#define EDGERT_CORE_WEIGHTS_H

#include <stdint.h>
#include "edgert/edgert.h"

/* ---- canonical weights (weights.c) ------------------------------------------ */
/** Allocate an owning canonical tensor (codes zeroed); EDGERT_E_NOMEM/USAGE. */
edgert_status er_qtensor_alloc(uint32_t n, uint32_t k, uint32_t group, int symmetric,
                               edgert_qtensor *out);
/** Quantize row r of `view` from src[0..k) by round to nearest; asymmetric
 *  zero points are at least zmin (1: GPTQ v1 cannot store 0). -1 on a
 *  non-finite input. */
int er_quantize_row(const float *src, uint32_t k, uint32_t group, int symmetric, unsigned zmin,
                    const edgert_qweights *view, uint32_t r);

#endif /* EDGERT_CORE_WEIGHTS_H */
