/*
 * runner/attn_avx512.c — the attention kernels (attn.h) for AVX-512F,
 * compiled with -mavx512f -mfma for this file only and used only when the
 * probe saw avx512f.
 *
 * qk: 4 heads x 64 positions per pass in sixteen accumulators, K loaded
 * once per dimension for the 4 heads, a broadcast of each head's q[j]; the
 * tail masked. softmax: exp as 2^n * e^r, r = x - n ln2 in [-0.35, 0.35],
 * e^r by its Taylor polynomial to r^6 (remainder below r^7/5040, 1.2e-7
 * relative at the interval's end: within fp32's own rounding of the
 * result), then scalef by n; inputs are x - max <= 0, clamped at -87.3
 * (e^-87.3 is fp32's smallest normal: below it the weight is 0 to the sum
 * of at least one 1). pv: 4 heads x 64 dimensions per pass in sixteen
 * registers, V loaded once per position for the 4 heads.
 */
#include <immintrin.h>
#include <math.h>

#include "attn.h"

/* Up to 4 heads x 64 positions (4 blocks): 16 independent accumulators;
 * per dimension four loads of K shared by the heads and one broadcast of
 * each head's q[j], 8 loads to 16 FMAs (with 32 positions it was 6 to 8,
 * and prefill's attention ran at 40% of the FMA peak, bound by the loads).
 * Always inlined with g a constant (qk_512), so the accumulators stay in
 * registers: with g a variable the compiler kept them on the stack, a store
 * and a load per FMA. */
static inline __attribute__((always_inline)) void
qk_4x64(const float *q, const uint32_t g, const float *kt, uint32_t d, uint32_t p,
        const __mmask16 *mk, __m512 sc, float *s, size_t ls)
{
    __m512 a[4][4];
    for (uint32_t h = 0; h < 4; h++)
        for (uint32_t c = 0; c < 4; c++)
            a[h][c] = _mm512_setzero_ps();
    const float *b0 = kt + (size_t)p * d; /* four blocks of 16 d floats */
    const size_t bs = (size_t)RN_KBLOCK * d;
    for (uint32_t j = 0; j < d; j++) {
        /* a line of the next pass (four blocks on), a pass ahead:
         * prefetches never fault, past the cache's end too */
        _mm_prefetch((const char *)(b0 + 4 * bs + 64 * j), _MM_HINT_T0);
        __m512 k[4];
        for (uint32_t c = 0; c < 4; c++)
            k[c] = _mm512_maskz_loadu_ps(mk[c], b0 + c * bs + 16 * j);
        for (uint32_t h = 0; h < 4; h++) {
            if (h < g) {
                __m512 qj = _mm512_set1_ps(q[h * d + j]);
                for (uint32_t c = 0; c < 4; c++)
                    a[h][c] = _mm512_fmadd_ps(qj, k[c], a[h][c]);
            }
        }
    }
    for (uint32_t h = 0; h < g; h++)
        for (uint32_t c = 0; c < 4; c++)
            _mm512_mask_storeu_ps(s + h * ls + p + 16 * c, mk[c], _mm512_mul_ps(a[h][c], sc));
}

static void qk_512(const float *q, uint32_t g, const void *kt_, uint32_t d, uint32_t n,
                   float scale, float *s, size_t ls)
{
    const float *kt = kt_; /* this set's cache is fp32 */
    const __m512 sc = _mm512_set1_ps(scale);
    for (uint32_t h0 = 0; h0 < g; h0 += 4) {
        uint32_t gh = g - h0 < 4 ? g - h0 : 4;
        for (uint32_t p = 0; p < n; p += 64) {
            __mmask16 mk[4];
            for (uint32_t c = 0; c < 4; c++) {
                uint32_t at = p + 16 * c, left = at < n ? n - at : 0;
                mk[c] = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
            }
            const float *qh = q + (size_t)h0 * d;
            float *sh = s + h0 * ls;
            switch (gh) {
            case 1: qk_4x64(qh, 1, kt, d, p, mk, sc, sh, ls); break;
            case 2: qk_4x64(qh, 2, kt, d, p, mk, sc, sh, ls); break;
            case 3: qk_4x64(qh, 3, kt, d, p, mk, sc, sh, ls); break;
            default: qk_4x64(qh, 4, kt, d, p, mk, sc, sh, ls); break;
            }
        }
    }
}

static inline __m512 exp_512(__m512 x)
{
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723212e-6f), r);
    __m512 y = _mm512_set1_ps(1.0f / 720);
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f / 120));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f / 24));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f / 6));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(0.5f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(y, n);
}

static double softmax_512(float *s, uint32_t n)
{
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (uint32_t p = 0; p < n; p += 16) {
        __mmask16 m = n - p >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - p)) - 1);
        mx = _mm512_mask_max_ps(mx, m, mx, _mm512_maskz_loadu_ps(m, s + p));
    }
    __m512 top = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 sum = _mm512_setzero_ps();
    for (uint32_t p = 0; p < n; p += 16) {
        __mmask16 m = n - p >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - p)) - 1);
        __m512 e = exp_512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + p), top));
        _mm512_mask_storeu_ps(s + p, m, e);
        sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(m, e));
    }
    return (double)_mm512_reduce_add_ps(sum);
}

