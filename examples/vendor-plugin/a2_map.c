/*
 * examples/vendor-plugin/a2_map.c — plugin ABI 2: the packed bytes a cache
 * writes to a file (packed_data) and maps back without repacking
 * (packed_map). Compiled without ISA flags.
 *
 * The bytes handed to packed_map are hostile (a file anyone may have
 * written, truncated or swapped): the header is copied once, every field is
 * checked against the caller's shape and `size` before any is used, sizes
 * with overflow-safe arithmetic, and the handle then points into the
 * caller's bytes, which are never copied, written or read past `size`.
 * The expected header comes from a2_blob_layout, the function pack writes
 * it with, so what map accepts is exactly what pack produces.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "a2_internal.h"

/* Bytes of one block of 128 inputs holding 128 / group weight groups. */
static uint32_t a2_block_bytes(uint32_t group)
{
    return A2_CODE_BYTES + (A2_GROUP / group) * A2_META_BYTES;
}

int a2_blob_layout(uint32_t n, uint32_t k, uint32_t group, a2_blob_header *out)
{
    memset(out, 0, sizeof *out);
    const uint64_t groups = ((uint64_t)k + A2_GROUP - 1u) / A2_GROUP;
    const size_t panels = ((size_t)n + A2_PANEL - 1u) / A2_PANEL;
    const uint64_t panel_bytes = groups * a2_block_bytes(group); /* < 2^37: no wrap */
    size_t blocks, total;
    if (panel_bytes > UINT32_MAX || a2_mul(panels, (size_t)panel_bytes, &blocks) != 0 ||
        a2_add(sizeof *out, blocks, &total) != 0)
        return -1;
    out->magic = A2_PACKED_MAGIC;
    out->version = A2_LAYOUT_VERSION;
    out->header_bytes = sizeof *out;
    out->n = n;
    out->k = k;
    out->group = group;
    out->nsections = 1u;
    out->total = total;
    out->section[0].offset = sizeof *out; /* 128: a multiple of EDGERT_PACKED_ALIGN */
    out->section[0].bytes = blocks;
    return 0;
}

void a2_handle(a2_packed *p, const a2_blob_header *h, const uint8_t *blob, const char *name)
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
    p->blocks = blob + h->section[0].offset;
    p->blob = blob;
    p->blob_bytes = (size_t)h->total;
    snprintf(p->name, sizeof p->name, "%s", name);
}

edgert_status a2_packed_data(void *state, const void *packed, const void **data, size_t *size,
                             char *err, size_t err_len)
{
    const a2_packed *p = packed;
    if (data != NULL)
        *data = NULL;
    if (size != NULL)
        *size = 0u;
    if (state == NULL || data == NULL || size == NULL || p == NULL ||
        p->magic != A2_HANDLE_MAGIC) {
        edgert_errf(err, err_len,
                    A2_NAME ": packed_data: NULL argument, or not an " A2_NAME " packed handle");
        return EDGERT_E_USAGE;
    }
    *data = p->blob;
    *size = p->blob_bytes;
    return EDGERT_OK;
}

/* EDGERT_E_PARSE: "<backend>: map '<tensor>' [n k group] (layout ...): <why>". */
__attribute__((format(printf, 5, 6))) static edgert_status
a2_bad_bytes(const edgert_qweights *shape, const char *tensor, char *err, size_t err_len,
             const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    edgert_errf(err, err_len, A2_NAME ": map '%s' [n=%u k=%u group=%u] (layout " A2_LAYOUT "): %s",
                tensor, (unsigned)shape->n, (unsigned)shape->k, (unsigned)shape->group, why);
    return EDGERT_E_PARSE;
}

/* The arguments, before any byte of the data is read: EDGERT_E_USAGE, or
 * EDGERT_E_UNSUPPORTED for a shape the layout cannot hold (pack refuses it
 * alike), or EDGERT_E_PARSE for bytes shorter than a header. */
static edgert_status a2_check_map_args(const a2_state *st, const edgert_qweights *shape,
                                       const void *data, size_t size, void **packed,
                                       const char **tensor, char *err, size_t err_len)
{
    const size_t need = offsetof(edgert_qweights, zeros) + sizeof(shape->zeros);
    if (packed != NULL)
        *packed = NULL;
    if (packed == NULL || st == NULL) {
        edgert_errf(err, err_len, A2_NAME ": packed_map: state or packed is NULL");
        return EDGERT_E_USAGE;
    }
    if (shape == NULL || shape->struct_size < need) {
        edgert_errf(err, err_len,
                    A2_NAME ": packed_map: shape is NULL or too small (struct_size %u, need "
                            ">= %zu)",
                    shape != NULL ? (unsigned)shape->struct_size : 0u, need);
        return EDGERT_E_USAGE;
    }
    const char *name = a2_tensor_name(shape);
    *tensor = name;
    const unsigned n = shape->n, k = shape->k, g = shape->group;
    if (n == 0u || k == 0u || g == 0u || data == NULL) {
        edgert_errf(err, err_len,
                    A2_NAME ": map '%s' [n=%u k=%u group=%u]: n, k and group must be > 0 and "
                            "data non-NULL",
                    name, n, k, g);
        return EDGERT_E_USAGE;
    }
    edgert_status rc = a2_check_groups("map", name, shape, err, err_len);
    if (rc != EDGERT_OK)
        return rc;
    if ((uintptr_t)data % EDGERT_PACKED_ALIGN != 0u) {
        edgert_errf(err, err_len,
                    A2_NAME ": map '%s' [n=%u k=%u group=%u]: data at %p are not aligned to "
                            "%u bytes",
                    name, n, k, g, data, EDGERT_PACKED_ALIGN);
        return EDGERT_E_USAGE;
    }
    if (size < sizeof(a2_blob_header))
        return a2_bad_bytes(shape, name, err, err_len,
                            "%zu bytes are shorter than the %zu-byte header (truncated?)", size,
                            sizeof(a2_blob_header));
    return EDGERT_OK;
}

