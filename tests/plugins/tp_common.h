/*
 * tests/plugins/tp_common.h — a minimal, honest plugin for the test suite:
 * a plain dequantize-and-dot GEMM (independent of the reference backend), with
 * knobs to misbehave on purpose. Each tp_*.c sets the knobs and includes this.
 *
 *   TP_NAME            the descriptor's name (default "test-good")
 *   TP_ABI_LO/HI       ABI versions the plugin can speak (default 1..1)
 *   TP_CAPS            capability bits (default EDGERT_CAP_GEMM)
 *   TP_INIT_FAILS      init always refuses
 *   TP_SELFTEST_FAILS  self_test always reports a mismatch
 *   TP_ENTRY_NAME      the exported symbol (default edgert_plugin_entry)
 *   TP_DESCRIBE        what describe() returns
 *   TP_WRONG_LAST_ZERO a subtle arithmetic bug its symmetric self-test cannot
 *                      see: the last group of every row is dequantized with
 *                      zero point 8 instead of the stored one
 *   TP_SKIP_LAST_GROUP an off-by-one: the last group of K is left out of every
 *                      dot product (its weights packed as 0)
 *   TP_WRONG_PAST_K    a bug only long rows show: columns from this one on
 *                      are dequantized with zero point 8 instead of the
 *                      stored one (a second K block's, say)
 *   TP_SELFTEST_CHECKS_NOTHING  self_test returns OK without computing
 *   TP_ON_LOAD         a statement run in the library's constructor
 *   TP_ON_INIT         a statement run at the start of init
 *   TP_ON_SELF_TEST    a statement run at the start of the self-test
 *   TP_ON_GEMM         a statement run at the start of every gemm
 *   TP_STRUCT_SIZE     every descriptor's struct_size (default: its real size)
 *   TP_PACKED_FLAGS    packed_flags of every descriptor (ABI 2; default 0)
 *   TP_PACKED_LAYOUT   packed_layout of every descriptor (default NULL)
 *   TP_PACKED_FNS      packed_data and packed_map are set, and break the
 *                      contract on purpose: packed_data answers a misaligned
 *                      pointer, packed_map succeeds without a handle (the
 *                      core must refuse both, EDGERT_E_PLUGIN)
 *   TP_PACK_MALLOC     pack allocates the packed values with aligned_alloc,
 *                      not host->alloc (first contact must notice)
 *   TP_PACK_REFUSES_GROUP  pack refuses weights of this group size (a library
 *                      whose manifest declares a layout it does not take)
 * (The ABI-2 fields are set in the ABI-1 descriptor too: the core must not
 * read them from a descriptor that answered ABI 1.)
 * (the misbehaving plugins: crash, abort, loop, exit, overfill the
 * error buffer, leave a thread running — each must be rejected with its
 * reason while the process that hosts edgert goes on)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgert/plugin.h"

#ifndef TP_NAME
#define TP_NAME "test-good"
#endif
#ifndef TP_ABI_LO
#define TP_ABI_LO 1u
#endif
#ifndef TP_ABI_HI
#define TP_ABI_HI 1u
#endif
#ifndef TP_CAPS
#define TP_CAPS EDGERT_CAP_GEMM
#endif
#ifndef TP_ENTRY_NAME
#define TP_ENTRY_NAME edgert_plugin_entry
#endif
#ifndef TP_DESCRIBE
#define TP_DESCRIBE "test plugin: dequantize once, scalar dot products"
#endif

typedef struct tp_state {
    const edgert_host *host;
    unsigned inits;
} tp_state;

typedef struct tp_packed {
    uint32_t n, k, groups;
    float *w; /* dequantized [n][k] — a test plugin may trade memory for simplicity */
} tp_packed;

