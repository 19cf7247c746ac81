#!/usr/bin/env python3
"""bench_published.py [STEPSCOPE] [--csv runs.csv] [--only ID_PREFIX] [--as FROM=TO]
                   [--attention-rate share|cudnn] —
`stepscope plan` against published, measured BF16 (and a few FP8) training runs (issue 31).

For every row of runs.csv (the model, the devices, the published layout as far as the source
gives it, and the measured throughput or MFU, each row citing its source) this runs
`stepscope plan` once over the free sweep of layouts (every layout of the model on those
devices and that global batch, --csv; the layouts the row's framework runs: llm-foundry's
MPT rows are `composer`'s, FSDP on data parallelism alone) and prints:
  - the published MFU and the MFU predicted for the published layout (the best-ranked layout
    of the sweep that agrees with every field the source gives: tp, pp, dp, cp, tp x pp,
    micro-batch, ZeRO stage, recomputation; fields the source leaves out are free);
  - whether the planner predicts that layout fits (any agreeing layout fits);
  - the rank of that layout in the free sweep (1 = the planner's best), and how much faster the
    planner's best is than it (many layouts tie within a per cent: ZeRO-0/1, SP or not).
and the summary: the share of published runs predicted to fit, the median and worst |MFU
error| in MFU points relative to the published MFU, the share with the published layout in the
top 10 (and among the runs whose sweep has 1,000 layouts or more), the share whose published
layout is predicted within 10 %, 2 % and 1 % of the best, and the share with fewer than 10
layouts predicted more than 1 % faster (ties counted once), the share whose published layout
is in the planner's undecided group (predicted within 10 % of its best: the layouts
`stepscope plan` says it cannot order, docs/plan.md "How far the ranking goes"), the measure
behind that 10 % (how far the planner's errors of two runs of one model, device and sequence
length differ: median, 75th and 90th percentiles), for the runs their source measured twice
(remeasured.csv beside the runs file, from mpt_remeasured.py: llm-foundry's A100 80GB table
before and after its October 2023 re-run) how far the two measurements differ and the
planner's error against each, and per source the
median and worst |MFU error|, the top-10 count and the median number of layouts swept, and the
same per model class (dense, 8 experts, fine-grained experts). `--as FROM=TO` sweeps the rows
whose framework is FROM under TO instead (e.g. `--as composer=fsdp`: llm-foundry's rows over
torch FSDP's layouts, tensor, pipeline and context parallelism included, with the same
conventions otherwise). `--attention-rate share|cudnn` plans the rows where cuDNN's measured
attention rate applies (Megatron-Core on H100/H200 with heads of 128: the planner decides, and
refuses cudnn elsewhere, where the row runs at its default) with `plan --attention-rate share`
(the device's share, grown with the length as FlashAttention's rate) or
`cudnn` (cuDNN's rate alone) instead of the planner's default there, split (cuDNN's rate plus,
per token, the time the share charges beyond it at 2K; docs/plan.md "Compute by shape"). Goals (issue 31): every run fits; median |error| <= 12 %, worst <= 30 %; most in the top 10.

Both MFUs are counted the same way, from tokens per second per device and the real model's
FLOPs per token (6 x the parameters a token multiplies, the LM head included, plus 12 x layers
x hidden x sequence for attention; a SwiGLU MLP has three matrices, GQA's K and V are
kv_heads/heads of Q's, a mixture of experts' block multiplies top_k experts' MLPs), so that a
planner which cannot express the model (e.g. no SwiGLU) is judged on the throughput it
predicts, not on its own FLOP count. Published figures are converted as their kind says:
mfu_pct as given (the sources count 6N + 12LCT too), tflops_per_gpu / the device's dense BF16
peak (Megatron-LM's count until March 2025 is this one), tflops_megatron_causal (Megatron-LM's
count since its commit 8873b55, March 2025: 6N + 6LCT, the causal half of attention) turned
into tokens/s and back into this count, tokens_per_s_per_gpu times this count,
hfu_pct_narayanan (Narayanan et al. 2021 count
4 forward passes with full recomputation, 96 B s l h^2 (1 + s/6h + V/16lh)) scaled to the model
FLOPs 72 B s l h^2 (1 + s/6h + V/12lh).

`precision` fp8 marks a run whose GEMMs ran in fp8 (`--precision fp8`; Megatron-Bridge's H100
rows, TransformerEngine's current scaling); its MFU is still counted against the bf16 peak.
`nics_per_node` and `nic_gbps` describe a cluster that is not a DGX's (`--nics-per-node`,
`--nic-gbps`; BLOOM's Jean Zay nodes: 4 Omni-Path links of 100 Gb/s), `head_dim` a head's
width where heads x it is not the hidden size (`--head-dim`; Qwen3),
`experts`, `top_k`, `moe_every`, `moe_ffn`, `ep` and `expert_tp` describe a mixture of experts
(`--experts`, `--top-k`, `--moe-every`, `--moe-ffn`; ep and expert_tp, Megatron's
--expert-tensor-parallel-size, are matched like the layout's other fields), `untied` an LM head
of its own (`--untied`), `virtual_stages` the interleaved schedule's chunks a rank.

`window` and `full_attention_every` describe sliding-window attention (`--sliding-window`,
`--full-attention-every`; GPT-OSS: 128, every 2nd layer whole); this bench's FLOP count keeps
counting every layer's attention over the whole sequence, so such a row's MFU is in its
convention, and its error, a ratio of tokens/s, is the same in any.

`dispatcher` names how a MoE run's experts exchanged tokens where its source says DeepEP
(Megatron-Core's flex dispatcher, NeMo AutoModel) or HybridEP (Megatron-Bridge's flex backend,
taken to send what DeepEP sends): `--ep-dispatcher deepep`; empty, NCCL's all-to-all.

`dropout` 0 marks a model trained without dropout (`--dropout 0`: no masks stored): MPT
(llm-foundry's MPTConfig defaults, resid/emb/attn pdrop 0), Llama 3, Mixtral, Qwen3 and GPT-OSS
(Megatron-Bridge's bridges and Megatron-MoE-ModelZoo's configs set hidden and attention dropout
0; Hugging Face's configs, AutoModel's); empty, Megatron's default 0.1 (its GPT table, Narayanan
et al. 2021, BLOOM: "The default Megatron-LM dropout settings are inherited").

`recompute_modules` names what a Megatron-Core run's selective recomputation recomputed where
its source says (`--recompute-granularity selective --recompute-modules ...`, space-separated:
`--recompute-modules` with commas; its `recompute` is then selective).

`attention` says which attention kernel the run had where its source says so: unfused for
Narayanan et al. 2021 (Megatron's fused softmax, before FlashAttention, Dao et al. 2022),
flash for llm-foundry (a fused kernel, no s x s matrix: its benchmark script's default
attn_impl triton, MPT's Triton flash attention, for the October 2023 tables; the January 2024
large-scale table: triton for 13B and 30B, FlashAttention-2 for the others). `overlap` 0: the
gradient all-reduce runs after the backward (--no-overlap); `grad_reduce`: the dtype gradients
are reduced in where the source's code says (--grad-reduce-dtype; Narayanan et al.'s
Megatron-LM of 2021: fp16; llm-foundry's two MPT-70B A100 rows ran Composer's PURE mixed
precision: bf16). `backward_prefetch`: FSDP's BackwardPrefetch as the run had it
(--backward-prefetch; llm-foundry's October 2023 and older rows: Composer's default post, the
January 2024 large-scale sweep passes BACKWARD_PRE). Options the planner lacks (an older
stepscope: --framework, --kv-heads, --mlp, --positions, --attention, --grad-reduce-dtype,
--backward-prefetch) are left out, so the same script measures main ("before") and the branch
("after").
"""
import csv
import os
import statistics
import subprocess
import sys

