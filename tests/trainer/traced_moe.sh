#!/bin/sh
# traced_moe.sh — a traced expert-parallel run, checked against the analyzer's report.
#
# usage: traced_moe.sh TRAINER STEPSCOPE WORLD STEPS [TRAINER ARGS...]
# Runs stepscope-train with --trace (the arguments give --experts, --ep, ...), then checks:
#   - every rank wrote one `moe.load` mark per step and MoE layer, and (dropless) each one's
#     tokens_per_expert sum to the rank's tokens x top-k x micro-batches;
#   - `stepscope analyze --json`: no incomplete collective; every all-to-all instance of
#     group "ep" matched on all its members, with busbw = algbw x (n-1)/n;
#   - the report's "moe" section equals an independent computation from the marks (the
#     load per expert summed over each EP group, TP rank 0 only; per step the worst
#     max/mean over (layer, group) per expert and per EP rank), and its per-expert totals;
#   - with --capacity-factor, the `moe.dropped` counter is positive on some rank.
set -u
trainer=$1 stepscope=$2 world=$3 steps=$4
shift 4
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-trace-moe.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
"$trainer" --backend cpu --world "$world" --steps "$steps" --quiet --trace "$dir/run" "$@" \
    --log "$dir/log.jsonl" >"$dir/train.out" 2>&1 || { echo "FAIL: training failed"; cat "$dir/train.out"; exit 1; }
"$stepscope" analyze "$dir/run" --json "$dir/report.json" >"$dir/report.txt" 2>&1 ||
    { echo "FAIL: stepscope analyze failed"; cat "$dir/report.txt"; exit 1; }
for f in "$dir"/run/rank-*.trace.zst; do
    "$stepscope" dump "$f" >"$f.jsonl" || { echo "FAIL: dump $f"; exit 1; }
done
python3 - "$dir" "$steps" "$*" <<'PY' || exit 1
import glob, json, sys
d, steps, args = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
def opt(name, default):
    return type(default)(args[args.index(name) + 1]) if name in args else default
capacity = opt("--capacity-factor", 0.0)
rep = json.load(open(d + "/report.json"))
bad = []
# the all-to-alls: matched, busbw factor (n-1)/n
inst = [i for i in rep["collectives"]["instances"] if i["group"] == "ep"]
if not inst: bad.append("no all-to-all instance of group ep")
for i in inst:
    n = i["comm_size"]
    if i["op"] != "all_to_all" or not i["complete"] or i["present"] != n:
        bad.append("ep instance %s not a complete all_to_all" % i["seq"])
    # the report prints 9 significant digits: a relative tolerance of 1e-7
    if abs(i["busbw_gbps"] - i["algbw_gbps"] * (n - 1) / n) > 1e-7 * max(1e-9, i["algbw_gbps"]):
        bad.append("ep instance %s busbw %g != algbw x (n-1)/n" % (i["seq"], i["busbw_gbps"]))
if rep["collectives"]["incomplete"]: bad.append("incomplete collectives")
# the marks
groups, dropped = {}, 0
for f in sorted(glob.glob(d + "/run/rank-*.jsonl")):
    meta = {}
    for line in open(f):
        r = json.loads(line)
        if r["kind"] == "metadata" and r["key"] in ("moe", "config", "layout"):
            meta[r["key"]] = json.loads(r["value_json"])
        if r["kind"] == "counter" and r["name"] == "moe.dropped":
            dropped += r["value"]
        if r["kind"] != "mark" or r["name"] != "moe.load": continue
        a = json.loads(r["args"])
        if a["tp_rank"] != 0: continue
        key = (a["step"], a["layer"], a["edp_rank"])
        g = groups.setdefault(key, [0] * a["experts"])
        for e, n in enumerate(a["tokens_per_expert"]): g[e] += n
        if capacity == 0 and f:
            pass
    moe = meta["moe"]
E, K, ep = moe["experts"], moe["top_k"], moe["ep"]
# dropless: every assignment counted: per (step, layer) over groups = global tokens x K
tokens_step = opt("--batch", 8) * opt("--seq", 64)
per = {}
for (s, l, g), v in groups.items(): per[(s, l)] = per.get((s, l), 0) + sum(v)
for k, v in per.items():
    if v != tokens_step * K: bad.append("step/layer %s: %d assignments, expected %d" % (k, v, tokens_step * K))
