/*
 * tests/tools/test_cli_bench.c — `edgert bench` as a user meets it: its JSON
 * contract on a small workload with figures that are computed, not
 * assumed; its AMX peaks without an AMX backend; --versus.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <sys/wait.h>

#include "common/internal.h"
#include "test_util.h"
#include "test_cli_util.h"
#include "formats/yamldoc.h"

#define DEVICES EDGERT_TEST_FIXTURES "/devices"
#define TINY EDGERT_TEST_FIXTURES "/workloads/tiny.yaml"
/* The read ceiling over 64 MiB, not 1 GiB: these tests check how its
 * figures relate, not what they are, and the 1 GiB reads were 25 of the 29 s
 * a bench run took under ASan (more under qemu). */
#define READ " --read-mib 64"
/* A shipped backend this build's arch never runs (its arch gate refuses it). */
#if defined(__aarch64__)
#define OTHER_ARCH_BACKEND "avx512-w4a16"
#else
#define OTHER_ARCH_BACKEND "neon-w4a16"
#endif

/* bench's compute peaks run AMX tile loops wherever the probe reports AMX.
 * Linux kills a process that runs a tile instruction before it asked for
 * tile data (SIGILL), and the AMX backends ask in their init, so bench must
 * ask for itself when none of them is loaded: here only ref-w4a16 is. On an
 * AMX machine the AMX peaks are then measured; elsewhere they are absent. */
static void test_bench_peaks_without_amx_backend(void **state)
{
    (void)state;
    char *out, *probe;
    assert_int_equal(run("probe --json", &probe), 0);
    const int amx = strstr(probe, "\"amx_int8\"") != NULL &&
                    strstr(strstr(probe, "cpu_flags_os_disabled"), "\"amx_int8\"") == NULL;
    free(probe);
    assert_int_equal(run("bench" READ " --manifests " EDGERT_TEST_BACKEND_DIR "/ref-w4a16.yaml "
                         "--backend ref-w4a16 --json --repeat 1 --m 8 --phase prefill "
                         "--workload " EDGERT_TEST_FIXTURES "/workloads/tiny.yaml",
                         &out),
                     0);
    er_yaml y;
    char *dir;
    yaml_node_t *root = parse(out, &y, &dir);
    yaml_node_t *peaks = er_yaml_get(&y, root, "compute_peaks");
    assert_non_null(peaks);
    if (amx) {
        assert_true(num(&y, peaks, "amx_int8_gops") > 0);
        print_message("AMX: real tiles (bench's AMX peaks measured with no AMX backend loaded)\n");
    } else {
        assert_null(er_yaml_get(&y, peaks, "amx_int8_gops"));
        print_message("AMX: not on this CPU, so no AMX peaks (bench ran with no AMX backend)\n");
    }
    er_yaml_free(&y);
    tu_rmrf(dir);
    free(out);
}

/* The in-cache rate takes the step's GEMMs in its order, each that still
 * fits, and skips the others: a 4096 x 4096 shape (8.9 MB packed, over the
 * 8 MiB cap wherever the test runs) between two small ones is skipped, the
 * small ones of both layers taken, and the shapes named. */
static void test_bench_in_cache_skips(void **state)
{
    (void)state;
    TU_SKIP_EMULATED("11 s");
    char *dir = tu_tmpdir(), *out = NULL, args[1024];
    assert_non_null(dir);
    char *wl = tu_write(dir, "wl.yaml",
                        "name: skip\nshapes:\n"
                        "  - {name: a, k: 256, n: 384, count: 2}\n"
                        "  - {name: big, k: 4096, n: 4096, count: 1}\n"
                        "  - {name: c, k: 384, n: 256, count: 2}\n");
    snprintf(args, sizeof args,
             "bench" READ " --manifests %s/ref-w4a16.yaml --backend ref-w4a16 --json "
             "--repeat 1 --phase decode --workload %s",
             EDGERT_TEST_BACKEND_DIR, wl);
    assert_int_equal(run(args, &out), 0);
    er_yaml y;
    char *jdir;
    yaml_node_t *root = parse(out, &y, &jdir);
    yaml_node_t *ic = er_yaml_get(&y, er_yaml_get(&y, root, "decode"), "in_cache");
    assert_non_null(ic);
    assert_int_equal((int)num(&y, ic, "calls"), 4);
    assert_string_equal(sval(&y, ic, "shapes"), "a, c");
    er_yaml_free(&y);
    tu_rmrf(jdir);
    free(out);
    free(wl);
    tu_rmrf(dir);
}

