#!/bin/sh
# traced_cp.sh — a traced context-parallel run, checked and analyzed.
#
# usage: traced_cp.sh TRAINER CHECKER STEPSCOPE WORLD STEPS CP [TRAINER ARGS...]
# Runs stepscope-train --cp CP with --trace, checks the run directory
# (check_trace_run --p2p --cp CP: layout metadata, ring transfers named "cp",
# point-to-point and not PIPELINE, every send with its receive), then runs
# `stepscope analyze --json` and checks the report: no incomplete collective,
# cp send/recv rows in the summary, and every cp instance matched on both of
# its ranks (present 2) as p2p that is not pipeline traffic.
set -u
trainer=$1 checker=$2 stepscope=$3 world=$4 steps=$5 cp=$6
shift 6
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-trace-cp.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
"$trainer" --backend cpu --world "$world" --cp "$cp" --steps "$steps" --quiet --trace "$dir/run" "$@" ||
    { echo "FAIL: training failed"; exit 1; }
"$checker" "$dir/run" "$world" "$steps" --p2p --cp "$cp" || exit 1
"$stepscope" analyze "$dir/run" --json "$dir/report.json" >"$dir/report.txt" 2>&1 ||
    { echo "FAIL: stepscope analyze failed"; cat "$dir/report.txt"; exit 1; }
grep -q '"incomplete":0' "$dir/report.json" || { echo "FAIL: incomplete collectives"; exit 1; }
for op in send recv; do
    grep -q "{\"op\":\"$op\",\"group\":\"cp\",\"bytes\":[0-9]*,\"count\":[1-9]" "$dir/report.json" ||
        { echo "FAIL: no cp $op row in the collectives summary"; exit 1; }
done
grep -o '"group":"cp","comm_id":"[0-9a-f]*","seq":[0-9]*,"bytes":[0-9]*,"comm_size":[0-9]*,"present":[0-9]*,"p2p":[a-z]*,"pipeline":[a-z]*' \
    "$dir/report.json" | sed 's/.*"present":\([0-9]*\),"p2p":\([a-z]*\),"pipeline":\([a-z]*\)/\1 \2 \3/' |
    sort | uniq -c >"$dir/cp.instances"
cat "$dir/cp.instances"
[ "$(wc -l <"$dir/cp.instances")" -eq 1 ] && grep -q ' 2 true false$' "$dir/cp.instances" ||
    { echo "FAIL: cp instances are not all matched p2p (present 2, p2p, not pipeline)"; exit 1; }
grep -A8 '== collectives ==' "$dir/report.txt"
echo "OK: traced --cp $cp run checked and analyzed"
