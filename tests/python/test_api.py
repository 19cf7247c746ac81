"""test_api.py — the Python package against the `stepscope` command, on the
committed sample and Kineto traces and on generated runs:
  - analyze() returns byte for byte the JSON of `stepscope analyze --json -`,
    and diff() that of `stepscope diff --json -`;
  - every DataFrame holds exactly the JSON's rows and values;
  - ops() agrees with the report computed independently from it: op counts
    per rank, the kernel table (count and total time per name), the members
    of each collective instance, ops per step, and the compute and
    communication time of each rank (the union of its ops' intervals);
  - bad input raises StepscopeError with the command's message and code;
  - without pandas, .json works and DataFrames raise a clear ImportError."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

import stepscope
from conftest import COMMITTED, GENERATED, ROOT, run_cli

RUN_IDS = [os.path.relpath(p, ROOT) for p in COMMITTED] + sorted(list(GENERATED) + ["kineto"])


@pytest.fixture(params=RUN_IDS)
def run(request, generated_runs):
    return generated_runs.get(request.param) or os.path.join(ROOT, request.param)


def same(a, b):
    """JSON value b equals DataFrame cell a (null is NaN or None there)."""
    if b is None:
        return a is None or (isinstance(a, float) and math.isnan(a))
    if isinstance(b, float) and isinstance(a, (float, np.floating)) and math.isnan(b):
        return math.isnan(a)
    if isinstance(b, list):
        return list(a) == b
    return a == b


def check_rows(frame, rows):
    """Each row of frame equals the flat dict of the same position."""
    assert len(frame) == len(rows)
    records = frame.to_dict("records")
    for got, want in zip(records, rows):
        for k, v in want.items():
            if v is None and k not in got and any(c.startswith(k + ".") for c in got):
                continue  # a null object: its fields are NaN in this row (_frames.frame)
            assert k in got, "column %s missing" % k
            assert same(got[k], v), "%s: %r != %r" % (k, got[k], v)


def flat(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flat(v, prefix + k + "."))
        else:
            out[prefix + k] = v
    return out


def test_report_is_the_cli_json(run, cli):
    rc, out, err = run_cli(cli, "analyze", run, "--json", "-")
    assert rc == 0, err
    r = stepscope.analyze(run)
    assert r.text == out
    assert r.json["schema_version"] == 1


def test_options_reach_the_library(cli, generated_runs):
    run = generated_runs["pipeline"]
    for kwargs, argv in [({"steps": (1, 2)}, ["--steps", "1:2"]),
                         ({"steps": range(0, 2), "rank": 1, "top": 3},
                          ["--steps", "0:1", "--rank", "1", "--top", "3"]),
                         ({"launch_gap_us": 2.5, "threads": 1}, ["--launch-gap-us", "2.5",
                                                                  "--threads", "1"])]:
        rc, out, err = run_cli(cli, "analyze", run, "--json", "-", *argv)
        assert rc == 0, err
        assert stepscope.analyze(run, **kwargs).text == out


def test_kernel_class_options_match_the_cli(cli, generated_runs):
    """--comm-kernel / --compute-kernel: the package gives the command's
    report, bad patterns its message, and rules never leak into later calls."""
    run = generated_runs["plain"]
    plain = stepscope.analyze(run).text
    names = [k["name"] for k in stepscope.analyze(run).json["kernels"]["rows"]]
    compute = [n for n in names if "nccl" not in n.lower()]
    assert compute, names
    for kwargs, argv in [({"comm_kernels": "^" + compute[0] + "$"},
                          ["--comm-kernel", "^" + compute[0] + "$"]),
                         ({"comm_kernels": [".*"], "compute_kernels": ["nccl", "x"]},
                          ["--comm-kernel", ".*", "--compute-kernel", "nccl", "--compute-kernel", "x"])]:
        rc, out, err = run_cli(cli, "analyze", run, "--json", "-", *argv)
        assert rc == 0, err
        got = stepscope.analyze(run, **kwargs).text
        assert got == out
        assert got != plain  # the rules changed the classification
        assert stepscope.analyze(run).text == plain  # and are gone in the next call
    rc, out, err = run_cli(cli, "analyze", run, "--json", "-", "--comm-kernel", "(")
    assert rc == 2
    with pytest.raises(stepscope.StepscopeError) as e:
        stepscope.analyze(run, comm_kernels="(")
    assert e.value.code == 2 and str(e.value) in err
    assert stepscope.analyze(run).text == plain


def test_kernel_rules_from_the_environment(cli, generated_runs, monkeypatch):
    run = generated_runs["plain"]
    plain = stepscope.analyze(run).text
    monkeypatch.setenv("STEPSCOPE_COMM_KERNELS", ".*")
    rc, out, err = run_cli(cli, "analyze", run, "--json", "-")
    assert rc == 0, err
    assert stepscope.analyze(run).text == out != plain
    monkeypatch.delenv("STEPSCOPE_COMM_KERNELS")
    assert stepscope.analyze(run).text == plain


def test_ops_follow_the_kernel_rules(generated_runs):
    run = generated_runs["plain"]
    o = stepscope.ops(run)
    assert (o[o.kind == "kernel"].category == "compute").any()
    all_comm = stepscope.ops(run, comm_kernels=".*")
    assert (all_comm[all_comm.kind == "kernel"].category == "comm").all()
    r = stepscope.analyze(run, comm_kernels=".*")
    for jr in r.json["ranks"]:
        mine = all_comm[all_comm["rank"] == jr["rank"]]
        sel = mine[mine.category == "comm"]
        t = jr["totals"]
        assert union_ns(sel.start_ns, sel.end_ns, t["start_ns"], t["end_ns"]) == t["comm_ns"]


def test_frames_are_the_json(run):
    r = stepscope.analyze(run)
    j = r.json
    ranks = []
    for jr in j["ranks"]:
        row = {}
        for k, v in jr.items():
            if k in ("totals", "steps", "idle_breakdown", "collectives"):
                continue
            if isinstance(v, dict):
                row.update(flat(v, k + "."))
            else:
                row[k] = v
        row.update({k: v for k, v in flat(jr["totals"]).items() if k != "step"})
        row.update(flat(jr["collectives"], "collectives."))
        ranks.append(row)
    check_rows(r.ranks(), ranks)
    check_rows(r.steps(), [dict(flat(s), rank=jr["rank"]) for jr in j["ranks"] for s in jr["steps"]])
    check_rows(r.run_steps(), [flat(s) for s in j["run"]["steps"]])
    check_rows(r.kernels(), [flat(k) for k in j["kernels"]["rows"]])
    check_rows(r.collectives(), [flat(c) for c in j["collectives"]["instances"]])
    check_rows(r.collective_summary(), [flat(c) for c in j["collectives"]["summary"]])
    idle = []
    for jr in j["ranks"]:
        for s in jr["idle_breakdown"]["streams"]:
            row = {k: v for k, v in s.items() if k != "idle"}
            row.update(s["idle"], rank=jr["rank"])
            idle.append(row)
    check_rows(r.idle(), idle)


def test_critical_path_frame_is_the_json(run):
    """critical_path(): one row per step of the JSON's critical_path section, its parts,
    ranks and top op; each step's path as long as the step time."""
    r = stepscope.analyze(run)
    cp = r.json["critical_path"]
    f = r.critical_path()
    steps = cp["steps"] if cp else []
    rows = []
    for s in steps:
        row = flat({k: v for k, v in s.items() if k not in ("by_rank", "top_ops")})
        row.update({"rank.%d_ns" % x["rank"]: x["ns"] for x in s["by_rank"]})
        if s["top_ops"]:
            row.update(top_op=s["top_ops"][0]["name"], top_op_rank=s["top_ops"][0]["rank"])
        rows.append(row)
    check_rows(f, rows)
    for row in f.to_dict("records"):
        assert row["length_ns"] == row["step_time_ns"]
        parts = sum(v for k, v in row.items() if k.startswith("parts."))
        assert parts == row["length_ns"]


