/*
 * core/internal.h — declarations shared by the core's files. Not installed.
 * Prefix `er_` marks internal symbols; libedgert is built with hidden
 * visibility and exports only what edgert.h marks EDGERT_API.
 */
#ifndef EDGERT_CORE_INTERNAL_H
#define EDGERT_CORE_INTERNAL_H

#include <float.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "edgert/edgert.h"
#include "yamldoc.h" /* diagnostics and YAML documents, shared with the CLI */

/* ---- plugin messages (diag.c) ------------------------------------------ */

/** A plugin's error message for the caller: "name: context: message"
 *  (context may be NULL), or the plugin's message alone when it already
 *  begins with "self:" (the plugin then named its own context); the status
 *  name when the plugin wrote nothing. `name` is the backend's (manifest's)
 *  name, `self` the one the plugin's descriptor gives itself
 *  (er_manifest_plugin_name): when they differ (a library shared through
 *  plugin_name), a message naming the plugin gets "name: " in front, so the
 *  caller still reads which backend failed. */
void er_set_plugin_err(char *err, size_t len, const char *name, const char *self,
                       const char *context, const char *perr, edgert_status st);

/* ---- CPU flags (names.c) -------------------------------------------------- */

/** What the core knows of one CPU flag. */
typedef struct er_cpu_flag_info {
    const char *name;     /**< /proc/cpuinfo spelling, as in manifests */
    edgert_arch arch;     /**< the architecture the flag exists on */
    const char *os_state; /**< the OS-managed register state it needs ("avx512", "amx", ...) */
} er_cpu_flag_info;

/** The row of flag `f`, or NULL past the end of the enum. */
const er_cpu_flag_info *er_cpu_flag_info_of(edgert_cpu_flag f);

