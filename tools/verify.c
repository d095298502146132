/*
 * tools/verify.c — `edgert verify`: is a backend's GEMM correct (against the
 * reference backend, within a tolerance derived from its arithmetic), and how
 * faithful is it (against dense fp32 of the unquantized weights)?
 *
 * ---- Correctness --------------------------------------------------------------
 * Canonical weights W[n][k] are generated (gen_dense, std 0.02)
 * and quantized by round-to-nearest in the backend's own layout (symmetric or
 * not, its group size, 128 when the manifest says 0). The backend under test
 * B and the oracle R ("ref-w4a16", plain fp32 arithmetic) pack the same
 * canonical tensor; both run y = x W^T over the shapes
 *   M in {1, 2, 3, 16, 17, 64, 512}   (512 only for n <= 129, k <= 512)
 *   N in {1, 7, 33, 129, 257, 1001}   odd: never a multiple of any tile
 *   K in {g, 2g, 16g}                 multiples of the group g (16g capped near 2048)
 *        {200, 333}                   not multiples (333 is also odd: padding nibble)
 * For K not a multiple of the group, B may refuse at pack time; the refusal
 * must be clean: EDGERT_E_UNSUPPORTED or EDGERT_E_USAGE with a message that
 * names k. That counts as a passed case; if B accepts, its output is checked.
 * Activations vary by case: LLM-like (gen_activations: heavy
 * tails, outlier channels), uniform in [-1, 1], LLM-like scaled by 2^-10, and
 * LLM-like with an all-zero row. Every x row has NaN in its ldx padding and
 * every y row sentinels in its ldy padding: reading past k or writing past n
 * is caught.
 *
 * ---- Tolerance: derived from the arithmetic, not chosen to pass ----------------
 * u = 2^-24 (fp32 unit roundoff). For one output y_i = Σ_k x_k w_ik, with w
 * the exact dequantized weight s (q - z):
 *   S   = Σ_k |x_k w_ik|            magnitude of the products
 *   Z   = Σ_k |x_k| |s| (q + z)     magnitude of the terms of a kernel that
 *                                   folds the zero point, s Σ q x - s z Σ x
 *                                   (per group or over all of K); Z >= S, so
 *                                   it also bounds kernels that do not fold
 *   γ   = (K + 2) u                 Higham's worst-case bound for an fp32
 *                                   dot product in ANY summation order
 *                                   (K products and sums; +2 for the rounding
 *                                   of s (q - z) and a spare)
 * The oracle R (fp32, unfolded, w = fl(s (q - z))) is itself checked against
 * an independent double-precision loop over the exact weights:
 *   |y_R - y*| <= γ S                (this is also ref-w4a16's own verdict)
 * B against R (the two errors add, so both appear):
 *   |y_B - y_R| <= A + γ (Z_B + S_R) + 4u (Z_B + S_B)
 * where A bounds |Σ (x_B - x_R) w| — the difference between the activations
 * B computes with and those R was given — and S_B, Z_B are S and Z for
 * |x_B| <= |x_R| + |Δx|. The 4u (Z_B + S_B) term is the slack for per-group
 * steps after an integer or partial sum (scale multiplies, the zero-point
 * subtraction: at most four fp32 roundings of values bounded by Z_B or S_B).
 *   fp32 activations:   x_B = x_R = x, A = 0.
 *   16-bit activations (bf16, fp16, int16: a backend may keep activations in
 *     any 16-bit form at least as precise as bf16), per element
 *       |Δx_k| <= u16 |x_k| + 2^-13 max_{j in g(k)} |x_j| + 2^-16 max_j |x_j|
 *     - u16 |x_k|: a floating-point form rounded to nearest: u16 = 2^-8 for
 *       bf16 (8 significant bits; also used for int16), 2^-11 for fp16;
 *     - 2^-13 max over the layout group g(k) of element k: a 15-bit
 *       fixed-point form with a power-of-two scale per group of (at most) the
 *       layout's group size — max in [2^13, 2^14) steps, rounding 2^-14 max,
 *       the clamp of the top value 2^-13 max; the avx512-w4a16 int16 path;
 *     - 2^-16 max over the token: a 16-bit integer form with one scale per
 *       token (max -> 32767, rounded to nearest).
 *     A = Σ_k |Δx_k| |w_ik| with that bound.
 *   int8 activations (per-token symmetric: s = max|x| / 127 in fp32,
 *     x^ = s round(x / s)): EMULATED — R runs on fp32(x^) (not x), so B must
 *     match the reference run on x^ to the accumulation bound. Where x / s
 *     lies within a relative 2^-20 of a rounding tie, a kernel that computes
 *     x / s differently (x * (127 / max), a reciprocal) may pick the other
 *     code: A adds s |w_ik| for each such element. The per-group integer ->
 *     fp32 scaling steps and the rounding of x^ to fp32 for R are covered by
 *     the 4u S_B slack.
 * A case fails when any output exceeds its bound (ratio error / tolerance
 * > 1), when an output is NaN or infinite, when padding is touched, or when
 * gemm or pack fails (other than a clean refusal of K % g != 0).
 *
 * ---- Fidelity ----------------------------------------------------------------
 * For each workload shape (with --quick: shapes of at most 8M weights, and the
 * output head with N capped at 16384), dense W from gen_dense(std
 * 0.02) and the same W quantized by RTN in the backend's layout
 * (gen_qtensor gives exactly edgert_quantize_rtn of those dense
 * weights); y_dense = x W^T from the UNQUANTIZED W with products and sums in
 * double (on all threads), y_B from the backend: SQNR in dB over M = 8 tokens
 * of LLM-like activations. The output head (the workload's `head: true` shape,
 * else K = 2048, N = 131072; N <= 16384 with --quick) runs T = --tokens
 * tokens: top-1 agreement of argmax(y_B) with argmax(y_dense), and mean
 * KL(softmax(y_dense) || softmax(y_B)). The head's first 8 tokens are the SQNR
 * tokens of its shape (the activation generator is a prefix-stable stream).
 * Head weights are scaled for a realistic logit spread: see head_std().
 */
#define _GNU_SOURCE
#include "verify.h"
#include "generate.h"

#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"

#define VERIFY_REF "ref-w4a16"
#define U_ACC (1.0 / 16777216.0)      /* 2^-24 */
#define FIX_GROUP (1.0 / 8192.0)      /* 2^-13: 15-bit fixed point per group, see above */
#define FIX_TOKEN (1.0 / 65536.0)     /* 2^-16: 16-bit integer per token */
#define WEIGHT_STD 0.02f
#define SQNR_TOKENS 8u
#define QUICK_MAX_WEIGHTS (8u * 1024u * 1024u)
#define QUICK_HEAD_N 16384u
#define HEAD_K 2048u
#define HEAD_N 131072u
#define Y_PAD 5u                       /* sentinel columns after each y row */
#define Y_SENTINEL -7777.25f
/* Std of the head's dense logits over the vocabulary; see head_std(). */
#define HEAD_LOGIT_STD 5.0

/* ---- small utilities ------------------------------------------------------------ */

