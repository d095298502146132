/*
 * core/sandbox/sandbox.c — first contact with a plugin happens in a child process.
 *
 * The gates (gate.c) stop code built for another CPU; they cannot stop wrong
 * code. So the first time edgert meets a plugin file on a device — keyed by
 * the XXH3 of the file's bytes and the device fingerprint — everything that
 * runs plugin code is done in a forked child with a timeout: the library's
 * constructors (dlopen), the entry, the ABI answer, init, the self-test, and
 * a quick measurement. A child that dies or hangs makes the candidate
 * PLUGIN_CRASHED(<signal>), PLUGIN_TIMEOUT or PLUGIN_EXITED(<code>), with
 * the stage it reached; the process that hosts edgert is never harmed (the
 * deadline covers the child's end too: one that closes its end of the pipe
 * and runs on is killed there, as a timeout).
 * When no child can be made (pipe2 or fork fails: no descriptors, no
 * processes left, a policy), the candidate is SANDBOX_UNAVAILABLE: its code
 * is never run in-process instead.
 * (GStreamer's out-of-process registry scanner is the precedent.)
 *
 * The verdict is cached, one small file per (device, plugin file, what the
 * manifest gives the child), in $XDG_CACHE_HOME/edgert/first-contact/
 * (default ~/.cache/...): until the file, the device or that part of the
 * manifest changes, the child is not run again. Some verdicts say more of
 * the moment than of the plugin and are not kept as they are: a child
 * killed from outside (SIGKILL, SIGTERM, SIGINT, SIGHUP: the OOM killer, a
 * user), no child at all (SANDBOX_UNAVAILABLE) and a child whose end could
 * not be read (PLUGIN_EXITED(unknown)) are not cached, and a timeout counts
 * only while the limit is not raised (EDGERT_SANDBOX_TIMEOUT). A cached
 * failure names its file, whose deletion makes edgert meet the plugin again
 * (a licence installed since, say). Only a plugin whose verdict passed is
 * loaded in-process (load.c). One process of a user meets plugins at a
 * time, under a lock beside the verdicts (er_sb_lock): a crowd started
 * together measured every plugin at once, each under the others' load (on
 * a 2-core Zen 3, 12 processes cached avx2-w4a16 at 1.7-4.3 tok/s against
 * 25-35 quiet), and who waited takes the holder's verdict.
 *
 * The quick measurement (sandbox_measure.c) gives the ranking a figure
 * measured on this device instead of a claim; `edgert calibrate` measures
 * properly and overrides it.
 *
 * The child: stdout and stderr go to /dev/null (a plugin's chatter must not
 * reach a JSON stream), every fatal signal gets its default action (the
 * host's own handlers must not catch a plugin's crash), it builds its own
 * thread pool (the parent's workers do not exist after fork), reports each
 * stage it enters and its verdict through a pipe, and leaves with _exit (no
 * atexit handler, no stdio flush of the parent's buffers). A plugin that
 * calls exit() itself does run the host's atexit handlers in the child:
 * that is the price of fork over spawning a helper program; stdio buffers at
 * least are flushed before the fork, so nothing is written twice.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/contention.h"
#include "sandbox/sandbox.h"

#define ER_SANDBOX_TIMEOUT_MS 60000   /* default; generous: a real plugin needs ~1 s, qemu ~10x */

long long er_sandbox_timeout_ms(const char *v, er_diags *d)
{
    char *end = NULL;
    double s = v ? strtod(v, &end) : 0.0;
    if (v && end && end != v && *end == '\0' && s >= 0.001 && s <= 3600.0)
        return (long long)(s * 1000.0);
    if (v)
        er_diag_add(d, EDGERT_LOG_WARN, NULL, 0, 0, "EDGERT_SANDBOX_TIMEOUT=%s is not a number "
                    "of seconds in [0.001, 3600]: %d s is used", v, ER_SANDBOX_TIMEOUT_MS / 1000);
    return ER_SANDBOX_TIMEOUT_MS;
}

