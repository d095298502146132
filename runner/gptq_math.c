/*
 * runner/gptq_math.c — GPTQ's arithmetic (gptq.h): the Hessian, its
 * dampened inverse's Cholesky factor, the column-by-column quantization
 * with lazy block updates, and the output error a quantization leaves.
 *
 * The inverse's factor: GPTQ needs U upper triangular with H^-1 = U^T U.
 * With J the reversal permutation and L the lower Cholesky factor of
 * J H J, H = (J L J)(J L J)^T where J L J is upper triangular, so
 * H^-1 = V^T V with V = (J L J)^-1 = J L^-1 J: one Cholesky factorization
 * and one triangular inverse (k^3 / 3 multiply-adds), not the inverse and a
 * second factorization GPTQ's reference code does (twice that).
 *
 * Everything is fp32 with fp32 accumulation, as GPTQ's reference is; the
 * GEMMs are blocked (4 x 16 register tiles, 256 x 128 tiles of B for the
 * cache) and shared among the pool's threads by rows, so every element is
 * computed the same way whatever the thread count.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gptq.h"

#define NB 64 /* the factorization's and inverse's blocks */
#define PANEL 16 /* rows of W per work item */

/* ---- the GEMM ------------------------------------------------------------------- */

void gq_tile_portable(size_t T, const float *A, size_t ar, size_t at, const float *B,
                      size_t ldb, float *C, size_t ldc)
{
    float acc[4][16] = {{0}};
    for (size_t t = 0; t < T; t++) {
        const float *b = B + t * ldb;
        for (int r = 0; r < 4; r++) {
            float a = A[r * ar + t * at];
            for (int c = 0; c < 16; c++)
                acc[r][c] += a * b[c];
        }
    }
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 16; c++)
            C[r * ldc + c] += acc[r][c];
}

/* A tile cut by the matrix's edge (R < 4 rows or C < 16 columns): its
 * operands copied into zero-padded 4 x 16 ones, run by the same tile. */
static void tile_edge(gq_tile_fn tile, size_t R, size_t Cn, size_t T, const float *A, size_t ar,
                      size_t at, const float *B, size_t ldb, float *C, size_t ldc)
{
    float Ap[4 * 256], Bp[256 * 16], Cp[4 * 16] = {0};
    for (size_t r = 0; r < 4; r++)
        for (size_t t = 0; t < T; t++)
            Ap[r * T + t] = r < R ? A[r * ar + t * at] : 0.0f;
    for (size_t t = 0; t < T; t++)
        for (size_t c = 0; c < 16; c++)
            Bp[t * 16 + c] = c < Cn ? B[t * ldb + c] : 0.0f;
    tile(T, Ap, T, 1, Bp, 16, Cp, 16);
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < Cn; c++)
            C[r * ldc + c] += Cp[r * 16 + c];
}

gq_tile_fn gq_tile_pick(edgert_ctx *ctx)
{
#if defined(__x86_64__)
    uint64_t f = edgert_device_facts(ctx)->cpu_flags;
    if ((f >> EDGERT_CPU_AVX2 & 1u) && (f >> EDGERT_CPU_FMA & 1u))
        return gq_tile_avx2;
#endif
    (void)ctx;
    return gq_tile_portable;
}

void gq_gemm(gq_tile_fn tile, size_t R, size_t Cn, size_t T, const float *A, size_t ar,
             size_t at, const float *B, size_t ldb, float *C, size_t ldc)
{
    for (size_t jc = 0; jc < Cn; jc += 128) {
        size_t cw = Cn - jc < 128 ? Cn - jc : 128;
        for (size_t tc = 0; tc < T; tc += 256) {
            size_t tl = T - tc < 256 ? T - tc : 256;
            const float *At = A + tc * at, *Bt = B + tc * ldb + jc;
            for (size_t r = 0; r < R; r += 4) {
                size_t rr = R - r < 4 ? R - r : 4;
                size_t c = 0;
                for (; rr == 4 && c + 16 <= cw; c += 16)
                    tile(tl, At + r * ar, ar, at, Bt + c, ldb, C + r * ldc + jc + c, ldc);
                for (; c < cw; c += 16) /* T <= 256: the padded copies' size */
                    tile_edge(tile, rr, cw - c < 16 ? cw - c : 16, tl, At + r * ar, ar, at,
                              Bt + c, ldb, C + r * ldc + jc + c, ldc);
            }
        }
    }
}

/* ---- the Hessian ---------------------------------------------------------------- */

