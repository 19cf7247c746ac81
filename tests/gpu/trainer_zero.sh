#!/bin/sh
# trainer_zero.sh — ZeRO-1/2 on the CUDA backend against --zero 0, and its device memory
# against the memory model: the test gpu.trainer_zero and the `d5_zero` step of
# scripts/gpu/window.sh's deferred call.
#
# usage: trainer_zero.sh TRAINER STEPSCOPE [OUTDIR]
# Two ranks on the one GPU (--world 2 --dp 2, NCCL_MULTI_RANK_GPU_ENABLE=1), the tiny model
# in bf16 precision with bf16 activations and the GEMMs reading the model's bf16 working copy of
# their weights (--gemm-weights bf16, what auto means there: trainer/model_gemm.c, recast after
# every update), 2 micro-batches per step, 6 steps, traced, once for each of --zero 0, 1 and 2.
# Checks:
#   - losses against ZeRO-0's at every step, relative difference <= 1e-4 for ZeRO-1 (it differs
#     only in where AdamW runs and in the gradient norm's summation order: DP/ZeRO traffic,
#     gradients and the optimizer are fp32; the GEMMs read the same bf16 working copy, cast
#     from the same fp32 weights) and <= 1e-3 for ZeRO-2 (its gradients are reduce-scattered micro-batch by
#     micro-batch, another fp32 summation order, which the bf16 activations can round up);
#     on the CPU backend the same runs (--backend cpu --gemm-weights bf16) differ by 0 at the
#     log's digits and <= 1e-7 (tests trainer.equivalence.gemm_bf16_*); and the loss falls;
#   - memory, every rank: the memory model's prediction (model/memory_model.c: parameters,
#     the GEMM weights' bf16 working copy, gradients, moments, activations) against the
#     measured peak, which with two ranks on one GPU is the device API's own (every cudaMalloc
#     of the device plus the kernels' scratch): measured - predicted must be
#     >= 0 and <= 96 MiB (the kernels' scratch, which the model does not count: the cuBLASLt
#     workspace alone is 40 MiB), and that unmodelled rest must be the same, within 64 KiB,
#     under ZeRO-1 and ZeRO-2 as under ZeRO-0 (the scratch follows the model's shapes, and the
#     optimizer's reductions use a fixed one), so that what ZeRO saves or adds is what the model
#     says. In this mode ZeRO-1/2 keep the fp32 master weights only as the rank's shard
#     (trainer/master_shard.c: the bf16 GEMM weights and an fp32 copy of the rest replicated),
#     so the model predicts per rank 3,849,768 bytes under ZeRO-0, 3,092,520 under ZeRO-1
#     (757,248 saved) and 4,057,128 under ZeRO-2 (207,360 more: the bucket buffers of so small
#     a model), as the same runs on the CPU backend measure them exactly (one step);
#   - the runs really ran ZeRO (the trainer's layout line).
# These tolerances are chosen, not yet measured on a GPU; the sharded masters (issue 31 item 6,
# steps 3-5) have never run on one either, nor their working copies' gather (comm_allgatherv:
# one ncclBroadcast per member inside one ncclGroupStart/End, trainer/cuda/comm_nccl.c).
#
# Exit: 0 passed; 1 failed; 77 (SKIP) when there is no usable GPU ("--backend cuda: no
# usable GPU"), or when two ranks cannot share the one GPU (NCCL < 2.30). The window treats a
# skip as a failure. STEPSCOPE_DRY_RUN=1: checks every configuration with --check-config
# instead of running it (window.sh --dry-run).
set -u
trainer=$1
stepscope=$2
out=${3:-}
if [ -z "$out" ]; then
  out=$(mktemp -d "${TMPDIR:-/tmp}/ss-gpu-zero.XXXXXX") || exit 1
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out" || exit 1
export NCCL_MULTI_RANK_GPU_ENABLE=1 STEPSCOPE_PRECISION=bf16
common="--backend cuda --model tiny --layers 2 --hidden 64 --heads 4 --seq 32 --batch 8
  --microbatches 2 --steps 6 --seed 11 --activations bf16 --gemm-weights bf16 --world 2 --dp 2
  --watchdog-s 60"

if [ "${STEPSCOPE_DRY_RUN:-0}" = 1 ]; then
  for z in 0 1 2; do
    # shellcheck disable=SC2086
    "$trainer" $common --zero $z --check-config > /dev/null ||
      { echo "dry run: invalid configuration: $common --zero $z"; exit 1; }
  done
  echo "dry run: 3 configurations valid"
  exit 0
