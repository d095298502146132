/*
 * core/loader.c — gating and loading of backend plugins.
 *
 * Gates run in a fixed order and a candidate collects a stable reason code
 * for every gate it fails:
 *   declarative (no plugin code involved; the only gates in plan mode)
 *     DISABLED_BY_USER, WRONG_ARCH, WRONG_DEVICE_CLASS,
 *     MISSING_CPU_FLAG(<flag>), OS_STATE_DISABLED(<state>),
 *     ABI_UNSUPPORTED (the manifest's range misses the core's),
 *     STRICT_MODE (the reference backend when strict mode is on)
 *   file (live mode only; in plan mode on demand, for edgert_export)
 *     LIBRARY_MISSING, CHECKSUM_MISMATCH
 *   loading (live mode only — or on demand for edgert_export in plan mode —
 *   and only when every gate above passed: the core never runs code from a
 *   plugin whose gates failed)
 *     DLOPEN_FAILED(<dlerror>), NO_ENTRY_SYMBOL, ABI_UNSUPPORTED,
 *     INVALID_DESCRIPTOR(<what>), NAME_MISMATCH(<name>),
 *     MISSING_CAPABILITY(<cap>), INIT_FAILED, SELF_TEST_FAILED
 *   evidence (live mode, core/evidence.c)
 *     FAILED_VERIFY: `edgert calibrate` found wrong results on this device
 * A failing candidate is skipped and the scan goes on with the others.
 *
 * The OS layer is three calls (dlopen, dlsym, dlclose), as in the small
 * loaders worth imitating; dlopen uses RTLD_NOW | RTLD_LOCAL so a missing
 * symbol fails here, not in the middle of a GEMM, and plugins cannot see each
 * other's symbols.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "context.h"

/* ---- reasons -------------------------------------------------------------- */

void er_cand_reason(er_cand *c, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    size_t n = c->pub.reason_count;
    if (n + 2 > c->reason_cap) {
        size_t cap = c->reason_cap ? c->reason_cap * 2 : 8;
        char **r = realloc(c->reasons, cap * sizeof *r);
        if (!r)
            return;
        c->reasons = r;
        c->reason_cap = cap;
    }
    c->reasons[n] = er_strdup(buf);
    if (!c->reasons[n])
        return;
    c->reasons[n + 1] = NULL;
    c->pub.reason_count = n + 1;
    c->pub.reasons = (const char *const *)c->reasons;
}

void er_cand_detail(er_cand *c, const char *fmt, ...)
{
    if (c->detail && *c->detail)
        return; /* keep the first failure's explanation */
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    free(c->detail);
    c->detail = er_strdup(buf);
    c->pub.detail = c->detail ? c->detail : "";
}

void er_log(struct edgert_ctx *ctx, edgert_log_level lvl, const char *fmt, ...)
{
    if ((int)lvl > ctx->log_level)
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (ctx->log)
        ctx->log(ctx->log_user, lvl, buf);
    else
        fprintf(stderr, "edgert: %s\n", buf);
}

/* ---- checksum ----------------------------------------------------------- */

int er_file_xxh3(const char *path, uint64_t *out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    int rc = -1;
    XXH3_state_t *st = XXH3_createState();
    if (!st || XXH3_64bits_reset(st) != XXH_OK)
        goto out;
    unsigned char buf[1 << 16];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0)
        if (XXH3_64bits_update(st, buf, got) != XXH_OK)
            goto out;
    if (ferror(f))
        goto out;
    *out = XXH3_64bits_digest(st);
    rc = 0;
out:
    XXH3_freeState(st);
    fclose(f);
    return rc;
}

/* ---- declarative gates -------------------------------------------------- */

static int is_disabled(struct edgert_ctx *ctx, const char *name)
{
    for (char **p = ctx->disabled; p && *p; p++)
        if (strcmp(*p, name) == 0)
            return 1;
    return 0;
}

