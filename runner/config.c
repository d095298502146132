/*
 * runner/config.c — config.json of a Hugging Face model folder, read through
 * the YAML layer (JSON is YAML 1.2 flow syntax, which libyaml reads), so
 * every problem is named at file:line:col and the file gets the same limits
 * as every other document edgert reads (1 MiB, nesting depth, duplicate
 * keys). All problems are collected in one pass.
 *
 * Read: model_type (llama, mistral, qwen2, qwen3), hidden_size,
 * intermediate_size, num_hidden_layers, num_attention_heads,
 * num_key_value_heads (default: the heads), head_dim (default: hidden /
 * heads), vocab_size, rms_norm_eps (default 1e-6, transformers' own),
 * rope_theta (10000), max_position_embeddings (2048), tie_word_embeddings
 * (false), hidden_act (must be silu), attention_bias (llama; qwen2 always
 * has q/k/v bias), rope_scaling (null, or of type llama3 with its four
 * numbers), sliding_window (mistral; qwen2 only with use_sliding_window),
 * which bounds the context. Other keys are ignored: configs carry many
 * (torch_dtype, transformers_version, ...).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "common/diag.h"
#include "formats/yamldoc.h"

static int is_null(yaml_node_t *n)
{
    return !n || (n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
                  strcmp((const char *)n->data.scalar.value, "null") == 0);
}

static void u32(er_yaml *y, yaml_node_t *root, const char *key, int required, long long lo,
                long long hi, uint32_t *out, int *bad, er_diags *d)
{
    long long v = 0;
    int r = er_yaml_int(y, root, key, required, lo, hi, &v, d);
    if (r < 0)
        *bad = 1;
    else if (r == 0)
        *out = (uint32_t)v;
}

static void num(er_yaml *y, yaml_node_t *root, const char *key, double *out, int *bad,
                er_diags *d)
{
    yaml_node_t *n = er_yaml_get(y, root, key);
    if (n && is_null(n))
        return; /* null: the default */
    if (er_yaml_num(y, root, key, 0, out, d) < 0)
        *bad = 1;
}

static void flag(er_yaml *y, yaml_node_t *root, const char *key, int *out, int *bad, er_diags *d)
{
    yaml_node_t *n = er_yaml_get(y, root, key);
    if (n && is_null(n))
        return;
    if (er_yaml_bool(y, root, key, 0, out, d) < 0)
        *bad = 1;
}

/* rope_scaling: null, or {rope_type|type: llama3, factor, low_freq_factor,
 * high_freq_factor, original_max_position_embeddings}. 1 when it is one
 * this runner does not apply (reported as unsupported). */
static int rope_scaling(er_yaml *y, yaml_node_t *root, rn_config *c, int *bad, er_diags *d)
{
    yaml_node_t *rs = er_yaml_get(y, root, "rope_scaling");
    if (is_null(rs))
        return 0;
    if (rs->type != YAML_MAPPING_NODE) {
        er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(rs), er_yaml_col(rs),
                    "rope_scaling: expected null or a mapping");
        *bad = 1;
        return 0;
    }
    char *type = NULL;
    int r = er_yaml_str(y, rs, "rope_type", 0, &type, d);
    if (r == 1)
        r = er_yaml_str(y, rs, "type", 1, &type, d);
    if (r < 0) {
        *bad = 1;
        return 0;
    }
    if (strcmp(type, "llama3") != 0) {
        er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(rs), er_yaml_col(rs),
                    "rope_scaling of type '%s': the runner applies none or llama3", type);
        free(type);
        return 1;
    }
    free(type);
    c->rope_llama3 = 1;
    if (er_yaml_num(y, rs, "factor", 1, &c->rs_factor, d) < 0 ||
        er_yaml_num(y, rs, "low_freq_factor", 1, &c->rs_low, d) < 0 ||
        er_yaml_num(y, rs, "high_freq_factor", 1, &c->rs_high, d) < 0 ||
        er_yaml_num(y, rs, "original_max_position_embeddings", 1, &c->rs_orig, d) < 0)
        *bad = 1;
    else if (!(c->rs_factor > 0 && c->rs_low > 0 && c->rs_high > c->rs_low && c->rs_orig > 0)) {
        er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(rs), er_yaml_col(rs),
                    "rope_scaling: factor, low_freq_factor < high_freq_factor and "
                    "original_max_position_embeddings must be positive");
        *bad = 1;
    }
    return 0;
}

