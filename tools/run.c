/*
 * tools/run.c — `edgert run`: a whole model on a backend (edgert/runner.h).
 *
 *   edgert run MODEL --prompt-ids FILE|LIST [--max-new-tokens N] [--backend NAME|fp32]
 *   edgert run MODEL --compare [BACKEND,...] --prompts FILE [--tokens T]
 *
 * Token ids in and out (no tokenizer). A prompt file holds one prompt per
 * line, its ids separated by spaces or commas ('#' starts a comment); a
 * LIST is one prompt written on the command line ("1,2,3").
 *
 * Run: each prompt is prefilled, then greedy decoding for N new tokens
 * (stopping at the model's eos_token_id unless --ignore-eos). The figures:
 * prefill tokens/s, decode tokens/s and ms per step (median and
 * [min..max] of the steps), the weight bytes one step reads, that rate as
 * a fraction of the memory read ceiling measured in the same run (the
 * best of bench's reads, just before the decode), peak RSS.
 *
 * Compare: the origin's fidelity measure on the user's own model. The
 * reference is the fp32 path (the file's values, fp32 arithmetic). For each
 * prompt it decodes T tokens greedily; each backend then decodes the same
 * prompt freely (exact reproduction: all T tokens equal; tokens until the
 * first that differs), and is run again on the prompt followed by the
 * reference's tokens (teacher forcing): the mean KL(reference || backend)
 * of the T next-token distributions, and how often its top-1 is the
 * reference's token.
 * Length: over 700 lines would not be; the two modes and their output share
 * the prompt reader and the model opener.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "edgert/runner.h"
#include "measure.h"
#include "peaks.h"
#include "prompts.h"

void run_help(FILE *f)
{
    fprintf(f,
            "usage: edgert run MODEL --prompt-ids FILE|LIST [--max-new-tokens N] [options]\n"
            "       edgert run MODEL --compare [BACKEND,...] --prompts FILE [--tokens T]\n\n"
            "Run a Hugging Face model folder (config.json + model.safetensors, or shards\n"
            "with model.safetensors.index.json; dense F32/F16/BF16 or 4-bit GPTQ) of the\n"
            "Llama family (llama, mistral, qwen2, qwen3) on a backend: every linear\n"
            "layer through edgert_step, the rest (embedding, RMSNorm, rotary embedding,\n"
            "causal attention over a KV cache, SiLU MLP) on the runner's side. Token ids\n"
            "in and out, no tokenizer: a prompt file holds one prompt per line, ids\n"
            "separated by spaces or commas ('#' comments); a LIST is \"1,2,3\". Prints\n"
            "the greedy tokens, prefill and decode tokens/s (median [min..max] of the\n"
            "steps), the weight bytes a step reads as a fraction of the memory read\n"
            "ceiling measured in the same run, and peak RSS.\n\n"
            "  --backend NAME      the backend (default: the one 'select' picks for\n"
            "                      --priority that runs in this process); fp32: the dense\n"
            "                      reference (the file's values, fp32 arithmetic)\n"
            "  --priority P        speed (default) or fidelity\n"
            "  --max-new-tokens N  tokens to generate (default 32); stops at config.json's\n"
            "                      eos_token_id unless --ignore-eos\n"
            "  --group N           quantize dense layers with groups of N (32, 64, 128;\n"
            "                      default the largest dividing every layer's K)\n"
            "  --context N         KV cache positions (default max_position_embeddings,\n"
            "                      at most 4096)\n"
            "  --kv-cache f16|f32  the KV cache's values: fp16 (half the bytes attention\n"
            "                      reads) or fp32; default f16 on a backend where this\n"
            "                      CPU's attention kernels have it (AVX2 + F16C without\n"
            "                      AVX-512 today), else f32; the fp32 reference keeps f32\n"
            "  --packed FILE       map the linear layers from 'edgert pack' output\n"
            "  --options STR       plugin options, after the manifest's\n"
            "  --paired N          after each prompt's tokens, N more steps, each timed\n"
            "                      beside the same step's GEMMs alone (what the runner's\n"
            "                      own work adds: the ratio, median [min..max])\n"
            "  --logits FILE       write every step's logits there (float32, vocab per\n"
            "                      step, the prompts one after the other)\n"
            "  --compare [LIST]    fidelity against the fp32 reference, for every eligible\n"
            "                      in-process backend or the LIST: per backend, exact\n"
            "                      greedy reproductions of --prompts' prompts over T tokens,\n"
            "                      mean tokens until the first that differs, and with the\n"
            "                      reference's tokens forced, mean KL(ref || backend) and\n"
            "                      how often its top-1 is the reference's token\n"
            "  --tokens T          tokens per prompt for --compare (default 64)\n"
            "  --reference DIR     --compare against DIR's fp32 reference (the dense model\n"
            "                      MODEL was quantized from) instead of MODEL's own\n"
            "  --store             with --compare: keep each backend's top-1 and KL as\n"
            "                      evidence of this device (its other figures, from\n"
            "                      'edgert calibrate', kept), so that --priority fidelity\n"
            "                      ranks by what the model measured; 'select --explain'\n"
            "                      names the source\n"
            "  -o, --out FILE      with --store: the evidence file to write (default the\n"
            "                      per-user one that every command reads)\n\n"
            "Exit codes: 0 ok, 1 failure, 2 usage, 3 the backend is not eligible, 4 the\n"
            "model folder or a prompt file is missing or malformed, or a model the runner\n"
            "does not run (another architecture, rope_scaling type).\n\n");
}

static int exit_of(edgert_status st)
{
    return st == EDGERT_E_PARSE || st == EDGERT_E_IO         ? EXIT_BADFILE
           : st == EDGERT_E_UNSUPPORTED                      ? EXIT_BADFILE
           : st == EDGERT_E_USAGE                            ? EXIT_USAGE
           : st == EDGERT_E_NOT_ELIGIBLE || st == EDGERT_E_NOT_FOUND ? EXIT_NONE
                                                             : EXIT_FAIL;
}

static unsigned long long vm_hwm(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0 && sscanf(line + 6, "%llu", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb * 1024ull;
}

static int open_model_in(const cli *c, edgert_ctx *ctx, const char *dir, const char *backend,
                         edgert_model **m)
{
    edgert_model_options o = {.struct_size = sizeof o, .backend = backend,
                              .priority = c->priority, .backend_options = c->options,
                              .context = c->context, .group = c->group, .packed = c->packed,
                              .kv_cache_bits = c->kv_cache_bits};
    char err[4096] = "";
    edgert_status st = edgert_model_open(ctx, dir, &o, m, err, sizeof err);
    if (st) {
        tfprintf_lines(stderr, "edgert run: %s\n", err);
        cli_fail_status(st);
        return exit_of(st);
    }
    return EXIT_OK;
}

static int open_model(const cli *c, edgert_ctx *ctx, const char *backend, edgert_model **m)
{
    return open_model_in(c, ctx, c->input, backend, m);
}

static int argmax(const float *v, uint32_t n)
{
    int best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (v[i] > v[best])
            best = (int)i;
    return best;
}

/* ---- run ------------------------------------------------------------------------------- */

