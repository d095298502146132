/*
 * tools/edgert.c — the `edgert` command line.
 *
 *   edgert probe    what this device is (or what a device profile says)
 *   edgert list     every backend manifest found, with its verdict
 *   edgert select   the backend to use for a priority, and why
 *
 * Output: short human text on stdout, or one JSON object with --json.
 * Diagnostics go to stderr. Exit codes: 0 ok, 1 other failure, 2 usage error,
 * 3 nothing eligible (or a forced backend is not), 4 bad manifest or device
 * profile that was named explicitly.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgert/edgert.h"
#include "json.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_NONE = 3, EXIT_BADFILE = 4 };

#define MAX_PATHS 64

typedef struct cli {
    const char *cmd;
    int json, explain, strict, verbose, quiet, no_evidence;
    const char *sysroot, *device, *disable, *backend, *priority_s;
    const char *paths[MAX_PATHS];
    size_t npaths;
    unsigned threads;
    edgert_priority priority;
} cli;

/* ---- help ------------------------------------------------------------------ */

static const char common_help[] =
    "Common options:\n"
    "  --json              print one JSON object on stdout instead of text\n"
    "  --sysroot DIR       probe files under DIR instead of / (tests, containers)\n"
    "  --device FILE       plan for the device described by a profile YAML instead\n"
    "                      of probing this one: nothing is loaded or self-tested\n"
    "  --manifests PATH    a manifest folder or file; repeatable; replaces the\n"
    "                      default folders and EDGERT_MANIFEST_PATH\n"
    "  --disable LIST      comma-separated backend names never to use\n"
    "  --strict            never fall back to the reference backend\n"
    "  --threads N         thread pool size (default: all logical cores)\n"
    "  -v, --verbose       log what the loader does (to stderr)\n"
    "  -q, --quiet         only errors on stderr\n"
    "  -h, --help          this help\n";

static const char env_help[] =
    "Environment:\n"
    "  EDGERT_MANIFEST_PATH      colon-separated absolute folders; replaces the defaults\n"
    "  EDGERT_ADD_MANIFEST_PATH  colon-separated absolute folders searched first\n"
    "  EDGERT_DISABLE            comma-separated backend names never to use\n"
    "  EDGERT_PRIORITY           speed|fidelity, the default of --priority\n"
    "  EDGERT_BACKEND            the default of --backend\n"
    "  EDGERT_LOG                error|warn|info|debug (default warn)\n"
    "Default manifest folders: <dir of libedgert>/edgert/backends (an install or the\n"
    "build tree, which mirrors it). The current directory is never searched.\n"
    "Exit codes: 0 ok, 1 failure, 2 usage error, 3 nothing eligible (or the forced\n"
    "backend is not), 4 bad manifest or device profile named explicitly.\n";

static void usage_main(FILE *f)
{
    fprintf(f,
            "usage: edgert COMMAND [options]\n"
            "\n"
            "edgert probes this device, reads backend manifests, loads the 4-bit kernel\n"
            "plugins the device can run and picks one for a priority (speed or fidelity).\n"
            "\n"
            "Commands:\n"
            "  probe     show the device facts (CPU flags the OS enables, device class)\n"
            "  list      list every backend manifest found and its verdict on this device\n"
            "  select    pick the backend for a priority; --explain says why\n"
            "\n"
            "Run 'edgert COMMAND --help' for a command's options.\n\n%s\n%s",
            common_help, env_help);
}

static void usage_cmd(FILE *f, const char *cmd)
{
    if (strcmp(cmd, "probe") == 0)
        fprintf(f, "usage: edgert probe [options]\n\nShow the device facts the selection uses: "
                   "arch, device class (and the files\nthat decided it), CPU flags usable in this "
                   "process, flags the OS disabled,\ncores, memory, bf16 support.\n\n");
    else if (strcmp(cmd, "list") == 0)
        fprintf(f, "usage: edgert list [options]\n\nList every backend manifest found, in search "
                   "order, with its verdict on this\ndevice: eligible, or the reason codes of the "
                   "gates it failed.\n\n");
    else
        fprintf(f,
                "usage: edgert select [--priority speed|fidelity] [--backend NAME] [--explain] "
                "[options]\n\n"
                "Pick the backend for a priority. Gates first (arch, device class, CPU flags,\n"
                "OS state, library file, checksum, ABI, self-test, disable list); then the\n"
                "accelerator of the device class, then CPU backends, then the reference\n"
                "backend. Within a tier, 'speed' ranks by decode tokens/s (measured on this\n"
                "device if known, else declared), then fidelity, then name; 'fidelity' ranks\n"
                "by activation bits, weight bits, top-1 agreement, then speed, then name.\n\n"
                "  --priority P        speed (default) or fidelity\n"
                "  --backend NAME      use this backend; an error if it is not eligible\n"
                "  --explain           show the device, the folders searched, every manifest\n"
                "                      with its verdict, and the ranking\n"
                "  --no-evidence       ignore measured evidence; rank by declared figures\n\n");
    fprintf(f, "%s\n%s", common_help, env_help);
}

