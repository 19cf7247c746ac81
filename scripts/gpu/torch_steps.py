#!/usr/bin/env python3
"""torch_steps.py — one PyTorch training process, run twice by the GPU window: under
`stepscope record` and under torch.profiler (--profile), so that stepscope's tracer is
checked against PyTorch's own profiler on the same program (window step 6), and, under
record alone, as the 1-rank NCCL communicator of step 5's fallback.

    python3 torch_steps.py [--steps 8] [--warmup 3] [--profile OUT.pt.trace.json.gz]

The program: a 4-layer MLP (Linear 4096 + GELU), bf16 autocast, AdamW, and each step's
gradients all-reduced by a 1-rank NCCL process group (PyTorch's own NCCL), so collectives
appear in the trace. Warm-up steps run first, outside any step range; then each measured step
(ending with a device synchronization) is an NVTX range "step", which record captures; with
--profile, torch.profiler (CPU and CUDA activity) runs over the measured steps only and
prof.step() is called between them, so that its trace holds one ProfilerStep#N range per
step. `stepscope analyze --step-range step` thus takes the NVTX ranges from record's trace
and, finding no range of that name in the profiler's, its ProfilerStep#N ranges: the same
steps. (A record_function("step") would not do: the profiler copies it onto a GPU
annotation lane too, and --step-range counts every range of the name.) The profiler's
trace is written gzipped. Prints the median step time.
"""
import argparse
import gzip
import os
import shutil
import tempfile
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--profile", help="write a torch.profiler trace here (.json or .json.gz)")
    a = ap.parse_args()
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    store = tempfile.NamedTemporaryFile(prefix="torch_steps.", delete=False).name
    dist.init_process_group("nccl", init_method="file://" + store, rank=0, world_size=1)
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(a.width, a.width), nn.GELU()) for _ in range(4)]).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(a.batch, a.width, device=dev)

    def one_step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(a.warmup):
        one_step()
    torch.cuda.synchronize()

    def measured(times, prof=None):
        for i in range(a.steps):
            if prof is not None and i > 0:
                prof.step()  # ProfilerStep#0 began with the profiler: one range per step
            t0 = time.perf_counter()
            torch.cuda.nvtx.range_push("step")
            one_step()
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
            times.append(time.perf_counter() - t0)

    times = []
    if a.profile:
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts) as prof:
            measured(times, prof)
        raw = a.profile[:-3] if a.profile.endswith(".gz") else a.profile
        prof.export_chrome_trace(raw)
        if a.profile.endswith(".gz"):
            with open(raw, "rb") as f, gzip.open(a.profile, "wb", compresslevel=6) as g:
                shutil.copyfileobj(f, g)
            os.remove(raw)
    else:
        measured(times)
    dist.destroy_process_group()
    os.unlink(store)
    times.sort()
    print("torch_steps: %d steps, median %.2f ms%s" % (a.steps, times[len(times) // 2] * 1e3,
                                                       ", profiler trace " + a.profile if a.profile else ""))


if __name__ == "__main__":
    main()
