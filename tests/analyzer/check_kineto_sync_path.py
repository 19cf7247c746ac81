#!/usr/bin/env python3
"""check_kineto_sync_path.py -- Kineto's cuda_sync events put the awaited device op on the
critical path (cp_graph.c's wait and sync edges joined by correlation).

usage: check_kineto_sync_path.py SCENARIO STEPSCOPE DIR

Writes a one-step Kineto trace of SCENARIO into DIR, runs `stepscope analyze --json` and
`stepscope export` on it and checks by name which kernels the export's "critical path" track
holds (and that the token-by-token reader and the split import give the same path). Each trace is made so that timing alone picks another kernel than the one the
synchronisation names (a kernel of another stream ends just after the awaited one, before the
waiter resumes); the truth is the kernel the cuda_sync event names:

  stream_wait   stream 24's kernel waits (Stream Wait Event) for the event recorded on stream
                7 after `slow_kernel`; `after_record_kernel` (stream 7, launched after the
                record) and `other_stream_kernel` (stream 28) end later, just before the waiter
                starts: the path is waiting_kernel <- slow_kernel;
  stream_sync   cudaStreamSynchronize(stream 7) (Stream Sync): `awaited_kernel`;
  event_sync    cudaEventSynchronize of an event recorded on stream 7 after `awaited_kernel`
                (Event Sync), `after_record_kernel` launched on stream 7 after the record;
  context_sync  cudaFree, which synchronises the device (Context Sync): `awaited_kernel`, the
                device's last (the call's name does not say it synchronises).
"""
import json, os, subprocess, sys

scenario, stepscope, out = sys.argv[1], sys.argv[2], sys.argv[3]
BASE = 1700000000000000  # us
PID, TID = 4000, 4000
events = []


def x(cat, name, pid, tid, ts, dur, **args):
    events.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
                   "ts": BASE + ts, "dur": dur, "args": args})


def call(name, corr, ts, dur):
    x("cuda_runtime", name, PID, TID, ts, dur, correlation=corr)


def kernel(name, stream, corr, ts, dur, launch_ts):
    call("cudaLaunchKernel", corr, launch_ts, 4)
    x("kernel", name, 0, stream, ts, dur, device=0, stream=stream, correlation=corr)


def sync_event(name, tid, corr, ts, dur, **args):
    x("cuda_sync", name, 0, tid, ts, dur, cuda_sync_kind=name, correlation=corr, device=0, **args)


if scenario == "stream_wait":
    kernel("slow_kernel", 7, 10, 20, 1000, 10)                    # ends 1020
    call("cudaEventRecord", 11, 16, 2)
    kernel("after_record_kernel", 7, 12, 1020, 3, 18)             # ends 1023
    kernel("other_stream_kernel", 28, 13, 900, 124, 22)           # ends 1024
    call("cudaStreamWaitEvent", 14, 26, 2)
    sync_event("Stream Wait Event", 24, 14, 26, 2, stream=24, wait_on_stream=7,
               wait_on_cuda_event_record_corr_id=11, wait_on_cuda_event_id=1)
    kernel("waiting_kernel", 24, 15, 1025, 200, 30)               # ends 1225
    call("cudaDeviceSynchronize", 16, 40, 1187)                   # ends 1227
    sync_event("Context Sync", -1, 16, 40, 1187, stream=-1)
    want, unwanted = ["waiting_kernel", "slow_kernel"], ["after_record_kernel",
                                                         "other_stream_kernel"]
