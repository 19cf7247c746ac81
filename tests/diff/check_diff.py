#!/usr/bin/env python3
"""check_diff.py CASE STEPSCOPE MAKE_KINETO WORKDIR — one `stepscope diff`
scenario on generated Kineto runs, checked against the values the generator
implies (see make_kineto.py: per step, compute 7.8 ms; comm 2.32 ms, of which
0.82 ms stays exposed with overlap on and all of it with overlap off)."""
import json
import shutil
import subprocess
import sys

case, exe, gen, work = sys.argv[1:5]
shutil.rmtree(work, ignore_errors=True)
fail = 0


def check(cond, what):
    global fail
    if not cond:
        print("FAILED:", what)
        fail += 1


def make(name, *args):
    path = work + "/" + name
    subprocess.run([sys.executable, gen, path, "--steps", "4", "--jitter-us", "0"] + list(args), check=True)
    return path


def diff(a, b, *extra):
    out = work + "/diff.json"
    r = subprocess.run([exe, "diff", a, b, "--json", out] + list(extra), capture_output=True, text=True)
    check(r.returncode == 0, "diff exit code %d: %s" % (r.returncode, r.stderr))
    return json.load(open(out)), r.stdout


if case == "overlap_only":
    off = make("off", "--overlap", "off")
    on = make("on", "--overlap", "on", "--gzip")
    d, text = diff(off, on)
    h = d["headline"]
    check(d["schema_version"] == 1 and d["same_layout"], "schema and layout")
    check(h["step_time"]["a"]["median"] == 10_170_000 and h["step_time"]["b"]["median"] == 8_670_000,
          "step time %s -> %s" % (h["step_time"]["a"]["median"], h["step_time"]["b"]["median"]))
    check(h["exposed_comm"]["a"]["median"] == 2_320_000 and h["exposed_comm"]["b"]["median"] == 820_000,
          "exposed comm")
    check(h["exposed_comm"]["abs_change"] == -1_500_000 and h["exposed_comm"]["noise"] is False, "exposed change")
    check(abs(h["overlap_ratio"]["a"]["median"]) < 1e-12, "overlap off")
    check(abs(h["overlap_ratio"]["b"]["median"] - 1_500_000 / 2_320_000) < 1e-9, "overlap on")
    for k in ("compute", "comm", "exposed_mem", "idle"):
        check(h[k]["abs_change"] == 0, "%s unchanged" % k)
    check(h["mfu"]["a"] is None and h["mfu"]["noise"] is None, "no MFU without FLOPs metadata")
    changed = {k for k, m in h.items() if m["noise"] is False}
    check(changed == {"step_time", "exposed_comm", "overlap_ratio"}, "changed metrics: %s" % sorted(changed))
    f = d["findings"]
    check(any("exposed communication fell from 2.320 ms to 820.0 us per step" in s and "on every rank" in s
              for s in f), "finding on exposed comm: %s" % f)
    check(any(s.startswith("unchanged within step-to-step noise") for s in f), "noise finding")
    check(len(d["ranks"]) == 4 and all(r["metrics"]["exposed_comm"]["abs_change"] == -1_500_000
                                       for r in d["ranks"]), "per rank")
    check(len(d["steps"]) == 4, "steps paired")
    ar = [c for c in d["collectives"] if c["group"] == "dp_group"]
    check(len(ar) == 1 and ar[0]["op"] == "all_reduce" and ar[0]["bytes"] == (25 << 20) * 2
          and ar[0]["a"]["count_per_step"] == 8 and ar[0]["b"]["count_per_step"] == 8, "dp all-reduce matched")
    k = [x for x in d["kernels"] if x["name"].startswith("ampere_bf16")]
    check(len(k) == 1 and k[0]["time_change_per_step_ns"] == 0 and k[0]["a"]["time_per_step_ns"] == 7_200_000,
          "gemm matched, 7.2 ms per step per rank")
    check("exposed_comm" in text and "better" in text, "text report")
elif case == "self":
    a = make("a")
    d, _ = diff(a, a)
    check(all(m["abs_change"] in (0, None) for m in d["headline"].values()), "no change")
    check(all(not s.startswith(("step time", "exposed")) for s in d["findings"]), "no change findings")
    d, _ = diff(a, a, "--steps", "1:2", "--steps-b", "2:3")
    check(d["a"]["steps"] == 2 and d["b"]["steps"] == 2 and d["steps"][0]["a"]["step"] == 1
          and d["steps"][0]["b"]["step"] == 2, "step ranges")
elif case == "layout":
    a = make("four", "--ranks", "4")
    b = make("two", "--ranks", "2")
    d, text = diff(a, b)
    check(d["same_layout"] is False and "world size differs (4 vs 2)" in d["layout_note"], "layout note")
    check(d["ranks"] == [] and d["headline"]["step_time"]["a"] is not None, "aggregates only")
    check("aggregates only" in text, "said in the text")
elif case == "usage":
    check(subprocess.run([exe, "diff"], capture_output=True).returncode == 2, "no args -> 2")
    check(subprocess.run([exe, "diff", "a", "b", "--bogus", "1"], capture_output=True).returncode == 2, "bad option")
    r = subprocess.run([exe, "diff", "--help"], capture_output=True, text=True)
    check(r.returncode == 0 and "--json" in r.stdout, "--help")
    r = subprocess.run([exe, "diff", work + "/nope", work + "/nope2"], capture_output=True, text=True)
    check(r.returncode == 1 and "nope" in r.stderr, "missing run -> 1")
sys.exit(1 if fail else 0)
