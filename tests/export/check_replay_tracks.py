#!/usr/bin/env python3
"""check_replay_tracks.py -- the replay processes of `stepscope export RUN -o X.json --replay
[--what-if EDIT]` against the measured ones of the same file.

usage: check_replay_tracks.py EXPORT.json LABEL COMPUTE_SCALE

LABEL is the process name before " (rank R)" ("replay", "replay: kind=compute:scale=0.5");
COMPUTE_SCALE the factor the edits put on compute ops (1 without an edit).

Checks, per rank that has a measured process:
- there is one replay process "LABEL (rank R)", its tracks named as the rank's lanes;
- lane by lane, the replayed ops are the measured ops, in the same order, with the same names
  (a track's extra lanes "... (lane N)" taken with it);
- every compute op lasts its measured duration x COMPUTE_SCALE (to the ns, +-1 for rounding);
  shift_ns is the replayed start minus the measured start;
- with COMPUTE_SCALE 1 (the plain replay), every op starts within 5 % of the rank's measured
  span of its measured start (the replay reproduces the trace); with a smaller one, the rank's
  last replayed op ends no later than its last measured op.
"""
import json
import re
import sys
from collections import defaultdict
from decimal import Decimal


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def ns(v):
    return int(Decimal(str(v)) * 1000)


def main():
    path, label, scale = sys.argv[1], sys.argv[2], float(sys.argv[3])
    ev = json.load(open(path), parse_float=Decimal)["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
               if e["ph"] == "M" and e["name"] == "thread_name"}
    measured_pid, replay_pid = {}, {}
    for pid, name in procs.items():
        m = re.fullmatch(r"rank (\d+) \(.*\)", name)
        if m:
            measured_pid[int(m.group(1))] = pid
        m = re.fullmatch(re.escape(label) + r" \(rank (\d+)\)", name)
        if m:
            replay_pid[int(m.group(1))] = pid
    if not measured_pid:
        fail("no measured rank process")
    if sorted(replay_pid) != sorted(measured_pid):
        fail(f"replay processes for ranks {sorted(replay_pid)}, measured {sorted(measured_pid)}"
             f" (processes: {sorted(procs.values())})")
    lanes = defaultdict(list)  # (rank, replay?, lane name) -> [(ts, dur, name, kind, shift)]
    for e in ev:
        if e["ph"] != "X":
            continue
        pid = e["pid"]
        lane = re.sub(r" \(lane \d+\)$", "", threads[(pid, e["tid"])])
        cat = e["args"]["category"]
        if pid in replay_pid.values() and cat == "derived":
            rank = next(r for r, p in replay_pid.items() if p == pid)
            lanes[(rank, 1, lane)].append((ns(e["ts"]), ns(e["dur"]), e["name"],
                                           e["args"]["kind"], int(e["args"]["shift_ns"])))
        elif pid in measured_pid.values() and cat not in ("host", "derived"):
            rank = next(r for r, p in measured_pid.items() if p == pid)
            lanes[(rank, 0, lane)].append((ns(e["ts"]), ns(e["dur"]), e["name"], cat, 0))
    checked = 0
    for rank in measured_pid:
        span = [min(t for (r, k, _), v in lanes.items() if r == rank and not k for t, *_ in v),
                max(t + d for (r, k, _), v in lanes.items() if r == rank and not k for t, d, *_ in v)]
        tolerance = 0.05 * (span[1] - span[0])
        measured_lanes = sorted(l for (r, k, l) in lanes if r == rank and not k)
        replay_lanes = sorted(l for (r, k, l) in lanes if r == rank and k)
        if measured_lanes != replay_lanes:
            fail(f"rank {rank}: replay tracks {replay_lanes}, measured lanes {measured_lanes}")
        last_measured = last_replayed = 0
        for lane in measured_lanes:
            mv = sorted(lanes[(rank, 0, lane)], key=lambda s: (s[0], -s[1]))
            rv = sorted(lanes[(rank, 1, lane)], key=lambda s: (s[0] - s[4], -s[1]))
            if [s[2] for s in mv] != [s[2] for s in rv]:
                fail(f"rank {rank} {lane}: the replayed ops are not the measured ones in order")
            for m, r in zip(mv, rv):
                if r[0] - m[0] != r[4]:
                    fail(f"rank {rank} {lane} {m[2]}: shift_ns {r[4]}, starts {m[0]} -> {r[0]}")
                if m[3] == "compute" and abs(r[1] - int(m[1] * scale)) > 1:
                    fail(f"rank {rank} {lane} {m[2]}: replayed {r[1]} ns, measured {m[1]} x {scale}")
                if scale == 1 and abs(r[4]) > tolerance:
                    fail(f"rank {rank} {lane} {m[2]}: the plain replay moved it by {r[4]} ns "
                         f"(more than 5 % of the rank's span)")
                last_measured = max(last_measured, m[0] + m[1])
                last_replayed = max(last_replayed, r[0] + r[1])
                checked += 1
        if scale < 1 and last_replayed > last_measured:
            fail(f"rank {rank}: faster compute ends its last op later ({last_replayed} > "
                 f"{last_measured} ns)")
    if not checked:
        fail("no op compared")
    print(f"ok: {len(replay_pid)} replay processes, {checked} ops compared")


main()
