#!/usr/bin/env bash
# The analysis options shared by `analyze`, `export` and `diff`
# (analyzer/src/metrics/analysis_options.c): every command rejects the same bad values
# with exit 2 and a message naming itself, accepts the good ones, and
# --launch-gap-us really moves idle time between the launch_gap and the other
# causes of the idle breakdown.
set -u
stepscope=$1 run=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

expect_usage_error() { # command, expected message fragment, args...
  local cmd=$1 msg=$2; shift 2
  "$stepscope" "$cmd" "$@" >/dev/null 2>"$tmp/err"; local rc=$?
  if [ $rc -ne 2 ]; then echo "FAIL: $cmd $*: exit $rc, want 2"; fail=1; return; fi
  if ! grep -q "stepscope $cmd: $msg" "$tmp/err"; then
    echo "FAIL: $cmd $*: message was: $(cat "$tmp/err")"; fail=1
  fi
}
for cmd in analyze export diff; do
  case $cmd in
    analyze) args=("$run") ;;
    export) args=("$run" -o "$tmp/t.json") ;;
    diff) args=("$run" "$run") ;;
  esac
  expect_usage_error $cmd "bad --steps '3:1'" "${args[@]}" --steps 3:1
  expect_usage_error $cmd "bad --steps 'x'" "${args[@]}" --steps x
  expect_usage_error $cmd "bad --launch-gap-us '0'" "${args[@]}" --launch-gap-us 0
  expect_usage_error $cmd "bad --launch-gap-us '5us'" "${args[@]}" --launch-gap-us 5us
  expect_usage_error $cmd "bad --threads '0'" "${args[@]}" --threads 0
  expect_usage_error $cmd "--threads needs a value" "${args[@]}" --threads
  "$stepscope" $cmd "${args[@]}" --steps 2:3 --launch-gap-us 20 --threads 1 \
    --step-range step >/dev/null 2>"$tmp/err" ||
    { echo "FAIL: $cmd with good options: $(cat "$tmp/err")"; fail=1; }
done
expect_usage_error analyze "bad --rank '-1'" "$run" --rank -1
expect_usage_error export "bad --rank 'a'" "$run" -o "$tmp/t.json" --rank a
expect_usage_error diff "bad --steps-b '2:1'" "$run" "$run" --steps-b 2:1

# A larger launch-gap threshold can only move idle time into launch_gap.
"$stepscope" analyze "$run" --quiet --json "$tmp/small.json" --launch-gap-us 1 &&
  "$stepscope" analyze "$run" --quiet --json "$tmp/large.json" --launch-gap-us 100000 ||
  { echo "FAIL: analyze --json"; fail=1; }
python3 - "$tmp/small.json" "$tmp/large.json" <<'PY' || { echo "FAIL: --launch-gap-us had no effect"; fail=1; }
import json, sys
def launch_gap(path):
    d = json.load(open(path))
    return sum(r["idle_breakdown"]["device"]["launch_gap_ns"] for r in d["ranks"])
small, large = launch_gap(sys.argv[1]), launch_gap(sys.argv[2])
print("launch_gap_ns total: 1 us threshold", small, "| 100 ms threshold", large)
assert large > small, (small, large)
PY
exit $fail
