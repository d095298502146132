/*
 * core/probe/probe_cpu.c — the CPU flags of the probe: what the CPU executing this
 * code can do AND what the OS lets a process use.
 *
 * CPU flags come from the CPU itself, never from files (a sysroot describes
 * files, not the CPU we run on): CPUID + XGETBV on x86-64, plus what Linux
 * says about AMX tile data; getauxval(AT_HWCAP/AT_HWCAP2) on arm64. A flag
 * counts as usable only when the OS enabled the register state it needs; a
 * flag the CPU has but the OS did not enable is reported separately
 * (cpu_flags_os_disabled) so `explain` can say why a backend that "should"
 * run does not.
 *
 * The decoders (er_x86_decode, er_x86_amx_permitted, er_arm64_decode) are
 * pure functions of register values and masks, tested with synthetic ones on
 * any host; only the live readers at the end of this file execute CPUID,
 * XGETBV or a syscall. The probe only observes: it changes no process state
 * (the AMX rule below says what that means for tile data).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

#include "probe/probe_internal.h"

/* Linux x86 arch_prctl requests that read the extended-state permissions
 * (v5.16+, arch/x86/include/uapi/asm/prctl.h); defined here so old headers
 * build. */
#ifndef ARCH_GET_XCOMP_SUPP
#define ARCH_GET_XCOMP_SUPP 0x1021
#endif
#ifndef ARCH_GET_XCOMP_PERM
#define ARCH_GET_XCOMP_PERM 0x1022
#endif

#define FLAG(f) (1ull << (unsigned)(f))

/* ======================================================================= */
/* x86-64: CPUID/XCR0 decoding (pure)                                       */
/* ======================================================================= */

enum x86_reg { R_L1_ECX, R_L7_EBX, R_L7_ECX, R_L7_EDX, R_L71_EAX };

#define AVX_STATE (ER_XCR0_SSE | ER_XCR0_YMM)
#define AVX512_STATE (AVX_STATE | ER_XCR0_OPMASK | ER_XCR0_ZMM_HI256 | ER_XCR0_HI16_ZMM)
/* AMX instructions #UD unless XCR0[18:17] = 11b (SDM vol. 1, 13.3); they do
 * not depend on the AVX state components. */
#define AMX_STATE (ER_XCR0_XTILECFG | ER_XCR0_XTILEDATA)

typedef struct x86_bit {
    edgert_cpu_flag flag;
    enum x86_reg reg;
    unsigned bit;
    uint64_t state; /* XCR0 components that must all be enabled */
    int amx;        /* also needs Linux to let this process use tile data */
} x86_bit;

/* Bit positions: Intel SDM vol. 2A, CPUID; AMD APM vol. 3, appendix E. */
static const x86_bit x86_bits[] = {
    /* SSE state is always on in 64-bit mode (FXSR), so SSE4.2 needs nothing. */
    {EDGERT_CPU_SSE4_2, R_L1_ECX, 20, 0, 0},
    {EDGERT_CPU_FMA, R_L1_ECX, 12, AVX_STATE, 0},
    {EDGERT_CPU_AVX, R_L1_ECX, 28, AVX_STATE, 0},
    {EDGERT_CPU_F16C, R_L1_ECX, 29, AVX_STATE, 0},
    {EDGERT_CPU_AVX2, R_L7_EBX, 5, AVX_STATE, 0},
    {EDGERT_CPU_AVX512F, R_L7_EBX, 16, AVX512_STATE, 0},
    {EDGERT_CPU_AVX512DQ, R_L7_EBX, 17, AVX512_STATE, 0},
    {EDGERT_CPU_AVX512CD, R_L7_EBX, 28, AVX512_STATE, 0},
    {EDGERT_CPU_AVX512BW, R_L7_EBX, 30, AVX512_STATE, 0},
    {EDGERT_CPU_AVX512VL, R_L7_EBX, 31, AVX512_STATE, 0},
    {EDGERT_CPU_AVX512_VNNI, R_L7_ECX, 11, AVX512_STATE, 0},
    {EDGERT_CPU_AMX_BF16, R_L7_EDX, 22, AMX_STATE, 1},
    {EDGERT_CPU_AVX512_FP16, R_L7_EDX, 23, AVX512_STATE, 0},
    {EDGERT_CPU_AMX_TILE, R_L7_EDX, 24, AMX_STATE, 1},
    {EDGERT_CPU_AMX_INT8, R_L7_EDX, 25, AMX_STATE, 1},
    {EDGERT_CPU_AVX_VNNI, R_L71_EAX, 4, AVX_STATE, 0},
    {EDGERT_CPU_AVX512_BF16, R_L71_EAX, 5, AVX512_STATE, 0},
    {EDGERT_CPU_AMX_FP16, R_L71_EAX, 21, AMX_STATE, 1},
};

