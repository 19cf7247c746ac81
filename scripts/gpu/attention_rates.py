#!/usr/bin/env python3
"""attention_rates.py — fused attention's rate by sequence length and kernel on this GPU, the
measurement the planner's attention model is owed (docs/plan.md "Compute by shape";
bench/plan/published/README.md, "Long sequences: what the share cannot say").

    python3 attention_rates.py [--min-len 512] [--max-len 131072] [--budget-s 40] [--json OUT]

Why: the planner charges attention at one share of the peak at 2,048 positions, scaled by
FlashAttention-2's rate by length from pytorch/benchmark's table (512 to 16K). Published
Megatron-Core runs with TransformerEngine (cuDNN's fused attention on Hopper) at 32K-128K ran
up to 2.7x faster than that predicts, while 4K runs agree with it. Which kernel, at which
length, reaches which rate is what separates "the kernel is faster at long lengths" from
"something else at 4K is slower"; only a GPU can say.

What: torch's scaled_dot_product_attention on bf16 [B, H, S, D] (32 heads of 128), restricted
to one backend at a time (FLASH_ATTENTION: FlashAttention-2; CUDNN_ATTENTION: cuDNN's fused
attention, TransformerEngine's choice on Hopper), so that no fallback to the unfused math path
(which holds the S x S scores) runs. Lengths from --min-len to --max-len by doubling; up to 16K
the batch keeps B x S at 16K tokens (the pytorch/benchmark table's setting), longer ones run one
sequence. Causal at every length, not causal up to 16K. Each point: warm-up, then the forward
alone and the forward with its backward timed with CUDA events (10 repeats up to 16K, 3
beyond); the backward is their difference. FLOPs are counted whole, as the planner and MFU
count them (4 B H S^2 D a forward, twice that a backward); `*_tflops_computed` also gives the
causal kernels' rate on the (query, key) pairs they compute (S (S + 1) / 2 of S^2).

Every point is guarded (a backend missing or out of memory records its error and the rest
go on), the JSON is rewritten after each point, and points left when --budget-s has passed
are recorded as skipped: a window stopped at its bound still brings back what it measured.
Exit 77 without a CUDA device.
"""
import argparse
import json
import sys
import time

from gpu_measure import add_budget, check_budget, cuda_torch, finish, timed

HEADS, HEAD_DIM, TOKENS = 32, 128, 16384


def lengths(lo, hi):
    s, out = 512, []
    while s <= hi:
        if s >= lo:
            out.append(s)
        s *= 2
    return out


def measure(torch, backend, s, causal):
    """One point: (forward seconds, forward+backward seconds) of one backend at length s."""
    from torch.nn.attention import sdpa_kernel
    b = max(1, TOKENS // s)
    q, k, v = [torch.randn(b, HEADS, s, HEAD_DIM, device="cuda", dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3)]
    f = torch.nn.functional.scaled_dot_product_attention
    repeat = 10 if s <= TOKENS else 3
    with sdpa_kernel([backend]):
        def both():
            o = f(q, k, v, is_causal=causal)
            o.backward(torch.ones_like(o))
        both()  # warm-up (and the backend's refusal, if any, raised here)
        with torch.no_grad():
            fwd = timed(torch, lambda: f(q, k, v, is_causal=causal), repeat)
        fb = timed(torch, both, repeat)
    del q, k, v
    torch.cuda.empty_cache()
    return b, repeat, fwd, fb


def point(torch, name, backend, s, causal):
    b, repeat, fwd, fb = measure(torch, backend, s, causal)
    whole = 4.0 * b * HEADS * s * s * HEAD_DIM
    computed = (s + 1) / (2.0 * s) if causal else 1.0  # share of the pairs a causal kernel computes
    # the backward is the difference of two timings: none when noise leaves it at or below zero
    bwd_rate = 2 * whole / (fb - fwd) / 1e12 if fb > fwd else None
    r = {"backend": name, "s": s, "b": b, "causal": causal, "repeat": repeat,
         "forward_s": fwd, "forward_backward_s": fb,
         "forward_tflops_whole": whole / fwd / 1e12, "backward_tflops_whole": bwd_rate,
         "forward_tflops_computed": whole / fwd / 1e12 * computed,
         "backward_tflops_computed": bwd_rate * computed if bwd_rate else None}
    text = lambda x: "%.0f" % x if x else "none"
    print("attention_rates: %s s %d x b %d%s: forward %s, backward %s TFLOP/s (pairs counted whole; "
          "%s, %s on those computed)" % (name, s, b, " causal" if causal else "",
                                         text(r["forward_tflops_whole"]), text(bwd_rate),
                                         text(r["forward_tflops_computed"]), text(r["backward_tflops_computed"])),
          flush=True)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--min-len", type=int, default=512)
    ap.add_argument("--max-len", type=int, default=131072)
    add_budget(ap, 40.0, "points")
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.min_len < 512 or a.max_len < a.min_len:
        ap.error("lengths: 512 <= --min-len <= --max-len")
    check_budget(ap, a)
    torch = cuda_torch("attention_rates")
    if torch is None:
        return 77
    from torch.nn.attention import SDPBackend
    backends = [("flash", SDPBackend.FLASH_ATTENTION)]
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        backends.append(("cudnn", SDPBackend.CUDNN_ATTENTION))
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(), "heads": HEADS, "head_dim": HEAD_DIM,
           "dtype": "bf16", "points": []}
    start = time.monotonic()

    def save():
        if a.json:
            with open(a.json, "w") as f:
                json.dump(res, f, indent=1)

    # short lengths first: they are cheap and are what the planner's table covers today
    for s in lengths(a.min_len, a.max_len):
        for causal in ((True, False) if s <= TOKENS else (True,)):
            for name, backend in backends:
                if time.monotonic() - start > a.budget_s:
                    res["points"].append({"backend": name, "s": s, "causal": causal,
                                          "skipped": "budget of %.0f s spent" % a.budget_s})
                    continue
                try:
                    res["points"].append(point(torch, name, backend, s, causal))
                except Exception as e:  # noqa: BLE001 (a refusal or OOM is evidence too)
                    torch.cuda.empty_cache()
                    res["points"].append({"backend": name, "s": s, "causal": causal, "error": repr(e)[:300]})
                    print("attention_rates: %s s %d%s failed: %r" % (name, s, " causal" if causal else "", e),
                          flush=True)
                save()
    save()
    return finish("attention_rates", res["points"], start)


if __name__ == "__main__":
    sys.exit(main())
