/*
 * tests/plugins/amxemu/aw_amx_emu.h — a software model of the AMX
 * instructions plugins/avx512-w4a16/aw_amx.h wraps, for the test-only build
 * of that plugin (tp_avx512_amxemu). Lets the amx path's blocking, tile
 * layout and epilogue run and be checked against ref-w4a16 on CPUs without
 * AMX (the development machine has none).
 *
 * Modelled from the Intel SDM (vol. 1 ch. 3 "Intel AMX", vol. 2 TILELOADD,
 * TILESTORED, TILEZERO, TDPBF16PS, LDTILECFG, TILERELEASE), per thread like
 * the hardware's tile state:
 *   - LDTILECFG: palette 1 only, start_row 0, reserved bytes 0, tiles 0..7
 *     with rows <= 16 and colsb <= 64 (colsb a multiple of 4), tiles 8..15
 *     zero; anything else is #GP on hardware and an abort here.
 *   - a tile instruction before LDTILECFG, after TILERELEASE, or on a tile
 *     whose configured rows or colsb is 0, is #UD: abort.
 *   - TILELOADD/TILESTORED move rows x colsb bytes, row r at base + r*stride;
 *     bytes of a row beyond colsb and rows beyond `rows` read as zero.
 *   - TDPBF16PS C, A, B: #UD unless A.rows == C.rows, A.colsb / 4 == B.rows
 *     and B.colsb == C.colsb; then for m < C.rows, n < C.colsb / 4,
 *     k < A.colsb / 4:
 *         C[m][n] += fp32(A[m].bf16[2k]) * fp32(B[k].bf16[2n])
 *                  + fp32(A[m].bf16[2k+1]) * fp32(B[k].bf16[2n+1])
 *     Products of two bf16 are exact in fp32; the sums here round to
 *     nearest in fp32 one add at a time (the hardware's order of additions
 *     is not specified; the kernel's tolerance covers fp32 accumulation).
 *     Denormal inputs and outputs are flushed to zero, as TDPBF16PS does.
 * An abort names the rule and the tile: the test fails the way a fault on
 * hardware would.
 */
#ifndef AW_AMX_EMU_H
#define AW_AMX_EMU_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct aw_emu_tiles {
    int configured;
    uint8_t rows[8];
    uint16_t colsb[8];
    uint8_t t[8][16][64];
} aw_emu_tiles;

static _Thread_local aw_emu_tiles aw_emu;

__attribute__((noreturn, format(printf, 1, 2))) static void aw_emu_fault(const char *fmt, ...);

