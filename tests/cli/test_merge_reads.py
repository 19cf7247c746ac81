#!/usr/bin/env python3
"""test_merge_reads.py — a merge reads only the rank files it truly needs (issue 35,
docs/scale.md "What the merge still reads"): the map step (`analyze --part K/N --partial`) runs
the metrics pass of every rank outside a pipeline and its partial carries the results, so that
`merge` reads no rank file for the per-rank metrics. On runs without pipelines (generated, a
`--scale` run with stragglers, PyTorch traces whose MFU comes from the ops' FLOPs), every rank
file is moved away after the map step; the merge is run again and again, each time putting back
the one file its error names, until it succeeds. Checked: every error names a rank file and why
the merge needs it, never the per-rank metrics (main's merge refused at once: "is gone"); the
report is `analyze`'s byte for byte; STEPSCOPE_SAY_READS=1 counts no read for the metrics. On
the generated runs, whose stragglers make the culprit walk ask every rank, the partials also
answer the walk's questions: no read for it, and at most half the rank files are needed (the
critical path's rounds read the ranks its paths stand on). Then a merge with options other than the
map step's (--steps) falls back to reading the ranks for the metrics: the same report as
`analyze --steps`, and with the files away it names the metrics as the reason; partials made
with the merge's --steps are taken as they are.

usage: test_merge_reads.py STEPSCOPE STEPSCOPE_GEN [KINETO_RUN...]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

stepscope, gen = sys.argv[1:3]
kineto_runs = sys.argv[3:]
failures = []


def run_cmd(args, env=None):
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=dict(os.environ, **(env or {})))


def report(args, json_path, env=None):
    """(exit status, text report, JSON report bytes, stderr) of an analyze or merge."""
    p = run_cmd([stepscope, *args, "--json", json_path], env)
    data = b""
    if os.path.exists(json_path):
        with open(json_path, "rb") as f:
            data = f.read()
        os.remove(json_path)
    return p.returncode, p.stdout, data, p.stderr.decode()


def rank_files(run):
    return sorted(f for f in os.listdir(run) if f.startswith("rank"))


def check_run(name, run, tmp, options=(), needs_few=False):
    expected = report(["analyze", run, *options], os.path.join(tmp, "a.json"))
    if expected[0] != 0:
        failures.append(f"{name}: analyze failed: {expected[3]}")
        return
    parts = []
    for k in range(3 if len(rank_files(run)) >= 3 else 1):
        out = os.path.join(tmp, f"{name}-{k}.part")
        n = 3 if len(rank_files(run)) >= 3 else 1
        p = run_cmd([stepscope, "analyze", run, "--part", f"{k}/{n}", "--partial", out,
                     *options])
        if p.returncode != 0:
            failures.append(f"{name}: analyze --part {k}/{n}: {p.stderr.decode()}")
            return
        parts.append(out)
    said = report(["merge", *parts, *options], os.path.join(tmp, "m.json"),
                  {"STEPSCOPE_SAY_READS": "1"})
    if said[:3] != expected[:3]:
        failures.append(f"{name}: merge with every rank file differs from analyze")
    if "for the per-rank metrics" in said[3]:
        failures.append(f"{name}: the merge read ranks for the metrics: {said[3].strip()}")
    if needs_few and "for the culprit walk's rounds" in said[3]:
        failures.append(f"{name}: the merge read ranks for the culprit walk: {said[3].strip()}")
    away = os.path.join(tmp, f"{name}-away")
    os.makedirs(away)
    files = rank_files(run)
    for f in files:
        shutil.move(os.path.join(run, f), os.path.join(away, f))
    back = []
    got = None
    for _ in range(len(files) + 1):
        got = report(["merge", *parts, *options], os.path.join(tmp, "m.json"))
        if got[0] == 0:
            break
        m = re.search(r"rank file (\S+) \(rank \d+\) cannot be read \([^)]*\): the merge needs "
                      r"its events for ([^(]+) \(", got[3])
        if not m or os.path.basename(m.group(1)) not in files:
            failures.append(f"{name}: a merge without the rank files said: {got[3].strip()}")
            break
        if m.group(2).startswith("the per-rank metrics"):
            failures.append(f"{name}: the merge needs {m.group(1)} for the per-rank metrics")
        f = os.path.basename(m.group(1))
        shutil.move(os.path.join(away, f), os.path.join(run, f))
        back.append(f)
    if got[0] == 0:
        if got[:3] != expected[:3]:
            failures.append(f"{name}: the merge with {len(back)} of {len(files)} rank files "
                            "differs from analyze")
        if needs_few and len(back) * 2 > len(files):
            failures.append(f"{name}: the merge needed {len(back)} of {len(files)} rank files")
        print(f"{name}: the merge read {len(back)} of {len(files)} rank files: "
              f"{said[3].strip()}")
    for f in rank_files(away):
        shutil.move(os.path.join(away, f), os.path.join(run, f))


def check_other_options(name, run, tmp):
    """A merge with other --steps than the map step's reads the ranks for the metrics."""
    parts = []
    for k in range(2):
        out = os.path.join(tmp, f"{name}-opt-{k}.part")
        run_cmd([stepscope, "analyze", run, "--part", f"{k}/2", "--partial", out])
        parts.append(out)
    expected = report(["analyze", run, "--steps", "1:2"], os.path.join(tmp, "a.json"))
    got = report(["merge", *parts, "--steps", "1:2"], os.path.join(tmp, "m.json"),
                 {"STEPSCOPE_SAY_READS": "1"})
    if got[:3] != expected[:3] or expected[0] != 0:
        failures.append(f"{name}: merge --steps 1:2 differs from analyze --steps 1:2")
    if "for the per-rank metrics" not in got[3]:
        failures.append(f"{name}: merge --steps 1:2 did not read the ranks for the metrics: "
                        f"{got[3].strip()}")
    away = os.path.join(tmp, f"{name}-opt-away")
    os.makedirs(away)
    for f in rank_files(run):
        shutil.move(os.path.join(run, f), os.path.join(away, f))
    got = report(["merge", *parts, "--steps", "1:2"], os.path.join(tmp, "m.json"),
                 {"STEPSCOPE_SAY_READS": "1"})
    if got[0] == 0 or "the merge needs its events for the per-rank metrics" not in got[3]:
        failures.append(f"{name}: merge --steps 1:2 without the rank files said: {got[3]!r}")
    if "stepscope merge: 0 rank files read again\n" not in got[3]:  # a failed read is no read
        failures.append(f"{name}: a merge that read no rank file counted reads: {got[3]!r}")
    for f in rank_files(away):
        shutil.move(os.path.join(away, f), os.path.join(run, f))


