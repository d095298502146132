/*
 * plugins/kit/x86/decode_tuning.c — the x86 plugins' decode tuning options
 * (plugin_kit_x86.h): prefetch=far|near|none|far-l1|auto and streams=1|2|4|auto, and
 * prefetch=auto itself, which of two software-prefetch modes the m = 1 GEMV
 * runs in, chosen by the calls' measured times (streams=auto: which of two
 * stream counts, by the same measure), and the CPU vendor. The x86 part of
 * the kit (edgert::plugin_kit_x86), linked into the x86 plugins; no libm
 * (a plugin need not link it).
 *
 * What it answers, measured on AMD EPYC (Zen 4: family 25, model 17), 2
 * threads, edgert bench --versus (each run 16 alternating pairs of decode
 * steps; the step time of B over A's, pair by pair, median of the run):
 *   - avx512-w4a8 (one stream), prefetch=none over far, spark-1.7b from DRAM
 *     with the host busy (read ceiling 28-50 GB/s): 0.860, 0.901, 0.911,
 *     0.927, 0.950, 0.952 (six runs, none shorter in 11-15 of 16 pairs);
 *   - the same with a 14.7 MB workload resident in L3 (60-90 GB/s): 0.993,
 *     1.269, 1.061, 0.916, 1.046, 1.354, 1.245, 1.051;
 *   - avx512-w4a16 (4 streams), prefetch=far over none: from DRAM 1.008,
 *     1.062, 1.026, 0.921; resident in L3 0.936, 0.755, 0.950, 0.814 (the
 *     14.7 MB workload, 6 calls a step) and 0.863, 0.906, 0.910, 0.822
 *     (19 MB in 3 calls).
 * So the better mode follows how fast memory serves the stream, which moves
 * with the neighbours on a shared host within seconds; no fixed default
 * wins both.
 *
 * The measure is paired per weight (plugin_kit.h): a weight's call in the
 * other mode is timed against its previous call (one decode step earlier:
 * the same bytes, the same shape, nearly the same moment), and the call
 * after it against that one again; one shape's speed never counts for
 * another's. A host whose speed drifts from step to step adds the drift to
 * one order of pair and takes it from the other, so each order keeps its
 * own running mean and their average decides: the drift cancels however
 * many pairs of each order there are (test_drift_is_no_evidence; one mean
 * of both, weighted by whichever order came last, followed a 6% drift).
 * Also: no choice before both orders have PK_PF_AUTO_WARM pairs (warming
 * up, every weight alternates); a weight's first call, cold, is not
 * counted; a pair that spans a switch is dropped. Per call the noise of
 * this host is large (one pair's ratio ranged 0.6-1.5 in the runs above),
 * so each order's mean is exponential over ~32 pairs (~64 in all, about
 * 4.5 steps of spark-1.7b, which makes 14 pairs a step): with +-20% noise
 * per call the average's spread is about 0.16 / sqrt(127) = 0.014, and two
 * modes 3% apart cross PK_PF_AUTO_MARGIN rarely (test_decode_tuning: at
 * most 8 switches in 300 simulated steps; with half the window 8-18). The
 * other mode costs 1 call in PK_PF_AUTO_EVERY (16): under 1% of the step
 * when it is 10% slower, by its own time. On an AMD EPYC Zen 5 (family 26,
 * model 2) none took 1.20-1.24x auto's step time with avx512-w4a8 (paired
 * runs), so 1 call in 16 in it cost about 1.3%: while the means put the
 * other mode more than PK_PF_AUTO_FAR_APART behind, 1 call in
 * PK_PF_AUTO_SPARSE (64) runs in it. That threshold was 0.15 (16%) until
 * the same host's quiet windows (read ceiling 86-88 GB/s) showed what a
 * smaller gap costs: avx512-w4a16's streams=auto measured 4 streams
 * 0.04-0.08 behind one (log ratio), below 0.15, so it probed 1 call in 16,
 * and one stream alone (streams=1) took 0.987-0.992 of auto's step time
 * (bench --versus, 48 pairs a run, 5 quiet runs): about 1%, three times
 * the probes' own 1/16 x 5%. Probing 1 in 64 there instead: 0.993-0.998
 * (3 runs); never probing after the warm-up: 0.995, 0.995 (all with
 * bench's one warm-up step then, which left step 1 and part of step 3 of
 * auto's warm-up among the timed ones: tools/bench_decode.c). So the rate
 * drops at 0.04 (back at 0.025, above PK_PF_AUTO_MARGIN, so near a tie the
 * probes stay frequent, and cheap). Against the build before this rule
 * (bench --versus an extra manifest over it, 48 pairs a run, the same bench
 * warm-up), that build took 1.002-1.005 of this one's step time in 4 quiet
 * runs and 0.986-1.003 in 4 busy ones; streams=1 now takes 0.989-0.995 of
 * auto's (6 quiet runs): a third of the 1% recovered, where the rest goes
 * is not known. The price is reaction time: a gap that reverses from over
 * 4% takes about four times as many steps to follow (in the simulation of
 * test_follows_a_change, 8-13 steps of 113 calls, and 10-19 in
 * test_far_apart_probes_less, whose bound is 24: a third of a second at 14
 * ms a step).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "plugin_kit_x86.h"

int pk_tuning_option(const char *s, size_t len, pk_tuning *t)
{
    static const char *const pf[] = {
        [PK_PF_FAR] = "prefetch=far",       [PK_PF_NEAR_TOO] = "prefetch=near",
        [PK_PF_NONE] = "prefetch=none",     [PK_PF_FAR_L1] = "prefetch=far-l1",
        [PK_PF_AUTO] = "prefetch=auto",
    };
    _Static_assert(PK_PF_MODES == 4 && PK_PF_AUTO == PK_PF_MODES,
                   "pf[]: every mode, then auto, no gap");
    for (int i = 0; i < (int)(sizeof pf / sizeof pf[0]); i++)
        if (len == strlen(pf[i]) && strncmp(s, pf[i], len) == 0) {
            if (t->prefetch >= 0)
                return -1;
            return t->prefetch = i, 1;
        }
    if (len == 9u && strncmp(s, "streams=", 8u) == 0 &&
        (s[8] == '1' || s[8] == '2' || s[8] == '4')) {
        if (t->streams != 0u)
            return -1;
        return t->streams = (unsigned)(s[8] - '0'), 1;
    }
    if (len == 12u && strncmp(s, "streams=auto", 12u) == 0) {
        if (t->streams != 0u)
            return -1;
        return t->streams = PK_STREAMS_AUTO, 1;
    }
    return 0;
}

const char *pk_tuning_conflict(const pk_tuning *t)
{
    return t->prefetch == PK_PF_AUTO && t->streams == PK_STREAMS_AUTO
               ? "prefetch=auto and streams=auto cannot go together: each measures against "
                 "the other's fixed choice (give one of them)"
               : NULL;
}

void pk_tuning_describe(char *out, size_t out_len, unsigned streams, const char *pf_streams)
{
    if (streams > 1u)
        snprintf(out, out_len, ", %u streams per thread at m = 1 (prefetch: %s)", streams,
                 pf_streams);
    else
        snprintf(out, out_len, "%s", "");
}

static void pf_lock(pk_pf_auto *a)
{
    while (atomic_exchange_explicit(&a->lock, 1, memory_order_acquire) != 0)
        ;
}

static void pf_unlock(pk_pf_auto *a)
{
    atomic_store_explicit(&a->lock, 0, memory_order_release);
}

void pk_pf_auto_init(pk_pf_auto *a, int with, int without)
{
    atomic_init(&a->lock, 0);
    a->mode[0] = with;
    a->mode[1] = without;
    a->streams[0] = a->streams[1] = 0u;
    atomic_init(&a->gen, 0u);
    atomic_init(&a->warm, 0);
    atomic_init(&a->sparse, 0);
    a->settle = 0u;
    a->pairs[0] = a->pairs[1] = 0u;
    a->diff[0] = a->diff[1] = 0.0;
    atomic_init(&a->weights, 0u);
}

/* A ticket (8 bits, kept with the call's time in pk_pf_seen.last):
 * bit 0 the slot the call ran in, bit 1 a weight's first call (cold: not
 * counted), bits 2-7 the choice it was picked under (gen mod 64; bit 2 is
 * the slot then in use). */
