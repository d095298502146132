/*
 * tests/test_decode_tuning.c — the x86 plugins' decode tuning options
 * (plugins/common/decode_tuning.c, plugin_kit.h), compiled in as source:
 * the options' parsing, and prefetch=auto's choice between its two modes
 * fed with simulated call times, so that every case is exact and fast.
 *
 * The simulation: NW weights of different sizes (0.05-3 ms a call, as
 * spark-1.7b's 113 calls a step), each called once per step in order; a
 * call's time is its weight's base time, times the cost of the mode it ran
 * in, times a noise factor uniform in [1 - NOISE, 1 + NOISE] (one pair's
 * ratio on this host ranged 0.6-1.5 in the measurements decode_tuning.c
 * cites; +-20% per call gives pair ratios of 0.67-1.5). Whether the plugins
 * run both modes to the same bits is tested with the plugins
 * (test_avx512_w4a16, test_amx_w4a8).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "plugin_kit.h"

enum { NW = 113 };
#define NOISE 0.2

typedef struct sim {
    pk_pf_auto a;
    pk_pf_seen w[NW];
    double base_ns[NW];
    uint64_t rng;
    unsigned calls, in_slot[2], switches;
} sim;

static double sim_unit(uint64_t *s) /* [0, 1) */
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return (double)(*s >> 11) / 9007199254740992.0;
}

static void sim_init(sim *s, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    pk_pf_auto_init(&s->a, PK_PF_FAR, PK_PF_NONE);
    s->rng = seed;
    for (unsigned i = 0; i < NW; i++)
        s->base_ns[i] = 5e4 + 3e6 * sim_unit(&s->rng);
}

/* `steps` decode steps; cost[slot]: slot 0 = far (with), slot 1 = none */
static void sim_steps(sim *s, unsigned steps, const double cost[2])
{
    for (unsigned t = 0; t < steps; t++)
        for (unsigned i = 0; i < NW; i++) {
            unsigned slot = 9;
            const int mode = pk_pf_auto_pick(&s->a, &s->w[i], &slot);
            assert_true(slot < 2u);
            assert_int_equal(mode, s->a.mode[slot]);
            const double noise = 1.0 - NOISE + 2.0 * NOISE * sim_unit(&s->rng);
            const uint64_t ns = (uint64_t)(s->base_ns[i] * cost[slot] * noise);
            double r = 0.0;
            if (pk_pf_auto_record(&s->a, &s->w[i], slot, ns, &r)) {
                s->switches++;
                assert_true(r > 1.0 && r < 2.0); /* the slower mode's time over the faster's */
            }
            s->calls++;
            s->in_slot[slot]++;
        }
}

static unsigned sim_best(sim *s)
{
    return atomic_load(&s->a.best);
}

static void sim_reset_counts(sim *s)
{
    s->calls = s->in_slot[0] = s->in_slot[1] = s->switches = 0;
}

static void test_options(void **state)
{
    (void)state;
    pk_tuning t = {-1, 0u};
    assert_int_equal(pk_tuning_option("prefetch=auto", 13, &t), 1);
    assert_int_equal(t.prefetch, PK_PF_AUTO);
    assert_int_equal(pk_tuning_option("prefetch=far", 12, &t), -1); /* each once */
    pk_tuning u = {-1, 0u};
    assert_int_equal(pk_tuning_option("prefetch=automatic", 18, &u), 0);
    assert_int_equal(pk_tuning_option("prefetch=auto streams=4", 13, &u), 1); /* one token */
    assert_int_equal(pk_tuning_option("streams=4", 9, &u), 1);
    assert_int_equal(u.prefetch, PK_PF_AUTO);
    assert_int_equal(u.streams, 4u);

    static const char *const said[] = {"far words", "near words", "none words"};
    char out[128];
    pk_pf_said(out, sizeof out, said, PK_PF_NONE, PK_PF_FAR);
    assert_string_equal(out, "none words");
    pk_pf_said(out, sizeof out, said, PK_PF_AUTO, PK_PF_NEAR_TOO);
    assert_string_equal(out, "auto (near words or none, whichever the last calls ran faster)");
}

