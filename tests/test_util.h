/*
 * tests/test_util.h — temp folders, files and manifests for the tests, and
 * skips that ctest can see.
 * Header-only (static functions) so each test binary stays self-contained;
 * every helper is marked unused so a test includes it whole and uses what it
 * needs. Include after cmocka.h (the skip helpers expand to cmocka's skip()).
 */
#ifndef EDGERT_TEST_UTIL_H
#define EDGERT_TEST_UTIL_H

#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "edgert/edgert.h"

__attribute__((unused)) static char *tu_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/edgert-test-XXXXXX", base && *base ? base : "/tmp");
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

__attribute__((unused)) static int tu_rm_one(const char *p, const struct stat *sb, int flag,
                                             struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

__attribute__((unused)) static void tu_rmrf(char *dir)
{
    if (dir)
        nftw(dir, tu_rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

/* Point XDG_CACHE_HOME at a fresh folder (returned): no first-contact verdict
 * or evidence of another run counts. *saved keeps the old value (malloc'd,
 * NULL when unset) for tu_restore_cache, which also removes the folder. */
__attribute__((unused)) static char *tu_fresh_cache(char **saved)
{
    const char *old = getenv("XDG_CACHE_HOME");
    *saved = old ? strdup(old) : NULL;
    char *cache = tu_tmpdir();
    if (cache)
        setenv("XDG_CACHE_HOME", cache, 1);
    return cache;
}

__attribute__((unused)) static void tu_restore_cache(char *cache, char *saved)
{
    if (saved)
        setenv("XDG_CACHE_HOME", saved, 1);
    else
        unsetenv("XDG_CACHE_HOME");
    free(saved);
    tu_rmrf(cache);
}

/* Write a file (printf-style content); returns its malloc'd path. */
__attribute__((unused, format(printf, 3, 4))) static char *tu_write(const char *dir,
                                                                     const char *name,
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

/* A valid manifest for a test backend whose library implements plugin ABI
 * 1 .. abi_max. `extra` is appended verbatim (YAML lines), `library` may be
 * NULL for a declarative one. */
__attribute__((unused)) static char *tu_manifest_abi(const char *dir, const char *file,
                                                     const char *name, const char *library,
                                                     unsigned abi_max, const char *layout,
                                                     const char *extra)
{
    char lib[4400] = "processor: gpu\n"; /* declarative: for an accelerator */
    if (library)
        snprintf(lib, sizeof lib, "library: \"%s\"\nabi: {min: 1, max: %u}\n", library,
                 abi_max);
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

/* tu_manifest_abi for a library of plugin ABI 1. */
__attribute__((unused)) static char *tu_manifest(const char *dir, const char *file,
                                                 const char *name, const char *library,
                                                 const char *layout, const char *extra)
{
    return tu_manifest_abi(dir, file, name, library, 1u, layout, extra);
}

/* A page of the source tree's docs/ folder, whole, in a malloc'd string
 * (the tests that pin every key of a format to its documentation). */
__attribute__((unused)) static char *tu_doc(const char *page)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/../../docs/%s", EDGERT_TEST_FIXTURES, page);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t cap = 1 << 16, len = 0, got;
    char *doc = malloc(cap);
    assert_non_null(doc);
    while ((got = fread(doc + len, 1, cap - len - 1, f)) > 0)
        if ((len += got) + 1 == cap)
            assert_non_null(doc = realloc(doc, cap *= 2));
    fclose(f);
    doc[len] = '\0';
    return doc;
}

__attribute__((unused)) static char *tu_plugin(const char *base)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s.so", EDGERT_TEST_PLUGIN_DIR, base) < 0)
        return NULL;
    return p;
}

/* A handle on the manifests of `dir` only (EDGERT_TEST_BACKEND_DIR: the
 * build's backends), the environment ignored, no evidence file, `threads`
 * threads, only errors logged; tu_open_for also plans for a device profile
 * and selects for weights (either NULL: none), tu_open_full also logs to
 * `log` (NULL: stderr) at `log_level`. NULL with err filled on failure: no
 * cmocka assert, so worker threads may call them too. */
__attribute__((unused)) static edgert_ctx *tu_open_full(const char *dir, unsigned threads,
                                                        const char *profile, const char *weights,
                                                        edgert_log_fn log, void *log_user,
                                                        int log_level, char *err, size_t err_len)
{
    const char *paths[1] = {dir};
    edgert_options o = {.struct_size = sizeof o};
    o.manifest_paths = paths;
    o.manifest_path_count = 1;
    o.ignore_env = 1;
    o.no_evidence = 1;
    o.threads = threads;
    o.log = log;
    o.log_user = log_user;
    o.log_level = log_level;
    o.device_profile = profile;
    o.weights = weights;
    edgert_ctx *ctx = NULL;
    return edgert_open(&o, &ctx, err, err_len) == EDGERT_OK ? ctx : NULL;
}

__attribute__((unused)) static edgert_ctx *tu_open_for(const char *dir, unsigned threads,
                                                       const char *profile, const char *weights,
                                                       char *err, size_t err_len)
{
    return tu_open_full(dir, threads, profile, weights, NULL, NULL, EDGERT_LOG_ERROR, err,
                        err_len);
}

__attribute__((unused)) static edgert_ctx *tu_open(const char *dir, unsigned threads, char *err,
                                                   size_t err_len)
{
    return tu_open_for(dir, threads, NULL, NULL, err, err_len);
}

/* The build's backends on 2 threads, or the case fails saying why. */
__attribute__((unused)) static edgert_ctx *tu_open_backends(void)
{
    char err[1024] = "";
    edgert_ctx *ctx = tu_open(EDGERT_TEST_BACKEND_DIR, 2, err, sizeof err);
    if (ctx == NULL)
        fail_msg("edgert_open: %s", err);
    return ctx;
}

/* edgert_checkpoint_open, or the case fails saying why. */
__attribute__((unused)) static edgert_checkpoint *tu_open_checkpoint(const char *path)
{
    edgert_checkpoint *ck = NULL;
    char err[1024] = "";
    if (edgert_checkpoint_open(path, &ck, err, sizeof err) != EDGERT_OK)
        fail_msg("edgert_checkpoint_open(%s): %s", path, err);
    return ck;
}

/* y[m][n] = x[m][k] W^T through edgert_gemm on b, or the case fails saying why. */
__attribute__((unused)) static void tu_gemm(edgert_backend *b, const edgert_packed *p, uint32_t m,
                                            const float *x, uint32_t k, float *y, uint32_t n)
{
    char err[1024] = "";
    edgert_gemm_args a = {.struct_size = sizeof a, .m = m, .x = x, .ldx = k, .y = y, .ldy = n};
    if (edgert_gemm(b, p, &a, err, sizeof err) != EDGERT_OK)
        fail_msg("%s: gemm: %s", edgert_backend_name(b), err);
}

/* Every layer of packed file pk, mapped on b, gives bit for bit what the
 * same layer of ck packed on b gives, m = 3 (pk: what `edgert pack` or
 * edgert_checkpoint_pack wrote of ck for b). */
__attribute__((unused)) static void tu_mapped_equals_packed(edgert_backend *b,
                                                            edgert_checkpoint *pk,
                                                            edgert_checkpoint *ck)
{
    char err[1024] = "";
    assert_string_equal(edgert_checkpoint_kind(pk), "packed");
    assert_int_equal(edgert_checkpoint_layer_count(pk), edgert_checkpoint_layer_count(ck));
    for (size_t l = 0; l < edgert_checkpoint_layer_count(ck); l++) {
        const edgert_layer *ly = edgert_checkpoint_layer_at(ck, l);
        edgert_packed *pm = NULL, *pp = NULL;
        if (edgert_checkpoint_layer_packed(pk, l, b, &pm, err, sizeof err) != EDGERT_OK)
            fail_msg("map %s: %s", ly->name, err);
        if (edgert_checkpoint_layer_packed(ck, l, b, &pp, err, sizeof err) != EDGERT_OK)
            fail_msg("pack %s: %s", ly->name, err);
        uint32_t m = 3, n = ly->n, k = ly->k;
        float *x = malloc(sizeof(float) * m * k), *y1 = calloc((size_t)m * n, sizeof(float));
        float *y2 = calloc((size_t)m * n, sizeof(float));
        assert_true(x && y1 && y2);
        for (size_t i = 0; i < (size_t)m * k; i++) /* an outlier channel, as real inputs have */
            x[i] = (float)sin(0.3 * (double)i) * (i % k == 7 ? 20.0f : 1.0f);
        tu_gemm(b, pm, m, x, k, y1, n);
        tu_gemm(b, pp, m, x, k, y2, n);
        assert_memory_equal(y1, y2, sizeof(float) * m * n);
        free(x), free(y1), free(y2);
        edgert_packed_free(pm);
        edgert_packed_free(pp);
    }
}

/* The CPU vendor the x86 plugins' decode defaults follow (plugin_kit.h,
 * pk_cpu_is_intel): CPUID's vendor string is "GenuineIntel". */
__attribute__((unused)) static int tu_cpu_is_intel(void)
{
#if defined(__x86_64__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0u), "c"(0u));
    return b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu;
#else
    return 0;
#endif
}

/* Groups of `group` columns in a row of k (the last one may be partial). */
__attribute__((unused)) static size_t tu_groups_of(uint32_t k, uint32_t group)
{
    return (k + (size_t)group - 1u) / group;
}

/* ---- skips that ctest can see ---------------------------------------------
 *
 * A case that cannot run here (this CPU lacks a flag, another arch, a tool
 * that cannot be had) calls tu_skip("reason", ...): it prints ONE line
 *
 *     SKIPPED: <test program>: <case>: <reason>
 *
 * and then cmocka's skip(), so cmocka reports the case as skipped, never as
 * passed. .ci/run greps these lines out of ctest's log after each run. A
 * known bug that a test exposes but that is not fixed yet is reported the
 * same way through tu_known_bug(): "SKIPPED: ...: KNOWN BUG: <what>".
 *
 * main() returns tu_run_group(...) instead of cmocka_run_group_tests(...):
 * when every case of the program skipped it exits with TU_EXIT_SKIPPED, which
 * the program's ctest entry declares as its SKIP_RETURN_CODE
 * (tests/CMakeLists.txt), so ctest lists it as "Skipped", not "Passed".
 */
#define TU_EXIT_SKIPPED 77

#ifndef EDGERT_TEST_NAME
#define EDGERT_TEST_NAME "test" /* set per program by edgert_test() */
#endif

/* Cases of this program that called tu_skip or tu_known_bug. */
__attribute__((unused)) static size_t tu_skipped_cases;

__attribute__((unused, format(printf, 3, 4))) static void tu_skip_line(const char *test_case,
                                                                       const char *kind,
                                                                       const char *fmt, ...)
{
    char reason[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    for (char *p = reason; *p; p++) /* one line, whatever the reason says */
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    fflush(stderr);
    printf("SKIPPED: %s: %s: %s%s\n", EDGERT_TEST_NAME, test_case, kind, reason);
    fflush(stdout);
}

/* Print the reason line, then skip the calling case (does not return). A
 * case that skips only part of what it checks calls tu_skip_line for that
 * part and goes on: its reason is printed, and the case is not counted as
 * skipped. */
#define tu_skip(...)                                                                              \
    do {                                                                                          \
        tu_skip_line(__func__, "", __VA_ARGS__);                                                  \
        tu_skipped_cases++;                                                                       \
        skip();                                                                                   \
    } while (0)

/* A case whose code is the same on every arch (the CLI's own logic, over the
 * portable reference backend): the native builds run it, plain and under
 * ASan; a cross build under qemu user-mode emulation (EDGERT_TEST_EMULATED,
 * some 25x slower) reports it skipped, with `took` what it took there, and
 * spends CI's ARM64 stage on what depends on the arch. */
#if EDGERT_TEST_EMULATED
#define TU_SKIP_EMULATED(took)                                                                    \
    tu_skip("the same on every arch, and the native builds run it (under qemu %s)", took)
#else
#define TU_SKIP_EMULATED(took) ((void)0)
#endif

/* ---- load beside a test: busy loops --------------------------------------
 *
 * tu_burners_start: a busy loop on every CPU, twice over, so each runnable
 * thread gets at most half a CPU's time whatever the machine; their pids in
 * pids[] (at most max), the count returned, all of them running when it
 * returns. tu_burners_stop ends and reaps them. tu_schedstat_known: whether
 * the kernel keeps the schedstat contention is seen by (this process has
 * run, so a kernel that keeps it reads more than 0); a test that needs it
 * skips, saying so, without it. */
__attribute__((unused)) static int tu_burners_start(pid_t *pids, int max)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int n = (int)(cpus > 0 && cpus < 1024 ? 2 * cpus : 4);
    n = n < max ? n : max;
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] < 0) {
            n = i;
            break;
        }
        if (pids[i] == 0)
            for (volatile unsigned long x = 0;; x++)
                ;
    }
    usleep(100000);
    return n;
}

