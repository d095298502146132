// tests/npu_export_check.js — run an `edgert export --golden` artifact with
// ONNX Runtime (onnxruntime-node, CPU), a runtime nobody here wrote.
//
//   node npu_export_check.js EXPORT_DIR OUT_DIR [disabled|all]
//
// Reads EXPORT_DIR/report.json for the projections, feeds each graph input
// "<proj>.x" with golden/NNN.x.f32 (raw little-endian float32 [T][K]), in
// calls of the graph's static row count, and writes each output "<proj>.y"
// (all T rows) to OUT_DIR/NNN.y_ort.f32. The optimisation
// level defaults to "disabled" so every QuantizeLinear / DequantizeLinear /
// MatMul runs as the ONNX spec defines it (no fusion into integer kernels).
// The comparison is the C test's job (tests/test_npu_export.c); this script
// only prints the runtime version and what it ran. NODE_PATH points it at the
// cached install.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

async function main() {
  const [dir, outDir, level = 'disabled'] = process.argv.slice(2);
  if (!dir || !outDir) {
    console.error('usage: node npu_export_check.js EXPORT_DIR OUT_DIR [disabled|all]');
    process.exit(2);
  }
  const report = JSON.parse(fs.readFileSync(path.join(dir, 'report.json'), 'utf8'));
  const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), {
    graphOptimizationLevel: level,
    executionProviders: ['cpu'],
  });
  // The graph's shapes are static: `rows` tokens per call (report.onnx.rows).
  // The golden files hold all T samples; run them as a runtime would, in
  // ceil(T / rows) calls, the last one padded with zero rows.
  const T = report.tokens, rows = report.onnx.rows;
  const xs = report.projections.map((p) => {
    const buf = fs.readFileSync(path.join(dir, p.golden.x));
    const data = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
    if (data.length !== T * p.k) throw new Error(`${p.golden.x}: ${data.length} floats, expected ${T}x${p.k}`);
    return data;
  });
  const ys = report.projections.map((p) => new Float32Array(T * p.n));
  for (let r0 = 0; r0 < T; r0 += rows) {
    const take = Math.min(rows, T - r0);
    const feeds = {};
    report.projections.forEach((p, i) => {
      const chunk = new Float32Array(rows * p.k);
      chunk.set(xs[i].subarray(r0 * p.k, (r0 + take) * p.k));
      feeds[p.input] = new ort.Tensor('float32', chunk, [rows, p.k]);
    });
    const results = await session.run(feeds);
    report.projections.forEach((p, i) => {
      const y = results[p.output];
      if (!y) throw new Error(`no output ${p.output}`);
      if (y.dims.length !== 2 || y.dims[0] !== rows || y.dims[1] !== p.n)
        throw new Error(`${p.output}: dims ${y.dims}, expected [${rows}, ${p.n}]`);
      ys[i].set(y.data.subarray(0, take * p.n), r0 * p.n);
    });
  }
  fs.mkdirSync(outDir, { recursive: true });
  report.projections.forEach((p, i) => {
    const name = path.basename(p.golden.y_sim).replace('.y_sim.f32', '.y_ort.f32');
    fs.writeFileSync(path.join(outDir, name), Buffer.from(ys[i].buffer));
  });
  console.log(`onnxruntime-node ${ort.env.versions.common}: ran ${report.projections.length} projections, optimisation ${level}`);
}

main().catch((e) => {
  console.error(`npu_export_check: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
