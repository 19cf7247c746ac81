#!/usr/bin/env python3
"""test_merge_cross.py — a pipeline run's merge after a second map round reads no rank file for
the pipeline ranks' metrics or bubble transfers (issue 35, docs/scale.md "A second map round"):
`analyze --part K/N --partial` (round 1), `merge PARTIALS --cross-out DIR` (the cross-rank
inputs of each part's pipeline ranks: pipeline wait ends, transfers, matched sends, clock), then
`analyze --part K/N --partial --cross DIR/cross-K-of-N.ssx` (round 2: those ranks' metrics,
transfers and late-upstream waits made where the files are) and `merge` of the round-2
partials. On generated `--scale` pipelines with stragglers (PP 4 and PP 2), trainer DP x PP and
interleaved TP x PP runs, the trainer's 1F1B sample and a torch pipeline's Kineto traces:

- the report is `analyze`'s byte for byte (text and JSON) and STEPSCOPE_SAY_READS=1 counts no
  read for the per-rank metrics or the bubble's transfers (main's merge read every pipeline
  rank for both, and has no --cross-out), and fewer for the culprit walk's rounds than
  `analyze --low-memory` when that reads any (round 2 answers the walk's direct spans and
  between-steps gaps: only the chase's questions are read);
- with every rank file moved away, the merge run again and again, each time given back the
  one file its error names, never names the metrics or the transfers, and reports the same;
- a cross file of another part or another run is refused by the map step with a message that
  says so, and so are options that do not go together; round 2 made with other --steps than
  the cross files' partials is taken for the metrics, read for the transfers, and reports as
  `analyze --steps`; a round-2 partial whose late-upstream wait names a rank the run lacks is
  read for that rank's transfers, not followed; round 2 of a twin run (same file names, another seed) made with this run's cross
  files is taken only where the inputs hash the same: the merge reads the others, and its
  report is still the twin's `analyze`.

usage: test_merge_cross.py STEPSCOPE STEPSCOPE_GEN STEPSCOPE_TRAIN [RUN_DIR...]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

stepscope, gen, train = sys.argv[1:4]
given_runs = sys.argv[4:]
failures = []
NOT_READ_FOR = ("for the per-rank metrics", "for the bubble's transfers")


def run_cmd(args, env=None):
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=dict(os.environ, **(env or {})))


def report(args, json_path, env=None):
    """(exit status, text report, JSON report bytes, stderr) of an analyze or merge."""
    p = run_cmd([stepscope, *args, "--json", json_path], env)
    data = b""
    if os.path.exists(json_path):
        with open(json_path, "rb") as f:
            data = f.read()
        os.remove(json_path)
    return p.returncode, p.stdout, data, p.stderr.decode()


def rank_files(run):
    return sorted(f for f in os.listdir(run) if f.startswith("rank"))


def map_round(name, run, tmp, n, cross_dir=None):
    """The partials of parts 0..n-1 (round 2 when cross_dir is given), or None."""
    parts = []
    for k in range(n):
        out = os.path.join(tmp, f"{name}-{'r2' if cross_dir else 'r1'}-{k}.ssp")
        args = [stepscope, "analyze", run, "--part", f"{k}/{n}", "--partial", out]
        if cross_dir:
            args += ["--cross", os.path.join(cross_dir, f"cross-{k}-of-{n}.ssx")]
        p = run_cmd(args)
        if p.returncode != 0:
            failures.append(f"{name}: {' '.join(args[1:])}: {p.stderr.decode().strip()}")
            return None
        parts.append(out)
    return parts


def two_rounds(name, run, tmp, n):
    """Round 1, the cross files, round 2: (round-2 partials, cross dir) or None."""
    parts = map_round(name, run, tmp, n)
    if parts is None:
        return None
    cross = os.path.join(tmp, f"{name}-cross")
    p = run_cmd([stepscope, "merge", *parts, "--cross-out", cross])
    if p.returncode != 0 or p.stdout:
        failures.append(f"{name}: merge --cross-out: {p.returncode} {p.stderr.decode().strip()}")
        return None
    second = map_round(name, run, tmp, n, cross)
    return (second, cross) if second else None


def culprit_reads(said):
    """The rank files a STEPSCOPE_SAY_READS line counts for the culprit walk's rounds."""
    m = re.search(r"(\d+) for the culprit walk's rounds", said)
    return int(m.group(1)) if m else 0


