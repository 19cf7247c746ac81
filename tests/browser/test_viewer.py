#!/usr/bin/env python3
"""test_viewer.py — the viewer in a real browser (headless Chromium via Selenium).

  test_viewer.py STEPSCOPE_EXE WORK_DIR CASE     CASE: timeline | chunks | pipeline | compare | html | parser |
                                                 html_compare_hint | pipeline_real | pipeline_kineto | compare_real | attribution_real |
                                                 token_leak

Each case generates sample runs (tests/viewer/make_sample.py) in WORK_DIR, serves them
with `stepscope view` on a free port (or writes `--html`), drives the page like a user
(clicks, keys, search) and checks what it shows against what the files contain. A
screenshot of each case is saved in WORK_DIR as a test artifact. Exit 0 pass, 1 fail,
77 skip (no Chromium/Selenium).
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def js(d, code, *args):
    return d.execute_script(code, *args)


def click_at(d, x, y):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    body = d.find_element(By.TAG_NAME, "body")
    size = body.size
    # ActionChains offsets are from the element's centre
    ActionChains(d).move_to_element_with_offset(body, int(x - size["width"] / 2), int(y - size["height"] / 2)).click().perform()


def case_timeline(exe, work, d):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    run = harness.make_sample(os.path.join(work, "run_dp2_pp2"), "--dp", "2", "--pp", "2", "--steps", "3")
    report = load_json(os.path.join(run, "report.json"))
    trace = load_json(os.path.join(run, "trace.json"))
    world = report["run"]["world"]
    with harness.Server(exe, run) as srv:
        d.get(srv.page())
        harness.wait_state(d)
        groups = js(d, "return stepscope.groups()")
        check(len(groups) == world, "one group per rank (%d groups, world %d)" % (len(groups), world))
        check(sorted(g["rank"] for g in groups) == list(range(world)), "groups are ranks 0..%d in order" % (world - 1))
        n_events = sum(1 for e in trace["traceEvents"] if e["ph"] != "M")
        check(js(d, "return stepscope.app.A.model.eventCount") == n_events + sum(1 for e in trace["traceEvents"] if e["ph"] == "M"),
              "every event of the file was read (%d)" % len(trace["traceEvents"]))
        names = {t["name"] for g in groups for t in g["tracks"]}
        check({"stream 7 (compute)", "exposed comm", "idle", "bubble"} <= names, "stream and derived tracks present")
        ov = js(d, "return stepscope.overlayCount()")
        expect = {k: sum(1 for e in trace["traceEvents"] if e.get("ph") == "X" and e["name"] == n)
                  for k, n in (("exposed", "exposed comm"), ("idle", "idle"), ("bubble", "bubble"))}
        tname = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"]
                 if e.get("ph") == "M" and e["name"] == "thread_name"}
        on_path = [e for e in trace["traceEvents"]
                   if e.get("ph") == "X" and tname.get((e["pid"], e["tid"])) == "critical path"]
        expect["critical"] = len(on_path)
        check(ov == expect and all(ov[k] > 0 for k in ("exposed", "idle", "bubble")),
              "overlays hold every derived slice %r" % ov)
        check(all({"exposed", "idle", "bubble"} <= set(g["overlays"]) for g in groups), "every rank has its three overlays")
        check(js(d, "return stepscope.flowCount()") == sum(1 for e in trace["traceEvents"] if e["ph"] == "f"),
              "every launch->kernel flow was matched")
        # overlays really drawn: the canvas changes when they are switched off
        before = js(d, "stepscope.frame(); return document.getElementById('timeline-canvas').toDataURL()")
        d.find_element(By.ID, "ov-exposed").click()
        d.find_element(By.ID, "ov-idle").click()
        d.find_element(By.ID, "ov-bubble").click()
        after = js(d, "stepscope.frame(); return document.getElementById('timeline-canvas').toDataURL()")
        check(before != after, "switching overlays off changes the drawing")
        for k in ("ov-exposed", "ov-idle", "ov-bubble"):
            d.find_element(By.ID, k).click()
        # select a kernel with a real click
        p = js(d, "return stepscope.locate('gemm')")
        check(p is not None, "a GEMM kernel is on the timeline")
        click_at(d, p["x"], p["y"])
        name = d.find_element(By.ID, "detail-name").text
        check("gemm" in name, "clicking the kernel shows its name in the details (%s)" % name)
        table = d.find_element(By.ID, "detail-table").text
        check("compute" in table and "args.correlation" in table and "duration" in table,
              "the details show category, duration and args")
        links = [a.text for a in d.find_elements(By.CSS_SELECTOR, "#details a.flow-link")]
        check(any("cudaLaunchKernel" in t for t in links), "the kernel's launch is linked (%s)" % links)
        d.find_elements(By.CSS_SELECTOR, "#details a.flow-link")[0].click()
        check(d.find_element(By.ID, "detail-name").text == "cudaLaunchKernel", "following the flow selects the launch call")
        # keyboard pan/zoom
        span0 = js(d, "var t=stepscope.app.timeline; return [t.t0, t.t1]")
        d.find_element(By.ID, "timeline-canvas").send_keys("w")
        span1 = js(d, "var t=stepscope.app.timeline; return [t.t0, t.t1]")
        check(span1[1] - span1[0] < span0[1] - span0[0], "W zooms in")
        d.find_element(By.ID, "timeline-canvas").send_keys("d")
        span2 = js(d, "var t=stepscope.app.timeline; return [t.t0, t.t1]")
        check(span2[0] > span1[0] and abs((span2[1] - span2[0]) - (span1[1] - span1[0])) < 1e-6 * (span1[1] - span1[0]) + 1e-9,
              "D pans right")
        d.find_element(By.ID, "timeline-canvas").send_keys("f")
        span3 = js(d, "var t=stepscope.app.timeline; return [t.t0, t.t1]")
        check(span3[1] - span3[0] < span2[1] - span2[0], "F zooms to the selection")
        # search next / previous
        n_adam = sum(1 for e in trace["traceEvents"] if e.get("name") == "adamw_kernel")
        box = d.find_element(By.ID, "search")
        box.send_keys("adamw" + Keys.ENTER)
        check(d.find_element(By.ID, "search-count").text == "1 / %d" % n_adam, "search finds every adamw_kernel")
        check(d.find_element(By.ID, "detail-name").text == "adamw_kernel", "search selects the match")
        d.find_element(By.ID, "search-next").click()
        check(d.find_element(By.ID, "search-count").text == "2 / %d" % n_adam, "next match")
        d.find_element(By.ID, "search-prev").click()
        d.find_element(By.ID, "search-prev").click()
        check(d.find_element(By.ID, "search-count").text == "%d / %d" % (n_adam, n_adam), "previous match wraps")
        # summary view
        d.find_element(By.CSS_SELECTOR, ".tab[data-tab=summary]").click()
        head = d.find_element(By.ID, "headline").text
        check("MFU" in head and "41.0 %" in head, "summary headline shows MFU from the report")
        bars = d.find_elements(By.CSS_SELECTOR, "#summary-ranks svg rect[data-series=compute]")
        check(len(bars) == world, "one compute bar per rank")
        check(len(d.find_elements(By.CSS_SELECTOR, "#summary-collectives table tbody tr")) >= 2, "collectives table")
        check(len(d.find_elements(By.CSS_SELECTOR, "#summary-idle svg rect")) > world, "idle causes chart")
        d.find_element(By.CSS_SELECTOR, ".tab[data-tab=timeline]").click()
        d.save_screenshot(os.path.join(work, "viewer-timeline.png"))
        return srv


def case_burst(exe, work, d):
    """A long slice that starts in the same pixel column as a burst of tiny ones
    is drawn: the timeline's walk over a row jumps over the tiny slices of a
    column (binary search) and must still draw the column's last slice, which
    may be wide (found on a CPU MoE run: the all-to-all right after a burst of
    small kernels was left unpainted)."""
    run = os.path.join(work, "burst")
    os.makedirs(run, exist_ok=True)
    ev = [{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "rank 0"}},
          {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7 (compute)"}}]
    t = 100.0
    for _ in range(40):  # 40 kernels of 50 ns, 100 ns apart: 100.0 .. 104.0 us
        ev.append({"ph": "X", "cat": "compute", "name": "tiny", "pid": 0, "tid": 7, "ts": round(t, 3), "dur": 0.05})
        t += 0.1
    ev.append({"ph": "X", "cat": "comm", "name": "long_collective", "pid": 0, "tid": 7, "ts": round(t, 3), "dur": 5000.0})
    ev.append({"ph": "X", "cat": "compute", "name": "after", "pid": 0, "tid": 7, "ts": round(t + 5000.5, 3), "dur": 100.0})
    with open(os.path.join(run, "trace.json"), "w", encoding="utf-8") as f:
        json.dump({"traceEvents": ev, "displayTimeUnit": "ns"}, f)
    with harness.Server(exe, run) as srv:
        d.get(srv.page())
        harness.wait_state(d)
        r = js(d, """var a = window.stepscope.app, m = a.A.model, tl = a.timeline, i = m.search('long_collective')[0],
                b = m.ts[m.search('tiny')[0]];
            // 5 ms in view (less than the trace: not widened); the column that starts 0.1 us before
            // the burst holds it and the long slice's start
            var colw = 5000 / (tl.w - tl.labelW), t0 = b - 0.1 - 5 * colw;
            tl.setWindow(t0, t0 + 5000); tl.render();
            var scale = (tl.w - tl.labelW) / (tl.t1 - tl.t0), first = Math.floor(tl.labelW + (b - tl.t0) * scale),
                start = Math.floor(tl.labelW + (m.ts[i] - tl.t0) * scale);
            var p = tl.clientPointOf(i), r = tl.canvas.getBoundingClientRect(), dpr = tl.dpr;
            var q = tl.ctx.getImageData(Math.round((p.x - r.left) * dpr), Math.round((p.y - r.top) * dpr), 1, 1).data;
            var c = document.createElement('canvas').getContext('2d');
            c.fillStyle = tl.colorOf(i); c.fillRect(0, 0, 1, 1);
            var w = c.getImageData(0, 0, 1, 1).data;
            return {dbg: [tl.t0, tl.t1, b, m.ts[i], first, start, tl.w, tl.labelW], same_column: first === start, got: [q[0], q[1], q[2]], want: [w[0], w[1], w[2]]};""")
        check(r["same_column"], "the burst and the long slice start in one pixel column %s" % r["dbg"])
        check(r["got"] == r["want"], "the long slice after the burst is painted %s, its colour %s" % (r["got"], r["want"]))
        d.save_screenshot(os.path.join(work, "viewer-burst.png"))
        return srv


def case_chunks(exe, work, d):
    """Chunk boundaries at every 7th byte must not change what is read."""
    run = harness.make_sample(os.path.join(work, "run_small"), "--dp", "1", "--pp", "2", "--steps", "1",
                              "--microbatches", "2", "--layers", "1")
    trace = load_json(os.path.join(run, "trace.json"))
    with harness.Server(exe, run) as srv:
        d.get(srv.page("?chunk=7"))
        harness.wait_state(d)
        n = js(d, "return stepscope.app.A.model.eventCount")
        check(n == len(trace["traceEvents"]), "7-byte chunks: all %d events read" % n)
        md = js(d, "return stepscope.app.A.model.metadata")
        check(md.get("schedule", {}).get("stages") == 2, "metadata read across chunk boundaries")
        x = [e for e in trace["traceEvents"] if e["ph"] == "X"]
        check(js(d, "return stepscope.app.A.model.n") == len(x), "every X event became a slice")
        return srv


def case_pipeline(exe, work, d):
    from selenium.webdriver.common.by import By
    pp, mb, dp = 4, 6, 1
    run = harness.make_sample(os.path.join(work, "run_pp4"), "--dp", str(dp), "--pp", str(pp), "--microbatches", str(mb),
                              "--steps", "2", "--seed", "3")
    with harness.Server(exe, run) as srv:
        d.get(srv.page())
        harness.wait_state(d)
        d.find_element(By.CSS_SELECTOR, ".tab[data-tab=pipeline]").click()
        labels = d.find_elements(By.CSS_SELECTOR, "#pipeline-chart text.stage-label")
        stages = sorted({int(l.get_attribute("data-stage")) for l in labels})
        check(stages == list(range(pp)), "the pipeline view shows every stage %s" % stages)
        fwd = d.find_elements(By.CSS_SELECTOR, "#pipeline-chart rect.op-F")
        bwd = d.find_elements(By.CSS_SELECTOR, "#pipeline-chart rect.op-B")
        check(len(fwd) == pp * dp * mb and len(bwd) == pp * dp * mb,
              "one forward and one backward box per micro-batch per stage (%d F, %d B)" % (len(fwd), len(bwd)))
        check(len(d.find_elements(By.CSS_SELECTOR, "#pipeline-chart rect.bubble")) > 0, "bubbles are marked")
        ratios = [t.text for t in d.find_elements(By.CSS_SELECTOR, "#pipeline-chart text.bubble-ratio")]
        theory = "%.1f %%" % (100.0 * (pp - 1) / (mb + pp - 1))
        check(len(ratios) == pp and all(("vs theory " + theory) in r for r in ratios), "theory beside measurement: %s" % ratios[:1])
        # 1F1B: the last stage alternates F and B from the start
        last = [r for r in labels if r.get_attribute("data-stage") == str(pp - 1)]
        check(len(last) == 1, "one row for the last stage")
        sel = d.find_element(By.ID, "pipeline-step")
        check(len(sel.find_elements(By.TAG_NAME, "option")) == 2, "both steps can be chosen")
        d.save_screenshot(os.path.join(work, "viewer-pipeline.png"))
        return srv


def case_compare(exe, work, d):
    from selenium.webdriver.common.by import By
    a = harness.make_sample(os.path.join(work, "cmp_a"), "--dp", "2", "--pp", "2", "--microbatches", "4", "--steps", "3")
    b = harness.make_sample(os.path.join(work, "cmp_b"), "--dp", "2", "--pp", "2", "--microbatches", "8", "--steps", "3")
    with harness.Server(exe, a, compare=b) as srv:
        d.get(srv.page())
        harness.wait_state(d)
        d.find_element(By.CSS_SELECTOR, ".tab[data-tab=compare]").click()
        runs = d.find_element(By.ID, "compare-runs").text
        check("cmp_a" in runs and "cmp_b" in runs, "compare view names both runs")
        rows = d.find_elements(By.CSS_SELECTOR, "#compare-table tbody tr")
        check(len(rows) == 10, "one row per metric (%d)" % len(rows))
        ra, rb = load_json(os.path.join(a, "report.json")), load_json(os.path.join(b, "report.json"))
        # bubble_ratio median over steps of the mean over ranks, computed here independently
        def med(rep, key):
            steps = len(rep["ranks"][0]["steps"])
            vals = sorted(sum(r["steps"][k][key] for r in rep["ranks"]) / len(rep["ranks"]) for k in range(steps))
            return vals[len(vals) // 2]
        cells = {r.find_elements(By.TAG_NAME, "td")[0].text: [c.text for c in r.find_elements(By.TAG_NAME, "td")] for r in rows}
        br = cells["bubble_ratio"]
        check(br[1] == "%.1f %%" % (100 * med(ra, "bubble_ratio")) and br[2] == "%.1f %%" % (100 * med(rb, "bubble_ratio")),
              "bubble ratio A/B match the reports (%s, %s)" % (br[1], br[2]))
        check(med(rb, "bubble_ratio") < med(ra, "bubble_ratio") and br[6] == "lower in B",
              "more micro-batches: lower bubble in B, flagged as a real change")
        check(len(d.find_elements(By.CSS_SELECTOR, "#compare-steps svg rect[data-series=compute]")) == 6, "steps aligned A/B")
        h = js(d, "return document.getElementById('compare-canvas').height")
        check(h > 50, "both runs' lanes drawn on one scale")
        d.save_screenshot(os.path.join(work, "viewer-compare.png"))
        return srv


def case_html(exe, work, d):
    import subprocess
    run = harness.make_sample(os.path.join(work, "run_html"), "--dp", "2", "--pp", "2", "--steps", "2")
    out = os.path.join(work, "viewer-selfcontained.html")
    subprocess.run([exe, "view", run, "--html", out], check=True, stdout=subprocess.DEVNULL)
    d.get("file://" + os.path.abspath(out))
    harness.wait_state(d)
    check(len(js(d, "return stepscope.groups()")) == 4, "self-contained page shows the 4 ranks")
    res = js(d, "return performance.getEntriesByType('resource').map(function(e){return e.name})")
    check(all(not r.startswith("http") for r in res), "the page fetched nothing from the network (%d resources)" % len(res))
    d.find_element("css selector", ".tab[data-tab=summary]").click()
    check("MFU" in d.find_element("id", "headline").text, "report inlined too")
    return None


def case_real(exe, work, d):
    """Real analyzer output: raw traces from stepscope-gen, export + report made by `stepscope view`."""
    import subprocess
    gen = os.environ.get("STEPSCOPE_GEN")
    if not gen:
        harness.skip("STEPSCOPE_GEN (the stepscope-gen executable) not given")
    run = os.path.join(work, "real_run")
    if not os.path.isdir(run):
        subprocess.run([gen, run, "--ranks", "4", "--steps", "3", "--pipeline", "--overlap", "--flops"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with harness.Server(exe, run) as srv:
        d.get(srv.page())
        harness.wait_state(d)
        groups = js(d, "return stepscope.groups()")
        check(len(groups) == 4 and all(g["name"].startswith("rank %d (" % k) for k, g in enumerate(groups)),
              "one group per rank from the real export")
        ov = js(d, "return stepscope.overlayCount()")
        check(all(ov[k] > 0 for k in ("exposed", "idle", "bubble", "critical")),
              "the export's derived tracks become overlays %r" % ov)
        groups = js(d, "return stepscope.groups()")
        check(any("critical" in g["overlays"] for g in groups), "the critical path's bar is on a rank")
        before = js(d, "stepscope.frame(); return document.getElementById('timeline-canvas').toDataURL()")
        d.find_element("id", "ov-critical").click()
        after = js(d, "stepscope.frame(); return document.getElementById('timeline-canvas').toDataURL()")
        check(before != after, "switching the critical path's bar off changes the drawing")
        d.find_element("id", "ov-critical").click()
        check(js(d, "return stepscope.flowCount()") > 0, "launch->kernel flows matched")
        d.find_element("css selector", ".tab[data-tab=summary]").click()
        check(len(d.find_elements("css selector", "#summary-ranks svg rect[data-series=compute]")) == 4,
              "the real report's ranks are charted")
        d.find_element("css selector", ".tab[data-tab=timeline]").click()
        d.save_screenshot(os.path.join(work, "viewer-real.png"))
        return srv


def train_run(work, name, *args):
    """A real run of the bundled trainer (CPU backend), once per work dir."""
    import subprocess
    train = os.environ.get("STEPSCOPE_TRAIN")
    if not train:
        harness.skip("STEPSCOPE_TRAIN (the stepscope-train executable) not given")
    run = os.path.join(work, name)
    if not os.path.isdir(run):
        subprocess.run([train, "--backend", "cpu", "--trace", run] + list(args), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return run


def analyze_json(exe, run, out):
    import subprocess
    subprocess.run([exe, "analyze", run, "--json", out], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return load_json(out)


def pipeline_boxes(d):
    return js(d, """return Array.from(document.querySelectorAll('#pipeline-chart rect.op')).map(function (r) {
        return {phase: r.classList.contains('op-F') ? 'F' : r.classList.contains('op-B') ? 'B' : r.classList.contains('op-W') ? 'W' : 'R', mb: +r.dataset.mb,
                rank: +r.dataset.rank, start: +r.dataset.start, end: +r.dataset.end}; })""")


def case_pipeline_real(exe, work, d):
    """The pipeline view on real trainer runs (DP2 x PP2, 1F1B and AFAB), exported and analyzed by stepscope."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    mb, steps = 4, 3
    for sched in ("1f1b", "afab"):
        run = train_run(work, "train_" + sched, "--world", "4", "--dp", "2", "--pp", "2", "--schedule", sched,
                        "--microbatches", str(mb), "--steps", str(steps))
        report = analyze_json(exe, run, os.path.join(work, "train_%s_report.json" % sched))
        with harness.Server(exe, run) as srv:
            d.get(srv.page())
            harness.wait_state(d)
            d.find_element(By.CSS_SELECTOR, ".tab[data-tab=pipeline]").click()
            labels = d.find_elements(By.CSS_SELECTOR, "#pipeline-chart text.stage-label")
            check(sorted(int(l.get_attribute("data-stage")) for l in labels) == [0, 0, 1, 1],
                  "%s: one row per rank, two per stage (from the report's pipeline_stage / args)" % sched)
            opts = [o.text for o in d.find_elements(By.CSS_SELECTOR, "#pipeline-step option")]
            check(opts == ["step %d" % k for k in range(steps)], "%s: steps by number %s" % (sched, opts))
            first = Select(d.find_element(By.ID, "pipeline-step")).first_selected_option.text
            # the first steady step by the report (after the warm-up step 0: the first whose time
            # is within 25 % of the run's median, else step 1), so that a step slowed by this
            # machine's load moves the expectation with it instead of failing the test
            times = {s["step"]: s["time_ns"] for s in report["run"]["steps"]}
            median = report["run"]["step_time_ns"]
            steady = next((k for k in range(1, steps) if abs(times[k] - median) <= 0.25 * median), 1)
            check(first == "step %d" % steady and first != "step 0",
                  "%s: the view opens on the first steady step %d, not the warm-up step 0 (%s; issue 34)"
                  % (sched, steady, first))
            for k in (0, steps - 1):
                Select(d.find_element(By.ID, "pipeline-step")).select_by_index(k)
                boxes = pipeline_boxes(d)
                for rank in range(4):
                    f = sorted(b["mb"] for b in boxes if b["rank"] == rank and b["phase"] == "F")
                    bw = sorted(b["mb"] for b in boxes if b["rank"] == rank and b["phase"] == "B")
                    check(f == list(range(mb)) and bw == list(range(mb)),
                          "%s step %d rank %d: one forward and one backward box per micro-batch (F %s, B %s)" % (sched, k, rank, f, bw))
                ratios = {int(t.get_attribute("data-rank")): t.get_attribute("data-measured")
                          for t in d.find_elements(By.CSS_SELECTOR, "#pipeline-chart text.bubble-ratio")}
                for r in report["ranks"]:
                    want = [s["bubble_ratio"] for s in r["steps"] if s["step"] == k][0]
                    check(abs(float(ratios[r["rank"]]) - want) < 1e-9,
                          "%s step %d rank %d: measured bubble is the report's (%s)" % (sched, k, r["rank"], want))
                texts = [t.text for t in d.find_elements(By.CSS_SELECTOR, "#pipeline-chart text.bubble-ratio")]
                check(all("vs theory 20.0 %" in t for t in texts), "%s: theory (p-1)/(m+p-1) = 20.0 %% beside it" % sched)
                for rank in range(4):
                    fe = max(b["end"] for b in boxes if b["rank"] == rank and b["phase"] == "F")
                    bs = min(b["start"] for b in boxes if b["rank"] == rank and b["phase"] == "B")
                    if sched == "afab":
                        check(fe <= bs, "afab step %d rank %d: all forwards before all backwards" % (k, rank))
                    elif rank in (0, 1):
                        check(bs < fe, "1f1b step %d rank %d (stage 0): a backward runs before the last forward" % (k, rank))
            d.save_screenshot(os.path.join(work, "viewer-pipeline-%s.png" % sched))
    return None


