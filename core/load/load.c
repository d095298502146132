/*
 * core/load/load.c — loading a candidate that passed every gate (gate.c): open the
 * library, find its one entry symbol, negotiate the ABI, check the
 * descriptor, then create and self-test the default instance. Each failure is
 * a stable reason code, and the candidate is unloaded and skipped; the scan
 * goes on with the others:
 *     DLOPEN_FAILED(<dlerror>), NO_ENTRY_SYMBOL, ABI_UNSUPPORTED,
 *     INVALID_DESCRIPTOR(<what>), NAME_MISMATCH(<name>) (the descriptor's name
 *     is not the manifest's plugin_name, or its name when it has none),
 *     MISSING_CAPABILITY(<cap>), INIT_FAILED, SELF_TEST_FAILED
 * A descriptor answering ABI 2 must be EDGERT_PLUGIN_V2_SIZE large
 * (ABI_UNSUPPORTED otherwise); its ABI-2 fields are read only then, and
 * EDGERT_PACKED_MAPPABLE without everything it needs is INVALID_DESCRIPTOR.
 * The core never runs code of a plugin whose gates failed: er_load checks
 * that first; edgert_export (export.c) calls er_load_now on demand in plan
 * mode after running the file gates itself.
 *
 * The library is opened by the OS layer (os/dl.c: by the descriptor the
 * file gate hashed, as in the small loaders worth imitating, the OpenCL ICD
 * loader's icd_linux.c), with RTLD_NOW | RTLD_LOCAL, so a missing
 * symbol fails here, not in the middle of a GEMM, and plugins cannot see each
 * other's symbols.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "context/context.h"
#include "os/trust.h"
#include "gate/gate.h"
#include "load/load.h"
#include "sandbox/sandbox.h"

/* The library is opened, searched and closed by the OS layer (os/dl.c):
 * er_dl_open_fd, er_dl_symbol, er_dl_close. */

/* ---- loading ------------------------------------------------------------- */

/* What is wrong with a descriptor, naming the very fields; NULL when fine. */
static const char *descriptor_problem(const edgert_plugin *p, char *buf, size_t len)
{
    if (p->struct_size < EDGERT_PLUGIN_V1_SIZE)
        return "struct_size smaller than ABI 1's descriptor";
    if (!p->name)
        return "name is NULL";
    const struct {
        int need;
        const void *fn;
        const char *name;
    } fns[] = {
        {1, (const void *)p->init, "init"},
        {1, (const void *)p->fini, "fini"},
        {1, (const void *)p->self_test, "self_test"},
        {(p->caps & EDGERT_CAP_GEMM) != 0, (const void *)p->pack, "pack"},
        {(p->caps & EDGERT_CAP_GEMM) != 0, (const void *)p->packed_free, "packed_free"},
        {(p->caps & EDGERT_CAP_GEMM) != 0, (const void *)p->gemm, "gemm"},
        {(p->caps & EDGERT_CAP_EXPORT) != 0, (const void *)p->export_graph, "export_graph"},
    };
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        if (!fns[i].need || fns[i].fn)
            continue;
        int w = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", fns[i].name);
        if (w > 0 && (size_t)w < len - used)
            used += (size_t)w;
    }
    if (!used)
        return NULL;
    if (used + 32 < len)
        snprintf(buf + used, len - used, " NULL (its capabilities need it)");
    return buf;
}

/* 1 when `s` is a valid packed_layout id (plugin.h): 1 to
 * EDGERT_PACKED_LAYOUT_MAX characters from A-Z a-z 0-9 . _ + - /. Reads at
 * most one byte past the limit. */
static int layout_id_ok(const char *s)
{
    size_t i = 0;
    for (; s[i] != '\0'; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (i >= EDGERT_PACKED_LAYOUT_MAX)
            return 0;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '+' || ch == '-' || ch == '/'))
            return 0;
    }
    return i > 0;
}

/* What is wrong with the ABI-2 fields of a descriptor that answered ABI >= 2
 * and is large enough to hold them; NULL when fine. Fails closed: a bit the
 * ABI does not define, or MAPPABLE without everything it needs. */
static const char *abi2_problem(const edgert_plugin *p, char *buf, size_t len)
{
    const uint32_t known = EDGERT_PACKED_MAPPABLE; /* the bits ABI 2 defines */
    if (p->packed_flags & ~known) {
        snprintf(buf, len, "packed_flags has bits ABI %u does not define (0x%x)",
                 (unsigned)p->abi_version, (unsigned)(p->packed_flags & ~known));
        return buf;
    }
    if (!(p->packed_flags & EDGERT_PACKED_MAPPABLE))
        return NULL;
    if (!p->packed_data || !p->packed_map) {
        snprintf(buf, len, "%s%s%s NULL (packed_flags MAPPABLE needs it)",
                 p->packed_data ? "" : "packed_data", !p->packed_data && !p->packed_map ? ", " : "",
                 p->packed_map ? "" : "packed_map");
        return buf;
    }
    if (!(p->caps & EDGERT_CAP_GEMM))
        return "packed_flags MAPPABLE without EDGERT_CAP_GEMM";
    if (!p->packed_layout || !layout_id_ok(p->packed_layout))
        return "packed_layout NULL or not 1 to 64 characters of A-Z a-z 0-9 . _ + - /";
    return NULL;
}