__attribute__((unused)) static void tu_burners_stop(const pid_t *pids, int n)
{
    for (int i = 0; i < n; i++) {
        kill(pids[i], SIGKILL);
        waitpid(pids[i], NULL, 0);
    }
}

__attribute__((unused)) static int tu_schedstat_known(void)
{
    char buf[128] = "";
    FILE *f = fopen("/proc/self/schedstat", "r");
    int known = f && fgets(buf, sizeof buf, f) && strtoull(buf, NULL, 10) > 0;
    if (f)
        fclose(f);
    return known;
}

/* A safetensors file written by hand, as an outside producer would: the
 * 8-byte little-endian length of `header`, the header as given (a caller that
 * wants it 8-byte padded pads it), then `n` raw bytes. Its malloc'd path. */
__attribute__((unused)) static char *tu_safetensors(const char *dir, const char *name,
                                                    const char *header, const void *data,
                                                    size_t n)
{
    char *path = NULL;
    if (asprintf(&path, "%s/%s", dir, name) < 0)
        return NULL;
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        free(path);
        return NULL;
    }
    uint64_t len = strlen(header);
    for (int i = 0; i < 8; i++)
        fputc((int)(len >> (8 * i)) & 0xFF, f);
    fwrite(header, 1, (size_t)len, f);
    if (n != 0)
        fwrite(data, 1, n, f);
    if (fclose(f) != 0) {
        free(path);
        return NULL;
    }
    return path;
}

