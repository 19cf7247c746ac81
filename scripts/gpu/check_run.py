#!/usr/bin/env python3
"""check_run.py — assertions on a traced GPU run, so that a window's checks can FAIL.

    check_run.py STEPSCOPE RUN_DIR --ranks N [--kernels] [--collectives] [--named-streams]
                 [--kinds KIND,KIND...]

Reads every rank file of RUN_DIR with `stepscope dump` (one JSON line per record) and checks:
  --ranks N          exactly N rank files, each readable
  --kernels          every rank recorded GPU kernels (CUPTI worked)
  --collectives      every rank recorded COLLECTIVE records (the NCCL profiler plugin worked),
                     none with 0 bytes (a datatype NCCL could not name), and every NCCL kernel
                     (name starting "nccl") carries a correlation id that one of the rank's
                     collectives carries (what joins a kernel to its collective)
  --named-streams    every stream that ran kernels was declared with a name other than
                     CUPTI's generic "stream N" (the trainer names its streams)
  --kinds K,K...     every rank recorded at least one record of each kind named (the kinds of
                     `stepscope dump`: kernel, memcpy, memset, sync, api, range, ...): what a
                     plain CUDA program under `stepscope record` must leave (CUPTI and NVTX)
Prints one line per check (PASS/FAIL with the numbers) and exits 1 if any failed.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys


def dump(stepscope, path):
    out = subprocess.run([stepscope, "dump", path], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"stepscope dump {path}: {out.stderr.strip()}")
    for line in out.stdout.splitlines():
        try:
            yield json.loads(line)
        except ValueError:
            continue


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("stepscope")
    ap.add_argument("run")
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--kernels", action="store_true")
    ap.add_argument("--collectives", action="store_true")
    ap.add_argument("--named-streams", action="store_true")
    ap.add_argument("--kinds", default="")
    a = ap.parse_args()
    failures = 0

    def check(ok, what):
        nonlocal failures
        print(("PASS " if ok else "FAIL ") + what)
        failures += 0 if ok else 1

    files = sorted(glob.glob(os.path.join(a.run, "rank-*.trace.zst")))
    check(len(files) == a.ranks, f"{len(files)} rank files in {a.run} (expected {a.ranks})")
    for f in files:
        name = os.path.basename(f)
        try:
            recs = list(dump(a.stepscope, f))
        except RuntimeError as e:
            check(False, str(e))
            continue
        kernels = [r for r in recs if r.get("kind") == "kernel"]
        colls = [r for r in recs if r.get("kind") == "collective"]
        streams = {}
        for r in recs:
            if r.get("kind") == "stream":
                streams[r.get("stream")] = r.get("name") or ""
        for kind in [k for k in a.kinds.split(",") if k]:
            n = sum(1 for r in recs if r.get("kind") == kind)
            check(n > 0, f"{name}: {n} {kind} records")
        if a.kernels:
            check(len(kernels) > 0, f"{name}: {len(kernels)} kernel records")
        if a.collectives:
            check(len(colls) > 0, f"{name}: {len(colls)} collective records")
            zero = sum(1 for c in colls if not c.get("bytes"))
            check(zero == 0, f"{name}: {zero} collectives with 0 bytes")
            corr = {c.get("correlation_id") for c in colls if c.get("correlation_id")}
            nccl = [k for k in kernels if str(k.get("name", "")).startswith("nccl")]
            unmatched = [k for k in nccl if k.get("correlation_id") not in corr]
            check(len(nccl) > 0 and not unmatched,
                  f"{name}: {len(nccl) - len(unmatched)} of {len(nccl)} NCCL kernels matched to a "
                  f"collective by correlation id"
                  + (f" (first unmatched: {unmatched[0].get('name')})" if unmatched else ""))
        if a.named_streams:
            used = {k.get("stream") for k in kernels}
            generic = sorted(s for s in used if re.fullmatch(r"stream \d+", streams.get(s, "")) or
                             s not in streams)
            check(used and not generic,
                  f"{name}: {len(used) - len(generic)} of {len(used)} kernel streams named by the "
                  f"program" + (f" (unnamed: {generic[:4]})" if generic else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
