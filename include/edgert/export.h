/*
 * edgert/export.h — the export contract: what an export-only backend
 * (EDGERT_CAP_EXPORT, plugin.h's export_graph) is handed and must leave
 * behind, so that a second export backend (another NPU vendor's format) can
 * be written against it and driven by `edgert export` and edgert_export()
 * unchanged. npu-export (ONNX QDQ for phone NPUs) is the first.
 *
 * ---- The request -------------------------------------------------------------
 * A NUL-terminated text, one `key=value` per line: a trailing '\r' and empty
 * lines are ignored; a line without '=', an unknown key, a key given twice
 * or a value the key does not accept is EDGERT_E_USAGE with a message that
 * names the key and what it accepts. The keys below are common to every
 * export backend (`edgert export` fills them from its options); a backend
 * may accept keys of its own (npu-export: head=NAME) and documents them in
 * its header. A key the caller does not send takes the backend's default.
 *
 * ---- What the backend writes ----------------------------------------------------
 * Only into out_dir (created, empty, by the host; the host renames it into
 * place only when export_graph returns EDGERT_OK, so a failure leaves
 * nothing behind whatever the backend had written). Among its files, a
 * report EDGERT_EXPORT_REPORT_FILE: a JSON object with the member
 * EDGERT_EXPORT_REPORT_MARKER set to 1 (the host recognises an earlier
 * export by it, and replaces only such a folder), the figures the backend
 * measured, and labels that say what each figure was measured on.
 *
 * ---- What its status means ------------------------------------------------------
 *   EDGERT_OK             out_dir holds the complete artifact and its report
 *   EDGERT_E_USAGE        the request is malformed (see above)
 *   EDGERT_E_PARSE        an input file is bad: malformed, non-finite values,
 *                         a tensor of the wrong type or shape, calibration
 *                         samples with nothing to calibrate (exit code 4)
 *   EDGERT_E_UNSUPPORTED  refused: the backend will not export this (a scheme
 *                         the device cannot run faithfully), with the measured
 *                         reason in err, unless force=1 (exit code 1)
 *   EDGERT_E_IO / _NOMEM  writing the artifact / memory failed (exit code 1)
 */
#ifndef EDGERT_EXPORT_H
#define EDGERT_EXPORT_H

#include "edgert/edgert.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- request keys every export backend accepts ---- */
/** Dense weights, safetensors: tensors "<proj>.weight" [N][K]. Required. */
#define EDGERT_EXPORT_KEY_WEIGHTS "weights"
/** Calibration samples, safetensors: "<proj>.x" [T][K], the same T for all.
 *  Required. */
#define EDGERT_EXPORT_KEY_CALIBRATION "calibration"
/** The quantization scheme to export (backend-defined names, e.g. w8a16). */
#define EDGERT_EXPORT_KEY_SCHEME "scheme"
/** How activation ranges are calibrated (backend-defined, e.g. minmax,
 *  margin:F, percentile:P). */
#define EDGERT_EXPORT_KEY_RANGES "ranges"
/** 0 or 1: export what the backend refuses anyway, with a warning. */
#define EDGERT_EXPORT_KEY_FORCE "force"
/** 0 or 1: also write golden inputs and outputs to check a runtime against. */
#define EDGERT_EXPORT_KEY_GOLDEN "golden"
/** Rows (tokens) per call of the exported graph, whose shapes are static:
 *  a prefill chunk, or 1 for a decode graph; independent of how many
 *  calibration samples there are. */
#define EDGERT_EXPORT_KEY_ROWS "rows"

/* ---- what every export leaves in out_dir ---- */
/** The report file, a JSON object. */
#define EDGERT_EXPORT_REPORT_FILE "report.json"
/** The member of the report, set to 1, that marks an edgert export. */
#define EDGERT_EXPORT_REPORT_MARKER "edgert_export_report"

/* ---- the call ---- */
/**
 * Run an export-only backend (EDGERT_CAP_EXPORT, e.g. npu-export): the plugin
 * writes its artifact into the existing directory `out_dir`; `request` is the
 * plugin's key=value list, one per line (see the plugin's header comment).
 * The backend must be eligible for the handle's device (live, or the profiled
 * device in plan mode). The export runs on THIS host, so in plan mode the core
 * loads the plugin on demand, with the gates plan mode skipped: library file,
 * checksum, dlopen, ABI, init, self-test (same reason codes; on failure they
 * are added to the candidate, which becomes ineligible). A plugin without the
 * capability is EDGERT_E_UNSUPPORTED, the error saying
 * MISSING_CAPABILITY(export); the candidate keeps its verdict (its GEMM
 * stays eligible).
 */
EDGERT_API edgert_status edgert_export(edgert_ctx *ctx, const char *backend, const char *out_dir,
                                       const char *request, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif /* EDGERT_EXPORT_H */
