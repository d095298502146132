/*
 * examples/vendor-plugin/a2_internal.h — what the baseline files
 * (avx2_w4a16.c, a2_pack.c, a2_selftest.c: compiled WITHOUT ISA flags) share
 * with the kernel files (a2_kern_avx2.c: -mavx2 -mfma; a2_kern_vnni.c: the
 * same plus -mavxvnni). Nothing in here may emit AVX code.
 *
 * This plugin is built as a vendor's would be, against the installed
 * package: the public headers (edgert/plugin.h) and the plugin kit
 * (edgert::plugin_kit, plugin_kit.h: argument checks, the packed bytes'
 * header and its validation, the self-test runner). Its layout, kernels and
 * error bound are its own.
 *
 * ---- Packed layout (one layout for every path, decode and prefill) --------
 *
 * Output columns (rows of W) are cut into panels of A2_PANEL = 16 columns,
 * two halves of 8, one column per dword lane of a ymm register. A panel
 * holds ceil(K / 128) blocks, one per 128 inputs, back to back; panels
 * follow each other, so a thread that owns a range of panels reads one
 * contiguous stream. The weights' group size G is 128, 64 or 32: a block
 * holds S = 128 / G groups ("sub-groups"), and K is any multiple of G, the
 * last block holding zeros past K (codes 0, meta 0) that the activations,
 * zero there too (a2_gemm pads x), never let count.
 *
 *   block (panel p, block g) = 1024 + 64 S bytes (1088, 1152, 1280 at
 *   G = 128, 64, 32; multiples of 64: every load is aligned):
 *     codes: 16 octets t = 0..15, 64 bytes each (a cache line, two ymm:
 *            half h = 0, 1 at byte 32h, 64 codes each). Dword lane j of
 *            half h holds the 8 codes of column 16p + 8h + j, inputs
 *            k = 128g + 8t + 0..7; nibble i of the dword (bits 4i..4i+3) is
 *            the code of input
 *              i:    0  1  2  3  4  5  6  7
 *              k:    0  2  4  6  1  3  5  7     (A2_NIB_K below)
 *            i.e. byte 0 = k0 | k2<<4, byte 1 = k4 | k6<<4,
 *                 byte 2 = k1 | k3<<4, byte 3 = k5 | k7<<4.
 *     meta:  S times 16 dwords (sub-group s's half h at byte 64s + 32h),
 *            lane j = fp32 scale of column 16p + 8h + j, weight group
 *            S g + s, with its 4 lowest mantissa bits replaced by the zero
 *            point z (0..15); 0 past K.
 *
 * Why that nibble order: one 32-byte load feeds 64 codes to every kernel
 * with one shift and one mask per step —
 *   decode (u8 x s8: vpmaddubsw, or vpdpbusd with AVX-VNNI):
 *      v & 0x0F0F0F0F        = bytes (k0, k4, k1, k5) of each lane
 *      (v >> 4) & 0x0F0F..   = bytes (k2, k6, k3, k7)
 *   prefill (int16 pairs: vpmaddwd, or vpdpwssd with AVX-VNNI):
 *      (v >> 4s) & 0x000F000F = words (k_2s, k_2s+1), s = 0..3
 * and the activations are reordered once per call to match. Why 16 columns
 * in two halves: at m = 1 each activation broadcast feeds both halves
 * (loads, 2 per cycle, bound the decode kernel), from one stream of whole
 * cache lines that the prefetchers follow.
 *
 * The zero point is never applied per weight: every path computes
 *   y += s * (sum_k a_k q_k * 2^-sh  -  z * 2^-sh * sum_k a_k)
 * per (column, group), with the activations as 15-bit integers a_k (a_k *
 * 2^-sh ~ x_k, one power-of-two scale per row and block of 128 inputs,
 * whatever G) and the integer sums exact. s * z is exact in fp32 (20-bit
 * scale times a 4-bit integer). With S > 1 a kernel's integer sums over a
 * block are cut at the groups' edges and the epilogue runs S times per
 * block, each on its group's meta: the codes are read once, as at G = 128.
 *
 * Scale precision: the canonical fp32 scale is rounded to 20 significant
 * bits (relative change <= 2^-20) to make room for z, so scale and zero point
 * cost 32 bits per group: 4 + 32 / 128 = 4.25 bits per weight (4.5 and 5
 * at G = 64 and 32), plus 256
 * bytes of headers (the handle's and the packed bytes') and the zero padding
 * of the last panel when n % 16 != 0.
 *
 * ---- The packed bytes (plugin ABI 2: a cache writes them, maps them back) ----
 *
 * The handle (a2_packed) holds pointers and stays in memory; the packed
 * bytes packed_data returns, and packed_map takes, hold none:
 *   pk_blob_header (128 bytes) | the blocks, panel after panel (section 0)
 * The header is the kit's (plugin_kit.h: pk_blob_layout writes it,
 * pk_blob_check validates it), as every in-tree plugin's, so the same tools
 * and tests read it. A zero point lives in its
 * scale's 4 low bits, so no value of the blocks is out of range: garbage in
 * them maps and computes garbage, never outside the bytes.
 */
