/*
 * tools/bench_output.c — what `edgert bench` prints: one JSON object
 * (--json) or the text report, from a bench_result (tools/bench.c measures
 * it). Kept apart from the measuring so each stays short enough to read.
 */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- output ---------------------------------------------------------------------------------- */

/* "shapes": one object per workload shape, with the phases that ran. */
static void json_shapes(json_w *j, const bench_result *r, const workload *w)
{
    json_key(j, "shapes");
    json_arr(j);
    for (size_t s = 0; s < w->nshapes; s++) {
        const wl_shape *sh = &w->shapes[s];
        const bench_shape *b = &r->shapes[s];
        json_obj(j);
        json_kstr(j, "name", sh->name);
        json_kint(j, "k", sh->k);
        json_kint(j, "n", sh->n);
        json_kint(j, "count", sh->count);
        json_kbool(j, "head", sh->head);
        json_kint(j, "packed_bytes", (long long)b->packed_bytes);
        if (r->have_decode) {
            json_knum(j, "decode_ms", b->decode_ms);
            json_knum(j, "decode_gbs", b->decode_gbs);
            json_knum(j, "fraction_of_bandwidth", b->decode_gbs / r->ceiling_gbs);
        }
        if (r->have_prefill) {
            json_knum(j, "prefill_ms", b->prefill_ms);
            json_knum(j, "prefill_gflops", b->prefill_gflops);
        }
        json_end_obj(j);
    }
    json_end_arr(j);
}

/* "key": {"<name>": v, "min": lo, "max": hi}: a median with its spread. */
static void json_kspread(json_w *j, const char *key, const char *name, double v, double lo,
                         double hi)
{
    json_key(j, key);
    json_obj(j);
    json_knum(j, name, v);
    json_knum(j, "min", lo);
    json_knum(j, "max", hi);
    json_end_obj(j);
}

/* The ceiling's reads: each median, the spread of the whole-buffer ones,
 * the reads in calls. */
static void json_bandwidth(json_w *jw, const bench_result *r)
{
    json_knum(jw, "bandwidth_gbs", r->ceiling_gbs);
    json_knum(jw, "bandwidth_plain_gbs", r->bw.plain_gbs);
    json_knum(jw, "bandwidth_prefetch_gbs", r->bw.prefetch_gbs);
    json_knum(jw, "bandwidth_prefetch_far_gbs", r->bw.far_gbs);
    json_knum(jw, "bandwidth_prefetch_l1_gbs", r->bw.l1_gbs);
    json_knum(jw, "bandwidth_streams_gbs", r->bw.streams_gbs);
    json_knum(jw, "bandwidth_streams_chunked_gbs", r->bw.chunked_gbs);
    json_key(jw, "bandwidth");
    json_obj(jw);
    json_knum(jw, "plain_min", r->bw.plain_min);
    json_knum(jw, "plain_max", r->bw.plain_max);
    json_knum(jw, "prefetch_min", r->bw.prefetch_min);
    json_knum(jw, "prefetch_max", r->bw.prefetch_max);
    json_knum(jw, "prefetch_far_min", r->bw.far_min);
    json_knum(jw, "prefetch_far_max", r->bw.far_max);
    json_knum(jw, "prefetch_l1_min", r->bw.l1_min);
    json_knum(jw, "prefetch_l1_max", r->bw.l1_max);
    json_kint(jw, "streams", r->bw.streams);
    json_knum(jw, "streams_min", r->bw.streams_min);
    json_knum(jw, "streams_max", r->bw.streams_max);
    json_kint(jw, "streams_chunked", r->bw.chunked_streams);
    json_knum(jw, "streams_chunked_min", r->bw.chunked_min);
    json_knum(jw, "streams_chunked_max", r->bw.chunked_max);
    json_kint(jw, "streams_chunk_bytes", (long long)PEAK_STREAM_CHUNK);
    json_kint(jw, "bytes", (long long)r->bw.bytes);
    json_kint(jw, "passes", r->bw.passes);
    json_knum(jw, "call_sized_plain_gbs", r->bw.calls_plain_gbs);
    json_knum(jw, "call_sized_prefetch_gbs", r->bw.calls_prefetch_gbs);
    json_knum(jw, "call_sized_prefetch_far_gbs", r->bw.calls_far_gbs);
    json_knum(jw, "call_sized_prefetch_l1_gbs", r->bw.calls_l1_gbs);
    json_knum(jw, "call_sized_streams_gbs", r->bw.calls_streams_gbs);
    if (r->bw.calls != 0)
        json_kint(jw, "call_sized_streams", BW_STREAMS_FEW);
    else
        json_kstr(jw, "call_sized_streams", NULL);
    json_kint(jw, "calls_per_step", (long long)r->bw.calls);
    json_end_obj(jw);
}

