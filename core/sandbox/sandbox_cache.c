/*
 * core/sandbox/sandbox_cache.c — first contact's verdicts, kept per (device, plugin
 * file, what the manifest gives the child) in
 * $XDG_CACHE_HOME/edgert/first-contact/ (default ~/.cache/...), one small
 * text file each: until the file, the device or that part of the manifest
 * changes, first contact (sandbox.c) is not run again. Beside them a lock,
 * .lock, that lets one process of this user meet plugins at a time: others
 * wait for it and take its verdicts (er_sb_lock).
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "evidence/evidence.h"
#include "sandbox/sandbox.h"
#include "os/trust.h"

/* XXH3-64 of what the child's verdict takes from the manifest besides the
 * library: the backend's name and the name the descriptor must have
 * (plugin_name; both word the verdict's detail), the options init gets, the
 * ABI range offered, whether GEMM is required and the group size the quick
 * measurement packs; and from the handle, the threads the quick
 * measurement runs on (its figures rank the backend among others measured
 * on the same number). A manifest whose name,
 * plugin_name or options were fixed is checked again, instead of keeping
 * the old NAME_MISMATCH or INIT_FAILED, and two manifests that share one
 * library (plugin_name) get a verdict and a quick measurement each. */
static uint64_t verdict_key(const er_manifest *m, unsigned threads)
{
    char *facts = NULL;
    int n = asprintf(&facts,
                     "name=%s\nplugin_name=%s\nabi=%u..%u\nruns_in_process=%d\noptions=%c%s\n"
                     "group=%d\nthreads=%u",
                     m->name, m->plugin_name ? m->plugin_name : "", (unsigned)m->abi_min,
                     (unsigned)m->abi_max, m->runs_in_process, m->plugin_options ? '=' : '-',
                     m->plugin_options ? m->plugin_options : "", m->group_size, threads);
    uint64_t h = n >= 0 ? (uint64_t)XXH3_64bits(facts, (size_t)n) : 0;
    free(n >= 0 ? facts : NULL);
    return h;
}

/* The per-user folder of the verdicts, malloc'd; NULL when none can be
 * named. With `create`, each missing level is made (0700). */
static char *verdict_folder(int create)
{
    const char *xdg = er_getenv(0, "XDG_CACHE_HOME"), *home = er_getenv(0, "HOME");
    char *base = NULL, *dir = NULL;
    if (xdg && xdg[0] == '/')
        base = er_strdup(xdg);
    else if (home && home[0] == '/')
        base = er_path_join(home, ".cache");
    char *edgert = base ? er_path_join(base, "edgert") : NULL;
    dir = edgert ? er_path_join(edgert, "first-contact") : NULL;
    if (dir && create) { /* one level at a time: each may be missing */
        (void)mkdir(base, 0700);
        (void)mkdir(edgert, 0700);
        (void)mkdir(dir, 0700);
    }
    free(base);
    free(edgert);
    return dir;
}

/* The cache file of this (device, plugin file, verdict_key), malloc'd; NULL
 * when no per-user cache folder can be named or created. */
char *er_sb_cache_file(struct edgert_ctx *ctx, const er_cand *c, int create)
{
    char *dir = verdict_folder(create), *path = NULL;
    /* the core's version too: a verdict is also about the core that took it */
    if (dir && asprintf(&path, "%s/%s-%016llx-%016llx-%s", dir, ctx->fingerprint,
                        (unsigned long long)c->lib_hash,
                        (unsigned long long)verdict_key(&c->m, er_pool_threads(ctx->pool)),
                        EDGERT_VERSION_STRING) < 0)
        path = NULL;
    free(dir);
    return path;
}

