/*
 * plugins/amx-w4a8/a8_prefetch.h — decode's software prefetch, shared by
 * every kernel file (AVX-512 and AVX2 alike: prefetch is an SSE
 * instruction, and nothing here needs more).
 */
#ifndef A8_PREFETCH_H
#define A8_PREFETCH_H

#include <immintrin.h>
#include <stdint.h>

#include "a8_internal.h"

/* Software prefetch while streaming codes (decode), one of four per
 * instance (prefetch=far|near|none|far-l1; none issues nothing), each
 * decode kernel instantiated for each (PK_BY_PF):
 *   far     a prefetcht1 8 KiB ahead of every 64-byte line, the distance
 *           and hint measured best among T1 distances and short T0 ones
 *           for avx512-w4a16's stream on Zen 5 (aw_kern.h);
 *   near    a prefetcht1 4 KiB ahead and a prefetcht0 512 bytes ahead;
 *   far-l1  a prefetcht0 6 KiB ahead: the prefetching mode off Intel
 *           (a8_decode_defaults). On AMD EPYC Zen 5 (family 26, model 2),
 *           m = 1, bench --versus against far (16 pairs of steps a run,
 *           median step-time ratio of the run): with 1 thread (a 40 GB/s
 *           ceiling, what each core draws in a quiet 2-thread window) T1
 *           at 4/5/6/7/12 KiB 1.020/1.001/0.981/0.982/1.065, T0 at 4/6/8/12
 *           KiB 0.993/0.938/0.939/0.970, NTA at 6 KiB 0.940 (4 runs each;
 *           T0 +6 KiB again 0.893-0.990 in 3); with 2 threads from DRAM on
 *           a busy host (34-47 GB/s) T0 +6 KiB 0.905-0.983, median 0.965 (6
 *           runs) and 0.920-1.001, median 0.970 (8); a 27 MB workload
 *           resident in L3 0.874-0.996 (median 0.930 of 4). T0 +8 KiB was as
 *           good with 1 thread but about even (0.995) with 2. This kernel
 *           does less work per line than avx512-w4a16's and gains more.
 * On a Xeon with AMX (ceiling 36-39 GB/s, the whole decode step, variants
 * interleaved, 3 rounds each): far 30.95 ms median (0.76 of the ceiling);
 * T1 8 KiB + T0 512 B 28.67; then, in one series, T1 8 KiB + T0 256 B /
 * 1 KiB / T1 16 KiB + T0 512 B within 2% of 28.0, and T1 4 KiB + T0 512 B
 * 26.96 (0.84-0.86; T1 2 or 3 KiB the same within noise). On Zen 5 two
 * prefetches per line cost avx512-w4a16's kernel 27% (aw_kern.h), so near
 * is the default on Intel only (a8_init). */
#define A8_PF_DIST 8192
#define A8_PF_NEAR_DIST 4096
#define A8_PF_NEAR 512
#define A8_PF_L1_DIST 6144

static inline __attribute__((always_inline)) void a8_prefetch(const uint8_t *p, int near)
{
    if (near == PK_PF_NONE)
        return;
    if (near == PK_PF_FAR_L1) {
        _mm_prefetch((const char *)(p + A8_PF_L1_DIST), _MM_HINT_T0);
    } else if (near == PK_PF_NEAR_TOO) {
        _mm_prefetch((const char *)(p + A8_PF_NEAR_DIST), _MM_HINT_T1);
        _mm_prefetch((const char *)(p + A8_PF_NEAR), _MM_HINT_T0);
    } else {
        _mm_prefetch((const char *)(p + A8_PF_DIST), _MM_HINT_T1);
    }
}

#endif /* A8_PREFETCH_H */
