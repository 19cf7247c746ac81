#!/usr/bin/env python3
"""test_heatmap.py — the ranks x steps heatmap of a run too large for a timeline (issue 35 §4).

  test_heatmap.py STEPSCOPE STEPSCOPE_GEN WORK_DIR CASE

Runs are made by `stepscope-gen --scale` (TP x PP x DP with pipelines, two stragglers whose
rank numbers it prints). Cases:

  cli     (no browser) `view --html` of a run whose export is over --max-size, without --ranks,
          writes a heatmap page, says so on stdout and stderr, and exits 0; the page holds the
          heatmap and no timeline; the refusal was told from the rank files' record counts (no
          export run; the same events and size as the export's own refusal); with --ranks it
          writes nothing and exits 1 with the reason.
  big     16,384 ranks: `view RUN --html` (default --max-size) writes the heatmap page; it
          loads in headless Chromium, the heatmap has every rank and step and draws; the culprit
          verdict names a generated straggler; the load time is printed (bounded only loosely
          here: the <= 3 s measurement is bench/viewer's).
  select  64 ranks served with --max-size 4M: hover names the rank and step, clicks and
          shift+drag select ranks, the page gives `stepscope view RUN --ranks SPEC`; that command
          (RUN given as its path) opens a timeline of exactly those ranks; the colour legend is the
          metric's range; the generated stragglers are marked.

Exit 0 pass, 1 fail, 77 skip (no Chromium/Selenium).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402


def generate(gen, run, ranks, *args):
    """Writes the run (again) and returns the generator's truth: step_ns, stragglers."""
    shutil.rmtree(run, ignore_errors=True)
    out = subprocess.run([gen, run, "--scale", "--ranks", str(ranks)] + list(args), check=True,
                         capture_output=True, text=True).stdout
    truth = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    return int(truth["step_ns"]), sorted(int(x) for x in truth["stragglers"].split())


def page_data(page, kind):
    with open(page, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r'<script type="application/json" data-bytes="-?\d+" id="data-a-%s">(.*?)</script>' % kind,
                  text, re.S)
    return json.loads(m.group(1)) if m else None


def case_cli(exe, gen, work):
    run = os.path.join(work, "heat_cli")
    generate(gen, run, 64, "--events-per-rank", "200", "--steps", "4")
    page = os.path.join(work, "heat-cli.html")
    if os.path.exists(page):
        os.unlink(page)
    r = subprocess.run([exe, "view", run, "--html", page, "--max-size", "1M"], capture_output=True, text=True)
    check(r.returncode == 0, "over --max-size without --ranks: exit 0 (%d: %s)" % (r.returncode, r.stderr[-300:]))
    check("heatmap page, no timeline" in r.stdout, "stdout says it wrote a heatmap page (%s)" % r.stdout.strip())
    check("over the limit" in r.stderr and "no timeline" in r.stderr and "heatmap" in r.stderr,
          "stderr gives the export's refusal and what was written instead")
    heat = page_data(page, "heatmap")
    check(page_data(page, "trace") is None, "the page holds no timeline")
    check(heat is not None and len(heat["ranks"]) == 64 and len(heat["steps"]) == 4
          and all(len(v) == 64 * 4 for v in heat["cells"].values()),
          "the page holds the heatmap of 64 ranks x 4 steps")
    listing = re.search(r"window\.STEPSCOPE_INLINE = (\{.*?\});</script>", open(page, encoding="utf-8").read())
    runs = json.loads(listing.group(1))["runs"]
    check(runs[0]["no_timeline"] and "over the limit" in runs[0]["no_timeline"],
          "the page says why it has no timeline (%s)" % (runs[0]["no_timeline"] or "")[:80])
    # a run too large for a timeline is analysed in bounded memory (--low-memory), and its
    # heatmap is the one the normal analysis writes
    check(any("--low-memory" in n for n in runs[0]["notes"]),
          "the page says the heatmap came from `analyze --low-memory` (%s)" % runs[0]["notes"])
    # ... and read once: view tells the refusal from the rank files' record counts, so no
    # `export` loads every event first only to refuse them; the count is the export's own
    check(any("no `stepscope export`" in n for n in runs[0]["notes"]),
          "no export was run: the refusal came before loading (%s)" % runs[0]["notes"])
    exp = subprocess.run([exe, "export", run, "-o", os.path.join(work, "heat-cli.json"), "--max-size", "1M"],
                         capture_output=True, text=True)
    said = re.search(r"\((\d+) events\) would be about (\S+ \S+), over", exp.stderr)
    told = re.search(r"\((\d+) events\) would be about (\S+ \S+), over", runs[0]["no_timeline"] or "")
    check(exp.returncode == 1 and said and told and said.groups() == told.groups(),
          "view's count and size are the export's (%s, %s)" % (said and said.groups(), told and told.groups()))
    normal = os.path.join(work, "heat-cli-normal.json")
    subprocess.run([exe, "analyze", run, "--heatmap", normal, "--quiet"], check=True,
                   capture_output=True)
    with open(normal, encoding="utf-8") as f:
        want = json.load(f)
    for h in (want, heat):  # the run's path as each was given it
        h.get("run", {}).pop("path", None)
    check(want == heat, "the bounded analysis's heatmap equals the normal one's")
    os.unlink(page)
    r = subprocess.run([exe, "view", run, "--html", page, "--max-size", "1M", "--ranks", "0-40"],
                       capture_output=True, text=True)
    check(r.returncode == 1 and not os.path.exists(page) and "no timeline" in r.stderr and r.stdout == "",
          "with --ranks a timeline over --max-size is an error: exit %d, nothing written" % r.returncode)