/* The header `h` (a copy) against `want`, the caller's shape's, and `size`:
 * what the bytes are, for which shape, then where the blocks lie. */
static edgert_status a2_check_header(const edgert_qweights *shape, const char *tensor,
                                     const a2_blob_header *h, const a2_blob_header *want,
                                     size_t size, char *err, size_t err_len)
{
    static const uint8_t zero[sizeof h->reserved];
    if (h->magic != A2_PACKED_MAGIC)
        return a2_bad_bytes(shape, tensor, err, err_len,
                            __builtin_bswap32(h->magic) == A2_PACKED_MAGIC
                                ? "packed on a machine of the other byte order (magic 0x%08x)"
                                : "not " A2_NAME " packed data (magic 0x%08x)",
                            (unsigned)h->magic);
    if (h->version != A2_LAYOUT_VERSION)
        return a2_bad_bytes(shape, tensor, err, err_len,
                            "layout version %u; this plugin maps version %u only (pack again)",
                            (unsigned)h->version, A2_LAYOUT_VERSION);
    if (h->header_bytes != sizeof *h)
        return a2_bad_bytes(shape, tensor, err, err_len, "a header of %u bytes, not %zu",
                            (unsigned)h->header_bytes, sizeof *h);
    if (h->n != want->n || h->k != want->k || h->group != want->group)
        return a2_bad_bytes(shape, tensor, err, err_len,
                            "the bytes hold a tensor [n=%u k=%u group=%u], not the caller's "
                            "shape",
                            (unsigned)h->n, (unsigned)h->k, (unsigned)h->group);
    if (h->flags != 0u)
        return a2_bad_bytes(shape, tensor, err, err_len, "unknown flags 0x%x in the header",
                            (unsigned)h->flags);
    if (memcmp(h->reserved, zero, sizeof zero) != 0)
        return a2_bad_bytes(shape, tensor, err, err_len, "reserved header bytes are not zero");
    if (h->total != (uint64_t)size || h->total != want->total)
        return a2_bad_bytes(shape, tensor, err, err_len,
                            "the header says %llu bytes, %zu were given and the shape needs %llu",
                            (unsigned long long)h->total, size,
                            (unsigned long long)want->total);
    if (h->nsections != want->nsections)
        return a2_bad_bytes(shape, tensor, err, err_len, "%u sections, the layout has %u",
                            (unsigned)h->nsections, (unsigned)want->nsections);
    /* every section where the shape puts it (offsets and sizes compared,
     * never added): the blocks, then the unused ones all zero */
    for (unsigned i = 0; i < sizeof h->section / sizeof h->section[0]; i++)
        if (h->section[i].offset != want->section[i].offset ||
            h->section[i].bytes != want->section[i].bytes)
            return a2_bad_bytes(shape, tensor, err, err_len,
                                "section %u at offset %llu of %llu bytes; the shape needs offset "
                                "%llu, %llu bytes",
                                i, (unsigned long long)h->section[i].offset,
                                (unsigned long long)h->section[i].bytes,
                                (unsigned long long)want->section[i].offset,
                                (unsigned long long)want->section[i].bytes);
    return EDGERT_OK;
}

edgert_status a2_packed_map(void *state, const edgert_qweights *shape, const void *data,
                            size_t size, void **packed, char *err, size_t err_len)
{
    a2_state *st = state;
    const char *tensor = NULL;
    edgert_status rc = a2_check_map_args(st, shape, data, size, packed, &tensor, err, err_len);
    if (rc != EDGERT_OK)
        return rc;
    a2_blob_header want, h;
    if (a2_blob_layout(shape->n, shape->k, shape->group, &want) != 0) {
        edgert_errf(err, err_len, A2_NAME ": map '%s' [n=%u k=%u]: packed size overflows size_t",
                    tensor, (unsigned)shape->n, (unsigned)shape->k);
        return EDGERT_E_UNSUPPORTED;
    }
    memcpy(&h, data, sizeof h); /* read once: every check and use sees this copy */
    rc = a2_check_header(shape, tensor, &h, &want, size, err, err_len);
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
