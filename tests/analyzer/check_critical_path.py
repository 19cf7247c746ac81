#!/usr/bin/env python3
"""check_critical_path.py -- the critical path of every step of a JSON report adds up.

usage: check_critical_path.py REPORT.json MIN_STEPS [--top-rank R] [--min-share KIND=X]...

Checks, for every step of the report's critical_path section: its length equals the step's
time (the path tiles the window of the rank whose window is the step time), its parts by kind
sum to the length, its idle causes to its idle part, its ranks to the length; the run's
mismatched_steps is 0; at least MIN_STEPS steps; the text is printed for the log.
--top-rank R: the run's top op on the path runs on rank R (a late rank's work is the path);
--min-share KIND=X: the steady steps' path is at least X (a fraction) of KIND.
"""
import json, sys

args = sys.argv[3:]
rep = json.load(open(sys.argv[1]))
cp = rep["critical_path"]
steps = cp["steps"]
assert len(steps) >= int(sys.argv[2]), f"{len(steps)} steps"
assert cp["mismatched_steps"] == 0, cp["mismatched_steps"]
run_steps = {s["step"]: s["time_ns"] for s in rep["run"]["steps"]}
for s in steps:
    L = s["length_ns"]
    assert L == s["step_time_ns"], f"step {s['step']}: length {L} != step time {s['step_time_ns']}"
    assert L == s["end_ns"] - s["start_ns"], s
    assert sum(s["parts"].values()) == L, f"step {s['step']}: parts {s['parts']} != {L}"
    assert sum(s["idle"].values()) == s["parts"]["idle_ns"], s
    assert sum(r["ns"] for r in s["by_rank"]) == L, s["by_rank"]
    if s["step"] in run_steps:
        assert run_steps[s["step"]] == L, (s["step"], run_steps[s["step"]], L)
share = cp["share"]
while args:
    opt, val = args.pop(0), args.pop(0)
    if opt == "--top-rank":
        assert cp["top_ops"] and cp["top_ops"][0]["rank"] == int(val), cp["top_ops"][:1]
    elif opt == "--min-share":
        kind, x = val.split("=")
        assert share[kind] >= float(x), f"{kind} share {share[kind]} < {x}"
    else:
        sys.exit(f"unknown option {opt}")
print(f"ok: {len(steps)} steps; median {cp['median_length_ns']} ns; shares "
      + ", ".join(f"{k} {v:.2f}" for k, v in share.items() if v is not None)
      + f"; top {cp['top_ops'][0]['name'] if cp['top_ops'] else None}")
