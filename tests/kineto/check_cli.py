#!/usr/bin/env python3
"""check_cli.py STEPSCOPE MAKE_KINETO WORKDIR — generates a 4-rank gzip Kineto
run (CUDA graphs, kernels without correlation, ts relative to
baseTimeNanoseconds) and checks `stepscope analyze --json` against the
values the generator implies, then `stepscope export`, a single file, a
malformed rank, NCCL metadata found only on record_param_comms CPU ops
(the same collectives as when the kernels carry it), and the same report
whichever way gzip is read (STEPSCOPE_KINETO_GZIP)."""
import json
import os
import shutil
import subprocess
import sys

exe, gen, work = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
run = os.path.join(work, "run")
subprocess.run([sys.executable, gen, run, "--ranks", "4", "--steps", "3", "--gzip", "--graphs",
                "--missing-corr", "2", "--base-ns", "--jitter-us", "0"], check=True)
out = os.path.join(work, "report.json")
subprocess.run([exe, "analyze", run, "--json", out, "--quiet"], check=True)
rep = json.load(open(out))
fail = 0


def check(cond, what):
    global fail
    if not cond:
        print("FAILED:", what)
        fail += 1


check(len(rep["ranks"]) == 4, "4 ranks")
for r in rep["ranks"]:
    steps = r["steps"]
    check(len(steps) == 3, "3 steps on rank %d" % r["rank"])
    for s in steps[1:]:
        # per step (generator, overlap on, graphs): compute = 8*(300+50) + 3*30 + 8*600 + 200 us
        check(s["compute_ns"] == 7_890_000, "compute of rank %d step %s: %s" % (r["rank"], s["step"], s["compute_ns"]))
        # comm = 8 tp all-reduces * 40 us + 4 dp buckets * 500 us
        check(s["comm_ns"] == 2_320_000, "comm %s" % s["comm_ns"])
        # exposed: tp (forward) + the last bucket after backward
        check(s["exposed_comm_ns"] == 820_000, "exposed comm %s" % s["exposed_comm_ns"])
        check(s["compute_ns"] + s["exposed_comm_ns"] + s["exposed_mem_ns"] + s["idle_ns"] == s["span_ns"],
              "closed accounting")
trace = os.path.join(work, "trace.json")
subprocess.run([exe, "export", run, "-o", trace], check=True, stdout=subprocess.DEVNULL)
ev = json.load(open(trace))["traceEvents"]
check(any(e.get("args", {}).get("category") == "comm" for e in ev), "comm events in the export")
# one file given explicitly, any name ending in .json.gz
single = os.path.join(work, "trace_rank2.json.gz")
shutil.copy(os.path.join(run, "rank-2.json.gz"), single)
r = subprocess.run([exe, "analyze", single, "--json", "-"], capture_output=True, text=True)
check(r.returncode == 0 and json.loads(r.stdout)["ranks"][0]["rank"] == 2, "single file, rank 2")
# a malformed file in a run: the rank is skipped with a warning naming the offset
bad = os.path.join(work, "bad")
os.makedirs(bad)
shutil.copy(os.path.join(run, "rank-0.json.gz"), bad)
with open(os.path.join(bad, "rank-1.json"), "w") as f:
    f.write('{"traceEvents": [{"ph": "X", "ts": 1.5')
r = subprocess.run([exe, "analyze", bad], capture_output=True, text=True)
check(r.returncode == 0 and "rank-1.json: byte " in r.stdout + r.stderr, "bad rank named with offset:\n" + r.stdout[-800:] + r.stderr)
# NCCL metadata only on record_param_comms CPU ops (older PyTorch): joined to
# the kernels through the launch call, the same collectives as when the
# kernels carry it themselves
pc = os.path.join(work, "param_comms")
subprocess.run([sys.executable, gen, pc, "--ranks", "4", "--steps", "3", "--param-comms",
                "--jitter-us", "0"], check=True)
