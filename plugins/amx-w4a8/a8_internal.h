/*
 * plugins/amx-w4a8/a8_internal.h — what the dispatch file (amx_w4a8.c,
 * built without ISA flags) shares with the kernel files (a8_kern_*.c, each
 * built with its own -mavx512* flags). Nothing in here emits AVX-512 code.
 *
 * W4A8 (architecture.md, Selection, the speed choice): symmetric int4 weights (zero point
 * fixed at 8, GPTQ's symmetric form), one scale per (column, group of 128),
 * activations quantized to int8 at run time with a scale per group of 128
 * inputs (or per token: option act_scale=token), integer dot products, fp32
 * epilogue.
 *
 * ---- Packed layout "amx-w4a8/1" (one layout for decode and prefill, both paths) ----
 *
 * Output columns (rows of W) are cut into panels of A8_PANEL = 16 columns,
 * one per dword lane of a zmm register. A panel holds the groups in pairs
 * (groups 2b and 2b + 1), each pair = 2112 bytes:
 *   codes of group 2b, codes of group 2b + 1: 1024 bytes each, 16 octets t
 *           of 64 bytes (one zmm); dword lane j of octet t holds the 8 codes
 *           of column 16p + j for inputs k = 128 g + 8 t + 0..7,
 *           byte i (i = 0..3) = code(k_i) | code(k_{i+4}) << 4;
 *   scales: one 64-byte line, 16 fp16 for group 2b then 16 for group 2b + 1:
 *           the scale of column 16p + j, group g, rounded to nearest fp16.
 * When K / 128 is odd, the last pair holds one group's codes and a line
 * whose second half is zero. Panels follow each other, and within a panel
 * codes and scales come in the order decode reads them: a thread that owns
 * a range of panels reads one contiguous stream, which the software
 * prefetch of every line (and the hardware's) follows. Bits per weight:
 * 4 + 16 / 128 = 4.125 (plus the zero padding of the last panel when
 * n % 16 != 0, of the last scale line when K / 128 is odd, and a 128-byte
 * header).
 *
 * Asymmetric weights (a zero point other than 8 anywhere in the tensor; the
 * header's flags then lack PK_BLOB_SYMMETRIC): the same panels with one more
 * 64-byte line after every second pair (after the last pair when fewer are
 * left), the zero points of those four groups, 16 bytes a group, byte j =
 * the zero point (0..15) of column 16p + j; the rest of a last partial line
 * zero. Bits per weight 4 + 16 / 128 + 8 / 128 = 4.1875: the codes and
 * scales of a symmetric tensor sit where they would, shifted by the lines
 * before them. A tensor whose zero points are all 8 packs symmetric.
 *
 * Why that nibble order: one 64-byte load v feeds both paths with one mask
 * and one shift-and-mask:
 *   v & 0x0F..          = bytes (k0, k1, k2, k3) of each lane: 4 inputs in
 *                         order, one vpdpbusd step against the activation
 *                         bytes (x0, x1, x2, x3) broadcast, and one row of an
 *                         AMX B tile (VNNI quads);
 *   (v >> 4) & 0x0F..   = bytes (k4, k5, k6, k7): the next step.
 * Activations therefore stay in their natural order.
 *
 * Zero point and scales are never applied per weight: per (token, column,
 * group) the kernels compute, all in int32 and exact,
 *   d = sum_k a_k q_k  -  z sum_k a_k      (|d| <= 128 * 127 * 15 < 2^18)
 * with a the token's int8 codes, q the weight codes, z the zero point (8,
 * or the column's for the group), and sum_k a_k over the group computed
 * once per (token, group) in prep; then in fp32, per group
 * in group order from 0 and on every path in the same operations,
 *   y = fma(d, s_w * s_g, y)     and finally  y *= s_x   (per token).
 * fp16 scales are exact in fp32.
 *
 * Activations (prep, once per call and token, shared by every column), in
 * one of two modes (option act_scale, the instance's):
 *   group (default): one scale per group of 128 inputs, the weights'
 *     group: m_g = max_{k in g} |x_k|, s_g = m_g / 127 (fp32), a_k =
 *     rint(x_k * (127 / m_g)) in [-127, 127] (round half to even); s_x = 1.
 *     A group of zeros gets a = 0, s_g = 0.
 *   token: one scale per token, the form W4A8 had first: m = max_k |x_k|,
 *     s_x = m / 127, a_k = rint(x_k * (127 / m)); s_g = 1, so s_w * s_g is
 *     s_w exactly and the bits are the per-token kernel's.
 * Why per group: a few outlier channels set a token's max, and with one
 * scale per token every other channel's grid is that coarse. On `edgert
 * verify`'s LLM-like activations (outlier channels) the group scale is
 * what closes most of W4A8's gap to W4A16 on the same weights
 * (docs/measurements.md has the figures).
 * A token that holds a NaN or an infinity gets s_x = NaN in either mode:
 * its whole output row is NaN. m = 0 gives a = 0, y = 0.
 *
 * ---- In memory, and as mappable bytes (plugin ABI 2) -----------------------------
 *
 * pack makes one allocation: the a8_packed handle (rounded up to 64 bytes),
 * then the position-independent bytes, layout "amx-w4a8/1" (A8_LAYOUT): the
 * kit's 128-byte pk_blob_header (magic A8_BLOB_MAGIC, version, n, k, group
 * 128, one section) and the panels from offset 128. Both paths read the
 * same bytes. packed_map checks them (plugin_kit.c) and allocates only an
 * a8_packed whose `data` points at the caller's panels. Any fp16 bit pattern
 * is a valid scale (a NaN or infinite one gives NaN or infinite outputs,
 * nothing worse), so nothing past the header needs checking for safety.
 */
