#!/usr/bin/env python3
"""A dense bf16 checkpoint of spark-1.7b's shapes (tools/workload.c: 28 layers
of qkv_proj, o_proj, gate_up_proj, down_proj, and lm_head; 3.4 GB): random
values of magnitude 2^-7..2^-6 with random signs, written layer by layer.
The input of the measurements of a user's own weights (docs/weights.md):

  tests/perf/gen_dense.py /tmp/spark/dense.safetensors
  build/bin/edgert quantize /tmp/spark/dense.safetensors /tmp/spark/gptq.safetensors --asym
  tests/perf/rss.py build/bin/edgert pack /tmp/spark/gptq.safetensors \
      --backend avx512-w4a16 -o /tmp/spark/avx512.packed      # twice: packs, then maps
"""
import json, os, struct, sys
out = sys.argv[1]
os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
shapes = []
for l in range(28):
    shapes += [(f"model.layers.{l}.self_attn.qkv_proj.weight", 3072, 2048),
               (f"model.layers.{l}.self_attn.o_proj.weight", 2048, 2048),
               (f"model.layers.{l}.mlp.gate_up_proj.weight", 13312, 2048),
               (f"model.layers.{l}.mlp.down_proj.weight", 2048, 6656)]
shapes.append(("lm_head.weight", 131072, 2048))
hdr, off = {}, 0
for name, n, k in shapes:
    hdr[name] = {"dtype": "BF16", "shape": [n, k], "data_offsets": [off, off + 2 * n * k]}
    off += 2 * n * k
h = json.dumps(hdr).encode()
h += b" " * ((8 - len(h) % 8) % 8)
table = bytes(((b & 0x80) | 0x3C) for b in range(256))
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    for name, n, k in shapes:
        left = 2 * n * k
        while left:
            chunk = min(left, 64 << 20)
            d = bytearray(os.urandom(chunk))
            d[1::2] = bytes(d[1::2]).translate(table)
            f.write(d)
            left -= chunk
print(out, off + 8 + len(h), "bytes")
