/*
 * tests/sandbox/test_sandbox_contention.c — first contact measured while other
 * load takes the CPUs (core/common/contention.c, core/sandbox/sandbox.c): the
 * rule itself, pure; a first contact beside a busy loop on every CPU, twice
 * over, keeps its verdict and no figure, says what it saw, lets its tier be
 * ranked by declared figures, and is not measured again by a run within the
 * minute (a crowd's members take it as it is); a run after that measures
 * again and counts the attempts; EDGERT_CONTENTION=ignore keeps the figures.
 * The tree's tests run with EDGERT_CONTENTION=ignore (two at once on two
 * CPUs): this program unsets it.
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
#include <sys/wait.h>
#include <unistd.h>

#include "common/contention.h"
#include "edgert/edgert.h"
#include "test_util.h"

/* ---- the rule ------------------------------------------------------------------------ */

static void test_rule(void **state)
{
    (void)state;
    char why[200];
    er_cpu_load quiet = {.wait_share = 0.05, .cpu_per_wall = 1.4, .wait_per_wall = 0.07,
                         .run_queue = 2, .cpus = 2};
    er_cpu_load busy = {.wait_share = 0.25, .cpu_per_wall = 0.9, .wait_per_wall = 0.3,
                        .run_queue = 5, .cpus = 2};
    er_cpu_load unknown = {.wait_share = NAN, .cpu_per_wall = NAN, .wait_per_wall = NAN,
                           .run_queue = -1, .cpus = 0};
    /* a plugin that sleeps: a high share of a wait that is nothing of the wall time */
    er_cpu_load sleeper = {.wait_share = 0.23, .cpu_per_wall = 0.003, .wait_per_wall = 0.001,
                           .run_queue = 1, .cpus = 2};
    assert_int_equal(er_contended(&sleeper, NAN, NAN, why, sizeof why), 0);
    assert_int_equal(er_contended(&quiet, NAN, NAN, why, sizeof why), 0);
    assert_string_equal(why, "");
    assert_int_equal(er_contended(&busy, 30.0, 60.0, why, sizeof why), 1);
    assert_string_equal(why, "its threads waited for a CPU 25% of the time (run queue 5 on 2 "
                             "CPUs)");
    /* the bar itself counts as contended; just under it does not */
    busy.wait_share = ER_CONTENDED_WAIT;
    assert_int_equal(er_contended(&busy, NAN, NAN, why, sizeof why), 1);
    busy.wait_share = 0.999 * ER_CONTENDED_WAIT;
    assert_int_equal(er_contended(&busy, NAN, NAN, why, sizeof why), 0);
    /* memory: under a third of the quiet read, whatever the CPUs say */
    assert_int_equal(er_contended(&quiet, 4.1, 60.0, why, sizeof why), 1);
    assert_string_equal(why, "it read memory at 4.1 GB/s, under a third of this device's quiet "
                             "60.0 GB/s (run queue 2 on 2 CPUs)");
    assert_int_equal(er_contended(&quiet, 25.0, 60.0, why, sizeof why), 0); /* a busy window */
    assert_int_equal(er_contended(&unknown, 4.1, NAN, why, sizeof why), 0); /* no quiet yet */
    assert_int_equal(er_contended(&unknown, NAN, 60.0, why, sizeof why), 0);
    assert_int_equal(er_contended(NULL, NAN, NAN, why, sizeof why), 0);
    /* the setting */
    assert_int_equal(er_contention_ignored(NULL), 0);
    assert_int_equal(er_contention_ignored(""), 0);
    assert_int_equal(er_contention_ignored("judge"), 0);
    assert_int_equal(er_contention_ignored("ignore"), 1);
    assert_int_equal(er_contention_ignored("Ignore"), -1);
    assert_int_equal(er_contention_ignored("off"), -1);
}

/* Two marks into a load: shares from the differences, nothing from a pair
 * that cannot be one process's (a sum that went back: a thread ended). */
