#!/bin/bash
# overhead_fails.sh STEPSCOPE — the tracer-overhead check (scripts/gpu/overhead.sh and
# overhead_ratio.py, window step 8) can fail, and never prints a ratio of failed runs:
# overhead.sh with a command that fails exits 1 without an overhead_ratio line (it used to
# exit 0 and print one); overhead_ratio.py passes equal step times, and fails traced steps
# 10 % slower (bar 1.03), a missing log (a run that failed) and a log without steps after
# the skipped ones.
set -u
stepscope=$1
source "$(dirname "$0")/expect.sh"
gpu=$(dirname "$0")/../../scripts/gpu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
expect 1 bash "$gpu/overhead.sh" "$stepscope" "$tmp/failing" -- false
expect_output "FAIL overhead: no ratio \(runs failed\)"
if grep -q "overhead_ratio:" "$tmp/failing/overhead.txt"; then echo "FAILED: a ratio of failed runs"; fail=1; fi
log() { # log FILE MS...: one stepscope-train --log line per step time
  local f=$1 i=0; shift; : > "$f"
  for ms in "$@"; do echo "{\"step\":$i,\"loss\":5.0,\"step_ms\":$ms}" >> "$f"; i=$((i + 1)); done
}
log "$tmp/plain" 90 50 40 10.0 10.1 9.9 10.0
log "$tmp/same" 95 52 41 10.0 10.2 9.9 10.1
log "$tmp/slow" 95 52 41 11.0 11.1 10.9 11.0
log "$tmp/short" 95 52 41
expect 0 python3 "$gpu/overhead_ratio.py" --plain "$tmp/plain" --traced "$tmp/same" --runs 1
expect_output "PASS overhead_ratio: 1\.0"
expect 1 python3 "$gpu/overhead_ratio.py" --plain "$tmp/plain" --traced "$tmp/slow" --runs 1
expect_output "FAIL overhead_ratio: 1\.10"
expect 1 python3 "$gpu/overhead_ratio.py" --plain "$tmp/plain" --traced "$tmp/none" --runs 1
expect 1 python3 "$gpu/overhead_ratio.py" --plain "$tmp/plain" "$tmp/plain" --traced "$tmp/same" --runs 2
expect 1 python3 "$gpu/overhead_ratio.py" --plain "$tmp/plain" --traced "$tmp/short" --runs 1
exit $fail
