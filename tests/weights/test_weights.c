/*
 * tests/weights/test_weights.c — the canonical quantizer (core/weights/weights.c:
 * edgert_quantize_rtn, edgert_dequantize, edgert_qcode) and the seeded
 * weight generator of tools/generate.c, tested directly.
 *
 * (Split out of tests/plugins/test_ref.c, which held three unrelated suites.)
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h> /* cmocka needs these before its header */
#include <cmocka.h>

#include "common/internal.h"
#include "context/context.h"
#include "generate.h"
#include "test_util.h"
#include "gate/gate.h"
#include "run/backend.h"

/* Check |w - dequant(w)| <= s/2 for every element (plus the rounding of one
 * fp32 multiply: |s * (q - z)| <= 15 s, so 15 s * 2^-24 < 1e-6 s). The
 * asymmetric quantizer widens the range to include 0, so its extremes clamp
 * to the nearest representable value and the bound holds for all elements;
 * the symmetric one never clamps (|w / s| <= 7). */
static void check_rtn_error(const float *w, uint32_t n, uint32_t k, uint32_t group, int sym)
{
    edgert_qtensor t;
    float *d = malloc((size_t)n * k * sizeof *d);
    assert_non_null(d);
    assert_int_equal(edgert_quantize_rtn(w, n, k, group, sym, &t), EDGERT_OK);
    assert_int_equal(t.view.struct_size, EDGERT_QWEIGHTS_V1_SIZE);
    assert_int_equal(t.view.n, n);
    assert_int_equal(t.view.k, k);
    assert_int_equal(t.view.group, group);
    assert_ptr_equal(t.view.codes, t.codes);
    assert_ptr_equal(t.view.scales, t.scales);
    if (sym) {
        assert_null(t.zeros);
        assert_null(t.view.zeros);
    } else {
        assert_non_null(t.zeros);
        assert_ptr_equal(t.view.zeros, t.zeros);
    }
    edgert_dequantize(&t.view, d);

    size_t groups = tu_groups_of(k, group);
    for (uint32_t r = 0; r < n; r++) {
        for (uint32_t c = 0; c < k; c++) {
            size_t gi = (size_t)r * groups + c / group;
            float s = t.scales[gi];
            unsigned z = sym ? 8u : t.zeros[gi];
            unsigned q = edgert_qcode(&t.view, r, c);
            assert_true(s >= 0.0f);
            assert_true(z <= 15u);
            assert_true(q <= 15u);
            /* dequantize is exactly the documented expression */
            float expect = s * (float)((int)q - (int)z);
            assert_memory_equal(&d[(size_t)r * k + c], &expect, sizeof expect);
            double err = fabs((double)w[(size_t)r * k + c] - (double)d[(size_t)r * k + c]);
            double bound = 0.5 * s + 2e-6 * s;
            if (!(err <= bound))
                fail_msg("%s n=%u k=%u group=%u: w[%u][%u]=%.9g dequantizes to %.9g, |err| %.3g > "
                         "s/2 = %.3g",
                         sym ? "symmetric" : "asymmetric", n, k, group, r, c,
                         (double)w[(size_t)r * k + c], (double)d[(size_t)r * k + c], err, 0.5 * s);
        }
        if (k & 1u) /* padding nibble of an odd row is 0 */
            assert_int_equal(t.codes[(size_t)r * ((k + 1u) / 2u) + k / 2u] >> 4, 0);
    }
    edgert_qtensor_free(&t);
    assert_null(t.codes);
    free(d);
}

static void test_rtn_error_bound(void **state)
{
    (void)state;
    static const uint32_t shapes[][3] = {
        {4, 128, 128}, {3, 200, 128}, {5, 77, 32}, {2, 1, 1}, {1, 129, 128}, {7, 33, 7},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        uint32_t n = shapes[i][0], k = shapes[i][1], g = shapes[i][2];
        float *w = malloc((size_t)n * k * sizeof *w);
        assert_non_null(w);
        gen_fill_weights(w, (size_t)n * k, 1000u + i);
        check_rtn_error(w, n, k, g, 1);
        check_rtn_error(w, n, k, g, 0);
        /* all-positive and all-negative rows: the asymmetric range must
         * still include 0, so nothing clamps far away */
        for (size_t j = 0; j < (size_t)n * k; j++)
            w[j] = 1.0f + fabsf(w[j]);
        check_rtn_error(w, n, k, g, 0);
        check_rtn_error(w, n, k, g, 1);
        for (size_t j = 0; j < (size_t)n * k; j++)
            w[j] = -w[j];
        check_rtn_error(w, n, k, g, 0);
        free(w);
    }
}

