"""test_partial_dask.py — the map step of a partial analysis on an existing engine (issue 35
item 3b, docs/scale.md "Partials"): `stepscope.analyze_partial` mapped over the parts of a
generated pipeline run with dask.bag on dask's multiprocessing scheduler (worker processes
of this machine), then `stepscope.merge` of the partials in another order: its report is byte
for byte `stepscope analyze RUN --low-memory --json -` of the one machine. dask comes with
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
