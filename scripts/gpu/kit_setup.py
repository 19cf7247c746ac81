#!/usr/bin/env python3
"""kit_setup.py — makes the kit's prebuilt binaries runnable on the GPU machine, with Python
alone (that machine has no guaranteed zstd or xz tool, and no network).

    kit_setup.py unpack ARCHIVE DIR
        Extracts a tar archive (plain, .gz, .bz2 or .xz: Python's tarfile and lzma) into DIR,
        unless DIR/.unpacked already names the same archive (size and mtime): a warm machine
        reuses what an earlier call unpacked. Members that would land outside DIR, device
        files and absolute links are refused.

    kit_setup.py libs PATH... [--search DIR]... [--hide LIB[,LIB...]]
        Runs `ldd` on every PATH that is a file and on every ELF executable and shared
        library under the PATHs that are folders, with the
        current LD_LIBRARY_PATH. Each library reported "not found" is looked for in the
        --search directories (and in the site-packages' nvidia/*/lib folders of this Python,
        where PyTorch's wheels keep cuBLAS, CUPTI and NCCL); a folder that holds it is added
        to the library path and ldd runs again. Prints
            LD_LIBRARY_PATH=<the path to use>
            resolved LIB in FOLDER
            missing LIB (needed by BIN, ...)
        and exits 0 when every binary resolves, 1 when a library is still missing (its name
        and the binaries that need it are printed), 2 on a usage error. --hide (the window's
        dry-run scenarios) treats the named libraries as not found anywhere.
"""
import glob
import os
import re
import site
import subprocess
import sys
import tarfile

ELF_MAGIC = b"\x7fELF"


def unpack(archive, dest):
    st = os.stat(archive)
    stamp = "%s %d %d\n" % (os.path.basename(archive), st.st_size, int(st.st_mtime))
    stamp_file = os.path.join(dest, ".unpacked")
    try:
        with open(stamp_file) as f:
            if f.read() == stamp:
                print("kit_setup: %s already unpacked in %s" % (archive, dest))
                return 0
    except OSError:
        pass
    os.makedirs(dest, exist_ok=True)
    root = os.path.realpath(dest)
    with tarfile.open(archive, "r:*") as tar:
        members = tar.getmembers()
        for m in members:
            target = os.path.realpath(os.path.join(root, m.name))
            if not (target == root or target.startswith(root + os.sep)):
                sys.exit("kit_setup: %s: member %s lands outside %s" % (archive, m.name, dest))
            if m.isdev() or (m.issym() and os.path.isabs(m.linkname)):
                sys.exit("kit_setup: %s: refusing member %s" % (archive, m.name))
        if hasattr(tarfile, "data_filter"):  # Python >= 3.12 (and 3.11.4): the safe filter
            tar.extractall(root, members=members, filter="data")
        else:
            tar.extractall(root, members=members)
    with open(stamp_file, "w") as f:
        f.write(stamp)
    print("kit_setup: unpacked %s (%d members) into %s" % (archive, len(members), dest))
    return 0


def elf_files(paths):
    for d in paths:
        if os.path.isfile(d):
            yield d
            continue
        for base, _subdirs, files in os.walk(d):
            for name in sorted(files):
                path = os.path.join(base, name)
                if os.path.islink(path) or not os.path.isfile(path):
                    continue
                if not (os.access(path, os.X_OK) or ".so" in name):
                    continue
                with open(path, "rb") as f:
                    if f.read(4) == ELF_MAGIC:
                        yield path


def python_lib_dirs():
    dirs = []
    roots = list(site.getsitepackages()) + [site.getusersitepackages()]
    for r in roots:
        dirs += sorted(glob.glob(os.path.join(r, "nvidia", "*", "lib")))
        dirs += sorted(glob.glob(os.path.join(r, "nvidia", "*", "*", "lib")))
    return dirs


def missing_libs(binary, ld_path, hidden):
    """{library: reason} for what ldd cannot resolve (hidden ones count as not found)."""
    env = dict(os.environ, LD_LIBRARY_PATH=ld_path)
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, env=env)
    missing = {}
    for line in (out.stdout + out.stderr).splitlines():
        m = re.match(r"\s*(\S+)\s+=>\s+not found", line)
        if m:
            missing[m.group(1)] = "not found"
            continue
        m = re.search(r"version `([^']+)' not found \(required by ([^)]+)\)", line)
        if m:
            missing[m.group(1)] = "version not found (required by %s)" % os.path.basename(m.group(2))
            continue
        m = re.match(r"\s*(\S+)\s+=>\s+\S+", line)
        if m and m.group(1) in hidden:
            missing[m.group(1)] = "hidden (simulated)"
    return missing


def libs(argv):
    dirs, search, hidden = [], [], set()
    i = 0
    while i < len(argv):
        if argv[i] == "--search" and i + 1 < len(argv):
            search.append(argv[i + 1])
            i += 2
        elif argv[i] == "--hide" and i + 1 < len(argv):
            hidden |= {h for h in argv[i + 1].split(",") if h}
            i += 2
        else:
            dirs.append(argv[i])
            i += 1
    if not dirs:
        sys.stderr.write(__doc__)
        return 2
    search += python_lib_dirs()
    ld_path = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    binaries = list(elf_files(dirs))
    if not binaries:
        print("LD_LIBRARY_PATH=" + ":".join(ld_path))
        print("missing binaries: no ELF file in %s" % " ".join(dirs))
        return 1
    needed_by = {}
    for _round in range(8):  # each round may add folders; a few suffice
        needed_by = {}
        for b in binaries:
            for lib, why in missing_libs(b, ":".join(ld_path), hidden).items():
                needed_by.setdefault((lib, why), []).append(os.path.basename(b))
        added = False
        for (lib, why) in sorted(needed_by):
            if why != "not found":
                continue
            for d in search:
                if os.path.exists(os.path.join(d, lib)) and d not in ld_path:
                    ld_path.append(d)
                    print("resolved %s in %s" % (lib, d))
                    added = True
                    break
        if not added:
            break
    print("LD_LIBRARY_PATH=" + ":".join(ld_path))
    for (lib, why), bins in sorted(needed_by.items()):
        print("missing %s: %s (needed by %s)" % (lib, why, ", ".join(sorted(set(bins)))))
    print("%d binaries checked, %d libraries missing" % (len(binaries), len(needed_by)))
    return 1 if needed_by else 0


def main(argv):
    if len(argv) == 4 and argv[1] == "unpack":
        return unpack(argv[2], argv[3])
    if len(argv) >= 3 and argv[1] == "libs":
        return libs(argv[2:])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
