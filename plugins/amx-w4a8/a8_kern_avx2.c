/*
 * plugins/amx-w4a8/a8_kern_avx2.c — path "avx2": W4A8 on 256-bit AVX2, for
 * the x86 CPUs without AVX-512 (Intel's laptop parts since Alder Lake, AMD
 * Zen 2 and 3): the activation prep and one GEMV that serves every m.
 * Compiled with -mavx2 -mfma -mf16c; reached only after init checked those.
 *
 * The same packed layout and activations as the AVX-512 paths
 * (a8_internal.h). Per (token, column, group) the exact int32
 * d = sum a q - z sum a, then y = fma(d, s_w s_g, y) per group and y * s_x, the
 * same fp32 operations in the same order as path vnni's GEMV: the same bits
 * as its decode (tests/plugins/test_amx_w4a8.c).
 *
 * Per 64-byte line (octet t of a group: 16 columns x 8 inputs) the two
 * 32-byte halves (columns 0-7 and 8-15) are split into low nibbles (inputs
 * 8t + 0..3, in order) and high nibbles (8t + 4..7), and vpmaddubsw
 * multiplies each with the token's 4 activation bytes broadcast: unsigned
 * codes 0..15 times signed -127..127, pairs summed into int16, |.| <= 2 x
 * 15 x 127 = 3810, so no saturation. Eight of those (4 octets) add up in
 * int16 to at most 30480 < 2^15; every 4 octets vpmaddwd against 1 widens a
 * half's int16 sums into its int32 accumulator (|d + 8 sum a| < 2^18).
 * Per line: 2 loads, 6 ops to split the nibbles (shared by the tokens of a
 * pass), and per token 2 broadcasts, 4 vpmaddubsw and 4 vpaddw, plus a
 * vpmaddwd and a vpaddd per half every 4 lines. avx2-w4a16's decode does 8
 * vpmaddubsw per line (its 15-bit activations as two int8 halves).
 *
 * Tokens: A8_AVX2_RB per pass over a panel's codes (the split shared by
 * them), the rest one at a time; a panel's codes (17 KiB at k = 2048) stay
 * in L1/L2 between passes. Rows of x come in either activation layout
 * (row-major for decode, group-major above decode_max_m): act_row_bytes and
 * act_group_bytes address both.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "a8_kern256.h"

#define A8_AVX2_INLINE A8_256_INLINE
#define A8_AVX2_UNROLL A8_256_UNROLL
#define A8_AVX2_RB 2u /* tokens per pass: 2 x 2 halves of int16 and int32 sums */

/* Keep a sum in a register, as computed: an empty asm GCC cannot see
 * through. Without it GCC 12 reassociated each half's int16 chain into all
 * the products first, spilled to the stack, then a tree of adds (one core,
 * codes in L2: 22 GB/s; examples/vendor-plugin's A2_KEEP, the same cure). */
#define A8_AVX2_KEEP(v) __asm__("" : "+x"(v))

/* ---- activations -------------------------------------------------------------------- */

A8_AVX2_INLINE int32_t hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* max |x| over k (a multiple of 128) and whether a NaN or an infinity is
 * among them: a8_prep's, on 8 lanes. */
A8_AVX2_INLINE float row_max(const float *x, uint32_t k, int *bad)
{
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256 inf = _mm256_set1_ps(INFINITY);
    __m256 mx = _mm256_setzero_ps(), nf = _mm256_setzero_ps();
    for (uint32_t c = 0; c < k; c += 8u) {
        __m256 v = _mm256_and_ps(_mm256_loadu_ps(x + c), absm);
        mx = _mm256_max_ps(mx, v);
        nf = _mm256_or_ps(nf, _mm256_cmp_ps(v, inf, _CMP_NLT_UQ)); /* NaN or inf */
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    *bad = _mm256_movemask_ps(nf) != 0;
    return _mm_cvtss_f32(m4);
}

/* The largest |x| of one group of 128 (a8_prep's group mode). */
A8_AVX2_INLINE float group_max(const float *x)
{
    int unused = 0;
    return row_max(x, A8_GROUP, &unused);
}

/* a8_prep's arithmetic on AVX2, in either mode: the scale's max m (the
 * group's or the token's), a = rint(x * (127 / m)) clamped to [-127, 127]
 * (vcvtps2dq rounds to nearest even, as a8_prep's explicit rounding), 8
 * times each group's sum, s_g and s_x. */
void a8_avx2_prep(void *arg, size_t begin, size_t end, unsigned worker)
{
    const a8_job *j = arg;
    const uint32_t k = j->w->k, groups = j->w->groups;
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    (void)worker;

    for (size_t i = begin; i < end; i++) {
        const float *x = j->x + i * j->ldx;
        int8_t *a = j->act + i * j->act_row_bytes;
        const size_t gb = j->act_group_bytes;
        int32_t *asum8 = j->asum8 + i * groups;
        float *sg = j->sg + i * groups;
        int bad = 0;
        const float m = row_max(x, k, &bad);
        if (bad || m == 0.0f) {
            a8_prep_zero_row(j, i, bad);
            continue;
        }
        for (uint32_t g = 0; g < groups; g++) {
            const float mg = j->act_group ? group_max(x + g * A8_GROUP) : m;
            if (mg == 0.0f) { /* a group of zeros: codes 0, scale 0 */
                a8_prep_zero_group(j, i, g);
                continue;
            }
            const __m256 inv = _mm256_set1_ps(127.0f / mg);
            __m256i sum = _mm256_setzero_si256();
            for (uint32_t c = 0; c < A8_GROUP; c += 32u) {
                __m256i q[4];
                A8_AVX2_UNROLL
                for (unsigned t = 0; t < 4u; t++) {
                    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + g * A8_GROUP + c + 8u * t), inv);
                    q[t] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(v), lo), hi);
                    sum = _mm256_add_epi32(sum, q[t]);
                }
                /* 32 int32 to 32 bytes in input order: the packs interleave
                 * the 128-bit lanes, the permute restores the order */
                __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]),
                                               _mm256_packs_epi32(q[2], q[3]));
                _mm256_storeu_si256((__m256i *)(void *)(a + g * gb + c),
                                    _mm256_permutevar8x32_epi32(b, order));
            }
            asum8[g] = 8 * hsum_epi32(sum);
            sg[g] = j->act_group ? mg / 127.0f : 1.0f;
        }
        j->sx[i] = j->act_group ? 1.0f : m / 127.0f;
    }
}

