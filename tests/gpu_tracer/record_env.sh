#!/bin/sh
# record_env.sh — `stepscope record`'s environment set-up, without a GPU:
# runs `stepscope record -o RUN -- env` and checks the injection variables,
# the run directory, the usage errors and the refusal to overwrite a run.
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

exit $fail
