/*
 * core/weights/packfile.c — packed-weight files (edgert.h: edgert_checkpoint_pack,
 * _pack_check, _layer_packed): a checkpoint packed once for one backend,
 * mapped by later runs and used with no repacking.
 *
 * Container: safetensors (core/formats/safetensors.h), so any safetensors tool can
 * list it. The data section and every tensor start at a 4 KiB boundary
 * (the header is padded with spaces, each tensor's bytes with zeros), which
 * satisfies any plugin's EDGERT_PACKED_ALIGN. Metadata (the keys):
 *   edgert_packed_format  "1"
 *   backend, layout       the backend's name and packed layout id (plugin.h)
 *   plugin_xxh3           XXH3-64 of the plugin file the bytes came from
 *   source                the checkpoint packed (for people; not a key)
 *   layer:<P>             "n=<n> k=<k> group=<g> sym=<0|1> bytes=<b> source=<xxh3>",
 *                         then " act_order=1" for a layer with a "<P>.perm"
 * and one tensor "<P>.packed" (U8, the plugin's bytes then zero padding) per
 * layer; after them, for each act-order layer, "<P>.perm" (I32 [k], the
 * order of its inputs: edgert_qweights.perm), which the GEMMs on the
 * mapped bytes gather the activations by. A layer's source XXH3 covers
 * its format ("gptq-v1", "dense-bf16", ...: the conversion applied) and
 * the bytes of every tensor it came from (qweight, qzeros, scales, g_idx;
 * or the dense weight), so a changed
 * checkpoint, plugin file or layout never reuses stale bytes.
 *
 * Memory while packing: one layer in canonical form and the plugin's packed
 * copy of it; the source is read from its mapping and the output streamed
 * to the file (the header is written last, into space kept for it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "weights/checkpoint.h"
#include "context/context.h"
#include "run/backend.h"

#define PF_VERSION "1"
#define PF_ALIGN 4096u

static void hex64(uint64_t v, char out[17])
{
    snprintf(out, 17, "%016" PRIx64, v);
}

/* ---- keys ------------------------------------------------------------------------------ */

static void hash_tensor(XXH3_state_t *s, const st_file *sf, const st_tensor *t)
{
    if (!t)
        return;
    XXH3_64bits_update(s, t->name, strlen(t->name) + 1);
    XXH3_64bits_update(s, st_data(sf, t), (size_t)(t->end - t->begin));
}

static int layer_source_hash(const edgert_checkpoint *c, size_t i, uint64_t *out)
{
    XXH3_state_t *s = XXH3_createState();
    if (!s || XXH3_64bits_reset(s) != XXH_OK) {
        XXH3_freeState(s);
        return -1;
    }
    const er_ck_layer *l = &c->src[i];
    XXH3_64bits_update(s, c->pub[i].format, strlen(c->pub[i].format) + 1);
    hash_tensor(s, &c->sf, l->qweight);
    hash_tensor(s, &c->sf, l->qzeros);
    hash_tensor(s, &c->sf, l->scales);
    hash_tensor(s, &c->sf, l->g_idx);
    hash_tensor(s, &c->sf, l->dense);
    *out = XXH3_64bits_digest(s);
    XXH3_freeState(s);
    return 0;
}

/* The backend-side keys of a packed file against instance b. */
static edgert_status keys_match(const edgert_checkpoint *c, const edgert_backend *b, char *err,
                                size_t len)
{
    const char *name = edgert_backend_name(b), *layout = edgert_backend_packed_layout(b);
    const char *fb = st_meta_get(&c->sf, "backend"), *fl = st_meta_get(&c->sf, "layout");
    const char *fx = st_meta_get(&c->sf, "plugin_xxh3");
    char hx[17];
    hex64(er_backend_cand(b)->lib_hash, hx);
    if (!fb || strcmp(fb, name))
        return er_fail(EDGERT_E_UNSUPPORTED, err, len, "%s: packed for backend '%s', not '%s'",
                       c->sf.path, fb ? fb : "?", name);
    if (!layout)
        return er_fail(EDGERT_E_UNSUPPORTED, err, len, "backend '%s' cannot map a packed form "
                       "(its plugin does not implement ABI 2's packed_map)", name);
    if (!fl || strcmp(fl, layout))
        return er_fail(EDGERT_E_UNSUPPORTED, err, len, "%s: packed layout '%s', but %s now uses "
                       "'%s' (another code path or plugin version)", c->sf.path, fl ? fl : "?",
                       name, layout);
    if (!fx || strcmp(fx, hx))
        return er_fail(EDGERT_E_UNSUPPORTED, err, len, "%s: packed by a plugin file with XXH3 "
                       "%s; %s's file now has %s", c->sf.path, fx ? fx : "?", name, hx);
    return EDGERT_OK;
}

