/*
 * plugins/amx-w4a8/a8_kern_avxvnni.c — path "avxvnni": W4A8 on 256-bit
 * AVX-VNNI (Intel's laptop and desktop parts since Alder Lake, and the
 * Xeons since Sapphire Rapids): one GEMV for every m, the activations of
 * path avx2 (a8_avx2_prep, which this path calls). Compiled with -mavx2
 * -mfma -mf16c -mavxvnni; reached only after init checked avx2, fma, f16c
 * and avx_vnni. The test-only build (A8_VNNI_EVEX, tests/CMakeLists.txt)
 * encodes the same instruction on ymm as EVEX (AVX512_VNNI + AVX512VL), so
 * this loop also runs on AVX-512 CPUs without AVX-VNNI.
 *
 * The same integers as path avx2 and path vnni: per (token, column, group)
 * the exact int32 d = sum a q - z sum a, then y = fma(d, s_w s_g, y) per
 * group and y * s_x (a8_kern256.h), so the same bits as path vnni's decode
 * (tests/plugins/test_amx_w4a8.c). What differs is the dot product:
 * vpdpbusd multiplies each dword lane's 4 unsigned code bytes by 4 signed
 * activation bytes and adds the 4 products straight into an int32
 * accumulator, where path avx2 needs vpmaddubsw, vpaddw and every 4 lines a
 * vpmaddwd to widen.
 *
 * Per 64-byte line (octet t of a group) and half h (32 bytes, 8 columns):
 * v & 0x0F holds the low codes (inputs 8t + 0..3), v & 0xF0 the high ones
 * times 16 (inputs 8t + 4..7: no shift), and one vpdpbusd each with the
 * token's 4 activation bytes broadcast (|products| <= 240 x 127, so a
 * group's sums stay under 2^22: no overflow; the 16 x chain is divided
 * exactly, >> 4, per group). Per line and token: 2 broadcasts, 4 vpdpbusd;
 * shared by the tokens of a pass: 2 loads and 4 ANDs.
 * Chains: vpdpbusd's latency (5 cycles on Golden Cove) against 2 a cycle
 * wants about 10 accumulators in flight. One token alone (decode) spreads a
 * half's sums over 4 chains, octets alternating (8 accumulators); a pass of
 * A8_VNNI256_RB tokens keeps 2 chains per token and half (8 as well): with
 * the constants, the ANDs' results and the broadcasts that is what ymm0-15,
 * all the VEX form can address, hold. A group's 16 octets are unrolled
 * whole: turned two at a time (path vnni's decode loop), GCC 12 carried the
 * chains around the loop through register copies and spilled 4 of the 8
 * to the stack every turn; unrolled, the loop has no stack access and no
 * copy (objdump of this file).
 */
#include <immintrin.h>

#include "a8_kern256.h"

#define A8_VNNI256_RB 2u /* tokens per pass */

/* acc += u8 a . s8 b per dword lane, in place. Inline assembly: GCC 12's
 * intrinsics copy an integer accumulator through another register every
 * step (a8_kern.h's A8_DPBUSD). The mnemonic is shared with AVX512_VNNI:
 * the {vex} prefix picks AVX-VNNI, which addresses ymm0-15 only ("x"). */
#ifdef A8_VNNI_EVEX
#define A8_DPBUSD256(acc, a, b) __asm__("%{evex%} vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b))
#else
#define A8_DPBUSD256(acc, a, b) __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(b))
#endif

/* Octet T of the group for R tokens, into chains C (low codes) and C + 1
 * (16 x the high ones) of each token and half: a macro over vnni_rows'
 * locals, as path vnni's A8_DECODE_OCTET. */
