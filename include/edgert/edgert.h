/*
 * edgert/edgert.h — the API an integrator calls.
 *
 * Life cycle:
 *   edgert_open()      probe the device (or read a device profile), find and
 *                      validate backend manifests, gate every candidate, and
 *                      (live mode only) dlopen + ABI-negotiate + self-test the
 *                      candidates whose declarative gates passed.
 *   edgert_select()    rank the eligible candidates for a priority.
 *   edgert_backend_open() / edgert_pack() / edgert_gemm()   run a backend;
 *                      edgert_step() runs a decode step's GEMMs in order
 *                      with the caller's callbacks between them.
 *   edgert_close()     unload everything.
 *
 * Every call's contract is written at its declaration (what is checked,
 * what is kept, which version added it). The selection and its account of
 * each rank (edgert/selection.h), checkpoints (edgert/checkpoint.h),
 * evidence and checksums (edgert/evidence.h) and exports (edgert/export.h)
 * have their own headers, which this one includes.
 *
 * Everything lives behind the edgert_ctx handle: no global mutable state, two
 * handles in one process do not interfere. A handle is not safe for concurrent
 * use from several threads except where noted (edgert_gemm on distinct
 * outputs).
 *
 * How this header grows (a program built against it keeps running with a
 * later libedgert): a struct the caller fills and passes in carries
 * struct_size and a named *_V1_SIZE, the least accepted, and a size macro
 * per appended region (read only when struct_size covers it); a
 * struct_size past this library's sizeof is accepted only when the bytes it
 * does not know are all zero, else EDGERT_E_USAGE names the first non-zero
 * byte (a program built against a newer header that set a field this
 * library would ignore is told, not ignored); a struct the
 * library returns is read through its pointer and gains fields only at its
 * end; edgert_layout and edgert_figures, which sit inside edgert_candidate,
 * never grow; edgert_qtensor, which the caller allocates and the library
 * fills, is written only up to EDGERT_QTENSOR_V1_SIZE. tests/load/test_abi.c
 * holds each of these.
 *
 * Environment variables (read with secure_getenv, ignored when
 * edgert_options.ignore_env is set):
 *   EDGERT_MANIFEST_PATH      colon-separated folders; replaces the defaults
 *   EDGERT_ADD_MANIFEST_PATH  colon-separated folders searched before the rest
 *   EDGERT_DISABLE            backend names never to use (, ; : or space between; any case)
 *   EDGERT_PRIORITY           speed|fidelity: replaces the priority an
 *                             application passes to edgert_select
 *   EDGERT_BACKEND            a backend name: replaces edgert_select's
 *                             `forced` (an operator swaps an application's
 *                             kernel without rebuilding it; the backend must
 *                             still be eligible)
 *   EDGERT_LOG                error|warn|info|debug: default log level
 *   EDGERT_SANDBOX_TIMEOUT    seconds a plugin's first contact may take
 *                             (default 60, at most 3600)
 *   EDGERT_CONTENTION         judge|ignore: whether figures measured while
 *                             other load took the CPUs or the memory are
 *                             set aside (judge, the default: first contact
 *                             keeps no figure, calibrate repeats the round)
 *                             or kept as measured (a machine never quiet);
 *                             read even with ignore_env: it describes the
 *                             machine, as the cache folders below do
 * XDG_CACHE_HOME and HOME name the folder of first contact's cached
 * verdicts (read even with ignore_env) and, unless ignore_env is set or
 * edgert_options.evidence_file names it, of the evidence file;
 * XDG_DATA_HOME names the per-user backends folder.
 */
#ifndef EDGERT_EDGERT_H
#define EDGERT_EDGERT_H

#include <stddef.h>
#include <stdint.h>

#include "edgert/plugin.h"
#include "edgert/status.h"
#include "edgert/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Marks the functions libedgert exports; everything else in the library is
 *  hidden (it is built with -fvisibility=hidden). */
#ifndef EDGERT_API
#define EDGERT_API __attribute__((visibility("default")))
#endif


/** Largest device-profile (or other YAML) file edgert parses; larger files
 *  are refused before parsing. Manifests have a smaller limit, 64 KiB: they
 *  are parsed by every command from every folder (manifest.md). */
#define EDGERT_MAX_YAML_BYTES (1024u * 1024u)

typedef struct edgert_ctx edgert_ctx;
typedef struct edgert_backend edgert_backend;
typedef struct edgert_packed edgert_packed;
typedef struct edgert_selection edgert_selection;

