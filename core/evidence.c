/*
 * core/evidence.c — figures measured on this device, kept between runs.
 *
 * `edgert calibrate` measures every eligible backend and stores the results
 * here; every later handle reads them so the selector ranks by what this
 * device did rather than by what a manifest claims. An entry counts only
 * for the same device (fingerprint of the probe's facts) and the same plugin
 * file (XXH3 of the library): a rebuilt plugin or another machine starts
 * from first contact's quick figures and the declared ones again (and the
 * selector then compares that plugin's whole tier by quick figures:
 * core/selector.c).
 *
 * The file is JSON (read back with libyaml: JSON is YAML):
 *   {"evidence_version": 1, "entries": [
 *     {"device": "<hex>", "device_name": "...", "backend": "ref-w4a16",
 *      "plugin_xxh3": "<hex>", "decode_tokens_per_s": 3.2, "prefill_gflops": 20.1,
 *      "top1_agreement": 1, "kl_mean": 1.2e-05, "sqnr_min_db": 19.8,
 *      "decode_tokens_per_s_min": 3.1, "decode_tokens_per_s_max": 3.3,
 *      "top1_tokens": 64,
 *      "threads": 2, "correct": 1, "workload": "spark-1.7b",
 *      "measured_at": "2026-11-29T10:00:00Z",
 *      "series": "2026-11-29T10:00:00.123456789Z/4711",
 *      "edgert_version": "0.1.0"}, ...]}
 * Strings are written with every character libyaml's reader refuses or
 * folds (controls, DEL, C1, U+2028/9, U+FEFF, U+FFFE/F) as \u escapes and
 * invalid UTF-8 as U+FFFD, so whatever a name holds the file reads back.
 * A corrupt, oversized or other-version file is reported as a warning and
 * ignored when read, never fatal; edgert_evidence_store moves it aside
 * (evidence.json.corrupt-<UTC time>, never overwriting anything) and starts
 * a new file. A merge never drops a failed verify (correct: 0) silently: an
 * entry without a verdict keeps the old failure of the same plugin file, and
 * every other old entry that is replaced or dropped is logged.
 * decode_tokens_per_s_min/max (the rounds' range, which the selector
 * compares: core/selector.c) were added later in version 1: a file without
 * them reads as figures without a range, and a reader that predates them
 * ignores them.
 *
 * `top1_tokens` (likewise) is the token count of top1_agreement, which tells
 * a difference of top-1 from sampling noise (core/selector.c).
 *
 * `series` (added later in version 1, likewise) names the store call that
 * wrote an entry: one `edgert calibrate` run, whose interleaved rounds put
 * every backend in the same memory-bandwidth windows. Entries of different
 * series were measured in different windows (on the 2-core Xeon the read
 * ceiling was 29-34 GB/s in one session, 32-40 in others), so
 * the selector compares a tier by calibrate's figures only when they are
 * one series. An old entry without it counts as the series of its
 * measured_at, which one store call writes alike into all its entries.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "context.h"
#include "json_string.h"

#define ER_EVIDENCE_VERSION 1

/* ---- where, and for which device ---------------------------------------- */

static void fingerprint(struct edgert_ctx *ctx)
{
    const edgert_device *d = &ctx->dev;
    char facts[1024];
    int n = snprintf(facts, sizeof facts, "arch=%s;class=%s;flags=%016llx;osdis=%016llx;cores=%u;"
                     "name=%s;mem_gib=%llu",
                     edgert_arch_name(d->arch), edgert_device_class_name(d->device_class),
                     (unsigned long long)d->cpu_flags, (unsigned long long)d->cpu_flags_os_disabled,
                     d->logical_cores, d->name,
                     (unsigned long long)((d->mem_total_bytes + (1ull << 29)) >> 30));
    XXH64_hash_t h = XXH3_64bits(facts, n > 0 ? (size_t)n : 0);
    snprintf(ctx->fingerprint, sizeof ctx->fingerprint, "%016llx", (unsigned long long)h);
}

