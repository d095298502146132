/*
 * tools/export.c — `edgert export`: run an export-only backend (npu-export)
 * through the core (edgert_export) and leave either a complete artifact in
 * --out or nothing.
 *
 * Inputs: --weights FILE (dense safetensors, "<proj>.weight" [N][K]) and
 * --calibration FILE ("<proj>.x" [T][K] activation samples). Without them the
 * command generates spark-1.7b (architecture.md, Reference workload; --quick: a reduced model with
 * hidden 256, intermediate 832, 2 layers, vocabulary 4096) as seeded dense bf16
 * weights (gen_dense, std 0.02) and LLM-like activations per
 * projection (gen_activations: heavy tails, outlier channels).
 * The generated files live in the work folder below and are removed at the
 * end (the full model takes 3.4 GB of bf16 there while it runs).
 *
 * Output discipline: everything is written into a work folder created next to
 * --out (same file system), ".<name>.edgert-export-XXXXXX/out", and renamed
 * into place only when the plugin succeeded: a failed or refused export
 * leaves no partial output, nor does one stopped by SIGINT (Ctrl-C),
 * SIGTERM or SIGHUP, whose handler removes the work folder (sigclean.h).
 * SIGKILL (or the OOM killer) leaves it, its lock gone with the process:
 * the next export to the same --out removes it (workdir.h), and puts back
 * an earlier export it held when the kill came while replacing it. An
 * existing --out is replaced only when it is empty or holds an earlier
 * edgert export (its report.json carries edgert/export.h's marker); any
 * other existing folder is refused, so a typo cannot delete someone's data.
 *
 * The generated inputs are written with the tree's one safetensors writer
 * (core/formats/safetensors.h), which npu-export's reader shares.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "edgert/export.h"
#include "export_files.h"
#include "generate.h"
#include "sigclean.h"
#include "formats/safetensors.h"
#include "workdir.h"

/* The work folder beside --out: ".<out>.edgert-export-XXXXXX" (workdir.h). */
#define EXPORT_WORK_TAG "edgert-export"

void export_help(FILE *f)
{
    fprintf(f,
            "usage: edgert export --out DIR [--backend npu-export] [--device PHONE.yaml]\n"
            "                     [--weights FILE] [--calibration FILE] [--scheme S]\n"
            "                     [--ranges R] [--force] [--golden] [--quick] [--seed N]\n"
            "                     [--tokens T] [--rows N] [options]\n\n"
            "Export a model for a phone NPU with an export-only backend (npu-export): an\n"
            "ONNX QDQ graph (opset 21; int8 weights per output channel, uint16 activations\n"
            "with ranges calibrated on real activations), encodings.json (quantization\n"
            "overrides for Qualcomm's converters) and report.json / report.txt: SQNR against\n"
            "fp32 per projection and end to end, for the exported scheme and for the ones\n"
            "it refuses (w8a8, uncalibrated ranges, w4a16), measured by the same simulator.\n"
            "The export runs on this host; --device names the phone it is for (npu-export is\n"
            "eligible for npu_phone devices), and the plugin is loaded on demand.\n\n"
            "  -o, --out DIR       the artifact folder; written atomically (a failed export\n"
            "                      leaves nothing). An existing DIR must be empty or an\n"
            "                      earlier export, which is then replaced\n"
            "  --backend NAME      default: the backend 'select' picks for the device\n"
            "  --priority P        speed|fidelity, for that pick (default speed)\n"
            "  --weights FILE      dense safetensors, tensors '<proj>.weight' [N][K] in F32,\n"
            "                      F16 or BF16. 4-bit inputs (GPTQ qweight, I4/U4) are refused:\n"
            "                      the calibrated path needs 8-bit weights from the dense model.\n"
            "                      Default: generated spark-1.7b weights (seeded)\n"
            "  --calibration FILE  safetensors, '<proj>.x' [T][K] activation samples per\n"
            "                      projection. Default: generated LLM-like activations\n"
            "                      (heavy-tailed, outlier channels), T = --tokens\n"
            "  --scheme S          w8a16 (default); w8a8 and w4a16 are refused with the\n"
            "                      measured reason unless --force\n"
            "  --ranges R          margin:4 (default: [-4m, 4m], m the largest |value| of\n"
            "                      the calibration samples), margin:F, minmax,\n"
            "                      percentile:P, or fixed (uncalibrated [-1, 1], refused\n"
            "                      unless --force). The default has the best held-out SQNR\n"
            "                      in the worst case measured on the built-in generator\n"
            "                      (w8a16, --quick, seeds 1-5: margin:4 >= 43.5 dB end to\n"
            "                      end, minmax as low as 13.2 dB; on Student-t activations\n"
            "                      with outlier channels >= 42.4 dB)\n"
            "  --rows N            rows (tokens) per call of the exported graph, whose shapes\n"
            "                      are static: 1 to 65536; 128 (default) is a prefill chunk,\n"
            "                      1 a decode graph; independent of the number of calibration\n"
            "                      samples\n"
            "  --force             export a refused scheme anyway; the report warns\n"
            "  --golden            also write golden/: inputs, simulated and fp32 outputs as\n"
            "                      raw float32, to check a runtime against\n"
            "  --quick             the reduced model (generated inputs only)\n"
            "  --seed N            generator seed (default 1)\n"
            "  --tokens T          generated calibration samples per projection (default 64)\n\n"
            "Held out: of each projection's T samples the first T - T/4 calibrate the ranges\n"
            "and the last T/4 are held out (T >= 8; a contiguous block: neighbouring tokens\n"
            "are alike). The report gives SQNR in-sample (on the calibration samples) and\n"
            "held out (on the others, as a device meets them) side by side; flags and\n"
            "refusals go by the held-out figure.\n\n"
            "Exit codes: 0 exported, 1 refused or failed, 2 usage, 3 backend not eligible,\n"
            "4 a bad input file.\n\n");
}

