/*
 * plugins/ref-w4a16/ref_w4a16.c — the portable reference backend.
 *
 * Plain C, no intrinsics, no dependency on the core: everything it needs
 * comes through the edgert_host table (plugin.h). It exists for two reasons:
 * it is the oracle the tuned backends are checked against, and it is the
 * last-resort fallback that runs on any CPU.
 *
 * Packed form (one host allocation, 64-byte aligned sections):
 *   ref_packed header | codes [n][(k+1)/2] (canonical, copied as is)
 *                     | scales fp32 [n][groups] | zeros u8 [n][groups]
 * Zero points are always stored (8 when the input is symmetric), so one code
 * path serves both. packed_bytes is the size of that allocation:
 *   round64(sizeof header) + round64(n * ((k+1)/2)) + 4 * n * groups + n * groups
 * i.e. 4 + 40 / group bits per weight plus a fixed header (4.3125 at g128).
 *
 * GEMM: y[m][n] = sum_k x[m][k] * s * (q - z), fp32 products and sums.
 * Rows of W are split over the host's parallel_for. Each task takes blocks of
 * REF_ROW_BLOCK rows and walks K in segments of REF_SEG columns: it decodes
 * the segment of every row in the block once (through a 16-entry table per
 * (row, group), so each weight costs one lookup), then dots it with that
 * segment of every row of x, accumulating into y. Every code is decoded once
 * per call whatever m is, and the x segment stays in L1 across the block.
 * Each row's sum is formed in a fixed order independent of threading and
 * strides, so results are reproducible bit for bit.
 *
 * No global mutable state: the descriptor and strings are const; an instance
 * is a ref_state allocated through host->alloc.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "edgert/plugin.h"
#include "edgert/version.h"
#include "plugin_kit.h"

#define REF_NAME "ref-w4a16"
#define REF_VERSION EDGERT_VERSION_STRING /* in-tree plugins version with edgert */
#define REF_DESCRIBE "portable C, fp32 activations"

#define REF_ALIGN 64u
#define REF_ROW_BLOCK 16u  /* rows decoded together: x segment reuse */
#define REF_SEG 256u       /* columns per segment: 16 x 256 floats = 16 KiB on the stack */
#define REF_MIN_TASK_MACS 32768u /* smallest parallel_for chunk worth a hand-off */
#define REF_PACKED_MAGIC 0x34775266u /* "fRw4" */

typedef struct ref_state {
    const edgert_host *host; /* first: pk_fini and pk_packed_free find it */
} ref_state;

typedef struct ref_packed {
    uint32_t magic;
    uint32_t n, k, group;
    size_t groups;       /* per row */
    size_t stride;       /* code bytes per row */
    const uint8_t *codes;
    const float *scales;
    const uint8_t *zeros;
    size_t bytes;        /* the whole allocation, header included */
    char name[64];       /* for error messages; truncated */
} ref_packed;

typedef struct ref_job {
    const ref_packed *w;
    const float *x;
    size_t ldx;
    float *y;
    size_t ldy;
    uint32_t m;
} ref_job;

/* ---- small helpers -------------------------------------------------------- */

/* ---- decoding ---------------------------------------------------------------- */

/* out[0 .. end-c) = table[code of column c .. end-1] of one row's codes. */
static void ref_unpack_lut(const uint8_t *row_codes, size_t c, size_t end, const float *lut,
                           float *out)
{
    if (c < end && (c & 1u)) {
        *out++ = lut[row_codes[c / 2u] >> 4];
        c++;
    }
    for (; c + 1u < end; c += 2u) {
        unsigned b = row_codes[c / 2u];
        out[0] = lut[b & 15u];
        out[1] = lut[b >> 4];
        out += 2;
    }
    if (c < end)
        *out = lut[row_codes[c / 2u] & 15u];
}

