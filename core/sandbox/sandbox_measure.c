/*
 * core/sandbox/sandbox_measure.c — first contact's quick measurement, run in the
 * child (sandbox.c) once the plugin loaded and passed its self-test. It
 * gives the ranking a figure measured on this device instead of a claim: a
 * few decode-shaped GEMV calls over 48 MiB of packed weights, evicted from
 * every cache level before each call (packed into
 * the child's arena, which knows where they are, whatever the plugin's
 * ABI), so they stream from memory as decode does (a last-level cache can
 * hold 48 MiB: 480 MiB on the Xeon where that was found, whose first
 * contacts then measured the L3 and ranked by its noise: 53.6 and 65.6
 * tok/s for one kernel under two manifests, against 38 from memory),
 * converted to decode tokens/s of the reference workload (spark-1.7b,
 * architecture.md, Reference workload: 1,707,081,728 weights per step), each call beside a read
 * of as many bytes from memory that gives the figure its moment's
 * bandwidth (time_gemm), and one small prefill GEMM (GFLOP/s); a slow
 * kernel is timed on smaller shapes (er_sb_quick_measure).
 * `edgert calibrate` measures properly and overrides it.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/contention.h"
#include "common/workload.h"
#include "sandbox/sandbox.h"

#define ER_MEASURE_BYTES (48u << 20)  /* packed weights streamed (evicted first, see above) */
#define ER_MEASURE_SECONDS 0.25       /* at most this long of GEMV calls */
#define ER_MEASURE_SLOW_CALL 0.05     /* s: a slower kernel keeps its small-shape figure */
#define ER_MEASURE_WARM 40            /* calls before the timed ones: a tuner's first calls */
#define ER_MEASURE_WARM_SECONDS 0.5   /* at most this long of them */
#define ER_MEASURE_BOUND 2.0          /* a call this many times the read's: arithmetic binds */
#define ER_MEASURE_STRAY 1.5          /* a read this far from their median: not a window */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Canonical weights of n x k with random codes (the values do not matter for
 * speed, only that they are not all alike), symmetric (every layout takes
 * that), in groups of `group` (which divides k). */
static int fill_weights(edgert_qtensor *t, uint32_t n, uint32_t k, uint32_t group)
{
    size_t codes = (size_t)n * (k / 2u), ng = (size_t)n * (k / group);
    t->codes = malloc(codes);
    t->scales = malloc(ng * sizeof(float));
    t->zeros = NULL;
    if (!t->codes || !t->scales)
        return -1;
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < codes; i += 8) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        memcpy(t->codes + i, &x, codes - i < 8 ? codes - i : 8);
    }
    for (size_t i = 0; i < ng; i++)
        t->scales[i] = 0.01f;
    t->view = (edgert_qweights){.struct_size = sizeof(edgert_qweights), .n = n, .k = k,
                                .group = group, .codes = t->codes, .scales = t->scales,
                                .zeros = NULL, .name = "first-contact measurement"};
    return 0;
}

/* Seconds of calls: their median, the fastest and the slowest; with a
 * paired read, the median read's seconds (else NaN). */
typedef struct {
    double med, min, max, read;
} sb_times;

/* The yardstick read beside each decode call: ER_MEASURE_BYTES of the
 * child's arena, split into one contiguous part per pool thread (as the
 * GEMV splits its rows), each part read as two streams side by side, every
 * 64-bit word summed, with one prefetch 6 KiB ahead of each 64-byte line,
 * as the x86 decode kernels issue off Intel (prefetch=far-l1). On the AMD
 * EPYC (Zen 5) host, 2 threads, medians of 9 reads of 48 MiB from memory,
 * every kind alike (47-51 GB/s) in busy windows, and in quieter ones:
 * plain 62-69, one stream prefetched 63-66, two streams prefetched 69-71
 * GB/s. A decode GEMV streamed ~82 GB/s in such windows, so no read here
 * reaches what memory gives then: the read tracks the window, it does not
 * measure its ceiling (the selector's scaling errs by what it misses:
 * selector_figures.c). */
typedef struct {
    const uint64_t *p;
    size_t words, parts;
    uint64_t sink; /* added to atomically: parts run on several workers */
} sb_read;

