#!/bin/sh
# test_slurm_analyze.sh — scripts/scale/slurm_analyze.sh (issue 35 item 3a) without Slurm: the
# map step run as 3 fake Slurm tasks at once (SLURM_PROCID 0..2, SLURM_NTASKS 3), then the merge
# step, must print and write `stepscope analyze RUN --low-memory`'s reports byte for byte on a
# generated pipeline run with stragglers; so must the second map round (cross, map2 as 3 fake
# tasks, merge), whose merge reads no rank file for the pipeline ranks' metrics or transfers;
# after the map step ran again (a new run in the same place), the merge says round2 is stale and
# reports the new run from the map step's partials; the map step outside Slurm, map2 before
# cross, a missing part and parts of two cuts are usage errors that say so.
# usage: test_slurm_analyze.sh STEPSCOPE STEPSCOPE_GEN SCRIPT
set -eu
STEPSCOPE=$1
export STEPSCOPE
gen=$2 script=$3
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
"$gen" "$d/run" --scale --ranks 16 --events-per-rank 1500 --tp 2 --pp 4 --stragglers 1 >/dev/null
"$STEPSCOPE" analyze "$d/run" --low-memory --json "$d/whole.json" >"$d/whole.txt"
pids=
for k in 0 1 2; do
  SLURM_PROCID=$k SLURM_NTASKS=3 sh "$script" map "$d/run" "$d/parts" &
  pids="$pids $!"
done
for p in $pids; do wait "$p" || fail "a map task failed"; done
[ "$(ls "$d/parts" | wc -l)" = 3 ] || fail "not 3 parts: $(ls "$d/parts")"
sh "$script" merge "$d/parts" --json "$d/merged.json" >"$d/merged.txt" || fail "merge failed"
cmp "$d/whole.txt" "$d/merged.txt" || fail "the merged text report differs"
cmp "$d/whole.json" "$d/merged.json" || fail "the merged JSON report differs"

# the second map round of a run with pipelines: cross, map2 as 3 fake tasks, merge (of round 2)
sh "$script" cross "$d/parts" || fail "cross failed"
[ "$(ls "$d/parts/cross" | wc -l)" = 3 ] || fail "not 3 cross files: $(ls "$d/parts/cross")"
pids=
for k in 0 1 2; do
  SLURM_PROCID=$k SLURM_NTASKS=3 sh "$script" map2 "$d/run" "$d/parts" &
  pids="$pids $!"
done
for p in $pids; do wait "$p" || fail "a map2 task failed"; done
[ "$(ls "$d/parts/round2" | wc -l)" = 3 ] || fail "not 3 round-2 parts: $(ls "$d/parts/round2")"
STEPSCOPE_SAY_READS=1 sh "$script" merge "$d/parts" --json "$d/merged2.json" >"$d/merged2.txt" \
  2>"$d/reads" || fail "merge of round 2 failed"
cmp "$d/whole.txt" "$d/merged2.txt" || fail "the merged text report of round 2 differs"
cmp "$d/whole.json" "$d/merged2.json" || fail "the merged JSON report of round 2 differs"
grep -q "for the per-rank metrics\|for the bubble's transfers" "$d/reads" &&
  fail "the merge of round 2 read pipeline ranks for their metrics: $(cat "$d/reads")"
# the map step run again (a new run written in the same place, same file names): the merge
# must not take the second round made before it (it refused: "changed since its partial was
# made (make the partial again)", though the map step had just made them again)
"$gen" "$d/run2" --scale --ranks 16 --events-per-rank 1500 --tp 2 --pp 4 --stragglers 3 \
  --seed 7 >/dev/null
rm -r "$d/run"
mv "$d/run2" "$d/run"
"$STEPSCOPE" analyze "$d/run" --json "$d/whole3.json" >"$d/whole3.txt"
pids=
for k in 0 1 2; do
  SLURM_PROCID=$k SLURM_NTASKS=3 sh "$script" map "$d/run" "$d/parts" &
  pids="$pids $!"
done
for p in $pids; do wait "$p" || fail "a map task run again failed"; done
sh "$script" merge "$d/parts" --json "$d/merged3.json" >"$d/merged3.txt" 2>"$d/err" ||
  fail "the merge after the map step ran again failed: $(cat "$d/err")"
grep -q "round2 is older than the map step's partials" "$d/err" ||
  fail "the merge did not say why it left round2: $(cat "$d/err")"
cmp "$d/whole3.txt" "$d/merged3.txt" || fail "the text report after the map ran again differs"
cmp "$d/whole3.json" "$d/merged3.json" || fail "the JSON report after the map ran again differs"
rm -r "$d/parts/cross" "$d/parts/round2"
SLURM_PROCID=0 SLURM_NTASKS=3 sh "$script" map2 "$d/run" "$d/parts" 2>"$d/err" &&
  fail "map2 without the cross step succeeded"
grep -q "run '.*cross .*' after the map step" "$d/err" || fail "map2 without cross: $(cat "$d/err")"

expect() { # expect WHAT NEEDLE COMMAND...: exit 2 and NEEDLE on stderr
  what=$1 needle=$2
  shift 2
  set +e
  "$@" >/dev/null 2>"$d/err"
  rc=$?
  set -e
  [ "$rc" = 2 ] && grep -q "$needle" "$d/err" || fail "$what: exit $rc, $(cat "$d/err")"
}
env -u SLURM_PROCID -u SLURM_NTASKS sh "$script" map "$d/run" "$d/parts2" 2>"$d/err" &&
  fail "map outside Slurm succeeded"
grep -q "SLURM_PROCID and SLURM_NTASKS are not set" "$d/err" || fail "map outside Slurm: $(cat "$d/err")"
SLURM_PROCID=0 SLURM_NTASKS=2 sh "$script" map "$d/run" "$d/parts"
expect "two cuts" "cuts into" sh "$script" merge "$d/parts"
rm "$d/parts/part-0-of-2.ssp" "$d/parts/part-1-of-3.ssp"
expect "a missing part" "part-1-of-3.ssp is missing" sh "$script" merge "$d/parts"
echo "ok: slurm_analyze.sh map (3 fake tasks) + merge == analyze --low-memory, and with cross + map2"
