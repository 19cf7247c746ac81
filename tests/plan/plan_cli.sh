#!/bin/bash
# plan_cli.sh STEPSCOPE TRAINER — `stepscope plan` end to end:
#   - a real run of the trainer (dp2 x pp2, 1F1B), then `plan --from RUN` with that run's own
#     layout: the predicted device memory (total - runtime baseline) equals the largest
#     measured peak of the run's ranks (one implementation of the formulas), and the
#     calibrated model reproduces the run's median step time;
#   - the CPU backend's shared cores: --cores is reported (else this machine's, marked
#     assumed); a dp4 run planned as 4 ranks on 2 cores splits its exposed collectives into
#     the modelled ones and descheduled waits, and still reproduces its step time;
#   - --what-if names the changed layout and judges it only beyond the planner's 10 % band; --json/--csv carry every layout; a ranked table;
#   - bad input: unknown option / bad value (exit 2), an impossible layout (exit 1 with the
#     reason), a model that fits nowhere (the table says so);
#   - what a framework cannot run: refused on one line with the reason naming the choice at
#     fault, and --help says what each framework runs.
set -u
stepscope=$1 trainer=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-plan.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
fail=0
no() { echo "FAILED: $*"; fail=1; }

"$trainer" --quiet --world 4 --dp 2 --pp 2 --schedule 1f1b --steps 4 --trace "$dir/run" \
  --log "$dir/train.jsonl" > "$dir/train.log" 2>&1 || { cat "$dir/train.log"; exit 1; }
"$stepscope" plan --from "$dir/run" --dp 2 --tp 1 --pp 2 --cp 1 --zero 0 --recompute none \
  --microbatches 4 --schedule 1f1b --json "$dir/self.json" > "$dir/self.txt" 2>&1 ||
  { cat "$dir/self.txt"; no "plan --from RUN on its own layout"; }
measured=0
for f in "$dir"/run/rank-*.trace.zst; do
  m=$("$stepscope" dump "$f" --kind metadata | grep '"key":"memory"' | tail -1 |
      python3 -c 'import json,sys; print(json.loads(json.loads(sys.stdin.read())["value_json"])["measured_peak_bytes"])')
  [ "$m" -gt "$measured" ] && measured=$m
done
python3 - "$dir/self.json" "$measured" <<'PY' || no "self prediction"
import json, sys
d = json.load(open(sys.argv[1])); measured = int(sys.argv[2])
l = d["layouts"][0]; mb = l["memory_bytes"]
dev = mb["total"] - mb["runtime_baseline"]
ok = dev == measured
print("device memory predicted %d, measured %d: %s" % (dev, measured, "equal" if ok else "DIFFERENT"))
cal = d["calibration"]
rel = abs(l["step_time_s"] - cal["measured_step_s"]) / cal["measured_step_s"]
print("step time predicted %.6f s, measured %.6f s (relative %.2e)" % (l["step_time_s"], cal["measured_step_s"], rel))
print("forward share %.3f, attention forward share %.3f" % (cal["forward_share"], cal["attention_forward_share"]))
shares = 0.2 < cal["forward_share"] < 0.8 and 0 < cal["attention_forward_share"] < cal["forward_share"]
trainer = d["job"]["framework"] == "stepscope"  # --from RUN: the trainer's conventions
print("framework %s" % d["job"]["framework"])
sys.exit(0 if ok and rel < 1e-3 and cal["flops_rate"] > 0 and mb["runtime_baseline"] > 0 and shares and trainer else 1)
PY
# runs with --gemm-weights bf16 (the model's bf16 working copy of its GEMM weights, 2 bytes per
# GEMM weight on the CPU backend too; under ZeRO-1 the fp32 master weights only as the rank's
# shard): `plan --from RUN` must count them from the run's config
for z in 0 1; do
  "$trainer" --quiet --world 2 --dp 2 --zero $z --gemm-weights bf16 --steps 2 --trace "$dir/gw$z" \
    > "$dir/gw.log" 2>&1 || { cat "$dir/gw.log"; exit 1; }
  "$stepscope" plan --from "$dir/gw$z" --dp 2 --tp 1 --pp 1 --cp 1 --zero $z --recompute none \
    --microbatches 1 --json "$dir/gw.json" > "$dir/gw.txt" 2>&1 ||
    { cat "$dir/gw.txt"; no "plan --from a --zero $z --gemm-weights bf16 run"; }
  gw_measured=0
  for f in "$dir"/gw$z/rank-*.trace.zst; do
    m=$("$stepscope" dump "$f" --kind metadata | grep '"key":"memory"' | tail -1 |
        python3 -c 'import json,sys; print(json.loads(json.loads(sys.stdin.read())["value_json"])["measured_peak_bytes"])')
    [ "$m" -gt "$gw_measured" ] && gw_measured=$m
  done
  python3 - "$dir/gw.json" "$gw_measured" "$z" <<'PY' || no "plan --from a --zero $z --gemm-weights bf16 run: its peak"
