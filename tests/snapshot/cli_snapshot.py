#!/usr/bin/env python3
"""What the CLI prints and writes, as files, so two builds can be diffed.

    cli_snapshot.py BUILD_DIR OUT_DIR

Runs BUILD_DIR/bin/edgert over every fixture (probe of each sysroot and device
profile; list and select --explain of each device profile and manifest
fixture, both priorities), verify's figures on the tiny workload, an export's
artifacts, quantize of a seeded test model and greedy runs of it on every
in-process backend, in text and --json. Each command's stdout, stderr and
exit status go to one file in OUT_DIR. Paths of the build and of the source
tree are replaced by <BUILD> and <SRC>, and the figures that are timings
(tokens/s, seconds, GB/s) by <T>, and checksums by <H> (a plugin
relinked has other bytes), so a restructured tree must give
byte-identical files: `diff -r OUT_A OUT_B`.

Runs with HOME and XDG_* in a fresh folder, so no cached first contact or
evidence store of the machine is read. Needs numpy (make_test_model.py).
"""
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(SRC, "tests", "fixtures")
sys.path.insert(0, os.path.join(SRC, "tools", "models"))

TIMED_KEY = re.compile(r"(^|_)(s|ms|us|ns|seconds|gbs|rss|time)($|_)|per_s|fraction_of_ceiling"
                       r"|gflops|first_contact_|decode_rate|available")
TEXT_TIMING = re.compile(r"\b[0-9]+(\.[0-9]+)?\s*(tok/s|tokens/s|GB/s|ms|s\b|us|GFLOP/s)")


def untimed(v, key=""):
    """v with every number under a key that names a time, a rate or a resident size as <T>."""
    if isinstance(v, dict):
        return {k: untimed(x, k) for k, x in v.items()}
    if isinstance(v, list):
        return [untimed(x, key) for x in v]
    if isinstance(v, (int, float)) and not isinstance(v, bool) and TIMED_KEY.search(key):
        return "<T>"
    return v


def listing(d):
    return sorted(os.path.join(d, f) for f in os.listdir(d))


class Snap:
    def __init__(self, build, out):
        self.cli = os.path.join(build, "bin", "edgert")
        self.build = os.path.realpath(build)
        self.src = os.path.dirname(self.build)
        self.out = out
        self.home = tempfile.mkdtemp(prefix="snap-home-")
        self.env = dict(os.environ, HOME=self.home, XDG_CACHE_HOME=self.home + "/cache",
                        XDG_CONFIG_HOME=self.home + "/config", XDG_DATA_HOME=self.home + "/data")
        for k in ("EDGERT_MANIFEST_PATH", "EDGERT_ADD_MANIFEST_PATH", "EDGERT_DISABLE"):
            self.env.pop(k, None)

    def norm(self, s, timed):
        s = s.replace(self.build, "<BUILD>").replace(SRC, "<SRC>").replace(self.src, "<SRC>").replace(self.home, "<HOME>")
        s = re.sub(r"/tmp/snap-[a-z]+-[A-Za-z0-9_]+", "<TMP>", s)
        s = re.sub(r"(\.edgert-[a-z]+-)[A-Za-z0-9]{6}", r"\1XXXXXX", s)
        s = re.sub(r"xxh3-64:[0-9a-f]{16}", "xxh3-64:<H>", s)  # built files: other bytes
        if not timed:
            return s
        try:
            return json.dumps(untimed(json.loads(s)), sort_keys=True) + "\n"
        except ValueError:
            return TEXT_TIMING.sub("<T>", s)

    def run(self, name, args, timed=False):
        r = subprocess.run([self.cli] + [str(a) for a in args], capture_output=True, text=True,
                           env=self.env, timeout=900)
        text = (f"$ edgert {' '.join(self.norm(str(a), False) for a in args)}\n"
                f"exit {r.returncode}\n--- stdout\n{self.norm(r.stdout, timed)}"
                f"--- stderr\n{self.norm(r.stderr, timed)}")
        with open(os.path.join(self.out, name), "w") as f:
            f.write(text)
        return r

    def both(self, name, args, timed=False):
        self.run(name + ".txt", args, timed)
        return self.run(name + ".json", args + ["--json"], timed)


