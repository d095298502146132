/*
 * core/load.c — loading a candidate that passed every gate (gate.c): open the
 * library, find its one entry symbol, negotiate the ABI, check the
 * descriptor, then create and self-test the default instance. Each failure is
 * a stable reason code, and the candidate is unloaded and skipped; the scan
 * goes on with the others:
 *     DLOPEN_FAILED(<dlerror>), NO_ENTRY_SYMBOL, ABI_UNSUPPORTED,
 *     INVALID_DESCRIPTOR(<what>), NAME_MISMATCH(<name>),
 *     MISSING_CAPABILITY(<cap>), INIT_FAILED, SELF_TEST_FAILED
 * The core never runs code of a plugin whose gates failed: er_load checks
 * that first; edgert_export (export.c) calls er_load_now on demand in plan
 * mode after running the file gates itself.
 *
 * The OS layer is three functions (open a library, find a symbol, close it),
 * as in the small loaders worth imitating (the OpenCL ICD loader's
 * icd_linux.c). The library opens with RTLD_NOW | RTLD_LOCAL, so a missing
 * symbol fails here, not in the middle of a GEMM, and plugins cannot see each
 * other's symbols.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"

/* ---- the OS layer ------------------------------------------------------------ */

/* Open a library; NULL with the loader's reason in why[] on failure. */
static void *os_load(const char *path, char *why, size_t why_len)
{
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, why_len, "%s", e ? e : "unknown error");
    }
    return h;
}

/* The address of `name` in an open library, or NULL. */
static void *os_symbol(void *lib, const char *name)
{
    dlerror();
    return dlsym(lib, name);
}

static void os_unload(void *lib)
{
    if (lib)
        dlclose(lib);
}

/* ---- loading ------------------------------------------------------------- */

static const char *descriptor_problem(const edgert_plugin *p)
{
    if (p->struct_size < EDGERT_PLUGIN_V1_SIZE)
        return "struct_size smaller than ABI 1's descriptor";
    if (!p->name)
        return "name is NULL";
    if (!p->init || !p->fini || !p->self_test)
        return "init, fini or self_test is NULL";
    if ((p->caps & EDGERT_CAP_GEMM) && (!p->pack || !p->packed_free || !p->gemm))
        return "GEMM capability without pack, packed_free and gemm";
    if ((p->caps & EDGERT_CAP_EXPORT) && !p->export_graph)
        return "EXPORT capability without export_graph";
    return NULL;
}

void er_load(struct edgert_ctx *ctx, er_cand *c)
{
    if (c->failed || ctx->dev.planned || !c->m.library)
        return; /* never run code of a candidate whose gates failed */
    er_load_now(ctx, c);
}

/* dlopen, entry, ABI, descriptor, name, init, self-test. The caller has
 * checked that every gate passed (er_load, or edgert_export on demand). */
