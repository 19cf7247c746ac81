#!/usr/bin/env python3
"""test_partial_merge.py — partials that merge exactly (issue 35 item 2, docs/scale.md
"Partials"): `stepscope analyze RUN --part K/N --partial OUT` for K = 0..N-1, then `stepscope
merge OUT...` (given in a shuffled order, from another working directory), must print the text
report and write the JSON report byte for byte as the whole analysis, `stepscope analyze RUN`,
does (critical path included: nothing is left out). Runs: generated runs (random, pipeline,
`--scale` with pipelines and stragglers), trainer runs (DP x PP, interleaved TP x PP, experts on
a pipeline, a delayed stage), the committed PyTorch (Kineto) traces given and a written one-rank
trace of many ops (more than the bytes its partial holds after their count); each cut into 1
part, 2 parts, and an uneven number (3 or 5 blocks of
different sizes). Then the errors: a part missing, a part given twice, a part of another run,
a truncated partial, a file that is no partial, options after the partials, a rank file
changed after its partial was made.

usage: test_partial_merge.py STEPSCOPE STEPSCOPE_GEN STEPSCOPE_TRAIN [KINETO_RUN...]
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

stepscope, gen, train = sys.argv[1:4]
kineto_runs = sys.argv[4:]
failures = []
rng = random.Random(35)


def run_cmd(args, cwd=None):
    return subprocess.run(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def report(args, json_path, cwd=None):
    """(exit status, text report, JSON report bytes, stderr) of an analyze or merge."""
    p = run_cmd([stepscope, *args[:1], "--json", json_path, *args[1:]] if args[0] == "merge"
                else [stepscope, "analyze", args[0], "--json", json_path, *args[1:]], cwd)
    data = b""
    if os.path.exists(json_path):
        with open(json_path, "rb") as f:
            data = f.read()
        os.remove(json_path)
    return p.returncode, p.stdout, data, p.stderr


def make_parts(run, n, tmp, tag, *options):
    paths = []
    for k in range(n):
        out = os.path.join(tmp, f"{tag}-{k}-of-{n}.part")
        p = run_cmd([stepscope, "analyze", run, "--part", f"{k}/{n}", "--partial", out, *options])
        if p.returncode != 0:
            raise RuntimeError(f"analyze --part {k}/{n}: {p.stderr.decode()}")
        paths.append(out)
    return paths


def first_difference(x, y):
    at = next(i for i in range(min(len(x), len(y)) + 1) if x[i:i + 1] != y[i:i + 1])
    return f"at byte {at}: ...{x[max(0, at - 60):at + 60]!r}... vs ...{y[max(0, at - 60):at + 60]!r}..."


def check(name, run):
    with tempfile.TemporaryDirectory() as tmp:
        rc, text, js, err = report([run], os.path.join(tmp, "whole.json"))
        if rc != 0:
            failures.append(f"{name}: analyze failed: {err.decode()}")
            return
        if "left_out" in json.loads(js):
            failures.append(f"{name}: the whole analysis leaves something out")
        nfiles = len(json.loads(js)["ranks"])  # every file of these runs is a rank
        uneven = 3 if nfiles % 3 else 5
        cuts = sorted({min(c, nfiles) for c in (1, 2, uneven)})
        for n in cuts:
            parts = make_parts(run, n, tmp, name)
            rng.shuffle(parts)
            elsewhere = os.path.join(tmp, "elsewhere")
            os.makedirs(elsewhere, exist_ok=True)
            rc2, text2, js2, err2 = report(["merge", *parts], os.path.join(tmp, "merged.json"),
                                           cwd=elsewhere)
            if rc2 != 0:
                failures.append(f"{name} ({n} parts): merge failed: {err2.decode()}")
                continue
            if text2 != text:
                failures.append(f"{name} ({n} parts): text differs {first_difference(text, text2)}")
            if js2 != js:
                failures.append(f"{name} ({n} parts): JSON differs {first_difference(js, js2)}")
            size = sum(os.path.getsize(p) for p in parts)
            print(f"ok? {name}: {n} parts, {size} bytes of partials, report {len(js)} bytes",
                  flush=True)


def expect_error(what, args, needle, cwd=None):
    p = run_cmd([stepscope, *args], cwd)
    msg = p.stderr.decode()
    if p.returncode == 0 or needle not in msg:
        failures.append(f"{what}: exit {p.returncode}, stderr {msg!r} (want {needle!r})")


def check_errors(run_a, run_b, tmp):
    a = make_parts(run_a, 3, tmp, "a")
    b = make_parts(run_b, 3, tmp, "b")
    expect_error("missing part", ["merge", a[0], a[2]], "part 1 of 3 is missing")
    expect_error("part twice", ["merge", a[0], a[1], a[1], a[2]], "are both part 1 of 3")
    expect_error("another run", ["merge", a[0], b[1], a[2]], "is a part of another run")
    two = make_parts(run_a, 2, tmp, "a2")
    expect_error("two cuts", ["merge", a[0], two[1]], "must come from one cut")
    with open(a[1], "rb") as f:
        data = f.read()
    cut = os.path.join(tmp, "cut.part")
    with open(cut, "wb") as f:
        f.write(data[:len(data) // 2])
    expect_error("truncated", ["merge", a[0], cut, a[2]], "truncated")
    bad = os.path.join(tmp, "bad.part")
    with open(bad, "wb") as f:
        f.write(b"not a partial at all, just some bytes")
    expect_error("no partial", ["merge", bad], "not a stepscope partial")
    flipped = os.path.join(tmp, "version.part")
    with open(flipped, "wb") as f:
        f.write(data[:8] + b"\x63\x00\x00\x00" + data[12:])
    expect_error("another version", ["merge", a[0], flipped, a[2]], "partial format version 99")
    # options may follow the partials, as they follow RUN in analyze: the same report
    first = report(["merge", a[0], a[1], a[2]], os.path.join(tmp, "first.json"))
    last_json = os.path.join(tmp, "last.json")
    p = run_cmd([stepscope, "merge", a[2], a[0], "--json", last_json, a[1]])
    with open(last_json, "rb") as f:
        last = (p.returncode, p.stdout, f.read(), p.stderr)
    if first != last:
        failures.append(f"options after the partials: exit {last[0]}, stderr {last[3]!r}, "
                        f"report {'equal' if first[1:3] == last[1:3] else 'different'}")
    expect_error("an unknown option last", ["merge", a[0], a[1], a[2], "--jsn", "x.json"],
                 "unknown option --jsn")
    expect_error("more parts than files", ["analyze", run_a, "--part", "9/10", "--partial",
                                           os.path.join(tmp, "x.part")], "holds no rank file")
    # the classification rules shaped every shell's tally and the carried metrics: a merge
    # with other rules, as many, refuses (it cannot classify again without reading every rank);
    # with the same rules it reports as analyze does with them
    rules = ["--comm-kernel", "elementwise|gemm", "--compute-kernel", "nccl"]
    ra = make_parts(run_a, 2, tmp, "rules", *rules)
    expect_error("other rules", ["merge", *ra, "--comm-kernel", "elementwise",
                                 "--compute-kernel", "nccl"], "give merge the options")
    expect_error("rules in another order", ["merge", *ra, *rules[2:], *rules[:2]],
                 "give merge the options")
    same = report(["merge", *ra, *rules], os.path.join(tmp, "rules.json"))
    want = report([run_a, *rules], os.path.join(tmp, "rules-analyze.json"))
    if same[:3] != want[:3]:
        failures.append(f"merge with the map step's rules: exit {same[0]}, stderr {same[3]!r}, "
                        f"report {'equal' if same[1:3] == want[1:3] else 'different'}")
    # a rank file written again after its partial was made: the merge would read other events
    rank0 = os.path.join(run_a, sorted(f for f in os.listdir(run_a) if f.startswith("rank-"))[0])
    st = os.stat(rank0)
    os.utime(rank0, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    expect_error("changed rank file", ["merge", *a], "changed since its partial was made")


def write_many_ops_trace(path, steps, kernels):
    """A one-rank PyTorch (Kineto) trace of `steps` steps of `kernels` launches of one short
    kernel each: many ops, few names, no collectives."""
    events, ts, corr = [], 0, 1
    for s in range(steps):
        step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d" % s, "pid": 1,
                "tid": 1, "ts": ts, "dur": 0}
        events.append(step)
        for _ in range(kernels):
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                           "tid": 1, "ts": ts, "dur": 1, "args": {"correlation": corr}})
            events.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,
                           "ts": ts + 1, "dur": 1,
                           "args": {"device": 0, "stream": 7, "correlation": corr}})
            ts, corr = ts + 2, corr + 1
        step["dur"] = ts - step["ts"]
    with open(path, "w") as f:
        json.dump({"distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": events}, f)


work = tempfile.mkdtemp(prefix="ssa-partial-")
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
    runs = []
    for name, args in gens.items():
        d = os.path.join(work, name)
        subprocess.run([gen, d, *args], check=True, stdout=subprocess.DEVNULL)
        runs.append((name, d))
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
        runs.append((name, d))
    for run in kineto_runs:
        runs.append((os.path.basename(run.rstrip("/")), run))
    # a rank of many ops and little else: its partial holds fewer bytes after the shell's op
    # count than the count (the ops are not in it), which the reader took for a damaged count
    many = os.path.join(work, "kineto_many_ops.json")
    write_many_ops_trace(many, steps=4, kernels=1500)
    runs.append(("kineto_many_ops", many))
    for name, d in runs:
        check(name, d)
    errors_dir = os.path.join(work, "errors")
    os.makedirs(errors_dir)
    check_errors(runs[0][1], runs[1][1], errors_dir)
finally:
    shutil.rmtree(work, ignore_errors=True)

for f in failures[:20]:
    print("FAIL", f)
sys.exit(1 if failures else 0)