def check_run(name, run, tmp):
    n = min(3, len(rank_files(run)))
    expected = report(["analyze", run], os.path.join(tmp, "a.json"))
    if expected[0] != 0:
        failures.append(f"{name}: analyze failed: {expected[3]}")
        return None
    made = two_rounds(name, run, tmp, n)
    if not made:
        return None
    parts, cross = made
    said = report(["merge", *parts], os.path.join(tmp, "m.json"), {"STEPSCOPE_SAY_READS": "1"})
    if said[:3] != expected[:3]:
        failures.append(f"{name}: the merge of round 2 differs from analyze")
    for purpose in NOT_READ_FOR:
        if purpose in said[3]:
            failures.append(f"{name}: the merge read ranks {purpose}: {said[3].strip()}")
    # the culprit walk's direct spans and between-steps gaps come with round 2's results: its
    # rounds read only for the chase's questions, fewer files than the bounded mode reads
    bounded = run_cmd([stepscope, "analyze", run, "--low-memory"], {"STEPSCOPE_SAY_READS": "1"})
    walk_merge, walk_bounded = culprit_reads(said[3]), culprit_reads(bounded.stderr.decode())
    if walk_bounded and walk_merge >= walk_bounded:
        failures.append(f"{name}: the merge read {walk_merge} rank files for the culprit walk, "
                        f"the bounded mode {walk_bounded}")
    away = os.path.join(tmp, f"{name}-away")
    os.makedirs(away)
    files = rank_files(run)
    for f in files:
        shutil.move(os.path.join(run, f), os.path.join(away, f))
    back, got = [], None
    for _ in range(len(files) + 1):
        got = report(["merge", *parts], os.path.join(tmp, "m.json"))
        if got[0] == 0:
            break
        m = re.search(r"rank file (\S+) \(rank \d+\) cannot be read \([^)]*\): the merge needs "
                      r"its events for ([^(]+) \(", got[3])
        if not m or os.path.basename(m.group(1)) not in files:
            failures.append(f"{name}: a merge without the rank files said: {got[3].strip()}")
            break
        if any(m.group(2).startswith(p[len("for "):]) for p in NOT_READ_FOR):
            failures.append(f"{name}: the merge needs {m.group(1)} for {m.group(2).strip()}")
        f = os.path.basename(m.group(1))
        shutil.move(os.path.join(away, f), os.path.join(run, f))
        back.append(f)
    if got[0] == 0 and got[:3] != expected[:3]:
        failures.append(f"{name}: the merge with {len(back)} of {len(files)} files differs")
    print(f"{name}: the merge of round 2 read {len(back)} of {len(files)} rank files: "
          f"{said[3].strip()} (the bounded mode: {walk_bounded} for the culprit walk)")
    for f in rank_files(away):
        shutil.move(os.path.join(away, f), os.path.join(run, f))
    return cross, n, parts, expected


def check_damaged_wait(name, parts, expected, tmp):
    """A round-2 partial whose last rank's last late-upstream wait names a rank the run lacks
    (its last 4 bytes before the end mark: the wait's sender), the inputs' hashes intact: the
    merge does not follow it (it read out of bounds before), reads that rank for its transfers
    instead, and reports as `analyze`."""
    with open(parts[-1], "rb") as f:
        data = bytearray(f.read())
    data[-12:-8] = (0xfffffff0).to_bytes(4, "little")
    bad = os.path.join(tmp, f"{name}-damaged-wait.ssp")
    with open(bad, "wb") as f:
        f.write(data)
    got = report(["merge", *parts[:-1], bad], os.path.join(tmp, "m.json"),
                 {"STEPSCOPE_SAY_READS": "1"})
    if got[:3] != expected[:3]:
        failures.append(f"{name}: a damaged wait's sender: {got[0]} {got[3].strip()}")
    elif "1 for the bubble's transfers" not in got[3]:
        failures.append(f"{name}: a damaged wait's sender was not read again: {got[3].strip()}")


