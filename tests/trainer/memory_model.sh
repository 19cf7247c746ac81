#!/bin/bash
# memory_model.sh TRAINER STEPSCOPE — the memory model (model/memory_model.c, the one
# implementation the planner shares) against what the trainer really allocates: for layouts
# covering DP, TP+SP, PP (AFAB, 1F1B, interleaved), CP, ZeRO 1-3, recomputation, bf16
# activations, bf16 GEMM weights (--gemm-weights bf16: the working copy) and bucket sizes, every rank's predicted total must EQUAL the device API's
# peak of live allocations that the trainer writes beside it ("memory" metadata), and the
# components must add up to the total. One step each, traced; a few seconds per layout.
set -u
trainer=$1 stepscope=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-memory-model.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
fail=0
layouts=(
  "--world 1"
  "--world 2 --dp 2"
  "--world 2 --pp 2 --schedule afab --activations bf16 --recompute selective"
  "--world 4 --dp 4 --zero 2"
  "--world 4 --dp 2 --pp 2 --zero 1 --recompute full"
  "--world 2 --dp 2 --zero 3 --bucket-mb 0.05"
  "--world 2 --tp 2 --sp"
  "--world 4 --dp 2 --cp 2 --zero 3 --bucket-mb 0.05"
  "--world 2 --pp 2 --schedule interleaved --layers 4 --zero 1"
  "--world 4 --pp 4 --layers 4 --microbatches 8"
  "--world 1 --experts 4 --top-k 2 --layers 4 --moe-every 2"
  "--world 4 --dp 4 --ep 2 --experts 4 --top-k 2 --zero 1"
  "--world 4 --dp 2 --pp 2 --ep 2 --experts 8 --top-k 2 --layers 4 --activations bf16"
  "--world 2 --dp 2 --gemm-weights bf16"
  "--world 2 --dp 2 --zero 1 --gemm-weights bf16 --activations bf16"
  "--world 4 --dp 2 --pp 2 --zero 2 --gemm-weights bf16"
  "--world 2 --pp 2 --schedule interleaved --layers 4 --zero 1 --gemm-weights bf16"
  "--world 4 --dp 2 --pp 2 --schedule interleaved --layers 4 --zero 1 --gemm-weights bf16"
  "--world 8 --dp 4 --pp 2 --schedule interleaved --virtual-stages 3 --layers 6 --microbatches 2 --zero 1 --gemm-weights bf16"
  "--world 2 --dp 2 --experts 4 --top-k 2 --zero 1 --gemm-weights bf16"
  "--world 1 --zero 1 --gemm-weights bf16"
  "--world 4 --dp 2 --tp 2 --sp --zero 1 --gemm-weights bf16"
  "--world 4 --dp 2 --pp 2 --zero 1 --gemm-weights bf16"
  "--world 2 --dp 2 --zero 2 --gemm-weights bf16 --bucket-mb 0.05"
  "--world 4 --dp 2 --cp 2 --zero 2 --gemm-weights bf16"
)
for args in "${layouts[@]}"; do
  run=$dir/run
  rm -rf "$run"
  # shellcheck disable=SC2086
  if ! "$trainer" --quiet --steps 1 --trace "$run" $args > "$dir/log" 2>&1; then
    echo "FAILED to run: stepscope-train $args"; cat "$dir/log"; fail=1; continue
  fi
  for f in "$run"/rank-*.trace.zst; do
    "$stepscope" dump "$f" --kind metadata | grep '"key":"memory"' | tail -1 > "$dir/memory.json"
    python3 - "$dir/memory.json" "$args" "$(basename "$f")" <<'PY' || fail=1
import json, sys
rec = json.load(open(sys.argv[1]))
m = json.loads(rec["value_json"])
p = m["predicted"]
parts = p["parameters"] + p["gradients"] + p["optimizer"] + p["activations"] + p["other"]
ok = p["total"] == m["measured_peak_bytes"] and parts == p["steady"] and p["total"] >= p["steady"]
print("%s %-70s %s predicted %d measured %d (%s)" % ("ok  " if ok else "FAIL", sys.argv[2],
      sys.argv[3], p["total"], m["measured_peak_bytes"], m["measured_source"]))
sys.exit(0 if ok else 1)
PY
  done
done
exit $fail
