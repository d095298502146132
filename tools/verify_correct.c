/*
 * tools/verify_correct.c — the correctness half of `edgert verify`: is a
 * backend's GEMM correct against the reference backend, within a tolerance
 * derived from its arithmetic? (verify.c runs it; verify_fidelity.c is the
 * other half.)
 *
 * ---- Correctness --------------------------------------------------------------
 * Canonical weights W[n][k] are generated (gen_dense, std 0.02)
 * and quantized by round-to-nearest in the backend's own layout (symmetric or
 * not, its group size, 128 when the manifest says 0), the scales rounded to
 * fp16 as in a GPTQ checkpoint (so a layout with fp16 scales holds them
 * exactly, and the check stays one of the kernel's arithmetic). The backend under test
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
 *   int8 activations (symmetric per token, s = max|x| / 127 in fp32,
 *     x^ = s round(x / s); or per group of the manifest's
 *     layout.activation_group_size inputs along K, the same with each
 *     group's max): EMULATED — R runs on fp32(x^) (not x), so B must
 *     match the reference run on x^ to the accumulation bound. Where x / s
 *     lies within a relative 2^-20 of a rounding tie, a kernel that computes
 *     x / s differently (x * (127 / max), a reciprocal) may pick the other
 *     code: A adds s |w_ik| for each such element. The per-group integer ->
 *     fp32 scaling steps and the rounding of x^ to fp32 for R are covered by
 *     the 4u S_B slack.
 * A case fails when any output exceeds its bound (ratio error / tolerance
 * > 1), when an output is NaN or infinite, when padding is touched, or when
 * gemm or pack fails (other than a clean refusal of K % g != 0).
 */
#define _GNU_SOURCE
#include "verify_internal.h"
#include "generate.h"
#include "formats/safetensors.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define Y_PAD 5u                       /* sentinel columns after each y row */
#define Y_SENTINEL -7777.25f

/* ---- the tolerance model (core/common/tolerance.c: first contact's check judges by it too) */

int verify_tol_model(const edgert_candidate *k, er_tol_model *tm, char *err, size_t err_len)
{
    const char *d = k->effective_activation_dtype ? k->effective_activation_dtype
                                                  : k->layout.activation_dtype;
    return er_tol_model_for(k->name, d, k->layout.activation_bits, k->activation_group_size,
                            ER_TOL_EMULATE_INT8, tm, err,
                            err_len);
}

/* ---- one case's weights ---------------------------------------------------------------- */

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
    /* Scales as every GPTQ checkpoint stores them, in fp16: exact for a
     * layout that keeps fp16 scales (amx-w4a8/1), exact in fp32 for every
     * other, so each backend gets weights it can hold without rounding. */
    for (size_t i = 0; i < (size_t)n * groups; i++)
        w->qt.scales[i] = st_f16_to_f32(st_f32_to_f16(w->qt.scales[i]));
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

/* ---- the tolerance of each output ------------------------------------------------------ */

/* The worst output of one W row (over all tokens): its err / tolerance, the
 * error, the tolerance, what was computed, what was expected, the token. */
typedef struct worst {
    double ratio, err, tol, got, want;
    uint32_t i;
} worst;

/* Per W row: the backend against the reference (or, verifying the reference
 * itself, against the double loop), and the reference against the double loop. */
typedef struct row_worst {
    worst b, ref;
} row_worst;