def check_refusals(name, run, gen_args, cross, n, tmp):
    """A cross file of another part, or of another run, is refused by the map step (one whose
    records differ from the part's rank files with a message that names it and says what to
    do)."""
    out = os.path.join(tmp, "refused.ssp")
    p = run_cmd([stepscope, "analyze", run, "--part", f"0/{n}", "--partial", out, "--cross",
                 os.path.join(cross, f"cross-1-of-{n}.ssx")])
    if p.returncode == 0 or f"is made for part 1 of {n}, not 0 of {n}" not in p.stderr.decode():
        failures.append(f"{name}: another part's cross file: {p.returncode} {p.stderr!r}")
    other = os.path.join(tmp, "other")
    run_cmd([gen, other, "--ranks", "5", "--steps", "2", "--ops", "20"])
    p = run_cmd([stepscope, "analyze", other, "--part", f"0/{n}", "--partial", out, "--cross",
                 os.path.join(cross, f"cross-0-of-{n}.ssx")])
    if p.returncode == 0 or "made from another run's partials" not in p.stderr.decode():
        failures.append(f"{name}: another run's cross file: {p.returncode} {p.stderr!r}")
    # the same file names, other records (more micro-batches): the file is named, and what to do
    changed = os.path.join(tmp, "changed")
    run_cmd([gen, changed, *gen_args, "--microbatches", "12"])
    cross0 = os.path.join(cross, f"cross-0-of-{n}.ssx")
    p = run_cmd([stepscope, "analyze", changed, "--part", f"0/{n}", "--partial", out, "--cross",
                 cross0])
    if p.returncode != 1 or f"{cross0} does not match" not in p.stderr.decode() or \
            "make the partials and then the cross files (merge --cross-out) again" not in \
            p.stderr.decode():
        failures.append(f"{name}: a cross file of other records: {p.returncode} {p.stderr!r}")
    # a cross file that is not there, or a directory: said so (it said "cannot open (a cross
    # file is a regular file)" for a file that is not there)
    missing = os.path.join(tmp, "no-such-cross.ssx")
    for given, needle in ((missing, f"{missing}: cannot open it (No such file or directory)"),
                          (cross, f"{cross}: not a regular file (a cross file is one)")):
        p = run_cmd([stepscope, "analyze", run, "--part", f"0/{n}", "--partial", out, "--cross",
                     given])
        if p.returncode != 1 or needle not in p.stderr.decode():
            failures.append(f"{name}: --cross {given}: {p.returncode} {p.stderr!r}")
    # --cross-out naming a file (it said "FILE/cross-0-of-N.ssx: cannot write FILE/...: Not a
    # directory", the path twice)
    parts = [os.path.join(tmp, f"{name}-r1-{k}.ssp") for k in range(n)]
    p = run_cmd([stepscope, "merge", *parts, "--cross-out", cross0])
    if p.returncode != 1 or f"{cross0} is not a directory" not in p.stderr.decode():
        failures.append(f"{name}: --cross-out a file: {p.returncode} {p.stderr!r}")
    p = run_cmd([stepscope, "merge", os.path.join(cross, f"cross-0-of-{n}.ssx")])
    if p.returncode == 0 or "not a stepscope partial" not in p.stderr.decode():
        failures.append(f"{name}: merge of a cross file: {p.returncode} {p.stderr!r}")
    usage = {  # options that do not go together: exit 2 and why
        "--cross needs --partial OUT": ["analyze", run, "--cross", "x.ssx"],
        "--cross-out is merge's": ["analyze", run, "--part", "0/2", "--partial", out,
                                   "--cross-out", tmp],
        "--cross is analyze's": ["merge", out, "--cross", "x.ssx"],
        "--cross-out writes no report": ["merge", out, "--cross-out", tmp, "--json", out],
    }
    for needle, args in usage.items():
        p = run_cmd([stepscope, *args])
        if p.returncode != 2 or needle not in p.stderr.decode():
            failures.append(f"{name}: {' '.join(args[:1] + args[2:])}: {p.returncode} {p.stderr!r}")


