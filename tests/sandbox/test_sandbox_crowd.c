/*
 * tests/sandbox/test_sandbox_crowd.c — first contact met by a crowd: processes
 * started together on a fresh cache meet each plugin once between them (one
 * child per plugin, counted from their logs), under the per-user lock, and
 * all take that one verdict and its figures (or, beside busy loops, all see
 * them set aside as contended, and select alike); a process killed (-9) in the
 * middle of a first contact does not keep the next one waiting (the lock is
 * its open descriptor's, released with it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "edgert/edgert.h"
#include "test_util.h"

#define CROWD 8

/* What one process of the crowd saw. */
typedef struct seen {
    int ok, contacts, loaded, contended;
    double decode[2];
    char selected[32];
    char err[200];
} seen;

static void count_contacts(void *user, edgert_log_level level, const char *message)
{
    (void)level;
    if (strncmp(message, "first contact with ", 19) == 0)
        ++*(int *)user;
}

/* A handle on the manifests of `dir`, the environment read (its
 * EDGERT_SANDBOX_TIMEOUT among it) and first contact's figures kept; logs
 * at info to `log`. NULL with err on failure (no cmocka assert: a forked
 * member calls it). */
static edgert_ctx *open_dir(const char *dir, edgert_log_fn log, void *user, char *err,
                            size_t err_len)
{
    const char *paths[1] = {dir};
    edgert_options o = {.struct_size = sizeof o};
    o.manifest_paths = paths;
    o.manifest_path_count = 1;
    o.threads = 2;
    o.log = log;
    o.log_user = user;
    o.log_level = log ? EDGERT_LOG_INFO : EDGERT_LOG_ERROR;
    edgert_ctx *ctx = NULL;
    return edgert_open(&o, &ctx, err, err_len) == EDGERT_OK ? ctx : NULL;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* In a child: wait for the start (the pipe `go` closed), open the folder,
 * report what was seen through `out`, leave. */
static void crowd_member(const char *dir, int go, int out)
{
    char b;
    seen s = {0};
    if (read(go, &b, 1) < 0) /* EOF: every member starts now */
        _exit(2);
    edgert_ctx *ctx = open_dir(dir, count_contacts, &s.contacts, s.err, sizeof s.err);
    if (ctx) {
        const char *names[2] = {"test-one", "test-two"};
        s.ok = 1;
        for (int i = 0; i < 2; i++) {
            const edgert_candidate *c = edgert_candidate_find(ctx, names[i]);
            s.loaded += c && c->eligible && c->arithmetic_checked > 0;
            s.decode[i] = c ? c->first_contact_decode_tokens_per_s : NAN;
            s.contended += c && c->first_contact_contention;
        }
        edgert_selection *sel = NULL;
        if (edgert_select(ctx, EDGERT_PRIORITY_SPEED, NULL, &sel, s.err, sizeof s.err) ==
            EDGERT_OK)
            snprintf(s.selected, sizeof s.selected, "%s",
                     edgert_candidate_at(ctx, edgert_selection_index(sel, 0))->name);
        edgert_selection_free(sel);
        edgert_close(ctx);
    }
    ssize_t w = write(out, &s, sizeof s);
    _exit(w == (ssize_t)sizeof s ? 0 : 3);
}

/* CROWD processes at once on a fresh cache, two plugins declaring 50 and
 * 90 tok/s: two first contacts in all, every process with the same two
 * figures (the one verdict) and the same selection. With `burn`, beside a
 * busy loop on every CPU twice over, contention judged (EDGERT_CONTENTION
 * unset): every process sees both figures set aside, none cached. */
static void run_crowd(int burn)
{
    char *saved, *cache = tu_fresh_cache(&saved);
    char *dir = tu_tmpdir(), *lib = tu_plugin("tp_good");
    free(tu_manifest(dir, "one.yaml", "test-one", lib, NULL, "plugin_name: test-good\n"
                     "declared: {decode_tokens_per_s: 50, measured_on: \"test\"}\n"));
    free(tu_manifest(dir, "two.yaml", "test-two", lib, NULL, "plugin_name: test-good\n"
                     "declared: {decode_tokens_per_s: 90, measured_on: \"test\"}\n"));
    free(lib);
    pid_t burners[64];
    int nb = 0;
    if (burn) {
        unsetenv("EDGERT_CONTENTION");
        nb = tu_burners_start(burners, 64);
    }
    int go[2], out[2];
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(out), 0);
    pid_t pids[CROWD];
    for (int i = 0; i < CROWD; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            close(go[1]);
            close(out[0]);
            crowd_member(dir, go[0], out[1]);
        }
    }
    close(go[0]);
    close(out[1]);
    close(go[1]); /* start */
    int contacts = 0, contended = 0;
    seen first = {0};
    for (int i = 0; i < CROWD; i++) {
        seen s;
        assert_int_equal(read(out[0], &s, sizeof s), (ssize_t)sizeof s);
        if (!s.ok || s.loaded != 2)
            fail_msg("member %d: ok %d, loaded and checked %d of 2: %s", i, s.ok, s.loaded, s.err);
        contacts += s.contacts;
        contended += s.contended;
        if (i == 0)
            first = s;
        for (int p = 0; p < 2; p++) /* one verdict each: the same figure, bit for bit */
            if (memcmp(&s.decode[p], &first.decode[p], sizeof(double)) != 0)
                fail_msg("member %d saw %.17g for plugin %d, member 0 %.17g", i, s.decode[p], p,
                         first.decode[p]);
        if (strcmp(s.selected, first.selected) != 0 || !s.selected[0])
            fail_msg("member %d selected '%s', member 0 '%s' (%s)", i, s.selected,
                     first.selected, s.err);
    }
    close(out[0]);
    for (int i = 0; i < CROWD; i++) {
        int st = 0;
        assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    tu_burners_stop(burners, nb);
    if (contacts != 2)
        fail_msg("%d processes met 2 plugins with %d first contacts (one each expected)", CROWD,
                 contacts);
    print_message("  %d processes%s: selected %s, %d of %d figures set aside as contended\n",
                  CROWD, burn ? " beside busy loops" : "", first.selected, contended,
                  2 * CROWD);
    if (burn) {
        /* set aside by all: the tier ranked by what is declared */
        assert_int_equal(contended, 2 * CROWD);
        assert_true(isnan(first.decode[0]) && isnan(first.decode[1]));
        assert_string_equal(first.selected, "test-two");
        setenv("EDGERT_CONTENTION", "ignore", 1);
    }
    tu_rmrf(dir);
    tu_restore_cache(cache, saved);
}

