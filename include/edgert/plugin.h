/*
 * edgert/plugin.h — the ABI a backend vendor implements.
 *
 * A backend is a shared object (`.so`) plus a YAML manifest. The core reads
 * the manifest, checks every requirement it can check without running plugin
 * code (arch, device class, CPU flags, OS state, file present, checksum) and
 * only then `dlopen`s the library with RTLD_NOW | RTLD_LOCAL and looks up ONE
 * symbol: EDGERT_PLUGIN_ENTRY_SYMBOL, of type edgert_plugin_entry_fn.
 *
 * Rules for plugins (docs/writing-a-backend.md has the whole contract):
 *   - Plain C. Link against nothing of the core: everything the plugin needs
 *     from the host comes through the edgert_host table.
 *   - No global mutable state: per-instance state lives behind `void *state`
 *     returned by init(). Two hosts in one process must not interfere.
 *   - Never call exit()/abort(). Errors are edgert_status codes plus a message
 *     written into a buffer the host owns (`err`, `err_len`, always
 *     NUL-terminated by the plugin when it writes).
 *   - Structs that cross the boundary start with their size and only ever grow
 *     at the end; a reader checks `struct_size` before touching a newer field.
 *
 * ABI negotiation: the host calls the entry with the range of ABI versions it
 * implements [abi_min, abi_max]. The plugin answers with a descriptor whose
 * `abi_version` lies in that range, or returns EDGERT_E_ABI and explains.
 *
 * ABI versions:
 *   1  the descriptor up to export_graph (EDGERT_PLUGIN_V1_SIZE).
 *   2  + packed_flags, packed_layout, packed_data, packed_map
 *      (EDGERT_PLUGIN_V2_SIZE): packed weights that can be written to a file
 *      and later mapped and used without repacking (a packed-weight cache).
 *      A descriptor answering ABI 2 must be at least EDGERT_PLUGIN_V2_SIZE
 *      large (else ABI_UNSUPPORTED); the core reads the ABI-2 fields only of
 *      a descriptor that answered ABI >= 2. A plugin without a mappable form
 *      answers ABI 2 with packed_flags 0, or keeps answering ABI 1: either
 *      way it loads, and its weights simply cannot be cached.
 *
 * This header is self-contained: a vendor needs only it and the one it
 * includes, edgert/status.h (the status codes), and nothing of edgert.h, whose
 * functions are the core's and cannot be called from a plugin.
 */
#ifndef EDGERT_PLUGIN_H
#define EDGERT_PLUGIN_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "edgert/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Oldest and newest plugin ABI this header describes: the core speaks this
 *  range. A plugin's own range is the length of its descriptor array
 *  (edgert_plugin_negotiate), never these macros, so a plugin built against
 *  a newer header still loads in an older core and the other way round. */
#define EDGERT_PLUGIN_ABI_MIN 1u
#define EDGERT_PLUGIN_ABI_MAX 2u

/** The one symbol the core looks up in a plugin library. */
#define EDGERT_PLUGIN_ENTRY_SYMBOL "edgert_plugin_entry"

/** Capability bits of edgert_plugin.caps. */
#define EDGERT_CAP_GEMM   (1u << 0) /**< pack() + gemm() are implemented */
#define EDGERT_CAP_EXPORT (1u << 1) /**< export_graph() is implemented  */

/** Bits of edgert_plugin.packed_flags (ABI 2). A bit this header does not
 *  define for the descriptor's abi_version must be 0: the core refuses the
 *  descriptor otherwise (INVALID_DESCRIPTOR), it never guesses. */
#define EDGERT_PACKED_MAPPABLE (1u << 0) /**< packed_data() + packed_map() are implemented */

/** Alignment of packed bytes handed to packed_map (and of those packed_data
 *  returns): a multiple of it is where a cache puts them in its file, so an
 *  mmap of the file (page-aligned) keeps them aligned. */
#define EDGERT_PACKED_ALIGN 64u

