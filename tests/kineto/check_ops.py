#!/usr/bin/env python3
"""check_ops.py — `stepscope ops` on generated Kineto traces whose shapes and times are known,
so every FLOP, byte and nanosecond of the table is checked exactly (docs/ops.md gives the
formulas; the expected values below are worked out by hand from them, not by the analyzer's
code), and on small real torch CPU traces committed under tests/data/kineto/ops
(scripts/torch/make_op_traces.py).

Cases:
  gpu     an H100 trace: ProfilerStep#1 with aten::linear -> aten::addmm (bf16, one kernel),
          aten::bmm (two kernels), SDPA -> _scaled_dot_product_flash_attention (causal),
          aten::native_layer_norm, aten::add_ with a broadcast, aten::embedding, aten::sum,
          _softmax, a conv (aten::convolution -> aten::cudnn_convolution), convolution_backward,
          an op without a model (aten::cat), a kernel with no launch (unattributed), an op
          without shapes
  tokens  the same trace read token by token (STEPSCOPE_KINETO_FAST=off) and with a
          Concrete Inputs string that needs escapes: the same JSON
  split   the same trace and a torch trace read on two threads (the split import, forced at
          the middle): the same JSON
  cpu     a CPU-only trace: nested ops, each deepest modelled op counts its own time
  norms   the norm backwards (native_layer_norm_backward bf16 with weight and bias and fp32
          with dx only, native_group_norm_backward, native_batch_norm_backward in eval,
          miopen_batch_norm_backward, _fused_rms_norm_backward, and one without its
          output_mask: no FLOPs)
  analyze `stepscope analyze` reports the MFU from the ops' FLOPs (no FLOPs metadata): the
          same FLOPs as the table over the steps' time and the bf16 peak
  modules `--by module` (with_modules events): on the generated trace with a Block_0 module
          around linear and bmm (Linear_0 around linear), the exact device time and FLOPs of
          each module, and on the torch traces: the totals agree with the op table (times and
          FLOPs), a module's time holds its children's, the known layers' FLOPs
  memory  `--memory` ([memory] events) on a generated CPU trace: the exact peak and when, each
          step's peak, what was live at the peak with the ops that allocated it; the same
          token by token; and on the torch MLP trace: the fc1 weight's gradient (512 x 256
          floats) is live at the peak; `export --memory` writes the allocated and reserved
          bytes as counter tracks (JSON and Perfetto), plain `export` none
  peak    --peak replaces the datasheet's ceilings; a bad --peak is a usage error (2)
  csv     --csv rows agree with --json
  real    the committed torch CPU traces: the rows their models say (known layer sizes),
          the norm backwards of norms.pt.trace.json.gz among them

Usage: check_ops.py STEPSCOPE WORKDIR DATA_DIR
"""
import csv
import io
import json
import os
import subprocess
import sys

BIN, WORK, DATA = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(WORK, exist_ok=True)
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


def run(args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([BIN] + args, capture_output=True, text=True, env=e)
    return p.returncode, p.stdout, p.stderr


def ops_json(path, extra=(), env=None):
    rc, out, err = run(["ops", path, "--json", "-"] + list(extra), env)
    check(rc == 0, "ops %s exit %d: %s" % (path, rc, err))
    return json.loads(out) if rc == 0 else None


# ---- a generated GPU trace ----

def X(cat, name, ts_ns, dur_ns, tid=1, pid=1, args=None):
    e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts_ns / 1000, "dur": dur_ns / 1000}
    if args is not None:
        e["args"] = args
    return e


def shapes(dims, types, concrete=None):
    a = {"External id": 1, "Record function id": 0, "Input Dims": dims, "Input type": types}
    if concrete is not None:
        a["Concrete Inputs"] = concrete
    return a


class Gen:
    def __init__(self):
        self.events = []
        self.corr = 100
        self.t = 10_000  # ns after T0

    def op(self, name, dur, args, kernels=(), children=None):
        """A cpu_op of `dur` ns on thread 1 with kernels of the given durations, launched inside
        it, run on stream 7; `children` (a function) adds nested ops first."""
        start = self.t
        self.t += 100
        if children:
            children()
        for k in kernels:
            self.corr += 1
            self.events.append(X("cuda_runtime", "cudaLaunchKernel", self.t, 50, args={"correlation": self.corr}))
            self.events.append(X("kernel", "kernel_%s_%d" % (name, self.corr), 500_000 + self.corr * 10_000, k,
                                 tid=7, pid=0, args={"correlation": self.corr, "stream": 7, "device": 0}))
            self.t += 100
        end = max(self.t + 10, start + dur)
        self.events.append(X("cpu_op", name, start, end - start, args=args))
        self.t = end + 10


