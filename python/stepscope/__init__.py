"""stepscope — the stepscope analyzer from Python, for notebooks.

    import stepscope
    r = stepscope.analyze("runs/after")          # the report of `stepscope analyze --json`
    r.json["ranks"][0]["totals"]["exposed_comm_ns"]
    r.ranks(); r.steps(); r.kernels(); r.collectives(); r.idle()   # pandas DataFrames
    ops = stepscope.ops("runs/after")            # every op, one row each
    d = stepscope.diff("runs/before", "runs/after")
    d.json["findings"]; d.frame()
    p = stepscope.replay("runs/after", ["rank=1:no-delay"])   # `stepscope replay`
    p.steps()[["step", "measured_ns", "replayed_ns", "predicted_ns"]]
    stepscope.analyze_partial("runs/big", "p0.ssp", part=(0, 2))   # map (Dask, Ray, srun)
    m = stepscope.merge(["p0.ssp", "p1.ssp"])                      # reduce: a Report

A thin layer over the C library libstepscope_analyzer.so (loaded with
ctypes; found next to this package or through STEPSCOPE_LIB), which does all
the work: the numbers are those of the `stepscope` command. Errors raise
StepscopeError with the library's message. pandas is needed only for the
DataFrames. docs/python.md is the guide."""

from ._lib import StepscopeError, library_path
from .diff import Diff, diff
from .ops import ops
from .partial import analyze_partial, merge, merge_cross
from .replay import Replay, replay
from .report import Report, analyze

__version__ = "0.1.0"
__all__ = ["analyze", "analyze_partial", "merge", "merge_cross", "ops", "diff", "replay", "Report", "Diff", "Replay", "StepscopeError",
           "library_path"]