plain = os.path.join(work, "kernel_args")
subprocess.run([sys.executable, gen, plain, "--ranks", "4", "--steps", "3", "--jitter-us", "0"], check=True)
reps = []
for d in (plain, pc):
    o = os.path.join(work, os.path.basename(d) + ".json")
    subprocess.run([exe, "analyze", d, "--json", o, "--quiet"], check=True)
    reps.append(json.load(open(o)))
check(reps[0]["collectives"]["summary"] and reps[0]["collectives"] == reps[1]["collectives"],
      "collectives from record_param_comms:\n%s\n%s" % (reps[0]["collectives"], reps[1]["collectives"]))
for a, b in zip(reps[0]["ranks"], reps[1]["ranks"]):
    check(a["collectives"] == b["collectives"] and a["comm_ops_by_evidence"] == b["comm_ops_by_evidence"] > 0,
          "rank %d collectives: %s vs %s" % (a["rank"], a["collectives"], b["collectives"]))
    check(not any("record_param_comms" in w for w in b.get("warnings", [])), "no join warning: %s" % b.get("warnings"))
# every way of reading gzip (STEPSCOPE_KINETO_GZIP: whole buffer, zlib
# stream, pipe thread, automatic) gives the same report, on a run whose files
# span many of the pipe's chunks, loaded one file at a time and all at once
many = os.path.join(work, "many")
subprocess.run([sys.executable, gen, many, "--ranks", "4", "--steps", "12", "--layers", "24", "--gzip",
                "--param-comms", "--base-ns"], check=True)
outs = {}
for mode in ("whole", "stream", "pipe", "auto"):
    for threads in ("1", "4"):
        o = os.path.join(work, "many_%s_%s.json" % (mode, threads))
        env = dict(os.environ, STEPSCOPE_KINETO_GZIP=mode)
        subprocess.run([exe, "analyze", many, "--threads", threads, "--json", o, "--quiet"], check=True, env=env)
        outs[(mode, threads)] = open(o).read()
base = outs[("whole", "1")]
check(json.loads(base)["ranks"] and len(json.loads(base)["ranks"]) == 4, "4 ranks read")
for k, v in outs.items():
    check(v == base, "gzip read %s with %s threads: a different report" % k)
# thread names (issue 30 §5): a string tid ("PyTorch Profiler") is shown by its name, a
# negative tid as the trace writes it, the GPU-annotation lane by what it is, never as a 64-bit
# number; the same through every reader (token by token, the fast path, the split helper)
threads = os.path.join(work, "threads.json")
evs = [{"ph": "X", "cat": "kernel", "name": "k%d" % i, "pid": 0, "tid": 7, "ts": 10 + 3 * i, "dur": 2,
        "args": {"stream": 7, "device": 0, "correlation": i + 1}} for i in range(400)]
evs += [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 5, "tid": "PyTorch Profiler",
         "ts": 5, "dur": 1300},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 5, "tid": -19360192, "ts": 20, "dur": 40},
        {"ph": "X", "cat": "gpu_user_annotation", "name": "fwd", "pid": 0, "tid": 7, "ts": 30, "dur": 50,
         "args": {"stream": 7, "device": 0}}]
with open(threads, "w") as f:
    f.write('{"schemaVersion": 1, "traceEvents": [\n' + ",\n".join(json.dumps(e) for e in evs) + "\n]}\n")
