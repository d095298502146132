/*
 * plugins/avx512-w4a16/avx512_w4a16.c — entry, options, packing, dispatch
 * and self-test of the avx512-w4a16 backend: int4 weights with a scale and a
 * zero point per (column, group of 128), 16-bit activations, fp32
 * accumulation.
 *
 * This file is compiled WITHOUT ISA flags (plain x86-64), so loading the
 * library and calling init on any x86-64 CPU is safe: AVX-512 code lives only
 * in aw_kern_*.c and is reached only after init checked the host's usable
 * CPU flags. (The core also gates on the manifest's requires.cpu_flags before
 * dlopen; this is the second line of defence.)
 *
 * Code paths (one per ISA, chosen once per instance in init, in the spirit of
 * xxHash's dispatcher), all on the same packed layout (aw_internal.h):
 *   path=amx    prefill (m > 4) on AMX-BF16 tiles, bf16 activations
 *               (aw_kern_amx.c); decode as path int16. Needs amx_bf16,
 *               amx_tile (and Linux's tile-data permission, asked for in
 *               init) and avx512_vnni.
 *   path=int16  vpdpbusd on 15-bit integer activations (power-of-two scale
 *               per group of 128, split into two int8 halves); needs
 *               avx512_vnni. Exact integer dot products per group.
 *   path=bf16   vdpbf16ps on bf16 activations; needs avx512_bf16.
 *   path=fma    fp32 FMA on fp32 activations; needs only avx512f (+ bw, vl,
 *               fma, which every AVX-512 CPU has and the manifest requires).
 *   path=auto   (default, also for NULL or "") amx if the tiles are usable,
 *               else the fastest decode this CPU has: int16 if avx512_vnni,
 *               else bf16 if avx512_bf16, else fma.
 * Options string: "path=<auto|amx|int16|bf16|fma>" (empty or NULL = auto).
 * Any other text is refused with EDGERT_E_USAGE; a path whose CPU flag the
 * host lacks is refused with EDGERT_E_UNSUPPORTED naming the flag.
 *
 * GEMM: m <= AW_DECODE_MAX_M streams the codes once (GEMV, software
 * prefetch) over panels split on the host's parallel_for; larger m expands
 * each (block of 3 panels, group) once into an L1-resident buffer (fp32,
 * bf16 or u8 codes) and runs a register-blocked micro-kernel over every row
 * block (path amx: blocks of 4 panels, 32 x 32 tiles). Activation scratch is
 * allocated per call (never indexed by worker).
 *
 * No global mutable state: the descriptor, tables and strings are const; an
 * instance is an aw_state allocated through host->alloc. No exit/abort.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "aw_internal.h"
#include "plugin_util.h"

/* <asm/prctl.h> values (Linux 5.16+), spelled out so older headers build. */
#define AW_ARCH_REQ_XCOMP_PERM 0x1023
#define AW_XFEATURE_XTILEDATA 18

_Static_assert(sizeof(aw_packed) <= AW_ALIGN, "the packed header must fit its 64 bytes");

typedef struct aw_state {
    const edgert_host *host;
    aw_path path;
    aw_kernels kern;
} aw_state;

typedef struct aw_flag_need {
    edgert_cpu_flag flag;
    const char *name;
} aw_flag_need;

typedef struct aw_path_info {
    const char *name;
    aw_flag_need need[3]; /* beyond the base flags; name NULL ends the list */
    const char *describe;
    aw_kernels kern;
} aw_path_info;

#define AW_SAME(prep, gemm) prep, gemm, prep, gemm, AW_PREFILL_PB, 1u

/* The amx path's tiles: real AMX, or (test build) the emulator, which needs
 * no AMX flag. */
#ifdef AW_AMX_EMULATE
#define AW_AMX_NEEDS                                                                          \
    {EDGERT_CPU_AVX512_VNNI, "avx512_vnni"}, {EDGERT_CPU_AVX512_BF16, "avx512_bf16"}
#define AW_AMX_TILES "EMULATED AMX-BF16 tiles (test build)"
#else
#define AW_AMX_NEEDS                                                                          \
    {EDGERT_CPU_AVX512_VNNI, "avx512_vnni"}, {EDGERT_CPU_AMX_BF16, "amx_bf16"},               \
        {EDGERT_CPU_AMX_TILE, "amx_tile"}
