/*
 * core/common/diag.h — diagnostics at file:line:col, and plugins' messages for the caller
 * (diag.c): what every step reports its problems with.
 * Not installed.
 */
#ifndef EDGERT_CORE_DIAG_H
#define EDGERT_CORE_DIAG_H

#include <stddef.h>
#include "edgert/edgert.h"

/* ---- diagnostics (diag.c) ---------------------------------------------- */

/** A growable list of diagnostics; every string is owned. One file gets at
 *  most ER_DIAGS_PER_FILE in a row, then one line saying the rest are not
 *  listed: a hostile file of 95,000 unknown keys must not cost 95,000
 *  formatted messages (nor a terminal that many lines). */
#define ER_DIAGS_PER_FILE 64u
typedef struct er_diags {
    edgert_diag *items;
    size_t count, cap;
    size_t in_file; /* how many in a row the last item's file has had */
} er_diags;

/** Whether er_diag_add would still list a problem of `file` (callers skip
 *  costly message building when not). */
int er_diag_room(const er_diags *d, const char *file);

void er_diag_add(er_diags *d, edgert_log_level level, const char *file, unsigned line,
                 unsigned column, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
void er_diags_free(er_diags *d);
/** Every error-level diagnostic added since index `since`, as
 *  "file:line:col: message" lines (the first without indent), or "". */
void er_diag_last_error(const er_diags *d, size_t since, char *buf, size_t len);
/** The same for every diagnostic at or above `max_level` (warnings marked). */
void er_diag_lines(const er_diags *d, size_t since, edgert_log_level max_level, char *buf,
                   size_t len);

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

#endif /* EDGERT_CORE_DIAG_H */
