/*
 * examples/vendor-plugin/a2_kern_vnni.c — path "avxvnni": the same integers
 * as path avx2 (a2_kern_avx2.c, whose prep this path shares), accumulated
 * straight into int32 by AVX-VNNI on ymm. Compiled with -mavx2 -mfma
 * -mavxvnni (the test-only build: -mavx512vnni -mavx512vl, A2_VNNI_EVEX).
 *
 * Decode (m <= 4): vpdpbusd of the unsigned nibbles (v & 0x0F0F0F0F,
 * (v >> 4) & ..) with the signed int8 halves hi, lo of the activations,
 * four int32 accumulators per row (two per half, so the chains of dependent
 * vpdpbusd are 16 long, not 32); acc = 128 (hA + hB) + lA + lB.
 *
 * Prefill (m > 4): vpdpwssd on int16 pairs (a2_prefill.h), 6 rows x 2
 * panels = 12 accumulators: enough independent chains to cover the
 * instruction's latency, and with 2 weight registers and one broadcast 15
 * of the 16 ymm registers.
 */
#include "a2_kern.h"

/* acc += u8 a . s8 b (vpdpbusd), acc += int16 pairs a . b (vpdpwssd), in
 * place. Inline assembly: GCC 12's intrinsics copy every integer accumulator
 * through another register each step (measured 3x slower in the AVX-512
 * plugin). The VEX form needs the {vex} prefix (the mnemonic is shared with
 * AVX512_VNNI) and registers ymm0-15 ("x"); the test build uses the EVEX
 * form of the same instruction. */
#ifdef A2_VNNI_EVEX
#define A2_VNNI_ENC "%{evex%} "
#define A2_VREG "v"
#else
#define A2_VNNI_ENC "%{vex%} "
#define A2_VREG "x"
#endif
#define A2_DPBUSD(acc, a, b)                                                                   \
    __asm__(A2_VNNI_ENC "vpdpbusd %2, %1, %0" : "+" A2_VREG(acc) : A2_VREG(a), A2_VREG(b))
#define A2_DPWSSD(acc, a, b)                                                                   \
    __asm__(A2_VNNI_ENC "vpdpwssd %2, %1, %0" : "+" A2_VREG(acc) : A2_VREG(a), A2_VREG(b))

/* ---- decode ---------------------------------------------------------------------- */

/* Rows [r0, r0 + R) x halves [h0, h0 + H) of panel p, R * H <= 2 (four
 * int32 and one fp32 accumulator per output half-row). */
A2_INLINE void a2_vnni_decode_tile(const a2_job *j, size_t p, unsigned h0, size_t r0,
                                   const unsigned R, const unsigned H)
{
    const a2_packed *w = j->w;
    const uint8_t *blk = a2_block(w, p, 0) + 32u * h0;
    const __m256i nib = _mm256_set1_epi8(0x0F);
    __m256 yacc[2][2];
    A2_UNROLL
    for (unsigned r = 0; r < R; r++)
        A2_UNROLL
        for (unsigned h = 0; h < H; h++)
            yacc[r][h] = _mm256_setzero_ps();
    for (uint32_t g = 0; g < w->groups; g++, blk += A2_BLOCK_BYTES) {
        __m256i hA[2][2], hB[2][2], lA[2][2], lB[2][2];
        const int8_t *xa[2];
        A2_UNROLL
        for (unsigned r = 0; r < R; r++) {
            xa[r] = j->act + (r0 + r) * j->act_row_bytes + (size_t)g * A2_ACT_GROUP_BYTES;
            A2_UNROLL
            for (unsigned h = 0; h < H; h++)
                hA[r][h] = hB[r][h] = lA[r][h] = lB[r][h] = _mm256_setzero_si256();
        }
        for (unsigned t = 0; t < A2_OCTETS; t++) {
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
                __m256i xq[4] = {a2_bcast(xt), a2_bcast(xt + 4), a2_bcast(xt + 128),
                                 a2_bcast(xt + 132)};
                A2_UNROLL
                for (unsigned h = 0; h < H; h++) {
                    A2_DPBUSD(hA[r][h], a[h], xq[0]);
                    A2_DPBUSD(hB[r][h], b[h], xq[1]);
                    A2_DPBUSD(lA[r][h], a[h], xq[2]);
                    A2_DPBUSD(lB[r][h], b[h], xq[3]);
                }
            }
        }
        a2_prefetch(blk + A2_CODE_BYTES);
        A2_UNROLL
        for (unsigned h = 0; h < H; h++) {
            __m256 sc, sz;
            a2_meta(blk + A2_CODE_BYTES + 32u * h, &sc, &sz);
            A2_UNROLL
            for (unsigned r = 0; r < R; r++) {
                __m256i acc = _mm256_add_epi32(
                    _mm256_slli_epi32(_mm256_add_epi32(hA[r][h], hB[r][h]), 7),
                    _mm256_add_epi32(lA[r][h], lB[r][h]));
                size_t gi = (r0 + r) * w->groups + g;
                __m256 f = _mm256_mul_ps(sc, _mm256_set1_ps(j->gscale[gi]));
                yacc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), f, yacc[r][h]);
                yacc[r][h] = _mm256_fnmadd_ps(sz, _mm256_set1_ps(j->gsum[gi]), yacc[r][h]);
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
 * of one half per pass. */
void a2_vnni_decode(void *arg, size_t begin, size_t end, unsigned worker)
{
    const a2_job *j = arg;
    (void)worker;
    for (size_t p = begin; p < end; p++) {
        const unsigned halves = a2_halves(j->w, p);
        if (j->m == 1u && halves == 2u) {
            a2_vnni_decode_tile(j, p, 0, 0, 1, 2);
            continue;
        }
        for (unsigned h = 0; h < halves; h++) {
            size_t r0 = 0;
            for (; r0 + 2u <= j->m; r0 += 2u)
                a2_vnni_decode_tile(j, p, h, r0, 2, 1);
            if (r0 < j->m)
                a2_vnni_decode_tile(j, p, h, r0, 1, 1);
        }
    }
}

/* ---- prefill --------------------------------------------------------------------- */

#define A2P_FN(name) a2_vnni_##name
#define A2P_RB 6u
#define A2P_DOT(acc, w, x) A2_DPWSSD(acc, w, x)
#include "a2_prefill.h"

void a2_vnni_prefill(void *arg, size_t begin, size_t end, unsigned worker)
{
    a2_vnni_prefill_panels(arg, begin, end, worker);
}
