/*
 * examples/vendor-plugin/a2_selftest.c — the plugin's own self-test: a few
 * odd-shaped GEMMs through pack and gemm of this instance (its path),
 * against an exact (double) scalar loop over the canonical weights, within
 * a bound derived from the kernels' arithmetic. Compiled without ISA flags.
 *
 * The host calls it once after init, before any use, so a kernel that is
 * wrong on this CPU is never ranked. Cases (a2_cases) cover the decode
 * kernels (m = 1: one row per pass; m = 3: a pass of two rows and one of
 * one), the prefill kernels (m = 5, 17: full row tiles and a tail), odd n
 * (a partial last panel; an odd panel count, so the last prefill item holds
 * one panel), symmetric and asymmetric weights, one and three groups; groups
 * of 64 and 32 with k no multiple of 128 (a last block half or a quarter
 * full), decode and prefill.
 *
 * Error bound of one output against the exact sum (the same bound as
 * tests/test_avx2_w4a16.c), with w_k = s (q_k - z) the exact weight and x~
 * the activation as the kernel sees it:
 *   activations: |x~_k - x_k| <= 2^-13 m_b per block b of 128 inputs (m_b =
 *     max |x| in b, the last block cut at k; a2_kern_avx2.c), so the output
 *     moves by <= sum_k 2^-13 m_b(k) |w_k|;
 *     and |x~| <= 2 |x| (rounding to nearest: x~ != 0 only if |x| >= half
 *     the step);
 *   scale rounded to 20 significant bits: |s' - s| <= 2^-20 |s|, so
 *     <= 2^-20 sum |x~ w| <= 2^-19 sum |x w|;
 *   the integer group sums are exact; fp32 after them: per weight group at
 *     most 3 roundings (int32 -> fp32, the scale's multiply(-add), the zero
 *     point's) and per block of 128 inputs at most 2 more (the prefill's
 *     combination of its groups, and the add into the row's sum), each of
 *     a value no larger than
 *     T = sum_g (|s 2^-sh acc| + |s z 2^-sh sum a|) <= 2 sum_k 15 |x~_k s|
 *     <= 4 sum_k 15 |x_k s|: in all <= (3 G + 2 B) 2^-24 T
 *     <= (3 G + 2 B) 2^-22 sum_k 15 |x_k s_k| for G groups in B blocks.
 * (Scales so small that s 2^-sh is subnormal are outside this bound.)
 */
#include <math.h>
#include <string.h>

#include "a2_internal.h"

#define A2_SENTINEL -12345.0f
#define A2_LDX_PAD 3u /* odd: strides that are a multiple of nothing */
#define A2_LDY_PAD 2u

typedef struct a2_case {
    uint32_t m, n, k, group;
    int symmetric; /* zeros NULL (z = 8) */
} a2_case;

static const a2_case a2_cases[] = {
    {1u, 37u, 256u, 128u, 0}, {3u, 21u, 128u, 128u, 1}, {5u, 45u, 256u, 128u, 0},
    {17u, 37u, 384u, 128u, 0}, {1u, 37u, 192u, 64u, 0},  {2u, 20u, 96u, 32u, 1},
    {9u, 33u, 320u, 64u, 0},   {17u, 21u, 160u, 32u, 0},
};

/* One case's buffers, carved from a single host allocation. */
typedef struct a2_bufs {
    uint8_t *codes, *zeros;
    float *scales, *x, *y;
    size_t stride, groups, ldx, ldy;
} a2_bufs;