/* The child's time limit, as this handle read it. */
long long er_sb_timeout_ms(const struct edgert_ctx *ctx)
{
    return ctx->sandbox_timeout_ms > 0 ? ctx->sandbox_timeout_ms : ER_SANDBOX_TIMEOUT_MS;
}

/* A verdict with nothing measured and nothing seen yet. */
static void sb_blank(sb_result *r)
{
    *r = (sb_result){.ok = 0, .decode_tok_s = NAN, .prefill_gflops = NAN, .decode_min = NAN,
                     .decode_max = NAN, .read_gbs = NAN, .wait_share = NAN,
                     .cpu_per_wall = NAN, .wait_per_wall = NAN, .run_queue = -1};
}

/* ---- the child ---------------------------------------------------------------------- */

static void put(int fd, const void *p, size_t n)
{
    const char *b = p;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w <= 0 && errno != EINTR)
            return;
        if (w > 0) {
            b += w;
            n -= (size_t)w;
        }
    }
}

/* Everything that runs plugin code, then the verdict; never returns. */
static void child(struct edgert_ctx *ctx, er_cand *c, er_sb_contact contact, int out,
                  pid_t parent)
{
    /* Ends with the host: a host killed outright (SIGKILL, the OOM killer)
     * no longer holds the deadline, and a plugin that hangs here would run
     * on, holding whatever the host's descriptors hold (export's work
     * folder lock among them). The signal follows the forking thread, which
     * waits for this child; a parent gone before prctl is seen by getppid.
     * getppid is 0 when the parent is outside this child's pid namespace
     * (a host that unshared one): there the check cannot tell, and only
     * the prctl guards. */
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    pid_t pp = getppid();
    if (pp != parent && pp != 0)
        _exit(127);
    /* The parent's hold on first contact's lock stays the parent's: a
     * process the plugin starts, and outlives this child, must not keep
     * every later first contact of this user waiting. */
    if (ctx->sb_lock_fd >= 0)
        close(ctx->sb_lock_fd);
    /* Its own process group: a plugin's kill(0, ...) ends this child, not
     * the host that shared its group (an adversary's constructor's
     * kill(0, SIGTERM) ended the CLI with nothing said). */
    (void)setpgid(0, 0);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
    }
    /* The host's handlers must not catch a plugin's crash (a crash reporter,
     * a test framework that longjmps back into its runner...): the default
     * action for every fatal signal, none of them blocked; and for those a
     * host may ignore (SIGTERM, SIGINT, SIGHUP...), so that a plugin that
     * sends one to its process group ends this child, as it would a host. */
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGILL,  SIGFPE,  SIGABRT, SIGTRAP, SIGSYS,
                                SIGTERM, SIGINT, SIGHUP,  SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM};
    sigset_t none;
    sigemptyset(&none);
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
        signal(fatal[i], SIG_DFL); /* first: the host's handler never runs here */
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* The parent's pool workers did not survive the fork: a pool of our own. */
    ctx->pool = er_pool_create(er_pool_threads(ctx->pool));
    /* nor did the arena's lock's state: the child packs into an arena of its own */
    ctx->arena = er_arena_create();
    ctx->stage_fd = out; /* er_stage_reached reports each stage through the pipe */
    sb_result r;
    sb_blank(&r);
    contact(ctx, c); /* the loader's in-process load (load.c), here in the child */
    if (c->failed || !c->pub.loaded) {
        unsigned g = 0;
        while (g < ER_GATE_COUNT && !(c->failed & (1u << g)))
            g++;
        r.gate = g < ER_GATE_COUNT ? (int)g : ER_GATE_INIT_FAILED;
        /* of the file's moment, not of its checked bytes: not cached */
        r.passing = g == ER_GATE_LIBRARY_REWRITTEN;
        snprintf(r.reason, sizeof r.reason, "%s",
                 c->pub.reason_count ? c->pub.reasons[c->pub.reason_count - 1] : "INIT_FAILED");
        snprintf(r.detail, sizeof r.detail, "%s", c->pub.detail ? c->pub.detail : "");
    } else {
        er_stage_reached(ctx, c, ER_STAGE_CHECK);
        if (er_sb_check_arithmetic(c, &r) == 0) { /* else r says WRONG_RESULTS */
            er_stage_reached(ctx, c, ER_STAGE_MEASURE);
            er_sb_quick_measure(c, &r);
            r.ok = 1;
        }
    }
    unsigned char tag = 'R';
    put(out, &tag, 1);
    put(out, &r, sizeof r);
    _exit(0);
}

