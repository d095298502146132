/*
 * tests/test_probe.c — the probe (core/probe.c) and device profiles
 * (core/device_profile.c).
 *
 * - x86 and arm64 flag decoding from synthetic CPUID/XCR0 and HWCAP values;
 * - cores / memory parsing, including hostile input;
 * - the device class of every fake sysroot in fixtures/sysroots;
 * - the live probe of this machine, checked against /proc/cpuinfo;
 * - every good device profile in fixtures/devices, and every bad one in
 *   fixtures/devices/bad with the exact line:col of its error.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probe_internal.h"

#ifndef EDGERT_TEST_FIXTURES
#error "EDGERT_TEST_FIXTURES must name the tests/fixtures folder"
#endif

#define FIX EDGERT_TEST_FIXTURES
#define SYSROOTS FIX "/sysroots/"
#define DEVICES FIX "/devices/"
#define F(flag) (1ull << (unsigned)(flag))

/* ----------------------------------------------------------------------- */
/* helpers                                                                 */
/* ----------------------------------------------------------------------- */

static const edgert_diag *first_error(const er_diags *d)
{
    for (size_t i = 0; i < d->count; i++)
        if (d->items[i].level == EDGERT_LOG_ERROR)
            return &d->items[i];
    return NULL;
}

static size_t count_level(const er_diags *d, edgert_log_level level)
{
    size_t n = 0;
    for (size_t i = 0; i < d->count; i++)
        n += d->items[i].level == level;
    return n;
}

/* A diagnostic at `level` whose message contains `needle`, or NULL. */
static const edgert_diag *find_diag(const er_diags *d, edgert_log_level level, const char *needle)
{
    for (size_t i = 0; i < d->count; i++)
        if (d->items[i].level == level && strstr(d->items[i].message, needle))
            return &d->items[i];
    return NULL;
}

/* Like find_diag, and the diagnostic's file must contain `file_part`. */
static const edgert_diag *find_diag_in(const er_diags *d, edgert_log_level level,
                                       const char *needle, const char *file_part)
{
    for (size_t i = 0; i < d->count; i++)
        if (d->items[i].level == level && strstr(d->items[i].message, needle) &&
            d->items[i].file && strstr(d->items[i].file, file_part))
            return &d->items[i];
    return NULL;
}

/* The line of the error containing `needle`; fails the test when absent. */
static unsigned error_line(const er_diags *d, const char *needle)
{
    const edgert_diag *e = find_diag(d, EDGERT_LOG_ERROR, needle);
    if (!e)
        fail_msg("no error containing '%s'", needle);
    return e->line;
}

static void dump_diags(const char *what, const er_diags *d)
{
    for (size_t i = 0; i < d->count; i++)
        print_message("  [%s] level %d %s:%u:%u: %s\n", what, (int)d->items[i].level,
                      d->items[i].file ? d->items[i].file : "-", d->items[i].line,
                      d->items[i].column, d->items[i].message);
}

static int is_all_zero(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return 0;
    return 1;
}

/* Write root/rel (creating parent folders) with len bytes of data. */
static void put(const char *root, const char *rel, const void *data, size_t len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            fail_msg("mkdir %s: %s", path, strerror(errno));
        *p = '/';
    }
    FILE *f = fopen(path, "wb");
    if (!f)
        fail_msg("create %s: %s", path, strerror(errno));
    if (len && fwrite(data, 1, len, f) != len)
        fail_msg("write %s", path);
    fclose(f);
}

