/*
 * core/run/arena.c — where packed weights live: whatever a plugin allocates
 * while the core runs its pack (edgert_pack) is carved, back to back, out
 * of large 2 MiB-aligned regions that ask for transparent huge pages.
 *
 * Why: a decode step streams every packed matrix once (0.9 GB for
 * spark-1.7b), and the hardware prefetchers stop, and the TLB misses, at
 * every 4 KiB page boundary. One allocation per matrix (host.c's path for
 * everything else) gets huge pages only on the whole 2 MiB pages inside it;
 * the tail of every matrix stays on 4 KiB pages: 40% of a 3.3 MB qkv
 * matrix, 10% of a 2.2 MB one. Rounding each matrix up to whole huge pages
 * would cost up to +90% of memory on small matrices (the kernel backs the
 * slack of a huge page that is touched at all); packing matrices into
 * shared regions costs at most the untouched part of each region's last
 * huge page. Measured on the Xeon with AMX (bench decode, spark-1.7b, 3
 * interleaved rounds against the build before): the step 1.8-3.5% shorter
 * on avx512-w4a16, 0.8-2.7% on avx512-w4a8, 2.9-7.0% on amx-w4a8; qkv's
 * share gains the most (28.8 -> 30.8 GB/s).
 *
 * Allocation is first fit: a freed block's span becomes a hole (merged with
 * its free neighbours) that later blocks fill, and a region whose last
 * block is freed is unmapped, so a plugin's scratch freed inside pack, or
 * weights freed and packed again, cost no memory. Only what a plugin
 * allocates inside pack comes here: scratch of a GEMM call keeps the
 * ordinary allocator (host.c).
 *
 * Under AddressSanitizer every block sits between poisoned redzones (the
 * one before it holds its size), everything not handed out is poisoned and
 * a freed block is poisoned again, so a kernel that reads past either end
 * of its packed matrix, or a freed one, is still caught (the mmap'd regions
 * are not ASan's heap).
 *
 * One arena per handle (edgert_ctx), behind its own mutex; the "inside
 * pack" marker is thread-local, so two handles, or two threads of one,
 * never route each other's allocations.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/internal.h"
#include "run/arena.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define ER_ARENA_REDZONE 64u
#else
#define ASAN_POISON_MEMORY_REGION(a, s) ((void)(a), (void)(s))
#define ASAN_UNPOISON_MEMORY_REGION(a, s) ((void)(a), (void)(s))
#define ER_ARENA_REDZONE 0u
#endif

#define ER_ARENA_HUGE ((size_t)2 << 20)
/* Address space per region: the last region's untouched tail costs nothing
 * but addresses, and bigger regions mean fewer partly used huge pages. */
#define ER_ARENA_REGION ((size_t)128 << 20)
#define ER_ARENA_MAX_ALIGN 4096u

/* Every block is preceded by a header (its span, its size, a magic); a span
 * runs from the end of the previous block's span (or a hole's start) to the
 * end of the block and, under ASan, a redzone after it. */
#define ER_ARENA_HEADER 64u
#define ER_ARENA_MAGIC 0x616e6572u /* "rena" */

typedef struct er_arena_block {
    size_t start, stop; /* the span, as offsets in the region */
    size_t size;
    uint32_t magic;
} er_arena_block;

typedef struct er_arena_hole {
    size_t off, len;
} er_arena_hole;

typedef struct er_arena_region {
    struct er_arena_region *next;
    uint8_t *base;
    size_t size;          /* a multiple of ER_ARENA_HUGE */
    size_t used;          /* spans handed out lie below this offset ... */
    size_t live;          /* ... this many of them not freed yet ... */
    er_arena_hole *holes; /* ... and these parts of [0, used) are free again: */
    size_t nholes, cap;   /* sorted, never adjacent to each other or to `used` */
} er_arena_region;

struct er_arena {
    pthread_mutex_t lock;
    er_arena_region *regions; /* newest first */
    size_t live_bytes;        /* the sizes of the blocks not freed yet */
};

static __thread er_arena *er_tl_packing;

er_arena *er_arena_create(void)
{
    er_arena *a = calloc(1, sizeof *a);
    if (a && pthread_mutex_init(&a->lock, NULL) != 0) {
        free(a);
        a = NULL;
    }
    return a;
}

