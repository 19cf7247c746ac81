"""partial.py — partial analyses and their merge (docs/scale.md "Partials"), the map and
reduce steps of analysing a large run on an existing engine (Dask, Ray, Slurm):

    import dask.bag as db, stepscope
    n = 16
    outs = [f"/shared/parts/{k}.ssp" for k in range(n)]
    db.from_sequence(range(n), npartitions=n).map(
        lambda k: stepscope.analyze_partial("/shared/run", outs[k], part=(k, n))).compute()
    report = stepscope.merge(outs)     # == `stepscope analyze /shared/run --low-memory`

Each part is a contiguous block of the run's rank files in name order; the merge needs every
part 0..n-1 of one cut once; it reads a rank file again only where it needs the rank's events
(pipeline ranks, the critical path's rounds: docs/scale.md "What the merge still reads"), so
those must be where the parts found them, e.g. on shared storage.

A run with pipelines can take a second map round, so that the merge need not read every
pipeline rank's file for its metrics and bubble transfers (docs/scale.md "A second map round"):

    crosses = stepscope.merge_cross(outs, "/shared/cross")   # one file per part, no rank read
    outs2 = [f"/shared/parts2/{k}.ssp" for k in range(n)]
    db.from_sequence(range(n), npartitions=n).map(lambda k: stepscope.analyze_partial(
        "/shared/run", outs2[k], part=(k, n), cross=crosses[k])).compute()
    report = stepscope.merge(outs2)    # the same report"""

import os

from . import _lib
from ._options import analysis_options, report_options
from .report import Report


def analyze_partial(run, out, part=(0, 1), comm_kernels=None, compute_kernels=None, *,
                    cross=None, options=()):
    """Writes the partial analysis of part K of N (part=(K, N)) of the run's rank files to
    `out` (`stepscope analyze RUN --part K/N --partial OUT`) and returns `out`.
    comm_kernels / compute_kernels: as in analyze(); give merge() the same ones.
    cross: the part's cross file from merge_cross() (`--cross FILE`: the second map round)."""
    k, n = part
    argv = analysis_options(None, comm_kernels, compute_kernels, None, None, None, options)
    _lib.analyze_partial(run, k, n, out, argv, cross)
    return os.fspath(out)


def merge_cross(partials, out_dir, comm_kernels=None, compute_kernels=None, *, options=()):
    """Writes the cross-rank inputs of every part's pipeline ranks from the partials of all the
    parts (`stepscope merge --cross-out DIR PARTIALS`; reads no rank file) and returns the
    cross files' paths by part: give part K's to analyze_partial(..., cross=...)."""
    argv = analysis_options(None, comm_kernels, compute_kernels, None, None, None, options)
    paths = [os.fspath(p) for p in partials]
    _lib.merge_cross(paths, out_dir, argv)
    n = len(paths)
    return [os.path.join(os.fspath(out_dir), "cross-%d-of-%d.ssx" % (k, n)) for k in range(n)]


def merge(partials, steps=None, comm_kernels=None, compute_kernels=None, *, rank=None,
          step_range=None, launch_gap_us=None, threads=None, top=None, options=()):
    """The Report of a run from the partials of all its parts, in any order (`stepscope merge
    --json - PARTIALS`): byte for byte the report of `stepscope analyze RUN --low-memory` with
    the same options (those of analyze())."""
    argv = analysis_options(steps, comm_kernels, compute_kernels, step_range, launch_gap_us,
                            threads, options) + report_options(rank, top)
    paths = [os.fspath(p) for p in partials]
    return Report(_lib.merge_json(paths, argv), paths, argv)