def gpu_trace(path, escaped=False, modules=False):
    g = Gen()
    bf, fl = "c10::BFloat16", "float"
    g.op("aten::linear", 1000, shapes([[8, 16, 64], [128, 64], [128]], [bf, bf, bf]),
         children=lambda: g.op("aten::addmm", 500, shapes([[128], [128, 64], [64, 128], [], []],
                                                         [bf, bf, bf, "Scalar", "Scalar"], ["", "", "", "1", "1"]),
                               kernels=[3000]))
    g.op("aten::bmm", 500, shapes([[4, 32, 16], [4, 16, 8]], [fl, fl]), kernels=[1000, 500])
    g.op("aten::scaled_dot_product_attention", 2000,
         shapes([[2, 4, 10, 8], [2, 4, 10, 8], [2, 4, 10, 8], [], [], [], [], []], [bf, bf, bf, "", "Double", "bool", "", "bool"],
                ["", "", "", "", "0.", "True", "", "False"]),
         children=lambda: g.op("aten::_scaled_dot_product_flash_attention", 800,
                               shapes([[2, 4, 10, 8], [2, 4, 10, 8], [2, 4, 10, 8], [], [], [], []],
                                      [bf, bf, bf, "Double", "bool", "bool", "Double"],
                                      ["", "", "", "0.", "True", "False", "0.125"]), kernels=[2000]))
    g.op("aten::native_layer_norm", 300, shapes([[4, 6, 32], [], [32], [32], []], [bf, "", bf, bf, "Double"],
                                                ["", "[32]", "", "", "1e-05"]), kernels=[700])
    g.op("aten::add_", 300, shapes([[4, 6, 32], [1, 6, 1], []], [fl, fl, "Scalar"], ["", "", "1"]), kernels=[400])
    g.op("aten::embedding", 300, shapes([[1000, 64], [2, 5], [], [], []], [fl, "long int", "Scalar", "bool", "bool"],
                                        ["", "", "-1", "False", "False"]), kernels=[600])
    g.op("aten::where", 300, shapes([[4, 8], [4, 8], [1, 8]], ["bool", bf, bf]), kernels=[50])
    g.op("aten::sum", 300, shapes([[8, 10], [], [], []], [fl, "", "bool", ""], ["", "[1]", "False", ""]), kernels=[200])
    g.op("aten::_softmax", 300, shapes([[3, 5], [], []], [fl, "Scalar", "bool"], ["", "-1", "False"]), kernels=[100])
    g.op("aten::convolution", 600, shapes([[2, 3, 8, 8], [4, 3, 3, 3], [4], [], [], [], [], [], []],
                                          [fl, fl, fl, "", "", "", "bool", "", "Scalar"],
                                          ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]),
         children=lambda: g.op("aten::cudnn_convolution", 300,
                               shapes([[2, 3, 8, 8], [4, 3, 3, 3], [], [], [], [], [], [], []],
                                      [fl, fl, "", "", "", "Scalar", "bool", "bool", "bool"],
                                      ["", "", "[1, 1]", "[1, 1]", "[1, 1]", "1", "False", "False", "True"]),
                               kernels=[900]))
    g.op("aten::convolution_backward", 600,
         shapes([[2, 4, 8, 8], [2, 3, 8, 8], [4, 3, 3, 3], [], [], [], [], [], [], [], []],
                [fl, fl, fl, "", "", "", "", "bool", "", "Scalar", ""],
                ["", "", "", "[4]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[True, True, True]"]),
         kernels=[1800])
    concrete = ["", "a\"b\\c"] if escaped else ["", ""]
    g.op("aten::cat", 300, shapes([[[2, 3], [2, 3]], []], ["TensorList", "Scalar"], concrete), kernels=[250])
    g.op("aten::mm", 300, {"External id": 9}, kernels=[150])  # no shapes recorded
    # a kernel whose launch is not in the trace
    g.events.append(X("kernel", "orphan", 900_000, 77, tid=7, pid=0, args={"correlation": 99999, "stream": 7, "device": 0}))
    g.events.insert(0, X("user_annotation", "ProfilerStep#1", 0, 3_000_000, args={}))
    if modules:  # Block_0 around linear and bmm, Linear_0 around linear (with_modules events)
        ops = {e["name"]: e for e in g.events if e["cat"] == "cpu_op"}
        lin, bmm = ops["aten::linear"], ops["aten::bmm"]
        ns = lambda us: round(us * 1000)
        g.events.append(X("python_function", "nn.Module: Block_0", ns(lin["ts"]) - 20,
                          ns(bmm["ts"] + bmm["dur"]) - ns(lin["ts"]) + 40, args={"Python id": 1}))
        g.events.append(X("python_function", "nn.Module: Linear_0", ns(lin["ts"]) - 5,
                          ns(lin["dur"]) + 10, args={"Python id": 2}))
        g.events.append(X("python_function", "torch/nn/modules/module.py(1750): _call_impl",
                          ns(lin["ts"]) - 3, 6, args={}))
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
           "distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": g.events}
    with open(path, "w") as f:
        json.dump(doc, f)


def by_op(rep):
    return {(r["op"], r["shapes"]): r for r in rep["rows"]}


def expect(rows, op, shape, flops, bytes_, time_ns, count=1, kernels=None):
    r = rows.get((op, shape))
    check(r is not None, "row %s %s present (rows: %s)" % (op, shape, sorted(rows)))
    if r is None:
        return
    check(r["flops"] == flops, "%s flops %r, expected %r" % (op, r["flops"], flops))
    check(r["bytes"] == bytes_, "%s bytes %r, expected %r" % (op, r["bytes"], bytes_))
    check(r["time_ns"] == time_ns, "%s time %r, expected %r" % (op, r["time_ns"], time_ns))
    check(r["count"] == count, "%s count %r" % (op, r["count"]))
    if kernels is not None:
        check(r["kernels"] == kernels, "%s kernels %r" % (op, r["kernels"]))


