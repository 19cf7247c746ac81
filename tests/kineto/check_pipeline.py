#!/usr/bin/env python3
"""check_pipeline.py STEPSCOPE MAKE_KINETO DATA_DIR WORKDIR — pipelines recognised in Kineto
traces (analyzer/src/import/kineto/kineto_pipeline.c, docs/kineto-import.md "Pipelines").

Generated runs with exact truth (make_kineto.py --pipeline, kineto_pipeline_gen.py): the
schedule, stages and micro-batches recognised; every rank's bubble in every step equal to the
generator's (the step minus the rank's compute, to the ns); the causes summing to it exactly;
with equal stages the schedule's part is exactly (p-1)(F+B) and nothing is imbalance; with a
slow stage there is imbalance and it names that stage. GPipe's run is checked from its own
annotations and again with them removed (then the order of the work tells it). A run with one
micro-batch a step is not taken for a pipeline, nor one with steps and point-to-point calls
but no forward or backward work. Point-to-point matched across ranks
(kineto_p2p.c, late_upstream.c): a run whose stage 0 starts each step's first forward 20 ms
late has every transfer matched, every later stage naming rank 0's host as its late upstream
for exactly the wait, and a critical path per step that crosses into rank 0 and holds the gap;
the same run on time names no such thing.

The real traces of DATA_DIR (tests/data/kineto/pipeline, made by
scripts/torch/make_pipeline_traces.py with torch.distributed.pipelining on gloo): each
schedule family recognised with its stages, micro-batches and virtual stages, the theory of its
name, a bubble on every stage whose causes sum to it exactly and were split by the schedule's
simulation (nothing unattributed), and the slow last stage (an extra layer) named by the
imbalance of the other stages; their transfers matched (a p2p transfer part on every rank) and
their critical path crossing ranks. ppdp (2 stages x 2 data-parallel replicas, DeviceMesh
("dp", "pp")): two pipelines read from distributedInfo.pg_config's "mesh_pp" groups, ranks 0 and
2 stage 0, ranks 1 and 3 stage 1, each pipeline's bubble simulated and its late upstream inside it;
and again with the groups' descriptions gone and NCCL-style record_param_comms ops around the
point-to-point calls (their group's ranks and the peer): the same two pipelines, from those.
"""
import gzip
import json
import os
import shutil
import subprocess
import sys

exe, gen, data, work = sys.argv[1:5]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
fail = 0


def check(cond, what):
    global fail
    if not cond:
        print("FAILED:", what)
        fail += 1


def analyze(run):
    out = run.rstrip("/") + ".report.json"
    subprocess.run([exe, "analyze", run, "--json", out, "--quiet"], check=True)
    return json.load(open(out))


def causes_sum_exactly(rep, where):
    for r in rep["ranks"]:
        for w in r["steps"] + [r["totals"]]:
            c = w.get("bubble_causes")
            label = "%s rank %d step %s" % (where, r["rank"], w.get("step"))
            check(c is not None, label + ": bubble causes")
            if c is None:
                continue
            check(sum(c.values()) == w["bubble_ns"],
                  label + ": causes %s sum to the bubble %d" % (c, w["bubble_ns"]))
            check(c["unattributed_ns"] == 0, label + ": the schedule was simulated")


def theory(name, p, m, v):
    if "zero_bubble" in name:
        return (p - 1) / (3 * v * m + p - 1)
    if v > 1 or "interleav" in name:
        return (p - 1) / (v * m + p - 1)
    return (p - 1) / (m + p - 1)


def check_schedule(rep, where, name, p, m, v, stage_of=None):
    s = rep["run"]["schedule"]
    check(s is not None, where + ": a schedule recognised")
    if s is None:
        return
    got = (s["name"], s["stages"], s["microbatches"], s["virtual_stages"])
    check(got == (name, p, m, v), where + ": schedule %s, expected %s" % (got, (name, p, m, v)))
    check(abs(s["bubble_theory_ratio"] - theory(name, p, m, v)) < 1e-6,
          where + ": theory %s" % s["bubble_theory_ratio"])
    stages = sorted((r["rank"], r["pipeline_stage"]) for r in rep["ranks"])
    expected = [(i, stage_of(i) if stage_of else i) for i in range(len(rep["ranks"]))]
    check(stages == expected, where + ": stage of each rank %s, expected %s" % (stages, expected))


