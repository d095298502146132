/*
 * plugins/avx512-w4a16/aw_kern_int16.c — path "int16": exact integer
 * activations through AVX512_VNNI. Compiled with -mavx512f -mavx512bw
 * -mavx512vl -mavx512vnni.
 *
 * Activations, per (row, group of 128): m = max |x|, sh = 13 - floor(log2 m)
 * (so m * 2^sh is in [2^13, 2^14)), a = round(x * 2^sh) clamped to
 * [-16384, 16383] (15-bit signed). |a * 2^-sh - x| <= 2^-sh <= 2^-13 * m:
 * every value within 6 octaves of the group's maximum keeps at least as many
 * bits as bf16 would give it, and the error of every element is below the
 * bf16 rounding error of the group's largest one. The bound per element,
 * 2^-13 * m (clamp included), is what the test and the self-test check.
 *
 * Decode (m <= AW_DECODE_MAX_M), vpdpbusd as the issue proposed: a = 128 hi
 * + lo with hi = a >> 7 in [-128, 127] and lo = a & 127 in [0, 127], both
 * fit the signed-byte operand; the unsigned nibbles are the other operand:
 * v & 0x0F0F0F0F gives bytes (k0, k4, k1, k5) of each lane's octet and
 * v & 0xF0F0F0F0 bytes 16 (k2, k6, k3, k7), and prep stores the activation
 * bytes in that order. Two ANDs per 64 bytes of codes feed 4 vpdpbusd; the
 * chains of the high nibbles sum 16x (|16 acc| < 2^29, below) and the
 * group's epilogue divides exactly by 16 with a shift. Before, the high
 * nibbles were shifted down per line: vpsrld runs on port 0 with vpdpbusd
 * on Intel (5 port-0 operations per line, now 4). Xeon with AMX, the same
 * results bit for bit (edgert verify), alternating pairs of builds: a
 * 2.2 MB workload resident in L2 (the kernel's own speed) 81 -> 85 GB/s
 * median of 5; 35.7 MB resident in L3 (about 60 GB/s, what a quiet window
 * would feed) 57.4-58.2 -> 57.8-58.8 GB/s in 4; spark-1.7b from DRAM (36-38
 * GB/s, memory-bound) unchanged, 25.62 -> 25.53 ms per step median of 5.
 *
 * Decode at m = 1 may read 2 or 4 panels side by side, each from its own
 * part of the chunk (option streams=, int16_decode_streams): on AMD EPYC
 * (Zen 5) 4 streams without software prefetch took 0.77-0.79 of one
 * stream's time from DRAM (three series of 5 interleaved rounds), on
 * another one stream was the faster, so off Intel the default weighs the
 * two by the calls' times (streams=auto, aw_decode_defaults).
 *
 * Prefill (m > AW_DECODE_MAX_M), vpdpwssd on the same 15-bit integers kept
 * whole as int16: codes expanded once per (panel, group) to int16 pairs
 * (v >> 4s) & 0x000F000F = words (k_2s, k_2s+1). On this machine (Zen 5)
 * vpdpwssd issues as fast as vpdpbusd, so one vpdpwssd does the work of the
 * two vpdpbusd halves, and the register tile needs one accumulator per
 * output instead of two (8 x 3 outputs in 24 registers; the split form
 * spilled at 4 x 3 and ran at 0.6x the speed).
 *
 * Per (column, group), all in int32 and exact: acc = sum q a
 * (|acc| <= 128 * 15 * 16384 < 2^31); then in fp32
 *   y += s * 2^-sh * acc - (s z) * (2^-sh * sum a).
 */
#include "aw_kern.h"

/* ---- prep ------------------------------------------------------------------------ */

/* Scratch per (row, group), 256 bytes: decode: 128 hi bytes then 128 lo
 * bytes in vpdpbusd order, row-major; prefill: 128 int16 a in input order,
 * group-major (a group's rows contiguous: aw_internal.h). */

