/*
 * core/probe/probe_host.c — the host facts of the probe: logical cores, memory and
 * the CPU or board name, all from files under the sysroot.
 *
 * Pure parsers (er_parse_cpu_list, er_parse_meminfo, er_parse_cpu_id) decode the text; the
 * readers around them only fetch it (probe_read.c) and say in a diagnostic
 * which file was missing or garbled. A fact that cannot be known stays at
 * 0 / "".
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe/probe_internal.h"

/* One CPU id: decimal digits, < ER_PROBE_MAX_CPU_ID. */
static int read_cpu_id(const char **p, unsigned *out)
{
    const char *s = *p;
    unsigned v = 0;
    if (*s < '0' || *s > '9')
        return -1;
    for (; *s >= '0' && *s <= '9'; s++) {
        v = v * 10u + (unsigned)(*s - '0');
        if (v >= ER_PROBE_MAX_CPU_ID)
            return -1;
    }
    *p = s;
    *out = v;
    return 0;
}

int er_parse_cpu_list(const char *text, unsigned *count)
{
    if (!text || !count)
        return -1;
    const char *p = text;
    unsigned total = 0;
    long long prev_end = -1;
    for (;;) {
        unsigned a, b;
        if (read_cpu_id(&p, &a) != 0)
            return -1;
        b = a;
        if (*p == '-') {
            p++;
            if (read_cpu_id(&p, &b) != 0 || b < a)
                return -1;
        }
        /* Linux prints ascending, disjoint ranges; anything else is not a
         * CPU list and would double-count. */
        if ((long long)a <= prev_end)
            return -1;
        prev_end = b;
        total += b - a + 1u; /* ≤ ER_PROBE_MAX_CPU_ID: no overflow */
        if (*p != ',')
            break;
        p++;
    }
    while (er_probe_is_space(*p))
        p++;
    if (*p)
        return -1;
    *count = total;
    return 0;
}

/* " 24683620 kB" → bytes. Only the kB unit is accepted: it is the only one
 * Linux prints, and a value without it could mean anything. */
static int parse_kb(const char *s, size_t len, uint64_t *bytes)
{
    const uint64_t max_kb = ER_MEMINFO_MAX_BYTES / 1024u;
    size_t i = 0;
    uint64_t v = 0;
    while (i < len && (s[i] == ' ' || s[i] == '\t'))
        i++;
    if (i == len || s[i] < '0' || s[i] > '9')
        return -1;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        v = v * 10u + (uint64_t)(s[i] - '0');
        if (v > max_kb)
            return -1;
    }
    while (i < len && (s[i] == ' ' || s[i] == '\t'))
        i++;
    if (len - i < 2 || s[i] != 'k' || s[i + 1] != 'B')
        return -1;
    for (i += 2; i < len; i++)
        if (!er_probe_is_space(s[i]))
            return -1;
    *bytes = v * 1024u;
    return 0;
}

int er_parse_meminfo(const char *text, uint64_t *total_bytes, uint64_t *available_bytes)
{
    static const struct {
        const char *key;
        int bit;
    } keys[] = {{"MemTotal:", ER_MEMINFO_TOTAL}, {"MemAvailable:", ER_MEMINFO_AVAILABLE}};
    int found = 0, seen = 0;
    *total_bytes = 0;
    *available_bytes = 0;
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            size_t kl = strlen(keys[k].key);
            if (len < kl || strncmp(line, keys[k].key, kl) != 0 || (seen & keys[k].bit))
                continue;
            seen |= keys[k].bit; /* only the first line of a key counts */
            uint64_t v;
            if (parse_kb(line + kl, len - kl, &v) != 0)
                continue;
            found |= keys[k].bit;
            *(keys[k].bit == ER_MEMINFO_TOTAL ? total_bytes : available_bytes) = v;
        }
        line = nl ? nl + 1 : NULL;
    }
    return found;
}

static void probe_cores(const char *sysroot, edgert_device *dev, er_diags *d)
{
    static const char path[] = "/sys/devices/system/cpu/online";
    unsigned n = 0;
    char *text = er_probe_read(sysroot, path, NULL, d);
    if (text && er_parse_cpu_list(text, &n) != 0) {
        char *full = er_rooted_path(sysroot, path);
        er_diag_add(d, EDGERT_LOG_WARN, full ? full : path, 0, 0,
                    "not a CPU list like \"0-3,5\"; core count unknown from this file, "
                    "continuing");
        free(full);
        n = 0;
    }
    free(text);
    /* sysconf describes the machine we run on, which is the sysroot's
     * machine only when the sysroot is "/". */
    if (n == 0 && er_probe_is_live_root(sysroot)) {
        long s = sysconf(_SC_NPROCESSORS_ONLN);
        if (s > 0 && s < (long)ER_PROBE_MAX_CPU_ID) {
            n = (unsigned)s;
            er_diag_add(d, EDGERT_LOG_INFO, path, 0, 0,
                        "no usable CPU list; sysconf(_SC_NPROCESSORS_ONLN) says %u", n);
        }
    }
    if (n == 0)
        er_diag_add(d, EDGERT_LOG_INFO, NULL, 0, 0, "probe: logical core count unknown");
    dev->logical_cores = n;
}

