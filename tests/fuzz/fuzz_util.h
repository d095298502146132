/*
 * tests/fuzz/fuzz_util.h — what every fuzz target shares: the libFuzzer entry
 * point's prototype and one scratch folder per process for the files the
 * parsers read.
 *
 * Each target (tests/fuzz/fuzz_<name>.c) is built twice: with clang and
 * -fsanitize=fuzzer (EDGERT_FUZZ, .ci/fuzz), and with the normal compiler
 * and tests/fuzz/replay.c as main, so every input under
 * tests/fixtures/fuzz-regressions/<name>/ replays in the Release and ASan
 * suites too. The parsers read files (their only input form), so each input
 * is written to a file in the scratch folder first: $TMPDIR/edgert-fuzz-XXXXXX,
 * created on the first input and removed at exit.
 * Header-only (static functions): each target includes it once.
 */
#ifndef EDGERT_FUZZ_UTIL_H
#define EDGERT_FUZZ_UTIL_H

#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fz_dir_buf[4096];

__attribute__((unused)) static int fz_rm_one(const char *p, const struct stat *sb, int flag,
                                             struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

__attribute__((unused)) static void fz_cleanup(void)
{
    if (fz_dir_buf[0])
        nftw(fz_dir_buf, fz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The process's scratch folder; aborts when it cannot be made (the target
 * could test nothing without it). */
__attribute__((unused)) static const char *fz_dir(void)
{
    if (fz_dir_buf[0])
        return fz_dir_buf;
    const char *base = getenv("TMPDIR");
    snprintf(fz_dir_buf, sizeof fz_dir_buf, "%s/edgert-fuzz-XXXXXX",
             base && *base ? base : "/tmp");
    if (!mkdtemp(fz_dir_buf)) {
        perror("fuzz: mkdtemp");
        abort();
    }
    atexit(fz_cleanup);
    return fz_dir_buf;
}

/* "<scratch>/<name>" into out (the caller's buffer of `cap` bytes); aborts
 * when it does not fit. */
__attribute__((unused)) static const char *fz_path(char *out, size_t cap, const char *name)
{
    int n = snprintf(out, cap, "%s/%s", fz_dir(), name);
    if (n < 0 || (size_t)n >= cap)
        abort();
    return out;
}

/* mkdir -p of "<scratch>/<rel>"; aborts on failure. */
__attribute__((unused)) static void fz_mkdirs(const char *rel)
{
    char p[4096];
    fz_path(p, sizeof p, rel);
    for (char *s = p + strlen(fz_dir()) + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0700) != 0 && access(p, F_OK) != 0) {
            perror(p);
            abort();
        }
        *s = '/';
    }
    if (mkdir(p, 0700) != 0 && access(p, F_OK) != 0) {
        perror(p);
        abort();
    }
}

/* Write data to `path` (replacing it); aborts on failure, which is the
 * harness's fault, not the parser's. */
__attribute__((unused)) static void fz_write(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

/* A NUL-terminated malloc'd copy of the input (for the decoders that take C
 * strings); aborts when out of memory. */
__attribute__((unused)) static char *fz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    if (size)
        memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

#endif /* EDGERT_FUZZ_UTIL_H */
