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
 *             (plain, two software prefetches, and 4 or 8 interleaved
 *             streams per thread; the best one is the ceiling),
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
 * Progress goes to stderr only when it is a terminal; stdout has the result.
 */
#define _GNU_SOURCE
#include "bench.h"
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

static void progress(const char *what, size_t done, size_t total)
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
             {"vpdpbusd", PEAK_INT8_VNNI},  {"vdpbf16ps", PEAK_BF16_DOT},
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

/* One bench run: the backend instance, its packed weights (packed[s][l]: layer
 * l of shape s) and the result being filled. */
typedef struct bench_run {
    edgert_ctx *ctx;
    const cli *c;
    const workload *w;
    const edgert_candidate *cand;
    edgert_backend *be;
    edgert_packed **packed[WL_MAX_SHAPES];
    bench_result *r;
} bench_run;

/* One GEMM of a decode step: shape s, its matrix idx. */
typedef struct step_call {
    size_t s;
    uint32_t idx;
} step_call;

/* 1. Generate + pack everything (with --weights: the file's layers, packed,
 * or mapped from a packed file), sampling RssAnon.
 * Length: the two sources of weights side by side, with the one sampler. */
static edgert_status pack_all(bench_run *b, char *err, size_t err_len)
{
    const workload *w = b->w;
    bench_result *r = b->r;
    int sym = b->cand->layout.symmetric;
    uint32_t group = b->cand->layout.group_size > 0 ? (uint32_t)b->cand->layout.group_size : 128u;
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
            progress("pack", ++done, total_mats);
        }
    for (size_t s = 0; s < w->nshapes && !w->ck; s++) {
        const wl_shape *sh = &w->shapes[s];
        double t0 = measure_now_s();
        edgert_qtensor q;
        st = gen_qtensor(b->ctx, sh->n, sh->k, group, sym, matrix_seed(b->c->seed, s, 0), 0.02f,
                         &q);
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
            progress("pack", ++done, total_mats);
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

/* The GEMMs of one decode step in the order it runs them: every layer's
 * projections (layer by layer), then the heads. Returns how many. */
static size_t step_order(const workload *w, step_call *out)
{
    uint32_t layers = 0;
    for (size_t s = 0; s < w->nshapes; s++)
        if (!w->shapes[s].head && w->shapes[s].count > layers)
            layers = w->shapes[s].count;
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++) /* layers, then heads */
        for (uint32_t l = 0; l < (pass == 0 ? layers : 1u); l++)
            for (size_t s = 0; s < w->nshapes; s++) {
                const wl_shape *sh = &w->shapes[s];
                if (sh->head != pass || (pass == 0 && l >= sh->count))
                    continue;
                for (uint32_t h = 0; h < (pass ? sh->count : 1u); h++)
                    out[n++] = (step_call){s, pass ? h : l};
            }
    return n;
}

/* 2. The read ceiling, on the same threads, over 1 GiB (far beyond any LLC):
 * the best of a plain, two prefetched and an interleaved-streams read, also
 * read in calls of the step's GEMM sizes, in the order it runs them. */
static edgert_status decode_ceiling(bench_run *b, const step_call *order, size_t ncalls,
                                    char *err, size_t err_len)
{
    bench_result *r = b->r;
    size_t *calls = calloc(ncalls ? ncalls : 1, sizeof *calls);
    if (!calls) {
        edgert_errf(err, err_len, "out of memory");
        return EDGERT_E_NOMEM;
    }
    for (size_t i = 0; i < ncalls; i++)
        calls[i] = edgert_packed_bytes(b->packed[order[i].s][order[i].idx]);
    uint64_t flags = edgert_device_facts(b->ctx)->cpu_flags;
    int bw_rc = peak_bandwidth(r->threads, (size_t)1 << 30, 7, flags, calls, ncalls, &r->bw);
    free(calls);
    if (bw_rc != 0) {
        edgert_errf(err, err_len, "cannot measure bandwidth (1 GiB buffer)");
        return EDGERT_E_NOMEM;
    }
    r->ceiling_gbs = bw_ceiling(&r->bw);
    r->calls_ceiling_gbs = bw_calls_ceiling(&r->bw);
    return EDGERT_OK;
}