/* ilogbf and ldexpf(1, e) from the bits, for prep's per-group exponents
 * (three libm calls per group; a decode call's prep runs while the pool's
 * other threads wait: 4946 -> 4492 cycles per call, spark-1.7b's mix, with
 * the max and NaN loops merged). i16_ilogb takes a finite m > 0 and gives
 * -127 for a subnormal one (ilogbf: below -126), which the clamp of sh to
 * 126 maps the same; i16_exp2 takes e in [-126, 127]. Same bits as before. */
AW_INLINE int i16_ilogb(float m)
{
    uint32_t b;
    memcpy(&b, &m, sizeof b);
    return (int)((b >> 23) & 0xFFu) - 127;
}

AW_INLINE float i16_exp2(int e)
{
    uint32_t b = (uint32_t)(e + 127) << 23;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

void aw_int16_prep(void *arg, size_t begin, size_t end, unsigned worker)
{
    const aw_job *j = arg;
    const uint32_t groups = j->w->groups;
    /* per pair of octets: inputs (0,4,1,5, 2,6,3,7) of each */
    const __m512i perm = _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
    const __m512i lo_mask = _mm512_set1_epi32(127);
    const __m512i amin = _mm512_set1_epi32(-16384), amax = _mm512_set1_epi32(16383);
    /* prefill reads whole int16 values in input order, decode the byte halves */
    const int words = j->m > AW_DECODE_MAX_M;
    (void)worker;

    for (size_t i = begin; i < end; i++) {
        const float *x = j->x + i * j->ldx;
        int8_t *row = (int8_t *)j->act + i * j->act_row_bytes;
        for (uint32_t g = 0; g < groups; g++) {
            const float *xg = x + (size_t)g * AW_GROUP;
            int8_t *hi = row + (size_t)g * j->act_group_bytes, *lo = hi + 128;
            __m512 mx = _mm512_setzero_ps();
            __mmask16 bad = 0;
            for (unsigned c = 0; c < AW_GROUP; c += 16) {
                __m512 v = _mm512_abs_ps(_mm512_loadu_ps(xg + c));
                mx = _mm512_max_ps(mx, v);
                /* max_ps drops a NaN in its second operand; find them explicitly */
                bad |= _mm512_cmp_ps_mask(v, _mm512_set1_ps(INFINITY), _CMP_NLT_UQ);
            }
            float m = _mm512_reduce_max_ps(mx);
            const uint32_t sub = j->w->sub, gsz = j->w->group;
            float *gsum = &j->gsum[(i * groups + g) * sub], *gscale = &j->gscale[i * groups + g];
            if (bad != 0 || m == 0.0f) {
                memset(hi, 0, 256u);
                /* a non-finite activation makes the whole block's output NaN */
                *gscale = bad != 0 ? NAN : 1.0f;
                for (uint32_t q = 0; q < sub; q++)
                    gsum[q] = bad != 0 ? NAN : 0.0f;
                continue;
            }
            int sh = 13 - i16_ilogb(m);
            if (sh > 126)
                sh = 126; /* keep 2^sh and 2^-sh normal: only for |x| < 2^-113 */
            const __m512 scale = _mm512_set1_ps(i16_exp2(sh));
            const float f = i16_exp2(-sh);
            __m512i asum = _mm512_setzero_si512();
            for (unsigned c = 0; c < AW_GROUP; c += 16) {
                __m512i a = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xg + c), scale));
                a = _mm512_min_epi32(_mm512_max_epi32(a, amin), amax);
                asum = _mm512_add_epi32(asum, a);
                if ((c + 16u) % gsz == 0u) { /* a weight group's end: its sum */
                    gsum[c / gsz] = (float)_mm512_reduce_add_epi32(asum) * f; /* |sum| <= 2^21 */
                    asum = _mm512_setzero_si512();
                }
                if (words) {
                    _mm256_storeu_si256((__m256i *)(void *)(hi + 2u * c),
                                        _mm512_cvtepi32_epi16(a));
                    continue;
                }
                a = _mm512_permutexvar_epi32(perm, a);
                _mm_storeu_si128((__m128i *)(void *)(hi + c),
                                 _mm512_cvtepi32_epi8(_mm512_srai_epi32(a, 7)));
                _mm_storeu_si128((__m128i *)(void *)(lo + c),
                                 _mm512_cvtepi32_epi8(_mm512_and_si512(a, lo_mask)));
            }
            *gscale = f;
        }
    }
}

