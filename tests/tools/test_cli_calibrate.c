/*
 * tests/tools/test_cli_calibrate.c — `edgert calibrate` as a user meets it: the
 * evidence file it writes, and `edgert select` ranking by it (text and
 * --json), including evidence it cannot compare (a backend it left out,
 * figures from two runs).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/internal.h"
#include "test_util.h"
#include "test_cli_util.h"
#include "formats/yamldoc.h"

/* select --explain=full over test_calibrate_then_select's evidence (the
 * figures as measured are the full form's) */
static char *explain_calibrated(const char *dir)
{
    char args[4096], *out;
    snprintf(args, sizeof args,
             "select --explain=full --disable avx512-w4a16 --evidence %s/ev.json", dir);
    assert_int_equal(run(args, &out), 0);
    return out;
}

/* That evidence as if its first entry (a CPU backend: name order) came from
 * another run, written before series (measured_at stands in): two calibrated
 * CPU backends are then compared by first contact; explain names the runs. */
static void two_runs(const char *dir)
{
    char args[4096], *out;
    snprintf(args, sizeof args,
             "sed -i -E -e 's/, \"series\": \"[^\"]*\"//' -e '0,/\"measured_at\": \"[^\"]*\"/"
             "s//\"measured_at\": \"2026-01-02T03:04:05Z\"/' '%s/ev.json' && "
             "grep -q 2026-01-02T03:04:05Z '%s/ev.json' && ! grep -q series '%s/ev.json'",
             dir, dir, dir);
    assert_int_equal(system(args), 0);
    snprintf(args, sizeof args, "select --json --disable avx512-w4a16 --evidence %s/ev.json", dir);
    assert_int_equal(run(args, &out), 0);
    er_yaml y;
    char *jdir;
    yaml_node_t *cands = er_yaml_get(&y, parse(out, &y, &jdir), "candidates");
    int cpu = 0;
    for (yaml_node_item_t *it = cands->data.sequence.items.start;
         it < cands->data.sequence.items.top; it++) {
        yaml_node_t *c = er_yaml_node(&y, *it);
        const char *rank = sval(&y, c, "rank");
        if (rank && strcmp(rank, "null") != 0 && strcmp(sval(&y, c, "reference"), "false") == 0 &&
            strcmp(sval(&y, c, "measured_series"), "null") != 0)
            cpu++;
    }
    assert_true((strstr(out, "\"decode_source\":\"first-contact\"") != NULL) == (cpu >= 2));
    er_yaml_free(&y);
    tu_rmrf(jdir);
    free(out);
    out = explain_calibrated(dir);
    assert_true((strstr(out, "measured them in separate runs (") != NULL) == (cpu >= 2));
    assert_true((strstr(out, " on 2026-01-02T03:04:05") != NULL) == (cpu >= 2));
    printf("calibrate evidence from two runs: %d calibrated CPU backends, %s\n", cpu,
           cpu >= 2 ? "compared by first contact" : "nothing to compare");
    free(out);
}

/* select --json for fidelity over calibrate's evidence (--tokens 8): every
 * ranked candidate has its token count, and where two CPU backends were
 * measured they share a fidelity group (two standard errors at 8 tokens
 * are about 0.4: nothing here is told apart by top-1). 0 on a failure. */
static int shared_fidelity_group(const char *out)
{
    er_yaml y;
    char *jdir;
    yaml_node_t *cands = er_yaml_get(&y, parse(out, &y, &jdir), "candidates");
    int cpu = 0, groups[16], ok = 1;
    for (yaml_node_item_t *it = cands->data.sequence.items.start;
         it < cands->data.sequence.items.top; it++) {
        yaml_node_t *c = er_yaml_node(&y, *it);
        const char *rank = sval(&y, c, "rank");
        if (!rank || strcmp(rank, "null") == 0)
            continue;
        ok &= strcmp(sval(&y, c, "measured_top1_tokens"), "8") == 0;
        if (strcmp(sval(&y, c, "reference"), "false") == 0 && cpu < 16)
            groups[cpu++] = atoi(sval(&y, c, "fidelity_group"));
    }
    for (int i = 1; i < cpu; i++)
        ok &= groups[i] == groups[0];
    printf("fidelity over 8 counted tokens: %d CPU backends, %s\n", cpu,
           cpu >= 2 ? "one fidelity group" : "nothing to group");
    er_yaml_free(&y);
    tu_rmrf(jdir);
    return ok;
}

