/*
 * tools/peaks_bw.c — the read-bandwidth ceiling (peaks.h): streaming reads
 * over a buffer far larger than the LLC on the peaks' team (peaks_team.h),
 * in several loops, alternated pass by pass; the best median is the
 * ceiling. The CLI is built for the baseline ISA; the AVX-512 loop is
 * compiled per function and chosen at run time from the probe's flags.
 */
#define _GNU_SOURCE
#include "peaks.h"
#include "peaks_team.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "edgert/edgert.h"
#include "measure.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* ---- read bandwidth -------------------------------------------------------------- */

typedef struct {
    const uint8_t *buf;
    size_t bytes;
    int prefetch;
    int wide;
    unsigned streams;    /* > 1: each thread's range read as this many interleaved streams */
    int chunked;         /* the streams PEAK_STREAM_CHUNK bytes at a time (read_chunked) */
    const size_t *calls; /* non-NULL: read in calls of these sizes */
    size_t ncalls;
    size_t calls_read;   /* bytes one pass of calls reads, all threads */
    volatile uint64_t sink[64];
} bw_job;

/* Prefetch (bw_job.prefetch): BW_PF_PAIR a prefetcht1 ~4 KiB and a
 * prefetcht0 ~1 KiB ahead of every line, the pair that served streaming
 * GEMVs best on the Xeon; BW_PF_FAR one prefetcht1 8 KiB ahead, and BW_PF_L1
 * one prefetcht0 6 KiB ahead, what the x86 decode kernels issue (far,
 * far-l1) on AMD, where the pair read 0.7-0.8x a plain stream: without
 * them a kernel could out-read its own ceiling. On an AMD EPYC Zen 5, 2
 * threads, busy host, the L1 read beat the far one in 16 bench runs of 16
 * (by 1-11%) and was the best of the five in 3 (by up to 4%). */
#define PF_FAR 4096
#define PF_NEAR 1024
#define PF_FAR_ONLY 8192
#define PF_L1 6144

/* Reads [p, p + streams * part) as `streams` parts of `part` bytes (a
 * multiple of 256) side by side: 256 bytes of each part in turn. */
static uint64_t read_portable(const uint8_t *p, size_t part, unsigned streams, int prefetch)
{
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t off = 0; off < part; off += 256)
        for (unsigned k = 0; k < streams; k++)
            for (const uint8_t *q = p + k * part + off, *e = q + 256; q < e; q += 64) {
                if (prefetch == BW_PF_PAIR) {
                    __builtin_prefetch(q + PF_FAR, 0, 2);
                    __builtin_prefetch(q + PF_NEAR, 0, 3);
                } else if (prefetch == BW_PF_L1) {
                    __builtin_prefetch(q + PF_L1, 0, 3);
                } else if (prefetch == BW_PF_FAR) {
                    __builtin_prefetch(q + PF_FAR_ONLY, 0, 2);
                }
                const uint64_t *v = (const uint64_t *)q;
                a ^= v[0] ^ v[4];
                b ^= v[1] ^ v[5];
                c ^= v[2] ^ v[6];
                d ^= v[3] ^ v[7];
            }
    return a ^ b ^ c ^ d;
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static uint64_t read_avx512(const uint8_t *p, size_t part,
                                                               unsigned streams, int prefetch)
{
    __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
    for (size_t off = 0; off < part; off += 256)
        for (unsigned k = 0; k < streams; k++) {
            const uint8_t *q = p + k * part + off;
            if (prefetch == BW_PF_PAIR) {
                for (int i = 0; i < 256; i += 64) {
                    _mm_prefetch((const char *)q + PF_FAR + i, _MM_HINT_T1);
                    _mm_prefetch((const char *)q + PF_NEAR + i, _MM_HINT_T0);
                }
            } else if (prefetch == BW_PF_FAR) {
                for (int i = 0; i < 256; i += 64)
                    _mm_prefetch((const char *)q + PF_FAR_ONLY + i, _MM_HINT_T1);
            } else if (prefetch == BW_PF_L1) {
                for (int i = 0; i < 256; i += 64)
                    _mm_prefetch((const char *)q + PF_L1 + i, _MM_HINT_T0);
            }
            a = _mm512_xor_si512(a, _mm512_load_si512(q));
            b = _mm512_xor_si512(b, _mm512_load_si512(q + 64));
            c = _mm512_xor_si512(c, _mm512_load_si512(q + 128));
            d = _mm512_xor_si512(d, _mm512_load_si512(q + 192));
        }
    a = _mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d));
    /* folded with xor: _mm512_reduce_add_epi64 is a signed add, which
     * overflows (UBSan) on arbitrary bytes such as packed weights */
    uint64_t lane[8], v = 0;
    _mm512_storeu_si512((void *)lane, a);
    for (int i = 0; i < 8; i++)
        v ^= lane[i];
    return v;
}
#endif

