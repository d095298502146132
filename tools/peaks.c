/*
 * tools/peaks.c — see peaks.h.
 *
 * The CLI is built for the baseline ISA; wider code here is compiled per
 * function with target attributes and chosen at run time from the probe's
 * flags, like the plugins (never -march=native).
 *
 * Why the peaks run on their own threads (the `team` below), not on the
 * handle's pool like everything else in tools/: each thread here gets one
 * fixed, equal share, and all start together behind a barrier. The pool
 * (edgert_parallel_for) cannot express that — it may hand two shares to one
 * thread — so moving onto it means cutting the work into many chunks timed
 * as one call, the way a decode GEMM runs. That was built and measured
 * against this team in one process, alternating the two, on the 2-core VM
 * this was written on (1 GiB, spark-1.7b's 113 call sizes, 44 pairs; the
 * compute loops 16 pairs): the pool's read ceiling came out higher in 37 of
 * 44 pairs (median +2.1% plain, +2.4% prefetched: it rebalances a thread
 * that falls behind, where a fixed split waits for it), its call-sized read
 * lower in 28 to 32 of 44 (median -1.6% / -2.0%), and every compute peak
 * higher in 13 to 15 of 16 (+0.3% to +0.6%). A different measurement, beyond
 * the noise of pairs, and a moved ceiling would shift every
 * fraction_of_bandwidth already recorded; so the team stays, for both.
 */
#define _GNU_SOURCE
#include "peaks.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "edgert/edgert.h"
#include "measure.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

const char *const peak_names[PEAK_COUNT] = {"fp32_fma_gflops", "bf16_dot_gflops",
                                            "int8_vnni_gops",  "amx_int8_gops",
                                            "amx_bf16_gflops", "int16_vnni_gops"};

/* ---- a tiny fork/join over pthreads: equal shares started together (see the top) */

typedef struct team team;
typedef void (*team_fn)(team *t, unsigned id);
struct team {
    unsigned n; /* members, the caller included */
    pthread_mutex_t gate; /* held while the team forms: members wait for the barriers */
    pthread_barrier_t start, stop;
    team_fn fn;
    void *arg;
    int quit;
    pthread_t *th;
};

typedef struct {
    team *t;
    unsigned id;
} member;

static void *member_main(void *p)
{
    member *m = p;
    team *t = m->t;
    pthread_mutex_lock(&t->gate); /* until team_start knows how many started */
    int quit = t->quit;
    pthread_mutex_unlock(&t->gate);
    while (!quit) {
        pthread_barrier_wait(&t->start);
        if (t->quit)
            break;
        t->fn(t, m->id);
        pthread_barrier_wait(&t->stop);
    }
    free(m);
    return NULL;
}

/* Start up to n - 1 members. The barriers are sized to the members that did
 * start (a failed pthread_create or malloc leaves a smaller team, never one
 * waiting for a thread that does not exist); the members wait at the gate
 * until they are. 0, or -1 with nothing left running. */
static int team_start(team *t, unsigned n)
{
    memset(t, 0, sizeof *t);
    t->th = calloc(n, sizeof *t->th);
    if (!t->th || pthread_mutex_init(&t->gate, NULL) != 0) {
        free(t->th);
        return -1;
    }
    pthread_mutex_lock(&t->gate);
    unsigned started = 1;
    for (unsigned i = 1; i < n; i++) {
        member *m = malloc(sizeof *m);
        if (!m)
            break;
        m->t = t;
        m->id = started;
        if (pthread_create(&t->th[started], NULL, member_main, m) != 0) {
            free(m);
            break;
        }
        started++;
    }
    t->n = started;
    int bad = pthread_barrier_init(&t->start, NULL, started) != 0;
    if (!bad && pthread_barrier_init(&t->stop, NULL, started) != 0) {
        pthread_barrier_destroy(&t->start);
        bad = 1;
    }
    t->quit = bad;
    pthread_mutex_unlock(&t->gate);
    if (!bad)
        return 0;
    for (unsigned i = 1; i < started; i++)
        pthread_join(t->th[i], NULL);
    pthread_mutex_destroy(&t->gate);
    free(t->th);
    return -1;
}

