/*
 * tests/load/test_loader.c — gated loading: every reason code, in live mode on
 * this machine, with test-only plugins; and a backend run end to end through
 * the host table.
 */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "edgert/edgert.h"
#include "common/internal.h"
#include "test_util.h"
#include "gate/gate.h"

static edgert_ctx *open_dir(const char *dir, const char *disable, int strict, edgert_status *st_out)
{
    const char *paths[1] = {dir};
    edgert_options o = {.struct_size = sizeof o};
    o.manifest_paths = paths;
    o.manifest_path_count = 1;
    o.ignore_env = 1;
    o.disable = disable;
    o.strict = strict;
    o.threads = 2;
    o.log_level = EDGERT_LOG_ERROR;
    edgert_ctx *ctx = NULL;
    char err[512] = "";
    edgert_status st = edgert_open(&o, &ctx, err, sizeof err);
    if (st_out)
        *st_out = st;
    if (st != EDGERT_OK)
        print_message("edgert_open: %s\n", err);
    return ctx;
}

static int has_reason(const edgert_candidate *c, const char *prefix)
{
    for (size_t i = 0; i < c->reason_count; i++)
        if (strncmp(c->reasons[i], prefix, strlen(prefix)) == 0)
            return 1;
    return 0;
}

/* One manifest for one plugin in a fresh folder; returns the verdict. */
struct one {
    char *dir;
    edgert_ctx *ctx;
    const edgert_candidate *c;
};

static void one_open(struct one *o, const char *name, const char *plugin_base, const char *extra)
{
    o->dir = tu_tmpdir();
    assert_non_null(o->dir);
    char *lib = plugin_base ? tu_plugin(plugin_base) : NULL;
    free(tu_manifest(o->dir, "m.yaml", name, lib, NULL, extra));
    free(lib);
    o->ctx = open_dir(o->dir, NULL, 0, NULL);
    assert_non_null(o->ctx);
    o->c = edgert_candidate_find(o->ctx, name);
    assert_non_null(o->c);
}

static void one_close(struct one *o)
{
    edgert_close(o->ctx);
    tu_rmrf(o->dir);
}

static void expect_rejected(const char *name, const char *plugin, const char *extra,
                            const char *reason)
{
    struct one o;
    one_open(&o, name, plugin, extra);
    if (!has_reason(o.c, reason))
        fail_msg("%s: expected reason %s, got %zu reasons (%s) detail '%s'", name, reason,
                 o.c->reason_count, o.c->reason_count ? o.c->reasons[0] : "-", o.c->detail);
    assert_false(o.c->eligible);
    assert_false(o.c->loaded);
    assert_true(strlen(o.c->detail) > 0);
    one_close(&o);
}

static void test_good_plugin_loads(void **state)
{
    (void)state;
    struct one o;
    one_open(&o, "test-good", "tp_good", NULL);
    assert_true(o.c->eligible);
    assert_true(o.c->loaded);
    assert_int_equal(o.c->reason_count, 0);
    assert_non_null(o.c->path_chosen);
    one_close(&o);
}

static void test_reason_codes(void **state)
{
    (void)state;
    expect_rejected("test-abi2", "tp_abi2", NULL, "ABI_UNSUPPORTED");
    expect_rejected("test-noentry", "tp_noentry", NULL, "NO_ENTRY_SYMBOL");
    expect_rejected("test-selftest-fail", "tp_selftest_fail", NULL, "SELF_TEST_FAILED");
    expect_rejected("test-init-fail", "tp_init_fail", NULL, "INIT_FAILED");
    expect_rejected("test-badname", "tp_badname", NULL, "NAME_MISMATCH(someone-else)");
    expect_rejected("test-nogemm", "tp_nogemm", NULL, "MISSING_CAPABILITY(gemm)");
    expect_rejected("test-undefined", "tp_undefined", NULL, "DLOPEN_FAILED(");
    expect_rejected("test-missing", "no_such_plugin", NULL, "LIBRARY_MISSING");
    /* the reason is stable (no fd number); the detail names the file */
    struct one o;
    one_open(&o, "test-undefined", "tp_undefined", NULL);
    const char *r = o.c->reason_count ? o.c->reasons[o.c->reason_count - 1] : "";
    if (strstr(r, "/proc/self/fd") || !strstr(r, "undefined symbol") ||
        !strstr(o.c->detail, "tp_undefined"))
        fail_msg("DLOPEN_FAILED: reason '%s', detail '%s'", r, o.c->detail);
    one_close(&o);
}

