#!/bin/sh
# trainer_aa.sh STEPSCOPE TRAINER — an A/A pair on the CPU trainer: the same
# small configuration trained twice, one after the other, then `stepscope diff`.
# Every headline verdict must be noise, same or unknown (never better/WORSE):
# the runs differ only by the machine's load between them (docs/diff.md
# "Noise test"). The diff's JSON is checked with python3.
set -u
ss=$1 trainer=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-diff-aa.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
for run in a b; do
  "$trainer" --backend cpu --world 2 --dp 2 --steps 16 --quiet --trace "$dir/$run" >/dev/null ||
    { echo "FAIL: training run $run failed"; exit 1; }
done
"$ss" diff "$dir/a" "$dir/b" --json "$dir/diff.json" > "$dir/diff.txt" || { echo "FAIL: diff exit $?"; exit 1; }
python3 - "$dir/diff.json" "$dir/diff.txt" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
bad = {k: m["verdict"] for k, m in d["headline"].items() if m["verdict"] in ("better", "worse")}
print("verdicts:", {k: m["verdict"] for k, m in d["headline"].items()}, "load:", d["load"])
if bad:
    print(open(sys.argv[2]).read())
    print("FAIL: A/A pair called", bad)
    sys.exit(1)
PY
