/*
 * tests/plugins/amxemu/amx_emu.h — a software model of the AMX
 * instructions plugins/kit/x86/amx_tiles.h wraps, for the test-only builds
 * of the plugins with a tile path (tp_avx512_amxemu: avx512-w4a16's AMX-BF16
 * prefill; tp_amx_w4a8_amxemu: amx-w4a8's AMX-INT8 prefill). Lets their
 * blocking, tile layout and epilogue run and be checked against ref-w4a16 on
 * CPUs without AMX (the development machines have had none so far).
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
 *   - TDPBSUD C, A, B: the same shape rule; then
 *         C[m][n] += sum_{k, i < 4} s8(A[m].byte[4k + i]) * u8(B[k].byte[4n + i])
 *     in int32, wrapping modulo 2^32 (the hardware does not saturate).
 *   - TDPBSSD C, A, B: the same with s8(B[k].byte[4n + i]).
 * An abort names the rule and the tile: the test fails the way a fault on
 * hardware would.
 */
#ifndef EDGERT_AMX_EMU_H
#define EDGERT_AMX_EMU_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct amx_emu_tiles {
    int configured;
    uint8_t rows[8];
    uint16_t colsb[8];
    uint8_t t[8][16][64];
} amx_emu_tiles;

static _Thread_local amx_emu_tiles amx_emu;

__attribute__((noreturn, format(printf, 1, 2))) static void amx_emu_fault(const char *fmt, ...);

