/*
 * tests/weights/test_checkpoint.c — a user's own weights end to end: a small dense checkpoint
 * written here is quantized with `edgert quantize`, read back as GPTQ (its codes checked against
 * an independent decode of qweight/qzeros), packed for every backend eligible on this machine and
 * run: GEMM results equal ref-w4a16's on the same codes within the bound below; `edgert pack`
 * writes a packed file that a second run maps instead of repacking, whose mapped layers give
 * results bit for bit equal to the in-memory pack; keys that differ are refused, --force repacks;
 * select/bench/verify take --weights. The malformed-file corpus is
 * tests/weights/test_checkpoint_bad.c.
 *
 * Tolerance against ref-w4a16 (both run the same codes, scales and zero
 * points; per output y[i][r], with S = sum_k |x_k w_k| and
 * Z = sum_k |x_k| 15 |s_k|):
 *   - activations: bf16 rounds each x to 2^-8 relative (fp16: 2^-11; the
 *     int16 paths: 2^-13 of the group's max, at most 2^-13 S per group
 *     share): at most 2^-8 S;
 *   - scales kept with 20 significant bits and fp32 accumulation:
 *     2^-19 S, and 2^-14 Z for the zero point applied per group;
 *   - ref-w4a16's own fp32 sums over k <= 384 terms: 384 2^-24 < 2^-15 S.
 * So |y_B - y_ref| <= 2^-7 S + 2^-14 Z (2^-8 + 2^-19 + 2^-15 < 2^-7).
 * A backend with int8 activations (one scale per token, s = max_k |x_k| / 127,
 * rounded to nearest) moves each x by at most s / 2 = M / 254 with
 * M = max_k |x_k| of the token: the bound adds (M / 254) sum_k |w_k|. Its
 * fp16 scales hold a GPTQ file's (fp16) scales exactly.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdarg.h>
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

/* The dense checkpoint: odd N, K a multiple of the group and not, three
 * dtypes, a tied head (no lm_head.weight), a 1-D tensor copied as it is. */
typedef struct dense_t {
    const char *name;
    st_dtype dt;
    uint32_t n, k; /* k 0: 1-D [n] */
} dense_t;

static const dense_t DENSE[] = {
    {"model.embed_tokens.weight", ST_F32, 48, 256},
    {"model.layers.0.self_attn.q_proj.weight", ST_BF16, 24, 256},
    {"model.layers.0.mlp.down_proj.weight", ST_F16, 17, 384},
    {"model.layers.1.mlp.up_proj.weight", ST_F32, 40, 136},
    {"model.norm.weight", ST_F32, 256, 0},
};
#define NDENSE (sizeof DENSE / sizeof DENSE[0])

static float dense_value(size_t t, size_t i)
{
    /* smooth, with an outlier every 37 elements and a sign pattern per tensor */
    double v = 0.04 * sin(0.37 * (double)i + (double)t) * (i % 37 == 5 ? 6.0 : 1.0);
    return (float)(t == 4 ? 1.0 + v : v);
}

/* The dense file, or with `whole` the same without the layer whose K is not
 * a multiple of 128 (what every backend here takes). */
