/*
 * plugins/amx-w4a8/a8_kern_vnni.c — activation quantization (both paths),
 * the VNNI GEMV (decode, both paths) and the VNNI prefill (path vnni).
 * Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni.
 *
 * Arithmetic (a8_internal.h): per (token, column, group) an exact int32
 * d = sum a q - z sum a from vpdpbusd (unsigned weight codes 0..15 times
 * signed activation codes -127..127; |partial sums| < 2^18, no overflow);
 * then fp32: y = fma(d, s_w s_g, y) per group, times s_x per token (s_g the
 * group's activation scale, 1 in mode token; s_x 1 in mode group).
 *
 * Decode: per panel the codes are streamed once (software prefetch) for up
 * to A8_DECODE_RB tokens, 64 bytes = 16 columns x 8 inputs per load feeding
 * 2 vpdpbusd per token, spread over 4 accumulator chains per token (the
 * chain's latency would otherwise bound a single token to 16 bytes a cycle).
 * For fewer than A8_DECODE_RB tokens the loop over a group's 16 octets
 * turns two at a time and is not unrolled further: fully unrolled (as
 * before) the step ran 2-4% slower from DRAM on the 2-core Xeon, with the
 * same instructions (avx512-w4a8, m = 1, 6 alternating rounds, this build
 * faster in each: 26.35-27.30 -> 26.03-26.45 ms per step). avx512-w4a16's
 * int16 GEMV, whose loop is rolled, was slower unrolled too. At A8_DECODE_RB
 * tokens it stays fully unrolled. Either way the step moves by a few
 * percent with code placement alone (the same loop, other functions added
 * to the file): compare whole builds, interleaved, before keeping a change.
 * Per line: two ANDs (v & 0x0F, and v & 0xF0 = 16 x the high codes, whose
 * chains 1 and 3 then hold 16 x their sums, < 2^22, divided exactly per
 * group; GCC reads the line from L1 into each), no shift; each token's
 * activation pointer is set once per group (GCC 12 had reloaded
 * act_group_bytes and multiplied per octet).
 * A test build of this loop with its loads and prefetches but no arithmetic
 * ran 3% faster from DRAM than the kernel did, so the kernel's instructions
 * cost here, unlike avx512-w4a16's (whose no-arithmetic build was no
 * faster). These two changes recover about a third of it: avx512-w4a8,
 * m = 1, 7 alternating rounds on the Xeon with AMX, 0.898 -> 0.908 of the
 * read ceiling median, faster in each round; the same in an L3-resident
 * workload (compute-bound there: 58.0-58.5 GB/s both).
 *
 * Prefill: per parallel_for item of A8_PREFILL_PB panels and per group, the
 * codes are expanded once into the vpdpbusd operand order (a8_expand, 6 KiB,
 * L1-resident) and a register tile of 8 tokens x 3 panels (24 int32
 * accumulators) runs over every block of 8 tokens: per 4-input step 3
 * loads, 8 broadcasts, 24 vpdpbusd. vpdpbusd does 64 multiply-adds per
 * instruction, twice avx512-w4a16's vpdpwssd, on a quarter of the bytes.
 */
#include "a8_kern.h"

/* ---- activations -------------------------------------------------------------------- */

/* The largest |x| of one group of 128 (a8_prep's group mode). */
A8_INLINE float group_max(const float *x)
{
    __m512 mx = _mm512_setzero_ps();
    A8_UNROLL
    for (uint32_t c = 0; c < A8_GROUP; c += 16u)
        mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_loadu_ps(x + c)));
    return _mm512_reduce_max_ps(mx);
}

