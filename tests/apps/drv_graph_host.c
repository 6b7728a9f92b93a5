/* drv_graph_host: graphs whose copy nodes read and write host memory, as
 * NVIDIA's simpleCudaGraphs builds them (issue 7: its replay stopped at
 * cuGraphAddMemcpyNode with CUDA_ERROR_INVALID_VALUE).
 *
 *  A (graph API, like cudaGraphAddMemcpyNode with cudaMemcpyDefault):
 *      C1: page-locked input -> dx, both sides CU_MEMORYTYPE_UNIFIED
 *      M:  memset dy = 0
 *      K:  vec_add dy = dx + dx            (after C1, M)
 *      C2: dy[0..8) -> `res` on the stack, CU_MEMORYTYPE_UNIFIED (after K)
 *      H:  host node: prints the sum of res, then zeroes it (after C2)
 *    launched 3 times, then a clone of it 3 times.
 *  B (graph API, no host node): pageable input -> dx (CU_MEMORYTYPE_HOST),
 *    scale dx *= 3, a 2D copy of 2 rows x 64 bytes from dx (pitch 256) into
 *    a pageable buffer at column 16 (pitch 128): its result is verified.
 *  C (stream capture, like simpleCudaGraphs' second half): cuMemcpyAsync
 *    from the page-locked input, memset, vec_add, cuMemcpyAsync into `res`,
 *    cuLaunchHostFunc printing and zeroing it; instantiated and launched 3
 *    times, then a clone 3 times.
 * The host node reads the copy's result and zeroes it before the launch
 * completes: what the recorder reads after the launch is what the host
 * code left (zeros), which no replay reproduces (reported apart by verify).
 * Written for the mock and for a real GPU alike (exact float values). */
#include "drv_common.h"

typedef struct cb_data {
  const char *who;
  float *res;
} cb_data;

static void CUDA_CB host_cb(void *p) {
  cb_data *d = p;
  double s = 0;
  for (int i = 0; i < 8; i++)
    s += d->res[i];
  printf("[%s] host node: sum = %.1f\n", d->who, s);
  memset(d->res, 0, 8 * sizeof(float));
}

static void launch_n(CUgraphExec e, CUstream s, int n) {
  for (int i = 0; i < n; i++)
    CK(cuGraphLaunch(e, s));
  CK(cuStreamSynchronize(s));
}