#define X86_OSXSAVE_BIT 27u /* CPUID.1:ECX: the OS set CR4.OSXSAVE, XGETBV works */
#define X86_LM_BIT 29u      /* CPUID.80000001h:EDX: long mode */

/* A register's value, or 0 when its leaf lies beyond what the CPU reports:
 * reading a leaf past the maximum returns the data of the highest basic leaf
 * on Intel, i.e. garbage for our purpose. */
static uint32_t x86_reg_value(const er_x86_cpuid *r, enum x86_reg reg)
{
    switch (reg) {
    case R_L1_ECX:
        return r->max_leaf >= 1 ? r->l1_ecx : 0;
    case R_L7_EBX:
        return r->max_leaf >= 7 ? r->l7_0_ebx : 0;
    case R_L7_ECX:
        return r->max_leaf >= 7 ? r->l7_0_ecx : 0;
    case R_L7_EDX:
        return r->max_leaf >= 7 ? r->l7_0_edx : 0;
    case R_L71_EAX:
        return (r->max_leaf >= 7 && r->l7_0_eax >= 1) ? r->l7_1_eax : 0;
    }
    return 0;
}

void er_x86_decode(const er_x86_cpuid *regs, uint64_t xcr0, int amx_permitted, uint64_t *usable,
                   uint64_t *os_disabled)
{
    *usable = 0;
    *os_disabled = 0;
    if (!regs)
        return;
    int osxsave = (x86_reg_value(regs, R_L1_ECX) >> X86_OSXSAVE_BIT) & 1u;
    uint64_t state = osxsave ? xcr0 : 0; /* without OSXSAVE, XGETBV is #UD */
    for (size_t i = 0; i < sizeof x86_bits / sizeof x86_bits[0]; i++) {
        const x86_bit *b = &x86_bits[i];
        if (!((x86_reg_value(regs, b->reg) >> b->bit) & 1u))
            continue; /* not in this CPU */
        int enabled = (state & b->state) == b->state && (!b->amx || amx_permitted);
        if (enabled)
            *usable |= FLAG(b->flag);
        else
            *os_disabled |= FLAG(b->flag);
    }
}

int er_x86_long_mode(const er_x86_cpuid *regs)
{
    if (!regs || regs->max_ext_leaf < 0x80000001u)
        return 0;
    return (int)((regs->ext1_edx >> X86_LM_BIT) & 1u);
}

/*
 * AMX tile data and Linux (5.16+): the kernel enables XTILECFG/XTILEDATA in
 * XCR0 but keeps tile data off for each process until the process asks
 * (arch_prctl ARCH_REQ_XCOMP_PERM); the first tile instruction without the
 * permission dies with SIGILL. Asking changes the process for good (the
 * permission cannot be dropped, and from then on Linux refuses a sigaltstack
 * too small for the tile state), while most processes that probe never run
 * a tile instruction (`edgert probe`, every backend but an AMX one); so the
 * probe never asks. It only reads what the kernel would grant
 * (ARCH_GET_XCOMP_SUPP) and what this process already holds
 * (ARCH_GET_XCOMP_PERM). The rule:
 *
 *   AMX flags are usable  <=>  the CPU reports them (CPUID)
 *                              AND XCR0 enables XTILECFG and XTILEDATA
 *                              AND XTILEDATA is held (perm) or grantable (supp)
 *
 * and they are OS-disabled when the CPU reports them but any of the other
 * two fails. So a manifest that requires amx_tile passes the gate on an AMX
 * machine, and the plugin that uses the tiles requests the permission in its
 * own init. "Grantable" is not a promise: the request can still fail (e.g.
 * ENOSPC when the process installed a sigaltstack too small for the tile
 * state), and the plugin's init reports that as its own refusal.
 */
