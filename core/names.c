/*
 * core/names.c — the one spelling of every enum, shared by code, CLI,
 * manifests and docs.
 */
#include <string.h>

#include "internal.h"

static const char *const status_names[] = {
    "OK", "E_USAGE", "E_NOMEM", "E_IO", "E_PARSE", "E_NOT_FOUND",
    "E_NOT_ELIGIBLE", "E_ABI", "E_UNSUPPORTED", "E_PLUGIN", "E_INTERNAL",
};

static const char *const arch_names[] = {"unknown", "x86_64", "arm64"};

static const char *const class_names[] = {
    "unknown", "x86_cpu", "arm64_cpu", "cuda_discrete", "jetson", "npu_phone",
};

static const char *const priority_names[] = {"speed", "fidelity"};

/* Indexed by edgert_cpu_flag; Linux /proc/cpuinfo spellings. */
static const char *const flag_names[EDGERT_CPU_FLAG_COUNT] = {
    [EDGERT_CPU_SSE4_2] = "sse4_2",
    [EDGERT_CPU_AVX] = "avx",
    [EDGERT_CPU_AVX2] = "avx2",
    [EDGERT_CPU_FMA] = "fma",
    [EDGERT_CPU_F16C] = "f16c",
    [EDGERT_CPU_AVX_VNNI] = "avx_vnni",
    [EDGERT_CPU_AVX512F] = "avx512f",
    [EDGERT_CPU_AVX512BW] = "avx512bw",
    [EDGERT_CPU_AVX512VL] = "avx512vl",
    [EDGERT_CPU_AVX512DQ] = "avx512dq",
    [EDGERT_CPU_AVX512CD] = "avx512cd",
    [EDGERT_CPU_AVX512_VNNI] = "avx512_vnni",
    [EDGERT_CPU_AVX512_BF16] = "avx512_bf16",
    [EDGERT_CPU_AVX512_FP16] = "avx512_fp16",
    [EDGERT_CPU_AMX_TILE] = "amx_tile",
    [EDGERT_CPU_AMX_INT8] = "amx_int8",
    [EDGERT_CPU_AMX_BF16] = "amx_bf16",
    [EDGERT_CPU_AMX_FP16] = "amx_fp16",
    [EDGERT_CPU_ASIMD] = "asimd",
    [EDGERT_CPU_ASIMDHP] = "asimdhp",
    [EDGERT_CPU_ASIMDDP] = "asimddp",
    [EDGERT_CPU_I8MM] = "i8mm",
    [EDGERT_CPU_BF16] = "bf16",
    [EDGERT_CPU_SVE] = "sve",
    [EDGERT_CPU_SVE2] = "sve2",
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int lookup(const char *const *names, size_t n, const char *s)
{
    if (!s)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (names[i] && strcmp(names[i], s) == 0)
            return (int)i;
    return -1;
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

const char *edgert_cpu_flag_name(edgert_cpu_flag f)
{
    return (unsigned)f < COUNT(flag_names) ? flag_names[f] : NULL;
}

int edgert_arch_parse(const char *s, edgert_arch *out)
{
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
    int i = lookup(class_names, COUNT(class_names), s);
    if (i <= 0)
        return -1;
    *out = (edgert_device_class)i;
    return 0;
}

int edgert_priority_parse(const char *s, edgert_priority *out)
{
    int i = lookup(priority_names, COUNT(priority_names), s);
    if (i < 0)
        return -1;
    *out = (edgert_priority)i;
    return 0;
}

int edgert_cpu_flag_parse(const char *s, edgert_cpu_flag *out)
{
    int i = lookup(flag_names, COUNT(flag_names), s);
    if (i < 0)
        return -1;
    *out = (edgert_cpu_flag)i;
    return 0;
}
