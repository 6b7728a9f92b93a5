// examples/saxpy.cu - the example that the README's main command records,
// replays and verifies on a GPU machine. Runtime API (static cudart), two
// streams, events, a memset, several kernels; prints a checksum of results.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x)                                                               \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      fprintf(stderr, "%s failed: %s\n", #x, cudaGetErrorString(e_));          \
      return 1;                                                                \
    }                                                                          \
  } while (0)

__global__ void init(float *x, int n, float base) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = base + (float)(i % 97) * 0.25f;
}

__global__ void saxpy(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void square(float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = y[i] * y[i];
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : (1 << 16);
  int iters = argc > 2 ? atoi(argv[2]) : 8;
  size_t bytes = (size_t)n * sizeof(float);
  float *hx = (float *)malloc(bytes), *hy = (float *)malloc(bytes);
  for (int i = 0; i < n; i++) { hx[i] = (float)(i % 13); hy[i] = 1.0f; }

  float *dx, *dy, *dz;
  CHECK(cudaMalloc(&dx, bytes));
  CHECK(cudaMalloc(&dy, bytes));
  CHECK(cudaMalloc(&dz, bytes));
  cudaStream_t s1, s2;
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t ready;
  CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));

  CHECK(cudaMemcpyAsync(dx, hx, bytes, cudaMemcpyHostToDevice, s1));
  CHECK(cudaMemcpyAsync(dy, hy, bytes, cudaMemcpyHostToDevice, s1));
  CHECK(cudaMemsetAsync(dz, 0, bytes, s2));
  init<<<(n + 255) / 256, 256, 0, s2>>>(dz, n, 0.5f);
  CHECK(cudaEventRecord(ready, s2));
  CHECK(cudaStreamWaitEvent(s1, ready, 0));
  for (int it = 0; it < iters; it++) {
    saxpy<<<(n + 255) / 256, 256, 0, s1>>>(n, 0.5f + it, dx, dy);
    saxpy<<<(n + 255) / 256, 256, 0, s1>>>(n, -0.25f, dz, dy);
  }
  square<<<(n + 255) / 256, 256, 0, s1>>>(dy, n);
  CHECK(cudaMemcpyAsync(hy, dy, bytes, cudaMemcpyDeviceToHost, s1));
  CHECK(cudaStreamSynchronize(s1));
  CHECK(cudaGetLastError());

  double sum = 0;
  for (int i = 0; i < n; i++) sum += hy[i];
  printf("saxpy n=%d iters=%d checksum=%.6e y[0]=%.6f y[n-1]=%.6f\n", n, iters,
         sum, hy[0], hy[n - 1]);

  cudaEventDestroy(ready);
  cudaStreamDestroy(s1);
  cudaStreamDestroy(s2);
  cudaFree(dx); cudaFree(dy); cudaFree(dz);
  free(hx); free(hy);
  return 0;
}