/* init's settling and gemm's resolution of the two job fields */
static void test_settle_and_resolve(void **state)
{
    (void)state;
    pk_pf_auto a;
    pk_pf_seen w;
    int near, beside;
    unsigned slot = 7;

    pk_pf_settle(-1, PK_PF_FAR, PK_PF_NEAR_TOO, PK_PF_NONE, 4u, &near, &beside, &a);
    assert_int_equal(near, PK_PF_NEAR_TOO); /* not given: the plugin's defaults */
    assert_int_equal(beside, PK_PF_NONE);
    memset(&w, 0, sizeof w);
    int n2 = near, b2 = beside;
    assert_int_equal(pk_pf_auto_resolve(&a, &w, 1u, &n2, &b2, &slot), 0);
    assert_int_equal(n2, PK_PF_NEAR_TOO);
    assert_int_equal(b2, PK_PF_NONE);
    assert_int_equal(slot, 7u);
    assert_int_equal(atomic_load(&w.calls), 0u); /* nothing counted */

    pk_pf_settle(PK_PF_NONE, PK_PF_FAR, PK_PF_FAR, PK_PF_FAR, 1u, &near, &beside, &a);
    assert_int_equal(near, PK_PF_NONE); /* given: both fields */
    assert_int_equal(beside, PK_PF_NONE);

    /* auto beside several streams: the streams' field decides m = 1 */
    pk_pf_settle(PK_PF_AUTO, PK_PF_FAR, PK_PF_FAR, PK_PF_NONE, 4u, &near, &beside, &a);
    assert_int_equal(near, PK_PF_FAR);
    assert_int_equal(beside, PK_PF_AUTO);
    n2 = near, b2 = beside;
    assert_int_equal(pk_pf_auto_resolve(&a, &w, 1u, &n2, &b2, &slot), 1);
    assert_int_equal(slot, 0u); /* a weight's first call: the mode in use */
    assert_int_equal(b2, PK_PF_FAR);
    assert_int_equal(n2, PK_PF_FAR);
    n2 = near, b2 = beside;
    assert_int_equal(pk_pf_auto_resolve(&a, &w, 1u, &n2, &b2, &slot), 1);
    assert_int_equal(slot, 1u); /* its second, while warming up: the other */
    assert_int_equal(b2, PK_PF_NONE);
    n2 = near, b2 = beside;
    assert_int_equal(pk_pf_auto_resolve(&a, &w, 5u, &n2, &b2, &slot), 0); /* m > 1: untimed */
    assert_int_equal(b2, PK_PF_FAR);                                      /* the mode in use */
    assert_int_equal(atomic_load(&w.calls), 2u);

    /* one stream: the one-stream field decides */
    pk_pf_settle(PK_PF_AUTO, PK_PF_NEAR_TOO, PK_PF_FAR, PK_PF_NONE, 1u, &near, &beside, &a);
    assert_int_equal(near, PK_PF_AUTO);
    assert_int_equal(beside, PK_PF_NEAR_TOO);
    assert_int_equal(a.mode[0], PK_PF_NEAR_TOO);
    assert_int_equal(a.mode[1], PK_PF_NONE);
}

/* A pair is a weight's call against its previous call in the other mode:
 * none without one, none against the same mode; times of 0 and of 2^64 - 1
 * ns are taken without overflow. */
static void test_pairs(void **state)
{
    (void)state;
    pk_pf_auto a;
    pk_pf_seen w, v;
    memset(&w, 0, sizeof w);
    memset(&v, 0, sizeof v);
    pk_pf_auto_init(&a, PK_PF_FAR, PK_PF_NONE);
    assert_int_equal(pk_pf_auto_record(&a, &w, 0u, 1000u, NULL), 0);
    assert_int_equal(pk_pf_auto_record(&a, &w, 0u, 1000u, NULL), 0);
    assert_int_equal(atomic_load(&a.pairs), 0u);
    assert_int_equal(pk_pf_auto_record(&a, &v, 1u, 10u, NULL), 0); /* another weight */
    assert_int_equal(atomic_load(&a.pairs), 0u);
    assert_int_equal(pk_pf_auto_record(&a, &w, 1u, 900u, NULL), 0);
    assert_int_equal(atomic_load(&a.pairs), 1u);
    assert_true(a.diff < -0.1 && a.diff > -0.11); /* log 0.9 = -0.105 */
    assert_int_equal(pk_pf_auto_record(&a, &w, 0u, 0u, NULL), 0);
    assert_int_equal(pk_pf_auto_record(&a, &w, 1u, UINT64_MAX, NULL), 0);
    assert_int_equal(atomic_load(&a.pairs), 3u);
    assert_true(a.diff > -0.31 && a.diff < 0.31); /* each clamped to +-0.3 */
}

/* No prefetch 8% faster (as with the host's memory busy): auto takes it
 * within a few steps and then runs 1 call in 16 in the other mode. */
