/*
 * edgert/runner.h — a whole model on an edgert backend: the model runner.
 *
 * A reference integrator built on edgert.h's public API only, installed
 * beside it as libedgert-runner: it loads a Hugging Face model folder of
 * the Llama family and runs it, every linear layer through edgert_step on
 * the backend the caller names or the selector picks, everything else
 * (embedding, RMSNorm, rotary embedding, causal attention over a KV cache,
 * the SiLU-gated MLP, residuals) on the caller's side through
 * edgert_parallel_for. `edgert run` is its command line.
 *
 * The folder: config.json and the weights, model.safetensors or the shards
 * model.safetensors.index.json names; dense (F32/F16/BF16) or 4-bit GPTQ
 * (edgert quantize writes one). Architectures (config.json "model_type"):
 * llama (Llama 2 and 3, rope_scaling of type llama3), mistral, qwen2 (q/k/v
 * bias), qwen3 (q/k RMSNorm per head); grouped KV heads; a tied or untied
 * head. Anything else — another model_type or activation, a missing tensor,
 * a shape that disagrees with config.json, a rope_scaling of another type —
 * is refused by edgert_model_open before any work, the message naming the
 * file and the key (with line and column) or the tensor: EDGERT_E_PARSE
 * (EDGERT_E_UNSUPPORTED for a valid model it does not run).
 *
 * Weights on a backend: GPTQ layers as they are; dense layers quantized by
 * round to nearest (edgert_quantize_rtn), asymmetric, or symmetric for a
 * symmetric layout, with one group size for the whole model: the largest of
 * 128, 64 and 32 that divides every K, unless the options name one. So
 * every backend of one kind of layout runs the same quantized weights, and
 * comparing them compares their arithmetic. q/k/v, and gate/up, are packed
 * into one matrix each (one GEMM instead of three, and two) when their
 * groups and zero points agree. The backend "fp32" is the reference: the
 * dense values as they are in the file (a GPTQ layer's dequantized), fp32
 * arithmetic, no backend.
 *
 * Memory: a dense file stays mapped (its pages are read as needed); what is
 * resident is the packed weights, the KV cache (fp32, `context` positions),
 * the activations of one prefill chunk of at most EDGERT_RUNNER_CHUNK
 * tokens, and, for the fp32 reference of a GPTQ file, its dequantized
 * weights.
 *
 * A model handle is used by one thread at a time; several handles may run
 * at once on one edgert_ctx.
 */
#ifndef EDGERT_RUNNER_H
#define EDGERT_RUNNER_H

#include <stddef.h>
#include <stdint.h>

#include "edgert/edgert.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef EDGERT_RUNNER_API
#define EDGERT_RUNNER_API __attribute__((visibility("default")))
#endif

/** Tokens a prefill runs through the layers at once: longer inputs are cut
 *  into chunks of this many. */
#define EDGERT_RUNNER_CHUNK 512u

typedef struct edgert_model edgert_model;

/** Options of edgert_model_open. Zero-initialise, set struct_size. */
typedef struct edgert_model_options {
    uint32_t struct_size;     /**< sizeof(edgert_model_options) */
    /** The backend to run on; "fp32" for the dense reference; NULL: the one
     *  edgert_select ranks first for `priority` among those whose layout
     *  takes the weights (the handle's options.weights gate decides that
     *  when set). */
    const char *backend;
    edgert_priority priority;
    const char *backend_options; /**< for edgert_backend_open, or NULL */
    /** KV cache positions; 0: max_position_embeddings, at most 4096. */
    uint32_t context;
    /** Group size for quantizing dense layers; 0: the largest of 128, 64
     *  and 32 that divides every K (else 128, the last group partial). */
    uint32_t group;
    /** A packed file (`edgert pack`) of this model's linear layers for the
     *  backend, mapped instead of packing; NULL: pack them. */
    const char *packed;
    /* ---- version 1 ends here (EDGERT_MODEL_OPTIONS_V1_SIZE) ---- */
    /** Bits of each KV cache value: 32 (fp32) or 16 (IEEE fp16: half the
     *  bytes attention reads, each value within 2^-11 of itself, magnitudes
     *  above 65504 saturated); 0: 16 on a backend where this CPU's
     *  attention kernels keep fp16 (AVX2 and F16C without AVX-512, today),
     *  else 32. The fp32 reference always keeps 32. Read only when
     *  struct_size covers it. */
    uint32_t kv_cache_bits;
} edgert_model_options;

