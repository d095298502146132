/*
 * tests/test_cli.c — the `edgert` command as a user meets it: help that
 * documents every option and variable, exit codes, and --json output that is
 * one well-formed object (parsed back here with libyaml; JSON is YAML).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <sys/wait.h>

#include "formats/yamldoc.h"
#include "test_util.h"
#include "test_cli_util.h"

#define DEVICES EDGERT_TEST_FIXTURES "/devices"
/* A shipped backend this build's arch never runs (its arch gate refuses it). */
#if defined(__aarch64__)
#define OTHER_ARCH_BACKEND "avx512-w4a16"
#else
#define OTHER_ARCH_BACKEND "neon-w4a16"
#endif

/* Every option a command accepts is in that command's --help: each is given
 * (with a value it takes) before --help, and where the parser does not
 * refuse it as not applying, the command's own part of the help (before the
 * common options and the environment, which name --backend and --priority
 * for every command) must name it, followed by a blank or a comma. */
static void help_lists_what_parses(void)
{
    static const char *const cmds[] = {"probe", "list",      "select", "bench",
                                       "verify", "calibrate", "export", "pack"};
    static const char *const opts[] = {
        "--priority speed", "--backend x", "--explain", "--no-evidence", "--workload x",
        "--phase decode", "--m 1", "--repeat 1", "--seed 1", "--tokens 8", "--quick",
        "--out x", "-o x", "--options x", "--evidence x", "--weights x", "--calibration x",
        "--scheme x", "--ranges x", "--force", "--golden", "--rows 1", "--calls", "--versus x",
        "--versus-options x", "--group 64", "--versus-group 64",
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        for (size_t j = 0; j < sizeof opts / sizeof opts[0]; j++) {
            char args[128], name[32], *out = NULL;
            snprintf(args, sizeof args, "%s %s --help", cmds[i], opts[j]);
            sscanf(opts[j], "%31s", name);
            int rc = run_all(args, &out);
            if (rc != 0 && strstr(out, "does not apply")) {
                free(out);
                continue;
            }
            char *common = strstr(out, "Common options:"), *at = out;
            if (common)
                *common = '\0';
            size_t nl = strlen(name);
            while ((at = strstr(at, name)) && at[nl] != ' ' && at[nl] != ',')
                at += nl;
            if (rc != 0 || !common || !at)
                fail_msg("'edgert %s' exits %d; its help must name %s:\n%s", args, rc, name,
                         out);
            free(out);
        }
}

static void test_help(void **state)
{
    (void)state;
    char *out;
    assert_int_equal(run("--help", &out), 0);
    const char *must[] = {"probe",
                          "list",
                          "select",
                          "--json",
                          "--sysroot",
                          "--device",
                          "--manifests",
                          "--disable",
                          "--strict",
                          "--threads",
                          "EDGERT_MANIFEST_PATH",
                          "EDGERT_ADD_MANIFEST_PATH",
                          "EDGERT_DISABLE",
                          "EDGERT_PRIORITY",
                          "EDGERT_BACKEND",
                          "EDGERT_LOG",
                          "Exit codes"};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        if (!strstr(out, must[i]))
            fail_msg("edgert --help does not mention %s", must[i]);
    free(out);
    assert_int_equal(run("select --help", &out), 0);
    const char *sel[] = {"--priority",    "--backend", "--explain",
                         "--no-evidence", "speed",     "fidelity"};
    for (size_t i = 0; i < sizeof sel / sizeof sel[0]; i++)
        if (!strstr(out, sel[i]))
            fail_msg("edgert select --help does not mention %s", sel[i]);
    free(out);
    assert_int_equal(run("probe --help", NULL), 0);
    assert_int_equal(run("list -h", NULL), 0);
    assert_int_equal(run("--version", NULL), 0);
    help_lists_what_parses();
}

static void test_exit_codes(void **state)
{
    (void)state;
    assert_int_equal(run("", NULL), 2);
    assert_int_equal(run("frobnicate", NULL), 2);
    assert_int_equal(run("select --frob", NULL), 2);
    assert_int_equal(run("select --priority fast", NULL), 2);
    assert_int_equal(run("select --threads 0", NULL), 2);
    /* the two commands with their own argument loops (a usage error with
     * --json anywhere before "--"), and export's own result object: a usage
     * error's status is E_USAGE, as everywhere */
    static const char *const usage_json[] = {"checksum --json", "checksum --json --bogus x",
                                             "quantize --json --bogus a b --asym",
                                             "quantize a b --asym --group 0 --json",
                                             "export --json --tokens 5000 --out x"};
    for (size_t i = 0; i < sizeof usage_json / sizeof usage_json[0]; i++) {
        char *o = NULL;
        if (run(usage_json[i], &o) != 2 || !strstr(o, "\"status\":\"E_USAGE\""))
            fail_msg("edgert %s: want exit 2 and the JSON error object, got '%s'", usage_json[i],
                     o);
        free(o);
    }
    /* "--" ends their options: a file whose name starts with '-' */
    assert_int_equal(run("checksum -- -no-such-file", NULL), 4);
    char *err;
    assert_int_equal(run_redirected("", "probe --priority speed", "2>&1 >/dev/null", &err), 2);
    assert_non_null(strstr(err, "option '--priority' does not apply to 'probe'")); /* not 'speed' */
    free(err);
    /* a misspelt disable list is said, not silently ignored */
    assert_int_equal(run_redirected("", "select --disable avx512_w4a8", "2>&1 >/dev/null", &err),
                     0);
    assert_non_null(strstr(err, "names 'avx512_w4a8', which no manifest found has"));
    free(err);
    assert_int_equal(run("select extra-arg", NULL), 2);
    assert_int_equal(run("select --manifests", NULL), 2);
    /* bad or missing files named explicitly: 4 */
    assert_int_equal(run("probe --sysroot /nonexistent-sysroot", NULL), 4);
    assert_int_equal(run_redirected("", "select --device " DEVICES "/bad/cores-string.yaml",
                                    "2>&1 >/dev/null", &err), 4);
    assert_non_null(strstr(err, "bad/cores-string.yaml:6:16: field 'logical_cores': expected an "
                                "integer, got 'four'"));
    free(err);
    assert_int_equal(run("select --device /nonexistent/profile.yaml", NULL), 4);
    /* an evidence file named to be read: a typo would rank without it */
    assert_int_equal(run_redirected("", "select --evidence /nonexistent/ev.json",
                                    "2>&1 >/dev/null", &err), 4);
    assert_non_null(strstr(err, "--evidence /nonexistent/ev.json: No such file"));
    free(err);
    assert_int_equal(run("select --evidence ''", NULL), 2); /* an empty value: usage */
    assert_int_equal(run("select --no-evidence --evidence /nonexistent/ev.json", NULL), 0);
    /* a setting that cannot be used is said */
    assert_int_equal(run_redirected("EDGERT_SANDBOX_TIMEOUT=abc", "list", "2>&1 >/dev/null",
                                    &err), 0);
    assert_non_null(strstr(err, "EDGERT_SANDBOX_TIMEOUT=abc is not a number of seconds"));
    free(err);
    /* ... unless errors only are asked for (EDGERT_LOG=error, as -q) */
    assert_int_equal(run_redirected("EDGERT_SANDBOX_TIMEOUT=abc EDGERT_LOG=error", "list",
                                    "2>&1 >/dev/null", &err), 0);
    assert_null(strstr(err, "EDGERT_SANDBOX_TIMEOUT=abc"));
    free(err);
    /* the name parsers refuse a NULL out instead of writing through it */
    edgert_priority prio;
    edgert_arch arch;
    assert_int_equal(edgert_priority_parse("speed", &prio), 0);
    assert_int_equal(edgert_priority_parse("speed", NULL), -1);
    /* any case, nothing more or less */
    assert_int_equal(edgert_priority_parse("Fidelity", &prio), 0);
    assert_int_equal(prio, EDGERT_PRIORITY_FIDELITY);
    static const char *const not_names[] = {"", "SPEEDx", "spee", "fidelity "};
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(edgert_priority_parse(not_names[i], &prio), -1);
    assert_int_equal(edgert_arch_parse("aarch64", &arch), 0);
    assert_int_equal(arch, EDGERT_ARCH_ARM64);
    assert_int_equal(edgert_arch_parse("x86_64", NULL), -1);
    assert_int_equal(edgert_device_class_parse("x86_cpu", NULL), -1);
    assert_int_equal(edgert_cpu_flag_parse("avx2", NULL), -1);
    assert_int_equal(run_redirected("", "select --manifests " EDGERT_TEST_FIXTURES
                                    "/manifests/bad/empty.yaml", "2>&1 >/dev/null", &err), 4);
    assert_non_null(strstr(err, "bad/empty.yaml:1:1: empty document"));
    free(err);
    /* nothing eligible / forced backend not eligible or unknown: 3 */
    assert_int_equal(run("select --strict --disable avx2-w4a16,avx2-w4a8 --device " DEVICES
                         "/x86-avx2.yaml", NULL), 3);
    assert_int_equal(run("select --backend neon-w4a16 --device " DEVICES "/x86-avx2.yaml", NULL),
                     3);
    assert_int_equal(run("select --backend no-such-backend", NULL), 3);
    assert_int_equal(run("select --device " DEVICES "/rpi5.yaml", NULL), 0);
}

/* Bytes a terminal acts on that a hostile manifest or sysroot put in its
 * strings: none may reach the output raw. Returns what was found, or NULL. */
static const char *raw_control(const char *out)
{
    static const struct {
        const char *bytes, *what;
    } bad[] = {
        {"\x1b", "ESC"},          {"\x07", "BEL"},         {"\x7f", "DEL"},
        {"\xc2\x9b", "C1 CSI"},   {"\xc2\x85", "C1 NEL"},  {"\xe2\x80\xae", "U+202E RLO"},
        {"\r", "CR"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (strstr(out, bad[i].bytes))
            return bad[i].what;
    return NULL;
}

/* A manifest folder whose strings carry terminal escape sequences (YAML's
 * \e, \x9b, \a escapes decode to the raw characters): in its values, in a
 * library path, in a bad manifest's file name and in the value its error
 * message quotes. */
static char *hostile_manifests(void)
{
    char *dir = tu_tmpdir(), *lib = tu_plugin("tp_good");
    free(tu_write(dir, "good.yaml",
                  "manifest_version: 1\nname: test-good\nversion: \"1.0\\e[2J\"\n"
                  "vendor: \"v\\e]0;pwned\\a\"\nlibrary: \"%s\"\nabi: {min: 1, max: 1}\n"
                  "arch: any\ndevice_classes: [x86_cpu, arm64_cpu]\n"
                  "layout: {format: int4-asym-g128, weight_bits: 4, group_size: 128, "
                  "symmetric: false, activation_dtype: bf16, bits_per_weight: 4.25}\n"
                  "runs_in_process: true\nverified: false\n"
                  "rationale: \"r \\e[31mRED \\x9b0m \\u202e \\N \\x7f\\r\"\n"
                  "notes: \"n\\e[1m\"\n"
                  "declared: {decode_tokens_per_s: 5, measured_on: \"m\\e[7m\"}\n", lib));
    free(lib);
    free(tu_manifest(dir, "missing.yaml", "test-missing", "/nonexistent/\\e[5mlib.so", NULL,
                     NULL));
    free(tu_write(dir, "bad\x1b[2J.yaml", "manifest_version: 1\nname: bad\narch: \"x\\e[31m\"\n"));
    return dir;
}

/* Text output escapes control characters from every outside source:
 * manifest strings (explain, list, select), a library path in a gate's
 * detail, a bad manifest's file name and its error message, a sysroot's GPU
 * folder and device node names. JSON stays parseable (C1 characters used to
 * reach it raw). */
static void test_text_escapes_outside_strings(void **state)
{
    (void)state;
    char *dir = hostile_manifests(), args[8192], *out;
    const char *cmds[] = {"select --explain", "select --explain=full", "select", "list"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        snprintf(args, sizeof args, "%s --manifests %s", cmds[i], dir);
        assert_int_equal(run_all(args, &out), 0);
        const char *raw = raw_control(out);
        if (raw)
            fail_msg("'edgert %s' printed a raw %s:\n%s", cmds[i], raw, out);
        free(out);
    }
    snprintf(args, sizeof args, "select --explain=full --manifests %s", dir);
    assert_int_equal(run_all(args, &out), 0);
    assert_non_null(strstr(out, "r \\x1b[31mRED \\u009b0m \\u202e \\u0085 \\x7f\\r"));
    assert_non_null(strstr(out, "/nonexistent/\\x1b[5mlib.so"));
    assert_non_null(strstr(out, "bad\\x1b[2J.yaml"));
    free(out);
    snprintf(args, sizeof args, "select --json --manifests %s", dir);
    assert_int_equal(run(args, &out), 0);
    er_yaml y;
    char *jdir;
    yaml_node_t *root = parse(out, &y, &jdir);
    yaml_node_t *sel = er_yaml_get(&y, root, "selected");
    assert_string_equal(sval(&y, sel, "rationale"), "r \x1b[31mRED \xc2\x9b" "0m \xe2\x80\xae "
                                                    "\xc2\x85 \x7f\r");
    er_yaml_free(&y);
    tu_rmrf(jdir);
    free(out);
    tu_rmrf(dir);

    /* a sysroot's file names: a GPU folder and a FastRPC node */
    char *root_dir = tu_tmpdir(), path[4400];
    snprintf(path, sizeof path, "mkdir -p '%s/proc/driver/nvidia/gpus/0000:01:00.0\x1b]0;x\x07' "
             "'%s/system' '%s/dev' && touch '%s/system/build.prop' "
             "'%s/dev/fastrpc-cdsp\x1b[2J'", root_dir, root_dir, root_dir, root_dir, root_dir);
    assert_int_equal(system(path), 0);
    snprintf(args, sizeof args, "probe --sysroot %s", root_dir);
    assert_int_equal(run_all(args, &out), 0);
    const char *raw = raw_control(out);
    if (raw)
        fail_msg("'edgert probe' printed a raw %s:\n%s", raw, out);
    assert_non_null(strstr(out, "fastrpc-cdsp\\x1b[2J"));
    free(out);
    tu_rmrf(root_dir);
}

/* A plugin that prints to stdout in its constructor, entry, init and
 * self-test (through stdio and straight to fd 1): --json output is still
 * one JSON document on stdout, and the plugin's text went to stderr. */
static void test_json_survives_chatty_plugin(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), *lib = tu_plugin("tp_chatty"), args[8192], *out;
    free(tu_manifest(dir, "chatty.yaml", "test-chatty", lib, NULL, NULL));
    free(lib);
    const char *cmds[] = {"select --json", "list --json"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        snprintf(args, sizeof args, "%s --manifests %s", cmds[i], dir);
        assert_int_equal(run(args, &out), 0);
        er_yaml y;
        char *jdir;
        parse(out, &y, &jdir); /* one JSON document, or the test fails here */
        assert_non_null(strstr(out, "\"name\":\"test-chatty\""));
        assert_null(strstr(out, "tp_chatty: "));
        er_yaml_free(&y);
        tu_rmrf(jdir);
        free(out);
    }
    snprintf(args, sizeof args, "select --json --manifests %s", dir);
    assert_int_equal(run_redirected("", args, "2>&1 >/dev/null", &out), 0);
    const char *said[] = {"hello from the constructor", "hello from init",
                          "hello from self_test", "straight to fd 1",
                          "init, left in stdio's buffer until exit"};
    for (size_t i = 0; i < sizeof said / sizeof said[0]; i++)
        if (!strstr(out, said[i]))
            fail_msg("the plugin's '%s' is not on stderr:\n%s", said[i], out);
    free(out);
    tu_rmrf(dir);
}

static void test_env_priority(void **state)
{
    (void)state;
    char cmd[4096], *out;
    /* EDGERT_PRIORITY sets the default, in any case; a bad value is a usage error naming it. */
    snprintf(cmd, sizeof cmd,
             "env EDGERT_PRIORITY=Fidelity %s select --json --device %s/x86-amx.yaml", CLI,
             DEVICES);
    FILE *p = popen(cmd, "r");
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, p);
    buf[n] = '\0';
    assert_int_equal(WEXITSTATUS(pclose(p)), 0);
    er_yaml y;
    char *dir;
    yaml_node_t *root = parse(buf, &y, &dir);
    assert_string_equal(sval(&y, root, "priority"), "fidelity");
    assert_string_equal(sval(&y, er_yaml_get(&y, root, "selected"), "name"), "avx512-w4a16");
    er_yaml_free(&y);
    tu_rmrf(dir);
    snprintf(cmd, sizeof cmd, "env EDGERT_PRIORITY=turbo %s select >/dev/null 2>&1", CLI);
    assert_int_equal(WEXITSTATUS(system(cmd)), 2);
    (void)out;
}

/* The JSON contract of `edgert select --json`. */
static void check_select_json(const char *text, const char *want_mode)
{
    er_yaml y;
    char *dir;
    yaml_node_t *root = parse(text, &y, &dir);
    assert_string_equal(sval(&y, root, "mode"), want_mode);
    assert_non_null(sval(&y, root, "priority"));
    yaml_node_t *dev = er_yaml_get(&y, root, "device");
    assert_non_null(dev);
    assert_non_null(sval(&y, dev, "class"));
    assert_non_null(sval(&y, dev, "arch"));
    yaml_node_t *flags = er_yaml_get(&y, dev, "cpu_flags");
    assert_non_null(flags);
    assert_int_equal(flags->type, YAML_SEQUENCE_NODE);
    yaml_node_t *sel = er_yaml_get(&y, root, "selected");
    assert_non_null(sel);
    assert_int_equal(sel->type, YAML_MAPPING_NODE);
    const char *selected = sval(&y, sel, "name");
    assert_non_null(er_yaml_get(&y, sel, "layout"));
    assert_non_null(sval(&y, sel, "runs_in_process"));
    const char *ev = sval(&y, sel, "evidence");
    assert_true(strcmp(ev, "declared") == 0 || strcmp(ev, "measured") == 0);
    yaml_node_t *cands = er_yaml_get(&y, root, "candidates");
    assert_int_equal(cands->type, YAML_SEQUENCE_NODE);
    int saw_selected_rank1 = 0;
    for (yaml_node_item_t *it = cands->data.sequence.items.start;
         it < cands->data.sequence.items.top; it++) {
        yaml_node_t *c = er_yaml_node(&y, *it);
        const char *name = sval(&y, c, "name");
        const char *eligible = sval(&y, c, "eligible");
        yaml_node_t *reasons = er_yaml_get(&y, c, "reasons");
        assert_int_equal(reasons->type, YAML_SEQUENCE_NODE);
        size_t nreasons =
            (size_t)(reasons->data.sequence.items.top - reasons->data.sequence.items.start);
        const char *rank = sval(&y, c, "rank");
        if (strcmp(eligible, "true") == 0) {
            assert_int_equal(nreasons, 0);
            assert_true(atoi(rank) >= 1);
            if (strcmp(name, selected) == 0 && atoi(rank) == 1)
                saw_selected_rank1 = 1;
        } else {
            assert_true(nreasons > 0);
            assert_string_equal(rank, "null");
        }
    }
    assert_true(saw_selected_rank1);
    er_yaml_free(&y);
    tu_rmrf(dir);
}

static void test_select_json_live(void **state)
{
    (void)state;
    char *out;
    assert_int_equal(run("select --json --priority speed", &out), 0);
    check_select_json(out, "live");
    /* Every manifest of the build tree is listed with a verdict. */
    const char *names[] = {"amx-w4a8",   "avx512-w4a16", "neon-w4a16",
                           "npu-export", "gpu-dense",    "ref-w4a16"};
    for (size_t i = 0; i < 6; i++) {
        char key[64];
        snprintf(key, sizeof key, "\"name\":\"%s\"", names[i]);
        if (!strstr(out, key))
            fail_msg("select --json does not list %s", names[i]);
    }
    free(out);
}

static void test_select_json_plan(void **state)
{
    (void)state;
    char *out;
    assert_int_equal(
        run("select --json --priority fidelity --device " DEVICES "/jetson-orin.yaml", &out), 0);
    check_select_json(out, "plan");
    assert_non_null(strstr(out, "\"name\":\"gpu-dense\""));
    free(out);
    assert_int_equal(run("select --explain --device " DEVICES "/android-hexagon.yaml", &out), 0);
    assert_non_null(strstr(out, "PLAN"));
    assert_non_null(strstr(out, "selected: npu-export"));
    free(out);
}

/* Bad manifests in a searched folder: still one JSON object on stdout, the
 * problem listed in "diagnostics" with its line, the others still used. */
static void test_json_with_bad_manifest(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    free(tu_write(dir, "broken.yaml", "manifest_version: 1\nname: x\nlayout: [\n"));
    char args[4096], *out;
    snprintf(args, sizeof args, "list --json --manifests %s --manifests %s", dir,
             EDGERT_TEST_BACKEND_DIR);
    assert_int_equal(run(args, &out), 0);
    er_yaml y;
    char *jdir;
    yaml_node_t *root = parse(out, &y, &jdir);
    yaml_node_t *diags = er_yaml_get(&y, root, "diagnostics");
    assert_int_equal(diags->type, YAML_SEQUENCE_NODE);
    int found = 0;
    for (yaml_node_item_t *it = diags->data.sequence.items.start;
         it < diags->data.sequence.items.top; it++) {
        yaml_node_t *d = er_yaml_node(&y, *it);
        const char *file = sval(&y, d, "file");
        if (file && strstr(file, "broken.yaml") && atoi(sval(&y, d, "line")) > 0)
            found = 1;
    }
    assert_true(found);
    assert_non_null(strstr(out, "\"name\":\"ref-w4a16\""));
    er_yaml_free(&y);
    tu_rmrf(jdir);
    free(out);
    /* named as a file it is an error, and --json still gives one object */
    snprintf(args, sizeof args, "select --json --manifests %s/broken.yaml", dir);
    assert_int_equal(run(args, &out), 4);
    root = parse(out, &y, &jdir);
    assert_non_null(strstr(sval(&y, root, "error"), "broken.yaml:4:1: YAML syntax"));
    assert_string_equal(sval(&y, root, "status"), "E_PARSE");
    er_yaml_free(&y);
    tu_rmrf(jdir);
    free(out);
    /* -q and EDGERT_LOG=error silence warnings, not a manifest's errors */
    static const char *const quiet[] = {"list -q", "list"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "%s --manifests %s --manifests %s", quiet[i], dir,
                 EDGERT_TEST_BACKEND_DIR);
        setenv("EDGERT_LOG", "error", 1);
        int rc = run_all(args, &out);
        unsetenv("EDGERT_LOG");
        if (rc != 0 || !strstr(out, "broken.yaml:4:1: error"))
            fail_msg("'%s' (EDGERT_LOG=error) hid the manifest's error: %s", args, out);
        free(out);
    }
    snprintf(args, sizeof args, "verify --json --backend no-such-backend --manifests %s", dir);
    if (run(args, &out) != 3 || !strstr(out, "broken.yaml\",\"line\":4,") ||
        !strstr(out, "\"exit_code\":3"))
        fail_msg("'%s': no manifest error or exit code in the object: %s", args, out);
    free(out);
    tu_rmrf(dir);

    /* a command failing on its own, and a usage error once --json was read: one
     * object each, with the error line (an integrator's walkthrough got none) */
    static const struct {
        const char *args, *says, *status;
        int rc;
    } fails[] = {
        {"bench --json --backend no-such-backend", "no-such-backend", "E_NOT_FOUND", 3},
        {"verify --json --backend no-such-backend", "no-such-backend", "E_NOT_FOUND", 3},
        {"select --json --frob", "--frob", "E_USAGE", 2},
        {"quantize /nonexistent/in.safetensors /tmp/o --sym --json", "cannot read", "E_IO", 4},
    };
    /* export's one object carries the status of a profile it cannot read */
    char *pdir = tu_tmpdir(), eargs[8400];
    assert_non_null(pdir);
    free(tu_write(pdir, "empty.yaml", "%s", ""));
    snprintf(eargs, sizeof eargs, "export --json --quick --device %s/empty.yaml --out %s/o",
             pdir, pdir);
    assert_int_equal(run(eargs, &out), 4);
    if (!strstr(out, "\"status\":\"E_PARSE\""))
        fail_msg("export --json on an empty profile: %s", out);
    free(out);
    tu_rmrf(pdir);
    for (size_t i = 0; i < sizeof fails / sizeof fails[0]; i++) {
        assert_int_equal(run(fails[i].args, &out), fails[i].rc);
        if (!strchr(out, '{') || strchr(out, '\n') != strrchr(out, '\n'))
            fail_msg("'%s': not one JSON object on one line: '%s'", fails[i].args, out);
        root = parse(out, &y, &jdir);
        if (!strstr(sval(&y, root, "error"), fails[i].says) ||
            strcmp(sval(&y, root, "status"), fails[i].status) != 0)
            fail_msg("'%s': %s", fails[i].args, out);
        er_yaml_free(&y);
        tu_rmrf(jdir);
        free(out);
    }
}

