/*
 * tools/cli_common.c — printers and handle opening shared by the subcommands.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "workload.h"

#include <stdarg.h>

/* Indexed by edgert_log_level (1 = error). */
static const char *const lv[] = {"?", "error", "warning", "info", "debug"};

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
    printf("device: %s (%s)\n", d->name[0] ? d->name : "unnamed",
           d->planned ? "plan from a device profile" : "live probe");
    printf("  source        %s\n", d->source);
    printf("  arch          %s\n", edgert_arch_name(d->arch));
    printf("  class         %s", edgert_device_class_name(d->device_class));
    if (d->class_evidence[0])
        printf("  (%s)", d->class_evidence);
    printf("\n");
    if (d->accelerator[0])
        printf("  accelerator   %s\n", d->accelerator);
    printf("  cores         %u logical\n", d->logical_cores);
    if (d->mem_total_bytes)
        printf("  memory        %.1f GiB total, %.1f GiB available\n",
               d->mem_total_bytes / 1073741824.0, d->mem_available_bytes / 1073741824.0);
    printf("  cpu flags     %s\n", flags);
    printf("  OS-disabled   %s\n", off);
    printf("  bf16          %s (%s)\n", d->bf16 ? "yes" : "no", d->bf16_source);
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

void json_candidate(json_w *w, const edgert_candidate *c, int rank)
{
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
    json_kstr(w, "path_chosen", c->path_chosen);
    json_kstr(w, "manifest", c->manifest_path);
    json_kstr(w, "library", c->library_path);
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

void print_diags(const edgert_ctx *ctx, FILE *f, int max_level)
{
    for (size_t i = 0; i < edgert_diag_count(ctx); i++) {
        const edgert_diag *d = edgert_diag_at(ctx, i);
        if ((int)d->level > max_level)
            continue;
        if (d->file && d->line)
            fprintf(f, "  %s:%u:%u: %s: %s\n", d->file, d->line, d->column, lv[d->level],
                    d->message);
        else if (d->file)
            fprintf(f, "  %s: %s: %s\n", d->file, lv[d->level], d->message);
        else
            fprintf(f, "  %s: %s\n", lv[d->level], d->message);
    }
}

void reasons_text(const edgert_candidate *c, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < c->reason_count && used + 1 < len; i++) {
        int w = snprintf(buf + used, len - used, "%s%s", i ? " " : "", c->reasons[i]);
        if (w > 0)
            used += (size_t)w;
    }
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
    fprintf(stderr, "edgert: %s: %s\n", lv[level], msg);
}

int open_ctx(const cli *c, edgert_ctx **ctx)
{
    edgert_options o = {.struct_size = sizeof o};
    o.sysroot = c->sysroot;
    o.device_profile = c->device;
    o.manifest_paths = c->paths;
    o.manifest_path_count = c->npaths;
    o.disable = c->disable;
    o.strict = c->strict;
    o.no_evidence = c->no_evidence;
    o.evidence_file = c->evidence ? c->evidence : c->out;
    o.threads = c->threads;
    o.log = cli_log;
    o.log_level = c->verbose ? EDGERT_LOG_INFO : (c->quiet ? EDGERT_LOG_ERROR : 0);
    /* The CLI resolves EDGERT_PRIORITY / EDGERT_BACKEND itself (parse_args),
     * so that its own --priority and --backend win over them. */
    o.no_env_selection = 1;
    /* probe and list run no plugin code at all; select loads only what it
     * ranks (only the forced backend with --backend); export loads its
     * backend on demand. bench, verify and calibrate work on loaded ones. */
    o.defer_load = strcmp(c->cmd, "probe") == 0 || strcmp(c->cmd, "list") == 0 ||
                   strcmp(c->cmd, "select") == 0 || strcmp(c->cmd, "export") == 0;
    char err[4096] = "";
    edgert_status st = edgert_open(&o, ctx, err, sizeof err);
    if (st == EDGERT_OK)
        return EXIT_OK;
    fprintf(stderr, "edgert: %s\n", err[0] ? err : edgert_status_name(st));
    if (st == EDGERT_E_PARSE || st == EDGERT_E_IO || st == EDGERT_E_NOT_FOUND)
        return EXIT_BADFILE;
    return EXIT_FAIL;
}

/* Manifest problems go to stderr in text mode (they are in the JSON otherwise). */
void warn_diags(const cli *c, const edgert_ctx *ctx)
{
    if (c->json || c->quiet)
        return;
    int any = 0;
    for (size_t i = 0; i < edgert_diag_count(ctx); i++)
        any |= edgert_diag_at(ctx, i)->level <= EDGERT_LOG_WARN;
    if (!any || c->explain)
        return;
    fprintf(stderr,
            "edgert: problems while reading manifests (skipped files; the others were used):\n");
    print_diags(ctx, stderr, EDGERT_LOG_WARN);
}


int open_measuring(const cli *c, const char *cmd, const char *runs, workload *w,
                   edgert_ctx **ctx)
{
    if (c->workload) {
        if (wl_load(c->workload, w) != 0)
            return EXIT_BADFILE;
    } else {
        wl_builtin(w);
    }
    int rc = open_ctx(c, ctx);
    if (rc)
        return rc;
    if (edgert_device_facts(*ctx)->planned) {
        fprintf(stderr, "edgert %s: --device plans for another machine; %s\n", cmd, runs);
        edgert_close(*ctx);
        *ctx = NULL;
        return EXIT_USAGE;
    }
    warn_diags(c, *ctx);
    return 0;
}
