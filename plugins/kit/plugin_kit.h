/*
 * plugins/kit/plugin_kit.h — the plugin kit, what every plugin may build on:
 * size arithmetic, the checks every init, pack and gemm makes of its
 * arguments, the header of mappable packed bytes and its validation, and
 * the self-test runner. A static library of hidden objects, installed as
 * edgert::plugin_kit (header: <edgert/kit/plugin_kit.h>), which
 * edgert_add_plugin links unless NO_KIT: each .so stays self-contained and
 * links nothing of the core. What only x86 plugins need (AMX permission,
 * the CPU vendor, the decode tuning options) is edgert::plugin_kit_x86
 * (x86/plugin_kit_x86.h). Optional for a vendor: include/edgert/plugin.h
 * (whose edgert_errf is the error formatter used here too) is the contract.
 *
 * Every message names the plugin and the tensor, in one wording for every
 * plugin. No global state.
 */
#ifndef EDGERT_PLUGIN_KIT_H
#define EDGERT_PLUGIN_KIT_H

#include <stddef.h>
#include <stdint.h>

#include "edgert/plugin.h"

/* ---- size arithmetic ------------------------------------------------------------ */

/* a * b, a + b, a rounded up to a power-of-two `align`, into *out; 0 on
 * success, -1 on size_t overflow (*out untouched then, except round_up). */
static inline int pk_mul(size_t a, size_t b, size_t *out)
{
    if (b != 0u && a > SIZE_MAX / b)
        return -1;
    *out = a * b;
    return 0;
}

static inline int pk_add(size_t a, size_t b, size_t *out)
{
    if (a > SIZE_MAX - b)
        return -1;
    *out = a + b;
    return 0;
}

static inline int pk_round_up(size_t a, size_t align, size_t *out)
{
    if (pk_add(a, align - 1u, out) != 0)
        return -1;
    *out &= ~(align - 1u);
    return 0;
}

/* Groups per row: ceil(k / group) without the overflow of k + group - 1. */
static inline size_t pk_groups(uint32_t k, uint32_t group)
{
    return (size_t)(k / group) + (k % group != 0u);
}

/* Code c of a canonical row (two per byte, low nibble first). */
static inline unsigned pk_code(const uint8_t *row_codes, size_t c)
{
    unsigned b = row_codes[c / 2u];
    return (c & 1u) ? (b >> 4) : (b & 15u);
}

/* ---- init ----------------------------------------------------------------------- */

/*
 * The checks every init makes before it allocates: `state` non-NULL (then
 * *state = NULL), the host table present, at least ABI 1's size, every
 * function set. EDGERT_OK or EDGERT_E_USAGE with the reason in err.
 */
edgert_status pk_check_init(const char *plugin, const edgert_host *host, void **state, char *err,
                            size_t err_len);

/*
 * The kit's instance convention: a plugin's instance state (the `state` of
 * init) is a struct whose FIRST member is `const edgert_host *host`, allocated
 * with host->alloc; packed handles are single host->alloc blocks. Then these
 * serve as the plugin's fini and packed_free as they are. (A pointer to a
 * struct, converted, points to its first member: C11 6.7.2.1.)
 */
void pk_fini(void *state);
void pk_packed_free(void *state, void *packed);

/* ---- pack ----------------------------------------------------------------------- */

/* pk_layout_needs.group of a layout that holds groups of 32, 64 and 128 (no
 * group is that large). */
#define PK_GROUPS_32_64_128 0xFFFFFFFFu

/* What a layout requires of canonical weights beyond the canonical form. */
typedef struct pk_layout_needs {
    const char *layout;   /* the manifest's layout id, for messages */
    uint32_t group;       /* the only group size the layout holds; 0: any;
                             PK_GROUPS_32_64_128: 32, 64 or 128 */
    int whole_groups;     /* k must be a multiple of the group */
    int finite_scales;    /* every scale must be finite */
} pk_layout_needs;

/*
 * The prologue of every pack: the out-pointers set (then cleared), the
 * weights descriptor present and large enough, n, k and group > 0, codes and
 * scales set, then what `needs` asks (group, whole groups, finite scales),
 * and every zero point in [0, 15]. *tensor is the name for messages
 * ("(unnamed)" when the caller gave none). EDGERT_OK; EDGERT_E_USAGE for bad
 * arguments; EDGERT_E_UNSUPPORTED for what the layout cannot hold.
 */
edgert_status pk_check_pack(const char *plugin, const void *state, const edgert_qweights *w,
                            void **packed, size_t *packed_bytes, const pk_layout_needs *needs,
                            const char **tensor, char *err, size_t err_len);

/* ---- packed bytes a cache can map (plugin ABI 2) ---------------------------------- */

