/*
 * tests/run/test_arena.c — where packed weights live (core/run/arena.c): blocks back
 * to back in 2 MiB-aligned regions, freed spans reused (merged with their
 * neighbours, or given back to the unused end), a region unmapped when its
 * last block is freed, a double free harmless, bad arguments refused, the
 * "inside pack" mark per thread, eviction from the caches keeping every
 * byte; and through the public API, that what a
 * plugin allocates inside edgert_pack lands there (two packed matrices
 * adjacent at the start of a region). Under ASan the redzones and freed blocks must be poisoned; in
 * other builds that case reports skipped.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/internal.h"
#include "edgert/edgert.h"
#include "test_util.h"
#include "run/arena.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#define MIB ((size_t)1 << 20)

/* mincore fails with ENOMEM on a page that is not mapped */
static int mapped(const void *p)
{
    unsigned char v;
    uintptr_t page = (uintptr_t)p & ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1);
    return mincore((void *)page, 1, &v) == 0 || errno != ENOMEM;
}

static void test_arena_back_to_back(void **state)
{
    (void)state;
    er_arena *a = er_arena_create();
    assert_non_null(a);
    /* sizes that are not multiples of anything: 3.3 MB and 1.1 MB + 7 */
    const size_t s1 = 3342336u + 13u, s2 = 1153433u + 7u;
    uint8_t *p1 = er_arena_alloc(a, s1, 64), *p2 = er_arena_alloc(a, s2, 64);
    assert_non_null(p1);
    assert_non_null(p2);
    /* the first block starts its region (after a redzone under ASan) */
    assert_true((uintptr_t)p1 % (2 * MIB) <= 64u);
    assert_int_equal((uintptr_t)p2 % 64u, 0);
    /* the second follows the first within a cache line and two redzones */
    assert_true(p2 >= p1 + s1);
    assert_true(p2 <= p1 + s1 + 64u + 128u);
    memset(p1, 0x5A, s1);
    memset(p2, 0xA5, s2);
    assert_int_equal(p1[s1 - 1], 0x5A);
    assert_int_equal(p2[0], 0xA5);
    /* a stricter alignment is honoured */
    uint8_t *p3 = er_arena_alloc(a, 100, 4096);
    assert_non_null(p3);
    assert_int_equal((uintptr_t)p3 % 4096u, 0);
    assert_true(p3 > p2);
    /* freed while others live: still mapped; the last one unmaps the region */
    assert_int_equal(er_arena_free(a, p2), 1);
    assert_int_equal(er_arena_free(a, p1), 1);
    assert_true(mapped(p1));
    assert_int_equal(er_arena_free(a, p3), 1);
    assert_false(mapped(p1));
    er_arena_destroy(a);
}

/* A freed block's span is reused by the next block that fits, merged with
 * free neighbours; freeing the last block gives the span back to the
 * unused end. */
static void test_arena_holes_reused(void **state)
{
    (void)state;
    er_arena *a = er_arena_create();
    assert_non_null(a);
    uint8_t *p1 = er_arena_alloc(a, 1000000, 64), *p2 = er_arena_alloc(a, 500000, 64);
    uint8_t *p3 = er_arena_alloc(a, 700000, 64), *p4 = er_arena_alloc(a, 10, 64);
    assert_non_null(p1);
    assert_non_null(p2);
    assert_non_null(p3);
    assert_non_null(p4);
    /* scratch freed inside a pack: the next scratch takes its place */
    assert_int_equal(er_arena_free(a, p2), 1);
    uint8_t *q = er_arena_alloc(a, 400000, 64);
    assert_ptr_equal(q, p2);
    assert_int_equal(er_arena_free(a, q), 1);
    /* two neighbouring holes merge: a block as big as both fits there */
    assert_int_equal(er_arena_free(a, p3), 1);
    q = er_arena_alloc(a, 1150000, 64);
    assert_ptr_equal(q, p2);
    /* freed twice: the second free finds no block and changes nothing */
    assert_int_equal(er_arena_free(a, q), 1);
    assert_int_equal(er_arena_free(a, q), 1);
    assert_true(mapped(p1));
    /* the last block freed: the span returns to the unused end */
    assert_int_equal(er_arena_free(a, p4), 1);
    q = er_arena_alloc(a, 64, 64);
    assert_ptr_equal(q, p2);
    assert_int_equal(er_arena_free(a, q), 1);
    assert_int_equal(er_arena_free(a, p1), 1);
    assert_false(mapped(p1));
    er_arena_destroy(a);
}

