#!/usr/bin/env python3
"""jax_jit: a jitted JAX/XLA MLP training loop (GPU machine). XLA compiles
its kernels (PTX through the driver's JIT or its own cubins) and launches
them with the driver API.

JAX preallocates 75% of GPU memory by default; that is kept (a real program
does not change it), set XLA_PYTHON_CLIENT_PREALLOCATE=false to compare.
XLA's reductions are not bit-reproducible from run to run on every GPU: the
printed values are rounded to 5 significant digits.

Usage: jax_jit.py [--steps N]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from apps_common import StepTimer, need, SKIP  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args()
    jax = need("jax")
    import jax.numpy as jnp
    try:
        if not any(d.platform == "gpu" for d in jax.devices()):
            raise RuntimeError("no GPU device")
    except Exception as e:
        print(f"jax_jit: {e}", file=sys.stderr)
        return SKIP
    key = jax.random.PRNGKey(0)
    k1, k2, k3, k4 = jax.random.split(key, 4)
    params = {"w1": jax.random.normal(k1, (128, 512)) * 0.05, "b1": jnp.zeros(512),
              "w2": jax.random.normal(k2, (512, 10)) * 0.05, "b2": jnp.zeros(10)}
    x = jax.random.normal(k3, (1024, 128))
    y = jax.random.randint(k4, (1024,), 0, 10)

    def loss_fn(p, x, y):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        logits = h @ p["w2"] + p["b2"]
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1))

    @jax.jit
    def step(p, x, y):
        l, g = jax.value_and_grad(loss_fn)(p, x, y)
        return l, jax.tree_util.tree_map(lambda w, d: w - 0.1 * d, p, g)

    timer = StepTimer(warm=min(3, a.steps))
    for i in range(a.steps):
        l, params = step(params, x, y)
        print(f"step {i}: loss {float(l):.5g}")
        timer.tick()
    total = sum(float(jnp.sum(v)) for v in params.values())
    print(f"param checksum: {total:.5g}")
    timer.report("train")
    return 0


if __name__ == "__main__":
    sys.exit(main())