static char *write_dense(const char *dir, int whole)
{
    char *path = NULL, err[512] = "";
    assert_true(asprintf(&path, "%s/%s.safetensors", dir, whole ? "whole" : "dense") > 0);
    st_writer w;
    st_writer_init(&w, path);
    for (size_t t = 0; t < NDENSE; t++) {
        if (whole && DENSE[t].k % 128)
            continue;
        uint64_t shape[2] = {DENSE[t].n, DENSE[t].k};
        assert_int_equal(st_writer_tensor(&w, DENSE[t].name, DENSE[t].dt, DENSE[t].k ? 2 : 1,
                                          shape, err, sizeof err), 0);
    }
    assert_int_equal(st_writer_begin(&w, 8, err, sizeof err), 0);
    for (size_t t = 0; t < NDENSE; t++) {
        if (whole && DENSE[t].k % 128)
            continue;
        size_t n = (size_t)DENSE[t].n * (DENSE[t].k ? DENSE[t].k : 1);
        for (size_t i = 0; i < n; i++) {
            float f = dense_value(t, i);
            uint16_t h = DENSE[t].dt == ST_BF16 ? st_f32_to_bf16(f) : st_f32_to_f16(f);
            assert_int_equal(st_writer_write(&w, DENSE[t].dt == ST_F32 ? (void *)&f : (void *)&h,
                                             DENSE[t].dt == ST_F32 ? 4 : 2, err, sizeof err),
                             0);
        }
    }
    if (st_writer_commit(&w, err, sizeof err) != 0)
        fail_msg("writing %s: %s", path, err);
    st_writer_free(&w);
    return path;
}

static char *quantize(const char *dir, const char *dense, const char *name, const char *scheme)
{
    char *out = NULL, *args = NULL, *text = NULL;
    assert_true(asprintf(&out, "%s/%s", dir, name) > 0);
    assert_true(asprintf(&args, "quantize %s %s %s", dense, out, scheme) > 0);
    int rc = run_all(args, &text);
    if (rc != 0)
        fail_msg("edgert %s: exit %d\n%s", args, rc, text);
    free(args);
    free(text);
    return out;
}

/* ---- reading back: independent decode of the GPTQ tensors --------------------------- */

static uint32_t word(const st_file *sf, const st_tensor *t, uint64_t i)
{
    uint32_t v;
    memcpy(&v, (const unsigned char *)st_data(sf, t) + 4 * i, 4);
    return v;
}

/* Every code and zero point of layer l as edgert_checkpoint_layer_weights
 * gives them, against qweight/qzeros decoded here (v1: zero = stored + 1). */
static void check_codes(const char *path, edgert_checkpoint *ck, size_t l, int sym)
{
    const edgert_layer *ly = edgert_checkpoint_layer_at(ck, l);
    char err[1024] = "", name[512];
    st_file sf;
    assert_int_equal(st_open(&sf, path, err, sizeof err), 0);
    snprintf(name, sizeof name, "%s.qweight", ly->name);
    const st_tensor *qw = st_find(&sf, name);
    snprintf(name, sizeof name, "%s.qzeros", ly->name);
    const st_tensor *qz = st_find(&sf, name);
    assert_non_null(qw);
    assert_non_null(qz);
    edgert_qtensor q;
    assert_int_equal(edgert_checkpoint_layer_weights(ck, l, &q, err, sizeof err), EDGERT_OK);
    assert_int_equal(q.zeros == NULL, sym);
    size_t G = (ly->k + ly->group - 1) / ly->group;
    for (uint32_t n = 0; n < ly->n; n++)
        for (uint32_t k = 0; k < ly->k; k++) {
            unsigned want = (word(&sf, qw, (uint64_t)(k / 8) * ly->n + n) >> (4 * (k % 8))) & 15;
            assert_int_equal(edgert_qcode(&q.view, n, k), want);
            unsigned z = ((word(&sf, qz, (uint64_t)(k / ly->group) * qz->shape[1] + n / 8) >>
                           (4 * (n % 8))) & 15) + 1;
            assert_int_equal(q.zeros ? q.zeros[n * G + k / ly->group] : 8u, z);
        }
    edgert_qtensor_free(&q);
    st_close(&sf);
}

/* ---- running every eligible backend ----------------------------------------------------- */

/* Backend b against ref on every layer of ck, m = 1, 3, 17 (the bound is
 * derived in the header comment). A backend whose layout holds only its own
 * group size (its manifest's), or only whole groups, may refuse a layer
 * that has another, or a partial last group, cleanly. */
