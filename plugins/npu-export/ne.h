/*
 * plugins/npu-export/ne.h — internals shared by the npu-export plugin's files.
 * Self-contained: the plugin includes the public ABI header and links nothing
 * of the core; the safetensors reader and the JSON string writer it shares
 * with the core are compiled in as source (core/formats/safetensors.h).
 *
 *   npu_export.c   entry, init, self-test; the export's spine
 *   request.c      the key=value request
 *   inputs.c       weights and calibration samples paired into projections
 *   simulate.c     every scheme's arithmetic on a projection, against fp32
 *   emit.c         the QDQ graph (model.onnx, model.onnx.data), golden files
 *   report.c       encodings.json, report.json, report.txt, the refusal
 *   onnx_pb.c      protobuf wire format and the ONNX messages we emit
 *   quant_sim.c    quantizers and the GEMM block of the exported arithmetic
 */
#ifndef EDGERT_NPU_EXPORT_NE_H
#define EDGERT_NPU_EXPORT_NE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "edgert/export.h"
#include "edgert/plugin.h"
#include "edgert/version.h"

#define NE_NAME "npu-export"


/* ---- safetensors: the shared reader (core/formats/safetensors.h, compiled in) ---- */

#include "formats/safetensors.h"

/* ---- protobuf / ONNX -------------------------------------------------------- */

typedef struct pb {
    uint8_t *p;
    size_t n, cap;
    int oom;
} pb;

void pb_free(pb *b);
void pb_raw(pb *b, const void *d, size_t n);
void pb_varint(pb *b, uint64_t v);
void pb_uint(pb *b, unsigned field, uint64_t v);          /* wire type 0 */
void pb_bytes(pb *b, unsigned field, const void *d, size_t n); /* wire type 2 */
void pb_str(pb *b, unsigned field, const char *s);
void pb_msg(pb *b, unsigned field, const pb *sub);

/* ONNX TensorProto.DataType values used here. */
enum { ONNX_FLOAT = 1, ONNX_UINT8 = 2, ONNX_INT8 = 3, ONNX_UINT16 = 4, ONNX_INT4 = 22 };

/** GraphProto.initializer with inline raw_data. */
void onnx_init_inline(pb *graph, const char *name, int dtype, const int64_t *dims, int ndim,
                      const void *raw, size_t raw_len);
/** GraphProto.initializer whose data lives in an external file. */
void onnx_init_external(pb *graph, const char *name, int dtype, const int64_t *dims, int ndim,
                        const char *location, uint64_t offset, uint64_t length);
/** GraphProto.input (field 11) or output (field 12): a tensor with a static shape. */
void onnx_value_info(pb *graph, unsigned field, const char *name, int dtype, const int64_t *dims,
                     int ndim);
/** GraphProto.node; axis < 0: no axis attribute. */
void onnx_node(pb *graph, const char *op, const char *const *in, int nin, const char *out,
               const char *name, int64_t axis);
/** The whole ModelProto: ir_version 10, opset {"" 21}, the graph. */
void onnx_model(pb *model, const pb *graph, const char *graph_name, const char *producer_version,
                const char *const *meta_kv, int nmeta);
/** Self-test: known encodings of the wire format. 0 on success. */
int pb_self_test(char *err, size_t len);

/* ---- quantization and simulation ------------------------------------------- */

/** Affine quantization of activations: q = clamp(rne(x / scale) + zp, 0, qmax),
 *  x' = (q - zp) * scale — exactly ONNX QuantizeLinear/DequantizeLinear. */
typedef struct ne_aq {
    float scale;
    int32_t zp;
    int32_t qmax; /* 65535 or 255 */
    float lo, hi; /* the range it was derived from (includes 0) */
} ne_aq;

/** Range kinds. */
typedef enum {
    NE_RANGE_MINMAX,
    NE_RANGE_PERCENTILE,
    NE_RANGE_FIXED,
    NE_RANGE_MARGIN
} ne_range_kind;
typedef struct ne_range {
    ne_range_kind kind;
    double pct; /* percentile: keep [100 - pct, pct]; margin: [-F m, F m], m = max|v| */
} ne_range;

/** [lo, hi] of values[0..n) for a range kind (scratch: n floats, may be NULL for
 *  minmax/fixed); always widened to include 0. */
