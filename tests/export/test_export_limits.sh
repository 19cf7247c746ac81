#!/usr/bin/env bash
# Outputs at scale (issue 35): export and view estimate their output first and refuse one over
# --max-size with what to do instead; --ranks picks ranks by list or by the analysis (auto).
# On a generated run of 64 ranks (stepscope-gen --scale: stragglers 21 and 42; ~29 MiB of JSON):
#   - export over --max-size exits 1 saying the size, the ranks and events, --ranks and auto;
#     the .pftrace is held to the limit too; nothing is written
#   - --ranks 0-7,12 exports exactly those ranks (pids 1-8 and 13) and then fits
#   - --ranks auto exports rank 0, the stragglers and a few more, far fewer than 64
#   - a listed rank the run lacks, or a malformed list, is a usage error (2)
#   - view --html over --max-size writes no trace into the page; with --ranks auto it does
# usage: test_export_limits.sh STEPSCOPE STEPSCOPE_GEN PYTHON
set -u
stepscope=$1 gen=$2 python=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # description, command...
  local what=$1; shift
  if ! "$@"; then echo "FAIL: $what"; fail=1; else echo "ok: $what"; fi
}
"$gen" "$tmp/run" --scale --ranks 64 --events-per-rank 2000 >"$tmp/truth" || { echo "FAIL: gen"; exit 1; }
pids() { "$python" -c "import json,sys; d=json.load(open(sys.argv[1])); print(' '.join(str(p) for p in sorted({e['pid'] for e in d['traceEvents'] if 'pid' in e})))" "$1"; }

"$stepscope" export "$tmp/run" -o "$tmp/all.json" --max-size 10M 2>"$tmp/err"; rc=$?
cat "$tmp/err"
check "export over --max-size exits 1 (got $rc)" test $rc -eq 1
check "it says the size and the run" grep -q "the JSON of 64 ranks ([0-9]* events) would be about [0-9.]* MiB, over the limit of 10.0 MiB" "$tmp/err"
check "it says what to do" grep -q -- "--ranks 0-7,12.*--ranks auto.*raise --max-size" "$tmp/err"
check "nothing written" test ! -e "$tmp/all.json"
"$stepscope" export "$tmp/run" -o "$tmp/all.pftrace" --max-size 2M 2>"$tmp/err"; rc=$?
check "the .pftrace is held to it too (exit $rc)" test $rc -eq 1
check "... as a Perfetto trace" grep -q "the Perfetto trace of 64 ranks" "$tmp/err"

"$stepscope" export "$tmp/run" -o "$tmp/some.json" --ranks 0-7,12 --max-size 10M; rc=$?
check "--ranks 0-7,12 fits (exit $rc)" test $rc -eq 0
check "it holds ranks 0-7 and 12 (pids $(pids "$tmp/some.json"))" test "$(pids "$tmp/some.json")" = "1 2 3 4 5 6 7 8 13"

"$stepscope" export "$tmp/run" -o "$tmp/auto.json" --ranks auto; rc=$?
check "--ranks auto (exit $rc)" test $rc -eq 0
p=" $(pids "$tmp/auto.json") "
echo "auto: pids$p"
check "auto holds rank 0 and the stragglers 21 and 42" bash -c "[[ '$p' == *' 1 '* && '$p' == *' 22 '* && '$p' == *' 43 '* ]]"
check "auto holds at most 15 ranks" test "$(echo $p | wc -w)" -le 15

"$stepscope" export "$tmp/run" -o "$tmp/x.json" --ranks 0-3,99 2>"$tmp/err"; rc=$?
check "a rank the run lacks: exit 2 (got $rc)" test $rc -eq 2
check "... named" grep -q "rank 99 is not in the run" "$tmp/err"
"$stepscope" export "$tmp/run" -o "$tmp/x.json" --ranks 3-1 2>"$tmp/err"; rc=$?
check "a malformed list: exit 2 (got $rc)" test $rc -eq 2

"$stepscope" view "$tmp/run" --html "$tmp/page.html" --max-size 10M >/dev/null 2>"$tmp/err"
check "view --html over --max-size says so" grep -q "over the limit of 10.0 MiB" "$tmp/err"
check "... and the page holds no trace" bash -c "! grep -q 'id=\"data-a-trace\"' '$tmp/page.html' 2>/dev/null"
"$stepscope" view "$tmp/run" --html "$tmp/page2.html" --max-size 10M --ranks auto >/dev/null 2>"$tmp/err"; rc=$?
check "view --html --ranks auto fits (exit $rc)" test $rc -eq 0
check "... and the page holds the trace" grep -q 'id="data-a-trace"' "$tmp/page2.html"
exit $fail
