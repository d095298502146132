/*
 * core/common/names.c — the one spelling of every enum, shared by code, CLI,
 * manifests and docs.
 */
#include <string.h>

#include "common/internal.h"

static const char *const status_names[] = {
    "OK", "E_USAGE", "E_NOMEM", "E_IO", "E_PARSE", "E_NOT_FOUND",
    "E_NOT_ELIGIBLE", "E_ABI", "E_UNSUPPORTED", "E_PLUGIN", "E_INTERNAL",
};

static const char *const arch_names[] = {"unknown", "x86_64", "arm64"};

static const char *const class_names[] = {
    "unknown", "x86_cpu", "arm64_cpu", "cuda_discrete", "jetson", "npu_phone",
};

static const char *const priority_names[] = {"speed", "fidelity"};

/*
 * Every CPU flag, indexed by edgert_cpu_flag (whose values are ABI: stable,
 * append-only). The one place that says which arch a flag belongs to and
 * which OS-managed register state it needs; every classifier (manifests,
 * device profiles, the OS-state gate) asks this table, never the enum's
 * ranges, so a flag appended after sve2 (an x86 one, say) is classified by
 * its row. Names are Linux /proc/cpuinfo spellings.
 */
#define X86 EDGERT_ARCH_X86_64
#define ARM EDGERT_ARCH_ARM64
static const er_cpu_flag_info flag_table[] = {
    [EDGERT_CPU_SSE4_2] = {"sse4_2", X86, "sse"},
    [EDGERT_CPU_AVX] = {"avx", X86, "avx"},
    [EDGERT_CPU_AVX2] = {"avx2", X86, "avx"},
    [EDGERT_CPU_FMA] = {"fma", X86, "avx"},
    [EDGERT_CPU_F16C] = {"f16c", X86, "avx"},
    [EDGERT_CPU_AVX_VNNI] = {"avx_vnni", X86, "avx"},
    [EDGERT_CPU_AVX512F] = {"avx512f", X86, "avx512"},
    [EDGERT_CPU_AVX512BW] = {"avx512bw", X86, "avx512"},
    [EDGERT_CPU_AVX512VL] = {"avx512vl", X86, "avx512"},
    [EDGERT_CPU_AVX512DQ] = {"avx512dq", X86, "avx512"},
    [EDGERT_CPU_AVX512CD] = {"avx512cd", X86, "avx512"},
    [EDGERT_CPU_AVX512_VNNI] = {"avx512_vnni", X86, "avx512"},
    [EDGERT_CPU_AVX512_BF16] = {"avx512_bf16", X86, "avx512"},
    [EDGERT_CPU_AVX512_FP16] = {"avx512_fp16", X86, "avx512"},
    [EDGERT_CPU_AMX_TILE] = {"amx_tile", X86, "amx"},
    [EDGERT_CPU_AMX_INT8] = {"amx_int8", X86, "amx"},
    [EDGERT_CPU_AMX_BF16] = {"amx_bf16", X86, "amx"},
    [EDGERT_CPU_AMX_FP16] = {"amx_fp16", X86, "amx"},
    [EDGERT_CPU_ASIMD] = {"asimd", ARM, "fpsimd"},
    [EDGERT_CPU_ASIMDHP] = {"asimdhp", ARM, "fpsimd"},
    [EDGERT_CPU_ASIMDDP] = {"asimddp", ARM, "fpsimd"},
    [EDGERT_CPU_I8MM] = {"i8mm", ARM, "fpsimd"},
    [EDGERT_CPU_BF16] = {"bf16", ARM, "fpsimd"},
    [EDGERT_CPU_SVE] = {"sve", ARM, "sve"},
    [EDGERT_CPU_SVE2] = {"sve2", ARM, "sve"},
};
#undef X86
#undef ARM
_Static_assert(sizeof flag_table / sizeof flag_table[0] == EDGERT_CPU_FLAG_COUNT,
               "every edgert_cpu_flag needs its row in flag_table");

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

int er_ascii_caseeq(const char *a, const char *b)
{
    for (;; a++, b++) {
        char x = *a >= 'A' && *a <= 'Z' ? (char)(*a - 'A' + 'a') : *a;
        char y = *b >= 'A' && *b <= 'Z' ? (char)(*b - 'A' + 'a') : *b;
        if (x != y)
            return 0;
        if (!x)
            return 1;
    }
}

static int lookup(const char *const *names, size_t n, const char *s)
{
    if (!s)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (names[i] && strcmp(names[i], s) == 0)
            return (int)i;
    return -1;
}

const char *edgert_version(void)
{
    return EDGERT_VERSION_STRING;
}

const char *edgert_status_name(edgert_status s)
{
    return (unsigned)s < COUNT(status_names) ? status_names[s] : "E_UNKNOWN";
}

const char *edgert_arch_name(edgert_arch a)
{
    return (unsigned)a < COUNT(arch_names) ? arch_names[a] : "unknown";
}

const char *edgert_device_class_name(edgert_device_class c)
{
    return (unsigned)c < COUNT(class_names) ? class_names[c] : "unknown";
}

const char *edgert_priority_name(edgert_priority p)
{
    return (unsigned)p < COUNT(priority_names) ? priority_names[p] : "unknown";
}

const er_cpu_flag_info *er_cpu_flag_info_of(edgert_cpu_flag f)
{
    return (unsigned)f < COUNT(flag_table) ? &flag_table[f] : NULL;
}

const char *edgert_cpu_flag_name(edgert_cpu_flag f)
{
    return (unsigned)f < COUNT(flag_table) ? flag_table[f].name : NULL;
}

int edgert_arch_parse(const char *s, edgert_arch *out)
{
    if (!out)
        return -1;
    int i = lookup(arch_names, COUNT(arch_names), s);
    if (i <= 0) { /* "unknown" is not a valid input */
        if (s && (strcmp(s, "aarch64") == 0)) {
            *out = EDGERT_ARCH_ARM64;
            return 0;
        }
        return -1;
    }
    *out = (edgert_arch)i;
    return 0;
}

int edgert_device_class_parse(const char *s, edgert_device_class *out)
{
    if (!out)
        return -1;
    int i = lookup(class_names, COUNT(class_names), s);
    if (i <= 0)
        return -1;
    *out = (edgert_device_class)i;
    return 0;
}

int edgert_priority_parse(const char *s, edgert_priority *out)
{
    if (!out)
        return -1;
    /* any case: an operator's EDGERT_PRIORITY=Fidelity must not fail every
     * application */
    for (size_t i = 0; s && i < COUNT(priority_names); i++)
        if (er_ascii_caseeq(priority_names[i], s)) {
            *out = (edgert_priority)i;
            return 0;
        }
    return -1;
}

int edgert_cpu_flag_parse(const char *s, edgert_cpu_flag *out)
{
    for (size_t i = 0; s && out && i < COUNT(flag_table); i++) {
        if (strcmp(flag_table[i].name, s) == 0) {
            *out = (edgert_cpu_flag)i;
            return 0;
        }
    }
    return -1;
}
