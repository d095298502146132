/*
 * core/weights/checkpoint_quantize.c — edgert_checkpoint_quantize: a dense
 * safetensors checkpoint to a GPTQ int4 one (edgert.h has the contract,
 * checkpoint.c the GPTQ layout).
 *
 * Output: every linear layer P (checkpoint.c's rule) as P.qweight,
 * P.qzeros, P.scales (F16) and P.g_idx (k / group; or the groups of a
 * calibrated quantizer's act order, options.act_order), in the v1
 * zero convention that AutoGPTQ, GPTQModel and vLLM read (stored z - 1); the
 * asymmetric quantizer keeps z >= 1 (weights.c), so v1 can always store it.
 * Every other tensor (embeddings, norms, biases) is copied byte for byte. A
 * token embedding (embed_tokens, wte, word_embeddings, embed_in; never a
 * position embedding) with no head of its own (lm_head, embed_out, output)
 * means a tied head: it is untied, quantized from the embedding as layer
 * "lm_head" (a bf16 head costs
 * more per decode step than the whole 4-bit saving, architecture.md, Measured background).
 *
 * Scales are stored as fp16 (what GPTQ consumers read): the codes are chosen
 * for the fp32 scale, so the stored scale differs from it by at most 2^-11
 * relative, and |w - s16 (q - z)| <= s/2 + 8 s 2^-11 = 0.504 s. A scale
 * beyond fp16's range (|w| > 7 x 65504) is refused.
 *
 * Memory: one layer's codes (n k / 2 bytes) and one row block per thread;
 * the input is read from its mapping. The output is written to a temporary
 * file and renamed when complete; quantize_config.json is committed after
 * it, both unnamed until then where the filesystem allows (tmpfile.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "weights/checkpoint.h"
#include "common/internal.h"
#include "run/pool.h"
#include "weights/weights.h"

#define QZ_CONFIG "quantize_config.json"

typedef struct qz_layer {
    const st_tensor *src; /* the dense tensor */
    char *name;           /* P */
    uint32_t n, k;
} qz_layer;

typedef struct qz_job {
    const st_file *sf;
    const qz_layer *l;
    const edgert_qweights *view;
    int sym;
    int failed; /* a row with a non-finite value (written by any worker: only ever set to 1) */
} qz_job;

static void qz_rows(void *arg, size_t begin, size_t end, unsigned worker)
{
    (void)worker;
    qz_job *j = arg;
    float *row = malloc((size_t)j->l->k * sizeof *row);
    for (size_t r = begin; r < end; r++) {
        if (!row || st_read_f32(j->sf, j->l->src, (uint64_t)r * j->l->k, j->l->k, row, NULL, 0) ||
            er_quantize_row(row, j->l->k, j->view->group, j->sym, 1u, j->view, (uint32_t)r)) {
            __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
            break;
        }
    }
    free(row);
}

/* ---- the plan: which tensors become which ------------------------------------------ */

typedef struct qz_plan {
    qz_layer *l;
    size_t nl;
    const st_tensor **copy; /* copied as they are */
    size_t nc;
} qz_plan;

static void plan_free(qz_plan *p)
{
    for (size_t i = 0; i < p->nl; i++)
        free(p->l[i].name);
    free(p->l);
    free(p->copy);
}