/** Longest edgert_plugin.packed_layout, in characters (ABI 2). */
#define EDGERT_PACKED_LAYOUT_MAX 64u

/** Log levels for edgert_host.log, most severe first. 0 is not a level:
 *  in edgert_options.log_level it means "the default". */
typedef enum edgert_log_level {
    EDGERT_LOG_ERROR = 1,
    EDGERT_LOG_WARN = 2,
    EDGERT_LOG_INFO = 3,
    EDGERT_LOG_DEBUG = 4
} edgert_log_level;

/**
 * CPU feature bits, as the core's probe found them *usable* (CPUID/HWCAP and,
 * on x86, enabled by the OS in XCR0; AMX also needs Linux's permission).
 * Names match Linux /proc/cpuinfo and the manifests' `requires.cpu_flags`.
 * Each value is a bit position in edgert_host.cpu_flags and fixed for good.
 */
typedef enum edgert_cpu_flag {
    /* x86-64 */
    EDGERT_CPU_SSE4_2 = 0,
    EDGERT_CPU_AVX = 1,
    EDGERT_CPU_AVX2 = 2,
    EDGERT_CPU_FMA = 3,
    EDGERT_CPU_F16C = 4,
    EDGERT_CPU_AVX_VNNI = 5,
    EDGERT_CPU_AVX512F = 6,
    EDGERT_CPU_AVX512BW = 7,
    EDGERT_CPU_AVX512VL = 8,
    EDGERT_CPU_AVX512DQ = 9,
    EDGERT_CPU_AVX512CD = 10,
    EDGERT_CPU_AVX512_VNNI = 11,
    EDGERT_CPU_AVX512_BF16 = 12,
    EDGERT_CPU_AVX512_FP16 = 13,
    EDGERT_CPU_AMX_TILE = 14,
    EDGERT_CPU_AMX_INT8 = 15,
    EDGERT_CPU_AMX_BF16 = 16,
    EDGERT_CPU_AMX_FP16 = 17,
    /* ARM64 (AT_HWCAP / AT_HWCAP2 names) */
    EDGERT_CPU_ASIMD = 18,
    EDGERT_CPU_ASIMDHP = 19,
    EDGERT_CPU_ASIMDDP = 20,
    EDGERT_CPU_I8MM = 21,
    EDGERT_CPU_BF16 = 22,
    EDGERT_CPU_SVE = 23,
    EDGERT_CPU_SVE2 = 24,
    /** The flags this header names; values only ever append, and a newer
     *  library may know more: not a bound to decide anything by. */
    EDGERT_CPU_FLAG_COUNT = 25
} edgert_cpu_flag;

/** Test whether flag `f` is set in a flag mask. */
#define EDGERT_HAS_FLAG(mask, f) ((((uint64_t)(mask)) >> (unsigned)(f)) & 1u)

/**
 * Canonical quantized weights: W[N][K], int4 codes q in [0,15],
 * group size `group` along K, per (row, group) a scale s and a zero point z:
 * w = s * (q - z).  The last group of a row is partial when K % group != 0.
 */
typedef struct edgert_qweights {
    uint32_t struct_size;   /**< sizeof(edgert_qweights) */
    uint32_t n;             /**< output channels (rows of W) */
    uint32_t k;             /**< inputs (columns of W) */
    uint32_t group;         /**< group size along K (> 0) */
    /** Codes, two per byte, low nibble first, along K; each row starts on a
     *  byte boundary: row stride = (k + 1) / 2 bytes. */
    const uint8_t *codes;
    /** Scales [n][groups], groups = ceil(k / group). */
    const float *scales;
    /** Zero points [n][groups], each in [0,15]; NULL means symmetric (z = 8). */
    const uint8_t *zeros;
    /** Tensor name for error messages (may be NULL). */
    const char *name;
    /* ---- ABI 1 ends here (EDGERT_QWEIGHTS_V1_SIZE); later fields only ever append ---- */
    /**
     * The inputs' order (version 2), or NULL: in order. Column j of these
     * codes, and so its group j / group, is the model's input perm[j], a
     * permutation of 0 .. k-1: an act-order (desc_act) GPTQ layer, whose
     * groups gather inputs from all over K, with its columns sorted by group
     * so that each group is contiguous. The caller's activations stay in the
     * model's order: edgert_gemm and edgert_step gather x's columns into
     * this order before the backend's GEMM, and edgert_dequantize writes
     * W in the model's order. A plugin never sees it: edgert_pack hands
     * its pack the same weights with perm NULL.
     */
    const uint32_t *perm;
} edgert_qweights;

