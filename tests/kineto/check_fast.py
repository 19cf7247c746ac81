#!/usr/bin/env python3
"""check_fast.py STEPSCOPE MAKE_KINETO SEEDS WORKDIR — the Kineto events'
fast path (analyzer/src/import/kineto/kineto_fast.c: an event object read whole over the
buffer) must give exactly what reading every event token by token gives:
the analysis JSON, the exit status and every message (warnings, errors with
their byte offsets). Each document is analysed with STEPSCOPE_KINETO_FAST=on
and =off; STEPSCOPE_KINETO_FAST_TRACE says how many events each way read,
and the test checks that both ways are really taken where they should be
(the fast one on nearly every event of a generated trace, the general one on
each edited event), so it cannot pass by never taking the fast path.

Documents: generated runs (make_kineto.py: plain and gzip, CUDA graphs, NCCL
metadata on kernels or on record_param_comms ops, missing correlations,
several ranks); the fuzz seed with the fast path's edge cases; and a
generated trace with one event edited at a time, in each way the fast path
gives up on (an escape, a non-ASCII name, a quoted number, an exponent, four
decimals, a negative or fractional id, 20 digits, nesting deeper than it
takes) or checks (a repeated key, a JSON error inside an event: a missing
':', a trailing ',', a bad literal, a leading zero, a control character)."""
import gzip
import json
import os
import re
import shutil
import subprocess
import sys

exe, gen, seeds, work = sys.argv[1:5]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
fail = 0


def check(cond, what):
    global fail
    if not cond:
        print("FAILED:", what)
        fail += 1


def analyze(path, mode):
    env = dict(os.environ)
    env["STEPSCOPE_KINETO_FAST"] = mode
    env["STEPSCOPE_KINETO_FAST_TRACE"] = "1"
    out = path + "." + mode + ".report.json"
    if os.path.exists(out):
        os.remove(out)
    r = subprocess.run([exe, "analyze", path, "--json", out, "--quiet"], env=env, capture_output=True, text=True)
    lines = r.stderr.splitlines()
    counts = [0, 0]
    for ln in lines:
        m = re.match(r"kineto fast: .*: (\d+) events read whole, (\d+) token by token", ln)
        if m:
            counts[0] += int(m.group(1))
            counts[1] += int(m.group(2))
    rest = "\n".join(ln for ln in lines if not ln.startswith("kineto fast: "))
    report = open(out).read() if os.path.exists(out) else None
    return r.returncode, rest, report, counts


def same(path, what):
    """Both ways alike; returns the fast way's (whole, by token) counts."""
    a = analyze(path, "off")
    b = analyze(path, "on")
    check(a[3][0] == 0, "%s: events read whole with the fast path off" % what)
    check(a[0] == b[0], "%s: exit status %d vs %d" % (what, a[0], b[0]))
    check(a[1] == b[1], "%s: messages differ:\n--- off\n%s\n--- on\n%s" % (what, a[1], b[1]))
    check(a[2] == b[2], "%s: the analysis JSON differs" % what)
    return b[0], b[3]


# generated runs: nearly every event read whole
for name, opts in [("plain", ["--steps", "4", "--layers", "8"]),
                   ("gzip", ["--steps", "4", "--layers", "8", "--gzip"]),
                   ("graphs", ["--steps", "6", "--layers", "8", "--graphs", "--base-ns"]),
                   ("param_comms", ["--steps", "4", "--layers", "8", "--param-comms"]),
                   ("missing", ["--steps", "4", "--layers", "8", "--missing-corr", "3"]),
                   ("ranks", ["--ranks", "4", "--steps", "3", "--layers", "4"])]:
    d = os.path.join(work, name)
    if "--ranks" not in opts:
        opts = ["--ranks", "1"] + opts
    subprocess.run([sys.executable, gen, d] + opts, check=True)
    rc, (whole, by_token) = same(d, name)
    check(rc == 0, "%s: analysed" % name)
    check(whole > 0 and by_token <= whole // 50,
          "%s: the fast path read nearly every event (%d whole, %d token by token)" % (name, whole, by_token))

# the fuzz seed with the fast path's edge cases: both ways taken
edges = os.path.join(work, "fast_path_edges.json")
shutil.copy(os.path.join(seeds, "fast_path_edges.json"), edges)
rc, (whole, by_token) = same(edges, "fast_path_edges.json")
check(rc == 0 and whole > 0 and by_token > 0, "fast_path_edges.json: both ways taken (%d, %d)" % (whole, by_token))

# one event edited at a time in a generated trace
base_dir = os.path.join(work, "base")
subprocess.run([sys.executable, gen, base_dir, "--ranks", "1", "--steps", "3", "--layers", "4"], check=True)
doc = json.load(open(os.path.join(base_dir, "rank-0.json")))
events = doc["traceEvents"]


def first(cat):
    return next(i for i, e in enumerate(events) if e.get("cat") == cat and e.get("ph") == "X")


