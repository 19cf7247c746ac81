"""test_partial_dask.py — the map step of a partial analysis on an existing engine (issue 35
item 3b, docs/scale.md "Partials"): `stepscope.analyze_partial` mapped over the parts of a
generated pipeline run with dask.bag on dask's multiprocessing scheduler (worker processes
of this machine), then `stepscope.merge` of the partials in another order: its report is byte
for byte `stepscope analyze RUN --low-memory --json -` of the one machine; the same with a
second map round of a run with pipelines (stepscope.merge_cross). dask comes with
the test environment (scripts/test.sh installs it with pandas and pytest): its absence is a
failure that says how to install it, not a skip."""

import os
import subprocess

import pytest

from conftest import ROOT

import stepscope


def write_part(k, run, outs, n):
    """One task of the bag: part k of n; returns the process that wrote it."""
    import stepscope as ss  # imported in the worker process
    ss.analyze_partial(run, outs[k], part=(k, n))
    return os.getpid()


def test_dask_partials_merge_to_the_one_machine_report(cli, gen, tmp_path):
    try:
        import dask.bag as db
    except ImportError:
        pytest.fail("dask is missing from the test environment: build/pyenv/bin/pip install dask "
                    "(scripts/test.sh installs it)")
    run = str(tmp_path / "run")
    subprocess.run([gen, run, "--scale", "--ranks", "16", "--events-per-rank", "1500", "--tp",
                    "2", "--pp", "4", "--stragglers", "1"], check=True,
                   stdout=subprocess.DEVNULL)
    n = 5  # uneven blocks of the 16 rank files
    outs = [str(tmp_path / ("part-%d.ssp" % k)) for k in range(n)]
    # the spawned workers import the package from the source tree, as this process does
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(ROOT, "python")] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    pids = db.from_sequence(range(n), npartitions=n).map(write_part, run, outs, n).compute(
        scheduler="processes", num_workers=2)
    assert len(pids) == n and all(os.path.getsize(o) > 0 for o in outs)
    assert os.getpid() not in pids, "the parts were not analysed in worker processes"
    merged = stepscope.merge(list(reversed(outs)))
    whole = subprocess.run([cli, "analyze", run, "--low-memory", "--json", "-"], check=True,
                           stdout=subprocess.PIPE).stdout.decode()
    assert merged.text == whole
    assert len(merged.json["ranks"]) == 16


def write_part_round2(k, run, outs, n, crosses):
    """One task of the second round's bag: part k of n with its cross file."""
    import stepscope as ss  # imported in the worker process
    ss.analyze_partial(run, outs[k], part=(k, n), cross=crosses[k])
    return os.getpid()


def test_dask_two_rounds_of_a_pipeline_run(cli, gen, tmp_path):
    """A run with pipelines in two map rounds on dask (docs/scale.md "A second map round"):
    the partials, stepscope.merge_cross (the cross files, one per part), the second round
    mapped with dask.bag on worker processes, stepscope.merge of its partials: the one
    machine's report byte for byte, and no rank file read for the pipeline ranks' metrics or
    bubble transfers."""
    import dask.bag as db
    run = str(tmp_path / "run")
    subprocess.run([gen, run, "--scale", "--ranks", "16", "--events-per-rank", "1500", "--tp",
                    "2", "--pp", "4", "--stragglers", "1"], check=True,
                   stdout=subprocess.DEVNULL)
    n = 3
    first = [str(tmp_path / ("r1-%d.ssp" % k)) for k in range(n)]
    second = [str(tmp_path / ("r2-%d.ssp" % k)) for k in range(n)]
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(ROOT, "python")] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    db.from_sequence(range(n), npartitions=n).map(write_part, run, first, n).compute(
        scheduler="processes", num_workers=2)
    crosses = stepscope.merge_cross(first, str(tmp_path / "cross"))
    assert [os.path.basename(c) for c in crosses] == ["cross-%d-of-3.ssx" % k for k in range(n)]
    pids = db.from_sequence(range(n), npartitions=n).map(
        write_part_round2, run, second, n, crosses).compute(scheduler="processes", num_workers=2)
    assert os.getpid() not in pids, "the second round did not run in worker processes"
    whole = subprocess.run([cli, "analyze", run, "--json", "-"], check=True,
                           stdout=subprocess.PIPE).stdout.decode()
    assert stepscope.merge(second).text == whole
    said = subprocess.run([cli, "merge", *second, "--quiet", "--json", os.devnull],
                          env=dict(os.environ, STEPSCOPE_SAY_READS="1"), check=True,
                          stderr=subprocess.PIPE).stderr.decode()
    assert "for the per-rank metrics" not in said and "for the bubble's transfers" not in said
    with pytest.raises(stepscope.StepscopeError, match="is made for part 1 of 3, not 0 of 3"):
        stepscope.analyze_partial(run, str(tmp_path / "x.ssp"), part=(0, n), cross=crosses[1])


def test_merge_refuses_a_missing_part(tmp_path, gen):
    run = str(tmp_path / "run")
    subprocess.run([gen, run, "--ranks", "4", "--steps", "2", "--ops", "20"], check=True,
                   stdout=subprocess.DEVNULL)
    outs = [stepscope.analyze_partial(run, str(tmp_path / ("%d.ssp" % k)), part=(k, 3))
            for k in range(3)]
    with pytest.raises(stepscope.StepscopeError, match="part 1 of 3 is missing"):
        stepscope.merge([outs[0], outs[2]])


def test_analyze_low_memory_is_the_commands_bounded_report(cli, gen, tmp_path):
    """stepscope.analyze(run, low_memory=True) is `analyze --low-memory --json -` byte for byte:
    the bounded mode from Python, and the normal report byte for byte (critical path
    included: nothing is left out)."""
    run = str(tmp_path / "run")
    subprocess.run([gen, run, "--scale", "--ranks", "8", "--events-per-rank", "1500", "--tp",
                    "2", "--pp", "2", "--stragglers", "1"], check=True,
                   stdout=subprocess.DEVNULL)
    bounded = stepscope.analyze(run, low_memory=True)
    whole = subprocess.run([cli, "analyze", run, "--low-memory", "--json", "-"], check=True,
                           stdout=subprocess.PIPE).stdout.decode()
    assert bounded.text == whole
    assert "left_out" not in bounded.json, "the bounded report leaves something out"
    assert bounded.json["critical_path"], "the bounded report has no critical path"
    normal = stepscope.analyze(run)
    assert normal.text == bounded.text
    with pytest.raises(stepscope.StepscopeError, match="unknown option --low-memory"):
        stepscope.diff(run, run, options=["--low-memory"])