/* Dequantize columns [c0, c0 + len) of row `row` into out[0 .. len). */
static void ref_decode(const ref_packed *w, size_t row, size_t c0, size_t len, float *out)
{
    const uint8_t *row_codes = w->codes + row * w->stride;
    const float *row_scales = w->scales + row * w->groups;
    const uint8_t *row_zeros = w->zeros + row * w->groups;
    size_t c = c0, end = c0 + len;

    while (c < end) {
        size_t g = c / w->group;
        size_t gend = (g + 1u) * (size_t)w->group;
        if (gend > end)
            gend = end;
        float s = row_scales[g];
        int z = row_zeros[g];
        float lut[16];
        if (gend - c >= 16u) {
            /* s * (q - z) for every code: the same fp32 expression as
             * edgert_dequantize, so the values are identical */
            for (int q = 0; q < 16; q++)
                lut[q] = s * (float)(q - z);
            ref_unpack_lut(row_codes, c, gend, lut, out + (c - c0));
        } else {
            for (size_t j = c; j < gend; j++) {
                unsigned b = row_codes[j / 2u];
                int q = (int)((j & 1u) ? (b >> 4) : (b & 15u));
                out[j - c0] = s * (float)(q - z);
            }
        }
        c = gend;
    }
}

/* ---- dot products -------------------------------------------------------------- */

/* y[i] += dot(w_i, x) for four rows. Four partial sums per row keep the
 * dependency chains short and let the compiler vectorize across lanes
 * without reassociating anything itself. */
static void ref_dot4(const float *w0, const float *w1, const float *w2, const float *w3,
                     const float *x, size_t len, float *y)
{
    float a0[4] = {0}, a1[4] = {0}, a2[4] = {0}, a3[4] = {0};
    size_t j = 0;

    for (; j + 4u <= len; j += 4u) {
        for (unsigned l = 0; l < 4u; l++) {
            float xv = x[j + l];
            a0[l] += w0[j + l] * xv;
            a1[l] += w1[j + l] * xv;
            a2[l] += w2[j + l] * xv;
            a3[l] += w3[j + l] * xv;
        }
    }
    float s0 = (a0[0] + a0[1]) + (a0[2] + a0[3]);
    float s1 = (a1[0] + a1[1]) + (a1[2] + a1[3]);
    float s2 = (a2[0] + a2[1]) + (a2[2] + a2[3]);
    float s3 = (a3[0] + a3[1]) + (a3[2] + a3[3]);
    for (; j < len; j++) {
        s0 += w0[j] * x[j];
        s1 += w1[j] * x[j];
        s2 += w2[j] * x[j];
        s3 += w3[j] * x[j];
    }
    y[0] += s0;
    y[1] += s1;
    y[2] += s2;
    y[3] += s3;
}

static float ref_dot1(const float *w, const float *x, size_t len)
{
    float a[4] = {0};
    size_t j = 0;

    for (; j + 4u <= len; j += 4u)
        for (unsigned l = 0; l < 4u; l++)
            a[l] += w[j + l] * x[j + l];
    float s = (a[0] + a[1]) + (a[2] + a[3]);
    for (; j < len; j++)
        s += w[j] * x[j];
    return s;
}

/* parallel_for task: rows [begin, end) of W, all m rows of x and y. */
static void ref_gemm_rows(void *arg, size_t begin, size_t end, unsigned worker)
{
    const ref_job *job = arg;
    const ref_packed *w = job->w;
    float buf[REF_ROW_BLOCK][REF_SEG];

    (void)worker;
    for (size_t r0 = begin; r0 < end; r0 += REF_ROW_BLOCK) {
        size_t rows = end - r0 < REF_ROW_BLOCK ? end - r0 : REF_ROW_BLOCK;

        for (size_t i = 0; i < job->m; i++)
            memset(job->y + i * job->ldy + r0, 0, rows * sizeof(float));

        for (size_t c0 = 0; c0 < w->k; c0 += REF_SEG) {
            size_t len = w->k - c0 < REF_SEG ? w->k - c0 : REF_SEG;
            for (size_t r = 0; r < rows; r++)
                ref_decode(w, r0 + r, c0, len, buf[r]);

            for (size_t i = 0; i < job->m; i++) {
                const float *xs = job->x + i * job->ldx + c0;
                float *yr = job->y + i * job->ldy + r0;
                size_t r = 0;
                for (; r + 4u <= rows; r += 4u)
                    ref_dot4(buf[r], buf[r + 1u], buf[r + 2u], buf[r + 3u], xs, len, yr + r);
                for (; r < rows; r++)
                    yr[r] += ref_dot1(buf[r], xs, len);
            }
        }
    }
}

