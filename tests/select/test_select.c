/*
 * tests/select/test_select.c — the selection table of architecture.md, Selection for the fixture
 * device profiles (plan mode, the project's real manifests), user controls,
 * and live ranking with test-only plugins.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "edgert/edgert.h"
#include "test_util.h"

#define MANIFESTS EDGERT_TEST_FIXTURES "/../../manifests"
#define DEVICES EDGERT_TEST_FIXTURES "/devices"

static edgert_ctx *plan(const char *profile, const char *disable, int strict)
{
    const char *paths[1] = {MANIFESTS};
    edgert_options o = {.struct_size = sizeof o};
    o.device_profile = profile;
    o.manifest_paths = paths;
    o.manifest_path_count = 1;
    o.ignore_env = 1;
    o.disable = disable;
    o.strict = strict;
    o.threads = 1;
    o.log_level = EDGERT_LOG_ERROR;
    edgert_ctx *ctx = NULL;
    char err[512] = "";
    edgert_status st = edgert_open(&o, &ctx, err, sizeof err);
    if (st != EDGERT_OK)
        fail_msg("edgert_open(%s): %s", profile, err);
    /* The project's own manifests must all be valid. */
    for (size_t i = 0; i < edgert_diag_count(ctx); i++)
        if (edgert_diag_at(ctx, i)->level <= EDGERT_LOG_WARN)
            fail_msg("diagnostic: %s: %s",
                     edgert_diag_at(ctx, i)->file ? edgert_diag_at(ctx, i)->file : "",
                     edgert_diag_at(ctx, i)->message);
    return ctx;
}

static const char *select_name(edgert_ctx *ctx, edgert_priority p, const char *forced,
                               edgert_status *st_out, char *err, size_t err_len)
{
    edgert_selection *sel = NULL;
    edgert_status st = edgert_select(ctx, p, forced, &sel, err, err_len);
    if (st_out)
        *st_out = st;
    const edgert_candidate *c = edgert_selection_selected(sel);
    const char *name = c ? c->name : NULL;
    edgert_selection_free(sel);
    return name;
}

struct row {
    const char *profile, *speed, *fidelity;
};

