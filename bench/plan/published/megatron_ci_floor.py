#!/usr/bin/env python3
"""megatron_ci_floor.py MEGATRON_GIT_DIR [COMMIT] — the host floor `stepscope plan` charges a
Megatron-Core layer (docs/plan.md "A layer's host floor"), recomputed from Megatron-LM's own
functional tests.

Megatron-LM's CI trains small models on one DGX H100 node (8 GPUs) and records each step's
iteration-time in tests/functional_tests/test_cases/*/*/golden_values_dev_dgx_h100.json, beside
the test's model_config.yaml. For the GPT and MoE test models of hidden size 512 and 12 layers
(micro-batches of 4 x 1,024 tokens: a fraction of a millisecond of GPU work a layer) this
divides each test's median iteration-time (steps after the 5th) by the layer micro-batches one
rank runs, (global batch / (dp x micro-batch)) x layers / pp with dp = 8 / (tp x pp x cp), and
prints the spread for dense and MoE tests and the cases with the most layer micro-batches a rank
(whose fixed per-step costs weigh least), then the MoE tests by token dispatcher
(--moe-token-dispatcher-type: allgather, Megatron's default, or alltoall). The planner's floors
are the least of each: dense, MoE (the allgather dispatcher's tests; also for DeepEP and HybridEP,
which no such test runs) and MoE with the alltoall dispatcher (the planner's default exchange,
NCCL's all-to-all).

Reads the repository with `git --git-dir` (a bare clone or a mirror; nothing is written).
Default commit: 9c5258f109, the dev branch of August 2026 the planner's figures come from.
"""
import json
import re
import statistics
import subprocess
import sys


def git(gitdir, *args):
    out = subprocess.run(["git", "--git-dir", gitdir] + list(args), capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"megatron_ci_floor.py: git {' '.join(args[:2])}: {out.stderr.strip()}")
    return out.stdout


def arg(config, name, default):
    m = re.search(r"^\s*--" + re.escape(name) + r":\s*(\d+)", config, re.M)
    return int(m.group(1)) if m else default


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) >= 2 else 2)
    gitdir = sys.argv[1]
    commit = sys.argv[2] if len(sys.argv) > 2 else "9c5258f109"
    paths = [p for p in git(gitdir, "ls-tree", "-r", "--name-only", commit, "--",
                            "tests/functional_tests/test_cases").splitlines()
             if p.endswith("golden_values_dev_dgx_h100.json")
             and re.search(r"test_cases/(gpt/gpt3_mcore|moe/gpt3)", p)]
    cases = {"dense": [], "moe": []}
    for path in paths:
        case = path.rsplit("/", 1)[0]
        config = git(gitdir, "show", f"{commit}:{case}/model_config.yaml")
        if arg(config, "hidden-size", 0) != 512 or arg(config, "num-layers", 0) != 12:
            continue
        try:
            steps = json.loads(git(gitdir, "show", f"{commit}:{path}"))["iteration-time"]["values"]
        except (KeyError, ValueError):
            continue
        times = [float(v) for k, v in steps.items() if int(k) > 5 and str(v) != "nan"]
        if len(times) < 3:
            continue
        tp, pp, cp = (arg(config, k, 1) for k in ("tensor-model-parallel-size",
                                                  "pipeline-model-parallel-size",
                                                  "context-parallel-size"))
        dp = 8 // (tp * pp * cp)
        n = arg(config, "global-batch-size", 1) // (dp * arg(config, "micro-batch-size", 1)) * 12 // pp
        kind = "moe" if re.search(r"^\s*--num-experts:", config, re.M) else "dense"
        m = re.search(r"^\s*--moe-token-dispatcher-type:\s*(\S+)", config, re.M)
        dispatcher = m.group(1) if m else "allgather"  # Megatron's default
        cases[kind].append((1e3 * statistics.median(times) / n, n, case.rsplit("/", 1)[1],
                            dispatcher))
    print(f"Megatron-LM {commit}: tests of hidden 512 and 12 layers on one DGX H100 node")
    for kind, rows in cases.items():
        if not rows:
            print(f"{kind}: no test cases")
            continue
        rows.sort()
        ms = [r[0] for r in rows]
        print(f"{kind}: {len(rows)} cases, ms a layer micro-batch: least {ms[0]:.2f}, "
              f"median {statistics.median(ms):.2f}, most {ms[-1]:.1f}")
        most = max(r[1] for r in rows)
        for ms_, n, name, _ in rows:
            if n == most:
                print(f"  {ms_:6.2f} ms  ({n} layer micro-batches a rank)  {name}")
    # the MoE tests by dispatcher: alltoall's preprocessing gathers the EP ranks' token counts
    # and synchronises on them before its all-to-all; its least is the planner's alltoall floor
    by = {}
    for row in cases["moe"]:
        by.setdefault(row[3], []).append(row)
    for dispatcher, rows in sorted(by.items()):
        ms = [r[0] for r in rows]
        print(f"moe, {dispatcher} dispatcher: {len(rows)} cases, least {ms[0]:.2f}, "
              f"median {statistics.median(ms):.2f}")
        for ms_, n, name, _ in rows:
            if dispatcher != "allgather":
                print(f"  {ms_:6.2f} ms  ({n} layer micro-batches a rank)  {name}")


if __name__ == "__main__":
    main()
