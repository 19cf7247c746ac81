"""replay.py — stepscope.replay(): `stepscope replay` from Python (docs/replay.md). Each step
of a run re-simulated over its dependency graph by the C library (ss_api_replay), plain and
with what-if edits; the result holds the JSON and a DataFrame of the steps (measured, plain
replay, predicted)."""

import json as _json

from . import _lib
from ._frames import flatten, frame
from ._options import analysis_options


class Replay:
    """The replay of a run: .json is `stepscope replay --json`'s document (steps, the plain
    replay's fidelity under "replay", the edits' summary under "what_if")."""

    def __init__(self, text, run, edits):
        self.json = _json.loads(text)
        self.run = run
        self.edits = list(edits)

    @property
    def median_error(self):
        """The plain replay's median |predicted - measured| / measured over steady steps."""
        return self.json["replay"]["median_error"]

    @property
    def worst_error(self):
        return self.json["replay"]["worst_error"]

    def steps(self):
        """One row per step: step, in_medians, measured_ns, replayed_ns (no edit), error,
        predicted_ns (with the edits), end_rank_index, path.<kind>_ns (the predicted critical
        path: compute, communication, copy, host, device_idle, host_gaps)."""
        return frame([flatten(s) for s in self.json["steps"]], ["step"])

    def __repr__(self):
        r = self.json["replay"]
        return "<stepscope.Replay %s: %d steps, median error %.2f%%, edits %r>" % (
            self.run, len(self.json["steps"]), 100 * r["median_error"], self.edits)


def replay(run, edits=(), steps=None, comm_kernels=None, compute_kernels=None, *,
           step_range=None, launch_gap_us=None, threads=None, options=()):
    """Replays a run (as `stepscope replay RUN --what-if EDIT ...`) and returns a Replay.

    edits: one EDIT (str) or a list of them, in the grammar of `stepscope replay --help`
    ("rank=1:no-delay", "kind=comm:scale=0.5", ...); none: the plain replay. The other
    arguments are the analysis options of stepscope.analyze(). Raises StepscopeError with the
    command's message on a bad edit or run."""
    if isinstance(edits, str):
        edits = [edits]
    edits = list(edits)
    argv = analysis_options(steps, comm_kernels, compute_kernels, step_range, launch_gap_us,
                            threads, options)
    return Replay(_lib.replay_json(run, argv, edits), run, edits)
