/*
 * core/select/selector_figures.c — the figures the selector (selector.c) compares:
 * a candidate's tier, and for speed where its measured decode rate comes
 * from (calibrate's rounds or first contact's calls, one source per tier),
 * that rate with its range, and the prefill rate that goes with it; for
 * fidelity its top-1 agreement and mean KL. Measured beats declared per
 * candidate; NaN or -1 where a figure is not known.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "select/selector.h"

/* The processor a device class's accelerator tier is for: "npu" on a phone
 * with an NPU, "gpu" on a discrete-GPU machine or a Jetson; NULL elsewhere. */
static const char *er_sel_class_accelerator(edgert_device_class k)
{
    if (k == EDGERT_CLASS_NPU_PHONE)
        return "npu";
    if (k == EDGERT_CLASS_CUDA_DISCRETE || k == EDGERT_CLASS_JETSON)
        return "gpu";
    return NULL;
}

/* Tier 0: a backend for THIS device class's accelerator (a gpu manifest on a
 * phone is not one); 1: CPU backends; 2: the reference, always last. */
int er_sel_tier(const struct edgert_ctx *ctx, const er_cand *c)
{
    const char *acc = er_sel_class_accelerator(ctx->dev.device_class);
    if (c->m.reference)
        return 2;
    if (acc && c->m.processor && strcmp(c->m.processor, acc) == 0)
        return 0;
    return 1;
}

/*
 * Where measured decode rates come from: one source for every candidate of
 * a tier (edgert_selection_decode_source; tiers are never compared with each
 * other). A backend's `measured` figure is calibrate's when this device has
 * it for the plugin's current build, else first contact's quick measurement
 * (sandbox.c). The two are not the same measurement: on a Xeon with AMX,
 * after one plugin was rebuilt, its two manifests' quick figures read 34.08
 * and 36.38 tok/s (one kernel) where the others' calibrated medians read
 * 36-40, so the rebuilt backends ranked below them by how they were
 * measured, not by their speed. When calibrated and quick-only figures
 * would meet in a tier, every candidate of it is compared by its quick
 * figure (first contact ran for each: it is cached per plugin file); only
 * when a calibrated candidate has none (its first contact could not
 * measure) are the sources mixed, each by the best it has, and the
 * selection says so. Calibrated figures of one tier that come from more
 * than one evidence series (separate calibrate runs: core/evidence/evidence.c) are
 * not one measurement either, and are treated the same way: a backend
 * calibrated in a 29 GB/s window would rank below one calibrated in
 * another session's 38 GB/s one (the Xeon's read ceiling was 29-34 GB/s in
 * one session, 32-40 in others).
 */
/*
 * First contacts happen one plugin file at a time, whenever each is first
 * met, so their quick figures come from different memory-bandwidth windows
 * (27-86 GB/s on one host, seconds apart). Each carries the read measured
 * beside its calls (sandbox_measure.c, time_gemm; edgert_candidate
 * .first_contact_read_gbs), and a tier compared by first contact is
 * compared at one read rate, the median of its members' reads: a quick
 * figure is scaled by that rate over its own read, its range too. A decode
 * GEMV that streams from memory takes time in proportion to the bytes over
 * the bandwidth, so the scaled figures rank the kernels by what they do with
 * a window, not by the window they met. A figure without a read (a kernel
 * too slow for memory to bind it) is compared as measured. The scaling is
 * a straight line where the truth is not quite one: on the AMD EPYC (Zen 5)
 * host a decode GEMV streamed 1.15x the read's rate in busy windows (reads
 * 45-48 GB/s) and 1.19-1.22x in quiet ones (71-77), so a figure met in a
 * busy window and compared at a quiet tier's rate is undervalued by up to
 * ~5%, and a kernel that keeps up in busy windows only is flattered. With
 * an earlier, plainer read the gap was 1.09-1.13x against 1.26-1.35x, and
 * 29 fresh first contacts ranked avx512-w4a8 first 27 times, avx512-w4a16
 * (3% more bytes) twice, avx2-w4a16 (20% slower in quiet windows) never;
 * before the read, the pick followed whichever window each backend met.
 * The ranges, and calibrate's interleaved rounds, settle the close cases.
 */
