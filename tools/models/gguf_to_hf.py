#!/usr/bin/env python3
"""tools/models/gguf_to_hf.py — a Llama-architecture GGUF file as a Hugging Face
model folder, the input `edgert quantize`, `verify --weights` and `run` read.

    gguf_to_hf.py MODEL.gguf OUT_DIR [--dtype bf16|f32] [--prompts PROMPTS.json]

Writes into OUT_DIR (created; it must not exist, or be empty):
  config.json           LlamaForCausalLM: sizes, heads, RoPE base, norm epsilon,
                        tied or untied head, from the GGUF's metadata
  model.safetensors     every tensor dequantized (gguf's own dequantizers:
                        Q4_0, Q4_1, Q8_0, K-quants, F16, ...) and written in
                        --dtype: f32 keeps the dequantized values exactly; bf16
                        rounds them to nearest even, as a bf16 checkpoint holds
  vocab.json, merges.txt  the byte-level BPE vocabulary and merges (GPT-2's
                        file pair, what transformers' GPT2Tokenizer reads)
  tokenizer_config.json  bos/eos, special tokens, the chat template
  prompt-ids.txt        with --prompts: each prompt in the model's chat template,
                        tokenized by this file's BPE over the GGUF's own
                        vocabulary and merges, one prompt per line as
                        space-separated token ids (what `edgert run
                        --prompt-ids/--prompts` reads); prompts.json beside it
                        holds each prompt's text, templated text and ids
Nothing is written under OUT_DIR's name until everything is complete: the
folder is built beside it and renamed into place.

GGUF stores a Llama model's q and k projections with the rows of each head
permuted for llama.cpp's rotary layout (llama.cpp's converter interleaves the
two halves of every head: HF row j of head h, j < d/2, becomes row 2j, and
row d/2 + j becomes row 2j + 1). Hugging Face's layout rotates the halves
(x[j] with x[j + d/2]), so the conversion undoes that permutation; with it
left in, the model's attention rotates the wrong pairs and its text is noise,
which is what tests/python/test_smollm2.py checks.

The tokenizer is the GGUF's own vocabulary with the pre-tokenizer llama.cpp
uses for it ("smollm", "gpt2", "starcoder" and kin: digits split one by one,
then GPT-2's pattern). Python's `re` has no \\p{L}: letters are approximated
by [^\\W\\d_] (alphabetic and non-decimal numeric characters), which equals
\\p{L} on the ASCII and Latin text of the prompts; tests/perf/llamacpp.py
compares the ids with llama.cpp's tokenizer on the same file.

Exit codes: 0 ok, 1 cannot write, 2 usage, 4 the input is not a GGUF this
converts (another architecture, a tensor it does not know, a shape that
disagrees with the metadata), naming the key or tensor.
"""
import argparse
import json
import os
import re
import shutil
import struct
import sys
import tempfile

import numpy as np


class ConvertError(Exception):
    """A GGUF file this does not convert; the message names the key or tensor."""


# ---- tokenizer: byte-level BPE over the GGUF's vocabulary ---------------------------

def _bytes_to_unicode():
    """GPT-2's reversible map of the 256 byte values to printable characters."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) +
          list(range(ord("\xae"), ord("\xff") + 1)))
    cs = bs[:]
    extra = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


# digits one by one (\p{N}), then GPT-2's pattern (see the file's comment on \p{L})
_DIGIT = re.compile(r"\d")
_WORDS = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+")
_PRE_TOKENIZERS = ("smollm", "gpt2", "starcoder", "refact", "codeshell", "default")
TOKEN_CONTROL, TOKEN_USER_DEFINED = 3, 4


class Tokenizer:
    def __init__(self, tokens, types, merges, pre, bos, eos, add_bos):
        self.tokens = tokens
        self.ids = {t: i for i, t in enumerate(tokens)}
        self.ranks = {}
        for rank, m in enumerate(merges):
            a, sep, b = m.partition(" ")
            if not sep:
                raise ConvertError(f"tokenizer.ggml.merges[{rank}]: '{m}' is not 'a b'")
            self.ranks[(a, b)] = rank
        self.special = sorted((t for t, ty in zip(tokens, types)
                               if ty in (TOKEN_CONTROL, TOKEN_USER_DEFINED) and t),
                              key=len, reverse=True)
        self.pre, self.bos, self.eos, self.add_bos = pre, bos, eos, add_bos
        self.byte_map = _bytes_to_unicode()
        self.byte_unmap = {c: b for b, c in self.byte_map.items()}
        self.cache = {}

    def _bpe(self, piece):
        if piece in self.cache:
            return self.cache[piece]
        word = [self.byte_map[b] for b in piece.encode("utf-8")]
        while len(word) > 1:
            best = min(range(len(word) - 1),
                       key=lambda i: self.ranks.get((word[i], word[i + 1]), 1 << 30))
            rank = self.ranks.get((word[best], word[best + 1]))
            if rank is None:
                break
            pair, merged, i = (word[best], word[best + 1]), [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
                    merged.append(word[i] + word[i + 1])
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = merged
        ids = []
        for sym in word:
            if sym not in self.ids:
                raise ConvertError(f"tokenizer: symbol {sym!r} of {piece!r} is not in the vocabulary")
            ids.append(self.ids[sym])
        self.cache[piece] = ids
        return ids

    def _plain(self, text):
        ids = []
        for chunk in _split_keep(_DIGIT, text):
            for piece in _WORDS.findall(chunk):
                ids += self._bpe(piece)
        return ids

    def encode(self, text, special=True):
        """Token ids of text; with special, special tokens written out in the
        text (<|im_start|>) are their own ids, as llama.cpp's parse_special."""
        ids = [self.bos] if self.add_bos else []
        if not special or not self.special:
            return ids + self._plain(text)
        pat = re.compile("(" + "|".join(re.escape(s) for s in self.special) + ")")
        for i, part in enumerate(pat.split(text)):
            if i % 2:
                ids.append(self.ids[part])
            elif part:
                ids += self._plain(part)
        return ids

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            t = self.tokens[i]
            if t in self.special:
                out += t.encode("utf-8")
            else:
                out += bytes(self.byte_unmap.get(c, ord("?")) for c in t)
        return out.decode("utf-8", errors="replace")


