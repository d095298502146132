/*
 * core/context.c — the handle: open (probe → discover → gate → load),
 * accessors, and running a backend's pack/gemm.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "context.h"

struct edgert_backend {
    edgert_ctx *ctx;
    er_cand *cand;
    void *state;
};

struct edgert_packed {
    edgert_backend *b;
    void *handle;
    size_t bytes;
};

static char **split_commas(const char *a, const char *b)
{
    size_t cap = 1;
    for (const char *s = a; s && *s; s++)
        cap += *s == ',';
    for (const char *s = b; s && *s; s++)
        cap += *s == ',';
    char **out = calloc(cap + 2, sizeof *out);
    if (!out)
        return NULL;
    size_t n = 0;
    const char *lists[2] = {a, b};
    for (int l = 0; l < 2; l++) {
        if (!lists[l])
            continue;
        char *copy = er_strdup(lists[l]), *save = NULL;
        if (!copy)
            continue;
        for (char *t = strtok_r(copy, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save))
            if (n < cap + 1)
                out[n++] = er_strdup(t);
        free(copy);
    }
    return out;
}

static int parse_level(const char *s, int dflt)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; s && i < 4; i++)
        if (strcasecmp(s, names[i]) == 0)
            return EDGERT_LOG_ERROR + i;
    return dflt;
}

static void nan_figures(edgert_figures *f)
{
    f->decode_tokens_per_s = NAN;
    f->prefill_gflops = NAN;
    f->top1_agreement = NAN;
    f->kl_mean = NAN;
    f->where = NULL;
}

/* Fill the public view from the manifest. */
static void publish(edgert_ctx *ctx, er_cand *c)
{
    edgert_candidate *p = &c->pub;
    const er_manifest *m = &c->m;
    p->name = m->name;
    p->version = m->version;
    p->vendor = m->vendor;
    p->manifest_path = m->path;
    p->library_path = m->library_path;
    p->processor = m->processor ? m->processor : "cpu";
    p->rationale = m->rationale ? m->rationale : "";
    p->notes = m->notes ? m->notes : "";
    p->layout.format = m->layout_format;
    p->layout.weight_bits = m->weight_bits;
    p->layout.group_size = m->group_size;
    p->layout.symmetric = m->symmetric;
    p->layout.activation_dtype = m->activation_dtype;
    p->layout.activation_bits = m->activation_bits;
    p->layout.bits_per_weight = m->bits_per_weight;
    p->layout.fallback_dtype = m->fallback_dtype;
    p->effective_activation_dtype =
        (m->fallback_dtype && !ctx->dev.bf16 && m->activation_dtype &&
         strcmp(m->activation_dtype, "bf16") == 0)
            ? m->fallback_dtype
            : m->activation_dtype;
    p->runs_in_process = m->runs_in_process;
    p->verified = m->verified;
    p->reference = m->reference;
    p->abi_min = m->abi_min;
    p->abi_max = m->abi_max;
    p->declared = m->declared;
    p->declared.where = m->declared_where;
    nan_figures(&p->measured);
    p->detail = "";
    p->reasons = NULL;
    p->reason_count = 0;
}

static void free_cand(er_cand *c)
{
    er_unload(c);
    if (c->reasons)
        for (size_t i = 0; c->reasons[i]; i++)
            free(c->reasons[i]);
    free(c->reasons);
    free(c->detail);
    free(c->path_chosen);
    er_manifest_free(&c->m);
    free(c);
}

