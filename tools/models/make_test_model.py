#!/usr/bin/env python3
"""tools/models/make_test_model.py — a seeded Llama-family model in the Hugging
Face layout, with the statistics of real activations, for tests and
benchmarks.

    make_test_model.py OUT_DIR [--arch llama|llama3|qwen2|qwen3] [--shape NAME]
                       [--seed N] [--dtype bf16|f32] [--untied] [--shards N]
                       [--shared-basis]

Shapes (layers, hidden, query/KV heads x head size, MLP, vocabulary):
  tiny     2 layers,  256, 4/2 x 64,  MLP  768, vocabulary  1024
  small    4 layers,  576, 9/3 x 64,  MLP 1536, vocabulary  4096 (SmolLM2's widths)
  spark   28 layers, 2048, 16/4 x 128, MLP 6656, vocabulary 131072, tied
          (spark-1.7b, the design notes' reference workload: 3.4 GB in bf16)
Architectures: llama (Llama 2, Mistral), llama3 (rope_scaling of type llama3),
qwen2 (q/k/v bias), qwen3 (q/k RMSNorm per head, head_dim in the config).

Random weights alone give isotropic activations, on which GPTQ gains
nothing and W4A8's outlier problem never shows (design notes, §6). So:
  - every hidden channel has a scale drawn log-normal (sigma 1: the middle
    95% spans 50x), applied to the embedding and so to the residual stream;
  - the embedding and every weight matrix have correlated directions (a
    rank-r part, r = hidden / 8, carrying about half the variance);
    with --shared-basis, the embedding's rows and the o and down
    projections' outputs share one r-dimensional basis of the residual
    stream (scaled by the channel scales), so those directions persist
    through depth, as the dominant directions of trained models' residual
    streams do. Without it each matrix has a basis of its own: 28 layers
    write 28 x r directions, and the spark shape's deep layers' inputs are
    near isotropic (GPTQ's held-out gain over round to nearest on q falls
    from +1.4 dB at layer 0 to -0.5 at 27; with it, +1.1 to +1.4, and +2.7
    at layer 3). The networks it makes are more sensitive: on the tiny
    shape W4A8's mean KL against fp32 is 0.18 with it, 0.003 without, and
    the tests' tolerances are derived for the models without it;
  - four channels of the residual stream carry "massive activations": the
    embedding puts a large value of one sign there for every token, and
    each layer's o and down projections add to them, so after RMSNorm the
    first layer's inputs have a few channels about 50x the median one;
    the final norm's gain on them is small, as in trained models, so the
    logits are not theirs;
  - the layers' outputs (o and down projections, std 0.5 / sqrt(K)) are
    large enough that the last hidden state depends on the context, not
    mostly on the current token's embedding; and the final norm's gain has
    random signs: with a tied head, logits h . E[v] would otherwise favour
    the current token itself (its embedding dotted with itself), and greedy
    text would be one token repeated. It still settles into short loops
    after a few tokens, as random networks do; the next-token entropy is
    3.5-4 nats of a 4096-token vocabulary.
The same seed gives the same bytes on every machine (numpy's PCG64 and
float32 arithmetic; bf16 rounded to nearest even). Tensors are written one
at a time: the spark shape needs about 2 GB of memory, not its 7 GB in fp32.
Writes config.json and model.safetensors (or N shards and
model.safetensors.index.json), into a folder built beside OUT_DIR and renamed.
"""
import argparse
import json
import os
import shutil
import struct
import sys
import tempfile

import numpy as np

SHAPES = {
    "tiny": dict(layers=2, hidden=256, heads=4, kv=2, head_dim=64, mlp=768, vocab=1024),
    "small": dict(layers=4, hidden=576, heads=9, kv=3, head_dim=64, mlp=1536, vocab=4096),
    "spark": dict(layers=28, hidden=2048, heads=16, kv=4, head_dim=128, mlp=6656, vocab=131072),
}
ARCHS = ("llama", "llama3", "qwen2", "qwen3")
OUTLIERS = 4


