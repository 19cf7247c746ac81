#!/bin/sh
# traced_ops.sh — the op FLOPs of a traced trainer run against the trainer's own FLOPs.
#
# usage: traced_ops.sh TRAINER STEPSCOPE WORLD [TRAINER ARGS...]
# Runs stepscope-train --backend cpu --trace (2 steps), then `stepscope ops --json` on the run
# (every compute operation carries its inputs, docs/ops.md "The trainer's ops") and checks,
# exactly, per step and summed over the ranks (n tokens, L layers, C hidden, F = 4C, T seq,
# V vocabulary, Vp its padding, tp the tensor-parallel degree; no recomputation):
#   gemm FLOPs      = 6 n W + n (Bf + Bb)  (W: the weights each token multiplies, the LM head
#                     with Vp rows, work replicated over TP counted on every TP rank; Bf: the
#                     bias elements added in forward, Bb: the bias gradients summed in backward,
#                     those of the row-parallel projections on every TP rank)
#   attention FLOPs = 6 L C n (T + 1)      (causal pairs T (T + 1) / 2 per sequence: forward
#                     4 C pairs, backward 2 x; with --cp the ring recomputes: 2.5 x, so 7 L C n (T + 1))
#   model FLOPs     = 6 n (W1 + B1 + LN) + 12 L C T n   (the trainer's MFU numerator, flops
#                     metadata: W1, B1 the same weights and biases counted once, the LM head
#                     with V rows, LN the LayerNorm parameters; attention as the full T x T)
# so that model = gemm - n (Bf + Bb) + 6 n (B1 + LN) - 6 n (W - W1) + attention x 12 T / ((T + 1) k),
# k = 6 (7 with --cp); the metadata's value (printed to 6 digits) must equal that model count.
# With --recompute selective the attention forward runs again (2 L C n (T + 1) more), and the
# metadata's hardware FLOPs are the model's + 4 L C T n (that forward counted as T x T).
# Each layernorm_backward row (dout, x [N,C], w [C], mean, rstd [N]) holds, per call, the
# native_layer_norm_backward model with every gradient asked plus the trainer's accumulation
# into its gradients: 14 N C FLOPs and 4 N C e + 8 N + 20 C bytes (e: the activations'
# element size); norms are not in the GEMM or attention sums.
#
# The CUDA backend's layout (its inputs in a cpu_op RANGE around each launch, joined to the
# kernels by correlation: docs/ops.md "The trainer's ops"): with AS_CUDA=PROGRAM (as_cuda_run)
# the CPU run is rewritten into the records the CUDA backend and the GPU tracer write for it,
# and with BACKEND=cuda the trainer runs on the GPU (exit 77, SKIP, without a usable one);
# either way the table must then hold device time, every kernel of a described operation
# attributed to it.
set -u
trainer=$1 stepscope=$2 world=$3
shift 3
backend=${BACKEND:-cpu}
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-trace-ops.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
if ! "$trainer" --backend "$backend" --world "$world" --steps 2 --quiet --trace "$dir/run" "$@" \
    >"$dir/train.out" 2>&1; then
    if [ "$backend" = cuda ] && grep -q "no usable GPU" "$dir/train.out"; then
        echo "SKIP: no usable GPU"; exit 77
    fi
    echo "FAIL: training failed"; cat "$dir/train.out"; exit 1
fi
run="$dir/run" layout=$backend
if [ -n "${AS_CUDA:-}" ]; then
    "$AS_CUDA" "$dir/run" "$dir/as-cuda" || { echo "FAIL: as_cuda_run"; exit 1; }
    run="$dir/as-cuda" layout=cuda
fi
"$stepscope" ops "$run" --json "$dir/ops.json" >"$dir/ops.txt" 2>&1 ||
    { echo "FAIL: stepscope ops failed"; cat "$dir/ops.txt"; exit 1; }
"$stepscope" dump "$run/rank-00000.trace.zst" >"$dir/rank0.jsonl" || { echo "FAIL: dump"; exit 1; }
python3 - "$dir" "$layout" <<'PY' || exit 1
import json, sys
d, layout = sys.argv[1], sys.argv[2]
head, flops_meta = None, None
for line in open(d + "/rank0.jsonl"):
    r = json.loads(line)
    if r["kind"] == "header": head = json.loads(r["config_json"])
    if r["kind"] == "metadata" and r["key"] == "flops": flops_meta = json.loads(r["value_json"])
