/*
 * core/checkpoint_names.c — what a checkpoint's tensor names say: which
 * 2-D float "P.weight" is a linear layer, which an embedding (looked up, not
 * multiplied), which the token embedding a tied head is, and whether the
 * file has an output head of its own. Names as the model families of the
 * Hugging Face hub write them; checkpoint.c reads by them (and lists a tied
 * head as a layer), and checkpoint_quantize.c unties a head by them.
 */
#include <stdint.h>
#include <string.h>

#include "checkpoint.h"

int er_ck_ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a > b && strcmp(s + a - b, suf) == 0;
}

/* The names model families give their output head: a linear layer even when
 * its name says "embed" (GPT-NeoX's embed_out). */
static int is_head_name(const char *name)
{
    return er_ck_ends_with(name, "lm_head.weight") ||
           er_ck_ends_with(name, "embed_out.weight") || !strcmp(name, "lm_head.weight") ||
           !strcmp(name, "embed_out.weight") || !strcmp(name, "output.weight");
}

int er_ck_is_embedding(const char *name)
{
    return (strstr(name, "embed") != NULL || strstr(name, "wte") != NULL ||
            strstr(name, "wpe") != NULL) && !is_head_name(name);
}

int er_ck_is_token_embedding(const char *name)
{
    static const char *const token[] = {"embed_tokens.weight", "wte.weight",
                                        "word_embeddings.weight", "embed_in.weight"};
    for (size_t i = 0; i < sizeof token / sizeof token[0]; i++)
        if (er_ck_ends_with(name, token[i]) || strcmp(name, token[i]) == 0)
            return 1;
    return 0;
}

int er_ck_has_head(const st_file *sf)
{
    for (size_t i = 0; i < sf->n; i++)
        if (is_head_name(sf->t[i].name))
            return 1;
    return 0;
}

int er_ck_is_head_layer(const char *prefix)
{
    return er_ck_ends_with(prefix, "lm_head") || er_ck_ends_with(prefix, "embed_out") ||
           !strcmp(prefix, "lm_head") || !strcmp(prefix, "embed_out") ||
           !strcmp(prefix, "output");
}

int er_ck_is_dense_linear(const st_tensor *t)
{
    return t->ndim == 2 && st_is_float(t->dtype) && er_ck_ends_with(t->name, ".weight") &&
           !er_ck_is_embedding(t->name) && t->shape[0] > 0 && t->shape[1] > 0 &&
           t->shape[0] <= UINT32_MAX && t->shape[1] <= UINT32_MAX;
}

/* A head tied to the token embedding: when no layer is an output head, the
 * file's first token embedding (er_ck_is_token_embedding) is also the head, so it
 * is listed last as a dense layer "lm_head", the name `edgert quantize`
 * unties it as. Without it, bench and pack of such a file left out a decode
 * step's largest GEMM, and verify generated a head. */
edgert_status er_ck_tied_head(edgert_checkpoint *c, size_t *cap)
{
    for (size_t i = 0; i < c->n; i++)
        if (er_ck_is_head_layer(c->names[i]))
            return EDGERT_OK;
    for (size_t i = 0; i < c->sf.n; i++) {
        const st_tensor *t = &c->sf.t[i];
        if (t->ndim != 2 || !st_is_float(t->dtype) || !er_ck_is_token_embedding(t->name) ||
            t->shape[0] == 0 || t->shape[1] == 0 || t->shape[0] > UINT32_MAX ||
            t->shape[1] > UINT32_MAX)
            continue;
        er_ck_layer s = {.dense = t};
        edgert_status st = er_ck_add_layer(c, "lm_head", strlen("lm_head"), &s, cap);
        if (!st) {
            edgert_layer *l = &c->pub[c->n - 1];
            l->n = (uint32_t)t->shape[0], l->k = (uint32_t)t->shape[1];
            l->symmetric = -1;
            l->format = er_ck_dense_format(t->dtype);
        }
        return st;
    }
    return EDGERT_OK;
}
