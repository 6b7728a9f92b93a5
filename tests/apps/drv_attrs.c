/* drv_attrs: function, kernel and context state that a replay must apply
 * again before the launches that depend on it.
 *  - 96 KiB of dynamic shared memory: refused without the attribute, then
 *    cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) on a module function;
 *    64 KiB set with cuKernelSetAttribute on a library CUkernel and launched
 *    through cuKernelGetFunction; 96 KiB on a function the recorder did not
 *    see created (cuModuleEnumerateFunctions), set before its first launch;
 *  - clusters through cuLaunchKernelEx: 2 blocks, then 16 blocks with
 *    NON_PORTABLE_CLUSTER_SIZE_ALLOWED, with launch attributes naming events
 *    (launch completion, programmatic event), a device range (access policy
 *    window), a scheduling policy, a priority and a memory sync domain;
 *  - cache configuration, carveout, scheduling policy and required cluster
 *    dims of a function and the context's cache/shared-memory configuration
 *    (attr_probe), context limits (limit_probe; heap_probe mallocs 32 MiB on
 *    the device, which needs CU_LIMIT_MALLOC_HEAP_SIZE).
 * Prints checksums that must match natively, recorded and replayed. */
#include "drv_common.h"

enum { BLK = 64 };

static void launch_big(CUfunction f, int per, unsigned grid, CUdeviceptr out, CUresult *res) {
  void *args[] = {&out, &per};
  *res = cuLaunchKernel(f, grid, 1, 1, BLK, 1, 1, (unsigned)(per * BLK * sizeof(float)), NULL, args, NULL);
}

static void print_big(const char *label, CUdeviceptr out, unsigned grid) {
  float h[4 * BLK];
  CK(cuCtxSynchronize());
  CK(cuMemcpyDtoH(h, out, grid * BLK * sizeof(float)));
  drv_print(label, h, grid * BLK);
}

static void print_ints(const char *label, CUdeviceptr d, int n) {
  int h[64];
  CK(cuMemcpyDtoH(h, d, (size_t)n * sizeof(int)));
  printf("%s:", label);
  for (int i = 0; i < n; i++) printf(" %d", h[i]);
  printf("\n");
}

/* Calls a GPU may refuse although the mock accepts them (newer or deprecated
 * features): their results are printed, so native and replayed runs on one
 * machine still compare, and the program goes on. */
static char refused[512];
static CUresult soft(const char *what, CUresult r) {
  if (r != CUDA_SUCCESS) {
    const char *n = NULL;
    cuGetErrorName(r, &n);
    size_t l = strlen(refused);
    snprintf(refused + l, sizeof refused - l, " %s=%s", what, n ? n : "?");
  }
  return r;
}

static CUlaunchAttribute attr(CUlaunchAttributeID id) {
  CUlaunchAttribute a;
  memset(&a, 0, sizeof a);
  a.id = id;
  return a;
}

int main(void) {
  CUcontext ctx = drv_setup();
  CUdevice dev;
  CK(cuCtxGetDevice(&dev));
  /* context state first: the heap size must be set before any kernel that
   * uses malloc is launched */
  CK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 4096));
  CK(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 4 << 20));
  CK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 64 << 20));
  CK(cuCtxSetLimit(CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT, 4096));
  CK(cuCtxSetCacheConfig(CU_FUNC_CACHE_PREFER_L1));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  soft("cuCtxSetSharedMemConfig", cuCtxSetSharedMemConfig(CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE));