static void probe_memory(const char *sysroot, edgert_device *dev, er_diags *d)
{
    static const char path[] = "/proc/meminfo";
    char *text = er_probe_read(sysroot, path, NULL, d);
    char *full = er_rooted_path(sysroot, path);
    const char *shown = full ? full : path;
    if (!text) {
        er_diag_add(d, EDGERT_LOG_INFO, shown, 0, 0, "no meminfo; memory size unknown");
        goto out;
    }
    uint64_t total, avail;
    int got = er_parse_meminfo(text, &total, &avail);
    if (!(got & ER_MEMINFO_TOTAL))
        er_diag_add(d, EDGERT_LOG_WARN, shown, 0, 0,
                    "no valid 'MemTotal: <n> kB' line; memory size unknown, continuing");
    if (!(got & ER_MEMINFO_AVAILABLE))
        er_diag_add(d, EDGERT_LOG_INFO, shown, 0, 0,
                    "no valid 'MemAvailable: <n> kB' line (kernel before 3.14?); "
                    "available memory unknown");
    if ((got & ER_MEMINFO_TOTAL) && (got & ER_MEMINFO_AVAILABLE) && avail > total) {
        er_diag_add(d, EDGERT_LOG_WARN, shown, 0, 0,
                    "MemAvailable (%llu kB) exceeds MemTotal (%llu kB); available memory "
                    "unknown, continuing",
                    (unsigned long long)(avail / 1024u), (unsigned long long)(total / 1024u));
        avail = 0;
    }
    dev->mem_total_bytes = total;
    dev->mem_available_bytes = avail;
out:
    free(text);
    free(full);
}

/* x86 Linux: "model name : Intel(R) Xeon(R) ..." (arm64 kernels print no
 * such line, but some vendor kernels do). */
static int name_from_cpuinfo(const char *cpuinfo, edgert_device *dev)
{
    return cpuinfo && er_probe_line_value(cpuinfo, "model name", dev->name, sizeof dev->name);
}

/* One cpuinfo field for the id: digits only (base 10), or 0x and hex digits
 * (base 16), or letters and digits (base 0: a vendor id), at most 16
 * characters. Returns 1 and the value's text in `v`. */
static int cpu_id_field(const char *text, const char *key, int base, char v[24])
{
    char raw[64];
    if (!er_probe_line_value(text, key, raw, sizeof raw))
        return 0;
    size_t n = strlen(raw), i = 0;
    if (n == 0 || n > 16)
        return 0;
    if (base == 16) {
        if (n < 3 || raw[0] != '0' || (raw[1] != 'x' && raw[1] != 'X'))
            return 0;
        i = 2;
    }
    for (; i < n; i++) {
        unsigned char c = (unsigned char)raw[i];
        int digit = c >= '0' && c <= '9';
        int hex = digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        int alnum = digit || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (!(base == 10 ? digit : base == 16 ? hex : alnum))
            return 0;
    }
    memcpy(v, raw, n + 1);
    return 1;
}

int er_parse_cpu_id(const char *text, edgert_arch arch, char *out, size_t cap)
{
    static const struct {
        const char *key, *label;
        int base;
    } x86[] = {{"vendor_id", "", 0},
               {"cpu family", "family ", 10},
               {"model", "model ", 10},
               {"stepping", "stepping ", 10}},
      arm[] = {{"CPU implementer", "implementer ", 16},
               {"CPU part", "part ", 16},
               {"CPU variant", "variant ", 16},
               {"CPU revision", "revision ", 10}};
    if (!out || cap == 0)
        return 0;
    out[0] = '\0';
    if (!text || (arch != EDGERT_ARCH_X86_64 && arch != EDGERT_ARCH_ARM64))
        return 0;
    const int is_x86 = arch == EDGERT_ARCH_X86_64;
    size_t used = 0;
    for (size_t f = 0; f < 4; f++) {
        const char *key = is_x86 ? x86[f].key : arm[f].key;
        char v[24];
        if (!cpu_id_field(text, key, is_x86 ? x86[f].base : arm[f].base, v))
            continue;
        int w = snprintf(out + used, cap - used, "%s%s%s", used ? " " : "",
                         is_x86 ? x86[f].label : arm[f].label, v);
        if (w < 0 || (size_t)w >= cap - used) {
            out[used] = '\0'; /* no room: keep the whole fields before it */
            break;
        }
        used += (size_t)w;
    }
    return used > 0;
}


void er_probe_host_facts(const char *sysroot, edgert_arch arch, edgert_device *dev, er_diags *d)
{
    if (!dev)
        return;
    probe_cores(sysroot, dev, d);
    probe_memory(sysroot, dev, d);
    /* cpuinfo read once, for the name and the id */
    char *cpuinfo = er_probe_read(sysroot, "/proc/cpuinfo", NULL, d);
    /* arm64 boards name themselves in the device tree; x86 CPUs in cpuinfo.
     * Each tries the other source second. */
    int named = arch == EDGERT_ARCH_ARM64
                    ? (er_probe_dt_model(sysroot, dev->name, sizeof dev->name, d) ||
                       name_from_cpuinfo(cpuinfo, dev))
                    : (name_from_cpuinfo(cpuinfo, dev) ||
                       er_probe_dt_model(sysroot, dev->name, sizeof dev->name, d));
    if (!named) {
        dev->name[0] = '\0';
        er_diag_add(d, EDGERT_LOG_INFO, NULL, 0, 0,
                    "probe: no CPU model name (cpuinfo) or device-tree model; name unknown");
    }
    if (!er_parse_cpu_id(cpuinfo, arch, dev->cpu_id, sizeof dev->cpu_id))
        er_diag_add(d, EDGERT_LOG_INFO, NULL, 0, 0,
                    "probe: no CPU family and model (cpuinfo); CPU id unknown");
    free(cpuinfo);
}
