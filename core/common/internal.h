/*
 * core/common/internal.h — what every step of the core stands on: CPU flag
 * names (names.c) and small utilities (util.c). Not installed. Prefix `er_`
 * marks internal symbols; libedgert is built with hidden visibility and
 * exports only what edgert.h marks EDGERT_API.
 */
#ifndef EDGERT_CORE_INTERNAL_H
#define EDGERT_CORE_INTERNAL_H

#include <float.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "edgert/edgert.h"
#include "common/diag.h"

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
/** open(2) for reading a regular file, never blocking on a FIFO or a
 *  device (util.c): the descriptor; -1 with errno when it cannot be opened;
 *  -2 when it is not a regular file (errno EISDIR for a folder, else
 *  EINVAL), so the caller can say "not a regular file". */
int er_open_regular(const char *path);
/** Read a whole small text file under `sysroot` (NULL = "/") into a NUL-terminated
 *  malloc'd buffer. Returns NULL when absent/unreadable or larger than max. */
char *er_read_file(const char *sysroot, const char *path, size_t max, size_t *len_out);
/** 1 if sysroot+path exists (any type). */
int er_path_exists(const char *sysroot, const char *path);
/** Write back and evict [p, p + n) from every cache level (x86 clflush,
 *  ARM64 DC CIVAC), so that the next read streams from memory; nothing on
 *  other architectures. Any range: unaligned, empty. The bytes are kept. */
void er_cache_evict(const void *p, size_t n);
/** A caller's struct of `given` bytes (its struct_size) where this library
 *  knows `known` (its sizeof): EDGERT_OK when given <= known or every byte
 *  of [known, given) is 0 (a program built against a newer header that set
 *  nothing this library would ignore); else EDGERT_E_USAGE, err naming the
 *  first non-zero byte's offset: a field this library does not know was
 *  set, and silently ignoring it could undo what the caller asked (as
 *  Linux's copy_struct_from_user). `what` names the struct for the message
 *  ("edgert_open: options"). */
edgert_status er_check_unknown_tail(const void *p, size_t given, size_t known, const char *what,
                                    const char *type, char *err, size_t len);
/** A weights view's order (plugin.h: column j is the model's input perm[j])
 *  where its struct_size covers the field, else NULL: a version 1 view. */
static inline const uint32_t *er_qw_perm(const edgert_qweights *w)
{
    return w->struct_size >= EDGERT_QWEIGHTS_V2_SIZE ? w->perm : NULL;
}
/** inv[perm[j]] = j for j < k (inv: k entries, all written). Returns k when
 *  perm is a permutation of 0 .. k-1, else the first j whose perm[j] is out
 *  of range or already taken (inv's content then undefined): the one check
 *  of an order, whoever supplied it. */
uint32_t er_perm_invert(const uint32_t *perm, uint32_t k, uint32_t *inv);
/** [lo, hi] is a measured decode median v's range (calibrate's rounds,
 *  first contact's calls): 0 <= lo <= v <= hi, NaN anywhere false. The one
 *  rule for what is stored, read and compared as a range. */
static inline int er_is_range(double lo, double v, double hi)
{
    return lo >= 0.0 && lo <= v && v <= hi && hi <= DBL_MAX; /* not infinite */
}

#endif /* EDGERT_CORE_INTERNAL_H */