static size_t against_ref(const edgert_candidate *c, edgert_backend *b, edgert_backend *ref,
                          edgert_checkpoint *ck)
{
    char err[1024] = "";
    size_t compared = 0;
    for (size_t l = 0; l < edgert_checkpoint_layer_count(ck); l++) {
        const edgert_layer *ly = edgert_checkpoint_layer_at(ck, l);
        edgert_qtensor q;
        edgert_packed *pb = NULL, *pr = NULL;
        assert_int_equal(edgert_checkpoint_layer_weights(ck, l, &q, err, sizeof err), EDGERT_OK);
        edgert_status st = edgert_pack(b, &q.view, &pb, err, sizeof err);
        if (st == EDGERT_E_UNSUPPORTED &&
            (((int)ly->group != c->layout.group_size && strstr(err, "group size")) ||
             (ly->k % ly->group && strstr(err, "no partial groups")))) {
            printf("    %s: refused, as its layout says: %s\n", ly->name, err);
            edgert_qtensor_free(&q);
            continue;
        }
        if (st != EDGERT_OK)
            fail_msg("%s: pack %s: %s", edgert_backend_name(b), ly->name, err);
        assert_int_equal(edgert_pack(ref, &q.view, &pr, err, sizeof err), EDGERT_OK);
        static const uint32_t ms[] = {1, 3, 17};
        for (size_t mi = 0; mi < 3; mi++) {
            uint32_t m = ms[mi], n = ly->n, k = ly->k;
            float *x = malloc(sizeof(float) * m * k), *yb = malloc(sizeof(float) * m * n);
            float *yr = malloc(sizeof(float) * m * n), *w = malloc(sizeof(float) * n * k);
            for (size_t i = 0; i < (size_t)m * k; i++)
                x[i] = (float)cos(0.11 * (double)i) * (i % k == 3 ? 20.0f : 1.0f);
            edgert_dequantize(&q.view, w);
            tu_gemm(b, pb, m, x, k, yb, n);
            tu_gemm(ref, pr, m, x, k, yr, n);
            size_t G = (k + q.view.group - 1) / q.view.group;
            const int int8 = c->layout.activation_bits == 8;
            for (uint32_t i = 0; i < m; i++)
                for (uint32_t r = 0; r < n; r++) {
                    double S = 0, Z = 0, W1 = 0, M = 0;
                    for (uint32_t kk = 0; kk < k; kk++) {
                        S += fabs((double)x[(size_t)i * k + kk] * w[(size_t)r * k + kk]);
                        Z += fabs((double)x[(size_t)i * k + kk]) * 15.0 *
                             fabs((double)q.view.scales[r * G + kk / q.view.group]);
                        W1 += fabs((double)w[(size_t)r * k + kk]);
                        M = fmax(M, fabs((double)x[(size_t)i * k + kk]));
                    }
                    double tol = ldexp(S, -7) + ldexp(Z, -14) + (int8 ? M / 254.0 * W1 : 0.0) +
                                 1e-30;
                    double d = fabs((double)yb[(size_t)i * n + r] - yr[(size_t)i * n + r]);
                    if (!(d <= tol))
                        fail_msg("%s vs ref-w4a16, layer %s m=%u: y[%u][%u] %.9g vs %.9g, "
                                 "|diff| %.3g > %.3g", edgert_backend_name(b), ly->name, m, i, r,
                                 yb[(size_t)i * n + r], yr[(size_t)i * n + r], d, tol);
                }
            free(x), free(yb), free(yr), free(w);
        }
        edgert_packed_free(pb);
        edgert_packed_free(pr);
        edgert_qtensor_free(&q);
        compared++;
    }
    return compared;
}

/* Each eligible GEMM backend here but ref-w4a16 against ref-w4a16 on the
 * file's codes; how many compared at least one layer (a backend that
 * refused every layer, as its layout allows, does not count). */
