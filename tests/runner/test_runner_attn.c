/*
 * tests/runner/test_runner_attn.c — the model runner's attention kernels
 * (runner/attn.h): every set this CPU can run against a double-precision
 * loop written here, over odd shapes: positions 1, 3, 15, 16, 17, 63, 64,
 * 65, 200 (the 16-position blocks and the 64-position passes, whole and
 * cut), head sizes 64, 72 (a last 16-value chunk of 8), 80 (not a
 * multiple of the 64-dimension pass) and
 * 128, and 1 to 9 query heads per KV head (the passes of 4, whole and cut).
 * A set whose flags this CPU lacks is reported skipped, naming the flag;
 * the portable set runs everywhere.
 *
 * Tolerances, derived: qk and pv are sums of d (or n) fp32 products
 * accumulated in some order: |err| <= (d + 2) u S with u = 2^-24 and S the
 * sum of |terms| (the standard bound for recursive summation, which any
 * blocking satisfies), checked with S computed here. softmax's exp is a
 * degree-6 polynomial with a remainder under 1.2e-7 relative (attn_avx512.c)
 * plus fp32 rounding of its few steps: 8 u relative per element, and the
 * sum (n terms, in double on the portable path and fp32 lanes on the
 * vector ones) within (n + 8) u of the exact one. silu_mul: the same exp
 * in 1 + e^-g, a division and a product: 12 u relative; below g = -88 the
 * vector exp's clamp gives g e^-88 (under 1e-35 in size) for g e^g.
 * The act-order passes: gather copies values (exact), and silu_mul_gather
 * is silu_mul on the gathered values, bit for bit its own set's silu_mul
 * followed by the gather (the runner's two act-order ways agree bit for
 * bit, test_quantize_gptq), over lengths 1 to 70 (8-lane tails) and a
 * permutation of each.
 *
 * K and V reach each set through its kv_put, in its cache's format; the
 * double loops use the values as cached (decoded here from fp16 with code
 * of this file's own), so the bounds above hold for the fp16 sets too, and
 * kv_put is checked on its own: fp16 rounded to nearest (within 2^-11 of
 * the value, 2^-25 absolute below fp16's normal range), magnitudes past
 * 65504 saturated, NaN kept.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "edgert/edgert.h"
#include "test_util.h"

#define U (1.0 / 16777216.0)

#if defined(__x86_64__)
static uint64_t cpu_flags(void)
{
    edgert_options o = {.struct_size = sizeof o, .ignore_env = 1, .manifest_paths = NULL};
    edgert_ctx *ctx = NULL;
    char err[1024];
    o.defer_load = 1;
    static const char *none[] = {EDGERT_TEST_FIXTURES "/manifests/good"}; /* none loaded */
    o.manifest_paths = none;
    o.manifest_path_count = 1;
    uint64_t f = 0;
    if (edgert_open(&o, &ctx, err, sizeof err) == EDGERT_OK)
        f = edgert_device_facts(ctx)->cpu_flags;
    edgert_close(ctx);
    return f;
}
#endif

static float frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

/* IEEE binary16 to float, written here (not the kernels' vcvtph2ps). */
static float half_to_float(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return (float)(h >> 15 ? -v : v);
}

/* Cached value i of a set's cache at `base` (its format), as a float. */
static float cached(const rn_attn_kern *ks, const void *base, size_t i)
{
    return ks->kv_bytes == 2 ? half_to_float(((const uint16_t *)base)[i])
                             : ((const float *)base)[i];
}

/* K of n positions in the blocked layout (attn.h) from rows k[p][d], and V
 * rows, written by the set's kv_put; k and v then get the cached values. */
static void put_kv(const rn_attn_kern *ks, float *k, float *v, uint32_t n, uint32_t d, void *kt,
                   void *vc)
{
    const size_t vb = ks->kv_bytes;
    for (uint32_t p = 0; p < n; p++) {
        size_t at = (size_t)(p / RN_KBLOCK) * RN_KBLOCK * d + p % RN_KBLOCK;
        ks->kv_put(k + (size_t)p * d, d, (char *)kt + at * vb, RN_KBLOCK);
        ks->kv_put(v + (size_t)p * d, d, (char *)vc + (size_t)p * d * vb, 1);
        for (uint32_t j = 0; j < d; j++) {
            k[(size_t)p * d + j] = cached(ks, kt, at + (size_t)j * RN_KBLOCK);
            v[(size_t)p * d + j] = cached(ks, vc, (size_t)p * d + j);
        }
    }
}