static void region_unmap(er_arena_region *r)
{
    /* the shadow outlives the mapping: clean it for whoever maps here next */
    ASAN_UNPOISON_MEMORY_REGION(r->base, r->size);
    munmap(r->base, r->size);
    free(r->holes);
    free(r);
}

void er_arena_destroy(er_arena *a)
{
    if (!a)
        return;
    while (a->regions) {
        er_arena_region *r = a->regions;
        a->regions = r->next;
        region_unmap(r);
    }
    pthread_mutex_destroy(&a->lock);
    free(a);
}

/* A new region of at least `need` bytes, 2 MiB-aligned (map 2 MiB more,
 * unmap the ends), asked for huge pages; NULL when the system refuses. */
static er_arena_region *region_new(size_t need)
{
    size_t size = need > ER_ARENA_REGION ? need : ER_ARENA_REGION;
    if (size > SIZE_MAX - 2 * ER_ARENA_HUGE)
        return NULL;
    size = (size + ER_ARENA_HUGE - 1) & ~(ER_ARENA_HUGE - 1);
    er_arena_region *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    size_t span = size + ER_ARENA_HUGE;
    uint8_t *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        free(r);
        return NULL;
    }
    const uintptr_t huge_mask = ~(uintptr_t)(ER_ARENA_HUGE - 1);
    uint8_t *base = (uint8_t *)(((uintptr_t)m + ER_ARENA_HUGE - 1) & huge_mask);
    if (base > m)
        munmap(m, (size_t)(base - m));
    if (base + size < m + span)
        munmap(base + size, (size_t)(m + span - (base + size)));
#ifdef MADV_HUGEPAGE
    (void)madvise(base, size, MADV_HUGEPAGE); /* a hint: failure changes nothing */
#endif
    ASAN_POISON_MEMORY_REGION(base, size);
    r->base = base;
    r->size = size;
    return r;
}

/* Where a block of `size` bytes aligned to `align` goes in the free space
 * [s, e): its first byte, with *stop the end of its span (64-byte aligned,
 * the ASan redzone included); SIZE_MAX when it does not fit. Sizes are
 * below SIZE_MAX / 2 and offsets below a region's size: nothing overflows. */
static size_t fit(size_t s, size_t e, size_t size, size_t align, size_t *stop)
{
    size_t at = (s + ER_ARENA_HEADER + align - 1) & ~(align - 1);
    if (at > e || e - at < size)
        return SIZE_MAX;
    size_t end = (at + size + ER_ARENA_REDZONE + 63u) & ~(size_t)63u;
    if (end > e)
        return SIZE_MAX;
    *stop = end;
    return at;
}

static void hole_drop(er_arena_region *r, size_t i)
{
    memmove(&r->holes[i], &r->holes[i + 1], (r->nholes - i - 1) * sizeof *r->holes);
    r->nholes--;
}

/* Hand out [start, stop) with the block at `at`. */
static void *block_make(er_arena_region *r, size_t start, size_t at, size_t stop, size_t size)
{
    er_arena_block *h = (er_arena_block *)(void *)(r->base + at - ER_ARENA_HEADER);
    ASAN_UNPOISON_MEMORY_REGION(h, sizeof *h);
    *h = (er_arena_block){.start = start, .stop = stop, .size = size, .magic = ER_ARENA_MAGIC};
    ASAN_POISON_MEMORY_REGION(h, sizeof *h);
    r->live++;
    ASAN_UNPOISON_MEMORY_REGION(r->base + at, size);
    return r->base + at;
}

/* First fit: a hole of any region, then the unused end of any region, then
 * a new region. */
static void *arena_alloc_locked(er_arena *a, size_t size, size_t align)
{
    size_t at, stop;
    for (er_arena_region *r = a->regions; r; r = r->next)
        for (size_t i = 0; i < r->nholes; i++) {
            er_arena_hole *h = &r->holes[i];
            size_t start = h->off;
            if ((at = fit(h->off, h->off + h->len, size, align, &stop)) == SIZE_MAX)
                continue;
            h->len -= stop - h->off;
            h->off = stop;
            if (h->len == 0)
                hole_drop(r, i);
            return block_make(r, start, at, stop, size);
        }
    for (er_arena_region *r = a->regions; r; r = r->next)
        if ((at = fit(r->used, r->size, size, align, &stop)) != SIZE_MAX) {
            size_t start = r->used;
            r->used = stop;
            return block_make(r, start, at, stop, size);
        }
    er_arena_region *r = region_new(ER_ARENA_HEADER + size + align + ER_ARENA_REDZONE + 64u);
    if (!r || (at = fit(0, r->size, size, align, &stop)) == SIZE_MAX) {
        if (r)
            region_unmap(r);
        return NULL;
    }
    r->next = a->regions;
    a->regions = r;
    r->used = stop;
    return block_make(r, 0, at, stop, size);
}

