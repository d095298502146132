/*
 * edgert/checkpoint.h — a user's own weights: canonical int4 tensors, GPTQ and
 * dense checkpoints, packing them for a backend, packed files, quantize.
 * Included by edgert/edgert.h; include either.
 */
#ifndef EDGERT_CHECKPOINT_H
#define EDGERT_CHECKPOINT_H

#include "edgert/edgert.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- canonical weights helpers ----------------------------------------- */

/** Owning canonical tensor; `view` points into the owned buffers. Filled
 *  by edgert_quantize_rtn and edgert_checkpoint_layer_weights, which write
 *  its first EDGERT_QTENSOR_V1_SIZE bytes and none past them: the buffers,
 *  then `view`'s version-1 fields (view.struct_size is
 *  EDGERT_QWEIGHTS_V1_SIZE). `view` comes last because edgert_qweights
 *  grows by the plugin ABI's rules: then neither the buffers move nor does
 *  the library write past a smaller edgert_qtensor, so a program built
 *  against an older header runs with a newer libedgert. No field is ever
 *  added here; a newer view's fields would come with a new function. */
typedef struct edgert_qtensor {
    uint8_t *codes;
    float *scales;
    uint8_t *zeros;       /**< NULL when symmetric */
    edgert_qweights view; /**< last, see above */
} edgert_qtensor;

/** The bytes of edgert_qtensor the library writes. */
#define EDGERT_QTENSOR_V1_SIZE (offsetof(edgert_qtensor, view) + EDGERT_QWEIGHTS_V1_SIZE)

/** Round-to-nearest quantization of dense fp32 W[n][k] to canonical int4.
 *  symmetric: z = 8, s = max|w| / 7 (codes clamp to [1,15] .. [0,15]);
 *  asymmetric: s = (max - min) / 15, z = round(-min / s) clamped to [0,15].
 *  *out is written whole (free a tensor it held first: edgert_qtensor_free)
 *  and holds nothing on failure: EDGERT_E_USAGE for a NULL argument, n, k
 *  or group 0, or a weight that is not finite; EDGERT_E_NOMEM when the
 *  buffers cannot be had. */
EDGERT_API edgert_status edgert_quantize_rtn(const float *w, uint32_t n, uint32_t k, uint32_t group,
                                             int symmetric, edgert_qtensor *out);
EDGERT_API void edgert_qtensor_free(edgert_qtensor *t);
/** out[n][k] = s * (q - z), in the model's order: with a perm (struct_size
 *  covering it, edgert_qweights), code column j goes to out column perm[j]. */
EDGERT_API void edgert_dequantize(const edgert_qweights *w, float *out);
/** Code of W[row][col]. */
static inline unsigned edgert_qcode(const edgert_qweights *w, uint32_t row, uint32_t col)
{
    uint8_t b = w->codes[(size_t)row * ((w->k + 1u) / 2u) + col / 2u];
    return (col & 1u) ? (unsigned)(b >> 4) : (unsigned)(b & 15u);
}

/* --- checkpoints: a user's own weights ----------------------------------- */

/**
 * A weights file opened and validated: a GPTQ int4 checkpoint, a dense
 * F32/F16/BF16 one (safetensors), or a packed file `edgert pack` wrote for
 * one backend. The file is mapped read-only; tensors are used in place.
 * Everything is validated at open (docs/weights.md has the rules), so a
 * malformed file fails there with EDGERT_E_PARSE and a message naming the
 * file and the tensor. The one exception is a dense layer's values, which
 * would mean reading the whole file: a NaN or infinite weight fails
 * edgert_checkpoint_layer_weights (and so packing) with EDGERT_E_PARSE.
 *
 * Linear layers: in a GPTQ file every prefix P with P.qweight, P.qzeros and
 * P.scales (P.g_idx optional); in a dense file (and for the dense tensors of
 * a GPTQ file, e.g. an unquantized head) every 2-D float tensor "P.weight"
 * whose name does not mark an embedding ("embed", "wte", "word_embeddings"):
 * embeddings are looked up, not multiplied. A head tied to the token
 * embedding (no layer is an output head: "lm_head", "embed_out", "output")
 * is listed last as a dense layer "lm_head" whose weights are the token
 * embedding's ("embed_tokens", "wte", "word_embeddings", "embed_in"), as
 * edgert_checkpoint_quantize unties it; in a GPTQ file it is a dense layer
 * too, quantized (round to nearest, groups as below) when it is packed.
 */
typedef struct edgert_checkpoint edgert_checkpoint;

/** One linear layer of a checkpoint. Read-only; owned by the checkpoint. */
typedef struct edgert_layer {
    const char *name;      /**< the tensors' prefix, e.g. "model.layers.0.mlp.down_proj";
                                "lm_head" for a tied head (the embedding's tensor) */
    uint32_t n, k;         /**< W[n][k]: output channels, inputs */
    uint32_t group;        /**< group size along K; 0 for a dense layer */
    int symmetric;         /**< 1: every zero point is 8; 0: asymmetric; -1: dense */
    /** "gptq-v1", "gptq-v2", "dense-f32", "dense-f16", "dense-bf16" or "packed" */
    const char *format;
} edgert_layer;

