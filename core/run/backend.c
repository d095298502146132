/*
 * core/run/backend.c — running a backend (edgert.h, "running a backend"): a fresh
 * instance of a loaded, eligible plugin, packing canonical weights into its
 * layout, GEMM on them, and (plugin ABI 2) the packed bytes a cache writes
 * to a file and maps back. Every crossing of the plugin boundary goes
 * through here, with the plugin's message turned into the caller's error
 * (er_set_plugin_err).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context/context.h"
#include "discover/discover.h"
#include "load/load.h"
#include "run/backend.h"

struct edgert_backend {
    edgert_ctx *ctx;
    er_cand *cand;
    void *state;
};

struct edgert_packed {
    edgert_backend *b;
    void *handle;
    size_t bytes;
    uint32_t n, k; /* the weights' shape: the checks every GEMM gets up front */
    uint32_t *inv; /* act order: column of input i, the inverse of edgert_qweights.perm; or NULL */
};

/* p->inv = the inverse of w's perm, which is checked to be a permutation of
 * 0 .. k-1 (E_USAGE otherwise: x's columns would go outside the row, or
 * two to one place); nothing to do without one. */
static edgert_status take_perm(edgert_packed *p, const edgert_qweights *w, const char *who,
                               char *err, size_t err_len)
{
    const uint32_t *perm = er_qw_perm(w);
    if (!perm)
        return EDGERT_OK;
    if (!(p->inv = malloc((size_t)w->k * sizeof *p->inv))) {
        edgert_errf(err, err_len, "out of memory");
        return EDGERT_E_NOMEM;
    }
    uint32_t j = er_perm_invert(perm, w->k, p->inv);
    if (j == w->k)
        return EDGERT_OK;
    edgert_errf(err, err_len, "%s: bad arguments: %s.perm[%u] = %u is %s (perm must be a "
                "permutation of 0..%u)", who, w->name ? w->name : "weights", j, perm[j],
                perm[j] >= w->k ? "not an input" : "there twice", w->k - 1u);
    free(p->inv);
    p->inv = NULL;
    return EDGERT_E_USAGE;
}

/* The length of the key of the option word at w (up to '=', a blank or the
 * end). */
static size_t option_key_len(const char *w)
{
    return strcspn(w, "= \t\n");
}

/* Whether the blank-separated words of `list` set `key` (of length n); the
 * whole word that does goes to *word, its length to *wlen. */
static int option_set(const char *list, const char *key, size_t n, const char **word,
                      size_t *wlen)
{
    for (const char *w = list + strspn(list, " \t\n"); *w; w += strspn(w, " \t\n")) {
        size_t len = strcspn(w, " \t\n");
        if (option_key_len(w) == n && strncmp(w, key, n) == 0) {
            *word = w;
            *wlen = len;
            return 1;
        }
        w += len;
    }
    return 0;
}

/* The options an instance is created with: the manifest's plugin_options,
 * which are what the backend's name means (avx512-w4a8 is the amx-w4a8
 * library on path=vnni), then the caller's words. A caller word setting a
 * key the manifest sets otherwise is refused: it would run another backend
 * under this one's name. *out is malloc'd (NULL when both are NULL). */
static edgert_status merge_options(const char *name, const char *fixed, const char *extra,
                                   char **out, char *err, size_t err_len)
{
    *out = NULL;
    if (!fixed || !extra) { /* one side or none: as it is */
        const char *one = fixed ? fixed : extra;
        if (one && !(*out = er_strdup(one)))
            goto nomem;
        return EDGERT_OK;
    }
    /* fixed's words, then each of extra's that fixed lacks: a plugin may
     * refuse a key given twice, even with one value */
    size_t cap = strlen(fixed) + strlen(extra) + 2, used = 0;
    char *o = malloc(cap);
    if (!o)
        goto nomem;
    used = (size_t)snprintf(o, cap, "%s", fixed);
    for (const char *w = extra + strspn(extra, " \t\n"); *w; w += strspn(w, " \t\n")) {
        size_t len = strcspn(w, " \t\n"), flen = 0;
        const char *f = NULL;
        if (!option_set(fixed, w, option_key_len(w), &f, &flen)) {
            used += (size_t)snprintf(o + used, cap - used, "%s%.*s",
                                     used && fixed[strspn(fixed, " \t\n")] ? " " : "",
                                     (int)len, w);
        } else if (flen != len || strncmp(f, w, len) != 0) {
            edgert_errf(err, err_len, "backend '%s': option '%.*s' contradicts its "
                        "manifest's plugin_options '%s', which its name stands for",
                        name, (int)len, w, fixed);
            free(o);
            return EDGERT_E_USAGE;
        }
        w += len;
    }
    *out = o;
    return EDGERT_OK;
nomem:
    edgert_errf(err, err_len, "out of memory");
    return EDGERT_E_NOMEM;
}

