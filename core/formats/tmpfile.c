/*
 * core/formats/tmpfile.c — output files that appear whole or not at all (tmpfile.h).
 * Used by the safetensors writer (quantize's and pack's outputs) and by
 * quantize_config.json, which is committed after its checkpoint.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/tmpfile.h"

#define ER_TMP_TRIES 100 /* "<path>.tmp.<pid>", then ".1" ... when a stale one is there */

/* fd's file linked as `name` through /proc/self/fd. 0, or -1 with errno. */
static int link_fd(int fd, const char *name)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, proc, AT_FDCWD, name, AT_SYMLINK_FOLLOW);
}

/* t->tmp set to the try-th name for t->path. 0, or -1 (ENOMEM). */
static int tmp_name(er_tmpfile *t, int try)
{
    free(t->tmp);
    int n = try ? asprintf(&t->tmp, "%s.tmp.%ld.%d", t->path, (long)getpid(), try)
                : asprintf(&t->tmp, "%s.tmp.%ld", t->path, (long)getpid());
    if (n < 0) {
        t->tmp = NULL;
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

/* An O_TMPFILE descriptor in path's folder that can be linked there, or -1.
 * Whether it can is tried at once, on a second unnamed file linked and
 * unlinked under a name of its own: a policy refusing the link must not
 * fail a command after it wrote gigabytes. */
static int open_unnamed(er_tmpfile *t)
{
    char *dup = strdup(t->path);
    if (!dup)
        return -1;
    const char *dir = dirname(dup);
    int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
    int probe = fd >= 0 ? open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600) : -1;
    free(dup);
    int ok = 0;
    for (int try = 0; probe >= 0 && try < ER_TMP_TRIES && tmp_name(t, try + 1) == 0; try++) {
        if (link_fd(probe, t->tmp) == 0) {
            unlink(t->tmp);
            ok = 1;
            break;
        }
        if (errno != EEXIST)
            break;
    }
    if (probe >= 0)
        close(probe);
    if (!ok && fd >= 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* A named temporary of our own, created exclusively. */
static int open_named(er_tmpfile *t)
{
    for (int try = 0; try < ER_TMP_TRIES; try++) {
        if (tmp_name(t, try) != 0)
            return -1;
        int fd = open(t->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            t->named = 1;
            return fd;
        }
        if (errno != EEXIST)
            return -1;
    }
    return -1;
}

int er_tmpfile_open(er_tmpfile *t, const char *path)
{
    *t = (er_tmpfile){0};
    if (!(t->path = strdup(path))) {
        errno = ENOMEM;
        return -1;
    }
    int fd = open_unnamed(t);
    if (fd < 0)
        fd = open_named(t);
    if (fd < 0 || !(t->f = fdopen(fd, "wb"))) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        er_tmpfile_discard(t);
        errno = e;
        return -1;
    }
    return 0;
}

int er_tmpfile_commit(er_tmpfile *t)
{
    FILE *f = t->f;
    t->f = NULL;
    int rc = f && fflush(f) == 0 && fsync(fileno(f)) == 0 ? 0 : -1;
    for (int try = 0; rc == 0 && !t->named; try++) {
        if (try >= ER_TMP_TRIES || tmp_name(t, try) != 0) {
            rc = -1;
        } else if (link_fd(fileno(f), t->tmp) == 0) {
            t->named = 1;
        } else if (errno != EEXIST) {
            rc = -1;
        }
    }
    int e = errno;
    if (f && fclose(f) != 0 && rc == 0) {
        rc = -1;
        e = errno;
    }
    if (rc == 0 && rename(t->tmp, t->path) != 0) {
        rc = -1;
        e = errno;
    }
    if (rc == 0)
        t->named = 0; /* it is the destination now */
    errno = e;
    return rc;
}

void er_tmpfile_discard(er_tmpfile *t)
{
    if (t->f)
        fclose(t->f);
    if (t->named && t->tmp)
        unlink(t->tmp);
    free(t->tmp);
    free(t->path);
    *t = (er_tmpfile){0};
}
