/*
 * tests/test_evidence.c — the evidence cache: keying by device and plugin
 * file, invalidation, corruption, atomic replacement, and the selector
 * ranking by measured figures.
 */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "edgert/edgert.h"
#include "test_util.h"

typedef struct fx {
    char *dir;      /* manifests + plugin copies */
    char *ev;       /* evidence file path */
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    f->dir = tu_tmpdir();
    if (asprintf(&f->ev, "%s/cache/edgert/evidence.json", f->dir) < 0)
        return -1;
    /* Two honest test plugins copied into the folder, so the test can change
     * a plugin file without touching the build tree. */
    const char *names[2][2] = {{"tp_good", "test-good"}, {"tp_fast", "test-fast"}};
    for (int i = 0; i < 2; i++) {
        char *src = tu_plugin(names[i][0]), cmd[8192];
        snprintf(cmd, sizeof cmd, "cp '%s' '%s/%s.so'", src, f->dir, names[i][0]);
        assert_int_equal(system(cmd), 0);
        free(src);
        char lib[4200], file[64];
        snprintf(lib, sizeof lib, "%s/%s.so", f->dir, names[i][0]);
        snprintf(file, sizeof file, "%s.yaml", names[i][1]);
        free(tu_manifest(f->dir, file, names[i][1], lib,
                         i == 1 ? "{format: int4-sym-g128, weight_bits: 4, group_size: 128, "
                                  "symmetric: true, activation_dtype: int8, bits_per_weight: 4.125}"
                                : NULL,
                         i == 1 ? "declared: {decode_tokens_per_s: 90, measured_on: \"test\"}\n"
                                : "declared: {decode_tokens_per_s: 50, measured_on: \"test\"}\n"));
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    tu_rmrf(f->dir);
    free(f->ev);
    free(f);
    return 0;
}

static edgert_ctx *open_fx(fx *f, int no_evidence, const char *profile)
{
    const char *paths[1] = {f->dir};
    edgert_options o = {.struct_size = sizeof o};
    o.manifest_paths = paths;
    o.manifest_path_count = 1;
    o.ignore_env = 1;
    o.evidence_file = f->ev;
    o.no_evidence = no_evidence;
    o.device_profile = profile;
    o.threads = 1;
    o.log_level = EDGERT_LOG_ERROR;
    edgert_ctx *ctx = NULL;
    char err[512];
    assert_int_equal(edgert_open(&o, &ctx, err, sizeof err), EDGERT_OK);
    return ctx;
}

/* Whether a candidate's measured figures come from the fixture's evidence
 * file (edgert calibrate), not from first contact's quick measurement. */
static int from_evidence(const edgert_candidate *c, const fx *f)
{
    return c->measured.where && strcmp(c->measured.where, f->ev) == 0;
}

static edgert_evidence ev(const char *name, double tps, double top1, double kl, int correct)
{
    edgert_evidence e = {sizeof e, name, tps, NAN, top1, kl, 20.0, 1, "test", correct};
    return e;
}

static const char *selected(edgert_ctx *ctx, edgert_priority p, const char **evidence)
{
    edgert_selection *sel = NULL;
    char err[512];
    assert_int_equal(edgert_select(ctx, p, NULL, &sel, err, sizeof err), EDGERT_OK);
    const char *n = edgert_selection_selected(sel)->name;
    if (evidence)
        *evidence = edgert_selection_evidence(sel);
    edgert_selection_free(sel);
    return n;
}

static void test_store_and_rank(void **state)
{
    fx *f = *state;
    /* declared only (no_evidence: no measurement counts, not even the quick
     * one of first contact): test-fast 90 tok/s beats test-good 50 */
    edgert_ctx *ctx = open_fx(f, 1, NULL);
    const char *evd;
    assert_string_equal(selected(ctx, EDGERT_PRIORITY_SPEED, &evd), "test-fast");
    assert_string_equal(evd, "declared");
    edgert_close(ctx);
    ctx = open_fx(f, 0, NULL);
    edgert_evidence items[2] = {ev("test-good", 120.0, 0.99, 0.001, 1),
                                ev("test-fast", 100.0, 0.90, 0.05, 1)};
    char err[512];
    assert_int_equal(edgert_evidence_store(ctx, NULL, items, 2, err, sizeof err), EDGERT_OK);
    edgert_close(ctx);

    /* measured on this device now decides */
    ctx = open_fx(f, 0, NULL);
    const edgert_candidate *g = edgert_candidate_find(ctx, "test-good");
    assert_true(fabs(g->measured.decode_tokens_per_s - 120.0) < 1e-9);
    assert_string_equal(g->measured.where, f->ev);
    assert_string_equal(selected(ctx, EDGERT_PRIORITY_SPEED, &evd), "test-good");
    assert_string_equal(evd, "measured");
    assert_string_equal(selected(ctx, EDGERT_PRIORITY_FIDELITY, &evd), "test-good");
    edgert_close(ctx);

    /* --no-evidence ignores it */
    ctx = open_fx(f, 1, NULL);
    assert_true(isnan(edgert_candidate_find(ctx, "test-good")->measured.decode_tokens_per_s));
    assert_string_equal(selected(ctx, EDGERT_PRIORITY_SPEED, NULL), "test-fast");
    edgert_close(ctx);

    /* a plan for another device never uses this device's evidence */
    ctx = open_fx(f, 0, EDGERT_TEST_FIXTURES "/devices/x86-avx2.yaml");
    assert_true(isnan(edgert_candidate_find(ctx, "test-good")->measured.decode_tokens_per_s));
    edgert_close(ctx);

    /* no temporary file left behind */
    char *cache = strdup(f->ev);
    *strrchr(cache, '/') = '\0';
    DIR *d = opendir(cache);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' || strncmp(e->d_name, ".evidence", 9) == 0)
            files += e->d_name[0] != '.' ? 1 : 100;
    closedir(d);
    free(cache);
    assert_int_equal(files, 1);
}

static void test_merge_and_replace(void **state)
{
    fx *f = *state;
    edgert_ctx *ctx = open_fx(f, 0, NULL);
    char err[512];
    edgert_evidence a = ev("test-good", 10.0, 0.5, 0.1, 1), b = ev("test-fast", 20.0, 0.5, 0.1, 1);
    assert_int_equal(edgert_evidence_store(ctx, NULL, &a, 1, err, sizeof err), EDGERT_OK);
    assert_int_equal(edgert_evidence_store(ctx, NULL, &b, 1, err, sizeof err), EDGERT_OK);
    a.decode_tokens_per_s = 11.0;
    assert_int_equal(edgert_evidence_store(ctx, NULL, &a, 1, err, sizeof err), EDGERT_OK);
    edgert_close(ctx);
    ctx = open_fx(f, 0, NULL);
    assert_true(fabs(edgert_candidate_find(ctx, "test-good")->measured.decode_tokens_per_s - 11.0) <
                1e-9);
    assert_true(fabs(edgert_candidate_find(ctx, "test-fast")->measured.decode_tokens_per_s - 20.0) <
                1e-9);
    edgert_close(ctx);
    /* exactly one entry per backend */
    size_t len = 0;
    FILE *fp = fopen(f->ev, "r");
    char buf[8192];
    len = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[len] = '\0';
    int n = 0;
    for (char *p = buf; (p = strstr(p, "\"test-good\"")); p++)
        n++;
    assert_int_equal(n, 1);
    /* unknown backend: refused, file untouched */
    ctx = open_fx(f, 0, NULL);
    edgert_evidence bogus = ev("no-such", 1, 1, 0, 1);
    assert_int_equal(edgert_evidence_store(ctx, NULL, &bogus, 1, err, sizeof err),
                     EDGERT_E_NOT_FOUND);
    edgert_close(ctx);
}

/* Evidence for a plugin file that has changed since is ignored. */
static void test_plugin_changed(void **state)
{
    fx *f = *state;
    edgert_ctx *ctx = open_fx(f, 0, NULL);
    char err[512];
    edgert_evidence a = ev("test-good", 500.0, 1.0, 0.0, 1);
    assert_int_equal(edgert_evidence_store(ctx, NULL, &a, 1, err, sizeof err), EDGERT_OK);
    edgert_close(ctx);
    char lib[4200];
    snprintf(lib, sizeof lib, "%s/tp_good.so", f->dir);
    FILE *fp = fopen(lib, "ab"); /* trailing bytes: still a loadable ELF, another hash */
    fputs("rebuilt", fp);
    fclose(fp);
    ctx = open_fx(f, 0, NULL);
    const edgert_candidate *g = edgert_candidate_find(ctx, "test-good");
    assert_true(g->loaded);
    assert_false(from_evidence(g, f)); /* at most the quick measurement of first contact */
    int noted = 0;
    for (size_t i = 0; i < edgert_diag_count(ctx); i++)
        noted |= strstr(edgert_diag_at(ctx, i)->message, "another build") != NULL;
    assert_true(noted);
    edgert_close(ctx);
}

/* Evidence for another device is ignored. */
static void test_other_device(void **state)
{
    fx *f = *state;
    edgert_ctx *ctx = open_fx(f, 0, NULL);
    char err[512];
    edgert_evidence a = ev("test-good", 500.0, 1.0, 0.0, 1);
    assert_int_equal(edgert_evidence_store(ctx, NULL, &a, 1, err, sizeof err), EDGERT_OK);
    const char *fp_hex = edgert_device_fingerprint(ctx);
    assert_int_equal(strlen(fp_hex), 16);
    char *fp_copy = strdup(fp_hex);
    edgert_close(ctx);
    /* rewrite the fingerprint in the file: another device's evidence */
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "sed -i 's/%s/0123456789abcdef/' '%s'", fp_copy, f->ev);
    assert_int_equal(system(cmd), 0);
    free(fp_copy);
    ctx = open_fx(f, 0, NULL);
    assert_false(from_evidence(edgert_candidate_find(ctx, "test-good"), f));
    edgert_close(ctx);
}

