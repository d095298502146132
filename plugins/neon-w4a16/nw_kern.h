/*
 * plugins/neon-w4a16/nw_kern.h — what the dispatch file (neon_w4a16.c) and
 * the per-ISA kernel files share: the packed layout, the prepared
 * activations and the kernel entry points. Internal to this plugin.
 *
 * Packed layout (one layout for every path; see neon_w4a16.c for the
 * packing): W is cut into panels of NW_NR = 4 output rows (the last panel is
 * padded with zero rows: code 0, scale 0, zero point 0) and along K into
 * the weights' groups of G = 128, 64 or 32 inputs. One (panel, group) tile
 * is 2G bytes of codes: G / 8 chunks of 16 bytes (16 for G = 128), chunk t
 * covering columns [8t, 8t + 8):
 *
 *     byte j of chunk t (r = j / 4, i = j % 4):
 *         low nibble  = q[row r][8t + i]       (k-quad 2t)
 *         high nibble = q[row r][8t + 4 + i]   (k-quad 2t + 1)
 *
 * so `b & 15` is the 4 rows x 4 columns of k-quad 2t, row-major, which is
 * what SDOT/UDOT by-element and a row-per-register fp32 FMA want, and
 * zipping the 32-bit lanes of the low and high nibbles gives 2 rows x 8
 * columns, what SMMLA/UMMLA (and, four columns at a time, BFMMLA) want.
 * Codes: panels x groups x 256 bytes, panel-major (a panel's K is
 * contiguous); scales: panels x groups x 4 fp32 (canonical values, not
 * rounded); zero points: panels x groups x 4 bytes. Bits per weight:
 * 4 + (32 + 8) / G: 4.3125 for G = 128, 4.625 for 64, 5.25 for 32, when n
 * is a multiple of 4.
 *
 * In memory, and as mappable bytes (plugin ABI 2, nw_pack.c): pack makes
 * one allocation, the nw_packed handle (rounded up to 64 bytes), then the
 * position-independent packed bytes, layout "neon-w4a16/1" (NW_LAYOUT): the
 * kit's 128-byte pk_blob_header (magic NW_BLOB_MAGIC, version, n, k, group,
 * three sections; bytes of group 128 read as they did before the other
 * groups were taken, so the layout's id and version stay), codes, scales
 * and zero points as above, each on a 64-byte boundary. Every path reads
 * the same bytes, so the id names no path. packed_map checks them (header
 * and every zero point) and allocates only an nw_packed whose pointers lead
 * into the caller's bytes.
 */
#ifndef NW_KERN_H
#define NW_KERN_H

#include <stddef.h>
#include <stdint.h>

#include "edgert/plugin.h"

#define NW_NAME "neon-w4a16"
#define NW_ALIGN 64u
#define NW_PACKED_MAGIC 0x3477344eu /* "N4w4": the in-memory handle */
#define NW_BLOB_MAGIC 0x5034344eu   /* "N44P": the packed bytes */
#define NW_LAYOUT_VERSION 1u        /* change with the meaning of the bytes ... */
#define NW_LAYOUT NW_NAME "/1"      /* ... and this id with it */
#define NW_MIN_TASK_MACS 65536u     /* smallest parallel_for chunk worth a hand-off */

#define NW_NR 4u        /* output rows per panel */
#define NW_G 128u       /* the largest group size along K (also 64 and 32) */
#define NW_CHUNKS 16u   /* 16-byte chunks per tile of the largest group */

typedef struct nw_packed {
    uint32_t magic;
    uint32_t n, k;
    uint32_t group;       /* 128, 64 or 32 */
    unsigned chunks;      /* group / 8: 16-byte chunks per tile */
    size_t groups;        /* k / group */
    size_t panels;        /* ceil(n / NW_NR) */
    const uint8_t *codes; /* panels * groups * 16 * chunks */
    const float *scales;  /* panels * groups * NW_NR */
    const uint8_t *zeros; /* panels * groups * NW_NR */
    const void *blob;     /* the packed bytes: pk_blob_header, then the three above */
    size_t blob_bytes;
    char name[64];        /* for error messages; truncated */
} nw_packed;

