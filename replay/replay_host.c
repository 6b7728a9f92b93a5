/* replay_host.c - recorded pinned host allocations at their recorded
 * addresses. See replay_host.h for the why.
 *
 * The entry points used here are not in the replayer's shared table
 * (replay_internal.h): they are fetched the same way, through
 * cuGetProcAddress_v2 of the loaded driver with the version of the PFN type
 * we call through, falling back to dlsym of the exported name. */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cucap_sort.h"
#include "cucap_getproc.h"
#include "cucap_log.h"
#include "cucap_schema.h"
#include "cucap_vec.h"
#include "replay_host.h"

/* Nothing a program allocates lives below Linux's default vm.mmap_min_addr
 * (64 KiB). A recorded range there comes from a damaged capture; mapped by a
 * privileged replayer (root may map page 0), it would turn the replayer's
 * own NULL dereferences into silent accesses. */
#define RP_HOST_MIN_ADDR ((uint64_t)64 << 10)

typedef struct rp_host_fns {
  PFN_cuMemHostRegister_v6050 Register;
  PFN_cuMemHostUnregister_v4000 Unregister;
  PFN_cuMemHostGetDevicePointer_v3020 GetDevicePointer;
} rp_host_fns;

static void rp_host_fns_load(const rp_driver *d, rp_host_fns *f) {
  memset(f, 0, sizeof *f);
  if (!d || !d->lib)
    return;
  f->Register = (PFN_cuMemHostRegister_v6050)cucap_getproc(d->lib, "cuMemHostRegister", 6050, "cuMemHostRegister_v2", 0);
  f->Unregister = (PFN_cuMemHostUnregister_v4000)cucap_getproc(d->lib, "cuMemHostUnregister", 4000, "cuMemHostUnregister", 0);
  f->GetDevicePointer = (PFN_cuMemHostGetDevicePointer_v3020)cucap_getproc(d->lib, "cuMemHostGetDevicePointer", 3020, "cuMemHostGetDevicePointer_v2", 0);
}

int rp_host_pins_add(rp_host_pins *p, int kind, uint64_t host, uint64_t dev,
                     uint64_t size) {
  if (kind != CUCAP_FB_ALLOCKIND_HOST && kind != CUCAP_FB_ALLOCKIND_HOSTALLOC &&
      kind != CUCAP_FB_ALLOCKIND_HOSTREGISTER)
    return 1;
  if (!host)
    host = dev;
  if (!host || !size || host + size < host)
    return 1; /* nothing to place (bad record: the replay ignores it) */
  if (!CUCAP_VEC_RESERVE(p->v, p->cap, p->n + 1, 16))
    return 0;
  rp_host_pin *e = &p->v[p->n++];
  memset(e, 0, sizeof *e);
  p->grouped = 0;
  e->host = host;
  e->dev = dev ? dev : host;
  e->size = size;
  return 1;
}

static int rp_host_cmp(const void *a, const void *b) {
  const rp_host_pin *x = a, *y = b;
  return x->host < y->host ? -1 : x->host > y->host;
}

/* Warns about the first failure only: a capture with many pinned buffers on
 * a machine that refuses them would otherwise flood the log. */
static void rp_host_fail(int *warned, uint64_t addr, uint64_t size,
                         const char *what, const rp_driver *d, CUresult r) {
  if ((*warned)++)
    return;
  CUCAP_WARN("replay: cannot place pinned host memory 0x%" PRIx64 "+0x%" PRIx64
             " at its recorded address (%s%s%s); kernels that use it "
             "through its recorded pointer may fault (further failures "
             "not reported)",
             addr, size, what, r != CUDA_SUCCESS ? ": " : "",
             r != CUDA_SUCCESS ? rp_cu_err(d, r) : "");
}

static uint64_t rp_page(void) {
  uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
  return pg && !(pg & (pg - 1)) ? pg : 4096;
}

/* Sorts the entries and groups those whose page-aligned ranges overlap: the
 * group's first entry gets the range (gs, ge) and the index past the group
 * (gend); the others get gend = 0. Idempotent. */
