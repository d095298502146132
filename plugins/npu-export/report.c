/*
 * plugins/npu-export/report.c — what the export measured, in words and
 * numbers, written into out_dir last:
 *
 *   encodings.json    the calibrated encodings as quantization overrides for
 *                     Qualcomm's converters (AIMET layout: activation_encodings
 *                     and param_encodings, name -> list of {bitwidth, dtype,
 *                     is_symmetric, min, max, scale, offset}, one entry per
 *                     output channel for weights; offset = -zero_point, so
 *                     real = scale * (q + offset) with q unsigned).
 *   report.json, report.txt   SQNR per projection and end to end for the
 *                     exported scheme and for every scheme it refuses,
 *                     computed by one simulator (simulate.c on quant_sim.c).
 *
 * and, when the request is refused, the refusal message (ne_refusal): the
 * same figures and the device's.
 *
 * SQNR = 10 log10(sum y_fp32^2 / sum (y - y_fp32)^2), twice: over the
 * calibration samples the ranges were taken from ("in-sample": no value
 * lies beyond them) and over the held-out ones (the last quarter of each
 * projection's samples, which the ranges never saw: what a device meets,
 * and what the device's own 36.9 dB was measured on). End to end = the
 * same ratio over every output of every projection (energy-weighted; there
 * is no chained model here). Flags and refusal figures use the held-out
 * figure when there is one.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats/json_string.h"
#include "ne.h"

#define NE_FLAG_DB 10.0

/* The schemes table's rows, in order. */
static const int table_cfgs[] = {CFG_W8A16, CFG_W8A8, CFG_W8A8_PCT, CFG_W8A16_UNCAL, CFG_W4A16,
                                 CFG_W4A16_UNCAL, CFG_EXPORTED};
#define NTABLE ((int)(sizeof table_cfgs / sizeof table_cfgs[0]))

static void jstr(FILE *f, const char *s)
{
    json_write_string(f, s);
}

static double db(double sig, double noise)
{
    if (noise <= 0.0)
        return 200.0;
    if (sig <= 0.0)
        return -200.0;
    double v = 10.0 * log10(sig / noise);
    return v > 200.0 ? 200.0 : v;
}

typedef struct agg {
    double e2e, min;
    size_t min_at, flagged;
} agg;

/* Whether the run held samples out (enough samples: NE_MIN_HOLDOUT_T). */
static int has_ho(const ne_run *r)
{
    return r->tc < r->t;
}

/* Projection p's SQNR for configuration c, in-sample (ho 0) or held out (1). */
static double proj_db(const ne_proj *p, int c, int ho)
{
    return ho ? db(p->sig_ho, p->noise_ho[c]) : db(p->sig, p->noise[c]);
}

/* The figure that flags and refusals go by: held out when there is one. */
static int judged(const ne_run *r)
{
    return has_ho(r);
}

static agg aggregate(const ne_run *r, int c, int ho)
{
    agg a = {0, INFINITY, 0, 0};
    double s = 0.0, e = 0.0;
    for (size_t i = 0; i < r->np; i++) {
        s += ho ? r->p[i].sig_ho : r->p[i].sig;
        e += ho ? r->p[i].noise_ho[c] : r->p[i].noise[c];
        double d = proj_db(&r->p[i], c, ho);
        if (d < a.min) {
            a.min = d;
            a.min_at = i;
        }
        a.flagged += d < NE_FLAG_DB;
    }
    a.e2e = db(s, e);
    return a;
}

static const char *range_text(ne_range g, char *buf, size_t len)
{
    if (g.kind == NE_RANGE_MINMAX)
        snprintf(buf, len, "minmax");
    else if (g.kind == NE_RANGE_FIXED)
        snprintf(buf, len, "fixed [-1, 1] (uncalibrated)");
    else
        snprintf(buf, len, "percentile:%g", g.pct);
    return buf;
}

/* Whether configuration c is one that an export refuses unless forced. */
static int cfg_refused(const ne_run *r, int c)
{
    return c == CFG_W8A8 || c == CFG_W8A8_PCT || c == CFG_W8A16_UNCAL || c == CFG_W4A16 ||
           c == CFG_W4A16_UNCAL || (c == CFG_W8A16 && r->cfg[c].ranges.kind == NE_RANGE_FIXED);
}

void ne_flag_warnings(ne_run *r)
{
    for (size_t i = 0; i < r->np; i++) {
        double d = proj_db(&r->p[i], CFG_EXPORTED, judged(r));
        if (d < NE_FLAG_DB)
            edgert_errf(ne_warning(r), NE_WARN_LEN, "projection %s: exported arithmetic measured "
                        "%.2f dB SQNR (%s), below %.0f dB", r->p[i].name, d,
                        judged(r) ? "held out" : "in-sample", NE_FLAG_DB);
    }
}

