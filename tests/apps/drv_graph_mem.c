/* drv_graph_mem: graph memory nodes, exec updates, clone, child/event/host
 * nodes, each step launched and its result printed.
 *
 *  M: A = alloc node (N floats) -> memset A = 1.0f -> scale(A, 3)
 *     -> memcpy out = A -> free node (A)
 *  1. M instantiated with params (upload flag) + cuGraphUpload, launched
 *  U: memset out = 1.0f -> scale(out, 3) -> memcpy out3 = out (no memory
 *     nodes: the driver limits updates and clones of graphs with them)
 *  2. cuGraphExecUpdate from an identical graph that scales by 5
 *  3. cuGraphExecKernelNodeSetParams (scale by 7), then
 *     cuGraphExecMemsetNodeSetParams (2.0f)
 *  4. cuGraphNodeSetEnabled(scale, 0): out = memset value only; enabled again
 *  5. cuGraphClone of U, instantiated and launched
 *  6. P: child graph node (fill out2 = 4, scale out2 by 2) -> event record
 *     node; cuEventSynchronize after the launch
 *  7. H: host node (sets a flag in this process) -> scale(out2, 3)
 *  8. stream capture with cuMemAllocAsync / cuMemFreeAsync inside it
 *  9. a copy node from page-locked host memory whose contents change
 *     between launches (the graph reads them at each launch)
 * Kernels from drv_kernels.cu (scale, fill). Exact small numbers: identical on
 * the mock and on a GPU (the host node's own effect is printed separately:
 * a replay runs an empty node in its place). */
#include "drv_common.h"

enum { N = 2048, T = 128 };
static CUfunction f_scale, f_fill;
static CUdeviceptr dout, dout2, dout3;
static float hx[N];
static int host_ran;

static void show(const char *label, CUdeviceptr d) {
  CK(cuMemcpyDtoH(hx, d, sizeof hx));
  drv_print(label, hx, N);
}

static void CUDA_CB host_fn(void *user) { *(int *)user += 1; }

static CUDA_KERNEL_NODE_PARAMS kparams(CUfunction f, void **args) {
  CUDA_KERNEL_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  p.func = f;
  p.gridDimX = N / T, p.gridDimY = 1, p.gridDimZ = 1;
  p.blockDimX = T, p.blockDimY = 1, p.blockDimZ = 1;
  p.kernelParams = args;
  return p;
}

/* G with scale factor *factor; node handles out */
static CUgraph build(CUcontext ctx, float *factor, int *n, CUdeviceptr *pa, CUgraphNode nodes[5]) {
  CUgraph g;
  CK(cuGraphCreate(&g, 0));
  CUDA_MEM_ALLOC_NODE_PARAMS ap;
  memset(&ap, 0, sizeof ap);
  ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  ap.poolProps.location.id = 0;
  ap.bytesize = N * sizeof(float);
  CK(cuGraphAddMemAllocNode(&nodes[0], g, NULL, 0, &ap));
  *pa = ap.dptr;
  CUDA_MEMSET_NODE_PARAMS ms;
  memset(&ms, 0, sizeof ms);
  ms.dst = ap.dptr;
  ms.value = 0x3f800000u; /* 1.0f */
  ms.elementSize = 4;
  ms.width = N;
  ms.height = 1;
  CK(cuGraphAddMemsetNode(&nodes[1], g, &nodes[0], 1, &ms, ctx));
  void *sa[] = {pa, factor, n};
  CUDA_KERNEL_NODE_PARAMS kp = kparams(f_scale, sa);
  CK(cuGraphAddKernelNode(&nodes[2], g, &nodes[1], 1, &kp));
  CUDA_MEMCPY3D cp;
  memset(&cp, 0, sizeof cp);
  cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  cp.srcDevice = ap.dptr;
  cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  cp.dstDevice = dout;
  cp.WidthInBytes = N * sizeof(float);
  cp.Height = 1;
  cp.Depth = 1;
  CK(cuGraphAddMemcpyNode(&nodes[3], g, &nodes[2], 1, &cp, ctx));
  CK(cuGraphAddMemFreeNode(&nodes[4], g, &nodes[3], 1, ap.dptr));
  return g;
}

