/*
 * tests/tools/test_cli_json.c — what a script reading `edgert ... --json` relies
 * on, beyond each command's own fields (tests/tools/test_cli.c has those):
 * - every command's object has "diagnostics", on success and on failure,
 *   with a skipped manifest at its file and line (an operator's walkthrough
 *   found them only in text mode, for pack, verify, calibrate, bench,
 *   export and quantize);
 * - a failure's object has "exit_code" equal to the exit code, and the
 *   failure's own status, not "failed", where it has one;
 * - --version --json, --json before the command, and an unknown command
 *   with --json each give one object;
 * - select says where a forced backend was named (forced_by), and which key
 *   put each candidate below the rank above (decided_by);
 * - output that does not reach stdout (/dev/full) is exit 1, not 0.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/internal.h"
#include "test_util.h"
#include "test_cli_util.h"
#include "formats/yamldoc.h"

/* A folder with one manifest whose YAML breaks (met at line 3, the end). */
static char *broken_dir(void)
{
    char *dir = tu_tmpdir();
    free(tu_write(dir, "broken.yaml", "manifest_version: 1\nname: [broken\n"));
    static const float w[4 * 128]; /* and a dense checkpoint for pack */
    free(tu_safetensors(dir, "w.safetensors",
                        "{\"l.0.mlp.up_proj.weight\":{\"dtype\":\"F32\",\"shape\":[4,128],"
                        "\"data_offsets\":[0,2048]}}", w, sizeof w));
    return dir;
}

/* Each command, failing or not, says the broken manifest in its object. */
static void test_diagnostics_everywhere(void **state)
{
    (void)state;
    char *dir = broken_dir(), args[8600], *out;
    static const struct {
        const char *args; /* every %s: the broken folder */
        int rc;
        const char *status; /* NULL: a result, not a failure object */
    } cases[] = {
        {"verify --json --backend no-such --manifests %s", 3, "E_NOT_FOUND"},
        {"bench --json --backend no-such --manifests %s", 3, "E_NOT_FOUND"},
        {"calibrate --json --quick --manifests %s", 3, "E_NOT_ELIGIBLE"},
        {"pack --json %s/w.safetensors --backend auto -o %s/p --manifests %s", 3,
         "E_NOT_ELIGIBLE"},
        {"export --json --bogus-option --manifests %s", 2, "E_USAGE"},
        {"list --json --manifests %s", 0, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, cases[i].args, dir, dir, dir);
        int rc = run(args, &out);
        er_yaml y;
        char *jdir;
        yaml_node_t *root = parse(out, &y, &jdir);
        yaml_node_t *diags = er_yaml_get(&y, root, "diagnostics");
        if (rc != cases[i].rc || !diags || diags->type != YAML_SEQUENCE_NODE)
            fail_msg("'%s': exit %d (want %d), diagnostics %s: %s", args, rc, cases[i].rc,
                     diags ? "not a list" : "missing", out);
        /* the usage error stops before any manifest is read */
        if (cases[i].rc != 2 && !strstr(out, "broken.yaml\",\"line\":3,"))
            fail_msg("'%s': the broken manifest is not in its diagnostics: %s", args, out);
        if (cases[i].status) {
            const char *st = sval(&y, root, "status"), *code = sval(&y, root, "exit_code");
            if (!st || strcmp(st, cases[i].status) || !code || atoi(code) != rc)
                fail_msg("'%s': status %s (want %s), exit_code %s (want %d): %s", args,
                         st ? st : "-", cases[i].status, code ? code : "-", rc, out);
        }
        er_yaml_free(&y);
        tu_rmrf(jdir);
        free(out);
    }
    tu_rmrf(dir);
}

