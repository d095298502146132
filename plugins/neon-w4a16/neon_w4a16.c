/*
 * plugins/neon-w4a16/neon_w4a16.c — int4 weights (scale and zero point per
 * row and group of 128) x fp16 activations on ARM64, fp32 accumulation.
 *
 * This file is the entry, the dispatch, the packing and the activation
 * preparation. It is compiled for baseline ARMv8-A (-march=armv8-a) and
 * executes no instruction beyond it: it can be loaded and init'ed on any
 * ARM64 CPU. Each code path lives in its own file, compiled with exactly the
 * extension it uses, and is reached only after init found that extension in
 * host->cpu_flags (what the core's probe read from AT_HWCAP/AT_HWCAP2):
 *
 *   path=neon     nw_kern_neon.c  Advanced SIMD only (asimd): codes
 *                 dequantized to fp32 q - z, FMLA into fp32. The base path.
 *   path=bf16     nw_kern_bf16.c  BFMMLA (bf16). Each fp16 activation is an
 *                 exact sum of two bf16 numbers, so nothing is rounded to bf16.
 *   path=dotprod  nw_kern_dot.c   SDOT/UDOT (asimddp) on the activations put
 *                 on a per-(row, group) int16 grid and split in two int8
 *                 halves; exact int32 sums per group.
 *   path=i8mm     nw_kern_i8mm.c  SMMLA/UMMLA (i8mm): the dotprod arithmetic,
 *                 two rows of x per instruction.
 *   path=auto     (default; also NULL or "") the first of i8mm, dotprod,
 *                 bf16, neon whose flag the host has.
 *
 * Options: "path=<auto|neon|bf16|dotprod|i8mm>" (blanks around it allowed).
 * Anything else is EDGERT_E_USAGE; a path whose CPU flag the host lacks is
 * EDGERT_E_UNSUPPORTED, naming the flag.
 *
 * Activations (every path): x arrives as fp32 and is rounded to fp16 (round
 * to nearest even, saturated to +-65504), the backend's declared activation
 * type. neon and bf16 then compute sum x16 * (q - z) * s with exact products
 * and fp32 sums. dotprod and i8mm use the fp16 values on an int16 grid per
 * (row, group of 128): v = round(x16 / 2^E), E = floor(log2 max|x16|) - 14;
 * values within 4 binades of the group's largest are exact on that grid,
 * smaller ones move by at most 2^(E-1) <= max|x16| * 2^-15. A group holding
 * a NaN gives NaN outputs on every path.
 *
 * Weights: the canonical form (edgert_qweights) with groups of 32, 64 or 128
 * (the manifest's group_sizes), K a multiple of the group; zero points are
 * kept as given (symmetric input: 8). The packed layout is described in
 * nw_kern.h (4.3125 bits per weight at group 128); packing, and mapping
 * packed bytes back (plugin ABI 2), are nw_pack.c.
 *
 * Memory. pack: the packed allocation only; it is written panel by panel
 * straight from the canonical codes, no transient buffer (peak = canonical
 * input + packed output). gemm: one transient allocation per call for the
 * prepared activations, the size of the fp32 x the caller passed or less:
 * neon and bf16 4 m k bytes, dotprod and i8mm 2 m k (+ 4 k for an odd m)
 * + 8 bytes per (row, group), plus at most 4 x 64 bytes of alignment; and a
 * per-task stack tile of at most 2 KiB.
 *
 * Threads: gemm and pack split the panels of 4 output rows over
 * host->parallel_for; nothing is indexed by `worker`. No global mutable
 * state: the descriptor, strings and tables are const; an instance is an
 * nw_state allocated through host->alloc.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "edgert/plugin.h"
#include "edgert/version.h"
#include "nw_kern.h"
#include "plugin_kit.h"

#define NW_VERSION EDGERT_VERSION_STRING /* in-tree plugins version with edgert */
#define NW_FP16_MAX 65504.0f

typedef enum nw_path { NW_PATH_NEON = 0, NW_PATH_BF16, NW_PATH_DOTPROD, NW_PATH_I8MM } nw_path;

