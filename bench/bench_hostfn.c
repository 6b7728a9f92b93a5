/* bench_hostfn.c - what a host function costs a stream, and what the
 * recorder's buffer-reuse path costs (interpose/custom_deferred.c: a pending
 * async DtoH result whose buffer the program overwrites before it
 * synchronised is read by a host function enqueued just before the new
 * copy). A driver-API program linked -lcuda without an rpath: it runs on
 * the real driver on a GPU machine and on the mock in CI.
 *
 *   ./bench/bench_hostfn [N]
 *
 * Prints (stdout, one "name: value" per line; all timing):
 *   copy_us:   per 4 KiB pinned DtoH copy, N copies back to back then one
 *              stream synchronisation (each into its own slot of a buffer);
 *   hostfn_us: the extra time per copy when a no-op host function follows
 *              each copy on the same stream: the stall a host function adds
 *              (the driver's callback latency);
 *   reuse_us:  per copy when all N copies go into the same 4 KiB buffer and
 *              the stream is synchronised once (NVIDIA simpleStreams'
 *              pattern; natively like copy_us; under `cucap record` each
 *              copy after the first costs the recorder one host function).
 * bench/gpu_bench.sh runs it natively (hostfn_us) and recorded
 * (record_overhead_reuse = recorded reuse_us / native reuse_us). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../tests/apps/drv_common.h"

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void CUDA_CB noop(void *arg) { (void)arg; }

enum { CHUNK = 4096 };

int main(int argc, char **argv) {
  long n = argc > 1 ? strtol(argv[1], NULL, 10) : 2000;
  if (n <= 0 || n > 1000000) {
    fprintf(stderr, "usage: %s [N in 1..1000000]\n", argv[0]);
    return 2;
  }
  CUcontext ctx = drv_setup();
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr d;
  CK(cuMemAlloc(&d, CHUNK));
  CK(cuMemsetD8(d, 7, CHUNK));
  unsigned char *h;
  CK(cuMemAllocHost((void **)&h, (size_t)n * CHUNK));
  double best[3] = {1e30, 1e30, 1e30};
  for (int rep = 0; rep < 3; rep++) {
    for (int k = 0; k < 3; k++) {
      CK(cuStreamSynchronize(s));
      double t0 = now_us();
      for (long i = 0; i < n; i++) {
        unsigned char *dst = k == 2 ? h : h + (size_t)i * CHUNK;
        CK(cuMemcpyDtoHAsync(dst, d, CHUNK, s));
        if (k == 1)
          CK(cuLaunchHostFunc(s, noop, NULL));
      }
      CK(cuStreamSynchronize(s));
      double us = (now_us() - t0) / (double)n;
      if (us < best[k])
        best[k] = us;
    }
  }
  printf("copy_us: %.3f\n", best[0]);
  printf("hostfn_us: %.3f\n", best[1] > best[0] ? best[1] - best[0] : 0.0);
  printf("reuse_us: %.3f\n", best[2]);
  CK(cuMemFreeHost(h));
  CK(cuMemFree(d));
  CK(cuStreamDestroy(s));
  CK(cuCtxDestroy(ctx));
  return 0;
}
