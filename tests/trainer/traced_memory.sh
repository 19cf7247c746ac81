#!/bin/sh
# traced_memory.sh — the CPU trainer's allocation records and `stepscope ops --memory`.
#
# usage: traced_memory.sh TRAINER STEPSCOPE WORLD [TRAINER ARGS...]
# Traces 2 steps (the CPU backend writes each allocation and free as a MEMORY record of host
# memory, and the allocations live when the trace starts at its start), then checks per rank
# that `stepscope ops --memory --json` has one device, "cpu", whose peak equals the rank's
# measured peak (metadata memory.measured_peak_bytes, from the device's own count), whose
# events are the rank's MEMORY records, whose every step's peak is at most the peak (and one
# equals it: the trainer allocates everything before its first step), and whose allocations
# live at the peak add up to it.
set -u
trainer=$1 stepscope=$2 world=$3
shift 3
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-trace-mem.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
"$trainer" --backend cpu --world "$world" --steps 2 --quiet --trace "$dir/run" "$@" \
    >"$dir/train.out" 2>&1 || { echo "FAIL: training failed"; cat "$dir/train.out"; exit 1; }
"$stepscope" ops "$dir/run" --memory --json "$dir/mem.json" >"$dir/mem.txt" 2>&1 ||
    { echo "FAIL: ops --memory"; cat "$dir/mem.txt"; exit 1; }
for f in "$dir"/run/rank-*.trace.zst; do
    "$stepscope" dump "$f" >"$f.jsonl" || { echo "FAIL: dump $f"; exit 1; }
done
python3 - "$dir" "$world" <<'PY' || exit 1
import glob, json, sys
d, world = sys.argv[1], int(sys.argv[2])
mem = json.load(open(d + "/mem.json"))
bad = []
ranks = {}
for f in sorted(glob.glob(d + "/run/rank-*.jsonl")):
    rank, peak, events = None, None, 0
    for line in open(f):
        r = json.loads(line)
        if r["kind"] == "header": rank = r["rank"]
        if r["kind"] == "metadata" and r["key"] == "memory":
            peak = json.loads(r["value_json"]).get("measured_peak_bytes", peak)
        if r["kind"] == "memory": events += 1
    ranks[rank] = (peak, events)
if len(ranks) != world: bad.append("%d ranks" % len(ranks))
devs = {x["rank"]: x for x in mem["devices"]}
if sorted(devs) != sorted(ranks) or len(mem["devices"]) != world:
    bad.append("devices of ranks %s, want one per rank %s" % (sorted(devs), sorted(ranks)))
for rank, (peak, events) in sorted(ranks.items()):
    x = devs.get(rank)
    if not x: continue
    steps = [s["peak_allocated_bytes"] for s in x["steps"]]
    live = x["live_at_peak"]
    if x["device"] != "cpu": bad.append("rank %d: device %s" % (rank, x["device"]))
    if x["peak_allocated_bytes"] != peak:
        bad.append("rank %d: peak %d != measured %s" % (rank, x["peak_allocated_bytes"], peak))
    if x["events"] != events or events == 0:
        bad.append("rank %d: %d events, %d MEMORY records" % (rank, x["events"], events))
    if len(steps) != 2 or max(steps) != peak or any(s > peak for s in steps):
        bad.append("rank %d: step peaks %s, peak %s" % (rank, steps, peak))
    if live["bytes"] != peak or live["bytes_before_trace"] != 0 or live["count"] <= 0:
        bad.append("rank %d: live at the peak %r" % (rank, live))
if bad:
    print("FAIL:\n  " + "\n  ".join(bad)); sys.exit(1)
print("ok: %d rank(s), peaks %s" % (world, [ranks[r][0] for r in sorted(ranks)]))
PY
