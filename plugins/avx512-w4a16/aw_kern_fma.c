/*
 * plugins/avx512-w4a16/aw_kern_fma.c — path "fma": AVX-512F only, fp32
 * activations, fp32 FMA. Compiled with -mavx512f -mavx512bw -mavx512vl
 * (CMakeLists.txt); runs on any AVX-512 CPU, with or without BF16/VNNI.
 *
 * Codes become fp32 through vpermps on the shifted code dword (vpermps reads
 * only the low 4 bits of each index lane, so no mask is needed): table[q] = q.
 * Per (column, group): y += s * (sum x q - z * sum x), sum x from prep.
 */
#include "aw_kern.h"

static const int aw_nib_k[8] = AW_NIB_K;

/* ---- prep: per (row, group) sum of x ---------------------------------------- */

void aw_fma_prep(void *arg, size_t begin, size_t end, unsigned worker)
{
    const aw_job *j = arg;
    const uint32_t groups = j->w->groups;
    (void)worker;
    for (size_t i = begin; i < end; i++) {
        const float *x = j->x + i * j->ldx;
        for (uint32_t g = 0; g < groups; g++) {
            const float *xg = x + (size_t)g * AW_GROUP;
            const uint32_t gsz = j->w->group; /* a multiple of 32 */
            for (uint32_t q = 0; q < j->w->sub; q++) { /* each weight group of the block */
                const float *xq = xg + (size_t)q * gsz;
                __m512 s0 = _mm512_loadu_ps(xq), s1 = _mm512_loadu_ps(xq + 16);
                for (unsigned c = 32; c < gsz; c += 32) {
                    s0 = _mm512_add_ps(s0, _mm512_loadu_ps(xq + c));
                    s1 = _mm512_add_ps(s1, _mm512_loadu_ps(xq + c + 16));
                }
                j->gsum[(i * groups + g) * j->w->sub + q] =
                    _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
            }
        }
    }
}

/* ---- decode: stream the codes, up to 4 rows of x ------------------------------ */

AW_INLINE void fma_decode_panel(const aw_job *j, size_t p, size_t r0, const unsigned R,
                                const int near)
{
    const aw_packed *w = j->w;
    const uint8_t *blk = aw_data(w) + p * w->panel_bytes;
    const __m512 qtab = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const unsigned NC = R == 1u ? 8u : R == 2u ? 4u : 2u; /* chains per row */
    const float *xr[4];
    __m512 yacc[4];

    AW_UNROLL
    for (unsigned r = 0; r < R; r++) {
        xr[r] = j->x + (r0 + r) * j->ldx;
        yacc[r] = _mm512_setzero_ps();
    }
    const unsigned T = AW_OCTETS / w->sub; /* octets per weight group */
    for (uint32_t g = 0; g < w->groups; g++, blk += w->block_bytes) {
        const size_t k0 = (size_t)g * AW_GROUP;
        for (unsigned q = 0; q < w->sub; q++) { /* each weight group of the block */
            __m512 acc[4][8];
            AW_UNROLL
            for (unsigned r = 0; r < R; r++)
                AW_UNROLL
                for (unsigned c = 0; c < NC; c++)
                    acc[r][c] = _mm512_setzero_ps();
            for (unsigned t = q * T; t < (q + 1u) * T; t++) {
                aw_prefetch(blk + 64u * t, near);
                __m512i v = _mm512_load_si512((const void *)(blk + 64u * t));
                AW_UNROLL
                for (unsigned i = 0; i < 8u; i++) {
                    __m512 qv = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4u * i), qtab);
                    size_t kk = k0 + 8u * t + (unsigned)aw_nib_k[i];
                    AW_UNROLL
                    for (unsigned r = 0; r < R; r++)
                        acc[r][i % NC] =
                            _mm512_fmadd_ps(qv, _mm512_set1_ps(xr[r][kk]), acc[r][i % NC]);
                }
            }
            const uint8_t *meta = blk + AW_CODE_BYTES + (size_t)q * AW_META_BYTES;
            aw_prefetch(meta, near);
            __m512 s, sz;
            aw_meta(meta, &s, &sz);
            AW_UNROLL
            for (unsigned r = 0; r < R; r++) {
                __m512 a = acc[r][0];
                for (unsigned c = 1; c < NC; c++)
                    a = _mm512_add_ps(a, acc[r][c]);
                yacc[r] = _mm512_fmadd_ps(a, s, yacc[r]);
                yacc[r] = _mm512_fnmadd_ps(
                    sz, _mm512_set1_ps(j->gsum[((r0 + r) * w->groups + g) * w->sub + q]), yacc[r]);
            }
        }
    }
    __mmask16 mask = aw_panel_mask(w, p);
    AW_UNROLL
    for (unsigned r = 0; r < R; r++)
        _mm512_mask_storeu_ps(j->y + (r0 + r) * j->ldy + p * AW_PANEL, mask, yacc[r]);
}

/* ---- prefill: expand a (panel block, group) to fp32 once, reuse per row ------- */

#define FMA_RB 8u /* rows per register tile */
#define FMA_PB AW_PREFILL_PB /* panels per register tile: 8 x 3 accumulators */

/* wexp[k][p][16]: code of input k, panel p of the block, as fp32 */
static void fma_expand(const aw_packed *w, size_t p0, unsigned P, uint32_t g, float *wexp)
{
    const __m512 qtab = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    AW_UNROLL
    for (unsigned p = 0; p < P; p++) {
        const uint8_t *codes = aw_data(w) + (p0 + p) * w->panel_bytes + (size_t)g * w->block_bytes;
        for (unsigned t = 0; t < AW_OCTETS; t++) {
            __m512i v = _mm512_load_si512((const void *)(codes + 64u * t));
            AW_UNROLL
            for (unsigned i = 0; i < 8u; i++) {
                unsigned kk = 8u * t + (unsigned)aw_nib_k[i];
                _mm512_store_ps(wexp + ((size_t)kk * P + p) * 16u,
                                _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4u * i), qtab));
            }
        }
    }
}

