// rt_graph: stream capture into a CUDA graph, instantiate, launch 10 times.
// GPU machine only.
#include <cstdio>
#include <cuda_runtime.h>

#include "rt_common.h"

__global__ void saxpy(float a, const float *x, float *y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i] + y[i]; }
__global__ void increment(int *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1; }

int main() {
  const int n = 1 << 16;
  float *x, *y; int *cnt; float *h;
  CK(cudaMalloc(&x, n * sizeof(float))); CK(cudaMalloc(&y, n * sizeof(float))); CK(cudaMalloc(&cnt, n * sizeof(int)));
  CK(cudaMallocHost(&h, n * sizeof(float)));
  for (int i = 0; i < n; i++) h[i] = (float)(i % 10);
  CK(cudaMemcpy(x, h, n * sizeof(float), cudaMemcpyHostToDevice));
  CK(cudaMemset(y, 0, n * sizeof(float))); CK(cudaMemset(cnt, 0, n * sizeof(int)));
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t g; cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  saxpy<<<n / 256, 256, 0, s>>>(1.0f, x, y, n);
  increment<<<n / 256, 256, 0, s>>>(cnt, n);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  for (int i = 0; i < 10; i++) CK(cudaGraphLaunch(ge, s));
  CK(cudaStreamSynchronize(s));
  CK(cudaMemcpy(h, y, n * sizeof(float), cudaMemcpyDeviceToHost));
  int c0; CK(cudaMemcpy(&c0, cnt, sizeof(int), cudaMemcpyDeviceToHost));
  double sum = 0; for (int i = 0; i < n; i++) sum += h[i];
  printf("graph: sum=%.1f counter=%d\n", sum, c0);
  CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g)); CK(cudaStreamDestroy(s));
  printf("rt_graph ok\n");
  return 0;
}
