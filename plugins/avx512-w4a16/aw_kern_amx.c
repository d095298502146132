/*
 * plugins/avx512-w4a16/aw_kern_amx.c — path "amx", prefill: bf16
 * activations (the bf16 path's prep) on AMX-BF16 tiles. (Its decode is the
 * int16 path's GEMV: avx512_w4a16.c.) Compiled with -mavx512f -mavx512bw -mavx512vl
 * -mavx512bf16; the tile instructions are inline assembly (amx_tiles.h).
 *
 * Prefill, per parallel_for item = two panels (32 columns), per chunk of up
 * to AMX_RC rows, per group g of 128 inputs:
 *   expand the item's codes of group g to bf16 once (aw_expand_pairs: the
 *   VNNI pair layout a B tile reads, 4 KiB per panel, row stride 128 bytes);
 *   for each block of 32 rows: per step of 32 inputs two A tiles (rows 0-15
 *   and 16-31: 16 consecutive 256-byte rows each, the activations being
 *   group-major on this path), then per panel its B tile and two
 *   TDPBF16PS, into four C tiles (2 row halves x 2 panels), stored; the
 *   next block's 8 KiB of activations are prefetched into L1 meanwhile;
 *   then the PREVIOUS block's epilogue from the other half of a double
 *   buffer (the vector loads do not wait on the tile stores just issued):
 *     acc += s * C - s z * gsum   per (row, column), into the worker's fp32
 *   accumulators (the chunk's rows x 32 columns, contiguous, in the
 *   worker's heap scratch across the groups); then y = acc once per (row,
 *   column).
 * The same operations in the same order as before this layout (t_g =
 * fnmadd(s z, gsum, C s), y = t_1 + t_2 + ... in group order): the same
 * results, only y is written once instead of read and written per group.
 * Why (measured on a 2-core Xeon with AMX, spark-1.7b, M = 512): the
 * earlier kernel (2 x 2 tiles of 32 rows x 32 columns, B reloaded every
 * step, y read and rewritten with its row stride per group, row-major
 * activations whose group of a row is 2 k bytes from the next row's) ran
 * at 0.10 of the AMX-BF16 peak; amx-w4a8's tile kernel went from 0.42 to
 * 2.0 TOPS with the same changes (a8_kern_amx.c). The next version kept
 * one panel's four B tiles resident, so each A tile fed one TDPBF16PS and
 * every item streamed all of the activations for 16 columns; perf put the
 * stall on the A tile loads. Two panels per item, B reloaded from L1 per
 * step (each A tile feeds two products), went from 1003 to 1164 GFLOP/s
 * (3 interleaved rounds), and the prefetch of the next block to 1271
 * (prefetcht1 instead: 1172).
 * An odd last panel runs the same code with P = 1.
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
 *   0 C(rows 0-15, panel a)   1 C(rows 16-31, panel a)
 *   2 C(rows 0-15, panel b)   3 C(rows 16-31, panel b)
 *   4 A(rows 0-15, the step's 32 inputs)   5 A(rows 16-31)
 *   6 B(panel a, the step's 32 inputs)     7 B(panel b)
 * Each call configures the tiles of its thread and releases them before it
 * returns (tile state is per thread; a released state keeps context
 * switches cheap).
 */
#include "aw_kern.h"
#include "amx_tiles.h"

#define AMX_RB 32u  /* rows per row block: two A tiles */
#define AMX_RC AW_AMX_RC /* rows per chunk of the accumulators */
#define AMX_PB AW_AMX_PB /* panels per item: two C tiles per A tile */

_Static_assert(AMX_RB == AW_AMX_ROW_PAD, "aw_internal.h's padding must match the row block");
_Static_assert(AW_AMX_PB == 2u, "aw_internal.h's item is two panels");
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

/* One worker's scratch: AW_AMX_SCRATCH bytes of the call's allocation. */
typedef struct amx_scratch {
    float cbuf[2][AMX_PB][AMX_RB][16];                        /* 8 KiB: C, two row blocks */
    _Alignas(64) uint16_t wexp[AW_GROUP * AMX_PB * AW_PANEL]; /* 8 KiB: the group's B */
    _Alignas(64) float acc[AMX_RC][AMX_PB * AW_PANEL];        /* 64 KiB: the chunk's sums */
} amx_scratch;

_Static_assert(sizeof(amx_scratch) == AW_AMX_SCRATCH, "aw_internal.h's scratch size");

/* C of group g for rows [r0, r0 + 32) x the item's P panels (1 or 2), stored
 * to cbuf[panel][row]. Per step of 32 inputs: two A tiles, then per panel
 * its B tile from wexp (row stride P * 64: aw_expand_pairs' layout) and two
 * TDPBF16PS, so each A tile feeds P products. */
