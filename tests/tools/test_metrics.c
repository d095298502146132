/*
 * tests/tools/test_metrics.c — the fidelity metrics of `edgert verify`
 * (tools/metrics.c) on cases computed by hand.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "bench.h"
#include "metrics.h"

/* cmocka's assert_float_equal compares in float; these are doubles. */
#define assert_near(a, b, eps)                                                                 \
    do {                                                                                       \
        double a_ = (a), b_ = (b);                                                             \
        if (!(fabs(a_ - b_) <= (eps)))                                                         \
            fail_msg("%s = %.17g, expected %.17g (within %g)", #a, a_, b_, (double)(eps));     \
    } while (0)

#define LN2 0.69314718055994530942
#define LN3 1.09861228866810969140

static void test_sqnr_known_noise(void **state)
{
    (void)state;
    /* signal 3^2 + 4^2 = 25, noise (5 - 4)^2 = 1: 10 log10(25) = 13.9794 dB */
    const float ref[2] = {3, 4}, test[2] = {3, 5};
    assert_near(metric_sqnr_db(ref, test, 2), 10.0 * log10(25.0), 1e-12);
    assert_near(metric_sqnr_db(ref, test, 2), 13.979400086720377, 1e-12);
    /* the noise is what differs, whatever its sign: 3 vs 2 and 4 vs 4 */
    const float test2[2] = {2, 4};
    assert_near(metric_sqnr_db(ref, test2, 2), 13.979400086720377, 1e-12);
    /* noise equal to the signal: 0 dB; ten times smaller amplitude: 20 dB */
    const float a[3] = {1, -2, 2}, b[3] = {0, 0, 0}, c[3] = {1.1f, -2.2f, 2.2f};
    assert_near(metric_sqnr_db(a, b, 3), 0.0, 1e-12);
    assert_near(metric_sqnr_db(a, c, 3), 20.0, 1e-5);
}

static void test_sqnr_edges(void **state)
{
    (void)state;
    const float ref[3] = {1, -2, 0.5f};
    assert_true(isinf(metric_sqnr_db(ref, ref, 3)) && metric_sqnr_db(ref, ref, 3) > 0);
    const float zero[2] = {0, 0}, some[2] = {1, 0};
    assert_true(isnan(metric_sqnr_db(zero, some, 2))); /* no signal: undefined */
    const float bad[3] = {1, NAN, 0.5f};
    assert_true(isnan(metric_sqnr_db(ref, bad, 3)));   /* a NaN output is no fidelity */
}

static void test_kl_identical_is_zero(void **state)
{
    (void)state;
    const float p[4] = {0.5f, -1, 3, 2};
    assert_near(metric_kl(p, p, 4), 0.0, 1e-15);
    const float one[1] = {7};
    assert_near(metric_kl(one, one, 1), 0.0, 0.0);
}

static void test_kl_by_hand(void **state)
{
    (void)state;
    /* softmax([0, ln 3]) = [1/4, 3/4], softmax([0, 0]) = [1/2, 1/2]:
     * KL(p||q) = 1/4 ln(1/2) + 3/4 ln(3/2) = 3/4 ln 3 - ln 2 = 0.130812...
     * KL(q||p) = 1/2 ln 2 + 1/2 ln(2/3) = ln 2 - 1/2 ln 3 = 0.143841... */
    const float p[2] = {0, (float)LN3}, q[2] = {0, 0};
    assert_near(metric_kl(p, q, 2), 0.75 * LN3 - LN2, 1e-7);
    assert_near(metric_kl(p, q, 2), 0.1308120, 1e-6);
    assert_near(metric_kl(q, p, 2), LN2 - 0.5 * LN3, 1e-7);
    assert_near(metric_kl(q, p, 2), 0.1438410, 1e-6);
}

static void test_kl_shift_invariant(void **state)
{
    (void)state;
    /* softmax ignores a constant added to every logit */
    const float a[3] = {1, 2, 3}, b[3] = {101, 102, 103}, c[3] = {-50, -49, -48};
    assert_near(metric_kl(a, b, 3), 0.0, 1e-12);
    assert_near(metric_kl(b, c, 3), 0.0, 1e-12);
    const float p[2] = {0, (float)LN3}, q[2] = {-20, -20};
    assert_near(metric_kl(p, q, 2), 0.75 * LN3 - LN2, 1e-7);
}

static void test_kl_large_logits_stable(void **state)
{
    (void)state;
    /* exp(1000) overflows a double: log-sum-exp must not */
    const float p[2] = {1000, 1000 + (float)LN3}, q[2] = {1000, 1000};
    double kl = metric_kl(p, q, 2);
    assert_true(isfinite(kl));
    assert_near(kl, 0.75 * LN3 - LN2, 1e-4); /* ln 3 rounds to 6e-5 at 1000 */
    /* p puts all mass on token 0, q puts e^-1000 there: KL = 1000 nats */
    const float a[2] = {1000, 0}, b[2] = {0, 1000};
    assert_near(metric_kl(a, b, 2), 1000.0, 1e-9);
    const float big[3] = {1e30f, 1e30f, 1e30f};
    assert_near(metric_kl(big, big, 3), 0.0, 1e-12);
}

static void test_kl_nonnegative_and_nan(void **state)
{
    (void)state;
    float p[64], q[64];
    uint32_t s = 12345u;
    for (int t = 0; t < 50; t++) {
        for (int i = 0; i < 64; i++) {
            s = s * 1664525u + 1013904223u;
            p[i] = (float)(s >> 8) / 16777216.0f * 8.0f - 4.0f;
            s = s * 1664525u + 1013904223u;
            q[i] = p[i] + ((float)(s >> 8) / 16777216.0f - 0.5f) * 0.1f;
        }
        assert_true(metric_kl(p, q, 64) >= 0.0);
        assert_true(metric_kl(q, p, 64) >= 0.0);
    }
    const float bad[2] = {0, NAN}, ok[2] = {0, 0};
    assert_true(isnan(metric_kl(ok, bad, 2)));
}

static void test_argmax(void **state)
{
    (void)state;
    const float ties[4] = {1, 3, 3, 2};
    assert_int_equal(metric_argmax(ties, 4), 1); /* first of the tied maxima */
    const float all_same[3] = {5, 5, 5};
    assert_int_equal(metric_argmax(all_same, 3), 0);
    const float neg[3] = {-3, -1, -1};
    assert_int_equal(metric_argmax(neg, 3), 1);
    const float last[5] = {0, 1, 2, 3, 4};
    assert_int_equal(metric_argmax(last, 5), 4);
    const float one[1] = {-7};
    assert_int_equal(metric_argmax(one, 1), 0);
    const float nan_first[3] = {NAN, 2, 1};
    assert_int_equal(metric_argmax(nan_first, 3), 1);
}

/* The compute peak bench holds a prefill against: the instruction the
 * instance's description names, the tile one for a tile path (whose
 * description also names its GEMV decode), whatever the case; by activation
 * bits when nothing is named; never a family this CPU lacks. */
static void test_bench_compute_family(void **state)
{
    (void)state;
    peak_result p;
    for (int i = 0; i < PEAK_COUNT; i++)
        p.value[i] = 100.0;
    assert_int_equal(bench_compute_family("amx: prefill on AMX-INT8 tiles (TDPBSSD, int8 "
                                          "activations per token); decode as path vnni "
                                          "(vpdpbusd GEMV)",
                                          8, &p),
                     PEAK_AMX_INT8);
    assert_int_equal(bench_compute_family("amx: prefill on AMX-BF16 tiles (TDPBF16PS, bf16 "
                                          "activations); decode as path int16 (vpdpbusd GEMV)",
                                          16, &p),
                     PEAK_AMX_BF16);
    assert_int_equal(bench_compute_family("int16: (decode: vpdpbusd on two int8 halves; "
                                          "prefill: vpdpwssd)",
                                          16, &p),
                     PEAK_INT16_VNNI);
    /* the avx2 example's paths: vpmaddwd without VNNI, the ymm vpdpwssd with it */
    const char *avx2 = "avx2: AVX2, 15-bit integer activations per block of 128 (decode: "
                       "vpmaddubsw on two int8 halves; prefill: vpmaddwd), exact int32 group "
                       "sums, fp32 accumulate";
    assert_int_equal(bench_compute_family(avx2, 16, &p), PEAK_INT16_MADD);
    assert_int_equal(bench_compute_family("avxvnni: AVX-VNNI, (decode: vpdpbusd on two int8 "
                                          "halves; prefill: vpdpwssd)",
                                          16, &p),
                     PEAK_INT16_VNNI);
    assert_int_equal(bench_compute_family("vnni: AVX512_VNNI vpdpbusd for decode and prefill", 8,
                                          &p),
                     PEAK_INT8_VNNI);
    assert_int_equal(bench_compute_family("fma: AVX-512F fp32 FMA (no BF16/VNNI needed)", 32, &p),
                     PEAK_FP32_FMA);
    assert_int_equal(bench_compute_family("something else", 8, &p), PEAK_AMX_INT8);
    assert_int_equal(bench_compute_family(NULL, 16, &p), PEAK_BF16_DOT);
    /* a CPU without AMX: the named tile family is skipped */
    p.value[PEAK_AMX_INT8] = NAN;
    assert_int_equal(bench_compute_family("amx: prefill on tiles (TDPBSSD); decode (vpdpbusd)", 8,
                                          &p),
                     PEAK_INT8_VNNI);
    assert_int_equal(bench_compute_family("something else", 8, &p), PEAK_INT8_VNNI);
    /* a CPU without AVX2: vpmaddwd's peak unmeasured, the family by bits */
    p.value[PEAK_INT16_MADD] = NAN;
    assert_int_equal(bench_compute_family(avx2, 16, &p), PEAK_BF16_DOT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sqnr_known_noise),
        cmocka_unit_test(test_sqnr_edges),
        cmocka_unit_test(test_kl_identical_is_zero),
        cmocka_unit_test(test_kl_by_hand),
        cmocka_unit_test(test_kl_shift_invariant),
        cmocka_unit_test(test_kl_large_logits_stable),
        cmocka_unit_test(test_kl_nonnegative_and_nan),
        cmocka_unit_test(test_argmax),
        cmocka_unit_test(test_bench_compute_family),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
