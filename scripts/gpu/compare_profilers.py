#!/usr/bin/env python3
"""compare_profilers.py — the first outside check of stepscope's tracer: the same PyTorch
program traced by `stepscope record` (A) and by torch.profiler (B) must give the same steps,
the same kernels per step and about the same GPU busy time (window step 6).

    compare_profilers.py DIFF.json REPORT_A.json REPORT_B.json [--kernels-tol 0.02] [--busy-tol 0.10]

DIFF.json is `stepscope diff A B --step-range step --json`; the reports are `stepscope analyze
--step-range step --json` of each. Checks, one line each (PASS/FAIL with the numbers):
  steps     the diff's step counts of A and B are equal and not 0
  kernels   kernels per step (the sum over the diff's kernel rows of count_per_step) of B
            within --kernels-tol (relative) of A's
  busy      the median over steps of rank 0's GPU busy time (the reports' steps[].busy_ns)
            of B within --busy-tol of A's
Exits 1 when a check failed or an input is missing or unreadable, else 0.
"""
import argparse
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def median(values):
    values = sorted(values)
    return values[len(values) // 2] if values else None


def busy_per_step(report):
    ranks = report.get("ranks") or []
    if not ranks:
        return None
    return median([s["busy_ns"] for s in ranks[0].get("steps", []) if s.get("busy_ns") is not None])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("diff")
    ap.add_argument("report_a")
    ap.add_argument("report_b")
    ap.add_argument("--kernels-tol", type=float, default=0.02)
    ap.add_argument("--busy-tol", type=float, default=0.10)
    a = ap.parse_args()
    try:
        diff, ra, rb = load(a.diff), load(a.report_a), load(a.report_b)
    except (OSError, ValueError) as e:
        print("FAIL input: %s" % e)
        return 1
    failures = 0

    def check(ok, what):
        nonlocal failures
        print(("PASS " if ok else "FAIL ") + what)
        failures += 0 if ok else 1

    sa, sb = diff.get("a", {}).get("steps", 0), diff.get("b", {}).get("steps", 0)
    check(sa == sb and sa > 0, "steps: record %d, profiler %d" % (sa, sb))

    rows = diff.get("kernels") or []
    ka = sum((r.get("a") or {}).get("count_per_step", 0) for r in rows)
    kb = sum((r.get("b") or {}).get("count_per_step", 0) for r in rows)
    rel = abs(kb - ka) / ka if ka else float("inf")
    worst = sorted(rows, key=lambda r: -abs((r.get("b") or {}).get("count_per_step", 0) -
                                            (r.get("a") or {}).get("count_per_step", 0)))
    hint = ""
    if worst and rel > 0:
        w = worst[0]
        hint = " (most different: %s, %g vs %g)" % (str(w.get("name"))[:60], (w.get("a") or {}).get("count_per_step", 0),
                                                    (w.get("b") or {}).get("count_per_step", 0))
    check(ka > 0 and rel <= a.kernels_tol,
          "kernels per step: record %g, profiler %g (%+.1f %%, tolerance %g %%)%s"
          % (ka, kb, 100 * (kb - ka) / ka if ka else float("nan"), 100 * a.kernels_tol, hint))

    ba, bb = busy_per_step(ra), busy_per_step(rb)
    if ba and bb:
        check(abs(bb - ba) / ba <= a.busy_tol, "GPU busy per step: record %.3f ms, profiler %.3f ms (%+.1f %%, tolerance %g %%)"
              % (ba / 1e6, bb / 1e6, 100 * (bb - ba) / ba, 100 * a.busy_tol))
    else:
        check(False, "GPU busy per step: record %s, profiler %s (no steps with busy time)" % (ba, bb))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
