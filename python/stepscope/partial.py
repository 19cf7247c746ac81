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
those must be where the parts found them, e.g. on shared storage."""

import os

from . import _lib
from ._options import analysis_options, report_options
from .report import Report


def analyze_partial(run, out, part=(0, 1), comm_kernels=None, compute_kernels=None, *,
                    options=()):
    """Writes the partial analysis of part K of N (part=(K, N)) of the run's rank files to
    `out` (`stepscope analyze RUN --part K/N --partial OUT`) and returns `out`.
    comm_kernels / compute_kernels: as in analyze(); give merge() the same ones."""
    k, n = part
    argv = analysis_options(None, comm_kernels, compute_kernels, None, None, None, options)
    _lib.analyze_partial(run, k, n, out, argv)
    return os.fspath(out)


def merge(partials, steps=None, comm_kernels=None, compute_kernels=None, *, rank=None,
          step_range=None, launch_gap_us=None, threads=None, top=None, options=()):
    """The Report of a run from the partials of all its parts, in any order (`stepscope merge
    --json - PARTIALS`): byte for byte the report of `stepscope analyze RUN --low-memory` with
    the same options (those of analyze())."""
    argv = analysis_options(steps, comm_kernels, compute_kernels, step_range, launch_gap_us,
                            threads, options) + report_options(rank, top)
    paths = [os.fspath(p) for p in partials]
    return Report(_lib.merge_json(paths, argv), paths, argv)
