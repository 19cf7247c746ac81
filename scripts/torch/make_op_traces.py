#!/usr/bin/env python3
"""make_op_traces.py — small real PyTorch profiler (Kineto) traces for `stepscope ops`
(issue 33): three tiny models run on the CPU under torch.profiler with record_shapes,
with_stack, with_modules and profile_memory, a few training steps each, written gzipped.

  mlp        Linear(256, 512) -> ReLU -> Linear(512, 256), batch 32, MSE loss, SGD
  conv       Conv2d(3, 16, 3, padding=1) -> BatchNorm2d -> ReLU -> Conv2d(16, 32, 3, stride=2,
             padding=1) -> mean -> Linear(32, 10), batch 8 of 3x32x32, cross-entropy, SGD
  attention  an attention block on [4, 64, 64] (4 heads of 16): LayerNorm, QKV Linear,
             scaled_dot_product_attention(is_causal=True), output Linear, residual, SGD
  norms      LayerNorm(32) -> GroupNorm(4, 16) -> RMSNorm(32) -> BatchNorm1d(16) on [8, 16, 32]
             (the input without a gradient: the layer norm's backward asks no dx), SGD; the
             norm backwards (issue 33; torch's CPU RMSNorm backward is decomposed, so it has
             no _fused_rms_norm_backward)

The layer sizes are fixed so that tests/kineto/check_ops.py can check FLOPs exactly.
Run with the torch venv (CPU is enough):

  /work/venv-torch/bin/python scripts/torch/make_op_traces.py tests/data/kineto/ops [NAME...]

Writes OUT/NAME.pt.trace.json.gz for each model named (all when none is).
"""
import gzip
import os
import shutil
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.out(y.transpose(1, 2).reshape(b, s, d))


def models():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256))
    conv = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.Flatten(2))
    conv_head = nn.Linear(32, 10)
    attn = Attention()
    norms = nn.Sequential(nn.LayerNorm(32), nn.GroupNorm(4, 16), nn.RMSNorm(32), nn.BatchNorm1d(16))
    return {
        "mlp": (mlp, lambda: torch.randn(32, 256), lambda m, x: F.mse_loss(m(x), torch.zeros(32, 256))),
        "conv": (nn.ModuleList([conv, conv_head]), lambda: torch.randn(8, 3, 32, 32),
                 lambda m, x: F.cross_entropy(m[1](m[0](x).mean(-1)), torch.zeros(8, dtype=torch.long))),
        "attention": (attn, lambda: torch.randn(4, 64, 64), lambda m, x: m(x).pow(2).mean()),
        "norms": (norms, lambda: torch.randn(8, 16, 32), lambda m, x: m(x).pow(2).mean()),
    }


def trace(name, model, make_input, loss_fn, out_dir):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    tmp = tempfile.mkdtemp()
    schedule = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule,
                                record_shapes=True, with_stack=True, with_modules=True,
                                profile_memory=True,
                                on_trace_ready=torch.profiler.tensorboard_trace_handler(tmp)) as prof:
        for _ in range(4):
            x = make_input()
            opt.zero_grad()
            loss_fn(model, x).backward()
            opt.step()
            prof.step()
    src = [f for f in os.listdir(tmp) if f.endswith(".json") or f.endswith(".json.gz")][0]
    dst = os.path.join(out_dir, "%s.pt.trace.json.gz" % name)
    opener = gzip.open if src.endswith(".gz") else open
    with opener(os.path.join(tmp, src), "rb") as f, gzip.open(dst, "wb", compresslevel=9) as g:
        g.write(f.read())
    shutil.rmtree(tmp)
    print("%s: %d bytes" % (dst, os.path.getsize(dst)))


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out_dir, exist_ok=True)
    torch.set_num_threads(1)
    for name, (model, make_input, loss_fn) in models().items():
        if len(sys.argv) <= 2 or name in sys.argv[2:]:
            trace(name, model, make_input, loss_fn, out_dir)


if __name__ == "__main__":
    main()
