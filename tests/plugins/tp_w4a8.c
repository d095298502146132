/*
 * tests/plugins/tp_w4a8.c — "test-w4a8": an honest scalar W4A8 kernel, so
 * `edgert verify`'s int8 tolerance model (activations emulated per token) is
 * exercised by a CORRECT int8 backend and must pass it.
 *
 * Layout: symmetric int4 (zero point 8), group 128, K a multiple of 128
 * (anything else is refused with EDGERT_E_UNSUPPORTED naming k, as a real
 * tiled kernel would). Activations: per token s = max|x| / 127 (fp32), codes
 * q = rint(x * (127 / max)) — a reciprocal and round-half-even, on purpose
 * not verify's own x / s with round-half-away, so near-ties may differ —
 * clamped to [-127, 127]. Per (row, group) an exact int32 sum of q * (c - 8),
 * then y += (s_x * s_w) * sum in fp32.
 *
 * Self-contained (tp_common.h has no knob for an int8 GEMM).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "edgert/plugin.h"

#define T8_GROUP 128u

typedef struct t8_state {
    const edgert_host *host;
} t8_state;

typedef struct t8_packed {
    uint32_t n, k, groups;
    int8_t *w;     /* [n][k] c - 8 */
    float *scales; /* [n][groups] */
} t8_packed;

static float t8_abs(float v)
{
    return v < 0.0f ? -v : v;
}

/* round half to even, without libm */
static long t8_rint(float v)
{
    long t = (long)v; /* toward zero */
    float frac = t8_abs(v - (float)t);
    if (frac > 0.5f || (frac == 0.5f && (t & 1)))
        t += v < 0.0f ? -1 : 1;
    return t;
}

static edgert_status t8_init(const edgert_host *host, const char *options, void **state,
                             char *err, size_t err_len)
{
    if (options && *options) {
        edgert_errf(err, err_len, "test-w4a8: unknown option (this plugin takes none)");
        return EDGERT_E_USAGE;
    }
    t8_state *s = host->alloc(host->host_ctx, sizeof *s, 16);
    if (!s)
        return EDGERT_E_NOMEM;
    s->host = host;
    *state = s;
    return EDGERT_OK;
}

static void t8_fini(void *state)
{
    t8_state *s = state;
    if (s)
        s->host->free(s->host->host_ctx, s);
}

static void t8_packed_free(void *state, void *packed)
{
    t8_state *s = state;
    t8_packed *p = packed;
    if (!p)
        return;
    s->host->free(s->host->host_ctx, p->w);
    s->host->free(s->host->host_ctx, p->scales);
    s->host->free(s->host->host_ctx, p);
}

static edgert_status t8_pack(void *state, const edgert_qweights *w, void **packed,
                             size_t *packed_bytes, char *err, size_t err_len)
{
    t8_state *s = state;
    if (w->zeros) {
        edgert_errf(err, err_len,
                    "test-w4a8: pack [n=%u k=%u]: asymmetric weights (zero points) are "
                    "not supported: the layout is int4-sym-g128",
                    w->n, w->k);
        return EDGERT_E_UNSUPPORTED;
    }
    if (w->group != T8_GROUP || w->k % T8_GROUP) {
        edgert_errf(err, err_len,
                    "test-w4a8: pack: k=%u must be a multiple of the group 128 (group %u)", w->k,
                    w->group);
        return EDGERT_E_UNSUPPORTED;
    }
    const edgert_host *h = s->host;
    t8_packed *p = h->alloc(h->host_ctx, sizeof *p, 16);
    if (!p)
        return EDGERT_E_NOMEM;
    memset(p, 0, sizeof *p);
    p->n = w->n;
    p->k = w->k;
    p->groups = w->k / T8_GROUP;
    p->w = h->alloc(h->host_ctx, (size_t)w->n * w->k, 64);
    p->scales = h->alloc(h->host_ctx, (size_t)w->n * p->groups * sizeof(float), 64);
    if (!p->w || !p->scales) {
        t8_packed_free(state, p);
        return EDGERT_E_NOMEM;
    }
    size_t stride = (w->k + 1) / 2;
    for (uint32_t r = 0; r < w->n; r++)
        for (uint32_t c = 0; c < w->k; c++) {
            uint8_t b = w->codes[(size_t)r * stride + c / 2];
            p->w[(size_t)r * w->k + c] = (int8_t)(((c & 1) ? b >> 4 : b & 15) - 8);
        }
    memcpy(p->scales, w->scales, (size_t)w->n * p->groups * sizeof(float));
    *packed = p;
    *packed_bytes = (size_t)w->n * w->k + (size_t)w->n * p->groups * sizeof(float);
    return EDGERT_OK;
}