/* [p, end) cut into `streams` equal parts (whole 256-byte blocks) read side
 * by side, then the rest as one stream; a tail short of 256 bytes is not read.
 * On the AMD EPYC (Zen 5) kind one stream per core left bandwidth unread:
 * the ceiling read 50 GB/s while the decode kernels streamed 63-69 in the
 * same window; 4 or 8 interleaved streams per thread read 1.2-1.4x one
 * stream there (medians of 15 paired rounds; which wins varies). */
static uint64_t read_range(int wide, const uint8_t *p, const uint8_t *end, unsigned streams,
                           int prefetch)
{
    size_t len = (size_t)(end - p) & ~(size_t)255;
    size_t part = streams > 1 ? (len / streams) & ~(size_t)255 : 0;
    if (part == 0) {
        streams = 1;
        part = len;
    }
    const uint8_t *rest = p + streams * part;
    size_t rest_len = len - streams * part;
#if defined(__x86_64__)
    if (wide)
        return read_avx512(p, part, streams, prefetch) ^ read_avx512(rest, rest_len, 1, prefetch);
#endif
    (void)wide;
    return read_portable(p, part, streams, prefetch) ^ read_portable(rest, rest_len, 1, prefetch);
}

static uint64_t bw_read(const bw_job *j, const uint8_t *p, const uint8_t *end)
{
    return read_range(j->wide, p, end, j->streams ? j->streams : 1u, j->prefetch);
}

/* A thread's range read as interleaved streams PEAK_STREAM_CHUNK bytes at a
 * time, each chunk cut into the streams: the streams stay within a few MiB
 * of each other, as a decode kernel's do inside one call. Which spacing
 * reads best depends on the host, so the ceiling times both:
 * - on an AMD EPYC Zen 3 VM, 2 threads, the same streams within chunks of
 *   256 KiB to 64 MiB read 1.1-1.4x those a quarter of a 512 MiB range
 *   apart (medians of 9 alternated passes, busy and quieter windows: 27.7-
 *   29.9 against 25.1 GB/s, 39.3 against 28.3), which read below the reads
 *   cut into the step's calls and below the steps themselves;
 * - on a Zen 5 (docs/evidence-and-selection.md, "What a step can read") streams 128 MiB apart read
 *   84-87 GB/s, streams in the step's call sizes 48-57. */
static uint64_t read_chunked(int wide, const uint8_t *p, const uint8_t *end, unsigned streams,
                           int prefetch)
{
    if (streams <= 1u)
        return read_range(wide, p, end, 1u, prefetch);
    uint64_t s = 0;
    for (; p < end; p += PEAK_STREAM_CHUNK) {
        const uint8_t *e = (size_t)(end - p) > PEAK_STREAM_CHUNK ? p + PEAK_STREAM_CHUNK : end;
        s ^= read_range(wide, p, e, streams, prefetch);
    }
    return s;
}

static int wide_loads(uint64_t cpu_flags)
{
#if defined(__x86_64__)
    return EDGERT_HAS_FLAG(cpu_flags, EDGERT_CPU_AVX512F) != 0;
#else
    (void)cpu_flags;
    return 0;
#endif
}

uint64_t peak_read(const void *p, size_t bytes, unsigned streams, int prefetch,
                   uint64_t cpu_flags)
{
    const uint8_t *b = p;
    return read_range(wide_loads(cpu_flags), b, b + bytes, streams ? streams : 1u, prefetch);
}

uint64_t peak_read_chunked(const void *p, size_t bytes, unsigned streams, int prefetch,
                           uint64_t cpu_flags)
{
    const uint8_t *b = p;
    return read_chunked(wide_loads(cpu_flags), b, b + bytes, streams, prefetch);
}