/* A manifest that reuses another backend's library: list --json gives its
 * plugin_name (null for the others), select --explain=full names it too. */
static void test_list_plugin_name(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), *lib = tu_plugin("tp_good"), args[4400], *out;
    free(tu_manifest(dir, "a.yaml", "test-good", lib, NULL, NULL));
    free(tu_manifest(dir, "b.yaml", "test-good-alias", lib, NULL, "plugin_name: test-good\n"));
    free(lib);
    snprintf(args, sizeof args, "list --json --manifests %s", dir);
    assert_int_equal(run(args, &out), 0);
    er_yaml y;
    char *jdir;
    yaml_node_t *root = parse(out, &y, &jdir);
    yaml_node_t *ms = er_yaml_get(&y, root, "manifests");
    assert_non_null(ms);
    assert_int_equal(ms->type, YAML_SEQUENCE_NODE);
    int seen = 0;
    for (yaml_node_item_t *it = ms->data.sequence.items.start; it < ms->data.sequence.items.top;
         it++) {
        yaml_node_t *c = er_yaml_node(&y, *it);
        const char *name = sval(&y, c, "name"), *pn = sval(&y, c, "plugin_name");
        assert_non_null(pn);
        if (strcmp(name, "test-good-alias") == 0)
            assert_string_equal(pn, "test-good");
        else
            assert_string_equal(pn, "null");
        seen++;
    }
    assert_int_equal(seen, 2);
    er_yaml_free(&y);
    tu_rmrf(jdir);
    free(out);
    snprintf(args, sizeof args, "select --explain=full --manifests %s", dir);
    assert_int_equal(run(args, &out), 0);
    if (!strstr(out, "plugin_name: test-good (the name its library gives itself)"))
        fail_msg("select --explain=full does not name the plugin_name:\n%s", out);
    free(out);
    tu_rmrf(dir);
}