struct t8_job {
    const t8_packed *p;
    const edgert_gemm_args *a;
    const int8_t *q; /* [m][k] */
    const float *sx; /* [m] */
};

static void t8_rows(void *arg, size_t begin, size_t end, unsigned worker)
{
    (void)worker;
    const struct t8_job *j = arg;
    const t8_packed *p = j->p;
    for (uint32_t m = 0; m < j->a->m; m++)
        for (size_t r = begin; r < end; r++) {
            const int8_t *q = j->q + (size_t)m * p->k, *w = p->w + r * p->k;
            float acc = 0.0f;
            for (uint32_t g = 0; g < p->groups; g++) {
                int32_t s = 0;
                for (uint32_t c = g * T8_GROUP; c < (g + 1) * T8_GROUP; c++)
                    s += (int32_t)q[c] * w[c];
                acc += (j->sx[m] * p->scales[r * p->groups + g]) * (float)s;
            }
            j->a->y[m * j->a->ldy + r] = acc;
        }
}

static edgert_status t8_gemm(void *state, const void *packed, const edgert_gemm_args *a,
                             char *err, size_t err_len)
{
    t8_state *s = state;
    const t8_packed *p = packed;
    const edgert_host *h = s->host;
    (void)err;
    (void)err_len;
    int8_t *q = h->alloc(h->host_ctx, (size_t)a->m * p->k, 64);
    float *sx = h->alloc(h->host_ctx, (size_t)a->m * sizeof(float), 64);
    if (!q || !sx) {
        h->free(h->host_ctx, q);
        h->free(h->host_ctx, sx);
        return EDGERT_E_NOMEM;
    }
    for (uint32_t m = 0; m < a->m; m++) {
        const float *x = a->x + m * a->ldx;
        float mx = 0.0f;
        for (uint32_t c = 0; c < p->k; c++)
            mx = t8_abs(x[c]) > mx ? t8_abs(x[c]) : mx;
        sx[m] = mx / 127.0f;
        float inv = mx > 0.0f ? 127.0f / mx : 0.0f;
        for (uint32_t c = 0; c < p->k; c++) {
            long v = t8_rint(x[c] * inv);
            q[(size_t)m * p->k + c] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
    }
    struct t8_job j = {p, a, q, sx};
    h->parallel_for(h->host_ctx, p->n, 16, t8_rows, &j);
    h->free(h->host_ctx, q);
    h->free(h->host_ctx, sx);
    return EDGERT_OK;
}

static edgert_status t8_self_test(void *state, char *err, size_t err_len)
{
    (void)state;
    (void)err;
    (void)err_len;
    return EDGERT_OK; /* verify is the test */
}

static const char *t8_describe(void *state)
{
    (void)state;
    return "test plugin: scalar W4A8, int8 activations per token, exact int32 group sums";
}

static const edgert_plugin t8_descriptor = {
    .struct_size = sizeof(edgert_plugin),
    .abi_version = 1,
    .name = "test-w4a8",
    .version = "0.0.1",
    .caps = EDGERT_CAP_GEMM,
    .init = t8_init,
    .fini = t8_fini,
    .self_test = t8_self_test,
    .describe = t8_describe,
    .pack = t8_pack,
    .packed_free = t8_packed_free,
    .gemm = t8_gemm,
    .export_graph = NULL,
};

EDGERT_PLUGIN_EXPORT edgert_status edgert_plugin_entry(uint32_t abi_min, uint32_t abi_max,
                                                       const edgert_host *host,
                                                       const edgert_plugin **out, char *err,
                                                       size_t err_len)
{
    (void)host;
    if (abi_max < 1 || abi_min > 1) {
        edgert_errf(err, err_len, "test-w4a8: host offers ABI %u..%u, this plugin speaks 1",
                    abi_min, abi_max);
        return EDGERT_E_ABI;
    }
    *out = &t8_descriptor;
    return EDGERT_OK;
}
