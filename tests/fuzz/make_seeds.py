#!/usr/bin/env python3
"""tests/fuzz/make_seeds.py OUT FIXTURES — the seed corpora the fuzz targets
need that are not fixture files already (.ci/fuzz runs it before fuzzing).

The YAML targets (yaml, manifest, device_profile) take tests/fixtures' YAML
files as they are: .ci/fuzz hands libFuzzer those folders directly as extra,
read-only corpus folders. The others read another input form, written here
into OUT/<target>/ (replaced on every run, never committed):

- probe: each sysroot of FIXTURES/sysroots as fuzz_probe's input, its files
  in fuzz_probe.c's order separated by the same marker line;
- evidence: evidence files for fuzz_evidence.c's handle (its device
  fingerprint and the XXH3 of its library file), matching and not;
- checkpoint: GPTQ layers (v1 and v2 metadata, inferred), a dense layer
  beside an embedding, a packed-file header.
- safetensors: small valid files of each float dtype, with metadata and
  escaped names, and a few that break one rule each.
- config: config.json of each model type the runner runs (llama with and
  without llama3 rope scaling and attention bias, mistral with a sliding
  window, qwen2, qwen3 with head_dim), SmolLM2's own, and a few that break
  one rule each.
"""
import json
import os
import shutil
import struct
import sys

# fuzz_probe.c: FZ_SEP and fz_files, in that order.
PROBE_SEP = b"\n@@edgert-file@@\n"
PROBE_FILES = [
    ["proc/cpuinfo"],
    ["proc/meminfo"],
    ["sys/devices/system/cpu/online"],
    ["proc/device-tree/model", "sys/firmware/devicetree/base/model"],
    ["proc/device-tree/compatible", "sys/firmware/devicetree/base/compatible"],
    ["etc/nv_tegra_release"],
    ["proc/driver/nvidia/gpus/*/information"],
]
# fuzz_evidence.c: FZ_DEVICE, FZ_BACKEND, FZ_LIBRARY_XXH3.
EV_DEVICE = "0123456789abcdef"
EV_BACKEND = "fuzz-w4a16"
EV_HASH = "0ca5b0b748757192"


def read_first(root, rels):
    for rel in rels:
        if "*" in rel:
            head, tail = rel.split("*")
            folder = os.path.join(root, head)
            if os.path.isdir(folder):
                for name in sorted(os.listdir(folder)):
                    p = os.path.join(folder, name, tail.lstrip("/"))
                    if os.path.isfile(p):
                        return open(p, "rb").read()
            continue
        p = os.path.join(root, rel)
        if os.path.isfile(p):
            return open(p, "rb").read()
    return None


def probe_seeds(out, fixtures):
    roots = os.path.join(fixtures, "sysroots")
    for name in sorted(os.listdir(roots)):
        parts = [read_first(os.path.join(roots, name), rels) for rels in PROBE_FILES]
        while parts and parts[-1] is None:
            parts.pop()  # trailing files absent: the input stops before them
        data = PROBE_SEP.join(p if p is not None else b"" for p in parts)
        open(os.path.join(out, name), "wb").write(data)


def ev_entry(**kw):
    e = {"device": EV_DEVICE, "device_name": "fuzz host", "backend": EV_BACKEND,
         "plugin_xxh3": EV_HASH, "decode_tokens_per_s": 3.2, "prefill_gflops": 20.1,
         "top1_agreement": 1, "kl_mean": 1.2e-05, "sqnr_min_db": 19.8, "threads": 2,
         "correct": 1, "workload": "spark-1.7b", "measured_at": "2026-11-29T10:00:00Z",
         "edgert_version": "0.1.0"}
    e.update(kw)
    return e