/* The detail of a plugin's own failure: its message as it wrote it when it
 * names itself by its descriptor's name ("name: init: ..."), else
 * "<stage>: <message>". */
static void plugin_detail(er_cand *c, const char *stage, const char *msg, edgert_status st)
{
    const char *self = er_manifest_plugin_name(&c->m);
    size_t nl = strlen(self);
    if (msg[0] && strncmp(msg, self, nl) == 0 && msg[nl] == ':')
        er_cand_detail(c, "%s", msg);
    else
        er_cand_detail(c, "%s: %s", stage, msg[0] ? msg : edgert_status_name(st));
}

/* A plugin wrote into our buffer: terminate it, whatever it did. */
static void terminate(char *buf, size_t len)
{
    buf[len - 1] = '\0';
}

void er_load(struct edgert_ctx *ctx, er_cand *c)
{
    if (!ctx->dev.planned) /* a plan loads nothing (edgert_export loads on demand) */
        er_ensure_loaded(ctx, c);
}

void er_ensure_loaded(struct edgert_ctx *ctx, er_cand *c)
{
    if (c->failed || !c->m.library || c->pub.loaded)
        return; /* never run code of a candidate whose gates failed */
    if (c->lib_fd < 0)
        er_gate_file(ctx, c); /* opened on demand (plan mode's export) */
    if (c->failed || c->lib_fd < 0)
        return;
    /* First contact in a child process; in-process only once that passed.
     * The file as it was checked (defer_load: maybe long ago), and no other
     * handle mapped other bytes of it since. */
    if (er_lib_unchanged(c) != 0 ||
        (!c->sandbox_passed && er_sandbox(ctx, c, 0, er_load_now) != 0))
        return;
    er_load_now(ctx, c);
}

/* The entry's answer: a descriptor for an offered ABI, large enough for the
 * ABI it answered, well-formed, named as the manifest says (its plugin_name,
 * else its name), with the capability the manifest needs. 0, or -1 with the
 * candidate's reason set. On success the host table records the ABI, and
 * c->packed_layout the mappable layout (read only from a descriptor that
 * answered ABI >= 2 and holds the fields). */
static int check_answer(er_cand *c, uint32_t lo, uint32_t hi, edgert_status st,
                        const edgert_plugin *p, const char *err)
{
    const er_manifest *m = &c->m;
    if (st != EDGERT_OK || !p) {
        er_cand_reason(c, ER_GATE_ABI_UNSUPPORTED, "ABI_UNSUPPORTED");
        er_cand_detail(c, "the plugin refused ABI %u..%u (the manifest's abi %u..%u "
                       "intersected with the %u..%u edgert speaks): %s", lo, hi, m->abi_min,
                       m->abi_max, EDGERT_PLUGIN_ABI_MIN, EDGERT_PLUGIN_ABI_MAX,
                       err[0] ? err : edgert_status_name(st));
        return -1;
    }
    if (p->abi_version < lo || p->abi_version > hi) {
        er_cand_reason(c, ER_GATE_ABI_UNSUPPORTED, "ABI_UNSUPPORTED");
        er_cand_detail(c, "offered ABI %u..%u (the manifest's abi %u..%u intersected with "
                       "the %u..%u edgert speaks), the plugin answered %u", lo, hi,
                       m->abi_min, m->abi_max, EDGERT_PLUGIN_ABI_MIN, EDGERT_PLUGIN_ABI_MAX,
                       p->abi_version);
        return -1;
    }
    if (p->abi_version >= 2u && p->struct_size < EDGERT_PLUGIN_V2_SIZE) {
        er_cand_reason(c, ER_GATE_ABI_UNSUPPORTED, "ABI_UNSUPPORTED");
        er_cand_detail(c, "the plugin answered ABI %u with a descriptor of %u bytes; ABI 2's "
                          "holds at least %zu (built against an ABI-1 plugin.h?)",
                       p->abi_version, (unsigned)p->struct_size, EDGERT_PLUGIN_V2_SIZE);
        return -1;
    }
    c->host.abi_version = p->abi_version;
    char what[160];
    const char *bad = descriptor_problem(p, what, sizeof what);
    if (!bad && p->abi_version >= 2u)
        bad = abi2_problem(p, what, sizeof what);
    if (bad) {
        er_cand_reason(c, ER_GATE_INVALID_DESCRIPTOR, "INVALID_DESCRIPTOR(%s)", bad);
        if (p->struct_size < EDGERT_PLUGIN_V1_SIZE)
            er_cand_detail(c, "the plugin's descriptor is malformed: its struct_size is %u, "
                           "ABI 1's descriptor has %u bytes (EDGERT_PLUGIN_V1_SIZE): set it to "
                           "sizeof(edgert_plugin)", (unsigned)p->struct_size,
                           (unsigned)EDGERT_PLUGIN_V1_SIZE);
        else
            er_cand_detail(c, "the plugin's descriptor is malformed: %s", bad);
        return -1;
    }
    const char *want = er_manifest_plugin_name(m);
    if (strcmp(p->name, want) != 0) {
        er_cand_reason(c, ER_GATE_NAME_MISMATCH, "NAME_MISMATCH(%.64s)", p->name);
        if (m->plugin_name)
            er_cand_detail(c, "the library calls itself '%.64s', the manifest's plugin_name is "
                              "'%s' (a typo in either, or a swapped file?)",
                           p->name, want);
        else
            er_cand_detail(c, "the library calls itself '%.64s', the manifest's name is '%s' (a "
                              "typo in either, a swapped file, or another backend's library "
                              "reused without 'plugin_name: %.64s'?)",
                           p->name, want, p->name);
        return -1;
    }
    if (m->runs_in_process && !(p->caps & EDGERT_CAP_GEMM)) {
        er_cand_reason(c, ER_GATE_MISSING_CAPABILITY, "MISSING_CAPABILITY(gemm)");
        er_cand_detail(c, "the manifest says runs_in_process but the plugin has no GEMM");
        return -1;
    }
    c->packed_layout = NULL;
    if (p->abi_version >= 2u && (p->packed_flags & EDGERT_PACKED_MAPPABLE))
        c->packed_layout = p->packed_layout; /* checked by abi2_problem */
    return 0;
}

