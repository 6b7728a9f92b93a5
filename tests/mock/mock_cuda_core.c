/* Mock driver core: init, device, contexts, memory (incl. VMM), streams,
 * events, graphs, errors and cuGetProcAddress. See mock_cuda.md for semantics.
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
#define MOCK_GRANULARITY (2ull << 20)
#if defined(__SANITIZE_THREAD__)
/* ThreadSanitizer only allows application mappings in fixed windows; the
 * high one starts at 0x7e8000000000 (x86-64, 48-bit VA). */
#define MOCK_DEFAULT_BASE 0x7e8000000000ull
#else
#define MOCK_DEFAULT_BASE 0x7e0000000000ull
#endif

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

#define NEED_INIT() \
  do { if (!__atomic_load_n(&mock_initialized, __ATOMIC_SEQ_CST)) return CUDA_ERROR_NOT_INITIALIZED; } while (0)
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
CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice d);
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

/* ---- memory registry ---------------------------------------------------- */
typedef enum { REG_DEVICE, REG_HOST, REG_RESERVE, REG_MAPPED } reg_kind;
typedef struct reg_entry {
  uintptr_t start;
  size_t size;   /* requested size */
  size_t mapped; /* bytes mmap'ed (device) */
  reg_kind kind;
  unsigned long long id;
  CUcontext owner; /* cuMemAlloc* / cuMemAllocHost: freed with the context */
  int managed;      /* cuMemAllocManaged */
} reg_entry;
static reg_entry *regs;
static size_t nregs, capregs;
static unsigned long long next_id = 1;
static uintptr_t next_dev_addr;
static size_t dev_in_use;

/* Device addresses are handed out upward and not reused, so stale pointers
 * are caught; after 1 TiB (long fuzzing runs) they wrap to the base, where
 * MAP_FIXED_NOREPLACE skips what is still in use. */
#define MOCK_ADDR_SPAN (1ull << 40)
static uintptr_t dev_base(void);
static void next_addr_wrap(size_t need) {
  uintptr_t b = dev_base();
  if (next_dev_addr < b || next_dev_addr + need > b + MOCK_ADDR_SPAN) next_dev_addr = b;
}

static uintptr_t dev_base(void) {
  const char *e = getenv("CUCAP_MOCK_ADDR_BASE");
  uintptr_t b = e ? (uintptr_t)strtoull(e, NULL, 0) : 0;
  return b ? b & ~(uintptr_t)(MOCK_GRANULARITY - 1) : MOCK_DEFAULT_BASE;
}

static int reg_add(uintptr_t start, size_t size, size_t mapped, reg_kind kind) {
  if (nregs == capregs) {
    size_t nc = capregs ? capregs * 2 : 64;
    reg_entry *n = realloc(regs, nc * sizeof *n);
    if (!n) return -1;
    regs = n;
    capregs = nc;
  }
  regs[nregs++] = (reg_entry){start, size, mapped, kind, next_id++, NULL, 0};
  return 0;
}

/* Finds the entry of `kind` (or any data-holding kind when kind < 0) that
 * contains p. Caller holds mock_lock. */
static reg_entry *reg_find(uintptr_t p, int kind) {
  for (size_t i = 0; i < nregs; i++) {
    reg_entry *r = &regs[i];
    if (kind >= 0 && r->kind != (reg_kind)kind) continue;
    if (kind < 0 && r->kind == REG_RESERVE) continue;
    size_t span = r->size ? r->size : 1;
    if (p >= r->start && p - r->start < span) return r;
  }
  return NULL;
}

static void reg_remove(reg_entry *r) { *r = regs[--nregs]; }

unsigned mock_mem_type(const void *p) {
  pthread_mutex_lock(&mock_lock);
  reg_entry *r = reg_find((uintptr_t)p, -1);
  unsigned t = !r ? 0 : (r->kind == REG_HOST ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE);
  pthread_mutex_unlock(&mock_lock);
  return t;
}

int mock_dev_range_ok(CUdeviceptr p, size_t n) {
  pthread_mutex_lock(&mock_lock);
  reg_entry *r = reg_find((uintptr_t)p, -1);
  /* n may be absurd (a fuzzed capture's count): no overflow in the check */
  int ok = r && r->kind != REG_HOST && (n == 0 || n <= r->size - (p - r->start));
  pthread_mutex_unlock(&mock_lock);
  return ok;
}

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