void *er_arena_alloc(er_arena *a, size_t size, size_t align)
{
    if (!a || size == 0 || align == 0 || (align & (align - 1)) || align > ER_ARENA_MAX_ALIGN ||
        size > SIZE_MAX / 4)
        return NULL;
    if (align < 64u)
        align = 64u; /* blocks never share a cache line */
    pthread_mutex_lock(&a->lock);
    void *p = arena_alloc_locked(a, size, align);
    if (p)
        a->live_bytes += size;
    pthread_mutex_unlock(&a->lock);
    return p;
}

size_t er_arena_live_bytes(er_arena *a)
{
    if (!a)
        return 0;
    pthread_mutex_lock(&a->lock);
    size_t n = a->live_bytes;
    pthread_mutex_unlock(&a->lock);
    return n;
}

/* Give [start, stop) back: merged with the holes beside it, or with the
 * unused end. A hole that cannot be recorded (no memory) is lost until the
 * region is unmapped, nothing worse. */
static void span_release(er_arena_region *r, size_t start, size_t stop)
{
    size_t i = 0;
    while (i < r->nholes && r->holes[i].off < start)
        i++;
    if (i > 0 && r->holes[i - 1].off + r->holes[i - 1].len == start) {
        start = r->holes[i - 1].off;
        hole_drop(r, --i);
    }
    if (i < r->nholes && r->holes[i].off == stop) {
        stop += r->holes[i].len;
        hole_drop(r, i);
    }
    if (stop == r->used) {
        r->used = start;
        return;
    }
    if (r->nholes == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 16u;
        er_arena_hole *h = realloc(r->holes, cap * sizeof *h);
        if (!h)
            return;
        r->holes = h;
        r->cap = cap;
    }
    memmove(&r->holes[i + 1], &r->holes[i], (r->nholes - i) * sizeof *r->holes);
    r->holes[i] = (er_arena_hole){start, stop - start};
    r->nholes++;
}

int er_arena_free(er_arena *a, void *p)
{
    if (!a || !p)
        return 0;
    const uint8_t *q = p;
    pthread_mutex_lock(&a->lock);
    er_arena_region **link = &a->regions, *r;
    while ((r = *link) != NULL && !(q >= r->base && q < r->base + r->size))
        link = &r->next;
    if (r && q >= r->base + ER_ARENA_HEADER) {
        er_arena_block *h = (er_arena_block *)(void *)(q - ER_ARENA_HEADER), b;
        ASAN_UNPOISON_MEMORY_REGION(h, sizeof *h);
        b = *h;
        const int block = b.magic == ER_ARENA_MAGIC && b.stop <= r->used && b.start < b.stop;
        if (block)
            h->magic = 0; /* a second free of the same block finds no block */
        ASAN_POISON_MEMORY_REGION(h, sizeof *h);
        if (block) {
            a->live_bytes -= b.size;
            ASAN_POISON_MEMORY_REGION(p, b.size);
            if (--r->live == 0) {
                *link = r->next;
                region_unmap(r);
            } else {
                span_release(r, b.start, b.stop);
            }
        }
    }
    pthread_mutex_unlock(&a->lock);
    return r != NULL;
}

void er_arena_evict(er_arena *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->lock);
    for (er_arena_region *r = a->regions; r; r = r->next) {
        /* the whole used span, headers and holes too: simpler, and cheap
         * (a flush is not a load: ASan's poison does not mind it) */
        er_cache_evict(r->base, r->used);
    }
    pthread_mutex_unlock(&a->lock);
}

er_arena *er_arena_packing(er_arena *a)
{
    er_arena *prev = er_tl_packing;
    er_tl_packing = a;
    return prev;
}

er_arena *er_arena_current(void)
{
    return er_tl_packing;
}
