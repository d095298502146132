/*
 * tests/evidence/test_evidence.c — the evidence cache: keying by device and plugin
 * file, invalidation, corruption (moved aside, never overwritten), names
 * that must survive the round trip, failed verifies that a merge keeps,
 * atomic replacement, and the selector ranking by measured figures.
 *
 * Length: over 700 lines because the decode groups (the ranges of measured
 * rates, as stored, refused and ranked) and the one source of measured
 * decode rates (calibrate's or first contact's) need this file's fixture:
 * real plugin files and an evidence file written through the public API.
 */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "edgert/edgert.h"
#include "common/internal.h"
#include "test_util.h"
#include "test_cli_util.h"
#include "formats/yamldoc.h"

typedef struct fx {
    char *dir;      /* manifests + plugin copies */
    char *ev;       /* evidence file path */
    char *xdg;      /* XDG_CACHE_HOME before the test (a test may point it at dir) */
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    f->dir = tu_tmpdir();
    f->xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
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
    if (f->xdg)
        setenv("XDG_CACHE_HOME", f->xdg, 1);
    else
        unsetenv("XDG_CACHE_HOME");
    free(f->xdg);
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
    edgert_evidence e = {sizeof e, name, tps, NAN, top1, kl, 20.0, 1, "test", correct, NAN, NAN,
                         0u, 0, NULL, 0u};
    return e;
}