void er_load_now(struct edgert_ctx *ctx, er_cand *c)
{
    const er_manifest *m = &c->m;
    char err[512] = "";
    c->dl = os_load(m->library_path, err, sizeof err);
    if (!c->dl) {
        er_cand_reason(c, ER_GATE_DLOPEN_FAILED, "DLOPEN_FAILED(%s)", err);
        er_cand_detail(c, "dlopen refused %s", m->library_path);
        goto fail;
    }
    void *sym = os_symbol(c->dl, EDGERT_PLUGIN_ENTRY_SYMBOL);
    if (!sym) {
        er_cand_reason(c, ER_GATE_NO_ENTRY_SYMBOL, "NO_ENTRY_SYMBOL");
        er_cand_detail(c, "%s does not export %s", m->library_path, EDGERT_PLUGIN_ENTRY_SYMBOL);
        goto fail;
    }
    edgert_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry); /* object-to-function pointer, as POSIX allows */

    /* Offer the intersection of what the core speaks and the manifest declares. */
    uint32_t lo = m->abi_min > EDGERT_PLUGIN_ABI_MIN ? m->abi_min : EDGERT_PLUGIN_ABI_MIN;
    uint32_t hi = m->abi_max < EDGERT_PLUGIN_ABI_MAX ? m->abi_max : EDGERT_PLUGIN_ABI_MAX;
    er_host_fill(c, hi);
    const edgert_plugin *p = NULL;
    edgert_status st = entry(lo, hi, &c->host, &p, err, sizeof err);
    if (st != EDGERT_OK || !p) {
        er_cand_reason(c, ER_GATE_ABI_UNSUPPORTED, "ABI_UNSUPPORTED");
        er_cand_detail(c, "the plugin refused ABI %u..%u: %s", lo, hi,
                       err[0] ? err : edgert_status_name(st));
        goto fail;
    }
    if (p->abi_version < lo || p->abi_version > hi) {
        er_cand_reason(c, ER_GATE_ABI_UNSUPPORTED, "ABI_UNSUPPORTED");
        er_cand_detail(c, "offered ABI %u..%u, the plugin answered %u", lo, hi, p->abi_version);
        goto fail;
    }
    c->host.abi_version = p->abi_version;
    const char *bad = descriptor_problem(p);
    if (bad) {
        er_cand_reason(c, ER_GATE_INVALID_DESCRIPTOR, "INVALID_DESCRIPTOR(%s)", bad);
        er_cand_detail(c, "the plugin's descriptor is malformed: %s", bad);
        goto fail;
    }
    if (strcmp(p->name, m->name) != 0) {
        er_cand_reason(c, ER_GATE_NAME_MISMATCH, "NAME_MISMATCH(%.64s)", p->name);
        er_cand_detail(c, "the library calls itself '%.64s', the manifest '%s' (swapped file?)",
                       p->name, m->name);
        goto fail;
    }
    if (m->runs_in_process && !(p->caps & EDGERT_CAP_GEMM)) {
        er_cand_reason(c, ER_GATE_MISSING_CAPABILITY, "MISSING_CAPABILITY(gemm)");
        er_cand_detail(c, "the manifest says runs_in_process but the plugin has no GEMM");
        goto fail;
    }
    c->plugin = p;
    err[0] = '\0';
    st = p->init(&c->host, m->plugin_options, &c->state, err, sizeof err);
    if (st != EDGERT_OK) {
        c->state = NULL;
        er_cand_reason(c, ER_GATE_INIT_FAILED, "INIT_FAILED");
        er_cand_detail(c, "init: %s", err[0] ? err : edgert_status_name(st));
        goto fail;
    }
    err[0] = '\0';
    st = p->self_test(c->state, err, sizeof err);
    if (st != EDGERT_OK) {
        er_cand_reason(c, ER_GATE_SELF_TEST_FAILED, "SELF_TEST_FAILED");
        er_cand_detail(c, "self-test: %s", err[0] ? err : edgert_status_name(st));
        goto fail;
    }
    if (p->describe) {
        const char *d = p->describe(c->state);
        c->path_chosen = er_strdup(d);
        c->pub.path_chosen = c->path_chosen;
    }
    c->pub.loaded = 1;
    c->pub.abi_version = p->abi_version;
    er_log(ctx, EDGERT_LOG_INFO, "loaded %s from %s (ABI %u)", m->name, m->library_path,
           p->abi_version);
    return;
fail:
    er_log(ctx, EDGERT_LOG_INFO, "%s: %s %s, continuing", m->name,
           c->pub.reasons ? c->pub.reasons[c->pub.reason_count - 1] : "failed", c->pub.detail);
    er_unload(c);
}

void er_unload(er_cand *c)
{
    if (c->plugin && c->state)
        c->plugin->fini(c->state);
    c->state = NULL;
    c->plugin = NULL;
    os_unload(c->dl);
    c->dl = NULL;
    c->pub.loaded = 0;
    c->pub.abi_version = 0;
}