int er_sb_lock(long long wait_ms, int *timed_out)
{
    *timed_out = 0;
    char *dir = verdict_folder(1), *path = dir ? er_path_join(dir, ".lock") : NULL;
    free(dir);
    /* never through a link, never a FIFO: only a regular file of our own */
    int fd = path ? open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600) : -1;
    free(path);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        return -1;
    }
    /* the holder's end (even kill -9) releases the lock: it is the open
     * description's, not the file's presence; polled, so a wait is bounded */
    const long long deadline = er_sb_now_ms() + wait_ms;
    unsigned nap_us = 1000;
    while (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if ((errno != EWOULDBLOCK && errno != EINTR) || er_sb_now_ms() >= deadline) {
            *timed_out = errno == EWOULDBLOCK;
            close(fd);
            return -1;
        }
        usleep(nap_us);
        nap_us = nap_us < 32000u ? nap_us * 2u : 32000u;
    }
    return fd;
}

void er_sb_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* releases the flock */
}

/* Copy one "key value" line's value into dst. */
static void take_line(const char *text, const char *key, char *dst, size_t len)
{
    size_t kl = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, key, kl) == 0 && p[kl] == ' ') {
            const char *v = p + kl + 1, *e = strchr(v, '\n');
            size_t n = e ? (size_t)(e - v) : strlen(v);
            snprintf(dst, len, "%.*s", (int)n, v);
            return;
        }
    }
}

/* Format 7: format 6 with what the quick measurement saw of the machine
 * (wait_share, contended: common/contention.h), when it was taken
 * (measured_at) and how many it took (attempts); a contended verdict's
 * figures are nan. A format-6 verdict's figures were never judged for
 * contention (a crowd cached 1.7-4.3 tok/s where 25-35 is quiet), so its
 * plugin is met again.
 * Format 6: format 5 with checked_outputs, the outputs the core's arithmetic
 * check compared (sandbox_check.c): a format-5 verdict passed no such check,
 * so its plugin is met again.
 * Format 5: format 4 with pack_refused, narrowed to the manifest's own
 * group on the decode shape (a format-4 verdict could keep a refusal of the
 * measurement's fallback group, and warn of it for ever).
 * Format 4: format 3's decode measured from memory (the packed bytes
 * evicted before each call) with the range of its calls, each call now
 * scaled to the read beside it (sandbox_measure.c, time_gemm), and that read. An
 * older verdict (format 1's figure may be the L3's, format 2 has no range,
 * format 3 no read: its figure is of its moment's bandwidth) is not read,
 * so first contact runs again. */
#define ER_SB_FORMAT "edgert-first-contact 7\n"
/* The verdict file's text (malloc'd, at most 4 KiB), or NULL. It is read
 * from the descriptor it was checked on, never through a link or from a
 * FIFO; as root (or setuid), a file another user could have written, or
 * one in a folder another user owns, is not taken: met again instead (an
 * adversary planted a failed verdict for a good plugin in a cache folder
 * owned by nobody). */
static char *read_verdict(const char *path)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st, dir;
    char *slash = strrchr(path, '/'), *text = NULL;
    int strict = er_trust_strict();
    if (fd < 0)
        return NULL;
    int bad = fstat(fd, &st) != 0 || !S_ISREG(st.st_mode);
    if (!bad && strict && slash) {
        char *folder = strndup(path, (size_t)(slash - path));
        bad = !folder || stat(folder, &dir) != 0 || er_others_could_write(&dir) ||
              er_others_could_write(&st);
        free(folder);
    }
    if (!bad && (text = malloc(4097)) != NULL) {
        ssize_t n = read(fd, text, 4096);
        if (n < 0) {
            free(text);
            text = NULL;
        } else {
            text[n] = '\0';
        }
    }
    close(fd);
    return text;
}

