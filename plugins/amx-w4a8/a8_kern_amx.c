/*
 * plugins/amx-w4a8/a8_kern_amx.c — path "amx", prefill on AMX-INT8 tiles.
 * (Its decode is the VNNI GEMV, a8_kern_vnni.c.) Compiled with -mavx512f
 * -mavx512bw -mavx512vl; the tile instructions are inline assembly
 * (plugins/common/amx_tiles.h, whose asm names every byte of the tile
 * configuration and fences every tile load and store, so GCC cannot drop
 * or sink the stores that fill them: the SIGILL llama.cpp's AMX path meets
 * under GCC 12).
 *
 * Per parallel_for item of up to A8_AMX_PB = 2 panels (32 columns), per
 * chunk of up to A8_AMX_RC tokens, per group g:
 *   expand the item's codes of group g once, minus the zero point
 *   (a8_expand_bias, -8..7 as signed bytes: 2 KiB per panel; each panel's
 *   32 steps are two B tiles of 16 rows x 64 bytes, the quads TDPBSSD
 *   reads, row stride P * 64);
 *   for each block of 32 tokens of the chunk:
 *     C (4 tiles: 2 token halves x 2 panels, int32 16 x 16) =
 *       sum over the group's 2 steps of 64 inputs of
 *       A (2 tiles, 16 tokens x 64 signed activation codes) .
 *       B (2 tiles, 16 quads x 16 columns of signed weight codes),
 *     i.e. d = sum a (q - 8), exact (|d| <= 128 * 127 * 8 < 2^18);
 *     acc = fma(d, s_w, acc) per (token, column), AVX-512 on the stored C,
 *     into the worker's fp32 accumulators (the chunk's tokens x 32 columns,
 *     contiguous: 32 KiB at A8_AMX_RC = 256, in L1 across the groups);
 *   then y = acc * s_x, once per (token, column).
 * That is path vnni's decode arithmetic (a8_kern_vnni.c, decode_panel):
 * the same exact d, the same fused multiply-add per group in group order,
 * the same final product. Path amx therefore gives the streaming kernel's
 * bits at every m, which the tests check.
 *
 * Why this shape (measured on a 2-core Xeon with AMX, spark-1.7b, issue
 * 15's note): the first tile kernel applied the zero point per token
 * (sub of 8 sum a) and added each group's products into y itself, read
 * and written back per group with the row stride of y (a multiple of
 * 4 KiB for most shapes: every row in one L1 set): 0.42 TOPS, slower than
 * path vnni's streaming kernel on the same machine. Signed codes remove
 * the correction, and the contiguous accumulators keep the epilogue to
 * one load of C, one convert and one FMA per 16 outputs.
 *
 * Tokens: the activation scratch is padded with zero rows to a multiple of
 * 32 (A8_AMX_ROW_PAD), so every A tile is a full 16 x 64 bytes and one tile
 * configuration serves every shape; rows beyond m are computed from zeros
 * and never stored. Columns beyond n are zero codes and scale 0.
 *
 * Tiles (palette 1, all 16 rows x 64 bytes):
 *   0 C(tokens 0-15, panel a)  1 C(tokens 0-15, panel b)
 *   2 C(tokens 16-31, panel a) 3 C(tokens 16-31, panel b)
 *   4 A(tokens 0-15)           5 A(tokens 16-31)
 *   6 B(panel a)               7 B(panel b)
 * Each call configures the tiles of its thread on entry and releases them
 * before it returns (tile state is per thread; a released state keeps
 * context switches cheap).
 */
#include "a8_kern.h"
#include "amx_tiles.h"

#define AMX_RB 32u
#define AMX_NB A8_AMX_PB
#define AMX_COLS (AMX_NB * A8_PANEL) /* accumulator floats per token */

_Static_assert(AMX_RB == A8_AMX_ROW_PAD, "a8_internal.h's padding must match the token block");
_Static_assert(AMX_NB == 2u, "the tile kernel pairs two panels");
_Static_assert(A8_AMX_RC % AMX_RB == 0u, "a chunk is whole token blocks");