static void test_table(void **state)
{
    (void)state;
    static const struct row rows[] = {
        /* architecture.md, Selection: amx-w4a8 for speed on AMX. Its decode figure is
         * avx512-w4a8's (one library, the same GEMV, measured by edgert),
         * so the two tie on evidence and amx-w4a8, which requires more of
         * the device (the tiles), ranks first. Without AMX, avx512-w4a8 is
         * the speed choice as long as its measured decode beats
         * avx512-w4a16's (both declared from one window); fidelity stays
         * avx512-w4a16 (top-1 0.797 vs 0.734). */
        {"x86-amx.yaml", "amx-w4a8", "avx512-w4a16"},
        {"x86-avx512.yaml", "avx512-w4a8", "avx512-w4a16"},
        /* AVX2 without AVX-512, from the in-tree manifests alone (the
         * vendor example's avx2-w4a16: test_avx2_device_gets_avx2_backend):
         * avx2-w4a8, a CPU backend, before the reference for both */
        {"x86-avx2.yaml", "avx2-w4a8", "avx2-w4a8"},
        {"x86-avxvnni.yaml", "avx2-w4a8", "avx2-w4a8"},
        {"rpi5.yaml", "neon-w4a16", "neon-w4a16"},
        {"android-hexagon.yaml", "npu-export", "npu-export"},
        {"jetson-orin.yaml", "gpu-dense", "gpu-dense"},
        {"nvidia-workstation.yaml", "gpu-dense", "gpu-dense"},
        /* AMX in hardware, but the OS did not grant the tile state. */
        {"x86-amx-os-disabled.yaml", "avx512-w4a8", "avx512-w4a16"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char path[4096], err[512];
        snprintf(path, sizeof path, "%s/%s", DEVICES, rows[i].profile);
        edgert_ctx *ctx = plan(path, NULL, 0);
        assert_true(edgert_device_facts(ctx)->planned);
        const char *s = select_name(ctx, EDGERT_PRIORITY_SPEED, NULL, NULL, err, sizeof err);
        const char *f = select_name(ctx, EDGERT_PRIORITY_FIDELITY, NULL, NULL, err, sizeof err);
        if (!s || strcmp(s, rows[i].speed) != 0)
            fail_msg("%s speed: got %s, expected %s", rows[i].profile, s ? s : "(none)",
                     rows[i].speed);
        if (!f || strcmp(f, rows[i].fidelity) != 0)
            fail_msg("%s fidelity: got %s, expected %s", rows[i].profile, f ? f : "(none)",
                     rows[i].fidelity);
        /* Plan mode loads nothing. */
        for (size_t c = 0; c < edgert_candidate_count(ctx); c++)
            assert_false(edgert_candidate_at(ctx, c)->loaded);
        edgert_close(ctx);
    }
}

/* The build ships examples/vendor-plugin's avx2-w4a16 next to the in-tree
 * backends: a machine with AVX2 and no AVX-512 (most x86 laptops and
 * desktops since 2021), with or without AVX-VNNI, plans it for both
 * priorities instead of ref-w4a16, with avx2-w4a8 eligible beside it and
 * second for speed: by declared figures alone (a plan measures nothing),
 * its decode (31.22 tok/s, on a Zen 3) is below avx2-w4a16's (33.1, on a
 * Zen 5); on the device, first contact measures both and their prefill
 * decides when their decode is one group (docs/measurements.md). */
static void test_avx2_device_gets_avx2_backend(void **state)
{
    (void)state;
    static const char *const profiles[] = {"x86-avx2.yaml", "x86-avxvnni.yaml"};
    for (size_t d = 0; d < 2; d++) {
        const char *paths[1] = {EDGERT_TEST_BACKEND_DIR};
        char profile[4096];
        snprintf(profile, sizeof profile, "%s/%s", DEVICES, profiles[d]);
        edgert_options o = {.struct_size = sizeof o};
        o.device_profile = profile;
        o.manifest_paths = paths;
        o.manifest_path_count = 1;
        o.ignore_env = 1;
        o.no_evidence = 1;
        o.threads = 1;
        o.log_level = EDGERT_LOG_ERROR;
        edgert_ctx *ctx = NULL;
        char err[512] = "";
        if (edgert_open(&o, &ctx, err, sizeof err) != EDGERT_OK)
            fail_msg("edgert_open: %s", err);
        if (!edgert_candidate_find(ctx, "avx2-w4a16")) {
            edgert_close(ctx);
            tu_skip("avx2-w4a16 is not built in this tree (its manifest is not in %s)",
                    EDGERT_TEST_BACKEND_DIR);
        }
        assert_true(edgert_candidate_find(ctx, "avx2-w4a8")->eligible);
        for (int p = 0; p < 2; p++) {
            edgert_priority pr = p ? EDGERT_PRIORITY_FIDELITY : EDGERT_PRIORITY_SPEED;
            edgert_selection *sel = NULL;
            assert_int_equal(edgert_select(ctx, pr, NULL, &sel, err, sizeof err), EDGERT_OK);
            const char *got = edgert_selection_selected(sel)->name;
            const char *second = edgert_candidate_at(ctx, edgert_selection_index(sel, 1))->name;
            if (strcmp(got, "avx2-w4a16") != 0 || strcmp(second, "avx2-w4a8") != 0)
                fail_msg("%s, %s: got %s then %s", profiles[d], p ? "fidelity" : "speed", got,
                         second);
            edgert_selection_free(sel);
        }
        /* selected for the plan, never run by it: opening it says why */
        edgert_backend *b = NULL;
        assert_int_equal(edgert_backend_open(ctx, "avx2-w4a16", NULL, &b, err, sizeof err),
                         EDGERT_E_UNSUPPORTED);
        assert_null(b);
        assert_non_null(strstr(err, "plan mode"));
        edgert_close(ctx);
    }
}

static int has_reason(const edgert_candidate *c, const char *r)
{
    for (size_t i = 0; i < c->reason_count; i++)
        if (strcmp(c->reasons[i], r) == 0)
            return 1;
    return 0;
}

static void test_reasons_in_plan(void **state)
{
    (void)state;
    edgert_ctx *ctx = plan(DEVICES "/x86-amx-os-disabled.yaml", NULL, 0);
    const edgert_candidate *amx = edgert_candidate_find(ctx, "amx-w4a8");
    assert_non_null(amx);
    assert_true(has_reason(amx, "OS_STATE_DISABLED(amx)"));
    assert_false(has_reason(amx, "MISSING_CPU_FLAG(amx_tile)"));
    const edgert_candidate *neon = edgert_candidate_find(ctx, "neon-w4a16");
    assert_true(has_reason(neon, "WRONG_ARCH"));
    const edgert_candidate *npu = edgert_candidate_find(ctx, "npu-export");
    assert_true(has_reason(npu, "WRONG_DEVICE_CLASS"));
    edgert_close(ctx);

    ctx = plan(DEVICES "/x86-avx2.yaml", NULL, 0);
    amx = edgert_candidate_find(ctx, "amx-w4a8");
    assert_true(has_reason(amx, "MISSING_CPU_FLAG(amx_tile)"));
    assert_true(has_reason(amx, "MISSING_CPU_FLAG(avx512f)"));
    /* Plan mode never checks library files. */
    for (size_t c = 0; c < edgert_candidate_count(ctx); c++)
        assert_false(has_reason(edgert_candidate_at(ctx, c), "LIBRARY_MISSING"));
    edgert_close(ctx);
}

/* The layout gate of edgert_options.weights on group sizes and partial
 * groups (each manifest's layout.group_sizes and layout.partial_groups;
 * absent: its own group, whole), planned for a profile so that it holds
 * whatever this machine runs. A dense layer of K = 64 is quantized as one
 * group of 64, one of K = 200 in groups of 128 with a short last one:
 * ref-w4a16 packs both; avx512-w4a16, avx2-w4a16 and neon-w4a16 groups of 64
 * (their group_sizes: 32, 64, 128) but no partial group; every other shipped
 * 4-bit layout neither. */
static void test_layout_gate_groups(void **state)
{
    (void)state;
    static const struct {
        uint32_t k;
        const char *reason;
    } cases[] = {{64, "LAYOUT_MISMATCH(groups of 64)"}, {200, "LAYOUT_MISMATCH(partial groups)"}};
    static float w[16 * 200];
    char *dir = tu_tmpdir();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t n = 16, k = cases[i].k;
        for (size_t e = 0; e < (size_t)n * k; e++)
            w[e] = 0.05f * sinf(0.3f * (float)e);
        char header[256], err[1024] = "";
        snprintf(header, sizeof header,
                 "{\"model.layers.0.mlp.up_proj.weight\":{\"dtype\":\"F32\",\"shape\":[%u,%u],"
                 "\"data_offsets\":[0,%zu]}}", n, k, (size_t)n * k * sizeof(float));
        char *path = tu_safetensors(dir, "w.safetensors", header, w, (size_t)n * k * sizeof(float));
        assert_non_null(path);
        edgert_ctx *ctx = tu_open_for(EDGERT_TEST_BACKEND_DIR, 1,
                                      EDGERT_TEST_FIXTURES "/devices/x86-avx512.yaml", path, err,
                                      sizeof err);
        if (!ctx)
            fail_msg("edgert_open: %s", err);
        size_t refused = 0;
        for (size_t j = 0; j < edgert_candidate_count(ctx); j++) {
            const edgert_candidate *c = edgert_candidate_at(ctx, j);
            if (c->layout.weight_bits != 4)
                continue;
            int want = strcmp(c->name, "ref-w4a16") != 0 &&
                       !(k == 64 && (strcmp(c->name, "avx512-w4a16") == 0 ||
                                     strcmp(c->name, "avx2-w4a16") == 0 ||
                                     strcmp(c->name, "neon-w4a16") == 0));
            if (has_reason(c, cases[i].reason) != want)
                fail_msg("k=%u: %s %s %s", k, c->name, want ? "lacks" : "has", cases[i].reason);
            refused += (size_t)want;
        }
        assert_true(refused >= 2); /* k = 64: avx512-w4a8, amx-w4a8; 200: all but the reference */
        edgert_close(ctx);
        free(path);
    }
    tu_rmrf(dir);
}

