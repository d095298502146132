/*
 * core/evidence/evidence_store.c — edgert_evidence_store: merging a call's figures
 * into the evidence file (core/evidence/evidence.c has the file's format and the
 * reading). What is refused before anything is written: items whose
 * figures are outside their meaning, two for one backend, a struct_size
 * that is no stride, a path that is not a regular file. Then a temporary
 * file beside the old one, renamed over it; a file that cannot be read as
 * evidence is moved aside first, never overwritten.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "context/context.h"
#include "evidence/evidence.h"
#include "formats/json_string.h"
#include "formats/yamldoc.h"
#include "os/trust.h"

/* ---- writing ------------------------------------------------------------------ */

/* A JSON string its reader (libyaml: JSON is YAML) gives back as written:
 * the tree's one JSON string writer (core/formats/json_string.h). */
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
                                       "workload", "measured_at", "series", "edgert_version",
                                       "fidelity_source"};
    static const char *const nums[] = {"decode_tokens_per_s", "prefill_gflops", "top1_agreement",
                                       "kl_mean", "sqnr_min_db", "threads", "correct",
                                       "decode_tokens_per_s_min", "decode_tokens_per_s_max",
                                       "top1_tokens", "decode_rounds_repeated"};
    fputs("    {", f);
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        fprintf(f, "%s\"%s\": ", i ? ", " : "", strs[i]);
        jstr(f, ev_str(y, e, strs[i]));
    }
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        fprintf(f, ", \"%s\": ", nums[i]);
        jnum(f, ev_num(y, e, nums[i]));
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

/* Item e asks that what it leaves unmeasured keep the file's (its struct,
 * struct_size bytes, covers keep_unmeasured and it is 1). */
static int keeps(const edgert_evidence *e, uint32_t struct_size)
{
    return struct_size >= EDGERT_EVIDENCE_V4_SIZE &&
           e->keep_unmeasured == 1;
}

/* What is wrong with an item's figures, or NULL: an evidence file is trusted
 * by every later selection, so nothing out of range goes into it. */