def case_big(exe, gen, work):
    run = os.path.join(work, "heat_16k")
    page = os.path.join(work, "heat-16k.html")
    t = time.time()
    step_ns, stragglers = generate(gen, run, 16384, "--events-per-rank", "200", "--steps", "4")
    print("generated 16,384 ranks in %.1f s" % (time.time() - t))
    t = time.time()
    r = subprocess.run([exe, "view", run, "--html", page], capture_output=True, text=True)
    print("view --html in %.1f s: %s" % (time.time() - t, r.stdout.strip()))
    check(r.returncode == 0 and "heatmap page" in r.stdout, "view --html of 16,384 ranks wrote the heatmap page")
    size = os.path.getsize(page)
    check(size < 80 << 20 and page_data(page, "report") is None,
          "the page is small: %.1f MiB (the report, over 64 MiB, is left out)" % (size / (1 << 20)))
    heat = page_data(page, "heatmap")
    check(all(v == step_ns for v in heat["cells"]["step_time_ns"]),
          "every rank's step takes the generated step_ns (%d ns)" % step_ns)
    d = harness.browser()
    try:
        t = time.time()
        d.get("file://" + os.path.abspath(page))
        harness.wait_state(d, timeout=120)
        wall = time.time() - t
        h = d.execute_script("return window.stepscope.heatmap()")
        nav = d.execute_script("return window.stepscope.interactiveAt()")
        print("heatmap page of 16,384 ranks: drawn %.0f ms after navigation start (%.2f s by the test's clock),"
              " a frame %.1f ms" % (nav, wall, h["drawMs"]))
        check(h["ranks"] == 16384 and h["steps"] == 4 and h["drawn"] >= 1, "the heatmap has every rank and step, drawn")
        check(d.execute_script("return document.body.dataset.tab") == "heatmap"
              and d.execute_script("return document.querySelector('.tab[data-tab=timeline]').hidden"),
              "the page opens on the heatmap; no timeline tab")
        colours = d.execute_script("""var c = document.getElementById('heatmap-canvas'), x = c.getContext('2d');
            var img = x.getImageData(Math.floor(c.width / 2), Math.floor(c.height / 2), 1, 1).data;
            return [img[0], img[1], img[2]];""")
        check(colours != [255, 255, 255], "the cells are drawn (middle pixel %s)" % colours)
        verdict = d.execute_script("return document.getElementById('heatmap-analysis').textContent")
        culprits = [int(a.get_attribute("data-rank")) for a in d.find_elements("css selector", "#heatmap-culprits a")]
        check(culprits and set(culprits) <= set(stragglers) and "culprit" in verdict,
              "the culprits %s are generated stragglers %s" % (culprits, stragglers))
        check(nav < 30000, "loaded in under 30 s (generous: the <= 3 s goal is measured by bench/viewer)")
        check(not harness.console_errors(d), "no console errors")
        d.save_screenshot(os.path.join(work, "viewer-heatmap-16k.png"))
    finally:
        d.quit()


