"""diff.py — stepscope.diff(): the comparison of two runs (`stepscope diff
--json`, docs/diff.md) as a dict, with its headline metrics as a DataFrame
(one row per metric: both runs' medians and spreads, the change, and the
noise test's verdict) and its per-kernel and per-collective tables."""

import json as _json

from . import _lib
from ._frames import flatten, frame
from ._options import analysis_options, steps_option


# The columns of its tables that can be empty, as the diff's JSON names them
# (docs/diff.md; the tests check them against non-empty tables).
KERNEL_COLUMNS = ["name", "comm", "a.count_per_step", "a.time_per_step_ns", "a.mean_ns",
                  "b.count_per_step", "b.time_per_step_ns", "b.mean_ns",
                  "time_change_per_step_ns"]
COLLECTIVE_COLUMNS = ["op", "group", "bytes", "a.count_per_step", "a.transfer_mean_ns",
                      "a.busbw_gbps", "a.wait_per_step_ns", "b.count_per_step",
                      "b.transfer_mean_ns", "b.busbw_gbps", "b.wait_per_step_ns"]


class Diff:
    """The diff of runs A and B. `json` is the diff as a dict; `text` its
    JSON text."""

    def __init__(self, text, run_a, run_b, options):
        self.text = text
        self.json = _json.loads(text)
        self.run_a, self.run_b = run_a, run_b
        self.options = list(options)

    def __repr__(self):
        return "<stepscope.Diff %s -> %s: %s>" % (self.run_a, self.run_b,
                                                  "; ".join(self.json.get("findings", [])))

    def frame(self):
        """One row per headline metric (step_time, compute, comm,
        exposed_comm, overlap_ratio, exposed_mem, idle, bubble_ratio, mfu),
        indexed by metric: unit, better, a.median ... b.values, abs_change,
        rel_change, noise, verdict, why, p_value, min_effect."""
        rows = []
        for name, m in self.json["headline"].items():
            row = {"metric": name}
            flatten(m, "", row)
            rows.append(row)
        f = frame(rows, ["metric"])
        return f.set_index("metric") if len(f) else f

    def ranks(self):
        """One row per rank and metric of the per-rank comparison."""
        rows = []
        for r in self.json.get("ranks", []):
            for name, m in r.get("metrics", {}).items():
                row = {"rank": r["rank"], "in_a": r.get("in_a"), "in_b": r.get("in_b"),
                       "metric": name}
                flatten(m, "", row)
                rows.append(row)
        return frame(rows, ["rank", "metric"])

    def steps(self):
        """One row per step index: each run's step number and time."""
        return frame([flatten(s) for s in self.json.get("steps", [])], ["index"])

    def kernels(self):
        """One row per kernel name: per-step count and time in A and B."""
        return frame([flatten(k) for k in self.json.get("kernels", [])], KERNEL_COLUMNS)

    def collectives(self):
        """One row per (op, group, bytes): per-step count, transfer, bus
        bandwidth and wait in A and B."""
        return frame([flatten(c) for c in self.json.get("collectives", [])], COLLECTIVE_COLUMNS)


def diff(run_a, run_b, steps=None, comm_kernels=None, compute_kernels=None, *, steps_b=None,
         step_range=None, launch_gap_us=None, threads=None, repeats_a=(), repeats_b=(),
         run_noise=None, options=()):
    """Loads, analyses and compares two runs as `stepscope diff A B` does
    (same analysis options for both; steps_b: a different step range for B;
    repeats_a / repeats_b: more runs of A's / B's configuration, as
    --repeat-a / --repeat-b: their steps are pooled and a t-test over the
    runs' medians asks whether the sides lie apart by more than one side's
    runs do; run_noise: the between-run noise floor
    in percent, as --run-noise, default 30 with one run per side) and returns
    the Diff. Raises StepscopeError on bad input."""
    argv = analysis_options(steps, comm_kernels, compute_kernels, step_range, launch_gap_us,
                            threads, options)
    sb = steps_option(steps_b)
    if sb is not None:
        argv += ["--steps-b", sb]
    for flag, runs in (("--repeat-a", repeats_a), ("--repeat-b", repeats_b)):
        if isinstance(runs, (str, bytes)) or hasattr(runs, "__fspath__"):
            runs = [runs]
        for run in runs:
            argv += [flag, str(run)]
    if run_noise is not None:
        argv += ["--run-noise", str(run_noise)]
    return Diff(_lib.diff_json(run_a, run_b, argv), run_a, run_b, argv)