void a8_prep(void *arg, size_t begin, size_t end, unsigned worker)
{
    const a8_job *j = arg;
    const uint32_t k = j->w->k, groups = j->w->groups;
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    (void)worker;

    for (size_t i = begin; i < end; i++) {
        const float *x = j->x + i * j->ldx;
        int8_t *a = j->act + i * j->act_row_bytes; /* group 0; group g act_group_bytes on */
        const size_t gb = j->act_group_bytes;
        int32_t *asum8 = j->asum8 + i * groups;
        float *sg = j->sg + i * groups;
        __m512 mx = _mm512_setzero_ps();
        __mmask16 bad = 0;
        for (uint32_t c = 0; c < k; c += 16u) {
            __m512 v = _mm512_abs_ps(_mm512_loadu_ps(x + c));
            mx = _mm512_max_ps(mx, v);
            /* max_ps drops a NaN; find NaN and infinities explicitly */
            bad |= _mm512_cmp_ps_mask(v, _mm512_set1_ps(INFINITY), _CMP_NLT_UQ);
        }
        const float m = _mm512_reduce_max_ps(mx);
        if (bad != 0 || m == 0.0f) {
            a8_prep_zero_row(j, i, bad != 0);
            continue;
        }
        for (uint32_t g = 0; g < groups; g++) {
            const float mg = j->act_group ? group_max(x + g * A8_GROUP) : m;
            if (mg == 0.0f) { /* a group of zeros: codes 0, scale 0 */
                a8_prep_zero_group(j, i, g);
                continue;
            }
            const __m512 inv = _mm512_set1_ps(127.0f / mg);
            __m512i sum = _mm512_setzero_si512();
            for (uint32_t c = g * A8_GROUP; c < (g + 1u) * A8_GROUP; c += 16u) {
                __m512i q = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + c), inv),
                                                     _MM_FROUND_TO_NEAREST_INT |
                                                         _MM_FROUND_NO_EXC);
                q = _mm512_min_epi32(_mm512_max_epi32(q, lo), hi);
                sum = _mm512_add_epi32(sum, q);
                _mm_storeu_si128((__m128i *)(void *)(a + g * gb + (c - g * A8_GROUP)),
                                 _mm512_cvtepi32_epi8(q));
            }
            asum8[g] = 8 * _mm512_reduce_add_epi32(sum);
            sg[g] = j->act_group ? mg / 127.0f : 1.0f;
        }
        j->sx[i] = j->act_group ? 1.0f : m / 127.0f;
    }
}

/* ---- decode --------------------------------------------------------------------------- */

/* one 64-byte line of codes (octet T of group g) for R tokens, into chains
 * C and C + 1 of each: a macro over decode_panel's locals (as a function
 * taking the accumulators by pointer, GCC 12 copied them through other
 * registers every step) */
#define A8_DECODE_OCTET(T, C)                                                                 \
    do {                                                                                      \
        a8_prefetch(blk + 64u * (T), near);                                                   \
        __m512i v_ = _mm512_load_si512((const void *)(blk + 64u * (T)));                      \
        __m512i lo_ = _mm512_and_si512(v_, nib);                                              \
        __m512i hi_ = _mm512_and_si512(v_, nib_hi); /* 16 x the codes */                      \
        A8_UNROLL                                                                             \
        for (unsigned r = 0; r < R; r++) {                                                    \
            A8_DPBUSD(acc[r][C], lo_, a8_bcast4(xg[r] + 8u * (T)));                           \
            A8_DPBUSD(acc[r][(C) + 1u], hi_, a8_bcast4(xg[r] + 8u * (T) + 4u));               \
        }                                                                                     \
    } while (0)

