#!/bin/bash
# check_run_fails.sh STEPSCOPE SAMPLE_RUN — the window's run assertions (scripts/gpu/check_run.py)
# can fail: on the committed 4-rank CPU sample (shared-memory collectives, no GPU kernels,
# streams named by the trainer) the right rank count passes, and each assertion that the
# sample cannot meet fails: a wrong rank count, --kernels (no kernel records), --collectives
# (no NCCL kernel to match), --kinds with a kind it lacks (memcpy: what a CUDA program under
# record must leave; --kinds api,range holds), and a run directory with one rank file missing.
set -u
stepscope=$1; sample=$2
source "$(dirname "$0")/expect.sh"
check=$(dirname "$0")/../../scripts/gpu/check_run.py
expect 0 python3 "$check" "$stepscope" "$sample" --ranks 4
expect 1 python3 "$check" "$stepscope" "$sample" --ranks 3
expect 1 python3 "$check" "$stepscope" "$sample" --ranks 4 --kernels
expect 1 python3 "$check" "$stepscope" "$sample" --ranks 4 --collectives
expect 0 python3 "$check" "$stepscope" "$sample" --ranks 4 --kinds api,range,sync
expect_output "PASS rank-00000.trace.zst: [0-9]+ range records"
expect 1 python3 "$check" "$stepscope" "$sample" --ranks 4 --kinds kernel,memcpy,memset,sync,api,range
expect_output "FAIL rank-00000.trace.zst: 0 memcpy records"
tmp=$(mktemp -d)
cp "$sample"/rank-0000[012].trace.zst "$tmp/"
expect 1 python3 "$check" "$stepscope" "$tmp" --ranks 4
rm -rf "$tmp"
exit $fail
