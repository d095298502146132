/*
 * runner/gptq_tile_avx2.c — GPTQ's GEMM tile (gptq.h, gq_tile_fn) for AVX2
 * and FMA: C[4][16] += A(4 x T) B(T x 16), eight accumulators of 8 floats
 * in registers; compiled with -mavx2 -mfma alone, picked at run time from
 * the probe (gq_tile_pick). The same products as the portable tile, summed
 * with fused multiply-adds (one rounding each instead of two).
 */
#include <immintrin.h>

#include "gptq.h"

void gq_tile_avx2(size_t T, const float *A, size_t ar, size_t at, const float *B, size_t ldb,
                  float *C, size_t ldc)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00;
    __m256 c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    for (size_t t = 0; t < T; t++) {
        const float *b = B + t * ldb, *a = A + t * at;
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        __m256 a0 = _mm256_broadcast_ss(a), a1 = _mm256_broadcast_ss(a + ar);
        c00 = _mm256_fmadd_ps(a0, b0, c00);
        c01 = _mm256_fmadd_ps(a0, b1, c01);
        c10 = _mm256_fmadd_ps(a1, b0, c10);
        c11 = _mm256_fmadd_ps(a1, b1, c11);
        __m256 a2 = _mm256_broadcast_ss(a + 2 * ar), a3 = _mm256_broadcast_ss(a + 3 * ar);
        c20 = _mm256_fmadd_ps(a2, b0, c20);
        c21 = _mm256_fmadd_ps(a2, b1, c21);
        c30 = _mm256_fmadd_ps(a3, b0, c30);
        c31 = _mm256_fmadd_ps(a3, b1, c31);
    }
    __m256 acc[4][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
    for (int r = 0; r < 4; r++)
        for (int h = 0; h < 2; h++) {
            float *c = C + r * ldc + 8 * h;
            _mm256_storeu_ps(c, _mm256_add_ps(_mm256_loadu_ps(c), acc[r][h]));
        }
}
