#!/usr/bin/env python3
"""make_pipeline_traces.py — small real PyTorch pipeline-parallel traces for stepscope's tests.

Trains a small MLP with torch.distributed.pipelining on CPU (gloo) under torch.profiler, one
schedule per run, and writes one gzipped Kineto trace per rank (rank0.json.gz, ...). The
committed traces in tests/data/kineto/pipeline/<schedule>/ were made by it (torch from PyPI,
CPU only; see docs/kineto-import.md "Pipelines"):

    python scripts/torch/make_pipeline_traces.py --all tests/data/kineto/pipeline

runs every schedule family (each run is `torchrun --nproc_per_node N` of this file with
--worker): gpipe and 1f1b on 2 ranks, interleaved1f1b and zb (ScheduleInterleavedZeroBubble)
on 2 ranks x 2 virtual stages, 1f1b4 (1F1B on 4 ranks), and ppdp (1F1B on 2 stages x 2
data-parallel replicas: a DeviceMesh ("dp", "pp"), each stage's gradients all-reduced over
its "mesh_dp" group after the step). The model: per stage a few
Linear+ReLU layers (hidden 1024, a batch of 64 rows: about a millisecond of compute per layer
and micro-batch, well above gloo's latency); the last stage has an extra layer on purpose
(--slow-last) so that the traces carry an imbalance as well as the schedule's fill and
drain. Steps: 1 warm-up and 2 traced (ProfilerStep#N); 4 micro-batches (8 on 4 ranks).
"""
import argparse
import gzip
import os
import shutil
import subprocess
import sys

SCHEDULES = {  # name: (ranks, virtual stages per rank, micro-batches)
    "gpipe": (2, 1, 4),
    "1f1b": (2, 1, 4),
    "interleaved1f1b": (2, 2, 4),
    "zb": (2, 2, 4),
    "1f1b4": (4, 1, 8),  # more micro-batches than stages, so stage 0 alternates too
    "ppdp": (4, 1, 4),  # 2 pipeline stages x 2 data-parallel replicas (DeviceMesh dp x pp)
}


def worker(args):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,
                                              ScheduleInterleaved1F1B,
                                              ScheduleInterleavedZeroBubble)
    from torch.profiler import ProfilerActivity, profile, schedule

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    hidden, batch = args.hidden, args.batch
    microbatches = args.microbatches or SCHEDULES[args.schedule][2]
    name = args.schedule
    virtual = SCHEDULES[name][1]
    pp_group = dp_group = None
    pp_size, pp_rank = world, rank
    if name == "ppdp":
        # a 2-D mesh: rows are pipelines (group "mesh_pp"), columns data-parallel replicas
        # ("mesh_dp"); each pipeline's stages exchange activations inside its own pp group and
        # each stage all-reduces its gradients with its replica in the other pipeline
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("dp", "pp"))
        pp_group, dp_group = mesh.get_group("pp"), mesh.get_group("dp")
        pp_size, pp_rank = dist.get_world_size(pp_group), dist.get_rank(pp_group)
    nstages = pp_size * virtual
    stage_ids = [pp_rank + i * pp_size for i in range(virtual)]  # stage v on pp rank v % pp
    stages = []
    for sid in stage_ids:
        layers = args.layers + (args.slow_last if sid == nstages - 1 else 0)
        mod = nn.Sequential(*[nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU())
                              for _ in range(layers)])
        stages.append(PipelineStage(mod, sid, nstages, torch.device("cpu"), group=pp_group))

    def loss_fn(out, target):
        return ((out - target) ** 2).mean()

    cls = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B, "1f1b4": Schedule1F1B, "ppdp": Schedule1F1B,
           "interleaved1f1b": ScheduleInterleaved1F1B, "zb": ScheduleInterleavedZeroBubble}[name]
    if virtual > 1:
        sched = cls(stages, n_microbatches=microbatches, loss_fn=loss_fn)
    else:
        sched = cls(stages[0], n_microbatches=microbatches, loss_fn=loss_fn)
    x, y = torch.randn(batch, hidden), torch.randn(batch, hidden)
    has_first, has_last = 0 in stage_ids, nstages - 1 in stage_ids
    path = os.path.join(args.out, f"rank{rank}.json")
    with profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=0, warmup=1, active=args.steps),
                 on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        for _ in range(args.steps + 1):
            kwargs = {}
            if has_last:
                kwargs = {"target": y, "losses": []}
            if has_first:
                sched.step(x, **kwargs)
            else:
                sched.step(**kwargs)
            if dp_group is not None:  # data parallelism: the stage's gradients averaged
                for st in stages:
                    for prm in st.submod.parameters():
                        dist.all_reduce(prm.grad, group=dp_group)
                        prm.grad.div_(dist.get_world_size(dp_group))
                        prm.grad = None
            prof.step()
    dist.destroy_process_group()
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    os.remove(path)


def launch(name, out, args):
    ranks = SCHEDULES[name][0]
    os.makedirs(out, exist_ok=True)
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    cmd = [torchrun, "--nproc_per_node", str(ranks), "--master_port", str(args.port), __file__,
           "--worker", "--schedule", name, "--out", out, "--steps", str(args.steps),
           "--microbatches", str(args.microbatches or SCHEDULES[name][2]), "--hidden", str(args.hidden),
           "--batch", str(args.batch), "--layers", str(args.layers),
           "--slow-last", str(args.slow_last)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run(cmd, check=True, env=env)
    for r in range(ranks):
        p = os.path.join(out, f"rank{r}.json.gz")
        print(f"{p}: {os.path.getsize(p)} bytes")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--schedule", choices=sorted(SCHEDULES), default="1f1b")
    ap.add_argument("--out", help="directory for one schedule's rank traces")
    ap.add_argument("--all", metavar="DIR", help="every schedule, into DIR/<schedule>/")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--steps", type=int, default=2, help="traced steps (after 1 warm-up)")
    ap.add_argument("--microbatches", type=int, default=0, help="default: the schedule's")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--layers", type=int, default=1, help="Linear+ReLU layers per stage")
    ap.add_argument("--slow-last", type=int, default=1,
                    help="extra layers on the last stage (an imbalance)")
    ap.add_argument("--port", type=int, default=29531)
    args = ap.parse_args()
    if args.worker:
        worker(args)
    elif args.all:
        for name in SCHEDULES:
            launch(name, os.path.join(args.all, name), args)
    elif args.out:
        launch(args.schedule, args.out, args)
    else:
        ap.error("give --out DIR (one schedule) or --all DIR")


if __name__ == "__main__":
    main()
