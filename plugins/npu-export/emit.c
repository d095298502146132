/*
 * plugins/npu-export/emit.c — the artifacts a runtime loads, written into
 * out_dir (onnx_pb.c encodes the messages):
 *
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
 *   golden/NNN.{x,y_sim,y_fp32}.f32   with golden=1: the inputs, the
 *                     simulated exported outputs and the fp32 outputs of
 *                     projection NNN (raw little-endian float32, [T][K] /
 *                     [T][N]) to check a runtime against.
 *
 * The graph grows projection by projection while the simulation runs (each
 * projection's buffers are freed before the next one is read); model.onnx is
 * written last, around the finished graph.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ne.h"

#define NE_EXTERNAL_MIN (1u << 20)
#define NE_ALIGN_EXTERNAL 4096u

static int write_raw(const ne_run *r, const char *rel, const void *d, size_t n, char *err,
                     size_t len)
{
    char *path = ne_out_path(r, rel);
    FILE *f = path ? fopen(path, "wb") : NULL;
    int ok = f && fwrite(d, 1, n, f) == n;
    if (f && fclose(f) != 0)
        ok = 0;
    if (!ok)
        edgert_errf(err, len, "%s: cannot write: %s", path ? path : rel, strerror(errno));
    free(path);
    return ok ? 0 : -1;
}

/* An initializer inline or in model.onnx.data. */
static int put_init(ne_run *r, const char *name, int dtype, const int64_t *dims, int ndim,
                    const void *raw, size_t n, char *err, size_t len)
{
    if (n < NE_EXTERNAL_MIN) {
        onnx_init_inline(&r->graph, name, dtype, dims, ndim, raw, n);
        return 0;
    }
    if (!r->ext) {
        char *path = ne_out_path(r, "model.onnx.data");
        r->ext = path ? fopen(path, "wb") : NULL;
        if (!r->ext) {
            edgert_errf(err, len, "%s: cannot create: %s", path ? path : "model.onnx.data",
                        strerror(errno));
            free(path);
            return -1;
        }
        free(path);
        r->ext_used = 1;
    }
    static const char zeros[NE_ALIGN_EXTERNAL];
    uint64_t pad = (NE_ALIGN_EXTERNAL - r->ext_off % NE_ALIGN_EXTERNAL) % NE_ALIGN_EXTERNAL;
    if ((pad && fwrite(zeros, 1, pad, r->ext) != pad) || fwrite(raw, 1, n, r->ext) != n) {
        edgert_errf(err, len, "%s/model.onnx.data: write failed: %s", r->out_dir,
                    strerror(errno));
        return -1;
    }
    r->ext_off += pad;
    onnx_init_external(&r->graph, name, dtype, dims, ndim, "model.onnx.data", r->ext_off, n);
    r->ext_off += n;
    return 0;
}

/* The tensor names of one projection's QDQ subgraph: "<proj>" + suffix.
 * The float tensors a converter quantizes keep the names encodings.json
 * gives them (report.c): "<proj>.x" (the input, read by its Q),
 * "<proj>.weight" (the weight as MatMul reads it, written by its DQ; the
 * name it has in the user's safetensors) and "<proj>.y" (the output,
 * written by its DQ). tests/plugins/test_npu_export_io.c binds every key. */
enum { NM_X, NM_X_SCALE, NM_X_ZP, NM_X_Q, NM_X_DQ, NM_W_Q, NM_W_SCALE, NM_W_ZP, NM_W_DQ,
       NM_Y_FLOAT, NM_Y_SCALE, NM_Y_ZP, NM_Y_Q, NM_Y, NNAMES };
static const char *const name_suffix[NNAMES] = {
    ".x", ".x_scale", ".x_zero_point", ".x_quantized", ".x_dequantized", ".weight_quantized",
    ".weight_scale", ".weight_zero_point", ".weight", ".y_float", ".y_scale",
    ".y_zero_point", ".y_quantized", ".y",
};
typedef char qdq_names[NNAMES][320];

