#!/bin/bash
# trainer_multirank.sh — four ranks on the one GPU (issue 6): DP4, DP2xPP2 with AFAB and with
# 1F1B, TP2xDP2 (with and without SP), DP4 with overlap off, and context parallelism (CP2xDP2
# and a CP4 ring: ring attention on NCCL's per-edge links); each traced for a few steps,
# analyzed, and laid out as committable samples:
#   $OUT/samples/h100-<layout>/{run/,train.jsonl,report.json,run-injected/,report-injected.json,
#   PROVENANCE.md}
# Needs NCCL >= 2.30 with NCCL_MULTI_RANK_GPU_ENABLE=1 (pick_nccl finds .nccl from
# trainer_prepare.sh, PyTorch's or the toolkit's); the trainer prints ncclGetVersion.
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
  local d=$OUT/samples/h100-$name
  local args=(--backend cuda --model "$model" --seq 512 --batch 16 --world 4 "$@")
  rm -rf "$d"; mkdir -p "$d"
  run_logged "$trainer" "${args[@]}" --steps 8 --profile-steps 4:6 --trace "$d/run" \
    --log "$d/train.jsonl" &&
  run_logged "$stepscope" analyze "$d/run" --json "$d/report.json" || return 1
  run_logged "$stepscope" record -o "$d/run-injected" -- "$trainer" "${args[@]}" --steps 5 \
    --log "$d/train-injected.jsonl" &&
  run_logged "$stepscope" analyze "$d/run-injected" --json "$d/report-injected.json" ||
  echo "injected run failed (kept the linked one)"
  cp "$OUT/PROVENANCE.md" "$d/PROVENANCE.md"
}
step dp4 layout dp4 --dp 4
step dp4-overlap-off layout dp4-overlap-off --dp 4 --overlap off
step dp2pp2-afab layout dp2pp2-afab --dp 2 --pp 2 --schedule afab --microbatches 4
step dp2pp2-1f1b layout dp2pp2-1f1b --dp 2 --pp 2 --schedule 1f1b --microbatches 4
step tp2dp2 layout tp2dp2 --tp 2 --dp 2
step tp2dp2-sp layout tp2dp2-sp --tp 2 --dp 2 --sp
step cp2dp2 layout cp2dp2 --cp 2 --dp 2
step cp4 layout cp4 --cp 4
provenance_footer
for d in "$OUT"/samples/h100-*/; do cp "$OUT/PROVENANCE.md" "$d/PROVENANCE.md"; done
du -sh "$OUT"/samples/* 2>/dev/null
cat "$summary"
