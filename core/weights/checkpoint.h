/*
 * core/weights/checkpoint.h — a user's weights file, shared by checkpoint.c (open,
 * validate, GPTQ and dense layers), checkpoint_quantize.c and packfile.c.
 */
#ifndef EDGERT_CORE_CHECKPOINT_H
#define EDGERT_CORE_CHECKPOINT_H

#include "edgert/edgert.h"
#include "formats/safetensors.h"

typedef enum { ER_CK_GPTQ, ER_CK_DENSE, ER_CK_PACKED } er_ck_kind;

/* The tensors of one layer (NULL where absent). */
typedef struct er_ck_layer {
    const st_tensor *qweight, *qzeros, *scales, *g_idx; /* GPTQ */
    const st_tensor *dense;                             /* dense: P.weight */
    const st_tensor *packed;                            /* packed: P.packed */
    uint64_t packed_bytes;                              /* the plugin's bytes in it */
    uint64_t source_hash;                               /* packed: the source's XXH3 */
    int v2;                                             /* GPTQ zero convention */
    int act_order;                                      /* packed: its key says act_order=1 */
    uint32_t *perm; /* act order: input of column j, groups contiguous (owned); else NULL */
} er_ck_layer;

struct edgert_checkpoint {
    st_file sf;
    er_ck_kind kind;
    edgert_layer *pub;
    er_ck_layer *src;
    char **names;
    size_t n;
    char config_source[600];
};

/** The group layer i is converted in (its own, or the file's dense group). */
uint32_t er_ck_layer_group(const edgert_checkpoint *c, size_t i);
/** 1 when s ends with suf and is longer than it (checkpoint_names.c). */
int er_ck_ends_with(const char *s, const char *suf);
/** 1 when a dense tensor name marks an embedding (looked up, not multiplied). */
int er_ck_is_embedding(const char *name);
/** The token embedding, by the names HF families give it (embed_tokens,
 *  wte, word_embeddings, embed_in): a tied output head is this matrix.
 *  Position embeddings (embed_positions, wpe) are not. */
int er_ck_is_token_embedding(const char *name);
/** Whether the file has an output head of its own (lm_head, GPT-NeoX's
 *  embed_out, output; P.weight of any dtype or shape, or GPTQ's P.qweight):
 *  then no head is tied to the embedding. */
int er_ck_has_head(const st_file *sf);
/** The tensor a tied head is: with no head of its own (er_ck_has_head), the
 *  file's first 2-D float token embedding with 0 < N, K <= UINT32_MAX; else
 *  NULL. The one rule of the reader (list_layers) and of quantize. */
const st_tensor *er_ck_tied_embedding(const st_file *sf);
/** 1 when t is a 2-D float "P.weight" that is a linear layer's. */
int er_ck_is_dense_linear(const st_tensor *t);
/** Append a layer named name[0..plen) with tensors *s; E_NOMEM. */
edgert_status er_ck_add_layer(edgert_checkpoint *c, const char *name, size_t plen,
                              const er_ck_layer *s, size_t *cap);
/** Drop layer i's source pages from this process (they stay in the page
 *  cache): a whole-model pass then stays within one layer of resident
 *  memory. */
void er_ck_release(const edgert_checkpoint *c, size_t i);
/* edgert_checkpoint_layer_weights_v2, with a dense layer quantized symmetric
 * (dense_sym 1: z = 8, what a symmetric backend such as amx-w4a8 takes) or
 * asymmetric (0). GPTQ layers are what they are, an act-order one with its
 * perm (view.struct_size covers it). */
edgert_status er_checkpoint_layer_weights(edgert_checkpoint *c, size_t i, int dense_sym,
                                          edgert_qtensor *out, char *err, size_t err_len);
/** Open only the container and list its layers (packfile.c reads packed files). */
edgert_status er_ck_open_packed(edgert_checkpoint *c, char *err, size_t err_len);

struct edgert_ctx;
/* checkpoint.c: what the layout gate needs of options.weights (ctx->weights). */
edgert_status er_weights_summary(struct edgert_ctx *ctx, const char *path, char *err,
                                 size_t err_len);

#endif /* EDGERT_CORE_CHECKPOINT_H */
