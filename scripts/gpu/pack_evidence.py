#!/usr/bin/env python3
"""pack_evidence.py — packs a GPU window's evidence into the files the device tool brings back
(at most 8 files of 16 MiB, flat in $OUT), with Python's tarfile alone.

    pack_evidence.py evidence ROOT OUT.tgz
        Everything under ROOT except the traces (below) and the window's private files
        (.pgids, .notes/): logs, the build log, reports, PROVENANCE.md, NCCL's debug files, the
        per-step logs of the training runs. Small; repacked after every step.
    pack_evidence.py traces ROOT OUT.tgz [--max-mib 15]
        The traces under ROOT: stepscope's rank files (*.trace.zst), PyTorch profiler traces
        (*.pt.trace.json[.gz]) and Chrome exports (trace.json.gz), in the order their folders
        were made (the window's step order), as long as the archive stays under --max-mib;
        a trace that would pass the limit is left out and named in ROOT/PACKING.txt (which
        the evidence archive then carries). Prints what it packed.

Both write OUT.tgz.tmp first and rename it, so a call stopped mid-way keeps the last whole
archive. Paths in the archives are relative to ROOT: unpacking both into the repository's
root puts each sample folder (samples/gpu-<device>-<what>/) in its place.
"""
import os
import sys
import tarfile

PRIVATE = {".pgids"}      # the running step's process group
PRIVATE_DIRS = {".notes"}  # the steps' notes: already in summary.txt


def is_trace(name):
    return (name.endswith(".trace.zst") or ".pt.trace.json" in name or name == "trace.json.gz")


def walk(root):
    """(relative path, size, folder's mtime) of every regular file under ROOT."""
    for base, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in PRIVATE_DIRS)
        for name in sorted(files):
            path = os.path.join(base, name)
            if os.path.isfile(path) and not os.path.islink(path):
                rel = os.path.relpath(path, root)
                yield rel, os.path.getsize(path), os.path.getmtime(base)


def write(out, root, rels):
    tmp = out + ".tmp"
    with tarfile.open(tmp, "w:gz", compresslevel=6) as tar:
        for rel in rels:
            tar.add(os.path.join(root, rel), arcname=rel, recursive=False)
    os.replace(tmp, out)


def evidence(root, out):
    rels = [rel for rel, _s, _m in walk(root)
            if not is_trace(os.path.basename(rel)) and os.path.basename(rel) not in PRIVATE]
    write(out, root, rels)
    print("pack_evidence: %s: %d files, %.1f KiB" % (out, len(rels), os.path.getsize(out) / 1024))
    return 0


def traces(root, out, max_mib):
    files = [(m, rel, size) for rel, size, m in walk(root) if is_trace(os.path.basename(rel))]
    files.sort()  # by the folder's time: the step order
    budget = int(max_mib * 1024 * 1024) - 64 * 1024  # tar headers and gzip framing
    kept, left = [], []
    used = 0
    for _m, rel, size in files:
        # the traces are compressed already: the archive is about as large as they are
        if used + size + 1024 <= budget:
            kept.append(rel)
            used += size + 1024
        else:
            left.append((rel, size))
    write(out, root, kept)
    note = os.path.join(root, "PACKING.txt")
    if left:
        with open(note, "w") as f:
            f.write("traces left out of traces.tgz (it would have passed %g MiB):\n" % max_mib)
            for rel, size in left:
                f.write("  %s (%.1f MiB)\n" % (rel, size / 2**20))
    elif os.path.exists(note):
        os.remove(note)
    print("pack_evidence: %s: %d traces, %.1f MiB%s" % (out, len(kept), os.path.getsize(out) / 2**20,
                                                        ", %d left out (PACKING.txt)" % len(left) if left else ""))
    return 0


def main(argv):
    if len(argv) == 4 and argv[1] == "evidence":
        return evidence(argv[2], argv[3])
    if len(argv) in (4, 6) and argv[1] == "traces":
        max_mib = float(argv[5]) if len(argv) == 6 and argv[4] == "--max-mib" else 15.0
        return traces(argv[2], argv[3], max_mib)
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
