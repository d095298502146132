/*
 * runner/load.c — a model folder's weights: the safetensors files (one, or
 * the shards of model.safetensors.index.json), every tensor checked against
 * config.json before any work, and every linear layer made ready for its
 * GEMMs: packed for the backend (GPTQ layers as they are, dense ones
 * quantized by round to nearest in one group size for the whole model,
 * q/k/v and gate/up packed as one matrix when their groups and zero points
 * agree, a head over 32 MiB of codes cut into slices of rows so no more is
 * ever converted at once), mapped from a packed file, or, for the fp32
 * reference, the file's own values.
 *
 * Linear layers are found through the public checkpoint API
 * (edgert_checkpoint_open per file); norms, biases and the embedding
 * through the safetensors reader, since they are not linear layers.
 * An act-order layer's input order goes to the runner's own work, which
 * writes each GEMM's input in it (runner_order), not to a copy per call.
 * Length: over 700 lines because the fusion, slicing, act order and the
 * three sources (dense, GPTQ, packed) each take a screen of the one flow
 * that makes a layer's parts.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "common/diag.h"
#include "formats/yamldoc.h"

#define RN_SLICE_BYTES (32u << 20) /* the most codes converted at once */
#define RN_ROW_BLOCK 256u          /* dense rows quantized at once */
#define RN_RELEASE_BYTES (16u << 20) /* dense bytes read between drops of their pages */

/* ---- files ------------------------------------------------------------------------ */

/* The shard file names of model.safetensors.index.json, sorted, unique;
 * each a plain file name in the folder. */
static edgert_status index_files(const char *path, char ***names, size_t *count, char *err,
                                 size_t len)
{
    er_diags d = {0};
    er_yaml y = {0};
    edgert_status st = er_yaml_load(&y, path, &d);
    yaml_node_t *root = st ? NULL : er_yaml_root(&y);
    yaml_node_t *map = root && root->type == YAML_MAPPING_NODE
                           ? er_yaml_get(&y, root, "weight_map") : NULL;
    if (!st && (!map || map->type != YAML_MAPPING_NODE || map->data.mapping.pairs.top ==
                                                             map->data.mapping.pairs.start)) {
        yaml_node_t *at = map ? map : root;
        er_diag_add(&d, EDGERT_LOG_ERROR, path, at ? er_yaml_line(at) : 1,
                    at ? er_yaml_col(at) : 1, "expected {\"weight_map\": {tensor: file, ...}}");
        st = EDGERT_E_PARSE;
    }
    *names = NULL;
    *count = 0;
    for (yaml_node_pair_t *p = st ? NULL : map->data.mapping.pairs.start;
         p && p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *v = er_yaml_node(&y, p->value);
        const char *f = v && v->type == YAML_SCALAR_NODE ? (const char *)v->data.scalar.value
                                                         : NULL;
        if (!f || !*f || strchr(f, '/') || strcmp(f, "..") == 0 || strcmp(f, ".") == 0) {
            er_diag_add(&d, EDGERT_LOG_ERROR, path, v ? er_yaml_line(v) : 1,
                        v ? er_yaml_col(v) : 1, "a shard must be a file name in the folder");
            st = EDGERT_E_PARSE;
            break;
        }
        size_t i = 0;
        while (i < *count && strcmp((*names)[i], f) < 0)
            i++;
        if (i < *count && strcmp((*names)[i], f) == 0)
            continue;
        char **nn = realloc(*names, (*count + 1) * sizeof *nn);
        char *copy = strdup(f);
        if (!nn || !copy) {
            free(copy);
            *names = nn ? nn : *names;
            st = er_fail(EDGERT_E_NOMEM, err, len, "out of memory");
            break;
        }
        *names = nn;
        memmove(nn + i + 1, nn + i, (*count - i) * sizeof *nn);
        nn[i] = copy;
        (*count)++;
    }
    if (st && st != EDGERT_E_NOMEM)
        er_diag_last_error(&d, 0, err, len);
    er_yaml_free(&y);
    er_diags_free(&d);
    return st;
}

static int names_linear(const st_file *sf)
{
    for (size_t i = 0; i < sf->n; i++)
        if (strstr(sf->t[i].name, "_proj.") || strncmp(sf->t[i].name, "lm_head.", 8) == 0)
            return 1;
    return 0;
}

static edgert_status open_files(edgert_model *m, char *err, size_t len)
{
    char path[4200], **names = NULL;
    size_t count = 0;
    edgert_status st = EDGERT_OK;
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", m->dir);
    if (access(path, F_OK) == 0) {
        st = index_files(path, &names, &count, err, len);
    } else {
        names = malloc(sizeof *names);
        if (names && (names[0] = strdup("model.safetensors")))
            count = 1;
        else
            st = er_fail(EDGERT_E_NOMEM, err, len, "out of memory");
    }
    m->shards = st ? NULL : calloc(count, sizeof *m->shards);
    m->cks = st ? NULL : calloc(count, sizeof *m->cks);
    if (!st && (!m->shards || !m->cks))
        st = er_fail(EDGERT_E_NOMEM, err, len, "out of memory");
    if (!st)
        m->nshards = count; /* st_close and edgert_checkpoint_close take the unopened ones */
    for (size_t i = 0; !st && i < count; i++) {
        snprintf(path, sizeof path, "%s/%s", m->dir, names[i]);
        st = st_open(&m->shards[i], path, err, len);
        if (st == EDGERT_E_IO && errno == ENOENT)
            st = er_fail(EDGERT_E_IO, err, len, "%s: no such file: the folder holds no weights "
                         "(model.safetensors, or model.safetensors.index.json and its shards)",
                         path);
        if (!st && names_linear(&m->shards[i]))
            st = edgert_checkpoint_open(path, &m->cks[i], err, len);
    }
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
    return st;
}

