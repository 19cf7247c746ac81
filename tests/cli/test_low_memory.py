#!/usr/bin/env python3
"""test_low_memory.py — the bounded mode of `stepscope analyze` (--low-memory, docs/scale.md)
gives the normal mode's JSON report byte for byte, except the parts it states as left out:
the report's `left_out` list (absent in the normal mode) and the critical path (null). MFU from
the ops' FLOPs (`mfu_from_op_flops`, PyTorch traces with shapes) and the late upstream's sources
(`late_upstream_from`) are compared too: some run of 2+ ranks must have the first, some run
the second. Runs: generated runs (random, pipeline, `--scale` with pipelines and stragglers,
two layouts) and trainer runs (dp2_pp2, tp2 interleaved, ep2 on a pipeline, a delayed stage),
and the committed PyTorch (Kineto) traces given. Each run is also analysed with --threads 1
in the bounded mode (one rank's events at a time).

usage: test_low_memory.py STEPSCOPE STEPSCOPE_GEN STEPSCOPE_TRAIN [KINETO_RUN...]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

stepscope, gen, train = sys.argv[1:4]
kineto_runs = sys.argv[4:]
failures = []
sources = [0]  # windows with a late upstream's source in the normal reports
op_mfu_ranks = [0]  # the most ranks of a normal report's MFU from the ops' FLOPs


def analyze(run, out, *extra):
    subprocess.run([stepscope, "analyze", run, "--json", out, "--quiet", *extra], check=True)
    with open(out, "rb") as f:
        return f.read()


def strip_left_out(report, bounded):
    """The report without the parts the bounded mode leaves out (checked to be empty there)."""
    notes = report.pop("left_out", None)
    if bounded:
        assert notes and all("not available in the bounded mode" in n for n in notes), notes
        assert report["critical_path"] is None, "bounded: a critical path"
    else:
        assert notes is None, "normal mode: a left_out list"
    report.pop("critical_path")
    if not bounded:  # compared with the bounded mode's below, with the rest
        sources[0] += sum(w.get("late_upstream_from") is not None
                          for r in report["ranks"] for w in [r["totals"]] + r["steps"])
        op_mfu = report.get("mfu_from_op_flops")
        op_mfu_ranks[0] = max(op_mfu_ranks[0], op_mfu["ranks"] if op_mfu else 0)
    return report


def check(name, run):
    with tempfile.TemporaryDirectory() as tmp:
        normal = analyze(run, os.path.join(tmp, "n.json"))
        for threads in ("2", "1"):
            bounded = analyze(run, os.path.join(tmp, "b.json"), "--low-memory", "--threads",
                              threads)
            a = json.loads(normal)
            b = json.loads(bounded)
            try:
                a = strip_left_out(a, False)
                b = strip_left_out(b, True)
            except AssertionError as e:
                failures.append(f"{name} (threads {threads}): {e}")
                continue
            # byte for byte: the JSON text of the rest, in the report's own order
            x = json.dumps(a, separators=(",", ":"))
            y = json.dumps(b, separators=(",", ":"))
            if x != y:
                at = next(i for i in range(min(len(x), len(y)) + 1) if x[i:i + 1] != y[i:i + 1])
                failures.append(f"{name} (threads {threads}): reports differ at char {at}: "
                                f"...{x[max(0, at - 80):at + 80]}... vs ...{y[max(0, at - 80):at + 80]}...")
        print(f"ok? {name}: {len(normal)} bytes", flush=True)


work = tempfile.mkdtemp(prefix="ssa-lowmem-")
try:
    gens = {
        "gen_random": ["--ranks", "4", "--steps", "3", "--ops", "40", "--clock-spread", "300000"],
        "gen_pipeline": ["--ranks", "4", "--steps", "3", "--ops", "30", "--pipeline"],
        "gen_scale_pp4": ["--scale", "--ranks", "32", "--events-per-rank", "3000", "--tp", "2",
                          "--pp", "4", "--stragglers", "2"],
        "gen_scale_pp2": ["--scale", "--ranks", "64", "--events-per-rank", "2000", "--tp", "4",
                          "--pp", "2", "--microbatches", "4", "--stragglers", "3",
                          "--clock-spread", "500000"],
    }
    for name, args in gens.items():
        d = os.path.join(work, name)
        subprocess.run([gen, d, *args], check=True, stdout=subprocess.DEVNULL)
        check(name, d)
    trainers = {
        "trainer_dp2_pp2": "--world 4 --dp 2 --pp 2 --microbatches 4",
        "trainer_tp2_pp2_interleaved":
            "--world 4 --tp 2 --pp 2 --schedule interleaved --layers 4 --microbatches 4",
        "trainer_ep2_pp2":
            "--world 4 --dp 2 --pp 2 --ep 2 --experts 4 --moe-every 2 --microbatches 2",
        "trainer_pp2_optimizer": "--world 2 --pp 2 --layers 4 --hidden 64 --heads 4 --seq 64 "
                                 "--batch 8 --debug-delay 1:optimizer:150",
    }
    for name, args in trainers.items():
        d = os.path.join(work, name)
        subprocess.run([train, *args.split(), "--steps", "3", "--trace", d], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        check(name, d)
    for run in kineto_runs:
        check(os.path.basename(run.rstrip("/")), run)
finally:
    shutil.rmtree(work, ignore_errors=True)

if op_mfu_ranks[0] < 2:
    failures.append("no run of 2+ ranks had MFU from the ops' FLOPs: its comparison tested little")
if not sources[0]:
    failures.append("no run had a late upstream's source: the comparison of them tested nothing")
for f in failures[:20]:
    print("FAIL", f)
sys.exit(1 if failures else 0)
