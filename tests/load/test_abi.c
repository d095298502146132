/*
 * tests/load/test_abi.c — the plugin ABI and the public API can grow without
 * breaking what was built against them (ABI v1 made safe to grow).
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
 * - What the library fills in a caller's struct: edgert_qtensor up to
 *   EDGERT_QTENSOR_V1_SIZE and not a byte past it; edgert_layout and
 *   edgert_figures, which sit inside edgert_candidate, never grow.
 * - ABI 2 (the mappable packed form): a descriptor answering ABI 2 with
 *   ABI 1's size is ABI_UNSUPPORTED; packed_flags bits ABI 2 does not
 *   define, MAPPABLE without packed_data and packed_map, or a packed_layout
 *   id a cache could not use as a key are INVALID_DESCRIPTOR; the ABI-2
 *   fields of an ABI-1 answer are never read. Plugins that answer ABI 1, or
 *   ABI 2 without the capability, load and say their weights cannot be
 *   mapped; a plugin whose packed_data or packed_map breaks the contract is
 *   caught by the core (EDGERT_E_PLUGIN).
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
#include "common/internal.h"
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
    char err[512] = "";
    edgert_ctx *ctx = tu_open(dir, 1, err, sizeof err);
    if (ctx == NULL)
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

/* ---- ABI 2: the mappable packed form ------------------------------------------------- */

/* One test plugin in a fresh folder, its manifest declaring ABI [lo, hi]
 * (tu_manifest declares [1, 1]); the handle, with the folder in *dir. */
static edgert_ctx *open_one(const char *name, const char *plugin, unsigned lo, unsigned hi,
                            char **dir)
{
    *dir = tu_tmpdir();
    assert_non_null(*dir);
    char *lib = tu_plugin(plugin);
    free(tu_write(*dir, "m.yaml",
                  "manifest_version: 1\nname: %s\nversion: \"0\"\nvendor: tests\n"
                  "library: \"%s\"\nabi: {min: %u, max: %u}\narch: any\n"
                  "device_classes: [x86_cpu, arm64_cpu]\n"
                  "layout: {format: f, weight_bits: 4, symmetric: true, "
                  "activation_dtype: fp32, bits_per_weight: 4.5}\n"
                  "runs_in_process: true\nverified: false\nrationale: \"abi\"\n",
                  name, lib, lo, hi));
    free(lib);
    return open_dir(*dir);
}

static int has_reason(const edgert_candidate *c, const char *prefix)
{
    for (size_t i = 0; i < c->reason_count; i++)
        if (strncmp(c->reasons[i], prefix, strlen(prefix)) == 0)
            return 1;
    return 0;
}

