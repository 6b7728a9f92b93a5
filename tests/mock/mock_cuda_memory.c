/* Mock driver memory: the registry of device, page-locked host, reserved
 * and mapped ranges (device addresses handed out upward, not reused), the
 * cuMem* allocation, host-registration and pointer-query entry points, and
 * virtual memory management (cuMemAddressReserve/Create/Map/SetAccess). A
 * context's allocations go with it (mock_mem_release_ctx_locked, called by
 * mock_cuda_core.c's cuCtxDestroy). State under mock_lock. See mock_cuda.md. */
#include "mock_cuda_internal.h"
#include "mock_tool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MOCK_TOTAL_MEM mock_total_mem()
#define MOCK_GRANULARITY (2ull << 20)
#if defined(__SANITIZE_THREAD__)
/* ThreadSanitizer only allows application mappings in fixed windows; the
 * high one starts at 0x7e8000000000 (x86-64, 48-bit VA). */
#define MOCK_DEFAULT_BASE 0x7e8000000000ull
#else
#define MOCK_DEFAULT_BASE 0x7e0000000000ull
#endif

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
      regs[nregs - 1].owner = mock_current_ctx();
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
  if (!bad) regs[nregs - 1].owner = mock_current_ctx();
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
    *(CUcontext *)data = mock_primary_ctx();
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

/* ---- context teardown and live counts (mock_cuda_core.c) ----------------- */
void mock_mem_release_ctx_locked(CUcontext c) {
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
}

void mock_mem_live_locked(long *device, long *host, long *host_reg, long *reserve, long *mapped) {
  *device = *host = *host_reg = *reserve = *mapped = 0;
  for (size_t i = 0; i < nregs; i++) {
    switch (regs[i].kind) {
    case REG_DEVICE: (*device)++; break;
    case REG_HOST: if (regs[i].mapped) (*host_reg)++; else (*host)++; break;
    case REG_RESERVE: (*reserve)++; break;
    case REG_MAPPED: (*mapped)++; break;
    }
  }
}
