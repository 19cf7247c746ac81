#!/bin/sh
# trainer_aa.sh STEPSCOPE TRAINER [RUNS] — an A/A comparison on the CPU trainer:
# the same small configuration trained 2 x RUNS times, one after the other,
# alternating A and B (A1 B1 A2 B2 ...), then `stepscope diff A1 B1` with the
# other runs as --repeat-a / --repeat-b (RUNS = 1: one run per side, the
# default). Every headline verdict must be noise, same or unknown (never
# better/WORSE): the runs differ only by the machine (docs/diff.md "Noise
# test"). The diff's JSON is checked with python3.
# The noise test holds the chance of a spurious better/WORSE to 5 % per family of metrics (and
# a 2-core VM can slow the runs of one side by a steady ~1 %), so a pair that is called real
# is trained and compared once more, and the test fails only when the second pair is called
# real too; a diff that calls every A/A pair real still fails.
set -u
ss=$1 trainer=$2 runs=${3:-1}
dirs=""
trap 'rm -rf $dirs' EXIT
attempt() {
  dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-diff-aa.XXXXXX") || return 1
  dirs="$dirs $dir"
  i=1
  while [ "$i" -le "$runs" ]; do
    for side in a b; do
      "$trainer" --backend cpu --world 2 --dp 2 --steps 16 --quiet --trace "$dir/$side$i" >/dev/null ||
        { echo "FAIL: training run $side$i failed"; exit 1; }
    done
    i=$((i + 1))
  done
  set -- "$dir/a1" "$dir/b1"
  i=2
  while [ "$i" -le "$runs" ]; do
    set -- "$@" --repeat-a "$dir/a$i" --repeat-b "$dir/b$i"
    i=$((i + 1))
  done
  "$ss" diff "$@" --json "$dir/diff.json" > "$dir/diff.txt" || { echo "FAIL: diff exit $?"; exit 1; }
  python3 - "$dir/diff.json" "$dir/diff.txt" "$runs" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
runs = int(sys.argv[3])
if d["a"]["runs"] != runs or d["b"]["runs"] != runs:
    print("FAIL: runs per side", d["a"]["runs"], d["b"]["runs"], "want", runs)
    sys.exit(1)
bad = {k: m["verdict"] for k, m in d["headline"].items() if m["verdict"] in ("better", "worse")}
print("verdicts:", {k: (m["verdict"], m["why"]) for k, m in d["headline"].items()}, "load:", d["load"])
if bad:
    print(open(sys.argv[2]).read())
    print("FAIL: A/A pair called", bad)
    sys.exit(1)
PY
}

attempt && exit 0
echo "an A/A pair called real: training and comparing once more"
attempt