/* acc += u8 a . s8 b, in place. Inline asm because with the intrinsics
 * (_mm512_dpbusd_epi32, _mm512_dpwssd_epi32) GCC 12 at -O3 copies every
 * integer accumulator through another register and the stack each step
 * (measured 3x slower prefill); the fp32 vdpbf16ps/FMA tiles do not have
 * this problem. */
#define I16_DPBUSD(acc, a, b) __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b))

AW_INLINE __m512i i16_bcast(const int8_t *p)
{
    int32_t d;
    memcpy(&d, p, sizeof d);
    return _mm512_set1_epi32(d);
}

/* ---- decode ---------------------------------------------------------------------- */

AW_INLINE void int16_decode_panel(const aw_job *j, size_t p, const unsigned R, const int near)
{
    const aw_packed *w = j->w;
    const uint8_t *blk = aw_data(w) + p * w->panel_bytes;
    const __m512i nib = _mm512_set1_epi8(0x0F), nib_hi = _mm512_set1_epi8((char)0xF0);
    const unsigned T = AW_OCTETS / w->sub; /* octets per weight group */
    __m512 yacc[4];

    AW_UNROLL
    for (unsigned r = 0; r < R; r++)
        yacc[r] = _mm512_setzero_ps();
    for (uint32_t g = 0; g < w->groups; g++, blk += w->block_bytes) {
        const int8_t *xa[4];
        AW_UNROLL
        for (unsigned r = 0; r < R; r++)
            xa[r] = (const int8_t *)j->act + r * j->act_row_bytes + (size_t)g * j->act_group_bytes;
        for (unsigned q = 0; q < w->sub; q++) { /* each weight group of the block */
            __m512i hA[4], hB[4], lA[4], lB[4];
            AW_UNROLL
            for (unsigned r = 0; r < R; r++)
                hA[r] = hB[r] = lA[r] = lB[r] = _mm512_setzero_si512();
            /* rolled: with the shift gone GCC 12 unrolled the m = 1 loop fully
             * and hoisted its 16 prefetches ahead of the loads, and the step
             * from DRAM ran 25% slower (Xeon with AMX, 5 alternating rounds) */
            _Pragma("GCC unroll 1")
            for (unsigned t = q * T; t < (q + 1u) * T; t++) {
                aw_prefetch(blk + 64u * t, near);
                __m512i v = _mm512_load_si512((const void *)(blk + 64u * t));
                __m512i a = _mm512_and_si512(v, nib);
                __m512i b = _mm512_and_si512(v, nib_hi); /* 16 x the high nibbles */
                AW_UNROLL
                for (unsigned r = 0; r < R; r++) {
                    I16_DPBUSD(hA[r], a, i16_bcast(xa[r] + 8u * t));
                    I16_DPBUSD(hB[r], b, i16_bcast(xa[r] + 8u * t + 4u));
                    I16_DPBUSD(lA[r], a, i16_bcast(xa[r] + 128u + 8u * t));
                    I16_DPBUSD(lB[r], b, i16_bcast(xa[r] + 128u + 8u * t + 4u));
                }
            }
            const uint8_t *meta = blk + AW_CODE_BYTES + (size_t)q * AW_META_BYTES;
            aw_prefetch(meta, near);
            __m512 sc, sz;
            aw_meta(meta, &sc, &sz);
            AW_UNROLL
            for (unsigned r = 0; r < R; r++) {
                /* hB, lB are 16 x their sums: 16 acc, exact, then >> 4 */
                __m512i h16 = _mm512_add_epi32(_mm512_slli_epi32(hA[r], 4), hB[r]);
                __m512i l16 = _mm512_add_epi32(_mm512_slli_epi32(lA[r], 4), lB[r]);
                __m512i acc =
                    _mm512_srai_epi32(_mm512_add_epi32(_mm512_slli_epi32(h16, 7), l16), 4);
                size_t gi = r * w->groups + g;
                yacc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc),
                                          _mm512_mul_ps(sc, _mm512_set1_ps(j->gscale[gi])),
                                          yacc[r]);
                yacc[r] = _mm512_fnmadd_ps(sz, _mm512_set1_ps(j->gsum[gi * w->sub + q]), yacc[r]);
            }
        }
    }
    __mmask16 mask = aw_panel_mask(w, p);
    AW_UNROLL
    for (unsigned r = 0; r < R; r++)
        _mm512_mask_storeu_ps(j->y + r * j->ldy + p * AW_PANEL, mask, yacc[r]);
}