def evidence_seeds(out):
    files = {
        "match": [ev_entry()],
        "failed-verify": [ev_entry(correct=0)],
        "other-build": [ev_entry(plugin_xxh3="ffffffffffffffff")],
        "other-device": [ev_entry(device="fedcba9876543210"), ev_entry(backend="ref-w4a16")],
        "nulls": [ev_entry(decode_tokens_per_s=None, correct=None, kl_mean="x")],
        "escapes": [ev_entry(device_name="caf\u00e9 \"q\" \\ \t\u2028", workload="w\u00a0")],
        "many": [ev_entry(backend="b%d" % i) for i in range(8)] + [ev_entry()],
    }
    for name, entries in files.items():
        text = json.dumps({"evidence_version": 1, "entries": entries}, indent=1)
        open(os.path.join(out, name + ".json"), "w").write(text + "\n")
    raw = {
        "empty.json": "",
        "version-2.json": '{"evidence_version": 2, "entries": []}\n',
        "entries-map.json": '{"evidence_version": 1, "entries": {"a": 1}}\n',
        "top-list.json": '[{"evidence_version": 1}]\n',
        "entry-scalars.json": '{"evidence_version": 1, "entries": [1, "x", [], {}]}\n',
        "yaml-style.json": "evidence_version: 1\nentries:\n  - device: %s\n    backend: %s\n"
                           "    plugin_xxh3: \"%s\"\n    correct: 1\n" % (EV_DEVICE, EV_BACKEND,
                                                                        EV_HASH),
    }
    for name, text in raw.items():
        open(os.path.join(out, name), "w").write(text)


def st_file(tensors, meta=None, pad=b""):
    """tensors: [(name, dtype, shape, data bytes)] laid out in order."""
    header, data = {}, b""
    if meta is not None:
        header["__metadata__"] = meta
    for name, dtype, shape, blob in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data + pad


def safetensors_seeds(out):
    f32 = struct.pack("<6f", 1, -2, 0.5, 3e38, -0.0, 1e-40)
    f16 = struct.pack("<4H", 0x3C00, 0x8001, 0x7C00, 0x7E00)
    bf16 = struct.pack("<4H", 0x3F80, 0xFF80, 0x0001, 0x7FC1)
    files = {
        "f32": st_file([("q.weight", "F32", [2, 3], f32)]),
        "f16-bf16": st_file([("a.weight", "F16", [2, 2], f16), ("a.x", "BF16", [4], bf16)],
                            meta={"format": "pt"}),
        "ints": st_file([("i", "I8", [3], b"\x01\x02\x03"), ("u4", "U4", [3], b"\x12\x03"),
                         ("b", "BOOL", [1], b"\x01"), ("e", "F8_E4M3", [2], b"\x00\x7f")]),
        "scalar-empty": st_file([("s", "F32", [], struct.pack("<f", 7)),
                                 ("z", "F32", [0, 5], b"")]),
        "escaped-names": st_file([("caf\u00e9\U0001F600 \"x\"", "F32", [1], f32[:4])]),
        "lm-head": st_file([("lm_head.weight", "BF16", [2, 2], bf16),
                            ("lm_head.x", "F16", [1, 2], f16[:4])]),
        "trailing-data": st_file([("t", "F32", [1], f32[:4])], pad=b"\0" * 8),
    }
    good = st_file([("q.weight", "F32", [2, 3], f32)])
    hl = struct.unpack("<Q", good[:8])[0]

    def raw(header, data):
        return struct.pack("<Q", len(header)) + header + data

    entry = b'{"dtype": "F32", "shape": [1], "data_offsets": [%d, %d]}'
    files.update({
        "bad-header-length": struct.pack("<Q", hl + 100) + good[8:],
        "bad-overlap": raw(b'{"a": ' + entry % (0, 4) + b', "b": ' + entry % (2, 6) + b'}',
                           f32[:8]),
        "bad-duplicate": raw(b'{"a": ' + entry % (0, 4) + b', "a": ' + entry % (4, 8) + b'}',
                             f32[:8]),
        "bad-truncated": good[:-4],
        "bad-json": raw(b'{"a', b""),
        "empty-header": raw(b"{}", b""),
    })
    for name, blob in files.items():
        open(os.path.join(out, name + ".safetensors"), "wb").write(blob)


