/*
 * core/weights/weights.c — canonical int4 weights (architecture.md, Canonical weights).
 *
 *   edgert_quantize_rtn   dense fp32 W[n][k] -> canonical int4 (round to nearest)
 *   edgert_dequantize     canonical int4 -> dense fp32, w = s * (q - z)
 *   edgert_qtensor_free
 *
 * Canonical layout (edgert_qweights in plugin.h): codes two per byte, low
 * nibble first, each row starting on a byte boundary (row stride (k + 1) / 2);
 * scales float [n][groups] and zeros uint8 [n][groups] (NULL: symmetric,
 * z = 8), groups = ceil(k / group), the last group of a row partial when
 * k % group != 0. When k is odd the unused high nibble of each row's last
 * byte is 0.
 *
 * Rounding choices, all of which keep |w - s * (q - z)| <= s / 2 (plus the
 * rounding of one fp32 multiply) for every element:
 *
 *   symmetric   s = max|w| / 7, q = clamp(round(w / s) + 8, 0, 15). |w / s|
 *               <= 7, so q never actually clamps; q = 0 is never produced.
 *               A group whose max|w| is 0 (or so small that max|w| / 7
 *               underflows to 0 in fp32) gets s = 0 and q = 8: it
 *               dequantizes to exactly 0 (0 * 0), which for the underflow
 *               case is within one denormal step of the input.
 *
 *   asymmetric  the range is widened to include 0 (lo = min(min, 0),
 *               hi = max(max, 0)), then s = (hi - lo) / 15,
 *               z = round(-lo / s), q = clamp(round(w / s) + z, 0, 15).
 *               Widening is what GPTQ's quantizer does: with min <= 0 <= max
 *               the zero point lands in [0, 15] by construction, so the
 *               clamp of z never bites and the extremes clamp to the nearest
 *               representable value. Without it, a group of all-positive
 *               values would get z = 0 and every value above 15 * s would be
 *               clamped to 15 * s (an unbounded error).
 *               A constant group (max == min == c) is stored exactly:
 *               c > 0: s = c, z = 0, q = 1;  c < 0: s = -c, z = 1, q = 0;
 *               c == 0: s = 0, z = 0, q = 0 — each dequantizes to c bit for
 *               bit (a multiply by +-1 or 0 is exact). This includes a
 *               partial last group of one element.
 *
 * Every rounding is done in double on the fp32 scale that is stored, so the
 * code chosen is the nearest one for the scale a kernel will actually use.
 * Codes use w * (1/s) rounded with lrint (ties to even; one instruction, the
 * bench quantizes 1.7 billion weights); z uses round() (half away from zero).
 *
 * Non-finite inputs are refused (EDGERT_E_USAGE): there is no int4 code for
 * them, and a single Inf would zero out the rest of its group.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/internal.h"
#include "weights/weights.h"

/* ---- sizes -------------------------------------------------------------- */

static size_t er_groups_per_row(uint32_t k, uint32_t group)
{
    /* ceil(k / group) without the k + group - 1 overflow of uint32 */
    return (size_t)(k / group) + (k % group != 0u);
}

static size_t er_codes_stride(uint32_t k)
{
    return ((size_t)k + 1u) / 2u;
}

/* ---- quantization of one group ------------------------------------------ */

/* OR code q into position col of a zero-initialised code row. */
static void er_put_code(uint8_t *row_codes, size_t col, unsigned q)
{
    row_codes[col / 2u] |= (uint8_t)((q & 15u) << ((col & 1u) * 4u));
}

static unsigned er_clamp_code(double v)
{
    if (v < 0.0)
        return 0u;
    if (v > 15.0)
        return 15u;
    return (unsigned)v;
}

/* Quantize src[0..len) (columns col0.. of one row). Returns -1 on a
 * non-finite input, 0 otherwise. */
static int er_quantize_group_sym(const float *src, size_t len, uint8_t *row_codes, size_t col0,
                                 float *scale_out)
{
    double amax = 0.0;
    for (size_t j = 0; j < len; j++) {
        if (!isfinite(src[j]))
            return -1;
        double a = fabs((double)src[j]);
        if (a > amax)
            amax = a;
    }

    float s = (float)(amax / 7.0);
    *scale_out = s;
    if (s == 0.0f) {
        /* all zero (or underflow): 0 * (8 - 8) == 0 exactly */
        for (size_t j = 0; j < len; j++)
            er_put_code(row_codes, col0 + j, 8u);
        return 0;
    }
    /* Multiply by the reciprocal and round with lrint (one instruction,
     * ties to even) instead of dividing and calling round(): the bench
     * quantizes 1.7 billion weights. Either rounding keeps |error| <= s/2. */
    const double inv = 1.0 / (double)s;
    for (size_t j = 0; j < len; j++) {
        long t = lrint((double)src[j] * inv) + 8;
        er_put_code(row_codes, col0 + j, t < 0 ? 0u : t > 15 ? 15u : (unsigned)t);
    }
    return 0;
}

