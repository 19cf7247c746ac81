"""gpu_measure.py — what the window's GPU measurements share (gemm_ceiling.py,
attention_rates.py, expert_gemms.py): timing on the device with CUDA events, and the start of
a measurement that may find no torch or no GPU, which must read SKIP (exit 77), never a rate.
"""
import time


def timed(torch, fn, repeat):
    """Seconds one call of fn takes on the device: repeat calls between two CUDA events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeat):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / repeat


def add_budget(ap, default, what):
    """--budget-s: stop starting `what` after this many seconds."""
    ap.add_argument("--budget-s", type=float, default=default,
                    help="stop starting %s after this many seconds (default %g)" % (what, default))


def check_budget(ap, args):
    if args.budget_s < 0:
        ap.error("--budget-s: at least 0")


def cuda_torch(name):
    """torch with a CUDA device, or None after printing `NAME: SKIP: why`."""
    try:
        import torch
    except ImportError:
        print("%s: SKIP: no torch" % name)
        return None
    if not torch.cuda.is_available():
        print("%s: SKIP: no CUDA device" % name)
        return None
    return torch


def finish(name, points, started):
    """The last line of a measurement (`NAME: M of N points measured in T s`, which the window's
    note quotes) and its exit status: 0 when anything was measured, else 1."""
    measured = sum(1 for p in points if "forward_s" in p)
    print("%s: %d of %d points measured in %.0f s" % (name, measured, len(points),
                                                      time.monotonic() - started))
    return 0 if measured else 1