def check_gpu():
    path = os.path.join(WORK, "gpu.json")
    gpu_trace(path)
    rep = ops_json(path)
    if rep is None:
        return
    rows = by_op(rep)
    # addmm (deepest modelled under linear): M=128 (8x16), K=64, N=128, bias [128]
    # flops 2*128*128*64 + 128*128; bytes (128 + 128*64 + 64*128 + 128*128) * 2
    expect(rows, "aten::addmm", "[128] [128,64] [64,128] bf16", 2 * 128 * 128 * 64 + 128 * 128,
           (128 + 128 * 64 + 64 * 128 + 128 * 128) * 2, 3000, kernels=1)
    check(("aten::linear", "[8,16,64] [128,64] [128] bf16") not in rows, "linear's kernel goes to addmm")
    # bmm: B=4, M=32, K=16, N=8, fp32: flops 2*4*32*8*16, bytes (4*32*16 + 4*16*8 + 4*32*8)*4
    expect(rows, "aten::bmm", "[4,32,16] [4,16,8] fp32", 2 * 4 * 32 * 8 * 16, (2048 + 512 + 1024) * 4, 1500,
           kernels=2)
    # flash attention, causal, B=2 H=4 S=10 D=8: pairs 10*11/2 = 55; flops 2*B*H*55*(8+8)
    # bytes (q + k + v + out) = 4 * 2*4*10*8 * 2
    expect(rows, "aten::_scaled_dot_product_flash_attention", "[2,4,10,8] [2,4,10,8] [2,4,10,8] bf16",
           2 * 2 * 4 * 55 * 16, 4 * 640 * 2, 2000)
    # layer norm [4,6,32] with weight and bias: 7 FLOPs per element; bytes 2 * 768 * 2 + 2 * 32 * 2
    expect(rows, "aten::native_layer_norm", "[4,6,32] [32] [32] bf16", 7 * 768, 2 * 768 * 2 + 2 * 32 * 2, 700)
    # add_ [4,6,32] + [1,6,1] in place: 768 FLOPs; bytes read 768*4 + 6*4, write 768*4
    expect(rows, "aten::add_", "[4,6,32] [1,6,1] fp32", 768, 768 * 4 + 6 * 4 + 768 * 4, 400)
    # embedding [1000,64] with [2,5] indices (int64): rows read and written 10*64*4 each, indices 80
    expect(rows, "aten::embedding", "[1000,64] [2,5] fp32", 0, 10 * 64 * 4 * 2 + 10 * 8, 600)
    # where(cond bool [4,8], a bf16 [4,8], b bf16 [1,8]): 32 FLOPs; bytes 32 + 64 + 16 read,
    # 64 written (the output is a's type, not the condition's)
    expect(rows, "aten::where", "[4,8] [4,8] [1,8] bf16", 32, 32 + 64 + 16 + 64, 50)
    # sum over dim 1 of [8,10]: 80 FLOPs; bytes 80*4 + 8*4
    expect(rows, "aten::sum", "[8,10] fp32", 80, 80 * 4 + 8 * 4, 200)
    # softmax [3,5]: 5 FLOPs per element; bytes 2 * 15 * 4
    expect(rows, "aten::_softmax", "[3,5] fp32", 75, 120, 100)
    # cudnn_convolution [2,3,8,8] * [4,3,3,3], pad 1 stride 1: out [2,4,8,8];
    # flops 2 * 2 * 64 * 108; bytes (384 + 108 + 512) * 4
    expect(rows, "aten::cudnn_convolution", "[2,3,8,8] [4,3,3,3] fp32", 2 * 2 * 64 * 108, (384 + 108 + 512) * 4, 900)
    # convolution_backward, mask all: 2 * fwd + grad bias (512 sums);
    # bytes grad_out 512 + input 384 + weight 108 read, grad input 384 + grad weight 108 + grad bias 4 written
    expect(rows, "aten::convolution_backward", "[2,4,8,8] [2,3,8,8] [4,3,3,3] fp32",
           2 * (2 * 2 * 64 * 108) + 512, (512 + 384 + 108 + 384 + 108 + 4) * 4, 1800)
    cat = [r for r in rep["rows"] if r["op"] == "aten::cat"]
    check(len(cat) == 1 and cat[0]["family"] is None and cat[0]["time_ns"] == 250, "cat listed without a model")
    mm = [r for r in rep["rows"] if r["op"] == "aten::mm"]
    check(len(mm) == 1 and mm[0]["inputs"] is None and mm[0]["flops"] is None, "mm without shapes: no model")
    check(rep["ops_without_inputs"] == 1, "one op without inputs: %r" % rep["ops_without_inputs"])
    check(rep["unattributed_ns"] == 77, "unattributed %r" % rep["unattributed_ns"])
    total = 3000 + 1500 + 2000 + 700 + 400 + 600 + 50 + 200 + 100 + 900 + 1800 + 250 + 150
    check(rep["time_total_ns"] == total, "time total %r, expected %r" % (rep["time_total_ns"], total))
    check(rep["time_modelled_ns"] == total - 250 - 150, "modelled %r" % rep["time_modelled_ns"])
    check(rep["ceilings"]["device"] == "h100" and rep["ceilings"]["bf16_flops_per_s"] == 989.4e12,
          "H100 ceilings: %r" % rep["ceilings"])
    # the roofline of addmm: intensity = flops / bytes, below the bf16 ridge (989.4/3.35): memory
    r = rows[("aten::addmm", "[128] [128,64] [64,128] bf16")]
    inten = (2 * 128 * 128 * 64 + 128 * 128) / ((128 + 128 * 64 + 64 * 128 + 128 * 128) * 2)
    check(abs(r["intensity"] / inten - 1) < 1e-8 and r["bound"] == "memory", "addmm roofline %r" % r)
    pct = 100 * r["bytes"] / 3000e-9 / 3.35e12  # memory-bound: achieved bandwidth / peak
    check(abs(r["pct_of_peak"] / pct - 1) < 1e-8, "addmm %% of peak %r" % r["pct_of_peak"])
    # MFU from op FLOPs: total FLOPs / (step time x bf16 peak)
    check(rep["mfu_from_op_flops"] is not None and rep["mfu_peak_dtype"] in ("bf16", "fp32"), "MFU %r" % rep)
    # the text names it so
    rc, out, _ = run(["ops", path])
    check(rc == 0 and "MFU from op FLOPs" in out and "aten::addmm" in out, "text report")
    return rep


