/*
 * tools/explain.c — `edgert select --explain`: what was selected and the one
 * thing that decided it, the device, one verdict per manifest, and the
 * ranking in the selector's own account (edgert_selection_reason), which is
 * printed here and never derived again. Short by default (at most about 40
 * lines, wrapped at the terminal's width by tprintf); --explain=full adds the
 * provenance: every device fact, the folders searched, layouts, checksums
 * and the manifests' notes whole.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The notes of a first contact measured under contention (its figures not
 * kept, or measured again): what a reader acts on, in both forms. */
static void explain_contention(const edgert_candidate *k, int ind)
{
    if (k->first_contact_contention)
        tprintf("%*sfirst contact: figures not kept, measured under contention: "
                "%s\n%*s(its tier is ranked by declared figures; a run a minute "
                "or more from now measures it again)\n", ind, "", k->first_contact_contention,
                ind, "");
    else if (k->first_contact_attempts > 1u)
        tprintf("%*sfirst contact: measured again (%u earlier measurement%s ran "
                "under contention)\n", ind, "", k->first_contact_attempts - 1u,
                k->first_contact_attempts == 2u ? "" : "s");
}

/* One candidate's verdict in the short form: one line (and a note to act on,
 * if any). Eligible: its rank, what was checked and its path's name (the
 * selected one's whole description closes the output). Rejected: the first
 * reason, how many more, and the first failure's detail. Its figure is the
 * ranking's, said once there; layout, plugin_name, checksum, figures as
 * measured and the manifest's notes are --explain=full's. */
/* A backend rejected because it is not meant for this kind of device at
 * all (another arch or device class): the short form names those in one row
 * (explain_not_for_device), the full form gives each its own. */
static int not_for_device(const edgert_candidate *k)
{
    return !k->eligible && k->reason_count > 0 &&
           (strcmp(k->reasons[0], "WRONG_ARCH") == 0 ||
            strcmp(k->reasons[0], "WRONG_DEVICE_CLASS") == 0);
}

static void explain_not_for_device(edgert_ctx *ctx)
{
    char names[512] = "";
    size_t n = 0;
    for (size_t i = 0; i < edgert_candidate_count(ctx); i++)
        if (not_for_device(edgert_candidate_at(ctx, i)) && ++n)
            text_append(names, sizeof names, ", ", edgert_candidate_at(ctx, i)->name);
    if (n > 0)
        tprintf("  not for this device: %s (WRONG_ARCH or WRONG_DEVICE_CLASS)\n", names);
}

static void explain_candidate_short(const edgert_candidate *k, int r)
{
    if (not_for_device(k))
        return;
    if (!k->eligible) {
        tprintf("  %-16s rejected  %s", k->name, k->reason_count ? k->reasons[0] : "?");
        if (k->reason_count > 1)
            tprintf(" +%zu more", k->reason_count - 1);
        tprintf("%s%s\n", k->detail && *k->detail ? ": " : "", k->detail ? k->detail : "");
        return;
    }
    tprintf("  %-16s ELIGIBLE  rank %d", k->name, r + 1);
    if (k->loaded)
        tprintf("; loaded, self-tested and %s", k->arithmetic_checked
                                                    ? "checked by the core"
                                                    : "not checked by the core");
    else if (!k->library_path)
        tprintf("; declarative (no library: %s runs it)", k->processor);
    if (k->path_chosen) /* "avx2: AVX2, 15-bit ...": its name */
        tprintf("; path %.*s", (int)strcspn(k->path_chosen, ":,"), k->path_chosen);
    tprintf("\n");
    explain_contention(k, 6);
}

/* One candidate's verdict in the full form (--explain=full): eligible (rank,
 * path) or rejected (every reason, the first failure's detail), then, under
 * the verdict's text, its layout, checksum, the figures measured here as
 * measured, first contact's and the manifest's with its note whole. */
