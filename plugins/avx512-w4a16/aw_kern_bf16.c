/*
 * plugins/avx512-w4a16/aw_kern_bf16.c — path "bf16": activations rounded to
 * bf16 (round to nearest even), vdpbf16ps with fp32 accumulation. Compiled
 * with -mavx512f -mavx512bw -mavx512vl -mavx512bf16.
 *
 * Codes become bf16 pairs through vpermw on the shifted code dword: word 0
 * of dword lane j after >> 4s holds nibble s (input 2s) in its low bits,
 * word 1 nibble 4 + s (input 2s + 1); vpermw reads the low 5 bits of each
 * word, and the 32-entry table maps i -> bf16(i & 15), so no mask is needed.
 * Codes 0..15 are exact in bf16, and so is every product with a bf16
 * activation, so the only rounding beyond the activations' own is fp32
 * accumulation. Per (column, group): y += s * (sum xb q - z * sum xb).
 */
#include "aw_kern.h"

AW_INLINE __m512bh aw_as_bh(__m512i v)
{
    return (__m512bh)v;
}

/* ---- prep: x -> bf16, per (row, group) sum of the rounded values --------------- */

void aw_bf16_prep(void *arg, size_t begin, size_t end, unsigned worker)
{
    const aw_job *j = arg;
    const uint32_t groups = j->w->groups;
    (void)worker;
    for (size_t i = begin; i < end; i++) {
        const float *x = j->x + i * j->ldx;
        uint8_t *row = (uint8_t *)j->act + i * j->act_row_bytes;
        for (uint32_t g = 0; g < groups; g++) {
            uint16_t *xg = (uint16_t *)(void *)(row + (size_t)g * j->act_group_bytes);
            const uint32_t gsz = j->w->group;
            float *gsum = &j->gsum[(i * groups + g) * j->w->sub];
            __m512 sum = _mm512_setzero_ps();
            for (unsigned c = 0; c < AW_GROUP; c += 16) {
                size_t kk = (size_t)g * AW_GROUP + c;
                __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + kk));
                __m256i hi = (__m256i)h;
                _mm256_storeu_si256((__m256i *)(void *)(xg + c), hi);
                /* back to fp32: the exact value the kernel multiplies */
                sum = _mm512_add_ps(sum, _mm512_castsi512_ps(
                                             _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16)));
                if ((c + 16u) % gsz == 0u) { /* a weight group's end: its sum */
                    gsum[c / gsz] = _mm512_reduce_add_ps(sum);
                    sum = _mm512_setzero_ps();
                }
            }
        }
    }
}

/* dword of bf16 pair (k, k+1) of row r, broadcast */
AW_INLINE __m512bh bf16_pair(const uint16_t *xb, size_t k)
{
    int32_t d;
    memcpy(&d, xb + k, sizeof d);
    return aw_as_bh(_mm512_set1_epi32(d));
}

/* ---- decode ---------------------------------------------------------------------- */

