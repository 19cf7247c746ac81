#!/usr/bin/env python3
"""compare_hta.py STEPSCOPE HTA_PYTHON TRACE_DIR... — runs `stepscope analyze
--json` and HTA (hta_metrics.py, under the Python that has HTA) on the same
Kineto trace directories and prints, per rank, the numbers both report:
span / kernel time, compute, idle, non-compute, overlap ratio, and the idle
breakdown. docs/hta-comparison.md explains every difference."""
import json
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))


def ms(ns):
    return "%.3f" % (ns / 1e6)


def main():
    exe, hta_py = sys.argv[1], sys.argv[2]
    for d in sys.argv[3:]:
        with tempfile.TemporaryDirectory() as tmp:
            sj, hj = os.path.join(tmp, "s.json"), os.path.join(tmp, "h.json")
            subprocess.run([exe, "analyze", d, "--json", sj, "--quiet"], check=True, stderr=subprocess.DEVNULL)
            subprocess.run([hta_py, os.path.join(here, "hta_metrics.py"), d, "--json", hj], check=True,
                           stderr=subprocess.DEVNULL)
            s, h = json.load(open(sj)), json.load(open(hj))
        print("== %s" % d)
        hover = {r["rank"]: r["comp_comm_overlap_pctg"] / 100.0 for r in h["overlap"]}
        htb = {r["rank"]: r for r in h["temporal"]}
        print("%4s | %12s %12s | %11s %11s | %11s %11s | %13s %13s | %7s %7s" % (
            "rank", "span ss", "ktime hta", "compute ss", "compute hta", "idle ss", "idle hta",
            "nonComp ss", "nonComp hta", "ovl ss", "ovl hta"))
        for r in s["ranks"]:
            t = r["totals"]
            hr = htb.get(r["rank"])
            if hr is None:
                continue
            # HTA reports these times in microseconds
            non_compute = t["busy_ns"] - t["compute_ns"]
            ovl = t["overlap_ratio"]
            print("%4d | %12s %12s | %11s %11s | %11s %11s | %13s %13s | %7s %7s" % (
                r["rank"], ms(t["span_ns"]), ms(hr["kernel_time(us)"] * 1000), ms(t["compute_ns"]),
                ms(hr["compute_time(us)"] * 1000), ms(t["idle_ns"]), ms(hr["idle_time(us)"] * 1000),
                ms(non_compute), ms(hr["non_compute_time(us)"] * 1000),
                "-" if ovl is None else "%.2f%%" % (100 * ovl),
                "%.2f%%" % (100 * hover.get(r["rank"], float("nan")))))
        # the same as shares of each tool's own window, which is what compares
        print("%4s | %11s %11s | %11s %11s | %13s %13s" % (
            "rank", "compute% ss", "compute% hta", "idle% ss", "idle% hta", "nonComp% ss", "nonComp% hta"))
        for r in s["ranks"]:
            t = r["totals"]
            hr = htb.get(r["rank"])
            if hr is None or not t["span_ns"] or not hr["kernel_time(us)"]:
                continue
            sp, hk = float(t["span_ns"]), float(hr["kernel_time(us)"])
            print("%4d | %10.2f%% %10.2f%% | %10.2f%% %10.2f%% | %12.2f%% %12.2f%%" % (
                r["rank"], 100 * t["compute_ns"] / sp, 100 * hr["compute_time(us)"] / hk,
                100 * t["idle_ns"] / sp, 100 * hr["idle_time(us)"] / hk,
                100 * (t["busy_ns"] - t["compute_ns"]) / sp, 100 * hr["non_compute_time(us)"] / hk))
        # idle breakdown: stepscope per device (and per stream), HTA per stream
        hidle = {}
        for row in h["idle"]:
            hidle.setdefault(row["rank"], {}).setdefault(row["stream"], {})[row["idle_category"]] = row["idle_time"]
        for r in s["ranks"]:
            ib = r.get("idle_breakdown", {})
            fmt = lambda c: ", ".join("%s %s" % (k[:-3], ms(v)) for k, v in c.items())  # noqa: E731
            print("  rank %d idle (ms)  stepscope device: %s" % (r["rank"], fmt(ib.get("device", {}))))
            for st in ib.get("streams", []):
                print("      stepscope stream %s: %s" % (st["stream"], fmt(st["idle"])))
            for stream, cats in sorted(hidle.get(r["rank"], {}).items()):
                print("      HTA stream %s: %s" % (stream, ", ".join("%s %.3f" % (k, v / 1000) for k, v in cats.items())))
        print()


if __name__ == "__main__":
    main()