def check_tokens(fast_rep):
    path = os.path.join(WORK, "gpu.json")
    slow = ops_json(path, env={"STEPSCOPE_KINETO_FAST": "off"})
    if fast_rep and slow:
        check(slow["rows"] == fast_rep["rows"], "token-by-token reading gives the same rows")
    esc = os.path.join(WORK, "gpu_escaped.json")
    gpu_trace(esc, escaped=True)
    a = ops_json(esc)
    b = ops_json(esc, env={"STEPSCOPE_KINETO_FAST": "off"})
    if a and b:
        check(a["rows"] == b["rows"], "escaped strings: the same rows both ways")
        cat = [r for r in a["rows"] if r["op"] == "aten::cat"]
        check(cat and cat[0]["inputs"]["Concrete Inputs"][1] == 'a"b\\c', "escapes kept: %r" % cat)


def check_split():
    for path in (os.path.join(WORK, "gpu.json"), os.path.join(DATA, "conv.pt.trace.json.gz")):
        one = ops_json(path, env={"STEPSCOPE_KINETO_SPLIT": "off"})
        two = ops_json(path, env={"STEPSCOPE_KINETO_SPLIT": "on", "STEPSCOPE_KINETO_SPLIT_AT": "0.5"})
        if one and two:
            check(one == two, "split import of %s: the same table" % path)


def check_cpu():
    g = Gen()
    fl = "float"
    # linear -> addmm (deepest modelled: addmm, its own time); relu alone; an unmodelled op
    # with a modelled child (aten::dropout -> aten::mul): mul counts, dropout does not
    g.op("aten::linear", 5000, shapes([[4, 8], [16, 8], [16]], [fl, fl, fl]),
         children=lambda: g.op("aten::addmm", 3000, shapes([[16], [4, 8], [8, 16], [], []], [fl, fl, fl, "Scalar", "Scalar"])))
    g.op("aten::relu", 700, shapes([[4, 16]], [fl]))
    g.op("aten::dropout", 900, shapes([[4, 16], [], []], [fl, "Double", "bool"]),
         children=lambda: g.op("aten::mul", 400, shapes([[4, 16], [4, 16]], [fl, fl])))
    g.events.insert(0, X("user_annotation", "ProfilerStep#1", 0, g.t + 10, args={}))
    path = os.path.join(WORK, "cpu.json")
    with open(path, "w") as f:
        json.dump({"schemaVersion": 1, "traceEvents": g.events}, f)
    rep = ops_json(path)
    if rep is None:
        return
    check(rep["time"] == "cpu_op", "CPU-only: op times")
    rows = by_op(rep)
    expect(rows, "aten::addmm", "[16] [4,8] [8,16] fp32", 2 * 4 * 16 * 8 + 64, (16 + 32 + 128 + 64) * 4, 3000)
    expect(rows, "aten::relu", "[4,16] fp32", 64, 128 * 4, 700)
    expect(rows, "aten::mul", "[4,16] [4,16] fp32", 64, 3 * 64 * 4, 400)
    check(not any(r["op"] in ("aten::linear", "aten::dropout") for r in rep["rows"]),
          "ops around a modelled op do not count again: %r" % [r["op"] for r in rep["rows"]])


