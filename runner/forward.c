/*
 * runner/forward.c — the forward pass of a chunk of tokens: the model's
 * GEMMs as one edgert_step (in order: per layer q/k/v, o, gate/up, down;
 * then the head), the caller's work in the step's callbacks between them:
 *
 *   before the step   x = embedding rows; xn = RMSNorm(x) (layer 0)
 *   after q/k/v       bias (qwen2), q/k RMSNorm per head (qwen3), rotary
 *                     embedding of q and k, k and v into the cache, then
 *                     causal attention of every row over the cache -> att
 *   after o           x += o; xn = RMSNorm(x) (post-attention)
 *   after gate/up     act = SiLU(gate) * up
 *   after down        x += down; xn = RMSNorm(x) (the next layer's, or the
 *                     final norm after the last)
 *   the head          logits of the rows asked for
 *
 * The fp32 reference runs the same list one GEMM at a time with its own
 * GEMM. Row-wise work runs on the handle's pool, one row per item (a prefill
 * chunk), or inline for a single row; attention runs one (row, head) per
 * item. The rotary embedding follows Hugging Face's rotate_half: dimension
 * j of a head pairs with j + d/2, at angle position * inv_freq[j], inv_freq
 * = theta^(-2j/d) (llama3 rope_scaling applied to it), cos and sin taken
 * from a table made once per model in double precision.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"


typedef struct rn_op_tag {
    uint32_t layer;
    uint8_t kind, last; /* last: the final part of its layer's linears */
    const rn_linear *lin;
} rn_op_tag;

typedef struct rn_run {
    edgert_model *m;
    uint32_t n, pos0;
    const int32_t *ids;
    int all_logits;
    float *logits;
    rn_op_tag *tags;
    edgert_gemm_args *args;
    edgert_step_op *ops;
    size_t nops;
    uint32_t layer; /* for the row callbacks */
} rn_run;

/* ---- state ------------------------------------------------------------------------ */

static void *zalloc(size_t bytes, int *fail)
{
    void *p = bytes ? calloc(1, bytes) : NULL;
    *fail |= bytes && !p;
    return p;
}

/* The KV cache on transparent huge pages where the kernel gives them: a
 * decode step reads every layer's cache once, block after block, and with
 * 4 KiB pages the hardware prefetcher starts cold at every page (attention
 * at context 150 read its cache at 5.5 GB/s per thread). Touched here, so
 * its pages are had (and zeroed) when the model opens, not inside the
 * first prefill's attention (where their faults cost a 512-token prompt
 * 4% of its time); the cache is resident memory anyway. */
static void *cache_alloc(size_t bytes, int *fail)
{
    void *p = bytes ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                           0)
                    : NULL;
    if (p == MAP_FAILED) {
        *fail = 1;
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    if (p)
        madvise(p, bytes, MADV_HUGEPAGE); /* advice: without it, 4 KiB pages */
#endif
    for (size_t at = 0; p && at < bytes; at += 4096)
        ((volatile char *)p)[at] = 0;
    return p;
}

static void rope_table(edgert_model *m)
{
    const rn_config *c = &m->c;
    uint32_t half = c->head_dim / 2;
    for (uint32_t j = 0; j < half; j++) {
        double inv = pow(c->rope_theta, -2.0 * j / c->head_dim);
        if (c->rope_llama3) { /* transformers' _compute_llama3_parameters */
            double wavelen = 2 * M_PI / inv, lo_wl = c->rs_orig / c->rs_low;
            double hi_wl = c->rs_orig / c->rs_high;
            if (wavelen > lo_wl) {
                inv /= c->rs_factor;
            } else if (wavelen >= hi_wl) {
                double smooth = (c->rs_orig / wavelen - c->rs_low) / (c->rs_high - c->rs_low);
                inv = (1 - smooth) * inv / c->rs_factor + smooth * inv;
            }
        }
        for (uint32_t p = 0; p < m->ctx_len; p++) {
            double a = (double)p * inv;
            m->rope_cos[(size_t)p * half + j] = (float)cos(a);
            m->rope_sin[(size_t)p * half + j] = (float)sin(a);
        }
    }
}

