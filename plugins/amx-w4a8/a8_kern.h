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

#define A8_INLINE static inline __attribute__((always_inline))
#define A8_UNROLL _Pragma("GCC unroll 32")

/* Software prefetch while streaming codes (decode), one of four per
 * instance (prefetch=far|near|none|far-l1; none issues nothing), each
 * decode kernel instantiated for each (PK_BY_PF):
 *   far     a prefetcht1 8 KiB ahead of every 64-byte line, the distance
 *           and hint measured best among T1 distances and short T0 ones
 *           for avx512-w4a16's stream on Zen 5 (aw_kern.h);
 *   near    a prefetcht1 4 KiB ahead and a prefetcht0 512 bytes ahead;
 *   far-l1  a prefetcht0 6 KiB ahead: the prefetching mode off Intel
 *           (a8_decode_defaults). On AMD EPYC Zen 5 (family 26, model 2),
 *           m = 1, bench --versus against far (16 pairs of steps a run,
 *           median step-time ratio of the run): with 1 thread (a 40 GB/s
 *           ceiling, what each core draws in a quiet 2-thread window) T1
 *           at 4/5/6/7/12 KiB 1.020/1.001/0.981/0.982/1.065, T0 at 4/6/8/12
 *           KiB 0.993/0.938/0.939/0.970, NTA at 6 KiB 0.940 (4 runs each;
 *           T0 +6 KiB again 0.893-0.990 in 3); with 2 threads from DRAM on
 *           a busy host (34-47 GB/s) T0 +6 KiB 0.905-0.983, median 0.965 (6
 *           runs) and 0.920-1.001, median 0.970 (8); a 27 MB workload
 *           resident in L3 0.874-0.996 (median 0.930 of 4). T0 +8 KiB was as
 *           good with 1 thread but about even (0.995) with 2. This kernel
 *           does less work per line than avx512-w4a16's and gains more.
 * On a Xeon with AMX (ceiling 36-39 GB/s, the whole decode step, variants
 * interleaved, 3 rounds each): far 30.95 ms median (0.76 of the ceiling);
 * T1 8 KiB + T0 512 B 28.67; then, in one series, T1 8 KiB + T0 256 B /
 * 1 KiB / T1 16 KiB + T0 512 B within 2% of 28.0, and T1 4 KiB + T0 512 B
 * 26.96 (0.84-0.86; T1 2 or 3 KiB the same within noise). On Zen 5 two
 * prefetches per line cost avx512-w4a16's kernel 27% (aw_kern.h), so near
 * is the default on Intel only (a8_init). */
#define A8_PF_DIST 8192
#define A8_PF_NEAR_DIST 4096
#define A8_PF_NEAR 512
#define A8_PF_L1_DIST 6144

A8_INLINE void a8_prefetch(const uint8_t *p, int near)
{
    if (near == PK_PF_NONE)
        return;
    if (near == PK_PF_FAR_L1) {
        _mm_prefetch((const char *)(p + A8_PF_L1_DIST), _MM_HINT_T0);
    } else if (near == PK_PF_NEAR_TOO) {
        _mm_prefetch((const char *)(p + A8_PF_NEAR_DIST), _MM_HINT_T1);
        _mm_prefetch((const char *)(p + A8_PF_NEAR), _MM_HINT_T0);
    } else {
        _mm_prefetch((const char *)(p + A8_PF_DIST), _MM_HINT_T1);
    }
}

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
    return w->data + p * w->panel_bytes + a8_codes_at(g);
}

/* The 16 fp32 scales of panel p, group g. */
A8_INLINE __m512 a8_scales(const a8_packed *w, size_t p, uint32_t g)
{
    const uint8_t *s = w->data + p * w->panel_bytes + a8_scales_at(w->groups, g);
    return _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(const void *)s));
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
 * bytes: bias 8), which folds the zero point into the integer product.
 */
A8_INLINE void a8_expand_bias(const a8_packed *w, size_t p0, unsigned P, uint32_t g,
                              uint8_t *wexp, const int bias)
{
    const __m512i nib = _mm512_set1_epi8(0x0F), b = _mm512_set1_epi8((char)bias);
    for (unsigned p = 0; p < P; p++) {
        const uint8_t *codes = a8_codes(w, p0 + p, g);
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
