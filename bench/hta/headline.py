#!/usr/bin/env python3
"""Print stepscope's headline for every Kineto trace under a directory.

For each *.json / *.json.gz / *.pt.trace.json[.gz] file found (recursively) under DIR,
runs `stepscope analyze FILE --json - --quiet` and prints one row: step time (the
report's run.step_time_ns), and over the analyzed ranks' whole-trace totals: compute,
exposed communication and idle as a percentage of the span, the overlap ratio, and the
number of steps. A trace stepscope cannot read prints its error instead of numbers.

Used to compare the headline before and after a change: run it once with the old
binary and once with the new one, and diff the two outputs.

usage: headline.py DIR [STEPSCOPE_BIN]   (default binary: build/analyzer/stepscope)
"""
import json
import os
import subprocess
import sys


def find_traces(root):
    found = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if name.endswith(".json") or name.endswith(".json.gz"):
                found.append(os.path.join(dirpath, name))
    return sorted(found)


def pct(part, whole):
    if not whole:
        return "-"
    return "%.1f%%" % (100.0 * part / whole)


def headline(binary, path):
    proc = subprocess.run([binary, "analyze", path, "--json", "-", "--quiet"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    if proc.returncode != 0 or not proc.stdout.strip():
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        return None, (err[-1] if err else "exit %d" % proc.returncode)
    report = json.loads(proc.stdout)
    run = report.get("run", {})
    span = busy = compute = exposed = overlap = idle = comm = 0
    for rank in report.get("ranks", []):
        t = rank.get("totals") or {}
        span += t.get("span_ns", 0) or 0
        compute += t.get("compute_ns", 0) or 0
        comm += t.get("comm_ns", 0) or 0
        exposed += t.get("exposed_comm_ns", 0) or 0
        overlap += t.get("overlap_ns", 0) or 0
        idle += t.get("idle_ns", 0) or 0
        busy += t.get("busy_ns", 0) or 0
    step_ns = run.get("step_time_ns")
    row = {
        "step_ms": "-" if step_ns is None else "%.3f" % (step_ns / 1e6),
        "steps": str(len(run.get("steps") or [])),
        "compute": pct(compute, span),
        "exposed_comm": pct(exposed, span),
        # overlap ratio as the report defines it: overlapped / communication time
        "overlap": pct(overlap, comm) if comm else "-",
        "idle": pct(idle, span),
    }
    return row, None


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) >= 2 else 2
    root = sys.argv[1]
    binary = sys.argv[2] if len(sys.argv) > 2 else "build/analyzer/stepscope"
    if not os.path.isdir(root):
        print("headline.py: %s is not a directory" % root, file=sys.stderr)
        return 2
    traces = find_traces(root)
    if not traces:
        print("headline.py: no *.json or *.json.gz under %s" % root, file=sys.stderr)
        return 1
    cols = ["step_ms", "steps", "compute", "exposed_comm", "overlap", "idle"]
    width = max(len(os.path.relpath(p, root)) for p in traces)
    print("%-*s  %10s %5s %8s %12s %8s %8s" % ((width, "trace") + tuple(cols)))
    for path in traces:
        name = os.path.relpath(path, root)
        try:
            row, err = headline(binary, path)
        except (subprocess.TimeoutExpired, ValueError) as e:
            row, err = None, str(e)
        if row is None:
            print("%-*s  error: %s" % (width, name, err))
            continue
        print("%-*s  %10s %5s %8s %12s %8s %8s" % ((width, name) + tuple(row[c] for c in cols)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
