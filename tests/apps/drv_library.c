/* drv_library: cuLibraryLoadData + cuLibraryGetKernel; launches a CUkernel
 * cast to CUfunction, and via cuKernelGetFunction + cuLaunchKernelEx. */
#include "drv_common.h"

int main(void) {
  enum { N = 5000 };
  CUcontext ctx = drv_setup();
  CUlibrary lib;
  CUkernel k_add, k_scale;
  CK(cuLibraryLoadData(&lib, drv_fatbin, NULL, NULL, 0, NULL, NULL, 0));
  CK(cuLibraryGetKernel(&k_add, lib, "vec_add"));
  CK(cuLibraryGetKernel(&k_scale, lib, "scale"));
  const char *name = NULL;
  CK(cuKernelGetName(&name, k_add));
  printf("kernel: %s\n", name);
  for (size_t i = 0;; i++) {
    size_t off, size;
    CUresult r = cuKernelGetParamInfo(k_add, i, &off, &size);
    if (r == CUDA_ERROR_INVALID_VALUE) break;
    CK(r);
    printf("vec_add param %zu: offset %zu size %zu\n", i, off, size);
  }
  float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
  if (!a || !b) return 1;
  for (int i = 0; i < N; i++) {
    a[i] = (float)(i % 17);
    b[i] = (float)(i % 3);
  }
  CUdeviceptr da, db, dc;
  CK(cuMemAlloc(&da, N * sizeof(float)));
  CK(cuMemAlloc(&db, N * sizeof(float)));
  CK(cuMemAlloc(&dc, N * sizeof(float)));
  CK(cuMemcpyHtoD(da, a, N * sizeof(float)));
  CK(cuMemcpyHtoD(db, b, N * sizeof(float)));
  int n = N;
  void *args[] = {&da, &db, &dc, &n};
  CK(cuLaunchKernel((CUfunction)k_add, (N + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
  CUfunction f_scale;
  CK(cuKernelGetFunction(&f_scale, k_scale));
  float s = 4.0f;
  void *sargs[] = {&dc, &s, &n};
  CUlaunchConfig cfg = {0};
  cfg.gridDimX = (N + 255) / 256;
  cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = 256;
  cfg.blockDimY = cfg.blockDimZ = 1;
  CK(cuLaunchKernelEx(&cfg, f_scale, sargs, NULL));
  CK(cuMemcpyDtoH(a, dc, N * sizeof(float)));
  drv_print("library", a, N);
  CK(cuMemFree(da));
  CK(cuMemFree(db));
  CK(cuMemFree(dc));
  CK(cuLibraryUnload(lib));
  CK(cuCtxDestroy(ctx));
  free(a);
  free(b);
  printf("drv_library ok\n");
  return 0;
}