static void test_corrupt_file(void **state)
{
    fx *f = *state;
    const char *bad[] = {"{\"evidence_version\": 1, \"entries\": [ {\"device\": ",
                         "\x01\x02 not json at all",
                         "{\"evidence_version\": 7, \"entries\": []}",
                         "[1, 2, 3]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *cache = strdup(f->ev);
        *strrchr(cache, '/') = '\0';
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", cache);
        assert_int_equal(system(cmd), 0);
        free(tu_write(cache, "evidence.json", "%s", bad[i]));
        free(cache);
        edgert_ctx *ctx = open_fx(f, 0, NULL); /* never fatal */
        int warned = 0;
        for (size_t d = 0; d < edgert_diag_count(ctx); d++)
            warned |= edgert_diag_at(ctx, d)->level == EDGERT_LOG_WARN &&
                      edgert_diag_at(ctx, d)->file &&
                      strstr(edgert_diag_at(ctx, d)->file, "evidence.json");
        assert_true(warned);
        assert_false(from_evidence(edgert_candidate_find(ctx, "test-good"), f));
        /* calibrate replaces it with a valid file */
        char err[512];
        edgert_evidence a = ev("test-good", 7.0, 1.0, 0.0, 1);
        assert_int_equal(edgert_evidence_store(ctx, NULL, &a, 1, err, sizeof err), EDGERT_OK);
        edgert_close(ctx);
        ctx = open_fx(f, 0, NULL);
        assert_true(fabs(edgert_candidate_find(ctx, "test-good")->measured.decode_tokens_per_s -
                         7.0) < 1e-9);
        edgert_close(ctx);
    }
}

