/*
 * edgert/evidence.h — figures measured on this device, stored for the
 * selector to rank by, and the checksums that tie them to a plugin file.
 * Included by edgert/edgert.h; include either.
 */
#ifndef EDGERT_EVIDENCE_API_H
#define EDGERT_EVIDENCE_API_H

#include "edgert/edgert.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- evidence: figures measured on this device -------------------------- */

/** One backend's measured figures (NaN where not measured). */
typedef struct edgert_evidence {
    uint32_t struct_size;       /**< sizeof(edgert_evidence) */
    const char *backend;        /**< candidate name; its library's XXH3 is recorded */
    double decode_tokens_per_s; /**< GEMM-only decode step rate on `workload` */
    double prefill_gflops;
    double top1_agreement;      /**< vs dense fp32, output-head projection */
    double kl_mean;
    double sqnr_min_db;         /**< worst workload shape */
    unsigned threads;
    const char *workload;       /**< e.g. "spark-1.7b" */
    int correct;                /**< 1 passed verify, 0 failed (then the backend is
                                     not eligible: FAILED_VERIFY), -1 not checked */
    /* ---- version 1 ends here (EDGERT_EVIDENCE_V1_SIZE) ---- */
    /* ---- version 2 (edgert 0.1.0), to EDGERT_EVIDENCE_V2_SIZE ---- */
    /** The slowest and fastest round of the decode rate's median: the range
     *  the selector compares (edgert_candidate.measured_decode_min). Kept
     *  only when 0 <= min <= decode_tokens_per_s <= max (zeros from an
     *  initializer that leaves them out are no range); read only when
     *  struct_size covers them. */
    double decode_tokens_per_s_min, decode_tokens_per_s_max;
    /* ---- version 3 (edgert 0.1.0), to EDGERT_EVIDENCE_V3_SIZE ---- */
    /** The tokens top1_agreement was counted over (0: not known, then it is
     *  compared as an exact value): what tells a difference of top-1 from
     *  sampling noise (edgert_selection_fidelity_group). Read only when
     *  struct_size covers it. */
    unsigned top1_tokens;
    /* ---- version 4 (edgert 0.1.0), to EDGERT_EVIDENCE_V4_SIZE: both fields ---- */
    /** 1: what this item leaves unmeasured (a NaN figure, top1_tokens 0,
     *  `correct` -1) keeps what the file holds for the same device, backend
     *  and plugin file, so figures measured apart make one entry:
     *  `edgert run --compare --store`'s fidelity beside `edgert calibrate`'s
     *  rates. A decode rate kept keeps its range, series, threads, workload
     *  and time. 0: the entry is replaced whole. Read only when struct_size
     *  covers it. */
    int keep_unmeasured;
    /** What top1_agreement and kl_mean were measured on when not `workload`'s
     *  verify, as a reader would want it named ("model /models/smollm2,
     *  12 prompts x 64 tokens, against its fp32 reference"); NULL: verify's.
     *  Given back as edgert_candidate.measured_fidelity_source. Read only
     *  when struct_size covers it. */
    const char *fidelity_source;
    /* ---- version 5 (edgert 0.1.0), to EDGERT_EVIDENCE_V5_SIZE ---- */
    /** Decode rounds measured and set aside because they ran under
     *  contention (other load took the CPUs: `edgert calibrate` repeats such
     *  a round, up to a bound), 0 when none; kept with the decode rate it
     *  goes with and given back as edgert_candidate.measured_rounds_repeated.
     *  Read only when struct_size covers it. */
    unsigned decode_rounds_repeated;
} edgert_evidence;

/** Size of edgert_evidence in its first version: the least struct_size
 *  accepted. Set struct_size to sizeof(edgert_evidence), not to this: an
 *  array passed to edgert_evidence_store is walked with its elements' own
 *  struct_size as the stride (so a caller built against an older header
 *  still works), and this size is not a stride (version 1's sizeof has tail
 *  padding), so more than one item with it is refused. */
#define EDGERT_EVIDENCE_V1_SIZE (offsetof(edgert_evidence, correct) + sizeof(int))
/** Through decode_tokens_per_s_max: the decode rate's range is read. */
#define EDGERT_EVIDENCE_V2_SIZE                                                                \
    (offsetof(edgert_evidence, decode_tokens_per_s_max) + sizeof(double))
