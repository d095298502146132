#!/usr/bin/env python3
"""tools/models/llama_numpy.py — a Llama-family forward pass in plain numpy
(float64 accumulation), written from the Hugging Face definition and sharing
no code with edgert: the yardstick a converted or generated model is checked
with, and what the tests compare `edgert run`'s fp32 logits against.

    llama_numpy.py MODEL_DIR [--prompt-ids FILE] [--tokens N] [--decode]

Greedy continuation of each prompt of FILE (default MODEL_DIR/prompt-ids.txt:
one prompt a line, space-separated ids), printed as ids and, with --decode
and a vocab.json in MODEL_DIR, as text.

What it runs: token embedding; per layer RMSNorm, q/k/v projections (bias
when the checkpoint has one: Qwen2), q/k RMSNorm per head (Qwen3: q_norm,
k_norm), rotary embedding on the two halves of each head (HF's rotate_half,
base rope_theta; rope_scaling of type llama3 applied to the frequencies),
causal attention with grouped KV heads, o projection, residual, RMSNorm,
SiLU(gate) * up, down projection, residual; final RMSNorm; the head (the
embedding when tie_word_embeddings). Dense F32/F16/BF16 safetensors only.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

_DT = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}


def load_safetensors(path):
    """{name: float32 array} of a dense safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, t in hdr.items():
        if name == "__metadata__":
            continue
        if t["dtype"] not in _DT:
            raise ValueError(f"{path}: {name} is {t['dtype']}, not a dense float tensor")
        a, b = t["data_offsets"]
        v = raw[a:b].view(_DT[t["dtype"]]).reshape(t["shape"])
        if t["dtype"] == "BF16":
            v = (v.astype(np.uint32) << 16).view(np.float32)
        out[name] = np.asarray(v, dtype=np.float32)
    return out


def load_weights(folder):
    idx = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    w = {}
    for fn in files:
        w.update(load_safetensors(os.path.join(folder, fn)))
    return w


def rope_inv_freq(cfg, d):
    base = float(cfg.get("rope_theta", 10000.0))
    inv = 1.0 / base ** (np.arange(0, d, 2, dtype=np.float64) / d)
    rs = cfg.get("rope_scaling") or {}
    if rs.get("rope_type", rs.get("type")) == "llama3":
        factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        wavelen = 2 * np.pi / inv
        smooth = (old / wavelen - lo) / (hi - lo)
        scaled = np.where(wavelen > old / lo, inv / factor, inv)
        mid = (wavelen <= old / lo) & (wavelen >= old / hi)
        inv = np.where(mid, (1 - smooth) * inv / factor + smooth * inv, scaled)
    elif rs:
        raise ValueError(f"rope_scaling {rs} is not supported here")
    return inv


class Llama:
    def __init__(self, folder):
        with open(os.path.join(folder, "config.json")) as f:
            self.cfg = c = json.load(f)
        # float64 once: every product below accumulates in double precision
        self.w = {n: t.astype(np.float64) for n, t in load_weights(folder).items()}
        self.L, self.h = c["num_hidden_layers"], c["hidden_size"]
        self.nh = c["num_attention_heads"]
        self.nkv = c.get("num_key_value_heads", self.nh)
        self.d = c.get("head_dim") or self.h // self.nh
        self.eps = c["rms_norm_eps"]
        self.inv_freq = rope_inv_freq(c, self.d)
        head = self.w.get("lm_head.weight")
        self.head = head if head is not None else self.w["model.embed_tokens.weight"]

    def rms(self, x, g):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * g

    def rope(self, x, pos):
        ang = np.outer(pos, self.inv_freq)  # [T][d/2]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        a, b = x[..., : self.d // 2], x[..., self.d // 2:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)

    def lin(self, x, name):
        y = x @ self.w[name + ".weight"].T
        bias = self.w.get(name + ".bias")
        return y + bias if bias is not None else y

    def forward(self, ids, cache, pos0):
        """Logits [T][V] of ids at positions pos0.., extending cache (a list of (k, v))."""
        x = self.w["model.embed_tokens.weight"][ids]
        T, pos = len(ids), np.arange(pos0, pos0 + len(ids))
        for i in range(self.L):
            p = f"model.layers.{i}."
            hx = self.rms(x, self.w[p + "input_layernorm.weight"])
            q = self.lin(hx, p + "self_attn.q_proj").reshape(T, self.nh, self.d)
            k = self.lin(hx, p + "self_attn.k_proj").reshape(T, self.nkv, self.d)
            v = self.lin(hx, p + "self_attn.v_proj").reshape(T, self.nkv, self.d)
            if p + "self_attn.q_norm.weight" in self.w:
                q = self.rms(q, self.w[p + "self_attn.q_norm.weight"])
                k = self.rms(k, self.w[p + "self_attn.k_norm.weight"])
            q, k = self.rope(q, pos), self.rope(k, pos)
            if len(cache) <= i:
                cache.append((k, v))
            else:
                cache[i] = (np.concatenate([cache[i][0], k]), np.concatenate([cache[i][1], v]))
            K, V = cache[i]
            g = self.nh // self.nkv
            att = np.empty((T, self.nh, self.d))
            for hd in range(self.nh):
                s = q[:, hd, :] @ K[:, hd // g, :].T / np.sqrt(self.d)  # [T][S]
                s = np.where(np.arange(K.shape[0])[None, :] <= pos[:, None], s, -np.inf)
                s = np.exp(s - s.max(axis=1, keepdims=True))
                att[:, hd, :] = (s / s.sum(axis=1, keepdims=True)) @ V[:, hd // g, :]
            x = x + self.lin(att.reshape(T, -1), p + "self_attn.o_proj")
            hx = self.rms(x, self.w[p + "post_attention_layernorm.weight"])
            gt = self.lin(hx, p + "mlp.gate_proj")
            x = x + self.lin(gt / (1 + np.exp(-gt)) * self.lin(hx, p + "mlp.up_proj"),
                             p + "mlp.down_proj")
        return self.rms(x, self.w["model.norm.weight"]) @ self.head.T

    def greedy(self, ids, n, stop=None):
        cache, out = [], []
        logits = self.forward(np.asarray(ids), cache, 0)
        pos = len(ids)
        for _ in range(n):
            t = int(np.argmax(logits[-1]))
            out.append(t)
            if stop is not None and t == stop:
                break
            logits = self.forward(np.asarray([t]), cache, pos)
            pos += 1
        return out


def read_prompt_ids(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].replace(",", " ").split()
            if line:
                rows.append([int(t) for t in line])
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--prompt-ids")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--decode", action="store_true")
    a = ap.parse_args(argv)
    m = Llama(a.model)
    prompts = read_prompt_ids(a.prompt_ids or os.path.join(a.model, "prompt-ids.txt"))
    vocab = None
    if a.decode:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from gguf_to_hf import _bytes_to_unicode
        with open(os.path.join(a.model, "vocab.json"), encoding="utf-8") as f:
            vocab = {i: t for t, i in json.load(f).items()}
        unmap = {c: b for b, c in _bytes_to_unicode().items()}
    for ids in prompts:
        out = m.greedy(ids, a.tokens, m.cfg.get("eos_token_id"))
        print(" ".join(map(str, out)))
        if vocab:
            toks = [vocab[t] for t in out]
            text = b"".join(t.encode() if t.startswith("<|") else
                            bytes(unmap.get(c, 63) for c in t) for t in toks)
            text = text.decode("utf-8", "replace")
            print("  " + repr(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