static void explain_candidate(const edgert_candidate *k, int r)
{
    const int ind = 29;
    char lay[256];
    if (k->eligible) {
        tprintf("  %-16s ELIGIBLE  rank %d", k->name, r + 1);
        if (k->loaded && k->arithmetic_checked)
            tprintf("; loaded, self-tested and checked by the core (%u outputs)%s%s",
                    k->arithmetic_checked, k->path_chosen ? ", path: " : "",
                    k->path_chosen ? k->path_chosen : "");
        else if (k->loaded)
            tprintf("; loaded and self-tested (not checked by the core)%s%s",
                    k->path_chosen ? ", path: " : "", k->path_chosen ? k->path_chosen : "");
        else if (!k->library_path)
            tprintf("; declarative (no library: %s runs it)", k->processor);
        tprintf("\n");
    } else {
        char reasons[512];
        reasons_text(k, reasons, sizeof reasons);
        tprintf("  %-16s rejected  %s\n", k->name, reasons);
        if (k->detail && *k->detail)
            tprintf("%*s%s\n", ind, "", k->detail);
    }
    tprintf("%*slayout: %s\n", ind, "", layout_text(k, lay, sizeof lay));
    if (k->plugin_name)
        tprintf("%*splugin_name: %s (the name its library gives itself)\n", ind, "",
                k->plugin_name);
    if (k->checksum)
        tprintf("%*schecksum: %s %s\n", ind, "", k->checksum,
                k->checksum_verified > 0   ? "(verified: the library's bytes match)"
                : k->checksum_verified < 0 ? "(MISMATCH: the library is not the one stamped)"
                                           : "(not checked)");
    else if (k->library_path)
        tprintf("%*schecksum: none (a changed or swapped library goes unnoticed; "
                "'edgert checksum --stamp %s' adds one)\n", ind, "", k->manifest_path);
    if (!isnan(k->measured.decode_tokens_per_s) || !isnan(k->measured.top1_agreement)) {
        tprintf("%*smeasured here:", ind, "");
        if (!isnan(k->measured.decode_tokens_per_s))
            tprintf(" %.2f tok/s decode", k->measured.decode_tokens_per_s);
        if (!isnan(k->measured_decode_min))
            tprintf(" [rounds %.2f..%.2f%s]", k->measured_decode_min, k->measured_decode_max,
                    k->measured_rounds_repeated ? "; contended rounds measured again" : "");
        else if (k->measured.decode_tokens_per_s == k->first_contact_decode_tokens_per_s &&
                 !isnan(k->first_contact_decode_min))
            tprintf(" [calls %.2f..%.2f]", k->first_contact_decode_min,
                    k->first_contact_decode_max);
        if (k->measured.decode_tokens_per_s == k->first_contact_decode_tokens_per_s &&
            !isnan(k->first_contact_read_gbs))
            tprintf(" beside a %.1f GB/s read", k->first_contact_read_gbs);
        /* the first figure after a blank, the others after a comma */
        const int rate = !isnan(k->measured.decode_tokens_per_s);
        if (!isnan(k->measured.prefill_gflops))
            tprintf("%s %.0f GFLOP/s prefill", rate ? "," : "", k->measured.prefill_gflops);
        if (!isnan(k->measured.top1_agreement))
            tprintf("%s top-1 %.3f, KL %.3g",
                    rate || !isnan(k->measured.prefill_gflops) ? "," : "",
                    k->measured.top1_agreement, k->measured.kl_mean);
        tprintf(" (%s", k->measured.where ? k->measured.where : "evidence");
        if (k->measured_workload) /* its tok/s are that workload's (calibrate --workload) */
            tprintf("; workload %s", k->measured_workload);
        if (k->measured_fidelity_source && !isnan(k->measured.top1_agreement))
            tprintf("; top-1 and KL from %s", k->measured_fidelity_source);
        tprintf(")\n");
    }
    double fc = k->first_contact_decode_tokens_per_s;
    if (!isnan(fc) && !(fc == k->measured.decode_tokens_per_s)) {
        tprintf("%*sfirst contact: %.2f tok/s decode", ind, "", fc);
        if (!isnan(k->first_contact_decode_min))
            tprintf(" [calls %.2f..%.2f]", k->first_contact_decode_min,
                    k->first_contact_decode_max);
        if (!isnan(k->first_contact_read_gbs))
            tprintf(" beside a %.1f GB/s read", k->first_contact_read_gbs);
        if (!isnan(k->first_contact_prefill_gflops))
            tprintf(", %.0f GFLOP/s prefill", k->first_contact_prefill_gflops);
        tprintf(" (its quick measurement)\n");
    }
    explain_contention(k, ind);
    if (!isnan(k->declared.decode_tokens_per_s) || !isnan(k->declared.top1_agreement)) {
        tprintf("%*sdeclared:", ind, "");
        if (!isnan(k->declared.decode_tokens_per_s))
            tprintf(" %.1f tok/s", k->declared.decode_tokens_per_s);
        if (!isnan(k->declared.top1_agreement))
            tprintf(" top-1 %.3f", k->declared.top1_agreement);
        tprintf(" (%s%s)\n", k->verified ? "verified: " : "not verified: ",
                k->declared.where ? k->declared.where : "?");
    }
}