static edgert_status plan(const st_file *sf, uint32_t group, qz_plan *p, char *err, size_t len)
{
    memset(p, 0, sizeof *p);
    p->l = calloc(sf->n + 1, sizeof *p->l);
    p->copy = calloc(sf->n + 1, sizeof *p->copy);
    if (!p->l || !p->copy)
        return er_fail(EDGERT_E_NOMEM, err, len, "%s: out of memory", sf->path);
    for (size_t i = 0; i < sf->n; i++) {
        const st_tensor *t = &sf->t[i];
        if (strstr(t->name, ".qweight"))
            return er_fail(EDGERT_E_USAGE, err, len, "%s: tensor '%s': already quantized "
                           "(GPTQ); quantize reads a dense F32/F16/BF16 checkpoint", sf->path,
                           t->name);
        if (st_dtype_bits(t->dtype) == 0)
            return er_fail(EDGERT_E_USAGE, err, len, "%s: tensor '%s': dtype '%s' is not one "
                           "edgert knows, so it cannot be copied to the output", sf->path,
                           t->name, t->dtype_name);
        if (t->ndim == 2 && !st_is_float(t->dtype) && t->dtype_name[0] == 'F' &&
            er_ck_ends_with(t->name, ".weight") && !er_ck_is_embedding(t->name))
            /* a linear layer in a float edgert does not read (F64, F8):
             * copied, it would stay dense without a word */
            return er_fail(EDGERT_E_USAGE, err, len, "%s: tensor '%s': a linear layer in %s; "
                           "quantize reads F32, F16 and BF16 (convert it first)", sf->path,
                           t->name, t->dtype_name);
        if (!er_ck_is_dense_linear(t)) {
            p->copy[p->nc++] = t;
            continue;
        }
        if (t->shape[1] % 8)
            return er_fail(EDGERT_E_USAGE, err, len, "%s: tensor '%s': K = %llu is not a "
                           "multiple of 8, which GPTQ's qweight (8 codes per int32) needs",
                           sf->path, t->name, (unsigned long long)t->shape[1]);
        qz_layer *l = &p->l[p->nl++];
        l->src = t, l->n = (uint32_t)t->shape[0], l->k = (uint32_t)t->shape[1];
        l->name = strndup(t->name, strlen(t->name) - strlen(".weight"));
        if (!l->name)
            return er_fail(EDGERT_E_NOMEM, err, len, "%s: out of memory", sf->path);
    }
    if (p->nl == 0)
        return er_fail(EDGERT_E_PARSE, err, len, "%s: no linear layer to quantize (2-D float "
                       "P.weight other than an embedding)", sf->path);
    const st_tensor *embed = er_ck_tied_embedding(sf); /* the reader's rule: the same layers */
    if (embed && embed->shape[1] % 8)
        return er_fail(EDGERT_E_USAGE, err, len, "%s: tensor '%s' (the head tied to it): K = "
                       "%llu is not a multiple of 8, which GPTQ's qweight (8 codes per int32) "
                       "needs", sf->path, embed->name, (unsigned long long)embed->shape[1]);
    if (embed) {
        qz_layer *l = &p->l[p->nl++]; /* a tied head, untied */
        l->src = embed, l->n = (uint32_t)embed->shape[0], l->k = (uint32_t)embed->shape[1];
        l->name = strdup("lm_head");
        if (!l->name)
            return er_fail(EDGERT_E_NOMEM, err, len, "%s: out of memory", sf->path);
    }
    (void)group;
    return EDGERT_OK;
}

/* options.act_order where struct_size covers it, else 0. */
static int act_order_of(const edgert_quantize_options *o)
{
    return o->struct_size >= offsetof(edgert_quantize_options, act_order) + sizeof(int)
               ? o->act_order
               : 0;
}

static edgert_status declare(st_writer *w, const qz_plan *p, uint32_t group, int sym,
                             const char *method, int act_order, char *err, size_t len)
{
    char name[4200], gs[32], quantizer[256];
    int rc = 0;
    for (size_t i = 0; i < p->nl && !rc; i++) {
        const qz_layer *l = &p->l[i];
        uint64_t G = l->k / group + (l->k % group != 0);
        uint64_t qw[2] = {l->k / 8, l->n}, qz[2] = {G, (l->n + 7u) / 8u}, sc[2] = {G, l->n},
                 gi[1] = {l->k};
        snprintf(name, sizeof name, "%s.qweight", l->name);
        rc |= st_writer_tensor(w, name, ST_I32, 2, qw, err, len);
        snprintf(name, sizeof name, "%s.qzeros", l->name);
        rc |= rc ? rc : st_writer_tensor(w, name, ST_I32, 2, qz, err, len);
        snprintf(name, sizeof name, "%s.scales", l->name);
        rc |= rc ? rc : st_writer_tensor(w, name, ST_F16, 2, sc, err, len);
        snprintf(name, sizeof name, "%s.g_idx", l->name);
        rc |= rc ? rc : st_writer_tensor(w, name, ST_I32, 1, gi, err, len);
    }
    for (size_t i = 0; i < p->nc && !rc; i++)
        rc = st_writer_tensor(w, p->copy[i]->name, p->copy[i]->dtype, p->copy[i]->ndim,
                              p->copy[i]->shape, err, len);
    snprintf(gs, sizeof gs, "%u", group);
    snprintf(quantizer, sizeof quantizer, "edgert " EDGERT_VERSION_STRING " %s", method);
    const char *meta[][2] = {{"format", "pt"},         {"quant_method", "gptq"},
                             {"checkpoint_format", "gptq"}, {"bits", "4"},
                             {"group_size", gs},       {"sym", sym ? "true" : "false"},
                             {"desc_act", act_order ? "true" : "false"},
                             {"quantizer", quantizer}};
    for (size_t i = 0; i < sizeof meta / sizeof meta[0] && !rc; i++)
        rc = st_writer_meta(w, meta[i][0], meta[i][1], err, len);
    return rc ? EDGERT_E_IO : EDGERT_OK;
}

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* One quantized layer's four tensors, from its canonical codes (`in`: the
 * input's path, for messages). In act order (`inv`: the column of each
 * input, the inverse of the view's perm) qweight holds each input's code
 * where the model has it and g_idx its group; else inv is NULL. */
