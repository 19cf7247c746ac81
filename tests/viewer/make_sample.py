#!/usr/bin/env python3
"""make_sample.py — writes a realistic stepscope run for the viewer's tests and bench.

What it is for: the viewer reads two files written by the analyzer, the Chrome-trace
export (`trace.json`, SPEC §5) and the JSON report (`report.json`, SPEC §4). This script
produces files of exactly that shape without the trainer or the analyzer, so the viewer
can be tested and benchmarked on its own, at any size.

How it works: it simulates a data x pipeline parallel job with a 1F1B (or AFAB) schedule.
Each pipeline stage runs its forward/backward micro-batches in schedule order; an op may
start only when the previous stage's forward (or next stage's backward) of the same
micro-batch has finished plus a send/recv. Every op becomes a host NVTX range
(`forward`/`backward`, args.microbatch/args.stage), a series of launch API calls on the
host thread, the kernels they launch on the compute stream (linked by flow events), and
pipeline send/recv kernels on the `pp` stream. Gradient all-reduce buckets run on the
`dp` stream during the last backward, partly hidden under compute. The derived tracks
(`exposed comm`, `idle`, `bubble`) and every number of the report are computed from
those same intervals with the SPEC §4 definitions, so the sample is self-consistent
(compute + exposed_comm + exposed_mem + idle = span, exactly).

Python standard library only. Deterministic for a given --seed.

  make_sample.py OUT_DIR [--dp 2] [--pp 2] [--microbatches 4] [--steps 3] [--layers 2]
                 [--schedule 1f1b|afab] [--events N] [--slow-rank R] [--seed S]

--events N picks the number of layers so that the export holds about N events.
"""

import argparse
import json
import os
import random
import sys

US = 1000  # ns per µs


# ----------------------------------------------------------------------------------
# interval arithmetic on sorted, disjoint [start, end) lists (integer ns)

def union(intervals):
    out = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return out


def intersect(a, b):
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append([s, e])
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(a, b):
    out = []
    j = 0
    for s, e in a:
        cur = s
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append([cur, b[k][0]])
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append([cur, e])
    return out


def clip(a, w0, w1):
    return [[max(s, w0), min(e, w1)] for s, e in a if e > w0 and s < w1]


def length(a):
    return sum(e - s for s, e in a)


# ----------------------------------------------------------------------------------
# schedule

def stage_order(schedule, stages, micro, s):
    """The order of (kind, microbatch) ops that stage s runs in one step."""
    if schedule == "afab":
        return [("F", m) for m in range(micro)] + [("B", m) for m in range(micro)]
    warm = min(stages - s - 1, micro)
    order = [("F", m) for m in range(warm)]
    f, b = warm, 0
    while f < micro:
        order.append(("F", f))
        f += 1
        order.append(("B", b))
        b += 1
    while b < micro:
        order.append(("B", b))
        b += 1
    return order


