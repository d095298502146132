/*
 * core/formats/yamldoc.h — YAML documents with positions (yamldoc.c; their
 * diagnostics: common/diag.h): the one layer every YAML file edgert reads
 * goes through, so each gets the same limits (size, nesting), duplicate and
 * unknown key checks, and errors at file:line:col. Shared by the core and
 * the CLI (workload files), through the edgert_common library. Not installed.
 */
#ifndef EDGERT_CORE_YAMLDOC_H
#define EDGERT_CORE_YAMLDOC_H


#include <stddef.h>
#include <yaml.h>

#include "edgert/edgert.h"
#include "common/diag.h"

/* ---- YAML documents with positions (yamldoc.c) -------------------------- */

/**
 * A loaded YAML document. Every node keeps its start mark, so every error can
 * name file, line and column. Files over EDGERT_MAX_YAML_BYTES are refused
 * before parsing.
 */
typedef struct er_yaml {
    yaml_document_t doc;
    int loaded;
    const char *path;    /* borrowed */
    const char *section; /* prefix for field names in messages ("layout"), or NULL */
} er_yaml;

/** Load one document. On failure adds an error diagnostic (file:line:col) and
 *  returns EDGERT_E_IO or EDGERT_E_PARSE. An empty file is a parse error. */
edgert_status er_yaml_load(er_yaml *y, const char *path, er_diags *d);
/* A manifest is a few KiB (the largest shipped one: 3.5 KiB); 64 KiB is 18
 * times that. Files in any manifest folder are parsed by every command, so
 * the limit bounds what one stray or hostile file costs all of them: at 1
 * MiB (the limit of other YAML files), 95,000 keys took 115 ms to refuse. */
#define ER_MANIFEST_MAX_BYTES (64u * 1024u)
/** The same with a smaller size limit than EDGERT_MAX_YAML_BYTES. */
edgert_status er_yaml_load_max(er_yaml *y, const char *path, size_t max_bytes, er_diags *d);
void er_yaml_free(er_yaml *y);
yaml_node_t *er_yaml_root(er_yaml *y);
yaml_node_t *er_yaml_node(er_yaml *y, int id);
/** 1-based line/column of a node. */
unsigned er_yaml_line(const yaml_node_t *n);
unsigned er_yaml_col(const yaml_node_t *n);
/** Value node for `key` in mapping `map`, or NULL. */
yaml_node_t *er_yaml_get(er_yaml *y, yaml_node_t *map, const char *key);

/**
 * Typed field readers for a mapping. Each returns 0 on success, 1 when the key
 * is absent (and not required), -1 after adding an error diagnostic naming
 * file, line, column, field and the problem (wrong type, missing required
 * field, out of range).
 */
int er_yaml_str(er_yaml *y, yaml_node_t *map, const char *key, int required,
                char **out, er_diags *d);
int er_yaml_bool(er_yaml *y, yaml_node_t *map, const char *key, int required, int *out,
                 er_diags *d);
int er_yaml_int(er_yaml *y, yaml_node_t *map, const char *key, int required,
                long long lo, long long hi, long long *out, er_diags *d);
int er_yaml_num(er_yaml *y, yaml_node_t *map, const char *key, int required, double *out,
                er_diags *d);
/** A sequence of scalars; *out is a NULL-terminated malloc'd array of owned strings. */
int er_yaml_strlist(er_yaml *y, yaml_node_t *map, const char *key, int required,
                    char ***out, size_t *count, er_diags *d);
/** A mapping value (not a scalar): *out is the node. */
int er_yaml_map(er_yaml *y, yaml_node_t *map, const char *key, int required,
                yaml_node_t **out, er_diags *d);
/** Of the NULL-terminated `known` words, the closest to `k` within two edits
 *  (insert, delete, replace; the first of equals), or NULL, also for a `k`
 *  under 4 characters (two edits turn any short word into any other): the
 *  likely typo behind an unknown key or name. */
const char *er_near_miss(const char *k, const char *const *known);
/** 1 when `map` lacks `key` but has an unknown key that er_yaml_check_keys
 *  reports as a misspelling of it: checks that depend on `key` being absent
 *  then say nothing (the typo's error says it). */
int er_yaml_misspelt(er_yaml *y, yaml_node_t *map, const char *const *known, const char *key);
/** Check the keys of mapping `map`: a non-scalar or duplicate key is an error
 *  (-1); a key not in the NULL-terminated `known` list is a warning. Returns 0
 *  or -1. Also -1 (with an error) when `map` is not a mapping. */
int er_yaml_check_keys(er_yaml *y, yaml_node_t *map, const char *const *known,
                       er_diags *d);
void er_strlist_free(char **list);

#endif