def check_norms():
    """The norm backwards (docs/ops.md "Norm backwards"): per element, x̂ 2 (rms 1) when dw or
    dx in training is asked, dx 7 + [w] (rms 5 + [w], batch norm in eval 1 + [w]), dw 2, db 1;
    bytes: dy, then x and mean with x̂, rstd with x̂ or dx, w with dx, each asked gradient."""
    g = Gen()
    bf, fl = "c10::BFloat16", "float"
    # layer norm bf16 [4,6,32] (768), weight and bias bf16, the statistics float, mask all
    g.op("aten::native_layer_norm_backward", 300,
         shapes([[4, 6, 32], [4, 6, 32], [], [4, 6, 1], [4, 6, 1], [32], [32], []],
                [bf, bf, "ScalarList", fl, fl, bf, bf, "ScalarList"],
                ["", "", "[32]", "", "", "", "", "[True, True, True]"]), kernels=[500])
    # layer norm fp32 without weight or bias, dx only
    g.op("aten::native_layer_norm_backward", 300,
         shapes([[4, 6, 32], [4, 6, 32], [], [4, 6, 1], [4, 6, 1], [], [], []],
                [fl, fl, "ScalarList", fl, fl, "", "", "ScalarList"],
                ["", "", "[32]", "", "", "", "", "[True, False, False]"]), kernels=[300])
    # group norm fp32 x [2,8,5] in 4 groups: mean, rstd [2,4], weight [8], mask all
    g.op("aten::native_group_norm_backward", 300,
         shapes([[2, 8, 5], [2, 8, 5], [2, 4], [2, 4], [8], [], [], [], [], []],
                [fl, fl, fl, fl, fl, "Scalar", "Scalar", "Scalar", "Scalar", "ScalarList"],
                ["", "", "", "", "", "2", "8", "5", "4", "[True, True, True]"]), kernels=[200])
    # batch norm fp32 x [4,3,5] in eval (train False), weight and running statistics [3], no
    # saved ones, dx only: dx = dy w rstd
    g.op("aten::native_batch_norm_backward", 300,
         shapes([[4, 3, 5], [4, 3, 5], [3], [3], [3], [], [], [], [], []],
                [fl, fl, fl, fl, fl, "", "", "Scalar", "Scalar", "ScalarList"],
                ["", "", "", "", "", "", "", "False", "1e-05", "[True, False, False]"]), kernels=[100])
    # miopen's batch norm backward (input first, no mask: all three gradients), fp32 x
    # [2,3,4], weight [3], no running statistics, saved mean and invstd [3]
    g.op("aten::miopen_batch_norm_backward", 300,
         shapes([[2, 3, 4], [2, 3, 4], [3], [], [], [3], [3], []], [fl, fl, fl, "", "", fl, fl, "Scalar"],
                ["", "", "", "", "", "", "", "1e-05"]), kernels=[80])
    # rms norm bf16 x [2,4,16] (128), rstd float [2,4,1], weight bf16 [16], mask [dx, dw]
    g.op("aten::_fused_rms_norm_backward", 300,
         shapes([[2, 4, 16], [2, 4, 16], [], [2, 4, 1], [16], []],
                [bf, bf, "ScalarList", fl, bf, "ScalarList"],
                ["", "", "[16]", "", "", "[True, True]"]), kernels=[150])
    # a layer norm backward whose concrete inputs were not recorded: no output_mask, no model
    g.op("aten::native_layer_norm_backward", 300,
         shapes([[3, 32], [3, 32], [], [3, 1], [3, 1], [32], [32], []],
                [fl, fl, "ScalarList", fl, fl, fl, fl, "ScalarList"]), kernels=[50])
    g.events.insert(0, X("user_annotation", "ProfilerStep#1", 0, 3_000_000, args={}))
    path = os.path.join(WORK, "norms.json")
    with open(path, "w") as f:
        json.dump({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
                   "traceEvents": g.events}, f)
    rep = ops_json(path)
    if rep is None:
        return
    rows = by_op(rep)
    lnb = "aten::native_layer_norm_backward"
    # 768 elements x (2 + 7 + 1 + 2 + 1); bytes dy 1536, x 1536, mean 96, rstd 96, w 64, dx 1536,
    # dw 64, db 64
    expect(rows, lnb, "[4,6,32] [4,6,32] [4,6,1] [4,6,1] [32] [32] bf16", 13 * 768,
           1536 + 1536 + 96 + 96 + 64 + 1536 + 64 + 64, 500)
    # 768 x (2 + 7); bytes dy, x, dx 3072 each, mean and rstd 96 each
    expect(rows, lnb, "[4,6,32] [4,6,32] [4,6,1] [4,6,1] fp32", 9 * 768, 3 * 3072 + 2 * 96, 300)
    # 80 elements x 13; bytes dy, x, dx 320 each, mean, rstd, w, dw, db 32 each
    expect(rows, "aten::native_group_norm_backward", "[2,8,5] [2,8,5] [2,4] [2,4] [8] fp32", 13 * 80,
           3 * 320 + 5 * 32, 200)
    # 60 elements x (1 + 1), no x̂; bytes dy 240, running_var 12, w 12, dx 240
    expect(rows, "aten::native_batch_norm_backward", "[4,3,5] [4,3,5] [3] [3] [3] fp32", 2 * 60,
           240 + 12 + 12 + 240, 100)
    # 24 elements x 13; bytes dy, x, dx 96 each, mean, invstd, w, dw, db 12 each
    expect(rows, "aten::miopen_batch_norm_backward", "[2,3,4] [2,3,4] [3] [3] [3] fp32", 13 * 24,
           3 * 96 + 5 * 12, 80)
    # 128 elements x (1 + 5 + 1 + 2); bytes dy, x, dx 256 each, rstd 32, w 32, dw 32
    expect(rows, "aten::_fused_rms_norm_backward", "[2,4,16] [2,4,16] [2,4,1] [16] bf16", 9 * 128,
           3 * 256 + 3 * 32, 150)
    r = rows.get((lnb, "[3,32] [3,32] [3,1] [3,1] [32] [32]"))
    check(r is not None and r["flops"] is None and r["time_ns"] == 50,
          "a norm backward without its output_mask: listed without FLOPs %r" % r)


