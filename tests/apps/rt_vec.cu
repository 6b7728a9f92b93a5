// rt_static / rt_shared: runtime-API vec_add + checksum (same source, built
// with the static and the shared cudart). GPU machine only.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#include "rt_common.h"

__global__ void vec_add(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

int main() {
  const int n = 1 << 20;
  float *a = (float *)malloc(n * sizeof(float)), *b = (float *)malloc(n * sizeof(float)), *c = (float *)malloc(n * sizeof(float));
  for (int i = 0; i < n; i++) { a[i] = (float)(i % 100); b[i] = (float)(2 * (i % 7)); }
  float *da, *db, *dc;
  CK(cudaMalloc(&da, n * sizeof(float)));
  CK(cudaMalloc(&db, n * sizeof(float)));
  CK(cudaMalloc(&dc, n * sizeof(float)));
  CK(cudaMemcpy(da, a, n * sizeof(float), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db, b, n * sizeof(float), cudaMemcpyHostToDevice));
  vec_add<<<n / 256, 256>>>(da, db, dc, n);
  CK(cudaGetLastError());
  CK(cudaMemcpy(c, dc, n * sizeof(float), cudaMemcpyDeviceToHost));
  double s = 0;
  for (int i = 0; i < n; i++) s += c[i];
  printf("vec_add: sum=%.3f\n", s);
  CK(cudaFree(da)); CK(cudaFree(db)); CK(cudaFree(dc));
  free(a); free(b); free(c);
  printf("rt_vec ok\n");
  return 0;
}
