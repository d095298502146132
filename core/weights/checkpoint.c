/*
 * core/weights/checkpoint.c — a user's weights (edgert.h "checkpoints"): open and
 * validate a GPTQ or dense safetensors checkpoint, list its linear layers,
 * convert one layer to canonical int4. Packed files: packfile.c.
 * Length: over 700 lines because opening (the layer listing and the GPTQ
 * settings' three sources), each layer's conversions, its dense group and
 * the layout gate's facts all read the same per-layer tables; the GPTQ
 * settings' own reader (checkpoint_names.c) and packed files are apart.
 *
 * GPTQ layout (AutoGPTQ / GPTQModel, 4 bits), per linear layer P, with
 * W[N][K], G groups along K:
 *   P.qweight  I32 [K/8][N]   code of W[n][k] = qweight[k/8][n] >> 4*(k%8) & 15
 *   P.qzeros   I32 [G][N/8]   stored zero of (g, n) = qzeros[g][n/8] >> 4*(n%8) & 15
 *   P.scales   F16 [G][N]     (F32/BF16 accepted)
 *   P.g_idx    I32 [K]        optional: the group of input k
 *   w = scale * (q - z), where z = stored + 1 in the v1 convention (what
 *   AutoGPTQ writes: it stores z - 1) and z = stored in v2 (GPTQModel's
 *   "gptq_v2").
 * A qweight word holds codes k..k+7 low nibble first, which is the canonical
 * byte order, so converting is a transpose of 32-bit words.
 *
 * The settings (the rule docs/weights.md documents): from the safetensors
 * metadata when it has "checkpoint_format" or "bits" (edgert quantize writes
 * them there), else from quantize_config.json in the file's folder, else
 * inferred: v1 (AutoGPTQ's default on disk), group = K / G. Read
 * "checkpoint_format" (or "format") gptq|gptq_v2, "bits" (must be 4),
 * "group_size" (-1: one group per row), "sym", "desc_act". Whatever the
 * source says is checked against the tensors: a group size that disagrees
 * with G, sym with a zero point other than 8, are errors. A layer is
 * symmetric when every zero point is 8 (then its zeros are NULL).
 *
 * Act order (desc_act): a g_idx that is not k / group, each group still
 * holding `group` inputs, gives the layer a perm: its inputs sorted by
 * group (stably), so the canonical codes have contiguous groups and
 * column j is input perm[j]; edgert_gemm gathers the activations' columns
 * by it (edgert_qweights.perm). A g_idx that is not a permutation of the
 * groups is malformed (E_PARSE).
 */
#define _GNU_SOURCE
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "weights/checkpoint.h"
#include "context/context.h"
#include "formats/yamldoc.h"
#include "weights/weights.h"

#define CK_DENSE_GROUP 128u
#define CK_ROW_BLOCK 16u

typedef struct gptq_cfg {
    int bits, sym, desc_act, v2; /* -1: not stated */
    long long group;             /* 0: not stated; -1: one group per row */
} gptq_cfg;

/* ---- names -------------------------------------------------------------------------- */

/* "<prefix><suffix>" looked up. */
static const st_tensor *find2(const st_file *sf, const char *prefix, size_t plen,
                              const char *suffix)
{
    char name[4200];
    snprintf(name, sizeof name, "%.*s%s", (int)plen, prefix, suffix);
    return st_find(sf, name);
}

/* ---- GPTQ settings ------------------------------------------------------------------ */

static int parse_bool(const char *v)
{
    if (!v)
        return -1;
    if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "1"))
        return 1;
    if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "0"))
        return 0;
    return -2;
}

static int parse_format(const char *v)
{
    if (!v)
        return -1;
    if (!strcmp(v, "gptq"))
        return 0;
    if (!strcmp(v, "gptq_v2"))
        return 1;
    return -2;
}

/* Apply one key's value (a string from the metadata or the JSON file). */
static edgert_status cfg_set(gptq_cfg *g, const char *key, const char *v, const char *where,
                             char *err, size_t len)
{
    char *end = NULL;
    if (!strcmp(key, "bits") || !strcmp(key, "group_size")) {
        long long x = strtoll(v, &end, 10);
        if (!*v || *end || (!strcmp(key, "bits") ? x != 4 : (x == 0 || x < -1 || x > UINT32_MAX)))
            return er_fail(!strcmp(key, "bits") && *v && !*end ? EDGERT_E_UNSUPPORTED
                                                                : EDGERT_E_PARSE,
                           err, len, "%s: '%s' is '%s'; edgert reads 4-bit GPTQ (bits 4, "
                           "group_size a positive number or -1)", where, key, v);
        if (!strcmp(key, "bits"))
            g->bits = 4;
        else
            g->group = x;
        return EDGERT_OK;
    }
    int b = !strcmp(key, "sym") || !strcmp(key, "desc_act") ? parse_bool(v) : parse_format(v);
    if (b == -2)
        return er_fail(EDGERT_E_PARSE, err, len, "%s: '%s' is '%s', not %s", where, key, v,
                       strcmp(key, "sym") && strcmp(key, "desc_act") ? "gptq or gptq_v2"
                                                                      : "true or false");
    if (!strcmp(key, "sym"))
        g->sym = b;
    else if (!strcmp(key, "desc_act"))
        g->desc_act = b;
    else
        g->v2 = b;
    return EDGERT_OK;
}

