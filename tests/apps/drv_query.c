/* drv_query: ordering a program gets from a successful query, not from an
 * event or a synchronize. Stream A fills a buffer; the host polls
 * cuStreamQuery(A) (then, in round 2, cuEventQuery of an event recorded
 * after the fill) until it succeeds, and only then launches on stream B the
 * kernel that reads the buffer - no cuStreamWaitEvent between them, as in
 * XLA's and PyTorch's allocators, which reuse memory once a query says the
 * work is done. A replay must wait where the query succeeded: the mock's
 * asynchronous mode (CUCAP_MOCK_ASYNC=1) runs queued stream work only when
 * it is waited for, so a replay that skipped the query would let B read
 * the buffer before A filled it. */
#include "drv_common.h"

static void poll_stream(CUstream s) {
  CUresult r;
  while ((r = cuStreamQuery(s)) == CUDA_ERROR_NOT_READY)
    ;
  CK(r);
}

static void poll_event(CUevent e) {
  CUresult r;
  while ((r = cuEventQuery(e)) == CUDA_ERROR_NOT_READY)
    ;
  CK(r);
}

int main(void) {
  enum { N = 8192, T = 256 };
  CUcontext ctx = drv_setup();
  CUmodule mod;
  CUfunction fill, scale;
  CK(cuModuleLoadData(&mod, drv_fatbin));
  CK(cuModuleGetFunction(&fill, mod, "fill"));
  CK(cuModuleGetFunction(&scale, mod, "scale"));
  CUstream a, b;
  CK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUevent done;
  CK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
  CUdeviceptr x;
  CK(cuMemAlloc(&x, N * sizeof(float)));
  float *h = malloc(N * sizeof *h);
  if (!h)
    return 1;
  int n = N;
  for (int round = 0; round < 2; round++) {
    float v = 3.0f + (float)round, s = 0.5f;
    void *fa[] = {&x, &v, &n}, *sa[] = {&x, &s, &n};
    CK(cuLaunchKernel(fill, N / T, 1, 1, T, 1, 1, 0, a, fa, NULL));
    if (round == 0) {
      poll_stream(a);
    } else {
      CK(cuEventRecord(done, a));
      poll_event(done);
    }
    CK(cuLaunchKernel(scale, N / T, 1, 1, T, 1, 1, 0, b, sa, NULL));
    CK(cuMemcpyDtoHAsync(h, x, N * sizeof(float), b));
    CK(cuStreamSynchronize(b));
    drv_print(round ? "after cuEventQuery" : "after cuStreamQuery", h, N);
  }
  CK(cuMemFree(x));
  CK(cuEventDestroy(done));
  CK(cuStreamDestroy(a));
  CK(cuStreamDestroy(b));
  CK(cuModuleUnload(mod));
  CK(cuCtxDestroy(ctx));
  free(h);
  printf("drv_query ok\n");
  return 0;
}
