/*
 * core/discover/discovery.c — where manifests are looked for, and reading them.
 *
 * Search order (first folder wins when two manifests share a name):
 *   1. EDGERT_ADD_MANIFEST_PATH   colon list, searched before everything else
 *   2. the caller's explicit paths (edgert_options.manifest_paths, the CLI's
 *      --manifests), which replace 3 and 4; else
 *   3. EDGERT_MANIFEST_PATH       colon list, which replaces 4; else
 *   4. the defaults, in this order (the Vulkan loader's pattern: edgert's
 *      own folder, then per-user, then system folders a package can drop
 *      files into):
 *      a. next to libedgert: <dir of libedgert>/edgert/backends — an install
 *         prefix, or the build tree, which mirrors one. A program that embeds
 *         the core instead of linking libedgert (the tests) looks in
 *         <dir of the program>/../<libdir>/edgert/backends, the same folder
 *         of the same layout. The file is found from the mapping that holds
 *         this code (/proc/self/maps), so a relative LD_LIBRARY_PATH or a
 *         changed working directory cannot hide it, and no build path is
 *         compiled in: an installed library never looks into a build tree.
 *      b. per user: $XDG_DATA_HOME/edgert/backends (default
 *         ~/.local/share/edgert/backends); skipped under secure execution
 *         (secure_getenv gives no variables there).
 *      c. system configuration: <sysconfdir>/edgert/backends.d
 *      d. system data: <datadir>/edgert/backends
 *      (c and d are the install's configured folders, EDGERT_SYSCONFDIR and
 *      EDGERT_DATADIR, e.g. /etc and /usr/share for a /usr install.)
 * Never the current directory: an empty element of a colon list (which in
 * $PATH would mean ".") and relative folders from the environment are skipped
 * with a warning. Entries of a folder are read in sorted (strcmp) order so
 * "first wins" is reproducible.
 *
 * A manifest folder or file that is group- or world-writable lets someone
 * else choose what edgert loads: a warning naming the path and its mode, and
 * under secure execution (AT_SECURE: setuid, file capabilities) or as root
 * the folder is not read and the file not taken (a file or folder named
 * explicitly is then an error, as is an explicit folder that cannot be
 * read). An explicit path that is neither a file nor a folder (a
 * FIFO, a device) is an error and is never opened.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "context/context.h"
#include "os/trust.h"
#include "discover/discover.h"

static int scan_dir(struct edgert_ctx *ctx, const er_search_dir *sd);

/* Add a folder to the search list and read its manifests right away, so the
 * order of the list is the order in which names are claimed. */
static int search(struct edgert_ctx *ctx, const char *path, const char *origin)
{
    for (size_t i = 0; i < ctx->ndirs; i++)
        if (strcmp(ctx->dirs[i].path, path) == 0)
            return 0; /* already listed: searching twice adds nothing */
    er_search_dir *d = realloc(ctx->dirs, (ctx->ndirs + 1) * sizeof *d);
    if (!d)
        return -1;
    ctx->dirs = d;
    d[ctx->ndirs].path = er_strdup(path);
    d[ctx->ndirs].origin = origin;
    if (!d[ctx->ndirs].path)
        return -1;
    ctx->ndirs++;
    return scan_dir(ctx, &d[ctx->ndirs - 1]);
}

static int add_colon_list(struct edgert_ctx *ctx, const char *list, const char *origin)
{
    char *copy = er_strdup(list);
    if (!copy)
        return -1;
    int rc = 0;
    /* strtok_r would merge "a::b"; walk by hand to see empty elements. */
    for (char *p = copy;; ) {
        char *colon = strchr(p, ':');
        if (colon)
            *colon = '\0';
        if (!*p)
            er_diag_add(&ctx->diags, EDGERT_LOG_WARN, NULL, 0, 0,
                        "%s: empty element skipped (edgert never searches the current directory)",
                        origin);
        else if (p[0] != '/')
            er_diag_add(&ctx->diags, EDGERT_LOG_WARN, NULL, 0, 0,
                        "%s: relative folder '%s' skipped (only absolute folders are searched)",
                        origin, p);
        else if (search(ctx, p, origin) != 0)
            rc = -1;
        if (!colon)
            break;
        p = colon + 1;
    }
    free(copy);
    return rc;
}

