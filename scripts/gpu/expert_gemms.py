#!/usr/bin/env python3
"""expert_gemms.py — the rate of a fine-grained mixture of experts' GEMMs on this GPU, at the
shapes of the published runs the planner predicts 50-75 % too fast (bench/plan/published/
README.md, "Fine-grained MoE on H100" and "One job at five lengths").

    python3 expert_gemms.py [--budget-s 20] [--json OUT]

Why: the planner charges a local expert's two GEMMs (fc1: hidden -> 2 x expert width, gated;
fc2: expert width -> hidden) as one grouped GEMM whose tiles share the device's waves, at the
dense GEMM ceiling (plan_shape_costs.c). The published fine-grained runs measured their MoE
layers' non-attention work at 1.5-2.2x what that predicts. Whether the GEMMs themselves are
the slow part (few hundred tokens an expert, many experts) or everything around them (the
router, the permutation, the host launching it all) is what this separates for the GEMMs.

What: for each shape (experts on a rank, tokens an expert, hidden, expert width), bf16, the
forward of fc1 and fc2 and their backward (input and weight gradients, by autograd), timed with
CUDA events after a warm-up, in two ways:
  - grouped: torch._grouped_mm (one kernel for all the rank's experts; where torch has it);
  - loop: one torch.mm per expert on one stream;
  - streams4: the same round-robin on 4 CUDA streams, as TransformerEngine's grouped GEMM runs
    on Hopper unless NVTE_USE_CUTLASS_GROUPED_GEMM is set (Megatron-Core's TEGroupedMLP;
    transformer_engine/common/gemm/cublaslt_gemm.cu, multi_stream_cublas_gemm: one cuBLAS
    GEMM an expert on stream i % 4, util/multi_stream.cpp: 4 compute streams).
FLOPs: 2 m k n a GEMM, three GEMM passes a matrix for forward and backward; the time includes
the gated activation between the two (as the layer runs it), so the rate is a little under the
GEMMs' own. Each shape and way
is guarded, the JSON rewritten after each, and what --budget-s leaves is recorded as skipped.
Exit 77 without a CUDA device.
"""
import argparse
import json
import sys
import time

from gpu_measure import add_budget, check_budget, cuda_torch, finish, timed

# (name, experts on a rank, tokens an expert, hidden, expert width): the bench's rows, tokens an
# expert as the planner computes them (balanced routing: tokens x ep x top_k / experts)
SHAPES = [
    ("qwen3-235b ep8 tp4 (4K; +75 %)", 16, 512, 4096, 1536),
    ("qwen3-235b ep32 tp2 (4K; +1 %)", 4, 4096, 4096, 1536),
    ("qwen3-235b ep8 tp4 cp (16K-128K)", 16, 2048, 4096, 1536),
    ("qwen3-30b-a3b ep16 (4K; +55 %)", 8, 4096, 2048, 768),
    ("gpt-oss-120b ep8 (4K; +52 %)", 16, 1024, 2880, 2880),
]


def mlp_grouped(torch, x, w1, w2, offs, width):
    """fc1 (gated: 2 x width), SiLU x up, fc2, with torch's grouped GEMM; weights [E, out, in]."""
    h = torch._grouped_mm(x, w1.transpose(-2, -1), offs=offs)
    g, u = h[:, :width], h[:, width:]
    return torch._grouped_mm(torch.nn.functional.silu(g) * u, w2.transpose(-2, -1), offs=offs)


def mlp_loop(torch, x, w1, w2, m, width):
    outs = []
    for e in range(w1.shape[0]):
        h = x[e * m:(e + 1) * m] @ w1[e].t()
        outs.append((torch.nn.functional.silu(h[:, :width]) * h[:, width:]) @ w2[e].t())
    return torch.cat(outs)


def mlp_streams(torch, x, w1, w2, m, width, streams):
    """mlp_loop with expert e on streams[e % len(streams)], joined back to the current stream."""
    cur = torch.cuda.current_stream()
    outs = []
    for s in streams:
        s.wait_stream(cur)
    for e in range(w1.shape[0]):
        with torch.cuda.stream(streams[e % len(streams)]):
            h = x[e * m:(e + 1) * m] @ w1[e].t()
            outs.append((torch.nn.functional.silu(h[:, :width]) * h[:, width:]) @ w2[e].t())
    for s in streams:
        cur.wait_stream(s)
    return torch.cat(outs)


def measure(torch, way, experts, m, hidden, width):
    x = torch.randn(experts * m, hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w1 = (torch.randn(experts, 2 * width, hidden, device="cuda", dtype=torch.bfloat16) * 0.02).requires_grad_()
    w2 = (torch.randn(experts, hidden, width, device="cuda", dtype=torch.bfloat16) * 0.02).requires_grad_()
    if way == "grouped":
        offs = torch.arange(m, experts * m + 1, m, device="cuda", dtype=torch.int32)
        fwd = lambda: mlp_grouped(torch, x, w1, w2, offs, width)
    elif way == "streams4":
        streams = [torch.cuda.Stream() for _ in range(4)]
        fwd = lambda: mlp_streams(torch, x, w1, w2, m, width, streams)
    else:
        fwd = lambda: mlp_loop(torch, x, w1, w2, m, width)

    def both():
        fwd().backward(torch.ones(experts * m, hidden, device="cuda", dtype=torch.bfloat16))
    both()
    with torch.no_grad():
        f = timed(torch, fwd, 10)
    fb = timed(torch, both, 10)
    return f, fb


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_budget(ap, 20.0, "shapes")
    ap.add_argument("--json")
    a = ap.parse_args()
    check_budget(ap, a)
    torch = cuda_torch("expert_gemms")
    if torch is None:
        return 77
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "dtype": "bf16",
           "points": []}
    start = time.monotonic()
    for name, experts, m, hidden, width in SHAPES:
        for way in ("grouped", "loop", "streams4"):
            p = {"shape": name, "way": way, "experts": experts, "tokens_an_expert": m,
                 "hidden": hidden, "expert_width": width}
            if time.monotonic() - start > a.budget_s:
                p["skipped"] = "budget of %.0f s spent" % a.budget_s
            elif way == "grouped" and not hasattr(torch, "_grouped_mm"):
                p["skipped"] = "torch %s has no _grouped_mm" % torch.__version__
            else:
                try:
                    f, fb = measure(torch, way, experts, m, hidden, width)
                    flop = 2.0 * experts * m * hidden * 3 * width  # fc1 (2 x width) and fc2, forward
                    p.update({"forward_s": f, "forward_backward_s": fb,
                              "forward_tflops": flop / f / 1e12, "forward_backward_tflops": 3 * flop / fb / 1e12})
                    print("expert_gemms: %s, %s: forward %.0f, forward+backward %.0f TFLOP/s (%d experts x %d "
                          "tokens, %d -> %d)" % (name, way, p["forward_tflops"], p["forward_backward_tflops"],
                                                 experts, m, hidden, width), flush=True)
                except Exception as e:  # noqa: BLE001 (a refusal is evidence too)
                    torch.cuda.empty_cache()
                    p["error"] = repr(e)[:300]
                    print("expert_gemms: %s, %s failed: %r" % (name, way, e), flush=True)
            res["points"].append(p)
            if a.json:
                with open(a.json, "w") as out:
                    json.dump(res, out, indent=1)
    return finish("expert_gemms", res["points"], start)


if __name__ == "__main__":
    sys.exit(main())
