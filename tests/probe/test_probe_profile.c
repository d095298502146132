/*
 * tests/probe/test_probe_profile.c — device profiles (core/probe/device_profile.c), the YAML
 * stand-in for the probe: every good profile in fixtures/devices, and every
 * bad one in fixtures/devices/bad with the exact line:col of its error.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "test_probe_util.h"
#include "test_util.h"
#include "common/diag.h"
#include "probe/probe.h"

#include <dirent.h>

/* ----------------------------------------------------------------------- */
/* device profiles                                                         */
/* ----------------------------------------------------------------------- */

typedef struct good_profile {
    const char *file;
    const char *name;
    edgert_arch arch;
    edgert_device_class cls;
    uint64_t flags, disabled;
    unsigned cores;
    uint64_t total_mb, avail_mb;
    int bf16;
    const char *accelerator;
    const char *bf16_source; /* substring */
} good_profile;

#define X86_V3 (F(EDGERT_CPU_SSE4_2) | F(EDGERT_CPU_AVX) | F(EDGERT_CPU_AVX2) |              \
                F(EDGERT_CPU_FMA) | F(EDGERT_CPU_F16C))
#define X86_AVX512_CORE (F(EDGERT_CPU_AVX512F) | F(EDGERT_CPU_AVX512BW) |                     \
                         F(EDGERT_CPU_AVX512VL) | F(EDGERT_CPU_AVX512DQ) |                    \
                         F(EDGERT_CPU_AVX512CD) | F(EDGERT_CPU_AVX512_VNNI) |                 \
                         F(EDGERT_CPU_AVX512_BF16))
#define X86_SPR (X86_V3 | F(EDGERT_CPU_AVX_VNNI) | X86_AVX512_CORE | F(EDGERT_CPU_AVX512_FP16))
#define X86_AMX3 (F(EDGERT_CPU_AMX_TILE) | F(EDGERT_CPU_AMX_INT8) | F(EDGERT_CPU_AMX_BF16))

static const good_profile good_profiles[] = {
    {"x86-amx.yaml", "Intel Xeon (Sapphire Rapids class), 2 vCPU", EDGERT_ARCH_X86_64,
     EDGERT_CLASS_X86_CPU, X86_SPR | X86_AMX3, 0, 2, 16384, 15000, 1, "", "bf16: true"},
    {"x86-amx-os-disabled.yaml", "Intel Xeon (Sapphire Rapids class), kernel without AMX",
     EDGERT_ARCH_X86_64, EDGERT_CLASS_X86_CPU, X86_SPR, X86_AMX3, 2, 16384, 15000, 1, "",
     "bf16: true"},
    {"x86-avx512.yaml", "AMD EPYC 9354 (Zen 4), 8 vCPU", EDGERT_ARCH_X86_64,
     EDGERT_CLASS_X86_CPU, X86_V3 | X86_AVX512_CORE, 0, 8, 32768, 30000, 1, "",
     "default from cpu flag avx512_bf16"},
    {"x86-avx2.yaml", "Intel Core i7-8700 (Coffee Lake)", EDGERT_ARCH_X86_64,
     EDGERT_CLASS_X86_CPU, X86_V3, 0, 12, 16384, 12000, 0, "",
     "neither avx512_bf16 nor amx_bf16"},
    {"x86-avxvnni.yaml", "Intel Core Ultra 7 155H (Meteor Lake)", EDGERT_ARCH_X86_64,
     EDGERT_CLASS_X86_CPU, X86_V3 | F(EDGERT_CPU_AVX_VNNI), 0, 22, 32768, 24000, 0, "",
     "neither avx512_bf16 nor amx_bf16"},
    {"rpi5.yaml", "Raspberry Pi 5 Model B", EDGERT_ARCH_ARM64, EDGERT_CLASS_ARM64_CPU, ARM_V82,
     0, 4, 8192, 7600, 0, "", "bf16: false"},
    {"jetson-orin.yaml", "NVIDIA Jetson AGX Orin Developer Kit", EDGERT_ARCH_ARM64,
     EDGERT_CLASS_JETSON, ARM_V82, 0, 12, 62800, 58000, 1,
     "NVIDIA Jetson AGX Orin (Ampere iGPU, tegra234)", "bf16: true"},
    {"android-hexagon.yaml", "Snapdragon 8 Gen 3 phone", EDGERT_ARCH_ARM64,
     EDGERT_CLASS_NPU_PHONE, ARM_V92, 0, 8, 11264, 5000, 1,
     "Hexagon cDSP via /dev/fastrpc-cdsp", "default from cpu flag bf16"},
    {"nvidia-workstation.yaml", "Intel Core i9-13900K + NVIDIA GeForce RTX 4090",
     EDGERT_ARCH_X86_64, EDGERT_CLASS_CUDA_DISCRETE, X86_V3 | F(EDGERT_CPU_AVX_VNNI), 0, 32,
     65536, 60000, 1, "NVIDIA GeForce RTX 4090", "bf16: true"},
};