def case_pipeline_kineto(exe, work, d):
    """The pipeline view on the real torch.distributed.pipelining traces (tests/data/kineto/
    pipeline): the stages, micro-batches and chunks that the Kineto importer recognised
    (kineto_pipeline.c) drawn as boxes, one row per rank (zero bubble: the weight backwards
    as W boxes), and the report's bubble beside them."""
    import shutil
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "kineto", "pipeline")
    for name, p, m, v in (("1f1b", 2, 4, 1), ("interleaved1f1b", 2, 4, 2), ("zb", 2, 4, 2), ("1f1b4", 4, 8, 1)):
        run = os.path.join(work, "kineto_pipeline_" + name)
        shutil.rmtree(run, ignore_errors=True)
        shutil.copytree(os.path.join(data, name), run)
        report = analyze_json(exe, run, os.path.join(work, "kineto_pipeline_%s_report.json" % name))
        with harness.Server(exe, run) as srv:
            d.get(srv.page())
            harness.wait_state(d)
            d.find_element(By.CSS_SELECTOR, ".tab[data-tab=pipeline]").click()
            labels = d.find_elements(By.CSS_SELECTOR, "#pipeline-chart text.stage-label")
            check(sorted(int(l.get_attribute("data-stage")) for l in labels) == list(range(p)),
                  "%s: one row per stage" % name)
            opts = d.find_elements(By.CSS_SELECTOR, "#pipeline-step option")
            check(len(opts) == 2, "%s: both traced steps can be chosen" % name)
            theory = report["run"]["schedule"]["bubble_theory_ratio"]
            texts = [t.text for t in d.find_elements(By.CSS_SELECTOR, "#pipeline-chart text.bubble-ratio")]
            check(texts and all("vs theory %.1f %%" % (100 * theory) in t for t in texts),
                  "%s: the schedule's theory (%.4f: zero bubble's own) beside each row %s" % (name, theory, texts[:1]))
            for k in range(len(opts)):
                Select(d.find_element(By.ID, "pipeline-step")).select_by_index(k)
                boxes = pipeline_boxes(d)
                for rank in range(p):
                    f = sorted(b["mb"] for b in boxes if b["rank"] == rank and b["phase"] == "F")
                    bw = sorted(b["mb"] for b in boxes if b["rank"] == rank and b["phase"] == "B")
                    ww = sorted(b["mb"] for b in boxes if b["rank"] == rank and b["phase"] == "W")
                    want = sorted(list(range(m)) * v)
                    check(f == want and bw == want, "%s step %d rank %d: a forward and a backward box per "
                          "micro-batch and chunk (F %s, B %s)" % (name, k, rank, f, bw))
                    check(ww == (want if name == "zb" else []),
                          "%s step %d rank %d: weight-backward boxes (zero bubble only) %s" % (name, k, rank, ww))
                ratios = {int(t.get_attribute("data-rank")): t.get_attribute("data-measured")
                          for t in d.find_elements(By.CSS_SELECTOR, "#pipeline-chart text.bubble-ratio")}
                for r in report["ranks"]:
                    want = r["steps"][k]["bubble_ratio"]
                    check(abs(float(ratios[r["rank"]]) - want) < 1e-9,
                          "%s step %d rank %d: measured bubble is the report's (%s)" % (name, k, r["rank"], want))
            d.save_screenshot(os.path.join(work, "viewer-pipeline-kineto-%s.png" % name))
    return None