static const char *const stage_names[ER_STAGE_COUNT] = {
    "dlopen (the library's constructors)", "entry and ABI", "init", "self-test",
    "the core's arithmetic check", "quick measurement",
};

const char *er_stage_name(int s)
{
    return s >= 0 && s < ER_STAGE_COUNT ? stage_names[s] : "?";
}

void er_stage_reached(struct edgert_ctx *ctx, const er_cand *c, er_stage s)
{
    er_log(ctx, EDGERT_LOG_INFO, "loading %s (%s): %s", c->m.name, c->m.library_path,
           er_stage_name((int)s));
    if (ctx->stage_fd >= 0) {
        unsigned char rec[2] = {'S', (unsigned char)s};
        ssize_t w = write(ctx->stage_fd, rec, sizeof rec);
        (void)w; /* the parent reads what arrives; a lost stage only blurs a message */
    }
}

/* ---- the parent --------------------------------------------------------------------- */

static const char *signal_name(int sig)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {{SIGSEGV, "SIGSEGV"}, {SIGILL, "SIGILL"},   {SIGABRT, "SIGABRT"},
                 {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"},
                 {SIGTRAP, "SIGTRAP"}, {SIGTERM, "SIGTERM"}, {SIGSYS, "SIGSYS"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig)
            return names[i].name;
    return "a signal";
}

long long er_sb_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Read n bytes of the child's pipe `in` (non-blocking) into buf by the
 * deadline (ms on er_sb_now_ms's clock): 1 when they are all read, 0 at EOF or
 * when the child has ended with nothing more in the pipe (its pidfd pfd,
 * when there is one: a process it started, setsid, may hold the pipe open
 * for ever, and that end was a PLUGIN_TIMEOUT at the deadline instead of
 * how it ended), -1 at the deadline. Every byte is read this way: a lone
 * tag byte from a plugin that writes to the inherited pipe cannot block
 * the host either. */
static int read_bytes(int in, int pfd, void *buf, size_t n, long long deadline)
{
    size_t have = 0;
    while (have < n) {
        ssize_t g = read(in, (char *)buf + have, n - have);
        if (g > 0) {
            have += (size_t)g;
            continue;
        }
        if (g == 0)
            return 0;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return 0;
        long long left = deadline - er_sb_now_ms();
        if (left <= 0)
            return -1;
        struct pollfd p[2] = {{.fd = in, .events = POLLIN}, {.fd = pfd, .events = POLLIN}};
        int k = poll(p, pfd >= 0 ? 2 : 1, (int)(left > 1000 ? 1000 : left));
        if (k > 0 && !(p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            /* only the pidfd: the child ended; whatever it wrote before is
             * in the pipe already, so a pipe still empty is its end */
            struct pollfd again = {.fd = in, .events = POLLIN};
            if (poll(&again, 1, 0) == 0)
                return 0;
        }
    }
    return 1;
}

/* Read the child's records until its verdict, EOF, its end or the
 * deadline. Returns 1 with *r filled, 0 at EOF or its end (a verdict cut
 * short included), -1 at the timeout; *last is the last stage. */
static int read_child(int in, int pfd, long long deadline, sb_result *r, int *last)
{
    for (;;) {
        unsigned char tag, s;
        int got = read_bytes(in, pfd, &tag, 1, deadline);
        if (got <= 0)
            return got;
        if (tag == 'S') {
            if ((got = read_bytes(in, pfd, &s, 1, deadline)) <= 0)
                return got;
            if (s < ER_STAGE_COUNT)
                *last = s;
        } else if (tag == 'R') {
            if ((got = read_bytes(in, pfd, r, sizeof *r, deadline)) <= 0)
                return got < 0 ? -1 : 0; /* cut short: the child died writing it */
            r->reason[sizeof r->reason - 1] = '\0'; /* from the child: terminate */
            r->detail[sizeof r->detail - 1] = '\0';
            r->pack_refused[sizeof r->pack_refused - 1] = '\0';
            return 1;
        }
    }
}

/* A pidfd of the child just forked, or -1 where there is none (a kernel
 * before 5.3, an emulator). It names that process for good: to name another,
 * the child would have to end, be reaped by the host (SIGCHLD ignored) and
 * its pid be handed out again between fork and this call, and the kernel
 * hands pids out in a cycle of pid_max (32768 at least). */
static int child_pidfd(pid_t pid)
{
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_send_signal)
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    return -1;
#endif
}

/* Wait for the child through its pidfd until the deadline; SIGKILL through
 * it there, which cannot reach another process that reused the pid (when
 * the host reaps children itself). Closes pfd. 0: it ended; 1: it was
 * killed; -1: no pidfd, nothing done. */
static int pidfd_wait(int pfd, pid_t pid, long long deadline)
{
    if (pfd < 0)
        return -1;
    int rc = 0;
    for (;;) {
        long long left = deadline - er_sb_now_ms();
        struct pollfd p = {.fd = pfd, .events = POLLIN};
        int n = left > 0 ? poll(&p, 1, (int)(left > 1000 ? 1000 : left)) : 0;
        if (n > 0)
            break; /* readable: it ended */
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || er_sb_now_ms() >= deadline) {
#ifdef SYS_pidfd_send_signal
            rc = syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0) == 0;
#endif
            /* refused (a policy), not gone: still ours, as the pidfd did not
             * become readable, so the pid is still its own */
            if (!rc && errno != ESRCH)
                rc = kill(pid, SIGKILL) == 0;
            break;
        }
    }
    close(pfd);
    return rc;
}