static const char *const cfg_keys[] = {"bits", "group_size", "sym", "desc_act",
                                       "checkpoint_format", "format"};

static edgert_status cfg_from_meta(const st_file *sf, gptq_cfg *g, char *err, size_t len)
{
    for (size_t i = 0; i < sizeof cfg_keys / sizeof cfg_keys[0]; i++) {
        const char *v = st_meta_get(sf, cfg_keys[i]);
        if (v && !(i == 5 && !strcmp(v, "pt"))) { /* "format": "pt" is torch's tag */
            edgert_status st = cfg_set(g, i >= 4 ? "checkpoint_format" : cfg_keys[i], v,
                                       sf->path, err, len);
            if (st)
                return st;
        }
    }
    return EDGERT_OK;
}

/* quantize_config.json (JSON is YAML: read with the core's YAML reader). */
static edgert_status cfg_from_file(const char *path, gptq_cfg *g, char *err, size_t len)
{
    er_yaml y;
    er_diags d = {0};
    edgert_status st = er_yaml_load(&y, path, &d);
    if (st) {
        er_diag_last_error(&d, 0, err, len);
        er_diags_free(&d);
        return EDGERT_E_PARSE;
    }
    yaml_node_t *root = er_yaml_root(&y);
    if (!root || root->type != YAML_MAPPING_NODE)
        st = er_fail(EDGERT_E_PARSE, err, len, "%s: not a JSON object", path);
    for (size_t i = 0; !st && i < sizeof cfg_keys / sizeof cfg_keys[0]; i++) {
        yaml_node_t *v = er_yaml_get(&y, root, cfg_keys[i]);
        if (!v)
            continue;
        char where[700];
        snprintf(where, sizeof where, "%s:%u:%u", path, er_yaml_line(v), er_yaml_col(v));
        if (v->type != YAML_SCALAR_NODE)
            st = er_fail(EDGERT_E_PARSE, err, len, "%s: '%s' must be a scalar", where,
                         cfg_keys[i]);
        else
            st = cfg_set(g, i >= 4 ? "checkpoint_format" : cfg_keys[i],
                         (const char *)v->data.scalar.value, where, err, len);
    }
    er_yaml_free(&y);
    er_diags_free(&d);
    return st;
}

static edgert_status gptq_config(edgert_checkpoint *c, gptq_cfg *g, char *err, size_t len)
{
    *g = (gptq_cfg){-1, -1, -1, -1, 0};
    if (st_meta_get(&c->sf, "checkpoint_format") || st_meta_get(&c->sf, "bits")) {
        snprintf(c->config_source, sizeof c->config_source, "metadata");
        return cfg_from_meta(&c->sf, g, err, len);
    }
    char *dup = strdup(c->sf.path);
    if (!dup)
        return EDGERT_E_NOMEM;
    snprintf(c->config_source, sizeof c->config_source, "%s/quantize_config.json", dirname(dup));
    free(dup);
    if (access(c->config_source, F_OK) == 0)
        return cfg_from_file(c->config_source, g, err, len);
    snprintf(c->config_source, sizeof c->config_source, "inferred from the tensors");
    return EDGERT_OK;
}

