/*
 * core/probe/probe_internal.h — the probe's pieces (core/probe*.c), declared for
 * each other and for the tests.
 *
 * The first part is the pure decoders, exposed so tests can feed synthetic
 * CPUID registers, XCR0 and arch_prctl masks, HWCAP words and file contents;
 * nothing there touches the CPU or the file system. The second part is what
 * the probe's files share: one entry per step (er_probe in probe.c calls them
 * in order) and the sysroot-relative readers of probe_read.c.
 */
#ifndef EDGERT_CORE_PROBE_INTERNAL_H
#define EDGERT_CORE_PROBE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/internal.h"
#include "probe/probe.h"

/** Largest file the probe reads (meminfo, cpuinfo, device-tree nodes, driver
 *  info). Real ones are a few KiB; /proc/cpuinfo of a 256-thread host is
 *  ~400 KiB. Bigger files are ignored with a warning. */
#define ER_PROBE_MAX_FILE_BYTES (1024u * 1024u)

/* ======================================================================= */
/* Pure decoders                                                            */
/* ======================================================================= */

/* ---- x86-64 CPU flags (probe_cpu.c) ------------------------------------ */

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

/* The XSAVE feature number of AMX tile data, as Linux's arch_prctl masks and
 * requests name it (the same bit position as in XCR0). */
#define ER_XFEATURE_XTILEDATA 18

/**
 * Decode CPUID + XCR0 into edgert_cpu_flag bits.
 *   usable:      the CPU reports the flag AND its register state is enabled
 *                (and, for AMX, Linux lets this process use tile data);
 *   os_disabled: the CPU reports the flag but the state is not enabled.
 * `xcr0` is ignored (treated as 0) unless CPUID.1:ECX.OSXSAVE is set, since
 * XGETBV itself is undefined then. `amx_permitted` is er_x86_amx_permitted's
 * answer (1 held or grantable, 0 not offered by the kernel).
 */
void er_x86_decode(const er_x86_cpuid *regs, uint64_t xcr0, int amx_permitted,
                   uint64_t *usable, uint64_t *os_disabled);
/** 1 when CPUID.80000001h:EDX bit 29 (long mode) is reported. */
int er_x86_long_mode(const er_x86_cpuid *regs);

/**
 * May this process use AMX tile data, as far as Linux (5.16+) is concerned?
 * `xcomp_supp` is the mask arch_prctl(ARCH_GET_XCOMP_SUPP) reports (the
 * features the kernel can grant a process), `xcomp_perm` the mask of
 * ARCH_GET_XCOMP_PERM (the features this process already holds); 0 for a
 * request the kernel refused (EINVAL before 5.16). 1 when XTILEDATA is held
 * or grantable, 0 when the kernel does not offer it. Only reads are behind
 * these masks: the permission itself is requested by the plugin that uses
 * the tiles, in its init (probe_cpu.c says why).
 */
int er_x86_amx_permitted(uint64_t xcomp_supp, uint64_t xcomp_perm);

/* ---- arm64 CPU flags (probe_cpu.c) ------------------------------------- */

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

/* ---- host facts (probe_host.c) ----------------------------------------- */

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

/** The CPU's identity from /proc/cpuinfo text, for edgert_device.cpu_id:
 *  x86_64 "<vendor_id> family F model M stepping S" (decimal, as the kernel
 *  prints them), arm64 "implementer 0xII part 0xPPP variant 0xV revision R".
 *  Each field is the first line with its key; a missing or malformed one is
 *  left out (a number must be all digits, a vendor letters and digits), and
 *  nothing known gives "". Returns 1 when anything was found. */
int er_parse_cpu_id(const char *text, edgert_arch arch, char *out, size_t cap);

/* ---- bf16 (probe_class.c) ---------------------------------------------- */

/** bf16 rule for an NVIDIA GPU, from its product name (the driver's
 *  "Model:" string, or a device profile's accelerator): 1 for Ampere/Orin or
 *  newer names (see probe_class.c for the list), 0 for every other name, 1
 *  for NULL or an empty name (nothing known: the probe's default). */
int er_gpu_model_has_bf16(const char *model);

/** bf16 of a CPU (also used for npu_phone, whose CPU side runs the rest):
 *  x86_64 from avx512_bf16 / amx_bf16, arm64 from bf16, in dev->cpu_flags;
 *  sets dev->bf16 and dev->bf16_source. Shared with device_profile.c so a
 *  profile without `bf16:` gets the same rule as the probe. */
void er_bf16_from_cpu_flags(edgert_device *dev, edgert_arch arch);

/* ======================================================================= */
/* The steps er_probe calls (the device class step, er_probe_device_class,  */
/* is declared in internal.h)                                               */
/* ======================================================================= */

/** The flags of the CPU executing this code (CPUID + XGETBV and what Linux
 *  says about AMX tile data on x86-64, HWCAP on arm64), whatever the sysroot:
 *  sets cpu_flags and cpu_flags_os_disabled, notes surprises in `d`. Reads
 *  only; changes no process state (probe_cpu.c). */
void er_probe_cpu_flags(edgert_device *dev, er_diags *d);

/** The file-based host facts of er_probe for a given CPU arch: logical cores,
 *  memory, the name (cpuinfo "model name" and/or device-tree model,
 *  preferred order by arch) and the CPU id (er_parse_cpu_id). Leaves
 *  unknown facts at 0/"" and notes why in `d`. Does not touch flags, class
 *  or bf16. Reads files under a sysroot only (probe_host.c). */
void er_probe_host_facts(const char *sysroot, edgert_arch arch, edgert_device *dev,
                         er_diags *d);

/* ======================================================================= */
/* Sysroot-relative readers and text helpers (probe_read.c), shared by      */
/* probe_host.c and probe_class.c                                           */
/* ======================================================================= */

/** 1 when `sysroot` means the live machine: NULL, "" or "/". */
int er_probe_is_live_root(const char *sysroot);
/** Read a probe file, bounded by ER_PROBE_MAX_FILE_BYTES. Absent: NULL,
 *  silently (most files are optional). Present but unreadable or over the
 *  size limit: NULL and a warning in `d` (may be NULL). *len (may be NULL) is
 *  the byte count. */
char *er_probe_read(const char *sysroot, const char *path, size_t *len, er_diags *d);
/** Entries of sysroot+dir whose names start with `prefix` (not hidden ones),
 *  sorted with strcmp. Returns the count; *out is malloc'd (NULL when none),
 *  freed with er_probe_free_names. A missing directory is 0. */
size_t er_probe_list_dir(const char *sysroot, const char *dir, const char *prefix,
                         char ***out);
void er_probe_free_names(char **names, size_t n);
/** A device-tree property (/proc/device-tree/<prop>, else
 *  /sys/firmware/devicetree/base/<prop>); *used names the folder it came
 *  from. NULL when neither exists. */
char *er_probe_dt_read(const char *sysroot, const char *prop, size_t *len, const char **used,
                       er_diags *d);
/** The board's name from the device-tree `model` property, cleaned into out.
 *  Returns 1 when non-empty. */
int er_probe_dt_model(const char *sysroot, char *out, size_t cap, er_diags *d);

/** Whitespace as isspace() in the C locale, without the locale. */
int er_probe_is_space(char c);
/** The value of the first line "key<spaces/tabs>:<value>" in text, trimmed
 *  and cleaned (printable ASCII only) into out. Returns 1 when found with a
 *  non-empty value. */
int er_probe_line_value(const char *text, const char *key, char *out, size_t cap);

#endif /* EDGERT_CORE_PROBE_INTERNAL_H */
