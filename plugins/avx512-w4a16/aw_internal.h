/*
 * plugins/avx512-w4a16/aw_internal.h — what the dispatch file
 * (avx512_w4a16.c, built without ISA flags) shares with the per-ISA kernel
 * files (aw_kern_*.c, each built with its own -mavx512* flags).
 *
 * Nothing in here may emit AVX-512 code: it is included by the dispatch file.
 *
 * ---- Packed layout (one layout for every path, decode and prefill) --------
 *
 * Output columns (rows of W) are cut into panels of AW_PANEL = 16 columns,
 * one per dword lane of a zmm register. A panel holds ceil(K / 128) blocks,
 * one per 128 inputs, stored back to back; panels follow each other, so a
 * thread that owns a range of panels reads one contiguous stream. The
 * weights' group size G is 128, 64 or 32: a block holds S = 128 / G groups
 * (S "sub-groups"), and K is any multiple of G, the last block holding
 * zeros past K (codes 0, meta 0) that the activations, zero there too,
 * never let count.
 *
 *   block (panel p, block g) = 1024 + 64 S bytes (1088 at G = 128):
 *     codes: 16 octets t = 0..15, 64 bytes each (one zmm). Dword lane j holds
 *            the 8 codes of column 16p + j, inputs k = 128g + 8t + 0..7,
 *            nibble i of the dword (bits 4i..4i+3) = code of input
 *              i:    0  1  2  3  4  5  6  7
 *              k:    0  2  4  6  1  3  5  7     (AW_NIB_K below)
 *            i.e. byte 0 = k0 | k2<<4, byte 1 = k4 | k6<<4,
 *                 byte 2 = k1 | k3<<4, byte 3 = k5 | k7<<4.
 *     meta:  S times 16 dwords, sub-group s's lane j = fp32 scale of column
 *            16p + j, weight group S g + s, with its 4 lowest mantissa bits
 *            replaced by the zero point z (0..15); 0 past K.
 *
 * Why that nibble order: one 64-byte load feeds every path with one shift
 * and one mask or table lookup per step —
 *   int16 (vpdpbusd):  v & 0x0F0F0F0F      = bytes (k0, k4, k1, k5)
 *                      (v >> 4) & 0x0F..   = bytes (k2, k6, k3, k7)
 *   bf16 (vdpbf16ps):  vpermw(v >> 4s)     = word pair (k_2s, k_2s+1), s = 0..3,
 *                      through a 32-entry table bf16(i & 15) (vpermw reads
 *                      only the low 5 bits of each word)
 *   fp32 (FMA):        vpermps(v >> 4i)    = code of nibble i as fp32 (vpermps
 *                      reads only the low 4 bits of each dword)
 * Activations are reordered once per call to match (int16), or used in
 * natural order (bf16, fp32).
 *
 * The zero point is never applied per weight: every path computes
 *   y += s * (sum_k x_k q_k  -  z * sum_k x_k)        per (column, group)
 * with sum_k x_k computed once per (row of x, group) from the activations
 * exactly as the kernel sees them (bf16-rounded, or integer). s * z is exact
 * in fp32 (20-bit scale times a 4-bit integer). With S > 1 a kernel's sums
 * over a block are cut at the groups' edges: the epilogue runs S times per
 * block, each on its group's meta (the codes are read once, as at G = 128).
 * Activations are quantized per block of 128 (path int16: one exponent per
 * block), whatever G: finer weight groups change only the epilogue.
 *
 * Scale precision: the canonical fp32 scale is rounded to 20 significant
 * bits (relative change <= 2^-20) to make room for z, so scale and zero point
 * cost 32 bits per group: 4 + 32 / 128 = 4.25 bits per weight, plus headers
 * (below) and the zero padding of the last panel when n % 16 != 0.
 *
 * ---- In memory, and as mappable bytes (plugin ABI 2) -----------------------
 *
 * pack makes one allocation: the aw_packed handle (rounded up to 64 bytes),
 * then the position-independent packed bytes, layout "avx512-w4a16/1"
 * (AW_LAYOUT): the kit's 128-byte pk_blob_header (magic AW_BLOB_MAGIC,
 * version, n, k, group 128, one section) and the panels, back to back, from
 * offset 128. Every path reads the same bytes, so the id does not name a
 * path: bytes packed on one path map on any other (each path's results are
 * its own; the same path gives the same bits). packed_data returns those
 * bytes; packed_map checks them (plugin_kit.c) and allocates only an
 * aw_packed whose `data` points at the caller's panels. Every 32-bit meta
 * word is a valid (scale, zero point) pair, so nothing past the header needs
 * checking for safety.
 */
