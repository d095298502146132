/*
 * core/load.c — loading a candidate that passed every gate (gate.c): open the
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
 * The OS layer is three functions (open a library, find a symbol, close it),
 * as in the small loaders worth imitating (the OpenCL ICD loader's
 * icd_linux.c). The library opens with RTLD_NOW | RTLD_LOCAL, so a missing
 * symbol fails here, not in the middle of a GEMM, and plugins cannot see each
 * other's symbols.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "context.h"

/* ---- the OS layer ------------------------------------------------------------ */

/* Open the library behind the descriptor the file gate checked and hashed,
 * through /proc/self/fd/N: the bytes that run are the bytes that were
 * checked, even if the file at the path was swapped since. RTLD_NODELETE:
 * a plugin's code stays mapped after dlclose, so a thread it left running
 * cannot jump into unmapped memory later. NULL with the loader's reason in
 * why[] on failure.
 *
 * glibc knows a loaded object by its names before its inode, and a name it
 * has seen stays bound to its object: dlopen("/proc/self/fd/N") either maps
 * a new object under that name or, when the file is already mapped (same
 * device and inode), returns that object and adds the name to it as an
 * alias. With RTLD_NODELETE both last for the process's life, so a later
 * dlopen of the same string returns that object, whatever file N refers to
 * by then: two handles, or two threads, loading different plugins through a
 * reused descriptor number got each other's library (NAME_MISMATCH, seen in
 * test_concurrency). Hence one process-wide table, under a lock, of the
 * files loaded: device, inode and the descriptor whose name glibc bound to
 * it, which is kept open for good (one per distinct plugin file). A file in
 * the table is opened by that name, which adds no alias; any other file by
 * the caller's descriptor, which then joins the table. */
typedef struct os_lib {
    dev_t dev;
    ino_t ino;
    int fd;
    uint64_t hash; /* XXH3-64 of the bytes mapped (gate.c): LIBRARY_REWRITTEN */
} os_lib;
static pthread_mutex_t os_lock = PTHREAD_MUTEX_INITIALIZER;
static os_lib *os_libs; /* process-wide, as glibc's own list of loaded objects */
static size_t os_nlibs;

/* A fork (sandbox.c's first contact) while another thread holds os_lock
 * would leave the child's copy locked for ever: held across every fork. */
static void os_lock_take(void)
{
    pthread_mutex_lock(&os_lock);
}

static void os_lock_give(void)
{
    pthread_mutex_unlock(&os_lock);
}

__attribute__((constructor)) static void os_lock_at_fork(void)
{
    pthread_atfork(os_lock_take, os_lock_give, os_lock_give);
}

/* A file is rewritten in place (cp over it, a linker writing its output
 * again) keeping its device and inode; its mapping (RTLD_NODELETE) and the
 * table's descriptor keep the inode from being reused for another file,
 * even if a host closes that descriptor. So the same device and inode
 * with other bytes is the file this process mapped, changed since: dlopen
 * would return the old object, whose pages not yet copied now read the new
 * bytes. */
static int mapped_other_bytes(dev_t dev, ino_t ino, uint64_t hash, uint64_t *then)
{
    int found = 0;
    pthread_mutex_lock(&os_lock);
    for (size_t i = 0; i < os_nlibs && !found; i++)
        if (os_libs[i].dev == dev && os_libs[i].ino == ino && os_libs[i].hash != hash) {
            *then = os_libs[i].hash;
            found = 1;
        }
    pthread_mutex_unlock(&os_lock);
    return found;
}

