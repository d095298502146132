/*
 * tools/generate.c — seeded workloads (generate.h). Uses the public API only.
 *
 * Every row of a dense matrix is generated from its own stream seeded by
 * (seed, row), so the numbers do not depend on how rows are split across
 * threads.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "generate.h"

/* Rows quantized per edgert_quantize_rtn call by gen_qtensor: small enough
 * that the fp32 block (GEN_QBLOCK_ROWS * k * 4 bytes, 416 KiB at k = 6656)
 * stays in cache, large enough that the call's allocation is amortised. */
#define GEN_QBLOCK_ROWS 16u

/* ---- the random number generator ------------------------------------------------ */

uint64_t gen_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t gen_mix64(uint64_t x)
{
    return gen_splitmix64(&x);
}

static uint64_t gen_rotl(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

void gen_rng_seed(gen_rng *r, uint64_t seed)
{
    if (r == NULL)
        return;
    /* splitmix64 never yields four zero words in a row, so the xoshiro state
     * is never the all-zero fixed point, whatever the seed. */
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = gen_splitmix64(&x);
    r->spare = 0.0;
    r->has_spare = 0;
}

uint64_t gen_rng_next(gen_rng *r)
{
    /* xoshiro256** (Blackman & Vigna), written from the published recurrence */
    uint64_t *s = r->s;
    uint64_t result = gen_rotl(s[1] * 5u, 7) * 9u;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = gen_rotl(s[3], 45);
    return result;
}

float gen_rng_normal(gen_rng *r)
{
    if (r->has_spare) {
        r->has_spare = 0;
        return (float)r->spare;
    }
    /* Box-Muller. u1 in (0, 1] so log(u1) is finite; u2 in [0, 1). The top
     * 53 bits make an exact double. */
    double u1 = (double)((gen_rng_next(r) >> 11) + 1u) * 0x1.0p-53;
    double u2 = (double)(gen_rng_next(r) >> 11) * 0x1.0p-53;
    double rad = sqrt(-2.0 * log(u1));
    double ang = 6.283185307179586476925 * u2;
    r->spare = rad * sin(ang);
    r->has_spare = 1;
    return (float)(rad * cos(ang));
}

void gen_fill_weights(float *w, size_t count, uint64_t seed)
{
    if (w == NULL)
        return;
    gen_rng r;
    gen_rng_seed(&r, seed);
    for (size_t i = 0; i < count; i++)
        w[i] = 0.02f * gen_rng_normal(&r);
}

/* ---- dense weights ------------------------------------------------------------- */

/* Approximately normal row: the sum of four 16-bit uniforms (Irwin-Hall),
 * standardised. Two nanoseconds a value, where Box-Muller costs ~15: the
 * bench generates 1.7 billion of them. Tails stop at ±3.46 sigma, which
 * quantization error does not care about. */
static void fill_row(float *row, uint32_t k, uint64_t seed, uint32_t r, float std)
{
    gen_rng g;
    gen_rng_seed(&g, gen_mix64(seed) ^ gen_mix64((uint64_t)r + 0x51ED2701ull));
    const float mean = 2.0f * 65535.0f;
    const float inv = std / (65536.0f * 0.57735027f); /* sqrt(4/12) * 65536 */
    for (uint32_t i = 0; i < k; i++) {
        uint64_t u = gen_rng_next(&g);
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

void gen_dense(edgert_ctx *ctx, float *w, uint32_t n, uint32_t k, uint64_t seed, float std)
{
    struct dense_job j = {w, k, seed, std};
    edgert_parallel_for(ctx, n, 64, dense_rows, &j);
}

/* ---- quantized weights ---------------------------------------------------------- */

struct q_job {
    edgert_qtensor *t;
    uint32_t k, group;
    uint64_t seed;
    float std;
    int symmetric;
    int failed; /* set (racily, to 1 only) when a block cannot be quantized */
};

/* Copy rows [0, rows) of a block quantized on its own into rows [r0, ...) of
 * the whole tensor: quantization is per (row, group), so a block's rows are
 * the whole tensor's rows bit for bit. */
static void q_copy_rows(const struct q_job *j, const edgert_qtensor *b, size_t r0, size_t rows)
{
    size_t stride = ((size_t)j->k + 1u) / 2u;
    size_t groups = (size_t)(j->k / j->group) + (j->k % j->group != 0u);
    memcpy(j->t->codes + r0 * stride, b->codes, rows * stride);
    memcpy(j->t->scales + r0 * groups, b->scales, rows * groups * sizeof(float));
    if (!j->symmetric)
        memcpy(j->t->zeros + r0 * groups, b->zeros, rows * groups);
}

static void q_rows(void *arg, size_t begin, size_t end, unsigned worker)
{
    (void)worker;
    struct q_job *j = arg;
    float *block = malloc((size_t)GEN_QBLOCK_ROWS * j->k * sizeof(float));
    if (!block) {
        __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    for (size_t r0 = begin; r0 < end; r0 += GEN_QBLOCK_ROWS) {
        size_t rows = end - r0 < GEN_QBLOCK_ROWS ? end - r0 : GEN_QBLOCK_ROWS;
        for (size_t i = 0; i < rows; i++)
            fill_row(block + i * j->k, j->k, j->seed, (uint32_t)(r0 + i), j->std);
        edgert_qtensor b;
        if (edgert_quantize_rtn(block, (uint32_t)rows, j->k, j->group, j->symmetric, &b) !=
            EDGERT_OK) {
            __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
            break;
        }
        q_copy_rows(j, &b, r0, rows);
        edgert_qtensor_free(&b);
    }
    free(block);
}

/* An owning tensor of the canonical shape (codes zeroed), freed by
 * edgert_qtensor_free, which frees each buffer with free(). */
static edgert_status q_alloc(uint32_t n, uint32_t k, uint32_t group, int symmetric,
                             edgert_qtensor *out)
{
    size_t stride = ((size_t)k + 1u) / 2u, groups = (size_t)(k / group) + (k % group != 0u);
    size_t codes_bytes, count, scales_bytes;
    memset(out, 0, sizeof *out);
    if (__builtin_mul_overflow((size_t)n, stride, &codes_bytes) ||
        __builtin_mul_overflow((size_t)n, groups, &count) ||
        __builtin_mul_overflow(count, sizeof(float), &scales_bytes))
        return EDGERT_E_NOMEM;
    out->codes = calloc(codes_bytes, 1);
    out->scales = malloc(scales_bytes);
    out->zeros = symmetric ? NULL : malloc(count);
    if (!out->codes || !out->scales || (!symmetric && !out->zeros)) {
        edgert_qtensor_free(out);
        return EDGERT_E_NOMEM;
    }
    out->view = (edgert_qweights){
        .struct_size = sizeof(edgert_qweights), .n = n, .k = k, .group = group,
        .codes = out->codes, .scales = out->scales, .zeros = out->zeros, .name = NULL,
    };
    return EDGERT_OK;
}

edgert_status gen_qtensor(edgert_ctx *ctx, uint32_t n, uint32_t k, uint32_t group, int symmetric,
                          uint64_t seed, float std, edgert_qtensor *out)
{
    if (out == NULL || n == 0u || k == 0u || group == 0u)
        return EDGERT_E_USAGE;
    edgert_status st = q_alloc(n, k, group, symmetric, out);
    if (st != EDGERT_OK)
        return st;
    struct q_job j = {out, k, group, seed, std, symmetric, 0};
    edgert_parallel_for(ctx, n, GEN_QBLOCK_ROWS, q_rows, &j);
    if (j.failed) {
        edgert_qtensor_free(out);
        return EDGERT_E_NOMEM;
    }
    return EDGERT_OK;
}

/* ---- activations ---------------------------------------------------------------- */

void gen_activations(float *x, uint32_t m, uint32_t k, uint64_t seed)
{
    gen_rng g;
    gen_rng_seed(&g, gen_mix64(seed ^ 0xAC71u));
    /* Outlier channels: the same columns in every row, as in real models
     * where a few hidden dimensions carry most of the magnitude. */
    uint32_t n_out = k / 256 > 2 ? k / 256 : 2;
    if (n_out > k)
        n_out = k;
    uint8_t *outlier = calloc(k, 1);
    for (uint32_t i = 0; outlier && i < n_out; i++)
        outlier[gen_rng_next(&g) % k] = 1;
    for (uint32_t r = 0; r < m; r++)
        for (uint32_t c = 0; c < k; c++) {
            /* normal × exp(0.5·normal): a scale mixture with heavy tails;
             * E[x²] = e^{0.5}, so divide by e^{0.25} for RMS ≈ 1 */
            float v = gen_rng_normal(&g) * expf(0.5f * gen_rng_normal(&g)) * 0.7788008f;
            x[(size_t)r * k + c] = (outlier && outlier[c]) ? 30.0f * v : v;
        }
    free(outlier);
}
