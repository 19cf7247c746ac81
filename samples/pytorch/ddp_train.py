"""ddp_train.py — a small PyTorch DDP training script to trace with stepscope.

Run it unchanged under the tracer:

    stepscope record -o runs/ddp -- torchrun --nproc-per-node 2 samples/pytorch/ddp_train.py --steps 20

Each rank writes runs/ddp/rank-0000N.trace.zst: CUDA kernels and copies (CUPTI),
NCCL all-reduces (profiler plugin), and the NVTX ranges below (one `step` range
per iteration, with the step number as payload, so the analyzer finds steps).
Works on one GPU too: with --nproc-per-node 2 and a single device, NCCL >= 2.30
needs NCCL_MULTI_RANK_GPU_ENABLE=1; otherwise use the gloo-free default of one
rank per GPU.
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()

    dist.init_process_group("nccl")
    rank = dist.get_rank()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local_rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    torch.manual_seed(0)

    model = nn.Sequential(*[nn.Sequential(nn.Linear(args.width, args.width), nn.GELU()) for _ in range(4)])
    model = DDP(model.to(device), device_ids=[device.index], bucket_cap_mb=25)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(args.batch, args.width, device=device)

    for step in range(args.steps):
        torch.cuda.nvtx.range_push("step")  # analyzer step window
        with torch.autocast("cuda", dtype=torch.bfloat16):
            torch.cuda.nvtx.range_push("forward")
            loss = model(x).float().pow(2).mean()
            torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("backward")
        loss.backward()
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("optimizer")
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_pop()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.5f}", flush=True)
    torch.cuda.synchronize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