/* U with scale factor *factor; node handles out (memset, scale, copy) */
static CUgraph build_upd(CUcontext ctx, float *factor, int *n, CUgraphNode nodes[3]) {
  CUgraph g;
  CK(cuGraphCreate(&g, 0));
  CUDA_MEMSET_NODE_PARAMS ms;
  memset(&ms, 0, sizeof ms);
  ms.dst = dout;
  ms.value = 0x3f800000u; /* 1.0f */
  ms.elementSize = 4;
  ms.width = N;
  ms.height = 1;
  CK(cuGraphAddMemsetNode(&nodes[0], g, NULL, 0, &ms, ctx));
  void *sa[] = {&dout, factor, n};
  CUDA_KERNEL_NODE_PARAMS kp = kparams(f_scale, sa);
  CK(cuGraphAddKernelNode(&nodes[1], g, &nodes[0], 1, &kp));
  CUDA_MEMCPY3D cp;
  memset(&cp, 0, sizeof cp);
  cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  cp.srcDevice = dout;
  cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  cp.dstDevice = dout3;
  cp.WidthInBytes = N * sizeof(float);
  cp.Height = 1;
  cp.Depth = 1;
  CK(cuGraphAddMemcpyNode(&nodes[2], g, &nodes[1], 1, &cp, ctx));
  return g;
}

static void run3(CUgraphExec x, CUstream s, const char *label) {
  CK(cuMemsetD32(dout3, 0, N));
  CK(cuGraphLaunch(x, s));
  CK(cuStreamSynchronize(s));
  show(label, dout3);
}

static void run(CUgraphExec x, CUstream s, const char *label) {
  CK(cuMemsetD32(dout, 0, N));
  CK(cuGraphLaunch(x, s));
  CK(cuStreamSynchronize(s));
  show(label, dout);
}

