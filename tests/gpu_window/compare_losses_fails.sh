#!/bin/bash
# compare_losses_fails.sh — the CUDA-vs-CPU loss check (scripts/gpu/trainer_compare_losses.py,
# window step 4) can fail: two per-step logs whose losses agree within the tolerance and fall
# pass; a step over the tolerance, a step missing from the CUDA log, a loss that does not
# fall and an empty CPU log each fail.
set -u
source "$(dirname "$0")/expect.sh"
cmp=$(dirname "$0")/../../scripts/gpu/trainer_compare_losses.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log() { # log FILE LOSS...: one stepscope-train --log line per loss
  local f=$1 i=0; shift; : > "$f"
  for l in "$@"; do echo "{\"step\":$i,\"loss\":$l,\"step_ms\":1.0}" >> "$f"; i=$((i + 1)); done
}
log "$tmp/cpu" 5.50 5.40 5.30 5.20
log "$tmp/close" 5.51 5.41 5.29 5.21
log "$tmp/far" 5.51 5.41 5.90 5.21
log "$tmp/short" 5.51 5.41 5.29
log "$tmp/flat" 5.50 5.50 5.50 5.50
log "$tmp/cpu_flat" 5.50 5.50 5.50 5.50
: > "$tmp/empty"
expect 0 python3 "$cmp" "$tmp/cpu" "$tmp/close" 3e-2
expect_output "worst relative difference .*CUDA loss falls"
expect 1 python3 "$cmp" "$tmp/cpu" "$tmp/close" 1e-3
expect 1 python3 "$cmp" "$tmp/cpu" "$tmp/far" 3e-2
expect_output "over tolerance"
expect 1 python3 "$cmp" "$tmp/cpu" "$tmp/short" 3e-2
expect 1 python3 "$cmp" "$tmp/cpu_flat" "$tmp/flat" 3e-2
expect_output "does NOT fall"
expect 1 python3 "$cmp" "$tmp/empty" "$tmp/close" 3e-2
exit $fail