edgert_status rn_alloc_state(edgert_model *m, uint32_t kv_bits, char *err, size_t len)
{
    const rn_config *c = &m->c;
    size_t R = EDGERT_RUNNER_CHUNK, nq = (size_t)c->heads * c->head_dim;
    size_t nkv = (size_t)c->kv_heads * c->head_dim, L = c->layers;
    int fail = 0;
    m->threads = edgert_thread_count(m->ctx);
    /* fp16 where asked, or by default on a backend where the kernels have
     * it; the fp32 reference keeps fp32 (it is what backends are compared
     * with). 16 asked where no set has it: refused, saying why. */
    int kv16 = m->be && kv_bits != 32;
    m->attn = rn_attn_pick(edgert_device_facts(m->ctx)->cpu_flags, kv16);
    if (kv_bits == 16 && m->attn->kv_bytes != 2)
        return er_fail(EDGERT_E_UNSUPPORTED, err, len, "an fp16 KV cache: %s", !m->be
                       ? "the fp32 reference keeps fp32" : "this CPU's attention kernels ("
                       "AVX2 and F16C without AVX-512) keep fp32 here");
    m->kv_stride = (m->ctx_len + RN_KBLOCK - 1) / RN_KBLOCK * RN_KBLOCK; /* whole K blocks */
    m->cache_bytes = L * m->kv_stride * nkv * m->attn->kv_bytes;
    m->kcache = cache_alloc(m->cache_bytes, &fail);
    m->vcache = cache_alloc(m->cache_bytes, &fail);
    m->rope_cos = zalloc((size_t)m->ctx_len * c->head_dim / 2 * sizeof(float), &fail);
    m->rope_sin = zalloc((size_t)m->ctx_len * c->head_dim / 2 * sizeof(float), &fail);
    m->x = zalloc(R * c->hidden * sizeof(float), &fail);
    m->xn = zalloc(R * c->hidden * sizeof(float), &fail);
    m->tmp = zalloc(R * c->hidden * sizeof(float), &fail);
    m->qkv = zalloc(R * (nq + 2 * nkv) * sizeof(float), &fail);
    m->att = zalloc(R * nq * sizeof(float), &fail);
    m->gu = zalloc(R * 2 * c->mlp * sizeof(float), &fail);
    m->act = zalloc(R * c->mlp * sizeof(float), &fail);
    m->scores = zalloc((size_t)(m->threads ? m->threads : 1) * (c->heads / c->kv_heads) *
                           m->ctx_len * sizeof(float), &fail);
    if (fail)
        return er_fail(EDGERT_E_NOMEM, err, len, "out of memory for the KV cache (%u positions) "
                       "and activations", m->ctx_len);
    m->info.kv_cache_bytes = 2 * m->cache_bytes;
    rope_table(m);
    return EDGERT_OK;
}

void rn_free_state(edgert_model *m)
{
    if (m->kcache)
        munmap(m->kcache, m->cache_bytes);
    if (m->vcache)
        munmap(m->vcache, m->cache_bytes);
    m->kcache = m->vcache = NULL;
    float **bufs[] = {&m->rope_cos, &m->rope_sin, &m->x, &m->xn,
                      &m->tmp, &m->qkv, &m->att, &m->gu, &m->act, &m->scores};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(*bufs[i]);
        *bufs[i] = NULL;
    }
}

/* ---- row work -------------------------------------------------------------------- */

static void for_rows(rn_run *r, size_t items, edgert_range_fn fn)
{
    if (items == 1)
        fn(r, 0, 1, 0);
    else
        edgert_parallel_for(r->m->ctx, items, 1, fn, r);
}