PEAK = {"h100-sxm": 989e12, "a100-80g": 312e12, "h200": 989e12}
HERE = os.path.dirname(os.path.abspath(__file__))
BAND = 0.10  # `stepscope plan`'s default --undecided-within (PLAN_BAND_DEFAULT, docs/plan.md)


def moe_layers(r):
    """The blocks that are a mixture of experts (every moe_every-th, as `plan --moe-every`)."""
    if not r.get("experts"):
        return 0
    return int(r["layers"]) // int(r.get("moe_every") or 1)


def flops_per_token(r, causal_attention=False):
    """6 x the parameters a token multiplies plus 12 x layers x hidden x sequence for attention
    (6 x when only the causal half is counted, as Megatron-LM since March 2025). A mixture of
    experts' block multiplies top_k of its experts' MLPs; its router (experts x hidden) is left
    out, as Megatron-LM's count leaves it (0.01 % of Mixtral's)."""
    L, C, V, T = (int(r[k]) for k in ("layers", "hidden", "vocab", "seq"))
    H = int(r["heads"] or C // 128)
    kv = int(r["kv_heads"] or H)
    F = int(r["ffn"] or 4 * C)
    d = int(r.get("head_dim") or C // H)  # a head's width; heads x d is the attention's
    Fe = int(r.get("moe_ffn") or F)  # an expert's MLP width
    attn_params = 2 * C * H * d + 2 * C * d * kv
    mlp = 3 if r["mlp"] == "swiglu" else 2
    moe = moe_layers(r)
    params = (V * C + L * attn_params + (L - moe) * mlp * C * F
              + moe * int(r.get("top_k") or 2) * mlp * C * Fe)
    return 6.0 * params + (6.0 if causal_attention else 12.0) * L * H * d * T


def published_mfu(r):
    v = float(r["published_value"])
    kind = r["published_kind"]
    if kind == "mfu_pct":
        return v / 100
    if kind == "tflops_per_gpu":
        return v * 1e12 / PEAK[r["device"]]
    if kind == "tflops_megatron_causal":  # tokens/s from Megatron's count, then ours
        return v * 1e12 / flops_per_token(r, True) * flops_per_token(r) / PEAK[r["device"]]
    if kind == "tokens_per_s_per_gpu":  # measured tokens/s: no FLOP convention to undo
        return v * flops_per_token(r) / PEAK[r["device"]]
    if kind == "hfu_pct_narayanan":
        L, h, V, s = (int(r[k]) for k in ("layers", "hidden", "vocab", "seq"))
        model = 72 * (1 + s / (6 * h) + V / (12 * L * h))
        hardware = 96 * (1 + s / (6 * h) + V / (16 * L * h))
        return v / 100 * model / hardware
    raise ValueError("unknown published_kind " + kind)


def model_class(r):
    """dense; a mixture of fewer than 64 experts (Mixtral's 8, GPT-OSS 20B's 32); fine-grained
    experts (64 or more: Qwen3, GPT-OSS 120B), the class the planner's header warns about."""
    experts = int(r.get("experts") or 0)
    return "dense" if experts == 0 else "moe, fine-grained" if experts >= 64 else "moe, < 64 experts"


def source_group(r):
    """The source a run comes from, MPT's split by device (the per-source summary lines)."""
    group = r["id"].split("-")[0]
    return f"{group}-{r['device'].split('-')[0]}" if group == "mpt" else group


LARGE_SWEEP = 1000  # layouts: a sweep whose top 10 is at most 1 % of it


def planner_options(stepscope):
    out = subprocess.run([stepscope, "plan", "--help"], capture_output=True, text=True)
    return out.stdout + out.stderr


def plan_args(r, helptext, framework_as=None):
    heads = r["heads"] or str(int(r["hidden"]) // 128)  # Table 1's image omits heads: d_head 128
    args = ["plan", "--layers", r["layers"], "--hidden", r["hidden"], "--heads", heads,
            "--vocab", r["vocab"], "--seq", r["seq"], "--max-seq", r["seq"],
            "--gpus", r["gpus"], "--global-batch", r["global_batch"], "--device", r["device"],
            "--gpus-per-node", r["gpus_per_node"] or "8"]
    if r["ffn"]:
        args += ["--ffn", r["ffn"]]
    if "--framework" in helptext:
        framework = r["framework"]
        args += ["--framework", (framework_as or {}).get(framework, framework)]
    if "--kv-heads" in helptext and r["kv_heads"]:
        args += ["--kv-heads", r["kv_heads"]]
    if "--mlp" in helptext and r["mlp"]:
        args += ["--mlp", r["mlp"]]
    if "--positions" in helptext and r["positions"]:
        args += ["--positions", r["positions"]]
    if "--attention" in helptext and r.get("attention"):
        args += ["--attention", r["attention"]]
    if r.get("overlap") == "0":
        args += ["--no-overlap"]
    if "--grad-reduce-dtype" in helptext and r.get("grad_reduce"):
        args += ["--grad-reduce-dtype", r["grad_reduce"]]
    if "--backward-prefetch" in helptext and r.get("backward_prefetch"):
        args += ["--backward-prefetch", r["backward_prefetch"]]
    if "--tp-comm-overlap" in helptext and r.get("tp_comm_overlap") == "1":
        args += ["--tp-comm-overlap"]
    if r.get("experts"):
        args += ["--experts", r["experts"], "--top-k", r["top_k"] or "2",
                 "--moe-every", r.get("moe_every") or "1"]
    if r.get("untied") == "1" and "--untied" in helptext:
        args += ["--untied"]
    if r.get("nics_per_node") and "--nics-per-node" in helptext:
        args += ["--nics-per-node", r["nics_per_node"], "--nic-gbps", r["nic_gbps"]]
    if r.get("head_dim"):
        args += ["--head-dim", r["head_dim"]]
    if r.get("moe_ffn"):
        args += ["--moe-ffn", r["moe_ffn"]]
    if r.get("precision") and "--precision" in helptext:
        args += ["--precision", r["precision"]]
    if r.get("dispatcher") in ("deepep", "hybridep") and "--ep-dispatcher" in helptext:
        args += ["--ep-dispatcher", "deepep"]
    if r.get("recompute_modules") and "--recompute-modules" in helptext:
        args += ["--recompute-modules", ",".join(r["recompute_modules"].split())]
    if r.get("dropout") and "--dropout" in helptext:
        args += ["--dropout", r["dropout"]]
    if r.get("window") and "--sliding-window" in helptext:
        args += ["--sliding-window", r["window"]]
        if r.get("full_attention_every"):
            args += ["--full-attention-every", r["full_attention_every"]]
    return args


def agrees(row, r):
    """Whether a layout of the sweep is the published one, as far as the source says."""
    for key in ("tp", "pp", "dp", "cp", "zero", "micro_batch"):
        if r[key] and int(row[key]) != int(r[key]):
            return False
    if r["mp"] and int(row["tp"]) * int(row["pp"]) != int(r["mp"]):
        return False
    if r["recompute"] and row["recompute"] != r["recompute"]:
        return False
    # what a selective recomputation recomputed: the source's modules, or (none named, recompute
    # given) the attention core, the planner's empty field; a planner without the column, none
    mods = "+".join(sorted(r.get("recompute_modules", "").split()))
    if r["recompute"] and "+".join(sorted((row.get("recompute_modules") or "").split("+"))) != mods:
        return False
    if r["sp"] and int(row["sp"]) != int(r["sp"]):
        return False
    if r.get("ep") and int(row.get("ep") or 1) != int(r["ep"]):
        return False
    if r.get("expert_tp") and int(row.get("expert_tp") or row["tp"]) != int(r["expert_tp"]):
        return False
    v = int(row["virtual_stages"]) if row["schedule"] == "interleaved" else 1
    if r["virtual_stages"] and v != int(r["virtual_stages"]):
        return False
    # no published run used FSDP's hybrid sharding (MPT: FULL_SHARD, the Llama 3 paper: FSDP);
    # a planner without the column (older) has none
    if int(row.get("shard_group") or 0) != 0:
        return False
    return True


def main():
    argv = sys.argv[1:]
    stepscope = "build/analyzer/stepscope"
    runs = os.path.join(HERE, "runs.csv")
    only = ""
    framework_as = {}  # --as FROM=TO
    attention_rate = None  # --attention-rate share|cudnn (the planner's default: split)
    while argv:
        a = argv.pop(0)
        if a == "--csv":
            runs = argv.pop(0)
        elif a == "--only":
            only = argv.pop(0)
        elif a == "--as":
            src, _, dst = (argv.pop(0) if argv else "").partition("=")
            if not src or not dst:
                sys.exit("bench_published.py: --as takes FROM=TO, e.g. --as composer=fsdp")
            framework_as[src] = dst
        elif a == "--attention-rate":
            attention_rate = argv.pop(0) if argv else ""
            if attention_rate not in ("share", "cudnn"):
                sys.exit("bench_published.py: --attention-rate takes share or cudnn (the planner's "
                         "default, split, is this bench's)")
        elif a in ("-h", "--help"):
            print(__doc__)
            return
        elif a.startswith("-"):
            print(f"bench_published.py: unknown option {a} (--help lists them)", file=sys.stderr)
            sys.exit(2)
        else:
            stepscope = a
    if not os.access(stepscope, os.X_OK):
        sys.exit(f"bench_published.py: no stepscope executable at {stepscope} (build it, or name it)")
    helptext = planner_options(stepscope)
    rows = [r for r in csv.DictReader(open(runs)) if r["id"].startswith(only)]
    print(f"{len(rows)} published runs ({runs}); planner {stepscope}"
          + "".join(f"; {k} rows swept as {v}" for k, v in framework_as.items())
          + (f"; --attention-rate {attention_rate} where the planner takes it" if attention_rate
             else ""))
    print(f"{'run':<34} {'pub MFU':>7} {'pred':>6} {'err':>7} {'fits':>4} {'rank':>6} {'of':>6} "
          f"{'best+':>6}  published layout as predicted")
    errors, fits, top10, ranked, near = [], 0, 0, 0, 0
    by_source = {}  # source group -> [(|error|, in the top 10, layouts swept)] per run
    per_run = []  # (|error|, in the top 10, layouts swept) per run, in the rows' order
    near1, near2, top10_ties = 0, 0, 0
    undecided = 0  # the published layout in the planner's undecided group (docs/plan.md)
    ratios = {}  # (model, device, seq) -> [predicted / published MFU] per run
    remeasured = read_remeasured(os.path.join(os.path.dirname(os.path.abspath(runs)),
                                              "remeasured.csv"))
    twice = []  # (id, the earlier measurement's MFU, the row's, predicted) per run measured twice
    rate_taken = 0  # rows the planner took --attention-rate for
    for r in rows:
        cmd = [stepscope] + plan_args(r, helptext, framework_as) + ["--csv", "-"]
        extra = ["--attention-rate", attention_rate] if attention_rate else []
        proc = subprocess.run(cmd + extra, capture_output=True, text=True)
        # the planner says where a rate applies (it refuses cudnn outside Megatron-Core on
        # Hopper with heads of 128, exit 2); elsewhere the row runs at its default
        if extra and proc.returncode == 2 and "--attention-rate" in proc.stderr:
            proc = subprocess.run(cmd, capture_output=True, text=True)
        else:
            rate_taken += bool(extra)
        pub = published_mfu(r)
        sweep = list(csv.DictReader(proc.stdout.splitlines())) if proc.returncode == 0 else []
        match = next(((i, row) for i, row in enumerate(sweep) if agrees(row, r)), None)
        if match is None:
            why = (proc.stderr.strip().splitlines() or ["no layout agrees"])[-1][:70]
            print(f"{r['id']:<34} {100 * pub:6.1f}% {'-':>6} {'-':>7} {'NO':>4} {'-':>6} "
                  f"{len(sweep):>6}  ({why})")
            errors.append(1.0)
            by_source.setdefault(source_group(r), []).append((1.0, False, len(sweep)))
            per_run.append((1.0, False, len(sweep)))
            continue
        rank, row = match
        tokens_per_device = float(row["tokens_per_s"]) / int(r["gpus"])
        pred = tokens_per_device * flops_per_token(r) / PEAK[r["device"]]
        err = (pred - pub) / pub
        fit = row["fits"] == "1"
        fits += fit
        errors.append(abs(err))
        ranked += 1
        top10 += rank < 10
        by_source.setdefault(source_group(r), []).append((abs(err), rank < 10, len(sweep)))
        per_run.append((abs(err), rank < 10, len(sweep)))
        best = max((float(x["tokens_per_s"]) for x in sweep if x["fits"] == "1"), default=0.0)
        gap = best / float(row["tokens_per_s"]) - 1 if best > 0 else 0.0
        near += gap <= 0.10
        undecided += float(row["tokens_per_s"]) >= (1 - BAND) * best
        ratios.setdefault((r["model"], r["device"], r["seq"]), []).append(pred / pub)
        if r["id"] in remeasured:
            twice.append((r["id"], published_mfu(remeasured[r["id"]]), pub, pred))
        near1 += gap <= 0.01
        near2 += gap <= 0.02
        # ties: layouts predicted within 1 % of each other are not told apart by the model
        faster = sum(1 for x in sweep if x["fits"] == "1"
                     and float(x["tokens_per_s"]) > 1.01 * float(row["tokens_per_s"]))
        top10_ties += faster < 10
        sched = row["schedule"] + (f" v{row['virtual_stages']}"
                                   if row["schedule"] == "interleaved" else "")
        ep = f" ep{row['ep']}" if r.get("experts") else ""
        if r.get("experts") and int(row.get("expert_tp") or row["tp"]) != int(row["tp"]):
            ep += f" etp{row['expert_tp']}"
        layout = (f"dp{row['dp']}{ep} tp{row['tp']} pp{row['pp']} cp{row['cp']} z{row['zero']} "
                  f"{sched} m{row['microbatches']}x{row['micro_batch']} "
                  f"rc={row['recompute']}")
        print(f"{r['id']:<34} {100 * pub:6.1f}% {100 * pred:5.1f}% {100 * err:+6.1f}% "
              f"{'yes' if fit else 'NO':>4} {rank + 1:>6} {len(sweep):>6} {100 * gap:5.1f}%  "
              f"{layout}")
    n = len(rows)
    if not n:
        return
    print(f"\nsummary over {n} published runs:"
          + (f" (--attention-rate {attention_rate} taken for {rate_taken})" if attention_rate
             else ""))
    print(f"  predicted to fit:            {fits}/{n} = {100 * fits / n:.0f} %  (goal: all)")
    print(f"  median |MFU error|:          {100 * statistics.median(errors):.1f} %  (goal <= 12 %;"
          " a run without an agreeing layout counts 100 %)")
    print(f"  worst |MFU error|:           {100 * max(errors):.1f} %  (goal <= 30 %)")
    print(f"  published layout in top 10:  {top10}/{n} = {100 * top10 / n:.0f} %  (goal: most)")
    # a top 10 of a few dozen layouts (a framework with data parallelism alone) says less than
    # one of thousands: the share among the large sweeps, beside it
    large = [t for _, t, swept in per_run if swept >= LARGE_SWEEP]
    if large:
        print(f"    runs whose sweep has {LARGE_SWEEP} layouts or more: {sum(large)}/{len(large)} = "
              f"{100 * sum(large) / len(large):.0f} %  (a top 10 of at most 1 % of the layouts)")
    print(f"  within 10 % of the best:     {near}/{n} = {100 * near / n:.0f} %  (the published layout's"
          " predicted tokens/s against the best layout's)")
    print(f"  within 2 % / 1 % of the best: {near2}/{n} = {100 * near2 / n:.0f} % / {near1}/{n} = "
          f"{100 * near1 / n:.0f} %")
    print(f"  fewer than 10 layouts > 1 % faster: {top10_ties}/{n} = {100 * top10_ties / n:.0f} %  "
          "(the top 10 with layouts predicted within 1 % of the published one counted as tied)")
    print(f"  in the planner's undecided group: {undecided}/{n} = {100 * undecided / n:.0f} %  (predicted"
          f" within {100 * BAND:.0f} % of its best: the layouts `plan` says it cannot order)")
    # the band's measure: how far the planner's errors of two runs of one job differ
    pairs = sorted(abs(a / b - 1) for v in ratios.values()
                   for i, a in enumerate(v) for b in v[i + 1:])
    if pairs:
        q = lambda p: pairs[int(p * (len(pairs) - 1))]
        print(f"  error between two runs of one model, device and sequence ({len(pairs)} pairs): "
              f"median {100 * q(0.5):.1f} %, 75th percentile {100 * q(0.75):.1f} %, "
              f"90th {100 * q(0.9):.1f} %  (plan's --undecided-within default: {100 * BAND:.0f} %)")
    print_remeasured(twice)
    print("  per model class (median |MFU error|, worst, published layout in the top 10, median "
          "layouts swept):")
    classes = {}
    for r, run in zip(rows, per_run):
        classes.setdefault(model_class(r), []).append(run)
    for name in ("dense", "moe, < 64 experts", "moe, fine-grained"):
        if classes.get(name):
            print(f"    {name:<18} {summary_cells(classes[name])}")
    print("  per source (median |MFU error|, worst, published layout in the top 10, median "
          "layouts swept):")
    for group, runs_of in sorted(by_source.items()):
        print(f"    {group:<12} {summary_cells(runs_of)}")


def read_remeasured(path):
    """{runs.csv id: the row's job as its source measured it another time} (remeasured.csv,
    written by mpt_remeasured.py); none where the file is absent."""
    if not os.path.exists(path):
        return {}
    return {r["id"]: r for r in csv.DictReader(open(path))}


def print_remeasured(twice):
    """How far a source's two measurements of one job differ, and the planner's error against
    each: the share of a row's error that the source's own repeat measurement would move."""
    if not twice:
        return
    spread = sorted((abs(pub / earlier - 1), rid) for rid, earlier, pub, _ in twice)
    vs_earlier = sorted((abs(pred / earlier - 1), rid) for rid, earlier, _, pred in twice)
    vs_row = sorted((abs(pred / pub - 1), rid) for rid, _, pub, pred in twice)
    q = lambda v, p: v[int(p * (len(v) - 1))][0]
    print(f"  measured twice by their source ({len(twice)} runs, remeasured.csv: llm-foundry's A100"
          " 80GB table of July 2023, bf16 PURE, and its October 2023 re-run, amp_bf16 DEFAULT,"
          " the rows'; one layout and batch each):")
    print(f"    the two measurements differ by: median {100 * q(spread, 0.5):.1f} %, 90th "
          f"percentile {100 * q(spread, 0.9):.1f} %, worst {100 * spread[-1][0]:.1f} % "
          f"({spread[-1][1]})")
    for name, errs in (("the rows' (October)", vs_row), ("the July one", vs_earlier)):
        print(f"    |MFU error| against {name + ':':<20} median {100 * q(errs, 0.5):.1f} %, worst "
              f"{100 * errs[-1][0]:.1f} % ({errs[-1][1]})")
    apart = [t for t in twice if abs(t[2] / t[1] - 1) > BAND]
    if apart:
        print(f"    runs whose two measurements differ by more than {100 * BAND:.0f} % (the planner's"
              " band): July, October MFU; predicted; error against each")
        for rid, earlier, pub, pred in apart:
            print(f"      {rid:<32} {100 * earlier:5.1f}% {100 * pub:5.1f}%  {100 * pred:5.1f}%  "
                  f"{100 * (pred / earlier - 1):+6.1f}% {100 * (pred / pub - 1):+6.1f}%")


def summary_cells(runs_of):
    """A group's summary row: runs, median and worst |MFU error|, top-10 count, median sweep."""
    errs = [e for e, _, _ in runs_of]
    swept = statistics.median(n for _, _, n in runs_of)
    return (f"{len(runs_of):>3} runs  {100 * statistics.median(errs):5.1f} %  "
            f"{100 * max(errs):5.1f} %  {sum(t for _, t, _ in runs_of):>3}  {swept:>8.0f}")


if __name__ == "__main__":
    main()