/* calibrate → evidence file → select ranks by measured figures. */
static void test_calibrate_then_select(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), args[4096], *out;
    snprintf(args, sizeof args,
             "calibrate --quick --tokens 8 --repeat 1 --disable avx512-w4a16 --workload %s "
             "--out %s/ev.json", EDGERT_TEST_FIXTURES "/workloads/tiny.yaml", dir);
    assert_int_equal(run(args, &out), 0);
    assert_non_null(strstr(out, "ref-w4a16"));
    /* decode in interleaved rounds, the median stored, the spread shown */
    assert_non_null(strstr(out, "median of 3 interleaved rounds"));
    assert_non_null(strstr(out, "(rounds min..max)"));
    assert_non_null(strstr(out, "prefill: G(FL)OP/s at M = "));
    assert_non_null(strstr(out, "'edgert select --explain --evidence ")); /* --out's file */
    free(out);
    snprintf(args, sizeof args, "select --json --disable avx512-w4a16 --evidence %s/ev.json", dir);
    assert_int_equal(run(args, &out), 0);
    er_yaml y;
    char *jdir;
    yaml_node_t *root = parse(out, &y, &jdir);
    assert_string_equal(sval(&y, er_yaml_get(&y, root, "selected"), "evidence"), "measured");
    /* the rounds' range is stored and read back around the median, and every
     * ranked candidate has a decode group (priority speed) */
    yaml_node_t *cands = er_yaml_get(&y, root, "candidates");
    int ranked = 0;
    for (yaml_node_item_t *it = cands->data.sequence.items.start;
         it < cands->data.sequence.items.top; it++) {
        yaml_node_t *c = er_yaml_node(&y, *it);
        const char *rank = sval(&y, c, "rank"), *group = sval(&y, c, "decode_group");
        if (!rank || strcmp(rank, "null") == 0)
            continue;
        ranked++;
        assert_non_null(group);
        assert_true(strcmp(group, "null") != 0 && atoi(group) >= 0);
        assert_string_equal(sval(&y, c, "decode_source"), "calibrate");
        double lo = atof(sval(&y, c, "measured_decode_min")),
               hi = atof(sval(&y, c, "measured_decode_max")),
               v = atof(sval(&y, er_yaml_get(&y, c, "measured"), "decode_tokens_per_s"));
        assert_true(lo > 0.0 && lo <= v && v <= hi);
        /* prefill measured by calibrate, not a manifest's claim: it decides
         * inside a decode group (the reference ranks last whatever it is) */
        const char *pre = sval(&y, er_yaml_get(&y, c, "measured"), "prefill_gflops");
        if (strcmp(sval(&y, c, "reference"), "true") == 0)
            assert_string_equal(pre, "null");
        else
            assert_true(atof(pre) > 0.0);
    }
    assert_true(ranked > 0);
    er_yaml_free(&y);
    tu_rmrf(jdir);
    free(out);
    out = explain_calibrated(dir);
    assert_non_null(strstr(out, "measured here"));
    assert_non_null(strstr(out, "decode [rounds "));
    assert_non_null(strstr(out, "decided by measured figures"));
    free(out);
    /* fidelity: calibrate counted top-1 over --tokens 8, so every measured
     * candidate has its token count and a fidelity group */
    snprintf(args, sizeof args,
             "select --json --priority fidelity --disable avx512-w4a16 --evidence %s/ev.json", dir);
    assert_int_equal(run(args, &out), 0);
    assert_null(strstr(out, "\"decode_group\":0,")); /* speed's */
    assert_true(shared_fidelity_group(out));
    free(out);
    /* --no-evidence: declared again */
    snprintf(args, sizeof args,
             "select --json --no-evidence --disable avx512-w4a16 --evidence %s/ev.json", dir);
    assert_int_equal(run(args, &out), 0);
    assert_non_null(strstr(out, "\"evidence\":\"declared\""));
    assert_non_null(strstr(out, "\"decode_source\":\"declared\""));
    free(out);
    /* avx512-w4a16, left out of calibrate, ranked too: where it is eligible
     * it has only first contact's quick figure, so every backend is
     * compared by its quick figure, and explain names the one left out */
    snprintf(args, sizeof args, "select --explain --evidence %s/ev.json", dir);
    assert_int_equal(run(args, &out), 0);
    int eligible = strstr(out, "avx512-w4a16     ELIGIBLE") != NULL;
    assert_true(eligible == (strstr(out, "first contact's quick measurement, for every backend "
                                         "of the tier: 'edgert calibrate' has no rounds for "
                                         "avx512-w4a16") != NULL));
    free(out);
    snprintf(args, sizeof args, "select --json --evidence %s/ev.json", dir);
    assert_int_equal(run(args, &out), 0);
    assert_non_null(strstr(out, eligible ? "\"decode_source\":\"first-contact\""
                                         : "\"decode_source\":\"calibrate\""));
    printf("select with a backend calibrate left out: %s\n",
           eligible ? "avx512-w4a16 eligible, compared by first contact"
                    : "avx512-w4a16 not eligible here, calibrate's figures");
    free(out);
    two_runs(dir);
    tu_rmrf(dir);
}

