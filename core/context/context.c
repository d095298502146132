/*
 * core/context/context.c — the handle: edgert_open, the spine that runs the steps of
 * the data flow in order (each in its own file), edgert_close, and the
 * read-only accessors of what the steps found.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/contention.h"
#include "context/context.h"
#include "probe/probe.h"
#include "formats/yamldoc.h"
#include "discover/discover.h"
#include "gate/gate.h"
#include "load/load.h"
#include "sandbox/sandbox.h"
#include "evidence/evidence.h"
#include "weights/checkpoint.h"

/* The handle's log: the integrator's callback, else stderr, at the level
 * options or EDGERT_LOG_LEVEL set. Every step logs through it (and a
 * plugin, through the host table: load/host.c). */
void er_log(struct edgert_ctx *ctx, edgert_log_level lvl, const char *fmt, ...)
{
    if ((int)lvl > ctx->log_level)
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (ctx->log)
        ctx->log(ctx->log_user, lvl, buf);
    else
        fprintf(stderr, "edgert: %s\n", buf);
}

/* a ; or : list, as PATH-minded operators write, works too (names hold
 * neither: docs/manifest.md) */
#define NAME_SEPARATORS ",;: \t"

/* The names of two lists (either NULL), NULL-terminated. Commas separate
 * them, and so do blanks: an operator's "a, b" or "a b" means two names.
 * Every separator is counted, so no name is dropped for want of room. */
static char **split_names(const char *a, const char *b)
{
    size_t cap = 1;
    for (const char *s = a; s && *s; s++)
        cap += strchr(NAME_SEPARATORS, *s) != NULL;
    for (const char *s = b; s && *s; s++)
        cap += strchr(NAME_SEPARATORS, *s) != NULL;
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
        for (char *t = strtok_r(copy, NAME_SEPARATORS, &save); t;
             t = strtok_r(NULL, NAME_SEPARATORS, &save))
            if (n < cap + 1) {
                /* manifest names are lower case (manifest.c): AVX2-W4A16 means avx2-w4a16 */
                for (char *q = t; *q; q++) /* ASCII: not the caller's locale's rules */
                    *q = (char)(*q >= 'A' && *q <= 'Z' ? *q - 'A' + 'a' : *q);
                out[n++] = er_strdup(t);
            }
        free(copy);
    }
    return out;
}

static int parse_level(const char *s, int dflt)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; s && i < 4; i++)
        if (er_ascii_caseeq(s, names[i]))
            return EDGERT_LOG_ERROR + i;
    return dflt;
}

/* The caller's settings, with the environment where the options leave it. */
static void configure(edgert_ctx *ctx, const edgert_options *o)
{
    ctx->ignore_env = o->ignore_env;
    ctx->strict = o->strict;
    ctx->no_evidence = o->no_evidence;
    /* appended after version 1: read only when the caller's struct has it */
    if (o->struct_size >= EDGERT_OPTIONS_V2_SIZE) {
        ctx->no_env_selection = o->no_env_selection;
        ctx->defer_load = o->defer_load;
    }
    ctx->stage_fd = -1; /* set only in the sandbox's child */
    ctx->sb_lock_fd = -1; /* held only while first contact's child runs */
    ctx->log = o->log;
    ctx->log_user = o->log_user;
    const char *env_level = er_getenv(o->ignore_env, "EDGERT_LOG");
    ctx->log_level = o->log_level ? o->log_level : parse_level(env_level, EDGERT_LOG_WARN);
    if (!o->log_level && env_level && parse_level(env_level, -1) < 0)
        er_diag_add(&ctx->diags, EDGERT_LOG_WARN, NULL, 0, 0,
                    "EDGERT_LOG=%s is not error, warn, info or debug: warn is used", env_level);
    ctx->disabled = split_names(er_getenv(o->ignore_env, "EDGERT_DISABLE"), o->disable);
    ctx->sandbox_timeout_ms =
        er_sandbox_timeout_ms(er_getenv(o->ignore_env, "EDGERT_SANDBOX_TIMEOUT"), &ctx->diags);
    /* read even with ignore_env, as the cache folders are: it says what
     * this machine is (never quiet), not what an application chose */
    const char *contention = er_getenv(0, "EDGERT_CONTENTION");
    ctx->contention_ignored = er_contention_ignored(contention) == 1;
    if (er_contention_ignored(contention) < 0)
        er_diag_add(&ctx->diags, EDGERT_LOG_WARN, NULL, 0, 0,
                    "EDGERT_CONTENTION=%s is not judge or ignore: judge is used", contention);
}

