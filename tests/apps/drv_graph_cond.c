/* drv_graph_cond: conditional graph nodes (CUDA 12.4+), each graph launched
 * and its result printed.
 *
 *  1. IF:     [cond_set(h, flag)] -> IF(h) { scale(x, 2) }, launched with
 *             flag 1, then 0 (body built with cuGraphAddNode).
 *  2. WHILE:  WHILE(h, default 1, assign-default) { cond_loop(counter, x, h) }
 *             with counter 5: x grows by 5 (cuGraphAddNode for the body).
 *  3. SWITCH: [cond_set(h, sel)] -> SWITCH(h, 3) { fill(x, 10), fill(x, 20),
 *             fill(x, 30) }, launched with sel 0, 2 and 7 (no body).
 *  4. WHILE whose body is populated by stream capture into it
 *             (cuStreamBeginCaptureToGraph).
 *  5. A conditional node added to a graph while it is being captured
 *             (cuStreamGetCaptureInfo + cuGraphAddNode +
 *             cuStreamUpdateCaptureDependencies), its body captured too.
 * Kernels from drv_kernels.cu (scale, fill) and drv_kernels_ext.cu
 * (cond_set, cond_loop). Exact small numbers: identical on the mock and on a
 * GPU. */
#include "drv_common.h"

extern const unsigned char drv_ext_fatbin[];

enum { N = 1024, T = 128 };
static CUfunction f_scale, f_fill, f_cond_set, f_cond_loop;
static CUdeviceptr dx, dflag, dcount;
static float hx[N];

static void show(const char *label) {
  CK(cuMemcpyDtoH(hx, dx, sizeof hx));
  drv_print(label, hx, N);
}

static void kernel_node(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t nd, CUfunction f,
                        void **args) {
  CUgraphNodeParams p;
  memset(&p, 0, sizeof p);
  p.type = CU_GRAPH_NODE_TYPE_KERNEL;
  p.kernel.func = f;
  p.kernel.gridDimX = N / T, p.kernel.gridDimY = 1, p.kernel.gridDimZ = 1;
  p.kernel.blockDimX = T, p.kernel.blockDimY = 1, p.kernel.blockDimZ = 1;
  p.kernel.kernelParams = args;
  CK(cuGraphAddNode(out, g, deps, NULL, nd, &p));
}

static CUgraph *cond_node(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t nd,
                          CUgraphConditionalHandle h, CUgraphConditionalNodeType type, unsigned size,
                          CUcontext ctx) {
  CUgraphNodeParams p;
  memset(&p, 0, sizeof p);
  p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  p.conditional.handle = h;
  p.conditional.type = type;
  p.conditional.size = size;
  p.conditional.ctx = ctx;
  CK(cuGraphAddNode(out, g, deps, NULL, nd, &p));
  return p.conditional.phGraph_out;
}

static void launch(CUgraph g, CUstream s) {
  CUgraphExec x;
  CK(cuGraphInstantiate(&x, g, 0));
  CK(cuGraphLaunch(x, s));
  CK(cuStreamSynchronize(s));
  CK(cuGraphExecDestroy(x));
}

