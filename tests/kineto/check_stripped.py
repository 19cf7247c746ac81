#!/usr/bin/env python3
"""check_stripped.py — collectives matched across ranks when the trace carries no
collective metadata (issue 30 §4; docs/kineto-import.md "NCCL kernels without metadata").

usage: check_stripped.py STEPSCOPE MAKE_KINETO WORKDIR

The truth is the same run generated with its metadata: make_kineto.py writes it twice
from one seed (4 ranks, one data-parallel group on an NCCL stream of its own, rank 2
slow in backward), once with the NCCL args and once with bare kernels. Matched by their
order on the stream, the bare run must give the same instances (start, skew, transfer,
waits, who came last), the same stragglers and the same culprit verdict, and say that it
matched by stream order. Then one rank's kernel at one position is made another op: the
stream is refused with a warning naming the position and both ops, and nothing is
matched.
"""
import json
import os
import shutil
import subprocess
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def analyze(stepscope, run):
    rep = run + ".json"
    p = subprocess.run([stepscope, "analyze", run, "--json", rep], capture_output=True, text=True)
    if p.returncode != 0:
        fail("analyze %s: exit %d\n%s" % (run, p.returncode, p.stderr))
    return json.load(open(rep)), p.stdout


def main():
    stepscope, gen, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    common = ["--ranks", "4", "--steps", "4", "--tp", "1", "--comm-streams", "--late-rank", "2",
              "--late-us", "300"]
    meta, bare = os.path.join(work, "meta"), os.path.join(work, "bare")
    subprocess.run([sys.executable, gen, meta] + common, check=True)
    subprocess.run([sys.executable, gen, bare] + common + ["--strip-comm-metadata"], check=True)
    want, _ = analyze(stepscope, meta)
    got, text = analyze(stepscope, bare)
    keys = ["start_ns", "end_ns", "skew_ns", "transfer_ns", "max_wait_ns", "total_wait_ns",
            "caused_wait_ns", "last_rank", "complete", "op"]
    wi = [{k: x[k] for k in keys} for x in want["collectives"]["instances"]]
    gi = [{k: x[k] for k in keys} for x in got["collectives"]["instances"]]
    print("instances: %d with metadata, %d matched by stream order" % (len(wi), len(gi)))
    if not wi:
        fail("the run with metadata has no collective instance")
    if wi != gi:
        for a, b in zip(wi, gi):
            if a != b:
                fail("first differing instance:\n  metadata %s\n  stream   %s" % (a, b))
        fail("instance counts differ")
    wc, gc = want["collectives"], got["collectives"]
    if gc["matched_by_stream_order"] != len(gi) or wc["matched_by_stream_order"] != 0:
        fail("matched_by_stream_order %s / %s" % (gc["matched_by_stream_order"],
                                                  wc["matched_by_stream_order"]))
    if gc["stragglers"] != wc["stragglers"] or not gc["stragglers"]:
        fail("stragglers differ: %s vs %s" % (gc["stragglers"], wc["stragglers"]))
    if gc["culprit_verdict"] != wc["culprit_verdict"]:
        fail("verdicts differ: %s vs %s" % (gc["culprit_verdict"], wc["culprit_verdict"]))
    if wc["culprit_verdict"]["status"] != "culprit" or wc["culprit_verdict"]["candidate"]["rank"] != 2:
        fail("the slow rank 2 is not the culprit: %s" % wc["culprit_verdict"])
    if "matched across ranks by their order on each NCCL stream" not in text:
        fail("the text does not say how the collectives were matched:\n" + text)
    print("same instances, stragglers and verdict (%s rank %d)"
          % (gc["culprit_verdict"]["status"], gc["culprit_verdict"]["candidate"]["rank"]))

    # one rank runs another op at position 1: the stream cannot be matched
    path = os.path.join(bare, "rank-2.json")
    doc = open(path).read()
    at = doc.find("ncclDevKernel_AllReduce", doc.find("ncclDevKernel_AllReduce") + 1)
    doc = doc[:at] + "ncclDevKernel_AllGather" + doc[at + len("ncclDevKernel_AllReduce"):]
    open(path, "w").write(doc)
    bad, _ = analyze(stepscope, bare)
    bc = bad["collectives"]
    warn = [w for w in bad["warnings"] if "cannot be matched by order" in w]
    print("refused: %d, warning: %s" % (bc["refused_stream_order"], warn))
    if not warn or "all_gather" not in warn[0] or "rank 2" not in warn[0]:
        fail("no warning naming the disagreement: %s" % bad["warnings"])
    if bc["matched_by_stream_order"] != 0 or bc["refused_stream_order"] == 0 or bc["stragglers"]:
        fail("a disagreeing stream was matched: %s" % {k: bc[k] for k in
             ("matched_by_stream_order", "refused_stream_order", "stragglers")})
    print("OK")


main()