/*
 * The position-independent header every in-tree plugin's packed bytes start
 * with (the bytes packed_data returns and packed_map takes), then up to
 * PK_BLOB_MAX_SECTIONS sections at offsets from the header's first byte,
 * each on an EDGERT_PACKED_ALIGN boundary. Fixed-width fields in the byte
 * order of the machine that packed (the magic, read in the other order,
 * tells a foreign file apart); no address anywhere. 128 bytes, so the first
 * section starts on a 64-byte boundary. A plugin's layout fixes magic,
 * version and the sections; its sizes follow from n, k and group alone.
 */
#define PK_BLOB_MAX_SECTIONS 4u
#define PK_BLOB_SYMMETRIC (1u << 0) /* packed from zeros == NULL (informational) */
#define PK_BLOB_FLAGS_KNOWN PK_BLOB_SYMMETRIC

typedef struct pk_blob_section {
    uint64_t offset; /* from the header's first byte; a multiple of EDGERT_PACKED_ALIGN */
    uint64_t bytes;
} pk_blob_section;

typedef struct pk_blob_header {
    uint32_t magic;        /* the plugin's layout */
    uint32_t version;      /* of that layout: the number its packed_layout id ends with */
    uint32_t header_bytes; /* sizeof(pk_blob_header) */
    uint32_t flags;        /* PK_BLOB_* */
    uint32_t n, k, group;  /* the tensor's shape */
    uint32_t nsections;
    uint64_t total;        /* bytes of header and sections, padding included */
    pk_blob_section section[PK_BLOB_MAX_SECTIONS]; /* unused ones all zero */
    uint8_t reserved[24];  /* zero */
} pk_blob_header;

_Static_assert(sizeof(pk_blob_header) == 128, "the packed header is 128 bytes");
_Static_assert(sizeof(pk_blob_header) % EDGERT_PACKED_ALIGN == 0,
               "sections after the header start aligned");

/* A plugin's mappable layout: what names its messages and what its bytes
 * must say. */
typedef struct pk_blob_id {
    const char *plugin;    /* names every message */
    const char *layout;    /* its packed_layout id */
    uint32_t magic, version;
    uint32_t nsections;
    const char *section_names[PK_BLOB_MAX_SECTIONS]; /* for messages */
} pk_blob_id;

/*
 * The header of a tensor [n, k, group] in layout `id`: sections of the given
 * sizes (id->nsections of them) one after the other from the end of the
 * header, each on an EDGERT_PACKED_ALIGN boundary, `flags` as given. pack and
 * packed_map both call it (with the same sizes from the same shape), so what
 * packed_map expects is what pack writes. 0, or -1 when a size overflows.
 */
int pk_blob_layout(const pk_blob_id *id, uint32_t n, uint32_t k, uint32_t group,
                   uint32_t flags, const size_t *section_bytes, pk_blob_header *out);

/*
 * The prologue of every packed_map: out-pointer set (then cleared), state
 * set, shape present, large enough, with n, k, group > 0 and what `needs`
 * asks of the group (pk_layout_needs: the same refusals as pack); data set,
 * aligned to EDGERT_PACKED_ALIGN, and at least a header long. *tensor is the
 * name for messages. EDGERT_OK; EDGERT_E_USAGE; EDGERT_E_UNSUPPORTED (a
 * group the layout cannot hold); EDGERT_E_PARSE (shorter than a header).
 */
edgert_status pk_check_map(const pk_blob_id *id, const void *state, const edgert_qweights *shape,
                           const void *data, size_t size, void **packed,
                           const pk_layout_needs *needs, const char **tensor, char *err,
                           size_t err_len);

/*
 * Check the header at `data` (`size` bytes, already through pk_check_map)
 * against `expect` (pk_blob_layout for the caller's shape) and copy it into
 * *got: magic (and byte order), version, header size, shape, flags, the
 * reserved bytes, total == size, then every section inside [header, size),
 * aligned, in order and not overlapping (with overflow-safe arithmetic,
 * before any comparison with expect), and equal to expect's. Reads only the
 * first sizeof(pk_blob_header) bytes, once. EDGERT_OK, or EDGERT_E_PARSE
 * naming the plugin, the tensor and the first field that is wrong.
 */
edgert_status pk_blob_check(const pk_blob_id *id, const char *tensor, const void *data,
                            size_t size, const pk_blob_header *expect, pk_blob_header *got,
                            char *err, size_t err_len);

/* Write header `h` at the start of `blob` (h->total bytes) and zero every
 * gap: after the header, between sections and after the last, so the
 * packed bytes are the same for the same weights, with nothing
 * uninitialised in what a cache writes. The sections are the caller's. */
void pk_blob_write_header(void *blob, const pk_blob_header *h);

/* Section i of checked bytes. */
static inline const uint8_t *pk_blob_at(const void *data, const pk_blob_header *h, unsigned i)
{
    return (const uint8_t *)data + (size_t)h->section[i].offset;
}

/* Every zero point of a section in [0, 15], as pack accepts them: EDGERT_OK
 * or EDGERT_E_PARSE naming the first one that is not. */
