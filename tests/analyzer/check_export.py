#!/usr/bin/env python3
"""check_export.py -- validates a `stepscope export` file against SPEC section 5.

usage: check_export.py TRACE.json[.gz] EXPECTED_RANKS

Checks: the document parses as JSON (object form with traceEvents), every pid
is non-zero and named "rank R (host, GPU d|cpu)" with a sort index, every tid
is named and belongs to one pid only, X events have ts/dur with three
decimals, device events carry args.category in {compute, comm, memcpy,
memset}, host events "host", derived slices "derived", flow s/f events pair
up by id, and the expected number of ranks is present.
"""
import gzip, json, re, sys

path, want_ranks = sys.argv[1], int(sys.argv[2])
raw = gzip.open(path, "rb").read() if path.endswith(".gz") else open(path, "rb").read()
doc = json.loads(raw)
assert isinstance(doc, dict) and "traceEvents" in doc, "not object form"
ev = doc["traceEvents"]
pname, tname, tid_pid = {}, {}, {}
flows_s, flows_f = set(), set()
cats = {}
for e in ev:
    pid = e.get("pid")
    assert isinstance(pid, int) and pid != 0, f"bad pid in {e}"
    if e["ph"] == "M":
        if e["name"] == "process_name":
            pname[pid] = e["args"]["name"]
        elif e["name"] == "thread_name":
            tname[e["tid"]] = e["args"]["name"]
        continue
    if e["ph"] == "C":
        continue
    tid = e["tid"]
    assert tid_pid.setdefault(tid, pid) == pid, f"tid {tid} used by two pids"
    assert tid in tname, f"tid {tid} has no thread_name"
    if e["ph"] == "X":
        cat = e["args"]["category"]
        cats[cat] = cats.get(cat, 0) + 1
        name = tname[tid]
        if name.startswith("stream") or name.startswith("cpu stream"):
            assert cat in ("compute", "comm", "memcpy", "memset"), f"device category {cat}"
        elif name.startswith("thread"):
            assert cat == "host", f"host category {cat}"
        else:
            assert cat == "derived", f"derived category {cat}"
    elif e["ph"] == "s":
        flows_s.add(e["id"])
    elif e["ph"] == "f":
        flows_f.add(e["id"])
for pid, name in pname.items():
    assert re.fullmatch(r"rank \d+ \(.*, (GPU \d+|cpu)\)", name), f"process name {name!r}"
    assert name.startswith(f"rank {pid - 1} "), f"pid {pid} named {name!r}"
assert len(pname) == want_ranks, f"{len(pname)} ranks, expected {want_ranks}"
assert flows_s == flows_f, "unpaired flow events"
# timestamps keep nanoseconds: three decimals as written
assert re.search(rb'"ts":\d+\.\d{3},', raw), "ts not %.3f"
assert cats.get("compute", 0) > 0 and cats.get("host", 0) > 0 and cats.get("derived", 0) > 0, cats
print(f"ok: {len(ev)} events, {len(pname)} ranks, categories {cats}, {len(flows_s)} flows")
