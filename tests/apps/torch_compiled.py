#!/usr/bin/env python3
"""torch_compiled: torch.compile (Inductor, Triton kernels) of a small MLP
training step (GPU machine). Triton compiles its kernels at run time and
loads them with cuModuleLoadData / cuLaunchKernel, which cucap records.

Usage: torch_compiled.py [--steps N] [--mode default|max-autotune-no-cudagraphs]
stdout: losses (4 decimals) and a parameter checksum; stderr: timing.
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from apps_common import StepTimer, checksum_torch, need, SKIP  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--mode", default="default")
    a = ap.parse_args()
    # A private cache: every run compiles (and loads) its Triton kernels itself.
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="cucap-triton-"))
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="cucap-inductor-"))
    torch = need("torch")
    if not torch.cuda.is_available():
        print("torch_compiled: no CUDA device", file=sys.stderr)
        return SKIP
    need("triton")
    torch.manual_seed(1234)
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    with torch.device(dev):
        model = torch.nn.Sequential(
            torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.LayerNorm(1024),
            torch.nn.Linear(1024, 1024), torch.nn.SiLU(), torch.nn.Linear(1024, 16))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator(device=dev).manual_seed(42)
    x = torch.randn(512, 256, device=dev, generator=gen)
    y = torch.randint(0, 16, (512,), device=dev, generator=gen)

    def step_fn():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        return loss

    step_c = torch.compile(step_fn, mode=a.mode)
    opt_step = torch.compile(opt.step, mode=a.mode)
    timer = StepTimer(warm=min(3, a.steps))
    for step in range(a.steps):
        loss = step_c()
        opt_step()
        print(f"step {step}: loss {loss.item():.4f}")
        timer.tick()
    print(f"param checksum: {checksum_torch(model.parameters()):.3f}")
    timer.report("train")
    return 0


if __name__ == "__main__":
    sys.exit(main())
