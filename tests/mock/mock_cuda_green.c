/* Mock driver: green contexts (cuGreenCtxCreate and the resource calls
 * that lead to one), as far as the CUPTI engine's L2 flusher uses them.
 *
 * A green context here is an ordinary mock context made by cuCtxCreate and
 * popped again, its CUgreenCtx handle the same pointer: made current
 * through cuCtxFromGreenCtx, work in it runs like work in any context, and
 * cuGreenCtxDestroy takes its streams, modules and memory with it, as
 * cuCtxDestroy does. Memory is global in the mock, so sharing the primary
 * context's address space needs nothing more. The one resource is the SM
 * type, 132 SMs (the H100's); a descriptor covers what it was made from,
 * and only the whole device's SMs are accepted. MOCK_CUDA_NO_GREEN=1 makes
 * cuGreenCtxCreate fail with CUDA_ERROR_NOT_SUPPORTED (a driver or GPU
 * without green contexts). */
#include "mock_cuda_internal.h"

#include <stdlib.h>
#include <string.h>

#define MOCK_GREEN_SMS 132u

struct CUdevResourceDesc_st {
  unsigned sms;
};

CUresult CUDAAPI cuDeviceGetDevResource(CUdevice d, CUdevResource *res, CUdevResourceType type) {
  NEED_INIT();
  if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (!res || type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_VALUE;
  memset(res, 0, sizeof *res);
  res->type = CU_DEV_RESOURCE_TYPE_SM;
  res->sm.smCount = MOCK_GREEN_SMS;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevResourceGenerateDesc(CUdevResourceDesc *desc, CUdevResource *res, unsigned int n) {
  NEED_INIT();
  if (!desc || !res || n != 1 || res->type != CU_DEV_RESOURCE_TYPE_SM ||
      res->sm.smCount != MOCK_GREEN_SMS)
    return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
  /* the real driver never frees a descriptor either: one for the process */
  static struct CUdevResourceDesc_st whole = {MOCK_GREEN_SMS};
  *desc = &whole;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGreenCtxCreate(CUgreenCtx *out, CUdevResourceDesc desc, CUdevice d, unsigned int flags) {
  NEED_INIT();
  if (!out || !desc || !(flags & CU_GREEN_CTX_DEFAULT_STREAM)) return CUDA_ERROR_INVALID_VALUE;
  const char *e = getenv("MOCK_CUDA_NO_GREEN");
  if (e && *e == '1') return CUDA_ERROR_NOT_SUPPORTED;
  CUcontext c = NULL;
  MOCK_TRY(cuCtxCreate_v2(&c, 0, d));
  CUcontext top = NULL;
  cuCtxPopCurrent(&top); /* created, not made current */
  *out = (CUgreenCtx)c;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxFromGreenCtx(CUcontext *pctx, CUgreenCtx g) {
  NEED_INIT();
  if (!pctx || !g) return CUDA_ERROR_INVALID_VALUE;
  *pctx = (CUcontext)g;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGreenCtxDestroy(CUgreenCtx g) {
  NEED_INIT();
  return g ? cuCtxDestroy((CUcontext)g) : CUDA_ERROR_INVALID_CONTEXT;
}

#define P(name, ver) {#name, ver, (void *)name}
const mock_proc mock_procs_green[] = {
  P(cuDeviceGetDevResource, 12040), P(cuDevResourceGenerateDesc, 12040),
  P(cuGreenCtxCreate, 12040), P(cuCtxFromGreenCtx, 12040), P(cuGreenCtxDestroy, 12040),
  {NULL, 0, NULL}};
#undef P