/* ---- reading a packed file (edgert_checkpoint_open) ------------------------------------ */

static edgert_status packed_layer(edgert_checkpoint *c, const st_tensor *t, size_t *cap, char *err,
                                  size_t len);

/* Tensor "<P>.perm" of a listed layer P: I32 [k], a permutation of 0..k-1,
 * copied into the layer's perm. */
static edgert_status packed_perm(edgert_checkpoint *c, const st_tensor *t, char *err, size_t len)
{
    size_t pl = strlen(t->name) - strlen(".perm"), i = 0;
    while (i < c->n && (strlen(c->pub[i].name) != pl || strncmp(c->pub[i].name, t->name, pl)))
        i++;
    if (i == c->n)
        return er_fail(EDGERT_E_PARSE, err, len, "%s: tensor '%s' is the order of no layer "
                       "(no '%.*s.packed')", c->sf.path, t->name, (int)pl, t->name);
    const uint32_t k = c->pub[i].k;
    if (!c->src[i].act_order)
        return er_fail(EDGERT_E_PARSE, err, len, "%s: tensor '%s' is an order for layer '%s', "
                       "whose metadata does not say act_order=1", c->sf.path, t->name,
                       c->pub[i].name);
    if (t->dtype != ST_I32 || t->ndim != 1 || t->shape[0] != k || c->src[i].perm)
        return er_fail(EDGERT_E_PARSE, err, len, "%s: tensor '%s': %s, %u dims; expected I32 "
                       "[%u], once", c->sf.path, t->name, t->dtype_name, t->ndim, k);
    uint32_t *perm = malloc((size_t)k * sizeof *perm);
    uint32_t *inv = malloc((size_t)k * sizeof *inv);
    if (!perm || !inv) {
        free(perm);
        free(inv);
        return er_fail(EDGERT_E_NOMEM, err, len, "%s: out of memory", c->sf.path);
    }
    const unsigned char *d = st_data(&c->sf, t);
    for (uint32_t j = 0; j < k; j++)
        perm[j] = (uint32_t)d[4 * j] | (uint32_t)d[4 * j + 1] << 8 |
                  (uint32_t)d[4 * j + 2] << 16 | (uint32_t)d[4 * j + 3] << 24;
    uint32_t j = er_perm_invert(perm, k, inv);
    free(inv);
    edgert_status st = EDGERT_OK;
    if (j < k) {
        st = er_fail(EDGERT_E_PARSE, err, len, "%s: tensor '%s' [%u] = %d: not a permutation "
                     "of 0..%u", c->sf.path, t->name, j, (int32_t)perm[j], k - 1u);
        free(perm);
    } else {
        c->src[i].perm = perm;
    }
    return st;
}

edgert_status er_ck_open_packed(edgert_checkpoint *c, char *err, size_t err_len)
{
    const char *v = st_meta_get(&c->sf, "edgert_packed_format");
    if (strcmp(v, PF_VERSION))
        return er_fail(EDGERT_E_UNSUPPORTED, err, err_len, "%s: packed-file format '%s'; this "
                       "edgert reads format " PF_VERSION " (repack it with 'edgert pack')",
                       c->sf.path, v);
    if (c->sf.data_start % PF_ALIGN)
        return er_fail(EDGERT_E_PARSE, err, err_len, "%s: the data section starts at byte %llu, "
                       "not at a 4096-byte boundary", c->sf.path,
                       (unsigned long long)c->sf.data_start);
    size_t cap = 0;
    for (size_t i = 0; i < c->sf.n; i++) {
        edgert_status st = er_ck_ends_with(c->sf.t[i].name, ".perm")
                               ? EDGERT_OK
                               : packed_layer(c, &c->sf.t[i], &cap, err, err_len);
        if (st)
            return st;
    }
    for (size_t i = 0; i < c->sf.n; i++) {
        edgert_status st = er_ck_ends_with(c->sf.t[i].name, ".perm")
                               ? packed_perm(c, &c->sf.t[i], err, err_len)
                               : EDGERT_OK;
        if (st)
            return st;
    }
    for (size_t i = 0; i < c->n; i++) /* mapped without its order, it would run wrong */
        if (c->src[i].act_order && !c->src[i].perm)
            return er_fail(EDGERT_E_PARSE, err, err_len, "%s: layer '%s' says act_order=1 but "
                           "there is no tensor '%s.perm'", c->sf.path, c->pub[i].name,
                           c->pub[i].name);
    /* what the gates compare before any plugin maps it (gate.c: the backend
     * it is for, and its plugin file's XXH3): without them every backend
     * would pass and the mismatch show only at map time */
    static const char *const need[] = {"backend", "layout", "plugin_xxh3"};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        const char *m = st_meta_get(&c->sf, need[i]);
        if (!m || !*m)
            return er_fail(EDGERT_E_PARSE, err, err_len, "%s: a packed file without '%s' in "
                           "its metadata ('edgert pack' writes it)", c->sf.path, need[i]);
    }
    const char *hx = st_meta_get(&c->sf, "plugin_xxh3");
    if (strlen(hx) != 16 || strspn(hx, "0123456789abcdefABCDEF") != 16)
        return er_fail(EDGERT_E_PARSE, err, err_len, "%s: metadata 'plugin_xxh3' is '%s', not "
                       "16 hex digits", c->sf.path, hx);
    return EDGERT_OK;
}