#ifdef TP_ON_LOAD
__attribute__((constructor)) static void tp_on_load(void)
{
    TP_ON_LOAD;
}
#endif
#ifndef TP_ON_INIT
#define TP_ON_INIT (void)0
#endif
#ifndef TP_ON_SELF_TEST
#define TP_ON_SELF_TEST (void)0
#endif
#ifndef TP_ON_GEMM
#define TP_ON_GEMM (void)0
#endif

static edgert_status tp_init(const edgert_host *host, const char *options, void **state,
                             char *err, size_t err_len)
{
    TP_ON_INIT;
#ifdef TP_INIT_FAILS
    (void)host; (void)options; (void)state;
    edgert_errf(err, err_len, "this test plugin always refuses to initialise");
    return EDGERT_E_PLUGIN;
#else
    if (options && *options) {
        edgert_errf(err, err_len, "unknown option (this plugin takes none)");
        return EDGERT_E_USAGE;
    }
    tp_state *s = host->alloc(host->host_ctx, sizeof *s, 16);
    if (!s) {
        edgert_errf(err, err_len, "out of memory");
        return EDGERT_E_NOMEM;
    }
    memset(s, 0, sizeof *s);
    s->host = host;
    *state = s;
    return EDGERT_OK;
#endif
}

static void tp_fini(void *state)
{
    tp_state *s = state;
    if (s)
        s->host->free(s->host->host_ctx, s);
}

static edgert_status tp_pack(void *state, const edgert_qweights *w, void **packed,
                             size_t *packed_bytes, char *err, size_t err_len)
{
    tp_state *s = state;
#ifdef TP_PACK_REFUSES_GROUP
    if (w->group == TP_PACK_REFUSES_GROUP) {
        edgert_errf(err, err_len, "group %u, only others supported", w->group);
        return EDGERT_E_UNSUPPORTED;
    }
#endif
    uint32_t groups = (w->k + w->group - 1) / w->group;
    tp_packed *p = s->host->alloc(s->host->host_ctx, sizeof *p, 16);
    if (!p) {
        edgert_errf(err, err_len, "out of memory");
        return EDGERT_E_NOMEM;
    }
    p->n = w->n;
    p->k = w->k;
    p->groups = groups;
#ifdef TP_PACK_MALLOC
    p->w = aligned_alloc(64, ((size_t)w->n * w->k * sizeof(float) + 63) & ~(size_t)63);
#else
    p->w = s->host->alloc(s->host->host_ctx, (size_t)w->n * w->k * sizeof(float), 64);
#endif
    if (!p->w) {
        s->host->free(s->host->host_ctx, p);
        edgert_errf(err, err_len, "out of memory");
        return EDGERT_E_NOMEM;
    }
    size_t stride = (w->k + 1) / 2;
    for (uint32_t r = 0; r < w->n; r++)
        for (uint32_t c = 0; c < w->k; c++) {
            uint8_t b = w->codes[(size_t)r * stride + c / 2];
            int q = (c & 1) ? b >> 4 : b & 15;
            uint32_t g = c / w->group;
            size_t gi = (size_t)r * groups + g;
#ifdef TP_WRONG_LAST_ZERO
            int z = (w->zeros && g + 1 < groups) ? w->zeros[gi] : 8; /* THE BUG */
#elif defined(TP_WRONG_PAST_K)
            int z = (w->zeros && c < TP_WRONG_PAST_K) ? w->zeros[gi] : 8; /* THE BUG */
#else
            int z = w->zeros ? w->zeros[gi] : 8;
#endif
            p->w[(size_t)r * w->k + c] = w->scales[gi] * (float)(q - z);
#ifdef TP_SKIP_LAST_GROUP
            if (g + 1 == groups)
                p->w[(size_t)r * w->k + c] = 0.0f; /* THE BUG: off by one group */
#endif
        }
    *packed = p;
    *packed_bytes = (size_t)w->n * w->k * sizeof(float);
    return EDGERT_OK;
}