typedef enum edgert_arch {
    EDGERT_ARCH_UNKNOWN = 0,
    EDGERT_ARCH_X86_64 = 1,
    EDGERT_ARCH_ARM64 = 2
} edgert_arch;

typedef enum edgert_device_class {
    EDGERT_CLASS_UNKNOWN = 0,
    EDGERT_CLASS_X86_CPU = 1,       /**< "x86_cpu" */
    EDGERT_CLASS_ARM64_CPU = 2,     /**< "arm64_cpu" */
    EDGERT_CLASS_CUDA_DISCRETE = 3, /**< "cuda_discrete" */
    EDGERT_CLASS_JETSON = 4,        /**< "jetson" */
    EDGERT_CLASS_NPU_PHONE = 5      /**< "npu_phone" */
} edgert_device_class;

typedef enum edgert_priority {
    EDGERT_PRIORITY_SPEED = 0,   /**< "speed" */
    EDGERT_PRIORITY_FIDELITY = 1 /**< "fidelity" */
} edgert_priority;

/** The device facts the selection is made for (probed, or from a profile). */
typedef struct edgert_device {
    int planned;                /**< 1: from a device profile (plan mode); 0: probed (live) */
    char source[512];           /**< "probe (sysroot /)" or the profile's path */
    char name[128];             /**< profile name, or the probed CPU model */
    edgert_arch arch;
    edgert_device_class device_class;
    uint64_t cpu_flags;         /**< usable flags (bit = edgert_cpu_flag) */
    uint64_t cpu_flags_os_disabled; /**< in hardware, but the OS did not enable the state */
    unsigned logical_cores;
    uint64_t mem_total_bytes;   /**< 0 if unknown */
    uint64_t mem_available_bytes;
    int bf16;                   /**< device compute supports bf16 (GPU: driver info or
                                     default; CPU: flags) */
    char bf16_source[160];      /**< how `bf16` was decided */
    char accelerator[160];      /**< GPU model / NPU node that set the class, or "" */
    char class_evidence[256];   /**< which file(s) decided the class */
    /* -- appended; edgert_device is only read through the library's pointer -- */
    char cpu_id[96];            /**< the CPU as the kernel identifies it (/proc/cpuinfo,
                                     the first CPU listed), beside the marketing name:
                                     x86_64 "<vendor_id> family F model M stepping S"
                                     (decimal: family 26 is AMD Zen 5, 25 Zen 3 and
                                     Zen 4), arm64 "implementer 0x41 part 0xd0b variant
                                     0x4 revision 1"; "" when unknown or planned from a
                                     device profile. Not part of the evidence's device
                                     fingerprint. */
} edgert_device;

/** A backend's weight/activation layout, from its manifest. Never grows:
 *  it sits inside edgert_candidate (a field added here would move every
 *  candidate field after it); a new fact is appended to edgert_candidate. */
typedef struct edgert_layout {
    const char *format;          /**< weight format id, e.g. "int4-asym-g128" */
    int weight_bits;
    int group_size;              /**< 0 when not grouped */
    int symmetric;
    const char *activation_dtype;/**< e.g. "bf16", "int8", "fp32" */
    int activation_bits;
    double bits_per_weight;      /**< stored bits per weight incl. scales/zeros */
    const char *fallback_dtype;  /**< dtype used when the device lacks bf16, or NULL */
} edgert_layout;

/** Performance/fidelity figures; a NaN field is unknown. Never grows, as
 *  edgert_layout: two sit inside edgert_candidate; a new figure is
 *  appended to edgert_candidate (as first_contact_prefill_gflops was). */
typedef struct edgert_figures {
    double decode_tokens_per_s;  /**< GEMM-only decode tokens/s on spark-1.7b */
    double prefill_gflops;       /**< prefill throughput, M = 512 */
    double top1_agreement;       /**< 0..1, vs dense fp32 on the output head */
    double kl_mean;              /**< mean KL divergence vs dense fp32 */
    const char *where;           /**< where they were measured (declared) or the evidence file */
} edgert_figures;

