/*
 * runner/internal.h — the model runner's own types (edgert/runner.h is its
 * public face): the configuration, the weights of each layer, the forward
 * pass's buffers. The runner uses edgert.h's public API and the formats
 * library's safetensors and YAML readers (core/formats/safetensors.h,
 * core/formats/yamldoc.h: JSON is YAML), nothing of libedgert's internals.
 */
#ifndef EDGERT_RUNNER_INTERNAL_H
#define EDGERT_RUNNER_INTERNAL_H

#include <stdint.h>

#include "attn.h"
#include "common/internal.h" /* er_fail: an error into err, returning its status */
#include "edgert/runner.h"
#include "formats/safetensors.h"
#include "formats/yamldoc.h"

/* ---- config.json (config.c) ------------------------------------------------ */

typedef struct rn_config {
    char model_type[16];       /* llama, mistral, qwen2, qwen3 */
    uint32_t layers, hidden, heads, kv_heads, head_dim, mlp, vocab, max_pos;
    double eps, rope_theta;
    int rope_llama3;           /* rope_scaling of type llama3 */
    double rs_factor, rs_low, rs_high, rs_orig;
    int tied;                  /* tie_word_embeddings */
    int qkv_bias;              /* qwen2, or llama's attention_bias */
    int qk_norm;               /* qwen3 */
    int32_t eos;               /* eos_token_id (the first of a list), -1: none */
} rn_config;

/** Read dir/config.json into c. EDGERT_OK, or with every problem at
 *  file:line:col in err: EDGERT_E_IO (cannot read), EDGERT_E_PARSE
 *  (malformed, missing or out-of-range fields), EDGERT_E_UNSUPPORTED (a
 *  model this runner does not run). */
edgert_status rn_config_read(const char *path, rn_config *c, char *err, size_t len);

/* ---- weights (load.c) ---------------------------------------------------------- */

/** One GEMM's weights: W[n][k] producing columns [col, col + n) of its
 *  output buffer (a fused or sliced matrix is several of these or one). */
typedef struct rn_linear {
    edgert_packed *packed;     /* on a backend */
    const void *w;             /* fp32 reference: the file's values, row-major */
    st_dtype dt;               /* ST_F32, ST_F16 or ST_BF16 */
    float *owned;              /* fp32 reference of a GPTQ layer: dequantized here */
    char *name;                /* the fp32 reference's: the checkpoint layer's name */
    uint32_t n, k, col;
    uint64_t bytes;            /* what a GEMV reads of it */
} rn_linear;

#define RN_MAX_PARTS 16 /* q, k, v unfused; a head cut into slices */

typedef struct rn_linears {
    rn_linear part[RN_MAX_PARTS];
    unsigned count;
    uint32_t n;                /* the output's columns: sum of the parts' n */
    /* Act order the runner writes their input in (owned; NULL: the model's
     * order): column j is input perm[j]; the parts packed without it
     * (runner/load.c, make_linears). */
    uint32_t *perm;
    /* The output's columns in the order its rn_want asked (rows), which
     * make_linears follows only when every part is GPTQ; else 0. */
    int in_rows;
} rn_linears;

typedef struct rn_layer {
    rn_linears qkv, o, gate_up, down;
    float *attn_norm, *mlp_norm; /* [hidden] */
    float *q_norm, *k_norm;      /* [head_dim] (qwen3), or NULL */
    float *qkv_bias;             /* [q + 2 kv] (qwen2), or NULL */
} rn_layer;

/* ---- the model --------------------------------------------------------------- */

struct edgert_model {
    edgert_ctx *ctx;
    edgert_backend *be;        /* NULL for the fp32 reference */
    rn_config c;
    edgert_model_info info;
    char *dir, *backend_name, *backend_path, *weights_kind;

    st_file *shards;
    size_t nshards;
    edgert_checkpoint **cks;   /* one per shard (the linear layers) */
    edgert_checkpoint *packed; /* options.packed, or NULL */