static void test_probe_json(void **state)
{
    (void)state;
    char *out;
    assert_int_equal(
        run("probe --json --sysroot " EDGERT_TEST_FIXTURES "/sysroots/jetson-orin", &out), 0);
    er_yaml y;
    char *dir;
    yaml_node_t *root = parse(out, &y, &dir);
    yaml_node_t *dev = er_yaml_get(&y, root, "device");
    assert_string_equal(sval(&y, dev, "class"), "jetson");
    assert_string_equal(sval(&y, dev, "mode"), "live");
    er_yaml_free(&y);
    tu_rmrf(dir);
    free(out);
}

/* The facts of the device a handle opened with `sysroot` or `profile` sees. */
static edgert_device facts_of(const char *sysroot, const char *profile)
{
    char *empty = tu_tmpdir(); /* no manifest: the device is all we ask about */
    assert_non_null(empty);
    edgert_options o = {.struct_size = sizeof o};
    o.sysroot = sysroot;
    o.device_profile = profile;
    o.ignore_env = 1;
    o.threads = 1;
    o.defer_load = 1;
    o.log_level = EDGERT_LOG_ERROR;
    const char *none[1] = {empty};
    o.manifest_paths = none;
    o.manifest_path_count = 1;
    edgert_ctx *ctx = NULL;
    char err[512] = "";
    if (edgert_open(&o, &ctx, err, sizeof err) != EDGERT_OK)
        fail_msg("edgert_open(%s): %s", profile ? profile : sysroot, err);
    edgert_device d = *edgert_device_facts(ctx);
    edgert_close(ctx);
    tu_rmrf(empty);
    return d;
}