void mock_fill(void *p, int b, size_t n) {
  uintptr_t a = (uintptr_t)p;
  uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t lo = round_up(a, pg), hi = (a + n) / pg * pg;
  /* trylock: an op may run with mock_lock held; then it is just written */
  if (b != 0 || n < (64u << 10) || hi <= lo || pthread_mutex_trylock(&mock_lock) != 0) {
    memset(p, b, n);
    return;
  }
  /* the registry says what backs [lo, hi): a private anonymous mapping
   * (cuMemAlloc*) drops its pages, a memfd mapping (cuMemMap) punches a
   * hole in its file; anything else (or a failure) is written */
  reg_entry *r = reg_find(a, -1);
  int dropped = 0;
  if (r && (r->kind == REG_DEVICE || r->kind == REG_MAPPED) && a + n <= r->start + r->size)
    dropped = madvise((void *)lo, hi - lo, r->kind == REG_DEVICE ? MADV_DONTNEED : MADV_REMOVE) == 0;
  pthread_mutex_unlock(&mock_lock);
  if (!dropped) {
    memset(p, 0, n);
    return;
  }
  memset(p, 0, lo - a);
  memset((void *)hi, 0, a + n - hi);
}

CUresult mock_alloc_device(CUdeviceptr *out, size_t size) {
  MOCK_TRY(mock_need_ctx());
  if (!out || size == 0) return CUDA_ERROR_INVALID_VALUE;
  if (size > MOCK_TOTAL_MEM) return CUDA_ERROR_OUT_OF_MEMORY;
  size_t map = round_up(size, (size_t)sysconf(_SC_PAGESIZE));
  CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&mock_lock);
  if (!next_dev_addr) next_dev_addr = dev_base();
  next_addr_wrap(map);
  if (dev_in_use + size <= MOCK_TOTAL_MEM) {
    for (int tries = 0; tries < 4096; tries++) {
      void *hint = (void *)next_dev_addr;
      void *p = mmap(hint, map, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
      next_dev_addr += round_up(map, MOCK_GRANULARITY);
      if (p == MAP_FAILED) {
        if (errno == EEXIST) continue;
        break;
      }
      if (p != hint) { /* kernels without MAP_FIXED_NOREPLACE treat it as a hint */
        munmap(p, map);
        continue;
      }
      if (reg_add((uintptr_t)p, size, map, REG_DEVICE) != 0) { munmap(p, map); break; }
      regs[nregs - 1].owner = current_ctx();
      dev_in_use += size;
      *out = (CUdeviceptr)(uintptr_t)p;
      rc = CUDA_SUCCESS;
      break;
    }
  }
  pthread_mutex_unlock(&mock_lock);
  return rc;
}

CUresult mock_free_device(CUdeviceptr p) {
  MOCK_TRY(mock_need_ctx());
  if (p == 0) return CUDA_SUCCESS;
  CUresult rc = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mock_lock);
  reg_entry *r = reg_find((uintptr_t)p, REG_DEVICE);
  if (r && r->start == (uintptr_t)p) {
    munmap((void *)r->start, r->mapped);
    dev_in_use -= r->size;
    reg_remove(r);
    rc = CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&mock_lock);
  return rc;
}

CUresult CUDAAPI cuMemAlloc(CUdeviceptr *p, size_t n) {
  MOCK_TRY(mock_unsafe());
  return mock_alloc_device(p, n);
}
CUresult CUDAAPI cuMemFree(CUdeviceptr p) {
  MOCK_TRY(mock_unsafe());
  mock_drain_all(0); /* cuMemFree waits for the device */
  return mock_free_device(p);
}
/* Managed memory is mock device memory (host memory anyway), flagged for
 * CU_POINTER_ATTRIBUTE_IS_MANAGED. */
CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned int flags) {
  (void)flags;
  MOCK_TRY(mock_unsafe());
  MOCK_TRY(mock_alloc_device(p, n));
  pthread_mutex_lock(&mock_lock);
  reg_entry *r = reg_find((uintptr_t)*p, REG_DEVICE);
  if (r) r->managed = 1;
  pthread_mutex_unlock(&mock_lock);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAllocPitch(CUdeviceptr *p, size_t *pitch, size_t width, size_t height, unsigned int esize) {
  if (!pitch || width == 0 || height == 0 || (esize != 4 && esize != 8 && esize != 16))
    return CUDA_ERROR_INVALID_VALUE;
  size_t pt = round_up(width, 512);
  MOCK_TRY(mock_alloc_device(p, pt * height));
  *pitch = pt;
  return CUDA_SUCCESS;
}

/* Page-locked host memory: its own mapping, so that the memory of a
 * destroyed context is really gone (a later access faults, as it would on the
 * real driver). Its address is remembered (dead_host) until mapped again, so
 * that freeing it afterwards aborts (mock_dead_use). */
static uintptr_t *dead_host;
static size_t ndead_host, capdead_host;

static void dead_host_forget(uintptr_t p) { /* under mock_lock */
  for (size_t i = 0; i < ndead_host; i++)
    if (dead_host[i] == p) dead_host[i--] = dead_host[--ndead_host];
}

static CUresult host_alloc(void **pp, size_t n) {
  MOCK_TRY(mock_need_ctx());
  MOCK_TRY(mock_unsafe());
  if (!pp || n == 0) return CUDA_ERROR_INVALID_VALUE;
  if (n > MOCK_TOTAL_MEM) return CUDA_ERROR_OUT_OF_MEMORY; /* pinnable memory is finite */
  size_t map = round_up(n, (size_t)sysconf(_SC_PAGESIZE));
  void *p = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&mock_lock);
  int bad = reg_add((uintptr_t)p, n, 0, REG_HOST);
  if (!bad) regs[nregs - 1].owner = current_ctx();
  dead_host_forget((uintptr_t)p);
  pthread_mutex_unlock(&mock_lock);
  if (bad) { munmap(p, map); return CUDA_ERROR_OUT_OF_MEMORY; }
  *pp = p;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAllocHost(void **pp, size_t n) { return host_alloc(pp, n); }
CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t n, unsigned int flags) {
  (void)flags;
  return host_alloc(pp, n);
}

CUresult CUDAAPI cuMemFreeHost(void *p) {
  MOCK_TRY(mock_need_ctx());
  MOCK_TRY(mock_unsafe());
  mock_drain_all(0);
  CUresult rc = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mock_lock);
  reg_entry *r = reg_find((uintptr_t)p, REG_HOST);
  size_t map = 0;
  for (size_t i = 0; !r && i < ndead_host; i++)
    if (dead_host[i] == (uintptr_t)p) mock_dead_use("page-locked host memory", p);
  if (r && r->start == (uintptr_t)p && r->mapped == 0) {
    map = round_up(r->size, (size_t)sysconf(_SC_PAGESIZE));
    reg_remove(r);
    rc = CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&mock_lock);
  if (rc == CUDA_SUCCESS) munmap(p, map);
  return rc;
}

CUresult CUDAAPI cuMemHostRegister(void *p, size_t n, unsigned int flags) {
  (void)flags;
  MOCK_TRY(mock_need_ctx());
  if (!p || n == 0) return CUDA_ERROR_INVALID_VALUE;
  /* the driver pins the pages: as finite as for cuMemAllocHost */
  if (n > MOCK_TOTAL_MEM) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&mock_lock);
  int dup = reg_find((uintptr_t)p, REG_HOST) != NULL;
  /* mapped = 1 marks "registered, not ours to free" */
  int bad = dup ? 0 : reg_add((uintptr_t)p, n, 1, REG_HOST);
  pthread_mutex_unlock(&mock_lock);
  if (dup) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  return bad ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostUnregister(void *p) {
  MOCK_TRY(mock_need_ctx());
  CUresult rc = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  pthread_mutex_lock(&mock_lock);
  reg_entry *r = reg_find((uintptr_t)p, REG_HOST);
  if (r && r->start == (uintptr_t)p && r->mapped == 1) {
    reg_remove(r);
    rc = CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&mock_lock);
  return rc;
}

