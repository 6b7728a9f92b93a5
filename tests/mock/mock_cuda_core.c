/* Mock driver core: init, device, contexts, streams, events and the test
 * tool hook; memory is mock_cuda_memory.c, error names and cuGetProcAddress
 * mock_cuda_proc.c. See mock_cuda.md for semantics.
 * State lives in process globals guarded by mock_lock; the current-context
 * stack is thread-local. Handles are malloc'd structs with a magic number so
 * stale or foreign handles are rejected with CUDA_ERROR_INVALID_HANDLE. */
#include "mock_cuda_internal.h"
#include "mock_tool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

pthread_mutex_t mock_lock = PTHREAD_MUTEX_INITIALIZER;
int mock_initialized;

#define MOCK_TOTAL_MEM mock_total_mem()

double mock_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- init / device ------------------------------------------------------ */
CUresult CUDAAPI cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  mock_test_init();
  __atomic_store_n(&mock_initialized, 1, __ATOMIC_SEQ_CST);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int *v) {
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = 13000;
  mock_tool_call();
  return CUDA_SUCCESS;
}

#define CHECK_DEV(d) do { if ((d) != 0) return CUDA_ERROR_INVALID_DEVICE; } while (0)

CUresult CUDAAPI cuDeviceGet(CUdevice *d, int ordinal) {
  NEED_INIT();
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *d = 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int *n) {
  NEED_INIT();
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  *n = 1;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice d) {
  NEED_INIT();
  CHECK_DEV(d);
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  snprintf(name, (size_t)len, "%s", "cucap mock GPU");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice d) {
  NEED_INIT();
  CHECK_DEV(d);
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  memcpy(uuid->bytes, "cucap-mock-gpu-0", 16);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem(size_t *bytes, CUdevice d) {
  NEED_INIT();
  CHECK_DEV(d);
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  *bytes = MOCK_TOTAL_MEM;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceComputeCapability(int *major, int *minor, CUdevice d) {
  NEED_INIT();
  CHECK_DEV(d);
  if (!major || !minor) return CUDA_ERROR_INVALID_VALUE;
  *major = 9;
  *minor = 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute a, CUdevice d) {
  NEED_INIT();
  CHECK_DEV(d);
  if (!pi || (int)a <= 0 || a >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  int v = 0;
  switch (a) { /* H100 SXM-like values */
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: v = 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: v = 64; break;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: v = 2147483647; break;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: v = 65535; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: v = 49152; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: v = 232448; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: v = 233472; break;
  case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: v = 65536; break;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = 32; break;
  case CU_DEVICE_ATTRIBUTE_MAX_PITCH: v = 2147483647; break;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: v = 65536; break;
  case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: v = 1980000; break;
  case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: v = 2619000; break;
  case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: v = 5120; break;
  case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: v = 50331648; break;
  case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: v = 512; break;
  case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: v = 32; break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: v = 132; break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: v = 2048; break;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: v = 32; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: v = 9; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: v = 0; break;
  case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
  case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
  case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
  case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
  case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
  case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED:
  case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: /* managed memory is host memory here */
    v = 1; break;
  case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: v = 3; break;
  case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: v = 0x18; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: v = CU_COMPUTEMODE_DEFAULT; break;
  default: v = 0; break;
  }
  *pi = v;
  return CUDA_SUCCESS;
}

/* ---- contexts ----------------------------------------------------------- */
static struct CUctx_st primary_ctx = {MOCK_MAGIC_CTX, 0, 0, 1, 0};
#define MOCK_CTX_STACK 64
static __thread CUcontext tls_stack[MOCK_CTX_STACK];
static __thread int tls_depth;

static CUcontext current_ctx(void) { return tls_depth > 0 ? tls_stack[tls_depth - 1] : NULL; }
CUcontext mock_current_ctx(void) { return current_ctx(); }

void mock_dead_use(const char *what, const void *handle) {
  fprintf(stderr, "mock libcuda: %s %p used after its context was destroyed "
                  "(a use after free on the real driver)\n", what, handle);
  fflush(stderr);
  abort();
}

static void ctx_release_objects(CUcontext c); /* streams, events, memory */

CUresult mock_need_ctx(void) {
  NEED_INIT();
  CUcontext c = current_ctx();
  if (!c || c->magic != MOCK_MAGIC_CTX) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;
}

static int ctx_ok(CUcontext c) { return c && c->magic == MOCK_MAGIC_CTX; }

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice d) {
  NEED_INIT();
  CHECK_DEV(d);
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mock_lock);
  primary_ctx.refcount++;
  pthread_mutex_unlock(&mock_lock);
  *pctx = &primary_ctx;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice d) {
  NEED_INIT();
  CHECK_DEV(d);
  CUresult rc = CUDA_SUCCESS;
  pthread_mutex_lock(&mock_lock);
  if (primary_ctx.refcount > 0) primary_ctx.refcount--;
  else rc = CUDA_ERROR_INVALID_CONTEXT;
  pthread_mutex_unlock(&mock_lock);
  return rc;
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice d, unsigned int flags) {
  NEED_INIT();
  CHECK_DEV(d);
  primary_ctx.flags = flags;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice d, unsigned int *flags, int *active) {
  NEED_INIT();
  CHECK_DEV(d);
  if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
  *flags = primary_ctx.flags;
  *active = primary_ctx.refcount > 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice d) {
  NEED_INIT();
  CHECK_DEV(d);
  return CUDA_SUCCESS;
}

static CUresult ctx_create(CUcontext *pctx, unsigned int flags, CUdevice d) {
  NEED_INIT();
  CHECK_DEV(d);
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (tls_depth >= MOCK_CTX_STACK) return CUDA_ERROR_OUT_OF_MEMORY;
  CUcontext c = calloc(1, sizeof *c);
  if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
  c->magic = MOCK_MAGIC_CTX;
  c->dev = d;
  c->flags = flags;
  MOCK_LIVE(MOCK_LIVE_CTX, 1);
  tls_stack[tls_depth++] = c;
  *pctx = c;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxCreate(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice d) {
  (void)params; /* execution affinity / CIG: accepted, ignored */
  return ctx_create(pctx, flags, d);
}
CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice d) { return ctx_create(pctx, flags, d); }
CUresult CUDAAPI cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *p, int n, unsigned int flags, CUdevice d);
CUresult CUDAAPI cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *p, int n, unsigned int flags, CUdevice d) {
  (void)p; (void)n;
  return ctx_create(pctx, flags, d);
}