/* m = 1 over S panels side by side, each from its own part of the call's
 * range (int16_decode_panel's arithmetic, bit for bit): S streams of codes
 * in flight per core, one set of activation broadcasts for all S. Chains
 * were not what bound one stream: 8 accumulators over one stream (two
 * octets a turn) ran as fast as 4, 0.999 of its time (Zen 5, 5 rounds). */
AW_INLINE void int16_decode_streams(const aw_job *j, const size_t *pp, const unsigned S,
                                    const int near)
{
    const aw_packed *w = j->w;
    const uint8_t *blk[4];
    const __m512i nib = _mm512_set1_epi8(0x0F), nib_hi = _mm512_set1_epi8((char)0xF0);
    __m512 yacc[4];
    AW_UNROLL
    for (unsigned s = 0; s < S; s++) {
        blk[s] = aw_data(w) + pp[s] * w->panel_bytes;
        yacc[s] = _mm512_setzero_ps();
    }
    const unsigned T = AW_OCTETS / w->sub; /* octets per weight group */
    for (uint32_t g = 0; g < w->groups; g++) {
        const int8_t *xa = (const int8_t *)j->act + (size_t)g * j->act_group_bytes;
        const __m512 f = _mm512_set1_ps(j->gscale[g]);
        for (unsigned q = 0; q < w->sub; q++) { /* each weight group of the block */
            __m512i hA[4], hB[4], lA[4], lB[4];
            AW_UNROLL
            for (unsigned s = 0; s < S; s++)
                hA[s] = hB[s] = lA[s] = lB[s] = _mm512_setzero_si512();
            _Pragma("GCC unroll 1")
            for (unsigned t = q * T; t < (q + 1u) * T; t++) {
                const __m512i x0 = i16_bcast(xa + 8u * t), x1 = i16_bcast(xa + 8u * t + 4u);
                const __m512i x2 = i16_bcast(xa + 128u + 8u * t);
                const __m512i x3 = i16_bcast(xa + 128u + 8u * t + 4u);
                AW_UNROLL
                for (unsigned s = 0; s < S; s++) {
                    aw_prefetch(blk[s] + 64u * t, near);
                    __m512i v = _mm512_load_si512((const void *)(blk[s] + 64u * t));
                    __m512i a = _mm512_and_si512(v, nib);
                    __m512i b = _mm512_and_si512(v, nib_hi);
                    I16_DPBUSD(hA[s], a, x0);
                    I16_DPBUSD(hB[s], b, x1);
                    I16_DPBUSD(lA[s], a, x2);
                    I16_DPBUSD(lB[s], b, x3);
                }
            }
            const __m512 gs = _mm512_set1_ps(j->gsum[(size_t)g * w->sub + q]);
            AW_UNROLL
            for (unsigned s = 0; s < S; s++) {
                const uint8_t *meta = blk[s] + AW_CODE_BYTES + (size_t)q * AW_META_BYTES;
                aw_prefetch(meta, near);
                __m512 sc, sz;
                aw_meta(meta, &sc, &sz);
                __m512i h16 = _mm512_add_epi32(_mm512_slli_epi32(hA[s], 4), hB[s]);
                __m512i l16 = _mm512_add_epi32(_mm512_slli_epi32(lA[s], 4), lB[s]);
                __m512i acc =
                    _mm512_srai_epi32(_mm512_add_epi32(_mm512_slli_epi32(h16, 7), l16), 4);
                yacc[s] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_mul_ps(sc, f), yacc[s]);
                yacc[s] = _mm512_fnmadd_ps(sz, gs, yacc[s]);
            }
        }
        AW_UNROLL
        for (unsigned s = 0; s < S; s++)
            blk[s] += w->block_bytes;
    }
    AW_UNROLL
    for (unsigned s = 0; s < S; s++)
        _mm512_mask_storeu_ps(j->y + pp[s] * AW_PANEL, aw_panel_mask(w, pp[s]), yacc[s]);
}