/** Size of edgert_model_options in its first version. */
#define EDGERT_MODEL_OPTIONS_V1_SIZE \
    (offsetof(edgert_model_options, packed) + sizeof(const char *))

/** What was loaded. Owned by the model. */
typedef struct edgert_model_info {
    const char *model_type;   /**< "llama", "mistral", "qwen2" or "qwen3" */
    const char *backend;      /**< the backend's name, or "fp32" */
    const char *backend_path; /**< edgert_backend_describe(), or the reference's */
    const char *weights;      /**< "dense-bf16", "dense-f16", "dense-f32", "gptq", "packed" */
    uint32_t layers, hidden, heads, kv_heads, head_dim, mlp, vocab;
    uint32_t context;         /**< KV cache positions */
    uint32_t group;           /**< dense layers' group (0: none were quantized) */
    int symmetric;            /**< dense layers quantized symmetric */
    int tied;                 /**< the head is the embedding */
    int fused_qkv, fused_gate_up; /**< 1 when every layer's were packed as one matrix */
    /** Bytes one decode step reads of weights: every linear layer's packed
     *  (or, for fp32, stored) bytes, the head's included; the embedding row
     *  and norms not counted. */
    uint64_t step_weight_bytes;
    uint64_t kv_cache_bytes;
    unsigned gemms_per_step;  /**< GEMMs of one forward pass */
    int32_t eos;              /**< config.json's eos_token_id (the first of a list), -1: none */
    /** With no backend named: the backends ranked above this one that
     *  could not pack these weights, each with why ("" when none). */
    const char *passed_over;
    uint32_t kv_cache_bits;   /**< 32 (fp32) or 16 (fp16): options.kv_cache_bits as decided */
} edgert_model_info;

/** Open the model folder `dir` on handle ctx (which must outlive it). On
 *  failure *out is NULL and err explains; see the file's comment for the
 *  statuses. EDGERT_E_NOT_ELIGIBLE / EDGERT_E_NOT_FOUND: the backend
 *  (named or selected) cannot run here. */
EDGERT_RUNNER_API edgert_status edgert_model_open(edgert_ctx *ctx, const char *dir,
                                                  const edgert_model_options *options,
                                                  edgert_model **out, char *err,
                                                  size_t err_len);
EDGERT_RUNNER_API void edgert_model_close(edgert_model *m);
EDGERT_RUNNER_API const edgert_model_info *edgert_model_get_info(const edgert_model *m);

/** Forget every position: the next forward starts at position 0. */
EDGERT_RUNNER_API void edgert_model_reset(edgert_model *m);
/** Positions held in the KV cache (the next token's position). */
EDGERT_RUNNER_API uint32_t edgert_model_position(const edgert_model *m);

/**
 * Run n tokens at the next n positions, appending them to the KV cache.
 * logits: with all_logits, [n][vocab] (row i: the distribution after token
 * i); else [vocab], after the last token. EDGERT_E_USAGE, nothing run and
 * the cache unchanged: n 0, an id outside [0, vocab) (err names its index),
 * or positions past the context.
 */
EDGERT_RUNNER_API edgert_status edgert_model_forward(edgert_model *m, const int32_t *ids,
                                                     uint32_t n, float *logits, int all_logits,
                                                     char *err, size_t err_len);

/**
 * One decode step's GEMMs alone: the same packed weights and op list as
 * the last single-token edgert_model_forward, run through edgert_step on
 * the activations as they are, without the runner's own work (embedding,
 * norms, rotary embedding, attention, SiLU, residuals) and without touching
 * the KV cache or the position. Timed beside real steps, it is what the
 * runner adds to its GEMMs. EDGERT_E_USAGE before any single-token forward.
 */
EDGERT_RUNNER_API edgert_status edgert_model_gemm_step(edgert_model *m, char *err,
                                                       size_t err_len);

/* ---- calibrated quantization: GPTQ ------------------------------------------------- */