/* A test that exposes a bug not fixed yet: the reason line says KNOWN BUG.
 * Use it only after checking for the buggy behaviour itself, so the test
 * asserts the right behaviour again as soon as the bug is fixed. */
#define tu_known_bug(...)                                                                         \
    do {                                                                                          \
        tu_skip_line(__func__, "KNOWN BUG: ", __VA_ARGS__);                                       \
        tu_skipped_cases++;                                                                       \
        skip();                                                                                   \
    } while (0)

/* cmocka's failure count as an exit status: 0, 1, or TU_EXIT_SKIPPED when
 * all `cases` skipped and none failed. */
__attribute__((unused)) static int tu_exit_status(int failed, size_t cases)
{
    if (failed != 0)
        return 1;
    if (cases > 0 && tu_skipped_cases == cases) {
        printf("%s: all %zu cases skipped (exit %d: ctest reports the test as skipped)\n",
               EDGERT_TEST_NAME, cases, TU_EXIT_SKIPPED);
        return TU_EXIT_SKIPPED;
    }
    return 0;
}

#define tu_run_group(name, tests, setup, teardown)                                                \
    tu_exit_status(cmocka_run_group_tests_name(name, tests, setup, teardown),                      \
                   sizeof(tests) / sizeof((tests)[0]))

#endif