static void test_not_a_library(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    char *fake = tu_write(dir, "libfake.so", "this is not an ELF file\n");
    free(tu_manifest(dir, "m.yaml", "test-fake", fake, NULL, NULL));
    edgert_ctx *ctx = open_dir(dir, NULL, 0, NULL);
    const edgert_candidate *c = edgert_candidate_find(ctx, "test-fake");
    assert_non_null(c);
    assert_true(has_reason(c, "DLOPEN_FAILED("));
    /* dlerror's text is part of the code, so a user sees why. */
    assert_non_null(strstr(c->reasons[0], "libfake.so"));
    edgert_close(ctx);
    free(fake);
    tu_rmrf(dir);
}

/* LIBRARY_MISSING says what the path is: the stat result decides the text,
 * never a stale errno (a folder used to be reported as "no such file"). */
static void test_library_not_a_file(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), loop[4200], missing[4200];
    snprintf(loop, sizeof loop, "%s/loop.so", dir);
    snprintf(missing, sizeof missing, "%s/missing.so", dir);
    assert_int_equal(symlink(loop, loop), 0); /* stat: ELOOP */
    const struct {
        const char *lib, *want;
    } cases[] = {
        {dir, "is a directory"},
        {"/dev/null", "is not a regular file"},
        {missing, "no such file"},
        {"/dev/null/x.so", "no such file"},
        {loop, "cannot be read: "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *sub = tu_tmpdir();
        free(tu_manifest(sub, "m.yaml", "test-nofile", cases[i].lib, NULL, NULL));
        edgert_ctx *ctx = open_dir(sub, NULL, 0, NULL);
        const edgert_candidate *c = edgert_candidate_find(ctx, "test-nofile");
        assert_non_null(c);
        assert_true(has_reason(c, "LIBRARY_MISSING"));
        char want[4400];
        snprintf(want, sizeof want, "%s: %s", cases[i].lib, cases[i].want);
        if (!strstr(c->detail, want))
            fail_msg("library %s: detail '%s' lacks '%s'", cases[i].lib, c->detail, want);
        edgert_close(ctx);
        tu_rmrf(sub);
    }
    tu_rmrf(dir);
}

static void test_checksum(void **state)
{
    (void)state;
    char *lib = tu_plugin("tp_good");
    uint64_t h = 0;
    assert_int_equal(er_file_xxh3(lib, &h), 0);
    char extra[128];

    snprintf(extra, sizeof extra, "checksum: \"xxh3-64:%016llx\"\n", (unsigned long long)h);
    struct one o;
    one_open(&o, "test-good", "tp_good", extra);
    assert_true(o.c->loaded);
    one_close(&o);

    snprintf(extra, sizeof extra, "checksum: \"xxh3-64:%016llx\"\n", (unsigned long long)(h ^ 1));
    expect_rejected("test-good", "tp_good", extra, "CHECKSUM_MISMATCH");
    free(lib);
}

/* The trap plugin dies when loaded: these pass only if the gates stop the
 * core before dlopen. */
