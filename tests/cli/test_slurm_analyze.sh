#!/bin/sh
# test_slurm_analyze.sh — scripts/scale/slurm_analyze.sh (issue 35 item 3a) without Slurm: the
# map step run as 3 fake Slurm tasks at once (SLURM_PROCID 0..2, SLURM_NTASKS 3), then the merge
# step, must print and write `stepscope analyze RUN --low-memory`'s reports byte for byte on a
# generated pipeline run with stragglers; the map step outside Slurm, a missing part and parts
# of two cuts are usage errors that say so.
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
echo "ok: slurm_analyze.sh map (3 fake tasks) + merge == analyze --low-memory"
