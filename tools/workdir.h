/*
 * tools/workdir.h — a work folder beside a destination,
 * "<parent>/.<base>.<tag>-XXXXXX", that tells whether the process that made
 * it still runs, so a process killed outright (SIGKILL, the OOM killer),
 * which no handler sees, does not leave it behind for ever.
 *
 * workdir_make creates WORKDIR_OWNER inside the new folder, locks it (flock,
 * held until every descriptor to it is closed: when the process and any
 * child it forked end, however they end), then writes its pid into it: a
 * non-empty WORKDIR_OWNER is the mark that the lock was taken. The file is
 * locked, not the folder, because NFS emulates flock with fcntl locks, which
 * need a file open for writing. workdir_sweep, run before the next folder is
 * made for the same destination, removes the folders of that pattern that
 * belong to this user, carry the mark, and whose lock it can take: their
 * process is gone. A folder without the mark (a process killed between
 * mkdtemp and its lock, or a file system that refused the lock) is left as
 * it is, as is every folder still locked: another run for the same
 * destination. Locks are shared between hosts only where the file system
 * shares them (NFS without "nolock" / "local_lock"): otherwise two hosts
 * writing to one destination at once must not.
 *
 * Removal (workdir_remove, and sigclean.c's handler) takes WORKDIR_OWNER
 * last, and only once nothing else is left, so a removal cut short or one
 * that failed leaves a folder the next sweep still knows.
 */
#ifndef EDGERT_TOOLS_WORKDIR_H
#define EDGERT_TOOLS_WORKDIR_H

#include <stddef.h>

/** The file inside a work folder that holds its lock and the mark. */
#define WORKDIR_OWNER "owner"

/** Called with a stale folder, locked, before it is removed; nonzero keeps
 *  it (a folder that holds something that could not be put back). */
typedef int (*workdir_keep_fn)(const char *stale, void *user);
/** Told of each stale folder the sweep removed (ok 1) or could not (ok 0,
 *  errno set). */
typedef void (*workdir_said_fn)(const char *stale, int ok, void *user);

/** Make and lock "<parent>/.<base>.<tag>-XXXXXX" into path[len]. Returns the
 *  descriptor that holds the lock (close it after removing the folder), or
 *  -1 with errno set and path[0] == '\0' when no folder is left. Where the
 *  file system refuses the lock, the folder is made unmarked (and so never
 *  swept): *locked says which. */
int workdir_make(const char *parent, const char *base, const char *tag, char *path, size_t len,
                 int *locked);

/** Remove the stale work folders of (parent, base, tag); keep, when not
 *  NULL, sees each first, said (when not NULL) hears how each went.
 *  Returns how many were removed. */
size_t workdir_sweep(const char *parent, const char *base, const char *tag, workdir_keep_fn keep,
                     workdir_said_fn said, void *user);

/** Remove a folder and everything below it, following no symbolic link,
 *  WORKDIR_OWNER last. 0, or -1 with errno when something is left. */
int workdir_remove(const char *dir);

#endif