A8_INLINE void decode_panel(const a8_job *j, size_t p, size_t r0, const unsigned R,
                             const int near)
{
    const a8_packed *w = j->w;
    const __m512i nib = _mm512_set1_epi8(0x0F), nib_hi = _mm512_set1_epi8((char)0xF0);
    const size_t gb = j->act_group_bytes;
    __m512 yacc[A8_DECODE_RB];
    const int8_t *xa[A8_DECODE_RB];

    A8_UNROLL
    for (unsigned r = 0; r < R; r++) {
        yacc[r] = _mm512_setzero_ps();
        xa[r] = j->act + (r0 + r) * j->act_row_bytes;
    }
    for (uint32_t g = 0; g < w->groups; g++) {
        const uint8_t *blk = a8_codes(w, p, g);
        __m512i acc[A8_DECODE_RB][4];
        const int8_t *xg[A8_DECODE_RB]; /* the group's activations per token */
        A8_UNROLL
        for (unsigned r = 0; r < R; r++) {
            acc[r][0] = acc[r][1] = acc[r][2] = acc[r][3] = _mm512_setzero_si512();
            xg[r] = xa[r] + (size_t)g * gb;
        }
        /* octet t into chains 2 (t & 1) and 2 (t & 1) + 1. Below A8_DECODE_RB
         * tokens two octets a turn, not unrolled further; at A8_DECODE_RB
         * fully unrolled, which keeps its 16 chains in registers (turning
         * two at a time, GCC 12 spilled 6 zmm per turn there): see the top
         * of the file */
        if (R < A8_DECODE_RB) {
            _Pragma("GCC unroll 1")
            for (unsigned t = 0; t < A8_OCTETS; t += 2u) {
                A8_DECODE_OCTET(t, 0u);
                A8_DECODE_OCTET(t + 1u, 2u);
            }
        } else {
            A8_UNROLL
            for (unsigned t = 0; t < A8_OCTETS; t++)
                A8_DECODE_OCTET(t, 2u * (t & 1u));
        }
        /* the pair's scale line follows its codes. An asymmetric quad's zero
         * line needs no prefetch of its own: at each distance (512 B, 4, 6
         * and 8 KiB) the line that far before it is a code line, whose
         * prefetch brings it (a8_internal.h's offsets) */
        if (g & 1u || g + 1u == w->groups)
            a8_prefetch(blk + A8_CODE_BYTES, near);
        const __m512 sw = a8_scales(w, p, g);
        const __m512 zf = a8_zeros_f(w, p, g);
        A8_UNROLL
        for (unsigned r = 0; r < R; r++) {
            /* chains 1 and 3 hold 16 x their sums: 16 sum, exact, then >> 4 */
            const __m512i sum = _mm512_srai_epi32(
                _mm512_add_epi32(_mm512_slli_epi32(_mm512_add_epi32(acc[r][0], acc[r][2]), 4),
                                 _mm512_add_epi32(acc[r][1], acc[r][3])),
                4);
            const size_t rg = (r0 + r) * w->groups + g;
            yacc[r] = _mm512_fmadd_ps(a8_d(w->asym, sum, zf, j->asum8[rg]),
                                      _mm512_mul_ps(sw, _mm512_set1_ps(j->sg[rg])), yacc[r]);
        }
    }
    const __mmask16 mask = a8_panel_mask(w, p);
    A8_UNROLL
    for (unsigned r = 0; r < R; r++)
        _mm512_mask_storeu_ps(j->y + (r0 + r) * j->ldy + p * A8_PANEL, mask,
                              _mm512_mul_ps(yacc[r], _mm512_set1_ps(j->sx[r0 + r])));
}
#undef A8_DECODE_OCTET

/* m = 1 over S panels side by side, each from its own part of the call's
 * range (decode_panel's arithmetic, bit for bit): S streams of codes in
 * flight per core, one set of activation broadcasts for all S. */
