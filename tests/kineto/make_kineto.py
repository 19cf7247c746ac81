#!/usr/bin/env python3
"""make_kineto.py — writes a run directory of synthetic PyTorch-profiler
(Kineto) traces shaped like real ones, one rank-N.json[.gz] per rank.

What a file holds (the fields and args of torch.profiler 2.x output):
  - schemaVersion, deviceProperties, distributedInfo (rank, world_size,
    pg_config), traceEvents, traceName, and optionally baseTimeNanoseconds
    with `ts` written relative to it (as newer Kineto does);
  - per step: a `ProfilerStep#N` user_annotation on the main thread, and its
    GPU-side gpu_user_annotation copy; cudaLaunchKernel / cudaMemcpyAsync /
    cudaMemsetAsync cuda_runtime events with `correlation`; kernels on a
    compute stream (7) with stream, device, correlation, grid, block;
    NCCL kernels (`ncclDevKernel_*`) on a communication stream (20) carrying
    the collective args (Collective name, In/Out msg nelems, Group size,
    dtype, Process Group Name/Description/Ranks); a host-to-device copy and a
    memset; ac2g flow events; process/thread metadata events;
  - several process groups: data parallel groups (gradient all-reduce per
    bucket) and tensor parallel pairs (all-reduce in forward);
  - timestamps in microseconds with three decimals (nanosecond resolution);
  - options: CUDA graph replay (--graphs: one cudaGraphLaunch whose kernels
    share its correlation id), kernels without correlation (--missing-corr),
    gzip output (--gzip), overlap of the gradient all-reduce with backward
    on or off (--overlap), per-step jitter (--jitter-us, deterministic seed),
    NCCL metadata only on `record_param_comms` CPU ops around the launch
    and not on the kernels, as older PyTorch writes it (--param-comms), or
    nowhere (--strip-comm-metadata: bare NCCL kernels, as some profiles
    have); one NCCL stream per process group, as PyTorch's ProcessGroupNCCL
    does (--comm-streams: tp groups on 21, dp groups on 22); the tensor-
    parallel degree (--tp, default 2 for an even world); a slow rank whose
    backward GEMMs take --late-us longer (--late-rank); a CPU op per step
    (`aten::mm`, with Input Dims, Input type, External id, Sequence number)
    on a second host thread named by its own thread_name event
    "thread T (pt_autograd_0)", and the GPU stream's "stream 7 " name (--op-args).

Collective members leave together: an all-reduce ends on every member at
max(arrival) + transfer time, as NCCL does. Everything is integer
nanoseconds internally, so expected values can be computed exactly.

Usage: make_kineto.py OUT_DIR [--ranks 4] [--steps 4] [--layers 8]
       [--overlap on|off] [--gzip] [--graphs] [--missing-corr N]
       [--jitter-us 20] [--seed 1] [--base-ns] [--scale K] [--param-comms]
       [--strip-comm-metadata] [--comm-streams] [--tp N] [--late-rank R --late-us U] [--op-args]
       make_kineto.py OUT_DIR --pipeline gpipe|1f1b [--ranks P] [--microbatches M] [--steps N]
       [--fwd-us F] [--bwd-us B] [--slow-stage S --slow-factor K]   (kineto_pipeline_gen.py)
       [--late-rank S --late-us U]  (stage S's first forward of each step starts U us late)
"""
import argparse
import gzip
import json
import os
import random

T0 = 1_700_000_000_000_000_123  # ns: an epoch-like start with sub-us digits
COMPUTE_STREAM, COMM_STREAM = 7, 20
GEMM = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn"
ELEM = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
        "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)")
NCCL_AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
ADAM = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::FusedAdamW>"


# --op-args: the CPU op's args as torch.profiler writes them (record_shapes)
OP_ARGS = {"External id": 7, "Record function id": 0, "Sequence number": 3, "Fwd thread id": 1,
           "Input Dims": [[64, 128], [128, 256]], "Input type": ["float", "float"],
           "Input Strides": [[128, 1], [256, 1]], "Concrete Inputs": ["", ""]}


