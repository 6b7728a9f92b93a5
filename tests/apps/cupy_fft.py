#!/usr/bin/env python3
"""cupy_fft: CuPy with cuFFT (2D FFT, its inverse, a real-to-complex FFT)
and a RawKernel compiled by NVRTC at run time (GPU machine).

Usage: cupy_fft.py [--n N]
stdout: checksums (6 significant digits); stderr: timing.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from apps_common import need, SKIP  # noqa: E402

SAXPY_SRC = r'''
extern "C" __global__ void scaled_mag(const float2* z, float* out, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { float2 v = z[i]; out[i] = s * sqrtf(v.x * v.x + v.y * v.y); }
}
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=512)
    a = ap.parse_args()
    cp = need("cupy")
    try:
        cp.cuda.runtime.getDeviceCount()
    except Exception as e:
        print(f"cupy_fft: no CUDA device: {e}", file=sys.stderr)
        return SKIP
    rs = cp.random.RandomState(seed=7)
    x = rs.standard_normal((a.n, a.n), dtype=cp.float32)
    X = cp.fft.fft2(x.astype(cp.complex64))
    back = cp.fft.ifft2(X).real
    R = cp.fft.rfft(x, axis=1)
    k = cp.RawKernel(SAXPY_SRC, "scaled_mag")
    mag = cp.empty(X.size, dtype=cp.float32)
    n = X.size
    k(((n + 255) // 256,), (256,), (X.ravel(), mag, cp.float32(1.0 / a.n), cp.int32(n)))
    cp.cuda.Device().synchronize()
    print(f"fft2 |X| sum: {float(cp.abs(X).sum()):.6g}")
    print(f"roundtrip max err < 1e-4: {bool(cp.abs(back - x).max() < 1e-4)}")
    print(f"rfft sum: {complex(R.sum()):.6g}")
    print(f"rawkernel sum: {float(mag.sum()):.6g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