void er_evidence_init(struct edgert_ctx *ctx, const edgert_options *o)
{
    fingerprint(ctx);
    if (o->evidence_file) {
        ctx->evidence_path = er_strdup(o->evidence_file);
        return;
    }
    /* The cache is per user: read the variables even in hermetic mode only
     * when the caller did not ask to ignore the environment. */
    const char *xdg = er_getenv(o->ignore_env, "XDG_CACHE_HOME");
    const char *home = er_getenv(o->ignore_env, "HOME");
    if (xdg && xdg[0] == '/')
        ctx->evidence_path = er_path_join(xdg, "edgert/evidence.json");
    else if (home && home[0] == '/')
        ctx->evidence_path = er_path_join(home, ".cache/edgert/evidence.json");
}

const char *edgert_evidence_path(const edgert_ctx *ctx)
{
    return ctx ? ctx->evidence_path : NULL;
}

const char *edgert_device_fingerprint(const edgert_ctx *ctx)
{
    return ctx ? ctx->fingerprint : NULL;
}

/* ---- reading --------------------------------------------------------------- */

static double num(er_yaml *y, yaml_node_t *map, const char *key)
{
    yaml_node_t *v = er_yaml_get(y, map, key);
    if (!v || v->type != YAML_SCALAR_NODE)
        return NAN;
    char *end;
    const char *s = (const char *)v->data.scalar.value;
    double x = strtod(s, &end);
    return (*s && !*end && isfinite(x)) ? x : NAN;
}

static const char *str(er_yaml *y, yaml_node_t *map, const char *key)
{
    yaml_node_t *v = er_yaml_get(y, map, key);
    return (v && v->type == YAML_SCALAR_NODE) ? (const char *)v->data.scalar.value : NULL;
}

/* Load and check the file's shape; NULL root (and a warning) when unusable.
 * *unreadable says whether a file was there but could not be used. */
static yaml_node_t *load(struct edgert_ctx *ctx, er_yaml *y, const char *path, int quiet_missing,
                         int *unreadable)
{
    struct stat st;
    *unreadable = 0;
    if (stat(path, &st) != 0) {
        if (!quiet_missing)
            er_diag_add(&ctx->diags, EDGERT_LOG_INFO, path, 0, 0, "no evidence file yet");
        return NULL;
    }
    *unreadable = 1;
    er_diags local = {0};
    if (er_yaml_load(y, path, &local) != EDGERT_OK) {
        char msg[1024];
        er_diag_last_error(&local, 0, msg, sizeof msg);
        er_diag_add(&ctx->diags, EDGERT_LOG_WARN, path, 0, 0,
                    "evidence file is corrupt and is ignored (%s); the next 'edgert calibrate' "
                    "moves it aside and starts a new one", msg);
        er_diags_free(&local);
        return NULL;
    }
    er_diags_free(&local);
    yaml_node_t *root = er_yaml_root(y);
    yaml_node_t *entries = er_yaml_get(y, root, "entries");
    double version = num(y, root, "evidence_version");
    if (root->type != YAML_MAPPING_NODE || !entries || entries->type != YAML_SEQUENCE_NODE ||
        version != ER_EVIDENCE_VERSION) {
        er_diag_add(&ctx->diags, EDGERT_LOG_WARN, path, er_yaml_line(root), er_yaml_col(root),
                    "not an edgert evidence file of version %d; ignored (the next 'edgert "
                    "calibrate' moves it aside and starts a new one)", ER_EVIDENCE_VERSION);
        er_yaml_free(y);
        return NULL;
    }
    *unreadable = 0;
    return entries;
}

static int library_hash(const er_cand *c, char out[17])
{
    uint64_t h;
    if (!c->m.library_path || er_file_xxh3(c->m.library_path, &h) != 0)
        return -1;
    snprintf(out, 17, "%016llx", (unsigned long long)h);
    return 0;
}