static void test_profiles_good(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof good_profiles / sizeof good_profiles[0]; i++) {
        const good_profile *g = &good_profiles[i];
        char path[512];
        snprintf(path, sizeof path, DEVICES "%s", g->file);
        edgert_device dev;
        er_diags d = {0};
        edgert_status st = er_device_profile_load(path, &dev, &d);
        if (st != EDGERT_OK || count_level(&d, EDGERT_LOG_ERROR) ||
            count_level(&d, EDGERT_LOG_WARN)) {
            dump_diags(g->file, &d);
            fail_msg("%s: status %d", g->file, (int)st);
        }
        assert_int_equal(dev.planned, 1);
        assert_string_equal(dev.source, path);
        assert_string_equal(dev.name, g->name);
        assert_int_equal(dev.arch, g->arch);
        assert_int_equal(dev.device_class, g->cls);
        if (dev.cpu_flags != g->flags || dev.cpu_flags_os_disabled != g->disabled)
            fail_msg("%s: flags %#llx/%#llx, want %#llx/%#llx", g->file,
                     (unsigned long long)dev.cpu_flags,
                     (unsigned long long)dev.cpu_flags_os_disabled,
                     (unsigned long long)g->flags, (unsigned long long)g->disabled);
        assert_int_equal(dev.logical_cores, g->cores);
        assert_int_equal(dev.mem_total_bytes, g->total_mb << 20);
        assert_int_equal(dev.mem_available_bytes, g->avail_mb << 20);
        assert_int_equal(dev.bf16, g->bf16);
        assert_string_equal(dev.accelerator, g->accelerator);
        if (!strstr(dev.bf16_source, g->bf16_source))
            fail_msg("%s: bf16_source '%s' lacks '%s'", g->file, dev.bf16_source,
                     g->bf16_source);
        assert_non_null(strstr(dev.class_evidence, "device profile"));
        er_diags_free(&d);
    }
}

typedef struct bad_profile {
    const char *file;
    unsigned line, col;
    const char *message; /* substring of the first error */
} bad_profile;

static const bad_profile bad_profiles[] = {
    {"syntax-error.yaml", 4, 1, "YAML syntax: found unexpected end of stream"},
    {"syntax-bad-indent.yaml", 3, 3, "YAML syntax: did not find expected key"},
    {"empty.yaml", 1, 1, "empty document"},
    {"top-level-list.yaml", 1, 1, "expected a mapping of fields, got a list"},
    {"missing-name.yaml", 1, 1, "missing required field 'name'"},
    {"missing-cpu-flags.yaml", 1, 1, "missing required field 'cpu_flags'"},
    {"missing-logical-cores.yaml", 1, 1, "missing required field 'logical_cores'"},
    {"missing-profile-version.yaml", 1, 1, "missing required field 'profile_version'"},
    {"cores-string.yaml", 6, 16, "field 'logical_cores': expected an integer, got 'four'"},
    {"cores-zero.yaml", 6, 16, "field 'logical_cores': 0 is out of range [1, 4096]"},
    {"flags-mapping.yaml", 5, 12, "field 'cpu_flags': expected a list, got a mapping"},
    {"unknown-flag.yaml", 8, 5, "unknown CPU flag 'avx1024'"},
    {"other-arch-flag.yaml", 5, 24, "'asimd' is an arm64 flag, but the profile's arch is x86_64"},
    {"unknown-class.yaml", 4, 15, "field 'device_class': unknown value 'quantum_npu'"},
    {"unknown-arch.yaml", 3, 7, "field 'arch': unknown value 'riscv64'"},
    {"arch-class-mismatch.yaml", 4, 15, "device_class jetson does not exist on arch x86_64"},
    {"profile-version-2.yaml", 1, 18, "unsupported profile_version 2 (this edgert reads 1)"},
    {"duplicate-key.yaml", 7, 1, "duplicate key 'logical_cores'"},
    {"memory-available-gt-total.yaml", 8, 22, "memory_available_mb 8192 exceeds"},
    {"flag-usable-and-disabled.yaml", 6, 20, "'amx_tile' is also in cpu_flags"},
    {"bf16-not-bool.yaml", 7, 7, "field 'bf16': expected true or false, got 'maybe'"},
};

