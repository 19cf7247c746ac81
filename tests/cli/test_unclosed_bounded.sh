#!/bin/bash
# test_unclosed_bounded.sh STEPSCOPE WRITE_UNCLOSED_RUN — a run with a trace its writer did not
# close (a crash or kill: write_unclosed_run.c) in the bounded analysis and a merge of
# partials. The run's note of an unclosed trace reads each rank's last event; the bounded
# mode had dropped the events by then (rank_drop.c), and both commands crashed (SIGSEGV in
# trace_closed.c). Now `analyze --low-memory` prints and writes the normal analysis' reports
# byte for byte, and `merge` finishes and its report says which trace was not closed.
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
for k in 0 1; do
  "$stepscope" analyze "$dir/run" --part $k/2 --partial "$dir/p$k" > /dev/null 2>&1 ||
    no "analyze --part $k/2"
done
"$stepscope" merge "$dir/p0" "$dir/p1" --json "$dir/m.json" > /dev/null 2> "$dir/m.err"
rc=$?
[ $rc = 0 ] || no "merge of the unclosed run's partials exits 0 (exit $rc)"
grep -q "rank 1's trace was not closed (crash or kill?)" "$dir/m.json" ||
  no "merge says rank 1's trace was not closed"
[ $fail = 0 ] && echo "all passed"
exit $fail
