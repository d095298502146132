#!/usr/bin/env python3
"""tests/perf/llamacpp.py — llama.cpp beside edgert, for benchmarks (never the
tests): built once from the llama-cpp-python sdist on PyPI, which carries
llama.cpp's source (vendor/llama.cpp), pinned by version and SHA-256. None of
its code is part of edgert; it lives in the cache.

    llamacpp.py build              build llama-bench, llama-completion,
                                   llama-tokenize, llama-quantize (once)
    llamacpp.py bench GGUF [--threads N] [--repeat R] [--prompt P] [--gen G]
                                   llama-bench: prefill of P tokens and decode
                                   of G, tokens/s median and [min..max] of R runs
    llamacpp.py smollm2 [--repeat R] [--tokens T]
                                   the real model (tools/models/smollm2.py):
                                   llama.cpp's tokenizer against the converted
                                   prompt ids, greedy continuations against
                                   tools/models/llama_numpy.py on the fp32
                                   folder (tokens until they part), and bench
    llamacpp.py spark [--quant Q4_0,Q4_K_M] [--repeat R]
                                   a spark-1.7b-shaped model (28 layers, hidden
                                   2048, vocabulary 131072, tied head; written by
                                   tools/models/make_test_model.py, seed 1,
                                   bf16), as GGUF (tools/models/hf_to_gguf.py),
                                   quantized by llama-quantize; then bench
    llamacpp.py versus MODEL_DIR GGUF [--edgert PATH] [--rounds R] [--backend B]
                                   the whole-model comparison in one window:
                                   rounds alternating llama-bench on GGUF and
                                   `edgert run` on MODEL_DIR (the same weights,
                                   edgert quantizing them its own way), prefill
                                   of 512 tokens and decode of 128; per round
                                   and overall, tok/s and edgert over llama.cpp
    llamacpp.py path TOOL          the path of a built tool

Run it with the project's virtual environment
(~/.cache/edgert-ci/venv/bin/python, made by .ci/deps). The build uses
llama.cpp's own defaults for this CPU (GGML_NATIVE: -march=native), as a user
building it here would; it takes about 6 minutes on 2 cores. Folder:
$XDG_CACHE_HOME/edgert-ci/llama.cpp-<version> (default ~/.cache/...).
Exit codes: 0 ok, 1 failure, 2 usage, 3 the sdist cannot be fetched.
"""
import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools", "models"))

SDIST = ("llama-cpp-python", "0.3.36", "llama_cpp_python-0.3.36.tar.gz",
         "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e")
TOOLS = ["llama-bench", "llama-completion", "llama-tokenize", "llama-quantize"]
CMAKE_FLAGS = ["-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_BUILD_TESTS=OFF",
               "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
               "-DLLAMA_OPENSSL=OFF", "-DLLAMA_CURL=OFF"]


def cache_dir():
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = xdg if xdg.startswith("/") else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "edgert-ci", f"llama.cpp-{SDIST[1]}")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def tool(name):
    return os.path.join(cache_dir(), "build", "bin", name)


def build():
    root = cache_dir()
    if all(os.access(tool(t), os.X_OK) for t in TOOLS):
        return root
    src = os.path.join(root, "src")
    if not os.path.isdir(src):
        os.makedirs(root, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=root) as tmp:
            pkg, version, name, digest = SDIST
            path = os.path.join(tmp, name)
            # PyPI's simple index (PEP 691 JSON): pip download would build the
            # sdist's metadata first, which takes minutes
            req = urllib.request.Request(f"https://pypi.org/simple/{pkg}/", headers={
                "Accept": "application/vnd.pypi.simple.v1+json"})
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    url = next(u["url"] for u in json.load(r)["files"] if u["filename"] == name)
                with urllib.request.urlopen(url, timeout=60) as r, open(path, "wb") as f:
                    shutil.copyfileobj(r, f, 1 << 20)
            except (OSError, StopIteration, ValueError) as e:
                print(f"llamacpp: cannot fetch {name} from PyPI: {e}", file=sys.stderr)
                sys.exit(3)
            if sha256(path) != digest:
                sys.exit(f"llamacpp: {name}: SHA-256 {sha256(path)}, pinned {digest}")
            with tarfile.open(path) as t:
                try:
                    t.extractall(tmp, filter="data")
                except TypeError:  # Python before 3.11.4: the archive's SHA-256 is pinned
                    t.extractall(tmp)
            os.rename(os.path.join(tmp, name[:-len(".tar.gz")], "vendor", "llama.cpp"), src)
    b = os.path.join(root, "build")
    log = os.path.join(root, "build.log")
    print(f"building llama.cpp {SDIST[1]} (vendored) in {b}; its output: {log}", file=sys.stderr)
    with open(log, "w") as f:
        for cmd in (["cmake", "-S", src, "-B", b] + CMAKE_FLAGS,
                    ["cmake", "--build", b, "-j2", "--target"] + TOOLS):
            if subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode:
                sys.exit(f"llamacpp: {' '.join(cmd[:2])} failed: see {log}")
    return root


