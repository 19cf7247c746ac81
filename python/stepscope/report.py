"""report.py — stepscope.analyze(): the analyzer's report of a run
(`stepscope analyze --json`, docs/report-schema.md) as a dict, with pandas
views of its tables. Every number comes from the C library's JSON; the
DataFrames only reshape it (one row per rank, per rank and step, per kernel,
per collective instance, per rank and stream)."""

import json as _json

from . import _lib
from ._frames import flatten, frame
from ._options import analysis_options, report_options


# The columns of the tables that can be empty (a run without collectives or
# kernels), as the report's JSON names them (docs/report-schema.md; the tests
# check them against non-empty tables).
KERNEL_COLUMNS = ["name", "count", "total_ns", "mean_ns", "min_ns", "max_ns", "share", "comm"]
COLLECTIVE_COLUMNS = ["op", "group", "comm_id", "seq", "bytes", "comm_size", "present", "p2p",
                      "pipeline", "start_ns", "end_ns", "skew_ns", "transfer_ns", "max_wait_ns",
                      "total_wait_ns", "schedule_wait_ns", "caused_wait_ns", "complete",
                      "last_rank", "algbw_gbps", "busbw_gbps"]
COLLECTIVE_SUMMARY_COLUMNS = ["op", "group", "bytes", "count", "transfer_total_ns",
                              "transfer_mean_ns", "transfer_min_ns", "transfer_max_ns",
                              "skew_mean_ns", "skew_max_ns", "wait_total_ns", "algbw_gbps",
                              "busbw_gbps"]
MODULE_COLUMNS = ["module", "depth", "parent", "name", "calls", "time_ns", "self_ns", "flops",
                  "self_flops", "share"]
MEMORY_COLUMNS = ["rank", "device", "events", "peak_allocated_bytes", "peak_time_ns",
                  "peak_reserved_bytes", "live_at_peak.count", "live_at_peak.bytes",
                  "live_at_peak.bytes_before_trace"]