static uint32_t a2_xorshift(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

/* Random codes, scales in [0.01, 0.05), zero points 0..15; x in [-1, 1] in
 * steps of 1e-3 with its second block of 128 inputs 2^-10 smaller (the
 * per-block scale of the activations) and NaN in the ldx padding (it must never be read); y
 * the sentinel everywhere. */
static void a2_fill(const a2_case *tc, uint32_t seed, const a2_bufs *b)
{
    const size_t ng = tc->n * b->groups;
    for (size_t i = 0; i < tc->n * b->stride; i++)
        b->codes[i] = (uint8_t)a2_xorshift(&seed);
    for (size_t i = 0; i < ng; i++) {
        b->scales[i] = 0.01f + (float)(a2_xorshift(&seed) % 1000u) * 4e-5f;
        b->zeros[i] = (uint8_t)(a2_xorshift(&seed) % 16u);
    }
    for (size_t i = 0; i < tc->m * b->ldx; i++) {
        size_t c = i % b->ldx;
        float v = (float)((int)(a2_xorshift(&seed) % 2001u) - 1000) * 1e-3f;
        b->x[i] = c >= tc->k ? NAN : c / A2_GROUP == 1u ? ldexpf(v, -10) : v;
    }
    for (size_t i = 0; i < tc->m * b->ldy; i++)
        b->y[i] = A2_SENTINEL;
}

/* The exact output (i, r) and its bound (see the header comment). */
static double a2_oracle(const a2_case *tc, const a2_bufs *b, size_t i, size_t r, double *bound)
{
    const float *x = b->x + i * b->ldx;
    const uint8_t *row = b->codes + r * b->stride;
    double exact = 0.0, sum_xw = 0.0, sum_grid = 0.0, sum_xs15 = 0.0;
    const size_t G = tc->group;
    double mx = 0.0; /* max |x| of the block of 128 inputs c is in, cut at k */
    for (size_t g = 0; g < b->groups; g++) {
        double s = b->scales[r * b->groups + g];
        int z = tc->symmetric ? 8 : (int)b->zeros[r * b->groups + g];
        for (size_t c = g * G; c < (g + 1u) * G; c++) {
            if (c % A2_GROUP == 0u) {
                mx = 0.0;
                for (size_t d = c; d < c + A2_GROUP && d < tc->k; d++)
                    mx = fmax(mx, fabs((double)x[d]));
            }
            int q = (c & 1u) ? row[c / 2u] >> 4 : row[c / 2u] & 15;
            double wv = s * (double)(q - z), t = (double)x[c] * wv;
            exact += t;
            sum_xw += fabs(t);
            sum_xs15 += 15.0 * fabs((double)x[c] * s);
            sum_grid += ldexp(mx, -13) * fabs(wv);
        }
    }
    const double blocks = (double)((tc->k + A2_GROUP - 1u) / A2_GROUP);
    *bound = sum_grid + ldexp(sum_xw, -19) +
             ldexp((3.0 * (double)b->groups + 2.0 * blocks) * sum_xs15, -22) + 1e-30;
    return exact;
}

/* Every output of one case against the oracle, and the padding untouched. */
static edgert_status a2_check_case(const a2_state *st, const a2_case *tc, const a2_bufs *b,
                                   char *err, size_t err_len)
{
    for (size_t i = 0; i < tc->m; i++) {
        for (size_t r = 0; r < b->ldy; r++) {
            double got = b->y[i * b->ldy + r], bound = 0.0;
            if (r >= tc->n) {
                if (got == A2_SENTINEL)
                    continue;
                edgert_errf(err, err_len,
                            A2_NAME ": self-test (path %s) m=%u n=%u k=%u: y[%zu][%zu] beyond n "
                                    "was written",
                            a2_path_name(st->path), (unsigned)tc->m, (unsigned)tc->n,
                            (unsigned)tc->k, i, r);
                return EDGERT_E_PLUGIN;
            }
            double exact = a2_oracle(tc, b, i, r, &bound);
            if (fabs(got - exact) <= bound) /* false for NaN too */
                continue;
            edgert_errf(err, err_len,
                        A2_NAME ": self-test (path %s) m=%u n=%u k=%u group=%u %s: y[%zu][%zu] = "
                                "%.9g but the scalar loop gives %.9g (|err| %.3g > bound %.3g)",
                        a2_path_name(st->path), (unsigned)tc->m, (unsigned)tc->n,
                        (unsigned)tc->k, (unsigned)tc->group,
                        tc->symmetric ? "symmetric" : "asymmetric", i, r, got, exact,
                        fabs(got - exact), bound);
            return EDGERT_E_PLUGIN;
        }
    }
    return EDGERT_OK;
}

/* Pack, multiply, check one case; one allocation, one exit. */
static edgert_status a2_run_case(a2_state *st, const a2_case *tc, uint32_t seed, char *err,
                                 size_t err_len)
{
    const edgert_host *host = st->host;
    a2_bufs b;
    b.stride = tc->k / 2u;
    b.groups = tc->k / tc->group;
    b.ldx = (size_t)tc->k + A2_LDX_PAD;
    b.ldy = (size_t)tc->n + A2_LDY_PAD;
    const size_t ng = tc->n * b.groups;
    const size_t bytes = (tc->m * b.ldx + tc->m * b.ldy + ng) * sizeof(float) +
                         tc->n * b.stride + ng;
    uint8_t *mem = host->alloc(host->host_ctx, bytes, A2_ALIGN);
    if (mem == NULL) {
        edgert_errf(err, err_len, A2_NAME ": self-test: cannot allocate the buffers of m=%u n=%u "
                                          "k=%u",
                    (unsigned)tc->m, (unsigned)tc->n, (unsigned)tc->k);
        return EDGERT_E_NOMEM;
    }
    b.x = (float *)(void *)mem;
    b.y = b.x + tc->m * b.ldx;
    b.scales = b.y + tc->m * b.ldy;
    b.codes = (uint8_t *)(b.scales + ng);
    b.zeros = b.codes + tc->n * b.stride;
    a2_fill(tc, seed, &b);

    void *packed = NULL;
    size_t packed_bytes = 0u;
    edgert_qweights qw = {
        .struct_size = sizeof(edgert_qweights), .n = tc->n, .k = tc->k, .group = tc->group,
        .codes = b.codes, .scales = b.scales, .zeros = tc->symmetric ? NULL : b.zeros,
        .name = "self-test",
    };
    edgert_status rc = a2_pack(st, &qw, &packed, &packed_bytes, err, err_len);
    if (rc != EDGERT_OK)
        goto out;
    edgert_gemm_args ga = {
        .struct_size = sizeof(edgert_gemm_args), .m = tc->m, .x = b.x, .ldx = b.ldx, .y = b.y,
        .ldy = b.ldy,
    };
    rc = a2_gemm(st, packed, &ga, err, err_len);
    if (rc == EDGERT_OK)
        rc = a2_check_case(st, tc, &b, err, err_len);
out:
    a2_packed_free(st, packed);
    host->free(host->host_ctx, mem);
    return rc;
}

edgert_status a2_self_test(void *state, char *err, size_t err_len)
{
    a2_state *st = state;
    if (st == NULL) {
        edgert_errf(err, err_len, A2_NAME ": self-test: state is NULL");
        return EDGERT_E_USAGE;
    }
    for (size_t i = 0; i < sizeof a2_cases / sizeof a2_cases[0]; i++) {
        edgert_status rc = a2_run_case(st, &a2_cases[i], 0x9E3779B9u + (uint32_t)i, err, err_len);
        if (rc != EDGERT_OK)
            return rc;
    }
    return EDGERT_OK;
}
