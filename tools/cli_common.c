/*
 * tools/cli_common.c — printers and handle opening shared by the subcommands.
 *
 * Text from outside the program (manifests, plugins, sysroot files, file
 * names, the library's messages) reaches the terminal only through the
 * escaping printers of tprint.c (tprintf / tfprintf / tfprintf_lines). The
 * JSON writer escapes its strings itself (json.c), and with --json it writes
 * to the original stdout while file descriptor 1 points at stderr, so that
 * nothing else (a plugin's printf) can reach the JSON stream.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "cli.h"
#include "workload.h"

/* Indexed by edgert_log_level (1 = error). */
static const char *const lv[] = {"?", "error", "warning", "info", "debug"};

/* ---- --json: stdout carries the JSON document alone --------------------------------- */

static FILE *json_stream; /* the original stdout, once json_keep_stdout ran */

int json_keep_stdout(void)
{
    int fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
        int e = errno;
        if (f)
            fclose(f);
        else if (fd >= 0)
            close(fd);
        errno = e;
        return -1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* now stderr: keep its lines in order */
    json_stream = f;
    return 0;
}

/* At exit: what was written to stdout (and the JSON document's stream) must
 * have reached it. A full disk or /dev/full left a truncated document or an
 * empty profile behind an exit code of 0 (an adversary's walkthrough). A
 * reader that went away (EPIPE, SIGPIPE ignored) is not an error. */
static void output_check(void)
{
    /* errno only from a flush that failed here: an earlier failed write
     * (json_finish flushes) leaves just the error flag, and a stale errno */
    int e = 0;
    errno = 0;
    if (json_stream && (fflush(json_stream) != 0 || ferror(json_stream)))
        e = errno ? errno : EIO;
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout))
        e = errno ? errno : EIO;
    if (e && e != EPIPE) {
        fprintf(stderr, "edgert: the output could not be written: %s\n", strerror(e));
        _exit(EXIT_FAIL);
    }
}

void cli_check_output_at_exit(void)
{
    atexit(output_check);
}

static int json_used; /* something was written as the JSON document */

FILE *json_out(void)
{
    json_used = 1;
    return json_stream ? json_stream : stdout;
}

/* What the JSON document says besides its result: the diagnostics that
 * warn_diags_since set aside rather than print, and the status of the
 * failure that ends the command. The CLI's own: one process, one command. */
typedef struct said_diag {
    int level;
    char *file, *message;
    unsigned line, column;
} said_diag;
static said_diag *said;
static size_t nsaid;
static const char *fail_status;
static const char *json_cmd = "";

void cli_said(const edgert_diag *d)
{
    said_diag *grown = realloc(said, (nsaid + 1u) * sizeof *said);
    if (!grown)
        return; /* the document then says fewer: never a reason to fail */
    said = grown;
    said[nsaid] = (said_diag){(int)d->level, d->file ? strdup(d->file) : NULL,
                              strdup(d->message ? d->message : ""), d->line, d->column};
    nsaid++;
}

void json_said_diags(json_w *w)
{
    json_key(w, "diagnostics");
    json_arr(w);
    for (size_t i = 0; i < nsaid; i++) {
        json_obj(w);
        json_kstr(w, "level", lv[said[i].level]);
        json_kstr(w, "file", said[i].file);
        json_kint(w, "line", said[i].line);
        json_kint(w, "column", said[i].column);
        json_kstr(w, "message", said[i].message);
        json_end_obj(w);
    }
    json_end_arr(w);
}

void cli_fail_status(edgert_status st)
{
    fail_status = edgert_status_name(st);
}

const char *cli_failed_status(void)
{
    return fail_status;
}

void json_command(const char *cmd)
{
    json_cmd = cmd ? cmd : "";
}

int json_failed(int rc)
{
    if (rc == EXIT_OK || json_used)
        return rc;
    json_w w;
    json_init(&w, json_out());
    json_obj(&w);
    if (strcmp(json_cmd, "export") == 0) /* export's result object, on failure too */
        json_kbool(&w, "ok", 0);
    const char *last_error = tprint_last_error();
    json_kstr(&w, "error", last_error[0] ? last_error : "failed");
    /* only a usage error's status is certain from the exit code (3 is also
     * an unknown backend, 4 also a missing file): else the failure's own,
     * where the command said it (cli_fail_status) */
    json_kstr(&w, "status", rc == EXIT_USAGE ? edgert_status_name(EDGERT_E_USAGE)
                            : fail_status    ? fail_status
                                             : "failed");
    json_kint(&w, "exit_code", rc);
    json_said_diags(&w);
    json_end_obj(&w);
    json_finish(&w);
    return rc;
}

