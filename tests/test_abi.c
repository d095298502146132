/*
 * tests/test_abi.c — the plugin ABI and the public API can grow without
 * breaking what was built against them (issue 12: ABI v1 made safe to grow).
 *
 * - A plugin built as against a FUTURE plugin.h (tp_future: ABI 1 and 2, a
 *   descriptor grown at the end) loads in today's core with ABI 1, and its
 *   entry answers ABI 2 to a core that offers it.
 * - A plugin built against TODAY's header (tp_good, one descriptor) answers
 *   ABI 1 to a future core offering [1, 2], and refuses [2, 3] naming both
 *   ranges: negotiation knows the length of each side's range.
 * - Callers' structs: edgert_gemm_args and edgert_qweights of exactly their
 *   V1 size, and larger (a caller built against a later header), are
 *   accepted; one byte short is refused. edgert_options of its V1 size (no
 *   no_env_selection field) opens a handle.
 * - A gate fails closed: when the reason string of a failing gate cannot be
 *   allocated (er_strdup wrapped at link time to fail for it), the candidate
 *   is still rejected and its code never runs — the plugin behind it traps
 *   in its constructor, so running it would end this test.
 */
#include <dlfcn.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "edgert/edgert.h"
#include "internal.h"
#include "test_util.h"

/* ---- allocation failure, injected (linked with -Wl,--wrap=er_strdup) --------- */

char *__real_er_strdup(const char *s);
char *__wrap_er_strdup(const char *s);

/* The prefix of the strings whose copy fails; NULL: none. Test-only state of
 * this test program, set and cleared by one test. */
static const char *fail_strdup_of;

char *__wrap_er_strdup(const char *s)
{
    if (fail_strdup_of && s && strncmp(s, fail_strdup_of, strlen(fail_strdup_of)) == 0)
        return NULL;
    return __real_er_strdup(s);
}

/* ---- helpers ---------------------------------------------------------------------- */

static edgert_ctx *open_dir(const char *dir)
{
    const char *paths[1] = {dir};
    edgert_options o = {.struct_size = sizeof o};
    o.manifest_paths = paths;
    o.manifest_path_count = 1;
    o.ignore_env = 1;
    o.threads = 1;
    o.log_level = EDGERT_LOG_ERROR;
    edgert_ctx *ctx = NULL;
    char err[512] = "";
    if (edgert_open(&o, &ctx, err, sizeof err) != EDGERT_OK)
        fail_msg("edgert_open: %s", err);
    return ctx;
}

static edgert_plugin_entry_fn entry_of(void *dl)
{
    void *sym = dlsym(dl, EDGERT_PLUGIN_ENTRY_SYMBOL);
    assert_non_null(sym);
    edgert_plugin_entry_fn fn;
    memcpy(&fn, &sym, sizeof fn);
    return fn;
}

/* ---- negotiation ------------------------------------------------------------------ */

static void test_future_plugin_in_todays_core(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), *lib = tu_plugin("tp_future");
    assert_non_null(dir);
    free(tu_manifest(dir, "future.yaml", "test-future", lib, NULL, NULL));
    edgert_ctx *ctx = open_dir(dir);
    const edgert_candidate *c = edgert_candidate_find(ctx, "test-future");
    assert_non_null(c);
    if (!c->loaded)
        fail_msg("test-future not loaded: %s", c->reason_count ? c->reasons[0] : c->detail);
    assert_int_equal(c->abi_version, 1);
    edgert_close(ctx);

    /* Its entry, as a future core offering ABI 2 would call it. */
    void *dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(dl);
    edgert_plugin_entry_fn entry = entry_of(dl);
    const edgert_plugin *d = NULL;
    char err[256] = "";
    assert_int_equal(entry(1, 2, NULL, &d, err, sizeof err), EDGERT_OK);
    assert_int_equal(d->abi_version, 2);
    assert_true(d->struct_size > sizeof(edgert_plugin)); /* the grown descriptor */
    assert_int_equal(entry(2, 5, NULL, &d, err, sizeof err), EDGERT_OK);
    assert_int_equal(d->abi_version, 2);
    assert_int_equal(entry(1, 1, NULL, &d, err, sizeof err), EDGERT_OK);
    assert_int_equal(d->abi_version, 1);
    assert_int_equal(entry(3, 5, NULL, &d, err, sizeof err), EDGERT_E_ABI);
    assert_null(d);
    assert_non_null(strstr(err, "[3, 5]"));
    assert_non_null(strstr(err, "[1, 2]"));
    dlclose(dl);
    free(lib);
    tu_rmrf(dir);
}

