#!/usr/bin/env python3
"""test_op_views.py — the Summary's module tree and memory section of a PyTorch run (issue 33
§2, §3; viewer/js/op_views.js), written with `stepscope view RUN --html` and opened in headless
Chromium.

  test_op_views.py STEPSCOPE_EXE TORCH_TRACE SAMPLE_RUN WORK_DIR

1. A one-step Kineto trace of an H100 written here, known times: Block_0 holds Linear_0
   (aten::addmm, a 4 us kernel) and an aten::bmm of its own (3 us); an aten::mul outside every
   module (1 us); CUDA [memory] events with known totals. The tree shows Block_0 > Linear_0 with
   the device times of their kernels, the no-module row, and a total equal to the report's
   kernel table; the page's figures are modules.json's; collapsing Block_0 hides Linear_0,
   expanding shows it again. The memory chart of cuda:0 draws allocated and reserved, one point
   per event, the peak marked at memory.json's peak; the live-at-peak and step tables list
   memory.json's rows.
2. TORCH_TRACE (a real torch CPU trace, with_modules and profile_memory): a row per module of
   modules.json, the top-level rows and the no-module row add up to the total, the memory chart
   drawn with its peak.
3. The trainer sample (no PyTorch trace): neither section.

Exit 0 pass, 1 fail, 77 skip (no Chromium/Selenium).
"""

import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402


def X(cat, name, ts, dur, tid=1, pid=1, args=None):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts / 1000, "dur": dur / 1000,
            "args": args or {}}


def MEM(ts, nbytes, allocated, reserved, addr):
    return {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts / 1000, "s": "t",
            "args": {"Total Reserved": reserved, "Total Allocated": allocated, "Bytes": nbytes, "Addr": addr,
                     "Device Type": 1, "Device Id": 0}}


MEMORY = [MEM(1_200, 1 << 20, (1 << 20) + 4096, 2 << 20, 0x1000), MEM(5_200, 3 << 20, (4 << 20) + 4096, 6 << 20, 0x9000),
          MEM(9_700, -(1 << 20), (3 << 20) + 4096, 6 << 20, 0x1000), MEM(9_800, 512, (3 << 20) + 4608, 6 << 20, 0x2000)]


def write_run(run):
    os.makedirs(run, exist_ok=True)
    f32 = "float"
    ev = [X("user_annotation", "ProfilerStep#1", 0, 100_000),
          X("python_function", "nn.Module: Block_0", 500, 9_000),
          X("python_function", "nn.Module: Linear_0", 800, 3_000),
          X("cpu_op", "aten::addmm", 1_000, 2_000, args={"Input Dims": [[512], [1024, 256], [256, 512], [], []],
                                                         "Input type": [f32, f32, f32, "Scalar", "Scalar"]}),
          X("cuda_runtime", "cudaLaunchKernel", 1_500, 100, args={"correlation": 1}),
          X("kernel", "gemm_a", 10_000, 4_000, tid=7, pid=0, args={"correlation": 1, "stream": 7, "device": 0}),
          X("cpu_op", "aten::bmm", 5_000, 2_000, args={"Input Dims": [[8, 64, 32], [8, 32, 64]],
                                                       "Input type": [f32, f32]}),
          X("cuda_runtime", "cudaLaunchKernel", 5_500, 100, args={"correlation": 2}),
          X("kernel", "gemm_b", 20_000, 3_000, tid=7, pid=0, args={"correlation": 2, "stream": 7, "device": 0}),
          X("cpu_op", "aten::mul", 9_600, 300, args={"Input Dims": [[1024, 512], [1024, 512]],
                                                     "Input type": [f32, f32]}),
          X("cuda_runtime", "cudaLaunchKernel", 9_650, 100, args={"correlation": 3}),
          X("kernel", "elementwise", 30_000, 1_000, tid=7, pid=0, args={"correlation": 3, "stream": 7, "device": 0})]
    with open(os.path.join(run, "rank-0.json"), "w") as f:
        json.dump({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
                   "distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": ev + MEMORY}, f)


