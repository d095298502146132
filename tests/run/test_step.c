/*
 * tests/run/test_step.c — edgert_step: a decode step's GEMMs run in
 * order with the caller's callbacks between them, on every eligible
 * in-process backend of this machine (ref-w4a16 everywhere).
 *
 * - A two-layer MLP with a residual (up, SiLU in a callback, down, the
 *   residual added in a callback, again), M = 1 and M = 17: the outputs are
 *   those of the same edgert_gemm calls made one by one, bit for bit, and
 *   every callback ran once, in order, after its op.
 * - A callback's error ends the step with that status, names the op, and
 *   the later ops never run (their outputs keep a sentinel); so does a
 *   callback that spoils the next op's args, which are checked again as it
 *   starts.
 * - Every op is checked before the first runs: a bad op anywhere (m = 0, a
 *   NULL x, weights of another instance, a struct_size below version 1 or
 *   unlike op 0's, or not a multiple of the struct's alignment, strides
 *   whose last row's byte offset wraps, strides below the weights' k or n,
 *   a y that overlaps x) is
 *   EDGERT_E_USAGE naming it and the field, with every output untouched.
 * - count 0 does nothing, with or without an array.
 * - x and y may share a matrix as blocks of columns; y overlapping x is
 *   refused.
 * The read-ahead of the next weights runs inside these steps (the shapes
 * split over the 2-thread pool); .ci/tsan runs this program under
 * ThreadSanitizer and the ASan build under ASan.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "edgert/edgert.h"
#include "test_util.h"

#define D 256u   /* model width: K of up, N of down */
#define F 384u   /* hidden width: N of up, K of down */
#define LAYERS 2u
#define NOPS (2u * LAYERS)
#define MAXM 17u

typedef struct net {
    edgert_backend *be;
    edgert_packed *w[NOPS]; /* up0, down0, up1, down1 */
    edgert_qtensor q[NOPS];
    float h[MAXM * D];      /* the residual stream: x of every up */
    float a[MAXM * F];      /* SiLU(up): x of every down */
    float y[NOPS][MAXM * F];
    unsigned m;
    size_t calls[NOPS + 1]; /* the callbacks' indices, in the order they ran */
    size_t ncalls;
    size_t fail_at;         /* the callback that returns an error (NOPS: none) */
    edgert_gemm_args *spoil; /* set: the callback after op 1 writes m = 0 here */
} net;