#ifndef A2_INTERNAL_H
#define A2_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "edgert/plugin.h"
#include "plugin_kit.h"

/* The test-only build (tests/CMakeLists.txt) compiles the AVX-VNNI kernels
 * with their EVEX encoding (AVX512_VNNI + AVX512VL: the same instructions on
 * ymm, the same results), so that path is checked on CPUs that have
 * AVX-512 VNNI but not AVX-VNNI. It is a plugin of its own name. */
#ifdef A2_VNNI_EVEX
#define A2_NAME "avx2-w4a16-evex"
#else
#define A2_NAME "avx2-w4a16"
#endif
#define A2_VERSION "0.1.0"

#define A2_PANEL 16u         /* output columns per panel: two halves */
#define A2_HALF 8u           /* columns per half (ymm dword lanes) */
#define A2_GROUP 128u        /* inputs per block (and the largest group size) */
#define A2_MIN_GROUP 32u     /* the smallest group size: 4 sub-groups a block */
#define A2_OCTETS 16u        /* 8-input octets per block */
#define A2_OCTET_BYTES 64u   /* one octet of a panel: two ymm halves */
#define A2_CODE_BYTES 1024u  /* codes of one (panel, group) block */
#define A2_META_BYTES 64u    /* scales + zero points of one block */
#define A2_BLOCK_BYTES (A2_CODE_BYTES + A2_META_BYTES) /* at G = 128; a2_packed.block_bytes */
#define A2_ALIGN 64u
#define A2_PACKED_MAGIC 0x36313261u /* "a216": the packed bytes' header */
#define A2_HANDLE_MAGIC 0x64683261u /* "a2hd": an in-memory handle */
#define A2_LAYOUT_VERSION 1u        /* the number A2_LAYOUT ends with */
#define A2_LAYOUT "avx2-w4a16/1"    /* packed_layout: change with the bytes' meaning */

/* Activation scratch per (row, block of 128 inputs): 256 bytes (a2_job). */
#define A2_ACT_GROUP_BYTES 256u

/* Rows of x up to which gemm streams the codes directly (GEMV kernels, two
 * rows per pass over a panel); above it the prefill kernels expand each
 * (block of panels, group) once into L1 and reuse it for every row. */
#define A2_DECODE_MAX_M 4u

/* Input offset (0..7 within the octet) held by nibble i of a code dword. */
#define A2_NIB_K {0, 2, 4, 6, 1, 3, 5, 7}

typedef enum a2_path {
    A2_PATH_AVX2 = 0, /* AVX2: vpmaddubsw (decode), vpmaddwd (prefill) */
    A2_PATH_VNNI = 1, /* AVX-VNNI: vpdpbusd (decode), vpdpwssd (prefill) on ymm */
    A2_PATH_COUNT
} a2_path;

/* A packed tensor, from pack (one allocation: this handle in its first
 * A2_HANDLE_BYTES, then the packed bytes) or packed_map (this handle alone,
 * over the caller's bytes). */
typedef struct a2_packed {
    uint32_t magic;          /* A2_HANDLE_MAGIC */
    uint32_t n, k;
    uint32_t groups;         /* blocks: ceil(k / 128) */
    uint32_t panels;         /* ceil(n / 16) */
    uint32_t panel_bytes;    /* groups * block_bytes (< 2^32: a2_blob_layout) */
    uint32_t group;          /* the weights' group size: 128, 64 or 32 */
    uint32_t sub;            /* groups per block: 128 / group */
    uint32_t block_bytes;    /* A2_CODE_BYTES + sub * A2_META_BYTES */
    uint32_t kpad;           /* groups * 128: k rounded up to whole blocks */
    const uint8_t *blocks;   /* panels * panel_bytes */
    const uint8_t *blob;     /* header and blocks: what packed_data returns */
    size_t blob_bytes;
    char name[56];           /* for error messages; truncated */
} a2_packed;