static void rp_host_group(rp_host_pins *p) {
  if (p->grouped)
    return;
  uint64_t pg = rp_page();
  if (p->n)
    cucap_sort(p->v, p->n, sizeof *p->v, rp_host_cmp);
  for (size_t i = 0; i < p->n;) {
    uint64_t s = p->v[i].host & ~(pg - 1);
    uint64_t e = (p->v[i].host + p->v[i].size + pg - 1) & ~(pg - 1);
    size_t j = i + 1;
    while (j < p->n && (p->v[j].host & ~(pg - 1)) < e) {
      uint64_t je = (p->v[j].host + p->v[j].size + pg - 1) & ~(pg - 1);
      if (je > e)
        e = je;
      p->v[j].gend = 0;
      j++;
    }
    p->v[i].gs = s;
    p->v[i].ge = e;
    p->v[i].gend = j;
    i = j;
  }
  p->grouped = 1;
}

int rp_host_pins_plan(rp_host_pins *p, rp_mem *m) {
  rp_host_group(p);
  for (size_t i = 0; i < p->n; i = p->v[i].gend)
    if (p->v[i].ge > p->v[i].gs &&
        !rp_mem_add_pin(m, p->v[i].gs, p->v[i].ge - p->v[i].gs))
      return 0;
  return 1;
}

