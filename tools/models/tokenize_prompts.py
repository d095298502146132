#!/usr/bin/env python3
"""tools/models/tokenize_prompts.py — prompts as token ids, with a GGUF's own
tokenizer (gguf_to_hf.py's BPE), one prompt a line: what `edgert run
--prompt-ids` and `edgert quantize --calibrate` read.

    tokenize_prompts.py MODEL.gguf PROMPTS.json OUT.txt

PROMPTS.json as smollm2-prompts.json: {"prompts": [...], "chat": bool,
"system": str}; chat prompts go through the model's chat template, ready
for the answer. Each prompt must decode back to itself. Runs in the
project's virtual environment (it has gguf). Exit codes: 0 written, 1 a
prompt that does not round-trip or a file that cannot be read or written.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_to_hf  # noqa: E402


def main(argv):
    if len(argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    gguf_path, spec_path, out = argv
    try:
        _, m = gguf_to_hf.read_model(gguf_path)
        with open(spec_path, encoding="utf-8") as f:
            spec = json.load(f)
        tok, lines = m["tokenizer"], []
        for text in spec["prompts"]:
            templated = gguf_to_hf.chat(text, spec["system"]) if spec.get("chat") else text
            ids = tok.encode(templated)
            if tok.decode(ids) != (tok.tokens[tok.bos] if tok.add_bos else "") + templated:
                raise gguf_to_hf.ConvertError(f"{spec_path}: {text!r} does not decode to itself")
            lines.append(" ".join(map(str, ids)) + "\n")
        with open(out, "w") as f:
            f.writelines(lines)
    except (OSError, ValueError, gguf_to_hf.ConvertError) as e:
        print(f"tokenize_prompts.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
