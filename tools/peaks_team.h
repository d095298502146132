/*
 * tools/peaks_team.h — the peaks' own fork/join (tools/peaks.c says why
 * they do not run on the handle's pool): equal shares started together.
 * Internal to tools/peaks.c and tools/peaks_bw.c.
 */
#ifndef EDGERT_TOOLS_PEAKS_TEAM_H
#define EDGERT_TOOLS_PEAKS_TEAM_H

#include <pthread.h>

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

/** Start up to n - 1 member threads (the caller is member 0). 0, or -1
 *  with nothing left running. */
int team_start(team *t, unsigned n);
/** Run fn on every member; returns the wall time in seconds. */
double team_run(team *t, team_fn fn, void *arg);
/** Stop and join the members. */
void team_stop(team *t);

#endif
