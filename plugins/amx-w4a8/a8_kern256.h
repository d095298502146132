/*
 * plugins/amx-w4a8/a8_kern256.h — what the two 256-bit paths share (avx2,
 * a8_kern_avx2.c; avxvnni, a8_kern_avxvnni.c): the activation broadcast, a
 * half panel's scales and zero-point correction, the per-group epilogue and
 * the store. Included only by files compiled with at least -mavx2 -mfma
 * -mf16c; nothing here needs more.
 *
 * A 64-byte line of codes (16 columns x 8 inputs, a8_internal.h) is two
 * 32-byte halves on ymm: columns 0-7 and 8-15, each dword lane one column's
 * 8 nibbles (low nibbles inputs 8t + 0..3, high ones 8t + 4..7).
 */
#ifndef A8_KERN256_H
#define A8_KERN256_H

#include <immintrin.h>
#include <string.h>

#include "a8_internal.h"
#include "a8_prefetch.h"

#define A8_256_INLINE static inline __attribute__((always_inline))
#define A8_256_UNROLL _Pragma("GCC unroll 32")

/* 4 activation bytes in every dword lane. */
A8_256_INLINE __m256i a8_bcast4_256(const int8_t *p)
{
    int32_t d;
    memcpy(&d, p, sizeof d);
    return _mm256_set1_epi32(d);
}

/* The 8 fp32 scales of half h of panel p, group g. */
A8_256_INLINE __m256 a8_half_scales(const a8_packed *w, size_t p, uint32_t g, unsigned h)
{
    const uint8_t *s = w->data + p * w->panel_bytes + a8_scales_at(w->asym, w->groups, g) + 16u * h;
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)s));
}

/* One group's epilogue for token row rg's half h of panel p: d = sum -
 * z sum a, y = fma(d, s_w s_g, y), path vnni's operations in its order (d
 * as a8_kern.h's a8_d forms it: exact in fp32, no vpmulld). */
A8_256_INLINE __m256 a8_half_group(const a8_job *j, size_t p, uint32_t g, unsigned h, size_t rg,
                                   __m256i sum, __m256 sw, __m256 y)
{
    const a8_packed *w = j->w;
    const int32_t asum8 = j->asum8[rg];
    __m256 d;
    if (!w->asym) {
        d = _mm256_cvtepi32_ps(_mm256_sub_epi32(sum, _mm256_set1_epi32(asum8)));
    } else {
        const uint8_t *z = w->data + p * w->panel_bytes + a8_zeros_off(w, g) + 8u * h;
        const __m256 zf = _mm256_cvtepi32_ps(
            _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)z)));
        d = _mm256_fnmadd_ps(zf, _mm256_set1_ps((float)(asum8 >> 3)), _mm256_cvtepi32_ps(sum));
    }
    return _mm256_fmadd_ps(d, _mm256_mul_ps(sw, _mm256_set1_ps(j->sg[rg])), y);
}

/* Token row r's outputs of panel p, y times s_x, for the columns that exist
 * (the panel's other lanes are padding, never stored). */
A8_256_INLINE void a8_store_row(const a8_job *j, size_t p, size_t r, const __m256 yacc[2])
{
    const size_t c0 = p * A8_PANEL, left = (size_t)j->w->n - c0;
    float *yp = j->y + r * j->ldy + c0;
    const __m256 sx = _mm256_set1_ps(j->sx[r]);
    A8_256_UNROLL
    for (unsigned h = 0; h < 2u; h++) {
        const __m256 v = _mm256_mul_ps(yacc[h], sx);
        const size_t have = left > 8u * h ? left - 8u * h : 0u;
        if (have >= 8u) {
            _mm256_storeu_ps(yp + 8u * h, v);
        } else if (have > 0u) {
            const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)have), lane);
            _mm256_maskstore_ps(yp + 8u * h, mask, v);
        }
    }
}

/* A 256-bit path's entry points around its kernel ROWS(j, p, r0, R, near)
 * (tokens r0 .. r0 + R - 1 of panel p, R = RB or 1):
 *   panels   [begin, end) for every token of the call, RB tokens a pass;
 *   DECODE   (m <= decode_max_m) a range of panels with the instance's
 *            prefetch for one stream (PK_BY_PF: one instantiation per
 *            mode), one panel at a time whatever `streams` says;
 *   PREFILL  (m > decode_max_m, decode_max_m=N given) items of
 *            A8_PREFILL_PB panels, the same GEMV, no prefetch (the codes are
 *            read once per token pass and stay in cache). */
#define A8_256_ENTRIES(ROWS, RB, DECODE, PREFILL)                                                  \
    A8_256_INLINE void panels(const a8_job *j, size_t begin, size_t end, const int near)           \
    {                                                                                              \
        for (size_t p = begin; p < end; p++) {                                                     \
            size_t r0 = 0;                                                                         \
            for (; r0 + (RB) <= j->m; r0 += (RB))                                                  \
                ROWS(j, p, r0, (RB), near);                                                        \
            if (r0 < j->m)                                                                         \
                ROWS(j, p, r0, 1, near);                                                           \
        }                                                                                          \
    }                                                                                              \
    void DECODE(void *arg, size_t begin, size_t end, unsigned worker)                              \
    {                                                                                              \
        const a8_job *j = arg;                                                                     \
        (void)worker;                                                                              \
        PK_BY_PF(j->pf_near, panels, j, begin, end);                                               \
    }                                                                                              \
    void PREFILL(void *arg, size_t begin, size_t end, unsigned worker)                             \
    {                                                                                              \
        const a8_job *j = arg;                                                                     \
        (void)worker;                                                                              \
        size_t last = end * A8_PREFILL_PB;                                                         \
        panels(j, begin *A8_PREFILL_PB, last < j->w->panels ? last : j->w->panels, PK_PF_NONE);    \
    }

#endif /* A8_KERN256_H */
