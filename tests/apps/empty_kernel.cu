// empty_kernel: N empty-kernel launches (runtime API), N from argv (default
// 100000); prints the time per launch. Used by the recording benchmark.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void empty_kernel() {}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000;
  if (n <= 0) { fprintf(stderr, "usage: %s [launches>0]\n", argv[0]); return 2; }
  empty_kernel<<<1, 1>>>(); // warm-up: context creation and module load
  if (cudaDeviceSynchronize() != cudaSuccess) { fprintf(stderr, "warm-up failed\n"); return 1; }
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; i++) empty_kernel<<<1, 1>>>();
  cudaError_t e = cudaDeviceSynchronize();
  auto t1 = std::chrono::steady_clock::now();
  if (e != cudaSuccess || cudaGetLastError() != cudaSuccess) { fprintf(stderr, "launch failed: %s\n", cudaGetErrorName(e)); return 1; }
  double us = std::chrono::duration<double, std::micro>(t1 - t0).count();
  printf("launches: %ld\n", n);
  printf("us per launch: %.3f\n", us / (double)n);
  return 0;
}