/* ---- encodings.json ----------------------------------------------------------- */

static void activation_encodings(FILE *f, const ne_run *r)
{
    int first = 1;
    for (size_t i = 0; i < r->np; i++) {
        const ne_proj *p = &r->p[i];
        const ne_aq *qs[2] = {&p->xq, &p->yq};
        for (int a = 0; a < 2; a++) {
            char name[4200];
            snprintf(name, sizeof name, "%s.%s", p->name, a ? "y" : "x");
            fprintf(f, "%s\n    ", first ? "" : ",");
            first = 0;
            jstr(f, name);
            fprintf(f, ": [{\"bitwidth\": %d, \"dtype\": \"int\", \"is_symmetric\": \"False\", "
                       "\"min\": %.9g, \"max\": %.9g, \"scale\": %.9g, \"offset\": %d}]",
                    p->abits, (double)((float)(-qs[a]->zp) * qs[a]->scale),
                    (double)((float)(qs[a]->qmax - qs[a]->zp) * qs[a]->scale),
                    (double)qs[a]->scale, -qs[a]->zp);
        }
    }
}

static void param_encodings(FILE *f, const ne_run *r)
{
    for (size_t i = 0; i < r->np; i++) {
        const ne_proj *p = &r->p[i];
        char name[4200];
        int half = 1 << (p->wbits - 1); /* 128 or 8: unsigned q = signed q + half */
        snprintf(name, sizeof name, "%s.weight", p->name);
        fprintf(f, "%s\n    ", i ? "," : "");
        jstr(f, name);
        fprintf(f, ": [");
        for (uint32_t c = 0; c < p->n; c++) {
            float s = p->wscale[c];
            fprintf(f, "%s{\"bitwidth\": %d, \"dtype\": \"int\", \"is_symmetric\": \"True\", "
                       "\"min\": %.9g, \"max\": %.9g, \"scale\": %.9g, \"offset\": %d}",
                    c ? ", " : "", p->wbits, (double)(-(float)half * s),
                    (double)((float)(half - 1) * s), (double)s, -half);
        }
        fprintf(f, "]");
    }
}

int ne_write_encodings(const ne_run *r, char *err, size_t len)
{
    char *path = ne_out_path(r, "encodings.json");
    FILE *f = path ? fopen(path, "w") : NULL;
    if (!f) {
        edgert_errf(err, len, "%s: cannot create: %s", path ? path : "encodings.json",
                    strerror(errno));
        free(path);
        return -1;
    }
    fprintf(f, "{\n  \"version\": \"0.6.1\",\n  \"activation_encodings\": {");
    activation_encodings(f, r);
    fprintf(f, "\n  },\n  \"param_encodings\": {");
    param_encodings(f, r);
    fprintf(f, "\n  }\n}\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        edgert_errf(err, len, "%s: write failed: %s", path, strerror(errno));
        free(path);
        return -1;
    }
    free(path);
    return 0;
}

/* ---- report.json -------------------------------------------------------------- */

/* Everything before the schemes table: the request, the files, the head rule,
 * the device's figures and the warnings. */
static void json_head(FILE *f, const ne_run *r)
{
    const ne_req *q = r->q;
    fprintf(f, "{\n  \"" EDGERT_EXPORT_REPORT_MARKER "\": 1,\n"
               "  \"format\": \"edgert-npu-export-report\",\n"
               "  \"format_version\": 1,\n");
    fprintf(f, "  \"plugin\": \"" NE_NAME " " NE_VERSION "\",\n  \"scheme\": \"%s\",\n",
            ne_scheme_names[q->scheme]);
    fprintf(f, "  \"ranges\": ");
    jstr(f, q->ranges_text);
    fprintf(f, ",\n  \"forced\": %s,\n  \"weights\": ", q->force ? "true" : "false");
    jstr(f, q->weights);
    fprintf(f, ",\n  \"calibration\": ");
    jstr(f, q->calibration);
    fprintf(f, ",\n  \"tokens\": %u,\n  \"calibration_tokens\": %u,\n  \"held_out_tokens\": "
               "%u,\n  \"held_out\": \"the last floor(T/4) of each projection's T samples "
               "(T >= %u); ranges come from the others; sqnr_db is in-sample, "
               "sqnr_held_out_db held out\",\n  \"projection_count\": %zu,\n",
            r->t, r->tc, r->t - r->tc, NE_MIN_HOLDOUT_T, r->np);
    fprintf(f, "  \"files\": {\"model\": \"model.onnx\", \"external_data\": %s, "
               "\"encodings\": \"encodings.json\", \"golden\": %s},\n",
            r->ext_used ? "\"model.onnx.data\"" : "null", q->golden ? "\"golden\"" : "null");
    fprintf(f, "  \"onnx\": {\"ir_version\": 10, \"opset\": 21, \"rows\": %u, \"form\": \"QDQ: "
               "x [rows][K] -Q-DQ-> MatMul(x, DQ(W^T int, per-channel axis 1)) -Q-DQ-> y "
               "[rows][N]\"},\n",
            q->rows);
    fprintf(f, "  \"head\": ");
    const ne_proj *hp = NULL;
    for (size_t i = 0; i < r->np; i++)
        if (r->p[i].head)
            hp = &r->p[i];
    if (hp) {
        fprintf(f, "{\"name\": ");
        jstr(f, hp->name);
        fprintf(f, ", \"weight_bits\": %d, \"activation_bits\": %d, \"rule\": \"the output head "
                   "is exported at the same or higher precision than the scheme, never "
                   "lower\"},\n", hp->wbits, hp->abits);
    } else {
        fprintf(f, "null,\n");
    }
    fprintf(f, "  \"flag_below_db\": %.1f,\n", NE_FLAG_DB);
    fprintf(f, "  \"device_reference\": {\"w8a16_calibrated_db\": %.1f, \"int8_activations_db\": "
               "%.1f, \"w4a16_uncalibrated_db\": %.1f, \"source\": \"docs/architecture.md, "
               "measured on a phone NPU\"},\n", DEV_W8A16_DB, DEV_A8_DB, DEV_W4A16_UNCAL_DB);
    fprintf(f, "  \"warnings\": [");
    for (int i = 0; i < r->nwarn; i++) {
        fprintf(f, "%s", i ? ", " : "");
        jstr(f, r->warnings[i]);
    }
    fprintf(f, "],\n");
}

static void json_schemes(FILE *f, const ne_run *r)
{
    char rb[64];
    fprintf(f, "  \"schemes\": [\n");
    for (int ci = 0; ci < NTABLE; ci++) {
        int c = table_cfgs[ci];
        agg a = aggregate(r, c, 0), h = aggregate(r, c, 1);
        const ne_cfg *g = &r->cfg[c];
        fprintf(f, "    {\"name\": \"%s\", \"weight_bits\": %d, \"activation_bits\": %d, "
                   "\"ranges\": \"%s\", \"refused_unless_forced\": %s, \"end_to_end_db\": %.3f, "
                   "\"min_db\": %.3f, \"min_projection\": ",
                g->name, g->wbits, g->abits, range_text(g->ranges, rb, sizeof rb),
                cfg_refused(r, c) ? "true" : "false", a.e2e, a.min);
        jstr(f, r->p[a.min_at].name);
        if (has_ho(r)) {
            fprintf(f, ", \"held_out_end_to_end_db\": %.3f, \"held_out_min_db\": %.3f, "
                       "\"held_out_min_projection\": ", h.e2e, h.min);
            jstr(f, r->p[h.min_at].name);
        } else {
            fprintf(f, ", \"held_out_end_to_end_db\": null, \"held_out_min_db\": null, "
                       "\"held_out_min_projection\": null");
        }
        fprintf(f, ", \"projections_below_flag\": %zu, \"description\": \"%s\"}%s\n",
                judged(r) ? h.flagged : a.flagged, g->what, ci + 1 < NTABLE ? "," : "");
    }
    fprintf(f, "  ],\n");
}