/** Open and validate `path`. On failure *out is NULL and err explains:
 *  EDGERT_E_IO (cannot be read, or not a regular file), EDGERT_E_PARSE
 *  (malformed, with file and tensor), EDGERT_E_UNSUPPORTED (valid but
 *  refused, e.g. a packed file of another format version). */
EDGERT_API edgert_status edgert_checkpoint_open(const char *path, edgert_checkpoint **out,
                                                char *err, size_t err_len);
EDGERT_API void edgert_checkpoint_close(edgert_checkpoint *c);
/** "gptq", "dense" or "packed". */
EDGERT_API const char *edgert_checkpoint_kind(const edgert_checkpoint *c);
/** Where the GPTQ settings came from: "metadata", "<dir>/quantize_config.json"
 *  or "inferred from the tensors"; "" for other kinds. */
EDGERT_API const char *edgert_checkpoint_config_source(const edgert_checkpoint *c);
EDGERT_API size_t edgert_checkpoint_layer_count(const edgert_checkpoint *c);
EDGERT_API const edgert_layer *edgert_checkpoint_layer_at(const edgert_checkpoint *c, size_t i);
/**
 * Layer i as canonical int4 weights (an owning edgert_qtensor, freed with
 * edgert_qtensor_free; view.name is the layer's name while the checkpoint is
 * open). GPTQ codes, zeros and fp16 scales are converted (GPTQ stores W
 * transposed, so this is a copy); a dense layer is quantized by round to
 * nearest, asymmetric, in the file's dense group: the largest of 128, 64
 * and 32 dividing every dense layer's K (64 for SmolLM2's 576 and 1536),
 * else 128 with partial last groups; one group when K is smaller
 * (`edgert quantize` writes a file that skips
 * this; edgert_checkpoint_layer_packed and edgert_checkpoint_pack quantize
 * it symmetric instead for a backend whose layout is symmetric, such as
 * amx-w4a8); a non-finite value in it is EDGERT_E_PARSE. A packed layer is
 * EDGERT_E_UNSUPPORTED: map it with edgert_checkpoint_layer_packed. So is
 * an act-order layer (a GPTQ g_idx that is not k / group): its codes
 * without their order would give wrong results; use _v2.
 */
EDGERT_API edgert_status edgert_checkpoint_layer_weights(edgert_checkpoint *c, size_t i,
                                                         edgert_qtensor *out, char *err,
                                                         size_t err_len);
/**
 * As edgert_checkpoint_layer_weights, for an act-order layer too, writing
 * this header's whole edgert_qtensor: view.struct_size is
 * sizeof(edgert_qweights) and view.perm the order of an act-order layer's
 * inputs (its columns sorted by group: column j is input perm[j]; owned by
 * the checkpoint, valid while it is open; edgert_qtensor_free leaves it),
 * NULL for a layer in order. edgert_pack takes the view as it is.
 */
EDGERT_API edgert_status edgert_checkpoint_layer_weights_v2(edgert_checkpoint *c, size_t i,
                                                            edgert_qtensor *out, char *err,
                                                            size_t err_len);

/**
 * Rows [row0, row0 + rows) of layer i as dense fp32 W[rows][k] into out: a
 * dense layer's own values, a GPTQ layer dequantized (w = s (q - z)). What
 * a fidelity check compares a backend with. A packed layer is
 * EDGERT_E_UNSUPPORTED (it holds one backend's bytes only).
 */
EDGERT_API edgert_status edgert_checkpoint_layer_dense(edgert_checkpoint *c, size_t i,
                                                       uint32_t row0, uint32_t rows, float *out,
                                                       char *err, size_t err_len);
/**
 * Drop layer i's pages of the mapped file from this process's resident
 * memory. The file stays mapped and every call above still works: a later
 * read pages them in again from the file. For a caller that has packed a
 * layer and will not read it again soon, so that what stays resident is
 * the packed copy, not both (edgert_checkpoint_pack does it itself). Pages
 * a tensor shares with its neighbours in the file stay. NULL or i out of
 * range: nothing.
 */
EDGERT_API void edgert_checkpoint_layer_release(edgert_checkpoint *c, size_t i);
/**
 * Whether `path`, a packed file, is what packing `src` for backend `b` would
 * write now: its format version, backend name, packed layout and plugin
 * file (XXH3) match `b`, and every layer's source tensors (XXH3) match
 * `src`'s. EDGERT_OK when it is; EDGERT_E_NOT_FOUND when there is no file;
 * otherwise the status says why it cannot be used (EDGERT_E_PARSE: not a
 * valid packed file; EDGERT_E_UNSUPPORTED: keys differ) and err names the
 * first key that differs.
 */
EDGERT_API edgert_status edgert_checkpoint_pack_check(edgert_backend *b, edgert_checkpoint *src,
                                                      const char *path, char *err,
                                                      size_t err_len);
