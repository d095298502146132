/*
 * tests/weights/test_checkpoint_act_order.c — act-order (desc_act) GPTQ checkpoints, whose
 * g_idx sends each input to a group out of order: read with their inputs' order
 * (edgert_checkpoint_layer_weights_v2: codes sorted by group, perm), their dense values in the
 * model's order, run on every eligible backend with bit for bit the results of the sorted
 * equivalent (the same codes as an in-order matrix, fed the activations gathered by the test),
 * packed into files that keep the order and refuse to lose it, taken by select, pack and verify.
 *
 * The files: `edgert quantize` of a small dense file (K of 128, 256 and 384; N odd too), then a
 * copy whose every g_idx sends input k to group pi(k) / group with pi(k) = (97 k + 11) mod K, a
 * bijection (97 is prime to 2 and 3), so each group keeps its number of inputs: what GPTQ's
 * act-order writes, groups of inputs from all over K, with the same qweight/qzeros/scales.
 * A layer of one group (K = 128, group 128) stays in order.
 *
 * Exactness: the act-order layer on backend B and its sorted equivalent on B are the same
 * packed bytes fed the same activations in the same order, so their results agree to the bit.
 * Against the dense values (ref-w4a16 only, which multiplies edgert_dequantize's fp32 weights):
 * fp32 sums of k products differ from the exact sum by at most gamma_k S, gamma_k = k u / (1 - k
 * u), u = 2^-24, S = sum_k |x_k w_k|; the double reference adds under 2^-50 S: tolerance
 * 1.01 k 2^-24 S.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h> /* cmocka needs these before its header */
#include <cmocka.h>

#include "edgert/edgert.h"
#include "common/internal.h" /* er_yaml, for test_cli_util.h */
#include "formats/safetensors.h"
#include "test_util.h"
#include "test_cli_util.h"
#include "test_st_util.h"

typedef struct dense_t {
    const char *name;
    uint32_t n, k;
} dense_t;

static const dense_t DENSE[] = {
    {"model.embed_tokens.weight", 48, 256}, /* tied: the head lm_head */
    {"model.layers.0.self_attn.q_proj.weight", 24, 256},
    {"model.layers.0.mlp.down_proj.weight", 17, 384},
    {"model.layers.1.mlp.up_proj.weight", 40, 128},
};
#define NDENSE (sizeof DENSE / sizeof DENSE[0])

/* The quantize schemes; an act-order copy of each. */
static const char *const SCHEME[] = {"--asym", "--sym", "--asym --group 64"};
#define NSCHEME (sizeof SCHEME / sizeof SCHEME[0])

typedef struct fx {
    char *dir, *dense;
    char *in_order[NSCHEME], *act[NSCHEME];
} fx;

static char *write_dense(const char *dir)
{
    char *path = NULL, err[512] = "";
    assert_true(asprintf(&path, "%s/dense.safetensors", dir) > 0);
    st_writer w;
    st_writer_init(&w, path);
    for (size_t t = 0; t < NDENSE; t++) {
        uint64_t shape[2] = {DENSE[t].n, DENSE[t].k};
        assert_int_equal(st_writer_tensor(&w, DENSE[t].name, ST_F32, 2, shape, err, sizeof err),
                         0);
    }
    assert_int_equal(st_writer_begin(&w, 8, err, sizeof err), 0);
    for (size_t t = 0; t < NDENSE; t++)
        for (size_t i = 0; i < (size_t)DENSE[t].n * DENSE[t].k; i++) {
            /* smooth, an outlier every 37 elements, a channel scale along k */
            float f = (float)(0.04 * sin(0.37 * (double)i + (double)t) *
                              (i % 37 == 5 ? 6.0 : 1.0) * (1.0 + (double)(i % DENSE[t].k) / 64.0));
            assert_int_equal(st_writer_write(&w, &f, 4, err, sizeof err), 0);
        }
    if (st_writer_commit(&w, err, sizeof err) != 0)
        fail_msg("writing %s: %s", path, err);
    st_writer_free(&w);
    return path;
}

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Every g_idx (k / group as quantize wrote it) made act-order: input k to
 * group pi(k) / group. */