/* One worker's scratch, A8_AMX_SCRATCH bytes (a8_internal.h). */
typedef struct amx_scratch {
    int32_t cbuf[2][4][16][16];               /* 8 KiB: the C tiles, two blocks */
    uint8_t wexp[A8_STEPS * AMX_NB * 64u];    /* 4 KiB: the group's B tiles */
    float acc[A8_AMX_RC][AMX_COLS];           /* 32 KiB: the chunk's sums */
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

/* d of one group for tokens [r0, r0 + 32) and panels a (and b if two),
 * stored to cbuf. */
A8_INLINE void amx_tiles(const a8_job *j, const uint8_t *wexp, const unsigned two, uint32_t g,
                         size_t r0, int32_t (*cbuf)[16][16])
{
    const size_t arb = j->act_row_bytes;
    const int8_t *a0 = j->act + r0 * arb + (size_t)g * j->act_group_bytes;
    const size_t bstride = (size_t)(1u + two) * 64u;

    AMX_TILE_ZERO(0);
    AMX_TILE_ZERO(2);
    if (two) {
        AMX_TILE_ZERO(1);
        AMX_TILE_ZERO(3);
    }
    for (unsigned h = 0; h < 2u; h++) {
        const int8_t *as = a0 + 64u * h; /* inputs 64 h .. 64 h + 63 of the group */
        const uint8_t *bs = wexp + (size_t)16u * h * bstride;
        AMX_TILE_LOAD(4, as, arb);
        AMX_TILE_LOAD(6, bs, bstride);
        AMX_TILE_LOAD(5, as + 16u * arb, arb);
        AMX_TILE_DPBSSD(0, 4, 6);
        AMX_TILE_DPBSSD(2, 5, 6);
        if (two) {
            AMX_TILE_LOAD(7, bs + 64u, bstride);
            AMX_TILE_DPBSSD(1, 4, 7);
            AMX_TILE_DPBSSD(3, 5, 7);
        }
    }
    AMX_TILE_STORE(0, cbuf[0], 64);
    AMX_TILE_STORE(2, cbuf[2], 64);
    if (two) {
        AMX_TILE_STORE(1, cbuf[1], 64);
        AMX_TILE_STORE(3, cbuf[3], 64);
    }
}

/* acc rows [0, 32) of a token block += d s_w, panel by panel. */
A8_INLINE void amx_accumulate(const int32_t (*cbuf)[16][16], float (*acc)[AMX_COLS],
                              const unsigned two, const __m512 *sw)
{
    A8_UNROLL
    for (unsigned r = 0; r < AMX_RB; r++) {
        const unsigned half = r / 16u, rr = r % 16u;
        for (unsigned q = 0; q < 1u + two; q++) {
            const __m512 d =
                _mm512_cvtepi32_ps(_mm512_load_si512((const void *)cbuf[2u * half + q][rr]));
            float *ap = acc[r] + q * A8_PANEL;
            _mm512_store_ps(ap, _mm512_fmadd_ps(d, sw[q], _mm512_load_ps(ap)));
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
        for (size_t b = 0; b <= blocks; b++) {
            if (two) {
                if (b < blocks)
                    amx_tiles(j, s->wexp, 1, g, r0 + b * AMX_RB, s->cbuf[b & 1u]);
                if (b > 0)
                    amx_accumulate((const int32_t (*)[16][16])s->cbuf[(b - 1u) & 1u],
                                   &s->acc[(b - 1u) * AMX_RB], 1, sw);
            } else {
                if (b < blocks)
                    amx_tiles(j, s->wexp, 0, g, r0 + b * AMX_RB, s->cbuf[b & 1u]);
                if (b > 0)
                    amx_accumulate((const int32_t (*)[16][16])s->cbuf[(b - 1u) & 1u],
                                   &s->acc[(b - 1u) * AMX_RB], 0, sw);
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