static size_t every_backend(edgert_ctx *ctx, edgert_checkpoint *ck, int sym)
{
    char err[1024] = "";
    edgert_backend *ref = NULL;
    if (edgert_backend_open(ctx, "ref-w4a16", NULL, &ref, err, sizeof err) != EDGERT_OK)
        fail_msg("ref-w4a16: %s", err);
    size_t ran = 0;
    for (size_t i = 0; i < edgert_candidate_count(ctx); i++) {
        const edgert_candidate *c = edgert_candidate_at(ctx, i);
        edgert_backend *b = NULL;
        if (!c->eligible || !c->library_path || (c->layout.symmetric && !sym) ||
            strcmp(c->name, "ref-w4a16") == 0)
            continue; /* export-only, symmetric-only, the reference, or not for this machine */
        if (edgert_backend_open(ctx, c->name, NULL, &b, err, sizeof err) != EDGERT_OK)
            fail_msg("%s: eligible here, but: %s", c->name, err);
        printf("  %s (%s)\n", c->name, edgert_backend_describe(b));
        ran += against_ref(c, b, ref, ck) > 0;
        edgert_backend_close(b);
    }
    edgert_backend_close(ref);
    return ran;
}

/* ---- the cases ------------------------------------------------------------------------------ */

typedef struct fx {
    char *dir, *dense, *asym, *sym, *g64;
    char *whole, *whole_asym, *whole_sym; /* no partial group: every backend takes them */
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    f->dir = tu_tmpdir();
    f->dense = write_dense(f->dir, 0);
    f->whole = write_dense(f->dir, 1);
    f->whole_asym = quantize(f->dir, f->whole, "whole-asym.safetensors", "--asym");
    f->whole_sym = quantize(f->dir, f->whole, "whole-sym.safetensors", "--sym");
    f->asym = quantize(f->dir, f->dense, "asym.safetensors", "--asym");
    f->sym = quantize(f->dir, f->dense, "sym.safetensors", "--sym");
    f->g64 = quantize(f->dir, f->dense, "g64.safetensors", "--asym --group 64");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    free(f->dense), free(f->asym), free(f->sym), free(f->g64);
    free(f->whole), free(f->whole_asym), free(f->whole_sym);
    tu_rmrf(f->dir);
    free(f);
    return 0;
}

/* The quantized files read back as GPTQ: layers, settings, codes, the
 * error bound of checkpoint_quantize.c, the tensors copied as they were. */
