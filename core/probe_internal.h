/*
 * core/probe_internal.h — the pure pieces of the probe (probe.c), exposed so
 * tests can feed synthetic CPUID registers, HWCAP words and file contents.
 * Nothing here touches the CPU or the file system except er_probe_host_facts,
 * which reads files under a sysroot only.
 */
#ifndef EDGERT_CORE_PROBE_INTERNAL_H
#define EDGERT_CORE_PROBE_INTERNAL_H

#include <stdint.h>

#include "internal.h"

/** Largest file the probe reads (meminfo, cpuinfo, device-tree nodes, driver
 *  info). Real ones are a few KiB; /proc/cpuinfo of a 256-thread host is
 *  ~400 KiB. Bigger files are ignored with a warning. */
#define ER_PROBE_MAX_FILE_BYTES (1024u * 1024u)

/**
 * Raw CPUID registers the x86 decoder looks at. The reader checks the maximum
 * leaf before reading one and leaves unread leaves at 0; the decoder checks
 * the maximum leaves again, so a synthetic struct with max_leaf < 7 ignores
 * whatever is in the leaf-7 fields.
 */
typedef struct er_x86_cpuid {
    uint32_t max_leaf;     /**< CPUID.0:EAX */
    uint32_t max_ext_leaf; /**< CPUID.80000000h:EAX */
    uint32_t l1_ecx;       /**< CPUID.1:ECX */
    uint32_t l7_0_eax;     /**< CPUID.(7,0):EAX = highest subleaf of leaf 7 */
    uint32_t l7_0_ebx, l7_0_ecx, l7_0_edx;
    uint32_t l7_1_eax;     /**< CPUID.(7,1):EAX */
    uint32_t ext1_edx;     /**< CPUID.80000001h:EDX */
} er_x86_cpuid;

/* XCR0 state components (Intel SDM vol. 1, 13.1). */
#define ER_XCR0_SSE (1ull << 1)
#define ER_XCR0_YMM (1ull << 2)
#define ER_XCR0_OPMASK (1ull << 5)
#define ER_XCR0_ZMM_HI256 (1ull << 6)
#define ER_XCR0_HI16_ZMM (1ull << 7)
#define ER_XCR0_XTILECFG (1ull << 17)
#define ER_XCR0_XTILEDATA (1ull << 18)

/**
 * Decode CPUID + XCR0 into edgert_cpu_flag bits.
 *   usable:      the CPU reports the flag AND its register state is enabled
 *                (and, for AMX, Linux granted the permission);
 *   os_disabled: the CPU reports the flag but the state is not enabled.
 * `xcr0` is ignored (treated as 0) unless CPUID.1:ECX.OSXSAVE is set, since
 * XGETBV itself is undefined then. `amx_permitted` is the outcome of Linux's
 * ARCH_REQ_XCOMP_PERM request for XTILEDATA (1 granted, 0 refused).
 */
void er_x86_decode(const er_x86_cpuid *regs, uint64_t xcr0, int amx_permitted,
                   uint64_t *usable, uint64_t *os_disabled);
/** 1 when CPUID.80000001h:EDX bit 29 (long mode) is reported. */
int er_x86_long_mode(const er_x86_cpuid *regs);

/* Linux arm64 AT_HWCAP / AT_HWCAP2 bits (arch/arm64/include/uapi/asm/hwcap.h),
 * defined here so the decoder builds and is tested on any host. */
#define ER_HWCAP_ASIMD (1ull << 1)
#define ER_HWCAP_ASIMDHP (1ull << 10)
#define ER_HWCAP_ASIMDDP (1ull << 20)
#define ER_HWCAP_SVE (1ull << 22)
#define ER_HWCAP2_SVE2 (1ull << 1)
#define ER_HWCAP2_I8MM (1ull << 13)
#define ER_HWCAP2_BF16 (1ull << 14)

/** Decode AT_HWCAP/AT_HWCAP2 into edgert_cpu_flag bits. The kernel only
 *  advertises what it enabled, so there is no "os disabled" set on arm64. */
void er_arm64_decode(uint64_t hwcap, uint64_t hwcap2, uint64_t *usable);

/** Count CPUs in a Linux CPU list ("0-3,5,7-8\n" → 7). Ranges must be
 *  ascending and non-overlapping, ids < ER_PROBE_MAX_CPU_ID. Returns 0 and
 *  sets *count (≥ 1), or -1 for anything else (empty, garbage, overflow). */
#define ER_PROBE_MAX_CPU_ID (1u << 20)
int er_parse_cpu_list(const char *text, unsigned *count);

/** Parse /proc/meminfo text: MemTotal / MemAvailable in kB, converted to
 *  bytes. Returns a bit mask: 1 = total found and valid, 2 = available found
 *  and valid. Only the first line of each key counts. Missing or malformed
 *  values (garbage, no "kB" unit, more than ER_MEMINFO_MAX_BYTES) leave the
 *  output at 0 and their bit clear. */
#define ER_MEMINFO_MAX_BYTES (1ull << 60) /* 1 EiB: anything larger is garbage */
#define ER_MEMINFO_TOTAL 1
#define ER_MEMINFO_AVAILABLE 2
int er_parse_meminfo(const char *text, uint64_t *total_bytes,
                     uint64_t *available_bytes);

/** bf16 rule for a discrete NVIDIA GPU, from the driver's "Model:" string:
 *  0 for pre-Ampere product names, 1 otherwise (see probe.c for the list). */
int er_gpu_model_has_bf16(const char *model);

/** bf16 of a CPU (also used for npu_phone, whose CPU side runs the rest):
 *  x86_64 from avx512_bf16 / amx_bf16, arm64 from bf16, in dev->cpu_flags;
 *  sets dev->bf16 and dev->bf16_source. Shared with device_profile.c so a
 *  profile without `bf16:` gets the same rule as the probe. */
void er_bf16_from_cpu_flags(edgert_device *dev, edgert_arch arch);

/** The file-based host facts of er_probe for a given CPU arch: logical cores,
 *  memory, and the name (cpuinfo "model name" and/or device-tree model,
 *  preferred order by arch). Leaves unknown facts at 0/"" and notes why in
 *  `d`. Does not touch flags, class or bf16. */
void er_probe_host_facts(const char *sysroot, edgert_arch arch, edgert_device *dev,
                         er_diags *d);

#endif /* EDGERT_CORE_PROBE_INTERNAL_H */