static void read_part(void *arg, size_t begin, size_t end, unsigned worker)
{
    sb_read *r = arg;
    (void)worker;
    for (size_t part = begin; part < end; part++) {
        const uint64_t *q = r->p + r->words * part / r->parts,
                       *e = r->p + r->words * (part + 1u) / r->parts;
        const size_t half = (size_t)(e - q) / 16u * 8u; /* whole lines per stream */
        const uint64_t *h = q + half, *qe = h;
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (; q < qe; q += 8, h += 8) {
            __builtin_prefetch(q + 768, 0, 3); /* 6 KiB ahead (past the end: no fault) */
            __builtin_prefetch(h + 768, 0, 3);
            s0 += q[0] + q[4] + h[0] + h[4], s1 += q[1] + q[5] + h[1] + h[5];
            s2 += q[2] + q[6] + h[2] + h[6], s3 += q[3] + q[7] + h[3] + h[7];
        }
        for (q = h; q < e; q++) /* the second stream's end, and what is left */
            s0 += *q;
        /* kept: the loads cannot be dropped */
        __atomic_fetch_add(&r->sink, s0 + s1 + s2 + s3, __ATOMIC_RELAXED);
    }
}

static double time_read(er_cand *c, const void *buf)
{
    unsigned threads = er_pool_threads(c->ctx->pool);
    sb_read r = {.p = buf, .words = ER_MEASURE_BYTES / 8u, .parts = threads};
    double t0 = now_s();
    er_pool_run(c->ctx->pool, threads, 1u, read_part, &r);
    return now_s() - t0;
}

static void sort_times(double *t, int n)
{
    for (int i = 1; i < n; i++) /* insertion sort of a handful */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double v = t[j];
            t[j] = t[j - 1];
            t[j - 1] = v;
        }
}

/*
 * Up to `reps` calls of y = x W^T with m rows, within ER_MEASURE_SECONDS
 * after a warm-up call (ER_MEASURE_WARM with rbuf, below); NaNs on
 * failure. With `evict`, what the plugin packed (the child's arena:
 * time_rows packs into it) leaves every cache before each call (untimed).
 * With `rbuf` (an arena block of
 * ER_MEASURE_BYTES) each call is paired with a read of it just before,
 * from memory too, and each call's time is scaled to the median read's
 * window: t_j * read_med / read_j. Memory bandwidth moves with the
 * neighbours from one second to the next (27-86 GB/s seen on one host),
 * so a first contact's figure alone says as much about its moment as
 * about its plugin: on a fresh clone of the AMD EPYC (Zen 5) host, three
 * first contacts a second apart gave 52.3 tok/s to avx2-w4a16 and 34.4 to
 * avx512-w4a8 (its calls 26.5-45.1: the window moved under them), whose
 * kernel streams faster in any one window. Paired, a call that met a slow window is
 * measured against the read that met it too (a decode GEMV is
 * memory-bound: its time follows the read's), and the median read is
 * reported beside the figure so the selector can compare every first
 * contact at one read rate (selector.c).
 */