typedef struct gen {
    int32_t *out;
    uint32_t n;
    double prefill_s, *step_s;
    double *pair_full, *pair_gemm; /* --paired: seconds of each pair's two steps */
    uint32_t pairs;
    FILE *logits; /* --logits: every step's logits appended, or NULL */
} gen;

static int generate(const cli *c, edgert_model *m, const int32_t *ids, uint32_t len, gen *g,
                    int show)
{
    const edgert_model_info *info = edgert_model_get_info(m);
    float *logits = malloc((size_t)info->vocab * sizeof(float));
    char err[4096] = "";
    g->out = malloc((c->max_new + 1) * sizeof *g->out);
    g->step_s = malloc((c->max_new + 1) * sizeof *g->step_s);
    g->n = 0;
    if (!logits || !g->out || !g->step_s) {
        free(logits);
        tfprintf(stderr, "edgert run: out of memory\n");
        return EXIT_FAIL;
    }
    edgert_model_reset(m);
    double t0 = measure_now_s();
    edgert_status st = edgert_model_forward(m, ids, len, logits, 0, err, sizeof err);
    g->prefill_s = measure_now_s() - t0;
    while (!st && g->n < c->max_new) {
        if (g->logits && fwrite(logits, sizeof(float), info->vocab, g->logits) != info->vocab)
            st = EDGERT_E_IO, snprintf(err, sizeof err, "--logits: %s", strerror(errno));
        if (st)
            break;
        int32_t t = argmax(logits, info->vocab);
        g->out[g->n++] = t;
        if ((t == info->eos && !c->ignore_eos) || g->n == c->max_new)
            break;
        t0 = measure_now_s();
        st = edgert_model_forward(m, &t, 1, logits, 0, err, sizeof err);
        g->step_s[g->n - 1] = measure_now_s() - t0;
        if (show)
            fprintf(stderr, "\r  decoding %u/%u tokens, %.1f ms/step ", g->n, c->max_new,
                    1e3 * g->step_s[g->n - 1]);
    }
    /* --paired N: more steps, each beside one of its GEMMs alone (the order
     * alternating, so neither always runs second) */
    g->pair_full = c->paired ? calloc(c->paired, sizeof(double)) : NULL;
    g->pair_gemm = c->paired ? calloc(c->paired, sizeof(double)) : NULL;
    for (uint32_t i = 0; !st && g->pair_full && g->pair_gemm && i < c->paired &&
                         edgert_model_position(m) < info->context; i++) {
        int32_t t = argmax(logits, info->vocab);
        for (int k = 0; !st && k < 2; k++) {
            t0 = measure_now_s();
            if ((k == 0) == (i % 2 == 0)) {
                st = edgert_model_forward(m, &t, 1, logits, 0, err, sizeof err);
                g->pair_full[i] = measure_now_s() - t0;
            } else {
                st = edgert_model_gemm_step(m, err, sizeof err);
                g->pair_gemm[i] = measure_now_s() - t0;
            }
        }
        g->pairs += !st;
    }
    if (show)
        fprintf(stderr, "\r%60s\r", "");
    free(logits);
    if (st) {
        tfprintf_lines(stderr, "edgert run: %s\n", err);
        cli_fail_status(st);
        return exit_of(st);
    }
    return EXIT_OK;
}