int main(void) {
  enum { N = 1 << 14, T = 128 };
  CUcontext ctx = drv_setup();
  CUmodule mod;
  CUfunction vec_add, scale;
  CK(cuModuleLoadData(&mod, drv_fatbin));
  CK(cuModuleGetFunction(&vec_add, mod, "vec_add"));
  CK(cuModuleGetFunction(&scale, mod, "scale"));
  CUstream s, s2;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  float *pin = NULL;
  CK(cuMemAllocHost((void **)&pin, N * sizeof(float)));
  for (int i = 0; i < N; i++) pin[i] = (float)(i % 7);
  float *page = malloc(N * sizeof(float)), *out = calloc(2 * 128, 1);
  if (!page || !out) return 1;
  for (int i = 0; i < N; i++) page[i] = (float)(i % 5);
  CUdeviceptr dx, dy;
  CK(cuMemAlloc(&dx, N * sizeof(float)));
  CK(cuMemAlloc(&dy, N * sizeof(float)));
  float res[8] = {0};
  int n = N;
  float three = 3.0f;

  /* ---- A ---- */
  CUgraph ga;
  CK(cuGraphCreate(&ga, 0));
  CUDA_MEMCPY3D cp;
  memset(&cp, 0, sizeof cp);
  cp.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
  cp.srcDevice = (CUdeviceptr)(uintptr_t)pin;
  cp.srcPitch = N * sizeof(float);
  cp.srcHeight = 1;
  cp.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  cp.dstDevice = dx;
  cp.dstPitch = N * sizeof(float);
  cp.dstHeight = 1;
  cp.WidthInBytes = N * sizeof(float);
  cp.Height = 1;
  cp.Depth = 1;
  CUgraphNode c1, m, k, c2, h;
  CK(cuGraphAddMemcpyNode(&c1, ga, NULL, 0, &cp, ctx));
  CUDA_MEMSET_NODE_PARAMS ms;
  memset(&ms, 0, sizeof ms);
  ms.dst = dy;
  ms.elementSize = 4;
  ms.width = N;
  ms.height = 1;
  CK(cuGraphAddMemsetNode(&m, ga, NULL, 0, &ms, ctx));
  void *va[] = {&dx, &dx, &dy, &n};
  CUDA_KERNEL_NODE_PARAMS kp;
  memset(&kp, 0, sizeof kp);
  kp.func = vec_add;
  kp.gridDimX = N / T, kp.gridDimY = 1, kp.gridDimZ = 1;
  kp.blockDimX = T, kp.blockDimY = 1, kp.blockDimZ = 1;
  kp.kernelParams = va;
  CUgraphNode deps[2] = {c1, m};
  CK(cuGraphAddKernelNode(&k, ga, deps, 2, &kp));
  memset(&cp, 0, sizeof cp);
  cp.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
  cp.srcDevice = dy;
  cp.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  cp.dstDevice = (CUdeviceptr)(uintptr_t)res;
  cp.WidthInBytes = sizeof res;
  cp.Height = 1;
  cp.Depth = 1;
  CK(cuGraphAddMemcpyNode(&c2, ga, &k, 1, &cp, ctx));
  cb_data da = {"graph", res};
  CUDA_HOST_NODE_PARAMS hp = {host_cb, &da};
  CK(cuGraphAddHostNode(&h, ga, &c2, 1, &hp));
  CUgraphExec ea, eac;
  CK(cuGraphInstantiate(&ea, ga, 0));
  launch_n(ea, s, 3);
  CUgraph gac;
  CK(cuGraphClone(&gac, ga));
  CK(cuGraphInstantiate(&eac, gac, 0));
  printf("clone of the graph:\n");
  launch_n(eac, s, 3);

  /* ---- B ---- */
  CUgraph gb;
  CK(cuGraphCreate(&gb, 0));
  memset(&cp, 0, sizeof cp);
  cp.srcMemoryType = CU_MEMORYTYPE_HOST;
  cp.srcHost = page;
  cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  cp.dstDevice = dx;
  cp.WidthInBytes = N * sizeof(float);
  cp.Height = 1;
  cp.Depth = 1;
  CUgraphNode c3, k2, c4;
  CK(cuGraphAddMemcpyNode(&c3, gb, NULL, 0, &cp, ctx));
  void *sa[] = {&dx, &three, &n};
  kp.func = scale;
  kp.kernelParams = sa;
  CK(cuGraphAddKernelNode(&k2, gb, &c3, 1, &kp));
  memset(&cp, 0, sizeof cp);
  cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  cp.srcDevice = dx;
  cp.srcPitch = 256;
  cp.srcHeight = 2;
  cp.dstMemoryType = CU_MEMORYTYPE_HOST;
  cp.dstHost = out;
  cp.dstXInBytes = 16;
  cp.dstPitch = 128;
  cp.dstHeight = 2;
  cp.WidthInBytes = 64;
  cp.Height = 2;
  cp.Depth = 1;
  CK(cuGraphAddMemcpyNode(&c4, gb, &k2, 1, &cp, ctx));
  CUgraphExec eb;
  CK(cuGraphInstantiate(&eb, gb, 0));
  launch_n(eb, s, 2);
  drv_print("B out", out, 2 * 128 / sizeof(float));

  /* ---- C: stream capture ---- */
  CUgraph gc, gcc;
  CUgraphExec ec, ecc;
  cb_data dc = {"capture", res};
  CK(cuStreamBeginCapture(s2, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(cuMemcpyAsync(dx, (CUdeviceptr)(uintptr_t)pin, N * sizeof(float), s2));
  CK(cuMemsetD32Async(dy, 0, N, s2));
  CK(cuLaunchKernel(vec_add, N / T, 1, 1, T, 1, 1, 0, s2, va, NULL));
  CK(cuMemcpyAsync((CUdeviceptr)(uintptr_t)res, dy, sizeof res, s2));
  CK(cuLaunchHostFunc(s2, host_cb, &dc));
  CK(cuStreamEndCapture(s2, &gc));
  size_t nn = 0;
  CK(cuGraphGetNodes(gc, NULL, &nn));
  printf("captured graph: %zu nodes\n", nn);
  CK(cuGraphInstantiate(&ec, gc, 0));
  launch_n(ec, s, 3);
  CK(cuGraphClone(&gcc, gc));
  CK(cuGraphInstantiate(&ecc, gcc, 0));
  printf("clone of the captured graph:\n");
  launch_n(ecc, s, 3);

  CK(cuGraphExecDestroy(ea));
  CK(cuGraphExecDestroy(eac));
  CK(cuGraphExecDestroy(eb));
  CK(cuGraphExecDestroy(ec));
  CK(cuGraphExecDestroy(ecc));
  CK(cuGraphDestroy(ga));
  CK(cuGraphDestroy(gac));
  CK(cuGraphDestroy(gb));
  CK(cuGraphDestroy(gc));
  CK(cuGraphDestroy(gcc));
  CK(cuStreamDestroy(s));
  CK(cuStreamDestroy(s2));
  CK(cuMemFree(dx));
  CK(cuMemFree(dy));
  CK(cuMemFreeHost(pin));
  CK(cuModuleUnload(mod));
  CK(cuCtxDestroy(ctx));
  free(page);
  free(out);
  printf("drv_graph_host ok\n");
  return 0;
}
