#!/bin/sh
# traced_attribution.sh — a traced run with known causes (--debug-delay, or a balanced
# layout), analyzed by `stepscope analyze --json` and checked by check_attribution.py.
#
# usage: traced_attribution.sh TRAINER STEPSCOPE PYTHON CHECKER "CHECK ARGS" [TRAINER ARGS...]
set -u
trainer=$1 stepscope=$2 python=$3 checker=$4 check=$5
shift 5
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-attr.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
"$trainer" --backend cpu --quiet --trace "$dir/run" "$@" >"$dir/train.out" 2>&1 ||
    { echo "FAIL: training failed"; cat "$dir/train.out"; exit 1; }
"$stepscope" analyze "$dir/run" --json "$dir/report.json" >"$dir/report.txt" 2>&1 ||
    { echo "FAIL: stepscope analyze failed"; cat "$dir/report.txt"; exit 1; }
# shellcheck disable=SC2086 # CHECK ARGS are words
"$python" "$checker" "$dir/report.json" $check || { cat "$dir/report.txt"; exit 1; }