static void print_ids(json_w *w, const int32_t *ids, uint32_t n)
{
    if (w) {
        json_arr(w);
        for (uint32_t i = 0; i < n; i++)
            json_int(w, ids[i]);
        json_end_arr(w);
        return;
    }
    for (uint32_t i = 0; i < n; i++)
        tprintf("%s%d", i ? " " : "", ids[i]);
    tprintf("\n");
}

static void model_json(json_w *w, const edgert_model_info *i)
{
    json_key(w, "model");
    json_obj(w);
    json_kstr(w, "model_type", i->model_type);
    json_kstr(w, "weights", i->weights);
    json_kint(w, "layers", i->layers);
    json_kint(w, "hidden", i->hidden);
    json_kint(w, "vocab", i->vocab);
    json_kint(w, "context", i->context);
    json_kint(w, "group", i->group);
    json_kbool(w, "fused_qkv", i->fused_qkv);
    json_kbool(w, "fused_gate_up", i->fused_gate_up);
    json_kint(w, "gemms_per_step", i->gemms_per_step);
    json_kint(w, "step_weight_bytes", (long long)i->step_weight_bytes);
    json_kint(w, "kv_cache_bytes", (long long)i->kv_cache_bytes);
    json_kint(w, "kv_cache_bits", i->kv_cache_bits);
    json_end_obj(w);
}

static void print_header(const cli *c, const edgert_model_info *info)
{
    tprintf("%s on %s (%s): %s, %u layers, hidden %u, %s weights, %.1f MiB read per step, %u "
            "GEMMs per step%s\n", c->input, info->backend, info->backend_path, info->model_type,
            info->layers, info->hidden, info->weights, info->step_weight_bytes / 1048576.0,
            info->gemms_per_step, info->fused_qkv && info->fused_gate_up
                                      ? " (q/k/v and gate/up each one GEMM)" : "");
    if (info->group)
        tprintf("  dense layers quantized here: round to nearest, group %u, %s\n", info->group,
                info->symmetric ? "symmetric" : "asymmetric");
    if (info->passed_over && *info->passed_over)
        tfprintf_lines(stderr, "edgert run: ranked above %s, but cannot take these weights: "
                       "%s\n", info->backend, info->passed_over);
}

typedef struct figures {
    double med, lo, hi; /* seconds per decode step */
    uint32_t steps;
} figures;

static figures step_figures(const gen *g)
{
    figures f = {NAN, NAN, NAN, g->n ? g->n - 1 : 0};
    double *s = f.steps ? malloc(f.steps * sizeof *s) : NULL;
    if (s) {
        memcpy(s, g->step_s, f.steps * sizeof *s);
        f.med = measure_median(s, f.steps);
        f.lo = s[0];
        f.hi = s[f.steps - 1];
    }
    free(s);
    return f;
}

