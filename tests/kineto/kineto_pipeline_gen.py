"""kineto_pipeline_gen.py — CPU-only Kineto traces of a pipeline-parallel job with exact truth
(make_kineto.py --pipeline SCHEDULE; docs/kineto-import.md "Pipelines").

Each rank is one pipeline stage of a job shaped like torch.distributed.pipelining on gloo, as
the real traces of tests/data/kineto/pipeline hold it: per step a `ProfilerStep#N`
user_annotation; per micro-batch and pass the point-to-point calls (`c10d::recv_` before the
work that needs data from a neighbour, `c10d::send` after the work that feeds one: cpu_op,
1 ns each) with gloo's `gloo:recv` / `gloo:send` user_annotation spanning the wait, and the
work itself: a forward `aten::linear` (cpu_op) or a backward
`autograd::engine::evaluate_function: AddmmBackward0` (cpu_op). Schedules:

  gpipe  all forwards then all backwards, wrapped in ScheduleGPipe's own `Forward i` /
         `Backward i` annotations;
  1f1b   PyTorch's Schedule1F1B order (stage s: min(M, p - s) forwards, then a backward and
         a forward in turn, then the remaining backwards), with no annotation at all (as
         Schedule1F1B writes none), so the importer must infer it from the order of work.

The timeline is an as-soon-as-possible run of each stage's order: work waits for its own
stage and for the neighbour's work on the same micro-batch (plus that neighbour's send
call). Every step starts on every rank at the same time and lasts the makespan over the ranks,
so the ProfilerStep ranges tile the time and each rank's bubble in a step is exactly the step
minus its compute (the p2p calls are pipeline communication, part of the bubble).
OUT_DIR.truth.json gives, per rank, that bubble and the compute per step, and the schedule.
"""
import json
import os

T0 = 1_700_000_000_000_000_123  # ns
CALL = 1  # ns: a p2p call on the host


def stage_order(schedule, p, m, s):
    if schedule == "gpipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    warm = min(m, p - s)
    order = [("F", i) for i in range(warm)]
    f, b = warm, 0
    while b < m:
        order.append(("B", b))
        b += 1
        if f < m:
            order.append(("F", f))
            f += 1
    return order


def simulate(schedule, p, m, fwd, bwd, late=None):
    """Per stage: a list of (pass, mb, recv_start or None, start, end, send_end or None); the
    makespan. Times in ns from the step's start. late: (stage, ns): that stage's first forward
    starts ns later than it could (a host gap: nothing in the trace)."""
    orders = [stage_order(schedule, p, m, s) for s in range(p)]
    done = {}  # (stage, pass, mb) -> when its data is out (after the send call)
    free = [0] * p
    ptr = [0] * p
    out = [[] for _ in range(p)]
    progress = True
    while progress:
        progress = False
        for s in range(p):
            while ptr[s] < len(orders[s]):
                ps, mb = orders[s][ptr[s]]
                dep_stage = s - 1 if ps == "F" else s + 1
                needs = 0 <= dep_stage < p
                if needs and (dep_stage, ps, mb) not in done:
                    break
                t = free[s]
                recv = None
                if needs:
                    recv = t
                    t += CALL
                    t = max(t, done[(dep_stage, ps, mb)])
                if late and s == late[0] and (ps, mb) == ("F", 0):
                    t += late[1]
                dur = fwd[s] if ps == "F" else bwd[s]
                start, end = t, t + dur
                feeds = 0 <= (s + 1 if ps == "F" else s - 1) < p
                send_end = end + CALL if feeds else None
                free[s] = send_end if feeds else end
                done[(s, ps, mb)] = free[s]
                out[s].append((ps, mb, recv, start, end, send_end))
                ptr[s] += 1
                progress = True
    assert all(ptr[s] == len(orders[s]) for s in range(p)), "schedule deadlocks"
    return out, max(free)


def us(ns):
    return "%d.%03d" % (ns // 1000, ns % 1000)


def write(out_dir, schedule, p, m, steps, fwd_us, bwd_us, slow_stage, slow_factor, gz,
          late_stage=-1, late_us=0):
    import gzip

    fwd = [fwd_us * 1000 * (slow_factor if s == slow_stage else 1) for s in range(p)]
    bwd = [bwd_us * 1000 * (slow_factor if s == slow_stage else 1) for s in range(p)]
    late = (late_stage, late_us * 1000) if late_stage >= 0 else None
    items, makespan = simulate(schedule, p, m, fwd, bwd, late)
    period = makespan + 1000  # 1 us after the last work: the step's end on every rank
    os.makedirs(out_dir, exist_ok=True)
    truth = {"schedule": "afab" if schedule == "gpipe" else "1f1b", "stages": p,
             "microbatches": m, "virtual_stages": 1, "steps": steps, "ranks": [],
             "late_stage": late_stage, "late_ns": late[1] if late else 0}
    for s in range(p):
        pid = tid = 5000 + s
        ev = []

        def x(cat, name, start, dur, args=None):
            e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": start,
                 "dur": dur}
            if args:
                e["args"] = args
            ev.append(e)

        for k in range(steps):
            base = T0 + k * period
            x("user_annotation", "ProfilerStep#%d" % (k + 1), base, period)
            for ps, mb, recv, start, end, send_end in items[s]:
                peer = s - 1 if ps == "F" else s + 1
                first = recv if recv is not None else start
                last = send_end if send_end is not None else end
                if schedule == "gpipe":
                    x("user_annotation", ("Forward %d" if ps == "F" else "Backward %d") % mb,
                      base + first, last - first)
                if recv is not None:
                    x("cpu_op", "c10d::recv_", base + recv, CALL,
                      {"Concrete Inputs": ["", "", str(peer), "0"]})
                    x("user_annotation", "gloo:recv", base + recv + CALL, start - recv - CALL)
                name = "aten::linear" if ps == "F" else \
                    "autograd::engine::evaluate_function: AddmmBackward0"
                x("cpu_op", name, base + start, end - start)
                if send_end is not None:
                    to = s + 1 if ps == "F" else s - 1
                    x("cpu_op", "c10d::send", base + end, CALL,
                      {"Concrete Inputs": ["", "", str(to), "0"]})
        compute = m * (fwd[s] + bwd[s])
        truth["ranks"].append({"rank": s, "step_ns": period, "compute_ns": compute,
                               "bubble_ns": period - compute})
        ev.sort(key=lambda e: (e["ts"], -e["dur"]))
        ev.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
                   "tid": "PyTorch Profiler", "ts": T0, "dur": steps * period})
        path = os.path.join(out_dir, "rank%d.json" % s + (".gz" if gz else ""))
        opener = gzip.open if gz else open
        with opener(path, "wt", encoding="utf-8") as f:
            f.write('{"schemaVersion": 1, "deviceProperties": [], "distributedInfo": ')
            f.write(json.dumps({"backend": "gloo", "rank": s, "world_size": p}))
            f.write(', "traceEvents": [\n')
            lines = []
            for e in ev:
                body = json.dumps({k: v for k, v in e.items() if k not in ("ts", "dur")})
                lines.append(body[:-1] + ', "ts": %s, "dur": %s}' % (us(e["ts"]), us(e["dur"])))
            f.write(",\n".join(lines))
            f.write('\n], "traceName": "rank%d.json"}\n' % s)
    with open(out_dir.rstrip("/") + ".truth.json", "w") as f:
        json.dump(truth, f, indent=1)
    return truth
