/*
 * tests/evidence/test_evidence_input.c — what an integrator can hand the evidence
 * store wrongly, and what an edited file can say, found by a first-time
 * integrator's walkthrough:
 * - a path naming a folder is refused (EDGERT_E_IO) and the folder stays
 *   where it is, with its files (it used to be moved aside as "corrupt");
 *   reading one is a warning, never a rename;
 * - figures outside their meaning (a negative rate, top-1 above 1, a
 *   negative KL, an SQNR of -inf, `correct` other than 1/0/-1) are refused
 *   on store, naming the item and the field, and nothing is written;
 * - two items for one backend in one call are refused;
 * - struct_size EDGERT_EVIDENCE_V1_SIZE is not a stride: fine for one item,
 *   refused (not read misaligned) for two;
 * - a caller built against an older header (struct_size of version 1 to 5)
 *   has each field past its size ignored: poisoned there (a range, a token
 *   count, keep_unmeasured 9, a fidelity_source pointer to nowhere, repeated
 *   rounds), none reaches the file, and the fields it has all do;
 * - an edited file's impossible figures are ignored when read, each with a
 *   warning at its line, so they cannot rank a backend;
 * - edgert_open with manifest_path_count > 0 and no array is refused.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "edgert/edgert.h"
#include "test_util.h"

typedef struct fx {
    char *dir; /* a manifest + a copy of an honest test plugin */
    char *ev;  /* the evidence file */
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    f->dir = tu_tmpdir();
    if (!f->dir || asprintf(&f->ev, "%s/evidence.json", f->dir) < 0)
        return -1;
    char *src = tu_plugin("tp_good"), cmd[8192], lib[4200];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s/tp_good.so'", src, f->dir);
    assert_int_equal(system(cmd), 0);
    free(src);
    snprintf(lib, sizeof lib, "%s/tp_good.so", f->dir);
    free(tu_manifest(f->dir, "test-good.yaml", "test-good", lib, NULL,
                     "declared: {decode_tokens_per_s: 50, measured_on: \"test\"}\n"));
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

static edgert_ctx *open_fx(const fx *f)
{
    const char *paths[1] = {f->dir};
    edgert_options o = {.struct_size = sizeof o};
    o.manifest_paths = paths;
    o.manifest_path_count = 1;
    o.ignore_env = 1;
    o.evidence_file = f->ev;
    o.threads = 1;
    o.log_level = EDGERT_LOG_ERROR;
    edgert_ctx *ctx = NULL;
    char err[512];
    assert_int_equal(edgert_open(&o, &ctx, err, sizeof err), EDGERT_OK);
    return ctx;
}

static edgert_evidence ev(double tps, double top1, double kl, int correct)
{
    edgert_evidence e = {sizeof e, "test-good", tps, NAN, top1, kl, 20.0, 1, "test", correct,
                         NAN, NAN, 0u, 0, NULL, 0u};
    return e;
}

/* Whether the handle warned about `file` with `text` in the message. */
static int warned(const edgert_ctx *ctx, const char *file, const char *text)
{
    for (size_t d = 0; d < edgert_diag_count(ctx); d++) {
        const edgert_diag *g = edgert_diag_at(ctx, d);
        if (g->level == EDGERT_LOG_WARN && g->file && strstr(g->file, file) &&
            strstr(g->message, text))
            return 1;
    }
    return 0;
}

static void test_folder_is_not_moved(void **state)
{
    fx *f = *state;
    char *sub = NULL, err[512] = "";
    assert_true(asprintf(&sub, "%s/keep", f->dir) > 0);
    assert_int_equal(mkdir(sub, 0700), 0);
    free(tu_write(sub, "mine.txt", "the integrator's file\n"));
    edgert_ctx *ctx = open_fx(f);
    edgert_evidence e = ev(10.0, 0.9, 0.01, 1);
    assert_int_equal(edgert_evidence_store(ctx, sub, &e, 1, err, sizeof err), EDGERT_E_IO);
    assert_non_null(strstr(err, "not a regular file"));
    edgert_close(ctx);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "test -f '%s/mine.txt' && ! ls '%s'.corrupt-* >/dev/null 2>&1",
             sub, sub);
    assert_int_equal(system(cmd), 0);

    /* read: a warning, and the folder stays */
    const char *paths[1] = {f->dir};
    edgert_options o = {.struct_size = sizeof o, .manifest_paths = paths,
                        .manifest_path_count = 1, .ignore_env = 1, .evidence_file = sub,
                        .threads = 1, .log_level = EDGERT_LOG_ERROR};
    assert_int_equal(edgert_open(&o, &ctx, err, sizeof err), EDGERT_OK);
    assert_true(warned(ctx, sub, "not a regular file"));
    edgert_close(ctx);
    assert_int_equal(system(cmd), 0);
    free(sub);
}

