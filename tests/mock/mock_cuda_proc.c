/* Mock driver: error names and strings (mock_cuda_errors.inc),
 * cuGetExportTable, and cuGetProcAddress over every file's entry-point
 * table (the per-thread-stream table first when asked for, then the legacy
 * one, modules, graphs, attributes, arrays, green contexts and the
 * core's), with CUCAP_MOCK_FAIL's error injection. See mock_cuda.md. */
#include "mock_cuda_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* declared here: cuda.h maps cuCtxCreate to its current version (v2 in
 * mock_cuda_internal.h) */
CUresult CUDAAPI cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *p, int n, unsigned int flags, CUdevice d);
/* cudaProfiler.h's (defined in mock_cuda_core.c) */
CUresult CUDAAPI cuProfilerStart(void);
CUresult CUDAAPI cuProfilerStop(void);
/* the v1 symbol `cuEventElapsedTime` (mock_cuda_core.c) */
CUresult CUDAAPI cuEventElapsedTime_v1(float *ms, CUevent a, CUevent b) __asm__("cuEventElapsedTime");

/* ---- errors ------------------------------------------------------------- */
static const struct { CUresult code; const char *name; } err_names[] = {
#define E(n) {n, #n},
#include "mock_cuda_errors.inc"
#undef E
};

CUresult CUDAAPI cuGetErrorName(CUresult e, const char **s) {
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof err_names / sizeof err_names[0]; i++)
    if (err_names[i].code == e) { *s = err_names[i].name; return CUDA_SUCCESS; }
  *s = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

int mock_error_code(const char *name) {
  for (size_t i = 0; i < sizeof err_names / sizeof err_names[0]; i++)
    if (!strcmp(err_names[i].name, name)) return (int)err_names[i].code;
  return -1;
}


CUresult CUDAAPI cuGetErrorString(CUresult e, const char **s) {
  /* the mock's description is the name itself */
  return cuGetErrorName(e, s);
}

CUresult CUDAAPI cuGetExportTable(const void **table, const CUuuid *id) {
  (void)id;
  if (table) *table = NULL;
  return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- cuGetProcAddress --------------------------------------------------- */
#undef cuGetProcAddress
CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);

#define P(name, ver) {#name, ver, (void *)name}
static const mock_proc core_procs[] = {
  P(cuInit, 2000), P(cuDriverGetVersion, 2020), P(cuDeviceGet, 2000), P(cuDeviceGetCount, 2000),
  P(cuDeviceGetName, 2000), P(cuDeviceGetUuid, 9020), P(cuDeviceTotalMem, 3020),
  P(cuDeviceComputeCapability, 2000), P(cuDeviceGetAttribute, 2000),
  P(cuDevicePrimaryCtxRetain, 7000), P(cuDevicePrimaryCtxRelease, 7000), P(cuDevicePrimaryCtxSetFlags, 7000),
  P(cuDevicePrimaryCtxGetState, 7000), P(cuDevicePrimaryCtxReset, 7000),
  {"cuCtxCreate", 3020, (void *)cuCtxCreate_v2}, {"cuCtxCreate", 11040, (void *)cuCtxCreate_v3},
  P(cuCtxCreate, 12050), P(cuCtxDestroy, 4000), P(cuCtxSetCurrent, 4000), P(cuCtxGetCurrent, 4000),
  P(cuCtxPushCurrent, 4000), P(cuCtxPopCurrent, 4000), P(cuCtxSynchronize, 2000), P(cuCtxGetDevice, 2000),
  P(cuCtxGetFlags, 7000), P(cuCtxGetApiVersion, 3020), P(cuCtxGetId, 12000), P(cuCtxSetLimit, 3010),
  P(cuCtxGetLimit, 3010), P(cuCtxGetStreamPriorityRange, 5050), P(cuCtxGetCacheConfig, 3020),
  P(cuCtxSetCacheConfig, 3020), P(cuProfilerStart, 4000), P(cuProfilerStop, 4000),
  P(cuMemAlloc, 3020), P(cuMemFree, 3020), P(cuMemAllocManaged, 6000), P(cuMemAllocPitch, 3020),
  P(cuMemAllocHost, 3020), P(cuMemHostAlloc, 2020), P(cuMemFreeHost, 2000), P(cuMemHostRegister, 6050),
  P(cuMemHostUnregister, 4000), P(cuMemHostGetDevicePointer, 3020), P(cuMemGetInfo, 3020),
  P(cuMemGetAddressRange, 3020), P(cuPointerGetAttribute, 4000), P(cuPointerGetAttributes, 7000),
  P(cuPointerSetAttribute, 6000),
  P(cuMemGetAllocationGranularity, 10020), P(cuMemAddressReserve, 10020), P(cuMemAddressFree, 10020),
  P(cuMemCreate, 10020), P(cuMemRelease, 10020), P(cuMemMap, 10020), P(cuMemUnmap, 10020),
  P(cuMemSetAccess, 10020), P(cuMemGetAccess, 10020),
  P(cuStreamCreate, 2000), P(cuStreamCreateWithPriority, 5050), P(cuStreamDestroy, 4000),
  P(cuEventCreate, 2000), P(cuEventDestroy, 4000), P(cuEventSynchronize, 2000), P(cuEventQuery, 2000),
  {"cuEventElapsedTime", 2000, (void *)cuEventElapsedTime_v1}, P(cuEventElapsedTime, 12080),
  P(cuGetErrorName, 6000), P(cuGetErrorString, 6000), P(cuGetExportTable, 3000),
  {"cuGetProcAddress", 11030, (void *)cuGetProcAddress}, {"cuGetProcAddress", 12000, (void *)cuGetProcAddress_v2},
  {NULL, 0, NULL}};
