#!/usr/bin/env python3
"""test_roofline.py — the Summary's roofline of a PyTorch trace's ops (issue 33 §1, docs/ops.md).

  test_roofline.py STEPSCOPE_EXE SAMPLE_RUN WORK_DIR

A one-step Kineto trace of an H100 with shapes (aten::addmm bf16, aten::bmm fp32, one kernel
each, known times), written with `stepscope view RUN --html` and opened in headless Chromium:
the Summary has a roofline with one point per op of the report's mfu_from_op_flops, each at
the report's FLOPs / time (TFLOP/s) and FLOPs / bytes, one roof per dtype (bf16 and fp32); the
trainer sample (no shapes) has none.

Exit 0 pass, 1 fail, 77 skip (no Chromium/Selenium).
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402


def X(cat, name, ts, dur, tid=1, pid=1, args=None):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts / 1000, "dur": dur / 1000,
            "args": args or {}}


def write_run(run):
    os.makedirs(run, exist_ok=True)
    bf = "c10::BFloat16"
    ev = [X("user_annotation", "ProfilerStep#1", 0, 100_000),
          X("cpu_op", "aten::addmm", 1_000, 2_000, args={"Input Dims": [[512], [1024, 256], [256, 512], [], []],
                                                         "Input type": [bf, bf, bf, "Scalar", "Scalar"]}),
          X("cuda_runtime", "cudaLaunchKernel", 1_500, 100, args={"correlation": 1}),
          X("kernel", "gemm_bf16", 10_000, 4_000, tid=7, pid=0, args={"correlation": 1, "stream": 7, "device": 0}),
          X("cpu_op", "aten::bmm", 5_000, 2_000, args={"Input Dims": [[8, 64, 32], [8, 32, 64]],
                                                       "Input type": ["float", "float"]}),
          X("cuda_runtime", "cudaLaunchKernel", 5_500, 100, args={"correlation": 2}),
          X("kernel", "gemm_fp32", 20_000, 3_000, tid=7, pid=0, args={"correlation": 2, "stream": 7, "device": 0})]
    with open(os.path.join(run, "rank-0.json"), "w") as f:
        json.dump({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
                   "distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": ev}, f)


def open_summary(exe, run, page, d):
    r = subprocess.run([exe, "view", run, "--html", page], capture_output=True, text=True)
    check(r.returncode == 0, "view --html wrote the page (%r)" % r.stderr[:300])
    d.get("file://" + os.path.abspath(page))
    harness.wait_state(d)
    d.find_element("css selector", ".tab[data-tab=summary]").click()
    return d.execute_script("return JSON.parse(document.getElementById('data-a-report').textContent)")


def main():
    exe, sample, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    run = os.path.join(work, "roofline_run")
    write_run(run)
    d = harness.browser()
    try:
        report = open_summary(exe, run, os.path.join(work, "roofline.html"), d)
        m = report.get("mfu_from_op_flops") or {}
        ops = m.get("ops", [])
        check(len(ops) == 2 and {o["op"] for o in ops} == {"aten::addmm", "aten::bmm"},
              "precondition: the report's roofline ops %r" % ops)
        addmm = [o for o in ops if o["op"] == "aten::addmm"]
        check(addmm and addmm[0]["flops"] == 2 * 1024 * 512 * 256 + 1024 * 512 and addmm[0]["time_ns"] == 4000,
              "precondition: addmm's FLOPs and time %r" % addmm)
        pts = d.execute_script(
            "return Array.from(document.querySelectorAll('#summary-roofline circle.roof-point')).map(function (c) {"
            " return [c.dataset.op, +c.dataset.tflops, +c.dataset.intensity]; })")
        check(len(pts) == len(ops), "one point per op (%d vs %d)" % (len(pts), len(ops)))
        for o in ops:
            want = (o["flops"] / (o["time_ns"] * 1e-9) / 1e12, o["flops"] / o["bytes"])
            got = [p for p in pts if p[0] == o["op"]]
            check(got and abs(got[0][1] / want[0] - 1) < 1e-9 and abs(got[0][2] / want[1] - 1) < 1e-9,
                  "%s at %r, expected %r" % (o["op"], got, want))
        roofs = d.execute_script("return Array.from(document.querySelectorAll('#summary-roofline polyline.roof'))"
                                 ".map(function (p) { return p.dataset.dtype; })")
        check(sorted(roofs) == ["bf16", "fp32"], "a roof per dtype %r" % roofs)
        d.execute_script("document.getElementById('summary-roofline').scrollIntoView()")
        d.find_element("id", "summary-roofline").screenshot(os.path.join(work, "viewer-roofline.png"))
        open_summary(exe, sample, os.path.join(work, "roofline_sample.html"), d)
        check(not d.find_elements("id", "summary-roofline"), "no roofline without shapes")
        errs = harness.console_errors(d)
        check(not errs, "no console errors %s" % errs)
    except Exception:
        try:
            d.save_screenshot(os.path.join(work, "viewer-roofline-failure.png"))
        except Exception:
            pass
        raise
    finally:
        d.quit()
    print("PASS roofline")


if __name__ == "__main__":
    main()