void er_evidence_apply(struct edgert_ctx *ctx)
{
    if (ctx->no_evidence || ctx->dev.planned || !ctx->evidence_path)
        return;
    er_yaml y;
    int unreadable;
    yaml_node_t *entries = load(ctx, &y, ctx->evidence_path, 0, &unreadable);
    if (!entries)
        return;
    for (size_t i = 0; i < ctx->ncands; i++) {
        er_cand *c = ctx->cands[i];
        char hash[17];
        if (!c->pub.eligible || library_hash(c, hash) != 0)
            continue;
        for (yaml_node_item_t *it = entries->data.sequence.items.start;
             it < entries->data.sequence.items.top; it++) {
            yaml_node_t *e = er_yaml_node(&y, *it);
            const char *dev = str(&y, e, "device"), *be = str(&y, e, "backend"),
                       *ph = str(&y, e, "plugin_xxh3");
            if (!dev || !be || !ph || strcmp(dev, ctx->fingerprint) != 0 ||
                strcmp(be, c->m.name) != 0)
                continue;
            if (strcmp(ph, hash) != 0) {
                er_diag_add(&ctx->diags, EDGERT_LOG_INFO, ctx->evidence_path, er_yaml_line(e),
                            er_yaml_col(e),
                            "evidence for %s was measured with another build of its plugin; "
                            "ignored (run 'edgert calibrate' again)", c->m.name);
                continue;
            }
            c->pub.measured.decode_tokens_per_s = num(&y, e, "decode_tokens_per_s");
            c->pub.measured.prefill_gflops = num(&y, e, "prefill_gflops");
            c->pub.measured.top1_agreement = num(&y, e, "top1_agreement");
            c->pub.measured.kl_mean = num(&y, e, "kl_mean");
            double tokens = num(&y, e, "top1_tokens");
            c->pub.measured_top1_tokens =
                tokens >= 1.0 && tokens <= 1e9 && tokens == floor(tokens) ? (unsigned)tokens : 0u;
            c->pub.measured.where = ctx->evidence_path;
            c->calibrated = 1;
            const char *series = str(&y, e, "series");
            if (!series || !series[0])
                series = str(&y, e, "measured_at"); /* written before series were */
            free(c->series);
            c->series = series && series[0] ? er_strdup(series) : NULL;
            c->pub.measured_series = c->series;
            double lo = num(&y, e, "decode_tokens_per_s_min"),
                   hi = num(&y, e, "decode_tokens_per_s_max"),
                   v = c->pub.measured.decode_tokens_per_s;
            int ranged = er_is_range(lo, v, hi);
            c->pub.measured_decode_min = ranged ? lo : NAN;
            c->pub.measured_decode_max = ranged ? hi : NAN;
            /* Evidence that the backend computes wrong results on this device
             * is a gate, like a failed self-test. */
            if (num(&y, e, "correct") == 0.0) {
                er_cand_reason(c, ER_GATE_FAILED_VERIFY, "FAILED_VERIFY");
                er_cand_detail(c, "'edgert verify' found wrong results on this device (%s)",
                               ctx->evidence_path);
                c->pub.eligible = 0;
            }
        }
    }
    er_yaml_free(&y);
}

/* ---- writing ------------------------------------------------------------------ */

/* A JSON string its reader (libyaml: JSON is YAML) gives back as written:
 * the tree's one JSON string writer (core/json_string.h). */
static void jstr(FILE *f, const char *s)
{
    json_write_string(f, s);
}

static void jnum(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
}

/* Copy an old entry through, field by field (only the fields we know). */
static void copy_entry(FILE *f, er_yaml *y, yaml_node_t *e)
{
    static const char *const strs[] = {"device", "device_name", "backend", "plugin_xxh3",
                                       "workload", "measured_at", "series", "edgert_version"};
    static const char *const nums[] = {"decode_tokens_per_s", "prefill_gflops", "top1_agreement",
                                       "kl_mean", "sqnr_min_db", "threads", "correct",
                                       "decode_tokens_per_s_min", "decode_tokens_per_s_max",
                                       "top1_tokens"};
    fputs("    {", f);
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        fprintf(f, "%s\"%s\": ", i ? ", " : "", strs[i]);
        jstr(f, str(y, e, strs[i]));
    }
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        fprintf(f, ", \"%s\": ", nums[i]);
        jnum(f, num(y, e, nums[i]));
    }
    fputs("}", f);
}