/* Rows [b, e): bias, q/k norm, rotary embedding, k and v into the cache. */
static void qkv_rows(void *arg, size_t b, size_t e, unsigned worker)
{
    rn_run *r = arg;
    edgert_model *m = r->m;
    const rn_config *c = &m->c;
    const rn_layer *L = &m->layers[r->layer];
    uint32_t d = c->head_dim, half = d / 2, nq = c->heads * d, nkv = c->kv_heads * d;
    uint32_t width = nq + 2 * nkv;
    (void)worker;
    for (size_t i = b; i < e; i++) {
        float *row = m->qkv + i * width;
        uint32_t p = r->pos0 + (uint32_t)i;
        if (L->qkv_bias)
            for (uint32_t j = 0; j < width; j++)
                row[j] += L->qkv_bias[j];
        const float *cs = m->rope_cos + (size_t)p * half, *sn = m->rope_sin + (size_t)p * half;
        for (uint32_t h = 0; h < c->heads + c->kv_heads; h++) {
            float *v = row + (size_t)h * d;
            if (L->q_norm)
                rn_rmsnorm(v, v, h < c->heads ? L->q_norm : L->k_norm, d, c->eps);
            for (uint32_t j = 0; j < half; j++) {
                float a = v[j], bb = v[j + half];
                v[j] = a * cs[j] - bb * sn[j];
                v[j + half] = bb * cs[j] + a * sn[j];
            }
        }
        const size_t vb = m->attn->kv_bytes; /* attn.h: the caches' layouts and formats */
        for (uint32_t h = 0; h < c->kv_heads; h++) {
            size_t head = (size_t)r->layer * c->kv_heads + h;
            m->attn->kv_put(row + nq + nkv + h * d, d,
                            (char *)m->vcache + (head * m->kv_stride + p) * d * vb, 1);
            size_t kb = head * m->kv_stride * d + (size_t)(p / RN_KBLOCK) * RN_KBLOCK * d +
                        p % RN_KBLOCK;
            m->attn->kv_put(row + nq + h * d, d, (char *)m->kcache + kb * vb, RN_KBLOCK);
        }
    }
}

/* Items [b, e) of (row, KV head): causal attention over the cache for the
 * query heads that share the KV head, K and V read once for all of them. */
static void attn_items(void *arg, size_t b, size_t e, unsigned worker)
{
    rn_run *r = arg;
    edgert_model *m = r->m;
    const rn_config *c = &m->c;
    const rn_attn_kern *k = m->attn;
    uint32_t d = c->head_dim, nq = c->heads * d, nkv = c->kv_heads * d;
    uint32_t width = nq + 2 * nkv, g = c->heads / c->kv_heads;
    size_t ls = m->ctx_len;
    float *s = m->scores + (size_t)worker * g * ls, scale[RN_ATTN_MAX_GROUP];
    const size_t vb = k->kv_bytes, head_bytes = (size_t)d * m->kv_stride * vb;
    const char *kc = (const char *)m->kcache + (size_t)r->layer * nkv * m->kv_stride * vb;
    const char *vc = (const char *)m->vcache + (size_t)r->layer * nkv * m->kv_stride * vb;
    const int ordered = m->layers[r->layer].o.perm != NULL; /* o's act order */
    for (size_t it = b; it < e; it++) {
        uint32_t i = (uint32_t)(it / c->kv_heads), kvh = (uint32_t)(it % c->kv_heads);
        uint32_t npos = r->pos0 + i + 1;
        float *q = m->qkv + (size_t)i * width + (size_t)kvh * g * d;
        float *out = m->att + (size_t)i * nq + (size_t)kvh * g * d;
        k->qk(q, g, kc + kvh * head_bytes, d, npos, (float)(1.0 / sqrt((double)d)), s, ls);
        for (uint32_t h = 0; h < g; h++)
            scale[h] = (float)(1.0 / k->softmax(s + h * ls, npos));
        /* in o's act order: into q's place (read, and these heads' only),
         * gathered once every head is done (o_gather) */
        k->pv(s, ls, g, vc + kvh * head_bytes, d, npos, scale, ordered ? q : out);
    }
}

/* Rows [b, e) of o's input in its act order, from the heads' outputs in
 * q's place: a gather per row, where a scatter by each head's worker
 * wrote into lines the other worker was writing (SmolLM2: +1.5% of the
 * GEMMs' time). */
