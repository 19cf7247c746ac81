#!/bin/sh
# record_run_dir.sh TRAINER — under `stepscope record -o RUN` (which exports
# STEPSCOPE_RUN_DIR=RUN) the trainer traces into RUN: without --trace, and instead of
# a --trace directory given too (which is then not created, and a note says so).
set -u
trainer=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args="--backend cpu --world 2 --dp 2 --layers 1 --hidden 32 --heads 2 --seq 32 --batch 2 --steps 2 --quiet"
STEPSCOPE_RUN_DIR=$tmp/rec "$trainer" $args > "$tmp/out1" 2>&1 || { cat "$tmp/out1"; echo "FAIL: run 1"; exit 1; }
for r in 0 1; do
  [ -s "$tmp/rec/rank-0000$r.trace.zst" ] || { ls -la "$tmp" "$tmp/rec"; echo "FAIL: no rank $r trace in STEPSCOPE_RUN_DIR"; exit 1; }
done
STEPSCOPE_RUN_DIR=$tmp/rec2 "$trainer" $args --trace "$tmp/other" > "$tmp/out2" 2>&1 || { cat "$tmp/out2"; echo "FAIL: run 2"; exit 1; }
[ -s "$tmp/rec2/rank-00000.trace.zst" ] || { echo "FAIL: --trace beside STEPSCOPE_RUN_DIR: nothing in RUN"; exit 1; }
[ ! -e "$tmp/other" ] || { echo "FAIL: the --trace directory was written too"; exit 1; }
grep -q "tracing into $tmp/rec2, not --trace $tmp/other" "$tmp/out2" || { cat "$tmp/out2"; echo "FAIL: no note"; exit 1; }
"$trainer" $args > "$tmp/out3" 2>&1 && [ ! -e "$tmp/rec3" ] || { echo "FAIL: plain run"; exit 1; }
echo PASS
