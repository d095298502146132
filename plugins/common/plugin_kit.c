/*
 * plugins/common/plugin_kit.c — the plugin support kit (plugin_kit.h):
 * argument checks and the self-test runner, compiled into each in-tree
 * plugin. Nothing here allocates except the self-test, through the host.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plugin_kit.h"

#define PK_ALIGN 64u
#define PK_SENTINEL -12345.0f
#define PK_LDX_PAD 3u /* odd: the strides must not be a multiple of anything */
#define PK_LDY_PAD 2u

/* ---- init ----------------------------------------------------------------------- */

edgert_status pk_check_init(const char *plugin, const edgert_host *host, void **state, char *err,
                            size_t err_len)
{
    const size_t need = EDGERT_HOST_V1_SIZE;
    if (state == NULL) {
        edgert_errf(err, err_len, "%s: init: state pointer is NULL", plugin);
        return EDGERT_E_USAGE;
    }
    *state = NULL;
    if (host == NULL) {
        edgert_errf(err, err_len, "%s: init: host table is NULL", plugin);
        return EDGERT_E_USAGE;
    }
    if (host->struct_size < need || host->log == NULL || host->alloc == NULL ||
        host->free == NULL || host->parallel_for == NULL || host->thread_count == NULL) {
        edgert_errf(err, err_len,
                    "%s: init: host table too small or incomplete (struct_size %u, need >= %zu "
                    "with log, alloc, free, parallel_for and thread_count set)",
                    plugin, (unsigned)host->struct_size, need);
        return EDGERT_E_USAGE;
    }
    return EDGERT_OK;
}

void pk_fini(void *state)
{
    if (state == NULL)
        return;
    const edgert_host *host = *(const edgert_host *const *)state;
    host->free(host->host_ctx, state);
}

void pk_packed_free(void *state, void *packed)
{
    if (state == NULL || packed == NULL)
        return;
    const edgert_host *host = *(const edgert_host *const *)state;
    host->free(host->host_ctx, packed);
}

/* ---- pack ----------------------------------------------------------------------- */

static const char *tensor_name(const edgert_qweights *w)
{
    if (w->struct_size >= offsetof(edgert_qweights, name) + sizeof(w->name) && w->name != NULL &&
        w->name[0] != '\0')
        return w->name;
    return "(unnamed)";
}

/* What the layout asks beyond the canonical form; EDGERT_OK or the refusal. */
static edgert_status check_layout(const char *plugin, const char *name, const edgert_qweights *w,
                                  const pk_layout_needs *needs, char *err, size_t err_len)
{
    if (needs->group != 0u && w->group != needs->group) {
        edgert_errf(err, err_len,
                    "%s: pack '%s' [n=%u k=%u group=%u]: group size %u is not supported (layout "
                    "%s holds whole groups of %u)",
                    plugin, name, (unsigned)w->n, (unsigned)w->k, (unsigned)w->group,
                    (unsigned)w->group, needs->layout, (unsigned)needs->group);
        return EDGERT_E_UNSUPPORTED;
    }
    if (needs->whole_groups && w->k % w->group != 0u) {
        edgert_errf(err, err_len,
                    "%s: pack '%s' [n=%u k=%u group=%u]: k=%u is not a multiple of %u, the group "
                    "size (k %% %u = %u); layout %s has no partial groups",
                    plugin, name, (unsigned)w->n, (unsigned)w->k, (unsigned)w->group,
                    (unsigned)w->k, (unsigned)w->group, (unsigned)w->group,
                    (unsigned)(w->k % w->group), needs->layout);
        return EDGERT_E_UNSUPPORTED;
    }
    return EDGERT_OK;
}