static void test_crowd_meets_each_plugin_once(void **state)
{
    (void)state;
    run_crowd(0);
}

/* The same crowd with a busy loop on every CPU, twice over. */
static void test_crowd_under_load(void **state)
{
    (void)state;
    if (!tu_schedstat_known())
        tu_skip("this kernel gives no schedstat: no contention can be seen");
    run_crowd(1);
}

/* 1 when another process holds the lock of the verdict folder under `cache`. */
static int lock_held(const char *cache)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/edgert/first-contact/.lock", cache);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int held = flock(fileno(f), LOCK_EX | LOCK_NB) != 0;
    fclose(f); /* (a lock taken here is released with it) */
    return held;
}

/* A process killed (-9) while its first contact holds the lock (a plugin
 * that hangs, with a long limit): the next process is not kept waiting, and
 * meets the plugin afresh (nothing was cached). */
static void test_killed_holder_blocks_nobody(void **state)
{
    (void)state;
    char *saved, *cache = tu_fresh_cache(&saved);
    char *hang = tu_tmpdir(), *good = tu_tmpdir();
    char *lib = tu_plugin("tp_hang_measure");
    free(tu_manifest(hang, "hang.yaml", "test-hang-measure", lib, NULL, NULL));
    free(lib);
    lib = tu_plugin("tp_good");
    free(tu_manifest(good, "good.yaml", "test-good", lib, NULL, NULL));
    free(lib);
    setenv("EDGERT_SANDBOX_TIMEOUT", "120", 1);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char err[200];
        /* hangs in first contact, holding the lock */
        edgert_ctx *ctx = open_dir(hang, NULL, NULL, err, sizeof err);
        edgert_close(ctx);
        _exit(0);
    }
    double t0 = now_s();
    while (!lock_held(cache) && now_s() - t0 < 60.0)
        usleep(20000);
    if (!lock_held(cache))
        fail_msg("the first process never held first contact's lock");
    usleep(200000); /* well inside its (hanging) first contact */
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    /* the next process meets another plugin at once: the lock went with the
     * killed process (its child, whose end the kernel signals, had closed
     * its copy before any plugin code ran) */
    int contacts = 0;
    char err[200] = "";
    t0 = now_s();
    edgert_ctx *ctx = open_dir(good, count_contacts, &contacts, err, sizeof err);
    double took = now_s() - t0;
    if (!ctx)
        fail_msg("edgert_open: %s", err);
    assert_true(edgert_candidate_find(ctx, "test-good")->loaded);
    edgert_close(ctx);
    assert_int_equal(contacts, 1);
    if (took > 60.0) /* a held lock would have kept it 130 s */
        fail_msg("the next process waited %.1f s after the holder was killed", took);
    /* and the hanging plugin is met afresh, under a short limit now */
    setenv("EDGERT_SANDBOX_TIMEOUT", "1", 1);
    contacts = 0;
    ctx = open_dir(hang, count_contacts, &contacts, err, sizeof err);
    assert_non_null(ctx);
    const edgert_candidate *c = edgert_candidate_find(ctx, "test-hang-measure");
    assert_int_equal(contacts, 1);
    assert_true(c->reason_count > 0);
    assert_string_equal(c->reasons[0], "PLUGIN_TIMEOUT");
    edgert_close(ctx);
    unsetenv("EDGERT_SANDBOX_TIMEOUT");
    tu_rmrf(hang);
    tu_rmrf(good);
    tu_restore_cache(cache, saved);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crowd_meets_each_plugin_once),
        cmocka_unit_test(test_crowd_under_load),
        cmocka_unit_test(test_killed_holder_blocks_nobody),
    };
    return tu_run_group("sandbox crowd", tests, NULL, NULL);
}
