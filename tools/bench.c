/*
 * tools/bench.c — `edgert bench`: a backend's speed against this device's
 * own limits, measured in the same run.
 *
 *   pack      one canonical int4 tensor per shape, generated
 *             deterministically (--seed) and quantized, packed by the backend
 *             into `count` separate buffers (one per layer); wall time, and
 *             RssAnon sampled every 2 ms on a timer thread through the whole
 *             phase, so a transient spike is seen. The transient charged to
 *             the backend is, per pack call, the peak above the RSS before
 *             the call minus the packed bytes it returned.
 *   ceilings  streaming-read bandwidth over a buffer far larger than the LLC
 *             (plain, three software prefetches, and 4 or 8 interleaved
 *             streams per thread, spread over its range and 4 MiB at a
 *             time; the best one is the ceiling),
 *             compute peaks of every instruction family the CPU has.
 *   decode    whole steps, M = 1: every layer's projections, each with its
 *             own packed weights, then the head, so the weights stream from
 *             DRAM as in a real decode step. ms per step (median, min, max),
 *             GEMM-only tokens/s, weight bytes read per step, GB/s, and the
 *             fraction of the ceiling.
 *   prefill   each shape once with M rows (a head shape with M = 1, as a real
 *             prompt computes logits for its last token only), weighted by
 *             its count: tokens/s, GFLOP/s (2·M·N·K), fraction of the compute
 *             peak of the family the kernel relies on.
 *   versus    (--versus B) B's decode steps timed in pairs with these
 *             (tools/bench_decode.c, which times the decode phase).
 * Progress goes to stderr only when it is a terminal; stdout has the result.
 */
#define _GNU_SOURCE
#include "bench_internal.h"
#include "generate.h"
#include "measure.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* ---- RssAnon sampler ---------------------------------------------------------- */

static long rss_anon_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

typedef struct sampler {
    pthread_t th;
    atomic_int stop;
    atomic_long peak_kb;   /* over the whole phase */
    atomic_long window_kb; /* since the last reset */
} sampler;

