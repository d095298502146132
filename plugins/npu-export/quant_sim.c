/*
 * plugins/npu-export/quant_sim.c — the quantizers and the arithmetic of the
 * exported graph, so the report can say what the device will compute.
 *
 * Activations (per tensor, asymmetric, as ONNX QuantizeLinear defines it):
 *   scale = (hi - lo) / qmax, zp = rne(-lo / scale) clamped to [0, qmax],
 *   q = clamp(rne(x / scale) + zp, 0, qmax),  x' = (q - zp) * scale
 * with [lo, hi] widened to include 0 (so 0 is exact) and rne the IEEE
 * round-half-to-even that QuantizeLinear specifies (rintf in the default
 * rounding mode). Weights (per output channel, symmetric, zero point 0):
 *   scale = max|w| / qmax, q = clamp(rne(w / scale), -qmax, qmax)
 * with qmax 127 (int8) or 7 (int4): the restricted symmetric range, so
 * -w quantizes to -q.
 *
 * Ranges: minmax (the calibration set's extremes), margin:F ([-F m, F m],
 * m the largest |value|: room for what the calibration set did not show;
 * request.c has the measurements behind the default margin:4),
 * percentile:P (the [100 - P, P] percentiles of all values of the tensor,
 * which clips the rare largest values to shrink the step), fixed ([-1, 1]:
 * what an uncalibrated export assumes).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ne.h"

/* k-th smallest of v[0..n) (v is reordered): Hoare-style quickselect with a
 * median-of-three pivot; linear on average, no recursion. */
static float select_kth(float *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        float a = v[lo], b = v[mid], c = v[hi];
        float pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                float t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return v[k];
    }
    return v[k];
}

void ne_range_of(const float *v, size_t n, ne_range r, float *scratch, float *lo, float *hi)
{
    float a = 0.0f, b = 0.0f;
    if (r.kind == NE_RANGE_FIXED || n == 0) {
        a = -1.0f;
        b = 1.0f;
    } else if (r.kind == NE_RANGE_MINMAX || r.kind == NE_RANGE_MARGIN || !scratch) {
        a = b = v[0];
        for (size_t i = 1; i < n; i++) {
            a = v[i] < a ? v[i] : a;
            b = v[i] > b ? v[i] : b;
        }
        if (r.kind == NE_RANGE_MARGIN) { /* symmetric: the thinner side's tail is no */
            float m = -a > b ? -a : b;     /* evidence that the device's stays inside */
            b = (float)(m * r.pct);
            a = -b;
        }
    } else {
        memcpy(scratch, v, n * sizeof *v);
        double f = r.pct / 100.0;
        size_t khi = (size_t)ceil(f * (double)n);
        khi = khi ? khi - 1 : 0;
        size_t klo = (size_t)floor((1.0 - f) * (double)n);
        if (khi >= n)
            khi = n - 1;
        if (klo >= n)
            klo = n - 1;
        b = select_kth(scratch, n, khi);
        a = select_kth(scratch, n, klo);
    }
    *lo = a < 0.0f ? a : 0.0f;
    *hi = b > 0.0f ? b : 0.0f;
}

ne_aq ne_aq_make(float lo, float hi, unsigned bits)
{
    ne_aq q;
    q.qmax = (int32_t)((1u << bits) - 1u);
    if (lo > 0.0f)
        lo = 0.0f;
    if (hi < 0.0f)
        hi = 0.0f;
    if (!(hi - lo > 1e-12f)) /* all zeros (or NaN): any positive scale works */
        hi = lo + 1e-6f;
    q.lo = lo;
    q.hi = hi;
    q.scale = (hi - lo) / (float)q.qmax;
    float z = rintf(-lo / q.scale);
    q.zp = z < 0.0f ? 0 : z > (float)q.qmax ? q.qmax : (int32_t)z;
    return q;
}

float ne_aq_apply(const ne_aq *q, float x)
{
    float v = rintf(x / q->scale) + (float)q->zp;
    v = v < 0.0f ? 0.0f : v > (float)q->qmax ? (float)q->qmax : v;
    return (float)((int32_t)v - q->zp) * q->scale;
}