/* dlopen, entry, ABI, descriptor, name, init, self-test. The caller has
 * checked that every gate passed (er_load, or edgert_export on demand). */
void er_load_now(struct edgert_ctx *ctx, er_cand *c)
{
    const er_manifest *m = &c->m;
    char err[512] = "";
    er_stage_reached(ctx, c, ER_STAGE_DLOPEN);
    if (er_lib_unchanged(c) != 0)
        goto fail;
    int reserved = 0;
    c->dl = er_dl_open_fd(c->lib_fd, c->lib_hash, &reserved, err, sizeof err);
    if (reserved)
        c->lib_fd = -1; /* names a mapped library now: never closed (see os/dl.c) */
    if (!c->dl) {
        /* dlerror names the file as /proc/self/fd/N: an fd number that
         * varies from run to run, so it is cut from the stable reason */
        const char *why = err;
        if (strncmp(why, "/proc/self/fd/", 14) == 0 && strstr(why, ": "))
            why = strstr(why, ": ") + 2;
        er_cand_reason(c, ER_GATE_DLOPEN_FAILED, "DLOPEN_FAILED(%s)", why);
        er_cand_detail(c, "dlopen refused %s: %s%s", m->library_path, why,
                       strstr(why, "cannot open shared object file")
                           ? " (a library it needs was not found; edgert loads the file it "
                             "checked as /proc/self/fd/N, so a RUNPATH of $ORIGIN does not "
                             "name its folder: docs/writing-a-backend.md)"
                           : "");
        goto fail;
    }
    void *sym = er_dl_symbol(c->dl, EDGERT_PLUGIN_ENTRY_SYMBOL);
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
    er_stage_reached(ctx, c, ER_STAGE_ENTRY);
    edgert_status st = entry(lo, hi, &c->host, &p, err, sizeof err);
    terminate(err, sizeof err);
    if (check_answer(c, lo, hi, st, p, err) != 0)
        goto fail;
    c->plugin = p;
    err[0] = '\0';
    er_stage_reached(ctx, c, ER_STAGE_INIT);
    st = p->init(&c->host, m->plugin_options, &c->state, err, sizeof err);
    terminate(err, sizeof err);
    if (st != EDGERT_OK) {
        c->state = NULL;
        er_cand_reason(c, ER_GATE_INIT_FAILED, "INIT_FAILED");
        plugin_detail(c, "init", err, st);
        goto fail;
    }
    err[0] = '\0';
    er_stage_reached(ctx, c, ER_STAGE_SELF_TEST);
    st = p->self_test(c->state, err, sizeof err);
    terminate(err, sizeof err);
    if (st != EDGERT_OK) {
        er_cand_reason(c, ER_GATE_SELF_TEST_FAILED, "SELF_TEST_FAILED");
        plugin_detail(c, "self-test", err, st);
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
    c->packed_layout = NULL;
    er_dl_close(c->dl);
    c->dl = NULL;
    c->pub.loaded = 0;
    c->pub.abi_version = 0;
}