static void act_order_g_idx(const st_tensor *t, unsigned char *d)
{
    size_t nl = strlen(t->name);
    if (nl < 6 || strcmp(t->name + nl - 6, ".g_idx"))
        return;
    uint32_t k = (uint32_t)t->shape[0], group = 0;
    while (group < k && rd32(d + 4 * group) == 0)
        group++;
    for (uint32_t i = 0; i < k; i++) {
        uint32_t g = (uint32_t)(((uint64_t)i * 97u + 11u) % k) / group;
        memcpy(d + 4 * i, &g, 4);
    }
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    f->dir = tu_tmpdir();
    f->dense = write_dense(f->dir);
    for (size_t s = 0; s < NSCHEME; s++) {
        char *args = NULL, *text = NULL;
        assert_true(asprintf(&f->in_order[s], "%s/q%zu.safetensors", f->dir, s) > 0);
        assert_true(asprintf(&f->act[s], "%s/q%zu-act-order.safetensors", f->dir, s) > 0);
        assert_true(asprintf(&args, "quantize %s %s %s", f->dense, f->in_order[s], SCHEME[s]) > 0);
        int rc = run_all(args, &text);
        if (rc != 0)
            fail_msg("edgert %s: exit %d\n%s", args, rc, text);
        free(args);
        free(text);
        tu_st_copy(f->in_order[s], f->act[s], 8, NULL, act_order_g_idx);
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    for (size_t s = 0; s < NSCHEME; s++)
        free(f->in_order[s]), free(f->act[s]);
    free(f->dense);
    tu_rmrf(f->dir);
    free(f);
    return 0;
}

/* The order the library should give layer `name` of `path`: its inputs
 * sorted by g_idx, stably; NULL when g_idx is k / group. */
static uint32_t *expected_perm(const char *path, const char *name, uint32_t k, uint32_t group)
{
    char err[512] = "", tn[512];
    st_file sf;
    assert_int_equal(st_open(&sf, path, err, sizeof err), 0);
    snprintf(tn, sizeof tn, "%s.g_idx", name);
    const st_tensor *t = st_find(&sf, tn);
    assert_non_null(t);
    const unsigned char *d = st_data(&sf, t);
    uint32_t *perm = malloc((size_t)k * sizeof *perm), at = 0, ordered = 1;
    for (uint32_t g = 0; at < k; g++)
        for (uint32_t i = 0; i < k; i++)
            if (rd32(d + 4 * i) == g)
                perm[at++] = i;
    for (uint32_t i = 0; i < k; i++)
        ordered &= rd32(d + 4 * i) == i / group;
    st_close(&sf);
    if (ordered) {
        free(perm);
        return NULL;
    }
    return perm;
}

/* The group of input i of a layer whose order is perm (inverse lookup). */
static uint32_t group_of(const uint32_t *perm, uint32_t k, uint32_t group, uint32_t i)
{
    for (uint32_t j = 0; perm && j < k; j++)
        if (perm[j] == i)
            return j / group;
    return i / group;
}

/* Reading: v1 refuses an act-order layer, v2 gives its codes in group
 * order with perm, the same scales and zeros, and the dense values in the
 * model's order, each input with its own group's scale and zero. */
static void test_read(void **state)
{
    fx *f = *state;
    char err[1024] = "";
    for (size_t s = 0; s < NSCHEME; s++) {
        edgert_checkpoint *a = tu_open_checkpoint(f->act[s]);
        edgert_checkpoint *b = tu_open_checkpoint(f->in_order[s]);
        size_t permuted = 0;
        for (size_t l = 0; l < edgert_checkpoint_layer_count(a); l++) {
            const edgert_layer *ly = edgert_checkpoint_layer_at(a, l);
            uint32_t n = ly->n, k = ly->k, G = (k + ly->group - 1) / ly->group;
            uint32_t *want = expected_perm(f->act[s], ly->name, k, ly->group);
            edgert_qtensor qa, qb, q1;
            edgert_status v1 = edgert_checkpoint_layer_weights(a, l, &q1, err, sizeof err);
            if (want) {
                assert_int_equal(v1, EDGERT_E_UNSUPPORTED);
                assert_non_null(strstr(err, "act-order"));
                assert_non_null(strstr(err, "edgert_checkpoint_layer_weights_v2"));
                assert_null(q1.codes);
                permuted++;
            } else {
                assert_int_equal(v1, EDGERT_OK);
                edgert_qtensor_free(&q1);
            }
            assert_int_equal(edgert_checkpoint_layer_weights_v2(a, l, &qa, err, sizeof err), 0);
            assert_int_equal(edgert_checkpoint_layer_weights_v2(b, l, &qb, err, sizeof err), 0);
            assert_int_equal(qa.view.struct_size, sizeof(edgert_qweights));
            assert_null(qb.view.perm);
            if (!want)
                assert_null(qa.view.perm);
            else if (!qa.view.perm || memcmp(qa.view.perm, want, (size_t)k * 4))
                fail_msg("%s %s: perm is not g_idx's stable sort", f->act[s], ly->name);
            for (uint32_t r = 0; r < n; r++)
                for (uint32_t j = 0; j < k; j++)
                    assert_int_equal(edgert_qcode(&qa.view, r, j),
                                     edgert_qcode(&qb.view, r, want ? want[j] : j));
            assert_memory_equal(qa.scales, qb.scales, (size_t)n * G * sizeof(float));
            if (qb.zeros)
                assert_memory_equal(qa.zeros, qb.zeros, (size_t)n * G);
            float *w = malloc((size_t)n * k * sizeof *w), *w2 = malloc(2u * k * sizeof *w2);
            assert_int_equal(edgert_checkpoint_layer_dense(a, l, 0, n, w, err, sizeof err), 0);
            for (uint32_t r = 0; r < n; r++)
                for (uint32_t i = 0; i < k; i++) {
                    uint32_t g = group_of(want, k, ly->group, i);
                    int z = qb.zeros ? qb.zeros[r * G + g] : 8;
                    float e = qb.scales[r * G + g] * (float)((int)edgert_qcode(&qb.view, r, i) - z);
                    if (w[(size_t)r * k + i] != e)
                        fail_msg("%s %s: dense [%u][%u] %g, want %g", f->act[s], ly->name, r, i,
                                 w[(size_t)r * k + i], e);
                }
            assert_int_equal(edgert_checkpoint_layer_dense(a, l, 1, 2, w2, err, sizeof err), 0);
            assert_memory_equal(w2, w + k, 2u * k * sizeof *w2);
            free(w), free(w2), free(want);
            edgert_qtensor_free(&qa);
            edgert_qtensor_free(&qb);
        }
        assert_true(permuted >= 2); /* every layer of two groups or more */
        edgert_checkpoint_close(a);
        edgert_checkpoint_close(b);
    }
}

static void fill_x(float *x, size_t count, uint32_t k)
{
    for (size_t i = 0; i < count; i++) /* an outlier channel, as real activations have */
        x[i] = (float)cos(0.11 * (double)i + 0.3) * (i % k == 7 ? 20.0f : 1.0f);
}

/* ref-w4a16's y against the dense values' product (bound in the header). */
static void against_dense(edgert_checkpoint *a, size_t l, uint32_t m, const float *x,
                          const float *y)
{
    const edgert_layer *ly = edgert_checkpoint_layer_at(a, l);
    char err[512] = "";
    float *w = malloc((size_t)ly->n * ly->k * sizeof *w);
    assert_int_equal(edgert_checkpoint_layer_dense(a, l, 0, ly->n, w, err, sizeof err), 0);
    for (uint32_t i = 0; i < m; i++)
        for (uint32_t r = 0; r < ly->n; r++) {
            double exact = 0, S = 0;
            for (uint32_t kk = 0; kk < ly->k; kk++) {
                double p = (double)x[(size_t)i * ly->k + kk] * w[(size_t)r * ly->k + kk];
                exact += p, S += fabs(p);
            }
            double d = fabs(y[(size_t)i * ly->n + r] - exact), tol = 1.01 * ly->k * 0x1p-24 * S;
            if (!(d <= tol + 1e-30))
                fail_msg("ref-w4a16 %s m=%u y[%u][%u]: %.9g vs dense %.9g (|d| %.3g > %.3g)",
                         ly->name, m, i, r, y[(size_t)i * ly->n + r], exact, d, tol);
        }
    free(w);
}

/* Layer l of act-order file a on b: edgert_gemm and edgert_step against
 * the sorted equivalent; 1 compared, 0 refused by the layout. */
static int one_layer(edgert_backend *b, edgert_checkpoint *a, size_t l)
{
    const edgert_layer *ly = edgert_checkpoint_layer_at(a, l);
    char err[1024] = "";
    edgert_packed *pa = NULL, *ps = NULL;
    edgert_status st = edgert_checkpoint_layer_packed(a, l, b, &pa, err, sizeof err);
    if (st == EDGERT_E_UNSUPPORTED) {
        printf("    %s: refused, as its layout may: %s\n", ly->name, err);
        return 0;
    }
    if (st)
        fail_msg("%s: pack %s: %s", edgert_backend_name(b), ly->name, err);
    edgert_qtensor q;
    assert_int_equal(edgert_checkpoint_layer_weights_v2(a, l, &q, err, sizeof err), 0);
    edgert_qweights sorted = q.view;
    sorted.perm = NULL;
    assert_int_equal(edgert_pack(b, &sorted, &ps, err, sizeof err), 0);
    static const uint32_t ms[] = {1, 3, 17};
    /* under qemu m = 1 and 3: every NEON path's decode and a prefill tile */
    for (size_t mi = 0; mi < (EDGERT_TEST_EMULATED ? 2u : 3u); mi++) {
        uint32_t m = ms[mi], n = ly->n, k = ly->k;
        float *x = malloc((size_t)m * k * 4), *xg = malloc((size_t)m * k * 4);
        float *ya = malloc((size_t)m * n * 4), *ys = malloc((size_t)m * n * 4);
        float *yt = malloc((size_t)m * n * 4);
        fill_x(x, (size_t)m * k, k);
        for (uint32_t i = 0; i < m; i++)
            for (uint32_t j = 0; j < k; j++)
                xg[(size_t)i * k + j] = x[(size_t)i * k + (q.view.perm ? q.view.perm[j] : j)];
        tu_gemm(b, pa, m, x, k, ya, n);
        tu_gemm(b, ps, m, xg, k, ys, n);
        if (memcmp(ya, ys, (size_t)m * n * 4))
            fail_msg("%s %s m=%u: the act-order layer differs from its sorted equivalent",
                     edgert_backend_name(b), ly->name, m);
        edgert_gemm_args ga = {.struct_size = sizeof ga, .m = m, .x = x, .ldx = k, .y = yt,
                               .ldy = n};
        edgert_step_op op = {.struct_size = sizeof op, .weights = pa, .args = &ga};
        if (edgert_step(b, &op, 1, err, sizeof err) != EDGERT_OK)
            fail_msg("%s: step: %s", edgert_backend_name(b), err);
        assert_memory_equal(yt, ya, (size_t)m * n * 4);
        if (strcmp(edgert_backend_name(b), "ref-w4a16") == 0)
            against_dense(a, l, m, x, ya);
        free(x), free(xg), free(ya), free(ys), free(yt);
    }
    edgert_qtensor_free(&q);
    edgert_packed_free(pa);
    edgert_packed_free(ps);
    return 1;
}

/* Every eligible in-process backend on every act-order file its layout
 * takes (a symmetric one: the --sym file only). */
static void test_every_backend(void **state)
{
    fx *f = *state;
    edgert_ctx *ctx = tu_open_backends();
    char err[1024] = "";
    size_t backends = 0;
    for (size_t i = 0; i < edgert_candidate_count(ctx); i++) {
        const edgert_candidate *c = edgert_candidate_at(ctx, i);
        if (!c->eligible || !c->library_path)
            continue;
        edgert_backend *b = NULL;
        if (edgert_backend_open(ctx, c->name, NULL, &b, err, sizeof err) != EDGERT_OK)
            fail_msg("%s: eligible here, but: %s", c->name, err);
        size_t compared = 0;
        for (size_t s = 0; s < NSCHEME; s++) {
            if (c->layout.symmetric == 1 && strcmp(SCHEME[s], "--sym"))
                continue;
            edgert_checkpoint *a = tu_open_checkpoint(f->act[s]);
            for (size_t l = 0; l < edgert_checkpoint_layer_count(a); l++)
                compared += (size_t)one_layer(b, a, l);
            edgert_checkpoint_close(a);
        }
        printf("  %s (%s): %zu act-order layers, bit for bit the sorted equivalent's\n", c->name,
               edgert_backend_describe(b), compared);
        if (compared == 0)
            fail_msg("%s ran no act-order layer", c->name);
        backends++;
        edgert_backend_close(b);
    }
    assert_true(backends >= 1);
    edgert_close(ctx);
}

/* Overwrite 4 bytes of tensor `name` of a file at element `at`. */
static void poke(const char *path, const char *name, uint32_t at, uint32_t v)
{
    char err[512] = "";
    st_file sf;
    assert_int_equal(st_open(&sf, path, err, sizeof err), 0);
    const st_tensor *t = st_find(&sf, name);
    assert_non_null(t);
    off_t off = (off_t)(sf.data_start + t->begin + 4u * at);
    st_close(&sf);
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    assert_int_equal(pwrite(fd, b, 4, off), 4);
    close(fd);
}

/* A packed file of an act-order checkpoint keeps each layer's order: its
 * mapped layers give the in-memory pack's results bit for bit; one whose
 * order is broken or missing is refused at open, naming the tensor. */
static int not_an_order(const st_tensor *t)
{
    size_t n = strlen(t->name);
    return n < 5 || strcmp(t->name + n - 5, ".perm") != 0;
}

static void test_packed_file(void **state)
{
    fx *f = *state;
    if (EDGERT_TEST_EMULATED)
        tu_skip("under qemu: ref-w4a16's packed file is the same bytes natively, where it runs");
    edgert_ctx *ctx = tu_open_backends();
    char err[1024] = "", *path = NULL;
    edgert_backend *b = NULL;
    assert_int_equal(edgert_backend_open(ctx, "ref-w4a16", NULL, &b, err, sizeof err), 0);
    assert_true(asprintf(&path, "%s/act.packed", f->dir) > 0);
    edgert_checkpoint *a = tu_open_checkpoint(f->act[0]), *p = NULL;
    if (edgert_checkpoint_pack(b, a, path, err, sizeof err) != EDGERT_OK)
        fail_msg("pack: %s", err);
    assert_int_equal(edgert_checkpoint_pack_check(b, a, path, err, sizeof err), EDGERT_OK);
    p = tu_open_checkpoint(path);
    tu_mapped_equals_packed(b, p, a);
    edgert_checkpoint_close(p);
    p = NULL;
    /* an order with input 3 twice */
    poke(path, "model.layers.0.self_attn.q_proj.perm", 0, 3);
    poke(path, "model.layers.0.self_attn.q_proj.perm", 1, 3);
    assert_int_equal(edgert_checkpoint_open(path, &p, err, sizeof err), EDGERT_E_PARSE);
    assert_null(p);
    assert_non_null(strstr(err, "model.layers.0.self_attn.q_proj.perm"));
    assert_non_null(strstr(err, "not a permutation"));
    /* the orders dropped: a copy without them (a tool that kept the packed
     * bytes only) would map the layers without gathering */
    char *copy = NULL;
    assert_true(asprintf(&copy, "%s/no-order.packed", f->dir) > 0);
    assert_int_equal(edgert_checkpoint_pack(b, a, path, err, sizeof err), EDGERT_OK);
    tu_st_copy(path, copy, 4096, not_an_order, NULL);
    assert_int_equal(edgert_checkpoint_open(copy, &p, err, sizeof err), EDGERT_E_PARSE);
    assert_non_null(strstr(err, "act_order=1"));
    assert_non_null(strstr(err, ".perm'"));
    free(copy);
    edgert_checkpoint_close(a);
    free(path);
    edgert_backend_close(b);
    edgert_close(ctx);
}

/* A perm that is not a permutation is refused by edgert_pack and
 * edgert_packed_map before the backend sees anything. */
static void test_bad_perm(void **state)
{
    fx *f = *state;
    edgert_ctx *ctx = tu_open_backends();
    char err[1024] = "";
    edgert_backend *b = NULL;
    assert_int_equal(edgert_backend_open(ctx, "ref-w4a16", NULL, &b, err, sizeof err), 0);
    edgert_checkpoint *a = tu_open_checkpoint(f->act[0]);
    edgert_qtensor q;
    assert_int_equal(edgert_checkpoint_layer_weights_v2(a, 0, &q, err, sizeof err), 0);
    uint32_t k = q.view.k, *bad = malloc(k * sizeof *bad);
    for (int c = 0; c < 2; c++) {
        for (uint32_t j = 0; j < k; j++)
            bad[j] = j;
        bad[k - 1] = c == 0 ? k : 0; /* past K; input 0 twice */
        edgert_qweights w = q.view;
        w.perm = bad;
        edgert_packed *p = NULL;
        assert_int_equal(edgert_pack(b, &w, &p, err, sizeof err), EDGERT_E_USAGE);
        assert_null(p);
        assert_non_null(strstr(err, c == 0 ? "not an input" : "there twice"));
        const void *data = NULL;
        size_t size = 0;
        edgert_packed *good = NULL;
        w.perm = NULL;
        assert_int_equal(edgert_pack(b, &w, &good, err, sizeof err), EDGERT_OK);
        assert_int_equal(edgert_packed_data(good, &data, &size, err, sizeof err), EDGERT_OK);
        w.perm = bad;
        assert_int_equal(edgert_packed_map(b, &w, data, size, &p, err, sizeof err),
                         EDGERT_E_USAGE);
        assert_null(p);
        assert_non_null(strstr(err, "perm must be a permutation"));
        edgert_packed_free(good);
    }
    free(bad);
    edgert_qtensor_free(&q);
    edgert_checkpoint_close(a);
    edgert_backend_close(b);
    edgert_close(ctx);
}

/* The commands take an act-order file as any other (they refused it, exit 4),
 * and bench --versus-weights times its decode steps beside the file in
 * order's (only where the two have the same layers). */
static void test_commands(void **state)
{
    fx *f = *state;
    if (EDGERT_TEST_EMULATED)
        tu_skip("under qemu the commands' runs (verify, bench) take a minute; the native "
                "builds run them");
    char *args[4] = {NULL}, *out = NULL;
    assert_true(asprintf(&args[0], "select --weights %s", f->act[0]) > 0);
    assert_true(asprintf(&args[1], "pack %s --backend ref-w4a16 -o %s/cli.packed", f->act[0],
                         f->dir) > 0);
    assert_true(asprintf(&args[2], "verify --weights %s --backend ref-w4a16 --quick --tokens 8",
                         f->act[0]) > 0);
    assert_true(asprintf(&args[3], "bench --weights %s --backend ref-w4a16 --versus ref-w4a16 "
                         "--versus-weights %s --phase decode --repeat 2 --read-mib 16 --json",
                         f->in_order[0], f->act[0]) > 0);
    for (int i = 0; i < 4; i++) {
        int rc = run_all(args[i], &out);
        if (rc != 0)
            fail_msg("edgert %s: exit %d\n%s", args[i], rc, out);
        if (i == 3 && (!strstr(out, "\"step_ratio\"") || !strstr(out, f->act[0])))
            fail_msg("bench --versus-weights: no step ratio for %s:\n%s", f->act[0], out);
        free(out);
        free(args[i]);
    }
    /* other layers: refused before anything runs */
    static const float w[2 * 8] = {0};
    char *other = tu_safetensors(f->dir, "other.safetensors", "{\"l.weight\":{\"dtype\":\"F32\","
                                 "\"shape\":[2,8],\"data_offsets\":[0,64]}}", w, sizeof w);
    assert_true(asprintf(&args[0], "bench --weights %s --backend ref-w4a16 --versus ref-w4a16 "
                         "--versus-weights %s --phase decode", f->act[0], other) > 0);
    int rc = run_all(args[0], &out);
    if (rc != 2 || !strstr(out, "--versus-weights compares two checkpoints of one model"))
        fail_msg("edgert %s: exit %d (want 2)\n%s", args[0], rc, out);
    free(out), free(args[0]), free(other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read),
        cmocka_unit_test(test_every_backend),
        cmocka_unit_test(test_packed_file),
        cmocka_unit_test(test_bad_perm),
        cmocka_unit_test(test_commands),
    };
    return tu_run_group("checkpoint_act_order", tests, setup, teardown);
}