/* The step read: ref-w4a16 exposes its packed bytes, so it is measured.
 * The in-cache rate: the tiny step's 5 GEMMs fit in 8 MiB, so all of them,
 * all its bytes (wb), and decode's fraction (at gbs) of their rate. */
static void check_reads(er_yaml *y, yaml_node_t *dec, double wb, double gbs)
{
    yaml_node_t *sr = er_yaml_get(y, dec, "step_read");
    assert_non_null(sr);
    double srg = num(y, sr, "gbs");
    assert_true(num(y, sr, "min") > 0 && num(y, sr, "min") <= srg && srg <= num(y, sr, "max"));
    assert_true(fabs(num(y, dec, "fraction_of_step_read") - gbs / srg) <= 1e-3 * gbs / srg);
    yaml_node_t *ic = er_yaml_get(y, dec, "in_cache");
    assert_non_null(ic);
    double icg = num(y, ic, "gbs");
    assert_true(num(y, ic, "min") > 0 && num(y, ic, "min") <= icg && icg <= num(y, ic, "max"));
    assert_int_equal((int)num(y, ic, "calls"), 2 + 2 + 1);
    assert_true(num(y, ic, "bytes") == wb);
    assert_true(fabs(num(y, dec, "fraction_of_in_cache") - gbs / icg) <= 1e-3 * gbs / icg);
}

/* The interleaved reads name their streams per thread, 4 or 8, and their
 * medians lie within their spreads: spread over each thread's range (st)
 * and 4 MiB at a time (stc, which names the chunk). */
static void check_streams(er_yaml *y, yaml_node_t *bwo, double st, double stc)
{
    int streams = (int)num(y, bwo, "streams");
    assert_true(streams == 4 || streams == 8);
    assert_true(num(y, bwo, "streams_min") <= st && st <= num(y, bwo, "streams_max"));
    streams = (int)num(y, bwo, "streams_chunked");
    assert_true(streams == 4 || streams == 8);
    assert_true(num(y, bwo, "streams_chunked_min") <= stc &&
                stc <= num(y, bwo, "streams_chunked_max"));
    assert_int_equal((long long)num(y, bwo, "streams_chunk_bytes"), 4 << 20);
    /* all of them over --read-mib's buffer (READ) */
    assert_int_equal((long long)num(y, bwo, "bytes"), 64ll << 20);
}

/* edgert bench on a small workload: its JSON contract and figures
 * that are computed, not assumed. */
