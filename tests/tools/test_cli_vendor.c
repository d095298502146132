/*
 * tests/tools/test_cli_vendor.c — what a vendor meets writing a first
 * backend, each point a vendor's trial found: an error never headed
 * "warnings:", a misspelt CPU flag with its likely one named, "no backend
 * named X" saying where edgert looked and which manifest of that name it
 * skipped, `list` giving the fix for a stale library, a build's manifest
 * error naming the file the vendor edits, and bench printing only the
 * columns of the phase it measured. (The CMake package's points, an empty
 * @PROJECT_VERSION@ and an install folder edgert does not search, are .ci/sdk's:
 * they need the installed package.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"
#include "test_cli_util.h"

#define TINY EDGERT_TEST_FIXTURES "/workloads/tiny.yaml"
#define MISSPELT EDGERT_TEST_FIXTURES "/manifests/bad/misspelt-cpu-flag.yaml"

static void expect_in(const char *out, const char *want, const char *what)
{
    if (!strstr(out, want))
        fail_msg("%s: no '%s' in:\n%.4000s", what, want, out);
}

/* An error is headed "errors:", with warnings "errors and warnings:", never
 * "warnings:" alone; a misspelt flag names the flag meant. */
static void test_error_header_and_flag_hint(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), args[8192], *out = NULL;
    /* in a folder (a file named alone is a bad input file: exit 4) */
    snprintf(args, sizeof args, "cp %s %s/", MISSPELT, dir);
    assert_int_equal(system(args), 0);
    /* the error, and the warning that the manifest was skipped; -q: the error */
    const char *flags[] = {"", " -q"}, *heads[] = {"errors and warnings", "errors"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "list --manifests %s%s", dir, flags[i]);
        run_all(args, &out);
        char want[64];
        snprintf(want, sizeof want, "edgert: %s:\n", heads[i]);
        expect_in(out, want, "a misspelt flag");
        expect_in(out, "unknown CPU flag 'avx2x' (did you mean 'avx2'?)", "a misspelt flag");
        if (strstr(out, "edgert: warnings:"))
            fail_msg("an error headed 'warnings:':\n%s", out);
        free(out);
    }
    tu_rmrf(dir);
}

/* "no backend named X": the folders searched, and the manifest of that name
 * skipped in the same run with its first error; from select, verify and bench. */
static void test_no_backend_named_says_where(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), args[8192], *out = NULL, want[4200];
    free(tu_write(dir, "acme-w4a16.yaml",
                  "manifest_version: 1\nname: acme-w4a16\nversion: \"\"\n"));
    const char *cmds[] = {"select --backend acme-w4a16", "verify --backend acme-w4a16 --quick",
                          "bench --backend acme-w4a16 --workload " TINY};
    for (size_t i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "%s --manifests %s", cmds[i], dir);
        int rc = run_all(args, &out);
        if (rc == 0)
            fail_msg("%s: exit 0:\n%s", cmds[i], out);
        expect_in(out, "no backend named 'acme-w4a16'", cmds[i]);
        snprintf(want, sizeof want, "folders searched: %s", dir);
        expect_in(out, want, cmds[i]);
        snprintf(want, sizeof want,
                 "skipped in this run: %s/acme-w4a16.yaml:3:10: field 'version': must not be "
                 "empty", dir);
        expect_in(out, want, cmds[i]);
        free(out);
    }
    /* a manifest file named otherwise, whose name: line is the one asked for */
    snprintf(want, sizeof want, "%s/acme-w4a16.yaml", dir);
    assert_int_equal(unlink(want), 0);
    free(tu_write(dir, "template.yaml", "manifest_version: 1\nname: \"acme-w4a16\"\n"
                                        "version: \"\"\n"));
    snprintf(args, sizeof args, "select --backend acme-w4a16 --manifests %s", dir);
    run_all(args, &out);
    snprintf(want, sizeof want, "skipped in this run: %s/template.yaml:3:10:", dir);
    expect_in(out, want, "a skipped manifest named in its name: line");
    free(out);
    tu_rmrf(dir);
}

