#!/bin/bash
# overhead.sh STEPSCOPE OUT -- TRAINER ARGS... — the tracer's overhead on a training run
# (window step 8): the same stepscope-train command run plain and under `stepscope record`,
# alternately, OVERHEAD_REPEATS times each (2), every run with its own per-step log
# (--log); then overhead_ratio.py compares the median step times (after each run's first 3
# steps): traced / plain must not pass OVERHEAD_MAX (1.03). Whole-process wall times are
# printed too (start-up included, for reference only). A run that fails is a FAIL, never a
# ratio of failed runs. Results in OUT/overhead.txt; exit 0 only when every run succeeded
# and the ratio is within the bar.
set -u
stepscope=$1; OUT=$2
[ "${3:-}" = -- ] || { echo "usage: overhead.sh STEPSCOPE OUT -- TRAINER ARGS..."; exit 2; }
shift 3
mkdir -p "$OUT"
plain=(); traced=(); failed=0
wall() { # wall LOG COMMAND...: runs it, echoes its wall time in ms, notes a failure in $OUT
  local s log=$1; shift
  s=$(date +%s%N)
  if ! "$@" >> "$log" 2>&1; then
    echo "run failed: $(grep -m1 -iE 'error|no such|not found|refuse' "$log" || tail -1 "$log") ($*)" >> "$log"
  fi
  echo $((($(date +%s%N) - s) / 1000000))
}
for i in $(seq 1 "${OVERHEAD_REPEATS:-2}"); do
  rm -rf "$OUT/run-traced-$i" "$OUT/plain-$i.jsonl" "$OUT/traced-$i.jsonl"
  plain+=("$(wall "$OUT/plain-$i.log" "$@" --log "$OUT/plain-$i.jsonl")")
  traced+=("$(wall "$OUT/traced-$i.log" "$stepscope" record -o "$OUT/run-traced-$i" -- "$@" --log "$OUT/traced-$i.jsonl")")
done
{
  echo "command: $*"
  echo "process wall ms (start-up included): plain ${plain[*]}; traced ${traced[*]}"
  grep -h '^run failed' "$OUT"/plain-*.log "$OUT"/traced-*.log 2>/dev/null && failed=1
  python3 "$(dirname "$0")/overhead_ratio.py" --max "${OVERHEAD_MAX:-1.03}" \
    --plain "$OUT"/plain-[0-9]*.jsonl --traced "$OUT"/traced-[0-9]*.jsonl \
    --runs "${OVERHEAD_REPEATS:-2}" || failed=1
  [ -d "$OUT/run-traced-1" ] && "$stepscope" info "$OUT/run-traced-1" 2>&1 | head -20
  exit $failed
} 2>&1 | tee "$OUT/overhead.txt"
exit "${PIPESTATUS[0]}"
