"""tests/python/test_runner.py — `edgert run` (the model runner, runner/) on
seeded test models (tools/models/make_test_model.py): its fp32 path against
an independent forward pass in numpy (tools/models/llama_numpy.py, written
from the Hugging Face definition, no code shared with the runner), every
eligible backend against the fp32 path on the same GPTQ weights, the
--compare table, and each kind of bad input.

Tolerances, as max |logit difference| over the logits' standard deviation,
on the steps before the backend's greedy tokens part from the reference's:
  - fp32 path against numpy (float64): fp32 accumulation over K <= 768 and
    9 GEMMs; 1e-4 (seen: 4e-7 to 6e-7).
  - a backend with 32-bit activations (ref-w4a16) against the fp32 path on
    the same GPTQ weights: the same arithmetic in another order, 1e-4.
  - 16-bit activations (bf16, or int16 per group of 128): each GEMM's
    inputs carry a relative error of at most bf16's unit roundoff 2^-9
    (int16 per group is finer, 2^-16 of the group's maximum, while the
    groups' maxima stay under 2^7 times their rms, as here); G GEMMs on the
    path add errors of independent sign, sqrt(G) of one, and a factor 4
    covers the network's gain on them: 4 * 2^-9 * sqrt(G) (seen: 50x below).
  - 8-bit activations (int8 per token): each input's error is half a step
    of its row's maximum, kappa / 254 of its rms, kappa the rows' crest
    factor (max / rms, measured here on the first layer's input: about 50
    with the generator's outlier channels): 4 * kappa / 254 * sqrt(G). That
    bound is loose (an outlier row is not every row), so W4A8 is also held
    to what a wrong wiring would break: teacher-forced top-1 agreement at
    least 0.75 and KL below 0.05 nats.
  These run with an fp32 KV cache (--kv-cache f32). An fp16 one, on a
  backend against the same backend with fp32: every cached K and V value
  within 2^-11 of itself (fp16's unit roundoff; the test values stay far
  inside its range), 2 such inputs per layer (K into the scores, V into the
  output), independent signs, and the same factor 4 for the network's gain:
  4 * 2^-11 * sqrt(2 L). Not for 8-bit activations: rounding to int8 is a
  step function, so a change of 2^-11 can move an activation a whole step
  (kappa / 254 of its row's rms), and each run then stands only within the
  W4A8 bound above of the exact result: the two within twice that
  (seen: avx2-w4a8 0.048 std, where the 16-bit bound is 0.0039).
"""
import json
import math
import os
import shutil
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "models"))

import llama_numpy  # noqa: E402
import make_test_model  # noqa: E402
from cli_util import cli, expect  # noqa: E402

PROMPT = [5, 17, 300, 42, 7, 900, 33, 2, 11, 64, 5, 17, 300]
# Under a sanitizer or an emulator every edgert process is 10-25x slower:
# there the runner is exercised on two architectures (llama and qwen3: the
# plain path and the most different one) and the symmetric GPTQ file (every
# backend takes it, W4A8 included); the plain native build checks them all.
THIN = "1" in (os.environ.get("EDGERT_TEST_EMULATED"), os.environ.get("EDGERT_TEST_SANITIZED"))
EMULATED = os.environ.get("EDGERT_TEST_EMULATED") == "1"
STEPS = 10
ARCHS = {"llama": {}, "llama3": {"arch": "llama3"}, "qwen2": {"arch": "qwen2"},
         "qwen3": {"arch": "qwen3"}, "untied-sharded": {"tied": False, "shards": 3}}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    out = {}
    for name, kw in ARCHS.items():
        make_test_model.make(str(root / name), shape="tiny", seed=9, **kw)
        out[name] = str(root / name)
    return out


@pytest.fixture(scope="module")
def gptq(models, edgert_cli, tmp_path_factory):
    """The llama model quantized by edgert quantize: asymmetric and symmetric."""
    root = tmp_path_factory.mktemp("gptq")
    out = {}
    for kind in ("asym", "sym"):
        d = root / kind
        d.mkdir()
        shutil.copy(os.path.join(models["llama"], "config.json"), d)
        cli(edgert_cli, "quantize", os.path.join(models["llama"], "model.safetensors"),
            d / "model.safetensors", f"--{kind}", "--group", "128")
        out[kind] = str(d)
    return out


def run_logits(edgert_cli, model, backend, tmp, prompt=PROMPT, steps=STEPS, kv=None):
    lg = os.path.join(tmp, f"{backend}.f32")
    r = cli(edgert_cli, "run", model, "--backend", backend, "--prompt-ids",
            ",".join(map(str, prompt)), "--max-new-tokens", steps, "--ignore-eos", "--logits",
            lg, "--json", *(["--kv-cache", kv] if kv else []))
    tokens = json.loads(r.stdout)["prompts"][0]["tokens"]
    return tokens, np.fromfile(lg, dtype=np.float32).reshape(len(tokens), -1)


_eligible = []


def eligible(edgert_cli):
    """(name, activation bits) of every eligible in-process backend here (asked once)."""
    if _eligible:
        return _eligible
    r = cli(edgert_cli, "select", "--json")
    out = []
    for c in json.loads(r.stdout)["candidates"]:
        if c["eligible"] and c.get("runs_in_process", True) and c.get("processor") == "cpu":
            out.append((c["name"], c["layout"]["activation_bits"]))
    _eligible.extend(out)
    return out


@pytest.mark.parametrize("arch", ["llama", "qwen3"] if THIN else sorted(ARCHS))
def test_fp32_path_equals_numpy(models, edgert_cli, tmp_path, arch):
    tokens, lg = run_logits(edgert_cli, models[arch], "fp32", tmp_path)
    ref = llama_numpy.Llama(models[arch]).forward(np.asarray(PROMPT + tokens[:-1]), [], 0)
    ref = ref[len(PROMPT) - 1:]
    err = np.abs(lg - ref).max() / np.abs(ref).max()
    print(f"{arch}: fp32 path vs numpy: max relative error {err:.3g}")
    assert err <= 1e-4
    assert tokens == [int(t) for t in ref.argmax(axis=1)]


def crest(model_dir):
    """max / rms of the first layer's projection inputs (its normed embedding rows)."""
    net = llama_numpy.Llama(model_dir)
    x = net.w["model.embed_tokens.weight"][PROMPT]
    xn = net.rms(x, net.w["model.layers.0.input_layernorm.weight"])
    return float(np.max(np.abs(xn).max(axis=1) / np.sqrt((xn ** 2).mean(axis=1))))


@pytest.mark.parametrize("kind", ["sym"] if THIN else ["asym", "sym"])
def test_every_backend_near_fp32_on_the_same_weights(models, gptq, edgert_cli, tmp_path, kind):
    ref_tokens, ref = run_logits(edgert_cli, gptq[kind], "fp32", tmp_path)
    gemms = 2 * 4 + 1
    kappa = crest(models["llama"])  # the GPTQ file keeps the embedding and norms as they were
    ran = 0
    for name, bits in eligible(edgert_cli):
        r = cli(edgert_cli, "run", gptq[kind], "--backend", name, "--prompt-ids", "1",
                "--max-new-tokens", 1, check=False)
        if r.returncode == 3 and "LAYOUT_MISMATCH" in r.stderr:
            print(f"{kind}: {name} does not take {kind} weights (LAYOUT_MISMATCH)")
            continue
        tokens, lg = run_logits(edgert_cli, gptq[kind], name, tmp_path, kv="f32")
        same = 0
        while same < len(tokens) and tokens[same] == ref_tokens[same]:
            same += 1
        k = max(1, same)
        dev = float(np.abs(lg[:k] - ref[:k]).max() / ref[:k].std())
        tol = (1e-4 if bits >= 32 else 4 * 2 ** -9 * math.sqrt(gemms) if bits >= 16
               else 4 * kappa / 254 * math.sqrt(gemms))
        print(f"{kind}: {name} ({bits}-bit activations): {same}/{len(tokens)} tokens as fp32's, "
              f"logits within {dev:.3g} std (tolerance {tol:.3g})")
        assert dev <= tol, f"{name}: logits {dev:.3g} std from fp32's, tolerance {tol:.3g}"
        if bits >= 32:
            assert tokens == ref_tokens
        ran += 1
    assert ran >= 1


def test_fp16_kv_cache_near_fp32(models, gptq, edgert_cli, tmp_path):
    """Each backend with an fp16 KV cache against itself with fp32 (the
    tolerance in the file's comment); where no attention kernels keep fp16
    here, asking for it is refused (exit 4, saying so) and the test skips."""
    model = gptq["sym"]
    layers = json.load(open(os.path.join(model, "config.json")))["num_hidden_layers"]
    kappa, gemms = crest(models["llama"]), 2 * 4 + 1
    ran = 0
    for name, bits in eligible(edgert_cli):
        tol = (4 * 2 ** -11 * math.sqrt(2 * layers) if bits > 8
               else 2 * 4 * kappa / 254 * math.sqrt(gemms))
        r = cli(edgert_cli, "run", model, "--backend", name, "--prompt-ids", "1",
                "--max-new-tokens", 1, "--kv-cache", "f16", check=False)
        if r.returncode == 3 and "LAYOUT_MISMATCH" in r.stderr:
            continue
        if r.returncode == 4 and "keep fp32 here" in r.stderr:
            pytest.skip(f"no fp16 KV cache on this CPU: {r.stderr.strip()}")
        assert r.returncode == 0, r.stderr
        t32, l32 = run_logits(edgert_cli, model, name, tmp_path, kv="f32")
        t16, l16 = run_logits(edgert_cli, model, name, tmp_path, kv="f16")
        same = 0
        while same < len(t16) and t16[same] == t32[same]:
            same += 1
        k = max(1, same)
        dev = float(np.abs(l16[:k] - l32[:k]).max() / l32[:k].std())
        print(f"{name}: fp16 KV cache {same}/{len(t16)} tokens as fp32's, logits within "
              f"{dev:.3g} std (tolerance {tol:.3g})")
        assert dev <= tol
        ran += 1
    assert ran >= 1