/* "versus": the other backend's steps, paired with this one's; null
 * without --versus. */
static void json_versus(json_w *j, const bench_result *r, const cli *c)
{
    const bench_versus *v = &r->vs;
    json_key(j, "versus");
    if (!r->have_versus) {
        json_null(j);
        return;
    }
    json_obj(j);
    json_kstr(j, "backend", v->backend);
    json_kstr(j, "path", v->path);
    json_kstr(j, "options", c->versus_options);
    json_kint(j, "group", c->versus_group); /* 0: --group's, or the layout's */
    json_kstr(j, "weights", c->versus_weights); /* null: --weights', or generated */
    json_kint(j, "pairs", v->pairs);
    json_kspread(j, "ms_per_step", "median", v->ms_median, v->ms_min, v->ms_max);
    json_kint(j, "weight_bytes", (long long)v->weight_bytes);
    json_knum(j, "weight_gbs", v->weight_gbs);
    json_knum(j, "fraction_before", v->fraction_of_bandwidth);
    json_knum(j, "fraction_after", v->fraction_after);
    json_kspread(j, "step_ratio", "median", v->ratio_median, v->ratio_min, v->ratio_max);
    /* the ratio per byte read: differs from step_ratio when the two read
     * different bytes (another group size, --versus-group; another layout) */
    double per = v->weight_bytes > 0 ? (double)r->weight_bytes / (double)v->weight_bytes : NAN;
    json_kspread(j, "step_ratio_per_byte", "median", v->ratio_median * per, v->ratio_min * per,
                 v->ratio_max * per);
    json_kint(j, "shorter_in_pairs", v->faster);
    json_end_obj(j);
}

/* The in-cache rate (bench_decode.c, decode_in_cache): JSON null and text
 * absent when no GEMM of the step fitted. */
static void json_in_cache(json_w *j, const bench_result *r)
{
    json_key(j, "in_cache");
    if (!isnan(r->in_cache_gbs)) {
        json_obj(j);
        json_knum(j, "gbs", r->in_cache_gbs);
        json_knum(j, "min", r->in_cache_min);
        json_knum(j, "max", r->in_cache_max);
        json_kint(j, "calls", (long long)r->in_cache_calls);
        json_kint(j, "bytes", (long long)r->in_cache_bytes);
        json_kstr(j, "shapes", r->in_cache_shapes);
        json_end_obj(j);
    } else {
        json_null(j);
    }
    json_kstr(j, "in_cache_not_measured", isnan(r->in_cache_gbs) && r->in_cache_why[0]
                                               ? r->in_cache_why : NULL);
    json_knum(j, "fraction_of_in_cache", r->fraction_of_in_cache);
}

static void print_in_cache(const bench_result *r)
{
    if (!isnan(r->in_cache_gbs))
        tprintf("         = %.3f of the in-cache rate: %.1f GB/s [%.1f..%.1f] running %zu of the "
                "step's GEMMs (%s: those that fit, in its order; %.1f MB) over and over from "
                "the cache: what the kernel's instructions allow\n",
                r->fraction_of_in_cache, r->in_cache_gbs, r->in_cache_min, r->in_cache_max,
                r->in_cache_calls, r->in_cache_shapes, r->in_cache_bytes / 1e6);
    else if (r->in_cache_why[0])
        tprintf("         in-cache rate not measured: %s\n", r->in_cache_why);
}