/* ---- GPTQ layers: validation ---------------------------------------------------------- */

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static float scale_at(const st_tensor *t, const unsigned char *base, uint64_t i)
{
    if (t->dtype == ST_F32) {
        uint32_t b = rd32(base + 4 * i);
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    uint16_t h = (uint16_t)(base[2 * i] | base[2 * i + 1] << 8);
    return t->dtype == ST_F16 ? st_f16_to_f32(h) : st_bf16_to_f32(h);
}

/* The zero point of (g, n), convention applied. */
static unsigned zero_at(const er_ck_layer *s, const unsigned char *zb, uint64_t zcols, uint64_t g,
                        uint64_t n)
{
    unsigned stored = (rd32(zb + 4 * (g * zcols + n / 8)) >> (4 * (n % 8))) & 15u;
    return stored + (s->v2 ? 0u : 1u);
}

/* A tensor's dtype and shape as the file declares them: "F16 [2][17]". */
static const char *declared(const st_tensor *t, char *buf, size_t len)
{
    int o = snprintf(buf, len, "%s ", t->dtype_name);
    for (uint32_t d = 0; d < t->ndim && o > 0 && (size_t)o < len; d++)
        o += snprintf(buf + o, len - (size_t)o, "[%llu]", (unsigned long long)t->shape[d]);
    if (t->ndim == 0)
        snprintf(buf + o, len - (size_t)o, "(a scalar)");
    return buf;
}

/* Shapes and dtypes of P.qweight/qzeros/scales/g_idx; sets n, k, group.
 * Each message names the tensor at fault and what it declares. */
static edgert_status gptq_shapes(const edgert_checkpoint *c, const char *name, er_ck_layer *s,
                                 const gptq_cfg *g, edgert_layer *l, char *err, size_t len)
{
    const char *f = c->sf.path;
    const st_tensor *qw = s->qweight, *qz = s->qzeros, *sc = s->scales, *gi = s->g_idx;
    char d[256];
    if (!qz || !sc)
        return er_fail(EDGERT_E_PARSE, err, len, "%s: layer '%s': %s.qweight without %s.%s", f,
                       name, name, name, !qz ? "qzeros" : "scales");
    if (qw->dtype != ST_I32 || qw->ndim != 2 || qw->shape[0] == 0 || qw->shape[1] == 0 ||
        qw->shape[0] > UINT32_MAX / 8 || qw->shape[1] > UINT32_MAX)
        return er_fail(EDGERT_E_PARSE, err, len, "%s: tensor '%s.qweight' is %s; expected I32 "
                       "[K/8][N], both non-zero", f, name, declared(qw, d, sizeof d));
    l->k = (uint32_t)(qw->shape[0] * 8), l->n = (uint32_t)qw->shape[1];
    uint64_t G = sc->ndim == 2 ? sc->shape[0] : 0;
    if (!st_is_float(sc->dtype) || sc->ndim != 2 || sc->shape[1] != l->n || G == 0 || G > l->k)
        return er_fail(EDGERT_E_PARSE, err, len, "%s: tensor '%s.scales' is %s; expected F16 "
                       "[G][N] with N = %u (from qweight) and 1 <= G <= K = %u", f, name,
                       declared(sc, d, sizeof d), l->n, l->k);
    if (qz->dtype != ST_I32 || qz->ndim != 2 || qz->shape[0] != G ||
        qz->shape[1] != ((uint64_t)l->n + 7) / 8)
        return er_fail(EDGERT_E_PARSE, err, len, "%s: tensor '%s.qzeros' is %s; expected I32 "
                       "[%llu][%u] (G from scales, N / 8 from qweight)", f, name,
                       declared(qz, d, sizeof d), (unsigned long long)G, (l->n + 7) / 8);
    long long grp = g->group == -1 ? (long long)l->k : g->group;
    if (grp == 0) {
        if (l->k % G)
            return er_fail(EDGERT_E_PARSE, err, len, "%s: tensor '%s.scales': K = %u is not a "
                           "multiple of its %llu groups (rows), and no group_size is given (%s)",
                           f, name, l->k, (unsigned long long)G, c->config_source);
        grp = (long long)(l->k / G);
    }
    if (((uint64_t)l->k + (uint64_t)grp - 1) / (uint64_t)grp != G)
        return er_fail(EDGERT_E_PARSE, err, len, "%s: tensor '%s.scales' has %llu groups (rows), "
                       "but group size %lld (%s) gives %llu for K = %u", f, name,
                       (unsigned long long)G, grp, c->config_source,
                       (unsigned long long)(((uint64_t)l->k + (uint64_t)grp - 1) / (uint64_t)grp),
                       l->k);
    l->group = (uint32_t)grp;
    if (gi && (gi->dtype != ST_I32 || gi->ndim != 1 || gi->shape[0] != l->k))
        return er_fail(EDGERT_E_PARSE, err, len, "%s: tensor '%s.g_idx' is %s; expected I32 "
                       "[%u]", f, name, declared(gi, d, sizeof d), l->k);
    return EDGERT_OK;
}

/* Zero points in range (and 8 everywhere when sym), scales finite, g_idx in
 * order; sets l->symmetric. */
static edgert_status gptq_values(const edgert_checkpoint *c, const char *name, er_ck_layer *s,
                                 const gptq_cfg *g, edgert_layer *l, char *err, size_t len)
{
    const char *f = c->sf.path;
    uint64_t G = s->scales->shape[0], zc = s->qzeros->shape[1];
    const unsigned char *zb = st_data(&c->sf, s->qzeros), *sb = st_data(&c->sf, s->scales);
    int sym = 1;
    for (uint64_t gg = 0; gg < G; gg++)
        for (uint64_t n = 0; n < l->n; n++) {
            unsigned z = zero_at(s, zb, zc, gg, n);
            float sv = scale_at(s->scales, sb, gg * l->n + n);
            if (z > 15)
                return er_fail(EDGERT_E_PARSE, err, len, "%s: tensor '%s.qzeros' [%llu][%llu]: "
                               "group %llu, row %llu stores 15, which means a zero point of 16 "
                               "in GPTQ v1 (stored + 1), outside 0..15; a v2 checkpoint must "
                               "say checkpoint_format gptq_v2", f, name, (unsigned long long)gg,
                               (unsigned long long)(n / 8), (unsigned long long)gg,
                               (unsigned long long)n);
            if (!isfinite(sv))
                return er_fail(EDGERT_E_PARSE, err, len, "%s: tensor '%s.scales' [%llu][%llu] "
                               "is %s", f, name, (unsigned long long)gg, (unsigned long long)n,
                               isnan(sv) ? "NaN" : "infinite");
            if (z != 8 && g->sym == 1)
                return er_fail(EDGERT_E_PARSE, err, len, "%s: tensor '%s.qzeros' [%llu][%llu]: "
                               "sym is true (%s) but the zero point of group %llu, row %llu is "
                               "%u, not 8", f, name, (unsigned long long)gg,
                               (unsigned long long)(n / 8), c->config_source,
                               (unsigned long long)gg, (unsigned long long)n, z);
            sym &= z == 8;
        }
    l->symmetric = sym;
    if (!s->g_idx && g->desc_act == 1) /* act-order said, but no order to check it by */
        return er_fail(EDGERT_E_UNSUPPORTED, err, len, "%s: layer '%s': the GPTQ settings (%s) "
                       "say desc_act: true (act-order), but there is no '%s.g_idx' to give "
                       "the order of its inputs", f, name, c->config_source, name);
    if (!s->g_idx)
        return EDGERT_OK;
    const unsigned char *gb = st_data(&c->sf, s->g_idx);
    uint64_t *count = calloc(G, sizeof *count);
    if (!count)
        return EDGERT_E_NOMEM;
    int in_order = 1;
    edgert_status st = EDGERT_OK;
    for (uint32_t k = 0; k < l->k && !st; k++) {
        uint32_t v = rd32(gb + 4 * (uint64_t)k);
        if (v >= G)
            st = er_fail(EDGERT_E_PARSE, err, len, "%s: tensor '%s.g_idx' [%u] = %d: not a group "
                         "(0..%llu)", f, name, k, (int32_t)v, (unsigned long long)(G - 1));
        else
            count[v]++, in_order &= v == k / l->group;
    }
    for (uint64_t gg = 0; gg < G && !st; gg++) {
        uint64_t want = gg + 1 < G ? l->group : l->k - (G - 1) * (uint64_t)l->group;
        if (count[gg] != want)
            st = er_fail(EDGERT_E_PARSE, err, len, "%s: tensor '%s.g_idx' is not a permutation "
                         "of the groups: group %llu has %llu inputs, not %llu", f, name,
                         (unsigned long long)gg, (unsigned long long)count[gg],
                         (unsigned long long)want);
    }
    if (!st && !in_order && !(s->perm = malloc((size_t)l->k * sizeof *s->perm)))
        st = EDGERT_E_NOMEM;
    if (!st && !in_order) { /* inputs sorted by group, stably: count[] becomes each start */
        for (uint64_t gg = 0, at = 0; gg < G; gg++) {
            uint64_t c0 = count[gg];
            count[gg] = at;
            at += c0;
        }
        for (uint32_t k = 0; k < l->k; k++)
            s->perm[count[rd32(gb + 4 * (uint64_t)k)]++] = k;
    }
    free(count);
    return st;
}

/* ---- the layer list ---------------------------------------------------------------------- */

edgert_status er_ck_add_layer(edgert_checkpoint *c, const char *name, size_t plen,
                              const er_ck_layer *s, size_t *cap)
{
    if (c->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        edgert_layer *p = realloc(c->pub, nc * sizeof *p);
        if (p)
            c->pub = p;
        er_ck_layer *q = p ? realloc(c->src, nc * sizeof *q) : NULL;
        if (q)
            c->src = q;
        char **nm = q ? realloc(c->names, nc * sizeof *nm) : NULL;
        if (!nm)
            return EDGERT_E_NOMEM;
        c->names = nm;
        *cap = nc;
    }
    c->names[c->n] = strndup(name, plen);
    if (!c->names[c->n])
        return EDGERT_E_NOMEM;
    c->src[c->n] = *s;
    memset(&c->pub[c->n], 0, sizeof c->pub[c->n]);
    c->pub[c->n].name = c->names[c->n];
    c->n++;
    return EDGERT_OK;
}

/* A dense layer named name[0..plen), its weights tensor t (2-D float). */
static edgert_status add_dense(edgert_checkpoint *c, const char *name, size_t plen,
                               const st_tensor *t, size_t *cap)
{
    er_ck_layer s = {.dense = t};
    edgert_status st = er_ck_add_layer(c, name, plen, &s, cap);
    if (!st) {
        edgert_layer *l = &c->pub[c->n - 1];
        l->n = (uint32_t)t->shape[0], l->k = (uint32_t)t->shape[1];
        l->symmetric = -1;
        l->format = t->dtype == ST_F32 ? "dense-f32"
                    : t->dtype == ST_F16 ? "dense-f16" : "dense-bf16";
    }
    return st;
}

/* GPTQ layers (every P.qweight), then dense linear layers that are not a
 * GPTQ layer's, then (with layers of its own) a head tied to the token
 * embedding, er_ck_tied_embedding, as the dense layer "lm_head", quantize's
 * name for it: else bench and pack would leave out a step's largest GEMM. */
static edgert_status list_layers(edgert_checkpoint *c, const gptq_cfg *g, char *err, size_t len)
{
    size_t cap = 0;
    edgert_status st = EDGERT_OK;
    for (size_t i = 0; i < c->sf.n && !st; i++) {
        const st_tensor *t = &c->sf.t[i];
        if (!er_ck_ends_with(t->name, ".qweight"))
            continue;
        size_t plen = strlen(t->name) - strlen(".qweight");
        er_ck_layer s = {.qweight = t, .v2 = g->v2 == 1};
        s.qzeros = find2(&c->sf, t->name, plen, ".qzeros");
        s.scales = find2(&c->sf, t->name, plen, ".scales");
        s.g_idx = find2(&c->sf, t->name, plen, ".g_idx");
        st = er_ck_add_layer(c, t->name, plen, &s, &cap);
        if (st)
            break;
        edgert_layer *l = &c->pub[c->n - 1];
        l->format = s.v2 ? "gptq-v2" : "gptq-v1";
        st = st ? st : gptq_shapes(c, l->name, &c->src[c->n - 1], g, l, err, len);
        st = st ? st : gptq_values(c, l->name, &c->src[c->n - 1], g, l, err, len);
    }
    for (size_t i = 0; i < c->sf.n && !st; i++) {
        const st_tensor *t = &c->sf.t[i];
        size_t plen = strlen(t->name) - strlen(".weight");
        if (!er_ck_is_dense_linear(t) || find2(&c->sf, t->name, plen, ".qweight"))
            continue;
        st = add_dense(c, t->name, plen, t, &cap);
    }
    const st_tensor *tied = !st && c->n > 0 ? er_ck_tied_embedding(&c->sf) : NULL;
    st = tied ? add_dense(c, "lm_head", strlen("lm_head"), tied, &cap) : st;
    if (st == EDGERT_E_NOMEM)
        er_fail(st, err, len, "%s: out of memory listing the layers", c->sf.path);
    return st;
}

edgert_status edgert_checkpoint_open(const char *path, edgert_checkpoint **out, char *err,
                                     size_t err_len)
{
    if (!out)
        return er_fail(EDGERT_E_USAGE, err, err_len, "edgert_checkpoint_open: out is NULL");
    *out = NULL;
    if (!path)
        return er_fail(EDGERT_E_USAGE, err, err_len, "edgert_checkpoint_open: path is NULL");
    edgert_checkpoint *c = calloc(1, sizeof *c);
    if (!c)
        return er_fail(EDGERT_E_NOMEM, err, err_len, "%s: out of memory", path);
    edgert_status st = st_open(&c->sf, path, err, err_len);
    if (st) {
        free(c);
        return st;
    }
    gptq_cfg g = {-1, -1, -1, -1, 0};
    if (st_meta_get(&c->sf, "edgert_packed_format")) {
        c->kind = ER_CK_PACKED;
        st = er_ck_open_packed(c, err, err_len);
    } else {
        int gptq = 0;
        for (size_t i = 0; i < c->sf.n; i++)
            gptq |= er_ck_ends_with(c->sf.t[i].name, ".qweight");
        c->kind = gptq ? ER_CK_GPTQ : ER_CK_DENSE;
        st = gptq ? gptq_config(c, &g, err, err_len) : EDGERT_OK;
        st = st ? st : list_layers(c, &g, err, err_len);
    }
    if (!st && c->n == 0)
        st = er_fail(EDGERT_E_PARSE, err, err_len, "%s: no linear layer (no P.qweight, no 2-D "
                     "float P.weight other than an embedding)", path);
    if (st) {
        edgert_checkpoint_close(c);
        return st;
    }
    *out = c;
    return EDGERT_OK;
}

void edgert_checkpoint_close(edgert_checkpoint *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++) {
        free(c->names[i]);
        free(c->src[i].perm);
    }
    free(c->names);
    free(c->pub);
    free(c->src);
    st_close(&c->sf);
    free(c);
}

