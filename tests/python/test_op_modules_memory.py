"""test_op_modules_memory.py — Report.op_modules(), memory(), memory_steps(), memory_live() and
memory_timeline() (docs/ops.md) against `stepscope ops --by module --json -` and `stepscope ops
--memory [--series] --json -`:
the library's JSON byte for byte the command's, the same rows and values in the DataFrames, and
the tables' own sums, on the torch CPU traces committed under tests/data/kineto/ops (made with
with_modules and profile_memory) and a committed Kineto trace made without either."""

import gzip
import json
import os

import pytest

import stepscope
from stepscope import _lib
from conftest import ROOT, run_cli

TRACES = [os.path.join(ROOT, "tests", "data", "kineto", "ops", n + ".pt.trace.json.gz")
          for n in ("mlp", "conv", "attention")]
PLAIN_KINETO = os.path.join(ROOT, "tests", "kineto", "traces", "cpu_ddp")


@pytest.mark.parametrize("path", TRACES, ids=os.path.basename)
def test_op_modules_is_the_command_table(cli, path):
    rc, out, err = run_cli(cli, "ops", path, "--by", "module", "--json", "-")
    assert rc == 0, err
    assert _lib.op_modules_json(path, []) == out
    want = json.loads(out)
    df = stepscope.analyze(path).op_modules()
    assert want["module_events"] > 0 and len(df) == len(want["rows"]) > 0
    for got, row in zip(df.to_dict("records"), want["rows"]):
        for k, v in row.items():
            assert got[k] == v, (k, got[k], v)
    assert df.attrs["modules"]["time_total_ns"] == want["time_total_ns"]
    assert df.attrs["modules"]["no_module_ns"] == want["no_module_ns"]


@pytest.mark.parametrize("path", TRACES, ids=os.path.basename)
def test_op_modules_tree_adds_up(path):
    report = stepscope.analyze(path)
    df = report.op_modules()
    totals = df.attrs["modules"]
    paths = set(df["module"])
    for r in df.itertuples():
        assert r.depth == r.module.count("/")
        assert (r.parent == "") == (r.depth == 0)
        assert r.parent == "" or r.parent in paths
        assert r.name == r.module.split("/")[-1]
        children = df[df["parent"] == r.module]
        assert r.time_ns == r.self_ns + children["time_ns"].sum()
        assert r.flops == pytest.approx(r.self_flops + children["flops"].sum(), rel=1e-12)
    total = totals["time_total_ns"]
    assert df[df["depth"] == 0]["time_ns"].sum() + totals["no_module_ns"] == total
    assert df["self_ns"].sum() + totals["no_module_ns"] == total
    assert df["share"].tolist() == [t / total for t in df["time_ns"]]
    # the op table's time: the module tree splits exactly the time of `stepscope ops`
    assert report.op_perf()["time_ns"].sum() == total


def test_op_modules_options_pass_on(cli):
    path = TRACES[2]
    rc, out, err = run_cli(cli, "ops", path, "--by", "module", "--steps", "3", "--json", "-")
    assert rc == 0, err
    assert _lib.op_modules_json(path, ["--steps", "3"]) == out
    one = stepscope.analyze(path, steps=3).op_modules()
    both = stepscope.analyze(path).op_modules()
    assert (one["calls"] * 2 == both["calls"]).all()


def test_op_modules_without_module_events():
    df = stepscope.analyze(PLAIN_KINETO).op_modules()
    assert df.attrs["modules"]["module_events"] == 0
    assert len(df) == 0 and "time_ns" in df.columns


@pytest.mark.parametrize("path", TRACES, ids=os.path.basename)
def test_memory_is_the_command_table(cli, path):
    rc, out, err = run_cli(cli, "ops", path, "--memory", "--json", "-")
    assert rc == 0, err
    assert _lib.op_memory_json(path, []) == out
    want = json.loads(out)
    report = stepscope.analyze(path)
    df = report.memory()
    assert df.attrs["memory"] == want
    assert len(df) == len(want["devices"]) == 1
    d, row = want["devices"][0], df.iloc[0]
    assert row["device"] == d["device"] == "cpu" and row["rank"] == d["rank"]
    for k in ("events", "peak_allocated_bytes", "peak_time_ns", "peak_reserved_bytes"):
        assert row[k] == d[k], k
    for k in ("count", "bytes", "bytes_before_trace"):
        assert row["live_at_peak." + k] == d["live_at_peak"][k], k
    assert row["live_at_peak.bytes"] + row["live_at_peak.bytes_before_trace"] == \
        row["peak_allocated_bytes"]
    steps = report.memory_steps()
    assert steps["step"].tolist() == [s["step"] for s in d["steps"]]
    assert steps["peak_allocated_bytes"].tolist() == [s["peak_allocated_bytes"]
                                                      for s in d["steps"]]
    assert steps["peak_allocated_bytes"].max() == row["peak_allocated_bytes"]
    live = report.memory_live()
    assert live[["bytes", "op", "time_ns"]].to_dict("records") == d["live_at_peak"]["largest"]
    assert live["bytes"].is_monotonic_decreasing and live["bytes"].sum() <= \
        row["live_at_peak.bytes"]


@pytest.mark.parametrize("path", TRACES, ids=os.path.basename)
def test_memory_timeline_is_the_trace_s_series(cli, path):
    rc, out, err = run_cli(cli, "ops", path, "--memory", "--series", "--json", "-")
    assert rc == 0, err
    assert _lib.op_memory_json(path, [], series=True) == out
    assert "series" not in _lib.op_memory_json(path, [])  # the plain table is unchanged
    with gzip.open(path, "rt") as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("name") == "[memory]"]
    report = stepscope.analyze(path)
    df = report.memory_timeline()
    dev = report.memory().iloc[0]
    assert len(df) == len(events) == dev["events"]
    assert df["time_ns"].is_monotonic_increasing
    assert sorted(df["allocated_bytes"]) == sorted(e["args"]["Total Allocated"] for e in events)
    assert (df["reserved_bytes"] == 0).all() and (df["device"] == "cpu").all()
    assert df["allocated_bytes"].max() == dev["peak_allocated_bytes"]
    at_peak = df[df["time_ns"] == dev["peak_time_ns"]]
    assert dev["peak_allocated_bytes"] in set(at_peak["allocated_bytes"])
    # times as the report's: inside the analysed steps' span or before the first
    steps = report.json["run"]["steps"]
    assert df["time_ns"].max() <= max(s["end_ns"] for s in steps)


def test_memory_without_memory_events():
    report = stepscope.analyze(PLAIN_KINETO)
    assert report.memory().attrs["memory"]["devices"] == []
    assert len(report.memory()) == 0 and "peak_allocated_bytes" in report.memory().columns
    assert len(report.memory_steps()) == 0 and len(report.memory_live()) == 0
    assert len(report.memory_timeline()) == 0 and "allocated_bytes" in report.memory_timeline()


@pytest.mark.parametrize("call", [_lib.op_modules_json, _lib.op_memory_json],
                         ids=["modules", "memory"])
def test_errors_are_the_command_s(cli, call):
    with pytest.raises(stepscope.StepscopeError) as e:
        call(TRACES[0], ["--rank", "5"])
    rc, out, err = run_cli(cli, "ops", TRACES[0], "--memory", "--rank", "5", "--json", "-")
    assert e.value.code == rc == 2 and "rank 5" in str(e.value), (str(e.value), err)
    with pytest.raises(stepscope.StepscopeError) as e:
        call(TRACES[0], ["--nonsense", "1"])
    assert e.value.code == 2 and "--nonsense" in str(e.value)