/* ---- shared printing ------------------------------------------------------------ */

void flags_text(uint64_t mask, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (unsigned f = 0; f < EDGERT_CPU_FLAG_COUNT; f++)
        if (EDGERT_HAS_FLAG(mask, f) && used + 1 < len) {
            int w = snprintf(buf + used, len - used, "%s%s", used ? " " : "",
                             edgert_cpu_flag_name((edgert_cpu_flag)f));
            if (w > 0)
                used += (size_t)w;
        }
    if (!used)
        snprintf(buf, len, "(none)");
}

void json_flags(json_w *w, const char *key, uint64_t mask)
{
    json_key(w, key);
    json_arr(w);
    for (unsigned f = 0; f < EDGERT_CPU_FLAG_COUNT; f++)
        if (EDGERT_HAS_FLAG(mask, f))
            json_str(w, edgert_cpu_flag_name((edgert_cpu_flag)f));
    json_end_arr(w);
}

void json_device(json_w *w, const edgert_device *d)
{
    json_key(w, "device");
    json_obj(w);
    json_kstr(w, "mode", d->planned ? "plan" : "live");
    json_kstr(w, "source", d->source);
    json_kstr(w, "name", d->name);
    json_kstr(w, "cpu_id", d->cpu_id);
    json_kstr(w, "arch", edgert_arch_name(d->arch));
    json_kstr(w, "class", edgert_device_class_name(d->device_class));
    json_kstr(w, "class_evidence", d->class_evidence);
    json_kstr(w, "accelerator", d->accelerator);
    json_flags(w, "cpu_flags", d->cpu_flags);
    json_flags(w, "cpu_flags_os_disabled", d->cpu_flags_os_disabled);
    json_kint(w, "logical_cores", d->logical_cores);
    json_kint(w, "memory_total_bytes", (long long)d->mem_total_bytes);
    json_kint(w, "memory_available_bytes", (long long)d->mem_available_bytes);
    json_kbool(w, "bf16", d->bf16);
    json_kstr(w, "bf16_source", d->bf16_source);
    json_end_obj(w);
}

void print_device(const edgert_device *d)
{
    char flags[1024], off[512];
    flags_text(d->cpu_flags, flags, sizeof flags);
    flags_text(d->cpu_flags_os_disabled, off, sizeof off);
    tprintf("device: %s (%s)\n", d->name[0] ? d->name : "unnamed",
            d->planned ? "plan from a device profile" : "live probe");
    tprintf("  source        %s\n", d->source);
    if (d->cpu_id[0])
        tprintf("  cpu           %s\n", d->cpu_id);
    tprintf("  arch          %s\n", edgert_arch_name(d->arch));
    tprintf("  class         %s", edgert_device_class_name(d->device_class));
    if (d->class_evidence[0])
        tprintf("  (%s)", d->class_evidence);
    tprintf("\n");
    if (d->accelerator[0])
        tprintf("  accelerator   %s\n", d->accelerator);
    tprintf("  cores         %u logical\n", d->logical_cores);
    if (d->mem_total_bytes)
        tprintf("  memory        %.1f GiB total, %.1f GiB available\n",
                d->mem_total_bytes / 1073741824.0, d->mem_available_bytes / 1073741824.0);
    tprintf("  cpu flags     %s\n", flags);
    tprintf("  OS-disabled   %s\n", off);
    tprintf("  bf16          %s (%s)\n", d->bf16 ? "yes" : "no", d->bf16_source);
}

void json_figures(json_w *w, const char *key, const edgert_figures *f)
{
    json_key(w, key);
    json_obj(w);
    json_knum(w, "decode_tokens_per_s", f->decode_tokens_per_s);
    json_knum(w, "prefill_gflops", f->prefill_gflops);
    json_knum(w, "top1_agreement", f->top1_agreement);
    json_knum(w, "kl_mean", f->kl_mean);
    json_kstr(w, "where", f->where);
    json_end_obj(w);
}