/* Zero points in [0, 15] and (when asked) finite scales. */
static edgert_status check_values(const char *plugin, const char *name, const edgert_qweights *w,
                                  const pk_layout_needs *needs, char *err, size_t err_len)
{
    const size_t groups = pk_groups(w->k, w->group), ng = (size_t)w->n * groups;
    for (size_t i = 0; i < ng; i++) {
        if (w->zeros != NULL && w->zeros[i] > 15u) {
            edgert_errf(err, err_len,
                        "%s: pack '%s' [n=%u k=%u group=%u]: zero point %u at row %zu group %zu "
                        "is outside [0, 15]",
                        plugin, name, (unsigned)w->n, (unsigned)w->k, (unsigned)w->group,
                        (unsigned)w->zeros[i], i / groups, i % groups);
            return EDGERT_E_USAGE;
        }
        if (needs->finite_scales && !isfinite(w->scales[i])) {
            edgert_errf(err, err_len,
                        "%s: pack '%s' [n=%u k=%u group=%u]: scale at row %zu group %zu is not "
                        "finite",
                        plugin, name, (unsigned)w->n, (unsigned)w->k, (unsigned)w->group,
                        i / groups, i % groups);
            return EDGERT_E_USAGE;
        }
    }
    return EDGERT_OK;
}

edgert_status pk_check_pack(const char *plugin, const void *state, const edgert_qweights *w,
                            void **packed, size_t *packed_bytes, const pk_layout_needs *needs,
                            const char **tensor, char *err, size_t err_len)
{
    const size_t need = offsetof(edgert_qweights, zeros) + sizeof(w->zeros);
    if (packed == NULL || packed_bytes == NULL || state == NULL) {
        edgert_errf(err, err_len, "%s: pack: state, packed or packed_bytes is NULL", plugin);
        return EDGERT_E_USAGE;
    }
    *packed = NULL;
    *packed_bytes = 0u;
    if (w == NULL || w->struct_size < need) {
        edgert_errf(err, err_len,
                    "%s: pack: weights descriptor is NULL or too small (struct_size %u, need >= "
                    "%zu)",
                    plugin, w != NULL ? (unsigned)w->struct_size : 0u, need);
        return EDGERT_E_USAGE;
    }
    const char *name = tensor_name(w);
    *tensor = name;
    if (w->n == 0u || w->k == 0u || w->group == 0u || w->codes == NULL || w->scales == NULL) {
        edgert_errf(err, err_len,
                    "%s: pack '%s' [n=%u k=%u group=%u]: n, k and group must be > 0 and codes "
                    "and scales non-NULL",
                    plugin, name, (unsigned)w->n, (unsigned)w->k, (unsigned)w->group);
        return EDGERT_E_USAGE;
    }
    edgert_status st = check_layout(plugin, name, w, needs, err, err_len);
    if (st != EDGERT_OK)
        return st;
    return check_values(plugin, name, w, needs, err, err_len);
}

/* ---- gemm ----------------------------------------------------------------------- */

edgert_status pk_check_gemm_args(const char *plugin, const char *tensor, uint32_t n, uint32_t k,
                                 const edgert_gemm_args *args, char *err, size_t err_len)
{
    size_t span;
    if (args == NULL || args->struct_size < EDGERT_GEMM_ARGS_V1_SIZE) {
        edgert_errf(err, err_len, "%s: gemm on '%s': arguments NULL or too small (struct_size %u)",
                    plugin, tensor, args != NULL ? (unsigned)args->struct_size : 0u);
        return EDGERT_E_USAGE;
    }
    if (args->m == 0u || args->x == NULL || args->y == NULL) {
        edgert_errf(err, err_len,
                    "%s: gemm on '%s' [m=%u n=%u k=%u]: m must be >= 1 and x, y non-NULL", plugin,
                    tensor, (unsigned)args->m, (unsigned)n, (unsigned)k);
        return EDGERT_E_USAGE;
    }
    if (args->ldx < k || args->ldy < n) {
        edgert_errf(err, err_len,
                    "%s: gemm on '%s' [m=%u n=%u k=%u]: strides too small (ldx %zu must be >= k, "
                    "ldy %zu must be >= n)",
                    plugin, tensor, (unsigned)args->m, (unsigned)n, (unsigned)k, args->ldx,
                    args->ldy);
        return EDGERT_E_USAGE;
    }
    if (pk_mul((size_t)args->m - 1u, args->ldx, &span) != 0 ||
        pk_mul((size_t)args->m - 1u, args->ldy, &span) != 0) {
        edgert_errf(err, err_len,
                    "%s: gemm on '%s' [m=%u n=%u k=%u]: (m - 1) * stride overflows size_t",
                    plugin, tensor, (unsigned)args->m, (unsigned)n, (unsigned)k);
        return EDGERT_E_USAGE;
    }
    return EDGERT_OK;
}

