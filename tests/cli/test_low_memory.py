#!/usr/bin/env python3
"""test_low_memory.py — the bounded mode of `stepscope analyze` (--low-memory, docs/scale.md)
gives the normal mode's reports byte for byte: the JSON report and the text report, critical
path included (walked in rounds of questions, only the ranks asked read again), and no
`left_out` list or "left out" section. MFU from the ops' FLOPs (`mfu_from_op_flops`, PyTorch
traces with shapes), the late upstream's sources (`late_upstream_from`) and a critical path
that crosses ranks must each show up in some run, so that their comparison tests something.
Runs: generated runs (random, pipeline, `--scale` with pipelines and stragglers, two layouts)
and trainer runs (dp2_pp2, tp2 interleaved, ep2 on a pipeline, a delayed stage), and the
committed PyTorch (Kineto) traces given; a trainer run with --step-range too (the name is
looked for in ranges the bounded mode drops once a rank is loaded). Each run is also analysed with --threads 1 in the
bounded mode (one rank's events at a time).

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
cp_ranks = [0]  # the most ranks one step's critical path ran on, in the normal reports


def analyze(run, out, *extra):
    """The JSON report's bytes and the text report's (stdout)."""
    text = subprocess.run([stepscope, "analyze", run, "--json", out, *extra], check=True,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
    with open(out, "rb") as f:
        return f.read(), text


def first_difference(x, y):
    at = next(i for i in range(min(len(x), len(y)) + 1) if x[i:i + 1] != y[i:i + 1])
    return f"at byte {at}: ...{x[max(0, at - 80):at + 80]!r}... vs ...{y[max(0, at - 80):at + 80]!r}..."


def note_coverage(normal_json):
    """What the normal report holds that the comparison should cover."""
    report = json.loads(normal_json)
    assert "left_out" not in report, "normal mode: a left_out list"
    sources[0] += sum(w.get("late_upstream_from") is not None
                      for r in report["ranks"] for w in [r["totals"]] + r["steps"])
    op_mfu = report.get("mfu_from_op_flops")
    op_mfu_ranks[0] = max(op_mfu_ranks[0], op_mfu["ranks"] if op_mfu else 0)
    cp = report.get("critical_path") or {}
    for step in cp.get("steps", []):
        cp_ranks[0] = max(cp_ranks[0], len(step.get("by_rank", [])))


def check(name, run, *options):
    with tempfile.TemporaryDirectory() as tmp:
        normal, normal_text = analyze(run, os.path.join(tmp, "n.json"), *options)
        note_coverage(normal)
        for threads in ("2", "1"):
            bounded, bounded_text = analyze(run, os.path.join(tmp, "b.json"), *options,
                                            "--low-memory", "--threads", threads)
            if bounded != normal:
                failures.append(f"{name} (threads {threads}): JSON reports differ "
                                f"{first_difference(normal, bounded)}")
            if bounded_text != normal_text:
                failures.append(f"{name} (threads {threads}): text reports differ "
                                f"{first_difference(normal_text, bounded_text)}")
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
        if name == "trainer_dp2_pp2":  # the ranks' events are dropped: the name's check reads
            check(name + " --step-range step", d, "--step-range", "step")
    for run in kineto_runs:
        check(os.path.basename(run.rstrip("/")), run)
finally:
    shutil.rmtree(work, ignore_errors=True)

if op_mfu_ranks[0] < 2:
    failures.append("no run of 2+ ranks had MFU from the ops' FLOPs: its comparison tested little")
if cp_ranks[0] < 2:
    failures.append("no step's critical path crossed ranks: the rounds' jumps were not tested")
if not sources[0]:
    failures.append("no run had a late upstream's source: the comparison of them tested nothing")
for f in failures[:20]:
    print("FAIL", f)
sys.exit(1 if failures else 0)