/* ---- plugin functions ------------------------------------------------------ */

static edgert_status ref_init(const edgert_host *host, const char *options, void **state,
                              char *err, size_t err_len)
{
    edgert_status rc = pk_check_init(REF_NAME, host, state, err, err_len);
    if (rc != EDGERT_OK)
        return rc;
    if (options != NULL && options[0] != '\0') {
        edgert_errf(err, err_len, REF_NAME ": init: unknown option '%s' (this backend takes no "
                                  "options)", options);
        return EDGERT_E_USAGE;
    }

    ref_state *st = host->alloc(host->host_ctx, sizeof *st, REF_ALIGN);
    if (st == NULL) {
        edgert_errf(err, err_len, REF_NAME ": init: cannot allocate %zu bytes of instance state",
                    sizeof *st);
        return EDGERT_E_NOMEM;
    }
    st->host = host;
    *state = st;
    host->log(host->host_ctx, EDGERT_LOG_DEBUG, REF_NAME ": instance ready (" REF_DESCRIBE ")");
    return EDGERT_OK;
}

static const char *ref_describe(void *state)
{
    (void)state;
    return REF_DESCRIBE;
}

static edgert_status ref_pack(void *state, const edgert_qweights *w, void **packed,
                              size_t *packed_bytes, char *err, size_t err_len)
{
    /* any group size, partial last groups: the canonical form as it is */
    static const pk_layout_needs needs = {"int4-asym", 0u, 0, 0};
    ref_state *st = state;
    const char *name = NULL;
    size_t stride, groups, ng, off_codes, codes_bytes, off_scales, scales_bytes, off_zeros, total;

    edgert_status rc = pk_check_pack(REF_NAME, st, w, packed, packed_bytes, &needs, &name, err,
                                     err_len);
    if (rc != EDGERT_OK)
        return rc;
    stride = ((size_t)w->k + 1u) / 2u;
    groups = pk_groups(w->k, w->group);
    if (pk_round_up(sizeof(ref_packed), REF_ALIGN, &off_codes) != 0 ||
        pk_mul((size_t)w->n, stride, &codes_bytes) != 0 ||
        pk_add(off_codes, codes_bytes, &off_scales) != 0 ||
        pk_round_up(off_scales, REF_ALIGN, &off_scales) != 0 ||
        pk_mul((size_t)w->n, groups, &ng) != 0 ||
        pk_mul(ng, sizeof(float), &scales_bytes) != 0 ||
        pk_add(off_scales, scales_bytes, &off_zeros) != 0 ||
        pk_add(off_zeros, ng, &total) != 0) {
        edgert_errf(err, err_len,
                REF_NAME ": pack '%s' [n=%u k=%u group=%u]: packed size overflows size_t", name,
                (unsigned)w->n, (unsigned)w->k, (unsigned)w->group);
        return EDGERT_E_NOMEM;
    }
    const edgert_host *host = st->host;
    unsigned char *mem = host->alloc(host->host_ctx, total, REF_ALIGN);
    if (mem == NULL) {
        edgert_errf(err, err_len,
                    REF_NAME ": pack '%s' [n=%u k=%u group=%u]: cannot allocate %zu bytes", name,
                    (unsigned)w->n, (unsigned)w->k, (unsigned)w->group, total);
        return EDGERT_E_NOMEM;
    }

    ref_packed *p = (ref_packed *)(void *)mem;
    uint8_t *codes = mem + off_codes;
    float *scales = (float *)(void *)(mem + off_scales);
    uint8_t *zeros = mem + off_zeros;
    memset(p, 0, sizeof *p);
    memcpy(codes, w->codes, codes_bytes);
    memcpy(scales, w->scales, scales_bytes);
    if (w->zeros != NULL)
        memcpy(zeros, w->zeros, ng);
    else
        memset(zeros, 8, ng);

    p->magic = REF_PACKED_MAGIC;
    p->n = w->n;
    p->k = w->k;
    p->group = w->group;
    p->groups = groups;
    p->stride = stride;
    p->codes = codes;
    p->scales = scales;
    p->zeros = zeros;
    p->bytes = total;
    snprintf(p->name, sizeof p->name, "%s", name);

    *packed = p;
    *packed_bytes = total;
    return EDGERT_OK;
}

