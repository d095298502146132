/*
 * plugins/avx512-w4a16/aw_kern.h — helpers shared by the kernel files.
 * Included ONLY by aw_kern_*.c, which are compiled with AVX-512 flags; the
 * dispatch file never sees these intrinsics.
 */
#ifndef AW_KERN_H
#define AW_KERN_H

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "aw_internal.h"

#define AW_INLINE static inline __attribute__((always_inline))

/* Fully unroll the small register-tile loops (rows, panels, chains) so the
 * accumulator arrays become registers at any -O level. */
#define AW_UNROLL _Pragma("GCC unroll 32")

/* Software prefetch while streaming codes (decode): one prefetcht1 8 KiB
 * ahead of every 64-byte line. Measured on this Zen 5 (2 threads, the whole
 * spark-1.7b decode step, variants interleaved in one process on a quiet
 * machine): T1 +8 KiB 48.3 GB/s, T0 +1 KiB 47.4, none 43.4, T0 +2 KiB 42.6,
 * and the issue prototype's T1 +4 KiB with T0 +1 KiB only 35.0 (two
 * prefetches per line cost more than they bring here). Prefetching past the
 * end of the allocation is harmless (prefetches never fault). */
#define AW_PF_DIST 8192

AW_INLINE void aw_prefetch(const uint8_t *p)
{
    _mm_prefetch((const char *)(p + AW_PF_DIST), _MM_HINT_T1);
}

/* Columns of panel p that exist (1..16) as a lane mask. */
AW_INLINE __mmask16 aw_panel_mask(const aw_packed *w, size_t p)
{
    size_t left = (size_t)w->n - p * AW_PANEL;
    return left >= AW_PANEL ? (__mmask16)0xFFFFu : (__mmask16)((1u << left) - 1u);
}

/* Scale and s * z of one block's meta dwords (see aw_internal.h). */
AW_INLINE void aw_meta(const uint8_t *meta, __m512 *s, __m512 *sz)
{
    __m512i mv = _mm512_load_si512((const void *)meta);
    __m512 sc = _mm512_castsi512_ps(_mm512_andnot_si512(_mm512_set1_epi32(15), mv));
    __m512 z = _mm512_cvtepi32_ps(_mm512_and_si512(mv, _mm512_set1_epi32(15)));
    *s = sc;
    *sz = _mm512_mul_ps(sc, z); /* exact: 20-bit scale times a 4-bit integer */
}

static inline float aw_hsum16(const float *v)
{
    return _mm512_reduce_add_ps(_mm512_loadu_ps(v));
}

/* Flush one fp32 tile row into y: y = (first ? 0 : y) + v, masked. */
AW_INLINE void aw_y_add(float *yp, __mmask16 mask, int first, __m512 v)
{
    if (!first)
        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, yp));
    _mm512_mask_storeu_ps(yp, mask, v);
}

#endif /* AW_KERN_H */
