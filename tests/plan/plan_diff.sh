#!/bin/bash
# plan_diff.sh STEPSCOPE TRAINER — `stepscope diff RUN PREDICTION.json` end to end:
#   - two runs of the trainer with one layout (dp2 x pp2, 1F1B); `plan --from RUN_A` with that
#     layout to a JSON; `diff RUN_A` against it: the layout matches and step time, MFU and
#     tokens/s agree (the calibration reproduces its own run), device memory exactly;
#     `diff RUN_B` (a second run, not calibrated on): same layout, device memory exact, every
#     number measured and finite;
#   - an enumeration's JSON: the run's own layout is picked out of it;
#   - a --what-if prediction of another layout: compared, with a warning naming what differs;
#   - the step time's verdict against the run's own noise (the 95 % interval of its median
#     step, recomputed from analyze's steps), undecided with 5 steps;
#   - a prediction without the run's layout among several: exit 1; a malformed or
#     wrong-version prediction, or --fail-on against a prediction: exit 2; a JSON that is not
#     a plan (an analyze report) is not taken for one.
set -u
stepscope=$1 trainer=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-plan-diff.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
fail=0
no() { echo "FAILED: $*"; fail=1; }
layout=(--dp 2 --pp 2 --schedule 1f1b --microbatches 4)
for r in a b; do
  "$trainer" --quiet --world 4 "${layout[@]}" --steps 5 --trace "$dir/run_$r" \
    > "$dir/train_$r.log" 2>&1 || { cat "$dir/train_$r.log"; exit 1; }
done
"$stepscope" plan --from "$dir/run_a" --dp 2 --tp 1 --pp 2 --cp 1 --zero 0 --recompute none \
  --microbatches 4 --schedule 1f1b --json "$dir/pred.json" > /dev/null 2>&1 || no "plan --from"

"$stepscope" diff "$dir/run_a" "$dir/pred.json" > "$dir/a.txt" 2>&1 || { cat "$dir/a.txt"; no "diff run_a"; }
grep -q "step time (s)" "$dir/a.txt" && ! grep -q "^warning" "$dir/a.txt" ||
  { cat "$dir/a.txt"; no "text report without warnings"; }
"$stepscope" diff "$dir/run_a" "$dir/pred.json" --json "$dir/a.json" --quiet || no "diff --json"
"$stepscope" diff "$dir/run_b" "$dir/pred.json" --json "$dir/b.json" --quiet || no "diff run_b"
python3 - "$dir/a.json" "$dir/b.json" <<'PY' || no "diff against the run's own prediction"
import json, math, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for d in (a, b):
    assert d["kind"] == "stepscope.diff_prediction" and d["layout_matches"] is True, d
    assert d["run_layout"] == d["predicted_layout"], d
    m = d["metrics"]
    assert m["device_memory_bytes"]["rel_error"] == 0, m["device_memory_bytes"]
    for k in ("step_time_s", "compute_s", "mfu", "tokens_per_s", "bubble_s", "process_memory_bytes"):
        assert math.isfinite(m[k]["measured"]) and m[k]["measured"] > 0, (k, m[k])
        assert math.isfinite(m[k]["rel_error"]), (k, m[k])
m = a["metrics"]
for k in ("step_time_s", "mfu", "tokens_per_s"):
    assert abs(m[k]["rel_error"]) < 1e-3, (k, m[k])
print("run_a: step %+.2e, MFU %+.2e, tokens/s %+.2e; run_b: step %+.1f %%, bubble %+.1f %%" % (
    m["step_time_s"]["rel_error"], m["mfu"]["rel_error"], m["tokens_per_s"]["rel_error"],
    100 * b["metrics"]["step_time_s"]["rel_error"], 100 * b["metrics"]["bubble_s"]["rel_error"]))
PY

# every layout of the run's job: the run's own is found among them
"$stepscope" plan --from "$dir/run_a" --json "$dir/all.json" > /dev/null 2>&1 || no "plan --from (all)"
"$stepscope" diff "$dir/run_b" "$dir/all.json" --json - 2> "$dir/all.err" > "$dir/all_diff.json" ||
  { cat "$dir/all.err"; no "diff against an enumeration"; }