import json, sys
mb = json.load(open(sys.argv[1]))["layouts"][0]["memory_bytes"]
dev, measured = mb["total"] - mb["runtime_baseline"], int(sys.argv[2])
print("--zero %s --gemm-weights bf16: device memory predicted %d, measured %d" % (sys.argv[3], dev, measured))
sys.exit(0 if dev == measured else 1)
PY
done
"$trainer" --quiet --world 4 --dp 4 --steps 3 --trace "$dir/dp4" > "$dir/dp4.log" 2>&1 ||
  { cat "$dir/dp4.log"; exit 1; }
"$stepscope" plan --from "$dir/dp4" --cores 2 --dp 4 --tp 1 --pp 1 --cp 1 --zero 0 \
  --recompute none --microbatches 1 --json "$dir/dp4.json" > "$dir/dp4.txt" 2>&1 ||
  { cat "$dir/dp4.txt"; no "plan --from a dp4 run with --cores 2"; }
grep -q "share 2 cores:" "$dir/dp4.txt" || { cat "$dir/dp4.txt"; no "--cores in the table"; }
python3 - "$dir/dp4.json" "$dir/self.json" <<'PY' || no "shared cores"
import json, sys
d = json.load(open(sys.argv[1])); own = json.load(open(sys.argv[2]))
cal, dev, l = d["calibration"], d["device"], d["layouts"][0]
b = l["breakdown_s"]
assert dev["cores"] == 2 and dev["cores_assumed"] is False, dev
assert own["device"]["cores"] >= 1 and own["device"]["cores_assumed"] is True
rel = abs(l["step_time_s"] - cal["measured_step_s"]) / cal["measured_step_s"]
# the measured exposed collectives are the modelled ones plus the waits, unless the modelled
# ones alone exceed them (then no waits), or the modelled parts exceeded the measured step
# (rate_raised: the rate was raised, which shortens the waits with the compute); the
# calibration's figures are written to 6 digits
e = cal["exposed_comm_s"]
coll = b["grad_sync"] + b["tp"] + b["cp"] + b["wait"]
if b["wait"] == 0:
    split = b["grad_sync"] >= e - 1e-9
elif not cal["rate_raised"]:
    split = abs(coll - e) <= 1e-5 * e
else:
    split = coll <= e * (1 + 1e-5)
print("dp4 on 2 cores: exposed collectives %.6f s = modelled %.6f + waits %.6f (share %.4f); "
      "host %.6f; step %.6f vs %.6f" % (cal["exposed_comm_s"], b["grad_sync"], b["wait"],
      cal["wait_share"], b["host"], l["step_time_s"], cal["measured_step_s"]))