static void test_user_controls(void **state)
{
    (void)state;
    char err[512];
    edgert_status st;
    /* strict: no fallback to the reference backend (avx2-w4a8, the one
     * other backend in the tree's manifests for it, disabled) */
    edgert_ctx *ctx = plan(DEVICES "/x86-avx2.yaml", "avx2-w4a8", 1);
    assert_null(select_name(ctx, EDGERT_PRIORITY_SPEED, NULL, &st, err, sizeof err));
    assert_int_equal(st, EDGERT_E_NOT_ELIGIBLE);
    assert_true(has_reason(edgert_candidate_find(ctx, "ref-w4a16"), "STRICT_MODE"));
    edgert_close(ctx);

    /* disable list: without the two AVX-512 backends and avx2-w4a8 (which
     * every AVX2 CPU takes) only the reference is left */
    ctx = plan(DEVICES "/x86-avx512.yaml", "avx512-w4a16,avx512-w4a8,avx2-w4a8", 0);
    assert_string_equal(select_name(ctx, EDGERT_PRIORITY_SPEED, NULL, &st, err, sizeof err),
                        "ref-w4a16");
    edgert_close(ctx);

    /* forced: eligible → that one, even if not first */
    ctx = plan(DEVICES "/x86-amx.yaml", NULL, 0);
    assert_string_equal(select_name(ctx, EDGERT_PRIORITY_SPEED, "ref-w4a16", &st, err, sizeof err),
                        "ref-w4a16");
    /* forced but not eligible: an error that says why */
    assert_null(select_name(ctx, EDGERT_PRIORITY_SPEED, "neon-w4a16", &st, err, sizeof err));
    assert_int_equal(st, EDGERT_E_NOT_ELIGIBLE);
    assert_non_null(strstr(err, "WRONG_ARCH"));
    /* forced and unknown */
    assert_null(select_name(ctx, EDGERT_PRIORITY_SPEED, "warp-drive", &st, err, sizeof err));
    assert_int_equal(st, EDGERT_E_NOT_FOUND);
    assert_non_null(strstr(err, "amx-w4a8"));
    edgert_close(ctx);
}

