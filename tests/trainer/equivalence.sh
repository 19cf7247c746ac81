#!/bin/sh
# equivalence.sh — parallel-equivalence check for stepscope-train.
#
# usage: equivalence.sh TRAINER TOLERANCE "REFERENCE ARGS" "CANDIDATE ARGS" [differ]
# Runs the trainer twice with the common tiny configuration plus each argument
# set, and compares the loss of every step (from --log) with a relative
# tolerance. Exits 0 when all steps agree, 1 otherwise (printing both curves).
# With `differ`, the two curves must also not be bitwise identical (the candidate's
# option really changed the numerics, e.g. bf16 activations).
# CANDIDATE_LAUNCHER (environment), when set, prefixes the candidate command
# (e.g. an outside launcher that starts the ranks itself).
set -u
trainer=$1 tol=$2 ref=$3 cand=$4 differ=${5:-}
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-equiv.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
common="--backend cpu --model tiny --layers 4 --hidden 32 --heads 4 --seq 16 --batch 8 --steps 5 --seed 7 --quiet --watchdog-s 30"
# shellcheck disable=SC2086
"$trainer" $common $ref --log "$dir/ref.jsonl" >"$dir/ref.out" 2>&1 || { echo "reference run failed: $ref"; cat "$dir/ref.out"; exit 1; }
# shellcheck disable=SC2086
${CANDIDATE_LAUNCHER:-} "$trainer" $common $cand --log "$dir/cand.jsonl" >"$dir/cand.out" 2>&1 || { echo "candidate run failed: $cand"; cat "$dir/cand.out"; exit 1; }
loss() { sed -n 's/.*"loss":\([^,]*\),.*/\1/p' "$1"; }
loss "$dir/ref.jsonl" >"$dir/ref.loss"
loss "$dir/cand.jsonl" >"$dir/cand.loss"
n=$(wc -l <"$dir/ref.loss")
[ "$n" -eq 5 ] || { echo "expected 5 logged steps, got $n"; exit 1; }
paste "$dir/ref.loss" "$dir/cand.loss" | awk -v tol="$tol" '
  { d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1);
    printf "step %d  reference %.9f  candidate %.9f  rel %.2e\n", NR - 1, $1, $2, r;
    if (r > tol || $2 != $2) bad = 1 }
  END { exit bad }' || { echo "FAIL: losses differ beyond $tol: [$ref] vs [$cand]"; exit 1; }
if [ "$differ" = differ ] && cmp -s "$dir/ref.loss" "$dir/cand.loss"; then
  echo "FAIL: [$cand] gave bitwise the losses of [$ref]: the option had no effect"; exit 1
fi
# the losses must also actually change over the run (training happened)
first=$(head -1 "$dir/ref.loss") last=$(tail -1 "$dir/ref.loss")
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.01) }' || { echo "FAIL: loss did not fall ($first -> $last)"; exit 1; }
echo "OK: [$cand] matches [$ref] within $tol"
