/*
 * plugins/npu-export/inputs.c — the export's inputs: open the weights and the
 * calibration samples (safetensors.c validates the files), refuse 4-bit
 * weights, pair each projection's "<proj>.weight" [N][K] with its "<proj>.x"
 * [T][K], and read one projection's tensors as fp32 when its turn comes.
 *
 * Projections are taken in file order (by data offset), so the report and the
 * graph list them as the checkpoint stores them, whatever the header's order.
 * Every projection needs the same T: the report's end-to-end figure sums over
 * the same samples. Errors name the file and the tensor.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ne.h"

#define NE_MAX_TOKENS 65536u

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* 4-bit inputs cannot make the calibrated export, forced or not: say why. */
static edgert_status refuse_4bit(ne_run *r, char *err, size_t len)
{
    for (size_t i = 0; i < r->wf.n; i++) {
        const st_tensor *t = &r->wf.t[i];
        const char *why = NULL;
        if (t->dtype == ST_I4 || t->dtype == ST_U4)
            why = "a 4-bit dtype";
        else if (ends_with(t->name, ".qweight") || ends_with(t->name, "qweight"))
            why = "a GPTQ qweight (int32, 8 codes packed along K)";
        else if (ends_with(t->name, ".qzeros") || ends_with(t->name, ".g_idx"))
            why = "GPTQ 4-bit zero points / group index";
        if (!why)
            continue;
        edgert_errf(err, len,
                    "%s: tensor '%s' holds 4-bit weights (%s). The calibrated NPU path needs 8-bit "
                    "weights quantized from the dense model: on the phone, 4-bit weights failed "
                    "the converter on the calibrated path, uncalibrated w4a16 scored %.1f dB SQNR "
                    "against %.1f dB for calibrated w8a16, and 4-bit weights saved memory, not "
                    "time (0.917 vs 0.912 ms per layer; docs/architecture.md). Re-quantizing 4-bit "
                    "codes to 8 bits would keep their 4-bit error, so force cannot help: export "
                    "from the dense fp16/bf16/fp32 checkpoint instead.",
                    r->q->weights, t->name, why, DEV_W4A16_UNCAL_DB, DEV_W8A16_DB);
        return EDGERT_E_UNSUPPORTED;
    }
    return EDGERT_OK;
}

static int cmp_proj_offset(const void *a, const void *b)
{
    const ne_proj *x = a, *y = b;
    return x->w->begin < y->w->begin ? -1 : x->w->begin > y->w->begin;
}

/* The head is the projection named `head`, or one whose name ends in ".head". */
static int is_head(const char *name, const char *head)
{
    size_t hl = strlen(head), nl = strlen(name);
    return strcmp(name, head) == 0 ||
           (nl > hl && name[nl - hl - 1] == '.' && strcmp(name + nl - hl, head) == 0);
}

/* One projection per dense 2-D "<proj>.weight", sorted into file order. */
static edgert_status collect_weights(ne_run *r, char *err, size_t len)
{
    size_t cap = r->wf.n ? r->wf.n : 1;
    r->p = calloc(cap, sizeof *r->p);
    if (!r->p) {
        edgert_errf(err, len, "out of memory");
        return EDGERT_E_NOMEM;
    }
    for (size_t i = 0; i < r->wf.n; i++) {
        const st_tensor *t = &r->wf.t[i];
        if (!ends_with(t->name, ".weight") || strlen(t->name) == 7)
            continue;
        if (t->ndim != 2 || !t->shape[0] || !t->shape[1] || t->shape[0] > (1u << 24) ||
            t->shape[1] > (1u << 24)) {
            edgert_errf(err, len, "%s: tensor '%s' must be 2-D [N][K] with 1 <= N, K <= 16777216",
                        r->q->weights, t->name);
            return EDGERT_E_PARSE;
        }
        if (!st_is_float(t->dtype)) { /* a bad file, like any malformed input (exit 4) */
            edgert_errf(err, len, "%s: tensor '%s' is %s; dense weights must be F32, F16 or BF16 "
                                  "(the exporter quantizes them itself, per output channel)",
                        r->q->weights, t->name, t->dtype_name);
            return EDGERT_E_PARSE;
        }
        ne_proj *p = &r->p[r->np++];
        p->name = strndup(t->name, strlen(t->name) - 7);
        if (!p->name) {
            edgert_errf(err, len, "out of memory");
            return EDGERT_E_NOMEM;
        }
        p->w = t;
        p->n = (uint32_t)t->shape[0];
        p->k = (uint32_t)t->shape[1];
        p->head = is_head(p->name, r->q->head);
    }
    if (!r->np) {
        edgert_errf(err, len, "%s: no dense weights: expected 2-D tensors named "
                              "'<projection>.weight'", r->q->weights);
        return EDGERT_E_PARSE;
    }
    qsort(r->p, r->np, sizeof *r->p, cmp_proj_offset);
    return EDGERT_OK;
}

