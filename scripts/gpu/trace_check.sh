#!/bin/bash
# trace_check.sh — the GPU tracer's owed checks, for a machine with an NVIDIA GPU (see
# docs/gpu-tracer.md). Writes every piece of evidence under $OUT (default ./gpu-evidence):
# versions, build log, ctest -L gpu output, traced runs, `stepscope info` of each, overhead
# and bytes-per-kernel-record numbers, the kill-mid-run result. Never edits the repository.
#
#   OUT=/path scripts/gpu/trace_check.sh [BUILD_DIR]
#
# Steps (each logs to $OUT/<step>.log and is marked PASS/FAIL in $OUT/summary.txt):
#   env        nvidia-smi, nvcc, CUPTI/NCCL libraries, torch version
#   build      cmake -DSTEPSCOPE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90, build everything
#   ctest_gpu  ctest -L gpu (gpu_tracer.cuda_record, others' GPU tests)
#   one_rank   the CUDA trainer (or tests' cuda_app if the trainer is absent) traced, 1 rank
#   four_rank  4 ranks on one GPU (trainer --world 4), NCCL >= 2.30 with multi-rank enabled
#   torchrun   stepscope record -- torchrun --nproc-per-node 2 samples/pytorch/ddp_train.py
#   overhead   same workload traced vs untraced (scripts/gpu/overhead.sh)
#   kill       a traced run SIGKILLed mid-run; the trace must read to its last frame
# Every step has a time limit (STEP_TIMEOUT, default 240 s; the build 600 s) so that a hang
# cannot eat the GPU session; a timed-out step is marked FAIL (rc 124) and the rest go on.
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$PWD/gpu-evidence}
build=${1:-$repo/build-gpucheck}
mkdir -p "$OUT"
summary=$OUT/summary.txt
: > "$summary"
export repo OUT build
step() { # step NAME LIMIT_S FUNCTION: runs FUNCTION in a subshell under `timeout`
  local name=$1 limit=$2 fn=$3 t0 rc
  echo "== $name: $fn (limit ${limit} s)" | tee -a "$OUT/$name.log"
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" bash -c "$(declare -f "$fn" info_of zstd_env newer_nccl_env); $(declare -p stepscope trainer); zstd_env; $fn" \
    >> "$OUT/$name.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then echo "PASS $name ($(( $(date +%s) - t0 )) s)" | tee -a "$summary"
  else echo "FAIL $name (rc $rc, $(( $(date +%s) - t0 )) s, see $name.log)" | tee -a "$summary"; fi
}
# The GPU machine may lack libzstd-dev: use the copy scripts/gpu/trainer_prepare.sh unpacks.
zstd_env() {
  if ! pkg-config --exists libzstd 2>/dev/null && [ -d "$repo/.deps/zstd" ]; then
    export PKG_CONFIG_PATH="$repo/.deps/zstd/usr/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    export LD_LIBRARY_PATH="$repo/.deps/zstd/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
}
stepscope=$build/analyzer/stepscope
trainer=$build/trainer/stepscope-train

env_info() {
  nvidia-smi; nvcc --version
  ls /usr/local/cuda/lib64 /usr/local/cuda/extras/CUPTI/lib64 2>/dev/null | grep -E 'cupti|nccl|cublas'
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())' || true
  git -C "$repo" rev-parse HEAD
}
do_build() {
  cmake -S "$repo" -B "$build" -G Ninja -DSTEPSCOPE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 &&
  cmake --build "$build" -j "$(nproc)"
}
ctest_gpu() { ctest --test-dir "$build" -L gpu --output-on-failure --timeout 120; }
info_of() { "$stepscope" info "$1" && "$stepscope" info "$1" --json > "$OUT/$(basename "$1").info.json"; }
one_rank() {
  rm -rf "$OUT/run-1rank"
  if [ -x "$trainer" ]; then
    "$stepscope" record -o "$OUT/run-1rank" -- "$trainer" --backend cuda --world 1 --steps 10
  else
    echo "trainer not built: tracing tests/gpu_tracer's cuda_app instead"
    "$stepscope" record -o "$OUT/run-1rank" -- "$build/tests/gpu_tracer/gpu_tracer_cuda_app"
  fi
  info_of "$OUT/run-1rank"
  "$stepscope" dump "$OUT/run-1rank/rank-00000.trace.zst" --kind kernel | head -5
  "$stepscope" dump "$OUT/run-1rank/rank-00000.trace.zst" --kind collective | head -5
}
# Several ranks on one GPU need NCCL >= 2.30: the carried sm_90-only NCCL 2.32
# (scripts/gpu/trainer_prepare.sh), unpacked once, goes first on the library path.
newer_nccl_env() {
  local lib=$repo/.nccl/nvidia/nccl/lib
  if [ -f "$repo/.deps/nccl/libnccl.so.2.xz" ] && [ ! -e "$lib/libnccl.so.2" ]; then
    python3 "$repo/scripts/gpu/nccl_slim.py" unpack "$repo/.deps/nccl/libnccl.so.2.xz" "$lib" || rm -f "$lib/libnccl.so.2"
  fi
  if [ -e "$lib/libnccl.so.2" ]; then export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
}
four_rank() {
  [ -x "$trainer" ] || { echo "trainer not built"; return 1; }
  rm -rf "$OUT/run-4rank"
  newer_nccl_env
  NCCL_MULTI_RANK_GPU_ENABLE=1 "$stepscope" record -o "$OUT/run-4rank" -- \
    "$trainer" --backend cuda --world 4 --dp 2 --pp 2 --steps 6
  info_of "$OUT/run-4rank"
  # Every NCCL kernel must be matched by a collective's correlation id (checked by the analyzer).
  "$stepscope" analyze "$OUT/run-4rank" --json "$OUT/run-4rank.report.json"
}
torchrun_ddp() {
  rm -rf "$OUT/run-torchrun"
  newer_nccl_env
  NCCL_MULTI_RANK_GPU_ENABLE=1 "$stepscope" record -o "$OUT/run-torchrun" -- \
    torchrun --nproc-per-node 2 "$repo/samples/pytorch/ddp_train.py" --steps 20
  info_of "$OUT/run-torchrun"
  "$stepscope" analyze "$OUT/run-torchrun" --json "$OUT/run-torchrun.report.json"
}
overhead() { "$repo/scripts/gpu/overhead.sh" "$build" "$OUT"; }
kill_mid_run() { "$repo/scripts/gpu/kill_mid_run.sh" "$build" "$OUT"; }

lim=${STEP_TIMEOUT:-240}
step env 60 env_info
step build 600 do_build
if [ ! -x "$stepscope" ]; then echo "FAIL: no stepscope binary; stopping" | tee -a "$summary"; exit 1; fi
step ctest_gpu "$lim" ctest_gpu
step one_rank "$lim" one_rank
step four_rank "$lim" four_rank
step torchrun "$lim" torchrun_ddp
step overhead "$lim" overhead
step kill 90 kill_mid_run
cat "$summary"