/* Nothing here to measure (no manifest in the folder named): exit 3, as
 * select's, and no evidence file (it exited 0 and wrote an empty one). */
static void test_calibrate_nothing(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), args[8600], path[4200], *out;
    snprintf(path, sizeof path, "%s/ev.json", dir);
    snprintf(args, sizeof args, "calibrate --quick --manifests %s --workload %s --out %s", dir,
             EDGERT_TEST_FIXTURES "/workloads/tiny.yaml", path);
    int rc = run_all(args, &out);
    if (rc != 3 || !strstr(out, "nothing to measure"))
        fail_msg("calibrate with nothing eligible: exit %d\n%s", rc, out);
    assert_int_equal(access(path, F_OK), -1);
    free(out);
    tu_rmrf(dir);
}

/* Beside a busy loop on every CPU, twice over, with contention judged
 * (EDGERT_CONTENTION unset: the tests' environment sets ignore): every
 * decode round is set aside and measured again, 3 times, then the backend
 * stores nothing, says why and what to do, and calibrate fails (exit 1)
 * without writing an evidence file. */
static void test_calibrate_under_load(void **state)
{
    (void)state;
#if EDGERT_TEST_EMULATED
    /* the contention rule is the same on every arch and the native builds
     * run this (plain and under ASan); under qemu its calibrate beside a
     * busy loop per CPU, twice over, also slowed the test ctest ran beside
     * it, in a stage that is most of CI's 30 minutes */
    tu_skip("contention judged by the native builds (%s)", "qemu: both CPUs busy for minutes");
#endif
    if (!tu_schedstat_known())
        tu_skip("this kernel gives no schedstat: no contention can be seen");
    char *dir = tu_tmpdir(), args[8600], path[4200], *out;
    snprintf(path, sizeof path, "%s/ev.json", dir);
    snprintf(args, sizeof args, "calibrate --quick --repeat 1 --disable ref-w4a16 --workload %s "
             "--out %s", EDGERT_TEST_FIXTURES "/workloads/tiny.yaml", path);
    pid_t burners[64];
    int nb = tu_burners_start(burners, 64);
    int rc = run_redirected("timeout 250 env -u EDGERT_CONTENTION", args, "2>&1", &out);
    tu_burners_stop(burners, nb);
    if (rc != 1 || !strstr(out, "set aside (") || !strstr(out, "ran under contention 4 times") ||
        !strstr(out, "calibrate again when the machine is quiet"))
        fail_msg("calibrate beside %d busy loops: exit %d\n%s", nb, rc, out);
    assert_int_equal(access(path, F_OK), -1);
    free(out);
    tu_rmrf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calibrate_then_select),
        cmocka_unit_test(test_calibrate_nothing),
        cmocka_unit_test(test_calibrate_under_load),
    };
    return tu_run_group("cli calibrate", tests, NULL, NULL);
}