#define AW_AMX_TILES "AMX-BF16 tiles"
#endif

static const aw_path_info aw_paths[AW_PATH_COUNT] = {
    [AW_PATH_FMA] = {"fma", {{EDGERT_CPU_AVX512F, "avx512f"}},
                     "fma: AVX-512F fp32 FMA, fp32 activations (no BF16/VNNI needed)",
                     {AW_SAME(aw_fma_prep, aw_fma_gemm)}},
    [AW_PATH_BF16] = {"bf16", {{EDGERT_CPU_AVX512_BF16, "avx512_bf16"}},
                      "bf16: AVX512_BF16 vdpbf16ps, bf16 activations, fp32 accumulate",
                      {AW_SAME(aw_bf16_prep, aw_bf16_gemm)}},
    [AW_PATH_INT16] = {"int16", {{EDGERT_CPU_AVX512_VNNI, "avx512_vnni"}},
                       "int16: AVX512_VNNI, 15-bit integer activations per group of 128 (decode: "
                       "vpdpbusd on two int8 halves; prefill: vpdpwssd), exact int32 group sums, "
                       "fp32 accumulate",
                       {AW_SAME(aw_int16_prep, aw_int16_gemm)}},
    [AW_PATH_AMX] = {"amx", {AW_AMX_NEEDS},
                     "amx: prefill on " AW_AMX_TILES " (bf16 activations, fp32 accumulate); "
                     "decode as path int16 (vpdpbusd GEMV, 15-bit integer activations)",
                     {aw_int16_prep, aw_int16_gemm, aw_bf16_prep, aw_amx_gemm, AW_AMX_PB,
                      AW_AMX_ROW_PAD}},
};

/* Every path's kernel files are compiled for these (CMakeLists.txt). */
static const struct {
    edgert_cpu_flag flag;
    const char *name;
} aw_base_flags[] = {
    {EDGERT_CPU_AVX512F, "avx512f"},
    {EDGERT_CPU_AVX512BW, "avx512bw"},
    {EDGERT_CPU_AVX512VL, "avx512vl"},
    {EDGERT_CPU_FMA, "fma"},
};

/* ---- small helpers -------------------------------------------------------- */

static size_t aw_round64(size_t a)
{
    return (a + (AW_ALIGN - 1u)) & ~(size_t)(AW_ALIGN - 1u);
}

static const char *aw_tensor_name(const edgert_qweights *w)
{
    if (w->struct_size >= offsetof(edgert_qweights, name) + sizeof(w->name) && w->name != NULL &&
        w->name[0] != '\0')
        return w->name;
    return "(unnamed)";
}

static double aw_absd(double v)
{
    return v < 0.0 ? -v : v;
}

/* The first flag path `p` needs that `flags` lacks, or NULL. */
static const char *aw_missing_flag(uint64_t flags, aw_path p)
{
    for (size_t i = 0; i < sizeof aw_paths[p].need / sizeof aw_paths[p].need[0]; i++) {
        const aw_flag_need *n = &aw_paths[p].need[i];
        if (n->name != NULL && !EDGERT_HAS_FLAG(flags, n->flag))
            return n->name;
    }
    return NULL;
}

/* Linux (5.16+) keeps AMX tile data off until the process asks. The edgert
 * core's probe only observes (the host's amx flags mean Linux offers tile
 * data, not that this process holds it), so the plugin asks; asking again is
 * harmless. 0 when the tiles may be used. The emulated test build needs no
 * permission. */
static int aw_amx_permission(char *err, size_t err_len)
{
#if defined(AW_AMX_EMULATE)
    (void)err;
    (void)err_len;
    return 0;
#else
    if (syscall(SYS_arch_prctl, AW_ARCH_REQ_XCOMP_PERM, AW_XFEATURE_XTILEDATA) == 0)
        return 0;
    edgert_errf(err, err_len, AW_NAME ": init: path=amx: Linux refused AMX tile-data permission "
                                 "(arch_prctl ARCH_REQ_XCOMP_PERM: %s)",
           strerror(errno));
    return -1;
#endif
}

/* ---- init ----------------------------------------------------------------------- */

