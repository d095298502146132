/*
 * runner/attn.h — the attention kernels, one set per ISA, picked once per
 * model from the device's CPU flags (attn.c): the portable C set always,
 * AVX2+FMA and AVX-512F sets on x86-64 (attn_avx2.c, attn_avx512.c, each
 * compiled with its own flags only; the rest of the runner never is).
 *
 * The K cache of one KV head is kept in blocks of RN_KBLOCK positions,
 * each block transposed: dimension j of position p is
 * kt[(p / 16) * 16 d + 16 j + p % 16]. The scores of 16 consecutive
 * positions are then 16 lanes of one register, accumulated over j with a
 * broadcast of q[j] and no horizontal sum, and a block's d rows are one
 * contiguous 64 d bytes, read as a stream (a layout with one row per
 * dimension over the whole context made d streams, more than the hardware
 * prefetcher follows: decode at context 512 spent 26% over its GEMMs). V is
 * one row per position of the head, v[p * d + j].
 *
 * A set's cache holds fp32 (kv_bytes 4) or IEEE fp16 (kv_bytes 2: half the
 * bytes a decode step reads of it; rounded to nearest, relative error at
 * most 2^-11, magnitudes saturated at 65504 so no finite value becomes
 * inf); kv_put writes it, qk and pv read it. The fp16 set exists where F16C
 * converts 8 values per instruction (attn_avx2.c); the fp32 reference
 * always keeps fp32.
 */
#ifndef EDGERT_RUNNER_ATTN_H
#define EDGERT_RUNNER_ATTN_H

#include <stddef.h>
#include <stdint.h>

#define RN_KBLOCK 16u

/*
 * The g query heads that share one KV head (grouped-query attention) are
 * done together, so K and V are read once for all of them: head h's query
 * is q + h * d, its scores s + h * ls, its output o + h * d.
 */
typedef struct rn_attn_kern {
    const char *name;
    unsigned kv_bytes; /**< bytes of one cached value: 4 (fp32) or 2 (fp16) */
    /** s[h * ls + p] = scale * sum_j q[h * d + j] K[p][j], h < g, p < n (kt: the blocked
     *  layout above, in the set's format) */
    void (*qk)(const float *q, uint32_t g, const void *kt, uint32_t d, uint32_t n, float scale,
               float *s, size_t ls);
    /** s[p] = exp(s[p] - max(s)) in place; returns their sum */
    double (*softmax)(float *s, uint32_t n);
    /** o[h * d + j] = scale[h] * sum_p w[h * lw + p] v[p * d + j], h < g, j < d */
    void (*pv)(const float *w, size_t lw, uint32_t g, const void *v, uint32_t d, uint32_t n,
               const float *scale, float *o);
    /** a[i] = SiLU(g[i]) * u[i] = g[i] / (1 + exp(-g[i])) * u[i], i < n (the MLP's gate) */
    void (*silu_mul)(const float *g, const float *u, float *a, uint32_t n);
    /** value i of the cache at dst + i * stride (in values), i < n, = src[i] in the set's
     *  format */
    void (*kv_put)(const float *src, uint32_t n, void *dst, size_t stride);
    /** a[i] = SiLU(g[perm[i]]) * u[perm[i]], i < n: silu_mul's result in an act-order
     *  layer's order (perm: a permutation of 0 .. n-1) */
    void (*silu_mul_gather)(const float *g, const float *u, const uint32_t *perm, float *a,
                            uint32_t n);
    /** dst[i] = src[idx[i]], i < n (idx below 2^31) */
    void (*gather)(const float *src, const uint32_t *idx, uint32_t n, float *dst);
} rn_attn_kern;

/** The portable silu_mul_gather and gather, which sets without their own
 *  use (the AVX-512 one: no machine here to measure its gathers on). */
void rn_silu_mul_gather_c(const float *g, const float *u, const uint32_t *perm, float *a,
                          uint32_t n);
void rn_gather_c(const float *src, const uint32_t *idx, uint32_t n, float *dst);

/** The most query heads per KV head the kernels take at once. */
#define RN_ATTN_MAX_GROUP 64u

/** The best set the CPU flags (edgert_device.cpu_flags) allow; with kv16,
 *  the best whose cache is fp16 when one runs here (else an fp32 one). */
const rn_attn_kern *rn_attn_pick(uint64_t cpu_flags, int kv16);

/** The fp32 cache's kv_put, for every set that keeps fp32. */
void rn_kv_put_f32(const float *src, uint32_t n, void *dst, size_t stride);

extern const rn_attn_kern rn_attn_portable;
#if defined(__x86_64__)
extern const rn_attn_kern rn_attn_avx2;
extern const rn_attn_kern rn_attn_avx2_f16;
extern const rn_attn_kern rn_attn_avx512;
#endif

#endif