static edgert_status emit(st_writer *w, const char *in, const qz_layer *l,
                          const edgert_qtensor *q, const uint32_t *inv, unsigned char *buf,
                          char *err, size_t len)
{
    uint64_t stride = l->k / 2, G = l->k / q->view.group + (l->k % q->view.group != 0);
    uint64_t zc = (l->n + 7u) / 8u;
    int rc = 0;
    for (uint64_t kk = 0; kk < l->k / 8 && !rc; kk++) {
        for (uint64_t n = 0; n < l->n && !inv; n++)
            memcpy(buf + 4 * n, q->codes + n * stride + 4 * kk, 4);
        for (uint64_t n = 0; n < l->n && inv; n++) {
            uint32_t word = 0;
            for (unsigned b = 0; b < 8; b++)
                word |= (uint32_t)edgert_qcode(&q->view, (uint32_t)n, inv[8 * kk + b]) << 4 * b;
            put32(buf + 4 * n, word);
        }
        rc = st_writer_write(w, buf, 4 * (size_t)l->n, err, len);
    }
    for (uint64_t g = 0; g < G && !rc; g++) {
        memset(buf, 0, 4 * zc);
        for (uint64_t n = 0; n < l->n; n++) {
            unsigned z = q->zeros ? q->zeros[n * G + g] : 8u;
            uint32_t word = (uint32_t)buf[4 * (n / 8)] | (uint32_t)buf[4 * (n / 8) + 1] << 8 |
                            (uint32_t)buf[4 * (n / 8) + 2] << 16 |
                            (uint32_t)buf[4 * (n / 8) + 3] << 24;
            put32(buf + 4 * (n / 8), word | ((z - 1u) & 15u) << (4 * (n % 8))); /* v1: z - 1 */
        }
        rc = st_writer_write(w, buf, 4 * (size_t)zc, err, len);
    }
    for (uint64_t g = 0; g < G && !rc; g++) {
        for (uint64_t n = 0; n < l->n; n++) {
            uint16_t h = st_f32_to_f16(q->scales[n * G + g]);
            if ((h & 0x7C00u) == 0x7C00u)
                return er_fail(EDGERT_E_USAGE, err, len, "%s: tensor '%s' (layer '%s') row %llu "
                               "group %llu: scale %g does not fit fp16 (weights over 7 x 65504)",
                               in, l->src->name, l->name, (unsigned long long)n,
                               (unsigned long long)g, (double)q->scales[n * G + g]);
            buf[2 * n] = (unsigned char)h, buf[2 * n + 1] = (unsigned char)(h >> 8);
        }
        rc = st_writer_write(w, buf, 2 * (size_t)l->n, err, len);
    }
    for (uint64_t k = 0; k < l->k && !rc; k += 1024) {
        uint64_t e = k + 1024 < l->k ? k + 1024 : l->k;
        for (uint64_t j = k; j < e; j++)
            put32(buf + 4 * (j - k), (uint32_t)((inv ? inv[j] : j) / q->view.group));
        rc = st_writer_write(w, buf, 4 * (size_t)(e - k), err, len);
    }
    return rc ? EDGERT_E_IO : EDGERT_OK;
}

/* The caller's codes for layer l (options.layer_codes) into *q: 1 given, 2
 * given in act order (inv[input] = its column; inv holds k entries), 0 not
 * (round to nearest), -1 failed (err says why). */
