#!/usr/bin/env python3
"""torch_cudagraph: a PyTorch training step captured once into a CUDA graph
(torch.cuda.graph, whole-network capture with static inputs) and replayed
(GPU machine). Exercises stream capture in global mode on a side stream,
the graph memory pool and cuGraphLaunch.

Usage: torch_cudagraph.py [--steps N]
stdout: losses (4 decimals) and a parameter checksum; stderr: timing.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from apps_common import StepTimer, checksum_torch, need, SKIP  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    torch = need("torch")
    if not torch.cuda.is_available():
        print("torch_cudagraph: no CUDA device", file=sys.stderr)
        return SKIP
    torch.manual_seed(1234)
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    with torch.device(dev):
        model = torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator(device=dev).manual_seed(42)
    static_x = torch.randn(256, 128, device=dev, generator=gen)
    static_y = torch.randint(0, 10, (256,), device=dev, generator=gen)
    loss_fn = torch.nn.functional.cross_entropy

    # Warm up on a side stream (as the PyTorch docs do) before capture.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            loss_fn(model(static_x), static_y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)

    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_loss = loss_fn(model(static_x), static_y)
        static_loss.backward()
        opt.step()

    timer = StepTimer(warm=min(3, a.steps))
    for step in range(a.steps):
        # new data each step, copied into the graph's static input
        static_x.copy_(torch.randn(256, 128, device=dev, generator=gen))
        g.replay()
        print(f"step {step}: loss {static_loss.item():.4f}")
        timer.tick()
    print(f"param checksum: {checksum_torch(model.parameters()):.3f}")
    timer.report("train")
    return 0


if __name__ == "__main__":
    sys.exit(main())
