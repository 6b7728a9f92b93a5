/* drv_sched: a result that depends on how the GPU schedules threads, like
 * simpleAtomicIntrinsics' atomicCAS chain (issue 7: one int of it differed
 * from the recording in all 7 replays, which agreed with each other), next
 * to deterministic results. In the primary context, as a runtime-API
 * program would be; and pointers device malloc returned, copied back (the
 * heap is placed by the driver: elsewhere in a replay). Prints only what is
 * deterministic. `cucap replay --verify` must pass with the chain's bytes
 * reported as nondeterministic (seen to vary in the perturbed passes) and
 * the heap pointers as relocated pointers, and fail on a flipped byte of the
 * deterministic results (tests/integration/test_replay_nondet.sh). Last,
 * newdelete's shared stack (128 blocks push, 16384 threads pop): the popped
 * values land on other threads from run to run; verify passes it as
 * "differs only in order" (verify/verify_order.c) and fails on a flipped
 * value. */
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
  drv_setup_primary(&dev);
  CUmodule mod, smod;
  CUfunction fill, probe, heap, push, pop;
  CK(cuModuleLoadData(&mod, drv_fatbin));
  CK(cuModuleLoadData(&smod, sched_fatbin));
  CK(cuModuleGetFunction(&fill, mod, "fill"));
  CK(cuModuleGetFunction(&probe, smod, "sched_probe"));
  CK(cuModuleGetFunction(&heap, smod, "heap_ptrs"));
  CK(cuModuleGetFunction(&push, smod, "stack_push"));
  CK(cuModuleGetFunction(&pop, smod, "stack_pop"));
  CUdeviceptr dchain, dfill, dptrs;
  CK(cuMemAlloc(&dchain, 2 * sizeof(int)));
  CK(cuMemAlloc(&dfill, N * sizeof(float)));
  CK(cuMemAlloc(&dptrs, 32 * sizeof(unsigned long long)));
  CK(cuMemsetD32(dchain, 0, 2));
  enum { SB = 128, ST = 128 }; /* newdelete's shape */
  CUdeviceptr dstack, dtop, dpopped;
  CK(cuMemAlloc(&dstack, SB * sizeof(int)));
  CK(cuMemAlloc(&dtop, sizeof(int)));
  CK(cuMemAlloc(&dpopped, SB * ST * sizeof(int)));
  CK(cuMemsetD32(dtop, 0, 1));
  void *pa[] = {&dchain};
  CK(cuLaunchKernel(probe, BLOCKS, 1, 1, THREADS, 1, 1, 0, NULL, pa, NULL));
  float v = 3.0f;
  int n = N;
  void *fa[] = {&dfill, &v, &n};
  CK(cuLaunchKernel(fill, N / 256, 1, 1, 256, 1, 1, 0, NULL, fa, NULL));
  void *ha[] = {&dptrs};
  CK(cuLaunchKernel(heap, 1, 1, 1, 32, 1, 1, 0, NULL, ha, NULL));
  void *pua[] = {&dstack, &dtop};
  CK(cuLaunchKernel(push, SB, 1, 1, ST, 1, 1, 0, NULL, pua, NULL));
  void *poa[] = {&dstack, &dtop, &dpopped};
  CK(cuLaunchKernel(pop, SB, 1, 1, ST, 1, 1, 0, NULL, poa, NULL));
  CK(cuCtxSynchronize());
  int chain[2];
  float *h = malloc(N * sizeof *h);
  if (!h) return 1;
  CK(cuMemcpyDtoH(h, dfill, N * sizeof(float)));
  CK(cuMemcpyDtoH(chain, dchain, sizeof chain));
  unsigned long long ptrs[32];
  CK(cuMemcpyDtoH(ptrs, dptrs, sizeof ptrs));
  int *popped = malloc(SB * ST * sizeof *popped), got[SB] = {0}, npopped = 0, each = 1;
  if (!popped) return 1;
  CK(cuMemcpyDtoH(popped, dpopped, SB * ST * sizeof(int)));
  for (int i = 0; i < SB * ST; i++)
    if (popped[i] >= 0 && popped[i] < SB) { got[popped[i]]++; npopped++; }
  for (int i = 0; i < SB; i++) each &= got[i] == 1;
  free(popped);
  int distinct = 1;
  for (int i = 1; i < 32; i++) distinct &= ptrs[i] != ptrs[i - 1] && ptrs[i] != 0;
  printf("threads counted: %d\n", chain[1]);
  printf("heap pointers distinct: %d\n", distinct);
  printf("chain within the grid: %d\n", chain[0] >= 0);
  drv_print("filled", h, N);
  printf("stack: %d values popped, each block's once: %d\n", npopped, each);
  CK(cuMemFree(dchain));
  CK(cuMemFree(dfill));
  CK(cuMemFree(dptrs));
  CK(cuMemFree(dstack));
  CK(cuMemFree(dtop));
  CK(cuMemFree(dpopped));
  CK(cuModuleUnload(smod));
  CK(cuModuleUnload(mod));
  CK(cuDevicePrimaryCtxRelease(dev));
  free(h);
  printf("drv_sched ok\n");
  return 0;
}
