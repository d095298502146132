/*
 * core/evidence/evidence.c — figures measured on this device, kept between runs.
 *
 * `edgert calibrate` measures every eligible backend and stores the results
 * here; every later handle reads them so the selector ranks by what this
 * device did rather than by what a manifest claims. An entry counts only
 * for the same device (fingerprint of the probe's facts) and the same plugin
 * file (XXH3 of the library): a rebuilt plugin or another machine starts
 * from first contact's quick figures and the declared ones again (and the
 * selector then compares that plugin's whole tier by quick figures:
 * core/select/selector.c).
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
 * compares: core/select/selector.c) were added later in version 1: a file without
 * them reads as figures without a range, and a reader that predates them
 * ignores them.
 *
 * `top1_tokens` (likewise) is the token count of top1_agreement, which tells
 * a difference of top-1 from sampling noise (core/select/selector.c).
 *
 * `series` (added later in version 1, likewise) names the store call that
 * wrote an entry: one `edgert calibrate` run, whose interleaved rounds put
 * every backend in the same memory-bandwidth windows. Entries of different
 * series were measured in different windows (on the 2-core Xeon the read
 * ceiling was 29-34 GB/s in one session, 32-40 in others), so
 * the selector compares a tier by calibrate's figures only when they are
 * one series. An old entry without it counts as the series of its
 * measured_at, which one store call writes alike into all its entries.
 *
 * `fidelity_source` (likewise; "" or absent: calibrate's verify of
 * `workload`) names what top1_agreement and kl_mean were measured on when
 * something else measured them: `edgert run --compare --store` on a model.
 * Such a store keeps the entry's other figures (keep_unmeasured), so one
 * entry can hold a calibrate run's rates, with their series and time, and
 * a model's fidelity.
 *
 * `decode_rounds_repeated` (likewise; absent or null: none) counts the
 * decode rounds calibrate measured under contention (other load taking the
 * CPUs: core/common/contention.h), set aside and measured again before the
 * rounds the rate is the median of; it goes with the rate, as its range does.
 *
 * This file reads; core/evidence/evidence_store.c writes (edgert_evidence_store).
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

#include "context/context.h"
#include "evidence/evidence.h"
#include "formats/yamldoc.h"
#include "os/trust.h"
#include "gate/gate.h"


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
    if (xdg && xdg[0] && xdg[0] != '/') /* the XDG rule, said: it was silent */
        er_diag_add(&ctx->diags, EDGERT_LOG_WARN, NULL, 0, 0,
                    "XDG_CACHE_HOME=%s is not an absolute path: ignored, as the XDG base "
                    "directory rules say; evidence and first-contact verdicts go under %s",
                    xdg, home && home[0] == '/' ? "$HOME/.cache" : "no folder (HOME unset)");
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

double ev_num(er_yaml *y, yaml_node_t *map, const char *key)
{
    yaml_node_t *v = er_yaml_get(y, map, key);
    if (!v || v->type != YAML_SCALAR_NODE)
        return NAN;
    char *end;
    const char *s = (const char *)v->data.scalar.value;
    double x = strtod(s, &end);
    return (*s && !*end && isfinite(x)) ? x : NAN;
}

const char *ev_str(er_yaml *y, yaml_node_t *map, const char *key)
{
    yaml_node_t *v = er_yaml_get(y, map, key);
    return (v && v->type == YAML_SCALAR_NODE) ? (const char *)v->data.scalar.value : NULL;
}

/* Load and check the file's shape; NULL root (and a warning) when unusable.
 * *unreadable: 1 a file was there but is not a usable evidence file
 * (corrupt, too large, another format), 2 a file was there that could not
 * be read now (permissions, I/O, out of memory: not moved aside, never
 * overwritten), -1 the path names something other than a regular file,
 * else 0. */