#undef P

/* Every table in search order (rank 0, the per-thread variants, only with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), indexed once by name:
 * sorted by (name, rank) and binary-searched. A replay asks for a few
 * hundred entry points, and scanning every table with strcmp for each was a
 * visible part of fuzz_replay's time. */
typedef struct proc_ix {
  const char *name;
  int rank;
  const mock_proc *p;
} proc_ix;
static proc_ix *pix;
static size_t npix;
static pthread_once_t pix_once = PTHREAD_ONCE_INIT;
#define NRANKS 9
static const mock_proc *rank_table(int r) {
  switch (r) {
  case 0: return mock_procs_pt;
  case 1: return mock_procs_legacy;
  case 2: return mock_procs_module;
  case 3: return mock_procs_graph;
  case 4: return mock_procs_graph_ext;
  case 5: return mock_procs_attr;
  case 6: return mock_procs_array;
  case 7: return mock_procs_green;
  default: return core_procs;
  }
}
static int pix_cmp(const void *a, const void *b) {
  const proc_ix *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  if (c) return c;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  return x->p < y->p ? -1 : x->p > y->p; /* table order */
}
static void pix_build(void) {
  size_t n = 0;
  for (int r = 0; r < NRANKS; r++)
    for (const mock_proc *t = rank_table(r); t->name; t++) n++;
  proc_ix *v = malloc(n * sizeof *v);
  if (!v) return; /* lookups scan the tables */
  n = 0;
  for (int r = 0; r < NRANKS; r++)
    for (const mock_proc *t = rank_table(r); t->name; t++) v[n++] = (proc_ix){t->name, r, t};
  qsort(v, n, sizeof *v, pix_cmp);
  npix = n;
  pix = v;
}

/* Best entry for (name, version) in one table: the highest min_version that
 * does not exceed `version`. *seen is set when the name exists at all. */
static void *lookup(const mock_proc *t, const char *name, int version, int *seen) {
  void *best = NULL;
  int best_v = -1;
  for (; t->name; t++) {
    if (strcmp(t->name, name) != 0) continue;
    *seen = 1;
    if (t->min_version <= version && t->min_version > best_v) {
      best = t->fn;
      best_v = t->min_version;
    }
  }
  return best;
}

/* The first table (from rank `first`) with an entry for (name, version),
 * as the scan of lookup() over the tables in order would find it. */
static void *lookup_all(int first, const char *name, int version, int *seen) {
  pthread_once(&pix_once, pix_build);
  if (!pix) {
    void *f = NULL;
    for (int r = first; r < NRANKS && !f; r++) f = lookup(rank_table(r), name, version, seen);
    return f;
  }
  size_t lo = 0, hi = npix; /* first entry whose name is >= name */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (strcmp(pix[mid].name, name) < 0) lo = mid + 1;
    else hi = mid;
  }
  for (size_t i = lo; i < npix && strcmp(pix[i].name, name) == 0;) {
    int r = pix[i].rank;
    void *best = NULL;
    int best_v = -1;
    for (; i < npix && pix[i].rank == r && strcmp(pix[i].name, name) == 0; i++) {
      if (r < first) continue;
      *seen = 1;
      if (pix[i].p->min_version <= version && pix[i].p->min_version > best_v) {
        best = pix[i].p->fn;
        best_v = pix[i].p->min_version;
      }
    }
    if (best) return best;
  }
  return NULL;
}

CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                     CUdriverProcAddressQueryResult *status) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  int seen = 0;
  void *f = lookup_all(flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM ? 0 : 1, symbol, version, &seen);
  if (f && !(flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) f = mock_fail_wrap(symbol, f);
  *pfn = f;
  if (status)
    *status = f ? CU_GET_PROC_ADDRESS_SUCCESS
                : seen ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return f ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}