static void test_arena_big_and_foreign(void **state)
{
    (void)state;
    er_arena *a = er_arena_create();
    assert_non_null(a);
    /* bigger than a region: a region of its own (only its ends touched) */
    const size_t big = 300 * MIB + 1u;
    uint8_t *small = er_arena_alloc(a, 1000, 64), *b = er_arena_alloc(a, big, 64);
    assert_non_null(small);
    assert_non_null(b);
    b[0] = 1;
    b[big - 1] = 2;
    assert_int_equal(b[0] + b[big - 1], 3);
    /* a later small block fills a region's rest: after one of the two */
    uint8_t *small2 = er_arena_alloc(a, 1000, 64);
    assert_non_null(small2);
    assert_true((small2 > small && small2 < small + 4096) ||
                (small2 > b + big - 1 && small2 < b + big + 4096));
    /* not the arena's: left alone */
    void *m = malloc(64);
    assert_non_null(m);
    assert_int_equal(er_arena_free(a, m), 0);
    free(m);
    assert_int_equal(er_arena_free(a, NULL), 0);
    assert_int_equal(er_arena_free(NULL, b), 0);
    assert_int_equal(er_arena_free(a, small2), 1);
    assert_int_equal(er_arena_free(a, b), 1);
    assert_false(mapped(b));
    /* destroy unmaps what is still live */
    er_arena_destroy(a);
    assert_false(mapped(small));
}

/* Evicting from the caches (first contact's timing) keeps every byte, on
 * any range: unaligned ends, one byte, none, a whole arena. */
static void test_arena_evict_keeps_bytes(void **state)
{
    (void)state;
    er_arena *a = er_arena_create();
    assert_non_null(a);
    uint8_t *p = er_arena_alloc(a, 300001, 64), *q = er_arena_alloc(a, 77, 64);
    assert_non_null(p);
    assert_non_null(q);
    for (size_t i = 0; i < 300001; i++)
        p[i] = (uint8_t)(i * 131u + 7u);
    memset(q, 0x3C, 77);
    er_cache_evict(p + 3, 1000);
    er_cache_evict(p + 299999, 1);
    er_cache_evict(p, 0);
    er_cache_evict(NULL, 64);
    er_arena_evict(a);
    er_arena_evict(NULL);
    for (size_t i = 0; i < 300001; i++)
        if (p[i] != (uint8_t)(i * 131u + 7u))
            fail_msg("byte %zu changed by eviction", i);
    for (size_t i = 0; i < 77; i++)
        assert_int_equal(q[i], 0x3C);
    er_arena_destroy(a);
}

static void test_arena_bad_arguments(void **state)
{
    (void)state;
    er_arena *a = er_arena_create();
    assert_non_null(a);
    assert_null(er_arena_alloc(a, 0, 64));
    assert_null(er_arena_alloc(a, 64, 0));
    assert_null(er_arena_alloc(a, 64, 48));   /* not a power of two */
    assert_null(er_arena_alloc(a, 64, 8192)); /* more than the arena aligns to */
    assert_null(er_arena_alloc(a, SIZE_MAX - 10, 64));
    assert_null(er_arena_alloc(NULL, 64, 64));
    er_arena_destroy(a);
    er_arena_destroy(NULL);
}

static void *other_thread_mark(void *arg)
{
    (void)arg;
    return er_arena_current();
}

static void test_arena_mark_is_per_thread(void **state)
{
    (void)state;
    er_arena *a = er_arena_create();
    assert_non_null(a);
    assert_null(er_arena_current());
    er_arena *prev = er_arena_packing(a);
    assert_null(prev);
    assert_ptr_equal(er_arena_current(), a);
    pthread_t t;
    void *seen = (void *)1;
    assert_int_equal(pthread_create(&t, NULL, other_thread_mark, NULL), 0);
    assert_int_equal(pthread_join(t, &seen), 0);
    assert_null(seen);
    assert_ptr_equal(er_arena_packing(prev), a);
    assert_null(er_arena_current());
    er_arena_destroy(a);
}