static void puts_file(const char *root, const char *rel, const char *text)
{
    put(root, rel, text, strlen(text));
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void make_tmp(char *buf, size_t len)
{
    snprintf(buf, len, "/tmp/edgert-test-probe-XXXXXX");
    if (!mkdtemp(buf))
        fail_msg("mkdtemp: %s", strerror(errno));
}

static void rm_tree(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ----------------------------------------------------------------------- */
/* x86 decoding                                                            */
/* ----------------------------------------------------------------------- */

/* Written from the Intel SDM, independently of probe.c's table. */
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

#define ARM_V82 (F(EDGERT_CPU_ASIMD) | F(EDGERT_CPU_ASIMDHP) | F(EDGERT_CPU_ASIMDDP))
#define ARM_V92 (ARM_V82 | F(EDGERT_CPU_I8MM) | F(EDGERT_CPU_BF16))

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
 * release without device tree, conflicting facts, unreadable files. */
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
    } cases[] = {
        {"x86-server", EDGERT_ARCH_X86_64, "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz", 2,
         8139472, 7421864},
        {"rpi5", EDGERT_ARCH_ARM64, "Raspberry Pi 5 Model B Rev 1.0", 4, 8245200, 7800000},
        /* x86 order: cpuinfo first, device tree second (rpi5 has no model name) */
        {"rpi5", EDGERT_ARCH_X86_64, "Raspberry Pi 5 Model B Rev 1.0", 4, 8245200, 7800000},
        {"jetson-orin", EDGERT_ARCH_ARM64, "NVIDIA Jetson AGX Orin Developer Kit", 12, 30536276,
         27000000},
        {"jetson-nano", EDGERT_ARCH_ARM64, "NVIDIA Jetson Nano Developer Kit", 4, 0, 0},
        {"android-hexagon", EDGERT_ARCH_ARM64, "", 8, 11534336, 5120000},
        {"nvidia-workstation", EDGERT_ARCH_X86_64, "13th Gen Intel(R) Core(TM) i9-13900K", 32,
         65536000, 60000000},
        {"empty", EDGERT_ARCH_X86_64, "", 0, 0, 0},
        {"empty", EDGERT_ARCH_ARM64, "", 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char root[512];
        snprintf(root, sizeof root, SYSROOTS "%s", cases[i].sysroot);
        edgert_device dev;
        memset(&dev, 0, sizeof dev);
        er_diags d = {0};
        er_probe_host_facts(root, cases[i].arch, &dev, &d);
        if (strcmp(dev.name, cases[i].name) != 0 || dev.logical_cores != cases[i].cores ||
            dev.mem_total_bytes != cases[i].total_kb * 1024 ||
            dev.mem_available_bytes != cases[i].avail_kb * 1024) {
            dump_diags(cases[i].sysroot, &d);
            fail_msg("%s (%s): name '%s' cores %u mem %llu/%llu", cases[i].sysroot,
                     edgert_arch_name(cases[i].arch), dev.name, dev.logical_cores,
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
    uint64_t listed;
    if (cpuinfo_flags(&listed) != 0) {
        er_diags_free(&d);
        skip();
    }
    /* Linux lists a flag only when it is usable, so what we call usable
     * must be listed; and everything it lists that we know must be found
     * (usable, or for AMX possibly refused by the permission request). */
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
            fail_msg("fixtures/devices/bad/%s has no expectation in test_probe.c", name);
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
        cmocka_unit_test(test_arm64_decode),
        cmocka_unit_test(test_parse_cpu_list),
        cmocka_unit_test(test_parse_meminfo),
        cmocka_unit_test(test_gpu_model_bf16),
        cmocka_unit_test(test_sysroot_classes),
        cmocka_unit_test(test_sysroot_classes_generated),
        cmocka_unit_test(test_host_facts_fixtures),
        cmocka_unit_test(test_host_facts_hostile),
        cmocka_unit_test(test_host_facts_unusable_files),
        cmocka_unit_test(test_probe_with_sysroot),
        cmocka_unit_test(test_live_probe),
        cmocka_unit_test(test_profiles_good),
        cmocka_unit_test(test_profiles_bad),
        cmocka_unit_test(test_profiles_bad_all_listed),
        cmocka_unit_test(test_profile_too_big),
        cmocka_unit_test(test_profile_unreadable),
        cmocka_unit_test(test_profile_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
