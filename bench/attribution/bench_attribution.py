#!/usr/bin/env python3
"""bench_attribution.py — how often `stepscope analyze` finds a cause it was given.

Runs the bundled trainer (CPU backend) with one injected delay
(`--debug-delay RANK:PHASE:MS`) per case, analyzes the trace and scores the answer:

- data-parallel cases (dp4, dp2; phase forward, backward, optimizer or data): right when
  the top culprit (collectives.culprits[0]) is the delayed rank in the expected phase
  (data -> "host"); the time is its phase_excess_ns against the injected time over the
  steps it was found in (MS per step; MS x micro-batches for forward/backward).
- pipeline cases (pp2, pp4, dp2 x pp2; phase forward or backward): right when every other
  stage of the delayed rank's pipeline names its stage as imbalance_stage; the time is the
  mean of those stages' bubble_causes.imbalance_ns against steps x micro-batches x MS.

A case's time is "within 10 %" when |found - injected| <= 0.1 x injected. Prints one
line per case and the totals, with the machine's CPU count and load. Needs a built tree:
  python3 bench/attribution/bench_attribution.py --build build --cases 40 --seed 1
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
    "pp2": (["--world", "2", "--pp", "2"], "pp"),
    "pp4": (["--world", "4", "--pp", "4", "--microbatches", "4"], "pp"),
    "dp2_pp2": (["--world", "4", "--dp", "2", "--pp", "2", "--microbatches", "2"], "pp"),
}


def run_case(build, layout, rank, phase, ms, steps, tmp):
    args, kind = LAYOUTS[layout]
    run = os.path.join(tmp, "run")
    shutil.rmtree(run, ignore_errors=True)
    cmd = [os.path.join(build, "trainer", "stepscope-train"), "--backend", "cpu", "--quiet",
           "--steps", str(steps), "--trace", run, "--debug-delay", "%d:%s:%d" % (rank, phase, ms)]
    subprocess.run(cmd + args + MODEL, check=True, stdout=subprocess.DEVNULL)
    rep = os.path.join(tmp, "report.json")
    subprocess.run([os.path.join(build, "analyzer", "stepscope"), "analyze", run, "--json", rep],
                   check=True, stdout=subprocess.DEVNULL)
    r = json.load(open(rep))
    cfg = r["run"]["config"]
    m = cfg["microbatches"] * cfg.get("virtual_stages", 1)
    per_step = ms * 1e6 * (m if phase in ("forward", "backward") else 1)
    if kind == "dp":
        want = "host" if phase == "data" else phase
        cul = r["collectives"]["culprits"]
        if not cul:
            return False, None, "no culprit"
        top = cul[0]
        ok = top["rank"] == rank and top["phase"] == want
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
    injected = len(r["run"]["steps"]) * per_step
    found = sum(x["totals"]["bubble_causes"]["imbalance_ns"] for x in others) / len(others)
    return ok, (found, injected), "imbalance stages named %s" % named


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--cases", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--ms", default="60,100,150", help="delays to draw from (ms)")
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
            phase = rnd.choice(["forward", "backward"] if kind == "pp" else
                               ["forward", "backward", "optimizer", "data"])
            ms = rnd.choice(mss)
            ok, t, what = run_case(a.build, layout, rank, phase, ms, a.steps, tmp)
            right += ok
            line = "case %3d %-8s rank %d %-9s %4d ms: %s, %s" % (i, layout, rank, phase, ms,
                                                                 "right" if ok else "WRONG", what)
            if ok and t and t[0] is not None:
                timed += 1
                err = (t[0] - t[1]) / t[1]
                within += abs(err) <= 0.10
                line += ", found %.0f of %.0f ms (%+.1f %%)" % (t[0] / 1e6, t[1] / 1e6, 100 * err)
            print(line, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("right rank and phase: %d of %d (%.1f %%); time within 10 %%: %d of %d (%.1f %%)"
          % (right, a.cases, 100.0 * right / max(a.cases, 1), within, timed,
             100.0 * within / max(timed, 1)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
