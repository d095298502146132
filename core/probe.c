/*
 * core/probe.c — what device are we on? (design.md §2, "Probe")
 *
 * CPU flags come from the CPU itself, never from files: CPUID + XGETBV on
 * x86-64 (plus Linux's AMX permission request), getauxval(AT_HWCAP/AT_HWCAP2)
 * on arm64. A flag counts as usable only when the OS enabled the register
 * state it needs; a flag the CPU has but the OS did not enable is reported
 * separately (cpu_flags_os_disabled) so `explain` can say why a backend that
 * "should" run does not.
 *
 * Everything else — cores, memory, names, the device class — comes from files
 * read through the sysroot prefix, so tests (and fleet planning) can present
 * any device. The probe never fails hard: a missing or garbled file leaves
 * that fact at 0 / "" and adds a diagnostic saying which file and why.
 *
 * Every file is read with er_read_file bounded by ER_PROBE_MAX_FILE_BYTES
 * (1 MiB); a bigger file is ignored with a warning. Directory listings are
 * sorted so "first GPU" / "first FastRPC node" is reproducible.
 *
 * Device class, first match wins (er_probe_device_class):
 *   1. npu_phone      /system/build.prop AND a Hexagon FastRPC node
 *                     (/dev/fastrpc-cdsp*, else /dev/adsprpc-smd)
 *   2. jetson         /etc/nv_tegra_release, or "nvidia,tegra" in the
 *                     device-tree compatible list (checked before 3: Jetsons
 *                     carry NVIDIA driver nodes too)
 *   3. cuda_discrete  an entry in /proc/driver/nvidia/gpus/, or /dev/nvidia0
 *   4. x86_cpu / arm64_cpu by the CPU arch, else unknown
 * bf16: GPU classes from driver/device-tree facts (rules at detect_cuda /
 * detect_jetson), every other class from the CPU flags.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#endif
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

#include "probe_internal.h"

/* Linux x86 arch_prctl request for extended-state permission (v5.16+,
 * arch/x86/include/uapi/asm/prctl.h); defined here so old headers build. */
#ifndef ARCH_REQ_XCOMP_PERM
#define ARCH_REQ_XCOMP_PERM 0x1023
#endif
#define ER_XFEATURE_XTILEDATA 18

/* At most this many entries are kept from one directory listing: /dev of a
 * phone has a few hundred; a hostile sysroot must not make us allocate
 * without bound. */
#define ER_PROBE_MAX_DIR_ENTRIES 4096

#define FLAG(f) (1ull << (unsigned)(f))

/* ======================================================================= */
/* x86-64: CPUID/XCR0 decoding (pure)                                       */
/* ======================================================================= */

enum x86_reg { R_L1_ECX, R_L7_EBX, R_L7_ECX, R_L7_EDX, R_L71_EAX };

#define AVX_STATE (ER_XCR0_SSE | ER_XCR0_YMM)
#define AVX512_STATE (AVX_STATE | ER_XCR0_OPMASK | ER_XCR0_ZMM_HI256 | ER_XCR0_HI16_ZMM)
/* AMX instructions #UD unless XCR0[18:17] = 11b (SDM vol. 1, 13.3); they do
 * not depend on the AVX state components. */
#define AMX_STATE (ER_XCR0_XTILECFG | ER_XCR0_XTILEDATA)

typedef struct x86_bit {
    edgert_cpu_flag flag;
    enum x86_reg reg;
    unsigned bit;
    uint64_t state; /* XCR0 components that must all be enabled */
    int amx;        /* also needs Linux's XTILEDATA permission */
} x86_bit;

