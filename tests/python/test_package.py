"""tests/python/test_package.py — the Python package `edgert` (python/edgert)
against the build tree's libedgert: finding and refusing libraries, the
probe and plans, selections and the selector's account, every eligible
in-process backend's GEMM against a float64 reference within the bound
derived below, gemm and step bit for bit against each other and across
threads, every refusal, closing in order, and no growth of the resident set
over thousands of pack/gemm/free cycles.

GEMM bound, per output y[i][r] against float64 x . W^T on the library's
own dequantized W (edgert_dequantize, so the 4-bit codes are not the
error): fp32 accumulation of K products, (K + 2) 2^-24 sum |x_k w_k|; plus
the activations' rounding, by the activation type the backend applies on
this device (its manifest's, after the bf16 fallback), each x_k off by:
  fp32:  nothing;
  fp16:  2^-11 of itself; bf16: 2^-9 of itself;
  int16: 15-bit integers per block of 128 inputs, 2^-13 of the block's
         max |x| (the vendor example's a2_kern_avx2.c header); avx512-w4a16,
         which declares bf16, runs that on its int16 path: bf16 gets both;
  int8:  half a step of the row's max |x| / 127 (a per-group scale only
         lowers it).
The bound is worst-case (the errors seen are 20-400x below it), yet a
scale off by 1% breaks it on int16: what it catches is the wrong number,
not the rounding.
"""
import ctypes
import gc
import json
import math
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

BUILD_PY = os.environ.get("EDGERT_TEST_PYTHONPATH", "")
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
DEVICES = os.path.join(FIXTURES, "devices")

# Every case reports skipped, with the reason (conftest.py: the "SKIPPED:"
# lines, exit 77), where this Python cannot load the library under test.
NOT_HERE = None
if os.environ.get("EDGERT_TEST_EMULATED") == "1":
    NOT_HERE = ("libedgert is built for another architecture (run under an emulator): this "
                "Python cannot load it")
elif os.environ.get("EDGERT_TEST_SANITIZED") == "1":
    NOT_HERE = ("libedgert is built with sanitizers, whose runtime a Python interpreter does "
                "not load")
pytestmark = pytest.mark.skipif(NOT_HERE is not None, reason=NOT_HERE or "")
if NOT_HERE is None:
    sys.path.insert(0, BUILD_PY)
    import edgert  # noqa: E402
    BACKENDS = os.path.join(os.path.dirname(edgert.library_path()), "edgert", "backends")


def live(**kw):
    kw.setdefault("ignore_env", True)
    kw.setdefault("manifest_paths", [BACKENDS])
    return edgert.open(**kw)


def in_process():
    if NOT_HERE is not None:
        return ["none"]  # the cases skip before they run
    with live() as ctx:
        return [c.name for c in ctx.candidates if c.eligible and c.runs_in_process]


# ---- the library -------------------------------------------------------------------------


def _copy_package(tmp_path, version, dirs):
    pkg = tmp_path / "edgert"
    shutil.copytree(os.path.join(BUILD_PY, "edgert"), pkg)
    (pkg / "_build.py").write_text(f"VERSION = {version!r}\nSOVERSION = '0'\n"
                                   f"LIBRARY_DIRS = {dirs!r}\n")
    return str(tmp_path)


def _import_in(path, env=None):
    e = {k: v for k, v in os.environ.items() if k != "EDGERT_LIBRARY"}
    e.update(PYTHONPATH=path, **(env or {}))
    return subprocess.run([sys.executable, "-c", "import edgert; print(edgert.library_path())"],
                          env=e, capture_output=True, text=True)


def test_library_found_and_refused(tmp_path):
    assert edgert.__version__ == edgert.library_version()
    assert os.path.isfile(edgert.library_path())
    libdir = os.path.dirname(edgert.library_path())
    # another version than the library's: refused, naming both
    r = _import_in(_copy_package(tmp_path / "v", "9.9.9", [(libdir, "test")]))
    assert r.returncode != 0
    assert f"is libedgert {edgert.__version__}" in r.stderr and "built for 9.9.9" in r.stderr
    # nowhere to be found: says where it looked
    r = _import_in(_copy_package(tmp_path / "n", edgert.__version__, [("/nonexistent", "test")]))
    assert r.returncode != 0
    assert "/nonexistent/libedgert.so.0 (test: no such file)" in r.stderr
    assert "next to the package" in r.stderr
    # EDGERT_LIBRARY first
    r = _import_in(_copy_package(tmp_path / "e", edgert.__version__, [("/nonexistent", "x")]),
                   {"EDGERT_LIBRARY": edgert.library_path()})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == edgert.library_path()