/* ev() with the decode rounds' range */
static edgert_evidence evs(const char *name, double tps, double lo, double hi)
{
    edgert_evidence e = ev(name, tps, 0.9, 0.01, 1);
    e.decode_tokens_per_s_min = lo;
    e.decode_tokens_per_s_max = hi;
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

/* `select --explain=full` over the fixture's folder and evidence says `line`
 * (tools/explain.c: the figures as measured, why a backend is not in the
 * group above it). */
static void explain_says(const fx *f, const char *line)
{
    char args[4096], *text = NULL;
    snprintf(args, sizeof args, "select --explain=full --manifests '%s' --evidence '%s'", f->dir,
             f->ev);
    assert_int_equal(run(args, &text), 0);
    if (!strstr(text, line))
        fail_msg("select --explain=full does not say '%s':\n%s", line, text);
    free(text);
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
    assert_string_equal(g->measured_workload, "test"); /* ev()'s: its tok/s are that one's */
    assert_string_equal(selected(ctx, EDGERT_PRIORITY_SPEED, &evd), "test-good");
    assert_string_equal(evd, "measured");
    assert_string_equal(selected(ctx, EDGERT_PRIORITY_FIDELITY, &evd), "test-good");
    edgert_close(ctx);

    explain_says(f, "; workload test)");

    /* --no-evidence ignores it */
    ctx = open_fx(f, 1, NULL);
    assert_true(isnan(edgert_candidate_find(ctx, "test-good")->measured.decode_tokens_per_s));
    assert_null(edgert_candidate_find(ctx, "test-good")->measured_workload);
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
    while ((e = readdir(d))) {
        const size_t n = strlen(e->d_name);
        if (n > 5 && strcmp(e->d_name + n - 5, ".lock") == 0)
            continue; /* the stores' lock (evidence_store.c), kept by design */
        if (e->d_name[0] != '.' || strncmp(e->d_name, ".evidence", 9) == 0)
            files += e->d_name[0] != '.' ? 1 : 100;
    }
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

/* Names of the speed ranking, best first, into out ("a b c"), with the
 * decode group of each rank into groups[]. */
static void speed_ranking(edgert_ctx *ctx, char *out, size_t len, int *groups)
{
    edgert_selection *sel = NULL;
    char err[512];
    assert_int_equal(edgert_select(ctx, EDGERT_PRIORITY_SPEED, NULL, &sel, err, sizeof err),
                     EDGERT_OK);
    out[0] = '\0';
    for (size_t r = 0; r < edgert_selection_count(sel); r++) {
        const edgert_candidate *c = edgert_candidate_at(ctx, edgert_selection_index(sel, r));
        snprintf(out + strlen(out), len - strlen(out), "%s%s", r ? " " : "", c->name);
        groups[r] = edgert_selection_decode_group(sel, r);
    }
    assert_int_equal(edgert_selection_decode_group(sel, edgert_selection_count(sel)), -1);
    edgert_selection_free(sel);
    assert_int_equal(edgert_select(ctx, EDGERT_PRIORITY_FIDELITY, NULL, &sel, err, sizeof err),
                     EDGERT_OK);
    assert_int_equal(edgert_selection_decode_group(sel, 0), -1);
    edgert_selection_free(sel);
}

static void store(fx *f, const edgert_evidence *items, size_t n)
{
    edgert_ctx *ctx = open_fx(f, 0, NULL);
    char err[512];
    assert_int_equal(edgert_evidence_store(ctx, NULL, items, n, err, sizeof err), EDGERT_OK);
    edgert_close(ctx);
}

/* keep_unmeasured: a fidelity measured apart (edgert run --compare --store)
 * joins calibrate's entry instead of replacing it: the rate, its range and
 * its series stay (test-good's and test-fast's are still one series), the
 * verdict stays, and the source is named; a later item with a rate and no
 * fidelity keeps that fidelity and its source; an item without the flag
 * replaces the whole entry again; a flag other than 0 or 1 is refused. */
static void test_keep_unmeasured(void **state)
{
    fx *f = *state;
    edgert_evidence cal[2] = {evs("test-good", 10.0, 9.0, 11.0),
                              evs("test-fast", 20.0, 19.0, 21.0)};
    cal[0].decode_rounds_repeated = 2; /* two rounds measured again: kept with the rate */
    store(f, cal, 2);
    edgert_evidence fid = ev("test-good", NAN, 0.7, 0.2, -1);
    fid.top1_tokens = 768;
    fid.keep_unmeasured = 1;
    fid.fidelity_source = "model /m, 12 prompts x 64 tokens";
    store(f, &fid, 1);
    edgert_ctx *ctx = open_fx(f, 0, NULL);
    const edgert_candidate *g = edgert_candidate_find(ctx, "test-good"),
                           *k = edgert_candidate_find(ctx, "test-fast");
    assert_true(g->measured.decode_tokens_per_s == 10.0);
    assert_true(g->measured_decode_min == 9.0 && g->measured_decode_max == 11.0);
    assert_int_equal(g->measured_rounds_repeated, 2);
    assert_int_equal(k->measured_rounds_repeated, 0);
    assert_string_equal(g->measured_series, k->measured_series);
    assert_true(g->measured.top1_agreement == 0.7 && g->measured.kl_mean == 0.2);
    assert_int_equal(g->measured_top1_tokens, 768);
    assert_true(g->eligible); /* the verdict kept: correct -1 keeps calibrate's 1 */
    assert_string_equal(g->measured_fidelity_source, "model /m, 12 prompts x 64 tokens");
    assert_null(k->measured_fidelity_source);
    edgert_close(ctx);
    explain_says(f, "; top-1 and KL from model /m, 12 prompts x 64 tokens)");
    explain_says(f, " [rounds 9.00..11.00; contended rounds measured again]");
    /* a rate, no fidelity: the model's fidelity stays */
    edgert_evidence rate = ev("test-good", 12.0, NAN, NAN, -1);
    rate.keep_unmeasured = 1;
    store(f, &rate, 1);
    ctx = open_fx(f, 0, NULL);
    g = edgert_candidate_find(ctx, "test-good");
    assert_true(g->measured.decode_tokens_per_s == 12.0 && g->measured.top1_agreement == 0.7);
    assert_string_equal(g->measured_fidelity_source, "model /m, 12 prompts x 64 tokens");
    edgert_close(ctx);
    /* without the flag: replaced whole */
    store(f, cal, 1);
    ctx = open_fx(f, 0, NULL);
    g = edgert_candidate_find(ctx, "test-good");
    assert_true(g->measured.top1_agreement == 0.9 && !g->measured_fidelity_source);
    char err[512];
    fid.keep_unmeasured = 2;
    assert_int_equal(edgert_evidence_store(ctx, NULL, &fid, 1, err, sizeof err), EDGERT_E_USAGE);
    assert_non_null(strstr(err, "keep_unmeasured"));
    edgert_close(ctx);
}

/* Three backends for the decode groups: test-three reuses test-good's
 * library (plugin_name); declared prefill 500 (good), 100 (fast), 900
 * (three). */
static void three_backends(fx *f)
{
    char lib[4200], cmd[9000];
    snprintf(cmd, sizeof cmd, "cp '%s/tp_good.so' '%s/tp_three.so'", f->dir, f->dir);
    assert_int_equal(system(cmd), 0);
    const char *man[3][3] = {{"test-good", "tp_good", "500"},
                             {"test-fast", "tp_fast", "100"},
                             {"test-three", "tp_three", "900"}};
    for (int i = 0; i < 3; i++) {
        char file[64], extra[256];
        snprintf(lib, sizeof lib, "%s/%s.so", f->dir, man[i][1]);
        snprintf(file, sizeof file, "%s.yaml", man[i][0]);
        snprintf(extra, sizeof extra,
                 "%sdeclared: {decode_tokens_per_s: 50, prefill_gflops: %s, "
                 "measured_on: \"test\"}\n",
                 i == 2 ? "plugin_name: test-good\n" : "", man[i][2]);
        free(tu_manifest(f->dir, file, man[i][0], lib, NULL, extra));
    }
}

/* Store fast, good, three (each median with its rounds' range), then rank
 * for speed into out and groups g. */
static void rank3(fx *f, const double (*r)[3], char *out, size_t len, int *g)
{
    edgert_evidence a[3] = {evs("test-fast", r[0][0], r[0][1], r[0][2]),
                            evs("test-good", r[1][0], r[1][1], r[1][2]),
                            evs("test-three", r[2][0], r[2][1], r[2][2])};
    store(f, a, 3);
    edgert_ctx *ctx = open_fx(f, 0, NULL);
    speed_ranking(ctx, out, len, g);
    edgert_close(ctx);
}


/* Rank r's account (edgert_selection_reason) for priority p over the
 * fixture and its evidence; `series` is cleared (it lives in the handle). */
static edgert_rank_reason reason_at(fx *f, edgert_priority p, size_t r)
{
    edgert_ctx *ctx = open_fx(f, 0, NULL);
    edgert_selection *sel = NULL;
    char err[512];
    assert_int_equal(edgert_select(ctx, p, NULL, &sel, err, sizeof err), EDGERT_OK);
    edgert_rank_reason w = {.struct_size = sizeof w};
    assert_int_equal(edgert_selection_reason(sel, r, &w), EDGERT_OK);
    edgert_selection_free(sel);
    edgert_close(ctx);
    w.series = NULL;
    return w;
}

/* Decode rates each within the other's rounds cannot be told apart:
 * prefill decides inside such a group, and the groups hold whatever order
 * the figures come in. */
static void test_decode_groups(void **state)
{
    fx *f = *state;
    char out[256];
    int g[8];
    three_backends(f);

    /* each median within the other's rounds: the slower median with the
     * faster prefill first */
    rank3(f, (const double[3][3]){{101, 97, 103}, {100, 95, 104}, {80, 79, 81}}, out, 256, g);
    assert_string_equal(out, "test-good test-fast test-three");
    assert_int_equal(g[0], g[1]);
    assert_int_not_equal(g[1], g[2]);
    edgert_ctx *ctx = open_fx(f, 0, NULL);
    const edgert_candidate *good = edgert_candidate_find(ctx, "test-good");
    assert_true(from_evidence(good, f));
    assert_true(good->measured_decode_min == 95.0 && good->measured_decode_max == 104.0);
    edgert_close(ctx);
    /* the selector's account: prefill decided inside the group, the decode
     * figure (outside good's rounds) below it */
    edgert_rank_reason w = reason_at(f, EDGERT_PRIORITY_SPEED, 1);
    assert_int_equal(w.decider, EDGERT_DECIDER_PREFILL);
    assert_true(w.group_first == 0 && w.group_last == 1);
    assert_true(w.decode == 101.0 && w.decode_lo == 97.0 && w.decode_hi == 103.0);
    assert_true(w.decode_measured == 1 && w.calibrated && !w.quick);
    assert_string_equal(w.source, "calibrate");
    assert_int_equal(w.split, EDGERT_SPLIT_NONE);
    w = reason_at(f, EDGERT_PRIORITY_SPEED, 2);
    assert_int_equal(w.decider, EDGERT_DECIDER_DECODE);
    assert_true(w.group_first == 2 && w.group_last == 2);
    assert_int_equal(w.split, EDGERT_SPLIT_MEDIAN_OUTSIDE);
    assert_int_equal(w.split_rank, 0);

    /* apart (fast's median above good's rounds): the medians decide */
    rank3(f, (const double[3][3]){{101, 100.8, 103}, {100, 99, 100.5}, {80, 79, 81}}, out, 256, g);
    assert_string_equal(out, "test-fast test-good test-three");
    assert_int_not_equal(g[0], g[1]);
    explain_says(f, "decode rounds: not one group with rank 1: its median 100.00 lies outside "
                    "test-fast's rounds [100.80..103.00]");
    w = reason_at(f, EDGERT_PRIORITY_SPEED, 1);
    assert_int_equal(w.decider, EDGERT_DECIDER_DECODE);
    assert_true(w.split == EDGERT_SPLIT_MEDIAN_OUTSIDE && w.split_rank == 0);
    /* good's median within fast's rounds, fast's outside good's: the other
     * half of the test */
    rank3(f, (const double[3][3]){{101, 100, 103}, {100.5, 100.2, 100.8}, {80, 79, 81}}, out,
          256, g);
    assert_string_equal(out, "test-fast test-good test-three");
    w = reason_at(f, EDGERT_PRIORITY_SPEED, 1);
    assert_true(w.split == EDGERT_SPLIT_RANGE_EXCLUDES && w.split_rank == 0);
    explain_says(f, "decode rounds: not one group with rank 1: test-fast's median 101.00 lies "
                    "outside these rounds [100.20..100.80]");
    /* by a hair: the figures get the decimals that tell them apart */
    rank3(f, (const double[3][3]){{32.9, 31.844, 33.39}, {31.837, 31.49, 32.9}, {10, 9, 11}}, out,
          256, g);
    assert_string_equal(out, "test-fast test-good test-three");
    explain_says(f, "its median 31.837 lies outside test-fast's rounds [31.844..33.390]");

    /* one busy round stretched good's range down over three's: the ranges
     * overlap, but good's median is far above three's rounds, so three's
     * prefill (900) must not lift it over good */
    rank3(f, (const double[3][3]){{50, 49, 51}, {100, 60, 101}, {80, 79, 81}}, out, 256, g);
    assert_string_equal(out, "test-good test-three test-fast");

    /* a chain: fast and good hold each other's medians, three and fast
     * too, but three's median is below good's rounds: {fast, good} then
     * {three}, so three's prefill does not lift it over them (a group that
     * only had to agree with its first member would have ranked it first) */
    rank3(f, (const double[3][3]){{101, 98, 104}, {100, 99.5, 101.5}, {99.4, 97, 101.2}}, out,
          256, g);
    assert_string_equal(out, "test-good test-fast test-three");
    assert_int_equal(g[0], g[1]);
    assert_int_not_equal(g[1], g[2]);
    explain_says(f, "decode rounds: not one group with ranks 1-2: its median 99.40 lies "
                    "outside test-good's rounds [99.50..101.50]");
    w = reason_at(f, EDGERT_PRIORITY_SPEED, 2);
    assert_true(w.split == EDGERT_SPLIT_MEDIAN_OUTSIDE && w.split_rank == 0);

    /* a merge keeps the ranges of the entries it does not replace */
    edgert_evidence one = evs("test-three", 99.4, 97.0, 101.2);
    store(f, &one, 1);
    ctx = open_fx(f, 0, NULL);
    good = edgert_candidate_find(ctx, "test-good");
    assert_true(good->measured_decode_min == 99.5 && good->measured_decode_max == 101.5);
    edgert_close(ctx);

    /* a backend without a range between two that would group closes the
     * group: good's prefill does not lift it over three */
    rank3(f, (const double[3][3]){{101, 97, 103}, {100, 95, 104}, {100.5, NAN, NAN}}, out, 256,
          g);
    assert_string_equal(out, "test-fast test-three test-good");
    /* no range: the decode figure decided, and no test could split */
    for (size_t r = 1; r < 3; r++) {
        w = reason_at(f, EDGERT_PRIORITY_SPEED, r);
        assert_true(w.decider == EDGERT_DECIDER_DECODE && w.split == EDGERT_SPLIT_NONE);
    }
}

/* Edit first contact's cached figure `key` of `backend` (every verdict file
 * in this process's cache naming it) to `value`: the figures the real test
 * plugins measure are whatever this machine gives. */
static void set_fc(const char *backend, const char *key, const char *value)
{
    char dir[4200], want[128], prefix[64];
    snprintf(prefix, sizeof prefix, "%s ", key);
    const size_t pl = strlen(prefix);
    const char *xdg = getenv("XDG_CACHE_HOME");
    assert_non_null(xdg);
    snprintf(dir, sizeof dir, "%s/edgert/first-contact", xdg);
    snprintf(want, sizeof want, "\nbackend %s\n", backend);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int edited = 0;
    while ((e = readdir(d))) {
        char path[4500], text[4096] = "", out[4200] = "";
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *fp = e->d_name[0] != '.' ? fopen(path, "r") : NULL;
        if (!fp)
            continue;
        text[fread(text, 1, sizeof text - 1, fp)] = '\0';
        fclose(fp);
        if (!strstr(text, want))
            continue;
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
            snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s\n",
                     strncmp(line, prefix, pl) == 0 ? prefix : "",
                     strncmp(line, prefix, pl) == 0 ? value : line);
        fp = fopen(path, "w");
        assert_non_null(fp);
        fputs(out, fp);
        fclose(fp);
        edited++;
    }
    closedir(d);
    assert_true(edited > 0);
}

/* The quick decode figure alone, without a range */
static void set_quick(const char *backend, const char *value)
{
    set_fc(backend, "decode_tokens_per_s", value);
    set_fc(backend, "decode_tokens_per_s_min", "nan");
    set_fc(backend, "decode_tokens_per_s_max", "nan");
    set_fc(backend, "read_gbs", "nan");
    set_fc(backend, "contended", ""); /* kept: not set aside as contended */
}

/* The quick figures whole: decode median, its calls' range, prefill; no
 * read beside them (compared as measured; set_fc "read_gbs" adds one). */
static void set_quick_all(const char *backend, const char *dec, const char *lo, const char *hi,
                          const char *prefill)
{
    set_fc(backend, "decode_tokens_per_s", dec);
    set_fc(backend, "decode_tokens_per_s_min", lo);
    set_fc(backend, "decode_tokens_per_s_max", hi);
    set_fc(backend, "prefill_gflops", prefill);
    set_fc(backend, "read_gbs", "nan");
}

/* Rank for speed: the names in rank order into out, the decode source of
 * each rank into src (up to 4), the decode groups into g. */
static void speed_pick(fx *f, char *out, size_t len, const char **src, int *g)
{
    edgert_ctx *ctx = open_fx(f, 0, NULL);
    edgert_selection *sel = NULL;
    char err[512];
    assert_int_equal(edgert_select(ctx, EDGERT_PRIORITY_SPEED, NULL, &sel, err, sizeof err),
                     EDGERT_OK);
    out[0] = '\0';
    for (size_t r = 0; r < edgert_selection_count(sel) && r < 4; r++) {
        const edgert_candidate *c = edgert_candidate_at(ctx, edgert_selection_index(sel, r));
        snprintf(out + strlen(out), len - strlen(out), "%s%s", r ? " " : "", c->name);
        src[r] = edgert_selection_decode_source(sel, r); /* static strings */
        g[r] = edgert_selection_decode_group(sel, r);
        /* the rate compared is the source's figure */
        double rate = edgert_selection_decode_rate(sel, r);
        double at = edgert_selection_decode_read_gbs(sel, r);
        if (strcmp(src[r], "first-contact") == 0 && isnan(at))
            assert_true(rate == c->first_contact_decode_tokens_per_s);
        else if (strcmp(src[r], "first-contact") == 0) /* at the tier's read rate */
            assert_true(rate ==
                        c->first_contact_decode_tokens_per_s * (at / c->first_contact_read_gbs));
        else if (strcmp(src[r], "calibrate") == 0)
            assert_true(rate == c->measured.decode_tokens_per_s);
    }
    assert_true(isnan(edgert_selection_decode_rate(sel, edgert_selection_count(sel))));
    edgert_selection_free(sel);
    edgert_close(ctx);
}

/* Whether test-good's and test-fast's calibrated figures are one series
 * (edgert_candidate.measured_series, both set). */
static void series_check(fx *f, int same)
{
    edgert_ctx *ctx = open_fx(f, 0, NULL);
    const char *a = edgert_candidate_find(ctx, "test-good")->measured_series,
               *b = edgert_candidate_find(ctx, "test-fast")->measured_series;
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(strcmp(a, b) == 0, same);
    edgert_close(ctx);
}

/* The evidence file as a version that predates series wrote it: no series,
 * test-good's entry measured at t_good and test-fast's at t_fast (each
 * entry's backend precedes its measured_at, which its series follows). */
static void set_evidence_times(fx *f, const char *t_good, const char *t_fast)
{
    char cmd[12000];
    snprintf(cmd, sizeof cmd,
             "sed -i -E -e 's/, \"series\": (\"[^\"]*\"|null)//' "
             "-e '/\"test-good\"/s/\"measured_at\": \"[^\"]*\"/\"measured_at\": \"%s\"/' "
             "-e '/\"test-fast\"/s/\"measured_at\": \"[^\"]*\"/\"measured_at\": \"%s\"/' "
             "'%s' && ! grep -q series '%s'",
             t_good, t_fast, f->ev, f->ev);
    assert_int_equal(system(cmd), 0);
}

/* After test_one_decode_source stored good's and fast's figures in one
 * call (good ranks first by them, fast by the quick figures): the same
 * figures from two runs (two store calls: two series, two memory-bandwidth
 * windows) are not one measurement, so both by their quick figures again. */
static void two_series(fx *f, const edgert_evidence *fast)
{
    const char *src[4];
    char out[256];
    int g[4];
    store(f, fast, 1);
    speed_pick(f, out, sizeof out, src, g);
    assert_string_equal(out, "test-fast test-good test-ref");
    assert_string_equal(src[0], "first-contact");
    series_check(f, 0);
    /* written before series were: one store call's measured_at stands in */
    set_evidence_times(f, "2026-11-29T10:00:00Z", "2026-11-29T10:00:00Z");
    speed_pick(f, out, sizeof out, src, g);
    assert_string_equal(out, "test-good test-fast test-ref");
    assert_string_equal(src[0], "calibrate");
    series_check(f, 1);
    set_evidence_times(f, "2026-11-29T10:00:00Z", "2026-11-30T10:00:00Z");
    speed_pick(f, out, sizeof out, src, g);
    assert_string_equal(src[0], "first-contact");
    series_check(f, 0);
}

/* One source for every backend's measured decode rate in a tier: a
 * calibrated figure is never ranked against another backend's quick one. */
static void test_one_decode_source(void **state)
{
    fx *f = *state;
    const char *src[4];
    char out[256];
    int g[4];
    /* this test edits first contact's cache: its own, in the fixture */
    char cache[4200];
    snprintf(cache, sizeof cache, "%s/cache", f->dir);
    assert_int_equal(setenv("XDG_CACHE_HOME", cache, 1), 0);
    /* a reference backend on test-good's library: a tier of its own */
    char lib[4200];
    snprintf(lib, sizeof lib, "%s/tp_good.so", f->dir);
    free(tu_manifest(f->dir, "test-ref.yaml", "test-ref", lib, NULL,
                     "plugin_name: test-good\nreference: true\n"));
    edgert_ctx *ctx = open_fx(f, 0, NULL); /* first contact: the quick figures, cached */
    const edgert_candidate *c = edgert_candidate_find(ctx, "test-good");
    assert_false(isnan(c->first_contact_decode_tokens_per_s));
    assert_true(c->first_contact_decode_tokens_per_s == c->measured.decode_tokens_per_s);
    edgert_close(ctx);
    set_quick("test-good", "10");
    set_quick("test-fast", "20");
    set_quick("test-ref", "5");
    speed_pick(f, out, sizeof out, src, g); /* nothing calibrated */
    assert_string_equal(out, "test-fast test-good test-ref");
    assert_string_equal(src[0], "first-contact");

    /* good calibrated (1000, rounds 900..1100), fast not (a plugin added
     * or rebuilt since): both by their quick figures, so fast, and no
     * decode groups from calibrate's rounds */
    edgert_evidence good = evs("test-good", 1000.0, 900.0, 1100.0);
    store(f, &good, 1);
    ctx = open_fx(f, 0, NULL);
    c = edgert_candidate_find(ctx, "test-good");
    assert_true(from_evidence(c, f) && c->measured.decode_tokens_per_s == 1000.0);
    assert_true(c->first_contact_decode_tokens_per_s == 10.0); /* kept beside it */
    edgert_close(ctx);
    speed_pick(f, out, sizeof out, src, g);
    assert_string_equal(out, "test-fast test-good test-ref");
    assert_string_equal(src[0], "first-contact");
    assert_string_equal(src[1], "first-contact");
    assert_int_not_equal(g[0], g[1]);

    /* fast calibrated without a decode rate: still only its quick figure */
    edgert_evidence fast_nan = ev("test-fast", NAN, 0.9, 0.01, 1);
    store(f, &fast_nan, 1);
    speed_pick(f, out, sizeof out, src, g);
    assert_string_equal(out, "test-fast test-good test-ref");
    assert_string_equal(src[0], "first-contact");

    /* both calibrated in one run (one store call: one series): calibrate's
     * figures; the reference, in a tier of its own and never calibrated,
     * keeps its quick figure without changing theirs */
    edgert_evidence fast = ev("test-fast", 100.0, 0.9, 0.01, 1);
    edgert_evidence both[2] = {good, fast};
    store(f, both, 2);
    speed_pick(f, out, sizeof out, src, g);
    assert_string_equal(out, "test-good test-fast test-ref");
    assert_string_equal(src[0], "calibrate");
    assert_string_equal(src[1], "calibrate");
    assert_string_equal(src[2], "first-contact");
    series_check(f, 1);

    two_series(f, &fast);

    /* fast's calibrate evidence gone, and good has no quick figure (its
     * first contact measured nothing): the sources cannot be made one, and
     * the selection says so */
    assert_int_equal(unlink(f->ev), 0);
    store(f, &good, 1);
    set_quick("test-good", "nan");
    speed_pick(f, out, sizeof out, src, g);
    assert_string_equal(out, "test-good test-fast test-ref");
    assert_string_equal(src[0], "mixed");
    /* there a calibrated rate (rounds) and a quick one (calls) never share
     * a decode group, however close: fast's median in good's rounds and
     * good's in fast's calls */
    set_quick_all("test-fast", "1000", "950", "1050", "5000");
    speed_pick(f, out, sizeof out, src, g);
    assert_string_equal(src[0], "mixed");
    assert_int_not_equal(g[0], g[1]);

    /* no evidence at all: declared (fast declares 90, good 50) */
    ctx = open_fx(f, 1, NULL);
    assert_true(isnan(edgert_candidate_find(ctx, "test-fast")->first_contact_decode_tokens_per_s));
    edgert_selection *sel = NULL;
    char err[512];
    assert_int_equal(edgert_select(ctx, EDGERT_PRIORITY_SPEED, NULL, &sel, err, sizeof err),
                     EDGERT_OK);
    assert_string_equal(edgert_selection_decode_source(sel, 0), "declared");
    assert_string_equal(edgert_selection_selected(sel)->name, "test-fast");
    edgert_selection_free(sel);
    edgert_close(ctx);
    assert_string_equal(edgert_selection_decode_source(NULL, 0), "declared");
}

/* Point the cache at the fixture's folder and meet both plugins there, so
 * their first-contact verdicts are files set_fc can edit. */
static void meet_in_cache(fx *f)
{
    char cache[4200];
    snprintf(cache, sizeof cache, "%s/cache", f->dir);
    assert_int_equal(setenv("XDG_CACHE_HOME", cache, 1), 0);
    edgert_close(open_fx(f, 0, NULL));
}

/* A tier compared by first contact is grouped by its calls' ranges, as
 * calibrate's rounds are, and first contact's prefill decides inside a
 * group, never calibrate's figure of one member. */
static void test_first_contact_groups(void **state)
{
    fx *f = *state;
    const char *src[4];
    char out[256];
    int g[4];
    meet_in_cache(f);
    edgert_ctx *ctx;
    /* each median within the other's calls: one group, prefill decides */
    set_quick_all("test-good", "10", "9", "11", "100");
    set_quick_all("test-fast", "10.5", "9.5", "11.5", "50");
    speed_pick(f, out, sizeof out, src, g);
    assert_string_equal(out, "test-good test-fast");
    assert_string_equal(src[0], "first-contact");
    assert_int_equal(g[0], g[1]);
    ctx = open_fx(f, 0, NULL);
    const edgert_candidate *c = edgert_candidate_find(ctx, "test-fast");
    assert_true(c->first_contact_decode_min == 9.5 && c->first_contact_decode_max == 11.5);
    assert_true(c->first_contact_prefill_gflops == 50.0);
    edgert_close(ctx);
    set_fc("test-fast", "prefill_gflops", "200");
    speed_pick(f, out, sizeof out, src, g);
    assert_string_equal(out, "test-fast test-good");
    /* good calibrated alone (prefill 1000): the tier stays first contact's,
     * and so does the prefill compared */
    edgert_evidence good = evs("test-good", 10.0, 9.0, 11.0);
    good.prefill_gflops = 1000.0;
    store(f, &good, 1);
    speed_pick(f, out, sizeof out, src, g);
    assert_string_equal(out, "test-fast test-good");
    assert_string_equal(src[0], "first-contact");
    assert_int_equal(g[0], g[1]);
    /* fast's median beyond good's calls: no group, decode decides */
    set_quick_all("test-fast", "12", "11.5", "12.5", "50");
    speed_pick(f, out, sizeof out, src, g);
    assert_string_equal(out, "test-fast test-good");
    assert_int_not_equal(g[0], g[1]);
    /* a range that does not hold its median is no range */
    set_quick_all("test-fast", "10.5", "10.6", "11.5", "50");
    speed_pick(f, out, sizeof out, src, g);
    assert_string_equal(out, "test-fast test-good");
    assert_int_not_equal(g[0], g[1]);
    ctx = open_fx(f, 0, NULL);
    assert_true(isnan(edgert_candidate_find(ctx, "test-fast")->first_contact_decode_min));
    edgert_close(ctx);
}

/* First contacts met memory at different moments: a tier compared by
 * them is compared at one read rate, the median of the reads beside their
 * calls, each figure and its range scaled by it over its own read; a
 * figure without a read (a kernel its arithmetic binds) is compared as
 * measured. */
static void test_first_contact_read_rate(void **state)
{
    fx *f = *state;
    const char *src[4];
    char out[256];
    int g[4];
    meet_in_cache(f);
    edgert_ctx *ctx;
    /* as measured, fast is ahead: 12 against 10, apart */
    set_quick_all("test-good", "10", "9.5", "10.5", "100");
    set_quick_all("test-fast", "12", "11.5", "12.5", "100");
    speed_pick(f, out, sizeof out, src, g);
    assert_string_equal(out, "test-fast test-good");
    /* but fast met a 30 GB/s read, good a 20 GB/s one: at their median,
     * 25 GB/s, good is 12.5 [11.875..13.125], fast 10 [9.583..10.417] */
    set_fc("test-good", "read_gbs", "20");
    set_fc("test-fast", "read_gbs", "30");
    speed_pick(f, out, sizeof out, src, g);
    assert_string_equal(out, "test-good test-fast");
    assert_string_equal(src[0], "first-contact");
    assert_int_not_equal(g[0], g[1]);
    ctx = open_fx(f, 0, NULL);
    edgert_selection *sel = NULL;
    char err[512];
    assert_int_equal(edgert_select(ctx, EDGERT_PRIORITY_SPEED, NULL, &sel, err, sizeof err),
                     EDGERT_OK);
    double lo, hi;
    assert_true(edgert_candidate_find(ctx, "test-good")->first_contact_read_gbs == 20.0);
    assert_true(edgert_selection_decode_read_gbs(sel, 0) == 25.0);
    assert_true(edgert_selection_decode_read_gbs(sel, 1) == 25.0);
    assert_true(fabs(edgert_selection_decode_rate(sel, 0) - 12.5) < 1e-12);
    assert_int_equal(edgert_selection_decode_range(sel, 0, &lo, &hi), 1);
    assert_true(fabs(lo - 11.875) < 1e-12 && fabs(hi - 13.125) < 1e-12);
    assert_true(fabs(edgert_selection_decode_rate(sel, 1) - 10.0) < 1e-12);
    assert_int_equal(edgert_selection_decode_range(NULL, 0, &lo, &hi), 0);
    assert_true(isnan(lo) && isnan(hi));
    assert_int_equal(edgert_selection_decode_range(sel, 2, &lo, &hi), 0);
    assert_true(isnan(edgert_selection_decode_read_gbs(sel, 2)));
    edgert_selection_free(sel);
    edgert_close(ctx);
    /* no evidence file yet: the cache's is read, on the handles' one thread
     * (a verdict's quick figures are of its thread count) */
    char args[4200], *text = NULL;
    snprintf(args, sizeof args, "select --explain=full --threads 1 --manifests '%s'", f->dir);
    assert_int_equal(run(args, &text), 0);
    if (!strstr(text, "test-good, test-fast compared at one read rate, 25.0 GB/s") ||
        !strstr(text, "[calls 9.50..10.50] beside a 20.0 GB/s read"))
        fail_msg("select --explain=full does not give the read rates:\n%s", text);
    free(text);
    /* one read only: its median is its own, so both stand as measured
     * (good's scale is 1, fast has none to scale by) */
    set_fc("test-fast", "read_gbs", "nan");
    speed_pick(f, out, sizeof out, src, g);
    assert_string_equal(out, "test-fast test-good");
    /* calibrated figures of one series are not scaled, whatever the reads */
    set_fc("test-fast", "read_gbs", "30");
    edgert_evidence e[2] = {evs("test-good", 10.0, 9.5, 10.5), evs("test-fast", 12.0, 11.5, 12.5)};
    store(f, e, 2);
    speed_pick(f, out, sizeof out, src, g);
    assert_string_equal(out, "test-fast test-good");
    assert_string_equal(src[0], "calibrate");
}

/* Rank for fidelity after storing good (top-1 0.75, KL 0.10) and fast
 * (top-1 0.78, KL 0.20) counted over tg and tf tokens (0: not known):
 * names in rank order into out, and whether the two share a fidelity group. */
static int fidelity_pick(fx *f, unsigned tg, unsigned tf, char *out, size_t len)
{
    edgert_evidence e[2] = {ev("test-good", 10.0, 0.75, 0.10, 1),
                            ev("test-fast", 10.0, 0.78, 0.20, 1)};
    e[0].top1_tokens = tg;
    e[1].top1_tokens = tf;
    store(f, e, 2);
    edgert_ctx *ctx = open_fx(f, 0, NULL);
    assert_int_equal(edgert_candidate_find(ctx, "test-fast")->measured_top1_tokens, tf);
    edgert_selection *sel = NULL;
    char err[512];
    assert_int_equal(edgert_select(ctx, EDGERT_PRIORITY_FIDELITY, NULL, &sel, err, sizeof err),
                     EDGERT_OK);
    snprintf(out, len, "%s %s", edgert_candidate_at(ctx, edgert_selection_index(sel, 0))->name,
             edgert_candidate_at(ctx, edgert_selection_index(sel, 1))->name);
    int same = edgert_selection_fidelity_group(sel, 0) == edgert_selection_fidelity_group(sel, 1);
    assert_true(edgert_selection_fidelity_group(sel, 0) >= 0);
    assert_int_equal(edgert_selection_fidelity_group(sel, 2), -1); /* past the end */
    assert_int_equal(edgert_selection_decode_group(sel, 0), -1);
    edgert_selection_free(sel);
    assert_int_equal(edgert_select(ctx, EDGERT_PRIORITY_SPEED, NULL, &sel, err, sizeof err),
                     EDGERT_OK);
    assert_int_equal(edgert_selection_fidelity_group(sel, 0), -1);
    edgert_selection_free(sel);
    edgert_close(ctx);
    return same;
}

/* Top-1 agreements apart by less than their sampling noise cannot be told
 * apart: mean KL decides between them. Apart by more, or without token
 * counts (a caller's figures, a manifest's), top-1 decides as before. */
static void test_fidelity_groups(void **state)
{
    fx *f = *state;
    char out[256];
    /* 64 tokens each: 0.03 apart, two standard errors 0.15 */
    assert_true(fidelity_pick(f, 64, 64, out, sizeof out));
    assert_string_equal(out, "test-good test-fast");
    edgert_rank_reason w = reason_at(f, EDGERT_PRIORITY_FIDELITY, 1);
    assert_true(w.decider == EDGERT_DECIDER_KL && w.group_first == 0 && w.group_last == 1);
    assert_true(w.top1 == 0.78 && w.top1_measured == 1 && w.kl == 0.20 && w.kl_measured == 1);
    /* 100000 tokens each: two standard errors 0.004 */
    assert_false(fidelity_pick(f, 100000, 100000, out, sizeof out));
    assert_string_equal(out, "test-fast test-good");
    w = reason_at(f, EDGERT_PRIORITY_FIDELITY, 1);
    assert_true(w.decider == EDGERT_DECIDER_TOP1 && w.group_first == 1 && w.group_last == 1);
    /* no token counts, or one missing: exact, as before */
    assert_false(fidelity_pick(f, 0, 0, out, sizeof out));
    assert_string_equal(out, "test-fast test-good");
    assert_false(fidelity_pick(f, 64, 0, out, sizeof out));
    assert_string_equal(out, "test-fast test-good");
}

/* What is not a range is never used as one: a caller built against the
 * version-1 header, zeros from an initializer, a range that does not
 * bracket its median or goes below 0 (refused when stored), and the same
 * edited into the file (refused when read). Each case is one where the
 * range, if used, would group fast and good and put good first. */
static void test_decode_ranges_refused(void **state)
{
    fx *f = *state;
    char out[256], err[512];
    int g[8];
    three_backends(f);

    /* the old header's struct: sizeof was the offset of the new fields */
    const uint32_t old_size = (uint32_t)offsetof(edgert_evidence, decode_tokens_per_s_min);
    edgert_evidence v1[3] = {evs("test-fast", 101.0, 97.0, 103.0),
                             evs("test-good", 100.0, 95.0, 104.0),
                             evs("test-three", 80.0, 79.0, 81.0)};
    _Alignas(8) unsigned char packed[3 * sizeof(edgert_evidence)];
    for (int i = 0; i < 3; i++) {
        v1[i].struct_size = old_size;
        memcpy(packed + (size_t)i * old_size, &v1[i], old_size);
    }
    edgert_ctx *ctx = open_fx(f, 0, NULL);
    assert_int_equal(edgert_evidence_store(ctx, NULL, (const edgert_evidence *)(void *)packed, 3,
                                           err, sizeof err),
                     EDGERT_OK);
    edgert_close(ctx);
    ctx = open_fx(f, 0, NULL);
    assert_true(isnan(edgert_candidate_find(ctx, "test-good")->measured_decode_min));
    speed_ranking(ctx, out, sizeof out, g);
    assert_string_equal(out, "test-fast test-good test-three");
    /* the named version-1 size is still accepted (one item: no stride) */
    edgert_evidence one = evs("test-good", 100.0, 95.0, 104.0);
    one.struct_size = (uint32_t)EDGERT_EVIDENCE_V1_SIZE;
    assert_int_equal(edgert_evidence_store(ctx, NULL, &one, 1, err, sizeof err), EDGERT_OK);
    edgert_close(ctx);
    ctx = open_fx(f, 0, NULL);
    assert_true(isnan(edgert_candidate_find(ctx, "test-good")->measured_decode_min));
    /* a newer header's larger struct: its unknown bytes zero, or refused
     * naming the item and the first non-zero byte (nothing stored) */
    struct grown {
        edgert_evidence e;
        unsigned char later[16];
    } gr[2] = {{.e = evs("test-fast", 90.0, 89.0, 91.0)},
               {.e = evs("test-good", 91.0, 90.0, 92.0)}};
    gr[0].e.struct_size = gr[1].e.struct_size = sizeof gr[0];
    gr[1].later[5] = 1;
    assert_int_equal(edgert_evidence_store(ctx, NULL, &gr[0].e, 2, err, sizeof err),
                     EDGERT_E_USAGE);
    char want[96];
    snprintf(want, sizeof want, "item 1.struct_size %zu is larger than this library's "
             "edgert_evidence", sizeof gr[0]);
    assert_non_null(strstr(err, want));
    snprintf(want, sizeof want, "byte %zu is not zero", offsetof(struct grown, later) + 5);
    assert_non_null(strstr(err, want));
    assert_true(isnan(edgert_candidate_find(ctx, "test-good")->measured_decode_min));
    gr[1].later[5] = 0;
    assert_int_equal(edgert_evidence_store(ctx, NULL, &gr[0].e, 2, err, sizeof err), EDGERT_OK);
    edgert_close(ctx);
    ctx = open_fx(f, 0, NULL);
    assert_true(edgert_candidate_find(ctx, "test-good")->measured_decode_min == 90.0);
    edgert_close(ctx);

    /* fast's range below its median, three's zeros; then good's below 0 */
    rank3(f, (const double[3][3]){{101, 95, 100.5}, {100, 99, 101.5}, {80, 0, 0}}, out, 256, g);
    assert_string_equal(out, "test-fast test-good test-three");
    ctx = open_fx(f, 0, NULL);
    assert_true(isnan(edgert_candidate_find(ctx, "test-fast")->measured_decode_max));
    assert_true(isnan(edgert_candidate_find(ctx, "test-three")->measured_decode_max));
    assert_false(isnan(edgert_candidate_find(ctx, "test-good")->measured_decode_max));
    edgert_close(ctx);
    rank3(f, (const double[3][3]){{101, 97, 103}, {100, -5, 104}, {80, 79, 81}}, out, 256, g);
    assert_string_equal(out, "test-fast test-good test-three");

    /* stored as a group, then fast's max edited below its median */
    rank3(f, (const double[3][3]){{101, 95.5, 103}, {100, 99, 101.5}, {80, 79, 81}}, out, 256, g);
    assert_string_equal(out, "test-good test-fast test-three");
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "sed -i 's/\"decode_tokens_per_s_max\": 103,/\"decode_tokens_per_s_max\": 100.7,/' "
             "'%s' && grep -q 100.7 '%s'", f->ev, f->ev);
    assert_int_equal(system(cmd), 0);
    ctx = open_fx(f, 0, NULL);
    assert_true(isnan(edgert_candidate_find(ctx, "test-fast")->measured_decode_max));
    speed_ranking(ctx, out, sizeof out, g);
    assert_string_equal(out, "test-fast test-good test-three");
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
    /* a rebuild, as a linker makes it: a new file, here with trailing bytes
     * (still a loadable ELF, another hash); one rewritten in place would be
     * LIBRARY_REWRITTEN in this process, which loaded the old above */
    char cmd[8600];
    snprintf(cmd, sizeof cmd, "cd '%s' && cp tp_good.so .new && printf rebuilt >> .new && "
             "mv .new tp_good.so", f->dir);
    assert_int_equal(system(cmd), 0);
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
        unsigned line = 0;
        for (size_t d = 0; d < edgert_diag_count(ctx); d++)
            if (edgert_diag_at(ctx, d)->level == EDGERT_LOG_WARN &&
                edgert_diag_at(ctx, d)->file &&
                strstr(edgert_diag_at(ctx, d)->file, "evidence.json")) {
                warned = 1;
                line = edgert_diag_at(ctx, d)->line;
            }
        assert_true(warned);
        if (i == 0 && line == 0) /* a syntax error: at its line, as a manifest's */
            fail_msg("the truncated evidence file's warning has no line");
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

/* Whether a warning-level diagnostic of ctx names `file` and says `what`. */
static int warned(const edgert_ctx *ctx, const char *file, const char *what)
{
    for (size_t i = 0; i < edgert_diag_count(ctx); i++) {
        const edgert_diag *d = edgert_diag_at(ctx, i);
        if (d->level == EDGERT_LOG_WARN && d->file && strcmp(d->file, file) == 0 &&
            strstr(d->message, what))
            return 1;
    }
    return 0;
}

/* The workload string of `backend`'s entry, read back with libyaml as the
 * core reads it; malloc'd, or NULL when the file does not parse. */
static char *stored_workload(const char *path, const char *backend)
{
    er_yaml y;
    er_diags d = {0};
    char *w = NULL;
    if (er_yaml_load(&y, path, &d) != EDGERT_OK) {
        print_message("%s: %s\n", path, d.count ? d.items[0].message : "?");
        er_diags_free(&d);
        return NULL;
    }
    yaml_node_t *entries = er_yaml_get(&y, er_yaml_root(&y), "entries");
    for (yaml_node_item_t *it = entries->data.sequence.items.start;
         it < entries->data.sequence.items.top; it++) {
        yaml_node_t *e = er_yaml_node(&y, *it);
        yaml_node_t *b = er_yaml_get(&y, e, "backend"), *v = er_yaml_get(&y, e, "workload");
        if (b && v && strcmp((const char *)b->data.scalar.value, backend) == 0)
            w = strdup((const char *)v->data.scalar.value);
    }
    er_yaml_free(&y);
    er_diags_free(&d);
    return w;
}

#define FFFD "\xef\xbf\xbd"

/* Names holding what libyaml refuses (C0, DEL, C1, U+FFFE/F), folds (NEL,
 * U+2028/9) or cannot decode (bytes that are not UTF-8): the file reads back
 * after the store and after a second store that copies the entry through
 * the reader and the writer, and the name comes back as written, invalid
 * bytes as U+FFFD. Before, one such name made the whole cache corrupt. */
static void test_hostile_names_round_trip(void **state)
{
    fx *f = *state;
    static const struct {
        const char *in, *out;
    } names[] = {
        {"del \x7f", NULL},
        {"c1 \xc2\x85 \xc2\x9b[31m \xc2\x9f", NULL},
        {"esc \x1b[2J bell \a nul-free \x01\x1f", NULL},
        {"nonchars \xef\xbf\xbf \xef\xbf\xbe bom \xef\xbb\xbf", NULL},
        {"ls \xe2\x80\xa8 ps \xe2\x80\xa9", NULL},
        {"quote \" backslash \\ tab \t nl \n cr \r", NULL},
        {"utf8 caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80", NULL},
        {"bad \xff|\xc0\x80|\xed\xa0\x80|\xf4\x90\x80\x80|\xe2\x9c",
         "bad " FFFD "|" FFFD FFFD "|" FFFD FFFD FFFD "|" FFFD FFFD FFFD FFFD "|" FFFD FFFD},
    };
    char err[512];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *want = names[i].out ? names[i].out : names[i].in;
        edgert_ctx *ctx = open_fx(f, 0, NULL);
        edgert_evidence a = ev("test-good", 40.0 + (double)i, 1.0, 0.0, 1);
        edgert_evidence b = ev("test-fast", 30.0, 1.0, 0.0, 1);
        a.workload = names[i].in;
        assert_int_equal(edgert_evidence_store(ctx, NULL, &a, 1, err, sizeof err), EDGERT_OK);
        edgert_close(ctx);
        for (int pass = 0; pass < 2; pass++) {
            ctx = open_fx(f, 0, NULL);
            if (warned(ctx, f->ev, ""))
                fail_msg("name %zu: the evidence file does not read back", i);
            assert_true(fabs(edgert_candidate_find(ctx, "test-good")->measured
                                 .decode_tokens_per_s - (40.0 + (double)i)) < 1e-9);
            char *got = stored_workload(f->ev, "test-good");
            assert_non_null(got);
            if (strcmp(got, want) != 0)
                fail_msg("name %zu, pass %d: read back as '%s'", i, pass, got);
            free(got);
            /* the second pass reads the entry as copied by another store */
            assert_int_equal(edgert_evidence_store(ctx, NULL, &b, 1, err, sizeof err), EDGERT_OK);
            edgert_close(ctx);
        }
    }
}

