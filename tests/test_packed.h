/*
 * tests/test_packed.h — the packed-weight cache through the public API, for
 * any backend and code path (plugin ABI 2): the round trip and the refusals.
 * Shared by test_packed_map (ref-w4a16, avx512-w4a16 on every path),
 * test_avx2_w4a16 (the vendor example, whose own header has the kit's field
 * layout) and test_neon_w4a16 (neon-w4a16 on every path, under qemu in the
 * ARM64 build).
 * Header-only (static functions, marked unused); include after cmocka.h and
 * test_util.h. The kit's header (plugins/kit/plugin_kit.h) says where the
 * in-tree layouts keep each field, so the corruptions aim at real fields.
 *
 * Round trip (pm_round_trip): pack, edgert_packed_data, copy the bytes into
 * a fresh 64-aligned buffer of exactly their size (so ASan sees any read past
 * them), free the packed handle and the canonical tensor, edgert_packed_map,
 * and GEMM with m = 1 and m = 17: y bit for bit equal to the packed handle's,
 * padding columns included. The same bytes written to a file at offset 64
 * and mmap'ed read-only (a plugin that wrote into them would fault) map and
 * give the same bits too.
 *
 * Refusals (pm_refusals): truncated by one byte, one byte more, shorter than
 * a header, wrong magic, the other byte order, another layout version, a
 * shape that disagrees (n, k, group), a misaligned pointer, a section moved,
 * every header byte flipped one at a time, all zeros, random bytes, a zero
 * point out of range (layouts that store them): each refused with the
 * expected status and a message naming the backend, the tensor and what
 * was wrong. Garbage in the sections' values maps and computes (no crash).
 */
#ifndef EDGERT_TEST_PACKED_H
#define EDGERT_TEST_PACKED_H

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "edgert/edgert.h"
#include "plugin_kit.h" /* pk_blob_header: where the in-tree layouts keep each field */

typedef struct pm_shape {
    uint32_t n, k, group;
    int symmetric;
} pm_shape;

/* n = 1, 3, odd, a whole panel of 16 (avx512) and of 4 (neon); k a multiple
 * of the group and not; symmetric and asymmetric. A backend refuses what its
 * layout cannot hold (group 128 only, whole groups): then map must too. */
__attribute__((unused)) static const pm_shape pm_shapes[] = {
    {1, 256, 128, 0},  {3, 128, 128, 1}, {17, 384, 128, 0}, {16, 128, 128, 1}, {4, 256, 128, 0},
    {33, 256, 128, 1}, {17, 300, 128, 0}, {3, 96, 32, 1},   {5, 1000, 64, 0},  {1, 7, 4, 1},
};
#define PM_NSHAPES (sizeof pm_shapes / sizeof pm_shapes[0])
#define PM_M_MAX 17u

__attribute__((unused)) static float pm_unit(uint64_t *s) /* uniform in [-1, 1) */
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)((*s >> 40) & 0xFFFFFFu) / (float)(1u << 23) - 1.0f;
}

__attribute__((unused)) static unsigned char pm_byte(uint64_t *s)
{
    (void)pm_unit(s);
    return (unsigned char)(*s >> 56);
}

/* A 64-aligned copy of `size` bytes in an allocation of exactly `size`. */
__attribute__((unused)) static void *pm_copy(const void *src, size_t size)
{
    void *p = NULL;
    assert_int_equal(posix_memalign(&p, EDGERT_PACKED_ALIGN, size ? size : 1u), 0);
    if (size)
        memcpy(p, src, size);
    return p;
}

/* Canonical weights of shape s from `seed`, named `name`. */
__attribute__((unused)) static void pm_weights(const pm_shape *s, uint64_t seed, const char *name,
                                               edgert_qtensor *t)
{
    float *w = malloc(sizeof(float) * s->n * s->k);
    assert_non_null(w);
    for (size_t i = 0; i < (size_t)s->n * s->k; i++)
        w[i] = 0.05f * pm_unit(&seed) + (i % 7u == 0 ? 0.01f : 0.0f);
    assert_int_equal(edgert_quantize_rtn(w, s->n, s->k, s->group, s->symmetric, t), EDGERT_OK);
    t->view.name = name;
    free(w);
}