/** Through top1_tokens. */
#define EDGERT_EVIDENCE_V3_SIZE (offsetof(edgert_evidence, top1_tokens) + sizeof(unsigned))
/** Through fidelity_source: keep_unmeasured and fidelity_source are read. */
#define EDGERT_EVIDENCE_V4_SIZE (offsetof(edgert_evidence, fidelity_source) + sizeof(const char *))
/** Through decode_rounds_repeated. */
#define EDGERT_EVIDENCE_V5_SIZE                                                                \
    (offsetof(edgert_evidence, decode_rounds_repeated) + sizeof(unsigned))

/**
 * The evidence file this handle reads and, by default, writes:
 * options.evidence_file, else $XDG_CACHE_HOME/edgert/evidence.json, else
 * $HOME/.cache/edgert/evidence.json. NULL when none can be named.
 */
EDGERT_API const char *edgert_evidence_path(const edgert_ctx *ctx);
/** Hex XXH3-64 of the device facts evidence is keyed by (arch, class, CPU
 *  flags, OS-disabled flags, cores, name, total memory in GiB). */
EDGERT_API const char *edgert_device_fingerprint(const edgert_ctx *ctx);
/**
 * Merge `items` for this device into the evidence file (`path`, or
 * edgert_evidence_path when NULL): entries for the same device and backend
 * are replaced (whole, unless the item's keep_unmeasured keeps what it
 * leaves unmeasured), others kept. Each entry records the backend's library XXH3,
 * so evidence for a changed plugin file is ignored when read. The items of
 * one call are one *series* (edgert_candidate.measured_series): the
 * selector compares a tier by calibrated decode rates only when they are
 * one series, so store figures measured together (interleaved, in the same
 * windows) in one call, as `edgert calibrate` does. Written to a
 * temporary file in the same folder, then renamed, all under an exclusive
 * lock on <path>.lock (created and kept): an interrupted write never leaves
 * a corrupt file, and two stores at once (two handles, two processes) each
 * keep the other's entries. An existing file that is corrupt is moved aside
 * (<path>.corrupt-<UTC time>, never over another file) with a warning naming
 * both paths, and a new file is started; one that cannot be read now (an
 * I/O error) is left as it is and EDGERT_E_IO returned. A failed verify is
 * never dropped silently (figures without a verdict keep it). Missing
 * folders of `path` are created (mode 0700).
 * Nothing is written, and EDGERT_E_USAGE says which item and field, when an
 * item's figures are outside their meaning: a rate (decode_tokens_per_s,
 * prefill_gflops) <= 0 or infinite, top1_agreement outside [0, 1], kl_mean
 * < 0, sqnr_min_db -inf (+inf: exact output), `correct` other than 1, 0 or
 * -1, keep_unmeasured other than 0 or 1 (NaN is always "not measured");
 * when two items name one backend; when
 * struct_size is below version 1's, or is no stride (not a multiple of the
 * struct's alignment) for more than one item. A `path` that is not a
 * regular file (a folder) is EDGERT_E_IO, and left as it is.
 * Live mode only (plan-mode handles describe another device).
 */
EDGERT_API edgert_status edgert_evidence_store(edgert_ctx *ctx, const char *path,
                                               const edgert_evidence *items, size_t count,
                                               char *err, size_t err_len);

/* --- integrity ------------------------------------------------------------ */

/** Bytes of "xxh3-64:" + 16 hex digits + NUL. */
#define EDGERT_CHECKSUM_LEN 25u

/** The checksum a manifest's `checksum` field expects for `path`:
 *  "xxh3-64:<16 lowercase hex digits>" into out (at least
 *  EDGERT_CHECKSUM_LEN bytes). EDGERT_E_IO when the file cannot be read. */
EDGERT_API edgert_status edgert_checksum_file(const char *path, char *out, size_t out_len,
                                              char *err, size_t err_len);
/**
 * Write the checksum of a manifest's library into its `checksum` field: the
 * value is replaced in place, or a `checksum:` line is added after `library`;
 * the rest of the file (comments, order) is kept. The manifest is validated
 * before and after; the new file replaces the old one atomically, and a
 * failure leaves it untouched. A manifest that is a symlink stays one: the
 * file it names is stamped. The checksum written goes to checksum_out
 * (NULL, or EDGERT_CHECKSUM_LEN bytes at least). EDGERT_E_PARSE for a bad
 * manifest, EDGERT_E_USAGE for one without a library (or a short
 * checksum_out), EDGERT_E_IO when a file cannot be read or written.
 */
EDGERT_API edgert_status edgert_manifest_stamp(const char *manifest, char *checksum_out,
                                               size_t out_len, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif /* EDGERT_EVIDENCE_API_H */
