/*
 * runner/attn_avx2.c — the attention kernels (attn.h) for AVX2 + FMA,
 * compiled with -mavx2 -mfma for this file only and used only when the
 * probe saw both. The same structure as attn_avx512.c in 8 lanes, 16
 * registers: 4 heads x 16 positions (qk) or 16 dimensions (pv) per pass;
 * its comment derives the exp polynomial's accuracy; 2^n is built in the
 * exponent bits (n >= -126 after the clamp at -87.3).
 */
#include <immintrin.h>
#include <math.h>

#include "attn.h"

static inline __m256i tail_mask(uint32_t left)
{
    static const int32_t m[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256((const __m256i *)(m + 8 - (left < 8 ? left : 8)));
}

/* Up to 4 heads x 16 positions: 8 accumulators, K loaded once per dimension;
 * inlined with g a constant so they stay in registers (attn_avx512.c). */
static inline __attribute__((always_inline)) void
qk_4x16(const float *q, uint32_t g, const float *kt, uint32_t d, uint32_t p,
                    __m256i m0, __m256i m1, __m256 sc, float *s, size_t ls)
{
    __m256 a[4][2];
    for (uint32_t h = 0; h < 4; h++)
        a[h][0] = a[h][1] = _mm256_setzero_ps();
    const float *blk = kt + (size_t)p * d; /* the block of positions p..p+15 */
    for (uint32_t j = 0; j < d; j++) {
        const float *k = blk + 16 * j;
        __m256 k0 = _mm256_maskload_ps(k, m0), k1 = _mm256_maskload_ps(k + 8, m1);
        for (uint32_t h = 0; h < 4; h++) {
            if (h < g) {
                __m256 qj = _mm256_set1_ps(q[h * d + j]);
                a[h][0] = _mm256_fmadd_ps(qj, k0, a[h][0]);
                a[h][1] = _mm256_fmadd_ps(qj, k1, a[h][1]);
            }
        }
    }
    for (uint32_t h = 0; h < g; h++) {
        _mm256_maskstore_ps(s + h * ls + p, m0, _mm256_mul_ps(a[h][0], sc));
        _mm256_maskstore_ps(s + h * ls + p + 8, m1, _mm256_mul_ps(a[h][1], sc));
    }
}

static void qk_256(const float *q, uint32_t g, const float *kt, uint32_t d, uint32_t n,
                   float scale, float *s, size_t ls)
{
    const __m256 sc = _mm256_set1_ps(scale);
    for (uint32_t h0 = 0; h0 < g; h0 += 4) {
        uint32_t gh = g - h0 < 4 ? g - h0 : 4;
        for (uint32_t p = 0; p < n; p += 16) {
            uint32_t left = n - p;
            const float *qh = q + (size_t)h0 * d;
            float *sh = s + h0 * ls;
            __m256i m0 = tail_mask(left), m1 = tail_mask(left > 8 ? left - 8 : 0);
            switch (gh) {
            case 1: qk_4x16(qh, 1, kt, d, p, m0, m1, sc, sh, ls); break;
            case 2: qk_4x16(qh, 2, kt, d, p, m0, m1, sc, sh, ls); break;
            case 3: qk_4x16(qh, 3, kt, d, p, m0, m1, sc, sh, ls); break;
            default: qk_4x16(qh, 4, kt, d, p, m0, m1, sc, sh, ls); break;
            }
        }
    }
}

static inline __m256 exp_256(__m256 x)
{
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860682030941723212e-6f), r);
    __m256 y = _mm256_set1_ps(1.0f / 720);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.0f / 120));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.0f / 24));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.0f / 6));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(0.5f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.0f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)),
                                  23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