kernel, runtime, cpu_op = first("kernel"), first("cuda_runtime"), first("user_annotation")
meta = next(i for i, e in enumerate(events) if e.get("ph") == "M")


def event_text(e):
    return json.dumps(e)


def document(index, text):
    """The trace with event `index` written as `text` (the rest as json.dumps writes them)."""
    parts = [text if i == index else event_text(e) for i, e in enumerate(events)]
    return '{"traceEvents": [\n  ' + ",\n  ".join(parts) + "\n]}\n"


def edited(index, **changes):
    e = dict(events[index])
    args = dict(e.get("args", {}))
    for k, v in changes.items():
        if k.startswith("args_"):
            args[k[5:].replace("_", " ")] = v
        else:
            e[k] = v
    e["args"] = args
    return e


deep = {"x": 1}
for _ in range(40):
    deep = {"d": [deep]}
# (what, event index, its text, whether the general reader must take it)
cases = [
    ("escape in a name", kernel, event_text(edited(kernel, name="k\"ernel")), True),
    ("non-ASCII name", kernel, json.dumps(edited(kernel, name="k\u00e9rnel"), ensure_ascii=False), True),
    ("quoted stream", kernel, event_text(edited(kernel, args_stream="7")), True),
    ("ts with an exponent", kernel, re.sub(r'"ts": [0-9.]+', '"ts": 1.5e3', event_text(events[kernel]), 1), True),
    ("ts with four decimals", kernel, re.sub(r'"ts": ([0-9]+)(\.[0-9]+)?', r'"ts": \1.1235',
                                             event_text(events[kernel]), 1), True),
    ("negative tid", runtime, event_text(edited(runtime, tid=-3)), True),
    ("fractional pid", runtime, event_text(edited(runtime, pid=1.5)), True),
    ("20-digit bytes", kernel, event_text(edited(kernel, args_bytes=18446744073709551615)), True),
    ("deep args", runtime, event_text(edited(runtime, args_deep=deep)), True),
    ("a repeated name", runtime, event_text(events[runtime]).replace('"name": ', '"name": "first", "name": ', 1),
     False),
    ("a pid string", runtime, event_text(edited(runtime, pid="PyTorch Profiler")), False),
    ("grid of four", kernel, event_text(edited(kernel, args_grid=[1, 2, 3, 4])), False),
    ("a name too long on a metadata event", meta, event_text(dict(events[meta], name="m" * 5000)), False),
    ("a name too long on a kernel", kernel, event_text(edited(kernel, name="k" * 5000)), False),
    ("missing colon", cpu_op, event_text(events[cpu_op]).replace('"dur": ', '"dur" ', 1), True),
    ("trailing comma", cpu_op, event_text(events[cpu_op])[:-1] + ",}", True),
    ("bad literal", runtime, event_text(edited(runtime, args_flag=True)).replace("true", "tru", 1), True),
    ("leading zero", kernel, re.sub(r'"dur": ([0-9.]+)', r'"dur": 0\1', event_text(events[kernel]), 1), True),
    ("control character", cpu_op, event_text(events[cpu_op]).replace('"name": "', '"name": "\t', 1), True),
]
for what, index, text, general in cases:
    path = os.path.join(work, re.sub(r"[^a-z0-9]+", "_", what) + ".json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(document(index, text))
    rc, (whole, by_token) = same(path, what)
    check(whole > 0, "%s: the other events read whole" % what)
    if general:
        check(by_token >= 1, "%s: the edited event read token by token (%d whole, %d)" % (what, whole, by_token))
    elif rc == 0:
        check(by_token == 0, "%s: taken by the fast path (%d token by token)" % (what, by_token))

# blanks: a newline and an indentation (skipped with one word compare) that
# hide a control character must still be an error at that byte, both ways
for blanks in ("\n      \x01", "\n  \t\x01", "\n" + " " * 9 + "\x01", "\n\x01"):
    text = event_text(events[cpu_op]).replace(', "dur"', "," + blanks + ' "dur"', 1)
    doc_text = document(cpu_op, text)
    path = os.path.join(work, "blanks.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc_text)
    rc, _ = same(path, "control character after %r" % blanks)
    err = analyze(path, "on")[1]
    at = len(doc_text.encode("utf-8")[:doc_text.index("\x01")])
    check(rc == 1 and ("byte %d of the JSON text" % at) in err,
          "control character after %r: an error at byte %d (%s)" % (blanks, at, err.strip()[-120:]))

# gzip of an edited document (the pipe's buffers: events across refills)
path = os.path.join(work, "edited.json.gz")
with gzip.open(path, "wt", encoding="utf-8") as f:
    f.write(document(kernel, event_text(edited(kernel, name="k\"ernel"))))
same(path, "edited gzip")

if fail:
    print("%d check(s) failed" % fail)
    sys.exit(1)
print("kineto fast path: same results both ways on %d generated runs and %d edited events" % (6, len(cases)))
