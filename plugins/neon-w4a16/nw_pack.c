/*
 * plugins/neon-w4a16/nw_pack.c — canonical weights into the packed layout of
 * nw_kern.h, and (plugin ABI 2) the position-independent packed bytes a
 * cache writes to a file and maps back: packed_data and packed_map.
 * Compiled for baseline ARMv8-A like the dispatch file: nothing here needs
 * more than it.
 *
 * Packed bytes (layout NW_LAYOUT, "neon-w4a16/1"): the kit's pk_blob_header
 * (plugin_kit.h, which records the group G: 128, 64 or 32), then codes
 * [panels][groups][2G], scales fp32
 * [panels][groups][4], zero points [panels][groups][4], each on a 64-byte
 * boundary, the gaps zero. pack allocates an nw_packed handle followed by
 * them; packed_map checks them (the header against the shape and the size,
 * then every zero point, as pack refuses any above 15) and allocates only an
 * nw_packed pointing into the caller's bytes, which it never copies.
 *
 * The functions find the host through the instance state's first member
 * (the kit's convention, like pk_fini).
 */
#include <stdio.h>
#include <string.h>

#include "nw_kern.h"
#include "plugin_kit.h"

/* The packed bytes' layout (plugin_kit.h, pk_blob_header). */
static const pk_blob_id nw_blob = {
    NW_NAME, NW_LAYOUT, NW_BLOB_MAGIC, NW_LAYOUT_VERSION, 3u, {"codes", "scales", "zeros"},
};

static const edgert_host *nw_host(const void *state)
{
    return *(const edgert_host *const *)state;
}

typedef struct nw_pack_job {
    const edgert_qweights *w;
    uint8_t *codes;
    float *scales;
    uint8_t *zeros;
    size_t groups;
    unsigned chunks; /* group / 8 */
} nw_pack_job;

/* parallel_for task: panels [begin, end), written straight from the canonical form */
static void nw_pack_panels(void *arg, size_t begin, size_t end, unsigned worker)
{
    const nw_pack_job *job = arg;
    const edgert_qweights *w = job->w;
    const size_t stride = ((size_t)w->k + 1u) / 2u, groups = job->groups;
    const unsigned chunks = job->chunks;

    (void)worker;
    for (size_t p = begin; p < end; p++) {
        for (size_t g = 0; g < groups; g++) {
            const size_t pg = p * groups + g;
            uint8_t *tile = job->codes + pg * 16u * chunks;
            for (unsigned r = 0; r < NW_NR; r++) {
                const size_t row = p * NW_NR + r;
                if (row >= w->n) { /* padding row: contributes 0 */
                    for (unsigned t = 0; t < chunks; t++)
                        memset(tile + 16u * t + 4u * r, 0, 4u);
                    job->scales[pg * NW_NR + r] = 0.0f;
                    job->zeros[pg * NW_NR + r] = 0u;
                    continue;
                }
                const uint8_t *rc = w->codes + row * stride;
                for (unsigned t = 0; t < chunks; t++) {
                    const size_t c0 = g * w->group + 8u * t;
                    for (unsigned i = 0; i < 4u; i++)
                        tile[16u * t + 4u * r + i] =
                            (uint8_t)(pk_code(rc, c0 + i) | (pk_code(rc, c0 + 4u + i) << 4));
                }
                job->scales[pg * NW_NR + r] = w->scales[row * groups + g];
                job->zeros[pg * NW_NR + r] = w->zeros != NULL ? w->zeros[row * groups + g] : 8u;
            }
        }
    }
}

/* The header of the packed bytes of [n, k] in groups of g (k a multiple of
 * g): codes, scales and zero points of ceil(n / 4) panels x k / g groups.
 * pack and packed_map both derive it from the shape. 0, or -1 when a size
 * overflows. */
static int nw_layout(uint32_t n, uint32_t k, uint32_t g, uint32_t flags, pk_blob_header *h)
{
    const size_t panels = ((size_t)n + NW_NR - 1u) / NW_NR, groups = k / g;
    size_t pg, bytes[3];
    if (pk_mul(panels, groups, &pg) != 0 || pk_mul(pg, 2u * (size_t)g, &bytes[0]) != 0 ||
        pk_mul(pg, NW_NR * sizeof(float), &bytes[1]) != 0 || pk_mul(pg, NW_NR, &bytes[2]) != 0)
        return -1;
    return pk_blob_layout(&nw_blob, n, k, g, flags, bytes, h);
}

/* A handle over checked packed bytes (`blob`, described by `h`). */
static void nw_handle(nw_packed *p, const pk_blob_header *h, const void *blob, const char *name)
{
    memset(p, 0, sizeof *p);
    p->magic = NW_PACKED_MAGIC;
    p->n = h->n;
    p->k = h->k;
    p->group = h->group;
    p->chunks = h->group / 8u;
    p->groups = h->k / h->group;
    p->panels = ((size_t)h->n + NW_NR - 1u) / NW_NR;
    p->codes = pk_blob_at(blob, h, 0);
    p->scales = (const float *)(const void *)pk_blob_at(blob, h, 1);
    p->zeros = pk_blob_at(blob, h, 2);
    p->blob = blob;
    p->blob_bytes = (size_t)h->total;
    snprintf(p->name, sizeof p->name, "%s", name);
}

