/*
 * examples/vendor-plugin/avx2_w4a16.c — entry, options, init and GEMM
 * dispatch of the avx2-w4a16 backend: int4 weights with a scale and a zero
 * point per (column, group of 128, 64 or 32), 16-bit activations (15-bit
 * integers with a power-of-two scale per block of 128 inputs), exact
 * integer group sums, fp32
 * accumulation. For the x86 CPUs with AVX2 but no AVX-512 (Intel 12th-14th
 * gen, Core Ultra, AMD Zen 2/3), which otherwise get the reference backend.
 *
 * A vendor's example: it is built against the installed package, the public
 * headers (edgert/plugin.h) and the plugin kit (edgert::plugin_kit: its
 * argument checks, packed bytes' header and self-test runner), and links
 * nothing of the core; its layout, kernels and error bound are its own
 * (a2_pack.c, a2_map.c, a2_selftest.c).
 *
 * This file is compiled WITHOUT ISA flags (plain x86-64), so loading the
 * library and calling init on any x86-64 CPU is safe: AVX code lives only in
 * a2_kern_*.c and is reached only after init checked the host's usable CPU
 * flags. (The core gates on the manifest's requires.cpu_flags before dlopen;
 * this is the second line of defence.)
 *
 * Code paths (chosen once per instance in init, in the spirit of xxHash's
 * dispatcher), both on the same packed layout (a2_internal.h):
 *   path=avx2     AVX2 (+ FMA for the fp32 epilogue): decode vpmaddubsw on
 *                 the 15-bit activations split into two int8 halves, int16
 *                 partial sums widened by vpmaddwd; prefill vpmaddwd on the
 *                 int16 activations against codes expanded to int16 in L1.
 *   path=avxvnni  AVX-VNNI on ymm: vpdpbusd (decode) and vpdpwssd (prefill),
 *                 the same integers accumulated straight into int32. Groups
 *                 of 64 and 32 run the avx2 kernels (the same integers, the
 *                 same results): the VNNI kernels cut at sub-groups wait for
 *                 a machine with AVX-VNNI to be measured and tested on.
 *   path=auto     (default, also for NULL or "") avxvnni where the CPU has
 *                 avx_vnni, else avx2.
 * Any other option text is refused with EDGERT_E_USAGE; a path whose CPU flag
 * the host lacks is refused with EDGERT_E_UNSUPPORTED naming the flag.
 *
 * No global mutable state: the descriptor, tables and strings are const; an
 * instance is an a2_state allocated through host->alloc. No exit/abort.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "a2_internal.h"

typedef struct a2_flag_need {
    edgert_cpu_flag flag;
    const char *name;
} a2_flag_need;

typedef struct a2_path_info {
    const char *name;
    a2_flag_need need[2]; /* beyond the base flags; name NULL ends the list */
    const char *describe;
    a2_kernels kern;
} a2_path_info;

/* The avxvnni path's instructions: AVX-VNNI (VEX), or in the test-only build
 * their EVEX form, which needs AVX512_VNNI and AVX512VL instead. */
#ifdef A2_VNNI_EVEX
#define A2_VNNI_NEEDS {EDGERT_CPU_AVX512_VNNI, "avx512_vnni"}, {EDGERT_CPU_AVX512VL, "avx512vl"}
#define A2_VNNI_ISA "AVX512_VNNI on ymm (EVEX-encoded test build)"
#else
#define A2_VNNI_NEEDS {EDGERT_CPU_AVX_VNNI, "avx_vnni"}
#define A2_VNNI_ISA "AVX-VNNI"
#endif

static const a2_path_info a2_paths[A2_PATH_COUNT] = {
    [A2_PATH_AVX2] = {"avx2", {{EDGERT_CPU_AVX2, "avx2"}},
                      "avx2: AVX2, 15-bit integer activations per block of 128 (decode: "
                      "vpmaddubsw on two int8 halves; prefill: vpmaddwd), exact int32 group "
                      "sums, fp32 accumulate",
                      {a2_avx2_prep, a2_avx2_decode, a2_avx2_prefill}},
    [A2_PATH_VNNI] = {"avxvnni", {A2_VNNI_NEEDS},
                      "avxvnni: " A2_VNNI_ISA ", 15-bit integer activations per block of 128 "
                      "(decode: vpdpbusd on two int8 halves; prefill: vpdpwssd), exact int32 "
                      "group sums, fp32 accumulate",
                      {a2_avx2_prep, a2_vnni_decode, a2_vnni_prefill}},
};

