/*
 * core/context/context.h — the handle and its candidates, shared by the files of the
 * data flow (architecture.md, Data flow): discovery, gate, load, host, evidence, selector,
 * backend, export. Not installed.
 */
#ifndef EDGERT_CORE_CONTEXT_H
#define EDGERT_CORE_CONTEXT_H

#include <sys/types.h>
#include <time.h>

#include "common/internal.h"
#include "discover/manifest.h"
#include "run/arena.h"
#include "run/pool.h"

/*
 * Every gate, one bit each in er_cand.failed. Eligibility and the decision to
 * run plugin code are taken from these bits, which cannot fail to be set; the
 * reason strings (er_cand_reason) are decoration and may be lost when memory
 * runs out, so a gate fails closed whatever happens to its message.
 */
typedef enum er_gate_id {
    ER_GATE_DISABLED_BY_USER = 0,
    ER_GATE_WRONG_ARCH,
    ER_GATE_WRONG_DEVICE_CLASS,
    ER_GATE_MISSING_CPU_FLAG,
    ER_GATE_OS_STATE_DISABLED,
    ER_GATE_ABI_UNSUPPORTED,
    ER_GATE_STRICT_MODE,
    ER_GATE_LIBRARY_MISSING,
    ER_GATE_CHECKSUM_MISMATCH,
    ER_GATE_DLOPEN_FAILED,
    ER_GATE_NO_ENTRY_SYMBOL,
    ER_GATE_INVALID_DESCRIPTOR,
    ER_GATE_NAME_MISMATCH,
    ER_GATE_MISSING_CAPABILITY,
    ER_GATE_INIT_FAILED,
    ER_GATE_SELF_TEST_FAILED,
    ER_GATE_FAILED_VERIFY,
    ER_GATE_PLUGIN_CRASHED,     /* first contact, in the sandbox (sandbox.c) */
    ER_GATE_PLUGIN_TIMEOUT,
    ER_GATE_PLUGIN_EXITED,
    ER_GATE_UNSAFE_FILE,        /* writable by others, refused when it matters */
    ER_GATE_LAYOUT_MISMATCH,    /* the caller's weights (options.weights) do not fit */
    ER_GATE_SANDBOX_UNAVAILABLE, /* first contact could not make its child (sandbox.c) */
    ER_GATE_LIBRARY_REWRITTEN,  /* rewritten in place since this process mapped it (load.c) */
    ER_GATE_WRONG_RESULTS,      /* first contact's arithmetic check (sandbox_check.c) */
    ER_GATE_COUNT
} er_gate_id;
_Static_assert(ER_GATE_COUNT <= 32, "er_cand.failed holds one bit per gate");

typedef struct er_cand {
    edgert_candidate pub;       /**< the public view; pointers into m and below */
    er_manifest m;
    struct edgert_ctx *ctx;
    int explicit_file;          /**< named explicitly by the caller */
    uint32_t failed;            /**< bit (1 << er_gate_id) per failed gate */
    char **reasons;             /**< NULL-terminated, owned */
    size_t reason_cap;
    char *detail;               /**< human explanation of the first failure */
    int lib_fd;                 /**< the library, opened once by the file gate (-1: none);
                                     hashed, checked and loaded from this descriptor */
    uint64_t lib_hash;          /**< XXH3-64 of the bytes behind lib_fd */
    off_t lib_size;             /**< lib_fd's size and modification time when hashed: */
    struct timespec lib_mtime;  /**< changed since, it was rewritten in place */
    void *dl;                   /**< dlopen handle (live, loaded) */
    const edgert_plugin *plugin;/**< descriptor (live, loaded) */
    const char *packed_layout;  /**< the plugin's mappable packed layout (ABI 2,
                                     EDGERT_PACKED_MAPPABLE), else NULL: the one
                                     place the core reads it from */
    edgert_host host;           /**< the host table given to this plugin */
    void *state;                /**< the self-tested default instance */
    char *path_chosen;
    char checksum[EDGERT_CHECKSUM_LEN]; /**< pub.checksum points here when set */
    int sandbox_passed;         /**< first contact (sandbox.c) passed, now or cached */
    char contention[288];       /**< pub.first_contact_contention points here when set */
    int calibrated;             /**< pub.measured holds calibrate's figures (evidence.c) */
    char *series;               /**< their evidence series (pub.measured_series), or NULL */
    char *workload;             /**< their workload (pub.measured_workload), or NULL */
    char *fidelity_source;      /**< pub.measured_fidelity_source, or NULL */
} er_cand;