/* Reap the child by the deadline, killing it there: EOF on the pipe is not
 * its end, since a plugin may close every descriptor it did not open and go
 * on running. waitpid's result, with *status and *werr; *killed says it was
 * still running at the deadline. */
static pid_t reap_child(pid_t pid, int pfd, long long deadline, int *status, int *werr,
                        int *killed)
{
    pid_t waited;
    struct timespec nap = {0, 1000000}; /* 1 ms, then up to 16 ms */
    *killed = 0;
    int w = pidfd_wait(pfd, pid, deadline);
    if (w >= 0) {
        *killed = w;
        while ((waited = waitpid(pid, status, 0)) < 0 && errno == EINTR)
            ;
        *werr = errno;
        return waited;
    }
    for (;;) {
        waited = waitpid(pid, status, WNOHANG);
        if (waited != 0 && !(waited < 0 && errno == EINTR))
            break;
        if (waited == 0 && er_sb_now_ms() >= deadline) {
            kill(pid, SIGKILL);
            *killed = 1;
            while ((waited = waitpid(pid, status, 0)) < 0 && errno == EINTR)
                ;
            break;
        }
        nanosleep(&nap, NULL);
        if (nap.tv_nsec < 16000000)
            nap.tv_nsec *= 2;
    }
    *werr = errno;
    return waited;
}

/* No child could be made: the plugin's code is not run in this process
 * instead (the gate fails closed), and the verdict, of the moment, is not
 * kept. */
static void no_child(sb_result *r, const char *call, int e)
{
    r->ok = 0;
    r->passing = 1;
    r->gate = ER_GATE_SANDBOX_UNAVAILABLE;
    snprintf(r->reason, sizeof r->reason, "SANDBOX_UNAVAILABLE");
    snprintf(r->detail, sizeof r->detail, "no child process could be made for it (%s: %s), "
             "and the plugin's code was not run in this one instead; the next handle tries "
             "again", call, strerror(e));
}

