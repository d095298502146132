/*
 * core/common/tolerance.h — how far a backend's GEMM output may lie from the
 * exact one, derived from its arithmetic (docs/architecture.md, Checking a
 * backend's arithmetic): the one model that first contact's arithmetic check
 * (core/sandbox/sandbox_check.c) and `edgert verify` (tools/verify_correct.c,
 * whose header comment derives each term) both judge by. Not installed.
 *
 * For one output y = Σ_k x_k w_k, w = s (q - z) the exact dequantized
 * weight, u = 2^-24 and γ = (K + 2) u:
 *   S  = Σ |x w|              Z  = Σ |x| |s| (q + z)   (a kernel that folds
 *                                                       the zero point)
 *   A  = Σ |Δx| |w|           ZA = Σ |Δx| |s| (q + z)  (the activations the
 *                                                       backend computes with,
 *                                                       against the oracle's)
 *   S_B = S + A, Z_B = Z + ZA
 * against the exact sum:         |y_B - y*| <= A + γ Z_B + 4u (Z_B + S_B)
 * against the fp32 oracle y_R:   |y_B - y_R| <= A + γ (Z_B + S) + 4u (Z_B + S_B)
 * the oracle against the exact:  |y_R - y*| <= γ S
 * Δx by the activation type: none for fp32; for a 16-bit form u16 |x| (the
 * relative part, folded into A through S) plus 2^-13 of the group's largest
 * |x| and 2^-16 of the token's (dx below); for int8, two models:
 *   - emulated (ER_TOL_EMULATE_INT8: `edgert verify`, tight): the oracle
 *     computes with x^ = s round(x / s), s = max|x| / 127 per token, or per
 *     group of act_group inputs along K when the manifest's
 *     layout.activation_group_size says so, and dx is s where x / s is
 *     within 2^-20 of a rounding tie;
 *   - any int8 form (first contact's check, a gate that must pass every
 *     correct kernel): the oracle computes with x, and dx = max_token|x| /
 *     127, one whole step of a per-token scale, which bounds any rounding
 *     and any finer blocks (a group's scale is at most the token's).
 */
#ifndef EDGERT_CORE_TOLERANCE_H
#define EDGERT_CORE_TOLERANCE_H

#include <stddef.h>
#include <stdint.h>

#define ER_TOL_U (1.0 / 16777216.0)    /* 2^-24: fp32 unit roundoff */
#define ER_TOL_FIX_GROUP (1.0 / 8192.0) /* 2^-13: 15-bit fixed point per group */
#define ER_TOL_FIX_TOKEN (1.0 / 65536.0) /* 2^-16: 16-bit integer per token */

/* How the backend's activations differ from the fp32 the oracle uses. */
typedef enum { ER_TOL_FP32 = 0, ER_TOL_16BIT = 1, ER_TOL_INT8 = 2 } er_tol_kind;

typedef struct er_tol_model {
    er_tol_kind kind;
    int emulated;    /* int8: the emulated model (ER_TOL_EMULATE_INT8) */
    uint32_t act_group; /* int8, emulated: inputs per activation scale; 0: the token */
    double u16;      /* 16-bit: relative unit roundoff of the form */
    char dtype[32];  /* the activation dtype it was derived for */
    char text[256];  /* the bound, in one line */
} er_tol_model;

/** er_tol_model_for's flag: int8 activations by the emulated model. */
#define ER_TOL_EMULATE_INT8 1u

/** The model of `backend`'s activation dtype `dtype` (the manifest's, as it
 *  applies on the device; NULL or "" with `bits` alone); `act_group`: the
 *  manifest's layout.activation_group_size (int8: inputs per activation
 *  scale, 0 per token). 0, or -1 with err naming the backend when no
 *  tolerance can be derived for it. */
int er_tol_model_for(const char *backend, const char *dtype, int bits, int act_group,
                     unsigned flags, er_tol_model *tm, char *err, size_t err_len);

/** One token's activations x[0..k): what the oracle computes with, into
 *  xr[0..k) (x, or x^ for int8), and the absolute part of |Δx| per element
 *  into dx[0..k) (16-bit and int8; untouched for fp32, which may pass NULL).
 *  `group`: the layout's group size, the span of a 16-bit form's scale. */
void er_tol_token(const er_tol_model *tm, const float *x, uint32_t k, uint32_t group, float *xr,
                  double *dx);

/** The sums of one output over k: y (exact, in double, on xr), S, Z, A, ZA. */
typedef struct er_tol_sums {
    double y, S, Z, A, ZA;
} er_tol_sums;

/** The sums of xr (with dx, NULL for fp32) against one weight row: wd the
 *  exact weights s (q - z), wz their |s| (q + z). */
void er_tol_sums_of(const er_tol_model *tm, const float *xr, const double *dx, const double *wd,
                    const double *wz, uint32_t k, er_tol_sums *s);

/** The bound of |y_B - y*| (against the exact sum). */
double er_tol_vs_exact(uint32_t k, const er_tol_sums *s);
/** The bound of |y_B - y_R| (against the fp32 oracle). */
double er_tol_vs_oracle(uint32_t k, const er_tol_sums *s);
/** The bound of |y_R - y*| (the oracle against the exact sum). */
double er_tol_oracle(uint32_t k, const er_tol_sums *s);

#endif /* EDGERT_CORE_TOLERANCE_H */