typedef struct eval_job {
    const case_w *w;
    const er_tol_model *tm;
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

static void keep_worst(worst *w, double ratio, double err, double tol, double got, double want,
                       uint32_t i)
{
    if (ratio > w->ratio)
        *w = (worst){ratio, err, tol, got, want, i};
}

static void eval_rows(void *arg, size_t begin, size_t end, unsigned worker)
{
    const eval_job *j = arg;
    const uint32_t k = j->w->k;
    for (size_t r = begin; r < end; r++) {
        const double *wr = j->w->wd + r * k, *zr = j->w->wz + r * k;
        row_worst best = {.b = {.ratio = -1.0}, .ref = {.ratio = -1.0}};
        for (uint32_t i = 0; i < j->m; i++) {
            er_tol_sums t;
            er_tol_sums_of(j->tm, j->xr + (size_t)i * j->ldx, j->dx ? j->dx + (size_t)i * k : NULL,
                           wr, zr, k, &t);
            double y = t.y;
            double yr = (double)j->yr[(size_t)i * j->ldy + r];
            double yb = (double)j->yb[(size_t)i * j->ldy + r];
            /* the oracle against the double loop */
            double ref_tol = er_tol_oracle(k, &t), ref_err = fabs(yr - y);
            double rr = isfinite(yr) ? ratio_of(ref_err, ref_tol) : INFINITY;
            keep_worst(&best.ref, rr, isfinite(yr) ? ref_err : INFINITY, ref_tol, yr, y, i);
            double tol, e, want;
            if (j->self) {
                tol = ref_tol;
                e = ref_err;
                want = y;
            } else {
                tol = er_tol_vs_oracle(k, &t);
                e = fabs(yb - yr);
                want = yr;
            }
            double ratio = isfinite(yb) ? ratio_of(e, tol) : INFINITY;
            keep_worst(&best.b, ratio, isfinite(yb) ? e : INFINITY, tol, yb, want, i);
        }
        j->rw[r] = best;
    }
}

/* ---- one case ------------------------------------------------------------------------- */

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
        float *row = x + (size_t)i * ldx, *rr = xr + (size_t)i * ldx;
        for (size_t c = k; c < ldx; c++)
            row[c] = rr[c] = NAN; /* padding: a kernel reading it poisons its output */
        /* what the oracle computes with, and how far B's activations may differ */
        er_tol_token(&v->tm, row, k, v->group, rr, dx ? dx + (size_t)i * k : NULL);
    }
}