static const st_tensor *find_tensor(const edgert_model *m, const char *name, const st_file **sf)
{
    for (size_t i = 0; i < m->nshards; i++) {
        const st_tensor *t = st_find(&m->shards[i], name);
        if (t) {
            *sf = &m->shards[i];
            return t;
        }
    }
    return NULL;
}

/* A 1-D float tensor of n elements, as owned fp32; NULL when !required and absent. */
static edgert_status vector(edgert_model *m, const char *name, uint32_t n, int required,
                            float **out, char *err, size_t len)
{
    const st_file *sf = NULL;
    const st_tensor *t = find_tensor(m, name, &sf);
    *out = NULL;
    if (!t)
        return required ? er_fail(EDGERT_E_PARSE, err, len, "%s: tensor %s is missing",
                                  m->shards[0].path, name)
                        : EDGERT_OK;
    if (t->ndim != 1 || t->shape[0] != n || !st_is_float(t->dtype) || t->dtype == ST_F64)
        return er_fail(EDGERT_E_PARSE, err, len, "%s: tensor %s is %s [%llu%s], config.json "
                       "says %s [%u]", sf->path, name, t->dtype_name,
                       (unsigned long long)(t->ndim ? t->shape[0] : 0), t->ndim > 1 ? ", ..." : "",
                       "F32/F16/BF16", n);
    if (!(*out = malloc(n * sizeof(float))))
        return er_fail(EDGERT_E_NOMEM, err, len, "out of memory");
    int bad = st_read_f32(sf, t, 0, n, *out, err, len) != 0;
    st_release_near(sf, t); /* the read mapped up to a folio around it */
    if (bad)
        return EDGERT_E_PARSE;
    for (uint32_t i = 0; i < n; i++)
        if (!isfinite((*out)[i]))
            return er_fail(EDGERT_E_PARSE, err, len, "%s: tensor %s: element %u is not finite",
                           sf->path, name, i);
    return EDGERT_OK;
}

/* ---- linear layers ------------------------------------------------------------------ */

typedef struct rn_src {
    edgert_checkpoint *ck;
    size_t idx;
    const edgert_layer *l;
} rn_src;

/* The checkpoint layer `name` with W[n][k]. An untied head is the one whose
 * file holds lm_head's own tensors; a tied one is the embedding's, listed
 * by the checkpoint API as "lm_head" too. */
static edgert_status find_layer(edgert_model *m, const char *name, uint32_t n, uint32_t k,
                                rn_src *s, char *err, size_t len)
{
    int head = strcmp(name, "lm_head") == 0;
    const st_file *want = NULL;
    if (head && !find_tensor(m, "lm_head.weight", &want) &&
        !find_tensor(m, "lm_head.qweight", &want)) {
        if (!m->c.tied)
            return er_fail(EDGERT_E_PARSE, err, len, "%s: tensor lm_head.weight is missing "
                           "(config.json: tie_word_embeddings is false)", m->shards[0].path);
        find_tensor(m, "model.embed_tokens.weight", &want);
    }
    for (size_t f = 0; f < m->nshards; f++) {
        if (!m->cks[f] || (want && want != &m->shards[f]))
            continue;
        for (size_t i = 0; i < edgert_checkpoint_layer_count(m->cks[f]); i++) {
            const edgert_layer *l = edgert_checkpoint_layer_at(m->cks[f], i);
            if (strcmp(l->name, name) != 0)
                continue;
            if (l->n != n || l->k != k)
                return er_fail(EDGERT_E_PARSE, err, len, "%s: layer %s is [%u, %u] (n, k), "
                               "config.json says [%u, %u]", m->shards[f].path, name, l->n, l->k,
                               n, k);
            *s = (rn_src){m->cks[f], i, l};
            return EDGERT_OK;
        }
    }
    return er_fail(EDGERT_E_PARSE, err, len, "%s: linear layer %s (%s.weight or %s.qweight) is "
                   "missing", m->shards[0].path, name, name, name);
}

/* Canonical int4 of one layer, or of rows [r0, r0 + rows) of it. */
typedef struct rn_q {
    uint8_t *codes, *zeros;
    float *scales;
    uint32_t n, k, group;
    const uint32_t *perm; /* act order: the checkpoint's (edgert_qweights.perm); or NULL */
} rn_q;

/* Whether two layers' inputs come in one order (NULL: in order). */
static int same_order(const uint32_t *a, const uint32_t *b, uint32_t k)
{
    return a == b || (a && b && memcmp(a, b, (size_t)k * sizeof *a) == 0);
}

static void q_free(rn_q *q)
{
    free(q->codes);
    free(q->scales);
    free(q->zeros);
    memset(q, 0, sizeof *q);
}