/* Every kernel file is compiled for these (CMakeLists.txt). */
static const a2_flag_need a2_base_flags[] = {
    {EDGERT_CPU_AVX, "avx"},
    {EDGERT_CPU_AVX2, "avx2"},
    {EDGERT_CPU_FMA, "fma"},
};

const char *a2_path_name(a2_path p)
{
    return a2_paths[p].name;
}

/* The first flag path `p` needs that `flags` lacks, or NULL. */
static const char *a2_missing_flag(uint64_t flags, a2_path p)
{
    for (size_t i = 0; i < sizeof a2_paths[p].need / sizeof a2_paths[p].need[0]; i++) {
        const a2_flag_need *n = &a2_paths[p].need[i];
        if (n->name != NULL && !EDGERT_HAS_FLAG(flags, n->flag))
            return n->name;
    }
    return NULL;
}

/* ---- init ------------------------------------------------------------------------ */

/* Parse "path=<name>" (surrounding blanks allowed). 0 on success. */
static int a2_parse_options(const char *options, int *auto_path, a2_path *path, char *err,
                            size_t err_len)
{
    *auto_path = 1;
    if (options == NULL)
        return 0;
    const char *s = options;
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s == '\0')
        return 0;
    if (strncmp(s, "path=", 5) != 0) {
        edgert_errf(err, err_len,
                    A2_NAME ": init: unknown option '%s' (accepted: path=auto|avx2|avxvnni)",
                    options);
        return -1;
    }
    s += 5;
    size_t len = strcspn(s, " \t");
    const char *rest = s + len;
    while (*rest == ' ' || *rest == '\t')
        rest++;
    if (*rest != '\0') {
        edgert_errf(err, err_len, A2_NAME ": init: unexpected text '%s' after the path option",
                    rest);
        return -1;
    }
    if (len == 4 && strncmp(s, "auto", 4) == 0)
        return 0;
    for (int p = 0; p < A2_PATH_COUNT; p++) {
        if (strlen(a2_paths[p].name) == len && strncmp(s, a2_paths[p].name, len) == 0) {
            *auto_path = 0;
            *path = (a2_path)p;
            return 0;
        }
    }
    edgert_errf(err, err_len, A2_NAME ": init: unknown path '%.*s' (accepted: auto, avx2, avxvnni)",
                (int)len, s);
    return -1;
}

/* The host table is present, at least ABI 1's size, every function set. */
static edgert_status a2_check_host(const edgert_host *host, char *err, size_t err_len)
{
    if (host == NULL) {
        edgert_errf(err, err_len, A2_NAME ": init: host table is NULL");
        return EDGERT_E_USAGE;
    }
    if (host->struct_size < EDGERT_HOST_V1_SIZE || host->log == NULL || host->alloc == NULL ||
        host->free == NULL || host->parallel_for == NULL || host->thread_count == NULL) {
        edgert_errf(err, err_len,
                    A2_NAME ": init: host table too small or incomplete (struct_size %u, need "
                            ">= %zu with log, alloc, free, parallel_for and thread_count set)",
                    (unsigned)host->struct_size, (size_t)EDGERT_HOST_V1_SIZE);
        return EDGERT_E_USAGE;
    }
    return EDGERT_OK;
}

/* The path this instance runs: the forced one if its flags are there, else
 * the best this CPU has. EDGERT_OK or EDGERT_E_UNSUPPORTED naming the flag. */
static edgert_status a2_choose_path(uint64_t flags, int auto_path, a2_path *path, char *err,
                                    size_t err_len)
{
    for (size_t i = 0; i < sizeof a2_base_flags / sizeof a2_base_flags[0]; i++) {
        if (!EDGERT_HAS_FLAG(flags, a2_base_flags[i].flag)) {
            edgert_errf(err, err_len,
                        A2_NAME ": init: this CPU lacks %s (every path needs avx, avx2 and fma)",
                        a2_base_flags[i].name);
            return EDGERT_E_UNSUPPORTED;
        }
    }
    if (auto_path) {
        *path = a2_missing_flag(flags, A2_PATH_VNNI) == NULL ? A2_PATH_VNNI : A2_PATH_AVX2;
        return EDGERT_OK;
    }
    const char *missing = a2_missing_flag(flags, *path);
    if (missing != NULL) {
        edgert_errf(err, err_len,
                    A2_NAME ": init: path=%s needs the CPU flag %s, which this CPU does not "
                            "have (or the OS has not enabled)",
                    a2_paths[*path].name, missing);
        return EDGERT_E_UNSUPPORTED;
    }
    return EDGERT_OK;
}