typedef struct hess_job {
    gq_tile_fn tile;
    float *H;
    uint32_t k;
    const float *X;
    size_t rows, ldx;
} hess_job;

static void hess_items(void *arg, size_t b, size_t e, unsigned worker)
{
    const hess_job *j = arg;
    (void)worker;
    for (size_t it = b; it < e; it++) {
        size_t i0 = it * PANEL, R = j->k - i0 < PANEL ? j->k - i0 : PANEL;
        gq_gemm(j->tile, R, j->k - i0, j->rows, j->X + i0, 1, j->ldx, j->X + i0, j->ldx,
                j->H + i0 * j->k + i0, j->k);
    }
}

void gq_hessian_add(edgert_ctx *ctx, float *H, uint32_t k, const float *X, size_t rows,
                    size_t ldx)
{
    hess_job j = {gq_tile_pick(ctx), H, k, X, rows, ldx};
    edgert_parallel_for(ctx, (k + PANEL - 1) / PANEL, 1, hess_items, &j);
}

typedef struct lin_job {
    gq_tile_fn tile;
    const float *W, *Xt; /* Xt[k][rows] */
    uint32_t n, k, rows;
    float *Y;
    size_t ldy;
} lin_job;

/* Output columns [b, e) x 16 of Y = X W^T: Y^T's rows, W Xt, then
 * transposed into Y. */
static void lin_items(void *arg, size_t b, size_t e, unsigned worker)
{
    const lin_job *j = arg;
    float *T = malloc((size_t)PANEL * j->rows * sizeof *T);
    (void)worker;
    if (!T)
        abort(); /* 32 KiB: the process is out of memory */
    for (size_t it = b; it < e; it++) {
        uint32_t r0 = (uint32_t)it * PANEL, R = j->n - r0 < PANEL ? j->n - r0 : PANEL;
        memset(T, 0, (size_t)R * j->rows * sizeof *T);
        gq_gemm(j->tile, R, j->rows, j->k, j->W + (size_t)r0 * j->k, j->k, 1, j->Xt, j->rows,
                T, j->rows);
        for (uint32_t r = 0; r < R; r++)
            for (uint32_t i = 0; i < j->rows; i++)
                j->Y[(size_t)i * j->ldy + r0 + r] = T[(size_t)r * j->rows + i];
    }
    free(T);
}

void gq_linear(edgert_ctx *ctx, const float *W, uint32_t n, uint32_t k, const float *X,
               uint32_t rows, size_t ldx, float *Y, size_t ldy)
{
    float *Xt = malloc((size_t)k * rows * sizeof *Xt);
    if (!Xt)
        abort(); /* a chunk's activations: the process is out of memory */
    for (uint32_t i = 0; i < rows; i++)
        for (uint32_t t = 0; t < k; t++)
            Xt[(size_t)t * rows + i] = X[(size_t)i * ldx + t];
    lin_job j = {gq_tile_pick(ctx), W, Xt, n, k, rows, Y, ldy};
    edgert_parallel_for(ctx, (n + PANEL - 1) / PANEL, 1, lin_items, &j);
    free(Xt);
}

/* ---- Cholesky factorization and triangular inverse ---------------------------------- */

typedef struct fac_job {
    gq_tile_fn tile;
    float *A, *P; /* the matrix; the panel transposed and negated */
    uint32_t k, kb, b;
} fac_job;

/* Rows below the diagonal block: solve against it (forward substitution). */
static void panel_items(void *arg, size_t b, size_t e, unsigned worker)
{
    const fac_job *j = arg;
    (void)worker;
    for (size_t i = j->kb + j->b + b; i < j->kb + j->b + e; i++) {
        float *row = j->A + i * j->k;
        for (uint32_t c = j->kb; c < j->kb + j->b; c++) {
            const float *rc = j->A + (size_t)c * j->k;
            float s = row[c];
            for (uint32_t m = j->kb; m < c; m++)
                s -= row[m] * rc[m];
            row[c] = s / rc[c];
        }
    }
}

/* The trailing matrix's lower triangle minus the panel times its transpose. */
static void trail_items(void *arg, size_t b, size_t e, unsigned worker)
{
    const fac_job *j = arg;
    uint32_t t0 = j->kb + j->b;
    (void)worker;
    for (size_t it = b; it < e; it++) {
        size_t i0 = t0 + it * PANEL, R = j->k - i0 < PANEL ? j->k - i0 : PANEL;
        gq_gemm(j->tile, R, i0 + R - t0, j->b, j->A + i0 * j->k + j->kb, j->k, 1, j->P + t0, j->k,
                j->A + i0 * j->k + t0, j->k);
    }
}

