#!/bin/sh
# traced_zero.sh — a traced ZeRO-2/3 run, checked and analyzed.
#
# usage: traced_zero.sh TRAINER CHECKER STEPSCOPE WORLD STEPS ZERO GROUP "CHECKER ARGS" [TRAINER ARGS...]
# Runs stepscope-train --zero ZERO with --trace (four layers, one per bucket, two
# micro-batches), checks the run directory with check_trace_run (metadata, ranges, every
# collective seen by all of its members), then `stepscope analyze --json` and checks the
# report: no incomplete collective; reduce_scatter rows of the gradient group GROUP ("dp",
# or "dp_cp"), and all_gather rows of it; every instance of GROUP matched on all of its
# ranks. Counts the GROUP instances per step and requires a multiple of the
# steps (the same number of reduce-scatters every step).
set -u
trainer=$1 checker=$2 stepscope=$3 world=$4 steps=$5 zero=$6 group=$7 check_args=$8
shift 8
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-trace-zero.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
"$trainer" --backend cpu --world "$world" --zero "$zero" --steps "$steps" --layers 4 --hidden 32 \
    --heads 4 --seq 16 --batch 8 --microbatches 2 --bucket-mb 0.02 --quiet --trace "$dir/run" "$@" \
    >"$dir/train.out" 2>&1 || { echo "FAIL: training failed"; cat "$dir/train.out"; exit 1; }
# shellcheck disable=SC2086
"$checker" "$dir/run" "$world" "$steps" $check_args || exit 1
"$stepscope" analyze "$dir/run" --json "$dir/report.json" >"$dir/report.txt" 2>&1 ||
    { echo "FAIL: stepscope analyze failed"; cat "$dir/report.txt"; exit 1; }
grep -A14 '== collectives ==' "$dir/report.txt"
grep -q '"incomplete":0' "$dir/report.json" || { echo "FAIL: incomplete collectives"; exit 1; }
for op in reduce_scatter all_gather; do
    grep -q "{\"op\":\"$op\",\"group\":\"$group\",\"bytes\":[0-9]*,\"count\":[1-9]" "$dir/report.json" ||
        { echo "FAIL: no $op row of group $group in the collectives summary"; exit 1; }
done
grep -q '"allreduce' "$dir/report.txt" && { echo "FAIL: a bucket all-reduce under --zero $zero"; exit 1; }
inst() { # inst OP: "present comm_size" of every instance of OP in GROUP
    grep -o "\"op\":\"$1\",\"group\":\"$group\",\"comm_id\":\"[0-9a-f]*\",\"seq\":[0-9]*,\"bytes\":[0-9]*,\"comm_size\":[0-9]*,\"present\":[0-9]*" \
        "$dir/report.json" | sed 's/.*"comm_size":\([0-9]*\),"present":\([0-9]*\)/\2 \1/'
}
rs=$(inst reduce_scatter | wc -l) ag=$(inst all_gather | wc -l)
inst reduce_scatter >"$dir/i.txt"
inst all_gather >>"$dir/i.txt"
awk '$1 != $2 { bad = 1 } END { exit bad }' "$dir/i.txt" ||
    { echo "FAIL: a $group instance was not seen by all of its ranks"; exit 1; }
echo "instances of $group: reduce_scatter $rs, all_gather $ag over $steps steps"
[ "$rs" -gt 0 ] && [ "$ag" -gt 0 ] || { echo "FAIL: no $group reduce-scatter or all-gather"; exit 1; }
[ $((rs % steps)) -eq 0 ] || { echo "FAIL: $rs reduce-scatters is not the same number every step"; exit 1; }
echo "OK: traced --zero $zero run checked and analyzed"
