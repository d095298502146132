/*
 * core/run/arena.h — where packed weights live (arena.c).
 * Not installed.
 */
#ifndef EDGERT_CORE_ARENA_H
#define EDGERT_CORE_ARENA_H

#include <stddef.h>

/* ---- packed weights' memory (arena.c) ------------------------------------ */

typedef struct er_arena er_arena;
er_arena *er_arena_create(void);
/** Unmaps every region, blocks still live or not. */
void er_arena_destroy(er_arena *a);
/** `size` bytes aligned to `align` (a power of two, at most 4096; at least
 *  64 is given), back to back with earlier blocks on huge pages; NULL when
 *  the arguments do not fit or the system gives no memory. */
void *er_arena_alloc(er_arena *a, size_t size, size_t align);
/** 1 if p is a block of `a` (now freed), 0 if it is not (nothing done). */
int er_arena_free(er_arena *a, void *p);
/** The bytes of `a`'s blocks not freed yet (their sizes as asked). */
size_t er_arena_live_bytes(er_arena *a);
/** Evict every block of `a` from the caches (er_cache_evict): the next
 *  read of packed weights streams from memory (first contact's timing). */
void er_arena_evict(er_arena *a);
/** Mark this thread as running a pack whose allocations go to `a` (NULL:
 *  none) and return the previous mark, for the caller to restore. */
er_arena *er_arena_packing(er_arena *a);
/** This thread's mark (er_arena_packing). */
er_arena *er_arena_current(void);

#endif /* EDGERT_CORE_ARENA_H */