static void test_rtn_codes_layout(void **state)
{
    (void)state;
    /* symmetric, one group of 3, max|w| = 7 => s = 1, codes = w + 8 */
    const float w[3] = {-7.0f, 0.0f, 3.0f};
    edgert_qtensor t;
    assert_int_equal(edgert_quantize_rtn(w, 1, 3, 128, 1, &t), EDGERT_OK);
    assert_true(t.scales[0] == 1.0f);
    assert_int_equal(t.codes[0], 1u | (8u << 4)); /* low nibble first */
    assert_int_equal(t.codes[1], 11u);            /* high nibble padding 0 */
    assert_int_equal(edgert_qcode(&t.view, 0, 2), 11u);
    edgert_qtensor_free(&t);

    /* asymmetric: [-1, 2] over 15 steps: s = 0.2, z = round(5) = 5 */
    const float w2[4] = {-1.0f, 2.0f, 0.0f, 0.4f};
    assert_int_equal(edgert_quantize_rtn(w2, 1, 4, 4, 0, &t), EDGERT_OK);
    assert_true(fabsf(t.scales[0] - 0.2f) < 1e-7f);
    assert_int_equal(t.zeros[0], 5);
    assert_int_equal(edgert_qcode(&t.view, 0, 0), 0);
    assert_int_equal(edgert_qcode(&t.view, 0, 1), 15);
    assert_int_equal(edgert_qcode(&t.view, 0, 2), 5);
    assert_int_equal(edgert_qcode(&t.view, 0, 3), 7);
    edgert_qtensor_free(&t);

    /* two rows with odd k: the second row starts on its own byte */
    const float w3[6] = {7, 7, 7, -7, -7, -7};
    assert_int_equal(edgert_quantize_rtn(w3, 2, 3, 3, 1, &t), EDGERT_OK);
    assert_int_equal(t.codes[0], 15u | (15u << 4));
    assert_int_equal(t.codes[1], 15u);
    assert_int_equal(t.codes[2], 1u | (1u << 4));
    assert_int_equal(t.codes[3], 1u);
    edgert_qtensor_free(&t);
}