static edgert_status q_alloc(rn_q *q, uint32_t n, uint32_t k, uint32_t group, int zeros,
                             char *err, size_t len)
{
    size_t g = (k + group - 1) / group;
    *q = (rn_q){.n = n, .k = k, .group = group};
    q->codes = malloc((size_t)n * ((k + 1) / 2));
    q->scales = malloc((size_t)n * g * sizeof(float));
    q->zeros = zeros ? malloc((size_t)n * g) : NULL;
    if (!q->codes || !q->scales || (zeros && !q->zeros)) {
        q_free(q);
        return er_fail(EDGERT_E_NOMEM, err, len, "out of memory");
    }
    return EDGERT_OK;
}

/* Copy rows [0, src->n) of src into dst from row `at` (zeros 8 where src has none). */
static void q_put(rn_q *dst, uint32_t at, const uint8_t *codes, const float *scales,
                  const uint8_t *zeros, uint32_t n)
{
    size_t rb = (dst->k + 1) / 2, g = (dst->k + dst->group - 1) / dst->group;
    memcpy(dst->codes + at * rb, codes, n * rb);
    memcpy(dst->scales + at * g, scales, n * g * sizeof(float));
    if (dst->zeros) {
        if (zeros)
            memcpy(dst->zeros + at * g, zeros, n * g);
        else
            memset(dst->zeros + at * g, 8, n * g);
    }
}

/* Rows [r0, r0 + rows) of layer s as canonical int4: a GPTQ layer's own
 * (whole layer from `full`), a dense one quantized here. */
static edgert_status layer_rows(edgert_model *m, const rn_src *s, const edgert_qtensor *full,
                                uint32_t r0, uint32_t rows, uint32_t group, int sym, rn_q *q,
                                char *err, size_t len)
{
    edgert_status st;
    if (full) {
        const edgert_qweights *v = &full->view;
        size_t g = (v->k + v->group - 1) / v->group;
        if ((st = q_alloc(q, rows, v->k, v->group, v->zeros != NULL, err, len)))
            return st;
        q_put(q, 0, v->codes + (size_t)r0 * ((v->k + 1) / 2), v->scales + (size_t)r0 * g,
              v->zeros ? v->zeros + (size_t)r0 * g : NULL, rows);
        q->perm = v->perm;
        return EDGERT_OK;
    }
    if ((st = q_alloc(q, rows, s->l->k, group, !sym, err, len)))
        return st;
    float *buf = malloc((size_t)RN_ROW_BLOCK * s->l->k * sizeof(float));
    if (!buf) {
        q_free(q);
        return er_fail(EDGERT_E_NOMEM, err, len, "out of memory");
    }
    /* file bytes read since its pages were last dropped, counted as fp32:
     * an F16/BF16 file's go every 8 MiB read, an F32 one's every 16 */
    uint64_t read = 0;
    for (uint32_t r = 0; !st && r < rows; r += RN_ROW_BLOCK) {
        uint32_t nr = rows - r < RN_ROW_BLOCK ? rows - r : RN_ROW_BLOCK;
        edgert_qtensor t = {0};
        st = edgert_checkpoint_layer_dense(s->ck, s->idx, r0 + r, nr, buf, err, len);
        /* a big layer (a head of 100s of MiB) never resides whole beside
         * its packed copy: its file pages go every 16 MiB read */
        if ((read += (uint64_t)nr * s->l->k * sizeof(float)) >= RN_RELEASE_BYTES) {
            edgert_checkpoint_layer_release(s->ck, s->idx);
            read = 0;
        }
        if (!st && edgert_quantize_rtn(buf, nr, s->l->k, group, sym, &t) != EDGERT_OK)
            st = er_fail(EDGERT_E_PARSE, err, len, "%s: rows %u..%u cannot be quantized (a "
                         "weight that is not finite?)", s->l->name, r0 + r, r0 + r + nr - 1);
        if (!st)
            q_put(q, r, t.codes, t.scales, t.zeros, nr);
        edgert_qtensor_free(&t);
    }
    free(buf);
    (void)m;
    if (st)
        q_free(q);
    return st;
}

static edgert_status pack_q(edgert_model *m, const rn_q *q, const char *name, rn_linear *out,
                            char *err, size_t len)
{
    edgert_qweights v = {.struct_size = sizeof v, .n = q->n, .k = q->k, .group = q->group,
                         .codes = q->codes, .scales = q->scales, .zeros = q->zeros,
                         .name = name, .perm = q->perm};
    char why[2048] = "";
    edgert_status st = edgert_pack(m->be, &v, &out->packed, why, sizeof why);
    if (st == EDGERT_E_UNSUPPORTED) /* the layout cannot hold these weights */
        return er_fail(EDGERT_E_NOT_ELIGIBLE, err, len, "%s: LAYOUT_MISMATCH: it cannot pack %s "
                       "(n %u, k %u, group %u, %s): %s", m->backend_name, name, q->n, q->k,
                       q->group, q->zeros ? "asymmetric" : "symmetric", why);
    if (st)
        return er_fail(st, err, len, "%s cannot pack %s (n %u, k %u, group %u, %s): %s",
                       m->backend_name, name, q->n, q->k, q->group,
                       q->zeros ? "asymmetric" : "symmetric", why);
    out->n = q->n;
    out->k = q->k;
    out->bytes = edgert_packed_bytes(out->packed);
    return EDGERT_OK;
}