static decode_src with_read(const struct edgert_ctx *ctx, int t, er_src_kind kind)
{
    decode_src s = {kind, NAN};
    double *r = kind == SRC_FIRST_CONTACT || kind == SRC_MIXED
                    ? malloc((ctx->ncands + 1u) * sizeof *r)
                    : NULL;
    size_t n = 0;
    for (size_t i = 0; r && i < ctx->ncands; i++) {
        const er_cand *c = ctx->cands[i];
        if (c->pub.eligible && er_sel_tier(ctx, c) == t && er_sel_by_first_contact(c, s) &&
            !isnan(c->pub.first_contact_decode_tokens_per_s) && c->pub.first_contact_read_gbs > 0.0)
            r[n++] = c->pub.first_contact_read_gbs;
    }
    for (size_t i = 1; i < n; i++) /* insertion sort of a handful */
        for (size_t j = i; j > 0 && r[j] < r[j - 1]; j--) {
            double v = r[j];
            r[j] = r[j - 1];
            r[j - 1] = v;
        }
    if (n > 0)
        s.read_gbs = n % 2u ? r[n / 2u] : 0.5 * (r[n / 2u - 1u] + r[n / 2u]);
    free(r);
    return s;
}

/* What c's quick figure is multiplied by under `src` (with_read). */
static double quick_scale(const er_cand *c, decode_src src)
{
    double own = c->pub.first_contact_read_gbs;
    return own > 0.0 && src.read_gbs > 0.0 ? src.read_gbs / own : 1.0;
}

int er_sel_has_calibrated_decode(const er_cand *c)
{
    return c->calibrated && !isnan(c->pub.measured.decode_tokens_per_s);
}

decode_src er_sel_decode_source(const struct edgert_ctx *ctx, int t)
{
    size_t calibrated = 0, quick_only = 0, calibrated_unquick = 0, contended = 0;
    const char *series = NULL;
    int one_series = 1;
    for (size_t i = 0; i < ctx->ncands; i++) {
        const er_cand *c = ctx->cands[i];
        if (!c->pub.eligible || er_sel_tier(ctx, c) != t)
            continue;
        int quick = !isnan(c->pub.first_contact_decode_tokens_per_s);
        /* a first contact measured under contention kept no figure
         * (sandbox.c): a member with nothing better leaves the tier no
         * measurement that compares all of it, so its declared figures
         * decide, the same for every process that reads the verdict */
        if (c->pub.first_contact_contention && !er_sel_has_calibrated_decode(c))
            contended++;
        if (er_sel_has_calibrated_decode(c)) {
            calibrated++;
            calibrated_unquick += quick ? 0u : 1u;
            /* one calibrate run's windows; no series is a series of its own */
            if (calibrated > 1 && !(series && c->series && strcmp(series, c->series) == 0))
                one_series = 0;
            series = c->series;
        } else if (quick) {
            quick_only++; /* never calibrated, or calibrate stored no decode rate */
        }
    }
    if (contended > 0)
        return with_read(ctx, t, SRC_DECLARED);
    if (calibrated == 0)
        return with_read(ctx, t, quick_only ? SRC_FIRST_CONTACT : SRC_DECLARED);
    if (quick_only == 0 && one_series)
        return with_read(ctx, t, SRC_CALIBRATE);
    return with_read(ctx, t, calibrated_unquick ? SRC_MIXED : SRC_FIRST_CONTACT);
}

const char *er_sel_decode_source_name(decode_src src)
{
    switch (src.kind) {
    case SRC_CALIBRATE: return "calibrate";
    case SRC_FIRST_CONTACT: return "first-contact";
    case SRC_MIXED: return "mixed";
    default: return "declared";
    }
}

/* The measured decode rate compared under `src`, NaN when none. */
double er_sel_decode_measured(const er_cand *c, decode_src src)
{
    double cal = er_sel_has_calibrated_decode(c) ? c->pub.measured.decode_tokens_per_s : NAN;
    double quick = c->pub.first_contact_decode_tokens_per_s * quick_scale(c, src);
    switch (src.kind) {
    case SRC_CALIBRATE: return cal;
    case SRC_FIRST_CONTACT: return quick;
    case SRC_MIXED: return isnan(cal) ? quick : cal;
    default: return NAN;
    }
}