static void o_gather(void *arg, size_t b, size_t e, unsigned worker)
{
    rn_run *r = arg;
    edgert_model *m = r->m;
    const rn_config *c = &m->c;
    uint32_t nq = c->heads * c->head_dim, width = nq + 2 * c->kv_heads * c->head_dim;
    (void)worker;
    for (size_t i = b; i < e; i++)
        m->attn->gather(m->qkv + i * width, m->layers[r->layer].o.perm, nq, m->att + i * nq);
}

static void o_rows(void *arg, size_t b, size_t e, unsigned worker)
{
    rn_run *r = arg;
    edgert_model *m = r->m;
    uint32_t h = m->c.hidden;
    (void)worker;
    for (size_t i = b; i < e; i++) {
        float *x = m->x + i * h;
        for (uint32_t j = 0; j < h; j++)
            x[j] += m->tmp[i * h + j];
        rn_rmsnorm_to(m->xn + i * h, x, m->layers[r->layer].mlp_norm, h, m->c.eps,
                      m->layers[r->layer].gate_up.perm, m->tmp + i * h, m->attn);
    }
}

static void gu_rows(void *arg, size_t b, size_t e, unsigned worker)
{
    rn_run *r = arg;
    edgert_model *m = r->m;
    uint32_t f = m->c.mlp;
    const uint32_t *perm = m->layers[r->layer].down.perm; /* down's act order, or NULL */
    (void)worker;
    for (size_t i = b; i < e; i++) {
        float *gate = m->gu + i * 2 * f;
        if (perm) /* in down's act order */
            m->attn->silu_mul_gather(gate, gate + f, perm, m->act + i * f, f);
        else
            m->attn->silu_mul(gate, gate + f, m->act + i * f, f);
    }
}

static void down_rows(void *arg, size_t b, size_t e, unsigned worker)
{
    rn_run *r = arg;
    edgert_model *m = r->m;
    uint32_t h = m->c.hidden;
    const int last = r->layer + 1 == m->c.layers;
    const float *g = last ? m->final_norm : m->layers[r->layer + 1].attn_norm;
    const uint32_t *perm = last ? m->head.perm : m->layers[r->layer + 1].qkv.perm;
    (void)worker;
    for (size_t i = b; i < e; i++) {
        float *x = m->x + i * h;
        for (uint32_t j = 0; j < h; j++)
            x[j] += m->tmp[i * h + j];
        rn_rmsnorm_to(m->xn + i * h, x, g, h, m->c.eps, perm, m->tmp + i * h, m->attn);
    }
}

/* The act order the next op's own work writes its output in, into the
 * cache during that op's GEMM: a step streams more weights than the cache
 * holds, so each order left it since the last step, and the work would
 * wait for every line of it. */
static void prefetch_order(const rn_linears *ls, uint32_t k)
{
    const uint32_t *o = ls ? ls->perm : NULL;
    for (size_t b = 0; o && b < (size_t)k * sizeof *o; b += 64)
        __builtin_prefetch((const char *)o + b, 0, 3);
}

static edgert_status after(void *user, size_t index)
{
    rn_run *r = user;
    const rn_op_tag *t = &r->tags[index];
    if (!t->last)
        return EDGERT_OK;
    edgert_model *m = r->m;
    const rn_config *c = &m->c;
    r->layer = t->layer;
    const rn_layer *L = t->layer < c->layers ? &m->layers[t->layer] : NULL;
    const rn_layer *next = t->layer + 1 < c->layers ? &m->layers[t->layer + 1] : NULL;
    switch (t->kind) {
    case RN_OP_QKV:
        for_rows(r, r->n, qkv_rows);
        for_rows(r, (size_t)r->n * c->kv_heads, attn_items);
        if (L->o.perm)
            for_rows(r, r->n, o_gather);
        prefetch_order(&L->gate_up, c->hidden); /* o's work writes gate_up's input */
        break;
    case RN_OP_O:
        for_rows(r, r->n, o_rows);
        prefetch_order(&L->down, c->mlp);
        break;
    case RN_OP_GU:
        for_rows(r, r->n, gu_rows);
        prefetch_order(next ? &next->qkv : &m->head, c->hidden);
        break;
    case RN_OP_DOWN:
        for_rows(r, r->n, down_rows);
        prefetch_order(next ? &next->o : NULL, c->heads * c->head_dim);
        break;
    default: break;
    }
    return EDGERT_OK;
}

