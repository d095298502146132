/*
 * core/run/export.c — run an export-only backend (edgert_export, edgert.h).
 *
 * An export runs on the host that prepares a deployment, so it must work in
 * plan mode too (a phone profiled by --device), where edgert_open loads
 * nothing. Here the chosen candidate goes through the gates plan mode
 * skipped — file (er_gate_file) and loading (er_load_now: dlopen, entry, ABI,
 * descriptor, name, init, self-test) — with the loader's own reason codes,
 * then the export capability is checked and the plugin's export_graph runs
 * on the self-tested instance. Declarative gates (device class, arch, flags,
 * disable list, strict mode) were decided at open for the target device and
 * are not revisited.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "context/context.h"
#include "load/load.h"

static edgert_status refuse(er_cand *c, char *err, size_t err_len)
{
    char why[1024];
    c->pub.eligible = 0;
    er_cand_why_not(c, why, sizeof why);
    edgert_errf(err, err_len, "backend '%s' cannot be loaded here: %s", c->m.name, why);
    return EDGERT_E_NOT_ELIGIBLE;
}

edgert_status edgert_export(edgert_ctx *ctx, const char *backend, const char *out_dir,
                            const char *request, char *err, size_t err_len)
{
    if (!ctx || !backend || !out_dir) {
        edgert_errf(err, err_len, "edgert_export: ctx, backend and out_dir are required");
        return EDGERT_E_USAGE;
    }
    er_cand *c = er_cand_find(ctx, backend);
    if (!c) {
        edgert_errf(err, err_len, "no backend named '%s'", backend);
        return EDGERT_E_NOT_FOUND;
    }
    if (!c->pub.eligible) {
        char why[1024];
        er_cand_why_not(c, why, sizeof why);
        edgert_errf(err, err_len, "backend '%s' is not eligible for %s device: %s", backend,
                    ctx->dev.planned ? "the profiled" : "this", why);
        return EDGERT_E_NOT_ELIGIBLE;
    }
    if (!c->m.library) {
        edgert_errf(err, err_len,
                    "backend '%s' is declarative (no library): nothing to export with", backend);
        return EDGERT_E_UNSUPPORTED;
    }
    if (!c->plugin) {
        er_ensure_loaded(ctx, c); /* file gate, first contact, then in-process */
        if (!c->plugin || !c->pub.loaded)
            return refuse(c, err, err_len);
    }
    if (!(c->plugin->caps & EDGERT_CAP_EXPORT)) {
        /* the caller's mistake, not the backend's: its GEMM stays eligible */
        edgert_errf(err, err_len,
                    "backend '%s' has no export capability (MISSING_CAPABILITY(export))", backend);
        return EDGERT_E_UNSUPPORTED;
    }
    struct stat st;
    if (stat(out_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        edgert_errf(err, err_len, "%s: %s (edgert_export writes into an existing directory)",
                    out_dir, errno == ENOENT ? "no such directory" : "not a directory");
        return EDGERT_E_USAGE;
    }
    char perr[4096] = "";
    edgert_status rc = c->plugin->export_graph(c->state, out_dir, request ? request : "", perr,
                                               sizeof perr);
    perr[sizeof perr - 1] = '\0'; /* whatever the plugin wrote */
    if (rc != EDGERT_OK)
        er_set_plugin_err(err, err_len, backend, er_manifest_plugin_name(&c->m), NULL, perr, rc);
    return rc;
}