/* The device the selection is for: a profile (plan mode) or the probe (live). */
static edgert_status open_device(edgert_ctx *ctx, const edgert_options *o, char *err,
                                 size_t err_len)
{
    if (!o->device_profile) {
        /* a sysroot that is not there would probe as a device with nothing */
        struct stat root;
        if (o->sysroot && o->sysroot[0]) {
            int bad = stat(o->sysroot, &root) != 0;
            if (bad || !S_ISDIR(root.st_mode)) {
                edgert_errf(err, err_len, "sysroot %s: %s", o->sysroot,
                            bad ? strerror(errno) : "not a directory");
                return EDGERT_E_NOT_FOUND;
            }
        }
        edgert_status st = er_probe(o->sysroot, &ctx->dev, &ctx->diags);
        if (st != EDGERT_OK)
            edgert_errf(err, err_len, "probe failed: %s", edgert_status_name(st));
        return st;
    }
    size_t before = ctx->diags.count;
    edgert_status st = er_device_profile_load(o->device_profile, &ctx->dev, &ctx->diags);
    if (st != EDGERT_OK) {
        char msg[4096];
        er_diag_last_error(&ctx->diags, before, msg, sizeof msg);
        edgert_errf(err, err_len, "bad device profile:\n  %s", msg[0] ? msg : o->device_profile);
    }
    return st;
}

/* The handle's thread pool; its workers start lazily, on the first call big
 * enough to split. */
static edgert_status open_pool(edgert_ctx *ctx, const edgert_options *o, char *err,
                               size_t err_len)
{
    unsigned threads = o->threads;
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (unsigned)n : 1u;
    }
    ctx->pool = er_pool_create(threads);
    ctx->arena = er_arena_create(); /* NULL: packed weights go to the plain allocator */
    if (ctx->pool)
        return EDGERT_OK;
    edgert_errf(err, err_len, "cannot create a thread pool of %u threads", threads);
    return EDGERT_E_NOMEM;
}

/* A name in the disable list that no manifest found has is most likely a
 * misspelling (avx512_w4a8 for avx512-w4a8): the backend it meant is used,
 * so say so. */
static void warn_unknown_disabled(edgert_ctx *ctx)
{
    for (char **p = ctx->disabled; p && *p; p++) {
        if (er_cand_find(ctx, *p))
            continue;
        er_diag_add(&ctx->diags, EDGERT_LOG_WARN, NULL, 0, 0,
                    "the disable list (EDGERT_DISABLE or --disable) names '%s', which no "
                    "manifest found has: nothing was disabled by it", *p);
    }
}

/* Options that cannot mean anything: E_USAGE, said in err. An empty or NULL
 * manifest path searched nothing and opened a handle with no backend (the
 * CLI refuses --manifests ''); a log level past debug read as debug. */
static int check_options(const edgert_options *o, char *err, size_t err_len)
{
    if (o->manifest_path_count > 0 && !o->manifest_paths) {
        edgert_errf(err, err_len, "edgert_open: options.manifest_path_count is %zu but "
                    "manifest_paths is NULL", o->manifest_path_count);
        return -1;
    }
    for (size_t i = 0; i < o->manifest_path_count; i++)
        if (!o->manifest_paths[i] || !o->manifest_paths[i][0]) {
            edgert_errf(err, err_len, "edgert_open: options.manifest_paths[%zu] is %s", i,
                        o->manifest_paths[i] ? "empty" : "NULL");
            return -1;
        }
    if (o->log_level < 0 || o->log_level > EDGERT_LOG_DEBUG) {
        edgert_errf(err, err_len, "edgert_open: options.log_level %d is not an "
                    "edgert_log_level (1 error .. 4 debug) or 0 (the default)", o->log_level);
        return -1;
    }
    return 0;
}

