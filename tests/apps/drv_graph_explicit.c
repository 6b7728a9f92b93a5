/* drv_graph_explicit: builds a CUDA graph with the explicit graph API (no
 * stream capture), instantiates it, launches it 5 times, checks the result.
 *
 *   M: memset y = 1.0f
 *   K1: saxpy y = 2x + y      (after M)      K2: scale w *= 2   (after M, and
 *                                            after K1 by a programmatic edge:
 *                                            programmatic dependent launch,
 *                                            K2 reads nothing K1 writes)
 *   E: empty node joining K1, K2
 *   K3: vec_add z = y + w     (edge E -> K3 added by cuGraphAddDependencies;
 *                              arguments passed as an `extra` buffer)
 *   C: memcpy DtoD out = z    (after K3)
 *
 * After 5 launches: w = 32 * w0, out = z = 2x + 1 + 32 * w0 (exact floats).
 * Written for the mock and for a real GPU alike: every CUresult checked,
 * exact parameter-block size for the `extra` buffer. */
#include "drv_common.h"

static const char *type_name(CUgraphNodeType t) {
  switch (t) {
  case CU_GRAPH_NODE_TYPE_KERNEL: return "kernel";
  case CU_GRAPH_NODE_TYPE_MEMCPY: return "memcpy";
  case CU_GRAPH_NODE_TYPE_MEMSET: return "memset";
  case CU_GRAPH_NODE_TYPE_EMPTY: return "empty";
  default: return "other";
  }
}

