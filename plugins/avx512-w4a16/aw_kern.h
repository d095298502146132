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

/* Software prefetch while streaming codes (decode): a prefetcht1 8 KiB
 * ahead of every 64-byte line (prefetch=far, the default reading one
 * stream on Intel), with prefetch=near a prefetcht0 512 bytes ahead too,
 * with prefetch=far-l1 a prefetcht0 6 KiB ahead instead (the default
 * reading one stream elsewhere), with prefetch=none nothing (the default
 * beside 2 or 4 streams per thread: see aw_decode_defaults).
 * far-l1, on AMD EPYC Zen 5 (family 26, model 2), int16 GEMV, one stream,
 * bench --versus (16 alternating pairs of steps a run; step time over
 * far's, median of the run): with 1 thread (a 40 GB/s read ceiling, what
 * each core must draw in a quiet 2-thread window) T0 +6 KiB 0.968-0.984
 * (4 runs), T0 +8 KiB 0.990-0.997, T0 +12 KiB 1.002-1.022; with 2 threads
 * from DRAM, busy host (33-51 GB/s), T0 +6 KiB 0.952-1.020, median 0.978
 * (8 runs; a test build's earlier 6 runs 0.964-1.029, median 1.005: even
 * at worst); a 27 MB workload resident in L3, 0.922-1.028 (median 0.968 of
 * 4); path=bf16 about even (0.976-0.996 with 1 thread, 0.964-1.010 with
 * 2). Not measured on Intel, which keeps far.
 * Before, the whole spark-1.7b decode step on 2 threads, one stream,
 * variants interleaved:
 *   - Zen 5 (quiet): T1 +8 KiB 48.3 GB/s, T0 +1 KiB 47.4, none 43.4,
 *     T0 +2 KiB 42.6, T1 +4 KiB with T0 +1 KiB only 35.0;
 *   - Xeon with AMX (ceiling 38-39 GB/s), 5 rounds: far 26.36 ms per step
 *     median, near 27.17; an earlier build of these kernels (the far
 *     instructions alone, before one instantiation per mode) ran at
 *     29.6-30.1 ms in the same windows, where near then won, so the
 *     difference is code generation as much as memory: measure both
 *     (`edgert bench --options prefetch=near`) before changing the default.
 * Each decode kernel is instantiated for each mode (PK_BY_PF), so no line
 * tests the option.
 * Prefetching past the end of the allocation is harmless (prefetches never
 * fault). */
#define AW_PF_DIST 8192
#define AW_PF_NEAR 512
#define AW_PF_L1_DIST 6144

AW_INLINE void aw_prefetch(const uint8_t *p, int near)
{
    if (near == PK_PF_NONE)
        return;
    if (near == PK_PF_FAR_L1) {
        _mm_prefetch((const char *)(p + AW_PF_L1_DIST), _MM_HINT_T0);
        return;
    }
    _mm_prefetch((const char *)(p + AW_PF_DIST), _MM_HINT_T1);
    if (near == PK_PF_NEAR_TOO)
        _mm_prefetch((const char *)(p + AW_PF_NEAR), _MM_HINT_T0);
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

/* Per-panel epilogue data of sub-group s of block g for panels p0 ..
 * p0+P-1: scale, s * z and the mask of the columns that exist. */
AW_INLINE void aw_block_meta(const aw_packed *w, size_t p0, unsigned P, uint32_t g, unsigned s,
                             __m512 *sc, __m512 *sz, __mmask16 *mask)
{
    for (unsigned p = 0; p < P; p++) { /* P is known only at run time */
        aw_meta(aw_data(w) + (p0 + p) * w->panel_bytes + (size_t)g * w->block_bytes +
                    AW_CODE_BYTES + (size_t)s * AW_META_BYTES, &sc[p], &sz[p]);
        mask[p] = aw_panel_mask(w, p0 + p);
    }
}

/* Rows [c0, c1) of a prefill chunk's fp32 sums (row r at acc + (r - c0) *
 * row_floats, panel p 16 floats further per p) into y, panels [p0, p0 + P),
 * masked: the int16 and bf16 register tiles' one write of y per chunk. */
AW_INLINE void aw_acc_to_y(const aw_job *j, size_t p0, unsigned P, size_t c0, size_t c1,
                           const __mmask16 *mask, const float *acc, size_t row_floats)
{
    for (size_t r = c0; r < c1; r++) {
        const float *ar = acc + (r - c0) * row_floats;
        for (unsigned p = 0; p < P; p++)
            _mm512_mask_storeu_ps(j->y + r * j->ldy + (p0 + p) * AW_PANEL, mask[p],
                                  _mm512_load_ps(ar + p * AW_PANEL));
    }
}

/* Flush one fp32 tile row into y: y = (first ? 0 : y) + v, masked. */
AW_INLINE void aw_y_add(float *yp, __mmask16 mask, int first, __m512 v)
{
    if (!first)
        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, yp));
    _mm512_mask_storeu_ps(yp, mask, v);
}