static void test_arena_asan_poison(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    er_arena *a = er_arena_create();
    assert_non_null(a);
    uint8_t *p = er_arena_alloc(a, 1000, 64), *q = er_arena_alloc(a, 1000, 64);
    assert_non_null(p);
    assert_non_null(q);
    assert_false(__asan_address_is_poisoned(p));
    assert_false(__asan_address_is_poisoned(p + 999));
    assert_true(__asan_address_is_poisoned(p + 1000)); /* past the end */
    assert_true(__asan_address_is_poisoned(q - 1));    /* before the next */
    assert_true(__asan_address_is_poisoned(q + 1000)); /* not handed out */
    assert_int_equal(er_arena_free(a, p), 1);
    assert_true(__asan_address_is_poisoned(p)); /* freed */
    assert_false(__asan_address_is_poisoned(q));
    er_arena_destroy(a);
#else
    tu_skip("not an AddressSanitizer build: no shadow memory to check");
#endif
}

/* Two matrices packed one after the other by the reference backend sit
 * next to each other at the start of a fresh region (the arena); a GEMM on
 * them is unchanged (test_ref and every plugin suite check the values). */
static void test_arena_holds_packed_weights(void **state)
{
    (void)state;
    char err[512] = "";
    edgert_ctx *ctx = tu_open(EDGERT_TEST_BACKEND_DIR, 2, err, sizeof err);
    if (!ctx)
        fail_msg("edgert_open: %s", err);
    edgert_backend *be = NULL;
    if (edgert_backend_open(ctx, "ref-w4a16", NULL, &be, err, sizeof err) != EDGERT_OK)
        fail_msg("ref-w4a16: %s", err);
    const uint32_t n = 96, k = 256;
    float *w = calloc((size_t)n * k, sizeof *w);
    assert_non_null(w);
    for (size_t i = 0; i < (size_t)n * k; i++)
        w[i] = (float)((i * 37u) % 29u) / 29.0f - 0.5f;
    edgert_qtensor q;
    assert_int_equal(edgert_quantize_rtn(w, n, k, 128, 1, &q), EDGERT_OK);
    edgert_packed *p1 = NULL, *p2 = NULL;
    assert_int_equal(edgert_pack(be, &q.view, &p1, err, sizeof err), EDGERT_OK);
    assert_int_equal(edgert_pack(be, &q.view, &p2, err, sizeof err), EDGERT_OK);
    const void *d1 = NULL, *d2 = NULL;
    size_t n1 = 0, n2 = 0;
    assert_int_equal(edgert_packed_data(p1, &d1, &n1, err, sizeof err), EDGERT_OK);
    assert_int_equal(edgert_packed_data(p2, &d2, &n2, err, sizeof err), EDGERT_OK);
    const uint8_t *b1 = d1, *b2 = d2;
    assert_true(b2 > b1);
    assert_true(b2 - b1 < (ptrdiff_t)(n1 + 4096u)); /* handle, bytes, redzones: adjacent */
    assert_int_equal((uintptr_t)b1 / (2 * MIB), (uintptr_t)b2 / (2 * MIB));
    /* the handle's first pack opened a region: its bytes follow the block
     * header and the plugin's handle, just past a 2 MiB boundary (the
     * ordinary heap puts a 13 KB block there once in ~500) */
    assert_true((uintptr_t)b1 % (2 * MIB) < 4096u);
    edgert_packed_free(p1);
    edgert_packed_free(p2);
    edgert_qtensor_free(&q);
    free(w);
    edgert_backend_close(be);
    edgert_close(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arena_back_to_back),
        cmocka_unit_test(test_arena_holes_reused),
        cmocka_unit_test(test_arena_big_and_foreign),
        cmocka_unit_test(test_arena_evict_keeps_bytes),
        cmocka_unit_test(test_arena_bad_arguments),
        cmocka_unit_test(test_arena_mark_is_per_thread),
        cmocka_unit_test(test_arena_asan_poison),
        cmocka_unit_test(test_arena_holds_packed_weights),
    };
    return tu_run_group("arena", tests, NULL, NULL);
}
