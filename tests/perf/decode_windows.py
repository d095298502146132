#!/usr/bin/env python3
"""Decode and prefill against their physical limits, by window: several `edgert bench` runs
of one backend, their windows, medians and spreads, against the targets.

    tests/perf/decode_windows.py [--edgert build/bin/edgert] [--backend avx512-w4a16]
                          [--runs 5] [--paths int16,bf16] [--quiet-above 48]
                          [--workload FILE] [--verify] [--json FILE]

Decode: --runs runs of `bench --phase decode --paired-read --json`, one after
another (never beside another benchmark or build: the machine has two
cores). Each run is put in a window by its ceiling before the steps: quiet
when it is above --quiet-above GB/s, else busy (a Zen 5 host read
about 35 GB/s busy and 57-61 quiet; name the threshold beside the figures).
A run bench flags unstable (its ceilings before and after differ by more
than 15%) is listed and left out of the medians, as bench asks.
Prefill: one `bench --phase prefill --json` per --paths entry (path=P),
M = 512; bench's fraction of the peak its kernel relies on.
--verify: `edgert verify --backend B --json` once, its SQNR and top-1 per
case, to compare with the figures before a change (0.01 dB).

Targets: decode >= 0.95 of the ceiling in busy windows and >= 0.90
in quiet ones; prefill >= 0.65 of the peak on path=int16 and path=bf16.
A window no run saw is reported as not measured, never as met.
Exit status: 0 when every measured target holds, 1 when one does not, 2
when bench could not run.
"""
import argparse
import json
import statistics
import subprocess
import sys

BUSY_TARGET, QUIET_TARGET, PREFILL_TARGET = 0.95, 0.90, 0.65


def bench(args, extra):
    cmd = [args.edgert, "bench", "--backend", args.backend, "--json"] + extra
    if args.workload:
        cmd += ["--workload", args.workload]
    p = subprocess.run(cmd, capture_output=True, text=True)
    try:
        if p.returncode == 0:
            return json.loads(p.stdout)
        why = f"exited {p.returncode}: {p.stderr.strip()}"
    except json.JSONDecodeError as e:
        why = f"printed no JSON ({e})"
    print(f"decode_windows: {' '.join(cmd)} {why}", file=sys.stderr)
    sys.exit(2)


def num(v, fmt=".3f"):
    """A figure bench printed (null when it has none) as text."""
    return "-" if v is None else format(v, fmt)


def spread(values):
    """'median [min..max] (n)' of a list, or 'none'."""
    if not values:
        return "none"
    return (f"{statistics.median(values):.3f} [{min(values):.3f}..{max(values):.3f}] "
            f"({len(values)} runs)")


def decode_runs(args):
    runs = []
    for i in range(args.runs):
        r = bench(args, ["--phase", "decode", "--paired-read"])
        d, w = r["decode"], r["decode"]["window"]
        pr = d.get("paired_read") or {}
        run = {
            "run": i + 1, "path": r.get("path"), "ceiling_before": w["ceiling_before_gbs"],
            "ceiling_after": w["ceiling_after_gbs"], "fraction": w["fraction_before"],
            "fraction_after": w["fraction_after"], "unstable": w["unstable"],
            "ms_per_step": d["ms_per_step"]["median"], "weight_gbs": d["weight_gbs"],
            "in_cache_gbs": (d.get("in_cache") or {}).get("gbs"),
            "fraction_of_step_read": d.get("fraction_of_step_read"),
            "fraction_of_call_sized": d.get("fraction_of_call_sized_bandwidth"),
            "paired_read_fraction": (pr.get("fraction") or {}).get("median"),
            "paired_read_fastest_third": (pr.get("fastest_third") or {}).get("fraction"),
        }
        if run["fraction"] is None or run["ceiling_before"] is None:
            run["unstable"] = True  # no figure to claim
        run["window"] = ("quiet" if (run["ceiling_before"] or 0) > args.quiet_above
                         else "busy")
        runs.append(run)
        print(f"decode run {run['run']}: ceiling {num(run['ceiling_before'], '.1f')} -> "
              f"{num(run['ceiling_after'], '.1f')} GB/s ({run['window']}"
              f"{', UNSTABLE' if run['unstable'] else ''}), step "
              f"{num(run['ms_per_step'], '.2f')} ms, {num(run['weight_gbs'], '.1f')} GB/s = "
              f"{num(run['fraction'])} / {num(run['fraction_after'])} of the ceilings, "
              f"{num(run['fraction_of_call_sized'])} of the call-sized read, paired read "
              f"{num(run['paired_read_fraction'])} (fastest third "
              f"{num(run['paired_read_fastest_third'])}), in-cache "
              f"{num(run['in_cache_gbs'], '.1f')} GB/s", flush=True)
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--edgert", default="build/bin/edgert")
    ap.add_argument("--backend", default="avx512-w4a16")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--paths", default="int16,bf16",
                    help="prefill paths (path=P), comma-separated; '' for none")
    ap.add_argument("--quiet-above", type=float, default=48.0,
                    help="GB/s: a ceiling above it is a quiet window")
    ap.add_argument("--workload")
    ap.add_argument("--verify", action="store_true")
    ap.add_argument("--json", help="write every figure to this file")
    args = ap.parse_args()

    out = {"backend": args.backend, "quiet_above_gbs": args.quiet_above}
    out["decode"] = runs = decode_runs(args) if args.runs > 0 else []
    verdicts = []
    for window, target in (("busy", BUSY_TARGET), ("quiet", QUIET_TARGET)):
        kept = [r["fraction"] for r in runs if r["window"] == window and not r["unstable"]]
        median = statistics.median(kept) if kept else None
        verdict = "not measured" if median is None else (
            "met" if median >= target else "NOT met")
        verdicts.append(verdict)
        paired = [r["paired_read_fraction"] for r in runs if r["window"] == window
                  and not r["unstable"] and r["paired_read_fraction"] is not None]
        print(f"decode, {window} windows: {spread(kept)} of the ceiling; target {target}: "
              f"{verdict}; of the step-by-step paired read: {spread(paired)}")
    unstable = [r["run"] for r in runs if r["unstable"]]
    if unstable:
        print(f"left out as unstable: runs {unstable}")

    out["prefill"] = []
    for path in [p for p in args.paths.split(",") if p]:
        r = bench(args, ["--phase", "prefill", "--options", f"path={path}"])["prefill"]
        frac = r["fraction_of_compute_peak"]
        if r["unstable"] or frac is None:
            verdict = "unstable: repeat"
        else:
            verdict = "met" if frac >= PREFILL_TARGET else "NOT met"
        verdicts.append(verdict)
        out["prefill"].append(dict(r, path=path))
        print(f"prefill path={path}: {num(r['gflops'], '.1f')} GFLOP/s = {num(frac)} of the "
              f"{r['compute_family']} peak ({num(r['compute_peak_before'], '.1f')} / "
              f"{num(r['compute_peak_after'], '.1f')}); target {PREFILL_TARGET}: {verdict}",
              flush=True)

    if args.verify:
        p = subprocess.run([args.edgert, "verify", "--backend", args.backend, "--json"],
                           capture_output=True, text=True)
        out["verify"] = {"exit": p.returncode, "report": p.stdout}
        print(f"verify: exit {p.returncode} (its JSON in --json's file)")
        verdicts.append("met" if p.returncode == 0 else "NOT met")

    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 1 if "NOT met" in verdicts else 0


if __name__ == "__main__":
    sys.exit(main())
