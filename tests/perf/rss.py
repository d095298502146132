#!/usr/bin/env python3
"""Run a command, sampling its RssAnon and VmRSS every 5 ms; print wall time
and the peaks (MiB) on stderr as one line."""
import subprocess, sys, time
t0 = time.monotonic()
p = subprocess.Popen(sys.argv[1:])
peak_anon = peak_rss = 0
while p.poll() is None:
    try:
        for line in open(f"/proc/{p.pid}/status"):
            if line.startswith("RssAnon:"):
                peak_anon = max(peak_anon, int(line.split()[1]))
            elif line.startswith("VmRSS:"):
                peak_rss = max(peak_rss, int(line.split()[1]))
    except OSError:
        pass
    time.sleep(0.005)
print(f"rss.py: exit {p.returncode}, {time.monotonic() - t0:.2f} s, peak RssAnon "
      f"{peak_anon / 1024:.1f} MiB, peak VmRSS {peak_rss / 1024:.1f} MiB", file=sys.stderr)
sys.exit(p.returncode)
