/*
 * core/probe/probe_read.c — the probe's sysroot-relative reads, and the few text
 * helpers its decoders share (probe_host.c, probe_class.c).
 *
 * Every file the probe looks at is read here, through the sysroot prefix, so
 * tests (and fleet planning) can present any device; the decoders in the
 * other files see only the text. Every file is read with er_read_file bounded
 * by ER_PROBE_MAX_FILE_BYTES (1 MiB); a bigger file is ignored with a
 * warning. Directory listings are sorted so "first GPU" / "first FastRPC
 * node" is reproducible.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe/probe_internal.h"

/* At most this many entries are kept from one directory listing: /dev of a
 * phone has a few hundred; a hostile sysroot must not make us allocate
 * without bound. */
#define ER_PROBE_MAX_DIR_ENTRIES 4096

int er_probe_is_live_root(const char *sysroot)
{
    return !sysroot || !*sysroot || strcmp(sysroot, "/") == 0;
}

int er_probe_is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* Copy s[0..len) into dst, trimmed, with everything but printable ASCII as
 * '?': names end up in logs and JSON, and a hostile file must not smuggle
 * control characters there. Truncates to cap - 1 bytes. */
static void copy_clean(char *dst, size_t cap, const char *s, size_t len)
{
    while (len && er_probe_is_space(*s)) {
        s++;
        len--;
    }
    while (len && er_probe_is_space(s[len - 1]))
        len--;
    size_t n = 0;
    for (size_t i = 0; i < len && n + 1 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        dst[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    dst[n] = '\0';
}

char *er_probe_read(const char *sysroot, const char *path, size_t *len, er_diags *d)
{
    size_t n = 0;
    char *text = er_read_file(sysroot, path, ER_PROBE_MAX_FILE_BYTES, &n);
    if (len)
        *len = text ? n : 0;
    if (text || !er_path_exists(sysroot, path))
        return text;
    char *full = er_rooted_path(sysroot, path);
    er_diag_add(d, EDGERT_LOG_WARN, full ? full : path, 0, 0,
                "unreadable or larger than %u bytes; ignored, continuing",
                (unsigned)ER_PROBE_MAX_FILE_BYTES);
    free(full);
    return NULL;
}

int er_probe_line_value(const char *text, const char *key, char *out, size_t cap)
{
    size_t klen = strlen(key);
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len > klen && strncmp(line, key, klen) == 0) {
            size_t i = klen;
            while (i < len && (line[i] == ' ' || line[i] == '\t'))
                i++;
            if (i < len && line[i] == ':') {
                copy_clean(out, cap, line + i + 1, len - i - 1);
                if (out[0])
                    return 1;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    out[0] = '\0';
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void er_probe_free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* Sorted with strcmp so every later "first" is reproducible. */
size_t er_probe_list_dir(const char *sysroot, const char *dir, const char *prefix, char ***out)
{
    char **names = NULL;
    size_t n = 0, cap = 0;
    DIR *dh = NULL;
    char *full = er_rooted_path(sysroot, dir);
    *out = NULL;
    if (!full)
        goto out;
    dh = opendir(full);
    if (!dh)
        goto out;
    struct dirent *e;
    while ((e = readdir(dh)) != NULL && n < ER_PROBE_MAX_DIR_ENTRIES) {
        if (e->d_name[0] == '.')
            continue; /* ".", "..", and hidden files no driver creates */
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            char **nn = realloc(names, ncap * sizeof *nn);
            if (!nn)
                break;
            names = nn;
            cap = ncap;
        }
        names[n] = er_strdup(e->d_name);
        if (!names[n])
            break;
        n++;
    }
    if (n)
        qsort(names, n, sizeof *names, cmp_str);
out:
    if (dh)
        closedir(dh);
    free(full);
    if (!n) {
        free(names);
        names = NULL;
    }
    *out = names;
    return n;
}

/* /proc/device-tree/<prop>, else the sysfs folder that /proc link points to
 * (some sysroots, and containers, have only one). */
char *er_probe_dt_read(const char *sysroot, const char *prop, size_t *len, const char **used,
                       er_diags *d)
{
    static const char *const roots[] = {"/proc/device-tree", "/sys/firmware/devicetree/base"};
    char path[128];
    *used = NULL;
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", roots[i], prop);
        char *text = er_probe_read(sysroot, path, len, d);
        if (text) {
            *used = roots[i];
            return text;
        }
    }
    return NULL;
}

/* The `model` property is NUL-terminated; a missing terminator is tolerated. */
int er_probe_dt_model(const char *sysroot, char *out, size_t cap, er_diags *d)
{
    size_t len = 0;
    const char *used;
    char *text = er_probe_dt_read(sysroot, "model", &len, &used, d);
    out[0] = '\0';
    if (!text)
        return 0;
    const char *nul = memchr(text, '\0', len);
    copy_clean(out, cap, text, nul ? (size_t)(nul - text) : len);
    free(text);
    return out[0] != '\0';
}
