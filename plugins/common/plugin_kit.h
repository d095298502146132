/*
 * plugins/common/plugin_kit.h — the support kit every in-tree plugin builds
 * in: size arithmetic, the checks every init, pack and gemm makes of its
 * arguments, the self-test runner and the decode tuning options. Shared as
 * source (plugin_kit.c and decode_tuning.c are compiled into each plugin by
 * edgert_add_plugin, cmake/EdgertPlugin.cmake), so each .so stays
 * self-contained and links nothing of the core. Not part of
 * the vendor contract: a vendor needs only include/edgert/plugin.h (whose
 * edgert_errf is the error formatter used here too).
 *
 * Every message names the plugin and the tensor, in one wording for every
 * plugin. No global state.
 */
#ifndef EDGERT_PLUGIN_KIT_H
#define EDGERT_PLUGIN_KIT_H

#include <stdatomic.h>
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

/*
 * Linux (5.16+) keeps AMX tile data off until the process asks. The edgert
 * core's probe only observes (the host's amx flags mean Linux offers tile
 * data, not that this process holds it), so a plugin with a tile path asks
 * in init; asking again is harmless. 0 when the tiles may be used; -1 with
 * "<plugin>: init: path=amx: Linux refused ..." in err. Builds on the tile
 * model (EDGERT_AMX_EMULATE, tests only) need no permission and call
 * nothing. Not x86-64: always -1.
 */
int pk_amx_permission(const char *plugin, char *err, size_t err_len);

/*
 * 1 on an Intel CPU (CPUID vendor "GenuineIntel"), else 0 (and on every
 * other architecture). A tuning fact, not a capability: the x86 plugins'
 * decode defaults (software prefetch, streams per thread) were measured
 * per vendor, and every choice computes the same bits.
 */
int pk_cpu_is_intel(void);

/* ---- decode tuning ------------------------------------------------------------------ */

/* Software prefetch of a streaming GEMV, the option
 * prefetch=far|near|none|far-l1|auto (each plugin says what far, near and
 * far-l1 are in its kernel header): the modes, 0 .. PK_PF_MODES - 1. */
#define PK_PF_FAR 0
#define PK_PF_NEAR_TOO 1 /* far and a near one too */
#define PK_PF_NONE 2
#define PK_PF_FAR_L1 3 /* far, into L1 */
#define PK_PF_MODES 4

/* F(args..., mode) with a run-time prefetch mode passed as a constant: one
 * instantiation of F per mode, so no line of the loop tests the option. */
#define PK_BY_PF(mode, F, ...)                                                                 \
    ((mode) == PK_PF_NONE       ? F(__VA_ARGS__, PK_PF_NONE)                                   \
     : (mode) == PK_PF_NEAR_TOO ? F(__VA_ARGS__, PK_PF_NEAR_TOO)                               \
     : (mode) == PK_PF_FAR_L1   ? F(__VA_ARGS__, PK_PF_FAR_L1)                                 \
                                : F(__VA_ARGS__, PK_PF_FAR))

/* The decode tuning options of the x86 plugins: prefetch=far|near|none|far-l1|auto and
 * streams=1|2|4|auto, the panels an m = 1 GEMV reads side by side, each from
 * its own part of the chunk. Every setting computes the same bits. */
typedef struct pk_tuning {
    int prefetch;     /* PK_PF_*, or -1: not given */
    unsigned streams; /* 1, 2 or 4, PK_STREAMS_AUTO, or 0: not given */
} pk_tuning;

/* streams=auto (pk_tuning.streams): one stream against PK_STREAMS_MANY,
 * chosen by the calls' times as prefetch=auto chooses (below). */
#define PK_STREAMS_AUTO 0xFFu
#define PK_STREAMS_MANY 4u

/* The options token [s, s + len): 1 if it is a tuning option, stored in
 * *t; -1 if it is one given before (each once), 0 if it is none of them.
 * Start from {-1, 0}. */
int pk_tuning_option(const char *s, size_t len, pk_tuning *t);

/* NULL, or why the options in *t cannot go together (prefetch=auto with
 * streams=auto: each measures against the other's fixed choice). */
const char *pk_tuning_conflict(const pk_tuning *t);

/* Streams as the describe strings say them: "" for one stream, else
 * ", N streams per thread at m = 1 (prefetch: <pf_streams>)". */
void pk_tuning_describe(char *out, size_t out_len, unsigned streams, const char *pf_streams);

/* ---- prefetch=auto ------------------------------------------------------------------ */