typedef struct nw_path_info {
    const char *name;
    edgert_cpu_flag flag; /* the flag the path needs besides asimd */
    const char *flag_name;
    nw_kernel_fn kernel;
    const char *describe;
} nw_path_info;

static const nw_path_info nw_paths[] = {
    [NW_PATH_NEON] = {"neon", EDGERT_CPU_ASIMD, "asimd", nw_kern_neon,
                      "neon (base path): fp16 activations, int4 dequantized to fp32, FMLA, fp32 "
                      "accumulation"},
    [NW_PATH_BF16] = {"bf16", EDGERT_CPU_BF16, "bf16", nw_kern_bf16,
                      "bf16: fp16 activations as exact bf16 hi+lo pairs, BFMMLA, fp32 "
                      "accumulation"},
    [NW_PATH_DOTPROD] = {"dotprod", EDGERT_CPU_ASIMDDP, "asimddp", nw_kern_dotprod,
                         "dotprod: fp16 activations on a per-group int16 grid split in int8 "
                         "halves, SDOT/UDOT exact in int32, fp32 accumulation"},
    [NW_PATH_I8MM] = {"i8mm", EDGERT_CPU_I8MM, "i8mm", nw_kern_i8mm,
                      "i8mm: fp16 activations on a per-group int16 grid split in int8 halves, "
                      "SMMLA/UMMLA exact in int32, fp32 accumulation"},
};
#define NW_PATH_COUNT (sizeof nw_paths / sizeof nw_paths[0])

typedef struct nw_state {
    const edgert_host *host; /* first: pk_fini, pk_packed_free and nw_pack.c find it */
    nw_path path;
} nw_state;

/* ---- small helpers -------------------------------------------------------- */

/* Append an aligned section of `bytes` at *off; its offset in *at. */
static int nw_section(size_t *off, size_t bytes, size_t *at)
{
    if (pk_round_up(*off, NW_ALIGN, at) != 0 || pk_add(*at, bytes, off) != 0)
        return -1;
    return 0;
}

static int nw_has(const edgert_host *host, edgert_cpu_flag f)
{
    return EDGERT_HAS_FLAG(host->cpu_flags, f) != 0;
}

/* ---- activations ------------------------------------------------------------ */

/* x rounded to fp16 (nearest even), saturated to the fp16 range; NaN stays NaN. */
static inline float nw_fp16(float v)
{
    if (v > NW_FP16_MAX)
        v = NW_FP16_MAX;
    else if (v < -NW_FP16_MAX)
        v = -NW_FP16_MAX;
    return (float)(__fp16)v;
}

static inline uint32_t nw_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static inline float nw_from_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* The int16 grid of one group of fp16 values: v[i] = round(x16[i] / 2^E),
 * *fe = 2^E, returns sum v. E = floor(log2 max|x16|) - 14 so |v| < 2^15
 * (clamped all the same). An all-zero group has E = 0; a NaN makes *fe NaN. */
static int32_t nw_grid(const float *x16, size_t len, int16_t *v, float *fe)
{
    float mx = 0.0f;
    int nan = 0;
    for (size_t i = 0; i < len; i++) {
        float a = fabsf(x16[i]);
        if (a != a)
            nan = 1;
        else if (a > mx)
            mx = a;
    }
    int e = 0;
    if (mx > 0.0f) {
        (void)frexpf(mx, &e); /* mx = f 2^e, f in [0.5, 1): floor(log2 mx) = e - 1 */
        e = e - 1 - 14;
    }
    const float inv = ldexpf(1.0f, -e);
    int32_t sum = 0;
    for (size_t i = 0; i < len; i++) {
        float q = x16[i] != x16[i] ? 0.0f : rintf(x16[i] * inv);
        long iv = (long)q;
        if (iv > 32767)
            iv = 32767;
        else if (iv < -32768)
            iv = -32768;
        v[i] = (int16_t)iv;
        sum += (int32_t)iv;
    }
    *fe = nan ? NAN : ldexpf(1.0f, e);
    return sum;
}

/* Bytes of the prepared activations for `path`, m rows of k; -1 on overflow.
 * Offsets of the sections in *o (indices as used by nw_prepare). */
