#!/usr/bin/env python3
"""bench_python.py — benchmarks of the Python package (python/stepscope), run
by hand, never by the tests (docs/python.md "Speed" has the numbers):

  ops      stepscope.ops() of a generated run of about --ops N ops (default
           10 M) into a DataFrame, in ops/s (goal: >= 5 M ops/s), split into
           the C call (load the run, build the op table) and the DataFrame
           construction. The run is written once by bench_analyzer (bench/
           analyzer: kernels on two streams with their launch calls, a
           world all-reduce per step) into --keep DIR and reused.
  hta      stepscope.analyze() beside Holistic Trace Analysis (HTA,
           TraceAnalysis + temporal breakdown + comm/comp overlap + idle
           time breakdown, as bench/hta/hta_metrics.py) on the same Kineto
           traces: every *.json[.gz] file of --traces DIR of at least
           --min-kb, each alone in a directory (HTA reads directories), every
           directory there holding several rank files as one run, and
           generated multi-rank runs (tests/kineto/make_kineto.py). Both in
           this interpreter, imports done, best of --repeat.

usage: STEPSCOPE_LIB=build/analyzer/libstepscope_analyzer.so \\
       build/benchenv/bin/python bench/python/bench_python.py [ops] [hta]
           [--build build] [--ops 10000000] [--keep /tmp/stepscope-bench-python]
           [--traces /work/realtraces/hta] [--min-kb 100] [--repeat 3]

The python needs pandas and numpy (ops) and HolisticTraceAnalysis (hta). It
prints the machine (CPU, cores, load average) with the numbers: on a shared,
loaded machine wall times are noisy."""

import argparse
import gc
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

import stepscope  # noqa: E402
from stepscope import _lib  # noqa: E402
from stepscope.ops import frame_of_table  # noqa: E402


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
    return "%s %s, CPU %s x %d, load average %.1f %.1f %.1f, Python %s" % (
        platform.system(), platform.machine(), cpu, os.cpu_count() or 0, load[0], load[1], load[2],
        platform.python_version())


