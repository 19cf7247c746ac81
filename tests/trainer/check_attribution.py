#!/usr/bin/env python3
"""check_attribution.py — checks what `stepscope analyze --json` says about a
traced trainer run whose causes are known (tests/trainer/traced_attribution.sh).

usage: check_attribution.py REPORT CHECK [ARGS...]
  bubble_near_theory LOW HIGH  every pipeline rank's bubble_ratio in [theory - LOW,
                           theory + HIGH] (a loaded machine only adds bubble: HIGH is wider),
                           and its exposed communication outside the bubble under 5 %
  no_straggler             no straggler, no culprit, no incomplete collective
  no_culprit               no culprit beyond noise (a run without an injected delay: some rank
                           is always last somewhere; the verdict must not call it a culprit)
  straggler RANK PHASE [TOL]  the top culprit (beyond noise) is RANK late in PHASE in most
                           analysed steps; with TOL, its phase excess is within TOL x the
                           injected time (its steps x MS, x micro-batches for forward/backward)
  flops                    model and hardware FLOPs per step from the configuration: 6 x
                           parameters without the position embedding x tokens + attention;
                           full recomputation adds the blocks' forward only
  imbalance TOL            the run's one --debug-delay on a pipeline stage's forward or
                           backward (MS per micro-batch) is, on every other stage, the
                           bubble's imbalance part naming that stage, within TOL x the
                           injected time (steps x micro-batches x MS)
"""
import json
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    report = json.load(open(sys.argv[1]))
    check, args = sys.argv[2], sys.argv[3:]
    colls = report["collectives"]
    if check == "bubble_near_theory":
        low, high = float(args[0]), float(args[1])
        stages = [r for r in report["ranks"] if r["pipeline_stage"] is not None]
        if not stages:
            fail("no pipeline rank")
        for r in stages:
            t = r["totals"]
            print("rank %d stage %d: bubble %.3f, theory %.3f" % (r["rank"], r["pipeline_stage"],
                                                               t["bubble_ratio"], t["bubble_theory_ratio"]))
            # waiting for the other stage inside the end-of-step all-reduce is bubble: the
            # exposed communication left outside the bubble is the transfers' own time
            outside = (t["exposed_comm_ns"] - t["pipeline_comm_only_ns"]) / t["span_ns"]
            print("rank %d: exposed comm outside the bubble %.3f of the time" % (r["rank"], outside))
            if outside > 0.05:
                fail("rank %d: exposed communication outside the bubble is %.3f of the time"
                     % (r["rank"], outside))
            d = t["bubble_ratio"] - t["bubble_theory_ratio"]
            if d < -low or d > high:
                fail("rank %d: bubble %.3f is not in [theory - %.2f, theory + %.2f], theory %.3f"
                     % (r["rank"], t["bubble_ratio"], low, high, t["bubble_theory_ratio"]))
    elif check == "no_straggler":
        if colls["stragglers"] or colls["culprits"]:
            fail("stragglers named: %s %s" % (colls["stragglers"], colls["culprits"]))
        if colls["incomplete"]:
            fail("%d incomplete collectives" % colls["incomplete"])
        if any("ranks present" in w or "of its two ranks" in w for w in report["warnings"]):
            fail("a warning about an incomplete collective")
        print("no straggler, %d collective instances, none incomplete" % len(colls["instances"]))
    elif check == "no_culprit":
        verdict = colls["culprit_verdict"]
        print("verdict: %s" % verdict)
        if colls["culprits"] or verdict["status"] == "culprit":
            fail("a culprit named in a run without a delay: %s" % colls["culprits"])
    elif check == "straggler":
        rank, phase = int(args[0]), args[1]
        steps = len(report["run"]["steps"])
        print("verdict: %s" % colls["culprit_verdict"])
        if not colls["culprits"]:
            fail("no culprit")
        top = colls["culprits"][0]
        print("top culprit: %s (of %d steps)" % (top, steps))
        if top["rank"] != rank or top["phase"] != phase:
            fail("expected rank %d late in %s" % (rank, phase))
        if 2 * top["steps"] <= steps:
            fail("found in %d of %d steps only" % (top["steps"], steps))
        if len(args) > 2:
            tol = float(args[2])
            d = report["run"]["config"]["debug_delays"][0]
            sched = report["run"].get("schedule") or {}
            cfg = report["run"]["config"]
            m = (sched.get("microbatches") or cfg.get("microbatches", 1)) * \
                (sched.get("virtual_stages") or 1) if d["phase"] in ("forward", "backward") else 1
            injected = top["steps"] * m * d["ms"] * 1e6
            print("phase excess %.1f ms, injected %.1f ms" % (top["phase_excess_ns"] / 1e6, injected / 1e6))
            if abs(top["phase_excess_ns"] - injected) > tol * injected:
                fail("phase excess %.1f ms is not within %.0f %% of the injected %.1f ms"
                     % (top["phase_excess_ns"] / 1e6, 100 * tol, injected / 1e6))
    elif check == "flops":
        c = report["run"]["config"]
        L, C, T, V, tokens = c["layers"], c["hidden"], c["seq"], c["vocab"], c["batch"] * c["seq"]
        blocks = L * (12 * C * C + 13 * C)
        params = V * C + blocks + 2 * C  # no position embedding: a lookup
        model = 6.0 * params * tokens + 12.0 * L * C * T * tokens
        extra = 0.0
        if c["recompute"] == "full":
            extra = 2.0 * blocks * tokens + 4.0 * L * C * T * tokens
        got_m, got_h = report["mfu"]["model_flops_per_step"], report["mfu"]["hardware_flops_per_step"]
        print("model FLOPs %.6g (expected %.6g), hardware %.6g (expected %.6g)"
              % (got_m, model, got_h, model + extra))
        if abs(got_m - model) > 1e-5 * model or abs(got_h - model - extra) > 1e-5 * (model + extra):
            fail("FLOPs differ")
    elif check == "imbalance":
        tol = float(args[0])
        delays = report["run"]["config"].get("debug_delays", [])
        if len(delays) != 1 or delays[0]["phase"] not in ("forward", "backward"):
            fail("expected one forward/backward --debug-delay in the configuration")
        d = delays[0]
        ranks = {r["rank"]: r for r in report["ranks"]}
        stage = ranks[d["rank"]]["pipeline_stage"]
        m = report["run"]["schedule"]["microbatches"] * report["run"]["schedule"]["virtual_stages"]
        steps = len(report["run"]["steps"])
        injected = steps * m * d["ms"] * 1e6
        for r in report["ranks"]:
            if r["pipeline_stage"] == stage:
                continue
            t = r["totals"]
            got = t["bubble_causes"]["imbalance_ns"]
            print("rank %d stage %d: imbalance %.0f ms naming stage %s, injected %.0f ms"
                  % (r["rank"], r["pipeline_stage"], got / 1e6, t["imbalance_stage"], injected / 1e6))
            if t["imbalance_stage"] != stage:
                fail("rank %d: imbalance names stage %s, not %d" % (r["rank"], t["imbalance_stage"], stage))
            if abs(got - injected) > tol * injected:
                fail("rank %d: imbalance %.0f ms is not within %.0f %% of the injected %.0f ms"
                     % (r["rank"], got / 1e6, 100 * tol, injected / 1e6))
            causes = sum(t["bubble_causes"].values())
            if causes != t["bubble_ns"]:
                fail("rank %d: causes sum to %d, bubble %d" % (r["rank"], causes, t["bubble_ns"]))
    else:
        fail("unknown check " + check)
    print("OK: " + check)


main()