int er_x86_amx_permitted(uint64_t xcomp_supp, uint64_t xcomp_perm)
{
    const uint64_t tiledata = 1ull << ER_XFEATURE_XTILEDATA;
    return ((xcomp_supp | xcomp_perm) & tiledata) != 0;
}

/* ======================================================================= */
/* arm64: HWCAP decoding (pure)                                             */
/* ======================================================================= */

void er_arm64_decode(uint64_t hwcap, uint64_t hwcap2, uint64_t *usable)
{
    static const struct {
        int word; /* 1 = AT_HWCAP, 2 = AT_HWCAP2 */
        uint64_t bit;
        edgert_cpu_flag flag;
    } map[] = {
        {1, ER_HWCAP_ASIMD, EDGERT_CPU_ASIMD},   {1, ER_HWCAP_ASIMDHP, EDGERT_CPU_ASIMDHP},
        {1, ER_HWCAP_ASIMDDP, EDGERT_CPU_ASIMDDP}, {1, ER_HWCAP_SVE, EDGERT_CPU_SVE},
        {2, ER_HWCAP2_SVE2, EDGERT_CPU_SVE2},    {2, ER_HWCAP2_I8MM, EDGERT_CPU_I8MM},
        {2, ER_HWCAP2_BF16, EDGERT_CPU_BF16},
    };
    *usable = 0;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        uint64_t word = map[i].word == 1 ? hwcap : hwcap2;
        if (word & map[i].bit)
            *usable |= FLAG(map[i].flag);
    }
}

/* ======================================================================= */
/* Live CPU reads (the only code that executes CPU-specific instructions)   */
/* ======================================================================= */

#if defined(__x86_64__)
/* "amx_tile, amx_int8" — the names of the flags in `mask`. */
static void flag_list(uint64_t mask, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (unsigned f = 0; f < EDGERT_CPU_FLAG_COUNT && used < len; f++) {
        if (!EDGERT_HAS_FLAG(mask, f))
            continue;
        int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
                         edgert_cpu_flag_name((edgert_cpu_flag)f));
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

static void x86_read_cpuid(er_x86_cpuid *r)
{
    unsigned a, b, c, d;
    memset(r, 0, sizeof *r);
    __cpuid(0, a, b, c, d);
    r->max_leaf = a;
    if (r->max_leaf >= 1) {
        __cpuid_count(1, 0, a, b, c, d);
        r->l1_ecx = c;
    }
    if (r->max_leaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        r->l7_0_eax = a;
        r->l7_0_ebx = b;
        r->l7_0_ecx = c;
        r->l7_0_edx = d;
        if (r->l7_0_eax >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            r->l7_1_eax = a;
        }
    }
    __cpuid(0x80000000u, a, b, c, d);
    r->max_ext_leaf = a;
    if (r->max_ext_leaf >= 0x80000001u) {
        __cpuid_count(0x80000001u, 0, a, b, c, d);
        r->ext1_edx = d;
    }
}

/* XGETBV with ECX = 0 reads XCR0. Only valid when CPUID reports OSXSAVE. */
static uint64_t x86_xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0u));
    return ((uint64_t)hi << 32) | lo;
}

/* What Linux says about the XSAVE features of this process: the ones it can
 * grant (ARCH_GET_XCOMP_SUPP) and the ones the process holds
 * (ARCH_GET_XCOMP_PERM). Both requests only read. A request the kernel
 * refuses (EINVAL before 5.16) leaves its mask at 0; returns the errno of a
 * refused ARCH_GET_XCOMP_SUPP for the diagnostic, else 0. */
