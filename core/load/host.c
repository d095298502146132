/*
 * core/load/host.c — what the core offers a plugin: the host table (plugin.h's
 * edgert_host: logging into the core's log (context.c), allocation, the
 * thread pool).
 * One table per candidate, valid from the entry call until the plugin is
 * unloaded; host_ctx is the candidate, so every service reaches its handle.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "context/context.h"
#include "load/load.h"

/* ---- the host table ------------------------------------------------------ */

static void host_log(void *host_ctx, edgert_log_level level, const char *fmt, ...)
{
    er_cand *c = host_ctx;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    /* a level the plugin made up never reaches the integrator's callback:
     * the nearest one does (a "trace" above DEBUG is DEBUG, and filtered
     * as DEBUG is), the line naming it */
    int known = level == EDGERT_LOG_ERROR || level == EDGERT_LOG_WARN ||
                level == EDGERT_LOG_INFO || level == EDGERT_LOG_DEBUG;
    if (!known)
        er_log(c->ctx, (int)level > EDGERT_LOG_DEBUG ? EDGERT_LOG_DEBUG : EDGERT_LOG_ERROR,
               "%s (log level %d, which is none): %s", c->m.name, (int)level, buf);
    else
        er_log(c->ctx, level, "%s: %s", c->m.name, buf);
}

/* Packed weights go to the handle's arena (arena.c): back to back on huge
 * pages. Other large buffers (a prefill call's activation scratch) are
 * 2 MiB-aligned and asked for transparent huge pages on their whole 2 MiB
 * pages. Linux's default THP mode is "madvise", so without the hint nothing
 * gets huge pages. */
#define ER_HUGE (2u << 20)

static void *host_alloc(void *host_ctx, size_t size, size_t align)
{
    er_cand *c = host_ctx;
    if (align < sizeof(void *) || (align & (align - 1)))
        return NULL;
    if (size == 0)
        size = 1;
    /* Inside edgert_pack: packed weights, back to back on huge pages
     * (arena.c); if the arena cannot serve it, the path below does. */
    er_arena *a = er_arena_current();
    if (a && a == c->ctx->arena) {
        void *p = er_arena_alloc(a, size, align);
        if (p)
            return p;
    }
    if (size > SIZE_MAX - align - ER_HUGE)
        return NULL;
    /* From one huge page up: start on a 2 MiB boundary, and ask for huge
     * pages on the whole 2 MiB pages of the buffer. The tail (< 2 MiB)
     * stays on 4 KiB pages: rounding the size up would make the kernel
     * back the slack too (up to +90% on a 2.2 MB matrix). */
    size_t huge = size >= ER_HUGE ? size & ~(size_t)(ER_HUGE - 1) : 0u;
    if (huge)
        align = align > ER_HUGE ? align : ER_HUGE;
    void *p = NULL;
    if (posix_memalign(&p, align, size) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (huge)
        (void)madvise(p, huge, MADV_HUGEPAGE); /* a hint: failure changes nothing */
#endif
    return p;
}

static void host_free(void *host_ctx, void *ptr)
{
    er_cand *c = host_ctx;
    if (ptr && er_arena_free(c->ctx->arena, ptr))
        return;
    free(ptr);
}

static void host_parallel_for(void *host_ctx, size_t n, size_t grain, edgert_range_fn fn, void *arg)
{
    er_cand *c = host_ctx;
    er_pool_run(c->ctx->pool, n, grain, fn, arg);
}

static unsigned host_threads(void *host_ctx)
{
    er_cand *c = host_ctx;
    return er_pool_threads(c->ctx->pool);
}

void er_host_fill(er_cand *c, uint32_t abi)
{
    c->host.struct_size = sizeof c->host;
    c->host.abi_version = abi;
    c->host.host_ctx = c;
    c->host.log = host_log;
    c->host.alloc = host_alloc;
    c->host.free = host_free;
    c->host.parallel_for = host_parallel_for;
    c->host.thread_count = host_threads;
    /* In plan mode the flags describe the profiled device, not this host, so a
     * plugin loaded on demand there (export) is told none: portable code. */
    c->host.cpu_flags = c->ctx->dev.planned ? 0 : c->ctx->dev.cpu_flags;
}