/* --paired: the medians of the whole steps and of their GEMMs alone, and
 * of the ratio within each pair, with its range. */
typedef struct paired {
    double full, gemm, ratio, lo, hi;
} paired;

static paired pair_figures(const gen *g)
{
    paired r = {NAN, NAN, NAN, NAN, NAN};
    double *a = g->pairs ? malloc(3 * g->pairs * sizeof *a) : NULL;
    if (!a)
        return r;
    double *b = a + g->pairs, *q = b + g->pairs;
    for (uint32_t i = 0; i < g->pairs; i++) {
        a[i] = g->pair_full[i];
        b[i] = g->pair_gemm[i];
        q[i] = a[i] / b[i];
    }
    r.full = measure_median(a, g->pairs);
    r.gemm = measure_median(b, g->pairs);
    r.ratio = measure_median(q, g->pairs);
    r.lo = q[0];
    r.hi = q[g->pairs - 1];
    free(a);
    return r;
}

static void print_result(const cli *c, json_w *w, const edgert_model_info *info, uint32_t plen,
                         const gen *g, double ceiling)
{
    figures f = step_figures(g);
    paired pr = pair_figures(g);
    double gbs = info->step_weight_bytes / f.med / 1e9;
    if (c->json) {
        json_obj(w);
        json_kint(w, "prompt_tokens", plen);
        json_key(w, "tokens");
        print_ids(w, g->out, g->n);
        json_knum(w, "prefill_s", g->prefill_s);
        json_knum(w, "prefill_tokens_per_s", plen / g->prefill_s);
        json_kint(w, "decode_steps", f.steps);
        json_knum(w, "decode_ms_median", 1e3 * f.med);
        json_knum(w, "decode_ms_min", 1e3 * f.lo);
        json_knum(w, "decode_ms_max", 1e3 * f.hi);
        json_knum(w, "decode_tokens_per_s", 1.0 / f.med);
        json_knum(w, "decode_weight_gbs", gbs);
        json_knum(w, "decode_fraction_of_ceiling", gbs / ceiling);
        if (g->pairs) {
            json_key(w, "paired");
            json_obj(w);
            json_kint(w, "pairs", g->pairs);
            json_knum(w, "whole_step_ms", 1e3 * pr.full);
            json_knum(w, "gemm_step_ms", 1e3 * pr.gemm);
            json_knum(w, "ratio_median", pr.ratio);
            json_knum(w, "ratio_min", pr.lo);
            json_knum(w, "ratio_max", pr.hi);
            json_end_obj(w);
        }
        json_end_obj(w);
        return;
    }
    print_ids(NULL, g->out, g->n);
    tprintf("  prefill %u tokens in %.1f ms (%.1f tok/s)", plen, 1e3 * g->prefill_s,
            plen / g->prefill_s);
    if (f.steps)
        tprintf("; decode %u steps: %.2f ms/step [%.2f..%.2f], %.1f tok/s, weights read at "
                "%.1f GB/s = %.2f of the read ceiling (%.1f GB/s)", f.steps, 1e3 * f.med,
                1e3 * f.lo, 1e3 * f.hi, 1.0 / f.med, gbs, gbs / ceiling, ceiling);
    tprintf("\n");
    if (g->pairs)
        tprintf("  paired (%u steps at positions %u..%u, each beside its GEMMs alone): whole "
                "step %.2f ms, GEMMs %.2f ms: %.3fx [%.3f..%.3f]\n", g->pairs, plen + g->n,
                plen + g->n + g->pairs - 1, 1e3 * pr.full, 1e3 * pr.gemm, pr.ratio, pr.lo, pr.hi);
}

/* Every prompt first (peak RSS is then the model's), the read ceiling right
 * after the last decode, then the figures. */