/* 4. The ceiling again, right after the steps (the same reads, 5
 * passes): a shared machine's bandwidth moves with its neighbours, so a
 * step is judged against both ends of its window, and a window whose ends
 * differ by more than BENCH_UNSTABLE is flagged rather than averaged into
 * a claim. */
static edgert_status decode_ceiling_after(bench_run *b, char *err, size_t err_len)
{
    bench_result *r = b->r;
    bw_result after;
    if (peak_bandwidth(r->threads, (size_t)1 << 30, 5, edgert_device_facts(b->ctx)->cpu_flags,
                       NULL, 0, &after) != 0) {
        edgert_errf(err, err_len, "cannot measure bandwidth (1 GiB buffer)");
        return EDGERT_E_NOMEM;
    }
    r->ceiling_after_gbs = bw_ceiling(&after);
    r->fraction_after = r->weight_gbs / r->ceiling_after_gbs;
    double hi = fmax(r->ceiling_gbs, r->ceiling_after_gbs);
    double lo = fmin(r->ceiling_gbs, r->ceiling_after_gbs);
    r->window_unstable = !(hi <= lo * (1.0 + BENCH_UNSTABLE));
    return EDGERT_OK;
}

/* The step's timing: op i's callback stamps the time, so op i took
 * stamp[i] - stamp[i - 1] (the step's own overhead included). */
typedef struct step_clock {
    double *stamp;
} step_clock;

static edgert_status step_stamp(void *user, size_t index)
{
    ((step_clock *)user)->stamp[index] = measure_now_s();
    return EDGERT_OK;
}

/* One decode step, M = 1: every GEMM of `order` as one edgert_step (or, with
 * --calls, one edgert_gemm each); each shape's seconds added to shape_t. */
static edgert_status decode_one_step(bench_run *b, const step_call *order, size_t ncalls,
                                     edgert_gemm_args *args, edgert_step_op *ops,
                                     step_clock *clk, double *shape_t, char *err, size_t err_len)
{
    double t0 = measure_now_s();
    if (!b->c->calls) {
        edgert_status st = edgert_step(b->be, ops, ncalls, err, err_len);
        for (size_t i = 0; st == EDGERT_OK && i < ncalls; i++)
            shape_t[order[i].s] += clk->stamp[i] - (i ? clk->stamp[i - 1] : t0);
        return st;
    }
    for (size_t i = 0; i < ncalls; i++) {
        double g0 = measure_now_s();
        edgert_status st =
            edgert_gemm(b->be, b->packed[order[i].s][order[i].idx], &args[i], err, err_len);
        shape_t[order[i].s] += measure_now_s() - g0;
        if (st != EDGERT_OK)
            return st;
    }
    return EDGERT_OK;
}

/* 3. Whole decode steps, M = 1: rep 0 warms up, then `reps` timed steps;
 * the median step and each shape's median share of it. */
