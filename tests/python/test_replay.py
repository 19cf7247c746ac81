"""test_replay.py — stepscope.replay() (docs/replay.md) through the C library against
`stepscope replay --json -`: the same document byte for byte, plain and with edits; the steps'
DataFrame; a bad edit raises StepscopeError with the command's message; a removed compute
class never predicts longer steps in all. On the committed CPU sample and a Kineto trace."""

import json
import os

import pytest

import stepscope
from conftest import COMMITTED, run_cli

EDITS = [[], ["kind=comm:scale=0.5"], ["name=matmul:scale=0.8", "rank=1:gaps=0.5"]]


@pytest.mark.parametrize("path", COMMITTED[:2], ids=os.path.basename)
@pytest.mark.parametrize("edits", EDITS, ids=lambda e: ",".join(e) or "plain")
def test_replay_is_the_command(cli, path, edits):
    args = ["replay", path, "--json", "-"]
    for e in edits:
        args += ["--what-if", e]
    rc, out, err = run_cli(cli, *args)
    assert rc == 0, err
    r = stepscope.replay(path, edits)
    assert r.json == json.loads(out)
    assert ("what_if" in r.json) == bool(edits)
    df = r.steps()
    assert list(df["step"]) == [s["step"] for s in r.json["steps"]]
    assert (df["measured_ns"] > 0).all()
    assert r.median_error <= 0.03 and r.worst_error <= 0.05


def test_replay_predicted_per_step():
    r = stepscope.replay(COMMITTED[0], "kind=compute:drop")
    df = r.steps()
    assert {"measured_ns", "replayed_ns", "predicted_ns", "error", "path.compute_ns"} <= set(df)
    assert df["predicted_ns"].sum() <= df["replayed_ns"].sum()


def test_replay_bad_edit():
    with pytest.raises(stepscope.StepscopeError, match="kind=gpu: expected compute"):
        stepscope.replay(COMMITTED[0], ["kind=gpu:scale=2"])
    with pytest.raises(stepscope.StepscopeError, match="declares no --debug-delay"):
        stepscope.replay(COMMITTED[0], ["rank=0:no-delay"])