elif scenario in ("stream_sync", "event_sync", "context_sync"):
    kernel("awaited_kernel", 7, 20, 20, 1980, 10)                 # ends 2000
    if scenario == "event_sync":
        call("cudaEventRecord", 21, 16, 2)
        kernel("after_record_kernel", 7, 22, 2000, 1, 18)         # ends 2001
    if scenario == "context_sync":
        kernel("other_stream_kernel", 28, 23, 1500, 490, 22)      # ends 1990
    else:
        kernel("other_stream_kernel", 28, 23, 1500, 502, 22)      # ends 2002
    name, sync = {"stream_sync": ("cudaStreamSynchronize", "Stream Sync"),
                  "event_sync": ("cudaEventSynchronize", "Event Sync"),
                  "context_sync": ("cudaFree", "Context Sync")}[scenario]
    call(name, 24, 30, 1974)                                      # ends 2004
    if scenario == "stream_sync":
        sync_event(sync, 7, 24, 31, 1972, stream=7)
    elif scenario == "event_sync":
        sync_event(sync, -1, 24, 31, 1972, stream=-1, wait_on_stream=7,
                   wait_on_cuda_event_record_corr_id=21, wait_on_cuda_event_id=1)
    else:
        sync_event(sync, -1, 24, 31, 1972, stream=4294967295)
    want = ["awaited_kernel"]
    unwanted = ["after_record_kernel", "other_stream_kernel"]
    if scenario == "context_sync":
        unwanted = ["other_stream_kernel"]
else:
    sys.exit(f"unknown scenario {scenario}")
last = max(e["ts"] + e["dur"] for e in events) - BASE
x("user_annotation", "ProfilerStep#1", PID, TID, 0, last + 2)
events.sort(key=lambda e: e["ts"])
# 40 KB of CPU ops first (not nodes of the graph), so that a split import (below) hands the
# events above, the cuda_sync ones among them, to its helper thread
filler = [{"ph": "X", "cat": "cpu_op", "name": "aten::filler", "pid": PID, "tid": TID,
           "ts": BASE + 1, "dur": 1, "args": {"External id": i}} for i in range(400)]
events = filler + events
os.makedirs(out, exist_ok=True)
trace = os.path.join(out, "trace.json")
with open(trace, "w") as f:  # one event a line, as Kineto writes them (a point to split at)
    f.write('{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}],\n'
            '"traceEvents": [\n' + ",\n".join(json.dumps(e) for e in events) + "\n]}\n")
report, export = os.path.join(out, "r.json"), os.path.join(out, "t.json")
subprocess.run([stepscope, "analyze", trace, "--json", report], check=True,
               stdout=subprocess.DEVNULL)
subprocess.run([stepscope, "export", trace, "-o", export], check=True,
               stdout=subprocess.DEVNULL)
cp = json.load(open(report))["critical_path"]
step = cp["steps"][0]
assert step["length_ns"] == step["step_time_ns"], step
doc = json.load(open(export))
ev = doc["traceEvents"] if isinstance(doc, dict) else doc
track = [(e["pid"], e["tid"]) for e in ev
         if e.get("ph") == "M" and e.get("args", {}).get("name") == "critical path"]
assert len(track) == 1, track
on_path = {e["name"] for e in ev if e.get("ph") == "X" and (e["pid"], e["tid"]) == track[0]}
missing = [k for k in want if k not in on_path]
wrong = [k for k in unwanted if k in on_path]
assert not missing and not wrong, f"{scenario}: missing {missing}, wrong {wrong}; " \
    f"path {sorted(on_path)}"
# both readers (the fast path off: token by token) and the import forced to split the document
# on two threads give the same critical path (the cuda_sync args go through each of them)
for env in ({"STEPSCOPE_KINETO_FAST": "off"},
            {"STEPSCOPE_KINETO_SPLIT": "on", "STEPSCOPE_KINETO_SPLIT_AT": "0.5",
             "STEPSCOPE_KINETO_SPLIT_TRACE": "1"}):
    other = os.path.join(out, "r-other.json")
    r = subprocess.run([stepscope, "analyze", trace, "--json", other], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       env=dict(os.environ, **env))
    assert "STEPSCOPE_KINETO_SPLIT" not in env or "kineto split: used" in r.stderr, r.stderr
    assert json.load(open(other))["critical_path"] == cp, f"{env}: another critical path"
print(f"ok: {scenario}: {', '.join(want)} on the path; path {sorted(on_path)}")