/* Fork the child and turn what became of it into a verdict. */
static void run_child(struct edgert_ctx *ctx, er_cand *c, er_sb_contact contact, sb_result *r)
{
    int fds[2];
    sb_blank(r);
    if (pipe2(fds, O_CLOEXEC) != 0) {
        no_child(r, "pipe2", errno);
        return;
    }
    fflush(NULL); /* nothing buffered is written twice */
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        no_child(r, "fork", e);
        return;
    }
    if (pid == 0) {
        close(fds[0]);
        child(ctx, c, contact, fds[1], parent);
    }
    close(fds[1]);
    (void)fcntl(fds[0], F_SETFL, O_NONBLOCK); /* read_bytes polls, with the deadline */
    int pfd = child_pidfd(pid);
    int last = ER_STAGE_DLOPEN, status = 0, werr = 0, killed = 0;
    long long limit = er_sb_timeout_ms(ctx), deadline = er_sb_now_ms() + limit;
    int got = read_child(fds[0], pfd, deadline, r, &last);
    close(fds[0]);
    pid_t waited = reap_child(pid, pfd, got < 0 ? 0 : deadline, &status, &werr, &killed);
    if (got > 0)
        return; /* its verdict was whole: how it ended adds nothing */
    r->ok = 0;
    if (killed)
        got = -1; /* closed the pipe, then ran on: a timeout like any other */
    if (got == 0 && waited < 0) {
        /* SIGCHLD ignored, or another waitpid in this process reaped the
         * child: how it ended is not known, so nothing is concluded */
        r->passing = 1;
        r->gate = ER_GATE_PLUGIN_EXITED;
        snprintf(r->reason, sizeof r->reason, "PLUGIN_EXITED(unknown)");
        snprintf(r->detail, sizeof r->detail, "the child ended without an answer at stage: %s, "
                 "and how it ended cannot be read (waitpid: %s: is SIGCHLD ignored, or are "
                 "children reaped elsewhere in this process?); not cached",
                 er_stage_name(last), strerror(werr));
    } else if (got < 0) {
        r->gate = ER_GATE_PLUGIN_TIMEOUT;
        r->timeout_ms = limit;
        snprintf(r->reason, sizeof r->reason, "PLUGIN_TIMEOUT");
        snprintf(r->detail, sizeof r->detail, "no answer within %g s "
                 "(EDGERT_SANDBOX_TIMEOUT), at stage: %s", (double)limit / 1000.0,
                 er_stage_name(last));
    } else if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        /* the OOM killer, a user's kill: not the plugin's doing */
        r->passing = sig == SIGKILL || sig == SIGTERM || sig == SIGINT || sig == SIGHUP;
        r->gate = ER_GATE_PLUGIN_CRASHED;
        snprintf(r->reason, sizeof r->reason, "PLUGIN_CRASHED(%s)",
                 signal_name(WTERMSIG(status)));
        snprintf(r->detail, sizeof r->detail, "killed by %s at stage: %s",
                 signal_name(WTERMSIG(status)), er_stage_name(last));
    } else {
        r->gate = ER_GATE_PLUGIN_EXITED;
        snprintf(r->reason, sizeof r->reason, "PLUGIN_EXITED(%d)",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        snprintf(r->detail, sizeof r->detail, "the plugin ended the process (exit code %d) at "
                 "stage: %s", WIFEXITED(status) ? WEXITSTATUS(status) : -1, er_stage_name(last));
    }
}

/* A contended verdict's figures are measured again by a run this long after
 * them: not by the crowd that took them (its members start within seconds
 * of each other, and each would measure under the others again), but by
 * the next run that finds the machine as it usually is. */
#define ER_SB_REMEASURE_S 60

/* Whether the cached verdict r passed with contended figures that are due
 * to be measured again (a clock set back counts as due). */
static int remeasure_due(const sb_result *r)
{
    long long age = (long long)time(NULL) - r->measured_at;
    return r->ok && r->contended[0] && (age >= ER_SB_REMEASURE_S || age < 0);
}

/* The parent's judgement of a verdict the child just gave, whose figures
 * are `earlier` + 1's measurement: figures measured under contention
 * (common/contention.h, with this device's quiet read) are not kept (r's
 * figures NaN, r->contended says what was seen and measured); figures
 * measured quietly offer their read as the device's quiet one. */
