/*
 * tools/bench_decode.c — `edgert bench`'s decode phase: whole steps at
 * M = 1, judged against the read ceiling measured around them, and, with
 * --versus, paired step by step with a second backend's.
 */
#define _GNU_SOURCE
#include "bench_internal.h"
#include "measure.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One GEMM of a decode step: shape s, its matrix idx. */
typedef struct step_call {
    size_t s;
    uint32_t idx;
} step_call;

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

/* The read ceiling's buffer: --read-mib's, else 1 GiB (far beyond any LLC). */
static size_t ceiling_bytes(const bench_run *b)
{
    return (size_t)(b->c->read_mib ? b->c->read_mib : 1024u) << 20;
}

/* 2. The read ceiling, on the same threads, over ceiling_bytes:
 * the best of a plain, three prefetched and two interleaved-streams reads
 * (the streams spread over each thread's range, and 4 MiB at a time), also
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
    int bw_rc = peak_bandwidth(r->threads, ceiling_bytes(b), 7, flags, calls, ncalls, &r->bw);
    free(calls);
    if (bw_rc != 0) {
        edgert_errf(err, err_len, "cannot measure bandwidth (%zu MiB buffer)",
                    ceiling_bytes(b) >> 20);
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
    if (peak_bandwidth(r->threads, ceiling_bytes(b), 5, edgert_device_facts(b->ctx)->cpu_flags,
                       NULL, 0, &after) != 0) {
        edgert_errf(err, err_len, "cannot measure bandwidth (%zu MiB buffer)",
                    ceiling_bytes(b) >> 20);
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

/* One run's decode steps being timed: its ops, and what each step took. */
typedef struct step_plan {
    bench_run *b;
    edgert_gemm_args *args;
    edgert_step_op *ops;
    step_clock clk;
    double *shape_t; /* the step being timed: seconds per shape */
    double *times;   /* [rep][shape] */
    double *steps;   /* [rep]: whole steps, in the order timed */
} step_plan;

static void plan_free(step_plan *p)
{
    free(p->args);
    free(p->ops);
    free(p->clk.stamp);
    free(p->shape_t);
    free(p->times);
    free(p->steps);
    memset(p, 0, sizeof *p);
}

static int plan_init(step_plan *p, bench_run *b, const step_call *order, size_t ncalls,
                     unsigned reps, const float *x, float *y)
{
    const workload *w = b->w;
    const size_t nc = ncalls ? ncalls : 1;
    *p = (step_plan){.b = b,
                     .args = calloc(nc, sizeof *p->args),
                     .ops = calloc(nc, sizeof *p->ops),
                     .clk = {calloc(nc, sizeof(double))},
                     .shape_t = calloc(w->nshapes, sizeof(double)),
                     .times = calloc((size_t)reps * w->nshapes, sizeof(double)),
                     .steps = calloc(reps, sizeof(double))};
    if (!p->args || !p->ops || !p->clk.stamp || !p->shape_t || !p->times || !p->steps) {
        plan_free(p);
        return -1;
    }
    for (size_t i = 0; i < ncalls; i++) {
        const wl_shape *sh = &w->shapes[order[i].s];
        p->args[i] = (edgert_gemm_args){sizeof p->args[i], 1, x, sh->k, y, sh->n};
        p->ops[i] = (edgert_step_op){.struct_size = sizeof p->ops[i],
                                     .weights = b->packed[order[i].s][order[i].idx],
                                     .args = &p->args[i], .after = step_stamp, .user = &p->clk};
    }
    return 0;
}