def union_ns(starts, ends, lo, hi):
    """Length of the union of [s, e) clipped to [lo, hi)."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(zip(starts, ends)):
        s, e = max(s, lo), min(e, hi)
        if e <= s:
            continue
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def test_ops_agree_with_the_report(run):
    r = stepscope.analyze(run)
    o = stepscope.ops(run)
    j = r.json
    assert list(o.columns) == ["rank", "stream", "kind", "category", "name", "start_ns", "end_ns",
                               "step", "comm_id", "coll_seq", "bytes"]
    assert len(o) == sum(jr["ops"] for jr in j["ranks"])
    per_rank = o.groupby("rank").size()
    for jr in j["ranks"]:
        assert per_rank.get(jr["rank"], 0) == jr["ops"]
    # the kernel table: count and total time of every name
    by_name = o.assign(d=o.end_ns - o.start_ns).groupby("name", observed=True).d.agg(["size", "sum"])
    for k in j["kernels"]["rows"]:
        assert by_name.loc[k["name"], "size"] == k["count"], k["name"]
        assert by_name.loc[k["name"], "sum"] == k["total_ns"], k["name"]
    # every collective instance: its members are the ranks whose ops executed it
    members = o[o.coll_seq >= 0].groupby(["comm_id", "coll_seq"])["rank"].nunique()
    for c in j["collectives"]["instances"]:
        assert members.get((int(c["comm_id"], 16), c["seq"]), 0) == c["present"]
    # ops per step (each launched op's step) are the launches each step window counts
    per_step = o[o.step >= 0].groupby(["rank", "step"]).size()
    for jr in j["ranks"]:
        for s in jr["steps"]:
            assert per_step.get((jr["rank"], s["step"]), 0) == s["launch"]["count"]
    # compute and communication time of each rank: the union of its ops
    for jr in j["ranks"]:
        t = jr["totals"]
        mine = o[o["rank"] == jr["rank"]]
        for cat, key in (("compute", "compute_ns"), ("comm", "comm_ns")):
            sel = mine[mine.category == cat]
            assert union_ns(sel.start_ns, sel.end_ns, t["start_ns"], t["end_ns"]) == t[key], key


def test_ops_filters(generated_runs):
    run = generated_runs["pipeline"]
    o = stepscope.ops(run)
    assert set(stepscope.ops(run, rank=1)["rank"]) == {1}
    assert len(stepscope.ops(run, rank=1)) == (o["rank"] == 1).sum()
    some = stepscope.ops(run, steps=(1, 2))
    assert len(some) == o.step.isin([1, 2]).sum() > 0
    assert (o.kind.cat.categories == ["kernel", "memcpy", "memset", "host"]).all()
    assert o.kind.notna().all() and o.category.notna().all()


def test_diff_is_the_cli_json(cli, generated_runs):
    a, b = generated_runs["plain"], generated_runs["overlap"]
    rc, out, err = run_cli(cli, "diff", a, b, "--json", "-")
    assert rc == 0, err
    d = stepscope.diff(a, b)
    assert d.text == out
    f = d.frame()
    assert list(f.index) == list(d.json["headline"])
    for name, m in d.json["headline"].items():
        for k, v in flat(m).items():
            if v is None and k not in f.columns and any(c.startswith(k + ".") for c in f.columns):
                assert all(same(f.loc[name, c], None) for c in f.columns if c.startswith(k + "."))
                continue  # a null object: its fields are NaN in this row (_frames.frame)
            assert same(f.loc[name, k], v), (name, k)
    check_rows(d.kernels(), [flat(k) for k in d.json["kernels"]])
    check_rows(d.collectives(), [flat(c) for c in d.json["collectives"]])
    check_rows(d.steps(), [flat(s) for s in d.json["steps"]])
    rc, out, err = run_cli(cli, "diff", a, a, "--json", "-", "--steps", "1:3", "--steps-b", "0:2")
    assert stepscope.diff(a, a, steps="1:3", steps_b="0:2").text == out


def test_diff_repeats_are_the_cli_json(cli, generated_runs):
    """repeats_a / repeats_b are --repeat-a / --repeat-b: the same JSON, with
    the runs counted and every run's median listed."""
    a, b = generated_runs["plain"], generated_runs["overlap"]
    rc, out, err = run_cli(cli, "diff", a, b, "--json", "-", "--repeat-a", a, "--repeat-b", b,
                           "--repeat-b", b)
    assert rc == 0, err
    d = stepscope.diff(a, b, repeats_a=a, repeats_b=[b, b])
    assert d.text == out
    assert d.json["a"]["runs"] == 2 and d.json["b"]["runs"] == 3
    st = d.json["headline"]["step_time"]
    assert len(st["a"]["run_medians"]) == 2 and len(st["b"]["run_medians"]) == 3
    # the same run twice: its repeats lie 0 apart
    assert st["a"]["between_runs"] == 0 and st["b"]["between_runs"] == 0
    with pytest.raises(stepscope.StepscopeError):
        stepscope.diff(a, b, repeats_a=["/nonexistent/run"])