/* Parse "path=<name>" (surrounding blanks allowed). 0 on success. */
static int aw_parse_options(const char *options, int *auto_path, aw_path *path, char *err,
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
                    AW_NAME ": init: unknown option '%s' (accepted: path=auto|amx|int16|bf16|fma)",
                    options);
        return -1;
    }
    s += 5;
    size_t len = strcspn(s, " \t");
    const char *rest = s + len;
    while (*rest == ' ' || *rest == '\t')
        rest++;
    if (*rest != '\0') {
        edgert_errf(err, err_len, AW_NAME ": init: unexpected text '%s' after the path option", rest);
        return -1;
    }
    if (len == 4 && strncmp(s, "auto", 4) == 0)
        return 0;
    for (int p = 0; p < AW_PATH_COUNT; p++) {
        if (strlen(aw_paths[p].name) == len && strncmp(s, aw_paths[p].name, len) == 0) {
            *auto_path = 0;
            *path = (aw_path)p;
            return 0;
        }
    }
    edgert_errf(err, err_len,
                AW_NAME ": init: unknown path '%.*s' (accepted: auto, amx, int16, bf16, fma)", (int)len,
                s);
    return -1;
}

static edgert_status aw_init(const edgert_host *host, const char *options, void **state,
                             char *err, size_t err_len)
{
    if (state == NULL) {
        edgert_errf(err, err_len, AW_NAME ": init: state pointer is NULL");
        return EDGERT_E_USAGE;
    }
    *state = NULL;
    if (host == NULL) {
        edgert_errf(err, err_len, AW_NAME ": init: host table is NULL");
        return EDGERT_E_USAGE;
    }
    if (host->struct_size < offsetof(edgert_host, cpu_flags) + sizeof(host->cpu_flags) ||
        host->alloc == NULL || host->free == NULL || host->parallel_for == NULL ||
        host->log == NULL || host->thread_count == NULL) {
        edgert_errf(err, err_len,
                    AW_NAME ": init: host table too small or incomplete (struct_size %u, need >= %zu "
                       "with alloc, free, parallel_for, thread_count and log set)",
               (unsigned)host->struct_size,
               offsetof(edgert_host, cpu_flags) + sizeof(host->cpu_flags));
        return EDGERT_E_USAGE;
    }

    int auto_path = 1;
    aw_path path = AW_PATH_FMA;
    if (aw_parse_options(options, &auto_path, &path, err, err_len) != 0)
        return EDGERT_E_USAGE;

    const uint64_t flags = host->cpu_flags;
    for (size_t i = 0; i < sizeof aw_base_flags / sizeof aw_base_flags[0]; i++) {
        if (!EDGERT_HAS_FLAG(flags, aw_base_flags[i].flag)) {
            edgert_errf(err, err_len,
                        AW_NAME ": init: this CPU lacks %s (every path needs avx512f, avx512bw, "
                           "avx512vl and fma)",
                   aw_base_flags[i].name);
            return EDGERT_E_UNSUPPORTED;
        }
    }
    if (auto_path) {
        /* amx where tiles are usable (its decode is int16's); else the
         * fastest decode measured on Zen 5 (see the manifest notes) */
        static const aw_path order[] = {AW_PATH_AMX, AW_PATH_INT16, AW_PATH_BF16, AW_PATH_FMA};
        for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
            path = order[i];
            if (aw_missing_flag(flags, path) != NULL)
                continue;
            if (path == AW_PATH_AMX && aw_amx_permission(err, err_len) != 0) {
                host->log(host->host_ctx, EDGERT_LOG_WARN, "%s; path auto goes on without AMX",
                          err != NULL && err_len != 0u ? err : AW_NAME ": AMX refused");
                if (err != NULL && err_len != 0u)
                    err[0] = '\0';
                continue;
            }
            break;
        }
    } else {
        const char *missing = aw_missing_flag(flags, path);
        if (missing != NULL) {
            edgert_errf(err, err_len, AW_NAME ": init: path=%s needs the CPU flag %s, which this CPU "
                                         "does not have (or the OS has not enabled)",
                   aw_paths[path].name, missing);
            return EDGERT_E_UNSUPPORTED;
        }
        if (path == AW_PATH_AMX && aw_amx_permission(err, err_len) != 0)
            return EDGERT_E_UNSUPPORTED;
    }

    aw_state *st = host->alloc(host->host_ctx, sizeof *st, AW_ALIGN);
    if (st == NULL) {
        edgert_errf(err, err_len, AW_NAME ": init: cannot allocate %zu bytes of instance state",
                    sizeof *st);
        return EDGERT_E_NOMEM;
    }
    st->host = host;
    st->path = path;
    st->kern = aw_paths[path].kern;
    *state = st;
    host->log(host->host_ctx, EDGERT_LOG_DEBUG, AW_NAME ": instance ready, path %s%s",
              aw_paths[path].name, auto_path ? " (auto)" : " (forced)");
    return EDGERT_OK;
}

