#!/usr/bin/env python3
"""gemm_ceiling.py — the bf16 matrix-multiply rate this GPU really reaches, measured in the
same call as the MFU runs (window step 7), so that MFU can be read against it as well as
against the datasheet peak (on an H200 about 770-800 TFLOP/s against 989).

    python3 gemm_ceiling.py [--n 8192] [--repeat 10] [--json OUT.json]

How: PyTorch's bf16 matmul of two random N x N matrices (cuBLAS), 3 warm-up products, then
--repeat products timed with CUDA events; 2 N^3 FLOPs each. Reports the mean and the best of
three such rounds (the ceiling is the best). Random data, not zeros: zeros run faster.

--shapes-trace OUT.json: then the GEMM shapes the planner's tile-quantization model gets wrong
or right on real traces (docs/plan.md "A measured GEMM ceiling": outputs of few tiles, small
inner dimensions; the shapes of TraceLens' H100 traces and of TP slices of Llama-sized layers)
are each run 5 times under torch.profiler with record_shapes=True, and the profile is written
as a Kineto trace for `stepscope ops` and `stepscope plan --ceilings-from`; the JSON also gets
each shape's TFLOP/s timed with CUDA events (`shapes`). The same profile also holds causal
flash attention, forward and backward (torch's scaled_dot_product_attention on bf16 [B, H, S,
128] with is_causal), for the planner's measured attention rate (plan_attention_from_ops); the
JSON gets their forward and backward times (`attention`).

Also, guarded so that a failure keeps the rest: the fp8 ceiling (`fp8`: torch._scaled_mm
of two N x N float8_e4m3fn matrices with per-tensor scales into bf16, cuBLASLt's fp8 GEMM, the
rate `stepscope plan --precision fp8` takes at the bf16 ceiling's share of the fp8 peak).
Attention's rate by length and kernel is attention_rates.py's.
"""
import argparse
import json
import sys

import torch

from gpu_measure import timed

# (M, N, K): output M x N, inner K
SHAPES = [(8192, 8192, 8192), (8944, 2816, 1024), (8944, 1024, 2816), (8944, 1024, 1024),
          (5185, 4096, 1024), (5185, 1024, 4096), (5185, 1024, 1024), (25088, 3072, 768),
          (25088, 768, 3072), (25088, 768, 768), (8192, 1024, 4096), (8192, 512, 4096),
          (4096, 7168, 4096), (4096, 4096, 1792)]


# causal attention (B, H, S, D): GPT-3 2.7B-like heads at 2k and 4k, Llama-70B-like TP-8 slices at 8k
ATTENTION = [(8, 32, 2048, 128), (4, 32, 4096, 128), (1, 8, 8192, 128)]


def attention_inputs(b, h, s, d):
    return [torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            for _ in range(3)]


def attention_step(q, k, v):
    """One causal forward and its backward."""
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    o.backward(torch.ones_like(o))


def attention_sweep():
    """Each shape's forward and forward+backward timed with CUDA events: the pairs' FLOPs
    counted whole (4 B H S^2 D a forward, twice that a backward), as the planner counts them."""
    out = []
    for b, h, s, d in ATTENTION:
        q, k, v = attention_inputs(b, h, s, d)
        for _ in range(3):
            attention_step(q, k, v)
        with torch.no_grad():
            fwd = timed(torch, lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True), 10)
        both = timed(torch, lambda: attention_step(q, k, v), 10)
        whole = 4.0 * b * h * s * s * d
        out.append({"b": b, "h": h, "s": s, "d": d, "forward_s": fwd, "forward_backward_s": both,
                    "forward_tflops_whole": whole / fwd / 1e12,
                    "backward_tflops_whole": 2 * whole / max(both - fwd, 1e-9) / 1e12})
        print("gemm_ceiling: causal attention %dx%dx%dx%d: forward %.0f, backward %.0f TFLOP/s "
              "(every pair counted)" % (b, h, s, d, out[-1]["forward_tflops_whole"],
                                        out[-1]["backward_tflops_whole"]))
    return out


def fp8_ceiling(n, repeat):
    """cuBLASLt's fp8 GEMM: e4m3 operands (the second column-major, as _scaled_mm needs), unit
    per-tensor scales, bf16 output; the best of three rounds."""
    a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
    one = torch.ones((), device="cuda", dtype=torch.float32)
    mm = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    for _ in range(3):
        mm()
    rates = [2.0 * n ** 3 / timed(torch, mm, repeat) / 1e12 for _ in range(3)]
    print("gemm_ceiling: fp8 (e4m3, _scaled_mm) %dx%dx%d: %.0f TFLOP/s (rounds %s)"
          % (n, n, n, max(rates), ", ".join("%.0f" % r for r in rates)))
    return {"n": n, "tflops_rounds": rates, "tflops": max(rates)}


def shape_sweep(path):
    """Each shape timed with CUDA events, then all of them once more under the profiler."""
    out, mats = [], []
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        for _ in range(3):
            torch.mm(a, b)
        seconds = timed(torch, lambda: torch.mm(a, b), 10)
        out.append({"m": m, "n": n, "k": k, "tflops": 2.0 * m * n * k / seconds / 1e12})
        mats.append((a, b))
    atts = [attention_inputs(*shape) for shape in ATTENTION]
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
        for a, b in mats:
            for _ in range(5):
                torch.mm(a, b)
        try:  # the GEMMs' profile is kept whatever the attention does
            for q, k, v in atts:
                for _ in range(3):
                    attention_step(q, k, v)
        except Exception as e:  # noqa: BLE001
            print("gemm_ceiling: causal attention under the profiler failed: %r" % (e,))
        torch.cuda.synchronize()
    prof.export_chrome_trace(path)
    for r in out:
        print("gemm_ceiling: shape %dx%d (K %d): %.0f TFLOP/s" % (r["m"], r["n"], r["k"], r["tflops"]))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--json")
    ap.add_argument("--shapes-trace")
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
    try:  # fp8 needs Hopper or later and a torch with _scaled_mm: recorded either way
        res["fp8"] = fp8_ceiling(n, a.repeat)
    except Exception as e:  # noqa: BLE001
        res["fp8_error"] = repr(e)
        print("gemm_ceiling: fp8 failed: %r" % (e,))
    if a.shapes_trace:
        try:  # a failure here must not lose the GEMM measurements of this one-shot window
            res["attention"] = attention_sweep()
        except Exception as e:  # noqa: BLE001 (the evidence records whatever failed)
            res["attention_error"] = repr(e)
            print("gemm_ceiling: causal attention failed: %r" % (e,))
        res["shapes"] = shape_sweep(a.shapes_trace)
        res["shapes_trace"] = a.shapes_trace
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
