/*
 * core/probe/probe.h — step 1, what the device is: the live probe (probe*.c) and
 * device profiles for plan mode (device_profile.c).
 * Not installed.
 */
#ifndef EDGERT_CORE_PROBE_H
#define EDGERT_CORE_PROBE_H

#include "common/internal.h"

/* ---- probe (probe*.c) and device profiles (device_profile.c) ------------ */

/** Probe this machine: CPU flags from the CPU itself (CPUID+XGETBV / HWCAP),
 *  everything else from files under `sysroot` (NULL = "/"). Never fails hard:
 *  unknown facts stay 0/"" and are noted in diagnostics. */
edgert_status er_probe(const char *sysroot, edgert_device *out, er_diags *d);
/** Pure helper (probe_class.c) used by er_probe and tests: decide the device
 *  class from files under sysroot for a given CPU arch; fills class,
 *  accelerator, class_evidence, bf16/bf16_source for GPU classes. */
void er_probe_device_class(const char *sysroot, edgert_arch arch, edgert_device *dev);
/** Load a device profile (plan mode). EDGERT_E_PARSE with a file:line:col
 *  diagnostic on any problem. */
edgert_status er_device_profile_load(const char *path, edgert_device *out, er_diags *d);
/** Every key of a device profile (NULL-terminated); docs/device-profile.md
 *  documents each, and tests/probe/test_probe_profile.c checks that it does. */
extern const char *const er_profile_keys[];

#endif /* EDGERT_CORE_PROBE_H */
