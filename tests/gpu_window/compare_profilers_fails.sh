#!/bin/bash
# compare_profilers_fails.sh STEPSCOPE SAMPLE_RUN — the tracer-vs-torch.profiler check
# (scripts/gpu/compare_profilers.py, window step 6) can fail. Its inputs are made by this
# build's stepscope from the committed CPU sample: the sample against itself passes (same
# steps, kernels per step, busy time); then each check is fed what it must refuse: a diff
# whose runs have different step counts (--steps-b 0:2), a diff whose B side has 5 % more
# kernels per step, a report whose busy time is 20 % higher, a missing input.
set -u
stepscope=$1; sample=$2
source "$(dirname "$0")/expect.sh"
cmp=$(dirname "$0")/../../scripts/gpu/compare_profilers.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$stepscope" analyze "$sample" --json "$tmp/a.json" > /dev/null || { echo "analyze failed"; exit 1; }
"$stepscope" diff "$sample" "$sample" --json "$tmp/same.json" > /dev/null || { echo "diff failed"; exit 1; }
"$stepscope" diff "$sample" "$sample" --steps-b 0:2 --json "$tmp/fewer.json" > /dev/null || { echo "diff failed"; exit 1; }
python3 - "$tmp" <<'PY'
import json, os, sys
t = sys.argv[1]
d = json.load(open(os.path.join(t, "same.json")))
for k in d["kernels"]:
    if k.get("b"):
        k["b"]["count_per_step"] *= 1.05
json.dump(d, open(os.path.join(t, "more_kernels.json"), "w"))
r = json.load(open(os.path.join(t, "a.json")))
for s in r["ranks"][0]["steps"]:
    s["busy_ns"] = int(s["busy_ns"] * 1.2)
json.dump(r, open(os.path.join(t, "busier.json"), "w"))
PY
expect 0 python3 "$cmp" "$tmp/same.json" "$tmp/a.json" "$tmp/a.json"
expect_output "PASS steps: record 6, profiler 6"
expect 1 python3 "$cmp" "$tmp/fewer.json" "$tmp/a.json" "$tmp/a.json"
expect_output "FAIL steps: record 6, profiler 3"
expect 1 python3 "$cmp" "$tmp/more_kernels.json" "$tmp/a.json" "$tmp/a.json"
expect_output "FAIL kernels per step: .*\+5\.0 %"
expect 1 python3 "$cmp" "$tmp/same.json" "$tmp/a.json" "$tmp/busier.json"
expect_output "FAIL GPU busy per step: .*\+20\.0 %"
expect 1 python3 "$cmp" "$tmp/missing.json" "$tmp/a.json" "$tmp/a.json"
exit $fail