/* EDGERT_PRIORITY and EDGERT_BACKEND replace an application's arguments to
 * edgert_select (the operator's override), unless ignore_env or
 * no_env_selection. A GPU workstation with two declarative GPU backends:
 * speed picks gpu-fast (int8, 100 tok/s), fidelity gpu-faithful (bf16). */
static edgert_ctx *plan_env(const char *dir, int ignore_env, int no_env_selection)
{
    const char *paths[1] = {dir};
    edgert_options o = {.struct_size = sizeof o};
    o.device_profile = DEVICES "/nvidia-workstation.yaml";
    o.manifest_paths = paths;
    o.manifest_path_count = 1;
    o.ignore_env = ignore_env;
    o.no_env_selection = no_env_selection;
    o.threads = 1;
    o.log_level = EDGERT_LOG_ERROR;
    edgert_ctx *ctx = NULL;
    char err[512] = "";
    if (edgert_open(&o, &ctx, err, sizeof err) != EDGERT_OK)
        fail_msg("edgert_open: %s", err);
    return ctx;
}

static void test_operator_override(void **state)
{
    (void)state;
    char err[512] = "";
    edgert_status st;
    char *dir = tu_tmpdir();
    free(tu_manifest(dir, "fast.yaml", "gpu-fast", NULL,
                     "{format: int8, weight_bits: 8, symmetric: true, activation_dtype: int8, "
                     "bits_per_weight: 8}",
                     "declared: {decode_tokens_per_s: 100, measured_on: \"x\"}\n"));
    free(tu_manifest(dir, "faithful.yaml", "gpu-faithful", NULL,
                     "{format: dense, weight_bits: 16, symmetric: true, activation_dtype: bf16, "
                     "bits_per_weight: 16}",
                     "declared: {decode_tokens_per_s: 50, measured_on: \"x\"}\n"));
    assert_int_equal(setenv("EDGERT_PRIORITY", "fidelity", 1), 0);
    edgert_ctx *ctx = plan_env(dir, 0, 0);
    assert_string_equal(select_name(ctx, EDGERT_PRIORITY_SPEED, NULL, &st, err, sizeof err),
                        "gpu-faithful");
    edgert_close(ctx);
    assert_int_equal(setenv("EDGERT_BACKEND", "gpu-fast", 1), 0);
    ctx = plan_env(dir, 0, 0);
    assert_string_equal(
        select_name(ctx, EDGERT_PRIORITY_SPEED, "gpu-faithful", &st, err, sizeof err),
        "gpu-fast");
    edgert_close(ctx);
    /* off: ignore_env, or no_env_selection (the CLI) */
    for (int off = 0; off < 2; off++) {
        ctx = plan_env(dir, off == 0, off == 1);
        assert_string_equal(select_name(ctx, EDGERT_PRIORITY_SPEED, NULL, &st, err, sizeof err),
                            "gpu-fast");
        edgert_close(ctx);
    }
    /* a bad value is an error that names the variable, not a silent default */
    assert_int_equal(setenv("EDGERT_PRIORITY", "fastest", 1), 0);
    ctx = plan_env(dir, 0, 0);
    assert_null(select_name(ctx, EDGERT_PRIORITY_SPEED, NULL, &st, err, sizeof err));
    assert_int_equal(st, EDGERT_E_USAGE);
    assert_non_null(strstr(err, "EDGERT_PRIORITY"));
    edgert_close(ctx);
    unsetenv("EDGERT_PRIORITY");
    /* a name the application never passed: the error says where it came
     * from (and an empty variable is no override) */
    assert_int_equal(setenv("EDGERT_BACKEND", "no-such", 1), 0);
    ctx = plan_env(dir, 0, 0);
    assert_null(select_name(ctx, EDGERT_PRIORITY_SPEED, NULL, &st, err, sizeof err));
    assert_int_equal(st, EDGERT_E_NOT_FOUND);
    if (!strstr(err, "'no-such' (named by EDGERT_BACKEND)"))
        fail_msg("the error does not name the variable: %s", err);
    edgert_close(ctx);
    assert_int_equal(setenv("EDGERT_BACKEND", "", 1), 0);
    assert_int_equal(setenv("EDGERT_PRIORITY", "", 1), 0);
    ctx = plan_env(dir, 0, 0);
    assert_string_equal(select_name(ctx, EDGERT_PRIORITY_SPEED, NULL, &st, err, sizeof err),
                        "gpu-fast");
    edgert_close(ctx);
    unsetenv("EDGERT_PRIORITY");
    unsetenv("EDGERT_BACKEND");
    tu_rmrf(dir);
}