static void test_profiles_bad(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad_profiles / sizeof bad_profiles[0]; i++) {
        const bad_profile *b = &bad_profiles[i];
        char path[512];
        snprintf(path, sizeof path, DEVICES "bad/%s", b->file);
        edgert_device dev;
        memset(&dev, 0xa5, sizeof dev);
        er_diags d = {0};
        edgert_status st = er_device_profile_load(path, &dev, &d);
        const edgert_diag *e = first_error(&d);
        if (st != EDGERT_E_PARSE || !e || !e->file || strcmp(e->file, path) != 0 ||
            e->line != b->line || e->column != b->col || !strstr(e->message, b->message)) {
            dump_diags(b->file, &d);
            fail_msg("%s: status %d; want E_PARSE with %u:%u '%s'", b->file, (int)st, b->line,
                     b->col, b->message);
        }
        /* one problem per file: exactly one error */
        if (count_level(&d, EDGERT_LOG_ERROR) != 1) {
            dump_diags(b->file, &d);
            fail_msg("%s: %zu errors, want 1", b->file, count_level(&d, EDGERT_LOG_ERROR));
        }
        if (!is_all_zero(&dev, sizeof dev))
            fail_msg("%s: the device was not left zeroed", b->file);
        er_diags_free(&d);
    }
}

/* Every file in fixtures/devices/bad is covered by the table above. */
static void test_profiles_bad_all_listed(void **state)
{
    (void)state;
    DIR *dh = opendir(DEVICES "bad");
    assert_non_null(dh);
    size_t files = 0;
    struct dirent *e;
    while ((e = readdir(dh)) != NULL) {
        const char *name = e->d_name;
        if (name[0] == '.')
            continue;
        int listed = 0;
        for (size_t i = 0; i < sizeof bad_profiles / sizeof bad_profiles[0]; i++)
            listed |= strcmp(bad_profiles[i].file, name) == 0;
        if (!listed)
            fail_msg("fixtures/devices/bad/%s has no expectation in test_probe_profile.c", name);
        files++;
    }
    closedir(dh);
    assert_int_equal(files, sizeof bad_profiles / sizeof bad_profiles[0]);
}

static void test_profile_too_big(void **state)
{
    (void)state;
    char root[64], path[128];
    make_tmp(root, sizeof root);
    size_t big = EDGERT_MAX_YAML_BYTES + 1;
    char *buf = malloc(big);
    assert_non_null(buf);
    /* A valid profile followed by a long comment: refused for its size
     * alone, before any parsing. */
    const char *head = "profile_version: 1\nname: big\narch: x86_64\ndevice_class: x86_cpu\n"
                       "cpu_flags: []\nlogical_cores: 1\n#";
    memset(buf, 'x', big);
    memcpy(buf, head, strlen(head));
    put(root, "big.yaml", buf, big);
    free(buf);
    snprintf(path, sizeof path, "%s/big.yaml", root);

    edgert_device dev;
    memset(&dev, 0xa5, sizeof dev);
    er_diags d = {0};
    assert_int_equal(er_device_profile_load(path, &dev, &d), EDGERT_E_PARSE);
    const edgert_diag *e = first_error(&d);
    assert_non_null(e);
    assert_string_equal(e->file, path);
    assert_non_null(strstr(e->message, "larger than the 1048576-byte limit"));
    assert_true(is_all_zero(&dev, sizeof dev));
    er_diags_free(&d);
    rm_tree(root);
}

