#!/bin/bash
# plan_frameworks.sh STEPSCOPE — `stepscope plan --framework` end to end (docs/plan.md
# "Frameworks"):
#   - the default is Megatron-LM's conventions on GPUs, the stepscope trainer's on cpu; an
#     unknown framework is a usage error (exit 2);
#   - GPT-3 175B with ZeRO-3 on 1,024 A100s: DeepSpeed's ZeRO-3 (the paper's 16 Psi / N) fits
#     in 80 GiB, and so does the stepscope trainer's (its set-up draws each rank's shard
#     directly: it never holds all fp32 parameters, 4 Psi = 652 GiB here);
#   - Llama 3 405B's 126 layers on 16 pipeline stages: a framework balances them unevenly, the
#     trainer refuses (exit 1);
#   - a Llama-like model (GQA, SwiGLU, RoPE, untied) is planned; the trainer refuses it (exit 2).
#   - --grad-reduce-dtype and --backward-prefetch: the JSON says them, they move the gradient
#     sync the documented way, and are refused where they do not apply;
#   - composer: FSDP's conventions on data parallelism alone, whole-block recomputation.
set -u
stepscope=$1
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-planfw.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
fail=0
no() { echo "FAILED: $*"; fail=1; }
framework_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job"]["framework"])' "$1"; }

"$stepscope" plan --model gpt2-124m --gpus 8 --global-batch 32 --top 1 --json "$dir/gpu.json" \
  > /dev/null 2>&1 || no "plan gpt2-124m on 8 GPUs"
[ "$(framework_of "$dir/gpu.json")" = megatron ] || no "the default on GPUs is megatron"
"$stepscope" plan --model tiny --device cpu --gpus 2 --global-batch 4 --top 1 \
  --json "$dir/cpu.json" > /dev/null 2>&1 || no "plan tiny on 2 cpu ranks"
[ "$(framework_of "$dir/cpu.json")" = stepscope ] || no "the default on cpu is the trainer's"
"$stepscope" plan --model tiny --gpus 2 --global-batch 4 --framework bogus > /dev/null \
  2> "$dir/err"
[ $? -eq 2 ] && grep -q "unknown --framework 'bogus'" "$dir/err" || no "--framework bogus"

gpt3=(--layers 96 --hidden 12288 --heads 96 --vocab 51200 --seq 2048 --max-seq 2048
      --gpus 1024 --global-batch 2048 --device a100-80g --dp 1024 --tp 1 --pp 1 --cp 1 --zero 3
      --recompute full --microbatches 2)
"$stepscope" plan "${gpt3[@]}" --framework deepspeed > "$dir/ds.txt" 2>&1 ||
  { cat "$dir/ds.txt"; no "GPT-3 ZeRO-3 under deepspeed"; }
grep -q "^best: fits" "$dir/ds.txt" || { cat "$dir/ds.txt"; no "DeepSpeed ZeRO-3 fits GPT-3"; }
"$stepscope" plan "${gpt3[@]}" --framework stepscope-cuda > "$dir/ss.txt" 2>&1
grep -q "^best: fits" "$dir/ss.txt" || { cat "$dir/ss.txt"; no "the trainer's ZeRO-3 fits GPT-3"; }

# the trainer's CUDA fused attention (--attention flash): no T x T buffers. GPT-2 124M, micro-batch
# 4, 12 heads of 64, T 1024: each of the 12 blocks stores 4 x 12 x 1024 x (1 + 64) floats
# instead of 4 x 12 x 1024 x 1024, and the three T x T scratch buffers go
gpt2=(--model gpt2-124m --gpus 8 --global-batch 32 --framework stepscope-cuda --dp 8 --tp 1
      --pp 1 --cp 1 --zero 1 --recompute none --microbatches 1)
"$stepscope" plan "${gpt2[@]}" --json "$dir/gemm.json" > /dev/null 2>&1 || no "plan gpt2 stepscope-cuda"
"$stepscope" plan "${gpt2[@]}" --attention flash --json "$dir/flash.json" > /dev/null 2>&1 ||
  no "plan gpt2 stepscope-cuda --attention flash"
python3 - "$dir/gemm.json" "$dir/flash.json" <<'PY' || no "stepscope-cuda's fused attention keeps no T x T buffers"
import json, sys
a, f = (json.load(open(p))["layouts"][0]["memory_bytes"]["activations"] for p in sys.argv[1:])
rows = 4 * 12 * 1024
want = 12 * rows * (1024 - 65) * 4 + 3 * rows * 1024 * 4
print("activations: gemm %d, flash %d, saved %d (want %d)" % (a, f, a - f, want))
sys.exit(a - f != want)
PY

llama=(--layers 126 --hidden 16384 --heads 128 --kv-heads 8 --ffn 53248 --mlp swiglu
       --positions rope --untied --vocab 128000 --seq 8192 --gpus 8192 --global-batch 2048
       --dp 64 --tp 8 --pp 16 --cp 1 --zero 1 --recompute full --microbatches 32
       --schedule 1f1b --sp)
"$stepscope" plan "${llama[@]}" > "$dir/llama.txt" 2>&1 ||
  { cat "$dir/llama.txt"; no "Llama 3 405B on 8,192 GPUs, pp16"; }
grep -q "^best: fits" "$dir/llama.txt" || { cat "$dir/llama.txt"; no "Llama 3 405B fits"; }
"$stepscope" plan "${llama[@]}" --framework stepscope-cuda > "$dir/llama-ss.txt" 2>&1
[ $? -eq 2 ] || { cat "$dir/llama-ss.txt"; no "the trainer has no GQA/SwiGLU/RoPE"; }
"$stepscope" plan --layers 126 --hidden 1024 --heads 8 --vocab 1000 --seq 64 --gpus 16 \
  --global-batch 16 --dp 1 --tp 1 --pp 16 --cp 1 --zero 0 --recompute none --microbatches 16 \
  --schedule 1f1b --framework stepscope-cuda > "$dir/uneven.txt" 2>&1
[ $? -eq 1 ] || { cat "$dir/uneven.txt"; no "the trainer refuses uneven stages"; }

# presets of real models (model_presets.c): Llama 3 8B is GQA, SwiGLU, RoPE, untied; Mixtral plans
# expert parallelism; an unknown name lists both tables
"$stepscope" plan --model llama3-8b --gpus 8 --global-batch 64 --top 1 --json "$dir/l8.json" \
  > /dev/null 2>&1 || no "plan --model llama3-8b"
python3 - "$dir/l8.json" <<'PY' || no "llama3-8b's shape"
import json, sys
j = json.load(open(sys.argv[1]))["job"]
ok = (j["layers"], j["hidden"], j["kv_heads"], j["ffn"], j["mlp"], j["positions"], j["untied"]) == \
     (32, 4096, 8, 14336, "swiglu", "rope", True)
sys.exit(0 if ok else 1)
PY
"$stepscope" plan --model mixtral-8x7b --gpus 16 --global-batch 64 --csv "$dir/mx.csv" \
  > /dev/null 2>&1 || no "plan --model mixtral-8x7b"
awk -F, 'NR > 1 && $30 > 1 && $18 == 1 { found = 1 } END { exit !found }' "$dir/mx.csv" ||
  no "mixtral: a fitting layout with expert parallelism"
"$stepscope" plan --model llama4 --gpus 8 --global-batch 8 > /dev/null 2> "$dir/err"
[ $? -eq 2 ] && grep -q "llama3-405b" "$dir/err" || no "unknown --model lists the real models"

# fp8: a framework's GEMMs at the fp8 peak (a shorter step, the MFU still against bf16's);
# refused where the device has none
step_of() { "$stepscope" plan --model llama3-8b --gpus 8 --global-batch 64 --dp 8 --tp 1 --pp 1 \
  --cp 1 --zero 1 --recompute none --microbatches 8 "$@" --json - 2>/dev/null |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["layouts"][0]["step_time_s"])'; }
bf16=$(step_of --precision bf16) fp8=$(step_of --precision fp8)
python3 -c "import sys; sys.exit(0 if 0 < float('$fp8') < 0.9 * float('$bf16') else 1)" ||
  no "fp8 step $fp8 s not shorter than bf16's $bf16 s"
"$stepscope" plan --model llama3-8b --gpus 8 --global-batch 64 --precision fp8 \
  --device a100-80g > /dev/null 2>&1
[ $? -eq 2 ] || no "fp8 on an A100 is refused"

