#!/bin/sh
# record_env.sh — `stepscope record`'s environment set-up, without a GPU:
# runs `stepscope record -o RUN -- env` and checks the injection variables,
# the run directory, the usage errors and the refusal to overwrite a run;
# then the summary printed when the command ends (no trace, rank files
# written, a file that cannot be read, an earlier run's files under --force,
# --quiet) and how exit statuses and signals pass between record and the
# command.
# Usage: record_env.sh STEPSCOPE INJECT_LIB
set -u
stepscope=$1
lib=$(realpath "$2")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stepscope-record-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if ! eval "$1"; then echo "check failed: $1" >&2; fail=1; fi; }

unset CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH NCCL_PROFILER_PLUGIN STEPSCOPE_RUN_DIR
"$stepscope" record -o "$tmp/run/a" --inject-lib "$lib" -- env > "$tmp/env.txt"
check '[ $? -eq 0 ]'
check '[ -d "$tmp/run/a" ]'
run_abs=$(realpath "$tmp/run/a")
check 'grep -qx "CUDA_INJECTION64_PATH=$lib" "$tmp/env.txt"'
check 'grep -qx "NVTX_INJECTION64_PATH=$lib" "$tmp/env.txt"'
check 'grep -qx "NCCL_PROFILER_PLUGIN=$lib" "$tmp/env.txt"'
check 'grep -qx "STEPSCOPE_RUN_DIR=$run_abs" "$tmp/env.txt"'
check 'grep -q "^STEPSCOPE_RECORD_PID=[0-9][0-9]*$" "$tmp/env.txt"'
check 'grep -q "^STEPSCOPE_CONFIG_JSON={\"command\":\[\"env\"\]}$" "$tmp/env.txt"'

# Without --inject-lib the library is found next to the executable (build tree layout).
"$stepscope" record -o "$tmp/run/b" -- env > "$tmp/env2.txt"
check 'grep -q "^NVTX_INJECTION64_PATH=.*libstepscope_inject.so$" "$tmp/env2.txt"'

# Another profiler's injection is left alone; --no-nccl leaves the plugin unset.
CUDA_INJECTION64_PATH=/opt/other/libprof.so "$stepscope" record -o "$tmp/run/c" --no-nccl \
  --inject-lib "$lib" -- env > "$tmp/env3.txt" 2> "$tmp/err3.txt"
check 'grep -qx "CUDA_INJECTION64_PATH=/opt/other/libprof.so" "$tmp/env3.txt"'
check 'grep -q "already set" "$tmp/err3.txt"'
check '! grep -q "^NCCL_PROFILER_PLUGIN=" "$tmp/env3.txt"'

# The command's exit status is passed through; usage errors exit 2.
"$stepscope" record -o "$tmp/run/d" --inject-lib "$lib" -- sh -c 'exit 3'
check '[ $? -eq 3 ]'
"$stepscope" record -- env > /dev/null 2>&1
check '[ $? -eq 2 ]'
"$stepscope" record -o "$tmp/run/e" > /dev/null 2>&1
check '[ $? -eq 2 ]'
"$stepscope" record --help > /dev/null
check '[ $? -eq 0 ]'
"$stepscope" record -o "$tmp/run/f" --inject-lib "$lib" -- /nonexistent/cmd 2> /dev/null
check '[ $? -eq 127 ]'

# A run directory that already holds traces is refused without --force.
: > "$tmp/run/a/rank-00000.trace.zst"
"$stepscope" record -o "$tmp/run/a" --inject-lib "$lib" -- true 2> /dev/null
check '[ $? -eq 1 ]'
"$stepscope" record -o "$tmp/run/a" --force --inject-lib "$lib" -- true
check '[ $? -eq 0 ]'

# The command runs as record's child: STEPSCOPE_RECORD_PID is the command's own pid.
"$stepscope" record -q -o "$tmp/run/g" --inject-lib "$lib" -- sh -c 'echo "$$ $STEPSCOPE_RECORD_PID"' > "$tmp/pid.txt"
check '[ "$(cut -d" " -f1 "$tmp/pid.txt")" = "$(cut -d" " -f2 "$tmp/pid.txt")" ]'