#define PF_FIRST 2u
#define PF_GEN(t) (((t) >> 2) & 0x3Fu)

/* A weight's calls in the other mode every 64 are a subset of those every
 * 16 (phases spread over 64 weights), so a change of rate makes neither a
 * burst nor a gap, and each step some weights probe at either rate. */
_Static_assert(PK_PF_AUTO_SPARSE % PK_PF_AUTO_EVERY == 0u, "sparse probes: a subset");

int pk_pf_auto_pick(pk_pf_auto *a, pk_pf_seen *w, unsigned *ticket)
{
    const uint32_t c = atomic_fetch_add_explicit(&w->calls, 1u, memory_order_relaxed);
    uint32_t phase;
    if (c == 0u) { /* spread the weights' calls in the other mode over the step */
        phase = atomic_fetch_add_explicit(&a->weights, 1u, memory_order_relaxed) %
                PK_PF_AUTO_SPARSE;
        atomic_store_explicit(&w->phase, phase, memory_order_relaxed);
    } else {
        phase = atomic_load_explicit(&w->phase, memory_order_relaxed);
    }
    const unsigned gen = atomic_load_explicit(&a->gen, memory_order_relaxed);
    /* warming up, each weight alternates: its calls from the third on
     * make pairs, each way round in turn */
    const uint32_t every = atomic_load_explicit(&a->sparse, memory_order_relaxed)
                               ? PK_PF_AUTO_SPARSE
                               : PK_PF_AUTO_EVERY;
    const int other = !atomic_load_explicit(&a->warm, memory_order_relaxed)
                          ? (c & 1u) != 0u
                          : (c + phase) % every == every - 1u;
    const unsigned slot = (gen & 1u) ^ (other ? 1u : 0u);
    *ticket = (gen & 0x3Fu) << 2 | (c == 0u ? PF_FIRST : 0u) | slot;
    return a->mode[slot];
}

