/*
 * plugins/amx-w4a8/a8_kern_amx.c — path "amx", prefill on AMX-INT8 tiles.
 * (Its decode is the VNNI GEMV, a8_kern_vnni.c.) Compiled with -mavx512f
 * -mavx512bw -mavx512vl; the tile instructions are inline assembly
 * (plugins/kit/x86/amx_tiles.h, whose asm names every byte of the tile
 * configuration and fences every tile load and store, so GCC cannot drop
 * or sink the stores that fill them: the SIGILL llama.cpp's AMX path meets
 * under GCC 12).
 *
 * Per parallel_for item of up to A8_AMX_PB = 2 panels (32 columns), per
 * chunk of up to A8_AMX_RC tokens, per group g:
 *   expand the item's codes of group g once, minus the zero point
 *   (a8_expand_bias, -15..15 as signed bytes: 2 KiB per panel, the quads
 *   TDPBSSD reads, row stride P * 64) and load them into four B tiles that
 *   stay for the whole chunk (2 panels x inputs 0-63, 64-127);
 *   for each block of 16 tokens of the chunk:
 *     two A tiles (16 tokens x 64 signed activation codes each, the
 *     group's two halves: consecutive 128-byte rows, the activations being
 *     group-major here), four TDPBSSD into two C tiles (one per panel):
 *     d = sum a (q - z), exact (|d| <= 128 * 127 * 15 < 2^18), stored;
 *     then the PREVIOUS block's epilogue, from the other half of a double
 *     buffer (the vector loads do not wait on tile stores just issued):
 *     acc = fma(d, s_w s_g, acc) per (token, column), into the worker's fp32
 *     accumulators (the chunk's tokens x 32 columns, contiguous: 64 KiB at
 *     A8_AMX_RC = 512, across the groups);
 *   then y = acc * s_x, once per (token, column).
 * That is path vnni's decode arithmetic (a8_kern_vnni.c, decode_panel):
 * the same exact d, the same fused multiply-add per group in group order,
 * the same final product. Path amx therefore gives the streaming kernel's
 * bits at every m, which the tests check.
 *
 * Why this shape (measured on a 2-core Xeon with AMX, spark-1.7b, M = 512,
 * 2026-12; GFLOP/s): the first tile kernel (2 x 2 tiles of 32
 * tokens x 32 columns, zero point applied per token, each group's products
 * added into y, read and written back per group with the row stride of y)
 * ran at 420, slower than path vnni's streaming kernel (530) on the same
 * machine. Signed codes (no per-token correction) and contiguous
 * accumulators: 670; group-major activations (row-major, a group's tokens
 * are k bytes apart and fall in a few L1 sets): 1060-1150; the C tiles
 * double-buffered: 1540-1670; B resident, 16-token blocks (2 tile loads
 * per 4 TDPBSSD instead of 8 per 8): 1890-2060.
 *
 * Tokens: the activation scratch is padded with zero rows to a multiple of
 * 32 (A8_AMX_ROW_PAD, whole blocks of 16), so every A tile is a full
 * 16 x 64 bytes and one tile configuration serves every shape; rows beyond
 * m are computed from zeros and never stored. Columns beyond n are zero
 * codes and scale 0.
 *
 * Tiles (palette 1, all 16 rows x 64 bytes):
 *   0 C(panel a)   1 C(panel b)
 *   2 A(inputs 0-63 of the group)   3 A(inputs 64-127)
 *   4 B(panel a, 0-63)  5 B(panel a, 64-127)  6 B(panel b, 0-63)  7 B(panel b, 64-127)
 * Each call configures the tiles of its thread on entry and releases them
 * before it returns (tile state is per thread; a released state keeps
 * context switches cheap).
 */
#include "a8_kern.h"
#include "amx_tiles.h"

#define AMX_RB 16u
#define AMX_NB A8_AMX_PB
#define AMX_COLS (AMX_NB * A8_PANEL) /* accumulator floats per token */

