/*
 * plugins/npu-export/npu_export.c — export a calibrated w8a16 QDQ graph for a
 * phone NPU runtime, refuse the exports that do not work there, and measure
 * why (design.md §1: on device, calibrated w8a16 36.9 dB SQNR; int8
 * activations 5.1 dB; uncalibrated w4a16 -1.6 dB; 4-bit weights failed the
 * converter on the calibrated path and saved memory, not time).
 *
 * Capability EXPORT only (no GEMM). The host calls export_graph(out_dir,
 * request) with request lines `key=value` (request.c: weights=, calibration=,
 * scheme=, ranges=, force=, head=, golden=).
 *
 * Output in out_dir (which the host created):
 *   model.onnx        ONNX, IR 10, opset 21. One graph input "<proj>.x"
 *                     [T][K] and output "<proj>.y" [T][N] per projection (a
 *                     projection bank; edgert has no attention):
 *                       x -Q(u16)-DQ-> MatMul(., DQ(int8 [K][N], per-channel
 *                       scale [N], axis 1)) -Q(u16)-DQ-> y
 *                     MatMul with weights stored transposed [K][N] and
 *                     per-channel DequantizeLinear on axis 1 is the QDQ form
 *                     ONNX Runtime's QNN EP documents for w8a16 MatMul
 *                     (Gemm transB would put the channel on axis 0 of a
 *                     transposed operand, which QDQ tooling handles less
 *                     uniformly). The output is quantized too, as the NPU
 *                     computes it: a fully quantized op stays on the NPU.
 *   model.onnx.data   initializers of 1 MiB or more (ONNX external data,
 *                     offsets aligned to 4096): spark-1.7b's 1.7 GB of int8
 *                     weights would not fit protobuf's 2 GB message limit.
 *   encodings.json    the calibrated encodings as quantization overrides for
 *                     Qualcomm's converters (AIMET layout: activation_encodings
 *                     and param_encodings, name -> list of {bitwidth, dtype,
 *                     is_symmetric, min, max, scale, offset}, one entry per
 *                     output channel for weights; offset = -zero_point, so
 *                     real = scale * (q + offset) with q unsigned).
 *   report.json, report.txt   SQNR per projection and end to end for the
 *                     exported scheme and for every scheme it refuses,
 *                     computed by one simulator (quant_sim.c).
 *
 * SQNR = 10 log10(sum y_fp32^2 / sum (y - y_fp32)^2) over the calibration
 * samples (in-sample: the ranges were taken from the same samples, so no
 * value lies beyond them). End to end = the same ratio over every output of
 * every projection (energy-weighted; there is no chained model here).
 *
 * No global mutable state: an instance holds only its host table.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ne.h"

#define NE_FLAG_DB 10.0

typedef struct ne_state {
    const edgert_host *host;
} ne_state;

/* ---- per projection ------------------------------------------------------------ */

char *ne_warning(ne_run *r)
{
    return r->nwarn < NE_MAX_WARN ? r->warnings[r->nwarn++] : NULL;
}

char *ne_out_path(const ne_run *r, const char *rel)
{
    size_t a = strlen(r->out_dir), b = strlen(rel);
    char *p = malloc(a + b + 2);
    if (p) {
        memcpy(p, r->out_dir, a);
        p[a] = '/';
        memcpy(p + a + 1, rel, b + 1);
    }
    return p;
}

/* Quantize, simulate every configuration and (unless refused) emit one projection. */
static int do_projection(ne_run *r, size_t pi, char *err, size_t len)
{
    ne_proj *p = &r->p[pi];
    ne_work wk;
    int rc = -1;
    if (ne_work_alloc(r, p, &wk, err, len) || ne_read_projection(r, p, wk.w, wk.x, err, len) ||
        ne_simulate(r, p, &wk, err, len))
        goto out;
    if (!r->refused && (ne_emit_projection(r, p, &wk, err, len) ||
                        (r->q->golden && ne_write_golden(r, pi, p, &wk, err, len))))
        goto out;
    rc = 0;
out:
    ne_work_free(&wk);
    return rc;
}

