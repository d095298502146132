/*
 * tests/test_util.h — temp folders, files and manifests for the tests.
 * Header-only (static functions) so each test binary stays self-contained.
 */
#ifndef EDGERT_TEST_UTIL_H
#define EDGERT_TEST_UTIL_H


#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *tu_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/edgert-test-XXXXXX", base && *base ? base : "/tmp");
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

static int tu_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

static void tu_rmrf(char *dir)
{
    if (dir)
        nftw(dir, tu_rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

/* Write a file (printf-style content); returns its malloc'd path. */
__attribute__((format(printf, 3, 4))) static char *tu_write(const char *dir, const char *name,
                                                             const char *fmt, ...)
{
    char *path = NULL;
    if (asprintf(&path, "%s/%s", dir, name) < 0)
        return NULL;
    FILE *f = fopen(path, "w");
    if (!f) {
        free(path);
        return NULL;
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
    return path;
}

/* A valid manifest for a test backend. `extra` is appended verbatim (YAML
 * lines), `library` may be NULL for a declarative one. */
__attribute__((unused)) static char *tu_manifest(const char *dir, const char *file, const char *name, const char *library,
                         const char *layout, const char *extra)
{
    char lib[4400] = "";
    if (library)
        snprintf(lib, sizeof lib, "library: \"%s\"\nabi: {min: 1, max: 1}\n", library);
    return tu_write(dir, file,
                    "manifest_version: 1\n"
                    "name: %s\n"
                    "version: \"0.0.1\"\n"
                    "vendor: tests\n"
                    "%s"
                    "arch: any\n"
                    "device_classes: [x86_cpu, arm64_cpu, cuda_discrete, jetson, npu_phone]\n"
                    "layout: %s\n"
                    "runs_in_process: true\n"
                    "verified: false\n"
                    "rationale: \"test backend\"\n"
                    "%s",
                    name, lib,
                    layout ? layout
                           : "{format: int4-asym-g128, weight_bits: 4, group_size: 128, "
                             "symmetric: false, activation_dtype: bf16, bits_per_weight: 4.25}",
                    extra ? extra : "");
}

__attribute__((unused)) static char *tu_plugin(const char *base)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s.so", EDGERT_TEST_PLUGIN_DIR, base) < 0)
        return NULL;
    return p;
}

#endif
