/*
 * tools/workload.h — the shapes a bench or verify run uses: the built-in
 * spark-1.7b (architecture.md, Reference workload) or a YAML file.
 */
#ifndef EDGERT_TOOLS_WORKLOAD_H
#define EDGERT_TOOLS_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#define WL_MAX_SHAPES 64

typedef struct wl_shape {
    char name[64];
    uint32_t k, n, count; /* W[n][k], `count` times per decode step */
    int head;             /* output head: once per step in decode, M = 1 in prefill */
} wl_shape;

struct edgert_checkpoint;

typedef struct workload {
    char name[128];
    size_t nshapes;
    wl_shape shapes[WL_MAX_SHAPES];
    /* --weights FILE: the checkpoint the shapes came from, and for shape s
     * the checkpoint's index of each of its `count` layers (else NULL). */
    struct edgert_checkpoint *ck;
    uint32_t *layers[WL_MAX_SHAPES];
} workload;

/** The built-in spark-1.7b: 28 layers of qkv, o, gate_up, down + lm_head
 *  (core/common/workload.c, the one definition first contact shares). */
void wl_builtin(workload *w);
/** Load a workload file through the core's YAML layer: every error as a
 *  "file:line:col: message" line on stderr (warnings too, unless quiet) and
 *  -1 when there is one. Format:
 *    name: my-model
 *    shapes:
 *      - {name: qkv, k: 2048, n: 3072, count: 28}
 *      - {name: lm_head, k: 2048, n: 131072, count: 1, head: true}   */
int wl_load(const char *path, workload *w, int quiet);
/** The shapes of a checkpoint's linear layers (--weights FILE): layers of
 *  the same role ("self_attn.q_proj": the name after its layer number) and
 *  shape form one shape; a name with "lm_head" is the head. Prints the
 *  error and returns -1 (bad file: exit 4). */
int wl_from_checkpoint(const char *path, workload *w);
/** Close what wl_from_checkpoint opened (any workload may be passed). */
void wl_free(workload *w);
/** Weights per decode step (sum of n*k*count). */
uint64_t wl_weights(const workload *w);

#endif