static void aw_fini(void *state)
{
    aw_state *st = state;
    if (st == NULL)
        return;
    st->host->free(st->host->host_ctx, st);
}

static const char *aw_describe(void *state)
{
    const aw_state *st = state;
    return st != NULL ? aw_paths[st->path].describe : NULL;
}

/* ---- pack ------------------------------------------------------------------------- */

typedef struct aw_pack_job {
    const edgert_qweights *w;
    uint8_t *data;
    size_t panel_bytes;
    uint32_t groups;
} aw_pack_job;

/* fp32 scale rounded to 20 significant bits, z in the freed 4 bits. */
static uint32_t aw_meta_word(float s, unsigned z)
{
    uint32_t u;
    memcpy(&u, &s, sizeof u);
    uint32_t r = (u + 8u) & ~15u; /* round half up on the magnitude */
    if (((r >> 23) & 0xFFu) == 0xFFu)
        r = u & ~15u; /* rounding would overflow to inf: truncate instead */
    return r | (uint32_t)z;
}

/*
 * Pack panels [begin, end). Works straight from the canonical tensor into the
 * final allocation, 4 input bytes -> one code dword at a time: the transient
 * memory above the packed size is zero (a few registers), whatever n and k.
 */
static void aw_pack_panels(void *arg, size_t begin, size_t end, unsigned worker)
{
    const aw_pack_job *pj = arg;
    const edgert_qweights *w = pj->w;
    const size_t stride = (size_t)w->k / 2u; /* k is a multiple of 128 */
    static const unsigned nib_k[8] = AW_NIB_K;
    (void)worker;

    for (size_t p = begin; p < end; p++) {
        uint8_t *blk = pj->data + p * pj->panel_bytes;
        for (uint32_t g = 0; g < pj->groups; g++, blk += AW_BLOCK_BYTES) {
            for (unsigned j = 0; j < AW_PANEL; j++) {
                size_t col = p * AW_PANEL + j;
                uint32_t meta = 0u;
                if (col < w->n) {
                    const uint8_t *src = w->codes + col * stride + (size_t)g * (AW_GROUP / 2u);
                    for (unsigned t = 0; t < AW_OCTETS; t++) {
                        const uint8_t *b = src + 4u * t; /* codes of inputs 8t .. 8t+7 */
                        uint32_t d = 0u;
                        for (unsigned i = 0; i < 8u; i++) {
                            unsigned kk = nib_k[i];
                            unsigned q = (kk & 1u) ? (unsigned)(b[kk / 2u] >> 4)
                                                   : (unsigned)(b[kk / 2u] & 15u);
                            d |= (uint32_t)q << (4u * i);
                        }
                        memcpy(blk + 64u * t + 4u * j, &d, 4u);
                    }
                    size_t gi = col * pj->groups + g;
                    meta = aw_meta_word(w->scales[gi], w->zeros != NULL ? w->zeros[gi] : 8u);
                } else {
                    for (unsigned t = 0; t < AW_OCTETS; t++)
                        memset(blk + 64u * t + 4u * j, 0, 4u);
                }
                memcpy(blk + AW_CODE_BYTES + 4u * j, &meta, 4u);
            }
        }
    }
}