int main(void) {
  CUcontext ctx = drv_setup();
  CUmodule mod;
  CK(cuModuleLoadData(&mod, drv_fatbin));
  CK(cuModuleGetFunction(&f_scale, mod, "scale"));
  CK(cuModuleGetFunction(&f_fill, mod, "fill"));
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuMemAlloc(&dout, N * sizeof(float)));
  CK(cuMemAlloc(&dout2, N * sizeof(float)));
  CK(cuMemAlloc(&dout3, N * sizeof(float)));
  int n = N;

  /* 1 */
  float f3 = 3.0f;
  CUdeviceptr a;
  CUgraphNode nodes[5];
  CUgraph g = build(ctx, &f3, &n, &a, nodes);
  CUgraphExec x;
  CUDA_GRAPH_INSTANTIATE_PARAMS ip;
  memset(&ip, 0, sizeof ip);
  ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
  ip.hUploadStream = s;
  CK(cuGraphInstantiateWithParams(&x, g, &ip));
  CK(cuGraphUpload(x, s));
  run(x, s, "alloc-memset-scale3-copy-free");
  CK(cuGraphExecDestroy(x));
  CK(cuGraphDestroy(g));
  /* 2 */
  CUgraphNode un[3], un2[3];
  CUgraph u = build_upd(ctx, &f3, &n, un);
  CK(cuGraphInstantiate(&x, u, 0));
  run3(x, s, "memset-scale3-copy");
  float f5 = 5.0f;
  CUgraph u2 = build_upd(ctx, &f5, &n, un2);
  CUgraphExecUpdateResultInfo info;
  CK(cuGraphExecUpdate(x, u2, &info));
  run3(x, s, "exec update: scale5");
  /* 3 */
  float f7 = 7.0f;
  void *sa[] = {&dout, &f7, &n};
  CUDA_KERNEL_NODE_PARAMS kp = kparams(f_scale, sa);
  CK(cuGraphExecKernelNodeSetParams(x, un[1], &kp));
  run3(x, s, "set params: scale7");
  CUDA_MEMSET_NODE_PARAMS ms;
  memset(&ms, 0, sizeof ms);
  ms.dst = dout;
  ms.value = 0x40000000u; /* 2.0f */
  ms.elementSize = 4;
  ms.width = N;
  ms.height = 1;
  CK(cuGraphExecMemsetNodeSetParams(x, un[0], &ms, ctx));
  run3(x, s, "set params: memset 2");
  /* 4 */
  CK(cuGraphNodeSetEnabled(x, un[1], 0));
  run3(x, s, "scale disabled");
  CK(cuGraphNodeSetEnabled(x, un[1], 1));
  run3(x, s, "scale enabled");
  CK(cuGraphExecDestroy(x));
  /* 5 */
  CUgraph c;
  CK(cuGraphClone(&c, u));
  CK(cuGraphInstantiate(&x, c, 0));
  run3(x, s, "clone");
  CK(cuGraphExecDestroy(x));
  CK(cuGraphDestroy(c));
  CK(cuGraphDestroy(u2));
  CK(cuGraphDestroy(u));
  /* 6 */
  {
    CUgraph child, p;
    CK(cuGraphCreate(&child, 0));
    float four = 4.0f, two = 2.0f;
    void *fa[] = {&dout2, &four, &n};
    void *ka[] = {&dout2, &two, &n};
    CUDA_KERNEL_NODE_PARAMS k1 = kparams(f_fill, fa), k2 = kparams(f_scale, ka);
    CUgraphNode c1, c2, cn, en;
    CK(cuGraphAddKernelNode(&c1, child, NULL, 0, &k1));
    CK(cuGraphAddKernelNode(&c2, child, &c1, 1, &k2));
    CK(cuGraphCreate(&p, 0));
    CK(cuGraphAddChildGraphNode(&cn, p, NULL, 0, child));
    CUevent ev;
    CK(cuEventCreate(&ev, CU_EVENT_DEFAULT));
    CK(cuGraphAddEventRecordNode(&en, p, &cn, 1, ev));
    CK(cuGraphInstantiate(&x, p, 0));
    CK(cuGraphLaunch(x, s));
    CK(cuEventSynchronize(ev));
    show("child graph + event record", dout2);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(p));
    CK(cuGraphDestroy(child));
    CK(cuEventDestroy(ev));
  }
  /* 7 */
  {
    CUgraph h;
    CK(cuGraphCreate(&h, 0));
    CUDA_HOST_NODE_PARAMS hp = {host_fn, &host_ran};
    CUgraphNode hn, kn;
    CK(cuGraphAddHostNode(&hn, h, NULL, 0, &hp));
    float three = 3.0f;
    void *ka[] = {&dout2, &three, &n};
    CUDA_KERNEL_NODE_PARAMS k = kparams(f_scale, ka);
    CK(cuGraphAddKernelNode(&kn, h, &hn, 1, &k));
    CK(cuGraphInstantiate(&x, h, 0));
    CK(cuGraphLaunch(x, s));
    CK(cuStreamSynchronize(s));
    show("host node -> scale3", dout2);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(h));
  }
  /* 8 */
  {
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUdeviceptr t;
    CK(cuMemAllocAsync(&t, N * sizeof(float), s));
    CK(cuMemsetD32Async(t, 0x40400000u, N, s)); /* 3.0f */
    float two = 2.0f;
    void *ka[] = {&t, &two, &n};
    CK(cuLaunchKernel(f_scale, N / T, 1, 1, T, 1, 1, 0, s, ka, NULL));
    CK(cuMemcpyDtoDAsync(dout, t, N * sizeof(float), s));
    CK(cuMemFreeAsync(t, s));
    CUgraph cg;
    CK(cuStreamEndCapture(s, &cg));
    CK(cuGraphInstantiate(&x, cg, 0));
    run(x, s, "captured alloc/free");
    run(x, s, "captured alloc/free again");
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(cg));
  }
  /* 9 */
  {
    float *hp = NULL;
    CK(cuMemAllocHost((void **)&hp, N * sizeof(float)));
    CUgraph hg;
    CK(cuGraphCreate(&hg, 0));
    CUDA_MEMCPY3D cp;
    memset(&cp, 0, sizeof cp);
    cp.srcMemoryType = CU_MEMORYTYPE_HOST;
    cp.srcHost = hp;
    cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    cp.dstDevice = dout;
    cp.WidthInBytes = N * sizeof(float);
    cp.Height = 1;
    cp.Depth = 1;
    CUgraphNode cn, kn;
    CK(cuGraphAddMemcpyNode(&cn, hg, NULL, 0, &cp, ctx));
    float two = 2.0f;
    void *ka[] = {&dout, &two, &n};
    CUDA_KERNEL_NODE_PARAMS k = kparams(f_scale, ka);
    CK(cuGraphAddKernelNode(&kn, hg, &cn, 1, &k));
    CK(cuGraphInstantiate(&x, hg, 0));
    for (int round = 1; round <= 3; round++) {
      for (int i = 0; i < N; i++) hp[i] = (float)(round * (i % 5));
      CK(cuGraphLaunch(x, s));
      CK(cuStreamSynchronize(s));
      printf("host source round %d: ", round);
      show("x2", dout);
    }
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(hg));
    CK(cuMemFreeHost(hp));
  }
  printf("host node ran %d time(s)\n", host_ran);
  CK(cuMemFree(dout));
  CK(cuMemFree(dout2));
  CK(cuMemFree(dout3));
  CK(cuStreamDestroy(s));
  CK(cuModuleUnload(mod));
  CK(cuCtxDestroy(ctx));
  printf("drv_graph_mem ok\n");
  return 0;
}