# fp8's memory (TransformerEngine): GEMM inputs stored quantized, so fewer activation bytes;
# Megatron's main gradients in the reduction's dtype (bf16: half of fp32's)
mem_of() { "$stepscope" plan --model llama3-8b --gpus 8 --global-batch 64 --dp 8 --tp 1 --pp 1 \
  --cp 1 --zero 1 --recompute none --microbatches 8 "$@" --json - 2>/dev/null |
  python3 -c 'import json,sys; m=json.load(sys.stdin)["layouts"][0]["memory_bytes"]
print(m["activations"], m["gradients"])'; }
read -r act16 grad32 <<< "$(mem_of --precision bf16)"
read -r act8 grad16 <<< "$(mem_of --precision fp8 --grad-reduce-dtype bf16)"
python3 -c "import sys; sys.exit(0 if 0 < int('$act8') < 0.9 * int('$act16') else 1)" ||
  no "fp8 activations $act8 not below bf16's $act16"
[ "$((grad32))" -eq "$((2 * grad16))" ] || no "megatron bf16 gradients $grad16 not half of fp32's $grad32"
# the sweep goes past 256 micro-batches a step (Megatron-Bridge ran Qwen3-235B with 512)
"$stepscope" plan --model llama3-8b --gpus 8 --global-batch 4096 --tp 8 --pp 1 --cp 1 \
  --microbatches 512 > /dev/null 2>&1 || no "a layout of 512 micro-batches is not enumerated"

# --grad-reduce-dtype: the DP gradient reduction's bytes (JSON job.grad_reduce_bytes), refused for
# the trainer's conventions; 16-bit gradients shorten an exposed all-reduce
sync_of() { "$stepscope" plan --model llama3-8b --gpus 16 --global-batch 64 --dp 16 --tp 1 --pp 1 \
  --cp 1 --zero 0 --recompute none --microbatches 4 --no-overlap "$@" --json - 2>/dev/null |
  python3 -c 'import json,sys; d=json.load(sys.stdin)
print(d["job"]["grad_reduce_bytes"], d["layouts"][0]["breakdown_s"]["grad_sync"])'; }
read -r b32 s32 <<< "$(sync_of)"
read -r b16 s16 <<< "$(sync_of --grad-reduce-dtype fp16)"
[ "$b32" = 4 ] && [ "$b16" = 2 ] || no "grad_reduce_bytes $b32 / $b16, not 4 / 2"
python3 -c "import sys; sys.exit(0 if 0 < float('$s16') < 0.6 * float('$s32') else 1)" ||
  no "fp16 gradient sync $s16 s not about half of fp32's $s32 s"
"$stepscope" plan --model gpt2-350m --gpus 8 --global-batch 64 --framework stepscope-cuda \
  --grad-reduce-dtype fp16 > /dev/null 2>&1
[ $? -eq 2 ] || no "--grad-reduce-dtype with the trainer's conventions is refused"
"$stepscope" plan --help | grep -q "fp32; deepspeed bf16\]; refused for the stepscope" ||
  no "plan --help does not say --grad-reduce-dtype is refused for the stepscope trainer"

# --backward-prefetch (FSDP's BackwardPrefetch): JSON job.backward_prefetch; post exposes the
# backward all-gathers of a FULL_SHARD micro-batch (MPT-13B, 2 x 2048 tokens on 8 H100s, as
# llm-foundry's table ran it under Composer's default); refused without --framework fsdp
fsdp_of() { "$stepscope" plan --framework fsdp --layers 40 --hidden 5120 --heads 40 --vocab 50368 \
  --seq 2048 --max-seq 2048 --gpus 8 --global-batch 16 --dp 8 --tp 1 --pp 1 --cp 1 --zero 3 \
  --recompute none --microbatches 1 "$@" --json - 2>/dev/null |
  python3 -c 'import json,sys; d=json.load(sys.stdin)
print(d["job"]["backward_prefetch"], d["layouts"][0]["breakdown_s"]["grad_sync"])'; }
read -r bp_pre sync_pre <<< "$(fsdp_of)"
read -r bp_post sync_post <<< "$(fsdp_of --backward-prefetch post)"
[ "$bp_pre" = pre ] && [ "$bp_post" = post ] || no "backward_prefetch $bp_pre / $bp_post, not pre / post"
python3 -c "import sys; sys.exit(0 if float('$sync_post') > float('$sync_pre') + 0.02 else 1)" ||
  no "BACKWARD_POST gradient sync $sync_post s not above BACKWARD_PRE's $sync_pre s"
"$stepscope" plan --model llama3-8b --gpus 8 --global-batch 64 --backward-prefetch post \
  > /dev/null 2>&1
[ $? -eq 2 ] || no "--backward-prefetch without --framework fsdp is refused"

# --framework composer (docs/plan.md "What each framework can run"): FSDP's conventions on data
# parallelism alone, whole-block checkpointing, BACKWARD_POST by default. Its sweep of MPT-13B on
# 8 H100s has only tp 1, pp 1, cp 1 and no selective recomputation (fsdp's has all of them);
# a layout predicts what fsdp with --backward-prefetch post predicts; a named TP degree or
# selective recomputation is refused with the reason; --backward-prefetch pre still applies
mpt13=(--layers 40 --hidden 5120 --heads 40 --vocab 50368 --seq 2048 --max-seq 2048 --gpus 8
       --global-batch 16 --dropout 0)
"$stepscope" plan "${mpt13[@]}" --framework composer --json "$dir/composer.json" > /dev/null 2>&1 ||
  no "plan MPT-13B under composer"
"$stepscope" plan "${mpt13[@]}" --framework fsdp --json "$dir/fsdp.json" > /dev/null 2>&1 ||
  no "plan MPT-13B under fsdp"
python3 - "$dir/composer.json" "$dir/fsdp.json" <<'PY' || no "composer's sweep: data parallelism alone"
import json, sys
c, f = (json.load(open(p)) for p in sys.argv[1:])
assert c["job"]["framework"] == "composer" and c["job"]["backward_prefetch"] == "post", c["job"]
L = [l["layout"] for l in c["layouts"]]
assert L and all((l["tp"], l["pp"], l["cp"]) == (1, 1, 1) for l in L)
assert {l["recompute"] for l in L} == {"none", "full"}, {l["recompute"] for l in L}
F = [l["layout"] for l in f["layouts"]]
assert any(l["tp"] > 1 for l in F) and any(l["recompute"] == "selective" for l in F)
print("composer: %d layouts, fsdp: %d" % (len(L), len(F)))
PY
one13=(--dp 8 --tp 1 --pp 1 --cp 1 --zero 3 --recompute full --microbatches 1 --json -)
c_step=$("$stepscope" plan "${mpt13[@]}" "${one13[@]}" --framework composer 2>/dev/null |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["layouts"][0]["step_time_s"])')
f_step=$("$stepscope" plan "${mpt13[@]}" "${one13[@]}" --framework fsdp --backward-prefetch post   2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["layouts"][0]["step_time_s"])')
[ -n "$c_step" ] && [ "$c_step" = "$f_step" ] ||
  no "composer's step $c_step s is not fsdp's with BACKWARD_POST, $f_step s"
"$stepscope" plan "${mpt13[@]}" --framework composer --top 1 2>&1 |
  grep -q "^  framework: composer: PyTorch FSDP's conventions on the layouts llm-foundry runs" ||
  no "composer's header line"
"$stepscope" plan "${mpt13[@]}" --framework composer --tp 2 > "$dir/ctp.txt" 2>&1
[ $? -eq 1 ] && grep -q "Composer (llm-foundry) runs FSDP's data parallelism alone" "$dir/ctp.txt" ||
  { cat "$dir/ctp.txt"; no "composer --tp 2: refused with the reason"; }
"$stepscope" plan "${mpt13[@]}" --framework composer --recompute selective > "$dir/csel.txt" 2>&1
[ $? -eq 1 ] && grep -q "recomputes whole blocks" "$dir/csel.txt" ||
  { cat "$dir/csel.txt"; no "composer --recompute selective: refused with the reason"; }
"$stepscope" plan "${mpt13[@]}" --framework composer --backward-prefetch pre --top 1 \
  --json - 2>/dev/null | grep -q '"backward_prefetch":"pre"' || no "composer --backward-prefetch pre"

# FSDP's hybrid sharding (--shard-group; docs/plan.md "Frameworks"): the sweep offers the DP
# group's members in a node as the shard group once the group spans nodes (Llama-3-8B on 4,096
# H100s: every layout named "hybrid8" has shard_group 8, ZeRO-2/3, and more optimizer state than
# the same layout sharded over all 4,096); a named layout takes it; Megatron, or a group that
# does not divide DP x CP, is refused with the reason
"$stepscope" plan --model llama3-8b --gpus 4096 --global-batch 4096 --framework fsdp --tp 1 --pp 1 \
  --cp 1 --recompute none --json "$dir/hsdp.json" > /dev/null 2>&1 || no "plan at 4,096 GPUs"
python3 - "$dir/hsdp.json" <<'PY' || no "hybrid sharding in the sweep"
import json, sys
L = [l for l in json.load(open(sys.argv[1]))["layouts"] if l["fits"]]
hy = [l for l in L if l["layout"]["shard_group"]]
full = [l for l in L if not l["layout"]["shard_group"]]
assert hy and full, (len(hy), len(full))
assert all(l["layout"]["shard_group"] == 8 and "hybrid8" in l["layout"]["name"] for l in hy)
assert all(l["layout"]["zero"] in (2, 3) for l in hy)
# the same layout sharded over 8 instead of 4,096 holds more optimizer state
key = lambda l: (l["layout"]["zero"], l["layout"]["micro_batch"])
f = {key(l): l for l in full}
pairs = [(l, f[key(l)]) for l in hy if key(l) in f]
assert pairs and all(h["memory_bytes"]["optimizer"] > g["memory_bytes"]["optimizer"] for h, g in pairs)
print("best at 4,096 GPUs:", L[0]["layout"]["name"], "; hybrid layouts:", len(hy))
PY
hsdp_one() { "$stepscope" plan --model llama3-8b --gpus 16 --global-batch 64 --dp 16 --tp 1 \
  --pp 1 --cp 1 --recompute none --microbatches 4 "$@"; }
hsdp_one --framework fsdp --zero 3 --shard-group 8 > "$dir/one.txt" 2>&1 &&
  grep -q "zero3 hybrid8" "$dir/one.txt" || { cat "$dir/one.txt"; no "one hybrid layout"; }
# a shard group across nodes (16 of a DP group with 8 a node): the sweep takes the one named
"$stepscope" plan --model llama3-8b --gpus 4096 --global-batch 4096 --framework fsdp --tp 1 \
  --pp 1 --cp 1 --recompute none --shard-group 16 --top 3 > "$dir/h16.txt" 2>&1 &&
  grep -q "^1 .*zero[23] hybrid16 " "$dir/h16.txt" && ! grep -q "hybrid8" "$dir/h16.txt" ||
  { cat "$dir/h16.txt"; no "--shard-group 16 in a sweep"; }
hsdp_one --framework megatron --zero 1 --shard-group 8 > "$dir/one.txt" 2>&1
[ $? -eq 2 ] && grep -q "shard-group is PyTorch FSDP's hybrid sharding" "$dir/one.txt" ||
  { cat "$dir/one.txt"; no "hybrid sharding under Megatron: refused"; }
# a sweep no layout of which the named group fits: the reason, not a bare "no layout"
"$stepscope" plan --model gpt3-125m --gpus 16 --global-batch 64 --framework fsdp --shard-group 3 \
  > "$dir/sg3.txt" 2>&1
[ $? -eq 1 ] && grep -q "shard-group 3: hybrid sharding needs --zero 2 or 3" "$dir/sg3.txt" ||
  { cat "$dir/sg3.txt"; no "--shard-group 3 in a sweep: the reason"; }
hsdp_one --framework fsdp --zero 3 --shard-group 3 > "$dir/one.txt" 2>&1
[ $? -eq 1 ] && grep -q "must divide" "$dir/one.txt" || { cat "$dir/one.txt"; no "--shard-group 3: refused"; }

# a cluster of its own (docs/plan.md "Clusters"): --nics-per-node, --nic-gbps and --nvlink-gbs
# replace the device table's links, the JSON and the header say them, a DP group across nodes
# then syncs more slowly and TP inside a node more slowly; the cpu device has none to describe
cluster=(--model gpt3-760m --gpus 16 --global-batch 64 --dp 2 --tp 8 --pp 1 --cp 1 --zero 1
         --recompute none --microbatches 4 --no-overlap)
"$stepscope" plan "${cluster[@]}" --json "$dir/dgx.json" > "$dir/dgx.txt" 2>&1 ||
  { cat "$dir/dgx.txt"; no "plan on DGX links"; }
"$stepscope" plan "${cluster[@]}" --nics-per-node 4 --nic-gbps 200 --nvlink-gbs 300 \
  --json "$dir/own.json" > "$dir/own.txt" 2>&1 || { cat "$dir/own.txt"; no "plan on own links"; }
grep -q "cluster: nodes of 8, 300 GB/s a device inside a node, 4 NICs x 200 Gb/s a node" \
  "$dir/own.txt" || { cat "$dir/own.txt"; no "the header names the cluster given"; }
# the same share of the network a device (4 x 200 = 2 x 400 = 8 x 100 Gb/s a node of 8) is the
# same prediction
"$stepscope" plan "${cluster[@]}" --nics-per-node 2 --nic-gbps 400 --nvlink-gbs 300 \
  --json "$dir/two.json" > /dev/null 2>&1 || no "plan on 2 NICs"
"$stepscope" plan "${cluster[@]}" --nics-per-node 8 --nic-gbps 100 --nvlink-gbs 300 \
  --json "$dir/eight.json" > /dev/null 2>&1 || no "plan on 8 NICs"
python3 - "$dir/dgx.json" "$dir/own.json" "$dir/two.json" "$dir/eight.json" <<'PY' ||
import json, sys
dgx, own, two, eight = (json.load(open(f)) for f in sys.argv[1:])
d = own["device"]
assert (d["nics_per_node"], d["inter_node_bw"], d["intra_node_bw"]) == (4, 25e9, 300e9), d
assert (dgx["device"]["nics_per_node"], dgx["device"]["inter_node_bw"]) == (8, 50e9), dgx["device"]
a, b = dgx["layouts"][0], own["layouts"][0]
# dp 2 across the 2 nodes, one member a node: half a NIC of 25 GB/s (12.5 GB/s) against one
# NIC of 50 GB/s, the same latencies; TP 8 inside a node: 300 against 450 GB/s
assert b["breakdown_s"]["grad_sync"] > a["breakdown_s"]["grad_sync"], (a["breakdown_s"]["grad_sync"], b["breakdown_s"]["grad_sync"])
assert b["breakdown_s"]["tp"] > a["breakdown_s"]["tp"], (a["breakdown_s"]["tp"], b["breakdown_s"]["tp"])
for other in (two, eight):
    o = other["layouts"][0]
    assert o["breakdown_s"]["grad_sync"] == b["breakdown_s"]["grad_sync"] and o["breakdown_s"]["tp"] == b["breakdown_s"]["tp"], (o, b)
PY
  no "--nics-per-node, --nic-gbps, --nvlink-gbs set the links"
"$stepscope" plan --model tiny --device cpu --gpus 2 --global-batch 4 --nic-gbps 100 > /dev/null \
  2> "$dir/err"
[ $? -eq 2 ] && grep -q "describe a GPU cluster's links, not the cpu device's" "$dir/err" ||
  { cat "$dir/err"; no "--nic-gbps on cpu: refused"; }

# Megatron's --tp-comm-overlap: the JSON says it, TP's exposed time falls, a layout without
# tp > 1 and SP is refused (Megatron asserts SP, off at tp 1), the sweep offers none, nor TP
# groups across nodes; other frameworks refuse it
tpo=(--model gpt3-13b --gpus 8 --global-batch 16 --dp 1 --tp 8 --pp 1 --cp 1 --sp --zero 0
     --recompute none --microbatches 16)
"$stepscope" plan "${tpo[@]}" --json "$dir/tp0.json" > /dev/null 2>&1 || no "plan tp 8 + sp"
"$stepscope" plan "${tpo[@]}" --tp-comm-overlap --json "$dir/tp1.json" > /dev/null 2>&1 ||
  no "plan tp 8 + sp --tp-comm-overlap"
"$stepscope" plan --model gpt3-13b --gpus 32 --global-batch 64 --tp-comm-overlap --csv "$dir/tpo.csv" \
  > /dev/null 2>&1 || no "a --tp-comm-overlap sweep"
python3 - "$dir/tp0.json" "$dir/tp1.json" "$dir/tpo.csv" <<'PY' || no "--tp-comm-overlap"
import csv, json, sys
off, on = (json.load(open(f)) for f in sys.argv[1:3])
assert off["job"]["tp_comm_overlap"] is False and on["job"]["tp_comm_overlap"] is True
a, b = off["layouts"][0]["breakdown_s"], on["layouts"][0]["breakdown_s"]
assert 0 < b["tp"] < a["tp"] / 2, (a["tp"], b["tp"])
rows = list(csv.DictReader(open(sys.argv[3])))
assert rows and all(r["sp"] == "1" and int(r["tp"]) > 1 for r in rows), "a layout without TP + SP"
# TransformerEngine's userbuffers stay inside a node: no TP group wider than the node of 8
assert all(int(r["tp"]) <= 8 for r in rows), "a TP group across nodes"
PY
"$stepscope" plan "${tpo[@]/--sp/--no-sp}" --tp-comm-overlap > "$dir/nosp.txt" 2>&1
[ $? -eq 1 ] && grep -q "tp-comm-overlap needs tp > 1 with sequence parallelism" "$dir/nosp.txt" ||
  { cat "$dir/nosp.txt"; no "--tp-comm-overlap without SP: refused"; }
"$stepscope" plan --model gpt3-13b --gpus 8 --global-batch 16 --framework fsdp --tp-comm-overlap \
  > /dev/null 2> "$dir/err"
[ $? -eq 2 ] && grep -q "tp-comm-overlap is Megatron-LM's" "$dir/err" ||
  { cat "$dir/err"; no "--tp-comm-overlap under fsdp: refused"; }

# The ranks' order (docs/plan.md "Clusters"): a framework lays them out tp, cp, dp, pp (Megatron's
# "tp-cp-ep-dp-pp", torchtitan's and DeepSpeed's meshes), so 16 GPUs as tp 1, pp 2, dp 8 keep
# each DP group in a node of 8: its gradient sync is the same as on one node of 16, and only the
# pipeline's sends cross nodes. The trainer lays them out tp, cp, pp, dp: its DP groups span the
# two nodes, so its sync is slower on nodes of 8 than on one node.
order_of() { "$stepscope" plan --model gpt3-2.7b --gpus 16 --global-batch 64 --dp 8 --tp 1 --pp 2 \
  --cp 1 --zero 1 --recompute none --microbatches 8 --schedule 1f1b --no-overlap "$@" --json - \
  2>/dev/null | python3 -c 'import json,sys; b=json.load(sys.stdin)["layouts"][0]["breakdown_s"]
print(b["grad_sync"], b["pp"])'; }
read -r mg8 mp8 <<< "$(order_of --gpus-per-node 8)"
read -r mg16 mp16 <<< "$(order_of --gpus-per-node 16)"
read -r tg8 tp8 <<< "$(order_of --gpus-per-node 8 --framework stepscope-cuda)"
read -r tg16 tp16 <<< "$(order_of --gpus-per-node 16 --framework stepscope-cuda)"
python3 -c "import sys; sys.exit(0 if float('$mg8') == float('$mg16') > 0 and float('$mp8') > float('$mp16') > 0 else 1)" ||
  no "megatron's DP group inside a node: sync $mg8 / $mg16 s, pipeline $mp8 / $mp16 s on nodes of 8 / 16"
python3 -c "import sys; sys.exit(0 if float('$tg8') > float('$tg16') > 0 else 1)" ||
  no "the trainer's DP group across nodes: sync $tg8 s on nodes of 8, $tg16 s on one node"

# The interleaved schedule's chunks: the sweep offers v = 2 to 8 (Mixtral 8x7B's published
# mapping is pp 4 with 8 chunks a rank), and a layout named with more is not in it
"$stepscope" plan --model mixtral-8x7b --gpus 64 --global-batch 256 --tp 1 --pp 4 --ep 8 \
  --csv "$dir/vp.csv" > /dev/null 2>&1 || no "a sweep of pp 4 interleaved layouts"
python3 - "$dir/vp.csv" <<'PY' || no "the sweep's virtual stages: 2 to 8"
import csv, sys
v = {int(r["virtual_stages"]) for r in csv.DictReader(open(sys.argv[1])) if r["schedule"] == "interleaved"}
assert v == set(range(2, 9)), sorted(v)
PY
"$stepscope" plan --model mixtral-8x7b --gpus 64 --global-batch 256 --tp 1 --pp 4 --ep 8 \
  --schedule interleaved --virtual-stages 8 --microbatches 16 --recompute none --zero 1 \
  > "$dir/v8.txt" 2>&1 && grep -q "interleaved v8 m16 x 1" "$dir/v8.txt" ||
  { cat "$dir/v8.txt"; no "Mixtral 8x7B's published layout, interleaved v8"; }

# Megatron's expert tensor parallelism (--expert-tp; docs/plan.md "Experts under a framework"):
# Mixtral 8x22B on 128 H100s as Megatron-MoE-ModelZoo runs it (tp 2 + SP, pp 8 interleaved v7,
# ep 8, --expert-tensor-parallel-size 1). With whole experts its EP group is 8 ranks of a node
# dispatching their sequence-parallel halves, not 8 DP ranks across two nodes dispatching
# everything: less EP time; its MoE blocks keep only their attention's TP collectives: less TP
# time; its experts twice the parameter bytes and the same optimizer bytes. The sweep offers
# both under Megatron only where tp > 1 with SP; the CSV and JSON say expert_tp.
x22=(--model mixtral-8x22b --gpus 128 --global-batch 256)
one22=(--dp 8 --tp 2 --sp --pp 8 --cp 1 --ep 8 --schedule interleaved --virtual-stages 7
       --microbatches 32 --zero 1 --recompute none)
"$stepscope" plan "${x22[@]}" "${one22[@]}" --json "$dir/etp.json" > /dev/null 2>&1 ||
  no "Mixtral 8x22B, experts cut over TP"
"$stepscope" plan "${x22[@]}" "${one22[@]}" --expert-tp 1 --json "$dir/etp1.json" > "$dir/etp1.txt" \
  2>&1 && grep -q "dp8 ep8 etp1 tp2+sp pp8" "$dir/etp1.txt" || { cat "$dir/etp1.txt"; no "Mixtral 8x22B, --expert-tp 1"; }
"$stepscope" plan --model mixtral-8x7b --gpus 16 --global-batch 32 --csv "$dir/etp.csv" > /dev/null \
  2>&1 || no "a Mixtral 8x7B sweep"
python3 - "$dir/etp.json" "$dir/etp1.json" "$dir/etp.csv" <<'PY' || no "--expert-tp 1"
import csv, json, sys
cut, whole = (json.load(open(f))["layouts"][0] for f in sys.argv[1:3])
assert (cut["layout"]["expert_tp"], whole["layout"]["expert_tp"]) == (2, 1), (cut["layout"], whole["layout"])
a, b = cut["breakdown_s"], whole["breakdown_s"]
assert 0 < b["ep"] < a["ep"] / 2, (a["ep"], b["ep"])
# by hand: 32 micro-batches x 7 MoE blocks on a stage x (4 all-to-alls of 4096 tokens x top 2 /
# tp 2 rows of 6144 bf16, 7/8 of them away over NVLink's 450 GB/s, 20 us each, + the counts')
want = 32 * 7 * (4 * (20e-6 + 4096 * 2 / 2 * 6144 * 2 * 7 / 8 / 450e9) + 20e-6)
assert abs(b["ep"] / want - 1) < 1e-6, (b["ep"], want)
assert 0 < b["tp"] < a["tp"], (a["tp"], b["tp"])
assert whole["memory_bytes"]["parameters"] > cut["memory_bytes"]["parameters"]
assert whole["memory_bytes"]["optimizer"] == cut["memory_bytes"]["optimizer"]
rows = list(csv.DictReader(open(sys.argv[3])))
w = [r for r in rows if r["expert_tp"] == "1" and int(r["tp"]) > 1]
assert w and all(r["sp"] == "1" for r in w), "whole experts at tp > 1, with SP only"
assert any(r["expert_tp"] == r["tp"] and int(r["tp"]) > 1 for r in rows)
# folded: an EP degree beyond dp (tp 2 x dp 4 = 8 ranks, ep 8) only with whole experts
assert all(r["expert_tp"] == "1" for r in rows if int(r["ep"]) > int(r["dp"]))
assert any(int(r["ep"]) > int(r["dp"]) for r in rows)
PY
"$stepscope" plan --model mixtral-8x7b --gpus 16 --global-batch 32 --framework fsdp --expert-tp 1 \
  > /dev/null 2> "$dir/err"
[ $? -eq 2 ] && grep -q "expert-tensor-parallel-size: give --framework megatron" "$dir/err" ||
  { cat "$dir/err"; no "--expert-tp under fsdp: refused"; }
"$stepscope" plan --model llama3-8b --gpus 16 --global-batch 32 --expert-tp 1 > /dev/null 2> "$dir/err"
[ $? -eq 2 ] && grep -q "expert-tp 1 needs --experts" "$dir/err" ||
  { cat "$dir/err"; no "--expert-tp without experts: refused"; }

# The experts' all-to-all across nodes (alltoall_s; docs/plan.md "Mixture of experts"): every
# rank's off-node bytes leave through its share of the node's NICs. Mixtral 8x7B on 16 H100s in
# nodes of 4 as dp 16, ep 8: an EP group of 4 ranks on each of two nodes; a rank sends 4096
# tokens x top 2 rows of 4096 bf16 (67108864 bytes), 3/8 of them over NVLink (450 GB/s) while
# 4/8 go over 8 NICs x 50 GB/s / 4 devices = 100 GB/s: 20 us + 335.5 us an all-to-all, four of
# them and the counts' 20 us per MoE block, 32 blocks, 2 micro-batches.
"$stepscope" plan --model mixtral-8x7b --gpus 16 --gpus-per-node 4 --global-batch 32 --dp 16 \
  --tp 1 --pp 1 --cp 1 --ep 8 --zero 1 --recompute none --microbatches 2 --json "$dir/a2a.json" \
  > /dev/null 2>&1 || no "Mixtral 8x7B with EP across nodes"
python3 - "$dir/a2a.json" <<'PY' || no "the all-to-all across nodes"
import json, sys
ep = json.load(open(sys.argv[1]))["layouts"][0]["breakdown_s"]["ep"]
bytes_ = 4096 * 2 * 4096 * 2
a2a = 20e-6 + max(bytes_ * 3 / 8 / 450e9, bytes_ * 4 / 8 / 100e9)
want = 2 * 32 * (4 * a2a + 20e-6)
assert abs(ep / want - 1) < 1e-6, (ep, want)
PY

# Models whose heads are not hidden / heads wide, and experts narrower than the dense MLP
# (--head-dim, --moe-ffn; Qwen3): the preset's JSON says them, a sweep runs, the trainer and a
# dense model refuse them.
"$stepscope" plan --model qwen3-30b-a3b --framework fsdp --gpus 8 --global-batch 512 --dp 8 \
  --tp 1 --pp 1 --cp 1 --ep 8 --zero 3 --recompute full --microbatches 16 --json "$dir/q3.json" \
  > /dev/null 2>&1 || no "Qwen3-30B-A3B as NeMo AutoModel ran it"
python3 - "$dir/q3.json" <<'PY' || no "qwen3-30b-a3b's head_dim and moe_ffn"
import json, sys
d = json.load(open(sys.argv[1]))
assert (d["job"]["head_dim"], d["job"]["moe_ffn"], d["job"]["experts"], d["job"]["top_k"]) == (128, 768, 128, 8), d["job"]
# the MFU's count: 6 x (151936 x 2048 + 48 x (2C x 4096 + 2C x 512 + 8 x 3C x 768)) + 12 x 48 x
# 4096 x 4096 per token (the heads 4096 wide on a width of 2048; the router left out of this
# count is E x C = 262144 a block, counted here, as are the norms' 4C a block and the final 2C)
C = 2048
params = 151936 * C + 48 * (2 * C * 4096 + 2 * C * 512 + 8 * 3 * C * 768 + 128 * C + 4 * C) + 2 * C
per_token = 6 * params + 12 * 48 * 4096 * 4096
l = d["layouts"][0]
mfu = l["tokens_per_s"] * per_token / 8 / 989e12
assert abs(mfu / l["mfu"] - 1) < 1e-6, (mfu, l["mfu"])
PY
"$stepscope" plan --model gpt2-350m --gpus 8 --global-batch 64 --framework stepscope-cuda \
  --head-dim 128 > /dev/null 2> "$dir/err"
[ $? -eq 2 ] && grep -q "no --kv-heads, --mlp swiglu, --untied, --positions rope, --head-dim, --moe-ffn or --sliding-window" \
  "$dir/err" || { cat "$dir/err"; no "--head-dim with the trainer: refused"; }
"$stepscope" plan --model llama3-8b --gpus 8 --global-batch 64 --moe-ffn 768 > /dev/null 2> "$dir/err"
[ $? -eq 2 ] && grep -q "moe-ffn 768 needs --experts" "$dir/err" ||
  { cat "$dir/err"; no "--moe-ffn without experts: refused"; }

# Context parallelism's ring passes K and V of the kv heads (GQA: 8 of Llama 3 8B's 32): with
# the attention hiding the ring, what stays exposed is its last hop, per block and micro-batch
# 20 us + 2 x 4096 tokens x 1024 (8 heads x 128) x 2 bytes / 450 GB/s
"$stepscope" plan --model llama3-8b --gpus 8 --global-batch 4 --dp 4 --tp 1 --pp 1 --cp 2 \
  --zero 1 --recompute none --microbatches 1 --json "$dir/cp.json" > /dev/null 2>&1 ||
  no "Llama 3 8B with cp 2"
python3 - "$dir/cp.json" <<'PY' || no "CP's K and V of the kv heads"
import json, sys
cp = json.load(open(sys.argv[1]))["layouts"][0]["breakdown_s"]["cp"]
want = 32 * (20e-6 + 2 * 4096 * 1024 * 2 / 450e9)
assert abs(cp / want - 1) < 1e-6, (cp, want)
PY

# What the experts' figures assume, said where a user reads them: the header and JSON's assumed
"$stepscope" plan --model mixtral-8x7b --gpus 8 --global-batch 64 --top 1 --json "$dir/mxa.json" \
  > "$dir/mxa.txt" 2>&1 || no "a Mixtral sweep"
grep -q "experts: routing taken as balanced" "$dir/mxa.txt" &&
  python3 -c 'import json,sys; sys.exit("balanced_expert_routing" not in json.load(open(sys.argv[1]))["assumed"])' \
    "$dir/mxa.json" || { cat "$dir/mxa.txt"; no "balanced routing named as assumed"; }
grep -q "experts: expert parallelism against its all-to-alls is ranked by the model alone" \
  "$dir/mxa.txt" &&
  python3 -c 'import json,sys; sys.exit("expert_parallel_ranking_unvalidated" not in json.load(open(sys.argv[1]))["assumed"])' \
    "$dir/mxa.json" || no "the EP ranking named as the model's alone"
! grep -q "experts: fine-grained" "$dir/mxa.txt" &&
  python3 -c 'import json,sys; sys.exit("fine_grained_expert_compute_unvalidated" in json.load(open(sys.argv[1]))["assumed"])' \
    "$dir/mxa.json" || no "Mixtral's 8 experts are not fine-grained"
"$stepscope" plan --model qwen3-30b-a3b --gpus 8 --global-batch 64 --top 1 --json "$dir/q3a.json" \
  > "$dir/q3a.txt" 2>&1 || no "a Qwen3-30B sweep"
grep -q "experts: fine-grained (64 or more)" "$dir/q3a.txt" &&
  python3 -c 'import json,sys; sys.exit("fine_grained_expert_compute_unvalidated" not in json.load(open(sys.argv[1]))["assumed"])' \
    "$dir/q3a.json" || no "fine-grained experts' compute named as unvalidated"
# Megatron-Core's host floor: in the header and JSON (job.layer_host_floor_s, assumed) of a
# Megatron plan, not of an FSDP one (none measured there); the step's parts still add up
grep -q "host: Megatron-Core takes at least 4.1 ms for a layer's forward and backward" "$dir/q3a.txt" &&
  grep -q "12.0 ms where they exchange tokens by the all-to-all dispatcher" "$dir/q3a.txt" &&
  python3 - "$dir/q3a.json" <<'PY' || { cat "$dir/q3a.txt"; no "the host floor named in a Megatron plan"; }
import json, sys
d = json.load(open(sys.argv[1]))
assert d["job"]["layer_host_floor_s"] == {"dense": 0.0041, "moe": 0.0082, "moe_alltoall": 0.012}
assert "megatron_layer_host_floor" in d["assumed"]
for l in d["layouts"]:
    b = l["breakdown_s"]
    assert abs(sum(b.values()) - l["step_time_s"]) < 1e-8 * l["step_time_s"], l["layout"]["name"]  # 9 digits a part
PY
"$stepscope" plan --model qwen3-30b-a3b --framework fsdp --gpus 8 --global-batch 64 --top 1 \
  --json "$dir/q3f.json" > "$dir/q3f.txt" 2>&1 || no "a Qwen3-30B sweep under FSDP"
! grep -q "host: Megatron-Core" "$dir/q3f.txt" &&
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit("layer_host_floor_s" in d["job"] or "megatron_layer_host_floor" in d["assumed"] or any(l["breakdown_s"]["host"] for l in d["layouts"]))' \
    "$dir/q3f.json" || no "no host floor under FSDP"
"$stepscope" plan --model llama3-8b --gpus 8 --global-batch 64 --top 1 > "$dir/dense.txt" 2>&1
! grep -q "experts:" "$dir/dense.txt" || no "a dense model's header names no experts"
# 32K positions or more: the attention share is named as unvalidated there (header and JSON),
# with --attention-rate share where cuDNN's rate applies (pointing to it) and under FSDP (no
# pointer); not at 16K, nor under the default split (Megatron-Core on Hopper, heads of 128)
"$stepscope" plan --model llama3-8b --seq 32768 --max-seq 32768 --gpus 64 --global-batch 64 \
  --attention-rate share --top 1 --json "$dir/long.json" > "$dir/long.txt" 2>&1 || no "a 32K sweep"
grep -q "attention: 32768 positions: published runs on current kernels" "$dir/long.txt" &&
  python3 -c 'import json,sys; sys.exit("long_context_attention_rate_unvalidated" not in json.load(open(sys.argv[1]))["assumed"])' \
    "$dir/long.json" || { cat "$dir/long.txt"; no "the long-context attention share named as unvalidated"; }
grep -q "attention: 32768 positions: .*without --attention-rate share, cuDNN's measured one is charged" \
  "$dir/long.txt" || no "the long-context caveat points away from --attention-rate share"
"$stepscope" plan --model llama3-8b --seq 16384 --max-seq 16384 --gpus 64 --global-batch 64 \
  --attention-rate share --top 1 --json "$dir/mid.json" > "$dir/mid.txt" 2>&1 || no "a 16K sweep"
! grep -q "attention: 16384 positions" "$dir/mid.txt" &&
  python3 -c 'import json,sys; sys.exit("long_context_attention_rate_unvalidated" in json.load(open(sys.argv[1]))["assumed"])' \
    "$dir/mid.json" || no "16K positions carry no long-context caveat"

# --attention-rate (Megatron-Core on Hopper, heads of 128): split by default, cudnn on request.
# The header names cuDNN's rate (and, split, the share's rest per token) and says how published
# runs came out, the JSON assumes it, the 32K caveat on the share is not printed, and at 32K
# positions the same layout runs fastest with cuDNN's rate alone, then split, then the share
# (the rest per token is less than the share's time beyond the kernel at 32K)
one32k="--model llama3-8b --seq 32768 --max-seq 32768 --gpus 64 --global-batch 64 --dp 8 --tp 8 \
  --pp 1 --cp 1 --zero 1 --recompute full --microbatches 8"
for rate in split cudnn; do
  case "$rate" in
    split) args="" assumed=megatron_cudnn_attention_split \
      said="attention: so charged, published Megatron-Core runs on H100 came out within" ;;
    cudnn) args="--attention-rate cudnn" assumed=megatron_cudnn_attention_rate \
      said="attention: with cuDNN's measured rate alone, published Megatron-Core runs on H100 came out faster" ;;
  esac
  # shellcheck disable=SC2086
  "$stepscope" plan $one32k $args --json "$dir/$rate.json" > "$dir/$rate.txt" 2>&1 ||
    no "a plan with --attention-rate $rate"
  grep -q "attention at cuDNN's measured rate (TransformerEngine's fused attention on Hopper, heads of 128: 680 TFLOP/s at 2K positions a chunk to 1042 at 32K" "$dir/$rate.txt" &&
    grep -q "$said" "$dir/$rate.txt" &&
    ! grep -q "attention: 32768 positions" "$dir/$rate.txt" &&
    python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["assumed"]; sys.exit(sys.argv[2] not in a or "long_context_attention_rate_unvalidated" in a)' \
      "$dir/$rate.json" "$assumed" || { cat "$dir/$rate.txt"; no "$rate: cuDNN's rate named in the header and the JSON"; }
done
grep -q "every query-key pair counted) plus, per token, the time beyond it that the 30 % share of peak charges at 2048 positions" \
  "$dir/split.txt" && ! grep -q "plus, per token" "$dir/cudnn.txt" || no "only the split names the share's rest"
# shellcheck disable=SC2086
"$stepscope" plan $one32k --attention-rate share --json "$dir/share32k.json" > /dev/null 2>&1 ||
  no "the share's plan"
python3 - "$dir/share32k.json" "$dir/split.json" "$dir/cudnn.json" <<'PY' || no "at 32K: cuDNN's rate alone < split < the share"
import json, sys
share, split, cudnn = (json.load(open(f)) for f in sys.argv[1:4])
for d in (share, split, cudnn):
    assert ("megatron_cudnn_attention_rate" in d["assumed"]) == (d is cudnn), d["assumed"]
    assert ("megatron_cudnn_attention_split" in d["assumed"]) == (d is split), d["assumed"]
s, p, c = (d["layouts"][0]["breakdown_s"]["compute"] for d in (share, split, cudnn))
assert c < p < s, (c, p, s)
PY
"$stepscope" plan --model llama3-8b --seq 32768 --max-seq 32768 --gpus 64 --global-batch 64 \
  --framework fsdp --top 1 > "$dir/fsdp32k.txt" 2>&1 || no "an fsdp 32K sweep"
grep -q "attention: 32768 positions" "$dir/fsdp32k.txt" &&
  ! grep -q "attention-rate" "$dir/fsdp32k.txt" || no "FSDP's long-context caveat offers no cuDNN rate"
for bad in "--framework fsdp" "--model gpt2-124m" "--device a100-80g" "--attention-rate-typo"; do
  for rate in cudnn split; do
    case "$bad" in
      --model*) args="$bad --attention-rate $rate" ;;
      --attention-rate-typo) args="--model llama3-8b --attention-rate fast" ;;
      *) args="--model llama3-8b $bad --attention-rate $rate" ;;
    esac
    # shellcheck disable=SC2086
    "$stepscope" plan $args --gpus 8 --global-batch 8 > "$dir/bad.txt" 2>&1
    [ $? -eq 2 ] && grep -q "attention-rate" "$dir/bad.txt" || no "--attention-rate refused: $args"
  done