static void read_back(const char *dense, const char *path, int sym, uint32_t group)
{
    static const char *const names[] = {"model.layers.0.self_attn.q_proj",
                                        "model.layers.0.mlp.down_proj",
                                        "model.layers.1.mlp.up_proj", "lm_head"};
    static const size_t src[] = {1, 2, 3, 0}; /* DENSE index of each */
    edgert_checkpoint *ck = tu_open_checkpoint(path), *dk = tu_open_checkpoint(dense);
    char err[1024] = "";
    assert_string_equal(edgert_checkpoint_kind(ck), "gptq");
    assert_string_equal(edgert_checkpoint_config_source(ck), "metadata");
    assert_int_equal(edgert_checkpoint_layer_count(ck), 4);
    assert_string_equal(edgert_checkpoint_kind(dk), "dense");
    /* the same layers in the dense file: the head tied to the embedding too */
    assert_int_equal(edgert_checkpoint_layer_count(dk), 4);
    for (size_t l = 0; l < 4; l++) {
        const edgert_layer *dl = edgert_checkpoint_layer_at(dk, l);
        assert_string_equal(dl->name, names[l]);
        assert_true(strncmp(dl->format, "dense-", 6) == 0 && dl->symmetric == -1);
        assert_true(dl->n == DENSE[src[l]].n && dl->k == DENSE[src[l]].k);
    }
    for (size_t l = 0; l < 4; l++) {
        const edgert_layer *ly = edgert_checkpoint_layer_at(ck, l);
        assert_string_equal(ly->name, names[l]);
        assert_string_equal(ly->format, "gptq-v1");
        assert_int_equal(ly->n, DENSE[src[l]].n);
        assert_int_equal(ly->k, DENSE[src[l]].k);
        assert_int_equal(ly->group, group);
        assert_int_equal(ly->symmetric, sym);
        check_codes(path, ck, l, sym);
        /* |w - s16 (q - z)| <= 0.504 s (checkpoint_quantize.c) */
        size_t nk = (size_t)ly->n * ly->k, G = (ly->k + group - 1) / group;
        float *w = malloc(nk * sizeof *w), *d = malloc(nk * sizeof *d);
        edgert_qtensor q;
        assert_int_equal(edgert_checkpoint_layer_dense(ck, l, 0, ly->n, w, err, sizeof err), 0);
        assert_int_equal(edgert_checkpoint_layer_weights(ck, l, &q, err, sizeof err), 0);
        st_file sf;
        assert_int_equal(st_open(&sf, dense, err, sizeof err), 0);
        assert_int_equal(st_read_f32(&sf, st_find(&sf, DENSE[src[l]].name), 0, nk, d, err,
                                     sizeof err), 0);
        st_close(&sf);
        for (size_t i = 0; i < nk; i++) {
            double s = q.scales[(i / ly->k) * G + (i % ly->k) / group];
            if (!(fabs((double)w[i] - d[i]) <= 0.504 * s))
                fail_msg("%s %s [%zu]: %.9g vs dense %.9g, scale %.3g", path, ly->name, i,
                         w[i], d[i], s);
        }
        edgert_qtensor_free(&q);
        free(w), free(d);
    }
    /* the 1-D norm and the embedding are copied byte for byte */
    st_file a, b;
    assert_int_equal(st_open(&a, dense, err, sizeof err), 0);
    assert_int_equal(st_open(&b, path, err, sizeof err), 0);
    for (size_t t = 0; t < NDENSE; t += 4) {
        const st_tensor *ta = st_find(&a, DENSE[t].name), *tb = st_find(&b, DENSE[t].name);
        assert_non_null(tb);
        assert_int_equal(tb->end - tb->begin, ta->end - ta->begin);
        assert_memory_equal(st_data(&a, ta), st_data(&b, tb), ta->end - ta->begin);
    }
    st_close(&a), st_close(&b);
    edgert_checkpoint_close(ck);
    edgert_checkpoint_close(dk);
}

static void test_quantize_read_back(void **state)
{
    fx *f = *state;
    read_back(f->dense, f->asym, 0, 128);
    read_back(f->dense, f->sym, 1, 128);
    read_back(f->dense, f->g64, 0, 64);
    char *cfg = NULL;
    assert_true(asprintf(&cfg, "%s/quantize_config.json", f->dir) > 0);
    assert_int_equal(access(cfg, R_OK), 0);
    free(cfg);
}

static void test_every_backend_on_the_codes(void **state)
{
    fx *f = *state;
    edgert_ctx *ctx = tu_open_backends();
    const char *files[] = {f->asym, f->sym, f->g64};
    size_t compared = 0;
    for (size_t i = 0; i < 3; i++) {
        edgert_checkpoint *ck = tu_open_checkpoint(files[i]);
        printf("%s:\n", files[i]);
        size_t ran = every_backend(ctx, ck, i == 1);
        if (ran == 0)
            tu_skip_line(__func__, "", "%s: no backend here but ref-w4a16 takes its layers",
                         files[i]);
        compared += ran;
        edgert_checkpoint_close(ck);
    }
    edgert_close(ctx);
    if (compared == 0)
        tu_skip("no backend here but ref-w4a16 takes these checkpoints' layers");
}

/* A dense layer packed for a symmetric backend (the W4A8 ones) through the
 * checkpoint is quantized symmetric, the way that backend takes it, not
 * refused as asymmetric: the same bits as edgert_quantize_rtn(symmetric)
 * packed by hand. Skipped where no symmetric backend is eligible. */
