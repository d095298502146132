#!/usr/bin/env python3
"""What driving edgert from Python costs: a GEMM call's overhead, and a
decode step through Backend.step against `edgert bench`'s own step.

    PYTHONPATH=build/python tests/perf/python_api.py [--edgert build/bin/edgert]
        [--backend NAME] [--rounds 5] [--calls 20000] [--no-step]

Overhead: per round, --calls calls of Backend.gemm (M = 1, a 64 x 256
matrix, the same x and out each call, as a decode loop passes them), and as
many of the same edgert_gemm through ctypes with its arguments prepared
once: the C call plus ctypes' own crossing, an upper bound of the C call
alone. Interleaved, so both see the same moments of a shared machine. The
overhead is the difference, per call (median [min..max] over the rounds);
the ctypes crossing of a call that does nothing (edgert_version) is given
beside it, what the "raw" figure holds above C.

Step: the built-in workload's shapes (spark-1.7b: `edgert bench` prints
them), each layer packed on its own from seeded codes (group 128,
symmetric) so a step streams its weights from memory as bench's does; then
per round one `edgert bench --phase decode --json` (its median step) and 5
Backend.step calls of the same GEMMs (layers in order, the head last),
alternating. The ratio is Python's median step over bench's, per round:
median [min..max]. Bench's steps and Python's meet other memory-bandwidth
windows, seconds apart, so the same ops are also run as one prepared
edgert_step call through ctypes, alternating with Backend.step step by
step: that ratio, per pair, is what driving the step from Python adds.

Never beside another benchmark or build: the machine has two cores.
"""
import argparse
import ctypes
import json
import statistics
import subprocess
import sys
import time

import numpy as np

import edgert
from edgert import _native


def spread(v):
    return f"{statistics.median(v):.3f} [{min(v):.3f}..{max(v):.3f}]"


def overhead(ctx, backend, rounds, calls):
    be = ctx.backend(backend)
    rng = np.random.default_rng(1)
    q = edgert.quantize_rtn(rng.standard_normal((64, 256)).astype(np.float32), group=128)
    p = be.pack(q)
    x = rng.standard_normal(256).astype(np.float32)
    y = np.empty(64, np.float32)
    args = _native.GemmArgs(ctypes.sizeof(_native.GemmArgs), 1, x.ctypes.data, 256,
                            y.ctypes.data, 64)
    err = ctypes.create_string_buffer(2048)
    fn, bp, pp, ar = edgert._lib.edgert_gemm, be._ptr, p._ptr, ctypes.byref(args)
    version = edgert._lib.edgert_version
    wrap, raw, cross = [], [], []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(calls):
            be.gemm(p, x, y)
        wrap.append((time.perf_counter() - t) / calls * 1e6)
        t = time.perf_counter()
        for _ in range(calls):
            fn(bp, pp, ar, err, 2048)
        raw.append((time.perf_counter() - t) / calls * 1e6)
        t = time.perf_counter()
        for _ in range(calls):
            version()
        cross.append((time.perf_counter() - t) / calls * 1e6)
    diff = [a - b for a, b in zip(wrap, raw)]
    print(f"gemm M = 1, 64 x 256 on {be.name} ({rounds} rounds of {calls} calls), us per call:")
    print(f"  Backend.gemm          {spread(wrap)}")
    print(f"  ctypes, args ready    {spread(raw)}")
    print(f"  overhead              {spread(diff)}  (target <= 5 above the C call)")
    print(f"  a ctypes call of edgert_version: {spread(cross)}")
    return {"backend": be.name, "wrapper_us": wrap, "raw_us": raw, "overhead_us": diff,
            "crossing_us": cross}


def bench_step(edgert_cli, backend):
    p = subprocess.run([edgert_cli, "bench", "--backend", backend, "--phase", "decode",
                        "--json"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"python_api: edgert bench exited {p.returncode}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def step(ctx, backend, edgert_cli, rounds):
    first = bench_step(edgert_cli, backend)
    shapes = first["shapes"]
    be = ctx.backend(backend)
    rng = np.random.default_rng(2)
    packed, ops_body, ops_head = {}, [], []
    for s in shapes:
        n, k = s["n"], s["k"]
        g = 128
        q = edgert.QWeights(rng.integers(0, 256, (n, (k + 1) // 2), dtype=np.uint8),
                            np.full((n, -(-k // g)), 0.01, np.float32), None, n, k, g)
        x = rng.standard_normal(k).astype(np.float32)
        y = np.empty(n, np.float32)
        packed[s["name"]] = [be.pack(q) for _ in range(s["count"])]
        for i, pk in enumerate(packed[s["name"]]):
            (ops_head if s["head"] else ops_body).append((i, edgert.StepOp(pk, x, y)))
    ops = [op for _, op in sorted(ops_body, key=lambda t: t[0])] + [op for _, op in ops_head]
    gib = sum(pk.nbytes for v in packed.values() for pk in v) / 2**30
    print(f"step: {len(ops)} GEMMs packed ({gib:.2f} GiB), {rounds} rounds:")
    # the same ops as one C call, laid out once (prepare_step's array, called
    # through ctypes directly): what Backend.step adds, alternating step by step
    prep = be.prepare_step(ops)
    arr = prep.arr
    err = ctypes.create_string_buffer(2048)
    c_step = edgert._lib.edgert_step
    pair, pair_prep = [], []
    for _ in range(rounds * 8):
        t = time.perf_counter()
        be.step(ops)
        a = time.perf_counter() - t
        t = time.perf_counter()
        be.step(prep)
        b = time.perf_counter() - t
        t = time.perf_counter()
        assert c_step(be._ptr, arr, len(ops), err, 2048) == 0, err.value
        c = time.perf_counter() - t
        pair.append(a / c)
        pair_prep.append(b / c)
    print(f"  over the same ops as one ctypes call, {len(pair)} triples, per triple:")
    print(f"    Backend.step(list)          {spread(pair)}")
    print(f"    Backend.step(prepare_step)  {spread(pair_prep)}")
    ratios, py_ms, b_ms = [], [], []
    for _ in range(rounds):
        b = bench_step(edgert_cli, backend)["decode"]["ms_per_step"]["median"]
        be.step(prep)  # one untimed, as bench warms up
        times = []
        for _ in range(5):
            t = time.perf_counter()
            be.step(prep)
            times.append((time.perf_counter() - t) * 1e3)
        m = statistics.median(times)
        py_ms.append(m)
        b_ms.append(b)
        ratios.append(m / b)
    print(f"  bench's step ms       {spread(b_ms)}")
    print(f"  Backend.step ms       {spread(py_ms)}")
    print(f"  ratio                 {spread(ratios)}  (target <= 1.02)")
    return {"bench_ms": b_ms, "python_ms": py_ms, "ratio": ratios, "paired_ratio": pair,
            "paired_ratio_prepared": pair_prep}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--edgert", default="build/bin/edgert")
    ap.add_argument("--backend", default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--no-step", action="store_true")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    with edgert.open() as ctx:
        backend = a.backend or ctx.select("speed").selected.name
        d = ctx.device
        print(f"machine: {d.name} ({d.cpu_id}), {d.logical_cores} threads; "
              f"libedgert {edgert.library_path()}")
        out = {"overhead": overhead(ctx, backend, a.rounds, a.calls)}
        if not a.no_step:
            out["step"] = step(ctx, backend, a.edgert, a.rounds)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