void ne_wquant(const float *w, uint32_t n, uint32_t k, int qmax, int8_t *q, float *scale)
{
    for (uint32_t r = 0; r < n; r++) {
        const float *row = w + (size_t)r * k;
        float m = 0.0f;
        for (uint32_t i = 0; i < k; i++)
            m = fabsf(row[i]) > m ? fabsf(row[i]) : m;
        float s = m > 0.0f ? m / (float)qmax : 1.0f;
        scale[r] = s;
        int8_t *qr = q + (size_t)r * k;
        for (uint32_t i = 0; i < k; i++) {
            float v = rintf(row[i] / s);
            v = v < (float)-qmax ? (float)-qmax : v > (float)qmax ? (float)qmax : v;
            qr[i] = (int8_t)v;
        }
    }
}

/* Four rows of y at a time share each loaded row of wt; the j loop is plain
 * enough for the compiler to vectorise at the baseline ISA. Each y[t][j] is
 * summed over k in ascending order whatever the blocking. */
void ne_gemm_block(const float *x, uint32_t t, uint32_t k, const float *wt, uint32_t nb, float *y)
{
    uint32_t r = 0;
    for (; r + 4 <= t; r += 4) {
        float acc[4][NE_NB];
        memset(acc, 0, sizeof acc);
        const float *x0 = x + (size_t)r * k, *x1 = x0 + k, *x2 = x1 + k, *x3 = x2 + k;
        for (uint32_t i = 0; i < k; i++) {
            const float *w = wt + (size_t)i * nb;
            float a0 = x0[i], a1 = x1[i], a2 = x2[i], a3 = x3[i];
            for (uint32_t j = 0; j < nb; j++) {
                acc[0][j] += a0 * w[j];
                acc[1][j] += a1 * w[j];
                acc[2][j] += a2 * w[j];
                acc[3][j] += a3 * w[j];
            }
        }
        for (int q = 0; q < 4; q++)
            memcpy(y + (size_t)(r + q) * nb, acc[q], nb * sizeof(float));
    }
    for (; r < t; r++) {
        float acc[NE_NB];
        memset(acc, 0, sizeof acc);
        const float *xr = x + (size_t)r * k;
        for (uint32_t i = 0; i < k; i++) {
            const float *w = wt + (size_t)i * nb;
            float a = xr[i];
            for (uint32_t j = 0; j < nb; j++)
                acc[j] += a * w[j];
        }
        memcpy(y + (size_t)r * nb, acc, nb * sizeof(float));
    }
}

int ne_quant_self_test(char *err, size_t len)
{
    /* Quantizer: [-1, 3] in 16 bits: scale 4/65535, zp rne(16383.75) = 16384;
     * 0 stays exact, ties round to even. */
    ne_aq a = ne_aq_make(-1.0f, 3.0f, 16);
    if (a.zp != 16384 || ne_aq_apply(&a, 0.0f) != 0.0f ||
        fabsf(ne_aq_apply(&a, 1.0f) - 1.0f) > a.scale) {
        edgert_errf(err, len, NE_NAME ": self-test: activation quantizer is wrong (zp %d)", a.zp);
        return -1;
    }
    /* Percentile selection against a known order: 0..999 shuffled. */
    float v[1000], s[1000], lo, hi;
    for (int i = 0; i < 1000; i++)
        v[i] = (float)((i * 337) % 1000) - 500.0f;
    ne_range pr = {NE_RANGE_PERCENTILE, 99.0};
    ne_range_of(v, 1000, pr, s, &lo, &hi);
    if (lo != -490.0f || hi != 489.0f) {
        edgert_errf(err, len, NE_NAME ": self-test: percentile selection gave [%g, %g], expected "
                              "[-490, 489]", (double)lo, (double)hi);
        return -1;
    }
    /* The GEMM block against a scalar loop (exact: small integers). */
    float x[5 * 7], wt[7 * 3], y[5 * 3];
    for (int i = 0; i < 35; i++)
        x[i] = (float)(i % 5 - 2);
    for (int i = 0; i < 21; i++)
        wt[i] = (float)(i % 4 - 1);
    ne_gemm_block(x, 5, 7, wt, 3, y);
    for (int t = 0; t < 5; t++)
        for (int c = 0; c < 3; c++) {
            float e = 0.0f;
            for (int k = 0; k < 7; k++)
                e += x[t * 7 + k] * wt[k * 3 + c];
            if (y[t * 3 + c] != e) {
                edgert_errf(err, len, NE_NAME ": self-test: GEMM block y[%d][%d] = %g, expected "
                                      "%g", t, c, (double)y[t * 3 + c], (double)e);
                return -1;
            }
        }
    return 0;
}