def test_compare_table(gptq, edgert_cli, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("# two prompts\n5 17 300 42 7\n900, 33, 2, 11\n")
    r = cli(edgert_cli, "run", gptq["sym"], "--compare", "--prompts", prompts, "--tokens", 6,
            "--json")
    doc = json.loads(r.stdout)
    assert doc["prompts"] == 2 and doc["tokens"] == 6 and doc["reference"] == "fp32"
    rows = {b["backend"]: b for b in doc["backends"]}
    print(json.dumps(rows, indent=1))
    ref = rows["ref-w4a16"]  # fp32 activations on the very weights the reference dequantizes
    assert ref["ok"] and ref["exact_reproductions"] == 2
    assert ref["mean_tokens_to_divergence"] == 6 and abs(ref["mean_kl"]) < 1e-6
    assert ref["top1_forced"] == 1.0
    for b in rows.values():
        assert b["ok"], b
        # KL >= 0, but summed in double from fp32 log-probabilities: -1e-6 is rounding
        assert 0 <= b["exact_reproductions"] <= 2 and -1e-6 <= b["mean_kl"] < 0.05
        assert b["top1_forced"] >= 0.75
    text = cli(edgert_cli, "run", gptq["sym"], "--compare", "ref-w4a16", "--prompts", prompts,
               "--tokens", 4).stdout
    assert "ref-w4a16" in text and "2/2" in text and "against the fp32 reference" in text


@pytest.mark.skipif(EMULATED, reason="the evidence store is the same on every arch, and the "
                    "native builds run this (plain and under ASan); under qemu its calibrate "
                    "of every backend took 65 s, and test_compare_table runs --compare here")
def test_compare_stored_as_evidence(gptq, edgert_cli, tmp_path):
    """--store: each compared backend's top-1 and KL become evidence of this
    device, beside calibrate's rates (kept, one series still), and select
    names where they came from."""
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("5 17 300 42 7\n900, 33, 2, 11\n")
    ev = tmp_path / "ev.json"
    tiny = os.path.join(os.path.dirname(__file__), "..", "fixtures", "workloads", "tiny.yaml")
    cli(edgert_cli, "calibrate", "--quick", "--workload", tiny, "--out", ev)
    before = {e["backend"]: e for e in json.load(open(ev))["entries"]}
    r = cli(edgert_cli, "run", gptq["sym"], "--compare", "--prompts", prompts, "--tokens", 6,
            "--store", "--out", ev, "--json")
    doc = json.loads(r.stdout)
    assert doc["evidence_stored"] == str(ev)
    rows = {b["backend"]: b for b in doc["backends"]}
    after = {e["backend"]: e for e in json.load(open(ev))["entries"]}
    assert set(after) == set(before)
    for name, e in after.items():
        b, row = before[name], rows[name]
        for key in ("decode_tokens_per_s", "decode_tokens_per_s_min", "series", "measured_at",
                    "workload", "correct", "prefill_gflops", "sqnr_min_db"):
            assert e[key] == b[key], (name, key)
        assert abs(e["top1_agreement"] - row["top1_forced"]) < 1e-6
        assert abs(e["kl_mean"] - max(row["mean_kl"], 0)) < 1e-6
        assert e["top1_tokens"] == 12
        assert e["fidelity_source"].startswith(f"model {gptq['sym']}, 2 prompts x 6 tokens")
    sel = cli(edgert_cli, "select", "--explain=full", "--evidence", ev).stdout
    assert f"top-1 and KL from model {gptq['sym']}, 2 prompts x 6 tokens" in sel
    expect(edgert_cli, 2, ["add --compare"], "run", gptq["sym"], "--prompt-ids", "1", "--store")
    expect(edgert_cli, 2, ["add --compare --store"], "run", gptq["sym"], "--compare",
           "--prompts", prompts, "--out", ev)


# ---- bad input: its own error, a non-zero exit, nothing written -------------------------

def copy_model(src, dst):
    shutil.copytree(src, dst)
    return str(dst)


def test_bad_config(models, edgert_cli, tmp_path):
    m = copy_model(models["llama"], tmp_path / "m")
    cfg = os.path.join(m, "config.json")
    c = json.load(open(cfg))
    c["num_key_value_heads"] = 3  # 4 heads: not a multiple
    with open(cfg, "w") as f:
        json.dump(c, f, indent=1)
    expect(edgert_cli, 4, ["config.json:", "num_key_value_heads"], "run", m, "--prompt-ids", "1")
    c["num_key_value_heads"] = 1  # a multiple, but the tensors say 2
    with open(cfg, "w") as f:
        json.dump(c, f, indent=1)
    expect(edgert_cli, 4, ["k_proj", "config.json says"], "run", m, "--prompt-ids", "1")
    c["model_type"] = "gpt2"
    with open(cfg, "w") as f:
        json.dump(c, f, indent=1)
    expect(edgert_cli, 4, ["config.json:", "model_type 'gpt2'"], "run", m, "--prompt-ids", "1")
    with open(cfg, "w") as f:
        f.write('{"model_type": "llama",\n "hidden_size": 256,,\n}')
    expect(edgert_cli, 4, ["config.json:"], "run", m, "--prompt-ids", "1")


def test_truncated_weights(models, edgert_cli, tmp_path):
    m = copy_model(models["llama"], tmp_path / "m")
    st = os.path.join(m, "model.safetensors")
    size = os.path.getsize(st)
    with open(st, "r+b") as f:
        f.truncate(size // 2)
    expect(edgert_cli, 4, ["model.safetensors"], "run", m, "--prompt-ids", "1")
    shard = copy_model(models["untied-sharded"], tmp_path / "s")
    os.remove(os.path.join(shard, "model-00002-of-00003.safetensors"))
    expect(edgert_cli, 4, ["model-00002-of-00003.safetensors"], "run", shard, "--prompt-ids",
           "1")


def test_bad_prompts_and_context(models, edgert_cli, tmp_path):
    m = models["llama"]
    lg = tmp_path / "logits.f32"
    expect(edgert_cli, 2, ["token 1", "1024", "vocabulary"], "run", m, "--prompt-ids",
           "5,1024,6", "--logits", lg)
    assert not lg.exists() and not list(tmp_path.glob("logits.f32.tmp-*"))
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n\n")
    expect(edgert_cli, 4, ["no prompt"], "run", m, "--prompt-ids", empty)
    bad = tmp_path / "bad.txt"
    bad.write_text("1 2 3\n4 x 5\n")
    expect(edgert_cli, 4, [f"{bad}:2:3"], "run", m, "--prompt-ids", bad)
    expect(edgert_cli, 2, ["context 9999", "4096"], "run", m, "--prompt-ids", "1", "--context",
           9999)
    expect(edgert_cli, 2, ["pass the context"], "run", m, "--prompt-ids", ",".join(["7"] * 20),
           "--context", 16)
    expect(edgert_cli, 4, ["nothing: No such file"], "run", tmp_path / "nothing", "--prompt-ids",
           "1")
    expect(edgert_cli, 2, ["--compare needs --prompts"], "run", m, "--compare")
    expect(edgert_cli, 3, ["no-such-backend"], "run", m, "--backend", "no-such-backend",
           "--prompt-ids", "1")
