#!/usr/bin/env python3
"""gemm_ceiling.py — the bf16 matrix-multiply rate this GPU really reaches, measured in the
same call as the MFU runs (window step 7), so that MFU can be read against it as well as
against the datasheet peak (on an H200 about 770-800 TFLOP/s against 989).

    python3 gemm_ceiling.py [--n 8192] [--repeat 10] [--json OUT.json]

How: PyTorch's bf16 matmul of two random N x N matrices (cuBLAS), 3 warm-up products, then
--repeat products timed with CUDA events; 2 N^3 FLOPs each. Reports the mean and the best of
three such rounds (the ceiling is the best). Random data, not zeros: zeros run faster.
"""
import argparse
import json
import sys

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--json")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("gemm_ceiling: no CUDA device")
        return 77
    n = a.n
    x = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        torch.matmul(x, y)
    rates = []
    for _ in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(a.repeat):
            torch.matmul(x, y)
        end.record()
        end.synchronize()
        seconds = start.elapsed_time(end) / 1e3 / a.repeat
        rates.append(2.0 * n ** 3 / seconds / 1e12)
    res = {"device": torch.cuda.get_device_name(), "n": n, "dtype": "bf16", "repeat": a.repeat,
           "tflops_rounds": rates, "tflops": max(rates), "torch": torch.__version__}
    print("gemm_ceiling: %s bf16 %dx%dx%d: %.0f TFLOP/s (rounds %s)"
          % (res["device"], n, n, n, res["tflops"], ", ".join("%.0f" % r for r in rates)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