static edgert_status aw_pack(void *state, const edgert_qweights *w, void **packed,
                             size_t *packed_bytes, char *err, size_t err_len)
{
    aw_state *st = state;
    const size_t need = offsetof(edgert_qweights, zeros) + sizeof(w->zeros);

    if (packed == NULL || packed_bytes == NULL || st == NULL) {
        edgert_errf(err, err_len, AW_NAME ": pack: state, packed or packed_bytes is NULL");
        return EDGERT_E_USAGE;
    }
    *packed = NULL;
    *packed_bytes = 0u;
    if (w == NULL || w->struct_size < need) {
        edgert_errf(err, err_len, AW_NAME ": pack: weights descriptor is NULL or too small "
                             "(struct_size %u, need >= %zu)",
               w != NULL ? (unsigned)w->struct_size : 0u, need);
        return EDGERT_E_USAGE;
    }
    const char *name = aw_tensor_name(w);
    if (w->n == 0u || w->k == 0u || w->group == 0u || w->codes == NULL || w->scales == NULL) {
        edgert_errf(err, err_len,
                    AW_NAME ": pack '%s' [n=%u k=%u group=%u]: n, k and group must be > 0 and codes "
                       "and scales non-NULL",
               name, (unsigned)w->n, (unsigned)w->k, (unsigned)w->group);
        return EDGERT_E_USAGE;
    }
    if (w->group != AW_GROUP) {
        edgert_errf(err, err_len,
                    AW_NAME ": pack '%s' [n=%u k=%u]: group size %u is not supported (layout "
                       "int4-asym-g128 needs group 128)",
               name, (unsigned)w->n, (unsigned)w->k, (unsigned)w->group);
        return EDGERT_E_UNSUPPORTED;
    }
    if (w->k % AW_GROUP != 0u) {
        edgert_errf(err, err_len,
                    AW_NAME ": pack '%s' [n=%u]: k=%u is not a multiple of the group size %u "
                       "(k %% %u = %u)",
               name, (unsigned)w->n, (unsigned)w->k, AW_GROUP, AW_GROUP,
               (unsigned)(w->k % AW_GROUP));
        return EDGERT_E_UNSUPPORTED;
    }

    const uint32_t groups = w->k / AW_GROUP;
    const size_t ng = (size_t)w->n * groups;
    for (size_t i = 0; i < ng; i++) {
        if (w->zeros != NULL && w->zeros[i] > 15u) {
            edgert_errf(err, err_len,
                        AW_NAME ": pack '%s' [n=%u k=%u group=%u]: zero point %u at row %zu group %zu "
                           "is outside [0, 15]",
                   name, (unsigned)w->n, (unsigned)w->k, (unsigned)w->group,
                   (unsigned)w->zeros[i], i / groups, i % groups);
            return EDGERT_E_USAGE;
        }
        if (!isfinite(w->scales[i])) {
            edgert_errf(err, err_len,
                        AW_NAME ": pack '%s' [n=%u k=%u group=%u]: scale at row %zu group %zu is not "
                           "finite",
                   name, (unsigned)w->n, (unsigned)w->k, (unsigned)w->group, i / groups,
                   i % groups);
            return EDGERT_E_USAGE;
        }
    }

    size_t panels = ((size_t)w->n + AW_PANEL - 1u) / AW_PANEL;
    size_t panel_bytes = (size_t)groups * AW_BLOCK_BYTES, data_bytes, total;
    const size_t off = AW_ALIGN; /* the header; aw_data() */
    if (panel_bytes > UINT32_MAX || pu_mul(panels, panel_bytes, &data_bytes) != 0 ||
        pu_add(off, data_bytes, &total) != 0) {
        edgert_errf(err, err_len, AW_NAME ": pack '%s' [n=%u k=%u]: packed size overflows size_t",
                    name, (unsigned)w->n, (unsigned)w->k);
        return EDGERT_E_NOMEM;
    }
    const edgert_host *host = st->host;
    uint8_t *mem = host->alloc(host->host_ctx, total, AW_ALIGN);
    if (mem == NULL) {
        edgert_errf(err, err_len, AW_NAME ": pack '%s' [n=%u k=%u]: cannot allocate %zu bytes", name,
                    (unsigned)w->n, (unsigned)w->k, total);
        return EDGERT_E_NOMEM;
    }

    aw_packed *p = (aw_packed *)(void *)mem;
    memset(p, 0, sizeof *p);
    p->magic = AW_PACKED_MAGIC;
    p->n = w->n;
    p->k = w->k;
    p->groups = groups;
    p->panels = (uint32_t)panels;
    p->panel_bytes = (uint32_t)panel_bytes;
    snprintf(p->name, sizeof p->name, "%s", name);

    aw_pack_job pj = {.w = w, .data = mem + off, .panel_bytes = panel_bytes, .groups = groups};
    host->parallel_for(host->host_ctx, panels, 16u, aw_pack_panels, &pj);

    *packed = p;
    *packed_bytes = total;
    return EDGERT_OK;
}

