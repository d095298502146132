/*
 * examples/vendor-plugin/a2_pack.c — canonical int4 weights (plugin.h,
 * edgert_qweights) into the avx2-w4a16 layout (a2_internal.h): the checks a
 * pack must make (the plugin kit's pk_check_pack), then the repack, straight
 * into the final allocation.
 * Compiled without ISA flags.
 *
 * Memory: the packed form is one host allocation (the 128-byte handle, the
 * packed bytes' 128-byte header, then the blocks: a2_internal.h); the
 * repack reads 4 canonical bytes and writes one code dword at a time, so
 * the transient memory above the packed size is zero whatever n and k
 * (architecture.md, Measured background: the peak is what a device must hold).
 */
#include <stdio.h>
#include <string.h>

#include "a2_internal.h"

typedef struct a2_pack_job {
    const edgert_qweights *w;
    uint8_t *data;
    size_t panel_bytes;
    uint32_t groups; /* blocks per panel */
    uint32_t sub;    /* weight groups per block */
    size_t block_bytes;
} a2_pack_job;

/* fp32 scale rounded to 20 significant bits, z in the freed 4 bits. */
static uint32_t a2_meta_word(float s, unsigned z)
{
    uint32_t u;
    memcpy(&u, &s, sizeof u);
    uint32_t r = (u + 8u) & ~15u; /* round half up on the magnitude */
    if (((r >> 23) & 0xFFu) == 0xFFu)
        r = u & ~15u; /* rounding would overflow to inf: truncate instead */
    return r | (uint32_t)z;
}

/* The code dword of one column's octet: canonical bytes b[0..3] hold inputs
 * 0..7 (low nibble first); nibble i of the result is input A2_NIB_K[i]. */
static uint32_t a2_octet_dword(const uint8_t *b)
{
    static const unsigned nib_k[8] = A2_NIB_K;
    uint32_t d = 0u;
    for (unsigned i = 0; i < 8u; i++) {
        unsigned kk = nib_k[i];
        unsigned q = (kk & 1u) ? (unsigned)(b[kk / 2u] >> 4) : (unsigned)(b[kk / 2u] & 15u);
        d |= (uint32_t)q << (4u * i);
    }
    return d;
}

/* One (panel, block) block; columns past n, and inputs past k, are zero
 * codes and zero meta. */
static void a2_pack_block(const a2_pack_job *pj, size_t p, uint32_t g, uint8_t *blk)
{
    const edgert_qweights *w = pj->w;
    const size_t stride = (size_t)w->k / 2u; /* k is a multiple of the group: even */
    const size_t wgroups = (size_t)w->k / w->group, k0 = (size_t)g * A2_GROUP;
    for (unsigned j = 0; j < A2_PANEL; j++) {
        size_t col = p * A2_PANEL + j;
        const int have = col < w->n;
        /* a row's codes only for rows that exist (no pointer past the array) */
        const uint8_t *src = have ? w->codes + col * stride + k0 / 2u : NULL;
        for (unsigned t = 0; t < A2_OCTETS; t++) {
            /* an octet lies wholly before or past k (k is a multiple of 32) */
            uint32_t d = have && k0 + 8u * t < w->k ? a2_octet_dword(src + 4u * t) : 0u;
            memcpy(blk + A2_OCTET_BYTES * t + 4u * j, &d, 4u);
        }
        for (uint32_t s = 0; s < pj->sub; s++) {
            size_t wg = (size_t)g * pj->sub + s, gi = col * wgroups + wg;
            uint32_t meta = have && wg < wgroups
                                ? a2_meta_word(w->scales[gi], w->zeros != NULL ? w->zeros[gi] : 8u)
                                : 0u;
            memcpy(blk + A2_CODE_BYTES + A2_META_BYTES * s + 4u * j, &meta, 4u);
        }
    }
}

/* Pack panels [begin, end) (an edgert_range_fn for parallel_for). */
static void a2_pack_panels(void *arg, size_t begin, size_t end, unsigned worker)
{
    const a2_pack_job *pj = arg;
    (void)worker;
    for (size_t p = begin; p < end; p++) {
        uint8_t *blk = pj->data + p * pj->panel_bytes;
        for (uint32_t g = 0; g < pj->groups; g++, blk += pj->block_bytes)
            a2_pack_block(pj, p, g, blk);
    }
}

edgert_status a2_pack(void *state, const edgert_qweights *w, void **packed, size_t *packed_bytes,
                      char *err, size_t err_len)
{
    const a2_state *st = state;
    const char *name = NULL;
    /* the kit's checks before any allocation: out-pointers, the descriptor,
     * the shape the layout holds, zero points in [0, 15], finite scales */
    edgert_status rc = pk_check_pack(A2_NAME, st, w, packed, packed_bytes, &a2_needs, &name, err,
                                     err_len);
    if (rc != EDGERT_OK)
        return rc;

    pk_blob_header h;
    size_t total;
    if (a2_blob_layout(w->n, w->k, w->group, &h) != 0 ||
        pk_add(A2_HANDLE_BYTES, h.total, &total) != 0) {
        edgert_errf(err, err_len, A2_NAME ": pack '%s' [n=%u k=%u]: packed size overflows size_t",
                    name, (unsigned)w->n, (unsigned)w->k);
        return EDGERT_E_NOMEM;
    }
    const edgert_host *host = st->host;
    uint8_t *mem = host->alloc(host->host_ctx, total, A2_ALIGN);
    if (mem == NULL) {
        edgert_errf(err, err_len, A2_NAME ": pack '%s' [n=%u k=%u]: cannot allocate %zu bytes",
                    name, (unsigned)w->n, (unsigned)w->k, total);
        return EDGERT_E_NOMEM;
    }

    /* the handle, then the packed bytes: their header, then the blocks
     * (the header's padding-free layout leaves no byte unwritten) */
    a2_packed *p = (a2_packed *)(void *)mem;
    uint8_t *blob = mem + A2_HANDLE_BYTES;
    pk_blob_write_header(blob, &h);
    a2_handle(p, &h, blob, name);

    a2_pack_job pj = {.w = w, .data = blob + h.section[0].offset,
                      .panel_bytes = p->panel_bytes, .groups = p->groups, .sub = p->sub,
                      .block_bytes = p->block_bytes};
    host->parallel_for(host->host_ctx, p->panels, 16u, a2_pack_panels, &pj);

    *packed = p;
    *packed_bytes = total;
    return EDGERT_OK;
}

void a2_packed_free(void *state, void *packed)
{
    const a2_state *st = state;
    if (st == NULL || packed == NULL)
        return;
    st->host->free(st->host->host_ctx, packed);
}