/* Bit positions: Intel SDM vol. 2A, CPUID; AMD APM vol. 3, appendix E. */
static const x86_bit x86_bits[] = {
    /* SSE state is always on in 64-bit mode (FXSR), so SSE4.2 needs nothing. */
    {EDGERT_CPU_SSE4_2, R_L1_ECX, 20, 0, 0},
    {EDGERT_CPU_FMA, R_L1_ECX, 12, AVX_STATE, 0},
    {EDGERT_CPU_AVX, R_L1_ECX, 28, AVX_STATE, 0},
    {EDGERT_CPU_F16C, R_L1_ECX, 29, AVX_STATE, 0},
    {EDGERT_CPU_AVX2, R_L7_EBX, 5, AVX_STATE, 0},
    {EDGERT_CPU_AVX512F, R_L7_EBX, 16, AVX512_STATE, 0},
    {EDGERT_CPU_AVX512DQ, R_L7_EBX, 17, AVX512_STATE, 0},
    {EDGERT_CPU_AVX512CD, R_L7_EBX, 28, AVX512_STATE, 0},
    {EDGERT_CPU_AVX512BW, R_L7_EBX, 30, AVX512_STATE, 0},
    {EDGERT_CPU_AVX512VL, R_L7_EBX, 31, AVX512_STATE, 0},
    {EDGERT_CPU_AVX512_VNNI, R_L7_ECX, 11, AVX512_STATE, 0},
    {EDGERT_CPU_AMX_BF16, R_L7_EDX, 22, AMX_STATE, 1},
    {EDGERT_CPU_AVX512_FP16, R_L7_EDX, 23, AVX512_STATE, 0},
    {EDGERT_CPU_AMX_TILE, R_L7_EDX, 24, AMX_STATE, 1},
    {EDGERT_CPU_AMX_INT8, R_L7_EDX, 25, AMX_STATE, 1},
    {EDGERT_CPU_AVX_VNNI, R_L71_EAX, 4, AVX_STATE, 0},
    {EDGERT_CPU_AVX512_BF16, R_L71_EAX, 5, AVX512_STATE, 0},
    {EDGERT_CPU_AMX_FP16, R_L71_EAX, 21, AMX_STATE, 1},
};

#define X86_OSXSAVE_BIT 27u /* CPUID.1:ECX: the OS set CR4.OSXSAVE, XGETBV works */
#define X86_LM_BIT 29u      /* CPUID.80000001h:EDX: long mode */

/* A register's value, or 0 when its leaf lies beyond what the CPU reports:
 * reading a leaf past the maximum returns the data of the highest basic leaf
 * on Intel, i.e. garbage for our purpose. */
static uint32_t x86_reg_value(const er_x86_cpuid *r, enum x86_reg reg)
{
    switch (reg) {
    case R_L1_ECX:
        return r->max_leaf >= 1 ? r->l1_ecx : 0;
    case R_L7_EBX:
        return r->max_leaf >= 7 ? r->l7_0_ebx : 0;
    case R_L7_ECX:
        return r->max_leaf >= 7 ? r->l7_0_ecx : 0;
    case R_L7_EDX:
        return r->max_leaf >= 7 ? r->l7_0_edx : 0;
    case R_L71_EAX:
        return (r->max_leaf >= 7 && r->l7_0_eax >= 1) ? r->l7_1_eax : 0;
    }
    return 0;
}

void er_x86_decode(const er_x86_cpuid *regs, uint64_t xcr0, int amx_permitted, uint64_t *usable,
                   uint64_t *os_disabled)
{
    *usable = 0;
    *os_disabled = 0;
    if (!regs)
        return;
    int osxsave = (x86_reg_value(regs, R_L1_ECX) >> X86_OSXSAVE_BIT) & 1u;
    uint64_t state = osxsave ? xcr0 : 0; /* without OSXSAVE, XGETBV is #UD */
    for (size_t i = 0; i < sizeof x86_bits / sizeof x86_bits[0]; i++) {
        const x86_bit *b = &x86_bits[i];
        if (!((x86_reg_value(regs, b->reg) >> b->bit) & 1u))
            continue; /* not in this CPU */
        int enabled = (state & b->state) == b->state && (!b->amx || amx_permitted);
        if (enabled)
            *usable |= FLAG(b->flag);
        else
            *os_disabled |= FLAG(b->flag);
    }
}

int er_x86_long_mode(const er_x86_cpuid *regs)
{
    if (!regs || regs->max_ext_leaf < 0x80000001u)
        return 0;
    return (int)((regs->ext1_edx >> X86_LM_BIT) & 1u);
}

/* ======================================================================= */
/* arm64: HWCAP decoding (pure)                                             */
/* ======================================================================= */

void er_arm64_decode(uint64_t hwcap, uint64_t hwcap2, uint64_t *usable)
{
    static const struct {
        int word; /* 1 = AT_HWCAP, 2 = AT_HWCAP2 */
        uint64_t bit;
        edgert_cpu_flag flag;
    } map[] = {
        {1, ER_HWCAP_ASIMD, EDGERT_CPU_ASIMD},   {1, ER_HWCAP_ASIMDHP, EDGERT_CPU_ASIMDHP},
        {1, ER_HWCAP_ASIMDDP, EDGERT_CPU_ASIMDDP}, {1, ER_HWCAP_SVE, EDGERT_CPU_SVE},
        {2, ER_HWCAP2_SVE2, EDGERT_CPU_SVE2},    {2, ER_HWCAP2_I8MM, EDGERT_CPU_I8MM},
        {2, ER_HWCAP2_BF16, EDGERT_CPU_BF16},
    };
    *usable = 0;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        uint64_t word = map[i].word == 1 ? hwcap : hwcap2;
        if (word & map[i].bit)
            *usable |= FLAG(map[i].flag);
    }
}

