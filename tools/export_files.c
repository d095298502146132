/*
 * tools/export_files.c — the list of what an export wrote (export_files.h).
 */
#include "export_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "edgert/export.h"

#define EXF_MAX_DEPTH 16
#define EXF_MAX_LIST (1u << 20) /* bytes of list read back: far past any export's */

typedef int (*exf_visit)(const char *rel, void *user);

/* Every entry under root/rel (rel "" for root itself), depth first, as a
 * path relative to root; symlinks are entries, never followed. -1 on a
 * folder that cannot be read, a path too long or too deep, or a visit's
 * nonzero. */
static int walk(const char *root, const char *rel, int depth, exf_visit fn, void *user)
{
    char dir[4200];
    if (depth > EXF_MAX_DEPTH ||
        (size_t)snprintf(dir, sizeof dir, "%s%s%s", root, *rel ? "/" : "", rel) >= sizeof dir)
        return -1;
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            (!*rel && strcmp(e->d_name, EXPORT_FILES) == 0))
            continue;
        char sub[4200], full[4400];
        struct stat st;
        if ((size_t)snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name) >=
                sizeof sub ||
            (size_t)snprintf(full, sizeof full, "%s/%s", root, sub) >= sizeof full ||
            lstat(full, &st) != 0) {
            rc = -1;
            break;
        }
        rc = fn(sub, user);
        if (rc == 0 && S_ISDIR(st.st_mode))
            rc = walk(root, sub, depth + 1, fn, user);
    }
    closedir(d);
    return rc;
}

static int write_one(const char *rel, void *user)
{
    /* a name with a newline cannot be listed: no list, so never replaced */
    if (strchr(rel, '\n')) {
        errno = EILSEQ;
        return -1;
    }
    return fprintf((FILE *)user, "%s\n", rel) < 0 ? -1 : 0;
}

int exfiles_write(const char *dir)
{
    char path[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/" EXPORT_FILES, dir) >= sizeof path)
        return -1;
    FILE *f = fopen(path, "wx");
    if (!f)
        return -1;
    int rc = walk(dir, "", 0, write_one, f);
    if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0)
        rc = -1;
    if (fclose(f) != 0)
        rc = -1;
    if (rc != 0)
        unlink(path);
    return rc;
}

typedef struct listed {
    const char *list; /* "\n" + the file + "\n" */
    char unlisted[512];
} listed;

static int check_one(const char *rel, void *user)
{
    listed *l = user;
    char line[4300];
    snprintf(line, sizeof line, "\n%s\n", rel);
    /* a name with a newline is never listed (write_one): it would match two
     * listed names side by side */
    if (!strchr(rel, '\n') && strstr(l->list, line))
        return 0;
    snprintf(l->unlisted, sizeof l->unlisted, "%.500s", rel);
    return 1;
}

int exfiles_match(const char *dir, char *unlisted, size_t len)
{
    char path[4200];
    if (len)
        unlisted[0] = '\0';
    if ((size_t)snprintf(path, sizeof path, "%s/" EXPORT_FILES, dir) >= sizeof path)
        return 0;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        (size_t)st.st_size > EXF_MAX_LIST) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    char *list = malloc((size_t)st.st_size + 2u);
    size_t n = 0;
    ssize_t got = 0;
    if (list) {
        list[0] = '\n';
        while (n < (size_t)st.st_size &&
               (got = read(fd, list + 1 + n, (size_t)st.st_size - n)) > 0)
            n += (size_t)got;
        list[1 + n] = '\0';
    }
    close(fd);
    if (!list || got < 0)
        return free(list), 0;
    listed l = {.list = list};
    int rc = walk(dir, "", 0, check_one, &l);
    free(list);
    if (rc != 0 && len)
        snprintf(unlisted, len, "%s", l.unlisted[0] ? l.unlisted : "(a folder not read)");
    return rc == 0;
}

int exfiles_out_state(const char *out, char *why, size_t len)
{
    struct stat st;
    snprintf(why, len, "it exists and is not an edgert export");
    if (lstat(out, &st) != 0)
        return 0;
    if (!S_ISDIR(st.st_mode))
        return -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/" EDGERT_EXPORT_REPORT_FILE, out);
    /* not blocking on a FIFO named so, nor following a link */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
        char head[256] = "";
        ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, head, sizeof head - 1)
                                                               : -1;
        close(fd);
        head[n > 0 ? n : 0] = '\0';
        /* the contract's marker (edgert/export.h), or npu-export's format
         * name, which exports before the marker carry */
        if (!strstr(head, "\"" EDGERT_EXPORT_REPORT_MARKER "\": 1") &&
            !strstr(head, "\"edgert-npu-export-report\""))
            return -1;
        char unlisted[512];
        if (exfiles_match(out, unlisted, sizeof unlisted))
            return 1;
        if (unlisted[0])
            snprintf(why, len, "it holds an earlier export and '%s', which no export wrote "
                     "(it would be lost)", unlisted);
        else
            snprintf(why, len, "it holds an export without the list of what it wrote ("
                     EXPORT_FILES ": one made before edgert listed them), which is never "
                     "replaced");
        return -1;
    }
    DIR *d = opendir(out);
    if (!d)
        return -1;
    int empty = 1;
    for (struct dirent *e; empty && (e = readdir(d));)
        empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
    closedir(d);
    return empty ? 2 : -1;
}
