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
#include "peaks_team.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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
                                            "amx_bf16_gflops", "int16_vnni_gops",
                                            "int16_madd_gops"};

/* ---- a tiny fork/join over pthreads: equal shares started together (see the top) */

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
int team_start(team *t, unsigned n)
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
double team_run(team *t, team_fn fn, void *arg)
{
    t->fn = fn;
    t->arg = arg;
    pthread_barrier_wait(&t->start);
    double t0 = measure_now_s();
    fn(t, 0);
    pthread_barrier_wait(&t->stop);
    return measure_now_s() - t0;
}

void team_stop(team *t)
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

/* The same two dot products on ymm with AVX-VNNI (VEX; CPUs with AVX-VNNI but
 * no AVX512_VNNI, e.g. Intel 12th-14th gen): what the avx2-w4a16 example's
 * avxvnni path runs. Not executed on the machines this was written on (none
 * had AVX-VNNI without AVX512_VNNI), only compiled. A CPU with both (e.g. a
 * Xeon with AMX) measures the zmm forms only, so there the example's
 * forced avxvnni path is held against a peak up to twice what ymm can
 * reach; its users run avx512-w4a16 there. */
__attribute__((target("avxvnni"))) static double vnni_avxvnni(int int16)
{
    __m256i x = _mm256_set1_epi16(3), y = _mm256_setzero_si256(); /* see vnni_avx512 */
#define I(k) _mm256_set1_epi32(k)
    ACC12(__m256i, I);
#undef I
    if (int16) {
#define F(a) _mm256_dpwssd_avx_epi32(a, x, y)
        RUN12(F, "+x");
#undef F
    } else {
#define F(a) _mm256_dpbusd_avx_epi32(a, x, y)
        RUN12(F, "+x");
#undef F
    }
    __m256i s = SUM12(_mm256_add_epi32);
    volatile int sink = _mm256_extract_epi32(s, 0);
    (void)sink;
    /* 8 lanes × (2 int16 pairs or 4 bytes) × (mul + add) */
    return 12.0 * 8.0 * (int16 ? 2.0 : 4.0) * 2.0 * ITERS;
}

/* vpmaddwd + vpaddd on ymm: the int16 dot product of AVX2 without VNNI, the
 * instructions the avx2-w4a16 example's avx2 path runs its prefill on.
 * vpmaddwd takes no accumulator, so the chains are of vpaddd only, and its
 * inputs would be loop-invariant: b0..b5 go through the empty asm every
 * step, so each step computes six products anew (12 products, with
 * their 12 inputs, would not fit AVX2's 16 registers). An add's latency is
 * one cycle: six chains cover it. Counted as a dot product, like
 * vpdpwssd: 16 int16 products and their sums per vpmaddwd. */
__attribute__((target("avx2"))) static double madd16_avx2(void)
{
    const __m256i x = _mm256_set1_epi16(3);
    __m256i b0 = _mm256_set1_epi16(1), b1 = _mm256_set1_epi16(2), b2 = _mm256_set1_epi16(3),
            b3 = _mm256_set1_epi16(4), b4 = _mm256_set1_epi16(5), b5 = _mm256_set1_epi16(6);
    __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
    for (unsigned i = 0; i < ITERS; i++) {
        c0 = _mm256_add_epi32(c0, _mm256_madd_epi16(b0, x));
        c1 = _mm256_add_epi32(c1, _mm256_madd_epi16(b1, x));
        c2 = _mm256_add_epi32(c2, _mm256_madd_epi16(b2, x));
        c3 = _mm256_add_epi32(c3, _mm256_madd_epi16(b3, x));
        c4 = _mm256_add_epi32(c4, _mm256_madd_epi16(b4, x));
        c5 = _mm256_add_epi32(c5, _mm256_madd_epi16(b5, x));
        __asm__ volatile("" : "+x"(b0), "+x"(b1), "+x"(b2), "+x"(b3), "+x"(b4), "+x"(b5),
                              "+x"(c0), "+x"(c1), "+x"(c2), "+x"(c3), "+x"(c4), "+x"(c5));
    }
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(c0, c1), c2),
                                 _mm256_add_epi32(_mm256_add_epi32(c3, c4), c5));
    volatile int sink = _mm256_extract_epi32(s, 0);
    (void)sink;
    return 6.0 * 16.0 * 2.0 * ITERS;
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
 * (core/probe/probe_cpu.c), and the first tile instruction without it dies with
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
    case PEAK_INT8_VNNI + 200: ops = vnni_avxvnni(0); break;
    case PEAK_INT16_VNNI + 200: ops = vnni_avxvnni(1); break;
    case PEAK_INT16_MADD + 200: ops = madd16_avx2(); break;
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
    } else if (EDGERT_HAS_FLAG(f, EDGERT_CPU_AVX_VNNI)) {
        out->value[PEAK_INT8_VNNI] = run_family(&t, PEAK_INT8_VNNI + 200);
        out->isa[PEAK_INT8_VNNI] = "avx_vnni vpdpbusd (ymm)";
        out->value[PEAK_INT16_VNNI] = run_family(&t, PEAK_INT16_VNNI + 200);
        out->isa[PEAK_INT16_VNNI] = "avx_vnni vpdpwssd (ymm)";
    }
    if (EDGERT_HAS_FLAG(f, EDGERT_CPU_AVX2)) {
        out->value[PEAK_INT16_MADD] = run_family(&t, PEAK_INT16_MADD + 200);
        out->isa[PEAK_INT16_MADD] = "avx2 vpmaddwd + vpaddd (ymm)";
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
