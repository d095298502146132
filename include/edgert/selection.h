/*
 * edgert/selection.h — ranking the eligible candidates for a priority
 * (edgert_select), and the selector's account of each rank: what put it
 * there and the figures it was compared by (edgert_selection_reason).
 * Included by edgert/edgert.h; include either.
 *
 * Selection order (architecture.md, Selection), applied to eligible candidates only:
 *   1. tier: a backend for the device class's accelerator (manifest
 *      `processor: gpu|npu` on a `cuda_discrete`, `jetson` or `npu_phone`
 *      device) first, then CPU backends, then the reference backend
 *      (manifest `reference: true`), which is always last.
 *   2. priority `speed`:    decode tokens/s (measured on this device, else
 *                           declared by a manifest with verified: true, else
 *                           an unverified claim; unknown counts as 0)
 *                           descending, then the
 *                           cheaper arithmetic (fewer activation bits, fewer
 *                           bits per weight), then fidelity (the key below).
 *                           Measured rates each within the other's rounds
 *                           [min, max] (calibrate's rounds, or first
 *                           contact's calls) cannot be told apart: fastest first,
 *                           each joins the previous one's "decode group" while
 *                           that holds with every member; one without a range
 *                           or of another tier closes it. In a group prefill
 *                           (measured by the same source, else declared, else
 *                           unknown) decides before the medians
 *                           (edgert_selection_decode_group). Measured means
 *                           one source for every backend of a tier: the
 *                           rounds of `edgert calibrate` when each measured
 *                           backend has them for its current build, all from
 *                           one run, else first contact's quick measurement
 *                           for all (edgert_selection_decode_source).
 *      priority `fidelity`: top-1 agreement (measured, else declared; a
 *                           candidate without one sorts after those with one)
 *                           descending, mean KL ascending (same rule), then
 *                           activation bits, weight bits, then the backend
 *                           written for more of this device (3.), speed.
 *                           Top-1 agreements measured here over known token
 *                           counts that differ by no more than two standard
 *                           errors cannot be told apart (at 64 tokens and
 *                           p = 0.77 that is 0.15): they form one "fidelity
 *                           group", as decode groups do, inside which mean KL
 *                           decides (edgert_selection_fidelity_group).
 *   3. at equal evidence, the backend written for more of this device: more
 *      of the CPU flags it requires or uses when present are this device's
 *      (amx-w4a8 before avx512-w4a8, whose decode is the same), then name.
 *   Measured figures count only for this device and the same plugin file
 *   (core/evidence/evidence.c); evidence that a backend failed verify is a gate
 *   (FAILED_VERIFY).
 *   Names compare with strcmp, so the order is total and reproducible.
 */
#ifndef EDGERT_SELECTION_API_H
#define EDGERT_SELECTION_API_H

#include "edgert/edgert.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Rank the eligible candidates for `priority`. With `forced` non-NULL the
 * selection is that backend, or EDGERT_E_NOT_ELIGIBLE / EDGERT_E_NOT_FOUND with
 * the reasons in err. With nothing eligible: EDGERT_E_NOT_ELIGIBLE.
 * *out: with EDGERT_OK, EDGERT_E_NOT_ELIGIBLE and EDGERT_E_NOT_FOUND it is
 * a selection to free (edgert_selection_free) whatever the status, so
 * callers can explain: on the two errors edgert_selection_selected is NULL
 * and the ranks are those of the candidates that are eligible (all -1 when
 * none is). On EDGERT_E_USAGE and EDGERT_E_NOMEM it is NULL.
 */
EDGERT_API edgert_status edgert_select(edgert_ctx *ctx, edgert_priority priority,
                                       const char *forced, edgert_selection **out, char *err,
                                       size_t err_len);
EDGERT_API const edgert_candidate *edgert_selection_selected(const edgert_selection *sel);
EDGERT_API edgert_priority edgert_selection_priority(const edgert_selection *sel);
/** 0-based rank of candidate i (edgert_candidate_at index) or -1 when not ranked. */
EDGERT_API int edgert_selection_rank(const edgert_selection *sel, size_t i);
/** "measured" or "declared": where the winner's own figure for the priority's
 *  first key came from — its decode rate (speed; edgert_selection_decode_source
 *  says by which measurement) or top-1 agreement (fidelity), measured on this
 *  device, or else the manifest's. It does not say which key separated it from the runner-up
 *  (that may be the tier, or a tie-break). "declared" with no_evidence. */