/* ---- errors ---------------------------------------------------------------------- */

/* The one error of a failed export: printed to stderr when it happens, and
 * kept so that --json can print it in the one object it always writes. */
typedef struct xerr {
    char msg[8192];
    int json_done; /* an object was printed already */
} xerr;

__attribute__((format(printf, 2, 3))) static void xfail(xerr *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    size_t n = strlen(e->msg);
    while (n && e->msg[n - 1] == '\n')
        e->msg[--n] = '\0';
    tfprintf(stderr, "edgert export: %s\n", e->msg);
}

/* ---- the generated model ----------------------------------------------------- */

typedef struct gen_proj {
    char name[64];
    uint32_t n, k;
} gen_proj;

/* spark-1.7b (architecture.md, Reference workload) or the quick configuration, in model order. */
static size_t gen_shapes(int quick, gen_proj **out)
{
    uint32_t hidden = quick ? 256 : 2048, qkv = quick ? 384 : 3072;
    uint32_t inter = quick ? 832 : 6656, layers = quick ? 2 : 28, vocab = quick ? 4096 : 131072;
    size_t n = (size_t)layers * 4 + 1, i = 0;
    gen_proj *p = calloc(n, sizeof *p);
    if (!p)
        return 0;
    for (uint32_t l = 0; l < layers; l++) {
        snprintf(p[i].name, sizeof p[i].name, "layers.%u.qkv", l);
        p[i].n = qkv, p[i++].k = hidden;
        snprintf(p[i].name, sizeof p[i].name, "layers.%u.o", l);
        p[i].n = hidden, p[i++].k = hidden;
        snprintf(p[i].name, sizeof p[i].name, "layers.%u.gate_up", l);
        p[i].n = 2 * inter, p[i++].k = hidden;
        snprintf(p[i].name, sizeof p[i].name, "layers.%u.down", l);
        p[i].n = hidden, p[i++].k = inter;
    }
    snprintf(p[i].name, sizeof p[i].name, "lm_head");
    p[i].n = vocab, p[i++].k = hidden;
    *out = p;
    return n;
}

/* ---- the generated inputs ------------------------------------------------------- */

/* One safetensors file of np tensors "<proj><suffix>" [rows(i)][k(i)]: each
 * tensor's data come from fill(i, buf), converted to bf16 when `bf16`. */
typedef size_t (*fill_fn)(edgert_ctx *ctx, const cli *c, const gen_proj *p, size_t i, float *buf);

static size_t fill_weights(edgert_ctx *ctx, const cli *c, const gen_proj *p, size_t i, float *buf)
{
    gen_dense(ctx, buf, p[i].n, p[i].k, c->seed * 0x9E3779B97F4A7C15ull + i, 0.02f);
    return (size_t)p[i].n * p[i].k;
}