/* Run fn on every member (the caller is member 0); returns the wall time. */
static double team_run(team *t, team_fn fn, void *arg)
{
    t->fn = fn;
    t->arg = arg;
    pthread_barrier_wait(&t->start);
    double t0 = measure_now_s();
    fn(t, 0);
    pthread_barrier_wait(&t->stop);
    return measure_now_s() - t0;
}

static void team_stop(team *t)
{
    t->quit = 1;
    pthread_barrier_wait(&t->start);
    for (unsigned i = 1; i < t->n; i++)
        pthread_join(t->th[i], NULL);
    pthread_barrier_destroy(&t->start);
    pthread_barrier_destroy(&t->stop);
    pthread_mutex_destroy(&t->gate);
    free(t->th);
}

/* ---- read bandwidth -------------------------------------------------------------- */

typedef struct {
    const uint8_t *buf;
    size_t bytes;
    int prefetch;
    int wide;
    unsigned streams;    /* > 1: each thread's range read as this many interleaved streams */
    const size_t *calls; /* non-NULL: read in calls of these sizes */
    size_t ncalls;
    size_t calls_read;   /* bytes one pass of calls reads, all threads */
    volatile uint64_t sink[64];
} bw_job;

/* Prefetch distances: prefetcht1 ~4 KiB and prefetcht0 ~1 KiB ahead, the
 * pair that served streaming GEMVs best on this machine kind. */
#define PF_FAR 4096
#define PF_NEAR 1024

/* Reads [p, p + streams * part) as `streams` parts of `part` bytes (a
 * multiple of 256) side by side: 256 bytes of each part in turn. */