int main(void) {
  CUcontext ctx = drv_setup();
  CUmodule mod, ext;
  CK(cuModuleLoadData(&mod, drv_fatbin));
  CK(cuModuleLoadData(&ext, drv_ext_fatbin));
  CK(cuModuleGetFunction(&f_scale, mod, "scale"));
  CK(cuModuleGetFunction(&f_fill, mod, "fill"));
  CK(cuModuleGetFunction(&f_cond_set, ext, "cond_set"));
  CK(cuModuleGetFunction(&f_cond_loop, ext, "cond_loop"));
  /* s does not wait for the legacy NULL stream: every memset before a
   * launch on s goes to s itself (a cuMemsetD32 on the NULL stream would
   * race with the graph; it lost under record once, H100) */
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuMemAlloc(&dx, N * sizeof(float)));
  CK(cuMemAlloc(&dflag, sizeof(int)));
  CK(cuMemAlloc(&dcount, sizeof(int)));
  for (int i = 0; i < N; i++) hx[i] = (float)(i % 7);
  CK(cuMemcpyHtoD(dx, hx, sizeof hx));
  int n = N;

  /* 1. IF */
  {
    CUgraph g;
    CUgraphConditionalHandle h;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphConditionalHandleCreate(&h, g, ctx, 0, 0));
    CUgraphNode set, c, k;
    void *sa[] = {&h, &dflag};
    kernel_node(&set, g, NULL, 0, f_cond_set, sa);
    CUgraph *body = cond_node(&c, g, &set, 1, h, CU_GRAPH_COND_TYPE_IF, 1, ctx);
    float two = 2.0f;
    void *ka[] = {&dx, &two, &n};
    kernel_node(&k, body[0], NULL, 0, f_scale, ka);
    CUgraphExec x;
    CK(cuGraphInstantiate(&x, g, 0));
    for (int flag = 1; flag >= 0; flag--) {
      CK(cuMemsetD32Async(dflag, (unsigned)flag, 1, s));
      CK(cuGraphLaunch(x, s));
      CK(cuStreamSynchronize(s));
      printf("if flag=%d: ", flag);
      show("x");
    }
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
  }
  /* 2. WHILE, body by cuGraphAddNode */
  {
    CUgraph g;
    CUgraphConditionalHandle h;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphConditionalHandleCreate(&h, g, ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
    CUgraphNode c, k;
    CUgraph *body = cond_node(&c, g, NULL, 0, h, CU_GRAPH_COND_TYPE_WHILE, 1, ctx);
    void *la[] = {&dcount, &dx, &h, &n};
    kernel_node(&k, body[0], NULL, 0, f_cond_loop, la);
    CK(cuMemsetD32Async(dcount, 5, 1, s));
    launch(g, s);
    show("while 5");
    CK(cuGraphDestroy(g));
  }
  /* 3. SWITCH */
  {
    CUgraph g;
    CUgraphConditionalHandle h;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphConditionalHandleCreate(&h, g, ctx, 0, 0));
    CUgraphNode set, c, k[3];
    void *sa[] = {&h, &dflag};
    kernel_node(&set, g, NULL, 0, f_cond_set, sa);
    CUgraph *body = cond_node(&c, g, &set, 1, h, CU_GRAPH_COND_TYPE_SWITCH, 3, ctx);
    float v[3] = {10.0f, 20.0f, 30.0f};
    for (int i = 0; i < 3; i++) {
      void *fa[] = {&dx, &v[i], &n};
      kernel_node(&k[i], body[i], NULL, 0, f_fill, fa); /* parameters are copied */
    }
    CUgraphExec x;
    CK(cuGraphInstantiate(&x, g, 0));
    int sels[3] = {0, 2, 7};
    for (int i = 0; i < 3; i++) {
      CK(cuMemsetD32Async(dx, 0, N, s));
      CK(cuMemsetD32Async(dflag, (unsigned)sels[i], 1, s));
      CK(cuGraphLaunch(x, s));
      CK(cuStreamSynchronize(s));
      printf("switch %d: ", sels[i]);
      show("x");
    }
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
  }
  /* 4. WHILE, body captured into it */
  {
    CUgraph g;
    CUgraphConditionalHandle h;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphConditionalHandleCreate(&h, g, ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
    CUgraphNode c;
    CUgraph *body = cond_node(&c, g, NULL, 0, h, CU_GRAPH_COND_TYPE_WHILE, 1, ctx);
    CK(cuStreamBeginCaptureToGraph(s, body[0], NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED));
    void *la[] = {&dcount, &dx, &h, &n};
    CK(cuLaunchKernel(f_cond_loop, N / T, 1, 1, T, 1, 1, 0, s, la, NULL));
    CUgraph same;
    CK(cuStreamEndCapture(s, &same));
    CK(cuMemsetD32Async(dcount, 3, 1, s));
    launch(g, s);
    show("while 3 (captured body)");
    CK(cuGraphDestroy(g));
  }
  /* 5. a conditional node added during a stream capture */
  {
    CUgraph g = NULL, bodyg;
    CUgraphConditionalHandle h;
    CUstreamCaptureStatus st;
    const CUgraphNode *deps = NULL;
    size_t nd = 0;
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuStreamGetCaptureInfo(s, &st, NULL, &g, NULL, NULL, NULL));
    CK(cuGraphConditionalHandleCreate(&h, g, ctx, 0, 0));
    void *sa[] = {&h, &dflag};
    CK(cuLaunchKernel(f_cond_set, 1, 1, 1, 1, 1, 1, 0, s, sa, NULL));
    CK(cuStreamGetCaptureInfo(s, &st, NULL, &g, &deps, NULL, &nd));
    CUgraphNode c;
    CUgraph *body = cond_node(&c, g, deps, nd, h, CU_GRAPH_COND_TYPE_IF, 1, ctx);
    bodyg = body[0];
    CK(cuStreamUpdateCaptureDependencies(s, &c, NULL, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES));
    float three = 3.0f;
    void *ka[] = {&dx, &three, &n};
    CK(cuLaunchKernel(f_scale, N / T, 1, 1, T, 1, 1, 0, s, ka, NULL));
    CUgraph cg;
    CK(cuStreamEndCapture(s, &cg));
    CUstream s2;
    CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CK(cuStreamBeginCaptureToGraph(s2, bodyg, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED));
    float half = 0.5f;
    void *ha[] = {&dx, &half, &n};
    CK(cuLaunchKernel(f_scale, N / T, 1, 1, T, 1, 1, 0, s2, ha, NULL));
    CUgraph same;
    CK(cuStreamEndCapture(s2, &same));
    CK(cuStreamDestroy(s2));
    CUgraphExec x;
    CK(cuGraphInstantiate(&x, cg, 0));
    for (int flag = 0; flag <= 1; flag++) {
      CK(cuMemsetD32Async(dflag, (unsigned)flag, 1, s));
      CK(cuGraphLaunch(x, s));
      CK(cuStreamSynchronize(s));
      printf("captured if flag=%d: ", flag);
      show("x");
    }
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(cg));
  }
  CK(cuMemFree(dx));
  CK(cuMemFree(dflag));
  CK(cuMemFree(dcount));
  CK(cuStreamDestroy(s));
  CK(cuModuleUnload(ext));
  CK(cuModuleUnload(mod));
  CK(cuCtxDestroy(ctx));
  printf("drv_graph_cond ok\n");
  return 0;
}