work = tempfile.mkdtemp(prefix="ssa-merge-reads-")
try:
    gens = {
        "gen_random": ["--ranks", "4", "--steps", "3", "--ops", "40", "--clock-spread", "300000"],
        "gen_scale_dp": ["--scale", "--ranks", "16", "--events-per-rank", "2000", "--tp", "4",
                         "--pp", "1", "--stragglers", "2"],
    }
    for name, args in gens.items():
        run = os.path.join(work, name)
        p = run_cmd([gen, run, *args])
        if p.returncode != 0:
            failures.append(f"{name}: stepscope-gen failed: {p.stderr.decode()}")
            continue
        check_run(name, run, work, needs_few=True)
    check_other_options("gen_random_steps", os.path.join(work, "gen_random"), work)
    # the map step made with the merge's --steps: its results are taken, no read for them
    check_run("gen_random_same_steps", os.path.join(work, "gen_random"), work,
              options=("--steps", "1:2"), needs_few=True)
    for i, src in enumerate(kineto_runs):
        run = os.path.join(work, f"kineto{i}")
        shutil.copytree(src, run)
        check_run(f"kineto{i} ({os.path.basename(src)})", run, work)
finally:
    shutil.rmtree(work, ignore_errors=True)

for f in failures:
    print("FAIL:", f)
print("FAILED" if failures else "all passed")
sys.exit(1 if failures else 0)