/* zmin 1 is GPTQ v1's rule (it stores z - 1 in 4 bits, so z = 0 cannot be
 * stored): a group that would get z = 0 (every value >= -s/2) is widened
 * instead to [-hi / 14, hi], so s = hi / 14 and z = 1; the bound
 * |error| <= s / 2 holds for the new s. A constant c > 0 is stored as
 * s = c, z = 1, q = 2; a zero group as z = 1, q = 1. */
static int er_quantize_group_asym(const float *src, size_t len, uint8_t *row_codes, size_t col0,
                                  float *scale_out, uint8_t *zero_out, unsigned zmin)
{
    float mn = src[0], mx = src[0];
    for (size_t j = 0; j < len; j++) {
        if (!isfinite(src[j]))
            return -1;
        if (src[j] < mn)
            mn = src[j];
        if (src[j] > mx)
            mx = src[j];
    }

    if (mn == mx) {
        /* Constant group: pick (s, z, q) so that s * (q - z) == c exactly. */
        float c = mn;
        unsigned q = 0u, z = 0u;
        float s = 0.0f;
        if (c > 0.0f) {
            s = c;
            q = 1u + zmin;
            z = zmin;
        } else if (c < 0.0f) {
            s = -c;
            z = 1u;
        } else {
            q = z = zmin;
        }
        *scale_out = s;
        *zero_out = (uint8_t)z;
        for (size_t j = 0; j < len; j++)
            er_put_code(row_codes, col0 + j, q);
        return 0;
    }

    /* Widen to include 0; in double so hi - lo cannot overflow fp32. */
    double lo = mn < 0.0f ? (double)mn : 0.0;
    double hi = mx > 0.0f ? (double)mx : 0.0;
    float s = (float)((hi - lo) / 15.0);
    if (s == 0.0f) {
        /* hi - lo is a few denormals: everything rounds to 0 */
        *scale_out = 0.0f;
        *zero_out = (uint8_t)zmin;
        return 0; /* codes stay 0 (calloc): 0 * (0 - z) */
    }
    unsigned z = er_clamp_code(round(-lo / (double)s));
    if (z < zmin) {
        s = (float)(hi / 14.0);
        z = zmin;
    }
    *scale_out = s;
    *zero_out = (uint8_t)z;
    const double inv = 1.0 / (double)s;
    for (size_t j = 0; j < len; j++) {
        long t = lrint((double)src[j] * inv) + (long)z;
        er_put_code(row_codes, col0 + j, t < 0 ? 0u : t > 15 ? 15u : (unsigned)t);
    }
    return 0;
}

/* ---- public API ----------------------------------------------------------- */

edgert_status er_qtensor_alloc(uint32_t n, uint32_t k, uint32_t group, int symmetric,
                               edgert_qtensor *out)
{
    size_t stride, groups, codes_bytes, scale_count, scales_bytes;
    if (out == NULL)
        return EDGERT_E_USAGE;
    memset(out, 0, EDGERT_QTENSOR_V1_SIZE); /* the caller's may be smaller */
    if (n == 0u || k == 0u || group == 0u)
        return EDGERT_E_USAGE;

    /* Every size is checked before anything is allocated; a shape whose
     * buffers cannot be addressed cannot be allocated either. */
    stride = er_codes_stride(k);
    groups = er_groups_per_row(k, group);
    if (__builtin_mul_overflow((size_t)n, stride, &codes_bytes) ||
        __builtin_mul_overflow((size_t)n, groups, &scale_count) ||
        __builtin_mul_overflow(scale_count, sizeof(float), &scales_bytes))
        return EDGERT_E_NOMEM;

    out->codes = calloc(codes_bytes, 1); /* zeroed: codes are OR-ed in, padding nibble stays 0 */
    out->scales = malloc(scales_bytes);
    if (!symmetric)
        out->zeros = malloc(scale_count);
    if (out->codes == NULL || out->scales == NULL || (!symmetric && out->zeros == NULL)) {
        edgert_qtensor_free(out);
        return EDGERT_E_NOMEM;
    }
    out->view.struct_size = (uint32_t)EDGERT_QWEIGHTS_V1_SIZE; /* all the library writes */
    out->view.n = n;
    out->view.k = k;
    out->view.group = group;
    out->view.codes = out->codes;
    out->view.scales = out->scales;
    out->view.zeros = out->zeros;
    out->view.name = NULL;
    return EDGERT_OK;
}

