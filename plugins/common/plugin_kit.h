/*
 * plugins/common/plugin_kit.h — the support kit every in-tree plugin builds
 * in: size arithmetic, the checks every init, pack and gemm makes of its
 * arguments, and the self-test runner. Shared as source (plugin_kit.c is
 * compiled into each plugin by edgert_add_plugin, cmake/EdgertPlugin.cmake),
 * so each .so stays self-contained and links nothing of the core. Not part of
 * the vendor contract: a vendor needs only include/edgert/plugin.h (whose
 * edgert_errf is the error formatter used here too).
 *
 * Every message names the plugin and the tensor, in one wording for every
 * plugin. No global state.
 */
#ifndef EDGERT_PLUGIN_KIT_H
#define EDGERT_PLUGIN_KIT_H

#include <stddef.h>
#include <stdint.h>

#include "edgert/plugin.h"

/* ---- size arithmetic ------------------------------------------------------------ */

/* a * b, a + b, a rounded up to a power-of-two `align`, into *out; 0 on
 * success, -1 on size_t overflow (*out untouched then, except round_up). */
static inline int pk_mul(size_t a, size_t b, size_t *out)
{
    if (b != 0u && a > SIZE_MAX / b)
        return -1;
    *out = a * b;
    return 0;
}

static inline int pk_add(size_t a, size_t b, size_t *out)
{
    if (a > SIZE_MAX - b)
        return -1;
    *out = a + b;
    return 0;
}

static inline int pk_round_up(size_t a, size_t align, size_t *out)
{
    if (pk_add(a, align - 1u, out) != 0)
        return -1;
    *out &= ~(align - 1u);
    return 0;
}

/* Groups per row: ceil(k / group) without the overflow of k + group - 1. */
static inline size_t pk_groups(uint32_t k, uint32_t group)
{
    return (size_t)(k / group) + (k % group != 0u);
}

/* Code c of a canonical row (two per byte, low nibble first). */
static inline unsigned pk_code(const uint8_t *row_codes, size_t c)
{
    unsigned b = row_codes[c / 2u];
    return (c & 1u) ? (b >> 4) : (b & 15u);
}

/* ---- init ----------------------------------------------------------------------- */

/*
 * The checks every init makes before it allocates: `state` non-NULL (then
 * *state = NULL), the host table present, at least ABI 1's size, every
 * function set. EDGERT_OK or EDGERT_E_USAGE with the reason in err.
 */
edgert_status pk_check_init(const char *plugin, const edgert_host *host, void **state, char *err,
                            size_t err_len);

/*
 * The kit's instance convention: a plugin's instance state (the `state` of
 * init) is a struct whose FIRST member is `const edgert_host *host`, allocated
 * with host->alloc; packed handles are single host->alloc blocks. Then these
 * serve as the plugin's fini and packed_free as they are. (A pointer to a
 * struct, converted, points to its first member: C11 6.7.2.1.)
 */
void pk_fini(void *state);
void pk_packed_free(void *state, void *packed);

/* ---- pack ----------------------------------------------------------------------- */

/* What a layout requires of canonical weights beyond the canonical form. */
typedef struct pk_layout_needs {
    const char *layout;   /* the manifest's layout id, for messages */
    uint32_t group;       /* the only group size the layout holds; 0: any */
    int whole_groups;     /* k must be a multiple of the group */
    int finite_scales;    /* every scale must be finite */
} pk_layout_needs;

/*
 * The prologue of every pack: the out-pointers set (then cleared), the
 * weights descriptor present and large enough, n, k and group > 0, codes and
 * scales set, then what `needs` asks (group, whole groups, finite scales),
 * and every zero point in [0, 15]. *tensor is the name for messages
 * ("(unnamed)" when the caller gave none). EDGERT_OK; EDGERT_E_USAGE for bad
 * arguments; EDGERT_E_UNSUPPORTED for what the layout cannot hold.
 */
edgert_status pk_check_pack(const char *plugin, const void *state, const edgert_qweights *w,
                            void **packed, size_t *packed_bytes, const pk_layout_needs *needs,
                            const char **tensor, char *err, size_t err_len);

/* ---- gemm ----------------------------------------------------------------------- */

/*
 * The checks every GEMM makes of its arguments before touching memory:
 * the descriptor is present and large enough, m >= 1, x and y set, strides
 * at least k and n, and (m - 1) * stride fits size_t. `plugin` and `tensor`
 * name the message; n and k are the packed matrix's. EDGERT_OK or
 * EDGERT_E_USAGE with the reason in err.
 */
edgert_status pk_check_gemm_args(const char *plugin, const char *tensor, uint32_t n, uint32_t k,
                                 const edgert_gemm_args *args, char *err, size_t err_len);

/* ---- self-test ------------------------------------------------------------------ */

/* One self-test GEMM: y[m][n] = x W^T for W[n][k] in groups of `group`. */
typedef struct pk_case {
    uint32_t m, n, k, group;
    int symmetric; /* zeros NULL (z = 8) */
} pk_case;

/*
 * What the oracle found for one output y[i][r], exactly (in double), from
 * the activations the path computes with (x_e) and the exact weights
 * w = s (q - z); the plugin's bound is a function of these:
 *   exact    Σ_k x_e,k w_k
 *   sum_xw   Σ_k |x_e,k w_k|
 *   sum_grid Σ_g 2^-13 max_{k in g} |x_k| Σ_{k in g} |w_k|   (a 15-bit grid per group)
 *   sum_xs15 Σ_k 15 |x_k s_k|   (the terms of a kernel that folds the zero point)
 */
typedef struct pk_sums {
    double exact, sum_xw, sum_grid, sum_xs15;
} pk_sums;

/* A plugin's self-test: its cases, its functions on its instance, its bound. */
typedef struct pk_self_test {
    const char *plugin;            /* names every message */
    const char *path;              /* the instance's code path for messages, or NULL */
    void *state;                   /* the instance under test */
    const edgert_host *host;       /* its allocator */
    const pk_case *cases;
    size_t ncases;
    uint32_t seed;                 /* case i draws from seed + i */
    edgert_status (*pack)(void *state, const edgert_qweights *w, void **packed,
                          size_t *packed_bytes, char *err, size_t err_len);
    void (*packed_free)(void *state, void *packed);
    edgert_status (*gemm)(void *state, const void *packed, const edgert_gemm_args *args,
                          char *err, size_t err_len);
    /* Optional: change x after it was drawn (outliers, values out of range). */
    void (*shape_x)(float *x, uint32_t m, uint32_t k, size_t ldx);
    /* Optional: the activation values the path multiplies with, x_e, for one
     * row of x (NULL: x itself, exactly). */
    void (*effective_x)(const void *state, const float *x, uint32_t k, double *out);
    /* The largest |y - exact| the plugin's arithmetic allows for this output. */
    double (*bound)(const void *state, uint32_t m, const pk_sums *s);
} pk_self_test;

/*
 * Run every case: random codes, scales in [0.01, 0.05), zero points 0..15 and
 * x in [-1, 1] in steps of 1e-3 (from the case's seed; ldx = k + 3 and
 * ldy = n + 2, so strides are exercised), pack, gemm, then every output
 * against the exact sum within the plugin's bound, and every y column past n
 * still holding its sentinel. The first failure is EDGERT_E_PLUGIN with
 * the output, the value, the exact sum and the bound in err.
 */
edgert_status pk_run_self_test(const pk_self_test *t, char *err, size_t err_len);

#endif /* EDGERT_PLUGIN_KIT_H */