/* bf16 bit patterns of 0..15, twice (vpermw index bit 4 is don't-care) */
#define AW_BF16_Q                                                                              \
    0x0000, 0x3F80, 0x4000, 0x4040, 0x4080, 0x40A0, 0x40C0, 0x40E0, 0x4100, 0x4110, 0x4120,    \
        0x4130, 0x4140, 0x4150, 0x4160, 0x4170

AW_INLINE __m512i aw_bf16_qtab(void)
{
    static const uint16_t tab[32] __attribute__((aligned(64))) = {AW_BF16_Q, AW_BF16_Q};
    return _mm512_load_si512((const void *)tab);
}

/*
 * Expand group g of panels p0 .. p0+P-1 into 16-bit pairs (codes 0..15,
 * exact in either form):
 *   wexp[pair][p][32 words], pair = 0..63: words 2j, 2j+1 = codes of inputs
 *   (128 g + 2 pair, 128 g + 2 pair + 1) of column 16 (p0 + p) + j,
 * as bf16 (bf16 != 0: for vdpbf16ps and AMX-BF16) or int16 (vpdpwssd).
 * That is the VNNI pair layout every consumer reads: one zmm operand per
 * (pair, panel), or an AMX B tile per (16 pairs, panel) with a row stride
 * of P * 64 bytes. The code dword shifted by 4s holds pair 4t + s in the
 * low nibble of each word (aw_internal.h: nibbles s and 4 + s are inputs 2s
 * and 2s + 1): int16 masks it, bf16 maps it through the table with vpermw.
 * 4 KiB per panel; the caller's buffer is 64-byte aligned.
 */
AW_INLINE void aw_expand_pairs(const aw_packed *w, size_t p0, unsigned P, uint32_t g,
                               uint16_t *wexp, const int bf16)
{
    const __m512i qtab = aw_bf16_qtab();
    const __m512i low4 = _mm512_set1_epi32(0x000F000F);
    for (unsigned p = 0; p < P; p++) {
        const uint8_t *codes = aw_data(w) + (p0 + p) * w->panel_bytes + (size_t)g * w->block_bytes;
        for (unsigned t = 0; t < AW_OCTETS; t++) {
            __m512i v = _mm512_load_si512((const void *)(codes + 64u * t));
            AW_UNROLL
            for (unsigned s = 0; s < 4u; s++) {
                unsigned pair = 4u * t + s;
                __m512i sh = _mm512_srli_epi32(v, 4u * s);
                _mm512_store_si512((void *)(wexp + ((size_t)pair * P + p) * 32u),
                                   bf16 ? _mm512_permutexvar_epi16(sh, qtab)
                                        : _mm512_and_si512(sh, low4));
            }
        }
    }
}

#endif /* AW_KERN_H */