void bench_print_json(const bench_result *r, const workload *w, const cli *c)
{
    json_w j;
    json_init(&j, json_out());
    json_obj(&j);
    json_kstr(&j, "backend", r->backend);
    json_kstr(&j, "path", r->path);
    json_kstr(&j, "options", c->options);
    json_kint(&j, "threads", r->threads);
    json_kstr(&j, "workload", w->name);
    json_kint(&j, "seed", (long long)c->seed);
    if (r->have_decode) {
        json_bandwidth(&j, r);
        json_knum(&j, "bandwidth_call_sized_gbs", r->calls_ceiling_gbs);
        json_knum(&j, "bandwidth_after_gbs", r->ceiling_after_gbs);
    }
    json_key(&j, "compute_peaks");
    json_obj(&j);
    for (int i = 0; i < PEAK_COUNT; i++)
        if (r->have_prefill && !isnan(r->peaks.value[i]))
            json_knum(&j, peak_names[i], r->peaks.value[i]);
    json_end_obj(&j);
    json_key(&j, "decode");
    if (r->have_decode) {
        json_obj(&j);
        json_kstr(&j, "mode", r->decode_calls ? "calls" : "step");
        json_kspread(&j, "ms_per_step", "median", r->step_ms_median, r->step_ms_min,
                     r->step_ms_max);
        json_knum(&j, "tokens_per_s", r->tokens_per_s);
        json_kint(&j, "weight_bytes", (long long)r->weight_bytes);
        json_kint(&j, "expected_weight_bytes", (long long)r->expected_weight_bytes);
        json_knum(&j, "bits_per_weight", 8.0 * r->weight_bytes / (double)wl_weights(w));
        json_knum(&j, "weight_gbs", r->weight_gbs);
        json_knum(&j, "fraction_of_bandwidth", r->fraction_of_bandwidth);
        json_knum(&j, "fraction_of_call_sized_bandwidth", r->fraction_of_calls_ceiling);
        json_kspread(&j, "step_read", "gbs", r->step_read_gbs, r->step_read_min,
                     r->step_read_max);
        json_knum(&j, "fraction_of_step_read", r->fraction_of_step_read);
        json_kstr(&j, "step_read_loop", isnan(r->step_read_gbs) ? NULL : bw_loop_name(&r->bw));
        json_in_cache(&j, r);
        json_key(&j, "paired_read"); /* --paired-read; null without it */
        if (r->paired_steps > 0u) {
            json_obj(&j);
            json_kint(&j, "steps", r->paired_steps);
            json_kspread(&j, "fraction", "median", r->paired_median, r->paired_min,
                         r->paired_max);
            json_key(&j, "fastest_third");
            json_obj(&j);
            json_knum(&j, "fraction", r->paired_fast_fraction);
            json_knum(&j, "read_min_gbs", r->paired_fast_read_min);
            json_knum(&j, "read_max_gbs", r->paired_fast_read_max);
            json_end_obj(&j);
            json_end_obj(&j);
        } else {
            json_null(&j);
        }
        json_key(&j, "window");
        json_obj(&j);
        json_knum(&j, "ceiling_before_gbs", r->ceiling_gbs);
        json_knum(&j, "ceiling_after_gbs", r->ceiling_after_gbs);
        json_knum(&j, "fraction_before", r->fraction_of_bandwidth);
        json_knum(&j, "fraction_after", r->fraction_after);
        json_kbool(&j, "unstable", r->window_unstable);
        json_knum(&j, "unstable_above", BENCH_UNSTABLE);
        json_end_obj(&j);
        json_kint(&j, "steps", r->steps);
        json_end_obj(&j);
    } else {
        json_null(&j);
    }
    json_versus(&j, r, c);
    json_key(&j, "prefill");
    if (r->have_prefill) {
        json_obj(&j);
        json_kint(&j, "m", r->m);
        json_knum(&j, "tokens_per_s", r->prefill_tokens_per_s);
        json_knum(&j, "gflops", r->prefill_gflops);
        json_knum(&j, "fraction_of_compute_peak", r->fraction_of_compute_peak);
        json_kstr(&j, "compute_family", peak_names[r->compute_family]);
        json_knum(&j, "compute_peak_before", r->peak_before);
        json_knum(&j, "compute_peak_after", r->peak_after);
        json_kbool(&j, "unstable", r->prefill_unstable);
        json_end_obj(&j);
    } else {
        json_null(&j);
    }
    json_key(&j, "pack");
    json_obj(&j);
    json_knum(&j, "seconds", r->pack_seconds);
    json_knum(&j, "generate_seconds", r->generate_seconds);
    json_knum(&j, "baseline_rss_mb", r->baseline_rss_mb);
    json_knum(&j, "peak_rss_mb", r->peak_rss_mb);
    json_knum(&j, "settled_rss_mb", r->settled_rss_mb);
    json_knum(&j, "transient_above_packed_mb", r->pack_transient_mb);
    json_end_obj(&j);
    json_shapes(&j, r, w);
    json_said_diags(&j);
    json_end_obj(&j);
    json_finish(&j);
}

/* ` with --FLAG "OPTS"` in buf, or "" when no options were given. */
static const char *given_options(char *buf, size_t len, const char *flag, const char *opts)
{
    if (!opts)
        return "";
    snprintf(buf, len, " with --%s \"%s\"", flag, opts);
    return buf;
}