def test_diff_run_noise_is_the_cli_json(cli, generated_runs):
    """run_noise is --run-noise: the same JSON, the floor said in it; a bad value is refused
    with the command's message."""
    a, b = generated_runs["plain"], generated_runs["overlap"]
    for pct in ("0", "5", "12.5"):
        rc, out, err = run_cli(cli, "diff", a, b, "--json", "-", "--run-noise", pct)
        assert rc == 0, err
        d = stepscope.diff(a, b, run_noise=pct)
        assert d.text == out
        assert d.json["run_noise"]["source"] == "given"
    assert stepscope.diff(a, b).json["run_noise"] == {"source": "default", "floor": 0.3}
    with pytest.raises(stepscope.StepscopeError, match="bad --run-noise"):
        stepscope.diff(a, b, run_noise=-1)


@pytest.mark.parametrize("args,kwargs", [
    (["analyze", "{run}", "--steps", "x"], {"steps": "x"}),
    (["analyze", "{run}", "--steps", "5:1"], {"steps": (5, 1)}),
    (["analyze", "{run}", "--steps", "100:200"], {"steps": "100:200"}),
    (["analyze", "{run}", "--launch-gap-us", "-1"], {"launch_gap_us": -1}),
    (["analyze", "{run}", "--threads", "0"], {"threads": 0}),
    (["analyze", "{run}", "--rank", "99"], {"rank": 99}),
    (["analyze", "{run}", "--top", "0"], {"top": 0}),
    (["analyze", "{run}", "--bogus", "1"], {"options": ["--bogus", "1"]}),
    (["analyze", "/nonexistent/run"], {"run": "/nonexistent/run"}),
])
def test_bad_input_raises_like_the_cli(cli, generated_runs, args, kwargs):
    run = generated_runs["plain"]
    rc, out, err = run_cli(cli, *[a.replace("{run}", run) for a in args], "--json", "-")
    assert rc in (1, 2)
    kwargs = dict(kwargs)
    target = kwargs.pop("run", run)
    with pytest.raises(stepscope.StepscopeError) as e:
        stepscope.analyze(target, **kwargs)
    assert e.value.code == rc
    assert str(e.value), "empty message"
    assert str(e.value) in err, (str(e.value), err)


