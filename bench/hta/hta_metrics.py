#!/usr/bin/env python3
"""hta_metrics.py TRACE_DIR [--json OUT] — runs Holistic Trace Analysis (HTA,
PyPI HolisticTraceAnalysis) on a directory of Kineto traces: temporal
breakdown, communication/computation overlap and idle time breakdown for
every rank, and prints them (or writes them as JSON). Run with the venv that
has HTA installed (e.g. /work/main/.venv-hta/bin/python)."""
import json
import sys
import warnings

warnings.filterwarnings("ignore")
import logging  # noqa: E402

logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis  # noqa: E402


def main():
    d = sys.argv[1]
    out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    ta = TraceAnalysis(trace_dir=d)
    ranks = sorted(ta.t.traces.keys())
    tb = ta.get_temporal_breakdown(visualize=False)
    ov = ta.get_comm_comp_overlap(visualize=False)
    idle, _ = ta.get_idle_time_breakdown(ranks=ranks, visualize=False)
    res = {"temporal": tb.to_dict(orient="records"), "overlap": ov.to_dict(orient="records"),
           "idle": idle.to_dict(orient="records")}
    if out:
        json.dump(res, open(out, "w"), default=float, indent=1)
    else:
        print(json.dumps(res, default=float, indent=1))


if __name__ == "__main__":
    main()