def generated(name, sched, ranks, mbs, steps, slow=-1, strip=False, late=-1, drop=()):
    run = os.path.join(work, name)
    cmd = [sys.executable, gen, run, "--pipeline", sched, "--ranks", str(ranks), "--microbatches",
           str(mbs), "--steps", str(steps), "--fwd-us", "1000", "--bwd-us", "2000"]
    if slow >= 0:
        cmd += ["--slow-stage", str(slow), "--slow-factor", "2"]
    if late >= 0:
        cmd += ["--late-rank", str(late), "--late-us", "20000"]
    subprocess.run(cmd, check=True)
    truth = json.load(open(run + ".truth.json"))
    if strip:  # the schedule's own annotations removed: the order of work must tell
        drop = tuple(drop) + ('"Forward ', '"Backward ')
    if drop:  # the events whose lines hold any of these left out
        for r in range(ranks):
            path = os.path.join(run, "rank%d.json" % r)
            lines = [ln for ln in open(path) if not any(d in ln for d in drop)]
            lines[-2] = lines[-2].rstrip(",\n") + "\n"  # the last event has no comma after it
            open(path, "w").writelines(lines)
    return run, truth


def check_generated(name, sched, ranks, mbs, slow=-1, strip=False):
    run, truth = generated(name, sched, ranks, mbs, 3, slow, strip)
    rep = analyze(run)
    check_schedule(rep, name, truth["schedule"], ranks, mbs, 1)
    causes_sum_exactly(rep, name)
    for r in rep["ranks"]:
        t = truth["ranks"][r["rank"]]
        for w in r["steps"]:
            label = "%s rank %d step %d" % (name, r["rank"], w["step"])
            check(w["span_ns"] == t["step_ns"], label + ": span %d, truth %d" % (w["span_ns"], t["step_ns"]))
            check(w["compute_ns"] == t["compute_ns"], label + ": compute %d" % w["compute_ns"])
            check(w["bubble_ns"] == t["bubble_ns"],
                  label + ": bubble %d, truth %d" % (w["bubble_ns"], t["bubble_ns"]))
            c = w["bubble_causes"] or {}
            if slow < 0:
                check(c.get("schedule_ns") == (ranks - 1) * 3_000_000,
                      label + ": schedule part %s = (p-1)(F+B)" % c.get("schedule_ns"))
                check(c.get("imbalance_ns") == 0, label + ": no imbalance")
            elif r["rank"] != slow:
                check(c.get("imbalance_ns", 0) > 0 and w["imbalance_stage"] == slow,
                      label + ": imbalance %s of stage %s" % (c.get("imbalance_ns"), w["imbalance_stage"]))
    return rep


check_generated("gen_1f1b", "1f1b", 4, 8)
check_generated("gen_gpipe", "gpipe", 2, 4)
check_generated("gen_gpipe_inferred", "gpipe", 2, 4, strip=True)
check_generated("gen_1f1b_slow", "1f1b", 4, 8, slow=3)

# point-to-point matched across ranks (kineto_p2p.c): stage 0 starts each step's first forward
# 20 ms late (a host gap, nothing in the trace). Every send is matched with its receive; every
# later stage waits for it: its late upstream is rank 0's host, for exactly the gap from its
# first receive's post (the generator's 1 ns c10d::recv_ before gloo:recv) to rank 0's send
# after its forward; the critical path crosses into rank 0 and holds its gap.
run, truth = generated("gen_1f1b_late", "1f1b", 4, 8, 3, late=0)
rep = analyze(run)
late_ns = truth["late_ns"]
check_schedule(rep, "gen_1f1b_late", "1f1b", 4, 8, 1)
causes_sum_exactly(rep, "gen_1f1b_late")
coll = rep["collectives"]
matched = sum(c["count"] for c in coll["summary"] if c["group"] == "pp")
check(coll["incomplete"] == 0 and matched == 3 * 2 * (4 - 1) * 8,
      "gen_1f1b_late: every transfer matched (%d, %d incomplete), expected 3 steps x 2 passes x "
      "3 stage boundaries x 8 micro-batches" % (matched, coll["incomplete"]))