#ifndef AW_INTERNAL_H
#define AW_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "edgert/plugin.h"
#include "edgert/version.h"
#include "plugin_kit_x86.h"

/* The test-only build on emulated AMX tiles (tests/plugins/amxemu) is a
 * plugin of its own, with its own name. */
#ifdef EDGERT_AMX_EMULATE
#define AW_NAME "avx512-w4a16-amxemu"
#else
#define AW_NAME "avx512-w4a16"
#endif
#define AW_VERSION EDGERT_VERSION_STRING /* in-tree plugins version with edgert */

#define AW_PANEL 16u          /* output columns per panel (zmm dword lanes) */
#define AW_GROUP 128u         /* inputs per block (and the largest group size) */
#define AW_OCTETS 16u         /* 8-input octets per group */
#define AW_CODE_BYTES 1024u   /* codes of one (panel, group) block */
#define AW_META_BYTES 64u     /* scales + zero points of one block */
#define AW_BLOCK_BYTES (AW_CODE_BYTES + AW_META_BYTES) /* at G = 128; aw_packed.block_bytes */
#define AW_ALIGN 64u
#define AW_PACKED_MAGIC 0x36317761u /* "aw16": the in-memory handle */
#define AW_BLOB_MAGIC 0x50317761u   /* "aw1P": the packed bytes */
#define AW_LAYOUT_VERSION 1u        /* change with the meaning of the bytes ... */
#define AW_LAYOUT "avx512-w4a16/1"  /* ... and this id with it (also the amxemu build's) */

/* Rows of x up to which gemm streams the codes directly (GEMV kernel);
 * above it the prefill kernels expand each (panel, group) once into L1 and
 * reuse it for every row. */
#define AW_DECODE_MAX_M 4u

/* Panels per prefill register tile and per parallel_for item in prefill
 * (fma, bf16, int16 paths). */
#define AW_PREFILL_PB 3u

/* Path amx (aw_kern_amx.c): panels per prefill item; the multiple of rows
 * the activation scratch is padded to (with zero rows) so that every A tile
 * is full; rows per chunk of the fp32 accumulators; and one worker's
 * scratch, allocated per call (C of two row blocks 8 KiB, the group's B
 * tiles 8 KiB, the accumulators AW_AMX_RC x 32 floats: 80 KiB in all, too
 * much for the stack of an integrator's thread that runs chunks too).
 * Longer chunks expand each group's codes for more rows: on the Xeon with
 * AMX, bench prefill M = 512, 128 -> 256 rows 1221 -> 1407 GFLOP/s (3
 * rounds), 256 -> 512 1350 -> 1470 (medians of 4 interleaved rounds; the
 * accumulators then live in L2, the codes' expansion once per item). */
#define AW_AMX_PB 2u
#define AW_AMX_ROW_PAD 32u
#define AW_AMX_RC 512u
#define AW_AMX_SCRATCH (8192u + 8192u + AW_AMX_RC * AW_AMX_PB * 64u)

/* Input offset (0..7 within the octet) held by nibble i of a code dword. */
#define AW_NIB_K {0, 2, 4, 6, 1, 3, 5, 7}

typedef enum aw_path {
    AW_PATH_FMA = 0,   /* AVX-512F: fp32 FMA, fp32 activations */
    AW_PATH_BF16 = 1,  /* AVX512_BF16: vdpbf16ps on bf16 activations */
    AW_PATH_INT16 = 2, /* AVX512_VNNI: vpdpbusd on int16 activations in two int8 halves */
    AW_PATH_AMX = 3,   /* AMX-BF16 tiles for prefill, bf16 activations, bf16 GEMV decode */
    AW_PATH_COUNT
} aw_path;

typedef struct aw_packed {
    uint32_t magic;
    uint32_t n, k;
    uint32_t groups;      /* blocks: ceil(k / 128) */
    uint32_t panels;      /* ceil(n / 16) */
    uint32_t panel_bytes; /* groups * block_bytes (< 2^32: checked at pack and map) */
    uint32_t group;       /* the weights' group size: 128, 64 or 32 */
    uint32_t sub;         /* groups per block: 128 / group */
    uint32_t block_bytes; /* AW_CODE_BYTES + sub * AW_META_BYTES */
    uint32_t kpad;        /* groups * 128: k rounded up to whole blocks */
    const uint8_t *data;  /* the panels, 64-byte aligned (aw_data) */
    const void *blob;     /* the packed bytes: pk_blob_header, then the panels */
    size_t blob_bytes;
    char name[40];        /* for error messages; truncated */
    pk_pf_seen pf_seen;   /* its m = 1 calls, for prefetch=auto (plugin_kit.h) */
} aw_packed;

/* The packed panels: after the handle (pack), or in the caller's mapped
 * bytes (packed_map). */
