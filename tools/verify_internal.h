/*
 * tools/verify_internal.h — what the three files of `edgert verify` share,
 * and nothing else includes:
 *   verify_correct.c   the tolerance model and the correctness cases
 *                      (against the reference backend);
 *   verify_fidelity.c  SQNR of every workload shape and the output head's
 *                      top-1 / KL (against dense fp32 of the unquantized weights);
 *   verify.c           the command: one run's spine (verify_backend), its
 *                      progress line, printing and JSON.
 * One run (vrun) is the backend under test, the oracle and what both parts
 * derive from the backend's layout; the steps only read it and fill v->r.
 */
#ifndef EDGERT_TOOLS_VERIFY_INTERNAL_H
#define EDGERT_TOOLS_VERIFY_INTERNAL_H

#include "common/tolerance.h"
#include "verify.h"

#define VERIFY_REF "ref-w4a16"
#define WEIGHT_STD 0.02f /* the projections' weights (gen_dense), correctness and fidelity */
#define SQNR_TOKENS 8u   /* tokens of each fidelity shape's SQNR */

/* One verify run. */
typedef struct vrun {
    edgert_ctx *ctx;     /* its pool also runs the reference computations: they run
                          * between backend calls, never concurrently with one */
    const cli *c;
    int progress;        /* stderr is a terminal */
    const char *name;
    const edgert_candidate *cand;
    edgert_backend *b;   /* under test */
    edgert_backend *ref; /* the oracle; == b when verifying the reference itself */
    int self;            /* b is the reference */
    er_tol_model tm;   /* the tolerance (core/common/tolerance.h) */
    uint32_t group;
    int symmetric;
    verify_result *r;
} vrun;

/* ---- verify_correct.c ---- */

/** The tolerance model for candidate k's activation dtype; -1 (with err)
 *  when verify cannot derive one. */
int verify_tol_model(const edgert_candidate *k, er_tol_model *tm, char *err, size_t err_len);
/** Every correctness case; failures go to v->r, an error return means the
 *  run itself could not go on (out of memory, the oracle failed). */
edgert_status verify_correctness(vrun *v, char *err, size_t err_len);

/* ---- verify_fidelity.c ---- */

/** SQNR of the workload's shapes and the head's top-1 / KL, into v->r. */
edgert_status verify_fidelity(vrun *v, const workload *wl, char *err, size_t err_len);

/* ---- verify.c ---- */

/** One progress line on stderr (rewritten in place), when it is a terminal. */
void verify_progress(const vrun *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** y = x W^T for m rows on backend b. */
edgert_status verify_gemm(edgert_backend *b, const edgert_packed *p, uint32_t m, const float *x,
                          size_t ldx, float *y, size_t ldy, char *err, size_t err_len);
/** A seed derived from --seed and three case coordinates. */
uint64_t verify_seed(uint64_t base, uint64_t a, uint64_t b, uint64_t c);

#endif
