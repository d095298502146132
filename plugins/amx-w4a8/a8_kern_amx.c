/*
 * plugins/amx-w4a8/a8_kern_amx.c — path "amx", prefill on AMX-INT8 tiles.
 * (Its decode is the VNNI GEMV, a8_kern_vnni.c.) Compiled with -mavx512f
 * -mavx512bw -mavx512vl; the tile instructions are inline assembly
 * (plugins/common/amx_tiles.h, whose asm names every byte of the tile
 * configuration and fences every tile load and store, so GCC cannot drop
 * or sink the stores that fill them: the SIGILL llama.cpp's AMX path meets
 * under GCC 12).
 *
 * Per parallel_for item of up to A8_AMX_PB panels (64 columns), per group g:
 *   expand the item's codes of group g once (a8_expand: 2 KiB per panel;
 *   each panel's 32 steps are two B tiles of 16 rows x 64 bytes, the VNNI
 *   quads TDPBSUD reads, row stride P * 64);
 *   for each block of 32 tokens, for each pair of panels:
 *     C (4 tiles: 2 token halves x 2 panels, int32 16 x 16) =
 *       sum over the group's 2 steps of 64 inputs of
 *       A (2 tiles, 16 tokens x 64 signed activation codes) .
 *       B (2 tiles, 16 quads x 16 columns of unsigned weight codes);
 *     y += (s_w s_x) (C - 8 sum a)   per (token, column), AVX-512 on the stored C.
 * Every product and sum in the tiles is an exact integer (|C| < 2^18), so
 * the path's results equal path vnni's up to the order of fp32 additions
 * across groups (none: both add the groups in order): the same bits.
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

_Static_assert(AMX_RB == A8_AMX_ROW_PAD, "a8_internal.h's padding must match the token block");

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

/* One group of one token block for panels (pp, pp + 1 if two) of the item. */
A8_INLINE void amx_tiles(const a8_job *j, const uint8_t *wexp, unsigned P, unsigned pp,
                         const unsigned two, uint32_t g, size_t r0, int32_t (*cbuf)[16][16])
{
    const size_t arb = j->act_row_bytes;
    const int8_t *a0 = j->act + r0 * arb + (size_t)g * A8_GROUP;
    const size_t bstride = (size_t)P * 64u;

    AMX_TILE_ZERO(0);
    AMX_TILE_ZERO(2);
    if (two) {
        AMX_TILE_ZERO(1);
        AMX_TILE_ZERO(3);
    }
    for (unsigned h = 0; h < 2u; h++) {
        const int8_t *as = a0 + 64u * h; /* inputs 64 h .. 64 h + 63 of the group */
        const uint8_t *bs = wexp + ((size_t)16u * h * P + pp) * 64u;
        AMX_TILE_LOAD(4, as, arb);
        AMX_TILE_LOAD(5, as + 16u * arb, arb);
        AMX_TILE_LOAD(6, bs, bstride);
        AMX_TILE_DPBSUD(0, 4, 6);
        AMX_TILE_DPBSUD(2, 5, 6);
        if (two) {
            AMX_TILE_LOAD(7, bs + 64u, bstride);
            AMX_TILE_DPBSUD(1, 4, 7);
            AMX_TILE_DPBSUD(3, 5, 7);
        }
    }
    AMX_TILE_STORE(0, cbuf[0], 64);
    AMX_TILE_STORE(2, cbuf[2], 64);
    if (two) {
        AMX_TILE_STORE(1, cbuf[1], 64);
        AMX_TILE_STORE(3, cbuf[3], 64);
    }
}

/* y rows [r0, min(r0 + 32, m)) of panels p, p + 1 (if two) from the stored C. */
A8_INLINE void amx_epilogue(const a8_job *j, const int32_t (*cbuf)[16][16], size_t r0,
                            size_t pcol, uint32_t g, const unsigned two, const __m512 *sw,
                            const __mmask16 *mask)
{
    const size_t rows = j->m - r0 < AMX_RB ? j->m - r0 : AMX_RB;
    for (size_t r = 0; r < rows; r++) {
        const __m512i a8 = _mm512_set1_epi32(j->asum8[(r0 + r) * j->w->groups + g]);
        const __m512 sx = _mm512_set1_ps(j->sx[r0 + r]);
        float *yr = j->y + (r0 + r) * j->ldy + pcol * A8_PANEL;
        const unsigned half = (unsigned)(r / 16u), rr = (unsigned)(r % 16u);
        for (unsigned q = 0; q < 1u + two; q++) {
            __m512i c = _mm512_load_si512((const void *)cbuf[2u * half + q][rr]);
            __m512 d = _mm512_cvtepi32_ps(_mm512_sub_epi32(c, a8));
            a8_y_add(yr + q * A8_PANEL, mask[q], g == 0u,
                     _mm512_mul_ps(d, _mm512_mul_ps(sw[q], sx)));
        }
    }
}

static void amx_item(const a8_job *j, size_t p0, unsigned P, uint8_t *wexp,
                     int32_t (*cbuf)[16][16])
{
    const a8_packed *w = j->w;
    __mmask16 mask[AMX_NB];
    for (unsigned p = 0; p < P; p++)
        mask[p] = a8_panel_mask(w, p0 + p);
    for (uint32_t g = 0; g < w->groups; g++) {
        __m512 sw[AMX_NB];
        for (unsigned p = 0; p < P; p++)
            sw[p] = a8_scales(w, p0 + p, g);
        a8_expand(w, p0, P, g, wexp);
        for (size_t r0 = 0; r0 < j->m; r0 += AMX_RB) {
            for (unsigned pp = 0; pp < P; pp += 2u) {
                const unsigned two = pp + 1u < P;
                if (two)
                    amx_tiles(j, wexp, P, pp, 1, g, r0, cbuf);
                else
                    amx_tiles(j, wexp, P, pp, 0, g, r0, cbuf);
                amx_epilogue(j, (const int32_t (*)[16][16])cbuf, r0, p0 + pp, g, two, &sw[pp],
                             &mask[pp]);
            }
        }
    }
}

void a8_amx_prefill(void *arg, size_t begin, size_t end, unsigned worker)
{
    const a8_job *j = arg;
    const a8_packed *w = j->w;
    (void)worker;
    _Alignas(64) uint8_t wexp[A8_STEPS * AMX_NB * 64u]; /* 8 KiB */
    _Alignas(64) int32_t cbuf[4][16][16];               /* 4 KiB: the C tiles */
    amx_configure();
    for (size_t b = begin; b < end; b++) {
        const size_t p0 = b * AMX_NB;
        const unsigned P = w->panels - p0 < AMX_NB ? (unsigned)(w->panels - p0) : AMX_NB;
        amx_item(j, p0, P, wexp, cbuf);
    }
    AMX_TILE_RELEASE();
}
