/*
 * tests/weights/test_checkpoint_groups.c — what a dense checkpoint becomes on its
 * way to a backend, beside tests/weights/test_checkpoint.c: the one group a file's
 * dense layers are quantized in (the largest of 128, 64 and 32 dividing
 * every K, as edgert run picks), a packed file refused once the group its
 * source converts in has changed, and edgert_checkpoint_layer_release
 * dropping a layer's file pages from the resident set, and st_release_near
 * those the kernel maps around a small tensor's read.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h> /* cmocka needs these before its header */
#include <cmocka.h>

#include "edgert/edgert.h"
#include "formats/safetensors.h"
#include "test_util.h"

/* Smooth values with an outlier every 37 elements (test_checkpoint.c's). */
static float dense_value(size_t t, size_t i)
{
    double v = 0.04 * sin(0.37 * (double)i + (double)t) * (i % 37 == 5 ? 6.0 : 1.0);
    return (float)v;
}

/* A dense file of one F32 layer per K in ks (5 rows each): its path. */
static char *dense_file(const char *dir, const char *name, const uint32_t *ks, size_t nk)
{
    enum { N = 5 };
    char *path = NULL, err[512] = "";
    assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
    st_writer w;
    st_writer_init(&w, path);
    for (size_t c = 0; c < nk; c++) {
        char t[64];
        snprintf(t, sizeof t, "model.layers.%zu.mlp.up_proj.weight", c);
        uint64_t shape[2] = {N, ks[c]};
        assert_int_equal(st_writer_tensor(&w, t, ST_F32, 2, shape, err, sizeof err), 0);
    }
    assert_int_equal(st_writer_begin(&w, 8, err, sizeof err), 0);
    for (size_t c = 0; c < nk; c++)
        for (size_t i = 0; i < (size_t)N * ks[c]; i++) {
            float f = dense_value(c, i);
            assert_int_equal(st_writer_write(&w, &f, 4, err, sizeof err), 0);
        }
    if (st_writer_commit(&w, err, sizeof err) != 0)
        fail_msg("writing %s: %s", path, err);
    st_writer_free(&w);
    return path;
}

/* The group a file's dense layers are quantized in
 * (edgert_checkpoint_layer_weights): one for the file, the largest of 128,
 * 64 and 32 dividing every dense layer's K (SmolLM2's 576 and 1536: 64,
 * whole groups the fast layouts take, as edgert run picks for it); else
 * 128 with partial last groups; one group when K is smaller. The codes
 * dequantize back within half a step of each group. */
static void test_dense_groups(void **state)
{
    (void)state;
    static const struct {
        uint32_t ks[3];
        size_t nk;
        uint32_t group[3];
    } files[] = {
        {{256, 512}, 2, {128, 128}},    {{576, 1536}, 2, {64, 64}}, {{320}, 1, {64}},
        {{160, 96}, 2, {32, 32}},       {{64}, 1, {64}},            {{256, 200}, 2, {128, 128}},
        {{16, 256}, 2, {16, 128}},
    };
    char *dir = tu_tmpdir(), err[512] = "";
    for (size_t fi = 0; fi < sizeof files / sizeof files[0]; fi++) {
        char name[32];
        snprintf(name, sizeof name, "g%zu.safetensors", fi);
        char *path = dense_file(dir, name, files[fi].ks, files[fi].nk);
        edgert_checkpoint *ck = tu_open_checkpoint(path);
        assert_int_equal(edgert_checkpoint_layer_count(ck), files[fi].nk);
        for (size_t c = 0; c < files[fi].nk; c++) {
            uint32_t k = files[fi].ks[c], g = files[fi].group[c];
            edgert_qtensor q;
            assert_int_equal(edgert_checkpoint_layer_weights(ck, c, &q, err, sizeof err),
                             EDGERT_OK);
            if (q.view.group != g)
                fail_msg("file %zu, k=%u: group %u, expected %u", fi, k, q.view.group, g);
            float *dq = malloc(sizeof(float) * 5 * k);
            assert_non_null(dq);
            edgert_dequantize(&q.view, dq);
            size_t groups = (k + g - 1) / g;
            for (size_t r = 0; r < 5; r++)
                for (size_t i = 0; i < k; i++) {
                    double want = dense_value(c, r * k + i);
                    double sc = q.view.scales[r * groups + i / g];
                    if (fabs(dq[r * k + i] - want) > 0.5 * sc * (1 + 1e-5) + 1e-7)
                        fail_msg("k=%u row %zu col %zu: %g, dense %g (scale %g)", k, r, i,
                                 dq[r * k + i], want, sc);
                }
            free(dq);
            edgert_qtensor_free(&q);
        }
        edgert_checkpoint_close(ck);
        free(path);
    }
    tu_rmrf(dir);
}