typedef struct rn_want {
    const char *name; /* "model.layers.3.self_attn.q_proj", "lm_head" */
    uint32_t n, k;
    /* row j made of the file's row rows[j] (or NULL), when every part is
     * GPTQ (dst->in_rows says whether it was) */
    const uint32_t *rows;
} rn_want;

/* The fp32 reference's weights of one layer: mapped dense values, or a GPTQ
 * layer dequantized. */
static edgert_status dense_linear(edgert_model *m, const rn_src *s, rn_linear *out, char *err,
                                  size_t len)
{
    const edgert_layer *l = s->l;
    out->n = l->n;
    out->k = l->k;
    if (l->symmetric == -1) { /* dense: the tensor the layer is */
        char name[4200];
        const st_file *sf = NULL;
        snprintf(name, sizeof name, "%s.weight", l->name);
        const st_tensor *t = find_tensor(m, name, &sf);
        if (!t && strcmp(l->name, "lm_head") == 0)
            t = find_tensor(m, "model.embed_tokens.weight", &sf);
        if (!t || (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16))
            return er_fail(EDGERT_E_PARSE, err, len, "%s: no F32/F16/BF16 tensor for layer %s",
                           m->shards[0].path, l->name);
        out->w = st_data(sf, t);
        out->dt = t->dtype;
        out->bytes = (uint64_t)l->n * l->k * (st_dtype_bits(t->dtype) / 8);
        return EDGERT_OK;
    }
    size_t count = (size_t)l->n * l->k;
    if (!(out->owned = malloc(count * sizeof(float))))
        return er_fail(EDGERT_E_NOMEM, err, len, "out of memory: the fp32 reference of %s "
                       "needs %zu MiB", l->name, count * 4 >> 20);
    out->w = out->owned;
    out->dt = ST_F32;
    out->bytes = count * 4;
    return edgert_checkpoint_layer_dense(s->ck, s->idx, 0, l->n, out->owned, err, len);
}

/* Act order: when the parts (GPTQ, all of them) share one order, the
 * runner writes their input in it (dst->perm) and packs them without it,
 * instead of edgert_gemm gathering a copy of the input per call: the input
 * is made here anyway (a norm, the attention, silu(gate) up) and gathered
 * in the same pass, where the copy moved its lines between the cores
 * twice (SmolLM2, avx2-w4a16: 1.03-1.05x the step in order). */
static edgert_status runner_order(edgert_qtensor *full, const rn_src *s, unsigned count,
                                  uint32_t k, rn_linears *dst, char *err, size_t len)
{
    const uint32_t *perm = full[0].view.perm;
    for (unsigned i = 0; perm && i < count; i++)
        if (s[i].l->symmetric == -1 || !same_order(full[i].view.perm, perm, k))
            return EDGERT_OK; /* orders of their own: edgert_gemm gathers each */
    if (!perm)
        return EDGERT_OK;
    if (!(dst->perm = malloc((size_t)k * sizeof *dst->perm)))
        return er_fail(EDGERT_E_NOMEM, err, len, "out of memory");
    memcpy(dst->perm, perm, (size_t)k * sizeof *dst->perm);
    for (unsigned i = 0; i < count; i++)
        full[i].view.perm = NULL; /* packed as the sorted equivalent */
    return EDGERT_OK;
}

/* t's rows in the order `rows` (row j becomes the file's row rows[j]). */
static edgert_status permute_rows(edgert_qtensor *t, const uint32_t *rows, char *err, size_t len)
{
    const edgert_qweights *v = &t->view;
    size_t stride = (v->k + 1) / 2, G = (v->k + v->group - 1) / v->group;
    uint8_t *codes = malloc((size_t)v->n * stride);
    uint8_t *zeros = t->zeros ? malloc((size_t)v->n * G) : NULL;
    float *scales = malloc((size_t)v->n * G * sizeof *scales);
    if (!codes || !scales || (t->zeros && !zeros)) {
        free(codes), free(zeros), free(scales);
        return er_fail(EDGERT_E_NOMEM, err, len, "out of memory");
    }
    for (uint32_t j = 0; j < v->n; j++) {
        memcpy(codes + j * stride, t->codes + (size_t)rows[j] * stride, stride);
        memcpy(scales + j * G, t->scales + (size_t)rows[j] * G, G * sizeof *scales);
        if (zeros)
            memcpy(zeros + j * G, t->zeros + (size_t)rows[j] * G, G);
    }
    free(t->codes), free(t->scales), free(t->zeros);
    t->codes = codes, t->scales = scales, t->zeros = zeros;
    t->view.codes = codes, t->view.scales = scales, t->view.zeros = zeros;
    return EDGERT_OK;
}

