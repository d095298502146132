/*
 * tools/workdir.c — work folders that a later run can tell are stale
 * (workdir.h). Found by `edgert export` killed with SIGKILL, which left
 * ".<out>.edgert-export-XXXXXX" (3.4 GB of generated weights) for good:
 * sigclean.c handles every signal but that one.
 *
 * Why a lock and not the pid in the name: a pid says nothing across pid
 * namespaces (a container's export has the same pid every run) and is
 * reused; a flock belongs to the open file, and the kernel releases it when
 * the last descriptor to it closes, at exit whatever the cause.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "workdir.h"

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    /* the mark goes last: the top folder's WORKDIR_OWNER stays for below */
    if (ftw->level == 1 && flag == FTW_F && strcmp(p + ftw->base, WORKDIR_OWNER) == 0)
        return 0;
    if (ftw->level == 0)
        return 0;
    remove(p); /* what cannot go shows at the final rmdir */
    return 0;
}

/* dir holds nothing but WORKDIR_OWNER (or nothing). */
static int only_owner_left(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int only = 1;
    for (struct dirent *e; only && (e = readdir(d));)
        only = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
               strcmp(e->d_name, WORKDIR_OWNER) == 0;
    closedir(d);
    return only;
}

int workdir_remove(const char *dir)
{
    if (!dir || !*dir)
        return 0;
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    /* the mark stays while anything else does: a removal that failed
     * leaves a folder the next sweep still knows */
    if (!only_owner_left(dir)) {
        if (access(dir, F_OK) != 0 && errno == ENOENT)
            return 0;
        errno = ENOTEMPTY;
        return -1;
    }
    char owner[4400];
    snprintf(owner, sizeof owner, "%s/" WORKDIR_OWNER, dir);
    if (unlink(owner) != 0 && errno != ENOENT)
        return -1;
    return rmdir(dir) == 0 || errno == ENOENT ? 0 : -1;
}

/* Blocking: a sweep that took the lock first finds no mark and lets go. */
static int lock_wait(int fd)
{
    int rc;
    while ((rc = flock(fd, LOCK_EX)) != 0 && errno == EINTR)
        ;
    return rc;
}

/* WORKDIR_OWNER in the open folder dfd: created, locked, then marked with
 * "pid N" (for a person who finds the folder; the sweep reads only that it
 * is not empty). Returns the locked descriptor; -1 when it cannot be made;
 * unlocked and unmarked (*locked 0) where the lock is refused. */
static int make_owner(int dfd, int *locked)
{
    int fd = openat(dfd, WORKDIR_OWNER, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    *locked = 0;
    if (fd < 0)
        return -1;
    if (lock_wait(fd) != 0)
        return fd; /* e.g. ENOLCK on NFS without a lock manager: as before, unswept */
    char line[32];
    int n = snprintf(line, sizeof line, "pid %ld\n", (long)getpid());
    ssize_t put = write(fd, line, (size_t)n);
    if (put != n) {
        int e = put < 0 ? errno : ENOSPC;
        close(fd);
        errno = e;
        return -1;
    }
    *locked = 1;
    return fd;
}

int workdir_make(const char *parent, const char *base, const char *tag, char *path, size_t len,
                 int *locked)
{
    int n = snprintf(path, len, "%s/.%s.%s-XXXXXX", parent, base, tag);
    *locked = 0;
    if (n < 0 || (size_t)n >= len) {
        path[0] = '\0';
        errno = ENAMETOOLONG;
        return -1;
    }
    if (!mkdtemp(path)) {
        path[0] = '\0';
        return -1;
    }
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int fd = dfd < 0 ? -1 : make_owner(dfd, locked);
    int e = errno;
    if (dfd >= 0)
        close(dfd);
    if (fd < 0) {
        workdir_remove(path);
        path[0] = '\0';
        errno = e;
        return -1;
    }
    return fd;
}

/* name is ".<base>.<tag>-" followed by mkdtemp's six characters. */
static int is_workdir_name(const char *name, const char *base, const char *tag)
{
    size_t lb = strlen(base), lt = strlen(tag), ln = strlen(name);
    return ln == lb + lt + 3u + 6u && name[0] == '.' && strncmp(name + 1, base, lb) == 0 &&
           name[1 + lb] == '.' && strncmp(name + 2 + lb, tag, lt) == 0 &&
           name[2 + lb + lt] == '-';
}

/* The folder name in parent, when it is stale: a folder (not a link to
 * one) of this user whose WORKDIR_OWNER is marked and not locked by anyone.
 * Returns the descriptor holding its lock (and *id the folder's identity),
 * or -1. */
static int open_stale(int pfd, const char *name, struct stat *id)
{
    struct stat st;
    if (fstatat(pfd, name, id, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(id->st_mode) ||
        id->st_uid != geteuid())
        return -1;
    int dfd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    int fd = openat(dfd, WORKDIR_OWNER, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    int same = fstat(dfd, &st) == 0 && st.st_dev == id->st_dev && st.st_ino == id->st_ino;
    close(dfd);
    if (fd >= 0 && same && flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &st) == 0 &&
        S_ISREG(st.st_mode) && st.st_size > 0)
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

/* path is still the folder open_stale vetted (nobody renamed another in). */
static int still_same(const char *path, const struct stat *id)
{
    struct stat st;
    return lstat(path, &st) == 0 && st.st_dev == id->st_dev && st.st_ino == id->st_ino;
}

size_t workdir_sweep(const char *parent, const char *base, const char *tag, workdir_keep_fn keep,
                     workdir_said_fn said, void *user)
{
    DIR *d = opendir(parent);
    if (!d)
        return 0;
    size_t count = 0;
    char path[4352];
    struct stat id;
    for (struct dirent *e; (e = readdir(d));) {
        if (!is_workdir_name(e->d_name, base, tag))
            continue;
        int fd = open_stale(dirfd(d), e->d_name, &id);
        if (fd < 0)
            continue;
        int n = snprintf(path, sizeof path, "%s/%s", parent, e->d_name);
        if (n > 0 && (size_t)n < sizeof path && still_same(path, &id) &&
            !(keep && keep(path, user)) && still_same(path, &id)) {
            int ok = workdir_remove(path) == 0;
            count += (size_t)ok;
            if (said)
                said(path, ok, user);
        }
        close(fd);
    }
    closedir(d);
    return count;
}