static void aw_packed_free(void *state, void *packed)
{
    aw_state *st = state;
    if (st == NULL || packed == NULL)
        return;
    st->host->free(st->host->host_ctx, packed);
}

/* ---- gemm ------------------------------------------------------------------------- */

static edgert_status aw_gemm(void *state, const void *packed, const edgert_gemm_args *args,
                             char *err, size_t err_len)
{
    aw_state *st = state;
    const aw_packed *w = packed;

    if (st == NULL || w == NULL || w->magic != AW_PACKED_MAGIC) {
        edgert_errf(err, err_len, AW_NAME ": gemm: NULL state or not an " AW_NAME " packed handle");
        return EDGERT_E_USAGE;
    }
    edgert_status ast = pu_check_gemm_args(AW_NAME, w->name, w->n, w->k, args, err, err_len);
    if (ast != EDGERT_OK)
        return ast;

    /* Per-call scratch: activations as the path needs them (rows padded to
     * the prefill kernel's row_pad), plus per (row, group) sums and scales.
     * Bounded by (m + row_pad - 1) * 2 k + m * 8 k / 128 bytes. */
    const edgert_host *host = st->host;
    const int decode = args->m <= AW_DECODE_MAX_M;
    const edgert_range_fn prep = decode ? st->kern.decode_prep : st->kern.prefill_prep;
    const edgert_range_fn gemm = decode ? st->kern.decode_gemm : st->kern.prefill_gemm;
    const size_t pad = decode ? 1u : st->kern.row_pad;
    const size_t rows = ((size_t)args->m + pad - 1u) / pad * pad;
    size_t row_bytes = st->path == AW_PATH_FMA ? 0u : aw_round64((size_t)w->k * 2u);
    size_t mg = (size_t)args->m * w->groups, act_bytes, sums_bytes, total;
    if (pu_mul(row_bytes, rows, &act_bytes) != 0 ||
        pu_mul(mg, 2u * sizeof(float), &sums_bytes) != 0 ||
        pu_add(act_bytes, aw_round64(sums_bytes), &total) != 0) {
        edgert_errf(err, err_len, AW_NAME ": gemm on '%s' [m=%u]: scratch size overflows size_t",
                    w->name, (unsigned)args->m);
        return EDGERT_E_NOMEM;
    }
    uint8_t *scratch = host->alloc(host->host_ctx, total, AW_ALIGN);
    if (scratch == NULL) {
        edgert_errf(err, err_len, AW_NAME ": gemm on '%s' [m=%u n=%u k=%u]: cannot allocate %zu bytes "
                             "of activation scratch",
               w->name, (unsigned)args->m, (unsigned)w->n, (unsigned)w->k, total);
        return EDGERT_E_NOMEM;
    }
    if (rows > args->m) /* padding rows: zeros, computed but never stored */
        memset(scratch + (size_t)args->m * row_bytes, 0, (rows - args->m) * row_bytes);
    aw_job job = {
        .w = w, .m = args->m, .x = args->x, .ldx = args->ldx, .y = args->y, .ldy = args->ldy,
        .act = row_bytes != 0u ? scratch : NULL, .act_row_bytes = row_bytes,
        .gsum = (float *)(void *)(scratch + act_bytes),
        .gscale = (float *)(void *)(scratch + act_bytes) + mg,
    };

    /* prep is O(m k): run it on the caller for small m */
    if (args->m <= 8u)
        prep(&job, 0, args->m, 0);
    else
        host->parallel_for(host->host_ctx, args->m, 4u, prep, &job);

    if (decode) {
        /* about 64 KiB of codes per chunk at least: the hand-off costs
         * microseconds, streaming 64 KiB about as much */
        size_t grain = (64u * 1024u + w->panel_bytes - 1u) / w->panel_bytes;
        host->parallel_for(host->host_ctx, w->panels, grain, gemm, &job);
    } else {
        size_t items = (w->panels + st->kern.prefill_pb - 1u) / st->kern.prefill_pb;
        host->parallel_for(host->host_ctx, items, 1u, gemm, &job);
    }
    host->free(host->host_ctx, scratch);
    return EDGERT_OK;
}

