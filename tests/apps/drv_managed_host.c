/* drv_managed_host: managed memory the host updates while a kernel works on
 * it, the shape of NVIDIA's systemWideAtomics (issue 7: its sync-point
 * snapshot holds host and GPU contributions; a replay has no host code, so
 * 4 of its 40 bytes differed in every pass).
 *
 *  1. gpu_only (managed): fill = 2.0 by a kernel, cuCtxSynchronize right
 *     after: only the GPU writes it; verified as usual.
 *  2. shared (managed, 16 ints): increment adds 1 to the first 8 on the
 *     GPU; meanwhile the host adds 10 to each of the last 8, 100 times,
 *     over 3 ms, without a CUDA call; then cuCtxSynchronize and the host
 *     reads all 16. The host and the kernel touch different ints, so the
 *     result is exact on a GPU with concurrent managed access and on the
 *     mock alike.
 * `cucap replay --verify` must report the 32 host-updated bytes as written
 * by the program's host code (not mismatches) and verify the rest; a
 * flipped recorded byte of gpu_only must fail (tests/integration/
 * test_replay_managed_host.sh). */
#include <time.h>

#include "drv_common.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(void) {
  enum { N = 4096, S = 16 };
  CUcontext ctx = drv_setup();
  CUmodule mod;
  CUfunction fill, increment;
  CK(cuModuleLoadData(&mod, drv_fatbin));
  CK(cuModuleGetFunction(&fill, mod, "fill"));
  CK(cuModuleGetFunction(&increment, mod, "increment"));
  int cma = 0;
  CUdevice dev;
  CK(cuCtxGetDevice(&dev));
  CK(cuDeviceGetAttribute(&cma, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, dev));
  CUdeviceptr gpu_only, shared;
  CK(cuMemAllocManaged(&gpu_only, N * sizeof(float), CU_MEM_ATTACH_GLOBAL));
  CK(cuMemAllocManaged(&shared, S * sizeof(int), CU_MEM_ATTACH_GLOBAL));

  /* 1 */
  float two = 2.0f;
  int n = N;
  void *fa[] = {&gpu_only, &two, &n};
  CK(cuLaunchKernel(fill, N / 256, 1, 1, 256, 1, 1, 0, NULL, fa, NULL));
  CK(cuCtxSynchronize());
  drv_print("gpu_only", (const float *)(uintptr_t)gpu_only, N);

  /* 2 */
  int *sh = (int *)(uintptr_t)shared;
  for (int i = 0; i < S; i++) sh[i] = i;
  int half = S / 2;
  void *ia[] = {&shared, &half};
  CK(cuLaunchKernel(increment, 1, 1, 1, 32, 1, 1, 0, NULL, ia, NULL));
  if (cma) { /* the host may touch managed memory while the kernel runs */
    uint64_t t0 = now_ns();
    for (int k = 0; k < 100; k++)
      for (int i = half; i < S; i++) __sync_fetch_and_add(&sh[i], 10);
    while (now_ns() - t0 < 3000000ull) {
    }
  }
  CK(cuCtxSynchronize());
  if (!cma) /* (devices without concurrent access: after the kernel) */
    for (int k = 0; k < 100; k++)
      for (int i = half; i < S; i++) sh[i] += 10;
  long sum = 0;
  for (int i = 0; i < S; i++) sum += sh[i];
  printf("shared: sum %ld (expect %d)\n", sum, (S - 1) * S / 2 + half + 100 * 10 * half);

  CK(cuMemFree(gpu_only));
  CK(cuMemFree(shared));
  CK(cuModuleUnload(mod));
  CK(cuCtxDestroy(ctx));
  printf("drv_managed_host ok\n");
  return 0;
}
