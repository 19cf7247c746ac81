#!/bin/sh
# test_replay.sh — `stepscope replay` on the committed CPU sample (docs/replay.md): every
# malformed --what-if is a usage error (exit 2) that names what is wrong, a delay edit on a
# run that declares no --debug-delay too; an edit that changes nothing (scale=1) predicts the
# plain replay exactly; dropping all compute never predicts longer steps in all; the plain replay is
# within 3 % median / 5 % worst; --help gives the grammar; the JSON carries its fields.
#
# usage: test_replay.sh STEPSCOPE RUN
set -u
stepscope=$1 run=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-replay-cli.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
fail=0
bad_edit() { # EDIT WORDS: exit 2 and the message holds WORDS
  "$stepscope" replay "$run" --what-if "$1" >"$dir/out" 2>"$dir/err"
  rc=$?
  if [ $rc -ne 2 ] || ! grep -q -- "$2" "$dir/err"; then
    echo "FAIL: --what-if '$1': exit $rc, stderr: $(cat "$dir/err") (wanted 2 and '$2')"
    fail=1
  fi
}
bad_edit 'kind=gpu:scale=2' 'expected compute, comm, copy or host'
bad_edit 'rank=x:drop' 'expected a rank number'
bad_edit 'name=(:drop' 'is not a regular expression'
bad_edit 'range=(:drop' 'range=( is not a regular expression'
bad_edit 'range=a,range=b:drop' 'range= given twice'
bad_edit 'range=a:no-delay' 'delay selects ranks only'
bad_edit 'scale' 'needs a value'
bad_edit 'drop=2' 'takes no value'
bad_edit 'foo=1:drop' "unknown selector 'foo'"
bad_edit 'kind=comm:faster' "unknown action 'faster'"
bad_edit 'scale=-1' 'expected a number >= 0'
bad_edit 'kind=compute:overlap' 'overlap applies to communication'
bad_edit 'name=a:delay=3' 'delay selects ranks only'
bad_edit 'coll=allreduce:drop' 'expected all_reduce'
bad_edit 'rank=0:no-delay' 'declares no --debug-delay'
"$stepscope" replay --help >"$dir/help" 2>&1
grep -q 'EDIT is \[SELECTOR:\]ACTION' "$dir/help" && grep -q 'no-delay' "$dir/help" ||
  { echo "FAIL: --help lacks the EDIT grammar"; fail=1; }
"$stepscope" replay "$run" --what-if 'scale=1' --json "$dir/same.json" >/dev/null 2>&1 ||
  { echo "FAIL: replay scale=1"; exit 1; }
"$stepscope" replay "$run" --what-if 'kind=compute:drop' --json "$dir/drop.json" >/dev/null 2>&1 ||
  { echo "FAIL: replay kind=compute:drop"; exit 1; }
python3 - "$dir/same.json" "$dir/drop.json" <<'PY' || fail=1
import json, sys
same, drop = (json.load(open(p)) for p in sys.argv[1:3])
bad = []
for key in ("run", "edits", "steps", "replay", "what_if"):
    if key not in same:
        bad.append(f"no '{key}' in the JSON")
for s in same["steps"]:
    if s["predicted_ns"] != s["replayed_ns"]:
        bad.append(f"step {s['step']}: scale=1 predicts {s['predicted_ns']}, the replay {s['replayed_ns']}")
# one step may come out longer (the step before it ended earlier while its own end is held
# by work that did not shrink), the steps together not
total_p = sum(s["predicted_ns"] for s in drop["steps"])
total_r = sum(s["replayed_ns"] for s in drop["steps"])
if total_p > total_r:
    bad.append(f"no compute predicts {total_p} ns for the steps, the replay {total_r} ns")
# every op and call selected by no selector, only compute ops by kind=compute
sel_all, sel_compute = same["what_if"]["selected"][0], drop["what_if"]["selected"][0]
if sel_all["ops"] <= sel_compute["ops"] or sel_all["calls"] == 0 or sel_compute["ops"] == 0:
    bad.append(f"selected: scale=1 {sel_all}, kind=compute {sel_compute}")
if sel_compute["calls"] != 0:
    bad.append(f"kind=compute selects {sel_compute['calls']} host calls")
r = same["replay"]
if r["median_error"] > 0.03 or r["worst_error"] > 0.05:
    bad.append(f"plain replay error median {r['median_error']}, worst {r['worst_error']}")
if bad:
    print("FAIL: " + "; ".join(bad))
    sys.exit(1)
PY
[ $fail -eq 0 ] && echo ok
exit $fail