#pragma GCC diagnostic pop
  size_t lim[4];
  CK(cuCtxGetLimit(&lim[0], CU_LIMIT_STACK_SIZE));
  CK(cuCtxGetLimit(&lim[1], CU_LIMIT_PRINTF_FIFO_SIZE));
  CK(cuCtxGetLimit(&lim[2], CU_LIMIT_MALLOC_HEAP_SIZE));
  CK(cuCtxGetLimit(&lim[3], CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT));
  printf("limits: stack>=4096 %d fifo %zu heap %zu pending %zu\n", lim[0] >= 4096, lim[1], lim[2], lim[3]);

  CUmodule mod;
  CK(cuModuleLoadData(&mod, drv_obj_fatbin));
  CUfunction big, cl, heap, probe, lprobe;
  CK(cuModuleGetFunction(&big, mod, "smem_big"));
  CK(cuModuleGetFunction(&cl, mod, "cluster_info"));
  CK(cuModuleGetFunction(&heap, mod, "heap_probe"));
  CK(cuModuleGetFunction(&probe, mod, "attr_probe"));
  CK(cuModuleGetFunction(&lprobe, mod, "limit_probe"));
  CUdeviceptr out, ints, flag;
  CK(cuMemAlloc(&out, 4 * BLK * sizeof(float)));
  CK(cuMemAlloc(&ints, 64 * sizeof(int)));
  CK(cuMemAlloc(&flag, 4 * sizeof(int)));

  /* 1. dynamic shared memory above 48 KiB */
  CUresult r;
  launch_big(big, 384, 4, out, &r); /* 96 KiB, no attribute yet */
  const char *rn = NULL;
  cuGetErrorName(r, &rn);
  printf("96 KiB without the attribute: %s\n", rn ? rn : "?");
  CK(cuFuncSetAttribute(big, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 96 * 1024));
  launch_big(big, 384, 4, out, &r);
  CK(r);
  print_big("smem 96 KiB (cuFuncSetAttribute)", out, 4);

  CUlibrary lib;
  CUkernel kbig;
  CUfunction fbig;
  CK(cuLibraryLoadData(&lib, drv_obj_fatbin, NULL, NULL, 0, NULL, NULL, 0));
  CK(cuLibraryGetKernel(&kbig, lib, "smem_big"));
  CK(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 64 * 1024, kbig, dev));
  CK(cuKernelSetCacheConfig(kbig, CU_FUNC_CACHE_PREFER_SHARED, dev));
  CK(cuKernelGetFunction(&fbig, kbig));
  launch_big(fbig, 256, 3, out, &r);
  CK(r);
  print_big("smem 64 KiB (cuKernelSetAttribute)", out, 3);

  /* a handle from an enumerate call (not a creating call the recorder hooks) */
  CUmodule mod2;
  CK(cuModuleLoadData(&mod2, drv_obj_fatbin));
  unsigned nf = 0;
  CK(cuModuleGetFunctionCount(&nf, mod2));
  CUfunction fs[64], ebig = NULL;
  if (nf > 64) nf = 64;
  CK(cuModuleEnumerateFunctions(fs, nf, mod2));
  for (unsigned i = 0; i < nf; i++) {
    const char *nm = NULL;
    if (cuFuncGetName(&nm, fs[i]) == CUDA_SUCCESS && nm && !strcmp(nm, "smem_big")) ebig = fs[i];
  }
  if (!ebig) { fprintf(stderr, "smem_big not enumerated\n"); return 1; }
  CK(cuFuncSetAttribute(ebig, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 96 * 1024));
  launch_big(ebig, 384, 2, out, &r);
  CK(r);
  print_big("smem 96 KiB (enumerated function)", out, 2);

  /* 2. clusters and launch attributes */
  CUstream s;
  CUevent done, prog;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
  CK(cuEventCreate(&prog, CU_EVENT_DISABLE_TIMING));
  CK(cuMemsetD32(ints, 0, 64));
  void *cargs[] = {&ints};
  CUlaunchAttribute at[8];
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = 8, cfg.gridDimY = 1, cfg.gridDimZ = 1;
  cfg.blockDimX = 32, cfg.blockDimY = 1, cfg.blockDimZ = 1;
  cfg.hStream = s;
  cfg.attrs = at;
  at[0] = attr(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  at[0].value.clusterDim.x = 2, at[0].value.clusterDim.y = 1, at[0].value.clusterDim.z = 1;
  at[1] = attr(CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT);
  at[1].value.launchCompletionEvent.event = done;
  at[2] = attr(CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW);
  at[2].value.accessPolicyWindow.base_ptr = (void *)(uintptr_t)ints;
  at[2].value.accessPolicyWindow.num_bytes = 64 * sizeof(int);
  at[2].value.accessPolicyWindow.hitRatio = 0.5f;
  at[2].value.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
  at[2].value.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
  at[3] = attr(CU_LAUNCH_ATTRIBUTE_PRIORITY);
  at[3].value.priority = 0;
  cfg.numAttrs = 4;
  CK(cuLaunchKernelEx(&cfg, cl, cargs, NULL));
  CK(cuEventSynchronize(done));
  CK(cuStreamSynchronize(s));
  print_ints("clusters of 2", ints, 8);

  CK(cuFuncSetAttribute(cl, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1));
  cfg.gridDimX = 32;
  at[0].value.clusterDim.x = 16;
  at[1] = attr(CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE);
  at[1].value.clusterSchedulingPolicyPreference = CU_CLUSTER_SCHEDULING_POLICY_SPREAD;
  at[2] = attr(CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN);
  at[2].value.memSyncDomain = CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT;
  at[3] = attr(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT);
  at[3].value.programmaticEvent.event = prog;
  at[3].value.programmaticEvent.triggerAtBlockStart = 1;
  cfg.numAttrs = 4;
  if (soft("programmatic event launch", cuLaunchKernelEx(&cfg, cl, cargs, NULL)) == CUDA_SUCCESS) {
    CK(cuStreamWaitEvent(NULL, prog, 0));
  } else { /* without the programmatic event */
    cfg.numAttrs = 3;
    CK(cuLaunchKernelEx(&cfg, cl, cargs, NULL));
  }
  CK(cuStreamSynchronize(s));
  print_ints("clusters of 16 (non-portable)", ints, 32);

  /* 3. attribute probe: the function's and the context's configuration */
  CK(cuFuncSetCacheConfig(probe, CU_FUNC_CACHE_PREFER_SHARED));
  CK(cuFuncSetAttribute(probe, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 50));
  CK(cuFuncSetAttribute(probe, CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
                        CU_CLUSTER_SCHEDULING_POLICY_SPREAD));
  soft("REQUIRED_CLUSTER_WIDTH", cuFuncSetAttribute(probe, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, 2));
  soft("REQUIRED_CLUSTER_HEIGHT", cuFuncSetAttribute(probe, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, 1));
  soft("REQUIRED_CLUSTER_DEPTH", cuFuncSetAttribute(probe, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH, 1));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  soft("cuFuncSetSharedMemConfig", cuFuncSetSharedMemConfig(probe, CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE));
#pragma GCC diagnostic pop
  int cache = CU_FUNC_CACHE_PREFER_SHARED, carve = 50, sched = CU_CLUSTER_SCHEDULING_POLICY_SPREAD, reqw = 2;
  int shcfg = CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE, ccache = CU_FUNC_CACHE_PREFER_L1;
  int cshm = CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE;
  void *pargs[] = {&flag, &cache, &carve, &sched, &reqw, &shcfg, &ccache, &cshm};
  CK(cuMemsetD32(flag, 0, 4));
  cfg.gridDimX = 2;
  at[0].value.clusterDim.x = 2;
  cfg.numAttrs = 1;
  CK(cuLaunchKernelEx(&cfg, probe, pargs, NULL));
  CK(cuStreamSynchronize(s));
  print_ints("attribute probe", flag, 1);

  /* 4. limits */
  unsigned long long need[4] = {4096, 4 << 20, 64 << 20, 4096}, heap_n = 32ull << 20;
  void *largs[] = {&flag, &need[0], &need[1], &need[2], &need[3]};
  CK(cuLaunchKernel(lprobe, 1, 1, 1, 32, 1, 1, 0, NULL, largs, NULL));
  CUdeviceptr flag1 = flag + sizeof(int);
  void *hargs[] = {&flag1, &heap_n};
  CK(cuLaunchKernel(heap, 1, 1, 1, 32, 1, 1, 0, NULL, hargs, NULL));
  CK(cuCtxSynchronize());
  print_ints("limit probe, 32 MiB device malloc", flag, 2);

  printf("refused by this driver:%s\n", refused[0] ? refused : " none");
  CK(cuEventDestroy(done));
  CK(cuEventDestroy(prog));
  CK(cuStreamDestroy(s));
  CK(cuMemFree(out));
  CK(cuMemFree(ints));
  CK(cuMemFree(flag));
  CK(cuLibraryUnload(lib));
  CK(cuModuleUnload(mod2));
  CK(cuModuleUnload(mod));
  CK(cuCtxDestroy(ctx));
  printf("drv_attrs ok\n");
  return 0;
}
