/*
 * core/gate/checksum.c — the integrity check a manifest can ask for: the XXH3-64
 * of its library file ("xxh3-64:<16 hex digits>"), computed here for the
 * gate (gate.c), for the evidence keys (evidence.c), for `edgert checksum
 * FILE`, and written into a manifest by `edgert checksum --stamp`.
 *
 * The checksum catches a stale or swapped file, not an attacker: trust comes
 * from install paths and permissions.
 *
 * Stamping edits the manifest in place of the `checksum` value (found by the
 * YAML parser's byte positions, so comments, order and formatting of the
 * rest are kept) or, when there is none, adds a `checksum:` line after the
 * `library` one. The result is written next to the manifest, parsed and
 * validated again (it must carry exactly the new checksum), and only then
 * renamed over the manifest: a failed stamp leaves the file as it was.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/internal.h"
#include "formats/yamldoc.h"
#include "discover/manifest.h"
#include "gate/gate.h"

int er_file_xxh3(const char *path, uint64_t *out)
{
    /* a regular file only, opened without blocking: a FIFO would block the
     * open and then the reads forever */
    int fd = er_open_regular(path);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    int rc = -1;
    XXH3_state_t *st = XXH3_createState();
    if (!st || XXH3_64bits_reset(st) != XXH_OK)
        goto out;
    unsigned char buf[1 << 16];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0)
        if (XXH3_64bits_update(st, buf, got) != XXH_OK)
            goto out;
    if (ferror(f))
        goto out;
    *out = XXH3_64bits_digest(st);
    rc = 0;
out:
    XXH3_freeState(st);
    fclose(f);
    return rc;
}

edgert_status edgert_checksum_file(const char *path, char *out, size_t out_len, char *err,
                                   size_t err_len)
{
    struct stat sb;
    uint64_t h = 0;
    if (!path || !out || out_len < EDGERT_CHECKSUM_LEN) {
        edgert_errf(err, err_len, "edgert_checksum_file: need a path and %u bytes of output",
                    (unsigned)EDGERT_CHECKSUM_LEN);
        return EDGERT_E_USAGE;
    }
    if (stat(path, &sb) != 0) {
        edgert_errf(err, err_len, "%s: %s", path,
                    errno == ENOENT ? "no such file" : strerror(errno));
        return EDGERT_E_IO;
    }
    if (!S_ISREG(sb.st_mode)) { /* errno says nothing here (was "no such file" for a folder) */
        edgert_errf(err, err_len, "%s: not a regular file", path);
        return EDGERT_E_IO;
    }
    if (er_file_xxh3(path, &h) != 0) {
        edgert_errf(err, err_len, "%s: cannot read: %s", path, strerror(errno));
        return EDGERT_E_IO;
    }
    snprintf(out, out_len, "xxh3-64:%016llx", (unsigned long long)h);
    return EDGERT_OK;
}

/* ---- stamping ------------------------------------------------------------------ */

/* The edited text: `text` with [at, at + cut) replaced by `put`. */
static char *splice_text(const char *text, size_t len, size_t at, size_t cut, const char *put,
                    size_t *out_len)
{
    size_t n = strlen(put);
    char *o = malloc(len - cut + n + 1);
    if (!o)
        return NULL;
    memcpy(o, text, at);
    memcpy(o + at, put, n);
    memcpy(o + at + n, text + at + cut, len - at - cut);
    *out_len = len - cut + n;
    o[*out_len] = '\0';
    return o;
}

/* The byte offset of a parser mark in the text. libyaml counts marks in
 * characters, not bytes (an em dash in a comment is one), so walk the UTF-8
 * text: to the mark's line, then its column in characters. */
static size_t byte_at(const char *text, size_t len, yaml_mark_t mark)
{
    size_t at = 0;
    for (size_t line = 0; line < mark.line && at < len; at++)
        line += text[at] == '\n';
    for (size_t col = 0; col < mark.column && at < len; col++) {
        at++;
        while (at < len && ((unsigned char)text[at] & 0xC0u) == 0x80u)
            at++; /* continuation bytes of the same character */
    }
    return at;
}

