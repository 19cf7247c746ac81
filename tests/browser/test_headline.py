#!/usr/bin/env python3
"""test_headline.py — the viewer's headline numbers are the report's (issue 15 §5).

  test_headline.py STEPSCOPE_EXE MAKE_KINETO SAMPLE_RUN WORK_DIR CASE    CASE: nopipe | pipeline

nopipe: a 2-rank PyTorch-profiler run without a pipeline (tests/kineto/make_kineto.py),
written with `stepscope view RUN --html`, opened in headless Chromium. The Summary's
"step time (median)" card carries exactly run.step_time_ns of the report (the report
inlined in the page, and the one `stepscope analyze --json` writes for the same run)
and shows it formatted; no bubble appears anywhere (headline, rank table, timeline
overlay toggle); empty lists read "none", never "[]".

pipeline: the committed sample (dp2 × pp2, 1F1B; its export is trace.json.gz). The
step-time card is the report's run.step_time_ns, and the bubble card is there, equal to
the pipeline ranks' bubble over their span, beside the schedule's theory.

Exit 0 pass, 1 fail, 77 skip (no Chromium/Selenium).
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402


def js(d, code, *args):
    return d.execute_script(code, *args)


def open_page(exe, run, page, d):
    r = subprocess.run([exe, "view", run, "--html", page], capture_output=True, text=True)
    check(r.returncode == 0 and len(r.stdout.splitlines()) == 1,
          "view --html wrote the page and printed one line (%r %r)" % (r.stdout, r.stderr[:300]))
    d.get("file://" + os.path.abspath(page))
    harness.wait_state(d)
    d.find_element("css selector", ".tab[data-tab=summary]").click()
    return js(d, "return JSON.parse(document.getElementById('data-a-report').textContent)")


def headline_step(d):
    card = d.find_element("id", "kpi-step-time")
    return int(card.get_attribute("data-value")), card.find_element("css selector", ".kpi-value").text


def no_empty_list_cells(d):
    cells = js(d, "return Array.from(document.querySelectorAll('#summary td, #summary .kpi-value, #summary li, #summary p'))"
                  ".map(function (e) { return e.textContent.trim(); })")
    return [c for c in cells if c in ("[]", "{}")]


def case_nopipe(exe, make_kineto, sample, work, d):
    # per-step jitter: the run's step time (median over steps of the slowest rank's step)
    # is not the median of all ranks' steps, which the viewer showed before
    run = os.path.join(work, "headline_nopipe_j300")
    if not os.path.isdir(run):
        subprocess.run([sys.executable, make_kineto, run, "--ranks", "2", "--steps", "5", "--gzip", "--jitter-us", "300"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    own = os.path.join(work, "headline_nopipe.report.json")
    subprocess.run([exe, "analyze", run, "--json", own, "--quiet"], check=True)
    with open(own, encoding="utf-8") as f:
        report = json.load(f)
    inlined = open_page(exe, run, os.path.join(work, "headline_nopipe.html"), d)
    want = report["run"]["step_time_ns"]
    check(isinstance(want, int) and inlined["run"]["step_time_ns"] == want, "the page's report has the run's step time %s" % want)
    spans = sorted(s["span_ns"] for r in report["ranks"] for s in r["steps"])
    median_all = (spans[(len(spans) - 1) // 2] + spans[len(spans) // 2]) / 2
    check(median_all != want, "precondition: the median of all steps (%s) is not the run's step time (%s)" % (median_all, want))
    value, text = headline_step(d)
    check(value == want, "headline step time is run.step_time_ns (%s == %s)" % (value, want))
    check(text == js(d, "return SS.formatNs(arguments[0])", want), "and shows it formatted (%s)" % text)
    # the time split's cards sum to the whole time: exposed copies are one of them (issue 30 §5)
    split = [int(d.find_element("id", k).get_attribute("data-value"))
             for k in ("kpi-compute", "kpi-exposed-comm", "kpi-exposed-copies", "kpi-idle")]
    total = sum(r["totals"]["span_ns"] for r in report["ranks"])
    check(split[2] > 0 and sum(split) == total,
          "compute, exposed comm, exposed copies and idle add up to the time (%s vs %d)" % (split, total))
    headline = d.find_element("id", "headline").text
    check("bubble" not in headline.lower() and not d.find_elements("id", "kpi-bubble"),
          "no bubble in the headline of a run without a pipeline")
    heads = js(d, "return Array.from(document.querySelectorAll('#summary-ranks th')).map(function (e) { return e.textContent; })")
    check(heads and not any("bubble" in h for h in heads), "no bubble column in the rank table %s" % heads)
    check(not report["warnings"], "precondition: the report has no warnings")
    warn = d.find_element("id", "summary-warnings").text
    check("Warnings (0)" in warn and "none" in warn.split("\n"), "an empty warning list reads 'none' (%r)" % warn)
    check(not no_empty_list_cells(d), "no '[]' anywhere in the summary")
    check(js(d, "return SS.formatField('warnings', [])") == "none" and js(d, "return SS.formatField('ranks', [1, 2])") == "1, 2",
          "empty lists format as 'none', short lists as text")
    d.find_element("css selector", ".tab[data-tab=timeline]").click()
    check(not d.find_element("id", "ov-bubble").is_displayed(), "no bubble overlay toggle without a pipeline")
    check(d.find_element("id", "ov-idle").is_displayed(), "the idle overlay toggle is there")
    d.save_screenshot(os.path.join(work, "viewer-headline-nopipe.png"))


def case_pipeline(exe, make_kineto, sample, work, d):
    with open(os.path.join(sample, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    inlined = open_page(exe, sample, os.path.join(work, "headline_pipeline.html"), d)
    # (compared by fields: origin_ns is beyond a JavaScript number's exact integers)
    check(inlined["run"]["step_time_ns"] == report["run"]["step_time_ns"] and
          [r["totals"]["span_ns"] for r in inlined["ranks"]] == [r["totals"]["span_ns"] for r in report["ranks"]],
          "the page inlines the sample's report.json")
    value, _ = headline_step(d)
    check(value == report["run"]["step_time_ns"], "headline step time is run.step_time_ns (%s)" % value)
    # pipeline ranks: those with bubble causes; the sample's report predates them: by stage
    causes = any("bubble_causes" in r["totals"] for r in report["ranks"])
    pipe = [r["totals"] for r in report["ranks"]
            if ("bubble_causes" in r["totals"] if causes else r.get("pipeline_stage") is not None)]
    check(len(pipe) == 4, "precondition: 4 pipeline ranks in the report")
    want = "%.1f %% / %.1f %%" % (100 * sum(t["bubble_ns"] for t in pipe) / sum(t["span_ns"] for t in pipe),
                                  100 * report["run"]["schedule"]["bubble_theory_ratio"])
    got = d.find_element("css selector", "#kpi-bubble .kpi-value").text
    check(got == want, "bubble / theory of the pipeline ranks (%s == %s)" % (got, want))
    heads = js(d, "return Array.from(document.querySelectorAll('#summary-ranks th')).map(function (e) { return e.textContent; })")
    check(any(h.startswith("bubble") for h in heads), "the rank table keeps bubble columns with a pipeline")
    check(not no_empty_list_cells(d), "no '[]' anywhere in the summary")
    d.find_element("css selector", ".tab[data-tab=timeline]").click()
    check(d.find_element("id", "ov-bubble").is_displayed(), "the bubble overlay toggle is there with a pipeline")
    # the same ranks with the report of this analyzer (bubble causes on pipeline ranks)
    fresh = os.path.join(work, "headline_pipeline_fresh")
    os.makedirs(fresh, exist_ok=True)
    for n in os.listdir(sample):
        if n.endswith(".trace.zst"):
            with open(os.path.join(sample, n), "rb") as a, open(os.path.join(fresh, n), "wb") as b:
                b.write(a.read())
    report = open_page(exe, fresh, os.path.join(work, "headline_pipeline_fresh.html"), d)
    value, _ = headline_step(d)
    check(value == report["run"]["step_time_ns"], "fresh report: headline step time is run.step_time_ns (%s)" % value)
    pipe = [r["totals"] for r in report["ranks"] if "bubble_causes" in r["totals"]]
    check(len(pipe) == 4, "fresh report: bubble causes on the 4 pipeline ranks")
    want = "%.1f %% / %.1f %%" % (100 * sum(t["bubble_ns"] for t in pipe) / sum(t["span_ns"] for t in pipe),
                                  100 * report["run"]["schedule"]["bubble_theory_ratio"])
    got = d.find_element("css selector", "#kpi-bubble .kpi-value").text
    check(got == want, "fresh report: bubble / theory of the pipeline ranks (%s == %s)" % (got, want))


CASES = {"nopipe": case_nopipe, "pipeline": case_pipeline}


def main():
    exe, make_kineto, sample, work, case = sys.argv[1:6]
    os.makedirs(work, exist_ok=True)
    d = harness.browser()
    try:
        CASES[case](exe, make_kineto, sample, work, d)
        errs = harness.console_errors(d)
        check(not errs, "no console errors %s" % errs)
    except Exception:
        try:
            d.save_screenshot(os.path.join(work, "viewer-headline-%s-failure.png" % case))
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
