/*
 * plugins/kit/plugin_kit.c — the plugin kit (plugin_kit.h):
 * argument checks, the header of mappable packed bytes (plugin ABI 2) and
 * its validation, and the self-test runner, linked into each in-tree
 * plugin. Nothing here allocates except the self-test, through the host.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
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
static edgert_status check_layout(const char *plugin, const char *verb, const char *name,
                                  const edgert_qweights *w, const pk_layout_needs *needs,
                                  char *err, size_t err_len)
{
    if (needs->group == PK_GROUPS_32_64_128) {
        if (w->group != 128u && w->group != 64u && w->group != 32u) {
            edgert_errf(err, err_len,
                        "%s: %s '%s' [n=%u k=%u group=%u]: group size %u is not supported "
                        "(layout %s holds groups of 32, 64 and 128)",
                        plugin, verb, name, (unsigned)w->n, (unsigned)w->k, (unsigned)w->group,
                        (unsigned)w->group, needs->layout);
            return EDGERT_E_UNSUPPORTED;
        }
    } else if (needs->group != 0u && w->group != needs->group) {
        edgert_errf(err, err_len,
                    "%s: %s '%s' [n=%u k=%u group=%u]: group size %u is not supported (layout "
                    "%s holds whole groups of %u)",
                    plugin, verb, name, (unsigned)w->n, (unsigned)w->k, (unsigned)w->group,
                    (unsigned)w->group, needs->layout, (unsigned)needs->group);
        return EDGERT_E_UNSUPPORTED;
    }
    if (needs->whole_groups && w->k % w->group != 0u) {
        edgert_errf(err, err_len,
                    "%s: %s '%s' [n=%u k=%u group=%u]: k=%u is not a multiple of %u, the group "
                    "size (k %% %u = %u); layout %s has no partial groups",
                    plugin, verb, name, (unsigned)w->n, (unsigned)w->k, (unsigned)w->group,
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
    edgert_status st = check_layout(plugin, "pack", name, w, needs, err, err_len);
    if (st != EDGERT_OK)
        return st;
    return check_values(plugin, name, w, needs, err, err_len);
}

/* ---- packed bytes a cache can map --------------------------------------------------- */

int pk_blob_layout(const pk_blob_id *id, uint32_t n, uint32_t k, uint32_t group,
                   uint32_t flags, const size_t *section_bytes, pk_blob_header *out)
{
    size_t off = sizeof *out, at;
    memset(out, 0, sizeof *out);
    out->magic = id->magic;
    out->version = id->version;
    out->header_bytes = (uint32_t)sizeof *out;
    out->flags = flags;
    out->n = n;
    out->k = k;
    out->group = group;
    out->nsections = id->nsections;
    for (unsigned i = 0; i < id->nsections && i < PK_BLOB_MAX_SECTIONS; i++) {
        if (pk_round_up(off, EDGERT_PACKED_ALIGN, &at) != 0 ||
            pk_add(at, section_bytes[i], &off) != 0)
            return -1;
        out->section[i].offset = at;
        out->section[i].bytes = section_bytes[i];
    }
    out->total = off;
    return 0;
}

void pk_blob_write_header(void *blob, const pk_blob_header *h)
{
    uint8_t *b = blob;
    uint64_t end = sizeof *h;
    memcpy(b, h, sizeof *h);
    for (unsigned i = 0; i < h->nsections && i < PK_BLOB_MAX_SECTIONS; i++) {
        memset(b + end, 0, (size_t)(h->section[i].offset - end));
        end = h->section[i].offset + h->section[i].bytes;
    }
    memset(b + end, 0, (size_t)(h->total - end));
}