void json_layout(json_w *w, const edgert_candidate *c)
{
    json_key(w, "layout");
    json_obj(w);
    json_kstr(w, "format", c->layout.format);
    json_kint(w, "weight_bits", c->layout.weight_bits);
    json_kint(w, "group_size", c->layout.group_size);
    json_kbool(w, "symmetric", c->layout.symmetric);
    json_kstr(w, "activation_dtype", c->effective_activation_dtype);
    json_kstr(w, "declared_activation_dtype", c->layout.activation_dtype);
    json_kint(w, "activation_bits", c->layout.activation_bits);
    json_knum(w, "bits_per_weight", c->layout.bits_per_weight);
    json_end_obj(w);
}

void json_candidate(json_w *w, const edgert_candidate *c, const edgert_selection *sel, int rank)
{
    /* what the selection compared for it (ranked only): edgert.h */
    const size_t r = rank >= 0 ? (size_t)rank : (size_t)-1;
    const int decode_group = sel && rank >= 0 ? edgert_selection_decode_group(sel, r) : -1;
    const int fidelity_group = sel && rank >= 0 ? edgert_selection_fidelity_group(sel, r) : -1;
    json_obj(w);
    json_kstr(w, "name", c->name);
    json_kstr(w, "version", c->version);
    json_kstr(w, "vendor", c->vendor);
    json_kbool(w, "eligible", c->eligible);
    json_key(w, "reasons");
    json_arr(w);
    for (size_t i = 0; i < c->reason_count; i++)
        json_str(w, c->reasons[i]);
    json_end_arr(w);
    json_kstr(w, "detail", c->detail);
    json_key(w, "rank");
    if (rank >= 0)
        json_int(w, rank + 1);
    else
        json_null(w);
    json_kbool(w, "loaded", c->loaded);
    json_kint(w, "arithmetic_checked", c->arithmetic_checked);
    json_kstr(w, "path_chosen", c->path_chosen);
    json_kstr(w, "manifest", c->manifest_path);
    json_kstr(w, "library", c->library_path);
    json_kstr(w, "plugin_name", c->plugin_name); /* null: the descriptor's name is "name" */
    json_kstr(w, "checksum", c->checksum);
    json_kstr(w, "checksum_verified", c->checksum_verified > 0   ? "verified"
                                      : c->checksum_verified < 0 ? "mismatch"
                                                                 : "not checked");
    json_kstr(w, "processor", c->processor);
    json_kbool(w, "runs_in_process", c->runs_in_process);
    json_kbool(w, "verified", c->verified);
    json_kbool(w, "reference", c->reference);
    json_layout(w, c);
    json_figures(w, "declared", &c->declared);
    json_figures(w, "measured", &c->measured);
    json_knum(w, "measured_decode_min", c->measured_decode_min);
    json_knum(w, "measured_decode_max", c->measured_decode_max);
    json_kstr(w, "measured_series", c->measured_series); /* null: not calibrate's */
    json_kstr(w, "measured_workload", c->measured_workload);
    json_kstr(w, "measured_fidelity_source", c->measured_fidelity_source); /* null: verify's */
    json_knum(w, "first_contact_decode_tokens_per_s", c->first_contact_decode_tokens_per_s);
    json_knum(w, "first_contact_decode_min", c->first_contact_decode_min);
    json_knum(w, "first_contact_decode_max", c->first_contact_decode_max);
    json_knum(w, "first_contact_prefill_gflops", c->first_contact_prefill_gflops);
    json_knum(w, "first_contact_read_gbs", c->first_contact_read_gbs);
    json_kint(w, "measured_rounds_repeated", c->measured_rounds_repeated);
    json_knum(w, "first_contact_wait_share", c->first_contact_wait_share);
    json_kint(w, "first_contact_attempts", c->first_contact_attempts);
    /* null: its figures were kept (or none taken); else why not (edgert.h) */
    json_kstr(w, "first_contact_contention", c->first_contact_contention);
    json_key(w, "decode_group"); /* priority speed: edgert_selection_decode_group */
    if (decode_group >= 0)
        json_int(w, decode_group);
    else
        json_null(w);
    json_key(w, "fidelity_group"); /* priority fidelity: edgert_selection_fidelity_group */
    if (fidelity_group >= 0)
        json_int(w, fidelity_group);
    else
        json_null(w);
    json_knum(w, "measured_top1_tokens", c->measured_top1_tokens ? c->measured_top1_tokens : NAN);
    json_kstr(w, "decode_source", sel && rank >= 0 ? edgert_selection_decode_source(sel, r) : NULL);
    json_knum(w, "decode_rate", sel && rank >= 0 ? edgert_selection_decode_rate(sel, r) : NAN);
    double lo = NAN, hi = NAN; /* the range it was grouped by, scaled as the rate */
    if (sel && rank >= 0)
        edgert_selection_decode_range(sel, r, &lo, &hi);
    json_knum(w, "decode_rate_min", lo);
    json_knum(w, "decode_rate_max", hi);
    json_knum(w, "decode_read_gbs",
              sel && rank >= 0 ? edgert_selection_decode_read_gbs(sel, r) : NAN);
    /* the key that put it below the rank above (edgert_selection_reason) */
    edgert_rank_reason why = {.struct_size = sizeof why};
    int told = sel && rank >= 0 && edgert_selection_reason(sel, r, &why) == EDGERT_OK;
    json_kstr(w, "decided_by", told ? edgert_decider_name(why.decider) : NULL);
    json_kstr(w, "rationale", c->rationale);
    json_end_obj(w);
}

