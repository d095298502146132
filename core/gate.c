/*
 * core/gate.c — eligibility: every requirement the core can check without
 * running plugin code, in a fixed order. A candidate collects a stable
 * reason code for every gate it fails and keeps going through the others,
 * so `explain` can show all of them at once:
 *   declarative (no plugin code involved; the only gates in plan mode)
 *     DISABLED_BY_USER, WRONG_ARCH, WRONG_DEVICE_CLASS,
 *     MISSING_CPU_FLAG(<flag>), OS_STATE_DISABLED(<state>),
 *     ABI_UNSUPPORTED (the manifest's range misses the core's),
 *     STRICT_MODE (the reference backend when strict mode is on)
 *   file (live mode only; in plan mode on demand, for edgert_export)
 *     LIBRARY_MISSING, CHECKSUM_MISMATCH
 * Only a candidate that passed all of them is loaded (load.c), which adds the
 * gates that need its code. A failing candidate is skipped and the scan goes
 * on with the others.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "context.h"

/* ---- declarative gates -------------------------------------------------- */

static int is_disabled(struct edgert_ctx *ctx, const char *name)
{
    for (char **p = ctx->disabled; p && *p; p++)
        if (strcmp(*p, name) == 0)
            return 1;
    return 0;
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
    if (m->reference && ctx->strict) {
        er_cand_reason(c, ER_GATE_STRICT_MODE, "STRICT_MODE");
        er_cand_detail(c, "strict mode: no fallback to the reference backend");
    }
    if (dev->planned || !m->library)
        return;
    er_gate_file(ctx, c);
}

/* Why a library path is not a loadable file, from what stat() said: its
 * result and errno right after it (errno is stale when stat succeeded). */
static const char *not_a_file(int stat_rc, int err, const struct stat *st, char *buf, size_t len)
{
    if (stat_rc == 0)
        return S_ISDIR(st->st_mode) ? "is a directory" : "is not a regular file";
    if (err == ENOENT || err == ENOTDIR)
        return "no such file";
    snprintf(buf, len, "cannot be read: %s", strerror(err));
    return buf;
}

/* File gates: live mode only (a plan is about the target's files), and on
 * demand for a plugin that runs on this host while planning (core/export.c). */
void er_gate_file(struct edgert_ctx *ctx, er_cand *c)
{
    (void)ctx;
    const er_manifest *m = &c->m;
    struct stat st;
    int rc = stat(m->library_path, &st), err = errno;
    if (rc != 0 || !S_ISREG(st.st_mode)) {
        char why[160];
        er_cand_reason(c, ER_GATE_LIBRARY_MISSING, "LIBRARY_MISSING");
        er_cand_detail(c, "%s: %s", m->library_path, not_a_file(rc, err, &st, why, sizeof why));
        return;
    }
    if (m->has_checksum) {
        uint64_t h = 0;
        if (er_file_xxh3(m->library_path, &h) != 0) {
            er_cand_reason(c, ER_GATE_LIBRARY_MISSING, "LIBRARY_MISSING");
            er_cand_detail(c, "%s: cannot read to verify its checksum", m->library_path);
        } else if (h == m->checksum) {
            c->pub.checksum_verified = 1;
        } else {
            c->pub.checksum_verified = -1;
            er_cand_reason(c, ER_GATE_CHECKSUM_MISMATCH, "CHECKSUM_MISMATCH");
            er_cand_detail(c, "%s has xxh3-64:%016llx, the manifest expects xxh3-64:%016llx "
                              "(stale or swapped file?)",
                           m->library_path, (unsigned long long)h,
                           (unsigned long long)m->checksum);
        }
    }
}