static sb_times time_gemm(er_cand *c, const void *packed, uint32_t m, uint32_t n, uint32_t k,
                          int reps, int evict, const void *rbuf)
{
    float *x = calloc((size_t)m * k, sizeof(float)), *y = malloc((size_t)m * n * sizeof(float));
    double t[16], rd[16] = {0}, rs[16];
    sb_times result = {NAN, NAN, NAN, NAN};
    int done = 0;
    char err[256] = "";
    if (!x || !y)
        goto out;
    for (size_t i = 0; i < (size_t)m * k; i++)
        x[i] = (float)((int)(i % 17u) - 8) * 0.125f;
    edgert_gemm_args a = {.struct_size = sizeof a, .m = m, .x = x, .ldx = k, .y = y, .ldy = n};
    if (c->plugin->gemm(c->state, packed, &a, err, sizeof err) != EDGERT_OK)
        goto out;
    double start = now_s();
    /* A plugin may tune itself on a weight's first calls: this tree's
     * prefetch=auto and streams=auto alternate two modes for about 34 calls
     * before they choose (plugin_kit.h), and timing those calls measured
     * avx512-w4a8 on the AMD EPYC (Zen 5) at 1.30 ms and 1.05 ms by turns,
     * a median 12% under its own steady figure, below avx512-w4a16 though
     * it reads 3% fewer bytes. So with the full decode shape (rbuf), the
     * timed calls come after ER_MEASURE_WARM evicted, untimed ones (or
     * ER_MEASURE_WARM_SECONDS of them, ~0.1 s on the EPYC host): decode runs
     * a weight many times more. */
    for (int w = 0; rbuf && w < ER_MEASURE_WARM && now_s() - start < ER_MEASURE_WARM_SECONDS;
         w++) {
        er_arena_evict(c->ctx->arena);
        if (c->plugin->gemm(c->state, packed, &a, err, sizeof err) != EDGERT_OK)
            goto out;
    }
    start = now_s();
    while (done < reps && done < 16 && (done < 2 || now_s() - start < ER_MEASURE_SECONDS)) {
        /* one eviction serves both: the read leaves the packed weights out */
        if (evict)
            er_arena_evict(c->ctx->arena);
        if (rbuf)
            rd[done] = time_read(c, rbuf);
        double t0 = now_s();
        if (c->plugin->gemm(c->state, packed, &a, err, sizeof err) != EDGERT_OK)
            goto out;
        t[done++] = now_s() - t0;
    }
    memcpy(rs, t, sizeof t);
    sort_times(rs, done);
    double call = rs[done / 2];
    memcpy(rs, rd, sizeof rd);
    sort_times(rs, rbuf ? done : 0);
    /* a call over ER_MEASURE_BOUND reads long streams at under half the
     * read's rate: its arithmetic binds it, and a read rate would not
     * describe it (the portable reference: 26-28 ms per call beside 1.0-1.2
     * ms reads); its times stand as measured, with no read */
    if (rbuf && call <= ER_MEASURE_BOUND * rs[done / 2]) {
        result.read = rs[done / 2];
        for (int i = 0; i < done; i++) /* a read cut off by another task is no window */
            if (rd[i] <= ER_MEASURE_STRAY * result.read && rd[i] * ER_MEASURE_STRAY >= result.read)
                t[i] *= result.read / rd[i];
    }
    sort_times(t, done);
    result.med = t[done / 2];
    result.min = t[0];
    result.max = t[done - 1];
out:
    free(x);
    free(y);
    return result;
}

/* Packs the first n rows of t (n <= t's rows) and times `reps` calls of
 * m rows (see time_gemm; rbuf pairs each with a read). NaNs when the
 * plugin refuses (its first refusal kept in r->pack_refused, one line: a
 * manifest whose layout its own library refuses, found by a vendor's
 * walkthrough, said nothing), and for decode
 * (m = 1) when pack put under half of its packed bytes in the arena, which
 * is the only memory eviction reaches (r->packed_outside set): a plugin that
 * allocates them with malloc would be timed from the last-level cache (a
 * vendor's walkthrough: 47 tok/s against 28-31 for the same kernel). */
static sb_times time_rows(er_cand *c, edgert_qtensor *t, uint32_t m, uint32_t n, int reps,
                          const void *rbuf, sb_result *r)
{
    void *packed = NULL;
    size_t bytes = 0;
    char err[256] = "";
    edgert_qweights w = t->view;
    w.n = n;
    /* into the arena, as edgert_pack does: the blocks time_gemm evicts */
    size_t before = er_arena_live_bytes(c->ctx->arena);
    er_arena *prev = er_arena_packing(c->ctx->arena);
    edgert_status st = c->plugin->pack(c->state, &w, &packed, &bytes, err, sizeof err);
    er_arena_packing(prev);
    if (st != EDGERT_OK) {
        /* said only of what the manifest declares: its own group (not the
         * 128 used when it does not divide K), on the decode shape */
        if (!r->pack_refused[0] && m == 1u && c->m.group_size > 0 &&
            w.group == (uint32_t)c->m.group_size) {
            /* the error cut to fit beside the shape (240 bytes in all) */
            snprintf(r->pack_refused, sizeof r->pack_refused, "n=%u k=%u group %u: %.190s", n,
                     w.k, w.group, err[0] ? err : edgert_status_name(st));
            for (char *p = r->pack_refused; *p; p++)
                if (*p == '\n' || *p == '\r')
                    *p = ' ';
        }
        return (sb_times){NAN, NAN, NAN, NAN};
    }
    sb_times s = {NAN, NAN, NAN, NAN};
    if (m == 1u && c->ctx->arena && er_arena_live_bytes(c->ctx->arena) - before < bytes / 2u)
        r->packed_outside = 1;
    else /* decode streams from memory */
        s = time_gemm(c, packed, m, n, w.k, reps, m == 1u, rbuf);
    c->plugin->packed_free(c->state, packed);
    return s;
}