static int supplied(const edgert_quantize_options *o, const qz_layer *l, uint32_t group,
                    int sym, edgert_qtensor *q, uint32_t *inv, char *err, size_t len)
{
    if (o->struct_size < offsetof(edgert_quantize_options, layer_codes) + sizeof(void *) ||
        !o->layer_codes)
        return 0;
    memset(q, 0, sizeof *q);
    edgert_status st = o->layer_codes(o->user, l->name, l->n, l->k, q, err, len);
    if (st == EDGERT_E_NOT_FOUND)
        return 0;
    if (st)
        return -1;
    const edgert_qweights *v = &q->view;
    uint64_t G = l->k / group + (l->k % group != 0);
    int bad = !q->codes || !q->scales || v->n != l->n || v->k != l->k || v->group != group ||
              (q->zeros == NULL) != (sym != 0);
    for (uint64_t x = 0; !bad && !sym && x < (uint64_t)l->n * G; x++)
        bad = q->zeros[x] < 1 || q->zeros[x] > 15; /* v1 stores z - 1 */
    const uint32_t *perm = bad ? NULL : er_qw_perm(v);
    if (perm && !act_order_of(o)) {
        edgert_qtensor_free(q);
        er_fail(EDGERT_E_USAGE, err, len, "layer '%s': layer_codes gave codes in act order (a "
                "perm), but options.act_order is 0", l->name);
        return -1;
    }
    if (perm && !bad) /* inv: each input's column, once */
        bad = er_perm_invert(perm, l->k, inv) != l->k;
    if (bad) {
        edgert_qtensor_free(q);
        er_fail(EDGERT_E_USAGE, err, len, "layer '%s': the codes layer_codes gave are not "
                "[n=%u k=%u] in groups of %u, %s%s", l->name, l->n, l->k, group,
                sym ? "symmetric (no zero points)" : "with zero points from 1 to 15",
                perm ? ", their perm a permutation of the inputs" : "");
        return -1;
    }
    return perm ? 2 : 1;
}

static edgert_status quantize_layer(st_writer *w, const st_file *sf, er_pool *pool,
                                    const qz_layer *l, const edgert_quantize_options *o,
                                    uint32_t group, unsigned char *buf, char *err, size_t len)
{
    edgert_qtensor q;
    int sym = o->symmetric;
    uint32_t *inv = malloc((size_t)l->k * sizeof *inv);
    if (!inv)
        return er_fail(EDGERT_E_NOMEM, err, len, "out of memory");
    int got = supplied(o, l, group, sym, &q, inv, err, len);
    if (got < 0) {
        free(inv);
        return EDGERT_E_USAGE;
    }
    if (!got && er_qtensor_alloc(l->n, l->k, group, sym, &q)) {
        free(inv);
        return er_fail(EDGERT_E_NOMEM, err, len, "layer '%s' [n=%u k=%u]: out of memory",
                       l->name, l->n, l->k);
    }
    qz_job j = {sf, l, &q.view, sym, 0};
    if (!got)
        er_pool_run(pool, l->n, 16, qz_rows, &j);
    edgert_status st = j.failed ? er_fail(EDGERT_E_PARSE, err, len, "%s: tensor '%s' has a "
                                          "non-finite value (or memory ran out)", sf->path,
                                          l->src->name)
                                : emit(w, sf->path, l, &q, got == 2 ? inv : NULL, buf, err, len);
    edgert_qtensor_free(&q);
    free(inv);
    st_release(sf, l->src); /* read: drop its pages from this process */
    return st;
}

/* The path of quantize_config.json beside `out` (malloc'd), or NULL. */
static char *config_path(const char *out)
{
    char *dup = strdup(out), *path = NULL;
    if (dup && asprintf(&path, "%s/" QZ_CONFIG, dirname(dup)) < 0)
        path = NULL;
    free(dup);
    return path;
}

/* quantize_config.json beside `out`, into *cfg (tmpfile.h), which the caller
 * commits once `out` is complete (check_paths has vetted the path). */