# ---- probe, plans, selections --------------------------------------------------------------


def test_probe_and_plan():
    d = edgert.probe(ignore_env=True)
    assert not d.planned and d.arch in ("x86_64", "aarch64") and d.logical_cores >= 1
    p = edgert.probe(device_profile=os.path.join(DEVICES, "x86-amx.yaml"), ignore_env=True)
    assert p.planned and p.arch == "x86_64" and "amx_tile" in p.cpu_flags
    json.dumps(p.to_dict())


def test_selection_and_its_account():
    with live(device_profile=os.path.join(DEVICES, "x86-amx.yaml")) as ctx:
        s = ctx.select(priority="speed")
        assert s.selected.name == "amx-w4a8" and s.priority == "speed"
        assert [r.rank for r in s.ranking] == list(range(1, len(s.ranking) + 1))
        by = {r.candidate.name: r for r in s.ranking}
        assert by["amx-w4a8"].decided_by == "none"
        assert by["avx512-w4a8"].decided_by == "specialization"  # one declared decode figure
        assert by["ref-w4a16"].decided_by == "tier" and by["ref-w4a16"].tier == "reference"
        assert all(r.decode_source == "declared" and r.decode_measured is False
                   for r in s.ranking if r.decode_tokens_per_s is not None)
        f = ctx.select(priority="fidelity")
        assert f.selected.name == "avx512-w4a16"
        assert f.selected.layout.activation_bits == 16 and f.selected.layout.weight_bits == 4
        not_here = [c for c in f.candidates if not c.eligible]
        assert not_here and all(c.reasons for c in not_here)
        d = json.loads(json.dumps(f.to_dict()))
        assert d["selected"]["name"] == "avx512-w4a16" and d["ranking"][0]["rank"] == 1
        assert "avx512-w4a16" in str(f) and "not eligible" in str(f)


def test_errors_carry_status_and_message():
    with pytest.raises(edgert.Error) as e:
        edgert.open(device_profile="/nonexistent/profile.yaml", ignore_env=True)
    assert e.value.code != 0 and e.value.status.startswith("E_")
    assert "/nonexistent/profile.yaml" in e.value.message
    with live() as ctx:
        with pytest.raises(edgert.Error) as e:
            ctx.select(priority="fast")
        assert e.value.status == "E_USAGE"
        with pytest.raises(edgert.Error) as e:
            ctx.select(backend="no-such-backend")
        assert e.value.status == "E_NOT_FOUND" and "no-such-backend" in e.value.message
        with pytest.raises(edgert.Error) as e:
            ctx.backend("neon-w4a16" if edgert.probe().arch == "x86_64" else "avx512-w4a16")
        assert e.value.status == "E_NOT_ELIGIBLE"
    with pytest.raises(TypeError, match="unexpected keyword argument 'thread'"):
        edgert.open(thread=2)


# ---- GEMM ----------------------------------------------------------------------------------


def bound(x, w, dtype):
    """Per output, the bound of the module's docstring."""
    xa, wa = np.abs(x.astype(np.float64)), np.abs(w.astype(np.float64))
    k = x.shape[1]
    prod = xa @ wa.T
    b = (k + 2) * 2.0 ** -24 * prod
    rel = {"fp32": 0.0, "fp16": 2.0 ** -11, "bf16": 2.0 ** -9}.get(dtype)
    if rel is not None:
        b += rel * prod
    if dtype in ("int16", "bf16"):
        for s in range(0, k, 128):
            mx = xa[:, s:s + 128].max(axis=1, keepdims=True)
            b += 2.0 ** -13 * mx * wa[:, s:s + 128].sum(axis=1)[None, :]
    elif dtype == "int8":
        b += 0.5 * xa.max(axis=1, keepdims=True) / 127.0 * wa.sum(axis=1)[None, :]
    elif rel is None:
        pytest.fail(f"no bound for activations of type {dtype}: derive one")
    return b


