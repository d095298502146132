/* core/common/tolerance.c — see tolerance.h. */
#define _GNU_SOURCE
#include "common/tolerance.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "edgert/plugin.h" /* edgert_errf */

static int dtype_is(const char *d, const char *const *names)
{
    for (; *names; names++)
        if (strcasecmp(d, *names) == 0)
            return 1;
    return 0;
}

/* The line that states the bound of tm's kind. */
static void model_text(er_tol_model *tm)
{
    switch (tm->kind) {
    case ER_TOL_FP32:
        snprintf(tm->text, sizeof tm->text,
                 "%s activations: |y-y_ref| <= (K+2)u(Z+S) + 4u(Z+S), u=2^-24, "
                 "S=sum|x w|, Z=sum|x||s|(q+z)",
                 tm->dtype);
        break;
    case ER_TOL_16BIT:
        snprintf(tm->text, sizeof tm->text,
                 "%s activations (16-bit): per element |dx| <= 2^-%d|x| + 2^-13 max_group|x| "
                 "+ 2^-16 max_token|x|; "
                 "|y-y_ref| <= sum|dx||w| + (K+2)u(Z_b+S_ref) + 4u(Z_b+S_b), u=2^-24",
                 tm->dtype, tm->u16 == 1.0 / 2048.0 ? 11 : 8);
        break;
    case ER_TOL_INT8:
        if (!tm->emulated) {
            snprintf(tm->text, sizeof tm->text,
                     "%s activations (any int8 form, per token or finer): per element |dx| <= "
                     "max_token|x|/127; |y-y*| <= sum|dx||w| + (K+2)u Z_b + 4u(Z_b+S_b), u=2^-24",
                     tm->dtype);
            break;
        }
        char span[40] = "token";
        if (tm->act_group != 0u)
            snprintf(span, sizeof span, "group of %u inputs", tm->act_group);
        snprintf(tm->text, sizeof tm->text,
                 "%s activations, emulated (reference on s*round(x/s), s=max|x|/127 per %s): "
                 "|y-y_ref| <= sum_ties s|w| + (K+2)u(Z_b+S_ref) + 4u(Z_b+S_b), u=2^-24",
                 tm->dtype, span);
        break;
    }
}

int er_tol_model_for(const char *backend, const char *dtype, int bits, int act_group,
                     unsigned flags, er_tol_model *tm, char *err, size_t err_len)
{
    static const char *const fp32[] = {"fp32", "f32", "float32", "float", NULL};
    static const char *const bf16[] = {"bf16", "bfloat16", NULL};
    static const char *const fp16[] = {"fp16", "f16", "float16", "half", NULL};
    /* an integer form with one scale per token or group: bf16's 8 bits at least */
    static const char *const int16[] = {"int16", "i16", "s16", "uint16", NULL};
    static const char *const int8[] = {"int8", "i8", "s8", NULL};
    const char *d = dtype ? dtype : "";
    memset(tm, 0, sizeof *tm);
    snprintf(tm->dtype, sizeof tm->dtype, "%s", *d ? d : "?");
    if (dtype_is(d, fp32) || (!*d && bits == 32)) {
        tm->kind = ER_TOL_FP32;
    } else if (dtype_is(d, bf16) || dtype_is(d, int16) || (!*d && bits == 16)) {
        tm->kind = ER_TOL_16BIT;
        tm->u16 = 1.0 / 256.0; /* 2^-8: bf16 has 8 significant bits */
    } else if (dtype_is(d, fp16)) {
        tm->kind = ER_TOL_16BIT;
        tm->u16 = 1.0 / 2048.0; /* 2^-11 */
    } else if (dtype_is(d, int8) || (!*d && bits == 8)) {
        tm->kind = ER_TOL_INT8;
        tm->emulated = (flags & ER_TOL_EMULATE_INT8) != 0;
        tm->act_group = act_group > 0 ? (uint32_t)act_group : 0u;
    } else {
        edgert_errf(err, err_len,
                    "%s: cannot derive a correctness tolerance for activation dtype '%s' (%d "
                    "bits): the model knows fp32, bf16, fp16, int16, uint16 and int8",
                    backend ? backend : "?", d, bits);
        return -1;
    }
    model_text(tm);
    return 0;
}