def case_compare_real(exe, work, d):
    """The compare view on two real DP2 runs (overlap on vs off); B analyzed over steps 1..2 only."""
    import subprocess
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    a = train_run(work, "cmp_overlap_on", "--world", "2", "--dp", "2", "--overlap", "on", "--steps", "3")
    b = train_run(work, "cmp_overlap_off", "--world", "2", "--dp", "2", "--overlap", "off", "--steps", "3")
    # B's report covers steps 1 and 2 only: aligning by position would put B's step 1 beside A's step 0
    subprocess.run([exe, "analyze", b, "--steps", "1:2", "--json", os.path.join(b, "report.json")], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rb = load_json(os.path.join(b, "report.json"))
    check(sorted({s["step"] for r in rb["ranks"] for s in r["steps"]}) == [1, 2], "B's report holds steps 1 and 2")
    with harness.Server(exe, a, compare=b) as srv:
        d.get(srv.page())
        harness.wait_state(d)
        d.find_element(By.CSS_SELECTOR, ".tab[data-tab=compare]").click()
        labels = [t.text for t in d.find_elements(By.CSS_SELECTOR, "#compare-steps svg text") if " step " in t.text]
        check(labels == ["A step 0", "A step 1", "B step 1", "A step 2", "B step 2"],
              "per-step bars aligned by step number %s" % labels)
        titles = [t.get_attribute("textContent") for t in d.find_elements(By.CSS_SELECTOR, "#compare-steps svg rect[data-series=compute] title")]
        check(len(titles) == 5 and titles[2].startswith("B step 1") and titles[1].startswith("A step 1"), "bars carry their run and step")
        # the lanes: every packed row of every track of rank 0 of both runs, for the step numbers
        # both traces have (their `step` ranges: 0..2 in both)
        opts = [o.text for o in d.find_elements(By.CSS_SELECTOR, "#compare-step option")]
        check(opts == ["step 0", "step 1", "step 2"], "the lane view offers the step numbers both traces have %s" % opts)
        check(js(d, "return document.getElementById('compare-canvas').dataset.step") == "0", "lanes start at step 0")
        want = js(d, """var A = stepscope.app.A.model.groupList[0], B = stepscope.app.B.model.groupList[0], n = 0, deep = 0;
            [A, B].forEach(function (g) { g.tracks.forEach(function (t) { n += t.rows.length; if (t.rows.length > 1) deep++; }); });
            return [n, deep];""")
        lanes = int(js(d, "return document.getElementById('compare-canvas').dataset.lanes"))
        check(lanes == want[0] and want[1] > 0, "every row of every track drawn (%d lanes, %d tracks with nested rows)" % (lanes, want[1]))
        Select(d.find_element(By.ID, "compare-step")).select_by_visible_text("step 2")
        check(js(d, "return document.getElementById('compare-canvas').dataset.step") == "2", "choosing step 2 redraws the lanes")
        # the step windows drawn are those of step 2 in each run: A's is the trainer's step range with payload 2
        wa = js(d, "var m = stepscope.app.A.model; return m.stepWindows(m.groupList[0]).map(function (w) { return w.step; })")
        check(wa == [0, 1, 2], "A's step ranges carry their numbers (args.payload) %s" % wa)
        cells = {r.find_elements(By.TAG_NAME, "td")[0].text: [c.text for c in r.find_elements(By.TAG_NAME, "td")]
                 for r in d.find_elements(By.CSS_SELECTOR, "#compare-table tbody tr")}
        check(len(cells) == 8 and "bubble" not in cells and "bubble_ratio" not in cells
              and cells["span"][1] != "—" and cells["span"][2] != "—",
              "metric table filled for both runs, no bubble rows without a pipeline (%s)" % sorted(cells))
        # the CLI diff's findings and verdicts (stepscope view ran `stepscope diff A B --json`)
        findings = [li.text for li in d.find_elements(By.CSS_SELECTOR, "#compare-findings li")]
        check(len(findings) > 0, "the diff's findings are shown (%d)" % len(findings))
        diff = js(d, "return stepscope.app.B.diff")
        check(findings == diff["findings"], "the findings are the diff's own")
        # the step time's change in parts, as the diff decomposed it (the same rows, same order)
        parts = [r.get_attribute("data-part") for r in d.find_elements(By.CSS_SELECTOR, "#compare-parts tbody tr[data-part]")]
        check(diff.get("step_time_parts") and parts == [p["part"] for p in diff["step_time_parts"]["parts"]],
              "the parts table is the diff's step_time_parts %s" % parts)
        src = {r.find_elements(By.TAG_NAME, "td")[0].text: r.find_elements(By.TAG_NAME, "td")[6].get_attribute("data-source")
               for r in d.find_elements(By.CSS_SELECTOR, "#compare-table tbody tr")}
        check(src["exposed_comm"] == "diff" and src["idle"] == "diff", "verdicts come from the diff where it has the metric %s" % src)
        for name, key in (("exposed_comm", "exposed_comm"), ("idle", "idle")):
            h = diff["headline"][key]
            v = h.get("verdict")
            want = (("lower in B" if h["abs_change"] < 0 else "higher in B") + " (%s)" % v
                    if v in ("better", "worse") else v)
            check(cells[name][6] == want, "%s verdict is the diff's (%s)" % (name, want))
        status = d.find_element(By.ID, "status").text
        check("B:" in status and "events" in status.split("B:")[1], "the status bar reports run B once loaded (%s)" % status)
        d.save_screenshot(os.path.join(work, "viewer-compare-real.png"))
        return srv


PARSER_DOCS = [
    # object form, one event per line, metadata after the events
    '{"traceEvents":[\n{"ph":"M","pid":1,"name":"process_name","args":{"name":"rank 0"}},\n'
    '{"ph":"X","pid":1,"tid":2,"ts":1.5,"dur":2.25,"name":"gemm","cat":"kernel","args":{"category":"compute","correlation":7}},\n'
    '{"ph":"X","pid":1,"tid":2,"ts":1348318.666,"dur":0.001,"name":"na\\"me \\u00e9","args":{"category":"comm","s":"}]{[\\\\"}}\n'
    '],"displayTimeUnit":"ns","metadata":{"schedule":{"stages":2}}}',
    # pretty-printed, keys in any order, metadata first, raw UTF-8, exponents, negatives
    '{\n  "metadata" : {"x" : [1, {"y": "]"}]},\n  "traceEvents" : [\n    {\n      "args" : { "nested" : {"category":"memcpy"}, "v" : [1,2,{"a":"b"}] },\n'
    '      "name" : "\u6f22\u5b57 kernel", "dur" : 1e3, "ts" : -2.5E-1, "tid" : "t1", "pid" : "p1", "ph" : "X", "cat":"memset"\n    } ,\n'
    '    { "ph":"X", "pid":3, "tid":4, "ts":"12.5", "dur":null, "name":"s", "args":{"category":"weird"}, "cat":"comm" },\n'
    '    { "ph":"X", "pid":3, "tid":4, "ts":12345678901234567, "dur":1.2345678901234567, "name":"long" }\n  ]\n}',
    # array form: B/E with merged args, instants, counters, flows with numeric and string ids
    '[{"ph":"B","pid":1,"tid":1,"ts":10,"name":"outer","args":{"a":1}},{"ph":"B","pid":1,"tid":1,"ts":11,"name":"inner"},'
    '{"ph":"E","pid":1,"tid":1,"ts":12},{"ph":"E","pid":1,"tid":1,"ts":20,"args":{"b":2}},'
    '{"ph":"i","pid":1,"tid":1,"ts":15,"name":"mark","s":"t"},{"ph":"C","pid":1,"name":"mem","ts":5,"args":{"value":3,"x":"4"}},'
    '{"ph":"s","pid":1,"tid":1,"ts":10,"id":5,"cat":"launch","name":"l"},{"ph":"f","bp":"e","pid":1,"tid":2,"ts":13,"id":5,"cat":"launch","name":"l"},'
    '{"ph":"s","pid":1,"tid":1,"ts":11,"id":"0:5","cat":"launch","name":"l"},{"ph":"f","pid":1,"tid":2,"ts":14,"id":"0:5","cat":"launch","name":"l"},'
    '{"ph":"f","pid":1,"tid":2,"ts":14,"id":"nostart","cat":"launch","name":"l"}]',
]
PARSER_BAD = ['{"traceEvents":[{"ph":"X"', '{"traceEvents":[1,2]}', 'nope', '', '{"traceEvents":[{"ph":"X",}x]}']


def case_parser(exe, work, d):
    """The byte-level parser against JSON.parse, with chunk boundaries everywhere."""
    run = harness.make_sample(os.path.join(work, "run_small"), "--dp", "1", "--pp", "2", "--steps", "1",
                              "--microbatches", "2", "--layers", "1")
    with harness.Server(exe, run) as srv:
        d.get(srv.page())
        harness.wait_state(d)
        check(js(d, "return stepscope.parseMode()") == "worker", "the trace was parsed in a Web Worker")
        res = js(d, """
var docs = arguments[0], bad = arguments[1], F = SS.traceParserFactory(), enc = new TextEncoder(), out = [];
var CAT = {other:0, compute:1, comm:2, memcpy:3, memset:4, host:5, derived:6};
function viaParser(text, step) {
  var bytes = enc.encode(text), p = new F.Parser(0);
  for (var k = 0; k < bytes.length; k += step) p.push(bytes.subarray(k, Math.min(bytes.length, k + step)));
  var r = p.finish(), m = new SS.TraceModel(r), sl = [];
  for (var i = 0; i < r.n; i++) sl.push([r.ts[i], r.dur[i], r.names[r.nameId[i]], r.cat[i], JSON.stringify(m.argsOf(i)),
                                          String(m.tracks[r.track[i]].pid) + '/' + String(m.tracks[r.track[i]].tid)].join('|'));
  var fl = [];
  for (var f = 0; f < r.flows.n; f++) fl.push([r.flows.fromTs[f], r.flows.toTs[f]].join('>'));
  var cn = r.counters.map(function (c) { return c.name + '=' + Array.from(c.val).join(','); });
  return JSON.stringify({ n: r.eventCount, sl: sl.sort(), fl: fl.sort(), cn: cn.sort(), md: r.metadata,
                          groups: r.groups.map(function (g) { return g.name; }).sort() });
}
function viaJson(text) {
  var doc = JSON.parse(text), evs = Array.isArray(doc) ? doc : doc.traceEvents, sl = [], open = {}, starts = {}, fl = [], cn = {}, groups = {};
  evs.forEach(function (e) {
    var cat = (e.args && typeof e.args.category === 'string') ? (CAT[e.args.category] || 0) : (CAT[e.cat] || 0);
    var pid = e.pid === undefined || e.pid === null ? 0 : e.pid, tid = e.tid === undefined || e.tid === null ? 0 : e.tid;
    var key = String(pid) + '/' + String(tid), ts = +e.ts;
    groups[pid] = groups[pid] || 'process ' + pid;
    if (e.ph === 'X' || e.ph === 'i') {
      var dur = e.ph === 'i' ? 0 : +e.dur;
      sl.push([ts, isFinite(dur) && dur > 0 ? dur : 0, e.name === undefined ? '' : String(e.name), cat, JSON.stringify(e.args || null), key].join('|'));
    } else if (e.ph === 'B') { (open[key] = open[key] || []).push([e, cat]); }
    else if (e.ph === 'E') {
      var b = open[key].pop(), args = e.args ? Object.assign({}, b[0].args || {}, e.args) : (b[0].args || null);
      sl.push([+b[0].ts, ts - b[0].ts, b[0].name, b[1], JSON.stringify(args), key].join('|'));
    } else if (e.ph === 'M' && e.name === 'process_name') groups[pid] = e.args.name;
    else if (e.ph === 'C') { for (var k in e.args) { var nm = e.name + (k === 'value' ? '' : ' · ' + k); (cn[nm] = cn[nm] || []).push(+e.args[k]); } }
    else if (e.ph === 's') starts[e.cat + '#' + e.id] = ts;
    else if (e.ph === 'f' && starts[e.cat + '#' + e.id] !== undefined) { fl.push(starts[e.cat + '#' + e.id] + '>' + ts); delete starts[e.cat + '#' + e.id]; }
  });
  return JSON.stringify({ n: evs.length, sl: sl.sort(), fl: fl.sort(), cn: Object.keys(cn).map(function (k) { return k + '=' + cn[k].join(','); }).sort(),
                          md: Array.isArray(doc) ? {} : (doc.metadata || {}), groups: Object.keys(groups).map(function (k) { return groups[k]; }).sort() });
}
docs.forEach(function (text, d) {
  var want = viaJson(text);
  [1, 2, 3, 7, 64, 1 << 30].forEach(function (step) {
    var got = viaParser(text, step);
    if (got !== want) out.push('doc ' + d + ' step ' + step + ': ' + got + ' != ' + want);
  });
});
bad.forEach(function (text) {
  try { viaParser(text, 3); out.push('accepted bad input ' + text); }
  catch (e) { if (!/^trace JSON: /.test(e.message)) out.push('bad input ' + text + ': ' + e.message); }
});
return out;""", PARSER_DOCS, PARSER_BAD)
        check(res == [], "parser agrees with JSON.parse on %d documents at every chunk size, refuses %d bad ones %s" % (
            len(PARSER_DOCS), len(PARSER_BAD), res[:3]))
        # the same run parsed on the page (no worker) gives the same model
        n_worker = js(d, "var m = stepscope.app.A.model; return [m.eventCount, m.n, m.flows.n, m.names.length]")
        d.get(srv.page("?worker=0&chunk=5"))
        harness.wait_state(d)
        check(js(d, "return stepscope.parseMode()") == "page", "?worker=0 parses on the page")
        check(js(d, "var m = stepscope.app.A.model; return [m.eventCount, m.n, m.flows.n, m.names.length]") == n_worker,
              "worker and page parses agree %s" % n_worker)
        return srv


def case_attribution_real(exe, work, d):
    """Bubble causes, interleaved chunk labels, per-op collective charts and the ruler, on real runs."""
    from selenium.webdriver.common.by import By
    run = train_run(work, "train_interleaved", "--world", "2", "--pp", "2", "--schedule", "interleaved",
                    "--virtual-stages", "2", "--microbatches", "4", "--layers", "4", "--steps", "2")
    report = analyze_json(exe, run, os.path.join(run, "report.json"))
    with harness.Server(exe, run) as srv:
        d.get(srv.page())
        harness.wait_state(d)
        # the ruler: zoomed far in, tick labels do not overlap and stay right of the label column
        for _ in range(3):
            ticks = js(d, """var t = stepscope.app.timeline, c = (t.t0 + t.t1) / 2, s = (t.t1 - t.t0) / 50;
                t.setWindow(c - s, c + s); t.render(); return {ticks: t.axisTicks, labelW: t.labelW};""")
            xs = ticks["ticks"]
            check(len(xs) >= 2, "ticks drawn when zoomed (%d)" % len(xs))
            check(all(xs[k]["x"] + xs[k]["w"] + 3 <= xs[k + 1]["x"] for k in range(len(xs) - 1)),
                  "ruler labels do not overlap %s" % xs[:3])
            check(all(x["x"] >= ticks["labelW"] for x in xs), "no tick label over the label column")
        d.find_element(By.CSS_SELECTOR, ".tab[data-tab=pipeline]").click()
        rows = js(d, """var out = {}; document.querySelectorAll('#pipeline-chart rect.op').forEach(function (r) {
            (out[r.dataset.rank] = out[r.dataset.rank] || []).push(r.dataset.label); }); return out;""")
        for rank, labels in rows.items():
            check(len(labels) == 2 * 2 * 4 and len(set(labels)) == len(labels),
                  "rank %s: every (pass, micro-batch, chunk) box has its own label (%s)" % (rank, sorted(labels)[:6]))
            check("F0c0" in labels and "F0c1" in labels, "rank %s: chunk 0 and chunk 1 of micro-batch 0 told apart" % rank)
        segs = js(d, """return Array.from(document.querySelectorAll('#pipeline-chart rect.bubble-cause')).map(function (r) {
            return {rank: +r.dataset.rank, cause: r.dataset.cause, ns: +r.dataset.ns}; })""")
        # the step the view opened on (the first steady one: step 1 of 2)
        shown = int(js(d, "var s = document.getElementById('pipeline-step'); return s.options[s.selectedIndex].text")
                    .split()[1])
        for r in report["ranks"]:
            st = [s for s in r["steps"] if s["step"] == shown][0]
            got = sum(x["ns"] for x in segs if x["rank"] == r["rank"])
            check(got == st["bubble_ns"] and st["bubble_causes"] is not None,
                  "rank %d: the cause bar covers the step's bubble exactly (%d of %d ns)" % (r["rank"], got, st["bubble_ns"]))
            want = {k[:-3] for k, v in st["bubble_causes"].items() if v > 0}
            check({x["cause"] for x in segs if x["rank"] == r["rank"]} == want, "rank %d: one segment per cause present" % r["rank"])
        check(len(d.find_elements(By.CSS_SELECTOR, "#bubble-cause-legend .swatch")) == 6, "a legend entry per cause")
        d.save_screenshot(os.path.join(work, "viewer-bubble-causes.png"))
        # the summary: one labelled chart per collective op, and what "incomplete" means
        d.find_element(By.CSS_SELECTOR, ".tab[data-tab=summary]").click()
        ops = {"%s %s" % (c["op"], c["group"]) for c in report["collectives"]["instances"]}
        charts = [c.get_attribute("data-op") for c in d.find_elements(By.CSS_SELECTOR, "#collective-instance-charts svg.instance-chart")]
        check(sorted(charts) == sorted(ops), "one chart per op and group %s" % charts)
        check(all(len(c.find_elements(By.TAG_NAME, "text")) >= 2 for c in d.find_elements(By.CSS_SELECTOR, "svg.instance-chart")),
              "each chart is labelled")
        note = d.find_element(By.ID, "collectives-incomplete").text
        check("incomplete" in note and "left out" in note and "two ranks" in note, "incomplete is explained (%s)" % note[:60])
        return srv


def case_html_too_large(exe, work, d):
    """A --html page whose trace the browser could not hold (Chromium reads a script element of
    more than ~512 MiB as empty; simulated by emptying the element of a real page, its
    data-bytes kept) says so and what to do, not "trace JSON: empty document near byte 0"
    (issue 35)."""
    import re
    import subprocess
    run = harness.make_sample(os.path.join(work, "run_html"), "--dp", "2", "--pp", "2", "--steps", "2")
    out = os.path.join(work, "viewer-too-large.html")
    subprocess.run([exe, "view", run, "--html", out], check=True, stdout=subprocess.DEVNULL)
    with open(out, encoding="utf-8") as f:
        page = f.read()
    m = re.search(r'(<script type="application/json" data-bytes="(\d+)" id="data-a-trace">)(.*?)(</script>)',
                  page, re.S)
    # the file's bytes; inlined, each '<' is written as \\u003c (6 bytes)
    check(m is not None and 0 < int(m.group(2)) <= len(m.group(3).encode()),
          "the page gives its trace's size (data-bytes=%s)" % (m.group(2) if m else None))
    with open(out, "w", encoding="utf-8") as f:
        f.write(page[:m.start(3)] + page[m.end(3):])
    d.get("file://" + os.path.abspath(out))
    state = harness.wait_state(d, states=("ready", "error"))
    text = d.find_element("id", "error").text
    check(state == "error" and "more than the browser can read" in text and "--ranks" in text
          and "empty document" not in text, "the error says the page was too large (%s)" % text)
    d.get_log("browser")  # the error is the expected outcome, not a console failure


def case_html_compare_hint(exe, work, d):
    """A one-run --html page does not point to a file picker it does not have."""
    import subprocess
    from selenium.webdriver.common.by import By
    run = harness.make_sample(os.path.join(work, "run_html"), "--dp", "2", "--pp", "2", "--steps", "2")
    out = os.path.join(work, "viewer-one-run.html")
    subprocess.run([exe, "view", run, "--html", out], check=True, stdout=subprocess.DEVNULL)
    d.get("file://" + os.path.abspath(out))
    harness.wait_state(d)
    d.find_element(By.CSS_SELECTOR, ".tab[data-tab=compare]").click()
    text = d.find_element(By.ID, "compare-missing").text
    check("--compare" in text and "--html" in text and "picker" not in text and "below" not in text,
          "the hint names --compare with --html, no file picker (%s)" % text)


def case_token_leak(exe, work, d):
    """The access token never reaches another server on this machine (issue 34 defect 5):
    a plain HTTP server on another port of 127.0.0.1 records every request head the
    browser sends it, after the viewer has loaded everything under the token's path,
    on a navigation started by the viewer's page (which would carry a Referer) and on
    one typed by the user (which would carry a cookie of 127.0.0.1: cookies ignore
    ports, so the cookie the server used to set went to every port)."""
    import http.server
    import threading
    import time
    run = harness.make_sample(os.path.join(work, "run_leak"), "--dp", "2", "--pp", "1", "--steps", "2")
    heads = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            heads.append(self.requestline + "\r\n" + str(self.headers))
            body = b'<!doctype html><link rel="icon" href="data:,"><title>other</title>other server'
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    there = "http://127.0.0.1:%d/" % other.server_address[1]
    try:
        with harness.Server(exe, run) as srv:
            d.get(srv.page())
            harness.wait_state(d)
            check(js(d, "return stepscope.groups().length") == 2, "the viewer loaded the run under /t/<token>/ (2 ranks)")
            check(not d.get_cookies(), "the server set no cookie (%s)" % d.get_cookies())
            js(d, "location.href = arguments[0]", there + "from-viewer")
            t0 = time.time()
            while not heads and time.time() - t0 < 20:
                time.sleep(0.05)
            d.get(there + "typed")
            check(len(heads) >= 2, "the other server saw the browser's requests (%d)" % len(heads))
            leaked = [h for h in heads if srv.token in h]
            check(not leaked, "no request to the other port carries the token: %s" % leaked)
            check(not any(h.lower().count("\ncookie:") for h in heads), "nor any cookie")
    finally:
        other.shutdown()
        other.server_close()


MAKE_KINETO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kineto", "make_kineto.py")
PYTORCH_SAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "samples", "pytorch", "cpu-ddp2")