#ifndef A8_INTERNAL_H
#define A8_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#include "edgert/plugin.h"
#include "edgert/version.h"
#include "plugin_kit_x86.h"

/* The test-only build on the AMX tile model is a plugin of its own. */
#ifdef EDGERT_AMX_EMULATE
#define A8_NAME "amx-w4a8-amxemu"
#else
#define A8_NAME "amx-w4a8"
#endif
#define A8_VERSION EDGERT_VERSION_STRING

#define A8_PANEL 16u        /* output columns per panel (zmm dword lanes) */
#define A8_GROUP 128u       /* inputs per group: the only group size accepted */
#define A8_OCTETS 16u       /* 8-input octets per group */
#define A8_CODE_BYTES 1024u /* codes of one (panel, group) block */
#define A8_SCALE_ROW 32u    /* 16 fp16 scales of one (panel, group) */
#define A8_PAIR_BYTES (2u * A8_CODE_BYTES + 64u) /* two groups' codes and scales */
#define A8_STEPS 32u        /* 4-input steps per group (vpdpbusd / B tile rows) */
#define A8_ALIGN 64u
#define A8_PACKED_MAGIC 0x38613461u /* "a4a8": the in-memory handle */
#define A8_BLOB_MAGIC 0x50386134u   /* "4a8P": the packed bytes */
#define A8_LAYOUT_VERSION 1u        /* change with the meaning of the bytes ... */
#define A8_LAYOUT "amx-w4a8/1"      /* ... and this id with it */

/*
 * Rows of x up to which gemm runs the streaming kernel (the VNNI GEMV,
 * A8_DECODE_RB tokens per pass over a panel's codes, the panel then in
 * L1/L2 for the next pass); above it the prefill kernels expand each
 * (panel, group) block once and reuse it for every row. Measured on the
 * development machine (AMD EPYC Zen 5, 2 threads, spark-1.7b, 2026-12): on
 * path vnni the streaming kernel was faster at EVERY m from 4 to 512 (821
 * vs 630 GFLOP/s at m = 64, 794 vs 587 at m = 512), because the register
 * tile then added into y per group, 8 rows of y in the same few L1 sets,
 * and read its tokens row-major the same way. With its sums in an L1
 * buffer across the groups and group-major tokens (a8_kern_vnni.c) the
 * tile won above m = 16 on a 2-core Xeon with AMX (streaming vs tile,
 * two alternating runs: m = 8 730/706 vs 697/575, m = 16 783/754 vs
 * 757/873, m = 32 740/768 vs 1033/946, m = 512 826-830 vs 1169-1179), so
 * path vnni streams up to A8_VNNI_DECODE_MAX_M = 16. Not re-measured on
 * Zen 5.
 * Path amx switches to the tiles above A8_DECODE_MAX_M = 8: the crossover
 * measured on real tiles (2-core Xeon, spark-1.7b, two alternating runs,
 * GFLOP/s streaming vs tiles: m = 4 556/563 vs 251/89, m = 8 622/627 vs
 * 531/550, m = 12 542/683 vs 674/749, m = 16 641/663 vs 1105/944). The
 * option decode_max_m=N sets it.
 */
#define A8_DECODE_MAX_M 8u
#define A8_VNNI_DECODE_MAX_M 16u
#define A8_DECODE_RB 4u

