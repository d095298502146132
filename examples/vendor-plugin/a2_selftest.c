/*
 * examples/vendor-plugin/a2_selftest.c — the plugin's self-test: a few
 * odd-shaped GEMMs through pack and gemm of this instance (its path), and
 * through packed_data and packed_map, against an exact (double) scalar loop
 * over the canonical weights (the plugin kit's runner, pk_run_self_test),
 * within a bound derived from the kernels' arithmetic, which is this
 * plugin's own. Compiled without ISA flags.
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
 * tests/plugins/test_avx2_w4a16.c), with w_k = s (q_k - z) the exact weight and x~
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

#include "a2_internal.h"

static const pk_case a2_cases[] = {
    {1u, 37u, 256u, 128u, 0}, {3u, 21u, 128u, 128u, 1}, {5u, 45u, 256u, 128u, 0},
    {17u, 37u, 384u, 128u, 0}, {1u, 37u, 192u, 64u, 0},  {2u, 20u, 96u, 32u, 1},
    {9u, 33u, 320u, 64u, 0},   {17u, 21u, 160u, 32u, 0},
};

/* x's second block of 128 inputs 2^-10 smaller (the per-block scale of the
 * activations), and NaN in the ldx padding (it must never be read). */
static void a2_shape_x(float *x, uint32_t m, uint32_t k, size_t ldx)
{
    for (size_t i = 0; i < m; i++)
        for (size_t c = 0; c < ldx; c++) {
            float *v = &x[i * ldx + c];
            *v = c >= k ? NAN : c / A2_GROUP == 1u ? ldexpf(*v, -10) : *v;
        }
}

/* The bound of one output (see the header comment): G weight groups in B
 * blocks of 128 inputs. */
static double a2_bound(const void *state, uint32_t m, const pk_sums *s)
{
    (void)state;
    (void)m;
    const double groups = (double)(s->k / s->group);
    const double blocks = (double)((s->k + A2_GROUP - 1u) / A2_GROUP);
    return s->sum_grid + ldexp(s->sum_xw, -19) +
           ldexp((3.0 * groups + 2.0 * blocks) * s->sum_xs15, -22) + 1e-30;
}

edgert_status a2_self_test(void *state, char *err, size_t err_len)
{
    a2_state *st = state;
    if (st == NULL) {
        edgert_errf(err, err_len, A2_NAME ": self-test: state is NULL");
        return EDGERT_E_USAGE;
    }
    const pk_self_test t = {
        .plugin = A2_NAME, .path = a2_path_name(st->path), .state = st, .host = st->host,
        .cases = a2_cases, .ncases = sizeof a2_cases / sizeof a2_cases[0],
        .seed = 0x9E3779B9u, .pack = a2_pack, .packed_free = a2_packed_free, .gemm = a2_gemm,
        .shape_x = a2_shape_x, .bound = a2_bound, .packed_data = a2_packed_data,
        .packed_map = a2_packed_map,
        .act_block = A2_GROUP, /* activations scaled per block of 128, whatever the group */
    };
    return pk_run_self_test(&t, err, err_len);
}
