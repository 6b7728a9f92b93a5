// rt_profile: kernels with known bottlenecks for the profiling self-test
// (tests/gpu/profile_check.sh) and the accuracy bench (bench/profile_vs_ncu.sh).
// Built with -lineinfo so PC samples map to these lines. GPU machine only.
//   axpy      y = a*x + y over 64M floats: memory (DRAM) bound
//   fma_loop  4096 dependent-free FMAs per thread in registers: compute bound
//   tiny      one warp, a few instructions: latency bound
//   sgemm     cuBLAS SGEMM 2048^3 (with -DCUCAP_WITH_CUBLAS): compute bound
// Prints checksums only (identical native / recorded / replayed).
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#ifdef CUCAP_WITH_CUBLAS
#include <cublas_v2.h>
#endif

#include "rt_common.h"

// Inlined into fma_loop: its samples carry an inline chain.
__device__ __forceinline__ float mix(float a, float b) { return fmaf(a, b, 0.5f); }

__global__ void axpy(float a, const float *__restrict__ x, float *__restrict__ y, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (; i < n; i += stride) y[i] = a * x[i] + y[i];
}

__global__ void fma_loop(float *out, int iters) {
  float a = threadIdx.x * 1e-3f, b = 1.0001f, c = 0.9999f, d = blockIdx.x * 1e-4f;
  for (int i = 0; i < iters; i++) {
    a = fmaf(a, b, c);
    d = fmaf(d, c, b);
    b = mix(b, 0.9999f);
    c = fmaf(c, 1.0001f, -1e-7f);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a + b + c + d;
}

__global__ void tiny(int *v) {
  if (threadIdx.x == 0) v[0] += 1;
}

int main() {
  const size_t n = (size_t)64 << 20;
  float *x, *y, *o;
  int *t;
  CK(cudaMalloc(&x, n * sizeof(float)));
  CK(cudaMalloc(&y, n * sizeof(float)));
  const int fblocks = 132 * 8, fthreads = 256;
  CK(cudaMalloc(&o, (size_t)fblocks * fthreads * sizeof(float)));
  CK(cudaMalloc(&t, sizeof(int)));
  std::vector<float> h(n);
  for (size_t i = 0; i < n; i++) h[i] = (float)(i % 17);
  CK(cudaMemcpy(x, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CK(cudaMemset(y, 0, n * sizeof(float)));
  CK(cudaMemset(t, 0, sizeof(int)));
  for (int rep = 0; rep < 3; rep++) {
    axpy<<<132 * 16, 512>>>(2.0f, x, y, n);
    fma_loop<<<fblocks, fthreads>>>(o, 4096);
    tiny<<<1, 32>>>(t);
  }
  CK(cudaGetLastError());
#ifdef CUCAP_WITH_CUBLAS
  const int m = 2048;
  float *ga, *gb, *gc;
  CK(cudaMalloc(&ga, (size_t)m * m * sizeof(float)));
  CK(cudaMalloc(&gb, (size_t)m * m * sizeof(float)));
  CK(cudaMalloc(&gc, (size_t)m * m * sizeof(float)));
  std::vector<float> hm((size_t)m * m);
  for (size_t i = 0; i < hm.size(); i++) hm[i] = (float)(i % 3);
  CK(cudaMemcpy(ga, hm.data(), hm.size() * sizeof(float), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(gb, hm.data(), hm.size() * sizeof(float), cudaMemcpyHostToDevice));
  cublasHandle_t hb;
  if (cublasCreate(&hb) != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "cublasCreate failed\n"); return 1; }
  // exact FP32 (no TF32) so the checksum is reproducible
  cublasSetMathMode(hb, CUBLAS_PEDANTIC_MATH);
  const float one = 1.0f, zero = 0.0f;
  for (int rep = 0; rep < 2; rep++)
    if (cublasSgemm(hb, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, ga, m, gb, m, &zero, gc, m) !=
        CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "cublasSgemm failed\n"); return 1; }
  std::vector<float> hc((size_t)m * m);
  CK(cudaMemcpy(hc.data(), gc, hc.size() * sizeof(float), cudaMemcpyDeviceToHost));
  double gs = 0;
  for (float v : hc) gs += v;
  printf("sgemm %d: sum=%.1f\n", m, gs);
  cublasDestroy(hb);
#endif
  std::vector<float> hy(1024);
  CK(cudaMemcpy(hy.data(), y, hy.size() * sizeof(float), cudaMemcpyDeviceToHost));
  double s = 0;
  for (float v : hy) s += v;
  int tv = 0;
  CK(cudaMemcpy(&tv, t, sizeof(int), cudaMemcpyDeviceToHost));
  std::vector<float> ho((size_t)fblocks * fthreads);
  CK(cudaMemcpy(ho.data(), o, ho.size() * sizeof(float), cudaMemcpyDeviceToHost));
  double fs = 0;
  for (float v : ho) fs += v;
  printf("axpy: sum[0:1024]=%.1f tiny=%d fma=%.3f\n", s, tv, fs);
  printf("rt_profile ok\n");
  return 0;
}