/* The fp32 reference's parts: the dense values, one part each. */
static edgert_status reference_linears(edgert_model *m, const rn_src *s, const rn_want *w,
                                       unsigned count, rn_linears *dst, char *err, size_t len)
{
    edgert_status st = EDGERT_OK;
    for (unsigned i = 0, col = 0; !st && i < count; col += w[i].n, i++) {
        st = dense_linear(m, &s[i], &dst->part[i], err, len);
        dst->part[i].col = col;
        if (!st && !(dst->part[i].name = strdup(w[i].name)))
            st = er_fail(EDGERT_E_NOMEM, err, len, "out of memory");
        /* a GPTQ layer was read to dequantize it: its pages go (a dense
         * one is read in place through the shards' own mapping) */
        edgert_checkpoint_layer_release(s[i].ck, s[i].idx);
    }
    dst->count = count;
    return st;
}

/* Layers `w[0..count)` (one output, side by side) into `dst`: fused into
 * one packed matrix when they agree, else one each; a big single layer cut
 * into slices of rows. */
static edgert_status make_linears(edgert_model *m, const rn_want *w, unsigned count,
                                  uint32_t group, int sym, rn_linears *dst, char *err, size_t len)
{
    rn_src s[RN_MAX_PARTS];
    edgert_status st = EDGERT_OK;
    memset(dst, 0, sizeof *dst);
    for (unsigned i = 0; i < count; i++) {
        if ((st = find_layer(m, w[i].name, w[i].n, w[i].k, &s[i], err, len)))
            return st;
        dst->n += w[i].n;
    }
    if (!m->be)
        return reference_linears(m, s, w, count, dst, err, len);
    /* canonical forms: GPTQ layers whole (they are converted whole anyway) */
    edgert_qtensor full[RN_MAX_PARTS] = {0};
    int fuse = count > 1, rows = w[0].rows != NULL;
    for (unsigned i = 0; i < count; i++)
        rows &= s[i].l->symmetric != -1;
    for (unsigned i = 0; !st && i < count; i++) {
        if (s[i].l->symmetric != -1)
            st = edgert_checkpoint_layer_weights_v2(s[i].ck, s[i].idx, &full[i], err, len);
        if (!st && rows)
            st = permute_rows(&full[i], w[i].rows, err, len);
        uint32_t gi = s[i].l->symmetric != -1 ? full[i].view.group : group;
        uint32_t g0 = s[0].l->symmetric != -1 && !st ? full[0].view.group : group;
        fuse &= gi == g0 && (s[i].l->symmetric == -1) == (s[0].l->symmetric == -1);
        /* one matrix gathers its input one way: act-order parts fuse when
         * their orders agree (q, k and v of one GPTQ run share x x^T, so
         * their order by its diagonal) */
        fuse &= !st && same_order(full[i].view.perm, full[0].view.perm, w[0].k);
    }
    if (!st)
        st = runner_order(full, s, count, w[0].k, dst, err, len);
    dst->in_rows = rows;
    uint64_t codes = (uint64_t)dst->n * ((w[0].k + 1) / 2);
    unsigned slices = count == 1 && codes > RN_SLICE_BYTES
                          ? (unsigned)((codes + RN_SLICE_BYTES - 1) / RN_SLICE_BYTES) : 1;
    if (slices > RN_MAX_PARTS)
        slices = RN_MAX_PARTS;
    char name[4200];
    if (!st && fuse) { /* one matrix for all of them */
        rn_q q = {0};
        uint32_t g = s[0].l->symmetric != -1 ? full[0].view.group : group;
        int zeros = 0;
        for (unsigned i = 0; i < count; i++)
            zeros |= s[i].l->symmetric == -1 ? !sym : full[i].view.zeros != NULL;
        st = q_alloc(&q, dst->n, w[0].k, g, zeros, err, len);
        for (unsigned i = 0, at = 0; !st && i < count; at += w[i].n, i++) {
            rn_q part = {0};
            st = layer_rows(m, &s[i], s[i].l->symmetric != -1 ? &full[i] : NULL, 0, w[i].n,
                            group, sym, &part, err, len);
            if (!st)
                q_put(&q, at, part.codes, part.scales, part.zeros, w[i].n);
            q.perm = part.perm;
            q_free(&part);
        }
        snprintf(name, sizeof name, "%s+%u", w[0].name, count - 1);
        if (!st)
            st = pack_q(m, &q, name, &dst->part[0], err, len);
        if (!st)
            dst->count = 1;
        q_free(&q);
        if (st == EDGERT_E_NOT_ELIGIBLE) { /* the layout takes them one by one, perhaps */
            edgert_packed_free(dst->part[0].packed);
            dst->part[0].packed = NULL;
            st = EDGERT_OK;
            fuse = 0;
        }
    } else {
        fuse = 0;
    }
    for (unsigned i = 0, col = 0; !st && !fuse && i < count; col += w[i].n, i++) {
        for (unsigned sl = 0; !st && sl < slices; sl++) {
            uint32_t r0 = (uint32_t)((uint64_t)w[i].n * sl / slices);
            uint32_t r1 = (uint32_t)((uint64_t)w[i].n * (sl + 1) / slices);
            rn_q q = {0};
            st = layer_rows(m, &s[i], s[i].l->symmetric != -1 ? &full[i] : NULL, r0, r1 - r0,
                            group, sym, &q, err, len);
            if (slices > 1)
                snprintf(name, sizeof name, "%s[%u:%u]", w[i].name, r0, r1);
            else
                snprintf(name, sizeof name, "%s", w[i].name);
            rn_linear *p = &dst->part[dst->count];
            if (!st && (st = pack_q(m, &q, name, p, err, len)) == EDGERT_OK) {
                p->col = col + r0;
                dst->count++;
            }
            q_free(&q);
        }
    }
    /* packed: the file's pages of these layers leave the resident set (the
     * mapping stays), so what a model holds is its packed weights, not
     * those and the file */
    for (unsigned i = 0; i < count; i++) {
        edgert_qtensor_free(&full[i]);
        edgert_checkpoint_layer_release(s[i].ck, s[i].idx);
    }
    return st;
}