def open_summary(exe, run, page, d):
    r = subprocess.run([exe, "view", run, "--html", page], capture_output=True, text=True)
    check(r.returncode == 0, "view --html wrote the page (%r)" % r.stderr[:300])
    d.get("file://" + os.path.abspath(page))
    harness.wait_state(d)
    d.find_element("css selector", ".tab[data-tab=summary]").click()

    def data(kind):
        return d.execute_script("var e = document.getElementById('data-a-%s');"
                                " return e ? JSON.parse(e.textContent) : null" % kind)
    return data("report"), data("modules"), data("memory")


def tree_rows(d):
    return d.execute_script(
        "return Array.from(document.querySelectorAll('#module-tree tbody tr')).map(function (tr) {"
        " return {module: tr.dataset.module, time_ns: +tr.dataset.timeNs, self_ns: +tr.dataset.selfNs,"
        " flops: tr.dataset.flops === '' ? null : +tr.dataset.flops, hidden: tr.hidden,"
        " cells: Array.from(tr.cells).map(function (c) { return c.textContent; })}; })")


def closing_ns(d, cls):
    return d.execute_script("var tr = document.querySelector('#module-tree tfoot tr.%s'); return tr ? +tr.dataset.timeNs : null" % cls)


def check_tree_is_the_file(d, modules):
    rows = tree_rows(d)
    check([r["module"] for r in rows] == [m["module"] for m in modules["rows"]],
          "a row per module, in the file's order: %r" % [r["module"] for r in rows])
    for r, m in zip(rows, modules["rows"]):
        check(r["time_ns"] == m["time_ns"] and r["self_ns"] == m["self_ns"] and r["flops"] == m["flops"],
              "%s: the file's figures (%r vs %r)" % (m["module"], r, m))
        check(r["cells"][1] == str(m["calls"]), "%s: calls shown %r" % (m["module"], r["cells"]))
    top = sum(m["time_ns"] for m in modules["rows"] if m["depth"] == 0)
    check(closing_ns(d, "module-none") == modules["no_module_ns"], "the no-module row is the file's")
    check(closing_ns(d, "module-total") == modules["time_total_ns"] == top + modules["no_module_ns"],
          "top-level modules + no module = the total (%r + %r vs %r)" % (top, modules["no_module_ns"],
                                                                         modules["time_total_ns"]))
    return rows


def check_memory_chart(d, memory, device):
    dev = [x for x in memory["devices"] if x["device"] == device]
    check(len(dev) == 1, "precondition: memory.json has %s: %r" % (device, memory["devices"]))
    dev = dev[0]
    chart = d.execute_script(
        "var s = document.querySelector('#summary-memory svg.memory-chart[data-device=\"%s\"]'); if (!s) return null;"
        " var p = s.querySelector('circle.memory-peak');"
        " return {lines: Array.from(s.querySelectorAll('polyline.memory-line')).map(function (l) {"
        " return [l.dataset.what, +l.dataset.points]; }), peak: p && [+p.dataset.bytes, +p.dataset.timeNs]}" % device)
    check(chart is not None, "a memory chart for %s" % device)
    check(chart["peak"] == [dev["peak_allocated_bytes"], dev["peak_time_ns"]],
          "the peak marked at memory.json's: %r" % chart["peak"])
    live = d.execute_script("return Array.from(document.querySelectorAll('#summary-memory table.memory-live tbody tr')).length")
    check(live == len(dev["live_at_peak"]["largest"]), "a live-at-peak row per largest allocation (%d)" % live)
    steps = d.execute_script("return Array.from(document.querySelectorAll('#summary-memory table.memory-steps tbody tr')).length")
    check(steps == len(dev["steps"]), "a row per step's peak (%d)" % steps)
    return dev, chart


