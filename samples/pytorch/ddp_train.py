"""ddp_train.py — a small PyTorch DDP training script to trace with stepscope.

Run it unchanged under the tracer:

    stepscope record -o runs/ddp -- torchrun --nproc-per-node 2 samples/pytorch/ddp_train.py --steps 20

Each rank writes runs/ddp/rank-0000N.trace.zst: CUDA kernels and copies (CUPTI),
NCCL all-reduces (profiler plugin), and the NVTX ranges below (one `step` range
per iteration, with the step number as payload, so the analyzer finds steps).
Works on one GPU too: with --nproc-per-node 2 and a single device, NCCL >= 2.30
needs NCCL_MULTI_RANK_GPU_ENABLE=1; otherwise use the gloo-free default of one
rank per GPU.

Without a GPU, --cpu-profile DIR trains on the CPU (gloo all-reduces) under
torch.profiler and writes each rank's PyTorch (Kineto) trace, DIR/rank-N.json.gz,
which the analyzer reads like a stepscope run (steps are the profiler's
ProfilerStep#N). The committed sample cpu-ddp2/ came from:

    torchrun --nproc-per-node 2 samples/pytorch/ddp_train.py --cpu-profile samples/pytorch/cpu-ddp2 \
        --steps 5 --width 256 --batch 16
"""
import argparse
import gzip
import os
import shutil

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--cpu-profile", metavar="DIR", help="CPU + gloo, torch.profiler traces into DIR")
    args = parser.parse_args()
    if args.cpu_profile:
        return cpu_profile(args)

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



def cpu_profile(args):
    """The same model and loop on the CPU, profiled: one Kineto trace per rank."""
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(*[nn.Sequential(nn.Linear(args.width, args.width), nn.GELU()) for _ in range(4)]))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(args.batch, args.width)
    os.makedirs(args.cpu_profile, exist_ok=True)
    out = os.path.join(args.cpu_profile, "rank-%d.json" % rank)
    # one warm-up step unrecorded, then args.steps profiled steps (ProfilerStep#N)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=args.steps),
                 record_shapes=True, on_trace_ready=lambda p: p.export_chrome_trace(out)) as prof:
        for step in range(args.steps + 1):
            with record_function("forward"):
                loss = model(x).pow(2).mean()
            with record_function("backward"):
                loss.backward()
            with record_function("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            prof.step()
    with open(out, "rb") as f, gzip.open(out + ".gz", "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    os.remove(out)
    if rank == 0:
        print("wrote %s/rank-N.json.gz" % args.cpu_profile, flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