/* "<prefix><figure><unit> measured" (here) or "... declared" (by the
 * manifest), as the selector's account says (`measured` 1 or 0); `unknown`
 * when it has neither (-1). */
static void figure_text(char *out, size_t len, const char *prefix, double v, int measured,
                        int decimals, const char *unit, const char *unknown)
{
    if (measured < 0 || isnan(v))
        snprintf(out, len, "%s", unknown);
    else
        snprintf(out, len, "%s%.*f%s %s", prefix, decimals, v, unit,
                 measured ? "measured" : "declared");
}

/* The selector's account of every rank (edgert_selection_reason), which
 * the explanation prints and never derives again. */
typedef struct account {
    edgert_ctx *ctx;
    edgert_priority priority;
    size_t n;
    edgert_rank_reason *why; /* per rank */
} account;

static const char *name_at(const account *a, size_t r)
{
    return edgert_candidate_at(a->ctx, a->why[r].candidate)->name;
}

/* The one figure that ranked rank r, with its source in a word: decode
 * tok/s for speed (from calibrate's rounds, first contact's quick
 * measurement at its tier's read rate, or the manifest), top-1 agreement for
 * fidelity (measured here or declared). The verdicts show none of it, so a
 * backend has one figure in the short form (--explain=full adds the figures
 * as measured, before any scaling). */
static void rank_figure(const account *a, size_t r, char *out, size_t len)
{
    const edgert_rank_reason *w = &a->why[r];
    if (a->priority == EDGERT_PRIORITY_FIDELITY) {
        if (w->top1_measured < 0 || isnan(w->top1))
            snprintf(out, len, "top-1 unknown");
        else
            snprintf(out, len, "top-1 %.3f (%s)", w->top1,
                     w->top1_measured ? "measured" : "declared");
        return;
    }
    if (w->decode_measured < 0 || isnan(w->decode))
        snprintf(out, len, "speed unknown");
    else if (!w->decode_measured)
        snprintf(out, len, "%.1f tok/s (declared)", w->decode);
    else
        snprintf(out, len, "%.1f tok/s (%s)", w->decode, w->quick ? "first contact" : "calibrate");
}

/* Whether ranks q and r have calibrated figures of one evidence series
 * and are compared by one decode source (the tiers' series differ in it). */
static int same_series(const account *a, size_t q, size_t r)
{
    const edgert_rank_reason *x = &a->why[q], *y = &a->why[r];
    return x->series && y->series && strcmp(x->series, y->series) == 0 &&
           strcmp(x->source, y->source) == 0;
}

/* "a, b on <UTC time to the second>" for rank r's series (it begins with
 * the time), appended to buf after "; ", once per series (at its first rank) */
