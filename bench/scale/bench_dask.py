#!/usr/bin/env python3
"""bench_dask.py — the map step of a partial analysis run by Dask (issue 35 items 3b and 5).

Generates a run with `stepscope-gen --scale` (or reuses one), then measures, each on the
same run:
  - the one-machine bounded analysis, `stepscope analyze RUN --low-memory --threads 1 --json`,
    in a child process (wall, CPU, peak RSS);
  - the map step on a dask.distributed LocalCluster of W worker processes (one thread each):
    `stepscope.analyze_partial(RUN, part=(k, P))` for k < P submitted with client.map; wall
    time of the whole map, and per task its CPU time (time.process_time in the worker) and
    the partial's size;
  - the merge, `stepscope merge PARTS --json` in a child process (wall, CPU, peak RSS and the
    rank files it read again: its STEPSCOPE_SAY_READS line);
  - with --cross, the second map round of a run with pipelines (docs/scale.md "A second map
    round"): `stepscope merge --cross-out DIR PARTS` in a child (wall, CPU, RSS, cross bytes),
    then on the same cluster `stepscope.analyze_partial(RUN, part=(k, P), cross=...)`, then the
    merge of those partials as above;
and checks that each merged JSON equals the one-machine report byte for byte (exit 1 if not).
The machine (cores, load average) is printed with the figures: on a shared machine compare
CPU times, not walls.

usage: bench_dask.py --stepscope BIN --gen BIN --dir DIR [--ranks R] [--events-per-rank E]
                     [--gen-args '...'] [--parts P] [--workers W] [--cross] [--reuse]
  --stepscope  the stepscope command; the Python package is taken from this source tree and
               its library from libstepscope_analyzer.so beside the command (or STEPSCOPE_LIB)
  --parts      partial analyses (default 16)
  --workers    Dask worker processes (default: the machine's cores)
  --cross      also the second map round (runs with pipelines)
  --reuse      analyse the run already in DIR/run-R-E if there is one
Needs `distributed` (pip install distributed) beside dask.
"""
import argparse
import filecmp
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def child(argv, env=None):
    """Runs argv; returns (wall s, CPU s, max RSS MiB, stderr) of that child alone."""
    with tempfile.TemporaryFile(mode="w+") as err:
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err,
                             env=dict(os.environ, **(env or {})))
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        err.seek(0)
        said = err.read()
        if os.waitstatus_to_exitcode(status):
            sys.exit("%s failed: %s" % (" ".join(argv), said.strip()))
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, said


def map_task(run, out, k, n, cross=None):
    """One Dask task: part k of n (with the part's cross file: the second round); returns (CPU s
    of the worker process during the task, bytes written)."""
    import stepscope  # imported in the worker process
    t0 = time.process_time()
    stepscope.analyze_partial(run, out, part=(k, n), cross=cross)
    return time.process_time() - t0, os.path.getsize(out)


def dask_map(client, run, outs, crosses, label, ranks):
    """The map step of every part on the cluster; prints its figures."""
    n = len(outs)
    t0 = time.monotonic()
    done = client.gather(client.map(map_task, [run] * n, outs, range(n), [n] * n, crosses,
                                    pure=False))
    wall = time.monotonic() - t0
    print("%s on dask.distributed (%d parts): %.2f s wall, %.2f s CPU in the tasks (largest "
          "%.2f s), partials %.0f B/rank" % (label, n, wall, sum(c for c, _ in done),
                                            max(c for c, _ in done),
                                            sum(b for _, b in done) / ranks))