static void test_abi2_descriptor_gates(void **state)
{
    (void)state;
    static const struct {
        const char *name, *plugin, *reason, *detail;
    } cases[] = {
        {"test-abi2-short", "tp_abi2_short", "ABI_UNSUPPORTED", "answered ABI 2 with a descriptor"},
        {"test-abi2-nomap", "tp_abi2_nomap", "INVALID_DESCRIPTOR(packed_data, packed_map NULL",
         "MAPPABLE needs it"},
        {"test-abi2-badflags", "tp_abi2_badflags", "INVALID_DESCRIPTOR(packed_flags has bits",
         "0x80"},
        {"test-abi2-badlayout", "tp_abi2_badlayout", "INVALID_DESCRIPTOR(packed_layout",
         "packed_layout"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *dir = NULL;
        edgert_ctx *ctx = open_one(cases[i].name, cases[i].plugin, 1, 2, &dir);
        const edgert_candidate *c = edgert_candidate_find(ctx, cases[i].name);
        assert_non_null(c);
        if (!has_reason(c, cases[i].reason) || !strstr(c->detail, cases[i].detail))
            fail_msg("%s: expected %s ('%s'), got %zu reasons (%s) detail '%s'", cases[i].name,
                     cases[i].reason, cases[i].detail, c->reason_count,
                     c->reason_count ? c->reasons[0] : "-", c->detail);
        assert_false(c->eligible);
        assert_false(c->loaded);
        edgert_close(ctx);
        tu_rmrf(dir);
    }
}

/* A loaded backend whose packed weights cannot be mapped says so everywhere. */
static void expect_not_mappable(edgert_ctx *ctx, const char *name)
{
    char err[512] = "";
    edgert_backend *b = NULL;
    if (edgert_backend_open(ctx, name, NULL, &b, err, sizeof err) != EDGERT_OK)
        fail_msg("%s: %s", name, err);
    assert_null(edgert_backend_packed_layout(b));
    float scales[2] = {0.5f, 0.25f};
    uint8_t codes[4] = {0x9A, 0x78, 0x87, 0xA9};
    edgert_qweights w = {sizeof w, 2, 4, 4, codes, scales, NULL, "w", NULL};
    edgert_packed *p = NULL, *m = (edgert_packed *)(uintptr_t)1;
    assert_int_equal(edgert_pack(b, &w, &p, err, sizeof err), EDGERT_OK);
    const void *data = (const void *)(uintptr_t)1;
    size_t size = 7;
    err[0] = '\0';
    assert_int_equal(edgert_packed_data(p, &data, &size, err, sizeof err), EDGERT_E_UNSUPPORTED);
    assert_null(data);
    assert_int_equal(size, 0);
    assert_non_null(strstr(err, name));
    assert_non_null(strstr(err, "cannot be mapped"));
    static _Alignas(64) const unsigned char bytes[256];
    err[0] = '\0';
    assert_int_equal(edgert_packed_map(b, &w, bytes, sizeof bytes, &m, err, sizeof err),
                     EDGERT_E_UNSUPPORTED);
    assert_null(m);
    assert_non_null(strstr(err, name));
    edgert_packed_free(p);
    edgert_backend_close(b);
}

static void test_abi2_plugins_that_load(void **state)
{
    (void)state;
    static const struct {
        const char *name, *plugin;
        unsigned hi, abi;
    } cases[] = {
        {"test-abi2-plain", "tp_abi2_plain", 2, 2},       /* ABI 2, packed_flags 0 */
        {"test-abi1-v2fields", "tp_abi1_v2fields", 2, 1}, /* ABI-2 fields of an ABI-1 answer */
        {"test-good", "tp_good", 1, 1},                   /* an ABI-1 plugin */
        {"test-future", "tp_future", 2, 2},               /* a grown descriptor, ABI 2 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *dir = NULL;
        edgert_ctx *ctx = open_one(cases[i].name, cases[i].plugin, 1, cases[i].hi, &dir);
        const edgert_candidate *c = edgert_candidate_find(ctx, cases[i].name);
        assert_non_null(c);
        if (!c->loaded)
            fail_msg("%s not loaded: %s %s", cases[i].name,
                     c->reason_count ? c->reasons[0] : "-", c->detail);
        assert_int_equal(c->abi_version, cases[i].abi);
        expect_not_mappable(ctx, cases[i].name);
        edgert_close(ctx);
        tu_rmrf(dir);
    }
}

/* packed_data answering a misaligned pointer, packed_map "succeeding" without
 * a handle: the core refuses both answers instead of passing them on. */
static void test_abi2_contract_breaches_caught(void **state)
{
    (void)state;
    char *dir = NULL, err[512] = "";
    edgert_ctx *ctx = open_one("test-abi2-liar", "tp_abi2_liar", 1, 2, &dir);
    edgert_backend *b = NULL;
    if (edgert_backend_open(ctx, "test-abi2-liar", NULL, &b, err, sizeof err) != EDGERT_OK)
        fail_msg("test-abi2-liar: %s", err);
    assert_string_equal(edgert_backend_packed_layout(b), "test-abi2-liar/1");
    float scales[2] = {0.5f, 0.25f};
    uint8_t codes[4] = {0x9A, 0x78, 0x87, 0xA9};
    edgert_qweights w = {sizeof w, 2, 4, 4, codes, scales, NULL, "w", NULL};
    edgert_packed *p = NULL, *m = NULL;
    assert_int_equal(edgert_pack(b, &w, &p, err, sizeof err), EDGERT_OK);
    const void *data = NULL;
    size_t size = 0;
    assert_int_equal(edgert_packed_data(p, &data, &size, err, sizeof err), EDGERT_E_PLUGIN);
    assert_null(data);
    assert_non_null(strstr(err, "broke the contract"));
    static _Alignas(64) const unsigned char bytes[256];
    assert_int_equal(edgert_packed_map(b, &w, bytes, sizeof bytes, &m, err, sizeof err),
                     EDGERT_E_PLUGIN);
    assert_null(m);
    assert_non_null(strstr(err, "test-abi2-liar"));
    edgert_packed_free(p);
    edgert_backend_close(b);
    edgert_close(ctx);
    tu_rmrf(dir);
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
    edgert_qtensor q = {0}; /* the library writes version 1 of its view: perm stays NULL */
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

/* A program built against a newer header hands a struct larger than this
 * library's: accepted when the bytes the library does not know are all zero
 * (nothing was asked that it would ignore), refused naming the first
 * non-zero byte's offset when one is set, for every struct a caller passes. */
static void assert_refused_at(edgert_status st, const char *err, size_t offset)
{
    char want[48];
    snprintf(want, sizeof want, "byte %zu is not zero", offset);
    assert_int_equal(st, EDGERT_E_USAGE);
    if (!strstr(err, want))
        fail_msg("expected \"%s\" in: %s", want, err);
}

static void test_newer_callers_unknown_fields(void **state)
{
    (void)state;
    char err[512] = "";
    struct {
        edgert_options o;
        unsigned char later[16];
    } go = {.o = {.struct_size = sizeof go, .ignore_env = 1, .threads = 1,
                  .log_level = EDGERT_LOG_ERROR}};
    edgert_ctx *ctx = NULL;
    go.later[3] = 1;
    assert_refused_at(edgert_open(&go.o, &ctx, err, sizeof err), err,
                      offsetof(__typeof__(go), later) + 3);
    assert_null(ctx);
    go.later[3] = 0;
    assert_int_equal(edgert_open(&go.o, &ctx, err, sizeof err), EDGERT_OK);
    edgert_backend *b = NULL;
    assert_int_equal(edgert_backend_open(ctx, "ref-w4a16", NULL, &b, err, sizeof err), EDGERT_OK);

    enum { N = 3, K = 128 };
    float w[N * K], x[K], y[N];
    for (int i = 0; i < N * K; i++)
        w[i] = 0.02f * (float)(i % 7 - 3);
    for (int i = 0; i < K; i++)
        x[i] = (float)(i % 3) - 1.0f;
    edgert_qtensor q = {0}; /* as above */
    assert_int_equal(edgert_quantize_rtn(w, N, K, 128, 0, &q), EDGERT_OK);
    struct {
        edgert_qweights w;
        unsigned char later[16];
    } gw = {.w = q.view};
    gw.w.struct_size = sizeof gw;
    gw.later[15] = 0x80;
    edgert_packed *p = NULL;
    assert_refused_at(edgert_pack(b, &gw.w, &p, err, sizeof err), err,
                      offsetof(__typeof__(gw), later) + 15);
    assert_null(p);
    gw.later[15] = 0;
    assert_int_equal(edgert_pack(b, &gw.w, &p, err, sizeof err), EDGERT_OK);

    struct {
        edgert_gemm_args a;
        unsigned char later[16];
    } ga = {.a = {.struct_size = sizeof ga, .m = 1, .x = x, .ldx = K, .y = y, .ldy = N}};
    ga.later[0] = 2;
    assert_refused_at(edgert_gemm(b, p, &ga.a, err, sizeof err), err,
                      offsetof(__typeof__(ga), later));
    struct {
        edgert_step_op op;
        unsigned char later[16];
    } gs = {.op = {.struct_size = sizeof gs, .weights = p, .args = &ga.a}};
    ga.later[0] = 0;
    gs.later[7] = 9;
    assert_refused_at(edgert_step(b, &gs.op, 1, err, sizeof err), err,
                      offsetof(__typeof__(gs), later) + 7);
    gs.later[7] = 0;
    assert_int_equal(edgert_step(b, &gs.op, 1, err, sizeof err), EDGERT_OK);
    assert_int_equal(edgert_gemm(b, p, &ga.a, err, sizeof err), EDGERT_OK);

    struct {
        edgert_quantize_options o;
        unsigned char later[16];
    } gq = {.o = {.struct_size = sizeof gq}};
    gq.later[1] = 1;
    assert_refused_at(edgert_checkpoint_quantize("in.safetensors", "out.safetensors", &gq.o, err,
                                                 sizeof err),
                      err, offsetof(__typeof__(gq), later) + 1);

    edgert_packed_free(p);
    edgert_qtensor_free(&q);
    edgert_backend_close(b);
    edgert_close(ctx);
}

/* ---- what the library writes into a caller's struct ------------------------------- */

/* Bytes [EDGERT_QTENSOR_V1_SIZE, +64) of a buffer the library filled as an
 * edgert_qtensor: still the fill pattern (a caller built against an older,
 * smaller edgert_qtensor has its own data there). */
static void assert_tail_untouched(const unsigned char *buf, const char *what)
{
    for (size_t i = EDGERT_QTENSOR_V1_SIZE; i < EDGERT_QTENSOR_V1_SIZE + 64u; i++)
        if (buf[i] != 0xA5)
            fail_msg("%s wrote byte %zu of an edgert_qtensor, past EDGERT_QTENSOR_V1_SIZE (%zu)",
                     what, i, (size_t)EDGERT_QTENSOR_V1_SIZE);
}

/* The structs that sit inside others never grow (a field added would move
 * what follows them), and edgert_qtensor, which the caller allocates and
 * the library fills, is written up to EDGERT_QTENSOR_V1_SIZE and no
 * further: its buffers before `view`, `view` last and only its version-1
 * fields. A library that cleared sizeof(edgert_qtensor) after edgert_qweights
 * grew would write into the memory after an older caller's struct. */
static void test_library_writes_callers_size(void **state)
{
    (void)state;
    assert_int_equal(sizeof(edgert_layout),
                     offsetof(edgert_layout, fallback_dtype) + sizeof(const char *));
    assert_int_equal(sizeof(edgert_figures), offsetof(edgert_figures, where) + sizeof(char *));
    assert_int_equal(offsetof(edgert_qtensor, view) + sizeof(edgert_qweights),
                     sizeof(edgert_qtensor));

    enum { N = 3, K = 200 };
    static float w[N * K];
    for (int i = 0; i < N * K; i++)
        w[i] = 0.02f * (float)(i % 11 - 5);
    _Alignas(16) unsigned char buf[EDGERT_QTENSOR_V1_SIZE + 64u];
    edgert_qtensor *q = (edgert_qtensor *)(void *)buf;
    memset(buf, 0xA5, sizeof buf);
    assert_int_equal(edgert_quantize_rtn(w, N, K, 128, 0, q), EDGERT_OK);
    assert_tail_untouched(buf, "edgert_quantize_rtn");
    assert_int_equal(q->view.struct_size, EDGERT_QWEIGHTS_V1_SIZE);
    assert_ptr_equal(q->view.codes, q->codes);
    assert_ptr_equal(q->view.zeros, q->zeros);
    assert_int_equal(q->view.k, K);
    edgert_qtensor_free(q);
    assert_tail_untouched(buf, "edgert_qtensor_free");
    assert_null(q->codes);
    memset(buf, 0xA5, sizeof buf);
    assert_int_equal(edgert_quantize_rtn(w, 0, K, 128, 0, q), EDGERT_E_USAGE);
    assert_tail_untouched(buf, "edgert_quantize_rtn refusing n = 0");

    /* a dense checkpoint's layer, quantized by edgert_checkpoint_layer_weights */
    char *dir = tu_tmpdir(), err[512] = "", header[160];
    snprintf(header, sizeof header,
             "{\"l.weight\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[0,%zu]}}",
             N, K, sizeof w);
    char *path = tu_safetensors(dir, "dense.safetensors", header, w, sizeof w);
    assert_non_null(path);
    edgert_checkpoint *ck = NULL;
    if (edgert_checkpoint_open(path, &ck, err, sizeof err) != EDGERT_OK)
        fail_msg("%s", err);
    memset(buf, 0xA5, sizeof buf);
    assert_int_equal(edgert_checkpoint_layer_weights(ck, 0, q, err, sizeof err), EDGERT_OK);
    assert_tail_untouched(buf, "edgert_checkpoint_layer_weights");
    assert_int_equal(q->view.struct_size, EDGERT_QWEIGHTS_V1_SIZE);
    assert_string_equal(q->view.name, "l");
    edgert_qtensor_free(q);
    memset(buf, 0xA5, sizeof buf);
    assert_int_equal(edgert_checkpoint_layer_weights(ck, 1, q, err, sizeof err), EDGERT_E_USAGE);
    assert_tail_untouched(buf, "edgert_checkpoint_layer_weights refusing layer 1");
    edgert_checkpoint_close(ck);
    free(path);
    tu_rmrf(dir);
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
        cmocka_unit_test(test_abi2_descriptor_gates),
        cmocka_unit_test(test_abi2_plugins_that_load),
        cmocka_unit_test(test_abi2_contract_breaches_caught),
        cmocka_unit_test(test_callers_structs_by_size),
        cmocka_unit_test(test_newer_callers_unknown_fields),
        cmocka_unit_test(test_library_writes_callers_size),
        cmocka_unit_test(test_gate_without_memory_still_rejects),
    };
    return tu_run_group("test_abi", tests, NULL, NULL);
}
