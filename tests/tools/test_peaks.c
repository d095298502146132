/*
 * tests/tools/test_peaks.c — the reads behind bench's bandwidth ceiling and step
 * read (tools/peaks_bw.c) read every byte they claim, once.
 *
 * Each read loop folds every 8-byte word it loads into a value with xor,
 * whatever order the streams, chunks and prefetches take it in. So over
 * random bytes a read that covers [p, p + (bytes & ~255)) once returns the
 * xor of those words; one that skips a 256-byte block, reads one twice or
 * reads past the end returns something else (with probability 1 - 2^-64
 * per such block over xorshift bytes). (A block read three times would
 * pass: xor cannot tell it from once.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "edgert/edgert.h"
#include "peaks.h"
#include "test_util.h"

typedef struct {
    uint8_t *buf;   /* BUF_BYTES of xorshift bytes, then a guard of others */
    uint64_t flags; /* this CPU's, from the probe */
} fx;

/* More than two of the ceiling's chunks, plus a guard past the end a read
 * of too many bytes would fold in. */
#define BUF_BYTES (2 * PEAK_STREAM_CHUNK + 3 * 4096 + 768)
#define GUARD 8192

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    if (f == NULL)
        return -1;
    f->buf = aligned_alloc(64, BUF_BYTES + GUARD);
    char err[512] = "", *dir = tu_tmpdir(); /* no manifests: the probe is all it needs */
    edgert_ctx *ctx = dir ? tu_open(dir, 1, err, sizeof err) : NULL;
    tu_rmrf(dir);
    if (f->buf == NULL || ctx == NULL) {
        print_error("setup: %s\n", err);
        free(f->buf);
        free(f);
        return -1;
    }
    f->flags = edgert_device_facts(ctx)->cpu_flags;
    edgert_close(ctx);
    uint64_t x = 0x243F6A8885A308D3u;
    for (size_t i = 0; i + 8 <= BUF_BYTES + GUARD; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(f->buf + i, &x, 8);
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    free(f->buf);
    free(f);
    return 0;
}

/* The xor of the 8-byte words of [p, p + (bytes & ~255)). */
static uint64_t words_xor(const uint8_t *p, size_t bytes)
{
    uint64_t v = 0;
    for (size_t i = 0; i < (bytes & ~(size_t)255); i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        v ^= w;
    }
    return v;
}

/* Sizes around the ceiling's chunk and the 256-byte block: under one
 * block, one block, a tail short of a block, one chunk exactly, a chunk and
 * a bit, two chunks and a tail short of a block, two chunks and a tail,
 * and a part per stream that is not a whole number of blocks. */
static const size_t sizes[] = {
    0, 100, 256, 256 * 7 + 100, 4096 * 3, PEAK_STREAM_CHUNK, PEAK_STREAM_CHUNK + 4096,
    PEAK_STREAM_CHUNK + 256 * 9, 2 * PEAK_STREAM_CHUNK + 100, BUF_BYTES,
};
static const unsigned streams[] = {1, 2, 3, BW_STREAMS_FEW, BW_STREAMS_MANY};
static const int prefetches[] = {BW_PF_NONE, BW_PF_PAIR, BW_PF_FAR, BW_PF_L1};

/* Every (size, streams, prefetch) with `read`, on the loads `flags` pick. */
static void check_reads(const fx *f, uint64_t flags, int chunked, const char *loads)
{
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (size_t ki = 0; ki < sizeof streams / sizeof streams[0]; ki++)
            for (size_t pi = 0; pi < sizeof prefetches / sizeof prefetches[0]; pi++) {
                const size_t n = sizes[si];
                uint64_t got = chunked ? peak_read_chunked(f->buf, n, streams[ki], prefetches[pi],
                                                       flags)
                                     : peak_read(f->buf, n, streams[ki], prefetches[pi], flags);
                if (got != words_xor(f->buf, n))
                    fail_msg("%s (%s loads), %zu bytes, %u streams, prefetch %d: the read does "
                             "not cover [0, %zu) once",
                             chunked ? "peak_read_chunked" : "peak_read", loads, n, streams[ki],
                             prefetches[pi], n & ~(size_t)255);
            }
}

/* The portable loads on every CPU (flags 0 picks them). */
static void test_reads_portable(void **state)
{
    const fx *f = *state;
    check_reads(f, 0, 0, "portable");
    check_reads(f, 0, 1, "portable");
}

/* The AVX-512 loads, where this CPU has them: what bench uses there. */
static void test_reads_avx512(void **state)
{
    const fx *f = *state;
#if defined(__x86_64__)
    if (!EDGERT_HAS_FLAG(f->flags, EDGERT_CPU_AVX512F))
        tu_skip("this CPU lacks avx512f: the AVX-512 read loop cannot run here");
    check_reads(f, f->flags, 0, "AVX-512");
    check_reads(f, f->flags, 1, "AVX-512");
#else
    (void)f;
    tu_skip("not x86-64: no AVX-512 read loop");
#endif
}

/* The test's own check can fail: a read one block short, or one block
 * long, folds to another value. */
static void test_check_sees_a_block(void **state)
{
    const fx *f = *state;
    const size_t n = PEAK_STREAM_CHUNK + 4096;
    assert_int_not_equal(peak_read_chunked(f->buf, n - 256, BW_STREAMS_FEW, BW_PF_NONE, 0),
                         words_xor(f->buf, n));
    assert_int_not_equal(peak_read_chunked(f->buf, n + 256, BW_STREAMS_FEW, BW_PF_NONE, 0),
                         words_xor(f->buf, n));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_portable),
        cmocka_unit_test(test_reads_avx512),
        cmocka_unit_test(test_check_sees_a_block),
    };
    return tu_run_group("peaks", tests, setup, teardown);
}