static void test_gates_run_no_plugin_code(void **state)
{
    (void)state;
    char *empty = tu_tmpdir();
    edgert_ctx *ctx = open_dir(empty, NULL, 0, NULL);
    assert_non_null(ctx);
    const edgert_device *d = edgert_device_facts(ctx);
    const char *other_arch = d->arch == EDGERT_ARCH_X86_64 ? "arm64" : "x86_64";
    /* A flag of this arch the CPU lacks, if any. */
    const char *missing = NULL;
    unsigned lo = d->arch == EDGERT_ARCH_X86_64 ? EDGERT_CPU_SSE4_2 : EDGERT_CPU_ASIMD;
    unsigned hi = d->arch == EDGERT_ARCH_X86_64 ? EDGERT_CPU_AMX_FP16 : EDGERT_CPU_SVE2;
    for (unsigned f = lo; f <= hi && !missing; f++)
        if (!EDGERT_HAS_FLAG(d->cpu_flags, f) && !EDGERT_HAS_FLAG(d->cpu_flags_os_disabled, f))
            missing = edgert_cpu_flag_name((edgert_cpu_flag)f);
    edgert_close(ctx);
    tu_rmrf(empty);

    char extra[256];
    /* WRONG_ARCH: the manifest's arch line overrides tu_manifest's "any". */
    char *dir = tu_tmpdir();
    char *lib = tu_plugin("tp_trap");
    free(tu_write(
        dir, "m.yaml",
        "manifest_version: 1\nname: test-trap\nversion: \"1\"\nvendor: tests\n"
        "library: \"%s\"\nabi: {min: 1, max: 1}\narch: %s\ndevice_classes: [x86_cpu, arm64_cpu]\n"
        "layout: {format: f, weight_bits: 4, symmetric: true, activation_dtype: bf16, "
        "bits_per_weight: 4.25}\nruns_in_process: true\nverified: false\nrationale: r\n",
        lib, other_arch));
    ctx = open_dir(dir, NULL, 0, NULL);
    const edgert_candidate *c = edgert_candidate_find(ctx, "test-trap");
    assert_non_null(c);
    assert_true(has_reason(c, "WRONG_ARCH"));
    assert_false(c->loaded);
    edgert_close(ctx);
    tu_rmrf(dir);

    /* WRONG_DEVICE_CLASS */
    dir = tu_tmpdir();
    free(tu_write(dir, "m.yaml",
             "manifest_version: 1\nname: test-trap\nversion: \"1\"\nvendor: tests\n"
             "library: \"%s\"\nabi: {min: 1, max: 1}\narch: any\ndevice_classes: [npu_phone]\n"
             "layout: {format: f, weight_bits: 4, symmetric: true, activation_dtype: bf16, "
             "bits_per_weight: 4.25}\nruns_in_process: true\nverified: false\nrationale: r\n",
             lib));
    ctx = open_dir(dir, NULL, 0, NULL);
    c = edgert_candidate_find(ctx, "test-trap");
    assert_true(has_reason(c, "WRONG_DEVICE_CLASS"));
    edgert_close(ctx);
    tu_rmrf(dir);

    /* MISSING_CPU_FLAG(<flag>) */
    if (missing) {
        snprintf(extra, sizeof extra, "requires: {cpu_flags: [%s]}\n", missing);
        char want[64];
        snprintf(want, sizeof want, "MISSING_CPU_FLAG(%s)", missing);
        expect_rejected("test-trap", "tp_trap", extra, want);
    } else {
        tu_skip_line(__func__, "", "MISSING_CPU_FLAG not exercised live: this CPU has every "
                                   "flag of its arch");
    }
    /* DISABLED_BY_USER, named last in a list that blanks separate as well
     * as commas (the list's room was once counted by its commas alone, and
     * the names after the room ran out were dropped without a word) */
    dir = tu_tmpdir();
    free(tu_manifest(dir, "m.yaml", "test-trap", lib, NULL, NULL));
    const char *lists[] = {"other,test-trap", "one two\tthree test-trap", "a, b ,c,  test-trap "};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        ctx = open_dir(dir, lists[i], 0, NULL);
        c = edgert_candidate_find(ctx, "test-trap");
        if (!has_reason(c, "DISABLED_BY_USER"))
            fail_msg("disable \"%s\": test-trap not disabled", lists[i]);
        edgert_close(ctx);
    }
    tu_rmrf(dir);
    /* ABI range in the manifest that the core does not speak: refused before load. */
    dir = tu_tmpdir();
    free(tu_write(
        dir, "m.yaml",
        "manifest_version: 1\nname: test-trap\nversion: \"1\"\nvendor: tests\n"
        "library: \"%s\"\nabi: {min: 7, max: 9}\narch: any\ndevice_classes: [x86_cpu, arm64_cpu]\n"
        "layout: {format: f, weight_bits: 4, symmetric: true, activation_dtype: bf16, "
        "bits_per_weight: 4.25}\nruns_in_process: true\nverified: false\nrationale: r\n",
        lib));
    ctx = open_dir(dir, NULL, 0, NULL);
    c = edgert_candidate_find(ctx, "test-trap");
    assert_true(has_reason(c, "ABI_UNSUPPORTED"));
    edgert_close(ctx);
    tu_rmrf(dir);
    free(lib);
}

