#!/usr/bin/env python3
"""bench_gzip_paths.py DIR [--min-kb 700] [--reps 7] [--cpus 0,1] VARIANT...
— times `stepscope analyze FILE --json /dev/null --quiet` on every *.json.gz
file under DIR of at least --min-kb, for each VARIANT, given as
LABEL=BINARY or LABEL=BINARY:MODE (MODE sets STEPSCOPE_KINETO_GZIP: whole,
pipe, stream or auto; kineto_source.h). The variants run one after the
other, alternating, --reps rounds, so that a change of load on a shared
machine hits every variant alike. Prints per file and variant the minimum
and median wall time and the median CPU time (user + system, from wait4),
in ms, and each variant's median wall time relative to the first variant.
--cpus pins every run to those CPUs (taskset), e.g. to time on one core.
Not a test: run it by hand (docs/hta-comparison.md)."""
import os
import statistics
import subprocess
import sys
import time


def run(binary, mode, path, cpus):
    env = dict(os.environ)
    env.pop("STEPSCOPE_KINETO_GZIP", None)
    if mode:
        env["STEPSCOPE_KINETO_GZIP"] = mode
    cmd = [binary, "analyze", path, "--json", "/dev/null", "--quiet"]
    if cpus:
        cmd = ["taskset", "-c", cpus] + cmd
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        raise SystemExit("failed: %s" % " ".join(cmd))
    return wall * 1e3, (ru.ru_utime + ru.ru_stime) * 1e3


def main(argv):
    args, variants, min_kb, reps, cpus = [], [], 700, 7, None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--min-kb":
            min_kb = int(argv[i + 1]); i += 2; continue
        if a == "--reps":
            reps = int(argv[i + 1]); i += 2; continue
        if a == "--cpus":
            cpus = argv[i + 1]; i += 2; continue
        if "=" in a:
            label, rest = a.split("=", 1)
            binary, _, mode = rest.partition(":")
            variants.append((label, binary, mode))
        else:
            args.append(a)
        i += 1
    if len(args) != 1 or not variants:
        raise SystemExit(__doc__)
    files = []
    for dirpath, _dirs, names in os.walk(args[0]):
        for name in names:
            path = os.path.join(dirpath, name)
            if name.endswith(".json.gz") and os.path.getsize(path) >= min_kb * 1024:
                files.append(path)
    files.sort()
    print("load average before: %.2f %.2f %.2f" % os.getloadavg())
    head = "%-44s %6s" % ("file", "gz MB")
    for label, _, _ in variants:
        head += " | %-22s" % (label + " min/med/cpu")
    print(head + " | med vs " + variants[0][0])
    for path in files:
        walls = {v[0]: [] for v in variants}
        cpus_ms = {v[0]: [] for v in variants}
        for _ in range(reps):
            for label, binary, mode in variants:
                w, c = run(binary, mode, path, cpus)
                walls[label].append(w)
                cpus_ms[label].append(c)
        name = os.path.relpath(path, args[0])[-44:]
        line = "%-44s %6.2f" % (name, os.path.getsize(path) / 1e6)
        base = statistics.median(walls[variants[0][0]])
        ratios = []
        for label, _, _ in variants:
            med = statistics.median(walls[label])
            line += " | %6.0f %6.0f %6.0f  " % (min(walls[label]), med, statistics.median(cpus_ms[label]))
            ratios.append("%.2f" % (med / base))
        print(line + " | " + " ".join(ratios[1:]), flush=True)
    print("load average after: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main(sys.argv[1:])