def us(ns):
    """ns (int) -> a JSON number in microseconds with 3 decimals, exactly."""
    neg = ns < 0
    ns = abs(ns)
    s = "%d.%03d" % (ns // 1000, ns % 1000)
    return ("-" + s) if neg else s


class Rank:
    def __init__(self, rank, args):
        self.rank = rank
        self.events = []
        self.corr = 1000 * (rank + 1)
        self.host = T0  # host cursor on the main thread
        self.free = {COMPUTE_STREAM: T0, COMM_STREAM: T0}
        self.args = args
        self.missing_left = args.missing_corr
        self.pid = 4000 + rank
        self.tid = 4000 + rank

    def next_corr(self):
        self.corr += 1
        return self.corr

    def x(self, cat, name, pid, tid, s, d, args=None):
        e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": s, "dur": d}
        if args is not None:
            e["args"] = args
        self.events.append(e)

    def launch(self, api="cudaLaunchKernel", dur=4000):
        """A runtime call on the main thread; returns (corr, end)."""
        c = self.next_corr()
        self.x("cuda_runtime", api, self.pid, self.tid, self.host, dur,
               {"External id": c, "cbid": 211, "correlation": c})
        end = self.host + dur
        self.host = end + 1000
        return c, end

    def kernel(self, name, stream, start, dur, corr, extra=None, grid=(108, 1, 1), block=(256, 1, 1)):
        args = {"External id": corr, "queued": 0, "device": self.rank % 8, "context": 1,
                "stream": stream, "correlation": corr, "registers per thread": 128,
                "shared memory": 49152, "blocks per SM": 1.0, "warps per SM": 8.0,
                "grid": list(grid), "block": list(block), "est. achieved occupancy %": 12}
        if corr is None or (self.missing_left > 0 and stream == COMPUTE_STREAM and name == ELEM):
            if corr is not None:
                self.missing_left -= 1
            del args["correlation"]
        if extra:
            args.update(extra)
        self.x("kernel", name, self.rank % 8, stream, start, dur, args)
        if "correlation" in args:
            self.events.append({"ph": "f", "id": corr, "pid": self.rank % 8, "tid": stream, "ts": start,
                                "cat": "ac2g", "name": "ac2g", "bp": "e"})
        self.free[stream] = start + dur
        return start + dur

    def compute(self, name, dur):
        c, end = self.launch()
        start = max(end + 3000, self.free[COMPUTE_STREAM])
        return self.kernel(name, COMPUTE_STREAM, start, dur, c)


def coll_args(nelems, pg_name, pg_desc, ranks):
    return {"Collective name": "allreduce", "In msg nelems": nelems, "Out msg nelems": nelems,
            "Group size": len(ranks), "dtype": "BFloat16", "In split size": "[]", "Out split size": "[]",
            "Process Group Name": pg_name, "Process Group Description": pg_desc,
            "Process Group Ranks": "[" + ", ".join(str(r) for r in ranks) + "]"}


def comm_stream(args, pg_desc):
    """The NCCL stream of a process group: one for all, or one per group kind."""
    if not args.comm_streams:
        return COMM_STREAM
    return 21 if pg_desc == "tp_group" else 22


def collective(ranks_objs, members, nelems, pg_name, pg_desc, ready, transfer):
    """All-reduce among `members` (rank objects); ready[r] = when rank r may start."""
    stream = comm_stream(members[0].args, pg_desc)
    starts = {}
    launch = {}
    args = coll_args(nelems, pg_name, pg_desc, [m.rank for m in members])
    for r in members:
        op_start = r.host
        if r.args.param_comms:
            r.host += 1000  # c10d op -> record_param_comms -> nccl:all_reduce -> launch
        c, end = r.launch()
        if r.args.param_comms:
            ext = 900_000 + c
            r.x("cpu_op", "record_param_comms", r.pid, r.tid, op_start, end + 500 - op_start,
                dict(args, **{"External id": ext, "Rank": r.rank}))
            r.x("cpu_op", "nccl:all_reduce", r.pid, r.tid, op_start + 500, end + 200 - op_start - 500,
                {"External id": ext + 1})
        launch[r.rank] = c
        starts[r.rank] = max(ready[r.rank], end + 3000, r.free.get(stream, 0))
    end = max(starts.values()) + transfer
    for r in members:
        bare = r.args.param_comms or r.args.strip_comm_metadata
        r.kernel(NCCL_AR, stream, starts[r.rank], end - starts[r.rank], launch[r.rank],
                 None if bare else dict(args), grid=(24, 1, 1), block=(640, 1, 1))
    return end


def build(args):
    world = args.ranks
    tp = args.tp if args.tp else (2 if world % 2 == 0 and world > 1 else 1)
    dp = world // tp
    rng = random.Random(args.seed)
    ranks = [Rank(r, args) for r in range(world)]
    sc = args.scale
    # process groups: dp groups (same tp rank), tp groups (same dp rank)
    dp_groups = {t: [r for r in range(world) if r % tp == t] for t in range(tp)}
    tp_groups = {d: [d * tp + t for t in range(tp)] for d in range(dp)}
    dp_pg_name = {t: str(1 + t) for t in range(tp)}
    tp_pg_name = {d: str(1 + tp + d) for d in range(dp)}
    for step in range(args.steps):
        jit = [rng.randint(0, args.jitter_us) * 1000 for _ in range(world)]
        step_host_start = {}
        for r in ranks:
            r.host = max(r.host, r.free[COMPUTE_STREAM] - 200_000) + jit[r.rank]
            step_host_start[r.rank] = r.host
            # input batch copy and grad zeroing
            c, end = r.launch("cudaMemcpyAsync")
            s = max(end + 2000, r.free[COMPUTE_STREAM])
            r.x("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", r.rank % 8, COMPUTE_STREAM, s, 40_000,
                {"device": r.rank % 8, "context": 1, "stream": COMPUTE_STREAM, "correlation": c,
                 "bytes": 4 << 20, "memory bandwidth (GB/s)": 104.8})
            r.free[COMPUTE_STREAM] = s + 40_000
            c, end = r.launch("cudaMemsetAsync")
            s = max(end + 2000, r.free[COMPUTE_STREAM])
            r.x("gpu_memset", "Memset (Device)", r.rank % 8, COMPUTE_STREAM, s, 10_000,
                {"device": r.rank % 8, "context": 1, "stream": COMPUTE_STREAM, "correlation": c,
                 "bytes": 1 << 20, "memory bandwidth (GB/s)": 104.8})
            r.free[COMPUTE_STREAM] = s + 10_000
        # forward: per layer gemm + add; a tensor-parallel all-reduce every layer
        for layer in range(args.layers):
            for r in ranks:
                r.compute(GEMM, 300_000 * sc + (1000 * (r.rank % 3) if args.jitter_us else 0))
                r.compute(ELEM, 50_000 * sc)
            if tp > 1:
                for d, members in tp_groups.items():
                    objs = [ranks[m] for m in members]
                    ready = {m.rank: m.free[COMPUTE_STREAM] for m in objs}
                    end = collective(ranks, objs, 4 << 20, tp_pg_name[d], "tp_group", ready, 40_000 * sc)
                    for m in objs:  # the next layer needs the reduced activations
                        m.free[COMPUTE_STREAM] = max(m.free[COMPUTE_STREAM], end)
        # CUDA graph replay of a small block (kernels share the launch's correlation)
        if args.graphs:
            for r in ranks:
                c, end = r.launch("cudaGraphLaunch", 6000)
                s = max(end + 3000, r.free[COMPUTE_STREAM])
                for g in range(3):
                    s = r.kernel(GEMM if g != 1 else ELEM, COMPUTE_STREAM, s, 30_000 * sc, c) + 1000
        # backward: per layer a gemm; gradient buckets every 2 layers
        bucket_ready = []
        for layer in range(args.layers):
            for r in ranks:
                r.compute(GEMM, 600_000 * sc + (args.late_us * 1000 if r.rank == args.late_rank else 0))
            if layer % 2 == 1:
                bucket_ready.append({r.rank: r.free[COMPUTE_STREAM] for r in ranks})
        backward_end = {r.rank: r.free[COMPUTE_STREAM] for r in ranks}
        for b, ready in enumerate(bucket_ready):
            for t, members in dp_groups.items():
                objs = [ranks[m] for m in members]
                rdy = ready if args.overlap == "on" else backward_end
                collective(ranks, objs, 25 << 20, dp_pg_name[t], "dp_group", dict(rdy), 500_000 * sc)
        # optimizer after the gradients are reduced
        for r in ranks:
            r.free[COMPUTE_STREAM] = max([r.free[COMPUTE_STREAM]] +
                                         [r.free.get(st, 0) for st in (COMM_STREAM, 21, 22)])
            r.compute(ADAM, 200_000 * sc)
            r.host = max(r.host, r.free[COMPUTE_STREAM] - 100_000)
            s0 = step_host_start[r.rank]
            r.x("user_annotation", "ProfilerStep#%d" % step, r.pid, r.tid, s0, r.host - s0,
                {"External id": 1})
            r.x("gpu_user_annotation", "ProfilerStep#%d" % step, r.rank % 8, COMPUTE_STREAM, s0 + 50_000,
                r.free[COMPUTE_STREAM] - s0 - 50_000, {"External id": 1})
            if args.op_args:  # a backward op on the autograd thread, at the step's start
                r.x("cpu_op", "aten::mm", r.pid, r.tid + 1, s0, 3000, OP_ARGS)
            r.host += 20_000
    return ranks, world, tp, dp, dp_groups, tp_groups, dp_pg_name, tp_pg_name


def write(args):
    ranks, world, tp, dp, dp_groups, tp_groups, dp_pg_name, tp_pg_name = build(args)
    os.makedirs(args.out, exist_ok=True)
    pg_config = [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
                  "pg_size": world, "ranks": list(range(world))}]
    for t, m in dp_groups.items():
        pg_config.append({"pg_name": dp_pg_name[t], "pg_desc": "dp_group", "pg_size": len(m), "ranks": m})
    for d, m in tp_groups.items():
        pg_config.append({"pg_name": tp_pg_name[d], "pg_desc": "tp_group", "pg_size": len(m), "ranks": m})
    base = (T0 // 1_000_000_000) * 1_000_000_000 if args.base_ns else 0
    for r in ranks:
        evs = sorted(r.events, key=lambda e: (e["ts"], -e.get("dur", 0)))
        meta = [{"name": "process_name", "ph": "M", "ts": us(T0 - base), "pid": r.pid, "tid": 0,
                 "args": {"name": "python"}},
                {"name": "thread_name", "ph": "M", "ts": us(T0 - base), "pid": r.pid, "tid": r.tid,
                 "args": {"name": "thread %d (python)" % r.tid}},
                {"name": "process_name", "ph": "M", "ts": us(T0 - base), "pid": r.rank % 8, "tid": 0,
                 "args": {"name": "GPU %d" % (r.rank % 8)}}]
        if args.op_args:
            meta += [{"name": "thread_name", "ph": "M", "ts": us(T0 - base), "pid": r.pid, "tid": r.tid + 1,
                      "args": {"name": "thread %d (pt_autograd_0)" % (r.tid + 1)}},
                     {"name": "thread_name", "ph": "M", "ts": us(T0 - base), "pid": r.rank % 8,
                      "tid": COMPUTE_STREAM, "args": {"name": "stream %d " % COMPUTE_STREAM}}]
        path = os.path.join(args.out, "rank-%d.json" % r.rank + (".gz" if args.gzip else ""))
        opener = gzip.open if args.gzip else open
        with opener(path, "wt", encoding="utf-8") as f:
            f.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n')
            f.write(",\n".join('    {"id": %d, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85045231616, '
                               '"computeMajor": 9, "computeMinor": 0, "numSms": 132}' % d for d in range(8)))
            f.write('\n  ],\n  "distributedInfo": ')
            f.write(json.dumps({"backend": "nccl", "rank": r.rank, "world_size": world,
                                "pg_count": len(pg_config), "pg_config": pg_config, "nccl_version": "2.21.5"}))
            f.write(',\n  "traceEvents": [\n')
            first = True
            for e in meta + evs:
                e = dict(e)
                e["ts"] = us(e["ts"] - base) if isinstance(e["ts"], int) else e["ts"]
                if "dur" in e:
                    e["dur"] = us(e["dur"])
                # numbers written as raw text to keep exact decimals
                body = json.dumps({k: v for k, v in e.items() if k not in ("ts", "dur")})
                extra = ', "ts": %s' % e["ts"] + (', "dur": %s' % e["dur"] if "dur" in e else "")
                f.write(("" if first else ",\n") + "  " + body[:-1] + extra + "}")
                first = False
            f.write('\n  ],\n  "traceName": "%s",\n  "displayTimeUnit": "ms"' % os.path.basename(path))
            if args.base_ns:
                f.write(',\n  "baseTimeNanoseconds": %d' % base)
            f.write("\n}\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--overlap", choices=["on", "off"], default="on")
    p.add_argument("--gzip", action="store_true")
    p.add_argument("--graphs", action="store_true")
    p.add_argument("--missing-corr", type=int, default=0)
    p.add_argument("--jitter-us", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--base-ns", action="store_true")
    p.add_argument("--scale", type=int, default=1, help="multiplies kernel durations")
    p.add_argument("--param-comms", action="store_true",
                   help="NCCL metadata on record_param_comms CPU ops only (older PyTorch)")
    p.add_argument("--strip-comm-metadata", action="store_true",
                   help="NCCL kernels without collective metadata anywhere")
    p.add_argument("--comm-streams", action="store_true",
                   help="one NCCL stream per process group kind (tp 21, dp 22)")
    p.add_argument("--tp", type=int, default=0, help="tensor-parallel degree (0: 2 for an even world)")
    p.add_argument("--op-args", action="store_true",
                   help="a CPU op with args per step on a named autograd thread")
    p.add_argument("--late-rank", type=int, default=-1)
    p.add_argument("--late-us", type=int, default=0)
    p.add_argument("--pipeline", choices=["gpipe", "1f1b"],
                   help="instead: a CPU-only pipeline-parallel run with exact truth "
                        "(kineto_pipeline_gen.py; --ranks stages, --microbatches)")
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--fwd-us", type=int, default=1000)
    p.add_argument("--bwd-us", type=int, default=2000)
    p.add_argument("--slow-stage", type=int, default=-1, help="a stage whose work is slower")
    p.add_argument("--slow-factor", type=int, default=2)
    args = p.parse_args()
    if args.pipeline:
        import kineto_pipeline_gen
        kineto_pipeline_gen.write(args.out, args.pipeline, args.ranks, args.microbatches, args.steps,
                                  args.fwd_us, args.bwd_us, args.slow_stage, args.slow_factor,
                                  args.gzip, args.late_rank, args.late_us)
        return
    write(args)


if __name__ == "__main__":
    main()
