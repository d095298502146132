/*
 * core/gate/gate.c — eligibility: every requirement the core can check without
 * running plugin code, in a fixed order. A candidate collects a stable
 * reason code for every gate it fails and keeps going through the others,
 * so `explain` can show all of them at once:
 *   declarative (no plugin code involved; the only gates in plan mode)
 *     DISABLED_BY_USER, WRONG_ARCH, WRONG_DEVICE_CLASS,
 *     MISSING_CPU_FLAG(<flag>), OS_STATE_DISABLED(<state>),
 *     ABI_UNSUPPORTED (the manifest's range misses the core's),
 *     STRICT_MODE (the reference backend when strict mode is on)
 *   file (live mode only; in plan mode on demand, for edgert_export), all
 *   read from one descriptor, which load.c then dlopens
 *     LIBRARY_MISSING, UNSAFE_FILE, WRONG_ARCH (the ELF's machine),
 *     LIBRARY_REWRITTEN (this process mapped the file before, with other
 *     bytes: load.c), CHECKSUM_MISMATCH
 * Only a candidate that passed all of them meets its first contact
 * (sandbox.c) and is loaded (load.c), which add the gates that need its
 * code. A failing candidate is skipped and the scan goes on with the others.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "context/context.h"
#include "os/trust.h"
#include "gate/gate.h"

/* ---- declarative gates -------------------------------------------------- */

static int is_disabled(struct edgert_ctx *ctx, const char *name)
{
    for (char **p = ctx->disabled; p && *p; p++)
        if (strcmp(*p, name) == 0)
            return 1;
    return 0;
}

int er_layout_packs_group(const er_manifest *m, uint32_t g)
{
    if (m->group_sizes_any)
        return 1;
    for (unsigned i = 0; i < m->n_group_sizes; i++)
        if (m->group_sizes[i] == g)
            return 1;
    return m->n_group_sizes == 0 && g == er_layout_group(m);
}

uint32_t er_layout_group(const er_manifest *m)
{
    return m->group_size > 0 ? (uint32_t)m->group_size : 128u;
}

/* The first group size of the weights that layout m does not pack, or -1. */
static long unpacked_group(const struct edgert_ctx *ctx, const er_manifest *m)
{
    for (size_t i = 0; i < ctx->weights.ngroups; i++)
        if (!er_layout_packs_group(m, ctx->weights.groups[i]))
            return (long)i;
    return -1;
}

/* "32, 64, 128": the group sizes layout m packs. */
static void group_sizes_text(const er_manifest *m, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    unsigned n = m->n_group_sizes ? m->n_group_sizes : 1u;
    for (unsigned i = 0; i < n && at < len; i++) {
        int w = snprintf(buf + at, len - at, "%s%u", i ? ", " : "",
                         m->n_group_sizes ? m->group_sizes[i] : er_layout_group(m));
        at += w > 0 ? (size_t)w : 0u;
    }
}

/* The caller's weights (edgert_options.weights) against the manifest's
 * layout: what the manifest states for certain, so a mismatch is known
 * before any plugin code runs. Group sizes and partial groups are checked
 * against layout.group_sizes and layout.partial_groups, which fail closed:
 * a layout that does not say it packs groups of 64 is taken not to, rather
 * than selected for a checkpoint its pack then refuses. */
