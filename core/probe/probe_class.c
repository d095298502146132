/*
 * core/probe/probe_class.c — which class of device is this, and does it do bf16?
 * (architecture.md, Data flow, probe: the device class comes from files)
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
 * detect_jetson; the GPU-name rule er_gpu_model_has_bf16 is shared with
 * device_profile.c), every other class from the CPU flags
 * (er_bf16_from_cpu_flags, which device_profile.c shares).
 *
 * Every file is read through the sysroot (probe_read.c); the decisions on
 * their text (er_gpu_model_has_bf16, tegra_release_major, find_tegra) are
 * pure.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "probe/probe_internal.h"

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

/* The number that starts s ("3060 Ti" -> 3060), or -1 without a digit. */
static long leading_number(const char *s)
{
    if (*s < '0' || *s > '9')
        return -1;
    long v = 0;
    for (; *s >= '0' && *s <= '9' && v < 100000; s++)
        v = v * 10 + (*s - '0');
    return v;
}

/* Whether c is one of the upper-case letters in `set`, in either case. */
static int letter_in(char c, const char *set)
{
    return c && strchr(set, toupper((unsigned char)c)) != NULL;
}

/* A data-centre name: one of `letters` then a digit ("A100-SXM4-80GB",
 * "A10G", "H100 80GB HBM3", "L40S", "B200"), or G + one of them + a digit
 * (the Grace superchips "GH200", "GB200", "GB10"). */
static int datacentre_name(const char *m, const char *letters)
{
    if (letter_in(m[0], "G") && letter_in(m[1], letters) && leading_number(m + 2) >= 0)
        return 1;
    return letter_in(m[0], letters) && leading_number(m + 1) >= 0;
}

/*
 * bf16 on an NVIDIA GPU, from its product name: native bf16 arithmetic
 * arrived with Ampere (compute capability 8.0/8.6), so the rule lists the
 * names of Ampere and newer and everything else has none (GeForce GTX/GT/MX,
 * 9xx/8xx/7xx, RTX 20, TITAN, Quadro, Tesla, GRID K/M/P/T/V, Xavier/TX2/
 * Nano). Ampere or newer:
 *   GeForce RTX 30xx, 40xx, 50xx, ... (a number >= 3000), and the two
 *     Ampere boards with older-looking names, GeForce RTX 2050 and MX570;
 *   RTX A<n> (RTX A6000, A500), RTX ... Ada / Blackwell, RTX PRO;
 *   data centre A<n>, H<n>, L<n>, B<n> (A100, A10G, H100, L4, L40S, B200)
 *     and GH200 / GB200 / GB10, also as vGPU profiles ("GRID A100-40C");
 *   Jetson and DRIVE SoCs from Orin on (Orin, Thor).
 * Matching ignores case and a leading "NVIDIA " or "GRID ". A name that is
 * empty or NULL says nothing: 1, the probe's documented default without
 * driver information.
 */
int er_gpu_model_has_bf16(const char *model)
{
    if (!model)
        return 1;
    while (er_probe_is_space(*model))
        model++;
    if (!*model)
        return 1;
    if (strncasecmp(model, "NVIDIA ", 7) == 0)
        model += 7;
    if (strncasecmp(model, "GRID ", 5) == 0)
        return datacentre_name(model + 5, "AHLB");
    if (strcasestr(model, "Orin") || strcasestr(model, "Thor"))
        return 1;
    if (strncasecmp(model, "GeForce RTX ", 12) == 0) {
        long n = leading_number(model + 12);
        return n >= 3000 || n == 2050;
    }
    if (strncasecmp(model, "GeForce MX570", 13) == 0)
        return 1;
    if (strncasecmp(model, "RTX ", 4) == 0)
        return (letter_in(model[4], "A") && leading_number(model + 5) >= 0) ||
               strncasecmp(model + 4, "PRO", 3) == 0 || strcasestr(model, " Ada") ||
               strcasestr(model, "Blackwell");
    return datacentre_name(model, "AHLB");
}

/* Android with a Hexagon FastRPC node: the NPU path. */
static int detect_npu_phone(const char *sysroot, edgert_device *dev, char *note, size_t note_cap)
{
    if (!er_path_exists(sysroot, "/system/build.prop"))
        return 0;
    char **nodes = NULL;
    size_t n = er_probe_list_dir(sysroot, "/dev", "fastrpc-cdsp", &nodes);
    char node[128] = "";
    const char *dsp = "cDSP";
    if (n)
        snprintf(node, sizeof node, "%s", nodes[0]);
    else if (er_path_exists(sysroot, "/dev/adsprpc-smd")) {
        /* Older kernels expose every DSP through this one node. */
        snprintf(node, sizeof node, "adsprpc-smd");
        dsp = "DSP";
    }
    er_probe_free_names(nodes, n);
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
    char *rel = rel_exists ? er_probe_read(sysroot, rel_path, NULL, NULL) : NULL;
    char *compat = er_probe_dt_read(sysroot, "compatible", &len, &dt_root, NULL);
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
    if (er_probe_dt_model(sysroot, model, sizeof model, NULL))
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
    size_t n = er_probe_list_dir(sysroot, gpus_dir, "", &gpus);
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
        info = er_probe_read(sysroot, path, NULL, NULL);
        if (info)
            er_probe_line_value(info, "Model", model, sizeof model);
        append(dev->class_evidence, sizeof dev->class_evidence, "%s/%s (%zu GPU%s)", gpus_dir,
               gpus[0], n, n == 1 ? "" : "s");
    }
    if (devnode)
        append(dev->class_evidence, sizeof dev->class_evidence, "/dev/nvidia0");

    if (model[0]) {
        snprintf(dev->accelerator, sizeof dev->accelerator, "%s", model);
        dev->bf16 = er_gpu_model_has_bf16(model);
        snprintf(dev->bf16_source, sizeof dev->bf16_source, "driver GPU info Model '%.80s': %s",
                 model, dev->bf16 ? "an Ampere-or-newer name, bf16" : "pre-Ampere GPU, no bf16");
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
    er_probe_free_names(gpus, n);
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