CUresult CUDAAPI cuMemHostGetDevicePointer(CUdeviceptr *pd, void *p, unsigned int flags) {
  MOCK_TRY(mock_need_ctx());
  if (!pd || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (mock_mem_type(p) != CU_MEMORYTYPE_HOST) return CUDA_ERROR_INVALID_VALUE;
  *pd = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetInfo(size_t *free_b, size_t *total) {
  MOCK_TRY(mock_need_ctx());
  pthread_mutex_lock(&mock_lock);
  if (free_b) *free_b = MOCK_TOTAL_MEM - dev_in_use;
  pthread_mutex_unlock(&mock_lock);
  if (total) *total = MOCK_TOTAL_MEM;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
  MOCK_TRY(mock_need_ctx());
  CUresult rc = CUDA_ERROR_NOT_FOUND;
  pthread_mutex_lock(&mock_lock);
  reg_entry *r = reg_find((uintptr_t)p, -1);
  if (r && r->kind != REG_HOST) {
    if (base) *base = r->start;
    if (size) *size = r->size;
    rc = CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&mock_lock);
  return rc;
}

static CUresult pointer_attr(void *data, CUpointer_attribute a, CUdeviceptr p) {
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mock_lock);
  reg_entry *r = reg_find((uintptr_t)p, -1);
  reg_entry e = r ? *r : (reg_entry){0, 0, 0, REG_HOST, 0, NULL, 0};
  pthread_mutex_unlock(&mock_lock);
  int dev = r && e.kind != REG_HOST;
  switch (a) {
  case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    if (!r) return CUDA_ERROR_INVALID_VALUE;
    *(unsigned int *)data = dev ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_CONTEXT:
    if (!r) return CUDA_ERROR_INVALID_VALUE;
    *(CUcontext *)data = &primary_ctx;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    if (!r) return CUDA_ERROR_INVALID_VALUE;
    *(CUdeviceptr *)data = p;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    if (!r || dev) return CUDA_ERROR_INVALID_VALUE;
    *(void **)data = (void *)(uintptr_t)p;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    if (!r) return CUDA_ERROR_INVALID_VALUE;
    *(int *)data = 0;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    *(unsigned int *)data = (unsigned)e.managed;
    return r ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  case CU_POINTER_ATTRIBUTE_MAPPED:
    *(unsigned int *)data = r != NULL;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    if (!r) return CUDA_ERROR_INVALID_VALUE;
    *(unsigned long long *)data = e.id;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    if (!r) return CUDA_ERROR_INVALID_VALUE;
    *(CUdeviceptr *)data = e.start;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    if (!r) return CUDA_ERROR_INVALID_VALUE;
    *(size_t *)data = e.size;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
  case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    *(int *)data = 0;
    return CUDA_SUCCESS;
  default:
    return CUDA_ERROR_NOT_SUPPORTED;
  }
}

/* Pointer queries count as potentially unsafe during capture here (stricter
 * than needed for some drivers: a recorder must issue them relaxed). */
CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute a, CUdeviceptr p) {
  NEED_INIT();
  MOCK_TRY(mock_unsafe());
  return pointer_attr(data, a, p);
}