/* int8 over one scale's span (a token, or a group of its inputs): s =
 * max|x| / 127 in fp32 (what a kernel computes), x^ = s * round(x / s);
 * the oracle gets fp32(x^). */
static void int8_token(const float *x, uint32_t k, double mx, float *xr, double *dx)
{
    float s = (float)mx / 127.0f;
    for (uint32_t c = 0; c < k; c++) {
        dx[c] = 0.0;
        if (s == 0.0f) {
            xr[c] = 0.0f;
            continue;
        }
        double q = (double)x[c] / (double)s;
        double qr = round(q); /* half away from zero */
        if (qr > 127.0)
            qr = 127.0;
        if (qr < -127.0)
            qr = -127.0;
        double frac = fabs(q - trunc(q));
        if (fabs(frac - 0.5) <= 0x1p-20 * fabs(q) + 0x1p-20)
            dx[c] = (double)s; /* a near-tie: either neighbouring code is right */
        xr[c] = (float)((double)s * qr);
    }
}

void er_tol_token(const er_tol_model *tm, const float *x, uint32_t k, uint32_t group, float *xr,
                  double *dx)
{
    double mx = 0;
    for (uint32_t c = 0; c < k; c++)
        if (fabs((double)x[c]) > mx)
            mx = fabs((double)x[c]);
    if (tm->kind == ER_TOL_INT8 && tm->emulated) {
        /* one scale per act_group inputs (the last span may be short), or per token */
        const uint32_t span = tm->act_group != 0u ? tm->act_group : k;
        for (uint32_t c0 = 0; c0 < k; c0 += span) {
            const uint32_t n = k - c0 < span ? k - c0 : span;
            double gm = 0;
            for (uint32_t c = c0; c < c0 + n; c++)
                if (fabs((double)x[c]) > gm)
                    gm = fabs((double)x[c]);
            int8_token(x + c0, n, span == k ? mx : gm, xr + c0, dx + c0);
        }
        return;
    }
    if (tm->kind == ER_TOL_INT8) /* one step of a per-token scale, whatever the form */
        for (uint32_t c = 0; c < k; c++)
            dx[c] = mx / 127.0;
    if (tm->kind == ER_TOL_16BIT) {
        /* fixed-point terms: 2^-13 max of the element's group + 2^-16 max of the token */
        for (uint32_t g0 = 0; g0 < k; g0 += group) {
            uint32_t g1 = g0 + group < k ? g0 + group : k;
            double gm = 0;
            for (uint32_t c = g0; c < g1; c++)
                if (fabs((double)x[c]) > gm)
                    gm = fabs((double)x[c]);
            for (uint32_t c = g0; c < g1; c++)
                dx[c] = ER_TOL_FIX_GROUP * gm + ER_TOL_FIX_TOKEN * mx;
        }
    }
    memcpy(xr, x, (size_t)k * sizeof *xr);
}

/* Four partial sums of each kind, in two vectors of two doubles (GCC's
 * vector extension: SSE2 on x86-64's baseline, NEON on AArch64), added at
 * the end. The scalar loop, one chain of adds per sum, took half of an
 * `edgert verify` run. The order differs from a sequential loop's; either
 * errs by at most k 2^-53 S, 2^-29 of the oracle's own bound (K+2) 2^-24 S. */
typedef double sum2 __attribute__((vector_size(2 * sizeof(double))));
typedef long long bits2 __attribute__((vector_size(2 * sizeof(double))));
/* a sum2 at any double's address */
typedef double sum2_at __attribute__((vector_size(2 * sizeof(double)), aligned(8), may_alias));