int er_quantize_row(const float *src, uint32_t k, uint32_t group, int symmetric, unsigned zmin,
                    const edgert_qweights *view, uint32_t r)
{
    size_t stride = er_codes_stride(k), groups = er_groups_per_row(k, group);
    /* The view's pointers are const for plugins; the owner writes through them. */
    uint8_t *row_codes = (uint8_t *)view->codes + (size_t)r * stride;
    float *scales = (float *)view->scales;
    uint8_t *zeros = (uint8_t *)view->zeros;
    for (size_t g = 0; g < groups; g++) {
        size_t col0 = g * (size_t)group;
        size_t len = (size_t)k - col0 < group ? (size_t)k - col0 : (size_t)group;
        size_t idx = (size_t)r * groups + g;
        int rc = symmetric ? er_quantize_group_sym(src + col0, len, row_codes, col0, &scales[idx])
                           : er_quantize_group_asym(src + col0, len, row_codes, col0,
                                                    &scales[idx], &zeros[idx], zmin);
        if (rc != 0)
            return -1;
    }
    return 0;
}

edgert_status edgert_quantize_rtn(const float *w, uint32_t n, uint32_t k, uint32_t group,
                                  int symmetric, edgert_qtensor *out)
{
    size_t dense_count;
    if (out == NULL)
        return EDGERT_E_USAGE;
    memset(out, 0, EDGERT_QTENSOR_V1_SIZE); /* the caller's may be smaller */
    if (w == NULL || n == 0u || k == 0u || group == 0u)
        return EDGERT_E_USAGE;
    if (__builtin_mul_overflow((size_t)n, (size_t)k, &dense_count) ||
        dense_count > SIZE_MAX / sizeof(float))
        return EDGERT_E_NOMEM;
    edgert_status st = er_qtensor_alloc(n, k, group, symmetric, out);
    if (st != EDGERT_OK)
        return st;
    for (uint32_t r = 0; r < n; r++) {
        if (er_quantize_row(w + (size_t)r * k, k, group, symmetric, 0u, &out->view, r) != 0) {
            edgert_qtensor_free(out); /* non-finite weight in row r */
            return EDGERT_E_USAGE;
        }
    }
    return EDGERT_OK;
}

void edgert_qtensor_free(edgert_qtensor *t)
{
    if (t == NULL)
        return;
    free(t->codes);
    free(t->scales);
    free(t->zeros);
    memset(t, 0, EDGERT_QTENSOR_V1_SIZE);
}

void edgert_dequantize(const edgert_qweights *w, float *out)
{
    if (w == NULL || out == NULL || w->codes == NULL || w->scales == NULL || w->n == 0u ||
        w->k == 0u || w->group == 0u)
        return;

    size_t stride = er_codes_stride(w->k);
    size_t groups = er_groups_per_row(w->k, w->group);
    /* act order: column c is the model's input perm[c] (plugin.h) */
    const uint32_t *perm = er_qw_perm(w);
    for (size_t r = 0; r < w->n; r++) {
        const uint8_t *row_codes = w->codes + r * stride;
        float *dst = out + r * (size_t)w->k;
        for (size_t g = 0; g < groups; g++) {
            size_t col0 = g * (size_t)w->group;
            size_t end = col0 + w->group < w->k ? col0 + w->group : (size_t)w->k;
            float s = w->scales[r * groups + g];
            int z = w->zeros != NULL ? (int)w->zeros[r * groups + g] : 8;
            for (size_t c = col0; c < end; c++) {
                int q = (c & 1u) ? (row_codes[c / 2u] >> 4) : (row_codes[c / 2u] & 15);
                /* the same fp32 expression every backend is compared with */
                size_t d = perm ? perm[c] : c; /* never past the row, whatever perm holds */
                if (d < w->k)
                    dst[d] = s * (float)(q - z);
            }
        }
    }
}