const char *edgert_checkpoint_kind(const edgert_checkpoint *c)
{
    if (!c)
        return NULL;
    return c->kind == ER_CK_GPTQ ? "gptq" : c->kind == ER_CK_DENSE ? "dense" : "packed";
}

const char *edgert_checkpoint_config_source(const edgert_checkpoint *c)
{
    return c ? (c->kind == ER_CK_GPTQ ? c->config_source : "") : NULL;
}

size_t edgert_checkpoint_layer_count(const edgert_checkpoint *c)
{
    return c ? c->n : 0;
}

const edgert_layer *edgert_checkpoint_layer_at(const edgert_checkpoint *c, size_t i)
{
    return c && i < c->n ? &c->pub[i] : NULL;
}

void er_ck_release(const edgert_checkpoint *c, size_t i)
{
    const er_ck_layer *s = &c->src[i];
    st_release(&c->sf, s->qweight);
    st_release(&c->sf, s->qzeros);
    st_release(&c->sf, s->scales);
    st_release(&c->sf, s->g_idx);
    st_release(&c->sf, s->dense);
}

/* ---- one layer as canonical int4 ---------------------------------------------------------- */

/* Codes row[j] = row[perm[j]] (two per byte, k even), `tmp` k / 2 bytes. */
static void permute_row(uint8_t *row, const uint32_t *perm, uint32_t k, uint8_t *tmp)
{
    memcpy(tmp, row, k / 2);
    for (uint32_t j = 0; j < k; j += 2) {
        unsigned lo = (tmp[perm[j] / 2] >> 4 * (perm[j] & 1)) & 15u;
        unsigned hi = (tmp[perm[j + 1] / 2] >> 4 * (perm[j + 1] & 1)) & 15u;
        row[j / 2] = (uint8_t)(lo | hi << 4);
    }
}