/** One manifest found, with its verdict. Read-only; owned by the handle. */
typedef struct edgert_candidate {
    const char *name;
    const char *version;
    const char *vendor;
    const char *manifest_path;
    const char *library_path;    /**< resolved absolute-or-relative path, NULL for declarative */
    const char *processor;       /**< "cpu", "gpu" or "npu" */
    const char *rationale;
    const char *notes;
    edgert_layout layout;
    int runs_in_process;
    int verified;                /**< the manifest claims figures measured on real hardware */
    int reference;               /**< the always-available fallback backend */
    uint32_t abi_min, abi_max;   /**< ABI range the manifest declares */
    edgert_figures declared;
    edgert_figures measured;     /**< measured on this device: `edgert calibrate`'s
                                      evidence, else first contact's quick decode
                                      and prefill; NaN where none */
    int eligible;                /**< passed every gate that applies in this mode */
    int loaded;                  /**< live mode: library loaded and self-tested */
    size_t reason_count;
    const char *const *reasons;  /**< stable codes, e.g. "MISSING_CPU_FLAG(amx_tile)" */
    const char *detail;          /**< human explanation of the first failing gate, or "" */
    const char *path_chosen;     /**< the loaded instance's describe(), or NULL */
    /** layout.activation_dtype as it applies on this device: the manifest's
     *  fallback_dtype when the device lacks bf16, else activation_dtype. */
    const char *effective_activation_dtype;
    /* -- appended; edgert_candidate is only read through the library's pointers -- */
    /** The manifest's `checksum` ("xxh3-64:<hex>"), or NULL when it has none. */
    const char *checksum;
    /** 1: the library file's bytes matched `checksum`; -1: they did not
     *  (CHECKSUM_MISMATCH); 0: not checked (no checksum, no library, plan
     *  mode, or the file was missing). */
    int checksum_verified;
    /** The plugin ABI version negotiated with the loaded plugin; 0 when not loaded. */
    uint32_t abi_version;
    /** The manifest's `plugin_name`: the name the library's descriptor gives
     *  itself when this manifest reuses another backend's library (with other
     *  plugin_options); NULL when it has none (the descriptor's name is then
     *  `name`). */
    const char *plugin_name;
    /** The slowest and fastest of the rounds `measured.decode_tokens_per_s`
     *  is the median of (`edgert calibrate`), NaN when not known: then the
     *  figure is compared as an exact value. */
    double measured_decode_min, measured_decode_max;
    /** First contact's quick measurement of the decode rate on this device
     *  (the sandbox's, cached per plugin file), NaN when there is none (no
     *  first contact, a plan, or no_evidence). Kept beside `measured`, which
     *  holds `edgert calibrate`'s figures instead whenever this device has
     *  them for the plugin's current build; the selector compares every
     *  backend by one of the two (edgert_selection_decode_source). */
    double first_contact_decode_tokens_per_s;
    /** The evidence series `measured` comes from when it holds calibrate's
     *  figures (the store call that wrote them: one `edgert calibrate` run,
     *  see edgert_evidence_store), else NULL. The selector compares a tier
     *  by calibrate's figures only when they are one series. */
    const char *measured_series;
    /** The slowest and fastest call of first contact's quick decode
     *  measurement, as tokens/s (NaN when there is none): the range the
     *  selector compares, as calibrate's rounds, when the tier is compared
     *  by first contact (edgert_selection_decode_group). */
    double first_contact_decode_min, first_contact_decode_max;
    /** First contact's quick prefill measurement (GFLOP/s, M = 64), NaN
     *  when there is none: what decides inside a decode group of a tier
     *  compared by first contact. */
    double first_contact_prefill_gflops;
    /** The tokens `measured.top1_agreement` was counted over (calibrate's
     *  evidence), 0 when not known. */
    unsigned measured_top1_tokens;
    /** The workload calibrate measured `measured` on ("spark-1.7b" unless
     *  `edgert calibrate --workload` named another), NULL when `measured`
     *  is not calibrate's or the evidence does not say. Its decode rate is
     *  that workload's tokens/s, not comparable with a manifest's declared
     *  spark-1.7b figure. */
    const char *measured_workload;
    /** The memory read rate (GB/s) measured beside first contact's decode
     *  calls: before each call, a read of 48 MiB from memory by the same
     *  threads; the median of those reads. NaN when there is none: no quick
     *  decode figure, or a kernel its arithmetic binds (a call over twice
     *  the read's time, like the portable reference's, or a kernel so slow
     *  it was timed on a small shape), whose figure stands as measured.
     *  Each call's rate in first_contact_decode_tokens_per_s and its range
     *  was scaled to this median (times the median read rate over the rate
     *  of the read before it; a read over 1.5x away from the median was cut
     *  short by another task, and its call stays as measured), so bandwidth
     *  that moved during the calls does not widen the range; and the
     *  selector compares a tier's first-contact figures at one read rate,
     *  the median of theirs (edgert_selection_decode_read_gbs), not at the
     *  rate each first contact happened to meet. Added with
     *  edgert_selection_decode_range. */
    double first_contact_read_gbs;
    /** What `measured.top1_agreement` and `measured.kl_mean` were measured
     *  on when the evidence names it (edgert_evidence.fidelity_source: a
     *  model's greedy runs, say), NULL when they are calibrate's verify of
     *  measured_workload or there are none. */
    const char *measured_fidelity_source;
    /** The outputs first contact's arithmetic check compared (the core's own
     *  check of the plugin's GEMM, independent of its self-test: small
     *  matrices the core draws in the manifest's layout, each output against
     *  the exact sum under the bound derived from the activation type; a
     *  plugin that fails it is WRONG_RESULTS and never loaded). 0 when it did
     *  not run: no GEMM, not loaded, a plan, or its pack refused the core's
     *  weights. Cached with first contact's verdict. */
    unsigned arithmetic_checked;
    /** Why first contact's quick figures were not kept, NULL when they were
     *  (or none were taken): what its measurement saw of other load on the
     *  machine, in one clause, and what it measured then ("its threads
     *  waited for a CPU 52% of the time (run queue 14 on 2 CPUs); measured
     *  3.1 tok/s, 49 GFLOP/s"). The first_contact_* figures are NaN then,
     *  the verdict (loaded, self-tested, checked) stands and is cached, the
     *  selector compares the backend's tier by declared figures
     *  (edgert_selection_decode_source "declared"), and a run a minute or
     *  more later measures it again. A measurement is contended when its
     *  threads waited for a CPU a fifth of their time or more, or read memory
     *  at under a third of what this device reads when quiet. */
    const char *first_contact_contention;
    /** The share of their time first contact's measuring threads waited
     *  for a CPU (the kernel's schedstat run delay), NaN when not known. */
    double first_contact_wait_share;
    /** First-contact measurements the current verdict took: 1, or more
     *  when earlier ones ran under contention and were taken again; 0 when
     *  nothing was measured. */
    unsigned first_contact_attempts;
    /** Decode rounds `edgert calibrate` measured and set aside as contended
     *  before the rounds `measured.decode_tokens_per_s` is the median of
     *  (edgert_evidence.decode_rounds_repeated); 0 when none or not
     *  calibrated. */
    unsigned measured_rounds_repeated;
    /** The manifest's layout.activation_group_size: with int8 activations,
     *  how many inputs along K share one activation scale (the backend
     *  quantizes each token's activations per group of that many); 0, one
     *  scale per token. `edgert verify` emulates that form. */
    int activation_group_size;
} edgert_candidate;