A8_INLINE void decode_streams(const a8_job *j, const size_t *pp, const unsigned S,
                              const int near)
{
    const a8_packed *w = j->w;
    const __m512i nib = _mm512_set1_epi8(0x0F), nib_hi = _mm512_set1_epi8((char)0xF0);
    __m512 yacc[4];
    A8_UNROLL
    for (unsigned s = 0; s < S; s++)
        yacc[s] = _mm512_setzero_ps();
    for (uint32_t g = 0; g < w->groups; g++) {
        const int8_t *xg = j->act + (size_t)g * j->act_group_bytes;
        const uint8_t *blk[4];
        __m512i acc[4][4];
        A8_UNROLL
        for (unsigned s = 0; s < S; s++) {
            blk[s] = a8_codes(w, pp[s], g);
            acc[s][0] = acc[s][1] = acc[s][2] = acc[s][3] = _mm512_setzero_si512();
        }
        _Pragma("GCC unroll 1")
        for (unsigned t = 0; t < A8_OCTETS; t += 2u) {
            const __m512i x0 = a8_bcast4(xg + 8u * t), x1 = a8_bcast4(xg + 8u * t + 4u);
            const __m512i x2 = a8_bcast4(xg + 8u * t + 8u), x3 = a8_bcast4(xg + 8u * t + 12u);
            A8_UNROLL
            for (unsigned s = 0; s < S; s++) {
                a8_prefetch(blk[s] + 64u * t, near);
                a8_prefetch(blk[s] + 64u * t + 64u, near);
                __m512i v0 = _mm512_load_si512((const void *)(blk[s] + 64u * t));
                __m512i v1 = _mm512_load_si512((const void *)(blk[s] + 64u * t + 64u));
                A8_DPBUSD(acc[s][0], _mm512_and_si512(v0, nib), x0);
                A8_DPBUSD(acc[s][1], _mm512_and_si512(v0, nib_hi), x1);
                A8_DPBUSD(acc[s][2], _mm512_and_si512(v1, nib), x2);
                A8_DPBUSD(acc[s][3], _mm512_and_si512(v1, nib_hi), x3);
            }
        }
        A8_UNROLL
        for (unsigned s = 0; s < S; s++) {
            if (g & 1u || g + 1u == w->groups) /* the pair's scale line follows its codes */
                a8_prefetch(blk[s] + A8_CODE_BYTES, near);
            const __m512 sw = a8_scales(w, pp[s], g);
            const __m512i sum = _mm512_srai_epi32(
                _mm512_add_epi32(_mm512_slli_epi32(_mm512_add_epi32(acc[s][0], acc[s][2]), 4),
                                 _mm512_add_epi32(acc[s][1], acc[s][3])),
                4);
            yacc[s] = _mm512_fmadd_ps(a8_d(w->asym, sum, a8_zeros_f(w, pp[s], g), j->asum8[g]),
                                      _mm512_mul_ps(sw, _mm512_set1_ps(j->sg[g])), yacc[s]);
        }
    }
    A8_UNROLL
    for (unsigned s = 0; s < S; s++)
        _mm512_mask_storeu_ps(j->y + pp[s] * A8_PANEL, a8_panel_mask(w, pp[s]),
                              _mm512_mul_ps(yacc[s], _mm512_set1_ps(j->sx[0])));
}

/* Panels [begin, end) at m = 1 as S streams: part s is [begin + s q, begin
 * + (s + 1) q), q = (end - begin) / S, read side by side; the rest (under S
 * panels of a chunk of 64 KiB or more) one by one, with the streams'
 * prefetch mode, as a chunk of fewer than S panels (small matrices only). */
A8_INLINE void decode_range(const a8_job *j, size_t begin, size_t end, const unsigned S,
                            const int near)
{
    size_t q = (end - begin) / S, pp[4];
    for (size_t i = 0; i < q; i++) {
        A8_UNROLL
        for (unsigned s = 0; s < S; s++)
            pp[s] = begin + s * q + i;
        decode_streams(j, pp, S, near);
    }
    for (size_t p = begin + S * q; p < end; p++)
        decode_panel(j, p, 0, 1, near);
}

void a8_vnni_decode(void *arg, size_t begin, size_t end, unsigned worker)
{
    const a8_job *j = arg;
    (void)worker;
    const int near = j->pf_near; /* PK_BY_PF: one instantiation per mode */
    if (j->m == 1 && j->streams == 2) {
        PK_BY_PF(j->pf_streams, decode_range, j, begin, end, 2);
        return;
    }
    if (j->m == 1 && j->streams == 4) {
        PK_BY_PF(j->pf_streams, decode_range, j, begin, end, 4);
        return;
    }
    for (size_t p = begin; p < end; p++) {
        size_t r0 = 0;
        for (; r0 + A8_DECODE_RB <= j->m; r0 += A8_DECODE_RB)
            PK_BY_PF(near, decode_panel, j, p, r0, A8_DECODE_RB);
        switch (j->m - r0) {
        case 1: PK_BY_PF(near, decode_panel, j, p, r0, 1); break;
        case 2: PK_BY_PF(near, decode_panel, j, p, r0, 2); break;
        case 3: PK_BY_PF(near, decode_panel, j, p, r0, 3); break;
        default: break;
        }
    }
}

/* ---- prefill --------------------------------------------------------------------------- */

