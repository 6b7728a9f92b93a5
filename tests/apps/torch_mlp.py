#!/usr/bin/env python3
"""torch_mlp: a small deterministic PyTorch MLP training loop (GPU machine).

Usage: torch_mlp.py [--steps N] [--device cuda] [--fresh-batch] [--lr LR]
Prints the final loss and a checksum of the parameters; exits 0 on success.
Recorded by cucap and replayed to compare the parameter checksum.
Each step is an NVTX range "step" (torch.cuda.nvtx; recorded by cucap, a
no-op otherwise). --fresh-batch: every step copies a new input batch to the
GPU and reads its loss back, like a training loop with a data loader (what
tests/gpu/share_check.sh trims); --lr changes the optimizer's learning rate
(a changed kernel argument for `cucap diff`). Without them stdout is as
before.
"""
import argparse
import os
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--fresh-batch", action="store_true")
    ap.add_argument("--lr", type=float, default=0.05)
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
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    gen = torch.Generator().manual_seed(42)
    x = torch.randn(512, 64, generator=gen).to(dev)
    y = torch.randint(0, 10, (512,), generator=gen).to(dev)
    loss = None
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    warm = min(10, args.steps)
    t0 = time.perf_counter()
    marks = []
    nvtx = dev.type == "cuda"
    if nvtx:  # a torch built without NVTX raises: then no ranges
        try:
            torch.cuda.nvtx.range_push("setup")
            torch.cuda.nvtx.range_pop()
        except Exception:
            nvtx = False
    losses = []
    for step in range(args.steps):
        if step == warm:
            sync()
            t0 = time.perf_counter()
        if step >= warm:
            marks.append(time.perf_counter())
        if nvtx:
            torch.cuda.nvtx.range_push("step")
        if args.fresh_batch:
            x = torch.randn(512, 64, generator=gen).to(dev)
            y = torch.randint(0, 10, (512,), generator=gen).to(dev)
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if args.fresh_batch:
            losses.append(loss.item())
        if nvtx:
            torch.cuda.nvtx.range_pop()
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