static int cmd_generate(const cli *c, edgert_ctx *ctx, const prompts *p)
{
    edgert_model *m = NULL;
    int rc = open_model(c, ctx, c->backend, &m);
    if (rc)
        return rc;
    const edgert_model_info *info = edgert_model_get_info(m);
    if (!c->json)
        print_header(c, info);
    int show = !c->json && !c->quiet && isatty(2);
    gen *g = calloc(p->count, sizeof *g);
    rc = g ? EXIT_OK : EXIT_FAIL;
    FILE *lf = NULL; /* written beside --logits, renamed onto it when complete */
    char tmp[4200] = "";
    if (!rc && c->logits) {
        snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", c->logits);
        int fd = mkstemp(tmp);
        if (fd < 0 || !(lf = fdopen(fd, "wb"))) {
            tfprintf(stderr, "edgert run: --logits %s: %s\n", c->logits, strerror(errno));
            if (fd >= 0) {
                close(fd);
                unlink(tmp);
            }
            tmp[0] = '\0';
            rc = EXIT_FAIL;
        }
    }
    for (size_t i = 0; !rc && i < p->count; i++) {
        g[i].logits = lf;
        rc = generate(c, m, p->ids[i], p->len[i], &g[i], show);
    }
    if (lf && fclose(lf) != 0 && !rc) {
        tfprintf(stderr, "edgert run: --logits %s: %s\n", c->logits, strerror(errno));
        rc = EXIT_FAIL;
    }
    if (tmp[0] && (rc || rename(tmp, c->logits) != 0)) {
        if (!rc) {
            tfprintf(stderr, "edgert run: --logits %s: %s\n", c->logits, strerror(errno));
            rc = EXIT_FAIL;
        }
        unlink(tmp);
    }
    unsigned long long hwm = vm_hwm();
    bw_result bw = {0};
    double ceiling = NAN;
    /* 256 MiB, 8x the largest last-level cache of the machines measured on
     * (32 MiB), 3 passes: bench's reads at a quarter of its 1 GiB x 7, since
     * every run pays for it (a few hundred ms) */
    if (!rc && peak_bandwidth(edgert_thread_count(ctx), (size_t)256 << 20, 3,
                              edgert_device_facts(ctx)->cpu_flags, NULL, 0, &bw) == 0)
        ceiling = bw_ceiling(&bw);
    json_w w;
    if (!rc && c->json) {
        json_init(&w, json_out());
        json_obj(&w);
        json_kstr(&w, "backend", info->backend);
        json_kstr(&w, "path", info->backend_path);
        json_kstr(&w, "passed_over", info->passed_over);
        model_json(&w, info);
        json_knum(&w, "read_ceiling_gbs", ceiling);
        json_key(&w, "prompts");
        json_arr(&w);
    }
    for (size_t i = 0; !rc && i < p->count; i++)
        print_result(c, &w, info, p->len[i], &g[i], ceiling);
    if (!rc && c->json) {
        json_end_arr(&w);
        json_kint(&w, "peak_rss_bytes", (long long)hwm);
        json_said_diags(&w);
        json_end_obj(&w);
        json_finish(&w);
    } else if (!rc) {
        tprintf("peak RSS %.1f MiB (KV cache %.1f MiB, fp%u, for %u positions)\n",
                hwm / 1048576.0, info->kv_cache_bytes / 1048576.0, info->kv_cache_bits,
                info->context);
    }
    for (size_t i = 0; g && i < p->count; i++) {
        free(g[i].out);
        free(g[i].step_s);
        free(g[i].pair_full);
        free(g[i].pair_gemm);
    }
    free(g);
    edgert_model_close(m);
    return rc;
}

/* ---- compare ---------------------------------------------------------------------------- */

typedef struct ref_run {
    int32_t *tokens;  /* [T] greedy */
    float *logp;      /* [T][V] log-probabilities of the reference */
    uint32_t vocab;   /* V */
} ref_run;

static void log_softmax(float *v, uint32_t n)
{
    float mx = v[0];
    for (uint32_t i = 1; i < n; i++)
        mx = v[i] > mx ? v[i] : mx;
    double s = 0;
    for (uint32_t i = 0; i < n; i++)
        s += exp((double)v[i] - mx);
    float l = (float)(mx + log(s));
    for (uint32_t i = 0; i < n; i++)
        v[i] -= l;
}

/* Greedy T tokens of prompt i; with logp, the log-probabilities of each step. */
static edgert_status greedy(edgert_model *m, const int32_t *ids, uint32_t len, uint32_t T,
                            int32_t *out, float *logp, char *err, size_t elen)
{
    uint32_t V = edgert_model_get_info(m)->vocab;
    float *lg = malloc((size_t)V * sizeof(float));
    if (!lg)
        return EDGERT_E_NOMEM;
    edgert_model_reset(m);
    edgert_status st = edgert_model_forward(m, ids, len, lg, 0, err, elen);
    for (uint32_t t = 0; !st && t < T; t++) {
        out[t] = argmax(lg, V);
        if (logp) {
            memcpy(logp + (size_t)t * V, lg, (size_t)V * sizeof(float));
            log_softmax(logp + (size_t)t * V, V);
        }
        if (t + 1 < T)
            st = edgert_model_forward(m, &out[t], 1, lg, 0, err, elen);
    }
    free(lg);
    return st;
}