static void add_defaults(struct edgert_ctx *ctx)
{
    char *file = er_dl_file_of((const void *)&edgert_open); /* libedgert, or the program */
    if (file) {
        const char *base = strrchr(file, '/') + 1;
        int in_lib = strncmp(base, "libedgert", 9) == 0;
        char *copy = er_strdup(file);
        char *dir = copy ? er_path_join(dirname(copy),
                                        in_lib ? "edgert/backends"
                                               : "../" EDGERT_LIBDIR "/edgert/backends")
                         : NULL;
        char *canon = dir ? realpath(dir, NULL) : NULL; /* without "bin/..", when it exists */
        if (canon) {
            free(dir);
            dir = canon;
        }
        if (dir)
            search(ctx, dir, in_lib ? "default (next to libedgert)"
                                    : "default (the program's " EDGERT_LIBDIR "/edgert/backends)");
        free(dir);
        free(copy);
        free(file);
    } else {
        er_diag_add(&ctx->diags, EDGERT_LOG_WARN, NULL, 0, 0,
                    "cannot tell where libedgert is (no /proc/self/maps, dladdr failed): the "
                    "folder next to it is not searched");
    }
    /* Per user; secure_getenv returns nothing under secure execution. */
    const char *data = er_getenv(0, "XDG_DATA_HOME"), *home = er_getenv(0, "HOME");
    char *user = NULL;
    if (data && data[0] == '/')
        user = er_path_join(data, "edgert/backends");
    else if (home && home[0] == '/')
        user = er_path_join(home, ".local/share/edgert/backends");
    if (user)
        search(ctx, user, "default (per user: $XDG_DATA_HOME/edgert/backends)");
    free(user);
    search(ctx, EDGERT_SYSCONFDIR "/edgert/backends.d", "default (system configuration)");
    search(ctx, EDGERT_DATADIR "/edgert/backends", "default (system data)");
}