/* The architecture: model_type, hidden_act, and what follows from them.
 * 1 when the model is one this runner does not run. */
static int architecture(er_yaml *y, yaml_node_t *root, rn_config *c, int *bad, er_diags *d)
{
    char *type = NULL, *act = NULL;
    int unsupported = 0;
    if (er_yaml_str(y, root, "model_type", 1, &type, d) < 0) {
        *bad = 1;
        return 0;
    }
    yaml_node_t *tn = er_yaml_get(y, root, "model_type");
    if (strcmp(type, "llama") && strcmp(type, "mistral") && strcmp(type, "qwen2") &&
        strcmp(type, "qwen3")) {
        er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(tn), er_yaml_col(tn),
                    "model_type '%s': the runner runs llama, mistral, qwen2 and qwen3", type);
        unsupported = 1;
    }
    snprintf(c->model_type, sizeof c->model_type, "%s", type);
    free(type);
    int r = er_yaml_str(y, root, "hidden_act", 0, &act, d);
    if (r < 0)
        *bad = 1;
    if (r == 0 && strcmp(act, "silu") != 0) {
        yaml_node_t *an = er_yaml_get(y, root, "hidden_act");
        er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(an), er_yaml_col(an),
                    "hidden_act '%s': the runner's MLP is SiLU-gated (silu)", act);
        unsupported = 1;
    }
    free(act);
    c->qkv_bias = strcmp(c->model_type, "qwen2") == 0;
    c->qk_norm = strcmp(c->model_type, "qwen3") == 0;
    if (strcmp(c->model_type, "llama") == 0)
        flag(y, root, "attention_bias", &c->qkv_bias, bad, d);
    return unsupported;
}

/* eos_token_id: an id, a list of ids (the first is kept), or null. */
static void eos(er_yaml *y, yaml_node_t *root, rn_config *c, int *bad, er_diags *d)
{
    yaml_node_t *n = er_yaml_get(y, root, "eos_token_id");
    c->eos = -1;
    if (!n || is_null(n))
        return;
    if (n->type == YAML_SEQUENCE_NODE && n->data.sequence.items.top > n->data.sequence.items.start)
        n = er_yaml_node(y, *n->data.sequence.items.start);
    const char *s = n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : "";
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 0 || v >= (long)c->vocab) {
        er_diag_add(d, EDGERT_LOG_ERROR, y->path, n ? er_yaml_line(n) : 1, n ? er_yaml_col(n) : 1,
                    "eos_token_id: expected a token id in [0, vocab_size)");
        *bad = 1;
        return;
    }
    c->eos = (int32_t)v;
}

/* The shapes agree with each other; errors at the key that breaks it. */
static void consistent(er_yaml *y, yaml_node_t *root, rn_config *c, int *bad, er_diags *d)
{
    yaml_node_t *kv = er_yaml_get(y, root, "num_key_value_heads");
    yaml_node_t *hd = er_yaml_get(y, root, "head_dim");
    yaml_node_t *at = kv ? kv : er_yaml_get(y, root, "num_attention_heads");
    if (c->heads % c->kv_heads || c->heads / c->kv_heads > RN_ATTN_MAX_GROUP) {
        er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(at), er_yaml_col(at),
                    "num_attention_heads %u is not a multiple of num_key_value_heads %u (at most "
                    "64 query heads per KV head)",
                    c->heads, c->kv_heads);
        *bad = 1;
    }
    if (!hd && c->hidden % c->heads) {
        at = er_yaml_get(y, root, "hidden_size");
        er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(at), er_yaml_col(at),
                    "hidden_size %u is not a multiple of num_attention_heads %u (and no "
                    "head_dim says the head size)", c->hidden, c->heads);
        *bad = 1;
    }
    if (c->head_dim % 2) {
        at = hd ? hd : er_yaml_get(y, root, "hidden_size");
        er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(at), er_yaml_col(at),
                    "head size %u is odd: rotary embedding pairs its halves", c->head_dim);
        *bad = 1;
    }
}