sys.exit(0 if rel < 1e-3 and split and b["host"] >= 0 else 1)
PY
"$stepscope" plan --model gpt2-124m --gpus 8 --global-batch 32 --device cpu --cores 0 > /dev/null 2>&1
[ $? = 2 ] || no "--cores 0: exit 2"
"$stepscope" plan --from "$dir/run" --what-if "microbatches=2,schedule=afab" > "$dir/whatif.txt" 2>&1 ||
  no "--what-if"
grep -q "what if dp2 tp1 pp2 cp1 zero0 afab m2 x 2" "$dir/whatif.txt" || { cat "$dir/whatif.txt"; no "--what-if layout"; }
# the verdict: decided only beyond the planner's 10 % band (docs/plan.md "How far the ranking
# goes"), recomputed from the two tokens/s it prints; a change of nothing is undecided
for change in "microbatches=2,schedule=afab" "zero=0" "recompute=full"; do
  "$stepscope" plan --from "$dir/run" --what-if "$change" --json "$dir/whatif.json" > "$dir/whatif.txt" 2>&1 ||
    no "--what-if $change"
  python3 - "$dir/whatif.txt" "$change" "$dir/whatif.json" <<'PY' || { cat "$dir/whatif.txt"; no "--what-if $change: verdict"; }
import json, re, sys
text = open(sys.argv[1]).read()
w = json.load(open(sys.argv[3]))["what_if"]
m = re.search(r"verdict: (undecided: )?(?:([0-9.]+) % (more|fewer)|(the same)) tokens/s .*\(([0-9.e+]+) -> ([0-9.e+]+)\)", text)
assert m, "no verdict line"
before, after = float(m.group(5)), float(m.group(6))
gain = after / before - 1
# the band is judged on the change at full precision (the JSON's); the printed tokens/s have 4
# digits, so a change within their rounding of 10 % (a measured run can land there) is judged
# by the JSON's change alone, and the text must agree with it
undecided = not w["decided"] if abs(abs(gain) - 0.10) < 2e-3 else abs(gain) <= 0.10
print("%s: %+.1f %% tokens/s, %s" % (sys.argv[2], 100 * gain, "undecided" if m.group(1) else "decided"))
assert bool(m.group(1)) == undecided
# below the print's 0.1 % (and the 4 digits of the tokens/s it prints) "the same", else the
# size and the direction
if m.group(4):
    assert abs(gain) < 1e-3
else:
    assert abs(float(m.group(2)) - 100 * abs(gain)) < 0.1
    assert abs(gain) < 5e-4 or (m.group(3) == "more") == (gain >= 0)
assert w["decided"] == (abs(w["change"]) > 0.10) and abs(w["change"] - gain) < 2e-3 and w["band"] == 0.1
if sys.argv[2] == "zero=0":  # the run's own layout: no change, undecided, "the same"
    assert m.group(1) and m.group(4) and abs(gain) < 1e-3
PY
done
# --what-if ep=N: a run with experts (dp 2, 4 experts, no expert parallelism) with its experts
# carved out of dp; a run without experts refuses the key
"$trainer" --quiet --world 2 --dp 2 --experts 4 --top-k 2 --steps 3 --trace "$dir/moe" \
  > "$dir/moe.log" 2>&1 || { cat "$dir/moe.log"; no "a run with experts"; }
"$stepscope" plan --from "$dir/moe" --what-if "ep=2" > "$dir/wiep.txt" 2>&1 &&
  grep -q "what if dp2 ep2 tp1 pp1 cp1 zero0" "$dir/wiep.txt" ||
  { cat "$dir/wiep.txt"; no "--what-if ep=2 on a run with experts"; }
"$stepscope" plan --from "$dir/run" --what-if "ep=2" > "$dir/wiep.txt" 2>&1
[ $? = 2 ] && grep -q "what-if ep=2: the run has no experts" "$dir/wiep.txt" ||
  { cat "$dir/wiep.txt"; no "--what-if ep on a dense run: refused"; }
