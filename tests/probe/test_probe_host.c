/*
 * tests/probe/test_probe_host.c — the probe's host facts (core/probe/probe_host.c): the CPU
 * list and meminfo parsers, including hostile input, and cores / memory / name
 * read from the fake sysroots in fixtures/sysroots and from trees built here.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "test_probe_util.h"
#include "common/diag.h"

/* ----------------------------------------------------------------------- */
/* text parsers                                                            */
/* ----------------------------------------------------------------------- */

static void test_parse_cpu_list(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        unsigned count;
    } good[] = {
        {"0", 1}, {"0\n", 1}, {"0-1\n", 2}, {"0-3", 4}, {"0-3,5,7-8", 7}, {"0-3,5,7-8\n", 7},
        {"1-1", 1}, {"0-63\n", 64}, {"4095", 1}, {"0,2,4,6", 4}, {"0-1048575", 1048576},
    };
    static const char *const bad[] = {
        "", "\n", "garbage", "garbage\n", "0-", "-1", "3-1", "0,0", "0-3,2", "1,0", "0-3,",
        ",0", "0 - 3", "0 ,1", "99999999999", "0-1048576", "1048576", "0x3", "1-2-3", "0;1",
        "+1", "0\n1", "０",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        unsigned n = 0;
        if (er_parse_cpu_list(good[i].text, &n) != 0 || n != good[i].count)
            fail_msg("cpu list '%s': got %u, want %u", good[i].text, n, good[i].count);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsigned n = 12345;
        if (er_parse_cpu_list(bad[i], &n) != -1 || n != 12345)
            fail_msg("cpu list '%s' should be refused (count %u)", bad[i], n);
    }
    unsigned n;
    assert_int_equal(er_parse_cpu_list(NULL, &n), -1);
}

static void test_parse_meminfo(void **state)
{
    (void)state;
    uint64_t t, a;
    int got = er_parse_meminfo("MemTotal:       24683620 kB\nMemFree:        24569880 kB\n"
                               "MemAvailable:   24466388 kB\nBuffers: 1 kB\n",
                               &t, &a);
    assert_int_equal(got, ER_MEMINFO_TOTAL | ER_MEMINFO_AVAILABLE);
    assert_int_equal(t, 24683620ull * 1024);
    assert_int_equal(a, 24466388ull * 1024);

    /* Old kernels have no MemAvailable. */
    got = er_parse_meminfo("MemTotal: 1000 kB\nMemFree: 10 kB\n", &t, &a);
    assert_int_equal(got, ER_MEMINFO_TOTAL);
    assert_int_equal(t, 1024000);
    assert_int_equal(a, 0);

    /* Tabs, CRLF, no trailing newline. */
    got = er_parse_meminfo("MemAvailable:\t7 kB\r\nMemTotal:\t8 kB", &t, &a);
    assert_int_equal(got, ER_MEMINFO_TOTAL | ER_MEMINFO_AVAILABLE);
    assert_int_equal(t, 8192);
    assert_int_equal(a, 7168);

    static const char *const bad_values[] = {
        "MemTotal: 12 MB\n",    "MemTotal: 12\n",      "MemTotal: kB\n",
        "MemTotal: -12 kB\n",   "MemTotal: 12 kBx\n",  "MemTotal: 1.5 kB\n",
        "MemTotal: 0x10 kB\n",  "MemTotal: 12 kB 3\n", "MemTotal:\n",
        "MemTotal: 99999999999999999999999 kB\n",
        "MemTotal: 18446744073709551615 kB\n", /* fits u64 in kB, not in bytes */
        "MemTotal: 1125899906842625 kB\n",     /* 1 EiB + 1 kB */
        "MemTotalX: 12 kB\n",   " MemTotal: 12 kB\n",  "memtotal: 12 kB\n",
        "",                     "\n\n\n",              "\xff\xfe\x01",
    };
    for (size_t i = 0; i < sizeof bad_values / sizeof bad_values[0]; i++) {
        got = er_parse_meminfo(bad_values[i], &t, &a);
        if (got != 0 || t != 0 || a != 0)
            fail_msg("meminfo '%s' should give nothing (got %d, %llu)", bad_values[i], got,
                     (unsigned long long)t);
    }
    /* Exactly 1 EiB is still accepted. */
    got = er_parse_meminfo("MemTotal: 1125899906842624 kB\n", &t, &a);
    assert_int_equal(got, ER_MEMINFO_TOTAL);
    assert_int_equal(t, 1ull << 60);
    /* Only the first line of a key counts, even when it is garbage. */
    got = er_parse_meminfo("MemTotal: garbage kB\nMemTotal: 100 kB\n", &t, &a);
    assert_int_equal(got, 0);
    assert_int_equal(t, 0);
    got = er_parse_meminfo("MemTotal: 5 kB\nMemTotal: 100 kB\n", &t, &a);
    assert_int_equal(t, 5120);
}

/* The CPU id (er_parse_cpu_id): the first line of each key, a malformed
 * field left out, the result bounded by whole fields. */