/* ======================================================================= */
/* Live CPU reads (the only code that executes CPU-specific instructions)   */
/* ======================================================================= */

#if defined(__x86_64__)
/* "amx_tile, amx_int8" — the names of the flags in `mask`. */
static void flag_list(uint64_t mask, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (unsigned f = 0; f < EDGERT_CPU_FLAG_COUNT && used < len; f++) {
        if (!EDGERT_HAS_FLAG(mask, f))
            continue;
        int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
                         edgert_cpu_flag_name((edgert_cpu_flag)f));
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

static void x86_read_cpuid(er_x86_cpuid *r)
{
    unsigned a, b, c, d;
    memset(r, 0, sizeof *r);
    __cpuid(0, a, b, c, d);
    r->max_leaf = a;
    if (r->max_leaf >= 1) {
        __cpuid_count(1, 0, a, b, c, d);
        r->l1_ecx = c;
    }
    if (r->max_leaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        r->l7_0_eax = a;
        r->l7_0_ebx = b;
        r->l7_0_ecx = c;
        r->l7_0_edx = d;
        if (r->l7_0_eax >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            r->l7_1_eax = a;
        }
    }
    __cpuid(0x80000000u, a, b, c, d);
    r->max_ext_leaf = a;
    if (r->max_ext_leaf >= 0x80000001u) {
        __cpuid_count(0x80000001u, 0, a, b, c, d);
        r->ext1_edx = d;
    }
}

/* XGETBV with ECX = 0 reads XCR0. Only valid when CPUID reports OSXSAVE. */
static uint64_t x86_xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0u));
    return ((uint64_t)hi << 32) | lo;
}

static void probe_cpu_flags(edgert_device *dev, er_diags *d)
{
    er_x86_cpuid regs;
    x86_read_cpuid(&regs);
    uint64_t xcr0 = ((regs.l1_ecx >> X86_OSXSAVE_BIT) & 1u) ? x86_xgetbv0() : 0;
    uint64_t usable, disabled;
    er_x86_decode(&regs, xcr0, 1, &usable, &disabled);

    /* The kernel (5.16+) keeps AMX tile data off until a process asks for it;
     * without the permission the first tile instruction kills the process
     * with SIGILL. Asking is idempotent and per process, and it is exactly
     * what a plugin that uses AMX needs later, so the probe asks once here.
     * Only asked when the CPU and XCR0 say AMX could work at all. */
    const uint64_t amx = FLAG(EDGERT_CPU_AMX_TILE) | FLAG(EDGERT_CPU_AMX_INT8) |
                         FLAG(EDGERT_CPU_AMX_BF16) | FLAG(EDGERT_CPU_AMX_FP16);
    int amx_refused = 0;
    if (usable & amx) {
        errno = 0;
        long rc = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, ER_XFEATURE_XTILEDATA);
        if (rc != 0) {
            int e = errno;
            er_diag_add(d, EDGERT_LOG_INFO, NULL, 0, 0,
                        "probe: Linux refused AMX tile-data permission "
                        "(arch_prctl ARCH_REQ_XCOMP_PERM: %s); AMX counts as OS-disabled",
                        strerror(e));
            amx_refused = 1;
            er_x86_decode(&regs, xcr0, 0, &usable, &disabled);
        }
    }
    if (!er_x86_long_mode(&regs))
        er_diag_add(d, EDGERT_LOG_INFO, NULL, 0, 0,
                    "probe: CPUID 0x80000001 does not report long mode although this is a "
                    "64-bit process (CPUID masked by a hypervisor?)");
    if (disabled) {
        char names[512];
        flag_list(disabled, names, sizeof names);
        er_diag_add(d, EDGERT_LOG_INFO, NULL, 0, 0,
                    "probe: the CPU reports %s, but the OS has not enabled their register "
                    "state (XCR0 0x%llx%s%s); not usable",
                    names, (unsigned long long)xcr0,
                    ((regs.l1_ecx >> X86_OSXSAVE_BIT) & 1u) ? "" : ", OSXSAVE off",
                    amx_refused ? ", AMX permission refused" : "");
    }
    dev->cpu_flags = usable;
    dev->cpu_flags_os_disabled = disabled;
}
#elif defined(__aarch64__)
static void probe_cpu_flags(edgert_device *dev, er_diags *d)
{
    (void)d;
    er_arm64_decode((uint64_t)getauxval(AT_HWCAP), (uint64_t)getauxval(AT_HWCAP2),
                    &dev->cpu_flags);
    dev->cpu_flags_os_disabled = 0;
}
#else
static void probe_cpu_flags(edgert_device *dev, er_diags *d)
{
    (void)dev;
    er_diag_add(d, EDGERT_LOG_WARN, NULL, 0, 0,
                "probe: edgert knows no CPU flags for this architecture");
}
#endif

