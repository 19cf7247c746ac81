"""conftest.py — fixtures of the Python package's tests (CTest `python.api`):
the `stepscope` command and generator the tests compare against (from the
environment that tests/python/CMakeLists.txt sets), and the runs they use:
the committed sample, committed Kineto traces, and runs generated into a
temporary directory by stepscope-gen and tests/kineto/make_kineto.py."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))


def tool(name):
    path = os.environ.get(name)
    if not path or not os.path.exists(path):
        pytest.skip("%s is not set (run through ctest -R python.api)" % name)
    return path


@pytest.fixture(scope="session")
def cli():
    return tool("STEPSCOPE_CLI")


@pytest.fixture(scope="session")
def gen():
    return tool("STEPSCOPE_GEN")


COMMITTED = [
    os.path.join(ROOT, "samples", "cpu-dp2pp2-1f1b"),
    os.path.join(ROOT, "tests", "kineto", "traces", "cpu_ddp"),
    os.path.join(ROOT, "tests", "kineto", "traces", "host_ahead.json"),
]

# stepscope-gen knobs of the generated runs (tests/gen/gen_tool.c)
GENERATED = {
    "plain": ["--ranks", "2"],
    "pipeline": ["--ranks", "3", "--lanes", "3", "--pipeline", "--copies", "--syncs"],
    "overlap": ["--ranks", "2", "--overlap", "--flops", "--seed", "7"],
    "iter": ["--iter", "--ranks", "2", "--steps", "5", "--prefetch", "--iter-comm"],
    "missing": ["--ranks", "3", "--missing-member", "--name-only-nccl"],
}


@pytest.fixture(scope="session")
def generated_runs(tmp_path_factory, gen):
    base = tmp_path_factory.mktemp("runs")
    runs = {}
    for name, knobs in GENERATED.items():
        out = str(base / name)
        subprocess.run([gen, out] + knobs, check=True, stdout=subprocess.DEVNULL)
        runs[name] = out
    out = str(base / "kineto")
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "kineto", "make_kineto.py"), out,
                    "--ranks", "2", "--steps", "4"], check=True, stdout=subprocess.DEVNULL)
    runs["kineto"] = out
    return runs


@pytest.fixture(scope="session")
def all_runs(generated_runs):
    return COMMITTED + [generated_runs[k] for k in sorted(generated_runs)]


def run_cli(cli, *args):
    """(exit code, stdout, stderr) of the stepscope command."""
    p = subprocess.run([cli] + list(args), capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr
