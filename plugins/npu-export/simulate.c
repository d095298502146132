/*
 * plugins/npu-export/simulate.c — what each scheme would compute on one
 * projection, measured against fp32: the numbers behind the report, the
 * refusals and the exported encodings. The arithmetic itself (quantizers,
 * ranges, the GEMM block) is quant_sim.c's; this file runs it per
 * configuration over the projection's calibration samples.
 *
 * Configurations (ne_make_cfgs): w8a16 and w4a16 with the requested ranges
 * and with fixed [-1, 1] (uncalibrated) ones, w8a8 with minmax and with
 * percentile:99.99 ranges, and the exported scheme. The head is
 * simulated at no less than 8-bit weights and 16-bit activations whatever the
 * configuration says, as it is exported.
 *
 * Samples: the first r->tc of the T calibrate every range (activations and
 * outputs); the rest are held out. Both passes run over all T, and every
 * energy is summed per part, so the report has in-sample and held-out SQNR
 * from one simulation.
 *
 * Two passes, each over blocks of NE_NB output columns on the host's thread
 * pool (one block's work has no shared writes, so the sums come out the same
 * whatever the schedule): pass 1 computes the fp32 outputs and their energy;
 * then each configuration takes its activation encodings from those
 * outputs and from the samples, and pass 2 computes each distinct
 * configuration's quantized outputs and their squared error against pass 1
 * (configurations identical in effect, e.g. w8a16 and exported, are
 * simulated once and share the result). Sums per block are reduced in block
 * order, so the figures do not depend on the thread count.
 */
#include <stdlib.h>
#include <string.h>

#include "ne.h"

void ne_make_cfgs(const ne_req *q, ne_cfg *c)
{
    ne_range mm = {NE_RANGE_MINMAX, 0}, pct = {NE_RANGE_PERCENTILE, 99.99};
    ne_range fx = {NE_RANGE_FIXED, 0};
    c[CFG_W8A16] = (ne_cfg){"w8a16", 8, 16, q->ranges,
                            "int8 weights, uint16 activations, calibrated"};
    c[CFG_W8A8] = (ne_cfg){"w8a8", 8, 8, mm, "int8 weights, uint8 activations, minmax"};
    c[CFG_W8A8_PCT] = (ne_cfg){"w8a8_p99.99", 8, 8, pct,
                               "int8 weights, uint8 activations, percentile:99.99"};
    c[CFG_W8A16_UNCAL] = (ne_cfg){"w8a16_uncalibrated", 8, 16, fx,
                                  "int8 weights, uint16 activations, fixed [-1, 1] ranges"};
    c[CFG_W4A16] = (ne_cfg){"w4a16", 4, 16, q->ranges,
                            "int4 weights per channel, uint16 activations, calibrated"};
    c[CFG_W4A16_UNCAL] = (ne_cfg){"w4a16_uncalibrated", 4, 16, fx,
                                  "int4 weights, uint16 activations, fixed [-1, 1] ranges"};
    c[CFG_EXPORTED] = (ne_cfg){"exported", q->scheme == SCHEME_W4A16 ? 4 : 8,
                               q->scheme == SCHEME_W8A8 ? 8 : 16, q->ranges, "the exported graph"};
}

static int range_eq(ne_range a, ne_range b)
{
    return a.kind == b.kind &&
           ((a.kind != NE_RANGE_PERCENTILE && a.kind != NE_RANGE_MARGIN) || a.pct == b.pct);
}

int ne_work_alloc(const ne_run *r, const ne_proj *p, ne_work *wk, char *err, size_t len)
{
    uint32_t n = p->n, k = p->k, t = r->t;
    size_t nk = (size_t)n * k, tk = (size_t)t * k, tn = (size_t)t * n;
    int golden = r->q->golden && !r->refused;
    memset(wk, 0, sizeof *wk);
    wk->nblocks = (n + NE_NB - 1) / NE_NB;
    wk->w = malloc(nk * sizeof *wk->w);
    wk->x = malloc(tk * sizeof *wk->x);
    wk->q8 = malloc(nk);
    wk->q4 = malloc(nk);
    wk->s8 = malloc((size_t)n * 4);
    wk->s4 = malloc((size_t)n * 4);
    wk->yref = malloc(tn * sizeof *wk->yref);
    wk->scratch = malloc((tn > tk ? tn : tk) * sizeof *wk->scratch);
    wk->sig = calloc((size_t)wk->nblocks * 2u, sizeof *wk->sig);
    wk->noise = calloc((size_t)wk->nblocks * NCFG * 2u, sizeof *wk->noise);
    wk->ysim = golden ? malloc(tn * sizeof *wk->ysim) : NULL;
    if (!wk->w || !wk->x || !wk->q8 || !wk->q4 || !wk->s8 || !wk->s4 || !wk->yref ||
        !wk->scratch || !wk->sig || !wk->noise || (golden && !wk->ysim)) {
        edgert_errf(err, len, "out of memory for projection %s [%u x %u] (%zu MB of weights as "
                              "fp32)", p->name, n, k, nk * 4 >> 20);
        return -1;
    }
    return 0;
}

void ne_work_free(ne_work *wk)
{
    for (int c = 0; c < NCFG; c++)
        free(wk->xd[c]);
    free(wk->w);
    free(wk->x);
    free(wk->q8);
    free(wk->q4);
    free(wk->s8);
    free(wk->s4);
    free(wk->yref);
    free(wk->scratch);
    free(wk->sig);
    free(wk->noise);
    free(wk->ysim);
    memset(wk, 0, sizeof *wk);
}

/* The simulation job of one projection. */
typedef struct sim_job {
    const float *w;          /* [n][k] fp32 */
    const int8_t *q8, *q4;   /* [n][k] */
    const float *s8, *s4;    /* [n] */
    const float *x;          /* [t][k] fp32 */
    const float *xd[NCFG];   /* dequantized activations per config, NULL = same as an earlier */
    int uniq[NCFG];          /* index of the config whose results this one shares */
    int wbits[NCFG];
    ne_aq yq[NCFG];
    uint32_t t, tc, k, n, nblocks; /* rows [0, tc) calibrate, [tc, t) are held out */
    float *yref;             /* [t][n] fp32 outputs (pass 1 writes, pass 2 reads) */
    float *ysim;             /* [t][n] outputs of the exported config, or NULL */
    double *sig, *noise;     /* [nblocks][2], [nblocks][NCFG][2]: in-sample, held out */
    int pass, failed;
} sim_job;

static void build_wt(const sim_job *j, int bits, uint32_t n0, uint32_t nb, float *wt)
{
    for (uint32_t c = 0; c < nb; c++) {
        size_t row = (size_t)(n0 + c) * j->k;
        if (bits == 32) {
            for (uint32_t i = 0; i < j->k; i++)
                wt[(size_t)i * nb + c] = j->w[row + i];
        } else {
            const int8_t *q = bits == 8 ? j->q8 : j->q4;
            float s = bits == 8 ? j->s8[n0 + c] : j->s4[n0 + c];
            for (uint32_t i = 0; i < j->k; i++)
                wt[(size_t)i * nb + c] = (float)q[row + i] * s;
        }
    }
}

/* Pass 1 on block b (columns n0 .. n0 + nb): the fp32 outputs and their energy. */
static void block_fp32(sim_job *j, size_t b, uint32_t n0, uint32_t nb, float *wt, float *y)
{
    build_wt(j, 32, n0, nb, wt);
    ne_gemm_block(j->x, j->t, j->k, wt, nb, y);
    double s[2] = {0.0, 0.0};
    for (uint32_t r = 0; r < j->t; r++)
        for (uint32_t c = 0; c < nb; c++) {
            float v = y[(size_t)r * nb + c];
            j->yref[(size_t)r * j->n + n0 + c] = v;
            s[r >= j->tc] += (double)v * v;
        }
    j->sig[2 * b] = s[0];
    j->sig[2 * b + 1] = s[1];
}

/* Pass 2 on block b: each distinct configuration's squared error against
 * pass 1 (the quantized weights of a bit width are built once per block). */
static void block_cfgs(sim_job *j, size_t b, uint32_t n0, uint32_t nb, float *wt8, float *wt4,
                       float *y)
{
    int have8 = 0, have4 = 0;
    for (int c = 0; c < NCFG; c++) {
        if (j->uniq[c] != c)
            continue;
        float *wt = j->wbits[c] == 8 ? wt8 : wt4;
        int *have = j->wbits[c] == 8 ? &have8 : &have4;
        if (!*have) {
            build_wt(j, j->wbits[c], n0, nb, wt);
            *have = 1;
        }
        ne_gemm_block(j->xd[c], j->t, j->k, wt, nb, y);
        double e[2] = {0.0, 0.0};
        int keep = j->ysim && j->uniq[CFG_EXPORTED] == c;
        for (uint32_t r = 0; r < j->t; r++)
            for (uint32_t cc = 0; cc < nb; cc++) {
                float v = ne_aq_apply(&j->yq[c], y[(size_t)r * nb + cc]);
                size_t at = (size_t)r * j->n + n0 + cc;
                double d = (double)v - j->yref[at];
                e[r >= j->tc] += d * d;
                if (keep)
                    j->ysim[at] = v;
            }
        j->noise[(b * NCFG + (size_t)c) * 2] = e[0];
        j->noise[(b * NCFG + (size_t)c) * 2 + 1] = e[1];
    }
}

/* parallel_for body: scratch per call, as the host's contract asks. */
static void sim_blocks(void *arg, size_t begin, size_t end, unsigned worker)
{
    (void)worker;
    sim_job *j = arg;
    float *wt8 = malloc((size_t)j->k * NE_NB * sizeof(float));
    float *wt4 = malloc((size_t)j->k * NE_NB * sizeof(float));
    float *y = malloc((size_t)j->t * NE_NB * sizeof(float));
    if (!wt8 || !wt4 || !y) {
        __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
        goto out;
    }
    for (size_t b = begin; b < end; b++) {
        uint32_t n0 = (uint32_t)b * NE_NB;
        uint32_t nb = j->n - n0 < NE_NB ? j->n - n0 : NE_NB;
        if (j->pass == 1)
            block_fp32(j, b, n0, nb, wt8, y);
        else
            block_cfgs(j, b, n0, nb, wt8, wt4, y);
    }
out:
    free(wt8);
    free(wt4);
    free(y);
}

static int run_pass(const ne_run *r, sim_job *j, int pass, const char *name, char *err,
                    size_t len)
{
    j->pass = pass;
    r->host->parallel_for(r->host->host_ctx, j->nblocks, 1, sim_blocks, j);
    if (j->failed) {
        edgert_errf(err, len, "out of memory in the simulator (%s)", name);
        return -1;
    }
    return 0;
}

/* Per configuration: effective precision (head protected), ranges (from
 * the calibration rows only: the held-out ones must not have shaped them),
 * and the quantized-dequantized inputs of every row; identical
 * configurations share. */
static int plan_cfgs(const ne_run *r, const ne_proj *p, sim_job *j, ne_work *wk, char *err,
                     size_t len)
{
    size_t tk = (size_t)r->t * p->k;
    size_t tk_cal = (size_t)r->tc * p->k, tn_cal = (size_t)r->tc * p->n;
    for (int c = 0; c < NCFG; c++) {
        int wb = r->cfg[c].wbits, ab = r->cfg[c].abits;
        if (p->head) {
            wb = wb < 8 ? 8 : wb;
            ab = ab < 16 ? 16 : ab;
        }
        j->wbits[c] = wb;
        j->uniq[c] = c;
        for (int e = 0; e < c; e++)
            if (j->uniq[e] == e && j->wbits[e] == wb && j->yq[e].qmax == (1 << ab) - 1 &&
                range_eq(r->cfg[e].ranges, r->cfg[c].ranges)) {
                j->uniq[c] = e;
                break;
            }
        float lo, hi;
        ne_range_of(wk->yref, tn_cal, r->cfg[c].ranges, wk->scratch, &lo, &hi);
        j->yq[c] = ne_aq_make(lo, hi, (unsigned)ab);
        if (j->uniq[c] != c)
            continue;
        ne_range_of(wk->x, tk_cal, r->cfg[c].ranges, wk->scratch, &lo, &hi);
        ne_aq xq = ne_aq_make(lo, hi, (unsigned)ab);
        wk->xd[c] = malloc(tk * sizeof(float));
        if (!wk->xd[c]) {
            edgert_errf(err, len, "out of memory (%s)", p->name);
            return -1;
        }
        for (size_t i = 0; i < tk; i++)
            wk->xd[c][i] = ne_aq_apply(&xq, wk->x[i]);
        j->xd[c] = wk->xd[c];
    }
    return 0;
}

int ne_simulate(const ne_run *r, ne_proj *p, ne_work *wk, char *err, size_t len)
{
    sim_job j;
    memset(&j, 0, sizeof j);
    j.w = wk->w;
    j.q8 = wk->q8;
    j.q4 = wk->q4;
    j.s8 = wk->s8;
    j.s4 = wk->s4;
    j.x = wk->x;
    j.t = r->t;
    j.tc = r->tc;
    j.k = p->k;
    j.n = p->n;
    j.nblocks = wk->nblocks;
    j.yref = wk->yref;
    j.ysim = wk->ysim;
    j.sig = wk->sig;
    j.noise = wk->noise;
    ne_wquant(wk->w, p->n, p->k, 127, wk->q8, wk->s8);
    ne_wquant(wk->w, p->n, p->k, 7, wk->q4, wk->s4);

    /* Pass 1: fp32 outputs. */
    if (run_pass(r, &j, 1, p->name, err, len))
        return -1;
    p->sig = p->sig_ho = 0.0;
    for (uint32_t b = 0; b < j.nblocks; b++) {
        p->sig += wk->sig[2 * b];
        p->sig_ho += wk->sig[2 * b + 1];
    }

    if (plan_cfgs(r, p, &j, wk, err, len))
        return -1;
    /* The exported config's own activation encodings (it may share xd). */
    float lo, hi;
    ne_range_of(wk->x, (size_t)r->tc * p->k, r->cfg[CFG_EXPORTED].ranges, wk->scratch, &lo,
                &hi);
    p->wbits = j.wbits[CFG_EXPORTED];
    p->abits = j.yq[CFG_EXPORTED].qmax == 65535 ? 16 : 8;
    p->xq = ne_aq_make(lo, hi, (unsigned)p->abits);
    p->yq = j.yq[CFG_EXPORTED];

    /* Pass 2: every distinct configuration against pass 1. */
    if (run_pass(r, &j, 2, p->name, err, len))
        return -1;
    for (int c = 0; c < NCFG; c++) {
        double e = 0.0, h = 0.0;
        for (uint32_t b = 0; b < j.nblocks; b++) {
            e += wk->noise[((size_t)b * NCFG + (size_t)j.uniq[c]) * 2];
            h += wk->noise[((size_t)b * NCFG + (size_t)j.uniq[c]) * 2 + 1];
        }
        p->noise[c] = e;
        p->noise_ho[c] = h;
    }
    return 0;
}
