/*
 * core/discover/manifest.h — step 2, what backends exist: manifests (manifest.c) and the
 * folders searched for them (discovery.c).
 * Not installed.
 */
#ifndef EDGERT_CORE_MANIFEST_H
#define EDGERT_CORE_MANIFEST_H

#include "common/internal.h"

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
    /** layout.activation_group_size: int8 activations, the inputs along K
     *  one scale covers; 0 (absent): one scale per token. */
    int activation_group_size;
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

/* Whose files are believed: os/trust.h. */

#endif /* EDGERT_CORE_MANIFEST_H */