/* In place: A's lower triangle becomes L, A = L L^T (its upper part is
 * left as garbage). -1 when a pivot is not positive. */
static int cholesky(edgert_ctx *ctx, float *A, uint32_t k)
{
    float *P = malloc((size_t)NB * k * sizeof *P);
    if (!P)
        return -2;
    for (uint32_t kb = 0; kb < k; kb += NB) {
        uint32_t b = k - kb < NB ? k - kb : NB;
        for (uint32_t c = kb; c < kb + b; c++) {
            float *rc = A + (size_t)c * k;
            double d = rc[c];
            for (uint32_t m = kb; m < c; m++)
                d -= (double)rc[m] * rc[m];
            if (!(d > 0) || !isfinite(d)) {
                free(P);
                return -1;
            }
            rc[c] = (float)sqrt(d);
            for (uint32_t i = c + 1; i < kb + b; i++) {
                float *ri = A + (size_t)i * k, s = ri[c];
                for (uint32_t m = kb; m < c; m++)
                    s -= ri[m] * rc[m];
                ri[c] = s / rc[c];
            }
        }
        if (kb + b >= k)
            break;
        fac_job j = {gq_tile_pick(ctx), A, P, k, kb, b};
        edgert_parallel_for(ctx, k - kb - b, 8, panel_items, &j);
        for (uint32_t t = 0; t < b; t++)
            for (uint32_t i = kb + b; i < k; i++)
                P[(size_t)t * k + i] = -A[(size_t)i * k + kb + t];
        edgert_parallel_for(ctx, (k - kb - b + PANEL - 1) / PANEL, 1, trail_items, &j);
    }
    free(P);
    for (uint32_t i = 0; i < k; i++) /* checked once: a NaN in a panel went unseen */
        if (!isfinite(A[(size_t)i * k + i]))
            return -1;
    return 0;
}

typedef struct inv_job {
    gq_tile_fn tile;
    const float *L;
    float *M;
    uint32_t k;
} inv_job;

/* Column block `it` of M = L^-1: block rows below the diagonal in order,
 * M[ib][jb] = -D_ib^-1 (sum over jb <= kb < ib of L[ib][kb] M[kb][jb]). */
static void inv_items(void *arg, size_t b, size_t e, unsigned worker)
{
    const inv_job *j = arg;
    uint32_t k = j->k;
    float *tmp = malloc(NB * NB * sizeof *tmp);
    (void)worker;
    if (!tmp)
        abort(); /* 16 KiB: the process is out of memory */
    for (size_t it = b; it < e; it++) {
        uint32_t jb = (uint32_t)it * NB, cb = k - jb < NB ? k - jb : NB;
        for (uint32_t ib = jb + NB; ib < k; ib += NB) {
            uint32_t rb = k - ib < NB ? k - ib : NB;
            memset(tmp, 0, (size_t)rb * cb * sizeof *tmp);
            gq_gemm(j->tile, rb, cb, ib - jb, j->L + (size_t)ib * k + jb, k, 1,
                    j->M + (size_t)jb * k + jb, k, tmp, cb);
            for (size_t x = 0; x < (size_t)rb * cb; x++)
                tmp[x] = -tmp[x];
            gq_gemm(j->tile, rb, cb, rb, j->M + (size_t)ib * k + ib, k, 1, tmp, cb,
                    j->M + (size_t)ib * k + jb, k);
        }
    }
    free(tmp);
}

/* M = L^-1 (lower; M zeroed first). */
static void tri_inverse(edgert_ctx *ctx, const float *L, float *M, uint32_t k)
{
    memset(M, 0, (size_t)k * k * sizeof *M);
    for (uint32_t db = 0; db < k; db += NB) { /* the diagonal blocks' own inverses */
        uint32_t b = k - db < NB ? k - db : NB;
        for (uint32_t c = db; c < db + b; c++) {
            M[(size_t)c * k + c] = 1.0f / L[(size_t)c * k + c];
            for (uint32_t i = c + 1; i < db + b; i++) {
                float s = 0;
                for (uint32_t m = c; m < i; m++)
                    s += L[(size_t)i * k + m] * M[(size_t)m * k + c];
                M[(size_t)i * k + c] = -s / L[(size_t)i * k + i];
            }
        }
    }
    inv_job j = {gq_tile_pick(ctx), L, M, k};
    edgert_parallel_for(ctx, (k + NB - 1) / NB, 1, inv_items, &j);
}

