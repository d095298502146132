/*
 * runner/math.c — the arithmetic the runner does itself, portable C: RMSNorm,
 * dot products, the fp32 reference GEMM over a file's F32/F16/BF16 values.
 * Dot products keep eight partial sums, so the compiler vectorizes them
 * without reassociating anything it was not told to.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

float rn_dot(const float *a, const float *b, uint32_t n)
{
    float s[8] = {0};
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            s[j] += a[i + j] * b[i + j];
    for (; i < n; i++)
        s[0] += a[i] * b[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

void rn_axpy(float *y, float a, const float *x, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        y[i] += a * x[i];
}

/* y = x / sqrt(mean(x^2) + eps) * g, the mean in double (a 2048-wide sum of
 * squares in fp32 loses the low bits the reference keeps). */
void rn_rmsnorm(float *y, const float *x, const float *g, uint32_t n, double eps)
{
    double ss = 0;
    for (uint32_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    float r = (float)(1.0 / sqrt(ss / n + eps));
    for (uint32_t i = 0; i < n; i++)
        y[i] = x[i] * r * g[i];
}

/* In order into tmp, then gathered: the stores into y, which the GEMM's
 * workers read on the other cores, go in order as without act order;
 * scattered, each waited for its line (SmolLM2's step 3% longer). */
void rn_rmsnorm_to(float *y, const float *x, const float *g, uint32_t n, double eps,
                   const uint32_t *perm, float *tmp, const rn_attn_kern *k)
{
    if (!perm) {
        rn_rmsnorm(y, x, g, n, eps);
        return;
    }
    rn_rmsnorm(tmp, x, g, n, eps);
    k->gather(tmp, perm, n, y);
}

void rn_row_f32(const void *base, st_dtype dt, uint64_t first, uint32_t count, float *out)
{
    if (dt == ST_F32) {
        memcpy(out, (const float *)base + first, count * sizeof(float));
    } else if (dt == ST_BF16) {
        const uint16_t *h = (const uint16_t *)base + first;
        for (uint32_t i = 0; i < count; i++) {
            uint32_t u = (uint32_t)h[i] << 16;
            memcpy(&out[i], &u, 4);
        }
    } else {
        const uint16_t *h = (const uint16_t *)base + first;
        for (uint32_t i = 0; i < count; i++)
            out[i] = st_f16_to_f32(h[i]);
    }
}

typedef struct gemm_job {
    const rn_linear *l;
    uint32_t m;
    const float *x;
    size_t ldx;
    float *y;
    size_t ldy;
} gemm_job;

/* Rows [b, e) of W: each converted once into a stack of 4 rows, then
 * multiplied with every row of x. */
static void gemm_rows(void *arg, size_t b, size_t e, unsigned worker)
{
    const gemm_job *j = arg;
    const rn_linear *l = j->l;
    uint32_t k = l->k;
    float *w = malloc(4 * (size_t)k * sizeof(float));
    (void)worker;
    if (!w)
        abort(); /* a few KiB per chunk: the process is out of memory */
    for (size_t r = b; r < e; r += 4) {
        unsigned nr = e - r < 4 ? (unsigned)(e - r) : 4;
        for (unsigned q = 0; q < nr; q++)
            rn_row_f32(l->w, l->dt, (r + q) * (uint64_t)k, k, w + q * (size_t)k);
        for (uint32_t i = 0; i < j->m; i++) {
            const float *xi = j->x + i * j->ldx;
            float *yi = j->y + i * j->ldy + l->col;
            for (unsigned q = 0; q < nr; q++)
                yi[r + q] = rn_dot(xi, w + q * (size_t)k, k);
        }
    }
    free(w);
}

void rn_gemm_f32(edgert_ctx *ctx, const rn_linear *l, uint32_t m, const float *x, size_t ldx,
                 float *y, size_t ldy)
{
    gemm_job j = {l, m, x, ldx, y, ldy};
    edgert_parallel_for(ctx, l->n, 16, gemm_rows, &j);
}
