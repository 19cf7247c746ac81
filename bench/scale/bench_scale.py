#!/usr/bin/env python3
"""bench_scale.py — analysis cost per event from 64 to 16,384 ranks (issue 35).

Generates runs with `stepscope-gen --scale` (TP 8 x PP 4 x DP, an all-forward-all-backward
pipeline, TP/PP/DP/world collectives, clock offsets up to 2 s, jitter, 2 straggler ranks)
and analyses each with `stepscope analyze --threads 1` (the text report, to /dev/null), each
in its own child process, and prints per size: events, generation time, analysis wall time,
CPU ns per event (user + system), peak RSS and bytes per event; with the machine (cores, load
average before and after each run).

usage: bench_scale.py --stepscope BIN --gen BIN --dir DIR [--ranks 64,256,...]
                      [--events-per-rank N] [--top-events N] [--keep]
  --events-per-rank  events per rank (default 20000)
  --top-events       events per rank of the largest size only (default: the same), when the
                     machine's memory cannot hold it (the whole run is held: ~46 B/event)
  --keep             keep the generated runs (DIR/scale-R-E)
"""
import argparse
import os
import resource
import shutil
import subprocess
import sys
import time


def child_run(argv, stdout=subprocess.DEVNULL):
    """Runs argv; returns (wall s, user+sys s, max RSS bytes) of that child alone."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    out = subprocess.run(argv, stdout=stdout, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode:
        sys.exit("%s failed (%d): %s" % (" ".join(argv), out.returncode, out.stderr.strip()))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # ru_maxrss of RUSAGE_CHILDREN is the largest child so far: children run from small to big
    return wall, cpu, after.ru_maxrss * 1024, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stepscope", required=True)
    ap.add_argument("--gen", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--ranks", default="64,256,1024,4096,16384")
    ap.add_argument("--events-per-rank", type=int, default=20000)
    ap.add_argument("--top-events", type=int, default=0)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    sizes = [int(x) for x in a.ranks.split(",")]
    print("machine: %d cores (os.cpu_count), %s; load average %s" % (
        os.cpu_count(), os.uname().release, " ".join("%.2f" % x for x in os.getloadavg())))
    print("| ranks | events/rank | events | gen s | analyze wall s | CPU s | CPU ns/event "
          "| peak RSS MiB | bytes/event | load before/after |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(sizes):
        epr = a.top_events if a.top_events and i == len(sizes) - 1 else a.events_per_rank
        run = os.path.join(a.dir, "scale-%d-%d" % (r, epr))
        t0 = time.monotonic()
        if not os.path.isdir(run):
            g = subprocess.run([a.gen, run, "--scale", "--ranks", str(r), "--events-per-rank",
                                str(epr), "--threads", "2"], check=True, capture_output=True,
                               text=True).stdout
            with open(run + ".truth", "w") as f:
                f.write(g)
        gen_s = time.monotonic() - t0
        with open(run + ".truth") as f:
            events = int([l.split()[1] for l in f if l.startswith("events ")][0])
        load0 = os.getloadavg()[0]
        wall, cpu, rss, _ = child_run([a.stepscope, "analyze", run, "--threads", "1"])
        load1 = os.getloadavg()[0]
        print("| %d | %d | %d | %.1f | %.2f | %.2f | %.0f | %.0f | %.1f | %.2f / %.2f |" % (
            r, epr, events, gen_s, wall, cpu, cpu * 1e9 / events, rss / 2**20, rss / events,
            load0, load1), flush=True)
        if not a.keep:
            shutil.rmtree(run)
            os.unlink(run + ".truth")


if __name__ == "__main__":
    main()
