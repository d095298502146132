/*
 * examples/vendor-plugin/a2_kern_avx2.c — path "avx2", and the activation
 * prep every path shares. Compiled with -mavx2 -mfma.
 *
 * Activations, per (row, block of 128 inputs, whatever the weights' group
 * size): m = max |x|, sh = 13 - floor(log2 m)
 * (so m * 2^sh is in [2^13, 2^14)), a = round(x * 2^sh) clamped to
 * [-16384, 16383] (15-bit signed). |a * 2^-sh - x| <= 2^-sh <= 2^-13 * m
 * (the clamp of +16384 included): every value within 6 octaves of the
 * group's maximum keeps at least as many bits as bf16 would give it. (Groups
 * whose maximum is below 2^-113 keep sh = 126, an absolute error of at most
 * 2^-127: 2^sh must stay a normal fp32.)
 *
 * Decode (m <= 4), llama.cpp's AVX2 Q4 idea on exact integers: a = 128 hi +
 * lo with hi = a >> 7 in [-128, 127] and lo = a & 127 in [0, 127], both fit
 * the signed-byte operand of vpmaddubsw; the unsigned nibbles are the other:
 * v & 0x0F0F0F0F and (v >> 4) & .. give bytes (k0, k4, k1, k5) and
 * (k2, k6, k3, k7) of each lane's octet, and prep stores the activation bytes
 * in that order. vpmaddubsw adds two products into int16 (|.| <= 2 * 15 * 128
 * = 3840, never saturating); 8 such results add up in int16 without overflow
 * (<= 30720), so the int16 sums of 4 octets are widened once by vpmaddwd
 * (with 128 for hi, 1 for lo) into one int32 accumulator per row.
 * Per 64 bytes of codes at m = 1 that is 8 vpmaddubsw, 8 vpaddw and 6 ops
 * to split nibbles (two int8 halves cost twice the multiplies of int8
 * activations): 22 vector ALU ops, the bound of this kernel. Measured on
 * one Zen 5 core with the codes in L2: 34 GB/s (AVX-512 VNNI, same
 * integers: 51). On one Zen 3 core (family 25, model 1), this loop alone
 * over 64 KiB: 24-27 GB/s, 7.6-8.4 cycles per 64 bytes at the 3.18 GHz its
 * FMA chains give, where 22 ops on the 4 vector pipes would take 5.5:
 * vpmaddubsw issues on 2 of them (2 per cycle alone; with as many vpaddw,
 * 3.1 ops per cycle), and without the 6 ops of the nibble split the loop
 * takes 6.0 cycles. There, with two threads and a step's weights in L3
 * (edgert bench on 4 x 2048 x 2048), decode reads 51.7-53.1 GB/s: what
 * DRAM feeds that host's step read in its quiet stretches, so there the
 * arithmetic, not the synchronisation, bounds the decode step.
 *
 * The stream (same Zen 3, spark-1.7b from DRAM, bench --versus, 32 pairs a
 * run): without the prefetch 8 KiB ahead a step took 1.18, 1.32 and 1.18x
 * as long (ceilings 38-54 GB/s), although a read with no arithmetic was
 * faster without it (45.6 against 38.1 GB/s, 2 threads, one window). Two
 * panels read side by side per thread (line-interleaved, the accumulators
 * spilling) took 0.950, 0.962 and 0.992x one stream's step time where the
 * ceiling was 37-41 GB/s, and 1.061x where it was 54: two streams read
 * more, but the spills cost the arithmetic that binds in quiet windows, so
 * each thread keeps one. Nor do the broadcasts go: with every activation
 * quad stored broadcast at m = 1 (2 KiB per group instead of 256 bytes,
 * plain loads instead of vpbroadcastd), steps in L3 (4 x 2048 x 2048,
 * bench --versus, 3 runs of 64 pairs) took 1.17-1.18x as long: those
 * activations no longer stay in L1, and 128 bytes of them per 64 bytes of
 * codes then come from L2.
 *
 * Prefill (m > 4): vpmaddwd on the 15-bit integers kept whole as int16
 * against the codes expanded to int16 pairs in L1 (a2_prefill.h), 4 rows x
 * 2 halves (16 columns) of int32 accumulators: 8 vpmaddwd, 8 vpaddd and 6
 * loads per pair step. One core, m = 512, n = k = 2048: 142 GFLOP/s.
 */
#include <math.h>

#include "a2_kern.h"

/* ---- prep ------------------------------------------------------------------------ */

/* Per-octet order of the decode bytes: inputs (0, 4, 1, 5, 2, 6, 3, 7). */
#define A2_OCTET_PERM _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)