edgert_status pk_check_map(const pk_blob_id *id, const void *state, const edgert_qweights *shape,
                           const void *data, size_t size, void **packed,
                           const pk_layout_needs *needs, const char **tensor, char *err,
                           size_t err_len)
{
    const size_t need = offsetof(edgert_qweights, zeros) + sizeof(shape->zeros);
    if (packed == NULL || state == NULL) {
        edgert_errf(err, err_len, "%s: packed_map: state or packed is NULL", id->plugin);
        return EDGERT_E_USAGE;
    }
    *packed = NULL;
    if (shape == NULL || shape->struct_size < need) {
        edgert_errf(err, err_len,
                    "%s: packed_map: shape is NULL or too small (struct_size %u, need >= %zu)",
                    id->plugin, shape != NULL ? (unsigned)shape->struct_size : 0u, need);
        return EDGERT_E_USAGE;
    }
    const char *name = tensor_name(shape);
    *tensor = name;
    if (shape->n == 0u || shape->k == 0u || shape->group == 0u || data == NULL) {
        edgert_errf(err, err_len,
                    "%s: map '%s' [n=%u k=%u group=%u]: n, k and group must be > 0 and data "
                    "non-NULL",
                    id->plugin, name, (unsigned)shape->n, (unsigned)shape->k,
                    (unsigned)shape->group);
        return EDGERT_E_USAGE;
    }
    edgert_status st = check_layout(id->plugin, "map", name, shape, needs, err, err_len);
    if (st != EDGERT_OK)
        return st;
    if ((uintptr_t)data % EDGERT_PACKED_ALIGN != 0u) {
        edgert_errf(err, err_len,
                    "%s: map '%s' [n=%u k=%u group=%u]: data at %p are not aligned to %u bytes",
                    id->plugin, name, (unsigned)shape->n, (unsigned)shape->k,
                    (unsigned)shape->group, data, EDGERT_PACKED_ALIGN);
        return EDGERT_E_USAGE;
    }
    if (size < sizeof(pk_blob_header)) {
        edgert_errf(err, err_len,
                    "%s: map '%s' [n=%u k=%u group=%u]: %zu bytes are shorter than the "
                    "%zu-byte header of layout %s (truncated?)",
                    id->plugin, name, (unsigned)shape->n, (unsigned)shape->k,
                    (unsigned)shape->group, size, sizeof(pk_blob_header), id->layout);
        return EDGERT_E_PARSE;
    }
    return EDGERT_OK;
}