EDGERT_API const char *edgert_selection_evidence(const edgert_selection *sel);
/** Ranked candidate indices, best first. */
EDGERT_API size_t edgert_selection_count(const edgert_selection *sel);
EDGERT_API size_t edgert_selection_index(const edgert_selection *sel, size_t r);
EDGERT_API void edgert_selection_free(edgert_selection *sel);
/** Priority speed: the decode group of rank r (0-based): equal numbers were
 *  measured here by one kind of figure, each within the other's range
 *  (calibrate's rounds, or first contact's calls), so prefill decided between
 *  them (selection order above). -1 past the end or for fidelity. */
EDGERT_API int edgert_selection_decode_group(const edgert_selection *sel, size_t r);
/** Priority fidelity: the fidelity group of rank r (0-based): equal numbers
 *  have top-1 agreements measured here (with their token counts) that differ
 *  pairwise by no more than sampling noise, two standard errors of the
 *  difference, sqrt(p (1 - p) (1/n_a + 1/n_b)) with p pooled, so mean KL
 *  decided between them; a group is consecutive ranks, so a candidate
 *  without a counted top-1 between two closes the first (selection order
 *  above). -1 past the end or for speed. */
EDGERT_API int edgert_selection_fidelity_group(const edgert_selection *sel, size_t r);
/** Where the measured decode rates compared with rank r (0-based) came
 *  from: one source for every candidate of its tier (tiers are never
 *  compared with each other):
 *  "calibrate"     every candidate of the tier measured on this device has
 *                  `edgert calibrate`'s decode rate for its current build,
 *                  all from one evidence series (one calibrate run: the
 *                  same memory-bandwidth windows);
 *  "first-contact" some have only first contact's quick measurement (a
 *                  plugin rebuilt or added since the last calibrate, or
 *                  none calibrated yet), or their calibrated rates come
 *                  from separate runs (then the quick figures may too:
 *                  each was measured when its plugin file was first met,
 *                  and is cached), so every candidate of the tier was
 *                  compared by its quick measurement
 *                  (first_contact_decode_tokens_per_s, at one read rate:
 *                  edgert_selection_decode_read_gbs), never one kind of
 *                  figure against the other;
 *  "mixed"         that was impossible (a calibrated candidate has no quick
 *                  measurement): each by the best figure it has;
 *  "declared"      nothing in the tier was measured here (or no_evidence).
 *  Running `edgert calibrate` again makes it "calibrate". Past the end or
 *  NULL sel: "declared". */
EDGERT_API const char *edgert_selection_decode_source(const edgert_selection *sel, size_t r);
/** The measured decode rate (tokens/s) rank r was compared by, from the
 *  source above (a first-contact figure at its tier's read rate,
 *  edgert_selection_decode_read_gbs, where it has one); NaN when it was
 *  ranked by a declared figure, or past the end. */
EDGERT_API double edgert_selection_decode_rate(const edgert_selection *sel, size_t r);
/** The range around edgert_selection_decode_rate that rank r was grouped by
 *  (calibrate's rounds, or first contact's calls, scaled as the rate is):
 *  1 with [*lo, *hi], else 0 with NaNs (no range, a declared figure, past
 *  the end). Added with first_contact_read_gbs. */
EDGERT_API int edgert_selection_decode_range(const edgert_selection *sel, size_t r, double *lo,
                                             double *hi);
/** The read rate (GB/s) rank r's first-contact figure was compared at: the
 *  median of the reads beside its tier's first contacts
 *  (edgert_candidate.first_contact_read_gbs), its rate and range scaled by
 *  this over its own read; NaN when rank r was not compared by first
 *  contact, or its figure by no read (compared as measured). Added with
 *  first_contact_read_gbs. */
EDGERT_API double edgert_selection_decode_read_gbs(const edgert_selection *sel, size_t r);

/** The key that put a rank below the one above it, in the order the
 *  selection compares them (selection order above). */