/* The files of the evidence folder whose name starts with `prefix`. */
static int count_files(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)))
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d)
        closedir(d);
    return n;
}

/* A cache that cannot be read is moved aside before a store, never
 * overwritten (twice in the same second: two files), with a warning naming
 * both paths; the store then starts a new file. */
static void test_corrupt_moved_aside(void **state)
{
    fx *f = *state;
    char *cache = strdup(f->ev);
    *strrchr(cache, '/') = '\0';
    char cmd[8192], err[512];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", cache);
    assert_int_equal(system(cmd), 0);
    const char *bad[2] = {"{\"evidence_version\": 1, \"entries\": [{\"device\": \"\x7f\"}]}\n",
                          "{\"evidence_version\": 99, \"entries\": []}\n"};
    for (int i = 0; i < 2; i++) {
        free(tu_write(cache, "evidence.json", "%s", bad[i]));
        edgert_ctx *ctx = open_fx(f, 0, NULL);
        int told = warned(ctx, f->ev, "moves it aside"); /* when read */
        edgert_evidence a = ev("test-good", 5.0 + i, 1.0, 0.0, 1);
        assert_int_equal(edgert_evidence_store(ctx, NULL, &a, 1, err, sizeof err), EDGERT_OK);
        char aside[4400] = "";
        for (size_t d = 0; d < edgert_diag_count(ctx); d++) {
            const char *m = edgert_diag_at(ctx, d)->message, *p = strstr(m, "moved aside to ");
            if (edgert_diag_at(ctx, d)->level == EDGERT_LOG_WARN && p)
                snprintf(aside, sizeof aside, "%.*s", (int)strcspn(p + 15, ","), p + 15);
        }
        edgert_close(ctx);
        assert_int_equal(count_files(cache, "evidence.json.corrupt-"), i + 1);
        assert_non_null(strstr(aside, "/evidence.json.corrupt-"));
        FILE *fp = fopen(aside, "r");
        assert_non_null(fp);
        char buf[256] = "";
        buf[fread(buf, 1, sizeof buf - 1, fp)] = '\0';
        fclose(fp);
        assert_string_equal(buf, bad[i]); /* the old bytes, as they were */
        assert_true(told);
        ctx = open_fx(f, 0, NULL);
        assert_false(warned(ctx, f->ev, ""));
        assert_true(fabs(edgert_candidate_find(ctx, "test-good")->measured.decode_tokens_per_s -
                         (5.0 + i)) < 1e-9);
        edgert_close(ctx);
    }
    free(cache);
}