done

# Sliding-window attention (GPT-OSS: 128 positions, every 2nd layer whole): the header says how
# many layers slide and their share of a causal layer's work (63 of 528 key tiles at 4096), the
# JSON names the window, and the same layout is faster than with whole-sequence attention by
# its attention time on the sliding layers (micro-batches of 4 sequences, so that each layer's
# work is above Megatron's host floor either way); the trainer has no such layers, and
# --full-attention-every alone is refused
oss="--layers 4 --hidden 2880 --heads 64 --head-dim 64 --kv-heads 8 --vocab 201088 --seq 4096 \
  --ffn 2880 --mlp swiglu --positions rope --untied --gpus 8 --global-batch 32 --dp 8 --tp 1 \
  --pp 1 --cp 1 --zero 1 --recompute none --microbatches 1"
"$stepscope" plan $oss --sliding-window 128 --full-attention-every 2 --json "$dir/swa.json" \
  > "$dir/swa.txt" 2>&1 || { cat "$dir/swa.txt"; no "a sliding-window plan"; }
grep -q "attention: a sliding window of 128 positions on 2 of 4 layers, at 0.119 of a causal" \
  "$dir/swa.txt" || { cat "$dir/swa.txt"; no "the sliding window in the header"; }
"$stepscope" plan $oss --json "$dir/full.json" > /dev/null 2>&1 || no "the same model, whole"
python3 - "$dir/swa.json" "$dir/full.json" <<'PY' || no "sliding layers' attention cheaper"
import json, sys
swa, full = (json.load(open(p)) for p in sys.argv[1:3])
assert swa["job"]["sliding_window"] == 128 and swa["job"]["full_attention_every"] == 2
assert "sliding_window" not in full["job"]
t_swa, t_full = (d["layouts"][0]["step_time_s"] for d in (swa, full))
# two of the four layers' attention (forward + backward, 3 x 4 x 4096 x 4096 x 4096 FLOPs a
# sequence, 4 sequences, at 30 % of 989 TFLOP/s at 2,048 positions, at 4,096 458 / 434 of that)
# at 0.119 of their time
att = 4 * 3 * 4 * 4096 * 4096 * 4096 / (0.30 * 458 / 434 * 989e12)
want = 2 * att * (1 - 63 / 528)
assert abs((t_full - t_swa) / want - 1) < 1e-6, (t_full - t_swa, want)
PY
# a --virtual-stages past the sweep's 8 is predicted when named (Megatron-Bridge ran Qwen3-30B
# on PP 2 with VP 24: one block a chunk)
"$stepscope" plan --model qwen3-30b-a3b --gpus 16 --global-batch 512 --dp 8 --tp 1 --pp 2 \
  --cp 1 --ep 8 --zero 1 --recompute none --schedule interleaved --virtual-stages 24 \
  --microbatches 64 --json "$dir/vp24.json" > /dev/null 2>&1 || no "a named VP 24"