def check_other_steps(name, run, cross, n, tmp):
    """Round 2 made with other --steps than the cross files' partials: the merge takes the
    metrics (the pipeline waits do not depend on the steps), reads the ranks for the transfers
    (the matching keeps instances by the steps' windows), and reports as `analyze --steps`;
    merge --cross-out of partials made with other options than its own is refused."""
    parts = []
    for k in range(n):
        out = os.path.join(tmp, f"{name}-steps-{k}.ssp")
        p = run_cmd([stepscope, "analyze", run, "--part", f"{k}/{n}", "--partial", out,
                     "--steps", "1:2", "--cross", os.path.join(cross, f"cross-{k}-of-{n}.ssx")])
        if p.returncode != 0:
            failures.append(f"{name}: round 2 with --steps 1:2: {p.stderr.decode().strip()}")
            return
        parts.append(out)
    expected = report(["analyze", run, "--steps", "1:2"], os.path.join(tmp, "a.json"))
    got = report(["merge", *parts, "--steps", "1:2"], os.path.join(tmp, "m.json"),
                 {"STEPSCOPE_SAY_READS": "1"})
    if got[:3] != expected[:3] or expected[0] != 0:
        failures.append(f"{name}: round 2 with --steps 1:2 differs from analyze --steps 1:2")
    if "for the bubble's transfers" not in got[3] or "for the per-rank metrics" in got[3]:
        failures.append(f"{name}: round 2 with --steps 1:2 read: {got[3].strip()}")
    p = run_cmd([stepscope, "merge", *parts, "--cross-out", os.path.join(tmp, "x")])
    if p.returncode != 1 or "needs the options the partials were made with" not in \
            p.stderr.decode():
        failures.append(f"{name}: --cross-out with other options: {p.returncode} {p.stderr!r}")


def check_twin(name, gen_args, cross, n, tmp):
    """Round 2 of a twin run made with this run's cross files: the merge takes only the ranks
    whose inputs hash the same, reads the others, and reports as the twin's analyze."""
    os.makedirs(os.path.join(tmp, "twin"))
    twin = os.path.join(tmp, "twin", "run")
    run_cmd([gen, twin, *gen_args, "--seed", "9"])
    expected = report(["analyze", twin], os.path.join(tmp, "a.json"))
    parts = map_round(f"{name}-twin", twin, tmp, n, cross)
    if not parts:
        return
    got = report(["merge", *parts], os.path.join(tmp, "m.json"), {"STEPSCOPE_SAY_READS": "1"})
    if got[:3] != expected[:3] or expected[0] != 0:
        failures.append(f"{name}: the twin's merge with foreign cross inputs differs from analyze")
    if "for the bubble's transfers" not in got[3]:
        failures.append(f"{name}: the twin's merge took transfers made from foreign inputs: "
                        f"{got[3].strip()}")


work = tempfile.mkdtemp(prefix="ssa-merge-cross-")
try:
    gens = {
        "gen_scale_pp4": ["--scale", "--ranks", "16", "--events-per-rank", "2000", "--tp", "2",
                          "--pp", "4", "--stragglers", "2"],
        "gen_scale_pp2": ["--scale", "--ranks", "16", "--events-per-rank", "2000", "--tp", "2",
                          "--pp", "2", "--microbatches", "4", "--stragglers", "3"],
    }
    first = None
    for name, args in gens.items():
        run = os.path.join(work, name)
        p = run_cmd([gen, run, *args])
        if p.returncode != 0:
            failures.append(f"{name}: stepscope-gen failed: {p.stderr.decode()}")
            continue
        made = check_run(name, run, work)
        if made and first is None:
            first = (name, run, args, *made[:2])
    trainers = {
        "trainer_dp2_pp2": "--world 4 --dp 2 --pp 2 --microbatches 4",
        "trainer_tp2_pp2_interleaved":
            "--world 4 --tp 2 --pp 2 --schedule interleaved --layers 4 --microbatches 4",
    }
    for name, args in trainers.items():
        d = os.path.join(work, name)
        subprocess.run([train, *args.split(), "--steps", "3", "--trace", d], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        made = check_run(name, d, work)
        if made and name == "trainer_dp2_pp2":  # its last rank waited on late sends
            check_damaged_wait(name, made[2], made[3], work)
    for i, src in enumerate(given_runs):
        run = os.path.join(work, f"given{i}")
        shutil.copytree(src, run)
        check_run(f"given{i} ({os.path.basename(src.rstrip('/'))})", run, work)
    if first:
        name, run, args, cross, n = first
        check_refusals(name, run, args, cross, n, work)
        check_other_steps(name, run, cross, n, work)
        check_twin(name, args, cross, n, work)
finally:
    shutil.rmtree(work, ignore_errors=True)

for f in failures:
    print("FAIL:", f)
print("FAILED" if failures else "all passed")
sys.exit(1 if failures else 0)