int er_sb_cache_read(struct edgert_ctx *ctx, const er_cand *c, sb_result *r)
{
    memset(r, 0, sizeof *r); /* a key an older edgert did not write reads as none */
    char *path = er_sb_cache_file(ctx, c, 0);
    char *text = path ? read_verdict(path) : NULL;
    free(path);
    if (!text || strncmp(text, ER_SB_FORMAT, strlen(ER_SB_FORMAT)) != 0) {
        free(text);
        return -1;
    }
    char ok[8] = "", gate[8] = "", dec[32] = "nan", pre[32] = "nan", lo[32] = "nan",
         hi[32] = "nan", rd[32] = "nan", limit[32] = "0", outside[8] = "0", checked[16] = "0",
         wait[32] = "nan", at[32] = "0", attempts[16] = "1";
    take_line(text, "ok", ok, sizeof ok);
    take_line(text, "packed_outside", outside, sizeof outside);
    take_line(text, "timeout_ms", limit, sizeof limit);
    take_line(text, "gate", gate, sizeof gate);
    take_line(text, "reason", r->reason, sizeof r->reason);
    take_line(text, "detail", r->detail, sizeof r->detail);
    take_line(text, "decode_tokens_per_s", dec, sizeof dec);
    take_line(text, "prefill_gflops", pre, sizeof pre);
    take_line(text, "decode_tokens_per_s_min", lo, sizeof lo);
    take_line(text, "decode_tokens_per_s_max", hi, sizeof hi);
    take_line(text, "read_gbs", rd, sizeof rd);
    take_line(text, "pack_refused", r->pack_refused, sizeof r->pack_refused);
    take_line(text, "checked_outputs", checked, sizeof checked);
    take_line(text, "wait_share", wait, sizeof wait);
    take_line(text, "contended", r->contended, sizeof r->contended);
    take_line(text, "measured_at", at, sizeof at);
    take_line(text, "attempts", attempts, sizeof attempts);
    free(text);
    r->ok = strcmp(ok, "1") == 0;
    r->gate = atoi(gate);
    r->decode_tok_s = strtod(dec, NULL);
    r->prefill_gflops = strtod(pre, NULL);
    r->decode_min = strtod(lo, NULL);
    r->decode_max = strtod(hi, NULL);
    r->read_gbs = strtod(rd, NULL);
    r->timeout_ms = strtoll(limit, NULL, 10);
    r->packed_outside = strcmp(outside, "1") == 0;
    r->checked_outputs = (unsigned)strtoul(checked, NULL, 10);
    r->wait_share = strtod(wait, NULL);
    r->measured_at = strtoll(at, NULL, 10);
    r->attempts = (unsigned)strtoul(attempts, NULL, 10);
    r->run_queue = -1;
    r->cpu_per_wall = NAN;
    if (!(r->wait_share >= 0.0 && r->wait_share <= 1.0))
        r->wait_share = NAN;
    if (r->contended[0]) /* its figures were not kept, whatever the file says */
        r->decode_tok_s = r->prefill_gflops = r->decode_min = r->decode_max = r->read_gbs = NAN;
    if (!r->ok && (r->gate < 0 || r->gate >= ER_GATE_COUNT || !r->reason[0]))
        return -1; /* not a verdict this edgert wrote */
    /* figures that mean nothing (inf, 0, negative: edited or damaged) would
     * rank the backend: meet it again instead */
    if (!ev_rate_ok(r->decode_tok_s) || !ev_rate_ok(r->prefill_gflops) ||
        !ev_rate_ok(r->decode_min) || !ev_rate_ok(r->decode_max) || !ev_rate_ok(r->read_gbs))
        return -1;
    /* a timeout under a shorter limit than now says nothing: meet it again */
    if (!r->ok && r->gate == ER_GATE_PLUGIN_TIMEOUT && r->timeout_ms < er_sb_timeout_ms(ctx))
        return -1;
    return 0;
}

/* text written to a temporary file beside path, then renamed to it: a
 * reader never sees half. 0, or the errno of what failed. */