static const char *figure_out_of_range(const edgert_evidence *e)
{
    if (!ev_rate_ok(e->decode_tokens_per_s))
        return "decode_tokens_per_s must be > 0 (or NaN: not measured)";
    if (!ev_rate_ok(e->prefill_gflops))
        return "prefill_gflops must be > 0 (or NaN)";
    if (!ev_unit_ok(e->top1_agreement))
        return "top1_agreement must be in [0, 1] (or NaN)";
    if (!ev_nonneg_ok(e->kl_mean))
        return "kl_mean must be >= 0 (or NaN)";
    if (isinf(e->sqnr_min_db) && e->sqnr_min_db < 0.0) /* +inf: exact output (written null) */
        return "sqnr_min_db must not be -inf";
    if (e->correct < -1 || e->correct > 1)
        return "correct must be 1, 0 or -1";
    if (e->struct_size >= EDGERT_EVIDENCE_V4_SIZE &&
        e->keep_unmeasured != 0 && e->keep_unmeasured != 1)
        return "keep_unmeasured must be 0 or 1";
    return NULL;
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
        if (!c || ev_library_hash(c, hashes[i]) != 0) {
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
    const char *ph = ev_str(y, old, "plugin_xxh3"), *when = ev_str(y, old, "measured_at");
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
 * decided per item in verdict[], and an item that keeps what it leaves
 * unmeasured gets the entry it replaces in was[] (same plugin file only).
 * An entry that cannot be kept (no device or backend) is dropped with a
 * warning. Returns whether anything was written. */
static int write_kept(FILE *f, edgert_ctx *ctx, const char *path, er_yaml *y, yaml_node_t *old,
                      const edgert_evidence *items, size_t count, char (*hashes)[17],
                      int *verdict, yaml_node_t **was)
{
    int first = 1;
    for (yaml_node_item_t *it = old->data.sequence.items.start; it < old->data.sequence.items.top;
         it++) {
        yaml_node_t *e = er_yaml_node(y, *it);
        const char *dev = ev_str(y, e, "device"), *be = ev_str(y, e, "backend");
        int failed = ev_num(y, e, "correct") == 0.0;
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
            const char *ph = ev_str(y, e, "plugin_xxh3");
            if (keeps(item(items, i), items[0].struct_size) && ph && strcmp(ph, hashes[i]) == 0)
                was[i] = e;
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
    if (struct_size < EDGERT_EVIDENCE_V2_SIZE)
        return;
    if (er_is_range(e->decode_tokens_per_s_min, e->decode_tokens_per_s,
                 e->decode_tokens_per_s_max)) {
        *lo = e->decode_tokens_per_s_min;
        *hi = e->decode_tokens_per_s_max;
    }
}

/* The entry of item e, at `when` in `series`; with `was` (keep_unmeasured),
 * what e leaves unmeasured is that old entry's: a decode rate with its
 * range, series, threads, workload and time, each other figure alone. */
static void write_entry(FILE *f, edgert_ctx *ctx, const edgert_evidence *e, uint32_t struct_size,
                        const char *hash, const char *when, const char *series, int correct,
                        er_yaml *y, yaml_node_t *was)
{
    const int old_rate = was && isnan(e->decode_tokens_per_s);
    double lo, hi;
    decode_range(e, struct_size, &lo, &hi);
    /* appended regions: only when the caller's struct has them */
    unsigned tokens = struct_size >= EDGERT_EVIDENCE_V3_SIZE ? e->top1_tokens : 0u;
    const char *source = struct_size >= EDGERT_EVIDENCE_V4_SIZE ? e->fidelity_source : NULL;
    const int old_fidelity = was && isnan(e->top1_agreement) && isnan(e->kl_mean);
    if (old_fidelity)
        source = ev_str(y, was, "fidelity_source");
    if (was && correct < 0 && (ev_num(y, was, "correct") == 1.0))
        correct = 1;
    fputs("\"device\": ", f);
    jstr(f, ctx->fingerprint);
    fputs(", \"device_name\": ", f);
    jstr(f, ctx->dev.name);
    fputs(", \"backend\": ", f);
    jstr(f, e->backend);
    fputs(", \"plugin_xxh3\": ", f);
    jstr(f, hash);
    fputs(", \"workload\": ", f);
    jstr(f, old_rate ? ev_str(y, was, "workload") : e->workload ? e->workload : "");
    fputs(", \"measured_at\": ", f);
    jstr(f, old_rate ? ev_str(y, was, "measured_at") : when);
    fputs(", \"series\": ", f);
    jstr(f, old_rate ? ev_str(y, was, "series") : series);
    fputs(", \"edgert_version\": ", f);
    jstr(f, EDGERT_VERSION_STRING);
    const char *names[] = {"decode_tokens_per_s", "prefill_gflops", "top1_agreement", "kl_mean",
                           "sqnr_min_db", "decode_tokens_per_s_min", "decode_tokens_per_s_max"};
    double vals[] = {e->decode_tokens_per_s, e->prefill_gflops, e->top1_agreement, e->kl_mean,
                     e->sqnr_min_db, lo, hi};
    for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++)
        if (was && (k >= 5 ? old_rate : isnan(vals[k]))) /* the range goes with its rate */
            vals[k] = ev_num(y, was, names[k]);
    for (size_t k = 0; k < 5; k++) {
        fprintf(f, ", \"%s\": ", names[k]);
        jnum(f, vals[k]);
    }
    fputs(", \"threads\": ", f);
    jnum(f, old_rate ? ev_num(y, was, "threads") : (double)e->threads);
    if (correct >= 0)
        fprintf(f, ", \"correct\": %d", correct ? 1 : 0);
    else
        fputs(", \"correct\": null", f);
    for (size_t k = 5; k < 7; k++) {
        fprintf(f, ", \"%s\": ", names[k]);
        jnum(f, vals[k]);
    }
    fputs(", \"top1_tokens\": ", f);
    jnum(f, tokens ? (double)tokens : was && isnan(e->top1_agreement)
                                           ? ev_num(y, was, "top1_tokens") : NAN);
    fputs(", \"fidelity_source\": ", f); /* "": calibrate's verify of the workload */
    jstr(f, source);
    fputs(", \"decode_rounds_repeated\": ", f); /* goes with its decode rate */
    unsigned repeated = struct_size >= EDGERT_EVIDENCE_V5_SIZE ? e->decode_rounds_repeated : 0u;
    jnum(f, old_rate ? ev_num(y, was, "decode_rounds_repeated") : (double)repeated);
    fputs("}", f);
}

/* The whole new file: the old entries kept, then the new ones. */
static void write_all(FILE *f, edgert_ctx *ctx, const char *path, er_yaml *y, yaml_node_t *old,
                      const edgert_evidence *items, size_t count, char (*hashes)[17],
                      int *verdict, yaml_node_t **was)
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
    int first = !(old && write_kept(f, ctx, path, y, old, items, count, hashes, verdict, was));
    for (size_t i = 0; i < count; i++, first = 0) {
        fputs(first ? "    {" : ",\n    {", f);
        write_entry(f, ctx, item(items, i), items[0].struct_size, hashes[i], when, series,
                    verdict[i], y, was[i]);
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
    int e = errno;
    if (fclose(f) != 0 || bad) {
        /* the temporary file is removed: name the one the user knows */
        edgert_errf(err, err_len, "cannot write %s: %s (nothing stored)", path,
                    strerror(bad ? e : errno));
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
    /* struct_size is the array's stride: sizeof of some version of the
     * struct, so a multiple of its alignment when there is a second item
     * (EDGERT_EVIDENCE_V1_SIZE, the least accepted, is not: V1's sizeof has
     * tail padding) */
    if (count && (items[0].struct_size < EDGERT_EVIDENCE_V1_SIZE ||
                  (count > 1 && items[0].struct_size % _Alignof(edgert_evidence) != 0))) {
        edgert_errf(err, err_len, "edgert_evidence_store: struct_size %u is not the size of "
                    "an edgert_evidence (it is the array's stride): set it to "
                    "sizeof(edgert_evidence)", items[0].struct_size);
        return EDGERT_E_USAGE;
    }
    for (size_t i = 0; i < count; i++) {
        const edgert_evidence *e = item(items, i);
        char what[64];
        snprintf(what, sizeof what, "edgert_evidence_store: item %zu", i);
        if (er_check_unknown_tail(e, items[0].struct_size, sizeof *e, what, "edgert_evidence",
                                  err, err_len) != EDGERT_OK)
            return EDGERT_E_USAGE;
        const char *bad = figure_out_of_range(e);
        if (!e->backend || bad) {
            edgert_errf(err, err_len, "edgert_evidence_store: item %zu: %s", i,
                        !e->backend ? "backend is NULL" : bad);
            return EDGERT_E_USAGE;
        }
        for (size_t k = 0; k < i; k++)
            if (strcmp(item(items, k)->backend, e->backend) == 0) {
                edgert_errf(err, err_len, "edgert_evidence_store: items %zu and %zu are both "
                            "for '%s': one entry per backend and call", k, i, e->backend);
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
        edgert_errf(err, err_len, ctx->ignore_env
                                      ? "no evidence file: the handle ignores the environment "
                                        "(ignore_env), so give a path (here or as "
                                        "edgert_options.evidence_file)"
                                      : "no evidence file: set XDG_CACHE_HOME or HOME, or give "
                                        "a path");
        return EDGERT_E_USAGE;
    }
    return EDGERT_OK;
}

/* An exclusive lock on `path`.lock (created if need be, kept afterwards), so
 * two stores, from two handles or two processes, never both merge into the
 * same old file and lose the first one's entries (a failed verify among
 * them) to the second's rename. The open descriptor, or -1 with err set. */
static int lock_store(const char *path, char *err, size_t err_len)
{
    char *lock = NULL;
    if (asprintf(&lock, "%s.lock", path) < 0) {
        edgert_errf(err, err_len, "out of memory");
        return -1;
    }
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    int e = errno;
    while (fd >= 0 && flock(fd, LOCK_EX) != 0) {
        if (errno == EINTR)
            continue;
        e = errno;
        close(fd);
        fd = -1;
    }
    if (fd < 0)
        edgert_errf(err, err_len, "cannot lock %s: %s; nothing is stored", lock, strerror(e));
    free(lock);
    return fd;
}

/* Writes a temporary file next to `path` (old entries kept, the new ones
 * replacing theirs), then renames it over `path`, under `path`.lock: an
 * interrupted write never leaves a corrupt file, a failed one leaves
 * nothing behind, and concurrent stores each keep the other's entries. An
 * old file that is corrupt is moved aside first; one that cannot be read
 * now is left as it is, and nothing is stored. */
edgert_status edgert_evidence_store(edgert_ctx *ctx, const char *path, const edgert_evidence *items,
                                    size_t count, char *err, size_t err_len)
{
    edgert_status st = check_store(ctx, &path, items, count, err, err_len);
    char *dir = NULL, *tmp = NULL;
    char (*hashes)[17] = NULL;
    int *verdict = NULL;
    yaml_node_t **was = NULL;
    FILE *f = NULL;
    yaml_node_t *old = NULL;
    er_yaml y;
    int lock = -1;
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
    if ((lock = lock_store(path, err, err_len)) < 0)
        goto out;
    int unreadable = 0;
    const size_t mark = ctx->diags.count;
    old = ev_load(ctx, &y, path, 1, &unreadable);
    if (unreadable < 0) {
        edgert_errf(err, err_len, "%s is not a regular file (a folder?); nothing is stored: "
                    "give the path of an evidence file", path);
        goto out;
    }
    if (unreadable == 2) {
        /* said from errno, not from the diagnostic: the handle said the
         * same when it opened, and the same diagnostic is not added twice
         * (the message was empty: "; nothing is stored") */
        char why[512];
        er_diag_lines(&ctx->diags, mark, EDGERT_LOG_WARN, why, sizeof why);
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        int e = fd < 0 ? errno : EIO;
        struct stat fs;
        int theirs = fd >= 0 && fstat(fd, &fs) == 0 &&
                     er_others_could_write(&fs);
        if (fd >= 0)
            close(fd);
        if (why[0])
            edgert_errf(err, err_len, "%s; nothing is stored", why);
        else if (theirs) /* ev_load's refusal as root (evidence.c) */
            edgert_errf(err, err_len, "the evidence file %s is owned by uid %u, mode %04o: "
                        "another user could have written it; it is left as it was, nothing "
                        "is stored", path, (unsigned)fs.st_uid, (unsigned)(fs.st_mode & 07777));
        else
            edgert_errf(err, err_len, "the evidence file %s cannot be read (%s): it is left "
                        "as it was, nothing is stored", path, strerror(e));
        goto out;
    }
    if (unreadable > 0 && move_aside(ctx, path, err, err_len) != 0)
        goto out;
    verdict = calloc(count ? count : 1, sizeof *verdict);
    was = calloc(count ? count : 1, sizeof *was);
    if (!verdict || !was || asprintf(&tmp, "%s/.evidence.json.XXXXXX", dir[0] ? dir : "/") < 0) {
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
    write_all(f, ctx, path, &y, old, items, count, hashes, verdict, was);
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
    if (lock >= 0)
        close(lock); /* after the rename: the next store reads this one's file */
    free(dir);
    free(hashes);
    free(verdict);
    free(was);
    return st;
}