def check_analyze(rep):
    path = os.path.join(WORK, "gpu.json")
    rc, out, err = run(["analyze", path, "--json", "-", "--quiet"])
    check(rc == 0, "analyze: %s" % err)
    m = json.loads(out).get("mfu_from_op_flops") if rc == 0 else None
    check(m is not None, "analyze JSON: mfu_from_op_flops")
    if m and rep:
        check(m["flops"] == rep["flops_total"], "analyze: op FLOPs %r vs %r" % (m["flops"], rep["flops_total"]))
        check(m["peak_dtype"] == "bf16" and m["peak_flops_per_device"] == 989.4e12, "analyze: peak %r" % m)
        check(m["steps_time_ns"] == rep["steps_time_ns"] > 0, "analyze: steps time %r" % m)
        want = rep["flops_total"] / (m["steps_time_ns"] * 1e-9 * 989.4e12)
        check(abs(m["mfu"] / want - 1) < 1e-8, "analyze: MFU %r, expected %r" % (m["mfu"], want))
    rc, out, _ = run(["analyze", path])
    check(rc == 0 and "MFU from op FLOPs:" in out, "analyze text: MFU from op FLOPs")
    # a stepscope trace with the trainer's metadata is unchanged: no op FLOPs
    rc, out, _ = run(["analyze", os.path.join(DATA, "..", "..", "..", "..", "samples", "cpu-dp2pp2-1f1b"),
                      "--json", "-", "--quiet"])
    check(rc == 0 and json.loads(out)["mfu_from_op_flops"] is None, "trainer run: mfu_from_op_flops null")


def modules_json(path, env=None):
    rc, out, err = run(["ops", path, "--by", "module", "--json", "-"], env)
    check(rc == 0, "ops --by module %s: exit %d %s" % (path, rc, err))
    return json.loads(out) if rc == 0 else None


def check_module_totals(path, ops):
    """--by module agrees with the op table: the same total time and FLOPs, self times and the
    no-module time add up to it, and so do the top modules' times."""
    m = modules_json(path)
    if not m or not ops:
        return m
    check(m["time_total_ns"] == ops["time_total_ns"], "%s: module total %r vs op table %r"
          % (path, m["time_total_ns"], ops["time_total_ns"]))
    check(m["flops_total"] == ops["flops_total"], "%s: module FLOPs %r vs %r" % (path, m["flops_total"], ops["flops_total"]))
    self_sum = sum(r["self_ns"] for r in m["rows"]) + m["no_module_ns"]
    top_sum = sum(r["time_ns"] for r in m["rows"] if r["depth"] == 0) + m["no_module_ns"]
    check(self_sum == m["time_total_ns"] and top_sum == m["time_total_ns"], "%s: sums %r %r" % (path, self_sum, top_sum))
    return m


def check_modules(rep):
    path = os.path.join(WORK, "gpu_modules.json")
    gpu_trace(path, modules=True)
    ops = ops_json(path)
    check(ops is not None and rep is not None and ops["rows"] == rep["rows"], "module events change no op row")
    m = check_module_totals(path, ops)
    if m:
        rows = {r["module"]: r for r in m["rows"]}
        addmm = 2 * 128 * 128 * 64 + 128 * 128
        bmm = 2 * 4 * 32 * 8 * 16
        b, l = rows.get("Block_0"), rows.get("Block_0/Linear_0")
        check(b and b["time_ns"] == 3000 + 1500 and b["self_ns"] == 1500 and b["flops"] == addmm + bmm
              and b["calls"] == 1, "Block_0 %r" % b)
        check(l and l["time_ns"] == 3000 and l["flops"] == addmm and l["depth"] == 1, "Linear_0 %r" % l)
        check(len(m["rows"]) == 2, "only module events make modules: %r" % sorted(rows))
        check(m["no_module_ns"] == ops["time_total_ns"] - 4500, "no module time %r" % m["no_module_ns"])
    # the same, split import and token by token
    for env in ({"STEPSCOPE_KINETO_FAST": "off"}, {"STEPSCOPE_KINETO_SPLIT": "on", "STEPSCOPE_KINETO_SPLIT_AT": "0.5"}):
        check(modules_json(path, env) == m, "modules read with %r: the same" % env)
    # torch traces (with_modules): totals, and the MLP's layers
    for name in ("mlp", "conv", "attention"):
        p = os.path.join(DATA, name + ".pt.trace.json.gz")
        mm = check_module_totals(p, ops_json(p))
        if mm and name == "mlp":
            rows = {r["module"]: r for r in mm["rows"]}
            fc1 = rows.get("Sequential_0/Linear_0")
            check(fc1 and fc1["flops"] == fc1["calls"] * (2 * 32 * 512 * 256 + 32 * 512), "mlp fc1 module %r" % fc1)
            seq = rows.get("Sequential_0")
            kids = sum(r["time_ns"] for r in mm["rows"] if r["depth"] == 1)
            check(seq and seq["time_ns"] == seq["self_ns"] + kids, "Sequential_0 holds its children %r" % seq)
        if mm and name == "attention":
            rows = {r["module"]: r for r in mm["rows"]}
            qkv = rows.get("Attention_0/Linear_0")
            check(qkv and qkv["flops"] == qkv["calls"] * (2 * 256 * 192 * 64 + 256 * 192), "qkv module %r" % qkv)