static edgert_status packed_layer(edgert_checkpoint *c, const st_tensor *t, size_t *cap, char *err,
                                  size_t len)
{
    size_t nl = strlen(t->name), sl = strlen(".packed");
    if (nl <= sl || strcmp(t->name + nl - sl, ".packed"))
        return er_fail(EDGERT_E_PARSE, err, len, "%s: tensor '%s' is not '<layer>.packed'",
                       c->sf.path, t->name);
    if (t->dtype != ST_U8 || t->ndim != 1 || t->begin % PF_ALIGN)
        return er_fail(EDGERT_E_PARSE, err, len, "%s: tensor '%s': %s, %u dims, at byte %llu; "
                       "expected U8 [bytes] at a 4096-byte boundary", c->sf.path, t->name,
                       t->dtype_name, t->ndim, (unsigned long long)t->begin);
    char key[4200];
    snprintf(key, sizeof key, "layer:%.*s", (int)(nl - sl), t->name);
    const char *v = st_meta_get(&c->sf, key);
    unsigned long long n, k, g, sym, bytes;
    char hx[17] = "";
    int used = 0;
    if (!v || sscanf(v, "n=%llu k=%llu group=%llu sym=%llu bytes=%llu source=%16[0-9a-f]%n", &n,
                     &k, &g, &sym, &bytes, hx, &used) != 6 ||
        (v[used] && strcmp(v + used, " act_order=1")) || strlen(hx) != 16 ||
        !n || !k || !g || n > UINT32_MAX || k > UINT32_MAX || g > UINT32_MAX || sym > 1 ||
        bytes > t->end - t->begin)
        return er_fail(EDGERT_E_PARSE, err, len, "%s: tensor '%s': metadata '%s' is %s%s%s; "
                       "expected \"n=N k=K group=G sym=0|1 bytes=B source=<16 hex>\" with B "
                       "within the tensor, then \" act_order=1\" or nothing", c->sf.path,
                       t->name, key, v ? "'" : "missing", v ? v : "", v ? "'" : "");
    er_ck_layer s = {.packed = t, .packed_bytes = bytes, .source_hash = strtoull(hx, NULL, 16),
                     .act_order = v[used] != '\0'};
    edgert_status st = er_ck_add_layer(c, key + 6, strlen(key + 6), &s, cap);
    if (st)
        return er_fail(st, err, len, "%s: out of memory", c->sf.path);
    edgert_layer *l = &c->pub[c->n - 1];
    l->n = (uint32_t)n, l->k = (uint32_t)k, l->group = (uint32_t)g, l->symmetric = (int)sym;
    l->format = "packed";
    return EDGERT_OK;
}

/* ---- is the file up to date? ----------------------------------------------------------- */

