/*
 * tools/verify.h — `edgert verify`: correctness against the reference
 * backend and fidelity against dense fp32. Also used by `edgert calibrate`.
 */
#ifndef EDGERT_TOOLS_VERIFY_H
#define EDGERT_TOOLS_VERIFY_H

#include "cli.h"
#include "workload.h"

typedef struct verify_shape {
    char name[64];
    uint32_t m, n, k;
    double sqnr_db;            /**< fidelity: vs dense fp32 of the unquantized weights */
} verify_shape;

typedef struct verify_result {
    char name[64];
    int correct;               /**< every correctness case within its tolerance */
    int cases, failed_cases;
    double max_abs_err;        /**< worst |y - y_ref| over the correctness cases */
    double worst_ratio;        /**< worst |y - y_ref| / tolerance (≤ 1 passes) */
    char first_failure[512];   /**< "" or a description of the first failing case */
    size_t nshapes;
    verify_shape shapes[WL_MAX_SHAPES];
    double sqnr_min_db;
    double top1_agreement;     /**< head projection: argmax agrees with dense fp32 */
    double kl_mean;            /**< mean KL(p_dense || p_backend) of the softmax */
    uint32_t head_n, head_k, tokens;
    /* added by verify.c (grow at the end only) */
    int refused_cases;         /**< K % group != 0 cases the backend refused cleanly (passes) */
    char tolerance[256];       /**< the tolerance model, one line */
    char path[448];            /**< the instance's describe() */
    double seconds;            /**< wall time of this backend's verify */
    double head_weight_std;    /**< std of the head's dense weights */
    double head_logit_std;     /**< mean over tokens of the dense logits' std over the vocabulary */
    double head_dense_top1_prob; /**< mean top-1 probability of the dense softmax */
    double head_dense_entropy; /**< mean entropy of the dense softmax, nats */
    const char *head_source;   /**< "file": the --weights file's own head; "generated": a
                                    head-shaped projection of generated weights (no
                                    --weights, or a file with no head of its own) */
    double top1_vs_reference;  /**< head: argmax agrees with ref-w4a16 on the same
                                    quantized weights (NaN for the reference itself) */
    char worst_case[256];      /**< the output with the worst err/tolerance */
    char reference[96];        /**< what fidelity compares with (the dense weights) */
    char activations[32];      /**< the activation dtype the tolerance model used */
    char oracle_of[64];        /**< "" or, for the reference beside `--backend NAME`, NAME:
                                    no cases of its own (each of NAME's cases checked it
                                    against the double loop), its fidelity alone */
    int oracle_failed;         /**< a case found the reference off the double loop */
} verify_result;

/** Verify one backend (correctness + fidelity). Returns EDGERT_OK when it ran
 *  (r->correct says whether it passed); an error when it could not run. */
edgert_status verify_backend(edgert_ctx *ctx, const cli *c, const workload *w, const char *backend,
                             verify_result *r, char *err, size_t err_len);

/** The reference's fidelity beside `of`, verified by verify_backend just
 *  before: no correctness cases of its own, since each of `of`'s cases
 *  checked the reference against an independent double-precision loop. */
edgert_status verify_oracle_fidelity(edgert_ctx *ctx, const cli *c, const workload *w,
                                     const char *of, verify_result *r, char *err, size_t err_len);

#endif