static void er_gate_weights(struct edgert_ctx *ctx, er_cand *c)
{
    const er_manifest *m = &c->m;
    /* every 4-bit layout packs groups: group_size 0 means 128, as verify and
     * bench generate its weights (manifest.md), never "any" */
    const int grouped = m->weight_bits == 4 && !ctx->weights.packed_for;
    long g = grouped ? unpacked_group(ctx, m) : -1;
    if (!ctx->weights.path)
        return;
    if (ctx->weights.packed_for && strcmp(ctx->weights.packed_for, m->name) != 0) {
        er_cand_reason(c, ER_GATE_LAYOUT_MISMATCH, "LAYOUT_MISMATCH(packed for %s)",
                       ctx->weights.packed_for);
        er_cand_detail(c, "%s holds weights packed for backend %s only", ctx->weights.path,
                       ctx->weights.packed_for);
        return;
    }
    if (ctx->weights.int4 && m->weight_bits != 4) {
        er_cand_reason(c, ER_GATE_LAYOUT_MISMATCH, "LAYOUT_MISMATCH(int4 weights)");
        er_cand_detail(c, "%s holds 4-bit weights; %s takes %s (%d-bit)", ctx->weights.path,
                       m->name, m->layout_format ? m->layout_format : "?",
                       m->weight_bits);
        return;
    }
    /* Every other mismatch is its own reason, so that a user who fixes one
     * is not turned away by the next (an asymmetric file in groups of 64
     * needs --sym and groups of 128 for amx-w4a8: both are said). */
    char sizes[128];
    group_sizes_text(m, sizes, sizeof sizes);
    if (ctx->weights.asymmetric && m->symmetric && m->weight_bits == 4) {
        er_cand_reason(c, ER_GATE_LAYOUT_MISMATCH, "LAYOUT_MISMATCH(asymmetric zero points)");
        char hint[32] = ""; /* the groups it also needs, when those differ too */
        if (g >= 0)
            snprintf(hint, sizeof hint, " --group %u", er_layout_group(m));
        er_cand_detail(c, "%s: layer %s has asymmetric zero points; %s takes symmetric int4 "
                       "only (quantize with 'edgert quantize --sym%s')", ctx->weights.path,
                       ctx->weights.first_asym ? ctx->weights.first_asym : "?", m->name, hint);
    }
    if (g >= 0) {
        er_cand_reason(c, ER_GATE_LAYOUT_MISMATCH, "LAYOUT_MISMATCH(groups of %u)",
                       ctx->weights.groups[g]);
        er_cand_detail(c, "%s: layer %s %s %u; %s packs groups of %s (layout.group_sizes)",
                       ctx->weights.path, ctx->weights.group_layer[g],
                       ctx->weights.int4 ? "comes in groups of"
                                         : "is dense with K below 128, quantized as one group of",
                       ctx->weights.groups[g], m->name, sizes);
    }
    if (grouped && ctx->weights.first_partial && !m->partial_groups) {
        er_cand_reason(c, ER_GATE_LAYOUT_MISMATCH, "LAYOUT_MISMATCH(partial groups)");
        er_cand_detail(c, "%s: layer %s has k=%u, not a multiple of its group of %u; %s packs "
                       "whole groups only (layout.partial_groups)", ctx->weights.path,
                       ctx->weights.first_partial, ctx->weights.partial_k,
                       ctx->weights.partial_group, m->name);
    }
}

