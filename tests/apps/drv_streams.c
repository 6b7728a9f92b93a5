/* drv_streams: three streams, pinned buffers, async copies, events with a
 * cross-stream wait, per-stream kernels, elapsed time. */
#include "drv_common.h"

int main(void) {
  enum { N = 1 << 15, S = 3 };
  CUcontext ctx = drv_setup();
  CUmodule mod;
  CUfunction fill, saxpy, scale;
  CK(cuModuleLoadData(&mod, drv_fatbin));
  CK(cuModuleGetFunction(&fill, mod, "fill"));
  CK(cuModuleGetFunction(&saxpy, mod, "saxpy"));
  CK(cuModuleGetFunction(&scale, mod, "scale"));
  CUstream st[S];
  CUevent ev[S], t0, t1;
  CUdeviceptr d[S];
  float *h[S];
  for (int s = 0; s < S; s++) {
    CK(cuStreamCreateWithPriority(&st[s], CU_STREAM_NON_BLOCKING, -s));
    CK(cuEventCreate(&ev[s], CU_EVENT_DISABLE_TIMING));
    CK(cuMemAlloc(&d[s], N * sizeof(float)));
    CK(cuMemAllocHost((void **)&h[s], N * sizeof(float)));
    for (int i = 0; i < N; i++) h[s][i] = (float)((i + s) % 32);
  }
  CK(cuEventCreate(&t0, 0));
  CK(cuEventCreate(&t1, 0));
  CK(cuEventRecord(t0, st[0]));
  int n = N;
  for (int s = 0; s < S; s++) {
    CK(cuMemcpyHtoDAsync(d[s], h[s], N * sizeof(float), st[s]));
    float f = (float)(s + 1);
    void *a[] = {&d[s], &f, &n};
    CK(cuLaunchKernel(scale, N / 256, 1, 1, 256, 1, 1, 0, st[s], a, NULL));
    CK(cuEventRecord(ev[s], st[s]));
  }
  /* stream 1 and 2 consume stream 0's result once its event fired */
  for (int s = 1; s < S; s++) {
    CK(cuStreamWaitEvent(st[s], ev[0], 0));
    float alpha = 2.0f;
    void *a[] = {&alpha, &d[0], &d[s], &n};
    CK(cuLaunchKernel(saxpy, N / 256, 1, 1, 256, 1, 1, 0, st[s], a, NULL));
  }
  for (int s = 0; s < S; s++) CK(cuMemcpyDtoHAsync(h[s], d[s], N * sizeof(float), st[s]));
  CK(cuEventRecord(t1, st[S - 1]));
  CK(cuEventSynchronize(t1));
  float ms = -1;
  CK(cuEventElapsedTime(&ms, t0, t1));
  for (int s = 0; s < S; s++) {
    CK(cuStreamSynchronize(st[s]));
    CK(cuStreamQuery(st[s]));
    char label[32];
    snprintf(label, sizeof label, "stream%d", s);
    drv_print(label, h[s], N);
  }
  printf("elapsed non-negative: %d\n", ms >= 0.0f);
  for (int s = 0; s < S; s++) {
    CK(cuEventDestroy(ev[s]));
    CK(cuStreamDestroy(st[s]));
    CK(cuMemFree(d[s]));
    CK(cuMemFreeHost(h[s]));
  }
  CK(cuEventDestroy(t0));
  CK(cuEventDestroy(t1));
  CK(cuModuleUnload(mod));
  CK(cuCtxDestroy(ctx));
  printf("drv_streams ok\n");
  return 0;
}
