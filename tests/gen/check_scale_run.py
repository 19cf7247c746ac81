#!/usr/bin/env python3
"""check_scale_run.py — a `stepscope-gen --scale` run analysed: what holds by construction.

usage: check_scale_run.py STEPSCOPE STEPSCOPE_GEN RANKS
Generates RANKS ranks (2,000 events each), analyses them and checks: every rank loaded; the
step time is the generator's step_ns; the schedule is the generated one (afab, 4 stages when
the ranks divide by 32); the ranks that caused the most waiting are exactly the generated
stragglers; the culprit verdict names one of them, beyond noise; every rank's clock offset is
found from its anchors with no refinement (the anchors are exact).
"""
import json
import subprocess
import sys
import tempfile

stepscope, gen, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3])
fails = 0


def check(what, ok):
    global fails
    print(("ok: " if ok else "FAIL: ") + what)
    fails += not ok


with tempfile.TemporaryDirectory() as tmp:
    out = subprocess.run([gen, tmp + "/run", "--scale", "--ranks", str(ranks),
                          "--events-per-rank", "2000"], check=True, capture_output=True,
                         text=True).stdout
    truth = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    stragglers = sorted(int(x) for x in truth["stragglers"].split())
    subprocess.run([stepscope, "analyze", tmp + "/run", "--json", tmp + "/r.json"], check=True,
                   stdout=subprocess.DEVNULL)
    with open(tmp + "/r.json") as f:
        r = json.load(f)
run = r["run"]
check(f"all {ranks} ranks loaded", run["ranks_loaded"] == ranks)
check(f"step time {run['step_time_ns']} == step_ns {truth['step_ns']}",
      run["step_time_ns"] == int(truth["step_ns"]))
if ranks % 32 == 0:
    check("schedule afab, 4 stages", run["schedule"]["name"] == "afab"
          and run["schedule"]["stages"] == 4)
top = sorted(s["rank"] for s in r["collectives"]["stragglers"][:len(stragglers)])
check(f"top stragglers {top} are the generated ones {stragglers}", top == stragglers)
v = r["collectives"]["culprit_verdict"]
check(f"culprit verdict {v['status']} names rank {v['candidate']['rank']}",
      v["status"] == "culprit" and v["candidate"]["rank"] in stragglers)
check("clock offsets from the anchors, unrefined",
      all(x["refine_ns"] == 0 for x in r["alignment"]["ranks"]))
sys.exit(1 if fails else 0)