#define PF_RB 8u /* 8 tokens x 3 panels = 24 int32 accumulators */
#define PF_PB A8_PREFILL_PB

/* The hot loop alone, in the shape GCC 12 keeps in registers (inlined into
 * the epilogue it spills): out[r * P + p] = sum over the group of
 * codes(p) . a(token r); tokens `rs` bytes apart. */
A8_INLINE void pf_kern(const uint8_t *wexp, const int8_t *xa, size_t rs, const unsigned R,
                       const unsigned P, __m512i *out)
{
    __m512i acc[PF_RB][PF_PB];
    A8_UNROLL
    for (unsigned r = 0; r < R; r++)
        A8_UNROLL
        for (unsigned p = 0; p < P; p++)
            acc[r][p] = _mm512_setzero_si512();
    for (unsigned s = 0; s < A8_STEPS; s++) {
        /* The next tile's tokens into L1 while this one computes (R tokens
         * on, group-major: 1 KiB at R = 8, 32 bytes per step), as
         * avx512-w4a16's int16 tile does. bench --backend avx512-w4a8
         * prefill on the Xeon with AMX, 4 interleaved rounds: 1079 -> 1122
         * GOP/s median. */
        _mm_prefetch((const char *)(xa + R * rs + 32u * s), _MM_HINT_T0);
        __m512i wv[PF_PB];
        A8_UNROLL
        for (unsigned p = 0; p < P; p++)
            wv[p] = _mm512_load_si512((const void *)(wexp + ((size_t)s * P + p) * 64u));
        A8_UNROLL
        for (unsigned r = 0; r < R; r++) {
            __m512i xb = a8_bcast4(xa + r * rs + 4u * s);
            A8_UNROLL
            for (unsigned p = 0; p < P; p++)
                A8_DPBUSD(acc[r][p], wv[p], xb);
        }
    }
    A8_UNROLL
    for (unsigned r = 0; r < R; r++)
        A8_UNROLL
        for (unsigned p = 0; p < P; p++)
            _mm512_store_si512((void *)&out[r * P + p], acc[r][p]);
}

#define PF_KERN_FN(R, P)                                                                     \
    static __attribute__((noinline)) void pf_kern_##R##_##P(const uint8_t *wexp,             \
                                                            const int8_t *xa, size_t rs,     \
                                                            __m512i *out)                    \
    {                                                                                        \
        pf_kern(wexp, xa, rs, R, P, out);                                                    \
    }
#define PF_KERN_ROW(R) PF_KERN_FN(R, 1) PF_KERN_FN(R, 2) PF_KERN_FN(R, 3)
PF_KERN_ROW(1) PF_KERN_ROW(2) PF_KERN_ROW(3) PF_KERN_ROW(4)
PF_KERN_ROW(5) PF_KERN_ROW(6) PF_KERN_ROW(7) PF_KERN_ROW(8)
#undef PF_KERN_ROW
#undef PF_KERN_FN

typedef void (*pf_kern_fn)(const uint8_t *, const int8_t *, size_t, __m512i *);
#define PF_KERN_ROW(R) {pf_kern_##R##_1, pf_kern_##R##_2, pf_kern_##R##_3}
static const pf_kern_fn pf_kerns[PF_RB][PF_PB] = {
    PF_KERN_ROW(1), PF_KERN_ROW(2), PF_KERN_ROW(3), PF_KERN_ROW(4),
    PF_KERN_ROW(5), PF_KERN_ROW(6), PF_KERN_ROW(7), PF_KERN_ROW(8),
};
#undef PF_KERN_ROW

/* Tokens of a chunk: the fp32 sums of PF_RC tokens x PF_PB panels (24 KiB)
 * stay in an L1-resident buffer across all groups and reach y once (added
 * into y per group, 8 rows of y ldy * 4 bytes apart fell in the same few L1
 * sets). The arithmetic is the GEMV's: acc = fma(d_g, s_w s_g, acc) per group
 * in group order from 0, then y = acc * s_x, so both kernels (and path
 * amx's tiles) give the same bits at every m. */