static edgert_status a2_init(const edgert_host *host, const char *options, void **state,
                             char *err, size_t err_len)
{
    if (state == NULL) {
        edgert_errf(err, err_len, A2_NAME ": init: state pointer is NULL");
        return EDGERT_E_USAGE;
    }
    *state = NULL;
    edgert_status rc = a2_check_host(host, err, err_len);
    if (rc != EDGERT_OK)
        return rc;
    int auto_path = 1;
    a2_path path = A2_PATH_AVX2;
    if (a2_parse_options(options, &auto_path, &path, err, err_len) != 0)
        return EDGERT_E_USAGE;
    rc = a2_choose_path(host->cpu_flags, auto_path, &path, err, err_len);
    if (rc != EDGERT_OK)
        return rc;

    a2_state *st = host->alloc(host->host_ctx, sizeof *st, A2_ALIGN);
    if (st == NULL) {
        edgert_errf(err, err_len, A2_NAME ": init: cannot allocate %zu bytes of instance state",
                    sizeof *st);
        return EDGERT_E_NOMEM;
    }
    st->host = host;
    st->path = path;
    st->kern = a2_paths[path].kern;
    *state = st;
    host->log(host->host_ctx, EDGERT_LOG_DEBUG, A2_NAME ": instance ready, path %s%s",
              a2_paths[path].name, auto_path ? " (auto)" : " (forced)");
    return EDGERT_OK;
}

static void a2_fini(void *state)
{
    a2_state *st = state;
    if (st == NULL)
        return;
    st->host->free(st->host->host_ctx, st);
}

static const char *a2_describe(void *state)
{
    const a2_state *st = state;
    return st != NULL ? a2_paths[st->path].describe : NULL;
}

/* ---- gemm ------------------------------------------------------------------------ */

/* x's rows copied into xp, kpad apart, zero past k: whole blocks of 128
 * inputs for every kernel when k is no multiple of 128. */
static const float *a2_pad_x(const a2_packed *w, const edgert_gemm_args *args, float *xp)
{
    for (size_t i = 0; i < args->m; i++) {
        memcpy(xp + i * w->kpad, args->x + i * args->ldx, (size_t)w->k * sizeof(float));
        memset(xp + i * w->kpad + w->k, 0, (size_t)(w->kpad - w->k) * sizeof(float));
    }
    return xp;
}

/*
 * y = x W^T. Per-call scratch (never indexed by worker): the activations as
 * 15-bit integers, m * (2 kpad + 64) bytes, plus per (row, block) the scale
 * and per (row, weight group) the sum, m * (kpad / 32 + 4 kpad / group) bytes;
 * with k no multiple of 128 also x zero-padded to kpad, 4 m kpad bytes.
 * prep runs first (on the caller for small m: it is O(m k)), then the
 * kernels over panels: decode streams each panel's codes once, prefill
 * expands each panel into L1 once per block of inputs and of 64 rows.
 */