CUresult CUDAAPI cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs, void **data, CUdeviceptr p) {
  NEED_INIT();
  MOCK_TRY(mock_unsafe());
  if (!attrs || !data) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < n; i++) {
    CUresult rc = pointer_attr(data[i], attrs[i], p);
    if (rc == CUDA_ERROR_INVALID_VALUE && data[i]) { /* plural form reports "not ours" as zeros */
      if (attrs[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE) *(unsigned int *)data[i] = 0;
      continue;
    }
    if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_NOT_SUPPORTED) return rc;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuPointerSetAttribute(const void *value, CUpointer_attribute a, CUdeviceptr p) {
  (void)value; (void)p;
  return a == CU_POINTER_ATTRIBUTE_SYNC_MEMOPS ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- virtual memory management ------------------------------------------ */
typedef struct mock_phys {
  int fd;
  size_t size;
} mock_phys;

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                               CUmemAllocationGranularity_flags o) {
  (void)o;
  NEED_INIT();
  if (!g || !prop) return CUDA_ERROR_INVALID_VALUE;
  *g = MOCK_GRANULARITY;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
                                     unsigned long long flags) {
  (void)flags;
  MOCK_TRY(mock_need_ctx());
  if (!ptr || size == 0 || size % MOCK_GRANULARITY) return CUDA_ERROR_INVALID_VALUE;
  if (align == 0) align = MOCK_GRANULARITY;
  CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&mock_lock);
  if (!next_dev_addr) next_dev_addr = dev_base();
  /* CUCAP_MOCK_STRICT_VA=1: like the real driver (H100, driver 580), a hint
   * that is not 32 MiB-aligned is ignored (a default address comes back). */
  const char *strict_va = getenv("CUCAP_MOCK_STRICT_VA");
  if (addr && strict_va && strict_va[0] == '1' && addr % ((CUdeviceptr)32 << 20)) addr = 0;
  if (addr) {
    /* A fixed address is honoured exactly or refused (the replayer relies on
     * this to place allocations at their recorded addresses). */
    void *p = mmap((void *)(uintptr_t)addr, size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED || p != (void *)(uintptr_t)addr) {
      if (p != MAP_FAILED) munmap(p, size);
      rc = CUDA_ERROR_INVALID_VALUE;
    } else if (reg_add(addr, size, size, REG_RESERVE) == 0) {
      *ptr = addr;
      rc = CUDA_SUCCESS;
    } else {
      munmap(p, size);
    }
  } else {
    next_addr_wrap(size + align);
    for (int tries = 0; tries < 4096; tries++) {
      uintptr_t a = round_up(next_dev_addr, align);
      void *p = mmap((void *)a, size, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
      next_dev_addr = a + round_up(size, MOCK_GRANULARITY);
      if (p == MAP_FAILED && errno == EEXIST) continue;
      if (p == MAP_FAILED) break;
      if (p != (void *)a) { munmap(p, size); continue; }
      if (reg_add(a, size, size, REG_RESERVE) != 0) { munmap(p, size); break; }
      *ptr = a;
      rc = CUDA_SUCCESS;
      break;
    }
  }
  pthread_mutex_unlock(&mock_lock);
  return rc;
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  MOCK_TRY(mock_need_ctx());
  CUresult rc = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mock_lock);
  reg_entry *r = reg_find(ptr, REG_RESERVE);
  if (r && r->start == ptr && r->size == size) {
    munmap((void *)(uintptr_t)ptr, size);
    reg_remove(r);
    /* mappings inside the range disappear with it */
    for (size_t i = 0; i < nregs; i++)
      if (regs[i].kind == REG_MAPPED && regs[i].start >= ptr && regs[i].start < ptr + size) reg_remove(&regs[i--]);
    rc = CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&mock_lock);
  return rc;
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
                             unsigned long long flags) {
  (void)flags;
  MOCK_TRY(mock_need_ctx());
  if (!h || !prop || size == 0 || size % MOCK_GRANULARITY) return CUDA_ERROR_INVALID_VALUE;
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id != 0) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&mock_lock);
  int full = dev_in_use + size > MOCK_TOTAL_MEM;
  pthread_mutex_unlock(&mock_lock);
  if (full) return CUDA_ERROR_OUT_OF_MEMORY;
  mock_phys *ph = malloc(sizeof *ph);
  if (!ph) return CUDA_ERROR_OUT_OF_MEMORY;
  ph->fd = memfd_create("cucap-mock-phys", MFD_CLOEXEC);
  if (ph->fd < 0 || ftruncate(ph->fd, (off_t)size) != 0) {
    if (ph->fd >= 0) close(ph->fd);
    free(ph);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  ph->size = size;
  MOCK_LIVE(MOCK_LIVE_PHYS, 1);
  pthread_mutex_lock(&mock_lock);
  dev_in_use += size;
  pthread_mutex_unlock(&mock_lock);
  *h = (CUmemGenericAllocationHandle)(uintptr_t)ph;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle h) {
  MOCK_TRY(mock_need_ctx());
  mock_phys *ph = (mock_phys *)(uintptr_t)h;
  if (!ph) return CUDA_ERROR_INVALID_VALUE;
  /* existing mappings keep the memory alive, as in CUDA */
  close(ph->fd);
  pthread_mutex_lock(&mock_lock);
  dev_in_use -= ph->size;
  pthread_mutex_unlock(&mock_lock);
  free(ph);
  MOCK_LIVE(MOCK_LIVE_PHYS, -1);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                          unsigned long long flags) {
  MOCK_TRY(mock_need_ctx());
  mock_phys *ph = (mock_phys *)(uintptr_t)h;
  if (!ph || flags != 0 || size == 0 || size % MOCK_GRANULARITY || ptr % MOCK_GRANULARITY ||
      offset > ph->size || size > ph->size - offset)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mock_lock);
  reg_entry *r = reg_find(ptr, REG_RESERVE);
  if (r && ptr + size <= r->start + r->size && !reg_find(ptr, REG_MAPPED)) {
    void *p = mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, ph->fd, (off_t)offset);
    if (p == MAP_FAILED) rc = CUDA_ERROR_OUT_OF_MEMORY;
    else if (reg_add(ptr, size, size, REG_MAPPED) != 0) rc = CUDA_ERROR_OUT_OF_MEMORY;
    else rc = CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&mock_lock);
  return rc;
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
  MOCK_TRY(mock_need_ctx());
  CUresult rc = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mock_lock);
  reg_entry *r = reg_find(ptr, REG_MAPPED);
  if (r && r->start == ptr && r->size == size) {
    mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    reg_remove(r);
    rc = CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&mock_lock);
  return rc;
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
  MOCK_TRY(mock_need_ctx());
  if (!desc || count == 0 || size % MOCK_GRANULARITY) return CUDA_ERROR_INVALID_VALUE;
  int prot = PROT_NONE;
  for (size_t i = 0; i < count; i++) {
    if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) prot = PROT_READ | PROT_WRITE;
    else if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ && prot == PROT_NONE) prot = PROT_READ;
  }
  CUresult rc = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mock_lock);
  /* every byte of the range must be mapped */
  size_t done = 0;
  while (done < size) {
    reg_entry *r = reg_find(ptr + done, REG_MAPPED);
    if (!r) break;
    done = r->start + r->size - ptr;
  }
  if (done >= size && mprotect((void *)(uintptr_t)ptr, size, prot) == 0) rc = CUDA_SUCCESS;
  pthread_mutex_unlock(&mock_lock);
  return rc;
}