static size_t fill_calibration(edgert_ctx *ctx, const cli *c, const gen_proj *p, size_t i,
                               float *buf)
{
    (void)ctx;
    gen_activations(buf, c->tokens, p[i].k, c->seed * 1000003ull + 7919ull * i);
    return (size_t)c->tokens * p[i].k;
}

static int write_inputs(edgert_ctx *ctx, const cli *c, const char *path, const gen_proj *p,
                        size_t np, int bf16, fill_fn fill, float *buf, uint16_t *half, xerr *e)
{
    char err[512] = "", name[96];
    st_writer w;
    st_writer_init(&w, path);
    int rc = 0;
    for (size_t i = 0; i < np && !rc; i++) {
        uint64_t shape[2] = {bf16 ? p[i].n : c->tokens, p[i].k};
        snprintf(name, sizeof name, "%s%s", p[i].name, bf16 ? ".weight" : ".x");
        rc = st_writer_tensor(&w, name, bf16 ? ST_BF16 : ST_F32, 2, shape, err, sizeof err);
    }
    rc = rc ? rc : st_writer_begin(&w, 8, err, sizeof err);
    for (size_t i = 0; i < np && !rc; i++) {
        size_t n = fill(ctx, c, p, i, buf);
        if (bf16) {
            for (size_t j = 0; j < n; j++)
                half[j] = st_f32_to_bf16(buf[j]);
            rc = st_writer_write(&w, half, n * 2, err, sizeof err);
        } else {
            rc = st_writer_write(&w, buf, n * 4, err, sizeof err);
        }
    }
    rc = rc ? rc : st_writer_commit(&w, err, sizeof err);
    st_writer_free(&w);
    if (rc)
        xfail(e, "writing the generated inputs failed: %s\n", err);
    return rc;
}

/* Generate weights (bf16) and calibration (f32) for the model into dir. */
static int generate_inputs(edgert_ctx *ctx, const cli *c, const char *wpath, const char *cpath,
                           xerr *e)
{
    gen_proj *p = NULL;
    size_t np = gen_shapes(c->quick, &p);
    size_t maxw = 0, maxx = 0;
    for (size_t i = 0; i < np; i++) {
        size_t w = (size_t)p[i].n * p[i].k, x = (size_t)c->tokens * p[i].k;
        maxw = w > maxw ? w : maxw;
        maxx = x > maxx ? x : maxx;
    }
    float *buf = malloc((maxw > maxx ? maxw : maxx) * sizeof *buf + 1);
    uint16_t *half = malloc(maxw * sizeof *half + 1);
    int rc = -1;
    if (!np || !buf || !half)
        xfail(e, "out of memory generating the model\n");
    else
        rc = write_inputs(ctx, c, wpath, p, np, 1, fill_weights, buf, half, e) ||
                     write_inputs(ctx, c, cpath, p, np, 0, fill_calibration, buf, half, e)
                 ? -1
                 : 0;
    free(buf);
    free(half);
    free(p);
    return rc;
}

/* ---- folders ------------------------------------------------------------------- */

/* The plugin's text report, whole (a UTF-8 sequence is never cut between
 * reads), with what a terminal would act on escaped; lines and tabs kept. */
static void print_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t cap = 1 << 20, n = 0, got;
    char *buf = malloc(cap);
    while (buf && n < cap && (got = fread(buf + n, 1, cap - n, f)) > 0)
        n += got;
    fclose(f);
    if (buf)
        put_text(stdout, buf, n, 1);
    free(buf);
}

