/*
 * runner/attn_avx2.c — the attention kernels (attn.h) for AVX2 + FMA,
 * compiled with -mavx2 -mfma for this file only and used only when the
 * probe saw both. The same structure as attn_avx512.c in 8 lanes, 16
 * registers: 4 heads x 16 positions (qk) or 16 dimensions (pv) per pass;
 * its comment derives the exp polynomial's accuracy; 2^n is built in the
 * exponent bits (n >= -126 after the clamp at -87.3).
 *
 * Two sets: the fp32 cache, and the fp16 one (rn_attn_avx2_f16, -mf16c):
 * the same code with each 8 cached values loaded as 16 bytes and widened
 * by vcvtph2ps, so attention reads half the bytes; a K block is always
 * whole (16 positions), and a V row's last chunk of fewer than 16 values
 * (a head size no multiple of 16) goes through a zeroed copy, so no load
 * passes the cache's end.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attn.h"

static inline __m256i tail_mask(uint32_t left)
{
    static const int32_t m[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256((const __m256i *)(m + 8 - (left < 8 ? left : 8)));
}

/* 8 floats to p, the lanes of m only when fewer than 8 are `left`: a whole
 * vector goes by a plain store. vmaskmovps stores are microcoded on AMD's
 * cores: on the Zen 3 host, 8-lane gathers of 576 floats took 2.6-3.0k
 * cycles with a masked store each against 1.5-1.8k with plain ones (rdtsc
 * in the runner, SmolLM2), and every pass here stored that way. */
static inline __attribute__((always_inline)) void store8(float *p, __m256i m, __m256 v,
                                                         uint32_t left)
{
    if (left >= 8)
        _mm256_storeu_ps(p, v);
    else
        _mm256_maskstore_ps(p, m, v);
}

/* Up to 4 heads x 16 positions: 8 accumulators, K loaded once per dimension;
 * inlined with g a constant so they stay in registers (attn_avx512.c). */
static inline __attribute__((always_inline)) __m256 load8h(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

static inline __attribute__((always_inline)) void
qk_4x16(const float *q, uint32_t g, const void *kt, uint32_t d, uint32_t p,
                    uint32_t left, __m256 sc, float *s, size_t ls, const int f16)
{
    __m256 a[4][2];
    const __m256i m0 = tail_mask(left), m1 = tail_mask(left > 8 ? left - 8 : 0);
    for (uint32_t h = 0; h < 4; h++)
        a[h][0] = a[h][1] = _mm256_setzero_ps();
    /* the block of positions p..p+15 */
    const float *blk = f16 ? NULL : (const float *)kt + (size_t)p * d;
    const uint16_t *blkh = f16 ? (const uint16_t *)kt + (size_t)p * d : NULL;
    for (uint32_t j = 0; j < d; j++) {
        __m256 k0, k1;
        if (f16) { /* a whole block: 16 values, in bounds whatever n */
            k0 = load8h(blkh + 16 * j);
            k1 = load8h(blkh + 16 * j + 8);
        } else {
            const float *k = blk + 16 * j;
            k0 = _mm256_maskload_ps(k, m0);
            k1 = _mm256_maskload_ps(k + 8, m1);
        }
        for (uint32_t h = 0; h < 4; h++) {
            if (h < g) {
                __m256 qj = _mm256_set1_ps(q[h * d + j]);
                a[h][0] = _mm256_fmadd_ps(qj, k0, a[h][0]);
                a[h][1] = _mm256_fmadd_ps(qj, k1, a[h][1]);
            }
        }
    }
    for (uint32_t h = 0; h < g; h++) {
        store8(s + h * ls + p, m0, _mm256_mul_ps(a[h][0], sc), left);
        store8(s + h * ls + p + 8, m1, _mm256_mul_ps(a[h][1], sc), left > 8 ? left - 8 : 0);
    }
}

static inline __attribute__((always_inline)) void
qk_gen(const float *q, uint32_t g, const void *kt, uint32_t d, uint32_t n, float scale, float *s,
       size_t ls, const int f16)
{
    const __m256 sc = _mm256_set1_ps(scale);
    for (uint32_t h0 = 0; h0 < g; h0 += 4) {
        uint32_t gh = g - h0 < 4 ? g - h0 : 4;
        for (uint32_t p = 0; p < n; p += 16) {
            uint32_t left = n - p;
            const float *qh = q + (size_t)h0 * d;
            float *sh = s + h0 * ls;
            switch (gh) {
            case 1: qk_4x16(qh, 1, kt, d, p, left, sc, sh, ls, f16); break;
            case 2: qk_4x16(qh, 2, kt, d, p, left, sc, sh, ls, f16); break;
            case 3: qk_4x16(qh, 3, kt, d, p, left, sc, sh, ls, f16); break;
            default: qk_4x16(qh, 4, kt, d, p, left, sc, sh, ls, f16); break;
            }
        }
    }
}

static void qk_256(const float *q, uint32_t g, const void *kt, uint32_t d, uint32_t n,
                   float scale, float *s, size_t ls)
{
    qk_gen(q, g, kt, d, n, scale, s, ls, 0);
}

static void qk_256h(const float *q, uint32_t g, const void *kt, uint32_t d, uint32_t n,
                    float scale, float *s, size_t ls)
{
    qk_gen(q, g, kt, d, n, scale, s, ls, 1);
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
        store8(s + p, m, e, n - p);
        sum = _mm256_add_ps(sum, e);
    }
    float t[8];
    _mm256_storeu_ps(t, sum);
    return ((double)t[0] + t[1] + t[2] + t[3]) + ((double)t[4] + t[5] + t[6] + t[7]);
}

