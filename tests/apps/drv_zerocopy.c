/* drv_zerocopy: a kernel writes mapped pinned host memory (cuMemHostAlloc
 * with DEVICEMAP, used through cuMemHostGetDevicePointer), a second kernel
 * reads it into device memory, DtoH; checksums. Replay must re-create the
 * pinned buffer at its recorded address for the kernels to find it. */
#include "drv_common.h"

int main(void) {
  enum { N = 1 << 18 }; /* 1 MiB: a buffer of its own pages */
  CUcontext ctx = drv_setup();
  CUmodule mod;
  CUfunction fill, saxpy;
  CK(cuModuleLoadData(&mod, drv_fatbin));
  CK(cuModuleGetFunction(&fill, mod, "fill"));
  CK(cuModuleGetFunction(&saxpy, mod, "saxpy"));

  float *h = NULL;
  CK(cuMemHostAlloc((void **)&h, N * sizeof(float), CU_MEMHOSTALLOC_DEVICEMAP));
  CUdeviceptr hd;
  CK(cuMemHostGetDevicePointer(&hd, h, 0));
  printf("device pointer equals host pointer: %d\n", (uint64_t)hd == (uint64_t)(uintptr_t)h);

  /* fill(float *x, float v, int n) into the mapped host buffer */
  float v = 3.0f;
  int n = N;
  void *fargs[] = {&hd, &v, &n};
  CK(cuLaunchKernel(fill, N / 256, 1, 1, 256, 1, 1, 0, NULL, fargs, NULL));
  CK(cuCtxSynchronize());
  drv_print("mapped after fill", h, N);

  /* y = 2 * x + y with x the mapped buffer, y device memory set to 1.0 */
  CUdeviceptr y;
  CK(cuMemAlloc(&y, N * sizeof(float)));
  CK(cuMemsetD32(y, 0x3f800000u, N)); /* 1.0f */
  float a = 2.0f;
  void *sargs[] = {&a, &hd, &y, &n};
  CK(cuLaunchKernel(saxpy, N / 256, 1, 1, 256, 1, 1, 0, NULL, sargs, NULL));
  CK(cuCtxSynchronize());
  float *out = malloc(N * sizeof *out);
  if (!out) return 1;
  CK(cuMemcpyDtoH(out, y, N * sizeof(float)));
  drv_print("saxpy from mapped", out, N);

  CK(cuMemFree(y));
  CK(cuMemFreeHost(h));
  CK(cuModuleUnload(mod));
  CK(cuCtxDestroy(ctx));
  free(out);
  printf("drv_zerocopy ok\n");
  return 0;
}