AW_INLINE void bf16_decode_panel(const aw_job *j, size_t p, const unsigned R, const int near)
{
    const aw_packed *w = j->w;
    const uint8_t *blk = aw_data(w) + p * w->panel_bytes;
    const __m512i qtab = aw_bf16_qtab();
    const unsigned NC = R == 1u ? 4u : R == 2u ? 2u : 1u; /* chains per row */
    const uint16_t *xr[4];
    __m512 yacc[4];

    AW_UNROLL
    for (unsigned r = 0; r < R; r++) {
        xr[r] = (const uint16_t *)((const uint8_t *)j->act + r * j->act_row_bytes);
        yacc[r] = _mm512_setzero_ps();
    }
    const unsigned T = AW_OCTETS / w->sub; /* octets per weight group */
    for (uint32_t g = 0; g < w->groups; g++, blk += w->block_bytes) {
        const size_t k0 = (size_t)g * AW_GROUP;
        for (unsigned gq = 0; gq < w->sub; gq++) { /* each weight group of the block */
            __m512 acc[4][4];
            AW_UNROLL
            for (unsigned r = 0; r < R; r++)
                AW_UNROLL
                for (unsigned c = 0; c < NC; c++)
                    acc[r][c] = _mm512_setzero_ps();
            for (unsigned t = gq * T; t < (gq + 1u) * T; t++) {
                aw_prefetch(blk + 64u * t, near);
                __m512i v = _mm512_load_si512((const void *)(blk + 64u * t));
                AW_UNROLL
                for (unsigned s = 0; s < 4u; s++) {
                    __m512bh q =
                        aw_as_bh(_mm512_permutexvar_epi16(_mm512_srli_epi32(v, 4u * s), qtab));
                    AW_UNROLL
                    for (unsigned r = 0; r < R; r++)
                        acc[r][s % NC] = _mm512_dpbf16_ps(acc[r][s % NC], q,
                                                          bf16_pair(xr[r], k0 + 8u * t + 2u * s));
                }
            }
            const uint8_t *meta = blk + AW_CODE_BYTES + (size_t)gq * AW_META_BYTES;
            aw_prefetch(meta, near);
            __m512 sc, sz;
            aw_meta(meta, &sc, &sz);
            AW_UNROLL
            for (unsigned r = 0; r < R; r++) {
                __m512 a = acc[r][0];
                for (unsigned c = 1; c < NC; c++)
                    a = _mm512_add_ps(a, acc[r][c]);
                yacc[r] = _mm512_fmadd_ps(a, sc, yacc[r]);
                yacc[r] = _mm512_fnmadd_ps(
                    sz, _mm512_set1_ps(j->gsum[((size_t)r * w->groups + g) * w->sub + gq]),
                    yacc[r]);
            }
        }
    }
    __mmask16 mask = aw_panel_mask(w, p);
    AW_UNROLL
    for (unsigned r = 0; r < R; r++)
        _mm512_mask_storeu_ps(j->y + r * j->ldy + p * AW_PANEL, mask, yacc[r]);
}

/* ---- prefill ------------------------------------------------------------------------ */

#define BF16_RB 8u
#define BF16_PB AW_PREFILL_PB
/* Rows of a chunk: as in the int16 prefill (aw_kern_int16.c), the fp32 sums
 * of BF16_RC rows x BF16_PB panels stay in an L1-resident buffer across the
 * groups and reach y once, and the activations are group-major. */
#define BF16_RC 128u
#define BF16_ACC_ROW (BF16_PB * AW_PANEL)

/* rows [r0, r0 + R) x panels [p0, p0 + P) for group g, added into acc (row r
 * at acc + r * BF16_ACC_ROW; set by group 0) */
AW_INLINE void bf16_tile(const aw_job *j, const uint16_t *wexp, uint32_t g, unsigned gq,
                         size_t r0, const unsigned R, const unsigned P, const __m512 *sc,
                         const __m512 *sz, float *abuf)
{
    const unsigned npr = AW_GROUP / 2u / j->w->sub; /* input pairs per weight group */
    __m512 acc[BF16_RB][BF16_PB];
    const uint16_t *xr[BF16_RB];
    const uint8_t *a0 = (const uint8_t *)j->act + (size_t)g * j->act_group_bytes;
    AW_UNROLL
    for (unsigned r = 0; r < R; r++) {
        xr[r] = (const uint16_t *)(const void *)(a0 + (r0 + r) * j->act_row_bytes);
        AW_UNROLL
        for (unsigned p = 0; p < P; p++)
            acc[r][p] = _mm512_setzero_ps();
    }
    for (unsigned pr = gq * npr; pr < (gq + 1u) * npr; pr++) {
        /* the next tile's rows into L1, as int16_kern does (bench prefill
         * path=bf16 on the Xeon with AMX, 4 rounds: 212 -> 224 GFLOP/s) */
        _mm_prefetch((const char *)(a0 + (r0 + R) * j->act_row_bytes) + 32u * pr, _MM_HINT_T0);
        __m512bh wv[BF16_PB];
        AW_UNROLL
        for (unsigned p = 0; p < P; p++)
            wv[p] = aw_as_bh(_mm512_load_si512((const void *)(wexp + ((size_t)pr * P + p) * 32u)));
        AW_UNROLL
        for (unsigned r = 0; r < R; r++) {
            __m512bh xb = bf16_pair(xr[r], 2u * pr);
            AW_UNROLL
            for (unsigned p = 0; p < P; p++)
                acc[r][p] = _mm512_dpbf16_ps(acc[r][p], wv[p], xb);
        }
    }
    AW_UNROLL
    for (unsigned r = 0; r < R; r++) {
        __m512 gs = _mm512_set1_ps(j->gsum[((r0 + r) * j->w->groups + g) * j->w->sub + gq]);
        float *ar = abuf + r * BF16_ACC_ROW;
        AW_UNROLL
        for (unsigned p = 0; p < P; p++) {
            __m512 v = _mm512_fnmadd_ps(sz[p], gs, _mm512_mul_ps(acc[r][p], sc[p]));
            if (g != 0u || gq != 0u)
                v = _mm512_add_ps(v, _mm512_load_ps(ar + p * AW_PANEL));
            _mm512_store_ps(ar + p * AW_PANEL, v);
        }
    }
}

