/*
 * plugins/kit/x86/plugin_kit_x86.h — the part of the plugin kit only x86
 * plugins compile (edgert::plugin_kit_x86, decode_tuning.c): AMX tile
 * permission, the CPU vendor, and the decode tuning options with
 * prefetch=auto. pk_amx_permission is inline, so a plugin built on the tile
 * model (EDGERT_AMX_EMULATE, tests only) gets its own answer.
 */
#ifndef EDGERT_PLUGIN_KIT_X86_H
#define EDGERT_PLUGIN_KIT_X86_H

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#if defined(__x86_64__) && !defined(EDGERT_AMX_EMULATE)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "plugin_kit.h"

/* <asm/prctl.h> values (Linux 5.16+), spelled out so older headers build. */
#define PK_ARCH_REQ_XCOMP_PERM 0x1023
#define PK_XFEATURE_XTILEDATA 18

/*
 * Linux (5.16+) keeps AMX tile data off until the process asks. The edgert
 * core's probe only observes (the host's amx flags mean Linux offers tile
 * data, not that this process holds it), so a plugin with a tile path asks
 * in init; asking again is harmless. 0 when the tiles may be used; -1 with
 * "<plugin>: init: path=amx: Linux refused ..." in err. Builds on the tile
 * model (EDGERT_AMX_EMULATE, tests only) need no permission and call
 * nothing. Not x86-64: always -1.
 */
static inline int pk_amx_permission(const char *plugin, char *err, size_t err_len)
{
#if defined(EDGERT_AMX_EMULATE)
    (void)plugin;
    (void)err;
    (void)err_len;
    return 0;
#elif defined(__x86_64__)
    if (syscall(SYS_arch_prctl, PK_ARCH_REQ_XCOMP_PERM, PK_XFEATURE_XTILEDATA) == 0)
        return 0;
    edgert_errf(err, err_len,
                "%s: init: path=amx: Linux refused AMX tile-data permission "
                "(arch_prctl ARCH_REQ_XCOMP_PERM: %s)",
                plugin, strerror(errno));
    return -1;
#else
    edgert_errf(err, err_len, "%s: init: path=amx: AMX exists only on x86-64", plugin);
    return -1;
#endif
}

/*
 * 1 on an Intel CPU (CPUID vendor "GenuineIntel"), else 0 (and on every
 * other architecture). A tuning fact, not a capability: the x86 plugins'
 * decode defaults (software prefetch, streams per thread) were measured
 * per vendor, and every choice computes the same bits.
 */
int pk_cpu_is_intel(void);

/* ---- decode tuning ------------------------------------------------------------------ */

/* Software prefetch of a streaming GEMV, the option
 * prefetch=far|near|none|far-l1|auto (each plugin says what far, near and
 * far-l1 are in its kernel header): the modes, 0 .. PK_PF_MODES - 1. */
#define PK_PF_FAR 0
#define PK_PF_NEAR_TOO 1 /* far and a near one too */
#define PK_PF_NONE 2
#define PK_PF_FAR_L1 3 /* far, into L1 */
#define PK_PF_MODES 4

/* F(args..., mode) with a run-time prefetch mode passed as a constant: one
 * instantiation of F per mode, so no line of the loop tests the option. */
#define PK_BY_PF(mode, F, ...)                                                                 \
    ((mode) == PK_PF_NONE       ? F(__VA_ARGS__, PK_PF_NONE)                                   \
     : (mode) == PK_PF_NEAR_TOO ? F(__VA_ARGS__, PK_PF_NEAR_TOO)                               \
     : (mode) == PK_PF_FAR_L1   ? F(__VA_ARGS__, PK_PF_FAR_L1)                                 \
                                : F(__VA_ARGS__, PK_PF_FAR))

/* The decode tuning options of the x86 plugins: prefetch=far|near|none|far-l1|auto and
 * streams=1|2|4|auto, the panels an m = 1 GEMV reads side by side, each from
 * its own part of the chunk. Every setting computes the same bits. */
typedef struct pk_tuning {
    int prefetch;     /* PK_PF_*, or -1: not given */
    unsigned streams; /* 1, 2 or 4, PK_STREAMS_AUTO, or 0: not given */
} pk_tuning;

/* streams=auto (pk_tuning.streams): one stream against PK_STREAMS_MANY,
 * chosen by the calls' times as prefetch=auto chooses (below). */
#define PK_STREAMS_AUTO 0xFFu
#define PK_STREAMS_MANY 4u

/* The options token [s, s + len): 1 if it is a tuning option, stored in
 * *t; -1 if it is one given before (each once), 0 if it is none of them.
 * Start from {-1, 0}. */
int pk_tuning_option(const char *s, size_t len, pk_tuning *t);

/* NULL, or why the options in *t cannot go together (prefetch=auto with
 * streams=auto: each measures against the other's fixed choice). */
const char *pk_tuning_conflict(const pk_tuning *t);

