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


def make(name, *args, steps="4", jitter="0"):
    path = work + "/" + name
    subprocess.run([sys.executable, gen, path, "--steps", steps, "--jitter-us", jitter] + list(args), check=True,
                   stdout=subprocess.DEVNULL)
    return path


GATE = "step_time:+3%,exposed_comm:+10%,mfu:-2%,bubble:+2pt"
# generated runs differ only by their jitter: no run-to-run noise beyond it (docs/diff.md test 4)
NO_FLOOR = ("--run-noise", "0")


def gate(a, b, spec=GATE, *extra):
    """runs the gate; returns (exit code, stderr, markdown text)"""
    md = work + "/summary.md"
    r = subprocess.run([exe, "diff", a, b, "--fail-on", spec, "--markdown", md, "--quiet"] + list(extra),
                       capture_output=True, text=True)
    text = open(md).read() if r.returncode in (0, 3, 4) else ""
    return r.returncode, r.stderr, text


def diff(a, b, *extra):
    out = work + "/diff.json"
    r = subprocess.run([exe, "diff", a, b, "--json", out] + list(extra), capture_output=True, text=True)
    check(r.returncode == 0, "diff exit code %d: %s" % (r.returncode, r.stderr))
    return json.load(open(out)), r.stdout


if case == "overlap_only":
    off = make("off", "--overlap", "off")
    on = make("on", "--overlap", "on", "--gzip")
    d, text = diff(off, on, *NO_FLOOR)
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
    # a repeat of another layout than its side's first run: exit 2, said
    r = subprocess.run([exe, "diff", a, a, "--repeat-b", b, "--quiet", "--json", work + "/rep.json"],
                       capture_output=True, text=True)
    check(r.returncode == 2 and "--repeat-b %s is not a run of %s's configuration: world size differs (4 vs 2)"
          % (b, a) in r.stderr, "repeat of another layout: exit %d, %s" % (r.returncode, r.stderr.strip()))
elif case == "usage":
    check(subprocess.run([exe, "diff"], capture_output=True).returncode == 2, "no args -> 2")
    check(subprocess.run([exe, "diff", "a", "b", "--bogus", "1"], capture_output=True).returncode == 2, "bad option")
    r = subprocess.run([exe, "diff", "--help"], capture_output=True, text=True)
    check(r.returncode == 0 and "--json" in r.stdout, "--help")
    r = subprocess.run([exe, "diff", work + "/nope", work + "/nope2"], capture_output=True, text=True)
    check(r.returncode == 1 and "nope" in r.stderr, "missing run -> 1")