/* ---- the GEMV --------------------------------------------------------------------------- */

/* Tokens r0 .. r0 + R - 1 of panel p: y[r][16 p ..] for the columns that
 * exist (the rest of the panel's lanes are padding, never stored). */
A8_AVX2_INLINE void panel_rows(const a8_job *j, size_t p, size_t r0, const unsigned R,
                               const int near)
{
    const a8_packed *w = j->w;
    const __m256i nib = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi16(1);
    __m256 yacc[A8_AVX2_RB][2];
    const int8_t *xa[A8_AVX2_RB];
    A8_AVX2_UNROLL
    for (unsigned r = 0; r < R; r++) {
        yacc[r][0] = yacc[r][1] = _mm256_setzero_ps();
        xa[r] = j->act + (r0 + r) * j->act_row_bytes;
    }
    for (uint32_t g = 0; g < w->groups; g++) {
        const uint8_t *blk = w->data + p * w->panel_bytes + a8_codes_at(w->asym, g);
        const int8_t *xg[A8_AVX2_RB];
        __m256i acc[A8_AVX2_RB][2];
        A8_AVX2_UNROLL
        for (unsigned r = 0; r < R; r++) {
            xg[r] = xa[r] + (size_t)g * j->act_group_bytes;
            acc[r][0] = acc[r][1] = _mm256_setzero_si256();
        }
        for (unsigned t0 = 0; t0 < A8_OCTETS; t0 += 4u) {
            __m256i s16[A8_AVX2_RB][2];
            A8_AVX2_UNROLL
            for (unsigned r = 0; r < R; r++)
                s16[r][0] = s16[r][1] = _mm256_setzero_si256();
            A8_AVX2_UNROLL
            for (unsigned t = t0; t < t0 + 4u; t++) {
                const uint8_t *line = blk + 64u * t;
                a8_prefetch(line, near);
                A8_AVX2_UNROLL
                for (unsigned h = 0; h < 2u; h++) {
                    __m256i v = _mm256_load_si256((const __m256i *)(const void *)(line + 32u * h));
                    __m256i lo4 = _mm256_and_si256(v, nib);
                    __m256i hi4 = _mm256_and_si256(_mm256_srli_epi16(v, 4), nib);
                    A8_AVX2_UNROLL
                    for (unsigned r = 0; r < R; r++) {
                        const int8_t *xt = xg[r] + 8u * t;
                        s16[r][h] = _mm256_add_epi16(
                            s16[r][h], _mm256_maddubs_epi16(lo4, a8_bcast4_256(xt)));
                        A8_AVX2_KEEP(s16[r][h]);
                        s16[r][h] = _mm256_add_epi16(
                            s16[r][h], _mm256_maddubs_epi16(hi4, a8_bcast4_256(xt + 4u)));
                        A8_AVX2_KEEP(s16[r][h]);
                    }
                }
            }
            A8_AVX2_UNROLL
            for (unsigned r = 0; r < R; r++)
                A8_AVX2_UNROLL
                for (unsigned h = 0; h < 2u; h++)
                    acc[r][h] = _mm256_add_epi32(acc[r][h], _mm256_madd_epi16(s16[r][h], one));
        }
        if (g & 1u || g + 1u == w->groups) /* the pair's scale line follows its codes */
            a8_prefetch(blk + A8_CODE_BYTES, near);
        A8_AVX2_UNROLL
        for (unsigned h = 0; h < 2u; h++) {
            const __m256 sw = a8_half_scales(w, p, g, h);
            A8_AVX2_UNROLL
            for (unsigned r = 0; r < R; r++)
                yacc[r][h] = a8_half_group(j, p, g, h, (r0 + r) * w->groups + g, acc[r][h], sw,
                                           yacc[r][h]);
        }
    }
    A8_AVX2_UNROLL
    for (unsigned r = 0; r < R; r++)
        a8_store_row(j, p, r0 + r, yacc[r]);
}

/* panels, decode and prefill around it (a8_kern256.h) */
A8_256_ENTRIES(panel_rows, A8_AVX2_RB, a8_avx2_decode, a8_avx2_prefill)