static edgert_arch build_arch(void)
{
#if defined(__x86_64__)
    return EDGERT_ARCH_X86_64;
#elif defined(__aarch64__)
    return EDGERT_ARCH_ARM64;
#else
    return EDGERT_ARCH_UNKNOWN;
#endif
}

/* ======================================================================= */
/* Text helpers                                                             */
/* ======================================================================= */

static int is_live_root(const char *sysroot)
{
    return !sysroot || !*sysroot || strcmp(sysroot, "/") == 0;
}

/* sysroot + path, as util.c's er_read_file builds it (malloc'd; NULL on OOM). */
static char *rooted_path(const char *sysroot, const char *path)
{
    return is_live_root(sysroot) ? er_strdup(path) : er_path_join(sysroot, path);
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* Copy s[0..len) into dst, trimmed, with everything but printable ASCII as
 * '?': names end up in logs and JSON, and a hostile file must not smuggle
 * control characters there. Truncates to cap - 1 bytes. */
static void copy_clean(char *dst, size_t cap, const char *s, size_t len)
{
    while (len && is_space(*s)) {
        s++;
        len--;
    }
    while (len && is_space(s[len - 1]))
        len--;
    size_t n = 0;
    for (size_t i = 0; i < len && n + 1 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        dst[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    dst[n] = '\0';
}

/* Append "; part" (or "part" to an empty buffer), truncating. */
static void append(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t cap, const char *fmt, ...)
{
    size_t used = strnlen(buf, cap);
    if (used + 1 >= cap)
        return;
    if (used) {
        int n = snprintf(buf + used, cap - used, "; ");
        if (n < 0 || (size_t)n >= cap - used)
            return;
        used += (size_t)n;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, cap - used, fmt, ap);
    va_end(ap);
}

/* Read a probe file. Absent: NULL, silently (most files are optional).
 * Present but unreadable or over the size limit: NULL and a warning. */
static char *probe_read(const char *sysroot, const char *path, size_t *len, er_diags *d)
{
    size_t n = 0;
    char *text = er_read_file(sysroot, path, ER_PROBE_MAX_FILE_BYTES, &n);
    if (len)
        *len = text ? n : 0;
    if (text || !er_path_exists(sysroot, path))
        return text;
    char *full = rooted_path(sysroot, path);
    er_diag_add(d, EDGERT_LOG_WARN, full ? full : path, 0, 0,
                "unreadable or larger than %u bytes; ignored, continuing",
                (unsigned)ER_PROBE_MAX_FILE_BYTES);
    free(full);
    return NULL;
}

/* The value of the first line "key<spaces/tabs>:<value>" in text, trimmed and
 * cleaned into out. Returns 1 when found with a non-empty value. */
static int line_value(const char *text, const char *key, char *out, size_t cap)
{
    size_t klen = strlen(key);
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len > klen && strncmp(line, key, klen) == 0) {
            size_t i = klen;
            while (i < len && (line[i] == ' ' || line[i] == '\t'))
                i++;
            if (i < len && line[i] == ':') {
                copy_clean(out, cap, line + i + 1, len - i - 1);
                if (out[0])
                    return 1;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    out[0] = '\0';
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* Entries of sysroot+dir whose names start with `prefix` (not hidden ones),
 * sorted with strcmp so every later "first" is reproducible. Returns the
 * count; *out is malloc'd (NULL when none). A missing directory is 0. */
static size_t list_dir(const char *sysroot, const char *dir, const char *prefix, char ***out)
{
    char **names = NULL;
    size_t n = 0, cap = 0;
    DIR *dh = NULL;
    char *full = rooted_path(sysroot, dir);
    *out = NULL;
    if (!full)
        goto out;
    dh = opendir(full);
    if (!dh)
        goto out;
    struct dirent *e;
    while ((e = readdir(dh)) != NULL && n < ER_PROBE_MAX_DIR_ENTRIES) {
        if (e->d_name[0] == '.')
            continue; /* ".", "..", and hidden files no driver creates */
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            char **nn = realloc(names, ncap * sizeof *nn);
            if (!nn)
                break;
            names = nn;
            cap = ncap;
        }
        names[n] = er_strdup(e->d_name);
        if (!names[n])
            break;
        n++;
    }
    if (n)
        qsort(names, n, sizeof *names, cmp_str);
out:
    if (dh)
        closedir(dh);
    free(full);
    if (!n) {
        free(names);
        names = NULL;
    }
    *out = names;
    return n;
}

/* A device-tree property: /proc/device-tree/<prop>, else the sysfs folder
 * that /proc link points to (some sysroots, and containers, have only one).
 * *used names the folder the property came from. */
static char *dt_read(const char *sysroot, const char *prop, size_t *len, const char **used,
                     er_diags *d)
{
    static const char *const roots[] = {"/proc/device-tree", "/sys/firmware/devicetree/base"};
    char path[128];
    *used = NULL;
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", roots[i], prop);
        char *text = probe_read(sysroot, path, len, d);
        if (text) {
            *used = roots[i];
            return text;
        }
    }
    return NULL;
}

/* ======================================================================= */
/* Cores, memory, name                                                      */
/* ======================================================================= */

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
    while (is_space(*p))
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
        if (!is_space(s[i]))
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
    char *text = probe_read(sysroot, path, NULL, d);
    if (text && er_parse_cpu_list(text, &n) != 0) {
        char *full = rooted_path(sysroot, path);
        er_diag_add(d, EDGERT_LOG_WARN, full ? full : path, 0, 0,
                    "not a CPU list like \"0-3,5\"; core count unknown from this file, "
                    "continuing");
        free(full);
        n = 0;
    }
    free(text);
    /* sysconf describes the machine we run on, which is the sysroot's
     * machine only when the sysroot is "/". */
    if (n == 0 && is_live_root(sysroot)) {
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
    char *text = probe_read(sysroot, path, NULL, d);
    char *full = rooted_path(sysroot, path);
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
static int name_from_cpuinfo(const char *sysroot, edgert_device *dev, er_diags *d)
{
    char *text = probe_read(sysroot, "/proc/cpuinfo", NULL, d);
    int ok = text && line_value(text, "model name", dev->name, sizeof dev->name);
    free(text);
    return ok;
}

/* The board's name: the device-tree `model` property (NUL-terminated; a
 * missing terminator is tolerated). */
static int dt_model(const char *sysroot, char *out, size_t cap, er_diags *d)
{
    size_t len = 0;
    const char *used;
    char *text = dt_read(sysroot, "model", &len, &used, d);
    out[0] = '\0';
    if (!text)
        return 0;
    const char *nul = memchr(text, '\0', len);
    copy_clean(out, cap, text, nul ? (size_t)(nul - text) : len);
    free(text);
    return out[0] != '\0';
}

void er_probe_host_facts(const char *sysroot, edgert_arch arch, edgert_device *dev, er_diags *d)
{
    if (!dev)
        return;
    probe_cores(sysroot, dev, d);
    probe_memory(sysroot, dev, d);
    /* arm64 boards name themselves in the device tree; x86 CPUs in cpuinfo.
     * Each tries the other source second. */
    int named = arch == EDGERT_ARCH_ARM64
                    ? (dt_model(sysroot, dev->name, sizeof dev->name, d) ||
                       name_from_cpuinfo(sysroot, dev, d))
                    : (name_from_cpuinfo(sysroot, dev, d) ||
                       dt_model(sysroot, dev->name, sizeof dev->name, d));
    if (!named) {
        dev->name[0] = '\0';
        er_diag_add(d, EDGERT_LOG_INFO, NULL, 0, 0,
                    "probe: no CPU model name (cpuinfo) or device-tree model; name unknown");
    }
}

/* ======================================================================= */
/* bf16                                                                     */
/* ======================================================================= */

void er_bf16_from_cpu_flags(edgert_device *dev, edgert_arch arch)
{
    uint64_t f = dev->cpu_flags;
    int has_avx = EDGERT_HAS_FLAG(f, EDGERT_CPU_AVX512_BF16) != 0;
    int has_amx = EDGERT_HAS_FLAG(f, EDGERT_CPU_AMX_BF16) != 0;
    switch (arch) {
    case EDGERT_ARCH_X86_64:
        dev->bf16 = has_avx || has_amx;
        snprintf(dev->bf16_source, sizeof dev->bf16_source, "%s",
                 has_avx && has_amx ? "cpu flags avx512_bf16, amx_bf16"
                 : has_avx          ? "cpu flag avx512_bf16"
                 : has_amx          ? "cpu flag amx_bf16"
                                    : "cpu flags: neither avx512_bf16 nor amx_bf16");
        break;
    case EDGERT_ARCH_ARM64:
        dev->bf16 = EDGERT_HAS_FLAG(f, EDGERT_CPU_BF16) != 0;
        snprintf(dev->bf16_source, sizeof dev->bf16_source, "%s",
                 dev->bf16 ? "cpu flag bf16" : "cpu flags: no bf16");
        break;
    default:
        dev->bf16 = 0;
        snprintf(dev->bf16_source, sizeof dev->bf16_source, "unknown arch: no bf16 flag known");
        break;
    }
}

/*
 * bf16 on a discrete NVIDIA GPU: native bf16 arithmetic arrived with Ampere
 * (sm_80/sm_86). The driver's "Model:" line names the product, so the rule is
 * a list of pre-Ampere product families; any other name (RTX 30/40/50, A100,
 * A10, L4, H100, RTX A6000, "RTX 6000 Ada", ...) counts as Ampere or newer.
 * Brand families that ended before Ampere are matched whole (Quadro, Tesla,
 * TITAN, GeForce GTX), plus the bare data-centre names some drivers print
 * ("V100", "P40", "T4") and the unbranded Turing boards ("T400", "T1000").
 * Matching ignores case and an optional leading "NVIDIA ".
 */
int er_gpu_model_has_bf16(const char *model)
{
    static const char *const pre_ampere[] = {
        "GeForce GTX", "GeForce GT ", "GeForce RTX 20", "TITAN", "Quadro", "Tesla", "V100",
    };
    if (!model)
        return 1;
    while (is_space(*model))
        model++;
    if (strncasecmp(model, "NVIDIA ", 7) == 0)
        model += 7;
    for (size_t i = 0; i < sizeof pre_ampere / sizeof pre_ampere[0]; i++)
        if (strncasecmp(model, pre_ampere[i], strlen(pre_ampere[i])) == 0)
            return 0;
    /* "P4", "P40", "P100" (Pascal), "T4", "T400", "T1000" (Turing). */
    if ((model[0] == 'P' || model[0] == 'T') && model[1] >= '0' && model[1] <= '9')
        return 0;
    return 1;
}

/* ======================================================================= */
/* Device class                                                             */
/* ======================================================================= */

/* Android with a Hexagon FastRPC node: the NPU path. */
static int detect_npu_phone(const char *sysroot, edgert_device *dev, char *note, size_t note_cap)
{
    if (!er_path_exists(sysroot, "/system/build.prop"))
        return 0;
    char **nodes = NULL;
    size_t n = list_dir(sysroot, "/dev", "fastrpc-cdsp", &nodes);
    char node[128] = "";
    const char *dsp = "cDSP";
    if (n)
        snprintf(node, sizeof node, "%s", nodes[0]);
    else if (er_path_exists(sysroot, "/dev/adsprpc-smd")) {
        /* Older kernels expose every DSP through this one node. */
        snprintf(node, sizeof node, "adsprpc-smd");
        dsp = "DSP";
    }
    free_names(nodes, n);
    if (!node[0]) {
        snprintf(note, note_cap,
                 "/system/build.prop (Android) but no Hexagon FastRPC node "
                 "(/dev/fastrpc-cdsp*, /dev/adsprpc-smd)");
        return 0;
    }
    dev->device_class = EDGERT_CLASS_NPU_PHONE;
    snprintf(dev->accelerator, sizeof dev->accelerator, "Hexagon %s via /dev/%s", dsp, node);
    snprintf(dev->class_evidence, sizeof dev->class_evidence,
             "/system/build.prop (Android); /dev/%s (Hexagon FastRPC)", node);
    return 1;
}

/* "# R35 (release), REVISION: 4.1, ..." → 35; -1 when not in that form. */
static int tegra_release_major(const char *text)
{
    const char *p = text;
    while (*p == '#' || *p == ' ' || *p == '\t')
        p++;
    if (*p != 'R' || p[1] < '0' || p[1] > '9')
        return -1;
    int v = 0;
    for (p++; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (*p - '0');
        if (v > 9999)
            return -1;
    }
    return v;
}

/* Look through NUL-separated compatible strings (the last one may lack its
 * NUL: er_read_file terminates the buffer) for "nvidia,tegra". Returns 1 when
 * found; *soc is the number after it (234 for "nvidia,tegra234") or -1. */
static int find_tegra(const char *buf, size_t len, int *soc)
{
    static const char key[] = "nvidia,tegra";
    int found = 0;
    *soc = -1;
    for (const char *p = buf; p < buf + len; p += strlen(p) + 1) {
        const char *hit = strstr(p, key);
        if (!hit)
            continue;
        found = 1;
        const char *q = hit + sizeof key - 1;
        int v = 0, digits = 0;
        for (; *q >= '0' && *q <= '9' && digits < 6; q++, digits++)
            v = v * 10 + (*q - '0');
        if (digits && *soc < 0)
            *soc = v;
    }
    return found;
}

static int detect_jetson(const char *sysroot, edgert_device *dev)
{
    static const char rel_path[] = "/etc/nv_tegra_release";
    size_t len = 0;
    const char *dt_root = NULL;
    int soc = -1, tegra = 0, major = -1;
    int rel_exists = er_path_exists(sysroot, rel_path);
    char *rel = rel_exists ? probe_read(sysroot, rel_path, NULL, NULL) : NULL;
    char *compat = dt_read(sysroot, "compatible", &len, &dt_root, NULL);
    if (rel)
        major = tegra_release_major(rel);
    if (compat)
        tegra = find_tegra(compat, len, &soc);
    if (!rel_exists && !tegra)
        goto out;

    dev->device_class = EDGERT_CLASS_JETSON;
    dev->class_evidence[0] = '\0';
    if (rel_exists && major >= 0)
        append(dev->class_evidence, sizeof dev->class_evidence, "%s (R%d)", rel_path, major);
    else if (rel_exists)
        append(dev->class_evidence, sizeof dev->class_evidence, "%s (release unknown)",
               rel_path);
    if (tegra && soc >= 0)
        append(dev->class_evidence, sizeof dev->class_evidence,
               "%s/compatible (nvidia,tegra%d)", dt_root, soc);
    else if (tegra)
        append(dev->class_evidence, sizeof dev->class_evidence, "%s/compatible (nvidia,tegra)",
               dt_root);

    char model[sizeof dev->accelerator];
    if (dt_model(sysroot, model, sizeof model, NULL))
        snprintf(dev->accelerator, sizeof dev->accelerator, "%s", model);
    else
        snprintf(dev->accelerator, sizeof dev->accelerator, "NVIDIA Jetson (model unknown)");

    /* Jetson bf16: the integrated GPU has it from Orin (tegra234, Ampere) on;
     * Xavier (tegra194, Volta), TX2 (tegra186), Nano/TX1 (tegra210) do not.
     * The SoC in the device tree is the most specific fact; else the L4T
     * release: R32 and older ship only for pre-Orin modules (JetPack 4),
     * R34+ are Orin-era; with neither, Orin or newer is assumed. */
    if (soc >= 0) {
        dev->bf16 = soc >= 234;
        snprintf(dev->bf16_source, sizeof dev->bf16_source,
                 "device-tree compatible nvidia,tegra%d: %s", soc,
                 dev->bf16 ? "Orin or newer, bf16" : "pre-Orin GPU, no bf16");
    } else if (major >= 0) {
        dev->bf16 = major > 32;
        snprintf(dev->bf16_source, sizeof dev->bf16_source, "%s R%d: %s", rel_path, major,
                 dev->bf16 ? "Orin-era L4T, bf16" : "JetPack 4 or older (pre-Orin), no bf16");
    } else {
        dev->bf16 = 1;
        snprintf(dev->bf16_source, sizeof dev->bf16_source,
                 "default: Tegra SoC and L4T release unknown; assumed Orin or newer");
    }
out:
    free(rel);
    free(compat);
    return dev->device_class == EDGERT_CLASS_JETSON;
}

static int detect_cuda(const char *sysroot, edgert_device *dev)
{
    static const char gpus_dir[] = "/proc/driver/nvidia/gpus";
    char **gpus = NULL;
    char *info = NULL;
    size_t n = list_dir(sysroot, gpus_dir, "", &gpus);
    int devnode = er_path_exists(sysroot, "/dev/nvidia0");
    char model[sizeof dev->accelerator] = "";
    if (!n && !devnode)
        goto out;

    dev->device_class = EDGERT_CLASS_CUDA_DISCRETE;
    dev->class_evidence[0] = '\0';
    if (n) {
        /* Several GPUs: the first by PCI address speaks for the device. */
        char path[512];
        snprintf(path, sizeof path, "%s/%s/information", gpus_dir, gpus[0]);
        info = probe_read(sysroot, path, NULL, NULL);
        if (info)
            line_value(info, "Model", model, sizeof model);
        append(dev->class_evidence, sizeof dev->class_evidence, "%s/%s (%zu GPU%s)", gpus_dir,
               gpus[0], n, n == 1 ? "" : "s");
    }
    if (devnode)
        append(dev->class_evidence, sizeof dev->class_evidence, "/dev/nvidia0");

    if (model[0]) {
        snprintf(dev->accelerator, sizeof dev->accelerator, "%s", model);
        dev->bf16 = er_gpu_model_has_bf16(model);
        snprintf(dev->bf16_source, sizeof dev->bf16_source, "driver GPU info Model '%.80s': %s",
                 model, dev->bf16 ? "not a pre-Ampere name, bf16" : "pre-Ampere GPU, no bf16");
    } else {
        snprintf(dev->accelerator, sizeof dev->accelerator, "NVIDIA GPU (model unknown)");
        /* Documented default: most CUDA devices in service are Ampere or
         * newer, and a wrong "true" costs a fallback to fp16 at load time,
         * while a wrong "false" silently costs speed everywhere. */
        dev->bf16 = 1;
        snprintf(dev->bf16_source, sizeof dev->bf16_source,
                 "default: no driver GPU info; assumed Ampere or newer");
    }
out:
    free(info);
    free_names(gpus, n);
    return dev->device_class == EDGERT_CLASS_CUDA_DISCRETE;
}

void er_probe_device_class(const char *sysroot, edgert_arch arch, edgert_device *dev)
{
    if (!dev)
        return;
    char note[200] = "";
    dev->device_class = EDGERT_CLASS_UNKNOWN;
    dev->accelerator[0] = '\0';
    dev->class_evidence[0] = '\0';

    /* Order matters: a phone's NPU beats its CPU; a Jetson also has NVIDIA
     * driver nodes, so Tegra is checked before the discrete-GPU markers. */
    if (detect_npu_phone(sysroot, dev, note, sizeof note)) {
        er_bf16_from_cpu_flags(dev, arch); /* the CPU runs everything but the NPU graph */
        return;
    }
    if (detect_jetson(sysroot, dev) || detect_cuda(sysroot, dev))
        return;

    switch (arch) {
    case EDGERT_ARCH_X86_64:
        dev->device_class = EDGERT_CLASS_X86_CPU;
        break;
    case EDGERT_ARCH_ARM64:
        dev->device_class = EDGERT_CLASS_ARM64_CPU;
        break;
    default:
        dev->device_class = EDGERT_CLASS_UNKNOWN;
        break;
    }
    append(dev->class_evidence, sizeof dev->class_evidence, "%s",
           note[0] ? note : "no NPU, Tegra or NVIDIA GPU markers");
    append(dev->class_evidence, sizeof dev->class_evidence, "CPU arch %s",
           edgert_arch_name(arch));
    er_bf16_from_cpu_flags(dev, arch);
}

/* ======================================================================= */
/* Entry                                                                    */
/* ======================================================================= */

edgert_status er_probe(const char *sysroot, edgert_device *out, er_diags *d)
{
    if (!out)
        return EDGERT_E_USAGE;
    memset(out, 0, sizeof *out);
    out->planned = 0;
    snprintf(out->source, sizeof out->source, "probe (sysroot %s)",
             is_live_root(sysroot) ? "/" : sysroot);
    out->arch = build_arch();
    /* Flags describe the CPU executing this code, whatever the sysroot. */
    probe_cpu_flags(out, d);
    er_probe_host_facts(sysroot, out->arch, out, d);
    er_probe_device_class(sysroot, out->arch, out);
    return EDGERT_OK;
}