/** One linear layer quantized, as edgert_gptq_quantize reports it. */
typedef struct edgert_gptq_layer {
    uint32_t struct_size;     /**< sizeof(edgert_gptq_layer) */
    const char *name;         /**< "model.layers.3.mlp.down_proj", "lm_head" */
    uint32_t n, k;
    uint32_t index, count;    /**< this is layer `index` (from 1) of `count` */
    double seconds;           /**< its quantization (the factorization not counted) */
    double damp;              /**< added to the diagonal of its inputs' mean x x^T */
    uint32_t dead;            /**< input channels no calibration token reached */
    /** Over the held-out prompts' inputs X: 10 log10(|X W^T|^2 / |X (W - Q)^T|^2)
     *  for round to nearest's Q and for GPTQ's; NaN without held-out prompts. */
    double sqnr_rtn_db, sqnr_gptq_db;
} edgert_gptq_layer;

/** Options of edgert_gptq_quantize. Zero-initialise, set struct_size. */
typedef struct edgert_gptq_options {
    uint32_t struct_size;     /**< sizeof(edgert_gptq_options) */
    int symmetric;            /**< 1: z = 8 (W4A8 backends); 0: zero points (W4A16) */
    uint32_t group;           /**< group size along K; 0: 128 */
    /** The calibration prompts: token ids, prompt_count of them. */
    const int32_t *const *prompts;
    const uint32_t *prompt_len;
    size_t prompt_count;
    /** Prompts not calibrated on, whose inputs measure each layer (the
     *  report's SQNR), or 0 of them. */
    const int32_t *const *held_out;
    const uint32_t *held_out_len;
    size_t held_out_count;
    /** Dampening: this fraction of the mean diagonal of x x^T added to it;
     *  0: 0.1 (ten times GPTQ's: with few calibration tokens per input
     *  channel it generalizes better; runner/gptq.c has the figures). */
    double damp;
    /** Called after each layer (in model order), or NULL. */
    void (*progress)(void *user, const edgert_gptq_layer *layer);
    void *user;
    /* ---- version 1 ends here (EDGERT_GPTQ_OPTIONS_V1_SIZE) ---- */
    /** 1: act order (GPTQ's desc_act): each layer's columns quantized in
     *  the order of their inputs' second moments, largest first, and its
     *  groups made of consecutive columns in that order, so the inputs
     *  that matter most are quantized while the most columns remain to
     *  take their error; the file says desc_act: true and each layer's
     *  g_idx gives its inputs' groups. 0: in order. */
    int act_order;
} edgert_gptq_options;

/** Size of edgert_gptq_options in its first version. */
#define EDGERT_GPTQ_OPTIONS_V1_SIZE (offsetof(edgert_gptq_options, user) + sizeof(void *))

/**
 * Quantize the dense model in folder `dir` (one model.safetensors) to the
 * GPTQ checkpoint `out`, as edgert_checkpoint_quantize does but each linear
 * layer by GPTQ on its real inputs: the calibration prompts run through the
 * model itself (the fp32 reference), layer by layer, each layer's inputs
 * made by the layers before it already quantized; each layer's columns are
 * quantized in order and each one's rounding error spread over the columns
 * after it by the inverse of its inputs' second moments (dampened; a Cholesky
 * factor). Deterministic: the same files and prompts give the same bytes on
 * any thread count. The rounding rules and the file's layout are
 * edgert_checkpoint_quantize's; its metadata names the quantizer "gptq".
 * A channel no calibration token reaches keeps its round-to-nearest code.
 * EDGERT_E_USAGE: bad options, a prompt empty or past the model's context,
 * an id outside the vocabulary (err names the prompt and the token), a
 * model already quantized or in shards; EDGERT_E_UNSUPPORTED: a layer's
 * second moments singular even dampened 1000 times more (err names the
 * layer); else edgert_model_open's and edgert_checkpoint_quantize's. On
 * failure nothing is written at `out`.
 */
EDGERT_RUNNER_API edgert_status edgert_gptq_quantize(edgert_ctx *ctx, const char *dir,
                                                     const char *out,
                                                     const edgert_gptq_options *options,
                                                     char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif
