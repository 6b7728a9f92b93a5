#!/usr/bin/env python3
"""torch_cnn: a torchvision ResNet-18 training loop with cuDNN under bf16
autocast and channels_last (GPU machine).

Batch 32 of 3x128x128 images, 10 classes, SGD with momentum. Parameters and
data are created on the GPU. By default cuDNN runs deterministic algorithms
(cudnn.deterministic), so the printed losses are the same in every run;
--benchmark turns on the autotuner as many training scripts do: it times
candidate algorithms and keeps the fastest, so which algorithm (and which
rounding) a run gets depends on timing, and the losses can differ in the
last digit between two native runs, and between a native and a recorded one.

Usage: torch_cnn.py [--steps N] [--benchmark]
stdout: per-step loss (3 decimals) and a parameter checksum; stderr: timing.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from apps_common import StepTimer, checksum_torch, need, SKIP  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--benchmark", action="store_true")
    a = ap.parse_args()
    torch = need("torch")
    tv = need("torchvision")
    if not torch.cuda.is_available():
        print("torch_cnn: no CUDA device", file=sys.stderr)
        return SKIP
    torch.manual_seed(1234)
    torch.backends.cudnn.benchmark = a.benchmark
    torch.backends.cudnn.deterministic = not a.benchmark
    dev = torch.device("cuda")
    with torch.device(dev):
        model = tv.models.resnet18(num_classes=10)
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    gen = torch.Generator(device=dev).manual_seed(42)
    x = torch.randn(a.batch, 3, a.size, a.size, device=dev, generator=gen)
    x = x.to(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (a.batch,), device=dev, generator=gen)
    timer = StepTimer(warm=min(3, a.steps))
    for step in range(a.steps):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        timer.enqueued()
        print(f"step {step}: loss {loss.item():.3f}")
        timer.tick()
    print(f"param checksum: {checksum_torch(model.parameters()):.2f}")
    timer.report("train")
    return 0


if __name__ == "__main__":
    sys.exit(main())