AW_INLINE void amx_tiles(const aw_job *j, const uint16_t *wexp, unsigned P, uint32_t g,
                         unsigned s0, unsigned s1, size_t r0, float (*cbuf)[AMX_RB][16])
{
    const size_t arb = j->act_row_bytes; /* 256: group-major */
    const uint8_t *a0 = (const uint8_t *)j->act + (size_t)g * j->act_group_bytes + r0 * arb;
    const long bs = (long)P * 64;
    AMX_TILE_ZERO(0);
    AMX_TILE_ZERO(1);
    AMX_TILE_ZERO(2);
    AMX_TILE_ZERO(3);
    for (unsigned s = s0; s < s1; s++) { /* inputs 32 s .. 32 s + 31: one weight group's */
        const uint16_t *b = wexp + (size_t)16u * s * P * 32u;
        /* the next block's rows into L1, 2 KiB per step (8 KiB in all,
         * contiguous group-major): its A tiles loaded from L2 stalled */
        for (unsigned l = 0; l < 32u; l++)
            _mm_prefetch((const char *)(a0 + AMX_RB * arb + (32u * s + l) * 64u), _MM_HINT_T0);
        AMX_TILE_LOAD(4, a0 + 64u * s, arb);
        AMX_TILE_LOAD(5, a0 + 64u * s + 16u * arb, arb);
        AMX_TILE_LOAD(6, b, bs);
        AMX_TILE_DPBF16PS(0, 4, 6);
        AMX_TILE_DPBF16PS(1, 5, 6);
        if (P == 2u) {
            AMX_TILE_LOAD(7, b + 32u, bs);
            AMX_TILE_DPBF16PS(2, 4, 7);
            AMX_TILE_DPBF16PS(3, 5, 7);
        }
    }
    AMX_TILE_STORE(0, cbuf[0][0], 64);
    AMX_TILE_STORE(1, cbuf[0][16], 64);
    if (P == 2u) {
        AMX_TILE_STORE(2, cbuf[1][0], 64);
        AMX_TILE_STORE(3, cbuf[1][16], 64);
    }
}

/* acc rows [0, rows) of a block, panel q, += s C - s z gsum (gsum of rows
 * r0 ..); rows is AMX_RB except in the chunk's last, partial block, whose
 * padding rows are never added. */
AW_INLINE void amx_accumulate(const aw_job *j, const float (*cbuf)[16],
                              float (*acc)[AMX_PB * AW_PANEL], unsigned q, size_t r0, size_t rows,
                              uint32_t g, unsigned gq, __m512 sc, __m512 sz)
{
    const uint32_t groups = j->w->groups, sub = j->w->sub;
    for (size_t r = 0; r < rows; r++) {
        const __m512 gs = _mm512_set1_ps(j->gsum[((r0 + r) * groups + g) * sub + gq]);
        const __m512 t = _mm512_fnmadd_ps(sz, gs, _mm512_mul_ps(_mm512_load_ps(cbuf[r]), sc));
        float *ap = acc[r] + q * AW_PANEL;
        _mm512_store_ps(ap, _mm512_add_ps(_mm512_load_ps(ap), t));
    }
}

/* Rows [r0, r0 + rows) of panels [p0, p0 + P). gsum exists for rows < m
 * only: the padding rows of the last block are computed from zeros and
 * never read back. */
static void amx_chunk(const aw_job *j, size_t p0, unsigned P, size_t r0, size_t rows,
                      amx_scratch *s)
{
    const aw_packed *w = j->w;
    const size_t blocks = (rows + AMX_RB - 1u) / AMX_RB;
    __mmask16 mask[AMX_PB] = {0};
    memset(s->acc, 0, blocks * AMX_RB * sizeof s->acc[0]);
    const unsigned steps = 4u / w->sub; /* steps of 32 inputs per weight group */
    for (uint32_t g = 0; g < w->groups; g++) {
        aw_expand_pairs(w, p0, P, g, s->wexp, 1);
        for (unsigned gq = 0; gq < w->sub; gq++) { /* each weight group of the block */
            __m512 sc[AMX_PB], sz[AMX_PB];
            aw_block_meta(w, p0, P, g, gq, sc, sz, mask);
            for (size_t b = 0; b <= blocks; b++) {
                if (b < blocks)
                    amx_tiles(j, s->wexp, P, g, gq * steps, (gq + 1u) * steps, r0 + b * AMX_RB,
                              s->cbuf[b & 1u]);
                if (b > 0) { /* the previous block, while this one's tiles drain */
                    const size_t rb = r0 + (b - 1u) * AMX_RB;
                    const size_t n = j->m - rb < AMX_RB ? j->m - rb : AMX_RB;
                    for (unsigned q = 0; q < P; q++)
                        amx_accumulate(j, (const float (*)[16])s->cbuf[(b - 1u) & 1u][q],
                                       &s->acc[(b - 1u) * AMX_RB], q, rb, n, g, gq, sc[q],
                                       sz[q]);
                }
            }
        }
    }
    for (size_t r = 0; r < rows; r++)
        for (unsigned q = 0; q < P; q++)
            _mm512_mask_storeu_ps(j->y + (r0 + r) * j->ldy + (p0 + q) * AW_PANEL, mask[q],
                                  _mm512_load_ps(s->acc[r] + q * AW_PANEL));
}

void aw_amx_gemm(void *arg, size_t begin, size_t end, unsigned worker)
{
    const aw_job *j = arg;
    const aw_packed *w = j->w;
    amx_scratch *s = (amx_scratch *)(void *)(j->tile_scratch + (size_t)worker * AW_AMX_SCRATCH);
    amx_configure();
    for (size_t it = begin; it < end; it++) {
        const size_t p0 = it * AMX_PB;
        const unsigned P = w->panels - p0 < AMX_PB ? (unsigned)(w->panels - p0) : AMX_PB;
        for (size_t r0 = 0; r0 < j->m; r0 += AMX_RC)
            amx_chunk(j, p0, P, r0, j->m - r0 < AMX_RC ? j->m - r0 : AMX_RC, s);
    }
    AMX_TILE_RELEASE();
}