    rn_layer *layers;
    rn_linears head;
    float *final_norm;
    const st_file *embed_file;
    const st_tensor *embed;

    /* forward state */
    uint32_t pos, ctx_len;
    uint32_t kv_stride;        /* ctx_len rounded up to whole K blocks */
    size_t cache_bytes;        /* of each of kcache and vcache (mapped) */
    void *kcache;              /* [layers][kv_heads][kv_stride / 16][head_dim][16] (attn.h) */
    void *vcache;              /* [layers][kv_heads][kv_stride][head_dim]; values of
                                  attn->kv_bytes each */
    const rn_attn_kern *attn;  /* picked once from the CPU flags */
    float *rope_cos, *rope_sin; /* [ctx_len][head_dim / 2] */
    float *x, *xn, *qkv, *att, *tmp, *gu, *act; /* [CHUNK][...] */
    float *scores;             /* [threads][ctx_len] */
    unsigned threads;
    char passed_over[2048];    /* info.passed_over */
    int stepped;               /* a single-token step ran on the backend */
};

/** Load every weight (load.c). */
edgert_status rn_load(edgert_model *m, const edgert_model_options *o, char *err, size_t len);
void rn_unload(edgert_model *m);
void rn_unload_layers(edgert_model *m);

/** The forward pass over n <= EDGERT_RUNNER_CHUNK tokens (forward.c). */
edgert_status rn_forward_chunk(edgert_model *m, const int32_t *ids, uint32_t n, float *logits,
                               int all_logits, char *err, size_t len);

/** The kinds of GEMM in a forward pass, in order. */
enum { RN_OP_QKV, RN_OP_O, RN_OP_GU, RN_OP_DOWN, RN_OP_HEAD };
/** Called with each GEMM's input (rows of ldx floats) before it runs; a
 *  non-zero return: it wrote the output y (ldy) itself. */
typedef int (*rn_gemm_hook)(void *user, uint32_t layer, int kind, const rn_linear *lin,
                            const float *x, uint32_t rows, size_t ldx, float *y, size_t ldy);
/** Layers [l0, l1) of the fp32 reference over n <= EDGERT_RUNNER_CHUNK rows
 *  at positions pos.. (appended to the layers' KV cache): m->x holds layer
 *  l0's input (the residual stream) on entry and layer l1 - 1's output on
 *  return, m->xn that normed by the next layer's (or the final) norm.
 *  `hook` (or NULL) sees each GEMM's input first. For calibration (gptq.c). */
edgert_status rn_forward_layers(edgert_model *m, uint32_t n, uint32_t l0, uint32_t l1,
                                rn_gemm_hook hook, void *user, char *err, size_t len);
edgert_status rn_alloc_state(edgert_model *m, uint32_t kv_bits, char *err, size_t len);
void rn_free_state(edgert_model *m);

/* ---- arithmetic (math.c) ------------------------------------------------------ */

void rn_rmsnorm(float *y, const float *x, const float *g, uint32_t n, double eps);
/** rn_rmsnorm into y in an act order, y[j] = input perm[j] (perm NULL:
 *  rn_rmsnorm), through tmp (n floats; x's place will do) and k's gather. */
void rn_rmsnorm_to(float *y, const float *x, const float *g, uint32_t n, double eps,
                   const uint32_t *perm, float *tmp, const rn_attn_kern *k);
/** y[m][n] (row stride ldy) = x[m][k] * W^T for the fp32 reference, on the pool. */
void rn_gemm_f32(edgert_ctx *ctx, const rn_linear *l, uint32_t m, const float *x, size_t ldx,
                 float *y, size_t ldy);
/** Row `r`'s dense values of a stored tensor row (F32/F16/BF16) as fp32. */
void rn_row_f32(const void *base, st_dtype dt, uint64_t first, uint32_t count, float *out);
float rn_dot(const float *a, const float *b, uint32_t n);
/** y += a * x */
void rn_axpy(float *y, float a, const float *x, uint32_t n);


#endif