/** Size of edgert_qweights in ABI 1: the least struct_size a reader accepts.
 *  A field past it is read only when struct_size covers it. */
#define EDGERT_QWEIGHTS_V1_SIZE (offsetof(edgert_qweights, name) + sizeof(const char *))
/** Size of edgert_qweights up to perm (version 2). */
#define EDGERT_QWEIGHTS_V2_SIZE (offsetof(edgert_qweights, perm) + sizeof(const uint32_t *))

/** Arguments of one GEMM call: y[m][n] = x[m][k] * W^T, fp32 in and out. */
typedef struct edgert_gemm_args {
    uint32_t struct_size; /**< sizeof(edgert_gemm_args) */
    uint32_t m;           /**< rows of x and y (tokens), >= 1 */
    const float *x;       /**< activations, row stride ldx floats */
    size_t ldx;           /**< >= k */
    float *y;             /**< output, row stride ldy floats */
    size_t ldy;           /**< >= n */
    /* ---- ABI 1 ends here (EDGERT_GEMM_ARGS_V1_SIZE) ---- */
} edgert_gemm_args;

/** Size of edgert_gemm_args in ABI 1. */
#define EDGERT_GEMM_ARGS_V1_SIZE (offsetof(edgert_gemm_args, ldy) + sizeof(size_t))

/** Work function for edgert_host.parallel_for: handles [begin, end). */
typedef void (*edgert_range_fn)(void *arg, size_t begin, size_t end, unsigned worker);

/**
 * Services the host offers a plugin. Valid from entry until the host unloads
 * the plugin. All function pointers are non-NULL.
 */
