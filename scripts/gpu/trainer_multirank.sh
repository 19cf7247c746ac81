#!/bin/bash
# trainer_multirank.sh — four ranks on the one GPU (issue 6): DP4, DP2xPP2 1F1B, TP2xDP2 and
# CP2xDP2 (ring attention on NCCL's per-edge links), 5 steps each, traced (steps 2-4),
# analyzed, checked (check_run.py: kernels, collectives, named streams), and laid out as
# committable samples:
#   $OUT/samples/gpu-<dev>-<layout>/{run/,train.jsonl,report.json,run-injected/,report-injected.json,
#   PROVENANCE.md}
# Needs NCCL >= 2.30 with NCCL_MULTI_RANK_GPU_ENABLE=1 (pick_nccl finds the kit's NCCL 2.32,
# PyTorch's or the toolkit's); the trainer prints ncclGetVersion.
#   OUT=/path scripts/gpu/trainer_multirank.sh [MODEL]
source "$(dirname "$0")/trainer_lib.sh"
provenance_header
model=${1:-gpt2-124m}
use_picked_nccl
export NCCL_MULTI_RANK_GPU_ENABLE=1
echo "NCCL: ${NCCL_PICKED_DIR:-none found} (NCCL ${NCCL_PICKED_VERSION:-?})" | tee -a "$summary"
[ -x "$trainer" ] || step build build_gpu

# Two runs per layout: the linked trace (--trace: steps, layout/schedule/FLOPs/memory
# metadata, the trainer's ranges, CUPTI started by the trainer) and the same program under
# `stepscope record` (run-injected/: the trainer traces into record's directory and the
# injection library adds NVTX and NCCL's profiler-plugin events to that one trace, since the
# trainer exports its stepscope symbols; docs/gpu-tracer.md).
layout() { # layout NAME ARGS...
  local name=$1; shift
  local d=$OUT/samples/gpu-$DEV-$name
  local args=(--backend cuda --model "$model" --seq 512 --batch 16 --world 4 "$@")
  rm -rf "$d"; mkdir -p "$d"
  run_logged "$trainer" "${args[@]}" --steps 5 --profile-steps 2:4 --trace "$d/run" \
    --log "$d/train.jsonl" &&
  run_logged "$stepscope" analyze "$d/run" --json "$d/report.json" &&
  run_logged python3 "$repo/scripts/gpu/check_run.py" "$stepscope" "$d/run" --ranks 4 --kernels \
    --named-streams || return 1
  # the same program under `stepscope record`: NCCL's profiler plugin adds the collectives
  run_logged "$stepscope" record -o "$d/run-injected" -- "$trainer" "${args[@]}" --steps 3 \
    --log "$d/train-injected.jsonl" &&
  run_logged "$stepscope" analyze "$d/run-injected" --json "$d/report-injected.json" &&
  run_logged python3 "$repo/scripts/gpu/check_run.py" "$stepscope" "$d/run-injected" --ranks 4 \
    --kernels --collectives --named-streams
  local rc=$?
  cp "$OUT/PROVENANCE.md" "$d/PROVENANCE.md"
  return $rc
}
# The order is the priority: a call stopped at its limit keeps the layouts already done.
step dp4 layout dp4 --dp 4
step dp2pp2-1f1b layout dp2pp2-1f1b --dp 2 --pp 2 --schedule 1f1b --microbatches 4
step tp2dp2 layout tp2dp2 --tp 2 --dp 2
step cp2dp2 layout cp2dp2 --cp 2 --dp 2
provenance_footer
for d in "$OUT"/samples/gpu-$DEV-*/; do cp "$OUT/PROVENANCE.md" "$d/PROVENANCE.md"; done
du -sh "$OUT"/samples/* 2>/dev/null
cat "$summary"