fi

# run ZERO: one traced training run, its log in $out/zZERO.jsonl, its trace in $out/zZERO
run() {
  z=$1
  rm -rf "$out/z$z"
  # shellcheck disable=SC2086
  "$trainer" $common --zero "$z" --trace "$out/z$z" --log "$out/z$z.jsonl" > "$out/z$z.out" 2>&1 &&
    return 0
  if grep -q "no usable GPU" "$out/z$z.out"; then
    echo "SKIP: no usable GPU: $(grep -m1 'no usable GPU' "$out/z$z.out")"; exit 77
  fi
  if grep -q "ranks share one GPU" "$out/z$z.out"; then
    echo "SKIP: two ranks cannot share this GPU here:"; grep -m1 "ranks share one GPU" "$out/z$z.out"
    exit 77
  fi
  echo "FAIL: --zero $z failed:"; tail -30 "$out/z$z.out"; exit 1
}

loss() { sed -n 's/.*"loss":\([^,]*\),.*/\1/p' "$1"; }

# compare ZERO TOL: the losses of --zero ZERO against --zero 0's
compare() {
  z=$1 tol=$2
  loss "$out/z0.jsonl" > "$out/z0.loss"
  loss "$out/z$z.jsonl" > "$out/z$z.loss"
  n=$(wc -l < "$out/z0.loss")
  m=$(wc -l < "$out/z$z.loss")
  [ "$n" -eq 6 ] && [ "$m" -eq 6 ] ||
    { echo "FAIL: expected 6 logged steps, got $n (zero 0) and $m (zero $z)"; return 1; }
  paste "$out/z0.loss" "$out/z$z.loss" | awk -v z="$z" -v tol="$tol" '
    { d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1);
      printf "step %d  zero 0 %.7f  zero %s %.7f  rel %.2e\n", NR - 1, $1, z, $2, r;
      if (r > tol || $2 != $2) bad = 1 }
    END { exit bad }' || { echo "FAIL: zero $z: losses differ from zero 0 beyond $tol"; return 1; }
  grep -q "zero $z" "$out/z$z.out" ||
    { echo "FAIL: zero $z: the trainer's output does not show zero $z"; return 1; }
  return 0
}

# memory ZERO: prints "rank predicted measured" for every rank of --zero ZERO's trace
memory() {
  for f in "$out/z$1"/rank-*.trace.zst; do
    "$stepscope" dump "$f" --kind metadata | grep '"key":"memory"' | tail -1 |
      python3 -c '
import json, sys
m = json.loads(json.load(sys.stdin)["value_json"])
print(sys.argv[1], m["predicted"]["total"], m["measured_peak_bytes"], m["measured_source"])
' "$(basename "$f")" || echo "$(basename "$f") none none none"
  done
}

rc=0
for z in 0 1 2; do run $z; done
compare 1 1e-4 || rc=1
compare 2 1e-3 || rc=1
first=$(head -1 "$out/z0.loss") last=$(tail -1 "$out/z0.loss")
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.01) }' ||
  { echo "FAIL: the loss did not fall ($first -> $last)"; rc=1; }
for z in 0 1 2; do memory $z > "$out/z$z.memory"; done
python3 - "$out" <<'PY' || rc=1
import sys
out = sys.argv[1]
rest, bad = {}, 0
for z in (0, 1, 2):
    for line in open("%s/z%d.memory" % (out, z)):
        rank, pred, meas, source = line.split(None, 3)
        if pred == "none":
            print("FAIL zero %d %s: no memory metadata" % (z, rank)); bad = 1; continue
        pred, meas = int(pred), int(meas)
        rest[(z, rank)] = meas - pred
        ok = 0 <= meas - pred <= 96 << 20
        print("%s zero %d %s: predicted %d measured %d (%s) unmodelled %.2f MiB"
              % ("ok  " if ok else "FAIL", z, rank, pred, meas, source.strip(),
                 (meas - pred) / 2**20))
        bad |= not ok
for (z, rank), r in sorted(rest.items()):
    if z and (0, rank) in rest and abs(r - rest[(0, rank)]) > 64 << 10:
        print("FAIL zero %d %s: unmodelled %d bytes against zero 0's %d: the model's ZeRO "
              "difference is not the measured one" % (z, rank, r, rest[(0, rank)]))
        bad = 1
sys.exit(bad)
PY
[ $rc = 0 ] && echo "OK: ZeRO-1/2 on the CUDA backend match ZeRO-0 (1e-4, 1e-3) and the memory model"
exit $rc