@pytest.mark.parametrize("name", in_process())
def test_gemm_against_reference(name):
    rng = np.random.default_rng(7)
    with live() as ctx:
        cand = next(c for c in ctx.candidates if c.name == name)
        assert cand.arithmetic_checked > 0  # first contact's check by the core ran and passed
        be = ctx.backend(name)
        # n odd; k a multiple of the group and not (where the layout packs a partial group)
        for n, k, group, sym in ((67, 256, 128, True), (33, 512, 64, False), (5, 200, 128, True)):
            w = rng.standard_normal((n, k)).astype(np.float32)
            q = edgert.quantize_rtn(w, group=group, symmetric=sym)
            try:
                p = be.pack(q)
            except edgert.Error as e:
                assert e.status == "E_UNSUPPORTED", e
                continue
            wd = q.dequantize()
            for m in (1, 3, 17):
                x = rng.standard_normal((m, k)).astype(np.float32)
                y = be.gemm(p, x)
                ref = x.astype(np.float64) @ wd.T.astype(np.float64)
                err = np.abs(y - ref)
                b = bound(x, wd, cand.activation_dtype)
                assert (err <= b).all(), (name, n, k, m, float((err / b).max()))
                # a row as 1-D and as [1, k] (one code path: m picks it), strided
                # rows, an out= array: the same bits
                assert np.array_equal(be.gemm(p, x[m // 2]), be.gemm(p, x[m // 2:m // 2 + 1])[0])
                wide = np.zeros((m, k + 9), np.float32)
                wide[:, :k] = x
                out = np.full((m, n), np.nan, np.float32)
                assert be.gemm(p, wide[:, :k], out=out) is out
                assert np.array_equal(out, y)
            p.close()


def _one_backend():
    names = in_process()
    return names[0] if names else pytest.skip("no in-process backend is eligible here")


def _backend_packing(ctx, w):
    """The first eligible in-process backend whose layout takes w: the first
    backend alone may not (amx-w4a8, first on an AMX CPU, holds groups of
    128 only; ref-w4a16, always eligible, takes every group)."""
    for name in in_process():
        be = ctx.backend(name)
        try:
            return be, be.pack(w)
        except edgert.Error as e:
            if e.status != "E_UNSUPPORTED":
                raise
    pytest.fail(f"no eligible backend packs group {w.group}")


def test_step_threads_and_callbacks():
    rng = np.random.default_rng(3)
    with live(threads=2) as ctx:
        be = ctx.backend(_one_backend())
        q = edgert.quantize_rtn(rng.standard_normal((96, 256)).astype(np.float32), group=128)
        p = be.pack(q)
        x = rng.standard_normal((4, 256)).astype(np.float32)
        y = be.gemm(p, x)
        # two Python threads on one backend: the GIL is released, results identical
        outs = [np.zeros_like(y) for _ in range(4)]
        ts = [threading.Thread(target=lambda o=o: [be.gemm(p, x, out=o) for _ in range(50)])
              for o in outs]
        [t.start() for t in ts]
        [t.join() for t in ts]
        assert all(np.array_equal(o, y) for o in outs)
        # a step: the same bits, the callbacks in order between the GEMMs
        ys = [np.zeros_like(y) for _ in range(3)]
        seen = []

        def after(i):
            seen.append((i, np.array_equal(ys[i], y), np.count_nonzero(ys[i + 1:])))
        be.step([edgert.StepOp(p, x, ys[i], after=after) for i in range(3)])
        assert seen == [(0, True, 0), (1, True, 0), (2, True, 0)]
        # prepared once, run many times: the same bits; its arrays are read
        # anew each run; a packed matrix freed since is refused, never run
        ys2 = [np.zeros_like(y) for _ in range(2)]
        prep = be.prepare_step([edgert.StepOp(p, x, ys2[i]) for i in range(2)])
        be.step(prep)
        assert all(np.array_equal(v, y) for v in ys2)
        x[:] = x[::-1].copy()
        be.step(prep)
        assert np.array_equal(ys2[1], be.gemm(p, x))
        other = ctx.backend(be.name)
        with pytest.raises(edgert.Error, match="prepared for another backend"):
            other.step(prep)
        p_tmp = be.pack(q)
        prep = be.prepare_step([edgert.StepOp(p_tmp, x, ys2[0])])
        p_tmp.close()
        with pytest.raises(edgert.Error, match="packed is closed"):
            be.step(prep)
        y = be.gemm(p, x)
        # an exception in a callback ends the step and is raised
        zs = [np.zeros_like(y) for _ in range(2)]

        def boom(i):
            raise KeyError("from the callback")
        with pytest.raises(KeyError, match="from the callback"):
            be.step([edgert.StepOp(p, x, zs[0], after=boom), edgert.StepOp(p, x, zs[1])])
        assert np.array_equal(zs[0], y) and not zs[1].any()


def test_foreign_arrays():
    """x from other libraries: DLPack, the buffer protocol, __array_interface__."""
    rng = np.random.default_rng(9)
    with live() as ctx:
        be = ctx.backend(_one_backend())
        p = be.pack(edgert.quantize_rtn(rng.standard_normal((16, 128)).astype(np.float32)))
        x = rng.standard_normal((2, 128)).astype(np.float32)
        y = be.gemm(p, x)

        class DLPack:  # a CPU tensor of another library, as DLPack sees it
            def __dlpack__(self, **kw):
                return x.__dlpack__(**kw)

            def __dlpack_device__(self):
                return x.__dlpack_device__()

        class Interface:
            __array_interface__ = x.__array_interface__

        for foreign in (DLPack(), memoryview(x), Interface()):
            assert np.array_equal(be.gemm(p, foreign), y), type(foreign).__name__


def test_refusals():
    rng = np.random.default_rng(5)
    with live() as ctx:
        be = ctx.backend(_one_backend())
        q = edgert.quantize_rtn(rng.standard_normal((8, 128)).astype(np.float32))
        p = be.pack(q)
        x = np.ones((2, 128), np.float32)
        bad = [(x.astype(np.float64), "dtype float64"), (np.ones((2, 64), np.float32), "shape"),
               (np.ones((2, 256), np.float32)[:, ::2], "columns must be contiguous"),
               (np.ones((0, 128), np.float32), "shape")]
        for xb, why in bad:
            with pytest.raises(edgert.Error, match=why) as e:
                be.gemm(p, xb)
            assert e.value.status == "E_USAGE"
        with pytest.raises(edgert.Error, match="out: shape"):
            be.gemm(p, x, out=np.zeros((2, 9), np.float32))
        ro = np.zeros((2, 8), np.float32)
        ro.flags.writeable = False
        with pytest.raises(edgert.Error, match="read-only"):
            be.gemm(p, x, out=ro)
        with pytest.raises(edgert.Error, match="codes: dtype"):
            be.pack(edgert.QWeights(q.codes.astype(np.int32), q.scales, q.zeros, 8, 128, 128))
        with pytest.raises(edgert.Error, match="scales: shape"):
            be.pack(edgert.QWeights(q.codes, q.scales[:, :0], q.zeros, 8, 128, 128))
        other = ctx.backend(be.name)
        with pytest.raises(edgert.Error, match="another backend instance"):
            other.gemm(p, x)
        p.close()
        with pytest.raises(edgert.Error, match="packed is closed"):
            be.gemm(p, x)
        p2 = be.pack(q)
        be.close()
        assert p2.closed  # freed before its backend closed
        with pytest.raises(edgert.Error, match="backend is closed"):
            be.pack(q)
        other.close()
        other.close()  # twice: nothing


def test_closing_in_order_and_collection():
    ctx = live()
    be = ctx.backend(_one_backend())
    p = be.pack(edgert.quantize_rtn(np.ones((4, 128), np.float32)))
    ctx.close()
    assert p.closed and be.closed and ctx.closed
    with pytest.raises(edgert.Error, match="context is closed"):
        ctx.candidates
    # dropped in any order: a backend keeps its context, packed weights their backend
    ctx = live()
    be = ctx.backend(_one_backend())
    p = be.pack(edgert.quantize_rtn(np.ones((4, 128), np.float32)))
    del ctx, be
    gc.collect()
    assert not p.closed
    y = p._owner.gemm(p, np.ones(128, np.float32))
    assert y.shape == (4,)
    del p, y
    gc.collect()


def make_test_model(folder, seed):
    """A seeded tiny dense model (tools/models/make_test_model.py) in folder."""
    tools = os.path.join(os.path.dirname(os.path.dirname(FIXTURES)), "tools", "models")
    r = subprocess.run([sys.executable, os.path.join(tools, "make_test_model.py"), str(folder),
                        "--shape", "tiny", "--seed", str(seed)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return folder


def test_checkpoints(tmp_path):
    """A seeded dense model (tools/models/make_test_model.py): its layers,
    quantized to GPTQ (edgert.quantize), one layer as 4-bit weights equal to
    its dequantized rows, packed to a file whose mapped layer gives the
    in-memory pack's bits, and a malformed file refused naming it."""
    dense = edgert.Checkpoint(make_test_model(tmp_path / "m", 3) / "model.safetensors")
    assert dense.kind == "dense" and dense.layers and all(x.group == 0 for x in dense.layers)
    gptq_path = tmp_path / "gptq.safetensors"
    edgert.quantize(dense.path, gptq_path, group=32, symmetric=True)
    with edgert.Checkpoint(gptq_path) as ck:
        assert ck.kind == "gptq"
        lay = ck.layers[0]
        assert lay.group == 32 and lay.symmetric is True and lay.format.startswith("gptq")
        w = ck.weights(lay.name)
        assert (w.n, w.k, w.group) == (lay.n, lay.k, 32) and w.zeros is None  # symmetric
        assert np.array_equal(w.dequantize(), ck.dense(lay))
        assert np.array_equal(ck.dense(lay, rows=(2, 5)), ck.dense(lay)[2:5])
        with live() as ctx:
            be, packed = _backend_packing(ctx, w)
            x = np.random.default_rng(4).standard_normal((3, lay.k)).astype(np.float32)
            want = be.gemm(packed, x)
            packed_path = tmp_path / "packed.safetensors"
            assert not ck.pack_matches(be, packed_path)
            ck.pack(be, packed_path)
            assert ck.pack_matches(be, packed_path)
            with edgert.Checkpoint(packed_path) as pk:
                assert pk.kind == "packed"
                p = pk.packed(lay.name, be)
                assert np.array_equal(be.gemm(p, x), want)
            assert p.closed  # freed when its checkpoint closed
            assert np.array_equal(be.gemm(ck.packed(0, be), x), want)
    dense.close()
    (tmp_path / "bad.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{bad json")
    with pytest.raises(edgert.Error) as e:
        edgert.Checkpoint(tmp_path / "bad.safetensors")
    assert e.value.status == "E_PARSE" and "bad.safetensors" in e.value.message
    with pytest.raises(edgert.Error, match="no layer named 'nope'"):
        edgert.Checkpoint(gptq_path).weights("nope")


def test_act_order_weights(tmp_path):
    """An act-order GPTQ file (`edgert quantize --calibrate --act-order`):
    a layer's weights carry its order, dequantize in the model's order as
    the file's dense rows, and pack to what the checkpoint packs (bit for
    bit); an order that is not a permutation is refused."""
    model = make_test_model(tmp_path / "m", 3)
    (tmp_path / "cal.txt").write_text("5 6 7 8 9 10 11 12\n300 2 17 44 9 1000 3 61\n")
    (tmp_path / "ao").mkdir()
    out = tmp_path / "ao" / "model.safetensors"
    cli = os.path.join(os.path.dirname(os.path.dirname(edgert.library_path())), "bin", "edgert")
    r = subprocess.run([cli, "quantize", str(model), str(out), "--sym",
                        "--group", "32", "--calibrate", str(tmp_path / "cal.txt"),
                        "--act-order"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    x = np.random.default_rng(5).standard_normal((3, 256)).astype(np.float32)
    with edgert.Checkpoint(out) as ck, live() as ctx:
        be = ctx.backend("ref-w4a16" if "ref-w4a16" in in_process() else _one_backend())
        permuted = 0
        for lay in ck.layers:
            w = ck.weights(lay)
            assert w.perm is not None and w.perm.dtype == np.uint32
            assert np.array_equal(np.sort(w.perm), np.arange(lay.k))
            permuted += not np.array_equal(w.perm, np.arange(lay.k))
            assert np.array_equal(w.dequantize(), ck.dense(lay))
            if lay.k == 256:
                assert np.array_equal(be.gemm(be.pack(w), x), be.gemm(ck.packed(lay, be), x))
        assert permuted >= len(ck.layers) // 2
        w.perm = w.perm.copy()
        w.perm[0] = w.perm[1]
        with pytest.raises(edgert.Error, match="perm") as e:
            be.pack(w)
        assert e.value.status == "E_USAGE"


def test_model_generates_what_edgert_run_prints(tmp_path):
    """edgert.Model on a seeded test model: greedy tokens equal to `edgert
    run --json`'s (the CLI beside the library: build/bin or the prefix's
    bin), on the dense reference and every eligible in-process backend;
    forward's shapes and positions; bad ids refused naming the index."""
    model = make_test_model(tmp_path / "m", 5)
    cli = os.path.join(os.path.dirname(os.path.dirname(edgert.library_path())), "bin", "edgert")
    with live() as ctx:
        for backend in ["fp32"] + in_process():
            r = subprocess.run([cli, "run", str(model), "--prompt-ids", "5,6,7",
                                "--max-new-tokens", "6", "--ignore-eos", "--backend", backend,
                                "--json"], capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            want = json.loads(r.stdout)["prompts"][0]["tokens"]
            if backend == "fp32":
                first = want
            with edgert.Model(model, ctx=ctx, backend=backend) as m:
                assert m.info.backend == backend and m.info.model_type == "llama"
                assert m.generate([5, 6, 7], 6, stop_at_eos=False) == want, backend
                assert m.position == 3 + 5  # the last token is not run
                m.reset()
                assert m.forward([1, 2, 3], all_logits=True).shape == (3, m.info.vocab)
                with pytest.raises(edgert.Error, match="1") as e:
                    m.forward([4, m.info.vocab])
                assert e.value.status == "E_USAGE"
        with pytest.raises(edgert.Error) as e:
            edgert.Model(tmp_path / "nothing-here", ctx=ctx)
        assert "nothing-here" in e.value.message
    # a handle of its own (edgert.open()'s defaults), closed with the model
    with edgert.Model(model, backend="fp32") as m:
        assert m.generate([5, 6, 7], 6, stop_at_eos=False) == first
        own = m._own_ctx
    assert own.closed and m.closed


def test_compare_measures_as_edgert_run_does(tmp_path):
    """edgert.compare against `edgert run --compare --json` on one test
    model: the same exact reproductions, tokens to divergence and forced
    top-1; KL within 1e-4 of its value (the CLI's log-softmax is in float,
    here in float64: the two differ in the fifth digit at most)."""
    model = make_test_model(tmp_path / "m", 3)
    prompts = [[5, 6, 7], [8, 9]]
    (tmp_path / "p.txt").write_text("5 6 7\n8 9\n")
    cli = os.path.join(os.path.dirname(os.path.dirname(edgert.library_path())), "bin", "edgert")
    names = in_process()
    r = subprocess.run([cli, "run", str(model), "--compare", ",".join(names), "--prompts",
                        str(tmp_path / "p.txt"), "--tokens", "8", "--json", "-q"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    want = {b["backend"]: b for b in json.loads(r.stdout)["backends"]}
    with live() as ctx:
        got = edgert.compare(model, prompts, backends=names, tokens=8, ctx=ctx)
    assert [g.backend for g in got] == names
    for g in got:
        w = want[g.backend]
        assert g.exact_reproductions == w["exact_reproductions"]
        assert g.mean_tokens_to_divergence == pytest.approx(w["mean_tokens_to_divergence"])
        assert g.top1_forced == pytest.approx(w["top1_forced"])
        assert g.mean_kl == pytest.approx(w["mean_kl"], rel=1e-4, abs=1e-6)


def _rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def test_no_leak_over_many_cycles():
    """10,000 backend-open/pack/gemm/close cycles and 100 of the whole
    handle (edgert_open takes about 60 ms: probe, discovery, first contact's
    cache), after a warm-up: the resident set grows by less than 4 MiB,
    where one leaked packed matrix per cycle would add over 20 MiB."""
    x = np.ones(128, np.float32)
    q = edgert.quantize_rtn(np.ones((8, 128), np.float32))
    name = _one_backend()

    def cycles(opens, per_open):
        for _ in range(opens):
            with live() as ctx:
                for _ in range(per_open):
                    with ctx.backend(name) as be:
                        be.gemm(be.pack(q), x)
    cycles(5, 100)
    gc.collect()
    before = _rss_kib()
    cycles(100, 100)
    gc.collect()
    grown = _rss_kib() - before
    assert grown < 4096, f"resident set grew by {grown} KiB over 10,000 cycles"