static int put_whole(const char *path, const char *text)
{
    char *tmp = NULL;
    if (asprintf(&tmp, "%s.XXXXXX", path) < 0)
        return ENOMEM;
    int e = 0, fd = mkstemp(tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        e = errno;
        if (fd >= 0)
            close(fd);
    } else if (fputs(text, f) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
        e = errno ? errno : EIO;
    } else {
        free(tmp);
        return 0;
    }
    unlink(tmp);
    free(tmp);
    return e;
}

void er_sb_cache_write(struct edgert_ctx *ctx, const er_cand *c, const sb_result *r)
{
    char *path = er_sb_cache_file(ctx, c, 1), *text = NULL;
    if (!path && !ctx->cache_unnamed_said) { /* once per handle, not per plugin */
        ctx->cache_unnamed_said = 1;
        er_diag_add(&ctx->diags, EDGERT_LOG_WARN, NULL, 0, 0,
                    "first contact's verdicts are not kept: neither XDG_CACHE_HOME nor HOME "
                    "names an absolute folder (or, under secure execution, they are not "
                    "read), so every process meets its plugins again (a child process each)");
    }
    /* newlines cannot be in the values: each is one line */
    if (!path || asprintf(&text, ER_SB_FORMAT "backend %s\nok %d\ngate %d\nreason %s\n"
                          "detail %s\ndecode_tokens_per_s %.17g\nprefill_gflops %.17g\n"
                          "decode_tokens_per_s_min %.17g\ndecode_tokens_per_s_max %.17g\n"
                          "read_gbs %.17g\ntimeout_ms %lld\npacked_outside %d\n"
                          "pack_refused %s\nchecked_outputs %u\nwait_share %.17g\n"
                          "contended %s\nmeasured_at %lld\nattempts %u\n",
                          c->m.name, r->ok, r->gate, r->reason, r->detail, r->decode_tok_s,
                          r->prefill_gflops, r->decode_min, r->decode_max, r->read_gbs,
                          r->timeout_ms, r->packed_outside, r->pack_refused, r->checked_outputs,
                          r->wait_share, r->contended, r->measured_at, r->attempts) < 0) {
        free(path);
        return;
    }
    int e = put_whole(path, text);
    if (e && !ctx->cache_unnamed_said) { /* a folder there, but not writable (HOME=/) */
        ctx->cache_unnamed_said = 1;
        er_diag_add(&ctx->diags, EDGERT_LOG_WARN, NULL, 0, 0,
                    "first contact's verdicts are not kept: %s: %s, so every process meets "
                    "its plugins again (a child process each)", path, strerror(e));
    }
    free(text);
    free(path);
}

/* The quiet read's file: one per device, beside the verdicts. */
static char *quiet_read_file(struct edgert_ctx *ctx, int create)
{
    char *dir = verdict_folder(create), *path = NULL;
    if (dir && asprintf(&path, "%s/%s-quiet-read", dir, ctx->fingerprint) < 0)
        path = NULL;
    free(dir);
    return path;
}

double er_sb_quiet_read(struct edgert_ctx *ctx)
{
    char *path = quiet_read_file(ctx, 0), *text = path ? read_verdict(path) : NULL;
    char rd[32] = "nan";
    double v = NAN;
    if (text && strncmp(text, "edgert-quiet-read 1\n", 20) == 0) {
        take_line(text, "read_gbs", rd, sizeof rd);
        v = strtod(rd, NULL);
    }
    free(text);
    free(path);
    return v > 0.0 && v < 1e6 ? v : NAN; /* an edited figure means nothing */
}

void er_sb_quiet_read_offer(struct edgert_ctx *ctx, double read_gbs)
{
    double have = er_sb_quiet_read(ctx);
    char *path = NULL, *text = NULL;
    if (!(read_gbs > 0.0) || have >= read_gbs || !(path = quiet_read_file(ctx, 1)))
        return;
    if (asprintf(&text, "edgert-quiet-read 1\nread_gbs %.17g\n", read_gbs) >= 0)
        (void)put_whole(path, text); /* not kept: the next quiet contact offers again */
    free(text);
    free(path);
}
