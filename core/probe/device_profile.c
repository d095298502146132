/*
 * core/probe/device_profile.c — a device described in YAML instead of probed
 * (plan mode: "which backend would a Raspberry Pi 5 get?" without holding
 * one). The profile replaces the whole probe: dev->planned = 1 and
 * dev->source is the profile's path.
 *
 * Schema (profile_version 1):
 *
 *   profile_version: 1          # required integer; another version is refused:
 *                               #   "unsupported profile_version N (this edgert reads 1)"
 *   name: "Raspberry Pi 5"      # required non-empty string, < 128 bytes
 *   arch: arm64                 # required: x86_64 | arm64 (aarch64 accepted)
 *   device_class: arm64_cpu     # required: x86_cpu | arm64_cpu | cuda_discrete |
 *                               #   jetson | npu_phone
 *                               #   x86_64 allows x86_cpu, cuda_discrete;
 *                               #   arm64 allows arm64_cpu, jetson, npu_phone,
 *                               #   cuda_discrete
 *   cpu_flags: [asimd, asimdhp] # required list (may be []) of usable flags, spelled
 *                               #   as in /proc/cpuinfo (names.c); every flag must
 *                               #   belong to `arch`
 *   os_disabled_flags: []       # optional, same rules: in hardware, but the OS did
 *                               #   not enable the state (e.g. AMX on a kernel
 *                               #   before 5.16); must not repeat a cpu_flags entry
 *   logical_cores: 4            # required integer 1..4096
 *   memory_total_mb: 8192       # optional integer >= 0 (MiB; absent = unknown)
 *   memory_available_mb: 7000   # optional integer >= 0, <= memory_total_mb when both
 *   bf16: false                 # optional bool. Default: for x86_cpu, arm64_cpu and
 *                               #   npu_phone the CPU-flag rule of the probe
 *                               #   (avx512_bf16/amx_bf16 on x86_64, bf16 on arm64);
 *                               #   for cuda_discrete and jetson the probe's GPU-name
 *                               #   rule on `accelerator` (Ampere/Orin or newer:
 *                               #   bf16), and true without an accelerator (as the
 *                               #   probe assumes without driver information)
 *   accelerator: "..."          # optional string, < 160 bytes (GPU model, NPU node)
 *   notes: "..."                # optional string, for people; not used
 *
 * Unknown keys are warnings (a newer edgert may add some). Any error makes the
 * whole profile fail with EDGERT_E_PARSE (EDGERT_E_IO when unreadable): every
 * problem found is reported with file:line:col, and *out stays zeroed — a
 * half-read device is worse than none, because the selection would plan for
 * a device that does not exist.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe/probe_internal.h"
#include "formats/yamldoc.h"

#define ER_PROFILE_VERSION 1
#define ER_PROFILE_MAX_CORES 4096
/* 1 TiB of MiB = 1 EiB: large enough for anything real, and the byte count
 * still fits in uint64_t. */
#define ER_PROFILE_MAX_MB (1ll << 40)
#define MIB (1024ull * 1024ull)

#define FLAG(f) (1ull << (unsigned)(f))

const char *const er_profile_keys[] = { /* docs/device-profile.md documents each */
    "profile_version", "name",     "arch",   "device_class",        "cpu_flags",
    "os_disabled_flags", "logical_cores", "memory_total_mb", "memory_available_mb",
    "bf16",            "accelerator", "notes", NULL,
};

/* The arch a flag belongs to, from the one flag table (names.c). */
static edgert_arch flag_arch(edgert_cpu_flag f)
{
    return er_cpu_flag_info_of(f)->arch;
}