/* Where the new checksum goes in the manifest's text: the existing value's
 * bytes, or a new line after the `library` value's line. 0, or -1 with err. */
static int stamp_edit(const char *path, const char *text, size_t len, const char *sum,
                      char **out, size_t *out_len, char *err, size_t err_len)
{
    er_diags d = {0};
    er_yaml y;
    int rc = -1;
    char line[64];
    if (er_yaml_load(&y, path, &d) != EDGERT_OK) {
        edgert_errf(err, err_len, "%s: cannot parse", path);
        goto out_diags;
    }
    yaml_node_t *root = er_yaml_root(&y);
    if (!root || root->type != YAML_MAPPING_NODE ||
        root->data.mapping.style == YAML_FLOW_MAPPING_STYLE) {
        edgert_errf(err, err_len, "%s: the manifest is not a block mapping; add `checksum: "
                                  "\"%s\"` by hand", path, sum);
        goto out;
    }
    yaml_node_t *old = er_yaml_get(&y, root, "checksum");
    yaml_node_t *lib = er_yaml_get(&y, root, "library");
    if (old && old->type == YAML_SCALAR_NODE) {
        snprintf(line, sizeof line, "\"%s\"", sum);
        size_t from = byte_at(text, len, old->start_mark), to = byte_at(text, len, old->end_mark);
        *out = splice_text(text, len, from, to - from, line, out_len);
    } else if (!old && lib) {
        size_t at = byte_at(text, len, lib->end_mark);
        while (at < len && text[at] != '\n')
            at++;
        at += at < len; /* after the newline; at the end of a file without one, there */
        /* the file's own line ending (a CRLF file stays CRLF) */
        const char *nl = memchr(text, '\n', len);
        const char *eol = nl && nl > text && nl[-1] == '\r' ? "\r\n" : "\n";
        snprintf(line, sizeof line, "%schecksum: \"%s\"%s",
                 at == len && len && text[len - 1] != '\n' ? eol : "", sum, eol);
        *out = splice_text(text, len, at, 0, line, out_len);
    } else {
        edgert_errf(err, err_len, "%s: %s", path,
                    old ? "the checksum field is not a plain value" : "no library to check");
        goto out;
    }
    if (*out)
        rc = 0;
    else
        edgert_errf(err, err_len, "out of memory");
out:
    er_yaml_free(&y);
out_diags:
    er_diags_free(&d);
    return rc;
}

/* Write `text` to a temporary file next to `path`; its name in *tmp. */
static int write_beside(const char *path, const char *text, size_t len, char **tmp)
{
    if (asprintf(tmp, "%s.stamp-XXXXXX", path) < 0) {
        *tmp = NULL;
        return -1;
    }
    int fd = mkstemp(*tmp);
    if (fd < 0)
        return -1;
    struct stat sb;
    if (stat(path, &sb) == 0) { /* keep the manifest's permissions and, as root, its owner */
        (void)fchmod(fd, sb.st_mode & 07777);
        if (geteuid() == 0)
            (void)fchown(fd, sb.st_uid, sb.st_gid);
    }
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        return -1;
    }
    int bad = fwrite(text, 1, len, f) != len || fflush(f) != 0 || fsync(fileno(f)) != 0;
    return (fclose(f) != 0 || bad) ? -1 : 0;
}

/* The edited manifest must load and carry exactly the new checksum. */
static int check_stamped(const char *tmp, uint64_t h, char *err, size_t err_len)
{
    er_diags d = {0};
    er_manifest m;
    int ok = er_manifest_load(tmp, &m, &d) == EDGERT_OK && m.has_checksum && m.checksum == h;
    if (!ok) {
        char msg[1024];
        er_diag_last_error(&d, 0, msg, sizeof msg);
        edgert_errf(err, err_len, "the stamped manifest does not validate (%s); nothing changed",
                    msg[0] ? msg : "checksum not read back");
    }
    er_manifest_free(&m); /* zeroed by a failed load, so always safe */
    er_diags_free(&d);
    return ok ? 0 : -1;
}