ops = json.load(open(d + "/ops.json"))
steps = head["steps"]
L, C, T, V, Vp = head["layers"], head["hidden"], head["seq"], head["vocab"], head["padded_vocab"]
F = 4 * C
tp, cp = head["tp"], head["cp"]
E, K, every = head.get("experts", 0), head.get("top_k", 0), head.get("moe_every", 1)
n = head["batch"] * T
bad = []
fam = {}
lnb = 0
for row in ops["rows"]:
    if row["family"] in ("", None) and row["op"] in ("matmul_forward", "matmul_backward",
                                                     "attention_forward", "attention_backward",
                                                     "layernorm_backward"):
        bad.append("no model for %s %s" % (row["op"], row["shapes"]))
    if row["op"] == "layernorm_backward" and row["flops"] is not None:
        dims = [[int(v) for v in t.strip("[]").split(",")] for t in row["shapes"].split()[:5]]
        (N, Cn), e = dims[0], 2 if row["shapes"].endswith("bf16") else 4
        want = (14 * N * Cn * row["count"], (4 * N * Cn * e + 8 * N + 20 * Cn) * row["count"])
        if (row["flops"], row["bytes"]) != want or row["family"] != "norm":
            bad.append("layernorm_backward %s: flops, bytes %r, %r != %r" %
                       (row["shapes"], row["flops"], row["bytes"], want))
        lnb += 1
    fam[row["family"]] = fam.get(row["family"], 0) + int(row["flops"] or 0)
if not lnb: bad.append("no layernorm_backward row costed")
if ops["ops_without_inputs"]: bad.append("%d ops without inputs" % ops["ops_without_inputs"])
if layout == "cuda":
    if ops["time"] != "device": bad.append("op times are %s, not device time" % ops["time"])
    for row in ops["rows"]:
        if row["kernels"] < row["count"]:
            bad.append("%s: %d kernels for %d ops" % (row["op"], row["kernels"], row["count"]))
W = W1 = Bf = Bb = B1 = LN = 0
for l in range(L):
    moe = E > 0 and (l + 1) % every == 0
    # attention: qkv (column-parallel) and proj (row-parallel: its bias added once, its
    # gradient summed on every TP rank)
    W += 4 * C * C; W1 += 4 * C * C; Bf += 4 * C; Bb += 3 * C + tp * C; B1 += 4 * C
    LN += 4 * C
    if moe:  # the router and K of the E expert MLPs per token, replicated over TP
        W += tp * (E * C + K * 2 * C * F); Bf += tp * K * (F + C); Bb += tp * K * (F + C)
        W1 += E * C + K * 2 * C * F; B1 += K * (F + C)
    else:  # fc (column-parallel), fcproj (row-parallel)
        W += 2 * C * F; W1 += 2 * C * F; Bf += F + C; Bb += F + tp * C; B1 += F + C
W += tp * Vp * C; W1 += V * C; LN += 2 * C
k = 7 if cp > 1 else 6
gemm, attn = fam.get("gemm", 0) / steps, fam.get("attention", 0) / steps
want_gemm, want_attn = 6 * n * W + n * (Bf + Bb), k * L * C * n * (T + 1)
if gemm != want_gemm: bad.append("gemm FLOPs per step %d != 6 n W + n (Bf + Bb) = %d" % (gemm, want_gemm))
selective = head["recompute"] == "selective"
if selective: want_attn += 2 * L * C * n * (T + 1)
if attn != want_attn: bad.append("attention FLOPs per step %d != %d L C n (T+1) = %d" % (attn, k, want_attn))
model = 6 * n * (W1 + B1 + LN) + 12 * L * C * T * n
attn_model = (attn - (2 * L * C * n * (T + 1) if selective else 0)) * 12 * T // ((T + 1) * k)
rel = gemm - n * (Bf + Bb) + 6 * n * (B1 + LN) - 6 * n * (W - W1) + attn_model
if rel != model: bad.append("relation gives %d, the model count %d" % (rel, model))
meta = flops_meta["model_flops_per_step"]
if abs(meta - model) > 5e-6 * model: bad.append("metadata model_flops_per_step %g != %d" % (meta, model))
hw = flops_meta["hardware_flops_per_step"]
want_hw = model + (4 * L * C * T * n if selective else 0)
if abs(hw - want_hw) > 5e-6 * want_hw: bad.append("metadata hardware_flops_per_step %g != %d" % (hw, want_hw))
if bad:
    print("FAIL:\n  " + "\n  ".join(bad)); sys.exit(1)
print("ok: per step gemm %d + attention %d op FLOPs; model FLOPs %d (metadata %g)" %
      (gemm, attn, model, meta))
PY