/* Objects where there was only text. */
static void test_one_object_always(void **state)
{
    (void)state;
    char *out;
    assert_int_equal(run("--version --json", &out), 0);
    if (!strstr(out, "\"version\":\"" EDGERT_VERSION_STRING "\"") ||
        !strstr(out, "\"plugin_abi_max\":"))
        fail_msg("--version --json: %s", out);
    free(out);
    assert_int_equal(run("--json --version", &out), 0);
    assert_non_null(strstr(out, "\"plugin_abi_min\":"));
    free(out);
    assert_int_equal(run("--json list", &out), 0); /* as list --json */
    assert_non_null(strstr(out, "\"manifests\":"));
    free(out);
    assert_int_equal(run("no-such-command --json", &out), 2);
    if (!strstr(out, "unknown command") || !strstr(out, "\"exit_code\":2"))
        fail_msg("an unknown command with --json: '%s'", out);
    free(out);
}

/* Where a forced backend was named: EDGERT_BACKEND names it for an
 * application that never did (edgert(1), ENVIRONMENT). */
static void test_forced_by(void **state)
{
    (void)state;
    char *out;
    assert_int_equal(run_redirected("EDGERT_BACKEND=ref-w4a16", "select --json", "2>/dev/null",
                                    &out), 0);
    if (!strstr(out, "\"forced\":\"ref-w4a16\",\"forced_by\":\"EDGERT_BACKEND\""))
        fail_msg("select --json under EDGERT_BACKEND: %.400s", out);
    free(out);
    assert_int_equal(run("select --json --backend ref-w4a16", &out), 0);
    assert_non_null(strstr(out, "\"forced_by\":\"--backend\""));
    free(out);
    assert_int_equal(run("select --json", &out), 0);
    assert_non_null(strstr(out, "\"forced\":null,\"forced_by\":null"));
    free(out);
    /* a relative XDG_CACHE_HOME is ignored (XDG's rule), and said: an
     * adversary's calibrate wrote to ~/.cache without a word */
    assert_int_equal(run_redirected("XDG_CACHE_HOME=relative/cache", "list --json", "2>/dev/null",
                                    &out), 0);
    assert_non_null(strstr(out, "XDG_CACHE_HOME=relative/cache is not an absolute path"));
    free(out);
}

/* candidate `name`'s "decided_by" in select's object (its JSON value, at
 * most 63 bytes, into buf[64]), or "" when absent. */
static const char *decided_by(const char *out, const char *name, char buf[64])
{
    char key[96];
    snprintf(key, sizeof key, "{\"name\":\"%s\"", name);
    const char *c = strstr(out, key), *d = c ? strstr(c, "\"decided_by\":") : NULL;
    buf[0] = '\0';
    if (d)
        sscanf(d + strlen("\"decided_by\":"), "%63[^,}]", buf);
    return buf;
}

/* The selector's account in select's object: the key that put each ranked
 * candidate below the one above (edgert_selection_reason), null when not
 * ranked. On the AMX profile amx-w4a8 and avx512-w4a8 declare one decode
 * figure: the device's flags decide; the reference is last by its tier. */
static void test_decided_by(void **state)
{
    (void)state;
    char *out, b[64];
    assert_int_equal(run("select --json --device " EDGERT_TEST_FIXTURES "/devices/x86-amx.yaml",
                         &out), 0);
    assert_string_equal(decided_by(out, "amx-w4a8", b), "\"none\"");
    assert_string_equal(decided_by(out, "avx512-w4a8", b), "\"specialization\"");
    assert_string_equal(decided_by(out, "ref-w4a16", b), "\"tier\"");
    assert_string_equal(decided_by(out, "neon-w4a16", b), "null");
    free(out);
}

/* Output that did not reach stdout is a failure: a full disk left a
 * truncated document or an empty profile behind exit 0. */
static void test_output_not_written(void **state)
{
    (void)state;
    static const char *const cmds[] = {"list", "list --json", "probe --profile", "--version"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        int rc = run_redirected("", cmds[i], ">/dev/full 2>/dev/null", NULL);
        if (rc != 1)
            fail_msg("'%s' > /dev/full: exit %d, want 1", cmds[i], rc);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diagnostics_everywhere),
        cmocka_unit_test(test_one_object_always),
        cmocka_unit_test(test_forced_by),
        cmocka_unit_test(test_decided_by),
        cmocka_unit_test(test_output_not_written),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
