"""nul_path.py — a path or an option with an embedded NUL byte is refused with
ValueError (as open() refuses it), never cut at the NUL by the C library (issue 34
defect 11): "RUN\\0/etc" would otherwise analyse RUN. Needs only the package and the
library (no pandas): STEPSCOPE_LIB and PYTHONPATH are set by CTest.
usage: python3 nul_path.py SAMPLE_RUN"""

import sys

import stepscope

run = sys.argv[1]
calls = {
    "analyze(path)": lambda: stepscope.analyze(run + "\0/etc"),
    "analyze(bytes path)": lambda: stepscope.analyze(run.encode() + b"\0x"),
    "analyze(option)": lambda: stepscope.analyze(run, step_range="step\0x"),
    "diff(path b)": lambda: stepscope.diff(run, run + "\0x"),
}
try:  # ops() needs numpy (pandas' own dependency); the same path check, when it is there
    import numpy  # noqa: F401
    calls["ops(path)"] = lambda: stepscope.ops(run + "\0x")
except ImportError:
    pass
failed = 0
for name, call in calls.items():
    try:
        call()
        print("FAIL: %s took a path or option with a NUL byte" % name)
        failed = 1
    except ValueError as e:
        ok = "null byte" in str(e)
        print("%s: %s raises ValueError: %s" % ("ok" if ok else "FAIL", name, e))
        failed |= not ok
    except Exception as e:  # noqa: BLE001 - anything else is the defect
        print("FAIL: %s raised %s: %s" % (name, type(e).__name__, e))
        failed = 1
assert stepscope.analyze(run).json["ranks"], "the run itself still analyses"
sys.exit(failed)