/* log r for r in about [0.7, 1.4], within 1% of it there: 2 (r - 1) / (r + 1)
 * (the first term of 2 atanh((r - 1) / (r + 1))); clamped to +-0.3 so that
 * one call stalled by the host (a preemption, a page fault) weighs no more
 * than a 35% difference */
static double pf_log_ratio(double r)
{
    double q = 2.0 * (r - 1.0) / (r + 1.0);
    return q > 0.3 ? 0.3 : q < -0.3 ? -0.3 : q;
}

int pk_pf_auto_record(pk_pf_auto *a, pk_pf_seen *w, unsigned ticket, uint64_t ns, double *ratio)
{
    if (ticket & PF_FIRST)
        return 0;
    ns = ns == 0u ? 1u : ns > UINT64_MAX >> 8 ? UINT64_MAX >> 8 : ns;
    ticket &= 0xFFu;
    const uint64_t prev = atomic_exchange_explicit(&w->last, ns << 8 | ticket,
                                                   memory_order_relaxed);
    const unsigned pt = (unsigned)(prev & 0xFFu);
    if (prev == 0u || (pt & 1u) == (ticket & 1u) || PF_GEN(pt) != PF_GEN(ticket))
        return 0; /* no previous call, one in the same mode, or under another choice */
    /* log(t slot / t other slot), as log(t other / t in use) */
    const double q0 = pf_log_ratio((double)ns / (double)(prev >> 8));
    const unsigned order = pk_pf_ticket_slot(ticket) == pk_pf_ticket_in_use(ticket);
    const double q = order ? -q0 : q0;
    int res = 0;
    pf_lock(a);
    const unsigned gen = atomic_load_explicit(&a->gen, memory_order_relaxed);
    if ((gen & 0x3Fu) == PF_GEN(ticket)) { /* still the choice the pair was made under */
        /* a running mean per order: a drift of the host from one step to
         * the next enters the two with opposite signs, and their average,
         * which decides, cancels it however many pairs each has */
        const unsigned n = a->pairs[order] < UINT32_MAX ? ++a->pairs[order] : UINT32_MAX;
        const unsigned win = PK_PF_AUTO_WINDOW / 2u;
        a->diff[order] += (q - a->diff[order]) / (double)(n < win ? n : win);
        int warm = atomic_load_explicit(&a->warm, memory_order_relaxed);
        if (!warm && a->pairs[0] >= PK_PF_AUTO_WARM && a->pairs[1] >= PK_PF_AUTO_WARM) {
            atomic_store_explicit(&a->warm, warm = 1, memory_order_relaxed);
            res |= PK_PF_AUTO_WARMED;
        }
        double d = 0.5 * (a->diff[0] + a->diff[1]);
        if (warm && d < -PK_PF_AUTO_MARGIN) {
            /* the other mode is now the one in use: an order's pairs are
             * the other order's as seen from it, their logs negated */
            atomic_store_explicit(&a->gen, gen + 1u, memory_order_relaxed);
            const double d0 = a->diff[0];
            const unsigned n0 = a->pairs[0];
            a->diff[0] = -a->diff[1];
            a->diff[1] = -d0;
            a->pairs[0] = a->pairs[1];
            a->pairs[1] = n0;
            d = -d;
            res |= PK_PF_AUTO_SWITCHED;
        }
        /* with hysteresis: a mean near the threshold does not flip the rate.
         * Not in the PK_PF_AUTO_WINDOW pairs after the warm-up, whose means
         * come from two steps, where a drift of the host's window weighs
         * (with 5% drift a wrong first choice, probed 1 in 64, lasted over
         * 10 steps of test_window_moves; probed 1 in 16 for the next 64
         * pairs, under 10), nor after a switch, which the new mode in use
         * has yet to confirm */
        if (res != 0)
            a->settle = PK_PF_AUTO_WINDOW;
        else if (a->settle != 0u)
            a->settle--;
        const int was_sparse = atomic_load_explicit(&a->sparse, memory_order_relaxed);
        atomic_store_explicit(&a->sparse,
                              warm && a->settle == 0u &&
                                  d > (was_sparse ? PK_PF_AUTO_CLOSE_AGAIN
                                                  : PK_PF_AUTO_FAR_APART),
                              memory_order_relaxed);
        if (res != 0 && ratio != NULL) /* e^d, to 1%: not in use over in use */
            *ratio = (2.0 + d) / (2.0 - d);
    }
    pf_unlock(a);
    return res;
}