/* VNNI prefill: panels per register tile and per parallel_for item. */
#define A8_PREFILL_PB 3u
/* AMX prefill: panels per parallel_for item; rows the activation scratch is
 * padded to (zero rows) so every A tile is full; tokens per chunk of the
 * fp32 accumulators; bytes of one worker's scratch (C tiles 4 KiB, the
 * group's B tiles 4 KiB, the accumulators A8_AMX_RC x 32 floats). Longer
 * chunks expand each group's codes for more tokens: on the Xeon with AMX,
 * bench prefill M = 512, 256 -> 512 tokens ran 2709 -> 2834 GOP/s (medians
 * of 4 interleaved rounds, better in each). */
#define A8_AMX_PB 2u
#define A8_AMX_ROW_PAD 32u
#define A8_AMX_RC 512u
#define A8_AMX_SCRATCH (4096u + A8_STEPS * A8_AMX_PB * 64u + A8_AMX_RC * A8_AMX_PB * 64u)

typedef enum a8_path {
    A8_PATH_VNNI = 0, /* AVX512_VNNI decode and prefill */
    A8_PATH_AMX = 1,  /* AMX-INT8 tiles for prefill, VNNI decode */
    A8_PATH_AVX2 = 2, /* AVX2 vpmaddubsw GEMV for every m (a8_kern_avx2.c) */
    A8_PATH_AVXVNNI = 3, /* AVX-VNNI vpdpbusd on ymm, GEMV for every m (a8_kern_avxvnni.c) */
    A8_PATH_COUNT
} a8_path;

/* The paths for CPUs without AVX-512 (256-bit, a8_kern256.h). */
static inline int a8_is_256(a8_path p)
{
    return p == A8_PATH_AVX2 || p == A8_PATH_AVXVNNI;
}

typedef struct a8_packed {
    uint32_t magic;
    uint32_t n, k;
    uint32_t groups;      /* k / 128 */
    uint32_t panels;      /* ceil(n / 16) */
    uint32_t panel_bytes; /* a8_panel_bytes */
    int asym;             /* zero points per (column, group): layout flag, a8_zeros_at */
    uint32_t last_quad;   /* asym: (groups - 1) / 4, and the offset in that quad ... */
    uint32_t zline_last;  /* ... of its zero-point line (a8_zeros_off) */
    const uint8_t *data;  /* the panels, 64-byte aligned */
    const void *blob;     /* the packed bytes: pk_blob_header, then the panels */
    size_t blob_bytes;
    char name[40];        /* for error messages; truncated */
    pk_pf_seen pf_seen;   /* its m = 1 calls, for prefetch=auto (plugin_kit.h) */
} a8_packed;

/* Bytes of one panel of `groups` groups (asym: with a zero-point line per
 * four groups). */
static inline size_t a8_panel_bytes(uint32_t groups, int asym)
{
    return (size_t)groups * A8_CODE_BYTES + (size_t)(groups / 2u + (groups & 1u)) * 64u +
           (asym ? (size_t)(groups / 4u + (groups % 4u != 0u)) * 64u : 0u);
}

/* Offset in a panel of pair pi (groups 2 pi and 2 pi + 1): every pair before
 * it is whole; asym, a zero-point line after every second pair. */
static inline size_t a8_pair_at(int asym, uint32_t pi)
{
    return (size_t)pi * A8_PAIR_BYTES + (asym ? (size_t)(pi / 2u) * 64u : 0u);
}

/* Offsets in a panel of group g's codes and of its 16 scales. */
static inline size_t a8_codes_at(int asym, uint32_t g)
{
    return a8_pair_at(asym, g / 2u) + (size_t)(g & 1u) * A8_CODE_BYTES;
}

static inline size_t a8_scales_at(int asym, uint32_t groups, uint32_t g)
{
    const uint32_t first = g & ~1u, in_pair = groups - first >= 2u ? 2u : 1u;
    return a8_pair_at(asym, g / 2u) + (size_t)in_pair * A8_CODE_BYTES +
           (size_t)(g & 1u) * A8_SCALE_ROW;
}

#define A8_QUAD_BYTES (2u * A8_PAIR_BYTES + 64u) /* asym: four groups and their zeros */
#define A8_QUAD_ZLINE (4u * A8_CODE_BYTES + 128u) /* where a whole quad's zeros are */

/* Offset in an asymmetric panel of group g's 16 zero points (bytes): the
 * line after the pairs of its quad (groups 4q .. 4q + 3), 16 bytes a group. */
