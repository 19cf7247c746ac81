#!/bin/sh
# cp_equivalence.sh — context-parallel equivalence check for stepscope-train.
#
# usage: cp_equivalence.sh TRAINER COMPARE_PARAMS LOSS_TOL WEIGHT_TOL "BASE ARGS" "CP ARGS"
# Runs the common tiny configuration three times:
#   - one rank (--microbatches 2): the reference losses and gradient norms;
#   - BASE ARGS: the same grid as the candidate without --cp (its weights are the
#     reference for the candidate's, shard by shard, since they cut the model alike);
#   - CP ARGS: the candidate.
# Passes when every step's loss and gradient norm of the candidate equal the
# single rank's within LOSS_TOL (relative), the loss fell, and after the last
# step every parameter of every candidate shard equals the base run's within
# WEIGHT_TOL (absolute; compare_params, from the final checkpoints).
set -u
trainer=$1 compare=$2 tol=$3 wtol=$4 base=$5 cand=$6
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-cp-equiv.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
common="--backend cpu --model tiny --layers 4 --hidden 32 --heads 4 --seq 16 --batch 8 --steps 5 --seed 7 --quiet --watchdog-s 30"
run() { # name args...
    name=$1
    shift
    # shellcheck disable=SC2086
    "$trainer" $common "$@" --log "$dir/$name.jsonl" --checkpoint-dir "$dir/$name.ckpt" >"$dir/$name.out" 2>&1 ||
        { echo "$name run failed: $*"; cat "$dir/$name.out"; exit 1; }
}
# shellcheck disable=SC2086
run ref --microbatches 2
# shellcheck disable=SC2086
run base $base
# shellcheck disable=SC2086
run cand $cand
field() { sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p" "$dir/$1.jsonl"; }
for f in loss grad_norm; do
    field ref $f >"$dir/ref.$f"
    field cand $f >"$dir/cand.$f"
    n=$(wc -l <"$dir/ref.$f")
    [ "$n" -eq 5 ] || { echo "expected 5 logged steps, got $n"; exit 1; }
    paste "$dir/ref.$f" "$dir/cand.$f" | awk -v tol="$tol" -v what="$f" '
      { d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1);
        printf "step %d  %s  one rank %.9f  candidate %.9f  rel %.2e\n", NR - 1, what, $1, $2, r;
        if (r > tol || $2 != $2) bad = 1 }
      END { exit bad }' || { echo "FAIL: $f differs beyond $tol: [$cand] vs one rank"; exit 1; }
done
first=$(head -1 "$dir/ref.loss") last=$(tail -1 "$dir/ref.loss")
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.01) }' || { echo "FAIL: loss did not fall ($first -> $last)"; exit 1; }
"$compare" "$dir/base.ckpt/step-00000005" "$dir/cand.ckpt/step-00000005" "$wtol" ||
    { echo "FAIL: final weights of [$cand] differ from [$base] beyond $wtol"; exit 1; }
echo "OK: [$cand] matches one rank (losses, gradient norms within $tol) and [$base] (weights within $wtol)"
