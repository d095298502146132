/*
 * runner/attn.c — the portable attention kernels (attn.h), and the choice of
 * a set per CPU. Plain loops whose inner loop runs along contiguous memory,
 * which the compiler vectorizes for the baseline ISA.
 */
#include <math.h>

#include "attn.h"
#include "edgert/plugin.h" /* edgert_cpu_flag */

static void qk_c(const float *q, uint32_t g, const void *kt_, uint32_t d, uint32_t n,
                 float scale, float *s, size_t ls)
{
    const float *kt = kt_;
    for (uint32_t h = 0; h < g; h++) {
        float *sh = s + h * ls;
        const float *qh = q + (size_t)h * d;
        for (uint32_t p0 = 0; p0 < n; p0 += RN_KBLOCK) {
            const float *blk = kt + (size_t)p0 * d;
            uint32_t np = n - p0 < RN_KBLOCK ? n - p0 : RN_KBLOCK;
            float acc[RN_KBLOCK] = {0};
            for (uint32_t j = 0; j < d; j++)
                for (uint32_t i = 0; i < RN_KBLOCK; i++)
                    acc[i] += qh[j] * blk[j * RN_KBLOCK + i];
            for (uint32_t i = 0; i < np; i++)
                sh[p0 + i] = acc[i] * scale;
        }
    }
}

static double softmax_c(float *s, uint32_t n)
{
    float mx = s[0];
    for (uint32_t p = 1; p < n; p++)
        mx = s[p] > mx ? s[p] : mx;
    double sum = 0;
    for (uint32_t p = 0; p < n; p++) {
        s[p] = expf(s[p] - mx);
        sum += s[p];
    }
    return sum;
}

static void pv_c(const float *w, size_t lw, uint32_t g, const void *v_, uint32_t d, uint32_t n,
                 const float *scale, float *o)
{
    const float *v = v_;
    for (uint32_t h = 0; h < g; h++) {
        float *oh = o + (size_t)h * d;
        const float *wh = w + h * lw;
        for (uint32_t j = 0; j < d; j++)
            oh[j] = 0;
        for (uint32_t p = 0; p < n; p++) {
            const float *vp = v + (size_t)p * d;
            float wp = wh[p];
            for (uint32_t j = 0; j < d; j++)
                oh[j] += wp * vp[j];
        }
        for (uint32_t j = 0; j < d; j++)
            oh[j] *= scale[h];
    }
}

static void silu_mul_c(const float *g, const float *u, float *a, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        a[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void rn_silu_mul_gather_c(const float *g, const float *u, const uint32_t *perm, float *a,
                          uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        a[i] = g[perm[i]] / (1.0f + expf(-g[perm[i]])) * u[perm[i]];
}

void rn_gather_c(const float *src, const uint32_t *idx, uint32_t n, float *dst)
{
    for (uint32_t i = 0; i < n; i++)
        dst[i] = src[idx[i]];
}

void rn_kv_put_f32(const float *src, uint32_t n, void *dst, size_t stride)
{
    float *d = dst;
    for (uint32_t i = 0; i < n; i++)
        d[(size_t)i * stride] = src[i];
}

const rn_attn_kern rn_attn_portable = {"portable C",    4,
                                       qk_c,            softmax_c,
                                       pv_c,            silu_mul_c,
                                       rn_kv_put_f32,   rn_silu_mul_gather_c,
                                       rn_gather_c};

const rn_attn_kern *rn_attn_pick(uint64_t f, int kv16)
{
#if defined(__x86_64__)
#define HAS(x) ((f >> (x)) & 1u)
    const int avx2 = HAS(EDGERT_CPU_AVX2) && HAS(EDGERT_CPU_FMA);
    /* an fp16 cache halves what attention reads; only the AVX2 set has one
     * so far: where AVX-512 runs, its fp32 set stays (measured there; an
     * fp16 AVX-512 set, or the AVX2 one against it, waits for such a
     * machine to be measured on) */
    if (HAS(EDGERT_CPU_AVX512F))
        return &rn_attn_avx512;
    if (kv16 && avx2 && HAS(EDGERT_CPU_F16C))
        return &rn_attn_avx2_f16;
    if (avx2)
        return &rn_attn_avx2;
#undef HAS
#endif
    (void)f;
    (void)kv16;
    return &rn_attn_portable;
}