int er_lib_unchanged(er_cand *c)
{
    const char *how = " install a plugin as a new file renamed over the old one (install(1) and "
                      "mv do; cp onto it does not), and new handles load it";
    struct stat now;
    uint64_t then;
    if (c->lib_fd < 0)
        return 0; /* nothing open to load (the load then fails on its own) */
    if (fstat(c->lib_fd, &now) != 0 || now.st_size != c->lib_size ||
        now.st_mtim.tv_sec != c->lib_mtime.tv_sec || now.st_mtim.tv_nsec != c->lib_mtime.tv_nsec) {
        er_cand_reason(c, ER_GATE_LIBRARY_REWRITTEN, "LIBRARY_REWRITTEN");
        er_cand_detail(c, "%s was written to after it was checked (its size or modification time "
                       "changed since it was hashed): not loaded;%s", c->m.library_path, how);
        return -1;
    }
    if (!mapped_other_bytes(now.st_dev, now.st_ino, c->lib_hash, &then))
        return 0;
    er_cand_reason(c, ER_GATE_LIBRARY_REWRITTEN, "LIBRARY_REWRITTEN");
    er_cand_detail(c, "%s was rewritten in place since this process loaded it (the same file, "
                   "xxh3-64:%016llx then, xxh3-64:%016llx now): the loader would hand back what "
                   "it mapped then, not the bytes checked now;%s", c->m.library_path,
                   (unsigned long long)then, (unsigned long long)c->lib_hash, how);
    return -1;
}

static void *os_load(int fd, uint64_t hash, int *reserved, char *why, size_t why_len)
{
    struct stat st;
    *reserved = 0;
    if (fstat(fd, &st) != 0) {
        snprintf(why, why_len, "fstat: %s", strerror(errno));
        return NULL;
    }
    pthread_mutex_lock(&os_lock);
    int name_fd = fd;
    for (size_t i = 0; i < os_nlibs; i++)
        if (os_libs[i].dev == st.st_dev && os_libs[i].ino == st.st_ino)
            name_fd = os_libs[i].fd;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", name_fd);
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, why_len, "%s", e ? e : "unknown error");
    } else if (name_fd == fd) { /* glibc bound our name: keep it, and remember the file */
        *reserved = 1;
        os_lib *grown = realloc(os_libs, (os_nlibs + 1) * sizeof *grown);
        if (grown) {
            os_libs = grown;
            os_libs[os_nlibs++] = (os_lib){st.st_dev, st.st_ino, fd, hash};
        }
    }
    pthread_mutex_unlock(&os_lock);
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

static const char *const stage_names[ER_STAGE_COUNT] = {
    "dlopen (the library's constructors)", "entry and ABI", "init", "self-test",
    "quick measurement",
};

const char *er_stage_name(int s)
{
    return s >= 0 && s < ER_STAGE_COUNT ? stage_names[s] : "?";
}

void er_load_stage(struct edgert_ctx *ctx, const er_cand *c, er_stage s)
{
    er_log(ctx, EDGERT_LOG_INFO, "loading %s (%s): %s", c->m.name, c->m.library_path,
           stage_names[s]);
    if (ctx->stage_fd >= 0) {
        unsigned char rec[2] = {'S', (unsigned char)s};
        ssize_t w = write(ctx->stage_fd, rec, sizeof rec);
        (void)w; /* the parent reads what arrives; a lost stage only blurs a message */
    }
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
    if (er_lib_unchanged(c) != 0 || (!c->sandbox_passed && er_sandbox(ctx, c, 0) != 0))
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
    er_load_stage(ctx, c, ER_STAGE_DLOPEN);
    if (er_lib_unchanged(c) != 0)
        goto fail;
    int reserved = 0;
    c->dl = os_load(c->lib_fd, c->lib_hash, &reserved, err, sizeof err);
    if (reserved)
        c->lib_fd = -1; /* names a mapped library now: never closed (see os_load) */
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
    er_load_stage(ctx, c, ER_STAGE_ENTRY);
    edgert_status st = entry(lo, hi, &c->host, &p, err, sizeof err);
    terminate(err, sizeof err);
    if (check_answer(c, lo, hi, st, p, err) != 0)
        goto fail;
    c->plugin = p;
    err[0] = '\0';
    er_load_stage(ctx, c, ER_STAGE_INIT);
    st = p->init(&c->host, m->plugin_options, &c->state, err, sizeof err);
    terminate(err, sizeof err);
    if (st != EDGERT_OK) {
        c->state = NULL;
        er_cand_reason(c, ER_GATE_INIT_FAILED, "INIT_FAILED");
        plugin_detail(c, "init", err, st);
        goto fail;
    }
    err[0] = '\0';
    er_load_stage(ctx, c, ER_STAGE_SELF_TEST);
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
    os_unload(c->dl);
    c->dl = NULL;
    c->pub.loaded = 0;
    c->pub.abi_version = 0;
}
