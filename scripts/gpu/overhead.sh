#!/bin/bash
# overhead.sh BUILD_DIR OUT — tracer overhead and trace density on a GPU.
# Runs the same workload (the CUDA trainer, else tests' cuda_app) alternately untraced and
# traced, 3 times each, and reports the median wall time of each and the ratio; then the
# trace bytes per kernel record (file size / kernel records from `stepscope info --json`).
# Results in $OUT/overhead.txt. Goals (SPEC §6): <= 1 % step time, <= 8 bytes per kernel.
set -eu
build=$1; OUT=$2
stepscope=$build/analyzer/stepscope
if [ -x "$build/trainer/stepscope-train" ]; then
  cmd=("$build/trainer/stepscope-train" --backend cuda --world 1 --steps 30)
else
  cmd=("$build/tests/gpu_tracer/gpu_tracer_cuda_app")
fi
t() { local s; s=$(date +%s%N); "$@" > /dev/null 2>&1 || echo "command failed: $*" >&2; echo $(( ($(date +%s%N) - s) / 1000 )); }
plain=(); traced=()
for _ in 1 2 3; do
  plain+=("$(t "${cmd[@]}")")
  rm -rf "$OUT/run-overhead"
  traced+=("$(t "$stepscope" record -o "$OUT/run-overhead" -- "${cmd[@]}")")
done
median() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
p=$(median "${plain[@]}"); q=$(median "${traced[@]}")
{
  echo "command: ${cmd[*]}"
  echo "untraced_us: ${plain[*]} (median $p)"
  echo "traced_us:   ${traced[*]} (median $q)"
  awk -v p="$p" -v q="$q" 'BEGIN { printf "overhead_ratio: %.4f (whole process wall time, includes start-up)\n", q / p }'
  size=$(stat -c %s "$OUT/run-overhead/rank-00000.trace.zst" 2>/dev/null || echo 0)
  "$stepscope" info "$OUT/run-overhead" --json > "$OUT/run-overhead.info.json"
  kernels=$("$stepscope" dump "$OUT/run-overhead/rank-00000.trace.zst" --kind kernel | wc -l)
  echo "trace_bytes: $size"
  echo "kernel_records: $kernels"
  awk -v s="$size" -v k="$kernels" 'BEGIN { if (k > 0) printf "bytes_per_kernel_record_upper_bound: %.2f (whole file / kernel records)\n", s / k }'
  echo "(per-kind record counts: run-overhead.info.json)"
  echo "NOTE: step-time overhead from the trainer's own per-step log is the number SPEC §6 asks for;"
  echo "      compare train.jsonl step times of a traced and an untraced run when the trainer exists."
} | tee "$OUT/overhead.txt"