#include <stdarg.h>
static void amx_emu_fault(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("amx emulator: fault: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

static inline void amx_emu_config(const amx_tilecfg *c)
{
    if (c->palette != 1u || c->start_row != 0u)
        amx_emu_fault("ldtilecfg: palette %u start_row %u (need 1 and 0)", c->palette,
                      c->start_row);
    for (int i = 0; i < 14; i++)
        if (c->reserved[i] != 0u)
            amx_emu_fault("ldtilecfg: reserved byte %d is %u", i + 2, c->reserved[i]);
    for (int i = 0; i < 16; i++) {
        if (i >= 8 ? (c->rows[i] != 0u || c->colsb[i] != 0u)
                   : (c->rows[i] > 16u || c->colsb[i] > 64u || c->colsb[i] % 4u != 0u ||
                      (c->rows[i] == 0u) != (c->colsb[i] == 0u)))
            amx_emu_fault("ldtilecfg: tile %d rows %u colsb %u invalid", i, c->rows[i],
                          c->colsb[i]);
    }
    memset(&amx_emu, 0, sizeof amx_emu);
    amx_emu.configured = 1;
    for (int i = 0; i < 8; i++) {
        amx_emu.rows[i] = c->rows[i];
        amx_emu.colsb[i] = c->colsb[i];
    }
}

static inline void amx_emu_use(int t, const char *op)
{
    if (!amx_emu.configured)
        amx_emu_fault("%s tmm%d without a loaded tile configuration", op, t);
    if (amx_emu.rows[t] == 0u)
        amx_emu_fault("%s tmm%d: the tile is not configured (rows 0)", op, t);
}

static inline void amx_emu_load(int t, const void *base, long stride)
{
    amx_emu_use(t, "tileloadd");
    memset(amx_emu.t[t], 0, sizeof amx_emu.t[t]);
    for (unsigned r = 0; r < amx_emu.rows[t]; r++)
        memcpy(amx_emu.t[t][r], (const uint8_t *)base + (long)r * stride, amx_emu.colsb[t]);
}

static inline void amx_emu_store(int t, void *base, long stride)
{
    amx_emu_use(t, "tilestored");
    for (unsigned r = 0; r < amx_emu.rows[t]; r++)
        memcpy((uint8_t *)base + (long)r * stride, amx_emu.t[t][r], amx_emu.colsb[t]);
}

static inline void amx_emu_zero(int t)
{
    amx_emu_use(t, "tilezero");
    memset(amx_emu.t[t], 0, sizeof amx_emu.t[t]);
}

static inline float amx_emu_ftz(float v)
{
    return fabsf(v) < 0x1p-126f ? copysignf(0.0f, v) : v;
}

static inline float amx_emu_bf16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return amx_emu_ftz(f);
}

static inline void amx_emu_dpbf16ps(int c, int a, int b)
{
    amx_emu_use(c, "tdpbf16ps (dst)");
    amx_emu_use(a, "tdpbf16ps (src1)");
    amx_emu_use(b, "tdpbf16ps (src2)");
    if (amx_emu.rows[a] != amx_emu.rows[c] || amx_emu.colsb[a] / 4u != amx_emu.rows[b] ||
        amx_emu.colsb[b] != amx_emu.colsb[c])
        amx_emu_fault("tdpbf16ps tmm%d, tmm%d, tmm%d: shapes C %ux%u A %ux%u B %ux%u do not match",
                     c, a, b, amx_emu.rows[c], amx_emu.colsb[c], amx_emu.rows[a], amx_emu.colsb[a],
                     amx_emu.rows[b], amx_emu.colsb[b]);
    const unsigned M = amx_emu.rows[c], N = amx_emu.colsb[c] / 4u, K = amx_emu.colsb[a] / 4u;
    float af[16][32], bf[16][32]; /* the bf16 elements as fp32, flushed */
    for (unsigned r = 0; r < 16u; r++) {
        for (unsigned e = 0; e < 32u; e++) {
            af[r][e] = amx_emu_bf16(&amx_emu.t[a][r][2u * e]);
            bf[r][e] = amx_emu_bf16(&amx_emu.t[b][r][2u * e]);
        }
    }
    for (unsigned m = 0; m < M; m++) {
        for (unsigned n = 0; n < N; n++) {
            float acc;
            memcpy(&acc, &amx_emu.t[c][m][4u * n], 4);
            acc = amx_emu_ftz(acc);
            for (unsigned k = 0; k < K; k++) {
                acc += af[m][2u * k] * bf[k][2u * n];
                acc += af[m][2u * k + 1u] * bf[k][2u * n + 1u];
                acc = amx_emu_ftz(acc);
            }
            memcpy(&amx_emu.t[c][m][4u * n], &acc, 4);
        }
    }
}

/* TDPBSUD (b_signed 0) and TDPBSSD (b_signed 1). */
static inline void amx_emu_dpb_int8(int c, int a, int b, int b_signed, const char *name)
{
    amx_emu_use(c, name);
    amx_emu_use(a, name);
    amx_emu_use(b, name);
    if (amx_emu.rows[a] != amx_emu.rows[c] || amx_emu.colsb[a] / 4u != amx_emu.rows[b] ||
        amx_emu.colsb[b] != amx_emu.colsb[c])
        amx_emu_fault("%s tmm%d, tmm%d, tmm%d: shapes C %ux%u A %ux%u B %ux%u do not match",
                      name, c, a, b, amx_emu.rows[c], amx_emu.colsb[c], amx_emu.rows[a],
                      amx_emu.colsb[a], amx_emu.rows[b], amx_emu.colsb[b]);
    const unsigned M = amx_emu.rows[c], N = amx_emu.colsb[c] / 4u, K = amx_emu.colsb[a] / 4u;
    for (unsigned m = 0; m < M; m++) {
        for (unsigned n = 0; n < N; n++) {
            uint32_t acc;
            memcpy(&acc, &amx_emu.t[c][m][4u * n], 4);
            for (unsigned k = 0; k < K; k++)
                for (unsigned i = 0; i < 4u; i++) {
                    const uint8_t bb = amx_emu.t[b][k][4u * n + i];
                    const int32_t bv = b_signed ? (int32_t)(int8_t)bb : (int32_t)bb;
                    acc += (uint32_t)((int32_t)(int8_t)amx_emu.t[a][m][4u * k + i] * bv);
                }
            memcpy(&amx_emu.t[c][m][4u * n], &acc, 4);
        }
    }
}

#define AMX_TILE_CONFIG(cfg) amx_emu_config((const amx_tilecfg *)(cfg))
#define AMX_TILE_RELEASE() memset(&amx_emu, 0, sizeof amx_emu)
#define AMX_TILE_ZERO(t) amx_emu_zero(t)
#define AMX_TILE_LOAD(t, base, stride) amx_emu_load((t), (base), (long)(stride))
#define AMX_TILE_STORE(t, base, stride) amx_emu_store((t), (base), (long)(stride))
#define AMX_TILE_DPBF16PS(c, a, b) amx_emu_dpbf16ps((c), (a), (b))
#define AMX_TILE_DPBSUD(c, a, b) amx_emu_dpb_int8((c), (a), (b), 0, "tdpbsud")
#define AMX_TILE_DPBSSD(c, a, b) amx_emu_dpb_int8((c), (a), (b), 1, "tdpbssd")

#endif /* EDGERT_AMX_EMU_H */
