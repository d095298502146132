/*
 * examples/minimal-plugin/minimal_w4a16.c — the smallest honest edgert
 * backend: plain C, int4 weights with scales and zero points in any group,
 * fp32 activations, every output an fp32 dot product over the weights
 * dequantized group by group. Copy this folder to start a backend of your
 * own (docs/vendor-quickstart.md walks through it); replace the GEMM with
 * your kernel and its bound with the one your arithmetic implies.
 *
 * What a backend owes edgert (include/edgert/plugin.h is the contract):
 *   - one exported symbol, edgert_plugin_entry, answering a descriptor for
 *     an ABI version both sides speak;
 *   - init / fini of an instance, whose memory comes from the host;
 *   - pack: canonical weights (edgert_qweights) into your own layout, the
 *     packed bytes from host->alloc, refusing what the layout cannot hold
 *     with a message that names the tensor;
 *   - gemm: y[m][n] = x[m][k] W^T with the strides given, threads through
 *     host->parallel_for, writing nothing past n in a row of y;
 *   - self_test: your GEMM against an exact sum under a bound you derive.
 * The plugin kit (edgert::plugin_kit, <plugin_kit.h>) does the argument
 * checks and the self-test's bookkeeping; edgert_add_plugin links it.
 * edgert checks your arithmetic again at first contact, whatever your
 * self-test says (WRONG_RESULTS), and `edgert verify` much harder.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "edgert/plugin.h"
#include "plugin_kit.h"

/* The backend's name, which the manifest's must equal: the build's
 * project name (CMakeLists.txt). */
#ifndef MIN_NAME
#define MIN_NAME "minimal-w4a16"
#endif
#ifndef MIN_VERSION
#define MIN_VERSION "0.0.0"
#endif

/* The instance: the kit's convention puts the host table first, so
 * pk_fini and pk_packed_free serve as they are. */
typedef struct min_state {
    const edgert_host *host;
} min_state;

/* One packed matrix, one host->alloc block: the header, then the codes
 * (k/2 bytes a row, rounded up), the scales and the zero points (one byte
 * each, 8 for symmetric weights) of every (row, group). */
typedef struct min_packed {
    uint32_t n, k, group, groups;
    size_t row_bytes;
    const uint8_t *codes, *zeros;
    const float *scales;
} min_packed;

static edgert_status min_init(const edgert_host *host, const char *options, void **state,
                              char *err, size_t err_len)
{
    edgert_status rc = pk_check_init(MIN_NAME, host, state, err, err_len);
    if (rc != EDGERT_OK)
        return rc;
    if (options != NULL && options[0] != '\0') {
        edgert_errf(err, err_len, "%s: no options are known (got '%s')", MIN_NAME, options);
        return EDGERT_E_USAGE;
    }
    min_state *st = host->alloc(host->host_ctx, sizeof *st, 16);
    if (st == NULL) {
        edgert_errf(err, err_len, "%s: out of memory", MIN_NAME);
        return EDGERT_E_NOMEM;
    }
    st->host = host;
    *state = st;
    return EDGERT_OK;
}

static edgert_status min_pack(void *state, const edgert_qweights *w, void **packed,
                              size_t *packed_bytes, char *err, size_t err_len)
{
    /* any group, K need not be a multiple of it (manifest: partial_groups) */
    const pk_layout_needs needs = {.layout = "int4-asym-any", .finite_scales = 1};
    const char *tensor = NULL;
    edgert_status rc = pk_check_pack(MIN_NAME, state, w, packed, packed_bytes, &needs, &tensor,
                                     err, err_len);
    if (rc != EDGERT_OK)
        return rc;
    const min_state *st = state;
    size_t row_bytes = (w->k + 1u) / 2u, groups = pk_groups(w->k, w->group);
    size_t codes, metas, total;
    if (pk_mul(row_bytes, w->n, &codes) || pk_mul(groups, w->n, &metas) ||
        pk_add(sizeof(min_packed) + codes, metas * (sizeof(float) + 1u), &total)) {
        edgert_errf(err, err_len, "%s: %s: %u x %u weights overflow", MIN_NAME, tensor, w->n,
                    w->k);
        return EDGERT_E_USAGE;
    }
    uint8_t *block = st->host->alloc(st->host->host_ctx, total, 64);
    if (block == NULL) {
        edgert_errf(err, err_len, "%s: %s: out of memory for %zu bytes", MIN_NAME, tensor, total);
        return EDGERT_E_NOMEM;
    }
    min_packed *p = (min_packed *)block;
    float *scales = (float *)(block + sizeof *p);              /* float-aligned first */
    uint8_t *zeros = (uint8_t *)(scales + metas), *cd = zeros + metas;
    memcpy(scales, w->scales, metas * sizeof(float));
    if (w->zeros != NULL)
        memcpy(zeros, w->zeros, metas);
    else
        memset(zeros, 8, metas); /* symmetric: zero point 8 */
    memcpy(cd, w->codes, codes);
    *p = (min_packed){.n = w->n, .k = w->k, .group = w->group, .groups = (uint32_t)groups,
                      .row_bytes = row_bytes, .codes = cd, .zeros = zeros, .scales = scales};
    *packed = p;
    *packed_bytes = total;
    return EDGERT_OK;
}

