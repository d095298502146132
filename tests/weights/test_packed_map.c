/*
 * tests/weights/test_packed_map.c — the packed-weight cache (plugin ABI 2) through the
 * public API: edgert_backend_packed_layout, edgert_packed_data and
 * edgert_packed_map on every in-tree backend eligible here and every code
 * path it can run here, and the core's own checks.
 *
 * Per backend and path (one case each, "<case>[<path>]"): the round trip of
 * tests/test_packed.h on odd shapes (n = 1, 3, 16, 17, 33; k a multiple of
 * the group and not; symmetric and asymmetric; m = 1 and 17): the mapped
 * handle, from a heap copy and from a read-only mmap of a file, gives y bit
 * for bit equal to the packed handle's; and the refusals of corrupt bytes,
 * each with a message. A backend not eligible here (another arch, missing
 * CPU flags) or a path this CPU lacks is reported skipped. Path amx runs on
 * the emulated tiles (tests/plugins/amxemu) on CPUs without AMX.
 *
 * avx512-w4a16's paths share one packed form (one layout id): the bytes are
 * checked to be identical on every path this CPU has, so a cache filled on
 * one path serves the others.
 *
 * Core checks (ref-w4a16): NULL arguments, a zero shape, size 0, a
 * misaligned pointer, a descriptor below its ABI-1 size, a mapped handle
 * used on another instance; a mapped handle outliving nothing it needs.
 * (neon-w4a16's round trip and refusals are in test_neon_w4a16, which the
 * ARM64 build runs under qemu on each emulated CPU model.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "edgert/edgert.h"
#include "test_util.h"
#include "test_packed.h"

#define AW "avx512-w4a16"
#define AW_EMU "avx512-w4a16-amxemu"

typedef struct path_def {
    const char *backend, *option; /* option NULL: the backend's default */
    int zeros_section;            /* pm_refusals: the section of u8 zero points, or -1 */
} path_def;

static const path_def paths[] = {
    {"ref-w4a16", NULL, 2},       {AW, "path=fma", -1},    {AW, "path=bf16", -1},
    {AW, "path=int16", -1},       {AW, "path=amx", -1},    {AW_EMU, "path=amx", -1},
};

typedef struct fx {
    edgert_ctx *ctx;
    char *emu_dir; /* the emulated build's manifest */
    size_t pi;     /* the path of a per-path case */
} fx;

#define PATH_SETUP(tag, index)                                                                    \
    static int on_##tag(void **state)                                                             \
    {                                                                                             \
        ((fx *)*state)->pi = (index);                                                             \
        return 0;                                                                                 \
    }
PATH_SETUP(ref, 0)
PATH_SETUP(fma, 1)
PATH_SETUP(bf16, 2)
PATH_SETUP(int16, 3)
PATH_SETUP(amx, 4)
PATH_SETUP(amx_emulated, 5)
#define PATH_TEST(fn, tag) {#fn "[" #tag "]", fn, on_##tag, NULL, NULL}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    f->emu_dir = tu_tmpdir();
    char *lib = tu_plugin("tp_avx512_amxemu");
    /* x86-64 only: elsewhere the gates keep it out before any load; ABI 1..2
     * like the real avx512-w4a16 */
    free(tu_manifest_abi(f->emu_dir, "amxemu.yaml", AW_EMU, lib, 2u, NULL,
                         "requires:\n  cpu_flags: [avx512f, avx512bw, avx512vl]\n"));
    free(lib);
    const char *dirs[2] = {EDGERT_TEST_BACKEND_DIR, f->emu_dir};
    edgert_options o = {.struct_size = sizeof o};
    o.manifest_paths = dirs;
    o.manifest_path_count = 2;
    o.ignore_env = 1;
    o.threads = 2;
    o.log_level = EDGERT_LOG_ERROR;
    char err[512] = "";
    if (edgert_open(&o, &f->ctx, err, sizeof err) != EDGERT_OK) {
        fprintf(stderr, "edgert_open: %s\n", err);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    edgert_close(f->ctx);
    tu_rmrf(f->emu_dir);
    free(f);
    return 0;
}