static int mkdir_p(const char *dir)
{
    char *p = er_strdup(dir);
    if (!p)
        return -1;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST) {
            free(p);
            return -1;
        }
        *s = '/';
    }
    int rc = (mkdir(p, 0700) == 0 || errno == EEXIST) ? 0 : -1;
    free(p);
    return rc;
}

/* Item i of the caller's array, whose elements are items[0].struct_size
 * bytes apart (a caller built against an older, smaller struct still works;
 * edgert_evidence_store checked that size covers version 1). */
static const edgert_evidence *item(const edgert_evidence *items, size_t i)
{
    return (const edgert_evidence *)(const void *)((const char *)items +
                                                   i * (size_t)items[0].struct_size);
}

/* Hash every plugin first: an entry without its plugin's hash is useless.
 * A malloc'd array of `count` hex hashes, or NULL with err set. */
static char (*hash_plugins(edgert_ctx *ctx, const edgert_evidence *items, size_t count,
                           edgert_status *st, char *err, size_t err_len))[17]
{
    char (*hashes)[17] = calloc(count ? count : 1, sizeof *hashes);
    if (!hashes) {
        edgert_errf(err, err_len, "out of memory");
        *st = EDGERT_E_NOMEM;
        return NULL;
    }
    for (size_t i = 0; i < count; i++) {
        const er_cand *c = er_cand_find(ctx, item(items, i)->backend);
        if (!c || library_hash(c, hashes[i]) != 0) {
            edgert_errf(err, err_len, "evidence for '%s': no such backend with a readable library",
                        item(items, i)->backend ? item(items, i)->backend : "(null)");
            *st = EDGERT_E_NOT_FOUND;
            free(hashes);
            return NULL;
        }
    }
    return hashes;
}

/* A note about the evidence file that the caller should see even after
 * edgert_open: a diagnostic, and the log. */