/*
 * Decode tokens/s and prefill GFLOP/s of the loaded instance, in the
 * manifest's group size where it divides K = 4096 (a layout of groups of 32
 * may refuse 128), else 128. A layout that refuses the shape anyway leaves
 * NaN: the verdict still passes, with no measurement, and the backend is
 * ranked by its declared figures (below the measured ones).
 *
 * Each figure is first timed on a small shape. A kernel for which the full
 * shape would take over ER_MEASURE_SLOW_CALL per call keeps the small
 * figure: for decode that is under 1 GB/s of packed weights, far below the
 * memory bandwidth of any device edgert serves, so the kernel is limited by
 * its arithmetic and the cache cannot flatter it much; for prefill the
 * small shape is already 8 M multiply-adds. That keeps first contact short
 * for slow kernels (the portable reference, a sanitizer build, an emulator):
 * the full shapes cost them seconds. A fast kernel gets the full shapes.
 */
void er_sb_quick_measure(er_cand *c, sb_result *r)
{
    const uint32_t k = 4096u, n = ER_MEASURE_BYTES / (k / 2u); /* ~48 MiB of codes */
    const uint32_t n_small = 512u, n_prefill = 2048u, n_prefill_small = 32u;
    const uint32_t group = c->m.group_size > 0 && k % (uint32_t)c->m.group_size == 0
                               ? (uint32_t)c->m.group_size
                               : 128u;
    edgert_qtensor t = {0};
    /* what the machine's other load did to the measurement (sandbox.c
     * judges it with this device's quiet read: common/contention.h) */
    er_cpu_mark before, after;
    er_cpu_mark_now(&before);
    if (!(c->plugin->caps & EDGERT_CAP_GEMM) || fill_weights(&t, n, k, group) != 0)
        goto out;
    /* decode: weights per second, whatever the packed bytes per weight;
     * the slowest and fastest call give the figure's range, which the
     * selector compares as it does calibrate's rounds. Up to 16 calls, on
     * the Xeon with AMX (read ceiling 29-33 GB/s): with the median of 8
     * and no range, four fresh first contacts chose three different
     * backends for speed; with the range of 8 calls, five chose amx-w4a8
     * three times and avx512-w4a16 twice (one of amx-w4a8's medians 15%
     * below its others: a slow stretch of calls); with 16 calls and their
     * range, six chose amx-w4a8 five times (in one decode group with
     * avx512-w4a16 each time, its prefill deciding), at no cost a user
     * could see (1.83 s for all five backends either way). */
    sb_times s = time_rows(c, &t, 1u, n_small, 3, NULL, r);
    double rows = n_small;
    if (s.med > 0.0 && s.med * n / n_small <= ER_MEASURE_SLOW_CALL) {
        /* the full shape streams fast enough for memory to bind: each call
         * paired with a read (time_gemm). A slower kernel is bound by its
         * arithmetic, which no read rate describes: its figure stands alone
         * (read_gbs NaN), compared as measured. */
        void *rbuf = er_arena_alloc(c->ctx->arena, ER_MEASURE_BYTES, 4096u);
        if (rbuf)
            memset(rbuf, 1, ER_MEASURE_BYTES); /* backed, and not all zero pages */
        s = time_rows(c, &t, 1u, n, 16, rbuf, r);
        if (rbuf && s.read > 0.0)
            r->read_gbs = ER_MEASURE_BYTES / s.read / 1e9;
        if (rbuf)
            er_arena_free(c->ctx->arena, rbuf);
        rows = n;
    }
    if (s.med > 0.0) {
        const double spark = (double)er_reference_weights(); /* one decode step */
        r->decode_tok_s = rows * k / s.med / spark;
        r->decode_min = rows * k / s.max / spark;
        r->decode_max = rows * k / s.min / spark;
    }
    s = time_rows(c, &t, 64u, n_prefill_small, 3, NULL, r);
    rows = n_prefill_small;
    if (s.med > 0.0 && s.med * n_prefill / n_prefill_small <= ER_MEASURE_SLOW_CALL) {
        s = time_rows(c, &t, 64u, n_prefill, 3, NULL, r);
        rows = n_prefill;
    }
    if (s.med > 0.0)
        r->prefill_gflops = 2.0 * 64.0 * rows * (double)k / s.med / 1e9;
    er_cpu_mark_now(&after);
    er_cpu_load load = er_cpu_load_between(&before, &after);
    r->wait_share = load.wait_share;
    r->cpu_per_wall = load.cpu_per_wall;
    r->wait_per_wall = load.wait_per_wall;
    r->run_queue = load.run_queue;
    r->cpus = load.cpus;
out:
    edgert_qtensor_free(&t);
}

