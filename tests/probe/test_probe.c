/*
 * tests/probe/test_probe.c — the probe as a whole (er_probe, core/probe/probe.c): with a
 * sysroot (files from it, flags from this CPU), and the live probe of this
 * machine, checked against /proc/cpuinfo. Each step has its own test file:
 * test_probe_cpu.c, test_probe_host.c, test_probe_class.c; device profiles,
 * which stand in for the probe, are in test_probe_profile.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "test_probe_util.h"
#include "test_util.h"
#include "common/diag.h"
#include "probe/probe.h"

#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#endif

/* ----------------------------------------------------------------------- */
/* er_probe with a sysroot                                                 */
/* ----------------------------------------------------------------------- */

/* er_probe with a sysroot: files from the sysroot, flags from this CPU. */
static void test_probe_with_sysroot(void **state)
{
    (void)state;
    edgert_device live, dev;
    er_diags d = {0};
    assert_int_equal(er_probe(NULL, &live, &d), EDGERT_OK);
    er_diags_free(&d);

    assert_int_equal(er_probe(SYSROOTS "x86-server", &dev, &d), EDGERT_OK);
    assert_string_equal(dev.source, "probe (sysroot " SYSROOTS "x86-server)");
    assert_int_equal(dev.planned, 0);
    assert_int_equal(dev.arch, live.arch);
    assert_int_equal(dev.cpu_flags, live.cpu_flags);
    assert_int_equal(dev.cpu_flags_os_disabled, live.cpu_flags_os_disabled);
    assert_int_equal(dev.logical_cores, 2);
    assert_int_equal(dev.mem_total_bytes, 8139472ull * 1024);
    assert_string_equal(dev.name, "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz");
    assert_true(dev.class_evidence[0] != '\0');
    er_diags_free(&d);

    /* An empty sysroot: nothing is known from files, and sysconf (which
     * describes this machine, not the sysroot) is not used. */
    assert_int_equal(er_probe(SYSROOTS "empty", &dev, &d), EDGERT_OK);
    assert_int_equal(dev.logical_cores, 0);
    assert_int_equal(dev.mem_total_bytes, 0);
    assert_string_equal(dev.name, "");
    assert_int_equal(count_level(&d, EDGERT_LOG_ERROR), 0);
    er_diags_free(&d);

    /* Sysroot "/" is the live machine. */
    assert_int_equal(er_probe("/", &dev, &d), EDGERT_OK);
    assert_string_equal(dev.source, "probe (sysroot /)");
    er_diags_free(&d);

    /* The hostile tree never crashes and leaves facts at 0. */
    assert_int_equal(er_probe(SYSROOTS "hostile", &dev, &d), EDGERT_OK);
    assert_int_equal(dev.logical_cores, 0);
    assert_int_equal(dev.mem_total_bytes, 0);
    er_diags_free(&d);

    assert_int_equal(er_probe(NULL, NULL, NULL), EDGERT_E_USAGE);
}

/* ----------------------------------------------------------------------- */
/* live probe                                                              */
/* ----------------------------------------------------------------------- */

/* The flags of the first CPU in /proc/cpuinfo ("flags" on x86, "Features"
 * on arm64: only this build's arch's key counts) that edgert has names for.
 * Returns -1 if cpuinfo is missing or has no such line — as under qemu
 * user-mode emulation, where /proc/cpuinfo is the host's. */
static int cpuinfo_flags(uint64_t *mask)
{
#if defined(__aarch64__)
    static const char key[] = "Features";
#else
    static const char key[] = "flags";
#endif
    *mask = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    int found = -1;
    while (found < 0 && getline(&line, &cap, f) > 0) {
        if (strncmp(line, key, sizeof key - 1) != 0)
            continue;
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        found = 0;
        char *save = NULL;
        for (char *tok = strtok_r(colon + 1, " \t\n", &save); tok;
             tok = strtok_r(NULL, " \t\n", &save)) {
            edgert_cpu_flag fl;
            if (edgert_cpu_flag_parse(tok, &fl) == 0)
                *mask |= F(fl);
        }
    }
    free(line);
    fclose(f);
    return found;
}

