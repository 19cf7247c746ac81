#!/usr/bin/env python3
"""test_split_browser.py — the viewer's two-worker parse in headless Chromium gives the
same model as the one-worker parse, and the loader falls back to one worker when it must.

  test_split_browser.py STEPSCOPE_EXE WORK_DIR CASE

Cases (each one CTest test, viewer.split.<case>):
  served   `stepscope view` answers byte ranges: the page splits the trace over two
           workers (parseMode 'split'); its model (every column, string, track, group,
           counter, flow; a hash over all of them) equals `?split=0` (one worker) and
           `?worker=0&chunk=7` (parsed on the page in 7-byte chunks); also with cuts at
           0.2 and 0.8 of the file and with 7-byte chunks in both workers.
  refused  a trace without newlines whose middle lies inside one huge event's args: the
           cut the loader finds there is not an event boundary, the head worker reads
           on alone (parseMode 'worker', the reason in SS.lastSplitNote), same model.
  noranges the same files from a static server that ignores Range (Python's
           http.server): one worker, same model as the split parse from `stepscope view`.
  file     the trace picked with the file input (a File): split over two workers by
           Blob slices (cut at 0.2, where flows cross the cut), same model as `?split=0`.
Without Chromium/Selenium: exit 77 (SKIP).
"""

import functools
import http.server
import json
import os
import shutil
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "browser"))
import harness  # noqa: E402
from harness import check  # noqa: E402

VIEWER = os.path.join(HERE, "..", "..", "viewer")

# A hash (FNV-1a) over every typed array of the model and a JSON of its tables.
FINGERPRINT = """
var m = stepscope.app.A.model, h = 0x811c9dc5 | 0;
function mix(v) { h = Math.imul(h ^ v, 0x01000193); }
function arr(a) { var u = new Uint8Array(a.buffer, a.byteOffset, a.byteLength); for (var i = 0; i < u.length; i++) mix(u[i]); mix(a.length); }
[m.ts, m.dur, m.nameId, m.cat, m.track, m.rowIdx, m.argOff, m.argLen, m.arena, m.order,
 m.flows.fromTrack, m.flows.fromTs, m.flows.toTrack, m.flows.toTs].forEach(arr);
var s = JSON.stringify([m.names, m.tracks.map(function (t) { return [t.id, t.pid, t.tid, t.name, t.sort, t.count, t.hasDerived, t.catMask,
                          t.rows.map(function (r) { return r.length; })]; }),
  m.groupList.map(function (g) { return [g.pid, g.name, g.sort, g.tracks.map(function (t) { return t.id; }),
                                         g.counters.map(function (c) { return [c.name, Array.from(c.ts), Array.from(c.val), c.max]; })]; }),
  m.minTs, m.maxTs, m.eventCount, m.metadata]);
for (var i = 0; i < s.length; i++) mix(s.charCodeAt(i));
return {hash: h >>> 0, n: m.n, flows: m.flows.n, events: m.eventCount, mode: stepscope.parseMode(), note: SS.lastSplitNote || '',
        cross: m.timing && m.timing.tailCrossFlows || 0};
"""


def load(d, url, timeout=120):
    d.get(url)
    harness.wait_state(d, timeout=timeout)
    return d.execute_script(FINGERPRINT)


def same_model(a, b):
    return (a["hash"], a["n"], a["flows"], a["events"]) == (b["hash"], b["n"], b["flows"], b["events"])


def sample(work):
    return harness.make_sample(os.path.join(work, "split_run"), "--dp", "2", "--pp", "2", "--steps", "2",
                               "--microbatches", "4")


def case_served(exe, work, d):
    run = sample(work)
    with harness.Server(exe, run) as srv:
        one = load(d, srv.page("?split=0"))
        check(one["mode"] == "worker" and one["flows"] > 100, "?split=0: one worker, %d slices, %d flows" % (one["n"], one["flows"]))
        two = load(d, srv.page("?splitmin=1"))
        check(two["mode"] == "split", "?splitmin=1: the trace was split over two workers (%s %s)" % (two["mode"], two["note"]))
        check(same_model(two, one), "two workers give the one-worker model %s" % two)
        page = load(d, srv.page("?worker=0&chunk=7"))
        check(page["mode"] == "page" and same_model(page, one), "the page parse in 7-byte chunks gives the same model")
        cross = two["cross"]
        for q in ("?splitmin=1&split=0.2", "?splitmin=1&split=0.8", "?splitmin=1&chunk=7"):
            r = load(d, srv.page(q))
            check(r["mode"] == "split" and same_model(r, one), "%s: split, same model (%d flows ended in the tail)" % (q, r["cross"]))
            cross += r["cross"]
        check(cross > 0, "some of these cuts had flows starting in the head and ending in the tail (%d)" % cross)
        # the default threshold keeps a small file on one worker
        r = load(d, srv.page())
        check(r["mode"] == "worker" and same_model(r, one), "a %d-byte file stays on one worker by default" % os.path.getsize(os.path.join(run, "trace.json")))


