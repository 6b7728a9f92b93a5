/* drv_train: a small "training loop" on the driver API with NVTX ranges, for
 * the range tools (record --snapshot=range, trim, extract, export, diff).
 * Each step uploads a new batch, updates the weights with three kernels and
 * reads part of them back; NVTX: a "step" push/pop range per step, a
 * "forward" range in the domain "train", a "batch" mark and an "io"
 * start/end range around the readback; step 3 is also a profiler range
 * (cuProfilerStart/Stop). All values are small binary fractions, so the
 * results are exact on the mock and on a GPU. Usage: drv_train [STEPS]
 * (default 8). DRV_TRAIN_SCALE=F replaces the 0.5 the scale kernel gets (a
 * changed kernel argument, for `cucap diff`). */
#include <cudaProfiler.h>
#include <nvtx3/nvToolsExt.h>

#include "drv_common.h"

int main(int argc, char **argv) {
  enum { N = 1 << 14, READ = 256 };
  int steps = argc > 1 ? atoi(argv[1]) : 8;
  if (steps < 1 || steps > 1000)
    steps = 8;
  CUcontext ctx = drv_setup();
  CUmodule mod;
  CUfunction vec_add, scale, saxpy;
  CK(cuModuleLoadData(&mod, drv_fatbin));
  CK(cuModuleGetFunction(&vec_add, mod, "vec_add"));
  CK(cuModuleGetFunction(&scale, mod, "scale"));
  CK(cuModuleGetFunction(&saxpy, mod, "saxpy"));
  nvtxNameOsThreadA(0, "trainer");
  nvtxDomainHandle_t dom = nvtxDomainCreateA("train");

  float *host = malloc(N * sizeof *host);
  if (!host)
    return 1;
  CUdeviceptr w, x, g;
  CK(cuMemAlloc(&w, N * sizeof(float)));
  CK(cuMemAlloc(&x, N * sizeof(float)));
  CK(cuMemAlloc(&g, N * sizeof(float)));
  for (int i = 0; i < N; i++)
    host[i] = (float)(i % 9);
  CK(cuMemcpyHtoD(w, host, N * sizeof(float)));
  int n = N;
  float half = 0.5f, minus_one = -1.0f;
  const char *sc = getenv("DRV_TRAIN_SCALE");
  if (sc && *sc)
    half = (float)atof(sc);
  for (int step = 0; step < steps; step++) {
    nvtxRangePushA("step");
    if (step == 3)
      CK(cuProfilerStart());
    for (int i = 0; i < N; i++) /* a new batch every step */
      host[i] = (float)((i * 7 + step * 13) % 17);
    CK(cuMemcpyHtoD(x, host, N * sizeof(float)));
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = 0xff3366cc;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "forward";
    nvtxDomainRangePushEx(dom, &a);
    void *add_args[] = {&w, &x, &g, &n};
    CK(cuLaunchKernel(vec_add, N / 256, 1, 1, 256, 1, 1, 0, NULL, add_args, NULL));
    void *scale_args[] = {&g, &half, &n};
    CK(cuLaunchKernel(scale, N / 256, 1, 1, 256, 1, 1, 0, NULL, scale_args, NULL));
    void *saxpy_args[] = {&minus_one, &g, &w, &n}; /* w = w - (w + x) / 2 */
    CK(cuLaunchKernel(saxpy, N / 256, 1, 1, 256, 1, 1, 0, NULL, saxpy_args, NULL));
    nvtxDomainRangePop(dom);
    nvtxMarkA("batch");
    nvtxRangeId_t io = nvtxRangeStartA("io");
    CK(cuMemcpyDtoH(host, w, READ * sizeof(float)));
    nvtxRangeEnd(io);
    printf("step %d: sum=%.6f hash=%016llx\n", step, drv_sum(host, READ),
           (unsigned long long)drv_hash(host, READ * sizeof(float)));
    if (step == 3)
      CK(cuProfilerStop());
    nvtxRangePop();
  }
  CK(cuMemcpyDtoH(host, w, N * sizeof(float)));
  drv_print("weights", host, N);
  nvtxDomainDestroy(dom);
  CK(cuMemFree(w));
  CK(cuMemFree(x));
  CK(cuMemFree(g));
  CK(cuModuleUnload(mod));
  CK(cuCtxDestroy(ctx));
  free(host);
  printf("drv_train ok\n");
  return 0;
}
