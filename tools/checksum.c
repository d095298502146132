/*
 * tools/checksum.c — `edgert checksum`: the integrity value a manifest's
 * `checksum` field expects, and writing it into a manifest.
 *
 *   edgert checksum FILE...            print "xxh3-64:<hex>  FILE" per file
 *   edgert checksum --stamp MANIFEST...
 *                                      write the checksum of each manifest's
 *                                      library into its `checksum` field
 *   --json                             one object: {"files": [{"path", "checksum"
 *                                      | "error"}]}
 * Exit codes (usage() says them too): 0 all done, 1 a file could not be
 * written (stamping: or a manifest's library read), 2 usage (stamping: or a
 * manifest without a library), 4 a file named cannot be read or a manifest
 * is bad. Every file is tried even after one fails.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void checksum_help(FILE *f)
{
    fprintf(f,
            "usage: edgert checksum FILE...\n"
            "       edgert checksum --stamp MANIFEST...\n"
            "       edgert checksum --stamp COPY --source MANIFEST\n\n"
            "Print the checksum a manifest's `checksum` field expects for a plugin file\n"
            "(\"xxh3-64:<16 hex digits>\"), or with --stamp write the checksum of each\n"
            "manifest's library into that manifest: the value is replaced in place (or a\n"
            "`checksum:` line added after `library:`), the rest of the file is kept, and\n"
            "the manifest is validated before and after and replaced atomically.\n"
            "A manifest with a checksum makes the core refuse a stale or swapped library\n"
            "(CHECKSUM_MISMATCH) before loading it.\n\n"
            "  --stamp    the arguments are manifests to stamp\n"
            "  --source MANIFEST  with --stamp and one COPY of MANIFEST (a build's,\n"
            "             made by configure_file): an error in it names MANIFEST, the\n"
            "             file to edit, at the copy's line and column\n"
            "  --json     one JSON object on stdout\n"
            "  -h, --help this text\n\n"
            "Exit codes: 0 ok, 1 a file could not be written (stamping: or a manifest's\n"
            "library read), 2 usage error (stamping: or a manifest without a library), 4 a\n"
            "file named cannot be read or a manifest is bad.\n");
}

/* A .yaml / .yml name: given without --stamp, most likely meant with it (a
 * vendor's walkthrough hashed a manifest and took it for the library's). */
static int looks_like_manifest(const char *path)
{
    size_t n = strlen(path);
    return (n > 5 && strcmp(path + n - 5, ".yaml") == 0) ||
           (n > 4 && strcmp(path + n - 4, ".yml") == 0);
}

/* An error about `copy` said of `source`, the file it was made from: each
 * "copy:" becomes "source:" and a line names the copy. */
static void name_source(char *err, size_t len, const char *copy, const char *source)
{
    char out[4096];
    size_t used = 0, cl = strlen(copy);
    const char *p = err;
    for (const char *hit; (hit = strstr(p, copy)) != NULL && hit[cl] == ':'; p = hit + cl) {
        int w = snprintf(out + used, sizeof out - used, "%.*s%s", (int)(hit - p), p, source);
        if (w < 0 || (size_t)w >= sizeof out - used)
            return; /* too long to rewrite: said as it was */
        used += (size_t)w;
    }
    int w = snprintf(out + used, sizeof out - used, "%s\n(found in its build copy %s, made by "
                     "configure_file: @VAR@ texts replaced, lines as in yours)", p, copy);
    if (w >= 0 && (size_t)w < sizeof out - used)
        snprintf(err, len, "%s", out);
}

/* The exit code of one failure, the worst of all kept: bad file > I/O. A
 * file named to be checksummed that cannot be read is a bad input file (4,
 * as for every command); stamping's I/O failure may be a write (1). */
