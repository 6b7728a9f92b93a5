/* rt_common.h - shared by the runtime-API test programs (rt_*.cu): CK
 * checks a CUDA runtime call and makes main() return 1 with the call and
 * the error's name on stderr (stdout carries only the checksums that
 * tests/gpu/run.sh compares native / recorded / replayed). */
#ifndef CUCAP_RT_COMMON_H
#define CUCAP_RT_COMMON_H

#include <cstdio>
#include <cuda_runtime.h>

#define CK(call)                                                                \
  do {                                                                          \
    cudaError_t e_ = (call);                                                    \
    if (e_ != cudaSuccess) {                                                    \
      fprintf(stderr, "%s failed: %s (%s)\n", #call, cudaGetErrorName(e_),      \
              cudaGetErrorString(e_));                                          \
      return 1;                                                                 \
    }                                                                           \
  } while (0)

#endif