_Static_assert(A8_AMX_ROW_PAD % AMX_RB == 0u, "a8_internal.h's padding is whole token blocks");
_Static_assert(AMX_NB == 2u, "the tile kernel pairs two panels");
_Static_assert(A8_AMX_RC % AMX_RB == 0u, "a chunk is whole token blocks");

/* One worker's scratch, A8_AMX_SCRATCH bytes (a8_internal.h). */
typedef struct amx_scratch {
    int32_t cbuf[2][32][16];                  /* 4 KiB: C of two token blocks */
    uint8_t wexp[A8_STEPS * AMX_NB * 64u];    /* 4 KiB: the group's B tiles */
    float acc[A8_AMX_RC][AMX_COLS];           /* 64 KiB: the chunk's sums */
} amx_scratch;

_Static_assert(sizeof(amx_scratch) == A8_AMX_SCRATCH, "a8_internal.h's scratch size");

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

/* Group g's B tiles, resident for every token block of the chunk:
 * 4, 5 = panel a (inputs 0-63, 64-127), 6, 7 = panel b. */
A8_INLINE void amx_load_b(const uint8_t *wexp, const unsigned two)
{
    const size_t bstride = (size_t)(1u + two) * 64u;
    AMX_TILE_LOAD(4, wexp, bstride);
    AMX_TILE_LOAD(5, wexp + 16u * bstride, bstride);
    if (two) {
        AMX_TILE_LOAD(6, wexp + 64u, bstride);
        AMX_TILE_LOAD(7, wexp + 16u * bstride + 64u, bstride);
    }
}

/* d of group g for tokens [r0, r0 + 16) and panels a (and b if two),
 * stored to cbuf[0] (panel a) and cbuf[1] (panel b). */
A8_INLINE void amx_tiles(const a8_job *j, const unsigned two, uint32_t g, size_t r0,
                         int32_t (*cbuf)[16])
{
    const size_t arb = j->act_row_bytes;
    const int8_t *a0 = j->act + r0 * arb + (size_t)g * j->act_group_bytes;
    /* the next block's tokens into L1 while these tiles run (2 KiB,
     * contiguous group-major), as avx512-w4a16's path amx does */
    for (unsigned l = 0; l < 16u * A8_GROUP / 64u; l++)
        _mm_prefetch((const char *)(a0 + AMX_RB * arb) + 64u * l, _MM_HINT_T0);
    AMX_TILE_LOAD(2, a0, arb);       /* inputs 0-63 of the group */
    AMX_TILE_LOAD(3, a0 + 64u, arb); /* inputs 64-127 */
    AMX_TILE_ZERO(0);
    AMX_TILE_DPBSSD(0, 2, 4);
    if (two) {
        AMX_TILE_ZERO(1);
        AMX_TILE_DPBSSD(1, 2, 6);
    }
    AMX_TILE_DPBSSD(0, 3, 5);
    if (two)
        AMX_TILE_DPBSSD(1, 3, 7);
    AMX_TILE_STORE(0, cbuf[0], 64);
    if (two)
        AMX_TILE_STORE(1, cbuf[16], 64);
}

/* acc rows [0, 16) of a token block += d s_w s_g, panel by panel (sg: the
 * block's first token's s_g of this group, tokens `groups` floats apart;
 * the padding rows' are 0). */
A8_INLINE void amx_accumulate(const int32_t (*cbuf)[16], float (*acc)[AMX_COLS],
                              const unsigned two, const __m512 *sw, const float *sg,
                              uint32_t groups)
{
    A8_UNROLL
    for (unsigned r = 0; r < AMX_RB; r++) {
        const __m512 sgr = _mm512_set1_ps(sg[(size_t)r * groups]);
        for (unsigned q = 0; q < 1u + two; q++) {
            const __m512 d =
                _mm512_cvtepi32_ps(_mm512_load_si512((const void *)cbuf[16u * q + r]));
            float *ap = acc[r] + q * A8_PANEL;
            _mm512_store_ps(ap, _mm512_fmadd_ps(d, _mm512_mul_ps(sw[q], sgr), _mm512_load_ps(ap)));
        }
    }
}