typedef struct cmp_row {
    char name[128];
    unsigned exact, prompts;
    double first_div, kl, top1;
    int failed;
} cmp_row;

/* One backend against the reference runs: free greedy, then teacher forcing. */
static int compare_one(const cli *c, edgert_ctx *ctx, const char *backend, const prompts *p,
                       const ref_run *ref, cmp_row *row)
{
    edgert_model *m = NULL;
    int rc = open_model(c, ctx, backend, &m);
    if (rc)
        return rc;
    uint32_t T = c->tokens, V = edgert_model_get_info(m)->vocab;
    snprintf(row->name, sizeof row->name, "%.127s", edgert_model_get_info(m)->backend);
    if (V != ref[0].vocab) { /* --reference: another model's */
        tfprintf(stderr, "edgert run: --reference %s has a vocabulary of %u, %s one of %u: not "
                 "the model it was quantized from\n", c->reference, ref[0].vocab, c->input, V);
        edgert_model_close(m);
        return EXIT_USAGE;
    }
    int32_t *mine = malloc(T * sizeof *mine);
    char err[4096] = "";
    double kl_sum = 0, top1 = 0, div_sum = 0;
    edgert_status st = mine ? EDGERT_OK : EDGERT_E_NOMEM;
    for (size_t i = 0; !st && i < p->count; i++) {
        st = greedy(m, p->ids[i], p->len[i], T, mine, NULL, err, sizeof err);
        uint32_t d = 0;
        while (!st && d < T && mine[d] == ref[i].tokens[d])
            d++;
        row->exact += !st && d == T;
        div_sum += d;
        /* teacher forcing: the prompt, then the reference's tokens */
        uint32_t n = p->len[i] + T - 1;
        int32_t *seq = malloc(n * sizeof *seq);
        float *lg = malloc((size_t)T * V * sizeof *lg);
        if (!st && (!seq || !lg))
            st = EDGERT_E_NOMEM;
        if (!st) {
            memcpy(seq, p->ids[i], p->len[i] * sizeof *seq);
            memcpy(seq + p->len[i], ref[i].tokens, (T - 1) * sizeof *seq);
            edgert_model_reset(m);
            if (p->len[i] > 1)
                st = edgert_model_forward(m, seq, p->len[i] - 1, lg, 0, err, sizeof err);
            if (!st)
                st = edgert_model_forward(m, seq + p->len[i] - 1, T, lg, 1, err, sizeof err);
        }
        for (uint32_t t = 0; !st && t < T; t++) {
            float *q = lg + (size_t)t * V;
            const float *r = ref[i].logp + (size_t)t * V;
            top1 += argmax(q, V) == ref[i].tokens[t];
            log_softmax(q, V);
            double kl = 0;
            for (uint32_t v = 0; v < V; v++)
                kl += exp((double)r[v]) * ((double)r[v] - q[v]);
            kl_sum += kl;
        }
        free(seq);
        free(lg);
    }
    row->prompts = (unsigned)p->count;
    row->first_div = div_sum / p->count;
    row->kl = kl_sum / ((double)p->count * T);
    row->top1 = top1 / ((double)p->count * T);
    if (st) {
        tfprintf_lines(stderr, "edgert run --compare: %s: %s\n", backend,
                       err[0] ? err : "out of memory");
        row->failed = 1;
    }
    free(mine);
    edgert_model_close(m);
    return st ? exit_of(st) : EXIT_OK;
}

/* The backends to compare: the list given, else every eligible one that runs
 * in this process. */
static size_t compare_names(const cli *c, edgert_ctx *ctx, char names[][128], size_t max)
{
    size_t n = 0;
    if (c->compare_list) {
        char *copy = strdup(c->compare_list), *save = NULL;
        for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t && n < max;
             t = strtok_r(NULL, ",", &save))
            snprintf(names[n++], 128, "%.127s", t);
        free(copy);
        return n;
    }
    for (size_t i = 0; i < edgert_candidate_count(ctx) && n < max; i++) {
        const edgert_candidate *k = edgert_candidate_at(ctx, i);
        if (k->eligible && k->runs_in_process)
            snprintf(names[n++], 128, "%.127s", k->name);
    }
    return n;
}