static void test_dense_for_symmetric_backend(void **state)
{
    fx *f = *state;
    edgert_ctx *ctx = tu_open_backends();
    edgert_checkpoint *ck = tu_open_checkpoint(f->whole);
    char err[1024] = "";
    size_t ran = 0;
    for (size_t i = 0; i < edgert_candidate_count(ctx); i++) {
        const edgert_candidate *c = edgert_candidate_at(ctx, i);
        edgert_backend *b = NULL;
        if (!c->eligible || !c->library_path || c->layout.symmetric != 1)
            continue;
        if (edgert_backend_open(ctx, c->name, NULL, &b, err, sizeof err) != EDGERT_OK)
            fail_msg("%s: eligible here, but: %s", c->name, err);
        for (size_t l = 0; l < edgert_checkpoint_layer_count(ck); l++) {
            const edgert_layer *ly = edgert_checkpoint_layer_at(ck, l);
            uint32_t m = 3, n = ly->n, k = ly->k;
            edgert_packed *pc = NULL, *ph = NULL;
            edgert_qtensor q;
            if (edgert_checkpoint_layer_packed(ck, l, b, &pc, err, sizeof err) != EDGERT_OK)
                fail_msg("%s: dense layer %s: %s", c->name, ly->name, err);
            float *w = malloc(sizeof(float) * n * k), *x = malloc(sizeof(float) * m * k);
            float *y1 = calloc((size_t)m * n, sizeof(float)), *y2 = calloc((size_t)m * n, 4);
            assert_int_equal(edgert_checkpoint_layer_dense(ck, l, 0, n, w, err, sizeof err), 0);
            assert_int_equal(edgert_quantize_rtn(w, n, k, 128, 1, &q), EDGERT_OK);
            assert_int_equal(edgert_pack(b, &q.view, &ph, err, sizeof err), EDGERT_OK);
            for (size_t j = 0; j < (size_t)m * k; j++)
                x[j] = (float)sin(0.3 * (double)j);
            tu_gemm(b, pc, m, x, k, y1, n);
            tu_gemm(b, ph, m, x, k, y2, n);
            assert_memory_equal(y1, y2, sizeof(float) * m * n);
            printf("  %s: dense %s [n=%u k=%u] packed symmetric\n", c->name, ly->name, n, k);
            free(w), free(x), free(y1), free(y2);
            edgert_qtensor_free(&q);
            edgert_packed_free(pc);
            edgert_packed_free(ph);
        }
        edgert_backend_close(b);
        ran++;
    }
    edgert_checkpoint_close(ck);
    edgert_close(ctx);
    if (!ran)
        tu_skip("no backend with a symmetric layout is eligible on this machine");
}