void json_diags(json_w *w, const edgert_ctx *ctx)
{
    json_key(w, "diagnostics");
    json_arr(w);
    for (size_t i = 0; i < edgert_diag_count(ctx); i++) {
        const edgert_diag *d = edgert_diag_at(ctx, i);
        if (d->level > EDGERT_LOG_WARN)
            continue;
        json_obj(w);
        json_kstr(w, "level", lv[d->level]);
        json_kstr(w, "file", d->file);
        json_kint(w, "line", d->line);
        json_kint(w, "column", d->column);
        json_kstr(w, "message", d->message);
        json_end_obj(w);
    }
    json_end_arr(w);
}

void json_search_paths(json_w *w, const edgert_ctx *ctx)
{
    json_key(w, "search_paths");
    json_arr(w);
    for (size_t i = 0; i < edgert_search_path_count(ctx); i++) {
        const char *origin = NULL;
        const char *p = edgert_search_path_at(ctx, i, &origin);
        json_obj(w);
        json_kstr(w, "path", p);
        json_kstr(w, "origin", origin);
        json_end_obj(w);
    }
    json_end_arr(w);
}

static void print_diags_from(const edgert_ctx *ctx, FILE *f, int max_level, size_t from)
{
    for (size_t i = from; i < edgert_diag_count(ctx); i++) {
        const edgert_diag *d = edgert_diag_at(ctx, i);
        if ((int)d->level > max_level)
            continue;
        if (d->file && d->line)
            tfprintf(f, "  %s:%u:%u: %s: %s\n", d->file, d->line, d->column, lv[d->level],
                     d->message);
        else if (d->file)
            tfprintf(f, "  %s: %s: %s\n", d->file, lv[d->level], d->message);
        else
            tfprintf(f, "  %s: %s\n", lv[d->level], d->message);
    }
}

void print_diags(const edgert_ctx *ctx, FILE *f, int max_level)
{
    print_diags_from(ctx, f, max_level, 0);
}

void text_append(char *buf, size_t len, const char *sep, const char *item)
{
    size_t used = strnlen(buf, len);
    if (used + 1 < len)
        snprintf(buf + used, len - used, "%s%s", used ? sep : "", item);
}

void reasons_text(const edgert_candidate *c, char *buf, size_t len)
{
    buf[0] = '\0';
    for (size_t i = 0; i < c->reason_count; i++)
        text_append(buf, len, " ", c->reasons[i]);
}

const char *layout_text(const edgert_candidate *c, char *buf, size_t len)
{
    snprintf(buf, len, "%s, %d-bit weights%s, %s activations, %.3g bits/weight",
             c->layout.format ? c->layout.format : "?", c->layout.weight_bits,
             c->layout.symmetric ? " (symmetric)" : "",
             c->effective_activation_dtype ? c->effective_activation_dtype : "?",
             c->layout.bits_per_weight);
    return buf;
}

/* ---- open ------------------------------------------------------------------------- */

static void cli_log(void *user, edgert_log_level level, const char *msg)
{
    (void)user;
    tfprintf(stderr, "edgert: %s: %s\n", lv[level], msg);
}

int open_ctx(const cli *c, edgert_ctx **ctx)
{
    return open_ctx_msg(c, ctx, NULL, 0, NULL);
}

/* --json: the one object on stdout when a command fails before it has a
 * result (the man page's {"error", "status"}). */