static edgert_status decode_steps(bench_run *b, const step_call *order, size_t ncalls,
                                  const float *x, float *y, char *err, size_t err_len)
{
    const workload *w = b->w;
    bench_result *r = b->r;
    unsigned reps = b->c->repeat ? b->c->repeat : 5;
    edgert_status st = EDGERT_OK;
    double *times = calloc((size_t)reps * (w->nshapes + 1), sizeof *times);
    double *shape_t = calloc(w->nshapes, sizeof *shape_t);
    double *steps = calloc(reps, sizeof *steps);
    edgert_gemm_args *args = calloc(ncalls ? ncalls : 1, sizeof *args);
    edgert_step_op *ops = calloc(ncalls ? ncalls : 1, sizeof *ops);
    step_clock clk = {calloc(ncalls ? ncalls : 1, sizeof(double))};
    if (!times || !shape_t || !steps || !args || !ops || !clk.stamp) {
        edgert_errf(err, err_len, "out of memory");
        st = EDGERT_E_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < ncalls; i++) {
        const wl_shape *sh = &w->shapes[order[i].s];
        args[i] = (edgert_gemm_args){sizeof args[i], 1, x, sh->k, y, sh->n};
        ops[i] = (edgert_step_op){.struct_size = sizeof ops[i],
                                  .weights = b->packed[order[i].s][order[i].idx],
                                  .args = &args[i], .after = step_stamp, .user = &clk};
    }
    for (unsigned rep = 0; rep <= reps; rep++) { /* rep 0 warms up, untimed */
        memset(shape_t, 0, w->nshapes * sizeof *shape_t);
        double t0 = measure_now_s();
        st = decode_one_step(b, order, ncalls, args, ops, &clk, shape_t, err, err_len);
        if (st != EDGERT_OK)
            goto out;
        double dt = measure_now_s() - t0;
        if (rep > 0) {
            steps[rep - 1] = dt;
            for (size_t s = 0; s < w->nshapes; s++)
                times[(size_t)(rep - 1) * w->nshapes + s] = shape_t[s];
        }
        progress("decode", rep, reps);
    }
    double *sorted = steps; /* sorted in place: the order is not used again */
    double med = measure_median(sorted, reps);
    r->decode_calls = b->c->calls;
    r->step_ms_median = 1e3 * med;
    r->step_ms_min = 1e3 * sorted[0];
    r->step_ms_max = 1e3 * sorted[reps - 1];
    r->tokens_per_s = 1.0 / med;
    r->weight_gbs = (double)r->weight_bytes / med / 1e9;
    r->fraction_of_bandwidth = r->ceiling_gbs > 0.0 ? r->weight_gbs / r->ceiling_gbs : NAN;
    r->fraction_of_calls_ceiling =
        r->calls_ceiling_gbs > 0.0 ? r->weight_gbs / r->calls_ceiling_gbs : NAN;
    for (size_t s = 0; s < w->nshapes; s++) {
        double *v = steps; /* the step times are no longer needed: reuse */
        for (unsigned i = 0; i < reps; i++)
            v[i] = times[(size_t)i * w->nshapes + s];
        double ms = measure_median(v, reps);
        r->shapes[s].decode_ms = 1e3 * ms;
        r->shapes[s].decode_gbs = (double)r->shapes[s].packed_bytes / ms / 1e9;
    }
    r->have_decode = 1;
out:
    free(times);
    free(shape_t);
    free(steps);
    free(args);
    free(ops);
    free(clk.stamp);
    return st;
}

/* 3b. The step's bytes with no arithmetic: every op's packed weights read
 * through the handle's pool (edgert_parallel_for: the pool the plugin's
 * GEMMs run on), call by call in the step's order, with the ceiling's
 * best loop (bw_result.best_streams, best_prefetch) and the 64 KiB grain of the x86 decode kernels;
 * timed as many steps as the decode, right after it. Decode's fraction of
 * this separates what the kernel's own instruction stream costs (the
 * fraction well below 1) from what the step's structure costs (a fork and
 * join per GEMM, chunks, one buffer per matrix: this read itself well
 * below the ceiling). Needs the packed bytes (edgert_packed_data), which a
 * backend that cannot map its packed form keeps private: NaN then. */
#define SR_UNIT 256u          /* bytes per item: peak_read's block */
#define SR_GRAIN (65536u / SR_UNIT) /* 64 KiB per chunk at least */

typedef struct sr_job {
    const uint8_t *base;
    uint64_t flags;
    unsigned streams; /* the ceiling's best loop */
    int prefetch;
    uint64_t sink[64]; /* one slot per worker: read after the run, so kept */
} sr_job;

static void sr_range(void *arg, size_t begin, size_t end, unsigned worker)
{
    sr_job *j = arg;
    j->sink[worker % 64u] ^=
        peak_read(j->base + begin * SR_UNIT, (end - begin) * SR_UNIT, j->streams,
                  j->prefetch, j->flags);
}

