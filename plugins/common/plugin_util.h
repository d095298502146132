/*
 * plugins/common/plugin_util.h — small helpers the in-tree GEMM plugins
 * (ref-w4a16, avx512-w4a16, neon-w4a16) share. Header-only (static inline):
 * each plugin stays its own self-contained .so that links nothing of the
 * core. Not part of the vendor-facing API: a vendor needs only
 * include/edgert/plugin.h; this is convenience for plugins built in this tree.
 *
 * No global state; nothing here allocates.
 */
#ifndef EDGERT_PLUGIN_UTIL_H
#define EDGERT_PLUGIN_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "edgert/plugin.h"

/* a * b, a + b, a rounded up to a power-of-two `align`, into *out; 0 on
 * success, -1 on size_t overflow (*out untouched then, except round_up). */
static inline int pu_mul(size_t a, size_t b, size_t *out)
{
    if (b != 0u && a > SIZE_MAX / b)
        return -1;
    *out = a * b;
    return 0;
}

static inline int pu_add(size_t a, size_t b, size_t *out)
{
    if (a > SIZE_MAX - b)
        return -1;
    *out = a + b;
    return 0;
}

static inline int pu_round_up(size_t a, size_t align, size_t *out)
{
    if (pu_add(a, align - 1u, out) != 0)
        return -1;
    *out &= ~(align - 1u);
    return 0;
}

/* Small deterministic generator for self-tests; the state is the caller's. */
static inline uint32_t pu_xorshift32(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

/* Self-test inputs from `*seed`: random code bytes, scales in [0.01, 0.05),
 * zero points 0..15, activations in [-1, 1] in steps of 1e-3. */
__attribute__((unused)) static void pu_selftest_fill(uint32_t *seed, uint8_t *codes,
                                                     size_t ncodes, float *scales,
                                                     uint8_t *zeros, size_t ngroups, float *x,
                                                     size_t nx)
{
    for (size_t i = 0; i < ncodes; i++)
        codes[i] = (uint8_t)pu_xorshift32(seed);
    for (size_t i = 0; i < ngroups; i++) {
        scales[i] = 0.01f + (float)(pu_xorshift32(seed) % 1000u) * 4e-5f;
        zeros[i] = (uint8_t)(pu_xorshift32(seed) % 16u);
    }
    for (size_t i = 0; i < nx; i++)
        x[i] = (float)((int)(pu_xorshift32(seed) % 2001u) - 1000) * 1e-3f;
}

/*
 * The checks every GEMM makes of its arguments before touching memory:
 * the descriptor is present and large enough, m >= 1, x and y set, strides
 * at least k and n, and (m - 1) * stride fits size_t. `plugin` and `tensor`
 * name the message; n and k are the packed matrix's. EDGERT_OK or
 * EDGERT_E_USAGE with the reason in err.
 */
__attribute__((unused)) static edgert_status pu_check_gemm_args(const char *plugin,
                                                                const char *tensor, uint32_t n,
                                                                uint32_t k,
                                                                const edgert_gemm_args *args,
                                                                char *err, size_t err_len)
{
    size_t span;
    if (args == NULL || args->struct_size < offsetof(edgert_gemm_args, ldy) + sizeof(args->ldy)) {
        edgert_errf(err, err_len, "%s: gemm on '%s': arguments NULL or too small (struct_size %u)",
                    plugin, tensor, args != NULL ? (unsigned)args->struct_size : 0u);
        return EDGERT_E_USAGE;
    }
    if (args->m == 0u || args->x == NULL || args->y == NULL) {
        edgert_errf(err, err_len,
                    "%s: gemm on '%s' [m=%u n=%u k=%u]: m must be >= 1 and x, y non-NULL", plugin,
                    tensor, (unsigned)args->m, (unsigned)n, (unsigned)k);
        return EDGERT_E_USAGE;
    }
    if (args->ldx < k || args->ldy < n) {
        edgert_errf(err, err_len,
                    "%s: gemm on '%s' [m=%u n=%u k=%u]: strides too small (ldx %zu must be >= k, "
                    "ldy %zu must be >= n)",
                    plugin, tensor, (unsigned)args->m, (unsigned)n, (unsigned)k, args->ldx, args->ldy);
        return EDGERT_E_USAGE;
    }
    if (pu_mul((size_t)args->m - 1u, args->ldx, &span) != 0 ||
        pu_mul((size_t)args->m - 1u, args->ldy, &span) != 0) {
        edgert_errf(err, err_len, "%s: gemm on '%s' [m=%u n=%u k=%u]: (m - 1) * stride overflows size_t",
                    plugin, tensor, (unsigned)args->m, (unsigned)n, (unsigned)k);
        return EDGERT_E_USAGE;
    }
    return EDGERT_OK;
}

#endif /* EDGERT_PLUGIN_UTIL_H */
