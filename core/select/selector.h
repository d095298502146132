/*
 * core/select/selector.h — the figures the selector compares (selector_figures.c),
 * shared with the ranking (selector.c) and its account of each rank
 * (reasons.c). Private to the core.
 */
#ifndef EDGERT_CORE_SELECTOR_H
#define EDGERT_CORE_SELECTOR_H

#include "context/context.h"

/* The tiers (er_sel_tier), and where measured decode rates come from in
 * each (er_sel_decode_source). */
#define TIERS 3
typedef enum er_src_kind { SRC_DECLARED, SRC_CALIBRATE, SRC_FIRST_CONTACT, SRC_MIXED } er_src_kind;
/* A tier's decode source, and the read rate its first-contact figures are
 * compared at (NaN: as measured; selector_figures.c, with_read). */
typedef struct decode_src {
    er_src_kind kind;
    double read_gbs;
} decode_src;

/* 0 accelerator backend on its device class, 1 CPU, 2 reference. */
int er_sel_tier(const struct edgert_ctx *ctx, const er_cand *c);
/* Where tier t's measured decode rates come from, and their read rate. */
decode_src er_sel_decode_source(const struct edgert_ctx *ctx, int t);
const char *er_sel_decode_source_name(decode_src src);
int er_sel_has_calibrated_decode(const er_cand *c);
/* Whether the decode rate compared under `src` is first contact's. */
int er_sel_by_first_contact(const er_cand *c, decode_src src);
/* The measured decode rate compared under `src`, NaN when none. */
double er_sel_decode_measured(const er_cand *c, decode_src src);
/* Its range: 1 with [*lo, *hi] when it has one around it, else 0. */
int er_sel_measured_range(const er_cand *c, decode_src src, double *lo, double *hi);
/* Speed evidence: 3 measured here, 2 declared and verified, 1 declared, 0
 * none; and the figure (measured, else declared, else 0; *measured set). */
int er_sel_speed_class(const er_cand *c, decode_src src);
double er_sel_speed_of(const er_cand *c, decode_src src, int *measured);
/* Prefill that goes with the decode compared under `src`: measured here
 * (NaN when none); its class 2/1/0 as speed's; the figure (else -1). */
double er_sel_prefill_measured(const er_cand *c, decode_src src);
int er_sel_prefill_class(const er_cand *c, decode_src src);
double er_sel_prefill_of(const er_cand *c, decode_src src);
/* Top-1 agreement (measured, else declared, else -1; *measured set) and
 * mean KL (measured, else declared, else infinity). */
double er_sel_top1_of(const er_cand *c, int *measured);
double er_sel_kl_of(const er_cand *c);

/* A ranking (edgert_select), read by the accessors and edgert_selection_reason. */
struct edgert_selection {
    edgert_priority priority;
    size_t count;        /* ranked (eligible) candidates */
    size_t *order;       /* candidate indices, best first */
    int *rank;           /* per candidate index; -1 when not ranked */
    int *group;          /* per candidate index: decode group (speed) or fidelity group
                            (fidelity); -1 when not ranked */
    size_t ncands;
    int selected;        /* candidate index or -1 */
    const char *evidence;
    decode_src src[TIERS]; /* per tier: edgert_selection_decode_source */
    const struct edgert_ctx *ctx; /* the handle ranked; it outlives the selection */
    const edgert_candidate *sel;
};

/* The selection's order of candidates ia and ib (negative: ia first),
 * with the groups when `grouped`, else by the keys alone (the first pass);
 * *why (may be NULL) the key that told them apart. */
int er_sel_compare(const edgert_selection *s, size_t ia, size_t ib, int grouped,
                   edgert_decider *why);

#endif