/* A failing plugin does not stop the others from loading. */
static void test_skip_and_continue(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    const char *plugins[][2] = {{"test-abi2", "tp_abi2"},         {"test-good", "tp_good"},
                                {"test-noentry", "tp_noentry"},   {"test-fast", "tp_fast"},
                                {"test-selftest-fail", "tp_selftest_fail"}};
    for (size_t i = 0; i < 5; i++) {
        char *lib = tu_plugin(plugins[i][1]);
        char file[64];
        snprintf(file, sizeof file, "%zu.yaml", i);
        free(tu_manifest(dir, file, plugins[i][0], lib, NULL, NULL));
        free(lib);
    }
    free(tu_write(dir, "9-broken.yaml", "manifest_version: 1\nname: [oops\n"));
    edgert_ctx *ctx = open_dir(dir, NULL, 0, NULL);
    assert_non_null(ctx);
    assert_int_equal(edgert_candidate_count(ctx), 5);
    assert_true(edgert_candidate_find(ctx, "test-good")->loaded);
    assert_true(edgert_candidate_find(ctx, "test-fast")->loaded);
    assert_false(edgert_candidate_find(ctx, "test-abi2")->eligible);
    int saw_broken = 0;
    for (size_t i = 0; i < edgert_diag_count(ctx); i++) {
        const edgert_diag *d = edgert_diag_at(ctx, i);
        if (d->level == EDGERT_LOG_ERROR && d->file && strstr(d->file, "9-broken.yaml") &&
            d->line >= 2)
            saw_broken = 1;
    }
    assert_true(saw_broken);
    edgert_close(ctx);
    tu_rmrf(dir);
}

/* Pack + GEMM through the public API with the test plugin and with the real
 * reference backend, compared with each other. Exercises the host table
 * (alloc, parallel_for over the pool). */
static void test_run_backends(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    char *lib = tu_plugin("tp_good");
    free(tu_manifest(dir, "m.yaml", "test-good", lib, NULL, NULL));
    free(lib);
    const char *paths[2] = {dir, EDGERT_TEST_BACKEND_DIR};
    edgert_options o = {.struct_size = sizeof o};
    o.manifest_paths = paths;
    o.manifest_path_count = 2;
    o.ignore_env = 1;
    o.threads = 2;
    o.log_level = EDGERT_LOG_ERROR;
    edgert_ctx *ctx = NULL;
    char err[512] = "";
    assert_int_equal(edgert_open(&o, &ctx, err, sizeof err), EDGERT_OK);
    const edgert_candidate *ref = edgert_candidate_find(ctx, "ref-w4a16");
    assert_non_null(ref);
    assert_true(ref->loaded);

    const uint32_t n = 37, k = 300, m = 3;
    float *w = malloc(sizeof(float) * n * k), *x = malloc(sizeof(float) * m * k);
    float *y1 = calloc(m * n, sizeof(float)), *y2 = calloc(m * n, sizeof(float));
    for (uint32_t i = 0; i < n * k; i++)
        w[i] = sinf((float)i * 0.37f) * 0.05f;
    for (uint32_t i = 0; i < m * k; i++)
        x[i] = cosf((float)i * 0.11f);
    edgert_qtensor q;
    assert_int_equal(edgert_quantize_rtn(w, n, k, 128, 0, &q), EDGERT_OK);

    const char *names[2] = {"test-good", "ref-w4a16"};
    float *ys[2] = {y1, y2};
    for (int b = 0; b < 2; b++) {
        edgert_backend *be = NULL;
        assert_int_equal(edgert_backend_open(ctx, names[b], NULL, &be, err, sizeof err), EDGERT_OK);
        edgert_packed *p = NULL;
        assert_int_equal(edgert_pack(be, &q.view, &p, err, sizeof err), EDGERT_OK);
        assert_true(edgert_packed_bytes(p) > 0);
        edgert_gemm_args a = {sizeof a, m, x, k, ys[b], n};
        assert_int_equal(edgert_gemm(be, p, &a, err, sizeof err), EDGERT_OK);
        edgert_packed_free(p);
        edgert_backend_close(be);
    }
    for (uint32_t i = 0; i < m * n; i++)
        assert_true(fabsf(y1[i] - y2[i]) <= 1e-4f * (1.0f + fabsf(y2[i])));

    /* Bogus options are refused by the plugin, with its message. */
    edgert_backend *be = NULL;
    assert_int_not_equal(
        edgert_backend_open(ctx, "ref-w4a16", "path=warp-drive", &be, err, sizeof err), EDGERT_OK);
    assert_null(be);
    assert_true(strlen(err) > 0);
    /* A non-loaded backend cannot be opened, and says why. */
    assert_int_equal(edgert_backend_open(ctx, "nope", NULL, &be, err, sizeof err),
                     EDGERT_E_NOT_FOUND);

    edgert_qtensor_free(&q);
    free(w); free(x); free(y1); free(y2);
    edgert_close(ctx);
    tu_rmrf(dir);
}