def simulate_step(schedule, stages, micro, t0, fwd_ns, bwd_ns, p2p_ns, slow):
    """Returns {stage: [(kind, m, start, end)]} for one step starting at t0."""
    orders = {s: stage_order(schedule, stages, micro, s) for s in range(stages)}
    done = {}
    pos = {s: 0 for s in range(stages)}
    free = {s: t0 for s in range(stages)}
    out = {s: [] for s in range(stages)}
    remaining = sum(len(o) for o in orders.values())
    while remaining:
        progressed = False
        for s in range(stages):
            while pos[s] < len(orders[s]):
                kind, m = orders[s][pos[s]]
                if kind == "F":
                    dep = ("F", s - 1, m) if s > 0 else None
                else:
                    dep = ("B", s + 1, m) if s < stages - 1 else ("F", s, m)
                if dep is not None and dep not in done:
                    break
                ready = done[dep] + (p2p_ns if dep[1] != s else 0) if dep else t0
                start = max(free[s], ready)
                dur = (fwd_ns if kind == "F" else bwd_ns) * slow[s]
                end = start + int(dur)
                done[(kind, s, m)] = end
                out[s].append((kind, m, start, end))
                free[s] = end
                pos[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise RuntimeError("schedule deadlock")
    return out


# ----------------------------------------------------------------------------------

KERNELS_FWD = ["sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
               "layernorm_forward_kernel<__nv_bfloat16>", "flash_attention_forward",
               "gelu_forward_kernel"]
KERNELS_BWD = ["sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x256x64",
               "layernorm_backward_kernel<__nv_bfloat16>", "flash_attention_backward",
               "gelu_backward_kernel"]


class Writer:
    """Collects Chrome-trace events; writes them as one object-form JSON file."""

    def __init__(self):
        self.meta = []
        self.events = []  # (ts_ns, -dur_ns, json text)

    def m(self, ev):
        self.meta.append(json.dumps(ev, separators=(",", ":")))

    def x(self, pid, tid, name, start, end, cat, args):
        a = dict(args)
        a["category"] = cat
        text = ('{"ph":"X","pid":%d,"tid":%d,"name":%s,"cat":"%s","ts":%.3f,"dur":%.3f,"args":%s}'
                % (pid, tid, json.dumps(name), cat, start / US, (end - start) / US,
                   json.dumps(a, separators=(",", ":"))))
        self.events.append((start, start - end, text))

    def raw(self, ts, text):
        self.events.append((ts, 0, text))

    def write(self, path, metadata):
        self.events.sort(key=lambda e: (e[0], e[1]))
        with open(path, "w", encoding="utf-8") as f:
            f.write('{"traceEvents":[\n')
            f.write(",\n".join(self.meta + [e[2] for e in self.events]))
            f.write('\n],\n"displayTimeUnit":"ns",\n"metadata":')
            f.write(json.dumps(metadata))
            f.write("}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--dp", type=int, default=2)
    ap.add_argument("--pp", type=int, default=2)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--schedule", choices=["1f1b", "afab"], default="1f1b")
    ap.add_argument("--events", type=int, default=0, help="aim for about this many events")
    ap.add_argument("--slow-rank", type=int, default=-1, help="this rank computes 30%% slower")
    ap.add_argument("--fwd-us", type=float, default=0, help="forward time per layer (µs)")
    ap.add_argument("--seed", type=int, default=1)
    o = ap.parse_args()

    world = o.dp * o.pp
    per_layer = len(KERNELS_FWD)
    if o.events > 0:
        # events per kernel: kernel, launch, 2 flow halves, the idle gap after it (+ slack) ~ 6
        ops = world * o.steps * 2 * o.microbatches
        o.layers = max(1, round(o.events / (ops * per_layer * 6)))
    rnd = random.Random(o.seed)
    os.makedirs(o.out, exist_ok=True)

    fwd_layer_ns = int((o.fwd_us or 120) * US)
    fwd_ns = fwd_layer_ns * o.layers
    bwd_ns = 2 * fwd_ns
    p2p_ns = 40 * US
    allreduce_ns = int(0.35 * bwd_ns) + 200 * US
    theory = (o.pp - 1) / (o.microbatches + o.pp - 1)

    w = Writer()
    ranks_report = []
    origin = 0
    step_gap = 300 * US
    # the step windows are common to all ranks (like after clock alignment)
    step_t0 = origin + 50 * US
    steps = []
    for st in range(o.steps):
        slow = {s: 1.0 for s in range(o.pp)}
        if o.slow_rank >= 0:
            slow[o.slow_rank // o.dp % o.pp] = 1.3
        sched = simulate_step(o.schedule, o.pp, o.microbatches, step_t0 + 100 * US,
                              fwd_ns, bwd_ns, p2p_ns, slow)
        last = max(op[3] for ops in sched.values() for op in ops)
        t_end = last + allreduce_ns + 400 * US
        steps.append((st, step_t0, t_end, sched))
        step_t0 = t_end + step_gap

    corr_all = 0
    for r in range(world):
        stage = r // o.dp  # pp outer, dp inner (tp=cp=1)
        dp_rank = r % o.dp
        pid = r + 1
        host = "node%d" % (r // 8)
        gpu = r % 8
        w.m({"ph": "M", "pid": pid, "name": "process_name",
             "args": {"name": "rank %d (%s, GPU %d)" % (r, host, gpu)}})
        w.m({"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": r}})
        base = pid * 100
        tids = {"host": base + 1, "compute": base + 7, "dp": base + 13, "pp": base + 14,
                "memcpy": base + 15, "exposed comm": base + 90, "idle": base + 91,
                "bubble": base + 92}
        names = {"host": "thread %d (main)" % (4000 + r), "compute": "stream 7 (compute)",
                 "dp": "stream 13 (comm dp)", "pp": "stream 14 (comm pp)",
                 "memcpy": "stream 15 (memcpy)", "exposed comm": "exposed comm",
                 "idle": "idle", "bubble": "bubble"}
        for i, (k, tid) in enumerate(tids.items()):
            w.m({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                 "args": {"name": names[k]}})
            w.m({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index",
                 "args": {"sort_index": i}})

        comp, comm_pp, comm_dp, mem = [], [], [], []
        seq = {"dp": 0, "pp": 0}
        step_rows = []
        mem_bytes = 2 << 30
        for st, t0, t1, sched in steps:
            w.x(pid, tids["host"], "step", t0, t1, "host", {"step": st})
            # H2D copy of the batch
            c0 = t0 + 20 * US
            w.x(pid, tids["memcpy"], "Memcpy HtoD (Pageable -> Device)", c0, c0 + 60 * US,
                "memcpy", {"bytes": 4 << 20, "correlation": 0})
            mem.append([c0, c0 + 60 * US])
            ops = sched[stage]
            for kind, m, s0, s1 in ops:
                name = "forward" if kind == "F" else "backward"
                w.x(pid, tids["host"], name, s0 - 30 * US, s1 - 40 * US, "host",
                    {"microbatch": m, "stage": stage, "step": st})
                # receive activations/gradients, then kernels, then send
                peer = stage - 1 if kind == "F" else stage + 1
                if 0 <= peer < o.pp:
                    w.x(pid, tids["pp"], "ncclDevKernel_SendRecv", s0 - p2p_ns // 2, s0, "comm",
                        {"op": "recv", "peer": peer * o.dp + dp_rank, "bytes": 8 << 20,
                         "comm": "pp", "seq": seq["pp"], "microbatch": m})
                    comm_pp.append([s0 - p2p_ns // 2, s0])
                    seq["pp"] += 1
                kern = KERNELS_FWD if kind == "F" else KERNELS_BWD
                n = o.layers * per_layer
                span = s1 - s0
                t = s0
                for k in range(n):
                    d = int(span / n * (0.93 + 0.05 * rnd.random()))
                    kname = kern[k % per_layer]
                    corr_all += 1
                    corr = corr_all
                    ls = t - 12 * US
                    w.x(pid, tids["host"], "cudaLaunchKernel", ls, ls + 4 * US, "host",
                        {"correlation": corr})
                    w.x(pid, tids["compute"], kname, t, t + d, "compute",
                        {"correlation": corr, "layer": k // per_layer, "microbatch": m,
                         "grid": [132, 1, 1], "block": [256, 1, 1], "stream": 7})
                    fid = "%d:%d" % (r, corr)
                    w.raw(ls, '{"ph":"s","pid":%d,"tid":%d,"name":"launch","cat":"launch","id":"%s","ts":%.3f}'
                          % (pid, tids["host"], fid, (ls + 1 * US) / US))
                    w.raw(t, '{"ph":"f","bp":"e","pid":%d,"tid":%d,"name":"launch","cat":"launch","id":"%s","ts":%.3f}'
                          % (pid, tids["compute"], fid, t / US))
                    comp.append([t, t + d])
                    t += int(span / n)
                peer = stage + 1 if kind == "F" else stage - 1
                if 0 <= peer < o.pp:
                    w.x(pid, tids["pp"], "ncclDevKernel_SendRecv", s1, s1 + p2p_ns // 2, "comm",
                        {"op": "send", "peer": peer * o.dp + dp_rank, "bytes": 8 << 20,
                         "comm": "pp", "seq": seq["pp"], "microbatch": m})
                    comm_pp.append([s1, s1 + p2p_ns // 2])
                    seq["pp"] += 1
            # gradient all-reduce buckets: two during the last backward, one after it
            lastb = [op for op in ops if op[0] == "B"][-1]
            bstart, bend = lastb[2], lastb[3]
            buckets = [(bstart + (bend - bstart) // 3, allreduce_ns // 3),
                       (bstart + 2 * (bend - bstart) // 3, allreduce_ns // 3),
                       (bend + 20 * US, allreduce_ns // 3)]
            cur = 0
            for i, (b0, d) in enumerate(buckets):
                b0 = max(b0, cur)
                nb = 64 << 20
                w.x(pid, tids["dp"], "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", b0, b0 + d, "comm",
                    {"op": "all_reduce", "bytes": nb, "comm": "dp", "comm_size": o.dp,
                     "seq": seq["dp"], "bucket": i})
                comm_dp.append([b0, b0 + d])
                seq["dp"] += 1
                cur = b0 + d
            # optimizer
            o0 = cur + 30 * US
            w.x(pid, tids["host"], "optimizer", o0 - 20 * US, o0 + 150 * US, "host", {"step": st})
            w.x(pid, tids["compute"], "adamw_kernel", o0, o0 + 140 * US, "compute", {"step": st})
            comp.append([o0, o0 + 140 * US])
            mem_bytes += rnd.randint(-1 << 26, 1 << 26)
            w.raw(t0, '{"ph":"C","pid":%d,"name":"memory","ts":%.3f,"args":{"allocated_bytes":%d}}'
                  % (pid, t0 / US, mem_bytes))
            w.raw(o0, '{"ph":"C","pid":%d,"name":"memory","ts":%.3f,"args":{"allocated_bytes":%d}}'
                  % (pid, o0 / US, mem_bytes + (3 << 30)))
            step_rows.append((st, t0, t1))

        # ---- derived tracks and the report numbers, from the same intervals
        U_comp = union(comp)
        U_dp = union(comm_dp)
        U_pp = union(comm_pp)
        U_comm = union(comm_dp + comm_pp)
        U_mem = union(mem)
        U_all = union(comp + comm_dp + comm_pp + mem)
        rows = []
        for st, t0, t1 in step_rows:
            c = clip(U_comp, t0, t1)
            cm = clip(U_comm, t0, t1)
            busy = clip(U_all, t0, t1)
            exposed = subtract(cm, c)
            idle = subtract([[t0, t1]], busy)
            exposed_mem = subtract(clip(U_mem, t0, t1), union(c + cm))
            bubble = subtract([[t0, t1]], union(c + clip(U_dp, t0, t1)))
            for s, e in exposed:
                w.x(pid, tids["exposed comm"], "exposed comm", s, e, "derived", {"step": st})
            for s, e in idle:
                w.x(pid, tids["idle"], "idle", s, e, "derived", {"step": st})
            if o.pp > 1:
                for s, e in bubble:
                    w.x(pid, tids["bubble"], "bubble", s, e, "derived", {"step": st})
            span = t1 - t0
            comm_ns = length(cm)
            overlap = length(intersect(c, cm))
            row = {"step": st, "start_ns": t0, "end_ns": t1, "span_ns": span,
                   "busy_ns": length(busy), "idle_ns": length(idle), "compute_ns": length(c),
                   "comm_ns": comm_ns, "overlap_ns": overlap,
                   "exposed_comm_ns": length(exposed), "exposed_mem_ns": length(exposed_mem),
                   "overlap_ratio": (overlap / comm_ns) if comm_ns else None,
                   "bubble_ns": length(bubble) if o.pp > 1 else 0,
                   "bubble_ratio": (length(bubble) / span) if o.pp > 1 else 0.0,
                   "bubble_theory_ratio": theory}
            assert row["compute_ns"] + row["exposed_comm_ns"] + row["exposed_mem_ns"] + row["idle_ns"] == span
            rows.append(row)
        tot = {k: sum(rw[k] for rw in rows) for k in
               ("span_ns", "busy_ns", "idle_ns", "compute_ns", "comm_ns", "overlap_ns",
                "exposed_comm_ns", "exposed_mem_ns", "bubble_ns")}
        tot["overlap_ratio"] = tot["overlap_ns"] / tot["comm_ns"] if tot["comm_ns"] else None
        tot["bubble_ratio"] = tot["bubble_ns"] / tot["span_ns"]
        tot["bubble_theory_ratio"] = theory
        ranks_report.append({"rank": r, "host": host, "device": "NVIDIA H100 80GB HBM3",
                             "stage": stage, "dp_rank": dp_rank, "totals": tot, "steps": rows,
                             "_kernels": comp})

    metadata = {"stepscope_version": "0.1.0", "source": "make_sample.py", "world": world,
                "layout": {"world": world, "dp": o.dp, "tp": 1, "pp": o.pp, "cp": 1},
                "schedule": {"name": o.schedule, "stages": o.pp, "microbatches": o.microbatches,
                             "virtual_stages": 1, "bubble_theory": theory}}
    w.write(os.path.join(o.out, "trace.json"), metadata)

    mean_step = sum(r["totals"]["span_ns"] for r in ranks_report) / len(ranks_report) / o.steps
    ar_bytes = 64 << 20
    ar_t = allreduce_ns // 3
    algbw = ar_bytes / ar_t  # bytes/ns = GB/s
    for rr in ranks_report:
        del rr["_kernels"]
    report = {
        "schema_version": 1,
        "run": {"name": os.path.basename(os.path.abspath(o.out)), "world": world,
                "config": {"dp": o.dp, "pp": o.pp, "microbatches": o.microbatches,
                           "schedule": o.schedule, "layers": o.layers},
                "devices": [{"rank": r, "name": "NVIDIA H100 80GB HBM3", "host": "node%d" % (r // 8)}
                            for r in range(world)],
                "layout": metadata["layout"], "schedule": metadata["schedule"]},
        "ranks": ranks_report,
        "collectives": {
            "by_op": [
                {"op": "all_reduce", "comm": "dp", "bytes": ar_bytes, "count": 3 * o.steps * o.pp,
                 "transfer_ns_mean": ar_t, "skew_ns_mean": 15 * US, "algbw_GBps": algbw,
                 "busbw_GBps": algbw * 2 * (o.dp - 1) / o.dp},
                {"op": "send_recv", "comm": "pp", "bytes": 8 << 20,
                 "count": 2 * o.microbatches * (o.pp - 1) * o.dp * o.steps,
                 "transfer_ns_mean": p2p_ns // 2, "skew_ns_mean": 5 * US,
                 "algbw_GBps": (8 << 20) / (p2p_ns // 2), "busbw_GBps": (8 << 20) / (p2p_ns // 2)}],
            "stragglers": [{"rank": r, "caused_wait_ns": (2000 * US if r == o.slow_rank else 10 * US * (r + 1))}
                           for r in range(world)]},
        "kernels": {"top": [
            {"name": k, "count": o.layers * o.microbatches * o.steps * world,
             "total_ns": int(fwd_layer_ns / per_layer * o.layers * o.microbatches * o.steps * world * (2 if k in KERNELS_BWD else 1)),
             "share": 0.1} for k in KERNELS_FWD + KERNELS_BWD]},
        "idle_breakdown": [{"rank": r, "stream": "stream 7 (compute)",
                            "host_wait_ns": ranks_report[r]["totals"]["idle_ns"] // 2,
                            "launch_gap_ns": ranks_report[r]["totals"]["idle_ns"] // 8,
                            "sync_wait_ns": ranks_report[r]["totals"]["idle_ns"] // 4,
                            "other_ns": ranks_report[r]["totals"]["idle_ns"] - ranks_report[r]["totals"]["idle_ns"] // 2 - ranks_report[r]["totals"]["idle_ns"] // 8 - ranks_report[r]["totals"]["idle_ns"] // 4}
                           for r in range(world)],
        "alignment": {"method": "clock anchors + collective end times",
                      "offsets_ns": [0] * world},
        "mfu": {"step_seconds": mean_step / 1e9, "mfu": 0.41, "hfu": 0.45,
                "peak_flops_per_device": 989e12},
        "warnings": ["sample run generated by make_sample.py (not a real trace)"],
    }
    with open(os.path.join(o.out, "report.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    n = len(w.events) + len(w.meta)
    print("%s: %d events, %d ranks, %d steps, %d layers" % (o.out, n, world, o.steps, o.layers),
          file=sys.stderr)


if __name__ == "__main__":
    main()