def config(shape, arch, tied, dtype):
    s = SHAPES[shape]
    c = {"architectures": ["Qwen3ForCausalLM" if arch == "qwen3" else
                           "Qwen2ForCausalLM" if arch == "qwen2" else "LlamaForCausalLM"],
         "model_type": "qwen3" if arch == "qwen3" else "qwen2" if arch == "qwen2" else "llama",
         "hidden_size": s["hidden"], "intermediate_size": s["mlp"],
         "num_hidden_layers": s["layers"], "num_attention_heads": s["heads"],
         "num_key_value_heads": s["kv"], "head_dim": s["head_dim"], "hidden_act": "silu",
         "rms_norm_eps": 1e-6 if arch.startswith("qwen") else 1e-5,
         "rope_theta": 1000000.0 if arch.startswith("qwen") else 10000.0 if arch == "llama"
         else 500000.0,
         "max_position_embeddings": 4096, "vocab_size": s["vocab"],
         "tie_word_embeddings": tied, "bos_token_id": 1, "eos_token_id": 2,
         "torch_dtype": "bfloat16" if dtype == "bf16" else "float32"}
    if arch == "llama3":
        c["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0, "original_max_position_embeddings": 1024}
    if arch == "qwen2":
        c["attention_bias"] = True
    return c


class Gen:
    """The tensors, in order, each made when asked for (name, shape, make())."""

    def __init__(self, cfg, arch, seed, shared=False):
        self.c, self.arch = cfg, arch
        self.shared = shared
        self.seed = seed
        h = cfg["hidden_size"]
        rng = np.random.default_rng([seed, 0])
        self.scale = np.exp(rng.standard_normal(h, dtype=np.float32)).astype(np.float32)
        self.out_ch = rng.choice(h, OUTLIERS, replace=False)
        self.out_sign = np.where(rng.random(OUTLIERS) < 0.5, -1.0, 1.0).astype(np.float32)
        self.rank = max(4, h // 8)
        # the residual stream's basis, [r][h]: the embedding's (scaled by the channel
        # scales as it is) and, with those scales of mean square 1, the o/down outputs'
        self.basis = np.random.default_rng([seed, 2]).standard_normal((self.rank, h),
                                                                      dtype=np.float32)
        self.basis_out = (self.basis * (self.scale / np.sqrt(np.mean(self.scale ** 2)))).T

    def rng(self, i):
        return np.random.default_rng([self.seed, 1, i])

    def matrix(self, i, n, k, gain=1.0, rows=None, cols=None):
        """W[n][k]: a rank-r part plus noise, half the variance each, std gain / sqrt(k);
        the rank-r part's column space rows ([n][r]) or row space cols ([r][k]) if given."""
        rng, r = self.rng(i), self.rank
        a = rng.standard_normal((n, r), dtype=np.float32)
        b = rng.standard_normal((r, k), dtype=np.float32)
        a = a if rows is None else rows
        b = b if cols is None else cols
        w = (a @ b) * np.float32(np.sqrt(0.5 / r))
        w += rng.standard_normal((n, k), dtype=np.float32) * np.float32(np.sqrt(0.5))
        return w * np.float32(gain / np.sqrt(k))

    def embedding(self, i):
        v, h = self.c["vocab_size"], self.c["hidden_size"]
        basis = self.basis if self.shared else None
        e = self.matrix(i, v, h, gain=np.sqrt(h) * 0.05, cols=basis) * self.scale
        rng = self.rng(i + 1)
        e[:, self.out_ch] = self.out_sign * (1.0 + 0.1 * rng.standard_normal(
            (v, OUTLIERS), dtype=np.float32))
        return e

    def norm(self, i, final=False):
        rng = self.rng(i)
        g = np.exp(0.3 * rng.standard_normal(self.c["hidden_size"], dtype=np.float32))
        if final:  # see the file's comment
            g *= np.where(rng.random(g.size) < 0.5, -1.0, 1.0).astype(np.float32)
            g[self.out_ch] = 0.01
        return g.astype(np.float32)

    def residual_out(self, i, n, k):
        """o/down projections, and a push along the outlier channels."""
        w = self.matrix(i, n, k, gain=0.5, rows=self.basis_out if self.shared else None)
        w[self.out_ch, :] *= 4.0
        return w

    def tensors(self):
        c, arch = self.c, self.arch
        h, d, L = c["hidden_size"], c["head_dim"], c["num_hidden_layers"]
        nq, nkv, m = c["num_attention_heads"] * d, c["num_key_value_heads"] * d, \
            c["intermediate_size"]
        yield "model.embed_tokens.weight", (c["vocab_size"], h), lambda: self.embedding(1)
        for layer in range(L):
            p, base = f"model.layers.{layer}.", 100 * (layer + 1)
            yield p + "input_layernorm.weight", (h,), lambda b=base: self.norm(b)
            for j, (nm, n) in enumerate((("q", nq), ("k", nkv), ("v", nkv))):
                yield (p + f"self_attn.{nm}_proj.weight", (n, h),
                       lambda b=base + 1 + j, n=n: self.matrix(b, n, h))
                if arch == "qwen2":
                    yield (p + f"self_attn.{nm}_proj.bias", (n,),
                           lambda b=base + 10 + j, n=n: 0.1 * self.rng(b).standard_normal(
                               n, dtype=np.float32))
            if arch == "qwen3":
                for j, nm in enumerate(("q_norm", "k_norm")):
                    yield (p + f"self_attn.{nm}.weight", (d,),
                           lambda b=base + 20 + j: np.exp(0.2 * self.rng(b).standard_normal(
                               d, dtype=np.float32)))
            yield (p + "self_attn.o_proj.weight", (h, nq),
                   lambda b=base + 4: self.residual_out(b, h, nq))
            yield p + "post_attention_layernorm.weight", (h,), lambda b=base + 5: self.norm(b)
            yield p + "mlp.gate_proj.weight", (m, h), lambda b=base + 6: self.matrix(b, m, h, 2.0)
            yield p + "mlp.up_proj.weight", (m, h), lambda b=base + 7: self.matrix(b, m, h)
            yield (p + "mlp.down_proj.weight", (h, m),
                   lambda b=base + 8: self.residual_out(b, h, m))
        yield "model.norm.weight", (h,), lambda: self.norm(2, final=True)
        if not c["tie_word_embeddings"]:
            yield ("lm_head.weight", (c["vocab_size"], h),
                   lambda: self.matrix(3, c["vocab_size"], h, gain=4.0))


def to_bf16(w):
    u = np.ascontiguousarray(w, dtype=np.float32).view(np.uint32)
    return ((u + (((u >> 16) & 1) + 0x7FFF)) >> 16).astype(np.uint16)


def write_shards(folder, entries, dtype, shards):
    """entries: [(name, shape, make)]; tensors made and written one at a time."""
    size = 2 if dtype == "bf16" else 4
    per = [[] for _ in range(shards)]
    total = sum(int(np.prod(s)) * size for _, s, _ in entries)
    acc, cut = 0, 0
    for e in entries:
        if shards > 1 and acc >= total * (cut + 1) / shards and cut + 1 < shards:
            cut += 1
        per[cut].append(e)
        acc += int(np.prod(e[1])) * size
    names = ([f"model-{i + 1:05d}-of-{shards:05d}.safetensors" for i in range(shards)]
             if shards > 1 else ["model.safetensors"])
    weight_map = {}
    for fn, part in zip(names, per):
        header, off = {"__metadata__": {"format": "pt"}}, 0
        for name, shape, _ in part:
            n = int(np.prod(shape)) * size
            header[name] = {"dtype": "BF16" if dtype == "bf16" else "F32", "shape": list(shape),
                            "data_offsets": [off, off + n]}
            off += n
            weight_map[name] = fn
        h = json.dumps(header, separators=(",", ":")).encode()
        h += b" " * ((8 - len(h) % 8) % 8)
        with open(os.path.join(folder, fn), "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h)
            for name, shape, make in part:
                w = make()
                assert tuple(w.shape) == tuple(shape), name
                f.write((to_bf16(w) if dtype == "bf16" else w.astype("<f4")).tobytes())
    if shards > 1:
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)


def make(out_dir, arch="llama", shape="tiny", seed=1, dtype="bf16", tied=None, shards=1,
         shared=False):
    if tied is None:
        tied = True
    cfg = config(shape, arch, tied, dtype)
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    if os.path.lexists(out_dir):
        raise FileExistsError(f"{out_dir}: exists")
    work = tempfile.mkdtemp(prefix=".make_test_model-", dir=parent)
    try:
        with open(os.path.join(work, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
            f.write("\n")
        write_shards(work, list(Gen(cfg, arch, seed, shared).tensors()), dtype, shards)
        os.chmod(work, 0o755)
        os.rename(work, out_dir)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return cfg


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--arch", choices=ARCHS, default="llama")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dtype", choices=("bf16", "f32"), default="bf16")
    ap.add_argument("--untied", action="store_true", help="a head of its own (lm_head.weight)")
    ap.add_argument("--shards", type=int, default=1, help="safetensors files (with an index)")
    ap.add_argument("--shared-basis", action="store_true",
                    help="correlated directions that persist through depth (see above)")
    a = ap.parse_args(argv)
    try:
        make(a.out_dir, a.arch, a.shape, a.seed, a.dtype, not a.untied, max(1, a.shards),
             a.shared_basis)
    except OSError as e:
        print(f"make_test_model: {e}", file=sys.stderr)
        return 1
    print(f"{a.out_dir}: {a.arch} {a.shape}, seed {a.seed}, {a.dtype}"
          f"{', shared basis' if a.shared_basis else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
