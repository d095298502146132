/*
 * tests/run/test_export_out.c — what `edgert export` may replace at --out
 * (tools/export_files.h). An adversary's walkthrough lost a project folder
 * into which a report.json had been copied, and a note added to an earlier
 * export: the report's marker was taken for "an earlier export, nothing
 * else". Here:
 * - an export replaces the earlier one it wrote, and lists what it wrote;
 * - a note added to an earlier export: refused, exit 2, note and export
 *   kept, the note named;
 * - a folder with a copied report.json and a user's files: refused, kept;
 * - an export without the list (made before it): refused, kept;
 * - a FIFO named report.json: refused at once (it blocked for ever).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sys/stat.h>

#include "edgert/export.h"
#include "common/internal.h"
#include "test_util.h"
#include "test_cli_util.h"

#define PHONE EDGERT_TEST_FIXTURES "/devices/android-hexagon.yaml"

/* export --quick to dir/name; its exit code, its output in *out. */
static int export_to(const char *dir, const char *name, char **out)
{
    char args[4096];
    snprintf(args, sizeof args, "export --quick --device %s --out %s/%.100s", PHONE, dir, name);
    return run_all(args, out);
}

static int exists(const char *dir, const char *rel)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    return access(path, F_OK) == 0;
}

static void test_replaces_only_its_own(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), *out, sub[4300];
    assert_int_equal(export_to(dir, "e", &out), 0);
    free(out);
    assert_true(exists(dir, "e/.edgert-export-files"));
    assert_int_equal(export_to(dir, "e", &out), 0); /* an earlier export: replaced */
    assert_non_null(strstr(out, "replaced the earlier export"));
    free(out);
    /* a user's note beside the earlier export */
    snprintf(sub, sizeof sub, "%s/e", dir);
    free(tu_write(sub, "NOTES.md", "mine\n"));
    int rc = export_to(dir, "e", &out);
    if (rc != 2 || !strstr(out, "'NOTES.md', which no export wrote"))
        fail_msg("an export with a note in it: exit %d\n%s", rc, out);
    free(out);
    assert_true(exists(dir, "e/NOTES.md") && exists(dir, "e/model.onnx"));
    /* ... and one inside a folder of it */
    assert_int_equal(unlink(strcat(sub, "/NOTES.md")), 0);
    snprintf(sub, sizeof sub, "%s/e/extra", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    assert_int_equal(export_to(dir, "e", &out), 2);
    free(out);
    assert_true(exists(dir, "e/extra"));
    assert_int_equal(rmdir(sub), 0);
    /* a name holding a newline between two listed names is not listed */
    snprintf(sub, sizeof sub, "%s/e", dir);
    free(tu_write(sub, "report.json\nreport.txt", "mine\n"));
    assert_int_equal(export_to(dir, "e", &out), 2);
    free(out);
    assert_true(exists(dir, "e/report.json\nreport.txt"));
    tu_rmrf(dir);
}

static void test_not_an_export(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), *out, proj[4300];
    /* a project folder a report.json was copied into */
    snprintf(proj, sizeof proj, "%s/proj", dir);
    assert_int_equal(mkdir(proj, 0755), 0);
    free(tu_write(proj, "thesis.tex", "t\n"));
    free(tu_write(proj, EDGERT_EXPORT_REPORT_FILE, "{\"%s\": 1}\n", EDGERT_EXPORT_REPORT_MARKER));
    assert_int_equal(export_to(dir, "proj", &out), 2);
    free(out);
    assert_true(exists(dir, "proj/thesis.tex"));
    /* an export from before the list: the same report, nothing else */
    assert_int_equal(unlink(strcat(proj, "/thesis.tex")), 0);
    int rc = export_to(dir, "proj", &out);
    if (rc != 2 || !strstr(out, "without the list"))
        fail_msg("an export without the list: exit %d\n%s", rc, out);
    free(out);
    /* a FIFO named report.json: refused, not waited on (run_all kills at 100 s: 124) */
    snprintf(proj, sizeof proj, "%s/fifo", dir);
    assert_int_equal(mkdir(proj, 0755), 0);
    assert_int_equal(mkfifo(strcat(proj, "/" EDGERT_EXPORT_REPORT_FILE), 0600), 0);
    assert_int_equal(export_to(dir, "fifo", &out), 2);
    free(out);
    tu_rmrf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replaces_only_its_own),
        cmocka_unit_test(test_not_an_export),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