/* Panels [begin, end) at m = 1 as S streams: part s is [begin + s q, begin
 * + (s + 1) q), q = (end - begin) / S, read side by side; the rest (under S
 * panels of a chunk of 64 KiB or more) one by one, with the streams'
 * prefetch mode, as a chunk of fewer than S panels (small matrices only). */
AW_INLINE void int16_decode_range(const aw_job *j, size_t begin, size_t end, const unsigned S,
                                  const int near)
{
    size_t q = (end - begin) / S, pp[4];
    for (size_t i = 0; i < q; i++) {
        AW_UNROLL
        for (unsigned s = 0; s < S; s++)
            pp[s] = begin + s * q + i;
        int16_decode_streams(j, pp, S, near);
    }
    for (size_t p = begin + S * q; p < end; p++)
        int16_decode_panel(j, p, 1, near);
}

/* ---- prefill ------------------------------------------------------------------------ */

#define INT16_RB 8u /* 8 rows x 3 panels = 24 int32 accumulators */
#define INT16_PB AW_PREFILL_PB


/* acc += a . b over int16 pairs, in place (see I16_DPBUSD). */
#define I16_DPWSSD(acc, a, b) __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b))

/* The hot loop on its own, in the shape GCC 12 register-allocates cleanly
 * (24 accumulators in registers; inlined into the flush code below it
 * spilled them every step): out[r * P + p] = sum over the group of
 * codes(p) . a(row r). Rows are `rs` bytes apart. */
AW_INLINE void int16_kern(const int16_t *wexp, const int8_t *xa, size_t rs, unsigned pr0,
                          unsigned pr1, const unsigned R, const unsigned P, __m512i *out)
{
    __m512i acc[INT16_RB][INT16_PB];
    AW_UNROLL
    for (unsigned r = 0; r < R; r++)
        AW_UNROLL
        for (unsigned p = 0; p < P; p++)
            acc[r][p] = _mm512_setzero_si512();
    for (unsigned pr = pr0; pr < pr1; pr++) { /* the weight group's input pairs */
        /* The next tile's activations into L1 while this one computes: R
         * rows on, contiguous group-major (2 KiB at R = 8), 32 bytes per
         * pair step. Without it each tile's first touch of its 8 rows
         * missed L1 (a group's 32 KiB of chunk rows, the 12 KiB of codes
         * and the 24 KiB buffer do not fit). Xeon with AMX, bench prefill
         * path=int16, 5 interleaved rounds: 606 -> 674 GFLOP/s median. */
        _mm_prefetch((const char *)(xa + R * rs + 32u * pr), _MM_HINT_T0);
        __m512i wv[INT16_PB];
        AW_UNROLL
        for (unsigned p = 0; p < P; p++)
            wv[p] = _mm512_load_si512((const void *)(wexp + ((size_t)pr * P + p) * 32u));
        AW_UNROLL
        for (unsigned r = 0; r < R; r++) {
            __m512i xb = i16_bcast(xa + r * rs + 4u * pr);
            AW_UNROLL
            for (unsigned p = 0; p < P; p++)
                I16_DPWSSD(acc[r][p], wv[p], xb);
        }
    }
    AW_UNROLL
    for (unsigned r = 0; r < R; r++)
        AW_UNROLL
        for (unsigned p = 0; p < P; p++)
            _mm512_store_si512((void *)&out[r * P + p], acc[r][p]);
}

