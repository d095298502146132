/*
 * tools/verify.c — `edgert verify`: is a backend's GEMM correct (against the
 * reference backend, within a tolerance derived from its arithmetic), and how
 * faithful is it (against dense fp32 of the unquantized weights)?
 *
 * This file is the command: the spine of one backend's run (open it and the
 * oracle, derive the tolerance model, correctness, then fidelity), the
 * choice of backends, and the report in text or JSON. The two halves of the
 * run have their own files, each with its method at the top:
 * verify_correct.c (the cases and the tolerance model) and
 * verify_fidelity.c (SQNR, the head's top-1 and KL); verify_internal.h is
 * what the three share.
 */
#define _GNU_SOURCE
#include "verify_internal.h"
#include "generate.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "measure.h"

/* ---- what the steps of a run share ------------------------------------------------------ */

uint64_t verify_seed(uint64_t base, uint64_t a, uint64_t b, uint64_t c)
{
    return gen_mix64(base ^ gen_mix64(a ^ gen_mix64(b ^ gen_mix64(c))));
}

void verify_progress(const vrun *v, const char *fmt, ...)
{
    if (!v->progress)
        return;
    char line[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    tfprintf(stderr, "\r\033[Kverify %s: %s", v->name, line);
    fflush(stderr);
}

static void progress_done(const vrun *v)
{
    if (v->progress) {
        tfprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
}

edgert_status verify_gemm(edgert_backend *b, const edgert_packed *p, uint32_t m, const float *x,
                          size_t ldx, float *y, size_t ldy, char *err, size_t err_len)
{
    edgert_gemm_args a = {.struct_size = sizeof a, .m = m, .x = x, .ldx = ldx, .y = y, .ldy = ldy};
    return edgert_gemm(b, p, &a, err, err_len);
}

/* ---- one backend -------------------------------------------------------------------------- */

static edgert_status verify_run(edgert_ctx *ctx, const cli *c, const workload *w,
                                const char *backend, const char *oracle_of, verify_result *r,
                                char *err, size_t err_len)
{
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", backend ? backend : "");
    r->max_abs_err = 0.0;
    r->worst_ratio = 0.0;
    r->sqnr_min_db = r->top1_agreement = r->kl_mean = r->top1_vs_reference = NAN;
    snprintf(r->reference, sizeof r->reference, "%s",
             !w->ck ? "dense fp32 of the unquantized weights"
             : strcmp(edgert_checkpoint_kind(w->ck), "dense") == 0
                 ? "the file's dense weights, in fp32"
                 : "the file's GPTQ weights dequantized to fp32 (dense layers: their own)");
    if (!ctx || !c || !w || !backend) {
        edgert_errf(err, err_len, "verify_backend: bad arguments");
        return EDGERT_E_USAGE;
    }
    vrun v = {.ctx = ctx, .c = c, .name = backend, .r = r};
    v.progress = isatty(2) && !c->quiet;
    v.cand = edgert_candidate_find(ctx, backend);
    if (!v.cand) {
        char known[400] = "";
        for (size_t i = 0; i < edgert_candidate_count(ctx); i++)
            text_append(known, sizeof known, ", ", edgert_candidate_at(ctx, i)->name);
        edgert_errf(err, err_len, "no backend named '%s' (manifests found: %s)", backend,
                    *known ? known : "none");
        return EDGERT_E_NOT_FOUND;
    }
    if (verify_tol_model(v.cand, &v.tm, err, err_len) != 0)
        return EDGERT_E_UNSUPPORTED;
    snprintf(r->tolerance, sizeof r->tolerance, "%s", v.tm.text);
    snprintf(r->activations, sizeof r->activations, "%s", v.tm.dtype);
    v.group = v.cand->layout.group_size > 0 ? (uint32_t)v.cand->layout.group_size : 128u;
    v.symmetric = v.cand->layout.symmetric;
    v.self = strcmp(backend, VERIFY_REF) == 0;
    /* --options belong to the backend --backend names, never to the oracle */
    const char *opts = c->backend && strcmp(c->backend, backend) == 0 ? c->options : NULL;
    double t0 = measure_now_s();
    edgert_status rc = edgert_backend_open(ctx, backend, opts, &v.b, err, err_len);
    if (rc != EDGERT_OK)
        return rc;
    snprintf(r->path, sizeof r->path, "%s",
             edgert_backend_describe(v.b) ? edgert_backend_describe(v.b) : "");
    if (v.self && opts == NULL) {
        v.ref = v.b;
    } else {
        char rerr[1024] = "";
        rc = edgert_backend_open(ctx, VERIFY_REF, NULL, &v.ref, rerr, sizeof rerr);
        if (rc != EDGERT_OK) {
            edgert_errf(err, err_len,
                        "the reference backend %s, the oracle of the correctness check, "
                        "is not usable: %s",
                        VERIFY_REF, rerr);
            edgert_backend_close(v.b);
            return rc;
        }
        v.self = 0;
    }
    if (v.self)
        snprintf(r->tolerance, sizeof r->tolerance,
                 "%s activations, the oracle itself against an independent double-precision "
                 "loop: |y-y*| <= (K+2)u S, u=2^-24, S=sum|x w|", v.tm.dtype);
    r->correct = 1;
    if (oracle_of) {
        snprintf(r->oracle_of, sizeof r->oracle_of, "%s", oracle_of);
        rc = EDGERT_OK;
    } else {
        rc = verify_correctness(&v, err, err_len);
    }
    if (rc == EDGERT_OK)
        rc = verify_fidelity(&v, w, err, err_len);
    progress_done(&v);
    r->seconds = measure_now_s() - t0;
    if (v.ref != v.b)
        edgert_backend_close(v.ref);
    edgert_backend_close(v.b);
    if (rc != EDGERT_OK)
        r->correct = 0;
    return rc;
}

edgert_status verify_backend(edgert_ctx *ctx, const cli *c, const workload *w, const char *backend,
                             verify_result *r, char *err, size_t err_len)
{
    return verify_run(ctx, c, w, backend, NULL, r, err, err_len);
}

edgert_status verify_oracle_fidelity(edgert_ctx *ctx, const cli *c, const workload *w,
                                     const char *of, verify_result *r, char *err, size_t err_len)
{
    return verify_run(ctx, c, w, VERIFY_REF, of, r, err, err_len);
}

/* ---- the command ---------------------------------------------------------------------------- */

static int usable(const edgert_candidate *k)
{
    return k->eligible && k->runs_in_process && k->loaded;
}

static void why_not(const edgert_candidate *k, char *buf, size_t len)
{
    char reasons[1024];
    reasons_text(k, reasons, sizeof reasons);
    if (!k->eligible)
        snprintf(buf, len, "not eligible on this device: %s%s%s", reasons[0] ? reasons : "?",
                 k->detail && *k->detail ? " — " : "", k->detail ? k->detail : "");
    else if (!k->runs_in_process)
        snprintf(buf, len, "does not run in process (processor %s): nothing to verify here",
                 k->processor ? k->processor : "?");
    else
        snprintf(buf, len, "not loaded%s%s", k->detail && *k->detail ? ": " : "",
                 k->detail ? k->detail : "");
}

static void print_result(const verify_result *r, const char *error, const char *c_weights)
{
    tprintf("%s%s%s%s: %s\n", r->name, r->path[0] ? " (" : "", r->path, r->path[0] ? ")" : "",
            error        ? "ERROR"
            : r->correct ? "PASS"
                         : "FAIL");
    if (error) {
        tprintf("  error        %s\n", error);
        return;
    }
    if (r->oracle_of[0])
        tprintf("  correctness  as the oracle: against an independent double-precision loop in "
                "each of %s's cases\n", r->oracle_of);
    else
        tprintf("  correctness  %d cases (%d refused cleanly), %d failed; max |err| %.3g, worst "
                "err/tolerance %.3g\n",
                r->cases, r->refused_cases, r->failed_cases, r->max_abs_err, r->worst_ratio);
    if (r->first_failure[0])
        tprintf("  first fail   %s\n", r->first_failure);
    else if (r->worst_case[0])
        tprintf("  worst        %s\n", r->worst_case);
    if (!r->oracle_of[0])
        tprintf("  tolerance    %s\n", r->tolerance);
    tprintf("  SQNR (dB)    vs %s, %u tokens:", r->reference, SQNR_TOKENS);
    for (size_t i = 0; i < r->nshapes; i++)
        tprintf(" %s %.2f%s", r->shapes[i].name, r->shapes[i].sqnr_db,
                i + 1 < r->nshapes ? "," : ";");
    tprintf(" min %.2f\n", r->sqnr_min_db);
    tprintf("  head         k=%u n=%u, %u tokens: top-1 agreement %.4f, mean KL %.4g nats\n",
            r->head_k, r->head_n, r->tokens, r->top1_agreement, r->kl_mean);
    if (c_weights && r->head_source && strcmp(r->head_source, "generated") == 0)
        tprintf("               (a generated head: %s has neither an output head nor a "
                "token embedding for one to be tied to)\n", c_weights);
    if (!isnan(r->top1_vs_reference))
        tprintf("               top-1 agreement with %s on the same quantized weights: %.4f\n",
                VERIFY_REF, r->top1_vs_reference);
    tprintf("               (weights std %.3f; dense logits: std %.2f, top-1 probability %.3f, "
            "entropy %.2f of log N = %.2f nats)\n",
            r->head_weight_std, r->head_logit_std, r->head_dense_top1_prob, r->head_dense_entropy,
            r->head_n ? log((double)r->head_n) : 0.0);
}

/* The fidelity of every backend that ran, one line each: what its
 * activation arithmetic costs on the same weights and activations. */
static void print_side_by_side(const verify_result *res, char *const *errors, size_t nb)
{
    size_t ran = 0;
    for (size_t i = 0; i < nb; i++)
        ran += errors[i] == NULL;
    if (ran < 2)
        return;
    tprintf("fidelity side by side (the same weights and LLM-like activations with outlier "
            "channels, against dense fp32):\n");
    tprintf("  %-20s %-12s %9s %8s %10s\n", "backend", "activations", "SQNR min", "top-1",
            "KL (nats)");
    for (size_t i = 0; i < nb; i++) {
        if (errors[i] != NULL)
            continue;
        tprintf("  %-20s %-12s %6.2f dB %8.4f %10.4g\n", res[i].name, res[i].activations,
                res[i].sqnr_min_db, res[i].top1_agreement, res[i].kl_mean);
    }
    tprintf("\n");
}

static void json_result(json_w *j, const verify_result *r, const char *error)
{
    json_obj(j);
    json_kstr(j, "name", r->name);
    json_kstr(j, "path", r->path);
    json_kstr(j, "activations", r->activations[0] ? r->activations : NULL);
    json_kbool(j, "correct", !error && r->correct);
    json_kstr(j, "error", error);
    json_kint(j, "cases", r->cases);
    json_kstr(j, "oracle_of", r->oracle_of[0] ? r->oracle_of : NULL);
    json_kint(j, "refused_cases", r->refused_cases);
    json_kint(j, "failed_cases", r->failed_cases);
    json_knum(j, "max_abs_err", r->max_abs_err);
    json_knum(j, "worst_ratio", r->worst_ratio);
    json_kstr(j, "worst_case", r->worst_case[0] ? r->worst_case : NULL);
    json_kstr(j, "tolerance", r->tolerance);
    json_kstr(j, "fidelity_reference", r->reference);
    json_key(j, "sqnr_db");
    json_obj(j);
    for (size_t i = 0; i < r->nshapes; i++)
        json_knum(j, r->shapes[i].name, r->shapes[i].sqnr_db);
    json_knum(j, "min", r->sqnr_min_db);
    json_end_obj(j);
    json_knum(j, "top1_agreement", r->top1_agreement);
    json_knum(j, "top1_vs_reference", r->top1_vs_reference);
    json_knum(j, "kl_mean", r->kl_mean);
    json_key(j, "head");
    json_obj(j);
    json_kint(j, "n", r->head_n);
    json_kint(j, "k", r->head_k);
    json_kint(j, "tokens", r->tokens);
    json_kstr(j, "source", r->head_source);
    json_knum(j, "weight_std", r->head_weight_std);
    json_knum(j, "dense_logit_std", r->head_logit_std);
    json_knum(j, "dense_top1_prob", r->head_dense_top1_prob);
    json_knum(j, "dense_entropy", r->head_dense_entropy);
    json_end_obj(j);
    json_kstr(j, "first_failure", r->first_failure[0] ? r->first_failure : NULL);
    json_knum(j, "seconds", r->seconds);
    json_end_obj(j);
}

/* The backends to verify, into names[]: the one --backend names, else every
 * usable one, then the reference (its own fidelity, so kernel and
 * quantization error can be told apart). Returns an exit code, 0 to go on. */
static int pick_backends(edgert_ctx *ctx, const cli *c, const char **names, size_t *nb)
{
    const edgert_candidate *ref = edgert_candidate_find(ctx, VERIFY_REF);
    char why[1400];
    if (c->backend) {
        const edgert_candidate *k = edgert_candidate_find(ctx, c->backend);
        if (!k) { /* the library's message: the folders searched, a manifest skipped */
            edgert_backend *none = NULL;
            char nf[2400] = "";
            if (edgert_backend_open(ctx, c->backend, NULL, &none, nf, sizeof nf) == EDGERT_OK)
                edgert_backend_close(none); /* cannot be: no candidate of that name */
            tfprintf_lines(stderr, "edgert verify: %s\n", nf);
            cli_fail_status(EDGERT_E_NOT_FOUND);
            return EXIT_NONE;
        }
        if (!usable(k)) {
            why_not(k, why, sizeof why);
            tfprintf(stderr, "edgert verify: backend '%s' %s\n", k->name, why);
            cli_fail_status(EDGERT_E_NOT_ELIGIBLE);
            return EXIT_NONE;
        }
        names[(*nb)++] = k->name;
    } else {
        for (size_t i = 0; i < edgert_candidate_count(ctx); i++) {
            const edgert_candidate *k = edgert_candidate_at(ctx, i);
            if (usable(k) && k != ref)
                names[(*nb)++] = k->name;
        }
    }
    if (!ref || !usable(ref)) {
        if (ref)
            why_not(ref, why, sizeof why);
        tfprintf(stderr,
                 "edgert verify: the reference backend %s, the oracle of the correctness "
                 "check, is %s\n",
                 VERIFY_REF, ref ? why : "not installed (no manifest found)");
        cli_fail_status(ref ? EDGERT_E_NOT_ELIGIBLE : EDGERT_E_NOT_FOUND);
        return EXIT_NONE;
    }
    int has_ref = 0;
    for (size_t i = 0; i < *nb; i++)
        has_ref |= strcmp(names[i], VERIFY_REF) == 0;
    if (!has_ref)
        names[(*nb)++] = ref->name;
    return EXIT_OK;
}

static void report(edgert_ctx *ctx, const cli *c, const workload *wl, const verify_result *res,
                   char *const *errors, size_t nb, int any_fail, double secs)
{
    if (c->json) {
        json_w j;
        json_init(&j, json_out());
        json_obj(&j);
        json_kint(&j, "threads", edgert_thread_count(ctx));
        json_kstr(&j, "workload", wl->name);
        json_kint(&j, "seed", (long long)c->seed);
        json_kbool(&j, "quick", c->quick);
        json_knum(&j, "seconds", secs);
        json_key(&j, "results");
        json_arr(&j);
        for (size_t i = 0; i < nb; i++)
            json_result(&j, &res[i], errors[i]);
        json_end_arr(&j);
        json_said_diags(&j);
        json_end_obj(&j);
        json_finish(&j);
        return;
    }
    tprintf("verify: workload %s%s, seed %llu, %u threads; correctness against %s, fidelity "
            "against dense fp32\n\n",
            wl->name, c->quick ? " (quick)" : "", (unsigned long long)c->seed,
            edgert_thread_count(ctx), VERIFY_REF);
    for (size_t i = 0; i < nb; i++) {
        print_result(&res[i], errors[i], c->weights);
        tprintf("\n");
    }
    print_side_by_side(res, errors, nb);
    tprintf("%s in %.1f s\n", any_fail ? "FAILED" : "all correct", secs);
}

int cmd_verify(const cli *c)
{
    if (c->options && !c->backend) {
        tfprintf(stderr,
                 "edgert verify: --options needs --backend (options are plugin-specific)\n");
        return EXIT_USAGE;
    }
    workload wl;
    edgert_ctx *ctx = NULL;
    int rc = open_measuring(c, "verify", "verify runs the backends on this one", &wl, &ctx);
    if (rc)
        return rc;

    /* at most every candidate and the reference: ncand + 1 >= 1 entries */
    size_t ncand = edgert_candidate_count(ctx), nb = 0;
    const char **names = calloc(ncand + 1, sizeof *names);
    verify_result *res = calloc(ncand + 1, sizeof *res);
    char **errors = calloc(ncand + 1, sizeof *errors);
    if (!names || !res || !errors) {
        tfprintf(stderr, "edgert verify: out of memory\n");
        rc = EXIT_FAIL;
        goto out;
    }
    rc = pick_backends(ctx, c, names, &nb);
    if (rc)
        goto out;

    double t0 = measure_now_s();
    int any_fail = 0;
    for (size_t i = 0; i < nb; i++) {
        char err[2048] = "";
        /* beside a backend whose cases ran, each of which checked the
         * reference against the double loop: the reference's fidelity only */
        int oracle = i > 0 && strcmp(names[i], VERIFY_REF) == 0 && c->backend &&
                     strcmp(c->backend, VERIFY_REF) != 0 && errors[0] == NULL;
        edgert_status st =
            oracle ? verify_oracle_fidelity(ctx, c, &wl, names[0], &res[i], err, sizeof err)
                   : verify_backend(ctx, c, &wl, names[i], &res[i], err, sizeof err);
        if (oracle && st == EDGERT_OK && res[0].oracle_failed) { /* that run's verdict on it */
            res[i].correct = 0;
            snprintf(res[i].first_failure, sizeof res[i].first_failure,
                     "off the double loop in %s's cases (its first failure says where)", names[0]);
        }
        if (st != EDGERT_OK) {
            errors[i] = strdup(err[0] ? err : edgert_status_name(st));
            if (!c->json)
                tfprintf(stderr, "edgert verify: %s: %s\n", names[i], errors[i] ? errors[i] : "");
            any_fail = 1;
        } else if (!res[i].correct) {
            any_fail = 1;
        }
    }
    report(ctx, c, &wl, res, errors, nb, any_fail, measure_now_s() - t0);
    rc = any_fail ? EXIT_FAIL : EXIT_OK;
out:
    if (errors)
        for (size_t i = 0; i < nb; i++)
            free(errors[i]);
    free(errors);
    free(names);
    free(res);
    edgert_close(ctx);
    wl_free(&wl);
    return rc;
}