edgert_status pk_blob_check_zeros(const pk_blob_id *id, const char *tensor, const uint8_t *zeros,
                                  size_t count, char *err, size_t err_len);

/*
 * The body of every packed_data: checks the arguments and that `handle_ok`
 * (the plugin checked its handle's magic), then *data = blob, *size = bytes.
 * EDGERT_OK or EDGERT_E_USAGE.
 */
edgert_status pk_packed_data(const char *plugin, const void *state, int handle_ok,
                             const void *blob, size_t bytes, const void **data, size_t *size,
                             char *err, size_t err_len);

/* ---- gemm ----------------------------------------------------------------------- */

/*
 * The checks every GEMM makes of its arguments before touching memory:
 * the descriptor is present and large enough, m >= 1, x and y set, strides
 * at least k and n, and (m - 1) * stride fits size_t. `plugin` and `tensor`
 * name the message; n and k are the packed matrix's. EDGERT_OK or
 * EDGERT_E_USAGE with the reason in err.
 */
edgert_status pk_check_gemm_args(const char *plugin, const char *tensor, uint32_t n, uint32_t k,
                                 const edgert_gemm_args *args, char *err, size_t err_len);

/* ---- self-test ------------------------------------------------------------------ */

/* One self-test GEMM: y[m][n] = x W^T for W[n][k] in groups of `group`. */
typedef struct pk_case {
    uint32_t m, n, k, group;
    int symmetric; /* zeros NULL (z = 8) */
} pk_case;

/*
 * What the oracle found for one output y[i][r], exactly (in double), from
 * the activations the path computes with (x_e) and the exact weights
 * w = s (q - z); the plugin's bound is a function of these:
 *   exact    Σ_k x_e,k w_k
 *   sum_xw   Σ_k |x_e,k w_k|
 *   sum_grid Σ_g 2^-13 max_{k in g} |x_k| Σ_{k in g} |w_k|   (a 15-bit grid per group)
 *   sum_xs15 Σ_k 15 |x_k s_k|   (the terms of a kernel that folds the zero point)
 */
typedef struct pk_sums {
    double exact, sum_xw, sum_grid, sum_xs15;
    uint32_t k, group; /* the case's, for a bound that counts groups or blocks */
} pk_sums;

/* A plugin's self-test: its cases, its functions on its instance, its bound. */
typedef struct pk_self_test {
    const char *plugin;            /* names every message */
    const char *path;              /* the instance's code path for messages, or NULL */
    void *state;                   /* the instance under test */
    const edgert_host *host;       /* its allocator */
    const pk_case *cases;
    size_t ncases;
    uint32_t seed;                 /* case i draws from seed + i */
    edgert_status (*pack)(void *state, const edgert_qweights *w, void **packed,
                          size_t *packed_bytes, char *err, size_t err_len);
    void (*packed_free)(void *state, void *packed);
    edgert_status (*gemm)(void *state, const void *packed, const edgert_gemm_args *args,
                          char *err, size_t err_len);
    /* Optional: change x after it was drawn (outliers, values out of range). */
    void (*shape_x)(float *x, uint32_t m, uint32_t k, size_t ldx);
    /* Optional: the activation values the path multiplies with, x_e, for one
     * row of x of the case's k and weight group (NULL: x itself, exactly). */
    void (*effective_x)(const void *state, const float *x, uint32_t k, uint32_t group,
                        double *out);
    /* The largest |y - exact| the plugin's arithmetic allows for this output. */
    double (*bound)(const void *state, uint32_t m, const pk_sums *s);
    /* Optional (plugin ABI 2): every case also maps the packed bytes of its
     * handle in place and checks that the mapped handle's y equals the
     * packed one's bit for bit. */
    edgert_status (*packed_data)(void *state, const void *packed, const void **data,
                                 size_t *size, char *err, size_t err_len);
    edgert_status (*packed_map)(void *state, const edgert_qweights *shape, const void *data,
                                size_t size, void **packed, char *err, size_t err_len);
    /* Optional: the inputs per activation block when the path quantizes
     * activations per block of its own (avx512-w4a16's int16: 128,
     * whatever the weights' group); 0: the weights' group. pk_sums.sum_grid
     * takes each input's block maximum from it. */
    uint32_t act_block;
} pk_self_test;

/*
 * Run every case: random codes, scales in [0.01, 0.05), zero points 0..15 and
 * x in [-1, 1] in steps of 1e-3 (from the case's seed; ldx = k + 3 and
 * ldy = n + 2, so strides are exercised), pack, gemm, then every output
 * against the exact sum within the plugin's bound, and every y column past n
 * still holding its sentinel; with packed_map, the mapped handle's y equal
 * bit for bit. The first failure is EDGERT_E_PLUGIN with the output, the
 * value, the exact sum and the bound in err.
 */
edgert_status pk_run_self_test(const pk_self_test *t, char *err, size_t err_len);

#endif /* EDGERT_PLUGIN_KIT_H */
