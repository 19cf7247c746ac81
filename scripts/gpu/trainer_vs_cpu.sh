#!/bin/bash
# trainer_vs_cpu.sh — the CUDA backend's losses against the CPU backend's on the tiny model
# (issue 6: "on the tiny config the CUDA losses follow the CPU backend's within bf16
# tolerance"). Same seed, data, batch and steps; per-step losses from --log compared by
# scripts/gpu/trainer_compare_losses.py:
#   fp32 GEMMs   |loss_cuda - loss_cpu| <= 1e-3 * loss_cpu at every step
#   bf16 GEMMs   |loss_cuda - loss_cpu| <= 3e-2 * loss_cpu at every step, and the loss falls
# Activation storage (ACT, --activations): bf16 GEMMs run with bf16 activations (the CUDA
# default in bf16 precision) against the CPU backend storing bf16 too (same roundings of
# stored values; the GPU also rounds the GEMM operands), and with fp32 activations against
# the CPU in fp32; fp32 GEMMs always with fp32 activations.
# Order: every 1-rank pair first (they need nothing but the GPU). Layouts: 1 rank; and 4
# ranks on the one GPU (dp2 x pp2 1f1b, tp2 x dp2) when the NCCL in use is >= 2.30 (NCCL_MULTI_RANK_GPU_ENABLE=1); and 1 rank with the fused attention.
# Context parallelism (ring attention, attention_block.cu, the per-edge NCCL ring links):
# cp2 (bf16: the tensor-core tiles with the tiny model's 16-wide heads; fp32: the fp32
# kernels), cp2 x dp2 on 4 ranks, and cp2 with 64-wide heads and 64-token chunks. Last, MoE
# with expert parallelism (dp2 x ep2, 4 experts, top-2) in fp32.
#   OUT=/path scripts/gpu/trainer_vs_cpu.sh
source "$(dirname "$0")/trainer_lib.sh"
provenance_header
use_picked_nccl
export NCCL_MULTI_RANK_GPU_ENABLE=1
# pair() (trainer_lib.sh) runs each CPU/CUDA pair with PAIR_COMMON's options (tiny, 30
# steps, batch 8, seed 1337) and compares them with trainer_compare_losses.py.
[ -x "$trainer" ] || step build build_gpu
PREC=fp32 step one_rank_fp32 pair one_rank 1e-3 --world 1
PREC=bf16 step one_rank_bf16 pair one_rank 3e-2 --world 1
PREC=bf16 ACT=fp32 step one_rank_bf16_fp32_acts pair one_rank 3e-2 --world 1
# the fused attention needs head size 32/64/128 and seq > head size: 2 heads of 64, seq 128
# (the tiny model's 16-wide heads always take the GEMM path)
PREC=bf16 STEPSCOPE_CUDA_ATTENTION=fused step one_rank_fused_bf16 pair fused 3e-2 --world 1 \
  --hidden 128 --heads 2 --seq 128 --batch 4
PREC=bf16 ACT=fp32 STEPSCOPE_CUDA_ATTENTION=fused step one_rank_fused_bf16_fp32_acts pair fused \
  3e-2 --world 1 --hidden 128 --heads 2 --seq 128 --batch 4
# several ranks on the one GPU (NCCL >= 2.30; skipped with SKIP_MULTIRANK=1)
PREC=bf16 step dp2_pp2_1f1b_bf16 pair dp2pp2 3e-2 --world 4 --dp 2 --pp 2 --schedule 1f1b
PREC=bf16 step tp2_dp2_bf16 pair tp2dp2 3e-2 --world 4 --tp 2 --dp 2
PREC=bf16 step tp2_sp_dp2_bf16 pair tp2spdp2 3e-2 --world 4 --tp 2 --sp --dp 2
PREC=fp32 step tp2_dp2_fp32 pair tp2dp2 1e-3 --world 4 --tp 2 --dp 2
# context parallelism: 2 ranks on the one GPU need the same NCCL (>= 2.30) as 4
PREC=bf16 step cp2_bf16 pair cp2 3e-2 --world 2 --cp 2
PREC=fp32 step cp2_fp32 pair cp2 1e-3 --world 2 --cp 2
PREC=bf16 step cp2_dp2_bf16 pair cp2dp2 3e-2 --world 4 --cp 2 --dp 2
PREC=bf16 step cp2_hs64_bf16 pair cp2hs64 3e-2 --world 2 --cp 2 --hidden 128 --heads 2 \
  --seq 256 --batch 4
# mixture of experts with expert parallelism (moe.cu, the NCCL all-to-all) against the CPU's
# MoE on the same layout: last, the lowest priority (window.sh deferred's moe_ep checks EP
# against one CUDA rank)
PREC=fp32 step moe_ep2_fp32 pair moe_ep2 1e-3 --world 2 --dp 2 --ep 2 --experts 4 --top-k 2
provenance_footer
cat "$summary"
