/*
 * plugins/npu-export/npu_export.c — export a calibrated w8a16 QDQ graph for a
 * phone NPU runtime, refuse the exports that do not work there, and measure
 * why (architecture.md, Measured background: on device, calibrated w8a16 36.9 dB SQNR; int8
 * activations 5.1 dB; uncalibrated w4a16 -1.6 dB; 4-bit weights failed the
 * converter on the calibrated path and saved memory, not time).
 *
 * Capability EXPORT only (no GEMM). The host calls export_graph(out_dir,
 * request) with request lines `key=value` (request.c: weights=, calibration=,
 * scheme=, ranges=, force=, head=, golden=).
 *
 * This file holds the plugin's life cycle (entry, init, self-test, fini) and
 * the export's spine, one call per step of the data flow:
 *   request.c   parse and check the request
 *   inputs.c    open the safetensors inputs, refuse 4-bit weights, pair each
 *               "<proj>.weight" with its "<proj>.x", read a projection
 *   simulate.c  per projection, every scheme's arithmetic against fp32
 *               (quant_sim.c's quantizers and GEMM block)
 *   emit.c      each projection's QDQ subgraph and golden/ files, then
 *               model.onnx (+ model.onnx.data)
 *   report.c    encodings.json, report.json and report.txt, or the refusal
 * all written into out_dir, which the host created. A refused request is
 * simulated in full (the refusal quotes its figures) and writes nothing.
 *
 * No global mutable state: an instance holds only its host table.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ne.h"
#include "plugin_kit.h"

typedef struct ne_state {
    const edgert_host *host; /* first: pk_fini finds it */
} ne_state;

/* ---- services of the run, shared by the steps --------------------------------- */

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

/* ---- the export --------------------------------------------------------------- */

/* Everything before the first projection: the configurations, whether the
 * request is refused, out_dir, the inputs, and golden/ when it is due. */
static edgert_status begin_run(ne_run *r, const ne_state *st, const ne_req *q,
                               const char *out_dir, char *err, size_t len)
{
    r->host = st->host;
    r->q = q;
    r->out_dir = out_dir;
    ne_make_cfgs(q, r->cfg);
    int refused_scheme = q->scheme != SCHEME_W8A16 || q->ranges.kind == NE_RANGE_FIXED;
    r->refused = refused_scheme && !q->force;
    struct stat sb;
    if (stat(out_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        edgert_errf(err, len, NE_NAME ": %s is not a directory (the host creates it)", out_dir);
        return EDGERT_E_USAGE;
    }
    edgert_status rc = ne_open_inputs(r, err, len);
    if (rc != EDGERT_OK)
        return rc;
    if (refused_scheme && q->force)
        edgert_errf(ne_warning(r), NE_WARN_LEN, "FORCED: %s with %s ranges is refused by default "
                    "(see the schemes table and the device figures); exported because force=1",
                    ne_scheme_names[q->scheme], q->ranges_text);
    if (q->golden && !r->refused && ne_make_golden_dir(r, err, len))
        return EDGERT_E_IO;
    return EDGERT_OK;
}

/* Quantize, simulate every configuration and (unless refused) emit one
 * projection. Its status: a bad input file is EDGERT_E_PARSE (exit 4),
 * memory EDGERT_E_NOMEM, writing the artifact EDGERT_E_IO. */
static edgert_status do_projection(ne_run *r, size_t pi, char *err, size_t len)
{
    ne_proj *p = &r->p[pi];
    ne_work wk;
    edgert_status rc = EDGERT_E_NOMEM;
    if (ne_work_alloc(r, p, &wk, err, len))
        goto out;
    if ((rc = ne_read_projection(r, p, wk.w, wk.x, err, len)) != EDGERT_OK)
        goto out;
    rc = EDGERT_E_IO;
    if (ne_simulate(r, p, &wk, err, len))
        goto out;
    if (!r->refused && (ne_emit_projection(r, p, &wk, err, len) ||
                        (r->q->golden && ne_write_golden(r, pi, p, &wk, err, len))))
        goto out;
    rc = EDGERT_OK;
out:
    ne_work_free(&wk);
    return rc;
}

static void end_run(ne_run *r)
{
    if (r->ext)
        fclose(r->ext);
    for (size_t i = 0; i < r->np; i++) {
        free(r->p[i].name);
        free(r->p[i].wscale);
    }
    free(r->p);
    pb_free(&r->graph);
    st_close(&r->wf);
    st_close(&r->cf);
}

static edgert_status ne_export(void *state, const char *out_dir, const char *request, char *err,
                               size_t err_len)
{
    const ne_state *st = state;
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
    if ((rc = begin_run(&r, st, &q, out_dir, err, err_len)) != EDGERT_OK)
        goto out;
    for (size_t i = 0; i < r.np; i++) {
        st->host->log(st->host->host_ctx, EDGERT_LOG_INFO, "projection %zu/%zu %s [%u x %u]",
                      i + 1, r.np, r.p[i].name, r.p[i].n, r.p[i].k);
        if ((rc = do_projection(&r, i, err, err_len)) != EDGERT_OK)
            goto out;
    }
    if (r.refused) {
        ne_refusal(&r, err, err_len);
        rc = EDGERT_E_UNSUPPORTED;
        goto out;
    }
    ne_flag_warnings(&r);
    if ((rc = ne_write_model(&r, err, err_len)) != EDGERT_OK)
        goto out;
    if (ne_write_encodings(&r, err, err_len) || ne_write_reports(&r, err, err_len))
        rc = EDGERT_E_IO;
out:
    end_run(&r);
    free(q.buf);
    return rc;
}

/* ---- life cycle --------------------------------------------------------------- */

static edgert_status ne_init(const edgert_host *host, const char *options, void **state, char *err,
                             size_t err_len)
{
    edgert_status rc = pk_check_init(NE_NAME, host, state, err, err_len);
    if (rc != EDGERT_OK)
        return rc;
    if (options && *options) {
        edgert_errf(err, err_len, NE_NAME ": unknown init options '%.100s' (it takes none; "
                                  "export settings go in the export request)", options);
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


/* Each part checks itself against known answers: the protobuf encoder
 * (onnx_pb.c), then the quantizers and the GEMM block (quant_sim.c). */
static edgert_status ne_self_test(void *state, char *err, size_t err_len)
{
    if (!state) {
        edgert_errf(err, err_len, NE_NAME ": self-test: state is NULL");
        return EDGERT_E_USAGE;
    }
    if (pb_self_test(err, err_len) || ne_quant_self_test(err, err_len))
        return EDGERT_E_PLUGIN;
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
    .fini = pk_fini,
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
    return EDGERT_PLUGIN_NEGOTIATE(abi_min, abi_max, by_abi, NE_NAME, out, err, err_len);
}