/*
 * Which software prefetch serves a streaming GEMV best depends on the moment
 * as much as on the CPU. On an AMD EPYC (Zen 4), 2 threads, paired bench
 * runs (decode_tuning.c has the figures): with the host's memory busy, no
 * prefetch made avx512-w4a8's decode step 5-14% shorter than the far one;
 * with the weights served faster (resident in L3), the far prefetch made
 * the same steps up to 25% shorter. prefetch=auto measures instead of
 * guessing, at m = 1 (larger m keeps the prefetching mode):
 *   - warm-up: each packed weight's calls alternate between the two modes
 *     (its first call, cold, is not counted) until both orders of pair
 *     below have PK_PF_AUTO_WARM pairs;
 *   - then a weight's calls run in the mode in use, and every
 *     PK_PF_AUTO_EVERY-th in the other one (every PK_PF_AUTO_SPARSE-th
 *     while the two running means say the other mode is more than
 *     PK_PF_AUTO_FAR_APART slower, until they say under
 *     PK_PF_AUTO_CLOSE_AGAIN: each call in it costs what it is slower,
 *     and more, measured; near a tie, where a switch may be due, probes
 *     are cheap and frequent), but never 1 in PK_PF_AUTO_SPARSE in the
 *     PK_PF_AUTO_WINDOW pairs after the warm-up or a switch;
 *   - a pair is a weight's call against its previous call in the other
 *     mode (one decode step earlier: the same bytes and shape, nearly the
 *     same moment), within one choice (pairs that span a switch are
 *     dropped): each call in the other mode makes two, one each way round,
 *     so a drift of the host cancels;
 *   - log(t other / t in use) goes into a running mean per order
 *     (exponential, of weight 2 / PK_PF_AUTO_WINDOW: about
 *     PK_PF_AUTO_WINDOW pairs in all), and when the average of the two
 *     falls below -PK_PF_AUTO_MARGIN, the other mode becomes the one in
 *     use.
 * Every mode computes the same bits: only the time depends on the choice.
 */
#define PK_PF_AUTO 4             /* the option prefetch=auto (pk_tuning.prefetch) */
#define PK_PF_AUTO_EVERY 16u     /* a weight's calls per call in the other mode */
#define PK_PF_AUTO_WARM 16u      /* pairs each way round before the first choice */
#define PK_PF_AUTO_WINDOW 64u    /* pairs in the two running means */
#define PK_PF_AUTO_MARGIN 0.02   /* log of the time ratio that makes a switch */
#define PK_PF_AUTO_SPARSE 64u    /* the same, while the other mode is far slower */
#define PK_PF_AUTO_FAR_APART 0.04 /* log of the time ratio that is far slower */
#define PK_PF_AUTO_CLOSE_AGAIN 0.025 /* and below which it no longer is */

/* Per packed weight, zeroed when the handle is made (pack, packed_map):
 * its m = 1 calls as prefetch=auto saw them. Atomics, so that gemm calls
 * on one weight from several threads are well defined. */
typedef struct pk_pf_seen {
    _Atomic uint64_t last;  /* its last counted call: ns << 8 | ticket; 0: none */
    _Atomic uint32_t calls; /* m = 1 calls so far */
    _Atomic uint32_t phase; /* where its calls in the other mode fall */
} pk_pf_seen;

/* Per instance: the two modes and the evidence between them. With
 * streams=auto the two modes are stream counts, streams[0] = 1 (the first
 * in use) and streams[1] = PK_STREAMS_MANY, each with its own fixed
 * prefetch, which mode[] holds. */
typedef struct pk_pf_auto {
    _Atomic int lock;       /* a spin lock over pairs[], diff and settle */
    int mode[2];            /* PK_PF_*: [0] with prefetch (the first in use), [1] none */
    unsigned streams[2];    /* streams=auto: {1, PK_STREAMS_MANY}; else {0, 0} */
    _Atomic unsigned gen;   /* choices made so far: the slot in use is gen & 1 */
    _Atomic int warm;       /* 1 once both orders have PK_PF_AUTO_WARM pairs */
    _Atomic int sparse;     /* 1 while the other mode is PK_PF_AUTO_FAR_APART slower
                             * and settle is 0 */
    unsigned settle;        /* pairs left, after the warm-up or a switch, before sparse */
    unsigned pairs[2];      /* pairs: [0] other after in-use, [1] in-use after other */
    double diff[2];         /* per order, running mean of log(t other / t in use) */
    _Atomic uint32_t weights; /* weights seen: their phases */
} pk_pf_auto;

/* record's result: bits */
#define PK_PF_AUTO_SWITCHED 1 /* this call's pair made the other mode the one in use */
#define PK_PF_AUTO_WARMED 2   /* and/or ended the warm-up (the first choice) */