/* The stages of loading a plugin, in order (load.c); the sandbox's child
 * reports each one it enters, so a crash names where it happened. */
typedef enum er_stage {
    ER_STAGE_DLOPEN = 0, /* the library's constructors run */
    ER_STAGE_ENTRY,      /* the entry and its ABI answer */
    ER_STAGE_INIT,
    ER_STAGE_SELF_TEST,
    ER_STAGE_CHECK,      /* the core's arithmetic check (sandbox_check.c) */
    ER_STAGE_MEASURE,    /* the sandbox's quick measurement */
    ER_STAGE_COUNT
} er_stage;

struct edgert_ctx {
    edgert_device dev;
    er_diags diags;
    er_search_dir *dirs;
    size_t ndirs;
    er_cand **cands;
    size_t ncands;
    size_t nskipped;            /**< manifests found but skipped (unreadable, invalid) */
    er_pool *pool;
    er_arena *arena;            /**< packed weights (arena.c); NULL: host.c's allocation */
    int ignore_env, strict, no_evidence;
    long long sandbox_timeout_ms; /* first contact's limit (er_sandbox_timeout_ms) */
    int contention_ignored;     /* EDGERT_CONTENTION=ignore: figures kept as measured */
    int no_env_selection;       /**< EDGERT_PRIORITY / EDGERT_BACKEND not applied */
    int defer_load;             /**< edgert_open loads nothing; loading happens on demand */
    int cache_unnamed_said;     /**< the warning that no verdict cache folder exists, given */
    struct {                    /**< options.weights: what the layout gate needs of them */
        char *path;             /**< NULL: no weights given */
        int int4;               /**< GPTQ or packed (int4 codes); 0: dense */
        int asymmetric;         /**< a layer with zero points other than 8 (dense: quantized
                                     asymmetric on the fly) */
        char *packed_for;       /**< packed file: its backend */
        uint64_t packed_xxh3;   /**< packed file: its plugin file's XXH3 */
        int has_packed_xxh3;
        char *first_asym;       /**< the first asymmetric layer's name */
        /** every group size a layer has (a dense layer: the one it is
         *  quantized with, er_checkpoint_layer_weights), with the first
         *  layer that has it; and the first layer whose K is not a
         *  multiple of its group (NULL: none) */
        uint32_t *groups;
        char **group_layer;
        size_t ngroups;
        char *first_partial;
        uint32_t partial_k, partial_group;
    } weights;
    int stage_fd;               /**< in the sandbox's child: where stages are reported */
    int sb_lock_fd;             /**< first contact's lock while its child runs (and
                                 *   through sb_batch), else -1; the child closes it
                                 *   before any plugin code runs */
    int sb_batch;               /**< 1 while edgert_open meets its candidates: a lock
                                 *   taken is kept until all are met (er_sb_batch_end) */
    char **disabled;            /**< NULL-terminated names */
    edgert_log_fn log;
    void *log_user;
    int log_level;
    char *evidence_path;        /**< resolved; NULL when none */
    char fingerprint[17];
};

/* Each step's functions are in its folder's header (discover/discover.h,
 * gate/gate.h, load/load.h, sandbox/sandbox.h, evidence/evidence.h,
 * run/backend.h, weights/checkpoint.h); docs/architecture.md has the map.
 * The steps of edgert_open (context.c), in the order it calls them, and
 * what every step shares. */

/* candidate.c: the public view, reasons, the one lookup, the one "why not". */
void er_cand_publish(struct edgert_ctx *ctx, er_cand *c);
void er_cand_free(er_cand *c);
/** The candidate named `name`, or NULL. */
er_cand *er_cand_find(const struct edgert_ctx *ctx, const char *name);
/** Record that `gate` failed (always), and its reason code (when memory allows). */
void er_cand_reason(er_cand *c, er_gate_id gate, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/** The human explanation; only the first failure's is kept. */
void er_cand_detail(er_cand *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** Why `c` cannot be used: "CODE CODE — detail" (every reason code, then
 *  the first failure's explanation), for every message that refuses it. */
void er_cand_why_not(const er_cand *c, char *buf, size_t len);

/* context.c: the handle's log, which every step writes to. */
void er_log(struct edgert_ctx *ctx, edgert_log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
