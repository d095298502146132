/*
 * plugins/amx-w4a8/a8_kern.h — helpers shared by the kernel files. Included
 * ONLY by a8_kern_*.c, which are compiled with AVX-512 flags; the dispatch
 * file never sees these intrinsics.
 */
#ifndef A8_KERN_H
#define A8_KERN_H

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "a8_internal.h"
#include "a8_prefetch.h"

#define A8_INLINE static inline __attribute__((always_inline))
#define A8_UNROLL _Pragma("GCC unroll 32")

/* acc += u8 a . s8 b (4 byte pairs per dword lane), in place. Inline asm:
 * with _mm512_dpbusd_epi32 GCC 12 at -O3 copies every integer accumulator
 * through another register and the stack each step (measured 3x slower on
 * avx512-w4a16's int16 path). */
#define A8_DPBUSD(acc, a, b) __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b))

A8_INLINE __m512i a8_bcast4(const int8_t *p)
{
    int32_t d;
    memcpy(&d, p, sizeof d);
    return _mm512_set1_epi32(d);
}

A8_INLINE const uint8_t *a8_codes(const a8_packed *w, size_t p, uint32_t g)
{
    return w->data + p * w->panel_bytes + a8_codes_at(w->asym, g);
}

/* The 16 fp32 scales of panel p, group g. */
A8_INLINE __m512 a8_scales(const a8_packed *w, size_t p, uint32_t g)
{
    const uint8_t *s = w->data + p * w->panel_bytes + a8_scales_at(w->asym, w->groups, g);
    return _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(const void *)s));
}

/* The 16 zero points of panel p, group g, one per dword lane (asym only). */
A8_INLINE __m512i a8_zeros(const a8_packed *w, size_t p, uint32_t g)
{
    const uint8_t *z = w->data + p * w->panel_bytes + a8_zeros_off(w, g);
    return _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(const void *)z));
}

/* The zero points as fp32 lanes (asym only; 0 otherwise, unused). */
A8_INLINE __m512 a8_zeros_f(const a8_packed *w, size_t p, uint32_t g)
{
    return w->asym ? _mm512_cvtepi32_ps(a8_zeros(w, p, g)) : _mm512_setzero_ps();
}

/* A group's d = sum a q - z sum a per lane, as fp32, from the int32 sum a q
 * and asum8 = 8 sum a (exact, so its eighth is sum a). Symmetric (z = 8 in
 * every column): sum - asum8 in int32, converted. Asymmetric: fma(-z, sum a,
 * sum) in fp32, which is exact: |sum a q| and |z sum a| are at most
 * 128 x 127 x 15 < 2^18, and so is |d| = |sum a (q - z)|, so each is an
 * integer fp32 holds and the fma's one rounding changes nothing. The same
 * value as the int32 form, where vpmulld is 2 uops of latency 10 on Intel:
 * a cvt and an fma instead of vpmulld, vpsubd and a cvt. */
A8_INLINE __m512 a8_d(const int asym, __m512i sum, __m512 zf, int32_t asum8)
{
    if (!asym)
        return _mm512_cvtepi32_ps(_mm512_sub_epi32(sum, _mm512_set1_epi32(asum8)));
    return _mm512_fnmadd_ps(zf, _mm512_set1_ps((float)(asum8 >> 3)), _mm512_cvtepi32_ps(sum));
}

/* Columns of panel p that exist (1..16) as a lane mask. */
A8_INLINE __mmask16 a8_panel_mask(const a8_packed *w, size_t p)
{
    size_t left = (size_t)w->n - p * A8_PANEL;
    return left >= A8_PANEL ? (__mmask16)0xFFFFu : (__mmask16)((1u << left) - 1u);
}

/* y = (first ? 0 : y) + v, masked. */
A8_INLINE void a8_y_add(float *yp, __mmask16 mask, int first, __m512 v)
{
    if (!first)
        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, yp));
    _mm512_mask_storeu_ps(yp, mask, v);
}

/*
 * Expand group g of panels p0 .. p0+P-1 into code bytes, one 4-input step
 * per 64 bytes:
 *   wexp[s][p][64]: dword lane j = codes of inputs 128 g + 4 s + 0..3 of
 *   column 16 (p0 + p) + j, s = 0..31,
 * i.e. the vpdpbusd operand of step s, and for p fixed the rows of an AMX
 * B tile (16 steps = 64 inputs, row stride P * 64 bytes). Step 2t is octet
 * t's low nibbles, step 2t + 1 its high ones (a8_internal.h). 2 KiB per
 * panel; the caller's buffer is 64-byte aligned. Codes are stored as they
 * are (0..15, unsigned: bias 0) or minus the zero point (-8..7, signed
 * bytes: bias 8), which folds the zero point into the integer product; an
 * asymmetric tensor's bias is each column's own zero point, -15..15.
 */
A8_INLINE void a8_expand_bias(const a8_packed *w, size_t p0, unsigned P, uint32_t g,
                              uint8_t *wexp, const int bias)
{
    const __m512i nib = _mm512_set1_epi8(0x0F);
    for (unsigned p = 0; p < P; p++) {
        const uint8_t *codes = a8_codes(w, p0 + p, g);
        /* the zero point in every byte of its column's dword lane */
        const __m512i b = bias != 0 && w->asym
                              ? _mm512_mullo_epi32(a8_zeros(w, p0 + p, g),
                                                   _mm512_set1_epi32(0x01010101))
                              : _mm512_set1_epi8((char)bias);
        for (unsigned t = 0; t < A8_OCTETS; t++) {
            __m512i v = _mm512_load_si512((const void *)(codes + 64u * t));
            __m512i lo = _mm512_and_si512(v, nib);
            __m512i hi = _mm512_and_si512(_mm512_srli_epi32(v, 4), nib);
            if (bias != 0) {
                lo = _mm512_sub_epi8(lo, b);
                hi = _mm512_sub_epi8(hi, b);
            }
            _mm512_store_si512((void *)(wexp + ((size_t)(2u * t) * P + p) * 64u), lo);
            _mm512_store_si512((void *)(wexp + ((size_t)(2u * t + 1u) * P + p) * 64u), hi);
        }
    }
}

A8_INLINE void a8_expand(const a8_packed *w, size_t p0, unsigned P, uint32_t g, uint8_t *wexp)
{
    a8_expand_bias(w, p0, P, g, wexp, 0);
}

#endif /* A8_KERN_H */
