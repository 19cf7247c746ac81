#!/usr/bin/env python3
"""test_signals.py — a command killed mid-way leaves no temporary file behind
(issue 34 defect 11: `export` killed by SIGTERM or SIGHUP left its
".t.json.tmp-XXXXXX", `view` killed by SIGHUP its stepscope-view-* directory).

  test_signals.py STEPSCOPE WORK_DIR

A PyTorch (Kineto) trace of 300,000 kernels is written once; each command is
signalled at the moment its temporary file exists (polled), so the signal
lands mid-write whatever the machine's speed. Checked for each of SIGTERM,
SIGHUP and SIGINT: the command dies of the signal and leaves nothing behind;
`view` serving (SIGHUP) stops and removes its generated files too.
Exit 0 pass, 1 fail.
"""

import glob
import os
import shutil
import signal
import subprocess
import sys
import time

failed = False


def check(ok, what):
    global failed
    print(("ok: " if ok else "FAIL: ") + what)
    failed |= not ok


def write_run(run):
    path = os.path.join(run, "rank-0.json")
    if os.path.exists(path):
        return
    os.makedirs(run, exist_ok=True)
    with open(path + ".part", "w") as f:
        f.write('{"schemaVersion":1,"deviceProperties":[],"traceEvents":[')
        f.write(",".join('{"ph":"X","cat":"kernel","name":"gemm_%d","pid":0,"tid":7,"ts":%d,"dur":1,'
                         '"args":{"stream":7,"correlation":%d,"device":0}}' % (i % 50, 2 * i, i)
                         for i in range(300000)))
        f.write("]}")
    os.rename(path + ".part", path)


def wait_for(pattern, proc, limit=60.0):
    """Polls until a path matching pattern exists (True), or the process ends."""
    end = time.monotonic() + limit
    while time.monotonic() < end and proc.poll() is None:
        if glob.glob(pattern):
            return True
        time.sleep(0.002)
    return False


def main(exe, work):
    run = os.path.join(work, "big_run")
    write_run(run)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        name = signal.Signals(sig).name
        out = os.path.join(work, "out_" + name)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        p = subprocess.Popen([exe, "export", run, "-o", os.path.join(out, "t.json")],
                             stderr=subprocess.DEVNULL)
        caught = wait_for(os.path.join(out, ".t.json.tmp-*"), p)
        if caught:
            p.send_signal(sig)
        rc = p.wait()
        check(caught and rc == -sig, "export %s mid-write: dies of it (rc %d)" % (name, rc))
        check(os.listdir(out) == [], "export %s: no temporary file left (%s)" % (name, os.listdir(out)))

        tmp = os.path.join(work, "viewtmp_" + name)
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        env = dict(os.environ, TMPDIR=tmp)
        p = subprocess.Popen([exe, "view", run, "--port", "0"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        caught = wait_for(os.path.join(tmp, "stepscope-view-*", ".trace.json.tmp-*"), p)
        if caught:
            p.send_signal(sig)
        rc = p.wait()
        check(caught and rc == -sig, "view %s while it exports: dies of it (rc %d)" % (name, rc))
        check(os.listdir(tmp) == [], "view %s while it exports: nothing left in TMPDIR (%s)" %
              (name, os.listdir(tmp)))

    tmp = os.path.join(work, "viewtmp_serving")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    p = subprocess.Popen([exe, "view", run, "--port", "0"], env=dict(os.environ, TMPDIR=tmp),
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    check("http://" in line and len(os.listdir(tmp)) == 1, "view serves, its files generated in TMPDIR")
    p.send_signal(signal.SIGHUP)
    rc = p.wait(timeout=30)
    check(os.listdir(tmp) == [], "view serving, SIGHUP (a closed terminal): stops (rc %d), its files removed" % rc)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])))