uint64_t pk_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int pk_pf_auto_resolve(pk_pf_auto *a, pk_pf_seen *w, uint32_t m, int *pf_near, int *pf_streams,
                       unsigned *streams, unsigned *ticket)
{
    if (a->streams[0] != 0u) { /* streams=auto: the prefetch fields are fixed */
        if (m != 1u)
            return 0;
        (void)pk_pf_auto_pick(a, w, ticket);
        *streams = a->streams[pk_pf_ticket_slot(*ticket)];
        return 1;
    }
    if (*pf_near != PK_PF_AUTO && *pf_streams != PK_PF_AUTO)
        return 0;
    const int timed = m == 1u;
    const int mode = timed ? pk_pf_auto_pick(a, w, ticket) : a->mode[0];
    if (*pf_near == PK_PF_AUTO)
        *pf_near = mode;
    if (*pf_streams == PK_PF_AUTO)
        *pf_streams = mode;
    return timed;
}

void pk_pf_auto_done(const edgert_host *host, const char *plugin, pk_pf_auto *a, pk_pf_seen *w,
                     unsigned ticket, uint64_t t0)
{
    static const char *const said[PK_PF_MODES] = {[PK_PF_FAR] = "far",
                                                  [PK_PF_NEAR_TOO] = "near",
                                                  [PK_PF_NONE] = "none",
                                                  [PK_PF_FAR_L1] = "far-l1"};
    double r = 1.0;
    const int res = pk_pf_auto_record(a, w, ticket, pk_now_ns() - t0, &r);
    if (res == 0)
        return;
    const unsigned was = pk_pf_ticket_in_use(ticket);
    const unsigned now = (res & PK_PF_AUTO_SWITCHED) ? was ^ 1u : was;
    if (a->streams[0] != 0u) {
        host->log(host->host_ctx, EDGERT_LOG_DEBUG,
                  "%s: streams=auto: %s: decode reads streams=%u (streams=%u took %.3fx as long "
                  "over the last pairs of calls)",
                  plugin, (res & PK_PF_AUTO_WARMED) ? "both modes measured" : "switched",
                  a->streams[now], a->streams[now ^ 1u], r);
        return;
    }
    host->log(host->host_ctx, EDGERT_LOG_DEBUG,
              "%s: prefetch=auto: %s: decode runs with prefetch=%s (prefetch=%s took %.3fx as "
              "long over the last pairs of calls)",
              plugin, (res & PK_PF_AUTO_WARMED) ? "both modes measured" : "switched",
              said[a->mode[now]], said[a->mode[now ^ 1u]], r);
}

