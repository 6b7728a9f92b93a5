// rt_cublas: cublasSgemm on a 64x64 matrix (integer-valued inputs so the
// result is exact). GPU machine only.
#include <cstdio>
#include <vector>
#include <cublas_v2.h>
#include <cuda_runtime.h>

int main() {
  const int n = 64;
  std::vector<float> a(n * n), b(n * n), c(n * n);
  for (int i = 0; i < n * n; i++) { a[i] = (float)(i % 5); b[i] = (float)(i % 3); }
  float *da, *db, *dc;
  cudaMalloc(&da, n * n * sizeof(float)); cudaMalloc(&db, n * n * sizeof(float)); cudaMalloc(&dc, n * n * sizeof(float));
  cudaMemcpy(da, a.data(), n * n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), n * n * sizeof(float), cudaMemcpyHostToDevice);
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "cublasCreate failed\n"); return 1; }
  const float alpha = 1.0f, beta = 0.0f;
  if (cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, da, n, db, n, &beta, dc, n) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "cublasSgemm failed\n"); return 1;
  }
  if (cudaMemcpy(c.data(), dc, n * n * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) { fprintf(stderr, "copy failed\n"); return 1; }
  double s = 0; for (float v : c) s += v;
  printf("sgemm: sum=%.1f c[0]=%.1f c[last]=%.1f\n", s, c[0], c[n * n - 1]);
  cublasDestroy(h); cudaFree(da); cudaFree(db); cudaFree(dc);
  printf("rt_cublas ok\n");
  return 0;
}