/*
 * The data flow of architecture.md, Data flow, one step per call, each in the file named
 * after it: the device (probe.c or device_profile.c), the manifests
 * (discovery.c, manifest.c), then per candidate the gates (gate.c) and, for
 * what passed them in live mode, loading and self-test (load.c); last the
 * figures measured on this device (evidence.c). Ranking is edgert_select's
 * (selector.c), on demand.
 */
edgert_status edgert_open(const edgert_options *o, edgert_ctx **out, char *err, size_t err_len)
{
    edgert_options dflt = {.struct_size = sizeof dflt};
    if (!out) {
        edgert_errf(err, err_len, "edgert_open: out is NULL");
        return EDGERT_E_USAGE;
    }
    *out = NULL;
    if (!o)
        o = &dflt;
    if (o->struct_size < EDGERT_OPTIONS_V1_SIZE) {
        edgert_errf(err, err_len, "edgert_open: options.struct_size %u is too small (set it to "
                                  "sizeof(edgert_options))", o->struct_size);
        return EDGERT_E_USAGE;
    }
    if (er_check_unknown_tail(o, o->struct_size, sizeof *o, "edgert_open: options",
                              "edgert_options", err, err_len) != EDGERT_OK ||
        check_options(o, err, err_len) != 0)
        return EDGERT_E_USAGE;
    edgert_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        edgert_errf(err, err_len, "out of memory");
        return EDGERT_E_NOMEM;
    }
    configure(ctx, o);
    edgert_status st = open_device(ctx, o, err, err_len);
    if (st != EDGERT_OK)
        goto fail;
    er_evidence_init(ctx, o);
    st = open_pool(ctx, o, err, err_len);
    if (st != EDGERT_OK)
        goto fail;
    st = er_discover(ctx, o, err, err_len);
    if (st == EDGERT_OK && o->struct_size >= EDGERT_OPTIONS_V3_SIZE &&
        o->weights)
        st = er_weights_summary(ctx, o->weights, err, err_len);
    if (st != EDGERT_OK)
        goto fail;
    ctx->sb_batch = 1; /* first contacts, if any, under one hold of the lock */
    for (size_t i = 0; i < ctx->ncands; i++) {
        er_cand *c = ctx->cands[i];
        er_cand_publish(ctx, c);
        er_gate(ctx, c);
        if (!ctx->defer_load)
            er_load(ctx, c); /* only when every gate passed, and in live mode */
        else if (!ctx->dev.planned && !c->failed && c->lib_fd >= 0)
            er_sandbox(ctx, c, 1, NULL); /* a cached verdict, never plugin code */
        c->pub.eligible = c->failed == 0;
    }
    er_sb_batch_end(ctx);
    er_evidence_apply(ctx); /* for the same device and the same plugin files */
    warn_unknown_disabled(ctx);
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
    er_sb_batch_end(ctx); /* an open that failed while it held first contact's lock */
    for (size_t i = 0; i < ctx->ncands; i++)
        er_cand_free(ctx->cands[i]);
    free(ctx->cands);
    for (size_t i = 0; i < ctx->ndirs; i++)
        free(ctx->dirs[i].path);
    free(ctx->dirs);
    er_strlist_free(ctx->disabled);
    er_diags_free(&ctx->diags);
    er_pool_destroy(ctx->pool);
    er_arena_destroy(ctx->arena);
    free(ctx->evidence_path);
    free(ctx->weights.path);
    free(ctx->weights.packed_for);
    free(ctx->weights.first_asym);
    for (size_t i = 0; i < ctx->weights.ngroups; i++)
        free(ctx->weights.group_layer[i]);
    free(ctx->weights.groups);
    free(ctx->weights.group_layer);
    free(ctx->weights.first_partial);
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
    const er_cand *c = er_cand_find(ctx, name);
    return c ? &c->pub : NULL;
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