/* ---- option parsing ---------------------------------------------------------- */

enum {
    OPT_JSON = 256, OPT_SYSROOT, OPT_DEVICE, OPT_MANIFESTS, OPT_DISABLE, OPT_STRICT, OPT_THREADS,
    OPT_PRIORITY, OPT_BACKEND, OPT_EXPLAIN, OPT_NO_EVIDENCE
};

static int parse_args(cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, 0, 'h'},
        {"verbose", no_argument, 0, 'v'},
        {"quiet", no_argument, 0, 'q'},
        {"json", no_argument, 0, OPT_JSON},
        {"sysroot", required_argument, 0, OPT_SYSROOT},
        {"device", required_argument, 0, OPT_DEVICE},
        {"manifests", required_argument, 0, OPT_MANIFESTS},
        {"disable", required_argument, 0, OPT_DISABLE},
        {"strict", no_argument, 0, OPT_STRICT},
        {"threads", required_argument, 0, OPT_THREADS},
        {"priority", required_argument, 0, OPT_PRIORITY},
        {"backend", required_argument, 0, OPT_BACKEND},
        {"explain", no_argument, 0, OPT_EXPLAIN},
        {"no-evidence", no_argument, 0, OPT_NO_EVIDENCE},
        {0, 0, 0, 0},
    };
    int is_select = strcmp(c->cmd, "select") == 0;
    optind = 1;
    opterr = 0;
    for (;;) {
        int o = getopt_long(argc, argv, ":hvq", opts, NULL);
        if (o == -1)
            break;
        switch (o) {
        case 'h':
            usage_cmd(stdout, c->cmd);
            exit(EXIT_OK);
        case 'v': c->verbose = 1; break;
        case 'q': c->quiet = 1; break;
        case OPT_JSON: c->json = 1; break;
        case OPT_SYSROOT: c->sysroot = optarg; break;
        case OPT_DEVICE: c->device = optarg; break;
        case OPT_MANIFESTS:
            if (c->npaths == MAX_PATHS) {
                fprintf(stderr, "edgert: at most %d --manifests\n", MAX_PATHS);
                return -1;
            }
            c->paths[c->npaths++] = optarg;
            break;
        case OPT_DISABLE: c->disable = optarg; break;
        case OPT_STRICT: c->strict = 1; break;
        case OPT_THREADS: {
            char *end;
            errno = 0;
            long t = strtol(optarg, &end, 10);
            if (*end || errno || t < 1 || t > 1024) {
                fprintf(stderr, "edgert: --threads takes a number from 1 to 1024, not '%s'\n",
                        optarg);
                return -1;
            }
            c->threads = (unsigned)t;
            break;
        }
        case OPT_PRIORITY:
        case OPT_BACKEND:
        case OPT_EXPLAIN:
        case OPT_NO_EVIDENCE:
            if (!is_select) {
                fprintf(stderr, "edgert %s: option '%s' is only for 'edgert select'\n", c->cmd,
                        argv[optind - 1]);
                return -1;
            }
            if (o == OPT_PRIORITY)
                c->priority_s = optarg;
            else if (o == OPT_BACKEND)
                c->backend = optarg;
            else if (o == OPT_EXPLAIN)
                c->explain = 1;
            else
                c->no_evidence = 1;
            break;
        case ':':
            fprintf(stderr, "edgert %s: option '%s' needs a value\n", c->cmd, argv[optind - 1]);
            return -1;
        default:
            fprintf(stderr, "edgert %s: unknown option '%s' (see 'edgert %s --help')\n", c->cmd,
                    argv[optind - 1], c->cmd);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "edgert %s: unexpected argument '%s'\n", c->cmd, argv[optind]);
        return -1;
    }
    if (!c->priority_s)
        c->priority_s = secure_getenv("EDGERT_PRIORITY");
    if (c->priority_s && *c->priority_s && edgert_priority_parse(c->priority_s, &c->priority) != 0) {
        fprintf(stderr, "edgert: priority must be 'speed' or 'fidelity', not '%s'%s\n",
                c->priority_s, c->priority_s == secure_getenv("EDGERT_PRIORITY")
                                   ? " (from EDGERT_PRIORITY)" : "");
        return -1;
    }
    if (!c->backend && is_select) {
        const char *b = secure_getenv("EDGERT_BACKEND");
        if (b && *b)
            c->backend = b;
    }
    return 0;
}

