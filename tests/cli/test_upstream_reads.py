#!/usr/bin/env python3
"""test_upstream_reads.py — the late upstream's sources read each pipeline rank at most once
(issue 35, docs/scale.md "What the merge still reads"). On trainer 1F1B runs (sends with
matched receives that waited: chains of waits that ping-pong between the stages back to the
step's start), `analyze --low-memory` and the merge of round-2 partials (`analyze --part K/N
--partial`, `merge --cross-out`, `analyze --part K/N --partial --cross`, `merge`) count, with
STEPSCOPE_SAY_READS=1, at most one read per rank file for the late upstream's rounds (the
rounds of one hop each read up to 64 per pipeline rank: 256 for the 4-rank run, 451-512 for
the 8-rank one), and report as `analyze` does, byte for byte (text and JSON), late upstream
sources included. An interleaved run whose long-running ops spoil some spans' clipping (the
rounds then ask what those spans would have held) reads fewer than half the rounds' 64 per
rank (68 of 256).

usage: test_upstream_reads.py STEPSCOPE STEPSCOPE_TRAIN
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

stepscope, train = sys.argv[1:3]
failures = []


def run_cmd(args, env=None):
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=dict(os.environ, **(env or {})))


def report(args, tmp, env=None):
    """(exit status, text report, JSON report bytes, stderr) of an analyze or merge."""
    json_path = os.path.join(tmp, "report.json")
    p = run_cmd([stepscope, *args, "--json", json_path], env)
    data = b""
    if os.path.exists(json_path):
        with open(json_path, "rb") as f:
            data = f.read()
        os.remove(json_path)
    return p.returncode, p.stdout, data, p.stderr.decode()


def upstream_reads(said):
    m = re.search(r"(\d+) for the late upstream's rounds", said)
    return int(m.group(1)) if m else 0


def merged_round_two(name, run, tmp, n):
    """The merge of round-2 partials of parts 0..n-1: report()'s tuple, or None."""
    def map_round(cross=None):
        parts = []
        for k in range(n):
            out = os.path.join(tmp, f"{name}-{'r2' if cross else 'r1'}-{k}.ssp")
            args = [stepscope, "analyze", run, "--part", f"{k}/{n}", "--partial", out]
            if cross:
                args += ["--cross", os.path.join(cross, f"cross-{k}-of-{n}.ssx")]
            p = run_cmd(args)
            if p.returncode != 0:
                failures.append(f"{name}: {' '.join(args[1:])}: {p.stderr.decode().strip()}")
                return None
            parts.append(out)
        return parts
    first = map_round()
    cross = os.path.join(tmp, f"{name}-cross")
    if not first or run_cmd([stepscope, "merge", *first, "--cross-out", cross]).returncode:
        failures.append(f"{name}: round 1 or merge --cross-out failed")
        return None
    second = map_round(cross)
    return report(["merge", *second], tmp, {"STEPSCOPE_SAY_READS": "1"}) if second else None


def check_run(name, args, tmp, most_per_rank=1):
    run = os.path.join(tmp, name)
    subprocess.run([train, *args.split(), "--steps", "3", "--trace", run], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    nranks = len([f for f in os.listdir(run) if f.startswith("rank")])
    expected = report(["analyze", run], tmp)
    if expected[0] != 0 or b"late upstream of rank" not in expected[1]:
        failures.append(f"{name}: analyze failed or named no late upstream: {expected[3]}")
        return
    bounded = report(["analyze", run, "--low-memory"], tmp, {"STEPSCOPE_SAY_READS": "1"})
    merged = merged_round_two(name, run, tmp, 2)
    for how, got in (("analyze --low-memory", bounded), ("the merge of round 2", merged)):
        if got is None:
            continue
        reads = upstream_reads(got[3])
        print(f"{name}: {how}: {reads} reads for the late upstream ({nranks} rank files)")
        if got[:3] != expected[:3]:
            failures.append(f"{name}: {how} reports otherwise than analyze")
        if reads == 0 or reads > most_per_rank * nranks:
            failures.append(f"{name}: {how} read {reads} rank files for the late upstream "
                            f"({nranks} ranks): {got[3].strip()}")


work = tempfile.mkdtemp(prefix="ssa-upstream-reads-")
try:
    check_run("pp4", "--world 4 --pp 4 --layers 4 --microbatches 8", work)
    check_run("dp2_pp4", "--world 8 --dp 2 --pp 4 --layers 4 --microbatches 4", work)
    check_run("dp2_pp2_interleaved",
              "--world 4 --dp 2 --pp 2 --schedule interleaved --layers 4 --microbatches 4", work,
              most_per_rank=31)
finally:
    shutil.rmtree(work, ignore_errors=True)

for f in failures:
    print("FAIL:", f)
print("FAILED" if failures else "all passed")
sys.exit(1 if failures else 0)