/* A plugin that fills gemm's error buffer without a terminating NUL: the
 * core terminates it, and the caller's message is bounded and holds it. */
static void test_unterminated_plugin_error(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    char *lib = tu_plugin("tp_overfill_gemm");
    free(tu_manifest(dir, "m.yaml", "test-overfill-gemm", lib, NULL, NULL));
    free(lib);
    edgert_status st;
    edgert_ctx *ctx = open_dir(dir, NULL, 0, &st);
    assert_int_equal(st, EDGERT_OK);
    char err[4096] = "";
    edgert_backend *be = NULL;
    if (edgert_backend_open(ctx, "test-overfill-gemm", NULL, &be, err, sizeof err) != EDGERT_OK)
        fail_msg("open: %s", err);
    float w[16 * 8] = {0}, x[7 * 8] = {0}, y[7 * 16];
    edgert_qtensor q;
    assert_int_equal(edgert_quantize_rtn(w, 16, 8, 8, 0, &q), EDGERT_OK);
    edgert_packed *p = NULL;
    assert_int_equal(edgert_pack(be, &q.view, &p, err, sizeof err), EDGERT_OK);
    edgert_gemm_args a = {sizeof a, 7, x, 8, y, 16};
    assert_int_equal(edgert_gemm(be, p, &a, err, sizeof err), EDGERT_E_PLUGIN);
    assert_non_null(strstr(err, "BBBB"));
    assert_true(strlen(err) < 512 + 64); /* the plugin's 512 bytes, terminated, and a prefix */
    edgert_packed_free(p);
    edgert_qtensor_free(&q);
    edgert_backend_close(be);
    edgert_close(ctx);
    tu_rmrf(dir);
}

/* ---- the first-contact cache follows the manifest -------------------------------- */

/* A verdict holds what the manifest handed the plugin: options the plugin
 * refused are INIT_FAILED, and once the manifest drops them the library is
 * checked again, not refused from the cache. */
static void test_verdict_follows_manifest(void **state)
{
    (void)state;
    char *saved, *cache = tu_fresh_cache(&saved), *dir = tu_tmpdir(), *lib = tu_plugin("tp_good");
    for (int fixed = 0; fixed < 2; fixed++) {
        free(tu_manifest(dir, "m.yaml", "test-good", lib, NULL,
                         fixed ? NULL : "plugin_options: \"path=x\"\n"));
        edgert_ctx *ctx = open_dir(dir, NULL, 0, NULL);
        assert_non_null(ctx);
        const edgert_candidate *c = edgert_candidate_find(ctx, "test-good");
        assert_non_null(c);
        if (fixed ? !c->loaded : !has_reason(c, "INIT_FAILED"))
            fail_msg("%s options: %s", fixed ? "without" : "with", c->detail);
        edgert_close(ctx);
    }
    free(lib);
    tu_rmrf(dir);
    tu_restore_cache(cache, saved);
}

/* ---- plugin_name: manifests sharing one library ------------------------------------ */

/* The number of entries in `dir` (0 when it cannot be read). */
static size_t count_files(const char *dir)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* Three manifests on tp_good (descriptor name "test-good"): one with its
 * name, one that calls it by plugin_name under another name, and one whose
 * plugin_options the plugin refuses, found first. Each gets its own verdict:
 * the refusal is not cached for the other two. */
