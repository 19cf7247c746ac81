#!/usr/bin/env python3
"""overhead_ratio.py — the tracer's overhead from the trainer's own per-step logs (window
step 8, run by overhead.sh): median step time of the traced runs over that of the plain runs.

    overhead_ratio.py --plain LOG... --traced LOG... [--runs N] [--max 1.03] [--skip 3]

Each LOG is a stepscope-train --log file (one JSON object per step, "step_ms"). The first
--skip steps of every log are left out (start-up, first-step allocations). Checks: every run
left a log with steps after the skipped ones (--runs N: N logs of each kind; a failed run
leaves none) — else FAIL and no ratio is printed; then overhead_ratio = median(traced) /
median(plain) <= --max. Prints the medians and "overhead_ratio: R"; exits 1 on a FAIL.
"""
import argparse
import json
import os
import sys


def step_times(path, skip):
    if not os.path.exists(path):
        return None
    times = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    times.append(float(json.loads(line)["step_ms"]))
                except (ValueError, KeyError):
                    return None
    return times[skip:] or None


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plain", nargs="*", default=[])
    ap.add_argument("--traced", nargs="*", default=[])
    ap.add_argument("--runs", type=int, default=0, help="runs of each kind expected")
    ap.add_argument("--max", type=float, default=1.03)
    ap.add_argument("--skip", type=int, default=3)
    a = ap.parse_args()
    bad = []
    series = {}
    for kind, logs in (("plain", a.plain), ("traced", a.traced)):
        logs = [p for p in logs if "*" not in p]  # an unmatched shell glob: no log at all
        if len(logs) < max(a.runs, 1):
            bad.append("%s: %d of %d run logs" % (kind, len(logs), max(a.runs, 1)))
        values = []
        for p in logs:
            t = step_times(p, a.skip)
            if t is None:
                bad.append("%s: %s has no steps after the first %d (the run failed)" % (kind, p, a.skip))
            else:
                values += t
        series[kind] = values
    if bad:
        for b in bad:
            print("FAIL " + b)
        print("FAIL overhead: no ratio (runs failed)")
        return 1
    p, q = median(series["plain"]), median(series["traced"])
    ratio = q / p
    print("plain step ms: median %.3f over %d steps" % (p, len(series["plain"])))
    print("traced step ms: median %.3f over %d steps" % (q, len(series["traced"])))
    ok = ratio <= a.max
    print("%s overhead_ratio: %.4f (bar %.2f)" % ("PASS" if ok else "FAIL", ratio, a.max))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