/* ---- the op list ------------------------------------------------------------------ */

static void add(rn_run *r, const rn_linears *ls, uint32_t layer, int kind, uint32_t rows,
                const float *x, size_t ldx, float *y, size_t ldy)
{
    for (unsigned p = 0; p < ls->count; p++) {
        size_t i = r->nops++;
        r->tags[i] = (rn_op_tag){layer, (uint8_t)kind, p + 1 == ls->count, &ls->part[p]};
        r->args[i] = (edgert_gemm_args){.struct_size = sizeof(edgert_gemm_args), .m = rows,
                                        .x = x, .ldx = ldx, .y = y + ls->part[p].col,
                                        .ldy = ldy};
        r->ops[i] = (edgert_step_op){.struct_size = sizeof(edgert_step_op),
                                     .weights = ls->part[p].packed, .args = &r->args[i],
                                     .after = after, .user = r};
    }
}

/* The ops of layers [l0, l1), and the head when `head`. */
static void build_range(rn_run *r, uint32_t l0, uint32_t l1, int head)
{
    edgert_model *m = r->m;
    const rn_config *c = &m->c;
    uint32_t n = r->n, h = c->hidden, nq = c->heads * c->head_dim;
    for (uint32_t l = l0; l < l1; l++) {
        const rn_layer *L = &m->layers[l];
        add(r, &L->qkv, l, RN_OP_QKV, n, m->xn, h, m->qkv, L->qkv.n);
        add(r, &L->o, l, RN_OP_O, n, m->att, nq, m->tmp, h);
        add(r, &L->gate_up, l, RN_OP_GU, n, m->xn, h, m->gu, L->gate_up.n);
        add(r, &L->down, l, RN_OP_DOWN, n, m->act, c->mlp, m->tmp, h);
    }
    if (!head)
        return;
    uint32_t rows = r->all_logits ? n : 1;
    add(r, &m->head, c->layers, RN_OP_HEAD, rows, m->xn + (size_t)(n - rows) * h, h, r->logits,
        c->vocab);
}

static void build(rn_run *r)
{
    build_range(r, 0, r->m->c.layers, 1);
}

/* The op list's arrays for `cap` ops; E_NOMEM (said) without them. */
static edgert_status run_alloc(rn_run *r, size_t cap, char *err, size_t len)
{
    r->tags = malloc(cap * sizeof *r->tags);
    r->args = malloc(cap * sizeof *r->args);
    r->ops = malloc(cap * sizeof *r->ops);
    if (!r->tags || !r->args || !r->ops)
        return er_fail(EDGERT_E_NOMEM, err, len, "out of memory");
    return EDGERT_OK;
}

static void run_free(rn_run *r)
{
    free(r->tags);
    free(r->args);
    free(r->ops);
}

/* The list on the fp32 reference, one GEMM at a time: each by `hook` where
 * it computes y (rn_gemm_hook), else rn_gemm_f32; then the runner's work
 * after it. */
static edgert_status run_f32(rn_run *r, rn_gemm_hook hook, void *user)
{
    edgert_status st = EDGERT_OK;
    for (size_t i = 0; !st && i < r->nops; i++) {
        const edgert_gemm_args *a = &r->args[i];
        const rn_linear *l = r->tags[i].lin;
        if (!hook || !hook(user, r->tags[i].layer, r->tags[i].kind, l, a->x, a->m, a->ldx,
                           (float *)a->y, a->ldy))
            rn_gemm_f32(r->m->ctx, l, a->m, a->x, a->ldx, a->y - l->col, a->ldy);
        st = after(r, i);
    }
    return st;
}