/* EDGERT_E_PARSE with "<plugin>: map '<tensor>' [shape] (layout <id>): <why>". */
__attribute__((format(printf, 6, 7))) static edgert_status
blob_fail(const pk_blob_id *id, const char *tensor, const pk_blob_header *expect, char *err,
          size_t err_len, const char *fmt, ...)
{
    char why[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    edgert_errf(err, err_len, "%s: map '%s' [n=%u k=%u group=%u] (layout %s): %s", id->plugin,
                tensor, (unsigned)expect->n, (unsigned)expect->k, (unsigned)expect->group,
                id->layout, why);
    return EDGERT_E_PARSE;
}

/* The fields before the sections: what the bytes are, for which shape, how long. */
static edgert_status blob_check_fields(const pk_blob_id *id, const char *tensor, size_t size,
                                       const pk_blob_header *expect, const pk_blob_header *h,
                                       char *err, size_t err_len)
{
    if (h->magic != id->magic && __builtin_bswap32(h->magic) == id->magic)
        return blob_fail(id, tensor, expect, err, err_len,
                         "packed on a machine of the other byte order (magic 0x%08x)",
                         (unsigned)h->magic);
    if (h->magic != id->magic)
        return blob_fail(id, tensor, expect, err, err_len,
                         "not %s packed data (magic 0x%08x, expected 0x%08x)", id->plugin,
                         (unsigned)h->magic, (unsigned)id->magic);
    if (h->version != id->version)
        return blob_fail(id, tensor, expect, err, err_len,
                         "layout version %u; this plugin maps version %u only (pack again)",
                         (unsigned)h->version, (unsigned)id->version);
    if (h->header_bytes != sizeof *h)
        return blob_fail(id, tensor, expect, err, err_len, "header of %u bytes, expected %zu",
                         (unsigned)h->header_bytes, sizeof *h);
    if (h->n != expect->n || h->k != expect->k || h->group != expect->group)
        return blob_fail(id, tensor, expect, err, err_len,
                         "the data hold a tensor [n=%u k=%u group=%u], not the caller's shape",
                         (unsigned)h->n, (unsigned)h->k, (unsigned)h->group);
    if (h->flags & ~(uint32_t)PK_BLOB_FLAGS_KNOWN)
        return blob_fail(id, tensor, expect, err, err_len, "unknown flags 0x%x in the header",
                         (unsigned)(h->flags & ~(uint32_t)PK_BLOB_FLAGS_KNOWN));
    for (size_t i = 0; i < sizeof h->reserved; i++)
        if (h->reserved[i] != 0u)
            return blob_fail(id, tensor, expect, err, err_len,
                             "reserved header byte %zu is %u, not 0",
                             offsetof(pk_blob_header, reserved) + i, (unsigned)h->reserved[i]);
    if (h->total != (uint64_t)size)
        return blob_fail(id, tensor, expect, err, err_len,
                         "the header says %llu bytes, %zu were given (truncated, or padded?)",
                         (unsigned long long)h->total, size);
    if (h->nsections != id->nsections)
        return blob_fail(id, tensor, expect, err, err_len, "%u sections, the layout has %u",
                         (unsigned)h->nsections, (unsigned)id->nsections);
    return EDGERT_OK;
}

edgert_status pk_blob_check(const pk_blob_id *id, const char *tensor, const void *data,
                            size_t size, const pk_blob_header *expect, pk_blob_header *got,
                            char *err, size_t err_len)
{
    memcpy(got, data, sizeof *got); /* read once: every check and use sees this copy */
    const pk_blob_header *h = got;
    edgert_status st = blob_check_fields(id, tensor, size, expect, h, err, err_len);
    if (st != EDGERT_OK)
        return st;
    uint64_t end = sizeof *h; /* where the previous section ended */
    for (unsigned i = 0; i < PK_BLOB_MAX_SECTIONS; i++) {
        const pk_blob_section *s = &h->section[i], *e = &expect->section[i];
        const char *what = i < id->nsections && id->section_names[i] ? id->section_names[i] : "-";
        if (i >= id->nsections) {
            if (s->offset != 0u || s->bytes != 0u)
                return blob_fail(id, tensor, expect, err, err_len, "unused section %u is not zero",
                                 i);
            continue;
        }
        if (s->offset % EDGERT_PACKED_ALIGN != 0u || s->offset < end || s->offset > h->total ||
            s->bytes > h->total - s->offset)
            return blob_fail(id, tensor, expect, err, err_len,
                             "section %u (%s) at offset %llu of %llu bytes is not aligned to %u "
                             "or not inside bytes [%llu, %llu)",
                             i, what, (unsigned long long)s->offset, (unsigned long long)s->bytes,
                             EDGERT_PACKED_ALIGN, (unsigned long long)end,
                             (unsigned long long)h->total);
        end = s->offset + s->bytes;
        if (s->offset != e->offset || s->bytes != e->bytes)
            return blob_fail(id, tensor, expect, err, err_len,
                             "section %u (%s) at offset %llu of %llu bytes; the shape needs "
                             "offset %llu, %llu bytes",
                             i, what, (unsigned long long)s->offset, (unsigned long long)s->bytes,
                             (unsigned long long)e->offset, (unsigned long long)e->bytes);
    }
    if (h->total != expect->total)
        return blob_fail(id, tensor, expect, err, err_len,
                         "%llu bytes; the shape needs %llu", (unsigned long long)h->total,
                         (unsigned long long)expect->total);
    return EDGERT_OK;
}

edgert_status pk_blob_check_zeros(const pk_blob_id *id, const char *tensor, const uint8_t *zeros,
                                  size_t count, char *err, size_t err_len)
{
    for (size_t i = 0; i < count; i++)
        if (zeros[i] > 15u) {
            edgert_errf(err, err_len,
                        "%s: map '%s' (layout %s): zero point %u at index %zu is outside "
                        "[0, 15]",
                        id->plugin, tensor, id->layout, (unsigned)zeros[i], i);
            return EDGERT_E_PARSE;
        }
    return EDGERT_OK;
}

edgert_status pk_packed_data(const char *plugin, const void *state, int handle_ok,
                             const void *blob, size_t bytes, const void **data, size_t *size,
                             char *err, size_t err_len)
{
    if (data != NULL)
        *data = NULL;
    if (size != NULL)
        *size = 0u;
    if (state == NULL || data == NULL || size == NULL || !handle_ok) {
        edgert_errf(err, err_len,
                    "%s: packed_data: NULL argument, or not a %s packed handle", plugin, plugin);
        return EDGERT_E_USAGE;
    }
    *data = blob;
    *size = bytes;
    return EDGERT_OK;
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
    /* the last element of x and of y, in bytes, within a pointer offset */
    size_t xb, yb;
    if (pk_mul((size_t)args->m - 1u, args->ldx, &span) != 0 || pk_add(span, k, &span) != 0 ||
        pk_mul(span, sizeof(float), &xb) != 0 || xb > (size_t)PTRDIFF_MAX ||
        pk_mul((size_t)args->m - 1u, args->ldy, &span) != 0 || pk_add(span, n, &span) != 0 ||
        pk_mul(span, sizeof(float), &yb) != 0 || yb > (size_t)PTRDIFF_MAX) {
        edgert_errf(err, err_len,
                    "%s: gemm on '%s' [m=%u n=%u k=%u]: (m - 1) * stride + width floats "
                    "overflow memory (ldx %zu, ldy %zu)",
                    plugin, tensor, (unsigned)args->m, (unsigned)n, (unsigned)k, args->ldx,
                    args->ldy);
        return EDGERT_E_USAGE;
    }
    return EDGERT_OK;
}

/* ---- self-test ------------------------------------------------------------------ */

/* One case's buffers, carved from a single host allocation. */
typedef struct pk_bufs {
    uint8_t *codes, *zeros;
    float *scales, *x, *y;
    float *y_mapped; /* y again, from the mapped handle */
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
/* max |x| over the activation block of `ab` inputs holding input c */
static double block_max(const float *x, size_t k, size_t ab, size_t c)
{
    size_t c0 = c / ab * ab, c1 = c0 + ab < k ? c0 + ab : k;
    double mx = 0.0;
    for (size_t i = c0; i < c1; i++)
        mx = fabs((double)x[i]) > mx ? fabs((double)x[i]) : mx;
    return mx;
}

static pk_sums oracle(const pk_case *tc, const pk_bufs *b, size_t i, size_t r, uint32_t act_block)
{
    pk_sums s = {0.0, 0.0, 0.0, 0.0, tc->k, tc->group};
    const float *x = b->x + i * b->ldx;
    const size_t ab = act_block ? act_block : tc->group;
    size_t block = SIZE_MAX; /* the activation block whose max is in grid */
    double grid = 0.0;
    for (size_t g = 0; g < b->groups; g++) {
        size_t c0 = g * tc->group, c1 = c0 + tc->group < tc->k ? c0 + tc->group : tc->k;
        double sc = b->scales[r * b->groups + g];
        int z = tc->symmetric ? 8 : (int)b->zeros[r * b->groups + g];
        for (size_t c = c0; c < c1; c++) {
            double wv = sc * (double)((int)pk_code(b->codes + r * b->stride, c) - z);
            double t = b->xe[c] * wv;
            s.exact += t;
            s.sum_xw += fabs(t);
            s.sum_xs15 += 15.0 * fabs((double)x[c] * sc);
            if (c / ab != block) { /* once per block, not per input: O(k), not O(k ab) */
                block = c / ab;
                grid = ldexp(block_max(x, tc->k, ab, c), -13);
            }
            s.sum_grid += grid * fabs(wv);
        }
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
            t->effective_x(t->state, x, tc->k, tc->group, b->xe);
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
            pk_sums s = oracle(tc, b, i, r, t->act_block);
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
    const size_t bytes = tc->k * sizeof(double) + (tc->m * b->ldx + 2u * tc->m * b->ldy + ng) *
                         sizeof(float) + tc->n * b->stride + ng;
    uint8_t *mem = t->host->alloc(t->host->host_ctx, bytes, PK_ALIGN);
    if (mem == NULL)
        return NULL;
    b->xe = (double *)(void *)mem;
    b->x = (float *)(void *)(b->xe + tc->k);
    b->y = b->x + tc->m * b->ldx;
    b->y_mapped = b->y + tc->m * b->ldy;
    b->scales = b->y_mapped + tc->m * b->ldy;
    b->codes = (uint8_t *)(b->scales + ng);
    b->zeros = b->codes + tc->n * b->stride;
    return mem;
}

/* Map the packed bytes of `packed` in place and run the same GEMM on the
 * mapped handle: its y must equal the packed handle's bit for bit. */
static edgert_status check_mapped(const pk_self_test *t, const edgert_qweights *qw,
                                  const void *packed, const pk_bufs *b, edgert_gemm_args ga,
                                  char *err, size_t err_len)
{
    const void *data = NULL;
    size_t size = 0u;
    void *mapped = NULL;
    edgert_qweights shape = *qw;
    shape.codes = NULL;
    shape.scales = NULL;
    shape.zeros = NULL;
    edgert_status rc = t->packed_data(t->state, packed, &data, &size, err, err_len);
    if (rc == EDGERT_OK)
        rc = t->packed_map(t->state, &shape, data, size, &mapped, err, err_len);
    if (rc != EDGERT_OK)
        return rc;
    for (size_t i = 0; i < ga.m * ga.ldy; i++)
        b->y_mapped[i] = PK_SENTINEL;
    ga.y = b->y_mapped;
    rc = t->gemm(t->state, mapped, &ga, err, err_len);
    t->packed_free(t->state, mapped);
    if (rc == EDGERT_OK && memcmp(b->y, b->y_mapped, ga.m * ga.ldy * sizeof(float)) != 0) {
        edgert_errf(err, err_len,
                    "%s: self-test (path %s) m=%u n=%u k=%u: the handle mapped from the packed "
                    "bytes gives other results than the packed handle",
                    t->plugin, t->path ? t->path : "-", (unsigned)ga.m, (unsigned)qw->n,
                    (unsigned)qw->k);
        rc = EDGERT_E_PLUGIN;
    }
    return rc;
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
    if (rc == EDGERT_OK && t->packed_data != NULL && t->packed_map != NULL)
        rc = check_mapped(t, &qw, packed, &b, ga, err, err_len);
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
