#!/bin/sh
# stale_outputs.sh — a run written over an earlier one never shows the earlier one's
# results (issue 34 defect 7: after `--force` from 4 ranks to 2, `view` showed a 4-rank
# report). A world-4 run gets its derived outputs (export as JSON, gzip JSON and Perfetto,
# report, viewer page), then a world-2 run is written over it with --force.
#
# usage: stale_outputs.sh TRAINER STEPSCOPE CASE
#   force_removes     --force removes the derived outputs and ranks 2-3 with a note,
#                     and keeps the user's own files (a JSON, a page, a link, a plan
#                     prediction); `view --html` then shows 2 ranks
#   view_regenerates  derived outputs older than the rank files (the earlier run's, put
#                     back) are not served: `view --html` regenerates them, with a note;
#                     ones newer than the ranks are used as they are
set -u
train=$1 stepscope=$2 case=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ss-stale.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
run=$tmp/run
small="--backend cpu --steps 2 --seq 16 --batch 4 --quiet"
fail=0
check() { # description, command...
  what=$1; shift
  if ! "$@"; then echo "FAIL: $what"; fail=1; fi
}
contains() { grep -q -- "$2" "$1"; }
lacks() { ! grep -q -- "$2" "$1"; }

# shellcheck disable=SC2086
"$train" $small --world 4 --dp 4 --trace "$run" >/dev/null || { echo "FAIL: world-4 run"; exit 1; }
"$stepscope" export "$run" -o "$run/trace.json" &&
  "$stepscope" export "$run" -o "$run/trace.json.gz" &&
  "$stepscope" export "$run" -o "$run/run.pftrace" &&
  "$stepscope" analyze "$run" --json "$run/report.json" --quiet &&
  "$stepscope" view "$run" --html "$run/view.html" >/dev/null ||
  { echo "FAIL: the world-4 run's outputs"; exit 1; }
contains "$run/report.json" '"ranks_loaded":4' || { echo "FAIL: setup: no 4-rank report"; exit 1; }

case $case in
force_removes)
  printf '{"mine":1}\n' >"$run/notes.json"
  printf '<!DOCTYPE html>\n<p>mine</p>\n' >"$run/mine.html"
  printf '{"schema_version":1,"kind":"stepscope.plan","job":{}}\n' >"$run/prediction.json"
  ln -s "$tmp/elsewhere.json" "$run/link.json"
  # shellcheck disable=SC2086
  "$train" $small --world 2 --dp 2 --trace "$run" --force >/dev/null 2>"$tmp/err"
  check "the world-2 run over it succeeded" test $? -eq 0
  cat "$tmp/err"
  for f in trace.json trace.json.gz run.pftrace report.json view.html rank-00002.trace.zst \
    rank-00003.trace.zst; do
    check "--force removed $f" test ! -e "$run/$f"
  done
  for f in notes.json mine.html prediction.json rank-00000.trace.zst rank-00001.trace.zst; do
    check "--force kept $f" test -e "$run/$f"
  done
  check "--force kept the link" test -L "$run/link.json"
  check "the note names what went" contains "$tmp/err" \
    "note: --force: removed from .*2 rank files of ranks beyond --world 2 and the earlier run's derived outputs .*report.json"
  "$stepscope" view "$run" --html "$tmp/out.html" >"$tmp/view.txt" 2>&1
  cat "$tmp/view.txt"
  check "view shows the world-2 run" contains "$tmp/view.txt" "run: 2 ranks"
  check "the page holds the 2-rank report" contains "$tmp/out.html" '"ranks_loaded":2'
  ;;
view_regenerates)
  mkdir "$tmp/old"
  cp -p "$run/trace.json" "$run/report.json" "$tmp/old/"
  sleep 1 # coarse file times: the new ranks are strictly newer
  # shellcheck disable=SC2086
  "$train" $small --world 2 --dp 2 --trace "$run" --force >/dev/null 2>&1 ||
    { echo "FAIL: the world-2 run"; exit 1; }
  cp -p "$tmp/old/trace.json" "$tmp/old/report.json" "$run/" # the earlier run's, as they were
  "$stepscope" view "$run" --html "$tmp/out.html" >"$tmp/view.txt" 2>&1
  cat "$tmp/view.txt"
  check "view shows the world-2 run" contains "$tmp/view.txt" "run: 2 ranks"
  check "both were regenerated" contains "$tmp/view.txt" \
    "export trace.json (generated), report report.json (generated)"
  check "the page holds the 2-rank report" contains "$tmp/out.html" '"ranks_loaded":2'
  check "the page holds no 4-rank report" lacks "$tmp/out.html" '"ranks_loaded":4'
  check "the page says why" contains "$tmp/out.html" \
    "report.json in the run directory is older than the rank file rank-0000[01].trace.zst"
  check "the stale files are left as they were (view never writes the run)" \
    contains "$run/report.json" '"ranks_loaded":4'
  # outputs newer than the ranks are the run's own: used, not regenerated
  "$stepscope" export "$run" -o "$run/trace.json" &&
    "$stepscope" analyze "$run" --json "$run/report.json" --quiet || { echo "FAIL: re-export"; exit 1; }
  "$stepscope" view "$run" --html "$tmp/out2.html" >"$tmp/view2.txt" 2>&1
  cat "$tmp/view2.txt"
  check "fresh outputs are used as they are" contains "$tmp/view2.txt" \
    "run: 2 ranks, .*export trace.json, report report.json;"
  ;;
*) echo "unknown case $case"; exit 2 ;;
esac
[ $fail -eq 0 ] && echo "OK: $case"
exit $fail