static void series_text(const account *a, size_t r, char *buf, size_t len)
{
    for (size_t q = 0; q < r; q++)
        if (same_series(a, q, r))
            return;
    char text[400] = "", when[40];
    for (size_t q = r; q < a->n; q++)
        if (same_series(a, q, r))
            text_append(text, sizeof text, ", ", name_at(a, q));
    snprintf(when, sizeof when, " on %.19s", a->why[r].series);
    text_append(text, sizeof text, "", when);
    text_append(buf, len, "; ", text);
}

/* The read rate first-contact figures were compared at (one per tier, the
 * median of the reads beside them: core/select/selector_figures.c), once per rate. */
static void explain_read_rate(const account *a)
{
    double said = NAN;
    for (size_t r = 0; r < a->n; r++) {
        double gbs = a->why[r].read_gbs;
        if (isnan(gbs) || gbs == said)
            continue;
        char names[512] = "";
        for (size_t q = r; q < a->n; q++)
            if (a->why[q].read_gbs == gbs)
                text_append(names, sizeof names, ", ", name_at(a, q));
        /* why, where the row has room for it (a row each: this section fits a
         * screen with five eligible backends); 'edgert select --help' says it */
        char line[768];
        snprintf(line, sizeof line, "  %s compared at one read rate, %.1f GB/s", names, gbs);
        if (strlen(line) + 45u <= 98u)
            text_append(line, sizeof line, "", " (each figure scaled by it over its own read)");
        tprintf("%s\n", line);
        said = gbs;
    }
}

/* What the ranking's measured decode rates are, where that needs saying:
 * quick figures standing in for calibrate's in a tier (naming the backends
 * without a calibrated rate for their current build; or, when all have
 * one, the separate calibrate runs they came from), or sources that could
 * not be made one. */
static void explain_decode_source(const account *a)
{
    for (int mixed = 0; mixed < 2; mixed++) {
        char names[512] = "", runs[512] = "";
        size_t ranks = 0, named = 0;
        for (size_t r = 0; r < a->n; r++) {
            const edgert_rank_reason *w = &a->why[r];
            if (strcmp(w->source, mixed ? "mixed" : "first-contact"))
                continue;
            ranks++;
            const edgert_candidate *k = edgert_candidate_at(a->ctx, w->candidate);
            if (!w->calibrated && !isnan(k->first_contact_decode_tokens_per_s)) {
                text_append(names, sizeof names, ", ", k->name);
                named++;
            } else if (w->calibrated && w->series) {
                series_text(a, r, runs, sizeof runs);
            }
        }
        if (ranks == 0)
            continue;
        if (mixed)
            tprintf("  decode measured here mixes calibrate's rounds with first contact's quick "
                    "measurement (%s), as a calibrated backend has no quick figure; run 'edgert "
                    "calibrate' again\n", names[0] ? names : "some of them");
        else if (named == ranks)
            tprintf("  decode: first contact's quick measurement ('edgert calibrate' has not "
                    "measured these builds)\n");
        else if (names[0] || !runs[0])
            tprintf("  decode measured here is first contact's quick measurement, for every "
                    "backend of the tier: 'edgert calibrate' has no rounds for %s in its current "
                    "build (run it again to rank by rounds)\n", names[0] ? names : "some of them");
        else
            tprintf("  decode measured here is first contact's quick measurement, for every "
                    "backend of the tier: 'edgert calibrate' measured them in separate runs (%s), "
                    "whose memory-bandwidth windows differ (run it again to rank by the rounds "
                    "of one run)\n", runs);
    }
    /* declared figures because a first contact was measured under contention */
    char names[512] = "";
    for (size_t r = 0; r < a->n; r++) {
        const edgert_candidate *k = edgert_candidate_at(a->ctx, a->why[r].candidate);
        if (strcmp(a->why[r].source, "declared") == 0 && k->first_contact_contention)
            text_append(names, sizeof names, ", ", k->name);
    }
    if (names[0])
        tprintf("  decode is compared by declared figures: first contact measured %s under "
                "contention and kept no figure (a run a minute or more from now measures again; "
                "'edgert calibrate' ranks by its rounds)\n", names);
    explain_read_rate(a);
}