def case_select(exe, gen, work):
    run = os.path.join(work, "heat_64")
    step_ns, stragglers = generate(gen, run, 64, "--events-per-rank", "200", "--steps", "4")
    d = harness.browser()
    try:
        with harness.Server(exe, run, extra=["--max-size", "4M"]) as srv:
            d.get(srv.page())
            harness.wait_state(d, timeout=120)
            heat = d.execute_script("return window.stepscope.app.A.heatmap")
            check(d.execute_script("return document.body.dataset.tab") == "heatmap", "served: opens on the heatmap")
            marked = [int(a.get_attribute("data-rank")) for a in d.find_elements("css selector", "#heatmap-stragglers a")]
            check(set(stragglers) <= set(marked[:len(stragglers)]),
                  "the generated stragglers %s lead the marked ones %s" % (stragglers, marked[:4]))
            # the legend is the chosen metric's range over the run
            d.execute_script("window.stepscope.app.heatmap.setMetric('idle_ns')")
            idle = [v for v in heat["cells"]["idle_ns"] if v is not None]
            lo = float(d.find_element("id", "heatmap-legend").get_attribute("data-lo"))
            hi = float(d.find_element("id", "heatmap-legend").get_attribute("data-hi"))
            check((lo, hi) == (min(idle), max(idle)), "idle legend %g..%g is the cells' range" % (lo, hi))
            from selenium.webdriver.common.action_chains import ActionChains
            from selenium.webdriver.common.keys import Keys

            def at(row, col):
                p = d.execute_script("return window.stepscope.app.heatmap.clientPointOf(%d, %d)" % (row, col))
                body = d.find_element("tag name", "body")
                r = d.execute_script("var r = document.body.getBoundingClientRect(); return [r.width, r.height]")
                return body, p["x"] - r[0] / 2, p["y"] - r[1] / 2

            body, x, y = at(12, 2)
            ActionChains(d).move_to_element_with_offset(body, x, y).perform()
            hover = d.find_element("id", "heatmap-hover").text
            v = heat["cells"]["idle_ns"][12 * 4 + 2]
            check(hover.startswith("rank 12") and "step %d" % heat["steps"][2] in hover and "idle" in hover,
                  "hover names the rank, the step and the values (%s)" % hover[:90])
            ActionChains(d).move_to_element_with_offset(body, x, y).click().perform()
            b1, x1, y1 = at(40, 1)
            b2, x2, y2 = at(43, 1)
            ActionChains(d).key_down(Keys.SHIFT).move_to_element_with_offset(body, x1, y1).click_and_hold() \
                .move_to_element_with_offset(body, x2, y2).release().key_up(Keys.SHIFT).perform()
            h = d.execute_script("return window.stepscope.heatmap()")
            name = os.path.basename(run)
            check(sorted(h["selected"]) == [12, 40, 41, 42, 43] and h["command"] == "stepscope view %s --ranks 12,40-43" % name,
                  "click and shift+drag selected ranks; the command is %r" % h["command"])
            check(v is not None, "the hovered cell has a value")
            check(not harness.console_errors(d), "no console errors")
            d.save_screenshot(os.path.join(work, "viewer-heatmap-select.png"))
        # the command opens the timeline of exactly those ranks (RUN given as its path)
        cmd = h["command"].split()
        cmd[0], cmd[2] = exe, run
        with harness.Server(exe, run, extra=cmd[3:] + ["--max-size", "4M"]) as srv:
            d.get(srv.page())
            harness.wait_state(d, timeout=120)
            ranks = sorted(g["rank"] for g in d.execute_script("return window.stepscope.groups()"))
            check(ranks == [12, 40, 41, 42, 43], "the command's timeline holds ranks %s" % ranks)
            check(d.execute_script("return document.body.dataset.tab") == "timeline", "and opens on the timeline")
    finally:
        d.quit()


def main():
    exe, gen, work, case = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    {"cli": case_cli, "big": case_big, "select": case_select}[case](exe, gen, work)
    print("PASS")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print("FAIL: %s" % e)
        sys.exit(1)