typedef struct nw_act_layout {
    size_t xf, xb, xh, xl, xp, sv, fe, total;
} nw_act_layout;

static int nw_act_size(nw_path path, uint32_t m, uint32_t k, uint32_t group, nw_act_layout *o)
{
    size_t mk, mg, off = 0, b;
    const size_t groups = k / group, pairs = ((size_t)m + 1u) / 2u;

    memset(o, 0, sizeof *o);
    if (pk_mul(m, k, &mk) != 0 || pk_mul(m, groups, &mg) != 0)
        return -1;
    switch (path) {
    case NW_PATH_NEON:
        if (pk_mul(mk, sizeof(float), &b) != 0 || nw_section(&off, b, &o->xf) != 0)
            return -1;
        break;
    case NW_PATH_BF16:
        if (pk_mul(mk, 2u * sizeof(uint16_t), &b) != 0 || nw_section(&off, b, &o->xb) != 0)
            return -1;
        break;
    case NW_PATH_DOTPROD:
        if (nw_section(&off, mk, &o->xh) != 0 || nw_section(&off, mk, &o->xl) != 0)
            return -1;
        break;
    case NW_PATH_I8MM:
        if (pk_mul(pairs, (size_t)k * 4u, &b) != 0 || nw_section(&off, b, &o->xp) != 0)
            return -1;
        break;
    }
    if ((path == NW_PATH_DOTPROD || path == NW_PATH_I8MM) &&
        (nw_section(&off, mg * sizeof(int32_t), &o->sv) != 0 ||
         nw_section(&off, mg * sizeof(float), &o->fe) != 0))
        return -1;
    o->total = off;
    return 0;
}

/* Fill the prepared activations of `path` into mem (laid out by *o), the
 * int16 grids per weight group of G inputs. */
static void nw_prepare(nw_path path, const edgert_gemm_args *args, uint32_t k, uint32_t G,
                       const nw_act_layout *o, unsigned char *mem, nw_act *a)
{
    const size_t groups = k / G;
    const uint32_t m = args->m;

    memset(a, 0, sizeof *a);
    a->m = m;
    a->xf = (const float *)(const void *)(mem + o->xf);
    a->xb = (const uint16_t *)(const void *)(mem + o->xb);
    a->xh = (const int8_t *)(const void *)(mem + o->xh);
    a->xl = mem + o->xl;
    a->xp = mem + o->xp;
    a->sv = (const int32_t *)(const void *)(mem + o->sv);
    a->fe = (const float *)(const void *)(mem + o->fe);

    if (path == NW_PATH_I8MM && (m & 1u)) /* the odd last row's partner: zeros */
        memset(mem + o->xp + ((size_t)m / 2u) * k * 4u, 0, (size_t)k * 4u);

    for (uint32_t i = 0; i < m; i++) {
        const float *x = args->x + (size_t)i * args->ldx;
        for (size_t g = 0; g < groups; g++) {
            float x16[NW_G];
            for (size_t c = 0; c < G; c++)
                x16[c] = nw_fp16(x[g * G + c]);

            if (path == NW_PATH_NEON) {
                memcpy((float *)(void *)(mem + o->xf) + (size_t)i * k + g * G, x16,
                       G * sizeof x16[0]);
            } else if (path == NW_PATH_BF16) {
                /* per k-quad: 4 x hi, then 4 x lo; hi + lo == x16 exactly */
                uint16_t *xb = (uint16_t *)(void *)(mem + o->xb) + ((size_t)i * k + g * G) * 2u;
                for (size_t c = 0; c < G; c++) {
                    uint32_t hb = nw_bits(x16[c]) & 0xffff0000u;
                    float lo = x16[c] - nw_from_bits(hb);
                    xb[(c / 4u) * 8u + c % 4u] = (uint16_t)(hb >> 16);
                    xb[(c / 4u) * 8u + 4u + c % 4u] = (uint16_t)(nw_bits(lo) >> 16);
                }
            } else {
                int16_t v[NW_G];
                float fe;
                int32_t sv = nw_grid(x16, G, v, &fe);
                ((int32_t *)(void *)(mem + o->sv))[(size_t)i * groups + g] = sv;
                ((float *)(void *)(mem + o->fe))[(size_t)i * groups + g] = fe;
                if (path == NW_PATH_DOTPROD) {
                    int8_t *xh = (int8_t *)(void *)(mem + o->xh) + (size_t)i * k + g * G;
                    uint8_t *xl = mem + o->xl + (size_t)i * k + g * G;
                    for (size_t c = 0; c < G; c++) {
                        xh[c] = (int8_t)(v[c] >> 8); /* arithmetic shift: floor */
                        xl[c] = (uint8_t)(v[c] & 0xff);
                    }
                } else {
                    /* pair i / 2, slot i % 2; blocks of 8 columns */
                    uint8_t *xp =
                        mem + o->xp + ((size_t)(i / 2u) * (k / 8u) + g * (G / 8u)) * 32u;
                    for (size_t c = 0; c < G; c++) {
                        uint8_t *blk = xp + (c / 8u) * 32u + (i % 2u) * 8u + c % 8u;
                        blk[0] = (uint8_t)(int8_t)(v[c] >> 8);
                        blk[16] = (uint8_t)(v[c] & 0xff);
                    }
                }
            }
        }
    }
}