/* "rank N" or "ranks N-M" (1-based) of rank r's group. */
static void group_ranks(const edgert_rank_reason *w, char *out, size_t len)
{
    if (w->group_first == w->group_last)
        snprintf(out, len, "rank %zu", w->group_first + 1);
    else
        snprintf(out, len, "ranks %zu-%zu", w->group_first + 1, w->group_last + 1);
}

/* Under rank r's line (priority fidelity): its fidelity group, when it has
 * other members (top-1 within sampling noise, so mean KL decided). */
static void explain_fidelity_group(const account *a, size_t r)
{
    const edgert_rank_reason *w = &a->why[r];
    if (a->priority != EDGERT_PRIORITY_FIDELITY || w->group_first == w->group_last)
        return;
    const edgert_candidate *k = edgert_candidate_at(a->ctx, w->candidate);
    char kl[32];
    figure_text(kl, sizeof kl, "KL ", w->kl, w->kl_measured, 3, "", "KL unknown");
    tprintf("     %-16s top-1 %.3f over %u tokens, %s: as faithful as ranks %zu-%zu by top-1 "
            "(within two standard errors of each other); KL decided\n", "", w->top1,
            k->measured_top1_tokens, kl, w->group_first + 1, w->group_last + 1);
}

/* Decimals (2 to 6) that print a and b as different numbers, so a median
 * just outside a range never reads as its bound. */
static int decimals_apart(double a, double b)
{
    int d = 2;
    for (double f = 100.0; d < 6 && round(a * f) == round(b * f); f *= 10.0)
        d++;
    return d;
}

/* Under rank r's line, when it starts a decode group right after a group of
 * the same tier and kind of figure: which median fell outside which range
 * (the selector's account: edgert_rank_reason.split), so a backend that
 * measured close to the one above it is not left unexplained. */
static void explain_decode_split(const account *a, size_t r)
{
    const edgert_rank_reason *w = &a->why[r], *o = &a->why[w->split_rank];
    if (w->split == EDGERT_SPLIT_NONE)
        return;
    const char *what = w->quick ? "calls" : "rounds";
    char why[256], ranks[64];
    int d;
    if (w->split == EDGERT_SPLIT_MEDIAN_OUTSIDE) {
        double bound = w->decode < o->decode_lo ? o->decode_lo : o->decode_hi;
        d = decimals_apart(w->decode, bound);
        snprintf(why, sizeof why, "its median %.*f lies outside %s's %s [%.*f..%.*f]", d,
                 w->decode, name_at(a, w->split_rank), what, d, o->decode_lo, d, o->decode_hi);
    } else {
        double bound = o->decode < w->decode_lo ? w->decode_lo : w->decode_hi;
        d = decimals_apart(o->decode, bound);
        snprintf(why, sizeof why, "%s's median %.*f lies outside these %s [%.*f..%.*f]",
                 name_at(a, w->split_rank), d, o->decode, what, d, w->decode_lo, d, w->decode_hi);
    }
    group_ranks(o, ranks, sizeof ranks);
    tprintf("     %-16s decode %s: not one group with %s: %s\n", "", what, ranks, why);
}

/* Under rank r's line (priority speed): its decode group, when it has other
 * members (their medians lie within each other's rounds, so prefill decided
 * between them), and why it is not in the group above. */