for how, extra in (("token", {"STEPSCOPE_KINETO_FAST": "off"}), ("fast", {}),
                   ("split", {"STEPSCOPE_KINETO_SPLIT": "on", "STEPSCOPE_KINETO_SPLIT_AT": "0.3",
                              "STEPSCOPE_KINETO_SPLIT_TRACE": "1"})):
    o = os.path.join(work, "threads_%s.json" % how)
    r = subprocess.run([exe, "export", threads, "-o", o], env=dict(os.environ, **extra), capture_output=True,
                       text=True)
    check(r.returncode == 0, "export %s: %s" % (how, r.stderr))
    if how == "split":
        check("used" in r.stderr, "the split helper's events were used: %s" % r.stderr)
    names = {e["args"]["name"] for e in json.load(open(o))["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    for want in ("PyTorch Profiler", "thread -19360192", "GPU annotations, stream 7"):
        check(want in names, "%s: thread name %r in %s" % (how, want, sorted(names)))
    check(not any(n.split(" ")[-1].isdigit() and len(n.split(" ")[-1]) > 12 for n in names),
          "%s: a 64-bit number as a thread name: %s" % (how, sorted(names)))
# a step that is all idle (5 us of device work in a 10 ms step) is a finding, never "nothing
# stands out" (issue 30 §5)
idle = os.path.join(work, "idle.json")
evs = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 5, "tid": 1, "ts": 0,
        "dur": 10000},
       {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 5, "tid": 1, "ts": 1, "dur": 3,
        "args": {"correlation": 1}},
       {"ph": "X", "cat": "kernel", "name": "fill", "pid": 0, "tid": 7, "ts": 5, "dur": 5,
        "args": {"stream": 7, "device": 0, "correlation": 1}}]
with open(idle, "w") as f:
    json.dump({"schemaVersion": 1, "traceEvents": evs}, f)
r = subprocess.run([exe, "analyze", idle], capture_output=True, text=True)
findings = r.stdout.split("== findings ==")[-1]
check(r.returncode == 0 and "nothing stands out" not in findings, "an all-idle step: %s" % findings)
check("- the device is idle 100.0 % of the time, mostly other (99.9 % of idle)" in findings
      and "a step's device work spans 5.0 us of its 10.000 ms" in findings, "the idle finding: %s" % findings)
# a stub last step (a final ProfilerStep of host time only, 50 us, after steps of 8, 9 and
# 10 ms) is flagged and left out of the medians, by analyze and diff alike (issue 30 §5): the
# step time is 9 ms (with the stub the lower middle of four would be 8 ms)
stub = os.path.join(work, "stub.json")
evs, t = [], 0
for k, ms in ((1, 8), (2, 9), (3, 10)):
    d = ms * 1000
    evs += [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d" % k, "pid": 5, "tid": 1, "ts": t,
             "dur": d},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 5, "tid": 1, "ts": t + 1,
             "dur": 1, "args": {"correlation": k}},
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": t + 2, "dur": d - 3,
             "args": {"stream": 7, "device": 0, "correlation": k}}]
    t += d
evs.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "pid": 5, "tid": 1, "ts": t, "dur": 50})
with open(stub, "w") as f:
    json.dump({"schemaVersion": 1, "traceEvents": evs}, f)
r = subprocess.run([exe, "analyze", stub, "--json", "-"], capture_output=True, text=True)
run = json.loads(r.stdout)["run"] if r.returncode == 0 else {}
check(run.get("step_time_ns") == 9_000_000, "step time without the stub: %s" % run.get("step_time_ns"))
check([s["stub"] for s in run.get("steps", [])] == [False, False, False, True], "stub flags: %s" % run.get("steps"))
r = subprocess.run([exe, "analyze", stub], capture_output=True, text=True)
check("note: step 4 launched no device work (50.0 us of host time only: a stub step at the trace's end); "
      "left out of the medians" in r.stdout, "the note: %s" % r.stdout)
check(any(l.split()[:1] == ["4"] and l.rstrip().endswith("stub") for l in r.stdout.splitlines()),
      "the per-step table marks it")
r = subprocess.run([exe, "diff", stub, stub, "--json", "-"], capture_output=True, text=True)
st = json.loads(r.stdout)["headline"]["step_time"] if r.returncode == 0 else {}
check(st.get("a", {}).get("median") == 9_000_000 and st["a"]["values"] == 3,
      "diff's step time leaves the stub out too: %s" % st.get("a"))
sys.exit(1 if fail else 0)
