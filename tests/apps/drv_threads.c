/* drv_threads: 8 pthreads share the primary context; each has its own stream
 * and buffers and does copies and launches. Results print in thread order. */
#include "drv_common.h"
#include <pthread.h>

enum { T = 8, ITER = 10 };
static CUcontext g_ctx;
static CUfunction g_fill, g_increment;
static double g_sum[T];
static uint64_t g_hash[T];

static void *worker(void *arg) {
  int t = (int)(intptr_t)arg, n = 4096 * (t + 1);
  CK(cuCtxSetCurrent(g_ctx));
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr df, di;
  CK(cuMemAlloc(&df, (size_t)n * sizeof(float)));
  CK(cuMemAlloc(&di, (size_t)n * sizeof(int)));
  int *hi = malloc((size_t)n * sizeof(int));
  float *hf = malloc((size_t)n * sizeof(float));
  if (!hi || !hf) exit(1);
  for (int i = 0; i < n; i++) hi[i] = i % (t + 3);
  CK(cuMemcpyHtoDAsync(di, hi, (size_t)n * sizeof(int), s));
  float v = (float)(t + 1);
  void *fa[] = {&df, &v, &n};
  CK(cuLaunchKernel(g_fill, (n + 255) / 256, 1, 1, 256, 1, 1, 0, s, fa, NULL));
  void *ia[] = {&di, &n};
  for (int k = 0; k < ITER; k++) CK(cuLaunchKernel(g_increment, (n + 127) / 128, 1, 1, 128, 1, 1, 0, s, ia, NULL));
  CK(cuMemcpyDtoHAsync(hi, di, (size_t)n * sizeof(int), s));
  CK(cuMemcpyDtoHAsync(hf, df, (size_t)n * sizeof(float), s));
  CK(cuStreamSynchronize(s));
  double sum = drv_sum(hf, (size_t)n);
  for (int i = 0; i < n; i++) sum += hi[i];
  g_sum[t] = sum;
  g_hash[t] = drv_hash(hi, (size_t)n * sizeof(int)) ^ drv_hash(hf, (size_t)n * sizeof(float));
  CK(cuMemFree(df));
  CK(cuMemFree(di));
  CK(cuStreamDestroy(s));
  free(hi);
  free(hf);
  return NULL;
}

int main(void) {
  CUdevice dev;
  CUmodule mod;
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&g_ctx, dev));
  CK(cuCtxSetCurrent(g_ctx));
  CK(cuModuleLoadData(&mod, drv_fatbin));
  CK(cuModuleGetFunction(&g_fill, mod, "fill"));
  CK(cuModuleGetFunction(&g_increment, mod, "increment"));
  pthread_t th[T];
  for (int t = 0; t < T; t++)
    if (pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) != 0) return 1;
  for (int t = 0; t < T; t++) pthread_join(th[t], NULL);
  for (int t = 0; t < T; t++) printf("thread%d: sum=%.1f hash=%016llx\n", t, g_sum[t], (unsigned long long)g_hash[t]);
  CK(cuModuleUnload(mod));
  CK(cuDevicePrimaryCtxRelease(dev));
  printf("drv_threads ok\n");
  return 0;
}