void pk_decode_run(const edgert_host *host, const char *plugin, pk_pf_auto *a, pk_pf_seen *w,
                   uint32_t m, int *pf_near, int *pf_streams, unsigned *streams, size_t n,
                   size_t grain, edgert_range_fn fn, void *job)
{
    unsigned ticket = 0;
    const int timed = pk_pf_auto_resolve(a, w, m, pf_near, pf_streams, streams, &ticket);
    const uint64_t t0 = timed ? pk_now_ns() : 0u;
    host->parallel_for(host->host_ctx, n, grain, fn, job);
    if (timed)
        pk_pf_auto_done(host, plugin, a, w, ticket, t0);
}

void pk_pf_settle(int pf, int with, int near_default, int streams_default, unsigned streams,
                  int *pf_near, int *pf_streams, pk_pf_auto *a)
{
    *pf_near = pf >= 0 ? pf : near_default;
    *pf_streams = pf >= 0 ? pf : streams_default;
    if (pf == PK_PF_AUTO) /* the field that decides m = 1 stays auto */
        *(streams > 1u ? pf_near : pf_streams) = with;
    pk_pf_auto_init(a, with, PK_PF_NONE);
}

void pk_streams_settle(int pf, int near_default, int streams_default, int *pf_near,
                       int *pf_streams, unsigned *streams, pk_pf_auto *a)
{
    *pf_near = pf >= 0 ? pf : near_default;
    *pf_streams = pf >= 0 ? pf : streams_default;
    *streams = PK_STREAMS_MANY;
    pk_pf_auto_init(a, *pf_near, *pf_streams);
    a->streams[0] = 1u;
    a->streams[1] = PK_STREAMS_MANY;
}

void pk_pf_said(char *out, size_t out_len, const char *const said[PK_PF_MODES], int mode,
                int with)
{
    if (mode == PK_PF_AUTO)
        snprintf(out, out_len, "auto (%s or none, whichever the last calls ran faster)",
                 said[with]);
    else
        snprintf(out, out_len, "%s", said[mode]);
}

void pk_decode_describe(char *out, size_t out_len, const char *const said[PK_PF_MODES],
                        int pf_near, int pf_streams, unsigned streams, const pk_pf_auto *a)
{
    char near[128], beside[128], more[192];
    pk_pf_said(near, sizeof near, said, pf_near, a->mode[0]);
    pk_pf_said(beside, sizeof beside, said, pf_streams, a->mode[0]);
    if (a->streams[0] != 0u) {
        snprintf(out, out_len,
                 "%s, or %u streams per thread at m = 1 (prefetch: %s), whichever the last "
                 "calls ran faster (streams=auto)",
                 near, a->streams[1], beside);
        return;
    }
    pk_tuning_describe(more, sizeof more, streams, beside);
    snprintf(out, out_len, "%s%s", near, more);
}

int pk_cpu_is_intel(void)
{
#if defined(__x86_64__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return 0;
    return b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu; /* "GenuineIntel" */
#else
    return 0;
#endif
}
