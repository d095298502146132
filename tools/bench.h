/*
 * tools/bench.h — `edgert bench`, also used by `edgert calibrate`.
 */
#ifndef EDGERT_TOOLS_BENCH_H
#define EDGERT_TOOLS_BENCH_H

#include "cli.h"
#include "peaks.h"
#include "workload.h"

typedef struct bench_shape {
    double decode_ms;      /* median over steps, all `count` matrices of the shape */
    double decode_gbs;
    double prefill_ms;     /* median, one matrix, M rows (1 for a head) */
    double prefill_gflops;
    size_t packed_bytes;   /* all `count` matrices */
} bench_shape;

/* --versus: the other backend's decode steps, timed in pairs with this
 * run's (bench_decode.c). */
typedef struct bench_versus {
    char backend[64];
    char path[448];
    unsigned pairs;  /* pairs of steps timed */
    unsigned faster; /* pairs in which the other backend's step was the shorter */
    double ms_median, ms_min, ms_max, weight_gbs;
    double fraction_of_bandwidth, fraction_after; /* of this run's two ceilings */
    uint64_t weight_bytes;
    double ratio_median, ratio_min, ratio_max; /* its step time over this one's, per pair */
} bench_versus;

typedef struct bench_result {
    char backend[64];
    char path[448];        /* the instance's describe() */
    unsigned threads;
    bw_result bw;
    double ceiling_gbs;    /* the best of the reads (bw_ceiling) */
    double calls_ceiling_gbs; /* the same, read in calls of the step's GEMM sizes */
    peak_result peaks;
    int have_decode, have_prefill;
    int decode_calls;      /* 1: timed as edgert_gemm calls (--calls), 0: as edgert_step */
    unsigned steps;        /* timed decode steps */
    double step_ms_median, step_ms_min, step_ms_max;
    double tokens_per_s, weight_gbs, fraction_of_bandwidth;
    double fraction_of_calls_ceiling;
    /* The window: the ceiling measured again right after the decode steps,
     * the fraction against it, and whether the two ceilings differ by more
     * than BENCH_UNSTABLE (then the run is flagged, not a claim). */
    double ceiling_after_gbs, fraction_after;
    int window_unstable;
    /* The step's own packed bytes read with no arithmetic, through the same
     * pool, call by call (decode_step_read): GB/s (median [min..max] over
     * as many steps as the decode), decode's fraction of it; NaN when the
     * backend keeps its packed bytes private. */
    double step_read_gbs, step_read_min, step_read_max, fraction_of_step_read;
    /* --paired-read: after each timed step, one step read (the loop above)
     * of the same bytes, timed: decode's fraction of the read right after
     * it, per step (median [min..max] over paired_steps), and the median
     * over the third of the steps whose read was fastest, with those reads'
     * GB/s: a window one step long, where the ceilings around the run span
     * seconds. paired_steps 0: not asked, or the packed bytes are private. */
    unsigned paired_steps;
    double paired_median, paired_min, paired_max;
    double paired_fast_fraction, paired_fast_read_min, paired_fast_read_max;
    /* The kernel's own rate (decode_in_cache): the step's GEMMs, in its
     * order, each that still fits half the last-level cache (at most
     * BENCH_IN_CACHE_BYTES) with those before it, as one step over and over,
     * so they come from the cache: GB/s of their bytes (median [min..max]),
     * how many GEMMs, bytes and which shapes, and decode's fraction of it.
     * NaN / 0 when not measured (why says why; "" for calibrate's runs). */
    double in_cache_gbs, in_cache_min, in_cache_max, fraction_of_in_cache;
    size_t in_cache_calls;
    uint64_t in_cache_bytes;
    char in_cache_shapes[160]; /* the shapes taken, in the step's order */
    char in_cache_why[96];     /* why not measured, when in_cache_gbs is NaN */
    uint64_t weight_bytes, expected_weight_bytes;
    unsigned m;
    double prefill_tokens_per_s, prefill_gflops, fraction_of_compute_peak;
    int compute_family;    /* PEAK_* the kernel relies on, -1 unknown */
    /* That family's peak measured before and after the prefill (peaks
     * holds the higher of the two, family by family: a peak is a limit, and
     * a neighbour on a shared core lowers it, never raises it); unstable
     * when they differ by more than BENCH_UNSTABLE. */
    double peak_before, peak_after;
    int prefill_unstable;
    double pack_seconds, generate_seconds, peak_rss_mb, settled_rss_mb, baseline_rss_mb,
        pack_transient_mb;
    bench_shape shapes[WL_MAX_SHAPES];
    int have_versus;
    bench_versus vs;
} bench_result;

/** The PEAK_* family a kernel's prefill relies on: the first instruction
 * mnemonic its description `path` names (case ignored; the tile
 * instructions first, and within a "prefill:" part first) whose peak this
 * CPU has, else the best family for its activation bits. */
int bench_compute_family(const char *path, int activation_bits, const peak_result *p);

/** Ceilings before and after the decode further apart than this (the larger
 *  over the smaller, minus 1) flag the run as unstable. */
#define BENCH_UNSTABLE 0.15

/** The in-cache rate's bytes at most: half the last-level cache CPU 0 sees,
 *  never more than this, so that a neighbour sharing that cache leaves the
 *  bytes in it (the Zen 3 and Zen 5 kinds here: 32 MiB per CCX, shared by
 *  the host's other guests). */
#define BENCH_IN_CACHE_BYTES ((size_t)8 << 20)

/** --versus: pairs of decode steps when --repeat does not say. */
#define BENCH_VERSUS_PAIRS 16u

/** Print a result: one JSON object on stdout, or the text report
 *  (bench_output.c). */
void bench_print_json(const bench_result *r, const workload *w, const cli *c);
void bench_print_text(const bench_result *r, const workload *w, const cli *c);

/** bench_backend's flags: BENCH_STEPS_ONLY times the decode steps without
 *  measuring the read ceiling around them (ceiling_gbs stays 0, the
 *  fractions NaN): `edgert calibrate` stores tokens/s only, and the two 1 GiB
 *  ceilings cost more than a small workload's steps (most of a quick
 *  calibrate under ASan or qemu). */
#define BENCH_STEPS_ONLY 1u

/** Run the bench for one backend on an open handle; with --versus, `vw`
 *  is its workload (--versus-weights: the same shapes), NULL: w. */
edgert_status bench_backend(edgert_ctx *ctx, const cli *c, const workload *w,
                            const workload *vw, const char *backend, unsigned flags,
                            bench_result *r, char *err, size_t err_len);

#endif
