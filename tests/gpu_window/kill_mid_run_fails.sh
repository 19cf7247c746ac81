#!/bin/bash
# kill_mid_run_fails.sh STEPSCOPE — the killed-rank check (scripts/gpu/kill_mid_run.sh, a later
# window's) cannot pass when there was nothing to kill: with a "trainer" that exits at once
# it fails, says so, and does not wait out its timers.
set -u
stepscope=$1
source "$(dirname "$0")/expect.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/build/analyzer" "$tmp/build/trainer"
ln -s "$(cd "$(dirname "$stepscope")" && pwd)/$(basename "$stepscope")" "$tmp/build/analyzer/stepscope"
printf '#!/bin/sh\necho "no GPU here" >&2\nexit 1\n' > "$tmp/build/trainer/stepscope-train"
chmod +x "$tmp/build/trainer/stepscope-train"
t0=$(date +%s)
expect 1 bash "$(dirname "$0")/../../scripts/gpu/kill_mid_run.sh" "$tmp/build" "$tmp/out"
expect_output "ended before the kill \(exit status 1\): nothing checked"
[ $(($(date +%s) - t0)) -lt 30 ] || { echo "FAILED: it waited"; fail=1; }
exit $fail
