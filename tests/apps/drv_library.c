/* drv_library: cuLibraryLoadData + cuLibraryGetKernel; launches a CUkernel
 * cast to CUfunction, and via cuKernelGetFunction + cuLaunchKernelEx.
 * Then, as cudart and XLA do, a second library whose kernels are never
 * looked up by name: enumerated (cuLibraryEnumerateKernels) and launched
 * cast, through cuKernelGetFunction, through the library's module
 * (cuLibraryGetModule + cuModuleGetFunction) and in a graph kernel node:
 * handles no load or lookup record defines, which a replay must still
 * find. */
#include <string.h>

#include "drv_common.h"

/* The kernel of lib called `want`, found by enumerating (NULL if none). */
static CUkernel enumerated(CUlibrary lib, const char *want) {
  CUkernel ks[16];
  unsigned n = 0;
  CK(cuLibraryGetKernelCount(&n, lib));
  if (n > 16) n = 16;
  CK(cuLibraryEnumerateKernels(ks, n, lib));
  for (unsigned i = 0; i < n; i++) {
    const char *nm = NULL;
    CK(cuKernelGetName(&nm, ks[i]));
    if (nm && strcmp(nm, want) == 0) return ks[i];
  }
  return NULL;
}

static void enumerated_library(int n, CUdeviceptr da, CUdeviceptr db, CUdeviceptr dc, float *h) {
  CUlibrary lib;
  CK(cuLibraryLoadData(&lib, drv_fatbin, NULL, NULL, 0, NULL, NULL, 0));
  CUkernel e_add = enumerated(lib, "vec_add"), e_scale = enumerated(lib, "scale");
  if (!e_add || !e_scale) { fprintf(stderr, "enumeration found no vec_add/scale\n"); exit(1); }
  void *args[] = {&da, &db, &dc, &n};
  /* cast: what cudart passes to cuLaunchKernel */
  CK(cuLaunchKernel((CUfunction)e_add, (n + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
  float s = 0.5f;
  void *sargs[] = {&dc, &s, &n};
  CUfunction f_scale;
  CK(cuKernelGetFunction(&f_scale, e_scale));
  CK(cuLaunchKernel(f_scale, (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, sargs, NULL));
  CUmodule lm;
  CUfunction m_scale;
  CK(cuLibraryGetModule(&lm, lib));
  CK(cuModuleGetFunction(&m_scale, lm, "scale"));
  CK(cuLaunchKernel(m_scale, (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, sargs, NULL));
  /* a graph kernel node of an enumerated kernel (XLA's command buffers) */
  CUgraph g;
  CUgraphExec ge;
  CUgraphNode kn;
  CK(cuGraphCreate(&g, 0));
  CUDA_KERNEL_NODE_PARAMS kp;
  memset(&kp, 0, sizeof kp);
  kp.func = NULL; /* the CUkernel itself (CUDA_KERNEL_NODE_PARAMS_v2.kern) */
  kp.kern = e_add;
  CK(cuCtxGetCurrent(&kp.ctx));
  kp.gridDimX = (n + 127) / 128, kp.gridDimY = 1, kp.gridDimZ = 1;
  kp.blockDimX = 128, kp.blockDimY = 1, kp.blockDimZ = 1;
  void *gargs[] = {&dc, &db, &dc, &n};
  kp.kernelParams = gargs;
  CK(cuGraphAddKernelNode(&kn, g, NULL, 0, &kp));
  CK(cuGraphInstantiate(&ge, g, 0));
  CK(cuGraphLaunch(ge, NULL));
  CK(cuGraphLaunch(ge, NULL));
  CK(cuCtxSynchronize());
  CK(cuGraphExecDestroy(ge));
  CK(cuGraphDestroy(g));
  CK(cuMemcpyDtoH(h, dc, (size_t)n * sizeof(float)));
  drv_print("enumerated", h, n);
  CK(cuLibraryUnload(lib));
}

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
  /* asked again, as cuDNN and PyTorch do before every launch of a CUkernel:
   * the driver hands back the same function, which the recorder only counts
   * (test_replay_mock) */
  CUfunction f_again = NULL;
  CK(cuKernelGetFunction(&f_again, k_scale));
  CK(cuMemcpyDtoH(a, dc, N * sizeof(float)));
  drv_print("library", a, N);
  CK(cuLibraryUnload(lib));
  enumerated_library(N, da, db, dc, a);
  CK(cuMemFree(da));
  CK(cuMemFree(db));
  CK(cuMemFree(dc));
  CK(cuCtxDestroy(ctx));
  free(a);
  free(b);
  printf("drv_library ok\n");
  return 0;
}