static uint64_t seed_of(uint64_t base, uint64_t a, uint64_t b, uint64_t c)
{
    return gen_mix64(base ^ gen_mix64(a ^ gen_mix64(b ^ gen_mix64(c))));
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *xcalloc(size_t n, size_t size)
{
    if (n == 0 || size == 0)
        return calloc(1, 1);
    return calloc(n, size);
}

/* ---- a tiny parallel-for on plain pthreads ---------------------------------------- */
/* The dense double-precision reference and the tolerance evaluation run here,
 * never at the same time as a backend call (which uses the handle's pool). */

typedef void (*par_fn)(void *arg, size_t begin, size_t end);

typedef struct par_ctl {
    par_fn fn;
    void *arg;
    size_t n, grain;
    size_t next; /* atomic */
} par_ctl;

static void *par_worker(void *p)
{
    par_ctl *c = p;
    for (;;) {
        size_t b = __atomic_fetch_add(&c->next, c->grain, __ATOMIC_RELAXED);
        if (b >= c->n)
            break;
        size_t e = b + c->grain < c->n ? b + c->grain : c->n;
        c->fn(c->arg, b, e);
    }
    return NULL;
}

static void par_for(unsigned threads, size_t n, size_t grain, par_fn fn, void *arg)
{
    if (grain == 0)
        grain = 1;
    if (threads <= 1 || n <= grain) {
        fn(arg, 0, n);
        return;
    }
    if (threads > 256)
        threads = 256;
    par_ctl c = {fn, arg, n, grain, 0};
    pthread_t tid[256];
    unsigned started = 0;
    for (unsigned t = 1; t < threads; t++)
        if (pthread_create(&tid[started], NULL, par_worker, &c) == 0)
            started++;
    par_worker(&c); /* the caller works too: progress even if no thread started */
    for (unsigned t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
}

/* ---- the tolerance model ------------------------------------------------------------ */

typedef enum { TM_FP32 = 0, TM_16BIT = 1, TM_INT8 = 2 } tm_kind;

typedef struct tol_model {
    tm_kind kind;
    double u16; /* 16-bit: relative unit roundoff of the form */
    char dtype[32];
    char text[256];
} tol_model;

static int dtype_is(const char *d, const char *const *names)
{
    for (; *names; names++)
        if (strcasecmp(d, *names) == 0)
            return 1;
    return 0;
}

static int tol_model_for(const edgert_candidate *k, tol_model *tm, char *err, size_t err_len)
{
    static const char *const fp32[] = {"fp32", "f32", "float32", "float", NULL};
    static const char *const bf16[] = {"bf16", "bfloat16", NULL};
    static const char *const fp16[] = {"fp16", "f16", "float16", "half", NULL};
    static const char *const int16[] = {"int16", "i16", "s16", NULL};
    static const char *const int8[] = {"int8", "i8", "s8", NULL};
    const char *d = k->effective_activation_dtype ? k->effective_activation_dtype
                                                  : k->layout.activation_dtype;
    if (!d)
        d = "";
    memset(tm, 0, sizeof *tm);
    snprintf(tm->dtype, sizeof tm->dtype, "%s", *d ? d : "?");
    int bits = k->layout.activation_bits;
    if (dtype_is(d, fp32) || (!*d && bits == 32)) {
        tm->kind = TM_FP32;
    } else if (dtype_is(d, bf16) || dtype_is(d, int16) || (!*d && bits == 16)) {
        tm->kind = TM_16BIT;
        tm->u16 = 1.0 / 256.0; /* 2^-8: bf16 has 8 significant bits */
    } else if (dtype_is(d, fp16)) {
        tm->kind = TM_16BIT;
        tm->u16 = 1.0 / 2048.0; /* 2^-11 */
    } else if (dtype_is(d, int8) || (!*d && bits == 8)) {
        tm->kind = TM_INT8;
    } else {
        edgert_errf(
            err, err_len,
            "%s: cannot derive a correctness tolerance for activation dtype '%s' (%d bits): "
            "verify knows fp32, bf16, fp16, int16 and int8",
            k->name, d, bits);
        return -1;
    }
    switch (tm->kind) {
    case TM_FP32:
        snprintf(tm->text, sizeof tm->text,
                 "%s activations: |y-y_ref| <= (K+2)u(Z+S) + 4u(Z+S), u=2^-24, "
                 "S=sum|x w|, Z=sum|x||s|(q+z)",
                 tm->dtype);
        break;
    case TM_16BIT:
        snprintf(tm->text, sizeof tm->text,
                 "%s activations (16-bit): per element |dx| <= 2^-%d|x| + 2^-13 max_group|x| "
                 "+ 2^-16 max_token|x|; "
                 "|y-y_ref| <= sum|dx||w| + (K+2)u(Z_b+S_ref) + 4u(Z_b+S_b), u=2^-24",
                 tm->dtype, tm->u16 == 1.0 / 2048.0 ? 11 : 8);
        break;
    case TM_INT8:
        snprintf(tm->text, sizeof tm->text,
                 "%s activations, emulated (reference on s*round(x/s), s=max|x|/127 per token): "
                 "|y-y_ref| <= sum_ties s|w| + (K+2)u(Z_b+S_ref) + 4u(Z_b+S_b), u=2^-24",
                 tm->dtype);
        break;
    }
    return 0;
}

/* ---- one verify run ------------------------------------------------------------------- */

typedef struct vrun {
    edgert_ctx *ctx;
    const cli *c;
    unsigned threads;
    int progress; /* stderr is a terminal */
    const char *name;
    const edgert_candidate *cand;
    edgert_backend *b;   /* under test */
    edgert_backend *ref; /* the oracle; == b when verifying the reference itself */
    int self;            /* b is the reference */
    tol_model tm;
    uint32_t group;
    int symmetric;
    verify_result *r;
} vrun;

static void progress(const vrun *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress(const vrun *v, const char *fmt, ...)
{
    if (!v->progress)
        return;
    char line[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\r\033[Kverify %s: %s", v->name, line);
    fflush(stderr);
}

static void progress_done(const vrun *v)
{
    if (v->progress) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
}

static edgert_status run_gemm(edgert_backend *b, const edgert_packed *p, uint32_t m, const float *x,
                              size_t ldx, float *y, size_t ldy, char *err, size_t err_len)
{
    edgert_gemm_args a = {.struct_size = sizeof a, .m = m, .x = x, .ldx = ldx, .y = y, .ldy = ldy};
    return edgert_gemm(b, p, &a, err, err_len);
}

/* ---- correctness ------------------------------------------------------------------------ */

/* Canonical weights of one (n, k) case with what the tolerance needs. */
typedef struct case_w {
    uint32_t n, k;
    edgert_qtensor qt;
    double *wd; /* [n][k] s (q - z), exact in double */
    double *wz; /* [n][k] |s| (q + z) */
    char name[64];
} case_w;

static void case_w_free(case_w *w)
{
    edgert_qtensor_free(&w->qt);
    free(w->wd);
    free(w->wz);
    memset(w, 0, sizeof *w);
}

static edgert_status case_w_make(const vrun *v, uint32_t n, uint32_t k, uint64_t seed, case_w *w,
                                 char *err, size_t err_len)
{
    memset(w, 0, sizeof *w);
    w->n = n;
    w->k = k;
    size_t nk = (size_t)n * k;
    float *dense = malloc(nk * sizeof *dense);
    w->wd = malloc(nk * sizeof *w->wd);
    w->wz = malloc(nk * sizeof *w->wz);
    if (!dense || !w->wd || !w->wz) {
        free(dense);
        case_w_free(w);
        edgert_errf(err, err_len, "out of memory for a %ux%u case", n, k);
        return EDGERT_E_NOMEM;
    }
    gen_dense(v->ctx, dense, n, k, seed, WEIGHT_STD);
    edgert_status st = edgert_quantize_rtn(dense, n, k, v->group, v->symmetric, &w->qt);
    free(dense);
    if (st != EDGERT_OK) {
        case_w_free(w);
        edgert_errf(err, err_len, "quantizing a %ux%u case: %s", n, k, edgert_status_name(st));
        return st;
    }
    snprintf(w->name, sizeof w->name, "verify[n=%u k=%u]", n, k);
    w->qt.view.name = w->name;
    const edgert_qweights *q = &w->qt.view;
    size_t groups = (k + v->group - 1) / v->group;
    for (uint32_t r = 0; r < n; r++)
        for (uint32_t c = 0; c < k; c++) {
            size_t g = (size_t)r * groups + c / v->group;
            double s = (double)q->scales[g];
            int z = q->zeros ? q->zeros[g] : 8;
            int code = (int)edgert_qcode(q, r, c);
            w->wd[(size_t)r * k + c] = s * (double)(code - z);
            w->wz[(size_t)r * k + c] = fabs(s) * (double)(code + z);
        }
    return EDGERT_OK;
}

/* The worst output of one W row (over all tokens). */
typedef struct row_worst {
    double ratio, err, tol, got, want;
    uint32_t i;
    double ref_ratio, ref_err, ref_tol, ref_got, ref_want;
    uint32_t ref_i;
} row_worst;

typedef struct eval_job {
    const case_w *w;
    const tol_model *tm;
    int self;
    uint32_t m;
    size_t ldx, ldy;
    const float *xr;   /* what the reference ran on, [m][ldx] */
    const double *dx;  /* [m][k] absolute part of |x_B - x_R| per element (16-bit: the
                        * fixed-point terms; int8: s at near-ties); NULL for fp32 */
    const float *yb, *yr;
    row_worst *rw;     /* [n] */
} eval_job;

static double ratio_of(double e, double tol)
{
    if (isnan(e))
        return INFINITY;
    if (e == 0.0)
        return 0.0;
    if (tol <= 0.0)
        return INFINITY;
    return e / tol;
}

static void eval_rows(void *arg, size_t begin, size_t end)
{
    const eval_job *j = arg;
    const uint32_t k = j->w->k;
    const double gam = ((double)k + 2.0) * U_ACC;
    for (size_t r = begin; r < end; r++) {
        const double *wr = j->w->wd + r * k, *zr = j->w->wz + r * k;
        row_worst best = {.ratio = -1.0, .ref_ratio = -1.0};
        for (uint32_t i = 0; i < j->m; i++) {
            const float *x = j->xr + (size_t)i * j->ldx;
            double y = 0, S = 0, Z = 0, A = 0, ZA = 0;
            for (uint32_t c = 0; c < k; c++) {
                double xv = (double)x[c];
                double p = xv * wr[c];
                y += p;
                S += fabs(p);
                Z += fabs(xv) * zr[c];
            }
            if (j->dx) {
                /* A = Σ (u16 |x| + dx) |w|; ZA the same for the folded terms */
                const double *d = j->dx + (size_t)i * k;
                for (uint32_t c = 0; c < k; c++) {
                    A += d[c] * fabs(wr[c]);
                    ZA += d[c] * zr[c];
                }
                A += j->tm->u16 * S;
                ZA += j->tm->u16 * Z;
            }
            double SB = S + A, ZB = Z + ZA;
            double yr = (double)j->yr[(size_t)i * j->ldy + r];
            double yb = (double)j->yb[(size_t)i * j->ldy + r];
            /* the oracle against the double loop */
            double ref_tol = gam * S, ref_err = fabs(yr - y);
            double rr = isfinite(yr) ? ratio_of(ref_err, ref_tol) : INFINITY;
            if (rr > best.ref_ratio) {
                best.ref_ratio = rr;
                best.ref_err = isfinite(yr) ? ref_err : INFINITY;
                best.ref_tol = ref_tol;
                best.ref_got = yr;
                best.ref_want = y;
                best.ref_i = i;
            }
            double tol, e, want;
            if (j->self) {
                tol = ref_tol;
                e = ref_err;
                want = y;
            } else {
                tol = A + gam * (ZB + S) + 4.0 * U_ACC * (ZB + SB);
                e = fabs(yb - yr);
                want = yr;
            }
            double ratio = isfinite(yb) ? ratio_of(e, tol) : INFINITY;
            if (ratio > best.ratio) {
                best.ratio = ratio;
                best.err = isfinite(yb) ? e : INFINITY;
                best.tol = tol;
                best.got = yb;
                best.want = want;
                best.i = i;
            }
        }
        j->rw[r] = best;
    }
}

/* Activations of one case; fills x (what B gets) and xr (what R gets). */
static void case_x(const vrun *v, uint32_t m, uint32_t k, size_t ldx, unsigned variety,
                   uint64_t seed, float *x, float *xr, double *dx)
{
    float *tmp = malloc((size_t)m * k * sizeof *tmp);
    if (!tmp) { /* fall back to a simple deterministic pattern */
        for (size_t i = 0; i < (size_t)m * ldx; i++)
            x[i] = (float)((int)(gen_mix64(seed + i) % 2001u) - 1000) * 1e-3f;
    } else {
        if (variety == 1) {
            for (size_t i = 0; i < (size_t)m * k; i++)
                tmp[i] = (float)((double)(gen_mix64(seed ^ (i * 0x9E37u)) >> 11) * 0x1p-52 - 1.0);
        } else {
            gen_activations(tmp, m, k, seed);
            if (variety == 2)
                for (size_t i = 0; i < (size_t)m * k; i++)
                    tmp[i] *= 0x1p-10f;
            if (variety == 3)
                memset(tmp + (size_t)(m / 2) * k, 0, k * sizeof *tmp); /* a padding token */
        }
        for (uint32_t i = 0; i < m; i++)
            memcpy(x + (size_t)i * ldx, tmp + (size_t)i * k, k * sizeof *x);
        free(tmp);
    }
    for (uint32_t i = 0; i < m; i++) {
        float *row = x + (size_t)i * ldx;
        for (size_t c = k; c < ldx; c++)
            row[c] = NAN; /* padding: a kernel reading it poisons its output */
        double mx = 0;
        for (uint32_t c = 0; c < k; c++)
            if (fabs((double)row[c]) > mx)
                mx = fabs((double)row[c]);
        float *rr = xr + (size_t)i * ldx;
        if (v->tm.kind == TM_16BIT) {
            /* fixed-point terms: 2^-13 max of the element's group + 2^-16 max of the token */
            double *d = dx + (size_t)i * k;
            for (uint32_t g0 = 0; g0 < k; g0 += v->group) {
                uint32_t g1 = g0 + v->group < k ? g0 + v->group : k;
                double gm = 0;
                for (uint32_t c = g0; c < g1; c++)
                    if (fabs((double)row[c]) > gm)
                        gm = fabs((double)row[c]);
                for (uint32_t c = g0; c < g1; c++)
                    d[c] = FIX_GROUP * gm + FIX_TOKEN * mx;
            }
        }
        if (v->tm.kind != TM_INT8) {
            memcpy(rr, row, ldx * sizeof *rr);
            continue;
        }
        /* int8 per token: s = max|x| / 127 in fp32 (what a kernel computes),
         * x^ = s * round(x / s); the reference gets fp32(x^). */
        float s = (float)mx / 127.0f;
        double *t = dx + (size_t)i * k;
        for (uint32_t c = 0; c < k; c++) {
            t[c] = 0.0;
            if (s == 0.0f) {
                rr[c] = 0.0f;
                continue;
            }
            double q = (double)row[c] / (double)s;
            double qr = round(q); /* half away from zero */
            if (qr > 127.0)
                qr = 127.0;
            if (qr < -127.0)
                qr = -127.0;
            double frac = fabs(q - trunc(q));
            if (fabs(frac - 0.5) <= 0x1p-20 * fabs(q) + 0x1p-20)
                t[c] = (double)s; /* a near-tie: either neighbouring code is right */
            rr[c] = (float)((double)s * qr);
        }
        for (size_t c = k; c < ldx; c++)
            rr[c] = NAN;
    }
}

static void record_failure(verify_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void record_failure(verify_result *r, const char *fmt, ...)
{
    r->failed_cases++;
    r->correct = 0;
    if (r->first_failure[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->first_failure, sizeof r->first_failure, fmt, ap);
    va_end(ap);
}

/* Does `msg` contain the decimal number `v` as a whole token? */
static int names_number(const char *msg, unsigned v)
{
    char num[16];
    snprintf(num, sizeof num, "%u", v);
    size_t len = strlen(num);
    for (const char *p = msg; (p = strstr(p, num)) != NULL; p++) {
        int before = p > msg && isdigit((unsigned char)p[-1]);
        int after = isdigit((unsigned char)p[len]);
        if (!before && !after)
            return 1;
    }
    return 0;
}

static int keep_m(uint32_t m, uint32_t n, uint32_t k)
{
    /* M = 512 only on small N and K: the reference is plain C */
    return m != 512 || (n <= 129 && k <= 512);
}

static edgert_status correctness(vrun *v, char *err, size_t err_len)
{
    static const uint32_t Ms[] = {1, 2, 3, 16, 17, 64, 512};
    static const uint32_t Ns[] = {1, 7, 33, 129, 257, 1001};
    const uint32_t g = v->group;
    uint32_t Ks[5];
    size_t nk = 0;
    Ks[nk++] = g;
    Ks[nk++] = 2 * g;
    uint32_t big = g * (2048 / g > 2 ? 2048 / g : 3);
    Ks[nk++] = big;
    static const uint32_t bad[] = {200, 333};
    for (size_t i = 0; i < 2; i++)
        Ks[nk++] = bad[i] % g ? bad[i] : bad[i] + 1;

    verify_result *r = v->r;
    int total = 0, done = 0;
    for (size_t ki = 0; ki < nk; ki++)
        for (size_t ni = 0; ni < sizeof Ns / sizeof Ns[0]; ni++)
            for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++)
                total += keep_m(Ms[mi], Ns[ni], Ks[ki]);

    edgert_status rc = EDGERT_OK;
    unsigned case_no = 0;
    for (size_t ki = 0; ki < nk && rc == EDGERT_OK; ki++) {
        const uint32_t k = Ks[ki];
        for (size_t ni = 0; ni < sizeof Ns / sizeof Ns[0] && rc == EDGERT_OK; ni++) {
            const uint32_t n = Ns[ni];
            case_w w;
            rc = case_w_make(v, n, k, seed_of(v->c->seed, 0xC0DE, n, k), &w, err, err_len);
            if (rc != EDGERT_OK)
                break;
            edgert_packed *pb = NULL, *pr = NULL;
            char perr[1024] = "";
            edgert_status st = edgert_pack(v->b, &w.qt.view, &pb, perr, sizeof perr);
            int mcount = 0;
            for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++)
                mcount += keep_m(Ms[mi], n, k);
            if (st != EDGERT_OK) {
                r->cases++;
                done += mcount;
                if (k % g == 0)
                    record_failure(r, "pack refused n=%u k=%u, a shape of its own layout (group %u): "
                                   "%s: %s", n, k, g, edgert_status_name(st), perr);
                else if (st != EDGERT_E_UNSUPPORTED && st != EDGERT_E_USAGE)
                    record_failure(r, "pack of n=%u k=%u (k %% %u != 0) failed with %s instead of a "
                                   "clean E_UNSUPPORTED/E_USAGE refusal: %s", n, k, g,
                                   edgert_status_name(st), perr);
                else if (!perr[0] || !names_number(perr, k))
                    record_failure(r, "pack refused n=%u k=%u (k %% %u != 0) with %s but the "
                                   "message does not name k=%u: '%s'", n, k, g,
                                   edgert_status_name(st), k, perr);
                else
                    r->refused_cases++;
                case_w_free(&w);
                continue;
            }
            if (!v->self) {
                st = edgert_pack(v->ref, &w.qt.view, &pr, perr, sizeof perr);
                if (st != EDGERT_OK) {
                    edgert_errf(err, err_len,
                                "the reference backend could not pack n=%u k=%u: %s", n, k,
                                perr);
                    rc = st;
                    edgert_packed_free(pb);
                    case_w_free(&w);
                    break;
                }
            } else {
                pr = pb;
            }
            for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0] && rc == EDGERT_OK; mi++) {
                const uint32_t m = Ms[mi];
                if (!keep_m(m, n, k))
                    continue;
                unsigned variety = case_no % 4;
                size_t ldx = k + (case_no % 2 ? 3u : 0u), ldy = (size_t)n + Y_PAD;
                uint64_t xseed = seed_of(v->c->seed, 0xAC7, case_no, (uint64_t)m << 32 | n);
                case_no++;
                done++;
                progress(v, "correctness %d/%d (m=%u n=%u k=%u)", done, total, m, n, k);
                float *x = malloc((size_t)m * ldx * sizeof *x);
                float *xr = malloc((size_t)m * ldx * sizeof *xr);
                double *dx = v->tm.kind != TM_FP32 ? calloc((size_t)m * k, sizeof *dx) : NULL;
                float *yb = malloc((size_t)m * ldy * sizeof *yb);
                float *yr = v->self ? yb : malloc((size_t)m * ldy * sizeof *yr);
                row_worst *rw = malloc((size_t)n * sizeof *rw);
                if (!x || !xr || (v->tm.kind != TM_FP32 && !dx) || !yb || !yr || !rw) {
                    edgert_errf(err, err_len, "out of memory for case m=%u n=%u k=%u", m, n, k);
                    rc = EDGERT_E_NOMEM;
                    goto next;
                }
                case_x(v, m, k, ldx, variety, xseed, x, xr, dx);
                for (size_t i = 0; i < (size_t)m * ldy; i++)
                    yb[i] = Y_SENTINEL;
                if (!v->self)
                    for (size_t i = 0; i < (size_t)m * ldy; i++)
                        yr[i] = Y_SENTINEL;
                r->cases++;
                /* B gets x; the reference gets what models B's arithmetic (x, or x^ for
                 * int8); verifying the reference itself, the two are the same (fp32) */
                st = run_gemm(v->b, pb, m, v->self ? xr : x, ldx, yb, ldy, perr, sizeof perr);
                if (st != EDGERT_OK) {
                    record_failure(r, "gemm m=%u n=%u k=%u failed: %s: %s", m, n, k,
                                   edgert_status_name(st), perr);
                    goto next;
                }
                if (!v->self) {
                    st = run_gemm(v->ref, pr, m, xr, ldx, yr, ldy, perr, sizeof perr);
                    if (st != EDGERT_OK) {
                        edgert_errf(err, err_len,
                                    "the reference backend failed m=%u n=%u k=%u: %s", m, n, k,
                                    perr);
                        rc = st;
                        goto next;
                    }
                }
                /* padding of y untouched? */
                for (uint32_t i = 0; i < m; i++)
                    for (size_t c = n; c < ldy; c++)
                        if (memcmp(&yb[(size_t)i * ldy + c], &(float){Y_SENTINEL}, sizeof(float))) {
                            record_failure(r, "gemm m=%u n=%u k=%u wrote y[%u][%zu], past n "
                                           "(ldy %zu)", m, n, k, i, c, ldy);
                            goto next;
                        }
                {
                    eval_job j = {&w, &v->tm, v->self, m, ldx, ldy, xr, dx, yb, yr, rw};
                    par_for(v->threads, n, 16, eval_rows, &j);
                }
                {
                    size_t wr = 0, wref = 0;
                    for (size_t q = 1; q < n; q++) {
                        if (rw[q].ratio > rw[wr].ratio)
                            wr = q;
                        if (rw[q].ref_ratio > rw[wref].ref_ratio)
                            wref = q;
                    }
                    for (size_t q = 0; q < n; q++)
                        if (!(rw[q].err <= r->max_abs_err))
                            r->max_abs_err = rw[q].err;
                    if (!(rw[wr].ratio <= r->worst_ratio)) {
                        r->worst_ratio = rw[wr].ratio;
                        snprintf(r->worst_case, sizeof r->worst_case,
                                 "m=%u n=%u k=%u%s: y[%u][%zu] = %.9g, %s %.9g, |err| %.3g, "
                                 "tolerance %.3g", m, n, k, ldx > k ? " (ldx > k)" : "",
                                 rw[wr].i, wr, rw[wr].got, v->self ? "exact" : "reference",
                                 rw[wr].want, rw[wr].err, rw[wr].tol);
                    }
                    const row_worst *b = &rw[wr], *o = &rw[wref];
                    if (!v->self && o->ref_ratio > 1.0)
                        record_failure(r, "m=%u n=%u k=%u: the REFERENCE disagrees with the double "
                                       "loop: y[%u][%zu] = %.9g, exact %.9g (|err| %.3g > %.3g); "
                                       "the oracle is broken", m, n, k, o->ref_i, wref,
                                       o->ref_got, o->ref_want, o->ref_err, o->ref_tol);
                    else if (b->ratio > 1.0)
                        record_failure(r, "m=%u n=%u k=%u%s: y[%u][%zu] = %.9g, %s %.9g (|err| "
                                       "%.3g > tolerance %.3g, ratio %.3g)", m, n, k,
                                       ldx > k ? " (ldx > k)" : "", b->i, wr, b->got,
                                       v->self ? "exact (double loop)" : "reference", b->want,
                                       b->err, b->tol, b->ratio);
                }
            next:
                free(x);
                free(xr);
                free(dx);
                if (yr != yb)
                    free(yr);
                free(yb);
                free(rw);
            }
            if (pr != pb)
                edgert_packed_free(pr);
            edgert_packed_free(pb);
            case_w_free(&w);
        }
    }
    return rc;
}

/* ---- fidelity ------------------------------------------------------------------------- */

typedef struct dense_job {
    const float *w; /* [n][k] */
    const float *x; /* [m][k] */
    uint32_t m, n, k;
    float *yt;      /* [n][m]: transposed, so each W row writes one contiguous run */
} dense_job;

/* y[t][r] = Σ_k x[t][k] w[r][k], products and sums in double (a float
 * product is exact in double). Four tokens per pass over a W row, four
 * partial sums each: short dependency chains, vectorizable lanes. */
static void dense_rows(void *arg, size_t begin, size_t end)
{
    const dense_job *j = arg;
    const uint32_t k = j->k;
    for (size_t r = begin; r < end; r++) {
        const float *w = j->w + r * k;
        uint32_t t = 0;
        for (; t + 4 <= j->m; t += 4) {
            const float *x0 = j->x + (size_t)t * k, *x1 = x0 + k, *x2 = x1 + k, *x3 = x2 + k;
            double a0[4] = {0}, a1[4] = {0}, a2[4] = {0}, a3[4] = {0};
            uint32_t c = 0;
            for (; c + 4 <= k; c += 4)
                for (unsigned l = 0; l < 4; l++) {
                    double wv = (double)w[c + l];
                    a0[l] += wv * (double)x0[c + l];
                    a1[l] += wv * (double)x1[c + l];
                    a2[l] += wv * (double)x2[c + l];
                    a3[l] += wv * (double)x3[c + l];
                }
            double s0 = (a0[0] + a0[1]) + (a0[2] + a0[3]);
            double s1 = (a1[0] + a1[1]) + (a1[2] + a1[3]);
            double s2 = (a2[0] + a2[1]) + (a2[2] + a2[3]);
            double s3 = (a3[0] + a3[1]) + (a3[2] + a3[3]);
            for (; c < k; c++) {
                double wv = (double)w[c];
                s0 += wv * (double)x0[c];
                s1 += wv * (double)x1[c];
                s2 += wv * (double)x2[c];
                s3 += wv * (double)x3[c];
            }
            float *yr = j->yt + r * j->m + t;
            yr[0] = (float)s0;
            yr[1] = (float)s1;
            yr[2] = (float)s2;
            yr[3] = (float)s3;
        }
        for (; t < j->m; t++) {
            const float *x0 = j->x + (size_t)t * k;
            double a[4] = {0};
            uint32_t c = 0;
            for (; c + 4 <= k; c += 4)
                for (unsigned l = 0; l < 4; l++)
                    a[l] += (double)w[c + l] * (double)x0[c + l];
            double s = (a[0] + a[1]) + (a[2] + a[3]);
            for (; c < k; c++)
                s += (double)w[c] * (double)x0[c];
            j->yt[r * j->m + t] = (float)s;
        }
    }
}

/* One fidelity projection: the shape's SQNR and, for the head, top-1 / KL. */
typedef struct fid_shape {
    const char *name;
    uint32_t n, k;
    int head;
} fid_shape;

/*
 * Head weights. The head's logits are y_t = x_t W^T with W iid of std σ_w,
 * so across the vocabulary they are normal with std σ_w ||x_t||. With the
 * activation generator (RMS ~1 per channel plus max(2, k/256) outlier
 * channels 30x larger, ||x_t|| ~ 95 at k = 2048) the projections' σ_w = 0.02
 * gives logits of std ~1.9 — and measured on this generator, the dense
 * softmax over N = 131072 is then nearly FLAT: mean entropy 10.1 of
 * log N = 11.8 nats, 0.8% on the top token (N = 16384: 7.9 of 9.7 nats, 2%).
 * A language model's next-token distribution is far sharper (a few nats of
 * entropy, tens of percent on the top token), because its top logits stand
 * out of the bulk. Normal logits reach that only with a std near
 * sqrt(2 ln N) ~ 4.4-4.8: at std 5 the dense softmax has entropy ~2.8-3.3
 * nats and puts ~35% on its top token for N = 16384..131072 (neither one-hot
 * nor flat). So the head's weights are scaled to give logits of std
 * HEAD_LOGIT_STD for a token of the generator's expected norm:
 * E||x||^2 = (k - k_out) + 900 k_out with k_out = max(2, k/256) outlier
 * channels (edgert.h), σ_w = HEAD_LOGIT_STD / sqrt(E||x||^2) (0.052 at
 * k = 2048) — a constant of k, whatever the seed or --tokens. Heavy tails
 * make ||x_t|| vary, so the measured mean logit std is somewhat below 5.
 * Scaling W scales the quantization error with it, so SQNR and top-1
 * agreement do not depend on this choice; KL does (about quadratically), and
 * this is the spread at which it resembles what a real head sees. The output
 * reports the dense logit std, top-1 probability and entropy measured.
 */
static float head_std(uint32_t k)
{
    double k_out = k / 256u > 2u ? (double)(k / 256u) : 2.0;
    if (k_out > k)
        k_out = k;
    return (float)(HEAD_LOGIT_STD / sqrt((double)k - k_out + 900.0 * k_out));
}

static edgert_status fidelity_one(vrun *v, const fid_shape *s, uint32_t rows, uint32_t tokens,
                                  size_t index, char *err, size_t err_len)
{
    verify_result *r = v->r;
    const uint32_t n = s->n, k = s->k;
    const float std = s->head ? head_std(k) : WEIGHT_STD;
    const uint64_t wseed = seed_of(v->c->seed, 0xF1DE, name_hash(s->name), (uint64_t)n << 32 | k);
    const uint64_t xseed = seed_of(v->c->seed, 0xAC71, name_hash(s->name), k);
    size_t nk = (size_t)n * k;
    edgert_status rc = EDGERT_OK;
    float *w = NULL, *x = NULL, *yd = NULL, *yb = NULL, *yr = NULL;
    edgert_packed *p = NULL, *pr = NULL;
    edgert_qtensor qt = {0};
    char perr[1024] = "";

    if (nk / k != n || nk > SIZE_MAX / sizeof(float)) {
        edgert_errf(err, err_len, "shape %s (%ux%u) is too large", s->name, n, k);
        return EDGERT_E_NOMEM;
    }
    w = malloc(nk * sizeof *w);
    x = malloc((size_t)rows * k * sizeof *x);
    yd = malloc((size_t)rows * n * sizeof *yd);
    yb = malloc((size_t)rows * n * sizeof *yb);
    if (!w || !x || !yd || !yb) {
        edgert_errf(err, err_len,
                    "out of memory for shape %s (n=%u k=%u: %.2f GiB of fp32 weights)", s->name,
                    n, k, (double)nk * 4.0 / 1073741824.0);
        rc = EDGERT_E_NOMEM;
        goto out;
    }
    progress(v, "fidelity %s (n=%u k=%u): dense fp32 weights", s->name, n, k);
    gen_activations(x, rows, k, xseed);
    gen_dense(v->ctx, w, n, k, wseed, std);
    progress(v, "fidelity %s (n=%u k=%u): dense reference in double", s->name, n, k);
    {
        dense_job j = {w, x, rows, n, k, yb}; /* yb is free until the backend runs */
        par_for(v->threads, n, 64, dense_rows, &j);
        for (uint32_t r0 = 0; r0 < n; r0 += 64) /* yd[t][r] = yt[r][t], in cache-sized tiles */
            for (uint32_t t = 0; t < rows; t++)
                for (uint32_t q = r0; q < n && q < r0 + 64; q++)
                    yd[(size_t)t * n + q] = yb[(size_t)q * rows + t];
    }
    free(w);
    w = NULL;
    progress(v, "fidelity %s (n=%u k=%u): quantize and pack", s->name, n, k);
    rc = gen_qtensor(v->ctx, n, k, v->group, v->symmetric, wseed, std, &qt);
    if (rc != EDGERT_OK) {
        edgert_errf(err, err_len, "quantizing shape %s (n=%u k=%u): %s", s->name, n, k,
                    edgert_status_name(rc));
        goto out;
    }
    qt.view.name = s->name;
    rc = edgert_pack(v->b, &qt.view, &p, perr, sizeof perr);
    /* The head is also run by the reference on the same quantized weights, so
     * agreement with the reference isolates the kernel's own error. */
    if (rc == EDGERT_OK && s->head && !v->self) {
        yr = malloc((size_t)rows * n * sizeof *yr);
        if (!yr || edgert_pack(v->ref, &qt.view, &pr, perr, sizeof perr) != EDGERT_OK ||
            run_gemm(v->ref, pr, rows, x, k, yr, n, perr, sizeof perr) != EDGERT_OK) {
            free(yr);
            yr = NULL; /* reported as unknown (NaN), never as agreement */
        }
    }
    edgert_qtensor_free(&qt);
    if (rc != EDGERT_OK) {
        edgert_errf(err, err_len, "pack of shape %s (n=%u k=%u) failed: %s", s->name, n, k,
                    perr);
        goto out;
    }
    progress(v, "fidelity %s (n=%u k=%u): backend gemm, %u tokens", s->name, n, k, rows);
    rc = run_gemm(v->b, p, rows, x, k, yb, n, perr, sizeof perr);
    if (rc != EDGERT_OK) {
        edgert_errf(err, err_len, "gemm on shape %s (m=%u n=%u k=%u) failed: %s", s->name, rows,
                    n, k, perr);
        goto out;
    }
    if (index < WL_MAX_SHAPES) {
        verify_shape *vs = &r->shapes[index];
        snprintf(vs->name, sizeof vs->name, "%s", s->name);
        vs->m = SQNR_TOKENS;
        vs->n = n;
        vs->k = k;
        vs->sqnr_db = metric_sqnr_db(yd, yb, (size_t)SQNR_TOKENS * n);
        if (index + 1 > r->nshapes)
            r->nshapes = index + 1;
    }
    if (s->head) {
        size_t agree = 0;
        double kl = 0, lstd = 0, ptop = 0, ent = 0;
        for (uint32_t t = 0; t < tokens; t++) {
            const float *d = yd + (size_t)t * n, *b = yb + (size_t)t * n;
            agree += metric_argmax(d, n) == metric_argmax(b, n);
            kl += metric_kl(d, b, n);
            /* the dense softmax: spread, top probability, entropy */
            double mean = 0, sq = 0, mx = -INFINITY, z = 0, ez = 0;
            for (uint32_t q = 0; q < n; q++) {
                mean += d[q];
                if (d[q] > mx)
                    mx = d[q];
            }
            mean /= n;
            for (uint32_t q = 0; q < n; q++) {
                double e = exp((double)d[q] - mx);
                sq += ((double)d[q] - mean) * ((double)d[q] - mean);
                z += e;
                ez += e * ((double)d[q] - mx);
            }
            lstd += sqrt(sq / n);
            ptop += 1.0 / z;
            ent += log(z) - ez / z;
        }
        r->head_n = n;
        r->head_k = k;
        r->tokens = tokens;
        r->top1_agreement = (double)agree / tokens;
        r->kl_mean = kl / tokens;
        r->head_weight_std = std;
        r->head_logit_std = lstd / tokens;
        r->head_dense_top1_prob = ptop / tokens;
        r->head_dense_entropy = ent / tokens;
        r->top1_vs_reference = NAN;
        if (yr) {
            size_t same = 0;
            for (uint32_t t = 0; t < tokens; t++)
                same += metric_argmax(yb + (size_t)t * n, n) == metric_argmax(yr + (size_t)t * n, n);
            r->top1_vs_reference = (double)same / tokens;
        }
    }
out:
    edgert_packed_free(p);
    edgert_packed_free(pr);
    free(yr);
    edgert_qtensor_free(&qt);
    free(w);
    free(x);
    free(yd);
    free(yb);
    return rc;
}

static edgert_status fidelity(vrun *v, const workload *wl, char *err, size_t err_len)
{
    const cli *c = v->c;
    fid_shape list[WL_MAX_SHAPES + 1];
    size_t count = 0;
    int have_head = 0;
    for (size_t i = 0; i < wl->nshapes && count < WL_MAX_SHAPES; i++) {
        const wl_shape *s = &wl->shapes[i];
        fid_shape f = {s->name, s->n, s->k, s->head && !have_head};
        if (f.head) {
            have_head = 1;
            if (c->quick && f.n > QUICK_HEAD_N)
                f.n = QUICK_HEAD_N;
        } else if (c->quick && (uint64_t)s->n * s->k > QUICK_MAX_WEIGHTS) {
            continue;
        }
        list[count++] = f;
    }
    size_t table = count;
    if (!have_head) /* a head-shaped projection outside the SQNR table */
        list[count++] = (fid_shape){"head", c->quick ? QUICK_HEAD_N : HEAD_N, HEAD_K, 1};
    uint32_t tokens = c->tokens ? c->tokens : 64;
    v->r->nshapes = 0;
    v->r->sqnr_min_db = NAN;
    for (size_t i = 0; i < count; i++) {
        uint32_t rows = list[i].head ? (tokens > SQNR_TOKENS ? tokens : SQNR_TOKENS) : SQNR_TOKENS;
        edgert_status rc = fidelity_one(v, &list[i], rows, tokens, i < table ? i : SIZE_MAX, err,
                                        err_len);
        if (rc != EDGERT_OK)
            return rc;
    }
    double mn = INFINITY;
    for (size_t i = 0; i < v->r->nshapes; i++)
        if (!(v->r->shapes[i].sqnr_db >= mn)) /* NaN propagates */
            mn = v->r->shapes[i].sqnr_db;
    v->r->sqnr_min_db = v->r->nshapes ? mn : NAN;
    return EDGERT_OK;
}

/* ---- one backend -------------------------------------------------------------------------- */

edgert_status verify_backend(edgert_ctx *ctx, const cli *c, const workload *w, const char *backend,
                             verify_result *r, char *err, size_t err_len)
{
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", backend ? backend : "");
    r->max_abs_err = 0.0;
    r->worst_ratio = 0.0;
    r->sqnr_min_db = r->top1_agreement = r->kl_mean = r->top1_vs_reference = NAN;
    if (!ctx || !c || !w || !backend) {
        edgert_errf(err, err_len, "verify_backend: bad arguments");
        return EDGERT_E_USAGE;
    }
    vrun v = {.ctx = ctx, .c = c, .name = backend, .r = r};
    v.threads = edgert_thread_count(ctx);
    v.progress = isatty(2) && !c->quiet;
    v.cand = edgert_candidate_find(ctx, backend);
    if (!v.cand) {
        edgert_errf(err, err_len, "no backend named '%s'", backend);
        return EDGERT_E_NOT_FOUND;
    }
    if (tol_model_for(v.cand, &v.tm, err, err_len) != 0)
        return EDGERT_E_UNSUPPORTED;
    snprintf(r->tolerance, sizeof r->tolerance, "%s", v.tm.text);
    v.group = v.cand->layout.group_size > 0 ? (uint32_t)v.cand->layout.group_size : 128u;
    v.symmetric = v.cand->layout.symmetric;
    v.self = strcmp(backend, VERIFY_REF) == 0;
    /* --options belong to the backend --backend names, never to the oracle */
    const char *opts = c->backend && strcmp(c->backend, backend) == 0 ? c->options : NULL;
    double t0 = now_s();
    edgert_status rc = edgert_backend_open(ctx, backend, opts, &v.b, err, err_len);
    if (rc != EDGERT_OK)
        return rc;
    snprintf(r->path, sizeof r->path, "%s",
             edgert_backend_describe(v.b) ? edgert_backend_describe(v.b) : "");
    if (v.self && opts == NULL) {
        v.ref = v.b;
    } else {
        char rerr[1024] = "";
        rc = edgert_backend_open(ctx, VERIFY_REF, NULL, &v.ref, rerr, sizeof rerr);
        if (rc != EDGERT_OK) {
            edgert_errf(err, err_len,
                        "the reference backend %s, the oracle of the correctness check, "
                        "is not usable: %s",
                        VERIFY_REF, rerr);
            edgert_backend_close(v.b);
            return rc;
        }
        v.self = 0;
    }
    if (v.self)
        snprintf(r->tolerance, sizeof r->tolerance,
                 "%s activations, the oracle itself against an independent double-precision "
                 "loop: |y-y*| <= (K+2)u S, u=2^-24, S=sum|x w|", v.tm.dtype);
    r->correct = 1;
    rc = correctness(&v, err, err_len);
    if (rc == EDGERT_OK)
        rc = fidelity(&v, w, err, err_len);
    progress_done(&v);
    r->seconds = now_s() - t0;
    if (v.ref != v.b)
        edgert_backend_close(v.ref);
    edgert_backend_close(v.b);
    if (rc != EDGERT_OK)
        r->correct = 0;
    return rc;
}

/* ---- the command ---------------------------------------------------------------------------- */

static int usable(const edgert_candidate *k)
{
    return k->eligible && k->runs_in_process && k->loaded;
}

static void why_not(const edgert_candidate *k, char *buf, size_t len)
{
    char reasons[1024];
    reasons_text(k, reasons, sizeof reasons);
    if (!k->eligible)
        snprintf(buf, len, "not eligible on this device: %s%s%s", reasons[0] ? reasons : "?",
                 k->detail && *k->detail ? " — " : "", k->detail ? k->detail : "");
    else if (!k->runs_in_process)
        snprintf(buf, len, "does not run in process (processor %s): nothing to verify here",
                 k->processor ? k->processor : "?");
    else
        snprintf(buf, len, "not loaded%s%s", k->detail && *k->detail ? ": " : "",
                 k->detail ? k->detail : "");
}

static void print_result(const verify_result *r, const char *error)
{
    printf("%s%s%s%s: %s\n", r->name, r->path[0] ? " (" : "", r->path, r->path[0] ? ")" : "",
           error ? "ERROR" : r->correct ? "PASS" : "FAIL");
    if (error) {
        printf("  error        %s\n", error);
        return;
    }
    printf("  correctness  %d cases (%d refused cleanly), %d failed; max |err| %.3g, worst "
           "err/tolerance %.3g\n",
           r->cases, r->refused_cases, r->failed_cases, r->max_abs_err, r->worst_ratio);
    if (r->first_failure[0])
        printf("  first fail   %s\n", r->first_failure);
    else if (r->worst_case[0])
        printf("  worst        %s\n", r->worst_case);
    printf("  tolerance    %s\n", r->tolerance);
    printf("  SQNR (dB)    vs dense fp32 of the unquantized weights, %u tokens:", SQNR_TOKENS);
    for (size_t i = 0; i < r->nshapes; i++)
        printf(" %s %.2f%s", r->shapes[i].name, r->shapes[i].sqnr_db,
               i + 1 < r->nshapes ? "," : ";");
    printf(" min %.2f\n", r->sqnr_min_db);
    printf("  head         k=%u n=%u, %u tokens: top-1 agreement %.4f, mean KL %.4g nats\n",
           r->head_k, r->head_n, r->tokens, r->top1_agreement, r->kl_mean);
    if (!isnan(r->top1_vs_reference))
        printf("               top-1 agreement with %s on the same quantized weights: %.4f\n",
               VERIFY_REF, r->top1_vs_reference);
    printf("               (weights std %.3f; dense logits: std %.2f, top-1 probability %.3f, "
           "entropy %.2f of log N = %.2f nats)\n",
           r->head_weight_std, r->head_logit_std, r->head_dense_top1_prob, r->head_dense_entropy,
           r->head_n ? log((double)r->head_n) : 0.0);
}

static void json_result(json_w *j, const verify_result *r, const char *error)
{
    json_obj(j);
    json_kstr(j, "name", r->name);
    json_kstr(j, "path", r->path);
    json_kbool(j, "correct", !error && r->correct);
    json_kstr(j, "error", error);
    json_kint(j, "cases", r->cases);
    json_kint(j, "refused_cases", r->refused_cases);
    json_kint(j, "failed_cases", r->failed_cases);
    json_knum(j, "max_abs_err", r->max_abs_err);
    json_knum(j, "worst_ratio", r->worst_ratio);
    json_kstr(j, "worst_case", r->worst_case[0] ? r->worst_case : NULL);
    json_kstr(j, "tolerance", r->tolerance);
    json_key(j, "sqnr_db");
    json_obj(j);
    for (size_t i = 0; i < r->nshapes; i++)
        json_knum(j, r->shapes[i].name, r->shapes[i].sqnr_db);
    json_knum(j, "min", r->sqnr_min_db);
    json_end_obj(j);
    json_knum(j, "top1_agreement", r->top1_agreement);
    json_knum(j, "top1_vs_reference", r->top1_vs_reference);
    json_knum(j, "kl_mean", r->kl_mean);
    json_key(j, "head");
    json_obj(j);
    json_kint(j, "n", r->head_n);
    json_kint(j, "k", r->head_k);
    json_kint(j, "tokens", r->tokens);
    json_knum(j, "weight_std", r->head_weight_std);
    json_knum(j, "dense_logit_std", r->head_logit_std);
    json_knum(j, "dense_top1_prob", r->head_dense_top1_prob);
    json_knum(j, "dense_entropy", r->head_dense_entropy);
    json_end_obj(j);
    json_kstr(j, "first_failure", r->first_failure[0] ? r->first_failure : NULL);
    json_knum(j, "seconds", r->seconds);
    json_end_obj(j);
}

int cmd_verify(const cli *c)
{
    if (c->options && !c->backend) {
        fprintf(stderr, "edgert verify: --options needs --backend (options are plugin-specific)\n");
        return EXIT_USAGE;
    }
    workload wl;
    edgert_ctx *ctx = NULL;
    int rc = open_measuring(c, "verify", "verify runs the backends on this one", &wl, &ctx);
    if (rc)
        return rc;

    size_t ncand = edgert_candidate_count(ctx), nb = 0;
    const char **names = xcalloc(ncand + 1, sizeof *names);
    verify_result *res = xcalloc(ncand + 1, sizeof *res);
    char **errors = xcalloc(ncand + 1, sizeof *errors);
    if (!names || !res || !errors) {
        fprintf(stderr, "edgert verify: out of memory\n");
        rc = EXIT_FAIL;
        goto out;
    }
    const edgert_candidate *ref = edgert_candidate_find(ctx, VERIFY_REF);
    char why[1400];
    if (c->backend) {
        const edgert_candidate *k = edgert_candidate_find(ctx, c->backend);
        if (!k) {
            fprintf(stderr, "edgert verify: no backend named '%s' (see 'edgert list')\n", c->backend);
            rc = EXIT_NONE;
            goto out;
        }
        if (!usable(k)) {
            why_not(k, why, sizeof why);
            fprintf(stderr, "edgert verify: backend '%s' %s\n", k->name, why);
            rc = EXIT_NONE;
            goto out;
        }
        names[nb++] = k->name;
    } else {
        for (size_t i = 0; i < ncand; i++) {
            const edgert_candidate *k = edgert_candidate_at(ctx, i);
            if (usable(k) && k != ref)
                names[nb++] = k->name;
        }
    }
    if (!ref || !usable(ref)) {
        if (ref)
            why_not(ref, why, sizeof why);
        fprintf(stderr, "edgert verify: the reference backend %s, the oracle of the correctness "
                        "check, is %s\n", VERIFY_REF, ref ? why : "not installed (no manifest found)");
        rc = EXIT_NONE;
        goto out;
    }
    /* the reference's own fidelity, so kernel and quantization error can be told apart */
    int has_ref = 0;
    for (size_t i = 0; i < nb; i++)
        has_ref |= strcmp(names[i], VERIFY_REF) == 0;
    if (!has_ref)
        names[nb++] = ref->name;

    double t0 = now_s();
    int any_fail = 0;
    for (size_t i = 0; i < nb; i++) {
        char err[2048] = "";
        edgert_status st = verify_backend(ctx, c, &wl, names[i], &res[i], err, sizeof err);
        if (st != EDGERT_OK) {
            errors[i] = strdup(err[0] ? err : edgert_status_name(st));
            if (!c->json)
                fprintf(stderr, "edgert verify: %s: %s\n", names[i], errors[i] ? errors[i] : "");
            any_fail = 1;
        } else if (!res[i].correct) {
            any_fail = 1;
        }
    }
    double secs = now_s() - t0;

    if (c->json) {
        json_w j;
        json_init(&j, stdout);
        json_obj(&j);
        json_kint(&j, "threads", edgert_thread_count(ctx));
        json_kstr(&j, "workload", wl.name);
        json_kint(&j, "seed", (long long)c->seed);
        json_kbool(&j, "quick", c->quick);
        json_knum(&j, "seconds", secs);
        json_key(&j, "results");
        json_arr(&j);
        for (size_t i = 0; i < nb; i++)
            json_result(&j, &res[i], errors[i]);
        json_end_arr(&j);
        json_end_obj(&j);
        json_finish(&j);
    } else {
        printf("verify: workload %s%s, seed %llu, %u threads; correctness against %s, fidelity "
               "against dense fp32\n\n",
               wl.name, c->quick ? " (quick)" : "", (unsigned long long)c->seed,
               edgert_thread_count(ctx), VERIFY_REF);
        for (size_t i = 0; i < nb; i++) {
            print_result(&res[i], errors[i]);
            printf("\n");
        }
        printf("%s in %.1f s\n", any_fail ? "FAILED" : "all correct", secs);
    }
    rc = any_fail ? EXIT_FAIL : EXIT_OK;
out:
    if (errors)
        for (size_t i = 0; i < nb; i++)
            free(errors[i]);
    free(errors);
    free(names);
    free(res);
    edgert_close(ctx);
    return rc;
}