edgert_status edgert_open(const edgert_options *o, edgert_ctx **out, char *err, size_t err_len)
{
    edgert_options dflt = {.struct_size = sizeof dflt};
    edgert_status st = EDGERT_OK;
    if (!out) {
        edgert_errf(err, err_len, "edgert_open: out is NULL");
        return EDGERT_E_USAGE;
    }
    *out = NULL;
    if (!o)
        o = &dflt;
    if (o->struct_size < offsetof(edgert_options, log_level) + sizeof(int)) {
        edgert_errf(err, err_len, "edgert_open: options.struct_size %u is too small (set it to "
                                 "sizeof(edgert_options))", o->struct_size);
        return EDGERT_E_USAGE;
    }
    edgert_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        edgert_errf(err, err_len, "out of memory");
        return EDGERT_E_NOMEM;
    }
    ctx->ignore_env = o->ignore_env;
    ctx->strict = o->strict;
    ctx->no_evidence = o->no_evidence;
    ctx->log = o->log;
    ctx->log_user = o->log_user;
    ctx->log_level = o->log_level ? o->log_level
                                  : parse_level(er_getenv(o->ignore_env, "EDGERT_LOG"),
                                                EDGERT_LOG_WARN);
    ctx->disabled = split_commas(er_getenv(o->ignore_env, "EDGERT_DISABLE"), o->disable);

    /* 1. The device: a profile (plan) or the probe (live). */
    if (o->device_profile) {
        size_t before = ctx->diags.count;
        st = er_device_profile_load(o->device_profile, &ctx->dev, &ctx->diags);
        if (st != EDGERT_OK) {
            char msg[4096];
            er_diag_last_error(&ctx->diags, before, msg, sizeof msg);
            edgert_errf(err, err_len, "bad device profile:\n  %s", msg[0] ? msg : o->device_profile);
            goto fail;
        }
    } else {
        st = er_probe(o->sysroot, &ctx->dev, &ctx->diags);
        if (st != EDGERT_OK) {
            edgert_errf(err, err_len, "probe failed: %s", edgert_status_name(st));
            goto fail;
        }
    }

    er_evidence_init(ctx, o);

    /* 2. The thread pool (workers start lazily). */
    unsigned threads = o->threads;
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (unsigned)n : 1u;
    }
    ctx->pool = er_pool_create(threads);
    if (!ctx->pool) {
        edgert_errf(err, err_len, "cannot create a thread pool of %u threads", threads);
        st = EDGERT_E_NOMEM;
        goto fail;
    }

    /* 3. Manifests. */
    st = er_discover(ctx, o, err, err_len);
    if (st != EDGERT_OK)
        goto fail;

    /* 4. Gates, then (live) loading of what passed them. */
    for (size_t i = 0; i < ctx->ncands; i++) {
        er_cand *c = ctx->cands[i];
        publish(ctx, c);
        er_gate(ctx, c);
        er_load(ctx, c);
        c->pub.eligible = c->pub.reason_count == 0;
    }

    /* 5. Figures measured on this device, for the same plugin files. */
    er_evidence_apply(ctx);
    *out = ctx;
    return EDGERT_OK;
fail:
    edgert_close(ctx);
    return st;
}

void edgert_close(edgert_ctx *ctx)
{
    if (!ctx)
        return;
    for (size_t i = 0; i < ctx->ncands; i++)
        free_cand(ctx->cands[i]);
    free(ctx->cands);
    for (size_t i = 0; i < ctx->ndirs; i++)
        free(ctx->dirs[i].path);
    free(ctx->dirs);
    er_strlist_free(ctx->disabled);
    er_diags_free(&ctx->diags);
    er_pool_destroy(ctx->pool);
    free(ctx->evidence_path);
    free(ctx);
}

const edgert_device *edgert_device_facts(const edgert_ctx *ctx)
{
    return ctx ? &ctx->dev : NULL;
}

size_t edgert_candidate_count(const edgert_ctx *ctx)
{
    return ctx ? ctx->ncands : 0;
}

const edgert_candidate *edgert_candidate_at(const edgert_ctx *ctx, size_t i)
{
    return (ctx && i < ctx->ncands) ? &ctx->cands[i]->pub : NULL;
}

const edgert_candidate *edgert_candidate_find(const edgert_ctx *ctx, const char *name)
{
    for (size_t i = 0; ctx && name && i < ctx->ncands; i++)
        if (strcmp(ctx->cands[i]->m.name, name) == 0)
            return &ctx->cands[i]->pub;
    return NULL;
}

size_t edgert_diag_count(const edgert_ctx *ctx)
{
    return ctx ? ctx->diags.count : 0;
}

const edgert_diag *edgert_diag_at(const edgert_ctx *ctx, size_t i)
{
    return (ctx && i < ctx->diags.count) ? &ctx->diags.items[i] : NULL;
}

size_t edgert_search_path_count(const edgert_ctx *ctx)
{
    return ctx ? ctx->ndirs : 0;
}

const char *edgert_search_path_at(const edgert_ctx *ctx, size_t i, const char **origin)
{
    if (!ctx || i >= ctx->ndirs)
        return NULL;
    if (origin)
        *origin = ctx->dirs[i].origin;
    return ctx->dirs[i].path;
}

unsigned edgert_thread_count(const edgert_ctx *ctx)
{
    return ctx ? er_pool_threads(ctx->pool) : 0;
}

void edgert_parallel_for(edgert_ctx *ctx, size_t n, size_t grain, edgert_range_fn fn, void *arg)
{
    er_pool_run(ctx ? ctx->pool : NULL, n, grain, fn, arg);
}

/* ---- running a backend --------------------------------------------------- */