edgert_status nw_pack(void *state, const edgert_qweights *w, void **packed,
                      size_t *packed_bytes, char *err, size_t err_len)
{
    /* groups of 128, 64 or 32, whole groups: a packed tile holds a whole group */
    static const pk_layout_needs needs = {"int4-asym-g128", PK_GROUPS_32_64_128, 1, 0};
    const char *name = NULL;
    pk_blob_header h;
    size_t off, total;

    edgert_status rc = pk_check_pack(NW_NAME, state, w, packed, packed_bytes, &needs, &name, err,
                                     err_len);
    if (rc != EDGERT_OK)
        return rc;
    if (nw_layout(w->n, w->k, w->group, w->zeros == NULL ? PK_BLOB_SYMMETRIC : 0u, &h) != 0 ||
        pk_round_up(sizeof(nw_packed), NW_ALIGN, &off) != 0 ||
        pk_add(off, (size_t)h.total, &total) != 0) {
        edgert_errf(err, err_len, NW_NAME ": pack '%s' [n=%u k=%u]: packed size overflows size_t",
                    name, (unsigned)w->n, (unsigned)w->k);
        return EDGERT_E_NOMEM;
    }

    const edgert_host *host = nw_host(state);
    unsigned char *mem = host->alloc(host->host_ctx, total, NW_ALIGN);
    if (mem == NULL) {
        edgert_errf(err, err_len, NW_NAME ": pack '%s' [n=%u k=%u]: cannot allocate %zu bytes",
                    name, (unsigned)w->n, (unsigned)w->k, total);
        return EDGERT_E_NOMEM;
    }
    unsigned char *blob = mem + off;
    pk_blob_write_header(blob, &h);
    nw_packed *p = (nw_packed *)(void *)mem;
    nw_handle(p, &h, blob, name);
    nw_pack_job job = {
        .w = w,
        .codes = blob + h.section[0].offset,
        .scales = (float *)(void *)(blob + h.section[1].offset),
        .zeros = blob + h.section[2].offset,
        .groups = p->groups,
        .chunks = p->chunks,
    };
    size_t grain = NW_MIN_TASK_MACS / (NW_NR * (size_t)w->k) + 1u;
    host->parallel_for(host->host_ctx, p->panels, grain, nw_pack_panels, &job);
    *packed = p;
    *packed_bytes = total;
    return EDGERT_OK;
}

/* ---- mappable packed bytes (plugin ABI 2) ---------------------------------- */

edgert_status nw_packed_data(void *state, const void *packed, const void **data, size_t *size,
                             char *err, size_t err_len)
{
    const nw_packed *p = packed;
    const int ok = p != NULL && p->magic == NW_PACKED_MAGIC;
    return pk_packed_data(NW_NAME, state, ok, ok ? p->blob : NULL, ok ? p->blob_bytes : 0u, data,
                          size, err, err_len);
}

edgert_status nw_packed_map(void *state, const edgert_qweights *shape, const void *data,
                            size_t size, void **packed, char *err, size_t err_len)
{
    static const pk_layout_needs needs = {"int4-asym-g128", PK_GROUPS_32_64_128, 1, 0};
    const char *name = NULL;
    pk_blob_header expect, h;

    edgert_status rc = pk_check_map(&nw_blob, state, shape, data, size, packed, &needs, &name,
                                    err, err_len);
    if (rc != EDGERT_OK)
        return rc;
    if (nw_layout(shape->n, shape->k, shape->group, 0u, &expect) != 0) {
        edgert_errf(err, err_len, NW_NAME ": map '%s' [n=%u k=%u]: packed size overflows size_t",
                    name, (unsigned)shape->n, (unsigned)shape->k);
        return EDGERT_E_UNSUPPORTED;
    }
    rc = pk_blob_check(&nw_blob, name, data, size, &expect, &h, err, err_len);
    if (rc == EDGERT_OK)
        rc = pk_blob_check_zeros(&nw_blob, name, pk_blob_at(data, &h, 2),
                                 (size_t)h.section[2].bytes, err, err_len);
    if (rc != EDGERT_OK)
        return rc;
    const edgert_host *host = nw_host(state);
    nw_packed *p = host->alloc(host->host_ctx, sizeof *p, NW_ALIGN);
    if (p == NULL) {
        edgert_errf(err, err_len, NW_NAME ": map '%s': cannot allocate %zu bytes of header", name,
                    sizeof *p);
        return EDGERT_E_NOMEM;
    }
    nw_handle(p, &h, data, name);
    *packed = p;
    return EDGERT_OK;
}
