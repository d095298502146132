/*
 * plugins/avx512-w4a16/aw_kern_amx.c — path "amx", prefill: bf16
 * activations (the bf16 path's prep) on AMX-BF16 tiles. (Its decode is the
 * int16 path's GEMV: avx512_w4a16.c.) Compiled with -mavx512f -mavx512bw -mavx512vl
 * -mavx512bf16; the tile instructions are inline assembly (amx_tiles.h).
 *
 * Prefill, per parallel_for item = one panel (16 columns), per chunk of up
 * to AMX_RC rows, per group g of 128 inputs:
 *   expand the panel's codes of group g to bf16 once (aw_expand_pairs: the
 *   VNNI pair layout a B tile reads, 4 KiB) and load them into four B tiles
 *   (inputs 0-31, 32-63, 64-95, 96-127) that stay for the whole chunk;
 *   for each block of 32 rows: per step of 32 inputs two A tiles (rows 0-15
 *   and 16-31: 16 consecutive 256-byte rows each, the activations being
 *   group-major on this path) and two TDPBF16PS into two C tiles, stored;
 *   then the PREVIOUS block's epilogue from the other half of a double
 *   buffer (the vector loads do not wait on the tile stores just issued):
 *     acc += s * C - s z * gsum   per (row, column), into the worker's fp32
 *   accumulators (the chunk's rows x 16 columns, contiguous, in L1 across
 *   the groups); then y = acc once per (row, column).
 * The same operations in the same order as before this layout (t_g =
 * fnmadd(s z, gsum, C s), y = t_1 + t_2 + ... in group order): the same
 * results, only y is written once instead of read and written per group.
 * Why (measured on a 2-core Xeon with AMX, spark-1.7b, M = 512): the
 * earlier kernel (2 x 2 tiles of 32 rows x 32 columns, B reloaded every
 * step, y read and rewritten with its row stride per group, row-major
 * activations whose group of a row is 2 k bytes from the next row's) ran
 * at 0.10 of the AMX-BF16 peak; amx-w4a8's tile kernel went from 0.42 to
 * 2.0 TOPS with the same changes (a8_kern_amx.c).
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
 *   0 C(rows 0-15)   1 C(rows 16-31)
 *   2 A(rows 0-15, the step's 32 inputs)   3 A(rows 16-31)
 *   4-7 B(the group's inputs 0-31, 32-63, 64-95, 96-127)
 * Each call configures the tiles of its thread and releases them before it
 * returns (tile state is per thread; a released state keeps context
 * switches cheap).
 */
#include "aw_kern.h"
#include "amx_tiles.h"

#define AMX_RB 32u  /* rows per row block: two A tiles */
#define AMX_RC 256u /* rows per chunk of the accumulators */

_Static_assert(AMX_RB == AW_AMX_ROW_PAD, "aw_internal.h's padding must match the row block");
_Static_assert(AW_AMX_PB == 1u, "aw_internal.h's item is one panel");
_Static_assert(AMX_RC % AMX_RB == 0u, "a chunk is whole row blocks");

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

/* One worker's scratch, on its stack (28 KiB). */
typedef struct amx_scratch {
    float cbuf[2][32][16];                          /* 4 KiB: C of two row blocks */
    _Alignas(64) uint16_t wexp[AW_GROUP * AW_PANEL]; /* 4 KiB: the group's B tiles */
    _Alignas(64) float acc[AMX_RC][AW_PANEL];       /* 16 KiB: the chunk's sums */
} amx_scratch;

/* The group's four B tiles (row stride 64 bytes: one panel). */
AW_INLINE void amx_load_b(const uint16_t *wexp)
{
    AMX_TILE_LOAD(4, wexp, 64);
    AMX_TILE_LOAD(5, wexp + 16u * 32u, 64);
    AMX_TILE_LOAD(6, wexp + 32u * 32u, 64);
    AMX_TILE_LOAD(7, wexp + 48u * 32u, 64);
}

