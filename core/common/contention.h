/*
 * core/common/contention.h — what a measurement can see of the other load on
 * the machine while it runs (contention.c): how long this process's threads
 * waited for a CPU against how long they ran (the kernel's per-thread
 * schedstat), the run queue, and the memory read rate against what this
 * device reads when quiet; and the one rule that calls a measurement
 * contended. First contact's quick measurement (core/sandbox/) and
 * `edgert calibrate`'s rounds (tools/calibrate.c) both judge by it: a
 * figure measured under contention is not kept as evidence. Not installed.
 */
#ifndef EDGERT_CORE_CONTENTION_H
#define EDGERT_CORE_CONTENTION_H

#include <stddef.h>

/* A moment of this process: the sums over its threads of the time each ran
 * on a CPU and the time each was runnable but waited for one
 * (/proc/self/task/N/schedstat), the monotonic clock, and the run queue
 * (/proc/stat procs_running: runnable tasks machine-wide, this process's
 * own among them). `known` 0 where the kernel does not give schedstat. */
typedef struct er_cpu_mark {
    long long wall_ns;
    unsigned long long run_ns, wait_ns;
    int known;
    int run_queue; /* -1 unknown */
} er_cpu_mark;

void er_cpu_mark_now(er_cpu_mark *m);

/* What this process's threads saw between two marks. */
typedef struct er_cpu_load {
    double wait_share;   /* waited / (waited + ran), NaN unknown */
    double cpu_per_wall; /* ran / wall: threads busy on average, NaN unknown */
    double wait_per_wall; /* waited / wall: threads kept waiting on average, NaN unknown */
    int run_queue;       /* the larger of the marks' run queues, -1 unknown */
    int cpus;            /* CPUs online, 0 unknown */
} er_cpu_load;

er_cpu_load er_cpu_load_between(const er_cpu_mark *a, const er_cpu_mark *b);

/* The share of their time a measurement's threads may wait for a CPU and
 * still be kept (the wait also at least that fraction of the wall time: a
 * thread's fifth), and the fraction of this device's quiet read rate below
 * which the read beside it says something else was reading memory
 * (contention.c derives both). */
#define ER_CONTENDED_WAIT 0.20
#define ER_CONTENDED_READ (1.0 / 3.0)

/* EDGERT_CONTENTION's value v: "judge" (also NULL or empty: the default)
 * 0, "ignore" 1 (figures measured under contention are kept as measured:
 * a machine that is never quiet, or tests run side by side), anything else
 * -1 (the caller warns and judges). */
int er_contention_ignored(const char *v);

/* 1 when a measurement that saw `load` (and, where both are known (> 0),
 * read memory at read_gbs where this device reads quiet_gbs when quiet)
 * ran under contention, with why[] saying what was seen in one clause
 * ("its threads waited for a CPU 52% of the time (run queue 14 on 2
 * CPUs)"); 0 when not, or when nothing could be seen (why[] empty). Pure. */
int er_contended(const er_cpu_load *load, double read_gbs, double quiet_gbs, char *why,
                 size_t len);

#endif
