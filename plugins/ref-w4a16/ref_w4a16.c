/*
 * plugins/ref-w4a16/ref_w4a16.c — the portable reference backend.
 *
 * Plain C, no intrinsics, no dependency on the core: everything it needs
 * comes through the edgert_host table (plugin.h). It exists for two reasons:
 * it is the oracle the tuned backends are checked against, and it is the
 * last-resort fallback that runs on any CPU.
 *
 * Packed form (one host allocation): the in-memory ref_packed header, then,
 * from the next 64-byte boundary, the position-independent packed bytes
 * (layout "ref-w4a16/1", what packed_data returns and packed_map takes):
 *   pk_blob_header (128 bytes: magic, version, n, k, group, sections)
 *   | codes [n][(k+1)/2] (canonical, copied as is)
 *   | scales fp32 [n][groups] | zeros u8 [n][groups]
 * each section on a 64-byte boundary, the gaps zero. Zero points are always
 * stored (8 when the input is symmetric), so one code path serves both.
 * packed_bytes is the size of that allocation:
 *   round64(sizeof ref_packed) + 128 + round64(n * ((k+1)/2))
 *   + round64(4 * n * groups) + n * groups
 * i.e. 4 + 40 / group bits per weight plus fixed headers (4.3125 at g128).
 * packed_map (plugin ABI 2) checks the header against the shape and the size,
 * and every zero point, then points a small ref_packed at the caller's bytes.
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
#define REF_PACKED_MAGIC 0x34775266u /* "fRw4": the in-memory handle */
#define REF_BLOB_MAGIC 0x50775266u   /* "fRwP": the packed bytes */
#define REF_LAYOUT_VERSION 1u        /* change with the meaning of the bytes ... */
#define REF_LAYOUT REF_NAME "/1"     /* ... and this id with it */

/* The packed bytes' layout (plugin_kit.h, pk_blob_header). */
static const pk_blob_id ref_blob = {
    REF_NAME, REF_LAYOUT, REF_BLOB_MAGIC, REF_LAYOUT_VERSION, 3u, {"codes", "scales", "zeros"},
};

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
    const void *blob;    /* the packed bytes (pk_blob_header first) */
    size_t blob_bytes;
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

/* The header of the packed bytes of a tensor [n, k, group]: codes
 * [n][(k+1)/2], scales fp32 [n][groups], zeros u8 [n][groups]. pack and
 * packed_map both derive it from the shape. 0, or -1 when a size overflows. */
static int ref_layout(uint32_t n, uint32_t k, uint32_t group, uint32_t flags, pk_blob_header *h)
{
    size_t bytes[3], ng;
    if (pk_mul((size_t)n, ((size_t)k + 1u) / 2u, &bytes[0]) != 0 ||
        pk_mul((size_t)n, pk_groups(k, group), &ng) != 0 ||
        pk_mul(ng, sizeof(float), &bytes[1]) != 0)
        return -1;
    bytes[2] = ng;
    return pk_blob_layout(&ref_blob, n, k, group, flags, bytes, h);
}

/* A handle over checked packed bytes (`blob`, described by `h`). */
static void ref_handle(ref_packed *p, const pk_blob_header *h, const void *blob, const char *name)
{
    memset(p, 0, sizeof *p);
    p->magic = REF_PACKED_MAGIC;
    p->n = h->n;
    p->k = h->k;
    p->group = h->group;
    p->groups = pk_groups(h->k, h->group);
    p->stride = ((size_t)h->k + 1u) / 2u;
    p->codes = pk_blob_at(blob, h, 0);
    p->scales = (const float *)(const void *)pk_blob_at(blob, h, 1);
    p->zeros = pk_blob_at(blob, h, 2);
    p->blob = blob;
    p->blob_bytes = (size_t)h->total;
    snprintf(p->name, sizeof p->name, "%s", name);
}