python3 -c 'import json,sys; l=json.load(open(sys.argv[1]))["layouts"]; sys.exit(not (len(l) >= 1 and all(x["layout"]["virtual_stages"] == 24 for x in l)))' \
  "$dir/vp24.json" || no "VP 24 predicted as named"
# the gpt-oss-120b preset carries its window and pattern
"$stepscope" plan --model gpt-oss-120b --gpus 64 --global-batch 64 --top 1 \
  --json "$dir/oss.json" > /dev/null 2>&1 || no "the gpt-oss-120b preset"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["job"]; sys.exit(not (j["sliding_window"] == 128 and j["full_attention_every"] == 2 and j["experts"] == 128 and j["top_k"] == 4 and j["head_dim"] == 64))' \
  "$dir/oss.json" || no "gpt-oss-120b's window, experts and heads in its JSON"
# the trainer chosen by the device (cpu) or a run (--from), not by --framework, refuses them too
"$stepscope" plan --device cpu --model llama3-8b --gpus 8 --global-batch 8 > /dev/null 2> "$dir/err"
[ $? -eq 2 ] && grep -q "a real model needs a --framework" "$dir/err" ||
  { cat "$dir/err"; no "a real model on the cpu device's trainer: refused"; }
"$stepscope" plan --model llama3-8b --gpus 8 --global-batch 64 --full-attention-every 2 \
  > /dev/null 2> "$dir/err"