def best_of(n, fn, cpu=None):
    """Best and median wall seconds of n calls (and, in cpu, the CPU seconds
    of this process, all threads, of each call), and the last result."""
    times, result = [], None
    for _ in range(n):
        result = None
        gc.collect()
        c0, t0 = time.process_time(), time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
        if cpu is not None:
            cpu.append(time.process_time() - c0)
    return min(times), sorted(times)[len(times) // 2], result


def bench_ops(args):
    bench = os.path.join(args.build, "bench", "analyzer", "bench_analyzer")
    # bench_analyzer's events: a kernel and its launch call per op, plus a few per step
    events = 2 * args.ops
    run = os.path.join(args.keep, "bench-analyzer-%d-%d" % (args.ranks, events))
    if not os.path.isdir(run):
        os.makedirs(args.keep, exist_ok=True)
        print("writing the run (bench_analyzer --keep %s --ranks %d --events %d) ..."
              % (args.keep, args.ranks, events), flush=True)
        subprocess.run([bench, "--keep", args.keep, "--export-max", "0", "--ranks",
                        str(args.ranks), "--events", str(events)], check=True,
                       stdout=subprocess.DEVNULL)
    size = sum(os.path.getsize(os.path.join(run, f)) for f in os.listdir(run))
    print("run: %s (%d ranks, %.1f MiB)" % (run, args.ranks, size / 2**20))

    def c_call():
        return _lib.ops_buffer(run, [])

    def whole():
        return stepscope.ops(run)

    c_cpu, w_cpu = [], []
    c_best, c_med, _ = best_of(args.repeat, c_call, c_cpu)
    w_best, w_med, df = best_of(args.repeat, whole, w_cpu)
    n = len(df)
    mem = df.memory_usage(deep=False).sum()
    print("stepscope.ops(): %d ops, %d columns, %.0f MiB DataFrame" % (n, df.shape[1], mem / 2**20))
    print("  whole call     best %.3f s  median %.3f s  -> %.2f M ops/s (best), %.2f M ops/s (median)"
          % (w_best, w_med, n / w_best / 1e6, n / w_med / 1e6))
    print("  whole call     CPU (all threads) best %.3f s -> %.2f M ops per CPU second"
          % (min(w_cpu), n / min(w_cpu) / 1e6))
    print("  C library      best %.3f s  median %.3f s  CPU best %.3f s  (load the run, write the "
          "op table)" % (c_best, c_med, min(c_cpu)))
    buf = _lib.ops_buffer(run, [])
    f_best, f_med, _ = best_of(args.repeat, lambda: frame_of_table(buf))
    print("  DataFrame only best %.3f s  median %.3f s  -> %.2f M ops/s" % (f_best, f_med,
                                                                          n / f_best / 1e6))
    print("  goal >= 5 M ops/s: %s" % ("met" if n / w_best >= 5e6 else "NOT met"))


def hta_run(trace_dir):
    import logging
    import warnings
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis
    ta = TraceAnalysis(trace_dir=trace_dir)
    ranks = sorted(ta.t.traces.keys())
    ta.get_temporal_breakdown(visualize=False)
    ta.get_comm_comp_overlap(visualize=False)
    ta.get_idle_time_breakdown(ranks=ranks, visualize=False)
    return len(ranks)


def bench_hta(args):
    try:
        import hta  # noqa: F401
        from importlib.metadata import version
        hta_version = version("HolisticTraceAnalysis")
    except Exception as e:  # noqa: BLE001
        raise SystemExit("hta: this python has no HolisticTraceAnalysis (%s)" % e)
    work = tempfile.mkdtemp(prefix="bench-python-hta-")
    cases, seen = [], set()
    for dirpath, _dirs, files in sorted(os.walk(args.traces)):
        traces = [f for f in sorted(files) if f.endswith(".json") or f.endswith(".json.gz")]
        for name in traces:
            path = os.path.join(dirpath, name)
            if os.path.getsize(path) < args.min_kb * 1024:
                continue
            with open(path, "rb") as fh:  # the same file copied twice under DIR counts once
                key = (os.path.getsize(path), fh.read(4096))
            if key in seen:
                continue
            seen.add(key)
            d = os.path.join(work, "real-%d" % len(cases))
            os.makedirs(d)
            os.symlink(path, os.path.join(d, "rank-0" + (".json.gz" if name.endswith(".gz")
                                                         else ".json")))
            cases.append((os.path.relpath(path, args.traces), d))
        if dirpath != args.traces and len(traces) >= 2 and all("rank" in t for t in traces):
            # a multi-rank run, its files linked as rank-N (names every stepscope version
            # reads; HTA reads any names)
            d = os.path.join(work, "real-%d" % len(cases))
            os.makedirs(d)
            for i, name in enumerate(traces):
                os.symlink(os.path.join(dirpath, name),
                           os.path.join(d, "rank-%d" % i + (".json.gz" if name.endswith(".gz")
                                                            else ".json")))
            cases.append((os.path.relpath(dirpath, args.traces) + "/ (%d ranks)" % len(traces), d))
    for ranks, steps in ((4, 16), (4, 64), (8, 64)):
        d = os.path.join(work, "gen-%dx%d" % (ranks, steps))
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "kineto", "make_kineto.py"), d,
                        "--ranks", str(ranks), "--steps", str(steps)], check=True,
                       stdout=subprocess.DEVNULL)
        cases.append(("make_kineto %d ranks x %d steps" % (ranks, steps), d))
    print("HolisticTraceAnalysis %s; stepscope.analyze(); best of %d, in-process wall seconds"
          % (hta_version, args.repeat))
    print("%-62s %9s %10s %10s %8s" % ("trace", "file MiB", "stepscope", "HTA", "HTA/ss"))
    for label, d in cases:
        mib = sum(os.path.getsize(os.path.realpath(os.path.join(d, f))) for f in os.listdir(d)) / 2**20
        try:
            s_best, _, _ = best_of(args.repeat, lambda: stepscope.analyze(d))
            s = "%10.3f" % s_best
        except stepscope.StepscopeError as e:
            s_best, s = None, "%10s" % "failed"
            print("  stepscope failed: %s" % e)
        try:
            h_best, _, _ = best_of(args.repeat, lambda: hta_run(d))
            h = "%10.3f" % h_best
        except Exception as e:  # noqa: BLE001 — HTA raises anything on traces it cannot read
            h_best, h = None, "%10s" % "failed"
            print("  HTA failed: %s: %s" % (type(e).__name__, str(e)[:120]))
        ratio = "%8.1f" % (h_best / s_best) if s_best and h_best else "%8s" % "-"
        print("%-62s %9.2f %s %s %s" % (label[:62], mib, s, h, ratio), flush=True)
    shutil.rmtree(work, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", nargs="*", help="ops, hta or both (default)")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--ops", type=int, default=10_000_000)
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--keep", default=os.path.join(tempfile.gettempdir(), "stepscope-bench-python"))
    p.add_argument("--traces", default="/work/realtraces/hta")
    p.add_argument("--min-kb", type=int, default=100)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    args.what = args.what or ["ops", "hta"]
    if set(args.what) - {"ops", "hta"}:
        p.error("what: ops or hta, not %s" % " ".join(args.what))
    if not os.environ.get("STEPSCOPE_LIB"):
        os.environ["STEPSCOPE_LIB"] = os.path.join(args.build, "analyzer",
                                                   "libstepscope_analyzer.so")
    print("machine: %s" % machine())
    print("library: %s" % stepscope.library_path())
    if "ops" in args.what:
        bench_ops(args)
    if "hta" in args.what:
        bench_hta(args)


if __name__ == "__main__":
    main()
