#!/usr/bin/env python3
"""test_experts.py STEPSCOPE WORK_DIR — the viewer's Experts view and the all-to-all phases
on its timeline, on real runs of the bundled trainer (CPU backend; STEPSCOPE_TRAIN names it).

A small traced mixture-of-experts run (4 ranks, DP 4, EP 2, 4 experts, top-2, 3 steps) is
exported and analyzed by stepscope, then served with `stepscope view`:
- the Experts tab is shown, and every number it lays out (the steps x experts map, the
  steps x EP ranks map, the totals, each step's imbalances, busiest expert and rank, the
  waits in the all-to-alls and who caused them, the headline means) equals the report's
  `moe` section, whose per-step loads are first checked against its own totals;
- the timeline has the all-to-all categories (as many slices as the export tags
  "comm,all_to_all", "host,moe_dispatch", "host,moe_combine"), a legend entry for each,
  and an all-to-all slice is drawn on the canvas in its legend colour;
- a dense run of the same model shows no Experts tab, no legend and no such category.
Exit 0 pass, 1 fail, 77 skip (no Chromium/Selenium or no trainer).
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402

MODEL = ["--world", "4", "--dp", "4", "--layers", "2", "--hidden", "32", "--heads", "4", "--seq", "16",
         "--batch", "8", "--steps", "3"]


def prepare(exe, work, name, extra):
    """Trains (traced), exports and analyzes one run; returns (dir, export events, report)."""
    train = os.environ.get("STEPSCOPE_TRAIN")
    if not train:
        harness.skip("STEPSCOPE_TRAIN (the stepscope-train executable) not given")
    run = os.path.join(work, name)
    if not os.path.isdir(run):
        subprocess.run([train, "--backend", "cpu", "--trace", run] + MODEL + extra, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run([exe, "export", run, "-o", os.path.join(run, "trace.json")], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run([exe, "analyze", run, "--json", os.path.join(run, "report.json")], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(run, "trace.json"), encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]
    with open(os.path.join(run, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    return run, events, report


def js(d, code, *args):
    return d.execute_script(code, *args)


def cells(d, table):
    """{(step, col): (text, data-value)} of a load map."""
    rows = js(d, """return Array.from(document.querySelectorAll('#' + arguments[0] + ' td.cell')).map(function (c) {
        return [+c.dataset.step, +c.dataset.col, c.textContent, c.dataset.value === undefined ? null : c.dataset.value]; })""", table)
    return {(r[0], r[1]): (r[2], r[3]) for r in rows}


def fields(d, table):
    """{(step, field): (text, data-value, dataset)} of the per-step columns of a table."""
    rows = js(d, """return Array.from(document.querySelectorAll('#' + arguments[0] + ' tr[data-step] td[data-field]')).map(function (c) {
        return [+c.parentNode.dataset.step, c.dataset.field, c.textContent, c.dataset.value === undefined ? null : c.dataset.value,
                Object.assign({}, c.dataset)]; })""", table)
    return {(r[0], r[1]): (r[2], r[3], r[4]) for r in rows}


def check_experts_view(d, moe):
    from selenium.webdriver.common.by import By
    E, ep, steps = moe["experts"], moe["ep"], moe["steps"]
    # the report's per-step loads against its own totals (the view lays out these numbers)
    for s in steps:
        check(sum(s["tokens_per_expert"]) == s["tokens"],
              "report step %d: the experts' loads sum to the step's tokens (%d)" % (s["step"], s["tokens"]))
        per = E // ep
        check(s["tokens_per_ep_rank"] == [sum(s["tokens_per_expert"][q * per:(q + 1) * per]) for q in range(ep)],
              "report step %d: EP-rank loads are the sums of their experts %s" % (s["step"], s["tokens_per_ep_rank"]))
    check([sum(s["tokens_per_expert"][e] for s in steps) for e in range(E)] == moe["tokens_per_expert"],
          "report: the steps' loads sum to the run's tokens_per_expert %s" % moe["tokens_per_expert"])

    tab = d.find_element(By.ID, "tab-experts")
    check(tab.is_displayed(), "the Experts tab is shown for a MoE run")
    tab.click()
    check(d.find_element(By.ID, "view-experts").is_displayed(), "the Experts view opens")

    cards = js(d, """var o = {}; document.querySelectorAll('#moe-headline .kpi').forEach(function (c) { o[c.id] = c.dataset.value; }); return o;""")
    check(int(cards["moe-experts"]) == E and int(cards["moe-ep"]) == ep, "headline: %d experts, EP %d" % (E, ep))
    check(float(cards["moe-expert-imbalance-mean"]) == moe["expert_imbalance_mean"] and
          float(cards["moe-rank-imbalance-mean"]) == moe["ep_rank_imbalance_mean"],
          "headline: the mean imbalances are the report's (%s, %s)" % (moe["expert_imbalance_mean"], moe["ep_rank_imbalance_mean"]))

    m = cells(d, "moe-expert-map")
    check(len(m) == len(steps) * E, "the map has one cell per step and expert (%d)" % len(m))
    for s in steps:
        for e in range(E):
            want = s["tokens_per_expert"][e]
            text, value = m[(s["step"], e)]
            check(text == str(want) and int(value) == want, "step %d expert %d: %s tokens, the report's %d" % (s["step"], e, text, want))
    totals = js(d, "return Array.from(document.querySelectorAll('#moe-expert-map tr.total-row td')).map(function (c) { return +c.dataset.value; })")
    check(totals == moe["tokens_per_expert"], "the totals row is the report's tokens_per_expert %s" % totals)
    # the colour scale: the step's most loaded expert is drawn darker than its least loaded
    s0 = steps[0]
    lo, hi = s0["tokens_per_expert"].index(min(s0["tokens_per_expert"])), s0["tokens_per_expert"].index(max(s0["tokens_per_expert"]))
    bg = js(d, """var step = arguments[2]; return [arguments[0], arguments[1]].map(function (k) {
        var c = document.querySelector('#moe-expert-map td.cell[data-step="' + step + '"][data-col="' + k + '"]');
        return getComputedStyle(c).backgroundColor; })""", lo, hi, s0["step"])
    dark = [sum(int(x) for x in c[c.index("(") + 1:c.index(")")].split(",")[:3]) for c in bg]
    if min(s0["tokens_per_expert"]) < max(s0["tokens_per_expert"]):
        check(dark[1] < dark[0], "step %d: expert %d (most tokens) darker than expert %d %s" % (s0["step"], hi, lo, bg))

    f = fields(d, "moe-expert-map")
    for s in steps:
        k = s["step"]
        check(int(f[(k, "tokens")][1]) == s["tokens"], "step %d: tokens %s" % (k, s["tokens"]))
        check(float(f[(k, "expert_imbalance")][1]) == s["expert_imbalance"] and f[(k, "expert_imbalance")][0] == "%.2f" % s["expert_imbalance"],
              "step %d: max/mean %s is the report's %s" % (k, f[(k, "expert_imbalance")][0], s["expert_imbalance"]))
        b = f[(k, "busiest_expert")]
        check(int(b[1]) == s["busiest_expert"] and int(b[2]["tokens"]) == s["busiest_expert_tokens"] and float(b[2]["mean"]) == s["mean_expert_tokens"],
              "step %d: busiest expert %s (%s vs mean %s)" % (k, s["busiest_expert"], s["busiest_expert_tokens"], s["mean_expert_tokens"]))
        check(f[(k, "where")][0] == "layer %d, EP group %d" % (s["layer"], s["edp_rank"]), "step %d: where: %s" % (k, f[(k, "where")][0]))

    r = cells(d, "moe-rank-map")
    check(len(r) == len(steps) * ep, "the EP-rank map has one cell per step and EP rank")
    for s in steps:
        for q in range(ep):
            check(int(r[(s["step"], q)][1]) == s["tokens_per_ep_rank"][q], "step %d EP rank %d: %s tokens" % (s["step"], q, s["tokens_per_ep_rank"][q]))
    fr = fields(d, "moe-rank-map")
    for s in steps:
        k = s["step"]
        check(float(fr[(k, "ep_rank_imbalance")][1]) == s["ep_rank_imbalance"], "step %d: EP-rank max/mean %s" % (k, s["ep_rank_imbalance"]))
        check(int(fr[(k, "busiest_rank")][1]) == s["busiest_rank"] and int(fr[(k, "busiest_rank")][2]["epRank"]) == s["busiest_ep_rank"],
              "step %d: busiest EP rank %d = rank %d" % (k, s["busiest_ep_rank"], s["busiest_rank"]))

    w = fields(d, "moe-waits")
    any_wait = False
    for s in steps:
        k = s["step"]
        check(int(w[(k, "a2a_wait_ns")][1]) == s["a2a_wait_ns"], "step %d: all-to-all wait %d ns" % (k, s["a2a_wait_ns"]))
        check(int(w[(k, "a2a_wait_caused_by_rank")][1]) == s["a2a_wait_caused_by_rank"] and
              int(w[(k, "a2a_wait_caused_ns")][1]) == s["a2a_wait_caused_ns"],
              "step %d: caused by rank %d, %d ns" % (k, s["a2a_wait_caused_by_rank"], s["a2a_wait_caused_ns"]))
        same = "yes" if s["a2a_wait_caused_by_rank"] == s["busiest_rank"] else "no"
        if s["a2a_wait_caused_by_rank"] < 0 or s["busiest_rank"] < 0:
            same = "—"
        check(w[(k, "same")][0] == same, "step %d: busiest rank and culprit the same: %s" % (k, same))
        any_wait = any_wait or s["a2a_wait_ns"] > 0
    check(any_wait, "the run's all-to-alls have waits to show")


def check_timeline_phases(d, events):
    from selenium.webdriver.common.by import By
    d.find_element(By.CSS_SELECTOR, ".tab[data-tab=timeline]").click()
    want = {"all_to_all": 0, "moe_dispatch": 0, "moe_combine": 0}
    tags = {"comm,all_to_all": "all_to_all", "host,moe_dispatch": "moe_dispatch", "host,moe_combine": "moe_combine"}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in tags:
            want[tags[e["cat"]]] += 1
    check(all(v > 0 for v in want.values()), "the export tags the all-to-all phases %s" % want)
    counts = js(d, "return window.stepscope.categoryCounts()")
    check({k: counts.get(k, 0) for k in want} == want, "the timeline's all-to-all categories %s equal the export's %s" % (counts, want))
    legend = js(d, """return Array.from(document.querySelectorAll('#phase-legend .legend-item')).map(function (e) {
        return [e.dataset.category, getComputedStyle(e.querySelector('.swatch')).backgroundColor, e.textContent]; })""")
    check(d.find_element(By.ID, "phase-legend").is_displayed() and sorted(x[0] for x in legend) == sorted(want),
          "a legend entry per all-to-all phase %s" % legend)
    colours = {x[0]: x[1] for x in legend}
    check(len(set(colours.values())) == 3, "three distinct legend colours %s" % colours)
    # an all-to-all collective, zoomed to, is painted in its legend colour
    px = js(d, """var a = window.stepscope.app, m = a.A.model, tl = a.timeline, hits = m.search('alltoallv'), i = -1;
        for (var k = 0; k < hits.length; k++) if (m.cat[hits[k]] === SS.CAT.all_to_all) { i = hits[k]; break; }
        if (i < 0) return null;
        tl.select(i); tl.reveal(i); tl.zoomToSelection(); tl.render();
        var p = tl.clientPointOf(i), r = tl.canvas.getBoundingClientRect(), dpr = tl.dpr;
        var d = tl.ctx.getImageData(Math.round((p.x - r.left) * dpr), Math.round((p.y - r.top - tl.rowH / 2 + 3) * dpr), 1, 1).data;
        return {rgb: 'rgb(' + d[0] + ', ' + d[1] + ', ' + d[2] + ')', color: tl.colorOf(i)};""")
    check(px is not None, "an alltoallv slice of category all_to_all on the timeline")
    check(px["rgb"] == colours["all_to_all"], "the all-to-all slice is painted %s, the legend's %s" % (px["rgb"], colours["all_to_all"]))
    comm = js(d, "return SS.COLORS[SS.CAT.comm]")
    check(px["color"].lower() != comm.lower(), "its colour %s is not the other collectives' %s" % (px["color"], comm))


def main():
    from selenium.webdriver.common.by import By
    exe, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    moe_run, moe_events, moe_report = prepare(exe, work, "experts_moe", ["--experts", "4", "--top-k", "2", "--ep", "2"])
    dense_run, dense_events, dense_report = prepare(exe, work, "experts_dense", [])
    check(moe_report.get("moe") and dense_report.get("moe") is None, "the MoE run's report has a moe section, the dense run's none")
    d = harness.browser()
    try:
        with harness.Server(exe, moe_run) as srv:
            d.get(srv.page())
            harness.wait_state(d)
            check_timeline_phases(d, moe_events)
            d.save_screenshot(os.path.join(work, "viewer-experts-timeline.png"))
            check_experts_view(d, moe_report["moe"])
            d.save_screenshot(os.path.join(work, "viewer-experts.png"))
        with harness.Server(exe, dense_run) as srv:
            d.get(srv.page())
            harness.wait_state(d)
            check(not d.find_element(By.ID, "tab-experts").is_displayed(), "no Experts tab for a dense run")
            check(not d.find_element(By.ID, "phase-legend").is_displayed(), "no all-to-all legend for a dense run")
            counts = js(d, "return window.stepscope.categoryCounts()")
            check(not any(k in counts for k in ("all_to_all", "moe_dispatch", "moe_combine")) and counts.get("comm", 0) > 0,
                  "a dense run's timeline has collectives but no all-to-all category %s" % counts)
        errs = harness.console_errors(d)
        check(not errs, "no console errors %s" % errs)
    except Exception:
        try:
            d.save_screenshot(os.path.join(work, "viewer-experts-failure.png"))
            for e in d.get_log("browser"):
                print("console:", e)
        except Exception:
            pass
        raise
    finally:
        d.quit()
    print("PASS experts")


if __name__ == "__main__":
    main()
