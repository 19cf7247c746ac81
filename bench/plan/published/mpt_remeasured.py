#!/usr/bin/env python3
"""mpt_remeasured.py LLM_FOUNDRY_GIT_DIR — remeasured.csv: the runs of runs.csv that their
source measured twice, recomputed from llm-foundry's history.

llm-foundry's scripts/train/benchmarking/README.md has had two tables for A100 80GB. The July
2023 one (commit 92bd673, the parent of b2a43a147) was run with Composer's FSDP mixed precision
PURE in bf16; b2a43a147 (October 2023) replaced it with a re-run in amp_bf16 and mixed
precision DEFAULT, the table runs.csv's MPT A100 rows quote (unchanged at 8c8dd48). Both ran
the same yamls (scripts/train/yamls/pretrain/mpt-*.yaml: the same dimensions, `attn_impl`
triton, FULL_SHARD) from submit_benchmarks.py. Where a row of the two tables has the same
model, sequence length, GPUs, micro-batch, global batch and activation checkpointing, and the
later row was re-run (not carried over with the same precision and MFU, as MPT-70B's), the job
is one layout measured twice, under two precision modes and two software releases; this writes
the July figure for the runs.csv row it matches, with what differed.

bench_published.py reads the file (beside runs.csv) and prints how far the two measurements of
each job differ, and the planner's error against the earlier one: how much of a row's error
its own source's measurement repeats. Reads the repository with `git --git-dir` (a bare clone
or a mirror; nothing is written there); writes CSV to stdout.
"""
import csv
import os
import subprocess
import sys

EARLIER = "92bd673"  # July 2023: bf16, FSDP mixed precision PURE
LATER = "8c8dd48"  # runs.csv's citation: the October 2023 re-run (b2a43a147), amp_bf16 DEFAULT
TABLE = "A100 80GB"
HERE = os.path.dirname(os.path.abspath(__file__))


def table(gitdir, commit):
    """{(model, seq, gpus): {column: value}} of the README's A100 80GB table at a commit."""
    out = subprocess.run(["git", "--git-dir", gitdir, "show",
                          f"{commit}:scripts/train/benchmarking/README.md"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"mpt_remeasured.py: git show {commit}: {out.stderr.strip()}")
    rows, header, inside = {}, None, False
    for line in out.stdout.splitlines():
        if line.startswith("## "):
            inside, header = TABLE in line, None
        elif inside and line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
            elif cells[0] != "---":
                row = dict(zip(header, cells))
                rows[(row["Model"], row["SeqLen (T)"], row["# GPUs"])] = row
    return rows


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) == 2 else 2)
    gitdir = sys.argv[1]
    earlier, later = table(gitdir, EARLIER), table(gitdir, LATER)
    runs = {(r["model"], r["seq"], r["gpus"]): r
            for r in csv.DictReader(open(os.path.join(HERE, "runs.csv")))
            if r["id"].startswith("mpt-") and r["device"] == "a100-80g"}
    same = ("MicroBatchSize", "GlobalBatchSize", "Activation Checkpointing")
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["id", "source", "published_kind", "published_value", "differs"])
    for key in sorted(earlier, key=lambda k: (k[0], int(k[1]), int(k[2]))):
        run = runs.get(("mpt-" + key[0], key[1], key[2]))
        if run is None or key not in later:
            continue
        if any(earlier[key][c] != later[key][c] for c in same):
            continue  # another layout or batch: not the same job
        if all(earlier[key][c] == later[key][c] for c in ("Precision", "MP Mode", "MFU")):
            continue  # carried over, not re-run (MPT-70B's two rows)
        if float(later[key]["MFU"]) != float(run["published_value"]):
            sys.exit(f"mpt_remeasured.py: {run['id']}: runs.csv has {run['published_value']}, "
                     f"the table at {LATER} {later[key]['MFU']}")
        e = earlier[key]
        out.writerow([run["id"],
                      f"llm-foundry scripts/train/benchmarking/README.md table '{TABLE}' at commit "
                      f"{EARLIER} (July 2023), before b2a43a147 re-ran it",
                      "mfu_pct", e["MFU"],
                      f"precision {e['Precision']}, FSDP mixed precision {e['MP Mode']} "
                      f"(runs.csv's: amp_bf16, DEFAULT); llm-foundry and Composer of July 2023"])


if __name__ == "__main__":
    main()
