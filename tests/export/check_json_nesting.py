#!/usr/bin/env python3
"""check_json_nesting.py -- every thread track of a `stepscope export` JSON
file holds properly nested slices (SPEC section 5: partial overlaps go to
extra lanes), and every extra lane is named like its track plus "(lane N)".

usage: check_json_nesting.py TRACE.json[.gz] [MIN_EXTRA_LANES]

Times are compared in integer nanoseconds (ts and dur are written with three
decimals). With MIN_EXTRA_LANES, at least that many extra lanes must exist
(a run built with overlapping slices must have needed them). Every flow
event (s/f) must sit on the start of a slice of its own track, so that flows
follow a call or op onto its extra lane.
"""
import gzip, json, re, sys
from decimal import Decimal
from collections import defaultdict


def ns(v):
    return int(Decimal(v) * 1000)


path = sys.argv[1]
min_extra = int(sys.argv[2]) if len(sys.argv) > 2 else 0
raw = gzip.open(path, "rb").read() if path.endswith(".gz") else open(path, "rb").read()
ev = json.loads(raw, parse_float=Decimal)["traceEvents"]  # exact: times near 2^62 ns
names = {}
slices = defaultdict(list)
flow_points = []
for e in ev:
    if e["ph"] == "M" and e["name"] == "thread_name":
        names[(e["pid"], e["tid"])] = e["args"]["name"]
    elif e["ph"] in ("s", "f"):
        flow_points.append((e["pid"], e["tid"], ns(e["ts"]), e["ph"]))
    elif e["ph"] == "X":
        s = ns(e["ts"])
        slices[(e["pid"], e["tid"])].append((s, s + max(ns(e["dur"]), 0), e["name"]))
bad = 0
for key, sl in slices.items():
    sl.sort(key=lambda x: (x[0], -x[1]))
    stack = []
    for s, e, name in sl:
        while stack and stack[-1][1] <= s:
            stack.pop()
        if stack and e > stack[-1][1]:
            bad += 1
            if bad <= 5:
                print(f"track {names.get(key, key)!r}: {name!r} [{s}, {e}) overlaps "
                      f"{stack[-1][2]!r} [{stack[-1][0]}, {stack[-1][1]}) without nesting")
        stack.append((s, e, name))
# flow ends bind to a slice that starts there on their own track (the call
# or op, on whichever lane it was placed)
starts = {(k[0], k[1], x[0]) for k, sl in slices.items() for x in sl}
unbound = [f for f in flow_points if (f[0], f[1], f[2]) not in starts]
assert not unbound, f"{len(unbound)} flow events not on a slice start of their track, e.g. {unbound[:3]}"
extra = [n for n in names.values() if re.search(r" \(lane \d+\)$", n)]
for n in extra:
    assert re.fullmatch(r"(stream|cpu stream|thread) .* \(lane \d+\)", n), f"extra lane named {n!r}"
assert bad == 0, f"{bad} slices do not nest on their track"
assert len(extra) >= min_extra, f"{len(extra)} extra lanes, expected at least {min_extra}"
print(f"ok: {sum(map(len, slices.values()))} slices on {len(slices)} tracks nest; {len(extra)} extra lanes")