/* ---- self-test --------------------------------------------------------------------- */

/*
 * Error bound of one output of `path` against the exact (double) sum, given
 * per input k: x_k, w_k = s (q - z), and the group maxima of |x|:
 *   activation rounding: bf16 2^-8 sum|x w| (8 significant bits, round to
 *     nearest); int16 sum_g 2^-13 max_g|x| sum_{k in g} |w_k|; fma none;
 *   scale stored with 20 significant bits: 2^-20 sum|x w| (2^-19 below);
 *   fp32 accumulation, including the zero-point correction whose two terms
 *   each reach 15 |x| |s| per input: 2^-14 * sum 15 |x s|.
 * Shared by the self-test and (in the same form) tests/test_avx512_w4a16.c.
 */
static double aw_bound(aw_path path, uint32_t m, double sum_xw, double sum_act, double sum_xs15)
{
    if (path == AW_PATH_AMX) /* int16 GEMV in decode, bf16 tiles in prefill */
        path = m <= AW_DECODE_MAX_M ? AW_PATH_INT16 : AW_PATH_BF16;
    double act = path == AW_PATH_BF16 ? ldexp(sum_xw, -8) : path == AW_PATH_INT16 ? sum_act : 0.0;
    return act + ldexp(sum_xs15, -14) + ldexp(sum_xw, -19) + 1e-30;
}

typedef struct aw_case {
    uint32_t m, n, k;
    int symmetric;
} aw_case;

/* decode (m <= 4) and prefill (m > 4) kernels, panel tails (n % 16), a
 * partial block of 3 panels, row tiles with tails; m = 40 and n = 87 (6
 * panels) give path amx two row blocks, the second partial, and an item of
 * 2 panels after a full one of 4 */
static const aw_case aw_cases[] = {
    {1u, 37u, 256u, 0}, {3u, 20u, 128u, 1}, {7u, 37u, 256u, 0}, {10u, 50u, 128u, 0},
    {40u, 87u, 256u, 0},
};