/* C of group g for rows [r0, r0 + 32), stored to cbuf (rows in order). */
AW_INLINE void amx_tiles(const aw_job *j, uint32_t g, size_t r0, float (*cbuf)[16])
{
    const size_t arb = j->act_row_bytes; /* 256: group-major */
    const uint8_t *a0 = (const uint8_t *)j->act + (size_t)g * j->act_group_bytes + r0 * arb;
    AMX_TILE_ZERO(0);
    AMX_TILE_ZERO(1);
    AMX_TILE_LOAD(2, a0, arb);
    AMX_TILE_LOAD(3, a0 + 16u * arb, arb);
    AMX_TILE_DPBF16PS(0, 2, 4);
    AMX_TILE_DPBF16PS(1, 3, 4);
    AMX_TILE_LOAD(2, a0 + 64u, arb);
    AMX_TILE_LOAD(3, a0 + 64u + 16u * arb, arb);
    AMX_TILE_DPBF16PS(0, 2, 5);
    AMX_TILE_DPBF16PS(1, 3, 5);
    AMX_TILE_LOAD(2, a0 + 128u, arb);
    AMX_TILE_LOAD(3, a0 + 128u + 16u * arb, arb);
    AMX_TILE_DPBF16PS(0, 2, 6);
    AMX_TILE_DPBF16PS(1, 3, 6);
    AMX_TILE_LOAD(2, a0 + 192u, arb);
    AMX_TILE_LOAD(3, a0 + 192u + 16u * arb, arb);
    AMX_TILE_DPBF16PS(0, 2, 7);
    AMX_TILE_DPBF16PS(1, 3, 7);
    AMX_TILE_STORE(0, cbuf[0], 64);
    AMX_TILE_STORE(1, cbuf[16], 64);
}

/* acc rows [0, 32) of a block += s C - s z gsum (gsum of rows r0 ..). */
AW_INLINE void amx_accumulate(const aw_job *j, const float (*cbuf)[16], float (*acc)[AW_PANEL],
                              size_t r0, uint32_t g, __m512 sc, __m512 sz)
{
    const uint32_t groups = j->w->groups;
    AW_UNROLL
    for (unsigned r = 0; r < AMX_RB; r++) {
        const __m512 gs = _mm512_set1_ps(j->gsum[(r0 + r) * groups + g]);
        const __m512 t = _mm512_fnmadd_ps(sz, gs, _mm512_mul_ps(_mm512_load_ps(cbuf[r]), sc));
        _mm512_store_ps(acc[r], _mm512_add_ps(_mm512_load_ps(acc[r]), t));
    }
}

/* Rows [r0, r0 + rows) of panel p. gsum exists for rows < m only: the
 * padding rows of the last block read row m - 1's (their C is zero, their
 * sums are never stored). */
static void amx_chunk(const aw_job *j, size_t p, size_t r0, size_t rows, amx_scratch *s)
{
    const aw_packed *w = j->w;
    const size_t blocks = (rows + AMX_RB - 1u) / AMX_RB;
    memset(s->acc, 0, blocks * AMX_RB * sizeof s->acc[0]);
    for (uint32_t g = 0; g < w->groups; g++) {
        __m512 sc, sz;
        __mmask16 mask;
        aw_block_meta(w, p, 1u, g, &sc, &sz, &mask);
        aw_expand_pairs(w, p, 1u, g, s->wexp, 1);
        amx_load_b(s->wexp);
        for (size_t b = 0; b <= blocks; b++) {
            if (b < blocks)
                amx_tiles(j, g, r0 + b * AMX_RB, s->cbuf[b & 1u]);
            if (b > 0) {
                const size_t rb = r0 + (b - 1u) * AMX_RB;
                if (rb + AMX_RB <= j->m)
                    amx_accumulate(j, (const float (*)[16])s->cbuf[(b - 1u) & 1u],
                                   &s->acc[(b - 1u) * AMX_RB], rb, g, sc, sz);
                else
                    for (size_t r = 0; rb + r < j->m; r++) {
                        const __m512 gs = _mm512_set1_ps(j->gsum[(rb + r) * w->groups + g]);
                        const __m512 t = _mm512_fnmadd_ps(
                            sz, gs, _mm512_mul_ps(_mm512_load_ps(s->cbuf[(b - 1u) & 1u][r]), sc));
                        float *ap = s->acc[(b - 1u) * AMX_RB + r];
                        _mm512_store_ps(ap, _mm512_add_ps(_mm512_load_ps(ap), t));
                    }
            }
        }
    }
    const __mmask16 mask = aw_panel_mask(w, p);
    for (size_t r = 0; r < rows; r++)
        _mm512_mask_storeu_ps(j->y + (r0 + r) * j->ldy + p * AW_PANEL, mask,
                              _mm512_load_ps(s->acc[r]));
}

void aw_amx_gemm(void *arg, size_t begin, size_t end, unsigned worker)
{
    const aw_job *j = arg;
    (void)worker;
    amx_scratch s;
    amx_configure();
    for (size_t p = begin; p < end; p++)
        for (size_t r0 = 0; r0 < j->m; r0 += AMX_RC)
            amx_chunk(j, p, r0, j->m - r0 < AMX_RC ? j->m - r0 : AMX_RC, &s);
    AMX_TILE_RELEASE();
}