/* Two handles storing at once, each its own backend, over and over: every
 * store merges under the file's lock, so neither loses the other's last
 * entry (without the lock the second rename dropped the first store's
 * entries: a failed verify among them would have reopened its gate). */
typedef struct store_job {
    edgert_ctx *ctx;
    const char *backend;
    int failures;
} store_job;

#define STORES 24

static void *store_many(void *arg)
{
    store_job *j = arg;
    char err[512];
    for (int i = 1; i <= STORES; i++) {
        edgert_evidence e = ev(j->backend, (double)i, 0.9, 0.01, 1);
        if (edgert_evidence_store(j->ctx, NULL, &e, 1, err, sizeof err) != EDGERT_OK) {
            fprintf(stderr, "%s: %s\n", j->backend, err);
            j->failures++;
        }
    }
    return NULL;
}

static void test_concurrent_stores_keep_both(void **state)
{
    fx *f = *state;
    store_job jobs[2] = {{open_fx(f, 0, NULL), "test-good", 0},
                         {open_fx(f, 0, NULL), "test-fast", 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, store_many, &jobs[i]), 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        edgert_close(jobs[i].ctx);
        assert_int_equal(jobs[i].failures, 0);
    }
    edgert_ctx *ctx = open_fx(f, 0, NULL);
    for (int i = 0; i < 2; i++) {
        double got = edgert_candidate_find(ctx, jobs[i].backend)->measured.decode_tokens_per_s;
        if (!(got == (double)STORES))
            fail_msg("%s: %g tok/s in the file, not its last store's %d: an update was lost",
                     jobs[i].backend, got, STORES);
    }
    edgert_close(ctx);
}

