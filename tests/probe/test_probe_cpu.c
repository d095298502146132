/*
 * tests/probe/test_probe_cpu.c — the probe's CPU flags (core/probe/probe_cpu.c): the pure x86
 * (CPUID/XCR0, and the AMX tile-data rule over Linux's arch_prctl masks) and
 * arm64 (HWCAP) decoders, fed synthetic values. They run on every host: this
 * is where the AMX cases are exercised on machines without AMX.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "test_probe_util.h"

/* ----------------------------------------------------------------------- */
/* x86 decoding                                                            */
/* ----------------------------------------------------------------------- */

/* Written from the Intel SDM, independently of probe_cpu.c's table. */
#define L1_SSE42 (1u << 20)
#define L1_FMA (1u << 12)
#define L1_OSXSAVE (1u << 27)
#define L1_AVX (1u << 28)
#define L1_F16C (1u << 29)
#define L7B_AVX2 (1u << 5)
#define L7B_AVX512F (1u << 16)
#define L7B_AVX512DQ (1u << 17)
#define L7B_AVX512CD (1u << 28)
#define L7B_AVX512BW (1u << 30)
#define L7B_AVX512VL (1u << 31)
#define L7C_AVX512VNNI (1u << 11)
#define L7D_AMXBF16 (1u << 22)
#define L7D_AVX512FP16 (1u << 23)
#define L7D_AMXTILE (1u << 24)
#define L7D_AMXINT8 (1u << 25)
#define L71A_AVXVNNI (1u << 4)
#define L71A_AVX512BF16 (1u << 5)
#define L71A_AMXFP16 (1u << 21)

#define XCR0_AVX 0x7ull        /* x87 | SSE | YMM */
#define XCR0_AVX512 0xe7ull    /* + opmask | ZMM_Hi256 | Hi16_ZMM */
#define XCR0_ALL 0x600e7ull    /* + XTILECFG | XTILEDATA */

#define X86_AVX_FAMILY                                                                      \
    (F(EDGERT_CPU_AVX) | F(EDGERT_CPU_AVX2) | F(EDGERT_CPU_FMA) | F(EDGERT_CPU_F16C) |      \
     F(EDGERT_CPU_AVX_VNNI))
#define X86_AVX512_FAMILY                                                                   \
    (F(EDGERT_CPU_AVX512F) | F(EDGERT_CPU_AVX512BW) | F(EDGERT_CPU_AVX512VL) |             \
     F(EDGERT_CPU_AVX512DQ) | F(EDGERT_CPU_AVX512CD) | F(EDGERT_CPU_AVX512_VNNI) |         \
     F(EDGERT_CPU_AVX512_BF16) | F(EDGERT_CPU_AVX512_FP16))
#define X86_AMX_FAMILY                                                                      \
    (F(EDGERT_CPU_AMX_TILE) | F(EDGERT_CPU_AMX_INT8) | F(EDGERT_CPU_AMX_BF16) |            \
     F(EDGERT_CPU_AMX_FP16))
#define X86_ALL (F(EDGERT_CPU_SSE4_2) | X86_AVX_FAMILY | X86_AVX512_FAMILY | X86_AMX_FAMILY)

/* A Granite-Rapids-like CPU reporting every flag edgert knows. */
static er_x86_cpuid cpu_everything(void)
{
    er_x86_cpuid r = {
        .max_leaf = 0x23,
        .max_ext_leaf = 0x80000008u,
        .l1_ecx = L1_SSE42 | L1_FMA | L1_OSXSAVE | L1_AVX | L1_F16C,
        .l7_0_eax = 2,
        .l7_0_ebx = L7B_AVX2 | L7B_AVX512F | L7B_AVX512DQ | L7B_AVX512CD | L7B_AVX512BW |
                    L7B_AVX512VL,
        .l7_0_ecx = L7C_AVX512VNNI,
        .l7_0_edx = L7D_AMXBF16 | L7D_AVX512FP16 | L7D_AMXTILE | L7D_AMXINT8,
        .l7_1_eax = L71A_AVXVNNI | L71A_AVX512BF16 | L71A_AMXFP16,
        .ext1_edx = 1u << 29,
    };
    return r;
}