def checkpoint_seeds(out):
    """GPTQ layers (v1 and v2 metadata, with and without g_idx), a dense
    layer beside an embedding, a packed-file header."""
    n, k, g = 8, 256, 128
    qweight = bytes(range(256)) * ((k // 8) * n * 4 // 256)
    qzeros = struct.pack("<%dI" % (k // g), *([0x77777777] * (k // g)))
    scales = struct.pack("<%dH" % ((k // g) * n), *([0x1400] * ((k // g) * n)))
    g_idx = struct.pack("<%dI" % k, *[i // g for i in range(k)])
    layer = [("m.l.0.q.qweight", "I32", [k // 8, n], qweight),
             ("m.l.0.q.qzeros", "I32", [k // g, 1], qzeros),
             ("m.l.0.q.scales", "F16", [k // g, n], scales)]
    meta = {"checkpoint_format": "gptq", "bits": "4", "group_size": "128", "sym": "true",
            "desc_act": "false"}
    dense = struct.pack("<%df" % (4 * 16), *[0.01 * i for i in range(64)])
    files = {
        "gptq-v1-meta": st_file(layer + [("m.l.0.q.g_idx", "I32", [k], g_idx)], meta=meta),
        "gptq-v2-nometa": st_file(layer, meta={"checkpoint_format": "gptq_v2"}),
        "gptq-inferred": st_file(layer),
        "dense": st_file([("m.embed_tokens.weight", "F32", [4, 16], dense),
                          ("m.l.0.up.weight", "F32", [4, 16], dense),
                          ("m.norm.weight", "F32", [16], dense[:64])]),
        "packed": st_file([("m.l.0.q.packed", "U8", [64], b"\0" * 64)],
                          meta={"edgert_packed_format": "1", "backend": "ref-w4a16",
                                "layout": "ref-w4a16/1", "plugin_xxh3": "0" * 16,
                                "layer:m.l.0.q": "n=8 k=256 group=128 sym=1 bytes=64 source="
                                                 + "0" * 16}),
    }
    for name, blob in files.items():
        open(os.path.join(out, name + ".safetensors"), "wb").write(blob)


def config_seeds(out):
    """config.json files: one per model type and option, and broken ones."""
    base = {"model_type": "llama", "hidden_size": 576, "intermediate_size": 1536,
            "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
            "vocab_size": 49152, "rms_norm_eps": 1e-5, "rope_theta": 100000,
            "max_position_embeddings": 8192, "tie_word_embeddings": True, "hidden_act": "silu",
            "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16"}
    llama3 = dict(base, hidden_size=2048, num_attention_heads=32, num_key_value_heads=8,
                  vocab_size=128256, eos_token_id=[128001, 128008, 128009],
                  rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 8192},
                  attention_bias=False)
    files = {
        "smollm2": base,
        "llama3": llama3,
        "llama-bias": dict(base, attention_bias=True, eos_token_id=None),
        "mistral": dict(base, model_type="mistral", sliding_window=4096, rope_scaling=None),
        "qwen2": dict(base, model_type="qwen2", use_sliding_window=False, sliding_window=1024),
        "qwen3": dict(base, model_type="qwen3", head_dim=128, num_attention_heads=16,
                      num_key_value_heads=8),
        "bad-kv-heads": dict(base, num_key_value_heads=4),
        "bad-odd-head": dict(base, hidden_size=27, num_attention_heads=9),
        "bad-rope": dict(llama3, rope_scaling={"type": "llama3", "factor": 8,
                                               "low_freq_factor": 4, "high_freq_factor": 1,
                                               "original_max_position_embeddings": 8192}),
        "bad-type": dict(base, model_type="gpt2", hidden_act="gelu"),
        "bad-eos": dict(base, eos_token_id=49152),
    }
    for name, doc in files.items():
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump(doc, f, indent=2)
    with open(os.path.join(out, "not-an-object.json"), "w") as f:
        f.write("[1, 2, 3]\n")


def main():
    if len(sys.argv) != 3:
        print("usage: make_seeds.py OUT FIXTURES", file=sys.stderr)
        return 2
    out, fixtures = sys.argv[1], sys.argv[2]
    for target, make in (("probe", lambda d: probe_seeds(d, fixtures)),
                         ("evidence", evidence_seeds), ("safetensors", safetensors_seeds),
                         ("checkpoint", checkpoint_seeds), ("config", config_seeds)):
        d = os.path.join(out, target)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        make(d)
        print("seeds: %s: %d files in %s" % (target, len(os.listdir(d)), d))
    return 0


if __name__ == "__main__":
    sys.exit(main())