void json_error_object(const char *err, edgert_status st, int rc)
{
    json_w w;
    json_init(&w, json_out());
    json_obj(&w);
    json_kstr(&w, "error", err);
    json_kstr(&w, "status", edgert_status_name(st));
    json_kint(&w, "exit_code", rc);
    json_said_diags(&w);
    json_end_obj(&w);
    json_finish(&w);
}

int json_asked(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--json") == 0)
            return 1;
    return 0;
}

int input_file_check(const char *opt, const char *path, char *msg, size_t msg_len)
{
    struct stat st;
    const char *why = NULL;
    if (!path || !*path)
        why = "empty path";
    else if (stat(path, &st) != 0 || access(path, R_OK) != 0)
        why = strerror(errno);
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    if (!why)
        return 0;
    cli_fail_status(EDGERT_E_IO); /* as the library's for a checkpoint or profile not there */
    snprintf(msg, msg_len, "%s%s%s: cannot read: %s", opt ? opt : "", opt ? " " : "",
             path && *path ? path : "\"\"", why);
    return -1;
}

/* An evidence file named to be read must be there (calibrate creates the
 * one it writes): a misspelt path would rank without evidence, silently. */
static int check_evidence_arg(const cli *c, char *msg, size_t msg_len)
{
    struct stat st;
    if (!c->evidence || c->no_evidence || strcmp(c->cmd, "calibrate") == 0)
        return EXIT_OK;
    if (c->evidence[0] && stat(c->evidence, &st) == 0)
        return EXIT_OK;
    char err[1024];
    snprintf(err, sizeof err, "--evidence %s: %s", c->evidence[0] ? c->evidence : "\"\"",
             c->evidence[0] ? strerror(errno) : "empty path");
    tfprintf(stderr, "edgert %s: %s\n", c->cmd, err);
    if (msg && msg_len)
        snprintf(msg, msg_len, "%s", err);
    else if (c->json)
        json_error_object(err, EDGERT_E_NOT_FOUND, EXIT_BADFILE);
    return EXIT_BADFILE;
}

int open_ctx_msg(const cli *c, edgert_ctx **ctx, char *msg, size_t msg_len,
                 const char **status)
{
    int rc = check_evidence_arg(c, msg, msg_len);
    if (rc != EXIT_OK) {
        if (status)
            *status = edgert_status_name(EDGERT_E_NOT_FOUND);
        return rc;
    }
    edgert_options o = {.struct_size = sizeof o};
    o.sysroot = c->sysroot;
    o.device_profile = c->device;
    o.manifest_paths = c->paths;
    o.manifest_path_count = c->npaths;
    o.disable = c->disable;
    o.strict = c->strict;
    o.no_evidence = c->no_evidence;
    /* calibrate and run --compare --store write their evidence to --out */
    o.evidence_file = c->evidence                                          ? c->evidence
                      : strcmp(c->cmd, "calibrate") == 0 || c->store ? c->out
                                                                        : NULL;
    o.threads = c->threads;
    o.log = cli_log;
    o.log_level = c->verbose ? EDGERT_LOG_INFO : (c->quiet ? EDGERT_LOG_ERROR : 0);
    /* The CLI resolves EDGERT_PRIORITY / EDGERT_BACKEND itself (parse_args),
     * so that its own --priority and --backend win over them. */
    o.no_env_selection = 1;
    /* --weights FILE and pack's IN: the layout gate, so that no backend is
     * picked (or verified) whose pack then refuses the file; bench and
     * verify also read it themselves, as their workload. Not export's
     * --weights: dense inputs for the NPU export, read by its plugin. */
    o.weights = strcmp(c->cmd, "pack") == 0     ? c->input
                : strcmp(c->cmd, "export") == 0 ? NULL
                                                : c->weights;
    /* probe and list run no plugin code at all; select loads only what it
     * ranks (only the forced backend with --backend); export loads its
     * backend on demand. bench, verify and calibrate work on loaded ones. */
    o.defer_load = strcmp(c->cmd, "probe") == 0 || strcmp(c->cmd, "list") == 0 ||
                   strcmp(c->cmd, "select") == 0 || strcmp(c->cmd, "export") == 0 ||
                   strcmp(c->cmd, "pack") == 0 || strcmp(c->cmd, "run") == 0;
    char err[4096] = "";
    edgert_status st = edgert_open(&o, ctx, err, sizeof err);
    if (st == EDGERT_OK)
        return EXIT_OK;
    tfprintf_lines(stderr, "edgert: %s\n", err[0] ? err : edgert_status_name(st));
    if (status)
        *status = edgert_status_name(st);
    if (msg && msg_len)
        snprintf(msg, msg_len, "%s", err[0] ? err : edgert_status_name(st));
    /* E_UNSUPPORTED: --weights a checkpoint edgert refuses (act-order), as
     * bench, verify and pack exit for it */
    rc = st == EDGERT_E_PARSE || st == EDGERT_E_IO || st == EDGERT_E_NOT_FOUND ||
                 st == EDGERT_E_UNSUPPORTED
             ? EXIT_BADFILE
             : EXIT_FAIL;
    if (!(msg && msg_len) && c->json) /* a caller that words its own (export) passed msg */
        json_error_object(err[0] ? err : edgert_status_name(st), st, rc);
    return rc;
}

