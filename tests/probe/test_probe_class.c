/*
 * tests/probe/test_probe_class.c — the probe's device class and bf16 (core/probe/probe_class.c):
 * the GPU-name bf16 rule, the class of every fake sysroot in fixtures/sysroots,
 * and cases built at test time (several GPUs, conflicting facts, odd files).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "test_probe_util.h"
#include "probe/probe.h"

/* ----------------------------------------------------------------------- */
/* bf16 of a discrete GPU, from its name                                   */
/* ----------------------------------------------------------------------- */

static void test_gpu_model_bf16(void **state)
{
    (void)state;
    static const struct {
        const char *model;
        int bf16;
    } cases[] = {
        {"NVIDIA GeForce RTX 4090", 1},   {"NVIDIA GeForce RTX 3060", 1},
        {"NVIDIA GeForce RTX 5090", 1},   {"NVIDIA A100-SXM4-80GB", 1},
        {"NVIDIA A10", 1},                {"NVIDIA L4", 1},
        {"NVIDIA H100 80GB HBM3", 1},     {"NVIDIA RTX A6000", 1},
        {"NVIDIA RTX 6000 Ada Generation", 1}, {"", 1},
        {"NVIDIA GeForce GTX 1080", 0},   {"NVIDIA GeForce GTX 1660 SUPER", 0},
        {"GeForce GTX 980", 0},           {"NVIDIA GeForce RTX 2080 Ti", 0},
        {"NVIDIA GeForce RTX 2060", 0},   {"NVIDIA TITAN V", 0},
        {"NVIDIA TITAN RTX", 0},          {"Quadro RTX 8000", 0},
        {"Quadro P4000", 0},              {"Quadro T1000", 0},
        {"Tesla V100-SXM2-16GB", 0},      {"Tesla P100-PCIE-16GB", 0},
        {"Tesla P40", 0},                 {"Tesla P4", 0},
        {"Tesla T4", 0},                  {"Tesla K80", 0},
        {"V100", 0},                      {"T4", 0},
        {"NVIDIA T4", 0},                 {"NVIDIA T1000", 0},
        {"  nvidia geforce gtx 1070", 0},
        /* pre-Ampere names without GTX/Quadro/Tesla */
        {"NVIDIA GeForce MX450", 0},      {"GeForce 940MX", 0},
        {"GRID K520", 0},                 {"NVIDIA GRID K520", 0},
        {"GeForce 840M", 0},              {"NVIDIA GeForce 710M", 0},
        {"NVIDIA GeForce MX550", 0},      {"GRID M60-8Q", 0},
        {"GRID T4-16Q", 0},               {"GRID V100-32C", 0},
        {"Tesla M60", 0},                 {"Quadro RTX 6000", 0},
        {"NVIDIA Jetson Xavier NX", 0},   {"Jetson TX2", 0},
        {"NVIDIA Jetson Nano Developer Kit", 0}, {"Graphics Device", 0},
        /* Ampere and newer, some with older-looking names */
        {"NVIDIA GeForce RTX 2050", 1},   {"NVIDIA GeForce MX570", 1},
        {"NVIDIA GeForce RTX 3050 Ti Laptop GPU", 1}, {"NVIDIA RTX A500 Laptop GPU", 1},
        {"NVIDIA RTX 2000 Ada Generation", 1}, {"NVIDIA RTX PRO 6000 Blackwell", 1},
        {"NVIDIA H200", 1},               {"NVIDIA GH200 480GB", 1},
        {"NVIDIA B200", 1},               {"NVIDIA GB10", 1},
        {"NVIDIA L40S", 1},               {"NVIDIA A10G", 1},
        {"GRID A100-40C", 1},             {"NVIDIA Jetson AGX Orin", 1},
        {"nvidia geforce rtx 4060", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (er_gpu_model_has_bf16(cases[i].model) != cases[i].bf16)
            fail_msg("GPU '%s': bf16 should be %d", cases[i].model, cases[i].bf16);
    assert_int_equal(er_gpu_model_has_bf16(NULL), 1);
}

/* ----------------------------------------------------------------------- */
/* device classes of the fake sysroots                                     */
/* ----------------------------------------------------------------------- */

typedef struct class_case {
    const char *sysroot;
    edgert_arch arch;
    uint64_t cpu_flags; /* the CPU part, as er_probe would have filled it */
    edgert_device_class cls;
    const char *accelerator; /* exact */
    int bf16;
    const char *evidence;    /* substring */
    const char *bf16_source; /* substring */
} class_case;

static const class_case class_cases[] = {
    {"x86-server", EDGERT_ARCH_X86_64, F(EDGERT_CPU_AVX512_BF16), EDGERT_CLASS_X86_CPU, "", 1,
     "CPU arch x86_64", "avx512_bf16"},
    {"x86-server", EDGERT_ARCH_X86_64, F(EDGERT_CPU_AVX2), EDGERT_CLASS_X86_CPU, "", 0,
     "no NPU, Tegra or NVIDIA GPU markers", "neither avx512_bf16 nor amx_bf16"},
    {"x86-server", EDGERT_ARCH_X86_64, F(EDGERT_CPU_AMX_BF16), EDGERT_CLASS_X86_CPU, "", 1,
     "x86_64", "cpu flag amx_bf16"},
    {"rpi5", EDGERT_ARCH_ARM64, ARM_V82, EDGERT_CLASS_ARM64_CPU, "", 0, "CPU arch arm64",
     "no bf16"},
    {"jetson-orin", EDGERT_ARCH_ARM64, ARM_V82, EDGERT_CLASS_JETSON,
     "NVIDIA Jetson AGX Orin Developer Kit", 1,
     "/etc/nv_tegra_release (R35); /proc/device-tree/compatible (nvidia,tegra234)", "tegra234"},
    {"jetson-nano", EDGERT_ARCH_ARM64, ARM_V82, EDGERT_CLASS_JETSON,
     "NVIDIA Jetson Nano Developer Kit", 0,
     "/etc/nv_tegra_release (R32); /sys/firmware/devicetree/base/compatible (nvidia,tegra210)",
     "pre-Orin"},
    {"jetson-dt-only", EDGERT_ARCH_ARM64, ARM_V82, EDGERT_CLASS_JETSON, "Jetson-AGX", 0,
     "/proc/device-tree/compatible (nvidia,tegra194)", "tegra194"},
    {"android-hexagon", EDGERT_ARCH_ARM64, ARM_V92, EDGERT_CLASS_NPU_PHONE,
     "Hexagon cDSP via /dev/fastrpc-cdsp-secure", 1,
     "/system/build.prop (Android); /dev/fastrpc-cdsp-secure", "cpu flag bf16"},
    {"android-hexagon", EDGERT_ARCH_ARM64, ARM_V82, EDGERT_CLASS_NPU_PHONE,
     "Hexagon cDSP via /dev/fastrpc-cdsp-secure", 0, "Hexagon FastRPC", "no bf16"},
    {"android-adsprpc", EDGERT_ARCH_ARM64, ARM_V92, EDGERT_CLASS_NPU_PHONE,
     "Hexagon DSP via /dev/adsprpc-smd", 1, "/dev/adsprpc-smd (Hexagon FastRPC)", "bf16"},
    {"android-no-npu", EDGERT_ARCH_ARM64, ARM_V92, EDGERT_CLASS_ARM64_CPU, "", 1,
     "/system/build.prop (Android) but no Hexagon FastRPC node", "cpu flag bf16"},
    {"nvidia-workstation", EDGERT_ARCH_X86_64, F(EDGERT_CPU_AVX2), EDGERT_CLASS_CUDA_DISCRETE,
     "NVIDIA GeForce RTX 4090", 1, "/proc/driver/nvidia/gpus/0000:01:00.0 (1 GPU); /dev/nvidia0",
     "Model 'NVIDIA GeForce RTX 4090'"},
    {"nvidia-pascal", EDGERT_ARCH_X86_64, F(EDGERT_CPU_AVX2), EDGERT_CLASS_CUDA_DISCRETE,
     "NVIDIA GeForce GTX 1080", 0, "/proc/driver/nvidia/gpus/0000:02:00.0 (1 GPU)",
     "pre-Ampere"},
    {"nvidia-devnode-only", EDGERT_ARCH_X86_64, F(EDGERT_CPU_AVX2), EDGERT_CLASS_CUDA_DISCRETE,
     "NVIDIA GPU (model unknown)", 1, "/dev/nvidia0",
     "default: no driver GPU info; assumed Ampere or newer"},
    {"nvidia-devnode-only", EDGERT_ARCH_ARM64, ARM_V82, EDGERT_CLASS_CUDA_DISCRETE,
     "NVIDIA GPU (model unknown)", 1, "/dev/nvidia0", "default"},
    {"empty", EDGERT_ARCH_X86_64, 0, EDGERT_CLASS_X86_CPU, "", 0, "x86_64", "neither"},
    {"empty", EDGERT_ARCH_ARM64, 0, EDGERT_CLASS_ARM64_CPU, "", 0, "arm64", "no bf16"},
    {"empty", EDGERT_ARCH_UNKNOWN, 0, EDGERT_CLASS_UNKNOWN, "", 0, "unknown", "unknown arch"},
    /* compatible without NUL terminators, "nvidia,tegra" at the very end */
    {"hostile", EDGERT_ARCH_ARM64, ARM_V82, EDGERT_CLASS_JETSON, NULL, 1,
     "/proc/device-tree/compatible (nvidia,tegra)", "default: Tegra SoC and L4T release unknown"},
};

static void test_sysroot_classes(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof class_cases / sizeof class_cases[0]; i++) {
        const class_case *c = &class_cases[i];
        char root[512];
        snprintf(root, sizeof root, SYSROOTS "%s", c->sysroot);
        edgert_device dev;
        memset(&dev, 0x5a, sizeof dev); /* stale content must be replaced */
        dev.cpu_flags = c->cpu_flags;
        dev.bf16_source[0] = '\0';
        er_probe_device_class(root, c->arch, &dev);
        print_message("  %-20s %-7s → %s / %s / bf16 %d (%s) [%s]\n", c->sysroot,
                      edgert_arch_name(c->arch), edgert_device_class_name(dev.device_class),
                      dev.accelerator, dev.bf16, dev.bf16_source, dev.class_evidence);
        if (dev.device_class != c->cls)
            fail_msg("%s: class %s, want %s", c->sysroot,
                     edgert_device_class_name(dev.device_class),
                     edgert_device_class_name(c->cls));
        if (c->accelerator && strcmp(dev.accelerator, c->accelerator) != 0)
            fail_msg("%s: accelerator '%s', want '%s'", c->sysroot, dev.accelerator,
                     c->accelerator);
        if (dev.bf16 != c->bf16)
            fail_msg("%s: bf16 %d, want %d (%s)", c->sysroot, dev.bf16, c->bf16,
                     dev.bf16_source);
        if (!dev.class_evidence[0] || !strstr(dev.class_evidence, c->evidence))
            fail_msg("%s: evidence '%s' lacks '%s'", c->sysroot, dev.class_evidence,
                     c->evidence);
        if (!strstr(dev.bf16_source, c->bf16_source))
            fail_msg("%s: bf16_source '%s' lacks '%s'", c->sysroot, dev.bf16_source,
                     c->bf16_source);
        /* every string stays terminated and printable */
        assert_true(memchr(dev.accelerator, '\0', sizeof dev.accelerator) != NULL);
        for (const char *p = dev.accelerator; *p; p++)
            assert_true(*p >= 0x20 && *p < 0x7f);
    }
}

/* Cases built at test time: multiple GPUs, several FastRPC nodes, L4T
 * release without device tree, conflicting facts, unreadable files.
 * Length: slightly over 100 lines on purpose, a list of independent paragraphs
 * (build a sysroot, classify, check, remove) that reads best in one place. */
static void test_sysroot_classes_generated(void **state)
{
    (void)state;
    char root[64];
    edgert_device dev;

    /* Two GPUs: the first by PCI address speaks; the listing is sorted. */
    make_tmp(root, sizeof root);
    puts_file(root, "proc/driver/nvidia/gpus/0000:02:00.0/information",
              "Model: \t\t NVIDIA GeForce GTX 1080\n");
    puts_file(root, "proc/driver/nvidia/gpus/0000:01:00.0/information",
              "IRQ: 1\nModel: \t\t NVIDIA RTX A6000\t \n");
    memset(&dev, 0, sizeof dev);
    er_probe_device_class(root, EDGERT_ARCH_X86_64, &dev);
    assert_int_equal(dev.device_class, EDGERT_CLASS_CUDA_DISCRETE);
    assert_string_equal(dev.accelerator, "NVIDIA RTX A6000");
    assert_int_equal(dev.bf16, 1);
    assert_non_null(strstr(dev.class_evidence, "0000:01:00.0 (2 GPUs)"));
    rm_tree(root);

    /* GPU info without a Model line: the documented default. */
    make_tmp(root, sizeof root);
    puts_file(root, "proc/driver/nvidia/gpus/0000:03:00.0/information", "IRQ: 5\nModel:   \n");
    memset(&dev, 0, sizeof dev);
    er_probe_device_class(root, EDGERT_ARCH_X86_64, &dev);
    assert_int_equal(dev.device_class, EDGERT_CLASS_CUDA_DISCRETE);
    assert_string_equal(dev.accelerator, "NVIDIA GPU (model unknown)");
    assert_int_equal(dev.bf16, 1);
    assert_non_null(strstr(dev.bf16_source, "default"));
    rm_tree(root);

    /* Several FastRPC nodes: the sorted first one; Android + NVIDIA markers:
     * the phone wins. */
    make_tmp(root, sizeof root);
    puts_file(root, "system/build.prop", "ro.product.model=x\n");
    puts_file(root, "dev/fastrpc-cdsp-secure", "");
    puts_file(root, "dev/fastrpc-cdsp", "");
    puts_file(root, "dev/fastrpc-adsp", "");
    puts_file(root, "dev/nvidia0", "");
    memset(&dev, 0, sizeof dev);
    dev.cpu_flags = ARM_V92;
    er_probe_device_class(root, EDGERT_ARCH_ARM64, &dev);
    assert_int_equal(dev.device_class, EDGERT_CLASS_NPU_PHONE);
    assert_string_equal(dev.accelerator, "Hexagon cDSP via /dev/fastrpc-cdsp");
    rm_tree(root);

    /* FastRPC node without Android: not a phone. */
    make_tmp(root, sizeof root);
    puts_file(root, "dev/fastrpc-cdsp", "");
    memset(&dev, 0, sizeof dev);
    er_probe_device_class(root, EDGERT_ARCH_ARM64, &dev);
    assert_int_equal(dev.device_class, EDGERT_CLASS_ARM64_CPU);
    rm_tree(root);

    /* L4T release only: R36 → Orin era; Tegra beats the NVIDIA driver nodes. */
    make_tmp(root, sizeof root);
    puts_file(root, "etc/nv_tegra_release", "# R36 (release), REVISION: 3.0\n");
    puts_file(root, "dev/nvidia0", "");
    memset(&dev, 0, sizeof dev);
    er_probe_device_class(root, EDGERT_ARCH_ARM64, &dev);
    assert_int_equal(dev.device_class, EDGERT_CLASS_JETSON);
    assert_int_equal(dev.bf16, 1);
    assert_string_equal(dev.class_evidence, "/etc/nv_tegra_release (R36)");
    assert_string_equal(dev.accelerator, "NVIDIA Jetson (model unknown)");
    assert_non_null(strstr(dev.bf16_source, "R36"));
    rm_tree(root);

    /* Garbage release file: still a Jetson, release unknown, default bf16. */
    make_tmp(root, sizeof root);
    puts_file(root, "etc/nv_tegra_release", "R\x01\x02 not a release\n");
    memset(&dev, 0, sizeof dev);
    er_probe_device_class(root, EDGERT_ARCH_ARM64, &dev);
    assert_int_equal(dev.device_class, EDGERT_CLASS_JETSON);
    assert_string_equal(dev.class_evidence, "/etc/nv_tegra_release (release unknown)");
    assert_int_equal(dev.bf16, 1);
    rm_tree(root);

    /* Conflicting facts: device tree says Orin, release says R32; the SoC
     * is the more specific fact. */
    make_tmp(root, sizeof root);
    puts_file(root, "etc/nv_tegra_release", "# R32 (release)\n");
    put(root, "proc/device-tree/compatible", "nvidia,tegra234\0", 16);
    memset(&dev, 0, sizeof dev);
    er_probe_device_class(root, EDGERT_ARCH_ARM64, &dev);
    assert_int_equal(dev.bf16, 1);
    assert_non_null(strstr(dev.bf16_source, "tegra234"));
    rm_tree(root);

    /* A compatible list without Tegra (last string unterminated), and a GPU
     * folder holding only a hidden file: an arm64 CPU. */
    make_tmp(root, sizeof root);
    put(root, "proc/device-tree/compatible", "brcm,bcm2711\0raspberrypi,4-model-b", 35);
    puts_file(root, "proc/driver/nvidia/gpus/.keep", "");
    memset(&dev, 0, sizeof dev);
    er_probe_device_class(root, EDGERT_ARCH_ARM64, &dev);
    assert_int_equal(dev.device_class, EDGERT_CLASS_ARM64_CPU);
    rm_tree(root);

    /* A GPU entry whose information is a folder: a GPU of unknown model. */
    make_tmp(root, sizeof root);
    puts_file(root, "proc/driver/nvidia/gpus/0000:04:00.0/information/x", "Model: A100\n");
    memset(&dev, 0, sizeof dev);
    er_probe_device_class(root, EDGERT_ARCH_X86_64, &dev);
    assert_int_equal(dev.device_class, EDGERT_CLASS_CUDA_DISCRETE);
    assert_string_equal(dev.accelerator, "NVIDIA GPU (model unknown)");
    assert_int_equal(dev.bf16, 1);
    rm_tree(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_model_bf16),
        cmocka_unit_test(test_sysroot_classes),
        cmocka_unit_test(test_sysroot_classes_generated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
