/*
 * runner/runner.c — edgert/runner.h: open a model folder (config, weights,
 * state), run tokens through it in chunks, close it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

edgert_status edgert_model_open(edgert_ctx *ctx, const char *dir,
                                const edgert_model_options *options, edgert_model **out,
                                char *err, size_t err_len)
{
    edgert_model_options o = {0};
    if (out)
        *out = NULL;
    if (!ctx || !dir || !*dir || !out)
        return er_fail(EDGERT_E_USAGE, err, err_len, "edgert_model_open: ctx, dir and out are "
                       "required");
    if (options) {
        if (options->struct_size < EDGERT_MODEL_OPTIONS_V1_SIZE)
            return er_fail(EDGERT_E_USAGE, err, err_len, "edgert_model_open: struct_size %u is "
                           "below version 1's %zu", options->struct_size,
                           (size_t)EDGERT_MODEL_OPTIONS_V1_SIZE);
        memcpy(&o, options, sizeof o < options->struct_size ? sizeof o : options->struct_size);
    }
    if (o.group && o.group != 32 && o.group != 64 && o.group != 128)
        return er_fail(EDGERT_E_USAGE, err, err_len, "group %u: 32, 64 or 128", o.group);
    if (o.kv_cache_bits && o.kv_cache_bits != 16 && o.kv_cache_bits != 32)
        return er_fail(EDGERT_E_USAGE, err, err_len, "kv_cache_bits %u: 16 or 32",
                       o.kv_cache_bits);
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return er_fail(EDGERT_E_IO, err, err_len, "%s: %s", dir,
                       stat(dir, &sb) != 0 ? strerror(errno) : "not a folder (a model is a "
                       "folder with config.json and model.safetensors)");
    edgert_model *m = calloc(1, sizeof *m);
    if (!m || !(m->dir = strdup(dir))) {
        free(m);
        return er_fail(EDGERT_E_NOMEM, err, err_len, "out of memory");
    }
    m->ctx = ctx;
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    edgert_status st = rn_config_read(path, &m->c, err, err_len);
    if (!st) {
        uint32_t want = o.context ? o.context : m->c.max_pos < 4096 ? m->c.max_pos : 4096;
        if (want > m->c.max_pos)
            st = er_fail(EDGERT_E_USAGE, err, err_len, "context %u is past the model's %u "
                         "positions (max_position_embeddings%s)", want, m->c.max_pos,
                         m->c.max_pos < 4096 ? ", or its sliding_window" : "");
        m->ctx_len = want;
    }
    if (!st)
        st = rn_load(m, &o, err, err_len);
    if (!st)
        st = rn_alloc_state(m, o.kv_cache_bits, err, err_len);
    if (st) {
        edgert_model_close(m);
        return st;
    }
    const rn_config *c = &m->c;
    edgert_model_info *i = &m->info;
    i->model_type = c->model_type;
    i->backend = m->backend_name;
    i->backend_path = m->backend_path;
    i->weights = m->weights_kind;
    i->layers = c->layers;
    i->hidden = c->hidden;
    i->heads = c->heads;
    i->kv_heads = c->kv_heads;
    i->head_dim = c->head_dim;
    i->mlp = c->mlp;
    i->vocab = c->vocab;
    i->context = m->ctx_len;
    i->tied = c->tied;
    i->eos = c->eos;
    i->passed_over = m->passed_over;
    i->kv_cache_bits = m->attn->kv_bytes * 8u;
    if (!m->be || m->packed || strncmp(m->weights_kind, "dense", 5) != 0)
        i->group = 0; /* nothing was quantized here */
    *out = m;
    return EDGERT_OK;
}

void edgert_model_close(edgert_model *m)
{
    if (!m)
        return;
    rn_free_state(m);
    rn_unload(m);
    free(m->dir);
    free(m->backend_name);
    free(m->backend_path);
    free(m->weights_kind);
    free(m);
}

const edgert_model_info *edgert_model_get_info(const edgert_model *m)
{
    return m ? &m->info : NULL;
}

void edgert_model_reset(edgert_model *m)
{
    if (m)
        m->pos = 0;
}

uint32_t edgert_model_position(const edgert_model *m)
{
    return m ? m->pos : 0;
}

edgert_status edgert_model_forward(edgert_model *m, const int32_t *ids, uint32_t n,
                                   float *logits, int all_logits, char *err, size_t err_len)
{
    if (!m || !ids || !logits || n == 0)
        return er_fail(EDGERT_E_USAGE, err, err_len, "edgert_model_forward: model, ids, logits "
                       "and n > 0 are required");
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= m->c.vocab)
            return er_fail(EDGERT_E_USAGE, err, err_len, "token %u: id %d is outside the "
                           "vocabulary [0, %u)", i, ids[i], m->c.vocab);
    if ((uint64_t)m->pos + n > m->ctx_len)
        return er_fail(EDGERT_E_USAGE, err, err_len, "%u tokens at position %u pass the context "
                       "of %u positions", n, m->pos, m->ctx_len);
    edgert_status st = EDGERT_OK;
    for (uint32_t done = 0; !st && done < n;) {
        uint32_t take = n - done < EDGERT_RUNNER_CHUNK ? n - done : EDGERT_RUNNER_CHUNK;
        float *out = all_logits ? logits + (size_t)done * m->c.vocab : logits;
        st = rn_forward_chunk(m, ids + done, take, out, all_logits, err, err_len);
        done += take;
    }
    return st;
}
