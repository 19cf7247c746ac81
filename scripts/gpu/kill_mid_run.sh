#!/bin/bash
# kill_mid_run.sh BUILD_DIR OUT — a traced process SIGKILLed mid-run must leave a trace that
# reads up to its last complete frame (at most ~2 s lost). Starts a long traced run, kills it
# after 5 s, then runs `stepscope info` (which must succeed, possibly with a truncation
# warning) and counts kernel records. Result in $OUT/kill.txt.
set -u
build=$1; OUT=$2
stepscope=$build/analyzer/stepscope
rm -rf "$OUT/run-kill"
if [ -x "$build/trainer/stepscope-train" ]; then
  cmd=("$build/trainer/stepscope-train" --backend cuda --world 1 --steps 100000)
else
  cmd=(bash -c "while true; do $build/tests/gpu_tracer/gpu_tracer_cuda_app > /dev/null; done")
  echo "trainer absent: cuda_app in a loop (each process writes and closes its own file)"
fi
"$stepscope" record -o "$OUT/run-kill" -- "${cmd[@]}" > /dev/null 2>&1 &
pid=$!
sleep 5
kill -KILL $pid
wait $pid 2>/dev/null
{
  ls -la "$OUT/run-kill"
  "$stepscope" info "$OUT/run-kill"; echo "info exit status: $?"
} 2>&1 | tee "$OUT/kill.txt"
grep -q "info exit status: 0" "$OUT/kill.txt"
