#!/usr/bin/env python3
"""bench_scale.py — analysis cost per event from 64 to 16,384 ranks (issue 35).

Generates runs with `stepscope-gen --scale` (TP 8 x PP 4 x DP, an all-forward-all-backward
pipeline, TP/PP/DP/world collectives, clock offsets up to 2 s, jitter, 2 straggler ranks)
and analyses each with `stepscope analyze --threads 1` (the text report, to /dev/null), each
in its own child process, in the normal mode and the bounded mode (`--low-memory`,
docs/scale.md), and prints per size and mode: events, generation time, analysis wall time,
CPU ns per event (user + system), peak RSS and bytes per event, page faults, the rank files
read again (STEPSCOPE_SAY_READS); with the machine (cores, load average before and after each
run). With --parts P it also cuts each run into P
partial analyses (`analyze --part K/P --partial`, docs/scale.md "Partials"), one child each,
then merges them (`merge`), and prints per size: the partials' bytes per rank, the map step's
CPU (all parts) and largest part's RSS, and the merge's wall, CPU and RSS and the rank files it read
again (its STEPSCOPE_SAY_READS line: "?" for a stepscope without it). With --cross it then
runs the second map round of a run with pipelines (docs/scale.md "A second map round"): `merge
--cross-out DIR` of those partials (its CPU and RSS, the cross files' bytes per rank), every
part again with `--cross DIR/cross-K-of-P.ssx` (one child each), and the merge of those
partials, in a second row ("2 rounds": map CPU of both rounds). Each merge's text report is
compared with the analyses' (SHA-256 of stdout): "report = analyze's".

usage: bench_scale.py --stepscope BIN --gen BIN --dir DIR [--ranks 64,256,...]
                      [--gen-args '--pp 1 ...'] (more stepscope-gen arguments, e.g.
                      '--waits': pipelines whose stages wait on late sends)
                      [--events-per-rank N] [--top-events N] [--modes normal,bounded]
                      [--threads N] [--parts P [--cross]] [--keep]
  --events-per-rank  events per rank (default 20000)
  --top-events       events per rank of the largest size only (default: the same), when the
                     machine's memory cannot hold it (the whole run is held: ~46 B/event)
  --modes            the analysis modes to measure: normal, bounded (--low-memory); default both
  --threads          analysis threads (default 1; the bounded mode holds that many ranks)
  --parts            also measure partials of P parts and their merge (default 0: not)
  --cross            with --parts: also the second map round and its merge
  --keep             keep the generated runs (DIR/scale-R-E)
"""
import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time