/* kv_put on its own: every value within the format's rounding, saturation
 * at fp16's largest, NaN kept; a stride leaves the values between alone. */
static void check_put(const rn_attn_kern *ks)
{
    enum { N = 21 };
    float src[N];
    uint64_t seed = 11;
    for (int i = 0; i < N; i++)
        src[i] = frand(&seed) * (float)ldexp(1, (i % 9) * 4 - 12);
    src[3] = 1e6f;
    src[4] = -70000.0f;
    src[5] = NAN;
    src[6] = 65504.0f;
    src[7] = 3e-8f; /* below fp16's normal range */
    unsigned char buf[N * 3 * 4];
    memset(buf, 0xA5, sizeof buf);
    ks->kv_put(src, N, buf, 3);
    for (int i = 0; i < N * 3; i++) {
        if (i % 3 != 0) {
            for (unsigned b = 0; b < ks->kv_bytes; b++)
                if (buf[(size_t)i * ks->kv_bytes + b] != 0xA5)
                    fail_msg("%s kv_put: value %d between the strided ones written", ks->name, i);
            continue;
        }
        float x = src[i / 3], got = cached(ks, buf, (size_t)i);
        if (ks->kv_bytes == 4) {
            if (memcmp(&got, &x, 4) != 0)
                fail_msg("%s kv_put: %g stored as %g", ks->name, (double)x, (double)got);
        } else if (isnan(x)) {
            if (!isnan(got))
                fail_msg("%s kv_put: NaN stored as %g", ks->name, (double)got);
        } else if (fabsf(x) >= 65504.0f) {
            if (got != copysignf(65504.0f, x))
                fail_msg("%s kv_put: %g stored as %g, not saturated", ks->name, (double)x,
                         (double)got);
        } else if (fabs((double)got - x) > fmax(ldexp(fabs(x), -11), ldexp(1, -25))) {
            fail_msg("%s kv_put: %.9g stored as %.9g", ks->name, (double)x, (double)got);
        }
    }
}

/* gather and silu_mul_gather against silu_mul and a loop (header) */
static void check_gathers(const rn_attn_kern *ks, uint64_t *seed)
{
    for (uint32_t n = 1; n <= 70; n += n < 17 ? 1 : 9) {
        float g[80], u[80], a[80], want[80], got[80], ref[80];
        uint32_t perm[80];
        for (uint32_t i = 0; i < n; i++) {
            g[i] = 12 * frand(seed);
            u[i] = frand(seed);
            perm[i] = i;
        }
        for (uint32_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
            uint32_t j = (uint32_t)((frand(seed) + 1) * 0.5 * (i + 1)) % (i + 1), t = perm[i];
            perm[i] = perm[j], perm[j] = t;
        }
        for (uint32_t i = n; i < 80; i++)
            got[i] = a[i] = -7.0f; /* what the masked lanes must leave */
        ks->gather(g, perm, n, got);
        for (uint32_t i = 0; i < 80; i++)
            if (memcmp(&got[i], i < n ? &g[perm[i]] : &(float){-7.0f}, 4))
                fail_msg("%s gather n=%u: [%u] = %.9g", ks->name, n, i, (double)got[i]);
        ks->silu_mul(g, u, ref, n);
        for (uint32_t i = 0; i < n; i++)
            want[i] = ref[perm[i]];
        ks->silu_mul_gather(g, u, perm, a, n);
        if (memcmp(a, want, n * sizeof *a) || a[n] != -7.0f)
            fail_msg("%s silu_mul_gather n=%u: not silu_mul's values in the order", ks->name, n);
    }
}

