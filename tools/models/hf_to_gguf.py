#!/usr/bin/env python3
"""tools/models/hf_to_gguf.py — a dense Llama-architecture Hugging Face folder
(F32/F16/BF16 safetensors, e.g. one make_test_model.py wrote) as a GGUF file
llama.cpp loads, so both engines run the same weights:

    hf_to_gguf.py MODEL_DIR OUT.gguf

The tensors keep their dtype (llama.cpp's llama-quantize then makes Q4_0 or
Q4_K_M of it: tests/perf/llamacpp.py). q and k projections are permuted into
llama.cpp's rotary layout (the inverse of what gguf_to_hf.py undoes). The
vocabulary is the folder's vocab.json and merges.txt when it has them (GPT-2
byte-level BPE); otherwise placeholder tokens in a SentencePiece-style list
(three specials, 256 byte tokens, the rest "<tN>"): enough for llama.cpp to
load the model and run token ids, which is all a benchmark needs.
Only the llama architecture without biases or q/k norms is written (Qwen2/3
test models are not: llama.cpp names them otherwise). The file appears only
complete (written beside OUT and renamed). Exit 0 ok, 1 failure, 4 a model
this does not write.
"""
import json
import os
import struct
import sys

import numpy as np

_DT = {"F32": (np.float32, "F32"), "F16": (np.float16, "F16"), "BF16": (np.uint16, "BF16")}


def tensors(folder):
    idx = os.path.join(folder, "model.safetensors.index.json")
    files = (sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx)
             else ["model.safetensors"])
    out = {}
    for fn in files:
        path = os.path.join(folder, fn)
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            hdr = json.loads(f.read(n))
        raw = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
        for name, t in hdr.items():
            if name == "__metadata__":
                continue
            if t["dtype"] not in _DT:
                raise ValueError(f"{path}: {name} is {t['dtype']}")
            a, b = t["data_offsets"]
            out[name] = (raw[a:b].view(_DT[t["dtype"]][0]).reshape(t["shape"]), t["dtype"])
    return out


def permute(w, heads):
    n, k = w.shape
    return w.reshape(heads, 2, n // heads // 2, k).swapaxes(1, 2).reshape(n, k)


def convert(folder, out):
    import gguf

    with open(os.path.join(folder, "config.json")) as f:
        c = json.load(f)
    if c.get("model_type") != "llama" or c.get("attention_bias"):
        raise ValueError(f"{folder}: model_type {c.get('model_type')}: only llama without "
                         "biases is written")
    ts = tensors(folder)
    L, h, nh = c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"]
    nkv, d = c.get("num_key_value_heads", nh), c.get("head_dim") or h // nh
    tmp = out + ".tmp"
    w = gguf.GGUFWriter(tmp, "llama")
    w.add_name(os.path.basename(os.path.abspath(folder)))
    w.add_block_count(L)
    w.add_context_length(c.get("max_position_embeddings", 4096))
    w.add_embedding_length(h)
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    w.add_key_length(d)
    w.add_value_length(d)
    w.add_rope_dimension_count(d)
    w.add_rope_freq_base(float(c.get("rope_theta", 10000.0)))
    w.add_layer_norm_rms_eps(float(c["rms_norm_eps"]))
    if c.get("rope_scaling"):
        raise ValueError(f"{folder}: rope_scaling is not written")
    vocab = c["vocab_size"]
    vj, mt = os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt")
    if os.path.exists(vj) and os.path.exists(mt):
        ids = json.load(open(vj, encoding="utf-8"))
        toks = [t for t, _ in sorted(ids.items(), key=lambda kv: kv[1])]
        merges = [ln.rstrip("\n") for ln in open(mt, encoding="utf-8") if not ln.startswith("#")]
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("smollm")
        w.add_token_list(toks)
        w.add_token_types([3 if t.startswith("<|") or t in ("<repo_name>",) else 1 for t in toks])
        w.add_token_merges(merges)
    else:
        toks = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
        toks += [f"<t{i}>" for i in range(len(toks), vocab)]
        w.add_tokenizer_model("llama")
        w.add_token_list(toks)
        w.add_token_scores([0.0] * vocab)
        w.add_token_types([2, 3, 3] + [6] * 256 + [1] * (vocab - 259))
    w.add_bos_token_id(c.get("bos_token_id", 1))
    w.add_eos_token_id(c.get("eos_token_id", 2))
    names = {"model.embed_tokens.weight": "token_embd.weight",
             "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}
    per = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
           "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
           "self_attn.o_proj.weight": "attn_output.weight",
           "post_attention_layernorm.weight": "ffn_norm.weight",
           "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
           "mlp.down_proj.weight": "ffn_down.weight"}
    for name, (arr, dt) in ts.items():
        if name in names:
            g = names[name]
        else:
            parts = name.split(".", 3)
            if len(parts) < 4 or parts[3] not in per:
                raise ValueError(f"{folder}: tensor {name} is not written")
            g = f"blk.{int(parts[2])}.{per[parts[3]]}"
        if name.endswith("q_proj.weight"):
            arr = permute(arr, nh)
        elif name.endswith("k_proj.weight"):
            arr = permute(arr, nkv)
        if arr.ndim == 1:  # norms: llama.cpp wants them in F32
            arr = ((arr.astype(np.uint32) << 16).view(np.float32) if dt == "BF16"
                   else arr.astype(np.float32))
            w.add_tensor(g, np.ascontiguousarray(arr))
        elif dt == "BF16":
            w.add_tensor(g, np.ascontiguousarray(arr), raw_dtype=gguf.GGMLQuantizationType.BF16)
        else:
            w.add_tensor(g, np.ascontiguousarray(arr))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, out)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: hf_to_gguf.py MODEL_DIR OUT.gguf", file=sys.stderr)
        return 2
    try:
        convert(argv[0], argv[1])
    except ValueError as e:
        print(f"hf_to_gguf: {e}", file=sys.stderr)
        return 4
    except OSError as e:
        print(f"hf_to_gguf: {e}", file=sys.stderr)
        return 1
    print(argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
