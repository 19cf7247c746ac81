#!/usr/bin/env python3
"""check_pftrace.py -- validates a `stepscope export RUN -o X.pftrace` file
with Perfetto's own compiled proto (the `perfetto` package's
perfetto_trace_pb2), against the JSON export and the JSON report of the same
run.

usage: check_pftrace.py TRACE.pftrace TRACE.json REPORT.json [--min-resets N]

--min-resets N: at least N packets must clear a sequence's incremental state
after its first (the intern-table limit was reached and the tables started
over).

Checks:
- every top-level field is a TracePacket (field 1) that parses, and no
  message anywhere in it has fields the proto does not know (a wrong field
  number in the hand-written encoder shows up here);
- per packet sequence: the first packet clears the incremental state; the
  incremental clock (ClockSnapshot, is_incremental) and TracePacketDefaults
  are set before use; every interned id (event names, categories, debug
  annotation names, string values) resolves in the sequence's current
  tables, and no iid is defined twice with different strings;
- every track uuid an event uses (explicit or default) and every parent was
  described by a TrackDescriptor earlier in the file;
- per track, timestamps never go back and slice begins and ends balance (so
  slices nest the way Perfetto will rebuild them);
- launch flows pair up (each id once on a call and once terminating on an
  op, in flow_ids or its varint twin flow_ids_old); each collective flow
  links at least two ops;
- the host and device slices are exactly those of the JSON export (same
  category, name, start and duration in ns, as a multiset; and the same
  list of categories as the JSON's `cat`: "comm,all_to_all",
  "host,moe_dispatch"... for expert parallelism's phases), the exposed
  comm, bubble and step slices too, there are as many launch flows as JSON
  flow pairs, and the idle slices of each rank add up, cause by cause, to
  the report's totals idle breakdown; each rank has as many device slices
  as the report counts ops.
"""
import gzip
import json
import sys
from decimal import Decimal
from collections import Counter, defaultdict

try:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
    from google.protobuf.unknown_fields import UnknownFieldSet
except ImportError as e:  # the test script installs it; say so plainly
    print(f"check_pftrace.py: needs the perfetto package ({e})", file=sys.stderr)
    sys.exit(2)

CLEARED = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
BEGIN, END, COUNTER = pb.TrackEvent.TYPE_SLICE_BEGIN, pb.TrackEvent.TYPE_SLICE_END, pb.TrackEvent.TYPE_COUNTER
BOOTTIME = 6


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def varint(buf, i):
    shift = v = 0
    while True:
        if i >= len(buf):
            fail("truncated varint at the top level")
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def no_unknown(msg, where):
    if len(UnknownFieldSet(msg)):
        fail(f"{where}: fields unknown to perfetto_trace_pb2 in {msg.DESCRIPTOR.full_name}")
    for fd, val in msg.ListFields():
        if fd.message_type is None:
            continue
        for m in (val if fd.is_repeated else [val]):
            no_unknown(m, where)


def packets(raw):
    i, n = 0, 0
    while i < len(raw):
        key, i = varint(raw, i)
        if key != (1 << 3 | 2):
            fail(f"top-level field {key >> 3} (wire type {key & 7}) at byte {i}: not a TracePacket")
        ln, i = varint(raw, i)
        if i + ln > len(raw):
            fail(f"packet {n} runs past the end of the file")
        p = pb.TracePacket()
        try:
            p.ParseFromString(raw[i:i + ln])
        except Exception as e:  # noqa: BLE001 - any decode error is the finding
            fail(f"packet {n} does not parse: {e}")
        no_unknown(p, f"packet {n}")
        yield n, p
        i += ln
        n += 1


class Seq:
    def __init__(self):
        self.valid = False
        self.tables = {}
        self.clock = None        # (clock id, value, boot offset)
        self.defaults = None