static float hmax(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

static double softmax_256(float *s, uint32_t n)
{
    __m256 mx = _mm256_set1_ps(-INFINITY);
    for (uint32_t p = 0; p < n; p += 8) {
        __m256i m = tail_mask(n - p);
        __m256 v = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_maskload_ps(s + p, m),
                                    _mm256_castsi256_ps(m));
        mx = _mm256_max_ps(mx, v);
    }
    __m256 top = _mm256_set1_ps(hmax(mx)), sum = _mm256_setzero_ps();
    for (uint32_t p = 0; p < n; p += 8) {
        __m256i m = tail_mask(n - p);
        __m256 e = exp_256(_mm256_sub_ps(_mm256_maskload_ps(s + p, m), top));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(m));
        _mm256_maskstore_ps(s + p, m, e);
        sum = _mm256_add_ps(sum, e);
    }
    float t[8];
    _mm256_storeu_ps(t, sum);
    return ((double)t[0] + t[1] + t[2] + t[3]) + ((double)t[4] + t[5] + t[6] + t[7]);
}

/* Up to 4 heads x 16 dimensions: 8 accumulators, V loaded once per position;
 * inlined with g a constant, as qk_4x16. */
static inline __attribute__((always_inline)) void
pv_4x16(const float *w, size_t lw, uint32_t g, const float *v, uint32_t n,
                    uint32_t j0, __m256i m0, __m256i m1, const float *scale, float *o, uint32_t d)
{
    __m256 a[4][2];
    for (uint32_t h = 0; h < 4; h++)
        a[h][0] = a[h][1] = _mm256_setzero_ps();
    for (uint32_t p = 0; p < n; p++) {
        const float *vp = v + (size_t)p * d + j0;
        __m256 x0 = _mm256_maskload_ps(vp, m0), x1 = _mm256_maskload_ps(vp + 8, m1);
        for (uint32_t h = 0; h < 4; h++) {
            if (h < g) {
                __m256 wp = _mm256_set1_ps(w[h * lw + p]);
                a[h][0] = _mm256_fmadd_ps(wp, x0, a[h][0]);
                a[h][1] = _mm256_fmadd_ps(wp, x1, a[h][1]);
            }
        }
    }
    for (uint32_t h = 0; h < g; h++) {
        __m256 sc = _mm256_set1_ps(scale[h]);
        _mm256_maskstore_ps(o + (size_t)h * d + j0, m0, _mm256_mul_ps(a[h][0], sc));
        _mm256_maskstore_ps(o + (size_t)h * d + j0 + 8, m1, _mm256_mul_ps(a[h][1], sc));
    }
}

static void pv_256(const float *w, size_t lw, uint32_t g, const float *v, uint32_t d, uint32_t n,
                   const float *scale, float *o)
{
    for (uint32_t h0 = 0; h0 < g; h0 += 4) {
        uint32_t gh = g - h0 < 4 ? g - h0 : 4;
        for (uint32_t j0 = 0; j0 < d; j0 += 16) {
            uint32_t left = d - j0;
            const float *wh = w + h0 * lw, *sc = scale + h0;
            float *oh = o + (size_t)h0 * d;
            __m256i m0 = tail_mask(left), m1 = tail_mask(left > 8 ? left - 8 : 0);
            switch (gh) {
            case 1: pv_4x16(wh, lw, 1, v, n, j0, m0, m1, sc, oh, d); break;
            case 2: pv_4x16(wh, lw, 2, v, n, j0, m0, m1, sc, oh, d); break;
            case 3: pv_4x16(wh, lw, 3, v, n, j0, m0, m1, sc, oh, d); break;
            default: pv_4x16(wh, lw, 4, v, n, j0, m0, m1, sc, oh, d); break;
            }
        }
    }
}

static void silu_mul_256(const float *g, const float *u, float *a, uint32_t n)
{
    for (uint32_t i = 0; i < n; i += 8) {
        __m256i m = tail_mask(n - i);
        __m256 x = _mm256_maskload_ps(g + i, m);
        __m256 e = exp_256(_mm256_sub_ps(_mm256_setzero_ps(), x));
        __m256 y = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
        _mm256_maskstore_ps(a + i, m, _mm256_mul_ps(y, _mm256_maskload_ps(u + i, m)));
    }
}

const rn_attn_kern rn_attn_avx2 = {"AVX2+FMA", qk_256, softmax_256, pv_256, silu_mul_256};