def test_bad_input_other_calls(tmp_path, generated_runs):
    bad = tmp_path / "rank-00000.trace.zst"
    bad.write_bytes(b"not a trace at all" * 10)
    for call in (lambda: stepscope.analyze(str(tmp_path)), lambda: stepscope.ops(str(tmp_path)),
                 lambda: stepscope.diff(str(tmp_path), generated_runs["plain"])):
        with pytest.raises(stepscope.StepscopeError) as e:
            call()
        assert e.value.code == 1 and "stepscope" in str(e.value)
    with pytest.raises(stepscope.StepscopeError) as e:
        stepscope.ops(generated_runs["plain"], rank=42)
    assert e.value.code == 2 and "42" in str(e.value)
    with pytest.raises(stepscope.StepscopeError) as e:
        stepscope.diff(generated_runs["plain"], generated_runs["plain"], steps_b="q")
    assert e.value.code == 2 and "--steps-b" in str(e.value)
    with pytest.raises(TypeError):
        stepscope.analyze(42)
    with pytest.raises(TypeError):
        stepscope.analyze(generated_runs["plain"], steps=1.5)


def test_json_without_pandas(generated_runs):
    """pandas blocked: the report's dict works, a DataFrame raises ImportError."""
    code = ("import sys; sys.modules['pandas'] = None; sys.modules['numpy'] = None\n"
            "import stepscope\n"
            "r = stepscope.analyze(sys.argv[1]); assert r.json['ranks']\n"
            "try:\n    r.ranks()\nexcept ImportError as e:\n    print('IMPORTERROR', e)\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, "-c", code, generated_runs["plain"]], capture_output=True,
                       text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert "IMPORTERROR stepscope: DataFrames need pandas" in p.stdout


def test_missing_library_is_a_clear_error(tmp_path):
    code = "import stepscope\nstepscope.analyze('x')\n"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
               STEPSCOPE_LIB=str(tmp_path / "nothing.so"))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert p.returncode != 0
    assert "StepscopeError" in p.stderr and "nothing.so was not found" in p.stderr