/** A diagnostic collected while opening: bad manifests, duplicates, warnings. */
typedef struct edgert_diag {
    edgert_log_level level;
    const char *file;            /**< may be NULL */
    unsigned line, column;       /**< 1-based; 0 when not applicable */
    const char *message;
} edgert_diag;

typedef void (*edgert_log_fn)(void *user, edgert_log_level level, const char *message);

/** Options of edgert_open. Zero-initialise, set struct_size, fill what you need. */
typedef struct edgert_options {
    uint32_t struct_size;           /**< sizeof(edgert_options) */
    const char *sysroot;            /**< prefix for every file the probe reads; NULL = "/" */
    const char *device_profile;     /**< YAML device profile replacing the probe (plan mode) */
    const char *const *manifest_paths; /**< folders or files; replace EDGERT_MANIFEST_PATH and
                                            the defaults (EDGERT_ADD_MANIFEST_PATH is still
                                            searched first, unless ignore_env); none NULL
                                            or empty (E_USAGE) */
    size_t manifest_path_count;
    int ignore_env;                 /**< 1: read no EDGERT_* variable (hermetic tests;
                                         without manifest_paths the default folders are
                                         still searched, the per-user one named by
                                         XDG_DATA_HOME or HOME among them) */
    const char *disable;            /**< names (, ; : or space between; any case), added to
                                         EDGERT_DISABLE */
    int strict;                     /**< 1: the reference backend is never eligible */
    int no_evidence;                /**< 1: ignore measured evidence */
    const char *evidence_file;      /**< evidence file to read; NULL = the per-user cache */
    unsigned threads;               /**< thread pool size; 0 = all logical cores */
    edgert_log_fn log;              /**< NULL: messages at or above log_level go to stderr.
                                         What opening found wrong (a skipped manifest, an
                                         unknown key, a bad setting or evidence file) is
                                         kept as diagnostics, not logged: read them with
                                         edgert_diag_count / edgert_diag_at */
    void *log_user;
    int log_level;                  /**< an edgert_log_level, or 0 for the default:
                                         EDGERT_LOG, else EDGERT_LOG_WARN; another value
                                         is E_USAGE */
    /* ---- version 1 ends here (EDGERT_OPTIONS_V1_SIZE); fields only ever append ---- */
    /* ---- version 2 (edgert 0.1.0), to EDGERT_OPTIONS_V2_SIZE ---- */
    int no_env_selection;           /**< 1: EDGERT_PRIORITY and EDGERT_BACKEND do not
                                         replace edgert_select's arguments (a program
                                         whose own command line is the operator's
                                         choice, like the edgert CLI) */
    int defer_load;                 /**< 1: edgert_open runs no plugin code: candidates
                                         carry the gates' verdicts and any cached
                                         first-contact verdict; edgert_select loads what
                                         it ranks (only the forced backend when one is
                                         named) and edgert_backend_open / edgert_export
                                         load theirs on demand */
    /* ---- version 3 (edgert 0.1.0), to EDGERT_OPTIONS_V3_SIZE ---- */
    const char *weights;            /**< a checkpoint (edgert_checkpoint_open) the
                                         selection is for: backends whose manifest
                                         layout cannot take it fail the gate
                                         LAYOUT_MISMATCH(<why>) (asymmetric zero points
                                         for a symmetric backend, int4 weights for a
                                         non-int4 one, a file packed for another
                                         backend, groups of a size the layout does
                                         not pack, a K that is not a multiple of
                                         the group where it holds whole groups
                                         only: the manifest's layout.group_sizes
                                         and layout.partial_groups). A file that
                                         cannot be opened is
                                         edgert_open's error. */
} edgert_options;

