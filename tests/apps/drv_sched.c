/* drv_sched: a result that depends on how the GPU schedules threads, like
 * simpleAtomicIntrinsics' atomicCAS chain (issue 7: one int of it differed
 * from the recording in all 7 replays, which agreed with each other), next
 * to deterministic results. In the primary context, as a runtime-API
 * program would be. Prints only what is deterministic. `cucap replay
 * --verify` must pass with the chain's bytes reported as nondeterministic
 * (seen to vary in the perturbed passes) and fail on a flipped byte of the
 * deterministic results (tests/integration/test_replay_nondet.sh). */
#include "drv_common.h"

#ifndef NONDET_FATBIN_PATH
#error "NONDET_FATBIN_PATH must name the fatbin built from drv_nondet_kernels.cu"
#endif
__asm__(".section .rodata\n"
        ".balign 16\n"
        "sched_fatbin:\n"
        ".incbin \"" NONDET_FATBIN_PATH "\"\n"
        ".previous\n");
extern const unsigned char sched_fatbin[];

int main(void) {
  enum { N = 1 << 12, BLOCKS = 64, THREADS = 256 };
  CUdevice dev;
  CUcontext ctx;
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CUmodule mod, smod;
  CUfunction fill, probe;
  CK(cuModuleLoadData(&mod, drv_fatbin));
  CK(cuModuleLoadData(&smod, sched_fatbin));
  CK(cuModuleGetFunction(&fill, mod, "fill"));
  CK(cuModuleGetFunction(&probe, smod, "sched_probe"));
  CUdeviceptr dchain, dfill;
  CK(cuMemAlloc(&dchain, 2 * sizeof(int)));
  CK(cuMemAlloc(&dfill, N * sizeof(float)));
  CK(cuMemsetD32(dchain, 0, 2));
  void *pa[] = {&dchain};
  CK(cuLaunchKernel(probe, BLOCKS, 1, 1, THREADS, 1, 1, 0, NULL, pa, NULL));
  float v = 3.0f;
  int n = N;
  void *fa[] = {&dfill, &v, &n};
  CK(cuLaunchKernel(fill, N / 256, 1, 1, 256, 1, 1, 0, NULL, fa, NULL));
  CK(cuCtxSynchronize());
  int chain[2];
  float *h = malloc(N * sizeof *h);
  if (!h) return 1;
  CK(cuMemcpyDtoH(h, dfill, N * sizeof(float)));
  CK(cuMemcpyDtoH(chain, dchain, sizeof chain));
  printf("threads counted: %d\n", chain[1]);
  printf("chain within the grid: %d\n", chain[0] >= 0);
  drv_print("filled", h, N);
  CK(cuMemFree(dchain));
  CK(cuMemFree(dfill));
  CK(cuModuleUnload(smod));
  CK(cuModuleUnload(mod));
  CK(cuDevicePrimaryCtxRelease(dev));
  free(h);
  printf("drv_sched ok\n");
  return 0;
}