def mem(ts_ns, alloc, total, addr, tid=1, device=-1, dtype=0):
    return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": tid,
            "ts": ts_ns / 1000, "args": {"Total Reserved": 0, "Total Allocated": total, "Bytes": alloc,
                                         "Device Id": device, "Device Type": dtype, "Addr": addr}}


def check_memory():
    ev = [X("user_annotation", "ProfilerStep#1", 0, 10_000, args={}),
          X("user_annotation", "ProfilerStep#2", 10_000, 10_000, args={}),
          X("cpu_op", "aten::empty", 1_000, 500, args={}),
          X("cpu_op", "aten::mm", 3_000, 2_000, args={}),
          X("cpu_op", "aten::add", 12_000, 1_000, args={}),
          mem(1_100, 1000, 1000, 0xa),      # step 1: empty allocates 1000 (held)
          mem(3_500, 4000, 5000, 0xb),      # mm allocates 4000: 5000
          mem(4_000, -4000, 1000, 0xb),     # freed: 1000
          mem(12_500, 3000, 4000, 0xc),     # step 2: add 3000: 4000
          mem(12_600, 2500, 6500, 0xb),     # add reuses 0xb: 6500, the peak
          mem(15_000, -2500, 4000, 0xb),
          mem(16_000, 100, 100, 0xd, tid=1, device=0, dtype=1)]  # cuda:0: 100
    path = os.path.join(WORK, "memory.json")
    with open(path, "w") as f:
        json.dump({"schemaVersion": 1, "traceEvents": ev}, f)
    rc, out, err = run(["ops", path, "--memory", "--json", "-"])
    check(rc == 0, "ops --memory: %s" % err)
    if rc:
        return
    m = json.loads(out)
    rc2, out2, _ = run(["ops", path, "--memory", "--json", "-"], {"STEPSCOPE_KINETO_FAST": "off"})
    check(rc2 == 0 and json.loads(out2) == m, "--memory token by token: the same")
    devs = {d["device"]: d for d in m["devices"]}
    cpu = devs.get("cpu")
    check(cpu and cpu["events"] == 6 and cpu["peak_allocated_bytes"] == 6500 and cpu["peak_time_ns"] == 12_600,
          "cpu peak %r" % cpu)
    if cpu:
        check([s["peak_allocated_bytes"] for s in cpu["steps"]] == [5000, 6500], "step peaks %r" % cpu["steps"])
        live = cpu["live_at_peak"]
        check(live["count"] == 3 and live["bytes"] == 6500 and live["bytes_before_trace"] == 0, "live %r" % live)
        check([(a["bytes"], a["op"]) for a in live["largest"]] == [(3000, "aten::add"), (2500, "aten::add"),
                                                                  (1000, "aten::empty")], "largest %r" % live)
    cuda = devs.get("cuda:0")
    check(cuda and cuda["peak_allocated_bytes"] == 100 and cuda["live_at_peak"]["count"] == 1, "cuda %r" % cuda)
    rc, out, _ = run(["ops", path, "--memory"])
    check(rc == 0 and "peak allocated 0.006 MB at 0.013 ms" in out and "aten::add" in out, "--memory text")
    out_json, out_pf = os.path.join(WORK, "memory_export.json"), os.path.join(WORK, "memory_export.pftrace")
    rc1, _, e1 = run(["export", path, "--memory", "-o", out_json])
    rc2, _, e2 = run(["export", path, "--memory", "-o", out_pf])
    check(rc1 == 0 and rc2 == 0, "export --memory: %s %s" % (e1, e2))
    if rc1 == 0:
        with open(out_json) as f:
            evs = json.load(f)["traceEvents"]
        series = {}
        for e in evs:
            if e.get("ph") == "C" and e["name"].startswith("memory "):
                series.setdefault(e["name"], []).append(e["args"]["value"])
        check(series == {"memory allocated (cpu)": [1000, 5000, 1000, 4000, 6500, 4000],
                         "memory allocated (cuda:0)": [100], "memory reserved (cuda:0)": [0]},
              "export --memory counters %r" % series)
    if rc2 == 0:
        with open(out_pf, "rb") as f:
            check(b"memory allocated (cpu)" in f.read(), "export --memory: the Perfetto counter track")
    plain = os.path.join(WORK, "memory_plain.json")
    rc3, _, _ = run(["export", path, "-o", plain])
    if rc3 == 0:
        with open(plain) as f:
            check(not any(e.get("ph") == "C" for e in json.load(f)["traceEvents"]), "plain export: no memory track")
    rc, out, _ = run(["ops", os.path.join(DATA, "mlp.pt.trace.json.gz"), "--memory", "--json", "-"])
    if rc == 0:
        d = json.loads(out)["devices"][0]
        check(any(a["bytes"] == 512 * 256 * 4 and a["op"] == "aten::mm" for a in d["live_at_peak"]["largest"]),
              "mlp: a weight gradient live at the peak %r" % d["live_at_peak"])


def check_peak():
    path = os.path.join(WORK, "gpu.json")
    rep = ops_json(path, ["--peak", "bf16=500T,bw=2T"])
    if rep:
        c = rep["ceilings"]
        check(c["source"] == "given" and c["bf16_flops_per_s"] == 500e12 and c["bytes_per_s"] == 2e12,
              "--peak: %r" % c)
    rc, _, err = run(["ops", path, "--peak", "bf16=fast"])
    check(rc == 2 and "--peak" in err, "bad --peak: exit %d %s" % (rc, err))
    rc, out, _ = run(["ops", "--help"])
    check(rc == 0 and "--peak" in out and "--csv" in out, "ops --help")
    rc, out, _ = run(["--help"])
    check(" ops " in out, "ops in the command list")


