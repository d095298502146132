/*
 * tools/pack.c — `edgert pack IN --backend NAME|auto -o OUT [--force]`: a
 * checkpoint (GPTQ or dense) packed for one backend into a file that later
 * runs map (edgert_checkpoint_pack, core/weights/packfile.c).
 *
 * When OUT exists and its keys match (format, backend, layout, plugin file,
 * every layer's source tensors), nothing is repacked: OUT is mapped, every
 * layer checked by the backend, and the command says so. When its keys do
 * not match, it is refused with the key that differs (exit 1), unless
 * --force repacks it. Each run reports its time and the process's peak
 * resident memory (VmHWM) beside the packed size.
 * Exit codes: 0 packed or up to date, 1 refused or failed (IN already
 * packed included: bench takes it), 2 usage, 3 the backend is not eligible,
 * 4 IN is missing, malformed or refused (act order, not 4-bit), or OUT is
 * malformed.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void pack_help(FILE *f)
{
    fprintf(f,
            "usage: edgert pack IN --backend NAME|auto -o OUT [--force] [options]\n\n"
            "Pack a checkpoint (GPTQ or dense safetensors; see 'edgert quantize') for one\n"
            "backend into OUT, a file later runs map and run with no repacking\n"
            "(edgert bench --weights OUT). OUT holds keys: format, backend, packed\n"
            "layout, the plugin file's XXH3 and every layer's source XXH3. If OUT exists\n"
            "with the same keys it is mapped, not repacked; with other keys it is refused\n"
            "with the key that differs. One layer is in memory at a time.\n\n"
            "  --backend NAME|auto the backend (auto: the best-ranked for --priority whose\n"
            "                      packed form can be mapped, among those that take IN)\n"
            "  -o, --out FILE      the packed file\n"
            "  --force             repack even if OUT is up to date or has other keys (a\n"
            "                      file that 'edgert pack' did not write is never replaced)\n"
            "  --options STR       plugin options, after the manifest's (e.g. path=fma)\n"
            "  --priority P        speed|fidelity, for auto (default speed)\n\n"
            "Exit codes: 0 packed or up to date, 1 refused or failed (IN already packed\n"
            "included), 2 usage, 3 the backend\n"
            "is not eligible, 4 IN or OUT is missing or malformed, or IN is a checkpoint\n"
            "edgert never takes (act-order).\n\n");
}

/* A "VmHWM:" or "RssAnon:" line of /proc/self/status, in bytes; 0 unknown. */
static unsigned long long proc_status_bytes(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kb = 0;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && sscanf(line + kl, "%llu", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb * 1024ull;
}

/* The backend: named, or (auto) the best-ranked for the priority whose
 * packed form can be mapped (a cache of an ABI-1 plugin's would be useless);
 * the handle was opened with the checkpoint as options.weights, so the
 * ranking already left out the backends its layout cannot take. */
static int pick_backend(const cli *c, edgert_ctx *ctx, const char **name)
{
    *name = c->backend;
    if (c->backend && strcmp(c->backend, "auto") != 0)
        return EXIT_OK;
    *name = NULL;
    edgert_selection *sel = NULL;
    char err[4096] = "";
    edgert_status st = edgert_select(ctx, c->priority, NULL, &sel, err, sizeof err);
    for (size_t r = 0; st == EDGERT_OK && !*name && r < edgert_selection_count(sel); r++) {
        const edgert_candidate *k = edgert_candidate_at(ctx, edgert_selection_index(sel, r));
        edgert_backend *b = NULL;
        if (k->runs_in_process && edgert_backend_open(ctx, k->name, c->options, &b, err,
                                                      sizeof err) == EDGERT_OK &&
            edgert_backend_packed_layout(b))
            *name = k->name;
        else if (b && !c->quiet)
            tfprintf(stderr, "edgert pack: auto: %s cannot map a packed form (plugin ABI 1); "
                     "next\n", k->name);
        edgert_backend_close(b);
    }
    edgert_selection_free(sel);
    if (!*name) {
        tfprintf_lines(stderr, "edgert pack: no eligible backend here can map a packed form%s%s\n",
                       err[0] ? ": " : "", err);
        cli_fail_status(EDGERT_E_NOT_ELIGIBLE);
        return EXIT_NONE;
    }
    return EXIT_OK;
}

/* Map every layer of the packed file with b (the cached path). */
static edgert_status map_all(edgert_backend *b, const char *path, size_t *layers,
                             unsigned long long *bytes, char *err, size_t len)
{
    edgert_checkpoint *p = NULL;
    edgert_status st = edgert_checkpoint_open(path, &p, err, len);
    *layers = st ? 0 : edgert_checkpoint_layer_count(p);
    *bytes = 0;
    for (size_t i = 0; !st && i < *layers; i++) {
        edgert_packed *pk = NULL;
        st = edgert_checkpoint_layer_packed(p, i, b, &pk, err, len);
        *bytes += st ? 0 : edgert_packed_bytes(pk);
        edgert_packed_free(pk);
    }
    edgert_checkpoint_close(p);
    return st;
}

static int exit_of(edgert_status st)
{
    return st == EDGERT_E_PARSE ? EXIT_BADFILE
           : st == EDGERT_E_USAGE ? EXIT_USAGE
           : st == EDGERT_E_NOT_ELIGIBLE || st == EDGERT_E_NOT_FOUND ? EXIT_NONE
                                         : EXIT_FAIL;
}

static void report(const cli *c, const char *backend, const char *what, size_t layers,
                   unsigned long long bytes, double secs)
{
    unsigned long long hwm = proc_status_bytes("VmHWM:");
    if (c->json) {
        json_w w;
        json_init(&w, json_out());
        json_obj(&w);
        json_kstr(&w, "out", c->out);
        json_kstr(&w, "backend", backend);
        json_kstr(&w, "result", what);
        json_kint(&w, "layers", (long long)layers);
        json_kint(&w, "packed_bytes", (long long)bytes);
        json_knum(&w, "seconds", secs);
        json_kint(&w, "peak_rss_bytes", (long long)hwm);
        json_said_diags(&w);
        json_end_obj(&w);
        json_finish(&w);
        return;
    }
    tprintf("%s: %s for %s, %zu layers, %.1f MiB packed, %.2f s, peak RSS %.1f MiB\n", c->out,
            what, backend, layers, (double)bytes / 1048576.0, secs, (double)hwm / 1048576.0);
}

int cmd_pack(const cli *c)
{
    if (!c->input || !c->out || !c->backend) {
        tfprintf(stderr, "edgert pack: name IN, --backend NAME|auto and -o OUT (see 'edgert "
                 "pack --help')\n");
        return EXIT_USAGE;
    }
    double t0 = now_s();
    char err[4096] = "";
    edgert_checkpoint *src = NULL;
    edgert_status st = edgert_checkpoint_open(c->input, &src, err, sizeof err);
    if (st) { /* IN could not be taken: missing, malformed or refused */
        tfprintf(stderr, "edgert pack: %s\n", err);
        cli_fail_status(st);
        return EXIT_BADFILE;
    }
    if (strcmp(edgert_checkpoint_kind(src), "packed") == 0) {
        /* a file bench and select --weights take: this command's refusal */
        tfprintf(stderr, "edgert pack: %s is already packed; pack its source (bench --weights "
                 "and select --weights take it as it is)\n", c->input);
        cli_fail_status(EDGERT_E_USAGE);
        edgert_checkpoint_close(src);
        return EXIT_FAIL;
    }
    edgert_ctx *ctx = NULL;
    int rc = open_ctx(c, &ctx); /* with IN as options.weights: the layout gate */
    if (rc) {
        edgert_checkpoint_close(src);
        return rc;
    }
    size_t said = warn_diags_since(c, ctx, 0);
    const char *name = NULL;
    edgert_backend *b = NULL;
    if (edgert_device_facts(ctx)->planned) { /* as bench, verify and calibrate say it */
        tfprintf(stderr, "edgert pack: --device plans for another machine; pack runs a backend's "
                 "pack on this one\n");
        rc = EXIT_USAGE;
        goto out;
    }
    if ((rc = pick_backend(c, ctx, &name)) != EXIT_OK)
        goto out;
    st = edgert_backend_open(ctx, name, c->options, &b, err, sizeof err);
    if (!st && !edgert_backend_packed_layout(b))
        st = edgert_checkpoint_pack(b, src, c->out, err, sizeof err); /* says why not */
    edgert_status chk = st ? st : edgert_checkpoint_pack_check(b, src, c->out, err, sizeof err);
    size_t layers = 0;
    unsigned long long bytes = 0;
    if (!st && chk == EDGERT_OK && !c->force) {
        st = map_all(b, c->out, &layers, &bytes, err, sizeof err);
        said = warn_diags_since(c, ctx, said); /* --json: into the document */
        if (!st)
            report(c, name, "up to date (mapped, not repacked)", layers, bytes, now_s() - t0);
    } else if (!st && chk != EDGERT_E_NOT_FOUND && chk != EDGERT_E_UNSUPPORTED) {
        /* not an edgert packed file (a checkpoint, the input itself, a
         * folder, a FIFO): never replaced, --force or not */
        tfprintf(stderr, "edgert pack: refusing to replace %s: %s\n(it is not a file "
                 "'edgert pack' wrote; name another -o)\n", c->out, err);
        rc = EXIT_FAIL;
    } else if (!st && chk != EDGERT_E_NOT_FOUND && !c->force) {
        tfprintf(stderr, "edgert pack: refusing to replace %s: %s\n(--force repacks it)\n",
                 c->out, err);
        rc = EXIT_FAIL;
    } else if (!st) {
        st = edgert_checkpoint_pack(b, src, c->out, err, sizeof err);
        st = st ? st : map_all(b, c->out, &layers, &bytes, err, sizeof err);
        said = warn_diags_since(c, ctx, said); /* --json: into the document */
        if (!st)
            report(c, name, "packed", layers, bytes, now_s() - t0);
    }
    if (st) {
        tfprintf(stderr, "edgert pack: %s\n", err);
        cli_fail_status(st);
        rc = exit_of(st);
    }
out:
    warn_diags_since(c, ctx, said); /* what first contact found while pack loaded it */
    edgert_backend_close(b);
    edgert_checkpoint_close(src);
    edgert_close(ctx);
    return rc;
}
