/*
 * tools/cli.h — what the `edgert` subcommands share: parsed options and the
 * printers for device facts, candidates and diagnostics (text and JSON).
 */
#ifndef EDGERT_TOOLS_CLI_H
#define EDGERT_TOOLS_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "edgert/edgert.h"
#include "json.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_NONE = 3, EXIT_BADFILE = 4 };

#define MAX_PATHS 64

typedef enum { PHASE_BOTH = 0, PHASE_DECODE = 1, PHASE_PREFILL = 2 } bench_phase;

/** Every option of every subcommand; each command accepts its own subset. */
typedef struct cli {
    const char *cmd;
    int json, explain, strict, verbose, quiet, no_evidence, quick;
    int profile;              /**< probe --profile: the facts as a device profile */
    const char *sysroot, *device, *disable, *backend, *priority_s;
    const char *paths[MAX_PATHS];
    size_t npaths;
    unsigned threads;
    edgert_priority priority;
    /* bench / verify / calibrate */
    const char *workload;     /**< --workload FILE.yaml, NULL = spark-1.7b */
    const char *options;      /**< --options STR, passed to the plugin's init */
    const char *versus;       /**< bench --versus NAME: decode steps paired with this one's */
    const char *versus_options; /**< bench --versus-options STR: options for --versus */
    unsigned versus_group;      /**< bench --versus-group N: --versus's group (0: --group's) */
    const char *versus_weights; /**< bench --versus-weights FILE: --versus's own --weights */
    const char *out;          /**< --out FILE (calibrate) */
    const char *evidence;     /**< --evidence FILE: read evidence from here */
    bench_phase phase;
    unsigned m;               /**< prefill rows (default 512) */
    unsigned repeat;          /**< 0 = the command's default */
    unsigned tokens;          /**< verify: tokens for top-1/KL (default 64) */
    uint64_t seed;
    /* export */
    const char *weights, *calibration; /**< --weights / --calibration FILE.safetensors */
    const char *scheme, *ranges;       /**< passed to the plugin's request */
    int force, golden;
    int calls;     /**< bench --calls: decode as edgert_gemm calls, not edgert_step */
    int paired_read; /**< bench --paired-read: a step read after each decode step */
    unsigned read_mib; /**< bench --read-mib N: the read ceiling's buffer (0: 1024 MiB) */
    unsigned rows; /**< --rows N: the exported graph's rows per call, 0 = the backend's */
    /* pack, run */
    const char *input; /**< the one positional argument: the checkpoint (pack), the model
                            folder (run) */
    /* run */
    const char *prompt_ids;   /**< --prompt-ids FILE|LIST */
    const char *prompts;      /**< --prompts FILE (--compare) */
    unsigned max_new;         /**< --max-new-tokens N (default 32) */
    int compare;              /**< --compare */
    int store;                /**< run --compare --store: its fidelity as evidence */
    const char *compare_list; /**< --compare's backends (the positional after MODEL) */
    const char *reference;    /**< --reference DIR: --compare's fp32 reference model */
    unsigned group, context;  /**< --group N, --context N (0: the runner's defaults) */
    unsigned kv_cache_bits;   /**< run --kv-cache f16|f32: 16 or 32 (0: the runner's default) */
    const char *packed;       /**< --packed FILE */
    int ignore_eos;           /**< --ignore-eos */
    const char *logits;       /**< --logits FILE */
    unsigned paired;          /**< --paired N */
    int backend_from_env;      /**< `backend` is EDGERT_BACKEND's, not --backend's */
    char disable_list[4096];   /**< every --disable, joined with commas */
} cli;

/* ---- text from outside the program (cli_common.c) ----
 * printf for the CLI's text output: every %s argument is written through
 * put_text, so a string from a manifest, a plugin, a sysroot file, a file
 * name or the library's messages cannot make the terminal act (no escape
 * sequence reaches it raw). tfprintf_lines keeps newlines and tabs in its
 * arguments, for the library's multi-line messages. */
void tprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tfprintf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tfprintf_lines(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** The last error line these printed to stderr ("" when none): what --json
 *  reports when a command fails before its document (json_failed). */
const char *tprint_last_error(void);
/** len bytes of s with what a terminal acts on shown as escapes: C0 controls
 *  (newline and tab kept when keep_lines) as \n \t \r \xHH, DEL, C1 controls,
 *  line separators and bidi controls as \xHH / \uHHHH, and bytes that are
 *  not UTF-8 as \xHH. Everything else, valid UTF-8 included, as it is. */
void put_text(FILE *f, const char *s, size_t len, int keep_lines);

/* ---- text wrapped to the terminal (tprint.c) ----
 * Between wrap_begin and wrap_end, what is written to stdout (file
 * descriptor 1) is kept aside, then written wrapped at wrap_width()
 * columns: every line broken at spaces, continuations indented 4 past the
 * line's own indent. Nothing changes when the width is 0 (stdout not a
 * terminal: scripts read the lines whole) or no temporary file can be
 * made. */
typedef struct wrap_capture {
    int width, saved;
    FILE *file;
} wrap_capture;
int wrap_width(void);
int wrap_begin(wrap_capture *w);
void wrap_end(wrap_capture *w);
void wrap_text(FILE *f, const char *text, size_t len, int width);

/* ---- --json (cli_common.c) ----
 * json_keep_stdout, called once before any plugin is loaded when --json is
 * given, keeps the original stdout for the JSON document alone and points
 * file descriptor 1 (and so stdout) at stderr for the rest of the process:
 * whatever else is written to stdout, a plugin's output included, lands on
 * stderr. 0, or -1 when it could not (stdout is then used as it is).
 * json_out is the stream every JSON document is written to. */
int json_keep_stdout(void);
FILE *json_out(void);

void flags_text(uint64_t mask, char *buf, size_t len);
void json_flags(json_w *w, const char *key, uint64_t mask);
void json_device(json_w *w, const edgert_device *d);
void print_device(const edgert_device *d);
/** The device facts as a device profile (docs/device-profile.md), to f.
 *  Returns how many required facts the probe could not tell (left out, with
 *  a comment saying so: the profile then needs them written in). */
int print_profile(FILE *f, const edgert_device *d);
/** Read a profile's text back through the core's own profile loader: 0 when
 *  --device would take it, else -1 with the loader's errors in why; -2 when
 *  no scratch folder could be made to check it (why says so). */
int profile_check(const char *text, char *why, size_t why_len);
void json_figures(json_w *w, const char *key, const edgert_figures *f);
void json_layout(json_w *w, const edgert_candidate *c);
/** One candidate; with sel (and rank >= 0, 0-based) also what that selection
 *  compared for it (decode group, source and rate). */
void json_candidate(json_w *w, const edgert_candidate *c, const edgert_selection *sel, int rank);
void json_diags(json_w *w, const edgert_ctx *ctx);
void json_search_paths(json_w *w, const edgert_ctx *ctx);
void print_diags(const edgert_ctx *ctx, FILE *f, int max_level);
/** Append item to the NUL-terminated text in buf[len], after sep unless buf
 *  is empty; cut at the end of buf. */
void text_append(char *buf, size_t len, const char *sep, const char *item);
void reasons_text(const edgert_candidate *c, char *buf, size_t len);
const char *layout_text(const edgert_candidate *c, char *buf, size_t len);
void warn_diags(const cli *c, const edgert_ctx *ctx);
/** `select --explain` (tools/explain.c): the headline, the device, one
 *  verdict per manifest and the selector's account of every rank; short
 *  unless c->explain > 1 (--explain=full). */
void explain(const cli *c, edgert_ctx *ctx, const edgert_selection *sel);
/** warn_diags for the diagnostics from index `from` on: those that loading on
 *  demand (select, pack, export) added after the first call. Returns the
 *  count, the next call's `from`. With --json they are set aside for the
 *  document instead (json_said_diags). */
size_t warn_diags_since(const cli *c, const edgert_ctx *ctx, size_t from);
/* --json: {"error": err, "status": name of st, "exit_code": rc,
 * "diagnostics"} on stdout, for a command that fails before it has a
 * result. */
void json_error_object(const char *err, edgert_status st, int rc);
/* --json: when a command ends with exit code rc != 0 and wrote no document,
 * the error object from its last error line on stderr: "error", "status"
 * (E_USAGE for exit code 2, else what cli_fail_status said, else
 * "failed"), "exit_code", "diagnostics" ("ok": false too for export, whose
 * result object has it). Returns rc. */
int json_failed(int rc);
/* The status json_failed reports: the edgert_status of the failure that
 * ends the command, where it has one. */
void cli_fail_status(edgert_status st);
/* Make the exit status 1 when stdout's output (or --json's document) did
 * not all reach it (a full disk, /dev/full): called once, first thing. */
void cli_check_output_at_exit(void);
/* What cli_fail_status said last, or NULL. */
const char *cli_failed_status(void);
/* The command json_failed writes for. */
void json_command(const char *cmd);
/* --json: "diagnostics", what warn_diags_since set aside instead of
 * printing (warnings and errors, -q or not), as probe, list and select's
 * json_diags give them. Every command's document has it. */
void json_said_diags(json_w *w);
/* One diagnostic for json_said_diags (a file the CLI reads itself: a
 * workload). */
void cli_said(const edgert_diag *d);
/* Whether argv (a command with its own argument loop: checksum, quantize)
 * has --json before any "--", so that a usage error met before the loop
 * reaches it still gets the JSON error object. */
int json_asked(int argc, char **argv);
/* An input file named explicitly (exit 4 when it cannot be taken): 0 when
 * `path` is a regular file this process can read; else -1 with
 * "[opt ]path: cannot read: why" in msg (why: strerror, or "not a regular
 * file"). Prints nothing. */
int input_file_check(const char *opt, const char *path, char *msg, size_t msg_len);

/** Bounded formatting into an error buffer. */

/** Open a handle from the parsed options; prints the error and returns an
 *  exit code (0 on success). */
int open_ctx(const cli *c, edgert_ctx **ctx);
/* The same, also keeping the error (when msg is not NULL) for a --json object,
 * and the edgert_status name of a failure in *status (when not NULL). */
int open_ctx_msg(const cli *c, edgert_ctx **ctx, char *msg, size_t msg_len,
                 const char **status);

/** The start of each command that measures this machine (bench, verify,
 *  calibrate): the workload (--workload FILE or the built-in), a live
 *  handle (a --device plan is refused: `runs` says what `cmd` does on this
 *  machine), then the handle's diagnostics as warnings. Returns an exit
 *  code, 0 on success (then the caller closes *ctx). */
struct workload;
int open_measuring(const cli *c, const char *cmd, const char *runs, struct workload *w,
                   edgert_ctx **ctx);

/* Subcommands living in their own files. */
int cmd_bench(const cli *c);
int cmd_verify(const cli *c);
int cmd_calibrate(const cli *c);
int cmd_export(const cli *c);
int cmd_pack(const cli *c);
int cmd_run(const cli *c);
int cmd_checksum(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
void export_help(FILE *f);
void pack_help(FILE *f);
void run_help(FILE *f);

#endif
