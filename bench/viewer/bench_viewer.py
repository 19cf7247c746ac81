#!/usr/bin/env python3
"""bench_viewer.py — how fast the viewer becomes interactive, and its pan/zoom frame time.

  bench_viewer.py STEPSCOPE_EXE [--events 1000000] [--work DIR] [--frames 200]

Generates (once, cached in --work) a sample run of about --events Chrome-trace events
with tests/viewer/make_sample.py (8 ranks: dp 2 x pp 4, 10 steps, 8 micro-batches),
serves it with `stepscope view`, opens it in headless Chromium (--disable-gpu:
software rendering) and reports:
  - interactive: navigation start -> trace streamed, model built, first frame drawn
    (performance.now() at that point, so it includes page load and the file transfer)
  - frame: the time to draw one timeline frame after a pan/zoom/scroll, over --frames
    frames starting from the whole trace and zooming in (median, p95, max)
Not run by the tests (SPEC §6 goals: <= 3 s and <= 50 ms per frame).
"""

import argparse
import json
import os
import platform
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "browser"))
import harness  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("stepscope")
    ap.add_argument("--events", type=int, default=1000000)
    ap.add_argument("--work", default="bench-viewer-work")
    ap.add_argument("--frames", type=int, default=200)
    o = ap.parse_args()
    run = os.path.join(o.work, "run-%d" % o.events)
    harness.make_sample(run, "--dp", "2", "--pp", "4", "--steps", "10", "--microbatches", "8",
                        "--events", str(o.events))
    size = os.path.getsize(os.path.join(run, "trace.json"))
    d = harness.browser()
    try:
        with harness.Server(o.stepscope, run) as srv:
            d.get(srv.url)
            harness.wait_state(d, timeout=300)
            events = d.execute_script("return stepscope.app.A.model.eventCount")
            slices = d.execute_script("return stepscope.app.A.model.n")
            inter = d.execute_script("return stepscope.interactiveAt()")
            load = d.execute_script("return stepscope.loadMs()")
            # (null on viewers older than these hooks, so old builds can be measured too)
            timing = d.execute_script("return stepscope.app.A.model.timing || null")
            mode = d.execute_script("return stepscope.parseMode ? stepscope.parseMode() : 'page'")
            col_bytes = d.execute_script("var m = stepscope.app.A.model; return m.columnBytes ? m.columnBytes() : 0")
            heap = d.execute_cdp_cmd("Runtime.getHeapUsage", {})
            frames = sorted(d.execute_script("return stepscope.benchFrames(%d)" % o.frames))
            errs = harness.console_errors(d)
    finally:
        d.quit()
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    res = {
        "machine": "%s, %d cores, %s" % (cpu, os.cpu_count(), platform.platform()),
        "chromium": subprocess.run(["chromium", "--version"], capture_output=True, text=True).stdout.strip(),
        "events": events, "slices": slices, "trace_bytes": size,
        "interactive_s": round(inter / 1000, 3), "load_to_first_frame_s": round(load / 1000, 3),
        "frame_ms_median": round(frames[len(frames) // 2], 2),
        "frame_ms_p95": round(frames[int(len(frames) * 0.95)], 2), "frame_ms_max": round(frames[-1], 2),
        "frames": len(frames), "console_errors": len(errs),
        "parse_mode": mode, "worker_timing_ms": {k: round(v, 1) for k, v in (timing or {}).items()},
        "model_column_mb": round(col_bytes / 1e6, 1),
        "model_mb_per_1m_events": round(col_bytes / 1e6 * 1e6 / max(1, events), 1),
        "page_js_heap_mb": round(heap["usedSize"] / 1e6, 1),
    }
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
