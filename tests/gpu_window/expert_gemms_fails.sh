#!/bin/bash
# expert_gemms_fails.sh — the expert GEMM measurement (scripts/gpu/expert_gemms.py, window
# step 7) refuses a negative budget (exit 2) and, with no CUDA device (hidden here even on a GPU
# machine) or no torch, says SKIP and exits 77 so the window's line reads SKIP, not PASS: it
# never reports a rate it did not measure, and writes no JSON.
set -u
source "$(dirname "$0")/expect.sh"
experts=$(dirname "$0")/../../scripts/gpu/expert_gemms.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
expect 2 python3 "$experts" --budget-s -1
expect_output "--budget-s: at least 0"
expect 77 env CUDA_VISIBLE_DEVICES= python3 "$experts" --json "$tmp/out.json"
expect_output "^expert_gemms: SKIP: no (torch|CUDA device)"
[ ! -e "$tmp/out.json" ] || { echo "FAILED: a JSON written without a measurement"; fail=1; }
exit $fail
