/*
 * core/weights/checkpoint_names.c — what a checkpoint's tensor names say: which
 * 2-D float "P.weight" is a linear layer, which an embedding (looked up, not
 * multiplied), which the token embedding a tied head is, and whether the
 * file has an output head of its own. Names as the model families of the
 * Hugging Face hub write them; checkpoint.c reads by them (and lists a tied
 * head as a layer), and checkpoint_quantize.c unties the same head.
 */
#include <stdint.h>
#include <string.h>

#include "weights/checkpoint.h"

int er_ck_ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a > b && strcmp(s + a - b, suf) == 0;
}

/* p[0..n) names an output head's layer: lm_head, embed_out, output */
static int head_prefix(const char *p, size_t n)
{
    static const char *const end[] = {"lm_head", "embed_out"};
    for (size_t i = 0; i < sizeof end / sizeof end[0]; i++) {
        size_t b = strlen(end[i]);
        if (n >= b && memcmp(p + n - b, end[i], b) == 0)
            return 1;
    }
    return n == 6 && memcmp(p, "output", 6) == 0;
}

/* A tensor "P<suffix>" of an output head P. */
static int is_head_tensor(const char *name, const char *suffix)
{
    size_t n = strlen(name), s = strlen(suffix);
    return n > s && strcmp(name + n - s, suffix) == 0 && head_prefix(name, n - s);
}

/* The names model families give their output head: a linear layer even when
 * its name says "embed" (GPT-NeoX's embed_out). */
static int is_head_name(const char *name)
{
    return is_head_tensor(name, ".weight");
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
        if (is_head_name(sf->t[i].name) || is_head_tensor(sf->t[i].name, ".qweight"))
            return 1;
    return 0;
}

const st_tensor *er_ck_tied_embedding(const st_file *sf)
{
    if (er_ck_has_head(sf))
        return NULL;
    for (size_t i = 0; i < sf->n; i++) {
        const st_tensor *t = &sf->t[i];
        if (t->ndim == 2 && st_is_float(t->dtype) && er_ck_is_token_embedding(t->name) &&
            t->shape[0] > 0 && t->shape[1] > 0 && t->shape[0] <= UINT32_MAX &&
            t->shape[1] <= UINT32_MAX)
            return t;
    }
    return NULL;
}

int er_ck_is_dense_linear(const st_tensor *t)
{
    return t->ndim == 2 && st_is_float(t->dtype) && er_ck_ends_with(t->name, ".weight") &&
           !er_ck_is_embedding(t->name) && t->shape[0] > 0 && t->shape[1] > 0 &&
           t->shape[0] <= UINT32_MAX && t->shape[1] <= UINT32_MAX;
}
