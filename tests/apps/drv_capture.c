/* drv_capture: stream capture in global mode must behave exactly the same
 * under `cucap record` (issue: cudaErrorStreamCaptureInvalidated at a host
 * node, at cudaFreeAsync inside capture, at cudaStreamEndCapture, because
 * the recorder's own driver calls broke the capture). Every return code is
 * printed.
 *
 *  (a) main thread, stream A, CU_STREAM_CAPTURE_MODE_GLOBAL: kernel, a DtoH
 *      copy into pinned memory, a host function, cuMemAllocAsync + kernel +
 *      DtoD + cuMemFreeAsync (graph memory nodes); the capture state as
 *      cuStreamIsCapturing / cuStreamGetCaptureInfo report it;
 *  (b) meanwhile a second thread captures stream B in RELAXED mode (while
 *      its own interaction mode stays GLOBAL, so unsafe calls would be
 *      prohibited for it by A's capture): kernel + DtoH;
 *  (c) the app swaps itself to RELAXED (cuThreadExchangeStreamCaptureMode)
 *      for an allocation during the capture, then swaps back (freed after);
 *  then both graphs are instantiated and launched, and the results checked.
 * With DRV_CAPTURE_PAGEABLE=1 (the mock CI test) thread B also issues a
 * cuMemcpyAsync from pageable memory before its capture: the UVA copy makes
 * a recorder ask the driver what the pointer is (potentially unsafe while A
 * captures globally; whether the real driver allows the copy itself there
 * is not assumed, hence off by default). */
#include <pthread.h>

#include "drv_common.h"

enum { N = 4096 };

static int g_host_calls;
static void CUDA_CB host_fn(void *user) {
  (void)user;
  g_host_calls++;
}

typedef struct thread_b {
  CUcontext ctx;
  CUstream s;
  CUfunction scale;
  CUdeviceptr d;
  float *h;
  CUgraph g;
} thread_b;

#define R(what, call)                                                     \
  do {                                                                    \
    CUresult r_ = (call);                                                 \
    printf("  %-34s %d\n", what, (int)r_);                                \
  } while (0)

static void *run_b(void *p) {
  thread_b *b = p;
  CK(cuCtxSetCurrent(b->ctx));
  const char *pg = getenv("DRV_CAPTURE_PAGEABLE");
  if (pg && *pg == '1') {
    static float src[N];
    for (int i = 0; i < N; i++) src[i] = 1.0f;
    R("B: cuMemcpyAsync(pageable)", cuMemcpyAsync(b->d, (CUdeviceptr)(uintptr_t)src, sizeof src, b->s));
  }
  R("B: cuStreamBeginCapture(RELAXED)", cuStreamBeginCapture(b->s, CU_STREAM_CAPTURE_MODE_RELAXED));
  float two = 2.0f;
  int n = N;
  void *args[] = {&b->d, &two, &n};
  R("B: cuLaunchKernel(scale)", cuLaunchKernel(b->scale, N / 256, 1, 1, 256, 1, 1, 0, b->s, args, NULL));
  R("B: cuMemcpyDtoHAsync", cuMemcpyDtoHAsync(b->h, b->d, N * sizeof(float), b->s));
  R("B: cuStreamEndCapture", cuStreamEndCapture(b->s, &b->g));
  return NULL;
}

static double sum_f(const float *x) {
  double s = 0;
  for (int i = 0; i < N; i++) s += x[i];
  return s;
}

static long sum_i(const int *x) {
  long s = 0;
  for (int i = 0; i < N; i++) s += x[i];
  return s;
}