static void test_parse_cpu_id(void **state)
{
    (void)state;
    static const struct {
        edgert_arch arch;
        const char *text, *id;
    } cases[] = {
        {EDGERT_ARCH_X86_64,
         "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n"
         "model name\t: AMD EPYC\nstepping\t: 1\n\nprocessor\t: 1\ncpu family\t: 25\n",
         "AuthenticAMD family 26 model 2 stepping 1"},
        /* "model name" before "model" is not the model */
        {EDGERT_ARCH_X86_64, "model name : X 9000\nmodel : 143\n", "model 143"},
        /* malformed fields are left out, the others kept */
        {EDGERT_ARCH_X86_64,
         "vendor_id : Genuine Intel\ncpu family : 6x\nmodel : -1\nstepping : 8\n", "stepping 8"},
        {EDGERT_ARCH_X86_64, "cpu family : 12345678901234567\nmodel : 0x8f\n", ""},
        {EDGERT_ARCH_X86_64, "cpu family :\nmodel : \n", ""},
        {EDGERT_ARCH_X86_64, "", ""},
        {EDGERT_ARCH_ARM64,
         "processor\t: 0\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x4\n"
         "CPU part\t: 0xd0b\nCPU revision\t: 1\n",
         "implementer 0x41 part 0xd0b variant 0x4 revision 1"},
        /* arm64 ids are hex with 0x; x86 keys mean nothing there */
        {EDGERT_ARCH_ARM64, "CPU implementer : 65\nCPU part : 0xzz\ncpu family : 6\n", ""},
        {EDGERT_ARCH_UNKNOWN, "cpu family : 6\n", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char id[96];
        memset(id, 'Q', sizeof id);
        int got = er_parse_cpu_id(cases[i].text, cases[i].arch, id, sizeof id);
        if (strcmp(id, cases[i].id) != 0 || got != (cases[i].id[0] != '\0'))
            fail_msg("case %zu: '%s' (returned %d), expected '%s'", i, id, got, cases[i].id);
    }
    /* too little room: whole fields only, always terminated */
    char small[24];
    assert_int_equal(er_parse_cpu_id("vendor_id : AuthenticAMD\ncpu family : 26\nmodel : 2\n",
                                     EDGERT_ARCH_X86_64, small, sizeof small),
                     1);
    assert_string_equal(small, "AuthenticAMD family 26");
    char one[1] = {'Q'};
    assert_int_equal(er_parse_cpu_id("model : 2\n", EDGERT_ARCH_X86_64, one, 1), 0);
    assert_int_equal(one[0], '\0');
    assert_int_equal(er_parse_cpu_id(NULL, EDGERT_ARCH_X86_64, small, sizeof small), 0);
    assert_string_equal(small, "");
    assert_int_equal(er_parse_cpu_id("model : 2\n", EDGERT_ARCH_X86_64, NULL, 8), 0);
}

/* ----------------------------------------------------------------------- */
/* host facts (cores, memory, name)                                        */
/* ----------------------------------------------------------------------- */

static void test_host_facts_fixtures(void **state)
{
    (void)state;
    static const struct {
        const char *sysroot;
        edgert_arch arch;
        const char *name;
        unsigned cores;
        uint64_t total_kb, avail_kb;
        const char *cpu_id;
    } cases[] = {
        {"x86-server", EDGERT_ARCH_X86_64, "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz", 2,
         8139472, 7421864, "GenuineIntel family 6 model 143"},
        {"rpi5", EDGERT_ARCH_ARM64, "Raspberry Pi 5 Model B Rev 1.0", 4, 8245200, 7800000,
         "implementer 0x41 part 0xd0b"},
        /* x86 order: cpuinfo first, device tree second (rpi5 has no model name) */
        {"rpi5", EDGERT_ARCH_X86_64, "Raspberry Pi 5 Model B Rev 1.0", 4, 8245200, 7800000, ""},
        {"jetson-orin", EDGERT_ARCH_ARM64, "NVIDIA Jetson AGX Orin Developer Kit", 12, 30536276,
         27000000, ""},
        {"jetson-nano", EDGERT_ARCH_ARM64, "NVIDIA Jetson Nano Developer Kit", 4, 0, 0, ""},
        {"android-hexagon", EDGERT_ARCH_ARM64, "", 8, 11534336, 5120000, ""},
        {"nvidia-workstation", EDGERT_ARCH_X86_64, "13th Gen Intel(R) Core(TM) i9-13900K", 32,
         65536000, 60000000, ""},
        {"empty", EDGERT_ARCH_X86_64, "", 0, 0, 0, ""},
        {"empty", EDGERT_ARCH_ARM64, "", 0, 0, 0, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char root[512];
        snprintf(root, sizeof root, SYSROOTS "%s", cases[i].sysroot);
        edgert_device dev;
        memset(&dev, 0, sizeof dev);
        er_diags d = {0};
        er_probe_host_facts(root, cases[i].arch, &dev, &d);
        if (strcmp(dev.name, cases[i].name) != 0 || strcmp(dev.cpu_id, cases[i].cpu_id) != 0 ||
            dev.logical_cores != cases[i].cores ||
            dev.mem_total_bytes != cases[i].total_kb * 1024 ||
            dev.mem_available_bytes != cases[i].avail_kb * 1024) {
            dump_diags(cases[i].sysroot, &d);
            fail_msg("%s (%s): name '%s' cpu id '%s' cores %u mem %llu/%llu", cases[i].sysroot,
                     edgert_arch_name(cases[i].arch), dev.name, dev.cpu_id, dev.logical_cores,
                     (unsigned long long)dev.mem_total_bytes,
                     (unsigned long long)dev.mem_available_bytes);
        }
        /* Unknown facts are explained, never errors. */
        assert_int_equal(count_level(&d, EDGERT_LOG_ERROR), 0);
        if (!cases[i].cores)
            assert_non_null(find_diag(&d, EDGERT_LOG_INFO, "core count unknown"));
        if (!cases[i].total_kb)
            assert_non_null(find_diag(&d, EDGERT_LOG_INFO, "memory size unknown"));
        if (!cases[i].name[0])
            assert_non_null(find_diag(&d, EDGERT_LOG_INFO, "name unknown"));
        if (!cases[i].cpu_id[0])
            assert_non_null(find_diag(&d, EDGERT_LOG_INFO, "CPU id unknown"));
        er_diags_free(&d);
    }
}

static void test_host_facts_hostile(void **state)
{
    (void)state;
    const char *root = SYSROOTS "hostile";
    for (int pass = 0; pass < 2; pass++) {
        edgert_arch arch = pass ? EDGERT_ARCH_ARM64 : EDGERT_ARCH_X86_64;
        edgert_device dev;
        memset(&dev, 0, sizeof dev);
        er_diags d = {0};
        er_probe_host_facts(root, arch, &dev, &d);
        assert_int_equal(dev.logical_cores, 0);
        assert_int_equal(dev.mem_total_bytes, 0);
        assert_int_equal(dev.mem_available_bytes, 0);
        const edgert_diag *w = find_diag(&d, EDGERT_LOG_WARN, "not a CPU list");
        assert_non_null(w);
        assert_non_null(strstr(w->file, "hostile/sys/devices/system/cpu/online"));
        w = find_diag(&d, EDGERT_LOG_WARN, "MemTotal");
        assert_non_null(w);
        assert_non_null(strstr(w->file, "hostile/proc/meminfo"));
        assert_int_equal(count_level(&d, EDGERT_LOG_ERROR), 0);
        /* The hostile cpuinfo has no id fields: none is made up. */
        assert_string_equal(dev.cpu_id, "");
        /* Names are bounded, terminated and free of control characters. */
        size_t len = strnlen(dev.name, sizeof dev.name);
        assert_true(len < sizeof dev.name);
        for (size_t i = 0; i < len; i++)
            assert_true(dev.name[i] >= 0x20 && dev.name[i] < 0x7f);
        if (arch == EDGERT_ARCH_X86_64) {
            /* the 4 KB "model name" line, truncated */
            assert_int_equal(len, sizeof dev.name - 1);
            assert_int_equal(strspn(dev.name, "A"), len);
        } else {
            /* device-tree model without NUL, with tabs and control bytes */
            assert_int_equal(strncmp(dev.name, "Evil?Board?? MMM", 16), 0);
        }
        er_diags_free(&d);
    }
}

/* Files that exist but cannot be used: too large, a directory. */
static void test_host_facts_unusable_files(void **state)
{
    (void)state;
    char root[64];
    make_tmp(root, sizeof root);
    size_t big = ER_PROBE_MAX_FILE_BYTES + 10;
    char *buf = malloc(big);
    assert_non_null(buf);
    memset(buf, ' ', big);
    memcpy(buf, "MemTotal: 1000 kB\n", 18);
    put(root, "proc/meminfo", buf, big);
    free(buf);
    /* a folder where the CPU list should be */
    puts_file(root, "sys/devices/system/cpu/online/x", "0-3\n");
    puts_file(root, "proc/cpuinfo", "model name\t:   \t  \nmodel name : second \n");

    edgert_device dev;
    memset(&dev, 0, sizeof dev);
    er_diags d = {0};
    er_probe_host_facts(root, EDGERT_ARCH_X86_64, &dev, &d);
    assert_int_equal(dev.mem_total_bytes, 0);
    assert_int_equal(dev.logical_cores, 0);
    /* an empty model name does not count; the next one does */
    assert_string_equal(dev.name, "second");
    if (!find_diag_in(&d, EDGERT_LOG_WARN, "larger than 1048576 bytes", "/proc/meminfo") ||
        !find_diag_in(&d, EDGERT_LOG_WARN, "unreadable", "/sys/devices/system/cpu/online")) {
        dump_diags("unusable", &d);
        fail_msg("no warning for the big meminfo or the folder in place of the CPU list");
    }
    er_diags_free(&d);
    rm_tree(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_cpu_list),
        cmocka_unit_test(test_parse_meminfo),
        cmocka_unit_test(test_parse_cpu_id),
        cmocka_unit_test(test_host_facts_fixtures),
        cmocka_unit_test(test_host_facts_hostile),
        cmocka_unit_test(test_host_facts_unusable_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