/* "asimd, asimdhp, ..." — the flag names of `arch` (all when unknown). */
static void known_flags(edgert_arch arch, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (unsigned f = 0; f < EDGERT_CPU_FLAG_COUNT && used < len; f++) {
        if (arch != EDGERT_ARCH_UNKNOWN && flag_arch((edgert_cpu_flag)f) != arch)
            continue;
        int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
                         edgert_cpu_flag_name((edgert_cpu_flag)f));
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

/* A list of flag names → mask. Each bad item is an error at its own
 * line:col. `arch` UNKNOWN (arch itself was bad) skips the arch check.
 * Returns 0 (also when absent and optional) or -1 after errors. */
static int read_flags(er_yaml *y, yaml_node_t *root, const char *key, int required,
                      edgert_arch arch, uint64_t *mask, er_diags *d)
{
    char **list = NULL;
    size_t n = 0;
    int rc = 0;
    *mask = 0;
    int r = er_yaml_strlist(y, root, key, required, &list, &n, d);
    if (r != 0)
        return r < 0 ? -1 : 0;
    yaml_node_t *seq = er_yaml_get(y, root, key); /* a sequence: strlist checked */
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = er_yaml_node(y, seq->data.sequence.items.start[i]);
        edgert_cpu_flag f;
        if (edgert_cpu_flag_parse(list[i], &f) != 0) {
            char known[512];
            known_flags(arch, known, sizeof known);
            er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(item), er_yaml_col(item),
                        "field '%s': unknown CPU flag '%.60s' (known%s%s: %s)", key, list[i],
                        arch != EDGERT_ARCH_UNKNOWN ? " for " : "",
                        arch != EDGERT_ARCH_UNKNOWN ? edgert_arch_name(arch) : "", known);
            rc = -1;
            continue;
        }
        if (arch != EDGERT_ARCH_UNKNOWN && flag_arch(f) != arch) {
            er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(item), er_yaml_col(item),
                        "field '%s': '%s' is an %s flag, but the profile's arch is %s", key,
                        list[i], edgert_arch_name(flag_arch(f)), edgert_arch_name(arch));
            rc = -1;
            continue;
        }
        if (*mask & FLAG(f))
            er_diag_add(d, EDGERT_LOG_WARN, y->path, er_yaml_line(item), er_yaml_col(item),
                        "field '%s': '%s' is listed twice", key, list[i]);
        *mask |= FLAG(f);
    }
    er_strlist_free(list);
    return rc;
}

/* Read an enum-valued string field with `parse`; errors name the value's
 * line:col and the accepted spellings. Returns 0 or -1. */
static int read_enum(er_yaml *y, yaml_node_t *root, const char *key, const char *expected,
                     int (*parse)(const char *, int *), int *out, er_diags *d)
{
    char *s = NULL;
    if (er_yaml_str(y, root, key, 1, &s, d) != 0)
        return -1;
    int rc = parse(s, out);
    if (rc != 0) {
        yaml_node_t *v = er_yaml_get(y, root, key);
        er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(v), er_yaml_col(v),
                    "field '%s': unknown value '%.60s' (expected %s)", key, s, expected);
    }
    free(s);
    return rc ? -1 : 0;
}

static int parse_arch(const char *s, int *out)
{
    edgert_arch a;
    if (edgert_arch_parse(s, &a) != 0)
        return -1;
    *out = (int)a;
    return 0;
}

static int parse_class(const char *s, int *out)
{
    edgert_device_class c;
    if (edgert_device_class_parse(s, &c) != 0)
        return -1;
    *out = (int)c;
    return 0;
}

static int class_allowed(edgert_arch arch, edgert_device_class c)
{
    switch (arch) {
    case EDGERT_ARCH_X86_64:
        return c == EDGERT_CLASS_X86_CPU || c == EDGERT_CLASS_CUDA_DISCRETE;
    case EDGERT_ARCH_ARM64:
        return c == EDGERT_CLASS_ARM64_CPU || c == EDGERT_CLASS_JETSON ||
               c == EDGERT_CLASS_NPU_PHONE || c == EDGERT_CLASS_CUDA_DISCRETE;
    default:
        return 0;
    }
}

/* An optional or required string that must fit a fixed buffer of `cap`
 * bytes (and, when `nonempty`, hold something). Returns 0, 1 (absent) or -1. */
static int read_fixed_str(er_yaml *y, yaml_node_t *root, const char *key, int required,
                          int nonempty, char *dst, size_t cap, er_diags *d)
{
    char *s = NULL;
    int r = er_yaml_str(y, root, key, required, &s, d);
    if (r != 0)
        return r;
    yaml_node_t *v = er_yaml_get(y, root, key);
    size_t len = strlen(s);
    if (nonempty && len == 0) {
        er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(v), er_yaml_col(v),
                    "field '%s' is empty", key);
        r = -1;
    } else if (len >= cap) {
        er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(v), er_yaml_col(v),
                    "field '%s' is %zu bytes long; at most %zu fit", key, len, cap - 1);
        r = -1;
    } else {
        memcpy(dst, s, len + 1);
    }
    free(s);
    return r;
}

/* name, arch and device_class, and whether the class exists on that arch.
 * 0, or -1 after reporting every problem. */