edgert_status edgert_backend_open(edgert_ctx *ctx, const char *name, const char *options,
                                  edgert_backend **out, char *err, size_t err_len)
{
    if (!ctx || !name || !out) {
        edgert_errf(err, err_len, "edgert_backend_open: bad arguments");
        return EDGERT_E_USAGE;
    }
    *out = NULL;
    er_cand *c = er_cand_find(ctx, name);
    if (!c) {
        char why[2048] = "";
        er_discover_why_missing(ctx, name, why, sizeof why);
        edgert_errf(err, err_len, "no backend named '%s'%s", name, why);
        return EDGERT_E_NOT_FOUND;
    }
    if (ctx->defer_load && !ctx->dev.planned) { /* loaded on demand */
        er_ensure_loaded(ctx, c);
        c->pub.eligible = c->failed == 0;
    }
    if (ctx->dev.planned && c->pub.eligible) {
        edgert_errf(err, err_len, "backend '%s' is eligible for the planned device, but a "
                    "handle opened on a device profile (plan mode) loads nothing: open one "
                    "without device_profile on the device to run it", name);
        return EDGERT_E_UNSUPPORTED;
    }
    if (!c->pub.eligible || !c->plugin) {
        char why[1024];
        er_cand_why_not(c, why, sizeof why);
        edgert_errf(err, err_len, "backend '%s' is not loaded on this device: %s", name, why);
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
    char *opts = NULL;
    edgert_status st = merge_options(name, c->m.plugin_options, options, &opts, err, err_len);
    if (st != EDGERT_OK) {
        free(b);
        return st;
    }
    st = c->plugin->init(&c->host, opts, &b->state, perr, sizeof perr);
    free(opts);
    perr[sizeof perr - 1] = '\0'; /* whatever the plugin wrote */
    if (st == EDGERT_OK && options) {
        /* A new path was forced: it must pass the self-test too. */
        st = c->plugin->self_test(b->state, perr, sizeof perr);
        perr[sizeof perr - 1] = '\0'; /* whatever the plugin wrote */
        if (st != EDGERT_OK) {
            c->plugin->fini(b->state);
            b->state = NULL;
        }
    }
    if (st != EDGERT_OK) {
        er_set_plugin_err(err, err_len, name, er_manifest_plugin_name(&c->m), NULL, perr, st);
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
    if (out)
        *out = NULL;
    const char *bad = !b                                              ? "the backend is NULL"
                      : !w                                            ? "the weights are NULL"
                      : !out                                          ? "out is NULL"
                      : w->struct_size < EDGERT_QWEIGHTS_V1_SIZE      ? "weights.struct_size is "
                                                                        "below version 1's"
                      : w->n == 0 || w->k == 0 || w->group == 0       ? "n, k and group must be > 0"
                      : !w->codes || !w->scales ? "weights.codes and weights.scales must be set"
                                                : NULL;
    if (!bad && er_check_unknown_tail(w, w->struct_size, sizeof *w, "edgert_pack: weights",
                                      "edgert_qweights", err, err_len) != EDGERT_OK)
        return EDGERT_E_USAGE;
    if (bad) {
        edgert_errf(err, err_len, "edgert_pack: bad arguments: %s", bad);
        return EDGERT_E_USAGE;
    }
    edgert_packed *p = calloc(1, sizeof *p);
    if (!p) {
        edgert_errf(err, err_len, "out of memory");
        return EDGERT_E_NOMEM;
    }
    p->b = b;
    p->n = w->n;
    p->k = w->k;
    edgert_status st = take_perm(p, w, "edgert_pack", err, err_len);
    if (st != EDGERT_OK) {
        free(p);
        return st;
    }
    /* the plugin packs the columns as they come; the order is the library's */
    edgert_qweights plain;
    if (p->inv) {
        memcpy(&plain, w, sizeof plain); /* any bytes past it are zero (checked) */
        plain.struct_size = sizeof plain;
        plain.perm = NULL;
        w = &plain;
    }
    char perr[512] = "";
    /* what the plugin allocates meanwhile is packed weights: the arena's */
    er_arena *prev = er_arena_packing(b->cand->ctx->arena);
    st = b->cand->plugin->pack(b->state, w, &p->handle, &p->bytes, perr, sizeof perr);
    er_arena_packing(prev);
    perr[sizeof perr - 1] = '\0'; /* whatever the plugin wrote */
    if (st != EDGERT_OK) {
        char what[256];
        snprintf(what, sizeof what, "pack %s [%u x %u]", w->name ? w->name : "weights", w->n,
                 w->k);
        er_set_plugin_err(err, err_len, b->cand->m.name, er_manifest_plugin_name(&b->cand->m),
                          what, perr, st);
        free(p->inv);
        free(p);
        return st;
    }
    *out = p;
    return EDGERT_OK;
}

const char *edgert_backend_packed_layout(const edgert_backend *b)
{
    return b ? b->cand->packed_layout : NULL;
}

edgert_status edgert_packed_data(const edgert_packed *p, const void **data, size_t *size,
                                 char *err, size_t err_len)
{
    if (!p || !data || !size) {
        edgert_errf(err, err_len, "edgert_packed_data: bad arguments (need p, data and size)");
        return EDGERT_E_USAGE;
    }
    *data = NULL;
    *size = 0;
    const er_cand *c = p->b->cand;
    if (!c->packed_layout) {
        edgert_errf(err, err_len, "%s: its packed weights cannot be mapped (the plugin has no "
                                 "mappable packed layout: plugin ABI 2, EDGERT_PACKED_MAPPABLE)",
                    c->m.name);
        return EDGERT_E_UNSUPPORTED;
    }
    char perr[512] = "";
    const void *d = NULL;
    size_t n = 0;
    edgert_status st = c->plugin->packed_data(p->b->state, p->handle, &d, &n, perr, sizeof perr);
    perr[sizeof perr - 1] = '\0'; /* whatever the plugin wrote */
    if (st != EDGERT_OK) {
        er_set_plugin_err(err, err_len, c->m.name, er_manifest_plugin_name(&c->m), "packed_data",
                          perr, st);
        return st;
    }
    if (!d || n == 0 || (uintptr_t)d % EDGERT_PACKED_ALIGN != 0 || n > p->bytes) {
        /* fail closed: bytes a cache would write must be what the contract says */
        edgert_errf(err, err_len, "%s: packed_data broke the contract: %zu bytes at %p (need "
                                 "non-NULL, aligned to %u, 1 to %zu bytes)",
                    c->m.name, n, d, EDGERT_PACKED_ALIGN, p->bytes);
        return EDGERT_E_PLUGIN;
    }
    *data = d;
    *size = n;
    return EDGERT_OK;
}

edgert_status edgert_packed_map(edgert_backend *b, const edgert_qweights *shape, const void *data,
                                size_t size, edgert_packed **out, char *err, size_t err_len)
{
    if (!b || !shape || !data || !out || shape->struct_size < EDGERT_QWEIGHTS_V1_SIZE ||
        shape->n == 0 || shape->k == 0 || shape->group == 0 || size == 0) {
        edgert_errf(err, err_len, "edgert_packed_map: bad arguments (need b, shape with n, k, "
                                 "group > 0, data, size > 0 and out)");
        return EDGERT_E_USAGE;
    }
    if (er_check_unknown_tail(shape, shape->struct_size, sizeof *shape,
                              "edgert_packed_map: shape", "edgert_qweights", err,
                              err_len) != EDGERT_OK)
        return EDGERT_E_USAGE;
    *out = NULL;
    const er_cand *c = b->cand;
    const char *tensor = shape->name ? shape->name : "weights";
    if ((uintptr_t)data % EDGERT_PACKED_ALIGN != 0) {
        edgert_errf(err, err_len, "%s: map %s [%u x %u]: data at %p are not aligned to %u "
                                 "bytes (EDGERT_PACKED_ALIGN)",
                    c->m.name, tensor, shape->n, shape->k, data, EDGERT_PACKED_ALIGN);
        return EDGERT_E_USAGE;
    }
    if (!c->packed_layout) {
        edgert_errf(err, err_len, "%s: cannot map packed weights (the plugin has no mappable "
                                 "packed layout: plugin ABI 2, EDGERT_PACKED_MAPPABLE)",
                    c->m.name);
        return EDGERT_E_UNSUPPORTED;
    }
    /* The plugin gets the shape only: never the caller's buffers. */
    edgert_qweights q = {.struct_size = sizeof q, .n = shape->n, .k = shape->k,
                         .group = shape->group, .name = shape->name};
    edgert_packed *p = calloc(1, sizeof *p);
    if (!p) {
        edgert_errf(err, err_len, "out of memory");
        return EDGERT_E_NOMEM;
    }
    p->b = b;
    p->bytes = size;
    p->n = shape->n;
    p->k = shape->k;
    edgert_status st = take_perm(p, shape, "edgert_packed_map", err, err_len);
    if (st != EDGERT_OK) {
        free(p);
        return st;
    }
    char perr[512] = "";
    st = c->plugin->packed_map(b->state, &q, data, size, &p->handle, perr,
                                             sizeof perr);
    perr[sizeof perr - 1] = '\0';
    if (st == EDGERT_OK && !p->handle)
        st = EDGERT_E_PLUGIN; /* fail closed: no handle is no success */
    if (st != EDGERT_OK) {
        char what[256];
        snprintf(what, sizeof what, "map %s [%u x %u]", tensor, shape->n, shape->k);
        er_set_plugin_err(err, err_len, c->m.name, er_manifest_plugin_name(&c->m), what, perr, st);
        free(p->inv);
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
    free(p->inv);
    free(p);
}

/* The bytes that m rows `ld` floats apart, each `width` floats wide, span
 * from the first row's start; 0 when that is more than a pointer offset
 * holds (the last row's end would wrap). */
static size_t rows_span(size_t m, size_t ld, uint32_t width)
{
    const size_t lim = (size_t)PTRDIFF_MAX / sizeof(float);
    if (width > lim || (m > 1u && ld > (lim - width) / (m - 1u)))
        return 0;
    return ((m - 1u) * ld + width) * sizeof(float);
}

/* Whether a row of y shares a byte with a row of x (k floats of each of
 * x's rows are read, n of each of y's written). Spans apart are the usual
 * case, decided at once; else, per row of y, the first row of x that ends
 * past its start is the only one that can begin before its end. */
static int rows_overlap(const edgert_gemm_args *a, uint32_t n, uint32_t k, size_t xspan,
                        size_t yspan)
{
    const uintptr_t x0 = (uintptr_t)a->x, y0 = (uintptr_t)a->y;
    if (y0 >= x0 + xspan || x0 >= y0 + yspan)
        return 0;
    const size_t xw = (size_t)k * sizeof(float), yw = (size_t)n * sizeof(float);
    const size_t xs = a->ldx * sizeof(float), ys = a->ldy * sizeof(float); /* ldx >= k >= 1 */
    for (size_t j = 0; j < a->m; j++) {
        const uintptr_t lo = y0 + j * ys;
        const size_t i = lo < x0 + xw ? 0 : (lo - x0 - xw) / xs + 1u;
        if (i < a->m && x0 + i * xs < lo + yw)
            return 1;
    }
    return 0;
}

/* The checks edgert_gemm and every op of edgert_step make before the plugin
 * sees anything; `who` starts the message. The shape's checks are the
 * plugins' too (pk_check_gemm_args): made here, a step refuses a bad op
 * before its first op runs. */
static edgert_status gemm_check(const edgert_backend *b, const edgert_packed *p,
                                const edgert_gemm_args *a, const char *who, char *err,
                                size_t err_len)
{
    const char *bad = !b                                          ? "the backend is NULL"
                      : !p                                        ? "the weights are NULL"
                      : !a                                        ? "args is NULL"
                      : a->struct_size < EDGERT_GEMM_ARGS_V1_SIZE ? "args.struct_size is "
                                                                    "below version 1's"
                      : !a->x                                     ? "args.x is NULL"
                      : !a->y                                     ? "args.y is NULL"
                      : a->m == 0                                 ? "args.m is 0"
                                                                  : NULL;
    if (bad) {
        edgert_errf(err, err_len, "%s: bad arguments: %s", who, bad);
        return EDGERT_E_USAGE;
    }
    if (a->struct_size > sizeof *a) {
        char what[64];
        snprintf(what, sizeof what, "%s: args", who);
        if (er_check_unknown_tail(a, a->struct_size, sizeof *a, what, "edgert_gemm_args", err,
                                  err_len) != EDGERT_OK)
            return EDGERT_E_USAGE;
    }
    if (p->b != b) {
        /* The packed layout may depend on the instance's code path. */
        if (p->b->cand == b->cand)
            edgert_errf(err, err_len, "%s: weights were packed by another instance of '%s' "
                                     "(each instance packs its own: the layout may depend on "
                                     "its options); pack them with this one", who,
                        b->cand->m.name);
        else
            edgert_errf(err, err_len, "%s: weights were packed by backend '%s'; pack them "
                                     "with this one ('%s')", who, p->b->cand->m.name,
                        b->cand->m.name);
        return EDGERT_E_USAGE;
    }
    const size_t xspan = rows_span(a->m, a->ldx, p->k), yspan = rows_span(a->m, a->ldy, p->n);
    bad = a->ldx < p->k ? "args.ldx is less than k, the weights' inputs"
          : a->ldy < p->n ? "args.ldy is less than n, the weights' outputs"
          : !xspan        ? "(m - 1) * ldx + k floats overflow memory"
          : !yspan        ? "(m - 1) * ldy + n floats overflow memory"
          : rows_overlap(a, p->n, p->k, xspan, yspan)
              ? "args.y overlaps args.x (the output must not share memory with the activations)"
              : NULL;
    if (bad) {
        edgert_errf(err, err_len, "%s: bad arguments [m=%u n=%u k=%u ldx=%zu ldy=%zu]: %s", who,
                    (unsigned)a->m, (unsigned)p->n, (unsigned)p->k, a->ldx, a->ldy, bad);
        return EDGERT_E_USAGE;
    }
    return EDGERT_OK;
}

/* Act order: the caller's rows of x with their columns in the weights'
 * order, xg[r][inv[i]] = x[r][i], k floats a row (malloc'd: the caller
 * frees it; NULL when out of memory). x is read in order, the scattered
 * stores land in the copy. The copy costs a decode step what moving its
 * lines between the cores costs (it is written here, read by the backend's
 * workers): SmolLM2's step on avx2-w4a16, 1.01-1.05x (bench
 * --versus-weights, Zen 3); a caller that makes x itself can write it in
 * the weights' order instead and pack them without perm, as the model
 * runner does (runner/load.c). */
static float *gather(const edgert_packed *p, const edgert_gemm_args *a)
{
    float *xg = malloc((size_t)a->m * p->k * sizeof *xg);
    for (size_t r = 0; xg && r < a->m; r++) {
        const float *xr = a->x + r * a->ldx;
        float *d = xg + r * p->k;
        for (uint32_t i = 0; i < p->k; i++)
            d[p->inv[i]] = xr[i];
    }
    return xg;
}

/* The next op's order into the cache while this op runs: a step streams
 * more weights than the last-level cache holds, so each order left it since
 * the last step and a gather would wait for its every line; they are asked
 * for here, the GEMM's time before they are read. */
static void prefetch_order(const edgert_packed *p)
{
    const char *at = p && p->inv ? (const char *)p->inv : NULL;
    for (size_t o = 0; at && o < (size_t)p->k * sizeof *p->inv; o += 64)
        __builtin_prefetch(at + o, 0, 3);
}

static edgert_status gemm_run(edgert_backend *b, const edgert_packed *p, const edgert_gemm_args *a,
                              char *err, size_t err_len)
{
    edgert_gemm_args ga;
    float *xg = NULL;
    if (p->inv) {
        if (!(xg = gather(p, a))) {
            edgert_errf(err, err_len, "out of memory (act order: %u x %u activations)",
                        (unsigned)a->m, (unsigned)p->k);
            return EDGERT_E_NOMEM;
        }
        ga = (edgert_gemm_args){.struct_size = sizeof ga, .m = a->m, .x = xg, .ldx = p->k,
                                .y = a->y, .ldy = a->ldy};
        a = &ga;
    }
    char perr[512] = "";
    edgert_status st = b->cand->plugin->gemm(b->state, p->handle, a, perr, sizeof perr);
    free(xg);
    perr[sizeof perr - 1] = '\0'; /* whatever the plugin wrote */
    if (st != EDGERT_OK)
        er_set_plugin_err(err, err_len, b->cand->m.name, er_manifest_plugin_name(&b->cand->m),
                          "gemm", perr, st);
    return st;
}

edgert_status edgert_gemm(edgert_backend *b, const edgert_packed *p, const edgert_gemm_args *a,
                          char *err, size_t err_len)
{
    edgert_status st = gemm_check(b, p, a, "edgert_gemm", err, err_len);
    return st != EDGERT_OK ? st : gemm_run(b, p, a, err, err_len);
}

/* Op i of a step: the array's stride is ops[0].struct_size, read once as
 * the step starts (a callback may change the caller's array, op 0's size
 * included: every later op is found by the stride checked). */
static const edgert_step_op *step_op(const edgert_step_op *ops, size_t i, size_t stride)
{
    return (const edgert_step_op *)(const void *)((const char *)ops + i * stride);
}

/* Every op checked before the first runs. */
static edgert_status step_check(const edgert_backend *b, const edgert_step_op *ops, size_t count,
                                char *err, size_t err_len)
{
    if (!b || (count > 0 && !ops)) {
        edgert_errf(err, err_len, "edgert_step: bad arguments (need b, and ops when count > 0)");
        return EDGERT_E_USAGE;
    }
    if (count > 0 && ops[0].struct_size < EDGERT_STEP_OP_V1_SIZE) {
        edgert_errf(err, err_len, "edgert_step: op 0: struct_size %u is less than version 1's %zu",
                    (unsigned)ops[0].struct_size, (size_t)EDGERT_STEP_OP_V1_SIZE);
        return EDGERT_E_USAGE;
    }
    /* the stride of an array of more than one: sizeof of some version of
     * the struct, so a multiple of its alignment (V1_SIZE alone need not be) */
    if (count > 1 && ops[0].struct_size % _Alignof(edgert_step_op) != 0) {
        edgert_errf(err, err_len, "edgert_step: struct_size %u is not the size of an "
                    "edgert_step_op (it is the array's stride): set it to "
                    "sizeof(edgert_step_op)", (unsigned)ops[0].struct_size);
        return EDGERT_E_USAGE;
    }
    for (size_t i = 0; i < count; i++) {
        const edgert_step_op *op = step_op(ops, i, ops[0].struct_size);
        char who[64];
        snprintf(who, sizeof who, "edgert_step: op %zu", i);
        if (op->struct_size != ops[0].struct_size) {
            edgert_errf(err, err_len, "%s: struct_size %u differs from op 0's %u (one array, "
                                     "one size)", who, (unsigned)op->struct_size,
                        (unsigned)ops[0].struct_size);
            return EDGERT_E_USAGE;
        }
        if (er_check_unknown_tail(op, op->struct_size, sizeof *op, who, "edgert_step_op", err,
                                  err_len) != EDGERT_OK)
            return EDGERT_E_USAGE;
        edgert_status st = gemm_check(b, op->weights, op->args, who, err, err_len);
        if (st != EDGERT_OK)
            return st;
    }
    return EDGERT_OK;
}

edgert_status edgert_step(edgert_backend *b, const edgert_step_op *ops, size_t count, char *err,
                          size_t err_len)
{
    edgert_status st = step_check(b, ops, count, err, err_len);
    const size_t stride = st == EDGERT_OK && count > 0 ? ops[0].struct_size : 0;
    for (size_t i = 0; st == EDGERT_OK && i < count; i++) {
        const edgert_step_op *op = step_op(ops, i, stride);
        /* the next op's packed bytes, where the plugin exposes them (ABI 2) */
        const void *next = NULL;
        size_t next_len = 0;
        const edgert_step_op *after = i + 1u < count ? step_op(ops, i + 1u, stride) : NULL;
        if (after && b->cand->packed_layout &&
            edgert_packed_data(after->weights, &next, &next_len, NULL, 0) != EDGERT_OK)
            next = NULL;
        /* again as it starts: its args are read now, and a callback before
         * it may have changed them (op 0 was checked just above); the
         * message is written only for an op that fails */
        if (i > 0 && gemm_check(b, op->weights, op->args, "", NULL, 0) != EDGERT_OK) {
            char who[64];
            snprintf(who, sizeof who, "edgert_step: op %zu", i);
            st = gemm_check(b, op->weights, op->args, who, err, err_len);
            break;
        }
        char gerr[1024] = "";
        if (after)
            prefetch_order(after->weights);
        er_pool_readahead(next, next_len);
        st = gemm_run(b, op->weights, op->args, gerr, sizeof gerr);
        er_pool_readahead(NULL, 0);
        if (st != EDGERT_OK) {
            edgert_errf(err, err_len, "edgert_step: op %zu: %s", i, gerr);
            break;
        }
        if (op->after && (st = op->after(op->user, i)) != EDGERT_OK)
            edgert_errf(err, err_len, "edgert_step: the callback after op %zu returned %s", i,
                        edgert_status_name(st));
    }
    return st;
}

er_cand *er_backend_cand(const edgert_backend *b)
{
    return b ? b->cand : NULL;
}