def merge_and_compare(stepscope_bin, outs, merged, whole):
    """`stepscope merge` of the partials in a child; prints its figures; whether the report is
    the one machine's byte for byte."""
    wall, cpu, rss, said = child([stepscope_bin, "merge", "--json", merged] + outs,
                                 env={"STEPSCOPE_SAY_READS": "1"})
    reads = " ".join(line.strip() for line in said.splitlines() if "read" in line) or "?"
    print("merge: %.2f s wall, %.2f s CPU, %.0f MiB; %s" % (wall, cpu, rss, reads))
    # compared in chunks: a child's peak RSS (wait4) counts its parent's at the fork, so this
    # process must not hold the reports (~1 GB each at 16,384 ranks)
    same = filecmp.cmp(whole, merged, shallow=False)
    print("merged report == one-machine report: %s" % ("yes, byte for byte" if same else "NO"))
    return same


def main():
    ap = argparse.ArgumentParser(description="the map step of stepscope's partials on Dask")
    ap.add_argument("--stepscope", required=True)
    ap.add_argument("--gen", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--events-per-rank", type=int, default=5000)
    ap.add_argument("--gen-args", default="")
    ap.add_argument("--parts", type=int, default=16)
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--cross", action="store_true")
    ap.add_argument("--reuse", action="store_true")
    a = ap.parse_args()
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        sys.exit("bench_dask.py needs dask.distributed: pip install distributed")
    stepscope_bin = os.path.abspath(a.stepscope)
    lib = os.environ.get("STEPSCOPE_LIB") or os.path.join(os.path.dirname(stepscope_bin),
                                                          "libstepscope_analyzer.so")
    # the worker processes inherit these: the package from this tree, the library built here
    os.environ["STEPSCOPE_LIB"] = lib
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(ROOT, "python")] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    sys.path.insert(0, os.path.join(ROOT, "python"))

    os.makedirs(a.dir, exist_ok=True)
    run = os.path.join(a.dir, "run-%d-%d" % (a.ranks, a.events_per_rank))
    if not (a.reuse and os.path.isdir(run)):
        subprocess.run([a.gen, run, "--scale", "--ranks", str(a.ranks), "--events-per-rank",
                        str(a.events_per_rank)] + a.gen_args.split(), check=True,
                       stdout=subprocess.DEVNULL)
    print("machine: %d cores (os.cpu_count), %s; load average %s" % (
        os.cpu_count(), os.uname().release, " ".join("%.2f" % x for x in os.getloadavg())))
    print("run: %s (%d ranks x %d events, stepscope-gen --scale %s)" % (
        run, a.ranks, a.events_per_rank, a.gen_args))

    whole = os.path.join(a.dir, "whole.json")
    wall, cpu, rss, _ = child([stepscope_bin, "analyze", run, "--low-memory", "--threads", "1",
                               "--json", whole])
    print("one machine, analyze --low-memory --threads 1: %.2f s wall, %.2f s CPU, %.0f MiB"
          % (wall, cpu, rss))

    outs = [os.path.join(a.dir, "part-%d.ssp" % k) for k in range(a.parts)]
    outs2 = [os.path.join(a.dir, "part2-%d.ssp" % k) for k in range(a.parts)]
    cross_dir = os.path.join(a.dir, "cross")
    print("dask.distributed LocalCluster: %d worker processes x 1 thread" % a.workers)
    with LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        dask_map(client, run, outs, [None] * a.parts, "map", a.ranks)
        same = merge_and_compare(stepscope_bin, outs, os.path.join(a.dir, "merged.json"), whole)
        if a.cross:
            os.makedirs(cross_dir, exist_ok=True)
            wall, cpu, rss, _ = child([stepscope_bin, "merge", "--cross-out", cross_dir] + outs)
            crosses = [os.path.join(cross_dir, "cross-%d-of-%d.ssx" % (k, a.parts))
                       for k in range(a.parts)]
            print("merge --cross-out: %.2f s wall, %.2f s CPU, %.0f MiB; cross files %.0f B/rank"
                  % (wall, cpu, rss, sum(os.path.getsize(c) for c in crosses) / a.ranks))
            dask_map(client, run, outs2, crosses, "map, second round", a.ranks)
            same = merge_and_compare(stepscope_bin, outs2, os.path.join(a.dir, "merged2.json"),
                                     whole) and same
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