/* y[m][n + 2] = x W^T (ldx = k + 3), padding columns a sentinel. */
__attribute__((unused)) static void pm_gemm(edgert_backend *b, const edgert_packed *p,
                                            const pm_shape *s, uint32_t m, const float *x,
                                            float *y)
{
    const size_t ldy = (size_t)s->n + 2u;
    for (size_t i = 0; i < m * ldy; i++)
        y[i] = -12345.0f;
    edgert_gemm_args a = {.struct_size = sizeof a, .m = m, .x = x, .ldx = (size_t)s->k + 3u,
                          .y = y, .ldy = ldy};
    char err[512] = "";
    if (edgert_gemm(b, p, &a, err, sizeof err) != EDGERT_OK)
        fail_msg("gemm m=%u: %s", (unsigned)m, err);
}

/* The mapped handle over `bytes` gives `want` (m = 1, then m = 17) bit for
 * bit; its edgert_packed_bytes is `size` and its data are `bytes`. */
__attribute__((unused)) static void pm_check_mapped(edgert_backend *b, const edgert_qweights *shape,
                                                    const void *bytes, size_t size,
                                                    const float *x, float *const want[2],
                                                    const char *label)
{
    static const uint32_t ms[2] = {1u, PM_M_MAX};
    const pm_shape s = {shape->n, shape->k, shape->group, 0};
    char err[512] = "";
    edgert_packed *mp = NULL;
    if (edgert_packed_map(b, shape, bytes, size, &mp, err, sizeof err) != EDGERT_OK)
        fail_msg("%s: %s: map: %s", label, shape->name, err);
    assert_int_equal(edgert_packed_bytes(mp), size);
    const void *d = NULL;
    size_t n = 0;
    assert_int_equal(edgert_packed_data(mp, &d, &n, err, sizeof err), EDGERT_OK);
    assert_ptr_equal(d, bytes); /* the caller's bytes, never a copy */
    assert_int_equal(n, size);
    float *y = malloc(sizeof(float) * PM_M_MAX * (s.n + 2u));
    assert_non_null(y);
    for (size_t i = 0; i < 2; i++) {
        pm_gemm(b, mp, &s, ms[i], x, y);
        if (memcmp(y, want[i], sizeof(float) * ms[i] * (s.n + 2u)) != 0)
            fail_msg("%s: %s: m=%u: the mapped handle's y differs from the packed handle's",
                     label, shape->name, (unsigned)ms[i]);
    }
    free(y);
    edgert_packed_free(mp);
}

/* The bytes written to a file at offset 64 (after 64 bytes of something
 * else), mmap'ed read-only: they map and give `want`. */