for r in rep["ranks"]:
    for w in r["steps"]:
        label = "gen_1f1b_late rank %d step %d" % (r["rank"], w["step"])
        check(w["bubble_ns"] == truth["ranks"][r["rank"]]["bubble_ns"], label + ": bubble")
        src = w.get("late_upstream_from")
        if r["rank"] > 0:
            check(src is not None and (src["rank"], src["phase"]) == (0, "host"),
                  label + ": late upstream %s, expected rank 0's host" % src)
            check(src is not None and src["wait_ns"] == late_ns - 1,
                  label + ": waited %s on rank 0's host, expected %d" % (src and src["wait_ns"], late_ns - 1))
            check(w["bubble_causes"]["late_upstream_ns"] >= late_ns, label + ": late upstream part")
cp = rep["critical_path"]
check(cp is not None and len(cp["steps"]) == 3, "gen_1f1b_late: a critical path per step")
for st in (cp or {}).get("steps", []):
    on = {x["rank"]: x["ns"] for x in st["by_rank"]}
    check(len(on) > 1 and on.get(0, 0) >= late_ns,
          "gen_1f1b_late step %d: the path crosses into rank 0 and holds its gap: %s" % (st["step"], on))
    check(st["host_untraced_ns"] >= late_ns, "gen_1f1b_late step %d: the gap is on the path" % st["step"])
# without the delay: no rank names rank 0's host
run, _ = generated("gen_1f1b_on_time", "1f1b", 4, 8, 2)
rep = analyze(run)
for r in rep["ranks"]:
    for w in r["steps"]:
        src = w.get("late_upstream_from")
        check(src is None or (src["rank"], src["phase"]) != (0, "host"),
              "gen_1f1b_on_time rank %d step %d: no late upstream host, got %s" % (r["rank"], w["step"], src))

# one micro-batch a step: forward, backward, and p2p — not told apart from plain training
run, _ = generated("gen_one_mb", "1f1b", 2, 1, 2)
rep = analyze(run)
check(rep["run"]["schedule"] is None, "one micro-batch: no schedule")
check(all(r["pipeline_stage"] is None for r in rep["ranks"]), "one micro-batch: no stages")
check(any("no pipeline recognised" in w for r in rep["ranks"] for w in r["warnings"]),
      "one micro-batch: a warning says why")

# steps and point-to-point calls but no forward or backward work at all (the work's ops left
# out): no pipeline, a warning that says so, and no sort of the empty work list (a qsort of
# its NULL array: UBSan's "null pointer passed as argument 1" in the sanitizer build)
run, _ = generated("gen_no_work", "1f1b", 2, 2, 1, drop=('"aten::linear"', "AddmmBackward0"))
rep = analyze(run)
check(rep["run"]["schedule"] is None, "no work: no schedule")
check(all(any("no forward or backward work was found" in w for w in r["warnings"])
          for r in rep["ranks"]), "no work: each rank's warning says why")

# real torch.distributed.pipelining traces
REAL = {  # directory: (name, stages, micro-batches, virtual stages)
    "gpipe": ("afab", 2, 4, 1),
    "1f1b": ("1f1b", 2, 4, 1),
    "interleaved1f1b": ("interleaved", 2, 4, 2),
    "zb": ("interleaved_zero_bubble", 2, 4, 2),
    "1f1b4": ("1f1b", 4, 8, 1),
    # 2 stages x 2 data-parallel replicas (DeviceMesh ("dp", "pp")): pipelines [0, 1] and
    # [2, 3], read from distributedInfo.pg_config's "mesh_pp" groups; each a whole pipeline
    # (its bubble simulated: nothing unattributed), its transfers matched inside it
    "ppdp": ("1f1b", 2, 4, 1),
}