edgert_status edgert_backend_open(edgert_ctx *ctx, const char *name, const char *options,
                                  edgert_backend **out, char *err, size_t err_len)
{
    if (!ctx || !name || !out) {
        edgert_errf(err, err_len, "edgert_backend_open: bad arguments");
        return EDGERT_E_USAGE;
    }
    *out = NULL;
    er_cand *c = NULL;
    for (size_t i = 0; i < ctx->ncands; i++)
        if (strcmp(ctx->cands[i]->m.name, name) == 0)
            c = ctx->cands[i];
    if (!c) {
        edgert_errf(err, err_len, "no backend named '%s'", name);
        return EDGERT_E_NOT_FOUND;
    }
    if (!c->pub.eligible || !c->plugin) {
        edgert_errf(err, err_len, "backend '%s' is not loaded on this device: %s%s%s", name,
                    c->pub.reason_count ? c->pub.reasons[0] : "no library (declarative backend)",
                    c->pub.detail && *c->pub.detail ? " — " : "", c->pub.detail ? c->pub.detail : "");
        return c->pub.eligible ? EDGERT_E_UNSUPPORTED : EDGERT_E_NOT_ELIGIBLE;
    }
    if (!(c->plugin->caps & EDGERT_CAP_GEMM)) {
        edgert_errf(err, err_len, "backend '%s' has no GEMM (export-only)", name);
        return EDGERT_E_UNSUPPORTED;
    }
    edgert_backend *b = calloc(1, sizeof *b);
    if (!b) {
        edgert_errf(err, err_len, "out of memory");
        return EDGERT_E_NOMEM;
    }
    b->ctx = ctx;
    b->cand = c;
    char perr[512] = "";
    const char *opts = options ? options : c->m.plugin_options;
    edgert_status st = c->plugin->init(&c->host, opts, &b->state, perr, sizeof perr);
    if (st == EDGERT_OK && options) {
        /* A new path was forced: it must pass the self-test too. */
        st = c->plugin->self_test(b->state, perr, sizeof perr);
        if (st != EDGERT_OK) {
            c->plugin->fini(b->state);
            b->state = NULL;
        }
    }
    if (st != EDGERT_OK) {
        er_set_plugin_err(err, err_len, name, NULL, perr, st);
        free(b);
        return st;
    }
    *out = b;
    return EDGERT_OK;
}

void edgert_backend_close(edgert_backend *b)
{
    if (!b)
        return;
    if (b->state)
        b->cand->plugin->fini(b->state);
    free(b);
}

const char *edgert_backend_name(const edgert_backend *b)
{
    return b ? b->cand->m.name : NULL;
}

const char *edgert_backend_describe(const edgert_backend *b)
{
    if (!b || !b->cand->plugin->describe)
        return "";
    const char *d = b->cand->plugin->describe(b->state);
    return d ? d : "";
}

edgert_status edgert_pack(edgert_backend *b, const edgert_qweights *w, edgert_packed **out,
                          char *err, size_t err_len)
{
    if (!b || !w || !out || w->struct_size < sizeof(edgert_qweights) || !w->codes || !w->scales ||
        w->n == 0 || w->k == 0 || w->group == 0) {
        edgert_errf(err, err_len, "edgert_pack: bad arguments (need n, k, group > 0, codes and "
                                 "scales)");
        return EDGERT_E_USAGE;
    }
    *out = NULL;
    edgert_packed *p = calloc(1, sizeof *p);
    if (!p) {
        edgert_errf(err, err_len, "out of memory");
        return EDGERT_E_NOMEM;
    }
    p->b = b;
    char perr[512] = "";
    edgert_status st = b->cand->plugin->pack(b->state, w, &p->handle, &p->bytes, perr, sizeof perr);
    if (st != EDGERT_OK) {
        char what[256];
        snprintf(what, sizeof what, "pack %s [%u x %u]", w->name ? w->name : "weights", w->n,
                 w->k);
        er_set_plugin_err(err, err_len, b->cand->m.name, what, perr, st);
        free(p);
        return st;
    }
    *out = p;
    return EDGERT_OK;
}

size_t edgert_packed_bytes(const edgert_packed *p)
{
    return p ? p->bytes : 0;
}

void edgert_packed_free(edgert_packed *p)
{
    if (!p)
        return;
    p->b->cand->plugin->packed_free(p->b->state, p->handle);
    free(p);
}

edgert_status edgert_gemm(edgert_backend *b, const edgert_packed *p, const edgert_gemm_args *a,
                          char *err, size_t err_len)
{
    if (!b || !p || !a || a->struct_size < sizeof(edgert_gemm_args) || !a->x || !a->y || a->m == 0) {
        edgert_errf(err, err_len, "edgert_gemm: bad arguments");
        return EDGERT_E_USAGE;
    }
    if (p->b != b) {
        /* The packed layout may depend on the instance's code path. */
        edgert_errf(err, err_len, "edgert_gemm: weights were packed by another backend instance "
                                 "('%s'); pack them with this one ('%s')",
                   p->b->cand->m.name, b->cand->m.name);
        return EDGERT_E_USAGE;
    }
    char perr[512] = "";
    edgert_status st = b->cand->plugin->gemm(b->state, p->handle, a, perr, sizeof perr);
    if (st != EDGERT_OK)
        er_set_plugin_err(err, err_len, b->cand->m.name, "gemm", perr, st);
    return st;
}