static void test_bench_json(void **state)
{
    (void)state;
    char *out;
    assert_int_equal(run("bench" READ " --backend ref-w4a16 --json --repeat 2 --m 8 --threads 2 "
                                      "--workload " EDGERT_TEST_FIXTURES "/workloads/tiny.yaml",
                         &out),
                     0);
    er_yaml y;
    char *dir;
    yaml_node_t *root = parse(out, &y, &dir);
    assert_string_equal(sval(&y, root, "backend"), "ref-w4a16");
    assert_string_equal(sval(&y, root, "workload"), "tiny");
    assert_int_equal((int)num(&y, root, "threads"), 2);
    double bw = num(&y, root, "bandwidth_gbs"), plain = num(&y, root, "bandwidth_plain_gbs"),
           pf = num(&y, root, "bandwidth_prefetch_gbs"),
           far = num(&y, root, "bandwidth_prefetch_far_gbs"),
           l1 = num(&y, root, "bandwidth_prefetch_l1_gbs"),
           st = num(&y, root, "bandwidth_streams_gbs"),
           stc = num(&y, root, "bandwidth_streams_chunked_gbs");
    assert_true(plain > 0 && pf > 0 && far > 0 && l1 > 0 && st > 0 && stc > 0);
    /* the ceiling is the best of the six reads */
    assert_true(bw == fmax(fmax(fmax(plain, pf), fmax(far, l1)), fmax(st, stc)));
    assert_non_null(er_yaml_get(&y, root, "compute_peaks"));
    yaml_node_t *dec = er_yaml_get(&y, root, "decode");
    yaml_node_t *ms = er_yaml_get(&y, dec, "ms_per_step");
    double med = num(&y, ms, "median"), mn = num(&y, ms, "min"), mx = num(&y, ms, "max");
    assert_true(mn > 0 && mn <= med && med <= mx);
    double wb = num(&y, dec, "weight_bytes"), exp_wb = num(&y, dec, "expected_weight_bytes");
    assert_true(fabs(wb - exp_wb) <= 0.02 * exp_wb);
    double gbs = num(&y, dec, "weight_gbs"), frac = num(&y, dec, "fraction_of_bandwidth");
    assert_true(fabs(gbs - wb / (med / 1e3) / 1e9) <= 1e-3 * gbs);
    assert_true(fabs(frac - gbs / bw) <= 1e-3 * frac);
    assert_true(fabs(num(&y, dec, "tokens_per_s") - 1e3 / med) <= 1e-3 * (1e3 / med));
    /* the same reads in calls of the step's GEMM sizes: one call per matrix */
    yaml_node_t *bwo = er_yaml_get(&y, root, "bandwidth");
    double cbw = num(&y, root, "bandwidth_call_sized_gbs");
    double cplain = num(&y, bwo, "call_sized_plain_gbs"),
           cpf = num(&y, bwo, "call_sized_prefetch_gbs"),
           cfar = num(&y, bwo, "call_sized_prefetch_far_gbs"),
           cl1 = num(&y, bwo, "call_sized_prefetch_l1_gbs"),
           cst = num(&y, bwo, "call_sized_streams_gbs");
    assert_true(cplain > 0 && cpf > 0 && cfar > 0 && cl1 > 0 && cst > 0);
    assert_true(cbw == fmax(fmax(fmax(cplain, cpf), fmax(cfar, cl1)), cst));
    assert_true(num(&y, bwo, "prefetch_l1_min") <= l1 && l1 <= num(&y, bwo, "prefetch_l1_max"));
    assert_int_equal((int)num(&y, bwo, "call_sized_streams"), 4);
    check_streams(&y, bwo, st, stc);
    assert_int_equal((int)num(&y, bwo, "calls_per_step"), 2 + 2 + 1);
    assert_true(fabs(num(&y, dec, "fraction_of_call_sized_bandwidth") - gbs / cbw) <=
                1e-3 * gbs / cbw);
    /* ... with the loop that read best in calls, named */
    static const char *const loops[] = {"plain", "prefetched 4 KiB + 1 KiB ahead",
                                        "prefetched 8 KiB ahead", "prefetched 6 KiB ahead into L1",
                                        "4 streams"};
    const char *loop = sval(&y, dec, "step_read_loop");
    size_t li = 0;
    while (li < sizeof loops / sizeof loops[0] && strcmp(loop, loops[li]) != 0)
        li++;
    if (li == sizeof loops / sizeof loops[0])
        fail_msg("step_read_loop '%s' is none of bench's call-sized reads", loop);
    check_reads(&y, dec, wb, gbs);
    /* the window: the ceiling before and after the steps, the fraction of
     * each, flagged unstable exactly when they differ by more than 15% */
    yaml_node_t *win = er_yaml_get(&y, dec, "window");
    assert_non_null(win);
    double before = num(&y, win, "ceiling_before_gbs"), after = num(&y, win, "ceiling_after_gbs");
    assert_true(before == bw && after > 0 && after == num(&y, root, "bandwidth_after_gbs"));
    assert_true(fabs(num(&y, win, "fraction_after") - gbs / after) <= 1e-3 * gbs / after);
    double ratio = (before > after ? before : after) / (before > after ? after : before);
    assert_string_equal(sval(&y, win, "unstable"), ratio > 1.15 ? "true" : "false");
    yaml_node_t *pre = er_yaml_get(&y, root, "prefill");
    assert_int_equal((int)num(&y, pre, "m"), 8);
    assert_true(num(&y, pre, "gflops") > 0);
    assert_true(num(&y, pre, "fraction_of_compute_peak") > 0);
    /* the family's peak before and after the prefill: the higher is the one
     * the fraction is of, and the two more than 15% apart flag the run */
    double pb = num(&y, pre, "compute_peak_before"), pa = num(&y, pre, "compute_peak_after");
    yaml_node_t *pk = er_yaml_get(&y, root, "compute_peaks");
    double held = num(&y, pk, sval(&y, pre, "compute_family"));
    assert_true(pb > 0 && pa > 0 && held == (pb > pa ? pb : pa));
    assert_true(fabs(num(&y, pre, "fraction_of_compute_peak") - num(&y, pre, "gflops") / held) <=
                1e-3 * num(&y, pre, "fraction_of_compute_peak"));
    ratio = (pb > pa ? pb : pa) / (pb > pa ? pa : pb);
    assert_string_equal(sval(&y, pre, "unstable"), ratio > 1.15 ? "true" : "false");
    yaml_node_t *pack = er_yaml_get(&y, root, "pack");
    assert_true(num(&y, pack, "peak_rss_mb") >= num(&y, pack, "settled_rss_mb") - 1e-6);
    yaml_node_t *shapes = er_yaml_get(&y, root, "shapes");
    assert_int_equal(shapes->data.sequence.items.top - shapes->data.sequence.items.start, 3);
    er_yaml_free(&y);
    tu_rmrf(dir);
    free(out);
    /* bad workload file: exit 4; plan mode: usage error */
    assert_int_equal(run("bench --workload " EDGERT_TEST_FIXTURES "/workloads/bad-k.yaml", NULL),
                     4);
    assert_int_equal(run("bench --device " DEVICES "/x86-avx2.yaml", NULL), 2);
    assert_int_equal(run("bench --backend " OTHER_ARCH_BACKEND, NULL), 3);
    assert_int_equal(run("bench --phase sideways", NULL), 2);
    /* --read-mib: at least 16, and bench's own */
    assert_int_equal(run("bench --read-mib 15 --workload " TINY, NULL), 2);
    assert_int_equal(run("bench --read-mib 1x --workload " TINY, NULL), 2);
    assert_int_equal(run("verify --read-mib 64", NULL), 2);
}