[ $? -eq 2 ] && grep -q "full-attention-every 2 needs --sliding-window" "$dir/err" ||
  { cat "$dir/err"; no "--full-attention-every without a window: refused"; }
"$stepscope" plan --model gpt2-124m --framework stepscope-cpu --gpus 4 --global-batch 8 \
  --sliding-window 64 > /dev/null 2> "$dir/err"
[ $? -eq 2 ] && grep -q "sliding-window" "$dir/err" ||
  { cat "$dir/err"; no "--sliding-window with the trainer: refused"; }

# DeepEP's token exchange (--ep-dispatcher deepep): a token once to each rank holding one of its
# experts and across nodes once to each node, forwarded over NVLink there. Qwen3-30B-A3B's 128
# experts, top 8, on 16 H100s (two nodes) with ep 16: a rank holds 8, a node 64; per MoE layer
# and micro-batch four exchanges of the 4096 tokens, each the longer of the NVLink bytes (7 ranks
# x P(rank) x 2 nodes) at 450 GB/s and the network bytes (1 node x P(node)) at a device's 50 GB/s,
# 20 us a collective, plus the counts' 20 us; with NCCL's all-to-all half of the 8 copies cross
# the network
q3="--model qwen3-30b-a3b --gpus 16 --global-batch 16 --dp 16 --ep 16 --tp 1 --pp 1 --cp 1 \
  --zero 1 --recompute none --microbatches 1"