/** Size of edgert_options in its first version: the least struct_size accepted.
 *  Each appended region is read only when struct_size covers its size macro;
 *  a struct_size past sizeof(edgert_options) is accepted only when the bytes
 *  this library does not know are all zero (else EDGERT_E_USAGE naming the
 *  first non-zero byte's offset). */
#define EDGERT_OPTIONS_V1_SIZE (offsetof(edgert_options, log_level) + sizeof(int))
/** Through defer_load: no_env_selection and defer_load are read. */
#define EDGERT_OPTIONS_V2_SIZE (offsetof(edgert_options, defer_load) + sizeof(int))
/** Through weights: the layout gate's checkpoint is read. */
#define EDGERT_OPTIONS_V3_SIZE (offsetof(edgert_options, weights) + sizeof(const char *))

/** Open a handle (`options` NULL: every field's default). On failure *out
 *  is NULL and err explains. A bad manifest is
 *  a diagnostic, not a failure, unless it was named explicitly as a file
 *  (then EDGERT_E_PARSE); a bad device profile is EDGERT_E_PARSE. A path of
 *  manifest_paths that is missing is EDGERT_E_NOT_FOUND; one that cannot be
 *  read, is no file or folder, or is writable by others or owned by another
 *  user (neither root nor the effective one) as root is
 *  EDGERT_E_IO; options that mean nothing (a NULL or empty path, a log level
 *  past debug) are EDGERT_E_USAGE; a struct_size past this library's
 *  edgert_options with a non-zero byte it does not know is EDGERT_E_USAGE.
 *
 *  What it does to the process, in live mode (no device_profile) and unless
 *  defer_load is set: every candidate that passed its gates meets a first
 *  contact in a child process: edgert_open fork()s, the child dlopen()s the
 *  plugin and self-tests it, and the caller's thread waits for it, up to
 *  EDGERT_SANDBOX_TIMEOUT seconds (default 60) per plugin before the child
 *  is killed; the verdict is cached per device and plugin file under
 *  $XDG_CACHE_HOME/edgert/first-contact/ (~/.cache/...), so later opens skip
 *  the child. One process of a user meets plugins at a time: a verdict not
 *  cached yet is waited for on a lock there (flock, for at most the time
 *  limit and 10 s) and taken from the process that held it. The child is
 *  reaped before edgert_open returns, and SIGCHLD's disposition is left as
 *  it was. Then the plugins that passed are loaded
 *  into this process (their constructors run here) and self-tested again; a
 *  thread pool of options.threads is started on first use. With defer_load
 *  that happens in edgert_select / edgert_backend_open instead, for what
 *  they rank or open; in plan mode no plugin code runs at all. */
