#!/usr/bin/env python3
"""trainer_compare_losses.py CPU.jsonl CUDA.jsonl REL_TOL

Compares the per-step losses of two stepscope-train --log files (one JSON object per step):
every step must be present in both, |cuda - cpu| <= REL_TOL * |cpu| at every step, and the
CUDA loss must fall (last < first). Prints a table; exits 0 when all hold, 1 otherwise."""
import json
import sys


def losses(path):
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                rec = json.loads(line)
                out[rec["step"]] = rec["loss"]
    return out


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    cpu, cuda, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
    ok = bool(cpu) and sorted(cpu) == sorted(cuda)
    worst = 0.0
    print(f"{'step':>5} {'cpu':>12} {'cuda':>12} {'rel diff':>10}")
    for step in sorted(cpu):
        if step not in cuda:
            print(f"{step:>5} {cpu[step]:12.6f} {'missing':>12}")
            ok = False
            continue
        rel = abs(cuda[step] - cpu[step]) / max(abs(cpu[step]), 1e-12)
        worst = max(worst, rel)
        flag = "" if rel <= tol else "  <-- over tolerance"
        print(f"{step:>5} {cpu[step]:12.6f} {cuda[step]:12.6f} {rel:10.2e}{flag}")
        ok = ok and rel <= tol
    steps = sorted(cuda)
    falls = len(steps) > 1 and cuda[steps[-1]] < cuda[steps[0]]
    print(f"worst relative difference {worst:.3e} (tolerance {tol:g}); "
          f"CUDA loss {'falls' if falls else 'does NOT fall'}")
    return 0 if ok and falls else 1


if __name__ == "__main__":
    sys.exit(main())