/* Up to 4 heads x 64 dimensions: 16 accumulators; per position four loads
 * of V shared by the heads. Inlined with g a constant, as qk_4x32. */
static inline __attribute__((always_inline)) void
pv_4x64(const float *w, size_t lw, uint32_t g, const float *v, uint32_t n,
                    uint32_t j0, __mmask16 *mk, const float *scale, float *o, uint32_t d)
{
    __m512 a[4][4];
    for (uint32_t h = 0; h < 4; h++)
        for (uint32_t c = 0; c < 4; c++)
            a[h][c] = _mm512_setzero_ps();
    for (uint32_t p = 0; p < n; p++) {
        const float *vp = v + (size_t)p * d + j0;
        _mm_prefetch((const char *)(vp + 8 * (size_t)d), _MM_HINT_T0); /* 8 rows on */
        _mm_prefetch((const char *)(vp + 8 * (size_t)d + 32), _MM_HINT_T0);
        __m512 x[4];
        for (uint32_t c = 0; c < 4; c++)
            x[c] = _mm512_maskz_loadu_ps(mk[c], vp + 16 * c);
        for (uint32_t h = 0; h < 4; h++) {
            if (h < g) {
                __m512 wp = _mm512_set1_ps(w[h * lw + p]);
                for (uint32_t c = 0; c < 4; c++)
                    a[h][c] = _mm512_fmadd_ps(wp, x[c], a[h][c]);
            }
        }
    }
    for (uint32_t h = 0; h < g; h++)
        for (uint32_t c = 0; c < 4; c++)
            _mm512_mask_storeu_ps(o + (size_t)h * d + j0 + 16 * c, mk[c],
                                  _mm512_mul_ps(a[h][c], _mm512_set1_ps(scale[h])));
}

static void pv_512(const float *w, size_t lw, uint32_t g, const void *v_, uint32_t d, uint32_t n,
                   const float *scale, float *o)
{
    const float *v = v_; /* this set's cache is fp32 */
    for (uint32_t h0 = 0; h0 < g; h0 += 4) {
        uint32_t gh = g - h0 < 4 ? g - h0 : 4;
        for (uint32_t j0 = 0; j0 < d; j0 += 64) {
            __mmask16 mk[4];
            for (uint32_t c = 0; c < 4; c++) {
                uint32_t at = j0 + 16 * c, left = at < d ? d - at : 0;
                mk[c] = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
            }
            const float *wh = w + h0 * lw, *sc = scale + h0;
            float *oh = o + (size_t)h0 * d;
            switch (gh) {
            case 1: pv_4x64(wh, lw, 1, v, n, j0, mk, sc, oh, d); break;
            case 2: pv_4x64(wh, lw, 2, v, n, j0, mk, sc, oh, d); break;
            case 3: pv_4x64(wh, lw, 3, v, n, j0, mk, sc, oh, d); break;
            default: pv_4x64(wh, lw, 4, v, n, j0, mk, sc, oh, d); break;
            }
        }
    }
}

/* g / (1 + e^-g) * u, e^-g clamped to [e^-87.3, e^88] (exp_512): a gate
 * below -88 gives g u e^-88 (under 1e-35 in size) for g u e^g, one above
 * 87.3 gives g u as it is */
static void silu_mul_512(const float *g, const float *u, float *a, uint32_t n)
{
    for (uint32_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 x = _mm512_maskz_loadu_ps(m, g + i);
        __m512 e = exp_512(_mm512_sub_ps(_mm512_setzero_ps(), x));
        __m512 y = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        _mm512_mask_storeu_ps(a + i, m, _mm512_mul_ps(y, _mm512_maskz_loadu_ps(m, u + i)));
    }
}

/* silu_mul_512's values in the order perm gives (a[i] = silu(g[perm[i]])
 * u[perm[i]]), the same operations on the same lanes' values: the bits of
 * silu_mul_512 followed by a gather, which the act-order MLP needs (a
 * down projection whose rows follow its GPTQ order beside dense gate and
 * up; runner/forward.c). The portable one (expf) gave other bits than
 * silu_mul_512 (test_runner_attn). */
static void silu_mul_gather_512(const float *g, const float *u, const uint32_t *perm, float *a,
                                uint32_t n)
{
    for (uint32_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512i ix = _mm512_maskz_loadu_epi32(m, perm + i);
        __m512 x = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, ix, g, 4);
        __m512 uv = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, ix, u, 4);
        __m512 e = exp_512(_mm512_sub_ps(_mm512_setzero_ps(), x));
        __m512 y = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        _mm512_mask_storeu_ps(a + i, m, _mm512_mul_ps(y, uv));
    }
}

const rn_attn_kern rn_attn_avx512 = {"AVX-512F",    4,
                                     qk_512,        softmax_512,
                                     pv_512,        silu_mul_512,
                                     rn_kv_put_f32, silu_mul_gather_512,
                                     rn_gather_c};
