#!/usr/bin/env python3
"""check_export_names.py — what `stepscope export` carries over from a Kineto trace (issue 34):
the threads' names of its thread_name metadata events as the host lanes' labels, and the CPU
ops' input args on their slices, in the Chrome JSON and the Perfetto trace, whichever way the
trace is read (events whole, token by token, on two threads).

The trace is make_kineto.py's with --op-args: rank R's main thread 4000+R is named
"thread 4000+R (python)", its autograd thread 4001+R "thread 4001+R (pt_autograd_0)" and
the GPU stream 7 "stream 7 " (a stream's name: not taken for a host lane); each step has an
`aten::mm` on the autograd thread with Input Dims, Input type, Input Strides and Concrete
Inputs (and External id, Sequence number: not carried).

Checks, per way of reading:
  json      the export's thread_name metadata names both threads' lanes "thread T (NAME)"; no
            lane is made for the stream's name; every aten::mm slice's args "info" is the
            inputs' compact JSON, exactly
  perfetto  the .pftrace holds the same lane labels and the same inputs text (its interned
            strings are plain bytes)
  analyze   `stepscope analyze --json` is the same with and without the metadata events

Usage: check_export_names.py STEPSCOPE MAKE_KINETO WORKDIR
"""
import json
import os
import subprocess
import sys

BIN, MAKE, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(WORK, exist_ok=True)
FAILS = []
INPUTS = ('{"Input Dims":[[64,128],[128,256]],"Input type":["float","float"],'
          '"Input Strides":[[128,1],[256,1]],"Concrete Inputs":["",""]}')
LABELS = ["thread %d (python)" % 4000, "thread %d (pt_autograd_0)" % 4001,
          "thread %d (python)" % 4001, "thread %d (pt_autograd_0)" % 4002]
WAYS = [("whole", {}), ("tokens", {"STEPSCOPE_KINETO_FAST": "off"}),
        ("split", {"STEPSCOPE_KINETO_SPLIT": "on", "STEPSCOPE_KINETO_SPLIT_AT": "0.5"})]


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


def run(args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([BIN] + args, capture_output=True, text=True, env=e)
    return p.returncode, p.stdout, p.stderr


run_dir = os.path.join(WORK, "run")
subprocess.run([sys.executable, MAKE, run_dir, "--ranks", "2", "--steps", "3", "--layers", "2",
                "--op-args"], check=True)

for way, env in WAYS:
    out_json, out_pf = os.path.join(WORK, way + ".json"), os.path.join(WORK, way + ".pftrace")
    rc1, _, e1 = run(["export", run_dir, "-o", out_json], env)
    rc2, _, e2 = run(["export", run_dir, "-o", out_pf], env)
    check(rc1 == 0 and rc2 == 0, "%s: export: %s %s" % (way, e1, e2))
    if rc1 or rc2:
        continue
    with open(out_json) as f:
        events = json.load(f)["traceEvents"]
    names = [e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"]
    for label in LABELS:
        check(names.count(label) == 1, "%s: json: lane %r once (lanes %r)" % (way, label, names))
    check(not any("(stream" in n for n in names), "%s: json: no lane labelled by a stream's name %r" % (way, names))
    mm = [e for e in events if e.get("ph") == "X" and e.get("name") == "aten::mm"]
    check(len(mm) == 6, "%s: json: 6 aten::mm slices, %d" % (way, len(mm)))
    for e in mm:
        check(e["args"].get("info") == INPUTS, "%s: json: aten::mm args %r" % (way, e["args"]))
    with open(out_pf, "rb") as f:
        pf = f.read()
    for label in LABELS:
        check(label.encode() in pf, "%s: perfetto: lane %r" % (way, label))
    check(INPUTS.encode() in pf, "%s: perfetto: the inputs' text" % way)

# the analysis does not read the names: the same report without the metadata events
stripped = os.path.join(WORK, "stripped")
os.makedirs(stripped, exist_ok=True)
for name in sorted(os.listdir(run_dir)):
    with open(os.path.join(run_dir, name)) as f:
        doc = json.load(f)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("ph") != "M"]
    with open(os.path.join(stripped, name), "w") as f:
        json.dump(doc, f)
reports = []
for d in (run_dir, stripped):
    rc, out, err = run(["analyze", d, "--json", "-"])
    check(rc == 0, "analyze %s: %s" % (d, err))
    reports.append(json.loads(out) if rc == 0 else None)
if reports[0] is not None and reports[1] is not None:
    reports[0].pop("run", None), reports[1].pop("run", None)
    check(reports[0] == reports[1], "analyze: the same report with and without the metadata events")

if FAILS:
    print("%d failure(s)" % len(FAILS))
    sys.exit(1)
print("export names: all checks passed")