edgert_status rn_forward_chunk(edgert_model *m, const int32_t *ids, uint32_t n, float *logits,
                               int all_logits, char *err, size_t len)
{
    const rn_config *c = &m->c;
    rn_run r = {.m = m, .n = n, .pos0 = m->pos, .ids = ids, .all_logits = all_logits,
                .logits = logits};
    edgert_status st = run_alloc(&r, (size_t)c->layers * 7 + RN_MAX_PARTS, err, len);
    if (!st) {
        build(&r);
        for (uint32_t i = 0; i < n; i++) {
            rn_row_f32(st_data(m->embed_file, m->embed), m->embed->dtype,
                       (uint64_t)ids[i] * c->hidden, c->hidden, m->x + (size_t)i * c->hidden);
            rn_rmsnorm_to(m->xn + (size_t)i * c->hidden, m->x + (size_t)i * c->hidden,
                          m->layers[0].attn_norm, c->hidden, c->eps, m->layers[0].qkv.perm,
                          m->tmp + (size_t)i * c->hidden, m->attn);
        }
        /* Each row looked up maps the page cache's folio around it (up to
         * 2 MiB: st_release_near), so over a conversation much of the
         * embedding (57 MB of SmolLM2's) became resident, and a prompt's
         * rows mapped up to 2 MiB each. On a backend its pages go after
         * every lookup: a walk over its few page-table entries, and a fault
         * per row (the fp32 reference reads a tied head from the same pages,
         * in place, every step: they stay). */
        if (m->be)
            st_release_near(m->embed_file, m->embed);
    }
    if (!st && m->be) {
        st = edgert_step(m->be, r.ops, r.nops, err, len);
        if (!st && n == 1)
            m->stepped = 1; /* edgert_model_gemm_step repeats it */
    } else if (!st) { /* the fp32 reference: the same list, one GEMM at a time */
        st = run_f32(&r, NULL, NULL);
    }
    if (!st)
        m->pos += n;
    run_free(&r);
    return st;
}

edgert_status rn_forward_layers(edgert_model *m, uint32_t n, uint32_t l0, uint32_t l1,
                                rn_gemm_hook hook, void *user, char *err, size_t len)
{
    const rn_config *c = &m->c;
    rn_run r = {.m = m, .n = n, .pos0 = m->pos};
    if (m->be || l0 >= l1 || l1 > c->layers || n == 0 || n > EDGERT_RUNNER_CHUNK)
        return er_fail(EDGERT_E_USAGE, err, len, "rn_forward_layers: the fp32 reference, layers "
                       "in range, 1 to %u rows", EDGERT_RUNNER_CHUNK);
    edgert_status st = run_alloc(&r, (size_t)(l1 - l0) * 7 * RN_MAX_PARTS, err, len);
    if (!st) {
        build_range(&r, l0, l1, 0);
        for (uint32_t i = 0; i < n; i++)
            rn_rmsnorm(m->xn + (size_t)i * c->hidden, m->x + (size_t)i * c->hidden,
                       m->layers[l0].attn_norm, c->hidden, c->eps);
        st = run_f32(&r, hook, user);
    }
    if (!st)
        m->pos += n;
    run_free(&r);
    return st;
}

edgert_status edgert_model_gemm_step(edgert_model *m, char *err, size_t len)
{
    if (!m || !m->stepped)
        return er_fail(EDGERT_E_USAGE, err, len, "edgert_model_gemm_step: %s",
                       !m ? "no model" : "no single-token step on a backend ran yet");
    const rn_config *c = &m->c;
    float *logits = malloc((size_t)c->vocab * sizeof(float));
    rn_run r = {.m = m, .n = 1, .pos0 = m->pos, .logits = logits};
    edgert_status st = run_alloc(&r, (size_t)c->layers * 7 + RN_MAX_PARTS, err, len);
    if (!st && !logits)
        st = er_fail(EDGERT_E_NOMEM, err, len, "out of memory");
    if (!st) {
        build(&r);
        for (size_t i = 0; i < r.nops; i++)
            r.ops[i].after = NULL;
        st = edgert_step(m->be, r.ops, r.nops, err, len);
    }
    free(logits);
    run_free(&r);
    return st;
}