def main():
    exe, torch_trace, sample, work = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    run = os.path.join(work, "op_views_run")
    shutil.rmtree(run, ignore_errors=True)
    write_run(run)
    d = harness.browser()
    try:
        # 1. known device times and memory
        report, modules, memory = open_summary(exe, run, os.path.join(work, "op_views.html"), d)
        check(modules is not None and memory is not None, "the page has modules.json and memory.json")
        check(modules["time"] == "device", "device times: %r" % modules.get("time"))
        by = {m["module"]: m for m in modules["rows"]}
        check(set(by) == {"Block_0", "Block_0/Linear_0"}, "precondition: the modules %r" % list(by))
        check(by["Block_0/Linear_0"]["time_ns"] == 4000 and by["Block_0"]["time_ns"] == 7000 and
              by["Block_0"]["self_ns"] == 3000 and modules["no_module_ns"] == 1000,
              "precondition: the kernels' times by module %r" % modules)
        rows = check_tree_is_the_file(d, modules)
        kernels_total = sum(k["total_ns"] for k in report["kernels"]["rows"])
        check(modules["time_total_ns"] == kernels_total == 8000,
              "the tree's total is the kernel table's (%r vs %r)" % (modules["time_total_ns"], kernels_total))
        linear = [r for r in rows if r["module"] == "Block_0/Linear_0"][0]
        check(not linear["hidden"], "Linear_0 shown at first")
        flops = 2 * 1024 * 512 * 256 + 1024 * 512
        check(linear["cells"][7] == "%.3g" % (flops / 4000e-9 / 1e12) or float(linear["cells"][7]) == float("%.3g" % (flops / 4000e-9 / 1e12)),
              "Linear_0's TFLOP/s = its FLOPs / its time: %r" % linear["cells"])
        toggle = d.find_element("css selector", "#module-tree tr[data-module='Block_0'] .tree-toggle")
        toggle.click()
        check([r["hidden"] for r in tree_rows(d)] == [False, True], "collapsing Block_0 hides Linear_0")
        toggle.click()
        check([r["hidden"] for r in tree_rows(d)] == [False, False], "expanding Block_0 shows it again")
        dev, chart = check_memory_chart(d, memory, "cuda:0")
        check(dev["peak_allocated_bytes"] == (4 << 20) + 4096 and dev["peak_reserved_bytes"] == 6 << 20,
              "precondition: memory.json's peaks %r" % dev)
        check(sorted(chart["lines"]) == [["allocated", len(MEMORY)], ["reserved", len(MEMORY)]],
              "allocated and reserved, a point per event: %r" % chart["lines"])
        d.execute_script("document.getElementById('summary-modules').scrollIntoView()")
        d.find_element("id", "summary-modules").screenshot(os.path.join(work, "viewer-modules.png"))
        d.find_element("id", "summary-memory").screenshot(os.path.join(work, "viewer-memory.png"))

        # 2. a real torch CPU trace
        real = os.path.join(work, "op_views_torch")
        shutil.rmtree(real, ignore_errors=True)
        os.makedirs(real)
        shutil.copy(torch_trace, real)
        report, modules, memory = open_summary(exe, real, os.path.join(work, "op_views_torch.html"), d)
        check(modules and len(modules["rows"]) > 1 and memory, "the real trace has modules and memory")
        check_tree_is_the_file(d, modules)
        check_memory_chart(d, memory, "cpu")

        # 3. no PyTorch trace: no sections
        open_summary(exe, sample, os.path.join(work, "op_views_sample.html"), d)
        check(not d.find_elements("id", "summary-modules") and not d.find_elements("id", "summary-memory"),
              "no module or memory section for a stepscope run")
        errs = harness.console_errors(d)
        check(not errs, "no console errors %s" % errs)
    except Exception:
        try:
            d.save_screenshot(os.path.join(work, "viewer-op-views-failure.png"))
        except Exception:
            pass
        raise
    finally:
        d.quit()
    print("PASS op_views")


if __name__ == "__main__":
    main()