/* Refusals that need nothing but the command line. EXIT_OK or EXIT_USAGE. */
static int check_args(const cli *c, xerr *e)
{
    if (!c->out || !*c->out) {
        xfail(e, "--out DIR is required (see 'edgert export --help')\n");
        return EXIT_USAGE;
    }
    if (c->quick && (c->weights || c->calibration)) {
        xfail(e, "--quick picks the generated reduced model; it does not "
                 "apply to --weights/--calibration files\n");
        return EXIT_USAGE;
    }
    if (c->tokens > 4096) {
        xfail(e, "--tokens is at most 4096 for generated calibration\n");
        return EXIT_USAGE;
    }
    if (!c->weights != !c->calibration) {
        xfail(e, "give both --weights and --calibration, or neither "
                 "(then both are generated)\n");
        return EXIT_USAGE;
    }
    /* the request is one key=value per line, and generated inputs live next to --out */
    if (strchr(c->out, '\n') || (c->weights && strchr(c->weights, '\n')) ||
        (c->calibration && strchr(c->calibration, '\n')) ||
        (c->scheme && strchr(c->scheme, '\n')) || (c->ranges && strchr(c->ranges, '\n'))) {
        xfail(e, "option values cannot contain newlines\n");
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* The backend to export with: --backend, else the one select picks, which
 * must be an export backend. EXIT_OK with its name in name[], or EXIT_NONE. */
static int pick_backend(edgert_ctx *ctx, const cli *c, char *name, size_t len, xerr *e)
{
    if (c->backend) {
        snprintf(name, len, "%s", c->backend);
        return EXIT_OK;
    }
    char err[1024] = "";
    edgert_selection *sel = NULL;
    edgert_status st = edgert_select(ctx, c->priority, NULL, &sel, err, sizeof err);
    const edgert_candidate *s = edgert_selection_selected(sel);
    int rc = EXIT_OK;
    if (st != EDGERT_OK || !s || s->runs_in_process) {
        xfail(e,
              "the backend selected for %s device (%s) %s; export "
              "needs an export backend: pass --device with a phone profile "
              "(npu-export is for npu_phone devices) or --backend NAME\n",
              edgert_device_facts(ctx)->planned ? "the profiled" : "this", s ? s->name : "none",
              s ? "runs in process" : "is none");
        cli_fail_status(st != EDGERT_OK ? st : EDGERT_E_NOT_ELIGIBLE);
        rc = EXIT_NONE;
    } else {
        snprintf(name, len, "%s", s->name);
    }
    edgert_selection_free(sel);
    return rc;
}

/* What the sweep of killed exports' work folders did: said on stderr, and
 * in --json's object. */
typedef struct export_sweep {
    const cli *c;
    size_t removed, left;
    int restored; /* an earlier export went back to --out */
} export_sweep;

/* The work folder next to --out (same file system), locked while this
 * process lives (workdir.h), and its out/ inside. EXIT_OK with *lock the
 * lock's descriptor, or EXIT_FAIL (work[0] == '\0' when nothing was made). */
static int make_work(const cli *c, const char *parent, const char *base, char *work,
                     size_t work_len, char *tmp_out, size_t tmp_len, int *lock, int *locked,
                     xerr *e)
{
    *lock = workdir_make(parent, base, EXPORT_WORK_TAG, work, work_len, locked);
    if (*lock < 0) {
        xfail(e, "cannot create a work folder next to %s: %s\n", c->out, strerror(errno));
        return EXIT_FAIL;
    }
    if (!*locked && !c->quiet)
        tfprintf(stderr, "export: warning: the file system of %s refuses locks: if this "
                         "export is killed, the next one cannot tell its work folder %s is "
                         "left over\n", c->out, work);
    snprintf(tmp_out, tmp_len, "%s/out", work);
    if (mkdir(tmp_out, 0755) != 0) {
        xfail(e, "%s: %s\n", tmp_out, strerror(errno));
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

/* A stale work folder that holds an earlier export moved aside (an export
 * killed between put_in_place's two renames: after the second, "previous"
 * is renamed "replaced") gives it back when --out is missing or an empty
 * folder. With an edgert export at --out (since put there by hand, or the
 * rename to "replaced" failed), "previous" was being replaced, and goes.
 * Anything else at --out keeps the folder: nonzero. */
static int restore_previous(const char *stale, void *user)
{
    export_sweep *sw = user;
    const cli *c = sw->c;
    char old[4400];
    struct stat st;
    snprintf(old, sizeof old, "%s/previous", stale);
    if (lstat(old, &st) != 0 || !S_ISDIR(st.st_mode))
        return 0;
    char why[1024];
    int state = exfiles_out_state(c->out, why, sizeof why);
    if (state == 1)
        return 0;
    if ((state != 0 && state != 2) || rename(old, c->out) != 0) {
        if (!c->quiet)
            tfprintf(stderr, "export: left %s: it holds an earlier export that a killed export "
                             "moved aside, which cannot go back to %s: %s\n", stale, c->out,
                     state == -1 ? why : strerror(errno));
        sw->left++;
        return 1;
    }
    sw->restored = 1;
    if (!c->quiet && !c->json)
        tfprintf(stderr, "export: put back the earlier export %s, which a killed export had "
                         "moved aside\n", c->out);
    return 0;
}

static void said_swept(const char *stale, int ok, void *user)
{
    export_sweep *sw = user;
    if (ok) {
        sw->removed++;
        if (!sw->c->quiet && !sw->c->json)
            tfprintf(stderr, "export: removed %s, the work folder of an export that was "
                             "killed\n", stale);
    } else {
        sw->left++;
        if (!sw->c->quiet)
            tfprintf(stderr, "export: cannot remove %s, the work folder of an export that "
                             "was killed: %s\n", stale, strerror(errno));
    }
}

/* --json's account of the sweep, in the one object export prints. */
static void json_sweep(json_w *w, const export_sweep *sw)
{
    json_kbool(w, "restored_earlier_export", sw->restored);
    json_kint(w, "stale_work_folders_removed", (long long)sw->removed);
    json_kint(w, "stale_work_folders_left", (long long)sw->left);
}

/* The key=value request of the plugin, inputs generated into the work folder
 * when none were given. EXIT_OK with *request malloc'd, or EXIT_FAIL. */
static int make_request(edgert_ctx *ctx, const cli *c, const char *work, char **request, xerr *e)
{
    char wpath[4300], cpath[4300];
    const char *wf = c->weights, *cf = c->calibration;
    if (!wf) {
        snprintf(wpath, sizeof wpath, "%s/weights.safetensors", work);
        snprintf(cpath, sizeof cpath, "%s/calibration.safetensors", work);
        if (!c->quiet && !c->json)
            tfprintf(stderr, "export: generating %s weights and %u calibration tokens...\n",
                     c->quick ? "quick (reduced)" : "spark-1.7b", c->tokens);
        if (generate_inputs(ctx, c, wpath, cpath, e) != 0)
            return EXIT_FAIL;
        wf = wpath;
        cf = cpath;
    }
    /* no ranges= or rows= line unless asked for: the backend's own defaults */
    char rows[32] = "";
    if (c->rows)
        snprintf(rows, sizeof rows, EDGERT_EXPORT_KEY_ROWS "=%u\n", c->rows);
    if (asprintf(request,
                 EDGERT_EXPORT_KEY_WEIGHTS "=%s\n" EDGERT_EXPORT_KEY_CALIBRATION
                                           "=%s\n" EDGERT_EXPORT_KEY_SCHEME "=%s\n%s%s%s%s"
                                           EDGERT_EXPORT_KEY_FORCE "=%d\n" EDGERT_EXPORT_KEY_GOLDEN
                                           "=%d\n",
                 wf, cf, c->scheme ? c->scheme : "w8a16",
                 c->ranges ? EDGERT_EXPORT_KEY_RANGES "=" : "", c->ranges ? c->ranges : "",
                 c->ranges ? "\n" : "", rows, c->force, c->golden) < 0) {
        *request = NULL;
        xfail(e, "out of memory\n");
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

/* The exit code of the plugin's status. */
static int exit_of(edgert_status st)
{
    return st == EDGERT_E_USAGE                                      ? EXIT_USAGE
           : st == EDGERT_E_NOT_ELIGIBLE || st == EDGERT_E_NOT_FOUND ? EXIT_NONE
           : st == EDGERT_E_PARSE                                    ? EXIT_BADFILE
                                                                     : EXIT_FAIL;
}

/* --json's one object for a failed export: "ok": false, "status" refused
 * (the plugin declined the scheme, with its measured reason) or failed, the
 * exit code and the error; the backend when one was picked. */
static void json_failure(const cli *c, xerr *e, const char *backend, const char *status, int rc,
                         const export_sweep *sw)
{
    if (!c->json || e->json_done)
        return;
    json_w w;
    json_init(&w, json_out());
    json_obj(&w);
    json_kbool(&w, "ok", 0);
    /* as every command's: the failure's own status where one was said */
    const char *said = cli_failed_status();
    json_kstr(&w, "status", rc == EXIT_USAGE                          ? "E_USAGE"
                            : strcmp(status, "failed") == 0 && said ? said
                                                                    : status);
    json_kint(&w, "exit_code", rc);
    json_kstr(&w, "backend", backend && *backend ? backend : NULL);
    json_kstr(&w, "out", c->out);
    json_kstr(&w, "error", e->msg[0] ? e->msg : "failed");
    json_sweep(&w, sw);
    json_said_diags(&w);
    json_end_obj(&w);
    json_finish(&w);
    e->json_done = 1;
}

/* Into place: an earlier export moves aside first (into the work folder,
 * removed at the end), and comes back if the final rename fails. */
static int put_in_place(const cli *c, int prior, const char *work, const char *tmp_out,
                        int locked, int *keep_work, xerr *e)
{
    char old[4300];
    snprintf(old, sizeof old, "%s/previous", work);
    if (prior == 2 && rmdir(c->out) != 0) {
        xfail(e, "cannot replace the empty folder %s: %s\n", c->out, strerror(errno));
        return EXIT_FAIL;
    }
    if (prior == 1 && rename(c->out, old) != 0) {
        xfail(e, "cannot move the earlier export %s aside: %s\n", c->out, strerror(errno));
        return EXIT_FAIL;
    }
    /* again, now that it is aside: something written into it while this
     * export ran (minutes) goes back with it, and nothing is replaced */
    char unlisted[512];
    if (prior == 1 && !exfiles_match(old, unlisted, sizeof unlisted)) {
        int back = rename(old, c->out) == 0;
        *keep_work = !back;
        xfail(e, "%s: '%s' was added to the earlier export while this one ran; it would be "
                 "lost, so nothing is replaced%s%s\n", c->out, unlisted[0] ? unlisted : "?",
              back ? "" : "; the earlier export stays in ", back ? "" : old);
        return EXIT_USAGE;
    }
    if (rename(tmp_out, c->out) != 0) {
        int e1 = errno;
        if (prior == 1 && rename(old, c->out) != 0) {
            /* kept, its lock gone at exit: the next export's sweep finds it */
            *keep_work = 1;
            if (locked)
                xfail(e, "cannot rename %s to %s: %s; the earlier export stays in %s, which "
                         "the next export to %s puts back while nothing else is there\n",
                      tmp_out, c->out, strerror(e1), old, c->out);
            else
                xfail(e, "cannot rename %s to %s: %s; the earlier export stays in %s: move it "
                         "back to %s\n", tmp_out, c->out, strerror(e1), old, c->out);
            return EXIT_FAIL;
        }
        xfail(e, "cannot rename %s to %s: %s\n", tmp_out, c->out, strerror(e1));
        return EXIT_FAIL;
    }
    /* a "previous" now means only: killed between the renames (restore_previous) */
    char replaced[4300];
    snprintf(replaced, sizeof replaced, "%s/replaced", work);
    if (prior == 1)
        rename(old, replaced);
    return EXIT_OK;
}

static void report_success(const cli *c, const edgert_device *dev, const char *backend, int prior,
                           const export_sweep *sw)
{
    char rpath[4300];
    if (c->json) {
        json_w w;
        json_init(&w, json_out());
        json_obj(&w);
        json_kbool(&w, "ok", 1);
        json_kstr(&w, "status", "exported");
        json_kstr(&w, "backend", backend);
        json_kstr(&w, "mode", dev->planned ? "plan" : "live");
        json_kstr(&w, "device", dev->name);
        json_kstr(&w, "out", c->out);
        snprintf(rpath, sizeof rpath, "%s/" EDGERT_EXPORT_REPORT_FILE, c->out);
        json_kstr(&w, "report", rpath);
        json_kbool(&w, "replaced_earlier_export", prior == 1);
        json_sweep(&w, sw);
        json_said_diags(&w);
        json_end_obj(&w);
        json_finish(&w);
    } else {
        tprintf("exported with %s to %s%s\n\n", backend, c->out,
                prior == 1 ? " (replaced the earlier export)" : "");
        snprintf(rpath, sizeof rpath, "%s/report.txt", c->out);
        print_file(rpath);
    }
}

/* The spine: every step returns its exit code, so no failure can leave
 * EXIT_OK behind; every failure's message is in e, so --json prints one
 * object whatever failed. */
int cmd_export(const cli *c)
{
    xerr e = {.msg = "", .json_done = 0};
    char *outc = c->out ? strdup(c->out) : NULL, *outc2 = c->out ? strdup(c->out) : NULL;
    char *parent = outc ? dirname(outc) : NULL, *base = outc2 ? basename(outc2) : NULL;
    char work[4200] = "", tmp_out[4300] = "", backend[128] = "", err[8192] = "";
    const char *status = "failed";
    char *request = NULL;
    edgert_ctx *ctx = NULL;
    int prior = 0, lock = -1, locked = 0, keep_work = 0;
    size_t said = 0; /* diagnostics printed so far */
    export_sweep sw = {.c = c};
    int rc = check_args(c, &e);
    if (rc != EXIT_OK)
        goto out;
    /* files named explicitly: one that cannot be read is exit 4, before any work */
    char bad[sizeof e.msg];
    if (c->weights && (input_file_check("--weights", c->weights, bad, sizeof bad) ||
                       input_file_check("--calibration", c->calibration, bad, sizeof bad))) {
        xfail(&e, "%s", bad);
        rc = EXIT_BADFILE;
        goto out;
    }
    if (!parent || !base || !*base || strcmp(base, "/") == 0 || strcmp(base, ".") == 0 ||
        strcmp(base, "..") == 0) {
        xfail(&e, "--out '%s' must name a folder", c->out);
        rc = EXIT_USAGE;
        goto out;
    }
    /* before --out is looked at: a killed export's earlier one may come back */
    workdir_sweep(parent, base, EXPORT_WORK_TAG, restore_previous, said_swept, &sw);
    char why[1024];
    prior = exfiles_out_state(c->out, why, sizeof why);
    if (prior < 0) {
        xfail(&e, "%s: %s; choose another --out or empty it first", c->out, why);
        rc = EXIT_USAGE;
        goto out;
    }
    cli oc = *c;
    oc.out = NULL; /* --out is the artifact folder here, not an evidence file */
    if ((rc = open_ctx_msg(&oc, &ctx, e.msg, sizeof e.msg, &status)) != EXIT_OK)
        goto out;
    said = warn_diags_since(c, ctx, 0);
    if ((rc = pick_backend(ctx, c, backend, sizeof backend, &e)) != EXIT_OK)
        goto out;
    sigclean_arm(); /* held: a signal while the work folder is made waits for it */
    rc = make_work(c, parent, base, work, sizeof work, tmp_out, sizeof tmp_out, &lock, &locked,
                   &e);
    if (work[0])
        sigclean_folder(work);
    sigclean_release();
    if (rc != EXIT_OK)
        goto out;
    if ((rc = make_request(ctx, c, work, &request, &e)) != EXIT_OK)
        goto out;
    if (!c->quiet && !c->json)
        tfprintf(stderr, "export: %s: quantizing, simulating and writing...\n", backend);
    edgert_status st = edgert_export(ctx, backend, tmp_out, request, err, sizeof err);
    if (st != EDGERT_OK) {
        xfail(&e, "%s", err);
        status = st == EDGERT_E_UNSUPPORTED ? "refused" : edgert_status_name(st);
        rc = exit_of(st);
        goto out;
    }
    if (exfiles_write(tmp_out) != 0 && !c->quiet) /* what a later export may replace */
        tfprintf(stderr, "export: warning: could not list what this export wrote (%s): a "
                 "later export to %s will not replace it\n", strerror(errno), c->out);
    sigclean_hold(); /* an earlier export moves aside into work: never lost with it */
    rc = put_in_place(c, prior, work, tmp_out, locked, &keep_work, &e);
    if (keep_work)
        sigclean_folder(""); /* not removed by a signal either */
    sigclean_release();
    if (rc != EXIT_OK)
        goto out;
    said = warn_diags_since(c, ctx, said); /* before the document, which says them */
    report_success(c, edgert_device_facts(ctx), backend, prior, &sw);
out:
    if (ctx) /* what selecting and loading the backend on demand found */
        warn_diags_since(c, ctx, said);
    if (rc != EXIT_OK)
        json_failure(c, &e, backend, status, rc, &sw);
    if (work[0] && !keep_work)
        workdir_remove(work);
    sigclean_disarm(); /* after: a signal during the removal finishes it */
    if (lock >= 0)
        close(lock); /* after the folder is gone: a sweep never meets it unlocked */
    edgert_close(ctx);
    free(request);
    free(outc);
    free(outc2);
    return rc;
}