def test_install_without_the_library_fails_with_the_build_command(tmp_path):
    """`pip install ./python` without a built library fails at install time and
    says how to build it (issue 34: it installed a package that could not find its
    library); STEPSCOPE_NO_LIB=1 still installs it."""
    pytest.importorskip("setuptools")
    pytest.importorskip("wheel")
    import shutil
    src = tmp_path / "src" / "python"  # no ../build/analyzer beside it
    shutil.copytree(os.path.join(ROOT, "python"), src,
                    ignore=shutil.ignore_patterns("*.so", "build", "*.egg-info", "__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "STEPSCOPE_LIB"}
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--target",
           str(tmp_path / "site"), str(src)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert p.returncode != 0
    assert "cmake --build build --target stepscope_analyzer" in p.stdout + p.stderr, p.stdout + p.stderr
    assert not os.path.exists(tmp_path / "site" / "stepscope")
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(env, STEPSCOPE_NO_LIB="1"))
    assert p.returncode == 0, p.stderr
    assert os.path.exists(tmp_path / "site" / "stepscope" / "__init__.py")


def test_wheel_bundles_the_library(tmp_path, generated_runs):
    """The wheel built from python/ with STEPSCOPE_LIB set carries the library
    and works without STEPSCOPE_LIB (what scripts/build-wheel.sh does, with
    this environment's setuptools, offline)."""
    lib = os.environ["STEPSCOPE_LIB"]
    pytest.importorskip("setuptools")
    pytest.importorskip("wheel")
    import shutil
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "python"), src,
                    ignore=shutil.ignore_patterns("*.so", "build", "*.egg-info", "__pycache__"))
    env = dict(os.environ, STEPSCOPE_LIB=lib)
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                        "--no-build-isolation", "-w", str(tmp_path / "dist"), str(src)],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    wheels = os.listdir(tmp_path / "dist")
    assert len(wheels) == 1 and wheels[0].endswith("-py3-none-linux_x86_64.whl"), wheels
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                        str(tmp_path / "site"), str(tmp_path / "dist" / wheels[0])],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("STEPSCOPE_LIB", "PYTHONPATH")}
    env["PYTHONPATH"] = str(tmp_path / "site")
    code = ("import stepscope, sys\n"
            "print(stepscope.library_path())\n"
            "print(len(stepscope.analyze(sys.argv[1]).json['ranks']))\n")
    p = subprocess.run([sys.executable, "-c", code, generated_runs["plain"]], capture_output=True,
                       text=True, env=env, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    path, nranks = p.stdout.split()
    assert path.startswith(str(tmp_path / "site")) and nranks == "2"


def test_threads_analyse_concurrently(generated_runs):
    """ctypes releases the GIL during the calls: runs analysed from several
    threads at once give the same results as one after the other."""
    from concurrent.futures import ThreadPoolExecutor
    runs = [generated_runs[k] for k in ("plain", "pipeline", "overlap", "iter")] * 2
    alone = [stepscope.analyze(r).text for r in runs]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda r: stepscope.analyze(r).text, runs))
        ops = list(pool.map(lambda r: len(stepscope.ops(r)), runs))
    assert together == alone
    assert ops == [sum(j["ops"] for j in stepscope.analyze(r).json["ranks"]) for r in runs]
    with ThreadPoolExecutor(4) as pool:  # bad options (parsed under the stderr capture) too
        errors = list(pool.map(lambda s: _error_of(generated_runs["plain"], s), ["x", "y", "z"] * 3))
    assert errors == ["stepscope analyze: bad --steps '%s' (want A:B)" % s for s in ["x", "y", "z"] * 3]


