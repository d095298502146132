/*
 * core/formats/tmpfile.h — an output file that appears whole or not at all: written
 * in its destination's folder without a name (O_TMPFILE) and, once synced,
 * named "<path>.tmp.<pid>" and renamed over <path>. A process killed while
 * writing (Ctrl-C during a pack of gigabytes) leaves nothing. Where the
 * folder's filesystem has no O_TMPFILE, or it cannot be linked through
 * /proc/self/fd (no /proc, a policy), the file is written under that name
 * from the start, and only a failure, not a kill, removes it.
 */
#ifndef EDGERT_CORE_TMPFILE_H
#define EDGERT_CORE_TMPFILE_H

#include <stdio.h>

typedef struct er_tmpfile {
    FILE *f;    /* write here */
    char *path; /* the destination */
    char *tmp;  /* the temporary's name (exists, and is ours, when named) */
    int named;
} er_tmpfile;

/** Start a file for `path` (mode 0666 less the umask). 0, or -1 with errno. */
int er_tmpfile_open(er_tmpfile *t, const char *path);
/** Flush, sync, name it, close and rename it over the destination. 0, or
 *  -1 with errno (er_tmpfile_discard then removes the temporary). */
int er_tmpfile_commit(er_tmpfile *t);
/** Close and remove what is not committed; frees. Safe on a zeroed t. */
void er_tmpfile_discard(er_tmpfile *t);

#endif