def check_csv():
    path = os.path.join(WORK, "gpu.json")
    out_csv = os.path.join(WORK, "ops.csv")
    rc, _, err = run(["ops", path, "--csv", out_csv])
    check(rc == 0, "--csv: %s" % err)
    rep = ops_json(path)
    with open(out_csv) as f:
        rows = list(csv.DictReader(f))
    check(len(rows) == len(rep["rows"]), "csv rows")
    for c, j in zip(rows, rep["rows"]):
        check(c["op"] == j["op"] and int(c["time_ns"]) == j["time_ns"], "csv row %r" % c)
        if j["flops"] is not None:
            check(float(c["flops"]) == j["flops"], "csv flops %r" % c)


def check_real():
    """The committed torch CPU traces (scripts/torch/make_op_traces.py): their layers' sizes are
    known, so their main rows' FLOPs are too."""
    d = os.path.join(DATA, "mlp.pt.trace.json.gz")
    if not os.path.exists(d):
        check(False, "missing %s" % d)
        return
    rep = ops_json(d)
    if rep is None:
        return
    check(rep["time"] == "cpu_op", "torch CPU trace: op times")
    # MLP: batch 32, 256 -> 512 -> 256, float32, 3 profiled steps: two addmm forward rows
    rows = [r for r in rep["rows"] if r["op"] == "aten::addmm"]
    fl = {r["shapes"]: r for r in rows}
    r1 = fl.get("[512] [32,256] [256,512] fp32")
    check(r1 is not None and r1["flops"] == r1["count"] * (2 * 32 * 512 * 256 + 32 * 512), "mlp fc1 %r" % r1)
    r2 = fl.get("[256] [32,512] [512,256] fp32")
    check(r2 is not None and r2["flops"] == r2["count"] * (2 * 32 * 256 * 512 + 32 * 256), "mlp fc2 %r" % r2)
    conv = ops_json(os.path.join(DATA, "conv.pt.trace.json.gz"))
    if conv:
        fam = {r["family"] for r in conv["rows"]}
        check("conv" in fam, "conv net: a conv row %r" % sorted(f for f in fam if f))
        # conv1: [8,3,32,32] * [16,3,3,3] pad 1: out [8,16,32,32]
        c1 = [r for r in conv["rows"] if r["family"] == "conv" and r["shapes"].startswith("[8,3,32,32] [16,3,3,3]")]
        check(c1 and c1[0]["flops"] == c1[0]["count"] * (2 * 8 * 32 * 32 * 16 * 27 + 8 * 16 * 32 * 32),
              "conv1 %r" % c1)
    norms = ops_json(os.path.join(DATA, "norms.pt.trace.json.gz"))
    if norms:
        # x [8,16,32] (4096 floats, 16384 bytes), two profiled steps: every norm backward costed
        nb = {r["op"]: r for r in norms["rows"] if r["op"].endswith("norm_backward")}
        want = {  # (FLOPs, bytes) per call
            # the input has no gradient: mask [False, True, True], 4096 x (2 + 2 + 1); bytes dy
            # and x 16384 each, mean and rstd [8,16,1] 512 each, dw and db 128 each
            "aten::native_layer_norm_backward": (5 * 4096, 2 * 16384 + 2 * 512 + 2 * 128),
            # mask all, 4096 x 13; mean and rstd [8,4] 128 each, w, dw, db [16] 64 each
            "aten::native_group_norm_backward": (13 * 4096, 3 * 16384 + 2 * 128 + 3 * 64),
            # training: the saved mean and invstd [16] read, mask all
            "aten::native_batch_norm_backward": (13 * 4096, 3 * 16384 + 2 * 64 + 3 * 64),
        }
        for op, (fl, by) in want.items():
            r = nb.get(op)
            check(r is not None and r["count"] >= 1 and r["flops"] == r["count"] * fl and
                  r["bytes"] == r["count"] * by and r["time_ns"] > 0, "norms: %s %r" % (op, r))
    attn = ops_json(os.path.join(DATA, "attention.pt.trace.json.gz"))
    if attn:
        a = {r["op"]: r for r in attn["rows"] if r["family"] == "attention"}
        # B=4, H=4, S=64, D=16, causal: pairs 64*65/2; the backward 2.5 times that
        fwd = 2 * 4 * 4 * (64 * 65 // 2) * 32
        f = a.get("aten::_scaled_dot_product_flash_attention_for_cpu")
        check(f and f["flops"] == f["count"] * fwd, "sdpa %r" % f)
        b = a.get("aten::_scaled_dot_product_flash_attention_for_cpu_backward")
        check(b and b["flops"] == b["count"] * 2.5 * fwd, "sdpa backward %r" % b)


rep = check_gpu()
check_tokens(rep)
check_split()
check_cpu()
check_norms()
check_analyze(rep)
check_modules(rep)
check_memory()
check_peak()
check_csv()
check_real()
if FAILS:
    print("%d failure(s)" % len(FAILS))
    sys.exit(1)
print("ops: all checks passed")