void ne_range_of(const float *v, size_t n, ne_range r, float *scratch, float *lo, float *hi);
ne_aq ne_aq_make(float lo, float hi, unsigned bits);
float ne_aq_apply(const ne_aq *q, float x);
/** Per-output-channel symmetric weights: scale = max|w| / qmax, codes in
 *  [-qmax, qmax] (qmax 127 for int8, 7 for int4). q: [n][k] row-major. */
void ne_wquant(const float *w, uint32_t n, uint32_t k, int qmax, int8_t *q, float *scale);

/** y[t][n] = sum_k x[t][k] * wt[k][n] for a block of columns: wt is [k][nb]
 *  (nb <= NE_NB), y is [t][nb]. Fixed summation order (k ascending). */
#define NE_NB 64u
void ne_gemm_block(const float *x, uint32_t t, uint32_t k, const float *wt, uint32_t nb, float *y);
/** Self-test: the quantizer, percentile selection and the GEMM block against
 *  known answers. 0 on success. */
int ne_quant_self_test(char *err, size_t len);

/* ---- the export run: what the steps share ----------------------------------- */

#define NE_VERSION EDGERT_VERSION_STRING /* in-tree plugins version with edgert */

/* Device figures (architecture.md, Measured background), cited in refusals and the report. */
#define DEV_W8A16_DB 36.9
#define DEV_A8_DB 5.1
#define DEV_W4A16_UNCAL_DB (-1.6)

enum { SCHEME_W8A16 = 0, SCHEME_W8A8, SCHEME_W4A16 };
extern const char *const ne_scheme_names[3]; /* request.c */

/* Rows per call of the exported graph when the request names none: a
 * prefill chunk of 128 tokens; rows=1 exports a decode graph. */
#define NE_DEFAULT_ROWS 128u

/* The ranges when the request names none: request.c says why (measured). */
#define NE_DEFAULT_RANGES "margin:4"

/* Held-out samples: the last floor(T / 4) of each projection's T samples
 * (T >= NE_MIN_HOLDOUT_T), a contiguous block because captured tokens are
 * correlated with their neighbours; ranges come from the first T - T/4 only. */
#define NE_MIN_HOLDOUT_T 8u

/** The parsed request; the strings point into buf (the request, copied). */
typedef struct ne_req {
    char *buf;
    const char *weights, *calibration, *head;
    int scheme, force, golden;
    uint32_t rows; /* rows per call of the graph (its static shapes) */
    ne_range ranges;
    char ranges_text[32];
} ne_req;

/** One simulated configuration: what the report measures for each scheme. */
typedef struct ne_cfg {
    const char *name;
    int wbits, abits;
    ne_range ranges;
    const char *what;
} ne_cfg;

enum { CFG_W8A16, CFG_W8A8, CFG_W8A8_PCT, CFG_W8A16_UNCAL, CFG_W4A16, CFG_W4A16_UNCAL,
       CFG_EXPORTED, NCFG };

/** One projection: a "<name>.weight" [N][K] with its "<name>.x" [T][K]. */
typedef struct ne_proj {
    char *name;
    const st_tensor *w, *x;
    uint32_t n, k;
    int head;
    /* results: energies of the fp32 outputs (sig) and of each configuration's
     * error (noise), over the calibration samples (in-sample) and over the
     * held-out ones (_ho: samples the ranges were not taken from) */
    double sig, noise[NCFG];
    double sig_ho, noise_ho[NCFG];
    int wbits, abits;       /* exported */
    ne_aq xq, yq;           /* exported */
    float *wscale;          /* exported per-channel scales [n] */
    char golden[3][48];
} ne_proj;

#define NE_MAX_WARN 8
#define NE_WARN_LEN 512

/** One export_graph call: everything the steps share. */
typedef struct ne_run {
    const edgert_host *host;
    const ne_req *q;
    ne_cfg cfg[NCFG];
    st_file wf, cf;
    ne_proj *p;
    size_t np;
    uint32_t t;             /* samples per projection */
    uint32_t tc;            /* the first tc calibrate the ranges; the t - tc after are held out */
    const char *out_dir;
    int refused;            /* simulate only, write nothing */
    pb graph;
    FILE *ext;
    int ext_used;
    uint64_t ext_off;
    char warnings[NE_MAX_WARN][NE_WARN_LEN];
    int nwarn;
} ne_run;