static void tp_packed_free(void *state, void *packed)
{
    tp_state *s = state;
    tp_packed *p = packed;
    if (!p)
        return;
#ifdef TP_PACK_MALLOC
    free(p->w);
#else
    s->host->free(s->host->host_ctx, p->w);
#endif
    s->host->free(s->host->host_ctx, p);
}

struct tp_job {
    const tp_packed *p;
    const edgert_gemm_args *a;
};

static void tp_rows(void *arg, size_t begin, size_t end, unsigned worker)
{
    (void)worker;
    const struct tp_job *j = arg;
    for (uint32_t m = 0; m < j->a->m; m++)
        for (size_t r = begin; r < end; r++) {
            float acc = 0.0f;
            for (uint32_t c = 0; c < j->p->k; c++)
                acc += j->a->x[m * j->a->ldx + c] * j->p->w[r * j->p->k + c];
            j->a->y[m * j->a->ldy + r] = acc;
        }
}

static edgert_status tp_gemm(void *state, const void *packed, const edgert_gemm_args *a,
                             char *err, size_t err_len)
{
    TP_ON_GEMM;
    tp_state *s = state;
    struct tp_job j = {packed, a};
    (void)err; (void)err_len;
    s->host->parallel_for(s->host->host_ctx, j.p->n, 16, tp_rows, &j);
    return EDGERT_OK;
}

static edgert_status tp_self_test(void *state, char *err, size_t err_len)
{
    TP_ON_SELF_TEST;
#ifdef TP_SELFTEST_FAILS
    (void)state;
    edgert_errf(err, err_len, "y[0][0] = 1.5, expected 2.5 (deliberate failure of a test plugin)");
    return EDGERT_E_PLUGIN;
#elif defined(TP_SELFTEST_CHECKS_NOTHING)
    (void)state; (void)err; (void)err_len;
    return EDGERT_OK;
#else
    /* 2x4 weights, group 4, symmetric: check one dot product by hand. */
    uint8_t codes[4] = {0x9A, 0x78, 0x87, 0xA9}; /* row0: 10 9 8 7, row1: 7 8 9 10 */
    float scales[2] = {0.5f, 0.25f};
    edgert_qweights w = {.struct_size = sizeof w, .n = 2, .k = 4, .group = 4, .codes = codes,
                         .scales = scales, .name = "self-test"};
    void *p = NULL;
    size_t bytes = 0;
    edgert_status st = tp_pack(state, &w, &p, &bytes, err, err_len);
    if (st != EDGERT_OK)
        return st;
    float x[4] = {1, 2, 3, 4}, y[2] = {0, 0};
    edgert_gemm_args a = {sizeof a, 1, x, 4, y, 2};
    st = tp_gemm(state, p, &a, err, err_len);
    tp_packed_free(state, p);
    /* row0: 0.5*(2*1 + 1*2 + 0*3 - 1*4) = 0; row1: 0.25*(-1 + 0 + 3 + 8) = 2.5 */
    if (st == EDGERT_OK && (y[0] != 0.0f || y[1] != 2.5f)) {
        edgert_errf(err, err_len, "self-test GEMM mismatch");
        return EDGERT_E_PLUGIN;
    }
    return st;
#endif
}

static const char *tp_describe(void *state)
{
    (void)state;
    return TP_DESCRIBE;
}

#ifdef TP_PACKED_FNS
static edgert_status tp_packed_data(void *state, const void *packed, const void **data,
                                    size_t *size, char *err, size_t err_len)
{
    (void)state; (void)err; (void)err_len;
    const tp_packed *p = packed;
    *data = (const char *)p->w + 1; /* misaligned: the core must refuse it */
    *size = 8;
    return EDGERT_OK;
}

