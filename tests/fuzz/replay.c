/*
 * tests/fuzz/replay.c — main() for a fuzz target built without libFuzzer:
 * every file under the folders (or the files) given on the command line goes
 * through the target's LLVMFuzzerTestOneInput once, in sorted order.
 *
 * This is how each fuzzer's findings stay fixed: tests/CMakeLists.txt builds
 * one replay program per target with the normal compiler and flags, and
 * ctest runs it over tests/fixtures/fuzz-regressions/<target>/ (and the
 * fixtures the seeds come from), so the Release and ASan/UBSan suites
 * replay every input that once crashed, leaked or hung a parser. A crash is
 * the test's failure; each input is named before it runs, so the log says
 * which one. A folder that does not exist counts as empty (a target with no
 * findings yet has none); a file that cannot be read is an error. When
 * nothing was replayed at all (no seeds written, say, without Python) the
 * program exits REPLAY_SKIPPED, which ctest reports as skipped, not passed.
 * Each input must finish within a few seconds (the fuzzers' -timeout is 10 s
 * under ASan); the test's ctest TIMEOUT catches the rest.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Inputs are small (libFuzzer's -max_len, and regression files); anything
 * bigger than this is not a fuzz input. */
#define REPLAY_MAX_BYTES (16u << 20)
#define REPLAY_SKIPPED 77 /* tests/CMakeLists.txt: SKIP_RETURN_CODE, as tu_run_group's */

static int replay_dir(const char *dir, unsigned *count);

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int replay_file(const char *path, unsigned *count)
{
    int rc = -1;
    uint8_t *buf = NULL;
    FILE *f = fopen(path, "rb");
    struct stat sb;
    if (!f || fstat(fileno(f), &sb) != 0 || sb.st_size > (off_t)REPLAY_MAX_BYTES) {
        fprintf(stderr, "replay: %s: cannot read (or over %u bytes)\n", path, REPLAY_MAX_BYTES);
        goto out;
    }
    size_t size = (size_t)sb.st_size;
    buf = malloc(size ? size : 1);
    if (!buf || (size && fread(buf, 1, size, f) != size)) {
        fprintf(stderr, "replay: %s: cannot read\n", path);
        goto out;
    }
    printf("replay: %s (%zu bytes)\n", path, size);
    fflush(stdout);
    double t0 = now_s();
    LLVMFuzzerTestOneInput(buf, size);
    double dt = now_s() - t0;
    if (dt > 1.0)
        printf("replay: %s took %.2f s\n", path, dt);
    ++*count;
    rc = 0;
out:
    if (f)
        fclose(f);
    free(buf);
    return rc;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A file, or every regular file under a folder (recursively, sorted). */
static int replay_path(const char *path, unsigned *count)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT)
            return 0;
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (S_ISDIR(sb.st_mode))
        return replay_dir(path, count);
    return S_ISREG(sb.st_mode) ? replay_file(path, count) : 0;
}

static int replay_dir(const char *dir, unsigned *count)
{
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, NULL);
    if (n < 0) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char **paths = calloc((size_t)n + 1, sizeof *paths);
    size_t np = 0;
    int rc = paths ? 0 : -1;
    for (int i = 0; i < n; i++) {
        if (paths && names[i]->d_name[0] != '.' &&
            asprintf(&paths[np], "%s/%s", dir, names[i]->d_name) >= 0)
            np++;
        free(names[i]);
    }
    free(names);
    if (paths)
        qsort(paths, np, sizeof *paths, cmp_name);
    for (size_t i = 0; i < np; i++) {
        if (replay_path(paths[i], count) != 0)
            rc = -1;
        free(paths[i]);
    }
    free(paths);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FOLDER-OR-FILE...\n", argv[0]);
        return 2;
    }
    int rc = 0;
    unsigned total = 0;
    for (int i = 1; i < argc; i++) {
        unsigned count = 0;
        if (replay_path(argv[i], &count) != 0)
            rc = 1;
        printf("replay: %u input(s) from %s\n", count, argv[i]);
        total += count;
    }
    if (rc == 0 && total == 0) { /* nothing replayed is nothing tested: not a pass */
        printf("SKIPPED: replay: no input in any of the %d place(s) named\n", argc - 1);
        return REPLAY_SKIPPED;
    }
    return rc;
}