# Summaries. Nothing written: record says so and why that usually happens.
"$stepscope" record -o "$tmp/run/h" --inject-lib "$lib" -- true 2> "$tmp/sum1.txt"
check 'grep -q "no trace was written to $tmp/run/h" "$tmp/sum1.txt"'
# A readable rank file and an empty one written by the command.
sample=$(dirname "$0")/../../samples/cpu-dp2pp2-1f1b/rank-00001.trace.zst
"$stepscope" record -o "$tmp/run/h" --inject-lib "$lib" -- \
  sh -c "cp '$sample' \"\$STEPSCOPE_RUN_DIR/rank-00001.trace.zst\"; : > \"\$STEPSCOPE_RUN_DIR/rank-00002.trace.zst\"" \
  2> "$tmp/sum2.txt"
check '[ $? -eq 0 ]'
check 'grep -q "2 trace files written to $tmp/run/h (.* kB, rank 1); 1 cannot be read" "$tmp/sum2.txt"'
check 'grep -q "warning: .*rank-00002.trace.zst: .*empty file" "$tmp/sum2.txt"'
check 'grep -q "next: stepscope analyze $tmp/run/h" "$tmp/sum2.txt"'
# Under --force, files the command did not touch are an earlier run's: once it has
# written a rank file they are removed, and so are the earlier run's derived outputs
# (issue 34 defect 7), but not a file of the user's.
printf '{"traceEvents":[\n{"ph":"M","name":"process_name"}]}' > "$tmp/run/h/trace.json"
printf '{"schema_version":1,"generator":"stepscope analyze 0.1.0","run":{}}' > "$tmp/run/h/report.json"
printf '{"mine":1}' > "$tmp/run/h/notes.json"
"$stepscope" record -o "$tmp/run/h" --force --inject-lib "$lib" -- \
  sh -c "cp '$sample' \"\$STEPSCOPE_RUN_DIR/rank-00003.trace.zst\"" 2> "$tmp/sum3.txt"
cat "$tmp/sum3.txt"
check 'grep -q "removed the earlier run.s derived outputs .*trace.json" "$tmp/sum3.txt"'
check 'grep -q "removed 2 rank files of the earlier run that the command did not write" "$tmp/sum3.txt"'
check 'grep -q "1 trace file written to .*" "$tmp/sum3.txt"'
check '[ ! -e "$tmp/run/h/trace.json" ] && [ ! -e "$tmp/run/h/report.json" ]'
check '[ ! -e "$tmp/run/h/rank-00001.trace.zst" ] && [ ! -e "$tmp/run/h/rank-00002.trace.zst" ]'
check '[ -e "$tmp/run/h/rank-00003.trace.zst" ] && [ -e "$tmp/run/h/notes.json" ]'
"$stepscope" record -q -o "$tmp/run/h" --force --inject-lib "$lib" -- true 2> "$tmp/sum4.txt"
check '[ ! -s "$tmp/sum4.txt" ]'

# A file that exists but cannot be executed: 126, no summary.
"$stepscope" record -o "$tmp/run/i" --inject-lib "$lib" -- "$tmp/env.txt" 2> "$tmp/err5.txt"
check '[ $? -eq 126 ]'
check '! grep -q "no trace" "$tmp/err5.txt"'

# A command killed by a signal: record dies of the same signal (the shell sees 128+15).
"$stepscope" record -q -o "$tmp/run/j" --inject-lib "$lib" -- sh -c 'kill -TERM $$'
check '[ $? -eq 143 ]'
# SIGTERM sent to record alone reaches the command, and record ends with it.
"$stepscope" record -q -o "$tmp/run/k" --inject-lib "$lib" -- sleep 30 &
rec=$!
sleep 0.5
kill -TERM $rec
start=$(date +%s)
wait $rec
check '[ $? -eq 143 ]'
check '[ $(( $(date +%s) - start )) -lt 10 ]'

exit $fail