static edgert_status ref_pack(void *state, const edgert_qweights *w, void **packed,
                              size_t *packed_bytes, char *err, size_t err_len)
{
    /* any group size, partial last groups: the canonical form as it is */
    static const pk_layout_needs needs = {"int4-asym", 0u, 0, 0};
    ref_state *st = state;
    const char *name = NULL;
    pk_blob_header h;
    size_t off, total;

    edgert_status rc = pk_check_pack(REF_NAME, st, w, packed, packed_bytes, &needs, &name, err,
                                     err_len);
    if (rc != EDGERT_OK)
        return rc;
    if (ref_layout(w->n, w->k, w->group, w->zeros == NULL ? PK_BLOB_SYMMETRIC : 0u, &h) != 0 ||
        pk_round_up(sizeof(ref_packed), REF_ALIGN, &off) != 0 ||
        pk_add(off, (size_t)h.total, &total) != 0) {
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

    unsigned char *blob = mem + off;
    pk_blob_write_header(blob, &h);
    memcpy(blob + h.section[0].offset, w->codes, (size_t)h.section[0].bytes);
    memcpy(blob + h.section[1].offset, w->scales, (size_t)h.section[1].bytes);
    if (w->zeros != NULL)
        memcpy(blob + h.section[2].offset, w->zeros, (size_t)h.section[2].bytes);
    else
        memset(blob + h.section[2].offset, 8, (size_t)h.section[2].bytes);

    ref_packed *p = (ref_packed *)(void *)mem;
    ref_handle(p, &h, blob, name);
    *packed = p;
    *packed_bytes = total;
    return EDGERT_OK;
}

/* ---- mappable packed bytes (plugin ABI 2) ---------------------------------- */

static edgert_status ref_packed_data(void *state, const void *packed, const void **data,
                                     size_t *size, char *err, size_t err_len)
{
    const ref_packed *p = packed;
    const int ok = p != NULL && p->magic == REF_PACKED_MAGIC;
    return pk_packed_data(REF_NAME, state, ok, ok ? p->blob : NULL, ok ? p->blob_bytes : 0u,
                          data, size, err, err_len);
}

static edgert_status ref_packed_map(void *state, const edgert_qweights *shape, const void *data,
                                    size_t size, void **packed, char *err, size_t err_len)
{
    static const pk_layout_needs needs = {"int4-asym", 0u, 0, 0};
    ref_state *st = state;
    const char *name = NULL;
    pk_blob_header expect, h;

    edgert_status rc = pk_check_map(&ref_blob, st, shape, data, size, packed, &needs, &name, err,
                                    err_len);
    if (rc != EDGERT_OK)
        return rc;
    if (ref_layout(shape->n, shape->k, shape->group, 0u, &expect) != 0) {
        edgert_errf(err, err_len,
                    REF_NAME ": map '%s' [n=%u k=%u group=%u]: the packed size overflows size_t",
                    name, (unsigned)shape->n, (unsigned)shape->k, (unsigned)shape->group);
        return EDGERT_E_UNSUPPORTED;
    }
    rc = pk_blob_check(&ref_blob, name, data, size, &expect, &h, err, err_len);
    if (rc == EDGERT_OK)
        rc = pk_blob_check_zeros(&ref_blob, name, pk_blob_at(data, &h, 2),
                                 (size_t)h.section[2].bytes, err, err_len);
    if (rc != EDGERT_OK)
        return rc;
    const edgert_host *host = st->host;
    ref_packed *p = host->alloc(host->host_ctx, sizeof *p, REF_ALIGN);
    if (p == NULL) {
        edgert_errf(err, err_len, REF_NAME ": map '%s': cannot allocate %zu bytes of header",
                    name, sizeof *p);
        return EDGERT_E_NOMEM;
    }
    ref_handle(p, &h, data, name);
    *packed = p;
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
        .packed_data = ref_packed_data, .packed_map = ref_packed_map,
    };
    return pk_run_self_test(&t, err, err_len);
}

/* ---- descriptor and entry ----------------------------------------------------- */

/* ABI 1 and 2 share every ABI-1 field; ABI 2 adds the mappable packed form. */
#define REF_DESCRIPTOR_V1(abi)                                                                  \
    .struct_size = sizeof(edgert_plugin), .abi_version = (abi), .name = REF_NAME,               \
    .version = REF_VERSION, .caps = EDGERT_CAP_GEMM, .init = ref_init, .fini = pk_fini,         \
    .self_test = ref_self_test, .describe = ref_describe, .pack = ref_pack,                     \
    .packed_free = pk_packed_free, .gemm = ref_gemm, .export_graph = NULL

static const edgert_plugin ref_plugin_v1 = {REF_DESCRIPTOR_V1(1u)};

static const edgert_plugin ref_plugin_v2 = {
    REF_DESCRIPTOR_V1(2u),
    .packed_flags = EDGERT_PACKED_MAPPABLE,
    .packed_layout = REF_LAYOUT,
    .packed_data = ref_packed_data,
    .packed_map = ref_packed_map,
};

EDGERT_PLUGIN_EXPORT edgert_status edgert_plugin_entry(uint32_t abi_min, uint32_t abi_max,
                                                       const edgert_host *host,
                                                       const edgert_plugin **out, char *err,
                                                       size_t err_len)
{
    (void)host; /* the instance gets the host table again in init() */
    static const edgert_plugin *const by_abi[] = {&ref_plugin_v1, &ref_plugin_v2}; /* ABI 1, 2 */
    return EDGERT_PLUGIN_NEGOTIATE(abi_min, abi_max, by_abi, REF_NAME, out, err, err_len);
}
