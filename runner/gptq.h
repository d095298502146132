/*
 * runner/gptq.h — GPTQ's arithmetic (gptq_math.c) and the calibrated
 * quantizer built on the runner's forward pass (gptq.c).
 *
 * GPTQ (Frantar et al., 2022) quantizes a linear layer W[n][k] column by
 * column and spreads each column's rounding error over the columns not yet
 * quantized, weighted by the inverse of H = 2 X^T X, the second moments of
 * the layer's real inputs X: it minimizes |X W^T - X Q^T| instead of
 * |W - Q|. Each row of W is independent of the others given H, so rows are
 * shared among threads and the result does not depend on how many.
 */
#ifndef EDGERT_RUNNER_GPTQ_H
#define EDGERT_RUNNER_GPTQ_H

#include <stddef.h>
#include <stdint.h>

#include "edgert/edgert.h"

/** The register tile: C[r * ldc + c] += sum over t < T of
 *  A[r * ar + t * at] * B[t * ldb + c], r < 4, c < 16. */
typedef void (*gq_tile_fn)(size_t T, const float *A, size_t ar, size_t at, const float *B,
                           size_t ldb, float *C, size_t ldc);
void gq_tile_portable(size_t T, const float *A, size_t ar, size_t at, const float *B,
                      size_t ldb, float *C, size_t ldc);
#if defined(__x86_64__)
void gq_tile_avx2(size_t T, const float *A, size_t ar, size_t at, const float *B, size_t ldb,
                  float *C, size_t ldc); /* gptq_tile_avx2.c: AVX2 and FMA */
#endif
/** The tile this handle's CPU runs best (its probed flags). */
gq_tile_fn gq_tile_pick(edgert_ctx *ctx);

/** C[r * ldc + c] += sum over t < T of A[r * ar + t * at] * B[t * ldb + c],
 *  for r < R, c < Cn: one thread's GEMM, tiles of `tile` blocked for the
 *  cache. */
void gq_gemm(gq_tile_fn tile, size_t R, size_t Cn, size_t T, const float *A, size_t ar,
             size_t at, const float *B, size_t ldb, float *C, size_t ldc);

/** H[k][k] += X^T X over the rows of X[rows][ldx] (its first k columns),
 *  on the handle's pool; only the upper triangle (j >= i) is written. */
void gq_hessian_add(edgert_ctx *ctx, float *H, uint32_t k, const float *X, size_t rows,
                    size_t ldx);

/** Y[rows][ldy] = X[rows][ldx] W^T for W[n][k] fp32 row-major, on the
 *  pool (the calibration's forward GEMMs). */
void gq_linear(edgert_ctx *ctx, const float *W, uint32_t n, uint32_t k, const float *X,
               uint32_t rows, size_t ldx, float *Y, size_t ldy);

/** What gq_prepare did. */
typedef struct gq_prep {
    double damp;       /* added to every diagonal element */
    uint32_t dead;     /* input channels no calibration row reached */
    unsigned retries;  /* times the dampening was multiplied by 10 */
} gq_prep;

/**
 * From the upper triangle of H (the sum of x x^T over `rows` rows): H / rows,
 * dampened (percdamp x the mean diagonal added to the diagonal; a channel
 * whose diagonal is 0 gets that alone, so it is decoupled from the others
 * and keeps its round-to-nearest code), then U, upper triangular with
 * H^-1 = U^T U, written over H (row-major, the lower triangle zero).
 * A factorization that fails (a pivot not positive: H singular in fp32
 * after dampening) is retried with 10x the dampening, three times; then -1
 * (-2: out of memory).
 * `scratch` holds k x k floats.
 */
int gq_prepare(edgert_ctx *ctx, float *H, uint32_t k, size_t rows, double percdamp,
               float *scratch, gq_prep *out);

/**
 * Quantize W[n][k] (row-major, overwritten: its rows are updated as GPTQ
 * goes) with U from gq_prepare into `q` (edgert_quantize_rtn's layout and
 * shape: q->view's n, k, group; zeros NULL for symmetric), the rounding
 * rules of edgert quantize (symmetric: z = 8, s = max|w| / 7; asymmetric:
 * the range widened to include 0, z >= 1 as GPTQ's v1 stores it). U NULL:
 * round to nearest by the same rules (what GPTQ is measured against).
 * Group parameters are set from the row's values as updated when the
 * group's first column is reached, as GPTQ does.
 */
void gq_quantize(edgert_ctx *ctx, float *W, const float *U, edgert_qtensor *q);

/** sum over rows r of d_r^T S d_r, d_r = A_r - B_r (B NULL: A_r itself),
 *  S[k][k] whole (both triangles): the squared error (or energy) of the
 *  outputs X W^T over the inputs whose S = X^T X. NaN: out of memory. */
double gq_quad(edgert_ctx *ctx, const float *A, const float *B, uint32_t n, uint32_t k,
               const float *S);

#endif