static void json_projection(FILE *f, const ne_run *r, const ne_proj *p, int last)
{
    fprintf(f, "    {\"name\": ");
    jstr(f, p->name);
    fprintf(f, ", \"k\": %u, \"n\": %u, \"head\": %s, \"weight_bits\": %d, \"activation_bits\": "
               "%d,\n     \"x_range\": [%.9g, %.9g], \"y_range\": [%.9g, %.9g],\n     "
               "\"x_scale\": %.9g, \"x_zero_point\": %d, \"y_scale\": %.9g, "
               "\"y_zero_point\": %d,\n     \"input\": ",
            p->k, p->n, p->head ? "true" : "false", p->wbits, p->abits, (double)p->xq.lo,
            (double)p->xq.hi, (double)p->yq.lo, (double)p->yq.hi, (double)p->xq.scale,
            p->xq.zp, (double)p->yq.scale, p->yq.zp);
    char io[4200];
    snprintf(io, sizeof io, "%s.x", p->name);
    jstr(f, io);
    fprintf(f, ", \"output\": ");
    snprintf(io, sizeof io, "%s.y", p->name);
    jstr(f, io);
    for (int ho = 0; ho < 2; ho++) {
        fprintf(f, ",\n     \"%s\": ", ho ? "sqnr_held_out_db" : "sqnr_db");
        if (ho && !has_ho(r)) {
            fprintf(f, "null");
            continue;
        }
        for (int ci = 0; ci < NTABLE; ci++) {
            int c = table_cfgs[ci];
            fprintf(f, "%s\"%s\": %.3f", ci ? ", " : "{", r->cfg[c].name, proj_db(p, c, ho));
        }
        fprintf(f, "}");
    }
    fprintf(f, ",\n     \"below_flag\": [");
    int nflag = 0;
    for (int ci = 0; ci < NTABLE; ci++) {
        int c = table_cfgs[ci];
        if (proj_db(p, c, judged(r)) < NE_FLAG_DB)
            fprintf(f, "%s\"%s\"", nflag++ ? ", " : "", r->cfg[c].name);
    }
    fprintf(f, "]");
    if (r->q->golden)
        fprintf(f, ",\n     \"golden\": {\"x\": \"%s\", \"y_sim\": \"%s\", \"y_fp32\": \"%s\"}",
                p->golden[0], p->golden[1], p->golden[2]);
    fprintf(f, "}%s\n", last ? "" : ",");
}

static void report_json(FILE *f, const ne_run *r)
{
    json_head(f, r);
    json_schemes(f, r);
    fprintf(f, "  \"projections\": [\n");
    for (size_t i = 0; i < r->np; i++)
        json_projection(f, r, &r->p[i], i + 1 == r->np);
    fprintf(f, "  ]\n}\n");
}

/* ---- report.txt --------------------------------------------------------------- */

/* One per-projection table of report.txt: in-sample (ho 0) or held out. */
static void txt_projections(FILE *t, const ne_run *r, int ho)
{
    fprintf(t, "\nper projection, %s (dB):\n  %-24s %6s %6s",
            ho ? "held out (samples the ranges never saw)" : "in-sample (the calibration samples)",
            "projection", "K", "N");
    for (int ci = 0; ci < NTABLE; ci++)
        fprintf(t, " %9.9s", r->cfg[table_cfgs[ci]].name);
    fprintf(t, "\n");
    for (size_t i = 0; i < r->np; i++) {
        const ne_proj *p = &r->p[i];
        fprintf(t, "  %-24.24s %6u %6u", p->name, p->k, p->n);
        for (int ci = 0; ci < NTABLE; ci++) {
            double d = proj_db(p, table_cfgs[ci], ho);
            fprintf(t, " %8.2f%s", d, d < NE_FLAG_DB ? "!" : " ");
        }
        fprintf(t, "\n");
    }
}

static void report_txt(FILE *t, const ne_run *r)
{
    const ne_req *q = r->q;
    const int ho = has_ho(r);
    fprintf(t, "npu-export report: scheme %s, ranges %s%s, %zu projections, %u samples per "
               "projection: %u calibrate the ranges, %u held out (the last quarter)\n\n",
            ne_scheme_names[q->scheme], q->ranges_text, q->force ? " (forced)" : "", r->np, r->t,
            r->tc, r->t - r->tc);
    fprintf(t, "SQNR vs fp32 (dB)        in-sample   held out  worst held out (projection)   "
               "below %.0f dB\n", NE_FLAG_DB);
    for (int ci = 0; ci < NTABLE; ci++) {
        int c = table_cfgs[ci];
        agg a = aggregate(r, c, 0), h = aggregate(r, c, ho);
        char label[40], hv[16] = "      -";
        snprintf(label, sizeof label, "%s%s", r->cfg[c].name, c == CFG_EXPORTED ? " *" : "");
        if (ho)
            snprintf(hv, sizeof hv, "%9.2f", h.e2e);
        fprintf(t, "  %-22s %9.2f  %9s  %7.2f  %-20.20s %4zu%s\n", label, a.e2e, hv, h.min,
                r->p[h.min_at].name, h.flagged,
                cfg_refused(r, c) ? "   refused unless --force" : "");
    }
    fprintf(t, "\n* exported (head protected). in-sample: over the samples the ranges were "
               "taken from; held out: over the others, as a device sees%s. Device "
               "(docs/architecture.md, measured on device): calibrated w8a16 %.1f dB, int8 "
               "activations %.1f dB, uncalibrated w4a16 %.1f dB.\n",
            ho ? "" : " (none here: too few samples; worst and flags are in-sample)",
            DEV_W8A16_DB, DEV_A8_DB, DEV_W4A16_UNCAL_DB);
    txt_projections(t, r, 0);
    if (ho)
        txt_projections(t, r, 1);
    fprintf(t, "\n! below %.0f dB\n", NE_FLAG_DB);
    for (int i = 0; i < r->nwarn; i++)
        fprintf(t, "warning: %s\n", r->warnings[i]);
}