/* Streams as the describe strings say them: "" for one stream, else
 * ", N streams per thread at m = 1 (prefetch: <pf_streams>)". */
void pk_tuning_describe(char *out, size_t out_len, unsigned streams, const char *pf_streams);

/* ---- prefetch=auto ------------------------------------------------------------------ */

/*
 * Which software prefetch serves a streaming GEMV best depends on the moment
 * as much as on the CPU. On an AMD EPYC (Zen 4), 2 threads, paired bench
 * runs (decode_tuning.c has the figures): with the host's memory busy, no
 * prefetch made avx512-w4a8's decode step 5-14% shorter than the far one;
 * with the weights served faster (resident in L3), the far prefetch made
 * the same steps up to 25% shorter. prefetch=auto measures instead of
 * guessing, at m = 1 (larger m keeps the prefetching mode):
 *   - warm-up: each packed weight's calls alternate between the two modes
 *     (its first call, cold, is not counted) until both orders of pair
 *     below have PK_PF_AUTO_WARM pairs;
 *   - then a weight's calls run in the mode in use, and every
 *     PK_PF_AUTO_EVERY-th in the other one (every PK_PF_AUTO_SPARSE-th
 *     while the two running means say the other mode is more than
 *     PK_PF_AUTO_FAR_APART slower, until they say under
 *     PK_PF_AUTO_CLOSE_AGAIN: each call in it costs what it is slower,
 *     and more, measured; near a tie, where a switch may be due, probes
 *     are cheap and frequent), but never 1 in PK_PF_AUTO_SPARSE in the
 *     PK_PF_AUTO_WINDOW pairs after the warm-up or a switch;
 *   - a pair is a weight's call against its previous call in the other
 *     mode (one decode step earlier: the same bytes and shape, nearly the
 *     same moment), within one choice (pairs that span a switch are
 *     dropped): each call in the other mode makes two, one each way round,
 *     so a drift of the host cancels;
 *   - log(t other / t in use) goes into a running mean per order
 *     (exponential, of weight 2 / PK_PF_AUTO_WINDOW: about
 *     PK_PF_AUTO_WINDOW pairs in all), and when the average of the two
 *     falls below -PK_PF_AUTO_MARGIN, the other mode becomes the one in
 *     use.
 * Every mode computes the same bits: only the time depends on the choice.
 */
#define PK_PF_AUTO 4             /* the option prefetch=auto (pk_tuning.prefetch) */
#define PK_PF_AUTO_EVERY 16u     /* a weight's calls per call in the other mode */
#define PK_PF_AUTO_WARM 16u      /* pairs each way round before the first choice */
#define PK_PF_AUTO_WINDOW 64u    /* pairs in the two running means */
#define PK_PF_AUTO_MARGIN 0.02   /* log of the time ratio that makes a switch */
#define PK_PF_AUTO_SPARSE 64u    /* the same, while the other mode is far slower */
#define PK_PF_AUTO_FAR_APART 0.04 /* log of the time ratio that is far slower */
#define PK_PF_AUTO_CLOSE_AGAIN 0.025 /* and below which it no longer is */

/* Per packed weight, zeroed when the handle is made (pack, packed_map):
 * its m = 1 calls as prefetch=auto saw them. Atomics, so that gemm calls
 * on one weight from several threads are well defined. */
typedef struct pk_pf_seen {
    _Atomic uint64_t last;  /* its last counted call: ns << 8 | ticket; 0: none */
    _Atomic uint32_t calls; /* m = 1 calls so far */
    _Atomic uint32_t phase; /* where its calls in the other mode fall */
} pk_pf_seen;

/* Per instance: the two modes and the evidence between them. With
 * streams=auto the two modes are stream counts, streams[0] = 1 (the first
 * in use) and streams[1] = PK_STREAMS_MANY, each with its own fixed
 * prefetch, which mode[] holds. */
typedef struct pk_pf_auto {
    _Atomic int lock;       /* a spin lock over pairs[], diff and settle */
    int mode[2];            /* PK_PF_*: [0] with prefetch (the first in use), [1] none */
    unsigned streams[2];    /* streams=auto: {1, PK_STREAMS_MANY}; else {0, 0} */
    _Atomic unsigned gen;   /* choices made so far: the slot in use is gen & 1 */
    _Atomic int warm;       /* 1 once both orders have PK_PF_AUTO_WARM pairs */
    _Atomic int sparse;     /* 1 while the other mode is PK_PF_AUTO_FAR_APART slower
                             * and settle is 0 */
    unsigned settle;        /* pairs left, after the warm-up or a switch, before sparse */
    unsigned pairs[2];      /* pairs: [0] other after in-use, [1] in-use after other */
    double diff[2];         /* per order, running mean of log(t other / t in use) */
    _Atomic uint32_t weights; /* weights seen: their phases */
} pk_pf_auto;