/* The OS-managed register state a flag depends on. */
static const char *flag_state(edgert_cpu_flag f)
{
    if (f >= EDGERT_CPU_AMX_TILE && f <= EDGERT_CPU_AMX_FP16)
        return "amx";
    if (f >= EDGERT_CPU_AVX512F && f <= EDGERT_CPU_AVX512_FP16)
        return "avx512";
    if (f >= EDGERT_CPU_AVX && f <= EDGERT_CPU_AVX_VNNI)
        return "avx";
    return "sve"; /* ARM64: SVE state is the only OS-managed one we track */
}

void er_gate(struct edgert_ctx *ctx, er_cand *c)
{
    const er_manifest *m = &c->m;
    const edgert_device *dev = &ctx->dev;

    if (is_disabled(ctx, m->name)) {
        er_cand_reason(c, "DISABLED_BY_USER");
        er_cand_detail(c, "named in the disable list (EDGERT_DISABLE or --disable)");
    }
    if (m->arch != EDGERT_ARCH_UNKNOWN && m->arch != dev->arch) {
        er_cand_reason(c, "WRONG_ARCH");
        er_cand_detail(c, "built for %s, this device is %s", edgert_arch_name(m->arch),
                       edgert_arch_name(dev->arch));
    }
    if (!(m->device_classes & (1u << dev->device_class))) {
        er_cand_reason(c, "WRONG_DEVICE_CLASS");
        er_cand_detail(c, "not meant for device class %s",
                       edgert_device_class_name(dev->device_class));
    }
    /* Only check flags when the arch matches: other-arch flags are moot. */
    if (m->arch == EDGERT_ARCH_UNKNOWN || m->arch == dev->arch) {
        const char *states_reported[4] = {0};
        size_t nstates = 0;
        for (unsigned f = 0; f < EDGERT_CPU_FLAG_COUNT; f++) {
            if (!EDGERT_HAS_FLAG(m->requires_flags, f) || EDGERT_HAS_FLAG(dev->cpu_flags, f))
                continue;
            const char *fname = edgert_cpu_flag_name((edgert_cpu_flag)f);
            if (EDGERT_HAS_FLAG(dev->cpu_flags_os_disabled, f)) {
                const char *s = flag_state((edgert_cpu_flag)f);
                int seen = 0;
                for (size_t i = 0; i < nstates; i++)
                    seen |= strcmp(states_reported[i], s) == 0;
                if (!seen && nstates < 4) {
                    states_reported[nstates++] = s;
                    er_cand_reason(c, "OS_STATE_DISABLED(%s)", s);
                    er_cand_detail(c, "the CPU has %s but the OS has not enabled the %s register "
                                      "state for this process", fname, s);
                }
            } else {
                er_cand_reason(c, "MISSING_CPU_FLAG(%s)", fname);
                er_cand_detail(c, "this CPU lacks %s", fname);
            }
        }
    }
    if (m->library && (m->abi_max < EDGERT_PLUGIN_ABI_MIN || m->abi_min > EDGERT_PLUGIN_ABI_MAX)) {
        er_cand_reason(c, "ABI_UNSUPPORTED");
        er_cand_detail(c, "manifest declares ABI %u..%u, this edgert speaks %u..%u", m->abi_min,
                       m->abi_max, EDGERT_PLUGIN_ABI_MIN, EDGERT_PLUGIN_ABI_MAX);
    }
    if (m->reference && ctx->strict) {
        er_cand_reason(c, "STRICT_MODE");
        er_cand_detail(c, "strict mode: no fallback to the reference backend");
    }
    if (dev->planned || !m->library)
        return;
    er_gate_file(ctx, c);
}

/* File gates: live mode only (a plan is about the target's files), and on
 * demand for a plugin that runs on this host while planning (core/export.c). */