/* Tokens [r0, r0 + rows) of panels p0 (and p0 + 1 if two). */
static void amx_chunk(const a8_job *j, size_t p0, const unsigned two, size_t r0, size_t rows,
                      amx_scratch *s)
{
    const a8_packed *w = j->w;
    const size_t blocks = (rows + AMX_RB - 1u) / AMX_RB;
    memset(s->acc, 0, blocks * AMX_RB * sizeof s->acc[0]);
    for (uint32_t g = 0; g < w->groups; g++) {
        __m512 sw[AMX_NB];
        sw[0] = a8_scales(w, p0, g);
        sw[1] = two ? a8_scales(w, p0 + 1u, g) : _mm512_setzero_ps();
        a8_expand_bias(w, p0, 1u + two, g, s->wexp, 8);
        /* block b's tiles, then block b - 1's epilogue from the other
         * buffer: the vector loads do not wait on the tile stores just
         * issued, and the tiles run while the epilogue does */
        if (two) {
            amx_load_b(s->wexp, 1);
            for (size_t b = 0; b <= blocks; b++) {
                if (b < blocks)
                    amx_tiles(j, 1, g, r0 + b * AMX_RB, s->cbuf[b & 1u]);
                if (b > 0)
                    amx_accumulate((const int32_t (*)[16])s->cbuf[(b - 1u) & 1u],
                                   &s->acc[(b - 1u) * AMX_RB], 1, sw,
                                   j->sg + (r0 + (b - 1u) * AMX_RB) * w->groups + g, w->groups);
            }
        } else {
            amx_load_b(s->wexp, 0);
            for (size_t b = 0; b <= blocks; b++) {
                if (b < blocks)
                    amx_tiles(j, 0, g, r0 + b * AMX_RB, s->cbuf[b & 1u]);
                if (b > 0)
                    amx_accumulate((const int32_t (*)[16])s->cbuf[(b - 1u) & 1u],
                                   &s->acc[(b - 1u) * AMX_RB], 0, sw,
                                   j->sg + (r0 + (b - 1u) * AMX_RB) * w->groups + g, w->groups);
            }
        }
    }
    const __mmask16 ma = a8_panel_mask(w, p0), mb = two ? a8_panel_mask(w, p0 + 1u) : 0;
    for (size_t r = 0; r < rows; r++) {
        const __m512 sx = _mm512_set1_ps(j->sx[r0 + r]);
        float *yr = j->y + (r0 + r) * j->ldy + p0 * A8_PANEL;
        _mm512_mask_storeu_ps(yr, ma, _mm512_mul_ps(_mm512_load_ps(s->acc[r]), sx));
        if (two)
            _mm512_mask_storeu_ps(yr + A8_PANEL, mb,
                                  _mm512_mul_ps(_mm512_load_ps(s->acc[r] + A8_PANEL), sx));
    }
}

void a8_amx_prefill(void *arg, size_t begin, size_t end, unsigned worker)
{
    const a8_job *j = arg;
    const a8_packed *w = j->w;
    amx_scratch *s = (amx_scratch *)(void *)(j->tile_scratch + (size_t)worker * A8_AMX_SCRATCH);
    amx_configure();
    for (size_t b = begin; b < end; b++) {
        const size_t p0 = b * AMX_NB;
        const unsigned two = w->panels - p0 >= 2u;
        for (size_t r0 = 0; r0 < j->m; r0 += A8_AMX_RC) {
            const size_t rows = j->m - r0 < A8_AMX_RC ? j->m - r0 : A8_AMX_RC;
            amx_chunk(j, p0, two, r0, rows, s);
        }
    }
    AMX_TILE_RELEASE();
}