def fixtures(s):
    s.both("list-live", ["list"], timed=True)
    for sr in listing(os.path.join(FIX, "sysroots")):
        s.both(f"probe-sysroot-{os.path.basename(sr)}", ["probe", "--sysroot", sr])
    devices = [d for d in listing(os.path.join(FIX, "devices")) if d.endswith(".yaml")]
    devices += listing(os.path.join(FIX, "devices", "bad"))
    for d in devices:
        base = os.path.basename(os.path.dirname(d)) + "-" + os.path.basename(d)
        s.both(f"probe-device-{base}", ["probe", "--device", d])
        s.both(f"list-device-{base}", ["list", "--device", d])
        for p in ("speed", "fidelity"):
            s.both(f"select-{p}-device-{base}",
                   ["select", "--device", d, "--priority", p, "--explain"])
    avx512 = os.path.join(FIX, "devices", "x86-avx512.yaml")
    for kind in ("good", "bad"):
        for m in listing(os.path.join(FIX, "manifests", kind)):
            base = f"{kind}-{os.path.basename(m)}"
            s.both(f"list-manifest-{base}", ["list", "--device", avx512, "--manifests", m])
            s.both(f"select-manifest-{base}", ["select", "--device", avx512, "--manifests", m,
                                               "--explain"])
    for y in listing(os.path.join(FIX, "workloads")):
        s.both(f"verify-workload-{os.path.basename(y)}",
               ["verify", "--quick", "--workload", y, "--tokens", "16"], timed=True)
    s.run("help.txt", ["--help"])
    s.run("version.txt", ["--version"])


def digest(folder, skip=()):
    lines = []
    for root, _, files in sorted(os.walk(folder)):
        for f in sorted(set(files) - set(skip)):
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                h = hashlib.sha256(fh.read()).hexdigest()
            lines.append(f"{os.path.relpath(p, folder)} {h}")
    return "\n".join(lines) + "\n"


def artifacts(s, work):
    import make_test_model
    r = s.run("export.txt", ["export", "--out", f"{work}/export", "--device",
                             os.path.join(FIX, "devices", "android-hexagon.yaml"), "--quick",
                             "--rows", "64"], timed=True)
    if r.returncode == 0:
        for f in ("report.json", "report.txt", "encodings.json"):
            p = f"{work}/export/{f}"
            if os.path.exists(p):
                with open(os.path.join(s.out, f"export-{f}"), "w") as o:
                    o.write(s.norm(open(p).read(), True))
        with open(os.path.join(s.out, "export-digest.txt"), "w") as o:
            o.write(digest(f"{work}/export", ("report.json", "report.txt")))
    model = f"{work}/model"
    make_test_model.make(model, shape="tiny", seed=9)
    q = f"{work}/gptq"
    os.makedirs(q)
    os.link(f"{model}/config.json", f"{q}/config.json")
    s.both("quantize", ["quantize", f"{model}/model.safetensors", f"{q}/model.safetensors",
                        "--asym", "--group", "128"])
    with open(os.path.join(s.out, "quantize-digest.txt"), "w") as o:
        o.write(digest(q))
    sel = subprocess.run([s.cli, "select", "--json"], capture_output=True, text=True, env=s.env)
    sel = json.loads(sel.stdout)
    names = [c["name"] for c in sel["candidates"]
             if c["eligible"] and c.get("runs_in_process", True) and c.get("processor") == "cpu"]
    for b in names:
        for m, tag in ((model, "dense"), (q, "gptq")):
            s.run(f"run-{tag}-{b}.json", ["run", m, "--backend", b, "--prompt-ids",
                                          "5,17,300,42,7", "--max-new-tokens", "8",
                                          "--ignore-eos", "--json"], timed=True)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    build, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    s = Snap(build, out)
    fixtures(s)
    with tempfile.TemporaryDirectory(prefix="snap-work-") as work:
        artifacts(s, work)
    print(f"{len(os.listdir(out))} files in {out}")


if __name__ == "__main__":
    main()
