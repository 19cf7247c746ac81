#!/usr/bin/env python3
"""check_critical_path.py -- the critical path of every step of a JSON report adds up.

usage: check_critical_path.py REPORT.json MIN_STEPS

Checks, for every step of the report's critical_path section: its length equals the step's
time (the path tiles the window of the rank whose window is the step time), its parts by kind
sum to the length, its idle causes to its idle part, its ranks to the length; the run's
mismatched_steps is 0; at least MIN_STEPS steps; the text is printed for the log.
"""
import json, sys

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
print(f"ok: {len(steps)} steps; median {cp['median_length_ns']} ns; shares "
      + ", ".join(f"{k} {v:.2f}" for k, v in share.items() if v is not None)
      + f"; top {cp['top_ops'][0]['name'] if cp['top_ops'] else None}")
