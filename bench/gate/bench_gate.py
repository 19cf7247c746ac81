#!/usr/bin/env python3
"""bench_gate.py — how often the `stepscope diff --fail-on` gate raises a false alarm, and how
often it catches a real regression, with three runs per side (docs/ci.md's job).

Trains the bundled trainer (CPU backend) RUNS times per side, alternating sides (A1 B1 A2 B2
...), and gates `stepscope diff A1 B1 --repeat-a A2 ... --repeat-b B2 ... --fail-on
step_time:+THRESHOLD%`:

- A/A trials: both sides the same configuration. A false alarm is exit 3 (fail); exit 4
  (undecided) and 0 (pass) are not.
- regression trials: side B has an injected delay of MS ms in the optimizer phase of every
  rank in every step (`--debug-delay R:optimizer:MS` for each rank), MS chosen as REGRESSION
  (default 0.20) of the baseline's median step time measured first, so the injected slowdown
  is >= 15 %. A detection is exit 3; the trial also records the slowdown the diff measured.

Prints one line per trial (exit, outcome, step-time change, the runs' machine load from the
traces' `machine` metadata) and the totals: false alarms, detections, undecided counts, with
the machine's CPU count and load average before and after. Needs a built tree:
  python3 bench/gate/bench_gate.py --build build --trials 10 --runs 3
Run it on a quiet machine: the trainer's ranks share the CPU cores.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

CONFIG = ["--backend", "cpu", "--quiet"]


def loadavg():
    try:
        return float(open("/proc/loadavg").read().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")


def train(build, out, steps, extra=()):
    shutil.rmtree(out, ignore_errors=True)
    cmd = [os.path.join(build, "trainer", "stepscope-train")] + CONFIG + LAYOUT + \
        ["--steps", str(steps), "--trace", out] + list(extra)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def median_step_ms(build, run, tmp):
    rep = os.path.join(tmp, "baseline.json")
    subprocess.run([os.path.join(build, "analyzer", "stepscope"), "analyze", run, "--json", rep],
                   check=True, stdout=subprocess.DEVNULL)
    return json.load(open(rep))["run"]["step_time_ns"] / 1e6


def trial(build, tmp, runs, steps, threshold, delay_ms):
    """One gate over RUNS runs per side; delay_ms 0: A/A. Returns (exit, diff JSON)."""
    extra = []
    if delay_ms:
        for rank in range(int(LAYOUT[1])):
            extra += ["--debug-delay", "%d:optimizer:%d" % (rank, delay_ms)]
    paths = {"a": [], "b": []}
    for i in range(runs):
        for side in ("a", "b"):
            out = os.path.join(tmp, "%s%d" % (side, i + 1))
            train(build, out, steps, extra if side == "b" else ())
            paths[side].append(out)
    js = os.path.join(tmp, "diff.json")
    cmd = [os.path.join(build, "analyzer", "stepscope"), "diff", paths["a"][0], paths["b"][0],
           "--fail-on", "step_time:+%g%%" % threshold, "--json", js, "--quiet"]
    for side in ("a", "b"):
        for p in paths[side][1:]:
            cmd += ["--repeat-" + side, p]
    rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    return rc, json.load(open(js)) if rc in (0, 3, 4) else None


OUTCOME = {0: "pass", 3: "FAIL", 4: "undecided"}
LAYOUT = ["--world", "2", "--dp", "2"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--trials", type=int, default=10, help="A/A trials and regression trials, each")
    ap.add_argument("--runs", type=int, default=3, help="runs per side")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--world", type=int, default=2, help="data-parallel ranks (processes)")
    ap.add_argument("--threshold", type=float, default=5.0, help="step_time threshold, percent")
    ap.add_argument("--regression", type=float, default=0.20,
                    help="injected delay as a fraction of the baseline step time")
    a = ap.parse_args()
    LAYOUT[:] = ["--world", str(a.world), "--dp", str(a.world)]
    tmp = tempfile.mkdtemp(prefix="ss-bench-gate-")
    load0 = loadavg()
    try:
        train(a.build, os.path.join(tmp, "base"), a.steps)
        base_ms = median_step_ms(a.build, os.path.join(tmp, "base"), tmp)
        delay = max(1, int(round(a.regression * base_ms)))
        print("machine: %d CPUs, load average %.2f; world %d, baseline step %.2f ms, injected "
              "delay %d ms (%.0f %%), %d runs per side, %d steps, gate step_time:+%g%%"
              % (os.cpu_count() or 0, load0, a.world, base_ms, delay, 100.0 * delay / base_ms,
                 a.runs, a.steps, a.threshold))
        counts = {"aa": {}, "reg": {}}
        for kind, ms in (("aa", 0), ("reg", delay)):
            for t in range(a.trials):
                rc, d = trial(a.build, tmp, a.runs, a.steps, a.threshold, ms)
                counts[kind][rc] = counts[kind].get(rc, 0) + 1
                if d is None:
                    print("%-3s %2d: exit %d (error)" % (kind, t + 1, rc))
                    continue
                st = d["headline"]["step_time"]
                ld = d["load"]
                signs = [s for s, on in (
                    ("queued idle", abs((ld["queued_idle_a"] or 0) - (ld["queued_idle_b"] or 0)) > 0.05
                     or abs((ld["queued_idle_a_p75"] or 0) - (ld["queued_idle_b_p75"] or 0)) > 0.05),
                    ("kernel stretch", ld["kernel_stretch"] is not None
                     and not 1 / 1.3 <= ld["kernel_stretch"] <= 1.3),
                    ("machine load", ld["machine_differs"])) if on]
                runs_pct = " ".join("%+.0f" % (100.0 * (v / st["a"]["median"] - 1))
                                    for v in st["a"]["run_medians"] + st["b"]["run_medians"])
                print("%-3s %2d: exit %d %-9s step_time %+6.1f %% (%s, why %s; runs' medians vs A "
                      "%%: %s; t-test p %s); load differs: %s; "
                      "queued idle %.1f/%.1f %%, stretch %s, machine load A %s B %s; now %.1f"
                      % (kind, t + 1, rc, OUTCOME.get(rc, "?"), 100.0 * (st["rel_change"] or 0),
                         st["verdict"], st["why"], runs_pct,
                         "%.3g" % st["run_p_value"] if st.get("run_p_value") is not None else "-",
                         ", ".join(signs) if signs else "no",
                         100.0 * (ld["queued_idle_a"] or 0), 100.0 * (ld["queued_idle_b"] or 0),
                         "%.2f" % ld["kernel_stretch"] if ld["kernel_stretch"] else "-",
                         ld["machine_a"], ld["machine_b"], loadavg()))
                sys.stdout.flush()
        n = a.trials
        aa, reg = counts["aa"], counts["reg"]
        print("A/A: false alarms (exit 3) %d of %d (%.0f %%); undecided %d, pass %d"
              % (aa.get(3, 0), n, 100.0 * aa.get(3, 0) / n, aa.get(4, 0), aa.get(0, 0)))
        print("regression +%.0f %%: detected (exit 3) %d of %d (%.0f %%); undecided %d, pass %d"
              % (100.0 * delay / base_ms, reg.get(3, 0), n, 100.0 * reg.get(3, 0) / n,
                 reg.get(4, 0), reg.get(0, 0)))
        print("machine: %d CPUs, load average %.2f at the start, %.2f at the end"
              % (os.cpu_count() or 0, load0, loadavg()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