void er_gate_file(struct edgert_ctx *ctx, er_cand *c)
{
    (void)ctx;
    const er_manifest *m = &c->m;
    struct stat st;
    if (stat(m->library_path, &st) != 0 || !S_ISREG(st.st_mode)) {
        er_cand_reason(c, "LIBRARY_MISSING");
        er_cand_detail(c, "%s: %s", m->library_path,
                       errno == ENOENT ? "no such file" : "not a readable regular file");
        return;
    }
    if (m->has_checksum) {
        uint64_t h = 0;
        if (er_file_xxh3(m->library_path, &h) != 0) {
            er_cand_reason(c, "LIBRARY_MISSING");
            er_cand_detail(c, "%s: cannot read to verify its checksum", m->library_path);
        } else if (h != m->checksum) {
            er_cand_reason(c, "CHECKSUM_MISMATCH");
            er_cand_detail(c, "%s has xxh3-64:%016llx, the manifest expects xxh3-64:%016llx "
                              "(stale or swapped file?)",
                           m->library_path, (unsigned long long)h,
                           (unsigned long long)m->checksum);
        }
    }
}

/* ---- the host table ------------------------------------------------------ */

static void host_log(void *host_ctx, edgert_log_level level, const char *fmt, ...)
{
    er_cand *c = host_ctx;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    er_log(c->ctx, level, "%s: %s", c->m.name, buf);
}

/* Large buffers (packed weights) are 2 MiB-aligned and asked for transparent
 * huge pages: a decode step streams ~0.9 GB, and on 4 KiB pages every 4 KiB
 * of the stream is a TLB miss. Linux's default THP mode is "madvise", so
 * without the hint the weights never get huge pages. */
#define ER_HUGE (2u << 20)

