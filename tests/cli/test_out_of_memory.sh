#!/usr/bin/env bash
# Out of memory is a clear error (issue 35): under an address-space limit (ulimit -v) too small
# for a generated run of 16 ranks x 50,000 events, `analyze` and `export` exit 1 with a message
# that says memory ran out, names the rank file, gives the run's size and says what to do;
# they never skip the ranks they could not hold and report the others as the run (main did:
# "12 of 16 ranks have no trace file", exit 0). Without the limit both succeed.
# usage: test_out_of_memory.sh STEPSCOPE STEPSCOPE_GEN
set -u
stepscope=$1 gen=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # description, command...
  local what=$1; shift
  if ! "$@"; then echo "FAIL: $what"; fail=1; else echo "ok: $what"; fi
}
"$gen" "$tmp/run" --scale --ranks 16 --events-per-rank 50000 >/dev/null || { echo "FAIL: gen"; exit 1; }
limit_kb=64000 # the run needs ~37 MB resident and ~130 MB of address space with one thread
for cmd in analyze export; do
  out=(-o "$tmp/out.json")
  [ $cmd = analyze ] && out=(--json "$tmp/out.json")
  "$stepscope" $cmd "$tmp/run" --threads 1 "${out[@]}" >/dev/null 2>"$tmp/err.ok"
  check "$cmd without a limit succeeds" test $? -eq 0
  rm -f "$tmp/out.json"
  (ulimit -v $limit_kb; "$stepscope" $cmd "$tmp/run" --threads 1 "${out[@]}" >"$tmp/stdout" 2>"$tmp/err")
  rc=$?
  cat "$tmp/err"
  check "$cmd under ulimit -v exits 1 (got $rc)" test $rc -eq 1
  check "$cmd says memory ran out loading a rank file" \
    grep -q "^stepscope $cmd: out of memory loading rank file $tmp/run/rank-" "$tmp/err"
  check "$cmd gives the run's size" grep -q "(the run: 16 ranks, [0-9.]* MiB of trace files" "$tmp/err"
  check "$cmd says what to do" grep -q "analyse fewer ranks .* or give it more memory" "$tmp/err"
  check "$cmd skips no rank silently" bash -c "! grep -q 'rank skipped\|no trace file' '$tmp/err'"
  check "$cmd writes no output" test ! -e "$tmp/out.json"
done
exit $fail
