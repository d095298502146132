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

#endif /* EDGERT_TOOLS_EXPORT_FILES_H */