/* 4 octets of int32 (a[t], t = 0..3, each already in octet order) as 32
 * bytes in t order: the two packs interleave the 128-bit lanes, the permute
 * restores t order. Values fit int8 (no saturation). */
A2_INLINE __m256i a2_pack_bytes(__m256i a0, __m256i a1, __m256i a2, __m256i a3)
{
    __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(a0, a1), _mm256_packs_epi32(a2, a3));
    return _mm256_permutevar8x32_epi32(b, A2_OCTET_PERM);
}

/* max |x| of a group (NaN/inf flagged in *bad). */
A2_INLINE float a2_group_max(const float *xg, int *bad)
{
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256 inf = _mm256_set1_ps(INFINITY);
    __m256 mx = _mm256_setzero_ps(), nf = _mm256_setzero_ps();
    for (unsigned c = 0; c < A2_GROUP; c += 8u) {
        __m256 v = _mm256_and_ps(_mm256_loadu_ps(xg + c), absm);
        mx = _mm256_max_ps(mx, v);
        nf = _mm256_or_ps(nf, _mm256_cmp_ps(v, inf, _CMP_NLT_UQ)); /* NaN or inf */
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    *bad = _mm256_movemask_ps(nf) != 0;
    return _mm_cvtss_f32(m4);
}

A2_INLINE int32_t a2_hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* One (row, block of 128 inputs): 256 bytes of `dst` in the decode or
 * prefill format (a2_internal.h, a2_job), the sums of its S weight groups
 * (gsum[0 .. S-1]) and its scale. */
static void a2_prep_group(const float *xg, int8_t *dst, int words, unsigned S, float *gsum,
                          float *gscale)
{
    int bad = 0;
    float m = a2_group_max(xg, &bad);
    if (bad || m == 0.0f) {
        memset(dst, 0, A2_ACT_GROUP_BYTES);
        /* a non-finite activation makes the whole block's output NaN */
        *gscale = bad ? NAN : 1.0f;
        for (unsigned s = 0; s < S; s++)
            gsum[s] = bad ? NAN : 0.0f;
        return;
    }
    int sh = 13 - ilogbf(m);
    if (sh > 126)
        sh = 126; /* keep 2^sh and 2^-sh normal: only for |x| < 2^-113 */
    const __m256 scale = _mm256_set1_ps(ldexpf(1.0f, sh));
    const __m256i amin = _mm256_set1_epi32(-16384), amax = _mm256_set1_epi32(16383);
    const __m256i lo_mask = _mm256_set1_epi32(127);
    const float f = ldexpf(1.0f, -sh);
    const unsigned qper = 4u / S; /* 32-input steps per weight group */
    __m256i asum = _mm256_setzero_si256();
    for (unsigned q = 0; q < A2_GROUP / 32u; q++) { /* 4 octets at a time */
        __m256i a[4], hi[4], lo[4];
        A2_UNROLL
        for (unsigned t = 0; t < 4u; t++) {
            __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xg + 32u * q + 8u * t), scale); /* exact */
            a[t] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(v), amin), amax);
            asum = _mm256_add_epi32(asum, a[t]);
        }
        if ((q + 1u) % qper == 0u) { /* a weight group's end: |sum a| <= 2^21, exact */
            gsum[q / qper] = (float)a2_hsum_epi32(asum) * f;
            asum = _mm256_setzero_si256();
        }
        if (words) { /* int16 in input order */
            __m256i w0 = _mm256_permute4x64_epi64(_mm256_packs_epi32(a[0], a[1]), 0xD8);
            __m256i w1 = _mm256_permute4x64_epi64(_mm256_packs_epi32(a[2], a[3]), 0xD8);
            _mm256_storeu_si256((__m256i *)(void *)(dst + 64u * q), w0);
            _mm256_storeu_si256((__m256i *)(void *)(dst + 64u * q + 32u), w1);
            continue;
        }
        A2_UNROLL
        for (unsigned t = 0; t < 4u; t++) {
            __m256i o = _mm256_permutevar8x32_epi32(a[t], A2_OCTET_PERM);
            hi[t] = _mm256_srai_epi32(o, 7);
            lo[t] = _mm256_and_si256(o, lo_mask);
        }
        _mm256_storeu_si256((__m256i *)(void *)(dst + 32u * q),
                            a2_pack_bytes(hi[0], hi[1], hi[2], hi[3]));
        _mm256_storeu_si256((__m256i *)(void *)(dst + 128u + 32u * q),
                            a2_pack_bytes(lo[0], lo[1], lo[2], lo[3]));
    }
    *gscale = f;
}