EDGERT_API edgert_status edgert_open(const edgert_options *options, edgert_ctx **out, char *err,
                                     size_t err_len);
/** Close a handle (NULL is fine) and unload its plugins. Free what was made
 *  from it first, in this order: packed weights (edgert_packed_free), then
 *  backends (edgert_backend_close), and selections (edgert_selection_free);
 *  using any of them after edgert_close is undefined, as is freeing one
 *  twice. */
EDGERT_API void edgert_close(edgert_ctx *ctx);

EDGERT_API const edgert_device *edgert_device_facts(const edgert_ctx *ctx);
EDGERT_API size_t edgert_candidate_count(const edgert_ctx *ctx);
EDGERT_API const edgert_candidate *edgert_candidate_at(const edgert_ctx *ctx, size_t i);
EDGERT_API const edgert_candidate *edgert_candidate_find(const edgert_ctx *ctx, const char *name);
/** What opening found wrong or worth saying, each with its file, line and
 *  column where there is one: skipped manifests, unknown keys, settings
 *  ignored, unreadable evidence. They are not logged; an application shows
 *  them (examples/integrate prints the warnings). */
EDGERT_API size_t edgert_diag_count(const edgert_ctx *ctx);
EDGERT_API const edgert_diag *edgert_diag_at(const edgert_ctx *ctx, size_t i);
/** Folders searched for manifests, in order, with where each came from. */
EDGERT_API size_t edgert_search_path_count(const edgert_ctx *ctx);
EDGERT_API const char *edgert_search_path_at(const edgert_ctx *ctx, size_t i, const char **origin);
/** Number of threads of the handle's pool. */
EDGERT_API unsigned edgert_thread_count(const edgert_ctx *ctx);
/**
 * Run fn over [0, n) on the handle's thread pool, in chunks of at least
 * `grain` items; returns when every chunk has finished. The contract is the
 * one plugins get through edgert_host.parallel_for (plugin.h): the calling
 * thread works too; `worker` is in [0, edgert_thread_count) and unique among
 * the chunks of one call running at the same time; a call made from inside
 * fn, or while another thread's call on the same handle is in flight, runs
 * serially on the caller. `ctx` NULL runs fn(arg, 0, n, 0) on the caller.
 */
EDGERT_API void edgert_parallel_for(edgert_ctx *ctx, size_t n, size_t grain, edgert_range_fn fn,
                                    void *arg);

/* --- running a backend -------------------------------------------------- */

/** Create a fresh instance of a loaded, eligible, in-process backend.
 *  `options` (NULL: none) go to the plugin's init after the manifest's
 *  plugin_options, blank-separated, e.g. "prefetch=near"; an option whose
 *  key the manifest's plugin_options set to another value is refused
 *  (EDGERT_E_USAGE): those are what the backend's name stands for
 *  (avx512-w4a8 is amx-w4a8's library on path=vnni), so open the backend
 *  whose manifest has the path you want. Forced options pass the self-test
 *  before the instance is given out. */
EDGERT_API edgert_status edgert_backend_open(edgert_ctx *ctx, const char *name, const char *options,
                                             edgert_backend **out, char *err, size_t err_len);
EDGERT_API void edgert_backend_close(edgert_backend *b);
EDGERT_API const char *edgert_backend_name(const edgert_backend *b);
EDGERT_API const char *edgert_backend_describe(const edgert_backend *b);

/** Pack canonical weights into backend b's layout. The packed weights are
 *  a copy: `w`'s buffers may be freed on return. They belong to this
 *  instance of the backend (the layout may depend on its code path): GEMMs
 *  on another instance, even of the same backend, are refused. *out is NULL
 *  on any failure: EDGERT_E_USAGE for a NULL argument, a struct_size below
 *  EDGERT_QWEIGHTS_V1_SIZE, n, k or group 0, NULL codes or scales, or a
 *  perm (act order, version 2) that is not a permutation of 0..k-1, which
 *  is copied with the weights;
 *  EDGERT_E_UNSUPPORTED for a shape or group the layout cannot hold; what
 *  the plugin returns otherwise (EDGERT_E_NOMEM among them), its reason in
 *  err. */
EDGERT_API edgert_status edgert_pack(edgert_backend *b, const edgert_qweights *w,
                                     edgert_packed **out, char *err, size_t err_len);
/** Bytes the packed weights occupy (for a handle from edgert_packed_map: the
 *  `size` mapped). 0 for NULL. */