static void note(edgert_ctx *ctx, edgert_log_level level, const char *path, unsigned line,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void note(edgert_ctx *ctx, edgert_log_level level, const char *path, unsigned line,
                 const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    er_diag_add(&ctx->diags, level, path, line, 0, "%s", msg);
    if (line)
        er_log(ctx, level, "%s:%u: %s", path, line, msg);
    else
        er_log(ctx, level, "%s: %s", path, msg);
}

/* An old failed verify (correct: 0) that new item e replaces: a pass or a
 * new failure replaces it; figures without a verdict for the same plugin
 * file keep it (*verdict = 0); for another build of the plugin it goes, with
 * a warning like everything else that drops a failure. */
static void replace_failure(edgert_ctx *ctx, const char *path, er_yaml *y, yaml_node_t *old,
                            const edgert_evidence *e, const char *hash, int *verdict)
{
    const char *ph = str(y, old, "plugin_xxh3"), *when = str(y, old, "measured_at");
    unsigned line = er_yaml_line(old);
    if (e->correct == 0)
        return;
    if (e->correct > 0)
        note(ctx, EDGERT_LOG_INFO, path, line, "the failed verify of %s recorded %s is replaced "
             "by a pass", e->backend, when ? when : "earlier");
    else if (ph && strcmp(ph, hash) == 0) {
        *verdict = 0;
        note(ctx, EDGERT_LOG_WARN, path, line, "%s: the new figures carry no verify verdict; the "
             "failed verify recorded %s is kept (run 'edgert verify' to decide again)",
             e->backend, when ? when : "earlier");
    } else
        note(ctx, EDGERT_LOG_WARN, path, line, "%s: the failed verify recorded %s for another "
             "build of its plugin is dropped (the plugin file has changed)", e->backend,
             when ? when : "earlier");
}

/* The old file's entries that the new ones do not replace (same device and
 * backend), copied as they were; what replacing a failed verify means is
 * decided per item in verdict[]. An entry that cannot be kept (no device or
 * backend) is dropped with a warning. Returns whether anything was written. */
static int write_kept(FILE *f, edgert_ctx *ctx, const char *path, er_yaml *y, yaml_node_t *old,
                      const edgert_evidence *items, size_t count, char (*hashes)[17],
                      int *verdict)
{
    int first = 1;
    for (yaml_node_item_t *it = old->data.sequence.items.start; it < old->data.sequence.items.top;
         it++) {
        yaml_node_t *e = er_yaml_node(y, *it);
        const char *dev = str(y, e, "device"), *be = str(y, e, "backend");
        int failed = num(y, e, "correct") == 0.0;
        if (!dev || !be) {
            note(ctx, EDGERT_LOG_WARN, path, er_yaml_line(e), "an entry without device or "
                 "backend cannot be kept and is dropped%s", failed ? " (it recorded a failed "
                 "verify)" : "");
            continue;
        }
        size_t i = 0;
        while (i < count && (strcmp(dev, ctx->fingerprint) != 0 ||
                             strcmp(be, item(items, i)->backend) != 0))
            i++;
        if (i < count) {
            if (failed)
                replace_failure(ctx, path, y, e, item(items, i), hashes[i], &verdict[i]);
            continue;
        }
        fputs(first ? "" : ",\n", f);
        copy_entry(f, y, e);
        first = 0;
    }
    return !first;
}

/* The range of e's decode median, when the caller's struct has one (it
 * covers version 2's fields) and it brackets the median: else NaN, NaN. */
static void decode_range(const edgert_evidence *e, uint32_t struct_size, double *lo, double *hi)
{
    *lo = *hi = NAN;
    if (struct_size < offsetof(edgert_evidence, decode_tokens_per_s_max) + sizeof(double))
        return;
    if (er_is_range(e->decode_tokens_per_s_min, e->decode_tokens_per_s,
                 e->decode_tokens_per_s_max)) {
        *lo = e->decode_tokens_per_s_min;
        *hi = e->decode_tokens_per_s_max;
    }
}

static void write_entry(FILE *f, edgert_ctx *ctx, const edgert_evidence *e, uint32_t struct_size,
                        const char *hash, const char *when, const char *series, int correct)
{
    fputs("\"device\": ", f);
    jstr(f, ctx->fingerprint);
    fputs(", \"device_name\": ", f);
    jstr(f, ctx->dev.name);
    fputs(", \"backend\": ", f);
    jstr(f, e->backend);
    fputs(", \"plugin_xxh3\": ", f);
    jstr(f, hash);
    fputs(", \"workload\": ", f);
    jstr(f, e->workload ? e->workload : "");
    fputs(", \"measured_at\": ", f);
    jstr(f, when);
    fputs(", \"series\": ", f);
    jstr(f, series);
    fputs(", \"edgert_version\": ", f);
    jstr(f, EDGERT_VERSION_STRING);
    const char *names[] = {"decode_tokens_per_s", "prefill_gflops", "top1_agreement", "kl_mean",
                           "sqnr_min_db"};
    double vals[] = {e->decode_tokens_per_s, e->prefill_gflops, e->top1_agreement, e->kl_mean,
                     e->sqnr_min_db};
    for (size_t k = 0; k < 5; k++) {
        fprintf(f, ", \"%s\": ", names[k]);
        jnum(f, vals[k]);
    }
    fprintf(f, ", \"threads\": %u", e->threads);
    if (correct >= 0)
        fprintf(f, ", \"correct\": %d", correct ? 1 : 0);
    else
        fputs(", \"correct\": null", f);
    double lo, hi;
    decode_range(e, struct_size, &lo, &hi);
    fputs(", \"decode_tokens_per_s_min\": ", f);
    jnum(f, lo);
    fputs(", \"decode_tokens_per_s_max\": ", f);
    jnum(f, hi);
    /* appended later in version 1 too: only when the caller's struct has it */
    unsigned tokens = struct_size >= offsetof(edgert_evidence, top1_tokens) + sizeof(unsigned)
                          ? e->top1_tokens
                          : 0u;
    fputs(", \"top1_tokens\": ", f);
    jnum(f, tokens ? (double)tokens : NAN);
    fputs("}", f);
}

/* The whole new file: the old entries kept, then the new ones. */
static void write_all(FILE *f, edgert_ctx *ctx, const char *path, er_yaml *y, yaml_node_t *old,
                      const edgert_evidence *items, size_t count, char (*hashes)[17],
                      int *verdict)
{
    char when[32], stamp[32], series[64];
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    /* this call's entries, and no other call's: the time to the nanosecond
     * and the process */
    snprintf(series, sizeof series, "%s.%09ldZ/%ld", stamp, (long)now.tv_nsec, (long)getpid());
    for (size_t i = 0; i < count; i++)
        verdict[i] = item(items, i)->correct < 0 ? -1 : item(items, i)->correct != 0;
    fprintf(f, "{\"evidence_version\": %d, \"entries\": [\n", ER_EVIDENCE_VERSION);
    int first = !(old && write_kept(f, ctx, path, y, old, items, count, hashes, verdict));
    for (size_t i = 0; i < count; i++, first = 0) {
        fputs(first ? "    {" : ",\n    {", f);
        write_entry(f, ctx, item(items, i), items[0].struct_size, hashes[i], when, series,
                    verdict[i]);
    }
    fputs("\n]}\n", f);
}

/* A file that cannot be read as evidence is moved out of the way, never
 * over another file: <path>.corrupt-<UTC time>, else with -2, -3, ... after
 * it. 0, or -1 with err set (and the file left where it was). */
static int move_aside(edgert_ctx *ctx, const char *path, char *err, size_t err_len)
{
    char when[32], *aside = NULL;
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof when, "%Y%m%dT%H%M%SZ", gmtime_r(&now, &tm));
    int e = ENOMEM;
    for (unsigned n = 1; n <= 100; n++) {
        char suffix[16] = "";
        if (n > 1)
            snprintf(suffix, sizeof suffix, "-%u", n);
        if (asprintf(&aside, "%s.corrupt-%s%s", path, when, suffix) < 0) {
            aside = NULL;
            break;
        }
        int rc = renameat2(AT_FDCWD, path, AT_FDCWD, aside, RENAME_NOREPLACE);
        if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) { /* no NOREPLACE here */
            rc = link(path, aside); /* fails with EEXIST too; the rename replaces path */
            if (rc == 0)
                unlink(path);
        }
        if (rc == 0) {
            note(ctx, EDGERT_LOG_WARN, path, 0, "the evidence file cannot be read; moved aside "
                 "to %s, a new one is started", aside);
            free(aside);
            return 0;
        }
        e = errno;
        free(aside);
        aside = NULL;
        if (e != EEXIST)
            break;
    }
    edgert_errf(err, err_len, "the evidence file %s cannot be read and cannot be moved aside "
                "(%s); it is left as it was, nothing is stored", path, strerror(e));
    return -1;
}