static inline size_t a8_zeros_at(uint32_t groups, uint32_t g)
{
    const uint32_t q0 = g & ~3u, in_quad = groups - q0 >= 4u ? 4u : groups - q0;
    return a8_pair_at(1, q0 / 2u) + (size_t)in_quad * A8_CODE_BYTES +
           (size_t)(in_quad / 2u + (in_quad & 1u)) * 64u + (size_t)(g & 3u) * A8_PANEL;
}

/* a8_zeros_at for the kernels, from what the handle keeps (a8_handle): a
 * multiply, a compare and two adds per group. */
static inline size_t a8_zeros_off(const a8_packed *w, uint32_t g)
{
    const uint32_t q = g >> 2;
    return (size_t)q * A8_QUAD_BYTES + (q == w->last_quad ? w->zline_last : A8_QUAD_ZLINE) +
           (size_t)(g & 3u) * A8_PANEL;
}

/*
 * One GEMM call, shared read-only by all chunks of its parallel_for.
 * act     int8: the tokens' codes a, group g of token i (128 bytes in input
 *         order) at act + i act_row_bytes + g act_group_bytes. Row-major
 *         (act_row_bytes = k rounded up to 64, act_group_bytes = 128) for
 *         the GEMV (decode); group-major for both prefills, tiles and VNNI
 *         (act_row_bytes = 128, act_group_bytes = rows x 128), so that a
 *         group's tokens are contiguous and an A tile is 16 consecutive
 *         128-byte rows (row-major, a group's tokens are k bytes apart and
 *         fall in a few L1 sets). Rows are padded with zero rows to the
 *         prefill kernel's row pad.
 * asum8   int32 [m][groups]: 8 * sum of the group's codes (asym: its
 *         eighth, times the zero points)
 * sg      fp32 [rows][groups]: the group's activation scale s_g (1 in mode
 *         token; the padding rows' 0): the epilogue multiplies s_w by it
 * sx      fp32 [m]: the token's scale s_x (1 in mode group; NaN: the row
 *         holds a non-finite x)
 * tile_scratch  path amx's prefill: A8_AMX_SCRATCH bytes per worker of the
 *         call (parallel_for's `worker`), 64-byte aligned; NULL otherwise
 */
typedef struct a8_job {
    const a8_packed *w;
    uint32_t m;
    const float *x;
    size_t ldx;
    float *y;
    size_t ldy;
    int8_t *act;
    size_t act_row_bytes;
    size_t act_group_bytes;
    int32_t *asum8;
    float *sg;
    float *sx;
    int act_group; /* activation scales per group (1) or per token (0) */
    uint8_t *tile_scratch;
    int pf_near; /* decode's prefetch reading one stream (PK_PF_*, a8_kern.h) */
    int pf_streams;   /* and reading `streams` panels side by side */
    unsigned streams; /* decode, m = 1: panels read side by side (1, 2 or 4) */
} a8_job;


/* Both preps (plain C, no ISA code): group g of token i has codes 0 and
 * scale 0, a group of zeros; and token i's every group so, its s_x NaN
 * (`bad`: a non-finite x) or 0 (a row of zeros). */
static inline void a8_prep_zero_group(const a8_job *j, size_t i, uint32_t g)
{
    memset(j->act + i * j->act_row_bytes + g * j->act_group_bytes, 0, A8_GROUP);
    j->asum8[i * j->w->groups + g] = 0;
    j->sg[i * j->w->groups + g] = 0.0f;
}

static inline void a8_prep_zero_row(const a8_job *j, size_t i, int bad)
{
    for (uint32_t g = 0; g < j->w->groups; g++)
        a8_prep_zero_group(j, i, g);
    j->sx[i] = bad ? NAN : 0.0f;
}

/* Defined in the kernel files; only called after init checked the flags. */
void a8_prep(void *job, size_t begin, size_t end, unsigned worker);
void a8_vnni_decode(void *job, size_t begin, size_t end, unsigned worker);
void a8_vnni_prefill(void *job, size_t begin, size_t end, unsigned worker);
void a8_amx_prefill(void *job, size_t begin, size_t end, unsigned worker);
void a8_avx2_prep(void *job, size_t begin, size_t end, unsigned worker);
void a8_avx2_decode(void *job, size_t begin, size_t end, unsigned worker);
void a8_avx2_prefill(void *job, size_t begin, size_t end, unsigned worker);
void a8_avxvnni_decode(void *job, size_t begin, size_t end, unsigned worker);
void a8_avxvnni_prefill(void *job, size_t begin, size_t end, unsigned worker);

#endif /* A8_INTERNAL_H */