static void test_rtn_constant_groups(void **state)
{
    (void)state;
    /* k = 200, group 64: groups [0,64) 0.37, [64,128) -1.5, [128,192) 0,
     * [192,200) 3e-3; plus a row whose partial last group holds 1 element */
    enum { K = 200, G = 64 };
    float w[2 * K], d[2 * K];
    for (int c = 0; c < K; c++) {
        w[c] = c < 64 ? 0.37f : c < 128 ? -1.5f : c < 192 ? 0.0f : 3e-3f;
        w[K + c] = 0.01f * (float)(c % 13) - 0.05f;
    }
    edgert_qtensor t;
    assert_int_equal(edgert_quantize_rtn(w, 2, K, G, 0, &t), EDGERT_OK);
    edgert_dequantize(&t.view, d);
    /* row 0: every group constant, reproduced bit for bit */
    assert_memory_equal(d, w, K * sizeof(float));
    edgert_qtensor_free(&t);

    /* symmetric: all-zero group is exactly 0; constant groups within s/2 */
    assert_int_equal(edgert_quantize_rtn(w, 2, K, G, 1, &t), EDGERT_OK);
    assert_null(t.zeros);
    edgert_dequantize(&t.view, d);
    for (int c = 128; c < 192; c++)
        assert_true(d[c] == 0.0f);
    assert_true(t.scales[2] == 0.0f);
    assert_int_equal(edgert_qcode(&t.view, 0, 130), 8);
    for (int c = 0; c < K; c++)
        assert_true(fabs((double)d[c] - (double)w[c]) <= 0.5 * t.scales[c / G] + 1e-9);
    edgert_qtensor_free(&t);

    /* Many constant groups with arbitrary values (most c are not
     * reproduced by (c / 15) * 15 in fp32): every one exactly. */
    enum { NC = 64, GC = 4 };
    float wc[NC * GC], dc[NC * GC];
    gen_fill_weights(wc, NC, 11u);
    for (int i = NC - 1; i >= 0; i--)
        for (int j = 0; j < GC; j++)
            wc[i * GC + j] = wc[i];
    assert_int_equal(edgert_quantize_rtn(wc, 2, NC * GC / 2, GC, 0, &t), EDGERT_OK);
    edgert_dequantize(&t.view, dc);
    assert_memory_equal(dc, wc, sizeof wc);
    edgert_qtensor_free(&t);

    /* k = 129, group 128: the last group has one element, stored exactly */
    float w1[129], d1[129];
    gen_fill_weights(w1, 129, 7u);
    assert_int_equal(edgert_quantize_rtn(w1, 1, 129, 128, 0, &t), EDGERT_OK);
    edgert_dequantize(&t.view, d1);
    assert_memory_equal(&d1[128], &w1[128], sizeof(float));
    edgert_qtensor_free(&t);

    /* all zeros, both modes: exactly zero out */
    float z[16] = {0}, dz[16];
    for (int sym = 0; sym < 2; sym++) {
        assert_int_equal(edgert_quantize_rtn(z, 2, 8, 4, sym, &t), EDGERT_OK);
        edgert_dequantize(&t.view, dz);
        for (int i = 0; i < 16; i++)
            assert_true(dz[i] == 0.0f && !signbit(dz[i]));
        edgert_qtensor_free(&t);
    }
}

static void test_rtn_argument_errors(void **state)
{
    (void)state;
    float w[16] = {0};
    edgert_qtensor t;
    memset(&t, 0xAB, sizeof t);
    assert_int_equal(edgert_quantize_rtn(NULL, 2, 8, 4, 0, &t), EDGERT_E_USAGE);
    assert_null(t.codes); /* out is cleared even on failure */
    assert_null(t.scales);
    assert_int_equal(edgert_quantize_rtn(w, 0, 8, 4, 0, &t), EDGERT_E_USAGE);
    assert_int_equal(edgert_quantize_rtn(w, 2, 0, 4, 0, &t), EDGERT_E_USAGE);
    assert_int_equal(edgert_quantize_rtn(w, 2, 8, 0, 1, &t), EDGERT_E_USAGE);
    assert_int_equal(edgert_quantize_rtn(w, 2, 8, 4, 0, NULL), EDGERT_E_USAGE);

    /* non-finite input is refused, nothing leaks (ASan checks the latter) */
    w[5] = NAN;
    assert_int_equal(edgert_quantize_rtn(w, 2, 8, 4, 0, &t), EDGERT_E_USAGE);
    assert_null(t.codes);
    w[5] = INFINITY;
    assert_int_equal(edgert_quantize_rtn(w, 2, 8, 4, 1, &t), EDGERT_E_USAGE);
    w[5] = 0.0f;

    /* sizes that cannot be represented are refused before any allocation
     * or read of w: n * groups * 4 overflows size_t here */
    assert_int_equal(edgert_quantize_rtn(w, UINT32_MAX, UINT32_MAX, 1, 0, &t), EDGERT_E_NOMEM);
    assert_null(t.codes);

    /* group larger than k: one partial group per row */
    assert_int_equal(edgert_quantize_rtn(w, 2, 8, 1000, 0, &t), EDGERT_OK);
    edgert_qtensor_free(&t);
    edgert_qtensor_free(&t); /* idempotent */
    edgert_qtensor_free(NULL);

    /* dequantize ignores obviously bad input instead of crashing */
    float out[4] = {1, 2, 3, 4};
    edgert_dequantize(NULL, out);
    edgert_qweights bad = {.struct_size = sizeof bad, .n = 1, .k = 4, .group = 0};
    edgert_dequantize(&bad, out);
    assert_true(out[0] == 1.0f && out[3] == 4.0f);
}

