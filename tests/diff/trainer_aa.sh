#!/bin/sh
# trainer_aa.sh STEPSCOPE TRAINER [RUNS] — an A/A comparison on the CPU trainer:
# the same small configuration trained 2 x RUNS times, one after the other,
# alternating A and B (A1 B1 A2 B2 ...), then `stepscope diff A1 B1` with the
# other runs as --repeat-a / --repeat-b (RUNS = 1: one run per side, the
# default). Every headline verdict must be noise, same or unknown (never
# better/WORSE): the runs differ only by the machine (docs/diff.md "Noise
# test"). The diff's JSON is checked with python3.
set -u
ss=$1 trainer=$2 runs=${3:-1}
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-diff-aa.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
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