/* Layers mapped from options.packed: one GEMM each, as packed. */
static edgert_status mapped_linears(edgert_model *m, const rn_want *w, unsigned count,
                                    rn_linears *dst, char *err, size_t len)
{
    memset(dst, 0, sizeof *dst);
    for (unsigned i = 0; i < count; i++) {
        size_t idx = 0, n = edgert_checkpoint_layer_count(m->packed);
        while (idx < n && strcmp(edgert_checkpoint_layer_at(m->packed, idx)->name, w[i].name))
            idx++;
        if (idx == n)
            return er_fail(EDGERT_E_PARSE, err, len, "the packed file has no layer %s",
                           w[i].name);
        const edgert_layer *l = edgert_checkpoint_layer_at(m->packed, idx);
        if (l->n != w[i].n || l->k != w[i].k)
            return er_fail(EDGERT_E_PARSE, err, len, "the packed file's layer %s is [%u, %u], "
                           "config.json says [%u, %u]", w[i].name, l->n, l->k, w[i].n, w[i].k);
        rn_linear *p = &dst->part[i];
        edgert_status st = edgert_checkpoint_layer_packed(m->packed, idx, m->be, &p->packed, err,
                                                          len);
        if (st)
            return st;
        *p = (rn_linear){.packed = p->packed, .n = w[i].n, .k = w[i].k, .col = dst->n,
                         .bytes = edgert_packed_bytes(p->packed)};
        dst->n += w[i].n;
        dst->count++;
    }
    return EDGERT_OK;
}

static edgert_status linears(edgert_model *m, const rn_want *w, unsigned count, uint32_t group,
                             int sym, rn_linears *dst, char *err, size_t len)
{
    edgert_status st = m->packed ? mapped_linears(m, w, count, dst, err, len)
                                 : make_linears(m, w, count, group, sym, dst, err, len);
    for (unsigned i = 0; !st && i < dst->count; i++)
        m->info.step_weight_bytes += dst->part[i].bytes;
    m->info.gemms_per_step += dst->count;
    return st;
}

/* The group for dense layers: asked, else the largest of 128, 64, 32
 * dividing every K (hidden, the attention output, the MLP), else 128. */
static uint32_t dense_group(const rn_config *c, uint32_t asked)
{
    if (asked)
        return asked;
    uint32_t ks[3] = {c->hidden, c->heads * c->head_dim, c->mlp};
    for (uint32_t g = 128; g >= 32; g /= 2) {
        int all = 1;
        for (int i = 0; i < 3; i++)
            all &= ks[i] % g == 0;
        if (all)
            return g;
    }
    return 128;
}

static edgert_status load_layer(edgert_model *m, uint32_t i, uint32_t group, int sym, char *err,
                                size_t len)
{
    const rn_config *c = &m->c;
    uint32_t h = c->hidden, nq = c->heads * c->head_dim, nkv = c->kv_heads * c->head_dim;
    char p[4][256], q[3][256], v[6][512];
    rn_layer *L = &m->layers[i];
    static const char *const qkv[3] = {"q_proj", "k_proj", "v_proj"};
    for (int j = 0; j < 3; j++)
        snprintf(q[j], sizeof q[j], "model.layers.%u.self_attn.%s", i, qkv[j]);
    rn_want wq[3] = {{q[0], nq, h, NULL}, {q[1], nkv, h, NULL}, {q[2], nkv, h, NULL}};
    snprintf(p[0], sizeof p[0], "model.layers.%u.self_attn.o_proj", i);
    snprintf(p[1], sizeof p[1], "model.layers.%u.mlp.gate_proj", i);
    snprintf(p[2], sizeof p[2], "model.layers.%u.mlp.up_proj", i);
    snprintf(p[3], sizeof p[3], "model.layers.%u.mlp.down_proj", i);
    rn_want wo = {p[0], h, nq, NULL};
    rn_want wgu[2] = {{p[1], c->mlp, h, NULL}, {p[2], c->mlp, h, NULL}};
    rn_want wd = {p[3], h, c->mlp, NULL};
    edgert_status st = linears(m, wq, 3, group, sym, &L->qkv, err, len);
    if (!st)
        st = linears(m, &wo, 1, group, sym, &L->o, err, len);
    if (!st)
        st = linears(m, &wd, 1, group, sym, &L->down, err, len);
    /* down in act order: gate's and up's rows in down's order, where both
     * are GPTQ, so silu(gate) up (elementwise) comes in it, and no pass over
     * down's order is left (as ExLlama does); else the runner gathers */
    if (!st && L->down.perm)
        wgu[0].rows = wgu[1].rows = L->down.perm;
    if (!st)
        st = linears(m, wgu, 2, group, sym, &L->gate_up, err, len);
    if (!st && L->gate_up.in_rows) {
        free(L->down.perm);
        L->down.perm = NULL;
    }
    snprintf(v[0], sizeof v[0], "model.layers.%u.input_layernorm.weight", i);
    snprintf(v[1], sizeof v[1], "model.layers.%u.post_attention_layernorm.weight", i);
    snprintf(v[2], sizeof v[2], "model.layers.%u.self_attn.q_norm.weight", i);
    snprintf(v[3], sizeof v[3], "model.layers.%u.self_attn.k_norm.weight", i);
    if (!st)
        st = vector(m, v[0], h, 1, &L->attn_norm, err, len);
    if (!st)
        st = vector(m, v[1], h, 1, &L->mlp_norm, err, len);
    if (!st && c->qk_norm)
        st = vector(m, v[2], c->head_dim, 1, &L->q_norm, err, len);
    if (!st && c->qk_norm)
        st = vector(m, v[3], c->head_dim, 1, &L->k_norm, err, len);
    if (!st && c->qkv_bias) {
        float *b[3] = {NULL, NULL, NULL};
        uint32_t n[3] = {nq, nkv, nkv};
        for (int j = 0; !st && j < 3; j++) {
            snprintf(v[4], sizeof v[4], "%.255s.bias", q[j]);
            st = vector(m, v[4], n[j], 1, &b[j], err, len);
        }
        if (!st && !(L->qkv_bias = malloc((nq + 2 * nkv) * sizeof(float))))
            st = er_fail(EDGERT_E_NOMEM, err, len, "out of memory");
        for (int j = 0, at = 0; !st && j < 3; at += (int)n[j], j++)
            memcpy(L->qkv_bias + at, b[j], n[j] * sizeof(float));
        for (int j = 0; j < 3; j++)
            free(b[j]);
    }
    if (!st) {
        m->info.fused_qkv &= L->qkv.count == 1;
        m->info.fused_gate_up &= L->gate_up.count == 1;
    }
    return st;
}