/* Flush, sync and close f (always closed), then rename tmp over path. */
static edgert_status commit_file(FILE *f, const char *tmp, const char *path, char *err,
                                 size_t err_len)
{
    int bad = fflush(f) != 0 || fsync(fileno(f)) != 0 || ferror(f);
    if (fclose(f) != 0 || bad) {
        edgert_errf(err, err_len, "cannot write %s: %s", tmp, strerror(errno));
        return EDGERT_E_IO;
    }
    if (rename(tmp, path) != 0) {
        edgert_errf(err, err_len, "cannot replace %s: %s", path, strerror(errno));
        return EDGERT_E_IO;
    }
    return EDGERT_OK;
}

/* The arguments of edgert_evidence_store; EDGERT_OK or EDGERT_E_USAGE. */
static edgert_status check_store(edgert_ctx *ctx, const char **path, const edgert_evidence *items,
                                 size_t count, char *err, size_t err_len)
{
    if (!ctx || (!items && count)) {
        edgert_errf(err, err_len, "edgert_evidence_store: bad arguments");
        return EDGERT_E_USAGE;
    }
    for (size_t i = 0; i < count; i++) {
        if (items[0].struct_size < EDGERT_EVIDENCE_V1_SIZE || !item(items, i)->backend) {
            edgert_errf(err, err_len, "edgert_evidence_store: item %zu: struct_size %u is too "
                                      "small (set it to sizeof(edgert_evidence)) or backend is "
                                      "NULL", i, items[0].struct_size);
            return EDGERT_E_USAGE;
        }
    }
    if (ctx->dev.planned) {
        edgert_errf(err, err_len, "evidence is measured on this device; a plan handle (--device) "
                                  "cannot store it");
        return EDGERT_E_USAGE;
    }
    if (!*path)
        *path = ctx->evidence_path;
    if (!*path) {
        edgert_errf(err, err_len, "no evidence file: set XDG_CACHE_HOME or HOME, or give a path");
        return EDGERT_E_USAGE;
    }
    return EDGERT_OK;
}