static void test_figures_out_of_range(void **state)
{
    fx *f = *state;
    edgert_ctx *ctx = open_fx(f);
    char err[512];
    struct {
        edgert_evidence e;
        const char *field;
    } bad[] = {
        {ev(-1.0, 0.9, 0.01, 1), "decode_tokens_per_s"},
        {ev(0.0, 0.9, 0.01, 1), "decode_tokens_per_s"},
        {ev(INFINITY, 0.9, 0.01, 1), "decode_tokens_per_s"},
        {ev(10.0, 7.0, 0.01, 1), "top1_agreement"},
        {ev(10.0, -0.1, 0.01, 1), "top1_agreement"},
        {ev(10.0, 0.9, -1.0, 1), "kl_mean"},
        {ev(10.0, 0.9, 0.01, 42), "correct"},
        {ev(10.0, 0.9, 0.01, -2), "correct"},
    };
    bad[2].e.prefill_gflops = -5.0; /* the first bad field is named */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(edgert_evidence_store(ctx, NULL, &bad[i].e, 1, err, sizeof err),
                         EDGERT_E_USAGE);
        if (!strstr(err, bad[i].field) || !strstr(err, "item 0"))
            fail_msg("case %zu: the error does not name item 0 and %s: %s", i, bad[i].field,
                     err);
        assert_int_equal(access(f->ev, F_OK), -1); /* nothing written */
    }
    edgert_evidence inf_sqnr = ev(10.0, 0.9, 0.01, 1), neg_prefill = ev(10.0, 0.9, 0.01, 1);
    inf_sqnr.sqnr_min_db = -INFINITY; /* +inf is exact output, as verify measures it */
    neg_prefill.prefill_gflops = -5.0;
    assert_int_equal(edgert_evidence_store(ctx, NULL, &inf_sqnr, 1, err, sizeof err),
                     EDGERT_E_USAGE);
    assert_int_equal(edgert_evidence_store(ctx, NULL, &neg_prefill, 1, err, sizeof err),
                     EDGERT_E_USAGE);
    /* NaN is "not measured", and the edges are inside */
    edgert_evidence fine = ev(10.0, 1.0, 0.0, -1);
    fine.top1_agreement = 0.0;
    assert_int_equal(edgert_evidence_store(ctx, NULL, &fine, 1, err, sizeof err), EDGERT_OK);
    edgert_evidence nan = ev(NAN, NAN, NAN, -1);
    assert_int_equal(edgert_evidence_store(ctx, NULL, &nan, 1, err, sizeof err), EDGERT_OK);
    edgert_evidence exact = ev(10.0, 1.0, 0.0, 1);
    exact.sqnr_min_db = INFINITY;
    assert_int_equal(edgert_evidence_store(ctx, NULL, &exact, 1, err, sizeof err), EDGERT_OK);
    edgert_close(ctx);
}

static void test_one_entry_per_backend(void **state)
{
    fx *f = *state;
    edgert_ctx *ctx = open_fx(f);
    char err[512] = "";
    edgert_evidence two[2] = {ev(10.0, 0.9, 0.01, 1), ev(20.0, 0.9, 0.01, 1)};
    assert_int_equal(edgert_evidence_store(ctx, NULL, two, 2, err, sizeof err), EDGERT_E_USAGE);
    assert_non_null(strstr(err, "items 0 and 1"));
    assert_non_null(strstr(err, "test-good"));
    assert_int_equal(access(f->ev, F_OK), -1);
    edgert_close(ctx);
}

static void test_v1_size_is_not_a_stride(void **state)
{
    fx *f = *state;
    edgert_ctx *ctx = open_fx(f);
    char err[512] = "";
    edgert_evidence two[2] = {ev(10.0, 0.9, 0.01, 1), ev(20.0, 0.9, 0.01, 1)};
    two[1].backend = "ref-w4a16";
    two[0].struct_size = two[1].struct_size = (uint32_t)EDGERT_EVIDENCE_V1_SIZE;
    assert_int_equal(edgert_evidence_store(ctx, NULL, two, 2, err, sizeof err), EDGERT_E_USAGE);
    assert_non_null(strstr(err, "sizeof(edgert_evidence)"));
    /* one item: no stride, as version 1 callers did */
    assert_int_equal(edgert_evidence_store(ctx, NULL, two, 1, err, sizeof err), EDGERT_OK);
    edgert_close(ctx);
}

/* An item of `size` bytes (version 1 to 5) whose fields past it hold what a
 * reader would take for figures, or would refuse or crash on: stored, only
 * the fields within its size come back. */