static void gptq_convert(const edgert_checkpoint *c, const er_ck_layer *s, const edgert_layer *l,
                         edgert_qtensor *q, uint8_t *row)
{
    const unsigned char *qb = st_data(&c->sf, s->qweight), *zb = st_data(&c->sf, s->qzeros),
                        *sb = st_data(&c->sf, s->scales);
    uint64_t k8 = l->k / 8, stride = l->k / 2, G = s->scales->shape[0], zc = s->qzeros->shape[1];
    /* transpose 32-bit words in blocks of 64 x 64 words, so both sides stay in cache */
    for (uint64_t k0 = 0; k0 < k8; k0 += 64)
        for (uint64_t n0 = 0; n0 < l->n; n0 += 64)
            for (uint64_t kk = k0; kk < k8 && kk < k0 + 64; kk++)
                for (uint64_t n = n0; n < l->n && n < n0 + 64; n++)
                    memcpy(q->codes + n * stride + kk * 4, qb + 4 * (kk * l->n + n), 4);
    if (s->perm) /* act order: column j becomes input perm[j], a row at a time */
        for (uint64_t n = 0; n < l->n; n++)
            permute_row(q->codes + n * stride, s->perm, l->k, row);
    for (uint64_t g = 0; g < G; g++)
        for (uint64_t n = 0; n < l->n; n++) {
            q->scales[n * G + g] = scale_at(s->scales, sb, g * l->n + n);
            if (q->zeros)
                q->zeros[n * G + g] = (uint8_t)zero_at(s, zb, zc, g, n);
        }
}