static edgert_status write_config(const char *out, uint32_t group, int sym,
                                  const char *method, int act_order, er_tmpfile *cfg, char *err,
                                  size_t len)
{
    char *path = config_path(out);
    edgert_status st;
    if (!path)
        return er_fail(EDGERT_E_NOMEM, err, len, "out of memory");
    int bad = er_tmpfile_open(cfg, path) != 0;
    st = bad ? er_fail(EDGERT_E_IO, err, len, "%s: cannot create: %s", path,
                                     strerror(errno))
                           : EDGERT_OK;
    free(path);
    if (bad)
        return st;
    FILE *f = cfg->f;
    fprintf(f, "{\n  \"bits\": 4,\n  \"group_size\": %u,\n  \"desc_act\": %s,\n"
               "  \"sym\": %s,\n  \"true_sequential\": true,\n  \"quant_method\": \"gptq\",\n"
               "  \"checkpoint_format\": \"gptq\",\n"
               "  \"quantizer\": \"edgert %s %s\"\n}\n",
            group, act_order ? "true" : "false", sym ? "true" : "false", EDGERT_VERSION_STRING,
            method);
    /* synced now, so what follows the checkpoint's commit is a link and a rename */
    if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0)
        return er_fail(EDGERT_E_IO, err, len, "%s: cannot write: %s", cfg->path, strerror(errno));
    return EDGERT_OK;
}

static edgert_status copy_tensors(st_writer *w, const st_file *sf, const qz_plan *p, char *err,
                                  size_t len)
{
    for (size_t i = 0; i < p->nc; i++) {
        const unsigned char *d = st_data(sf, p->copy[i]);
        uint64_t n = p->copy[i]->end - p->copy[i]->begin;
        for (uint64_t o = 0; o < n; o += 1u << 24) {
            size_t piece = n - o < (1u << 24) ? (size_t)(n - o) : (size_t)1 << 24;
            if (st_writer_write(w, d + o, piece, err, len))
                return EDGERT_E_IO;
        }
    }
    return EDGERT_OK;
}

static edgert_status check_options(const char *in, const char *out,
                                   const edgert_quantize_options *o, char *err, size_t len)
{
    if (!in || !out || !o)
        return er_fail(EDGERT_E_USAGE, err, len, "edgert_checkpoint_quantize: NULL argument");
    if (o->struct_size < EDGERT_QUANTIZE_OPTIONS_V1_SIZE)
        return er_fail(EDGERT_E_USAGE, err, len, "edgert_checkpoint_quantize: options.struct_size "
                       "%u is smaller than version 1's %zu", o->struct_size,
                       (size_t)EDGERT_QUANTIZE_OPTIONS_V1_SIZE);
    if (er_check_unknown_tail(o, o->struct_size, sizeof *o, "edgert_checkpoint_quantize: options",
                              "edgert_quantize_options", err, len) != EDGERT_OK)
        return EDGERT_E_USAGE;
    if (o->symmetric != 0 && o->symmetric != 1)
        return er_fail(EDGERT_E_USAGE, err, len, "edgert_checkpoint_quantize: symmetric must be "
                       "0 or 1");
    const char *m = o->struct_size >= offsetof(edgert_quantize_options, method) + sizeof(char *)
                        ? o->method : NULL;
    /* written into JSON and metadata as it is: plain words only */
    if (m && (!*m || strlen(m) > 100 || strspn(m, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP"
                                              "QRSTUVWXYZ0123456789 ._,:=+-") != strlen(m)))
        return er_fail(EDGERT_E_USAGE, err, len, "edgert_checkpoint_quantize: method must be 1 "
                       "to 100 letters, digits, spaces and ._,:=+-");
    int ao = act_order_of(o);
    if (ao != 0 && ao != 1)
        return er_fail(EDGERT_E_USAGE, err, len, "edgert_checkpoint_quantize: act_order must be "
                       "0 or 1");
    if (ao && !o->layer_codes)
        return er_fail(EDGERT_E_USAGE, err, len, "edgert_checkpoint_quantize: act_order needs "
                       "layer_codes (round to nearest quantizes in order)");
    return EDGERT_OK;
}

