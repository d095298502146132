/*
 * tools/calibrate.c — `edgert calibrate`: measure every eligible in-process
 * backend on this device (bench decode + verify) and store the figures as
 * evidence the selector ranks by (core/evidence/evidence.c).
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"
#include "cli.h"
#include "common/contention.h"
#include "verify.h"

/* Decode rounds per backend, interleaved: round r measures every backend
 * once before round r + 1 starts, and each backend's figure is the median
 * of its rounds. Memory bandwidth moves with the neighbours (27-64 GB/s
 * seen on one machine within an hour), and decode is bound by it: backends
 * measured one after the other compare windows as much as kernels, while
 * interleaved rounds see the same windows. */
#define CAL_ROUNDS 3u
/* A round whose threads waited for a CPU (other load: common/contention.h)
 * measured that load as much as the backend, and its median could decide a
 * ranking: it is set aside and measured again, up to this many times per
 * round; a round contended every time stores nothing for its backend. */
#define CAL_REPEATS 3u

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One bench of `name` as bc says (calibrate's options with the phase set),
 * announced as `what`. EXIT_OK, or EXIT_FAIL after saying why. */
static int bench_pass(edgert_ctx *ctx, const cli *bc, const workload *w, const char *name,
                      const char *what, bench_result *br)
{
    char err[1024] = "";
    if (!bc->quiet && !bc->json)
        tfprintf(stderr, "calibrate: %s: bench (%s)...\n", name, what);
    if (bench_backend(ctx, bc, w, NULL, name, BENCH_STEPS_ONLY, br, err, sizeof err) != EDGERT_OK) {
        tfprintf(stderr, "edgert calibrate: %s: bench (%s) failed: %s; no evidence stored for "
                 "it\n", name, what, err);
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

/* One decode bench of `name` into *tps, measured again while it runs under
 * contention (up to CAL_REPEATS times, counted into *repeated), unless
 * EDGERT_CONTENTION=ignore. EXIT_OK, or EXIT_FAIL after saying why. */
static int bench_one(edgert_ctx *ctx, const cli *c, const workload *w, const char *name,
                     unsigned round, bench_result *br, double *tps, unsigned *repeated)
{
    cli bc = *c;
    bc.phase = PHASE_DECODE;
    bc.options = NULL;
    const int judged = er_contention_ignored(secure_getenv("EDGERT_CONTENTION")) != 1;
    for (unsigned tries = 0;; tries++) {
        char what[96], why[200] = "";
        snprintf(what, sizeof what, "decode, round %u of %u%s", round + 1u, CAL_ROUNDS,
                 tries ? ", again" : "");
        er_cpu_mark before, after;
        er_cpu_mark_now(&before);
        if (bench_pass(ctx, &bc, w, name, what, br) != EXIT_OK)
            return EXIT_FAIL;
        er_cpu_mark_now(&after);
        er_cpu_load load = er_cpu_load_between(&before, &after);
        if (!judged || !er_contended(&load, NAN, NAN, why, sizeof why)) {
            *tps = br->tokens_per_s;
            return EXIT_OK;
        }
        if (tries == CAL_REPEATS) {
            tfprintf(stderr, "edgert calibrate: %s: decode round %u ran under contention %u "
                     "times (last: %s); no evidence stored for it: calibrate again when the "
                     "machine is quiet (or set EDGERT_CONTENTION=ignore to keep such "
                     "figures)\n", name, round + 1u, CAL_REPEATS + 1u, why);
            return EXIT_FAIL;
        }
        ++*repeated;
        if (!c->quiet && !c->json)
            tfprintf(stderr, "calibrate: %s: round %u set aside (%.2f tok/s measured while %s): "
                     "measuring it again\n", name, round + 1u, br->tokens_per_s, why);
    }
}

/* Prefill of `name` at M = CAL_PREFILL_M into *gflops (bench's own repeats).
 * Inside a decode group prefill decides (core/select/selector.c), so it is measured
 * here rather than taken from a manifest's claim: avx512-w4a16 declares its
 * int16 prefill (689 GFLOP/s) and prefills on AMX-BF16 tiles where it can
 * (1131 measured on a Xeon with AMX). Bound by compute, not by the memory
 * windows, so one pass after every decode round serves, and it heats no
 * other backend's decode. EXIT_OK, or EXIT_FAIL after saying why. */
#define CAL_PREFILL_M 512u
static int prefill_one(edgert_ctx *ctx, const cli *c, const workload *w, const char *name,
                       bench_result *br, double *gflops)
{
    cli bc = *c;
    bc.phase = PHASE_PREFILL;
    bc.options = NULL;
    bc.m = CAL_PREFILL_M; /* what edgert_figures.prefill_gflops means */
    bc.repeat = 0;        /* --repeat counts decode steps */
    char what[32];
    snprintf(what, sizeof what, "prefill, M = %u", CAL_PREFILL_M);
    if (bench_pass(ctx, &bc, w, name, what, br) != EXIT_OK)
        return EXIT_FAIL;
    *gflops = br->have_prefill ? br->prefill_gflops : NAN;
    return EXIT_OK;
}

/* Verify one backend and fill *e with the median of its decode rounds.
 * EXIT_OK, or EXIT_FAIL after saying why nothing is stored for it. */
static int verify_one(edgert_ctx *ctx, const cli *c, const workload *w, const char *name,
                      const double *tps, unsigned repeated, double gflops,
                      const bench_result *br, verify_result *v, edgert_evidence *e)
{
    char err[1024] = "";
    if (!c->quiet && !c->json)
        tfprintf(stderr, "calibrate: %s: verify...\n", name);
    if (verify_backend(ctx, c, w, name, v, err, sizeof err) != EDGERT_OK) {
        tfprintf(stderr, "edgert calibrate: %s: verify failed to run: %s; no evidence stored\n",
                 name, err);
        return EXIT_FAIL;
    }
    double sorted[CAL_ROUNDS];
    memcpy(sorted, tps, sizeof sorted);
    qsort(sorted, CAL_ROUNDS, sizeof sorted[0], cmp_double);
    *e = (edgert_evidence){
        .struct_size = sizeof *e, .backend = name, .decode_tokens_per_s = sorted[CAL_ROUNDS / 2u],
        .prefill_gflops = gflops, .top1_agreement = v->top1_agreement, .kl_mean = v->kl_mean,
        .sqnr_min_db = v->sqnr_min_db, .threads = br->threads, .workload = w->name,
        .correct = v->correct, .top1_tokens = v->tokens, .decode_rounds_repeated = repeated,
    };
    if (!v->correct)
        tfprintf(stderr,
                 "edgert calibrate: %s FAILED verify (%s): it will not be selected on "
                 "this device\n",
                 name, v->first_failure);
    return EXIT_OK;
}

static void print_stored(edgert_ctx *ctx, const cli *c, const workload *w, const char *path,
                         const edgert_evidence *ev, size_t count)
{
    if (c->json) {
        json_w j;
        json_init(&j, json_out());
        json_obj(&j);
        json_kstr(&j, "evidence_file", path);
        json_kstr(&j, "device_fingerprint", edgert_device_fingerprint(ctx));
        json_kstr(&j, "workload", w->name);
        json_key(&j, "results");
        json_arr(&j);
        for (size_t i = 0; i < count; i++) {
            json_obj(&j);
            json_kstr(&j, "name", ev[i].backend);
            json_knum(&j, "decode_tokens_per_s", ev[i].decode_tokens_per_s);
            json_knum(&j, "decode_tokens_per_s_min", ev[i].decode_tokens_per_s_min);
            json_knum(&j, "decode_tokens_per_s_max", ev[i].decode_tokens_per_s_max);
            json_kint(&j, "decode_rounds", CAL_ROUNDS);
            json_kint(&j, "decode_rounds_repeated", ev[i].decode_rounds_repeated);
            json_knum(&j, "prefill_gflops", ev[i].prefill_gflops);
            json_knum(&j, "top1_agreement", ev[i].top1_agreement);
            json_knum(&j, "top1_tokens", ev[i].top1_tokens ? ev[i].top1_tokens : NAN);
            json_knum(&j, "kl_mean", ev[i].kl_mean);
            json_knum(&j, "sqnr_min_db", ev[i].sqnr_min_db);
            json_kbool(&j, "correct", ev[i].correct == 1);
            json_end_obj(&j);
        }
        json_end_arr(&j);
        json_said_diags(&j);
        json_end_obj(&j);
        json_finish(&j);
        return;
    }
    tprintf("evidence for device %s written to %s:\n", edgert_device_fingerprint(ctx), path);
    tprintf("  %-16s %12s %17s %9s %8s %10s %9s %s\n", "backend", "decode tok/s",
            "(rounds min..max)", "prefill", "top-1", "KL", "SQNR min", "verify");
    for (size_t i = 0; i < count; i++) {
        char pre[32] = "-";
        if (!isnan(ev[i].prefill_gflops))
            snprintf(pre, sizeof pre, "%.1f", ev[i].prefill_gflops);
        tprintf("  %-16s %12.2f   [%6.2f..%6.2f] %9s %8.3f %10.2e %8.1f  %s\n", ev[i].backend,
                ev[i].decode_tokens_per_s, ev[i].decode_tokens_per_s_min,
                ev[i].decode_tokens_per_s_max, pre, ev[i].top1_agreement, ev[i].kl_mean,
                ev[i].sqnr_min_db, ev[i].correct == 1 ? "pass" : "FAIL");
    }
    tprintf("decode: the median of %u interleaved rounds per backend (every backend measured "
            "once per round, so all see the same memory-bandwidth windows); prefill: G(FL)OP/s "
            "at M = %u, once after them (not for the reference backend, which ranks last "
            "whatever its figures).\n",
            CAL_ROUNDS, CAL_PREFILL_M);
    for (size_t i = 0; i < count; i++)
        if (ev[i].decode_rounds_repeated)
            tprintf("%s: %u decode round%s ran while other load took the CPUs, and %s measured "
                    "again (the evidence counts them).\n", ev[i].backend,
                    ev[i].decode_rounds_repeated, ev[i].decode_rounds_repeated == 1 ? "" : "s",
                    ev[i].decode_rounds_repeated == 1 ? "was" : "were");
    /* --out FILE is read only when named again (select --evidence FILE) */
    tprintf("'edgert select --explain%s%s' now ranks by these measured figures (backends whose "
            "medians lie within each other's rounds count as equally fast at decode; prefill "
            "decides between them).\n", c->out ? " --evidence " : "", c->out ? c->out : "");
}

/* Store what was measured and say it; EXIT_FAIL when nothing was (every
 * backend failed, said above: an empty store would claim figures) or the
 * store failed. */
static int store(edgert_ctx *ctx, const cli *c, const workload *w, const char *path,
                 const edgert_evidence *ev, size_t count)
{
    char err[1024] = "";
    if (count == 0) {
        tfprintf(stderr, "edgert calibrate: no backend was measured: no evidence written\n");
        return EXIT_FAIL;
    }
    if (edgert_evidence_store(ctx, path, ev, count, err, sizeof err) != EDGERT_OK) {
        tfprintf(stderr, "edgert calibrate: %s\n", err);
        return EXIT_FAIL;
    }
    print_stored(ctx, c, w, path, ev, count);
    return EXIT_OK;
}

int cmd_calibrate(const cli *c)
{
    workload w;
    edgert_ctx *ctx = NULL;
    int rc = open_measuring(c, "calibrate", "calibrate measures this one", &w, &ctx);
    if (rc)
        return rc;
    const char *path = c->out ? c->out : edgert_evidence_path(ctx);
    if (!path) {
        tfprintf(stderr,
                 "edgert calibrate: no evidence file: set XDG_CACHE_HOME or HOME, or use --out\n");
        edgert_close(ctx);
        wl_free(&w);
        return EXIT_USAGE;
    }
    struct stat sb; /* before the measurements, not after them (the store refuses it too) */
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        tfprintf(stderr, "edgert calibrate: %s is not a regular file (a folder?): give the path "
                 "of an evidence file%s\n", path, c->out ? "" : " with --out");
        edgert_close(ctx);
        wl_free(&w);
        return EXIT_USAGE;
    }
    size_t n = edgert_candidate_count(ctx), count = 0, nb = 0;
    edgert_evidence *ev = calloc(n ? n : 1, sizeof *ev);
    bench_result *br = calloc(1, sizeof *br);
    verify_result *vr = calloc(n ? n : 1, sizeof *vr);
    const char **names = calloc(n ? n : 1, sizeof *names);
    double (*tps)[CAL_ROUNDS] = calloc(n ? n : 1, sizeof *tps);
    double *gflops = calloc(n ? n : 1, sizeof *gflops);
    int *ok = calloc(n ? n : 1, sizeof *ok);
    unsigned *repeated = calloc(n ? n : 1, sizeof *repeated);
    if (!ev || !br || !vr || !names || !tps || !gflops || !ok || !repeated) {
        tfprintf(stderr, "edgert calibrate: out of memory\n");
        rc = EXIT_FAIL;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const edgert_candidate *k = edgert_candidate_at(ctx, i);
        if (k->eligible && k->loaded && k->runs_in_process) {
            ok[nb] = 1;
            names[nb++] = k->name;
        }
    }
    if (nb == 0) { /* no evidence file: an empty one would say "measured", of nothing */
        tfprintf(stderr, "edgert calibrate: no backend here is eligible, loaded and runs in "
                 "process: nothing to measure, no evidence written (see 'edgert list')\n");
        cli_fail_status(EDGERT_E_NOT_ELIGIBLE);
        rc = EXIT_NONE;
        goto out;
    }
    for (unsigned r = 0; r < CAL_ROUNDS; r++)
        for (size_t i = 0; i < nb; i++)
            if (ok[i] &&
                bench_one(ctx, c, &w, names[i], r, br, &tps[i][r], &repeated[i]) != EXIT_OK) {
                ok[i] = 0;
                rc = EXIT_FAIL;
            }
    for (size_t i = 0; i < nb; i++) {
        gflops[i] = NAN;
        if (ok[i] && !edgert_candidate_find(ctx, names[i])->reference &&
            prefill_one(ctx, c, &w, names[i], br, &gflops[i]) != EXIT_OK) {
            ok[i] = 0;
            rc = EXIT_FAIL;
        }
    }
    for (size_t i = 0; i < nb; i++) {
        if (!ok[i])
            continue;
        if (verify_one(ctx, c, &w, names[i], tps[i], repeated[i], gflops[i], br, &vr[count],
                       &ev[count]) != EXIT_OK) {
            rc = EXIT_FAIL;
            continue;
        }
        /* the rounds' range: the selector counts backends whose rounds
         * hold each other's medians as one decode group (edgert.h) */
        ev[count].decode_tokens_per_s_min = ev[count].decode_tokens_per_s_max = tps[i][0];
        for (unsigned r = 1; r < CAL_ROUNDS; r++) {
            ev[count].decode_tokens_per_s_min = fmin(ev[count].decode_tokens_per_s_min, tps[i][r]);
            ev[count].decode_tokens_per_s_max = fmax(ev[count].decode_tokens_per_s_max, tps[i][r]);
        }
        count++;
    }
    if (store(ctx, c, &w, path, ev, count) != EXIT_OK)
        rc = EXIT_FAIL;
out:
    free(ev);
    free(br);
    free(vr);
    free(names);
    free(tps);
    free(gflops);
    free(ok);
    free(repeated);
    edgert_close(ctx);
    wl_free(&w);
    return rc;
}
