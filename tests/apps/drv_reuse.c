/* drv_reuse: asynchronous copies into host memory that the program reuses
 * before it synchronises (NVIDIA's simpleStreams pattern), so that a recorder
 * reading each copy's result only at the program's next synchronisation would
 * record the last copy's bytes for every copy (issue 7 class 1: recording
 * must record what each copy really delivered, without a synchronisation the
 * program did not make).
 *
 *  1. simpleStreams: S blocking streams, R repetitions; each repetition
 *     increments every stream's chunk of device memory and copies it into
 *     the same chunk of one pinned buffer; one context synchronisation at
 *     the end. Repetition r's copy of stream s holds 100*s + r + 1.
 *  2. Two streams ordered by an event: stream 0 copies into a pinned
 *     buffer, records an event; stream 1 waits for it and copies other data
 *     into the same buffer.
 *  3. An asynchronous copy into a pinned buffer, then a synchronous copy
 *     into the same buffer (the legacy stream waits for the blocking one).
 * Prints the host buffers' contents after the program's synchronisations;
 * the intermediate results are checked by `cucap replay --verify` against
 * what the recorder stored for each copy. */
#include "drv_common.h"

enum { N = 1 << 14, S = 4, R = 5 };

static void inc(CUfunction f, CUdeviceptr d, CUstream s) {
  int n = N;
  void *a[] = {&d, &n};
  CK(cuLaunchKernel(f, N / 256, 1, 1, 256, 1, 1, 0, s, a, NULL));
}

static void print_ints(const char *label, const int *x, size_t n) {
  long long sum = 0;
  for (size_t i = 0; i < n; i++) sum += x[i];
  printf("%s: sum=%lld first=%d last=%d hash=%016llx\n", label, sum, x[0], x[n - 1],
         (unsigned long long)drv_hash(x, n * sizeof *x));
}

int main(void) {
  CUcontext ctx = drv_setup();
  CUmodule mod;
  CUfunction f;
  CK(cuModuleLoadData(&mod, drv_fatbin));
  CK(cuModuleGetFunction(&f, mod, "increment"));
  CUstream st[S];
  for (int s = 0; s < S; s++) CK(cuStreamCreate(&st[s], 0));
  CUdeviceptr d;
  CK(cuMemAlloc(&d, (size_t)S * N * sizeof(int)));
  int *h, *h2, *h3;
  CK(cuMemAllocHost((void **)&h, (size_t)S * N * sizeof(int)));
  CK(cuMemAllocHost((void **)&h2, N * sizeof(int)));
  CK(cuMemAllocHost((void **)&h3, N * sizeof(int)));

  /* 1. simpleStreams */
  for (int s = 0; s < S; s++) CK(cuMemsetD32(d + (size_t)s * N * sizeof(int), (unsigned)(100 * s), N));
  for (int r = 0; r < R; r++)
    for (int s = 0; s < S; s++) {
      CUdeviceptr ds = d + (size_t)s * N * sizeof(int);
      inc(f, ds, st[s]);
      CK(cuMemcpyDtoHAsync(h + (size_t)s * N, ds, N * sizeof(int), st[s]));
    }
  CK(cuCtxSynchronize());
  print_ints("streams", h, (size_t)S * N);

  /* 2. another stream, ordered by an event, writes the same buffer */
  CUevent ev;
  CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  CUdeviceptr d1 = d + (size_t)N * sizeof(int);
  inc(f, d, st[0]);
  CK(cuMemcpyDtoHAsync(h2, d, N * sizeof(int), st[0]));
  CK(cuEventRecord(ev, st[0]));
  CK(cuStreamWaitEvent(st[1], ev, 0));
  inc(f, d1, st[1]);
  CK(cuMemcpyDtoHAsync(h2, d1, N * sizeof(int), st[1]));
  CK(cuStreamSynchronize(st[1]));
  print_ints("event-ordered", h2, N);

  /* 3. a synchronous copy after an asynchronous one into the same buffer */
  inc(f, d, st[2]);
  CK(cuMemcpyDtoHAsync(h3, d, N * sizeof(int), st[2]));
  CK(cuMemcpyDtoH(h3, d1, N * sizeof(int)));
  print_ints("sync-after-async", h3, N);
  CK(cuCtxSynchronize());

  CK(cuEventDestroy(ev));
  for (int s = 0; s < S; s++) CK(cuStreamDestroy(st[s]));
  CK(cuMemFreeHost(h));
  CK(cuMemFreeHost(h2));
  CK(cuMemFreeHost(h3));
  CK(cuMemFree(d));
  CK(cuModuleUnload(mod));
  CK(cuCtxDestroy(ctx));
  printf("drv_reuse ok\n");
  return 0;
}