/* ---- plugin functions ------------------------------------------------------ */

/* "path=<name>" with optional blanks around; *out on success. */
static edgert_status nw_parse_options(const edgert_host *host, const char *options, nw_path *out,
                                      char *err, size_t err_len)
{
    char name[16];
    const char *s = options, *e;
    int autop = 0;

    if (s == NULL)
        s = "";
    while (*s == ' ' || *s == '\t')
        s++;
    e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    if (s == e) {
        autop = 1;
    } else {
        if ((size_t)(e - s) < 5u || strncmp(s, "path=", 5) != 0 ||
            (size_t)(e - s - 5) >= sizeof name) {
            edgert_errf(err, err_len,
                        NW_NAME
                        ": init: unknown option '%s' (accepted: path=auto|neon|bf16|dotprod|i8mm)",
                        options);
            return EDGERT_E_USAGE;
        }
        memcpy(name, s + 5, (size_t)(e - s - 5));
        name[e - s - 5] = '\0';
        if (strcmp(name, "auto") == 0)
            autop = 1;
    }

    if (!nw_has(host, EDGERT_CPU_ASIMD)) {
        edgert_errf(err, err_len,
                    NW_NAME
                    ": init: this CPU lacks the CPU flag asimd (Advanced SIMD), which every "
                    "path needs");
        return EDGERT_E_UNSUPPORTED;
    }
    if (autop) {
        static const nw_path order[] = {NW_PATH_I8MM, NW_PATH_DOTPROD, NW_PATH_BF16, NW_PATH_NEON};
        for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
            if (nw_has(host, nw_paths[order[i]].flag)) {
                *out = order[i];
                return EDGERT_OK;
            }
        }
        *out = NW_PATH_NEON;
        return EDGERT_OK;
    }
    for (size_t i = 0; i < NW_PATH_COUNT; i++) {
        if (strcmp(name, nw_paths[i].name) != 0)
            continue;
        if (!nw_has(host, nw_paths[i].flag)) {
            edgert_errf(err, err_len,
                        NW_NAME ": init: path=%s needs the CPU flag %s, which this CPU lacks", name,
                        nw_paths[i].flag_name);
            return EDGERT_E_UNSUPPORTED;
        }
        *out = (nw_path)i;
        return EDGERT_OK;
    }
    edgert_errf(err, err_len,
                NW_NAME ": init: unknown path '%s' in option '%s' (accepted: path=auto|neon|bf16|"
                   "dotprod|i8mm)",
           name, options);
    return EDGERT_E_USAGE;
}