static edgert_status aw_self_test_case(aw_state *st, const aw_case *tc, uint32_t seed, char *err,
                                       size_t err_len)
{
    const edgert_host *host = st->host;
    const size_t stride = tc->k / 2u, groups = tc->k / AW_GROUP;
    const size_t ldx = tc->k + 3u, ldy = tc->n + 2u;
    const float sentinel = -12345.0f;
    size_t codes_b = tc->n * stride, ng = tc->n * groups;
    size_t bytes = codes_b + ng * (sizeof(float) + 1u) + (tc->m * ldx + tc->m * ldy) * sizeof(float);
    void *packed = NULL;
    size_t packed_bytes = 0u;
    edgert_status rc;

    uint8_t *mem = host->alloc(host->host_ctx, bytes + 64u, AW_ALIGN);
    if (mem == NULL) {
        edgert_errf(err, err_len, AW_NAME ": self-test: cannot allocate %zu bytes", bytes);
        return EDGERT_E_NOMEM;
    }
    float *x = (float *)(void *)mem;
    float *y = x + tc->m * ldx;
    float *scales = y + tc->m * ldy;
    uint8_t *codes = (uint8_t *)(scales + ng);
    uint8_t *zeros = codes + codes_b;

    pu_selftest_fill(&seed, codes, codes_b, scales, zeros, ng, x, tc->m * ldx);
    for (size_t i = 0; i < tc->m * ldy; i++)
        y[i] = sentinel;

    edgert_qweights qw = {
        .struct_size = sizeof(edgert_qweights), .n = tc->n, .k = tc->k, .group = AW_GROUP,
        .codes = codes, .scales = scales, .zeros = tc->symmetric ? NULL : zeros,
        .name = "self-test",
    };
    rc = aw_pack(st, &qw, &packed, &packed_bytes, err, err_len);
    if (rc != EDGERT_OK)
        goto out;
    edgert_gemm_args ga = {
        .struct_size = sizeof(edgert_gemm_args), .m = tc->m, .x = x, .ldx = ldx, .y = y,
        .ldy = ldy,
    };
    rc = aw_gemm(st, packed, &ga, err, err_len);
    if (rc != EDGERT_OK)
        goto out;

    for (size_t i = 0; i < tc->m; i++) {
        for (size_t r = 0; r < ldy; r++) {
            float got = y[i * ldy + r];
            if (r >= tc->n) {
                if (got != sentinel) {
                    edgert_errf(err, err_len,
                                AW_NAME ": self-test (path %s) m=%u n=%u k=%u: y[%zu][%zu] beyond n "
                                   "was written",
                           aw_paths[st->path].name, (unsigned)tc->m, (unsigned)tc->n,
                           (unsigned)tc->k, i, r);
                    rc = EDGERT_E_PLUGIN;
                    goto out;
                }
                continue;
            }
            double acc = 0.0, sum_xw = 0.0, sum_act = 0.0, sum_xs15 = 0.0;
            for (size_t g = 0; g < groups; g++) {
                double mx = 0.0, sw = 0.0;
                for (size_t c = g * AW_GROUP; c < (g + 1u) * AW_GROUP; c++)
                    if (aw_absd(x[i * ldx + c]) > mx)
                        mx = aw_absd(x[i * ldx + c]);
                for (size_t c = g * AW_GROUP; c < (g + 1u) * AW_GROUP; c++) {
                    unsigned b = codes[r * stride + c / 2u];
                    int q = (int)((c % 2u) ? (b >> 4) : (b & 15u));
                    int z = tc->symmetric ? 8 : (int)zeros[r * groups + g];
                    double s = scales[r * groups + g];
                    double wv = s * (double)(q - z), xv = x[i * ldx + c];
                    acc += xv * wv;
                    sum_xw += aw_absd(xv * wv);
                    sw += aw_absd(wv);
                    sum_xs15 += 15.0 * aw_absd(xv * s);
                }
                sum_act += ldexp(mx, -13) * sw;
            }
            double tol = aw_bound(st->path, tc->m, sum_xw, sum_act, sum_xs15);
            if (!(aw_absd((double)got - acc) <= tol)) { /* also catches NaN */
                edgert_errf(err, err_len,
                            AW_NAME ": self-test (path %s) m=%u n=%u k=%u: y[%zu][%zu] = %.9g but the "
                               "scalar loop gives %.9g (|err| %.3g > bound %.3g)",
                       aw_paths[st->path].name, (unsigned)tc->m, (unsigned)tc->n, (unsigned)tc->k,
                       i, r, (double)got, acc, aw_absd((double)got - acc), tol);
                rc = EDGERT_E_PLUGIN;
                goto out;
            }
        }
    }
    rc = EDGERT_OK;
out:
    aw_packed_free(st, packed);
    host->free(host->host_ctx, mem);
    return rc;
}

static edgert_status aw_self_test(void *state, char *err, size_t err_len)
{
    aw_state *st = state;
    if (st == NULL) {
        edgert_errf(err, err_len, AW_NAME ": self-test: state is NULL");
        return EDGERT_E_USAGE;
    }
    for (size_t i = 0; i < sizeof aw_cases / sizeof aw_cases[0]; i++) {
        edgert_status rc =
            aw_self_test_case(st, &aw_cases[i], 0x9E3779B9u + (uint32_t)i, err, err_len);
        if (rc != EDGERT_OK)
            return rc;
    }
    return EDGERT_OK;
}

/* ---- descriptor and entry ----------------------------------------------------------- */

static const edgert_plugin aw_plugin_v1 = {
    .struct_size = sizeof(edgert_plugin),
    .abi_version = 1u,
    .name = AW_NAME,
    .version = AW_VERSION,
    .caps = EDGERT_CAP_GEMM,
    .init = aw_init,
    .fini = aw_fini,
    .self_test = aw_self_test,
    .describe = aw_describe,
    .pack = aw_pack,
    .packed_free = aw_packed_free,
    .gemm = aw_gemm,
    .export_graph = NULL,
};

EDGERT_PLUGIN_EXPORT edgert_status edgert_plugin_entry(uint32_t abi_min, uint32_t abi_max,
                                                       const edgert_host *host,
                                                       const edgert_plugin **out, char *err,
                                                       size_t err_len)
{
    (void)host; /* the instance gets the host table again in init() */
    static const edgert_plugin *const by_abi[] = {&aw_plugin_v1}; /* ABI 1 */
    return edgert_plugin_negotiate(abi_min, abi_max, by_abi, AW_NAME, out, err, err_len);
}