elif case == "gate":
    # A/A: the same configuration generated twice with different jitter seeds: pass (or at
    # worst undecided), never a failure
    a1 = make("a1", "--seed", "1", steps="8", jitter="20")
    a2 = make("a2", "--seed", "2", steps="8", jitter="20")
    rc, err, md = gate(a1, a2)
    check(rc == 0, "A/A passes the gate: exit %d %s" % (rc, err))
    check("### stepscope diff: pass (0 of 4 thresholds crossed)" in md, "markdown says pass: %s" % md[:200])
    d, _ = diff(a1, a2)
    check(all(m["verdict"] in ("noise", "same", None) for m in d["headline"].values()),
          "A/A verdicts: %s" % {k: m["verdict"] for k, m in d["headline"].items()})
    # an injected regression: overlap turned off (+17 % step time, exposed comm x2.8), with a
    # between-run floor of 5 % given (the default, 30 %, cannot tell it: see below)
    off = make("off", "--seed", "3", "--overlap", "off", steps="8", jitter="20")
    rc, err, md = gate(a1, off, GATE, "--run-noise", "5")
    check(rc == 3, "regression fails the gate with 3: exit %d" % rc)
    check("2 of 4 thresholds crossed" in err and "gate step_time +3%: FAIL" in err, "stderr: %s" % err)
    check("### stepscope diff: FAIL (2 of 4 thresholds crossed)" in md, "markdown headline")
    check("| step_time |" in md and "**FAIL** (+3%)" in md and "**WORSE**" in md, "markdown table")
    check("every rank alike (4 ranks): step span" in md, "markdown top causes")
    check("**Reproduce**" in md and "stepscope diff %s %s --fail-on %s --run-noise 5" % (a1, off, GATE) in md,
          "markdown reproduce line")
    check("Noise floor: run-to-run floor 5 % (--run-noise), one run per side." in md, "floor said: %s" % md)
    # real but within the thresholds, absolute units, and the other direction: pass
    rc, err, _ = gate(a1, off, "step_time:+20%,exposed_comm:+2ms", *NO_FLOOR)
    check(rc == 0, "within thresholds: exit %d %s" % (rc, err))
    rc, err, _ = gate(a1, off, "exposed_comm:+1.4ms", *NO_FLOOR)
    check(rc == 3, "absolute threshold crossed (+1.5 ms > 1.4 ms): exit %d" % rc)
    rc, err, _ = gate(off, a1)
    check(rc == 0, "an improvement passes: exit %d" % rc)
    # ratio thresholds in points: overlap fell by 64.6 points (beyond the default 30 pt floor)
    rc, err, _ = gate(a1, off, "overlap:-60pt")
    check(rc == 3, "overlap -60pt crossed: exit %d %s" % (rc, err))
    rc, err, _ = gate(a1, off, "overlap:-70pt")
    check(rc == 0, "overlap -70pt not crossed: exit %d" % rc)
    # the between-run floor with one run per side. The default (30 % of A's step time) cannot
    # tell the +17 % from how separate runs of one configuration differ: undecided (exit 4),
    # and the outputs say which floor was used
    rc, err, md = gate(a1, off)
    check(rc == 4 and "gate step_time +3%: undecided (noise)" in err, "default floor: exit %d %s" % (rc, err))
    check("Noise floor: run-to-run floor 30 %: the default for one run per side; --run-noise PCT sets it, "
          "--repeat-a/-b measure it." in md, "markdown says the default floor: %s" % md)
    d, text = diff(a1, off)
    st = d["headline"]["step_time"]
    check(d["run_noise"] == {"source": "default", "floor": 0.3}, "JSON run_noise %s" % d.get("run_noise"))
    check(st["why"] == "run_noise" and st["run_floor"] == round(0.3 * st["a"]["median"]),
          "step_time why %s, run_floor %s" % (st["why"], st["run_floor"]))
    check("noise floor: run-to-run floor 30 %" in text and "within the between-run noise floor" in text
          and "step_time +1" in text, "text says the floor: %s" % text)
    # a floor given larger than the change: undecided too; a large regression (kernels 2x as
    # long) exceeds the default floor: FAIL
    rc, err, _ = gate(a1, off, GATE, "--run-noise", "20")
    check(rc == 4, "--run-noise 20 against +17 %%: exit %d" % rc)
    slow = make("slow", "--seed", "4", "--scale", "2", steps="8", jitter="20")
    rc, err, md = gate(a1, slow)
    check(rc == 3 and "gate step_time +3%: FAIL (WORSE)" in err, "2x kernels, default floor: exit %d %s" % (rc, err))
    # three runs per side: the floor is measured, and the +17 % is real
    reps_a = [make("a%d" % i, "--seed", str(10 + i), steps="8", jitter="20") for i in (3, 4)]
    reps_b = [make("off%d" % i, "--seed", str(20 + i), "--overlap", "off", steps="8", jitter="20") for i in (3, 4)]
    rep_args = sum((["--repeat-a", r] for r in reps_a), []) + sum((["--repeat-b", r] for r in reps_b), [])
    rc, err, md = gate(a1, off, GATE, *rep_args)
    check(rc == 3, "3 runs per side, +17 %%: exit %d %s" % (rc, err))
    check("Noise floor: run-to-run noise measured from 3 + 3 runs (step time: A's runs" in md, "measured: %s" % md)
    rc, err, md = gate(a1, a2, GATE, *(["--repeat-a", reps_a[0], "--repeat-b", reps_a[1]]))
    check(rc in (0, 4), "A/A with 2 runs per side never fails: exit %d" % rc)
    # --run-noise takes a plain percentage
    for bad in ("-5", "abc", "5.", "1e2", "2000", "nan"):
        r = subprocess.run([exe, "diff", a1, a2, "--run-noise", bad], capture_output=True, text=True)
        check(r.returncode == 2 and "bad --run-noise" in r.stderr, "--run-noise %s: %d %s" % (bad, r.returncode, r.stderr))
    # too few steps to judge a +17 % change: undecided (exit 4), never a failure, never a pass
    one_a = make("one_a", "--seed", "1", steps="1")
    one_b = make("one_b", "--seed", "3", "--overlap", "off", steps="1")
    rc, err, md = gate(one_a, one_b)
    check(rc == 4 and "gate step_time +3%: undecided (unknown)" in err
          and "undecided: 2 of 4 thresholds exceeded by a change the noise test cannot call real" in err,
          "one step per side: exit %d %s" % (rc, err))
    check("### stepscope diff: undecided (0 of 4 thresholds crossed; 2 exceeded by a change that cannot be "
          "told from noise)" in md, "markdown headline says undecided: %s" % md[:300])
    check("| step_time |" in md and "| unknown | **undecided** (+3%) |" in md, "markdown table: %s" % md)
    # what an undecided gate counts as: --undecided pass (0) or fail (3), said in the title
    rc, err, md = gate(one_a, one_b, GATE, "--undecided", "pass")
    check(rc == 0 and "(counted as pass: --undecided pass)" in err, "--undecided pass: exit %d %s" % (rc, err))
    check("### stepscope diff: undecided, counted as pass (--undecided pass) (0 of 4" in md, "title: %s" % md[:200])
    rc, err, md = gate(one_a, one_b, GATE, "--undecided", "fail")
    check(rc == 3 and "(counted as fail: --undecided fail)" in err, "--undecided fail: exit %d %s" % (rc, err))
    check("--undecided fail" in md.split("**Reproduce**")[-1], "reproduce line keeps --undecided")
    # within the thresholds, a change too small to matter passes even when it cannot be judged
    rc, err, md = gate(one_a, one_b, "step_time:+30%")
    check(rc == 0 and "gate step_time +30%: pass (unknown)" in err, "small unknown change: exit %d %s" % (rc, err))
    # a real failure wins over an undecided threshold; --undecided pass does not hide it
    rc, err, md = gate(a1, off, GATE, "--undecided", "pass", "--run-noise", "5")
    check(rc == 3, "real regression with --undecided pass: exit %d" % rc)
    # --undecided takes pass or fail, and only with --fail-on
    r = subprocess.run([exe, "diff", a1, a2, "--fail-on", GATE, "--undecided", "maybe"], capture_output=True,
                       text=True)
    check(r.returncode == 2 and "bad --undecided 'maybe': want pass or fail" in r.stderr, r.stderr)
    r = subprocess.run([exe, "diff", a1, a2, "--undecided", "pass"], capture_output=True, text=True)
    check(r.returncode == 2 and "give --fail-on too" in r.stderr, r.stderr)