static edgert_status dense_convert(const edgert_checkpoint *c, const er_ck_layer *s,
                                   const edgert_layer *l, edgert_qtensor *q, char *err, size_t len)
{
    float *rows = malloc((size_t)CK_ROW_BLOCK * l->k * sizeof *rows);
    if (!rows)
        return er_fail(EDGERT_E_NOMEM, err, len, "%s: out of memory", c->sf.path);
    edgert_status st = EDGERT_OK;
    for (uint32_t r0 = 0; r0 < l->n && !st; r0 += CK_ROW_BLOCK) {
        uint32_t nr = l->n - r0 < CK_ROW_BLOCK ? l->n - r0 : CK_ROW_BLOCK;
        if (st_read_f32(&c->sf, s->dense, (uint64_t)r0 * l->k, (uint64_t)nr * l->k, rows, err,
                        len))
            st = EDGERT_E_PARSE;
        for (uint32_t r = 0; r < nr && !st; r++)
            if (er_quantize_row(rows + (size_t)r * l->k, l->k, q->view.group,
                                q->view.zeros == NULL, 0u, &q->view, r0 + r))
                st = er_fail(EDGERT_E_PARSE, err, len, "%s: tensor '%s' row %u has a "
                             "non-finite value", c->sf.path, s->dense->name, r0 + r);
    }
    free(rows);
    return st;
}

/* The group a file's dense layers are quantized in, one for the file as
 * a model's layers share one (and as the model runner picks for a model,
 * runner/load.c): the largest of CK_DENSE_GROUP, 64 and 32 that divides
 * every dense layer's K (SmolLM2's 576 and 1536: whole groups of 64, which
 * the fast layouts take, instead of partial groups of 128, which they
 * refuse); else CK_DENSE_GROUP, a last group partial (K = 200). */
