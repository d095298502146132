/*
 * plugins/avx512-w4a16/aw_kern_amx.c — path "amx", prefill: bf16
 * activations (the bf16 path's prep) on AMX-BF16 tiles. (Its decode is the
 * int16 path's GEMV: avx512_w4a16.c.) Compiled with -mavx512f -mavx512bw -mavx512vl
 * -mavx512bf16; the tile instructions are inline assembly (amx_tiles.h).
 *
 * Prefill, per parallel_for item = up to AMX_NB panels (64 columns):
 *   for each group g of 128 inputs:
 *     expand the item's codes of group g to bf16 once (aw_expand_pairs: the
 *     VNNI pair layout a B tile reads, 4 KiB per panel, L1-resident);
 *     for each block of 32 rows, for each pair of panels:
 *       C (4 tiles: 2 row halves x 2 panels, fp32 16 x 16) =
 *         sum over the group's 4 steps of 32 inputs of A (2 tiles, 16 rows x
 *         32 bf16 activations) . B (2 tiles, 16 input pairs x 16 columns);
 *       y += s * C - s z * gsum   per (row, column), AVX-512 on the stored C.
 * The zero point and scale are applied per group exactly as on the other
 * paths (aw_internal.h), so the tiles only ever multiply bf16 activations by
 * the integer codes 0..15: every product is exact, and the path's error is
 * the bf16 rounding of activations plus fp32 accumulation, as for path bf16.
 *
 * Rows: the activation scratch is padded with zero rows to a multiple of
 * AMX_RB (aw_kernels.row_pad), so every A tile is a full 16 x 64 bytes and
 * one tile configuration serves every shape; rows beyond m are computed from
 * zeros and never stored. Columns beyond n are zero codes and scale 0 in the
 * packed panel, and masked on store.
 *
 * Tiles (palette 1, all 16 rows x 64 bytes):
 *   0 C(rows 0-15, panel a)  1 C(rows 0-15, panel b)
 *   2 C(rows 16-31, panel a) 3 C(rows 16-31, panel b)
 *   4 A(rows 0-15)           5 A(rows 16-31)
 *   6 B(panel a)             7 B(panel b)
 * Each call configures the tiles of its thread and releases them before it
 * returns (tile state is per thread; a released state keeps context
 * switches cheap).
 */
#include "aw_kern.h"
#include "amx_tiles.h"

#define AMX_RB 32u /* rows per row block: two A tiles */
#define AMX_NB 4u  /* panels per parallel_for item (4 KiB of expanded codes each) */

_Static_assert(AMX_RB == AW_AMX_ROW_PAD, "aw_internal.h's padding must match the row block");
_Static_assert(AMX_NB == AW_AMX_PB, "aw_internal.h's item size must match the kernel");

static void amx_configure(void)
{
    amx_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (unsigned i = 0; i < 8u; i++) {
        cfg.rows[i] = 16;
        cfg.colsb[i] = 64;
    }
    AMX_TILE_CONFIG(&cfg);
}

/* y rows [r0, min(r0 + 32, m)) of panels p, p + 1 (two) from the stored C. */
AW_INLINE void amx_epilogue(const aw_job *j, const float (*cbuf)[16][16], size_t r0, size_t pcol,
                            uint32_t g, const unsigned two, const __m512 *sc, const __m512 *sz,
                            const __mmask16 *mask)
{
    const size_t rows = j->m - r0 < AMX_RB ? j->m - r0 : AMX_RB;
    for (size_t r = 0; r < rows; r++) {
        const __m512 gs = _mm512_set1_ps(j->gsum[(r0 + r) * j->w->groups + g]);
        float *yr = j->y + (r0 + r) * j->ldy + pcol * AW_PANEL;
        const unsigned half = (unsigned)(r / 16u), rr = (unsigned)(r % 16u);
        AW_UNROLL
        for (unsigned q = 0; q < 1u + two; q++) {
            __m512 c = _mm512_load_ps(cbuf[2u * half + q][rr]);
            __m512 v = _mm512_fnmadd_ps(sz[q], gs, _mm512_mul_ps(c, sc[q]));
            aw_y_add(yr + q * AW_PANEL, mask[q], g == 0u, v);
        }
    }
}