static void test_x86_decode_all_enabled(void **state)
{
    (void)state;
    er_x86_cpuid r = cpu_everything();
    uint64_t usable = 0xdead, dis = 0xbeef;
    er_x86_decode(&r, XCR0_ALL, 1, &usable, &dis);
    assert_int_equal(usable, X86_ALL);
    assert_int_equal(dis, 0);
    /* No arm64 bit ever comes out of the x86 decoder. */
    assert_int_equal(usable & ~((1ull << EDGERT_CPU_ASIMD) - 1), 0);
}

/* Each CPUID bit alone maps to exactly its flag. */
static void test_x86_decode_single_bits(void **state)
{
    (void)state;
    static const struct {
        int reg; /* 1 l1_ecx, 2 ebx, 3 ecx, 4 edx, 5 leaf 7.1 eax */
        uint32_t bit;
        edgert_cpu_flag flag;
    } cases[] = {
        {1, L1_SSE42, EDGERT_CPU_SSE4_2},       {1, L1_FMA, EDGERT_CPU_FMA},
        {1, L1_AVX, EDGERT_CPU_AVX},            {1, L1_F16C, EDGERT_CPU_F16C},
        {2, L7B_AVX2, EDGERT_CPU_AVX2},         {2, L7B_AVX512F, EDGERT_CPU_AVX512F},
        {2, L7B_AVX512DQ, EDGERT_CPU_AVX512DQ}, {2, L7B_AVX512CD, EDGERT_CPU_AVX512CD},
        {2, L7B_AVX512BW, EDGERT_CPU_AVX512BW}, {2, L7B_AVX512VL, EDGERT_CPU_AVX512VL},
        {3, L7C_AVX512VNNI, EDGERT_CPU_AVX512_VNNI},
        {4, L7D_AMXBF16, EDGERT_CPU_AMX_BF16},  {4, L7D_AVX512FP16, EDGERT_CPU_AVX512_FP16},
        {4, L7D_AMXTILE, EDGERT_CPU_AMX_TILE},  {4, L7D_AMXINT8, EDGERT_CPU_AMX_INT8},
        {5, L71A_AVXVNNI, EDGERT_CPU_AVX_VNNI}, {5, L71A_AVX512BF16, EDGERT_CPU_AVX512_BF16},
        {5, L71A_AMXFP16, EDGERT_CPU_AMX_FP16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        er_x86_cpuid r = {.max_leaf = 7, .l1_ecx = L1_OSXSAVE, .l7_0_eax = 1};
        switch (cases[i].reg) {
        case 1: r.l1_ecx |= cases[i].bit; break;
        case 2: r.l7_0_ebx = cases[i].bit; break;
        case 3: r.l7_0_ecx = cases[i].bit; break;
        case 4: r.l7_0_edx = cases[i].bit; break;
        default: r.l7_1_eax = cases[i].bit; break;
        }
        uint64_t usable, dis;
        er_x86_decode(&r, XCR0_ALL, 1, &usable, &dis);
        if (usable != F(cases[i].flag) || dis != 0)
            fail_msg("bit for %s: usable %#llx os_disabled %#llx",
                     edgert_cpu_flag_name(cases[i].flag), (unsigned long long)usable,
                     (unsigned long long)dis);
        /* With no state enabled, the same bit lands in os_disabled —
         * except SSE4.2, which needs no XSAVE state. */
        er_x86_decode(&r, 0, 0, &usable, &dis);
        if (cases[i].flag == EDGERT_CPU_SSE4_2) {
            assert_int_equal(usable, F(EDGERT_CPU_SSE4_2));
            assert_int_equal(dis, 0);
        } else if (usable != 0 || dis != F(cases[i].flag)) {
            fail_msg("bit for %s with XCR0=0: usable %#llx os_disabled %#llx",
                     edgert_cpu_flag_name(cases[i].flag), (unsigned long long)usable,
                     (unsigned long long)dis);
        }
    }
}

static void test_x86_decode_amx_state_off(void **state)
{
    (void)state;
    er_x86_cpuid r = cpu_everything();
    uint64_t usable, dis;
    /* A kernel before 5.16: AMX in CPUID, XCR0 bits 17/18 clear. */
    er_x86_decode(&r, XCR0_AVX512, 1, &usable, &dis);
    assert_int_equal(usable, X86_ALL & ~X86_AMX_FAMILY);
    assert_int_equal(dis, X86_AMX_FAMILY);
    /* Only one of the two tile components: still not usable. */
    er_x86_decode(&r, XCR0_AVX512 | (1ull << 17), 1, &usable, &dis);
    assert_int_equal(dis, X86_AMX_FAMILY);
    er_x86_decode(&r, XCR0_AVX512 | (1ull << 18), 1, &usable, &dis);
    assert_int_equal(dis, X86_AMX_FAMILY);
}

/* Linux does not let this process use tile data (er_x86_amx_permitted says 0). */
static void test_x86_decode_amx_permission_refused(void **state)
{
    (void)state;
    er_x86_cpuid r = cpu_everything();
    uint64_t usable, dis;
    er_x86_decode(&r, XCR0_ALL, 0, &usable, &dis);
    assert_int_equal(usable, X86_ALL & ~X86_AMX_FAMILY);
    assert_int_equal(dis, X86_AMX_FAMILY);
}

static void test_x86_decode_avx512_state_off(void **state)
{
    (void)state;
    er_x86_cpuid r = cpu_everything();
    uint64_t usable, dis;
    /* XCR0 with AVX but without opmask/ZMM: AVX-512 must not be used. */
    er_x86_decode(&r, XCR0_AVX, 1, &usable, &dis);
    assert_int_equal(usable, F(EDGERT_CPU_SSE4_2) | X86_AVX_FAMILY);
    assert_int_equal(dis, X86_AVX512_FAMILY | X86_AMX_FAMILY);
    /* Two of the three AVX-512 components are not enough. */
    er_x86_decode(&r, XCR0_AVX | (1ull << 5) | (1ull << 6), 1, &usable, &dis);
    assert_true((dis & X86_AVX512_FAMILY) == X86_AVX512_FAMILY);
    /* AMX state alone (no ZMM) enables AMX but not AVX-512: the tile
     * instructions depend on XCR0[18:17] only. */
    er_x86_decode(&r, XCR0_AVX | (3ull << 17), 1, &usable, &dis);
    assert_int_equal(usable, F(EDGERT_CPU_SSE4_2) | X86_AVX_FAMILY | X86_AMX_FAMILY);
    assert_int_equal(dis, X86_AVX512_FAMILY);
    /* AVX state off entirely (only x87|SSE): every AVX flag is disabled. */
    er_x86_decode(&r, 0x3, 1, &usable, &dis);
    assert_int_equal(usable, F(EDGERT_CPU_SSE4_2));
    assert_int_equal(dis, X86_ALL & ~F(EDGERT_CPU_SSE4_2));
}

static void test_x86_decode_no_osxsave(void **state)
{
    (void)state;
    er_x86_cpuid r = cpu_everything();
    r.l1_ecx &= ~L1_OSXSAVE;
    uint64_t usable, dis;
    /* XGETBV is undefined without OSXSAVE: a stale xcr0 value is ignored. */
    er_x86_decode(&r, XCR0_ALL, 1, &usable, &dis);
    assert_int_equal(usable, F(EDGERT_CPU_SSE4_2));
    assert_int_equal(usable & X86_AVX_FAMILY, 0);
    assert_int_equal(dis, X86_ALL & ~F(EDGERT_CPU_SSE4_2));
}

static void test_x86_decode_max_leaf(void **state)
{
    (void)state;
    er_x86_cpuid r = cpu_everything();
    uint64_t usable, dis;
    /* Leaf 7 beyond the maximum: its registers are garbage, ignored. */
    r.max_leaf = 6;
    er_x86_decode(&r, XCR0_ALL, 1, &usable, &dis);
    assert_int_equal(usable, F(EDGERT_CPU_SSE4_2) | F(EDGERT_CPU_AVX) | F(EDGERT_CPU_FMA) |
                                 F(EDGERT_CPU_F16C));
    assert_int_equal(dis, 0);
    /* Leaf 7 present but only subleaf 0: no AVX-VNNI, AVX512-BF16, AMX-FP16. */
    r = cpu_everything();
    r.l7_0_eax = 0;
    er_x86_decode(&r, XCR0_ALL, 1, &usable, &dis);
    assert_int_equal(usable, X86_ALL & ~(F(EDGERT_CPU_AVX_VNNI) | F(EDGERT_CPU_AVX512_BF16) |
                                         F(EDGERT_CPU_AMX_FP16)));
    /* Nothing at all. */
    r.max_leaf = 0;
    er_x86_decode(&r, XCR0_ALL, 1, &usable, &dis);
    assert_int_equal(usable, 0);
    assert_int_equal(dis, 0);
    er_x86_decode(NULL, XCR0_ALL, 1, &usable, &dis);
    assert_int_equal(usable | dis, 0);
}

/* Raw values read on the AMD EPYC (Zen 5 class) this project is developed
 * on: AVX-512 with BF16/VNNI, AVX-VNNI, no AMX; XCR0 = 0xe7. */
static void test_x86_decode_real_epyc(void **state)
{
    (void)state;
    er_x86_cpuid r = {
        .max_leaf = 0xd,
        .max_ext_leaf = 0x80000021u,
        .l1_ecx = 0xfed83203u,
        .l7_0_eax = 1,
        .l7_0_ebx = 0xf1bb03a9u,
        .l7_0_ecx = 0x18005f42u,
        .l7_0_edx = 0x00000110u,
        .l7_1_eax = 0x00000030u,
        .ext1_edx = 0x25d3fbffu,
    };
    uint64_t usable, dis;
    er_x86_decode(&r, 0xe7, 1, &usable, &dis);
    assert_int_equal(usable, F(EDGERT_CPU_SSE4_2) | X86_AVX_FAMILY | F(EDGERT_CPU_AVX512F) |
                                 F(EDGERT_CPU_AVX512BW) | F(EDGERT_CPU_AVX512VL) |
                                 F(EDGERT_CPU_AVX512DQ) | F(EDGERT_CPU_AVX512CD) |
                                 F(EDGERT_CPU_AVX512_VNNI) | F(EDGERT_CPU_AVX512_BF16));
    assert_int_equal(dis, 0);
    assert_int_equal(er_x86_long_mode(&r), 1);
}

static void test_x86_long_mode(void **state)
{
    (void)state;
    er_x86_cpuid r = cpu_everything();
    assert_int_equal(er_x86_long_mode(&r), 1);
    r.ext1_edx = ~(1u << 29);
    assert_int_equal(er_x86_long_mode(&r), 0);
    r.ext1_edx = 1u << 29;
    r.max_ext_leaf = 0x80000000u; /* leaf 0x80000001 not available */
    assert_int_equal(er_x86_long_mode(&r), 0);
    assert_int_equal(er_x86_long_mode(NULL), 0);
}

/* ----------------------------------------------------------------------- */
/* AMX tile data and Linux: er_x86_amx_permitted, and its part in decoding  */
/* ----------------------------------------------------------------------- */

/* Masks as Linux reports them on a Sapphire Rapids host (x87 SSE AVX,
 * opmask ZMM_Hi256 Hi16_ZMM, PKRU, XTILECFG, XTILEDATA): what the kernel can
 * grant, what a fresh process holds (everything but the dynamic XTILEDATA),
 * and what it holds after ARCH_REQ_XCOMP_PERM. */
#define SPR_XCR0 0x602e7ull
#define SPR_SUPP 0x602e7ull
#define SPR_PERM_FRESH 0x202e7ull
#define SPR_PERM_GRANTED 0x602e7ull
#define XTILECFG (1ull << 17)
#define XTILEDATA (1ull << 18)

static void test_x86_amx_permitted(void **state)
{
    (void)state;
    static const struct {
        uint64_t supp, perm;
        int permitted;
    } cases[] = {
        /* ARCH_GET_XCOMP_SUPP/PERM refused (kernel before 5.16): not offered */
        {0, 0, 0},
        /* a kernel that offers no tile data (AMX off, or a CPU without it) */
        {0xe7, 0xe7, 0},
        {0xe7 | XTILECFG, 0xe7 | XTILECFG, 0},
        /* grantable, not held yet: a fresh process on an AMX host */
        {SPR_SUPP, SPR_PERM_FRESH, 1},
        {XTILEDATA, 0, 1},
        /* held */
        {SPR_SUPP, SPR_PERM_GRANTED, 1},
        /* held although SUPP could not be read: what the process holds counts */
        {0, XTILEDATA, 1},
        /* every other bit set, XTILEDATA clear in both */
        {~XTILEDATA, ~XTILEDATA, 0},
        {~0ull, ~0ull, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (er_x86_amx_permitted(cases[i].supp, cases[i].perm) != cases[i].permitted)
            fail_msg("supp %#llx perm %#llx: permitted should be %d",
                     (unsigned long long)cases[i].supp, (unsigned long long)cases[i].perm,
                     cases[i].permitted);
}

/*
 * The whole AMX rule as the probe applies it, for every combination of: the
 * CPU reports AMX or not; XCR0's XTILECFG and XTILEDATA bits; XTILEDATA in
 * the SUPP mask; XTILEDATA in the PERM mask (each mask also carrying other
 * bits, which must not matter). Expected, written out independently of
 * probe_cpu.c: AMX usable iff CPU && XTILECFG && XTILEDATA(XCR0) && (SUPP ||
 * PERM); OS-disabled iff the CPU reports AMX and it is not usable; the other
 * flags never change.
 */
static void test_x86_decode_amx_rule_all_combinations(void **state)
{
    (void)state;
    const uint64_t other = X86_ALL & ~X86_AMX_FAMILY;
    for (unsigned combo = 0; combo < 32; combo++) {
        int cpu_amx = combo & 1, cfg = (combo >> 1) & 1, data = (combo >> 2) & 1;
        int in_supp = (combo >> 3) & 1, in_perm = (combo >> 4) & 1;
        er_x86_cpuid r = cpu_everything();
        if (!cpu_amx) {
            r.l7_0_edx &= ~(L7D_AMXBF16 | L7D_AMXTILE | L7D_AMXINT8);
            r.l7_1_eax &= ~L71A_AMXFP16;
        }
        uint64_t xcr0 = XCR0_AVX512 | (cfg ? XTILECFG : 0) | (data ? XTILEDATA : 0);
        uint64_t supp = SPR_PERM_FRESH | (in_supp ? XTILEDATA : 0);
        uint64_t perm = SPR_PERM_FRESH | (in_perm ? XTILEDATA : 0);
        uint64_t usable = 0xdead, dis = 0xbeef;
        er_x86_decode(&r, xcr0, er_x86_amx_permitted(supp, perm), &usable, &dis);

        int amx_usable = cpu_amx && cfg && data && (in_supp || in_perm);
        uint64_t want_usable = other | (amx_usable ? X86_AMX_FAMILY : 0);
        uint64_t want_dis = (cpu_amx && !amx_usable) ? X86_AMX_FAMILY : 0;
        if (usable != want_usable || dis != want_dis)
            fail_msg("cpu_amx %d xcr0 %#llx supp %#llx perm %#llx: usable %#llx os_disabled "
                     "%#llx, want %#llx / %#llx",
                     cpu_amx, (unsigned long long)xcr0, (unsigned long long)supp,
                     (unsigned long long)perm, (unsigned long long)usable,
                     (unsigned long long)dis, (unsigned long long)want_usable,
                     (unsigned long long)want_dis);
    }
}

/* The point of observing instead of requesting: a fresh process on an AMX
 * host (permission not yet held) has usable amx_tile, so a manifest that
 * requires it passes the gate; a kernel that does not offer tile data keeps
 * the OS-disabled outcome. */
static void test_x86_decode_amx_fresh_process(void **state)
{
    (void)state;
    er_x86_cpuid r = cpu_everything();
    uint64_t usable, dis;
    er_x86_decode(&r, SPR_XCR0, er_x86_amx_permitted(SPR_SUPP, SPR_PERM_FRESH), &usable, &dis);
    assert_true(EDGERT_HAS_FLAG(usable, EDGERT_CPU_AMX_TILE));
    assert_int_equal(usable, X86_ALL);
    assert_int_equal(dis, 0);
    /* XCR0 enables the tiles but Linux offers no tile data (SUPP refused). */
    er_x86_decode(&r, SPR_XCR0, er_x86_amx_permitted(0, 0), &usable, &dis);
    assert_int_equal(usable, X86_ALL & ~X86_AMX_FAMILY);
    assert_int_equal(dis, X86_AMX_FAMILY);
}

/* ----------------------------------------------------------------------- */
/* arm64 decoding                                                          */
/* ----------------------------------------------------------------------- */

static void test_arm64_decode(void **state)
{
    (void)state;
    /* AT_HWCAP / AT_HWCAP2 as Linux reports them for qemu's CPU models
     * (all bits they set, not only the ones edgert reads). */
    /* cortex-a72: fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid */
    const uint64_t a72 = 0x8ffull;
    /* neoverse-n1: + atomics fphp asimdhp asimdrdm lrcpc dcpop asimddp ssbs */
    const uint64_t n1 = a72 | (1ull << 8) | (1ull << 9) | (1ull << 10) | (1ull << 12) |
                        (1ull << 15) | (1ull << 16) | (1ull << 20) | (1ull << 28);
    /* max: + sve and many more; HWCAP2 with sve2 i8mm bf16 and neighbours */
    const uint64_t max1 = n1 | (1ull << 17) | (1ull << 19) | (1ull << 21) | (1ull << 22) |
                          (1ull << 23) | (1ull << 25) | (1ull << 30) | (1ull << 31);
    const uint64_t max2 = (1ull << 0) | (1ull << 1) | (1ull << 2) | (1ull << 5) | (1ull << 9) |
                          (1ull << 13) | (1ull << 14) | (1ull << 15) | (1ull << 16);
    uint64_t u = 0xdead;

    er_arm64_decode(a72, 0, &u);
    assert_int_equal(u, F(EDGERT_CPU_ASIMD));
    er_arm64_decode(n1, 0, &u);
    assert_int_equal(u, F(EDGERT_CPU_ASIMD) | F(EDGERT_CPU_ASIMDHP) | F(EDGERT_CPU_ASIMDDP));
    er_arm64_decode(max1, max2, &u);
    assert_int_equal(u, F(EDGERT_CPU_ASIMD) | F(EDGERT_CPU_ASIMDHP) | F(EDGERT_CPU_ASIMDDP) |
                            F(EDGERT_CPU_SVE) | F(EDGERT_CPU_SVE2) | F(EDGERT_CPU_I8MM) |
                            F(EDGERT_CPU_BF16));
    er_arm64_decode(0, 0, &u);
    assert_int_equal(u, 0);
    /* HWCAP2 bits are not HWCAP bits: bit 13 of HWCAP is not i8mm. */
    er_arm64_decode(1ull << 13, 0, &u);
    assert_int_equal(u, 0);
    er_arm64_decode(0, ER_HWCAP2_I8MM, &u);
    assert_int_equal(u, F(EDGERT_CPU_I8MM));
    er_arm64_decode(0, ER_HWCAP2_BF16, &u);
    assert_int_equal(u, F(EDGERT_CPU_BF16));
    /* No x86 bit ever comes out of the arm64 decoder. */
    er_arm64_decode(~0ull, ~0ull, &u);
    assert_int_equal(u & ((1ull << EDGERT_CPU_ASIMD) - 1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_x86_decode_all_enabled),
        cmocka_unit_test(test_x86_decode_single_bits),
        cmocka_unit_test(test_x86_decode_amx_state_off),
        cmocka_unit_test(test_x86_decode_amx_permission_refused),
        cmocka_unit_test(test_x86_decode_avx512_state_off),
        cmocka_unit_test(test_x86_decode_no_osxsave),
        cmocka_unit_test(test_x86_decode_max_leaf),
        cmocka_unit_test(test_x86_decode_real_epyc),
        cmocka_unit_test(test_x86_long_mode),
        cmocka_unit_test(test_x86_amx_permitted),
        cmocka_unit_test(test_x86_decode_amx_rule_all_combinations),
        cmocka_unit_test(test_x86_decode_amx_fresh_process),
        cmocka_unit_test(test_arm64_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