/* `probe --profile` writes a device profile that plans for the very device
 * probed: the live one, sysroots whose class exists on this build's arch,
 * and one whose CPU name holds a quote and a backslash (the probe turns
 * control characters into '?' before the writer sees them) and whose core
 * count is unknown (left for the user, said so, exit 1); read back through
 * --device's own loader. */
static void test_probe_profile_round_trip(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), *evil = tu_tmpdir(), args[2048], root[1024];
    assert_non_null(dir);
    assert_non_null(evil);
    char *mk = tu_write(evil, "mk.sh", "mkdir -p '%s/proc' && printf 'model name\\t: "
                        "Evil \"CPU\" \\\\ \\033[31m \\302\\233 \\t end\\nflags\\t\\t: "
                        "avx avx2\\n' > '%s/proc/cpuinfo'", evil, evil);
    snprintf(args, sizeof args, "sh '%s'", mk);
    assert_int_equal(system(args), 0);
    free(mk);
    const char *roots[] = {"/", evil, "nvidia-pascal", "x86-server", "rpi5", "empty",
#if defined(__aarch64__)
                           "hostile", "jetson-orin", "android-hexagon",
#endif
    };
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        snprintf(root, sizeof root, "%s%s", roots[i][0] == '/' ? "" : EDGERT_TEST_FIXTURES
                 "/sysroots/", roots[i]);
        char *out = NULL, *err = NULL;
        snprintf(args, sizeof args, "probe --profile --sysroot %s", root);
        edgert_device live = facts_of(root, NULL), plan;
        int want = live.logical_cores == 0 ? 1 : 0;
        assert_int_equal(run(args, &out), want);
        assert_int_equal(run_redirected("", args, "2>&1 >/dev/null", &err), want);
        char *file = tu_write(dir, "dev.yaml", "%s", out);
        if (want) { /* left for the user, and said so */
            if (!strstr(out, "# logical_cores: the probe could not tell") ||
                !strstr(err, "write logical_cores into the profile"))
                fail_msg("sysroot %s: no word on the unknown core count:\n%s%s", root, out, err);
            free(tu_write(dir, "dev.yaml", "%slogical_cores: 3\n", out));
            live.logical_cores = 3;
        }
        free(err);
        plan = facts_of(NULL, file);
        if (strcmp(live.name[0] ? live.name : "unnamed", plan.name) != 0 ||
            live.arch != plan.arch || live.device_class != plan.device_class ||
            live.cpu_flags != plan.cpu_flags ||
            live.cpu_flags_os_disabled != plan.cpu_flags_os_disabled ||
            live.logical_cores != plan.logical_cores ||
            live.mem_total_bytes >> 20 != plan.mem_total_bytes >> 20 || live.bf16 != plan.bf16 ||
            strcmp(live.accelerator, plan.accelerator) != 0 || !plan.planned)
            fail_msg("sysroot %s: the profile plans for another device:\n%s", root, out);
        free(file);
        free(out);
    }
