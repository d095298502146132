/*
 * tools/peaks.h — the physical limits a kernel is judged against, measured
 * in the same run on the same threads: memory read bandwidth (decode) and
 * the peak of each compute instruction family this CPU has (prefill).
 */
#ifndef EDGERT_TOOLS_PEAKS_H
#define EDGERT_TOOLS_PEAKS_H

#include <stddef.h>
#include <stdint.h>

typedef struct bw_result {
    double plain_gbs, prefetch_gbs;          /* medians over passes */
    double plain_min, plain_max, prefetch_min, prefetch_max;
    size_t bytes;                            /* buffer size */
    unsigned passes;
    /* The plain and prefetched reads cut into calls of the sizes given (0
     * when none; the streams, far and L1 reads in calls are below):
     * each thread reads its share of one call, then jumps to the next. */
    double calls_plain_gbs, calls_prefetch_gbs; /* medians over passes */
    size_t calls;                               /* calls per pass */
    /* Each thread's range read as `streams` parts side by side (plain
     * loads): the better of BW_STREAMS_FEW and BW_STREAMS_MANY; in calls
     * with BW_STREAMS_FEW. prefetch_* above are BW_PF_PAIR's. */
    unsigned streams;
    double streams_gbs, streams_min, streams_max, calls_streams_gbs;
    /* One stream with one prefetcht1 8 KiB ahead per line (BW_PF_FAR). */
    double far_gbs, far_min, far_max, calls_far_gbs;
    /* The kind with the best median: streams (1 or more) and prefetch. */
    unsigned best_streams;
    int best_prefetch;
    /* One stream with one prefetcht0 6 KiB ahead per line (BW_PF_L1). */
    double l1_gbs, l1_min, l1_max, calls_l1_gbs;
    /* Each thread's range read as `chunked_streams` streams side by side,
     * PEAK_STREAM_CHUNK bytes at a time (peak_read_chunked): the better of
     * BW_STREAMS_FEW and BW_STREAMS_MANY. */
    unsigned chunked_streams;
    double chunked_gbs, chunked_min, chunked_max;
} bw_result;

#define BW_PF_NONE 0
#define BW_PF_PAIR 1 /* prefetcht1 4 KiB and prefetcht0 1 KiB ahead */
#define BW_PF_FAR 2  /* prefetcht1 8 KiB ahead */
#define BW_PF_L1 3   /* prefetcht0 6 KiB ahead */

#define BW_STREAMS_FEW 4u
#define BW_STREAMS_MANY 8u

/** The best of a run's reads: the ceiling decode is judged against. */
double bw_ceiling(const bw_result *r);
/** The best of its reads cut into calls (0 without calls). */
double bw_calls_ceiling(const bw_result *r);
/** The loop best_streams and best_prefetch name, in words ("plain", "4
 *  streams", "prefetched 8 KiB ahead", ...). */
const char *bw_loop_name(const bw_result *r);

/** Streaming-read bandwidth over `bytes` (far larger than the LLC) on
 *  `threads` threads: a plain read, three with software prefetch ahead of
 *  the loads (BW_PF_PAIR, BW_PF_FAR, BW_PF_L1), and each thread's range as
 *  interleaved streams (the best of 4 and 8), apart across the range and
 *  within chunks (peak_read_chunked). `cpu_flags`
 *  picks the widest loads the CPU has. With
 *  `call_bytes` (ncalls > 0) also the same reads in back-to-back calls of
 *  those sizes, one after the other through the buffer (wrapping): the
 *  streaming limit for work cut into calls the way a decode step is. 0 or -1. */
int peak_bandwidth(unsigned threads, size_t bytes, unsigned passes, uint64_t cpu_flags,
                   const size_t *call_bytes, size_t ncalls, bw_result *out);

/** Read bytes [p, p + bytes) once with one of the ceiling's loops (the
 *  widest this CPU's flags allow): `streams` parts side by side, `prefetch`
 *  a BW_PF_ value (bw_result.best_* name the best). Whole 256-byte blocks only:
 *  the tail of `bytes` past a multiple of 256 is not read. `p` must be
 *  64-byte aligned. Returns a value that depends on every byte read (keep it
 *  alive so the loads stay). */
uint64_t peak_read(const void *p, size_t bytes, unsigned streams, int prefetch,
                   uint64_t cpu_flags);

/** As peak_read, but with `streams` > 1 [p, p + bytes) goes
 *  PEAK_STREAM_CHUNK bytes at a time, each chunk cut into the streams: the
 *  ceiling's chunked reads (see peaks_bw.c for why it has both). */
#define PEAK_STREAM_CHUNK ((size_t)4 << 20)
uint64_t peak_read_chunked(const void *p, size_t bytes, unsigned streams, int prefetch,
                           uint64_t cpu_flags);

enum {
    PEAK_FP32_FMA = 0, /* GFLOP/s: AVX-512 / AVX2+FMA / NEON fused multiply-add */
    PEAK_BF16_DOT,     /* GFLOP/s: vdpbf16ps */
    PEAK_INT8_VNNI,    /* GOP/s:   vpdpbusd */
    PEAK_AMX_INT8,     /* GOP/s:   tdpbusd */
    PEAK_AMX_BF16,     /* GFLOP/s: tdpbf16ps */
    PEAK_INT16_VNNI,   /* GOP/s:   vpdpwssd (int16 pairs) */
    PEAK_INT16_MADD,   /* GOP/s:   vpmaddwd + vpaddd (int16 pairs without VNNI) */
    PEAK_COUNT
};
typedef struct peak_result {
    double value[PEAK_COUNT]; /* NaN when the CPU lacks the family */
    const char *isa[PEAK_COUNT];
} peak_result;

extern const char *const peak_names[PEAK_COUNT];

/** Tight register loops on `threads` threads for every family the CPU has. */
void peak_compute(unsigned threads, uint64_t cpu_flags, peak_result *out);

#endif