/* ---- report, encodings ---------------------------------------------------------- */

static void jstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
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

static agg aggregate(const ne_run *r, int c)
{
    agg a = {0, INFINITY, 0, 0};
    double s = 0.0, e = 0.0;
    for (size_t i = 0; i < r->np; i++) {
        s += r->p[i].sig;
        e += r->p[i].noise[c];
        double d = db(r->p[i].sig, r->p[i].noise[c]);
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

static int write_encodings(ne_run *r, char *err, size_t len)
{
    char *path = ne_out_path(r, "encodings.json");
    FILE *f = path ? fopen(path, "w") : NULL;
    if (!f) {
        edgert_errf(err, len, "%s: cannot create: %s", path ? path : "encodings.json", strerror(errno));
        free(path);
        return -1;
    }
    fprintf(f, "{\n  \"version\": \"0.6.1\",\n  \"activation_encodings\": {");
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
    fprintf(f, "\n  },\n  \"param_encodings\": {");
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

static const int table_cfgs[] = {CFG_W8A16, CFG_W8A8, CFG_W8A8_PCT, CFG_W8A16_UNCAL, CFG_W4A16,
                                 CFG_W4A16_UNCAL, CFG_EXPORTED};
#define NTABLE ((int)(sizeof table_cfgs / sizeof table_cfgs[0]))

static int write_reports(ne_run *r, char *err, size_t len)
{
    char *jp = ne_out_path(r, "report.json"), *tp = ne_out_path(r, "report.txt");
    FILE *f = jp ? fopen(jp, "w") : NULL, *t = tp ? fopen(tp, "w") : NULL;
    int rc = -1;
    char rb[64];
    if (!f || !t) {
        edgert_errf(err, len, "%s: cannot create report.json / report.txt: %s", r->out_dir,
                    strerror(errno));
        goto out;
    }
    const ne_req *q = r->q;
    fprintf(f, "{\n  \"format\": \"edgert-npu-export-report\",\n  \"format_version\": 1,\n");
    fprintf(f, "  \"plugin\": \"" NE_NAME " " NE_VERSION "\",\n  \"scheme\": \"%s\",\n",
            ne_scheme_names[q->scheme]);
    fprintf(f, "  \"ranges\": ");
    jstr(f, q->ranges_text);
    fprintf(f, ",\n  \"forced\": %s,\n  \"weights\": ", q->force ? "true" : "false");
    jstr(f, q->weights);
    fprintf(f, ",\n  \"calibration\": ");
    jstr(f, q->calibration);
    fprintf(f, ",\n  \"tokens\": %u,\n  \"projection_count\": %zu,\n", r->t, r->np);
    fprintf(f, "  \"files\": {\"model\": \"model.onnx\", \"external_data\": %s, "
               "\"encodings\": \"encodings.json\", \"golden\": %s},\n",
            r->ext_used ? "\"model.onnx.data\"" : "null", q->golden ? "\"golden\"" : "null");
    fprintf(f, "  \"onnx\": {\"ir_version\": 10, \"opset\": 21, \"form\": \"QDQ: x -Q-DQ-> "
               "MatMul(x, DQ(W^T int, per-channel axis 1)) -Q-DQ-> y\"},\n");
    fprintf(f, "  \"head\": ");
    const ne_proj *hp = NULL;
    for (size_t i = 0; i < r->np; i++)
        if (r->p[i].head)
            hp = &r->p[i];
    if (hp) {
        fprintf(f, "{\"name\": ");
        jstr(f, hp->name);
        fprintf(f, ", \"weight_bits\": %d, \"activation_bits\": %d, \"rule\": \"the output head "
                   "is exported at the same or higher precision than the scheme, never lower\"},\n",
                hp->wbits, hp->abits);
    } else {
        fprintf(f, "null,\n");
    }
    fprintf(f, "  \"flag_below_db\": %.1f,\n", NE_FLAG_DB);
    fprintf(f, "  \"device_reference\": {\"w8a16_calibrated_db\": %.1f, \"int8_activations_db\": "
               "%.1f, \"w4a16_uncalibrated_db\": %.1f, \"source\": \"design.md section 1, measured "
               "on a phone NPU\"},\n", DEV_W8A16_DB, DEV_A8_DB, DEV_W4A16_UNCAL_DB);
    fprintf(f, "  \"warnings\": [");
    for (int i = 0; i < r->nwarn; i++) {
        fprintf(f, "%s", i ? ", " : "");
        jstr(f, r->warnings[i]);
    }
    fprintf(f, "],\n  \"schemes\": [\n");
    fprintf(t, "npu-export report: scheme %s, ranges %s%s, %zu projections, %u calibration "
               "tokens\n\n", ne_scheme_names[q->scheme], q->ranges_text, q->force ? " (forced)" : "",
            r->np, r->t);
    fprintf(t, "SQNR vs fp32 (dB)        end-to-end   worst  (projection)            below %.0f dB\n",
            NE_FLAG_DB);
    for (int ci = 0; ci < NTABLE; ci++) {
        int c = table_cfgs[ci];
        agg a = aggregate(r, c);
        const ne_cfg *g = &r->cfg[c];
        int refused = c == CFG_W8A8 || c == CFG_W8A8_PCT || c == CFG_W8A16_UNCAL ||
                      c == CFG_W4A16 || c == CFG_W4A16_UNCAL ||
                      (c == CFG_W8A16 && g->ranges.kind == NE_RANGE_FIXED);
        fprintf(f, "    {\"name\": \"%s\", \"weight_bits\": %d, \"activation_bits\": %d, "
                   "\"ranges\": \"%s\", \"refused_unless_forced\": %s, \"end_to_end_db\": %.3f, "
                   "\"min_db\": %.3f, \"min_projection\": ",
                g->name, c == CFG_EXPORTED ? (q->scheme == SCHEME_W4A16 ? 4 : 8) : g->wbits,
                c == CFG_EXPORTED ? (q->scheme == SCHEME_W8A8 ? 8 : 16) : g->abits,
                range_text(g->ranges, rb, sizeof rb),
                c == CFG_EXPORTED ? "false" : refused ? "true" : "false", a.e2e, a.min);
        jstr(f, r->p[a.min_at].name);
        fprintf(f, ", \"projections_below_flag\": %zu, \"description\": \"%s\"}%s\n", a.flagged,
                g->what, ci + 1 < NTABLE ? "," : "");
        char label[40];
        snprintf(label, sizeof label, "%s%s", g->name, c == CFG_EXPORTED ? " *" : "");
        fprintf(t, "  %-22s %10.2f %7.2f  %-24.24s %4zu%s\n", label, a.e2e, a.min,
                r->p[a.min_at].name, a.flagged, refused ? "   refused unless --force" : "");
    }
    fprintf(f, "  ],\n  \"projections\": [\n");
    fprintf(t, "\n* exported (head protected). Device (design.md section 1): calibrated w8a16 "
               "%.1f dB, int8 activations %.1f dB, uncalibrated w4a16 %.1f dB.\n",
            DEV_W8A16_DB, DEV_A8_DB, DEV_W4A16_UNCAL_DB);
    fprintf(t, "\nper projection (dB):\n  %-24s %6s %6s", "projection", "K", "N");
    for (int ci = 0; ci < NTABLE; ci++)
        fprintf(t, " %9.9s", r->cfg[table_cfgs[ci]].name);
    fprintf(t, "\n");
    for (size_t i = 0; i < r->np; i++) {
        const ne_proj *p = &r->p[i];
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
        fprintf(f, ",\n     \"sqnr_db\": {");
        fprintf(t, "  %-24.24s %6u %6u", p->name, p->k, p->n);
        int nflag = 0;
        for (int ci = 0; ci < NTABLE; ci++) {
            int c = table_cfgs[ci];
            double d = db(p->sig, p->noise[c]);
            nflag += d < NE_FLAG_DB;
            fprintf(f, "%s\"%s\": %.3f", ci ? ", " : "", r->cfg[c].name, d);
            fprintf(t, " %8.2f%s", d, d < NE_FLAG_DB ? "!" : " ");
        }
        fprintf(f, "},\n     \"below_flag\": [");
        nflag = 0;
        for (int ci = 0; ci < NTABLE; ci++) {
            int c = table_cfgs[ci];
            if (db(p->sig, p->noise[c]) < NE_FLAG_DB)
                fprintf(f, "%s\"%s\"", nflag++ ? ", " : "", r->cfg[c].name);
        }
        fprintf(f, "]");
        if (q->golden)
            fprintf(f, ",\n     \"golden\": {\"x\": \"%s\", \"y_sim\": \"%s\", \"y_fp32\": \"%s\"}",
                    p->golden[0], p->golden[1], p->golden[2]);
        fprintf(f, "}%s\n", i + 1 < r->np ? "," : "");
        fprintf(t, "\n");
    }
    fprintf(f, "  ]\n}\n");
    fprintf(t, "\n! below %.0f dB\n", NE_FLAG_DB);
    for (int i = 0; i < r->nwarn; i++)
        fprintf(t, "warning: %s\n", r->warnings[i]);
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

/* The refusal text: the device's figures and this run's. */
static void refusal(ne_run *r, char *err, size_t len)
{
    const ne_req *q = r->q;
    agg ok = aggregate(r, CFG_W8A16), ex = aggregate(r, CFG_EXPORTED);
    char rb[64];
    if (q->scheme == SCHEME_W8A8) {
        agg p = aggregate(r, CFG_W8A8_PCT);
        edgert_errf(err, len,
                    "scheme w8a8 refused: 8-bit activations measured %.1f dB SQNR end to end on this "
                    "calibration set (worst projection %s: %.1f dB; with percentile:99.99 ranges %.1f "
                    "dB), against %.1f dB for calibrated w8a16. Per-tensor 8-bit ranges are sized by "
                    "the outlier channels, so ordinary channels keep only a few codes. On the phone NPU "
                    "int8 activations broke the model (%.1f dB vs %.1f dB for calibrated w8a16; "
                    "design.md section 1). Pass force=1 (edgert export --force) to export it anyway.",
                    ex.e2e, r->p[ex.min_at].name, ex.min, p.e2e, ok.e2e, DEV_A8_DB, DEV_W8A16_DB);
    } else if (q->scheme == SCHEME_W4A16) {
        agg u = aggregate(r, CFG_W4A16_UNCAL);
        edgert_errf(err, len,
                    "scheme w4a16 refused: int4 weights (per output channel) measured %.1f dB SQNR end "
                    "to end here (worst projection %s: %.1f dB; with uncalibrated ranges %.1f dB), "
                    "against %.1f dB for calibrated w8a16. On the phone, 4-bit weights failed the "
                    "converter on the calibrated path, uncalibrated w4a16 scored %.1f dB, and 4-bit "
                    "weights saved memory, not time (0.917 vs 0.912 ms per layer; design.md section "
                    "1). Pass force=1 (edgert export --force) to export it anyway.",
                    ex.e2e, r->p[ex.min_at].name, ex.min, u.e2e, ok.e2e, DEV_W4A16_UNCAL_DB);
    } else {
        agg c = aggregate(r, CFG_W8A16);
        (void)c;
        edgert_errf(err, len,
                    "uncalibrated ranges (%s) refused: they measured %.1f dB SQNR end to end here "
                    "(worst projection %s: %.1f dB) against calibrated minmax ranges, which the "
                    "report shows for w8a16; activations beyond [-1, 1] (the outlier channels) are "
                    "clipped. On the phone, uncalibrated w4a16 scored %.1f dB against %.1f dB for "
                    "calibrated w8a16 (design.md section 1). Pass force=1 (edgert export --force) to "
                    "export it anyway.",
                    range_text(q->ranges, rb, sizeof rb), ex.e2e, r->p[ex.min_at].name, ex.min,
                    DEV_W4A16_UNCAL_DB, DEV_W8A16_DB);
    }
}

static edgert_status ne_export(void *state, const char *out_dir, const char *request, char *err,
                               size_t err_len)
{
    ne_state *st = state;
    ne_req q;
    ne_run r;
    memset(&r, 0, sizeof r);
    if (!st || !out_dir) {
        edgert_errf(err, err_len, NE_NAME ": export: state or out_dir is NULL");
        return EDGERT_E_USAGE;
    }
    edgert_status rc = ne_parse_request(request, &q, err, err_len);
    if (rc != EDGERT_OK)
        goto out;
    r.host = st->host;
    r.q = &q;
    r.out_dir = out_dir;
    ne_make_cfgs(&q, r.cfg);
    int refused_scheme = q.scheme != SCHEME_W8A16 || q.ranges.kind == NE_RANGE_FIXED;
    r.refused = refused_scheme && !q.force;
    struct stat sb;
    if (stat(out_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        edgert_errf(err, err_len, NE_NAME ": %s is not a directory (the host creates it)", out_dir);
        rc = EDGERT_E_USAGE;
        goto out;
    }
    if ((rc = ne_open_inputs(&r, err, err_len)) != EDGERT_OK)
        goto out;
    if (refused_scheme && q.force)
        edgert_errf(ne_warning(&r), NE_WARN_LEN, "FORCED: %s with %s ranges is refused by default "
                    "(see the schemes table and the device figures); exported because force=1",
                    ne_scheme_names[q.scheme], q.ranges_text);
    if (q.golden && !r.refused && ne_make_golden_dir(&r, err, err_len)) {
        rc = EDGERT_E_IO;
        goto out;
    }
    for (size_t i = 0; i < r.np; i++) {
        st->host->log(st->host->host_ctx, EDGERT_LOG_INFO, "projection %zu/%zu %s [%u x %u]",
                      i + 1, r.np, r.p[i].name, r.p[i].n, r.p[i].k);
        if (do_projection(&r, i, err, err_len)) {
            rc = EDGERT_E_IO;
            goto out;
        }
    }
    if (r.refused) {
        refusal(&r, err, err_len);
        rc = EDGERT_E_UNSUPPORTED;
        goto out;
    }
    for (size_t i = 0; i < r.np; i++) {
        double d = db(r.p[i].sig, r.p[i].noise[CFG_EXPORTED]);
        if (d < NE_FLAG_DB)
            edgert_errf(ne_warning(&r), NE_WARN_LEN, "projection %s: exported arithmetic measured "
                        "%.2f dB SQNR, below %.0f dB", r.p[i].name, d, NE_FLAG_DB);
    }
    if ((rc = ne_write_model(&r, err, err_len)) != EDGERT_OK)
        goto out;
    if (write_encodings(&r, err, err_len) || write_reports(&r, err, err_len)) {
        rc = EDGERT_E_IO;
        goto out;
    }
    rc = EDGERT_OK;
out:
    if (r.ext)
        fclose(r.ext);
    for (size_t i = 0; i < r.np; i++) {
        free(r.p[i].name);
        free(r.p[i].wscale);
    }
    free(r.p);
    pb_free(&r.graph);
    st_close(&r.wf);
    st_close(&r.cf);
    free(q.buf);
    return rc;
}

/* ---- life cycle --------------------------------------------------------------- */

static edgert_status ne_init(const edgert_host *host, const char *options, void **state, char *err,
                             size_t err_len)
{
    if (!host || !state) {
        edgert_errf(err, err_len, NE_NAME ": init: host or state is NULL");
        return EDGERT_E_USAGE;
    }
    *state = NULL;
    if (options && *options) {
        edgert_errf(err, err_len, NE_NAME ": unknown init options '%.100s' (it takes none; export "
                                     "settings go in the export request)", options);
        return EDGERT_E_USAGE;
    }
    ne_state *st = host->alloc(host->host_ctx, sizeof *st, 16);
    if (!st) {
        edgert_errf(err, err_len, NE_NAME ": out of memory");
        return EDGERT_E_NOMEM;
    }
    st->host = host;
    *state = st;
    return EDGERT_OK;
}

static void ne_fini(void *state)
{
    ne_state *st = state;
    if (st)
        st->host->free(st->host->host_ctx, st);
}

static edgert_status ne_self_test(void *state, char *err, size_t err_len)
{
    if (!state) {
        edgert_errf(err, err_len, NE_NAME ": self-test: state is NULL");
        return EDGERT_E_USAGE;
    }
    if (pb_self_test(err, err_len))
        return EDGERT_E_PLUGIN;
    /* Quantizer: [-1, 3] in 16 bits: scale 4/65535, zp rne(16383.75) = 16384;
     * 0 stays exact, ties round to even. */
    ne_aq a = ne_aq_make(-1.0f, 3.0f, 16);
    if (a.zp != 16384 || ne_aq_apply(&a, 0.0f) != 0.0f || fabsf(ne_aq_apply(&a, 1.0f) - 1.0f) > a.scale) {
        edgert_errf(err, err_len, NE_NAME ": self-test: activation quantizer is wrong (zp %d)", a.zp);
        return EDGERT_E_PLUGIN;
    }
    /* Percentile selection against a known order: 0..999 shuffled. */
    float v[1000], s[1000], lo, hi;
    for (int i = 0; i < 1000; i++)
        v[i] = (float)((i * 337) % 1000) - 500.0f;
    ne_range pr = {NE_RANGE_PERCENTILE, 99.0};
    ne_range_of(v, 1000, pr, s, &lo, &hi);
    if (lo != -490.0f || hi != 489.0f) {
        edgert_errf(err, err_len, NE_NAME ": self-test: percentile selection gave [%g, %g], expected "
                                     "[-490, 489]", (double)lo, (double)hi);
        return EDGERT_E_PLUGIN;
    }
    /* The GEMM block against a scalar loop (exact: small integers). */
    float x[5 * 7], wt[7 * 3], y[5 * 3];
    for (int i = 0; i < 35; i++)
        x[i] = (float)(i % 5 - 2);
    for (int i = 0; i < 21; i++)
        wt[i] = (float)(i % 4 - 1);
    ne_gemm_block(x, 5, 7, wt, 3, y);
    for (int t = 0; t < 5; t++)
        for (int c = 0; c < 3; c++) {
            float e = 0.0f;
            for (int k = 0; k < 7; k++)
                e += x[t * 7 + k] * wt[k * 3 + c];
            if (y[t * 3 + c] != e) {
                edgert_errf(err, err_len, NE_NAME ": self-test: GEMM block y[%d][%d] = %g, expected %g",
                            t, c, (double)y[t * 3 + c], (double)e);
                return EDGERT_E_PLUGIN;
            }
        }
    return EDGERT_OK;
}

static const char *ne_describe(void *state)
{
    (void)state;
    return "ONNX QDQ export (opset 21): int8 per-channel weights, uint16 calibrated activations";
}

static const edgert_plugin ne_plugin_v1 = {
    .struct_size = sizeof(edgert_plugin),
    .abi_version = 1u,
    .name = NE_NAME,
    .version = NE_VERSION,
    .caps = EDGERT_CAP_EXPORT,
    .init = ne_init,
    .fini = ne_fini,
    .self_test = ne_self_test,
    .describe = ne_describe,
    .pack = NULL,
    .packed_free = NULL,
    .gemm = NULL,
    .export_graph = ne_export,
};

EDGERT_PLUGIN_EXPORT edgert_status edgert_plugin_entry(uint32_t abi_min, uint32_t abi_max,
                                                       const edgert_host *host,
                                                       const edgert_plugin **out, char *err,
                                                       size_t err_len)
{
    (void)host; /* the instance gets the host table again in init() */
    static const edgert_plugin *const by_abi[] = {&ne_plugin_v1}; /* ABI 1 */
    return edgert_plugin_negotiate(abi_min, abi_max, by_abi, NE_NAME, out, err, err_len);
}