/* ---- small utilities (util.c) ------------------------------------------ */
/** Format into err (edgert_errf) and return st: `return er_fail(st, ...)`. */
edgert_status er_fail(edgert_status st, char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

char *er_strdup(const char *s);          /**< NULL-safe */
char *er_path_join(const char *a, const char *b);
/** sysroot + path (sysroot NULL, "" or "/": path itself); malloc'd, NULL on OOM.
 *  Every file the probe reads is named through this. */
char *er_rooted_path(const char *sysroot, const char *path);
/** secure_getenv, or NULL when ignore_env. */
const char *er_getenv(int ignore_env, const char *name);
/** 1 when a and b are equal but for the case of ASCII letters: the rule for
 *  names an operator types (EDGERT_PRIORITY, EDGERT_LOG), whatever the
 *  caller's locale (a Turkish I folds otherwise). */
int er_ascii_caseeq(const char *a, const char *b);
/** Read a whole small text file under `sysroot` (NULL = "/") into a NUL-terminated
 *  malloc'd buffer. Returns NULL when absent/unreadable or larger than max. */
char *er_read_file(const char *sysroot, const char *path, size_t max, size_t *len_out);
/** 1 if sysroot+path exists (any type). */
int er_path_exists(const char *sysroot, const char *path);
/** Write back and evict [p, p + n) from every cache level (x86 clflush,
 *  ARM64 DC CIVAC), so that the next read streams from memory; nothing on
 *  other architectures. Any range: unaligned, empty. The bytes are kept. */
void er_cache_evict(const void *p, size_t n);
/** [lo, hi] is a measured decode median v's range (calibrate's rounds,
 *  first contact's calls): 0 <= lo <= v <= hi, NaN anywhere false. The one
 *  rule for what is stored, read and compared as a range. */
static inline int er_is_range(double lo, double v, double hi)
{
    return lo >= 0.0 && lo <= v && v <= hi && hi <= DBL_MAX; /* not infinite */
}

/* ---- probe (probe*.c) and device profiles (device_profile.c) ------------ */

/** Probe this machine: CPU flags from the CPU itself (CPUID+XGETBV / HWCAP),
 *  everything else from files under `sysroot` (NULL = "/"). Never fails hard:
 *  unknown facts stay 0/"" and are noted in diagnostics. */
edgert_status er_probe(const char *sysroot, edgert_device *out, er_diags *d);
/** Pure helper (probe_class.c) used by er_probe and tests: decide the device
 *  class from files under sysroot for a given CPU arch; fills class,
 *  accelerator, class_evidence, bf16/bf16_source for GPU classes. */
void er_probe_device_class(const char *sysroot, edgert_arch arch, edgert_device *dev);
/** Load a device profile (plan mode). EDGERT_E_PARSE with a file:line:col
 *  diagnostic on any problem. */
edgert_status er_device_profile_load(const char *path, edgert_device *out, er_diags *d);
/** Every key of a device profile (NULL-terminated); docs/device-profile.md
 *  documents each, and tests/test_probe_profile.c checks that it does. */
extern const char *const er_profile_keys[];

/* ---- manifests (manifest.c) -------------------------------------------- */

#define ER_MANIFEST_MAJOR 1
#define ER_MANIFEST_MAX_GROUP_SIZES 16 /* layout.group_sizes: at most this many */

typedef struct er_manifest {
    char *path;            /**< the manifest file as found */
    char *dir;             /**< its folder (library paths are relative to it) */
    char *name, *version, *vendor;
    char *library;         /**< as written; NULL for declarative backends */
    char *library_path;    /**< resolved against dir; NULL when no library */
    int has_checksum;
    uint64_t checksum;     /**< xxh3-64 of the library file */
    uint32_t abi_min, abi_max;
    edgert_arch arch;      /**< EDGERT_ARCH_UNKNOWN = "any" */
    uint32_t device_classes; /**< bit (1 << edgert_device_class) */
    uint64_t requires_flags;
    uint64_t uses_flags;   /**< optional flags used when present */
    char *processor;       /**< "cpu" (default), "gpu", "npu" */
    char *layout_format, *activation_dtype, *fallback_dtype;
    int weight_bits, group_size, symmetric, activation_bits;
    /** layout.group_sizes: the group sizes of the checkpoints this layout
     *  packs (edgert_options.weights' gate); none listed and not `any`:
     *  group_size alone. layout.partial_groups: K need not be a multiple of
     *  the group. Both fail closed: absent means refused. */
    uint32_t group_sizes[ER_MANIFEST_MAX_GROUP_SIZES];
    unsigned n_group_sizes;
    int group_sizes_any, partial_groups;
    double bits_per_weight;
    int runs_in_process, verified, reference;
    char *plugin_options;  /**< optional default init options */
    /** The name the library's descriptor gives itself, when it is not `name`
     *  (this manifest reuses another backend's library, with other
     *  plugin_options); NULL: the descriptor's name must be `name`. Only
     *  with `library`. er_manifest_plugin_name gives the effective one. */
    char *plugin_name;
    char *rationale, *notes;
    edgert_figures declared; /**< NaN where absent; `where` owned via declared_where */
    char *declared_where;
} er_manifest;

/** The keys of the schema, NULL-terminated, per mapping: the top level,
 *  abi, requires, layout and declared (docs/manifest.md documents each). */
extern const char *const er_manifest_top_keys[];
extern const char *const er_manifest_abi_keys[];
extern const char *const er_manifest_requires_keys[];
extern const char *const er_manifest_layout_keys[];
extern const char *const er_manifest_declared_keys[];

/** Parse and validate one manifest. On failure adds diagnostics naming
 *  file:line:col and returns EDGERT_E_IO / EDGERT_E_PARSE; *out is then zeroed. */
edgert_status er_manifest_load(const char *path, er_manifest *out, er_diags *d);
void er_manifest_free(er_manifest *m);

/** The name the manifest's library must give itself in its descriptor:
 *  `plugin_name` when the manifest has one, else `name`. Every comparison
 *  with the descriptor's name (or with a plugin's messages, which begin
 *  with it) goes through this. */
static inline const char *er_manifest_plugin_name(const er_manifest *m)
{
    return m->plugin_name ? m->plugin_name : m->name;
}

/* ---- discovery (discovery.c) -------------------------------------------- */

typedef struct er_search_dir {
    char *path;
    const char *origin; /* static: "explicit", "EDGERT_ADD_MANIFEST_PATH", ... */
} er_search_dir;

struct stat;
/** A file or folder edgert reads code or manifests from that is group- or
 *  world-writable: a warning naming `what`, the path and its mode; refused
 *  (returns 1) when running as root or under secure execution (AT_SECURE),
 *  else 0. Returns 0 without a word for a path only its owner can write. */
int er_refuse_writable(er_diags *d, const char *what, const char *path, const struct stat *st);
/** Owned by a user other than root and this process's effective user. */
int er_owned_by_another(const struct stat *st);

/* ---- thread pool (threadpool.c) ---------------------------------------- */

typedef struct er_pool er_pool;
/** threads >= 1; threads - 1 workers are started lazily on first use. */
er_pool *er_pool_create(unsigned threads);
void er_pool_destroy(er_pool *p);
unsigned er_pool_threads(const er_pool *p);
/** Run fn over [0,n) in chunks of >= grain; the caller participates. Nested
 *  calls (from inside fn) and concurrent calls from other threads run serially
 *  on the calling thread. */
void er_pool_run(er_pool *p, size_t n, size_t grain, edgert_range_fn fn, void *arg);
/* The region the runs this thread dispatches from now on read ahead while
 * their last chunks finish (the next GEMM's packed bytes; at most 256 KiB
 * of its head); NULL: none. Thread-local (edgert_step). */
void er_pool_readahead(const void *base, size_t len);

/* ---- packed weights' memory (arena.c) ------------------------------------ */

typedef struct er_arena er_arena;
er_arena *er_arena_create(void);
/** Unmaps every region, blocks still live or not. */
void er_arena_destroy(er_arena *a);
/** `size` bytes aligned to `align` (a power of two, at most 4096; at least
 *  64 is given), back to back with earlier blocks on huge pages; NULL when
 *  the arguments do not fit or the system gives no memory. */
void *er_arena_alloc(er_arena *a, size_t size, size_t align);
/** 1 if p is a block of `a` (now freed), 0 if it is not (nothing done). */
int er_arena_free(er_arena *a, void *p);
/** The bytes of `a`'s blocks not freed yet (their sizes as asked). */
size_t er_arena_live_bytes(er_arena *a);
/** Evict every block of `a` from the caches (er_cache_evict): the next
 *  read of packed weights streams from memory (first contact's timing). */
void er_arena_evict(er_arena *a);
/** Mark this thread as running a pack whose allocations go to `a` (NULL:
 *  none) and return the previous mark, for the caller to restore. */
er_arena *er_arena_packing(er_arena *a);
/** This thread's mark (er_arena_packing). */
er_arena *er_arena_current(void);

/* ---- layout (gate.c) --------------------------------------------------------- */
/** Whether layout m packs weights in groups of g: layout.group_sizes, or
 *  group_size alone when it lists none (fails closed). K not a multiple of
 *  g needs layout.partial_groups besides. */
int er_layout_packs_group(const er_manifest *m, uint32_t g);
/** The layout's own group: group_size, or 128 when the manifest gives none
 *  (as edgert verify and bench generate its weights). */
uint32_t er_layout_group(const er_manifest *m);

/* ---- checksum (gate.c; evidence.c keys measurements by it too) ------------ */
/** XXH3-64 of a file; 0 on success, -1 if unreadable. */
int er_file_xxh3(const char *path, uint64_t *out);

/* ---- canonical weights (weights.c) ------------------------------------------ */
/** Allocate an owning canonical tensor (codes zeroed); EDGERT_E_NOMEM/USAGE. */
edgert_status er_qtensor_alloc(uint32_t n, uint32_t k, uint32_t group, int symmetric,
                               edgert_qtensor *out);
/** Quantize row r of `view` from src[0..k) by round to nearest; asymmetric
 *  zero points are at least zmin (1: GPTQ v1 cannot store 0). -1 on a
 *  non-finite input. */
int er_quantize_row(const float *src, uint32_t k, uint32_t group, int symmetric, unsigned zmin,
                    const edgert_qweights *view, uint32_t r);

#endif /* EDGERT_CORE_INTERNAL_H */