edgert_status edgert_checkpoint_pack_check(edgert_backend *b, edgert_checkpoint *src,
                                           const char *path, char *err, size_t err_len)
{
    if (!b || !src || !path)
        return er_fail(EDGERT_E_USAGE, err, err_len, "edgert_checkpoint_pack_check: NULL argument");
    if (access(path, F_OK) != 0 && errno == ENOENT)
        return er_fail(EDGERT_E_NOT_FOUND, err, err_len, "%s: no such file", path);
    edgert_checkpoint *p = NULL;
    edgert_status st = edgert_checkpoint_open(path, &p, err, err_len);
    if (st) /* not a packed file this edgert reads (an act-order GPTQ file is E_UNSUPPORTED
               too): E_PARSE, which `edgert pack` never replaces */
        return EDGERT_E_PARSE;
    if (p->kind != ER_CK_PACKED)
        st = er_fail(EDGERT_E_PARSE, err, err_len, "%s: a %s checkpoint, not a packed file", path,
                     edgert_checkpoint_kind(p));
    st = st ? st : keys_match(p, b, err, err_len);
    if (!st && p->n != src->n)
        st = er_fail(EDGERT_E_UNSUPPORTED, err, err_len, "%s: %zu layers; %s has %zu", path,
                     p->n, src->sf.path, src->n);
    for (size_t i = 0; !st && i < p->n; i++) {
        uint64_t h = 0;
        int hashed = layer_source_hash(src, i, &h);
        er_ck_release(src, i); /* read once: keep the resident set to one layer */
        if (hashed)
            st = er_fail(EDGERT_E_NOMEM, err, err_len, "out of memory");
        else if (strcmp(p->pub[i].name, src->pub[i].name) || p->src[i].source_hash != h)
            st = er_fail(EDGERT_E_UNSUPPORTED, err, err_len, "%s: layer '%s' was packed from "
                         "other weights than %s's '%s' (source XXH3 differs)", path,
                         p->pub[i].name, src->sf.path, src->pub[i].name);
        else if (p->pub[i].group != er_ck_layer_group(src, i)) /* the same weights, grouped
                                                                   by an older rule */
            st = er_fail(EDGERT_E_UNSUPPORTED, err, err_len, "%s: layer '%s' was packed in "
                         "groups of %u; %s's converts in groups of %u now", path,
                         p->pub[i].name, p->pub[i].group, src->sf.path,
                         er_ck_layer_group(src, i));
    }
    edgert_checkpoint_close(p);
    return st;
}

/* ---- writing one ----------------------------------------------------------------------- */

/* Pack layer i and append it: the plugin's bytes, zero padding, its key. */
static edgert_status pack_layer(st_writer *w, edgert_backend *b, edgert_checkpoint *src, size_t i,
                                char *err, size_t len)
{
    static const unsigned char zeros[PF_ALIGN];
    const edgert_layer *l = &src->pub[i];
    edgert_qtensor q;
    edgert_packed *pk = NULL;
    const void *data = NULL;
    size_t size = 0;
    uint64_t h = 0;
    edgert_status st =
        er_checkpoint_layer_weights(src, i, er_backend_cand(b)->m.symmetric == 1, &q, err, len);
    uint32_t group = q.view.group;
    int sym = q.codes != NULL && q.zeros == NULL;
    if (!st && layer_source_hash(src, i, &h))
        st = er_fail(EDGERT_E_NOMEM, err, len, "out of memory");
    er_ck_release(src, i); /* the source's pages: read, not needed again */
    st = st ? st : edgert_pack(b, &q.view, &pk, err, len);
    edgert_qtensor_free(&q);
    st = st ? st : edgert_packed_data(pk, &data, &size, err, len);
    if (!st) {
        char name[4200], key[4200], val[256];
        uint64_t padded = (size + PF_ALIGN - 1) / PF_ALIGN * PF_ALIGN;
        snprintf(name, sizeof name, "%s.packed", l->name);
        snprintf(key, sizeof key, "layer:%s", l->name);
        snprintf(val, sizeof val, "n=%u k=%u group=%u sym=%d bytes=%zu source=%016" PRIx64 "%s",
                 l->n, l->k, group, sym, size, h, src->src[i].perm ? " act_order=1" : "");
        if (st_writer_tensor(w, name, ST_U8, 1, &padded, err, len) ||
            st_writer_write(w, data, size, err, len) ||
            st_writer_write(w, zeros, (size_t)(padded - size), err, len) ||
            st_writer_meta(w, key, val, err, len))
            st = EDGERT_E_IO;
    }
    edgert_packed_free(pk);
    return st;
}

/* Layer i's "<P>.perm" when it is act-order (after every layer's bytes:
 * those stay at 4 KiB boundaries). */
static edgert_status write_perm(st_writer *w, const edgert_checkpoint *src, size_t i, char *err,
                                size_t len)
{
    const uint32_t *perm = src->src[i].perm;
    if (!perm)
        return EDGERT_OK;
    char name[4200];
    uint64_t k = src->pub[i].k;
    snprintf(name, sizeof name, "%s.perm", src->pub[i].name);
    if (st_writer_tensor(w, name, ST_I32, 1, &k, err, len))
        return EDGERT_E_IO;
    unsigned char b[4096];
    for (uint64_t j0 = 0; j0 < k; j0 += sizeof b / 4) {
        uint64_t n = k - j0 < sizeof b / 4 ? k - j0 : sizeof b / 4;
        for (uint64_t j = 0; j < n; j++)
            for (unsigned by = 0; by < 4; by++)
                b[4 * j + by] = (unsigned char)(perm[j0 + j] >> 8 * by);
        if (st_writer_write(w, b, (size_t)(4 * n), err, len))
            return EDGERT_E_IO;
    }
    return EDGERT_OK;
}

