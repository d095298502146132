/*
 * core/formats/safetensors_write.c — the safetensors writer and the 16-bit float
 * conversions (safetensors.h). Shared as source like safetensors.c.
 *
 * The header lists the tensors with contiguous data_offsets in declaration
 * order (the reference implementation refuses gaps) and is padded with
 * spaces so that the data section starts at the requested alignment: a
 * packed-weight file maps each tensor at a 4 KiB boundary that way, and its
 * tensors' sizes are multiples of that alignment. The file appears at
 * <path> only once every declared byte arrived and reached the disk
 * (tmpfile.h: unnamed until then where the filesystem allows, so a process
 * killed while writing leaves nothing).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "edgert/plugin.h"
#include "formats/json_string.h"
#include "formats/safetensors.h"
#include "formats/tmpfile.h"

uint16_t st_f32_to_bf16(float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((u >> 16) | 0x40u); /* NaN stays a (quiet) NaN */
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

uint16_t st_f32_to_f16(float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    uint32_t s = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u)
        return (uint16_t)(s | 0x7E00u);
    if (a >= 0x477FF000u) /* rounds to 65520 or more: inf */
        return (uint16_t)(s | 0x7C00u);
    if (a < 0x38800000u) { /* below 2^-14: subnormal, scaled to units of 2^-24 */
        float f;
        memcpy(&f, &a, 4);
        float q = f * 16777216.0f; /* exact: a power of two */
        uint32_t r = (uint32_t)q;
        float frac = q - (float)r;
        if (frac > 0.5f || (frac == 0.5f && (r & 1u)))
            r++;
        return (uint16_t)(s | r);
    }
    uint32_t e = (a >> 23) - 112, m = a & 0x7FFFFFu;
    uint32_t h = (e << 10) | (m >> 13), rest = m & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++; /* a carry into the exponent is the right result */
    return (uint16_t)(s | h);
}

/* ---- writer ------------------------------------------------------------------------ */

void st_writer_init(st_writer *w, const char *path)
{
    memset(w, 0, sizeof *w);
    w->path = strdup(path ? path : "");
    w->failed = w->path == NULL;
}

static int wfail(st_writer *w, char *err, size_t len, const char *what, const char *detail)
{
    edgert_errf(err, len, "%s: %s%s%s", w->path ? w->path : "?", what, detail ? ": " : "",
                detail ? detail : "");
    w->failed = 1;
    return -1;
}

int st_writer_tensor(st_writer *w, const char *name, st_dtype dtype, uint32_t ndim,
                     const uint64_t *shape, char *err, size_t len)
{
    if (w->failed || (w->f && !w->reserve) || ndim > ST_MAX_DIMS || st_dtype_bits(dtype) == 0 ||
        !name)
        return wfail(w, err, len, "cannot declare a tensor", name);
    if (w->n == w->cap) {
        size_t nc = w->cap ? w->cap * 2 : 32;
        st_tensor *t = realloc(w->t, nc * sizeof *t);
        if (!t)
            return wfail(w, err, len, "out of memory", NULL);
        w->t = t;
        w->cap = nc;
    }
    st_tensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    uint64_t numel = 1;
    for (uint32_t i = 0; i < ndim; i++) {
        if (shape[i] && numel > UINT64_MAX / 8 / shape[i])
            return wfail(w, err, len, "tensor shape overflows", name);
        numel *= shape[i];
        t->shape[i] = shape[i];
    }
    t->name = strdup(name);
    if (!t->name)
        return wfail(w, err, len, "out of memory", NULL);
    t->dtype = dtype;
    t->ndim = ndim;
    t->begin = w->data_bytes;
    t->end = t->begin + (numel * st_dtype_bits(dtype) + 7) / 8;
    w->data_bytes = t->end;
    w->n++;
    return 0;
}

int st_writer_meta(st_writer *w, const char *key, const char *value, char *err, size_t len)
{
    if (w->failed || (w->f && !w->reserve) || !key || !value)
        return wfail(w, err, len, "cannot add metadata", key);
    if (w->nmeta == w->mcap) {
        size_t nc = w->mcap ? w->mcap * 2 : 16;
        st_meta *m = realloc(w->meta, nc * sizeof *m);
        if (!m)
            return wfail(w, err, len, "out of memory", NULL);
        w->meta = m;
        w->mcap = nc;
    }
    st_meta *m = &w->meta[w->nmeta];
    m->key = strdup(key);
    m->value = strdup(value);
    w->nmeta++;
    if (!m->key || !m->value)
        return wfail(w, err, len, "out of memory", NULL);
    return 0;
}