/** The working buffers of one projection, alive while it is processed. */
typedef struct ne_work {
    float *w, *x;        /* [n][k] weights, [t][k] calibration samples, fp32 */
    int8_t *q8, *q4;     /* [n][k] per-channel int8 / int4 codes */
    float *s8, *s4;      /* [n] their scales */
    float *yref;         /* [t][n] fp32 outputs */
    float *ysim;         /* [t][n] the exported config's simulated outputs (golden only) */
    float *scratch;      /* max(t n, t k) floats for percentile selection */
    float *xd[NCFG];     /* [t][k] quantized-dequantized inputs per distinct config */
    uint32_t nblocks;    /* blocks of NE_NB output columns */
    double *sig, *noise; /* per block and part (0 in-sample, 1 held out):
                          * [nblocks][2], [nblocks][NCFG][2] */
} ne_work;

/* npu_export.c: services of the run. */
/** out_dir/rel, malloc'd (NULL when out of memory). */
char *ne_out_path(const ne_run *r, const char *rel);
/** The next free warning of the report, or NULL once NE_MAX_WARN are taken
 *  (edgert_errf then writes nothing): edgert_errf(ne_warning(r), NE_WARN_LEN, ...). */
char *ne_warning(ne_run *r);

/* ---- request.c ------------------------------------------------------------------ */

/** Parse and check the request; q->buf is set (to free) whatever the outcome. */
edgert_status ne_parse_request(const char *request, ne_req *q, char *err, size_t len);

/* ---- inputs.c ------------------------------------------------------------------- */

/** Open and check the inputs: the weights (4-bit ones refused), the
 *  calibration samples, one ne_proj per "<proj>.weight" in file order with
 *  its "<proj>.x", and r->t. */
edgert_status ne_open_inputs(ne_run *r, char *err, size_t len);
/** Read projection p's weights w [n][k] and samples x [t][k] as fp32;
 *  refuses non-finite values and samples that are all one value, as a bad
 *  input file (EDGERT_E_PARSE). */
edgert_status ne_read_projection(ne_run *r, const ne_proj *p, float *w, float *x, char *err,
                                 size_t len);

/* ---- simulate.c ----------------------------------------------------------------- */

/** The configurations the report compares. */
void ne_make_cfgs(const ne_req *q, ne_cfg *c);
/** Allocate a projection's buffers; *wk can be freed either way. */
int ne_work_alloc(const ne_run *r, const ne_proj *p, ne_work *wk, char *err, size_t len);
void ne_work_free(ne_work *wk);
/** Quantize the weights read into wk, simulate every configuration and fill
 *  p's results: signal and noise energies, the exported precision and
 *  encodings (and wk->ysim when golden files are due). */
int ne_simulate(const ne_run *r, ne_proj *p, ne_work *wk, char *err, size_t len);

/* ---- emit.c --------------------------------------------------------------------- */

/** Add projection p's QDQ subgraph to r->graph: its initializers inline or in
 *  model.onnx.data; keeps its weight scales in p->wscale. */
int ne_emit_projection(ne_run *r, ne_proj *p, const ne_work *wk, char *err, size_t len);
int ne_make_golden_dir(const ne_run *r, char *err, size_t len);
/** golden/NNN.{x,y_sim,y_fp32}.f32 of projection pi (NNN = pi), named in p->golden. */
int ne_write_golden(const ne_run *r, size_t pi, ne_proj *p, const ne_work *wk, char *err,
                    size_t len);
/** Finish model.onnx.data and write model.onnx around r->graph. */
edgert_status ne_write_model(ne_run *r, char *err, size_t len);

/* ---- report.c ------------------------------------------------------------------- */

/** Warn about each projection whose exported arithmetic measured below the
 *  report's flag. */
void ne_flag_warnings(ne_run *r);
int ne_write_encodings(const ne_run *r, char *err, size_t len);
int ne_write_reports(const ne_run *r, char *err, size_t len);
/** The refusal of a refused scheme or range: this run's figures and the device's. */
void ne_refusal(const ne_run *r, char *err, size_t len);

#endif