def bench(gguf, threads=2, repeat=5, prompt=512, gen=128):
    """{"prefill": [tok/s per run], "decode": [...], "build": ...} from llama-bench."""
    build()
    out = subprocess.run([tool("llama-bench"), "-m", gguf, "-t", str(threads), "-r", str(repeat),
                          "-p", str(prompt), "-n", str(gen), "-o", "json"],
                         capture_output=True, text=True, check=True).stdout
    res = {"model": gguf, "threads": threads}
    for rec in json.loads(out):
        key = "prefill" if rec["n_prompt"] else "decode"
        res[key] = rec["samples_ts"]
        res["build"] = f"{rec.get('build_commit', '?')} ({rec.get('cpu_info', '?')})"
        res["model_type"] = rec.get("model_type")
        res["model_size"] = rec.get("model_size")
    return res


def spread(xs):
    return f"{statistics.median(xs):.1f} tok/s [{min(xs):.1f}..{max(xs):.1f}]"


def print_bench(res):
    print(f"llama.cpp {SDIST[1]} (llama-cpp-python's vendored llama.cpp, {res.get('build')}), "
          f"{res['threads']} threads: {res['model']} ({res.get('model_type')}, "
          f"{res.get('model_size', 0) / 1e6:.1f} MB)")
    print(f"  prefill {spread(res['prefill'])}   decode {spread(res['decode'])}   "
          f"({len(res['decode'])} runs: median [min..max])")


def llama_greedy(gguf, text, tokens):
    """Token ids llama.cpp generates greedily after text (special tokens parsed)."""
    out = subprocess.run([tool("llama-completion"), "-m", gguf, "-p", text, "-n", str(tokens),
                          "--temp", "0", "-no-cnv", "--no-warmup", "-t", "2",
                          "-ctk", "f32", "-ctv", "f32", "--no-display-prompt"],
                         capture_output=True, text=True, check=True).stdout
    return out


def smollm2(repeat, tokens):
    import gguf_to_hf
    import llama_numpy
    import smollm2 as model

    paths = model.ensure()
    build()
    tok = gguf_to_hf.read_model(paths["gguf"])[1]["tokenizer"]
    with open(os.path.join(paths["f32"], "prompts.json")) as f:
        prompts = json.load(f)["prompts"]
    same = 0
    for p in prompts:
        r = subprocess.run([tool("llama-tokenize"), "-m", paths["gguf"], "-p", p["templated"],
                            "--ids", "--log-disable", "--no-bos"],
                           capture_output=True, text=True, check=True)
        same += json.loads(r.stdout.strip().splitlines()[-1]) == p["ids"]
    print(f"tokenizer: llama.cpp's ids equal prompt-ids.txt's on {same} of {len(prompts)} prompts")
    net = llama_numpy.Llama(paths["f32"])
    agree = []
    for i, p in enumerate(prompts):
        ours = tok.decode(net.greedy(p["ids"], tokens, tok.eos))
        theirs = llama_greedy(paths["gguf"], p["templated"], tokens)
        n = 0
        while n < min(len(ours), len(theirs)) and ours[n] == theirs[n]:
            n += 1
        agree.append(n)
        print(f"  {i:2d} numpy fp32: {ours[:70]!r}\n     llama.cpp : {theirs[:70]!r}")
    print(f"greedy text, numpy fp32 vs llama.cpp (Q4_1 weights x Q8 activations): identical "
          f"for {statistics.median(agree):.0f} characters (median; {min(agree)}..{max(agree)})")
    print_bench(bench(paths["gguf"], repeat=repeat))
    return 0 if same == len(prompts) else 1