void er_gate(struct edgert_ctx *ctx, er_cand *c)
{
    const er_manifest *m = &c->m;
    const edgert_device *dev = &ctx->dev;

    if (is_disabled(ctx, m->name)) {
        er_cand_reason(c, ER_GATE_DISABLED_BY_USER, "DISABLED_BY_USER");
        er_cand_detail(c, "named in the disable list (EDGERT_DISABLE or --disable)");
    }
    if (m->arch != EDGERT_ARCH_UNKNOWN && m->arch != dev->arch) {
        er_cand_reason(c, ER_GATE_WRONG_ARCH, "WRONG_ARCH");
        er_cand_detail(c, "built for %s, this device is %s", edgert_arch_name(m->arch),
                       edgert_arch_name(dev->arch));
    }
    if (!(m->device_classes & (1u << dev->device_class))) {
        er_cand_reason(c, ER_GATE_WRONG_DEVICE_CLASS, "WRONG_DEVICE_CLASS");
        er_cand_detail(c, "not meant for device class %s",
                       edgert_device_class_name(dev->device_class));
    }
    /* Only check flags when the arch matches: other-arch flags are moot. */
    if (m->arch == EDGERT_ARCH_UNKNOWN || m->arch == dev->arch) {
        const char *states_reported[EDGERT_CPU_FLAG_COUNT] = {0}; /* at most one per flag */
        size_t nstates = 0;
        for (unsigned f = 0; f < EDGERT_CPU_FLAG_COUNT; f++) {
            if (!EDGERT_HAS_FLAG(m->requires_flags, f) || EDGERT_HAS_FLAG(dev->cpu_flags, f))
                continue;
            const char *fname = edgert_cpu_flag_name((edgert_cpu_flag)f);
            if (EDGERT_HAS_FLAG(dev->cpu_flags_os_disabled, f)) {
                const char *s = er_cpu_flag_info_of((edgert_cpu_flag)f)->os_state;
                int seen = 0;
                for (size_t i = 0; i < nstates; i++)
                    seen |= strcmp(states_reported[i], s) == 0;
                if (!seen) {
                    states_reported[nstates++] = s;
                    er_cand_reason(c, ER_GATE_OS_STATE_DISABLED, "OS_STATE_DISABLED(%s)", s);
                    er_cand_detail(c, "the CPU has %s but the OS has not enabled the %s register "
                                      "state for this process", fname, s);
                }
            } else {
                er_cand_reason(c, ER_GATE_MISSING_CPU_FLAG, "MISSING_CPU_FLAG(%s)", fname);
                er_cand_detail(c, "this CPU lacks %s", fname);
            }
        }
    }
    if (m->library && (m->abi_max < EDGERT_PLUGIN_ABI_MIN || m->abi_min > EDGERT_PLUGIN_ABI_MAX)) {
        er_cand_reason(c, ER_GATE_ABI_UNSUPPORTED, "ABI_UNSUPPORTED");
        er_cand_detail(c, "manifest declares ABI %u..%u, this edgert speaks %u..%u", m->abi_min,
                       m->abi_max, EDGERT_PLUGIN_ABI_MIN, EDGERT_PLUGIN_ABI_MAX);
    }
    /* A declarative backend (no library) only stands for the accelerator of
     * its own device class: gpu on cuda_discrete/jetson, npu on npu_phone. */
    if (!m->library && m->processor) {
        edgert_device_class k = dev->device_class;
        int gpu = k == EDGERT_CLASS_CUDA_DISCRETE || k == EDGERT_CLASS_JETSON;
        int ok = (strcmp(m->processor, "gpu") == 0 && gpu) ||
                 (strcmp(m->processor, "npu") == 0 && k == EDGERT_CLASS_NPU_PHONE);
        if (!ok && !(c->failed & (1u << ER_GATE_WRONG_DEVICE_CLASS))) {
            er_cand_reason(c, ER_GATE_WRONG_DEVICE_CLASS, "WRONG_DEVICE_CLASS");
            er_cand_detail(c, "a declarative %s backend (no library) applies only where the "
                              "device class's accelerator is a %s; this device is %s",
                           m->processor, m->processor,
                           edgert_device_class_name(dev->device_class));
        }
    }
    er_gate_weights(ctx, c);
    if (m->reference && ctx->strict) {
        er_cand_reason(c, ER_GATE_STRICT_MODE, "STRICT_MODE");
        er_cand_detail(c, "strict mode: no fallback to the reference backend");
    }
    if (dev->planned || !m->library)
        return;
    er_gate_file(ctx, c);
}

/* ---- the library file ------------------------------------------------------- */

#if defined(__x86_64__)
#define ER_ELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define ER_ELF_MACHINE EM_AARCH64
#else
#define ER_ELF_MACHINE EM_NONE
#endif

static const char *elf_machine_name(unsigned m)
{
    switch (m) {
    case EM_X86_64:
        return "x86_64";
    case EM_AARCH64:
        return "arm64";
    case EM_386:
        return "i386";
    case EM_ARM:
        return "arm (32-bit)";
    case EM_RISCV:
        return "riscv";
    default:
        return "another architecture";
    }
}

/* The ELF header: a 64-bit little-endian shared object for this CPU's arch.
 * A library built for another arch is WRONG_ARCH with its machine named
 * (glibc would say "No such file or directory"); what is not an ELF shared
 * object at all is DLOPEN_FAILED, as dlopen would refuse it. 0 when fine. */