static void check_set(const rn_attn_kern *ks)
{
    static const uint32_t ns[] = {1, 3, 15, 16, 17, 63, 64, 65, 200};
    static const uint32_t ds[] = {64, 72, 80, 128}; /* 72: a last chunk of 8 values */
    uint64_t seed = 7;
    for (size_t di = 0; di < sizeof ds / sizeof ds[0]; di++) {
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            uint32_t d = ds[di], n = ns[ni], nb = (n + RN_KBLOCK - 1) / RN_KBLOCK * RN_KBLOCK;
            for (uint32_t g = 1; g <= 9; g += (g < 5 ? 1 : 4)) {
                size_t ls = nb + 5; /* a score row stride that is no multiple of anything */
                float *q = malloc(sizeof(float) * g * d), *k = calloc((size_t)nb * d, 4);
                void *kt = calloc((size_t)nb * d, ks->kv_bytes);
                float *v = malloc(sizeof(float) * n * d);
                void *vc = malloc((size_t)n * d * ks->kv_bytes);
                float *s = calloc(g * ls, 4), *o = malloc(sizeof(float) * g * d);
                float scale[16];
                assert_non_null(q && k && kt && v && vc && s && o);
                for (size_t i = 0; i < (size_t)g * d; i++)
                    q[i] = frand(&seed);
                for (size_t i = 0; i < (size_t)n * d; i++) {
                    k[i] = frand(&seed);
                    v[i] = frand(&seed);
                }
                put_kv(ks, k, v, n, d, kt, vc);
                ks->qk(q, g, kt, d, n, 0.125f, s, ls);
                for (uint32_t h = 0; h < g; h++) {
                    for (uint32_t p = 0; p < n; p++) {
                        double e = 0, S = 0;
                        for (uint32_t j = 0; j < d; j++) {
                            e += (double)q[h * d + j] * k[(size_t)p * d + j];
                            S += fabs((double)q[h * d + j] * k[(size_t)p * d + j]);
                        }
                        double got = s[h * ls + p], tol = ((d + 3) * U * S) * 0.125 + 1e-30;
                        if (fabs(got - 0.125 * e) > tol)
                            fail_msg("%s qk d=%u n=%u g=%u: s[%u][%u] = %.9g, exact %.9g, "
                                     "tolerance %.3g", ks->name, d, n, g, h, p, got, 0.125 * e,
                                     tol);
                    }
                    /* softmax of this head's scores, against exp in double */
                    float *sh = s + h * ls, orig[256];
                    memcpy(orig, sh, n * sizeof(float));
                    double sum = ks->softmax(sh, n), mx = orig[0], ref = 0;
                    for (uint32_t p = 1; p < n; p++)
                        mx = orig[p] > mx ? orig[p] : mx;
                    for (uint32_t p = 0; p < n; p++) {
                        double e = exp((double)orig[p] - mx);
                        ref += e;
                        if (fabs(sh[p] - e) > 8 * U * e + 1e-38)
                            fail_msg("%s softmax n=%u: e[%u] = %.9g, exact %.9g", ks->name, n, p,
                                     (double)sh[p], e);
                    }
                    if (fabs(sum - ref) > (n + 8) * U * ref)
                        fail_msg("%s softmax n=%u: sum %.9g, exact %.9g", ks->name, n, sum, ref);
                    scale[h] = (float)(1.0 / sum);
                }
                ks->pv(s, ls, g, vc, d, n, scale, o);
                for (uint32_t h = 0; h < g; h++)
                    for (uint32_t j = 0; j < d; j++) {
                        double e = 0, S = 0;
                        for (uint32_t p = 0; p < n; p++) {
                            e += (double)s[h * ls + p] * v[(size_t)p * d + j];
                            S += fabs((double)s[h * ls + p] * v[(size_t)p * d + j]);
                        }
                        double tol = (n + 3) * U * S * scale[h] + 1e-30;
                        if (fabs(o[h * d + j] - e * scale[h]) > tol)
                            fail_msg("%s pv d=%u n=%u g=%u: o[%u][%u] = %.9g, exact %.9g, "
                                     "tolerance %.3g", ks->name, d, n, g, h, j,
                                     (double)o[h * d + j], e * scale[h], tol);
                    }
                free(q);
                free(k);
                free(kt);
                free(v);
                free(vc);
                free(s);
                free(o);
            }
        }
    }
    /* silu_mul over odd lengths and the exp's clamps */
    for (uint32_t n = 1; n < 70; n += 13) {
        float g[80], u[80], a[80];
        for (uint32_t i = 0; i < n; i++) {
            g[i] = 12 * frand(&seed);
            u[i] = frand(&seed);
        }
        g[0] = -100.0f;
        if (n > 1)
            g[1] = 100.0f;
        ks->silu_mul(g, u, a, n);
        for (uint32_t i = 0; i < n; i++) {
            double e = g[i] / (1.0 + exp(-(double)g[i])) * u[i];
            if (fabs(a[i] - e) > 12 * U * fabs(e) + 1e-30) /* + the clamp: g e^-88, < 1e-35 */
                fail_msg("%s silu_mul: a[%u] = %.9g for g %.9g, exact %.9g", ks->name, i,
                         (double)a[i], (double)g[i], e);
        }
    }
    check_gathers(ks, &seed);
    check_put(ks);
    print_message("  %s: kv_put, qk, softmax, pv, silu_mul within their bounds; gather and "
                  "silu_mul_gather exact\n", ks->name);
}

