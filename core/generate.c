/*
 * core/generate.c — deterministic workloads for bench, verify and tests.
 *
 * Every row is generated from its own stream seeded by (seed, row), so the
 * numbers do not depend on how rows are split across threads.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "weights_gen.h"

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Approximately normal row: the sum of four 16-bit uniforms (Irwin-Hall),
 * standardised. Two nanoseconds a value, where Box-Muller costs ~15: the
 * bench generates 1.7 billion of them. Tails stop at ±3.46 sigma, which
 * quantization error does not care about. */
static void fill_row(float *row, uint32_t k, uint64_t seed, uint32_t r, float std)
{
    er_rng g;
    er_rng_seed(&g, mix(seed) ^ mix((uint64_t)r + 0x51ED2701ull));
    const float mean = 2.0f * 65535.0f;
    const float inv = std / (65536.0f * 0.57735027f); /* sqrt(4/12) * 65536 */
    for (uint32_t i = 0; i < k; i++) {
        uint64_t u = er_rng_next(&g);
        float s = (float)(u & 0xFFFF) + (float)((u >> 16) & 0xFFFF) + (float)((u >> 32) & 0xFFFF) +
                  (float)(u >> 48);
        row[i] = (s - mean) * inv;
    }
}

struct dense_job {
    float *w;
    uint32_t k;
    uint64_t seed;
    float std;
};

static void dense_rows(void *arg, size_t begin, size_t end, unsigned worker)
{
    (void)worker;
    struct dense_job *j = arg;
    for (size_t r = begin; r < end; r++)
        fill_row(j->w + r * j->k, j->k, j->seed, (uint32_t)r, j->std);
}

void edgert_generate_dense(edgert_ctx *ctx, float *w, uint32_t n, uint32_t k, uint64_t seed,
                           float std)
{
    struct dense_job j = {w, k, seed, std};
    if (ctx)
        er_pool_run(ctx->pool, n, 64, dense_rows, &j);
    else
        dense_rows(&j, 0, n, 0);
}

struct q_job {
    edgert_qtensor *t;
    uint32_t k, group;
    uint64_t seed;
    float std;
    int symmetric;
    int failed; /* set (racily, to 1 only) when a row buffer cannot be allocated */
};

static void q_rows(void *arg, size_t begin, size_t end, unsigned worker)
{
    (void)worker;
    struct q_job *j = arg;
    /* One row of fp32 per chunk: the whole transient of the generator. */
    float *row = malloc((size_t)j->k * sizeof(float));
    if (!row) {
        __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    for (size_t r = begin; r < end; r++) {
        fill_row(row, j->k, j->seed, (uint32_t)r, j->std);
        er_quantize_row(row, j->k, j->group, j->symmetric, &j->t->view, (uint32_t)r);
    }
    free(row);
}

edgert_status edgert_generate_qtensor(edgert_ctx *ctx, uint32_t n, uint32_t k, uint32_t group,
                                      int symmetric, uint64_t seed, float std,
                                      edgert_qtensor *out)
{
    edgert_status st = er_qtensor_alloc(n, k, group, symmetric, out);
    if (st != EDGERT_OK)
        return st;
    struct q_job j = {out, k, group, seed, std, symmetric, 0};
    if (ctx)
        er_pool_run(ctx->pool, n, 16, q_rows, &j);
    else
        q_rows(&j, 0, n, 0);
    if (j.failed) {
        edgert_qtensor_free(out);
        return EDGERT_E_NOMEM;
    }
    return EDGERT_OK;
}

void edgert_generate_activations(float *x, uint32_t m, uint32_t k, uint64_t seed)
{
    er_rng g;
    er_rng_seed(&g, mix(seed ^ 0xAC71u));
    /* Outlier channels: the same columns in every row, as in real models
     * where a few hidden dimensions carry most of the magnitude. */
    uint32_t n_out = k / 256 > 2 ? k / 256 : 2;
    if (n_out > k)
        n_out = k;
    uint8_t *outlier = calloc(k, 1);
    for (uint32_t i = 0; outlier && i < n_out; i++)
        outlier[er_rng_next(&g) % k] = 1;
    for (uint32_t r = 0; r < m; r++)
        for (uint32_t c = 0; c < k; c++) {
            /* normal × exp(0.5·normal): a scale mixture with heavy tails;
             * E[x²] = e^{0.5}, so divide by e^{0.25} for RMS ≈ 1 */
            float v = er_rng_normal(&g) * expf(0.5f * er_rng_normal(&g)) * 0.7788008f;
            x[(size_t)r * k + c] = (outlier && outlier[c]) ? 30.0f * v : v;
        }
    free(outlier);
}