static uint32_t dense_group(const edgert_checkpoint *c)
{
    for (uint32_t g = CK_DENSE_GROUP; g >= 32u; g /= 2u) {
        int all = 1;
        for (size_t i = 0; i < c->n; i++)
            all &= !c->src[i].dense || c->pub[i].k % g == 0;
        if (all)
            return g;
    }
    return CK_DENSE_GROUP;
}

/* The group size layer i comes in as canonical int4: its own (GPTQ), or
 * the file's dense group (one group when K is smaller). */
static uint32_t layer_group(const edgert_checkpoint *c, size_t i)
{
    const edgert_layer *l = &c->pub[i];
    if (!c->src[i].dense)
        return l->group;
    uint32_t g = dense_group(c);
    return l->k < g ? l->k : g;
}

uint32_t er_ck_layer_group(const edgert_checkpoint *c, size_t i)
{
    return layer_group(c, i);
}

/* Layer i as canonical int4, its first EDGERT_QTENSOR_V1_SIZE bytes (an
 * act-order layer's codes in group order, without the order: see below). */
static edgert_status layer_weights(edgert_checkpoint *c, size_t i, int dense_sym,
                                   edgert_qtensor *out, const char *who, char *err,
                                   size_t err_len)
{
    if (!out)
        return er_fail(EDGERT_E_USAGE, err, err_len, "%s: out NULL", who);
    memset(out, 0, EDGERT_QTENSOR_V1_SIZE); /* the caller's may be smaller */
    if (!c || i >= c->n)
        return er_fail(EDGERT_E_USAGE, err, err_len, "%s: no layer %zu", who, i);
    const edgert_layer *l = &c->pub[i];
    const er_ck_layer *s = &c->src[i];
    if (c->kind == ER_CK_PACKED)
        return er_fail(EDGERT_E_UNSUPPORTED, err, err_len, "%s: layer '%s' is packed for one "
                       "backend; map it with edgert_checkpoint_layer_packed", c->sf.path,
                       l->name);
    int sym = s->dense ? dense_sym : l->symmetric;
    uint32_t group = layer_group(c, i);
    uint8_t *row = NULL;
    if (er_qtensor_alloc(l->n, l->k, group, sym, out) ||
        (s->perm && !(row = malloc(l->k / 2)))) {
        edgert_qtensor_free(out);
        return er_fail(EDGERT_E_NOMEM, err, err_len, "%s: layer '%s' [n=%u k=%u]: out of memory",
                       c->sf.path, l->name, l->n, l->k);
    }
    out->view.name = l->name;
    edgert_status st = EDGERT_OK;
    if (s->dense)
        st = dense_convert(c, s, l, out, err, err_len);
    else
        gptq_convert(c, s, l, out, row);
    free(row);
    if (st)
        edgert_qtensor_free(out);
    return st;
}

edgert_status edgert_checkpoint_layer_weights(edgert_checkpoint *c, size_t i, edgert_qtensor *out,
                                              char *err, size_t err_len)
{
    static const char who[] = "edgert_checkpoint_layer_weights";
    if (c && i < c->n && c->src[i].perm) { /* its codes alone would give wrong results */
        if (out)
            memset(out, 0, EDGERT_QTENSOR_V1_SIZE);
        return er_fail(EDGERT_E_UNSUPPORTED, err, err_len, "%s: %s: layer '%s' is act-order "
                       "(tensor '%s.g_idx' is not k / group): its codes come in group order "
                       "with the order of its inputs, which edgert_checkpoint_layer_weights_v2 "
                       "gives", c->sf.path, who, c->pub[i].name, c->pub[i].name);
    }
    return layer_weights(c, i, 0, out, who, err, err_len);
}

edgert_status edgert_checkpoint_layer_weights_v2(edgert_checkpoint *c, size_t i,
                                                 edgert_qtensor *out, char *err, size_t err_len)
{
    return er_checkpoint_layer_weights(c, i, 0, out, err, err_len);
}

edgert_status er_checkpoint_layer_weights(edgert_checkpoint *c, size_t i, int dense_sym,
                                          edgert_qtensor *out, char *err, size_t err_len)
{
    edgert_status st =
        layer_weights(c, i, dense_sym, out, "edgert_checkpoint_layer_weights_v2", err, err_len);
    if (st == EDGERT_OK) { /* this header's whole view: version 2 */
        out->view.struct_size = (uint32_t)sizeof out->view;
        out->view.perm = c->src[i].perm;
    }
    return st;
}