static void explain_decode_group(const account *a, size_t r)
{
    const edgert_rank_reason *w = &a->why[r];
    if (a->priority != EDGERT_PRIORITY_SPEED)
        return;
    if (w->group_first == w->group_last) {
        explain_decode_split(a, r);
        return; /* alone in its group */
    }
    char pre[64];
    figure_text(pre, sizeof pre, "prefill ", w->prefill, w->prefill_measured, 0, " G(FL)OP/s",
                "prefill unknown");
    tprintf("     %-16s %s [%.2f..%.2f]: one group, ranks %zu-%zu; %s\n", "",
            w->quick ? "calls" : "rounds", w->decode_lo, w->decode_hi, w->group_first + 1,
            w->group_last + 1, pre);
    if (r == w->group_first)
        explain_decode_split(a, r);
}

/* The tier's name in a headline. */
static const char *tier_text(int tier)
{
    return tier == 0 ? "accelerator backends" : tier == 1 ? "CPU backends" : "the reference";
}

/* The first line of --explain: what was selected and the one thing that put
 * it above the next rank (the account of rank 2), in the selector's words. */
static void explain_headline(const account *a, const char *forced)
{
    if (forced) { /* the forced backend, whatever rank the figures give it */
        tprintf("selected %s: forced (--backend or EDGERT_BACKEND), not by the ranking\n\n",
                forced);
        return;
    }
    if (a->n == 0) {
        tprintf("selected nothing: no backend is eligible (the verdicts below say why)\n\n");
        return;
    }
    const edgert_rank_reason *w0 = &a->why[0], *w1 = a->n > 1 ? &a->why[1] : NULL;
    const char *name = edgert_candidate_at(a->ctx, w0->candidate)->name,
               *next = w1 ? edgert_candidate_at(a->ctx, w1->candidate)->name : NULL;
    const char *p = edgert_priority_name(a->priority);
    if (!w1)
        tprintf("selected %s for %s: the only eligible backend\n\n", name, p);
    else if (w1->decider == EDGERT_DECIDER_TIER)
        tprintf("selected %s for %s: %s rank before %s, whatever the figures (next: %s)\n\n",
                name, p, tier_text(w0->tier), tier_text(w1->tier), next);
    else if (w1->decider == EDGERT_DECIDER_DECODE && isnan(w1->decode))
        tprintf("selected %s for %s: decode %.1f tok/s %s; %s has no decode figure\n\n", name,
                p, w0->decode, w0->decode_measured ? "measured" : "declared", next);
    else if (w1->decider == EDGERT_DECIDER_DECODE)
        tprintf("selected %s for %s: decode %.1f tok/s %s, against %s's %.1f %s\n\n", name, p,
                w0->decode, w0->decode_measured ? "measured" : "declared", next, w1->decode,
                w1->decode_measured ? "measured" : "declared");
    else if (w1->decider == EDGERT_DECIDER_PREFILL)
        tprintf("selected %s for %s: ranks %zu-%zu decode within each other's noise; its "
                "prefill, %.0f against %s's %.0f GFLOP/s, decided\n\n", name, p,
                w0->group_first + 1, w0->group_last + 1, w0->prefill, next, w1->prefill);
    else if (w1->decider == EDGERT_DECIDER_TOP1 && isnan(w1->top1))
        tprintf("selected %s for %s: top-1 agreement %.3f %s; %s has no top-1 figure\n\n", name,
                p, w0->top1, w0->top1_measured ? "measured" : "declared", next);
    else if (w1->decider == EDGERT_DECIDER_TOP1)
        tprintf("selected %s for %s: top-1 agreement %.3f %s, against %s's %.3f\n\n", name, p,
                w0->top1, w0->top1_measured ? "measured" : "declared", next, w1->top1);
    else if (w1->decider == EDGERT_DECIDER_KL)
        tprintf("selected %s for %s: top-1 within sampling noise of %s's; its mean KL, %.3g "
                "against %.3g, decided\n\n", name, p, next, w0->kl, w1->kl);
    else if (w1->decider == EDGERT_DECIDER_COST)
        tprintf("selected %s for %s: as fast as %s by the figures, with cheaper arithmetic "
                "(fewer activation or weight bits)\n\n", name, p, next);
    else if (w1->decider == EDGERT_DECIDER_BITS)
        tprintf("selected %s for %s: as faithful as %s by the figures, with more activation "
                "(then weight) bits\n\n", name, p, next);
    else if (w1->decider == EDGERT_DECIDER_SPECIALIZATION)
        tprintf("selected %s for %s: as good as %s by the figures, and written for more of this "
                "device's CPU flags\n\n", name, p, next);
    else
        tprintf("selected %s for %s: nothing told it from %s but the name\n\n", name, p, next);
}

