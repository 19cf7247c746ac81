#!/bin/sh
# params_equivalence.sh — final-weight equivalence of two layouts of stepscope-train.
#
# usage: params_equivalence.sh TRAINER MAX_ABS_DIFF "REFERENCE ARGS" "CANDIDATE ARGS" [NAMES]
# Runs the trainer twice (the tiny configuration of equivalence.sh plus each argument
# set) with --debug-dump-params, which makes every rank write each of its parameter
# elements as "name layer index value". Every element the candidate's ranks hold (DP
# replicas and the tied embedding's two copies included) must exist in the reference
# and agree within MAX_ABS_DIFF, and every reference element must be held by some
# candidate rank. Exits 0 when so, 1 otherwise (naming the worst element, on stderr). The
# layouts must not cut parameters differently (no --tp: its slices are not compared), unless
# NAMES (an extended regular expression on the parameter name, e.g. '^(exp|router)') limits the
# comparison to parameters no layout cuts (the experts and routers, replicated over TP).
set -u
trainer=$1 tol=$2 ref=$3 cand=$4 names=${5:-.}
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-params.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
common="--backend cpu --model tiny --layers 4 --hidden 32 --heads 4 --seq 16 --batch 8 --steps 5 --seed 7 --quiet --watchdog-s 30"
# shellcheck disable=SC2086
"$trainer" $common $ref --debug-dump-params "$dir/ref" >"$dir/ref.out" 2>&1 || { echo "reference run failed: $ref"; cat "$dir/ref.out"; exit 1; }
# shellcheck disable=SC2086
"$trainer" $common $cand --debug-dump-params "$dir/cand" >"$dir/cand.out" 2>&1 || { echo "candidate run failed: $cand"; cat "$dir/cand.out"; exit 1; }
cat "$dir"/ref/*.params | awk -v re="$names" '$1 ~ re' >"$dir/ref.txt"
cat "$dir"/cand/*.params | awk -v re="$names" '$1 ~ re' >"$dir/cand.txt"
awk -v tol="$tol" '
  NR == FNR { ref[$1 " " $2 " " $3] = $4; n++; next }
  { k = $1 " " $2 " " $3
    if (!(k in ref)) { print "FAIL: candidate element " k " is not in the reference"; bad = 1; next }
    d = $4 - ref[k]; if (d < 0) d = -d
    if (d > worst || worst == "") { worst = d; wk = k }
    seen[k] = 1; m++ }
  END {
    for (k in ref) if (!(k in seen)) { print "FAIL: reference element " k " held by no candidate rank"; bad = 1; break }
    printf "%d reference elements, %d candidate elements, worst |diff| %.3g at %s\n", n, m, worst, wk
    if (worst > tol) { print "FAIL: final weights differ beyond " tol; bad = 1 }
    exit bad }' "$dir/ref.txt" "$dir/cand.txt" >"$dir/cmp.txt" ||
    { cat "$dir/cmp.txt" >&2; echo "FAIL: [$ref] vs [$cand]" >&2; exit 1; }
cat "$dir/cmp.txt"
echo "OK: final weights of [$cand] match [$ref] within $tol"