int gq_prepare(edgert_ctx *ctx, float *H, uint32_t k, size_t rows, double percdamp,
               float *scratch, gq_prep *out)
{
    double mean = 0;
    float inv_rows = rows ? 1.0f / (float)rows : 1.0f;
    memset(out, 0, sizeof *out);
    for (uint32_t i = 0; i < k; i++) {
        for (uint32_t j = i; j < k; j++)
            H[(size_t)i * k + j] *= inv_rows;
        mean += H[(size_t)i * k + i];
        out->dead += H[(size_t)i * k + i] == 0.0f;
    }
    mean /= k;
    out->damp = mean > 0 ? percdamp * mean : 1.0;
    for (;;) {
        for (uint32_t i = 0; i < k; i++) /* J H J, lower triangle, dampened */
            for (uint32_t j = 0; j <= i; j++)
                scratch[(size_t)i * k + j] = H[(size_t)(k - 1 - i) * k + (k - 1 - j)] +
                                             (i == j ? (float)out->damp : 0.0f);
        int rc = cholesky(ctx, scratch, k);
        if (rc == 0)
            break;
        if (rc == -2 || ++out->retries > 3)
            return rc;
        out->damp *= 10;
    }
    tri_inverse(ctx, scratch, H, k);
    for (uint32_t i = 0; i < k; i++) /* U = J M J: upper */
        for (uint32_t j = 0; j <= i; j++) {
            size_t a = (size_t)i * k + j, bb = (size_t)(k - 1 - i) * k + (k - 1 - j);
            if (j < i || i < k - 1 - i) {
                float t = H[a];
                H[a] = H[bb];
                H[bb] = t;
            }
        }
    return 0;
}

/* ---- the quantization --------------------------------------------------------------- */

typedef struct q_job {
    gq_tile_fn tile;
    float *W;
    const float *U;
    edgert_qtensor *q;
    uint32_t blk;
    int failed;
} q_job;

static void put_code(uint8_t *row, uint32_t col, unsigned q)
{
    uint8_t *b = row + col / 2;
    *b = (col & 1u) ? (uint8_t)((*b & 0x0F) | q << 4) : (uint8_t)((*b & 0xF0) | q);
}

/* Group parameters from w[0..len), the rules of edgert quantize
 * (weights.c, zero points at least 1 for GPTQ's v1 layout). */
static void group_params(const float *w, size_t len, int sym, float *s_out, unsigned *z_out)
{
    float mn = w[0], mx = w[0];
    for (size_t j = 1; j < len; j++) {
        mn = w[j] < mn ? w[j] : mn;
        mx = w[j] > mx ? w[j] : mx;
    }
    if (sym) {
        double amax = fabs((double)mn) > fabs((double)mx) ? fabs((double)mn) : fabs((double)mx);
        *s_out = (float)(amax / 7.0), *z_out = 8;
        return;
    }
    if (mn == mx) { /* constant: s (q - z) is c exactly with q = z + 1 (c > 0) or z - 1 */
        *s_out = mn > 0 ? mn : -mn, *z_out = 1;
        return;
    }
    double lo = mn < 0 ? mn : 0.0, hi = mx > 0 ? mx : 0.0;
    float s = (float)((hi - lo) / 15.0);
    double zr = s > 0 ? round(-lo / (double)s) : 1.0;
    unsigned z = zr < 0 ? 0u : zr > 15 ? 15u : (unsigned)zr;
    if (z < 1u)
        s = (float)(hi / 14.0), z = 1u;
    *s_out = s, *z_out = z;
}

static unsigned code_of(float w, float s, unsigned z)
{
    if (s == 0.0f)
        return z;
    long t = lrint((double)w * (1.0 / (double)s)) + (long)z;
    return t < 0 ? 0u : t > 15 ? 15u : (unsigned)t;
}

/* Rows [r0, r0 + R) through one block of columns [i1, i2); the errors,
 * negated, into E[R][blk]. */
