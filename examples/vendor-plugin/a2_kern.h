/*
 * examples/vendor-plugin/a2_kern.h — helpers shared by the kernel files.
 * Included ONLY by a2_kern_*.c, which are compiled with -mavx2 -mfma (and
 * -mavxvnni); the baseline files never see these intrinsics.
 */
#ifndef A2_KERN_H
#define A2_KERN_H

#include <immintrin.h>
#include <string.h>

#include "a2_internal.h"

#define A2_INLINE static inline __attribute__((always_inline))

/* Fully unroll the small register-tile loops (rows, panels, octets) so the
 * accumulator arrays become registers at any -O level. */
#define A2_UNROLL _Pragma("GCC unroll 32")

/* Software prefetch while streaming codes (decode): one prefetch per 64-byte
 * line, A2_PF_DIST bytes ahead (measured without it: a2_kern_avx2.c).
 * Prefetching past the end of the allocation is harmless: prefetches never
 * fault. */
#define A2_PF_DIST 8192

A2_INLINE void a2_prefetch(const uint8_t *p)
{
    _mm_prefetch((const char *)(p + A2_PF_DIST), _MM_HINT_T1);
}

/* Keep a value in a register, as computed: an empty asm GCC cannot see
 * through. Stops it from reassociating integer sums into trees of live
 * temporaries and from loading a vector twice to fold the load into two
 * instructions (loads are the decode kernels' bottleneck). */
#define A2_KEEP(v) __asm__("" : "+x"(v))

/* Broadcast 4 activation bytes (or 2 int16) to every dword lane. */
A2_INLINE __m256i a2_bcast(const int8_t *p)
{
    int32_t d;
    memcpy(&d, p, sizeof d);
    return _mm256_set1_epi32(d);
}

/* Halves of panel p that hold a column (1 or 2). */
A2_INLINE unsigned a2_halves(const a2_packed *w, size_t p)
{
    return (size_t)w->n - p * A2_PANEL > A2_HALF ? 2u : 1u;
}

/* Where one half's 8 outputs go: the lanes of the columns that exist (for
 * maskload/maskstore), and whether that is all 8. */
typedef struct a2_cols {
    __m256i mask;
    int full;
} a2_cols;

A2_INLINE a2_cols a2_half_cols(const a2_packed *w, size_t p, unsigned h)
{
    size_t c0 = p * A2_PANEL + (size_t)h * A2_HALF, left = (size_t)w->n - c0;
    int l = left >= A2_HALF ? (int)A2_HALF : (int)left;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    a2_cols c = {_mm256_cmpgt_epi32(_mm256_set1_epi32(l), lane), l == (int)A2_HALF};
    return c;
}

/* Scale and s * z of one half's 8 meta dwords (see a2_internal.h). */
A2_INLINE void a2_meta(const uint8_t *meta, __m256 *s, __m256 *sz)
{
    __m256i mv = _mm256_load_si256((const __m256i *)(const void *)meta);
    __m256i z4 = _mm256_set1_epi32(15);
    __m256 sc = _mm256_castsi256_ps(_mm256_andnot_si256(z4, mv));
    *s = sc;
    *sz = _mm256_mul_ps(sc, _mm256_cvtepi32_ps(_mm256_and_si256(mv, z4))); /* exact */
}

/* The block of panel p, block g (inputs 128 g ..). */
A2_INLINE const uint8_t *a2_block(const a2_packed *w, size_t p, uint32_t g)
{
    return w->blocks + p * w->panel_bytes + (size_t)g * w->block_bytes;
}

/* Sub-group s's meta of half h in a block (a2_internal.h). */
A2_INLINE const uint8_t *a2_block_meta(const uint8_t *blk, unsigned s, unsigned h)
{
    return blk + A2_CODE_BYTES + A2_META_BYTES * s + 32u * h;
}

/* Store one half's 8 outputs of one row; the columns past n untouched. */
A2_INLINE void a2_store_y(float *yp, a2_cols c, __m256 v)
{
    if (c.full)
        _mm256_storeu_ps(yp, v);
    else
        _mm256_maskstore_ps(yp, c.mask, v);
}

/* y = (first ? 0 : y) + v over one half's columns. */
A2_INLINE void a2_add_y(float *yp, a2_cols c, int first, __m256 v)
{
    if (!first)
        v = _mm256_add_ps(v, c.full ? _mm256_loadu_ps(yp) : _mm256_maskload_ps(yp, c.mask));
    a2_store_y(yp, c, v);
}

/*
 * Expand block g of halves 0 .. H-1 of panel p into int16 pairs (codes
 * 0..15):
 *   wexp[pair][h][16 words], pair = 0..63: words 2j, 2j+1 = codes of inputs
 *   (128 g + 2 pair, 128 g + 2 pair + 1) of column 16 p + 8 h + j,
 * the pair layout vpmaddwd / vpdpwssd read: one ymm per (pair, half). The
 * code dword shifted by 4s holds pair 4t + s in the low nibble of each word
 * (a2_internal.h: nibbles s and 4 + s are inputs 2s and 2s + 1). 2 KiB per
 * half; the caller's buffer is 32-byte aligned.
 */
A2_INLINE void a2_expand_pairs(const a2_packed *w, size_t p, unsigned H, uint32_t g,
                               int16_t *wexp)
{
    const __m256i low4 = _mm256_set1_epi32(0x000F000F);
    const uint8_t *codes = a2_block(w, p, g);
    for (unsigned t = 0; t < A2_OCTETS; t++) {
        for (unsigned h = 0; h < H; h++) {
            const uint8_t *c = codes + A2_OCTET_BYTES * t + 32u * h;
            __m256i v = _mm256_load_si256((const __m256i *)(const void *)c);
            A2_UNROLL
            for (unsigned s = 0; s < 4u; s++) {
                unsigned pair = 4u * t + s;
                _mm256_store_si256((__m256i *)(void *)(wexp + ((size_t)pair * H + h) * 16u),
                                   _mm256_and_si256(_mm256_srli_epi32(v, (int)(4u * s)), low4));
            }
        }
    }
}

#endif /* A2_KERN_H */
