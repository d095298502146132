/*
 * tools/quantize.c — `edgert quantize`: a dense safetensors checkpoint to a
 * GPTQ int4 one, through edgert_checkpoint_quantize (edgert.h has the rules),
 * then opened again to list what was written.
 *
 *   edgert quantize IN OUT --sym|--asym [--group N] [--threads N] [--json]
 * Exit codes: 0 written, 1 cannot write, or the input refused for what it
 * holds (already 4-bit, a dtype or K it cannot write, a scale past fp16:
 * files pack takes), 2 usage, 4 the input is missing or
 * malformed (its message names the file and the tensor). Nothing is left at OUT on
 * failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static void quantize_help(FILE *f)
{
    fprintf(f,
            "usage: edgert quantize IN OUT --sym|--asym [--group N] [--threads N] [--json]\n\n"
            "Quantize a dense checkpoint (safetensors, F32/F16/BF16) to 4-bit GPTQ by round\n"
            "to nearest: every linear layer (2-D 'P.weight' that is not an embedding) becomes\n"
            "P.qweight/P.qzeros/P.scales/P.g_idx in GPTQ's v1 layout, which AutoGPTQ,\n"
            "GPTQModel and vLLM read; other tensors are copied. A tied output head is\n"
            "untied and quantized as 'lm_head'. quantize_config.json is written beside OUT.\n"
            "One layer is in memory at a time; OUT appears only when complete.\n\n"
            "  --sym        symmetric: zero point 8, scale max|w| / 7 (feeds W4A8 backends)\n"
            "  --asym       asymmetric: scale and zero point per group (W4A16 backends)\n"
            "  --group N    group size along K (default 128)\n"
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

int cmd_quantize(int argc, char **argv)
{
    const char *pos[2] = {NULL, NULL};
    int npos = 0, json = json_asked(argc, argv), scheme = -1, opts_done = 0;
    edgert_quantize_options o = {.struct_size = sizeof o, .group = 128};
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
    if (json && json_keep_stdout() != 0)
        tfprintf(stderr, "edgert: warning: cannot set stdout aside for the JSON document\n");
    char err[4096] = "";
    if (input_file_check(NULL, pos[0], err, sizeof err) != 0) { /* named explicitly: exit 4 */
        tfprintf(stderr, "edgert quantize: %s\n", err);
        if (json)
            json_error_object(err, EDGERT_E_IO, EXIT_BADFILE);
        return EXIT_BADFILE;
    }
    if (out_misnamed(pos[0], pos[1], err, sizeof err)) {
        tfprintf(stderr, "edgert quantize: %s\n", err);
        if (json)
            json_error_object(err, EDGERT_E_USAGE, EXIT_USAGE);
        return EXIT_USAGE;
    }
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
        tfprintf(stderr, "edgert quantize: %s\n", err);
        if (json)
            json_error_object(err, EDGERT_E_USAGE, EXIT_FAIL);
        return EXIT_FAIL;
    }
    edgert_checkpoint_close(ck);
    err[0] = '\0';
    edgert_status st = edgert_checkpoint_quantize(pos[0], pos[1], &o, err, sizeof err);
    if (st) {
        tfprintf(stderr, "edgert quantize: %s\n", err);
        if (json)
            json_error_object(err, st, exit_code(st));
        return exit_code(st);
    }
    report(pos[1], json, &o);
    return EXIT_OK;
}