static edgert_status open_backend(edgert_model *m, const char *name,
                                  const edgert_model_options *o, char *err, size_t len)
{
    edgert_status st = edgert_backend_open(m->ctx, name, o->backend_options, &m->be, err, len);
    if (st)
        return st;
    const edgert_candidate *k = edgert_candidate_find(m->ctx, name);
    m->info.symmetric = k ? k->layout.symmetric : 0;
    m->backend_name = strdup(name);
    m->backend_path = strdup(edgert_backend_describe(m->be));
    if (!m->backend_name || !m->backend_path)
        return er_fail(EDGERT_E_NOMEM, err, len, "out of memory");
    return EDGERT_OK;
}

/* Everything load_weights made, and the backend, undone. */
static void drop_weights(edgert_model *m)
{
    rn_unload_layers(m);
    edgert_backend_close(m->be);
    m->be = NULL;
    free(m->backend_name);
    free(m->backend_path);
    m->backend_name = m->backend_path = NULL;
    m->info.step_weight_bytes = 0;
    m->info.gemms_per_step = 0;
}

static edgert_status load_weights(edgert_model *m, uint32_t group, char *err, size_t len)
{
    const rn_config *c = &m->c;
    edgert_status st = EDGERT_OK;
    m->info.fused_qkv = m->info.fused_gate_up = 1;
    if (!(m->layers = calloc(c->layers, sizeof *m->layers)))
        return er_fail(EDGERT_E_NOMEM, err, len, "out of memory");
    for (uint32_t i = 0; !st && i < c->layers; i++)
        st = load_layer(m, i, group, m->info.symmetric, err, len);
    rn_want wh = {"lm_head", c->vocab, c->hidden, NULL};
    if (!st)
        st = linears(m, &wh, 1, group, m->info.symmetric, &m->head, err, len);
    if (!st)
        st = vector(m, "model.norm.weight", c->hidden, 1, &m->final_norm, err, len);
    /* On a backend nothing of the files is read again but embedding rows:
     * what reads left mapped of them goes (the kernel maps the page
     * cache's folio around each page a read touches, up to 2 MiB:
     * st_release_near) */
    for (size_t f = 0; !st && m->be && f < m->nshards; f++) {
        for (size_t t = 0; t < m->shards[f].n; t++)
            st_release_near(&m->shards[f], &m->shards[f].t[t]);
        for (size_t i = 0; m->cks[f] && i < edgert_checkpoint_layer_count(m->cks[f]); i++)
            edgert_checkpoint_layer_release(m->cks[f], i);
    }
    return st;
}

/* No backend named: the best ranked for the priority that runs in this
 * process and packs these weights; the ones ranked above it that cannot
 * (LAYOUT_MISMATCH: a group size or zero points their layout does not
 * hold) are named in info.passed_over. */
