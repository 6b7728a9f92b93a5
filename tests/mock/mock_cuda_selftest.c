/* CTest mock.selftest: checks the mock libcuda.so.1 itself: VMM placement at
 * a fixed address, cuGetProcAddress variants, pointer attributes, module
 * globals, corrupt images, error names, function attributes and launch
 * attributes, CUDA arrays and texture/surface objects. Prints "N passed,
 * M failed". */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static int passed, failed;
#define EXPECT(cond)                                                  \
  do {                                                                \
    if (cond) passed++;                                               \
    else { failed++; fprintf(stderr, "%s:%d: FAILED %s\n", __FILE__, __LINE__, #cond); } \
  } while (0)

int main(void) {
  CUdevice dev;
  CUcontext ctx;
  EXPECT(cuDeviceGet(&dev, 0) == CUDA_ERROR_NOT_INITIALIZED);
  EXPECT(cuInit(0) == CUDA_SUCCESS);
  EXPECT(cuDeviceGet(&dev, 0) == CUDA_SUCCESS);
  CUdeviceptr p0;
  EXPECT(cuMemAlloc(&p0, 16) == CUDA_ERROR_INVALID_CONTEXT);
  EXPECT(cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS);
  EXPECT(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
  char name[64];
  EXPECT(cuDeviceGetName(name, sizeof name, dev) == CUDA_SUCCESS && strcmp(name, "cucap mock GPU") == 0);
  int major = 0;
  EXPECT(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) == CUDA_SUCCESS && major == 9);

  /* device memory lives in the distinctive range */
  EXPECT(cuMemAlloc(&p0, 1000) == CUDA_SUCCESS && p0 >= 0x7e0000000000ull && p0 < 0x7f0000000000ull);
  unsigned int mt = 0;
  EXPECT(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p0 + 10) == CUDA_SUCCESS &&
         mt == CU_MEMORYTYPE_DEVICE);
  void *hp;
  EXPECT(cuMemAllocHost(&hp, 100) == CUDA_SUCCESS);
  EXPECT(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)hp) == CUDA_SUCCESS &&
         mt == CU_MEMORYTYPE_HOST);
  int stackvar;
  EXPECT(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)&stackvar) ==
         CUDA_ERROR_INVALID_VALUE);
  EXPECT(cuMemcpyHtoD((CUdeviceptr)&stackvar, &stackvar, 4) == CUDA_ERROR_INVALID_VALUE);
  EXPECT(cuMemcpyHtoD(p0 + 996, &stackvar, 8) == CUDA_ERROR_INVALID_VALUE); /* overruns */
  EXPECT(cuMemFreeHost(hp) == CUDA_SUCCESS);
  EXPECT(cuMemFree(p0) == CUDA_SUCCESS);
  EXPECT(cuMemFree(p0) == CUDA_ERROR_INVALID_VALUE);

  /* VMM at a fixed address, twice mapped physical memory, refusal if taken */
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t gran = 0;
  EXPECT(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS &&
         gran == (2u << 20));
  const CUdeviceptr want = 0x7f1000000000ull;
  CUdeviceptr va = 0, vb = 0;
  EXPECT(cuMemAddressReserve(&va, 4 * gran, 0, want, 0) == CUDA_SUCCESS && va == want);
  EXPECT(cuMemAddressReserve(&vb, 4 * gran, 0, want, 0) == CUDA_ERROR_INVALID_VALUE);
  CUmemGenericAllocationHandle h;
  EXPECT(cuMemCreate(&h, gran, &prop, 0) == CUDA_SUCCESS);
  EXPECT(cuMemMap(va, gran, 0, h, 0) == CUDA_SUCCESS);
  EXPECT(cuMemMap(va + 2 * gran, gran, 0, h, 0) == CUDA_SUCCESS);
  CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  EXPECT(cuMemSetAccess(va, gran, &acc, 1) == CUDA_SUCCESS);
  EXPECT(cuMemSetAccess(va + 2 * gran, gran, &acc, 1) == CUDA_SUCCESS);
  EXPECT(cuMemSetAccess(va + gran, gran, &acc, 1) == CUDA_ERROR_INVALID_VALUE); /* unmapped */
  EXPECT(cuMemRelease(h) == CUDA_SUCCESS);
  unsigned v = 0xabcd1234u, back = 0;
  EXPECT(cuMemcpyHtoD(va + 64, &v, 4) == CUDA_SUCCESS);
  EXPECT(cuMemcpyDtoH(&back, va + 2 * gran + 64, 4) == CUDA_SUCCESS && back == v); /* same physical page */
  EXPECT(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va) == CUDA_SUCCESS && mt == CU_MEMORYTYPE_DEVICE);
  EXPECT(cuMemUnmap(va, gran) == CUDA_SUCCESS);
  EXPECT(cuMemUnmap(va + 2 * gran, gran) == CUDA_SUCCESS);
  EXPECT(cuMemAddressFree(va, 4 * gran) == CUDA_SUCCESS);
  EXPECT(cuMemAddressReserve(&vb, 4 * gran, 0, want, 0) == CUDA_SUCCESS && vb == want);
  EXPECT(cuMemAddressFree(vb, 4 * gran) == CUDA_SUCCESS);

  /* cuGetProcAddress: versions and per-thread variants map to exported symbols */
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  EXPECT(lib != NULL);
  void *fn = NULL;
  CUdriverProcAddressQueryResult q;
  EXPECT(cuGetProcAddress("cuMemAlloc", &fn, 12000, 0, &q) == CUDA_SUCCESS && fn == dlsym(lib, "cuMemAlloc_v2"));
  EXPECT(cuGetProcAddress("cuLaunchKernel", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &q) ==
             CUDA_SUCCESS && fn == dlsym(lib, "cuLaunchKernel_ptsz"));
  EXPECT(cuGetProcAddress("cuMemcpyHtoD", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &q) ==
             CUDA_SUCCESS && fn == dlsym(lib, "cuMemcpyHtoD_v2_ptds"));
  EXPECT(cuGetProcAddress("cuLaunchKernel", &fn, 12000, 0, &q) == CUDA_SUCCESS && fn == dlsym(lib, "cuLaunchKernel"));
  EXPECT(cuGetProcAddress("cuCtxCreate", &fn, 11040, 0, &q) == CUDA_SUCCESS && fn == dlsym(lib, "cuCtxCreate_v3"));
  EXPECT(cuGetProcAddress("cuCtxCreate", &fn, 13000, 0, &q) == CUDA_SUCCESS && fn == dlsym(lib, "cuCtxCreate_v4"));
  EXPECT(cuGetProcAddress("cuGetProcAddress", &fn, 12000, 0, &q) == CUDA_SUCCESS && fn == dlsym(lib, "cuGetProcAddress_v2"));
  EXPECT(cuGetProcAddress("cuLibraryLoadData", &fn, 11000, 0, &q) == CUDA_ERROR_NOT_FOUND &&
         q == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  EXPECT(cuGetProcAddress("cuNoSuchThing", &fn, 13000, 0, &q) == CUDA_ERROR_NOT_FOUND &&
         q == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND && fn == NULL);
  const void *tbl;
  CUuuid id = {{0}};
  EXPECT(cuGetExportTable(&tbl, &id) == CUDA_ERROR_NOT_SUPPORTED);
  const char *en = NULL;
  EXPECT(cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &en) == CUDA_SUCCESS && strcmp(en, "CUDA_ERROR_INVALID_VALUE") == 0);

  /* modules: corrupt images fail cleanly; globals are initialised */
  CUmodule m;
  unsigned char junk[64];
  memset(junk, 0x5a, sizeof junk);
  junk[63] = 0;
  EXPECT(cuModuleLoadData(&m, junk) == CUDA_ERROR_INVALID_IMAGE);
  unsigned char badfat[64] = {0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0, 0xff, 0xff, 0xff, 0x7f};
  EXPECT(cuModuleLoadData(&m, badfat) == CUDA_ERROR_INVALID_IMAGE);
  EXPECT(cuModuleLoadData(&m, "// PTX\n.version 9.0\n.target sm_90\n.visible .entry k(\n .param .u64 p,\n .param .align 8 .b8 s[24]\n)\n{ ret; }\n") == CUDA_SUCCESS);
  CUfunction f;
  size_t off = 0, sz = 0;
  EXPECT(cuModuleGetFunction(&f, m, "k") == CUDA_SUCCESS);
  EXPECT(cuFuncGetParamInfo(f, 1, &off, &sz) == CUDA_SUCCESS && off == 8 && sz == 24);
  EXPECT(cuFuncGetParamInfo(f, 2, &off, &sz) == CUDA_ERROR_INVALID_VALUE);
  EXPECT(cuModuleGetFunction(&f, m, "nope") == CUDA_ERROR_NOT_FOUND);
  EXPECT(cuModuleUnload(m) == CUDA_SUCCESS);

  /* explicit graphs: an edge added later reorders execution; cycles and
   * foreign nodes are refused; node queries */
  {
    CUdeviceptr d;
    EXPECT(cuMemAlloc(&d, 16) == CUDA_SUCCESS);
    CUgraph g = NULL, g2 = NULL;
    CUgraphNode a, b, e, foreign;
    EXPECT(cuGraphCreate(&g, 0) == CUDA_SUCCESS && cuGraphCreate(&g2, 0) == CUDA_SUCCESS);
    CUDA_MEMSET_NODE_PARAMS ms = {0};
    ms.dst = d, ms.value = 7, ms.elementSize = 4, ms.width = 4, ms.height = 1;
    CUDA_MEMCPY3D cp;
    memset(&cp, 0, sizeof cp);
    cp.srcMemoryType = cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    cp.srcDevice = d, cp.dstDevice = d + 8, cp.WidthInBytes = 4, cp.Height = cp.Depth = 1;
    EXPECT(cuGraphAddMemcpyNode(&a, g, NULL, 0, &cp, ctx) == CUDA_SUCCESS); /* d[2] = d[0] */
    EXPECT(cuGraphAddMemsetNode(&b, g, NULL, 0, &ms, ctx) == CUDA_SUCCESS); /* d[0..3] = 7 */
    EXPECT(cuGraphAddEmptyNode(&e, g, &a, 1) == CUDA_SUCCESS);
    EXPECT(cuGraphAddEmptyNode(&foreign, g2, NULL, 0) == CUDA_SUCCESS);
    EXPECT(cuGraphAddEmptyNode(&foreign, g, &foreign, 1) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuGraphAddDependencies(g, &b, &a, NULL, 1) == CUDA_SUCCESS); /* memset first */
    CUgraphNodeType t;
    size_t nd = 0, nn = 0;
    EXPECT(cuGraphNodeGetType(a, &t) == CUDA_SUCCESS && t == CU_GRAPH_NODE_TYPE_MEMCPY);
    EXPECT(cuGraphNodeGetType(e, &t) == CUDA_SUCCESS && t == CU_GRAPH_NODE_TYPE_EMPTY);
    EXPECT(cuGraphNodeGetDependencies(a, NULL, NULL, &nd) == CUDA_SUCCESS && nd == 1);
    EXPECT(cuGraphGetNodes(g, NULL, &nn) == CUDA_SUCCESS && nn == 3);
    CUDA_MEMSET_NODE_PARAMS ms2;
    EXPECT(cuGraphMemsetNodeGetParams(b, &ms2) == CUDA_SUCCESS && ms2.value == 7 && ms2.width == 4);
    EXPECT(cuGraphMemsetNodeGetParams(a, &ms2) == CUDA_ERROR_INVALID_VALUE);
    CUgraphExec x;
    EXPECT(cuGraphInstantiate(&x, g, 0) == CUDA_SUCCESS);
    EXPECT(cuGraphLaunch(x, NULL) == CUDA_SUCCESS);
    unsigned v[4] = {0};
    EXPECT(cuMemcpyDtoH(v, d, sizeof v) == CUDA_SUCCESS && v[2] == 7);
    EXPECT(cuGraphAddDependencies(g, &e, &b, NULL, 1) == CUDA_SUCCESS); /* b -> a -> e -> b */
    EXPECT(cuGraphInstantiate(&x, g, 0) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuGraphExecDestroy(x) == CUDA_SUCCESS);
    EXPECT(cuGraphDestroy(g) == CUDA_SUCCESS && cuGraphDestroy(g2) == CUDA_SUCCESS);
    EXPECT(cuMemFree(d) == CUDA_SUCCESS);
  }

  /* function attributes: more than 48 KiB of dynamic shared memory needs
   * MAX_DYNAMIC_SHARED_SIZE_BYTES (the function's setting beats the
   * kernel's); clusters above 8 need NON_PORTABLE_CLUSTER_SIZE_ALLOWED */
  {
    EXPECT(cuModuleLoadData(&m, "// PTX\n.version 9.0\n.target sm_90\n.visible .entry k0()\n{ ret; }\n") ==
           CUDA_SUCCESS);
    EXPECT(cuModuleGetFunction(&f, m, "k0") == CUDA_SUCCESS);
    int v = 0;
    EXPECT(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 65536, NULL, NULL, NULL) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 300000) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NUM_REGS, 8) == CUDA_ERROR_INVALID_VALUE); /* read-only */
    EXPECT(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 80000, (CUkernel)f, 0) == CUDA_SUCCESS);
    EXPECT(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 65536, NULL, NULL, NULL) == CUDA_SUCCESS);
    EXPECT(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 60000) == CUDA_SUCCESS);
    EXPECT(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 65536, NULL, NULL, NULL) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f) == CUDA_SUCCESS && v == 60000);
    EXPECT(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (CUkernel)f, 0) ==
           CUDA_SUCCESS && v == 80000);
    CUlaunchAttribute at[2];
    memset(at, 0, sizeof at);
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = 32, cfg.gridDimY = cfg.gridDimZ = 1, cfg.blockDimX = 32, cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.attrs = at, cfg.numAttrs = 1;
    at[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    at[0].value.clusterDim.x = 16, at[0].value.clusterDim.y = at[0].value.clusterDim.z = 1;
    EXPECT(cuLaunchKernelEx(&cfg, f, NULL, NULL) == CUDA_ERROR_INVALID_CLUSTER_SIZE);
    EXPECT(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1) == CUDA_SUCCESS);
    EXPECT(cuLaunchKernelEx(&cfg, f, NULL, NULL) == CUDA_SUCCESS);
    cfg.gridDimX = 24;
    EXPECT(cuLaunchKernelEx(&cfg, f, NULL, NULL) == CUDA_ERROR_INVALID_CLUSTER_SIZE); /* 24 % 16 */
    cfg.gridDimX = 32, cfg.numAttrs = 2;
    at[1].id = CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT;
    at[1].value.launchCompletionEvent.event = (CUevent)&v; /* not an event */
    EXPECT(cuLaunchKernelEx(&cfg, f, NULL, NULL) == CUDA_ERROR_INVALID_HANDLE);
    at[1].id = CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW;
    at[1].value.accessPolicyWindow.base_ptr = &v; /* host memory */
    at[1].value.accessPolicyWindow.num_bytes = 4;
    EXPECT(cuLaunchKernelEx(&cfg, f, NULL, NULL) == CUDA_ERROR_INVALID_VALUE);
    at[1].id = CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY; /* streams only */
    EXPECT(cuLaunchKernelEx(&cfg, f, NULL, NULL) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuModuleUnload(m) == CUDA_SUCCESS);
  }

  /* arrays (host-memory backed), 2D/3D copies with array sides, objects */
  {
    CUDA_ARRAY3D_DESCRIPTOR ad = {8, 4, 0, CU_AD_FORMAT_FLOAT, 1, 0};
    CUarray a, lvl;
    float in[32], out[32];
    for (int i = 0; i < 32; i++) in[i] = (float)i;
    EXPECT(cuArray3DCreate(&a, &ad) == CUDA_SUCCESS);
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = in, c.srcPitch = 8 * sizeof(float);
    c.dstMemoryType = CU_MEMORYTYPE_ARRAY, c.dstArray = a;
    c.WidthInBytes = 8 * sizeof(float), c.Height = 4, c.Depth = 1;
    EXPECT(cuMemcpy3D(&c) == CUDA_SUCCESS);
    c.Height = 5;
    EXPECT(cuMemcpy3D(&c) == CUDA_ERROR_INVALID_VALUE); /* past the last row */
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_ARRAY, c.srcArray = a, c.srcXInBytes = 4, c.srcY = 1;
    c.dstMemoryType = CU_MEMORYTYPE_HOST, c.dstHost = out, c.dstPitch = 8;
    c.WidthInBytes = 8, c.Height = 2, c.Depth = 1;
    EXPECT(cuMemcpy3D(&c) == CUDA_SUCCESS && out[0] == 9.f && out[1] == 10.f && out[2] == 17.f);
    EXPECT(cuMemcpyAtoH(out, a, 31 * sizeof(float), sizeof(float)) == CUDA_SUCCESS && out[0] == 31.f);
    EXPECT(cuMemcpyAtoH(out, a, 31 * sizeof(float), 2 * sizeof(float)) == CUDA_ERROR_INVALID_VALUE);
    CUDA_RESOURCE_DESC rd;
    memset(&rd, 0, sizeof rd);
    rd.resType = CU_RESOURCE_TYPE_ARRAY, rd.res.array.hArray = a;
    CUDA_TEXTURE_DESC td;
    memset(&td, 0, sizeof td);
    CUtexObject t;
    CUsurfObject sf;
    EXPECT(cuTexObjectCreate(&t, &rd, &td, NULL) == CUDA_SUCCESS && t >= 1);
    EXPECT(cuSurfObjectCreate(&sf, &rd) == CUDA_ERROR_INVALID_VALUE); /* no SURFACE_LDST */
    EXPECT(cuTexObjectDestroy(t) == CUDA_SUCCESS && cuTexObjectDestroy(t) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuArrayDestroy(a) == CUDA_SUCCESS && cuArrayDestroy(a) == CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuTexObjectCreate(&t, &rd, &td, NULL) == CUDA_ERROR_INVALID_VALUE); /* stale array */
    CUmipmappedArray mm;
    ad.Width = ad.Height = 16;
    EXPECT(cuMipmappedArrayCreate(&mm, &ad, 6) == CUDA_ERROR_INVALID_VALUE); /* 16x16: 5 levels */
    EXPECT(cuMipmappedArrayCreate(&mm, &ad, 5) == CUDA_SUCCESS);
    EXPECT(cuMipmappedArrayGetLevel(&lvl, mm, 4) == CUDA_SUCCESS);
    EXPECT(cuMipmappedArrayGetLevel(&lvl, mm, 5) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuArrayDestroy(lvl) == CUDA_ERROR_INVALID_HANDLE); /* owned by the mipmap */
    EXPECT(cuMipmappedArrayDestroy(mm) == CUDA_SUCCESS);
  }

  EXPECT(cuDevicePrimaryCtxRelease(dev) == CUDA_SUCCESS);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