/* Writes a temporary file next to `path` (old entries kept, the new ones
 * replacing theirs), then renames it over `path`: an interrupted write never
 * leaves a corrupt file, and a failed one leaves nothing behind. An old file
 * that cannot be read is moved aside first. */
edgert_status edgert_evidence_store(edgert_ctx *ctx, const char *path, const edgert_evidence *items,
                                    size_t count, char *err, size_t err_len)
{
    edgert_status st = check_store(ctx, &path, items, count, err, err_len);
    char *dir = NULL, *tmp = NULL;
    char (*hashes)[17] = NULL;
    int *verdict = NULL;
    FILE *f = NULL;
    yaml_node_t *old = NULL;
    er_yaml y;
    if (st != EDGERT_OK)
        return st;
    hashes = hash_plugins(ctx, items, count, &st, err, err_len);
    if (!hashes)
        return st;
    st = EDGERT_E_IO;

    char *slash = strrchr(path, '/');
    dir = slash ? strndup(path, (size_t)(slash - path)) : er_strdup(".");
    if (!dir || (dir[0] && mkdir_p(dir) != 0)) {
        edgert_errf(err, err_len, "cannot create the folder of %s: %s", path, strerror(errno));
        goto out;
    }
    int unreadable = 0;
    old = load(ctx, &y, path, 1, &unreadable);
    if (unreadable && move_aside(ctx, path, err, err_len) != 0)
        goto out;
    verdict = calloc(count ? count : 1, sizeof *verdict);
    if (!verdict || asprintf(&tmp, "%s/.evidence.json.XXXXXX", dir[0] ? dir : "/") < 0) {
        tmp = NULL;
        st = EDGERT_E_NOMEM;
        goto out;
    }
    int fd = mkstemp(tmp);
    if (fd < 0 || !(f = fdopen(fd, "w"))) {
        edgert_errf(err, err_len, "cannot write in %s: %s", dir, strerror(errno));
        if (fd >= 0)
            close(fd);
        goto out;
    }
    write_all(f, ctx, path, &y, old, items, count, hashes, verdict);
    st = commit_file(f, tmp, path, err, err_len);
    f = NULL;
out:
    if (f)
        fclose(f);
    if (tmp && st != EDGERT_OK)
        unlink(tmp); /* never leave a partial file behind */
    free(tmp);
    if (old)
        er_yaml_free(&y);
    free(dir);
    free(hashes);
    free(verdict);
    return st;
}