def child_run(argv, env=None, said=None, digest=None):
    """Runs argv; returns (wall s, user s, sys s, max RSS bytes, minor faults) of that child
    alone (os.wait4: its own rusage, not the largest child's so far); its stderr is appended to
    the list `said` when given, and the SHA-256 of its stdout (the text report) to the list
    `digest`."""
    with tempfile.TemporaryFile(mode="w+") as err, tempfile.TemporaryFile() as out:
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=out if digest is not None else subprocess.DEVNULL,
                             stderr=err, env=dict(os.environ, **(env or {})))
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        if p.returncode:
            sys.exit("%s failed (%d): %s" % (" ".join(argv), p.returncode, err.read().strip()))
        if said is not None:
            said.append(err.read())
        if digest is not None:
            out.seek(0)
            h = hashlib.sha256()
            for block in iter(lambda: out.read(1 << 20), b""):
                h.update(block)
            digest.append(h.hexdigest())
    return wall, ru.ru_utime, ru.ru_stime, ru.ru_maxrss * 1024, ru.ru_minflt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stepscope", required=True)
    ap.add_argument("--gen", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--ranks", default="64,256,1024,4096,16384")
    ap.add_argument("--events-per-rank", type=int, default=20000)
    ap.add_argument("--top-events", type=int, default=0)
    ap.add_argument("--modes", default="normal,bounded")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--parts", type=int, default=0)
    ap.add_argument("--cross", action="store_true")
    ap.add_argument("--gen-args", default="",
                    help="more stepscope-gen arguments, e.g. '--pp 1 --tp 8' (no pipeline)")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    sizes = [int(x) for x in a.ranks.split(",")]
    print("machine: %d cores (os.cpu_count), %s; load average %s" % (
        os.cpu_count(), os.uname().release, " ".join("%.2f" % x for x in os.getloadavg())))
    modes = {"normal": [], "bounded": ["--low-memory"]}
    chosen = a.modes.split(",")
    if any(m not in modes for m in chosen):
        sys.exit("--modes: normal and/or bounded")
    os.makedirs(a.dir, exist_ok=True)  # stepscope-gen makes the run's directory, not its parents
    partials = []
    print("| ranks | events/rank | events | gen s | mode | analyze wall s | CPU s (user + sys) "
          "| CPU ns/event | peak RSS MiB | bytes/event | minor faults | rank files read again "
          "(STEPSCOPE_SAY_READS) | load before/after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(sizes):
        epr = a.top_events if a.top_events and i == len(sizes) - 1 else a.events_per_rank
        run = os.path.join(a.dir, "scale-%d-%d%s" % (r, epr, a.gen_args.replace(" ", "")))
        t0 = time.monotonic()
        if not os.path.isdir(run):
            g = subprocess.run([a.gen, run, "--scale", "--ranks", str(r), "--events-per-rank",
                                str(epr), "--threads", "2"] + a.gen_args.split(),
                               check=True, capture_output=True,
                               text=True).stdout
            with open(run + ".truth", "w") as f:
                f.write(g)
        gen_s = time.monotonic() - t0
        with open(run + ".truth") as f:
            events = int([l.split()[1] for l in f if l.startswith("events ")][0])
        digests = []
        for mode in chosen:
            load0 = os.getloadavg()[0]
            said = []
            wall, user, system, rss, faults = child_run(
                [a.stepscope, "analyze", run, "--threads", str(a.threads)] + modes[mode],
                {"STEPSCOPE_SAY_READS": "1"}, said, digests)
            load1 = os.getloadavg()[0]
            cpu = user + system
            print("| %d | %d | %d | %.1f | %s | %.2f | %.2f (%.2f + %.2f) | %.0f | %.0f | %.1f "
                  "| %d | %s | %.2f / %.2f |" % (r, epr, events, gen_s, mode, wall, cpu, user,
                                                 system, cpu * 1e9 / events, rss / 2**20,
                                                 rss / events, faults, reads_said(said), load0,
                                                 load1), flush=True)
        if a.parts:
            partials += measure_partials(a, run, r, digests)
        if not a.keep:
            shutil.rmtree(run)
            os.unlink(run + ".truth")
    if partials:
        print("\n| ranks | parts | rounds | partial bytes/rank | map CPU s (all parts) | largest "
              "part's RSS MiB | cross bytes/rank | cross-out CPU s, RSS MiB | merge wall s | "
              "merge CPU s | merge RSS MiB | rank files the merge read (STEPSCOPE_SAY_READS) | "
              "report = analyze's | load before/after |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for row in partials:
            print(row)


def map_round(a, run, out_dir, cross_dir=None):
    """Every part of the run into out_dir (round 2 with cross_dir), one child each: the
    partials' paths, the CPU of all parts and the largest part's RSS."""
    paths, cpu, rss = [], 0.0, 0
    for k in range(a.parts):
        out = os.path.join(out_dir, "part-%d.ssp" % k)
        argv = [a.stepscope, "analyze", run, "--threads", str(a.threads), "--part",
                "%d/%d" % (k, a.parts), "--partial", out]
        if cross_dir:
            argv += ["--cross", os.path.join(cross_dir, "cross-%d-of-%d.ssx" % (k, a.parts))]
        _, user, system, part_rss, _ = child_run(argv)
        paths.append(out)
        cpu += user + system
        rss = max(rss, part_rss)
    return paths, cpu, rss


def reads_said(said):
    """The STEPSCOPE_SAY_READS line of a child's stderr ("-" when it said none: a stepscope
    without it, or a mode that reads no rank file again)."""
    reads = [l.split(": ", 1)[1] for l in said[0].splitlines() if "read again" in l]
    return reads[0] if reads else "-"


def measure_merge(a, paths, digests):
    """The merge of the partials: (wall s, CPU s, RSS bytes, its STEPSCOPE_SAY_READS line,
    whether its text report equals the analyses' in `digests`)."""
    said, digest = [], []
    wall, user, system, rss, _ = child_run(
        [a.stepscope, "merge", "--threads", str(a.threads)] + paths,
        {"STEPSCOPE_SAY_READS": "1"}, said, digest)
    same = "-" if not digests else "yes" if all(d == digest[0] for d in digests) else "**NO**"
    return wall, user + system, rss, reads_said(said), same


def measure_partials(a, run, ranks, digests):
    """The table's rows of one run: cut into a.parts partials (one child each), then merged;
    with --cross, also the cross files, the second round and its merge; each merge's text
    report compared with the analyses' (their SHA-256 in `digests`)."""
    tmp = tempfile.mkdtemp(prefix="partials-", dir=a.dir)
    row = ("| %d | %d | %s | %.0f | %s | %.0f | %s | %s | %.2f | %.2f | %.0f | %s | %s "
           "| %.2f / %.2f |")
    try:
        load0 = os.getloadavg()[0]
        paths, cpu, rss = map_round(a, run, tmp)
        size = sum(os.path.getsize(p) for p in paths)
        wall, merge_cpu, merge_rss, reads, same = measure_merge(a, paths, digests)
        rows = [row % (ranks, a.parts, "1", size / ranks, "%.2f" % cpu, rss / 2**20, "-", "-",
                       wall, merge_cpu, merge_rss / 2**20, reads, same, load0,
                       os.getloadavg()[0])]
        if not a.cross:
            return rows
        load0 = os.getloadavg()[0]
        cross = os.path.join(tmp, "cross")
        _, user, system, cross_rss, _ = child_run(
            [a.stepscope, "merge", "--threads", str(a.threads), "--cross-out", cross] + paths)
        cross_size = sum(os.path.getsize(os.path.join(cross, f)) for f in os.listdir(cross))
        round2 = os.path.join(tmp, "round2")
        os.makedirs(round2)
        paths2, cpu2, rss2 = map_round(a, run, round2, cross)
        size2 = sum(os.path.getsize(p) for p in paths2)
        wall, merge_cpu, merge_rss, reads, same = measure_merge(a, paths2, digests)
        rows.append(row % (ranks, a.parts, "2", size2 / ranks, "%.2f + %.2f" % (cpu, cpu2),
                           max(rss, rss2) / 2**20, "%.0f" % (cross_size / ranks),
                           "%.2f, %.0f" % (user + system, cross_rss / 2**20), wall, merge_cpu,
                           merge_rss / 2**20, reads, same, load0, os.getloadavg()[0]))
        return rows
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
