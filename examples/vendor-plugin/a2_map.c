/*
 * examples/vendor-plugin/a2_map.c — plugin ABI 2: the packed bytes a cache
 * writes to a file (packed_data) and maps back without repacking
 * (packed_map). Compiled without ISA flags.
 *
 * The bytes handed to packed_map are hostile (a file anyone may have
 * written, truncated or swapped): the plugin kit checks the arguments
 * (pk_check_map) and the header, copied once, against the caller's shape and
 * `size` before any field is used, sizes with overflow-safe arithmetic
 * (pk_blob_check); the handle then points into the caller's bytes, which
 * are never copied, written or read past `size`. The expected header comes
 * from a2_blob_layout, the function pack writes it with, so what map
 * accepts is exactly what pack produces.
 */
#include <stdio.h>
#include <string.h>

#include "a2_internal.h"

const pk_blob_id a2_blob_id = {
    .plugin = A2_NAME, .layout = A2_LAYOUT, .magic = A2_PACKED_MAGIC,
    .version = A2_LAYOUT_VERSION, .nsections = 1u, .section_names = {"blocks"},
};

const pk_layout_needs a2_needs = {
    .layout = "int4-asym-g128", .group = PK_GROUPS_32_64_128, .whole_groups = 1,
    .finite_scales = 1,
};

/* Bytes of one block of 128 inputs holding 128 / group weight groups. */
static uint32_t a2_block_bytes(uint32_t group)
{
    return A2_CODE_BYTES + (A2_GROUP / group) * A2_META_BYTES;
}

int a2_blob_layout(uint32_t n, uint32_t k, uint32_t group, pk_blob_header *out)
{
    const uint64_t groups = ((uint64_t)k + A2_GROUP - 1u) / A2_GROUP;
    const size_t panels = ((size_t)n + A2_PANEL - 1u) / A2_PANEL;
    const uint64_t panel_bytes = groups * a2_block_bytes(group); /* < 2^37: no wrap */
    size_t blocks;
    memset(out, 0, sizeof *out);
    if (panel_bytes > UINT32_MAX || pk_mul(panels, (size_t)panel_bytes, &blocks) != 0)
        return -1;
    return pk_blob_layout(&a2_blob_id, n, k, group, 0u, &blocks, out);
}

void a2_handle(a2_packed *p, const pk_blob_header *h, const uint8_t *blob, const char *name)
{
    memset(p, 0, sizeof *p);
    p->magic = A2_HANDLE_MAGIC;
    p->n = h->n;
    p->k = h->k;
    p->groups = (uint32_t)(((uint64_t)h->k + A2_GROUP - 1u) / A2_GROUP);
    p->panels = (uint32_t)(((size_t)h->n + A2_PANEL - 1u) / A2_PANEL);
    p->group = h->group;
    p->sub = A2_GROUP / h->group;
    p->block_bytes = a2_block_bytes(h->group);
    p->panel_bytes = p->groups * p->block_bytes; /* < 2^32: a2_blob_layout */
    p->kpad = p->groups * A2_GROUP;
    p->blocks = pk_blob_at(blob, h, 0u);
    p->blob = blob;
    p->blob_bytes = (size_t)h->total;
    snprintf(p->name, sizeof p->name, "%s", name);
}

edgert_status a2_packed_data(void *state, const void *packed, const void **data, size_t *size,
                             char *err, size_t err_len)
{
    const a2_packed *p = packed;
    const int ok = p != NULL && p->magic == A2_HANDLE_MAGIC;
    return pk_packed_data(A2_NAME, state, ok, ok ? p->blob : NULL, ok ? p->blob_bytes : 0u, data,
                          size, err, err_len);
}

edgert_status a2_packed_map(void *state, const edgert_qweights *shape, const void *data,
                            size_t size, void **packed, char *err, size_t err_len)
{
    a2_state *st = state;
    const char *tensor = NULL;
    edgert_status rc = pk_check_map(&a2_blob_id, st, shape, data, size, packed, &a2_needs,
                                    &tensor, err, err_len);
    if (rc != EDGERT_OK)
        return rc;
    pk_blob_header want, h;
    if (a2_blob_layout(shape->n, shape->k, shape->group, &want) != 0) {
        edgert_errf(err, err_len, A2_NAME ": map '%s' [n=%u k=%u]: packed size overflows size_t",
                    tensor, (unsigned)shape->n, (unsigned)shape->k);
        return EDGERT_E_UNSUPPORTED;
    }
    rc = pk_blob_check(&a2_blob_id, tensor, data, size, &want, &h, err, err_len);
    if (rc != EDGERT_OK)
        return rc;
    const edgert_host *host = st->host;
    a2_packed *p = host->alloc(host->host_ctx, sizeof *p, A2_ALIGN);
    if (p == NULL) {
        edgert_errf(err, err_len, A2_NAME ": map '%s': cannot allocate %zu bytes of handle",
                    tensor, sizeof *p);
        return EDGERT_E_NOMEM;
    }
    a2_handle(p, &h, data, tensor);
    *packed = p;
    return EDGERT_OK;
}