"$stepscope" plan $q3 --ep-dispatcher deepep --json "$dir/deepep.json" > "$dir/deepep.txt" 2>&1 ||
  { cat "$dir/deepep.txt"; no "a DeepEP plan"; }
"$stepscope" plan $q3 --json "$dir/a2a.json" > /dev/null 2>&1 || no "the same plan, all-to-all"
"$stepscope" plan --model qwen3-30b-a3b --gpus 8 --global-batch 8 --dp 8 --ep 8 --tp 1 --pp 1 \
  --cp 1 --zero 1 --recompute none --microbatches 1 --ep-dispatcher deepep \
  --json "$dir/deepep8.json" > /dev/null 2>&1 || no "DeepEP in one node"
# Megatron's allgather dispatcher (--ep-dispatcher allgather): every rank of the 16 gathers the
# others' 4096 tokens with their routing map (a byte an expert) and probabilities (bf16), and
# reduce-scatters the outputs; backward the tokens' and probabilities' gradients reduce-scattered,
# the outputs' gathered. A ring over two nodes: a node's 8 devices' NICs, 8 x 50 GB/s; NCCL's
# latency for 16 ranks on 2 nodes, 8.4 + 14 x 3.4 + 14 us
"$stepscope" plan $q3 --ep-dispatcher allgather --json "$dir/allgather.json" \
  > "$dir/allgather.txt" 2>&1 || { cat "$dir/allgather.txt"; no "an allgather plan"; }
