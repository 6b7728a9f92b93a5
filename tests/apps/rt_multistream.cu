// rt_multistream: 4 streams, async copies from pinned memory, events and a
// cross-stream wait. GPU machine only.
#include <cstdio>
#include <cuda_runtime.h>

#include "rt_common.h"

__global__ void scale(float *x, float s, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= s; }
__global__ void add(const float *x, float *y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] += x[i]; }

int main() {
  const int S = 4, n = 1 << 18;
  cudaStream_t st[S]; cudaEvent_t ev[S], t0, t1;
  float *h[S], *d[S];
  for (int s = 0; s < S; s++) {
    CK(cudaStreamCreateWithFlags(&st[s], cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&ev[s], cudaEventDisableTiming));
    CK(cudaMallocHost(&h[s], n * sizeof(float)));
    CK(cudaMalloc(&d[s], n * sizeof(float)));
    for (int i = 0; i < n; i++) h[s][i] = (float)((i + s) % 16);
  }
  CK(cudaEventCreate(&t0)); CK(cudaEventCreate(&t1));
  CK(cudaEventRecord(t0, st[0]));
  for (int s = 0; s < S; s++) {
    CK(cudaMemcpyAsync(d[s], h[s], n * sizeof(float), cudaMemcpyHostToDevice, st[s]));
    scale<<<n / 256, 256, 0, st[s]>>>(d[s], (float)(s + 1), n);
    CK(cudaEventRecord(ev[s], st[s]));
  }
  for (int s = 1; s < S; s++) {
    CK(cudaStreamWaitEvent(st[s], ev[0], 0));
    add<<<n / 256, 256, 0, st[s]>>>(d[0], d[s], n);
  }
  for (int s = 0; s < S; s++) CK(cudaMemcpyAsync(h[s], d[s], n * sizeof(float), cudaMemcpyDeviceToHost, st[s]));
  for (int s = 1; s < S; s++) { CK(cudaEventRecord(ev[s], st[s])); CK(cudaStreamWaitEvent(st[0], ev[s], 0)); }
  CK(cudaEventRecord(t1, st[0]));
  CK(cudaEventSynchronize(t1));
  float ms; CK(cudaEventElapsedTime(&ms, t0, t1));
  for (int s = 0; s < S; s++) {
    double sum = 0; for (int i = 0; i < n; i++) sum += h[s][i];
    printf("stream%d: sum=%.1f\n", s, sum);
  }
  for (int s = 0; s < S; s++) { CK(cudaFree(d[s])); CK(cudaFreeHost(h[s])); CK(cudaStreamDestroy(st[s])); CK(cudaEventDestroy(ev[s])); }
  printf("rt_multistream ok\n");
  return 0;
}