/* Graph input and output, and the activation scale / zero point scalars (rank 0). */
static void emit_io(ne_run *r, const ne_proj *p, qdq_names nm)
{
    int adt = p->abits == 16 ? ONNX_UINT16 : ONNX_UINT8;
    int64_t xd[2] = {r->q->rows, p->k}, yd[2] = {r->q->rows, p->n};
    onnx_value_info(&r->graph, 11, nm[NM_X], ONNX_FLOAT, xd, 2);
    onnx_value_info(&r->graph, 12, nm[NM_Y], ONNX_FLOAT, yd, 2);
    uint8_t zp[2];
    onnx_init_inline(&r->graph, nm[NM_X_SCALE], ONNX_FLOAT, NULL, 0, &p->xq.scale, 4);
    zp[0] = (uint8_t)(p->xq.zp & 0xFF);
    zp[1] = (uint8_t)(p->xq.zp >> 8);
    onnx_init_inline(&r->graph, nm[NM_X_ZP], adt, NULL, 0, zp, p->abits / 8);
    onnx_init_inline(&r->graph, nm[NM_Y_SCALE], ONNX_FLOAT, NULL, 0, &p->yq.scale, 4);
    zp[0] = (uint8_t)(p->yq.zp & 0xFF);
    zp[1] = (uint8_t)(p->yq.zp >> 8);
    onnx_init_inline(&r->graph, nm[NM_Y_ZP], adt, NULL, 0, zp, p->abits / 8);
}

/* The codes q [N][K] transposed to [K][N] (MatMul's B), int8 or packed int4
 * (two a byte, the first in the low nibble); bytes zeroed beforehand. */
static void transpose_codes(const ne_proj *p, const int8_t *q, uint8_t *wt)
{
    const uint32_t TB = 64; /* tile: rows of W read contiguously, columns of Wt written */
    for (uint32_t n0 = 0; n0 < p->n; n0 += TB)
        for (uint32_t k0 = 0; k0 < p->k; k0 += TB)
            for (uint32_t nn = n0; nn < p->n && nn < n0 + TB; nn++)
                for (uint32_t kk = k0; kk < p->k && kk < k0 + TB; kk++) {
                    int8_t v = q[(size_t)nn * p->k + kk];
                    size_t e = (size_t)kk * p->n + nn;
                    if (p->wbits == 8)
                        wt[e] = (uint8_t)v;
                    else
                        wt[e / 2] |= (uint8_t)(((uint8_t)v & 15u) << (e % 2 ? 4 : 0));
                }
}

/* Weights transposed to [K][N], per-channel scales [N], zero points 0 [N]. */
static int emit_weights(ne_run *r, const ne_proj *p, const int8_t *q, qdq_names nm, char *err,
                        size_t len)
{
    int wdt = p->wbits == 8 ? ONNX_INT8 : ONNX_INT4;
    int64_t wd[2] = {p->k, p->n}, nd[1] = {p->n};
    size_t kn = (size_t)p->k * p->n;
    size_t bytes = p->wbits == 8 ? kn : (kn + 1) / 2;
    uint8_t *wt = calloc(bytes ? bytes : 1, 1);
    uint8_t *zeros = calloc(p->n, 1);
    if (!wt || !zeros) {
        free(wt);
        free(zeros);
        edgert_errf(err, len, "out of memory (%zu bytes for %s)", bytes, p->name);
        return -1;
    }
    transpose_codes(p, q, wt);
    int rc = put_init(r, nm[NM_W_Q], wdt, wd, 2, wt, bytes, err, len);
    free(wt);
    if (!rc)
        rc = put_init(r, nm[NM_W_SCALE], ONNX_FLOAT, nd, 1, p->wscale, (size_t)p->n * 4, err,
                      len);
    if (!rc)
        rc = put_init(r, nm[NM_W_ZP], wdt, nd, 1, zeros,
                      p->wbits == 8 ? p->n : (p->n + 1u) / 2u, err, len);
    free(zeros);
    return rc;
}

/* x -Q-DQ-> MatMul(., DQ(W^T, axis 1)) -Q-DQ-> y */
static void emit_nodes(ne_run *r, const ne_proj *p, qdq_names nm)
{
    const char *qx[3] = {nm[NM_X], nm[NM_X_SCALE], nm[NM_X_ZP]};
    const char *dx[3] = {nm[NM_X_Q], nm[NM_X_SCALE], nm[NM_X_ZP]};
    const char *dw[3] = {nm[NM_W_Q], nm[NM_W_SCALE], nm[NM_W_ZP]};
    const char *mm[2] = {nm[NM_X_DQ], nm[NM_W_DQ]};
    const char *qy[3] = {nm[NM_Y_FLOAT], nm[NM_Y_SCALE], nm[NM_Y_ZP]};
    const char *dy[3] = {nm[NM_Y_Q], nm[NM_Y_SCALE], nm[NM_Y_ZP]};
    const char *P = p->name;
    char nn[320];
    snprintf(nn, sizeof nn, "%s/x_Q", P);
    onnx_node(&r->graph, "QuantizeLinear", qx, 3, nm[NM_X_Q], nn, -1);
    snprintf(nn, sizeof nn, "%s/x_DQ", P);
    onnx_node(&r->graph, "DequantizeLinear", dx, 3, nm[NM_X_DQ], nn, -1);
    snprintf(nn, sizeof nn, "%s/weight_DQ", P);
    onnx_node(&r->graph, "DequantizeLinear", dw, 3, nm[NM_W_DQ], nn, 1);
    snprintf(nn, sizeof nn, "%s/MatMul", P);
    onnx_node(&r->graph, "MatMul", mm, 2, nm[NM_Y_FLOAT], nn, -1);
    snprintf(nn, sizeof nn, "%s/y_Q", P);
    onnx_node(&r->graph, "QuantizeLinear", qy, 3, nm[NM_Y_Q], nn, -1);
    snprintf(nn, sizeof nn, "%s/y_DQ", P);
    onnx_node(&r->graph, "DequantizeLinear", dy, 3, nm[NM_Y], nn, -1);
}

