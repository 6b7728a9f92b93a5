#!/usr/bin/env python3
"""torch_transformer: a GPT-2-style transformer training loop (GPU machine).

6 layers, width 512, 8 heads, sequence 256, batch 8, vocabulary 8192, AdamW,
attention through F.scaled_dot_product_attention with the memory-efficient
kernels (forward and backward) by default. Parameters and data are created on
the GPU, so the capture holds kernels, not weights.

Usage: torch_transformer.py [--steps N] [--attn efficient|flash|math] [--amp]
stdout: per-step loss (4 decimals) and a parameter checksum; stderr: timing.
The memory-efficient attention backward accumulates with atomics, so the
last digits can differ from run to run: the program is nondeterministic in
the bits even when its printed output is not.
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from apps_common import StepTimer, checksum_torch, need, SKIP  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--attn", default="efficient", choices=["efficient", "flash", "math"])
    ap.add_argument("--amp", action="store_true", help="bf16 autocast")
    a = ap.parse_args()
    torch = need("torch")
    if not torch.cuda.is_available():
        print("torch_transformer: no CUDA device", file=sys.stderr)
        return SKIP
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = {"efficient": SDPBackend.EFFICIENT_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
               "math": SDPBackend.MATH}[a.attn]
    torch.manual_seed(1234)
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")

    class Block(nn.Module):
        def __init__(self, w, h):
            super().__init__()
            self.h = h
            self.ln1, self.ln2 = nn.LayerNorm(w), nn.LayerNorm(w)
            self.qkv, self.proj = nn.Linear(w, 3 * w), nn.Linear(w, w)
            self.fc1, self.fc2 = nn.Linear(w, 4 * w), nn.Linear(4 * w, w)

        def forward(self, x):
            b, t, w = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(w, dim=2)
            q, k, v = (z.view(b, t, self.h, w // self.h).transpose(1, 2) for z in (q, k, v))
            with sdpa_kernel(backend):
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, w))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(a.vocab, a.width)
            self.pos = nn.Embedding(a.seq, a.width)
            self.blocks = nn.ModuleList(Block(a.width, 8) for _ in range(a.layers))
            self.ln = nn.LayerNorm(a.width)
            self.head = nn.Linear(a.width, a.vocab, bias=False)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))

    with torch.device(dev):  # parameters initialised by kernels, no weight uploads
        model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    gen = torch.Generator(device=dev).manual_seed(42)
    data = torch.randint(0, a.vocab, (a.batch, a.seq + 1), device=dev, generator=gen)
    x, y = data[:, :-1], data[:, 1:]
    timer = StepTimer(warm=min(3, a.steps))
    for step in range(a.steps):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.amp):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, a.vocab), y.reshape(-1))
        loss.backward()
        opt.step()
        timer.enqueued()
        lv = loss.item()  # a real loop logs its loss: one DtoH copy + sync per step
        print(f"step {step}: loss {lv:.4f}")
        timer.tick()
    if not math.isfinite(lv):
        return 1
    print(f"param checksum: {checksum_torch(model.parameters()):.3f}")
    timer.report("train")
    return 0


if __name__ == "__main__":
    sys.exit(main())