/**
 * Pack every layer of `src` (GPTQ or dense) for backend `b` into `path`: a
 * safetensors file whose metadata holds the keys above and whose tensors
 * "<layer>.packed" hold the plugin's packed bytes, each at a 4 KiB boundary,
 * so a later run maps them with edgert_checkpoint_layer_packed and runs
 * edgert_gemm with no repacking. One layer is converted and packed at a
 * time. Written to a temporary file and renamed: nothing partial is left.
 * EDGERT_E_UNSUPPORTED when the backend cannot map its packed form (an
 * ABI-1 plugin) or refuses a layer (LAYOUT: e.g. asymmetric zero points
 * for a symmetric backend).
 */
EDGERT_API edgert_status edgert_checkpoint_pack(edgert_backend *b, edgert_checkpoint *src,
                                                const char *path, char *err, size_t err_len);
/**
 * Layer i as packed weights for backend `b`: mapped in place from a packed
 * file (after checking that its backend, layout and plugin file are `b`'s),
 * or converted and packed from a GPTQ or dense checkpoint (a dense layer
 * quantized the way b's layout takes: symmetric or asymmetric). Freed with
 * edgert_packed_free, before the checkpoint is closed.
 */
EDGERT_API edgert_status edgert_checkpoint_layer_packed(edgert_checkpoint *c, size_t i,
                                                        edgert_backend *b, edgert_packed **out,
                                                        char *err, size_t err_len);

/** Options of edgert_checkpoint_quantize. Zero-initialise, set struct_size. */
typedef struct edgert_quantize_options {
    uint32_t struct_size; /**< sizeof(edgert_quantize_options) */
    int symmetric;        /**< 1: z = 8, s = max|w| / 7; 0: asymmetric with z >= 1 */
    uint32_t group;       /**< group size along K; 0 = 128 */
    unsigned threads;     /**< 0 = all logical cores */
    /* ---- version 1 ends here (EDGERT_QUANTIZE_OPTIONS_V1_SIZE) ---- */
    /**
     * Codes the caller made for a layer (a calibrated quantizer: the runner's
     * edgert_gptq_quantize), or NULL: every layer by round to nearest. Called
     * once per linear layer with its name ("lm_head" for a tied head) and
     * shape; EDGERT_OK: *out holds the layer's codes for this call's group
     * and symmetry (its zeros NULL when symmetric, else at least 1 each),
     * which the library takes and frees; EDGERT_E_NOT_FOUND: that layer by
     * round to nearest; anything else fails the quantize with err as the
     * callback wrote it. Read only when struct_size covers it.
     */
    edgert_status (*layer_codes)(void *user, const char *layer, uint32_t n, uint32_t k,
                                 edgert_qtensor *out, char *err, size_t err_len);
    void *user;               /**< layer_codes' first argument */
    /** The quantizer as the file's metadata and quantize_config.json name it
     *  ("edgert <version> <method>"); NULL: "round-to-nearest". */
    const char *method;
    /** 1: layer_codes' codes may come in act order (their view's perm set,
     *  struct_size covering it; it must stay valid until this call returns
     *  and is not freed by it): each such layer's g_idx says its inputs'
     *  groups, its qweight stays in the model's order, and the file says
     *  desc_act: true. Needs layer_codes (round to nearest has no order). */
    int act_order;
} edgert_quantize_options;
/** Size of edgert_quantize_options in its first version. */
#define EDGERT_QUANTIZE_OPTIONS_V1_SIZE                                                          \
    (offsetof(edgert_quantize_options, threads) + sizeof(unsigned))

/**
 * Quantize a dense checkpoint (`in`, safetensors F32/F16/BF16) to a GPTQ
 * int4 checkpoint `out` by round to nearest: every linear layer (as listed
 * above) becomes P.qweight/P.qzeros/P.scales/P.g_idx in GPTQ's v1 layout
 * (zero points stored minus one; the asymmetric quantizer never needs a
 * zero point of 0, which v1 cannot store), every other tensor is copied as
 * it is. A head tied to the embedding (no output head: lm_head, embed_out or
 * output) is untied: the embedding stays dense and "lm_head" is quantized
 * from it (the layer edgert_checkpoint_open lists for the input file too). The settings go
 * into the file's metadata and into quantize_config.json beside `out`.
 * One layer is in memory at a time. `out` appears only complete (written to a
 * temporary file and renamed); on failure nothing is left behind.
 * EDGERT_E_PARSE for a malformed input (a non-finite weight included; one
 * without a linear layer too, as for edgert_checkpoint_open),
 * EDGERT_E_USAGE for bad options or an input that is already quantized, has
 * a layer with K not a multiple of 8 (GPTQ packs 8 codes per int32), a
 * linear layer in a float it does not read (F64), a tensor of a dtype
 * edgert does not know (it could not be copied) or a scale beyond fp16's
 * range, EDGERT_E_IO for an input that cannot be read
 * (or is not a regular file) and for a write failure.
 */
EDGERT_API edgert_status edgert_checkpoint_quantize(const char *in, const char *out,
                                                    const edgert_quantize_options *options,
                                                    char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif /* EDGERT_CHECKPOINT_H */