def _split_keep(pat, text):
    """text split at every match of pat, matches kept as pieces of their own."""
    out, last = [], 0
    for m in pat.finditer(text):
        if m.start() > last:
            out.append(text[last:m.start()])
        out.append(m.group(0))
        last = m.end()
    if last < len(text):
        out.append(text[last:])
    return out


# ---- GGUF reading --------------------------------------------------------------------

def _field(reader, key, required=True, default=None):
    f = reader.fields.get(key)
    if f is None:
        if required:
            raise ConvertError(f"{reader.path}: metadata key '{key}' is missing")
        return default
    return f.contents()


def read_model(path):
    """(reader, metadata dict of what the conversion uses)."""
    import gguf  # the PyPI package, pinned in .ci/requirements.txt

    try:
        reader = gguf.GGUFReader(path)
    except Exception as e:  # gguf raises ValueError, struct.error, ...
        raise ConvertError(f"{path}: not a GGUF file gguf can read: {e}") from e
    reader.path = path
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ConvertError(f"{path}: general.architecture is '{arch}'; this converts 'llama' "
                           "(Llama 2/3, Mistral, SmolLM) only")
    m = {"arch": arch}
    for key, name in (("block_count", "layers"), ("embedding_length", "hidden"),
                      ("feed_forward_length", "mlp"), ("attention.head_count", "heads"),
                      ("context_length", "context")):
        m[name] = int(_field(reader, f"llama.{key}"))
    m["kv_heads"] = int(_field(reader, "llama.attention.head_count_kv", False, m["heads"]))
    m["eps"] = float(_field(reader, "llama.attention.layer_norm_rms_epsilon"))
    m["rope_base"] = float(_field(reader, "llama.rope.freq_base", False, 10000.0))
    if m["hidden"] % m["heads"] or m["heads"] % m["kv_heads"]:
        raise ConvertError(f"{path}: llama.embedding_length {m['hidden']} and head counts "
                           f"{m['heads']}/{m['kv_heads']} do not divide")
    m["head_dim"] = m["hidden"] // m["heads"]
    rope_dim = int(_field(reader, "llama.rope.dimension_count", False, m["head_dim"]))
    if rope_dim != m["head_dim"]:
        raise ConvertError(f"{path}: llama.rope.dimension_count {rope_dim} is not the head size "
                           f"{m['head_dim']} (partial rotary is not converted)")
    scaling = _field(reader, "llama.rope.scaling.type", False)
    if scaling not in (None, "none"):
        raise ConvertError(f"{path}: llama.rope.scaling.type '{scaling}' is not converted")
    tok_model = _field(reader, "tokenizer.ggml.model")
    pre = _field(reader, "tokenizer.ggml.pre", False, "default")
    if tok_model != "gpt2" or pre not in _PRE_TOKENIZERS:
        raise ConvertError(f"{path}: tokenizer.ggml.model '{tok_model}' / tokenizer.ggml.pre "
                           f"'{pre}': only byte-level BPE (gpt2) with {', '.join(_PRE_TOKENIZERS)} "
                           "pre-tokenizers is converted")
    tokens = list(_field(reader, "tokenizer.ggml.tokens"))
    m["vocab"] = len(tokens)
    m["tokenizer"] = Tokenizer(
        tokens, list(_field(reader, "tokenizer.ggml.token_type")),
        list(_field(reader, "tokenizer.ggml.merges")), pre,
        int(_field(reader, "tokenizer.ggml.bos_token_id")),
        int(_field(reader, "tokenizer.ggml.eos_token_id")),
        bool(_field(reader, "tokenizer.ggml.add_bos_token", False, True)))
    m["chat_template"] = _field(reader, "tokenizer.chat_template", False)
    m["name"] = _field(reader, "general.name", False, "")
    return reader, m