elif case == "gate_parse":
    a = make("a")
    bad = {
        "step_time": "step_time", "step_time:3": "step_time:3", "step_time:+3": "step_time:+3",
        "steptime:+3%": "steptime:+3%", "step_time:-3%": "step_time:-3%", "mfu:+2%": "mfu:+2%",
        "step_time:+3pt": "step_time:+3pt", "overlap:-1ms": "overlap:-1ms", "step_time:+x%": "step_time:+x%",
        "step_time:+3.%": "step_time:+3.%", "step_time:+3 %": "step_time:+3 %", "step_time:0x10%": "step_time:0x10%",
        "step_time:nan%": "step_time:nan%", "step_time:+3%,step_time:+4%": "step_time:+4%",
        "step_time:+3%,,idle:+1ms": ",,", "idle:+1ms,": "idle:+1ms,", "": "--fail-on", "idle:+1mss": "idle:+1mss",
    }
    for spec, token in bad.items():
        r = subprocess.run([exe, "diff", a, a, "--fail-on", spec], capture_output=True, text=True)
        check(r.returncode == 2 and token in r.stderr, "--fail-on %r: exit %d, stderr %r" % (spec, r.returncode, r.stderr))
    for spec in ("step_time:3%", "idle:+1.5ms,overlap:-5pt", "exposed_comm:+250us,bubble:+2pt,mfu:-0.5pt",
                 "comm:+1s, exposed_mem:+10ns", "overlap_ratio:-1%,bubble_ratio:+0pt"):
        r = subprocess.run([exe, "diff", a, a, "--fail-on", spec, "--quiet"], capture_output=True, text=True)
        check(r.returncode == 0, "--fail-on %r accepted: exit %d %s" % (spec, r.returncode, r.stderr))
sys.exit(1 if fail else 0)