#define A8_VNNI256_OCTET(T, C)                                                                     \
    do {                                                                                           \
        const uint8_t *line_ = blk + 64u * (T);                                                    \
        a8_prefetch(line_, near);                                                                  \
        __m256i xl_[A8_VNNI256_RB], xh_[A8_VNNI256_RB];                                            \
        A8_256_UNROLL                                                                              \
        for (unsigned r = 0; r < R; r++) {                                                         \
            xl_[r] = a8_bcast4_256(xg[r] + 8u * (T));                                              \
            xh_[r] = a8_bcast4_256(xg[r] + 8u * (T) + 4u);                                         \
        }                                                                                          \
        A8_256_UNROLL                                                                              \
        for (unsigned h = 0; h < 2u; h++) {                                                        \
            const __m256i v_ =                                                                     \
                _mm256_load_si256((const __m256i *)(const void *)(line_ + 32u * h));               \
            const __m256i lo_ = _mm256_and_si256(v_, nib);                                         \
            const __m256i hi_ = _mm256_and_si256(v_, nib_hi);                                      \
            A8_256_UNROLL                                                                          \
            for (unsigned r = 0; r < R; r++) {                                                     \
                A8_DPBUSD256(acc[r][h][C], lo_, xl_[r]);                                           \
                A8_DPBUSD256(acc[r][h][(C) + 1u], hi_, xh_[r]);                                    \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* Tokens r0 .. r0 + R - 1 of panel p (R = 1: 4 chains per half; else 2). */
A8_256_INLINE void vnni_rows(const a8_job *j, size_t p, size_t r0, const unsigned R, const int near)
{
    const a8_packed *w = j->w;
    const __m256i nib = _mm256_set1_epi8(0x0F), nib_hi = _mm256_set1_epi8((char)0xF0);
    __m256 yacc[A8_VNNI256_RB][2];
    const int8_t *xa[A8_VNNI256_RB];
    A8_256_UNROLL
    for (unsigned r = 0; r < R; r++) {
        yacc[r][0] = yacc[r][1] = _mm256_setzero_ps();
        xa[r] = j->act + (r0 + r) * j->act_row_bytes;
    }
    for (uint32_t g = 0; g < w->groups; g++) {
        const uint8_t *blk = w->data + p * w->panel_bytes + a8_codes_at(w->asym, g);
        const int8_t *xg[A8_VNNI256_RB];
        __m256i acc[A8_VNNI256_RB][2][4];
        A8_256_UNROLL
        for (unsigned r = 0; r < R; r++) {
            xg[r] = xa[r] + (size_t)g * j->act_group_bytes;
            A8_256_UNROLL
            for (unsigned h = 0; h < 2u; h++)
                acc[r][h][0] = acc[r][h][1] = acc[r][h][2] = acc[r][h][3] = _mm256_setzero_si256();
        }
        A8_256_UNROLL
        for (unsigned t = 0; t < A8_OCTETS; t++)
            A8_VNNI256_OCTET(t, R == 1u ? 2u * (t & 1u) : 0u);
        if (g & 1u || g + 1u == w->groups) /* the pair's scale line follows its codes */
            a8_prefetch(blk + A8_CODE_BYTES, near);
        A8_256_UNROLL
        for (unsigned h = 0; h < 2u; h++) {
            const __m256 sw = a8_half_scales(w, p, g, h);
            A8_256_UNROLL
            for (unsigned r = 0; r < R; r++) {
                /* chains 1 and 3 hold 16 x their sums: exact >> 4 */
                __m256i lo = acc[r][h][0], hi16 = acc[r][h][1];
                if (R == 1u) {
                    lo = _mm256_add_epi32(lo, acc[r][h][2]);
                    hi16 = _mm256_add_epi32(hi16, acc[r][h][3]);
                }
                const __m256i sum = _mm256_add_epi32(lo, _mm256_srai_epi32(hi16, 4));
                yacc[r][h] =
                    a8_half_group(j, p, g, h, (r0 + r) * w->groups + g, sum, sw, yacc[r][h]);
            }
        }
    }
    A8_256_UNROLL
    for (unsigned r = 0; r < R; r++)
        a8_store_row(j, p, r0 + r, yacc[r]);
}
#undef A8_VNNI256_OCTET

/* panels, decode and prefill around it (a8_kern256.h) */
A8_256_ENTRIES(vnni_rows, A8_VNNI256_RB, a8_avxvnni_decode, a8_avxvnni_prefill)