EDGERT_API size_t edgert_packed_bytes(const edgert_packed *p);
/** Free packed weights (from edgert_pack or edgert_packed_map; NULL is fine;
 *  once, like free()). Call it before edgert_backend_close of the backend
 *  that made them: after it, freeing them is undefined (the backend's code
 *  frees them). */
EDGERT_API void edgert_packed_free(edgert_packed *p);

/*
 * Packed weights written to a file and mapped back without repacking (the
 * backend's plugin implements ABI 2 with EDGERT_PACKED_MAPPABLE, plugin.h).
 * A packed-weight cache: pack once, edgert_packed_data, write the bytes at an
 * offset that is a multiple of EDGERT_PACKED_ALIGN of a file keyed on the
 * backend's name, edgert_backend_packed_layout, the code path (the options
 * given to edgert_backend_open) and the tensor; later mmap the file and
 * edgert_packed_map the bytes. The mapped handle gives results bit for bit
 * equal to the handle the bytes came from, on an instance opened with the
 * same options. The bytes are checked (they come from a file): a refusal
 * means "pack again". They are the backend's native form for this kind of
 * CPU (byte order included): a file is not portable between architectures.
 */

/** The id of the backend's mappable packed layout, e.g. "ref-w4a16/1" (1 to
 *  EDGERT_PACKED_LAYOUT_MAX characters from A-Z a-z 0-9 . _ + - /); it
 *  changes whenever the meaning of the bytes changes, so a cache keyed on it
 *  never maps stale bytes. NULL when the backend cannot map its packed form
 *  (an ABI-1 plugin, or one without the capability), or b is NULL. */
EDGERT_API const char *edgert_backend_packed_layout(const edgert_backend *b);
/**
 * The position-independent bytes of packed weights, to write to a file:
 * *data (aligned to EDGERT_PACKED_ALIGN) and *size (at most
 * edgert_packed_bytes(p)), valid and unchanged while `p` lives. For a handle
 * from edgert_packed_map, the mapped bytes themselves. EDGERT_E_UNSUPPORTED
 * when the backend cannot map its packed form (edgert_backend_packed_layout
 * is NULL), EDGERT_E_USAGE for NULL arguments, EDGERT_E_PLUGIN when the
 * plugin's answer breaks the contract (NULL, empty, misaligned or larger
 * than the packed weights).
 */
EDGERT_API edgert_status edgert_packed_data(const edgert_packed *p, const void **data,
                                            size_t *size, char *err, size_t err_len);
/**
 * Packed weights over `size` bytes at `data` — bytes edgert_packed_data gave
 * for a tensor of this shape on this backend, typically from an mmap'ed file,
 * and `size` exactly as it gave it (no padding) — without copying them: keep
 * them mapped and unchanged until
 * edgert_packed_free of *out (edgert_packed_bytes reports `size`). `shape`
 * gives n, k, group and (optionally) name and perm, which are the packed
 * weights' (perm checked and copied as edgert_pack does); its codes, scales
 * and zeros are ignored. `data` must be aligned to EDGERT_PACKED_ALIGN. The backend checks
 * every field of the bytes against `size` and `shape` before using them and
 * never reads outside them. The handle is used with edgert_gemm on `b`.
 * EDGERT_E_USAGE: bad arguments (NULL, n, k or group 0, size 0, data not
 * aligned); EDGERT_E_UNSUPPORTED: the backend cannot map (see
 * edgert_backend_packed_layout) or its layout cannot hold this shape;
 * EDGERT_E_PARSE: the bytes are not this backend's layout, or not of this
 * shape, or truncated — err says what, naming the backend and the tensor.
 */
EDGERT_API edgert_status edgert_packed_map(edgert_backend *b, const edgert_qweights *shape,
                                           const void *data, size_t size, edgert_packed **out,
                                           char *err, size_t err_len);
/** y[m][n] = x[m][k] * W^T, k and n those of the packed weights. Refused
 *  (EDGERT_E_USAGE, nothing written) before the backend runs: a NULL
 *  argument, a struct_size below EDGERT_GEMM_ARGS_V1_SIZE, m 0, ldx < k,
 *  ldy < n, rows past what a pointer offset holds, weights packed by
 *  another instance, and a y whose rows share memory with x's (x and y may
 *  be blocks of columns of one matrix). x is in the model's order: weights
 *  packed with a perm get x's columns gathered into theirs first (a copy
 *  of m x k floats; EDGERT_E_NOMEM when it cannot be had). */