void pk_pf_auto_init(pk_pf_auto *a, int with, int without);
/* The mode for weight w's next m = 1 call, and its *ticket for record. */
int pk_pf_auto_pick(pk_pf_auto *a, pk_pf_seen *w, unsigned *ticket);
/* That call's time in ns. PK_PF_AUTO_* bits; with either, *ratio (if not
 * NULL) is the time of the mode not in use (after a switch: no longer in
 * use) over the one in use, from the running means; below 1 only at the
 * first choice, when the two are within the margin. */
int pk_pf_auto_record(pk_pf_auto *a, pk_pf_seen *w, unsigned ticket, uint64_t ns, double *ratio);
/* The slot of a ticket (0: with prefetch, 1: none; streams=auto: 0 one
 * stream, 1 PK_STREAMS_MANY) and the one in use when it was picked. */
static inline unsigned pk_pf_ticket_slot(unsigned ticket)
{
    return ticket & 1u;
}
static inline unsigned pk_pf_ticket_in_use(unsigned ticket)
{
    return (ticket >> 2) & 1u;
}
/* CLOCK_MONOTONIC in ns. */
uint64_t pk_now_ns(void);

/*
 * init's side: the option's mode `pf` (PK_PF_*, PK_PF_AUTO, or -1 when not
 * given: near_default for one stream, streams_default beside several) into
 * the instance's two fields. With PK_PF_AUTO the field that decides m = 1
 * (pf_streams beside several streams, else pf_near) keeps it, the other gets
 * `with`; *a weighs `with` (the plugin's prefetching mode on this CPU)
 * against none.
 */
void pk_pf_settle(int pf, int with, int near_default, int streams_default, unsigned streams,
                  int *pf_near, int *pf_streams, pk_pf_auto *a);

/*
 * init's side of streams=auto: one stream (prefetch *pf_near) weighed
 * against PK_STREAMS_MANY (prefetch *pf_streams), *streams = PK_STREAMS_MANY
 * (what the instance can read; each call gets its own count from
 * pk_decode_run). `pf` is the option's prefetch (-1 when not given:
 * near_default for one stream, streams_default beside several; never
 * PK_PF_AUTO: pk_tuning_conflict).
 */
void pk_streams_settle(int pf, int near_default, int streams_default, int *pf_near,
                       int *pf_streams, unsigned *streams, pk_pf_auto *a);

/* A mode in words for describe: said[mode] (said: the plugin's words for
 * each of the PK_PF_MODES modes), or for PK_PF_AUTO
 * "auto (<said[with]> or none, whichever the last calls ran faster)". */
void pk_pf_said(char *out, size_t out_len, const char *const said[PK_PF_MODES], int mode,
                int with);

/*
 * gemm's side, around its decode: resolve puts a mode in every job field
 * that says PK_PF_AUTO (at m > 1 `with`, the prefetching mode), or with
 * streams=auto the call's stream count in *streams (m = 1 only; larger m
 * reads one), and returns 1 when the call is to be timed (m = 1, and a
 * field said auto or streams=auto); then gemm
 * takes t0 = pk_now_ns() before its decode and calls done after it, which
 * records the time and logs the first choice and every switch at debug
 * level ("<plugin>: prefetch=auto: ..." or "<plugin>: streams=auto: ...").
 */
int pk_pf_auto_resolve(pk_pf_auto *a, pk_pf_seen *w, uint32_t m, int *pf_near, int *pf_streams,
                       unsigned *streams, unsigned *ticket);
void pk_pf_auto_done(const edgert_host *host, const char *plugin, pk_pf_auto *a, pk_pf_seen *w,
                     unsigned ticket, uint64_t t0);

/* Both sides as the x86 plugins use them. decode_run: a decode call's
 * parallel_for(n, grain, fn, job) with the job's prefetch fields and stream
 * count resolved and, when auto decides, timed and recorded against the
 * packed handle's record `w`. decode_describe: "<one stream's prefetch>[,
 * N streams per thread at m = 1 (prefetch: <theirs>)]" in the plugin's
 * words `said`; with streams=auto "<one stream's prefetch>, or N streams per
 * thread at m = 1 (prefetch: <theirs>), whichever the last calls ran
 * faster (streams=auto)". */
void pk_decode_run(const edgert_host *host, const char *plugin, pk_pf_auto *a, pk_pf_seen *w,
                   uint32_t m, int *pf_near, int *pf_streams, unsigned *streams, size_t n,
                   size_t grain, edgert_range_fn fn, void *job);
void pk_decode_describe(char *out, size_t out_len, const char *const said[PK_PF_MODES],
                        int pf_near, int pf_streams, unsigned streams, const pk_pf_auto *a);

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