/* One step of p's run; rep 0 warms up, untimed. */
static edgert_status plan_step(step_plan *p, const step_call *order, size_t ncalls, unsigned rep,
                               char *err, size_t err_len)
{
    const size_t nshapes = p->b->w->nshapes;
    memset(p->shape_t, 0, nshapes * sizeof *p->shape_t);
    double t0 = measure_now_s();
    edgert_status st = decode_one_step(p->b, order, ncalls, p->args, p->ops, &p->clk, p->shape_t,
                                       err, err_len);
    double dt = measure_now_s() - t0;
    if (st == EDGERT_OK && rep > 0) {
        p->steps[rep - 1] = dt;
        memcpy(p->times + (size_t)(rep - 1) * nshapes, p->shape_t, nshapes * sizeof *p->shape_t);
    }
    return st;
}

/* The median step and each shape's median share of it, into p's result
 * (sorts p->steps). */
static void plan_finish(step_plan *p, unsigned reps)
{
    const workload *w = p->b->w;
    bench_result *r = p->b->r;
    double *sorted = p->steps; /* sorted in place: the order is not used again */
    double med = measure_median(sorted, reps);
    r->decode_calls = p->b->c->calls;
    r->steps = reps;
    r->step_ms_median = 1e3 * med;
    r->step_ms_min = 1e3 * sorted[0];
    r->step_ms_max = 1e3 * sorted[reps - 1];
    r->tokens_per_s = 1.0 / med;
    r->weight_gbs = (double)r->weight_bytes / med / 1e9;
    r->fraction_of_bandwidth = r->ceiling_gbs > 0.0 ? r->weight_gbs / r->ceiling_gbs : NAN;
    r->fraction_of_calls_ceiling =
        r->calls_ceiling_gbs > 0.0 ? r->weight_gbs / r->calls_ceiling_gbs : NAN;
    for (size_t s = 0; s < w->nshapes; s++) {
        double *v = p->steps; /* the step times are no longer needed: reuse */
        for (unsigned i = 0; i < reps; i++)
            v[i] = p->times[(size_t)i * w->nshapes + s];
        double ms = measure_median(v, reps);
        r->shapes[s].decode_ms = 1e3 * ms;
        r->shapes[s].decode_gbs = (double)r->shapes[s].packed_bytes / ms / 1e9;
    }
    r->have_decode = 1;
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

/* The step's packed bytes, call by call, ready to be read (NULL: private
 * bytes, or out of memory). */
typedef struct step_reader {
    const void **data;
    size_t *units;
    size_t ncalls, bytes;
    sr_job *j; /* 64-byte sink array: off the stack */
} step_reader;

static void sr_free(step_reader *sr)
{
    free(sr->data);
    free(sr->units);
    if (sr->j != NULL) {
        uint64_t keep = 0;
        for (size_t i = 0; i < 64u; i++)
            keep ^= sr->j->sink[i];
        __asm__ volatile("" : : "r"(keep)); /* the reads must happen */
    }
    free(sr->j);
    memset(sr, 0, sizeof *sr);
}

static int sr_init(step_reader *sr, bench_run *b, const step_call *order, size_t ncalls)
{
    *sr = (step_reader){.data = calloc(ncalls ? ncalls : 1, sizeof *sr->data),
                        .units = calloc(ncalls ? ncalls : 1, sizeof *sr->units),
                        .ncalls = ncalls,
                        .j = calloc(1, sizeof *sr->j)};
    if (!sr->data || !sr->units || !sr->j || ncalls == 0)
        goto fail;
    for (size_t i = 0; i < ncalls; i++) {
        size_t size = 0;
        if (edgert_packed_data(b->packed[order[i].s][order[i].idx], &sr->data[i], &size, NULL,
                               0) != EDGERT_OK)
            goto fail; /* private packed bytes: nothing to read */
        sr->units[i] = size / SR_UNIT;
        sr->bytes += sr->units[i] * SR_UNIT;
    }
    sr->j->flags = edgert_device_facts(b->ctx)->cpu_flags;
    sr->j->streams = b->r->bw.best_streams;
    sr->j->prefetch = b->r->bw.best_prefetch;
    return 0;
fail:
    sr_free(sr);
    return -1;
}

/* One step read: seconds. */
static double sr_time(step_reader *sr, bench_run *b)
{
    double t0 = measure_now_s();
    for (size_t i = 0; i < sr->ncalls; i++) {
        sr->j->base = sr->data[i];
        edgert_parallel_for(b->ctx, sr->units[i], SR_GRAIN, sr_range, sr->j);
    }
    return measure_now_s() - t0;
}

static void decode_step_read(bench_run *b, const step_call *order, size_t ncalls)
{
    bench_result *r = b->r;
    const unsigned reps = b->r->steps; /* as many as the decode timed */
    r->step_read_gbs = r->step_read_min = r->step_read_max = r->fraction_of_step_read = NAN;
    step_reader sr;
    double *t = calloc(reps, sizeof *t);
    if (!t || sr_init(&sr, b, order, ncalls) != 0) {
        free(t);
        return;
    }
    for (unsigned rep = 0; rep <= reps; rep++) { /* rep 0 warms up, untimed */
        double dt = sr_time(&sr, b);
        if (rep > 0)
            t[rep - 1] = dt;
    }
    double med = measure_median(t, reps); /* sorts t */
    r->step_read_gbs = (double)sr.bytes / med / 1e9;
    r->step_read_min = (double)sr.bytes / t[reps - 1] / 1e9;
    r->step_read_max = (double)sr.bytes / t[0] / 1e9;
    r->fraction_of_step_read = r->weight_gbs / r->step_read_gbs;
    sr_free(&sr);
    free(t);
}

/* --paired-read's figures from each timed step's seconds and the seconds
 * of the read right after it (sorts nothing of the caller's). */
static void paired_result(bench_result *r, const double *step_s, const double *read_s,
                          unsigned reps, size_t read_bytes)
{
    double *f = calloc(reps, sizeof *f), *g = calloc(reps, sizeof *g);
    unsigned *by = calloc(reps, sizeof *by);
    if (!f || !g || !by || reps == 0)
        goto out;
    for (unsigned i = 0; i < reps; i++) {
        const double decode_gbs = (double)r->weight_bytes / step_s[i] / 1e9;
        g[i] = (double)read_bytes / read_s[i] / 1e9;
        f[i] = decode_gbs / g[i];
        by[i] = i;
    }
    /* the steps by their read's GB/s, fastest first (insertion: reps is small) */
    for (unsigned i = 1; i < reps; i++)
        for (unsigned k = i; k > 0 && g[by[k]] > g[by[k - 1]]; k--) {
            unsigned t = by[k];
            by[k] = by[k - 1];
            by[k - 1] = t;
        }
    const unsigned third = reps >= 3u ? reps / 3u : 1u;
    double *fast = calloc(third, sizeof *fast);
    if (fast == NULL)
        goto out;
    for (unsigned i = 0; i < third; i++)
        fast[i] = f[by[i]];
    r->paired_fast_read_max = g[by[0]];
    r->paired_fast_read_min = g[by[third - 1]];
    r->paired_fast_fraction = measure_median(fast, third);
    free(fast);
    r->paired_median = measure_median(f, reps); /* sorts f */
    r->paired_min = f[0];
    r->paired_max = f[reps - 1];
    r->paired_steps = reps;
out:
    free(f);
    free(g);
    free(by);
}

/* Untimed steps before the timed ones: a weight's first call is cold, and
 * a plugin may still be settling on its next calls. edgert's own
 * (prefetch=auto, streams=auto: plugin_kit.h) run each weight's calls 1, 3,
 * ... in the other mode until BENCH_AUTO_WARM_PAIRS pairs each way round
 * have been seen, the pairs coming from calls 2, 3, ... (a step calls each
 * weight once: step_order). With spark-1.7b's 113 GEMMs that is 4 steps;
 * when only step 0 warmed up, step 1 ran wholly in the other mode and step
 * 3 until the first choice (on a Zen 5 in a quiet window, 4 streams' calls,
 * 4-8% longer). The 64 pairs after the first choice, which probe 1 call in
 * 16 whatever the gap, fall in the first 4-5 timed steps: they are part of
 * what a process's first steps cost. */
#define BENCH_AUTO_WARM_PAIRS 16u /* PK_PF_AUTO_WARM (plugins/kit/plugin_kit.h) */
static unsigned warm_steps(size_t ncalls)
{
    const size_t n = ncalls != 0u ? ncalls : 1u;
    return 2u + 2u * (unsigned)((BENCH_AUTO_WARM_PAIRS + n - 1u) / n);
}

/* 3. Whole decode steps, M = 1: warm_steps() untimed, then `reps` timed steps;
 * the median step and each shape's median share of it. With vs, each rep
 * is a pair: one step of each run, the first in turn (b then vs, vs then
 * b, ...; an even number of pairs by default, so each run goes first as
 * often), so whatever the machine's bandwidth does meets both alike; the
 * pair's ratio is vs's step time over b's, in b->r->vs. */
static edgert_status decode_steps(bench_run *b, bench_run *vs, const step_call *order,
                                  size_t ncalls, const float *x, float *y, char *err,
                                  size_t err_len)
{
    unsigned reps = b->c->repeat ? b->c->repeat : vs ? BENCH_VERSUS_PAIRS : 5;
    step_plan pa = {0}, pb = {0};
    double *ratio = NULL, *read_s = NULL;
    step_reader sr = {0};
    /* --paired-read (never with vs): a step read after each step */
    const int paired = b->c->paired_read && !vs && sr_init(&sr, b, order, ncalls) == 0;
    if (b->c->paired_read && !vs && !paired)
        tfprintf(stderr, "edgert bench: --paired-read: %s keeps its packed bytes private (or "
                         "memory ran out): the steps are timed without reads\n",
                 b->r->backend);
    edgert_status st = EDGERT_OK;
    if ((paired && !(read_s = calloc(reps, sizeof *read_s))) ||
        plan_init(&pa, b, order, ncalls, reps, x, y) != 0 ||
        (vs && (plan_init(&pb, vs, order, ncalls, reps, x, y) != 0 ||
                !(ratio = calloc(reps, sizeof *ratio))))) {
        edgert_errf(err, err_len, "out of memory");
        st = EDGERT_E_NOMEM;
        goto out;
    }
    /* the warm-up's first steps; rep 0 below is its last */
    const unsigned warm = warm_steps(ncalls);
    for (unsigned i = 1; i < warm && st == EDGERT_OK; i++) {
        st = plan_step(&pa, order, ncalls, 0, err, err_len);
        if (st == EDGERT_OK && vs)
            st = plan_step(&pb, order, ncalls, 0, err, err_len);
    }
    for (unsigned rep = 0; rep <= reps && st == EDGERT_OK; rep++) {
        /* warm-up and pair 1: b first; then vs first every other pair */
        step_plan *first = vs && rep > 0u && rep % 2u == 0u ? &pb : &pa;
        step_plan *second = !vs ? NULL : first == &pa ? &pb : &pa;
        st = plan_step(first, order, ncalls, rep, err, err_len);
        if (st == EDGERT_OK && second)
            st = plan_step(second, order, ncalls, rep, err, err_len);
        if (st == EDGERT_OK && paired) {
            const double dt = sr_time(&sr, b);
            if (rep > 0)
                read_s[rep - 1] = dt;
        }
        bench_progress("decode", rep, reps);
    }
    if (st != EDGERT_OK)
        goto out;
    if (paired) /* before plan_finish, which sorts the step times */
        paired_result(b->r, pa.steps, read_s, reps, sr.bytes);
    if (vs) {
        bench_versus *v = &b->r->vs;
        for (unsigned i = 0; i < reps; i++) {
            ratio[i] = pb.steps[i] / pa.steps[i];
            v->faster += ratio[i] < 1.0;
        }
        v->pairs = reps;
        v->ratio_median = measure_median(ratio, reps); /* sorts ratio */
        v->ratio_min = ratio[0];
        v->ratio_max = ratio[reps - 1];
        plan_finish(&pb, reps);
    }
    plan_finish(&pa, reps);
out:
    plan_free(&pa);
    plan_free(&pb);
    free(ratio);
    free(read_s);
    sr_free(&sr);
    return st;
}

/* 5. The kernel's own rate: the step's GEMMs taken in its order, each that
 * still fits in_cache_budget() with those taken before (the others
 * skipped), run as one step (with --calls, one edgert_gemm each)
 * IN_CACHE_REPS times after IN_CACHE_WARM untimed ones, so they come from
 * the cache: their bytes over the median step are what the kernel's
 * instructions (and these few calls' synchronisation) allow. At M = 1 every
 * shape costs the kernel about the same per packed byte, so this stands for
 * the step; the shapes taken are named. Decode near it: the arithmetic
 * binds at this machine's bandwidth; far below it: the memory or the step's
 * structure does. NaN, with in_cache_why, when not measured. */
#define IN_CACHE_WARM 4u
#define IN_CACHE_REPS 64u

/* A sysfs cache file's number: a level ("3") or a size in bytes ("32768K",
 * "2M"); 0 if unreadable. */
static size_t sysfs_number(const char *path)
{
    char buf[32] = "", *end = NULL;
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    const int got = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    unsigned long long v = got ? strtoull(buf, &end, 10) : 0;
    const char unit = end ? *end : '\0';
    return unit == 'K' ? (size_t)(v << 10) : unit == 'M' ? (size_t)(v << 20)
           : unit == 'G' ? (size_t)(v << 30) : (size_t)v;
}

/* Half the last-level cache CPU 0 sees (sysfs: the CCX's 32 MiB on the Zen 3
 * VM, where sysconf's L3 says the package's 256 MiB; else sysconf's; aarch64
 * glibc gives 0 there), at most BENCH_IN_CACHE_BYTES; 0 when unknown. */
static size_t in_cache_budget(void)
{
    size_t llc = 0;
    unsigned top = 0;
    for (unsigned i = 0; i < 8u; i++) {
        char path[96];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%u/level", i);
        const unsigned level = (unsigned)sysfs_number(path);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%u/size", i);
        const size_t size = level > top ? sysfs_number(path) : 0;
        if (size > 0) {
            top = level;
            llc = size;
        }
    }
    if (llc == 0) {
        long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
        llc = l3 > 0 ? (size_t)l3 : 0;
    }
    return llc / 2u < BENCH_IN_CACHE_BYTES ? llc / 2u : BENCH_IN_CACHE_BYTES;
}

static edgert_status decode_in_cache(bench_run *b, const step_call *order, size_t ncalls,
                                     const float *x, float *y, char *err, size_t err_len)
{
    bench_result *r = b->r;
    step_call *sub = calloc(ncalls ? ncalls : 1u, sizeof *sub);
    size_t n = 0, budget = in_cache_budget(), used = 0;
    uint64_t bytes = 0;
    r->in_cache_shapes[0] = '\0';
    for (size_t i = 0; sub && budget && i < ncalls; i++) {
        size_t pb = edgert_packed_bytes(b->packed[order[i].s][order[i].idx]);
        if (bytes + pb > budget)
            continue;
        const char *name = b->w->shapes[order[i].s].name;
        int seen = 0;
        for (size_t k = 0; k < n && !seen; k++)
            seen = sub[k].s == order[i].s;
        if (!seen && used + 1 < sizeof r->in_cache_shapes) {
            int wr = snprintf(r->in_cache_shapes + used, sizeof r->in_cache_shapes - used, "%s%s",
                              used ? ", " : "", name);
            used += wr > 0 ? (size_t)wr : 0;
        }
        sub[n++] = order[i];
        bytes += pb;
    }
    step_plan p = {0};
    if (n == 0 || plan_init(&p, b, sub, n, IN_CACHE_REPS, x, y) != 0) {
        snprintf(r->in_cache_why, sizeof r->in_cache_why, "%s",
                 !sub || n ? "out of memory"
                 : budget  ? "no GEMM of the step fits in half the last-level cache (8 MiB at most)"
                           : "the last-level cache's size is unknown");
        free(sub);
        return EDGERT_OK; /* not measured: NaN */
    }
    edgert_status st = EDGERT_OK;
    for (unsigned rep = 0; rep < IN_CACHE_WARM + IN_CACHE_REPS && st == EDGERT_OK; rep++)
        st = plan_step(&p, sub, n, rep < IN_CACHE_WARM ? 0u : rep - IN_CACHE_WARM + 1u, err,
                       err_len);
    if (st == EDGERT_OK) {
        double med = measure_median(p.steps, IN_CACHE_REPS); /* sorts p.steps */
        r->in_cache_gbs = (double)bytes / med / 1e9;
        r->in_cache_min = (double)bytes / p.steps[IN_CACHE_REPS - 1u] / 1e9;
        r->in_cache_max = (double)bytes / p.steps[0] / 1e9;
        r->fraction_of_in_cache = r->weight_gbs / r->in_cache_gbs;
        r->in_cache_calls = n;
        r->in_cache_bytes = bytes;
    }
    plan_free(&p);
    free(sub);
    return st;
}

/* --versus: the other run's figures beside this one's, against this run's
 * window (the same ceilings: its steps ran between them). */
static void versus_result(bench_run *b, const bench_run *vs)
{
    bench_result *r = b->r;
    const bench_result *o = vs->r;
    bench_versus *v = &r->vs;
    snprintf(v->backend, sizeof v->backend, "%s", o->backend);
    snprintf(v->path, sizeof v->path, "%s", o->path);
    v->ms_median = o->step_ms_median;
    v->ms_min = o->step_ms_min;
    v->ms_max = o->step_ms_max;
    v->weight_bytes = o->weight_bytes;
    v->weight_gbs = o->weight_gbs;
    v->fraction_of_bandwidth = r->ceiling_gbs > 0.0 ? o->weight_gbs / r->ceiling_gbs : NAN;
    v->fraction_after = r->ceiling_after_gbs > 0.0 ? o->weight_gbs / r->ceiling_after_gbs : NAN;
    r->have_versus = 1;
}

edgert_status bench_decode(bench_run *b, bench_run *vs, unsigned flags, const float *x, float *y,
                           char *err, size_t err_len)
{
    const workload *w = b->w;
    size_t ncalls = 0;
    for (size_t s = 0; s < w->nshapes; s++)
        ncalls += w->shapes[s].count;
    step_call *order = calloc(ncalls ? ncalls : 1, sizeof *order);
    if (!order) {
        edgert_errf(err, err_len, "out of memory");
        return EDGERT_E_NOMEM;
    }
    const int window = !(flags & BENCH_STEPS_ONLY); /* the ceilings around the steps */
    ncalls = step_order(w, order);
    edgert_status st = EDGERT_OK;
    if (window) /* first, on the same threads */
        st = decode_ceiling(b, order, ncalls, err, err_len);
    if (st == EDGERT_OK)
        st = decode_steps(b, vs, order, ncalls, x, y, err, err_len);
    if (st == EDGERT_OK && window)
        decode_step_read(b, order, ncalls);
    if (st == EDGERT_OK && window)
        st = decode_ceiling_after(b, err, err_len);
    if (st == EDGERT_OK && window) /* after the window: it reads no DRAM worth timing */
        st = decode_in_cache(b, order, ncalls, x, y, err, err_len);
    if (st == EDGERT_OK && vs)
        versus_result(b, vs);
    free(order);
    return st;
}
