/*
 * plugins/kit/x86/amx_tiles.h — the AMX tile operations of the in-tree
 * plugins' tile paths (avx512-w4a16's path amx: AMX-BF16; amx-w4a8's path
 * amx: AMX-INT8), as macros over inline assembly. Included only by their
 * tile kernel files (aw_kern_amx.c, a8_kern_amx.c).
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
 * amx_bf16 or amx_int8 in the host's usable CPU flags.
 *
 * Tile numbers are literal operands of the instruction, so the macros take
 * constants 0..7.
 *
 * Test builds define EDGERT_AMX_EMULATE: the same kernel source then runs on an
 * emulation of these instructions (tests/plugins/amxemu/amx_emu.h) that
 * checks the shapes the way the hardware does (#UD on a mismatched tile
 * configuration, on a tile used before ldtilecfg or after tilerelease), so
 * the blocking, the layout of the tiles and the epilogue are tested on CPUs
 * without AMX. The encodings themselves are only exercised on AMX hardware
 * (the plugin's self-test at open runs the prefill tiles there).
 */
#ifndef EDGERT_AMX_TILES_H
#define EDGERT_AMX_TILES_H

#include <stdint.h>

/* Tile configuration, palette 1 (SDM vol. 1, 3.2: 64 bytes). */
typedef struct amx_tilecfg {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16]; /* bytes per row of tile i */
    uint8_t rows[16];   /* rows of tile i */
} __attribute__((aligned(64))) amx_tilecfg;

_Static_assert(sizeof(amx_tilecfg) == 64, "the AMX tile configuration is 64 bytes");

#ifdef EDGERT_AMX_EMULATE
#include "amx_emu.h"
#else

#define AMX_STR_(x) #x
#define AMX_STR(x) AMX_STR_(x)

#define AMX_TILE_CONFIG(cfg)                                                                   \
    __asm__ volatile("ldtilecfg %0" ::"m"(*(const amx_tilecfg *)(cfg)) : "memory")
#define AMX_TILE_RELEASE() __asm__ volatile("tilerelease" ::: "memory")
#define AMX_TILE_ZERO(t) __asm__ volatile("tilezero %%tmm" AMX_STR(t)::)
#define AMX_TILE_LOAD(t, base, stride)                                                         \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" AMX_STR(t)::"r"((const void *)(base)),       \
                     "r"((long)(stride))                                                      \
                     : "memory")
#define AMX_TILE_STORE(t, base, stride)                                                        \
    __asm__ volatile("tilestored %%tmm" AMX_STR(t) ", (%0,%1,1)" ::"r"((void *)(base)),        \
                     "r"((long)(stride))                                                      \
                     : "memory")
/* C += A . B, bf16 pairs, fp32 accumulate (AT&T order: src2, src1, dst). */
#define AMX_TILE_DPBF16PS(c, a, b)                                                             \
    __asm__ volatile("tdpbf16ps %%tmm" AMX_STR(b) ", %%tmm" AMX_STR(a) ", %%tmm" AMX_STR(c)::)
/* C += A . B, quads of SIGNED bytes of A times UNSIGNED bytes of B, int32
 * accumulate (AMX-INT8; wraps modulo 2^32 like the hardware). */
#define AMX_TILE_DPBSUD(c, a, b)                                                               \
    __asm__ volatile("tdpbsud %%tmm" AMX_STR(b) ", %%tmm" AMX_STR(a) ", %%tmm" AMX_STR(c)::)
/* The same with SIGNED bytes of both A and B. */
#define AMX_TILE_DPBSSD(c, a, b)                                                               \
    __asm__ volatile("tdpbssd %%tmm" AMX_STR(b) ", %%tmm" AMX_STR(a) ", %%tmm" AMX_STR(c)::)

#endif /* EDGERT_AMX_EMULATE */

#endif /* EDGERT_AMX_TILES_H */