void a2_avx2_prep(void *arg, size_t begin, size_t end, unsigned worker)
{
    const a2_job *j = arg;
    const uint32_t groups = j->w->groups, S = j->w->sub;
    const int words = j->m > A2_DECODE_MAX_M; /* prefill reads whole int16 */
    (void)worker;
    for (size_t i = begin; i < end; i++) {
        const float *x = j->x + i * j->ldx;
        int8_t *row = j->act + i * j->act_row_bytes;
        for (uint32_t g = 0; g < groups; g++)
            a2_prep_group(x + (size_t)g * A2_GROUP, row + (size_t)g * A2_ACT_GROUP_BYTES, words, S,
                          &j->gsum[(i * groups + g) * S], &j->gscale[i * groups + g]);
    }
}

/* ---- decode ---------------------------------------------------------------------- */

/* s[p] += u8 codes c[p] . s8 activation quad x, pairs summed into int16,
 * for P panels. A2_KEEP keeps each sum a linear chain: GCC otherwise
 * reassociates the int16 adds into a tree of live products and spills. */
A2_INLINE void a2_dot4(__m256i *s, const __m256i *c, __m256i x, const unsigned P)
{
    A2_UNROLL
    for (unsigned p = 0; p < P; p++) {
        s[p] = _mm256_add_epi16(s[p], _mm256_maddubs_epi16(c[p], x));
        A2_KEEP(s[p]);
    }
}

/* acc[r][h] += the integer sums of octets [t0, t0 + nt) of a block (`blk`,
 * at half h0) for rows r < R (activations xa[r]) and halves h < H; nt a
 * multiple of 4. */
A2_INLINE void a2_avx2_octets(const uint8_t *blk, const int8_t *const *xa, unsigned t0, unsigned nt,
                              const unsigned R, const unsigned H, __m256i acc[2][2])
{
    const __m256i nib = _mm256_set1_epi8(0x0F);
    const __m256i one = _mm256_set1_epi16(1), c128 = _mm256_set1_epi16(128);
    for (unsigned q = t0; q < t0 + nt; q += 4u) {
        __m256i h16[2][2], l16[2][2];
        A2_UNROLL
        for (unsigned r = 0; r < R; r++)
            A2_UNROLL
            for (unsigned h = 0; h < H; h++)
                h16[r][h] = l16[r][h] = _mm256_setzero_si256();
        A2_UNROLL
        for (unsigned t = q; t < q + 4u; t++) {
            const uint8_t *c = blk + A2_OCTET_BYTES * t;
            __m256i a[2], b[2];
            a2_prefetch(c);
            A2_UNROLL
            for (unsigned h = 0; h < H; h++) {
                __m256i v = _mm256_load_si256((const __m256i *)(const void *)(c + 32u * h));
                A2_KEEP(v);
                a[h] = _mm256_and_si256(v, nib);
                b[h] = _mm256_and_si256(_mm256_srli_epi16(v, 4), nib);
            }
            A2_UNROLL
            for (unsigned r = 0; r < R; r++) {
                const int8_t *xt = xa[r] + 8u * t;
                a2_dot4(h16[r], a, a2_bcast(xt), H);
                a2_dot4(h16[r], b, a2_bcast(xt + 4), H);
                a2_dot4(l16[r], a, a2_bcast(xt + 128), H);
                a2_dot4(l16[r], b, a2_bcast(xt + 132), H);
            }
        }
        A2_UNROLL
        for (unsigned r = 0; r < R; r++)
            A2_UNROLL
            for (unsigned h = 0; h < H; h++)
                acc[r][h] = _mm256_add_epi32(acc[r][h],
                                             _mm256_add_epi32(_mm256_madd_epi16(h16[r][h], c128),
                                                              _mm256_madd_epi16(l16[r][h], one)));
    }
}

/* Rows [r0, r0 + R) x halves [h0, h0 + H) of panel p, R * H <= 2 (16 ymm
 * registers: per output half-row a pair of int16 sums, an int32 and an fp32
 * accumulator), S weight groups per block (a constant: one instance per
 * group size, the loop over a block's groups unrolled; the codes are read
 * once, the epilogue runs per group). One row over both halves is the
 * m = 1 case: each broadcast of activation bytes then feeds two halves, and
 * the loads (2 per cycle) are what limits this kernel. */