#define PF_RC 128u
#define PF_ACC_ROW (PF_PB * A8_PANEL)

/* tokens [r0, r0 + R) x panels [p0, p0 + P) for group g, fused into acc
 * (token r at acc + r * PF_ACC_ROW; started by group 0) */
static void pf_tile(const a8_job *j, const uint8_t *wexp, uint32_t g, size_t r0, unsigned R,
                    unsigned P, const __m512 *sw, const __m512 *zf, float *acc)
{
    _Alignas(64) __m512i out[PF_RB * PF_PB];
    const int8_t *xa = j->act + r0 * j->act_row_bytes + (size_t)g * j->act_group_bytes;
    pf_kerns[R - 1u][P - 1u](wexp, xa, j->act_row_bytes, out);
    for (unsigned r = 0; r < R; r++) {
        const size_t rg = (r0 + r) * j->w->groups + g;
        const __m512 sg = _mm512_set1_ps(j->sg[rg]);
        float *ar = acc + r * PF_ACC_ROW;
        for (unsigned p = 0; p < P; p++) {
            const __m512 d = a8_d(j->w->asym, out[r * P + p], zf[p], j->asum8[rg]);
            __m512 prev = g != 0u ? _mm512_load_ps(ar + p * A8_PANEL) : _mm512_setzero_ps();
            _mm512_store_ps(ar + p * A8_PANEL, _mm512_fmadd_ps(d, _mm512_mul_ps(sw[p], sg), prev));
        }
    }
}

/* panels [p0, p0 + P), tokens [c0, c1): every group, then y */
static void pf_chunk(const a8_job *j, size_t p0, unsigned P, size_t c0, size_t c1,
                     const __mmask16 *mask, uint8_t *wexp, float *acc)
{
    const a8_packed *w = j->w;
    for (uint32_t g = 0; g < w->groups; g++) {
        __m512 sw[PF_PB] = {0};
        __m512 zf[PF_PB] = {0};
        for (unsigned p = 0; p < P; p++) {
            sw[p] = a8_scales(w, p0 + p, g);
            zf[p] = a8_zeros_f(w, p0 + p, g);
        }
        a8_expand(w, p0, P, g, wexp);
        size_t r0 = c0;
        for (; r0 + PF_RB <= c1; r0 += PF_RB)
            pf_tile(j, wexp, g, r0, PF_RB, P, sw, zf, acc + (r0 - c0) * PF_ACC_ROW);
        if (r0 < c1)
            pf_tile(j, wexp, g, r0, (unsigned)(c1 - r0), P, sw, zf,
                    acc + (r0 - c0) * PF_ACC_ROW);
    }
    for (size_t r = c0; r < c1; r++) {
        const float *ar = acc + (r - c0) * PF_ACC_ROW;
        const __m512 sx = _mm512_set1_ps(j->sx[r]);
        for (unsigned p = 0; p < P; p++)
            _mm512_mask_storeu_ps(j->y + r * j->ldy + (p0 + p) * A8_PANEL, mask[p],
                                  _mm512_mul_ps(_mm512_load_ps(ar + p * A8_PANEL), sx));
    }
}

void a8_vnni_prefill(void *arg, size_t begin, size_t end, unsigned worker)
{
    const a8_job *j = arg;
    const a8_packed *w = j->w;
    _Alignas(64) uint8_t wexp[A8_STEPS * PF_PB * 64u]; /* 6 KiB, per chunk */
    _Alignas(64) float acc[PF_RC * PF_ACC_ROW];        /* 24 KiB */
    (void)worker;
    for (size_t b = begin; b < end; b++) {
        const size_t p0 = b * PF_PB;
        const unsigned P = w->panels - p0 < PF_PB ? (unsigned)(w->panels - p0) : PF_PB;
        __mmask16 mask[PF_PB] = {0};
        for (unsigned p = 0; p < P; p++)
            mask[p] = a8_panel_mask(w, p0 + p);
        for (size_t c0 = 0; c0 < j->m; c0 += PF_RC)
            pf_chunk(j, p0, P, c0, j->m - c0 < PF_RC ? j->m : c0 + PF_RC, mask, wexp, acc);
    }
}
