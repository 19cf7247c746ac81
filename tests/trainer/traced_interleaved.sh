#!/bin/sh
# traced_interleaved.sh — a traced interleaved-1F1B run, checked and analyzed.
#
# usage: traced_interleaved.sh TRAINER CHECKER STEPSCOPE THEORY [TRAINER ARGS...]
# Runs stepscope-train with --trace (2 steps), checks the run directory with
# check_trace_run (--p2p: every pipeline send matched by its receive), then
# `stepscope analyze --json` and requires the schedule's theoretical bubble
# (p-1)/(v m+p-1) = THEORY (to 6 decimals) in the report and "interleaved" in the text.
set -u
trainer=$1 checker=$2 stepscope=$3 theory=$4
shift 4
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-trace-il.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
"$trainer" --backend cpu --steps 2 --quiet --trace "$dir/run" "$@" >"$dir/train.out" 2>&1 ||
    { echo "FAIL: training failed"; cat "$dir/train.out"; exit 1; }
world=$(ls "$dir/run"/rank-*.trace.zst | wc -l)
"$checker" "$dir/run" "$world" 2 --p2p || exit 1
"$stepscope" analyze "$dir/run" --json "$dir/report.json" >"$dir/report.txt" 2>&1 ||
    { echo "FAIL: stepscope analyze failed"; cat "$dir/report.txt"; exit 1; }
grep 'pipeline bubble' "$dir/report.txt"
grep -q 'pipeline bubble.*(interleaved' "$dir/report.txt" || { echo "FAIL: no interleaved bubble line"; exit 1; }
got=$(grep -o '"bubble_theory_ratio":[0-9.e-]*' "$dir/report.json" | head -1 | cut -d: -f2)
awk -v a="$got" -v b="$theory" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d < 1e-6) }' ||
    { echo "FAIL: bubble_theory_ratio $got, expected $theory"; exit 1; }
echo "OK: interleaved run traced and analyzed, theory $got"