static edgert_status load_selected(edgert_model *m, const edgert_model_options *o,
                                   uint32_t group, char *err, size_t len)
{
    edgert_selection *sel = NULL;
    edgert_status st = edgert_select(m->ctx, o->priority, NULL, &sel, err, len);
    size_t tried = 0, used = 0;
    edgert_status sel_st = st;
    for (size_t r = 0; !sel_st && r < edgert_selection_count(sel); r++) {
        const edgert_candidate *k = edgert_candidate_at(m->ctx, edgert_selection_index(sel, r));
        if (!k->runs_in_process)
            continue;
        tried++;
        st = open_backend(m, k->name, o, err, len);
        if (!st)
            st = load_weights(m, group, err, len);
        if (st != EDGERT_E_NOT_ELIGIBLE)
            break;
        int w = snprintf(m->passed_over + used, sizeof m->passed_over - used, "%s%s", used ? "; "
                         : "", err);
        used += w > 0 && (size_t)w < sizeof m->passed_over - used ? (size_t)w : 0;
        drop_weights(m);
    }
    edgert_selection_free(sel);
    if (!st && !tried)
        st = er_fail(EDGERT_E_NOT_ELIGIBLE, err, len, "no eligible backend runs in this process");
    else if (st == EDGERT_E_NOT_ELIGIBLE)
        st = er_fail(EDGERT_E_NOT_ELIGIBLE, err, len, "no eligible backend packs these weights: "
                     "%s", m->passed_over);
    return st;
}

edgert_status rn_load(edgert_model *m, const edgert_model_options *o, char *err, size_t len)
{
    const rn_config *c = &m->c;
    int fp32 = o->backend && strcmp(o->backend, "fp32") == 0;
    edgert_status st = open_files(m, err, len);
    if (!st && o->packed && fp32)
        st = er_fail(EDGERT_E_USAGE, err, len, "the fp32 reference runs the folder's weights, "
                     "not a packed file (one backend's bytes)");
    if (!st && o->packed)
        st = edgert_checkpoint_open(o->packed, &m->packed, err, len);
    if (!st && m->packed && strcmp(edgert_checkpoint_kind(m->packed), "packed") != 0)
        st = er_fail(EDGERT_E_USAGE, err, len, "%s is not a packed file (edgert pack writes "
                     "them)", o->packed);
    if (st)
        return st;
    m->embed = find_tensor(m, "model.embed_tokens.weight", &m->embed_file);
    if (!m->embed)
        return er_fail(EDGERT_E_PARSE, err, len, "%s: tensor model.embed_tokens.weight is "
                       "missing", m->shards[0].path);
    if (m->embed->ndim != 2 || m->embed->shape[0] != c->vocab || m->embed->shape[1] != c->hidden ||
        (m->embed->dtype != ST_F32 && m->embed->dtype != ST_F16 && m->embed->dtype != ST_BF16))
        return er_fail(EDGERT_E_PARSE, err, len, "%s: tensor model.embed_tokens.weight is %s "
                       "[%llu, %llu], config.json says F32/F16/BF16 [%u, %u] (vocab_size, "
                       "hidden_size)", m->embed_file->path, m->embed->dtype_name,
                       (unsigned long long)m->embed->shape[0],
                       (unsigned long long)(m->embed->ndim > 1 ? m->embed->shape[1] : 0),
                       c->vocab, c->hidden);
    uint32_t group = dense_group(c, o->group);
    m->info.group = group;
    if (fp32) {
        m->backend_name = strdup("fp32");
        m->backend_path = strdup("the dense reference: the file's values, fp32 arithmetic");
        st = load_weights(m, group, err, len);
    } else if (o->backend) {
        st = open_backend(m, o->backend, o, err, len);
        if (!st)
            st = load_weights(m, group, err, len);
    } else {
        st = load_selected(m, o, group, err, len);
    }
    if (!st) {
        const edgert_layer *l = NULL;
        rn_src s;
        if (find_layer(m, "model.layers.0.mlp.down_proj", c->hidden, c->mlp, &s, err, len) == 0)
            l = s.l;
        m->weights_kind = strdup(m->packed ? "packed" : !l ? "?" : l->symmetric == -1 ? l->format
                                                                                      : "gptq");
        err[0] = '\0';
    }
    return st;
}

static void free_linears(rn_linears *ls)
{
    for (unsigned i = 0; i < ls->count; i++) {
        edgert_packed_free(ls->part[i].packed);
        free(ls->part[i].owned);
        free(ls->part[i].name);
    }
    free(ls->perm);
    ls->perm = NULL;
}

void rn_unload_layers(edgert_model *m)
{
    for (uint32_t i = 0; m->layers && i < m->c.layers; i++) {
        rn_layer *L = &m->layers[i];
        free_linears(&L->qkv);
        free_linears(&L->o);
        free_linears(&L->gate_up);
        free_linears(&L->down);
        free(L->attn_norm);
        free(L->mlp_norm);
        free(L->q_norm);
        free(L->k_norm);
        free(L->qkv_bias);
    }
    free(m->layers);
    m->layers = NULL;
    free_linears(&m->head);
    memset(&m->head, 0, sizeof m->head);
    free(m->final_norm);
    m->final_norm = NULL;
}

void rn_unload(edgert_model *m)
{
    rn_unload_layers(m);
    edgert_checkpoint_close(m->packed);
    for (size_t i = 0; m->cks && i < m->nshards; i++)
        edgert_checkpoint_close(m->cks[i]);
    free(m->cks);
    for (size_t i = 0; i < m->nshards; i++)
        st_close(&m->shards[i]);
    free(m->shards);
    edgert_backend_close(m->be);
}