/* Up to 4 heads x 16 dimensions: 8 accumulators, V loaded once per position;
 * inlined with g a constant, as qk_4x16. */
static inline __attribute__((always_inline)) void
pv_4x16(const float *w, size_t lw, uint32_t g, const void *v, uint32_t n,
                    uint32_t j0, const float *scale, float *o, uint32_t d, const int f16)
{
    __m256 a[4][2];
    for (uint32_t h = 0; h < 4; h++)
        a[h][0] = a[h][1] = _mm256_setzero_ps();
    const uint32_t left = d - j0;
    const __m256i m0 = tail_mask(left), m1 = tail_mask(left > 8 ? left - 8 : 0);
    for (uint32_t p = 0; p < n; p++) {
        __m256 x0, x1;
        if (f16) {
            const uint16_t *vp = (const uint16_t *)v + (size_t)p * d + j0;
            if (left >= 16) {
                x0 = load8h(vp);
                x1 = load8h(vp + 8);
            } else { /* the row's last values: a copy, no load past them */
                uint16_t t[16] = {0};
                memcpy(t, vp, left * sizeof t[0]);
                x0 = load8h(t);
                x1 = load8h(t + 8);
            }
        } else {
            const float *vp = (const float *)v + (size_t)p * d + j0;
            x0 = _mm256_maskload_ps(vp, m0);
            x1 = _mm256_maskload_ps(vp + 8, m1);
        }
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
        store8(o + (size_t)h * d + j0, m0, _mm256_mul_ps(a[h][0], sc), left);
        store8(o + (size_t)h * d + j0 + 8, m1, _mm256_mul_ps(a[h][1], sc),
               left > 8 ? left - 8 : 0);
    }
}

static inline __attribute__((always_inline)) void
pv_gen(const float *w, size_t lw, uint32_t g, const void *v, uint32_t d, uint32_t n,
       const float *scale, float *o, const int f16)
{
    for (uint32_t h0 = 0; h0 < g; h0 += 4) {
        uint32_t gh = g - h0 < 4 ? g - h0 : 4;
        for (uint32_t j0 = 0; j0 < d; j0 += 16) {
            const float *wh = w + h0 * lw, *sc = scale + h0;
            float *oh = o + (size_t)h0 * d;
            switch (gh) {
            case 1: pv_4x16(wh, lw, 1, v, n, j0, sc, oh, d, f16); break;
            case 2: pv_4x16(wh, lw, 2, v, n, j0, sc, oh, d, f16); break;
            case 3: pv_4x16(wh, lw, 3, v, n, j0, sc, oh, d, f16); break;
            default: pv_4x16(wh, lw, 4, v, n, j0, sc, oh, d, f16); break;
            }
        }
    }
}