typedef struct edgert_host {
    uint32_t struct_size;  /**< sizeof(edgert_host) as the host knows it */
    uint32_t abi_version;  /**< ABI the host negotiated with this plugin */
    void *host_ctx;        /**< opaque; pass back to every call below */
    /** printf-style logging, routed to the integrator's log callback. A
     *  level that is none of edgert_log_level's reaches it as the nearest
     *  one (0 or below: ERROR; above DEBUG: DEBUG), the line naming it. */
    void (*log)(void *host_ctx, edgert_log_level level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
    /** Aligned allocation (align a power of two >= sizeof(void*)); NULL on
     *  failure. What pack allocates (the packed weights) is placed back to
     *  back with the handle's other packed weights in regions backed by
     *  transparent huge pages where the OS allows (a decode step streams
     *  them all; no 4 KiB page boundary stops the prefetchers or misses the
     *  TLB); scratch freed inside pack is reused. Other allocations of
     *  2 MiB and more start on a 2 MiB boundary and their whole 2 MiB
     *  pages get huge pages. free takes either kind. */
    void *(*alloc)(void *host_ctx, size_t size, size_t align);
    void (*free)(void *host_ctx, void *ptr);
    /**
     * Run fn over [0, n) split in chunks of at least `grain` items on the
     * core's thread pool; returns when all chunks finished. `worker` is in
     * [0, thread_count) and unique among the chunks of ONE call running at
     * the same time; calls from inside fn, or while another thread's call is in
     * flight, run serially on the caller (reporting its index, often 0), so do
     * not index scratch that outlives the call by `worker` — allocate scratch
     * per call or per chunk.
     */
    void (*parallel_for)(void *host_ctx, size_t n, size_t grain, edgert_range_fn fn, void *arg);
    /** Number of threads parallel_for may use (>= 1). */
    unsigned (*thread_count)(void *host_ctx);
    /** Usable CPU flags of this device (bit i = edgert_cpu_flag i). */
    uint64_t cpu_flags;
    /* ---- ABI 1 ends here (EDGERT_HOST_V1_SIZE) ---- */
} edgert_host;

/** Size of edgert_host in ABI 1: a plugin needs at least this much table. */
#define EDGERT_HOST_V1_SIZE (offsetof(edgert_host, cpu_flags) + sizeof(uint64_t))

/**
 * The plugin descriptor. Static, const, owned by the plugin. Grows at the end
 * only; the host reads a field only if struct_size covers it.
 */
typedef struct edgert_plugin {
    uint32_t struct_size;  /**< sizeof(edgert_plugin) as the plugin was built */
    uint32_t abi_version;  /**< ABI version the plugin chose, within the host's range */
    const char *name;      /**< must equal the manifest's `name`, or its
                                `plugin_name` when it gives one (two manifests
                                over one library) */
    const char *version;   /**< the plugin's own version string */
    uint32_t caps;         /**< EDGERT_CAP_* bits */

    /**
     * Create an instance. `options` is a plugin-defined string (may be NULL or
     * empty), e.g. "path=fma" to force a code path; unknown options must be
     * refused with EDGERT_E_USAGE. On success *state is the instance.
     */
    edgert_status (*init)(const edgert_host *host, const char *options, void **state,
                          char *err, size_t err_len);
    /** Destroy an instance (state may be NULL). */
    void (*fini)(void *state);
    /** Quick correctness check of the instance on this CPU (e.g. a small GEMM
     *  against a scalar loop). Called once after init, before any use. */
    edgert_status (*self_test)(void *state, char *err, size_t err_len);
    /** Short human description of the code path the instance chose (may be NULL). */
    const char *(*describe)(void *state);

    /* --- EDGERT_CAP_GEMM --------------------------------------------------- */
    /**
     * Pack canonical weights into the plugin's layout. On success *packed is
     * an opaque handle and *packed_bytes the bytes the packed form occupies.
     * Refuse what the layout cannot hold (e.g. asymmetric zero points in a
     * symmetric backend) with EDGERT_E_UNSUPPORTED and a message that names
     * the tensor. Must not retain pointers into `w`.
     */
    edgert_status (*pack)(void *state, const edgert_qweights *w, void **packed,
                          size_t *packed_bytes, char *err, size_t err_len);
    /** Free a packed handle (may be NULL). */
    void (*packed_free)(void *state, void *packed);
    /** y = x * W^T with the packed weights. Thread-safe for distinct y. */
    edgert_status (*gemm)(void *state, const void *packed, const edgert_gemm_args *args,
                          char *err, size_t err_len);

    /* --- EDGERT_CAP_EXPORT ------------------------------------------------- */
    /**
     * Export a deployable artifact into directory `out_dir` (created by the
     * host). `request` is a NUL-terminated key=value list (one per line).
     * edgert/export.h is the contract: the request's grammar and common
     * keys, the report every export leaves, what each status means. NULL
     * for plugins without EDGERT_CAP_EXPORT.
     */
    edgert_status (*export_graph)(void *state, const char *out_dir, const char *request,
                                  char *err, size_t err_len);
    /* ---- ABI 1 ends here (EDGERT_PLUGIN_V1_SIZE) ---- */

    /* --- ABI 2: packed weights a cache can write to a file and map back ----
     *
     * The contract, for a plugin that sets EDGERT_PACKED_MAPPABLE (it then
     * needs EDGERT_CAP_GEMM, packed_data, packed_map and packed_layout; the
     * core refuses the descriptor at load otherwise):
     *   - The bytes packed_data returns for a handle are position-independent:
     *     they hold no address, so copied anywhere aligned to
     *     EDGERT_PACKED_ALIGN (a file, mmap'ed later, in another process,
     *     after a reboot) they can be given to packed_map.
     *   - The handle packed_map returns is used by the same gemm and freed by
     *     the same packed_free as one from pack, and gives results bit for bit
     *     equal to those of the handle its bytes came from, on an instance
     *     with the same code path (options).
     *   - packed_layout names the format of those bytes; a cache keys its
     *     files on it, so it changes whenever the bytes' meaning changes.
     *   - The bytes handed to packed_map are HOSTILE (a file anyone may have
     *     written, truncated or swapped): packed_map checks every field of
     *     them before it trusts any, and never reads outside [data, data +
     *     size) whatever they hold.
     */
    /** EDGERT_PACKED_* bits. Bits not defined for ABI 2 must be 0. */
    uint32_t packed_flags;
    /**
     * Stable id of the packed format (with EDGERT_PACKED_MAPPABLE), e.g.
     * "ref-w4a16/1": 1 to EDGERT_PACKED_LAYOUT_MAX characters from A-Z a-z
     * 0-9 and . _ + - / (the core refuses anything else at load). Change it
     * whenever the meaning of the bytes changes: cached bytes under the old
     * id are then stale. Instances whose code paths pack differently need
     * different ids; a plugin whose paths share one packed form (every
     * in-tree plugin) has one id. NULL without EDGERT_PACKED_MAPPABLE.
     */
    const char *packed_layout;
    /**
     * The position-independent bytes of handle `packed` (from pack or
     * packed_map): *data and *size, *data aligned to EDGERT_PACKED_ALIGN and
     * *size at most the packed_bytes pack reported (for a mapped handle:
     * the mapped bytes themselves). Typically everything after the plugin's
     * in-memory header. Valid, unchanged, while the handle lives.
     */
    edgert_status (*packed_data)(void *state, const void *packed, const void **data,
                                 size_t *size, char *err, size_t err_len);
    /**
     * A handle over `size` bytes at `data`, which the caller keeps mapped and
     * unchanged until packed_free of that handle: the plugin allocates only
     * a small header of its own (host->alloc) and never copies the data.
     * `shape` gives n, k, group and name of the tensor the caller expects
     * (codes, scales and zeros are NULL). The data start with a
     * plugin-defined, position-independent header (magic, layout version, n,
     * k, group, the sections' offsets and sizes: whatever the plugin needs to
     * check them), and packed_map validates every field against `size`,
     * `shape` and EDGERT_PACKED_ALIGN before it trusts any of them. A
     * refusal is EDGERT_E_PARSE (data that are not this layout, or not of
     * this shape, or truncated), EDGERT_E_USAGE (bad arguments, data not
     * aligned) or EDGERT_E_UNSUPPORTED (a shape the layout cannot hold), with
     * a message naming the plugin, the tensor and what was wrong.
     */
    edgert_status (*packed_map)(void *state, const edgert_qweights *shape, const void *data,
                                size_t size, void **packed, char *err, size_t err_len);
    /* ---- ABI 2 ends here (EDGERT_PLUGIN_V2_SIZE) ---- */
} edgert_plugin;

/** Size of the ABI-1 descriptor: the least struct_size the core accepts. */
#define EDGERT_PLUGIN_V1_SIZE (offsetof(edgert_plugin, export_graph) + sizeof(void (*)(void)))

/** Size of the ABI-2 descriptor: the least struct_size of a descriptor that
 *  answers abi_version 2 (a smaller one is refused, ABI_UNSUPPORTED). */
#define EDGERT_PLUGIN_V2_SIZE (offsetof(edgert_plugin, packed_map) + sizeof(void (*)(void)))

/**
 * The entry symbol's type. The host offers [abi_min, abi_max]; the plugin sets
 * *out to its descriptor (abi_version within the range) and returns EDGERT_OK,
 * or returns EDGERT_E_ABI with a message. `host` is valid until unload.
 */
typedef edgert_status (*edgert_plugin_entry_fn)(uint32_t abi_min, uint32_t abi_max,
                                                const edgert_host *host,
                                                const edgert_plugin **out, char *err,
                                                size_t err_len);

/** Exports the entry from a plugin built with hidden visibility. */
#define EDGERT_PLUGIN_EXPORT __attribute__((visibility("default")))

/**
 * The entry each plugin defines, declared here so that a definition whose
 * signature drifts from edgert_plugin_entry_fn fails to compile (and so
 * -Wmissing-prototypes needs no second declaration in the plugin). The core
 * never calls it by name: it looks EDGERT_PLUGIN_ENTRY_SYMBOL up with dlsym.
 */
EDGERT_PLUGIN_EXPORT edgert_status edgert_plugin_entry(uint32_t abi_min, uint32_t abi_max,
                                                       const edgert_host *host,
                                                       const edgert_plugin **out, char *err,
                                                       size_t err_len);

/**
 * Bounded formatting into an error buffer the caller owns (a failure is a
 * status code plus a message in the host's buffer). `err` may be
 * NULL or `err_len` 0 (then nothing is written); otherwise the result is
 * always NUL-terminated, truncated to err_len - 1 bytes. Header-only, so a
 * plugin links nothing of the core; the core, the CLI and the in-tree plugins
 * all format their errors through this one function.
 */
__attribute__((format(printf, 3, 4))) static inline void edgert_errf(char *err, size_t err_len,
                                                                     const char *fmt, ...)
{
    if (err == NULL || err_len == 0u)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

/**
 * The usual body of a plugin's entry, header-only so a plugin still links
 * nothing of the core. `by_abi` holds the plugin's descriptors, one per ABI
 * version it implements: by_abi[i] is the one for ABI 1 + i, for i < n_abi
 * (NULL where the plugin has none for that version). The plugin therefore
 * implements [1, n_abi]: its range is its array's, whatever header it was
 * built with. The newest version in both that range and the host's
 * [abi_min, abi_max] that has a descriptor is chosen; an empty intersection
 * (an inverted host range is empty) is EDGERT_E_ABI with both ranges named.
 * `name` prefixes the message. Use EDGERT_PLUGIN_NEGOTIATE, which counts
 * the array for you.
 */
static inline edgert_status edgert_plugin_negotiate(uint32_t abi_min, uint32_t abi_max,
                                                    const edgert_plugin *const *by_abi,
                                                    size_t n_abi, const char *name,
                                                    const edgert_plugin **out, char *err,
                                                    size_t err_len)
{
    if (out == NULL || by_abi == NULL || n_abi == 0u) {
        edgert_errf(err, err_len, "%s: entry: no descriptor array or out-pointer", name);
        return EDGERT_E_USAGE;
    }
    *out = NULL;
    uint64_t mine = (uint64_t)n_abi; /* the plugin implements [1, n_abi] */
    uint64_t lo = abi_min > 1u ? abi_min : 1u;
    uint64_t hi = (uint64_t)abi_max < mine ? (uint64_t)abi_max : mine;
    for (uint64_t v = hi; v >= lo && v >= 1u; v--) {
        if (by_abi[v - 1u] != NULL) {
            *out = by_abi[v - 1u];
            return EDGERT_OK;
        }
    }
    size_t first = 0; /* the oldest version the plugin has a descriptor for */
    while (first + 1u < n_abi && by_abi[first] == NULL)
        first++;
    edgert_errf(err, err_len,
                "%s: no common plugin ABI: the host offers [%u, %u], this plugin implements "
                "[%zu, %zu]",
                name, (unsigned)abi_min, (unsigned)abi_max, first + 1u, n_abi);
    return EDGERT_E_ABI;
}

/** edgert_plugin_negotiate with the length of the array `by_abi` (an array,
 *  not a pointer) counted at compile time. */
#define EDGERT_PLUGIN_NEGOTIATE(abi_min, abi_max, by_abi, name, out, err, err_len)               \
    edgert_plugin_negotiate((abi_min), (abi_max), (by_abi),                                      \
                            sizeof(by_abi) / sizeof((by_abi)[0]), (name), (out), (err), (err_len))

#ifdef __cplusplus
}
#endif
#endif /* EDGERT_PLUGIN_H */
