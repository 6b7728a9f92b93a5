#!/usr/bin/env python3
"""torch_mlp: a small deterministic PyTorch MLP training loop (GPU machine).

Usage: torch_mlp.py [--steps N] [--device cuda]
Prints the final loss and a checksum of the parameters; exits 0 on success.
Recorded by cucap and replayed to compare the parameter checksum.
"""
import argparse
import os
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    # cuBLAS needs this for deterministic results (set before CUDA init).
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    try:
        import torch
    except ImportError:
        print("torch_mlp: PyTorch is not installed", file=sys.stderr)
        return 77
    if args.device == "cuda" and not torch.cuda.is_available():
        print("torch_mlp: no CUDA device", file=sys.stderr)
        return 77
    torch.manual_seed(1234)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device(args.device)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(42)
    x = torch.randn(512, 64, generator=gen).to(dev)
    y = torch.randint(0, 10, (512,), generator=gen).to(dev)
    loss = None
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    warm = min(10, args.steps)
    t0 = time.perf_counter()
    marks = []
    for step in range(args.steps):
        if step == warm:
            sync()
            t0 = time.perf_counter()
        if step >= warm:
            marks.append(time.perf_counter())
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    sync()
    timed = args.steps - warm
    t_end = time.perf_counter()
    loop_ms = (t_end - t0) * 1e3
    marks.append(t_end)
    steps_ms = sorted((b - a) * 1e3 for a, b in zip(marks, marks[1:]))
    checksum = sum(float(p.detach().double().sum().cpu()) for p in model.parameters())
    print(f"steps: {args.steps}")
    print(f"loss: {float(loss):.6f}" if loss is not None else "loss: none")
    print(f"param checksum: {checksum:.6f}")
    # Timing goes to stderr so that stdout is identical across runs.
    # The median step is robust to the garbage-collector pauses and scheduling
    # hiccups that move the mean by +-20% between runs on a shared host; the
    # mean is printed too.
    if timed > 0:
        print(f"train_ms_per_step: {steps_ms[len(steps_ms) // 2]:.4f} (median of steps "
              f"{warm}..{args.steps}; mean {loop_ms / timed:.4f})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