/* The ceiling's reads, whole-buffer and in calls (bench_print_text). */
static void print_ceiling(const bench_result *r)
{
    tprintf("ceiling: %.1f GB/s, the best of these reads (median of %u passes over %.0f MiB):\n"
            "         %.1f GB/s plain [%.1f..%.1f], %.1f prefetched 4 KiB + 1 KiB ahead "
            "[%.1f..%.1f], %.1f prefetched 8 KiB ahead [%.1f..%.1f], %.1f prefetched 6 KiB "
            "ahead into L1 [%.1f..%.1f], %.1f in %u streams per thread [%.1f..%.1f], %.1f "
            "in %u streams per thread, %.0f MiB at a time [%.1f..%.1f]\n",
            r->ceiling_gbs, r->bw.passes, r->bw.bytes / 1048576.0, r->bw.plain_gbs,
            r->bw.plain_min, r->bw.plain_max, r->bw.prefetch_gbs, r->bw.prefetch_min,
            r->bw.prefetch_max, r->bw.far_gbs, r->bw.far_min, r->bw.far_max, r->bw.l1_gbs,
            r->bw.l1_min, r->bw.l1_max, r->bw.streams_gbs, r->bw.streams, r->bw.streams_min,
            r->bw.streams_max, r->bw.chunked_gbs, r->bw.chunked_streams,
            PEAK_STREAM_CHUNK / 1048576.0, r->bw.chunked_min, r->bw.chunked_max);
    tprintf("         the same reads cut into this step's %zu GEMM-sized calls: %.1f GB/s "
            "plain, %.1f, %.1f and %.1f prefetched, %.1f in %u streams\n",
            r->bw.calls, r->bw.calls_plain_gbs, r->bw.calls_prefetch_gbs, r->bw.calls_far_gbs,
            r->bw.calls_l1_gbs, r->bw.calls_streams_gbs, BW_STREAMS_FEW);
}

/* The table of the workload's shapes, with the columns of the phases
 * measured: no column of nan for the other. */
static void shape_table(const bench_result *r, const workload *w)
{
    int width = 10; /* the longest shape name (a checkpoint's roles are long) */
    for (size_t s = 0; s < w->nshapes; s++)
        width = strlen(w->shapes[s].name) > (size_t)width ? (int)strlen(w->shapes[s].name) : width;
    tprintf("%-*s %7s %7s %5s %10s", width, "shape", "k", "n", "count", "packed MB");
    if (r->have_decode)
        tprintf(" %10s %8s", "decode ms", "GB/s");
    if (r->have_prefill)
        tprintf(" %10s", "pf GFLOP/s");
    tprintf("\n");
    for (size_t s = 0; s < w->nshapes; s++) {
        const wl_shape *sh = &w->shapes[s];
        const bench_shape *b = &r->shapes[s];
        tprintf("%-*s %7u %7u %5u %10.1f", width, sh->name, sh->k, sh->n, sh->count,
                b->packed_bytes / 1e6);
        if (r->have_decode)
            tprintf(" %10.3f %8.2f", b->decode_ms, b->decode_gbs);
        if (r->have_prefill)
            tprintf(" %10.1f", b->prefill_gflops);
        tprintf("\n");
    }
}

