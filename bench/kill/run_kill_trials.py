#!/usr/bin/env python3
"""run_kill_trials.py — kills traced processes at random times and measures
what their traces lost.

Modes (each run --trials times, at a random moment --min-s..--max-s after
the process is up):

  victim-kill   kill_victim (a steady --rate records/s in linked mode) gets
                SIGKILL; records lost = records it had appended (it publishes
                the count in a shared file) minus records in the trace; time
                lost = the kill's time minus the trace's last record.
  victim-term   the same with SIGTERM: the tracer's handler must flush it all.
  train-kill    `stepscope-train --world 2 --trace DIR`: SIGKILL to a random
                rank; time lost in that rank's trace (the trainer's records
                come in bursts, so this is an upper bound of the activity lost).
  train-term    the same with SIGTERM to a random rank; the launcher then
                stops the other rank with SIGTERM too (both must be closed on
                the signal).

Prints, per mode, the distribution of what was lost and the traces' close
states (closed / closed_on_signal / not_closed), with the machine.

usage: run_kill_trials.py [--build BUILD] [--trials N] [--modes m1,m2] [--seed S]
"""
import argparse
import json
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time


def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = os.getloadavg()
    return (f"{platform.node()}: {cpu}, {os.cpu_count()} CPUs, {platform.system()} "
            f"{platform.release()}; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")


def dump(stepscope, path):
    """Records of a trace file (dicts), the header excluded."""
    out = subprocess.run([stepscope, "dump", path], capture_output=True, text=True)
    recs = []
    for line in out.stdout.splitlines()[1:]:
        try:
            recs.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return recs


def close_state(stepscope, path):
    out = subprocess.run([stepscope, "info", "--json", path], capture_output=True, text=True)
    try:
        return json.loads(out.stdout)["ranks"][0].get("closed", "?")
    except (json.JSONDecodeError, KeyError, IndexError):
        return "unreadable"


def last_time(recs):
    t = None
    for r in recs:
        for k in ("end_ns", "time_ns", "start_ns"):
            if k in r and isinstance(r[k], int):
                t = r[k] if t is None else max(t, r[k])
                break
    return t


def victim_trial(args, sig, rng):
    d = tempfile.mkdtemp(prefix="ss-kill-")
    try:
        counter = os.path.join(d, "counter")
        p = subprocess.Popen([os.path.join(args.build, "bench/kill/kill_victim"),
                              os.path.join(d, "run"), counter, str(args.rate)],
                             stdout=subprocess.PIPE, text=True)
        p.stdout.readline()  # "ready"
        time.sleep(rng.uniform(args.min_s, args.max_s))
        kill_ns = time.monotonic_ns()
        p.send_signal(sig)
        p.wait()
        with open(counter, "rb") as f:
            published = int.from_bytes(f.read(8), "little")
        path = os.path.join(d, "run", "rank-00000.trace.zst")
        recs = [r for r in dump(args.stepscope, path) if r.get("kind") == "mark"]
        seqs = [r["payload"] for r in recs]
        kept = max(seqs) + 1 if seqs else 0
        gapless = len(seqs) == kept
        t = last_time(recs)
        return {"records_lost": published - kept, "appended": published,
                "time_lost_ms": (kill_ns - t) / 1e6 if t else None,
                "state": close_state(args.stepscope, path), "gapless": gapless,
                "exit": p.returncode}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def rank_pids(launcher_pid):
    try:
        with open(f"/proc/{launcher_pid}/task/{launcher_pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def train_trial(args, sig, rng):
    d = tempfile.mkdtemp(prefix="ss-killtrain-")
    try:
        run = os.path.join(d, "run")
        p = subprocess.Popen([os.path.join(args.build, "trainer/stepscope-train"), "--backend",
                              "cpu", "--world", "2", "--steps", "1000000", "--quiet",
                              "--trace", run], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while time.time() < deadline and not (
                len(rank_pids(p.pid)) == 2 and
                os.path.exists(os.path.join(run, "rank-00001.trace.zst"))):
            time.sleep(0.05)
        time.sleep(0.5)  # past start-up: steps are running
        pids = rank_pids(p.pid)
        time.sleep(rng.uniform(args.min_s, args.max_s))
        victim = rng.randrange(2)
        kill_ns = time.monotonic_ns()
        os.kill(pids[victim], sig)
        p.wait(timeout=60)
        states, lost = {}, None
        for r in range(2):
            path = os.path.join(run, f"rank-{r:05d}.trace.zst")
            states[r] = close_state(args.stepscope, path)
            if r == victim:
                recs = dump(args.stepscope, path)
                t = last_time(recs)
                lost = (kill_ns - t) / 1e6 if t else None
        return {"time_lost_ms": lost, "state": states[victim],
                "other_state": states[1 - victim], "records_lost": None}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def summary(name, trials):
    def dist(vals, unit):
        vals = sorted(v for v in vals if v is not None)
        if not vals:
            return "-"
        p95 = vals[min(len(vals) - 1, int(round(0.95 * (len(vals) - 1))))]
        return (f"median {statistics.median(vals):.1f}{unit}, p95 {p95:.1f}{unit}, "
                f"max {vals[-1]:.1f}{unit} (min {vals[0]:.1f}{unit})")
    print(f"\n== {name}: {len(trials)} trials")
    print("  time lost (kill -> trace's last record): " +
          dist([t["time_lost_ms"] for t in trials], " ms"))
    if trials and trials[0].get("records_lost") is not None:
        print("  records lost: " + dist([t["records_lost"] for t in trials], ""))
        print("  records appended before the kill: " +
              dist([t["appended"] for t in trials], ""))
        print(f"  gap-free prefix: {sum(t['gapless'] for t in trials)}/{len(trials)}")
    states = {}
    for t in trials:
        states[t["state"]] = states.get(t["state"], 0) + 1
    print(f"  killed process's trace: {states}")
    if trials and "other_state" in trials[0]:
        others = {}
        for t in trials:
            others[t["other_state"]] = others.get(t["other_state"], 0) + 1
        print(f"  the other rank's trace (stopped by the launcher with SIGTERM): {others}")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(here, "..", "..", "build"))
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--modes", default="victim-kill,victim-term,train-kill,train-term")
    ap.add_argument("--min-s", type=float, default=0.3)
    ap.add_argument("--max-s", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rate", type=float, default=50000, help="kill_victim's records/s")
    args = ap.parse_args()
    args.stepscope = os.path.join(args.build, "analyzer/stepscope")
    rng = random.Random(args.seed)
    print("machine: " + machine())
    print(f"trials: {args.trials} per mode, killed {args.min_s}-{args.max_s} s after start-up, "
          f"seed {args.seed}, kill_victim at {args.rate:.0f} records/s")
    runs = {"victim-kill": (victim_trial, signal.SIGKILL),
            "victim-term": (victim_trial, signal.SIGTERM),
            "train-kill": (train_trial, signal.SIGKILL),
            "train-term": (train_trial, signal.SIGTERM)}
    for mode in args.modes.split(","):
        fn, sig = runs[mode]
        trials = []
        for i in range(args.trials):
            trials.append(fn(args, sig, rng))
            print(".", end="", flush=True)
        summary(mode, trials)
    print("machine after: " + machine())


if __name__ == "__main__":
    sys.exit(main())
