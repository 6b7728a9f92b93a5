/* Mock driver: function/kernel attributes, cache and shared-memory
 * configurations and the launch attributes of cuLaunchKernelEx.
 *
 * Modelled after the real driver (sm_90) where a replay that forgets a call
 * must fail or differ:
 *  - a launch with more than 48 KiB of dynamic shared memory needs
 *    MAX_DYNAMIC_SHARED_SIZE_BYTES >= that size on the function (set with
 *    cuFuncSetAttribute, or cuKernelSetAttribute on its CUkernel; the
 *    function's own setting wins); else CUDA_ERROR_INVALID_VALUE;
 *  - clusters: the grid must be a multiple of the cluster, more than 8 blocks
 *    per cluster need NON_PORTABLE_CLUSTER_SIZE_ALLOWED (16 at most), a
 *    function with REQUIRED_CLUSTER_* set launches in those clusters and
 *    refuses others (CUDA_ERROR_INVALID_CLUSTER_SIZE); host kernels see the
 *    cluster through mock_thread.clusterDim;
 *  - launch attributes naming events need valid events (recorded when the
 *    kernel is done: everything is synchronous), an access policy window must
 *    lie in device memory, unknown or stream-only attributes are refused.
 * Cache/shared-memory configurations and limits have no effect besides being
 * readable (cuFuncGetAttribute, cuCtxGet*), and by the attribute-probe host
 * kernels (mock_cuda_kernels.c). */
#include "mock_cuda_internal.h"

#include <stdlib.h>
#include <string.h>

static int func_ok(CUfunction f) { return f && f->magic == MOCK_MAGIC_FUNC; }

static int attr_default(CUfunction_attribute a) {
  switch (a) {
  case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
  case CU_FUNC_ATTRIBUTE_NUM_REGS: return 16;
  case CU_FUNC_ATTRIBUTE_PTX_VERSION: case CU_FUNC_ATTRIBUTE_BINARY_VERSION: return 90;
  case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: return 49152;
  case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: return -1;
  default: return 0;
  }
}

int mock_func_attr(const struct CUfunc_st *f, CUfunction_attribute a) {
  if ((unsigned)a >= CU_FUNC_ATTRIBUTE_MAX) return 0;
  if (f->attr_set & (1u << a)) return f->attr[a];
  if (f->kattr_set & (1u << a)) return f->kattr[a];
  return attr_default(a);
}

int mock_func_cache_config(const struct CUfunc_st *f) {
  return f->cache_config ? f->cache_config : f->kcache_set ? f->kcache_config : 0;
}

CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute a, CUfunction f) {
  if (!pi) return CUDA_ERROR_INVALID_VALUE;
  if (!func_ok(f)) return CUDA_ERROR_INVALID_HANDLE;
  if ((unsigned)a >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  *pi = mock_func_attr(f, a);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuKernelGetAttribute(int *pi, CUfunction_attribute a, CUkernel k, CUdevice d) {
  if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
  CUfunction f = (CUfunction)k;
  if (!pi) return CUDA_ERROR_INVALID_VALUE;
  if (!func_ok(f)) return CUDA_ERROR_INVALID_HANDLE;
  if ((unsigned)a >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  /* the kernel-level value, as the real cuKernelGetAttribute */
  *pi = f->kattr_set & (1u << a) ? f->kattr[a] : attr_default(a);
  return CUDA_SUCCESS;
}

/* Writable attributes and their ranges (sm_90: 227 KiB opt-in shared memory). */
static CUresult attr_check(CUfunction_attribute a, int v) {
  switch (a) {
  case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
    return v >= 0 && v <= 232448 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
    return v >= -1 && v <= 100 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
    return v >= 0 && v <= 16 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
    return v == 0 || v == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
    return v >= 0 && v <= 2 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  default: /* read-only */
    return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
  if (!func_ok(f)) return CUDA_ERROR_INVALID_HANDLE;
  MOCK_TRY(attr_check(a, v));
  f->attr[a] = v;
  f->attr_set |= 1u << a;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuKernelSetAttribute(CUfunction_attribute a, int v, CUkernel k, CUdevice d) {
  CUfunction f = (CUfunction)k;
  if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (!func_ok(f)) return CUDA_ERROR_INVALID_HANDLE;
  MOCK_TRY(attr_check(a, v));
  f->kattr[a] = v;
  f->kattr_set |= 1u << a;
  return CUDA_SUCCESS;
}

static int cache_ok(CUfunc_cache c) { return (unsigned)c <= CU_FUNC_CACHE_PREFER_EQUAL; }

CUresult CUDAAPI cuFuncSetCacheConfig(CUfunction f, CUfunc_cache c) {
  if (!func_ok(f)) return CUDA_ERROR_INVALID_HANDLE;
  if (!cache_ok(c)) return CUDA_ERROR_INVALID_VALUE;
  f->cache_config = (int)c;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuKernelSetCacheConfig(CUkernel k, CUfunc_cache c, CUdevice d) {
  CUfunction f = (CUfunction)k;
  if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (!func_ok(f)) return CUDA_ERROR_INVALID_HANDLE;
  if (!cache_ok(c)) return CUDA_ERROR_INVALID_VALUE;
  f->kcache_config = (int)c;
  f->kcache_set = 1;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncSetSharedMemConfig(CUfunction f, CUsharedconfig c) {
  if (!func_ok(f)) return CUDA_ERROR_INVALID_HANDLE;
  if ((unsigned)c > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE) return CUDA_ERROR_INVALID_VALUE;
  f->shmem_config = (int)c;
  return CUDA_SUCCESS;
}

/* Context-wide configurations (one context's worth, like the limits). */
static int ctx_cache, ctx_shmem;
int mock_ctx_cache_config(void) { return ctx_cache; }
int mock_ctx_shmem_config(void) { return ctx_shmem; }

CUresult CUDAAPI cuCtxGetCacheConfig(CUfunc_cache *c) {
  MOCK_TRY(mock_need_ctx());
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  *c = (CUfunc_cache)ctx_cache;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxSetCacheConfig(CUfunc_cache c) {
  MOCK_TRY(mock_need_ctx());
  if (!cache_ok(c)) return CUDA_ERROR_INVALID_VALUE;
  ctx_cache = (int)c;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxGetSharedMemConfig(CUsharedconfig *c) {
  MOCK_TRY(mock_need_ctx());
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  *c = (CUsharedconfig)ctx_shmem;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxSetSharedMemConfig(CUsharedconfig c) {
  MOCK_TRY(mock_need_ctx());
  if ((unsigned)c > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE) return CUDA_ERROR_INVALID_VALUE;
  ctx_shmem = (int)c;
  return CUDA_SUCCESS;
}

/* ---- clusters and launch attributes ------------------------------------ */

CUresult mock_cluster_dims(const struct CUfunc_st *f, mock_dim3 grid, mock_dim3 want,
                           mock_dim3 *out) {
  mock_dim3 req = {(unsigned)mock_func_attr(f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH),
                   (unsigned)mock_func_attr(f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT),
                   (unsigned)mock_func_attr(f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH)};
  int has_req = req.x || req.y || req.z, has_want = want.x || want.y || want.z;
  if (has_req) {
    if (!req.x) req.x = 1;
    if (!req.y) req.y = 1;
    if (!req.z) req.z = 1;
    if (has_want && (want.x != req.x || want.y != req.y || want.z != req.z))
      return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    want = req;
  } else if (!has_want) {
    *out = (mock_dim3){1, 1, 1};
    return CUDA_SUCCESS;
  }
  if (!want.x || !want.y || !want.z) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  unsigned long long n = (unsigned long long)want.x * want.y * want.z;
  unsigned max = mock_func_attr(f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED) ? 16 : 8;
  if (n > max || grid.x % want.x || grid.y % want.y || grid.z % want.z)
    return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  *out = want;
  return CUDA_SUCCESS;
}

static int event_ok(CUevent e) { return e && e->magic == MOCK_MAGIC_EVENT; }

CUresult mock_launch_ex(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  if (c->numAttrs && !c->attrs) return CUDA_ERROR_INVALID_VALUE;
  MOCK_TRY(mock_check_stream(c->hStream));
  if (!func_ok(f)) return CUDA_ERROR_INVALID_HANDLE;
  mock_dim3 grid = {c->gridDimX, c->gridDimY, c->gridDimZ};
  mock_dim3 want = {0, 0, 0};
  CUevent done[2] = {NULL, NULL};
  for (unsigned i = 0; i < c->numAttrs; i++) {
    const CUlaunchAttribute *a = &c->attrs[i];
    const CUlaunchAttributeValue *v = &a->value;
    switch (a->id) {
    case CU_LAUNCH_ATTRIBUTE_IGNORE:
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
    case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
      break;
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
      if ((unsigned)v->clusterSchedulingPolicyPreference > 2) return CUDA_ERROR_INVALID_VALUE;
      break;
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
      if (v->sharedMemCarveout > 100 && v->sharedMemCarveout != (unsigned)-1) return CUDA_ERROR_INVALID_VALUE;
      break;
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
      want = (mock_dim3){v->clusterDim.x, v->clusterDim.y, v->clusterDim.z};
      if (!want.x || !want.y || !want.z) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
      break;
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: {
      const CUaccessPolicyWindow *w = &v->accessPolicyWindow;
      if (w->hitRatio < 0 || w->hitRatio > 1) return CUDA_ERROR_INVALID_VALUE;
      /* the mock's check: the window must be device memory (catches an
       * address a replay failed to relocate) */
      if (w->num_bytes && !mock_dev_range_ok((CUdeviceptr)(uintptr_t)w->base_ptr, w->num_bytes))
        return CUDA_ERROR_INVALID_VALUE;
      break;
    }
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
      if (!event_ok(v->programmaticEvent.event)) return CUDA_ERROR_INVALID_HANDLE;
      done[0] = v->programmaticEvent.event;
      break;
    case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT:
      if (!event_ok(v->launchCompletionEvent.event)) return CUDA_ERROR_INVALID_HANDLE;
      done[1] = v->launchCompletionEvent.event;
      break;
    case CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE: /* graphs only */
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:       /* streams only */
    default:
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  mock_op op;
  MOCK_TRY(mock_kernel_op(f, grid, (mock_dim3){c->blockDimX, c->blockDimY, c->blockDimZ},
                          c->sharedMemBytes, params, extra, &op));
  CUresult rc = mock_cluster_dims(f, grid, want, &op.cluster);
  if (rc != CUDA_SUCCESS) {
    free(op.argbuf);
    return rc;
  }
  MOCK_TRY(mock_submit(c->hStream, &op));
  for (int i = 0; i < 2; i++) /* the kernel is done: both events fire */
    if (done[i]) MOCK_TRY(mock_event_record(done[i], c->hStream));
  return CUDA_SUCCESS;
}

#define P(name, ver) {#name, ver, (void *)name}
const mock_proc mock_procs_attr[] = {
  P(cuFuncGetAttribute, 2020), P(cuFuncSetAttribute, 9000), P(cuFuncSetCacheConfig, 3000),
  P(cuFuncSetSharedMemConfig, 4020), P(cuKernelGetAttribute, 12000), P(cuKernelSetAttribute, 12000),
  P(cuKernelSetCacheConfig, 12000), P(cuCtxGetCacheConfig, 3020), P(cuCtxSetCacheConfig, 3020),
  P(cuCtxGetSharedMemConfig, 4020), P(cuCtxSetSharedMemConfig, 4020),
  {NULL, 0, NULL}};
#undef P