static int check_elf(er_cand *c, int fd, const char *path)
{
    Elf64_Ehdr h;
    ssize_t got = pread(fd, &h, sizeof h, 0);
    if (got != (ssize_t)sizeof h || memcmp(h.e_ident, ELFMAG, SELFMAG) != 0 ||
        h.e_ident[EI_CLASS] != ELFCLASS64 || h.e_ident[EI_DATA] != ELFDATA2LSB ||
        h.e_type != ET_DYN) {
        er_cand_reason(c, ER_GATE_DLOPEN_FAILED,
                       "DLOPEN_FAILED(%s: not a 64-bit ELF shared object)", path);
        er_cand_detail(c, "%s is not a 64-bit little-endian ELF shared object", path);
        return -1;
    }
    if (h.e_machine != ER_ELF_MACHINE) {
        er_cand_reason(c, ER_GATE_WRONG_ARCH, "WRONG_ARCH");
        er_cand_detail(c, "%s is built for %s (ELF machine %u), this device is %s", path,
                       elf_machine_name(h.e_machine), (unsigned)h.e_machine,
                       elf_machine_name(ER_ELF_MACHINE));
        return -1;
    }
    return 0;
}

/* The library behind c->lib_fd is still the bytes the file gate hashed
 * (gate.h): checked again right before it is loaded (load.c). */
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
    if (!er_dl_mapped_other(now.st_dev, now.st_ino, c->lib_hash, &then))
        return 0;
    er_cand_reason(c, ER_GATE_LIBRARY_REWRITTEN, "LIBRARY_REWRITTEN");
    er_cand_detail(c, "%s was rewritten in place since this process loaded it (the same file, "
                   "xxh3-64:%016llx then, xxh3-64:%016llx now): the loader would hand back what "
                   "it mapped then, not the bytes checked now;%s", c->m.library_path,
                   (unsigned long long)then, (unsigned long long)c->lib_hash, how);
    return -1;
}

/* A file or folder others may write can be swapped under us: a warning,
 * and refused when it matters most (secure execution, or running as root). */
static int check_writers(struct edgert_ctx *ctx, er_cand *c, const char *path,
                         const struct stat *st)
{
    mode_t mode = st->st_mode;
    int strict = er_trust_strict();
    if (strict && !er_writable_by_others(st) && er_owned_by_another(st)) {
        /* its owner may rewrite it: as root, a plugin only root could swap */
        er_diag_add(&ctx->diags, EDGERT_LOG_ERROR, path, 0, 0,
                    "plugin file is owned by uid %u, neither root nor this user; refused "
                    "(running as root or setuid) ('chown root' it)", (unsigned)st->st_uid);
        er_cand_reason(c, ER_GATE_UNSAFE_FILE, "UNSAFE_FILE");
        er_cand_detail(c, "%s is owned by uid %u, who may rewrite it; refused when running as "
                          "root or setuid ('chown root' it)", path, (unsigned)st->st_uid);
        return -1;
    }
    if (!er_writable_by_others(st))
        return 0;
    er_diag_add(&ctx->diags, strict ? EDGERT_LOG_ERROR : EDGERT_LOG_WARN, path, 0, 0,
                "plugin file is writable by %s (mode %04o)%s ('chmod go-w' it)",
                (mode & S_IWOTH) ? "anyone" : "its group", (unsigned)(mode & 07777),
                strict ? "; refused (running as root or setuid)" : "");
    if (!strict)
        return 0;
    er_cand_reason(c, ER_GATE_UNSAFE_FILE, "UNSAFE_FILE");
    er_cand_detail(c, "%s is writable by others (mode %04o); refused when running as root or "
                      "setuid ('chmod go-w' it)", path, (unsigned)(mode & 07777));
    return -1;
}

/* XXH3-64 of everything behind fd, read from its start. 0, or -1. */
static int fd_xxh3(int fd, uint64_t *out)
{
    XXH3_state_t *st = XXH3_createState();
    int rc = -1;
    if (!st || XXH3_64bits_reset(st) != XXH_OK)
        goto out;
    unsigned char buf[1 << 16];
    off_t at = 0;
    for (;;) {
        ssize_t got = pread(fd, buf, sizeof buf, at);
        if (got < 0)
            goto out;
        if (got == 0)
            break;
        if (XXH3_64bits_update(st, buf, (size_t)got) != XXH_OK)
            goto out;
        at += got;
    }
    *out = XXH3_64bits_digest(st);
    rc = 0;
out:
    XXH3_freeState(st);
    return rc;
}

