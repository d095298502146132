/*
 * tests/probe/test_probe_util.h — what the probe's test files share: the fixture
 * folders, flag-mask shorthands, and helpers to look through diagnostics and
 * build throwaway sysroots. Header-only (static functions, like test_util.h)
 * so each test binary stays self-contained; each uses a subset, hence
 * __attribute__((unused)).
 */
#ifndef EDGERT_TEST_PROBE_UTIL_H
#define EDGERT_TEST_PROBE_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "probe/probe_internal.h"

#ifndef EDGERT_TEST_FIXTURES
#error "EDGERT_TEST_FIXTURES must name the tests/fixtures folder"
#endif

#define FIX EDGERT_TEST_FIXTURES
#define SYSROOTS FIX "/sysroots/"
#define DEVICES FIX "/devices/"
#define F(flag) (1ull << (unsigned)(flag))

/* arm64 CPUs of the fixtures: ARMv8.2 (asimd, fp16, dotprod) and ARMv9.2
 * (+ i8mm, bf16). */
#define ARM_V82 (F(EDGERT_CPU_ASIMD) | F(EDGERT_CPU_ASIMDHP) | F(EDGERT_CPU_ASIMDDP))
#define ARM_V92 (ARM_V82 | F(EDGERT_CPU_I8MM) | F(EDGERT_CPU_BF16))

__attribute__((unused))
static const edgert_diag *first_error(const er_diags *d)
{
    for (size_t i = 0; i < d->count; i++)
        if (d->items[i].level == EDGERT_LOG_ERROR)
            return &d->items[i];
    return NULL;
}

__attribute__((unused))
static size_t count_level(const er_diags *d, edgert_log_level level)
{
    size_t n = 0;
    for (size_t i = 0; i < d->count; i++)
        n += d->items[i].level == level;
    return n;
}

/* A diagnostic at `level` whose message contains `needle`, or NULL. */
__attribute__((unused))
static const edgert_diag *find_diag(const er_diags *d, edgert_log_level level, const char *needle)
{
    for (size_t i = 0; i < d->count; i++)
        if (d->items[i].level == level && strstr(d->items[i].message, needle))
            return &d->items[i];
    return NULL;
}

/* Like find_diag, and the diagnostic's file must contain `file_part`. */
__attribute__((unused))
static const edgert_diag *find_diag_in(const er_diags *d, edgert_log_level level,
                                       const char *needle, const char *file_part)
{
    for (size_t i = 0; i < d->count; i++)
        if (d->items[i].level == level && strstr(d->items[i].message, needle) &&
            d->items[i].file && strstr(d->items[i].file, file_part))
            return &d->items[i];
    return NULL;
}

/* The line of the error containing `needle`; fails the test when absent. */
__attribute__((unused))
static unsigned error_line(const er_diags *d, const char *needle)
{
    const edgert_diag *e = find_diag(d, EDGERT_LOG_ERROR, needle);
    if (!e)
        fail_msg("no error containing '%s'", needle);
    return e->line;
}

__attribute__((unused))
static void dump_diags(const char *what, const er_diags *d)
{
    for (size_t i = 0; i < d->count; i++)
        print_message("  [%s] level %d %s:%u:%u: %s\n", what, (int)d->items[i].level,
                      d->items[i].file ? d->items[i].file : "-", d->items[i].line,
                      d->items[i].column, d->items[i].message);
}

__attribute__((unused))
static int is_all_zero(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return 0;
    return 1;
}

/* Write root/rel (creating parent folders) with len bytes of data. */
__attribute__((unused))
static void put(const char *root, const char *rel, const void *data, size_t len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            fail_msg("mkdir %s: %s", path, strerror(errno));
        *p = '/';
    }
    FILE *f = fopen(path, "wb");
    if (!f)
        fail_msg("create %s: %s", path, strerror(errno));
    if (len && fwrite(data, 1, len, f) != len)
        fail_msg("write %s", path);
    fclose(f);
}

__attribute__((unused))
static void puts_file(const char *root, const char *rel, const char *text)
{
    put(root, rel, text, strlen(text));
}

__attribute__((unused))
static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

__attribute__((unused))
static void make_tmp(char *buf, size_t len)
{
    snprintf(buf, len, "/tmp/edgert-test-probe-XXXXXX");
    if (!mkdtemp(buf))
        fail_msg("mkdtemp: %s", strerror(errno));
}

__attribute__((unused))
static void rm_tree(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#endif /* EDGERT_TEST_PROBE_UTIL_H */