int main(void) {
  enum { N = 1 << 12, T = 128 };
  CUcontext ctx = drv_setup();
  CUmodule mod;
  CUfunction saxpy, scale, vec_add;
  CK(cuModuleLoadData(&mod, drv_fatbin));
  CK(cuModuleGetFunction(&saxpy, mod, "saxpy"));
  CK(cuModuleGetFunction(&scale, mod, "scale"));
  CK(cuModuleGetFunction(&vec_add, mod, "vec_add"));
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr dx, dy, dw, dz, dout;
  CK(cuMemAlloc(&dx, N * sizeof(float)));
  CK(cuMemAlloc(&dy, N * sizeof(float)));
  CK(cuMemAlloc(&dw, N * sizeof(float)));
  CK(cuMemAlloc(&dz, N * sizeof(float)));
  CK(cuMemAlloc(&dout, N * sizeof(float)));
  float *h = malloc(N * sizeof(float));
  if (!h) return 1;
  for (int i = 0; i < N; i++) h[i] = (float)(i % 10);
  CK(cuMemcpyHtoD(dx, h, N * sizeof(float)));
  for (int i = 0; i < N; i++) h[i] = (float)(i % 4);
  CK(cuMemcpyHtoD(dw, h, N * sizeof(float)));
  CK(cuMemsetD32(dout, 0, N));

  CUgraph g;
  CK(cuGraphCreate(&g, 0));
  /* M */
  CUDA_MEMSET_NODE_PARAMS ms;
  memset(&ms, 0, sizeof ms);
  ms.dst = dy;
  ms.value = 0x3f800000u; /* 1.0f */
  ms.elementSize = 4;
  ms.width = N;
  ms.height = 1;
  CUgraphNode m, k1, k2, e, k3, c;
  CK(cuGraphAddMemsetNode(&m, g, NULL, 0, &ms, ctx));
  /* K1, K2 (kernelParams) */
  int n = N;
  float a = 2.0f, two = 2.0f;
  void *sa[] = {&a, &dx, &dy, &n};
  void *sc[] = {&dw, &two, &n};
  CUDA_KERNEL_NODE_PARAMS kp;
  memset(&kp, 0, sizeof kp);
  kp.func = saxpy;
  kp.gridDimX = N / T, kp.gridDimY = 1, kp.gridDimZ = 1;
  kp.blockDimX = T, kp.blockDimY = 1, kp.blockDimZ = 1;
  kp.kernelParams = sa;
  CK(cuGraphAddKernelNode(&k1, g, &m, 1, &kp));
  kp.func = scale;
  kp.kernelParams = sc;
  CK(cuGraphAddKernelNode(&k2, g, &m, 1, &kp));
  {
    /* the edge stream capture makes of a kernel launched with programmatic
     * stream serialization; a driver or GPU without it gets a plain edge
     * (the same order, the same results) */
    CUgraphEdgeData pe;
    memset(&pe, 0, sizeof pe);
    pe.from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
    pe.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
    CUresult r = cuGraphAddDependencies(g, &k1, &k2, &pe, 1);
    if (r != CUDA_SUCCESS) {
      fprintf(stderr, "programmatic edge refused (%d): a plain one instead\n", (int)r);
      CK(cuGraphAddDependencies(g, &k1, &k2, NULL, 1));
    }
  }
  /* E */
  CUgraphNode par[2] = {k1, k2};
  CK(cuGraphAddEmptyNode(&e, g, par, 2));
  /* K3: vec_add(const float *a, const float *b, float *c, int n), packed at
   * offsets 0, 8, 16, 24: 28 bytes, the exact size of its parameter block */
  unsigned char buf[28];
  memcpy(buf + 0, &dy, 8);
  memcpy(buf + 8, &dw, 8);
  memcpy(buf + 16, &dz, 8);
  memcpy(buf + 24, &n, 4);
  size_t bufsize = sizeof buf;
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &bufsize,
                   CU_LAUNCH_PARAM_END};
  kp.func = vec_add;
  kp.kernelParams = NULL;
  kp.extra = extra;
  CK(cuGraphAddKernelNode(&k3, g, NULL, 0, &kp));
  CK(cuGraphAddDependencies(g, &e, &k3, NULL, 1));
  /* C */
  CUDA_MEMCPY3D cp;
  memset(&cp, 0, sizeof cp);
  cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  cp.srcDevice = dz;
  cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  cp.dstDevice = dout;
  cp.WidthInBytes = N * sizeof(float);
  cp.Height = 1;
  cp.Depth = 1;
  CK(cuGraphAddMemcpyNode(&c, g, &k3, 1, &cp, ctx));

  /* the topology as the driver reports it */
  CUgraphNode all[6];
  size_t nn = 6;
  CK(cuGraphGetNodes(g, all, &nn));
  printf("graph nodes: %zu\n", nn);
  CUgraphNode mine[6] = {m, k1, k2, e, k3, c};
  const char *names[6] = {"M", "K1", "K2", "E", "K3", "C"};
  for (int i = 0; i < 6; i++) {
    CUgraphNodeType t;
    /* with edge data: a node with a programmatic edge refuses a lossy query */
    CUgraphNode dd[8];
    CUgraphEdgeData ed[8];
    size_t nd = 8;
    CK(cuGraphNodeGetType(mine[i], &t));
    CK(cuGraphNodeGetDependencies(mine[i], dd, ed, &nd));
    printf("node %s: %s, %zu dependencies\n", names[i], type_name(t), nd);
  }

  CUgraphExec ge;
  CK(cuGraphInstantiate(&ge, g, 0));
  for (int it = 0; it < 5; it++) CK(cuGraphLaunch(ge, s));
  CK(cuStreamSynchronize(s));
  CK(cuMemcpyDtoH(h, dout, N * sizeof(float)));
  drv_print("out", h, N);
  printf("out[0]=%.1f out[7]=%.1f\n", h[0], h[7]);
  CK(cuMemcpyDtoH(h, dw, N * sizeof(float)));
  drv_print("w", h, N);
  CK(cuMemcpyDtoH(h, dy, N * sizeof(float)));
  drv_print("y", h, N);

  CK(cuGraphExecDestroy(ge));
  CK(cuGraphDestroy(g));
  CK(cuStreamDestroy(s));
  CK(cuMemFree(dx));
  CK(cuMemFree(dy));
  CK(cuMemFree(dw));
  CK(cuMemFree(dz));
  CK(cuMemFree(dout));
  CK(cuModuleUnload(mod));
  CK(cuCtxDestroy(ctx));
  free(h);
  printf("drv_graph_explicit ok\n");
  return 0;
}