static void record_failure(verify_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
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

/* Where the run is in the case list: the activations of a case derive from
 * its number, and the progress line counts cases. */
typedef struct case_count {
    int total, done;
    unsigned case_no;
} case_count;

static const uint32_t case_ms[] = {1, 2, 3, 16, 17, 64, 512};
static const uint32_t case_ns[] = {1, 7, 33, 129, 257, 1001};
#define CASE_MS (sizeof case_ms / sizeof case_ms[0])
#define CASE_NS (sizeof case_ns / sizeof case_ns[0])

/* The K of the cases: multiples of the group g (g, 2g, and 16g capped near
 * 2048) and two that are not (200 and 333, one more where g divides them). */
static size_t case_ks(uint32_t g, uint32_t ks[5])
{
    static const uint32_t bad[] = {200, 333};
    size_t nk = 0;
    ks[nk++] = g;
    ks[nk++] = 2 * g;
    ks[nk++] = g * (2048 / g > 2 ? 2048 / g : 3);
    for (size_t i = 0; i < 2; i++)
        ks[nk++] = bad[i] % g ? bad[i] : bad[i] + 1;
    return nk;
}

static int m_count(uint32_t n, uint32_t k)
{
    int count = 0;
    for (size_t mi = 0; mi < CASE_MS; mi++)
        count += keep_m(case_ms[mi], n, k);
    return count;
}

/* The backend refused to pack n x k: a failure, unless k is not a multiple of
 * the group and the refusal is clean (E_UNSUPPORTED or E_USAGE, naming k). */
static void judge_refusal(verify_result *r, uint32_t n, uint32_t k, uint32_t g, edgert_status st,
                          const char *perr)
{
    r->cases++;
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
}

/* Did the gemm write into the sentinels after column n of a y row? */
static int y_padding_touched(verify_result *r, const float *yb, uint32_t m, uint32_t n,
                             uint32_t k, size_t ldy)
{
    for (uint32_t i = 0; i < m; i++)
        for (size_t c = n; c < ldy; c++)
            if (memcmp(&yb[(size_t)i * ldy + c], &(float){Y_SENTINEL}, sizeof(float))) {
                record_failure(r, "gemm m=%u n=%u k=%u wrote y[%u][%zu], past n "
                               "(ldy %zu)", m, n, k, i, c, ldy);
                return 1;
            }
    return 0;
}

/* The verdict of one case from the worst output of each W row. */
static void judge_case(const vrun *v, uint32_t m, uint32_t n, uint32_t k, size_t ldx,
                       const row_worst *rw)
{
    verify_result *r = v->r;
    size_t wr = 0, wref = 0;
    for (size_t q = 1; q < n; q++) {
        if (rw[q].b.ratio > rw[wr].b.ratio)
            wr = q;
        if (rw[q].ref.ratio > rw[wref].ref.ratio)
            wref = q;
    }
    for (size_t q = 0; q < n; q++)
        if (!(rw[q].b.err <= r->max_abs_err))
            r->max_abs_err = rw[q].b.err;
    const worst *b = &rw[wr].b, *o = &rw[wref].ref;
    if (!(b->ratio <= r->worst_ratio)) {
        r->worst_ratio = b->ratio;
        snprintf(r->worst_case, sizeof r->worst_case,
                 "m=%u n=%u k=%u%s: y[%u][%zu] = %.9g, %s %.9g, |err| %.3g, "
                 "tolerance %.3g", m, n, k, ldx > k ? " (ldx > k)" : "",
                 b->i, wr, b->got, v->self ? "exact" : "reference",
                 b->want, b->err, b->tol);
    }
    if (!v->self && o->ratio > 1.0) {
        r->oracle_failed = 1;
        record_failure(r, "m=%u n=%u k=%u: the REFERENCE disagrees with the double "
                       "loop: y[%u][%zu] = %.9g, exact %.9g (|err| %.3g > %.3g); "
                       "the oracle is broken", m, n, k, o->i, wref,
                       o->got, o->want, o->err, o->tol);
    } else if (b->ratio > 1.0)
        record_failure(r, "m=%u n=%u k=%u%s: y[%u][%zu] = %.9g, %s %.9g (|err| "
                       "%.3g > tolerance %.3g, ratio %.3g)", m, n, k,
                       ldx > k ? " (ldx > k)" : "", b->i, wr, b->got,
                       v->self ? "exact (double loop)" : "reference", b->want,
                       b->err, b->tol, b->ratio);
}

/* One case: m tokens through the packed weights of w on the backend (pb) and
 * the reference (pr; the same when verifying the reference), then judged. */
static edgert_status run_case(const vrun *v, const case_w *w, const edgert_packed *pb,
                              const edgert_packed *pr, uint32_t m, case_count *cc, char *err,
                              size_t err_len)
{
    verify_result *r = v->r;
    const uint32_t n = w->n, k = w->k;
    unsigned variety = cc->case_no % 4;
    size_t ldx = k + (cc->case_no % 2 ? 3u : 0u), ldy = (size_t)n + Y_PAD;
    uint64_t xseed = verify_seed(v->c->seed, 0xAC7, cc->case_no, (uint64_t)m << 32 | n);
    cc->case_no++;
    cc->done++;
    verify_progress(v, "correctness %d/%d (m=%u n=%u k=%u)", cc->done, cc->total, m, n, k);
    edgert_status rc = EDGERT_OK;
    char perr[1024] = "";
    float *x = malloc((size_t)m * ldx * sizeof *x);
    float *xr = malloc((size_t)m * ldx * sizeof *xr);
    double *dx = v->tm.kind != ER_TOL_FP32 ? calloc((size_t)m * k, sizeof *dx) : NULL;
    float *yb = malloc((size_t)m * ldy * sizeof *yb);
    float *yr = v->self ? yb : malloc((size_t)m * ldy * sizeof *yr);
    row_worst *rw = malloc((size_t)n * sizeof *rw);
    if (!x || !xr || (v->tm.kind != ER_TOL_FP32 && !dx) || !yb || !yr || !rw) {
        edgert_errf(err, err_len, "out of memory for case m=%u n=%u k=%u", m, n, k);
        rc = EDGERT_E_NOMEM;
        goto out;
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
    edgert_status st = verify_gemm(v->b, pb, m, v->self ? xr : x, ldx, yb, ldy, perr, sizeof perr);
    if (st != EDGERT_OK) {
        record_failure(r, "gemm m=%u n=%u k=%u failed: %s: %s", m, n, k, edgert_status_name(st),
                       perr);
        goto out;
    }
    if (!v->self) {
        st = verify_gemm(v->ref, pr, m, xr, ldx, yr, ldy, perr, sizeof perr);
        if (st != EDGERT_OK) {
            edgert_errf(err, err_len, "the reference backend failed m=%u n=%u k=%u: %s", m, n,
                        k, perr);
            rc = st;
            goto out;
        }
    }
    if (y_padding_touched(r, yb, m, n, k, ldy))
        goto out;
    /* on the handle's pool: no backend call is running now */
    eval_job j = {w, &v->tm, v->self, m, ldx, ldy, xr, dx, yb, yr, rw};
    edgert_parallel_for(v->ctx, n, 16, eval_rows, &j);
    judge_case(v, m, n, k, ldx, rw);
out:
    free(x);
    free(xr);
    free(dx);
    if (yr != yb)
        free(yr);
    free(yb);
    free(rw);
    return rc;
}

/* The cases of one weight shape n x k: pack on both backends, then every m. */
static edgert_status run_shape(const vrun *v, uint32_t n, uint32_t k, case_count *cc, char *err,
                               size_t err_len)
{
    case_w w;
    edgert_status rc = case_w_make(v, n, k, verify_seed(v->c->seed, 0xC0DE, n, k), &w, err,
                                   err_len);
    if (rc != EDGERT_OK)
        return rc;
    edgert_packed *pb = NULL, *pr = NULL;
    char perr[1024] = "";
    edgert_status st = edgert_pack(v->b, &w.qt.view, &pb, perr, sizeof perr);
    if (st != EDGERT_OK) {
        judge_refusal(v->r, n, k, v->group, st, perr);
        cc->done += m_count(n, k);
        goto out;
    }
    if (!v->self) {
        st = edgert_pack(v->ref, &w.qt.view, &pr, perr, sizeof perr);
        if (st != EDGERT_OK) {
            edgert_errf(err, err_len, "the reference backend could not pack n=%u k=%u: %s", n, k,
                        perr);
            rc = st;
            goto out;
        }
    } else {
        pr = pb;
    }
    for (size_t mi = 0; mi < CASE_MS && rc == EDGERT_OK; mi++)
        if (keep_m(case_ms[mi], n, k))
            rc = run_case(v, &w, pb, pr, case_ms[mi], cc, err, err_len);
out:
    if (pr != pb)
        edgert_packed_free(pr);
    edgert_packed_free(pb);
    case_w_free(&w);
    return rc;
}

edgert_status verify_correctness(vrun *v, char *err, size_t err_len)
{
    uint32_t ks[5];
    size_t nk = case_ks(v->group, ks);
    case_count cc = {0, 0, 0};
    for (size_t ki = 0; ki < nk; ki++)
        for (size_t ni = 0; ni < CASE_NS; ni++)
            cc.total += m_count(case_ns[ni], ks[ki]);
    edgert_status rc = EDGERT_OK;
    for (size_t ki = 0; ki < nk && rc == EDGERT_OK; ki++)
        for (size_t ni = 0; ni < CASE_NS && rc == EDGERT_OK; ni++)
            rc = run_shape(v, case_ns[ni], ks[ki], &cc, err, err_len);
    return rc;
}