/* A failed write leaves the old file as it was. */
static void test_failed_write_keeps_old(void **state)
{
    fx *f = *state;
    edgert_ctx *ctx = open_fx(f, 0, NULL);
    char err[512];
    edgert_evidence a = ev("test-good", 3.0, 1.0, 0.0, 1);
    assert_int_equal(edgert_evidence_store(ctx, NULL, &a, 1, err, sizeof err), EDGERT_OK);
    /* a path whose folder is a regular file cannot be written */
    char *blocker = tu_write(f->dir, "blocker", "x");
    char bad[4200];
    snprintf(bad, sizeof bad, "%s/evidence.json", blocker);
    assert_int_not_equal(edgert_evidence_store(ctx, bad, &a, 1, err, sizeof err), EDGERT_OK);
    assert_true(strlen(err) > 0);
    free(blocker);
    edgert_close(ctx);
    ctx = open_fx(f, 0, NULL);
    assert_true(fabs(edgert_candidate_find(ctx, "test-good")->measured.decode_tokens_per_s - 3.0) <
                1e-9);
    edgert_close(ctx);
}

static void test_failed_verify_gate(void **state)
{
    fx *f = *state;
    edgert_ctx *ctx = open_fx(f, 0, NULL);
    char err[512];
    edgert_evidence a = ev("test-fast", 900.0, 0.1, 3.0, 0);
    assert_int_equal(edgert_evidence_store(ctx, NULL, &a, 1, err, sizeof err), EDGERT_OK);
    edgert_close(ctx);
    ctx = open_fx(f, 0, NULL);
    const edgert_candidate *c = edgert_candidate_find(ctx, "test-fast");
    assert_false(c->eligible);
    assert_string_equal(c->reasons[c->reason_count - 1], "FAILED_VERIFY");
    assert_string_equal(selected(ctx, EDGERT_PRIORITY_SPEED, NULL), "test-good");
    edgert_close(ctx);
}

static void test_default_path(void **state)
{
    (void)state;
    edgert_options o = {.struct_size = sizeof o};
    const char *paths[1] = {"/nonexistent-but-unused"};
    (void)paths;
    o.device_profile = EDGERT_TEST_FIXTURES "/devices/x86-avx2.yaml";
    o.threads = 1;
    o.log_level = EDGERT_LOG_ERROR;
    setenv("XDG_CACHE_HOME", "/tmp/xdg-edgert-test", 1);
    edgert_ctx *ctx = NULL;
    char err[512];
    assert_int_equal(edgert_open(&o, &ctx, err, sizeof err), EDGERT_OK);
    assert_string_equal(edgert_evidence_path(ctx), "/tmp/xdg-edgert-test/edgert/evidence.json");
    edgert_close(ctx);
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/someone", 1);
    assert_int_equal(edgert_open(&o, &ctx, err, sizeof err), EDGERT_OK);
    assert_string_equal(edgert_evidence_path(ctx), "/home/someone/.cache/edgert/evidence.json");
    /* a plan handle cannot store evidence */
    edgert_evidence a = ev("ref-w4a16", 1, 1, 0, 1);
    assert_int_equal(edgert_evidence_store(ctx, NULL, &a, 1, err, sizeof err), EDGERT_E_USAGE);
    edgert_close(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_store_and_rank, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merge_and_replace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plugin_changed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_device, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_write_keeps_old, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_verify_gate, setup, teardown),
        cmocka_unit_test(test_default_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