static void *sampler_main(void *p)
{
    sampler *s = p;
    struct timespec ts = {0, 2000000};
    while (!atomic_load(&s->stop)) {
        long kb = rss_anon_kb();
        if (kb > atomic_load(&s->peak_kb))
            atomic_store(&s->peak_kb, kb);
        if (kb > atomic_load(&s->window_kb))
            atomic_store(&s->window_kb, kb);
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void window_reset(sampler *s)
{
    long kb = rss_anon_kb();
    if (kb > atomic_load(&s->peak_kb))
        atomic_store(&s->peak_kb, kb);
    atomic_store(&s->window_kb, kb);
}

static long window_peak(sampler *s)
{
    long kb = rss_anon_kb(); /* the sampler may have slept through the end */
    if (kb > atomic_load(&s->peak_kb))
        atomic_store(&s->peak_kb, kb);
    long w = atomic_load(&s->window_kb);
    return kb > w ? kb : w;
}

/* ---- progress --------------------------------------------------------------------- */

void bench_progress(const char *what, size_t done, size_t total)
{
    static const int width = 30;
    if (!isatty(2))
        return;
    int fill = total ? (int)(width * done / total) : width;
    tfprintf(stderr, "\r%-10s [%.*s%*s] %zu/%zu", what, fill, "##############################",
             width - fill, "", done, total);
    if (done == total)
        fputs("\r\033[K", stderr);
    fflush(stderr);
}

/* ---- the family a kernel relies on -------------------------------------------------- */

/* strstr ignoring ASCII case: descriptions write mnemonics either way
 * ("TDPBSSD", "vpdpbusd"). */
static const char *find_nocase(const char *hay, const char *needle)
{
    const size_t n = strlen(needle);
    for (; *hay; hay++)
        if (strncasecmp(hay, needle, n) == 0)
            return hay;
    return NULL;
}

int bench_compute_family(const char *path, int activation_bits, const peak_result *p)
{
    /* The instance's own description names its instructions: match
     * mnemonics only (free text like "no VNNI needed" must not count),
     * the tile instructions first (a tile path's description also names
     * the GEMV its decode runs). A "prefill:" part, when present, is what
     * prefill runs. */
    static const struct {
        const char *mnemonic;
        int family;
    } m[] = {{"tdpbssd", PEAK_AMX_INT8},    {"tdpbsud", PEAK_AMX_INT8},
             {"tdpbusd", PEAK_AMX_INT8},    {"tdpbuud", PEAK_AMX_INT8},
             {"tdpbf16ps", PEAK_AMX_BF16},  {"vpdpwssd", PEAK_INT16_VNNI},
             {"vpdpbusd", PEAK_INT8_VNNI},  {"vpmaddwd", PEAK_INT16_MADD},
             {"vdpbf16ps", PEAK_BF16_DOT},
             {"FMA", PEAK_FP32_FMA}};
    const char *parts[2] = {path ? find_nocase(path, "prefill:") : NULL, path};
    for (int i = 0; i < 2; i++)
        for (size_t k = 0; parts[i] && k < sizeof m / sizeof m[0]; k++)
            if (find_nocase(parts[i], m[k].mnemonic) && !isnan(p->value[m[k].family]))
                return m[k].family;
    /* Otherwise by activation type, the best family this CPU has. */
    if (activation_bits == 8)
        return !isnan(p->value[PEAK_AMX_INT8]) ? PEAK_AMX_INT8
               : !isnan(p->value[PEAK_INT8_VNNI]) ? PEAK_INT8_VNNI : PEAK_FP32_FMA;
    if (activation_bits == 16 && !isnan(p->value[PEAK_BF16_DOT]))
        return PEAK_BF16_DOT;
    return PEAK_FP32_FMA;
}

/* ---- the run ------------------------------------------------------------------------------- */

static uint64_t matrix_seed(uint64_t seed, size_t shape, uint32_t layer)
{
    return seed * 0x100000001B3ull ^ ((uint64_t)shape << 32) ^ layer;
}

/* 1. Generate + pack everything (with --weights: the file's layers, packed,
 * or mapped from a packed file), sampling RssAnon.
 * Length: the two sources of weights side by side, with the one sampler. */
static edgert_status pack_all(bench_run *b, char *err, size_t err_len)
{
    const workload *w = b->w;
    bench_result *r = b->r;
    int sym = b->cand->layout.symmetric;
    /* generated weights: the run's own (--versus-group), --group, else the
     * layout's own group */
    uint32_t group = b->group                         ? b->group
                     : b->c->group                    ? b->c->group
                     : b->cand->layout.group_size > 0 ? (uint32_t)b->cand->layout.group_size
                                                      : 128u;
    edgert_status st = EDGERT_OK;
    sampler smp;
    int sampling = 0;
    memset(&smp, 0, sizeof smp);
    size_t total_mats = 0, done = 0;
    for (size_t s = 0; s < w->nshapes; s++) {
        total_mats += w->shapes[s].count;
        b->packed[s] = calloc(w->shapes[s].count, sizeof *b->packed[s]);
        if (!b->packed[s]) {
            edgert_errf(err, err_len, "out of memory");
            return EDGERT_E_NOMEM;
        }
    }
    r->baseline_rss_mb = rss_anon_kb() / 1024.0;
    atomic_store(&smp.peak_kb, rss_anon_kb());
    if (pthread_create(&smp.th, NULL, sampler_main, &smp) == 0)
        sampling = 1;
    double transient_kb = 0;
    /* One canonical tensor per shape, packed into `count` separate buffers:
     * every layer streams its own bytes from DRAM as in a real decode step,
     * while generating 1.7 billion weights would cost ~30 s for values the
     * timing does not depend on. Each layer scales the scales by 1 + 2^-10,
     * so no two layers' packed pages are alike, which a host that merges
     * identical pages (KSM: peaks_bw.c) could back with one copy. A
     * precaution: within one run it changed nothing on the AMD EPYC kind
     * (5 interleaved rounds, step time ratio 1.006 avx512-w4a8, 1.030
     * avx512-w4a16). */
    for (size_t s = 0; s < w->nshapes && w->ck; s++) /* --weights: the file's own layers */
        for (uint32_t l = 0; l < w->shapes[s].count; l++) {
            window_reset(&smp);
            long before = rss_anon_kb();
            double t1 = measure_now_s();
            st = edgert_checkpoint_layer_packed(w->ck, w->layers[s][l], b->be, &b->packed[s][l],
                                                err, err_len);
            double t2 = measure_now_s();
            long peak = window_peak(&smp);
            if (st != EDGERT_OK)
                goto out;
            size_t pb = edgert_packed_bytes(b->packed[s][l]);
            double extra = (double)(peak - before) - (double)pb / 1024.0;
            transient_kb = extra > transient_kb ? extra : transient_kb;
            r->shapes[s].packed_bytes += pb;
            r->weight_bytes += pb;
            r->pack_seconds += t2 - t1;
            bench_progress("pack", ++done, total_mats);
        }
    for (size_t s = 0; s < w->nshapes && !w->ck; s++) {
        const wl_shape *sh = &w->shapes[s];
        double t0 = measure_now_s();
        edgert_qtensor q;
        st = gen_qtensor(b->ctx, sh->n, sh->k, group, sym,
                         matrix_seed(b->c->seed + b->salt, s, 0), 0.02f, &q);
        if (st != EDGERT_OK) {
            edgert_errf(err, err_len, "cannot generate %s [%u x %u]", sh->name, sh->n, sh->k);
            goto out;
        }
        r->generate_seconds += measure_now_s() - t0;
        q.view.name = sh->name;
        const size_t nscales = (size_t)sh->n * ((sh->k + group - 1u) / group);
        for (uint32_t l = 0; l < sh->count; l++) {
            for (size_t i = 0; l > 0 && i < nscales; i++)
                q.scales[i] *= 1.0f + 0x1p-10f;
            window_reset(&smp);
            long before = rss_anon_kb();
            double t1 = measure_now_s();
            st = edgert_pack(b->be, &q.view, &b->packed[s][l], err, err_len);
            double t2 = measure_now_s();
            long peak = window_peak(&smp);
            if (st != EDGERT_OK) {
                edgert_qtensor_free(&q);
                goto out;
            }
            size_t pb = edgert_packed_bytes(b->packed[s][l]);
            double extra = (double)(peak - before) - (double)pb / 1024.0;
            if (extra > transient_kb)
                transient_kb = extra;
            r->shapes[s].packed_bytes += pb;
            r->weight_bytes += pb;
            r->pack_seconds += t2 - t1;
            bench_progress("pack", ++done, total_mats);
        }
        edgert_qtensor_free(&q);
    }
    if (sampling) {
        atomic_store(&smp.stop, 1);
        pthread_join(smp.th, NULL);
        sampling = 0;
    }
    r->settled_rss_mb = rss_anon_kb() / 1024.0;
    r->peak_rss_mb = fmax(atomic_load(&smp.peak_kb) / 1024.0, r->settled_rss_mb);
    r->pack_transient_mb = transient_kb / 1024.0;
out:
    if (sampling) {
        atomic_store(&smp.stop, 1);
        pthread_join(smp.th, NULL);
    }
    return st;
}

/* 4. Prefill: each shape once with m rows (a head with 1), median of the
 * repeats, weighted by its count; against the compute peak of the family
 * the kernel relies on, measured before and after (the higher counts). */
static edgert_status prefill(bench_run *b, unsigned m, const float *x, float *y, char *err,
                             size_t err_len)
{
    const workload *w = b->w;
    bench_result *r = b->r;
    peak_compute(r->threads, edgert_device_facts(b->ctx)->cpu_flags, &r->peaks);
    unsigned preps = b->c->repeat ? b->c->repeat : 3;
    double total_s = 0, total_flop = 0;
    double *v = calloc(preps, sizeof *v);
    if (!v) {
        edgert_errf(err, err_len, "out of memory");
        return EDGERT_E_NOMEM;
    }
    for (size_t s = 0; s < w->nshapes; s++) {
        const wl_shape *sh = &w->shapes[s];
        unsigned rows = sh->head ? 1 : m;
        for (unsigned rep = 0; rep <= preps; rep++) {
            edgert_gemm_args a = {sizeof a, rows, x, sh->k, y, sh->n};
            double g0 = measure_now_s();
            edgert_status st = edgert_gemm(b->be, b->packed[s][0], &a, err, err_len);
            if (st != EDGERT_OK) {
                free(v);
                return st;
            }
            if (rep > 0)
                v[rep - 1] = measure_now_s() - g0;
        }
        double t = measure_median(v, preps);
        double flop = 2.0 * rows * sh->n * (double)sh->k;
        r->shapes[s].prefill_ms = 1e3 * t;
        r->shapes[s].prefill_gflops = flop / t / 1e9;
        total_s += t * sh->count;
        total_flop += flop * sh->count;
        bench_progress("prefill", s + 1, w->nshapes);
    }
    free(v);
    r->prefill_tokens_per_s = m / total_s;
    r->prefill_gflops = total_flop / total_s / 1e9;
    r->compute_family =
        bench_compute_family(r->path, b->cand->layout.activation_bits, &r->peaks);
    /* the peaks again after the prefill: on a Zen 3 VM one run in five
     * measured vpmaddwd's at 168 GOP/s against 302-326 in the others, and
     * its prefill read 1.44 of that "peak" */
    peak_result after;
    peak_compute(r->threads, edgert_device_facts(b->ctx)->cpu_flags, &after);
    r->peak_before = r->peaks.value[r->compute_family];
    r->peak_after = after.value[r->compute_family];
    for (int i = 0; i < PEAK_COUNT; i++) /* a NaN (not measured, or a failed run) never wins */
        if (!isnan(after.value[i]) && !(after.value[i] <= r->peaks.value[i]))
            r->peaks.value[i] = after.value[i];
    const double lo = fmin(r->peak_before, r->peak_after), hi = fmax(r->peak_before, r->peak_after);
    /* either NaN: the two cannot be compared, so the run is not called stable */
    r->prefill_unstable = isnan(r->peak_before) || isnan(r->peak_after) ||
                          !(hi <= lo * (1.0 + BENCH_UNSTABLE));
    r->fraction_of_compute_peak = r->prefill_gflops / r->peaks.value[r->compute_family];
    r->have_prefill = 1;
    return EDGERT_OK;
}

/* Open backend `name` with `options` into b (its ctx, c, w and r set). */
static edgert_status run_open(bench_run *b, const char *name, const char *options, char *err,
                              size_t err_len)
{
    bench_result *r = b->r;
    snprintf(r->backend, sizeof r->backend, "%s", name);
    r->threads = edgert_thread_count(b->ctx);
    r->compute_family = -1;
    r->step_read_gbs = r->step_read_min = r->step_read_max = r->fraction_of_step_read = NAN;
    r->in_cache_gbs = r->in_cache_min = r->in_cache_max = r->fraction_of_in_cache = NAN;
    b->cand = edgert_candidate_find(b->ctx, name);
    edgert_status st = edgert_backend_open(b->ctx, name, options, &b->be, err, err_len);
    if (st == EDGERT_OK)
        snprintf(r->path, sizeof r->path, "%s", edgert_backend_describe(b->be));
    return st;
}

/* Pack the workload's weights for b's backend. */
static edgert_status run_pack(bench_run *b, char *err, size_t err_len)
{
    edgert_status st = pack_all(b, err, err_len);
    /* the layout's bits per weight, its per-group bits scaled to the
     * generated weights' group (--group, --versus-group): 4.25 at 128 is
     * 4.5 at 64 */
    const edgert_layout *lo = &b->cand->layout;
    uint32_t lg = lo->group_size > 0 ? (uint32_t)lo->group_size : 128u;
    uint32_t g = b->group ? b->group : b->c->group ? b->c->group : lg;
    double bpw = lo->bits_per_weight;
    if (g != lg && lo->weight_bits > 0 && !b->w->ck)
        bpw = lo->weight_bits + (bpw - lo->weight_bits) * lg / g;
    if (st == EDGERT_OK)
        b->r->expected_weight_bytes = (uint64_t)((double)wl_weights(b->w) * bpw / 8.0 + 0.5);
    return st;
}

static void run_close(bench_run *b)
{
    for (size_t s = 0; s < b->w->nshapes; s++) {
        for (uint32_t l = 0; b->packed[s] && l < b->w->shapes[s].count; l++)
            edgert_packed_free(b->packed[s][l]);
        free(b->packed[s]);
        b->packed[s] = NULL;
    }
    if (b->be)
        edgert_backend_close(b->be);
    b->be = NULL;
}

edgert_status bench_backend(edgert_ctx *ctx, const cli *c, const workload *w,
                            const workload *vw, const char *backend, unsigned flags,
                            bench_result *r, char *err, size_t err_len)
{
    bench_run b = {.ctx = ctx, .c = c, .w = w, .r = r};
    bench_run vs = {.ctx = ctx, .c = c, .w = vw ? vw : w}; /* --versus: the other backend */
    float *x = NULL, *y = NULL;
    memset(r, 0, sizeof *r);
    edgert_status st = run_open(&b, backend, c->options, err, err_len);
    /* --versus: both open before either packs (a backend that cannot run
     * here is said at once), both packed at once (the steps alternate); its
     * generated weights from another seed, so no page of one run's is a
     * page of the other's (a host that merges identical pages could back
     * them with one copy: pack_all) */
    if (st == EDGERT_OK && c->versus) {
        vs.r = calloc(1, sizeof *vs.r);
        vs.salt = 1u;
        vs.group = c->versus_group;
        if (!vs.r) {
            edgert_errf(err, err_len, "out of memory");
            st = EDGERT_E_NOMEM;
        } else {
            char verr[768] = "";
            st = run_open(&vs, c->versus, c->versus_options, verr, sizeof verr);
            if (st != EDGERT_OK)
                edgert_errf(err, err_len, "--versus: %s", verr);
        }
    }
    if (st == EDGERT_OK)
        st = run_pack(&b, err, err_len);
    if (st == EDGERT_OK && vs.r)
        st = run_pack(&vs, err, err_len);
    if (st != EDGERT_OK)
        goto out;

    /* Activations and outputs, big enough for any shape. */
    uint32_t maxk = 0, maxn = 0;
    for (size_t s = 0; s < w->nshapes; s++) {
        maxk = w->shapes[s].k > maxk ? w->shapes[s].k : maxk;
        maxn = w->shapes[s].n > maxn ? w->shapes[s].n : maxn;
    }
    unsigned m = c->m ? c->m : 512;
    r->m = m;
    x = malloc(sizeof(float) * (size_t)m * maxk);
    y = malloc(sizeof(float) * (size_t)m * maxn);
    if (!x || !y) {
        edgert_errf(err, err_len, "out of memory");
        st = EDGERT_E_NOMEM;
        goto out;
    }
    gen_activations(x, m, maxk, c->seed);

    if (c->phase != PHASE_PREFILL)
        st = bench_decode(&b, c->versus ? &vs : NULL, flags, x, y, err, err_len);
    if (st == EDGERT_OK && c->phase != PHASE_DECODE && !c->versus)
        st = prefill(&b, m, x, y, err, err_len);
out:
    if (vs.r)
        run_close(&vs);
    free(vs.r);
    run_close(&b);
    free(x);
    free(y);
    return st;
}

/* --versus-weights: its workload, the shapes of --weights' one by one (each
 * decode step then reads the same GEMMs of two checkpoints). */
static int versus_workload(const cli *c, const workload *w, workload *vw)
{
    if (wl_from_checkpoint(c->versus_weights, vw) != 0)
        return EXIT_BADFILE;
    int same = vw->nshapes == w->nshapes;
    for (size_t s = 0; same && s < w->nshapes; s++)
        same = strcmp(vw->shapes[s].name, w->shapes[s].name) == 0 &&
               vw->shapes[s].n == w->shapes[s].n && vw->shapes[s].k == w->shapes[s].k &&
               vw->shapes[s].count == w->shapes[s].count;
    if (!same)
        tfprintf(stderr, "edgert bench: %s and %s have other layers (roles, shapes or counts): "
                 "--versus-weights compares two checkpoints of one model\n", c->versus_weights,
                 c->weights);
    return same ? EXIT_OK : EXIT_USAGE;
}

int cmd_bench(const cli *c)
{
    workload w;
    edgert_ctx *ctx = NULL;
    if ((c->group || c->versus_group) && c->weights) {
        tfprintf(stderr, "edgert bench: --%sgroup generates weights in groups of N; --weights "
                         "has its own\n", c->group ? "" : "versus-");
        return EXIT_USAGE;
    }
    if ((c->versus_weights && (!c->weights || !c->versus)) ||
        (c->versus_weights && c->versus_group)) {
        tfprintf(stderr, "edgert bench: --versus-weights is --versus's --weights: it needs "
                 "--versus and --weights, and its group is the file's\n");
        return EXIT_USAGE;
    }
    if ((c->versus_options || c->versus_group) && !c->versus) {
        tfprintf(stderr, "edgert bench: --versus-%s needs --versus (the backend it is for)\n",
                 c->versus_options ? "options" : "group");
        return EXIT_USAGE;
    }
    if (c->paired_read && (c->versus || c->phase == PHASE_PREFILL)) {
        tfprintf(stderr, "edgert bench: --paired-read pairs one backend's decode steps with "
                         "reads; it takes neither --versus nor --phase prefill\n");
        return EXIT_USAGE;
    }
    if (c->versus && c->phase == PHASE_PREFILL) {
        tfprintf(stderr, "edgert bench: --versus compares decode steps; it takes --phase decode "
                         "(or both, which then means decode)\n");
        return EXIT_USAGE;
    }
    int rc = open_measuring(c, "bench", "bench measures this one", &w, &ctx);
    if (rc)
        return rc;
    workload vw = {0};
    if (c->versus_weights && (rc = versus_workload(c, &w, &vw)) != EXIT_OK) {
        edgert_close(ctx);
        wl_free(&w);
        wl_free(&vw);
        return rc;
    }
    char err[1024] = "";
    const char *name = c->backend;
    edgert_selection *sel = NULL;
    if (!name) {
        edgert_status sst = edgert_select(ctx, c->priority, NULL, &sel, err, sizeof err);
        if (sst != EDGERT_OK) {
            tfprintf(stderr, "edgert: %s\n", err);
            cli_fail_status(sst);
            edgert_selection_free(sel);
            edgert_close(ctx);
            wl_free(&w);
            return EXIT_NONE;
        }
        name = edgert_selection_selected(sel)->name;
    }
    bench_result *r = calloc(1, sizeof *r);
    edgert_status st = r ? bench_backend(ctx, c, &w, c->versus_weights ? &vw : NULL, name, 0, r,
                                         err, sizeof err)
                         : EDGERT_E_NOMEM;
    if (st == EDGERT_OK) {
        if (c->json)
            bench_print_json(r, &w, c);
        else
            bench_print_text(r, &w, c);
        rc = EXIT_OK;
    } else {
        tfprintf(stderr, "edgert bench: %s\n", err[0] ? err : edgert_status_name(st));
        cli_fail_status(st);
        rc = (st == EDGERT_E_NOT_ELIGIBLE || st == EDGERT_E_NOT_FOUND) ? EXIT_NONE
             : st == EDGERT_E_USAGE                                    ? EXIT_USAGE
                                                                       : EXIT_FAIL;
    }
    free(r);
    edgert_selection_free(sel);
    edgert_close(ctx);
    wl_free(&w);
    wl_free(&vw);
    return rc;
}