static void test_fill_weights(void **state)
{
    (void)state;
    enum { N = 200000 };
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    gen_fill_weights(a, N, 42u);
    gen_fill_weights(b, N, 42u);
    assert_memory_equal(a, b, N * sizeof *a);
    gen_fill_weights(b, N, 43u);
    assert_memory_not_equal(a, b, N * sizeof *a);

    double sum = 0, sq = 0;
    for (int i = 0; i < N; i++) {
        assert_true(isfinite(a[i]));
        sum += a[i];
        sq += (double)a[i] * a[i];
    }
    double mean = sum / N, sd = sqrt(sq / N - mean * mean);
    /* standard error of the mean is 0.02 / sqrt(2e5) = 4.5e-5 */
    assert_true(fabs(mean) < 3e-4);
    assert_true(sd > 0.0197 && sd < 0.0203);

    gen_rng r1, r2;
    gen_rng_seed(&r1, 0u);
    gen_rng_seed(&r2, 0u);
    assert_true(gen_rng_next(&r1) == gen_rng_next(&r2));
    assert_true(gen_rng_next(&r1) != 0u || gen_rng_next(&r1) != 0u);
    free(a);
    free(b);
}

/* What each shipped 4-bit backend's manifest says its pack takes
 * (layout.group_sizes, layout.partial_groups: the layout gate of
 * edgert_options.weights selects by them) is what its pack does, both ways:
 * a claim it cannot keep would select a backend that then fails, a claim
 * too narrow would turn away weights it runs. Groups of 32 to 256, whole
 * and with the last one cut short. */
static void test_layout_claims_hold(void **state)
{
    (void)state;
    static const uint32_t groups[] = {32, 64, 128, 256};
    char err[1024] = "";
    edgert_ctx *ctx = tu_open(EDGERT_TEST_BACKEND_DIR, 1, err, sizeof err);
    if (!ctx)
        fail_msg("edgert_open: %s", err);
    size_t checked = 0;
    for (size_t i = 0; i < edgert_candidate_count(ctx); i++) {
        const edgert_candidate *c = edgert_candidate_at(ctx, i);
        edgert_backend *b = NULL;
        if (!c->eligible || !c->library_path || c->layout.weight_bits != 4 ||
            c->layout.group_size <= 0 ||
            edgert_backend_open(ctx, c->name, NULL, &b, err, sizeof err) != EDGERT_OK)
            continue;
        const er_manifest *m = &er_backend_cand(b)->m;
        for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
            for (int partial = 0; partial < 2; partial++) {
                uint32_t k = 2u * groups[g] + (partial ? groups[g] / 2u : 0u), n = 16u;
                int claim = er_layout_packs_group(m, groups[g]) &&
                            (!partial || m->partial_groups);
                float *w = malloc((size_t)n * k * sizeof *w);
                assert_non_null(w);
                for (size_t e = 0; e < (size_t)n * k; e++)
                    w[e] = (float)sin(0.7 * (double)e) * 0.05f;
                edgert_qtensor q;
                edgert_packed *p = NULL;
                err[0] = '\0';
                assert_int_equal(edgert_quantize_rtn(w, n, k, groups[g], m->symmetric == 1, &q),
                                 EDGERT_OK);
                edgert_status st = edgert_pack(b, &q.view, &p, err, sizeof err);
                if (claim != (st == EDGERT_OK) || (!claim && st != EDGERT_E_UNSUPPORTED))
                    fail_msg("%s: groups of %u, k=%u: the manifest says %s, pack says %s (%s)",
                             c->name, groups[g], k, claim ? "packs" : "refuses",
                             edgert_status_name(st), err);
                edgert_packed_free(p);
                edgert_qtensor_free(&q);
                free(w);
                checked++;
            }
        printf("  %s: group sizes and partial groups as its manifest says\n", c->name);
        edgert_backend_close(b);
    }
    assert_true(checked > 0); /* ref-w4a16 runs everywhere */
    edgert_close(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rtn_error_bound),
        cmocka_unit_test(test_rtn_codes_layout),
        cmocka_unit_test(test_rtn_constant_groups),
        cmocka_unit_test(test_rtn_argument_errors),
        cmocka_unit_test(test_fill_weights),
        cmocka_unit_test(test_layout_claims_hold),
    };
    return tu_run_group("weights", tests, NULL, NULL);
}