/* rows [c0, c1) of a chunk for weight group gq of block g */
AW_INLINE void bf16_rows(const aw_job *j, const uint16_t *wexp, uint32_t g, unsigned gq,
                         size_t c0, size_t c1, const unsigned P, const __m512 *sc,
                         const __m512 *sz, float *abuf)
{
    size_t r0 = c0;
    for (; r0 + BF16_RB <= c1; r0 += BF16_RB)
        bf16_tile(j, wexp, g, gq, r0, BF16_RB, P, sc, sz, abuf + (r0 - c0) * BF16_ACC_ROW);
    float *ar = abuf + (r0 - c0) * BF16_ACC_ROW;
    switch (c1 - r0) {
#define BF16_CASE(R) case R: bf16_tile(j, wexp, g, gq, r0, R, P, sc, sz, ar); break;
        BF16_CASE(1) BF16_CASE(2) BF16_CASE(3) BF16_CASE(4) BF16_CASE(5) BF16_CASE(6) BF16_CASE(7)
#undef BF16_CASE
    default: break;
    }
}

static void bf16_prefill_block(const aw_job *j, size_t p0, unsigned P, uint16_t *wexp)
{
    const aw_packed *w = j->w;
    _Alignas(64) float abuf[BF16_RC * BF16_ACC_ROW];
    for (size_t c0 = 0; c0 < j->m; c0 += BF16_RC) {
        const size_t c1 = j->m - c0 < BF16_RC ? j->m : c0 + BF16_RC;
        __mmask16 mask[BF16_PB] = {0};
        for (uint32_t g = 0; g < w->groups; g++) {
            aw_expand_pairs(w, p0, P, g, wexp, 1);
            for (unsigned gq = 0; gq < w->sub; gq++) { /* each weight group of the block */
                __m512 sc[BF16_PB] = {0}, sz[BF16_PB] = {0};
                aw_block_meta(w, p0, P, g, gq, sc, sz, mask);
                switch (P) {
                case 3: bf16_rows(j, wexp, g, gq, c0, c1, 3, sc, sz, abuf); break;
                case 2: bf16_rows(j, wexp, g, gq, c0, c1, 2, sc, sz, abuf); break;
                default: bf16_rows(j, wexp, g, gq, c0, c1, 1, sc, sz, abuf); break;
                }
            }
        }
        aw_acc_to_y(j, p0, P, c0, c1, mask, abuf, BF16_ACC_ROW);
    }
}

void aw_bf16_gemm(void *arg, size_t begin, size_t end, unsigned worker)
{
    const aw_job *j = arg;
    const aw_packed *w = j->w;
    (void)worker;
    if (j->m <= AW_DECODE_MAX_M) {
        const int near = j->pf_near; /* PK_BY_PF: one instantiation per mode */
        for (size_t p = begin; p < end; p++) {
            switch (j->m) {
            case 1: PK_BY_PF(near, bf16_decode_panel, j, p, 1); break;
            case 2: PK_BY_PF(near, bf16_decode_panel, j, p, 2); break;
            case 3: PK_BY_PF(near, bf16_decode_panel, j, p, 3); break;
            default: PK_BY_PF(near, bf16_decode_panel, j, p, 4); break;
            }
        }
        return;
    }
    _Alignas(64) uint16_t wexp[AW_GROUP * BF16_PB * AW_PANEL]; /* 12 KiB, per chunk */
    for (size_t b = begin; b < end; b++) {
        size_t p0 = b * BF16_PB;
        unsigned P = w->panels - p0 < BF16_PB ? (unsigned)(w->panels - p0) : BF16_PB;
        bf16_prefill_block(j, p0, P, wexp);
    }
}