static edgert_status ref_gemm(void *state, const void *packed, const edgert_gemm_args *args,
                              char *err, size_t err_len)
{
    ref_state *st = state;
    const ref_packed *w = packed;
    size_t per_row;

    if (st == NULL || w == NULL || w->magic != REF_PACKED_MAGIC) {
        edgert_errf(err, err_len,
                    REF_NAME ": gemm: NULL state or not a " REF_NAME " packed handle");
        return EDGERT_E_USAGE;
    }
    edgert_status ast = pk_check_gemm_args(REF_NAME, w->name, w->n, w->k, args, err, err_len);
    if (ast != EDGERT_OK)
        return ast;

    /* Enough rows per task that one task is >= REF_MIN_TASK_MACS
     * multiply-adds: below that the hand-off costs more than it saves. */
    size_t grain = 4u;
    if (pk_mul((size_t)w->k, (size_t)args->m, &per_row) == 0 && per_row < REF_MIN_TASK_MACS) {
        size_t g = (REF_MIN_TASK_MACS + per_row - 1u) / per_row;
        if (g > grain)
            grain = g;
    }

    ref_job job = {
        .w = w, .x = args->x, .ldx = args->ldx, .y = args->y, .ldy = args->ldy, .m = args->m,
    };
    st->host->parallel_for(st->host->host_ctx, w->n, grain, ref_gemm_rows, &job);
    return EDGERT_OK;
}

/* ---- self-test ---------------------------------------------------------------- */

/* Odd shapes on purpose: odd k (padding nibble), partial last groups, a
 * group smaller than the lookup-table threshold, an odd group (groups that
 * start on a high nibble), k across two segments, n covering a full row
 * block plus the 4-row and 1-row tails. */
static const pk_case ref_cases[] = {
    {3u, 21u, 301u, 32u, 0},
    {2u, 3u, 7u, 4u, 1},
    {1u, 5u, 513u, 128u, 0},
    {2u, 6u, 100u, 19u, 0},
};

/* Against the exact (double) sum: the plugin sums at most ~64 fp32 terms per
 * partial, then a few partials per segment and one add per segment, so its
 * error is below ~100 * 2^-24 * sum|x w|, under 1e-5 * sum|x w| for these k;
 * the 1e-7 absolute term covers sums near 0. */
static double ref_bound(const void *state, uint32_t m, const pk_sums *s)
{
    (void)state;
    (void)m;
    return 1e-5 * s->sum_xw + 1e-7;
}

static edgert_status ref_self_test(void *state, char *err, size_t err_len)
{
    const ref_state *st = state;
    const pk_self_test t = {
        .plugin = REF_NAME, .path = "portable", .state = state,
        .host = st != NULL ? st->host : NULL, .cases = ref_cases,
        .ncases = sizeof ref_cases / sizeof ref_cases[0], .seed = 0x9E3779B9u,
        .pack = ref_pack, .packed_free = pk_packed_free, .gemm = ref_gemm, .bound = ref_bound,
    };
    return pk_run_self_test(&t, err, err_len);
}

/* ---- descriptor and entry ----------------------------------------------------- */

static const edgert_plugin ref_plugin_v1 = {
    .struct_size = sizeof(edgert_plugin),
    .abi_version = 1u,
    .name = REF_NAME,
    .version = REF_VERSION,
    .caps = EDGERT_CAP_GEMM,
    .init = ref_init,
    .fini = pk_fini,
    .self_test = ref_self_test,
    .describe = ref_describe,
    .pack = ref_pack,
    .packed_free = pk_packed_free,
    .gemm = ref_gemm,
    .export_graph = NULL,
};

EDGERT_PLUGIN_EXPORT edgert_status edgert_plugin_entry(uint32_t abi_min, uint32_t abi_max,
                                                       const edgert_host *host,
                                                       const edgert_plugin **out, char *err,
                                                       size_t err_len)
{
    (void)host; /* the instance gets the host table again in init() */
    static const edgert_plugin *const by_abi[] = {&ref_plugin_v1}; /* ABI 1 */
    return EDGERT_PLUGIN_NEGOTIATE(abi_min, abi_max, by_abi, REF_NAME, out, err, err_len);
}