/* The path's backend instance, or NULL with why it cannot run here. */
static edgert_backend *open_path(fx *f, const path_def *p, char *why, size_t len)
{
    const edgert_candidate *c = edgert_candidate_find(f->ctx, p->backend);
    assert_non_null(c);
    if (!c->eligible) {
        snprintf(why, len, "%s is not eligible here: %s %s", p->backend,
                 c->reason_count ? c->reasons[0] : "-", c->detail);
        return NULL;
    }
    assert_int_equal(c->abi_version, 2); /* in-tree backends speak ABI 2 */
    edgert_backend *b = NULL;
    char err[512] = "";
    edgert_status st = edgert_backend_open(f->ctx, p->backend, p->option, &b, err, sizeof err);
    if (st == EDGERT_E_UNSUPPORTED) {
        snprintf(why, len, "%s %s: %s", p->backend, p->option ? p->option : "", err);
        return NULL;
    }
    if (st != EDGERT_OK)
        fail_msg("%s %s: %s", p->backend, p->option ? p->option : "", err);
    return b;
}

static void test_round_trip(void **state)
{
    fx *f = *state;
    const path_def *p = &paths[f->pi];
    char why[1024];
    edgert_backend *b = open_path(f, p, why, sizeof why);
    if (!b)
        tu_skip("%s", why);
    const char *layout = edgert_backend_packed_layout(b);
    assert_non_null(layout);
    print_message("%s %s: layout %s (%s)\n", p->backend, p->option ? p->option : "(default)",
                  layout, edgert_backend_describe(b));
    size_t ran = 0;
    for (size_t i = 0; i < PM_NSHAPES; i++)
        ran += pm_round_trip(b, &pm_shapes[i], 1000u + i) == 0;
    assert_true(ran >= 6u); /* every layout holds the group-128 shapes */
    edgert_backend_close(b);
}

static void test_refusals(void **state)
{
    fx *f = *state;
    const path_def *p = &paths[f->pi];
    char why[1024];
    edgert_backend *b = open_path(f, p, why, sizeof why);
    if (!b)
        tu_skip("%s", why);
    pm_refusals(b, p->zeros_section);
    edgert_backend_close(b);
}

/* avx512-w4a16 names no path in its layout id: the bytes must be the same on
 * every path this CPU has. */
static void test_one_layout_for_every_path(void **state)
{
    fx *f = *state;
    const char *opts[] = {"path=fma", "path=bf16", "path=int16", "path=amx"};
    const pm_shape s = {33, 256, 128, 0};
    edgert_qtensor t;
    pm_weights(&s, 9u, "blk.0.ffn_gate", &t);
    void *first = NULL;
    size_t first_size = 0, compared = 0;
    const char *first_layout = NULL;
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        const edgert_candidate *c = edgert_candidate_find(f->ctx, AW);
        edgert_backend *b = NULL;
        char err[512] = "";
        if (!c->eligible || edgert_backend_open(f->ctx, AW, opts[i], &b, err, sizeof err) != 0)
            continue;
        edgert_packed *pk = NULL;
        const void *data = NULL;
        size_t size = 0;
        assert_int_equal(edgert_pack(b, &t.view, &pk, err, sizeof err), EDGERT_OK);
        assert_int_equal(edgert_packed_data(pk, &data, &size, err, sizeof err), EDGERT_OK);
        if (!first) {
            first = pm_copy(data, size);
            first_size = size;
            first_layout = edgert_backend_packed_layout(b);
        } else {
            assert_int_equal(size, first_size);
            assert_memory_equal(data, first, size);
            assert_string_equal(edgert_backend_packed_layout(b), first_layout);
            compared++;
        }
        edgert_packed_free(pk);
        edgert_backend_close(b);
    }
    edgert_qtensor_free(&t);
    free(first);
    if (compared == 0)
        tu_skip("%s: fewer than two of its paths run here", AW);
}