/* An evidence file that is there but cannot be read now (here /proc/self/mem:
 * a regular file whose read fails with EIO, which no permission bit can
 * give root) is not "corrupt": said as unreadable, and a store leaves it as
 * it is instead of moving it aside. */
static void test_unreadable_left_alone(void **state)
{
    fx *f = *state;
    if (EDGERT_TEST_EMULATED)
        tu_skip("under qemu user mode /proc/self/mem is the emulator's");
    const char *paths[1] = {f->dir};
    edgert_options o = {.struct_size = sizeof o};
    o.manifest_paths = paths;
    o.manifest_path_count = 1;
    o.ignore_env = 1;
    o.evidence_file = "/proc/self/mem";
    o.threads = 1;
    o.log_level = EDGERT_LOG_ERROR;
    edgert_ctx *ctx = NULL;
    char err[1024];
    assert_int_equal(edgert_open(&o, &ctx, err, sizeof err), EDGERT_OK);
    assert_true(warned(ctx, "/proc/self/mem", "evidence file cannot be read ("));
    assert_false(warned(ctx, "/proc/self/mem", "corrupt"));
    edgert_close(ctx);
}

/* A recorded failed verify is a gate: figures stored later without a
 * verdict keep it (with a warning), a pass replaces it, and a failure of
 * another build of the plugin is dropped only with a warning; an entry that
 * cannot be kept is not dropped silently either. */