class Report:
    """The report of one run. `json` is the report as a dict (the schema of
    `stepscope analyze --json`); `text` the JSON text itself."""

    def __init__(self, text, run, options):
        self.text = text
        self.json = _json.loads(text)
        self.run = run
        self.options = list(options)

    def __repr__(self):
        r = self.json.get("run", {})
        return "<stepscope.Report %s: %d ranks, %d steps>" % (
            self.run, len(self.json.get("ranks", [])), len(r.get("steps", [])))

    def ranks(self):
        """One row per analysed rank: its identity and counts, the metrics of
        its totals window (span_ns, compute_ns, exposed_comm_ns,
        overlap_ratio, idle_breakdown.*, launch.* ...) and its collective
        counts (collectives.*)."""
        rows = []
        for r in self.json["ranks"]:
            row = flatten(r, skip=("totals", "steps", "idle_breakdown", "collectives"))
            flatten(r.get("totals", {}), "", row, skip=("step",))
            flatten(r.get("collectives", {}), "collectives.", row)
            rows.append(row)
        return frame(rows, ["rank"])

    def steps(self):
        """One row per rank and analysed step: that step window's metrics."""
        rows = []
        for r in self.json["ranks"]:
            for s in r.get("steps", []):
                row = {"rank": r["rank"]}
                flatten(s, "", row)
                rows.append(row)
        return frame(rows, ["rank", "step"])

    def run_steps(self):
        """One row per step of the run (across ranks): time, MFU, HFU."""
        return frame([flatten(s) for s in self.json["run"].get("steps", [])], ["step"])

    def kernels(self):
        """The kernel table: one row per kernel name, by total time."""
        return frame([flatten(k) for k in self.json["kernels"]["rows"]], KERNEL_COLUMNS)

    def collectives(self):
        """One row per collective instance (op, group, comm_id, seq, skew,
        transfer, waits, bandwidths, last rank)."""
        return frame([flatten(c) for c in self.json["collectives"]["instances"]],
                     COLLECTIVE_COLUMNS)

    def collective_summary(self):
        """One row per (op, group, bytes): counts, transfer, skew, bandwidth."""
        return frame([flatten(c) for c in self.json["collectives"]["summary"]],
                     COLLECTIVE_SUMMARY_COLUMNS)

    def op_perf(self, peak=None):
        """The PyTorch op table of `stepscope ops` (docs/ops.md): one row per op name and input
        shapes with count, kernels, time_ns, flops, bytes, tflops_per_s, gb_per_s, intensity,
        pct_of_peak and bound (family and dtype: the model used; None without one). The run is
        read again with its ops' input shapes, with this report's options; `peak` gives
        measured ceilings as `--peak` does ("bf16=780T,bw=4.3T"). The table's totals (MFU from
        op FLOPs, ceilings...) are in the frame's attrs["ops"]."""
        doc = _json.loads(_lib.op_perf_json(self.run, self.options, peak))
        rows = [flatten(r, skip=("inputs",)) for r in doc["rows"]]
        for row, r in zip(rows, doc["rows"]):
            row["inputs"] = r["inputs"]
        df = frame(rows, ["op", "shapes"])
        df.attrs["ops"] = {k: v for k, v in doc.items() if k != "rows"}
        return df

    def op_modules(self):
        """The module tree of `stepscope ops --by module` (docs/ops.md): one row per nn.Module
        path ("Attention_0/Linear_1"), a module before its children, with its depth, parent
        ("" at the top) and name (the path's last part), calls, time_ns (its ops' time, its
        children's included), self_ns (its own ops'), flops and self_flops, and share (time_ns
        of the op table's total). The run is read again with its module events (the profiler's
        with_modules=True), with this report's options; the totals (module_events,
        time_total_ns, no_module_ns: backward, optimizer, loss..., flops_total,
        no_module_flops, time: "device" or "cpu_op") are in attrs["modules"]."""
        doc = _json.loads(_lib.op_modules_json(self.run, self.options))
        total = doc["time_total_ns"]
        rows = []
        for r in doc["rows"]:
            parent, _, name = r["module"].rpartition("/")
            row = {"module": r["module"], "depth": r["depth"], "parent": parent,
                   "name": name}
            row.update((k, v) for k, v in r.items() if k not in row)
            row["share"] = r["time_ns"] / total if total else 0.0
            rows.append(row)
        df = frame(rows, MODULE_COLUMNS)
        df.attrs["modules"] = {k: v for k, v in doc.items() if k != "rows"}
        return df

    def _memory_doc(self, series=False):
        return _json.loads(_lib.op_memory_json(self.run, self.options, series))

    def memory(self):
        """Memory over time, per device (`stepscope ops --memory`, docs/ops.md; the profiler's
        profile_memory=True): one row per rank and device ("cpu", "cuda:0") with its events,
        peak_allocated_bytes, peak_time_ns, peak_reserved_bytes and what was live at the peak
        (live_at_peak.count, .bytes, .bytes_before_trace). The peak of each step is in
        memory_steps(), the largest allocations live at the peak in memory_live(); the whole
        document in attrs["memory"]."""
        doc = self._memory_doc()
        rows = []
        for d in doc["devices"]:
            row = flatten(d, skip=("steps", "live_at_peak"))
            flatten(d["live_at_peak"], "live_at_peak.", row, skip=("largest",))
            rows.append(row)
        df = frame(rows, MEMORY_COLUMNS)
        df.attrs["memory"] = doc
        return df

    def memory_steps(self):
        """The allocated peak of each analysed step, one row per rank, device and step (the
        bytes allocated when the step began count: memory held across steps is in each)."""
        rows = [{"rank": d["rank"], "device": d["device"], "step": s["step"],
                 "peak_allocated_bytes": s["peak_allocated_bytes"]}
                for d in self._memory_doc()["devices"] for s in d["steps"]]
        return frame(rows, ["rank", "device", "step", "peak_allocated_bytes"])

    def memory_timeline(self):
        """Memory over time, the counter series (`stepscope ops --memory --series`): one row
        per memory event of each rank and device, in time order: rank, device, time_ns (from
        the run's start, as the report's times), allocated_bytes and reserved_bytes after it
        (reserved: CUDA's caching allocator; 0 on the CPU)."""
        rows = []
        for d in self._memory_doc(series=True)["devices"]:
            s = d["series"]
            rows += [{"rank": d["rank"], "device": d["device"], "time_ns": t,
                      "allocated_bytes": a, "reserved_bytes": r}
                     for t, a, r in zip(s["time_ns"], s["allocated_bytes"], s["reserved_bytes"])]
        return frame(rows, ["rank", "device", "time_ns", "allocated_bytes", "reserved_bytes"])

    def memory_live(self):
        """The largest allocations live at each device's peak (at most 10 a device), largest
        first: rank, device, bytes, op (the CPU op that allocated it, "" none), time_ns."""
        rows = [dict({"rank": d["rank"], "device": d["device"]}, **a)
                for d in self._memory_doc()["devices"] for a in d["live_at_peak"]["largest"]]
        return frame(rows, ["rank", "device", "bytes", "op", "time_ns"])

    def idle(self):
        """One row per rank and device stream: busy time and idle time by
        cause (host_wait_ns, launch_gap_ns, sync_wait_ns, other_ns, and
        data_loading_ns where present). The device-level split of each rank
        is in ranks() as idle_breakdown.*."""
        rows = []
        for r in self.json["ranks"]:
            for s in r.get("idle_breakdown", {}).get("streams", []):
                row = {"rank": r["rank"]}
                row.update(flatten(s, skip=("idle",)))
                row.update(s.get("idle", {}))
                rows.append(row)
        return frame(rows, ["rank", "stream"])

    def critical_path(self):
        """One row per step: its critical path (docs/metrics.md "Critical path") -- the rank
        whose window is the step time (end_rank), step_time_ns and length_ns (equal),
        parts.<kind>_ns (compute, communication, copy, host, idle), idle.<cause>_ns,
        host_untraced_ns, in_medians, the path time on each rank (rank.<R>_ns) and its top op
        (top_op, top_op_rank, top_op_kind, top_op_share); the step's top ops as a list
        (top_ops). The run's summary is self.json["critical_path"]."""
        rows = []
        cp = self.json.get("critical_path") or {}
        for s in cp.get("steps", []):
            row = flatten(s, skip=("by_rank", "top_ops"))
            for r in s.get("by_rank", []):
                row["rank.%d_ns" % r["rank"]] = r["ns"]
            top = s.get("top_ops") or [{}]
            row["top_op"] = top[0].get("name")
            row["top_op_rank"] = top[0].get("rank")
            row["top_op_kind"] = top[0].get("kind")
            row["top_op_share"] = top[0].get("share")
            row["top_ops"] = s.get("top_ops", [])
            rows.append(row)
        return frame(rows, ["step"])


def analyze(run, steps=None, comm_kernels=None, compute_kernels=None, *, rank=None,
            step_range=None, launch_gap_us=None, threads=None, top=None, low_memory=False,
            options=()):
    """Loads and analyses a run (a run directory of rank-*.trace.zst or
    PyTorch rank-*.json[.gz] files, or one such file) as `stepscope analyze`
    does, and returns its Report.

    steps: an int, "A:B", (A, B) (None for an open end) or a range.
    comm_kernels / compute_kernels: regular expressions (str or list) passed
    as --comm-kernel / --compute-kernel. rank, step_range, launch_gap_us,
    threads, top: --rank, --step-range, --launch-gap-us, --threads, --top.
    low_memory: --low-memory, the bounded mode for runs of thousands of ranks
    (docs/scale.md): each rank's events are read, summarised and dropped, so
    memory does not grow with the run's events; the report is the same,
    byte for byte.
    options: further command-line options, as strings.
    Raises StepscopeError (with the library's message) on bad input."""
    argv = analysis_options(steps, comm_kernels, compute_kernels, step_range, launch_gap_us,
                            threads, options) + report_options(rank, top)
    if low_memory:
        argv.append("--low-memory")
    return Report(_lib.analyze_json(run, argv), run, argv)