/* One group of one row block for panels (pp, pp + 1 if two) of the item. */
AW_INLINE void amx_tile_pair(const aw_job *j, const uint16_t *wexp, unsigned P, unsigned pp,
                             const unsigned two, uint32_t g, size_t r0, float (*cbuf)[16][16])
{
    const size_t arb = j->act_row_bytes;
    const uint8_t *a0 = (const uint8_t *)j->act + r0 * arb + (size_t)g * AW_GROUP * 2u;
    const size_t bstride = (size_t)P * 64u;

    AMX_TILE_ZERO(0);
    AMX_TILE_ZERO(2);
    if (two) {
        AMX_TILE_ZERO(1);
        AMX_TILE_ZERO(3);
    }
    for (unsigned s = 0; s < AW_GROUP / 32u; s++) {
        const uint8_t *as = a0 + 64u * s; /* inputs 32 s .. 32 s + 31 of the group */
        const uint16_t *bs = wexp + ((size_t)16u * s * P + pp) * 32u;
        AMX_TILE_LOAD(4, as, arb);
        AMX_TILE_LOAD(5, as + 16u * arb, arb);
        AMX_TILE_LOAD(6, bs, bstride);
        AMX_TILE_DPBF16PS(0, 4, 6);
        AMX_TILE_DPBF16PS(2, 5, 6);
        if (two) {
            AMX_TILE_LOAD(7, bs + 32u, bstride);
            AMX_TILE_DPBF16PS(1, 4, 7);
            AMX_TILE_DPBF16PS(3, 5, 7);
        }
    }
    AMX_TILE_STORE(0, cbuf[0], 64);
    AMX_TILE_STORE(2, cbuf[2], 64);
    if (two) {
        AMX_TILE_STORE(1, cbuf[1], 64);
        AMX_TILE_STORE(3, cbuf[3], 64);
    }
}

static void amx_prefill_item(const aw_job *j, size_t p0, unsigned P, uint16_t *wexp,
                             float (*cbuf)[16][16])
{
    const aw_packed *w = j->w;
    for (uint32_t g = 0; g < w->groups; g++) {
        __m512 sc[AMX_NB], sz[AMX_NB];
        __mmask16 mask[AMX_NB];
        aw_block_meta(w, p0, P, g, sc, sz, mask);
        aw_expand_pairs(w, p0, P, g, wexp, 1);
        for (size_t r0 = 0; r0 < j->m; r0 += AMX_RB) {
            for (unsigned pp = 0; pp < P; pp += 2u) {
                if (pp + 1u < P) {
                    amx_tile_pair(j, wexp, P, pp, 1, g, r0, cbuf);
                    amx_epilogue(j, (const float (*)[16][16])cbuf, r0, p0 + pp, g, 1, &sc[pp],
                                 &sz[pp], &mask[pp]);
                } else {
                    amx_tile_pair(j, wexp, P, pp, 0, g, r0, cbuf);
                    amx_epilogue(j, (const float (*)[16][16])cbuf, r0, p0 + pp, g, 0, &sc[pp],
                                 &sz[pp], &mask[pp]);
                }
            }
        }
    }
}

void aw_amx_gemm(void *arg, size_t begin, size_t end, unsigned worker)
{
    const aw_job *j = arg;
    const aw_packed *w = j->w;
    (void)worker;
    _Alignas(64) uint16_t wexp[AW_GROUP * AMX_NB * AW_PANEL]; /* 16 KiB */
    _Alignas(64) float cbuf[4][16][16];                        /* 4 KiB: the C tiles */
    amx_configure();
    for (size_t b = begin; b < end; b++) {
        size_t p0 = b * AMX_NB;
        unsigned P = w->panels - p0 < AMX_NB ? (unsigned)(w->panels - p0) : AMX_NB;
        amx_prefill_item(j, p0, P, wexp, cbuf);
    }
    AMX_TILE_RELEASE();
}
