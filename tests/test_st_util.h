/*
 * tests/test_st_util.h — a safetensors file copied with changes, to make
 * the files of other tools (a GPTQ file without a head, with act order)
 * from the ones edgert writes. Header-only; include after cmocka.h and
 * safetensors.h.
 */
#ifndef EDGERT_TEST_ST_UTIL_H
#define EDGERT_TEST_ST_UTIL_H

#include <stdlib.h>
#include <string.h>

/* src copied to dst: its metadata and every tensor that keep (NULL: all)
 * takes, each tensor's bytes given to edit (NULL: none) before they are
 * written. */
__attribute__((unused)) static void tu_st_copy(const char *src, const char *dst, size_t align,
                                               int (*keep)(const st_tensor *),
                                               void (*edit)(const st_tensor *, unsigned char *))
{
    char err[1024] = "";
    st_file sf;
    st_writer w;
    assert_int_equal(st_open(&sf, src, err, sizeof err), 0);
    st_writer_init(&w, dst);
    for (size_t i = 0; i < sf.nmeta; i++)
        assert_int_equal(st_writer_meta(&w, sf.meta[i].key, sf.meta[i].value, err, sizeof err),
                         0);
    for (size_t i = 0; i < sf.n; i++)
        if (!keep || keep(&sf.t[i]))
            assert_int_equal(st_writer_tensor(&w, sf.t[i].name, sf.t[i].dtype, sf.t[i].ndim,
                                              sf.t[i].shape, err, sizeof err), 0);
    assert_int_equal(st_writer_begin(&w, align, err, sizeof err), 0);
    for (size_t i = 0; i < sf.n; i++) {
        if (keep && !keep(&sf.t[i]))
            continue;
        size_t n = (size_t)(sf.t[i].end - sf.t[i].begin);
        unsigned char *d = malloc(n ? n : 1);
        assert_non_null(d);
        memcpy(d, st_data(&sf, &sf.t[i]), n);
        if (edit)
            edit(&sf.t[i], d);
        assert_int_equal(st_writer_write(&w, d, n, err, sizeof err), 0);
        free(d);
    }
    assert_int_equal(st_writer_commit(&w, err, sizeof err), 0);
    st_writer_free(&w);
    st_close(&sf);
}

#endif