/* --explain's first part: the device, the folders searched and what they
 * held, and the gates the verdicts come from; short unless --explain=full
 * (the device's facts on two lines, the folders counted, the gates named
 * by 'select --help'), its problems always. */
static void explain_setting(const cli *c, edgert_ctx *ctx, const edgert_device *d)
{
    const int full = c->explain > 1;
    if (full) {
        print_device(d);
    } else {
        char flags[1024], off[512];
        flags_text(d->cpu_flags, flags, sizeof flags);
        flags_text(d->cpu_flags_os_disabled, off, sizeof off);
        tprintf("device: %s (%s): %s, %s, %u logical cores, %.1f GiB%s%s\n",
                d->name[0] ? d->name : "unnamed",
                d->planned ? "plan from a device profile" : "live probe",
                edgert_device_class_name(d->device_class), edgert_arch_name(d->arch),
                d->logical_cores, d->mem_total_bytes / 1073741824.0,
                d->accelerator[0] ? ", accelerator " : "", d->accelerator);
        tprintf("  cpu flags     %s%s%s\n", flags,
                d->cpu_flags_os_disabled ? "; OS-disabled: " : "",
                d->cpu_flags_os_disabled ? off : "");
    }
    if (d->planned)
        tprintf(
            "  mode          PLAN for the device in the profile: only declarative gates apply;\n"
            "                nothing is loaded or self-tested here, library files are not "
            "checked\n");
    size_t n = edgert_candidate_count(ctx);
    if (full) {
        tprintf("\nmanifest folders searched, in order (first name wins):\n");
        if (edgert_search_path_count(ctx) == 0)
            tprintf("  (none besides explicitly named files)\n");
        for (size_t i = 0; i < edgert_search_path_count(ctx); i++) {
            const char *origin = NULL;
            const char *folder = edgert_search_path_at(ctx, i, &origin);
            tprintf("  %zu. %s  [%s]\n", i + 1, folder, origin);
        }
        tprintf("\nmanifests found: %zu\n", n);
    }
    int problems = 0;
    for (size_t i = 0; i < edgert_diag_count(ctx); i++)
        problems |= edgert_diag_at(ctx, i)->level <= EDGERT_LOG_WARN;
    if (problems) {
        tprintf("%sproblems (those files were skipped, the rest were used):\n", full ? "" : "\n");
        print_diags(ctx, stdout, EDGERT_LOG_WARN);
    }
    if (!full) { /* the folders: --explain=full */
        tprintf("\nverdicts of %zu manifests found in %zu folders (gates in the order 'edgert "
                "select --help' lists them%s):\n",
                n, edgert_search_path_count(ctx),
                c->weights ? ", the layout of --weights among them" : "");
        return;
    }
    /* The gate list is literal text, not an argument: tprintf shows a newline
     * inside an argument as "\n". */
    tprintf("\nverdicts (gates: disable list, arch, device class, CPU flags, OS state, ABI,\n"
            "%sstrict mode", c->weights ? "layout of --weights, " : "");
    if (d->planned)
        tprintf("):\n");
    else
        tprintf(", library file (type, who may write it, ELF machine), checksum; then, in a\n"
                "sandboxed first contact: dlopen, entry symbol, ABI answer, init, self-test,\n"
                "the core's arithmetic check):\n");
}