/* The header JSON into a memory stream (names escaped by the one escaper). */
static char *header_json(const st_writer *w, size_t *hlen)
{
    char *buf = NULL;
    FILE *m = open_memstream(&buf, hlen);
    if (!m)
        return NULL;
    fputc('{', m);
    if (w->nmeta) {
        fputs("\"__metadata__\":{", m);
        for (size_t i = 0; i < w->nmeta; i++) {
            fputs(i ? "," : "", m);
            json_write_string(m, w->meta[i].key);
            fputc(':', m);
            json_write_string(m, w->meta[i].value);
        }
        fputc('}', m);
    }
    for (size_t i = 0; i < w->n; i++) {
        const st_tensor *t = &w->t[i];
        fputs(i || w->nmeta ? "," : "", m);
        json_write_string(m, t->name);
        fprintf(m, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_str(t->dtype));
        for (uint32_t d = 0; d < t->ndim; d++)
            fprintf(m, "%s%llu", d ? "," : "", (unsigned long long)t->shape[d]);
        fprintf(m, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)t->begin,
                (unsigned long long)t->end);
    }
    fputc('}', m);
    if (fclose(m) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static int create_tmp(st_writer *w, char *err, size_t len)
{
    if (er_tmpfile_open(&w->tf, w->path) != 0)
        return wfail(w, err, len, "cannot create the temporary file", strerror(errno));
    w->f = w->tf.f;
    return 0;
}

/* The length and the header padded with spaces to `total` bytes, at the
 * stream's current position. */
static int write_header(st_writer *w, const char *h, size_t hlen, size_t total, char *err,
                        size_t len)
{
    unsigned char lb[8];
    for (int i = 0; i < 8; i++)
        lb[i] = (unsigned char)((uint64_t)total >> (8 * i));
    int ok = fwrite(lb, 1, 8, w->f) == 8 && fwrite(h, 1, hlen, w->f) == hlen;
    for (size_t i = hlen; ok && i < total; i++)
        ok = fputc(' ', w->f) != EOF;
    return ok ? 0 : wfail(w, err, len, "cannot write", strerror(errno));
}

int st_writer_begin(st_writer *w, uint64_t align, char *err, size_t len)
{
    if (w->failed || w->f || align < 8 || (align & (align - 1)) || align > (1u << 21))
        return wfail(w, err, len, "cannot start the file", NULL);
    size_t hlen = 0;
    char *h = header_json(w, &hlen);
    if (!h)
        return wfail(w, err, len, "out of memory", NULL);
    size_t total = hlen;
    while ((8u + total) % align)
        total++;
    if (total > ST_MAX_HEADER) {
        free(h);
        return wfail(w, err, len, "header over the format's 100 MB limit", NULL);
    }
    int rc = create_tmp(w, err, len) || write_header(w, h, hlen, total, err, len);
    free(h);
    return rc ? -1 : 0;
}

int st_writer_begin_deferred(st_writer *w, uint64_t align, uint64_t reserve, char *err,
                             size_t len)
{
    if (w->failed || w->f || align < 8 || (align & (align - 1)) || reserve < 16 ||
        reserve % align || reserve - 8 > ST_MAX_HEADER)
        return wfail(w, err, len, "cannot start the file", NULL);
    if (create_tmp(w, err, len))
        return -1;
    w->reserve = reserve;
    for (uint64_t i = 0; i < reserve; i++)
        if (fputc(' ', w->f) == EOF)
            return wfail(w, err, len, "cannot write", strerror(errno));
    return 0;
}

int st_writer_write(st_writer *w, const void *data, size_t n, char *err, size_t len)
{
    if (w->failed || !w->f)
        return wfail(w, err, len, "write after a failure", NULL);
    if (!w->reserve && n > w->data_bytes - w->written)
        return wfail(w, err, len, "more data than the tensors declared", NULL);
    if (n && fwrite(data, 1, n, w->f) != n)
        return wfail(w, err, len, "cannot write", strerror(errno));
    w->written += n;
    return 0;
}

int st_writer_commit(st_writer *w, char *err, size_t len)
{
    if (w->failed || !w->f)
        return wfail(w, err, len, "commit after a failure", NULL);
    if (w->written != w->data_bytes)
        return wfail(w, err, len, "the data written differ from the tensors declared", NULL);
    if (w->reserve) { /* the deferred header, into the space kept for it */
        size_t hlen = 0;
        char *h = header_json(w, &hlen);
        int rc = !h                        ? wfail(w, err, len, "out of memory", NULL)
                 : hlen > w->reserve - 8   ? wfail(w, err, len, "header larger than reserved", NULL)
                 : fseeko(w->f, 0, SEEK_SET) ? wfail(w, err, len, "cannot seek", strerror(errno))
                                           : write_header(w, h, hlen, w->reserve - 8, err, len);
        free(h);
        if (rc)
            return -1;
    }
    w->f = NULL;
    if (er_tmpfile_commit(&w->tf) != 0)
        return wfail(w, err, len, "cannot write", strerror(errno));
    return 0;
}

void st_writer_free(st_writer *w)
{
    er_tmpfile_discard(&w->tf); /* closes w->f, removes a temporary */
    for (size_t i = 0; i < w->n; i++)
        free(w->t[i].name);
    for (size_t i = 0; i < w->nmeta; i++) {
        free(w->meta[i].key);
        free(w->meta[i].value);
    }
    free(w->t);
    free(w->meta);
    free(w->path);
    memset(w, 0, sizeof *w);
}