/* A packed file stays fresh only while its layers' groups are what their
 * source converts in now: the same layer bytes under another file-wide
 * dense group (another layer's K changed it) are refused, naming both
 * groups, so `edgert pack` repacks instead of mapping a stale grouping. */
static void test_pack_check_group(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), err[1024] = "";
    static const uint32_t k64[2] = {576, 1536}, k32[2] = {576, 1568};
    char *src64 = dense_file(dir, "a.safetensors", k64, 2);
    char *packed = NULL;
    assert_true(asprintf(&packed, "%s/a.packed", dir) > 0);
    edgert_ctx *ctx = tu_open_backends();
    edgert_backend *b = NULL;
    assert_int_equal(edgert_backend_open(ctx, "ref-w4a16", NULL, &b, err, sizeof err), EDGERT_OK);
    edgert_checkpoint *ck = tu_open_checkpoint(src64);
    assert_int_equal(edgert_checkpoint_pack(b, ck, packed, err, sizeof err), EDGERT_OK);
    assert_int_equal(edgert_checkpoint_pack_check(b, ck, packed, err, sizeof err), EDGERT_OK);
    edgert_checkpoint_close(ck);
    /* the same first layer, a second whose K makes the file's group 32 */
    char *src32 = dense_file(dir, "a.safetensors", k32, 2);
    ck = tu_open_checkpoint(src32);
    assert_int_equal(edgert_checkpoint_pack_check(b, ck, packed, err, sizeof err),
                     EDGERT_E_UNSUPPORTED);
    if (!strstr(err, "groups of 64") || !strstr(err, "groups of 32"))
        fail_msg("the refusal names the groups: %s", err);
    edgert_checkpoint_close(ck);
    edgert_backend_close(b);
    edgert_close(ctx);
    free(src64);
    free(src32);
    free(packed);
    tu_rmrf(dir);
}

/* This process's resident pages of mapped files, in KiB (-1: unknown). */
static long rss_file_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "RssFile: %ld", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

/* edgert_checkpoint_layer_release: a dense layer read whole leaves this
 * process's resident set (its 16 MiB of file pages, less at most the two
 * pages it shares with the header and the file's end), the file stays
 * mapped and reads the same values again; NULL and an index out of range
 * do nothing. */
static void test_layer_release(void **state)
{
    (void)state;
    if (EDGERT_TEST_EMULATED)
        tu_skip("under qemu user mode the resident set is the emulator's");
    enum { N = 1024, K = 4096 };
    const size_t bytes = sizeof(float) * N * K;
    float *w = malloc(bytes), *out = malloc(bytes);
    assert_non_null(w);
    assert_non_null(out);
    for (size_t i = 0; i < (size_t)N * K; i++)
        w[i] = (float)((i * 2654435761u) % 2001u) * 1e-3f - 1.0f;
    char header[256];
    int hl = snprintf(header, sizeof header,
                      "{\"model.layers.0.mlp.up_proj.weight\":{\"dtype\":\"F32\",\"shape\":"
                      "[%d,%d],\"data_offsets\":[0,%zu]}}",
                      N, K, bytes);
    while (hl % 8 != 0) /* data on an 8-byte boundary */
        header[hl++] = ' ';
    header[hl] = '\0';
    char *dir = tu_tmpdir(), *path = tu_safetensors(dir, "w.safetensors", header, w, bytes);
    assert_non_null(path);
    edgert_checkpoint *ck = tu_open_checkpoint(path);
    char err[1024] = "";
    long before = rss_file_kb();
    assert_int_equal(edgert_checkpoint_layer_dense(ck, 0, 0, N, out, err, sizeof err), EDGERT_OK);
    assert_memory_equal(out, w, bytes);
    long read = rss_file_kb();
    edgert_checkpoint_layer_release(ck, 0);
    long after = rss_file_kb();
    printf("  RssFile %ld KiB before, %ld after reading 16 MiB, %ld after the release\n", before,
           read, after);
    assert_true(before >= 0);
    /* the read pages in the tensor (its first pages may be resident since
     * open: the kernel maps up to 64 KiB around the header's page fault),
     * the release drops all of it but the two edge pages */
    assert_true(read - before >= 16384 - 64 - 8);
    assert_true(read - after >= 16384 - 8);
    memset(out, 0, bytes);
    assert_int_equal(edgert_checkpoint_layer_dense(ck, 0, 0, N, out, err, sizeof err), EDGERT_OK);
    assert_memory_equal(out, w, bytes);
    edgert_checkpoint_layer_release(NULL, 0);
    edgert_checkpoint_layer_release(ck, 1);
    edgert_checkpoint_close(ck);
    free(path);
    tu_rmrf(dir);
    free(w);
    free(out);
}