static edgert_status nw_init(const edgert_host *host, const char *options, void **state,
                             char *err, size_t err_len)
{
    edgert_status rc = pk_check_init(NW_NAME, host, state, err, err_len);
    if (rc != EDGERT_OK)
        return rc;
    nw_path path = NW_PATH_NEON;
    rc = nw_parse_options(host, options, &path, err, err_len);
    if (rc != EDGERT_OK)
        return rc;

    nw_state *st = host->alloc(host->host_ctx, sizeof *st, NW_ALIGN);
    if (st == NULL) {
        edgert_errf(err, err_len, NW_NAME ": init: cannot allocate %zu bytes of instance state",
                    sizeof *st);
        return EDGERT_E_NOMEM;
    }
    st->host = host;
    st->path = path;
    *state = st;
    host->log(host->host_ctx, EDGERT_LOG_DEBUG, NW_NAME ": instance ready, path %s (%s)",
              nw_paths[path].name, nw_paths[path].describe);
    return EDGERT_OK;
}

static const char *nw_describe(void *state)
{
    const nw_state *st = state;
    return st != NULL ? nw_paths[st->path].describe : NULL;
}

/* ---- gemm -------------------------------------------------------------------- */

typedef struct nw_run {
    nw_job job;
    nw_kernel_fn kernel;
} nw_run;

static void nw_run_panels(void *arg, size_t begin, size_t end, unsigned worker)
{
    const nw_run *run = arg;
    (void)worker;
    run->kernel(&run->job, begin, end);
}

static edgert_status nw_gemm(void *state, const void *packed, const edgert_gemm_args *args,
                             char *err, size_t err_len)
{
    nw_state *st = state;
    const nw_packed *w = packed;
    size_t per_panel;
    nw_act_layout lay;

    if (st == NULL || w == NULL || w->magic != NW_PACKED_MAGIC) {
        edgert_errf(err, err_len, NW_NAME ": gemm: NULL state or not a " NW_NAME " packed handle");
        return EDGERT_E_USAGE;
    }
    edgert_status ast = pk_check_gemm_args(NW_NAME, w->name, w->n, w->k, args, err, err_len);
    if (ast != EDGERT_OK)
        return ast;
    if (nw_act_size(st->path, args->m, w->k, w->group, &lay) != 0) {
        edgert_errf(err, err_len, NW_NAME ": gemm on '%s' [m=%u n=%u k=%u]: sizes overflow size_t",
                    w->name, (unsigned)args->m, (unsigned)w->n, (unsigned)w->k);
        return EDGERT_E_USAGE;
    }

    const edgert_host *host = st->host;
    unsigned char *mem = host->alloc(host->host_ctx, lay.total, NW_ALIGN);
    if (mem == NULL) {
        edgert_errf(err, err_len,
                    NW_NAME
                    ": gemm on '%s' [m=%u n=%u k=%u]: cannot allocate %zu bytes of prepared "
                    "activations",
                    w->name, (unsigned)args->m, (unsigned)w->n, (unsigned)w->k, lay.total);
        return EDGERT_E_NOMEM;
    }
    nw_act act;
    nw_prepare(st->path, args, w->k, w->group, &lay, mem, &act);

    nw_run run = {
        .job = {.w = w, .a = &act, .y = args->y, .ldy = args->ldy},
        .kernel = nw_paths[st->path].kernel,
    };
    size_t grain = 1u;
    if (pk_mul((size_t)w->k * NW_NR, args->m, &per_panel) == 0 && per_panel < NW_MIN_TASK_MACS)
        grain = (NW_MIN_TASK_MACS + per_panel - 1u) / per_panel;
    host->parallel_for(host->host_ctx, w->panels, grain, nw_run_panels, &run);

    host->free(host->host_ctx, mem);
    return EDGERT_OK;
}

/* ---- self-test ---------------------------------------------------------------- */

/* A partial panel (n = 6, 5, 7), an odd m (the i8mm pair with zeros), two
 * groups, symmetric weights, and groups of 64 and 32 (K not a multiple of
 * 128: 192, 96). */
static const pk_case nw_cases[] = {
    {3u, 6u, 256u, NW_G, 0},
    {2u, 5u, 128u, NW_G, 1},
    {3u, 7u, 192u, 64u, 0},
    {1u, 5u, 96u, 32u, 0},
};

/* x in [-1, 1] from the kit, then one outlier per row (the int16 grid's
 * rounding case) and one value past the fp16 range (saturation). */