static int has_yaml_suffix(const char *n)
{
    size_t l = strlen(n);
    return (l > 5 && strcmp(n + l - 5, ".yaml") == 0) || (l > 4 && strcmp(n + l - 4, ".yml") == 0);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Read one manifest; 0 ok or skipped, -1 when an explicitly named file is bad. */
static int take_manifest(struct edgert_ctx *ctx, const char *path, int explicit_file)
{
    er_cand *c = calloc(1, sizeof *c);
    if (!c)
        return -1;
    edgert_status st = er_manifest_load(path, &c->m, &ctx->diags);
    if (st != EDGERT_OK) {
        free(c);
        ctx->nskipped++;
        er_diag_add(&ctx->diags, EDGERT_LOG_WARN, path, 0, 0, "manifest skipped, continuing");
        return explicit_file ? -1 : 0;
    }
    const er_cand *first = er_cand_find(ctx, c->m.name);
    if (first) {
        er_diag_add(&ctx->diags, EDGERT_LOG_WARN, path, 0, 0,
                    "a manifest named '%s' was already found in %s; this one is ignored "
                    "(first wins), continuing",
                    c->m.name, first->m.path);
        er_manifest_free(&c->m);
        free(c);
        return 0;
    }
    er_cand **v = realloc(ctx->cands, (ctx->ncands + 1) * sizeof *v);
    if (!v) {
        er_manifest_free(&c->m);
        free(c);
        return -1;
    }
    ctx->cands = v;
    c->ctx = ctx;
    c->lib_fd = -1;
    c->explicit_file = explicit_file;
    ctx->cands[ctx->ncands++] = c;
    return 0;
}

/* Read every *.yaml / *.yml of a folder, sorted. */
static int scan_dir(struct edgert_ctx *ctx, const er_search_dir *sd)
{
    DIR *dir = opendir(sd->path);
    if (!dir) {
        /* a folder somebody named (--manifests, EDGERT_MANIFEST_PATH,
         * EDGERT_ADD_MANIFEST_PATH) is a warning: a misspelt one hides the
         * backends it was meant to add; a default one that is absent is normal */
        er_diag_add(&ctx->diags,
                    strncmp(sd->origin, "default", 7) != 0 ? EDGERT_LOG_WARN : EDGERT_LOG_INFO,
                    sd->path, 0, 0, "manifest folder not readable (%s), continuing",
                    strerror(errno));
        return 0;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    struct stat st;
    /* refused: its manifests are counted as skipped (selector.c says "found,
     * none usable"), never read */
    int refused = fstat(dirfd(dir), &st) == 0 &&
                  er_refuse_writable(&ctx->diags, "manifest folder", sd->path, &st);
    while ((e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.' || !has_yaml_suffix(e->d_name))
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            char **nn = realloc(names, ncap * sizeof *nn);
            if (!nn) {
                rc = -1;
                goto out;
            }
            names = nn;
            cap = ncap;
        }
        names[n] = er_path_join(sd->path, e->d_name);
        if (!names[n]) {
            rc = -1;
            goto out;
        }
        n++;
    }
    if (refused) {
        ctx->nskipped += n;
        goto out;
    }
    if (n > 1)
        qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; i < n; i++) {
        if (stat(names[i], &st) == 0 &&
            er_refuse_writable(&ctx->diags, "manifest", names[i], &st)) {
            ctx->nskipped++;
            continue;
        }
        if (take_manifest(ctx, names[i], 0) != 0)
            rc = -1;
    }
out:
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    closedir(dir);
    return rc;
}

/* "a FIFO", "a device", ... for a path that is neither a file nor a folder. */
static const char *file_kind(mode_t mode)
{
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode) || S_ISBLK(mode))
        return "a device";
    if (S_ISSOCK(mode))
        return "a socket";
    return "an unknown kind of file";
}

edgert_status er_discover(struct edgert_ctx *ctx, const edgert_options *o, char *err,
                          size_t err_len)
{
    const char *add = er_getenv(ctx->ignore_env, "EDGERT_ADD_MANIFEST_PATH");
    const char *replace = er_getenv(ctx->ignore_env, "EDGERT_MANIFEST_PATH");
    if (add && add_colon_list(ctx, add, "EDGERT_ADD_MANIFEST_PATH") != 0)
        goto nomem;

    /* Explicit paths: folders are scanned; files are read as named manifests,
     * and a bad one is fatal (the caller asked for exactly that file). */
    if (o->manifest_path_count > 0) {
        for (size_t i = 0; i < o->manifest_path_count; i++) {
            const char *p = o->manifest_paths[i];
            struct stat st;
            if (!p || !*p)
                continue;
            if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
                size_t before = ctx->diags.count;
                if (er_refuse_writable(&ctx->diags, "manifest", p, &st)) {
                    edgert_errf(err, err_len, "%s: %s", p,
                                ctx->diags.count > before ? ctx->diags.items[before].message
                                                          : "writable by others: refused");
                    return EDGERT_E_IO;
                }
                if (take_manifest(ctx, p, 1) != 0) {
                    char msg[4096];
                    er_diag_lines(&ctx->diags, before, EDGERT_LOG_WARN, msg, sizeof msg);
                    edgert_errf(err, err_len, "bad manifest:\n  %s", msg[0] ? msg : p);
                    return EDGERT_E_PARSE;
                }
                continue;
            }
            if (stat(p, &st) != 0) {
                edgert_errf(err, err_len, "%s: no such manifest file or folder", p);
                return EDGERT_E_NOT_FOUND;
            }
            if (!S_ISDIR(st.st_mode)) { /* never opened: a FIFO would block */
                edgert_errf(err, err_len, "%s: is %s, not a manifest file or folder", p,
                            file_kind(st.st_mode));
                return EDGERT_E_IO;
            }
            /* a folder named explicitly that cannot be read is an error, as a
             * missing one is: a script must tell it from "nothing eligible" */
            DIR *d = opendir(p);
            if (!d) {
                edgert_errf(err, err_len, "%s: manifest folder not readable: %s", p,
                            strerror(errno));
                return EDGERT_E_IO;
            }
            closedir(d);
            if (er_trust_refuses(&st)) {
                size_t before = ctx->diags.count;
                er_refuse_writable(&ctx->diags, "manifest folder", p, &st);
                edgert_errf(err, err_len, "%s: %s", p,
                            ctx->diags.count > before ? ctx->diags.items[before].message
                                                      : "writable by others: refused");
                return EDGERT_E_IO;
            }
            if (search(ctx, p, "explicit") != 0)
                goto nomem;
        }
    } else if (replace) {
        if (add_colon_list(ctx, replace, "EDGERT_MANIFEST_PATH") != 0)
            goto nomem;
    } else {
        add_defaults(ctx);
    }
    if (ctx->ncands == 0 && ctx->nskipped == 0)
        er_diag_add(&ctx->diags, EDGERT_LOG_WARN, NULL, 0, 0,
                    "no backend manifest found in the %zu folder(s) searched", ctx->ndirs);
    else if (ctx->ncands == 0)
        er_diag_add(&ctx->diags, EDGERT_LOG_WARN, NULL, 0, 0,
                    "no usable backend manifest in the %zu folder(s) searched: the %zu found "
                    "were all skipped", ctx->ndirs, ctx->nskipped);
    return EDGERT_OK;