AW_INLINE void fma_tile(const aw_job *j, const float *wexp, size_t p0, uint32_t g, unsigned q,
                        size_t r0, const unsigned R, const unsigned P, const __m512 *s,
                        const __m512 *sz, const __mmask16 *mask)
{
    const unsigned gsz = j->w->group; /* inputs of weight group q: [q gsz, (q + 1) gsz) */
    __m512 acc[FMA_RB][FMA_PB];
    const float *xr[FMA_RB];
    const size_t k0 = (size_t)g * AW_GROUP;
    AW_UNROLL
    for (unsigned r = 0; r < R; r++) {
        xr[r] = j->x + (r0 + r) * j->ldx + k0;
        AW_UNROLL
        for (unsigned p = 0; p < P; p++)
            acc[r][p] = _mm512_setzero_ps();
    }
    for (unsigned kk = q * gsz; kk < (q + 1u) * gsz; kk++) {
        __m512 wv[FMA_PB];
        AW_UNROLL
        for (unsigned p = 0; p < P; p++)
            wv[p] = _mm512_load_ps(wexp + ((size_t)kk * P + p) * 16u);
        AW_UNROLL
        for (unsigned r = 0; r < R; r++) {
            __m512 xb = _mm512_set1_ps(xr[r][kk]);
            AW_UNROLL
            for (unsigned p = 0; p < P; p++)
                acc[r][p] = _mm512_fmadd_ps(wv[p], xb, acc[r][p]);
        }
    }
    AW_UNROLL
    for (unsigned r = 0; r < R; r++) {
        __m512 gs = _mm512_set1_ps(j->gsum[((r0 + r) * j->w->groups + g) * j->w->sub + q]);
        float *yr = j->y + (r0 + r) * j->ldy + p0 * AW_PANEL;
        AW_UNROLL
        for (unsigned p = 0; p < P; p++) {
            __m512 v = _mm512_fnmadd_ps(sz[p], gs, _mm512_mul_ps(acc[r][p], s[p]));
            aw_y_add(yr + p * AW_PANEL, mask[p], g == 0u && q == 0u, v);
        }
    }
}

AW_INLINE void fma_rows(const aw_job *j, const float *wexp, size_t p0, uint32_t g, unsigned q,
                        const unsigned P, const __m512 *s, const __m512 *sz,
                        const __mmask16 *mask)
{
    size_t r0 = 0;
    for (; r0 + FMA_RB <= j->m; r0 += FMA_RB)
        fma_tile(j, wexp, p0, g, q, r0, FMA_RB, P, s, sz, mask);
    switch (j->m - r0) {
#define FMA_CASE(R) case R: fma_tile(j, wexp, p0, g, q, r0, R, P, s, sz, mask); break;
        FMA_CASE(1) FMA_CASE(2) FMA_CASE(3) FMA_CASE(4) FMA_CASE(5) FMA_CASE(6) FMA_CASE(7)
#undef FMA_CASE
    default: break;
    }
}

static void fma_prefill_block(const aw_job *j, size_t p0, unsigned P, float *wexp)
{
    const aw_packed *w = j->w;
    for (uint32_t g = 0; g < w->groups; g++) {
        fma_expand(w, p0, P, g, wexp);
        for (unsigned q = 0; q < w->sub; q++) { /* each weight group of the block */
            __m512 s[FMA_PB] = {0}, sz[FMA_PB] = {0};
            __mmask16 mask[FMA_PB] = {0};
            aw_block_meta(w, p0, P, g, q, s, sz, mask);
            switch (P) {
            case 3: fma_rows(j, wexp, p0, g, q, 3, s, sz, mask); break;
            case 2: fma_rows(j, wexp, p0, g, q, 2, s, sz, mask); break;
            default: fma_rows(j, wexp, p0, g, q, 1, s, sz, mask); break;
            }
        }
    }
}

/* [begin, end) are panels for m <= AW_DECODE_MAX_M, blocks of FMA_PB panels
 * otherwise (aw_gemm_unit in the dispatch file agrees). */
void aw_fma_gemm(void *arg, size_t begin, size_t end, unsigned worker)
{
    const aw_job *j = arg;
    const aw_packed *w = j->w;
    (void)worker;
    if (j->m <= AW_DECODE_MAX_M) {
        const int near = j->pf_near; /* PK_BY_PF: one instantiation per mode */
        for (size_t p = begin; p < end; p++) {
            switch (j->m) {
            case 1:
                PK_BY_PF(near, fma_decode_panel, j, p, 0, 1);
                break;
            case 2:
                PK_BY_PF(near, fma_decode_panel, j, p, 0, 2);
                break;
            case 3:
                PK_BY_PF(near, fma_decode_panel, j, p, 0, 3);
                break;
            default:
                PK_BY_PF(near, fma_decode_panel, j, p, 0, 4);
                break;
            }
        }
        return;
    }
    _Alignas(64) float wexp[AW_GROUP * FMA_PB * AW_PANEL]; /* 24 KiB, per chunk */
    for (size_t b = begin; b < end; b++) {
        size_t p0 = b * FMA_PB;
        unsigned P = w->panels - p0 < FMA_PB ? (unsigned)(w->panels - p0) : FMA_PB;
        fma_prefill_block(j, p0, P, wexp);
    }
}
