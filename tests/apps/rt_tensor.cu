// rt_tensor: a tensor-core GEMM for the profiling self-test
// (tests/gpu/profile_check.sh): cublasGemmEx with FP16 inputs and FP32
// accumulation, 4096^3, twice. On sm_90 cuBLAS runs it with wgmma (Hopper's
// warpgroup MMA), which the HMMA pipe counter does not see; the profile must
// still report tensor-pipe use and class the kernel compute (tensor).
// Inputs are small integers, so every product and sum is exact in FP32 and
// the checksum is the same native, recorded and replayed. GPU machine only.
#include <cstdio>
#include <vector>
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "rt_common.h"

int main() {
  const int m = 4096;
  const size_t mm = (size_t)m * m;
  std::vector<__half> ha(mm), hb(mm);
  for (size_t i = 0; i < mm; i++) {
    ha[i] = __float2half((float)(i % 3));
    hb[i] = __float2half((float)(i % 5) - 2.0f);
  }
  __half *a, *b;
  float *c;
  CK(cudaMalloc(&a, mm * sizeof(__half)));
  CK(cudaMalloc(&b, mm * sizeof(__half)));
  CK(cudaMalloc(&c, mm * sizeof(float)));
  CK(cudaMemcpy(a, ha.data(), mm * sizeof(__half), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b, hb.data(), mm * sizeof(__half), cudaMemcpyHostToDevice));
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "cublasCreate failed\n"); return 1; }
  const float one = 1.0f, zero = 0.0f;
  for (int rep = 0; rep < 2; rep++)
    if (cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, a, CUDA_R_16F, m, b, CUDA_R_16F, m,
                     &zero, c, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) !=
        CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "cublasGemmEx failed\n"); return 1; }
  std::vector<float> hc(mm);
  CK(cudaMemcpy(hc.data(), c, mm * sizeof(float), cudaMemcpyDeviceToHost));
  double s = 0;
  for (float v : hc) s += v;
  printf("hgemm %d: sum=%.1f c[0]=%.1f c[last]=%.1f\n", m, s, hc[0], hc[mm - 1]);
  cublasDestroy(h);
  CK(cudaFree(a));
  CK(cudaFree(b));
  CK(cudaFree(c));
  printf("rt_tensor ok\n");
  return 0;
}