static void test_plugin_name_shares_library(void **state)
{
    (void)state;
    char *saved, *cache = tu_fresh_cache(&saved), *dir = tu_tmpdir(), *lib = tu_plugin("tp_good");
    free(tu_manifest(dir, "0-opts.yaml", "test-good-opts", lib, NULL,
                     "plugin_name: test-good\nplugin_options: \"path=x\"\n"));
    free(tu_manifest(dir, "1-good.yaml", "test-good", lib, NULL, NULL));
    free(tu_manifest(dir, "2-alias.yaml", "test-good-alias", lib, NULL,
                     "plugin_name: test-good\n"));
    for (int pass = 0; pass < 2; pass++) { /* first contact, then the cached verdicts */
        edgert_ctx *ctx = open_dir(dir, NULL, 0, NULL);
        assert_non_null(ctx);
        const edgert_candidate *opts = edgert_candidate_find(ctx, "test-good-opts"),
                               *good = edgert_candidate_find(ctx, "test-good"),
                               *alias = edgert_candidate_find(ctx, "test-good-alias");
        assert_non_null(opts);
        assert_non_null(good);
        assert_non_null(alias);
        if (!has_reason(opts, "INIT_FAILED"))
            fail_msg("pass %d: test-good-opts: %s", pass, opts->detail);
        assert_false(opts->eligible);
        if (!good->loaded || !alias->loaded)
            fail_msg("pass %d: test-good: %s; test-good-alias: %s", pass, good->detail,
                     alias->detail);
        assert_true(good->eligible);
        assert_true(alias->eligible);
        assert_string_equal(alias->name, "test-good-alias");
        assert_string_equal(alias->plugin_name, "test-good");
        assert_null(good->plugin_name);
        edgert_close(ctx);
    }
    /* A cached verdict per manifest, though they share one library file. */
    char fc[4200];
    snprintf(fc, sizeof fc, "%s/edgert/first-contact", cache);
    assert_int_equal(count_files(fc), 3);
    free(lib);
    tu_rmrf(dir);
    tu_restore_cache(cache, saved);
}

/* NAME_MISMATCH compares the descriptor's name with plugin_name when the
 * manifest has one, else with name, and its detail says which. */
