// empty_kernel: N empty-kernel launches (runtime API), N from argv (default
// 100000); prints the time per launch. Used by the recording benchmark.
// A second argument W launches W more empty kernels first, untimed (the
// GPU's clocks and the host's caches settle), and a third B times the N
// launches in B batches (each ended by a synchronisation) and also prints
// every batch's time per launch and their median.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

__global__ void empty_kernel() {}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000;
  long warm = argc > 2 ? atol(argv[2]) : 0;
  long batches = argc > 3 ? atol(argv[3]) : 1;
  if (n <= 0 || warm < 0 || batches <= 0 || batches > n) {
    fprintf(stderr, "usage: %s [launches>0 [warm-up launches [batches]]]\n", argv[0]);
    return 2;
  }
  empty_kernel<<<1, 1>>>(); // warm-up: context creation and module load
  for (long i = 0; i < warm; i++) empty_kernel<<<1, 1>>>();
  if (cudaDeviceSynchronize() != cudaSuccess) { fprintf(stderr, "warm-up failed\n"); return 1; }
  std::vector<double> per(batches);
  auto t0 = std::chrono::steady_clock::now();
  auto tb = t0;
  cudaError_t e = cudaSuccess;
  for (long b = 0; b < batches && e == cudaSuccess; b++) {
    long m = n / batches + (b < n % batches ? 1 : 0);
    for (long i = 0; i < m; i++) empty_kernel<<<1, 1>>>();
    if (batches > 1) e = cudaDeviceSynchronize();
    auto te = std::chrono::steady_clock::now();
    per[b] = std::chrono::duration<double, std::micro>(te - tb).count() / (double)m;
    tb = te;
  }
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  auto t1 = std::chrono::steady_clock::now();
  if (e != cudaSuccess || cudaGetLastError() != cudaSuccess) { fprintf(stderr, "launch failed: %s\n", cudaGetErrorName(e)); return 1; }
  double us = std::chrono::duration<double, std::micro>(t1 - t0).count();
  printf("launches: %ld\n", n);
  printf("us per launch: %.3f\n", us / (double)n);
  if (batches > 1) {
    printf("batches:");
    for (double v : per) printf(" %.3f", v);
    std::sort(per.begin(), per.end());
    printf("\nus per launch, median batch: %.3f\n", per[batches / 2]);
  }
  return 0;
}