static void block_rows(const q_job *j, uint32_t r0, uint32_t R, uint32_t i1, uint32_t i2,
                       float *E)
{
    const edgert_qweights *v = &j->q->view;
    uint32_t k = v->k, group = v->group, G = (k + group - 1) / group;
    int sym = j->q->zeros == NULL;
    for (uint32_t r = r0; r < r0 + R; r++) {
        float *w = j->W + (size_t)r * k;
        uint8_t *codes = j->q->codes + (size_t)r * ((k + 1) / 2);
        float s = 0;
        unsigned z = 8;
        for (uint32_t i = i1; i < i2; i++) {
            uint32_t g = i / group;
            if (i % group == 0 || i == i1) {
                if (i % group == 0) {
                    uint32_t len = k - i < group ? k - i : group;
                    group_params(w + i, len, sym, &s, &z);
                    j->q->scales[(size_t)r * G + g] = s;
                    if (!sym)
                        j->q->zeros[(size_t)r * G + g] = (uint8_t)z;
                } else {
                    s = j->q->scales[(size_t)r * G + g];
                    z = sym ? 8u : j->q->zeros[(size_t)r * G + g];
                }
            }
            unsigned q = code_of(w[i], s, z);
            put_code(codes, i, q);
            if (!j->U)
                continue;
            const float *u = j->U + (size_t)i * k;
            float e = (w[i] - s * (float)((int)q - (int)z)) / u[i];
            for (uint32_t c = i + 1; c < i2; c++)
                w[c] -= e * u[c];
            E[(size_t)(r - r0) * j->blk + (i - i1)] = -e;
        }
    }
}

static void q_items(void *arg, size_t b, size_t e, unsigned worker)
{
    q_job *j = arg;
    uint32_t n = j->q->view.n, k = j->q->view.k;
    float *E = malloc((size_t)PANEL * j->blk * sizeof *E);
    (void)worker;
    if (!E)
        abort(); /* a few KiB: the process is out of memory */
    for (size_t it = b; it < e; it++) {
        uint32_t r0 = (uint32_t)it * PANEL, R = n - r0 < PANEL ? n - r0 : PANEL;
        for (uint32_t i1 = 0; i1 < k; i1 += j->blk) {
            uint32_t i2 = k - i1 < j->blk ? k : i1 + j->blk;
            block_rows(j, r0, R, i1, i2, E);
            if (j->U && i2 < k) /* the lazy update of the columns after the block */
                gq_gemm(j->tile, R, k - i2, i2 - i1, E, j->blk, 1, j->U + (size_t)i1 * k + i2, k,
                        j->W + (size_t)r0 * k + i2, k);
        }
    }
    free(E);
}

void gq_quantize(edgert_ctx *ctx, float *W, const float *U, edgert_qtensor *q)
{
    uint32_t group = q->view.group;
    /* blocks of whole groups (about 128 columns), so a group's parameters
     * are set from values the block has brought up to date */
    uint32_t blk = group >= 128 ? group : group * (128 / group);
    q_job j = {gq_tile_pick(ctx), W, U, q, blk, 0};
    edgert_parallel_for(ctx, (q->view.n + PANEL - 1) / PANEL, 1, q_items, &j);
}

typedef struct quad_job {
    gq_tile_fn tile;
    const float *A, *B, *S;
    uint32_t n, k;
    double *part; /* per item */
} quad_job;

static void quad_items(void *arg, size_t b, size_t e, unsigned worker)
{
    const quad_job *j = arg;
    uint32_t k = j->k;
    float *D = malloc((size_t)PANEL * k * sizeof *D), *Y = malloc((size_t)PANEL * k * sizeof *Y);
    (void)worker;
    if (!D || !Y)
        abort(); /* a few hundred KiB: the process is out of memory */
    for (size_t it = b; it < e; it++) {
        uint32_t r0 = (uint32_t)it * PANEL, R = j->n - r0 < PANEL ? j->n - r0 : PANEL;
        for (size_t x = 0; x < (size_t)R * k; x++)
            D[x] = j->A[(size_t)r0 * k + x] - (j->B ? j->B[(size_t)r0 * k + x] : 0.0f);
        memset(Y, 0, (size_t)R * k * sizeof *Y);
        gq_gemm(j->tile, R, k, k, D, k, 1, j->S, k, Y, k);
        double s = 0;
        for (size_t x = 0; x < (size_t)R * k; x++)
            s += (double)D[x] * Y[x];
        j->part[it] = s;
    }
    free(D);
    free(Y);
}

double gq_quad(edgert_ctx *ctx, const float *A, const float *B, uint32_t n, uint32_t k,
               const float *S)
{
    size_t items = (n + PANEL - 1) / PANEL;
    double *part = calloc(items, sizeof *part), s = 0;
    if (!part)
        return NAN;
    quad_job j = {gq_tile_pick(ctx), A, B, S, n, k, part};
    edgert_parallel_for(ctx, items, 1, quad_items, &j);
    for (size_t i = 0; i < items; i++) /* in order: the same sum on every thread count */
        s += part[i];
    free(part);
    return s;
}