def case_refused(exe, work, d):
    run = os.path.join(work, "refused_run")
    os.makedirs(run, exist_ok=True)
    small = [{"ph": "X", "pid": 1, "tid": 1 + k % 3, "name": "k%d" % (k % 5), "ts": k, "dur": 0.5, "args": {"category": "compute"}}
             for k in range(2000)]
    big = {"ph": "X", "pid": 1, "tid": 9, "name": "big", "ts": 5, "dur": 100,
           "args": {"category": "host", "parts": [{"i": i} for i in range(40000)]}}
    events = small[:1000] + [big] + small[1000:]
    with open(os.path.join(run, "trace.json"), "w") as f:
        json.dump({"traceEvents": events, "metadata": {"made": "refused"}}, f, separators=(",", ":"))
    size = os.path.getsize(os.path.join(run, "trace.json"))
    with open(os.path.join(run, "trace.json"), "rb") as f:
        data = f.read()
    start = data.index(b'"name":"big"')
    end = data.index(b'"name":"k0"', start)
    check(b"\n" not in data and start < size // 2 < end, "the middle of the %d-byte file is inside one event's args" % size)
    with open(os.path.join(run, "report.json"), "w") as f:
        json.dump({}, f)
    with harness.Server(exe, run) as srv:
        one = load(d, srv.page("?split=0"))
        r = load(d, srv.page("?splitmin=1"))
        check(r["mode"] == "worker" and "not between two events" in r["note"],
              "a cut inside an event is refused and the head reads on alone (%s: %s)" % (r["mode"], r["note"]))
        check(same_model(r, one) and one["n"] == 2001, "same model as one worker (%d slices)" % r["n"])


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def case_noranges(exe, work, d):
    run = sample(work)
    site = os.path.join(work, "static_site")
    shutil.rmtree(site, ignore_errors=True)
    shutil.copytree(VIEWER, site, ignore=shutil.ignore_patterns("CMakeLists.txt", "cmake", "include"))
    os.makedirs(os.path.join(site, "api"))
    os.makedirs(os.path.join(site, "run", "a"))
    shutil.copy(os.path.join(run, "trace.json"), os.path.join(site, "run", "a", "trace.json"))
    shutil.copy(os.path.join(run, "report.json"), os.path.join(site, "run", "a", "report.json"))
    with open(os.path.join(site, "api", "runs"), "w") as f:
        json.dump({"runs": [{"id": "a", "name": "static", "trace": "run/a/trace.json", "report": "run/a/report.json"}]}, f)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=site))
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        url = "http://127.0.0.1:%d/" % httpd.server_address[1]
        r = load(d, url + "?splitmin=1")
        check(r["mode"] == "worker", "a server without byte ranges: one worker (%s)" % r["mode"])
        with harness.Server(exe, run) as srv:
            two = load(d, srv.page("?splitmin=1"))
        check(two["mode"] == "split" and same_model(r, two), "same model as the split parse from stepscope view")
    finally:
        httpd.shutdown()


def case_file(exe, work, d):
    run = sample(work)
    trace = os.path.abspath(os.path.join(run, "trace.json"))
    index = "file://" + os.path.abspath(os.path.join(VIEWER, "index.html"))
    results = []
    for q in ("?split=0", "?splitmin=1&split=0.2"):
        d.get(index + q)
        harness.wait_state(d, states=("idle",), timeout=30)
        d.find_element("id", "pick-a").send_keys(trace)
        harness.wait_state(d, timeout=120)
        results.append(d.execute_script(FINGERPRINT))
    one, two = results
    check(one["mode"] == "worker", "a picked file with ?split=0: one worker")
    check(two["mode"] == "split", "a picked file: split over two workers by Blob slices (%s %s)" % (two["mode"], two["note"]))
    check(same_model(one, two) and two["cross"] > 0, "same model, %d flows joined across the cut %s" % (two["cross"], two))


CASES = {"served": case_served, "refused": case_refused, "noranges": case_noranges, "file": case_file}


def main():
    exe, work, case = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(work, exist_ok=True)
    d = harness.browser()
    try:
        CASES[case](exe, work, d)
        errs = harness.console_errors(d)
        check(not errs, "no console errors %s" % errs)
    finally:
        d.quit()


if __name__ == "__main__":
    main()
