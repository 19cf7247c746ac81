#!/usr/bin/env python3
"""bench_viewer.py — how fast the viewer becomes interactive, and its pan/zoom frame time.

  bench_viewer.py STEPSCOPE_EXE [--events 1000000] [--work DIR] [--frames 200] [--query '?split=0']

Generates (once, cached in --work) a sample run of about --events Chrome-trace events
with tests/viewer/make_sample.py (8 ranks: dp 2 x pp 4, 10 steps, 8 micro-batches),
serves it with `stepscope view`, opens it in headless Chromium (--disable-gpu:
software rendering) and reports:
  - interactive: navigation start -> trace streamed, model built, first frame drawn
    (performance.now() at that point, so it includes page load and the file transfer)
  - frame: the time to draw one timeline frame after a pan/zoom/scroll, over --frames
    frames starting from the whole trace and zooming in (median, p95, max)
  - frame_flushed: the same frames, each followed by reading one pixel back, so the
    browser's rasterization of what the frame drew is inside the measured time
--query is appended to the page URL (`?split=0`: parse with one worker instead of two).
Also reported: the load average before and after, and the CPU seconds used between
navigation start and interactive by the browser (chromedriver's process tree), by
the `stepscope view` server, and by every other process of the machine (its busy
time in /proc/stat minus those two: how much of the CPU others took meanwhile).
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


def tree_cpu_s(root):
    """CPU seconds (user + system) used so far by root and its live descendants."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in os.listdir("/proc/%d/task" % pid):
                with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                    todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError, IndexError):
            pass
    return total


def busy_cpu_s():
    """CPU seconds all processes of the machine have used (user, nice, system, irq, softirq)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:8]]
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("stepscope")
    ap.add_argument("--events", type=int, default=1000000)
    ap.add_argument("--work", default="bench-viewer-work")
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--query", default="")
    o = ap.parse_args()
    run = os.path.join(o.work, "run-%d" % o.events)
    harness.make_sample(run, "--dp", "2", "--pp", "4", "--steps", "10", "--microbatches", "8",
                        "--events", str(o.events))
    size = os.path.getsize(os.path.join(run, "trace.json"))
    d = harness.browser()
    try:
        with harness.Server(o.stepscope, run) as srv:
            load_before = os.getloadavg()
            browser_pid = d.service.process.pid
            cpu0 = (tree_cpu_s(browser_pid), tree_cpu_s(srv.proc.pid), busy_cpu_s())
            d.get(srv.page(o.query))
            harness.wait_state(d, timeout=300)
            cpu1 = (tree_cpu_s(browser_pid), tree_cpu_s(srv.proc.pid), busy_cpu_s())
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
            # the same frames again, each followed by a one-pixel read back (rasterized in the measured time)
            flushed = sorted(d.execute_script("return stepscope.benchFrames(%d, true)" % o.frames))
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
        "query": o.query, "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "cpu_s_to_interactive": {"browser": round(cpu1[0] - cpu0[0], 2), "server": round(cpu1[1] - cpu0[1], 2),
                                 "other_processes": round((cpu1[2] - cpu0[2]) - (cpu1[0] - cpu0[0]) - (cpu1[1] - cpu0[1]), 2)},
        "interactive_s": round(inter / 1000, 3), "load_to_first_frame_s": round(load / 1000, 3),
        "frame_ms_median": round(frames[len(frames) // 2], 2),
        "frame_ms_p95": round(frames[int(len(frames) * 0.95)], 2), "frame_ms_max": round(frames[-1], 2),
        "frame_flushed_ms_median": round(flushed[len(flushed) // 2], 2),
        "frame_flushed_ms_p95": round(flushed[int(len(flushed) * 0.95)], 2), "frame_flushed_ms_max": round(flushed[-1], 2),
        "frames": len(frames), "console_errors": len(errs),
        "parse_mode": mode, "worker_timing_ms": {k: round(v, 1) for k, v in (timing or {}).items()},
        "model_column_mb": round(col_bytes / 1e6, 1),
        "model_mb_per_1m_events": round(col_bytes / 1e6 * 1e6 / max(1, events), 1),
        "page_js_heap_mb": round(heap["usedSize"] / 1e6, 1),
    }
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