static int read_identity(er_yaml *y, yaml_node_t *root, edgert_device *dev, er_diags *d)
{
    int bad = 0;
    if (read_fixed_str(y, root, "name", 1, 1, dev->name, sizeof dev->name, d) != 0)
        bad = 1;
    int arch = EDGERT_ARCH_UNKNOWN, cls = EDGERT_CLASS_UNKNOWN;
    if (read_enum(y, root, "arch", "x86_64 or arm64", parse_arch, &arch, d) != 0)
        bad = 1;
    if (read_enum(y, root, "device_class",
                  "x86_cpu, arm64_cpu, cuda_discrete, jetson or npu_phone", parse_class, &cls,
                  d) != 0)
        bad = 1;
    dev->arch = (edgert_arch)arch;
    dev->device_class = (edgert_device_class)cls;
    yaml_node_t *class_node = er_yaml_get(y, root, "device_class");
    if (dev->arch != EDGERT_ARCH_UNKNOWN && dev->device_class != EDGERT_CLASS_UNKNOWN &&
        !class_allowed(dev->arch, dev->device_class)) {
        er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(class_node),
                    er_yaml_col(class_node),
                    "device_class %s does not exist on arch %s (x86_64: x86_cpu, "
                    "cuda_discrete; arm64: arm64_cpu, jetson, npu_phone, cuda_discrete)",
                    edgert_device_class_name(dev->device_class), edgert_arch_name(dev->arch));
        bad = 1;
    }
    return bad ? -1 : 0;
}

/* cpu_flags and os_disabled_flags, which must not overlap. 0 or -1. */
static int read_cpu_flags(er_yaml *y, yaml_node_t *root, edgert_device *dev, er_diags *d)
{
    int bad = 0;
    if (read_flags(y, root, "cpu_flags", 1, dev->arch, &dev->cpu_flags, d) != 0)
        bad = 1;
    if (read_flags(y, root, "os_disabled_flags", 0, dev->arch, &dev->cpu_flags_os_disabled, d) !=
        0)
        bad = 1;
    uint64_t both = dev->cpu_flags & dev->cpu_flags_os_disabled;
    if (both) {
        yaml_node_t *v = er_yaml_get(y, root, "os_disabled_flags");
        unsigned f = 0;
        while (!EDGERT_HAS_FLAG(both, f))
            f++;
        er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(v), er_yaml_col(v),
                    "field 'os_disabled_flags': '%s' is also in cpu_flags; a flag is either "
                    "usable or disabled by the OS",
                    edgert_cpu_flag_name((edgert_cpu_flag)f));
        bad = 1;
    }
    return bad ? -1 : 0;
}

/* logical_cores, memory_total_mb and memory_available_mb. 0 or -1. */
static int read_resources(er_yaml *y, yaml_node_t *root, edgert_device *dev, er_diags *d)
{
    int bad = 0;
    long long cores = 0, total_mb = 0, avail_mb = 0;
    if (er_yaml_int(y, root, "logical_cores", 1, 1, ER_PROFILE_MAX_CORES, &cores, d) != 0)
        bad = 1;
    int has_total = er_yaml_int(y, root, "memory_total_mb", 0, 0, ER_PROFILE_MAX_MB, &total_mb, d);
    int has_avail =
        er_yaml_int(y, root, "memory_available_mb", 0, 0, ER_PROFILE_MAX_MB, &avail_mb, d);
    if (has_total < 0 || has_avail < 0)
        bad = 1;
    if (has_total == 0 && has_avail == 0 && avail_mb > total_mb) {
        yaml_node_t *v = er_yaml_get(y, root, "memory_available_mb");
        er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(v), er_yaml_col(v),
                    "memory_available_mb %lld exceeds memory_total_mb %lld", avail_mb,
                    total_mb);
        bad = 1;
    }
    dev->logical_cores = (unsigned)cores;
    dev->mem_total_bytes = has_total == 0 ? (uint64_t)total_mb * MIB : 0;
    dev->mem_available_bytes = has_avail == 0 ? (uint64_t)avail_mb * MIB : 0;
    return bad ? -1 : 0;
}

/* bf16 as the profile says, else the default for the class: a GPU follows
 * its accelerator name as the live probe follows the driver's (the shared
 * rule er_gpu_model_has_bf16), a GPU without a name is assumed Ampere/Orin
 * or newer, CPUs follow their flags. */