static void test_live_probe(void **state)
{
    (void)state;
    edgert_device dev;
    er_diags d = {0};
    memset(&dev, 0x77, sizeof dev);
    assert_int_equal(er_probe(NULL, &dev, &d), EDGERT_OK);
    dump_diags("live", &d);
    print_message("  live: %s, %s, %s, %u cores, %llu MiB (%llu available), bf16 %d (%s)\n"
                  "        flags %#llx, os-disabled %#llx, class evidence: %s\n",
                  dev.name, edgert_arch_name(dev.arch), edgert_device_class_name(dev.device_class),
                  dev.logical_cores, (unsigned long long)(dev.mem_total_bytes >> 20),
                  (unsigned long long)(dev.mem_available_bytes >> 20), dev.bf16,
                  dev.bf16_source, (unsigned long long)dev.cpu_flags,
                  (unsigned long long)dev.cpu_flags_os_disabled, dev.class_evidence);

#if defined(__x86_64__)
    assert_int_equal(dev.arch, EDGERT_ARCH_X86_64);
#elif defined(__aarch64__)
    assert_int_equal(dev.arch, EDGERT_ARCH_ARM64);
#else
    assert_int_equal(dev.arch, EDGERT_ARCH_UNKNOWN);
#endif
    assert_int_equal(dev.planned, 0);
    assert_string_equal(dev.source, "probe (sysroot /)");
    assert_true(dev.logical_cores >= 1);
    assert_true(dev.logical_cores == (unsigned)sysconf(_SC_NPROCESSORS_ONLN));
    assert_true(dev.mem_total_bytes > 0);
    assert_true(dev.mem_available_bytes <= dev.mem_total_bytes);
    assert_true(dev.class_evidence[0] != '\0');
    assert_true(dev.bf16_source[0] != '\0');
    assert_int_equal(dev.cpu_flags & dev.cpu_flags_os_disabled, 0);
    assert_int_equal(count_level(&d, EDGERT_LOG_ERROR), 0);

#if defined(__aarch64__)
    /* Advanced SIMD is mandatory in ARMv8-A Linux; a probe without it is broken. */
    assert_true(EDGERT_HAS_FLAG(dev.cpu_flags, EDGERT_CPU_ASIMD));
    if (dev.device_class == EDGERT_CLASS_ARM64_CPU)
        assert_int_equal(dev.bf16, !!EDGERT_HAS_FLAG(dev.cpu_flags, EDGERT_CPU_BF16));
#endif
#if defined(__x86_64__)
    /* The CPU id against CPUID itself: Linux prints the family with the
     * extended family added when the base is 0xF, and the model with the
     * extended model above it from family 6 on. */
    {
        unsigned a, b, c, dx;
        char vendor[13], want[96];
        __cpuid(0, a, b, c, dx);
        memcpy(vendor, &b, 4);
        memcpy(vendor + 4, &dx, 4);
        memcpy(vendor + 8, &c, 4);
        vendor[12] = '\0';
        __cpuid(1, a, b, c, dx);
        unsigned family = (a >> 8) & 0xFu, model = (a >> 4) & 0xFu, stepping = a & 0xFu;
        if (family == 0xFu)
            family += (a >> 20) & 0xFFu;
        if (family >= 6u)
            model += ((a >> 16) & 0xFu) << 4;
        snprintf(want, sizeof want, "%s family %u model %u stepping %u", vendor, family, model,
                 stepping);
        print_message("  live cpu id: %s\n", dev.cpu_id);
        assert_string_equal(dev.cpu_id, want);
    }
#endif
    uint64_t listed;
    if (cpuinfo_flags(&listed) != 0) {
        er_diags_free(&d);
        tu_skip("/proc/cpuinfo lists no flags for this arch here (qemu user mode shows the "
                "host's cpuinfo)");
    }
    /* Linux lists a flag only when it is usable, so what we call usable
     * must be listed; and everything it lists that we know must be found
     * (usable, or for AMX possibly not offered to processes by the kernel). */
    if (dev.cpu_flags & ~listed)
        fail_msg("probe says usable but /proc/cpuinfo does not list: %#llx",
                 (unsigned long long)(dev.cpu_flags & ~listed));
    if (listed & ~(dev.cpu_flags | dev.cpu_flags_os_disabled))
        fail_msg("/proc/cpuinfo lists flags the probe missed: %#llx",
                 (unsigned long long)(listed & ~(dev.cpu_flags | dev.cpu_flags_os_disabled)));
#if defined(__x86_64__)
    /* Every x86-64 CPU that runs this has SSE4.2 in practice; a probe that
     * finds nothing at all is broken. */
    assert_true(dev.cpu_flags != 0);
    if (dev.device_class == EDGERT_CLASS_X86_CPU)
        assert_int_equal(dev.bf16, !!(dev.cpu_flags & (F(EDGERT_CPU_AVX512_BF16) |
                                                       F(EDGERT_CPU_AMX_BF16))));
#endif
    er_diags_free(&d);
}

/* Linux x86 arch_prctl requests that read XSAVE permissions (5.16+). */
#define TEST_ARCH_GET_XCOMP_SUPP 0x1021
#define TEST_ARCH_GET_XCOMP_PERM 0x1022

/* The probe only observes: the process's XSAVE permissions (AMX tile data
 * among them) are the same after er_probe as before. Trivially true on a CPU
 * without AMX; on an AMX host it is the check that the probe does not request
 * tile data (the plugin that uses the tiles does, in its init). Also: AMX
 * reported usable implies Linux offers tile data (the rule at
 * er_x86_amx_permitted). x86-64 Linux only; nothing to observe elsewhere. */
static void test_live_probe_observes_only(void **state)
{
    (void)state;
#if defined(__x86_64__)
    unsigned long long before = 0, after = 0, supp = 0;
    if (syscall(SYS_arch_prctl, TEST_ARCH_GET_XCOMP_PERM, &before) != 0)
        tu_skip("this kernel has no XSAVE permissions to observe (arch_prctl "
                "ARCH_GET_XCOMP_PERM: before Linux 5.16)");
    edgert_device dev;
    er_diags d = {0};
    assert_int_equal(er_probe(NULL, &dev, &d), EDGERT_OK);
    er_diags_free(&d);
    assert_int_equal(syscall(SYS_arch_prctl, TEST_ARCH_GET_XCOMP_PERM, &after), 0);
    if (after != before)
        fail_msg("er_probe changed the XSAVE permissions: %#llx -> %#llx", before, after);
    assert_int_equal(syscall(SYS_arch_prctl, TEST_ARCH_GET_XCOMP_SUPP, &supp), 0);
    if (EDGERT_HAS_FLAG(dev.cpu_flags, EDGERT_CPU_AMX_TILE))
        assert_true(er_x86_amx_permitted(supp, after));
#else
    tu_skip("XSAVE permissions exist on x86-64 Linux only");
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe_with_sysroot),
        cmocka_unit_test(test_live_probe),
        cmocka_unit_test(test_live_probe_observes_only),
    };
    return tu_run_group("test_probe", tests, NULL, NULL);
}