steps_seen = sorted({k[0] for k in groups})
if steps_seen != list(range(steps)): bad.append("moe.load steps %s" % steps_seen)
exp = {}
for (s, l, g), v in groups.items():
    tot = sum(v); mean = tot / E; El = E // ep
    ei = max(v) / mean
    ri = max(sum(v[q * El:(q + 1) * El]) for q in range(ep)) / (tot / ep)
    e0, r0 = exp.get(s, (0, 0))
    exp[s] = (max(e0, ei), max(r0, ri))
m = rep["moe"]
if m is None: bad.append("report has no moe section")
else:
    if m["experts"] != E or m["ep"] != ep: bad.append("moe experts/ep %s/%s" % (m["experts"], m["ep"]))
    for s in m["steps"]:
        ei, ri = exp[s["step"]]
        if abs(s["expert_imbalance"] - ei) > 1e-6 or abs(s["ep_rank_imbalance"] - ri) > 1e-6:
            bad.append("step %d: analyzer %.6f/%.6f, marks %.6f/%.6f" % (s["step"], s["expert_imbalance"], s["ep_rank_imbalance"], ei, ri))
        if s["expert_imbalance"] < 1 or s["ep_rank_imbalance"] < 1: bad.append("imbalance below 1")
    totals = [0] * E
    for v in groups.values():
        for e in range(E): totals[e] += v[e]
    if m["tokens_per_expert"] != totals: bad.append("tokens_per_expert %s != %s" % (m["tokens_per_expert"], totals))
    # each step's load per expert (all layers and groups) and per EP rank, from the marks
    for s in m["steps"]:
        want = [sum(v[e] for (st, l, g), v in groups.items() if st == s["step"]) for e in range(E)]
        if s["tokens_per_expert"] != want: bad.append("step %d: tokens_per_expert %s, marks %s" % (s["step"], s["tokens_per_expert"], want))
        El = E // ep
        want_r = [sum(want[q * El:(q + 1) * El]) for q in range(ep)]
        if s["tokens_per_ep_rank"] != want_r: bad.append("step %d: tokens_per_ep_rank %s, marks %s" % (s["step"], s["tokens_per_ep_rank"], want_r))
    print("expert imbalance per step:", ["%.2f" % s["expert_imbalance"] for s in m["steps"]],
          "EP rank:", ["%.2f" % s["ep_rank_imbalance"] for s in m["steps"]])
# the all-to-all waits per step: ep instances starting in [this step's start, the next's)
steps_run = rep["run"]["steps"]
for k, st in enumerate(steps_run):
    lo = st["start_ns"]; hi = steps_run[k + 1]["start_ns"] if k + 1 < len(steps_run) else st["end_ns"]
    ins = [i for i in inst if i["complete"] and lo <= i["start_ns"] < hi]
    wait = sum(i["total_wait_ns"] for i in ins)
    caused = {}
    for i in ins:
        caused[i["last_rank"]] = caused.get(i["last_rank"], 0) + i["caused_wait_ns"]
    ms = [s for s in (m["steps"] if m else []) if s["step"] == st["step"]]
    if not ms: continue
    if ms[0]["a2a_wait_ns"] != wait:
        bad.append("step %d: a2a_wait_ns %d, instances sum to %d" % (st["step"], ms[0]["a2a_wait_ns"], wait))
    pos = {r: c for r, c in caused.items() if c > 0}
    want = max(pos, key=lambda r: (pos[r], -r)) if pos else -1
    if ms[0]["a2a_wait_caused_by_rank"] != want:
        bad.append("step %d: a2a wait caused by %d, instances say %d" % (st["step"], ms[0]["a2a_wait_caused_by_rank"], want))
    if ms[0]["busiest_rank"] < 0: bad.append("step %d: busiest rank unknown" % st["step"])
if capacity > 0 and dropped <= 0: bad.append("--capacity-factor %g but no dropped assignments" % capacity)
if capacity == 0 and dropped != 0: bad.append("dropless but %g dropped" % dropped)
for b in bad: print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
sed -n '/== expert load/,/^mean over/p' "$dir/report.txt"
echo "OK: traced MoE run checked against the analyzer"