static void decide_bf16(int has_bf16, int bf16, edgert_device *dev)
{
    int gpu = dev->device_class == EDGERT_CLASS_CUDA_DISCRETE ||
              dev->device_class == EDGERT_CLASS_JETSON;
    if (has_bf16 == 0) {
        dev->bf16 = bf16;
        snprintf(dev->bf16_source, sizeof dev->bf16_source, "device profile: bf16: %s",
                 bf16 ? "true" : "false");
    } else if (gpu && dev->accelerator[0]) {
        dev->bf16 = er_gpu_model_has_bf16(dev->accelerator);
        snprintf(dev->bf16_source, sizeof dev->bf16_source,
                 "device profile default from accelerator '%.80s': %s", dev->accelerator,
                 dev->bf16 ? "an Ampere/Orin-or-newer name, bf16" : "pre-Ampere GPU, no bf16");
    } else if (gpu) {
        dev->bf16 = 1;
        snprintf(dev->bf16_source, sizeof dev->bf16_source,
                 "device profile default for %s: assumed Ampere/Orin or newer",
                 edgert_device_class_name(dev->device_class));
    } else {
        er_bf16_from_cpu_flags(dev, dev->arch);
        char rule[sizeof dev->bf16_source];
        snprintf(rule, sizeof rule, "%s", dev->bf16_source);
        snprintf(dev->bf16_source, sizeof dev->bf16_source, "device profile default from %.120s",
                 rule);
    }
}

/* The version decides how to read everything else: stop when it is missing
 * or unsupported rather than misreport fields. 0 or -1. */
static int check_version(er_yaml *y, yaml_node_t *root, er_diags *d)
{
    long long version = 0;
    if (er_yaml_int(y, root, "profile_version", 1, LLONG_MIN, LLONG_MAX, &version, d) != 0)
        return -1;
    if (version == ER_PROFILE_VERSION)
        return 0;
    yaml_node_t *v = er_yaml_get(y, root, "profile_version");
    er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(v), er_yaml_col(v),
                "unsupported profile_version %lld (this edgert reads %d)", version,
                ER_PROFILE_VERSION);
    return -1;
}

edgert_status er_device_profile_load(const char *path, edgert_device *out, er_diags *d)
{
    if (!out)
        return EDGERT_E_USAGE;
    memset(out, 0, sizeof *out);
    if (!path) {
        er_diag_add(d, EDGERT_LOG_ERROR, NULL, 0, 0, "device profile: no path given");
        return EDGERT_E_USAGE;
    }

    er_yaml y;
    edgert_device dev;
    memset(&dev, 0, sizeof dev);
    edgert_status st = er_yaml_load(&y, path, d);
    if (st != EDGERT_OK)
        return st; /* er_yaml_load reported file:line:col and freed y */
    st = EDGERT_E_PARSE;
    yaml_node_t *root = er_yaml_root(&y);
    if (!root || root->type != YAML_MAPPING_NODE) {
        er_yaml_check_keys(&y, root, er_profile_keys, d); /* reports "expected a mapping" */
        goto out;
    }
    /* Every field is read even after a bad one, to report all problems at once. */
    int bad = er_yaml_check_keys(&y, root, er_profile_keys, d) != 0;
    if (check_version(&y, root, d) != 0)
        goto out;
    bad |= read_identity(&y, root, &dev, d) != 0;
    bad |= read_cpu_flags(&y, root, &dev, d) != 0;
    bad |= read_resources(&y, root, &dev, d) != 0;
    int bf16 = 0;
    int has_bf16 = er_yaml_bool(&y, root, "bf16", 0, &bf16, d);
    bad |= has_bf16 < 0;
    bad |= read_fixed_str(&y, root, "accelerator", 0, 0, dev.accelerator,
                          sizeof dev.accelerator, d) < 0;
    char *notes = NULL; /* only type-checked: notes are for people */
    bad |= er_yaml_str(&y, root, "notes", 0, &notes, d) < 0;
    free(notes);
    if (bad)
        goto out;

    decide_bf16(has_bf16, bf16, &dev);
    dev.planned = 1;
    snprintf(dev.source, sizeof dev.source, "%s", path);
    snprintf(dev.class_evidence, sizeof dev.class_evidence,
             "device profile: device_class at line %u",
             er_yaml_line(er_yaml_get(&y, root, "device_class")));
    *out = dev;
    st = EDGERT_OK;
out:
    er_yaml_free(&y);
    return st;
}
