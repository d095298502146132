/*
 * tools/quantize.c — `edgert quantize`: a dense safetensors checkpoint to a
 * GPTQ int4 one, through edgert_checkpoint_quantize (edgert.h has the rules),
 * then opened again to list what was written.
 *
 *   edgert quantize IN OUT --sym|--asym [--group N] [--threads N] [--json]
 *   edgert quantize MODEL OUT --sym|--asym --calibrate PROMPTS [--held-out PROMPTS]
 *                   [--damp F] [--act-order] [--group N] [--threads N] [--json]
 * With --calibrate, GPTQ on the model's own inputs (edgert_gptq_quantize in
 * libedgert-runner): MODEL is the folder (or its model.safetensors).
 * Exit codes: 0 written, 1 cannot write, or the input refused for what it
 * holds (already 4-bit, a dtype or K it cannot write, a scale past fp16:
 * files pack takes), 2 usage, 4 the input is missing or
 * malformed (its message names the file and the tensor). Nothing is left at OUT on
 * failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "edgert/runner.h"
#include "measure.h"
#include "prompts.h"

static void quantize_help(FILE *f)
{
    fprintf(f,
            "usage: edgert quantize IN OUT --sym|--asym [--group N] [--threads N] [--json]\n"
            "       edgert quantize MODEL OUT --sym|--asym --calibrate PROMPTS\n"
            "                       [--held-out PROMPTS] [--damp F] [--act-order] [options]\n\n"
            "Quantize a dense checkpoint (safetensors, F32/F16/BF16) to 4-bit GPTQ by round\n"
            "to nearest: every linear layer (2-D 'P.weight' that is not an embedding) becomes\n"
            "P.qweight/P.qzeros/P.scales/P.g_idx in GPTQ's v1 layout, which AutoGPTQ,\n"
            "GPTQModel and vLLM read; other tensors are copied. A tied output head is\n"
            "untied and quantized as 'lm_head'. quantize_config.json is written beside OUT.\n"
            "One layer is in memory at a time; OUT appears only when complete.\n\n"
            "  --sym        symmetric: zero point 8, scale max|w| / 7 (feeds W4A8 backends)\n"
            "  --asym       asymmetric: scale and zero point per group (W4A16 backends)\n"
            "  --group N    group size along K (default 128)\n"
            "  --calibrate PROMPTS\n"
            "               GPTQ instead of round to nearest: MODEL (a folder with\n"
            "               config.json and one model.safetensors, or that file) runs on\n"
            "               PROMPTS (token ids, one prompt a line, as 'run' reads them),\n"
            "               layer by layer, and each layer's rounding errors are spread\n"
            "               over its later columns by its real inputs' second moments\n"
            "  --held-out PROMPTS\n"
            "               prompts not calibrated on: each layer's output SQNR on them,\n"
            "               GPTQ against round to nearest (the median and the worst gain)\n"
            "  --damp F     dampening, a fraction of the inputs' mean square (default 0.1)\n"
            "  --act-order  GPTQ's act order (desc_act): each layer's columns quantized\n"
            "               largest input first, groups in that order; g_idx says each\n"
            "               input's group (every backend runs such files)\n"
            "  --threads N  threads (default: all logical cores)\n"
            "  --json       one JSON object on stdout\n"
            "  -h, --help   this text\n\n"
            "Exit codes: 0 ok, 1 cannot write, or the input refused for what it holds\n"
            "(already 4-bit, a dtype or K quantize cannot write, a scale past fp16), 2\n"
            "usage error, 4 missing or malformed input.\n");
}

static int parse_u32(const char *opt, const char *v, unsigned lo, unsigned hi, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long x = strtoul(v ? v : "", &end, 10);
    if (!v || !*v || *end || errno || v[0] == '-' || x < lo || x > hi) {
        tfprintf(stderr, "edgert quantize: %s takes a whole number from %u to %u, not '%s'\n",
                 opt, lo, hi, v ? v : "");
        return -1;
    }
    *out = (unsigned)x;
    return 0;
}

/* The library's E_USAGE, once the options are checked here, is the input
 * refused for what it holds (4-bit already, a dtype or K quantize cannot
 * write, a scale past fp16): a file pack takes, so this command's refusal,
 * 1 (docs/edgert.1, EXIT STATUS); the usage errors it shares with them are found
 * here first (out_misnamed). */