static void pv_256(const float *w, size_t lw, uint32_t g, const void *v, uint32_t d, uint32_t n,
                   const float *scale, float *o)
{
    pv_gen(w, lw, g, v, d, n, scale, o, 0);
}

static void pv_256h(const float *w, size_t lw, uint32_t g, const void *v, uint32_t d, uint32_t n,
                    const float *scale, float *o)
{
    pv_gen(w, lw, g, v, d, n, scale, o, 1);
}

static inline __m256 silu_256(__m256 x, __m256 u)
{
    __m256 e = exp_256(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

static void silu_mul_256(const float *g, const float *u, float *a, uint32_t n)
{
    for (uint32_t i = 0; i < n; i += 8) {
        __m256i m = tail_mask(n - i);
        __m256 y = silu_256(_mm256_maskload_ps(g + i, m), _mm256_maskload_ps(u + i, m));
        store8(a + i, m, y, n - i);
    }
}

/* The act-order passes (forward.c) read through vgatherdps, 8 lanes a
 * time; the lanes past n are masked off (no read, zeros). */
static inline __m256 gather8(const float *src, const uint32_t *idx, __m256i m)
{
    __m256i ix = _mm256_maskload_epi32((const int *)idx, m);
    return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), src, ix, _mm256_castsi256_ps(m), 4);
}

static void silu_mul_gather_256(const float *g, const float *u, const uint32_t *perm, float *a,
                                uint32_t n)
{
    for (uint32_t i = 0; i < n; i += 8) {
        __m256i m = tail_mask(n - i);
        store8(a + i, m, silu_256(gather8(g, perm + i, m), gather8(u, perm + i, m)), n - i);
    }
}

static void gather_256(const float *src, const uint32_t *idx, uint32_t n, float *dst)
{
    for (uint32_t i = 0; i < n; i += 8) {
        __m256i m = tail_mask(n - i);
        store8(dst + i, m, gather8(src, idx + i, m), n - i);
    }
}

/* The fp16 cache's values: rounded to nearest even by vcvtps2ph, finite
 * magnitudes above fp16's largest (65504) saturated to it (vcvtps2ph would
 * give inf, and one inf key makes every score of its position NaN); NaN
 * stays NaN, as in an fp32 cache. */
static void kv_put_f16(const float *src, uint32_t n, void *dst, size_t stride)
{
    uint16_t *d = dst;
    const __m256 lim = _mm256_set1_ps(65504.0f), nlim = _mm256_set1_ps(-65504.0f);
    for (uint32_t i = 0; i < n; i += 8) {
        __m256i m = tail_mask(n - i);
        __m256 x0 = _mm256_maskload_ps(src + i, m);
        /* max/min give their second operand for NaN: the blend puts it back */
        __m256 x = _mm256_min_ps(_mm256_max_ps(x0, nlim), lim);
        x = _mm256_blendv_ps(x, x0, _mm256_cmp_ps(x0, x0, _CMP_UNORD_Q));
        uint16_t h[8];
        _mm_storeu_si128((__m128i *)(void *)h, _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
        uint32_t c = n - i < 8 ? n - i : 8;
        for (uint32_t t = 0; t < c; t++)
            d[(size_t)(i + t) * stride] = h[t];
    }
}

const rn_attn_kern rn_attn_avx2 = {"AVX2+FMA",    4,
                                   qk_256,        softmax_256,
                                   pv_256,        silu_mul_256,
                                   rn_kv_put_f32, silu_mul_gather_256,
                                   gather_256};
const rn_attn_kern rn_attn_avx2_f16 = {"AVX2+FMA, fp16 KV cache", 2,
                                       qk_256h,                   softmax_256,
                                       pv_256h,                   silu_mul_256,
                                       kv_put_f16,                silu_mul_gather_256,
                                       gather_256};