def undescribed(src, dst):
    """ppdp with its process groups' descriptions gone ("undefined", as dist.new_group leaves
    them) and, around each c10d::send / c10d::recv_, the record_param_comms op that PyTorch's
    NCCL backend writes there: the group's name and ranks, and as "Rank" the peer's group rank
    (ProcessGroupNCCL::send/recv record the destination/source there). Nothing else tells the
    two pipelines apart: without reading these ops the world is taken for one pipeline."""
    os.makedirs(dst)
    for f in sorted(os.listdir(src)):
        doc = json.load(gzip.open(os.path.join(src, f)))
        info = doc["distributedInfo"]
        pp = next(g for g in info["pg_config"] if g["pg_desc"] == "mesh_pp")
        for g in info["pg_config"]:
            if g["pg_desc"].startswith("mesh_"):
                g["pg_desc"] = "undefined"
        place = pp["ranks"].index(info["rank"])
        added = []
        for e in doc["traceEvents"]:
            if e.get("cat") == "cpu_op" and e.get("name") in ("c10d::send", "c10d::recv_"):
                args = {"Collective name": "send" if e["name"] == "c10d::send" else "recv",
                        "Process Group Name": pp["pg_name"], "Process Group Description": "undefined",
                        "Process Group Ranks": "[%s]" % ", ".join(map(str, pp["ranks"])),
                        "Rank": 1 - place, "Group size": len(pp["ranks"]), "dtype": "Float",
                        "In msg nelems": 1, "Out msg nelems": 1}
                added.append(dict(e, name="record_param_comms", args=args))
        doc["traceEvents"] += added
        with gzip.open(os.path.join(dst, f), "wt") as out:
            json.dump(doc, out)


# the same pipelines, told apart by the groups of their point-to-point ops (kineto_p2p.c)
REAL["ppdp_undescribed"] = REAL["ppdp"]
for d, (name, p, m, v) in REAL.items():
    run = os.path.join(work, "real_" + d)
    if d == "ppdp_undescribed":
        undescribed(os.path.join(data, "ppdp"), run)
    else:
        shutil.copytree(os.path.join(data, d), run)
    rep = analyze(run)
    check_schedule(rep, d, name, p, m, v, stage_of=lambda rank: rank % p)
    causes_sum_exactly(rep, d)
    for r in rep["ranks"]:
        for w in r["steps"] + [r["totals"]]:
            check(w["bubble_ns"] > 0, "%s rank %d: a bubble" % (d, r["rank"]))
        # the slow last stage makes the others wait (it may wait for nobody itself)
        check(r["totals"]["imbalance_stage"] == p - 1 or
              (r["rank"] == p - 1 and r["totals"]["imbalance_stage"] is None),
              "%s rank %d: imbalance of the slow last stage, got %s" % (d, r["rank"], r["totals"]["imbalance_stage"]))
    # the host's p2p matched across ranks: every gloo:send has its gloo:recv, the transfer is
    # a part of the bubble, and the critical path crosses ranks
    for r in rep["ranks"]:
        check(r["totals"]["bubble_causes"]["p2p_transfer_ns"] > 0,
              "%s rank %d: a p2p transfer part" % (d, r["rank"]))
    peers = {(i["comm_id"], i["seq"]) for i in rep["collectives"]["instances"] if i["pipeline"]}
    check(len(peers) > 0 and rep["collectives"]["incomplete"] == 0,
          "%s: the transfers matched, none incomplete" % d)
    if d.startswith("ppdp"):  # every transfer inside its own pipeline
        for r in rep["ranks"]:
            src = r["totals"].get("late_upstream_from")
            check(src is None or src["rank"] // 2 == r["rank"] // 2,
                  "ppdp rank %d: waited on its own pipeline, got %s" % (r["rank"], src))
    cp = rep["critical_path"]
    check(cp is not None and len(cp["by_rank"]) > 1,
          "%s: the critical path crosses ranks through the matched p2p: %s" % (d, cp and cp["by_rank"]))
    text = subprocess.run([exe, "analyze", run], capture_output=True, text=True).stdout
    check("pipeline bubble by cause" in text and "theory (%s, p=%d, m=%d)" % (name, p, m) in text,
          d + ": the text report shows the bubble by cause and the theory")

print("check_pipeline: %d failure(s)" % fail)
sys.exit(1 if fail else 0)
