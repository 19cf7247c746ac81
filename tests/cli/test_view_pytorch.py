#!/usr/bin/env python3
"""test_view_pytorch.py — what `stepscope view` gives a PyTorch run (issue 33): the export it
generates has the memory counter track of the trace's [memory] events (it runs `export
--memory`), and the page gets the run's module tree and memory timeline (`stepscope ops --by
module` / `--memory` JSON), inlined by --html and served at run/a/modules.json and
run/a/memory.json by the server; a stepscope run (no PyTorch trace) gets neither.

  test_view_pytorch.py STEPSCOPE_EXE TORCH_TRACE SAMPLE_RUN WORK_DIR

TORCH_TRACE: a torch CPU trace with with_modules and profile_memory (tests/data/kineto/ops).
Plain python3; exit 0 pass, 1 fail."""

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request


def check(cond, what):
    if not cond:
        print("FAIL: " + what)
        sys.exit(1)


def inline(page, kind):
    m = re.search(r'<script type="application/json" data-bytes="-?\d+" id="data-a-%s">(.*?)</script>'
                  % kind, page, re.S)
    return json.loads(m.group(1)) if m else None


def command_json(exe, *args):
    r = subprocess.run([exe] + list(args) + ["--json", "-"], capture_output=True, text=True)
    check(r.returncode == 0, "%s: %s" % (args, r.stderr))
    doc = json.loads(r.stdout)
    doc.pop("run")  # the path it was given
    return doc


def main():
    exe, torch_trace, sample, work = sys.argv[1:5]
    run = os.path.join(work, "view_pytorch_run")
    shutil.rmtree(run, ignore_errors=True)
    os.makedirs(run)
    trace = os.path.join(run, os.path.basename(torch_trace))
    shutil.copy(torch_trace, trace)
    with gzip.open(trace, "rt") as f:
        events = json.load(f)["traceEvents"]
    mem = [e for e in events if e.get("name") == "[memory]"]
    check(len(mem) > 0, "precondition: the trace has memory events")

    page_path = os.path.join(work, "view_pytorch.html")
    r = subprocess.run([exe, "view", run, "--html", page_path], capture_output=True, text=True)
    check(r.returncode == 0, "view --html: %s" % r.stderr)
    page = open(page_path).read()
    listing = json.loads(re.search(r"window.STEPSCOPE_INLINE = (.*?);</script>", page).group(1))
    a = listing["runs"][0]
    check(a["modules"] == "data-a-modules" and a["memory"] == "data-a-memory",
          "the listing names the module tree and the memory timeline: %r" % a)

    # the timeline's counter track: one value per [memory] event, each the event's total
    exported = inline(page, "trace")["traceEvents"]
    counter = [e for e in exported if e.get("ph") == "C" and e.get("name") == "memory allocated (cpu)"]
    check(len(counter) == len(mem), "a counter value per memory event (%d of %d)"
          % (len(counter), len(mem)))
    values = sorted(v for e in counter for v in e["args"].values())
    check(values == sorted(e["args"]["Total Allocated"] for e in mem),
          "the counter's values are the events' Total Allocated")

    # the Summary's tables: the command's JSON (but the path it names)
    for kind, args in (("modules", ["--by", "module"]), ("memory", ["--memory"])):
        got = inline(page, kind)
        check(got is not None, "the page inlines %s" % kind)
        got.pop("run")
        check(got == command_json(exe, "ops", trace, *args), "%s is `stepscope ops %s`'s JSON"
              % (kind, " ".join(args)))
    check(max(values) == inline(page, "memory")["devices"][0]["peak_allocated_bytes"],
          "the counter's peak is the memory table's")

    # the server lists and serves them
    p = subprocess.Popen([exe, "view", run, "--port", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    try:
        base = re.search(r"(http://\S+/t/[0-9a-f]+/)", p.stdout.readline()).group(1)
        runs = json.load(urllib.request.urlopen(base + "api/runs", timeout=30))["runs"]
        check(runs[0]["modules"] == "run/a/modules.json" and runs[0]["memory"] == "run/a/memory.json",
              "api/runs names them: %r" % runs[0])
        served = json.load(urllib.request.urlopen(base + runs[0]["modules"], timeout=30))
        check(served["rows"] == inline(page, "modules")["rows"], "the server serves the module tree")
        served = json.load(urllib.request.urlopen(base + runs[0]["memory"], timeout=30))
        check(served["devices"] == inline(page, "memory")["devices"], "the server serves the memory")
    finally:
        p.terminate()
        p.wait(10)

    # a stepscope run: neither
    page_path = os.path.join(work, "view_pytorch_sample.html")
    r = subprocess.run([exe, "view", sample, "--html", page_path], capture_output=True, text=True)
    check(r.returncode == 0, "view --html of the sample: %s" % r.stderr)
    page = open(page_path).read()
    a = json.loads(re.search(r"window.STEPSCOPE_INLINE = (.*?);</script>", page).group(1))["runs"][0]
    check(a["modules"] is None and a["memory"] is None, "no op tables for a stepscope run: %r" % a)
    print("PASS view_pytorch")


if __name__ == "__main__":
    main()
