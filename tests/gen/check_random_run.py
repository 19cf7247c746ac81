#!/usr/bin/env python3
"""check_random_run.py — a random `stepscope-gen` scenario of many ranks, analysed: the truth it
prints (computed by brute force from the description, gen_expect.c) is what `analyze` finds.

usage: check_random_run.py STEPSCOPE STEPSCOPE_GEN RANKS [GEN_KNOBS...]
Generates the run (the time it takes is printed: the expectations were quadratic and worse in
ranks, 64 ranks x 4 steps x 200 ops took over 15 minutes, and refused more than 64 ranks),
analyses it with --json and checks, for every rank, the analysed window's span, compute, comm,
overlap, exposed comm, exposed copies, idle and bubble against the printed expectation, exactly,
and the run's step time and device latency (medians).
"""
import json
import subprocess
import sys
import tempfile
import time

stepscope, gen, ranks, knobs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
FIELDS = ["span", "compute", "comm", "overlap", "exposed_comm", "exposed_mem", "idle", "bubble"]
fails = 0


def check(what, ok):
    global fails
    print(("ok: " if ok else "FAIL: ") + what)
    fails += not ok


with tempfile.TemporaryDirectory() as tmp:
    t = time.time()
    out = subprocess.run([gen, tmp + "/run", "--ranks", str(ranks)] + knobs, check=True,
                         capture_output=True, text=True).stdout
    print("generated %d ranks (%s) in %.2f s" % (ranks, " ".join(knobs), time.time() - t))
    want, heads = {}, {}
    for line in out.splitlines():
        if line.startswith("rank "):
            r, rest = line[5:].split(":", 1)
            v = rest.split()
            want[int(r)] = {v[i]: int(v[i + 1]) for i in range(0, len(v), 2)}
        elif line.startswith("step_time_median"):
            v = line.split()
            heads = {v[i]: int(v[i + 1]) for i in range(0, len(v), 2)}
    t = time.time()
    subprocess.run([stepscope, "analyze", tmp + "/run", "--json", tmp + "/r.json", "--quiet"],
                   check=True)
    print("analysed in %.2f s" % (time.time() - t))
    with open(tmp + "/r.json") as f:
        rep = json.load(f)
check("%d ranks expected, %d analysed" % (len(want), len(rep["ranks"])),
      len(want) == ranks and len(rep["ranks"]) == ranks)
bad = []
for r in rep["ranks"]:
    got = r["totals"]
    for f in FIELDS:
        if got[f + "_ns"] != want[r["rank"]][f]:
            bad.append("rank %d %s: analysed %d, expected %d" % (r["rank"], f, got[f + "_ns"],
                                                                 want[r["rank"]][f]))
check("every rank's totals equal the truth (%d differ%s)" % (len(bad), ": " + "; ".join(bad[:5]) if bad else ""),
      not bad)
check("step time %s == %d" % (rep["run"]["step_time_ns"], heads["step_time_median"]),
      rep["run"]["step_time_ns"] == heads["step_time_median"])
check("device latency %s == %d" % (rep["run"]["device_latency_ns"], heads["device_latency_median"]),
      rep["run"]["device_latency_ns"] == heads["device_latency_median"])
sys.exit(1 if fails else 0)