#include <stdarg.h>
static void aw_emu_fault(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("amx emulator: fault: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

static inline void aw_emu_config(const aw_tilecfg *c)
{
    if (c->palette != 1u || c->start_row != 0u)
        aw_emu_fault("ldtilecfg: palette %u start_row %u (need 1 and 0)", c->palette, c->start_row);
    for (int i = 0; i < 14; i++)
        if (c->reserved[i] != 0u)
            aw_emu_fault("ldtilecfg: reserved byte %d is %u", i + 2, c->reserved[i]);
    for (int i = 0; i < 16; i++) {
        if (i >= 8 ? (c->rows[i] != 0u || c->colsb[i] != 0u)
                   : (c->rows[i] > 16u || c->colsb[i] > 64u || c->colsb[i] % 4u != 0u ||
                      (c->rows[i] == 0u) != (c->colsb[i] == 0u)))
            aw_emu_fault("ldtilecfg: tile %d rows %u colsb %u invalid", i, c->rows[i], c->colsb[i]);
    }
    memset(&aw_emu, 0, sizeof aw_emu);
    aw_emu.configured = 1;
    for (int i = 0; i < 8; i++) {
        aw_emu.rows[i] = c->rows[i];
        aw_emu.colsb[i] = c->colsb[i];
    }
}

static inline void aw_emu_use(int t, const char *op)
{
    if (!aw_emu.configured)
        aw_emu_fault("%s tmm%d without a loaded tile configuration", op, t);
    if (aw_emu.rows[t] == 0u)
        aw_emu_fault("%s tmm%d: the tile is not configured (rows 0)", op, t);
}

static inline void aw_emu_load(int t, const void *base, long stride)
{
    aw_emu_use(t, "tileloadd");
    memset(aw_emu.t[t], 0, sizeof aw_emu.t[t]);
    for (unsigned r = 0; r < aw_emu.rows[t]; r++)
        memcpy(aw_emu.t[t][r], (const uint8_t *)base + (long)r * stride, aw_emu.colsb[t]);
}

static inline void aw_emu_store(int t, void *base, long stride)
{
    aw_emu_use(t, "tilestored");
    for (unsigned r = 0; r < aw_emu.rows[t]; r++)
        memcpy((uint8_t *)base + (long)r * stride, aw_emu.t[t][r], aw_emu.colsb[t]);
}

static inline void aw_emu_zero(int t)
{
    aw_emu_use(t, "tilezero");
    memset(aw_emu.t[t], 0, sizeof aw_emu.t[t]);
}

static inline float aw_emu_ftz(float v)
{
    return fabsf(v) < 0x1p-126f ? copysignf(0.0f, v) : v;
}

static inline float aw_emu_bf16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return aw_emu_ftz(f);
}

static inline void aw_emu_dpbf16ps(int c, int a, int b)
{
    aw_emu_use(c, "tdpbf16ps (dst)");
    aw_emu_use(a, "tdpbf16ps (src1)");
    aw_emu_use(b, "tdpbf16ps (src2)");
    if (aw_emu.rows[a] != aw_emu.rows[c] || aw_emu.colsb[a] / 4u != aw_emu.rows[b] ||
        aw_emu.colsb[b] != aw_emu.colsb[c])
        aw_emu_fault("tdpbf16ps tmm%d, tmm%d, tmm%d: shapes C %ux%u A %ux%u B %ux%u do not match",
                     c, a, b, aw_emu.rows[c], aw_emu.colsb[c], aw_emu.rows[a], aw_emu.colsb[a],
                     aw_emu.rows[b], aw_emu.colsb[b]);
    const unsigned M = aw_emu.rows[c], N = aw_emu.colsb[c] / 4u, K = aw_emu.colsb[a] / 4u;
    float af[16][32], bf[16][32]; /* the bf16 elements as fp32, flushed */
    for (unsigned r = 0; r < 16u; r++) {
        for (unsigned e = 0; e < 32u; e++) {
            af[r][e] = aw_emu_bf16(&aw_emu.t[a][r][2u * e]);
            bf[r][e] = aw_emu_bf16(&aw_emu.t[b][r][2u * e]);
        }
    }
    for (unsigned m = 0; m < M; m++) {
        for (unsigned n = 0; n < N; n++) {
            float acc;
            memcpy(&acc, &aw_emu.t[c][m][4u * n], 4);
            acc = aw_emu_ftz(acc);
            for (unsigned k = 0; k < K; k++) {
                acc += af[m][2u * k] * bf[k][2u * n];
                acc += af[m][2u * k + 1u] * bf[k][2u * n + 1u];
                acc = aw_emu_ftz(acc);
            }
            memcpy(&aw_emu.t[c][m][4u * n], &acc, 4);
        }
    }
}

#define AW_TILE_CONFIG(cfg) aw_emu_config((const aw_tilecfg *)(cfg))
#define AW_TILE_RELEASE() memset(&aw_emu, 0, sizeof aw_emu)
#define AW_TILE_ZERO(t) aw_emu_zero(t)
#define AW_TILE_LOAD(t, base, stride) aw_emu_load((t), (base), (long)(stride))
#define AW_TILE_STORE(t, base, stride) aw_emu_store((t), (base), (long)(stride))
#define AW_TILE_DPBF16PS(c, a, b) aw_emu_dpbf16ps((c), (a), (b))

#endif /* AW_AMX_EMU_H */