int ne_emit_projection(ne_run *r, ne_proj *p, const ne_work *wk, char *err, size_t len)
{
    /* The scales outlive wk: encodings.json lists them after the last projection. */
    p->wscale = malloc((size_t)p->n * 4);
    if (!p->wscale) {
        edgert_errf(err, len, "out of memory");
        return -1;
    }
    memcpy(p->wscale, p->wbits == 8 ? wk->s8 : wk->s4, (size_t)p->n * 4);
    qdq_names nm;
    for (int i = 0; i < NNAMES; i++)
        snprintf(nm[i], sizeof nm[i], "%s%s", p->name, name_suffix[i]);
    emit_io(r, p, nm);
    if (emit_weights(r, p, p->wbits == 8 ? wk->q8 : wk->q4, nm, err, len))
        return -1;
    emit_nodes(r, p, nm);
    return 0;
}

int ne_make_golden_dir(const ne_run *r, char *err, size_t len)
{
    char *g = ne_out_path(r, "golden");
    if (!g || (mkdir(g, 0777) != 0 && errno != EEXIST)) {
        edgert_errf(err, len, "%s/golden: cannot create: %s", r->out_dir, strerror(errno));
        free(g);
        return -1;
    }
    free(g);
    return 0;
}

int ne_write_golden(const ne_run *r, size_t pi, ne_proj *p, const ne_work *wk, char *err,
                    size_t len)
{
    size_t tk = (size_t)r->t * p->k, tn = (size_t)r->t * p->n;
    snprintf(p->golden[0], sizeof p->golden[0], "golden/%03zu.x.f32", pi);
    snprintf(p->golden[1], sizeof p->golden[1], "golden/%03zu.y_sim.f32", pi);
    snprintf(p->golden[2], sizeof p->golden[2], "golden/%03zu.y_fp32.f32", pi);
    if (write_raw(r, p->golden[0], wk->x, tk * 4, err, len) ||
        write_raw(r, p->golden[1], wk->ysim, tn * 4, err, len) ||
        write_raw(r, p->golden[2], wk->yref, tn * 4, err, len))
        return -1;
    return 0;
}

edgert_status ne_write_model(ne_run *r, char *err, size_t len)
{
    if (r->ext) {
        int e = fclose(r->ext);
        r->ext = NULL;
        if (e != 0) {
            edgert_errf(err, len, "%s/model.onnx.data: write failed: %s", r->out_dir,
                        strerror(errno));
            return EDGERT_E_IO;
        }
    }
    const ne_req *q = r->q;
    char t[16], s[16], rows[16];
    snprintf(t, sizeof t, "%u", r->t);
    snprintf(rows, sizeof rows, "%u", q->rows);
    snprintf(s, sizeof s, "%s", ne_scheme_names[q->scheme]);
    const char *meta[] = {"edgert.scheme", s, "edgert.ranges", q->ranges_text,
                          "edgert.tokens", t, "edgert.forced", q->force ? "1" : "0",
                          "edgert.rows", rows};
    pb model = {0};
    onnx_model(&model, &r->graph, "edgert_projection_bank", NE_VERSION, meta, 5);
    if (model.oom || r->graph.oom) {
        pb_free(&model);
        edgert_errf(err, len, "out of memory building model.onnx");
        return EDGERT_E_NOMEM;
    }
    int w = write_raw(r, "model.onnx", model.p, model.n, err, len);
    pb_free(&model);
    return w ? EDGERT_E_IO : EDGERT_OK;
}