EDGERT_API edgert_status edgert_gemm(edgert_backend *b, const edgert_packed *p,
                                     const edgert_gemm_args *args, char *err, size_t err_len);

/* --- the decode step: GEMMs in order, the caller's work between them ---- */

/** Called by edgert_step after op `index` has finished and before the next
 *  op starts, on the thread that called edgert_step: the caller's work
 *  between GEMMs (norms, attention, activation functions; typically
 *  writing the next op's x from this op's y). EDGERT_OK goes on; any other
 *  status ends the step with that status. It may itself run GEMMs (edgert_gemm,
 *  edgert_step). */
typedef edgert_status (*edgert_step_fn)(void *user, size_t index);

/** One GEMM of a step. The ops of one call are an array whose elements all
 *  have the same struct_size, which is also the array's stride. */
typedef struct edgert_step_op {
    uint32_t struct_size;           /**< sizeof(edgert_step_op) */
    const edgert_packed *weights;   /**< packed by the backend the step runs on */
    const edgert_gemm_args *args;   /**< as for edgert_gemm; read when the op starts */
    edgert_step_fn after;           /**< NULL: none */
    void *user;                     /**< passed to `after` */
    /* ---- version 1 ends here (EDGERT_STEP_OP_V1_SIZE) ---- */
} edgert_step_op;

/** Size of edgert_step_op in version 1: the least struct_size accepted. */
#define EDGERT_STEP_OP_V1_SIZE (offsetof(edgert_step_op, user) + sizeof(void *))

/**
 * Run ops[0..count) on backend `b` in order: op i's GEMM, then its `after`
 * callback, then op i + 1. The results are those of the same edgert_gemm
 * calls, bit for bit; what the step adds is that it knows the next weights:
 * while op i's last chunks are in flight, the pool's threads that have no
 * chunk left read the head of op i + 1's packed weights into their cache
 * (plugins with mappable packed bytes, plugin ABI 2), so a dependent GEMM
 * does not start from DRAM latency. Every op is checked before the first
 * runs (a bad op later in the list leaves every output untouched), and again
 * as it starts, since a callback may have changed its args; a GEMM
 * that fails or a callback that returns an error ends the step, with the op
 * named in `err`. count 0 does nothing (b is still checked). A callback's
 * status that is none of edgert_status's ends the step as it is (its name:
 * "E_UNKNOWN"). `edgert bench` times decode this
 * way (--calls: one edgert_gemm per GEMM instead).
 */
EDGERT_API edgert_status edgert_step(edgert_backend *b, const edgert_step_op *ops, size_t count,
                                     char *err, size_t err_len);

/* --- names --------------------------------------------------------------- */
/** The version of the running libedgert, e.g. "0.1.0" (EDGERT_VERSION_STRING
 *  is the one of the headers a program was built with). Never NULL. */
EDGERT_API const char *edgert_version(void);
/** Stable short name of a status code, e.g. "E_PARSE". Never NULL. (A core
 *  function: declared here, not in status.h, which plugins include and which
 *  must declare nothing a plugin cannot link.) */
EDGERT_API const char *edgert_status_name(edgert_status s);
/** "x86_64", "arm64", "unknown" */
EDGERT_API const char *edgert_arch_name(edgert_arch a);
EDGERT_API const char *edgert_device_class_name(edgert_device_class c);
EDGERT_API const char *edgert_priority_name(edgert_priority p);
/** NULL past the end */
EDGERT_API const char *edgert_cpu_flag_name(edgert_cpu_flag f);
/** Parse names; return 0 on success, -1 if unknown (or out is NULL).
 *  edgert_arch_parse also takes "aarch64" for arm64; edgert_priority_parse
 *  takes any case ("Fidelity"). */
EDGERT_API int edgert_arch_parse(const char *s, edgert_arch *out);
EDGERT_API int edgert_device_class_parse(const char *s, edgert_device_class *out);
EDGERT_API int edgert_priority_parse(const char *s, edgert_priority *out);
EDGERT_API int edgert_cpu_flag_parse(const char *s, edgert_cpu_flag *out);

#ifdef __cplusplus
}
#endif

/* The topic headers, so one include gives the whole API: the ranking
 * (selection.h), a user's own weights (checkpoint.h), measured evidence and
 * file integrity (evidence.h), exports for an NPU (export.h). */
#include "edgert/selection.h"
#include "edgert/checkpoint.h"
#include "edgert/evidence.h"
#include "edgert/export.h"

#endif /* EDGERT_EDGERT_H */