CUresult CUDAAPI cuMemGetAccess(unsigned long long *flags, const CUmemLocation *loc, CUdeviceptr ptr) {
  (void)loc;
  MOCK_TRY(mock_need_ctx());
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mock_lock);
  int mapped = reg_find(ptr, REG_MAPPED) != NULL;
  pthread_mutex_unlock(&mock_lock);
  *flags = mapped ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE;
  return CUDA_SUCCESS;
}

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
  for (size_t i = 0; i < nregs;) {
    reg_entry *r = &regs[i];
    if (r->owner != c || (r->kind != REG_DEVICE && r->kind != REG_HOST) || (r->kind == REG_HOST && r->mapped)) {
      i++;
      continue;
    }
    if (r->kind == REG_DEVICE) {
      munmap((void *)r->start, r->mapped);
      dev_in_use -= r->size;
    } else {
      munmap((void *)r->start, round_up(r->size, (size_t)sysconf(_SC_PAGESIZE)));
      if (ndead_host == capdead_host) {
        size_t nc = capdead_host ? capdead_host * 2 : 16;
        uintptr_t *nd = realloc(dead_host, nc * sizeof *nd);
        if (nd) { dead_host = nd; capdead_host = nc; }
      }
      if (ndead_host < capdead_host) dead_host[ndead_host++] = r->start;
    }
    reg_remove(r); /* the last entry moved to i: look at it next */
  }
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

void mock_core_live(long *device, long *host, long *host_reg, long *reserve, long *mapped,
                    long *streams, long *primary_refs) {
  *device = *host = *host_reg = *reserve = *mapped = *streams = 0;
  pthread_mutex_lock(&mock_lock);
  for (size_t i = 0; i < nregs; i++) {
    switch (regs[i].kind) {
    case REG_DEVICE: (*device)++; break;
    case REG_HOST: if (regs[i].mapped) (*host_reg)++; else (*host)++; break;
    case REG_RESERVE: (*reserve)++; break;
    case REG_MAPPED: (*mapped)++; break;
    }
  }
  for (CUstream s = mock_all_streams; s; s = s->next) (*streams)++;
  *primary_refs = primary_ctx.refcount;
  pthread_mutex_unlock(&mock_lock);
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
#define NRANKS 8
static const mock_proc *rank_table(int r) {
  switch (r) {
  case 0: return mock_procs_pt;
  case 1: return mock_procs_legacy;
  case 2: return mock_procs_module;
  case 3: return mock_procs_graph;
  case 4: return mock_procs_graph_ext;
  case 5: return mock_procs_attr;
  case 6: return mock_procs_array;
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