static void test_marks(void **state)
{
    (void)state;
    er_cpu_mark a = {.wall_ns = 0, .run_ns = 1000, .wait_ns = 100, .known = 1, .run_queue = 1};
    er_cpu_mark b = {.wall_ns = 1000, .run_ns = 2500, .wait_ns = 600, .known = 1, .run_queue = 4};
    er_cpu_load l = er_cpu_load_between(&a, &b);
    assert_true(fabs(l.wait_share - 0.25) < 1e-12); /* 500 of 2000 */
    assert_true(fabs(l.cpu_per_wall - 1.5) < 1e-12);
    assert_true(fabs(l.wait_per_wall - 0.5) < 1e-12);
    assert_int_equal(l.run_queue, 4);
    b.run_ns = 900;
    assert_true(isnan(er_cpu_load_between(&a, &b).wait_share));
    b.run_ns = 2500;
    b.known = 0;
    assert_true(isnan(er_cpu_load_between(&a, &b).wait_share));
    /* this process, live: two marks a busy stretch apart, its one thread
     * ran for most of it (where the kernel keeps schedstat) */
    er_cpu_mark m0, m1;
    er_cpu_mark_now(&m0);
    for (volatile unsigned long x = 0; x < 50000000ul; x++)
        ;
    er_cpu_mark_now(&m1);
    er_cpu_load live = er_cpu_load_between(&m0, &m1);
    if (m1.run_ns > 0)
        assert_true(live.cpu_per_wall > 0.2 && live.cpu_per_wall < 1.5);
}

/* ---- first contact beside busy loops --------------------------------------------------- */

static void count_contacts(void *user, edgert_log_level level, const char *message)
{
    (void)level;
    if (strncmp(message, "first contact with ", 19) == 0)
        ++*(int *)user;
}

/* A handle on `dir`'s manifests that reads the environment and keeps first
 * contact's figures, on 2 threads, counting first contacts into *contacts;
 * with `defer`, loading nothing until a selection (as the CLI opens). */
static edgert_ctx *open_counting_as(const char *dir, int *contacts, int defer)
{
    const char *paths[1] = {dir};
    edgert_options o = {.struct_size = sizeof o};
    o.defer_load = defer;
    o.manifest_paths = paths;
    o.manifest_path_count = 1;
    o.threads = 2;
    o.log = count_contacts;
    o.log_user = contacts;
    o.log_level = EDGERT_LOG_INFO;
    edgert_ctx *ctx = NULL;
    char err[512] = "";
    if (edgert_open(&o, &ctx, err, sizeof err) != EDGERT_OK)
        fail_msg("edgert_open: %s", err);
    return ctx;
}

static edgert_ctx *open_counting(const char *dir, int *contacts)
{
    return open_counting_as(dir, contacts, 0);
}

/* Two backends on one test plugin, declaring 50 and 90 tok/s. */
static char *two_backends(void)
{
    char *dir = tu_tmpdir(), *lib = tu_plugin("tp_good");
    free(tu_manifest(dir, "one.yaml", "test-one", lib, NULL,
                     "plugin_name: test-good\n"
                     "declared: {decode_tokens_per_s: 50, measured_on: \"test\"}\n"));
    free(tu_manifest(dir, "two.yaml", "test-two", lib, NULL,
                     "plugin_name: test-good\n"
                     "declared: {decode_tokens_per_s: 90, measured_on: \"test\"}\n"));
    free(lib);
    return dir;
}

/* Every cached verdict's measured_at set back by two minutes' worth. */
static void age_verdicts(const char *cache)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "sed -i 's/^measured_at .*/measured_at 1000/' "
             "'%s'/edgert/first-contact/*-*", cache);
    assert_int_equal(system(cmd), 0);
}

