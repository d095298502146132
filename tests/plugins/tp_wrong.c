/*
 * tests/plugins/tp_wrong.c — "test-wrong": a plugin with a SUBTLE bug that
 * its own self-test does not see, for `edgert verify` to catch.
 *
 * The bug: the last group of every row is dequantized with the symmetric
 * zero point 8 instead of the stored one. Symmetric weights (zero point 8
 * everywhere, as in the self-test) come out right; asymmetric weights are off
 * by s * (z - 8) * Σ x over the last group wherever z != 8 — a few percent of
 * an output, and only in some rows. Everything else (ABI, strides, padding,
 * threading) is honest, so only the arithmetic check can fail it.
 *
 * Self-contained on purpose (tp_common.h has no knob for a wrong GEMM).
 */
#include <stdio.h>
#include <string.h>

#include "edgert/plugin.h"

typedef struct tw_state {
    const edgert_host *host;
} tw_state;

typedef struct tw_packed {
    uint32_t n, k;
    float *w; /* dequantized [n][k] */
} tw_packed;

static void tw_msg(char *err, size_t len, const char *msg)
{
    if (err && len)
        snprintf(err, len, "%s", msg);
}

static edgert_status tw_init(const edgert_host *host, const char *options, void **state,
                             char *err, size_t err_len)
{
    if (options && *options) {
        tw_msg(err, err_len, "test-wrong: unknown option (this plugin takes none)");
        return EDGERT_E_USAGE;
    }
    tw_state *s = host->alloc(host->host_ctx, sizeof *s, 16);
    if (!s) {
        tw_msg(err, err_len, "test-wrong: out of memory");
        return EDGERT_E_NOMEM;
    }
    s->host = host;
    *state = s;
    return EDGERT_OK;
}

static void tw_fini(void *state)
{
    tw_state *s = state;
    if (s)
        s->host->free(s->host->host_ctx, s);
}

static edgert_status tw_pack(void *state, const edgert_qweights *w, void **packed,
                             size_t *packed_bytes, char *err, size_t err_len)
{
    tw_state *s = state;
    uint32_t groups = (w->k + w->group - 1) / w->group;
    tw_packed *p = s->host->alloc(s->host->host_ctx, sizeof *p, 16);
    if (!p) {
        tw_msg(err, err_len, "test-wrong: out of memory");
        return EDGERT_E_NOMEM;
    }
    p->n = w->n;
    p->k = w->k;
    p->w = s->host->alloc(s->host->host_ctx, (size_t)w->n * w->k * sizeof(float), 64);
    if (!p->w) {
        s->host->free(s->host->host_ctx, p);
        tw_msg(err, err_len, "test-wrong: out of memory");
        return EDGERT_E_NOMEM;
    }
    size_t stride = (w->k + 1) / 2;
    for (uint32_t r = 0; r < w->n; r++)
        for (uint32_t c = 0; c < w->k; c++) {
            uint8_t b = w->codes[(size_t)r * stride + c / 2];
            int q = (c & 1) ? b >> 4 : b & 15;
            uint32_t g = c / w->group;
            size_t gi = (size_t)r * groups + g;
            int z = (w->zeros && g + 1 < groups) ? w->zeros[gi] : 8; /* THE BUG */
            p->w[(size_t)r * w->k + c] = w->scales[gi] * (float)(q - z);
        }
    *packed = p;
    *packed_bytes = (size_t)w->n * w->k * sizeof(float);
    return EDGERT_OK;
}

static void tw_packed_free(void *state, void *packed)
{
    tw_state *s = state;
    tw_packed *p = packed;
    if (!p)
        return;
    s->host->free(s->host->host_ctx, p->w);
    s->host->free(s->host->host_ctx, p);
}

struct tw_job {
    const tw_packed *p;
    const edgert_gemm_args *a;
};

static void tw_rows(void *arg, size_t begin, size_t end, unsigned worker)
{
    (void)worker;
    const struct tw_job *j = arg;
    for (uint32_t m = 0; m < j->a->m; m++)
        for (size_t r = begin; r < end; r++) {
            const float *x = j->a->x + m * j->a->ldx, *w = j->p->w + r * j->p->k;
            float acc = 0.0f;
            for (uint32_t c = 0; c < j->p->k; c++)
                acc += x[c] * w[c];
            j->a->y[m * j->a->ldy + r] = acc;
        }
}

static edgert_status tw_gemm(void *state, const void *packed, const edgert_gemm_args *a,
                             char *err, size_t err_len)
{
    tw_state *s = state;
    struct tw_job j = {packed, a};
    (void)err;
    (void)err_len;
    s->host->parallel_for(s->host->host_ctx, j.p->n, 16, tw_rows, &j);
    return EDGERT_OK;
}

/* Symmetric weights only, like too many real self-tests: the bug hides. */
static edgert_status tw_self_test(void *state, char *err, size_t err_len)
{
    uint8_t codes[4] = {0x9A, 0x78, 0x87, 0xA9}; /* row0: 10 9 8 7, row1: 7 8 9 10 */
    float scales[2] = {0.5f, 0.25f};
    edgert_qweights w = {sizeof w, 2, 4, 4, codes, scales, NULL, "self-test"};
    void *p = NULL;
    size_t bytes = 0;
    edgert_status st = tw_pack(state, &w, &p, &bytes, err, err_len);
    if (st != EDGERT_OK)
        return st;
    float x[4] = {1, 2, 3, 4}, y[2] = {0, 0};
    edgert_gemm_args a = {sizeof a, 1, x, 4, y, 2};
    st = tw_gemm(state, p, &a, err, err_len);
    tw_packed_free(state, p);
    if (st == EDGERT_OK && (y[0] != 0.0f || y[1] != 2.5f)) {
        tw_msg(err, err_len, "test-wrong: self-test GEMM mismatch");
        return EDGERT_E_PLUGIN;
    }
    return st;
}

static const char *tw_describe(void *state)
{
    (void)state;
    return "test plugin with a deliberate bug: last group's zero point taken as 8";
}

static const edgert_plugin tw_descriptor = {
    .struct_size = sizeof(edgert_plugin),
    .abi_version = 1,
    .name = "test-wrong",
    .version = "0.0.1",
    .caps = EDGERT_CAP_GEMM,
    .init = tw_init,
    .fini = tw_fini,
    .self_test = tw_self_test,
    .describe = tw_describe,
    .pack = tw_pack,
    .packed_free = tw_packed_free,
    .gemm = tw_gemm,
    .export_graph = NULL,
};

EDGERT_PLUGIN_EXPORT edgert_status edgert_plugin_entry(uint32_t abi_min, uint32_t abi_max,
                                                       const edgert_host *host,
                                                       const edgert_plugin **out, char *err,
                                                       size_t err_len)
{
    (void)host;
    if (abi_max < 1 || abi_min > 1) {
        if (err && err_len)
            snprintf(err, err_len, "test-wrong: host offers ABI %u..%u, this plugin speaks 1",
                     abi_min, abi_max);
        return EDGERT_E_ABI;
    }
    *out = &tw_descriptor;
    return EDGERT_OK;
}