#define INT16_KERN_FN(R, P)                                                                 \
    static __attribute__((noinline)) void int16_kern_##R##_##P(                             \
        const int16_t *wexp, const int8_t *xa, size_t rs, unsigned pr0, unsigned pr1,       \
        __m512i *out)                                                                       \
    {                                                                                       \
        int16_kern(wexp, xa, rs, pr0, pr1, R, P, out);                                      \
    }
#define INT16_KERN_ROW(R) INT16_KERN_FN(R, 1) INT16_KERN_FN(R, 2) INT16_KERN_FN(R, 3)
INT16_KERN_ROW(1) INT16_KERN_ROW(2) INT16_KERN_ROW(3) INT16_KERN_ROW(4)
INT16_KERN_ROW(5) INT16_KERN_ROW(6) INT16_KERN_ROW(7) INT16_KERN_ROW(8)
#undef INT16_KERN_ROW
#undef INT16_KERN_FN

typedef void (*int16_kern_fn)(const int16_t *, const int8_t *, size_t, unsigned, unsigned,
                              __m512i *);
#define INT16_KERN_ROW(R) {int16_kern_##R##_1, int16_kern_##R##_2, int16_kern_##R##_3}
static const int16_kern_fn int16_kerns[INT16_RB][INT16_PB] = {
    INT16_KERN_ROW(1), INT16_KERN_ROW(2), INT16_KERN_ROW(3), INT16_KERN_ROW(4),
    INT16_KERN_ROW(5), INT16_KERN_ROW(6), INT16_KERN_ROW(7), INT16_KERN_ROW(8),
};
#undef INT16_KERN_ROW

/* Rows of a chunk: the fp32 sums of INT16_RC rows x INT16_PB panels (24 KiB)
 * stay in an L1-resident buffer across all groups and reach y once. Added
 * into y per group instead, 8 rows of y ldy * 4 bytes apart fell in the
 * same few L1 sets (ldy a multiple of 1024 floats on every spark shape). */
#define INT16_RC 128u
#define INT16_ACC_ROW (INT16_PB * AW_PANEL) /* floats per row of the buffer */

/* rows [r0, r0 + R) of the chunk x panels [p0, p0 + P) for weight group q of
 * block g, added into acc (row r at acc + r * INT16_ACC_ROW; set by the
 * first group of block 0) */
static void int16_tile(const aw_job *j, const int16_t *wexp, uint32_t g, unsigned q, size_t r0,
                       unsigned R, unsigned P, const __m512 *sc, const __m512 *sz, float *acc)
{
    _Alignas(64) __m512i out[INT16_RB * INT16_PB];
    const aw_packed *w = j->w;
    const unsigned npr = AW_GROUP / 2u / w->sub; /* input pairs per weight group */
    const int8_t *xa =
        (const int8_t *)j->act + r0 * j->act_row_bytes + (size_t)g * j->act_group_bytes;
    int16_kerns[R - 1u][P - 1u](wexp, xa, j->act_row_bytes, q * npr, (q + 1u) * npr, out);
    AW_UNROLL
    for (unsigned r = 0; r < R; r++) {
        size_t gi = (r0 + r) * w->groups + g;
        __m512 f = _mm512_set1_ps(j->gscale[gi]), gs = _mm512_set1_ps(j->gsum[gi * w->sub + q]);
        float *ar = acc + r * INT16_ACC_ROW;
        AW_UNROLL
        for (unsigned p = 0; p < P; p++) {
            __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(out[r * P + p]), _mm512_mul_ps(sc[p], f));
            v = _mm512_fnmadd_ps(sz[p], gs, v);
            if (g != 0u || q != 0u)
                v = _mm512_add_ps(v, _mm512_load_ps(ar + p * AW_PANEL));
            _mm512_store_ps(ar + p * AW_PANEL, v);
        }
    }
}