static int exit_code(edgert_status st)
{
    return st == EDGERT_E_PARSE ? EXIT_BADFILE : EXIT_FAIL;
}

/* The usage errors among the library's E_USAGE (2): OUT names IN (through
 * a link or another path), or the config's name, into which the config
 * beside it would be written; why into why_len, or 0 when neither. */
static int out_misnamed(const char *in, const char *out, char *why, size_t why_len)
{
    char *a = realpath(in, NULL), *b = realpath(out, NULL);
    int same = a && b && strcmp(a, b) == 0;
    free(a);
    free(b);
    const char *base = strrchr(out, '/');
    if (same)
        snprintf(why, why_len, "%s: the output would replace the input", out);
    else if (strcmp(base ? base + 1 : out, "quantize_config.json") == 0)
        snprintf(why, why_len, "%s: OUT cannot be named quantize_config.json: the config is "
                 "written beside OUT under that name", out);
    else
        return 0;
    return 1;
}

static void report(const char *out, int json, edgert_quantize_options *o)
{
    char err[1024] = "";
    edgert_checkpoint *ck = NULL;
    edgert_status st = edgert_checkpoint_open(out, &ck, err, sizeof err);
    size_t n = st ? 0 : edgert_checkpoint_layer_count(ck);
    if (json) {
        json_w w;
        json_init(&w, json_out());
        json_obj(&w);
        json_kstr(&w, "out", out);
        json_kstr(&w, "scheme", o->symmetric ? "sym" : "asym");
        json_kint(&w, "group", o->group);
        json_key(&w, "layers");
        json_arr(&w);
        for (size_t i = 0; i < n; i++) {
            const edgert_layer *l = edgert_checkpoint_layer_at(ck, i);
            json_obj(&w);
            json_kstr(&w, "name", l->name);
            json_kint(&w, "n", l->n);
            json_kint(&w, "k", l->k);
            json_kstr(&w, "format", l->format);
            json_end_obj(&w);
        }
        json_end_arr(&w);
        json_said_diags(&w); /* none: quantize opens no handle; the key as every command's */
        json_end_obj(&w);
        json_finish(&w);
    } else {
        tprintf("wrote %s: %zu layers, 4-bit %s, group %u (GPTQ v1, quantize_config.json "
                "beside it)\n", out, n, o->symmetric ? "symmetric" : "asymmetric", o->group);
    }
    if (st)
        tfprintf(stderr, "edgert quantize: warning: reading it back failed: %s\n", err);
    edgert_checkpoint_close(ck);
}

/* ---- --calibrate: GPTQ through the runner ---------------------------------------- */

typedef struct cal_layer {
    char *name;
    uint32_t n, k, dead;
    double seconds, rtn, gptq;
} cal_layer;

typedef struct cal_run {
    cal_layer *l;
    size_t n;
    int tty;
    double t0;
} cal_run;

