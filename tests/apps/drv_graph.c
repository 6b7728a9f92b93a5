/* drv_graph: capture memset + kernels + a DtoD copy + a host function into a
 * graph, instantiate it, launch it 10 times, check the result. */
#include "drv_common.h"

static int g_host_calls;
static void CUDA_CB host_fn(void *user) { (void)user; g_host_calls++; }

int main(void) {
  enum { N = 1 << 14 };
  CUcontext ctx = drv_setup();
  CUmodule mod;
  CUfunction saxpy, increment;
  CK(cuModuleLoadData(&mod, drv_fatbin));
  CK(cuModuleGetFunction(&saxpy, mod, "saxpy"));
  CK(cuModuleGetFunction(&increment, mod, "increment"));
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr dx, dy, dz, dc;
  CK(cuMemAlloc(&dx, N * sizeof(float)));
  CK(cuMemAlloc(&dy, N * sizeof(float)));
  CK(cuMemAlloc(&dz, N * sizeof(float)));
  CK(cuMemAlloc(&dc, N * sizeof(int)));
  float *h;
  CK(cuMemAllocHost((void **)&h, N * sizeof(float)));
  for (int i = 0; i < N; i++) h[i] = (float)(i % 10);
  CK(cuMemcpyHtoD(dx, h, N * sizeof(float)));
  CK(cuMemsetD32(dc, 0, N));

  int n = N;
  float a = 2.0f;
  void *sa[] = {&a, &dx, &dy, &n};
  void *ia[] = {&dc, &n};
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUstreamCaptureStatus cs;
  CK(cuStreamIsCapturing(s, &cs));
  CK(cuMemsetD32Async(dy, 0x3f800000u, N, s)); /* y = 1 */
  CK(cuLaunchKernel(saxpy, N / 256, 1, 1, 256, 1, 1, 0, s, sa, NULL)); /* y = 2x + 1 */
  CK(cuMemcpyDtoDAsync(dz, dy, N * sizeof(float), s));
  CK(cuLaunchKernel(increment, N / 256, 1, 1, 256, 1, 1, 0, s, ia, NULL));
  CK(cuLaunchHostFunc(s, host_fn, NULL));
  CUgraph g;
  CK(cuStreamEndCapture(s, &g));
  printf("captured while capturing: %d, host calls during capture: %d\n", cs == CU_STREAM_CAPTURE_STATUS_ACTIVE,
         g_host_calls);
  size_t nodes = 0;
  CK(cuGraphGetNodes(g, NULL, &nodes));
  printf("graph nodes: %zu\n", nodes);
  CUgraphExec ge;
  CK(cuGraphInstantiate(&ge, g, 0));
  for (int it = 0; it < 10; it++) CK(cuGraphLaunch(ge, s));
  CK(cuStreamSynchronize(s));
  CK(cuMemcpyDtoH(h, dz, N * sizeof(float)));
  drv_print("z", h, N);
  int *c = malloc(N * sizeof(int));
  if (!c) return 1;
  CK(cuMemcpyDtoH(c, dc, N * sizeof(int)));
  printf("counter[0]=%d counter[N-1]=%d host calls=%d\n", c[0], c[N - 1], g_host_calls);
  CK(cuGraphExecDestroy(ge));
  CK(cuGraphDestroy(g));
  CK(cuStreamDestroy(s));
  CK(cuMemFree(dx));
  CK(cuMemFree(dy));
  CK(cuMemFree(dz));
  CK(cuMemFree(dc));
  CK(cuMemFreeHost(h));
  CK(cuModuleUnload(mod));
  CK(cuCtxDestroy(ctx));
  free(c);
  printf("drv_graph ok\n");
  return 0;
}