/* A library changed since its manifest was stamped: list says what to do,
 * as select --explain does. */
static void test_list_gives_the_fix(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), *lib = tu_plugin("tp_good"), args[8192], *out = NULL, copy[4200];
    snprintf(copy, sizeof copy, "%s/libtp.so", dir);
    snprintf(args, sizeof args, "cp '%s' '%s'", lib, copy);
    assert_int_equal(system(args), 0);
    char *m = tu_manifest(dir, "test-good.yaml", "test-good", copy, NULL, NULL);
    snprintf(args, sizeof args, "checksum --stamp %s", m);
    assert_int_equal(run(args, &out), 0);
    free(out);
    FILE *f = fopen(copy, "ab");
    assert_non_null(f);
    fputc('x', f);
    fclose(f);
    snprintf(args, sizeof args, "list --manifests %s", dir);
    run_all(args, &out);
    expect_in(out, "not eligible CHECKSUM_MISMATCH", "list of a stale library");
    char want[4400];
    snprintf(want, sizeof want, "edgert checksum --stamp %s", m);
    expect_in(out, want, "list of a stale library");
    free(out);
    free(m);
    free(lib);
    tu_rmrf(dir);
}

/* A build's copy of a manifest (configure_file) with an error: --source names
 * the file the vendor edits, at the copy's line and column. */
static void test_stamp_names_the_source(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), args[8192], *out = NULL, want[4400];
    char *copy = tu_write(dir, "copy.yaml", "manifest_version: 1\nname: acme\narch: x86-64\n");
    snprintf(args, sizeof args, "checksum --stamp %s --source /home/vendor/acme/acme.yaml", copy);
    assert_int_equal(run_all(args, &out), 4);
    expect_in(out, "/home/vendor/acme/acme.yaml:3:7: field 'arch'", "--source");
    snprintf(want, sizeof want, "(found in its build copy %s, made by configure_file", copy);
    expect_in(out, want, "--source");
    free(out);
    snprintf(args, sizeof args, "checksum %s --source /x.yaml", copy); /* without --stamp */
    assert_int_equal(run_all(args, &out), 2);
    expect_in(out, "--source names the manifest one --stamp COPY was made from", "usage");
    free(out);
    free(copy);
    tu_rmrf(dir);
}

/* bench prints the columns of the phase it measured, never a column of nan. */
static void test_bench_columns_of_its_phase(void **state)
{
    (void)state;
    TU_SKIP_EMULATED("45 s: a bench of the reference per phase");
    char args[8192], *out = NULL;
    const char *phases[] = {"decode", "prefill"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "bench --backend ref-w4a16 --workload %s --phase %s --repeat 2 "
                 "--manifests %s", TINY, phases[i], EDGERT_TEST_BACKEND_DIR);
        if (run(args, &out) != 0)
            fail_msg("bench --phase %s failed:\n%s", phases[i], out);
        const char *table = strstr(out, "\nshape ");
        if (!table)
            fail_msg("bench --phase %s: no shape table:\n%s", phases[i], out);
        if (strstr(table, "nan"))
            fail_msg("bench --phase %s: nan in its table:\n%s", phases[i], table);
        int has_pf = strstr(table, "pf GFLOP/s") != NULL, has_dec = strstr(table, "decode ms") != 0;
        if (has_pf != (i == 1) || has_dec != (i == 0))
            fail_msg("bench --phase %s: columns of the other phase:\n%s", phases[i], table);
        free(out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_header_and_flag_hint),
        cmocka_unit_test(test_no_backend_named_says_where),
        cmocka_unit_test(test_list_gives_the_fix),
        cmocka_unit_test(test_stamp_names_the_source),
        cmocka_unit_test(test_bench_columns_of_its_phase),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