static uint64_t read_portable(const uint8_t *p, size_t part, unsigned streams, int prefetch)
{
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t off = 0; off < part; off += 256)
        for (unsigned k = 0; k < streams; k++)
            for (const uint8_t *q = p + k * part + off, *e = q + 256; q < e; q += 64) {
                if (prefetch) {
                    __builtin_prefetch(q + PF_FAR, 0, 2);
                    __builtin_prefetch(q + PF_NEAR, 0, 3);
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
            if (prefetch) {
                for (int i = 0; i < 256; i += 64) {
                    _mm_prefetch((const char *)q + PF_FAR + i, _MM_HINT_T1);
                    _mm_prefetch((const char *)q + PF_NEAR + i, _MM_HINT_T0);
                }
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
 * by side, then the rest as one stream; a tail past 256 bytes is not read.
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

uint64_t peak_read(const void *p, size_t bytes, unsigned streams, uint64_t cpu_flags)
{
    const uint8_t *b = p;
#if defined(__x86_64__)
    int wide = EDGERT_HAS_FLAG(cpu_flags, EDGERT_CPU_AVX512F) != 0;
#else
    int wide = 0;
    (void)cpu_flags;
#endif
    /* one stream: the prefetched loop; more: plain loads, as measured */
    return read_range(wide, b, b + bytes, streams ? streams : 1u, streams <= 1u);
}

static void bw_member(team *t, unsigned id)
{
    bw_job *j = t->arg;
    size_t chunk = (j->bytes / t->n) & ~(size_t)4095;
    const uint8_t *p = j->buf + (size_t)id * chunk, *end = p + chunk;
    uint64_t s = 0;
    if (j->calls == NULL) {
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
 * all alike: {streams per thread, prefetch, in calls}. */
static const struct { unsigned streams; int prefetch, calls; } bw_kinds[] = {
    {1, 0, 0}, {1, 1, 0}, {BW_STREAMS_FEW, 0, 0}, {BW_STREAMS_MANY, 0, 0},
    {1, 0, 1}, {1, 1, 1}, {BW_STREAMS_FEW, 0, 1},
};
#define BW_KINDS (sizeof bw_kinds / sizeof bw_kinds[0])

static void bw_stat(double *v, unsigned passes, double *med, double *lo, double *hi)
{
    *med = measure_median(v, passes); /* sorts: [0] is the min, [passes-1] the max */
    *lo = v[0];
    *hi = v[passes - 1];
}

int peak_bandwidth(unsigned threads, size_t bytes, unsigned passes, uint64_t cpu_flags,
                   const size_t *call_bytes, size_t ncalls, bw_result *out)
{
    memset(out, 0, sizeof *out);
    if (threads == 0 || passes == 0)
        return -1;
    bytes &= ~(size_t)((4096u * threads) - 1);
    /* Huge pages, as the host gives large packed-weight buffers (core/loader.c):
     * the ceiling is the best read this machine can do. */
    size_t alloc = (bytes + PF_FAR + 4096 + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
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
    memset(buf, 1, alloc); /* fault every page in before timing */
    bw_job j = {.buf = buf, .bytes = bytes};
#if defined(__x86_64__)
    j.wide = EDGERT_HAS_FLAG(cpu_flags, EDGERT_CPU_AVX512F) != 0;
#else
    (void)cpu_flags;
#endif
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
            if (bw_kinds[k].calls && calls_read == 0)
                continue;
            j.calls = bw_kinds[k].calls ? call_bytes : NULL;
            j.ncalls = bw_kinds[k].calls ? ncalls : 0;
            j.prefetch = bw_kinds[k].prefetch;
            j.streams = bw_kinds[k].streams;
            size_t n = bw_kinds[k].calls ? calls_read : read;
            v[k * passes + i] = (double)n / team_run(&t, bw_member, &j) / 1e9;
        }
    team_stop(&t);
    bw_stat(v, passes, &out->plain_gbs, &out->plain_min, &out->plain_max);
    bw_stat(v + passes, passes, &out->prefetch_gbs, &out->prefetch_min, &out->prefetch_max);
    double few, few_lo, few_hi, many, many_lo, many_hi;
    bw_stat(v + 2 * passes, passes, &few, &few_lo, &few_hi);
    bw_stat(v + 3 * passes, passes, &many, &many_lo, &many_hi);
    int use_many = many > few;
    out->streams = use_many ? BW_STREAMS_MANY : BW_STREAMS_FEW;
    out->streams_gbs = use_many ? many : few;
    out->streams_min = use_many ? many_lo : few_lo;
    out->streams_max = use_many ? many_hi : few_hi;
    out->bytes = read;
    out->passes = passes;
    if (calls_read != 0) {
        double lo, hi; /* not reported for calls */
        bw_stat(v + 4 * passes, passes, &out->calls_plain_gbs, &lo, &hi);
        bw_stat(v + 5 * passes, passes, &out->calls_prefetch_gbs, &lo, &hi);
        bw_stat(v + 6 * passes, passes, &out->calls_streams_gbs, &lo, &hi);
        out->calls = ncalls;
    }
    rc = 0;
out:
    free(buf);
    free(v);
    return rc;
}

double bw_ceiling(const bw_result *r)
{
    return fmax(fmax(r->plain_gbs, r->prefetch_gbs), r->streams_gbs);
}

double bw_calls_ceiling(const bw_result *r)
{
    return fmax(fmax(r->calls_plain_gbs, r->calls_prefetch_gbs), r->calls_streams_gbs);
}

/* ---- compute peaks ----------------------------------------------------------------- */

/* Each loop keeps 12 independent accumulators (enough to cover the latency
 * of every family here on current cores) and returns operations executed. */
#define ITERS 2000000u

typedef struct {
    int family;
    double ops[256];
} cp_job;

static double fma_portable(void)
{
    /* distinct starting values: sixteen equal chains would be computed once */
    float acc[16], x = 1.0000001f, y = 0.9999999f;
    for (int k = 0; k < 16; k++)
        acc[k] = (float)k;
    for (unsigned i = 0; i < ITERS / 8; i++)
        for (int k = 0; k < 16; k++)
            acc[k] = acc[k] * x + y;
    float sum = 0;
    for (int k = 0; k < 16; k++)
        sum += acc[k];
    volatile float sink = sum;
    (void)sink;
    return 2.0 * 16.0 * (ITERS / 8);
}

#if defined(__x86_64__) || defined(__aarch64__)
/* Twelve accumulators of type T, accumulator k starting at INIT(k): distinct
 * starting values, so that no two chains are ever the same computation. */
#define ACC12(T, INIT) T a0 = INIT(0), a1 = INIT(1), a2 = INIT(2), a3 = INIT(3), a4 = INIT(4), \
    a5 = INIT(5), a6 = INIT(6), a7 = INIT(7), a8 = INIT(8), a9 = INIT(9), a10 = INIT(10),    \
    a11 = INIT(11)
#define STEP12(OP) a0 = OP(a0); a1 = OP(a1); a2 = OP(a2); a3 = OP(a3); a4 = OP(a4); \
    a5 = OP(a5); a6 = OP(a6); a7 = OP(a7); a8 = OP(a8); a9 = OP(a9); a10 = OP(a10); a11 = OP(a11)
#define SUM12(ADD) ADD(ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7))), \
    ADD(ADD(a8, a9), ADD(a10, a11)))
/* ITERS steps of the 12 accumulators. The empty asm (C: "+v", "+x" or "+w",
 * the register class) takes every accumulator in and out each step, so the
 * compiler can neither shorten nor merge the chains. All twelve must be in
 * it, and they start apart (ACC12): with four there (as before), the other
 * eight started equal and took the same pure operation each step, so GCC 12
 * computed them once, and each loop ran 5 dot products while counting 12.
 * Every compute peak read high (1.04x for vpdpbusd to 2.1x for vdpbf16ps on
 * a Xeon; objdump of the loops: 5 vfmadd/vdpbf16ps/vpdpbusd/vpdpwssd per
 * iteration, now 12), and every prefill's fraction of its peak that much
 * low. */
#define RUN12(OP, C)                                                              \
    for (unsigned i = 0; i < ITERS; i++) {                                        \
        STEP12(OP);                                                               \
        __asm__ volatile("" : C(a0), C(a1), C(a2), C(a3), C(a4), C(a5), C(a6),    \
                              C(a7), C(a8), C(a9), C(a10), C(a11));               \
    }
#endif

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static double fma_avx512(void)
{
    __m512 x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.9999999f);
#define I(k) _mm512_set1_ps((float)(k))
    ACC12(__m512, I);
#undef I
#define F(a) _mm512_fmadd_ps(a, x, y)
    RUN12(F, "+v");
#undef F
    __m512 s = SUM12(_mm512_add_ps);
    volatile float sink = _mm512_reduce_add_ps(s);
    (void)sink;
    return 12.0 * 16.0 * 2.0 * ITERS;
}

__attribute__((target("avx2,fma"))) static double fma_avx2(void)
{
    __m256 x = _mm256_set1_ps(1.0000001f), y = _mm256_set1_ps(0.9999999f);
#define I(k) _mm256_set1_ps((float)(k))
    ACC12(__m256, I);
#undef I
#define F(a) _mm256_fmadd_ps(a, x, y)
    RUN12(F, "+x");
#undef F
    __m256 s = SUM12(_mm256_add_ps);
    float v[8];
    _mm256_storeu_ps(v, s);
    volatile float sink = v[0];
    (void)sink;
    return 12.0 * 8.0 * 2.0 * ITERS;
}

__attribute__((target("avx512f,avx512bf16"))) static double bf16_avx512(void)
{
    __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3f80);
#define I(k) _mm512_set1_ps((float)(k))
    ACC12(__m512, I);
#undef I
#define F(a) _mm512_dpbf16_ps(a, x, y)
    RUN12(F, "+v");
#undef F
    __m512 s = SUM12(_mm512_add_ps);
    volatile float sink = _mm512_reduce_add_ps(s);
    (void)sink;
    return 12.0 * 16.0 * 2.0 * 2.0 * ITERS; /* 16 lanes × 2 pairs × (mul + add) */
}

__attribute__((target("avx512f,avx512vnni"))) static double vnni_avx512(void)
{
    /* y = 0: integer dot products take the same time whatever the data, and
     * the accumulators must not overflow (the reduction below is in C). */
    __m512i x = _mm512_set1_epi8(3), y = _mm512_setzero_si512();
#define I(k) _mm512_set1_epi32(k)
    ACC12(__m512i, I);
#undef I
#define F(a) _mm512_dpbusd_epi32(a, x, y)
    RUN12(F, "+v");
#undef F
    __m512i s = SUM12(_mm512_add_epi32);
    volatile int sink = _mm512_reduce_add_epi32(s);
    (void)sink;
    return 12.0 * 16.0 * 4.0 * 2.0 * ITERS; /* 16 lanes × 4 bytes × (mul + add) */
}

__attribute__((target("avx512f,avx512vnni"))) static double vnni16_avx512(void)
{
    __m512i x = _mm512_set1_epi16(3), y = _mm512_setzero_si512(); /* see vnni_avx512 */
#define I(k) _mm512_set1_epi32(k)
    ACC12(__m512i, I);
#undef I
#define F(a) _mm512_dpwssd_epi32(a, x, y)
    RUN12(F, "+v");
#undef F
    __m512i s = SUM12(_mm512_add_epi32);
    volatile int sink = _mm512_reduce_add_epi32(s);
    (void)sink;
    return 12.0 * 16.0 * 2.0 * 2.0 * ITERS; /* 16 lanes × 2 int16 pairs × (mul + add) */
}

/* AMX: tile configuration with palette 1, tiles 0..3 accumulators (16 rows x
 * 64 bytes), 4..5 sources. The configuration must be written through memory
 * that the compiler cannot drop before ldtilecfg (GCC 12 dropped such stores
 * in llama.cpp's AMX path): it is volatile here, and a compiler barrier
 * separates the stores from the load. Not executed on CPUs without AMX;
 * untested on the machine this was written on (no AMX there). */
struct amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((aligned(64)));

__attribute__((target("amx-tile,amx-int8,amx-bf16"))) static double amx_loop(int bf16)
{
    static const uint8_t zero64[16 * 64] __attribute__((aligned(64))) = {0};
    volatile struct amx_cfg cfg;
    memset((void *)&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 6; i++) {
        cfg.colsb[i] = 64;
        cfg.rows[i] = 16;
    }
    __asm__ volatile("" ::: "memory");
    _tile_loadconfig((const void *)&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, zero64, 64);
    _tile_loadd(5, zero64, 64);
    const unsigned n = ITERS / 16;
    if (bf16) {
        for (unsigned i = 0; i < n; i++) {
            _tile_dpbf16ps(0, 4, 5);
            _tile_dpbf16ps(1, 4, 5);
            _tile_dpbf16ps(2, 4, 5);
            _tile_dpbf16ps(3, 4, 5);
        }
    } else {
        for (unsigned i = 0; i < n; i++) {
            _tile_dpbusd(0, 4, 5);
            _tile_dpbusd(1, 4, 5);
            _tile_dpbusd(2, 4, 5);
            _tile_dpbusd(3, 4, 5);
        }
    }
    _tile_release();
    /* per instruction: 16 x 16 outputs x (64 int8 | 32 bf16 pairs... ) */
    double per = bf16 ? 16.0 * 16.0 * 32.0 * 2.0 : 16.0 * 16.0 * 64.0 * 2.0;
    return per * 4.0 * n;
}
#endif

#if defined(__x86_64__)
/* Linux keeps AMX tile data off for each process until it asks
 * (core/probe_cpu.c), and the first tile instruction without it dies with
 * SIGILL. The probe only says the permission is grantable; the AMX backends
 * ask in their own init. bench may run with none of them loaded (--manifests
 * naming other backends only), so it asks here before its tile loops: held
 * already or granted now, or the AMX peaks stay unmeasured. Asking is for
 * good, which is fine for the bench process that is about to run tiles. */
static int amx_tiles_granted(void)
{
    const unsigned long long tiledata = 1ull << 18; /* XFEATURE_XTILEDATA */
    unsigned long long perm = 0;
    if (syscall(SYS_arch_prctl, 0x1022 /* ARCH_GET_XCOMP_PERM */, &perm) == 0 &&
        (perm & tiledata) != 0)
        return 1;
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18) == 0;
}
#endif

#if defined(__aarch64__)
static double fma_neon(void)
{
    float32x4_t x = vdupq_n_f32(1.0000001f), y = vdupq_n_f32(0.9999999f);
#define I(k) vdupq_n_f32((float)(k))
    ACC12(float32x4_t, I);
#undef I
#define F(a) vfmaq_f32(y, a, x)
    RUN12(F, "+w");
#undef F
    float32x4_t s = SUM12(vaddq_f32);
    volatile float sink = vgetq_lane_f32(s, 0);
    (void)sink;
    return 12.0 * 4.0 * 2.0 * ITERS;
}
#endif

static void cp_member(team *t, unsigned id)
{
    cp_job *j = t->arg;
    double ops = 0;
    switch (j->family) {
#if defined(__x86_64__)
    case PEAK_FP32_FMA + 100: ops = fma_avx512(); break;
    case PEAK_FP32_FMA + 200: ops = fma_avx2(); break;
    case PEAK_BF16_DOT: ops = bf16_avx512(); break;
    case PEAK_INT8_VNNI: ops = vnni_avx512(); break;
    case PEAK_INT16_VNNI: ops = vnni16_avx512(); break;
    case PEAK_AMX_INT8: ops = amx_loop(0); break;
    case PEAK_AMX_BF16: ops = amx_loop(1); break;
#endif
#if defined(__aarch64__)
    case PEAK_FP32_FMA + 300: ops = fma_neon(); break;
#endif
    default: ops = fma_portable(); break;
    }
    j->ops[id % 256] = ops;
}

static double run_family(team *t, int family)
{
    cp_job j = {.family = family};
    double best = 0;
    for (int rep = 0; rep < 3; rep++) { /* best of 3: peaks are limits, not typical values */
        double s = team_run(t, cp_member, &j), ops = 0;
        for (unsigned i = 0; i < t->n; i++)
            ops += j.ops[i];
        if (ops / s > best)
            best = ops / s;
    }
    return best / 1e9;
}

void peak_compute(unsigned threads, uint64_t f, peak_result *out)
{
    for (int i = 0; i < PEAK_COUNT; i++) {
        out->value[i] = NAN;
        out->isa[i] = NULL;
    }
    team t;
    if (team_start(&t, threads ? threads : 1) != 0)
        return;
#if defined(__x86_64__)
    if (EDGERT_HAS_FLAG(f, EDGERT_CPU_AVX512F)) {
        out->value[PEAK_FP32_FMA] = run_family(&t, PEAK_FP32_FMA + 100);
        out->isa[PEAK_FP32_FMA] = "avx512f vfmadd";
    } else if (EDGERT_HAS_FLAG(f, EDGERT_CPU_AVX2) && EDGERT_HAS_FLAG(f, EDGERT_CPU_FMA)) {
        out->value[PEAK_FP32_FMA] = run_family(&t, PEAK_FP32_FMA + 200);
        out->isa[PEAK_FP32_FMA] = "avx2 vfmadd";
    }
    if (EDGERT_HAS_FLAG(f, EDGERT_CPU_AVX512_BF16)) {
        out->value[PEAK_BF16_DOT] = run_family(&t, PEAK_BF16_DOT);
        out->isa[PEAK_BF16_DOT] = "avx512_bf16 vdpbf16ps";
    }
    if (EDGERT_HAS_FLAG(f, EDGERT_CPU_AVX512_VNNI)) {
        out->value[PEAK_INT8_VNNI] = run_family(&t, PEAK_INT8_VNNI);
        out->isa[PEAK_INT8_VNNI] = "avx512_vnni vpdpbusd";
        out->value[PEAK_INT16_VNNI] = run_family(&t, PEAK_INT16_VNNI);
        out->isa[PEAK_INT16_VNNI] = "avx512_vnni vpdpwssd";
    }
    if (EDGERT_HAS_FLAG(f, EDGERT_CPU_AMX_TILE) && !amx_tiles_granted())
        f &= ~((1ull << EDGERT_CPU_AMX_INT8) | (1ull << EDGERT_CPU_AMX_BF16));
    if (EDGERT_HAS_FLAG(f, EDGERT_CPU_AMX_TILE) && EDGERT_HAS_FLAG(f, EDGERT_CPU_AMX_INT8)) {
        out->value[PEAK_AMX_INT8] = run_family(&t, PEAK_AMX_INT8);
        out->isa[PEAK_AMX_INT8] = "amx tdpbusd";
    }
    if (EDGERT_HAS_FLAG(f, EDGERT_CPU_AMX_TILE) && EDGERT_HAS_FLAG(f, EDGERT_CPU_AMX_BF16)) {
        out->value[PEAK_AMX_BF16] = run_family(&t, PEAK_AMX_BF16);
        out->isa[PEAK_AMX_BF16] = "amx tdpbf16ps";
    }
#elif defined(__aarch64__)
    (void)f;
    out->value[PEAK_FP32_FMA] = run_family(&t, PEAK_FP32_FMA + 300);
    out->isa[PEAK_FP32_FMA] = "neon fmla";
#endif
    if (isnan(out->value[PEAK_FP32_FMA])) {
        out->value[PEAK_FP32_FMA] = run_family(&t, -1);
        out->isa[PEAK_FP32_FMA] = "portable C";
    }
    team_stop(&t);
}