static void test_takes_the_faster_mode(void **state)
{
    (void)state;
    static sim s;
    for (uint64_t seed = 1; seed <= 8; seed++) {
        sim_init(&s, seed);
        static const double cost[2] = {1.0, 0.92};
        sim_steps(&s, 5, cost);
        assert_int_equal(sim_best(&s), 1u);
        sim_reset_counts(&s);
        sim_steps(&s, 200, cost);
        assert_int_equal(sim_best(&s), 1u);
        assert_int_equal(s.switches, 0u);
        /* exactly the weights' calls in the other mode: 1 in 16, +- one per weight */
        assert_true(s.in_slot[0] * 16u >= s.calls - 16u * NW &&
                    s.in_slot[0] * 16u <= s.calls + 16u * NW);
    }
}

/* The window changes (the far prefetch becomes 10% faster): auto follows
 * within a few steps, and stays. */
static void test_follows_a_change(void **state)
{
    (void)state;
    static sim s;
    for (uint64_t seed = 11; seed <= 18; seed++) {
        sim_init(&s, seed);
        static const double busy[2] = {1.0, 0.92}, quiet[2] = {0.9, 1.0};
        sim_steps(&s, 20, busy);
        assert_int_equal(sim_best(&s), 1u);
        sim_steps(&s, 8, quiet);
        assert_int_equal(sim_best(&s), 0u);
        sim_reset_counts(&s);
        sim_steps(&s, 200, quiet);
        assert_int_equal(s.switches, 0u);
    }
}

/* Modes 3% apart, under the same noise: the slower is never taken for long
 * (the margin and the 32-pair mean keep noise from flipping the choice). */
static void test_noise_does_not_flip(void **state)
{
    (void)state;
    static sim s;
    for (uint64_t seed = 21; seed <= 28; seed++) {
        sim_init(&s, seed);
        static const double cost[2] = {1.0, 1.03};
        sim_steps(&s, 300, cost);
        assert_int_equal(sim_best(&s), 0u);
        assert_true(s.in_slot[0] >= s.calls * 9u / 10u);
    }
}

/* Stalls (a preemption: a call 1000x its time) weigh as 35% pairs at most:
 * two of them, each in the mode in use right after a call in the other,
 * do not flip the choice between modes 8% apart. */
static void test_stalls(void **state)
{
    (void)state;
    static sim s;
    sim_init(&s, 31);
    static const double cost[2] = {0.92, 1.0};
    sim_steps(&s, 20, cost);
    assert_int_equal(sim_best(&s), 0u);
    for (unsigned i = 0; i < 2; i++) {
        unsigned slot = 0, calls = 0;
        for (int stalled = 0; !stalled; calls++) {
            assert_true(calls < 2u * PK_PF_AUTO_EVERY);
            const int after_other = (unsigned)(atomic_load(&s.w[i].last) & 1u) == 1u;
            (void)pk_pf_auto_pick(&s.a, &s.w[i], &slot);
            stalled = after_other && slot == 0u;
            const double t = s.base_ns[i] * cost[slot] * (stalled ? 1000.0 : 1.0);
            (void)pk_pf_auto_record(&s.a, &s.w[i], slot, (uint64_t)t, NULL);
        }
    }
    assert_int_equal(sim_best(&s), 0u);
}

/* Calls on one instance from several threads: well defined (run under the
 * sanitizers), and the choice still comes out right. */
typedef struct racer {
    sim *s;
    unsigned first;
} racer;

static void *race(void *arg)
{
    racer *r = arg;
    static const double cost[2] = {1.0, 0.85};
    for (unsigned t = 0; t < 100; t++)
        for (unsigned i = r->first; i < NW; i += 2u) {
            unsigned slot;
            (void)pk_pf_auto_pick(&r->s->a, &r->s->w[i], &slot);
            (void)pk_pf_auto_record(&r->s->a, &r->s->w[i], slot,
                                    (uint64_t)(r->s->base_ns[i] * cost[slot]), NULL);
        }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    static sim s;
    sim_init(&s, 41);
    pthread_t th[2];
    racer r[2] = {{&s, 0u}, {&s, 1u}};
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, race, &r[i]), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    assert_int_equal(sim_best(&s), 1u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_settle_and_resolve),
        cmocka_unit_test(test_pairs),
        cmocka_unit_test(test_takes_the_faster_mode),
        cmocka_unit_test(test_follows_a_change),
        cmocka_unit_test(test_noise_does_not_flip),
        cmocka_unit_test(test_stalls),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