static void cal_progress(void *user, const edgert_gptq_layer *l)
{
    cal_run *r = user;
    cal_layer *g = realloc(r->l, (r->n + 1) * sizeof *g);
    if (g) {
        r->l = g;
        g[r->n++] = (cal_layer){strdup(l->name), l->n, l->k, l->dead, l->seconds,
                                l->sqnr_rtn_db, l->sqnr_gptq_db};
    }
    if (r->tty)
        fprintf(stderr, "\r\033[K[%u/%u] %.60s  %.0f s", l->index, l->count, l->name,
                measure_now_s() - r->t0);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void cal_report(const cal_run *r, const char *out, int json, const edgert_gptq_options *o,
                       size_t tokens, double seconds)
{
    double *gain = malloc((r->n + 1) * sizeof *gain), worst = INFINITY;
    size_t ng = 0, wi = 0;
    for (size_t i = 0; gain && i < r->n; i++)
        if (isfinite(r->l[i].rtn) && isfinite(r->l[i].gptq)) {
            gain[ng++] = r->l[i].gptq - r->l[i].rtn;
            if (gain[ng - 1] < worst)
                worst = gain[ng - 1], wi = i;
        }
    if (ng)
        qsort(gain, ng, sizeof *gain, cmp_double);
    double median = ng ? (ng % 2 ? gain[ng / 2] : (gain[ng / 2 - 1] + gain[ng / 2]) / 2) : NAN;
    if (json) {
        json_w w;
        json_init(&w, json_out());
        json_obj(&w);
        json_kstr(&w, "out", out);
        json_kstr(&w, "method", "gptq");
        json_kstr(&w, "scheme", o->symmetric ? "sym" : "asym");
        json_kint(&w, "group", o->group ? o->group : 128);
        json_kbool(&w, "act_order", o->act_order);
        json_kint(&w, "calibration_tokens", (long long)tokens);
        json_knum(&w, "seconds", seconds);
        json_knum(&w, "gain_db_median", median);
        json_knum(&w, "gain_db_worst", ng ? worst : NAN);
        json_key(&w, "layers");
        json_arr(&w);
        for (size_t i = 0; i < r->n; i++) {
            json_obj(&w);
            json_kstr(&w, "name", r->l[i].name ? r->l[i].name : "");
            json_kint(&w, "n", r->l[i].n);
            json_kint(&w, "k", r->l[i].k);
            json_kint(&w, "dead_channels", r->l[i].dead);
            json_knum(&w, "seconds", r->l[i].seconds);
            json_knum(&w, "sqnr_rtn_db", r->l[i].rtn);
            json_knum(&w, "sqnr_gptq_db", r->l[i].gptq);
            json_end_obj(&w);
        }
        json_end_arr(&w);
        json_said_diags(&w);
        json_end_obj(&w);
        json_finish(&w);
    } else {
        tprintf("wrote %s: %zu layers by GPTQ on %zu calibration tokens, 4-bit %s, group %u, "
                "in %.0f s (GPTQ v1, quantize_config.json beside it)\n", out, r->n, tokens,
                o->symmetric ? "symmetric" : "asymmetric", o->group ? o->group : 128, seconds);
        if (ng)
            tprintf("held-out output SQNR, GPTQ over round to nearest: median %+.2f dB, worst "
                    "%+.2f dB (%s: %.2f against %.2f dB), over %zu layers\n", median, worst,
                    r->l[wi].name, r->l[wi].gptq, r->l[wi].rtn, ng);
    }
    free(gain);
}

static int calibrated(const char *in, const char *out, const edgert_quantize_options *qo,
                      const char *cal, const char *held, double damp, int json)
{
    char err[4096] = "", *dir = NULL;
    struct stat sb;
    if (stat(in, &sb) != 0) {
        snprintf(err, sizeof err, "%s: %s", in, strerror(errno));
        tfprintf(stderr, "edgert quantize: %s\n", err);
        if (json)
            json_error_object(err, EDGERT_E_IO, EXIT_BADFILE);
        return EXIT_BADFILE;
    }
    if (S_ISDIR(sb.st_mode)) {
        dir = strdup(in);
    } else {
        char *d = strdup(in);
        dir = d ? strdup(dirname(d)) : NULL;
        free(d);
    }
    prompts pc = {0}, ph = {0};
    char *oc = strdup(out);
    int rc = dir && oc ? read_prompts("--calibrate", cal, &pc, err, sizeof err) : EXIT_FAIL;
    if (rc == EXIT_OK && access(dirname(oc), W_OK | X_OK) != 0) { /* before the work: exit 1 */
        snprintf(err, sizeof err, "%s: cannot write into it: %s", oc, strerror(errno));
        rc = EXIT_FAIL;
    }
    free(oc);
    if (rc == EXIT_OK && held)
        rc = read_prompts("--held-out", held, &ph, err, sizeof err);
    edgert_ctx *ctx = NULL;
    edgert_options eo = {.struct_size = sizeof eo, .threads = qo->threads, .defer_load = 1,
                         .no_evidence = 1, .no_env_selection = 1};
    if (rc == EXIT_OK && edgert_open(&eo, &ctx, err, sizeof err) != EDGERT_OK)
        rc = EXIT_FAIL;
    cal_run r = {.tty = isatty(2) && !json, .t0 = measure_now_s()};
    edgert_gptq_options go = {.struct_size = sizeof go, .symmetric = qo->symmetric,
                              .group = qo->group, .prompts = (const int32_t *const *)pc.ids,
                              .prompt_len = pc.len, .prompt_count = pc.count,
                              .held_out = (const int32_t *const *)ph.ids,
                              .held_out_len = ph.len, .held_out_count = ph.count, .damp = damp,
                              .progress = cal_progress, .user = &r,
                              .act_order = qo->act_order};
    edgert_status st = EDGERT_OK;
    if (rc == EXIT_OK) {
        st = edgert_gptq_quantize(ctx, dir, out, &go, err, sizeof err);
        if (r.tty)
            fprintf(stderr, "\r\033[K");
        rc = st == EDGERT_OK ? EXIT_OK
             : st == EDGERT_E_PARSE || st == EDGERT_E_IO ? EXIT_BADFILE
             : st == EDGERT_E_USAGE ? EXIT_USAGE : EXIT_FAIL;
    }
    if (rc == EXIT_OK) {
        size_t tokens = 0;
        for (size_t i = 0; i < pc.count; i++)
            tokens += pc.len[i];
        cal_report(&r, out, json, &go, tokens, measure_now_s() - r.t0);
    } else {
        tfprintf(stderr, "edgert quantize: %s\n", err);
        if (json)
            json_error_object(err, st ? st : EDGERT_E_USAGE, rc);
    }
    for (size_t i = 0; i < r.n; i++)
        free(r.l[i].name);
    free(r.l);
    edgert_close(ctx);
    prompts_free(&pc);
    prompts_free(&ph);
    free(dir);
    return rc;
}

/* argv[*i] if it is --calibrate, --held-out or --damp (with its value), or
 * --act-order: 1 taken, 0 another option, -1 a usage error (said). */
static int gptq_option(int argc, char **argv, int *i, const char **cal, const char **held,
                       double *damp, int *act_order)
{
    const char *a = argv[*i];
    if (!strcmp(a, "--act-order")) {
        *act_order = 1;
        return 1;
    }
    if (!strcmp(a, "--calibrate") || !strcmp(a, "--held-out")) {
        if (*i + 1 >= argc) {
            tfprintf(stderr, "edgert quantize: %s takes a prompt file\n", a);
            return -1;
        }
        *(!strcmp(a, "--calibrate") ? cal : held) = argv[++*i];
        return 1;
    }
    if (strcmp(a, "--damp") != 0)
        return 0;
    char *end;
    const char *v = *i + 1 < argc ? argv[++*i] : "";
    *damp = strtod(v, &end);
    if (!*v || *end || !(*damp > 0 && *damp < 1)) {
        tfprintf(stderr, "edgert quantize: --damp takes a number above 0 and below 1, not "
                 "'%s'\n", v);
        return -1;
    }
    return 1;
}

/* err on stderr (and as the JSON document with --json); the exit code. */
static int failed(int json, const char *err, edgert_status st, int code)
{
    tfprintf(stderr, "edgert quantize: %s\n", err);
    if (json)
        json_error_object(err, st, code);
    return code;
}

int cmd_quantize(int argc, char **argv)
{
    const char *pos[2] = {NULL, NULL};
    int npos = 0, json = json_asked(argc, argv), scheme = -1, opts_done = 0, rc;
    edgert_quantize_options o = {.struct_size = sizeof o, .group = 128};
    const char *cal = NULL, *held = NULL;
    double damp = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (opts_done || a[0] != '-' || !a[1]) {
            if (npos == 2) {
                tfprintf(stderr, "edgert quantize: unexpected argument '%s'\n", a);
                return json ? json_failed(EXIT_USAGE) : EXIT_USAGE;
            }
            pos[npos++] = a;
        } else if (!strcmp(a, "--")) {
            opts_done = 1; /* what follows is IN and OUT, even when it starts with '-' */
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            quantize_help(stdout);
            return EXIT_OK;
        } else if (!strcmp(a, "--sym") || !strcmp(a, "--asym")) {
            if (scheme >= 0 && scheme != !strcmp(a, "--sym")) {
                tfprintf(stderr, "edgert quantize: --sym and --asym exclude each other\n");
                return json ? json_failed(EXIT_USAGE) : EXIT_USAGE;
            }
            scheme = !strcmp(a, "--sym");
        } else if (!strcmp(a, "--group") || !strcmp(a, "--threads")) {
            unsigned v;
            if (parse_u32(a, i + 1 < argc ? argv[++i] : NULL, 1, !strcmp(a, "--group") ? 1u << 20
                                                                                      : 1024, &v))
                return json ? json_failed(EXIT_USAGE) : EXIT_USAGE;
            *(!strcmp(a, "--group") ? &o.group : &o.threads) = v;
        } else if ((rc = gptq_option(argc, argv, &i, &cal, &held, &damp, &o.act_order)) != 0) {
            if (rc < 0)
                return json ? json_failed(EXIT_USAGE) : EXIT_USAGE;
        } else if (strcmp(a, "--json") != 0) {
            tfprintf(stderr, "edgert quantize: unknown option '%s' (see 'edgert quantize "
                     "--help')\n", a);
            return json ? json_failed(EXIT_USAGE) : EXIT_USAGE;
        }
    }
    if (npos != 2 || scheme < 0) {
        tfprintf(stderr, "edgert quantize: %s (see 'edgert quantize --help')\n",
                 npos != 2 ? "name IN and OUT" : "choose --sym or --asym");
        return json ? json_failed(EXIT_USAGE) : EXIT_USAGE;
    }
    o.symmetric = scheme;
    const char *alone = cal ? NULL
                        : held ? "--held-out measures a --calibrate run"
                        : damp > 0 ? "--damp is GPTQ's, with --calibrate"
                        : o.act_order ? "--act-order is GPTQ's, with --calibrate" : NULL;
    if (alone) {
        tfprintf(stderr, "edgert quantize: %s\n", alone);
        return json ? json_failed(EXIT_USAGE) : EXIT_USAGE;
    }
    if (json && json_keep_stdout() != 0)
        tfprintf(stderr, "edgert: warning: cannot set stdout aside for the JSON document\n");
    char err[4096] = "";
    if (cal && out_misnamed(pos[0], pos[1], err, sizeof err))
        return failed(json, err, EDGERT_E_USAGE, EXIT_USAGE);
    if (cal)
        return calibrated(pos[0], pos[1], &o, cal, held, damp, json);
    if (input_file_check(NULL, pos[0], err, sizeof err) != 0) /* named explicitly: exit 4 */
        return failed(json, err, EDGERT_E_IO, EXIT_BADFILE);
    if (out_misnamed(pos[0], pos[1], err, sizeof err))
        return failed(json, err, EDGERT_E_USAGE, EXIT_USAGE);
    /* a 4-bit file (GPTQ, or packed for a backend) is one pack, verify and
     * bench take: this command's refusal, exit 1, not a malformed file */
    edgert_checkpoint *ck = NULL;
    if (edgert_checkpoint_open(pos[0], &ck, err, sizeof err) == EDGERT_OK &&
        strcmp(edgert_checkpoint_kind(ck), "dense") != 0) {
        int packed = strcmp(edgert_checkpoint_kind(ck), "packed") == 0;
        snprintf(err, sizeof err, "%s is a %s checkpoint, already 4-bit: quantize reads a dense "
                 "F32/F16/BF16 one (%s take it)", pos[0], edgert_checkpoint_kind(ck),
                 packed ? "bench --weights and select --weights"
                        : "pack, verify --weights and bench --weights");
        edgert_checkpoint_close(ck);
        return failed(json, err, EDGERT_E_USAGE, EXIT_FAIL);
    }
    edgert_checkpoint_close(ck);
    err[0] = '\0';
    edgert_status st = edgert_checkpoint_quantize(pos[0], pos[1], &o, err, sizeof err);
    if (st)
        return failed(json, err, st, exit_code(st));
    report(pos[1], json, &o);
    return EXIT_OK;
}