static void nw_shape_x(float *x, uint32_t m, uint32_t k, size_t ldx)
{
    for (size_t i = 0; i < m; i++) {
        x[i * ldx + 5u] = 300.0f;
        x[i * ldx + k - 1u] = -70000.0f;
    }
}

/* The activation value a path multiplies with (what nw_prepare encodes):
 * fp16, or fp16 on the per-group int16 grid. */
static void nw_effective_x(const void *state, const float *x, uint32_t k, uint32_t G,
                           double *out)
{
    const nw_path path = ((const nw_state *)state)->path;
    for (uint32_t g = 0; g < k / G; g++) {
        float x16[NW_G] = {0}; /* G <= NW_G, which the compiler cannot see */
        for (uint32_t c = 0; c < G; c++)
            x16[c] = nw_fp16(x[g * G + c]);
        if (path == NW_PATH_NEON || path == NW_PATH_BF16) {
            for (uint32_t c = 0; c < G; c++)
                out[g * G + c] = x16[c];
        } else {
            int16_t v[NW_G];
            float fe;
            (void)nw_grid(x16, G, v, &fe);
            for (uint32_t c = 0; c < G; c++)
                out[g * G + c] = (double)v[c] * fe;
        }
    }
}

/* With the path's own activation values, products and sums are exact in the
 * oracle; left are only the plugin's fp32 sums, well below 2^-16 of
 * sum |x w| for k <= 256. */
static double nw_bound(const void *state, uint32_t m, const pk_sums *s)
{
    (void)state;
    (void)m;
    return s->sum_xw * 0x1p-16 + 1e-30;
}

static edgert_status nw_self_test(void *state, char *err, size_t err_len)
{
    const nw_state *st = state;
    const pk_self_test t = {
        .plugin = NW_NAME, .path = st != NULL ? nw_paths[st->path].name : NULL, .state = state,
        .host = st != NULL ? st->host : NULL, .cases = nw_cases,
        .ncases = sizeof nw_cases / sizeof nw_cases[0], .seed = 0x2545F491u, .pack = nw_pack,
        .packed_free = pk_packed_free, .gemm = nw_gemm, .shape_x = nw_shape_x,
        .effective_x = nw_effective_x, .bound = nw_bound, .packed_data = nw_packed_data,
        .packed_map = nw_packed_map,
    };
    return pk_run_self_test(&t, err, err_len);
}

/* ---- descriptor and entry ----------------------------------------------------- */

/* ABI 1 and 2 share every ABI-1 field; ABI 2 adds the mappable packed form. */
#define NW_DESCRIPTOR_V1(abi)                                                                   \
    .struct_size = sizeof(edgert_plugin), .abi_version = (abi), .name = NW_NAME,                \
    .version = NW_VERSION, .caps = EDGERT_CAP_GEMM, .init = nw_init, .fini = pk_fini,           \
    .self_test = nw_self_test, .describe = nw_describe, .pack = nw_pack,                        \
    .packed_free = pk_packed_free, .gemm = nw_gemm, .export_graph = NULL

static const edgert_plugin nw_plugin_v1 = {NW_DESCRIPTOR_V1(1u)};

static const edgert_plugin nw_plugin_v2 = {
    NW_DESCRIPTOR_V1(2u),
    .packed_flags = EDGERT_PACKED_MAPPABLE,
    .packed_layout = NW_LAYOUT,
    .packed_data = nw_packed_data,
    .packed_map = nw_packed_map,
};

EDGERT_PLUGIN_EXPORT edgert_status edgert_plugin_entry(uint32_t abi_min, uint32_t abi_max,
                                                       const edgert_host *host,
                                                       const edgert_plugin **out, char *err,
                                                       size_t err_len)
{
    (void)host; /* the instance gets the host table again in init() */
    static const edgert_plugin *const by_abi[] = {&nw_plugin_v1, &nw_plugin_v2}; /* ABI 1, 2 */
    return EDGERT_PLUGIN_NEGOTIATE(abi_min, abi_max, by_abi, NW_NAME, out, err, err_len);
}