#if defined(__x86_64__)
    /* A Jetson's files probed on x86_64: the arch is the build's, which has
     * no jetson class; the loader --device uses says so, and exit 1. */
    char *err = NULL;
    assert_int_equal(run_redirected("", "probe --profile --sysroot " EDGERT_TEST_FIXTURES
                                    "/sysroots/jetson-orin", "2>&1 >/dev/null", &err), 1);
    if (!strstr(err, "--device would refuse this profile: bad device profile: <stdout>:6:15: "
                     "device_class jetson does not exist on arch x86_64"))
        fail_msg("a profile --device refuses, not said so: %s", err);
    free(err);
#endif
    /* a TMPDIR that is not there is not the profile's fault: /tmp is used */
    char *err2 = NULL;
    if (run_redirected("env TMPDIR=/nonexistent/edgert", "probe --profile", "2>&1 >/dev/null",
                       &err2) != 0 || strstr(err2, "refuse"))
        fail_msg("probe --profile with TMPDIR missing: %s", err2);
    free(err2);
    /* a profile is YAML: not with --json; and not an option of other commands */
    assert_int_equal(run("probe --profile --json", NULL), 2);
    assert_int_equal(run("list --profile", NULL), 2);
    tu_rmrf(evil);
    tu_rmrf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_exit_codes),
        cmocka_unit_test(test_text_escapes_outside_strings),
        cmocka_unit_test(test_json_survives_chatty_plugin),
        cmocka_unit_test(test_env_priority),
        cmocka_unit_test(test_select_json_live),
        cmocka_unit_test(test_select_json_plan),
        cmocka_unit_test(test_json_with_bad_manifest),
        cmocka_unit_test(test_list_plugin_name),
        cmocka_unit_test(test_probe_json),
        cmocka_unit_test(test_probe_profile_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
