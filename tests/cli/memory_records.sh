#!/bin/sh
# memory_records.sh — memory over time from MEMORY records (issue 33 §3).
#
# usage: memory_records.sh STEPSCOPE WRITE_MEMORY_RUN
# write_memory_run writes a run of known allocations (its header says which); checks the
# answers of `stepscope ops --memory --json` per device (peak and when, per-step peaks, what
# is live at the peak: a free ends the allocation at its address) and the allocated-bytes
# counters of `stepscope export --memory` (none for reserved bytes: MEMORY records have none),
# and that a plain `export` writes no memory track. Times are ns from the run's start (1000).
set -u
stepscope=$1 writer=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-memory.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
"$writer" "$dir/run" || { echo "FAIL: write_memory_run"; exit 1; }
"$stepscope" ops "$dir/run" --memory --json "$dir/mem.json" >"$dir/mem.txt" 2>&1 ||
    { echo "FAIL: ops --memory"; cat "$dir/mem.txt"; exit 1; }
"$stepscope" export "$dir/run" --memory -o "$dir/mem-export.json" >/dev/null 2>&1 &&
    "$stepscope" export "$dir/run" -o "$dir/plain-export.json" >/dev/null 2>&1 ||
    { echo "FAIL: export"; exit 1; }
python3 - "$dir" <<'PY' || exit 1
import json, sys
d = sys.argv[1]
mem = json.load(open(d + "/mem.json"))
got = {x["device"]: x for x in mem["devices"]}
want = {  # device: events, peak, its time, step peaks, live count, live bytes, largest
    "cuda:0": (5, 400, 200, [400, 350], 2, 400, [300, 100]),
    "cuda:1": (1, 7, 500, [7, 7], 1, 7, [7]),
    "cpu": (2, 64, 50, [64, 64], 1, 64, [64]),
}
bad = []
if sorted(got) != sorted(want): bad.append("devices %s, want %s" % (sorted(got), sorted(want)))
for dev, (events, peak, when, steps, count, live, largest) in want.items():
    x = got.get(dev)
    if not x: continue
    have = (x["events"], x["peak_allocated_bytes"], x["peak_time_ns"],
            [s["peak_allocated_bytes"] for s in x["steps"]], x["live_at_peak"]["count"],
            x["live_at_peak"]["bytes"], [a["bytes"] for a in x["live_at_peak"]["largest"]])
    if have != (events, peak, when, steps, count, live, largest):
        bad.append("%s: %r, want %r" % (dev, have, (events, peak, when, steps, count, live, largest)))
    if x["peak_reserved_bytes"] != 0 or x["live_at_peak"]["bytes_before_trace"] != 0:
        bad.append("%s: reserved %r, before the trace %r" % (dev, x["peak_reserved_bytes"],
                                                             x["live_at_peak"]["bytes_before_trace"]))
def counters(path):
    ev = json.load(open(path))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    out = {}
    for e in ev:
        if e.get("ph") == "C" and e["name"].startswith("memory "):
            out.setdefault(e["name"], []).append(e["args"]["value"])
    return out
tracks = counters(d + "/mem-export.json")
want_tracks = {"memory allocated (cuda:0)": [100, 400, 300, 350, 50],
               "memory allocated (cuda:1)": [7], "memory allocated (cpu)": [64, 0]}
if tracks != want_tracks: bad.append("export --memory tracks %r, want %r" % (tracks, want_tracks))
if counters(d + "/plain-export.json"): bad.append("a plain export has memory tracks")
if bad:
    print("FAIL:\n  " + "\n  ".join(bad)); sys.exit(1)
print("ok: 3 devices, peaks, steps, live at the peak and the export's memory tracks")
PY
