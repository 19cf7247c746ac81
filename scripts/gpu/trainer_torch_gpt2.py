#!/usr/bin/env python3
"""trainer_torch_gpt2.py — the PyTorch equivalent of stepscope-train's GPT-2 on one GPU, for
the tokens/s and MFU comparison of issue 6.

Same model as trainer/model.c: pre-LN GPT-2 (learned positions, tied LM head, GELU tanh,
LayerNorm eps 1e-5), vocabulary padded to a multiple of 128, AdamW (betas 0.9/0.95, weight
decay 0.1 on matrices and embeddings), gradient clipping at 1.0, fp32 master weights with
bf16 autocast. Random tokens (throughput only). MFU uses the trainer's formula:
model FLOPs per step = 6 N tokens + 12 L C T tokens, peak 989 TFLOP/s (H100 SXM bf16 dense)
unless --peak-tflops says otherwise.

  python3 trainer_torch_gpt2.py --model gpt2-350m --batch 8 --steps 20 [--compile] [--json F]
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {"gpt2-124m": (12, 768, 12), "gpt2-350m": (24, 1024, 16),
           "gpt2-774m": (36, 1280, 20), "gpt2-1.5b": (48, 1600, 25)}


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(C, eps=1e-5), nn.LayerNorm(C, eps=1e-5)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fcproj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        self.NH = NH

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, NH, V, T):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.lnf = nn.LayerNorm(C, eps=1e-5)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith(("proj.weight", "fcproj.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        logits = F.linear(self.lnf(x), self.wte.weight)  # tied LM head
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt2-124m", choices=sorted(PRESETS))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup-steps", type=int, default=5, help="steps excluded from timing")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    ap.add_argument("--json")
    a = ap.parse_args()
    L, C, NH = PRESETS[a.model]
    V, Vp, T = 50257, (50257 + 127) // 128 * 128, a.seq
    torch.manual_seed(1337)
    torch.backends.cuda.matmul.allow_tf32 = True
    dev = "cuda"
    model = GPT(L, C, NH, Vp, 1024).to(dev)
    n_params = sum(p.numel() for p in model.parameters()) - (Vp - V) * C  # unpadded, like the trainer
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    step_fn = torch.compile(model) if a.compile else model
    x = torch.randint(0, V, (a.batch, T), device=dev)
    y = torch.randint(0, V, (a.batch, T), device=dev)
    flops_per_step = 6.0 * n_params * a.batch * T + 12.0 * L * C * T * a.batch * T
    times, losses = [], []
    torch.cuda.reset_peak_memory_stats()
    for s in range(a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        losses.append(loss.item())
        if s >= a.warmup_steps:
            times.append(dt)
        print(f"step {s:3d} loss {losses[-1]:.4f} {dt*1e3:8.1f} ms "
              f"{a.batch*T/dt:9.0f} tok/s MFU {flops_per_step/dt/(a.peak_tflops*1e12)*100:.1f}%")
    med = sorted(times)[len(times) // 2]
    res = {"framework": f"pytorch {torch.__version__}", "model": a.model, "params": n_params,
           "batch": a.batch, "seq": T, "compile": a.compile, "median_step_ms": med * 1e3,
           "tokens_per_s": a.batch * T / med, "mfu": flops_per_step / med / (a.peak_tflops * 1e12),
           "peak_memory_bytes": torch.cuda.max_memory_allocated(),
           "device": torch.cuda.get_device_name()}
    print(json.dumps(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