# GGUF tensor name (after "blk.N.") -> Hugging Face name (after "model.layers.N.")
_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_TOP_NAMES = {"token_embd.weight": "model.embed_tokens.weight",
              "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}


def hf_name(name, layers):
    if name in _TOP_NAMES:
        return _TOP_NAMES[name]
    m = re.fullmatch(r"blk\.(\d+)\.(.+)", name)
    if m and int(m.group(1)) < layers and m.group(2) in _LAYER_NAMES:
        return f"model.layers.{int(m.group(1))}.{_LAYER_NAMES[m.group(2)]}"
    raise ConvertError(f"tensor '{name}': not a tensor of a Llama model this converts")


def unpermute(w, heads):
    """Undo llama.cpp's rotary row permutation of a q or k projection [heads*d][K]."""
    n, k = w.shape
    return w.reshape(heads, n // heads // 2, 2, k).swapaxes(1, 2).reshape(n, k)


def expected_shape(hf, m):
    h, d = m["hidden"], m["head_dim"]
    if hf in ("model.embed_tokens.weight", "lm_head.weight"):
        return (m["vocab"], h)
    if hf.endswith("norm.weight"):
        return (h,)
    suffix = hf.split(".", 3)[3]
    return {"self_attn.q_proj.weight": (m["heads"] * d, h),
            "self_attn.k_proj.weight": (m["kv_heads"] * d, h),
            "self_attn.v_proj.weight": (m["kv_heads"] * d, h),
            "self_attn.o_proj.weight": (h, m["heads"] * d),
            "mlp.gate_proj.weight": (m["mlp"], h), "mlp.up_proj.weight": (m["mlp"], h),
            "mlp.down_proj.weight": (h, m["mlp"])}[suffix]


def dequantized(reader, m):
    """[(HF name, float32 array)] in the Hugging Face order (embedding, layers, norm, head)."""
    import gguf

    out = {}
    for t in reader.tensors:
        hf = hf_name(t.name, m["layers"])
        try:
            w = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
        except NotImplementedError as e:
            raise ConvertError(f"tensor '{t.name}': type {t.tensor_type.name} cannot be "
                               f"dequantized by gguf: {e}") from e
        want = expected_shape(hf, m)
        if tuple(w.shape) != want:
            raise ConvertError(f"tensor '{t.name}': shape {list(w.shape)}, the metadata says "
                               f"{list(want)}")
        if ".q_proj." in hf:
            w = unpermute(w, m["heads"])
        elif ".k_proj." in hf:
            w = unpermute(w, m["kv_heads"])
        if not np.all(np.isfinite(w)):
            raise ConvertError(f"tensor '{t.name}': non-finite values after dequantization")
        out[hf] = np.ascontiguousarray(w)
    order = ["model.embed_tokens.weight"]
    for layer in range(m["layers"]):
        order += [f"model.layers.{layer}.{v}" for v in _LAYER_NAMES.values()]
    order += ["model.norm.weight", "lm_head.weight"]
    missing = [n for n in order[:-1] if n not in out]
    if missing:
        raise ConvertError(f"{reader.path}: tensor for '{missing[0]}' is missing"
                           f"{' (and %d more)' % (len(missing) - 1) if len(missing) > 1 else ''}")
    return [(n, out[n]) for n in order if n in out]


# ---- writing -------------------------------------------------------------------------

def to_bf16(w):
    """float32 -> bf16 bits, round to nearest even (the values are finite)."""
    u = w.view(np.uint32)
    return ((u + (((u >> 16) & 1) + 0x7FFF)) >> 16).astype(np.uint16)


def write_safetensors(path, tensors, dtype, metadata):
    header, blobs, off = {"__metadata__": metadata}, [], 0
    for name, w in tensors:
        data = to_bf16(w) if dtype == "bf16" else w.astype("<f4")
        size = data.nbytes
        header[name] = {"dtype": "BF16" if dtype == "bf16" else "F32", "shape": list(w.shape),
                        "data_offsets": [off, off + size]}
        blobs.append(data)
        off += size
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(np.ascontiguousarray(b).tobytes())


def hf_config(m, tied, dtype):
    eps = float(str(np.float32(m["eps"])))  # the float32 in the file, as written by hand
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": m["hidden"], "intermediate_size": m["mlp"],
        "num_hidden_layers": m["layers"], "num_attention_heads": m["heads"],
        "num_key_value_heads": m["kv_heads"], "head_dim": m["head_dim"],
        "hidden_act": "silu", "rms_norm_eps": eps, "rope_theta": m["rope_base"],
        "rope_scaling": None, "max_position_embeddings": m["context"],
        "vocab_size": m["vocab"], "tie_word_embeddings": tied,
        "attention_bias": False, "mlp_bias": False,
        "bos_token_id": m["tokenizer"].bos, "eos_token_id": m["tokenizer"].eos,
        "torch_dtype": "bfloat16" if dtype == "bf16" else "float32",
    }


def chat(prompt, system):
    """The chat template of SmolLM2-Instruct (ChatML; the GGUF's template adds this
    system message when the conversation has none), ready for the answer."""
    return (f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{prompt}<|im_end|>\n"
            "<|im_start|>assistant\n")


def write_tokenizer(folder, m):
    tok = m["tokenizer"]
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({t: i for i, t in enumerate(tok.tokens)}, f, ensure_ascii=False)
    ranked = sorted(tok.ranks.items(), key=lambda kv: kv[1])
    with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        f.writelines(f"{a} {b}\n" for (a, b), _ in ranked)
    cfg = {"tokenizer_class": "GPT2Tokenizer", "bos_token": tok.tokens[tok.bos],
           "eos_token": tok.tokens[tok.eos], "add_bos_token": tok.add_bos,
           "additional_special_tokens": sorted(tok.special, key=tok.ids.get),
           "model_max_length": m["context"]}
    if m["chat_template"]:
        cfg["chat_template"] = m["chat_template"]
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=1, ensure_ascii=False)


