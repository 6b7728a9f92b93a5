/* bench_record_mock.c - per-call cost of the driver calls the recorder sees
 * most. A driver-API program linked -lcuda
 * against the mock's directory without an rpath (like tests/apps/drv_*), so
 * it runs natively on the mock and under `cucap record`; the difference of
 * the two runs is the recording overhead per call.
 *   LD_LIBRARY_PATH=<build>/tests/mock ./bench/bench_record_mock [N]
 *   LD_LIBRARY_PATH=<build>/tests/mock cucap record -o x.cucap -- ./bench/bench_record_mock [N]
 * Prints ns/call for cuLaunchKernel (vec_add, 4 params, grid 1x1x1 of 1
 * thread, n = 0 so the mock does no work) and for cuCtxGetDevice. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../tests/apps/drv_common.h"

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? strtol(argv[1], NULL, 10) : 100000;
  if (n <= 0) {
    fprintf(stderr, "usage: %s [N>0]\n", argv[0]);
    return 2;
  }
  CUcontext ctx = drv_setup();
  CUmodule mod;
  CUfunction f;
  CK(cuModuleLoadData(&mod, drv_fatbin));
  CK(cuModuleGetFunction(&f, mod, "vec_add"));
  CUdeviceptr a, b, c;
  CK(cuMemAlloc(&a, 256));
  CK(cuMemAlloc(&b, 256));
  CK(cuMemAlloc(&c, 256));
  int cnt = 0; /* no element is touched */
  void *args[] = {&a, &b, &c, &cnt};
  /* warm-up: learns the function layout, the callstacks, the thread state */
  for (int i = 0; i < 100; i++)
    CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
  double t0 = now_ns();
  for (long i = 0; i < n; i++)
    CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
  double t1 = now_ns();
  CUdevice dev;
  for (long i = 0; i < n; i++)
    CK(cuCtxGetDevice(&dev));
  double t2 = now_ns();
  CK(cuCtxSynchronize());
  printf("cuLaunchKernel: %.1f ns/call\n", (t1 - t0) / (double)n);
  printf("cuCtxGetDevice: %.1f ns/call\n", (t2 - t1) / (double)n);
  CK(cuMemFree(a));
  CK(cuMemFree(b));
  CK(cuMemFree(c));
  CK(cuModuleUnload(mod));
  CK(cuCtxDestroy(ctx));
  return 0;
}