/* ---- shared printing ------------------------------------------------------------ */

static void flags_text(uint64_t mask, char *buf, size_t len)
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

static void json_flags(json_w *w, const char *key, uint64_t mask)
{
    json_key(w, key);
    json_arr(w);
    for (unsigned f = 0; f < EDGERT_CPU_FLAG_COUNT; f++)
        if (EDGERT_HAS_FLAG(mask, f))
            json_str(w, edgert_cpu_flag_name((edgert_cpu_flag)f));
    json_end_arr(w);
}

static void json_device(json_w *w, const edgert_device *d)
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

static void print_device(const edgert_device *d)
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

static void json_figures(json_w *w, const char *key, const edgert_figures *f)
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

static void json_layout(json_w *w, const edgert_candidate *c)
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

static void json_candidate(json_w *w, const edgert_candidate *c, int rank)
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

static void json_diags(json_w *w, const edgert_ctx *ctx)
{
    static const char *const lv[] = {"error", "warning", "info", "debug"};
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

static void json_search_paths(json_w *w, const edgert_ctx *ctx)
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

static void print_diags(const edgert_ctx *ctx, FILE *f, int max_level)
{
    static const char *const lv[] = {"error", "warning", "info", "debug"};
    for (size_t i = 0; i < edgert_diag_count(ctx); i++) {
        const edgert_diag *d = edgert_diag_at(ctx, i);
        if ((int)d->level > max_level)
            continue;
        if (d->file && d->line)
            fprintf(f, "  %s:%u:%u: %s: %s\n", d->file, d->line, d->column, lv[d->level], d->message);
        else if (d->file)
            fprintf(f, "  %s: %s: %s\n", d->file, lv[d->level], d->message);
        else
            fprintf(f, "  %s: %s\n", lv[d->level], d->message);
    }
}

static void reasons_text(const edgert_candidate *c, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < c->reason_count && used + 1 < len; i++) {
        int w = snprintf(buf + used, len - used, "%s%s", i ? " " : "", c->reasons[i]);
        if (w > 0)
            used += (size_t)w;
    }
}

static const char *layout_text(const edgert_candidate *c, char *buf, size_t len)
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
    static const char *const lv[] = {"error", "warning", "info", "debug"};
    fprintf(stderr, "edgert: %s: %s\n", lv[level], msg);
}