static int run_fmt(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run_fmt(char **out, const char *fmt, ...)
{
    char args[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return run_all(args, out);
}

/* The mapped layers of `packed` give, bit for bit, what packing `src` in
 * memory gives. */
static void mapped_equals_packed(edgert_backend *b, const char *packed, const char *src)
{
    edgert_checkpoint *pk = tu_open_checkpoint(packed), *ck = tu_open_checkpoint(src);
    tu_mapped_equals_packed(b, pk, ck);
    edgert_checkpoint_close(pk);
    edgert_checkpoint_close(ck);
}

static void test_pack_cache(void **state)
{
    fx *f = *state;
    edgert_ctx *ctx = tu_open_backends();
    char err[1024] = "", *out = NULL, *p = NULL;
    size_t mappable = 0;
    for (size_t i = 0; i < edgert_candidate_count(ctx); i++) {
        const edgert_candidate *c = edgert_candidate_at(ctx, i);
        edgert_backend *b = NULL;
        const char *mapped = f->asym, *other_src = f->sym;
        if (!c->eligible || !c->library_path || c->layout.symmetric ||
            edgert_backend_open(ctx, c->name, NULL, &b, err, sizeof err) != EDGERT_OK)
            continue;
        if (!edgert_backend_packed_layout(b)) { /* an ABI-1 plugin: says so, writes nothing */
            assert_true(asprintf(&p, "%s/%s.packed", f->dir, c->name) > 0);
            /* whole groups: a partial one is the layout gate's refusal (exit 3) */
            assert_int_equal(run_fmt(&out, "pack %s --backend %s -o %s", f->whole_asym, c->name,
                                     p), 1);
            assert_non_null(strstr(out, "cannot map"));
            assert_int_not_equal(access(p, F_OK), 0);
            free(out), free(p);
            edgert_backend_close(b);
            continue;
        }
        mappable++;
        assert_true(asprintf(&p, "%s/%s.packed", f->dir, c->name) > 0);
        int rc = run_fmt(&out, "pack %s --backend %s -o %s", f->asym, c->name, p);
        if (rc != 0) { /* a layout without partial groups: its gate refuses, leaving nothing */
            if (rc != 3 || !strstr(out, "LAYOUT_MISMATCH(partial groups)") || access(p, F_OK) == 0)
                fail_msg("pack for %s: exit %d\n%s", c->name, rc, out);
            free(out);
            rc = run_fmt(&out, "pack %s --backend %s -o %s", f->whole_asym, c->name, p);
            mapped = f->whole_asym, other_src = f->whole_sym;
        }
        if (rc != 0 || !strstr(out, "packed for"))
            fail_msg("pack for %s: exit %d\n%s", c->name, rc, out);
        free(out);
        rc = run_fmt(&out, "pack %s --backend %s -o %s", mapped, c->name, p);
        if (rc != 0 || !strstr(out, "up to date (mapped, not repacked)"))
            fail_msg("second pack for %s: exit %d\n%s", c->name, rc, out);
        free(out);
        mapped_equals_packed(b, p, mapped);
        /* other weights: refused with the key, --force repacks */
        rc = run_fmt(&out, "pack %s --backend %s -o %s", other_src, c->name, p);
        if (rc != 1 || !strstr(out, "source XXH3 differs") || !strstr(out, "--force"))
            fail_msg("pack of other weights over %s: exit %d\n%s", p, rc, out);
        free(out);
        rc = run_fmt(&out, "pack %s --backend %s -o %s --force", other_src, c->name, p);
        if (rc != 0 || !strstr(out, "packed for"))
            fail_msg("pack --force for %s: exit %d\n%s", c->name, rc, out);
        free(out);
        mapped_equals_packed(b, p, other_src);
        edgert_backend_close(b);
        free(p);
    }
    assert_true(mappable >= 1); /* ref-w4a16 at least */
    /* a file packed for ref-w4a16, mapped with another backend: the key */
    edgert_backend *other = NULL;
    assert_true(asprintf(&p, "%s/ref-w4a16.packed", f->dir) > 0);
    for (size_t i = 0; i < edgert_candidate_count(ctx) && !other; i++) {
        const edgert_candidate *k = edgert_candidate_at(ctx, i);
        if (k->eligible && k->library_path && strcmp(k->name, "ref-w4a16") != 0 &&
            edgert_backend_open(ctx, k->name, NULL, &other, err, sizeof err) != EDGERT_OK)
            other = NULL;
    }
    if (other) {
        edgert_checkpoint *pk = tu_open_checkpoint(p);
        edgert_packed *pm = NULL;
        assert_int_equal(edgert_checkpoint_layer_packed(pk, 0, other, &pm, err, sizeof err),
                         EDGERT_E_UNSUPPORTED);
        assert_non_null(strstr(err, "packed for backend 'ref-w4a16'"));
        assert_null(pm);
        edgert_checkpoint_close(pk);
        edgert_backend_close(other);
    }
    free(p);
    edgert_close(ctx);
}

/* select, bench and verify take --weights. */
static void test_weights_commands(void **state)
{
    fx *f = *state;
    TU_SKIP_EMULATED("38 s: pack, select, bench and verify of the reference");
    char *out = NULL, *p = NULL;
    assert_true(asprintf(&p, "%s/ref-w4a16.packed", f->dir) > 0);
    int rc = run_fmt(&out, "pack %s --backend ref-w4a16 -o %s --force", f->asym, p);
    assert_int_equal(rc, 0);
    free(out);
    rc = run_fmt(&out, "select --explain --weights %s", p);
    if (rc != 0 || !strstr(out, "LAYOUT_MISMATCH(packed for ref-w4a16)") ||
        !strstr(out, "layout of --weights"))
        fail_msg("select --explain --weights %s: exit %d\n%s", p, rc, out);
    free(out);
    rc = run_fmt(&out, "select --backend ref-w4a16 --weights %s", f->asym);
    assert_int_equal(rc, 0);
    free(out);
    rc = run_fmt(&out, "bench --weights %s --backend ref-w4a16 --phase prefill --m 4 --json", p);
    if (rc != 0 || !strstr(out, "\"lm_head\""))
        fail_msg("bench --weights %s: exit %d\n%s", p, rc, out);
    free(out);
    rc = run_fmt(&out, "verify --weights %s --backend ref-w4a16 --quick --tokens 8", f->asym);
    if (rc != 0 || !strstr(out, "lm_head"))
        fail_msg("verify --weights %s: exit %d\n%s", f->asym, rc, out);
    free(out);
    rc = run_fmt(&out, "verify --weights %s --backend ref-w4a16 --quick", p);
    if (rc != 1 || !strstr(out, "the checkpoint it was packed from")) /* bench takes it */
        fail_msg("verify on a packed file: exit %d\n%s", rc, out);
    free(out);
    rc = run_fmt(&out, "bench --weights %s --workload x.yaml", p);
    assert_int_equal(rc, 2);
    free(out);
    free(p);
    /* auto: the best-ranked backend that can map its packed form */
    assert_true(asprintf(&p, "%s/auto.packed", f->dir) > 0);
    rc = run_fmt(&out, "pack %s --backend auto -o %s", f->whole_asym, p);
    if (rc != 0 || !strstr(out, "packed for"))
        fail_msg("pack --backend auto: exit %d\n%s", rc, out);
    free(out);
    rc = run_fmt(&out, "pack %s --backend no-such-backend -o %s", f->whole_asym, p);
    assert_int_equal(rc, 3);
    free(out);
    free(p);
    /* verify on a dense file, for a backend with a symmetric layout: its
     * layers quantized symmetric, as pack does (they were handed the
     * asymmetric form, which such a backend refuses: 'ERROR', exit 1) */
    edgert_ctx *ctx = tu_open_backends();
    for (size_t i = 0; i < edgert_candidate_count(ctx); i++) {
        const edgert_candidate *c = edgert_candidate_at(ctx, i);
        if (!c->eligible || !c->runs_in_process || c->layout.symmetric != 1)
            continue;
        rc = run_fmt(&out, "verify --weights %s --backend %s --quick --tokens 8", f->whole,
                     c->name);
        /* the fixture's head is tied: the embedding is the head verified */
        if (rc != 0 || strstr(out, "a generated head") || !strstr(out, "lm_head"))
            fail_msg("verify --weights (dense) --backend %s: exit %d\n%s", c->name, rc, out);
        printf("  verify --weights (dense) --backend %s: passed\n", c->name);
        free(out);
    }
    edgert_close(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantize_read_back),
        cmocka_unit_test(test_every_backend_on_the_codes),
        cmocka_unit_test(test_dense_for_symmetric_backend),
        cmocka_unit_test(test_pack_cache),
        cmocka_unit_test(test_weights_commands),
    };
    return tu_run_group("checkpoint", tests, setup, teardown);
}