grep -q "experts: tokens exchanged as Megatron's allgather dispatcher does" "$dir/allgather.txt" ||
  no "the allgather dispatcher named"
grep -q "DeepEP" "$dir/allgather.txt" && no "the allgather plan names DeepEP"
grep -q "experts: tokens exchanged as DeepEP does" "$dir/deepep.txt" || no "DeepEP named"
python3 - "$dir/allgather.json" <<'PY' || no "the allgather dispatcher's bytes by hand"
import json, sys
ag = json.load(open(sys.argv[1]))
assert ag["job"]["ep_dispatcher"] == "allgather"
lat = 8.4e-6 + 14 * 3.4e-6 + 14e-6
rows = 4096 * 15 / 400e9
hidden, probs, routing = (lat + rows * w for w in (2048 * 2, 128 * 2, 128))
want = 48 * ((2 * hidden + probs + routing) + (2 * hidden + probs))
got = ag["layouts"][0]["breakdown_s"]["ep"]
assert abs(got / want - 1) < 1e-8, (got, want)  # JSON's 9 significant digits
PY
python3 - "$dir/deepep.json" "$dir/a2a.json" "$dir/deepep8.json" <<'PY' || no "DeepEP's bytes by hand"
import json, sys
deepep, a2a = (json.load(open(p)) for p in sys.argv[1:3])
assert deepep["job"]["ep_dispatcher"] == "deepep" and a2a["job"]["ep_dispatcher"] == "alltoall"
def miss(held):
    m = 1.0
    for i in range(8):
        m *= (128 - held - i) / (128 - i)
    return m
row = 4096 * 2048 * 2  # a micro-batch's tokens, bf16
inside = row * 7 * (1 - miss(8)) * 2 / 450e9
across = row * 1 * (1 - miss(64)) / 50e9
want = 48 * (4 * (20e-6 + max(inside, across)) + 20e-6)
got = deepep["layouts"][0]["breakdown_s"]["ep"]
assert abs(got / want - 1) < 1e-9, (got, want)
a2a_want = 48 * (4 * (20e-6 + max(row * 8 * 7 / 16 / 450e9, row * 8 * 8 / 16 / 50e9)) + 20e-6)
got = a2a["layouts"][0]["breakdown_s"]["ep"]
assert abs(got / a2a_want - 1) < 1e-9, (got, a2a_want)
# in one node (ep 8, a rank holds 16): NVLink only, 7 ranks x P(rank)
node = json.load(open(sys.argv[3]))["layouts"][0]["breakdown_s"]["ep"]
want = 48 * (4 * (20e-6 + row * 7 * (1 - miss(16)) / 450e9) + 20e-6)
assert abs(node / want - 1) < 1e-9, (node, want)
PY
"$stepscope" plan --model llama3-8b --gpus 8 --global-batch 64 --ep-dispatcher deepep \
  > /dev/null 2> "$dir/err"
[ $? -eq 2 ] && grep -q "ep-dispatcher takes alltoall, allgather or deepep" "$dir/err" ||
  { cat "$dir/err"; no "--ep-dispatcher without experts: refused"; }

# Megatron-Core's --recompute-modules: what a selective layout recomputes. A small mixture of
# experts (4 layers, 64 experts of 1024 x 4096, top 2, EP 8 on one node) named as selective with
# layernorm and moe: the header and the JSON name the modules; recomputing the mixture dispatches
# and combines its tokens again (six exchanges a layer and micro-batch, and two counts'
# latencies, 20 us each, where none has four and one: ep_s = 1.5 x none's + 0.5 x M x layers x
# 20 us), repeats the experts' forward (a longer compute) and stores less
moe="--layers 4 --hidden 1024 --heads 8 --vocab 32000 --seq 2048 --max-seq 2048 --experts 64 \
  --top-k 2 --gpus 8 --global-batch 16 --framework megatron --dp 8 --tp 1 --pp 1 --cp 1 --ep 8 \
  --zero 1 --microbatches 2"
"$stepscope" plan $moe --recompute none --json "$dir/rc_none.json" > /dev/null 2>&1 ||
  no "a MoE layout without recomputation"
"$stepscope" plan $moe --recompute selective --recompute-modules layernorm,moe \
  --json "$dir/rc_moe.json" > "$dir/rc_moe.txt" 2>&1 || { cat "$dir/rc_moe.txt"; no "--recompute-modules layernorm,moe"; }
grep -q "recompute: selective recomputes layernorm, moe (Megatron-Core's --recompute-modules)" \
  "$dir/rc_moe.txt" || { cat "$dir/rc_moe.txt"; no "the modules in the header"; }
