/* drv_jit: cuLinkCreate + cuLinkAddData(PTX) + cuLinkComplete, then
 * cuModuleLoadData of the linked image and a saxpy launch. */
#include "drv_common.h"

int main(void) {
  enum { N = 10000 };
  CUcontext ctx = drv_setup();
  CUlinkState link;
  char log[4096] = {0};
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[] = {log, (void *)(uintptr_t)sizeof log};
  CK(cuLinkCreate(2, opts, vals, &link));
  CUresult r = cuLinkAddData(link, CU_JIT_INPUT_PTX, (void *)drv_ptx, strlen((const char *)drv_ptx) + 1,
                             "drv_kernels.ptx", 0, NULL, NULL);
  if (r != CUDA_SUCCESS) fprintf(stderr, "link log: %s\n", log);
  CK(r);
  void *cubin;
  size_t cubin_size;
  CK(cuLinkComplete(link, &cubin, &cubin_size));
  CUmodule mod;
  CUfunction saxpy;
  CK(cuModuleLoadData(&mod, cubin));
  CK(cuLinkDestroy(link));
  CK(cuModuleGetFunction(&saxpy, mod, "saxpy"));
  float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
  if (!x || !y) return 1;
  for (int i = 0; i < N; i++) {
    x[i] = (float)(i % 13);
    y[i] = (float)(i % 5);
  }
  CUdeviceptr dx, dy;
  CK(cuMemAlloc(&dx, N * sizeof(float)));
  CK(cuMemAlloc(&dy, N * sizeof(float)));
  CK(cuMemcpyHtoD(dx, x, N * sizeof(float)));
  CK(cuMemcpyHtoD(dy, y, N * sizeof(float)));
  float a = 3.0f;
  int n = N;
  void *args[] = {&a, &dx, &dy, &n};
  CK(cuLaunchKernel(saxpy, (N + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
  CK(cuMemcpyDtoH(y, dy, N * sizeof(float)));
  drv_print("saxpy", y, N);
  CK(cuMemFree(dx));
  CK(cuMemFree(dy));
  CK(cuModuleUnload(mod));
  CK(cuCtxDestroy(ctx));
  free(x);
  free(y);
  printf("drv_jit ok\n");
  return 0;
}
