#!/usr/bin/env python3
"""bench_hta.py STEPSCOPE HTA_PYTHON [--sizes 4,16,64] [--ranks 4] [--work DIR]
   bench_hta.py STEPSCOPE HTA_PYTHON --traces DIR [--min-kb N]
— times `stepscope analyze` against HTA (TraceAnalysis + temporal breakdown
+ comm/comp overlap + idle time breakdown, bench/hta/hta_metrics.py), whole
process, same machine, one after the other. Without --traces: on generated
Kineto runs (tests/kineto/make_kineto.py, N steps each). With --traces: on
every *.json / *.json.gz file under DIR (real traces, e.g. /work/realtraces),
each alone in a directory of its own (HTA reads directories), skipping files
smaller than --min-kb (default 100), stepscope's best of 5 runs against HTA's
best of 2. Prints per trace the size (gz and JSON),
wall time, CPU time (user + system) and peak RSS of each tool, the ratios
and the machine. On a loaded machine the CPU-time ratio is the steadier one. A trace one
tool cannot read is reported as failed. Not a test: run it by hand
(docs/hta-comparison.md)."""
import gzip
import os
import platform
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
gen = os.path.join(here, "..", "..", "tests", "kineto", "make_kineto.py")


def measure(cmd, must_succeed=True):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        if must_succeed:
            raise SystemExit("failed: %s" % " ".join(cmd))
        return None
    # MiB; and CPU seconds (user + system): on a machine loaded by other work,
    # wall time also counts the waits for a core, CPU time does not
    return wall, ru.ru_maxrss / 1024.0, ru.ru_utime + ru.ru_stime


def json_size(path):
    """Bytes of JSON text in a trace file (decompressed size for .gz)."""
    if not path.endswith(".gz"):
        return os.path.getsize(path)
    n = 0
    with gzip.open(path, "rb") as fh:
        while True:
            chunk = fh.read(1 << 20)
            if not chunk:
                return n
            n += len(chunk)


def bench_real(exe, hta_py, root, work, min_kb):
    """One row per real trace file under root; each is linked alone into a
    directory of its own so that HTA sees one rank, as stepscope does."""
    traces = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            if (name.endswith(".json") or name.endswith(".json.gz")) and \
                    os.path.getsize(path) >= min_kb * 1024:
                traces.append(path)
    traces.sort()
    print("%-60s %8s %8s | %8s %8s %8s | %8s %8s %8s | %8s %8s %6s" % (
        "trace", "gz MB", "JSON MB", "ss s", "ss cpu s", "ss MiB", "hta s", "hta cpu s", "hta MiB",
        "speedup", "cpu x", "mem x"))
    for i, path in enumerate(traces):
        d = os.path.join(work, "real%03d" % i)
        os.makedirs(d, exist_ok=True)
        for old in os.listdir(d):
            os.unlink(os.path.join(d, old))
        os.symlink(os.path.abspath(path), os.path.join(d, os.path.basename(path)))
        gz = os.path.getsize(path) / 1e6 if path.endswith(".gz") else float("nan")
        js = json_size(path) / 1e6
        # best of 5 stepscope runs (each ~10-50 ms: a burst of noise on a
        # shared machine moves one by 20 %), best of 2 HTA runs (1-5 s)
        runs = [measure([exe, "analyze", path, "--json", "/dev/null", "--quiet"], False) for _ in range(5)]
        ss = None if None in runs else (min(r[0] for r in runs), max(r[1] for r in runs),
                                        min(r[2] for r in runs))
        hruns = [measure([hta_py, os.path.join(here, "hta_metrics.py"), d, "--json", "/dev/null"], False)
                 for _ in range(2)]
        hta = None if None in hruns else (min(r[0] for r in hruns), max(r[1] for r in hruns),
                                          min(r[2] for r in hruns))
        name = os.path.relpath(path, root)[-60:]
        ss_cell = "%8.3f %8.3f %8.1f" % (ss[0], ss[2], ss[1]) if ss else "%26s" % "failed"
        hta_cell = "%8.3f %8.3f %8.1f" % (hta[0], hta[2], hta[1]) if hta else "%26s" % "failed"
        ratio = "%7.0fx %7.0fx %5.1fx" % (hta[0] / ss[0], hta[2] / ss[2], hta[1] / ss[1]) \
            if ss and hta else ""
        print("%-60s %8.2f %8.1f | %s | %s | %s" % (name, gz, js, ss_cell, hta_cell, ratio))


def machine():
    cpu = platform.processor()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        mem = "%.1f GiB RAM" % (int(open("/proc/meminfo").readline().split()[1]) / 1048576)
    except OSError:
        pass
    return "%s, %d cores, %s, %s" % (cpu, os.cpu_count(), mem, platform.platform())


def versions_of_stepscope(exe):
    out = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip()
    try:
        rev = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True).stdout.strip()
    except OSError:
        rev = ""
    return out + (" (commit %s)" % rev if rev else "")


def versions_of_hta(hta_py):
    code = ("import importlib.metadata as m, sys; print('HolisticTraceAnalysis %s, pandas %s, numpy %s, "
            "Python %s' % (m.version('HolisticTraceAnalysis'), m.version('pandas'), m.version('numpy'), "
            "sys.version.split()[0]))")
    return subprocess.run([hta_py, "-c", code], capture_output=True, text=True).stdout.strip()


def main():
    exe, hta_py = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    sizes = [4, 16, 64]
    ranks = 4
    work = "/tmp/stepscope-bench-hta"
    if "--sizes" in args:
        sizes = [int(x) for x in args[args.index("--sizes") + 1].split(",")]
    if "--ranks" in args:
        ranks = int(args[args.index("--ranks") + 1])
    if "--work" in args:
        work = args[args.index("--work") + 1]
    print("machine:", machine())
    print("stepscope:", versions_of_stepscope(exe))
    print("HTA:", versions_of_hta(hta_py))
    if "--traces" in args:
        min_kb = int(args[args.index("--min-kb") + 1]) if "--min-kb" in args else 100
        bench_real(exe, hta_py, args[args.index("--traces") + 1], work, min_kb)
        return
    print("%6s %6s %10s %9s | %10s %9s | %10s %9s | %8s %8s" % (
        "ranks", "steps", "MB (json)", "events", "ss wall s", "ss MiB", "hta wall s", "hta MiB",
        "speedup", "mem x"))
    for steps in sizes:
        d = os.path.join(work, "r%d_s%d" % (ranks, steps))
        if not os.path.isdir(d):
            subprocess.run([sys.executable, gen, d, "--ranks", str(ranks), "--steps", str(steps),
                            "--layers", "24", "--graphs"], check=True)
        mb = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)) / 1e6
        events = 0
        for f in os.listdir(d):
            with open(os.path.join(d, f)) as fh:
                events += sum(1 for line in fh if line.startswith('  {"ph"'))
        ss = min(measure([exe, "analyze", d, "--json", "/dev/null", "--quiet"]) for _ in range(3))
        hta = measure([hta_py, os.path.join(here, "hta_metrics.py"), d, "--json", "/dev/null"])
        print("%6d %6d %10.1f %9d | %10.3f %9.1f | %10.3f %9.1f | %7.0fx %7.1fx" % (
            ranks, steps, mb, events, ss[0], ss[1], hta[0], hta[1], hta[0] / ss[0], hta[1] / ss[1]))


if __name__ == "__main__":
    main()
