/*
 * core/probe/probe.c — what device are we on? (architecture.md, Data flow, probe)
 *
 * CPU flags come from the CPU itself, never from files: CPUID + XGETBV on
 * x86-64 (plus what Linux says about AMX tile data), getauxval(AT_HWCAP/
 * AT_HWCAP2) on arm64. A flag counts as usable only when the OS enabled the
 * register state it needs; a flag the CPU has but the OS did not enable is
 * reported separately (cpu_flags_os_disabled) so `explain` can say why a
 * backend that "should" run does not.
 *
 * Everything else — cores, memory, names, the device class — comes from files
 * read through the sysroot prefix, so tests (and fleet planning) can present
 * any device. The probe never fails hard: a missing or garbled file leaves
 * that fact at 0 / "" and adds a diagnostic saying which file and why. And it
 * only observes: it changes no state of the process (probe_cpu.c says what
 * that means for AMX).
 *
 * This file is the spine; each step has its own file, pure decoders over
 * sysroot-relative reads:
 *   probe_cpu.c    CPU flags (x86-64 CPUID/XCR0 and AMX permission; arm64 HWCAP)
 *   probe_host.c   logical cores, memory, CPU or board name
 *   probe_class.c  device class (NPU phone, Jetson, discrete NVIDIA GPU, CPU)
 *                  and bf16
 *   probe_read.c   the sysroot-relative reads the last two share
 * probe_internal.h declares them for each other and for the tests.
 */
#include <stdio.h>
#include <string.h>

#include "probe/probe_internal.h"

/* The arch this code was built for is the arch of the CPU running it. */
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

edgert_status er_probe(const char *sysroot, edgert_device *out, er_diags *d)
{
    if (!out)
        return EDGERT_E_USAGE;
    memset(out, 0, sizeof *out);
    out->planned = 0;
    snprintf(out->source, sizeof out->source, "probe (sysroot %s)",
             er_probe_is_live_root(sysroot) ? "/" : sysroot);
    out->arch = build_arch();
    /* Flags describe the CPU executing this code, whatever the sysroot. */
    er_probe_cpu_flags(out, d);
    er_probe_host_facts(sysroot, out->arch, out, d);
    er_probe_device_class(sysroot, out->arch, out);
    return EDGERT_OK;
}