void bench_print_text(const bench_result *r, const workload *w, const cli *c)
{
    char opts[512];
    tprintf("bench: %s (%s)%s on %s, %u threads\n", r->backend, r->path,
            given_options(opts, sizeof opts, "options", c->options), w->name, r->threads);
    tprintf("pack:    %.2f s (+%.2f s generating), RssAnon %.1f MB before, peak %.1f MB, settled "
            "%.1f MB; transient above packed %.1f MB\n",
            r->pack_seconds, r->generate_seconds, r->baseline_rss_mb, r->peak_rss_mb,
            r->settled_rss_mb, r->pack_transient_mb);
    if (r->have_decode) {
        print_ceiling(r);
        tprintf("decode:  %.2f ms/step median [%.2f..%.2f] over %u steps (%s) = %.2f tok/s (GEMM "
                "only); %.1f MB/step (%.3f bits/weight) at %.2f GB/s = %.3f of the ceiling\n",
                r->step_ms_median, r->step_ms_min, r->step_ms_max, r->steps,
                r->decode_calls ? "edgert_gemm calls" : "edgert_step",
                r->tokens_per_s, r->weight_bytes / 1e6,
                8.0 * r->weight_bytes / (double)wl_weights(w), r->weight_gbs,
                r->fraction_of_bandwidth);
        tprintf("         = %.3f of the call-sized read\n", r->fraction_of_calls_ceiling);
        if (!isnan(r->step_read_gbs))
            tprintf("         = %.3f of the step read: %.1f GB/s [%.1f..%.1f] reading this "
                    "step's own packed bytes through the same pool, call by call, with no "
                    "arithmetic (%s)\n",
                    r->fraction_of_step_read, r->step_read_gbs, r->step_read_min,
                    r->step_read_max, bw_loop_name(&r->bw));
        print_in_cache(r);
        if (r->paired_steps > 0u)
            tprintf("paired:  %.3f median [%.3f..%.3f] of the step read right after each of %u "
                    "steps; %.3f in the third whose read was fastest (%.1f-%.1f GB/s)\n",
                    r->paired_median, r->paired_min, r->paired_max, r->paired_steps,
                    r->paired_fast_fraction, r->paired_fast_read_min, r->paired_fast_read_max);
        tprintf("window:  ceiling %.1f GB/s before the steps, %.1f after: %.3f / %.3f of each%s\n",
                r->ceiling_gbs, r->ceiling_after_gbs, r->fraction_of_bandwidth, r->fraction_after,
                r->window_unstable ? "" : " (stable)");
        if (r->window_unstable)
            tprintf("UNSTABLE: the two ceilings differ by %.0f%% (more than %.0f%%): the machine's "
                    "bandwidth moved during the run; measure again rather than cite it\n",
                    100.0 * (fmax(r->ceiling_gbs, r->ceiling_after_gbs) /
                                 fmin(r->ceiling_gbs, r->ceiling_after_gbs) -
                             1.0),
                    100.0 * BENCH_UNSTABLE);
        if (fmax(r->fraction_of_bandwidth, r->fraction_after) > 1.0)
            tprintf("ABOVE 1: the steps read faster than the ceiling's reads: their %.1f MB "
                    "stayed in a cache, or the host fed them more than it fed those reads (seen "
                    "on a Zen 3 VM); this ceiling is no limit here: cite the step read "
                    "(--paired-read)\n",
                    r->weight_bytes / 1e6);
    }
    if (r->have_versus) {
        const bench_versus *v = &r->vs;
        tprintf("versus:  %s (%s)%s, its steps and these in %u pairs, each pair's order "
                "alternating:\n         %.2f ms/step median [%.2f..%.2f], %.1f MB/step at %.2f GB/s"
                " = %.3f / %.3f of the ceilings\n",
                v->backend, v->path,
                given_options(opts, sizeof opts, "versus-options", c->versus_options), v->pairs,
                v->ms_median, v->ms_min, v->ms_max,
                v->weight_bytes / 1e6, v->weight_gbs, v->fraction_of_bandwidth, v->fraction_after);
        if (c->versus_weights)
            tprintf("         its layers from %s\n", c->versus_weights);
        tprintf("         its step time over %s's, pair by pair: %.3f median [%.3f..%.3f]; its "
                "step the shorter in %u of %u pairs\n",
                r->backend, v->ratio_median, v->ratio_min, v->ratio_max, v->faster, v->pairs);
        if (v->weight_bytes != r->weight_bytes && v->weight_bytes > 0) {
            /* another group size (--versus-group): the same ratio per byte read */
            double per = (double)r->weight_bytes / (double)v->weight_bytes;
            tprintf("         per byte (its %.1f MB/step%s, these %.1f): %.3f median "
                    "[%.3f..%.3f]\n",
                    v->weight_bytes / 1e6, c->versus_group ? " in its --versus-group" : "",
                    r->weight_bytes / 1e6, v->ratio_median * per, v->ratio_min * per,
                    v->ratio_max * per);
        }
    }
    if (r->have_prefill) {
        tprintf("peaks:  ");
        for (int i = 0; i < PEAK_COUNT; i++)
            if (!isnan(r->peaks.value[i]))
                tprintf(" %s %.0f", peak_names[i], r->peaks.value[i]);
        tprintf("\nprefill: M=%u: %.1f tok/s, %.1f GFLOP/s = %.3f of %s (%.0f before the "
                "prefill, %.0f after: the higher%s)\n",
                r->m, r->prefill_tokens_per_s, r->prefill_gflops, r->fraction_of_compute_peak,
                peak_names[r->compute_family], r->peak_before, r->peak_after,
                r->prefill_unstable ? "" : "; stable");
        if (r->prefill_unstable)
            tprintf("UNSTABLE: the two peaks differ by more than %.0f%%: a neighbour shared "
                    "the cores during the run; measure again rather than cite it\n",
                    100.0 * BENCH_UNSTABLE);
    }
    shape_table(r, w);
}