static void judge_figures(struct edgert_ctx *ctx, sb_result *r, unsigned earlier)
{
    r->measured_at = (long long)time(NULL);
    int measured = !isnan(r->decode_tok_s) || !isnan(r->prefill_gflops);
    r->attempts = measured ? earlier + 1u : 0u;
    if (!r->ok || !measured)
        return;
    er_cpu_load load = {.wait_share = r->wait_share, .cpu_per_wall = r->cpu_per_wall,
                        .wait_per_wall = r->wait_per_wall, .run_queue = r->run_queue,
                        .cpus = r->cpus};
    char why[200], dec[32] = "no decode figure", pre[32] = "no prefill figure";
    if (ctx->contention_ignored ||
        !er_contended(&load, r->read_gbs, er_sb_quiet_read(ctx), why, sizeof why)) {
        er_sb_quiet_read_offer(ctx, r->read_gbs);
        return;
    }
    if (!isnan(r->decode_tok_s))
        snprintf(dec, sizeof dec, "%.3g tok/s", r->decode_tok_s);
    if (!isnan(r->prefill_gflops))
        snprintf(pre, sizeof pre, "%.3g GFLOP/s", r->prefill_gflops);
    snprintf(r->contended, sizeof r->contended, "%s; measured %s, %s", why, dec, pre);
    r->decode_tok_s = r->prefill_gflops = r->decode_min = r->decode_max = r->read_gbs = NAN;
}

/* Release first contact's lock, unless edgert_open is meeting its
 * candidates (ctx->sb_batch): then its end does (er_sb_batch_end). */
static void let_go(struct edgert_ctx *ctx)
{
    if (ctx->sb_batch)
        return;
    er_sb_unlock(ctx->sb_lock_fd);
    ctx->sb_lock_fd = -1;
}

/* First contact proper, under the lock: r holds the cached verdict when
 * `redo` (its contended figures are due again), else nothing; on return,
 * the verdict this process takes, 1 when it was read from the cache. */
static int meet(struct edgert_ctx *ctx, er_cand *c, er_sb_contact contact, sb_result *r,
                int redo)
{
    unsigned earlier = redo ? r->attempts : 0u;
    /* One first contact at a time among this user's processes: a crowd
     * started together (a server's workers) would otherwise meet every
     * plugin at once, each measuring the others' load, and cache that.
     * Who waited takes the verdict the holder wrote. edgert_open keeps the
     * lock until it has met all its candidates (ctx->sb_batch): released
     * after each, the crowd loaded the first plugin in-process (its init
     * and self-test, 11 processes on 2 CPUs) while the holder measured the
     * second, whose threads then waited for a CPU 30-58% of the time. */
    /* (the holder's child has the time limit, then is killed and
     * reaped: the wait is that and a margin) */
    int timed_out = 0, lock = ctx->sb_lock_fd;
    if (lock < 0)
        lock = er_sb_lock(er_sb_timeout_ms(ctx) + 10000, &timed_out);
    sb_result again;
    if (lock >= 0 && er_sb_cache_read(ctx, c, &again) == 0) {
        if (!remeasure_due(&again)) { /* met while this process waited, or quiet since */
            *r = again;
            ctx->sb_lock_fd = lock;
            let_go(ctx);
            return 1;
        }
        earlier = again.attempts;
        redo = 1;
    }
    if (timed_out)
        er_diag_add(&ctx->diags, EDGERT_LOG_WARN, c->m.library_path, 0, 0,
                    "%s: other processes held first contact's lock for %lld s (the "
                    "plugin time limit and 10 s): met alongside them", c->m.name,
                    er_sb_timeout_ms(ctx) / 1000 + 10);
    if (redo)
        er_log(ctx, EDGERT_LOG_INFO, "first contact with %s (%s) again: its last figures "
               "were measured under contention; measuring them in a child process",
               c->m.name, c->m.library_path);
    else
        er_log(ctx, EDGERT_LOG_INFO, "first contact with %s (%s): checking it in a child "
               "process", c->m.name, c->m.library_path);
    ctx->sb_lock_fd = lock;
    run_child(ctx, c, contact, r);
    judge_figures(ctx, r, earlier);
    if (!r->passing)
        er_sb_cache_write(ctx, c, r);
    let_go(ctx);
    return 0;
}