/* Whether a and b name the same existing file. */
static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* What the two renames at the end would replace, vetted before any work:
 * OUT and its config must be new or regular files (a rename over a device
 * or FIFO replaces it: an adversary's /dev/null became a checkpoint), never
 * the input or each other, and a config there that edgert did not write
 * (another model's, in the same folder) is never replaced. */
static edgert_status check_paths(const char *in, const char *out, char *err, size_t len)
{
    struct stat sb;
    if (same_file(in, out))
        return er_fail(EDGERT_E_USAGE, err, len, "%s: the output would replace the input", out);
    if (lstat(out, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISLNK(sb.st_mode))
        return er_fail(EDGERT_E_IO, err, len, "%s: exists and is not a regular file (a device, "
                       "FIFO or folder): name another OUT", out);
    const char *base = strrchr(out, '/');
    if (strcmp(base ? base + 1 : out, QZ_CONFIG) == 0)
        return er_fail(EDGERT_E_USAGE, err, len, "%s: OUT cannot be named " QZ_CONFIG ": the "
                       "config is written beside OUT under that name", out);
    char *cfg = config_path(out);
    if (!cfg)
        return er_fail(EDGERT_E_NOMEM, err, len, "out of memory");
    edgert_status st = EDGERT_OK;
    char head[4096] = "";
    if (same_file(in, cfg)) {
        st = er_fail(EDGERT_E_USAGE, err, len, "%s: the config written beside OUT would "
                     "replace the input", cfg);
    } else if (lstat(cfg, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISLNK(sb.st_mode)) {
        st = er_fail(EDGERT_E_IO, err, len, "%s: cannot write: it exists and is not a regular "
                     "file (a folder?)", cfg);
    } else if (lstat(cfg, &sb) == 0 && S_ISREG(sb.st_mode)) { /* a link: replaced, not its file */
        FILE *f = fopen(cfg, "rb");
        size_t n = f ? fread(head, 1, sizeof head - 1, f) : 0;
        if (f)
            fclose(f);
        head[n] = '\0';
        if (!strstr(head, "\"quantizer\": \"edgert "))
            st = er_fail(EDGERT_E_USAGE, err, len, "%s: there already, and not written by "
                         "edgert (another model's?): it is never replaced; write OUT into a "
                         "folder of its own", cfg);
    }
    free(cfg);
    return st;
}

edgert_status edgert_checkpoint_quantize(const char *in, const char *out,
                                         const edgert_quantize_options *options, char *err,
                                         size_t err_len)
{
    edgert_status st = check_options(in, out, options, err, err_len);
    st = st ? st : check_paths(in, out, err, err_len);
    if (st)
        return st;
    uint32_t group = options->group ? options->group : 128u;
    int sym = options->symmetric;
    const char *method = "round-to-nearest";
    if (options->struct_size >= offsetof(edgert_quantize_options, method) + sizeof(char *) &&
        options->method)
        method = options->method;
    st_file sf;
    st = st_open(&sf, in, err, err_len);
    if (st)
        return st;
    qz_plan p = {0};
    st_writer w;
    st_writer_init(&w, out);
    er_tmpfile cfg = {0};
    unsigned char *buf = NULL;
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    er_pool *pool = er_pool_create(options->threads ? options->threads
                                                    : (unsigned)(nproc > 0 ? nproc : 1));
    st = pool ? plan(&sf, group, &p, err, err_len) : EDGERT_E_NOMEM;
    size_t bmax = 4096;
    for (size_t i = 0; !st && i < p.nl; i++)
        bmax = 4u * (size_t)p.l[i].n > bmax ? 4u * (size_t)p.l[i].n : bmax;
    if (!st && !(buf = malloc(bmax)))
        st = er_fail(EDGERT_E_NOMEM, err, err_len, "out of memory");
    /* first: a config that cannot be written fails before the minutes of work */
    int ao = act_order_of(options);
    st = st ? st : write_config(out, group, sym, method, ao, &cfg, err, err_len);
    st = st ? st : declare(&w, &p, group, sym, method, ao, err, err_len);
    st = st ? st : (st_writer_begin(&w, 64, err, err_len) ? EDGERT_E_IO : EDGERT_OK);
    for (size_t i = 0; !st && i < p.nl; i++)
        st = quantize_layer(&w, &sf, pool, &p.l[i], options, group, buf, err, err_len);
    st = st ? st : copy_tensors(&w, &sf, &p, err, err_len);
    st = st ? st : (st_writer_commit(&w, err, err_len) ? EDGERT_E_IO : EDGERT_OK);
    if (!st && er_tmpfile_commit(&cfg) != 0)
        st = er_fail(EDGERT_E_IO, err, err_len, "%s: cannot write: %s", cfg.path,
                     strerror(errno));
    er_tmpfile_discard(&cfg);
    plan_free(&p);
    st_writer_free(&w);
    st_close(&sf);
    er_pool_destroy(pool);
    free(buf);
    return st;
}