static void test_plugin_name_mismatch(void **state)
{
    (void)state;
    static const struct {
        const char *name, *plugin, *extra, *code, *detail;
    } cases[] = {
        {"test-good-alias", "tp_good", "plugin_name: test-wrong\n", "NAME_MISMATCH(test-good)",
         "the library calls itself 'test-good', the manifest's plugin_name is 'test-wrong'"},
        {"test-good-alias", "tp_good", NULL, "NAME_MISMATCH(test-good)",
         "the library calls itself 'test-good', the manifest's name is 'test-good-alias' (a "
         "typo in either, a swapped file, or another backend's library reused without "
         "'plugin_name: test-good'?)"},
        {"test-badname-alias", "tp_badname", "plugin_name: test-badname\n",
         "NAME_MISMATCH(someone-else)",
         "the library calls itself 'someone-else', the manifest's plugin_name is "
         "'test-badname'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct one o;
        one_open(&o, cases[i].name, cases[i].plugin, cases[i].extra);
        if (!has_reason(o.c, cases[i].code) || !strstr(o.c->detail, cases[i].detail))
            fail_msg("%s: want %s and '%s', got %s, '%s'", cases[i].name, cases[i].code,
                     cases[i].detail, o.c->reason_count ? o.c->reasons[0] : "-", o.c->detail);
        assert_false(o.c->eligible);
        assert_false(o.c->loaded);
        one_close(&o);
    }
    /* The descriptor's own name loads the library under a new name. */
    struct one o;
    one_open(&o, "someone-elses-alias", "tp_badname", "plugin_name: someone-else\n");
    if (!o.c->loaded)
        fail_msg("someone-elses-alias: %s", o.c->detail);
    one_close(&o);
}

/* A plugin's messages begin with its descriptor's name: under plugin_name
 * the candidate's detail keeps them as written, and the caller's error puts
 * the backend's own name in front. With the real reference backend. */
static void test_plugin_name_messages(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    const char *lib = EDGERT_TEST_BACKEND_DIR "/libedgert-ref-w4a16.so";
    free(tu_manifest_abi(dir, "a.yaml", "ref-alias", lib, 2u, NULL, "plugin_name: ref-w4a16\n"));
    free(tu_manifest_abi(dir, "b.yaml", "ref-alias-opts", lib, 2u, NULL,
                         "plugin_name: ref-w4a16\nplugin_options: path=warp-drive\n"));
    edgert_ctx *ctx = open_dir(dir, NULL, 0, NULL);
    assert_non_null(ctx);
    const edgert_candidate *a = edgert_candidate_find(ctx, "ref-alias"),
                           *b = edgert_candidate_find(ctx, "ref-alias-opts");
    assert_non_null(a);
    assert_non_null(b);
    if (!a->loaded)
        fail_msg("ref-alias: %s", a->detail);
    assert_true(has_reason(b, "INIT_FAILED"));
    if (!strstr(b->detail, "ref-w4a16: init: unknown option 'path=warp-drive'") ||
        strstr(b->detail, "init: ref-w4a16"))
        fail_msg("ref-alias-opts: detail '%s'", b->detail);
    char err[512] = "";
    edgert_backend *be = NULL;
    assert_int_equal(edgert_backend_open(ctx, "ref-alias", "path=warp-drive", &be, err, sizeof err),
                     EDGERT_E_USAGE);
    assert_null(be);
    const char *want = "ref-alias: ref-w4a16: init: unknown option 'path=warp-drive'";
    if (strncmp(err, want, strlen(want)) != 0)
        fail_msg("ref-alias: error '%s'", err);
    assert_int_equal(edgert_backend_open(ctx, "ref-alias", NULL, &be, err, sizeof err), EDGERT_OK);
    assert_string_equal(edgert_backend_name(be), "ref-alias");
    edgert_backend_close(be);
    edgert_close(ctx);
    tu_rmrf(dir);
}

/* Two handles in one process do not interfere. */
static void test_two_handles(void **state)
{
    (void)state;
    char *d1 = tu_tmpdir(), *d2 = tu_tmpdir();
    char *lib = tu_plugin("tp_good");
    free(tu_manifest(d1, "m.yaml", "test-good", lib, NULL, NULL));
    free(lib);
    lib = tu_plugin("tp_fast");
    free(tu_manifest(d2, "m.yaml", "test-fast", lib, NULL, NULL));
    free(lib);
    edgert_ctx *a = open_dir(d1, NULL, 0, NULL), *b = open_dir(d2, "test-fast", 0, NULL);
    assert_non_null(edgert_candidate_find(a, "test-good"));
    assert_null(edgert_candidate_find(a, "test-fast"));
    assert_true(edgert_candidate_find(a, "test-good")->eligible);
    assert_false(edgert_candidate_find(b, "test-fast")->eligible); /* disabled in b only */
    edgert_close(b);
    assert_true(edgert_candidate_find(a, "test-good")->loaded);
    edgert_close(a);
    tu_rmrf(d1);
    tu_rmrf(d2);
}

/* A plugin's log line at a level that is none reaches the integrator's
 * callback at the nearest level (99: DEBUG, 0: ERROR), saying so, never
 * with the made-up level. */
typedef struct log_seen {
    int bad_level, said_99, said_0;
} log_seen;

static void seen_log(void *user, edgert_log_level level, const char *message)
{
    log_seen *s = user;
    if (level != EDGERT_LOG_ERROR && level != EDGERT_LOG_WARN && level != EDGERT_LOG_INFO &&
        level != EDGERT_LOG_DEBUG)
        s->bad_level++;
    if (level == EDGERT_LOG_DEBUG && strstr(message, "(log level 99, which is none): a made-up"))
        s->said_99++;
    if (level == EDGERT_LOG_ERROR && strstr(message, "(log level 0, which is none): level zero"))
        s->said_0++;
}

static void test_plugin_log_levels(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), *lib = tu_plugin("tp_log_level");
    free(tu_manifest(dir, "l.yaml", "test-log-level", lib, NULL, NULL));
    free(lib);
    log_seen seen = {0};
    char err[512] = "";
    edgert_ctx *ctx = tu_open_full(dir, 1, NULL, NULL, seen_log, &seen, EDGERT_LOG_DEBUG, err,
                                   sizeof err);
    if (!ctx)
        fail_msg("edgert_open: %s", err);
    assert_true(edgert_candidate_find(ctx, "test-log-level")->loaded); /* init ran here */
    edgert_close(ctx);
    assert_int_equal(seen.bad_level, 0);
    assert_true(seen.said_99 >= 1 && seen.said_0 >= 1);
    tu_rmrf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_plugin_loads),
        cmocka_unit_test(test_reason_codes),
        cmocka_unit_test(test_not_a_library),
        cmocka_unit_test(test_library_not_a_file),
        cmocka_unit_test(test_checksum),
        cmocka_unit_test(test_gates_run_no_plugin_code),
        cmocka_unit_test(test_skip_and_continue),
        cmocka_unit_test(test_run_backends),
        cmocka_unit_test(test_unterminated_plugin_error),
        cmocka_unit_test(test_two_handles),
        cmocka_unit_test(test_verdict_follows_manifest),
        cmocka_unit_test(test_plugin_name_shares_library),
        cmocka_unit_test(test_plugin_name_mismatch),
        cmocka_unit_test(test_plugin_name_messages),
        cmocka_unit_test(test_plugin_log_levels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