def case_pytorch(exe, work, d):
    """The committed PyTorch sample (gloo DDP on the CPU: no collective instances): the
    Collectives box says in words what is missing instead of a table of zeros and "none"
    cells (issue 34 rough edges)."""
    import subprocess
    out = os.path.join(work, "viewer-pytorch.html")
    subprocess.run([exe, "view", PYTORCH_SAMPLE, "--html", out], check=True, stdout=subprocess.DEVNULL)
    d.get("file://" + os.path.abspath(out))
    harness.wait_state(d)
    d.find_element("css selector", ".tab[data-tab=summary]").click()
    box = d.find_element("id", "summary-collectives")
    note = js(d, "var e = document.getElementById('collectives-none'); return e ? e.textContent : ''")
    check("No collective instances" in note and "NCCL" in note, "the Collectives box says what is missing: %s" % note[:80])
    cells = [c.text.strip() for c in box.find_elements("css selector", "td")]
    check("none" not in cells, "and shows no raw 'none' cell (%s)" % cells[:12])

    # the ruler where the unit changes inside the view (900.000 µs ... 1.100 ms): the labels
    # in between are wider than the ends', which alone set the spacing, and overlapped
    import time
    d.find_element("css selector", ".tab[data-tab=timeline]").click()
    overlaps, windows = [], 0
    for width in (1400, 1100, 900, 760):
        d.set_window_size(width, 900)
        time.sleep(0.3)
        for span in (1050, 1100, 1200, 1500, 2000, 10500, 12000, 105000, 110000):
            for start in (0, 10, 500, 900):
                ticks = js(d, """var t = stepscope.app.timeline, m = t.model.minTs; t.resize();
                    t.setWindow(m + arguments[1], m + arguments[1] + arguments[0]); t.render(); return t.axisTicks;""",
                           span, start)
                windows += 1
                if any(ticks[k]["x"] + ticks[k]["w"] + 3 > ticks[k + 1]["x"] for k in range(len(ticks) - 1)):
                    overlaps.append((width, span, start))
    d.set_window_size(1400, 900)
    check(not overlaps, "ruler labels never overlap in %d windows across unit changes %s" % (windows, overlaps[:3]))

    # C++ kernel names of a GPU Kineto trace (make_kineto.py's, one made longer, as
    # templated ATen kernels are): one line each in the Kernels table, whole in the tooltip
    run = os.path.join(work, "kineto_long_names")
    subprocess.run([sys.executable, MAKE_KINETO, run, "--ranks", "2", "--steps", "2"], check=True,
                   stdout=subprocess.DEVNULL)
    short = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn"
    long_name = ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8"
                 "<cutlass::gemm::GemmShape<128, 128, 32>, cutlass::gemm::GemmShape<64, 64, 32>, "
                 "cutlass::epilogue::thread::LinearCombination<cutlass::bfloat16_t, 8, float, float>, "
                 "cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<8>, 3, 8, 8, false, "
                 "cutlass::arch::OpMultiplyAdd, false, false, cutlass::ComplexTransform::kNone> >"
                 "(cutlass::gemm::kernel::GemmUniversal<...>::Params)")
    for rank in range(2):
        path = os.path.join(run, "rank-%d.json" % rank)
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace('"%s"' % short, json.dumps(long_name)))
    out = os.path.join(work, "viewer-kineto-long.html")
    subprocess.run([exe, "view", run, "--html", out], check=True, stdout=subprocess.DEVNULL)
    d.get("file://" + os.path.abspath(out))
    harness.wait_state(d)
    d.find_element("css selector", ".tab[data-tab=summary]").click()
    rows = js(d, "return Array.from(document.querySelectorAll('#summary-kernels td')).filter(function (td) {"
                 " return td.title || td.textContent.indexOf('cutlass') >= 0 || td.textContent.indexOf('at::native') >= 0; })"
                 ".map(function (td) { var r = td.getBoundingClientRect(); return [td.title, td.textContent, r.height]; })")
    check(len(rows) >= 2, "the Kernels table lists the long C++ names (%d)" % len(rows))
    line = js(d, "var td = document.querySelector('#summary-kernels td'); return td.getBoundingClientRect().height")
    check(all(h <= line * 1.5 for _, _, h in rows),
          "each is one line high (%s px; a short cell %s px)" % ([round(h) for _, _, h in rows], round(line)))
    check(any(t == long_name for t, _, _ in rows), "the whole name is in the cell's tooltip")
    return None


CASES = {"pytorch": case_pytorch, "html_too_large": case_html_too_large, "burst": case_burst, "attribution_real": case_attribution_real, "html_compare_hint": case_html_compare_hint, "compare_real": case_compare_real, "pipeline_real": case_pipeline_real, "pipeline_kineto": case_pipeline_kineto, "parser": case_parser, "real": case_real, "timeline": case_timeline, "chunks": case_chunks, "pipeline": case_pipeline,
         "compare": case_compare, "html": case_html, "token_leak": case_token_leak}


def main():
    exe, work, case = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(work, exist_ok=True)
    d = harness.browser()
    try:
        CASES[case](exe, work, d)
        errs = harness.console_errors(d)
        check(not errs, "no console errors %s" % errs)
    except Exception:
        try:
            d.save_screenshot(os.path.join(work, "viewer-%s-failure.png" % case))
            for e in d.get_log("browser"):
                print("console:", e)
        except Exception:
            pass
        raise
    finally:
        d.quit()
    print("PASS " + case)


if __name__ == "__main__":
    main()