static void test_failure_survives_merge(void **state)
{
    fx *f = *state;
    char err[512];
    edgert_ctx *ctx = open_fx(f, 0, NULL);
    edgert_evidence fail = ev("test-fast", 900.0, 0.1, 3.0, 0), figures = fail;
    figures.correct = -1; /* e.g. a bench result: no verdict */
    figures.decode_tokens_per_s = 950.0;
    assert_int_equal(edgert_evidence_store(ctx, NULL, &fail, 1, err, sizeof err), EDGERT_OK);
    assert_int_equal(edgert_evidence_store(ctx, NULL, &figures, 1, err, sizeof err), EDGERT_OK);
    int told = warned(ctx, f->ev, "failed verify recorded");
    edgert_close(ctx);
    ctx = open_fx(f, 0, NULL);
    const edgert_candidate *c = edgert_candidate_find(ctx, "test-fast");
    assert_false(c->eligible);
    assert_string_equal(c->reasons[c->reason_count - 1], "FAILED_VERIFY");
    assert_true(fabs(c->measured.decode_tokens_per_s - 950.0) < 1e-9);
    assert_true(told);
    /* a pass decides again */
    edgert_evidence pass = ev("test-fast", 800.0, 0.9, 0.1, 1);
    assert_int_equal(edgert_evidence_store(ctx, NULL, &pass, 1, err, sizeof err), EDGERT_OK);
    edgert_close(ctx);
    ctx = open_fx(f, 0, NULL);
    assert_true(edgert_candidate_find(ctx, "test-fast")->eligible);
    assert_int_equal(edgert_evidence_store(ctx, NULL, &fail, 1, err, sizeof err), EDGERT_OK);
    edgert_close(ctx);
    /* another build of the plugin: its old failure goes, and says so */
    char lib[4200];
    snprintf(lib, sizeof lib, "%s/tp_fast.so", f->dir);
    FILE *fp = fopen(lib, "ab");
    fputs("rebuilt", fp);
    fclose(fp);
    ctx = open_fx(f, 0, NULL);
    assert_int_equal(edgert_evidence_store(ctx, NULL, &figures, 1, err, sizeof err), EDGERT_OK);
    assert_true(warned(ctx, f->ev, "for another build of its plugin is dropped"));
    edgert_close(ctx);
    /* an entry without device or backend cannot be kept: said, with its line */
    free(tu_write(f->dir, "cache/edgert/evidence.json", "%s",
                  "{\"evidence_version\": 1, \"entries\": [\n"
                  "  {\"backend\": \"test-good\", \"correct\": 0}]}\n"));
    ctx = open_fx(f, 0, NULL);
    assert_int_equal(edgert_evidence_store(ctx, NULL, &pass, 1, err, sizeof err), EDGERT_OK);
    assert_true(warned(ctx, f->ev, "cannot be kept and is dropped (it recorded a failed verify)"));
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
        cmocka_unit_test_setup_teardown(test_keep_unmeasured, setup, teardown),
        cmocka_unit_test_setup_teardown(test_decode_groups, setup, teardown),
        cmocka_unit_test_setup_teardown(test_decode_ranges_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_decode_source, setup, teardown),
        cmocka_unit_test_setup_teardown(test_first_contact_groups, setup, teardown),
        cmocka_unit_test_setup_teardown(test_first_contact_read_rate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fidelity_groups, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plugin_changed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_device, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_write_keeps_old, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_verify_gate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hostile_names_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_moved_aside, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failure_survives_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_stores_keep_both, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unreadable_left_alone, setup, teardown),
        cmocka_unit_test(test_default_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