def main():
    pf_path, json_path, report_path = sys.argv[1:4]
    min_resets = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[4] == "--min-resets" else 0
    resets = 0
    raw = open(pf_path, "rb").read()
    seqs = defaultdict(Seq)
    described, parents = {}, {}
    track_name = {}
    process_of = {}
    last_ts = {}
    stacks = defaultdict(list)
    slices = Counter()           # (cat, name, ts, dur) of host/device slices
    cat_lists = Counter()        # (categories joined by ',', name, ts, dur) of the same
    derived = Counter()          # (track name, name, ts, dur) of exposed/bubble/steps
    idle = defaultdict(Counter)  # pid -> cause -> ns
    flow_any, flow_in = Counter(), Counter()
    counters = 0
    npackets = 0
    device_ops = Counter()       # pid -> device slices
    for n, p in packets(raw):
        npackets += 1
        if p.HasField("track_descriptor"):
            td = p.track_descriptor
            if td.uuid in described:
                fail(f"packet {n}: track {td.uuid} described twice")
            if td.HasField("parent_uuid") and td.parent_uuid not in described:
                fail(f"packet {n}: track {td.uuid}'s parent {td.parent_uuid} not described before")
            name = td.name or (td.thread.thread_name if td.HasField("thread") else td.process.process_name)
            described[td.uuid] = td
            track_name[td.uuid] = name
            if td.HasField("process"):
                process_of[td.uuid] = td.process.pid
            elif td.HasField("thread"):
                process_of[td.uuid] = td.thread.pid
            else:
                process_of[td.uuid] = process_of.get(td.parent_uuid)
            continue
        sid = p.trusted_packet_sequence_id
        if not sid:
            fail(f"packet {n}: no trusted_packet_sequence_id")
        s = seqs[sid]
        if p.sequence_flags & CLEARED:
            resets += s.valid
            s.valid, s.tables, s.clock, s.defaults = True, {}, None, None
        elif not s.valid:
            fail(f"packet {n}: sequence {sid} used before its incremental state was cleared")
        if p.HasField("clock_snapshot"):
            cl = {c.clock_id: c for c in p.clock_snapshot.clocks}
            inc = [c for c in cl.values() if c.is_incremental]
            if len(inc) != 1 or BOOTTIME not in cl or not 64 <= inc[0].clock_id < 128:
                fail(f"packet {n}: clock snapshot without one sequence-scoped incremental clock and BOOTTIME")
            s.clock = [inc[0].clock_id, inc[0].timestamp, cl[BOOTTIME].timestamp - inc[0].timestamp]
        if p.HasField("trace_packet_defaults"):
            s.defaults = p.trace_packet_defaults
        if p.HasField("interned_data"):
            d = p.interned_data
            for field in ("event_names", "event_categories", "debug_annotation_names"):
                for e in getattr(d, field):
                    old = s.tables.setdefault(field, {}).setdefault(e.iid, e.name)
                    if old != e.name:
                        fail(f"packet {n}: {field} iid {e.iid} redefined ({old!r} -> {e.name!r})")
            for e in d.debug_annotation_string_values:
                old = s.tables.setdefault("strings", {}).setdefault(e.iid, e.str)
                if old != e.str:
                    fail(f"packet {n}: string iid {e.iid} redefined")
        if not p.HasField("track_event"):
            continue
        te = p.track_event
        # time
        clock_id = p.timestamp_clock_id if p.HasField("timestamp_clock_id") else (
            s.defaults.timestamp_clock_id if s.defaults and s.defaults.HasField("timestamp_clock_id") else BOOTTIME)
        if clock_id == BOOTTIME:
            ts = p.timestamp
        else:
            if not s.clock or s.clock[0] != clock_id:
                fail(f"packet {n}: clock {clock_id} not defined on sequence {sid}")
            s.clock[1] += p.timestamp
            ts = s.clock[1] + s.clock[2]
        # track
        if te.HasField("track_uuid"):
            track = te.track_uuid
        elif s.defaults and s.defaults.track_event_defaults.HasField("track_uuid"):
            track = s.defaults.track_event_defaults.track_uuid
        else:
            fail(f"packet {n}: event without a track")
        if track not in described:
            fail(f"packet {n}: track {track} used before it is described")
        if ts < last_ts.get(track, 0):
            fail(f"packet {n}: time goes back on track {track_name[track]!r} ({last_ts[track]} -> {ts})")
        last_ts[track] = ts

        def lookup(table, iid):
            v = s.tables.get(table, {}).get(iid)
            if v is None:
                fail(f"packet {n}: {table} iid {iid} does not resolve on sequence {sid}")
            return v

        if te.type == BEGIN:
            name = lookup("event_names", te.name_iid) if te.HasField("name_iid") else te.name
            cats = [lookup("event_categories", c) for c in te.category_iids]
            for a in te.debug_annotations:
                lookup("debug_annotation_names", a.name_iid)
                if a.HasField("string_value_iid"):
                    lookup("strings", a.string_value_iid)
            for f in list(te.flow_ids) + list(te.flow_ids_old):
                flow_any[f] += 1
            for f in list(te.terminating_flow_ids) + list(te.terminating_flow_ids_old):
                flow_in[f] += 1
            stacks[track].append((ts, name, cats[0] if cats else "", ",".join(cats)))
        elif te.type == END:
            if not stacks[track]:
                fail(f"packet {n}: slice end without a begin on track {track_name[track]!r}")
            t0, name, cat, all_cats = stacks[track].pop()
            tn = track_name[track]
            if cat == "derived":
                if tn == "idle":
                    idle[process_of[track]][name] += ts - t0
                else:
                    derived[(tn, name, t0, ts - t0)] += 1
            else:
                slices[(cat, name, t0, ts - t0)] += 1
                cat_lists[(all_cats, name, t0, ts - t0)] += 1
                if cat != "host":
                    device_ops[process_of[track]] += 1
        elif te.type == COUNTER:
            if not described[track].HasField("counter"):
                fail(f"packet {n}: counter value on a track that is not a counter track")
            counters += 1
        else:
            fail(f"packet {n}: unexpected event type {te.type}")
    for track, st in stacks.items():
        if st:
            fail(f"track {track_name[track]!r}: {len(st)} slices never end")
    # a flow that terminates is a launch flow: one start, one end; the others
    # (collectives) pass through every member and must link at least two
    flow_out = {f: c for f, c in flow_any.items() if f in flow_in}
    coll_flow = {f: c for f, c in flow_any.items() if f not in flow_in}
    for f, c in flow_in.items():
        if c != 1 or flow_any[f] != 1:
            fail(f"launch flow {f}: {flow_any[f]} starts, {c} ends")
    for f, c in coll_flow.items():
        if c < 2:
            fail(f"collective flow {f} links {c} op")

    # the same content as the JSON export
    rawj = gzip.open(json_path, "rb").read() if json_path.endswith(".gz") else open(json_path, "rb").read()
    ev = json.loads(rawj, parse_float=Decimal)["traceEvents"]  # exact: times near 2^62 ns
    tname = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    jslices, jderived, jcat_lists = Counter(), Counter(), Counter()
    jflows = 0
    for e in ev:
        if e["ph"] == "X":
            t, d = int(e["ts"] * 1000), int(e["dur"] * 1000)
            cat = e["args"]["category"]
            if cat == "derived":
                tn = tname[(e["pid"], e["tid"])]
                if tn != "idle":
                    jderived[(tn, e["name"], t, d)] += 1
            else:
                jslices[(cat, e["name"], t, d)] += 1
                jcat_lists[(e["cat"], e["name"], t, d)] += 1
        elif e["ph"] == "s":
            jflows += 1
    if slices != jslices:
        diff = list((slices - jslices).items())[:3] + list((jslices - slices).items())[:3]
        fail(f"host/device slices differ from the JSON export ({sum(slices.values())} vs "
             f"{sum(jslices.values())}), e.g. {diff}")
    if cat_lists != jcat_lists:  # second categories: expert parallelism's phases
        diff = list((cat_lists - jcat_lists).items())[:3] + list((jcat_lists - cat_lists).items())[:3]
        fail(f"host/device slices' categories differ from the JSON export's cat, e.g. {diff}")
    if derived != jderived:
        diff = list((derived - jderived).items())[:3] + list((jderived - derived).items())[:3]
        fail(f"exposed comm/bubble/step slices differ from the JSON export, e.g. {diff}")
    if len(flow_out) != jflows:
        fail(f"{len(flow_out)} launch flows, the JSON has {jflows}")
    # idle by cause = the report's idle breakdown
    report = json.load(open(report_path))
    for r in report["ranks"]:
        if device_ops[r["rank"] + 1] != r["ops"]:
            fail(f"rank {r['rank']}: {device_ops[r['rank'] + 1]} device slices, the report counts {r['ops']} ops")
        want = {k[:-3]: v for k, v in r["totals"]["idle_breakdown"].items() if v}
        got = {k: v for k, v in idle.get(r["rank"] + 1, {}).items() if v}
        if want != got:
            fail(f"rank {r['rank']}: idle overlay by cause {got} != the report's {want}")
    if resets < min_resets:
        fail(f"{resets} incremental-state resets, expected at least {min_resets}")
    print(f"ok: {npackets} packets, {resets} resets on {len(seqs)} sequences, {len(described)} tracks, "
          f"{sum(slices.values())} host/device slices, {sum(derived.values())} derived, "
          f"{len(flow_out)} launch flows, {len(coll_flow)} collective flows, {counters} counter values, "
          f"{sum(sum(c.values()) for c in idle.values())} ns idle by cause")


main()