static void test_gpu_dtype_fallback(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    char *prof = tu_write(dir, "pascal.yaml",
                          "profile_version: 1\nname: \"GTX 1080 box\"\narch: x86_64\n"
                          "device_class: cuda_discrete\ncpu_flags: [avx, avx2, fma]\n"
                          "logical_cores: 8\nbf16: false\n");
    edgert_ctx *ctx = plan(prof, NULL, 0);
    const edgert_candidate *g = edgert_candidate_find(ctx, "gpu-dense");
    assert_true(g->eligible);
    assert_string_equal(g->effective_activation_dtype, "fp16");
    edgert_close(ctx);
    ctx = plan(DEVICES "/nvidia-workstation.yaml", NULL, 0);
    assert_string_equal(edgert_candidate_find(ctx, "gpu-dense")->effective_activation_dtype,
                        "bf16");
    edgert_close(ctx);
    free(prof);
    tu_rmrf(dir);
}

/* Ties are broken by name: the order does not depend on the folder order. */
/* The key that put rank r below rank r - 1 (edgert_selection_reason). */
static edgert_decider decider_at(const edgert_selection *sel, size_t r)
{
    edgert_rank_reason w = {.struct_size = sizeof w};
    assert_int_equal(edgert_selection_reason(sel, r, &w), EDGERT_OK);
    assert_int_equal(w.struct_size, sizeof w);
    return w.decider;
}