static const struct {
    const char *key;
    long long lo, hi;
    size_t off;
} sizes[] = {
    {"hidden_size", 2, 65536, offsetof(rn_config, hidden)},
    {"intermediate_size", 1, 1 << 20, offsetof(rn_config, mlp)},
    {"num_hidden_layers", 1, 1024, offsetof(rn_config, layers)},
    {"num_attention_heads", 1, 1024, offsetof(rn_config, heads)},
    {"vocab_size", 1, 1 << 24, offsetof(rn_config, vocab)},
};

edgert_status rn_config_read(const char *path, rn_config *c, char *err, size_t len)
{
    memset(c, 0, sizeof *c);
    er_diags d = {0};
    er_yaml y = {0};
    edgert_status st = er_yaml_load(&y, path, &d);
    int bad = 0, unsupported = 0;
    yaml_node_t *root = st ? NULL : er_yaml_root(&y);
    if (!st && (!root || root->type != YAML_MAPPING_NODE)) {
        er_diag_add(&d, EDGERT_LOG_ERROR, path, root ? er_yaml_line(root) : 1,
                    root ? er_yaml_col(root) : 1, "expected a JSON object");
        st = EDGERT_E_PARSE;
    }
    if (!st) {
        unsupported = architecture(&y, root, c, &bad, &d);
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            u32(&y, root, sizes[i].key, 1, sizes[i].lo, sizes[i].hi,
                (uint32_t *)((char *)c + sizes[i].off), &bad, &d);
        c->kv_heads = c->heads;
        u32(&y, root, "num_key_value_heads", 0, 1, 1024, &c->kv_heads, &bad, &d);
        c->max_pos = 2048;
        u32(&y, root, "max_position_embeddings", 0, 1, 1 << 24, &c->max_pos, &bad, &d);
        uint32_t window = 0;
        int use_window = strcmp(c->model_type, "qwen2") != 0;
        flag(&y, root, "use_sliding_window", &use_window, &bad, &d);
        yaml_node_t *sw = er_yaml_get(&y, root, "sliding_window");
        if (sw && !is_null(sw) && use_window)
            u32(&y, root, "sliding_window", 0, 1, 1 << 24, &window, &bad, &d);
        if (window && window < c->max_pos)
            c->max_pos = window; /* attention within the window equals full attention */
        c->eps = 1e-6;
        c->rope_theta = 10000.0;
        num(&y, root, "rms_norm_eps", &c->eps, &bad, &d);
        num(&y, root, "rope_theta", &c->rope_theta, &bad, &d);
        flag(&y, root, "tie_word_embeddings", &c->tied, &bad, &d);
        eos(&y, root, c, &bad, &d);
        unsupported |= rope_scaling(&y, root, c, &bad, &d);
        if (!bad) {
            c->head_dim = c->hidden / c->heads;
            u32(&y, root, "head_dim", 0, 2, 1024, &c->head_dim, &bad, &d);
        }
        if (!bad)
            consistent(&y, root, c, &bad, &d);
        if (!bad && !(c->eps > 0 && c->eps < 1 && c->rope_theta > 1)) {
            er_diag_add(&d, EDGERT_LOG_ERROR, path, er_yaml_line(root), er_yaml_col(root),
                        "rms_norm_eps %g must be in (0, 1) and rope_theta %g above 1", c->eps,
                        c->rope_theta);
            bad = 1;
        }
        st = bad ? EDGERT_E_PARSE : unsupported ? EDGERT_E_UNSUPPORTED : EDGERT_OK;
    }
    if (st)
        er_diag_last_error(&d, 0, err, len);
    er_yaml_free(&y);
    er_diags_free(&d);
    return st;
}