CUresult CUDAAPI cuCtxDestroy(CUcontext c) {
  NEED_INIT();
  if (!ctx_ok(c) || c->primary) return CUDA_ERROR_INVALID_CONTEXT;
  for (int i = 0; i < tls_depth; i++)
    if (tls_stack[i] == c) {
      memmove(&tls_stack[i], &tls_stack[i + 1], (size_t)(tls_depth - i - 1) * sizeof(CUcontext));
      tls_depth--;
      i--;
    }
  /* everything created in c goes with it, as on the real driver */
  ctx_release_objects(c);
  mock_modules_ctx_destroyed(c);
  mock_arrays_ctx_destroyed(c);
  mock_graphs_ctx_destroyed(c);
  c->magic = 0;
  free(c);
  MOCK_LIVE(MOCK_LIVE_CTX, -1);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext c) {
  NEED_INIT();
  if (c == NULL) {
    if (tls_depth > 0) tls_depth--;
    return CUDA_SUCCESS;
  }
  if (!ctx_ok(c)) return CUDA_ERROR_INVALID_CONTEXT;
  if (tls_depth == 0) tls_stack[tls_depth++] = c;
  else tls_stack[tls_depth - 1] = c;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pc) {
  NEED_INIT();
  if (!pc) return CUDA_ERROR_INVALID_VALUE;
  *pc = current_ctx();
  mock_tool_call();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent(CUcontext c) {
  NEED_INIT();
  if (!ctx_ok(c)) return CUDA_ERROR_INVALID_CONTEXT;
  if (tls_depth >= MOCK_CTX_STACK) return CUDA_ERROR_OUT_OF_MEMORY;
  tls_stack[tls_depth++] = c;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPopCurrent(CUcontext *pc) {
  NEED_INIT();
  if (tls_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
  CUcontext c = tls_stack[--tls_depth];
  if (pc) *pc = c;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSynchronize(void) {
  mock_count_sync(MOCK_SYNC_CTX);
  MOCK_TRY(mock_need_ctx());
  if (mock_capture_any()) { /* would wait for capturing streams: conflicts in every mode */
    mock_capture_invalidate(NULL);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  mock_drain_all(0);
  return CUDA_SUCCESS;
}
/* Profiler ranges: markers only (nothing to start or stop here). */
CUresult CUDAAPI cuProfilerStart(void) { return mock_need_ctx(); }
CUresult CUDAAPI cuProfilerStop(void) { return mock_need_ctx(); }

CUresult CUDAAPI cuCtxGetDevice(CUdevice *d) {
  MOCK_TRY(mock_need_ctx());
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  *d = current_ctx()->dev;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetFlags(unsigned int *flags) {
  MOCK_TRY(mock_need_ctx());
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  *flags = current_ctx()->flags;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetApiVersion(CUcontext c, unsigned int *v) {
  NEED_INIT();
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  if (c && !ctx_ok(c)) return CUDA_ERROR_INVALID_CONTEXT;
  *v = 3020;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetId(CUcontext c, unsigned long long *id) {
  NEED_INIT();
  if (!c) c = current_ctx();
  if (!ctx_ok(c) || !id) return CUDA_ERROR_INVALID_CONTEXT;
  *id = c->primary ? 1 : (unsigned long long)(uintptr_t)c;
  return CUDA_SUCCESS;
}

static size_t ctx_limits[CU_LIMIT_MAX] = {1024, 1 << 20, 8 << 20, 2, 2048, 0, 0, 0};
static int heap_used; /* a kernel used the device heap (heap_probe) */
void mock_heap_touch(void) { __atomic_store_n(&heap_used, 1, __ATOMIC_RELAXED); }
CUresult CUDAAPI cuCtxSetLimit(CUlimit l, size_t v) {
  MOCK_TRY(mock_need_ctx());
  if ((unsigned)l >= CU_LIMIT_MAX) return CUDA_ERROR_UNSUPPORTED_LIMIT;
  if (l == CU_LIMIT_SHMEM_SIZE || l == CU_LIMIT_CIG_ENABLED) return CUDA_ERROR_INVALID_VALUE; /* query only */
  /* as on the driver: the heap size is fixed once a kernel used the heap,
   * even to the value it has (H100, driver 580: newdelete's replay passes) */
  if (l == CU_LIMIT_MALLOC_HEAP_SIZE && __atomic_load_n(&heap_used, __ATOMIC_RELAXED))
    return CUDA_ERROR_INVALID_VALUE;
  ctx_limits[l] = v;
  return CUDA_SUCCESS;
}
size_t mock_ctx_limit(CUlimit l) { return (unsigned)l < CU_LIMIT_MAX ? ctx_limits[l] : 0; }
CUresult CUDAAPI cuCtxGetLimit(size_t *v, CUlimit l) {
  MOCK_TRY(mock_need_ctx());
  if (!v || (unsigned)l >= CU_LIMIT_MAX) return CUDA_ERROR_UNSUPPORTED_LIMIT;
  *v = ctx_limits[l];
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *least, int *greatest) {
  MOCK_TRY(mock_need_ctx());
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return CUDA_SUCCESS;
}
/* cuCtx{Get,Set}CacheConfig / SharedMemConfig: mock_cuda_attr.c */

/* ---- streams and events ------------------------------------------------- */
struct CUstream_st *mock_all_streams; /* also read by mock_cuda_capture.c */
static struct CUevent_st *all_events;
/* dead handles (their context was destroyed): kept reachable for the
 * use-after-destroy check, never freed */
static struct CUstream_st *dead_streams;
static struct CUevent_st *dead_events;
static unsigned long long next_stream_id = 16;

/* cuCtxDestroy: the context's streams and events become dead handles (kept,
 * so a later use aborts in mock_dead_use), its device and page-locked host
 * allocations are unmapped. */
static void ctx_release_objects(CUcontext c) {
  /* asynchronous mode: their queued work runs first (it may use the
   * context's memory); captures on them end */
  for (CUstream s = mock_all_streams; s; s = s->next)
    if (s->owner == c) {
      mock_stream_gone(s);
      if (s->capture && s->capture_origin) mock_capture_unregister(s->capture);
    }
  mock_queue_lock();
  pthread_mutex_lock(&mock_lock);
  for (CUstream *pp = &mock_all_streams; *pp;) {
    CUstream s = *pp;
    if (s->owner == c) {
      *pp = s->next;
      s->magic = MOCK_MAGIC_DEAD;
      s->next = dead_streams;
      dead_streams = s;
      continue;
    }
    pp = &s->next;
  }
  for (CUevent *pp = &all_events; *pp;) {
    CUevent e = *pp;
    if (e->owner == c) {
      *pp = e->next;
      e->magic = MOCK_MAGIC_DEAD;
      e->next = dead_events;
      dead_events = e;
      MOCK_LIVE(MOCK_LIVE_EVENT, -1); /* the context took it */
      continue;
    }
    pp = &e->next;
  }
  mock_mem_release_ctx_locked(c);
  pthread_mutex_unlock(&mock_lock);
  mock_queue_unlock();
}

CUresult mock_check_stream(CUstream s) {
  MOCK_TRY(mock_need_ctx());
  if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) return CUDA_SUCCESS;
  if (s->magic == MOCK_MAGIC_DEAD) mock_dead_use("stream", s);
  return s->magic == MOCK_MAGIC_STREAM ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static int is_real_stream(CUstream s) {
  return s != NULL && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD;
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *ps, unsigned int flags, int priority) {
  MOCK_TRY(mock_need_ctx());
  MOCK_TRY(mock_unsafe());
  if (!ps || (flags & ~1u)) return CUDA_ERROR_INVALID_VALUE;
  CUstream s = calloc(1, sizeof *s);
  if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
  s->magic = MOCK_MAGIC_STREAM;
  s->flags = flags;
  s->priority = priority < -5 ? -5 : priority > 0 ? 0 : priority;
  pthread_mutex_lock(&mock_lock);
  s->id = next_stream_id++;
  s->owner = current_ctx();
  s->next = mock_all_streams;
  mock_all_streams = s;
  pthread_mutex_unlock(&mock_lock);
  *ps = s;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamCreate(CUstream *ps, unsigned int flags) { return cuStreamCreateWithPriority(ps, flags, 0); }

CUresult CUDAAPI cuStreamDestroy(CUstream s) {
  MOCK_TRY(mock_need_ctx());
  if (is_real_stream(s) && s->magic == MOCK_MAGIC_DEAD) mock_dead_use("stream", s);
  if (!is_real_stream(s) || s->magic != MOCK_MAGIC_STREAM) return CUDA_ERROR_INVALID_HANDLE;
  mock_stream_gone(s); /* its queued work still runs */
  if (s->capture && s->capture_origin) { /* destroyed while capturing: the capture ends */
    mock_capture_unregister(s->capture);
  }
  mock_queue_lock();
  pthread_mutex_lock(&mock_lock);
  for (CUstream *pp = &mock_all_streams; *pp; pp = &(*pp)->next)
    if (*pp == s) { *pp = s->next; break; }
  pthread_mutex_unlock(&mock_lock);
  mock_queue_unlock();
  s->magic = 0;
  free(s);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventCreate(CUevent *pe, unsigned int flags) {
  MOCK_TRY(mock_need_ctx());
  MOCK_TRY(mock_unsafe());
  if (!pe) return CUDA_ERROR_INVALID_VALUE;
  CUevent e = calloc(1, sizeof *e);
  if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
  e->magic = MOCK_MAGIC_EVENT;
  e->flags = flags;
  e->owner = current_ctx();
  pthread_mutex_lock(&mock_lock);
  e->next = all_events;
  all_events = e;
  pthread_mutex_unlock(&mock_lock);
  MOCK_LIVE(MOCK_LIVE_EVENT, 1);
  *pe = e;
  return CUDA_SUCCESS;
}

static int event_ok(CUevent e) {
  if (e && e->magic == MOCK_MAGIC_DEAD) mock_dead_use("event", e);
  return e && e->magic == MOCK_MAGIC_EVENT;
}

CUresult CUDAAPI cuEventDestroy(CUevent e) {
  MOCK_TRY(mock_need_ctx());
  if (!event_ok(e)) return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&mock_lock);
  for (CUevent *pp = &all_events; *pp; pp = &(*pp)->next)
    if (*pp == e) { *pp = e->next; break; }
  pthread_mutex_unlock(&mock_lock);
  e->magic = 0;
  free(e);
  MOCK_LIVE(MOCK_LIVE_EVENT, -1);
  return CUDA_SUCCESS;
}

/* An event last recorded inside a capture that is still active cannot be
 * waited for or queried (in every mode). */
static CUresult captured_event_check(CUevent e) {
  if (e->capture && mock_capture_active(e->capture)) {
    mock_capture_invalidate(e->capture);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventSynchronize(CUevent e) {
  mock_count_sync(MOCK_SYNC_EVENT);
  MOCK_TRY(mock_need_ctx());
  if (!event_ok(e)) return CUDA_ERROR_INVALID_HANDLE;
  MOCK_TRY(captured_event_check(e));
  MOCK_TRY(mock_unsafe());
  mock_drain_event(e);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventQuery(CUevent e) {
  MOCK_TRY(mock_need_ctx());
  if (!event_ok(e)) return CUDA_ERROR_INVALID_HANDLE;
  MOCK_TRY(captured_event_check(e));
  MOCK_TRY(mock_unsafe());
  /* asynchronous mode: pending work runs now, but this query still saw it pending */
  return mock_drain_event(e) ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
  MOCK_TRY(mock_need_ctx());
  if (!ms) return CUDA_ERROR_INVALID_VALUE;
  if (!event_ok(a) || !event_ok(b)) return CUDA_ERROR_INVALID_HANDLE;
  if (!a->recorded || !b->recorded || ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING))
    return CUDA_ERROR_INVALID_HANDLE;
  *ms = (float)(b->time_ms - a->time_ms);
  return CUDA_SUCCESS;
}
/* CUDA 13's cuda.h maps cuEventElapsedTime to _v2; the v1 symbol
 * `cuEventElapsedTime` (same signature) is exported as well for old callers. */
CUresult CUDAAPI cuEventElapsedTime_v1(float *ms, CUevent a, CUevent b) __asm__("cuEventElapsedTime")
    __attribute__((alias("cuEventElapsedTime_v2")));

CUresult mock_event_record(CUevent e, CUstream s) {
  MOCK_TRY(mock_check_stream(s));
  if (!event_ok(e)) return CUDA_ERROR_INVALID_HANDLE;
  if (is_real_stream(s) && s->capture) {
    if (s->capture->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    e->capture = s->capture;
    return CUDA_SUCCESS;
  }
  e->capture = NULL;
  if (mock_async() && is_real_stream(s)) { /* fires when the stream gets there */
    mock_op op = {0};
    op.kind = MOCK_OP_MARK;
    op.event = e;
    op.gen = ++e->rec_gen;
    e->rec_stream = s;
    return mock_enqueue(s, &op);
  }
  e->done_gen = e->rec_gen;
  e->time_ms = mock_now_ms();
  e->recorded = 1;
  return CUDA_SUCCESS;
}

CUresult mock_stream_wait_event(CUstream s, CUevent e) {
  MOCK_TRY(mock_check_stream(s));
  if (!event_ok(e)) return CUDA_ERROR_INVALID_HANDLE;
  if (e->capture && is_real_stream(s) && !s->capture) s->capture = e->capture; /* joins the capture */
  if (!e->capture) mock_drain_event(e); /* asynchronous mode: run what s waits for now */
  return CUDA_SUCCESS;
}

/* ---- stream capture ------------------------------------------------------ */
/* ---- test-tool hook (mock_tool.h) ---------------------------------------- */
static mock_tool_fn tool_fn;
static void *tool_user;

CUresult CUDAAPI cuMockToolHook(mock_tool_fn fn, void *user);
CUresult CUDAAPI cuMockToolHook(mock_tool_fn fn, void *user) {
  tool_user = user;
  tool_fn = fn;
  return CUDA_SUCCESS;
}

static uint64_t tool_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* set while a graph launch runs its ops (mock_graph_launch) */
int mock_tool_graph;

void mock_tool_submit(CUstream s, int capturing) {
  if (!tool_fn) return;
  mock_tool_event ev = {0};
  ev.what = MOCK_TOOL_SUBMIT;
  ev.stream = s;
  ev.capturing = capturing;
  ev.graph = mock_tool_graph;
  tool_fn(tool_user, &ev);
}

void mock_tool_call(void) {
  if (!tool_fn) return;
  mock_tool_event ev = {0};
  ev.what = MOCK_TOOL_CALL;
  tool_fn(tool_user, &ev);
}

void mock_tool_module(const void *image, size_t size) {
  if (!tool_fn) return;
  mock_tool_event ev = {0};
  ev.what = MOCK_TOOL_MODULE;
  ev.image = image;
  ev.image_size = size;
  tool_fn(tool_user, &ev);
}

CUresult mock_run_op_traced(const mock_op *op, CUstream s) {
  if (!tool_fn) return mock_run_op(op);
  mock_tool_event ev = {0};
  ev.what = MOCK_TOOL_RUN;
  ev.stream = s;
  ev.ctx = is_real_stream(s) && s->owner ? (const void *)s->owner
                                         : (const void *)current_ctx();
  ev.graph = mock_tool_graph;
  ev.start_ns = tool_ns();
  CUresult rc = mock_run_op(op);
  ev.end_ns = tool_ns();
  if (op->kind == MOCK_OP_KERNEL) {
    ev.kind = MOCK_TOOL_KERNEL;
    ev.kernel = op->func->name;
    ev.grid[0] = op->grid.x, ev.grid[1] = op->grid.y, ev.grid[2] = op->grid.z;
    ev.block[0] = op->block.x, ev.block[1] = op->block.y, ev.block[2] = op->block.z;
    ev.image = op->func->mod ? op->func->mod->image : NULL;
    ev.image_size = op->func->mod ? op->func->mod->image_size : 0;
  } else if (op->kind == MOCK_OP_COPY || op->kind == MOCK_OP_SET) {
    ev.kind = op->kind == MOCK_OP_COPY ? MOCK_TOOL_COPY : MOCK_TOOL_SET;
    ev.bytes = (uint64_t)op->width * op->height * (op->kind == MOCK_OP_SET ? op->elem : 1);
  } else {
    return rc; /* host functions and empty nodes are not GPU work */
  }
  tool_fn(tool_user, &ev);
  return rc;
}

CUresult mock_submit(CUstream s, mock_op *op) {
  int capturing = is_real_stream(s) && s->capture;
  mock_tool_submit(s, capturing);
  if (capturing) {
    if (s->capture->invalidated) {
      free(op->argbuf);
      return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    CUresult rc = mock_graph_append(s->capture, op);
    if (rc != CUDA_SUCCESS) free(op->argbuf);
    return rc;
  }
  if (mock_async() && is_real_stream(s)) return mock_enqueue(s, op);
  if (mock_async() && s != CU_STREAM_PER_THREAD) mock_drain_all(1); /* legacy: after blocking streams */
  CUresult rc = mock_run_op_traced(op, s);
  free(op->argbuf);
  return rc;
}

CUresult mock_begin_capture(CUstream s, CUstreamCaptureMode mode) {
  MOCK_TRY(mock_check_stream(s));
  if (!is_real_stream(s)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (s->capture) return CUDA_ERROR_ILLEGAL_STATE;
  if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  mock_drain_stream(s);
  struct mock_graph *g = calloc(1, sizeof *g);
  if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
  g->magic = MOCK_MAGIC_GRAPH;
  MOCK_LIVE(MOCK_LIVE_GRAPH, 1);
  s->capture = g;
  s->capture_origin = 1;
  mock_capture_register(g, s, mode);
  return CUDA_SUCCESS;
}

CUresult mock_begin_capture_to(CUstream s, struct mock_graph *g, CUstreamCaptureMode mode) {
  MOCK_TRY(mock_check_stream(s));
  if (!is_real_stream(s)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (s->capture) return CUDA_ERROR_ILLEGAL_STATE;
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  mock_drain_stream(s);
  g->cap_tail = NULL; /* the caller sets the dependencies (mock_capture_set_deps) */
  s->capture = g;
  s->capture_origin = 1;
  mock_capture_register(g, s, mode); /* capture rules as for cuStreamBeginCapture */
  return CUDA_SUCCESS;
}

CUresult mock_capture_set_deps(CUstream s, CUgraphNode *deps, size_t nd, unsigned flags) {
  MOCK_TRY(mock_check_stream(s));
  struct mock_graph *cg = is_real_stream(s) ? s->capture : NULL;
  if (!cg) return CUDA_ERROR_ILLEGAL_STATE;
  if (nd > 1 || (nd && !deps)) return CUDA_ERROR_NOT_SUPPORTED; /* a chain: one dependency */
  if (flags == CU_STREAM_ADD_CAPTURE_DEPENDENCIES && cg->cap_tail && nd) return CUDA_ERROR_NOT_SUPPORTED;
  struct mock_node *n = nd ? mock_node_of(deps[0]) : NULL;
  if (nd && (!n || n->graph != cg)) return CUDA_ERROR_INVALID_VALUE;
  cg->cap_tail = n;
  return CUDA_SUCCESS;
}

/* Graphs of captures ended invalidated: gone for the program, kept here
 * (reachable, so not a leak) because events may still point at them. */
static struct mock_graph *mock_dead_graphs;

CUresult mock_end_capture(CUstream s, CUgraph *out) {
  MOCK_TRY(mock_check_stream(s));
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (!is_real_stream(s) || !s->capture || !s->capture_origin) return CUDA_ERROR_ILLEGAL_STATE;
  struct mock_graph *g = s->capture;
  /* a capture not begun RELAXED is ended by the thread that began it */
  if (g->cap_mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(g->owner, pthread_self()))
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  pthread_mutex_lock(&mock_lock);
  for (CUstream t = mock_all_streams; t; t = t->next)
    if (t->capture == g) { t->capture = NULL; t->capture_origin = 0; }
  pthread_mutex_unlock(&mock_lock);
  mock_capture_unregister(g);
  if (g->invalidated) { /* the graph is gone; events recorded in it forget it lazily */
    *out = NULL;
    g->magic = 0; /* never freed: events may still point at it */
    /* gone for the program (the driver frees it): not a live object of its
     * (fuzz_replay counted it as a leak of the replayer's) */
    MOCK_LIVE(MOCK_LIVE_GRAPH, -1);
    pthread_mutex_lock(&mock_lock);
    g->dead_next = mock_dead_graphs;
    mock_dead_graphs = g;
    pthread_mutex_unlock(&mock_lock);
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  *out = (CUgraph)g;
  return CUDA_SUCCESS;
}

/* cuGraphCreate, node construction/queries, instantiate and launch live in
 * mock_cuda_graph.c. */

void mock_core_live(long *device, long *host, long *host_reg, long *reserve, long *mapped,
                    long *streams, long *primary_refs) {
  pthread_mutex_lock(&mock_lock);
  mock_mem_live_locked(device, host, host_reg, reserve, mapped);
  *streams = 0;
  for (CUstream s = mock_all_streams; s; s = s->next) (*streams)++;
  *primary_refs = primary_ctx.refcount;
  pthread_mutex_unlock(&mock_lock);
}

CUcontext mock_primary_ctx(void) { return &primary_ctx; }