static int worse(int rc, edgert_status st, int stamp)
{
    int code = st == EDGERT_E_PARSE || (st == EDGERT_E_IO && !stamp) ? EXIT_BADFILE
               : st == EDGERT_E_USAGE                               ? EXIT_USAGE
                                                                    : EXIT_FAIL;
    return rc == EXIT_OK || code == EXIT_BADFILE ? code : rc;
}

int cmd_checksum(int argc, char **argv)
{
    int stamp = 0, json = json_asked(argc, argv), nfiles = 0, opts_done = 0;
    const char *source = NULL;
    /* argv[0] is "checksum": files[] takes at most argc - 1 names */
    const char **files = calloc((size_t)argc, sizeof *files);
    if (!files) {
        tfprintf(stderr, "edgert checksum: out of memory\n");
        return json ? json_failed(EXIT_FAIL) : EXIT_FAIL;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (opts_done || a[0] != '-' || !a[1]) {
            files[nfiles++] = a;
        } else if (strcmp(a, "--") == 0) {
            opts_done = 1; /* what follows are files, even when they start with '-' */
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            checksum_help(stdout);
            free(files);
            return EXIT_OK;
        } else if (strcmp(a, "--stamp") == 0) {
            stamp = 1;
        } else if (strcmp(a, "--source") == 0 && i + 1 < argc) {
            source = argv[++i];
        } else if (strcmp(a, "--json") != 0) {
            tfprintf(stderr,
                     "edgert checksum: unknown option '%s' (see 'edgert checksum --help')\n", a);
            free(files);
            return json ? json_failed(EXIT_USAGE) : EXIT_USAGE;
        }
    }
    if (source && (!stamp || nfiles != 1)) {
        tfprintf(stderr, "edgert checksum: --source names the manifest one --stamp COPY was made "
                 "from (see 'edgert checksum --help')\n");
        free(files);
        return json ? json_failed(EXIT_USAGE) : EXIT_USAGE;
    }
    if (nfiles == 0) {
        tfprintf(stderr, "edgert checksum: name at least one %s (see 'edgert checksum --help')\n",
                 stamp ? "manifest" : "file");
        free(files);
        return json ? json_failed(EXIT_USAGE) : EXIT_USAGE;
    }
    json_w w;
    if (json) {
        json_init(&w, json_out());
        json_obj(&w);
        json_key(&w, "files");
        json_arr(&w);
    }
    int rc = EXIT_OK;
    for (int i = 0; i < nfiles; i++) {
        char sum[EDGERT_CHECKSUM_LEN] = "", err[4096] = "";
        edgert_status st = stamp ? edgert_manifest_stamp(files[i], sum, sizeof sum, err, sizeof err)
                                 : edgert_checksum_file(files[i], sum, sizeof sum, err, sizeof err);
        if (st != EDGERT_OK)
            rc = worse(rc, st, stamp);
        if (st != EDGERT_OK && source)
            name_source(err, sizeof err, files[i], source);
        if (json) {
            json_obj(&w);
            json_kstr(&w, "path", files[i]);
            json_kstr(&w, st == EDGERT_OK ? "checksum" : "error", st == EDGERT_OK ? sum : err);
            json_kstr(&w, "status", edgert_status_name(st));
            json_end_obj(&w);
        } else if (st == EDGERT_OK) {
            tprintf(stamp ? "%s  stamped into %s\n" : "%s  %s\n", sum, files[i]);
            if (!stamp && looks_like_manifest(files[i]))
                tfprintf(stderr, "edgert checksum: note: %s looks like a manifest: this is "
                                 "its own checksum; 'edgert checksum --stamp %s' writes its "
                                 "library's into it\n", files[i], files[i]);
        } else {
            tfprintf_lines(stderr, "edgert checksum: %s\n", err);
        }
    }
    if (json) {
        json_end_arr(&w);
        json_said_diags(&w); /* none: checksum opens no handle; the key as every command's */
        json_end_obj(&w);
        json_finish(&w);
    }
    free(files);
    return rc;
}