edgert_status edgert_checkpoint_pack(edgert_backend *b, edgert_checkpoint *src, const char *path,
                                     char *err, size_t err_len)
{
    if (!b || !src || !path)
        return er_fail(EDGERT_E_USAGE, err, err_len, "edgert_checkpoint_pack: NULL argument");
    if (src->kind == ER_CK_PACKED)
        return er_fail(EDGERT_E_USAGE, err, err_len, "%s is already packed; pack its source",
                       src->sf.path);
    struct stat a, o; /* writing over the source would destroy it while it is read */
    if (stat(src->sf.path, &a) == 0 && stat(path, &o) == 0 && a.st_dev == o.st_dev &&
        a.st_ino == o.st_ino)
        return er_fail(EDGERT_E_USAGE, err, err_len, "%s is the checkpoint being packed; name "
                       "another file to pack it into", path);
    const char *layout = edgert_backend_packed_layout(b);
    if (!layout)
        return er_fail(EDGERT_E_UNSUPPORTED, err, err_len, "backend '%s' cannot map a packed form "
                       "(its plugin does not implement ABI 2's packed_map): nothing to cache",
                       edgert_backend_name(b));
    /* The header is written last, into this much space: the keys (the source
     * path among them), each layer's tensor entry and key, names escaped at
     * worst 6 bytes per byte. */
    uint64_t reserve = 8192 + 6 * (uint64_t)strlen(src->sf.path);
    for (size_t i = 0; i < src->n; i++)
        reserve += (src->src[i].perm ? 18 : 12) * (uint64_t)strlen(src->pub[i].name) + 640;
    reserve = (reserve + PF_ALIGN - 1) / PF_ALIGN * PF_ALIGN;
    char hx[17];
    hex64(er_backend_cand(b)->lib_hash, hx);
    st_writer w;
    st_writer_init(&w, path);
    edgert_status st = EDGERT_OK;
    const char *meta[][2] = {{"edgert_packed_format", PF_VERSION},
                             {"backend", edgert_backend_name(b)},
                             {"layout", layout},
                             {"plugin_xxh3", hx},
                             {"source", src->sf.path},
                             {"edgert_version", EDGERT_VERSION_STRING}};
    for (size_t i = 0; i < sizeof meta / sizeof meta[0] && !st; i++)
        st = st_writer_meta(&w, meta[i][0], meta[i][1], err, err_len) ? EDGERT_E_IO : EDGERT_OK;
    if (!st && st_writer_begin_deferred(&w, PF_ALIGN, reserve, err, err_len))
        st = EDGERT_E_IO;
    for (size_t i = 0; i < src->n && !st; i++)
        st = pack_layer(&w, b, src, i, err, err_len);
    for (size_t i = 0; i < src->n && !st; i++)
        st = write_perm(&w, src, i, err, err_len);
    if (!st && st_writer_commit(&w, err, err_len))
        st = EDGERT_E_IO;
    st_writer_free(&w);
    return st;
}

/* ---- using one ------------------------------------------------------------------------- */

edgert_status edgert_checkpoint_layer_packed(edgert_checkpoint *c, size_t i, edgert_backend *b,
                                             edgert_packed **out, char *err, size_t err_len)
{
    if (!out)
        return er_fail(EDGERT_E_USAGE, err, err_len, "edgert_checkpoint_layer_packed: out NULL");
    *out = NULL;
    if (!c || !b || i >= c->n)
        return er_fail(EDGERT_E_USAGE, err, err_len, "edgert_checkpoint_layer_packed: bad "
                       "arguments");
    if (c->kind != ER_CK_PACKED) {
        edgert_qtensor q;
        edgert_status st = er_checkpoint_layer_weights(c, i, er_backend_cand(b)->m.symmetric == 1,
                                                       &q, err, err_len);
        st = st ? st : edgert_pack(b, &q.view, out, err, err_len);
        edgert_qtensor_free(&q);
        return st;
    }
    edgert_status st = keys_match(c, b, err, err_len);
    if (st)
        return st;
    const edgert_layer *l = &c->pub[i];
    edgert_qweights shape = {.struct_size = sizeof shape, .n = l->n, .k = l->k, .group = l->group,
                             .name = l->name, .perm = c->src[i].perm};
    return edgert_packed_map(b, &shape, st_data(&c->sf, c->src[i].packed),
                             (size_t)c->src[i].packed_bytes, out, err, err_len);
}
