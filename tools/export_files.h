/*
 * tools/export_files.h — what an export wrote, so that replacing an earlier
 * export never takes anything else with it.
 *
 * `edgert export` replaces --out when it holds an earlier export. The
 * report's marker alone said so once, and an adversary's walkthrough lost a
 * project folder into which a report.json had been copied, a user's notes
 * added to an earlier export, and the --weights an export read from its own
 * --out. Every export now leaves EXPORT_FILES in its folder: each path it
 * wrote (folders too), relative, one per line. A folder is an earlier
 * export only when everything in it is listed (exfiles_match); an export
 * made before the list, or one with a name holding a newline, is never
 * replaced: the user empties it.
 */
#ifndef EDGERT_TOOLS_EXPORT_FILES_H
#define EDGERT_TOOLS_EXPORT_FILES_H

#include <stddef.h>

/** The list's name inside an export's folder. */
#define EXPORT_FILES ".edgert-export-files"

/** Write dir/EXPORT_FILES listing everything under dir. 0, or -1 (no list
 *  left behind). */
int exfiles_write(const char *dir);

/** 1 when dir holds EXPORT_FILES and every path under it is listed; else 0,
 *  with the first path not listed in `unlisted` (len bytes; "" when the
 *  list itself is missing or unreadable). */
int exfiles_match(const char *dir, char *unlisted, size_t len);

/** What `out` holds: 0 nothing (absent); 1 an earlier export and nothing
 *  else (its report's marker, every path listed); 2 an empty folder; -1
 *  anything else, to refuse, why in `why` (len bytes). report.json is read
 *  without following a link or blocking on a FIFO. */
int exfiles_out_state(const char *out, char *why, size_t len);

#endif /* EDGERT_TOOLS_EXPORT_FILES_H */
