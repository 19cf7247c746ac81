#!/usr/bin/env python3
"""bench_attribution.py — how often `stepscope analyze` finds a cause it was given.

Runs the bundled trainer (CPU backend) with one injected delay
(`--debug-delay RANK:PHASE:MS`) per case, analyzes the trace and scores the answer:

- culprit cases (every layout with phase optimizer or data; layouts without a pipeline, and
  tp2 x pp2, with forward or backward too): right when the top culprit beyond noise
  (collectives.culprits[0]) is the delayed rank in the expected phase (data -> "host"); the
  time is its phase_excess_ns against the injected time over the steps it was found in (MS
  per step; MS x micro-batches for forward/backward).
- imbalance cases (pp2, pp4, dp2 x pp2 with forward or backward): right when every other
  stage of the delayed rank's pipeline names its stage as imbalance_stage; the time is the
  mean of those stages' bubble_causes.imbalance_ns against steps x micro-batches x MS.
- no-delay cases (--no-delay N, round robin over the layouts): a false culprit is a run whose
  culprit_verdict says "culprit" (issue 30's goal: at most 1 in 20).

A case's time is "within 20 %" when |found - injected| <= 0.2 x injected. Prints one
line per case and the totals, with the machine's CPU count and load. Needs a built tree:
  python3 bench/attribution/bench_attribution.py --build build --cases 40 --no-delay 20 --seed 1
Run it on a quiet machine: the trainer's ranks share the CPU cores.
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

MODEL = ["--layers", "4", "--hidden", "64", "--heads", "4", "--seq", "64", "--batch", "8"]
LAYOUTS = {
    "dp4": (["--world", "4", "--dp", "4"], "dp"),
    "dp2": (["--world", "2", "--dp", "2"], "dp"),
    "tp2_dp2": (["--world", "4", "--tp", "2", "--dp", "2"], "dp"),
    "cp2_dp2": (["--world", "4", "--cp", "2", "--dp", "2"], "dp"),
    "ep2_dp2": (["--world", "2", "--dp", "2", "--experts", "4", "--ep", "2"], "dp"),
    "pp2": (["--world", "2", "--pp", "2"], "pp"),
    "pp4": (["--world", "4", "--pp", "4", "--microbatches", "4"], "pp"),
    "dp2_pp2": (["--world", "4", "--dp", "2", "--pp", "2", "--microbatches", "2"], "pp"),
    "tp2_pp2": (["--world", "4", "--tp", "2", "--pp", "2", "--microbatches", "4"], "tp_pp"),
}


RANK_RIGHT = []  # per case: the delayed rank named, whatever the phase


def train_and_analyze(build, layout, steps, tmp, delay):
    args, _ = LAYOUTS[layout]
    run = os.path.join(tmp, "run")
    shutil.rmtree(run, ignore_errors=True)
    cmd = [os.path.join(build, "trainer", "stepscope-train"), "--backend", "cpu", "--quiet",
           "--steps", str(steps), "--trace", run] + (["--debug-delay", delay] if delay else [])
    subprocess.run(cmd + args + MODEL, check=True, stdout=subprocess.DEVNULL)
    rep = os.path.join(tmp, "report.json")
    subprocess.run([os.path.join(build, "analyzer", "stepscope"), "analyze", run, "--json", rep],
                   check=True, stdout=subprocess.DEVNULL)
    return json.load(open(rep))


def run_case(build, layout, rank, phase, ms, steps, tmp):
    _, kind = LAYOUTS[layout]
    r = train_and_analyze(build, layout, steps, tmp, "%d:%s:%d" % (rank, phase, ms))
    cfg = r["run"]["config"]
    m = cfg["microbatches"] * cfg.get("virtual_stages", 1)
    per_step = ms * 1e6 * (m if phase in ("forward", "backward") else 1)
    if kind in ("dp", "tp_pp") or phase in ("optimizer", "data"):
        want = "host" if phase == "data" else phase
        cul = r["collectives"]["culprits"]
        if not cul:
            RANK_RIGHT.append(False)
            return False, None, "no culprit"
        top = cul[0]
        ok = top["rank"] == rank and top["phase"] == want
        RANK_RIGHT.append(top["rank"] == rank)
        injected = top["steps"] * per_step
        found = top["phase_excess_ns"] if ok else None
        return ok, (found, injected), "top %d %s in %d steps" % (top["rank"], top["phase"], top["steps"])
    ranks = {x["rank"]: x for x in r["ranks"]}
    stage = ranks[rank]["pipeline_stage"]
    lay = [json.loads(json.dumps(x)) for x in r["ranks"]]
    # the other stages of the delayed rank's pipeline: same dp rank
    dp_of = lambda x: x["rank"] // (cfg["pp"] * cfg["tp"] * cfg["cp"])
    others = [x for x in lay if dp_of(x) == dp_of(ranks[rank]) and x["pipeline_stage"] != stage]
    named = [x["totals"]["imbalance_stage"] for x in others]
    ok = all(n == stage for n in named)
    RANK_RIGHT.append(ok)
    injected = len(r["run"]["steps"]) * per_step
    found = sum(x["totals"]["bubble_causes"]["imbalance_ns"] for x in others) / len(others)
    return ok, (found, injected), "imbalance stages named %s" % named


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--cases", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--ms", default="60,100,150", help="delays to draw from (ms)")
    ap.add_argument("--no-delay", type=int, default=0, help="runs without a delay (false culprits)")
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    mss = [int(x) for x in a.ms.split(",")]
    right = timed = within = 0
    tmp = tempfile.mkdtemp(prefix="ss-bench-attr.")
    print("machine: %d CPUs, load average %s" % (os.cpu_count(), os.getloadavg()))
    try:
        for i in range(a.cases):
            layout = rnd.choice(sorted(LAYOUTS))
            args, kind = LAYOUTS[layout]
            world = int(args[args.index("--world") + 1])
            rank = rnd.randrange(world)
            phase = rnd.choice(["forward", "backward", "optimizer", "data"])
            ms = rnd.choice(mss)
            ok, t, what = run_case(a.build, layout, rank, phase, ms, a.steps, tmp)
            right += ok
            line = "case %3d %-8s rank %d %-9s %4d ms: %s, %s" % (i, layout, rank, phase, ms,
                                                                 "right" if ok else "WRONG", what)
            if ok and t and t[0] is not None:
                timed += 1
                err = (t[0] - t[1]) / t[1]
                within += abs(err) <= 0.20
                line += ", found %.0f of %.0f ms (%+.1f %%)" % (t[0] / 1e6, t[1] / 1e6, 100 * err)
            print(line, flush=True)
        false_culprits = 0
        for i in range(a.no_delay):
            layout = sorted(LAYOUTS)[i % len(LAYOUTS)]
            v = train_and_analyze(a.build, layout, a.steps, tmp, None)["collectives"]["culprit_verdict"]
            false_culprits += v["status"] == "culprit"
            cand = v["candidate"]
            print("no-delay %3d %-8s: %s%s" % (i, layout, v["status"], "" if not cand else
                  " (candidate rank %d %s, %d of %d steps beyond %.1f ms)" % (
                      cand["rank"], cand["phase"], cand["steps_late"], v["steps_judged"],
                      v["threshold_ns"] / 1e6)), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("right rank: %d of %d (%.1f %%)" % (sum(RANK_RIGHT), a.cases, 100.0 * sum(RANK_RIGHT) / max(a.cases, 1)))
    print("right rank and phase: %d of %d (%.1f %%); time within 20 %%: %d of %d (%.1f %%)"
          % (right, a.cases, 100.0 * right / max(a.cases, 1), within, timed,
             100.0 * within / max(timed, 1)))
    if a.no_delay:
        print("false culprits without a delay: %d of %d" % (false_culprits, a.no_delay))
    print("load average at the end: %s" % (os.getloadavg(),))
    return 0


if __name__ == "__main__":
    sys.exit(main())
