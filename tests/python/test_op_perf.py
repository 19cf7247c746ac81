"""test_op_perf.py — Report.op_perf() (docs/ops.md) against `stepscope ops --json -`: the same
rows and values, the table's totals in attrs["ops"], --peak passed on, a bad peak refused, on
the torch CPU traces committed under tests/data/kineto/ops."""

import json
import os

import pytest

import stepscope
from conftest import ROOT, run_cli

TRACES = [os.path.join(ROOT, "tests", "data", "kineto", "ops", n + ".pt.trace.json.gz")
          for n in ("mlp", "conv", "attention")]


@pytest.mark.parametrize("path", TRACES, ids=os.path.basename)
def test_op_perf_is_the_command_table(cli, path):
    rc, out, err = run_cli(cli, "ops", path, "--json", "-", "--peak", "fp32=2T,bw=100G")
    assert rc == 0, err
    want = json.loads(out)
    df = stepscope.analyze(path).op_perf(peak="fp32=2T,bw=100G")
    assert len(df) == len(want["rows"])
    for got, row in zip(df.to_dict("records"), want["rows"]):
        for k, v in row.items():
            g = got[k]
            if v is None:
                assert g is None or g != g, (k, g)
            else:
                assert g == v, (k, g, v)
    assert df.attrs["ops"]["flops_total"] == want["flops_total"]
    assert df.attrs["ops"]["ceilings"]["source"] == "given"
    assert (df["bound"].dropna() != "").all()


def test_op_perf_model_rows():
    df = stepscope.analyze(TRACES[0]).op_perf()
    fc1 = df[(df["op"] == "aten::addmm") & (df["shapes"] == "[512] [32,256] [256,512] fp32")]
    assert len(fc1) == 1
    assert fc1.iloc[0]["flops"] == fc1.iloc[0]["count"] * (2 * 32 * 512 * 256 + 32 * 512)


def test_op_perf_bad_peak():
    with pytest.raises(stepscope.StepscopeError) as e:
        stepscope.analyze(TRACES[0]).op_perf(peak="bf16=fast")
    assert e.value.code == 2 and "--peak" in str(e.value)