static void test_contended_keeps_verdict_not_figures(void **state)
{
    (void)state;
    if (!tu_schedstat_known())
        tu_skip("this kernel gives no per-thread schedstat: no contention can be seen");
    unsetenv("EDGERT_CONTENTION");
    char *saved, *cache = tu_fresh_cache(&saved), *dir = two_backends();
    pid_t burners[64];
    int nb = tu_burners_start(burners, 64), contacts = 0;
    edgert_ctx *ctx = open_counting(dir, &contacts);
    tu_burners_stop(burners, nb);
    assert_int_equal(contacts, 2);
    const char *names[2] = {"test-one", "test-two"};
    for (int i = 0; i < 2; i++) {
        const edgert_candidate *c = edgert_candidate_find(ctx, names[i]);
        print_message("  %s: waited %.0f%%: %s\n", names[i], 100.0 * c->first_contact_wait_share,
                      c->first_contact_contention ? c->first_contact_contention : "(kept)");
        assert_true(c->eligible && c->loaded && c->arithmetic_checked > 0);
        if (!c->first_contact_contention)
            fail_msg("%s: measured beside %d busy loops, its threads waiting %.0f%% of the "
                     "time, and its figures kept", names[i], nb,
                     100.0 * c->first_contact_wait_share);
        assert_non_null(strstr(c->first_contact_contention, "waited for a CPU"));
        assert_non_null(strstr(c->first_contact_contention, "; measured "));
        assert_true(c->first_contact_wait_share >= ER_CONTENDED_WAIT);
        assert_true(isnan(c->first_contact_decode_tokens_per_s));
        assert_true(isnan(c->first_contact_prefill_gflops));
        assert_true(isnan(c->measured.decode_tokens_per_s));
        assert_int_equal(c->first_contact_attempts, 1);
    }
    /* ranked by what the manifests declare: two at 90 before one at 50 */
    edgert_selection *sel = NULL;
    char err[512] = "";
    assert_int_equal(edgert_select(ctx, EDGERT_PRIORITY_SPEED, NULL, &sel, err, sizeof err),
                     EDGERT_OK);
    assert_string_equal(edgert_candidate_at(ctx, edgert_selection_index(sel, 0))->name,
                        "test-two");
    assert_string_equal(edgert_selection_decode_source(sel, 0), "declared");
    edgert_selection_free(sel);
    edgert_close(ctx);
    /* the next run within the minute takes the verdict as it is */
    contacts = 0;
    ctx = open_counting(dir, &contacts);
    assert_int_equal(contacts, 0);
    assert_non_null(edgert_candidate_find(ctx, "test-one")->first_contact_contention);
    assert_true(edgert_candidate_find(ctx, "test-one")->loaded);
    edgert_close(ctx);
    /* a run a minute on measures again, and counts the attempt: kept if the
     * machine is quiet now (another test beside this one may not leave it
     * so: then contended again, and said so). Opened as the CLI opens
     * (defer_load: the cache read first, the plugins met when selected),
     * which once took the due verdict as settled and never measured again. */
    age_verdicts(cache);
    contacts = 0;
    ctx = open_counting_as(dir, &contacts, 1);
    assert_int_equal(contacts, 0);
    assert_int_equal(edgert_select(ctx, EDGERT_PRIORITY_SPEED, NULL, &sel, err, sizeof err),
                     EDGERT_OK);
    edgert_selection_free(sel);
    assert_int_equal(contacts, 2);
    for (int i = 0; i < 2; i++) {
        const edgert_candidate *c = edgert_candidate_find(ctx, names[i]);
        assert_int_equal(c->first_contact_attempts, 2);
        assert_true(c->loaded);
        assert_true(!c->first_contact_contention == (c->first_contact_decode_tokens_per_s > 0.0));
        print_message("  %s again: %s\n", names[i],
                      c->first_contact_contention ? c->first_contact_contention : "kept");
    }
    edgert_close(ctx);
    /* and then not again: a kept figure, or a contended one of just now */
    contacts = 0;
    edgert_close(open_counting(dir, &contacts));
    assert_int_equal(contacts, 0);
    tu_rmrf(dir);
    tu_restore_cache(cache, saved);
    setenv("EDGERT_CONTENTION", "ignore", 1);
}

/* EDGERT_CONTENTION=ignore: the same busy loops, the figures kept (and the
 * wait still reported); a value it does not know warns and judges. */
static void test_ignore_keeps_figures(void **state)
{
    (void)state;
    if (!tu_schedstat_known())
        tu_skip("this kernel gives no per-thread schedstat: no contention can be seen");
    setenv("EDGERT_CONTENTION", "ignore", 1);
    char *saved, *cache = tu_fresh_cache(&saved), *dir = two_backends();
    pid_t burners[64];
    int nb = tu_burners_start(burners, 64), contacts = 0;
    edgert_ctx *ctx = open_counting(dir, &contacts);
    tu_burners_stop(burners, nb);
    const edgert_candidate *c = edgert_candidate_find(ctx, "test-one");
    assert_null(c->first_contact_contention);
    assert_true(c->first_contact_decode_tokens_per_s > 0.0);
    assert_true(c->first_contact_wait_share >= 0.0);
    edgert_close(ctx);
    tu_rmrf(dir);
    tu_restore_cache(cache, saved);
    setenv("EDGERT_CONTENTION", "sometimes", 1);
    cache = tu_fresh_cache(&saved);
    dir = two_backends();
    ctx = open_counting(dir, &contacts);
    int warned = 0;
    for (size_t i = 0; i < edgert_diag_count(ctx); i++)
        warned |= strstr(edgert_diag_at(ctx, i)->message,
                         "EDGERT_CONTENTION=sometimes is not judge or ignore") != NULL;
    assert_true(warned);
    edgert_close(ctx);
    tu_rmrf(dir);
    tu_restore_cache(cache, saved);
    setenv("EDGERT_CONTENTION", "ignore", 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule),
        cmocka_unit_test(test_marks),
        cmocka_unit_test(test_contended_keeps_verdict_not_figures),
        cmocka_unit_test(test_ignore_keeps_figures),
    };
    return tu_run_group("sandbox contention", tests, NULL, NULL);
}