static void bw_member(team *t, unsigned id)
{
    bw_job *j = t->arg;
    size_t chunk = (j->bytes / t->n) & ~(size_t)4095;
    const uint8_t *p = j->buf + (size_t)id * chunk, *end = p + chunk;
    uint64_t s = 0;
    if (j->calls == NULL && j->chunked) {
        s = read_chunked(j->wide, p, end, j->streams, j->prefetch);
    } else if (j->calls == NULL) {
        s = bw_read(j, p, end);
    } else {
        /* Call i: bytes [off, off + size) of the buffer, size cut to a
         * multiple of 256 per thread; this thread reads its share. */
        size_t off = 0;
        for (size_t i = 0; i < j->ncalls; i++) {
            size_t share = j->calls[i] / t->n & ~(size_t)255, size = share * t->n;
            if (size == 0 || size > j->bytes)
                continue;
            if (off + size > j->bytes)
                off = 0;
            const uint8_t *q = j->buf + off + (size_t)id * share;
            s ^= bw_read(j, q, q + share);
            off += size;
        }
    }
    j->sink[id % 64] = s;
}

/* The reads timed each pass, alternated so drift on a shared machine hits
 * all alike: {streams per thread, prefetch, chunked}; rows K_CALLS + k
 * repeat rows k = K_PLAIN..K_FEW, read in calls. */
enum { K_PLAIN, K_PAIR, K_FAR, K_L1, K_FEW, K_MANY, K_CHUNKED_FEW, K_CHUNKED_MANY, K_CALLS };
static const struct {
    unsigned streams;
    int prefetch, chunked;
} bw_kinds[] = {
    {1, BW_PF_NONE, 0}, {1, BW_PF_PAIR, 0}, {1, BW_PF_FAR, 0}, {1, BW_PF_L1, 0},
    {BW_STREAMS_FEW, BW_PF_NONE, 0}, {BW_STREAMS_MANY, BW_PF_NONE, 0},
    {BW_STREAMS_FEW, BW_PF_NONE, 1}, {BW_STREAMS_MANY, BW_PF_NONE, 1},
    {1, BW_PF_NONE, 0}, {1, BW_PF_PAIR, 0}, {1, BW_PF_FAR, 0}, {1, BW_PF_L1, 0},
    {BW_STREAMS_FEW, BW_PF_NONE, 0},
};
#define BW_KINDS (sizeof bw_kinds / sizeof bw_kinds[0])
_Static_assert(BW_KINDS == K_CALLS + K_FEW + 1, "bw_kinds: K_CALLS rows repeat K_PLAIN..K_FEW");

static void bw_stat(double *v, unsigned passes, double *med, double *lo, double *hi)
{
    *med = measure_median(v, passes); /* sorts: [0] is the min, [passes-1] the max */
    *lo = v[0];
    *hi = v[passes - 1];
}

/* The better median of BW_STREAMS_FEW's passes and BW_STREAMS_MANY's, with
 * its spread; returns its stream count. */
static unsigned bw_better(double *few, double *many, unsigned passes, double *med, double *lo,
                          double *hi)
{
    double f, f_lo, f_hi;
    bw_stat(few, passes, &f, &f_lo, &f_hi);
    bw_stat(many, passes, med, lo, hi);
    if (*med > f)
        return BW_STREAMS_MANY;
    *med = f;
    *lo = f_lo;
    *hi = f_hi;
    return BW_STREAMS_FEW;
}