/* Warnings from opening (manifests skipped, evidence, settings) go to stderr
 * in text mode (JSON has them), unless -q or EDGERT_LOG=error (not with -v);
 * errors always: a manifest not read (a misspelt key) never vanishes unsaid. */
size_t warn_diags_since(const cli *c, const edgert_ctx *ctx, size_t from)
{
    const char *level = secure_getenv("EDGERT_LOG");
    int upto = c->quiet || (!c->verbose && level && strcasecmp(level, "error") == 0)
                   ? EDGERT_LOG_ERROR : EDGERT_LOG_WARN, any = 0;
    size_t n = edgert_diag_count(ctx);
    if (c->json) { /* the document says them, -q or not (json_said_diags) */
        for (size_t i = from; i < n; i++)
            if (edgert_diag_at(ctx, i)->level <= EDGERT_LOG_WARN)
                cli_said(edgert_diag_at(ctx, i));
        return n;
    }
    int errors = 0, warnings = 0;
    for (size_t i = from; i < n; i++) {
        int level_i = (int)edgert_diag_at(ctx, i)->level;
        errors |= level_i <= EDGERT_LOG_ERROR;
        warnings |= level_i == EDGERT_LOG_WARN && level_i <= upto;
    }
    any = errors || warnings;
    if (!any || c->explain)
        return n;
    /* headed by what is under it: an error never sits under "warnings:" */
    tfprintf(stderr, "edgert: %s:\n", errors && warnings ? "errors and warnings"
                                       : errors           ? "errors"
                                                          : "warnings");
    print_diags_from(ctx, stderr, upto, from);
    return n;
}

void warn_diags(const cli *c, const edgert_ctx *ctx)
{
    warn_diags_since(c, ctx, 0);
}

int open_measuring(const cli *c, const char *cmd, const char *runs, workload *w,
                   edgert_ctx **ctx)
{
    if (c->weights && c->workload) {
        tfprintf(stderr, "edgert %s: --weights and --workload exclude each other (the shapes "
                 "come from the weights)\n", cmd);
        return EXIT_USAGE;
    }
    if (c->weights) {
        if (wl_from_checkpoint(c->weights, w) != 0)
            return EXIT_BADFILE;
        if (strcmp(cmd, "verify") == 0 && strcmp(edgert_checkpoint_kind(w->ck), "packed") == 0) {
            /* before any backend is loaded: a packed file has no dense
             * values for the reference */
            tfprintf(stderr, "edgert verify: %s holds one backend's packed bytes, which no dense "
                     "reference can be made of; verify the checkpoint it was packed from\n",
                     c->weights);
            wl_free(w);
            cli_fail_status(EDGERT_E_USAGE);
            return EXIT_FAIL; /* bench --weights takes it: this command's refusal */
        }
    } else if (c->workload) {
        if (wl_load(c->workload, w, c->quiet) != 0)
            return EXIT_BADFILE;
    } else {
        wl_builtin(w);
    }
    int rc = open_ctx(c, ctx);
    if (rc) {
        wl_free(w);
        return rc;
    }
    if (edgert_device_facts(*ctx)->planned) {
        tfprintf(stderr, "edgert %s: --device plans for another machine; %s\n", cmd, runs);
        edgert_close(*ctx);
        *ctx = NULL;
        wl_free(w);
        return EXIT_USAGE;
    }
    warn_diags(c, *ctx);
    return 0;
}