A2_INLINE void a2_avx2_decode_tile(const a2_job *j, size_t p, unsigned h0, size_t r0,
                                   const unsigned R, const unsigned H, const unsigned S)
{
    const a2_packed *w = j->w;
    const uint8_t *blk = a2_block(w, p, 0) + 32u * h0;
    __m256 yacc[2][2];
    A2_UNROLL
    for (unsigned r = 0; r < R; r++)
        A2_UNROLL
        for (unsigned h = 0; h < H; h++)
            yacc[r][h] = _mm256_setzero_ps();
    for (uint32_t g = 0; g < w->groups; g++, blk += w->block_bytes) {
        const int8_t *xa[2];
        A2_UNROLL
        for (unsigned r = 0; r < R; r++)
            xa[r] = j->act + (r0 + r) * j->act_row_bytes + (size_t)g * A2_ACT_GROUP_BYTES;
        A2_UNROLL
        for (unsigned s = 0; s < S; s++) {
            __m256i acc[2][2];
            A2_UNROLL
            for (unsigned r = 0; r < R; r++)
                A2_UNROLL
                for (unsigned h = 0; h < H; h++)
                    acc[r][h] = _mm256_setzero_si256();
            a2_avx2_octets(blk, xa, s * (A2_OCTETS / S), A2_OCTETS / S, R, H, acc);
            if (s == 0u)
                for (unsigned l = 0; l < S; l++) /* the block's S lines of meta */
                    a2_prefetch(a2_block_meta(blk, l, 0));
            A2_UNROLL
            for (unsigned h = 0; h < H; h++) {
                __m256 sc, sz;
                a2_meta(a2_block_meta(blk, s, h), &sc, &sz); /* blk is at half h0 */
                A2_UNROLL
                for (unsigned r = 0; r < R; r++) {
                    size_t gi = (r0 + r) * w->groups + g;
                    __m256 f = _mm256_mul_ps(sc, _mm256_set1_ps(j->gscale[gi]));
                    yacc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][h]), f, yacc[r][h]);
                    yacc[r][h] = _mm256_fnmadd_ps(sz, _mm256_set1_ps(j->gsum[gi * S + s]),
                                                  yacc[r][h]);
                }
            }
        }
    }
    A2_UNROLL
    for (unsigned h = 0; h < H; h++) {
        const a2_cols cols = a2_half_cols(w, p, h0 + h);
        A2_UNROLL
        for (unsigned r = 0; r < R; r++)
            a2_store_y(j->y + (r0 + r) * j->ldy + p * A2_PANEL + (h0 + h) * A2_HALF, cols,
                       yacc[r][h]);
    }
}
/* Panels [begin, end), every row: m = 1 both halves per pass, else two rows
 * of one half per pass (the other passes over a panel read it from cache);
 * S weight groups per block. */
A2_INLINE void a2_avx2_decode_s(const a2_job *j, size_t begin, size_t end, const unsigned S)
{
    for (size_t p = begin; p < end; p++) {
        const unsigned halves = a2_halves(j->w, p);
        if (j->m == 1u && halves == 2u) {
            a2_avx2_decode_tile(j, p, 0, 0, 1, 2, S);
            continue;
        }
        for (unsigned h = 0; h < halves; h++) {
            size_t r0 = 0;
            for (; r0 + 2u <= j->m; r0 += 2u)
                a2_avx2_decode_tile(j, p, h, r0, 2, 1, S);
            if (r0 < j->m)
                a2_avx2_decode_tile(j, p, h, r0, 1, 1, S);
        }
    }
}

void a2_avx2_decode(void *arg, size_t begin, size_t end, unsigned worker)
{
    const a2_job *j = arg;
    (void)worker;
    switch (j->w->sub) {
    case 1u:
        a2_avx2_decode_s(j, begin, end, 1u);
        break;
    case 2u:
        a2_avx2_decode_s(j, begin, end, 2u);
        break;
    default: /* 4: groups of 32 (the layout holds no other) */
        a2_avx2_decode_s(j, begin, end, 4u);
        break;
    }
}

/* ---- prefill --------------------------------------------------------------------- */

#define A2P_FN(name) a2_avx2_##name
#define A2P_RB 4u
/* acc += vpmaddwd(w, x), the add in place by inline assembly: with the
 * plain intrinsics GCC 12 moved every accumulator to another register each
 * step and reloaded a weight vector per use (9 loads and 33 uops per pair
 * step instead of 6 and 25; measured 127 -> 139 GFLOP/s on one core). */
#define A2P_DOT(acc, wgt, act)                                                                 \
    do {                                                                                       \
        __m256i t_ = _mm256_madd_epi16((wgt), (act));                                          \
        __asm__("vpaddd %1, %0, %0" : "+x"(acc) : "x"(t_));                                    \
    } while (0)
#include "a2_prefill.h"

void a2_avx2_prefill(void *arg, size_t begin, size_t end, unsigned worker)
{
    a2_avx2_prefill_panels(arg, begin, end, worker);
}