typedef struct min_job {
    const min_packed *p;
    const edgert_gemm_args *a;
} min_job;

/* Rows [begin, end) of W for every token: per group, the codes minus the
 * zero point times the scale, in fp32, summed in order. */
static void min_rows(void *arg, size_t begin, size_t end, unsigned worker)
{
    (void)worker;
    const min_job *j = arg;
    const min_packed *p = j->p;
    for (size_t r = begin; r < end; r++) {
        const uint8_t *codes = p->codes + r * p->row_bytes;
        for (uint32_t i = 0; i < j->a->m; i++) {
            const float *x = j->a->x + (size_t)i * j->a->ldx;
            float acc = 0.0f;
            for (uint32_t g = 0; g < p->groups; g++) {
                uint32_t c0 = g * p->group, c1 = c0 + p->group < p->k ? c0 + p->group : p->k;
                float s = p->scales[r * p->groups + g];
                int z = p->zeros[r * p->groups + g];
                for (uint32_t c = c0; c < c1; c++)
                    acc += x[c] * (s * (float)((int)pk_code(codes, c) - z));
            }
            j->a->y[(size_t)i * j->a->ldy + r] = acc;
        }
    }
}

static edgert_status min_gemm(void *state, const void *packed, const edgert_gemm_args *args,
                              char *err, size_t err_len)
{
    const min_state *st = state;
    const min_packed *p = packed;
    if (st == NULL || p == NULL) {
        edgert_errf(err, err_len, "%s: gemm: no instance or no packed weights", MIN_NAME);
        return EDGERT_E_USAGE;
    }
    edgert_status rc = pk_check_gemm_args(MIN_NAME, "packed", p->n, p->k, args, err, err_len);
    if (rc != EDGERT_OK)
        return rc;
    min_job job = {p, args};
    st->host->parallel_for(st->host->host_ctx, p->n, 4, min_rows, &job);
    return EDGERT_OK;
}

/* Odd shapes on purpose: an odd K (the padding nibble), a partial last
 * group, symmetric and not, N not a multiple of anything. */
static const pk_case min_cases[] = {
    {3u, 21u, 301u, 32u, 0},
    {1u, 7u, 256u, 128u, 1},
    {2u, 5u, 200u, 64u, 0},
};

/* The bound, derived: each weight s (q - z) is one fp32 rounding (q - z is
 * exact), each product one more, and k sums in order add at most k
 * roundings of the running sum: |y - exact| <= (k + 2) u sum|x w| with
 * u = 2^-24 (Higham's bound for a dot product in any order), plus 1e-30
 * for sums of exact zeros. */
static double min_bound(const void *state, uint32_t m, const pk_sums *s)
{
    (void)state;
    (void)m;
    return ((double)s->k + 2.0) * 0x1p-24 * s->sum_xw + 1e-30;
}

static edgert_status min_self_test(void *state, char *err, size_t err_len)
{
    const min_state *st = state;
    const pk_self_test t = {
        .plugin = MIN_NAME, .state = state, .host = st != NULL ? st->host : NULL,
        .cases = min_cases, .ncases = sizeof min_cases / sizeof min_cases[0], .seed = 7u,
        .pack = min_pack, .packed_free = pk_packed_free, .gemm = min_gemm, .bound = min_bound,
    };
    return pk_run_self_test(&t, err, err_len);
}

static const char *min_describe(void *state)
{
    (void)state;
    return "plain C: fp32 activations, weights dequantized group by group";
}

static const edgert_plugin min_plugin = {
    .struct_size = sizeof(edgert_plugin), .abi_version = 1u, .name = MIN_NAME,
    .version = MIN_VERSION, .caps = EDGERT_CAP_GEMM, .init = min_init, .fini = pk_fini,
    .self_test = min_self_test, .describe = min_describe, .pack = min_pack,
    .packed_free = pk_packed_free, .gemm = min_gemm, .export_graph = NULL,
};

EDGERT_PLUGIN_EXPORT edgert_status edgert_plugin_entry(uint32_t abi_min, uint32_t abi_max,
                                                       const edgert_host *host,
                                                       const edgert_plugin **out, char *err,
                                                       size_t err_len)
{
    (void)host; /* init gets the host table again */
    static const edgert_plugin *const by_abi[] = {&min_plugin}; /* ABI 1 */
    return EDGERT_PLUGIN_NEGOTIATE(abi_min, abi_max, by_abi, MIN_NAME, out, err, err_len);
}