python3 - "$dir/all_diff.json" <<'PY' || no "the run's layout picked from an enumeration"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["layouts"] > 10 and d["layout_matches"] and d["run_layout"] == d["predicted_layout"], d
PY

# a prediction of another layout: compared, with a warning
"$stepscope" plan --from "$dir/run_a" --what-if "microbatches=2,schedule=afab" --json "$dir/wi.json" \
  > /dev/null 2>&1 || no "--what-if --json"
"$stepscope" diff "$dir/run_b" "$dir/wi.json" > "$dir/wi.txt" 2>&1 || { cat "$dir/wi.txt"; no "diff what-if"; }
grep -q "warning: the run's layout is not the predicted one: microbatches 4 (predicted 2)" "$dir/wi.txt" &&
  grep -q "schedule 1f1b (predicted afab)" "$dir/wi.txt" || { cat "$dir/wi.txt"; no "mismatched layout warns"; }

# several layouts, none the run's: exit 1
"$stepscope" plan --model gpt2-124m --gpus 8 --global-batch 32 --json "$dir/other.json" > /dev/null || no "plan gpt2"
"$stepscope" diff "$dir/run_b" "$dir/other.json" > /dev/null 2> "$dir/other.err"
[ $? = 1 ] && grep -q "is the run's" "$dir/other.err" || { cat "$dir/other.err"; no "no matching layout: exit 1"; }

# bad predictions: exit 2
head -c 300 "$dir/pred.json" > "$dir/truncated.json"
echo '{"schema_version":2,"kind":"stepscope.plan","job":{},"layouts":[]}' > "$dir/v2.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["layouts"]=[]; json.dump(d,open(sys.argv[2],"w"))' \
  "$dir/pred.json" "$dir/empty.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); del d["layouts"][0]["step_time_s"]; json.dump(d,open(sys.argv[2],"w"))' \
  "$dir/pred.json" "$dir/nostep.json"
for bad in truncated v2 empty nostep; do
  "$stepscope" diff "$dir/run_b" "$dir/$bad.json" > /dev/null 2> "$dir/bad.err"
  [ $? = 2 ] && grep -q "not a readable plan prediction" "$dir/bad.err" ||
    { cat "$dir/bad.err"; no "$bad prediction: exit 2"; }
done
"$stepscope" diff "$dir/run_b" "$dir/pred.json" --fail-on step_time:+3% > /dev/null 2>&1
[ $? = 2 ] || no "--fail-on against a prediction: exit 2"

# a JSON that is no plan is not taken for one (the two-run diff refuses it as a run)
"$stepscope" analyze "$dir/run_b" --json "$dir/report.json" > /dev/null 2>&1 || no "analyze --json"
"$stepscope" diff "$dir/run_b" "$dir/report.json" > /dev/null 2> "$dir/report.err"
rc=$?
[ $rc != 0 ] && ! grep -q "plan prediction" "$dir/report.err" || { cat "$dir/report.err"; no "an analyze report is no prediction"; }
# experts: a single-layout prediction keeps --ep (it once fell back to ep 1), the run's own
# layout matches it without a warning and its all-to-alls count in the predicted exposed
# collectives; another --ep is named in the warning; an --ep that does not divide is exit 1
"$trainer" --quiet --world 4 --dp 4 --ep 4 --experts 8 --top-k 2 --layers 2 --hidden 32 --heads 4 \
  --seq 16 --batch 8 --steps 4 --trace "$dir/run_moe" > "$dir/train_moe.log" 2>&1 ||
  { cat "$dir/train_moe.log"; exit 1; }
moe=(--dp 4 --tp 1 --pp 1 --cp 1 --zero 0 --recompute none --microbatches 1)
"$stepscope" plan --from "$dir/run_moe" "${moe[@]}" --ep 4 --json "$dir/moe.json" > /dev/null 2>&1 ||
  no "plan --from a MoE run"
"$stepscope" diff "$dir/run_moe" "$dir/moe.json" --json "$dir/moe_diff.json" > "$dir/moe.txt" 2>&1 ||
  { cat "$dir/moe.txt"; no "diff of a MoE run"; }