__attribute__((unused)) static void pm_check_file(edgert_backend *b, const edgert_qweights *shape,
                                                  const void *bytes, size_t size, const float *x,
                                                  float *const want[2])
{
    char *dir = tu_tmpdir();
    assert_non_null(dir);
    char path[4200];
    snprintf(path, sizeof path, "%s/packed.bin", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    unsigned char lead[64];
    memset(lead, 0xEE, sizeof lead);
    assert_int_equal(write(fd, lead, sizeof lead), (ssize_t)sizeof lead);
    assert_int_equal(write(fd, bytes, size), (ssize_t)size);
    void *map = mmap(NULL, size + 64u, PROT_READ, MAP_PRIVATE, fd, 0);
    assert_true(map != MAP_FAILED);
    close(fd);
    pm_check_mapped(b, shape, (const unsigned char *)map + 64, size, x, want, "mmap'ed file");
    assert_memory_equal((const unsigned char *)map + 64, bytes, size);
    munmap(map, size + 64u);
    tu_rmrf(dir);
}

/*
 * The round trip of one shape on `b` (see the top of this file). 0 when it
 * ran; 1 when the backend's layout cannot hold the shape: pack refused it
 * with EDGERT_E_UNSUPPORTED, and so did map.
 */
__attribute__((unused)) static int pm_round_trip(edgert_backend *b, const pm_shape *s,
                                                 uint64_t seed)
{
    char name[96], err[512] = "";
    snprintf(name, sizeof name, "rt.n%u.k%u.g%u.%s", (unsigned)s->n, (unsigned)s->k,
             (unsigned)s->group, s->symmetric ? "sym" : "asym");
    edgert_qweights shape = {.struct_size = sizeof shape, .n = s->n, .k = s->k,
                             .group = s->group, .name = name};
    edgert_qtensor t;
    pm_weights(s, seed, name, &t);
    edgert_packed *pk = NULL;
    edgert_status st = edgert_pack(b, &t.view, &pk, err, sizeof err);
    edgert_qtensor_free(&t);
    if (st != EDGERT_OK) {
        if (st != EDGERT_E_UNSUPPORTED)
            fail_msg("%s: pack: %s", name, err);
        static _Alignas(64) const unsigned char zero[512];
        edgert_packed *m = NULL;
        assert_int_equal(edgert_packed_map(b, &shape, zero, sizeof zero, &m, err, sizeof err),
                         EDGERT_E_UNSUPPORTED);
        assert_null(m);
        return 1;
    }
    const void *data = NULL;
    size_t size = 0;
    if (edgert_packed_data(pk, &data, &size, err, sizeof err) != EDGERT_OK)
        fail_msg("%s: packed_data: %s", name, err);
    assert_true(size > 0 && size <= edgert_packed_bytes(pk));
    assert_int_equal((uintptr_t)data % EDGERT_PACKED_ALIGN, 0);
    void *copy = pm_copy(data, size);

    const size_t ldx = (size_t)s->k + 3u, ldy = (size_t)s->n + 2u;
    float *x = malloc(sizeof(float) * PM_M_MAX * ldx);
    float *want[2] = {malloc(sizeof(float) * ldy), malloc(sizeof(float) * PM_M_MAX * ldy)};
    assert_true(x && want[0] && want[1]);
    for (size_t i = 0; i < PM_M_MAX * ldx; i++)
        x[i] = pm_unit(&seed);
    pm_gemm(b, pk, s, 1u, x, want[0]);
    pm_gemm(b, pk, s, PM_M_MAX, x, want[1]);
    edgert_packed_free(pk); /* the mapped handle owes nothing to it */

    pm_check_mapped(b, &shape, copy, size, x, want, "heap copy");
    pm_check_file(b, &shape, copy, size, x, want);
    free(copy);
    free(x);
    free(want[0]);
    free(want[1]);
    return 0;
}

/* ---- refusals --------------------------------------------------------------------- */

/* Map a fresh exact-size, 64-aligned copy of `bytes` at `offset` from the
 * alignment (0: aligned); a success must compute (no crash) and is freed. */
__attribute__((unused)) static edgert_status pm_try(edgert_backend *b,
                                                    const edgert_qweights *shape,
                                                    const void *bytes, size_t size,
                                                    size_t offset, char *err, size_t err_len)
{
    unsigned char *c = NULL;
    const size_t room = size + offset > 0u ? size + offset : 1u; /* exactly: ASan sees past it */
    assert_int_equal(posix_memalign((void **)&c, EDGERT_PACKED_ALIGN, room), 0);
    memcpy(c + offset, bytes, size);
    edgert_packed *m = NULL;
    err[0] = '\0';
    edgert_status st = edgert_packed_map(b, shape, c + offset, size, &m, err, err_len);
    if (st == EDGERT_OK) {
        const pm_shape s = {shape->n, shape->k, shape->group, 0};
        float *x = calloc(3u * ((size_t)s.k + 3u), sizeof(float));
        float *y = malloc(sizeof(float) * 3u * (s.n + 2u));
        assert_true(x && y);
        for (size_t i = 0; i < 3u * ((size_t)s.k + 3u); i++)
            x[i] = (float)(i % 5u) - 2.0f;
        pm_gemm(b, m, &s, 3u, x, y);
        free(x);
        free(y);
        edgert_packed_free(m);
    } else {
        assert_null(m);
    }
    free(c);
    return st;
}

/* Refused with `want` (or `also`, when not OK) and a message naming the
 * backend, the tensor and `why`. */
__attribute__((unused)) static void pm_refused(edgert_backend *b, const edgert_qweights *shape,
                                               const void *bytes, size_t size, size_t offset,
                                               edgert_status want, edgert_status also,
                                               const char *why, const char *label)
{
    char err[512];
    edgert_status st = pm_try(b, shape, bytes, size, offset, err, sizeof err);
    if ((st != want && (st != also || also == EDGERT_OK)) ||
        !strstr(err, edgert_backend_name(b)) || !strstr(err, shape->name) || !strstr(err, why))
        fail_msg("%s: %s: expected %s naming the backend, '%s' and '%s'; got %s: %s",
                 edgert_backend_name(b), label, edgert_status_name(want), shape->name, why,
                 edgert_status_name(st), err);
}

/* The header fields a corruption aims at, and how it changes them. */
typedef struct pm_poke {
    const char *label, *why;
    size_t off;       /* offset of a uint32_t or uint64_t field */
    int wide;         /* 1: uint64_t */
    uint64_t xor_, add;
} pm_poke;

__attribute__((unused)) static void pm_poke_header(const void *bytes, size_t size,
                                                   const pm_poke *p, unsigned char *out)
{
    memcpy(out, bytes, size);
    if (p->wide) {
        uint64_t v;
        memcpy(&v, out + p->off, sizeof v);
        v = (v ^ p->xor_) + p->add;
        memcpy(out + p->off, &v, sizeof v);
    } else {
        uint32_t v;
        memcpy(&v, out + p->off, sizeof v);
        v = (uint32_t)((v ^ (uint32_t)p->xor_) + (uint32_t)p->add);
        memcpy(out + p->off, &v, sizeof v);
    }
}

/* Every header field wrong in turn, and every header byte flipped. */
__attribute__((unused)) static void pm_header_refusals(edgert_backend *b,
                                                       const edgert_qweights *shape,
                                                       const void *bytes, size_t size)
{
    const pm_poke pokes[] = {
        {"wrong magic", "magic", offsetof(pk_blob_header, magic), 0, 0x5A5A5A5Au, 0},
        {"layout version", "version", offsetof(pk_blob_header, version), 0, 0, 1},
        {"header size", "header", offsetof(pk_blob_header, header_bytes), 0, 0, 8},
        {"n disagrees", "caller's shape", offsetof(pk_blob_header, n), 0, 0, 1},
        {"k disagrees", "caller's shape", offsetof(pk_blob_header, k), 0, 0, 128},
        {"unknown flag", "flags", offsetof(pk_blob_header, flags), 0, 1u << 9, 0},
        {"total says more", "bytes", offsetof(pk_blob_header, total), 1, 0, 64},
        {"a section moved", "section 0", offsetof(pk_blob_header, section), 1, 0, 64},
        {"a section longer", "section 0",
         offsetof(pk_blob_header, section) + offsetof(pk_blob_section, bytes), 1, 0, 1},
        {"section past the end", "section 0", offsetof(pk_blob_header, section), 1, 0,
         UINT64_MAX - 63u},
        {"more sections", "sections", offsetof(pk_blob_header, nsections), 0, 0, 1},
    };
    unsigned char *c = malloc(size);
    assert_non_null(c);
    for (size_t i = 0; i < sizeof pokes / sizeof pokes[0]; i++) {
        pm_poke_header(bytes, size, &pokes[i], c);
        pm_refused(b, shape, c, size, 0, EDGERT_E_PARSE, EDGERT_OK, pokes[i].why, pokes[i].label);
    }
    uint32_t magic;
    memcpy(&magic, bytes, sizeof magic);
    memcpy(c, bytes, size);
    magic = __builtin_bswap32(magic);
    memcpy(c, &magic, sizeof magic);
    pm_refused(b, shape, c, size, 0, EDGERT_E_PARSE, EDGERT_OK, "byte order", "other byte order");
    char err[512], label[64];
    for (size_t i = 0; i < sizeof(pk_blob_header); i++) { /* nothing in the header is spare */
        memcpy(c, bytes, size);
        c[i] ^= 0xFFu;
        snprintf(label, sizeof label, "header byte %zu flipped", i);
        edgert_status st = pm_try(b, shape, c, size, 0, err, sizeof err);
        if (st != EDGERT_E_PARSE)
            fail_msg("%s: %s: got %s: %s", edgert_backend_name(b), label, edgert_status_name(st),
                     err);
    }
    free(c);
}

/* The refusals of one backend instance (see the top of this file), on a
 * shape every in-tree layout holds. `zeros_section`: the index of the
 * section holding u8 zero points, or -1 when the layout has none. */
__attribute__((unused)) static void pm_refusals(edgert_backend *b, int zeros_section)
{
    const pm_shape s = {17, 256, 128, 0};
    char err[512] = "";
    edgert_qweights shape = {.struct_size = sizeof shape, .n = s.n, .k = s.k, .group = s.group,
                             .name = "blk.9.ffn_up"};
    edgert_qtensor t;
    pm_weights(&s, 77u, shape.name, &t);
    edgert_packed *pk = NULL;
    if (edgert_pack(b, &t.view, &pk, err, sizeof err) != EDGERT_OK)
        fail_msg("pack: %s", err);
    edgert_qtensor_free(&t);
    const void *data = NULL;
    size_t size = 0;
    assert_int_equal(edgert_packed_data(pk, &data, &size, err, sizeof err), EDGERT_OK);
    unsigned char *c = calloc(size + 1u, 1);
    assert_non_null(c);
    memcpy(c, data, size);
    edgert_packed_free(pk);

    assert_int_equal(pm_try(b, &shape, c, size, 0, err, sizeof err), EDGERT_OK);
    pm_refused(b, &shape, c, size - 1u, 0, EDGERT_E_PARSE, EDGERT_OK, "bytes", "truncated by one");
    pm_refused(b, &shape, c, size + 1u, 0, EDGERT_E_PARSE, EDGERT_OK, "bytes", "one byte more");
    pm_refused(b, &shape, c, 100u, 0, EDGERT_E_PARSE, EDGERT_OK, "shorter", "under a header");
    pm_refused(b, &shape, c, size, 16, EDGERT_E_USAGE, EDGERT_OK, "aligned", "misaligned pointer");
    for (size_t cut = 0; cut < size; cut += cut < 256u ? 1u : 997u) /* every length up to it */
        if (cut != 0u)
            assert_int_not_equal(pm_try(b, &shape, c, cut, 0, err, sizeof err), EDGERT_OK);
    edgert_qweights other = shape;
    other.group = 2u * shape.group; /* ref: not these bytes; group-128 layouts: not theirs */
    pm_refused(b, &other, c, size, 0, EDGERT_E_PARSE, EDGERT_E_UNSUPPORTED, "group",
               "group disagrees");
    other = shape;
    other.n = shape.n - 1u;
    pm_refused(b, &other, c, size, 0, EDGERT_E_PARSE, EDGERT_OK, "caller's shape", "n - 1");
    pm_header_refusals(b, &shape, c, size);

    unsigned char *junk = malloc(size);
    assert_non_null(junk);
    memset(junk, 0, size);
    pm_refused(b, &shape, junk, size, 0, EDGERT_E_PARSE, EDGERT_OK, "magic", "all zeros");
    uint64_t seed = 5;
    for (size_t i = 0; i < size; i++)
        junk[i] = pm_byte(&seed);
    pm_refused(b, &shape, junk, size, 0, EDGERT_E_PARSE, EDGERT_OK, "magic", "random bytes");

    pk_blob_header h;
    memcpy(&h, c, sizeof h);
    memcpy(junk, c, size); /* garbage values in the first section: maps, computes */
    for (size_t i = 0; i < h.section[0].bytes; i++)
        junk[h.section[0].offset + i] = pm_byte(&seed);
    assert_int_equal(pm_try(b, &shape, junk, size, 0, err, sizeof err), EDGERT_OK);
    if (zeros_section >= 0) {
        const size_t z = (size_t)h.section[zeros_section].offset;
        const size_t zn = (size_t)h.section[zeros_section].bytes;
        memcpy(junk, c, size);
        junk[z + zn - 1u] = 16u;
        pm_refused(b, &shape, junk, size, 0, EDGERT_E_PARSE, EDGERT_OK, "zero point",
                   "zero point 16");
    }
    free(junk);
    free(c);
}

#endif