/* Each projection's "<proj>.x" [T][K], the same T for all (it sets r->t). */
static edgert_status match_calibration(ne_run *r, char *err, size_t len)
{
    for (size_t i = 0; i < r->np; i++) {
        ne_proj *p = &r->p[i];
        char xn[4200];
        snprintf(xn, sizeof xn, "%s.x", p->name);
        const st_tensor *x = st_find(&r->cf, xn);
        if (!x) {
            edgert_errf(err, len, "%s: no calibration samples '%s' for projection %s (expected "
                                  "[T][%u] activations)", r->q->calibration, xn, p->name, p->k);
            return EDGERT_E_PARSE;
        }
        if (x->ndim != 2 || x->shape[1] != p->k || !x->shape[0] || x->shape[0] > NE_MAX_TOKENS ||
            !st_is_float(x->dtype)) {
            char shape[96] = "";
            for (uint32_t d = 0; d < x->ndim && d < 4u; d++)
                snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%llu",
                         d ? "][" : "[", (unsigned long long)x->shape[d]);
            edgert_errf(err, len, "%s: tensor '%s' must be float [T][%u] (K = %u, the inputs of "
                                  "'%s.weight') with 1 <= T <= %u; it is %s %s%s",
                        r->q->calibration, xn, p->k, p->k, p->name, NE_MAX_TOKENS,
                        x->dtype_name, x->ndim ? shape : "a scalar", x->ndim ? "]" : "");
            return EDGERT_E_PARSE;
        }
        if (i == 0)
            r->t = (uint32_t)x->shape[0];
        else if (x->shape[0] != r->t) {
            edgert_errf(err, len, "%s: tensor '%s' has %llu samples, '%s.x' has %u: every "
                                  "projection needs the same T", r->q->calibration, xn,
                        (unsigned long long)x->shape[0], r->p[0].name, r->t);
            return EDGERT_E_PARSE;
        }
        p->x = x;
        if ((uint64_t)r->t * p->n > (1ull << 31)) {
            edgert_errf(err, len, "projection %s: T x N = %llu outputs is too many for one "
                                  "simulation; use fewer calibration samples", p->name,
                        (unsigned long long)r->t * p->n);
            return EDGERT_E_USAGE;
        }
    }
    r->tc = r->t >= NE_MIN_HOLDOUT_T ? r->t - r->t / 4u : r->t;
    if (r->t < NE_MIN_HOLDOUT_T)
        edgert_errf(ne_warning(r), NE_WARN_LEN, "only %u calibration samples: none held out, so "
                    "the report has in-sample figures only (at least %u give a held-out "
                    "quarter)", r->t, NE_MIN_HOLDOUT_T);
    else if (r->tc < 16)
        edgert_errf(ne_warning(r), NE_WARN_LEN, "only %u calibration samples (%u calibrate, %u "
                    "held out): ranges from so few tokens are unlikely to cover what the model "
                    "sees on device", r->t, r->tc, r->t - r->tc);
    return EDGERT_OK;
}

edgert_status ne_open_inputs(ne_run *r, char *err, size_t len)
{
    edgert_status rc = st_open(&r->wf, r->q->weights, err, len);
    if (rc != EDGERT_OK)
        return rc;
    rc = refuse_4bit(r, err, len);
    if (rc != EDGERT_OK)
        return rc;
    if ((rc = st_open(&r->cf, r->q->calibration, err, len)) != EDGERT_OK)
        return rc;
    if ((rc = collect_weights(r, err, len)) != EDGERT_OK)
        return rc;
    return match_calibration(r, err, len);
}

/* A value that is not finite would poison every range and sum after it. */
static int check_finite(const float *v, size_t n, uint32_t k, const char *file,
                        const st_tensor *t, char *err, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i])) {
            edgert_errf(err, len, "%s: tensor '%s' has a non-finite value at [%zu][%zu]", file,
                        t->name, i / k, i % k);
            return -1;
        }
    return 0;
}

/* Calibration samples that are all one value (all zero: a projection whose
 * input the calibration run never reached, or a dump that wrote nothing)
 * hold no range to calibrate: refused, rather than exported with an
 * invented range and scored as perfect. */
static int check_varies(const float *v, size_t n, const char *file, const st_tensor *t,
                        const char *proj, char *err, size_t len)
{
    for (size_t i = 1; i < n; i++)
        if (v[i] != v[0])
            return 0;
    edgert_errf(err, len, "%s: tensor '%s' (calibration samples of projection %s) is %g in "
                          "all %zu values: no activation range can be calibrated from it; "
                          "capture the projection's real inputs",
                file, t->name, proj, (double)v[0], n);
    return -1;
}

edgert_status ne_read_projection(ne_run *r, const ne_proj *p, float *w, float *x, char *err,
                                 size_t len)
{
    if (st_read_f32(&r->wf, p->w, 0, st_numel(p->w), w, err, len) ||
        st_read_f32(&r->cf, p->x, 0, st_numel(p->x), x, err, len) ||
        check_finite(w, (size_t)p->n * p->k, p->k, r->q->weights, p->w, err, len) ||
        check_finite(x, (size_t)r->t * p->k, p->k, r->q->calibration, p->x, err, len) ||
        check_varies(x, (size_t)r->t * p->k, r->q->calibration, p->x, p->name, err, len))
        return EDGERT_E_PARSE; /* a bad input file: exit 4 */
    return EDGERT_OK;
}