grep -q "^warning" "$dir/moe.txt" && { cat "$dir/moe.txt"; no "MoE run against its own layout warns"; }
python3 - "$dir/moe.json" "$dir/moe_diff.json" <<'PY' || no "MoE prediction keeps ep and counts its all-to-alls"
import json, sys
plan, d = (json.load(open(p)) for p in sys.argv[1:3])
lay = plan["layouts"][0]
assert lay["layout"]["ep"] == 4, lay["layout"]
ep = lay["breakdown_s"]["ep"]
assert ep > 0, lay["breakdown_s"]
b = lay["breakdown_s"]
want = b["tp"] + b["cp"] + b["ep"] + b["grad_sync"] + b.get("wait", 0)
got = d["metrics"]["exposed_comm_s"]["predicted"]
assert abs(got - want) <= 1e-9 * max(1, want), (got, want)
PY
"$stepscope" plan --from "$dir/run_moe" "${moe[@]}" --ep 2 --json "$dir/moe2.json" > /dev/null 2>&1 ||
  no "plan --ep 2"
"$stepscope" diff "$dir/run_moe" "$dir/moe2.json" > "$dir/moe2.txt" 2>&1
grep -q "warning: the run's layout is not the predicted one: ep 4 (predicted 2)" "$dir/moe2.txt" ||
  { cat "$dir/moe2.txt"; no "another ep named in the warning"; }
"$stepscope" plan --from "$dir/run_moe" "${moe[@]}" --ep 3 > /dev/null 2> "$dir/ep3.err"
[ $? = 1 ] && grep -q "must divide" "$dir/ep3.err" || { cat "$dir/ep3.err"; no "--ep 3: exit 1"; }
# the step time's verdict against the run's own noise: the 95 % order-statistic interval of the
# median step (median_interval.c), recomputed here from analyze's steps; 5 steps are too few
# (undecided), 9 give [x_(2), x_(8)]
grep -q "^verdict: undecided: 5 steps are too few" "$dir/a.txt" || { cat "$dir/a.txt"; no "5 steps: undecided"; }
"$trainer" --quiet --world 4 "${layout[@]}" --steps 9 --trace "$dir/run_c" > "$dir/train_c.log" 2>&1 ||
  { cat "$dir/train_c.log"; exit 1; }
"$stepscope" diff "$dir/run_c" "$dir/pred.json" --json "$dir/c.json" > "$dir/c.txt" 2>&1 || no "diff run_c"
"$stepscope" analyze "$dir/run_c" --json "$dir/c_report.json" > /dev/null 2>&1 || no "analyze run_c"
python3 - "$dir/c.json" "$dir/c_report.json" "$dir/c.txt" <<'PY' || { cat "$dir/c.txt"; no "the step-time noise verdict"; }
import json, math, sys
d = json.load(open(sys.argv[1])); rep = json.load(open(sys.argv[2])); text = open(sys.argv[3]).read()
steps = rep["run"]["steps"]
kept = [s for s in steps if not (s["cut_by_trace_end"] or s["stub"])] or steps
v = sorted(s["time_ns"] * 1e-9 for s in kept)
n = len(v)
tail = lambda j: sum(math.comb(n, i) for i in range(j)) / 2 ** n   # P(B <= j - 1)
j = max(k for k in range(1, n // 2 + 1) if 2 * tail(k) <= 0.05)
lo, hi, conf = v[j - 1], v[n - j], 1 - 2 * tail(j)
z = d["step_time_noise"]
print("%d steps: median in %.6f-%.6f s (%.4f), stepscope says %s" % (n, lo, hi, conf, z))
assert z["steps"] == n and abs(z["confidence"] - conf) < 1e-6
close = lambda a, b: abs(a - b) <= 1e-8 * abs(b)  # the JSON has 9 significant digits
assert close(z["median_interval_s"][0], lo) and close(z["median_interval_s"][1], hi)
pred = d["metrics"]["step_time_s"]["predicted"]
inside = lo <= pred <= hi
assert z["prediction_inside"] == inside
assert ("verdict: the predicted step time is within the run's own noise" in text) == inside
assert ("verdict: the prediction misses the step time beyond the run's noise" in text) == (not inside)
PY
exit $fail
