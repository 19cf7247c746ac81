#!/bin/bash
# attention_rates_fails.sh — the attention-rate measurement (scripts/gpu/attention_rates.py,
# window step 7 and the deferred call) refuses lengths it cannot run (under 512, or a range
# upside down: exit 2) and, with no CUDA device (hidden here even on a GPU machine) or no torch,
# says SKIP and exits 77 so the window's line reads SKIP, not PASS: it never reports a rate it
# did not measure, and writes no JSON.
set -u
source "$(dirname "$0")/expect.sh"
rates=$(dirname "$0")/../../scripts/gpu/attention_rates.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
expect 2 python3 "$rates" --min-len 256
expect_output "512 <= --min-len <= --max-len"
expect 2 python3 "$rates" --min-len 65536 --max-len 32768
expect 2 python3 "$rates" --budget-s -5
expect_output "--budget-s: at least 0"
expect 77 env CUDA_VISIBLE_DEVICES= python3 "$rates" --max-len 1024 --json "$tmp/out.json"
expect_output "^attention_rates: SKIP: no (torch|CUDA device)"
[ ! -e "$tmp/out.json" ] || { echo "FAILED: a JSON written without a measurement"; fail=1; }
exit $fail