static void decode_step_read(bench_run *b, const step_call *order, size_t ncalls)
{
    bench_result *r = b->r;
    const unsigned reps = b->c->repeat ? b->c->repeat : 5;
    r->step_read_gbs = r->step_read_min = r->step_read_max = r->fraction_of_step_read = NAN;
    const void **data = calloc(ncalls ? ncalls : 1, sizeof *data);
    size_t *units = calloc(ncalls ? ncalls : 1, sizeof *units);
    double *t = calloc(reps, sizeof *t);
    sr_job *j = calloc(1, sizeof *j); /* 64-byte sink array: off the stack */
    size_t bytes = 0;
    if (!data || !units || !t || !j || ncalls == 0)
        goto out;
    for (size_t i = 0; i < ncalls; i++) {
        size_t size = 0;
        if (edgert_packed_data(b->packed[order[i].s][order[i].idx], &data[i], &size, NULL, 0) !=
            EDGERT_OK)
            goto out; /* private packed bytes: nothing to read */
        units[i] = size / SR_UNIT;
        bytes += units[i] * SR_UNIT;
    }
    j->flags = edgert_device_facts(b->ctx)->cpu_flags;
    j->streams = r->bw.best_streams;
    j->prefetch = r->bw.best_prefetch;
    for (unsigned rep = 0; rep <= reps; rep++) { /* rep 0 warms up, untimed */
        double t0 = measure_now_s();
        for (size_t i = 0; i < ncalls; i++) {
            j->base = data[i];
            edgert_parallel_for(b->ctx, units[i], SR_GRAIN, sr_range, j);
        }
        if (rep > 0)
            t[rep - 1] = measure_now_s() - t0;
    }
    uint64_t keep = 0;
    for (size_t i = 0; i < 64u; i++)
        keep ^= j->sink[i];
    __asm__ volatile("" : : "r"(keep)); /* the reads must happen */
    double med = measure_median(t, reps); /* sorts t */
    r->step_read_gbs = (double)bytes / med / 1e9;
    r->step_read_min = (double)bytes / t[reps - 1] / 1e9;
    r->step_read_max = (double)bytes / t[0] / 1e9;
    r->fraction_of_step_read = r->weight_gbs / r->step_read_gbs;
out:
    free(data);
    free(units);
    free(t);
    free(j);
}

/* 4. Prefill: each shape once with m rows (a head with 1), median of the
 * repeats, weighted by its count; against the compute peak of the family
 * the kernel relies on. */
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
        progress("prefill", s + 1, w->nshapes);
    }
    free(v);
    r->prefill_tokens_per_s = m / total_s;
    r->prefill_gflops = total_flop / total_s / 1e9;
    r->compute_family =
        bench_compute_family(r->path, b->cand->layout.activation_bits, &r->peaks);
    r->fraction_of_compute_peak = r->prefill_gflops / r->peaks.value[r->compute_family];
    r->have_prefill = 1;
    return EDGERT_OK;
}

edgert_status bench_backend(edgert_ctx *ctx, const cli *c, const workload *w, const char *backend,
                            unsigned flags, bench_result *r, char *err, size_t err_len)
{
    bench_run b = {.ctx = ctx, .c = c, .w = w, .r = r};
    float *x = NULL, *y = NULL;
    step_call *order = NULL;
    memset(r, 0, sizeof *r);
    snprintf(r->backend, sizeof r->backend, "%s", backend);
    r->threads = edgert_thread_count(ctx);
    r->compute_family = -1;

    b.cand = edgert_candidate_find(ctx, backend);
    edgert_status st = edgert_backend_open(ctx, backend, c->options, &b.be, err, err_len);
    if (st != EDGERT_OK)
        return st;
    snprintf(r->path, sizeof r->path, "%s", edgert_backend_describe(b.be));
    st = pack_all(&b, err, err_len);
    if (st != EDGERT_OK)
        goto out;
    r->expected_weight_bytes =
        (uint64_t)((double)wl_weights(w) * b.cand->layout.bits_per_weight / 8.0 + 0.5);

    /* Activations and outputs, big enough for any shape. */
    uint32_t maxk = 0, maxn = 0;
    size_t ncalls = 0;
    for (size_t s = 0; s < w->nshapes; s++) {
        maxk = w->shapes[s].k > maxk ? w->shapes[s].k : maxk;
        maxn = w->shapes[s].n > maxn ? w->shapes[s].n : maxn;
        ncalls += w->shapes[s].count;
    }
    unsigned m = c->m ? c->m : 512;
    r->m = m;
    x = malloc(sizeof(float) * (size_t)m * maxk);
    y = malloc(sizeof(float) * (size_t)m * maxn);
    order = calloc(ncalls ? ncalls : 1, sizeof *order);
    if (!x || !y || !order) {
        edgert_errf(err, err_len, "out of memory");
        st = EDGERT_E_NOMEM;
        goto out;
    }
    gen_activations(x, m, maxk, c->seed);

    r->step_read_gbs = r->step_read_min = r->step_read_max = r->fraction_of_step_read = NAN;
    if (c->phase != PHASE_PREFILL) {
        const int window = !(flags & BENCH_STEPS_ONLY); /* the ceilings around the steps */
        ncalls = step_order(w, order);
        if (window) /* first, on the same threads */
            st = decode_ceiling(&b, order, ncalls, err, err_len);
        if (st == EDGERT_OK)
            st = decode_steps(&b, order, ncalls, x, y, err, err_len);
        if (st == EDGERT_OK && window)
            decode_step_read(&b, order, ncalls);
        if (st == EDGERT_OK && window)
            st = decode_ceiling_after(&b, err, err_len);
        if (st != EDGERT_OK)
            goto out;
    }
    if (c->phase != PHASE_DECODE)
        st = prefill(&b, m, x, y, err, err_len);
out:
    for (size_t s = 0; s < w->nshapes; s++) {
        for (uint32_t l = 0; b.packed[s] && l < w->shapes[s].count; l++)
            edgert_packed_free(b.packed[s][l]);
        free(b.packed[s]);
    }
    edgert_backend_close(b.be);
    free(x);
    free(y);
    free(order);
    return st;
}

int cmd_bench(const cli *c)
{
    workload w;
    edgert_ctx *ctx = NULL;
    int rc = open_measuring(c, "bench", "bench measures this one", &w, &ctx);
    if (rc)
        return rc;
    char err[1024] = "";
    const char *name = c->backend;
    edgert_selection *sel = NULL;
    if (!name) {
        if (edgert_select(ctx, c->priority, NULL, &sel, err, sizeof err) != EDGERT_OK) {
            tfprintf(stderr, "edgert: %s\n", err);
            edgert_close(ctx);
            wl_free(&w);
            return EXIT_NONE;
        }
        name = edgert_selection_selected(sel)->name;
    }
    bench_result *r = calloc(1, sizeof *r);
    edgert_status st = r ? bench_backend(ctx, c, &w, name, 0, r, err, sizeof err) : EDGERT_E_NOMEM;
    if (st == EDGERT_OK) {
        if (c->json)
            bench_print_json(r, &w, c);
        else
            bench_print_text(r, &w, c);
        rc = EXIT_OK;
    } else {
        tfprintf(stderr, "edgert bench: %s\n", err[0] ? err : edgert_status_name(st));
        rc = (st == EDGERT_E_NOT_ELIGIBLE || st == EDGERT_E_NOT_FOUND) ? EXIT_NONE
             : st == EDGERT_E_USAGE                                    ? EXIT_USAGE
                                                                       : EXIT_FAIL;
    }
    free(r);
    edgert_selection_free(sel);
    edgert_close(ctx);
    wl_free(&w);
    return rc;
}
