// rt_threads: 8 host threads, each with its own stream, buffers and kernels.
// GPU machine only.
#include <cstdio>
#include <thread>
#include <vector>
#include <cuda_runtime.h>

__global__ void fill(int *x, int v, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = v; }
__global__ void increment(int *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1; }

static long long sums[8];
static int failed;

static void worker(int t) {
  int n = 10000 * (t + 1);
  cudaStream_t s; int *d; std::vector<int> h(n);
  if (cudaStreamCreate(&s) != cudaSuccess || cudaMalloc(&d, n * sizeof(int)) != cudaSuccess) { failed = 1; return; }
  fill<<<(n + 255) / 256, 256, 0, s>>>(d, t, n);
  for (int k = 0; k < 20; k++) increment<<<(n + 255) / 256, 256, 0, s>>>(d, n);
  if (cudaMemcpyAsync(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost, s) != cudaSuccess ||
      cudaStreamSynchronize(s) != cudaSuccess) { failed = 1; return; }
  long long sum = 0; for (int v : h) sum += v;
  sums[t] = sum;
  cudaFree(d); cudaStreamDestroy(s);
}

int main() {
  std::vector<std::thread> th;
  for (int t = 0; t < 8; t++) th.emplace_back(worker, t);
  for (auto &x : th) x.join();
  if (failed) { fprintf(stderr, "a worker failed\n"); return 1; }
  for (int t = 0; t < 8; t++) printf("thread%d: sum=%lld\n", t, sums[t]);
  printf("rt_threads ok\n");
  return 0;
}