edgert_status a2_gemm(void *state, const void *packed, const edgert_gemm_args *args, char *err,
                      size_t err_len)
{
    a2_state *st = state;
    const a2_packed *w = packed;
    if (st == NULL || w == NULL || w->magic != A2_HANDLE_MAGIC) {
        edgert_errf(err, err_len, A2_NAME ": gemm: NULL state or not an " A2_NAME
                                          " packed handle");
        return EDGERT_E_USAGE;
    }
    edgert_status rc = pk_check_gemm_args(A2_NAME, w->name, w->n, w->k, args, err, err_len);
    if (rc != EDGERT_OK)
        return rc;

    const edgert_host *host = st->host;
    /* rows one cache line longer than their groups: never a multiple of
     * 4 KiB apart, so the broadcasts of a row tile do not all fall in one
     * L1 set (k = 2048 is 4 KiB of activations; measured 10% slower) */
    const size_t row_bytes = (size_t)w->groups * A2_ACT_GROUP_BYTES + A2_ALIGN;
    const int xpad = w->kpad != w->k;
    size_t mg = (size_t)args->m * w->groups, act_bytes, sums_bytes, x_off, x_bytes = 0, total;
    if (pk_mul(row_bytes, args->m, &act_bytes) != 0 ||
        pk_mul(mg, (1u + w->sub) * sizeof(float), &sums_bytes) != 0 ||
        pk_add(act_bytes, sums_bytes, &x_off) != 0 ||
        (xpad && pk_mul((size_t)args->m * sizeof(float), w->kpad, &x_bytes) != 0) ||
        pk_add(x_off, x_bytes, &total) != 0) {
        edgert_errf(err, err_len, A2_NAME ": gemm on '%s' [m=%u]: scratch size overflows size_t",
                    w->name, (unsigned)args->m);
        return EDGERT_E_NOMEM;
    }
    uint8_t *scratch = host->alloc(host->host_ctx, total, A2_ALIGN);
    if (scratch == NULL) {
        edgert_errf(err, err_len,
                    A2_NAME ": gemm on '%s' [m=%u n=%u k=%u]: cannot allocate %zu bytes of "
                            "activation scratch",
                    w->name, (unsigned)args->m, (unsigned)w->n, (unsigned)w->k, total);
        return EDGERT_E_NOMEM;
    }
    /* x_off is a multiple of 4: act_bytes of 64, sums_bytes of 4 */
    const float *x = xpad ? a2_pad_x(w, args, (float *)(void *)(scratch + x_off)) : args->x;
    a2_job job = {
        .w = w, .m = args->m, .x = x, .ldx = xpad ? w->kpad : args->ldx, .y = args->y,
        .ldy = args->ldy, .act = (int8_t *)scratch, .act_row_bytes = row_bytes,
        .gscale = (float *)(void *)(scratch + act_bytes),
        .gsum = (float *)(void *)(scratch + act_bytes) + mg,
    };
    /* groups of 64 and 32: the avx2 kernels on every path (see the top) */
    const a2_kernels *kern = w->sub > 1u ? &a2_paths[A2_PATH_AVX2].kern : &st->kern;
    if (args->m <= 8u)
        kern->prep(&job, 0, args->m, 0);
    else
        host->parallel_for(host->host_ctx, args->m, 4u, kern->prep, &job);

    if (args->m <= A2_DECODE_MAX_M) {
        /* at least about 64 KiB of codes per chunk: the hand-off costs
         * microseconds, streaming 64 KiB about as much */
        size_t grain = (64u * 1024u + w->panel_bytes - 1u) / w->panel_bytes;
        host->parallel_for(host->host_ctx, w->panels, grain, kern->decode, &job);
    } else {
        host->parallel_for(host->host_ctx, w->panels, 1u, kern->prefill, &job);
    }
    host->free(host->host_ctx, scratch);
    return EDGERT_OK;
}

/* ---- descriptor and entry ----------------------------------------------------------- */

/* The fields every ABI version's descriptor has (ABI 1's). */
#define A2_ABI1_FIELDS(abi)                                                                       \
    .struct_size = sizeof(edgert_plugin), .abi_version = (abi), .name = A2_NAME,                \
    .version = A2_VERSION, .caps = EDGERT_CAP_GEMM, .init = a2_init, .fini = a2_fini,            \
    .self_test = a2_self_test, .describe = a2_describe, .pack = a2_pack,                        \
    .packed_free = a2_packed_free, .gemm = a2_gemm, .export_graph = NULL

static const edgert_plugin a2_plugin_v1 = {A2_ABI1_FIELDS(1u)};

/* ABI 2: the same, and the packed bytes a cache can write and map back
 * (a2_map.c). The ABI-1 descriptor stays for cores that offer only ABI 1. */
static const edgert_plugin a2_plugin_v2 = {
    A2_ABI1_FIELDS(2u),
    .packed_flags = EDGERT_PACKED_MAPPABLE,
    .packed_layout = A2_LAYOUT,
    .packed_data = a2_packed_data,
    .packed_map = a2_packed_map,
};

EDGERT_PLUGIN_EXPORT edgert_status edgert_plugin_entry(uint32_t abi_min, uint32_t abi_max,
                                                       const edgert_host *host,
                                                       const edgert_plugin **out, char *err,
                                                       size_t err_len)
{
    (void)host; /* the instance gets the host table again in init() */
    static const edgert_plugin *const by_abi[] = {&a2_plugin_v1, &a2_plugin_v2}; /* ABI 1, 2 */
    return EDGERT_PLUGIN_NEGOTIATE(abi_min, abi_max, by_abi, A2_NAME, out, err, err_len);
}
