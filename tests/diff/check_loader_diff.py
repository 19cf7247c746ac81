#!/usr/bin/env python3
"""check_loader_diff.py STEPSCOPE STEPSCOPE_GEN WORKDIR — `stepscope diff` of
two generated training loops (tests/gen/gen_iter.c) where only the data
loader changes: 300 us of loading per iteration in A, 100 us in B, the
device work identical. The diff must report the step time (the iteration
period) falling by exactly what the generator's truth says, with a
"better" verdict, and the compute unchanged. The generator prints its
expected median step time (gen_expect, brute force). What changed the step time
(step_time_parts, issue 30 §2): the parts add up to the change, and its first and whole
part is data loading, in the JSON, the text and the Markdown summary alike."""
import json
import os
import shutil
import subprocess
import sys

exe, gen, work = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
fail = 0


def check(cond, what):
    global fail
    if not cond:
        print("FAILED:", what)
        fail += 1


def make(name, load_us):
    path = work + "/" + name
    out = subprocess.run([gen, path, "--iter", "--ranks", "2", "--steps", "8", "--iter-comm",
                          "--load-us", str(load_us)], check=True, capture_output=True, text=True).stdout
    truth = dict(line.split()[0:2] for line in out.splitlines() if line.startswith("step_time_median"))
    return path, int(truth["step_time_median"])


a, ta = make("loader_slow", 300)
b, tb = make("loader_fast", 100)
check(ta - tb == 200_000, "generator: the loader change is 200 us per iteration (%d -> %d)" % (ta, tb))
out = work + "/diff.json"
r = subprocess.run([exe, "diff", a, b, "--json", out], capture_output=True, text=True)
check(r.returncode == 0, "diff exit code %d: %s" % (r.returncode, r.stderr))
d = json.load(open(out))
st = d["headline"]["step_time"]
check(st["a"]["median"] == ta and st["b"]["median"] == tb,
      "step time %s -> %s, expected %d -> %d" % (st["a"]["median"], st["b"]["median"], ta, tb))
check(st["abs_change"] == tb - ta, "step time change %s" % st["abs_change"])
check(abs(st["rel_change"] - (tb - ta) / ta) < 1e-8, "relative change %s" % st["rel_change"])
check(st["noise"] is False, "the step-time change is beyond noise")
check(d["headline"]["compute"]["abs_change"] == 0, "compute unchanged")
check(any(s.startswith("step time fell") and "better" in s for s in d["findings"]),
      "a 'step time fell ... better' finding: %s" % d["findings"])
check(r.stdout.count("better") >= 1, "the text says better")
parts = d["step_time_parts"]
check(parts is not None and parts["change_ns"] == tb - ta,
      "step_time_parts: the mean step changed by %s, expected %d" % (parts and parts["change_ns"], tb - ta))
if parts:
    top = parts["parts"][0]
    check(top["part"] == "idle.data_loading" and top["change_ns"] == tb - ta and top["share"] == 1,
          "the first part is all of the change, data loading: %s" % top)
    check(sum(x["change_ns"] for x in parts["parts"]) == parts["change_ns"],
          "the parts add up to the change: %s" % parts["parts"])
section = r.stdout.split("== what changed the step time", 1)[-1].splitlines()
check(len(section) > 2 and section[2].startswith("idle: data loading"),
      "the text section lists data loading first: %s" % section[:3])
md = subprocess.run([exe, "diff", a, b, "--markdown", "-"], capture_output=True, text=True).stdout
first = md.split("**What changed the step time**", 1)[-1].splitlines()
check(len(first) > 1 and first[1].startswith("- idle: data loading"),
      "the Markdown lists data loading first: %s" % first[:2])
shutil.rmtree(work, ignore_errors=True)
sys.exit(1 if fail else 0)