static float unit(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static void start(net *n, unsigned m)
{
    uint64_t s = 7;
    n->m = m;
    n->ncalls = 0;
    for (size_t i = 0; i < (size_t)m * D; i++)
        n->h[i] = unit(&s);
    for (size_t o = 0; o < NOPS; o++)
        for (size_t i = 0; i < MAXM * F; i++)
            n->y[o][i] = NAN; /* the sentinel: an op that did not run */
}

/* The caller's work between GEMMs: after an up, SiLU into `a`; after a
 * down, the residual added into `h`. */
static void between(net *n, size_t op)
{
    const unsigned m = n->m;
    if (op % 2u == 0u) {
        for (size_t i = 0; i < (size_t)m * F; i++) {
            float v = n->y[op][i];
            n->a[i] = v / (1.0f + expf(-v));
        }
    } else {
        for (size_t i = 0; i < (size_t)m * D; i++)
            n->h[i] += n->y[op][i];
    }
}

static edgert_status after(void *user, size_t index)
{
    net *n = user;
    n->calls[n->ncalls++] = index;
    if (index == n->fail_at)
        return EDGERT_E_UNSUPPORTED;
    if (index == 1u && n->spoil)
        n->spoil->m = 0;
    between(n, index);
    return EDGERT_OK;
}

static void args_of(net *n, edgert_gemm_args *a)
{
    for (size_t o = 0; o < NOPS; o++)
        a[o] = (edgert_gemm_args){sizeof a[o], n->m, o % 2u ? n->a : n->h, o % 2u ? F : D,
                                  n->y[o], o % 2u ? D : F};
}

static void ops_of(net *n, const edgert_gemm_args *a, edgert_step_op *ops)
{
    for (size_t o = 0; o < NOPS; o++)
        ops[o] = (edgert_step_op){.struct_size = sizeof ops[o], .weights = n->w[o],
                                  .args = &a[o], .after = after, .user = n};
}

static int net_open(net *n, edgert_ctx *ctx, const edgert_candidate *c)
{
    char err[512] = "";
    memset(n, 0, sizeof *n);
    n->fail_at = NOPS;
    if (edgert_backend_open(ctx, c->name, NULL, &n->be, err, sizeof err) != EDGERT_OK)
        fail_msg("%s: %s", c->name, err);
    uint64_t s = 11;
    float *w = malloc(sizeof(float) * D * F);
    assert_non_null(w);
    for (size_t o = 0; o < NOPS; o++) {
        uint32_t rows = o % 2u ? D : F, cols = o % 2u ? F : D;
        for (size_t i = 0; i < (size_t)rows * cols; i++)
            w[i] = 0.08f * unit(&s);
        assert_int_equal(edgert_quantize_rtn(w, rows, cols, 128, c->layout.symmetric, &n->q[o]),
                         EDGERT_OK);
        if (edgert_pack(n->be, &n->q[o].view, &n->w[o], err, sizeof err) != EDGERT_OK)
            fail_msg("%s: pack: %s", c->name, err);
    }
    free(w);
    return 0;
}

static void net_close(net *n)
{
    for (size_t o = 0; o < NOPS; o++) {
        edgert_packed_free(n->w[o]);
        edgert_qtensor_free(&n->q[o]);
    }
    edgert_backend_close(n->be);
}

static edgert_ctx *open_ctx(void)
{
    char err[512] = "";
    edgert_ctx *ctx = tu_open(EDGERT_TEST_BACKEND_DIR, 2, err, sizeof err);
    if (!ctx)
        fail_msg("edgert_open: %s", err);
    return ctx;
}

static int runs_gemm(const edgert_candidate *c)
{
    return c->eligible && c->loaded && c->runs_in_process;
}

/* The step against the same calls one by one: the same bits. */
static void test_step_equals_calls(void **state)
{
    (void)state;
    edgert_ctx *ctx = open_ctx();
    static net n, ref;
    unsigned backends = 0;
    for (size_t ci = 0; ci < edgert_candidate_count(ctx); ci++) {
        const edgert_candidate *c = edgert_candidate_at(ctx, ci);
        if (!runs_gemm(c))
            continue;
        backends++;
        net_open(&n, ctx, c);
        static const unsigned ms[] = {1u, MAXM};
        for (size_t mi = 0; mi < 2; mi++) {
            char err[1024] = "";
            edgert_gemm_args a[NOPS];
            edgert_step_op ops[NOPS];
            /* one by one */
            start(&n, ms[mi]);
            args_of(&n, a);
            for (size_t o = 0; o < NOPS; o++) {
                if (edgert_gemm(n.be, n.w[o], &a[o], err, sizeof err) != EDGERT_OK)
                    fail_msg("%s: gemm %zu: %s", c->name, o, err);
                between(&n, o);
            }
            memcpy(&ref, &n, sizeof n);
            /* as one step */
            start(&n, ms[mi]);
            args_of(&n, a);
            ops_of(&n, a, ops);
            if (edgert_step(n.be, ops, NOPS, err, sizeof err) != EDGERT_OK)
                fail_msg("%s: step: %s", c->name, err);
            assert_int_equal(n.ncalls, NOPS);
            for (size_t o = 0; o < NOPS; o++)
                assert_int_equal(n.calls[o], o);
            if (memcmp(n.y, ref.y, sizeof n.y) != 0 || memcmp(n.h, ref.h, sizeof n.h) != 0)
                fail_msg("%s m=%u: the step's outputs differ from the same GEMM calls", c->name,
                         ms[mi]);
        }
        print_message("%s (%s): step == calls, m = 1 and %u\n", c->name,
                      edgert_backend_describe(n.be), MAXM);
        net_close(&n);
    }
    assert_true(backends >= 1); /* ref-w4a16 at least */
    edgert_close(ctx);
}

/* A callback's error ends the step there. */
static void test_callback_error(void **state)
{
    (void)state;
    edgert_ctx *ctx = open_ctx();
    static net n;
    net_open(&n, ctx, edgert_candidate_find(ctx, "ref-w4a16"));
    edgert_gemm_args a[NOPS];
    edgert_step_op ops[NOPS];
    start(&n, 1);
    args_of(&n, a);
    ops_of(&n, a, ops);
    n.fail_at = 1;
    char err[1024] = "";
    assert_int_equal(edgert_step(n.be, ops, NOPS, err, sizeof err), EDGERT_E_UNSUPPORTED);
    assert_non_null(strstr(err, "after op 1"));
    assert_int_equal(n.ncalls, 2);
    assert_false(isnan(n.y[1][0]));
    assert_true(isnan(n.y[2][0]) && isnan(n.y[3][0])); /* never ran */

    /* A callback that spoils the next op's args (they are read as it
     * starts): checked again then, EDGERT_E_USAGE naming it, and it never
     * reaches the plugin. */
    start(&n, 1);
    args_of(&n, a);
    ops_of(&n, a, ops);
    n.fail_at = NOPS;
    n.spoil = &a[2];
    err[0] = '\0';
    assert_int_equal(edgert_step(n.be, ops, NOPS, err, sizeof err), EDGERT_E_USAGE);
    if (!strstr(err, "op 2") || !strstr(err, "m is 0"))
        fail_msg("a spoiled op 2: %s", err);
    assert_int_equal(n.ncalls, 2);
    assert_true(isnan(n.y[2][0]) && isnan(n.y[3][0]));
    n.spoil = NULL;
    net_close(&n);
    edgert_close(ctx);
}

/* Every op checked before the first runs. */
static void test_bad_ops(void **state)
{
    (void)state;
    edgert_ctx *ctx = open_ctx();
    static net n, other;
    const edgert_candidate *ref = edgert_candidate_find(ctx, "ref-w4a16");
    net_open(&n, ctx, ref);
    net_open(&other, ctx, ref); /* another instance of the same backend */
    char err[1024];
    for (int bad = 0; bad < 12; bad++) {
        edgert_gemm_args a[NOPS];
        edgert_step_op ops[NOPS];
        start(&n, 1);
        args_of(&n, a);
        ops_of(&n, a, ops);
        const char *want = "op 3", *field = "";
        switch (bad) {
        case 0: a[3].m = 0; field = "m is 0"; break;
        case 1: a[3].x = NULL; field = "x is NULL"; break;
        case 2: ops[3].weights = other.w[3]; break;
        case 3: ops[3].struct_size = 8; break;
        case 4: ops[0].struct_size = 8; want = "op 0"; break;
        case 5: /* row 1 at 2^62 floats: the byte offset wraps (an integrator's walkthrough) */
            a[3].m = 2; a[3].ldx = (size_t)1 << 62; field = "ldx + k floats overflow"; break;
        case 6: a[3].m = 3; a[3].ldy = SIZE_MAX / 2u; field = "ldy + n floats overflow"; break;
        case 7: /* a stride no array of the struct has: op 1 would be misaligned */
            for (size_t o = 0; o < NOPS; o++)
                ops[o].struct_size = sizeof ops[o] + 1u;
            want = "the array's stride"; break;
        /* the weights' shape, known to the core (the plugin would refuse
         * these only as op 3 starts, after ops 0-2 had run) */
        case 8: a[3].ldx = F - 1u; field = "ldx is less than k"; break;
        case 9: a[3].ldy = D - 1u; field = "ldy is less than n"; break;
        case 10: /* y's first row in x's second (m = 2) */
            a[3].m = 2; a[3].y = n.a + F + 5u; field = "overlaps"; break;
        default: ops[3].args = NULL; field = "args is NULL"; break;
        }
        err[0] = '\0';
        assert_int_equal(edgert_step(n.be, ops, NOPS, err, sizeof err), EDGERT_E_USAGE);
        if (!strstr(err, want) || !strstr(err, field))
            fail_msg("bad op %d: the error does not name %s and '%s': %s", bad, want, field,
                     err);
        assert_int_equal(n.ncalls, 0);
        for (size_t o = 0; o < NOPS; o++)
            assert_true(isnan(n.y[o][0])); /* nothing ran */
    }
    /* count 0: nothing to do, with or without an array */
    assert_int_equal(edgert_step(n.be, NULL, 0, err, sizeof err), EDGERT_OK);
    assert_int_equal(edgert_step(NULL, NULL, 0, err, sizeof err), EDGERT_E_USAGE);
    assert_int_equal(edgert_step(n.be, NULL, 2, err, sizeof err), EDGERT_E_USAGE);
    net_close(&other);
    net_close(&n);
    edgert_close(ctx);
}

/* x and y as column blocks of one matrix (rows D + F floats): their spans
 * interleave but no element is shared, so the GEMM runs, bit for bit as
 * with separate buffers; y one float to the left would overlap x's last
 * column, and is refused. */
static void test_rows_side_by_side(void **state)
{
    (void)state;
    edgert_ctx *ctx = open_ctx();
    static net n;
    static float both[3 * (D + F)], ysep[3 * F];
    net_open(&n, ctx, edgert_candidate_find(ctx, "ref-w4a16"));
    start(&n, 3);
    for (size_t r = 0; r < 3u; r++)
        memcpy(both + r * (D + F), n.h + r * D, D * sizeof(float));
    char err[1024] = "";
    edgert_gemm_args sep = {sizeof sep, 3, n.h, D, ysep, F};
    edgert_gemm_args side = {sizeof side, 3, both, D + F, both + D, D + F};
    assert_int_equal(edgert_gemm(n.be, n.w[0], &sep, err, sizeof err), EDGERT_OK);
    if (edgert_gemm(n.be, n.w[0], &side, err, sizeof err) != EDGERT_OK)
        fail_msg("x and y side by side refused: %s", err);
    for (size_t r = 0; r < 3u; r++)
        assert_memory_equal(both + r * (D + F) + D, ysep + r * F, F * sizeof(float));
    side.y = both + D - 1u;
    assert_int_equal(edgert_gemm(n.be, n.w[0], &side, err, sizeof err), EDGERT_E_USAGE);
    assert_non_null(strstr(err, "overlaps"));
    net_close(&n);
    edgert_close(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_equals_calls),
        cmocka_unit_test(test_callback_error),
        cmocka_unit_test(test_bad_ops),
        cmocka_unit_test(test_rows_side_by_side),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