/* --versus: the other backend's steps timed in pairs with --backend's; the
 * pairs' ratios bounded by the two step series they come from; decode only;
 * what cannot work refused with the usage or eligibility exit code. */
static void test_bench_versus(void **state)
{
    (void)state;
    TU_SKIP_EMULATED("14 s");
    char *out;
    /* no --repeat: the default pairs */
    assert_int_equal(run("bench" READ
                         " --backend ref-w4a16 --versus ref-w4a16 --versus-options '' --json "
                         "--threads 2 --workload " TINY,
                         &out),
                     0);
    er_yaml y;
    char *dir;
    yaml_node_t *root = parse(out, &y, &dir);
    yaml_node_t *dec = er_yaml_get(&y, root, "decode"), *vs = er_yaml_get(&y, root, "versus");
    assert_non_null(dec);
    assert_non_null(vs);
    assert_string_equal(sval(&y, vs, "backend"), "ref-w4a16");
    assert_string_equal(sval(&y, vs, "options"), "");
    assert_int_equal((int)num(&y, vs, "pairs"), 16);
    assert_int_equal((int)num(&y, dec, "steps"), 16);
    /* the same backend packs the same bytes */
    assert_true(num(&y, vs, "weight_bytes") == num(&y, dec, "weight_bytes"));
    yaml_node_t *a = er_yaml_get(&y, dec, "ms_per_step"), *b = er_yaml_get(&y, vs, "ms_per_step");
    double amin = num(&y, a, "min"), amax = num(&y, a, "max");
    double bmin = num(&y, b, "min"), bmed = num(&y, b, "median"), bmax = num(&y, b, "max");
    assert_true(bmin > 0 && bmin <= bmed && bmed <= bmax);
    /* each pair's ratio is one of b's steps over one of a's */
    yaml_node_t *ra = er_yaml_get(&y, vs, "step_ratio");
    double rmin = num(&y, ra, "min"), rmed = num(&y, ra, "median"), rmax = num(&y, ra, "max");
    assert_true(rmin <= rmed && rmed <= rmax);
    assert_true(rmin >= bmin / amax * (1 - 1e-4) && rmax <= bmax / amin * (1 + 1e-4));
    double shorter = num(&y, vs, "shorter_in_pairs");
    assert_true(shorter >= 0 && shorter <= 16);
    /* a pair's ratio below 1 is a shorter step (the JSON rounds to 6 digits) */
    assert_true(shorter > 0 ? rmin < 1.0 + 1e-5 : rmin >= 1.0 - 1e-5);
    /* against --backend's window */
    double bw = num(&y, root, "bandwidth_gbs"), gbs = num(&y, vs, "weight_gbs");
    assert_true(fabs(gbs - num(&y, vs, "weight_bytes") / (bmed / 1e3) / 1e9) <= 1e-3 * gbs);
    assert_true(fabs(num(&y, vs, "fraction_before") - gbs / bw) <= 1e-3 * gbs / bw);
    double after = num(&y, root, "bandwidth_after_gbs");
    assert_true(fabs(num(&y, vs, "fraction_after") - gbs / after) <= 1e-3 * gbs / after);
    er_yaml_free(&y);
    assert_non_null(strstr(out, "\"prefill\":null")); /* --phase both: decode, with --versus */
    tu_rmrf(dir);
    free(out);

    /* without --versus the key is there, null */
    assert_int_equal(run("bench" READ
                         " --backend ref-w4a16 --json --repeat 1 --phase prefill --m 4 "
                         "--workload " TINY,
                         &out),
                     0);
    assert_non_null(strstr(out, "\"versus\":null"));
    free(out);

    assert_int_equal(run("bench --versus ref-w4a16 --phase prefill --workload " TINY, NULL), 2);
    assert_int_equal(run("bench --versus-options path=fma --workload " TINY, NULL), 2);
    assert_int_equal(run("select --versus ref-w4a16", NULL), 2);
    /* the options reach --versus's backend (ref-w4a16 takes none), and the
     * error says so */
    assert_int_equal(run_all("bench --backend ref-w4a16 --versus ref-w4a16 --versus-options x=1 "
                             "--workload " TINY,
                             &out),
                     2);
    assert_non_null(strstr(out, "edgert bench: --versus: "));
    free(out);
    assert_int_equal(
        run("bench" READ " --backend ref-w4a16 --versus no-such-backend --workload " TINY, NULL),
        3);

    assert_int_equal(run("bench" READ " --backend ref-w4a16 --versus " OTHER_ARCH_BACKEND
                         " --workload " TINY,
                         NULL),
                     3);
}