static void test_older_callers_read_to_their_size(void **state)
{
    fx *f = *state;
    static const size_t sizes[] = {EDGERT_EVIDENCE_V1_SIZE, EDGERT_EVIDENCE_V2_SIZE,
                                   EDGERT_EVIDENCE_V3_SIZE, EDGERT_EVIDENCE_V4_SIZE,
                                   EDGERT_EVIDENCE_V5_SIZE};
    for (size_t v = 0; v < sizeof sizes / sizeof sizes[0]; v++) {
        edgert_evidence e = ev(10.0, 0.5, 0.25, 1);
        e.struct_size = (uint32_t)sizes[v];
        e.decode_tokens_per_s_min = 9.0;
        e.decode_tokens_per_s_max = 11.0;
        e.top1_tokens = 64u;
        e.keep_unmeasured = v + 1 >= 4 ? 0 : 9; /* read, 9 is refused */
        e.fidelity_source = v + 1 >= 4 ? "model /m" : (const char *)(uintptr_t)8; /* or crash */
        e.decode_rounds_repeated = 3u;
        edgert_ctx *ctx = open_fx(f);
        char err[512] = "";
        if (edgert_evidence_store(ctx, NULL, &e, 1, err, sizeof err) != EDGERT_OK)
            fail_msg("version %zu: %s", v + 1, err);
        edgert_close(ctx);
        ctx = open_fx(f);
        const edgert_candidate *c = edgert_candidate_find(ctx, "test-good");
        assert_non_null(c);
        assert_true(c->measured.decode_tokens_per_s == 10.0);
        assert_true(v + 1 >= 2 ? c->measured_decode_min == 9.0 : isnan(c->measured_decode_min));
        assert_int_equal(c->measured_top1_tokens, v + 1 >= 3 ? 64u : 0u);
        if (v + 1 >= 4)
            assert_string_equal(c->measured_fidelity_source, "model /m");
        else
            assert_null(c->measured_fidelity_source);
        assert_int_equal(c->measured_rounds_repeated, v + 1 >= 5 ? 3u : 0u);
        edgert_close(ctx);
    }
}

static void test_edited_figures_ignored(void **state)
{
    fx *f = *state;
    edgert_ctx *ctx = open_fx(f);
    char err[512];
    edgert_evidence e = ev(10.0, 0.5, 0.25, 1);
    assert_int_equal(edgert_evidence_store(ctx, NULL, &e, 1, err, sizeof err), EDGERT_OK);
    edgert_close(ctx);
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "sed -i 's/\"decode_tokens_per_s\": 10,/\"decode_tokens_per_s\": -100,/; "
             "s/\"top1_agreement\": 0.5,/\"top1_agreement\": 7,/; "
             "s/\"kl_mean\": 0.25,/\"kl_mean\": -1,/' '%s' && grep -q '\"top1_agreement\": 7,' "
             "'%s' && grep -q -- '-100,' '%s'",
             f->ev, f->ev, f->ev);
    assert_int_equal(system(cmd), 0);
    ctx = open_fx(f);
    const edgert_candidate *c = edgert_candidate_find(ctx, "test-good");
    assert_true(isnan(c->measured.decode_tokens_per_s));
    assert_true(isnan(c->measured.top1_agreement));
    assert_true(isnan(c->measured.kl_mean));
    assert_true(warned(ctx, "evidence.json", "top1_agreement 7 is not in [0, 1]"));
    assert_true(warned(ctx, "evidence.json", "decode_tokens_per_s -100 is not > 0"));
    assert_true(warned(ctx, "evidence.json", "kl_mean -1 is not >= 0"));
    edgert_close(ctx);
}

static void test_open_paths_null(void **state)
{
    (void)state;
    edgert_options o = {.struct_size = sizeof o, .manifest_path_count = 1, .ignore_env = 1};
    edgert_ctx *ctx = (edgert_ctx *)(uintptr_t)1;
    char err[512] = "";
    assert_int_equal(edgert_open(&o, &ctx, err, sizeof err), EDGERT_E_USAGE);
    assert_null(ctx);
    assert_non_null(strstr(err, "manifest_paths is NULL"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_folder_is_not_moved, setup, teardown),
        cmocka_unit_test_setup_teardown(test_figures_out_of_range, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_entry_per_backend, setup, teardown),
        cmocka_unit_test_setup_teardown(test_v1_size_is_not_a_stride, setup, teardown),
        cmocka_unit_test_setup_teardown(test_older_callers_read_to_their_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edited_figures_ignored, setup, teardown),
        cmocka_unit_test(test_open_paths_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