int ne_write_reports(const ne_run *r, char *err, size_t len)
{
    char *jp = ne_out_path(r, "report.json"), *tp = ne_out_path(r, "report.txt");
    FILE *f = jp ? fopen(jp, "w") : NULL, *t = tp ? fopen(tp, "w") : NULL;
    int rc = -1;
    if (!f || !t) {
        edgert_errf(err, len, "%s: cannot create report.json / report.txt: %s", r->out_dir,
                    strerror(errno));
        goto out;
    }
    report_json(f, r);
    report_txt(t, r);
    int bad = ferror(f) || ferror(t);
    rc = 0;
    if (fclose(f) != 0 || bad)
        rc = -1;
    f = NULL;
    if (fclose(t) != 0)
        rc = -1;
    t = NULL;
    if (rc)
        edgert_errf(err, len, "%s: writing the report failed: %s", r->out_dir, strerror(errno));
out:
    if (f)
        fclose(f);
    if (t)
        fclose(t);
    free(jp);
    free(tp);
    return rc;
}

/* ---- the refusal -------------------------------------------------------------- */

void ne_refusal(const ne_run *r, char *err, size_t len)
{
    const ne_req *q = r->q;
    const int ho = judged(r); /* held-out figures when there are */
    agg ok = aggregate(r, CFG_W8A16, ho), ex = aggregate(r, CFG_EXPORTED, ho);
    char rb[64];
    if (q->scheme == SCHEME_W8A8) {
        agg p = aggregate(r, CFG_W8A8_PCT, ho);
        edgert_errf(err, len,
                    "scheme w8a8 refused: 8-bit activations measured %.1f dB SQNR end to end on "
                    "this calibration set's %s samples (worst projection %s: %.1f dB; with "
                    "percentile:99.99 "
                    "ranges %.1f dB), against %.1f dB for calibrated w8a16. Per-tensor 8-bit "
                    "ranges are sized by the outlier channels, so ordinary channels keep only a "
                    "few codes. On the phone NPU int8 activations broke the model (%.1f dB vs "
                    "%.1f dB for calibrated w8a16; docs/architecture.md). Pass force=1 (edgert "
                    "export --force) to export it anyway.",
                    ex.e2e, ho ? "held-out" : "calibration", r->p[ex.min_at].name, ex.min, p.e2e,
                    ok.e2e, DEV_A8_DB, DEV_W8A16_DB);
    } else if (q->scheme == SCHEME_W4A16) {
        agg u = aggregate(r, CFG_W4A16_UNCAL, ho);
        edgert_errf(err, len,
                    "scheme w4a16 refused: int4 weights (per output channel) measured %.1f dB "
                    "SQNR end to end here (%s; worst projection %s: %.1f dB; with uncalibrated "
                    "ranges "
                    "%.1f dB), against %.1f dB for calibrated w8a16. On the phone, 4-bit weights "
                    "failed the converter on the calibrated path, uncalibrated w4a16 scored %.1f "
                    "dB, and 4-bit weights saved memory, not time (0.917 vs 0.912 ms per layer; "
                    "docs/architecture.md). Pass force=1 (edgert export --force) to export it "
                    "anyway.",
                    ex.e2e, ho ? "held out" : "in-sample", r->p[ex.min_at].name, ex.min, u.e2e,
                    ok.e2e, DEV_W4A16_UNCAL_DB);
    } else {
        edgert_errf(err, len,
                    "uncalibrated ranges (%s) refused: they measured %.1f dB SQNR end to end here "
                    "(worst projection %s: %.1f dB) against calibrated ranges, which the "
                    "report shows for w8a16; activations beyond [-1, 1] (the outlier channels) "
                    "are clipped. On the phone, uncalibrated w4a16 scored %.1f dB against %.1f dB "
                    "for calibrated w8a16 (docs/architecture.md). Pass force=1 (edgert export "
                    "--force) to export it anyway.",
                    range_text(q->ranges, rb, sizeof rb), ex.e2e, r->p[ex.min_at].name, ex.min,
                    DEV_W4A16_UNCAL_DB, DEV_W8A16_DB);
    }
}