def write_prompts(folder, m, prompts_file):
    with open(prompts_file, encoding="utf-8") as f:
        spec = json.load(f)
    tok, rows = m["tokenizer"], []
    for text in spec["prompts"]:
        templated = chat(text, spec["system"]) if spec.get("chat") else text
        ids = tok.encode(templated)
        if tok.decode(ids) != (tok.tokens[tok.bos] if tok.add_bos else "") + templated:
            raise ConvertError(f"{prompts_file}: prompt {text!r} does not decode to itself")
        rows.append({"text": text, "templated": templated, "ids": ids})
    with open(os.path.join(folder, "prompt-ids.txt"), "w") as f:
        f.writelines(" ".join(map(str, r["ids"])) + "\n" for r in rows)
    with open(os.path.join(folder, "prompts.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer": "the GGUF's vocabulary and merges (tools/models/gguf_to_hf.py)",
                   "prompts": rows}, f, indent=1, ensure_ascii=False)


def convert(gguf_path, out_dir, dtype="bf16", prompts=None):
    reader, m = read_model(gguf_path)
    tensors = dequantized(reader, m)
    tied = tensors[-1][0] != "lm_head.weight"
    parent = os.path.dirname(os.path.abspath(out_dir))
    if os.path.lexists(out_dir) and (not os.path.isdir(out_dir) or os.listdir(out_dir)):
        raise FileExistsError(f"{out_dir}: exists and is not an empty folder")
    os.makedirs(parent, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".gguf_to_hf-", dir=parent)
    try:
        with open(os.path.join(work, "config.json"), "w") as f:
            json.dump(hf_config(m, tied, dtype), f, indent=1)
            f.write("\n")
        write_safetensors(os.path.join(work, "model.safetensors"), tensors, dtype,
                          {"format": "pt", "source": os.path.basename(gguf_path),
                           "converted_by": "edgert tools/models/gguf_to_hf.py"})
        write_tokenizer(work, m)
        if prompts:
            write_prompts(work, m, prompts)
        os.chmod(work, 0o755)
        if os.path.isdir(out_dir):
            os.rmdir(out_dir)
        os.rename(work, out_dir)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return m


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("out_dir")
    ap.add_argument("--dtype", choices=("bf16", "f32"), default="bf16")
    ap.add_argument("--prompts", help="JSON: {\"prompts\": [...], \"chat\": bool, \"system\": str}")
    a = ap.parse_args(argv)
    try:
        m = convert(a.gguf, a.out_dir, a.dtype, a.prompts)
    except ConvertError as e:
        print(f"gguf_to_hf: {e}", file=sys.stderr)
        return 4
    except FileNotFoundError as e:
        print(f"gguf_to_hf: {e}", file=sys.stderr)
        return 4
    except OSError as e:
        print(f"gguf_to_hf: {e}", file=sys.stderr)
        return 1
    print(f"{a.out_dir}: {m['name'] or 'llama'}, {m['layers']} layers, hidden {m['hidden']}, "
          f"{a.dtype}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