void er_sb_batch_end(struct edgert_ctx *ctx)
{
    ctx->sb_batch = 0;
    let_go(ctx);
}

/* The verdict's figures, and what was seen of their moment, into c's
 * public view (not for a planned device or without evidence). */
static void take_figures(struct edgert_ctx *ctx, er_cand *c, const sb_result *r)
{
    /* Figures of THIS host: none for a planned device (plan mode's export
     * meets its plugin here too). The quick decode rate is kept on its own,
     * whatever else was measured: the selector compares every backend of a
     * tier by one source (selector.c, decode_source). */
    if (ctx->no_evidence || ctx->dev.planned)
        return;
    c->pub.first_contact_decode_tokens_per_s = r->decode_tok_s;
    c->pub.first_contact_prefill_gflops = r->prefill_gflops;
    int ranged = er_is_range(r->decode_min, r->decode_tok_s, r->decode_max);
    c->pub.first_contact_decode_min = ranged ? r->decode_min : NAN;
    c->pub.first_contact_decode_max = ranged ? r->decode_max : NAN;
    c->pub.first_contact_read_gbs =
        !isnan(r->decode_tok_s) && r->read_gbs > 0.0 ? r->read_gbs : NAN;
    c->pub.first_contact_wait_share = r->wait_share;
    c->pub.first_contact_attempts = r->attempts;
    /* (again after a deferred load measured anew what the cache had said) */
    snprintf(c->contention, sizeof c->contention, "%s", r->contended);
    c->pub.first_contact_contention = r->contended[0] ? c->contention : NULL;
    /* a figure from `edgert calibrate` (evidence.c) is the better measurement */
    if (!isnan(r->decode_tok_s) && !c->pub.measured.where) {
        c->pub.measured.decode_tokens_per_s = r->decode_tok_s;
        c->pub.measured.prefill_gflops = r->prefill_gflops;
        c->pub.measured.where = "first-contact quick measurement on this device";
    }
}

int er_sandbox(struct edgert_ctx *ctx, er_cand *c, int cached_only, er_sb_contact contact)
{
    sb_result r;
    int cached = er_sb_cache_read(ctx, c, &r) == 0;
    /* a verdict whose figures were contended is measured again a minute on */
    int redo = cached && remeasure_due(&r);
    if ((!cached || redo) && !cached_only)
        cached = meet(ctx, c, contact, &r, redo);
    else if (!cached)
        return 0; /* cached_only: not known yet */
    if (!r.ok) {
        er_cand_reason(c, (er_gate_id)r.gate, "%s", r.reason);
        char *file = cached ? er_sb_cache_file(ctx, c, 0) : NULL;
        er_cand_detail(c, "first contact%s%s%s: %s",
                       !cached ? ""
                       : file  ? " (cached verdict; to meet the plugin again, delete "
                               : " (cached verdict",
                       file ? file : "", cached ? ")" : "", r.detail);
        free(file);
        return -1;
    }
    if (r.packed_outside)
        er_diag_add(&ctx->diags, EDGERT_LOG_WARN, c->m.library_path, 0, 0,
                    "%s: its packed weights did not land in the packing arena (allocated "
                    "elsewhere than host->alloc, which a plugin must use for them, or aligned "
                    "above 4 KiB), so first contact cannot evict them before timing: no quick "
                    "decode figure", c->m.name);
    if (r.pack_refused[0])
        er_diag_add(&ctx->diags, EDGERT_LOG_WARN, c->pub.manifest_path, 0, 0,
                    "%s: first contact could not measure it: its library refused to pack int4 "
                    "weights in the manifest's layout (%s); edgert_pack will refuse them too, "
                    "so check the manifest's layout against the library", c->m.name,
                    r.pack_refused);
    take_figures(ctx, c, &r);
    c->pub.arithmetic_checked = r.checked_outputs;
    /* a verdict due to be measured again is taken for now, not settled: a
     * deferred load (defer_load reads the cache first, cached_only) meets
     * the plugin again when it loads it */
    c->sandbox_passed = !(cached_only && redo);
    return 0;
}