edgert_status edgert_checkpoint_layer_dense(edgert_checkpoint *c, size_t i, uint32_t row0,
                                            uint32_t rows, float *out, char *err, size_t err_len)
{
    if (!c || i >= c->n || !out || row0 > c->pub[i].n || rows > c->pub[i].n - row0)
        return er_fail(EDGERT_E_USAGE, err, err_len, "edgert_checkpoint_layer_dense: bad "
                       "arguments");
    const edgert_layer *l = &c->pub[i];
    const er_ck_layer *s = &c->src[i];
    if (c->kind == ER_CK_PACKED)
        return er_fail(EDGERT_E_UNSUPPORTED, err, err_len, "%s: layer '%s' holds one backend's "
                       "packed bytes, not weights a dense reference can be made of; use its "
                       "source checkpoint", c->sf.path, l->name);
    if (s->dense)
        return st_read_f32(&c->sf, s->dense, (uint64_t)row0 * l->k, (uint64_t)rows * l->k, out,
                           err, err_len)
                   ? EDGERT_E_PARSE
                   : EDGERT_OK;
    edgert_qtensor q;
    edgert_status st = er_checkpoint_layer_weights(c, i, 0, &q, err, err_len);
    if (st)
        return st;
    size_t G = (size_t)(l->k / l->group) + (l->k % l->group != 0);
    edgert_qweights v = q.view;
    v.n = rows;
    v.codes += (size_t)row0 * (l->k / 2);
    v.scales += (size_t)row0 * G;
    v.zeros = v.zeros ? v.zeros + (size_t)row0 * G : NULL;
    edgert_dequantize(&v, out);
    edgert_qtensor_free(&q);
    return EDGERT_OK;
}

void edgert_checkpoint_layer_release(edgert_checkpoint *c, size_t i)
{
    if (c && i < c->n)
        er_ck_release(c, i);
}

/* The layout gate's facts of the groups (context.h): every group size with
 * its first layer, and the first layer with a partial group. */
static edgert_status summarize_groups(struct edgert_ctx *ctx, const edgert_checkpoint *c)
{
    for (size_t i = 0; i < c->n; i++) {
        uint32_t g = layer_group(c, i), k = c->pub[i].k;
        const char *name = c->pub[i].name;
        if (g != 0 && k % g != 0 && !ctx->weights.first_partial) {
            if (!(ctx->weights.first_partial = er_strdup(name)))
                return EDGERT_E_NOMEM;
            ctx->weights.partial_k = k;
            ctx->weights.partial_group = g;
        }
        size_t j = 0;
        while (j < ctx->weights.ngroups && ctx->weights.groups[j] != g)
            j++;
        if (j < ctx->weights.ngroups)
            continue;
        uint32_t *gs = realloc(ctx->weights.groups, (j + 1) * sizeof *gs);
        if (gs)
            ctx->weights.groups = gs;
        char **gl = realloc(ctx->weights.group_layer, (j + 1) * sizeof *gl);
        if (gl)
            ctx->weights.group_layer = gl;
        if (!gs || !gl || !(gl[j] = er_strdup(name)))
            return EDGERT_E_NOMEM;
        gs[j] = g;
        ctx->weights.ngroups++;
    }
    return EDGERT_OK;
}

edgert_status er_weights_summary(struct edgert_ctx *ctx, const char *path, char *err,
                                 size_t err_len)
{
    edgert_checkpoint *c = NULL;
    edgert_status st = edgert_checkpoint_open(path, &c, err, err_len);
    if (st)
        return st;
    ctx->weights.path = er_strdup(path);
    ctx->weights.int4 = c->kind != ER_CK_DENSE;
    if (c->kind == ER_CK_PACKED) {
        ctx->weights.packed_for = er_strdup(st_meta_get(&c->sf, "backend"));
        const char *hx = st_meta_get(&c->sf, "plugin_xxh3"); /* the file gate compares it */
        char *end = NULL;
        if (hx && strlen(hx) == 16) {
            ctx->weights.packed_xxh3 = strtoull(hx, &end, 16);
            ctx->weights.has_packed_xxh3 = end && *end == '\0';
        }
    }
    /* a dense file, and a dense layer of a GPTQ file (symmetric -1: a head
     * left unquantized, or tied to the embedding), is quantized for the
     * backend it is packed for (er_checkpoint_layer_weights): symmetric or
     * not, as that one takes; only a GPTQ layer's zero points are given */
    for (size_t i = 0; c->kind != ER_CK_DENSE && i < c->n && !ctx->weights.asymmetric; i++)
        if (c->pub[i].symmetric == 0) {
            ctx->weights.asymmetric = 1;
            ctx->weights.first_asym = er_strdup(c->pub[i].name);
        }
    st = c->kind == ER_CK_PACKED ? EDGERT_OK : summarize_groups(ctx, c);
    edgert_checkpoint_close(c);
    if (st || !ctx->weights.path)
        return er_fail(EDGERT_E_NOMEM, err, err_len, "out of memory");
    return EDGERT_OK;
}