python3 - "$dir/rc_none.json" "$dir/rc_moe.json" <<'PY' || no "recomputing the mixture of experts"
import json, sys
none, moe = (json.load(open(p)) for p in sys.argv[1:3])
assert moe["job"]["recompute_modules"] == ["layernorm", "moe"], moe["job"]
assert "recompute_modules" not in none["job"]
a, b = none["layouts"][0], moe["layouts"][0]
assert b["layout"]["recompute"] == "selective"
ea, eb = a["breakdown_s"]["ep"], b["breakdown_s"]["ep"]
assert abs(eb - (1.5 * ea + 0.5 * 2 * 4 * 20e-6)) < 1e-7 * eb, (ea, eb)
assert b["breakdown_s"]["compute"] > a["breakdown_s"]["compute"]
assert b["memory_bytes"]["activations"] < a["memory_bytes"]["activations"]
PY
# full recomputation runs the whole layer forward again, the mixture's exchange with it (as
# Megatron-Core's checkpointed layers and torch's checkpoint_wrapper around a block do): the
# same exchanges as recomputing the moe module
"$stepscope" plan $moe --recompute full --json "$dir/rc_full.json" > /dev/null 2>&1 ||
  no "a MoE layout with full recomputation"
python3 - "$dir/rc_moe.json" "$dir/rc_full.json" <<'PY' || no "full recomputation exchanges the tokens again"
import json, sys
moe, full = (json.load(open(p))["layouts"][0] for p in sys.argv[1:3])
assert full["layout"]["recompute"] == "full"
assert abs(full["breakdown_s"]["ep"] - moe["breakdown_s"]["ep"]) < 1e-12, (full, moe)
PY
# --dropout 0 (a model trained without dropout): no masks stored, 2 sbh a layer fewer (the
# attention projection's and the MLP's, 1 byte an element; 4 layers x 2048 x 1024 here, one
# micro-batch in flight, TP 1) and without a flash kernel 3 a s^2 b fewer of the scores (the
# softmax output stays, the mask and the dropout's output go); the JSON says which; Llama 3's
# preset has none; the trainer refuses the option, a probability above 1 is refused
dense="--layers 4 --hidden 1024 --heads 8 --vocab 32000 --seq 2048 --max-seq 2048 --gpus 8 \
  --global-batch 8 --framework megatron --dp 8 --tp 1 --pp 1 --cp 1 --zero 1 --microbatches 1 \
  --recompute none"
for att in flash unfused; do
  "$stepscope" plan $dense --attention $att --json "$dir/drop1_$att.json" > "$dir/drop1.txt" 2>&1 &&
    "$stepscope" plan $dense --attention $att --dropout 0 --json "$dir/drop0_$att.json" \
      > "$dir/drop0.txt" 2>&1 || no "--dropout 0 with $att attention"
done
# the header says the masks are assumed, and not without them
grep -q "model: dropout masks stored (2 sbh a layer: Megatron's default dropout 0.1); --dropout 0" \
  "$dir/drop1.txt" && ! grep -q "dropout masks" "$dir/drop0.txt" ||
  { cat "$dir/drop1.txt"; no "the dropout line in the header"; }
"$stepscope" plan --model llama3-8b --gpus 8 --global-batch 64 --top 1 --json "$dir/drop_llama.json" \
  > /dev/null 2>&1 || no "llama3-8b's plan"
python3 - "$dir" <<'PY' || no "--dropout 0: no masks stored"
import json, sys
d = sys.argv[1]
j = {k: json.load(open(f"{d}/{k}.json")) for k in
     ("drop1_flash", "drop0_flash", "drop1_unfused", "drop0_unfused", "drop_llama")}
act = lambda k: j[k]["layouts"][0]["memory_bytes"]["activations"]
assert j["drop1_flash"]["job"]["dropout_masks"] is True
assert j["drop0_flash"]["job"]["dropout_masks"] is False
assert j["drop_llama"]["job"]["dropout_masks"] is False
s, h, a, layers = 2048, 1024, 8, 4
assert act("drop1_flash") - act("drop0_flash") == layers * 2 * s * h, (act("drop1_flash"), act("drop0_flash"))
assert act("drop1_unfused") - act("drop0_unfused") == layers * (2 * s * h + 3 * a * s * s)
# the element-wise traffic follows the stored bytes: a little less time without the masks
t = lambda k: j[k]["layouts"][0]["breakdown_s"]["compute"]
assert t("drop0_flash") < t("drop1_flash")
PY
"$stepscope" plan $dense --dropout 1.5 > /dev/null 2> "$dir/err"
[ $? -eq 2 ] && grep -q "dropout takes a probability from 0 to 1" "$dir/err" ||
  { cat "$dir/err"; no "--dropout 1.5 refused"; }
"$stepscope" plan --model tiny --device cpu --gpus 2 --global-batch 8 --dropout 0 > /dev/null 2> "$dir/err"
[ $? -eq 2 ] && grep -q "the stepscope trainer has no dropout" "$dir/err" ||
  { cat "$dir/err"; no "--dropout with the trainer refused"; }
# the sweep: a Megatron-Core mixture of experts with the recomputation free is offered the
# module sets Megatron-MoE-ModelZoo's recipes run beside none, selective (the attention core)
# and full, in the table, JSON and CSV; not when --recompute is named, nor with the job's own
# modules, nor under FSDP
free="--layers 4 --hidden 1024 --heads 8 --vocab 32000 --seq 2048 --max-seq 2048 --experts 64 \
  --top-k 2 --gpus 8 --global-batch 16 --dp 8 --tp 1 --pp 1 --cp 1 --ep 8 --microbatches 2"
"$stepscope" plan $free --framework megatron --zero 1 --json "$dir/rc_free.json" --csv "$dir/rc_free.csv" \
  > "$dir/rc_free.txt" 2>&1 || { cat "$dir/rc_free.txt"; no "a MoE sweep with the recomputation free"; }
grep -q "rc=selective(layernorm+moe_act)" "$dir/rc_free.txt" &&
  grep -q "rc=selective(layernorm+moe)" "$dir/rc_free.txt" &&
  grep -q "^selective,.*,layernorm+moe$" <(cut -d, -f8- "$dir/rc_free.csv") ||
  { cat "$dir/rc_free.txt"; no "the module sets in the sweep's table and CSV"; }
python3 - "$dir/rc_free.json" <<'PY' || no "the module sets in the sweep's JSON"
import json, sys
d = json.load(open(sys.argv[1]))
got = sorted((x["layout"]["recompute"], tuple(x["layout"].get("recompute_modules", ())))
             for x in d["layouts"])
assert got == [("full", ()), ("none", ()), ("selective", ()), ("selective", ("layernorm", "moe")),
               ("selective", ("layernorm", "moe_act"))], got
words = d["ranking"]["choices"]["recompute"]
assert "selective(layernorm+moe_act)" in words["open"] + words["ruled_out"], words
PY
for other in "--framework megatron --zero 1 --recompute selective" \
  "--framework megatron --zero 1 --recompute-modules moe_act" "--framework fsdp --zero 3"; do
  "$stepscope" plan $free $other --csv - 2>/dev/null | cut -d, -f8,35 | sort -u > "$dir/rc_other.csv"
  # the header and none, selective, full; or the header and selective alone
  want=$(case "$other" in *"--recompute selective") echo 2 ;; *) echo 4 ;; esac)
  [ "$(wc -l < "$dir/rc_other.csv")" -eq "$want" ] && ! grep -q "layernorm" "$dir/rc_other.csv" ||
    { cat "$dir/rc_other.csv"; no "no module sets offered with $other"; }
done
for bad in "--framework fsdp --zero 3 --recompute-modules moe" "--recompute-modules moe,foo" \
  "--recompute-modules moe,moe" "--recompute none --recompute-modules moe"; do
  "$stepscope" plan --layers 4 --hidden 1024 --heads 8 --vocab 32000 --seq 2048 --max-seq 2048 \
    --experts 64 --gpus 8 --global-batch 16 $bad > "$dir/err" 2>&1
  [ $? -eq 2 ] && grep -q "recompute-modules" "$dir/err" || { cat "$dir/err"; no "refused: $bad"; }
done
"$stepscope" plan --model llama3-8b --gpus 8 --global-batch 8 --recompute-modules moe_act \
  > "$dir/err" 2>&1
[ $? -eq 2 ] && grep -q "recompute a mixture of experts" "$dir/err" ||
  { cat "$dir/err"; no "experts' modules without experts: refused"; }

[ $fail -eq 0 ] && echo "plan.frameworks_cli: ok"
exit $fail