static void test_portable(void **state)
{
    (void)state;
    check_set(&rn_attn_portable);
}

#if defined(__x86_64__)
static void test_x86_set(const rn_attn_kern *k, const edgert_cpu_flag *need, unsigned nneed,
                         const char *names)
{
    uint64_t f = cpu_flags();
    for (unsigned i = 0; i < nneed; i++)
        if (!EDGERT_HAS_FLAG(f, need[i]))
            tu_skip("%s kernels: this CPU lacks %s", k->name, names);
    check_set(k);
}

static void test_avx2(void **state)
{
    (void)state;
    static const edgert_cpu_flag need[] = {EDGERT_CPU_AVX2, EDGERT_CPU_FMA};
    test_x86_set(&rn_attn_avx2, need, 2, "avx2 or fma");
}

static void test_avx2_f16(void **state)
{
    (void)state;
    static const edgert_cpu_flag need[] = {EDGERT_CPU_AVX2, EDGERT_CPU_FMA, EDGERT_CPU_F16C};
    test_x86_set(&rn_attn_avx2_f16, need, 3, "avx2, fma or f16c");
}

static void test_avx512(void **state)
{
    (void)state;
    static const edgert_cpu_flag need[] = {EDGERT_CPU_AVX512F};
    test_x86_set(&rn_attn_avx512, need, 1, "avx512f");
}
#endif

/* The set picked follows the flags, and never one the flags do not allow. */
static void test_pick(void **state)
{
    (void)state;
    assert_ptr_equal(rn_attn_pick(0, 0), &rn_attn_portable);
    assert_ptr_equal(rn_attn_pick(0, 1), &rn_attn_portable); /* no fp16 set: fp32 */
#if defined(__x86_64__)
    uint64_t avx2 = (1ull << EDGERT_CPU_AVX2) | (1ull << EDGERT_CPU_FMA);
    uint64_t f16c = 1ull << EDGERT_CPU_F16C, avx512 = 1ull << EDGERT_CPU_AVX512F;
    assert_ptr_equal(rn_attn_pick(1ull << EDGERT_CPU_AVX2, 1), &rn_attn_portable);
    assert_ptr_equal(rn_attn_pick(avx2, 0), &rn_attn_avx2);
    assert_ptr_equal(rn_attn_pick(avx2, 1), &rn_attn_avx2); /* no F16C */
    assert_ptr_equal(rn_attn_pick(avx2 | f16c, 1), &rn_attn_avx2_f16);
    assert_ptr_equal(rn_attn_pick(avx2 | f16c, 0), &rn_attn_avx2);
    assert_ptr_equal(rn_attn_pick(avx2 | f16c | avx512, 1), &rn_attn_avx512);
    assert_ptr_equal(rn_attn_pick(avx2 | avx512, 0), &rn_attn_avx512);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_portable),
#if defined(__x86_64__)
        cmocka_unit_test(test_avx2),
        cmocka_unit_test(test_avx2_f16),
        cmocka_unit_test(test_avx512),
#endif
        cmocka_unit_test(test_pick),
    };
    return tu_run_group("test_runner_attn", tests, NULL, NULL);
}
