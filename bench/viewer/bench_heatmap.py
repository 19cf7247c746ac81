#!/usr/bin/env python3
"""bench_heatmap.py — how fast the heatmap page of a run of thousands of ranks opens (issue 35 §4:
<= 3 s for 16,384 ranks).

  bench_heatmap.py STEPSCOPE_EXE STEPSCOPE_GEN [--ranks 16384] [--events-per-rank 200]
                   [--steps 10] [--loads 5] [--work DIR]

Generates (once, cached in --work) a `stepscope-gen --scale` run (TP x PP x DP with pipelines
and two stragglers), writes its page with `stepscope view RUN --html` (the default --max-size:
the export is refused and the page is the ranks x steps heatmap with the analysis; the time
this takes, two analyses of the run, is reported too), opens the page --loads times in headless
Chromium (--disable-gpu: software rendering) and reports, median (min-max):
  - interactive: navigation start -> heatmap file parsed and the heatmap drawn (performance.now()
    at that point, so it includes reading the 10 MB page)
  - draw: one full redraw of the heatmap canvas (zoomed out: every rank)
with the machine, Chromium's version and the load average. Not run by the tests.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "browser"))
import harness  # noqa: E402


def med(xs):
    xs = sorted(xs)
    return "%.3f (%.3f-%.3f)" % (xs[len(xs) // 2], xs[0], xs[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("gen")
    ap.add_argument("--ranks", type=int, default=16384)
    ap.add_argument("--events-per-rank", type=int, default=200)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--loads", type=int, default=5)
    ap.add_argument("--work", default="/tmp/stepscope-bench-heatmap")
    o = ap.parse_args()
    run = os.path.join(o.work, "run-%d-%d-%d" % (o.ranks, o.events_per_rank, o.steps))
    page = run + ".html"
    if not os.path.exists(run):
        subprocess.run([o.gen, run, "--scale", "--ranks", str(o.ranks), "--events-per-rank",
                        str(o.events_per_rank), "--steps", str(o.steps)], check=True, stdout=subprocess.DEVNULL)
    view_s = None
    if not os.path.exists(page):
        t = time.time()
        subprocess.run([o.exe, "view", run, "--html", page], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        view_s = time.time() - t
    load_before = os.getloadavg()
    inter, draw = [], []
    d = harness.browser()
    try:
        for _ in range(o.loads):
            d.get("file://" + os.path.abspath(page))
            harness.wait_state(d, timeout=120)
            inter.append(d.execute_script("return window.stepscope.interactiveAt()") / 1000)
            h = d.execute_script("return window.stepscope.heatmap()")
            assert h["ranks"] == o.ranks, h
            draw.append(d.execute_script("var h = window.stepscope.app.heatmap; h.render(); return h.drawMs"))
    finally:
        d.quit()
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(json.dumps({
        "machine": "%s, %d cores, %s" % (cpu, os.cpu_count(), platform.platform()),
        "chromium": subprocess.run(["chromium", "--version"], capture_output=True, text=True).stdout.strip(),
        "ranks": o.ranks, "steps": o.steps, "events_per_rank": o.events_per_rank,
        "page_mib": round(os.path.getsize(page) / (1 << 20), 2),
        "view_html_s": None if view_s is None else round(view_s, 1),
        "loadavg_before": [round(x, 2) for x in load_before], "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "loads": o.loads, "interactive_s": med(inter), "draw_ms": med(draw)}, indent=1))


if __name__ == "__main__":
    main()