static edgert_status tp_packed_map(void *state, const edgert_qweights *shape, const void *data,
                                   size_t size, void **packed, char *err, size_t err_len)
{
    (void)state; (void)shape; (void)data; (void)size; (void)err; (void)err_len;
    *packed = NULL; /* "success" without a handle: the core must refuse it */
    return EDGERT_OK;
}
#define TP_PACKED_DATA tp_packed_data
#define TP_PACKED_MAP tp_packed_map
#else
#define TP_PACKED_DATA NULL
#define TP_PACKED_MAP NULL
#endif
#ifndef TP_PACKED_FLAGS
#define TP_PACKED_FLAGS 0u
#endif
#ifndef TP_PACKED_LAYOUT
#define TP_PACKED_LAYOUT NULL
#endif

static edgert_status tp_export(void *state, const char *out_dir, const char *request, char *err,
                               size_t err_len)
{
    (void)state; (void)out_dir; (void)request;
    edgert_errf(err, err_len, "test plugin exports nothing");
    return EDGERT_E_UNSUPPORTED;
}

/*
 * The descriptors, one per ABI version in [TP_ABI_LO, TP_ABI_HI], handed to
 * edgert_plugin_negotiate as plugins do. With TP_FUTURE the plugin is built
 * as against a future plugin.h whose descriptor grew at the end: every
 * descriptor's struct_size is the grown size (today's core must accept a
 * larger struct and read only what it knows).
 */
typedef struct tp_descriptor_t {
    edgert_plugin base;
#ifdef TP_FUTURE
    void (*later_fn)(void); /* fields a later ABI appends */
    uint64_t later_bits;
#endif
} tp_descriptor_t;

#ifndef TP_STRUCT_SIZE
#define TP_STRUCT_SIZE sizeof(tp_descriptor_t)
#endif
#define TP_DESC(v)                                                                              \
    {                                                                                           \
        .base = {                                                                               \
            .struct_size = TP_STRUCT_SIZE, .abi_version = (v), .name = TP_NAME,                 \
            .version = "0.0.1", .caps = TP_CAPS, .init = tp_init, .fini = tp_fini,              \
            .self_test = tp_self_test, .describe = tp_describe, .pack = tp_pack,                \
            .packed_free = tp_packed_free, .gemm = tp_gemm,                                     \
            .export_graph = (TP_CAPS & EDGERT_CAP_EXPORT) ? tp_export : NULL,                   \
            .packed_flags = TP_PACKED_FLAGS, .packed_layout = TP_PACKED_LAYOUT,                 \
            .packed_data = TP_PACKED_DATA, .packed_map = TP_PACKED_MAP,                         \
        }                                                                                       \
    }
static const tp_descriptor_t tp_d1 = TP_DESC(1u);
#if TP_ABI_HI >= 2
static const tp_descriptor_t tp_d2 = TP_DESC(2u);
#endif
#if TP_ABI_HI >= 3
static const tp_descriptor_t tp_d3 = TP_DESC(3u);
#endif
#if TP_ABI_HI > 3
#error "tp_common.h has descriptors for ABI 1..3"
#endif

/* Declared for -Wmissing-prototypes when it is not plugin.h's edgert_plugin_entry. */
EDGERT_PLUGIN_EXPORT edgert_status TP_ENTRY_NAME(uint32_t abi_min, uint32_t abi_max,
                                                 const edgert_host *host,
                                                 const edgert_plugin **out, char *err,
                                                 size_t err_len);
EDGERT_PLUGIN_EXPORT edgert_status TP_ENTRY_NAME(uint32_t abi_min, uint32_t abi_max,
                                                 const edgert_host *host,
                                                 const edgert_plugin **out, char *err,
                                                 size_t err_len)
{
    (void)host;
    static const edgert_plugin *const by_abi[TP_ABI_HI] = {
        TP_ABI_LO <= 1u ? &tp_d1.base : NULL,
#if TP_ABI_HI >= 2
        TP_ABI_LO <= 2u ? &tp_d2.base : NULL,
#endif
#if TP_ABI_HI >= 3
        &tp_d3.base,
#endif
    };
    return EDGERT_PLUGIN_NEGOTIATE(abi_min, abi_max, by_abi, TP_NAME, out, err, err_len);
}