static void test_total_order(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    free(tu_manifest(dir, "a.yaml", "zeta", NULL, NULL, NULL));
    free(tu_manifest(dir, "b.yaml", "alpha", NULL, NULL, NULL));
    const char *paths[1] = {dir};
    edgert_options o = {.struct_size = sizeof o};
    o.device_profile = DEVICES "/nvidia-workstation.yaml"; /* declarative: for a GPU */
    o.manifest_paths = paths;
    o.manifest_path_count = 1;
    o.ignore_env = 1;
    o.threads = 1;
    edgert_ctx *ctx = NULL;
    char err[256];
    assert_int_equal(edgert_open(&o, &ctx, err, sizeof err), EDGERT_OK);
    edgert_selection *sel = NULL;
    assert_int_equal(edgert_select(ctx, EDGERT_PRIORITY_SPEED, NULL, &sel, err, sizeof err),
                     EDGERT_OK);
    assert_string_equal(edgert_selection_selected(sel)->name, "alpha");
    assert_int_equal(edgert_selection_count(sel), 2);
    assert_int_equal(decider_at(sel, 0), EDGERT_DECIDER_NONE);
    assert_int_equal(decider_at(sel, 1), EDGERT_DECIDER_NAME);
    edgert_selection_free(sel);
    edgert_close(ctx);
    tu_rmrf(dir);

    /* Before the name: at equal evidence the backend written for more of
     * this device (requires or uses more of its CPU flags), for either
     * priority; a flag the device lacks counts for nothing. */
    dir = tu_tmpdir();
    free(tu_manifest(dir, "a.yaml", "zeta", NULL, NULL,
                     "requires:\n  cpu_flags: [avx2]\nuses_when_present: [fma, amx_int8]\n"));
    free(tu_manifest(dir, "b.yaml", "alpha", NULL, NULL,
                     "requires:\n  cpu_flags: [avx2]\nuses_when_present: [amx_tile, amx_int8]\n"));
    paths[0] = dir;
    assert_int_equal(edgert_open(&o, &ctx, err, sizeof err), EDGERT_OK);
    for (int p = 0; p < 2; p++) {
        edgert_priority prio = p ? EDGERT_PRIORITY_FIDELITY : EDGERT_PRIORITY_SPEED;
        assert_int_equal(edgert_select(ctx, prio, NULL, &sel, err, sizeof err), EDGERT_OK);
        assert_string_equal(edgert_selection_selected(sel)->name, "zeta");
        assert_int_equal(decider_at(sel, 1), EDGERT_DECIDER_SPECIALIZATION);
        edgert_selection_free(sel);
    }
    edgert_close(ctx);
    tu_rmrf(dir);
}

/* The selector's account of each rank agrees with the ranking and its
 * accessors, names the key that decided (the tier before the reference,
 * the device's flags between amx-w4a8 and avx512-w4a8, whose declared
 * decode is one figure), and keeps the struct rules: no byte written past
 * the caller's struct_size or the library's, a size below version 1, a
 * rank past the end and NULL refused. */