/* ---- self-test ------------------------------------------------------------------ */

/* One case's buffers, carved from a single host allocation. */
typedef struct pk_bufs {
    uint8_t *codes, *zeros;
    float *scales, *x, *y;
    double *xe; /* one row of effective activations */
    size_t stride, groups, ldx, ldy;
} pk_bufs;

static uint32_t xorshift32(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

/* Random code bytes, scales in [0.01, 0.05), zero points 0..15, activations
 * in [-1, 1] in steps of 1e-3; the padding nibble of an odd k is 0, as the
 * canonical form requires; every y element is the sentinel. */
static void fill_case(const pk_case *tc, uint32_t seed, const pk_bufs *b)
{
    const size_t ncodes = tc->n * b->stride, ng = tc->n * b->groups, nx = tc->m * b->ldx;
    for (size_t i = 0; i < ncodes; i++)
        b->codes[i] = (uint8_t)xorshift32(&seed);
    for (size_t i = 0; i < ng; i++) {
        b->scales[i] = 0.01f + (float)(xorshift32(&seed) % 1000u) * 4e-5f;
        b->zeros[i] = (uint8_t)(xorshift32(&seed) % 16u);
    }
    for (size_t i = 0; i < nx; i++)
        b->x[i] = (float)((int)(xorshift32(&seed) % 2001u) - 1000) * 1e-3f;
    if (tc->k & 1u)
        for (size_t r = 0; r < tc->n; r++)
            b->codes[r * b->stride + b->stride - 1u] &= 15u;
    for (size_t i = 0; i < tc->m * b->ldy; i++)
        b->y[i] = PK_SENTINEL;
}

/* The oracle's sums for output (i, r); b->xe holds row i's effective x. */
static pk_sums oracle(const pk_case *tc, const pk_bufs *b, size_t i, size_t r)
{
    pk_sums s = {0.0, 0.0, 0.0, 0.0};
    const float *x = b->x + i * b->ldx;
    for (size_t g = 0; g < b->groups; g++) {
        size_t c0 = g * tc->group, c1 = c0 + tc->group < tc->k ? c0 + tc->group : tc->k;
        double mx = 0.0, sw = 0.0, sc = b->scales[r * b->groups + g];
        int z = tc->symmetric ? 8 : (int)b->zeros[r * b->groups + g];
        for (size_t c = c0; c < c1; c++)
            mx = fabs((double)x[c]) > mx ? fabs((double)x[c]) : mx;
        for (size_t c = c0; c < c1; c++) {
            double wv = sc * (double)((int)pk_code(b->codes + r * b->stride, c) - z);
            double t = b->xe[c] * wv;
            s.exact += t;
            s.sum_xw += fabs(t);
            s.sum_xs15 += 15.0 * fabs((double)x[c] * sc);
            sw += fabs(wv);
        }
        s.sum_grid += ldexp(mx, -13) * sw;
    }
    return s;
}

/* Every output of one case against the oracle, and the padding untouched. */
static edgert_status check_case(const pk_self_test *t, const pk_case *tc, const pk_bufs *b,
                                char *err, size_t err_len)
{
    for (size_t i = 0; i < tc->m; i++) {
        const float *x = b->x + i * b->ldx;
        if (t->effective_x)
            t->effective_x(t->state, x, tc->k, b->xe);
        else
            for (size_t c = 0; c < tc->k; c++)
                b->xe[c] = x[c];
        for (size_t r = 0; r < b->ldy; r++) {
            float got = b->y[i * b->ldy + r];
            if (r >= tc->n) {
                if (got == PK_SENTINEL)
                    continue;
                edgert_errf(err, err_len,
                            "%s: self-test (path %s) m=%u n=%u k=%u: y[%zu][%zu] beyond n was "
                            "written (ldy %zu)",
                            t->plugin, t->path ? t->path : "-", (unsigned)tc->m, (unsigned)tc->n,
                            (unsigned)tc->k, i, r, b->ldy);
                return EDGERT_E_PLUGIN;
            }
            pk_sums s = oracle(tc, b, i, r);
            double bound = t->bound(t->state, tc->m, &s);
            if (fabs((double)got - s.exact) <= bound) /* false for NaN too */
                continue;
            edgert_errf(
                err, err_len,
                "%s: self-test (path %s) m=%u n=%u k=%u group=%u %s: y[%zu][%zu] = %.9g but "
                "the scalar loop gives %.9g (|err| %.3g > bound %.3g)",
                t->plugin, t->path ? t->path : "-", (unsigned)tc->m, (unsigned)tc->n,
                (unsigned)tc->k, (unsigned)tc->group, tc->symmetric ? "symmetric" : "asymmetric", i,
                r, (double)got, s.exact, fabs((double)got - s.exact), bound);
            return EDGERT_E_PLUGIN;
        }
    }
    return EDGERT_OK;
}

/* Carve one case's buffers out of one allocation; NULL when it fails. */
static void *alloc_case(const pk_self_test *t, const pk_case *tc, pk_bufs *b)
{
    b->stride = ((size_t)tc->k + 1u) / 2u;
    b->groups = pk_groups(tc->k, tc->group);
    b->ldx = (size_t)tc->k + PK_LDX_PAD;
    b->ldy = (size_t)tc->n + PK_LDY_PAD;
    const size_t ng = tc->n * b->groups;
    const size_t bytes = tc->k * sizeof(double) + (tc->m * b->ldx + tc->m * b->ldy + ng) *
                         sizeof(float) + tc->n * b->stride + ng;
    uint8_t *mem = t->host->alloc(t->host->host_ctx, bytes, PK_ALIGN);
    if (mem == NULL)
        return NULL;
    b->xe = (double *)(void *)mem;
    b->x = (float *)(void *)(b->xe + tc->k);
    b->y = b->x + tc->m * b->ldx;
    b->scales = b->y + tc->m * b->ldy;
    b->codes = (uint8_t *)(b->scales + ng);
    b->zeros = b->codes + tc->n * b->stride;
    return mem;
}

static edgert_status run_case(const pk_self_test *t, const pk_case *tc, uint32_t seed, char *err,
                              size_t err_len)
{
    pk_bufs b;
    void *packed = NULL;
    size_t packed_bytes = 0u;
    void *mem = alloc_case(t, tc, &b);
    if (mem == NULL) {
        edgert_errf(err, err_len, "%s: self-test: cannot allocate the buffers of m=%u n=%u k=%u",
                    t->plugin, (unsigned)tc->m, (unsigned)tc->n, (unsigned)tc->k);
        return EDGERT_E_NOMEM;
    }
    fill_case(tc, seed, &b);
    if (t->shape_x)
        t->shape_x(b.x, tc->m, tc->k, b.ldx);
    edgert_qweights qw = {
        .struct_size = sizeof(edgert_qweights), .n = tc->n, .k = tc->k, .group = tc->group,
        .codes = b.codes, .scales = b.scales, .zeros = tc->symmetric ? NULL : b.zeros,
        .name = "self-test",
    };
    edgert_status rc = t->pack(t->state, &qw, &packed, &packed_bytes, err, err_len);
    if (rc != EDGERT_OK)
        goto out;
    edgert_gemm_args ga = {
        .struct_size = sizeof(edgert_gemm_args), .m = tc->m, .x = b.x, .ldx = b.ldx, .y = b.y,
        .ldy = b.ldy,
    };
    rc = t->gemm(t->state, packed, &ga, err, err_len);
    if (rc == EDGERT_OK)
        rc = check_case(t, tc, &b, err, err_len);
out:
    if (packed != NULL)
        t->packed_free(t->state, packed);
    t->host->free(t->host->host_ctx, mem);
    return rc;
}

edgert_status pk_run_self_test(const pk_self_test *t, char *err, size_t err_len)
{
    if (t->state == NULL) {
        edgert_errf(err, err_len, "%s: self-test: state is NULL", t->plugin);
        return EDGERT_E_USAGE;
    }
    for (size_t i = 0; i < t->ncases; i++) {
        edgert_status rc = run_case(t, &t->cases[i], t->seed + (uint32_t)i, err, err_len);
        if (rc != EDGERT_OK)
            return rc;
    }
    return EDGERT_OK;
}