static void test_profile_unreadable(void **state)
{
    (void)state;
    edgert_device dev;
    er_diags d = {0};
    memset(&dev, 0xa5, sizeof dev);
    const char *path = DEVICES "no-such-profile.yaml";
    assert_int_equal(er_device_profile_load(path, &dev, &d), EDGERT_E_IO);
    const edgert_diag *e = first_error(&d);
    assert_non_null(e);
    assert_string_equal(e->file, path);
    assert_non_null(strstr(e->message, "cannot read"));
    assert_true(is_all_zero(&dev, sizeof dev));
    er_diags_free(&d);

    /* a folder is not a profile */
    assert_int_equal(er_device_profile_load(DEVICES "bad", &dev, &d), EDGERT_E_IO);
    er_diags_free(&d);
    assert_int_equal(er_device_profile_load(NULL, &dev, &d), EDGERT_E_USAGE);
    er_diags_free(&d);
}

static edgert_status load_text(const char *text, edgert_device *dev, er_diags *d, char *path,
                               size_t cap, const char *root)
{
    snprintf(path, cap, "%s/p.yaml", root);
    puts_file(root, "p.yaml", text);
    return er_device_profile_load(path, dev, d);
}

/* Defaults, accepted spellings and warnings, from profiles written here. */
static void test_profile_defaults(void **state)
{
    (void)state;
    char root[64], path[128];
    make_tmp(root, sizeof root);
    edgert_device dev;
    er_diags d = {0};

    /* aarch64 spelling, unknown key warned, no memory, jetson bf16 default */
    assert_int_equal(load_text("profile_version: 1\nname: Orin NX\narch: aarch64\n"
                               "device_class: jetson\ncpu_flags: []\nlogical_cores: 8\n"
                               "gpu_tops: 100\nnotes: \"x\"\n",
                               &dev, &d, path, sizeof path, root),
                     EDGERT_OK);
    assert_int_equal(dev.arch, EDGERT_ARCH_ARM64);
    assert_int_equal(dev.cpu_flags, 0);
    assert_int_equal(dev.mem_total_bytes, 0);
    assert_int_equal(dev.bf16, 1);
    assert_non_null(strstr(dev.bf16_source, "default"));
    const edgert_diag *w = find_diag(&d, EDGERT_LOG_WARN, "unknown key 'gpu_tops'");
    assert_non_null(w);
    assert_int_equal(w->line, 7);
    assert_int_equal(w->column, 1);
    er_diags_free(&d);

    /* cuda_discrete on arm64 (e.g. a Grace host) is allowed; bf16 default true */
    assert_int_equal(load_text("profile_version: 1\nname: g\narch: arm64\n"
                               "device_class: cuda_discrete\ncpu_flags: [asimd, sve, sve2]\n"
                               "logical_cores: 72\nmemory_total_mb: 0\n",
                               &dev, &d, path, sizeof path, root),
                     EDGERT_OK);
    assert_int_equal(dev.device_class, EDGERT_CLASS_CUDA_DISCRETE);
    assert_int_equal(dev.bf16, 1);
    assert_int_equal(dev.cpu_flags, F(EDGERT_CPU_ASIMD) | F(EDGERT_CPU_SVE) | F(EDGERT_CPU_SVE2));
    er_diags_free(&d);

    /* x86 CPU with AMX bf16 only: the CPU rule */
    assert_int_equal(load_text("profile_version: 1\nname: amx\narch: x86_64\n"
                               "device_class: x86_cpu\ncpu_flags: [amx_tile, amx_bf16]\n"
                               "logical_cores: 1\n",
                               &dev, &d, path, sizeof path, root),
                     EDGERT_OK);
    assert_int_equal(dev.bf16, 1);
    assert_non_null(strstr(dev.bf16_source, "amx_bf16"));
    er_diags_free(&d);

    /* bf16 given explicitly overrides the rule */
    assert_int_equal(load_text("profile_version: 1\nname: n\narch: x86_64\n"
                               "device_class: cuda_discrete\ncpu_flags: [avx2]\n"
                               "logical_cores: 4\nbf16: false\n"
                               "accelerator: \"NVIDIA Tesla T4\"\n",
                               &dev, &d, path, sizeof path, root),
                     EDGERT_OK);
    assert_int_equal(dev.bf16, 0);
    assert_string_equal(dev.accelerator, "NVIDIA Tesla T4");
    er_diags_free(&d);

    /* a flag listed twice is a warning, not an error */
    assert_int_equal(load_text("profile_version: 1\nname: n\narch: arm64\n"
                               "device_class: arm64_cpu\ncpu_flags: [asimd, asimd]\n"
                               "logical_cores: 4\n",
                               &dev, &d, path, sizeof path, root),
                     EDGERT_OK);
    w = find_diag(&d, EDGERT_LOG_WARN, "listed twice");
    assert_non_null(w);
    assert_int_equal(w->line, 5);
    assert_int_equal(w->column, 20);
    er_diags_free(&d);

    /* several problems: all reported, each at its place */
    assert_int_equal(load_text("profile_version: 1\nname: \"\"\narch: x86_64\n"
                               "device_class: npu_phone\ncpu_flags: [neon]\n"
                               "logical_cores: 5000\nmemory_total_mb: -1\n",
                               &dev, &d, path, sizeof path, root),
                     EDGERT_E_PARSE);
    assert_int_equal(count_level(&d, EDGERT_LOG_ERROR), 5);
    assert_int_equal(error_line(&d, "'name' is empty"), 2);
    assert_int_equal(error_line(&d, "npu_phone does not exist"), 4);
    assert_int_equal(error_line(&d, "unknown CPU flag 'neon'"), 5);
    assert_int_equal(error_line(&d, "5000 is out of range"), 6);
    assert_int_equal(error_line(&d, "-1 is out of range"), 7);
    assert_true(is_all_zero(&dev, sizeof dev));
    er_diags_free(&d);

    /* a name that does not fit */
    char text[512];
    snprintf(text, sizeof text,
             "profile_version: 1\nname: %0200d\narch: arm64\ndevice_class: arm64_cpu\n"
             "cpu_flags: []\nlogical_cores: 1\n",
             0);
    assert_int_equal(load_text(text, &dev, &d, path, sizeof path, root), EDGERT_E_PARSE);
    assert_non_null(find_diag(&d, EDGERT_LOG_ERROR, "at most 127 fit"));
    er_diags_free(&d);

    rm_tree(root);
}