static int open_ctx(const cli *c, edgert_ctx **ctx)
{
    edgert_options o = {.struct_size = sizeof o};
    o.sysroot = c->sysroot;
    o.device_profile = c->device;
    o.manifest_paths = c->paths;
    o.manifest_path_count = c->npaths;
    o.disable = c->disable;
    o.strict = c->strict;
    o.no_evidence = c->no_evidence;
    o.threads = c->threads;
    o.log = cli_log;
    o.log_level = c->verbose ? EDGERT_LOG_INFO : (c->quiet ? EDGERT_LOG_ERROR : 0);
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
static void warn_diags(const cli *c, const edgert_ctx *ctx)
{
    if (c->json || c->quiet)
        return;
    int any = 0;
    for (size_t i = 0; i < edgert_diag_count(ctx); i++)
        any |= edgert_diag_at(ctx, i)->level <= EDGERT_LOG_WARN;
    if (!any || c->explain)
        return;
    fprintf(stderr, "edgert: problems while reading manifests (skipped files; the others were used):\n");
    print_diags(ctx, stderr, EDGERT_LOG_WARN);
}

/* ---- commands ----------------------------------------------------------------------- */

static int cmd_probe(const cli *c)
{
    edgert_ctx *ctx = NULL;
    int rc = open_ctx(c, &ctx);
    if (rc)
        return rc;
    const edgert_device *d = edgert_device_facts(ctx);
    if (c->json) {
        json_w w;
        json_init(&w, stdout);
        json_obj(&w);
        json_device(&w, d);
        json_end_obj(&w);
        json_finish(&w);
    } else {
        print_device(d);
    }
    edgert_close(ctx);
    return EXIT_OK;
}

static int cmd_list(const cli *c)
{
    edgert_ctx *ctx = NULL;
    int rc = open_ctx(c, &ctx);
    if (rc)
        return rc;
    size_t n = edgert_candidate_count(ctx);
    if (c->json) {
        json_w w;
        json_init(&w, stdout);
        json_obj(&w);
        json_device(&w, edgert_device_facts(ctx));
        json_search_paths(&w, ctx);
        json_key(&w, "manifests");
        json_arr(&w);
        for (size_t i = 0; i < n; i++)
            json_candidate(&w, edgert_candidate_at(ctx, i), -1);
        json_end_arr(&w);
        json_diags(&w, ctx);
        json_end_obj(&w);
        json_finish(&w);
    } else {
        warn_diags(c, ctx);
        if (n == 0)
            printf("no backend manifests found (searched %zu folders; see 'edgert select --explain')\n",
                   edgert_search_path_count(ctx));
        for (size_t i = 0; i < n; i++) {
            const edgert_candidate *k = edgert_candidate_at(ctx, i);
            char reasons[512], lay[256];
            reasons_text(k, reasons, sizeof reasons);
            printf("%-16s %-8s %-12s %s\n", k->name, k->version, k->eligible ? "eligible" : "not eligible",
                   k->eligible ? layout_text(k, lay, sizeof lay) : reasons);
        }
    }
    edgert_close(ctx);
    return EXIT_OK;
}

static void explain(const cli *c, edgert_ctx *ctx, const edgert_selection *sel)
{
    const edgert_device *d = edgert_device_facts(ctx);
    print_device(d);
    if (d->planned)
        printf("  mode          PLAN for the device in the profile: only declarative gates apply;\n"
               "                nothing is loaded or self-tested here, library files are not checked\n");
    printf("\nmanifest folders searched, in order (first name wins):\n");
    if (edgert_search_path_count(ctx) == 0)
        printf("  (none besides explicitly named files)\n");
    for (size_t i = 0; i < edgert_search_path_count(ctx); i++) {
        const char *origin = NULL;
        const char *p = edgert_search_path_at(ctx, i, &origin);
        printf("  %zu. %s  [%s]\n", i + 1, p, origin);
    }
    size_t n = edgert_candidate_count(ctx);
    printf("\nmanifests found: %zu\n", n);
    int problems = 0;
    for (size_t i = 0; i < edgert_diag_count(ctx); i++)
        problems |= edgert_diag_at(ctx, i)->level <= EDGERT_LOG_WARN;
    if (problems) {
        printf("problems (those files were skipped, the rest were used):\n");
        print_diags(ctx, stdout, EDGERT_LOG_WARN);
    }
    printf("\nverdicts (gates: disable list, arch, device class, CPU flags, OS state, ABI,\n"
           "strict mode%s):\n",
           d->planned ? "" : ", library file, checksum, dlopen, entry symbol, ABI answer, init, self-test");
    for (size_t i = 0; i < n; i++) {
        const edgert_candidate *k = edgert_candidate_at(ctx, i);
        int r = edgert_selection_rank(sel, i);
        char lay[256];
        if (k->eligible) {
            printf("  %-16s ELIGIBLE  rank %d", k->name, r + 1);
            if (k->loaded)
                printf("; loaded and self-tested%s%s", k->path_chosen ? ", path: " : "",
                       k->path_chosen ? k->path_chosen : "");
            else if (!k->library_path)
                printf("; declarative (no library: %s runs it)", k->processor);
            printf("\n");
        } else {
            char reasons[512];
            reasons_text(k, reasons, sizeof reasons);
            printf("  %-16s rejected  %s\n", k->name, reasons);
            if (k->detail && *k->detail)
                printf("  %-16s           %s\n", "", k->detail);
        }
        printf("  %-16s           layout: %s\n", "", layout_text(k, lay, sizeof lay));
        if (!isnan(k->measured.decode_tokens_per_s) || !isnan(k->measured.top1_agreement))
            printf("  %-16s           measured here: %.1f tok/s, top-1 %.3f\n", "",
                   k->measured.decode_tokens_per_s, k->measured.top1_agreement);
        if (!isnan(k->declared.decode_tokens_per_s) || !isnan(k->declared.top1_agreement))
            printf("  %-16s           declared: %.1f tok/s%s%s (%s%s)\n", "",
                   k->declared.decode_tokens_per_s,
                   isnan(k->declared.top1_agreement) ? "" : ", top-1 ",
                   isnan(k->declared.top1_agreement) ? "" : "declared",
                   k->verified ? "verified: " : "not verified here: ",
                   k->declared.where ? k->declared.where : "?");
    }
    edgert_priority p = edgert_selection_priority(sel);
    printf("\nranking for priority '%s' (%s):\n", edgert_priority_name(p),
           p == EDGERT_PRIORITY_SPEED
               ? "device-class accelerator, CPU backends, reference last; then decode tok/s "
                 "measured here else declared; then fidelity; then name"
               : "device-class accelerator, CPU backends, reference last; then activation bits, "
                 "weight bits, top-1 agreement; then speed; then name");
    if (edgert_selection_count(sel) == 0)
        printf("  (nothing eligible)\n");
    for (size_t r = 0; r < edgert_selection_count(sel); r++) {
        const edgert_candidate *k = edgert_candidate_at(ctx, edgert_selection_index(sel, r));
        printf("  %zu. %-16s %d-bit weights, %d-bit activations, %s\n", r + 1, k->name,
               k->layout.weight_bits, k->layout.activation_bits,
               k->reference ? "reference (always last)"
               : strcmp(k->processor, "cpu") != 0 ? "accelerator of this device class"
                                                   : "CPU backend");
    }
    printf("\n");
}

static int cmd_select(const cli *c)
{
    edgert_ctx *ctx = NULL;
    int rc = open_ctx(c, &ctx);
    if (rc)
        return rc;
    warn_diags(c, ctx);
    edgert_selection *sel = NULL;
    char err[1024] = "";
    edgert_status st = edgert_select(ctx, c->priority, c->backend, &sel, err, sizeof err);
    const edgert_candidate *s = edgert_selection_selected(sel);
    const edgert_device *d = edgert_device_facts(ctx);
    if (c->json) {
        json_w w;
        json_init(&w, stdout);
        json_obj(&w);
        json_kstr(&w, "mode", d->planned ? "plan" : "live");
        json_kstr(&w, "priority", edgert_priority_name(c->priority));
        json_kstr(&w, "forced", c->backend);
        json_device(&w, d);
        json_key(&w, "selected");
        if (s) {
            json_obj(&w);
            json_kstr(&w, "name", s->name);
            json_layout(&w, s);
            json_kbool(&w, "runs_in_process", s->runs_in_process);
            json_kstr(&w, "evidence", edgert_selection_evidence(sel));
            json_kstr(&w, "path_chosen", s->path_chosen);
            json_kstr(&w, "rationale", s->rationale);
            json_end_obj(&w);
        } else {
            json_null(&w);
        }
        json_kstr(&w, "error", st == EDGERT_OK ? NULL : err);
        json_key(&w, "candidates");
        json_arr(&w);
        for (size_t i = 0; i < edgert_candidate_count(ctx); i++)
            json_candidate(&w, edgert_candidate_at(ctx, i), edgert_selection_rank(sel, i));
        json_end_arr(&w);
        json_search_paths(&w, ctx);
        json_diags(&w, ctx);
        json_end_obj(&w);
        json_finish(&w);
    } else {
        if (c->explain && sel)
            explain(c, ctx, sel);
        if (s) {
            char lay[256];
            printf("selected: %s (priority %s%s; %s)\n", s->name, edgert_priority_name(c->priority),
                   c->backend ? ", forced by --backend/EDGERT_BACKEND" : "",
                   d->planned ? "PLAN for the profiled device, nothing loaded" : "live on this device");
            printf("  layout: %s\n", layout_text(s, lay, sizeof lay));
            if (s->path_chosen)
                printf("  path:   %s\n", s->path_chosen);
            printf("  decided by %s figures\n", edgert_selection_evidence(sel));
            if (s->rationale && *s->rationale)
                printf("  why:    %s\n", s->rationale);
            if (!c->explain)
                printf("('edgert select --explain' shows every backend and why it was or was not chosen)\n");
        }
    }
    if (st != EDGERT_OK && !c->json)
        fprintf(stderr, "edgert: %s\n", err);
    edgert_selection_free(sel);
    edgert_close(ctx);
    if (st == EDGERT_OK)
        return EXIT_OK;
    if (st == EDGERT_E_NOT_ELIGIBLE || st == EDGERT_E_NOT_FOUND)
        return EXIT_NONE;
    return EXIT_FAIL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage_main(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        usage_main(stdout);
        return EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("edgert %s (plugin ABI %u..%u)\n", EDGERT_VERSION_STRING, EDGERT_PLUGIN_ABI_MIN,
               EDGERT_PLUGIN_ABI_MAX);
        return EXIT_OK;
    }
    static const struct {
        const char *name;
        int (*run)(const cli *);
    } cmds[] = {{"probe", cmd_probe}, {"list", cmd_list}, {"select", cmd_select}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        if (strcmp(cmd, cmds[i].name) != 0)
            continue;
        cli c = {.cmd = cmd};
        if (parse_args(&c, argc - 1, argv + 1) != 0)
            return EXIT_USAGE;
        return cmds[i].run(&c);
    }
    fprintf(stderr, "edgert: unknown command '%s' (commands: probe, list, select; see 'edgert --help')\n",
            cmd);
    return EXIT_USAGE;
}
