/*
 * core/common/contention.c — the marks and the rule of contention.h.
 *
 * Why these signals. A crowd of processes, or a compiler on every core,
 * takes CPUs from a measurement's threads: each is runnable and waits,
 * and the kernel counts that wait per thread (schedstat's second field,
 * the run delay). Its share of the threads' time is what the measurement
 * lost to the others; a quiet machine leaves it near zero, whatever the
 * kernel does. CPU time against wall time and the run queue are reported
 * beside it (a reader sees how busy the machine was), but they do not
 * decide: a pool's threads sleep between calls, so CPU time under wall
 * time says nothing alone, and the run queue is a sample of one moment.
 * Memory read by another process on CPUs this one does not use causes no
 * wait: for that the read beside the calls is compared with what this
 * device reads when quiet.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/contention.h"

/* A whole small /proc file into buf; its length, or -1. */
static long read_small(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, len - 1u, f);
    fclose(f);
    buf[n] = '\0';
    return (long)n;
}

static int run_queue_now(void)
{
    char buf[8192];
    if (read_small("/proc/stat", buf, sizeof buf) < 0)
        return -1;
    const char *p = strstr(buf, "\nprocs_running ");
    return p ? atoi(p + 15) : -1;
}

void er_cpu_mark_now(er_cpu_mark *m)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    *m = (er_cpu_mark){.wall_ns = (long long)t.tv_sec * 1000000000LL + t.tv_nsec,
                       .run_queue = run_queue_now()};
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return;
    int seen = 0, bad = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char path[64], buf[128];
        unsigned long long run = 0, wait = 0;
        snprintf(path, sizeof path, "/proc/self/task/%.20s/schedstat", e->d_name);
        /* a thread that ended since readdir is simply not counted */
        if (read_small(path, buf, sizeof buf) < 0)
            continue;
        if (sscanf(buf, "%llu %llu", &run, &wait) != 2) {
            bad = 1;
            continue;
        }
        m->run_ns += run;
        m->wait_ns += wait;
        seen++;
    }
    closedir(d);
    /* (a kernel without schedstat accounting reads zeros: the difference
     * of two marks is then 0 of 0, nothing known; a thread's counters are
     * brought up to date at a tick or a switch, so a child that has just
     * started may read 0 too, and that is a true start) */
    m->known = seen > 0 && !bad;
}

er_cpu_load er_cpu_load_between(const er_cpu_mark *a, const er_cpu_mark *b)
{
    er_cpu_load l = {.wait_share = NAN, .cpu_per_wall = NAN, .wait_per_wall = NAN,
                     .run_queue = -1};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    l.cpus = cpus > 0 ? (int)cpus : 0;
    l.run_queue = a->run_queue > b->run_queue ? a->run_queue : b->run_queue;
    /* sums over the threads alive at each mark: one that started between
     * them counts from zero, which is its whole time; counters never go
     * back, so a smaller sum means a thread ended and the pair says nothing */
    if (!a->known || !b->known || b->run_ns < a->run_ns || b->wait_ns < a->wait_ns)
        return l;
    double run = (double)(b->run_ns - a->run_ns), wait = (double)(b->wait_ns - a->wait_ns);
    double wall = (double)(b->wall_ns - a->wall_ns);
    if (run + wait > 0.0)
        l.wait_share = wait / (run + wait);
    if (wall > 0.0) {
        l.cpu_per_wall = run / wall;
        l.wait_per_wall = wait / wall;
    }
    return l;
}

/*
 * The rule. Waiting: ER_CONTENDED_WAIT, a fifth of the threads' time.
 * First contacts on a fresh cache, AMD EPYC (Zen 3) host, 2 CPUs, pool of
 * 2 threads (the caller and one worker), shares measured by this file:
 *   quiet machine                 avx2-w4a16 0.7-11.6% (13 contacts),
 *                                 ref-w4a16 0-10.3%
 *   one busy loop beside it       avx2-w4a16 26-43%, ref-w4a16 9-38%
 *   a busy loop per CPU           avx2-w4a16 47-53%, ref-w4a16 24-53%
 * What a quiet machine shows (up to an eighth: the host's own tasks, the
 * parent polling for the child) stays under the bar; one busy loop beside
 * two measuring threads (three runnable on two CPUs) takes each a third
 * of a CPU's time when it lands on a busy CPU, and slowed the decode
 * figure by ~15% (21.8-27.8 tok/s against 26.7-31.7 quiet) and prefill by
 * up to half: above it. A single-threaded kernel beside one busy loop
 * often keeps a CPU to itself (ref-w4a16's 9-15%), and its figure did not
 * move (0.66-0.98 tok/s against 0.68-0.88): under it, as it should be.
 * CPU time against wall time (1.33-1.39 quiet for avx2-w4a16, 0.70-1.09
 * loaded) moves too, but with what the kernel leaves its worker to do.
 * The wait must also be a fifth of the wall time (one thread kept waiting
 * a fifth of the measurement, on average): a plugin that sleeps 200 ms in
 * each call (a test's) ran a few milliseconds in all, and the wake-ups
 * after its sleeps made a share of 23% on a quiet machine, a thousandth of
 * the wall time; the busy loops above kept the avx2-w4a16 threads waiting
 * 0.35-0.75 of it.
 *
 * Reading: a third of the quiet read. Memory bandwidth moves with the
 * neighbours of a shared host (35-90 GB/s seen on one), and the quick
 * figure is scaled to the read beside it for that (sandbox_measure.c);
 * a read under a third of the quiet one is beyond what neighbours did
 * there, and a crowd of first contacts read 4.1 GB/s where 45-80 is usual.
 */
int er_contended(const er_cpu_load *load, double read_gbs, double quiet_gbs, char *why,
                 size_t len)
{
    if (len)
        why[0] = '\0';
    char queue[64] = "";
    if (load && load->run_queue >= 0 && load->cpus > 0)
        snprintf(queue, sizeof queue, " (run queue %d on %d CPU%s)", load->run_queue,
                 load->cpus, load->cpus == 1 ? "" : "s");
    if (load && load->wait_share >= ER_CONTENDED_WAIT &&
        !(load->wait_per_wall < ER_CONTENDED_WAIT)) {
        snprintf(why, len, "its threads waited for a CPU %.0f%% of the time%s",
                 100.0 * load->wait_share, queue);
        return 1;
    }
    if (read_gbs > 0.0 && quiet_gbs > 0.0 && read_gbs < ER_CONTENDED_READ * quiet_gbs) {
        snprintf(why, len, "it read memory at %.1f GB/s, under a third of this device's "
                 "quiet %.1f GB/s%s", read_gbs, quiet_gbs, queue);
        return 1;
    }
    return 0;
}

int er_contention_ignored(const char *v)
{
    if (!v || !v[0] || strcmp(v, "judge") == 0)
        return 0;
    return strcmp(v, "ignore") == 0 ? 1 : -1;
}