yaml_node_t *ev_load(struct edgert_ctx *ctx, er_yaml *y, const char *path, int quiet_missing,
                     int *unreadable)
{
    struct stat st;
    *unreadable = 0;
    if (stat(path, &st) != 0) {
        if (!quiet_missing)
            er_diag_add(&ctx->diags, EDGERT_LOG_INFO, path, 0, 0, "no evidence file yet");
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        /* a folder or a device is the caller's mistake, never moved aside
         * (a store says so in its error; reading warns) */
        *unreadable = -1;
        if (!quiet_missing)
            er_diag_add(&ctx->diags, EDGERT_LOG_WARN, path, 0, 0,
                        "not a regular file, so not an evidence file; ignored");
        return NULL;
    }
    /* as root (or setuid), figures another user could have written are not
     * taken (a planted correct: 0 failed a good backend's verify); a store
     * leaves the file as it is (unreadable 2) */
    if (er_trust_strict() && er_others_could_write(&st)) {
        *unreadable = 2;
        er_diag_add(&ctx->diags, EDGERT_LOG_WARN, path, 0, 0,
                    "evidence file owned by uid %u, mode %04o: another user could have written "
                    "it; ignored, edgert runs as root (a store leaves it as it is)",
                    (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
        return NULL;
    }
    *unreadable = 1;
    er_diags local = {0};
    edgert_status ls = er_yaml_load(y, path, &local);
    if (ls != EDGERT_OK) {
        char msg[1024];
        er_diag_last_error(&local, 0, msg, sizeof msg);
        if (ls == EDGERT_E_IO) { /* there, but not readable now: not corrupt */
            *unreadable = 2;
            er_diag_add(&ctx->diags, EDGERT_LOG_WARN, path, 0, 0,
                        "evidence file cannot be read (%s): its measurements and failed "
                        "verifies are not applied; a store leaves it as it is", msg);
        } else {
            /* at the syntax error's line and column, as a manifest's */
            const edgert_diag *at = NULL;
            for (size_t i = 0; i < local.count; i++)
                if (local.items[i].level == EDGERT_LOG_ERROR && local.items[i].line)
                    at = &local.items[i];
            er_diag_add(&ctx->diags, EDGERT_LOG_WARN, path, at ? at->line : 0,
                        at ? at->column : 0, "evidence file is corrupt and is ignored (%s); "
                        "the next 'edgert calibrate' that writes it moves it aside and starts "
                        "a new one", at ? at->message : msg);
        }
        er_diags_free(&local);
        return NULL;
    }
    er_diags_free(&local);
    yaml_node_t *root = er_yaml_root(y);
    yaml_node_t *entries = er_yaml_get(y, root, "entries");
    double version = ev_num(y, root, "evidence_version");
    if (root->type != YAML_MAPPING_NODE || !entries || entries->type != YAML_SEQUENCE_NODE ||
        version != ER_EVIDENCE_VERSION) {
        er_diag_add(&ctx->diags, EDGERT_LOG_WARN, path, er_yaml_line(root), er_yaml_col(root),
                    "not an edgert evidence file of version %d; ignored (the next 'edgert "
                    "calibrate' that writes it moves it aside and starts a new one)",
                    ER_EVIDENCE_VERSION);
        er_yaml_free(y);
        return NULL;
    }
    *unreadable = 0;
    return entries;
}

int ev_library_hash(const er_cand *c, char out[17])
{
    uint64_t h;
    if (!c->m.library_path || er_file_xxh3(c->m.library_path, &h) != 0)
        return -1;
    snprintf(out, 17, "%016llx", (unsigned long long)h);
    return 0;
}

/* Valid figures: NaN (not measured) or within their meaning. */
int ev_rate_ok(double v)
{
    return isnan(v) || (v > 0.0 && isfinite(v));
}

int ev_unit_ok(double v)
{
    return isnan(v) || (v >= 0.0 && v <= 1.0);
}

int ev_nonneg_ok(double v)
{
    return isnan(v) || (v >= 0.0 && isfinite(v));
}

/* A figure of entry e, NaN (with a warning at its position) when out of
 * range: an edited or foreign file cannot rank a backend by an impossible
 * value. */
static double figure(struct edgert_ctx *ctx, er_yaml *y, yaml_node_t *e, const char *key,
                     int (*ok)(double), const char *range)
{
    double v = ev_num(y, e, key);
    if (ok(v))
        return v;
    yaml_node_t *n = er_yaml_get(y, e, key);
    er_diag_add(&ctx->diags, EDGERT_LOG_WARN, ctx->evidence_path, er_yaml_line(n ? n : e),
                er_yaml_col(n ? n : e), "%s %g is not %s; the figure is ignored", key, v, range);
    return NAN;
}

void er_evidence_apply(struct edgert_ctx *ctx)
{
    if (ctx->no_evidence || ctx->dev.planned || !ctx->evidence_path)
        return;
    er_yaml y;
    int unreadable;
    yaml_node_t *entries = ev_load(ctx, &y, ctx->evidence_path, 0, &unreadable);
    if (!entries)
        return;
    for (size_t i = 0; i < ctx->ncands; i++) {
        er_cand *c = ctx->cands[i];
        char hash[17];
        if (!c->pub.eligible || ev_library_hash(c, hash) != 0)
            continue;
        for (yaml_node_item_t *it = entries->data.sequence.items.start;
             it < entries->data.sequence.items.top; it++) {
            yaml_node_t *e = er_yaml_node(&y, *it);
            const char *dev = ev_str(&y, e, "device"), *be = ev_str(&y, e, "backend"),
                       *ph = ev_str(&y, e, "plugin_xxh3");
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
            c->pub.measured.decode_tokens_per_s =
                figure(ctx, &y, e, "decode_tokens_per_s", ev_rate_ok, "> 0");
            c->pub.measured.prefill_gflops =
                figure(ctx, &y, e, "prefill_gflops", ev_rate_ok, "> 0");
            c->pub.measured.top1_agreement =
                figure(ctx, &y, e, "top1_agreement", ev_unit_ok, "in [0, 1]");
            c->pub.measured.kl_mean = figure(ctx, &y, e, "kl_mean", ev_nonneg_ok, ">= 0");
            double tokens = ev_num(&y, e, "top1_tokens");
            c->pub.measured_top1_tokens =
                tokens >= 1.0 && tokens <= 1e9 && tokens == floor(tokens) ? (unsigned)tokens : 0u;
            c->pub.measured.where = ctx->evidence_path;
            c->calibrated = 1;
            const char *series = ev_str(&y, e, "series");
            if (!series || !series[0])
                series = ev_str(&y, e, "measured_at"); /* written before series were */
            free(c->series);
            c->series = series && series[0] ? er_strdup(series) : NULL;
            c->pub.measured_series = c->series;
            const char *wl = ev_str(&y, e, "workload");
            free(c->workload);
            c->workload = wl && wl[0] ? er_strdup(wl) : NULL;
            c->pub.measured_workload = c->workload;
            const char *fs = ev_str(&y, e, "fidelity_source");
            free(c->fidelity_source);
            c->fidelity_source = fs && fs[0] ? er_strdup(fs) : NULL;
            c->pub.measured_fidelity_source = c->fidelity_source;
            double lo = ev_num(&y, e, "decode_tokens_per_s_min"),
                   hi = ev_num(&y, e, "decode_tokens_per_s_max"),
                   v = c->pub.measured.decode_tokens_per_s;
            int ranged = er_is_range(lo, v, hi);
            c->pub.measured_decode_min = ranged ? lo : NAN;
            c->pub.measured_decode_max = ranged ? hi : NAN;
            double repeated = ev_num(&y, e, "decode_rounds_repeated");
            c->pub.measured_rounds_repeated =
                repeated >= 1.0 && repeated <= 1e6 && repeated == floor(repeated)
                    ? (unsigned)repeated : 0u;
            /* Evidence that the backend computes wrong results on this device
             * is a gate, like a failed self-test. */
            if (ev_num(&y, e, "correct") == 0.0) {
                er_cand_reason(c, ER_GATE_FAILED_VERIFY, "FAILED_VERIFY");
                er_cand_detail(c, "'edgert verify' found wrong results on this device (%s)",
                               ctx->evidence_path);
                c->pub.eligible = 0;
            }
        }
    }
    er_yaml_free(&y);
}