/* record's result: bits */
#define PK_PF_AUTO_SWITCHED 1 /* this call's pair made the other mode the one in use */
#define PK_PF_AUTO_WARMED 2   /* and/or ended the warm-up (the first choice) */

void pk_pf_auto_init(pk_pf_auto *a, int with, int without);
/* The mode for weight w's next m = 1 call, and its *ticket for record. */
int pk_pf_auto_pick(pk_pf_auto *a, pk_pf_seen *w, unsigned *ticket);
/* That call's time in ns. PK_PF_AUTO_* bits; with either, *ratio (if not
 * NULL) is the time of the mode not in use (after a switch: no longer in
 * use) over the one in use, from the running means; below 1 only at the
 * first choice, when the two are within the margin. */
int pk_pf_auto_record(pk_pf_auto *a, pk_pf_seen *w, unsigned ticket, uint64_t ns, double *ratio);
/* The slot of a ticket (0: with prefetch, 1: none; streams=auto: 0 one
 * stream, 1 PK_STREAMS_MANY) and the one in use when it was picked. */
static inline unsigned pk_pf_ticket_slot(unsigned ticket)
{
    return ticket & 1u;
}
static inline unsigned pk_pf_ticket_in_use(unsigned ticket)
{
    return (ticket >> 2) & 1u;
}
/* CLOCK_MONOTONIC in ns. */
uint64_t pk_now_ns(void);

/*
 * init's side: the option's mode `pf` (PK_PF_*, PK_PF_AUTO, or -1 when not
 * given: near_default for one stream, streams_default beside several) into
 * the instance's two fields. With PK_PF_AUTO the field that decides m = 1
 * (pf_streams beside several streams, else pf_near) keeps it, the other gets
 * `with`; *a weighs `with` (the plugin's prefetching mode on this CPU)
 * against none.
 */
void pk_pf_settle(int pf, int with, int near_default, int streams_default, unsigned streams,
                  int *pf_near, int *pf_streams, pk_pf_auto *a);

/*
 * init's side of streams=auto: one stream (prefetch *pf_near) weighed
 * against PK_STREAMS_MANY (prefetch *pf_streams), *streams = PK_STREAMS_MANY
 * (what the instance can read; each call gets its own count from
 * pk_decode_run). `pf` is the option's prefetch (-1 when not given:
 * near_default for one stream, streams_default beside several; never
 * PK_PF_AUTO: pk_tuning_conflict).
 */
void pk_streams_settle(int pf, int near_default, int streams_default, int *pf_near,
                       int *pf_streams, unsigned *streams, pk_pf_auto *a);

/* A mode in words for describe: said[mode] (said: the plugin's words for
 * each of the PK_PF_MODES modes), or for PK_PF_AUTO
 * "auto (<said[with]> or none, whichever the last calls ran faster)". */
void pk_pf_said(char *out, size_t out_len, const char *const said[PK_PF_MODES], int mode,
                int with);

/*
 * gemm's side, around its decode: resolve puts a mode in every job field
 * that says PK_PF_AUTO (at m > 1 `with`, the prefetching mode), or with
 * streams=auto the call's stream count in *streams (m = 1 only; larger m
 * reads one), and returns 1 when the call is to be timed (m = 1, and a
 * field said auto or streams=auto); then gemm
 * takes t0 = pk_now_ns() before its decode and calls done after it, which
 * records the time and logs the first choice and every switch at debug
 * level ("<plugin>: prefetch=auto: ..." or "<plugin>: streams=auto: ...").
 */
int pk_pf_auto_resolve(pk_pf_auto *a, pk_pf_seen *w, uint32_t m, int *pf_near, int *pf_streams,
                       unsigned *streams, unsigned *ticket);
void pk_pf_auto_done(const edgert_host *host, const char *plugin, pk_pf_auto *a, pk_pf_seen *w,
                     unsigned ticket, uint64_t t0);

/* Both sides as the x86 plugins use them. decode_run: a decode call's
 * parallel_for(n, grain, fn, job) with the job's prefetch fields and stream
 * count resolved and, when auto decides, timed and recorded against the
 * packed handle's record `w`. decode_describe: "<one stream's prefetch>[,
 * N streams per thread at m = 1 (prefetch: <theirs>)]" in the plugin's
 * words `said`; with streams=auto "<one stream's prefetch>, or N streams per
 * thread at m = 1 (prefetch: <theirs>), whichever the last calls ran
 * faster (streams=auto)". */
void pk_decode_run(const edgert_host *host, const char *plugin, pk_pf_auto *a, pk_pf_seen *w,
                   uint32_t m, int *pf_near, int *pf_streams, unsigned *streams, size_t n,
                   size_t grain, edgert_range_fn fn, void *job);
void pk_decode_describe(char *out, size_t out_len, const char *const said[PK_PF_MODES],
                        int pf_near, int pf_streams, unsigned streams, const pk_pf_auto *a);

#endif /* EDGERT_PLUGIN_KIT_X86_H */