# --json - with --what-if: the JSON alone on stdout (the text is left out, as for a sweep)
"$stepscope" plan --from "$dir/run" --what-if "zero=0" --json - 2> /dev/null |
  python3 -c 'import json, sys; json.load(sys.stdin)' || no "--what-if --json -: not JSON alone"
"$stepscope" plan --model gpt2-124m --gpus 8 --global-batch 32 --json "$dir/all.json" \
  --csv "$dir/all.csv" > "$dir/table.txt" || no "enumeration"
grep -q "^1 " "$dir/table.txt" || no "ranked table"
python3 - "$dir/all.json" "$dir/all.csv" <<'PY' || no "json/csv"
import csv, json, sys
d = json.load(open(sys.argv[1])); rows = list(csv.DictReader(open(sys.argv[2])))
assert d["schema_version"] == 1 and d["calibration"] is None and "assumed" in d
assert len(d["layouts"]) == len(rows) > 100
for l, r in zip(d["layouts"], rows):
    assert l["layout"]["dp"] * l["layout"]["tp"] * l["layout"]["pp"] * l["layout"]["cp"] == 8
    assert abs(float(r["step_time_s"]) - l["step_time_s"]) <= 1e-6 * l["step_time_s"]
    for k in ("parameters", "gradients", "optimizer", "activations", "total"):
        assert k in l["memory_bytes"]
    assert l["binding"] in ("memory", "compute", "exposed communication", "bubble", "host")
print("json/csv: %d layouts" % len(rows))
PY
"$stepscope" plan --model gpt2-124m --gpus 8 --global-batch 32 --frobnicate > /dev/null 2>&1
[ $? = 2 ] || no "unknown option: exit 2"
"$stepscope" plan --model gpt2-124m --gpus 8 --global-batch 32 --zero 5 > /dev/null 2>&1
[ $? = 2 ] || no "--zero 5: exit 2"
"$stepscope" plan --model gpt2-124m --gpus 8 --global-batch 32 --dp 2 --tp 5 --pp 1 --cp 1 \
  --zero 0 --recompute none --microbatches 1 > /dev/null 2> "$dir/bad.txt"
[ $? = 1 ] && grep -q "cannot run" "$dir/bad.txt" || { cat "$dir/bad.txt"; no "impossible layout: exit 1 with the reason"; }
# what the framework cannot run (model/framework_memory.c): a sweep of nothing else says why on
# one line, the reason naming the choice at fault (the schedule, not the default ZeRO stage)
"$stepscope" plan --model gpt2-124m --gpus 8 --global-batch 32 --framework megatron --pp 2 \
  --schedule afab > /dev/null 2> "$dir/afab.txt"
[ $? = 1 ] && [ "$(wc -l < "$dir/afab.txt")" = 1 ] &&
  grep -q "no layout .*(last reason: .*not AFAB (--schedule afab, --pp 2))$" "$dir/afab.txt" ||
  { cat "$dir/afab.txt"; no "megatron AFAB: exit 1, the reason on one line naming --schedule afab"; }
"$stepscope" plan --model gpt2-124m --gpus 8 --global-batch 32 --framework fsdp --zero 1 \
  > /dev/null 2> "$dir/fsdp1.txt"
[ $? = 1 ] && [ "$(wc -l < "$dir/fsdp1.txt")" = 1 ] &&
  grep -q "not the optimizer alone (--zero 1, --pp 1))$" "$dir/fsdp1.txt" ||
  { cat "$dir/fsdp1.txt"; no "fsdp ZeRO-1: exit 1, the reason on one line"; }
"$stepscope" plan --model gpt2-124m --gpus 8 --global-batch 32 --framework deepspeed --dp 4 \
  --tp 1 --pp 2 --cp 1 --zero 0 --recompute none --microbatches 4 --schedule interleaved \
  --virtual-stages 2 > /dev/null 2> "$dir/ds.txt"