/* --group and --versus-group: the other run's weights in another group, its
 * step time per byte beside its step time; the expected bytes following
 * the group; their refusals. */
static void test_bench_group(void **state)
{
    (void)state;
    TU_SKIP_EMULATED("7 s");
    /* refusals: without --versus, a group no layout has, a command without it, with
     * --weights (whose groups are the file's) */
    assert_int_equal(run("bench --group 64 --weights no-such.safetensors", NULL), 2);
    assert_int_equal(run("bench --versus-group 64 --workload " TINY, NULL), 2);
    assert_int_equal(run("bench --group 48 --workload " TINY, NULL), 2);
    assert_int_equal(run("bench --versus ref-w4a16 --versus-group 256 --workload " TINY, NULL), 2);
    assert_int_equal(run("select --versus-group 64", NULL), 2);
    char *out, *dir;
    er_yaml y;
    yaml_node_t *root, *dec, *vs, *ra;
    /* --versus-group: the other run's weights in groups of 64, its step
     * time per byte beside its step time (ref-w4a16 reads a scale and a
     * zero point more per 64 weights than per 128) */
    assert_int_equal(run("bench" READ
                         " --backend ref-w4a16 --versus ref-w4a16 --versus-group 64 --json "
                         "--repeat 3 --threads 2 --workload " TINY,
                         &out),
                     0);
    root = parse(out, &y, &dir);
    dec = er_yaml_get(&y, root, "decode");
    vs = er_yaml_get(&y, root, "versus");
    assert_int_equal((int)num(&y, vs, "group"), 64);
    double bytes = num(&y, dec, "weight_bytes"), vbytes = num(&y, vs, "weight_bytes");
    assert_true(vbytes > bytes);
    ra = er_yaml_get(&y, vs, "step_ratio");
    yaml_node_t *rb = er_yaml_get(&y, vs, "step_ratio_per_byte");
    assert_true(fabs(num(&y, rb, "median") - num(&y, ra, "median") * bytes / vbytes) <=
                1e-4 * num(&y, rb, "median"));
    er_yaml_free(&y);
    tu_rmrf(dir);
    free(out);
    /* --group alone: the expected bytes follow the group (ref-w4a16: 4.3125
     * bits per weight at 128, its 40 bits per group over 64: 4.625), the
     * packed bytes then within their headers of them */
    assert_int_equal(run("bench" READ
                         " --backend ref-w4a16 --group 64 --phase decode --repeat 1 --json "
                         "--workload " TINY,
                         &out),
                     0);
    root = parse(out, &y, &dir);
    dec = er_yaml_get(&y, root, "decode");
    double got = num(&y, dec, "weight_bytes"), want = num(&y, dec, "expected_weight_bytes");
    assert_true(got >= want && got <= want * 1.01);
    er_yaml_free(&y);
    tu_rmrf(dir);
    free(out);
}

