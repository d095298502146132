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
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "edgert/plugin.h"
#include "plugin_util.h"

#define REF_NAME "ref-w4a16"
#define REF_VERSION "0.1.0"
#define REF_DESCRIBE "portable C, fp32 activations"

#define REF_ALIGN 64u
#define REF_ROW_BLOCK 16u  /* rows decoded together: x segment reuse */
#define REF_SEG 256u       /* columns per segment: 16 x 256 floats = 16 KiB on the stack */
#define REF_MIN_TASK_MACS 32768u /* smallest parallel_for chunk worth a hand-off */
#define REF_PACKED_MAGIC 0x34775266u /* "fRw4" */

typedef struct ref_state {
    const edgert_host *host;
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

static const char *ref_tensor_name(const char *name)
{
    return (name != NULL && name[0] != '\0') ? name : "(unnamed)";
}

static size_t ref_groups_per_row(uint32_t k, uint32_t group)
{
    return (size_t)(k / group) + (k % group != 0u);
}

static double ref_absd(double v)
{
    return v < 0.0 ? -v : v;
}

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
    if (state == NULL) {
        edgert_errf(err, err_len, REF_NAME ": init: state pointer is NULL");
        return EDGERT_E_USAGE;
    }
    *state = NULL;
    if (host == NULL) {
        edgert_errf(err, err_len, REF_NAME ": init: host table is NULL");
        return EDGERT_E_USAGE;
    }
    /* cpu_flags is the last field of ABI 1; everything before it is used */
    if (host->struct_size < offsetof(edgert_host, cpu_flags) ||
        host->alloc == NULL || host->free == NULL || host->parallel_for == NULL ||
        host->log == NULL) {
        edgert_errf(err, err_len,
                REF_NAME ": init: host table too small or incomplete (struct_size %u, need >= %zu "
                "with alloc, free, parallel_for and log set)",
                (unsigned)host->struct_size, offsetof(edgert_host, cpu_flags));
        return EDGERT_E_USAGE;
    }
    if (options != NULL && options[0] != '\0') {
        edgert_errf(err, err_len, REF_NAME ": init: unknown option '%s' (this backend takes no options)",
                options);
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

static void ref_fini(void *state)
{
    ref_state *st = state;
    if (st == NULL)
        return;
    st->host->free(st->host->host_ctx, st);
}

static const char *ref_describe(void *state)
{
    (void)state;
    return REF_DESCRIBE;
}

static edgert_status ref_pack(void *state, const edgert_qweights *w, void **packed,
                              size_t *packed_bytes, char *err, size_t err_len)
{
    ref_state *st = state;
    const size_t need = offsetof(edgert_qweights, zeros) + sizeof(w->zeros);
    size_t stride, groups, ng, off_codes, codes_bytes, off_scales, scales_bytes, off_zeros, total;

    if (packed == NULL || packed_bytes == NULL || st == NULL) {
        edgert_errf(err, err_len, REF_NAME ": pack: state, packed or packed_bytes is NULL");
        return EDGERT_E_USAGE;
    }
    *packed = NULL;
    *packed_bytes = 0u;
    if (w == NULL || w->struct_size < need) {
        edgert_errf(err, err_len, REF_NAME ": pack: weights descriptor is NULL or too small "
                              "(struct_size %u, need >= %zu)",
                w != NULL ? (unsigned)w->struct_size : 0u, need);
        return EDGERT_E_USAGE;
    }
    const char *name = w->struct_size >= offsetof(edgert_qweights, name) + sizeof(w->name)
                           ? ref_tensor_name(w->name)
                           : ref_tensor_name(NULL);
    if (w->n == 0u || w->k == 0u || w->group == 0u || w->codes == NULL || w->scales == NULL) {
        edgert_errf(err, err_len,
                REF_NAME ": pack '%s' [n=%u k=%u group=%u]: n, k and group must be > 0 and "
                         "codes and scales non-NULL",
                name, (unsigned)w->n, (unsigned)w->k, (unsigned)w->group);
        return EDGERT_E_USAGE;
    }

    stride = ((size_t)w->k + 1u) / 2u;
    groups = ref_groups_per_row(w->k, w->group);
    if (pu_round_up(sizeof(ref_packed), REF_ALIGN, &off_codes) != 0 ||
        pu_mul((size_t)w->n, stride, &codes_bytes) != 0 ||
        pu_add(off_codes, codes_bytes, &off_scales) != 0 ||
        pu_round_up(off_scales, REF_ALIGN, &off_scales) != 0 ||
        pu_mul((size_t)w->n, groups, &ng) != 0 ||
        pu_mul(ng, sizeof(float), &scales_bytes) != 0 ||
        pu_add(off_scales, scales_bytes, &off_zeros) != 0 ||
        pu_add(off_zeros, ng, &total) != 0) {
        edgert_errf(err, err_len,
                REF_NAME ": pack '%s' [n=%u k=%u group=%u]: packed size overflows size_t", name,
                (unsigned)w->n, (unsigned)w->k, (unsigned)w->group);
        return EDGERT_E_NOMEM;
    }
    if (w->zeros != NULL) {
        for (size_t i = 0; i < ng; i++) {
            if (w->zeros[i] > 15u) {
                edgert_errf(err, err_len,
                        REF_NAME ": pack '%s' [n=%u k=%u group=%u]: zero point %u at row %zu "
                                 "group %zu is outside [0, 15]",
                        name, (unsigned)w->n, (unsigned)w->k, (unsigned)w->group,
                        (unsigned)w->zeros[i], i / groups, i % groups);
                return EDGERT_E_USAGE;
            }
        }
    }

    const edgert_host *host = st->host;
    unsigned char *mem = host->alloc(host->host_ctx, total, REF_ALIGN);
    if (mem == NULL) {
        edgert_errf(err, err_len, REF_NAME ": pack '%s' [n=%u k=%u group=%u]: cannot allocate %zu bytes",
                name, (unsigned)w->n, (unsigned)w->k, (unsigned)w->group, total);
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

static void ref_packed_free(void *state, void *packed)
{
    ref_state *st = state;
    if (st == NULL || packed == NULL)
        return;
    st->host->free(st->host->host_ctx, packed);
}

static edgert_status ref_gemm(void *state, const void *packed, const edgert_gemm_args *args,
                              char *err, size_t err_len)
{
    ref_state *st = state;
    const ref_packed *w = packed;
    size_t per_row;

    if (st == NULL || w == NULL || w->magic != REF_PACKED_MAGIC) {
        edgert_errf(err, err_len, REF_NAME ": gemm: NULL state or not a " REF_NAME " packed handle");
        return EDGERT_E_USAGE;
    }
    edgert_status ast = pu_check_gemm_args(REF_NAME, w->name, w->n, w->k, args, err, err_len);
    if (ast != EDGERT_OK)
        return ast;

    /* Enough rows per task that one task is >= REF_MIN_TASK_MACS
     * multiply-adds: below that the hand-off costs more than it saves. */
    size_t grain = 4u;
    if (pu_mul((size_t)w->k, (size_t)args->m, &per_row) == 0 && per_row < REF_MIN_TASK_MACS) {
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

typedef struct ref_case {
    uint32_t m, n, k, group;
    int symmetric;
} ref_case;

/* Odd shapes on purpose: odd k (padding nibble), partial last groups, a
 * group smaller than the lookup-table threshold, an odd group (groups that
 * start on a high nibble), k across two segments, n covering a full row
 * block plus the 4-row and 1-row tails. */
static const ref_case ref_cases[] = {
    {3u, 21u, 301u, 32u, 0},
    {2u, 3u, 7u, 4u, 1},
    {1u, 5u, 513u, 128u, 0},
    {2u, 6u, 100u, 19u, 0},
};

#define REF_ST_CODES 4096u
#define REF_ST_GROUPS 256u
#define REF_ST_X 1100u
#define REF_ST_Y 128u
#define REF_ST_PAD 2u /* extra columns in ldx and ldy */
#define REF_ST_SENTINEL -12345.0f

static edgert_status ref_self_test_case(ref_state *st, const ref_case *tc, uint32_t seed,
                                        char *err, size_t err_len)
{
    uint8_t codes[REF_ST_CODES];
    float scales[REF_ST_GROUPS];
    uint8_t zeros[REF_ST_GROUPS];
    float x[REF_ST_X];
    float y[REF_ST_Y];
    size_t stride = ((size_t)tc->k + 1u) / 2u;
    size_t groups = ref_groups_per_row(tc->k, tc->group);
    size_t ldx = (size_t)tc->k + REF_ST_PAD, ldy = (size_t)tc->n + REF_ST_PAD;
    void *packed = NULL;
    size_t packed_bytes = 0u;
    edgert_status rc;

    if (tc->n * stride > REF_ST_CODES || tc->n * groups > REF_ST_GROUPS ||
        tc->m * ldx > REF_ST_X || tc->m * ldy > REF_ST_Y) {
        edgert_errf(err, err_len, REF_NAME ": self-test: case m=%u n=%u k=%u exceeds its buffers",
                (unsigned)tc->m, (unsigned)tc->n, (unsigned)tc->k);
        return EDGERT_E_INTERNAL;
    }

    pu_selftest_fill(&seed, codes, tc->n * stride, scales, zeros, tc->n * groups, x,
                     tc->m * ldx);
    if (tc->k & 1u) /* canonical padding nibble is 0 */
        for (size_t r = 0; r < tc->n; r++)
            codes[r * stride + stride - 1u] &= 15u;
    for (size_t i = 0; i < tc->m * ldy; i++)
        y[i] = REF_ST_SENTINEL;

    edgert_qweights qw = {
        .struct_size = sizeof(edgert_qweights), .n = tc->n, .k = tc->k, .group = tc->group,
        .codes = codes, .scales = scales, .zeros = tc->symmetric ? NULL : zeros,
        .name = "self-test",
    };
    rc = ref_pack(st, &qw, &packed, &packed_bytes, err, err_len);
    if (rc != EDGERT_OK)
        goto out;
    edgert_gemm_args ga = {
        .struct_size = sizeof(edgert_gemm_args), .m = tc->m, .x = x, .ldx = ldx, .y = y,
        .ldy = ldy,
    };
    rc = ref_gemm(st, packed, &ga, err, err_len);
    if (rc != EDGERT_OK)
        goto out;

    /* Independent scalar reference: decode each code from the canonical
     * bytes directly, w in double, sum in double. Tolerance: the plugin sums
     * at most ~64 fp32 terms per partial, then a few partials per segment and
     * one add per segment, so its error is below ~100 * 2^-24 * sum|x w|,
     * under 1e-5 * sum|x w| for these k; the 1e-7 absolute term covers
     * sums near 0. */
    for (size_t i = 0; i < tc->m; i++) {
        for (size_t r = 0; r < ldy; r++) {
            float got = y[i * ldy + r];
            if (r >= tc->n) {
                if (got != REF_ST_SENTINEL) {
                    edgert_errf(err, err_len,
                            REF_NAME ": self-test m=%u n=%u k=%u group=%u: y[%zu][%zu] beyond n "
                                     "was written (ldy %zu)",
                            (unsigned)tc->m, (unsigned)tc->n, (unsigned)tc->k,
                            (unsigned)tc->group, i, r, ldy);
                    rc = EDGERT_E_PLUGIN;
                    goto out;
                }
                continue;
            }
            double acc = 0.0, mag = 0.0;
            for (size_t c = 0; c < tc->k; c++) {
                unsigned b = codes[r * stride + c / 2u];
                int q = (int)((c % 2u) ? (b >> 4) : (b & 15u));
                size_t g = c / tc->group;
                int z = tc->symmetric ? 8 : (int)zeros[r * groups + g];
                double wv = (double)scales[r * groups + g] * (double)(q - z);
                double t = (double)x[i * ldx + c] * wv;
                acc += t;
                mag += ref_absd(t);
            }
            double tol = 1e-5 * mag + 1e-7;
            if (!(ref_absd((double)got - acc) <= tol)) { /* also catches NaN */
                edgert_errf(err, err_len,
                        REF_NAME ": self-test m=%u n=%u k=%u group=%u %s: y[%zu][%zu] = %.9g but "
                                 "the scalar loop gives %.9g (|err| %.3g > tolerance %.3g)",
                        (unsigned)tc->m, (unsigned)tc->n, (unsigned)tc->k, (unsigned)tc->group,
                        tc->symmetric ? "symmetric" : "asymmetric", i, r, (double)got, acc,
                        ref_absd((double)got - acc), tol);
                rc = EDGERT_E_PLUGIN;
                goto out;
            }
        }
    }
    rc = EDGERT_OK;

out:
    ref_packed_free(st, packed);
    return rc;
}

static edgert_status ref_self_test(void *state, char *err, size_t err_len)
{
    ref_state *st = state;
    if (st == NULL) {
        edgert_errf(err, err_len, REF_NAME ": self-test: state is NULL");
        return EDGERT_E_USAGE;
    }
    for (size_t i = 0; i < sizeof ref_cases / sizeof ref_cases[0]; i++) {
        edgert_status rc = ref_self_test_case(st, &ref_cases[i], 0x9E3779B9u + (uint32_t)i, err,
                                              err_len);
        if (rc != EDGERT_OK)
            return rc;
    }
    return EDGERT_OK;
}

/* ---- descriptor and entry ----------------------------------------------------- */

static const edgert_plugin ref_plugin_v1 = {
    .struct_size = sizeof(edgert_plugin),
    .abi_version = 1u,
    .name = REF_NAME,
    .version = REF_VERSION,
    .caps = EDGERT_CAP_GEMM,
    .init = ref_init,
    .fini = ref_fini,
    .self_test = ref_self_test,
    .describe = ref_describe,
    .pack = ref_pack,
    .packed_free = ref_packed_free,
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
    return edgert_plugin_negotiate(abi_min, abi_max, by_abi, REF_NAME, out, err, err_len);
}
