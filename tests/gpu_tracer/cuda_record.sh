#!/bin/sh
# cuda_record.sh — GPU check (label gpu): traces cuda_app under `stepscope
# record` and checks with `stepscope dump` that kernels, copies, memsets,
# synchronizations, launch API calls and NVTX ranges reached the trace.
# Exits 77 (SKIP) when the app finds no CUDA device.
# Usage: cuda_record.sh STEPSCOPE CUDA_APP
set -u
stepscope=$1
app=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stepscope-cuda-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$app" > /dev/null 2>&1
[ $? -eq 77 ] && { echo "no CUDA device: SKIP"; exit 77; }
"$stepscope" record -o "$tmp/run" -- "$app" || exit 1
[ -f "$tmp/run/rank-00000.trace.zst" ] || { echo "no trace written"; exit 1; }
fail=0
for kind in kernel memcpy memset sync api range; do
  n=$("$stepscope" dump "$tmp/run/rank-00000.trace.zst" --kind $kind | wc -l)
  echo "$kind records: $n"
  [ "$n" -gt 0 ] || fail=1
done
exit $fail