/* st_release_near: a tensor smaller than a page has no whole page of its
 * own, so st_release drops nothing; st_release_near drops the 2 MiB-aligned
 * span its bytes lie in (what a large folio of the page cache maps around a
 * read), and the file's other pages stay. a and c are 4 MiB of F32 each, b
 * 576 floats between them at file offset 4 MiB + 8 + the header: its span
 * is [4, 6) MiB. */
static void test_release_near(void **state)
{
    (void)state;
    if (EDGERT_TEST_EMULATED)
        tu_skip("under qemu user mode the resident set is the emulator's");
    enum { BIG = 1 << 20, SMALL = 576 };
    const size_t big = sizeof(float) * BIG, small = sizeof(float) * SMALL;
    char header[512];
    int hl = snprintf(header, sizeof header,
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[0,%zu]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]},"
                      "\"c\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}}",
                      BIG, big, SMALL, big, big + small, BIG, big + small, 2 * big + small);
    while (hl % 8 != 0)
        header[hl++] = ' ';
    header[hl] = '\0';
    float *w = calloc(2 * BIG + SMALL, sizeof *w);
    assert_non_null(w);
    for (size_t i = 0; i < 2u * BIG + SMALL; i++)
        w[i] = (float)(i % 1000u);
    char *dir = tu_tmpdir(), *path = tu_safetensors(dir, "w.safetensors", header, w,
                                                    2 * big + small);
    assert_non_null(path);
    st_file sf;
    char err[1024] = "";
    assert_int_equal(st_open(&sf, path, err, sizeof err), EDGERT_OK);
    const st_tensor *b = st_find(&sf, "b");
    assert_non_null(b);
    /* every page of the file mapped */
    volatile unsigned sum = 0;
    for (uint64_t at = 0; at < sf.file_size; at += 4096)
        sum += sf.map[at];
    long all = rss_file_kb();
    st_release(&sf, b);
    long after_own = rss_file_kb();
    st_release_near(&sf, b);
    long after_near = rss_file_kb();
    printf("  RssFile %ld KiB with the file read, %ld after st_release(b), %ld after "
           "st_release_near(b)\n", all, after_own, after_near);
    assert_true(all - after_own <= 8);
    /* [4, 6) MiB of the file: 2048 KiB (the process's other files may move a page) */
    assert_true(after_own - after_near >= 2048 - 8 && after_own - after_near <= 2048 + 8);
    /* still readable: the mapping stays */
    const float *bv = st_data(&sf, b);
    assert_true(bv[0] == w[BIG] && bv[SMALL - 1] == w[BIG + SMALL - 1]);
    st_close(&sf);
    free(path);
    tu_rmrf(dir);
    free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_groups),
        cmocka_unit_test(test_pack_check_group),
        cmocka_unit_test(test_layer_release),
        cmocka_unit_test(test_release_near),
    };
    return tu_run_group("checkpoint_groups", tests, NULL, NULL);
}