static void int16_prefill_block(const aw_job *j, size_t p0, unsigned P, int16_t *wexp)
{
    const aw_packed *w = j->w;
    _Alignas(64) float acc[INT16_RC * INT16_ACC_ROW];
    P = P < INT16_PB ? P : INT16_PB; /* no-op; tells the unrolled loops below their bound */
    for (size_t c0 = 0; c0 < j->m; c0 += INT16_RC) {
        const size_t c1 = j->m - c0 < INT16_RC ? j->m : c0 + INT16_RC;
        __mmask16 mask[INT16_PB] = {0};
        for (uint32_t g = 0; g < w->groups; g++) {
            aw_expand_pairs(w, p0, P, g, (uint16_t *)wexp, 0);
            for (unsigned q = 0; q < w->sub; q++) { /* each weight group of the block */
                __m512 sc[INT16_PB] = {0}, sz[INT16_PB] = {0};
                aw_block_meta(w, p0, P, g, q, sc, sz, mask);
                size_t r0 = c0;
                for (; r0 + INT16_RB <= c1; r0 += INT16_RB)
                    int16_tile(j, wexp, g, q, r0, INT16_RB, P, sc, sz,
                               acc + (r0 - c0) * INT16_ACC_ROW);
                if (r0 < c1)
                    int16_tile(j, wexp, g, q, r0, (unsigned)(c1 - r0), P, sc, sz,
                               acc + (r0 - c0) * INT16_ACC_ROW);
            }
        }
        aw_acc_to_y(j, p0, P, c0, c1, mask, acc, INT16_ACC_ROW);
    }
}

void aw_int16_gemm(void *arg, size_t begin, size_t end, unsigned worker)
{
    const aw_job *j = arg;
    const aw_packed *w = j->w;
    (void)worker;
    if (j->m <= AW_DECODE_MAX_M) {
        const int near = j->pf_near; /* PK_BY_PF: one instantiation per mode */
        if (j->m == 1 && j->streams == 2) {
            PK_BY_PF(j->pf_streams, int16_decode_range, j, begin, end, 2);
            return;
        }
        if (j->m == 1 && j->streams == 4) {
            PK_BY_PF(j->pf_streams, int16_decode_range, j, begin, end, 4);
            return;
        }
        for (size_t p = begin; p < end; p++) {
            switch (j->m) {
            case 1: PK_BY_PF(near, int16_decode_panel, j, p, 1); break;
            case 2: PK_BY_PF(near, int16_decode_panel, j, p, 2); break;
            case 3: PK_BY_PF(near, int16_decode_panel, j, p, 3); break;
            default: PK_BY_PF(near, int16_decode_panel, j, p, 4); break;
            }
        }
        return;
    }
    _Alignas(64) int16_t wexp[AW_GROUP * INT16_PB * AW_PANEL]; /* 12 KiB, per chunk */
    for (size_t b = begin; b < end; b++) {
        size_t p0 = b * INT16_PB;
        unsigned P = w->panels - p0 < INT16_PB ? (unsigned)(w->panels - p0) : INT16_PB;
        int16_prefill_block(j, p0, P, wexp);
    }
}