static void *host_alloc(void *host_ctx, size_t size, size_t align)
{
    (void)host_ctx;
    if (align < sizeof(void *) || (align & (align - 1)))
        return NULL;
    if (size == 0)
        size = 1;
    if (size > SIZE_MAX - align - ER_HUGE)
        return NULL;
    /* From one huge page up: start on a 2 MiB boundary, and ask for huge
     * pages on the whole 2 MiB pages of the buffer. The tail (< 2 MiB)
     * stays on 4 KiB pages: rounding the size up would make the kernel
     * back the slack too (up to +90% on a 2.2 MB matrix). */
    size_t huge = size >= ER_HUGE ? size & ~(size_t)(ER_HUGE - 1) : 0u;
    if (huge)
        align = align > ER_HUGE ? align : ER_HUGE;
    void *p = NULL;
    if (posix_memalign(&p, align, size) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (huge)
        (void)madvise(p, huge, MADV_HUGEPAGE); /* a hint: failure changes nothing */
#endif
    return p;
}

static void host_free(void *host_ctx, void *ptr)
{
    (void)host_ctx;
    free(ptr);
}

static void host_parallel_for(void *host_ctx, size_t n, size_t grain, edgert_range_fn fn, void *arg)
{
    er_cand *c = host_ctx;
    er_pool_run(c->ctx->pool, n, grain, fn, arg);
}

static unsigned host_threads(void *host_ctx)
{
    er_cand *c = host_ctx;
    return er_pool_threads(c->ctx->pool);
}

static void fill_host(er_cand *c, uint32_t abi)
{
    c->host.struct_size = sizeof c->host;
    c->host.abi_version = abi;
    c->host.host_ctx = c;
    c->host.log = host_log;
    c->host.alloc = host_alloc;
    c->host.free = host_free;
    c->host.parallel_for = host_parallel_for;
    c->host.thread_count = host_threads;
    /* In plan mode the flags describe the profiled device, not this host, so a
     * plugin loaded on demand there (export) is told none: portable code. */
    c->host.cpu_flags = c->ctx->dev.planned ? 0 : c->ctx->dev.cpu_flags;
}

/* ---- loading ------------------------------------------------------------- */

/* Size of the ABI-1 descriptor: every field up to export_graph. */
#define ER_PLUGIN_V1_SIZE (offsetof(edgert_plugin, export_graph) + sizeof(void *))

static const char *descriptor_problem(const edgert_plugin *p)
{
    if (p->struct_size < ER_PLUGIN_V1_SIZE)
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
    if (c->pub.reason_count > 0 || ctx->dev.planned || !c->m.library)
        return; /* never run code of a candidate whose gates failed */
    er_load_now(ctx, c);
}

/* dlopen, entry, ABI, descriptor, name, init, self-test. The caller has
 * checked that every gate passed (er_load, or edgert_export on demand). */
void er_load_now(struct edgert_ctx *ctx, er_cand *c)
{
    const er_manifest *m = &c->m;
    char err[512] = "";
    dlerror();
    c->dl = dlopen(m->library_path, RTLD_NOW | RTLD_LOCAL);
    if (!c->dl) {
        const char *e = dlerror();
        er_cand_reason(c, "DLOPEN_FAILED(%s)", e ? e : "unknown error");
        er_cand_detail(c, "dlopen refused %s", m->library_path);
        goto fail;
    }
    dlerror();
    void *sym = dlsym(c->dl, EDGERT_PLUGIN_ENTRY_SYMBOL);
    if (!sym) {
        er_cand_reason(c, "NO_ENTRY_SYMBOL");
        er_cand_detail(c, "%s does not export %s", m->library_path, EDGERT_PLUGIN_ENTRY_SYMBOL);
        goto fail;
    }
    edgert_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry); /* object-to-function pointer, as POSIX allows */

    /* Offer the intersection of what the core speaks and the manifest declares. */
    uint32_t lo = m->abi_min > EDGERT_PLUGIN_ABI_MIN ? m->abi_min : EDGERT_PLUGIN_ABI_MIN;
    uint32_t hi = m->abi_max < EDGERT_PLUGIN_ABI_MAX ? m->abi_max : EDGERT_PLUGIN_ABI_MAX;
    fill_host(c, hi);
    const edgert_plugin *p = NULL;
    edgert_status st = entry(lo, hi, &c->host, &p, err, sizeof err);
    if (st != EDGERT_OK || !p) {
        er_cand_reason(c, "ABI_UNSUPPORTED");
        er_cand_detail(c, "the plugin refused ABI %u..%u: %s", lo, hi,
                       err[0] ? err : edgert_status_name(st));
        goto fail;
    }
    if (p->abi_version < lo || p->abi_version > hi) {
        er_cand_reason(c, "ABI_UNSUPPORTED");
        er_cand_detail(c, "offered ABI %u..%u, the plugin answered %u", lo, hi, p->abi_version);
        goto fail;
    }
    c->host.abi_version = p->abi_version;
    const char *bad = descriptor_problem(p);
    if (bad) {
        er_cand_reason(c, "INVALID_DESCRIPTOR(%s)", bad);
        er_cand_detail(c, "the plugin's descriptor is malformed: %s", bad);
        goto fail;
    }
    if (strcmp(p->name, m->name) != 0) {
        er_cand_reason(c, "NAME_MISMATCH(%.64s)", p->name);
        er_cand_detail(c, "the library calls itself '%.64s', the manifest '%s' (swapped file?)",
                       p->name, m->name);
        goto fail;
    }
    if (m->runs_in_process && !(p->caps & EDGERT_CAP_GEMM)) {
        er_cand_reason(c, "MISSING_CAPABILITY(gemm)");
        er_cand_detail(c, "the manifest says runs_in_process but the plugin has no GEMM");
        goto fail;
    }
    c->plugin = p;
    err[0] = '\0';
    st = p->init(&c->host, m->plugin_options, &c->state, err, sizeof err);
    if (st != EDGERT_OK) {
        c->state = NULL;
        er_cand_reason(c, "INIT_FAILED");
        er_cand_detail(c, "init: %s", err[0] ? err : edgert_status_name(st));
        goto fail;
    }
    err[0] = '\0';
    st = p->self_test(c->state, err, sizeof err);
    if (st != EDGERT_OK) {
        er_cand_reason(c, "SELF_TEST_FAILED");
        er_cand_detail(c, "self-test: %s", err[0] ? err : edgert_status_name(st));
        goto fail;
    }
    if (p->describe) {
        const char *d = p->describe(c->state);
        c->path_chosen = er_strdup(d);
        c->pub.path_chosen = c->path_chosen;
    }
    c->pub.loaded = 1;
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
    if (c->dl)
        dlclose(c->dl);
    c->dl = NULL;
    c->pub.loaded = 0;
}
