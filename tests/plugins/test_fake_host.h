/*
 * tests/plugins/test_fake_host.h — a host table of the tests' own, for calling a
 * plugin library's entry and init directly with the CPU flags a test
 * chooses (a CPU that lacks what the plugin needs, or a host of another
 * size): one thread, plain aligned memory, no log.
 * Header-only (static functions), like test_util.h; include after cmocka.h
 * (fh_entry fails the test through cmocka's fail_msg).
 */
#ifndef EDGERT_TEST_FAKE_HOST_H
#define EDGERT_TEST_FAKE_HOST_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

#include "edgert/plugin.h"

__attribute__((unused)) static void *fh_alloc(void *ctx, size_t size, size_t align)
{
    (void)ctx;
    return aligned_alloc(align, (size + align - 1u) / align * align);
}

__attribute__((unused)) static void fh_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

__attribute__((unused)) static void fh_log(void *ctx, edgert_log_level level, const char *fmt,
                                           ...)
{
    (void)ctx;
    (void)level;
    (void)fmt;
}

/* every range on the calling thread, as one call */
__attribute__((unused)) static void fh_pfor(void *ctx, size_t n, size_t grain, edgert_range_fn fn,
                                            void *arg)
{
    (void)ctx;
    (void)grain;
    if (n)
        fn(arg, 0, n, 0);
}

__attribute__((unused)) static unsigned fh_threads(void *ctx)
{
    (void)ctx;
    return 1;
}

/* A host table that answers ABI `abi` and reports `flags` as this CPU's. */
__attribute__((unused)) static edgert_host fh_host(uint32_t abi, uint64_t flags)
{
    edgert_host h = {
        .struct_size = sizeof h, .abi_version = abi, .log = fh_log, .alloc = fh_alloc,
        .free = fh_free, .parallel_for = fh_pfor, .thread_count = fh_threads, .cpu_flags = flags,
    };
    return h;
}

/* dlopen `lib` (the handle in *h, for dlclose) and return its entry point;
 * fails the test, with the reason, when either is missing. */
__attribute__((unused)) static edgert_plugin_entry_fn fh_entry(const char *lib, void **h)
{
    *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (*h == NULL)
        fail_msg("dlopen %s: %s", lib, dlerror());
    edgert_plugin_entry_fn e = (edgert_plugin_entry_fn)dlsym(*h, EDGERT_PLUGIN_ENTRY_SYMBOL);
    if (e == NULL)
        fail_msg("%s exports no %s", lib, EDGERT_PLUGIN_ENTRY_SYMBOL);
    return e;
}

#endif