/* --paired-read: the steps' fractions of the read after each, ordered; the
 * fastest third's among them and at most the fastest step over the slowest
 * of that third's reads; its own text line; null without it; refused with
 * --versus, with --phase prefill and by other commands. */
static void test_bench_paired_read(void **state)
{
    (void)state;
    TU_SKIP_EMULATED("10 s");
    char *out;
    assert_int_equal(run("bench" READ
                         " --backend ref-w4a16 --phase decode --paired-read --repeat 7 "
                         "--json --threads 2 --workload " TINY,
                         &out),
                     0);
    er_yaml y;
    char *dir;
    yaml_node_t *root = parse(out, &y, &dir);
    yaml_node_t *dec = er_yaml_get(&y, root, "decode");
    yaml_node_t *pr = er_yaml_get(&y, dec, "paired_read");
    assert_non_null(pr);
    assert_int_equal((int)num(&y, pr, "steps"), 7);
    yaml_node_t *f = er_yaml_get(&y, pr, "fraction");
    double fmin = num(&y, f, "min"), fmed = num(&y, f, "median"), fmax_ = num(&y, f, "max");
    assert_true(fmin > 0 && fmin <= fmed && fmed <= fmax_);
    yaml_node_t *ft = er_yaml_get(&y, pr, "fastest_third");
    double ff = num(&y, ft, "fraction");
    double rlo = num(&y, ft, "read_min_gbs"), rhi = num(&y, ft, "read_max_gbs");
    assert_true(ff >= fmin && ff <= fmax_);
    assert_true(rlo > 0 && rlo <= rhi);
    /* the fastest third's fraction is one of its steps': at most the
     * fastest step over the slowest of those reads */
    yaml_node_t *ms = er_yaml_get(&y, dec, "ms_per_step");
    const double wb = num(&y, dec, "weight_bytes"), smin = num(&y, ms, "min") / 1e3;
    assert_true(ff <= wb / smin / 1e9 / rlo * 1.001);
    er_yaml_free(&y);
    tu_rmrf(dir);
    free(out);
    /* text: its own line */
    assert_int_equal(run("bench" READ
                         " --backend ref-w4a16 --phase decode --paired-read --repeat 3 "
                         "--workload " TINY,
                         &out),
                     0);
    assert_non_null(strstr(out, "\npaired:  "));
    assert_non_null(strstr(out, "of the step read right after each of 3 steps"));
    free(out);
    /* without it, null */
    assert_int_equal(run("bench" READ " --backend ref-w4a16 --phase decode --repeat 1 --json "
                         "--workload " TINY,
                         &out),
                     0);
    assert_non_null(strstr(out, "\"paired_read\":null"));
    free(out);
    assert_int_equal(run("bench --paired-read --versus ref-w4a16 --workload " TINY, NULL), 2);
    assert_int_equal(run("bench --paired-read --phase prefill --workload " TINY, NULL), 2);
    assert_int_equal(run("select --paired-read", NULL), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bench_json),
        cmocka_unit_test(test_bench_peaks_without_amx_backend),
        cmocka_unit_test(test_bench_in_cache_skips),
        cmocka_unit_test(test_bench_versus),
        cmocka_unit_test(test_bench_group),
        cmocka_unit_test(test_bench_paired_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
