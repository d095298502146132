#!/usr/bin/env python3
"""tests/npu_export_check.py — run an `edgert export --golden` artifact with ONNX
Runtime (the onnxruntime package from PyPI, CPU), a runtime nobody here wrote.

    python npu_export_check.py EXPORT_DIR OUT_DIR [disabled|all|all-default]

Reads EXPORT_DIR/report.json for the projections, feeds each graph input
"<proj>.x" with golden/NNN.x.f32 (raw little-endian float32 [T][K]), in calls
of the graph's static row count, and writes each output "<proj>.y" (all T
rows) to OUT_DIR/NNN.y_ort.f32. The optimisation level defaults to
"disabled", so every QuantizeLinear / DequantizeLinear / MatMul runs as the
ONNX specification defines it (no fusion into integer kernels). "all" runs
every optimisation, with the fused 8-bit MatMulNBits (onnxruntime >= 1.2x
folds DequantizeLinear + MatMul into it) computing in fp32
(session.qdq_matmulnbits_accuracy_level = 1): the graph's w8a16 arithmetic,
faster. "all-default" is what a plain InferenceSession does: the same fusion
at accuracy level 4, which quantizes the activations to int8 inside the
kernel, i.e. w8a8 (measured: 6.5 dB below the report's w8a16 on the quick
export). The comparison is the C test's job
(tests/plugins/test_npu_export.c); this script prints the runtime's version and what
it ran. Exit 0 ok, 1 the graph could not be run, 2 usage.
"""
import json
import os
import sys

import numpy as np
import onnxruntime as ort

LEVELS = {"disabled": (ort.GraphOptimizationLevel.ORT_DISABLE_ALL, {}),
          "all": (ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
                  {"session.qdq_matmulnbits_accuracy_level": "1"}),
          "all-default": (ort.GraphOptimizationLevel.ORT_ENABLE_ALL, {})}


def main(argv):
    if len(argv) not in (2, 3) or (len(argv) == 3 and argv[2] not in LEVELS):
        print("usage: npu_export_check.py EXPORT_DIR OUT_DIR [disabled|all|all-default]",
              file=sys.stderr)
        return 2
    exp, out_dir = argv[0], argv[1]
    level = argv[2] if len(argv) == 3 else "disabled"
    with open(os.path.join(exp, "report.json")) as f:
        report = json.load(f)
    opts = ort.SessionOptions()
    opts.graph_optimization_level, entries = LEVELS[level]
    for key, value in entries.items():
        opts.add_session_config_entry(key, value)
    session = ort.InferenceSession(os.path.join(exp, "model.onnx"), opts,
                                   providers=["CPUExecutionProvider"])
    # The graph's shapes are static: `rows` tokens per call (report.onnx.rows).
    # The golden files hold all T samples; run them as a runtime would, in
    # ceil(T / rows) calls, the last one padded with zero rows.
    t, rows, projs = report["tokens"], report["onnx"]["rows"], report["projections"]
    xs = []
    for p in projs:
        x = np.fromfile(os.path.join(exp, p["golden"]["x"]), dtype="<f4")
        if x.size != t * p["k"]:
            raise ValueError(f"{p['golden']['x']}: {x.size} floats, expected {t}x{p['k']}")
        xs.append(x.reshape(t, p["k"]))
    ys = [np.zeros((t, p["n"]), dtype=np.float32) for p in projs]
    for r0 in range(0, t, rows):
        take = min(rows, t - r0)
        feeds = {}
        for p, x in zip(projs, xs):
            chunk = np.zeros((rows, p["k"]), dtype=np.float32)
            chunk[:take] = x[r0:r0 + take]
            feeds[p["input"]] = chunk
        results = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
        for p, y in zip(projs, ys):
            got = results.get(p["output"])
            if got is None:
                raise ValueError(f"no output {p['output']}")
            if got.shape != (rows, p["n"]):
                raise ValueError(f"{p['output']}: dims {list(got.shape)}, expected "
                                 f"[{rows}, {p['n']}]")
            y[r0:r0 + take] = got[:take]
    os.makedirs(out_dir, exist_ok=True)
    for p, y in zip(projs, ys):
        name = os.path.basename(p["golden"]["y_sim"]).replace(".y_sim.f32", ".y_ort.f32")
        y.astype("<f4").tofile(os.path.join(out_dir, name))
    print(f"onnxruntime {ort.__version__}: ran {len(projs)} projections, optimisation {level}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Exception as e:  # the C test shows this text as the failure
        print(f"npu_export_check: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