size_t rp_host_pins_premap(rp_host_pins *p, rp_mem *m) {
  size_t n = 0;
  rp_host_group(p);
  for (size_t i = 0; i < p->n; i = p->v[i].gend) {
    rp_host_pin *g = &p->v[i];
    if (g->ge <= g->gs || g->gs < RP_HOST_MIN_ADDR || g->map_size)
      continue;
    /* next to a device range the driver is asked for: left alone until the
     * device reservations are made (a host mapping held across cuInit near
     * a hinted range is not known to be harmless) */
    if (rp_mem_near_fixed(m, g->gs, g->ge - g->gs, RP_VA_HINT_ALIGN))
      continue;
    void *a = mmap((void *)(uintptr_t)g->gs, g->ge - g->gs, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (a == MAP_FAILED)
      continue;
    if (a != (void *)(uintptr_t)g->gs) { /* kernel without NOREPLACE */
      munmap(a, g->ge - g->gs);
      continue;
    }
    g->map_addr = g->gs;
    g->map_size = g->ge - g->gs;
    n++;
  }
  return n;
}

size_t rp_host_pins_place(rp_host_pins *p, const rp_driver *d, const rp_mem *m) {
  p->placed = p->failed = p->device_backed = 0;
  if (!p->n)
    return 0;
  rp_host_fns f;
  rp_host_fns_load(d, &f);
  int warned = 0;
  rp_host_group(p);
  for (size_t i = 0; i < p->n; i = p->v[i].gend) {
    rp_host_pin *g = &p->v[i];
    size_t gi = i, j = g->gend;
    uint64_t s = g->gs, e = g->ge;
    /* wrapped past the top of the address space, or in the first 64 KiB */
    if (!e || e <= s || s < RP_HOST_MIN_ADDR) {
      rp_host_fail(&warned, s, 0, "invalid range", d, CUDA_SUCCESS);
      p->failed++;
      continue;
    }
    if (m && rp_mem_is_fixed(m, s, e - s)) {
      /* inside a reserved device range: device memory stands in for it at
       * the same address (replay_memory.c) */
      p->device_backed++;
      continue;
    }
    if (!f.Register) {
      rp_host_fail(&warned, s, e - s, "driver lacks cuMemHostRegister", d,
                   CUDA_SUCCESS);
      p->failed++;
      continue;
    }
    void *mp = (void *)(uintptr_t)g->map_addr;
    if (!g->map_size) {
      mp = mmap((void *)(uintptr_t)s, e - s, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      if (mp == MAP_FAILED || mp != (void *)(uintptr_t)s) {
        int busy = mp == MAP_FAILED && errno == EEXIST;
        if (mp != MAP_FAILED) /* kernel without MAP_FIXED_NOREPLACE */
          munmap(mp, e - s);
        char what[600] = "mmap failed";
        if (busy) {
          char va[512];
          rp_mem_describe_va(s, e - s, va, sizeof va);
          snprintf(what, sizeof what, "address already in use in this process: %s", va);
        }
        rp_host_fail(&warned, s, e - s, what, d, CUDA_SUCCESS);
        p->failed++;
        continue;
      }
      g->map_addr = s;
      g->map_size = e - s;
    }
    CUresult r = f.Register(mp, (size_t)(e - s),
                            CU_MEMHOSTREGISTER_DEVICEMAP |
                                CU_MEMHOSTREGISTER_PORTABLE);
    if (r != CUDA_SUCCESS) {
      rp_host_fail(&warned, s, e - s, "cuMemHostRegister", d, r);
      /* the mapping stays: the address then at least holds host memory
       * that no other replayer allocation can take */
      p->failed++;
      continue;
    }
    g->registered = 1;
    int ok = 1;
    for (size_t k = gi; k < j && ok; k++) {
      CUdeviceptr dp = 0;
      if (!f.GetDevicePointer) {
        rp_host_fail(&warned, s, e - s,
                     "driver lacks cuMemHostGetDevicePointer", d, CUDA_SUCCESS);
        ok = 0;
        break;
      }
      r = f.GetDevicePointer(&dp, (void *)(uintptr_t)p->v[k].host, 0);
      if (r != CUDA_SUCCESS) {
        rp_host_fail(&warned, s, e - s, "cuMemHostGetDevicePointer", d, r);
        ok = 0;
      } else if ((uint64_t)dp != p->v[k].dev) {
        if (!warned++)
          CUCAP_WARN("replay: pinned host memory 0x%" PRIx64 " maps to device "
                     "address 0x%llx here, 0x%" PRIx64 " when recorded; "
                     "kernels that use the recorded device pointer may fault",
                     p->v[k].host, (unsigned long long)dp, p->v[k].dev);
        ok = 0;
      }
    }
    if (ok)
      p->placed++;
    else
      p->failed++;
  }
  return p->placed;
}

/* Zeroes [addr, addr + size) of an anonymous mapping of ours, page-aligned,
 * page by page as mincore() reports them resident: a page never touched
 * reads 0 already. Memory registered with the driver is pinned (resident,
 * never swapped out): on a GPU every page is, and the whole range is
 * written as before. A driver that does not pin (the mock) is not made to
 * fault in pages nobody wrote (fuzz_replay: up to 256 MiB per pass). */
static void rp_zero_resident(uint64_t addr, uint64_t size) {
  uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
  unsigned char vec[4096];
  for (uint64_t off = 0; off < size;) {
    uint64_t n = size - off;
    if (n > sizeof vec * pg)
      n = sizeof vec * pg;
    uint8_t *base = (uint8_t *)(uintptr_t)(addr + off);
    if (mincore(base, n, vec) != 0) {
      memset(base, 0, n); /* cannot tell: all of it */
    } else {
      uint64_t np = (n + pg - 1) / pg;
      for (uint64_t i = 0; i < np;) {
        if (!(vec[i] & 1)) {
          i++;
          continue;
        }
        uint64_t j = i;
        while (j < np && (vec[j] & 1))
          j++;
        uint64_t end = j * pg < n ? j * pg : n;
        memset(base + i * pg, 0, end - i * pg);
        i = j;
      }
    }
    off += n;
  }
}

void rp_host_pins_zero(rp_host_pins *p) {
  for (size_t i = 0; p && i < p->n; i++) {
    rp_host_pin *e = &p->v[i];
    if (!e->map_size)
      continue;
    /* A mapping the driver did not register is ours alone: fresh anonymous
     * pages over it read 0 without being touched. A memset made every page
     * of it resident (fuzz_replay: a recorded 1.9 GB pinned allocation
     * whose registration failed cost 1.9 GB per pass). Registered memory
     * is zeroed in place (rp_zero_resident). */
    if (!e->registered &&
        mmap((void *)(uintptr_t)e->map_addr, e->map_size, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
            (void *)(uintptr_t)e->map_addr)
      continue;
    rp_zero_resident(e->map_addr, e->map_size);
  }
}

void rp_host_pins_release(rp_host_pins *p, const rp_driver *d) {
  if (!p)
    return;
  rp_host_fns f;
  rp_host_fns_load(d, &f);
  for (size_t i = 0; i < p->n; i++) {
    rp_host_pin *e = &p->v[i];
    if (e->registered && f.Unregister)
      f.Unregister((void *)(uintptr_t)e->map_addr);
    if (e->map_size)
      munmap((void *)(uintptr_t)e->map_addr, e->map_size);
  }
  free(p->v);
  memset(p, 0, sizeof *p);
}
