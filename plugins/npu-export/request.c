/*
 * plugins/npu-export/request.c — the export request: `key=value` lines, one
 * per line (a trailing '\r' and empty lines are ignored), parsed and checked
 * before any file is opened.
 *
 *   weights=PATH        safetensors; dense F32/F16/BF16 tensors "<proj>.weight"
 *                       [N][K] (output channels x inputs), in file order.
 *                       4-bit inputs (I4/U4 dtypes, GPTQ qweight/qzeros) are
 *                       refused: see refuse_4bit() in inputs.c.
 *   calibration=PATH    safetensors; "<proj>.x" [T][K] activation samples (the
 *                       inputs of each projection on real prompts), same T.
 *   scheme=w8a16        (default) | w8a8 | w4a16  — the last two are refused
 *                       unless force=1
 *   ranges=minmax       (default) | percentile:P (50 < P <= 100) | fixed
 *                       (uncalibrated [-1, 1]; refused unless force=1)
 *   force=0|1           export a refused scheme anyway; the report warns
 *   head=NAME           the output head projection (default lm_head; a name
 *                       equal to it or ending in ".NAME"); it is exported with
 *                       int8 weights and uint16 activations whatever the
 *                       scheme: the same or higher precision, never lower
 *   golden=0|1          also write golden/NNN.{x,y_sim,y_fp32}.f32: the inputs,
 *                       the simulated exported outputs and the fp32 outputs
 *                       (raw little-endian float32, [T][K] / [T][N]) to check
 *                       a runtime against
 * Unknown keys, keys given twice and values outside these sets are refused
 * (EDGERT_E_USAGE); weights and calibration are required.
 *
 * Default ranges are minmax: with 65536 levels the step of a min/max range is
 * already far below the ordinary channels' spread (the outlier channels set
 * the range and they carry most of the output's energy), so clipping their
 * extremes (percentile) costs more than the finer step gains. The report
 * measures percentile ranges for 8-bit activations, where the trade-off goes
 * the other way, so the reader sees both.
 */
#include <stdlib.h>
#include <string.h>

#include "ne.h"

const char *const ne_scheme_names[3] = {"w8a16", "w8a8", "w4a16"};

/* The keys, in the order of the switch in parse_value, with what each accepts
 * (for the error message). */
enum { KEY_WEIGHTS, KEY_CALIBRATION, KEY_SCHEME, KEY_RANGES, KEY_FORCE, KEY_HEAD, KEY_GOLDEN,
       NKEYS };
static const struct {
    const char *name, *accepts;
} keys[NKEYS] = {
    {"weights", "a non-empty value"},
    {"calibration", "a non-empty value"},
    {"scheme", "w8a16, w8a8 or w4a16"},
    {"ranges", "minmax, percentile:P with 50 < P <= 100, or fixed"},
    {"force", "0 or 1"},
    {"head", "a non-empty value"},
    {"golden", "0 or 1"},
};

static int parse_bool(const char *v, int *out)
{
    if (strcmp(v, "0") == 0 || strcmp(v, "false") == 0)
        *out = 0;
    else if (strcmp(v, "1") == 0 || strcmp(v, "true") == 0)
        *out = 1;
    else
        return -1;
    return 0;
}

static int parse_ranges(const char *v, ne_range *r, char *text, size_t tl)
{
    if (strcmp(v, "minmax") == 0) {
        r->kind = NE_RANGE_MINMAX;
    } else if (strcmp(v, "fixed") == 0) {
        r->kind = NE_RANGE_FIXED;
    } else if (strncmp(v, "percentile:", 11) == 0) {
        char *end;
        double p = strtod(v + 11, &end);
        if (!v[11] || *end || !(p > 50.0 && p <= 100.0))
            return -1;
        r->kind = NE_RANGE_PERCENTILE;
        r->pct = p;
    } else {
        return -1;
    }
    snprintf(text, tl, "%s", v);
    return 0;
}

/* Store the value of key idx; nonzero when the key does not accept it. */
static int parse_value(ne_req *q, int idx, const char *v)
{
    switch (idx) {
    case KEY_WEIGHTS:
        q->weights = v;
        return !*v;
    case KEY_CALIBRATION:
        q->calibration = v;
        return !*v;
    case KEY_SCHEME:
        q->scheme = -1;
        for (int i = 0; i < 3; i++)
            if (strcmp(v, ne_scheme_names[i]) == 0)
                q->scheme = i;
        return q->scheme < 0;
    case KEY_RANGES:
        return parse_ranges(v, &q->ranges, q->ranges_text, sizeof q->ranges_text);
    case KEY_FORCE:
        return parse_bool(v, &q->force);
    case KEY_HEAD:
        q->head = v;
        return !*v;
    default:
        return parse_bool(v, &q->golden);
    }
}

/* One non-empty line, split in place at its '='; seen collects the keys met. */
static edgert_status parse_line(char *line, ne_req *q, unsigned *seen, char *err, size_t len)
{
    char *eq = strchr(line, '=');
    if (!eq) {
        edgert_errf(err, len, NE_NAME ": request line '%.100s' is not key=value", line);
        return EDGERT_E_USAGE;
    }
    *eq = '\0';
    const char *k = line, *v = eq + 1;
    int idx = -1;
    for (int i = 0; i < NKEYS; i++)
        if (strcmp(k, keys[i].name) == 0)
            idx = i;
    if (idx < 0) {
        edgert_errf(err, len, NE_NAME ": unknown request key '%.64s' (known: weights, "
                              "calibration, scheme, ranges, force, head, golden)", k);
        return EDGERT_E_USAGE;
    }
    if (*seen & (1u << idx)) {
        edgert_errf(err, len, NE_NAME ": request key '%s' given twice", k);
        return EDGERT_E_USAGE;
    }
    *seen |= 1u << idx;
    if (parse_value(q, idx, v)) {
        edgert_errf(err, len, NE_NAME ": bad value '%.100s' for %s (%s)", v, k, keys[idx].accepts);
        return EDGERT_E_USAGE;
    }
    return EDGERT_OK;
}

edgert_status ne_parse_request(const char *request, ne_req *q, char *err, size_t len)
{
    memset(q, 0, sizeof *q);
    q->head = "lm_head";
    q->ranges.kind = NE_RANGE_MINMAX;
    snprintf(q->ranges_text, sizeof q->ranges_text, "minmax");
    q->buf = strdup(request ? request : "");
    if (!q->buf) {
        edgert_errf(err, len, "out of memory");
        return EDGERT_E_NOMEM;
    }
    unsigned seen = 0;
    char *save = NULL;
    for (char *line = strtok_r(q->buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        size_t l = strlen(line);
        if (l && line[l - 1] == '\r')
            line[--l] = '\0';
        if (!l)
            continue;
        edgert_status rc = parse_line(line, q, &seen, err, len);
        if (rc != EDGERT_OK)
            return rc;
    }
    if (!q->weights || !q->calibration) {
        edgert_errf(err, len, NE_NAME ": the request needs weights=FILE and calibration=FILE "
                              "(safetensors): the calibrated path takes its ranges from real "
                              "activations");
        return EDGERT_E_USAGE;
    }
    return EDGERT_OK;
}