/* Without bf16, a GPU's bf16 follows its accelerator name as the probe's
 * does (a GeForce MX450 profile once defaulted to bf16). */
static void test_profile_gpu_bf16(void **state)
{
    (void)state;
    char root[64], path[128];
    make_tmp(root, sizeof root);
    edgert_device dev;
    er_diags d = {0};
    static const struct {
        const char *cls, *accel;
        int bf16;
    } gpus[] = {
        {"cuda_discrete", "NVIDIA GeForce MX450", 0},
        {"cuda_discrete", "GRID K520", 0},
        {"cuda_discrete", "NVIDIA GeForce RTX 4090", 1},
        {"jetson", "NVIDIA Jetson Xavier NX", 0},
        {"jetson", "NVIDIA Jetson AGX Orin", 1},
    };
    for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "profile_version: 1\nname: g\narch: arm64\ndevice_class: %s\n"
                 "cpu_flags: [asimd]\nlogical_cores: 4\naccelerator: \"%s\"\n",
                 gpus[i].cls, gpus[i].accel);
        assert_int_equal(load_text(text, &dev, &d, path, sizeof path, root), EDGERT_OK);
        if (dev.bf16 != gpus[i].bf16)
            fail_msg("%s '%s': bf16 %d, want %d (%s)", gpus[i].cls, gpus[i].accel, dev.bf16,
                     gpus[i].bf16, dev.bf16_source);
        assert_non_null(strstr(dev.bf16_source, gpus[i].accel));
        er_diags_free(&d);
    }
    rm_tree(root);
}

/* Every key the loader reads appears in docs/device-profile.md as `key`, the
 * one description of the format an installed user has. */
static void test_profile_keys_documented(void **state)
{
    (void)state;
    char *doc = tu_doc("device-profile.md"), want[64];
    for (const char *const *k = er_profile_keys; *k; k++) {
        snprintf(want, sizeof want, "| `%s` |", *k);
        if (!strstr(doc, want))
            fail_msg("docs/device-profile.md has no row for `%s`", *k);
    }
    free(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profiles_good),
        cmocka_unit_test(test_profiles_bad),
        cmocka_unit_test(test_profiles_bad_all_listed),
        cmocka_unit_test(test_profile_too_big),
        cmocka_unit_test(test_profile_unreadable),
        cmocka_unit_test(test_profile_defaults),
        cmocka_unit_test(test_profile_gpu_bf16),
        cmocka_unit_test(test_profile_keys_documented),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
