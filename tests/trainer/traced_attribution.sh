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
# One traced run, analysed and checked; 0 when the check holds.
attempt() {
  rm -rf "$dir/run"
  "$trainer" --backend cpu --quiet --trace "$dir/run" "$@" >"$dir/train.out" 2>&1 ||
      { echo "FAIL: training failed"; cat "$dir/train.out"; exit 1; }
  "$stepscope" analyze "$dir/run" --json "$dir/report.json" >"$dir/report.txt" 2>&1 ||
      { echo "FAIL: stepscope analyze failed"; cat "$dir/report.txt"; exit 1; }
  # shellcheck disable=SC2086 # CHECK ARGS are words
  "$python" "$checker" "$dir/report.json" $check || { cat "$dir/report.txt"; return 1; }
}
# "no_culprit" is a statement about noise: the verdict's threshold (docs/metrics.md) holds a
# run without any delay to a small chance of naming a culprit (bench/attribution: 0-1 of 20 on
# a quiet machine), not to none; four ranks sharing two cores that other programs also use
# are descheduled at random, and a rank that happens to be late in a majority of the steps is
# a straggler for real. Such a run is trained again, twice at most, and the test fails when
# every run names one (2026-11-30: two runs in a row did, on rank 2 then rank 3, each just
# past the threshold, with nothing else of this session running); a verdict that names a
# culprit in every run still fails.
if attempt "$@"; then exit 0; fi
case "$check" in
  no_culprit*)
    for again in 1 2; do
      echo "a culprit was named without any delay: trained again ($again of 2)"
      if attempt "$@"; then exit 0; fi
    done
    exit 1 ;;
  *) exit 1 ;;
esac
