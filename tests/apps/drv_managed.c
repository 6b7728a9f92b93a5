/* drv_managed: a program that never copies: managed memory written by the
 * host and by kernels on several threads' streams, read back on the host
 * after synchronisations (the shape of cudaOpenMP / UnifiedMemoryStreams).
 * A recorder must store what the host wrote before the kernels and what the
 * host read after each synchronisation, else a replay verifies 0 bytes.
 *
 * T threads, each with its own stream and managed buffer:
 *   host fills x; scale(x, 3) on its stream; cuStreamSynchronize; host sums x;
 *   host adds 1 to every element; scale(x, 0.5); cuEventRecord +
 *   cuEventSynchronize; host sums x.
 * Then the main thread: a shared managed counter incremented twice by
 * kernels on the legacy stream, cuCtxSynchronize, host sum. All values are
 * small integers and halves: exact in float on any device. */
#include <pthread.h>

#include "drv_common.h"

enum { T = 4, N = 8192 };

typedef struct worker {
  CUcontext ctx;
  CUfunction scale;
  int id;
  CUdeviceptr x;
  double sum1, sum2;
  int fail;
} worker;

static double sum_f(const float *x, int n) {
  double s = 0;
  for (int i = 0; i < n; i++) s += x[i];
  return s;
}

static void *run(void *p) {
  worker *w = p;
  CK(cuCtxSetCurrent(w->ctx));
  CUstream s;
  CUevent e;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  float *x = (float *)(uintptr_t)w->x;
  for (int i = 0; i < N; i++) x[i] = (float)(i % 7 + w->id);
  float three = 3.0f, half = 0.5f;
  int n = N;
  void *a1[] = {&w->x, &three, &n};
  CK(cuLaunchKernel(w->scale, N / 256, 1, 1, 256, 1, 1, 0, s, a1, NULL));
  CK(cuStreamSynchronize(s));
  w->sum1 = sum_f(x, N);
  for (int i = 0; i < N; i++) x[i] += 1.0f;
  void *a2[] = {&w->x, &half, &n};
  CK(cuLaunchKernel(w->scale, N / 256, 1, 1, 256, 1, 1, 0, s, a2, NULL));
  CK(cuEventRecord(e, s));
  CK(cuEventSynchronize(e));
  w->sum2 = sum_f(x, N);
  CK(cuEventDestroy(e));
  CK(cuStreamDestroy(s));
  return NULL;
}

int main(void) {
  CUcontext ctx = drv_setup();
  int managed = 0;
  CK(cuDeviceGetAttribute(&managed, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 0));
  if (!managed) {
    printf("no managed memory on this device\n");
    return 77;
  }
  CUmodule mod;
  CUfunction scale, increment;
  CK(cuModuleLoadData(&mod, drv_fatbin));
  CK(cuModuleGetFunction(&scale, mod, "scale"));
  CK(cuModuleGetFunction(&increment, mod, "increment"));
  worker w[T];
  pthread_t th[T];
  for (int t = 0; t < T; t++) {
    memset(&w[t], 0, sizeof w[t]);
    w[t].ctx = ctx;
    w[t].scale = scale;
    w[t].id = t;
    CK(cuMemAllocManaged(&w[t].x, N * sizeof(float), CU_MEM_ATTACH_GLOBAL));
  }
  for (int t = 0; t < T; t++)
    if (pthread_create(&th[t], NULL, run, &w[t]) != 0) return 1;
  for (int t = 0; t < T; t++) pthread_join(th[t], NULL);
  for (int t = 0; t < T; t++) printf("thread %d: after x3 %.1f, after +1 and /2 %.1f\n", t, w[t].sum1, w[t].sum2);

  CUdeviceptr c;
  CK(cuMemAllocManaged(&c, N * sizeof(int), CU_MEM_ATTACH_GLOBAL));
  int *hc = (int *)(uintptr_t)c;
  for (int i = 0; i < N; i++) hc[i] = i % 3;
  int n = N;
  void *ia[] = {&c, &n};
  CK(cuLaunchKernel(increment, N / 256, 1, 1, 256, 1, 1, 0, NULL, ia, NULL));
  CK(cuLaunchKernel(increment, N / 256, 1, 1, 256, 1, 1, 0, NULL, ia, NULL));
  CK(cuCtxSynchronize());
  long cs = 0;
  for (int i = 0; i < N; i++) cs += hc[i];
  printf("counter sum %ld\n", cs);
  for (int t = 0; t < T; t++) CK(cuMemFree(w[t].x));
  CK(cuMemFree(c));
  CK(cuModuleUnload(mod));
  CK(cuCtxDestroy(ctx));
  printf("drv_managed ok\n");
  return 0;
}