/* --store: the compared backends' top-1 and KL as evidence of this device,
 * beside what the file holds of them (keep_unmeasured), their source named.
 * *where: the file written, or NULL. EXIT_OK, or EXIT_FAIL after saying why. */
static int store_compare(const cli *c, edgert_ctx *ctx, const prompts *p, const cmp_row *rows,
                         size_t nb, const char **where)
{
    edgert_evidence *items = calloc(nb ? nb : 1, sizeof *items);
    char source[8400], err[4096] = "";
    size_t n = 0;
    *where = NULL;
    if (!items) {
        tfprintf(stderr, "edgert run --compare --store: out of memory\n");
        return EXIT_FAIL;
    }
    snprintf(source, sizeof source, "model %.4096s, %zu prompts x %u tokens, teacher-forced "
             "against %s%.4096s", c->input, p->count, c->tokens,
             c->reference ? "the fp32 reference of " : "its fp32 reference",
             c->reference ? c->reference : "");
    for (size_t b = 0; b < nb; b++) {
        if (rows[b].failed)
            continue;
        edgert_evidence *e = &items[n++];
        *e = (edgert_evidence){.struct_size = sizeof *e, .backend = rows[b].name,
                               .decode_tokens_per_s = NAN, .prefill_gflops = NAN,
                               .top1_agreement = rows[b].top1,
                               /* summed in double from fp32 log-probabilities: a
                                * backend equal to the reference reads -1e-7 */
                               .kl_mean = rows[b].kl > 0 ? rows[b].kl : 0.0,
                               .sqnr_min_db = NAN, .threads = edgert_thread_count(ctx),
                               .correct = -1, .top1_tokens = (unsigned)(p->count * c->tokens),
                               .keep_unmeasured = 1, .fidelity_source = source};
    }
    edgert_status st = n ? edgert_evidence_store(ctx, NULL, items, n, err, sizeof err)
                         : EDGERT_OK;
    free(items);
    if (st) {
        tfprintf_lines(stderr, "edgert run --compare --store: %s\n", err);
        return EXIT_FAIL;
    }
    *where = n ? edgert_evidence_path(ctx) : NULL;
    if (!c->json && !c->quiet && *where)
        tfprintf(stderr, "stored %zu backends' top-1 and KL as evidence in %s\n", n, *where);
    return EXIT_OK;
}