/* The core's checks, before any plugin code: usage errors name the call. */
static void test_core_arguments(void **state)
{
    fx *f = *state;
    char err[512] = "";
    edgert_backend *b = NULL, *b2 = NULL;
    assert_int_equal(edgert_backend_open(f->ctx, "ref-w4a16", NULL, &b, err, sizeof err), 0);
    assert_int_equal(edgert_backend_open(f->ctx, "ref-w4a16", NULL, &b2, err, sizeof err), 0);
    assert_string_equal(edgert_backend_packed_layout(b), "ref-w4a16/1");
    assert_null(edgert_backend_packed_layout(NULL));
    const pm_shape s = {3, 128, 128, 0};
    edgert_qtensor t;
    pm_weights(&s, 3u, "blk.1.attn_k", &t);
    edgert_packed *pk = NULL, *mp = (edgert_packed *)(uintptr_t)1;
    assert_int_equal(edgert_pack(b, &t.view, &pk, err, sizeof err), EDGERT_OK);
    const void *data = NULL;
    size_t size = 0;
    assert_int_equal(edgert_packed_data(NULL, &data, &size, err, sizeof err), EDGERT_E_USAGE);
    assert_int_equal(edgert_packed_data(pk, NULL, &size, err, sizeof err), EDGERT_E_USAGE);
    assert_int_equal(edgert_packed_data(pk, &data, NULL, err, sizeof err), EDGERT_E_USAGE);
    assert_int_equal(edgert_packed_data(pk, &data, &size, NULL, 0), EDGERT_OK);
    void *copy = pm_copy(data, size);
    edgert_qweights shape = t.view; /* codes, scales and zeros are ignored */
    static const struct {
        int what; /* 0 b, 1 shape, 2 data, 3 out, 4 n, 5 k, 6 group, 7 size, 8 struct_size */
    } bad[] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        edgert_qweights q = shape;
        q.n = bad[i].what == 4 ? 0u : q.n;
        q.k = bad[i].what == 5 ? 0u : q.k;
        q.group = bad[i].what == 6 ? 0u : q.group;
        q.struct_size = bad[i].what == 8 ? EDGERT_QWEIGHTS_V1_SIZE - 1u : q.struct_size;
        err[0] = '\0';
        assert_int_equal(edgert_packed_map(bad[i].what == 0 ? NULL : b,
                                           bad[i].what == 1 ? NULL : &q,
                                           bad[i].what == 2 ? NULL : copy,
                                           bad[i].what == 7 ? 0u : size,
                                           bad[i].what == 3 ? NULL : &mp, err, sizeof err),
                         EDGERT_E_USAGE);
        assert_non_null(strstr(err, "edgert_packed_map"));
    }
    assert_int_equal(edgert_packed_map(b, &shape, copy, size, &mp, NULL, 0), EDGERT_OK);
    edgert_qtensor_free(&t);
    edgert_packed_free(pk);
    /* a mapped handle belongs to the instance that mapped it, as a packed one */
    float x[3 * 128] = {0}, y[3 * 3];
    edgert_gemm_args a = {.struct_size = sizeof a, .m = 1, .x = x, .ldx = 128, .y = y, .ldy = 3};
    assert_int_equal(edgert_gemm(b2, mp, &a, err, sizeof err), EDGERT_E_USAGE);
    assert_int_equal(edgert_gemm(b, mp, &a, err, sizeof err), EDGERT_OK);
    edgert_packed_free(mp);
    edgert_packed_free(NULL);
    free(copy);
    edgert_backend_close(b2);
    edgert_backend_close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_core_arguments),
        PATH_TEST(test_round_trip, ref),
        PATH_TEST(test_refusals, ref),
        PATH_TEST(test_round_trip, fma),
        PATH_TEST(test_round_trip, bf16),
        PATH_TEST(test_round_trip, int16),
        PATH_TEST(test_round_trip, amx),
        PATH_TEST(test_round_trip, amx_emulated),
        PATH_TEST(test_refusals, fma),
        PATH_TEST(test_refusals, int16),
        PATH_TEST(test_refusals, amx_emulated),
        cmocka_unit_test(test_one_layout_for_every_path),
    };
    return tu_run_group("test_packed_map", tests, setup, teardown);
}
