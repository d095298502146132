/*
 * plugins/avx512-w4a16/aw_amx.h — the AMX tile operations the "amx" path
 * uses, as macros over inline assembly. Included only by aw_kern_amx.c.
 *
 * Why not GCC 12's <amxtileintrin.h>: its asm statements under-declare
 * memory. _tile_loadconfig says it reads 8 bytes of the 64-byte
 * configuration (`"m" (*(const void **)cfg)`), so GCC may drop or sink the
 * stores that fill the rest of it; _tile_loadd declares no memory input at
 * all, so the AVX-512 stores that fill a buffer which only tileloadd reads
 * are dead stores to the compiler and may be removed or moved after the
 * load. Here ldtilecfg names the whole 64-byte configuration as its input
 * and every tile load and store clobbers "memory" (a compiler barrier: every
 * store before it in program order is done, no load after it is hoisted).
 * Raw assembly also needs no -mamx-* flag: binutils >= 2.36 assembles AMX,
 * and the instructions are reached only after init checked amx_tile and
 * amx_bf16 in the host's usable CPU flags.
 *
 * Tile numbers are literal operands of the instruction, so the macros take
 * constants 0..7.
 *
 * Test builds define AW_AMX_EMULATE: the same kernel source then runs on an
 * emulation of these instructions (tests/plugins/amxemu/aw_amx_emu.h) that
 * checks the shapes the way the hardware does (#UD on a mismatched tile
 * configuration, on a tile used before ldtilecfg or after tilerelease), so
 * the blocking, the layout of the tiles and the epilogue are tested on CPUs
 * without AMX. The encodings themselves are only exercised on AMX hardware
 * (the plugin's self-test at open runs the prefill tiles there).
 */
#ifndef AW_AMX_H
#define AW_AMX_H

#include <stdint.h>

/* Tile configuration, palette 1 (SDM vol. 1, 3.2: 64 bytes). */
typedef struct aw_tilecfg {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16]; /* bytes per row of tile i */
    uint8_t rows[16];   /* rows of tile i */
} __attribute__((aligned(64))) aw_tilecfg;

_Static_assert(sizeof(aw_tilecfg) == 64, "the AMX tile configuration is 64 bytes");

#ifdef AW_AMX_EMULATE
#include "aw_amx_emu.h"
#else

#define AW_STR_(x) #x
#define AW_STR(x) AW_STR_(x)

#define AW_TILE_CONFIG(cfg)                                                                   \
    __asm__ volatile("ldtilecfg %0" ::"m"(*(const aw_tilecfg *)(cfg)) : "memory")
#define AW_TILE_RELEASE() __asm__ volatile("tilerelease" ::: "memory")
#define AW_TILE_ZERO(t) __asm__ volatile("tilezero %%tmm" AW_STR(t)::)
#define AW_TILE_LOAD(t, base, stride)                                                         \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" AW_STR(t)::"r"((const void *)(base)),       \
                     "r"((long)(stride))                                                      \
                     : "memory")
#define AW_TILE_STORE(t, base, stride)                                                        \
    __asm__ volatile("tilestored %%tmm" AW_STR(t) ", (%0,%1,1)" ::"r"((void *)(base)),        \
                     "r"((long)(stride))                                                      \
                     : "memory")
/* C += A . B, bf16 pairs, fp32 accumulate (AT&T order: src2, src1, dst). */
#define AW_TILE_DPBF16PS(c, a, b)                                                             \
    __asm__ volatile("tdpbf16ps %%tmm" AW_STR(b) ", %%tmm" AW_STR(a) ", %%tmm" AW_STR(c)::)

#endif /* AW_AMX_EMULATE */

#endif /* AW_AMX_H */