static void test_todays_plugin_in_a_future_core(void **state)
{
    (void)state;
    char *lib = tu_plugin("tp_good");
    void *dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(dl);
    edgert_plugin_entry_fn entry = entry_of(dl);
    const edgert_plugin *d = NULL;
    char err[256] = "";
    /* A core that speaks [1, 2]: the plugin's array has one descriptor, so
     * ABI 1, never a read past the array. */
    assert_int_equal(entry(1, 2, NULL, &d, err, sizeof err), EDGERT_OK);
    assert_int_equal(d->abi_version, 1);
    assert_int_equal(entry(1, 65535, NULL, &d, err, sizeof err), EDGERT_OK);
    assert_int_equal(d->abi_version, 1);
    assert_int_equal(entry(2, 3, NULL, &d, err, sizeof err), EDGERT_E_ABI);
    assert_null(d);
    assert_non_null(strstr(err, "[2, 3]"));
    assert_non_null(strstr(err, "[1, 1]"));
    dlclose(dl);
    free(lib);
}

/* The header's own negotiation on arrays with holes, directly. */
static void test_negotiate_ranges(void **state)
{
    (void)state;
    static const edgert_plugin d2 = {.abi_version = 2u}, d3 = {.abi_version = 3u};
    static const edgert_plugin *const by_abi[] = {NULL, &d2, &d3}; /* ABI 2..3 */
    const edgert_plugin *d = NULL;
    char err[256] = "";
    assert_int_equal(EDGERT_PLUGIN_NEGOTIATE(1, 9, by_abi, "t", &d, err, sizeof err), EDGERT_OK);
    assert_ptr_equal(d, &d3);
    assert_int_equal(EDGERT_PLUGIN_NEGOTIATE(1, 2, by_abi, "t", &d, err, sizeof err), EDGERT_OK);
    assert_ptr_equal(d, &d2);
    assert_int_equal(EDGERT_PLUGIN_NEGOTIATE(1, 1, by_abi, "t", &d, err, sizeof err),
                     EDGERT_E_ABI);
    assert_null(d);
    assert_non_null(strstr(err, "[2, 3]")); /* the plugin's real range */
    assert_int_equal(EDGERT_PLUGIN_NEGOTIATE(3, 2, by_abi, "t", &d, err, sizeof err),
                     EDGERT_E_ABI); /* an inverted host range is empty */
    assert_int_equal(EDGERT_PLUGIN_NEGOTIATE(0, 0, by_abi, "t", &d, NULL, 0), EDGERT_E_ABI);
}

/* ---- the callers' structs ----------------------------------------------------------- */

