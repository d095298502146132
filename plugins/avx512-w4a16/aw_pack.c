/*
 * plugins/avx512-w4a16/aw_pack.c — the packed layout (aw_internal.h): pack
 * from canonical weights, the header of the mappable bytes, and mapping
 * them back (plugin ABI 2). Built without ISA flags, as the dispatch file:
 * packing runs on any x86-64 CPU.
 */
#include <stdio.h>
#include <string.h>

#include "aw_internal.h"
#include "plugin_kit.h"

/* The packed bytes' layout (plugin_kit.h, pk_blob_header): one section. */
const pk_blob_id aw_blob = {
    AW_NAME, AW_LAYOUT, AW_BLOB_MAGIC, AW_LAYOUT_VERSION, 1u, {"panels"},
};

/* The instance's host table: the first field of every in-tree plugin's
 * state (pk_fini and pk_packed_free find it the same way). */
static const edgert_host *aw_host(const void *state)
{
    return *(const edgert_host *const *)state;
}

typedef struct aw_pack_job {
    const edgert_qweights *w;
    uint8_t *data;
    size_t panel_bytes, block_bytes;
    uint32_t groups, sub, wgroups; /* blocks, groups per block, the weights' groups */
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

/* Block g of column col: its 16 code dwords into blk (one per octet, lane
 * j), zero past k (k is a multiple of the group, so of 32: an octet is
 * wholly in or out). */
static void aw_pack_codes(const edgert_qweights *w, size_t col, uint32_t g, unsigned j,
                          uint8_t *blk)
{
    static const unsigned nib_k[8] = AW_NIB_K;
    const size_t stride = ((size_t)w->k + 1u) / 2u;
    for (unsigned t = 0; t < AW_OCTETS; t++) {
        const size_t k0 = (size_t)g * AW_GROUP + 8u * t;
        uint32_t d = 0u;
        if (col < w->n && k0 < w->k) {
            const uint8_t *b = w->codes + col * stride + k0 / 2u; /* inputs k0 .. k0+7 */
            for (unsigned i = 0; i < 8u; i++) {
                unsigned kk = nib_k[i];
                unsigned q = (kk & 1u) ? (unsigned)(b[kk / 2u] >> 4) : (unsigned)(b[kk / 2u] & 15u);
                d |= (uint32_t)q << (4u * i);
            }
        }
        memcpy(blk + 64u * t + 4u * j, &d, 4u);
    }
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
    (void)worker;

    for (size_t p = begin; p < end; p++) {
        uint8_t *blk = pj->data + p * pj->panel_bytes;
        for (uint32_t g = 0; g < pj->groups; g++, blk += pj->block_bytes) {
            for (unsigned j = 0; j < AW_PANEL; j++) {
                size_t col = p * AW_PANEL + j;
                aw_pack_codes(w, col, g, j, blk);
                for (unsigned s = 0; s < pj->sub; s++) {
                    size_t wg = (size_t)g * pj->sub + s, gi = col * pj->wgroups + wg;
                    uint32_t meta = 0u; /* past n or past k: never counts */
                    if (col < w->n && wg < pj->wgroups)
                        meta = aw_meta_word(w->scales[gi], w->zeros != NULL ? w->zeros[gi] : 8u);
                    memcpy(blk + AW_CODE_BYTES + (size_t)s * AW_META_BYTES + 4u * j, &meta, 4u);
                }
            }
        }
    }
}

/* The header of the packed bytes of [n, k] in groups of `group`: the panels,
 * ceil(n / 16) of ceil(k / 128) blocks of 1024 + 64 * 128 / group bytes
 * each. 0, or -1 when a size overflows (or a panel would not fit the
 * handle's 32 bits). */
static int aw_layout(uint32_t n, uint32_t k, uint32_t group, uint32_t flags, pk_blob_header *h)
{
    const size_t panels = ((size_t)n + AW_PANEL - 1u) / AW_PANEL;
    const size_t blocks = ((size_t)k + AW_GROUP - 1u) / AW_GROUP;
    const size_t panel_bytes = blocks * (AW_CODE_BYTES + (AW_GROUP / group) * AW_META_BYTES);
    size_t bytes;
    if (panel_bytes > UINT32_MAX || pk_mul(panels, panel_bytes, &bytes) != 0)
        return -1;
    return pk_blob_layout(&aw_blob, n, k, group, flags, &bytes, h);
}

/* A handle over checked packed bytes (`blob`, described by `h`). */
static void aw_handle(aw_packed *p, const pk_blob_header *h, const void *blob, const char *name)
{
    memset(p, 0, sizeof *p);
    p->magic = AW_PACKED_MAGIC;
    p->n = h->n;
    p->k = h->k;
    p->group = h->group;
    p->sub = AW_GROUP / h->group;
    p->block_bytes = AW_CODE_BYTES + p->sub * AW_META_BYTES;
    p->groups = (uint32_t)(((size_t)h->k + AW_GROUP - 1u) / AW_GROUP);
    p->kpad = p->groups * AW_GROUP;
    p->panels = (uint32_t)(((size_t)h->n + AW_PANEL - 1u) / AW_PANEL);
    p->panel_bytes = p->groups * p->block_bytes;
    p->data = pk_blob_at(blob, h, 0);
    p->blob = blob;
    p->blob_bytes = (size_t)h->total;
    snprintf(p->name, sizeof p->name, "%s", name);
}

edgert_status aw_pack(void *state, const edgert_qweights *w, void **packed, size_t *packed_bytes,
                      char *err, size_t err_len)
{
    /* groups of 128, 64 or 32, whole groups (k a multiple of the group);
     * finite scales (the meta word keeps 20 significant bits of the scale:
     * an inf or NaN would lose its meaning) */
    static const pk_layout_needs needs = {"int4-asym-g128", PK_GROUPS_32_64_128, 1, 1};
    const char *name = NULL;
    pk_blob_header h;
    edgert_status rc = pk_check_pack(AW_NAME, state, w, packed, packed_bytes, &needs, &name, err,
                                     err_len);
    if (rc != EDGERT_OK)
        return rc;

    size_t total;
    const size_t off = aw_round64(sizeof(aw_packed)); /* the handle, then the packed bytes */
    if (aw_layout(w->n, w->k, w->group, w->zeros == NULL ? PK_BLOB_SYMMETRIC : 0u, &h) != 0 ||
        pk_add(off, (size_t)h.total, &total) != 0) {
        edgert_errf(err, err_len, AW_NAME ": pack '%s' [n=%u k=%u]: packed size overflows size_t",
                    name, (unsigned)w->n, (unsigned)w->k);
        return EDGERT_E_NOMEM;
    }
    const edgert_host *host = aw_host(state);
    uint8_t *mem = host->alloc(host->host_ctx, total, AW_ALIGN);
    if (mem == NULL) {
        edgert_errf(err, err_len, AW_NAME ": pack '%s' [n=%u k=%u]: cannot allocate %zu bytes",
                    name, (unsigned)w->n, (unsigned)w->k, total);
        return EDGERT_E_NOMEM;
    }

    aw_packed *p = (aw_packed *)(void *)mem;
    pk_blob_write_header(mem + off, &h);
    aw_handle(p, &h, mem + off, name);
    aw_pack_job pj = {.w = w, .data = mem + off + h.section[0].offset,
                      .panel_bytes = p->panel_bytes, .block_bytes = p->block_bytes,
                      .groups = p->groups, .sub = p->sub, .wgroups = w->k / w->group};
    host->parallel_for(host->host_ctx, p->panels, 16u, aw_pack_panels, &pj);

    *packed = p;
    *packed_bytes = total;
    return EDGERT_OK;
}

/* ---- mappable packed bytes (plugin ABI 2) ----------------------------------------- */

edgert_status aw_packed_data(void *state, const void *packed, const void **data, size_t *size,
                             char *err, size_t err_len)
{
    const aw_packed *p = packed;
    const int ok = p != NULL && p->magic == AW_PACKED_MAGIC;
    return pk_packed_data(AW_NAME, state, ok, ok ? p->blob : NULL, ok ? p->blob_bytes : 0u, data,
                          size, err, err_len);
}

edgert_status aw_packed_map(void *state, const edgert_qweights *shape, const void *data,
                            size_t size, void **packed, char *err, size_t err_len)
{
    static const pk_layout_needs needs = {"int4-asym-g128", PK_GROUPS_32_64_128, 1, 0};
    const char *name = NULL;
    pk_blob_header expect, h;
    edgert_status rc = pk_check_map(&aw_blob, state, shape, data, size, packed, &needs, &name,
                                    err, err_len);
    if (rc != EDGERT_OK)
        return rc;
    if (aw_layout(shape->n, shape->k, shape->group, 0u, &expect) != 0) {
        edgert_errf(err, err_len, AW_NAME ": map '%s' [n=%u k=%u]: packed size overflows size_t",
                    name, (unsigned)shape->n, (unsigned)shape->k);
        return EDGERT_E_UNSUPPORTED;
    }
    rc = pk_blob_check(&aw_blob, name, data, size, &expect, &h, err, err_len);
    if (rc != EDGERT_OK)
        return rc;
    const edgert_host *host = aw_host(state);
    aw_packed *p = host->alloc(host->host_ctx, sizeof *p, AW_ALIGN);
    if (p == NULL) {
        edgert_errf(err, err_len, AW_NAME ": map '%s': cannot allocate %zu bytes of header", name,
                    sizeof *p);
        return EDGERT_E_NOMEM;
    }
    aw_handle(p, &h, data, name);
    *packed = p;
    return EDGERT_OK;
}