static void test_rank_reasons(void **state)
{
    (void)state;
    edgert_ctx *ctx = plan(DEVICES "/x86-amx.yaml", NULL, 0);
    char err[512];
    for (int p = 0; p < 2; p++) {
        edgert_priority prio = p ? EDGERT_PRIORITY_FIDELITY : EDGERT_PRIORITY_SPEED;
        edgert_selection *sel = NULL;
        assert_int_equal(edgert_select(ctx, prio, NULL, &sel, err, sizeof err), EDGERT_OK);
        size_t n = edgert_selection_count(sel);
        assert_true(n >= 4);
        for (size_t r = 0; r < n; r++) {
            edgert_rank_reason w = {.struct_size = sizeof w};
            assert_int_equal(edgert_selection_reason(sel, r, &w), EDGERT_OK);
            const edgert_candidate *k = edgert_candidate_at(ctx, w.candidate);
            assert_int_equal(w.candidate, edgert_selection_index(sel, r));
            assert_true((w.decider == EDGERT_DECIDER_NONE) == (r == 0));
            assert_non_null(edgert_decider_name(w.decider));
            assert_int_equal(w.tier, k->reference ? 2 : 1);
            assert_string_equal(w.source, edgert_selection_decode_source(sel, r));
            assert_string_equal(w.source, "declared"); /* a plan measures nothing */
            assert_int_equal(w.decode_measured, isnan(k->declared.decode_tokens_per_s) ? -1 : 0);
            if (w.decode_measured == 0)
                assert_true(w.decode == k->declared.decode_tokens_per_s);
            assert_int_equal(w.group, p ? edgert_selection_fidelity_group(sel, r)
                                        : edgert_selection_decode_group(sel, r));
            assert_true(w.group_first == r && w.group_last == r); /* nothing measured */
            assert_int_equal(w.split, EDGERT_SPLIT_NONE);
            assert_false(w.calibrated);
            assert_null(w.series);
            if (k->reference)
                assert_int_equal(w.decider, EDGERT_DECIDER_TIER);
            if (!p && strcmp(k->name, "avx512-w4a8") == 0) {
                assert_string_equal(edgert_selection_selected(sel)->name, "amx-w4a8");
                assert_int_equal(r, 1);
                assert_int_equal(w.decider, EDGERT_DECIDER_SPECIALIZATION);
            }
        }
        /* the struct's rules */
        struct grown {
            edgert_rank_reason w;
            unsigned char later[8];
        } g;
        memset(&g, 0xA5, sizeof g);
        g.w.struct_size = sizeof g;
        assert_int_equal(edgert_selection_reason(sel, 0, &g.w), EDGERT_OK);
        assert_int_equal(g.w.struct_size, sizeof g.w);
        for (size_t i = 0; i < sizeof g.later; i++)
            assert_int_equal(g.later[i], 0xA5);
        unsigned char v1[sizeof(edgert_rank_reason) + 8];
        memset(v1, 0xA5, sizeof v1);
        edgert_rank_reason *w1 = (edgert_rank_reason *)(void *)v1;
        w1->struct_size = EDGERT_RANK_REASON_V1_SIZE;
        assert_int_equal(edgert_selection_reason(sel, 0, w1), EDGERT_OK);
        assert_int_equal(w1->struct_size, EDGERT_RANK_REASON_V1_SIZE);
        for (size_t i = EDGERT_RANK_REASON_V1_SIZE; i < sizeof v1; i++)
            assert_int_equal(v1[i], 0xA5);
        edgert_rank_reason w = {.struct_size = EDGERT_RANK_REASON_V1_SIZE - 1};
        assert_int_equal(edgert_selection_reason(sel, 0, &w), EDGERT_E_USAGE);
        w.struct_size = sizeof w;
        assert_int_equal(edgert_selection_reason(sel, n, &w), EDGERT_E_USAGE);
        assert_int_equal(edgert_selection_reason(NULL, 0, &w), EDGERT_E_USAGE);
        assert_int_equal(edgert_selection_reason(sel, 0, NULL), EDGERT_E_USAGE);
        edgert_selection_free(sel);
    }
    assert_null(edgert_decider_name((edgert_decider)99));
    assert_string_equal(edgert_decider_name(EDGERT_DECIDER_PREFILL), "prefill");
    edgert_close(ctx);
}

/* Live: two honest test plugins with a W4A8 and a W4A16 manifest, next to the
 * real reference backend; speed picks the faster declared one, fidelity the
 * 16-bit-activation one, and the reference is always last. */