int main(void) {
  CUcontext ctx = drv_setup();
  CUmodule mod;
  CUfunction fill, increment, scale;
  CK(cuModuleLoadData(&mod, drv_fatbin));
  CK(cuModuleGetFunction(&fill, mod, "fill"));
  CK(cuModuleGetFunction(&increment, mod, "increment"));
  CK(cuModuleGetFunction(&scale, mod, "scale"));
  CUstream sa, sb;
  CK(cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING));
  CUdeviceptr di, df, df2;
  CK(cuMemAlloc(&di, N * sizeof(int)));
  CK(cuMemAlloc(&df, N * sizeof(float)));
  CK(cuMemAlloc(&df2, N * sizeof(float)));
  int *hi;
  float *hb, *hf2;
  CK(cuMemAllocHost((void **)&hi, N * sizeof(int)));
  CK(cuMemAllocHost((void **)&hb, N * sizeof(float)));
  hf2 = malloc(N * sizeof(float));
  if (!hf2) return 1;
  CK(cuMemsetD32(di, 0, N));
  float one = 1.0f, two = 2.0f;
  int n = N;
  void *fa[] = {&df, &one, &n};
  CK(cuLaunchKernel(fill, N / 256, 1, 1, 256, 1, 1, 0, NULL, fa, NULL));
  CK(cuCtxSynchronize());

  /* (a) */
  printf("capture A (global):\n");
  CK(cuStreamBeginCapture(sa, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  R("cuStreamIsCapturing", cuStreamIsCapturing(sa, &st));
  printf("  status active: %s\n", st == CU_STREAM_CAPTURE_STATUS_ACTIVE ? "yes" : "no");
  cuuint64_t id = 0;
  CUgraph cg = NULL;
  st = CU_STREAM_CAPTURE_STATUS_NONE;
  R("cuStreamGetCaptureInfo", cuStreamGetCaptureInfo(sa, &st, &id, &cg, NULL, NULL, NULL));
  printf("  status active: %s, id and graph set: %s\n", st == CU_STREAM_CAPTURE_STATUS_ACTIVE ? "yes" : "no",
         id && cg ? "yes" : "no");
  void *ia[] = {&di, &n};
  R("cuLaunchKernel(increment)", cuLaunchKernel(increment, N / 256, 1, 1, 256, 1, 1, 0, sa, ia, NULL));
  R("cuMemcpyDtoHAsync(pinned)", cuMemcpyDtoHAsync(hi, di, N * sizeof(int), sa));
  R("cuLaunchHostFunc", cuLaunchHostFunc(sa, host_fn, NULL));
  CUdeviceptr tmp = 0;
  R("cuMemAllocAsync", cuMemAllocAsync(&tmp, N * sizeof(float), sa));
  void *ta[] = {&tmp, &two, &n};
  R("cuLaunchKernel(fill tmp)", cuLaunchKernel(fill, N / 256, 1, 1, 256, 1, 1, 0, sa, ta, NULL));
  R("cuMemcpyDtoDAsync", cuMemcpyDtoDAsync(df2, tmp, N * sizeof(float), sa));
  R("cuMemFreeAsync", cuMemFreeAsync(tmp, sa));

  /* (b) */
  thread_b b = {ctx, sb, scale, df, hb, NULL};
  pthread_t t;
  if (pthread_create(&t, NULL, run_b, &b) != 0) return 1;
  pthread_join(t, NULL);

  /* (c) */
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  R("cuThreadExchangeStreamCaptureMode", cuThreadExchangeStreamCaptureMode(&mode));
  printf("  previous mode global: %s\n", mode == CU_STREAM_CAPTURE_MODE_GLOBAL ? "yes" : "no");
  CUdeviceptr scratch = 0;
  R("cuMemAlloc (relaxed)", cuMemAlloc(&scratch, 256));
  R("cuThreadExchangeStreamCaptureMode", cuThreadExchangeStreamCaptureMode(&mode));
  printf("  previous mode relaxed: %s\n", mode == CU_STREAM_CAPTURE_MODE_RELAXED ? "yes" : "no");

  CUgraph ga = NULL;
  R("cuStreamEndCapture", cuStreamEndCapture(sa, &ga));
  if (!ga || !b.g) {
    printf("a capture failed\n");
    return 1;
  }
  CK(cuMemFree(scratch));
  size_t na = 0, nb = 0;
  CK(cuGraphGetNodes(ga, NULL, &na));
  CK(cuGraphGetNodes(b.g, NULL, &nb));
  printf("graph nodes: A %zu, B %zu\n", na, nb);

  CUgraphExec ea, eb;
  CK(cuGraphInstantiate(&ea, ga, 0));
  CK(cuGraphInstantiate(&eb, b.g, 0));
  for (int it = 0; it < 3; it++) CK(cuGraphLaunch(ea, sa));
  for (int it = 0; it < 2; it++) CK(cuGraphLaunch(eb, sb));
  CK(cuStreamSynchronize(sa));
  CK(cuStreamSynchronize(sb));
  CK(cuMemcpyDtoH(hf2, df2, N * sizeof(float)));
  printf("A: counters sum %ld (expect %d), host function calls %d, tmp copy sum %.1f\n", sum_i(hi), 3 * N,
         g_host_calls, sum_f(hf2));
  printf("B: sum %.1f (expect %.1f)\n", sum_f(hb), 4.0 * N);

  CK(cuGraphExecDestroy(ea));
  CK(cuGraphExecDestroy(eb));
  CK(cuGraphDestroy(ga));
  CK(cuGraphDestroy(b.g));
  CK(cuStreamDestroy(sa));
  CK(cuStreamDestroy(sb));
  CK(cuMemFree(di));
  CK(cuMemFree(df));
  CK(cuMemFree(df2));
  CK(cuMemFreeHost(hi));
  CK(cuMemFreeHost(hb));
  free(hf2);
  CK(cuModuleUnload(mod));
  CK(cuCtxDestroy(ctx));
  printf("drv_capture ok\n");
  return 0;
}
