/* drv_reloc: a linked structure in device memory. Buffer P holds pointers
 * into buffer B (uploaded with cuMemcpyHtoD, a permutation), a kernel follows
 * them (gather_ptr: out[i] = *P[i]). When a replay cannot place B at its
 * recorded address (cucap replay --relocate forces it), the pointers inside
 * P's upload must be rewritten, not only the kernel's parameters. A second
 * round rewrites P from the device (DtoD copy of a pointer table), which
 * carries the already-rewritten pointers along. */
#include "drv_common.h"

extern const unsigned char drv_ext_fatbin[];

int main(void) {
  enum { N = 1 << 14, T = 128 };
  CUcontext ctx = drv_setup();
  CUmodule ext;
  CUfunction gather;
  CK(cuModuleLoadData(&ext, drv_ext_fatbin));
  CK(cuModuleGetFunction(&gather, ext, "gather_ptr"));
  CUdeviceptr b, p, p2, out;
  CK(cuMemAlloc(&b, N * sizeof(float)));
  CK(cuMemAlloc(&p, N * sizeof(CUdeviceptr)));
  CK(cuMemAlloc(&p2, N * sizeof(CUdeviceptr)));
  CK(cuMemAlloc(&out, N * sizeof(float)));
  float *vals = malloc(N * sizeof *vals), *res = malloc(N * sizeof *res);
  CUdeviceptr *ptrs = malloc(N * sizeof *ptrs);
  if (!vals || !res || !ptrs) return 1;
  for (int i = 0; i < N; i++) vals[i] = (float)(i % 1000);
  for (int i = 0; i < N; i++) ptrs[i] = b + (CUdeviceptr)(((long long)i * 7919 + 13) % N) * sizeof(float);
  CK(cuMemcpyHtoD(b, vals, N * sizeof *vals));
  CK(cuMemcpyHtoD(p, ptrs, N * sizeof *ptrs));
  int n = N;
  void *args[] = {&p, &out, &n};
  CK(cuLaunchKernel(gather, N / T, 1, 1, T, 1, 1, 0, NULL, args, NULL));
  CK(cuMemcpyDtoH(res, out, N * sizeof *res));
  drv_print("gather through uploaded pointers", res, N);
  /* the pointer table copied on the device, reversed by a second upload */
  CK(cuMemcpyDtoD(p2, p, N * sizeof *ptrs));
  void *args2[] = {&p2, &out, &n};
  CK(cuMemsetD32(out, 0, N));
  CK(cuLaunchKernel(gather, N / T, 1, 1, T, 1, 1, 0, NULL, args2, NULL));
  CK(cuMemcpyDtoH(res, out, N * sizeof *res));
  drv_print("gather through a device copy of them", res, N);
  CK(cuMemFree(b));
  CK(cuMemFree(p));
  CK(cuMemFree(p2));
  CK(cuMemFree(out));
  CK(cuModuleUnload(ext));
  CK(cuCtxDestroy(ctx));
  free(vals);
  free(res);
  free(ptrs);
  printf("drv_reloc ok\n");
  return 0;
}