/* How much a speed figure is worth: measured on this device (decode_source)
 * > declared by a manifest that says it measured them (verified: true) > an
 * unverified claim > nothing. Evidence beats claims: a class is compared
 * before the value. */
int er_sel_speed_class(const er_cand *c, decode_src src)
{
    if (!isnan(er_sel_decode_measured(c, src)))
        return 3;
    if (isnan(c->pub.declared.decode_tokens_per_s))
        return 0;
    return c->m.verified ? 2 : 1;
}

double er_sel_speed_of(const er_cand *c, decode_src src, int *measured)
{
    double v = er_sel_decode_measured(c, src);
    if (!isnan(v)) {
        if (measured)
            *measured = 1;
        return v;
    }
    if (measured)
        *measured = 0;
    return isnan(c->pub.declared.decode_tokens_per_s) ? 0.0 : c->pub.declared.decode_tokens_per_s;
}

double er_sel_top1_of(const er_cand *c, int *measured)
{
    if (!isnan(c->pub.measured.top1_agreement)) {
        if (measured)
            *measured = 1;
        return c->pub.measured.top1_agreement;
    }
    if (measured)
        *measured = 0;
    return isnan(c->pub.declared.top1_agreement) ? -1.0 : c->pub.declared.top1_agreement;
}

/* Whether the decode rate compared under `src` is first contact's. */
int er_sel_by_first_contact(const er_cand *c, decode_src src)
{
    return src.kind == SRC_FIRST_CONTACT ||
           (src.kind == SRC_MIXED && !er_sel_has_calibrated_decode(c));
}

/* The range of the measured decode rate compared under `src`: 1 with
 * [*lo, *hi] when it has one around it (calibrate's rounds, first
 * contact's calls; core/evidence/evidence.c and core/sandbox/sandbox.c kept only ranges
 * with lo <= median <= hi), else 0. */
int er_sel_measured_range(const er_cand *c, decode_src src, double *lo, double *hi)
{
    *lo = *hi = NAN;
    if (src.kind == SRC_DECLARED || isnan(er_sel_decode_measured(c, src)))
        return 0;
    int quick = er_sel_by_first_contact(c, src);
    double scale = quick ? quick_scale(c, src) : 1.0;
    *lo = (quick ? c->pub.first_contact_decode_min : c->pub.measured_decode_min) * scale;
    *hi = (quick ? c->pub.first_contact_decode_max : c->pub.measured_decode_max) * scale;
    return !isnan(*lo) && !isnan(*hi);
}

/* The measured prefill rate that goes with the decode rate compared under
 * `src` (the same measurement: calibrate's, or first contact's quick one,
 * which `measured` also holds when nothing was calibrated), NaN when none. */
double er_sel_prefill_measured(const er_cand *c, decode_src src)
{
    if (src.kind == SRC_DECLARED)
        return NAN;
    return er_sel_by_first_contact(c, src) ? c->pub.first_contact_prefill_gflops
                                    : c->pub.measured.prefill_gflops;
}

/* Prefill's worth as evidence, as speed_class for decode: measured here 2,
 * declared 1, unknown 0; and its figure (unknown -1). */
int er_sel_prefill_class(const er_cand *c, decode_src src)
{
    if (!isnan(er_sel_prefill_measured(c, src)))
        return 2;
    return isnan(c->pub.declared.prefill_gflops) ? 0 : 1;
}

double er_sel_prefill_of(const er_cand *c, decode_src src)
{
    double v = er_sel_prefill_measured(c, src);
    if (!isnan(v))
        return v;
    return isnan(c->pub.declared.prefill_gflops) ? -1.0 : c->pub.declared.prefill_gflops;
}

double er_sel_kl_of(const er_cand *c)
{
    if (!isnan(c->pub.measured.kl_mean))
        return c->pub.measured.kl_mean;
    return isnan(c->pub.declared.kl_mean) ? INFINITY : c->pub.declared.kl_mean;
}