static void test_callers_structs_by_size(void **state)
{
    (void)state;
    edgert_options o = {.struct_size = EDGERT_OPTIONS_V1_SIZE}; /* a version-1 caller */
    o.ignore_env = 1;
    o.threads = 1;
    o.log_level = EDGERT_LOG_ERROR;
    edgert_ctx *ctx = NULL;
    char err[512] = "";
    assert_int_equal(edgert_open(&o, &ctx, err, sizeof err), EDGERT_OK);
    edgert_backend *b = NULL;
    assert_int_equal(edgert_backend_open(ctx, "ref-w4a16", NULL, &b, err, sizeof err), EDGERT_OK);

    enum { N = 5, K = 256 };
    float w[N * K], x[K], y[N + 1];
    for (int i = 0; i < N * K; i++)
        w[i] = 0.01f * (float)(i % 13 - 6);
    for (int i = 0; i < K; i++)
        x[i] = (float)(i % 5) - 2.0f;
    edgert_qtensor q;
    assert_int_equal(edgert_quantize_rtn(w, N, K, 128, 0, &q), EDGERT_OK);
    struct {
        edgert_qweights w;
        char later[16]; /* what a later header appends: present, unread */
    } grown = {.w = q.view};
    grown.w.struct_size = sizeof grown;
    static const uint32_t qsizes[] = {EDGERT_QWEIGHTS_V1_SIZE, sizeof grown};
    edgert_packed *p = NULL;
    for (size_t i = 0; i < 2; i++) {
        grown.w.struct_size = qsizes[i];
        assert_int_equal(edgert_pack(b, &grown.w, &p, err, sizeof err), EDGERT_OK);
        edgert_packed_free(p);
        p = NULL;
    }
    grown.w.struct_size = EDGERT_QWEIGHTS_V1_SIZE - 1u;
    assert_int_equal(edgert_pack(b, &grown.w, &p, err, sizeof err), EDGERT_E_USAGE);
    grown.w.struct_size = EDGERT_QWEIGHTS_V1_SIZE;
    assert_int_equal(edgert_pack(b, &grown.w, &p, err, sizeof err), EDGERT_OK);

    struct {
        edgert_gemm_args a;
        char later[16];
    } ga = {.a = {.m = 1, .x = x, .ldx = K, .y = y, .ldy = N}};
    static const uint32_t gsizes[] = {EDGERT_GEMM_ARGS_V1_SIZE, sizeof ga};
    for (size_t i = 0; i < 2; i++) {
        ga.a.struct_size = gsizes[i];
        y[0] = NAN;
        assert_int_equal(edgert_gemm(b, p, &ga.a, err, sizeof err), EDGERT_OK);
        assert_false(isnan(y[0]));
    }
    ga.a.struct_size = EDGERT_GEMM_ARGS_V1_SIZE - 1u;
    assert_int_equal(edgert_gemm(b, p, &ga.a, err, sizeof err), EDGERT_E_USAGE);

    edgert_packed_free(p);
    edgert_qtensor_free(&q);
    edgert_backend_close(b);
    edgert_close(ctx);
    o.struct_size = EDGERT_OPTIONS_V1_SIZE - 1u;
    assert_int_equal(edgert_open(&o, &ctx, err, sizeof err), EDGERT_E_USAGE);
}

/* ---- a gate fails closed ------------------------------------------------------------ */

static void test_gate_without_memory_still_rejects(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), *lib = tu_plugin("tp_trap");
    assert_non_null(dir);
    /* tp_trap executes __builtin_trap in its constructor; its manifest fails
     * the device-class gate (no device is a jetson and an x86 CPU at once). */
    char *m = tu_write(dir, "trap.yaml",
                       "manifest_version: 1\nname: test-trap\nversion: \"0\"\nvendor: tests\n"
                       "library: \"%s\"\nabi: {min: 1, max: 1}\narch: any\n"
                       "device_classes: [%s]\n"
                       "layout: {format: f, weight_bits: 4, symmetric: true, "
                       "activation_dtype: fp32, bits_per_weight: 4.5}\n"
                       "runs_in_process: true\nverified: false\nrationale: \"trap\"\n",
                       lib, edgert_device_class_name(EDGERT_CLASS_JETSON));
    free(m);
    fail_strdup_of = "WRONG_DEVICE_CLASS"; /* the gate's reason cannot be recorded */
    edgert_ctx *ctx = open_dir(dir);
    fail_strdup_of = NULL;
    const edgert_candidate *c = edgert_candidate_find(ctx, "test-trap");
    assert_non_null(c);
    if (edgert_device_facts(ctx)->device_class == EDGERT_CLASS_JETSON) {
        edgert_close(ctx);
        free(lib);
        tu_rmrf(dir);
        tu_skip("this machine is a Jetson: the manifest's gate does not fail here");
    }
    assert_int_equal(c->reason_count, 0); /* the string was lost ... */
    assert_false(c->eligible);            /* ... the verdict was not */
    assert_false(c->loaded);
    char err[512] = "";
    edgert_selection *sel = NULL;
    assert_int_equal(edgert_select(ctx, EDGERT_PRIORITY_SPEED, "test-trap", &sel, err, sizeof err),
                     EDGERT_E_NOT_ELIGIBLE);
    assert_non_null(strstr(err, "WRONG_DEVICE_CLASS")); /* named from the gate's bit */
    edgert_selection_free(sel);
    edgert_close(ctx);
    free(lib);
    tu_rmrf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_future_plugin_in_todays_core),
        cmocka_unit_test(test_todays_plugin_in_a_future_core),
        cmocka_unit_test(test_negotiate_ranges),
        cmocka_unit_test(test_callers_structs_by_size),
        cmocka_unit_test(test_gate_without_memory_still_rejects),
    };
    return tu_run_group("test_abi", tests, NULL, NULL);
}