#define A2_HANDLE_BYTES 128u /* the handle's room in pack's allocation */
_Static_assert(sizeof(a2_packed) <= A2_HANDLE_BYTES, "the handle must fit its room");

/* The layout as the kit's checks name it, and what it holds: groups of 32,
 * 64 or 128, whole groups only, finite scales (the meta word keeps 20
 * significant bits of a scale: an inf or NaN would lose its meaning). */
extern const pk_blob_id a2_blob_id;
extern const pk_layout_needs a2_needs;

/* The header of a tensor [n, k] in groups of `group` (128, 64 or 32; k a
 * multiple of it): the blocks right after it (pk_blob_layout). pack writes
 * it and packed_map expects it, so the two agree. 0, or -1 when a size
 * overflows. */
int a2_blob_layout(uint32_t n, uint32_t k, uint32_t group, pk_blob_header *out);

/* Fill a handle (zeroed first) over checked packed bytes `blob` (header h). */
void a2_handle(a2_packed *p, const pk_blob_header *h, const uint8_t *blob, const char *name);

/*
 * One GEMM call, shared read-only by all chunks of its parallel_for.
 *
 * Activation scratch `act` (allocated per call, never per worker), per
 * (row, block of 128 inputs) A2_ACT_GROUP_BYTES bytes; a = round(x * 2^sh)
 * in [-16384, 16383], sh chosen per (row, block) so that max |x| * 2^sh
 * lies in [2^13, 2^14):
 *   decode (m <= A2_DECODE_MAX_M): 128 signed bytes `hi` then 128 `lo`,
 *     a = 128 hi + lo, lo in [0, 127]; in the order the u8 x s8 steps read
 *     them (quad 2t = inputs 8t + {0,4,1,5}, quad 2t+1 = 8t + {2,6,3,7});
 *   prefill: 128 int16 a in input order.
 * `gsum` [m][groups * sub]: per weight group, 2^-sh * sum a over it (exact
 * in fp32: |sum a| <= 2^21); `gscale` [m][groups]: 2^-sh per block. Both
 * NaN when the block holds a non-finite value (its outputs become NaN, as
 * an fp32 loop's would). x is the caller's, or a copy zero-padded to kpad
 * when k is no multiple of 128 (ldx then kpad), so every kernel reads
 * whole blocks.
 */
typedef struct a2_job {
    const a2_packed *w;
    uint32_t m;
    const float *x;
    size_t ldx;
    float *y;
    size_t ldy;
    int8_t *act;
    size_t act_row_bytes; /* groups * A2_ACT_GROUP_BYTES + A2_ALIGN */
    float *gsum;
    float *gscale;
} a2_job;

/* Kernels of one path. prep converts rows [begin, end) of x into the job's
 * scratch (the format follows j->m: decode or prefill); decode and prefill
 * compute y for panels [begin, end), every row. All match edgert_range_fn so
 * they go straight to parallel_for. */
typedef struct a2_kernels {
    edgert_range_fn prep;
    edgert_range_fn decode;
    edgert_range_fn prefill;
} a2_kernels;

/* Defined in the ISA files; only called after init checked the host's flags. */
void a2_avx2_prep(void *job, size_t begin, size_t end, unsigned worker);
void a2_avx2_decode(void *job, size_t begin, size_t end, unsigned worker);
void a2_avx2_prefill(void *job, size_t begin, size_t end, unsigned worker);
void a2_vnni_decode(void *job, size_t begin, size_t end, unsigned worker);
void a2_vnni_prefill(void *job, size_t begin, size_t end, unsigned worker);

/* ---- the baseline files' functions (avx2_w4a16.c, a2_pack.c, a2_selftest.c) ---- */

/* The instance: the host table, the path chosen once in init, its kernels. */
typedef struct a2_state {
    const edgert_host *host;
    a2_path path;
    a2_kernels kern;
} a2_state;

edgert_status a2_pack(void *state, const edgert_qweights *w, void **packed, size_t *packed_bytes,
                      char *err, size_t err_len);
void a2_packed_free(void *state, void *packed);
edgert_status a2_gemm(void *state, const void *packed, const edgert_gemm_args *args, char *err,
                      size_t err_len);
edgert_status a2_self_test(void *state, char *err, size_t err_len);
edgert_status a2_packed_data(void *state, const void *packed, const void **data, size_t *size,
                             char *err, size_t err_len);
edgert_status a2_packed_map(void *state, const edgert_qweights *shape, const void *data,
                            size_t size, void **packed, char *err, size_t err_len);
const char *a2_path_name(a2_path p);

#endif /* A2_INTERNAL_H */