def spark(quants, repeat):
    """The spark-shaped model for both engines: the HF folder edgert runs and
    llama.cpp's GGUF of the same weights, quantized; kept in the model cache."""
    import hf_to_gguf
    import make_test_model
    import smollm2 as model

    root = os.path.join(model.default_cache(), "spark-1.7b-shaped")
    hf = os.path.join(root, "hf-bf16")
    if not os.path.isdir(hf):
        print(f"writing {hf} (make_test_model.py --shape spark, about a minute)", file=sys.stderr)
        make_test_model.make(hf, "llama", "spark", 1, "bf16")
    bf16 = os.path.join(root, "spark-bf16.gguf")
    if not os.path.exists(bf16):
        hf_to_gguf.convert(hf, bf16)
    build()
    for q in quants:
        out = os.path.join(root, f"spark-{q}.gguf")
        if not os.path.exists(out):
            r = subprocess.run([tool("llama-quantize"), bf16, out + ".tmp", q, "2"],
                               capture_output=True, text=True)
            if r.returncode:
                sys.exit(f"llamacpp: llama-quantize {q} failed: {r.stderr.strip()[-300:]}")
            os.replace(out + ".tmp", out)
        print_bench(bench(out, repeat=repeat))
    print(f"the same weights for edgert: {hf}")
    return 0


def edgert_run(edgert, model, backend, prompt, gen):
    """(prefill tok/s, decode tok/s) of one `edgert run` of prompt, gen tokens."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(" ".join(map(str, prompt)) + "\n")
        path = f.name
    try:
        cmd = [edgert, "run", model, "--prompt-ids", path, "--max-new-tokens", str(gen + 1),
               "--ignore-eos", "--context", str(len(prompt) + gen + 8), "--json"]
        if backend:
            cmd += ["--backend", backend]
        doc = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    finally:
        os.unlink(path)
    p = doc["prompts"][0]
    return p["prefill_tokens_per_s"], p["decode_tokens_per_s"], doc["backend"]


def versus(model, gguf, edgert, rounds, backend, prompt=512, gen=128):
    import random

    with open(os.path.join(model, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    rng = random.Random(1)
    ids = [rng.randrange(3, vocab) for _ in range(prompt)]
    build()
    rows = []
    for r in range(rounds):
        lc = bench(gguf, repeat=3, prompt=prompt, gen=gen)
        e_pf, e_dec, name = edgert_run(edgert, model, backend, ids, gen)
        l_pf, l_dec = statistics.median(lc["prefill"]), statistics.median(lc["decode"])
        rows.append((l_pf, l_dec, e_pf, e_dec))
        print(f"round {r + 1}: llama.cpp prefill {l_pf:.1f} decode {l_dec:.1f} tok/s; edgert "
              f"({name}) prefill {e_pf:.1f} decode {e_dec:.1f} tok/s: decode x{e_dec / l_dec:.2f}, "
              f"prefill x{e_pf / l_pf:.2f}", flush=True)
    ratio_d = [e[3] / e[1] for e in rows]
    ratio_p = [e[2] / e[0] for e in rows]
    print(f"edgert over llama.cpp, {rounds} alternating rounds: decode "
          f"x{statistics.median(ratio_d):.2f} [{min(ratio_d):.2f}..{max(ratio_d):.2f}], prefill "
          f"x{statistics.median(ratio_p):.2f} [{min(ratio_p):.2f}..{max(ratio_p):.2f}] "
          f"(median [min..max] of the rounds' ratios)")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build")
    b = sub.add_parser("bench")
    b.add_argument("gguf")
    b.add_argument("--threads", type=int, default=2)
    b.add_argument("--repeat", type=int, default=5)
    b.add_argument("--prompt", type=int, default=512)
    b.add_argument("--gen", type=int, default=128)
    b.add_argument("--json", action="store_true")
    s = sub.add_parser("smollm2")
    s.add_argument("--repeat", type=int, default=5)
    s.add_argument("--tokens", type=int, default=24)
    sp = sub.add_parser("spark")
    sp.add_argument("--quant", default="Q4_0,Q4_K_M")
    sp.add_argument("--repeat", type=int, default=5)
    v = sub.add_parser("versus")
    v.add_argument("model")
    v.add_argument("gguf")
    v.add_argument("--edgert", default=os.path.join(ROOT, "build", "bin", "edgert"))
    v.add_argument("--rounds", type=int, default=3)
    v.add_argument("--backend")
    t = sub.add_parser("path")
    t.add_argument("tool", choices=TOOLS)
    a = ap.parse_args(argv)
    if a.cmd == "build":
        print(build())
    elif a.cmd == "path":
        build()
        print(tool(a.tool))
    elif a.cmd == "bench":
        res = bench(a.gguf, a.threads, a.repeat, a.prompt, a.gen)
        print(json.dumps(res) if a.json else "", end="\n" if a.json else "")
        if not a.json:
            print_bench(res)
    elif a.cmd == "smollm2":
        return smollm2(a.repeat, a.tokens)
    elif a.cmd == "versus":
        return versus(a.model, a.gguf, a.edgert, a.rounds, a.backend)
    elif a.cmd == "spark":
        return spark(a.quant.split(","), a.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