/*
 * Activations as each path consumes them, prepared once per gemm call by the
 * dispatch file from the fp32 x. Every path starts from x rounded to fp16
 * (saturated to +-65504): the backend's activations are fp16 (manifest).
 *
 *   neon:    xf[m][k]      the fp16 values as fp32 (exact)
 *   bf16:    xb[m][k / 4][8] bf16 bits, per k-quad {hi x4, lo x4} with
 *            hi + lo == the fp16 value exactly (hi: its top 8 significant
 *            bits, lo: the remaining 3)
 *   dotprod: each (row, weight group) on an int16 grid: v = round(x16 / 2^E), E =
 *            floor(log2 max|x16|) - 14, so |v| < 2^15; xh[m][k] = v >> 8
 *            (signed), xl[m][k] = v & 255 (unsigned), v = 256 xh + xl;
 *            sv[m][g] = sum of v, fe[m][g] = 2^E
 *   i8mm:    the same int16 split, interleaved for row pairs:
 *            xp[pair][k / 8][32] = {xh of row 2p (8), xh of row 2p+1 (8),
 *            xl of row 2p (8), xl of row 2p+1 (8)}; the partner of an odd
 *            last row is zeros.
 */
typedef struct nw_act {
    uint32_t m;
    const float *xf;
    const uint16_t *xb;
    const int8_t *xh;
    const uint8_t *xl;
    const uint8_t *xp;
    const int32_t *sv;
    const float *fe;
} nw_act;

/* One gemm call: panels [begin, end) of w for all m rows of the activations. */
typedef struct nw_job {
    const nw_packed *w;
    const nw_act *a;
    float *y;
    size_t ldy;
} nw_job;

typedef void (*nw_kernel_fn)(const nw_job *job, size_t panel_begin, size_t panel_end);

/* A kernel's body, inlined into its entry once per group with the chunks
 * per tile a constant (ch), so the group-128 loops compile as they did
 * before groups of 64 and 32 were taken. */
#define NW_BODY static inline __attribute__((always_inline))
#define NW_KERNEL_BY_GROUP(entry, body)                                                       \
    void entry(const nw_job *job, size_t panel_begin, size_t panel_end)                       \
    {                                                                                         \
        switch (job->w->chunks) {                                                             \
        case 4u: body(job, panel_begin, panel_end, 4u); break;                               \
        case 8u: body(job, panel_begin, panel_end, 8u); break;                               \
        default: body(job, panel_begin, panel_end, NW_CHUNKS); break;                         \
        }                                                                                     \
    }

/* y[m][n0 .. n0 + valid) += v[0 .. valid) */
static inline void nw_y_add(float *y, const float *v, unsigned valid)
{
    for (unsigned r = 0; r < valid; r++)
        y[r] += v[r];
}

/* Each in its own file, compiled with exactly the ISA extension it uses;
 * the dispatch file calls one only after checking the host's CPU flags. */
void nw_kern_neon(const nw_job *job, size_t panel_begin, size_t panel_end);    /* armv8-a */
void nw_kern_bf16(const nw_job *job, size_t panel_begin, size_t panel_end);    /* +bf16 */
void nw_kern_dotprod(const nw_job *job, size_t panel_begin, size_t panel_end); /* +dotprod */
void nw_kern_i8mm(const nw_job *job, size_t panel_begin, size_t panel_end);    /* +i8mm */

/* nw_pack.c: the packing, and the packed bytes a cache maps back (plugin
 * ABI 2); the descriptor's pack, packed_data and packed_map. They find the
 * host as the first member of the instance state (the kit's convention). */
edgert_status nw_pack(void *state, const edgert_qweights *w, void **packed,
                      size_t *packed_bytes, char *err, size_t err_len);
edgert_status nw_packed_data(void *state, const void *packed, const void **data, size_t *size,
                             char *err, size_t err_len);
edgert_status nw_packed_map(void *state, const edgert_qweights *shape, const void *data,
                            size_t size, void **packed, char *err, size_t err_len);

#endif /* NW_KERN_H */
