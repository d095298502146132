/*
 * core/formats/safetensors.h — the one safetensors reader and writer of the tree.
 *
 * Shared as source: compiled into libedgert (checkpoints, packed-weight
 * files), the edgert CLI (`quantize`, `pack`, `export`'s generated inputs)
 * and the npu-export plugin, which thereby still links nothing of the core.
 * Self-contained: libc, and edgert_errf from edgert/plugin.h. Its names are
 * hidden in every one of them (all are built with -fvisibility=hidden).
 *
 * Format: 8 bytes little-endian header length H, then H bytes of JSON
 *   {"<name>": {"dtype": "F32", "shape": [N, K], "data_offsets": [b, e]}, ...,
 *    "__metadata__": {"<key>": "<value>", ...}}
 * then the raw data, little-endian; offsets are relative to the end of the
 * header.
 *
 * The reader maps the file read-only and validates it before any tensor is
 * used (a checkpoint is a user's download: hostile input): H within the file
 * and at most 100 MB (the format's limit); the JSON well formed (nesting
 * depth 32, strings 4096 bytes, numbers 64 characters); every entry has a
 * dtype, a shape of at most 8 dimensions and data_offsets; shape products
 * do not overflow; begin <= end <= data size; end - begin equals numel x
 * dtype size for every dtype the format defines; no two tensors overlap; no
 * duplicate names; metadata values are strings, "__metadata__" and each of
 * its keys appear once. Every error names the file (and the tensor).
 * Tensors are then used in place from the mapping (st_data), never copied
 * whole. A file truncated by someone else while it
 * is mapped raises SIGBUS on access, as with any mapped file.
 *
 * The writer (st_writer) produces files the reference implementation reads
 * back (contiguous offsets, header padded with spaces) into a temporary file
 * in the destination's folder (tmpfile.h), renamed over the destination only
 * by st_writer_commit: a failed write never leaves a partial output file,
 * nor does a killed one where the file can be written unnamed.
 */
#ifndef EDGERT_CORE_SAFETENSORS_H
#define EDGERT_CORE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "formats/tmpfile.h"

#include "edgert/plugin.h" /* edgert_status */

typedef enum {
    ST_F32, ST_F16, ST_BF16, ST_F64, ST_I8, ST_U8, ST_I16, ST_U16, ST_I32, ST_U32,
    ST_I64, ST_U64, ST_BOOL, ST_I4, ST_U4, ST_F8_E4M3, ST_F8_E5M2, ST_UNKNOWN
} st_dtype;

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER (100u << 20) /* the format's own limit: 100 MB */

typedef struct st_tensor {
    char *name;
    char dtype_name[16];
    st_dtype dtype;
    uint32_t ndim;
    uint64_t shape[ST_MAX_DIMS];
    uint64_t begin, end; /* relative to the data section */
} st_tensor;

typedef struct st_meta {
    char *key, *value;
} st_meta;

typedef struct st_file {
    char *path;
    const unsigned char *map; /* the whole file, read-only; NULL when empty */
    uint64_t file_size, data_start;
    st_tensor *t;
    size_t n;
    st_meta *meta;
    size_t nmeta;
} st_file;

/** Open, map and validate (see above). EDGERT_OK, or with the reason in err:
 * EDGERT_E_IO (cannot open or map it, or not a regular file), EDGERT_E_PARSE
 * (its bytes are not a valid safetensors file), EDGERT_E_NOMEM. */
edgert_status st_open(st_file *sf, const char *path, char *err, size_t len);
void st_close(st_file *sf);
const st_tensor *st_find(const st_file *sf, const char *name);
/** A "__metadata__" value, or NULL. */
const char *st_meta_get(const st_file *sf, const char *key);
/** The tensor's bytes in the mapping (end - begin of them). */
const void *st_data(const st_file *sf, const st_tensor *t);
uint64_t st_numel(const st_tensor *t);
/** Drop the whole pages of t's bytes from this process's resident set (the
 *  mapping stays valid; a later access reads them again). */
void st_release(const st_file *sf, const st_tensor *t);
/** The same for the file's pages around a small tensor t (a norm's weights,
 *  an embedding row's tensor): every page of the ST_FOLIO_BYTES-aligned
 *  spans that t's bytes touch. A read maps more than its own pages: the
 *  kernel maps the page cache's whole large folio around a fault (up to
 *  2 MiB, a PMD, on 6.x kernels), so each of SmolLM2's 60 norm vectors
 *  read left about 2 MiB of its neighbours resident, 72 MiB in all. */
#define ST_FOLIO_BYTES ((uint64_t)2 << 20)
void st_release_near(const st_file *sf, const st_tensor *t);
int st_is_float(st_dtype d);
/** Bits per element; 0 for ST_UNKNOWN. */
unsigned st_dtype_bits(st_dtype d);
/** The format's name of a dtype ("F32"), or "?". */
const char *st_dtype_str(st_dtype d);
/** Elements [first, first + count) of a F32/F16/BF16 tensor as fp32. */
int st_read_f32(const st_file *sf, const st_tensor *t, uint64_t first, uint64_t count, float *out,
                char *err, size_t len);

float st_f16_to_f32(uint16_t h);
float st_bf16_to_f32(uint16_t h);
uint16_t st_f32_to_f16(float f);  /* round to nearest even; overflow to inf */
uint16_t st_f32_to_bf16(float f); /* round to nearest even; NaN stays NaN */

/* ---- writer ------------------------------------------------------------------ */

typedef struct st_writer {
    char *path;
    er_tmpfile tf;    /* the file being written (tmpfile.h) */
    FILE *f;          /* tf.f while writing */
    st_tensor *t;     /* declared tensors, in data order */
    size_t n, cap;
    st_meta *meta;
    size_t nmeta, mcap;
    uint64_t data_bytes, written;
    uint64_t reserve; /* deferred header: bytes reserved for length + header */
    int failed;
} st_writer;

/** Start a file for `path` (nothing is created yet). */
void st_writer_init(st_writer *w, const char *path);
/** Declare the next tensor; the data follow in declaration order. */
int st_writer_tensor(st_writer *w, const char *name, st_dtype dtype, uint32_t ndim,
                     const uint64_t *shape, char *err, size_t len);
int st_writer_meta(st_writer *w, const char *key, const char *value, char *err, size_t len);
/** Create the temporary file and write the header, padded so that the data
 *  section starts at a multiple of `align` (a power of two, >= 8). */
int st_writer_begin(st_writer *w, uint64_t align, char *err, size_t len);
/** Create the temporary file with `reserve` bytes (a multiple of `align`)
 *  kept for the header, which st_writer_commit writes once every tensor is
 *  known: tensors may then be declared as their data are written (their
 *  sizes need not be known in advance). The data section starts at
 *  `reserve`. */
int st_writer_begin_deferred(st_writer *w, uint64_t align, uint64_t reserve, char *err,
                             size_t len);
/** Append data bytes (all tensors' bytes, in order, in pieces of any size). */
int st_writer_write(st_writer *w, const void *data, size_t n, char *err, size_t len);
/** Check that exactly the declared bytes were written, flush, fsync and
 *  rename over `path`. */
int st_writer_commit(st_writer *w, char *err, size_t len);
/** Free; an uncommitted temporary file is removed. */
void st_writer_free(st_writer *w);

#endif /* EDGERT_CORE_SAFETENSORS_H */