/* "name.so" missing while "libname.so" exists beside it (CMake names a
 * module lib<target>.so): the hint, or "". */
static const char *lib_prefix_hint(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char alt[4096];
    if (strncmp(base, "lib", 3) == 0 ||
        snprintf(alt, sizeof alt, "%.*slib%s", (int)(base - path), path, base) >= (int)sizeof alt)
        return "";
    struct stat st;
    return stat(alt, &st) == 0 ? " (but lib-prefixed file exists: CMake names a module "
                                 "lib<target>.so)"
                               : "";
}

/*
 * File gates: live mode only (a plan is about the target's files), and on
 * demand for a plugin that runs on this host while planning (core/run/export.c).
 * The library is opened ONCE here; everything after — the checks, the
 * checksum, and dlopen (through /proc/self/fd, load.c) — uses this
 * descriptor, so the bytes that were checked are the bytes that run even if
 * another process swaps the file in between.
 */
void er_gate_file(struct edgert_ctx *ctx, er_cand *c)
{
    const er_manifest *m = &c->m;
    struct stat st;
    int fd = open(m->library_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    int e = errno, have = fd >= 0 && fstat(fd, &st) == 0;
    if (!have || !S_ISREG(st.st_mode)) {
        char why[160]; /* what the path is, from the call that failed */
        if (have)
            snprintf(why, sizeof why, "%s",
                     S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file");
        else if (fd < 0 && (e == ENOENT || e == ENOTDIR))
            snprintf(why, sizeof why, "no such file");
        else
            snprintf(why, sizeof why, "cannot be read: %s", strerror(fd >= 0 ? errno : e));
        er_cand_reason(c, ER_GATE_LIBRARY_MISSING, "LIBRARY_MISSING");
        er_cand_detail(c, "%s: %s%s", m->library_path, why,
                       !have && e == ENOENT ? lib_prefix_hint(m->library_path) : "");
        if (fd >= 0)
            close(fd);
        return;
    }
    if (check_writers(ctx, c, m->library_path, &st) != 0 ||
        check_elf(c, fd, m->library_path) != 0) {
        close(fd);
        return;
    }
    if (fd_xxh3(fd, &c->lib_hash) != 0) {
        er_cand_reason(c, ER_GATE_LIBRARY_MISSING, "LIBRARY_MISSING");
        er_cand_detail(c, "%s: cannot be read: %s", m->library_path, strerror(errno));
        close(fd);
        return;
    }
    if (c->lib_fd >= 0)
        close(c->lib_fd);
    c->lib_fd = fd;
    c->lib_size = st.st_size;
    c->lib_mtime = st.st_mtim;
    (void)er_lib_unchanged(c);
    if (ctx->weights.has_packed_xxh3 && ctx->weights.packed_for &&
        strcmp(ctx->weights.packed_for, m->name) == 0 &&
        ctx->weights.packed_xxh3 != c->lib_hash) { /* a stale cache: its bytes may not map */
        er_cand_reason(c, ER_GATE_LAYOUT_MISMATCH, "LAYOUT_MISMATCH(packed by another build)");
        er_cand_detail(c, "%s was packed by the %s plugin file with xxh3-64:%016llx; this one has "
                       "xxh3-64:%016llx (pack it again)", ctx->weights.path, m->name,
                       (unsigned long long)ctx->weights.packed_xxh3,
                       (unsigned long long)c->lib_hash);
    }
    if (!m->has_checksum)
        return;
    if (c->lib_hash == m->checksum) {
        c->pub.checksum_verified = 1;
        return;
    }
    c->pub.checksum_verified = -1;
    er_cand_reason(c, ER_GATE_CHECKSUM_MISMATCH, "CHECKSUM_MISMATCH");
    er_cand_detail(c, "%s has xxh3-64:%016llx, the manifest expects xxh3-64:%016llx (stale or "
                      "swapped file? reinstall the backend, or if you rebuilt it yourself: "
                      "edgert checksum --stamp %s)",
                   m->library_path, (unsigned long long)c->lib_hash,
                   (unsigned long long)m->checksum, c->pub.manifest_path);
}