int peak_bandwidth(unsigned threads, size_t bytes, unsigned passes, uint64_t cpu_flags,
                   const size_t *call_bytes, size_t ncalls, bw_result *out)
{
    memset(out, 0, sizeof *out);
    if (threads == 0 || passes == 0)
        return -1;
    bytes &= ~(size_t)((4096u * threads) - 1);
    /* Huge pages, as the host gives large packed-weight buffers (core/load/host.c):
     * the ceiling is the best read this machine can do. */
    size_t alloc = (bytes + PF_FAR_ONLY + 4096 + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    uint8_t *buf = aligned_alloc(2u << 20, alloc);
#ifdef MADV_HUGEPAGE
    if (buf)
        (void)madvise(buf, alloc, MADV_HUGEPAGE);
#endif
    double *v = calloc((size_t)passes * BW_KINDS, sizeof *v);
    team t;
    int rc = -1;
    if (!buf || !v || team_start(&t, threads) != 0)
        goto out;
    /* Fault every page in before timing, with bytes no two pages share: a
     * host that merges identical pages (KSM) turned constant-filled 256 MiB
     * buffers into cache hits after some seconds on the AMD EPYC machine
     * kind (reads of over 1000 GB/s in a microbench). */
    uint64_t x = 0x9E3779B97F4A7C15u;
    for (size_t i = 0; i + 8 <= alloc; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(buf + i, &x, 8);
    }
    bw_job j = {.buf = buf, .bytes = bytes, .wide = wide_loads(cpu_flags)};
    size_t read = (bytes / threads & ~(size_t)4095) * threads;
    team_run(&t, bw_member, &j); /* warm-up: TLB, frequency */
    size_t calls_read = 0;
    for (size_t i = 0; call_bytes != NULL && i < ncalls; i++) {
        size_t size = (call_bytes[i] / threads & ~(size_t)255) * threads;
        if (size <= bytes)
            calls_read += size;
    }
    for (unsigned i = 0; i < passes; i++)
        for (size_t k = 0; k < BW_KINDS; k++) {
            const int calls = k >= K_CALLS;
            if (calls && calls_read == 0)
                continue;
            j.calls = calls ? call_bytes : NULL;
            j.ncalls = calls ? ncalls : 0;
            j.prefetch = bw_kinds[k].prefetch;
            j.streams = bw_kinds[k].streams;
            j.chunked = bw_kinds[k].chunked;
            double secs = team_run(&t, bw_member, &j);
            v[k * passes + i] = (double)(calls ? calls_read : read) / secs / 1e9;
        }
    team_stop(&t);
    double lo, hi;
    bw_stat(v + K_PLAIN * passes, passes, &out->plain_gbs, &out->plain_min, &out->plain_max);
    bw_stat(v + K_PAIR * passes, passes, &out->prefetch_gbs, &out->prefetch_min,
            &out->prefetch_max);
    bw_stat(v + K_FAR * passes, passes, &out->far_gbs, &out->far_min, &out->far_max);
    bw_stat(v + K_L1 * passes, passes, &out->l1_gbs, &out->l1_min, &out->l1_max);
    out->streams = bw_better(v + K_FEW * passes, v + K_MANY * passes, passes, &out->streams_gbs,
                             &out->streams_min, &out->streams_max);
    out->chunked_streams = bw_better(v + K_CHUNKED_FEW * passes, v + K_CHUNKED_MANY * passes,
                                     passes, &out->chunked_gbs, &out->chunked_min,
                                     &out->chunked_max);
    out->bytes = read;
    out->passes = passes;
    if (calls_read != 0) { /* their spread is not reported */
        bw_stat(v + (K_CALLS + K_PLAIN) * passes, passes, &out->calls_plain_gbs, &lo, &hi);
        bw_stat(v + (K_CALLS + K_PAIR) * passes, passes, &out->calls_prefetch_gbs, &lo, &hi);
        bw_stat(v + (K_CALLS + K_FAR) * passes, passes, &out->calls_far_gbs, &lo, &hi);
        bw_stat(v + (K_CALLS + K_L1) * passes, passes, &out->calls_l1_gbs, &lo, &hi);
        bw_stat(v + (K_CALLS + K_FEW) * passes, passes, &out->calls_streams_gbs, &lo, &hi);
        out->calls = ncalls;
    }
    /* The loop that read best, for a read that must match it: bench's step
     * read, which reads in calls, so judged by the reads in calls. */
    double *cv = calls_read != 0 ? v + K_CALLS * passes : v;
    double best = -1.0;
    for (int k = K_PLAIN; k <= (calls_read != 0 ? K_FEW : K_MANY); k++) {
        double med = measure_median(cv + k * passes, passes);
        if (med > best) {
            best = med;
            out->best_streams = bw_kinds[k].streams;
            out->best_prefetch = bw_kinds[k].prefetch;
        }
    }
    rc = 0;
out:
    free(buf);
    free(v);
    return rc;
}

double bw_ceiling(const bw_result *r)
{
    return fmax(fmax(fmax(r->plain_gbs, r->prefetch_gbs), fmax(r->far_gbs, r->l1_gbs)),
                fmax(r->streams_gbs, r->chunked_gbs));
}

const char *bw_loop_name(const bw_result *r)
{
    if (r->best_streams > 1u)
        return r->best_streams == BW_STREAMS_MANY ? "8 streams" : "4 streams";
    return r->best_prefetch == BW_PF_PAIR  ? "prefetched 4 KiB + 1 KiB ahead"
           : r->best_prefetch == BW_PF_FAR ? "prefetched 8 KiB ahead"
           : r->best_prefetch == BW_PF_L1  ? "prefetched 6 KiB ahead into L1"
                                           : "plain";
}

double bw_calls_ceiling(const bw_result *r)
{
    return fmax(fmax(fmax(r->calls_plain_gbs, r->calls_prefetch_gbs),
                     fmax(r->calls_far_gbs, r->calls_l1_gbs)),
                r->calls_streams_gbs);
}

