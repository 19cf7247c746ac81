#!/bin/bash
# test_unclosed_bounded.sh STEPSCOPE WRITE_UNCLOSED_RUN — a run with a trace its writer did not
# close (a crash or kill: write_unclosed_run.c) in the bounded analysis and a merge of
# partials. The run's note of an unclosed trace reads each rank's last event; the bounded
# mode had dropped the events by then (rank_drop.c), and both commands crashed (SIGSEGV in
# trace_closed.c). Now `analyze --low-memory` prints and writes the normal analysis' reports
# byte for byte, and `merge` of 1, 2 or 3 partials finishes and its text and JSON reports
# are analyze's byte for byte (the partial keeps each rank's last trace time for the note).
set -u
stepscope=$1 write_unclosed=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-unclosed.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
fail=0
no() { echo "FAILED: $*"; fail=1; }

"$write_unclosed" "$dir/run" > /dev/null || { echo "FAILED: write_unclosed_run"; exit 1; }
"$stepscope" analyze "$dir/run" --json "$dir/n.json" > "$dir/n.txt" 2> "$dir/n.err" ||
  no "analyze of the unclosed run"
grep -q "rank 1's trace was not closed (crash or kill?); it ends" "$dir/n.json" ||
  no "analyze says rank 1's trace was not closed and how early it ends"
"$stepscope" analyze "$dir/run" --low-memory --json "$dir/b.json" > "$dir/b.txt" 2> "$dir/b.err"
rc=$?
[ $rc = 0 ] || no "analyze --low-memory of the unclosed run exits 0 (exit $rc)"
cmp -s "$dir/n.json" "$dir/b.json" && cmp -s "$dir/n.txt" "$dir/b.txt" &&
  cmp -s "$dir/n.err" "$dir/b.err" || no "analyze --low-memory says and writes what analyze does"
# merge of 1, 2 and 3 parts (the partial carries each rank's last trace time, format
# version 3): the report and the warning "it ends X s before ..." are analyze's byte for byte
for n in 1 2 3; do
  parts=()
  for ((k = 0; k < n; k++)); do
    "$stepscope" analyze "$dir/run" --part $k/$n --partial "$dir/p$k-$n" > /dev/null 2>&1 ||
      no "analyze --part $k/$n"
    parts+=("$dir/p$k-$n")
  done
  "$stepscope" merge "${parts[@]}" --json "$dir/m$n.json" > "$dir/m$n.txt" 2> "$dir/m$n.err"
  rc=$?
  [ $rc = 0 ] || no "merge of the unclosed run's $n partial(s) exits 0 (exit $rc)"
  grep -q "rank 1's trace was not closed (crash or kill?); it ends" "$dir/m$n.json" ||
    no "merge of $n part(s) says rank 1's trace was not closed and how early it ends"
  cmp -s "$dir/n.json" "$dir/m$n.json" || no "merge of $n part(s) writes analyze's JSON"
  cmp -s "$dir/n.txt" "$dir/m$n.txt" || no "merge of $n part(s) prints analyze's text"
done
[ $fail = 0 ] && echo "all passed"
exit $fail