[ $? = 1 ] && grep -q "cannot run: .*not AFAB or the interleaved schedule (--schedule interleaved, --pp 2)$" \
  "$dir/ds.txt" || { cat "$dir/ds.txt"; no "deepspeed interleaved layout: refused naming the schedule"; }
"$stepscope" plan --model gpt2-124m --gpus 8 --global-batch 32 --framework deepspeed --dp 4 \
  --tp 1 --pp 2 --cp 1 --zero 0 --recompute none --microbatches 4 --schedule afab \
  > /dev/null 2> "$dir/ds.txt"
[ $? = 1 ] && grep -q "cannot run: DeepSpeed's pipeline engine runs 1F1B (TrainSchedule).* (--schedule afab, --pp 2)$" \
  "$dir/ds.txt" || { cat "$dir/ds.txt"; no "deepspeed AFAB layout: refused naming the schedule"; }
# --help tells what each framework runs
"$stepscope" plan --help > "$dir/help.txt" 2>&1
grep -q "that the --framework runs" "$dir/help.txt" && grep -q "megatron (ZeRO" "$dir/help.txt" &&
  grep -q "with a pipeline ZeRO 0-1, 1F1B" "$dir/help.txt" &&
  grep -q "offers only what it runs" "$dir/help.txt" ||
  { cat "$dir/help.txt"; no "plan --help names what each framework runs"; }
"$stepscope" plan --layers 96 --hidden 12288 --heads 96 --vocab 50257 --seq 2048 --max-seq 2048 \
  --gpus 1 --global-batch 1 > "$dir/huge.txt" 2>&1
grep -q "nothing fits" "$dir/huge.txt" || { cat "$dir/huge.txt"; no "a model that fits nowhere"; }
# every real-model preset runs somewhere (GPT-3 13B's published width 5140 is not divisible by
# its 40 heads: no layout could run it), and a width its heads do not divide is named as such
for m in gpt3-125m gpt3-350m gpt3-760m gpt3-2.7b gpt3-6.7b gpt3-13b; do
  "$stepscope" plan --model $m --gpus 8 --global-batch 16 --device h100-sxm --top 1 \
    > /dev/null 2> "$dir/preset.txt" || { cat "$dir/preset.txt"; no "preset $m: no layout runs"; }
done
"$stepscope" plan --layers 40 --hidden 5140 --heads 40 --vocab 50257 --seq 2048 --max-seq 2048 \
  --gpus 8 --global-batch 16 --device h100-sxm > /dev/null 2> "$dir/width.txt"
[ $? = 1 ] && grep -q "not divisible by --heads 40" "$dir/width.txt" ||
  { cat "$dir/width.txt"; no "a width the heads do not divide: named, not blamed on --tp"; }
"$stepscope" plan --gpus 8 --global-batch 32 > /dev/null 2> "$dir/nomodel.txt"
[ $? = 2 ] && grep -q "describe the model" "$dir/nomodel.txt" || no "no model: exit 2"
# a sequence longer than the learned position table: exit 2 and both ways out named; with RoPE
# there is no table to outgrow
"$stepscope" plan --layers 4 --hidden 1024 --heads 8 --vocab 32000 --seq 4096 --gpus 8 \
  --global-batch 8 > /dev/null 2> "$dir/maxseq.txt"
[ $? = 2 ] && grep -q "exceeds the learned position table's 1024 positions: give --max-seq 4096 or more (the table's size), or --positions rope$" \
  "$dir/maxseq.txt" || { cat "$dir/maxseq.txt"; no "--seq past --max-seq: exit 2, the two fixes named"; }
"$stepscope" plan --layers 4 --hidden 1024 --heads 8 --vocab 32000 --seq 4096 --gpus 8 \
  --global-batch 8 --positions rope --top 1 > /dev/null 2> "$dir/rope.txt" ||
  { cat "$dir/rope.txt"; no "--seq past the default --max-seq with RoPE: runs"; }
exit $fail