nomem:
    edgert_errf(err, err_len, "out of memory while reading manifests");
    return EDGERT_E_NOMEM;
}

/* 1 when the manifest file `file` is `name`'s: named `name`.yaml or .yml,
 * or with a top-level line `name: <name>` (quoted or not) in its first
 * 64 KiB, read again here (only on the way to a "no backend named" error:
 * a manifest skipped has no candidate that kept its name). */
static int named_after(const char *file, const char *name)
{
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    size_t n = strlen(name);
    if (strncmp(base, name, n) == 0 &&
        (strcmp(base + n, ".yaml") == 0 || strcmp(base + n, ".yml") == 0))
        return 1;
    FILE *f = fopen(file, "re");
    char line[512];
    int found = 0;
    for (size_t read = 0; f && !found && read < 65536u && fgets(line, sizeof line, f);) {
        read += strlen(line);
        if (strncmp(line, "name:", 5) != 0)
            continue;
        char *v = line + 5, *e;
        while (*v == ' ' || *v == '\t')
            v++;
        if (*v == '"' || *v == '\'')
            v++;
        e = v + strcspn(v, "\"'# \t\r\n");
        found = (size_t)(e - v) == n && strncmp(v, name, n) == 0;
    }
    if (f)
        fclose(f);
    return found;
}

void er_discover_why_missing(const struct edgert_ctx *ctx, const char *name, char *buf,
                             size_t len)
{
    size_t used = strlen(buf);
#define WHY_ADD(...)                                                                               \
    do {                                                                                           \
        int w_ = used < len ? snprintf(buf + used, len - used, __VA_ARGS__) : 0;                   \
        used += w_ > 0 ? (size_t)w_ : 0;                                                           \
    } while (0)
    WHY_ADD("; folders searched: ");
    for (size_t i = 0; i < ctx->ndirs; i++)
        WHY_ADD("%s%s", i ? ", " : "", ctx->dirs[i].path);
    if (ctx->ndirs == 0)
        WHY_ADD("none");
    const edgert_diag *first = NULL;
    for (size_t i = 0; i < ctx->diags.count && !first; i++) {
        const edgert_diag *g = &ctx->diags.items[i];
        if (g->level == EDGERT_LOG_ERROR && g->file && named_after(g->file, name))
            first = g;
    }
    if (first)
        WHY_ADD("; skipped in this run: %s:%u:%u: %s", first->file, first->line, first->column,
                first->message);
#undef WHY_ADD
    if (used >= len && len > 4)
        memcpy(buf + len - 4, "...", 4);
}