void explain(const cli *c, edgert_ctx *ctx, const edgert_selection *sel)
{
    const edgert_device *d = edgert_device_facts(ctx);
    edgert_priority p = edgert_selection_priority(sel);
    account a = {ctx, p, edgert_selection_count(sel), NULL};
    a.why = calloc(a.n + 1, sizeof *a.why);
    for (size_t r = 0; a.why && r < a.n; r++) {
        a.why[r].struct_size = sizeof a.why[r];
        if (edgert_selection_reason(sel, r, &a.why[r]) != EDGERT_OK)
            a.n = r; /* cannot happen: r is below the count */
    }
    if (!a.why) {
        tprintf("(out of memory)\n");
        return;
    }
    const edgert_candidate *chosen = edgert_selection_selected(sel);
    explain_headline(&a, c->backend && chosen ? chosen->name : NULL);
    explain_setting(c, ctx, d);
    size_t n = edgert_candidate_count(ctx);
    for (size_t i = 0; i < n; i++)
        if (c->explain > 1)
            explain_candidate(edgert_candidate_at(ctx, i), edgert_selection_rank(sel, i));
        else
            explain_candidate_short(edgert_candidate_at(ctx, i), edgert_selection_rank(sel, i));
    if (c->explain < 2)
        explain_not_for_device(ctx);
    /* Evidence notes (info level) matter to a newcomer reading the ranking. */
    if (!d->planned) {
        const char *ev = edgert_evidence_path(ctx), *only = NULL;
        size_t notes = 0;
        for (size_t i = 0; i < edgert_diag_count(ctx); i++) {
            const edgert_diag *g = edgert_diag_at(ctx, i);
            if (g->level == EDGERT_LOG_INFO && g->file && ev && strcmp(g->file, ev) == 0 &&
                ++notes == 1)
                only = g->message;
        }
        /* one short note ("no evidence file yet") beside the path, else a row each */
        if (notes == 1 && strlen(only) <= 24) {
            tprintf("\nevidence measured on this device: %s (%s)\n", ev, only);
        } else {
            tprintf("\nevidence measured on this device: %s\n",
                    ev ? ev : "(no evidence file can be named)");
            for (size_t i = 0; i < edgert_diag_count(ctx); i++) {
                const edgert_diag *g = edgert_diag_at(ctx, i);
                if (g->level == EDGERT_LOG_INFO && g->file && ev && strcmp(g->file, ev) == 0)
                    tprintf("  %s\n", g->message);
            }
        }
    }
    if (c->explain < 2)
        tprintf("\nranking for priority '%s' (its rules: 'edgert select --help'):\n",
                edgert_priority_name(p));
    else
        tprintf("\nranking for priority '%s' (%s):\n", edgert_priority_name(p),
            p == EDGERT_PRIORITY_SPEED
                ? "device-class accelerator, CPU backends, reference last; then decode tok/s "
                  "measured here else declared, where measured rates within each other's rounds "
                  "(calibrate) or calls (first contact) count as one group and prefill decides "
                  "inside it; then fidelity; then name"
                : "device-class accelerator, CPU backends, reference last; then top-1 agreement "
                  "and KL measured here else declared, where measured top-1 agreements within "
                  "two standard errors count as one group and KL decides inside it; then "
                  "activation bits, weight bits; then "
                  "speed; then name");
    explain_decode_source(&a);
    if (a.n == 0)
        tprintf("  (nothing eligible)\n");
    for (size_t r = 0; r < a.n; r++) {
        const edgert_rank_reason *w = &a.why[r];
        const edgert_candidate *k = edgert_candidate_at(ctx, w->candidate);
        char fig[96];
        rank_figure(&a, r, fig, sizeof fig);
        tprintf("  %zu. %-16s %s, %d-bit weights, %d-bit activations, %s\n", r + 1, k->name,
                fig, k->layout.weight_bits, k->layout.activation_bits,
                w->tier == 2   ? "the reference"
                : w->tier == 0 ? "accelerator of this device class"
                               : "CPU backend");
        explain_decode_group(&a, r);
        explain_fidelity_group(&a, r);
    }
    free(a.why);
    tprintf("\n");
}