typedef enum edgert_decider {
    EDGERT_DECIDER_NONE = 0,           /**< rank 0: nothing above it */
    EDGERT_DECIDER_TIER = 1,           /**< a later tier: accelerator, CPU, reference */
    EDGERT_DECIDER_DECODE = 2,         /**< its decode figure: lower, or of less worth
                                            (measured > verified > declared > none),
                                            and not in the decode group above */
    EDGERT_DECIDER_PREFILL = 3,        /**< in one decode group: its prefill */
    EDGERT_DECIDER_COST = 4,           /**< speed: costlier arithmetic (more activation
                                            bits, then more bits per weight) */
    EDGERT_DECIDER_TOP1 = 5,           /**< its top-1 agreement: lower, or unknown, and
                                            not in the fidelity group above */
    EDGERT_DECIDER_KL = 6,             /**< its mean KL: higher, or unknown */
    EDGERT_DECIDER_BITS = 7,           /**< fidelity: fewer activation, then weight bits */
    EDGERT_DECIDER_SPECIALIZATION = 8, /**< written for fewer of this device's CPU flags */
    EDGERT_DECIDER_NAME = 9,           /**< nothing else told them apart: the name */
} edgert_decider;

/** Why a decode group (speed) ends where it does (edgert_rank_reason.split). */
typedef enum edgert_split {
    EDGERT_SPLIT_NONE = 0,            /**< not the first of a group after one of its tier
                                           and kind of figure (calibrate's rounds or first
                                           contact's calls), or one without a range */
    EDGERT_SPLIT_MEDIAN_OUTSIDE = 1,  /**< its decode rate lies outside split_rank's range */
    EDGERT_SPLIT_RANGE_EXCLUDES = 2,  /**< split_rank's decode rate lies outside its range */
} edgert_split;

/**
 * The selector's account of rank r: what put it there and the figures it
 * was compared by, each with where it came from. The CLI's `select
 * --explain` and --json print it. The library fills it; it grows at its end.
 * Figures: measured on this device when that is what was compared, else
 * declared by the manifest (*_measured 1 or 0), else NaN (-1).
 */
typedef struct edgert_rank_reason {
    size_t struct_size;      /**< in: the bytes the caller has, at least
                                  EDGERT_RANK_REASON_V1_SIZE; out: the bytes this
                                  library wrote (no byte past either) */
    size_t candidate;        /**< its edgert_candidate_at index */
    int tier;                /**< 0 the device class's accelerator, 1 CPU, 2 reference */
    edgert_decider decider;  /**< what put it below rank r - 1 */
    int group;               /**< decode group (speed) or fidelity group (fidelity) */
    size_t group_first;      /**< the first and last rank of its group: r and r when */
    size_t group_last;       /**< it is alone in it */
    double decode;           /**< decode tokens/s compared: edgert_selection_decode_rate */
    int decode_measured;     /**< ... or its manifest's (0) */
    const char *source;      /**< edgert_selection_decode_source */
    int quick;               /**< 1: its measured decode rate is first contact's quick
                                  one (calls), 0: calibrate's (rounds) or none */
    double decode_lo;        /**< the range it was grouped by (rounds or calls, scaled as */
    double decode_hi;        /**< the rate): edgert_selection_decode_range; else NaN */
    double read_gbs;         /**< edgert_selection_decode_read_gbs */
    int calibrated;          /**< 1: it has calibrate's decode rate for its current build
                                  (whether or not that is what it was compared by) */
    const char *series;      /**< then the evidence series (one calibrate run, its UTC
                                  start first) that rate came from, else NULL */
    double prefill;          /**< G(FL)OP/s, measured with its decode rate (same source) */
    int prefill_measured;
    double top1;             /**< top-1 agreement */
    int top1_measured;
    double kl;               /**< mean KL */
    int kl_measured;
    edgert_split split;      /**< speed: why it is not in rank r - 1's decode group */
    size_t split_rank;       /**< the member of that group the test failed against */
} edgert_rank_reason;
#define EDGERT_RANK_REASON_V1_SIZE (offsetof(edgert_rank_reason, split_rank) + sizeof(size_t))

/** Fill *out with rank r's account (0-based). EDGERT_E_USAGE: NULL sel or
 *  out, struct_size below EDGERT_RANK_REASON_V1_SIZE, or r past the end. */
EDGERT_API edgert_status edgert_selection_reason(const edgert_selection *sel, size_t r,
                                                 edgert_rank_reason *out);
/** "none", "tier", "decode", "prefill", "cost", "top1", "kl", "bits",
 *  "specialization", "name"; NULL for a value this library does not know. */
EDGERT_API const char *edgert_decider_name(edgert_decider d);

#ifdef __cplusplus
}
#endif
#endif /* EDGERT_SELECTION_API_H */
