#!/bin/sh
# trainer_moe_ep.sh — expert parallelism on the CUDA backend (NCCL all-to-all with uneven
# splits, trainer/cuda/comm_nccl.c) against one CUDA rank: the test gpu.trainer_moe_ep and
# the `d2_moe_ep` step of scripts/gpu/window.sh's deferred call.
#
# usage: trainer_moe_ep.sh TRAINER [OUTDIR]
# For fp32 precision (fp32 activations) and bf16 precision (bf16 activations) it runs the
# tiny MoE model (4 experts, top-2, --aux-loss-coef 0.1 so that a wrong aux-loss scaling
# shows) twice on the GPU: one rank with 2 micro-batches (the reference), and
# `--world 2 --dp 2 --ep 2` with 1 micro-batch each (the same micro-batch size: the
# load-balancing loss is per micro-batch, trainer/README.md "Exactness"), and compares the
# loss of every step: relative difference <= 1e-4 in fp32, <= 1e-2 in bf16 (the two runs
# differ only in summation order — the expert GEMMs' weight gradients over rows of two
# sources at once, the DP/EDP all-reduces; bf16 storage can round those differences up to one
# bf16 step). These tolerances are chosen, not yet measured on a GPU. It also asserts that
# the loss falls and that the candidate really ran two ranks with EP (the trainer's layout
# line).
#
# Exit: 0 passed; 1 failed; 77 (SKIP) when there is no usable GPU ("--backend cuda: no
# usable GPU"), or when two ranks cannot share the one GPU (NCCL < 2.30 or
# NCCL_MULTI_RANK_GPU_ENABLE refused: the trainer's message is printed). The window treats a
# skip as a failure. STEPSCOPE_DRY_RUN=1: checks every configuration with --check-config
# instead of running it (window.sh --dry-run).
set -u
trainer=$1
out=${2:-}
if [ -z "$out" ]; then
  out=$(mktemp -d "${TMPDIR:-/tmp}/ss-gpu-ep.XXXXXX") || exit 1
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out" || exit 1
export NCCL_MULTI_RANK_GPU_ENABLE=1
common="--backend cuda --model tiny --layers 2 --hidden 64 --heads 4 --seq 32 --batch 8 --steps 8
  --seed 11 --experts 4 --top-k 2 --aux-loss-coef 0.1 --watchdog-s 60"
ref="--world 1 --microbatches 2"
cand="--world 2 --dp 2 --ep 2 --microbatches 1"

if [ "${STEPSCOPE_DRY_RUN:-0}" = 1 ]; then
  for a in "--activations fp32 $ref" "--activations fp32 $cand" "--activations bf16 $ref" \
           "--activations bf16 $cand"; do
    # shellcheck disable=SC2086
    "$trainer" $common $a --check-config > /dev/null ||
      { echo "dry run: invalid configuration: $common $a"; exit 1; }
  done
  echo "dry run: 4 configurations valid"
  exit 0
fi

# run NAME PRECISION ACT LAYOUT...: one training run, its log in $out/NAME.jsonl
run() {
  name=$1 prec=$2 act=$3; shift 3
  # shellcheck disable=SC2086
  env STEPSCOPE_PRECISION="$prec" "$trainer" $common --activations "$act" "$@" \
    --log "$out/$name.jsonl" > "$out/$name.out" 2>&1 && return 0
  if grep -q "no usable GPU" "$out/$name.out"; then
    echo "SKIP: no usable GPU: $(grep -m1 'no usable GPU' "$out/$name.out")"; exit 77
  fi
  if grep -q "ranks share one GPU" "$out/$name.out"; then
    echo "SKIP: two ranks cannot share this GPU here:"; grep -m1 "ranks share one GPU" "$out/$name.out"
    exit 77
  fi
  echo "FAIL: run $name failed:"; tail -30 "$out/$name.out"; exit 1
}

loss() { sed -n 's/.*"loss":\([^,]*\),.*/\1/p' "$1"; }

# compare NAME TOL: reference NAME.ref vs candidate NAME.ep2, every step
compare() {
  name=$1 tol=$2
  loss "$out/$name.ref.jsonl" > "$out/$name.ref.loss"
  loss "$out/$name.ep2.jsonl" > "$out/$name.ep2.loss"
  n=$(wc -l < "$out/$name.ref.loss")
  m=$(wc -l < "$out/$name.ep2.loss")
  [ "$n" -eq 8 ] && [ "$m" -eq 8 ] ||
    { echo "FAIL: $name: expected 8 logged steps, got $n (reference) and $m (ep2)"; return 1; }
  paste "$out/$name.ref.loss" "$out/$name.ep2.loss" | awk -v tol="$tol" -v name="$name" '
    { d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1);
      printf "%s step %d  1 rank %.7f  dp2 x ep2 %.7f  rel %.2e\n", name, NR - 1, $1, $2, r;
      if (r > tol || $2 != $2) bad = 1 }
    END { exit bad }' || { echo "FAIL: $name: losses differ beyond $tol"; return 1; }
  first=$(head -1 "$out/$name.ref.loss") last=$(tail -1 "$out/$name.ref.loss")
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.01) }' ||
    { echo "FAIL: $name: the loss did not fall ($first -> $last)"; return 1; }
  # the candidate ran the layout asked for (rank 0's start-up lines name it)
  grep -q "world 2 = dp 2 " "$out/$name.ep2.out" && grep -q ", ep 2:" "$out/$name.ep2.out" ||
    { echo "FAIL: $name: the candidate's output does not show world 2 = dp 2 with ep 2"; return 1; }
  return 0
}

rc=0
run fp32.ref fp32 fp32 $ref
run fp32.ep2 fp32 fp32 $cand
compare fp32 1e-4 || rc=1
run bf16.ref bf16 bf16 $ref
run bf16.ep2 bf16 bf16 $cand
compare bf16 1e-2 || rc=1
[ $rc = 0 ] && echo "OK: dp2 x ep2 on NCCL matches one CUDA rank (fp32 1e-4, bf16 1e-2)"
exit $rc