/* Live: every loaded plugin's speed is measured at first contact, and that
 * evidence beats any claim. test-slow (a 200 ms pause per gemm) claims 1000
 * tokens/s unverified; test-fast (the honest kernel, a W4A8 layout) claims
 * nothing: speed picks test-fast on its measurement, fidelity picks
 * test-slow (16-bit activations beat 8-bit). */
static void test_live_ranking(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    char *fast = tu_plugin("tp_fast"), *slow = tu_plugin("tp_slow");
    free(tu_manifest(dir, "fast.yaml", "test-fast", fast,
                     "{format: int4-sym-g128, weight_bits: 4, group_size: 128, symmetric: true, "
                     "activation_dtype: int8, bits_per_weight: 4.125}",
                     NULL));
    free(tu_manifest(dir, "slow.yaml", "test-slow", slow, NULL,
                     "declared: {decode_tokens_per_s: 1000, measured_on: \"a claim\"}\n"));
    free(fast);
    free(slow);
    const char *paths[2] = {dir, EDGERT_TEST_BACKEND_DIR};
    edgert_options o = {.struct_size = sizeof o};
    o.manifest_paths = paths;
    o.manifest_path_count = 2;
    o.ignore_env = 1;
    o.threads = 2;
    o.log_level = EDGERT_LOG_ERROR;
    /* Only the test plugins and the reference: the real tuned backends, as
     * they land in the build tree, would (rightly) outrank them. */
    o.disable = "avx512-w4a16,amx-w4a8,avx512-w4a8,avx2-w4a8,avx2-w4a16,neon-w4a16,npu-export";
    edgert_ctx *ctx = NULL;
    char err[512];
    assert_int_equal(edgert_open(&o, &ctx, err, sizeof err), EDGERT_OK);
    assert_false(edgert_device_facts(ctx)->planned);
    const edgert_candidate *f = edgert_candidate_find(ctx, "test-fast"),
                           *s = edgert_candidate_find(ctx, "test-slow");
    assert_true(f->loaded && s->loaded);
    if (!(f->measured.decode_tokens_per_s > s->measured.decode_tokens_per_s))
        fail_msg("test-fast %g (%s), test-slow %g (%s)", f->measured.decode_tokens_per_s,
                 f->first_contact_contention ? f->first_contact_contention : "kept",
                 s->measured.decode_tokens_per_s,
                 s->first_contact_contention ? s->first_contact_contention : "kept");
    edgert_selection *sel = NULL;
    assert_int_equal(edgert_select(ctx, EDGERT_PRIORITY_SPEED, NULL, &sel, err, sizeof err),
                     EDGERT_OK);
    assert_string_equal(edgert_selection_selected(sel)->name, "test-fast");
    assert_string_equal(edgert_selection_evidence(sel), "measured");
    size_t last = edgert_selection_index(sel, edgert_selection_count(sel) - 1);
    assert_string_equal(edgert_candidate_at(ctx, last)->name, "ref-w4a16");
    edgert_selection_free(sel);
    assert_int_equal(edgert_select(ctx, EDGERT_PRIORITY_FIDELITY, NULL, &sel, err, sizeof err),
                     EDGERT_OK);
    assert_string_equal(edgert_selection_selected(sel)->name, "test-slow");
    edgert_selection_free(sel);
    /* The real plugins whose libraries have not landed are LIBRARY_MISSING or gated out. */
    for (size_t i = 0; i < edgert_candidate_count(ctx); i++) {
        const edgert_candidate *c = edgert_candidate_at(ctx, i);
        if (c->eligible)
            assert_true(c->loaded || !c->library_path);
    }
    edgert_close(ctx);
    tu_rmrf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_avx2_device_gets_avx2_backend),
        cmocka_unit_test(test_reasons_in_plan),
        cmocka_unit_test(test_layout_gate_groups),
        cmocka_unit_test(test_user_controls),
        cmocka_unit_test(test_operator_override),
        cmocka_unit_test(test_gpu_dtype_fallback),
        cmocka_unit_test(test_total_order),
        cmocka_unit_test(test_rank_reasons),
        cmocka_unit_test(test_live_ranking),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