static int cmd_compare(const cli *c, edgert_ctx *ctx, const prompts *p)
{
    uint32_t T = c->tokens;
    edgert_model *m = NULL;
    int rc = open_model_in(c, ctx, c->reference ? c->reference : c->input, "fp32", &m);
    if (rc)
        return rc;
    uint32_t V = edgert_model_get_info(m)->vocab;
    ref_run *ref = calloc(p->count, sizeof *ref);
    char err[4096] = "";
    edgert_status st = ref ? EDGERT_OK : EDGERT_E_NOMEM;
    for (size_t i = 0; !st && i < p->count; i++) {
        ref[i].vocab = V;
        ref[i].tokens = malloc(T * sizeof(int32_t));
        ref[i].logp = malloc((size_t)T * V * sizeof(float));
        st = ref[i].tokens && ref[i].logp
                 ? greedy(m, p->ids[i], p->len[i], T, ref[i].tokens, ref[i].logp, err, sizeof err)
                 : EDGERT_E_NOMEM;
    }
    edgert_model_close(m);
    if (st) {
        tfprintf_lines(stderr, "edgert run --compare: the fp32 reference: %s\n",
                       err[0] ? err : "out of memory");
        rc = exit_of(st);
    }
    char names[64][128];
    size_t nb = rc ? 0 : compare_names(c, ctx, names, 64);
    cmp_row *rows = calloc(nb ? nb : 1, sizeof *rows);
    size_t ran = 0; /* a named backend that fails ends the list: the rest are not shown */
    for (size_t b = 0; !rc && b < nb; b++, ran++) {
        if (!c->quiet && !c->json)
            tfprintf(stderr, "  comparing %s ...\n", names[b]);
        int r = compare_one(c, ctx, names[b], p, ref, &rows[b]);
        if (r) {
            rows[b].failed = 1;
            snprintf(rows[b].name, sizeof rows[b].name, "%.127s", names[b]);
            if (c->compare_list)
                rc = r; /* named: its failure is the command's */
        }
    }
    nb = ran;
    const char *stored = NULL;
    if (!rc && c->store)
        rc = store_compare(c, ctx, p, rows, nb, &stored);
    if (c->json) {
        json_w w;
        json_init(&w, json_out());
        json_obj(&w);
        json_kstr(&w, "model", c->input);
        json_kstr(&w, "evidence_stored", stored); /* --store's file, else null */
        json_kint(&w, "prompts", (long long)p->count);
        json_kint(&w, "tokens", T);
        json_kstr(&w, "reference", c->reference ? c->reference : "fp32");
        json_key(&w, "backends");
        json_arr(&w);
        for (size_t b = 0; b < nb; b++) {
            json_obj(&w);
            json_kstr(&w, "backend", rows[b].name);
            json_kbool(&w, "ok", !rows[b].failed);
            if (!rows[b].failed) {
                json_kint(&w, "exact_reproductions", rows[b].exact);
                json_knum(&w, "mean_tokens_to_divergence", rows[b].first_div);
                json_knum(&w, "mean_kl", rows[b].kl);
                json_knum(&w, "top1_forced", rows[b].top1);
            }
            json_end_obj(&w);
        }
        json_end_arr(&w);
        json_said_diags(&w);
        json_end_obj(&w);
        json_finish(&w);
    } else if (nb) {
        tprintf("%s: %zu prompts x %u tokens, against the fp32 reference%s%s (greedy)\n",
                c->input, p->count, T, c->reference ? " of " : "",
                c->reference ? c->reference : "");
        tprintf("  %-16s %10s %18s %10s %14s\n", "backend", "exact", "tokens to diverge",
                "mean KL", "top-1 forced");
        for (size_t b = 0; b < nb; b++) {
            if (rows[b].failed) {
                tprintf("  %-16s (failed: see above)\n", rows[b].name);
                continue;
            }
            tprintf("  %-16s %6u/%-3u %18.1f %10.4f %14.3f\n", rows[b].name, rows[b].exact,
                    rows[b].prompts, rows[b].first_div, rows[b].kl, rows[b].top1);
        }
    }
    for (size_t i = 0; ref && i < p->count; i++) {
        free(ref[i].tokens);
        free(ref[i].logp);
    }
    free(ref);
    free(rows);
    return rc;
}

int cmd_run(const cli *c)
{
    if (!c->input) {
        tfprintf(stderr, "edgert run: name the model folder (see 'edgert run --help')\n");
        return EXIT_USAGE;
    }
    if (c->reference && !c->compare) {
        tfprintf(stderr, "edgert run: --reference names --compare's reference: add --compare\n");
        return EXIT_USAGE;
    }
    if ((c->store && !c->compare) || (c->out && !c->store)) {
        tfprintf(stderr, "edgert run: %s\n", c->store ? "--store keeps --compare's figures: "
                 "add --compare" : "--out names --store's evidence file: add --compare --store");
        return EXIT_USAGE;
    }
    if (c->compare ? !c->prompts : !c->prompt_ids) {
        tfprintf(stderr, "edgert run: %s\n", c->compare ? "--compare needs --prompts FILE"
                                                        : "name the prompt with --prompt-ids "
                                                          "FILE|LIST (or --compare --prompts)");
        return EXIT_USAGE;
    }
    char msg[4096] = "";
    prompts p;
    int rc = read_prompts(c->compare ? "--prompts" : "--prompt-ids",
                          c->compare ? c->prompts : c->prompt_ids, &p, msg, sizeof msg);
    if (rc) {
        tfprintf(stderr, "edgert run: %s\n", msg);
        return rc;
    }
    edgert_ctx *ctx = NULL;
    rc = open_ctx(c, &ctx);
    if (!rc && edgert_device_facts(ctx)->planned) {
        tfprintf(stderr, "edgert run: --device plans for another machine; run runs the model on "
                 "this one\n");
        rc = EXIT_USAGE;
    }
    if (!rc) {
        warn_diags_since(c, ctx, 0);
        rc = c->compare ? cmd_compare(c, ctx, &p) : cmd_generate(c, ctx, &p);
    }
    edgert_close(ctx);
    prompts_free(&p);
    return rc;
}