def _error_of(run, steps):
    try:
        stepscope.analyze(run, steps=steps)
    except stepscope.StepscopeError as e:
        return str(e)
    return None


PYTORCH_SAMPLE = os.path.join(ROOT, "samples", "pytorch", "cpu-ddp2")  # gloo: no collective instances


def test_empty_tables_have_their_columns():
    """A run without collective instances gives empty tables with every column, so
    that column selections work (issue 34: an empty collectives() had only "op")."""
    diff_module, report_module = sys.modules["stepscope.diff"], sys.modules["stepscope.report"]
    r = stepscope.analyze(PYTORCH_SAMPLE)
    assert len(r.collectives()) == 0 and len(r.collective_summary()) == 0
    assert list(r.collectives().columns) == report_module.COLLECTIVE_COLUMNS
    assert list(r.collective_summary().columns) == report_module.COLLECTIVE_SUMMARY_COLUMNS
    assert len(r.collectives()[["op", "bytes", "skew_ns", "busbw_gbps"]]) == 0
    d = stepscope.diff(PYTORCH_SAMPLE, PYTORCH_SAMPLE)
    assert len(d.collectives()) == 0
    assert list(d.collectives().columns) == diff_module.COLLECTIVE_COLUMNS
    assert len(d.collectives()[["op", "a.busbw_gbps", "b.busbw_gbps"]]) == 0


def test_column_lists_are_the_json_tables():
    """The column lists of empty tables are those of the same tables with rows."""
    diff_module, report_module = sys.modules["stepscope.diff"], sys.modules["stepscope.report"]
    sample = COMMITTED[0]
    r = stepscope.analyze(sample)
    assert list(r.kernels().columns) == report_module.KERNEL_COLUMNS
    assert list(r.collectives().columns) == report_module.COLLECTIVE_COLUMNS
    assert list(r.collective_summary().columns) == report_module.COLLECTIVE_SUMMARY_COLUMNS
    d = stepscope.diff(sample, sample)
    assert list(d.kernels().columns) == diff_module.KERNEL_COLUMNS
    assert list(d.collectives().columns) == diff_module.COLLECTIVE_COLUMNS


def test_no_all_nan_columns(generated_runs):
    """A kernel or collective only one run has is null on the other side in the diff's
    JSON: its fields are NaN in that row, not a column "a"/"b" that is NaN in every
    row (issue 34: kernels() had all-NaN columns); no table has an all-NaN column."""
    a, b = generated_runs["plain"], generated_runs["pipeline"]
    d = stepscope.diff(a, b)
    assert any(c.get("a") is None or c.get("b") is None for c in d.json["collectives"] + d.json["kernels"])
    r = stepscope.analyze(a)
    for name, f in (("diff.kernels", d.kernels()), ("diff.collectives", d.collectives()),
                    ("kernels", r.kernels()), ("collectives", r.collectives()),
                    ("collective_summary", r.collective_summary())):
        assert len(f), name
        nan = [c for c in f.columns if f[c].isna().all()]
        assert not nan, "%s: all-NaN columns %s" % (name, nan)