edgert_status edgert_manifest_stamp(const char *manifest, char *checksum_out, size_t out_len,
                                    char *err, size_t err_len)
{
    er_diags d = {0};
    er_manifest m;
    char sum[EDGERT_CHECKSUM_LEN], *text = NULL, *edited = NULL, *tmp = NULL, *target = NULL;
    size_t len = 0, elen = 0;
    edgert_status st = EDGERT_E_PARSE;
    if (!manifest || (checksum_out && out_len < EDGERT_CHECKSUM_LEN)) {
        edgert_errf(err, err_len, "edgert_manifest_stamp: %s", !manifest ? "no manifest given"
                    : "checksum_out needs EDGERT_CHECKSUM_LEN bytes (or NULL)");
        return EDGERT_E_USAGE;
    }
    /* A symlink's target is stamped, read as itself: its `library` is
     * relative to its own folder (another .so of the same name may sit
     * beside the link), and replacing the link by a copy would leave the
     * file it names, which others may read, unstamped. */
    const char *given = manifest;
    struct stat ls;
    target = lstat(given, &ls) == 0 && S_ISLNK(ls.st_mode) ? realpath(given, NULL) : NULL;
    manifest = target ? target : given;
    if (er_manifest_load(manifest, &m, &d) != EDGERT_OK) {
        char msg[2048];
        er_diag_last_error(&d, 0, msg, sizeof msg);
        edgert_errf(err, err_len, "bad manifest:\n  %s", msg[0] ? msg : given);
        er_diags_free(&d);
        free(target);
        return EDGERT_E_PARSE;
    }
    if (!m.library_path) {
        edgert_errf(err, err_len, "%s: declarative backend (no library): nothing to checksum",
                    manifest);
        st = EDGERT_E_USAGE;
        goto out;
    }
    char cerr[1024] = "";
    st = edgert_checksum_file(m.library_path, sum, sizeof sum, cerr, sizeof cerr);
    if (st != EDGERT_OK) { /* name the manifest too: its `library` is what is missing */
        edgert_errf(err, err_len, "%s: its library %s", manifest, cerr);
        goto out;
    }
    st = EDGERT_E_IO;
    text = er_read_file(NULL, manifest, EDGERT_MAX_YAML_BYTES, &len);
    if (!text) {
        edgert_errf(err, err_len, "%s: cannot read: %s", manifest, strerror(errno));
        goto out;
    }
    if (stamp_edit(manifest, text, len, sum, &edited, &elen, err, err_len) != 0) {
        st = EDGERT_E_PARSE;
        goto out;
    }
    if (write_beside(manifest, edited, elen, &tmp) != 0) {
        edgert_errf(err, err_len, "%s: cannot write beside it: %s", manifest, strerror(errno));
        goto out;
    }
    uint64_t h = strtoull(sum + 8, NULL, 16);
    if (check_stamped(tmp, h, err, err_len) != 0) {
        st = EDGERT_E_INTERNAL;
        goto out;
    }
    if (rename(tmp, manifest) != 0) {
        edgert_errf(err, err_len, "cannot replace %s: %s", manifest, strerror(errno));
        goto out;
    }
    free(tmp);
    tmp = NULL;
    if (checksum_out)
        snprintf(checksum_out, out_len, "%s", sum);
    st = EDGERT_OK;
out:
    if (tmp) {
        unlink(tmp);
        free(tmp);
    }
    free(target);
    free(edited);
    free(text);
    er_manifest_free(&m);
    er_diags_free(&d);
    return st;
}
