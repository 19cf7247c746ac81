#!/bin/bash
# kill_mid_run.sh BUILD_DIR OUT — a traced process SIGKILLed mid-run must leave a trace that
# reads up to its last complete frame, losing at most ~2 s (SPEC §7). Starts a long traced
# run under `stepscope record`, waits until its trace has grown past the header (at most
# 60 s), lets it run 4 s more, SIGKILLs the TRACED PROGRAM (record's child, not record: record
# would only pass the signal on, or die and leave the program writing), then checks that
#   - the trace file did not grow after the kill (the kill really stopped the writer),
#   - `stepscope info` reads the run,
#   - the last record is at most 2.5 s older than the kill and not after it (trace clock =
#     CLOCK_MONOTONIC, read here with Python's time.monotonic_ns).
# Result in $OUT/kill.txt; exit 0 only if all hold (1 at once when the program ends by itself
# before the kill: then nothing was checked).
set -u
build=$1; OUT=$2
stepscope=$build/analyzer/stepscope
run=$OUT/run-kill
rm -rf "$run"
if [ -x "$build/trainer/stepscope-train" ]; then
  cmd=("$build/trainer/stepscope-train" --backend cuda --world 1 --steps 100000)
else
  cmd=(bash -c "while true; do '$build/tests/gpu_tracer/gpu_tracer_cuda_app' > /dev/null; done")
  echo "trainer absent: cuda_app in a loop (each process writes and closes its own file)"
fi
"$stepscope" record -o "$run" -- "${cmd[@]}" > "$OUT/kill.run.log" 2>&1 &
pid=$!
for _ in $(seq 1 120); do   # until the trace holds more than its header frame
  size=$(stat -c %s "$run/rank-00000.trace.zst" 2>/dev/null || echo 0)
  [ "$size" -gt 4096 ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.5
done
if ! kill -0 $pid 2>/dev/null; then   # nothing left to kill: the check cannot be made
  wait $pid; rc=$?
  echo "the traced program ended before the kill (exit status $rc): nothing checked" | tee "$OUT/kill.txt"
  tail -5 "$OUT/kill.run.log"
  exit 1
fi
sleep 4
victim=$(pgrep -P "$pid" | head -1)   # the traced program: record's child
[ -n "$victim" ] || victim=$pid
size_at_kill=$(stat -c %s "$run/rank-00000.trace.zst" 2>/dev/null || echo 0)
killed_at=$(python3 -c 'import time; print(time.monotonic_ns())')
kill -KILL "$victim"
wait $pid 2>/dev/null
sleep 2
size_after=$(stat -c %s "$run/rank-00000.trace.zst" 2>/dev/null || echo 0)
{
  echo "killed pid $victim (record: $pid); trace bytes at the kill $size_at_kill, 2 s later $size_after"
  [ "$size_after" -le $((size_at_kill + 65536)) ] && echo "growth check exit status: 0" ||
    echo "growth check exit status: 1 (the trace kept growing: the writer was not killed)"
  ls -la "$run"
  "$stepscope" info "$run"; echo "info exit status: $?"
  last=$("$stepscope" dump "$run/rank-00000.trace.zst" 2>/dev/null |
    python3 -c 'import sys, json
m = 0
for line in sys.stdin:
    try: r = json.loads(line)
    except ValueError: continue
    for k in ("end_ns", "start_ns", "time_ns"):
        v = r.get(k)
        if isinstance(v, int) and v > m: m = v
print(m)')
  echo "killed_at_monotonic_ns: $killed_at"
  echo "last_record_ns: $last"
  python3 -c "import sys; lost=($killed_at-$last)/1e9; print('lost_s: %.3f' % lost); sys.exit(0 if 0 < $last and -0.05 <= lost <= 2.5 else 1)"
  echo "loss check exit status: $?"
} 2>&1 | tee "$OUT/kill.txt"
grep -q "info exit status: 0" "$OUT/kill.txt" && grep -q "loss check exit status: 0" "$OUT/kill.txt" &&
  grep -q "growth check exit status: 0" "$OUT/kill.txt"
