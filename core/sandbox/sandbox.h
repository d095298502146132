/*
 * core/sandbox/sandbox.h — what first contact's child reports (sandbox.c), its quick
 * measurement (sandbox_measure.c) and the cache that keeps its verdicts
 * (sandbox_cache.c). Private to the core.
 */
#ifndef EDGERT_CORE_SANDBOX_H
#define EDGERT_CORE_SANDBOX_H

#include "context/context.h"

/* What the child reports. Plain data, written whole through the pipe. */
typedef struct sb_result {
    int ok;                /* 1: every stage passed */
    int gate;              /* er_gate_id of the first failure, when !ok */
    char reason[160];      /* its reason code, e.g. "SELF_TEST_FAILED" */
    char detail[600];      /* its explanation */
    double decode_tok_s;   /* quick measurement, NaN when not measured */
    double prefill_gflops;
    double decode_min, decode_max; /* the slowest and fastest call's rate */
    double read_gbs;       /* the read beside the decode calls (median), NaN when none */
    long long timeout_ms;  /* the limit a PLUGIN_TIMEOUT was given (parent side) */
    int packed_outside;    /* pack did not allocate through host->alloc: no decode figure */
    char pack_refused[240]; /* the quick measurement's pack refused: its error, else "" */
    int passing;           /* 1: a verdict of the moment, not kept (killed from outside,
                            * no child could be made, its end could not be read) */
    unsigned checked_outputs; /* outputs the core's arithmetic check compared (0: not run) */
    /* what the quick measurement saw of the machine (common/contention.h) */
    double wait_share;     /* its threads' wait for a CPU over their time, NaN unknown */
    double cpu_per_wall;   /* their CPU time over wall time, NaN unknown */
    double wait_per_wall;  /* their wait over wall time, NaN unknown */
    int run_queue, cpus;   /* the run queue seen (-1 unknown), CPUs online */
    /* why its figures were not kept (set by the parent, which knows this
     * device's quiet read), else "": the verdict is cached, its figures NaN,
     * and a later run measures again (sandbox.c) */
    char contended[288];
    long long measured_at; /* when (CLOCK_REALTIME, s): a contended verdict's age */
    unsigned attempts;     /* measurements this verdict took, contended ones included */
} sb_result;

/* The quick measurement of a loaded candidate, in the child
 * (sandbox_measure.c): r's decode, prefill and read figures. */
void er_sb_quick_measure(er_cand *c, sb_result *r);

/* The core's arithmetic check of a loaded candidate, in the child
 * (sandbox_check.c): 0 passed or not run (r->checked_outputs says which),
 * -1 with r's gate, reason and detail set (WRONG_RESULTS). */
int er_sb_check_arithmetic(er_cand *c, sb_result *r);

/* The child's time limit, as this handle read it (EDGERT_SANDBOX_TIMEOUT). */
long long er_sb_timeout_ms(const struct edgert_ctx *ctx);

/* The cache file of c's verdict on this device, malloc'd; NULL when no
 * per-user cache folder can be named (or, with `create`, made). */
char *er_sb_cache_file(struct edgert_ctx *ctx, const er_cand *c, int create);
/* 0 with *r filled from c's cached verdict; -1 when there is none this
 * edgert can use (missing, another format, or a timeout under a shorter
 * limit than now). */
int er_sb_cache_read(struct edgert_ctx *ctx, const er_cand *c, sb_result *r);
/* One first contact at a time among this user's processes: an exclusive
 * flock on the verdict folder's .lock, taken within wait_ms. Its
 * descriptor (close-on-exec; er_sb_unlock releases it), or -1: no cache
 * folder (each process meets plugins on its own then, as it keeps no
 * verdicts), or the wait ran out (*timed_out set). */
int er_sb_lock(long long wait_ms, int *timed_out);
/* The end of edgert_open's first contacts (ctx->sb_batch): the lock, if
 * one was taken for them, is released; later contacts take it each. */
void er_sb_batch_end(struct edgert_ctx *ctx);
/* Milliseconds of CLOCK_MONOTONIC: the deadlines of the child and the lock. */
long long er_sb_now_ms(void);
void er_sb_unlock(int fd);
/* The highest read rate (GB/s) an uncontended first contact measured on
 * this device, NaN when none is kept yet; er_sb_quiet_read_offer keeps
 * read_gbs when it is higher (under first contact's lock). */
double er_sb_quiet_read(struct edgert_ctx *ctx);
void er_sb_quiet_read_offer(struct edgert_ctx *ctx, double read_gbs);
/* Keep r as c's verdict (written whole, then renamed into place). */
void er_sb_cache_write(struct edgert_ctx *ctx, const er_cand *c, const sb_result *r);

/* What first contact runs in the child: the loader's in-process load of c
 * (load.c, er_load_now), which reports its stages through er_stage_reached.
 * The sandbox calls nothing of the loader but this. */
typedef void (*er_sb_contact)(struct edgert_ctx *ctx, er_cand *c);
/* The name of a stage, for messages ("?" past the last). */
const char *er_stage_name(int s);
/* Stage s of loading c reached: logged ("loading <name> (<file>): <stage>")
 * and, in first contact's child, reported to the parent, which names the
 * stage a plugin hung or crashed in. In process or in the child alike. */
void er_stage_reached(struct edgert_ctx *ctx, const er_cand *c, er_stage s);

/* sandbox.c: first contact in a child process, verdicts cached per
 * (device, plugin file). 0 when the plugin may be loaded in-process, -1 with
 * the candidate's reason set. cached_only: use a cached verdict if there is
 * one, never run the child (then 0 also means "not known yet"). */
int er_sandbox(struct edgert_ctx *ctx, er_cand *c, int cached_only, er_sb_contact contact);
/* The child's time limit from EDGERT_SANDBOX_TIMEOUT's value v (seconds; NULL:
 * the default), with a warning into d when v is not a number in
 * [0.001, 3600]. */
long long er_sandbox_timeout_ms(const char *v, er_diags *d);

#endif
