#!/usr/bin/env python3
"""check_scale_run.py — a `stepscope-gen --scale` run analysed: what holds by construction.

usage: check_scale_run.py STEPSCOPE STEPSCOPE_GEN RANKS [--waits [--1f1b]] [--uneven] [--lead]
Generates RANKS ranks (2,000 events each), analyses them and checks: every rank loaded; the
schedule is the generated one (afab, or 1f1b with --1f1b, 4 stages when the ranks divide by
32); the culprit verdict names a generated straggler, beyond noise, and every other one the
culprit rows find beyond noise, tied with it (the stragglers are alike) — or, with --uneven
(--straggle-uneven: straggler k of S is k / S as late), the latest as the culprit and the others
as beyond noise but not tied; with --waits --lead (--launch-lead-us 200: the host runs ahead
of the device, so no launch holds a kernel up), the critical path runs through a straggler (the
rank with most of it, over half) and not the host; every rank's clock offset
is found from its anchors with no refinement (the anchors are exact).

Lockstep slots (the default): the step time is the generator's step_ns, and the ranks that
caused the most waiting are exactly the generated stragglers.

With --waits (gen_scale_waits.c: each stage's timeline follows the schedule's dependencies), in
the traces: every pipeline receive is matched by one send (same communicator and sequence
number, on the neighbour stage), both end at one instant, after the send started; the receives
posted before their send started are the generator's `waited` count, and there are some. In
the report: every rank of a straggler's pipeline (same dp and tp index) on another stage had
late-upstream bubble and names the straggler as its source, in its forward or backward (the
chains of waits through the stages between are followed back to it); and `analyze
--low-memory` and the two-round merge (`analyze --part K/N --partial`, `merge --cross-out`,
`analyze --part K/N --partial --cross`, `merge`) report as `analyze` does, byte for byte.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

stepscope, gen, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3])
waits, one_f_one_b = "--waits" in sys.argv[4:], "--1f1b" in sys.argv[4:]
uneven, lead = "--uneven" in sys.argv[4:], "--lead" in sys.argv[4:]
fails = 0
OP_SEND, OP_RECV = 7, 8  # stepscope_coll_op


def check(what, ok):
    global fails
    print(("ok: " if ok else "FAIL: ") + what)
    fails += not ok


def run(args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw).stdout


def pipeline_transfers(run_dir):
    """Every pipeline send and receive of the rank files, by (comm_id, seq): true (start, end)
    (each file's first clock anchor is at true time 0)."""
    sends, recvs = {}, {}
    for path in sorted(glob.glob(run_dir + "/rank-*.trace.zst")):
        off = None
        for line in run([stepscope, "dump", path]).splitlines():
            if off is None and '"kind":"clock_anchor"' in line:
                off = json.loads(line)["trace_ns"]
            if '"kind":"collective"' not in line:
                continue
            c = json.loads(line)
            if c["op"] in (OP_SEND, OP_RECV) and c["name"] == "pp":
                mine = sends if c["op"] == OP_SEND else recvs
                mine[(c["comm_id"], c["seq"])] = (c["start_ns"] - off, c["end_ns"] - off)
    return sends, recvs


with tempfile.TemporaryDirectory() as tmp:
    gen_args = (["--waits"] + (["--1f1b"] if one_f_one_b else []) if waits else []) + \
        (["--straggle-uneven"] if uneven else []) + (["--launch-lead-us", "200"] if lead else [])
    out = run([gen, tmp + "/run", "--scale", "--ranks", str(ranks), "--events-per-rank", "2000",
               *gen_args])
    truth = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    stragglers = sorted(int(x) for x in truth["stragglers"].split())
    run([stepscope, "analyze", tmp + "/run", "--json", tmp + "/r.json"])
    with open(tmp + "/r.json") as f:
        r = json.load(f)
    if waits:
        text = run([stepscope, "analyze", tmp + "/run"])
        low = run([stepscope, "analyze", tmp + "/run", "--low-memory", "--json", tmp + "/low.json"])
        check("--low-memory reports as analyze does (text and JSON)",
              low == text and open(tmp + "/low.json").read() == open(tmp + "/r.json").read())
        parts = 3
        cross = tmp + "/cross"
        r1 = [tmp + f"/r1-{k}.ssp" for k in range(parts)]
        r2 = [tmp + f"/r2-{k}.ssp" for k in range(parts)]
        for k in range(parts):
            run([stepscope, "analyze", tmp + "/run", "--part", f"{k}/{parts}", "--partial", r1[k]])
        run([stepscope, "merge", *r1, "--cross-out", cross])
        for k in range(parts):
            run([stepscope, "analyze", tmp + "/run", "--part", f"{k}/{parts}", "--partial", r2[k],
                 "--cross", f"{cross}/cross-{k}-of-{parts}.ssx"])
        merged = run([stepscope, "merge", *r2, "--json", tmp + "/m.json"])
        check("the two-round merge reports as analyze does (text and JSON)",
              merged == text and open(tmp + "/m.json").read() == open(tmp + "/r.json").read())
        sends, recvs = pipeline_transfers(tmp + "/run")
run_ = r["run"]
check(f"all {ranks} ranks loaded", run_["ranks_loaded"] == ranks)
if not waits:
    check(f"step time {run_['step_time_ns']} == step_ns {truth['step_ns']}",
          run_["step_time_ns"] == int(truth["step_ns"]))
if ranks % 32 == 0:
    name = "1f1b" if one_f_one_b else "afab"
    check(f"schedule {name}, 4 stages", run_["schedule"]["name"] == name
          and run_["schedule"]["stages"] == 4)
if not waits:
    top = sorted(s["rank"] for s in r["collectives"]["stragglers"][:len(stragglers)])
    check(f"top stragglers {top} are the generated ones {stragglers}", top == stragglers)
v = r["collectives"]["culprit_verdict"]
check(f"culprit verdict {v['status']} names rank {v['candidate']['rank']}",
      v["status"] == "culprit" and v["candidate"]["rank"] in stragglers)
# the generated stragglers are alike: every one the culprit rows find beyond noise is named by
# the verdict, the culprit or another rank beyond noise, tied with it
beyond = sorted({c["rank"] for c in r["collectives"]["culprits"]} & set(stragglers))
named = sorted([v["candidate"]["rank"]] + [x["rank"] for x in v.get("also", [])])
tied = sorted([v["candidate"]["rank"]] + [x["rank"] for x in v.get("also", []) if x["tied"]])
check(f"the verdict names every straggler beyond noise {beyond} (named {named})",
      len(beyond) >= 1 and set(beyond) <= set(named))
if uneven:  # straggler k of S is k / S as late: the last is the culprit, no other ties with it
    check(f"uneven stragglers: the culprit is the latest, {stragglers[-1]}, tied with none "
          f"(tied {tied})", v["candidate"]["rank"] == stragglers[-1] and tied == [stragglers[-1]])
else:
    check(f"like stragglers: the verdict cannot tell them apart (tied {tied})",
          set(beyond) <= set(tied))
if lead and waits:  # the host runs ahead: the device's own dependencies make the path
    cp = r["critical_path"]
    top = max(cp["by_rank"], key=lambda x: x["ns"])
    parts = cp["share"]
    check(f"critical path through a straggler: rank {top['rank']} has most of it "
          f"({top['share']:.2f}); host {parts['host']:.3f}, compute + communication "
          f"{parts['compute'] + parts['communication']:.3f}",
          top["rank"] in stragglers and top["share"] > 0.5 and parts["host"] < 0.01
          and parts["compute"] + parts["communication"] > 0.9)
check("clock offsets from the anchors, unrefined",
      all(x["refine_ns"] == 0 for x in r["alignment"]["ranks"]))
if waits:
    receives, waited = int(truth["receives"]), int(truth["waited"])
    check(f"{len(recvs)} receives, each matched by one send (the generator's {receives})",
          len(recvs) == receives == len(sends) and set(recvs) == set(sends))
    check("every receive ends when its send ends, after the send started (true time)",
          all(recvs[k][1] == sends[k][1] > sends[k][0] for k in recvs))
    posted_early = sum(recvs[k][0] < sends[k][0] for k in recvs)
    check(f"{posted_early} receives posted before their send started: the generator's {waited}",
          posted_early == waited)
    tp, pp = 8, 4
    pipeline = lambda x: (x // (tp * pp), x % tp)  # noqa: E731 (dp index, tp index)
    sources = {}
    for g in stragglers:
        for x in range(ranks):
            if pipeline(x) == pipeline(g) and (x // tp) % pp != (g // tp) % pp:
                t = r["ranks"][x]["totals"]
                src = t.get("late_upstream_from") or {}
                sources[x] = (src.get("rank"), src.get("phase"),
                              t["bubble_causes"]["late_upstream_ns"])
    check(f"late upstream of the stragglers' pipelines names them: {sources}",
          len(sources) == 3 * len(stragglers)
          and all(s[0] in stragglers and (x // (tp * pp), x % tp) == pipeline(s[0])
                  and s[1] in ("forward", "backward") and s[2] > 0
                  for x, s in sources.items()))
    check(f"{waited} of {receives} receives waited on a late send", 0 < waited < receives)
sys.exit(1 if fails else 0)