static inline const uint8_t *aw_data(const aw_packed *p)
{
    return p->data;
}


/*
 * One GEMM call, shared read-only by all chunks of its parallel_for.
 *
 * Activation scratch `act` (allocated per call, never per worker), per path:
 *   fma:   unused (x is read directly)
 *   bf16:  uint16_t [m][k], x rounded to bf16 (round to nearest even); also
 *          path amx in prefill
 *   int16: per (row, group) 256 bytes: 128 signed bytes `hi` then 128 `lo`,
 *          a = 128 * hi + lo, lo in [0, 127], a = round(x * 2^sh) in
 *          [-16384, 16383]; bytes in the order the vpdpbusd steps read them
 *          (quad 2t = inputs 8t + {0,4,1,5}, quad 2t+1 = 8t + {2,6,3,7});
 *          also path amx in decode.
 * `gsum` [m][groups][sub]: sum of each weight group's activations as the
 * kernel sees them (fp32 values; int16: 2^-sh * sum a). `gscale`
 * [m][groups]: int16 only, 2^-sh of the block (NaN when the block holds a
 * non-finite value). x is read as it is, or (k not a multiple of 128) from
 * a copy the gemm makes, each row zero past k up to kpad.
 */
typedef struct aw_job {
    const aw_packed *w;
    uint32_t m;
    const float *x;
    size_t ldx;
    float *y;
    size_t ldy;
    void *act;
    size_t act_row_bytes;
    size_t act_group_bytes; /* group g of row i at act + i row_bytes + g group_bytes:
                             * row-major (group_bytes 256: a group's 128 16-bit
                             * values) for decode; group-major (row_bytes 256,
                             * group_bytes rows x 256: a group's rows
                             * contiguous, so an A tile is 16 consecutive
                             * 256-byte rows) for the amx, int16 and bf16
                             * prefills (fma's uses no activation scratch) */
    float *gsum;
    float *gscale;
    int pf_near; /* decode's prefetch reading one stream (PK_PF_*, aw_kern.h) */
    int pf_streams;   /* decode's prefetch reading `streams` panels side by side */
    unsigned streams; /* decode, m = 1: panels read side by side (1, 2 or 4) */
    uint8_t *tile_scratch; /* path amx's prefill: AW_AMX_SCRATCH bytes per worker */
} aw_job;

/* Kernels of one path: one pair for decode (m <= AW_DECODE_MAX_M), one for
 * prefill. prep converts rows [begin, end) of x into the job's scratch; gemm
 * computes y for panels [begin, end) in decode, for prefill items [begin,
 * end) of prefill_pb panels each in prefill. All match edgert_range_fn so
 * they go straight to parallel_for. In prefill the activation scratch holds
 * m rounded up to row_pad rows, the rows beyond m zero. The activation
 * format of the two preps may differ (path amx: int16 decode, bf16
 * prefill); both use rows of 2 k bytes. */
typedef struct aw_kernels {
    edgert_range_fn decode_prep;
    edgert_range_fn decode_gemm;
    edgert_range_fn prefill_prep;
    edgert_range_fn prefill_gemm;
    unsigned prefill_pb;
    unsigned row_pad;
} aw_kernels;

static inline size_t aw_round64(size_t a)
{
    return (a + (AW_ALIGN - 1u)) & ~(size_t)(AW_ALIGN - 1u);
}

/* The packed layout (aw_pack.c, no ISA flags): the plugin's pack, packed_data
 * and packed_map, and the id of its mappable bytes. */
extern const pk_blob_id aw_blob;
edgert_status aw_pack(void *state, const edgert_qweights *w, void **packed, size_t *packed_bytes,
                      char *err, size_t err_len);
edgert_status aw_packed_data(void *state, const void *packed, const void **data, size_t *size,
                             char *err, size_t err_len);
edgert_status aw_packed_map(void *state, const edgert_qweights *shape, const void *data,
                            size_t size, void **packed, char *err, size_t err_len);

/* Defined in the ISA files; only called after the host's flags were checked. */
void aw_fma_prep(void *job, size_t begin, size_t end, unsigned worker);
void aw_fma_gemm(void *job, size_t begin, size_t end, unsigned worker);
void aw_bf16_prep(void *job, size_t begin, size_t end, unsigned worker);
void aw_bf16_gemm(void *job, size_t begin, size_t end, unsigned worker);
void aw_int16_prep(void *job, size_t begin, size_t end, unsigned worker);
void aw_int16_gemm(void *job, size_t begin, size_t end, unsigned worker);
void aw_amx_gemm(void *job, size_t begin, size_t end, unsigned worker);

#endif /* AW_INTERNAL_H */
