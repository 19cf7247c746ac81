#!/usr/bin/env python3
"""bench_replay.py — `stepscope replay --what-if` against reality on the bundled trainer.

For each case: train the CPU trainer with a base configuration (traced), predict a changed
configuration with `stepscope replay BASE --what-if EDIT`, then train the changed
configuration for real (traced) and compare the predicted median step time with the measured
one (`stepscope analyze`'s run.step_time_ns). The machine's load moves step times a lot,
so each side is trained --repeat times, base and changed runs interleaved; the fastest run of
each side is compared (the least disturbed one, the usual estimator of a timing under
interference), and the medians over the repeats are printed beside. Also prints the plain replay's fidelity (median and worst
per-step error against the base run's measured step times).

Prints one line per case: edit, predicted, measured, error; then the median |error| over
the cases and the machine's CPU count and load. Needs a built tree:
  python3 bench/replay/bench_replay.py --build build --repeat 3 [--only recompute]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

MODEL = ["--layers", "4", "--hidden", "64", "--heads", "4", "--seq", "64", "--batch", "8"]
DP2 = ["--world", "2", "--dp", "2"]
PP2 = ["--world", "2", "--pp", "2", "--microbatches", "4"]
TP2 = ["--world", "2", "--tp", "2"]
DP4 = ["--world", "4", "--dp", "4"]

# (name, base trainer args, --what-if edits, changed trainer args)
CASES = [
    ("dp2: remove rank 1's backward delay 60 ms", DP2 + ["--debug-delay", "1:backward:60"],
     ["rank=1:no-delay"], DP2),
    ("dp2: rank 1's backward delay 60 -> 20 ms", DP2 + ["--debug-delay", "1:backward:60"],
     ["rank=1:delay=20"], DP2 + ["--debug-delay", "1:backward:20"]),
    ("dp2: rank 0's data delay 10 -> 80 ms", DP2 + ["--debug-delay", "0:data:10"],
     ["rank=0:delay=80"], DP2 + ["--debug-delay", "0:data:80"]),
    ("pp2: remove stage 0's forward delay 20 ms", PP2 + ["--debug-delay", "0:forward:20"],
     ["rank=0:no-delay"], PP2),
    ("tp2: remove rank 1's optimizer delay 50 ms", TP2 + ["--debug-delay", "1:optimizer:50"],
     ["rank=1:no-delay"], TP2),
    ("dp4: rank 2's backward delay 100 -> 30 ms", DP4 + ["--debug-delay", "2:backward:100"],
     ["rank=2:delay=30"], DP4 + ["--debug-delay", "2:backward:30"]),
    ("pp2: remove stage 1's backward delay 20 ms", PP2 + ["--debug-delay", "1:backward:20"],
     ["rank=1:no-delay"], PP2),
    # outside the model: the trainer's --overlap on launches the buckets during backward (the
    # replay cannot move launches), and on the CPU backend the overlapped all-reduce threads
    # compete with backward for the cores
    ("dp2: --overlap off -> on", DP2 + ["--overlap", "off"], ["kind=comm:overlap"],
     DP2 + ["--overlap", "on"]),
    # recomputation off: the trainer issues the recomputed forward work inside "recompute"
    # ranges; dropping what was launched there is what --recompute none does not run
    ("dp2: --recompute full -> none", DP2 + ["--recompute", "full"], ["range=^recompute$:drop"],
     DP2 + ["--recompute", "none"]),
    ("tp2: --recompute full -> none", TP2 + ["--recompute", "full"], ["range=^recompute$:drop"],
     TP2 + ["--recompute", "none"]),
    ("pp2: --recompute selective -> none", PP2 + ["--recompute", "selective"],
     ["range=^recompute$:drop"], PP2 + ["--recompute", "none"]),
]


def train(build, args, steps, run):
    shutil.rmtree(run, ignore_errors=True)
    cmd = [os.path.join(build, "trainer", "stepscope-train"), "--backend", "cpu", "--quiet",
           "--steps", str(steps), "--trace", run] + args + MODEL
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stepscope(build, *args):
    out = subprocess.run([os.path.join(build, "analyzer", "stepscope")] + list(args),
                         check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return out.stdout


def measured_median(build, run):
    return json.loads(stepscope(build, "analyze", run, "--json", "-"))["run"]["step_time_ns"]


def replay(build, run, edits):
    args = ["replay", run, "--json", "-"]
    for e in edits:
        args += ["--what-if", e]
    return json.loads(stepscope(build, *args))


def load():
    try:
        return open("/proc/loadavg").read().split()[0]
    except OSError:
        return "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--only", default="", help="the cases whose name contains this text")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-replay.")
    loads = [load()]
    errors, fid_med, fid_worst = [], [], []
    print(f"{'case':45} {'edit':22} {'predicted':>10} {'measured':>10} {'error':>7}  (fastest run"
          f" of each side)")
    try:
        for name, base, edits, changed in CASES:
            if a.only not in name:
                continue
            predicted, measured = [], []
            for _ in range(a.repeat):
                run = os.path.join(tmp, "base")
                train(a.build, base, a.steps, run)
                rep = replay(a.build, run, edits)
                predicted.append(rep["what_if"]["median_predicted_ns"])
                fid_med.append(rep["replay"]["median_error"])
                fid_worst.append(rep["replay"]["worst_error"])
                run = os.path.join(tmp, "changed")
                train(a.build, changed, a.steps, run)
                measured.append(measured_median(a.build, run))
            p, m = min(predicted), min(measured)
            err = (p - m) / m
            pm, mm = statistics.median(predicted), statistics.median(measured)
            errors.append((name, abs(err)))
            spread = (min(measured) / 1e6, max(measured) / 1e6)
            print(f"{name:45} {' '.join(edits):22} {p / 1e6:8.1f}ms {m / 1e6:8.1f}ms {100 * err:+6.1f}%"
                  f"  (medians {pm / 1e6:.1f} / {mm / 1e6:.1f} ms: {100 * (pm - mm) / mm:+.1f}%;"
                  f" measured {spread[0]:.0f}-{spread[1]:.0f} ms over {a.repeat} runs)", flush=True)
            loads.append(load())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    all_err = [e for _, e in errors]
    in_model = [e for n, e in errors if "overlap" not in n] or [0.0]
    print(f"\nwhat-if: median |error| {100 * statistics.median(all_err):.1f}% over {len(all_err)} "
          f"cases (goal <= 10 %), worst {100 * max(all_err):.1f}%; without the overlap case "
          f"{100 * statistics.median(in_model):.1f}% over {len(in_model)}")
    print(f"plain replay of the base runs: median per-run median error "
          f"{100 * statistics.median(fid_med):.2f}%, worst step {100 * max(fid_worst):.2f}%")
    print(f"machine: {os.cpu_count()} CPUs, load average {' -> '.join(loads)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