static int x86_xcomp_masks(uint64_t *supp, uint64_t *perm)
{
    unsigned long long s = 0, p = 0; /* the kernel writes a u64 at the address */
    int err = 0;
    *supp = 0;
    *perm = 0;
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_SUPP, &s) == 0)
        *supp = s;
    else
        err = errno;
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &p) == 0)
        *perm = p;
    return err;
}

void er_probe_cpu_flags(edgert_device *dev, er_diags *d)
{
    er_x86_cpuid regs;
    x86_read_cpuid(&regs);
    uint64_t xcr0 = ((regs.l1_ecx >> X86_OSXSAVE_BIT) & 1u) ? x86_xgetbv0() : 0;
    uint64_t usable, disabled;
    er_x86_decode(&regs, xcr0, 1, &usable, &disabled);

    /* AMX also needs Linux to let this process use tile data (the rule at
     * er_x86_amx_permitted). Only looked at when the CPU and XCR0 say AMX
     * could work at all; read, never requested. */
    const uint64_t amx = FLAG(EDGERT_CPU_AMX_TILE) | FLAG(EDGERT_CPU_AMX_INT8) |
                         FLAG(EDGERT_CPU_AMX_BF16) | FLAG(EDGERT_CPU_AMX_FP16);
    int amx_not_offered = 0;
    if (usable & amx) {
        uint64_t supp, perm;
        int e = x86_xcomp_masks(&supp, &perm);
        if (!er_x86_amx_permitted(supp, perm)) {
            if (e)
                er_diag_add(d, EDGERT_LOG_INFO, NULL, 0, 0,
                            "probe: Linux does not offer AMX tile data to processes "
                            "(arch_prctl ARCH_GET_XCOMP_SUPP: %s); AMX counts as OS-disabled",
                            strerror(e));
            else
                er_diag_add(d, EDGERT_LOG_INFO, NULL, 0, 0,
                            "probe: Linux does not offer AMX tile data to processes "
                            "(ARCH_GET_XCOMP_SUPP 0x%llx lacks XTILEDATA); AMX counts as "
                            "OS-disabled",
                            (unsigned long long)supp);
            amx_not_offered = 1;
            er_x86_decode(&regs, xcr0, 0, &usable, &disabled);
        }
    }
    if (!er_x86_long_mode(&regs))
        er_diag_add(d, EDGERT_LOG_INFO, NULL, 0, 0,
                    "probe: CPUID 0x80000001 does not report long mode although this is a "
                    "64-bit process (CPUID masked by a hypervisor?)");
    if (disabled) {
        char names[512];
        flag_list(disabled, names, sizeof names);
        er_diag_add(d, EDGERT_LOG_INFO, NULL, 0, 0,
                    "probe: the CPU reports %s, but the OS has not enabled their register "
                    "state (XCR0 0x%llx%s%s); not usable",
                    names, (unsigned long long)xcr0,
                    ((regs.l1_ecx >> X86_OSXSAVE_BIT) & 1u) ? "" : ", OSXSAVE off",
                    amx_not_offered ? ", AMX tile data not offered by Linux" : "");
    }
    dev->cpu_flags = usable;
    dev->cpu_flags_os_disabled = disabled;
}
#elif defined(__aarch64__)
void er_probe_cpu_flags(edgert_device *dev, er_diags *d)
{
    (void)d;
    er_arm64_decode((uint64_t)getauxval(AT_HWCAP), (uint64_t)getauxval(AT_HWCAP2),
                    &dev->cpu_flags);
    dev->cpu_flags_os_disabled = 0;
}
#else
void er_probe_cpu_flags(edgert_device *dev, er_diags *d)
{
    (void)dev;
    er_diag_add(d, EDGERT_LOG_WARN, NULL, 0, 0,
                "probe: edgert knows no CPU flags for this architecture");
}
#endif