/* Always inlined: a call per element pair took a third of a debug (-O0)
 * build's verify, the sanitizers' build. */
#define SUM_INLINE static inline __attribute__((always_inline))

SUM_INLINE sum2 load2(const double *p)
{
    return *(const sum2_at *)p;
}

SUM_INLINE sum2 load2f(const float *p)
{
    return (sum2){(double)p[0], (double)p[1]};
}

SUM_INLINE sum2 abs2(sum2 v)
{
    return (sum2)((bits2)v & ~(bits2)(sum2){-0.0, -0.0});
}

SUM_INLINE double total(sum2 a, sum2 b, double tail)
{
    sum2 t = a + b;
    return (t[0] + t[1]) + tail;
}

/* The tail k % 4 (and the whole of a k below 4): plain sums. */
static void tail_sums(const float *xr, const double *dx, const double *wd, const double *wz,
                      size_t c, size_t n, double t[5])
{
    for (; c < n; c++) {
        double xv = (double)xr[c], p = xv * wd[c];
        t[0] += p;
        t[1] += fabs(p);
        t[2] += fabs(xv) * wz[c];
        if (dx) {
            t[3] += dx[c] * fabs(wd[c]);
            t[4] += dx[c] * wz[c];
        }
    }
}

void er_tol_sums_of(const er_tol_model *tm, const float *xr, const double *dx, const double *wd,
                    const double *wz, uint32_t k, er_tol_sums *s)
{
    sum2 y0 = {0}, y1 = {0}, S0 = {0}, S1 = {0}, Z0 = {0}, Z1 = {0};
    size_t n = k, n4 = n - n % 4;
    for (size_t c = 0; c < n4; c += 4) {
        sum2 x0 = load2f(xr + c), x1 = load2f(xr + c + 2);
        sum2 p0 = x0 * load2(wd + c), p1 = x1 * load2(wd + c + 2);
        y0 += p0;
        y1 += p1;
        S0 += abs2(p0);
        S1 += abs2(p1);
        Z0 += abs2(x0) * load2(wz + c);
        Z1 += abs2(x1) * load2(wz + c + 2);
    }
    sum2 A0 = {0}, A1 = {0}, ZA0 = {0}, ZA1 = {0};
    if (dx)
        /* A = Σ (u16 |x| + dx) |w|; ZA the same for the folded terms */
        for (size_t c = 0; c < n4; c += 4) {
            sum2 d0 = load2(dx + c), d1 = load2(dx + c + 2);
            A0 += d0 * abs2(load2(wd + c));
            A1 += d1 * abs2(load2(wd + c + 2));
            ZA0 += d0 * load2(wz + c);
            ZA1 += d1 * load2(wz + c + 2);
        }
    double t[5] = {0};
    tail_sums(xr, dx, wd, wz, n4, n, t);
    er_tol_sums r = {total(y0, y1, t[0]), total(S0, S1, t[1]), total(Z0, Z1, t[2]),
                     total(A0, A1, t[3]), total(ZA0, ZA1, t[4])};
    if (dx) {
        r.A += tm->u16 * r.S;
        r.ZA += tm->u16 * r.Z;
    }
    *s = r;
}

static double gamma_of(uint32_t k)
{
    return ((double)k + 2.0) * ER_TOL_U;
}

double er_tol_vs_exact(uint32_t k, const er_tol_sums *s)
{
    double SB = s->S + s->A, ZB = s->Z + s->ZA;
    return s->A + gamma_of(k) * ZB + 4.0 * ER_TOL_U * (ZB + SB);
}

double er_tol_vs_oracle(uint32_t k, const er_tol_sums *s)
{
    double SB = s->S + s->A, ZB = s->Z + s->ZA;
    return s->A + gamma_of(k) * (ZB + s->S) + 4.0 * ER_TOL_U * (ZB + SB);
}

double er_tol_oracle(uint32_t k, const er_tol_sums *s)
{
    return gamma_of(k) * s->S;
}
