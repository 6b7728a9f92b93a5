/* replay_memory.c - where recorded device memory lives during replay.
 *
 * Fixed placement: the union of all recorded device allocations is reserved
 * in 32 MiB-aligned super-ranges (RP_VA_HINT_ALIGN: the real driver ignores
 * hints that are only 2 MiB-aligned) at exactly the recorded virtual
 * addresses (cuMemAddressReserve with the super-range start as hint,
 * checked); only the 2 MiB-aligned union of the recorded ranges inside is
 * backed with pinned device memory (cuMemCreate + cuMemMap +
 * cuMemSetAccess). Optionally (CUCAP_REPLAY_HOST_GUARD=1; off by default
 * because it made driver 580 refuse the hints, see replay_run.c) the
 * super-ranges are held in the host address space with PROT_NONE mappings
 * before libcuda is loaded (rp_mem_host_guard). Replayed
 * allocation calls then need no memory of their own, and every pointer the
 * program kept (in argument blocks or inside device memory) stays valid.
 *
 * Relocation: a recorded range outside the fixed mapping gets a fresh
 * cuMemAlloc; addresses are translated through the table of live
 * relocations (recorded ranges may be reused by later allocations, so an
 * Alloc replaces overlapping entries and a Free removes its entry). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cucap_log.h"
#include "replay_internal.h"

#define RP_MIN_ALIGN ((uint64_t)2 << 20)

int rp_mem_add_recorded(rp_mem *m, uint64_t addr, uint64_t size) {
  if (!size || addr + size < addr)
    return 1;
  if (m->nrecorded == m->caprecorded) {
    size_t nc = m->caprecorded ? m->caprecorded * 2 : 64;
    rp_range *n = realloc(m->recorded, nc * sizeof *n);
    if (!n)
      return 0;
    m->recorded = n;
    m->caprecorded = nc;
  }
  m->recorded[m->nrecorded].addr = addr;
  m->recorded[m->nrecorded].size = size;
  m->nrecorded++;
  return 1;
}

static int rp_range_cmp(const void *a, const void *b) {
  const rp_range *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Sorts and merges overlapping ranges in place (align 1 = exact union). */
static size_t rp_union(rp_range *r, size_t n, uint64_t align) {
  if (!n)
    return 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t s = r[i].addr & ~(align - 1);
    uint64_t e = (r[i].addr + r[i].size + align - 1) & ~(align - 1);
    r[i].addr = s;
    r[i].size = e - s;
  }
  qsort(r, n, sizeof *r, rp_range_cmp);
  size_t o = 0;
  for (size_t i = 1; i < n; i++) {
    uint64_t oe = r[o].addr + r[o].size;
    if (r[i].addr <= oe) {
      uint64_t ie = r[i].addr + r[i].size;
      if (ie > oe)
        r[o].size = ie - r[o].addr;
    } else {
      r[++o] = r[i];
    }
  }
  return o + 1;
}

void rp_mem_sort_recorded(rp_mem *m) {
  m->nrecorded = rp_union(m->recorded, m->nrecorded, 1);
}

static uint64_t rp_super_align(uint64_t gran) {
  return gran > RP_VA_HINT_ALIGN ? gran : RP_VA_HINT_ALIGN;
}

/* Computes the super-ranges for a given alignment (fixed[] replaced). */
static int rp_plan_align(rp_mem *m, uint64_t align) {
  free(m->fixed);
  m->fixed = NULL;
  m->nfixed = 0;
  if (!m->nrecorded)
    return 1;
  rp_range *u = malloc(m->nrecorded * sizeof *u);
  if (!u)
    return 0;
  memcpy(u, m->recorded, m->nrecorded * sizeof *u);
  size_t nu = rp_union(u, m->nrecorded, align);
  m->fixed = calloc(nu, sizeof *m->fixed);
  if (!m->fixed) {
    free(u);
    return 0;
  }
  for (size_t i = 0; i < nu; i++) {
    m->fixed[i].addr = u[i].addr;
    m->fixed[i].size = u[i].size;
  }
  m->nfixed = nu;
  free(u);
  return 1;
}

int rp_mem_plan(rp_mem *m) {
  if (m->planned)
    return 1;
  /* exact union (kept for rp_mem_is_recorded) */
  m->nrecorded = rp_union(m->recorded, m->nrecorded, 1);
  if (!rp_plan_align(m, RP_VA_HINT_ALIGN))
    return 0;
  m->planned = 1;
  return 1;
}

size_t rp_mem_host_guard(rp_mem *m) {
  size_t n = 0;
  if (!rp_mem_plan(m))
    return 0;
  for (size_t i = 0; i < m->nfixed; i++) {
    rp_fixed *f = &m->fixed[i];
    void *p = mmap((void *)(uintptr_t)f->addr, f->size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
                       MAP_FIXED_NOREPLACE,
                   -1, 0);
    if (p == MAP_FAILED)
      continue; /* already taken (e.g. the capture file's mapping) */
    if (p != (void *)(uintptr_t)f->addr) { /* kernel without NOREPLACE */
      munmap(p, f->size);
      continue;
    }
    f->host_guard = 1;
    n++;
  }
  return n;
}

static void rp_unguard(rp_fixed *f) {
  if (f->host_guard) {
    munmap((void *)(uintptr_t)f->addr, f->size);
    f->host_guard = 0;
  }
}

static void rp_chunk_undo(rp_driver *d, rp_chunk *c) {
  if (c->mapped && d->df.MemUnmap)
    d->df.MemUnmap(c->addr, c->size);
  if (c->created && d->df.MemRelease)
    d->df.MemRelease(c->h);
  c->mapped = c->created = 0;
}

size_t rp_mem_place_fixed(rp_mem *m, rp_driver *d, CUdevice dev,
                          uint64_t *ranges, uint64_t *bytes) {
  *bytes = 0;
  *ranges = 0;
  if (!m->nrecorded)
    return 0;
  if (!d->df.MemAddressReserve || !d->df.MemCreate || !d->df.MemMap ||
      !d->df.MemSetAccess) {
    CUCAP_WARN("replay: driver lacks VMM entry points; relocating");
    rp_mem_sort_recorded(m);
    return m->nrecorded;
  }
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0;
  uint64_t align = RP_MIN_ALIGN;
  if (d->df.MemGetAllocationGranularity &&
      d->df.MemGetAllocationGranularity(&gran, &prop,
                                        CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
          CUDA_SUCCESS &&
      gran > align && (gran & (gran - 1)) == 0)
    align = gran;
  if (!rp_mem_plan(m))
    return m->nrecorded;
  if (rp_super_align(align) != RP_VA_HINT_ALIGN) {
    /* granularity above 32 MiB: re-plan (no host guard then) */
    for (size_t i = 0; i < m->nfixed; i++)
      rp_unguard(&m->fixed[i]);
    if (!rp_plan_align(m, rp_super_align(align)))
      return m->nrecorded;
  }
  /* the pieces actually backed: the granularity-aligned union */
  rp_range *u = malloc(m->nrecorded * sizeof *u);
  if (!u)
    return m->nrecorded;
  memcpy(u, m->recorded, m->nrecorded * sizeof *u);
  size_t nu = rp_union(u, m->nrecorded, align);
  m->chunks = calloc(nu ? nu : 1, sizeof *m->chunks);
  if (!m->chunks) {
    free(u);
    return m->nrecorded;
  }
  CUmemAccessDesc acc;
  memset(&acc, 0, sizeof acc);
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  size_t failed = 0, ui = 0;
  for (size_t i = 0; i < m->nfixed; i++) {
    rp_fixed *f = &m->fixed[i];
    size_t u0 = ui; /* pieces [u0, ui) lie inside this super-range */
    while (ui < nu && u[ui].addr < f->addr + f->size)
      ui++;
    rp_unguard(f); /* give the range back to the kernel for the driver */
    CUdeviceptr p = 0;
    CUresult r = d->df.MemAddressReserve(&p, f->size, 0, f->addr, 0);
    if (r != CUDA_SUCCESS || p != f->addr) {
      CUCAP_WARN("replay: cannot reserve 0x%llx+0x%llx (32 MiB-aligned "
                 "super-range) at its recorded address (%s, got 0x%llx); "
                 "relocating allocations there",
                 (unsigned long long)f->addr, (unsigned long long)f->size,
                 r == CUDA_SUCCESS ? "other address" : rp_cu_err(d, r),
                 (unsigned long long)p);
      if (r == CUDA_SUCCESS && p && d->df.MemAddressFree)
        d->df.MemAddressFree(p, f->size);
      failed += ui - u0;
      continue;
    }
    f->reserved = 1;
    (*ranges)++;
    for (size_t k = u0; k < ui; k++) {
      rp_chunk c;
      memset(&c, 0, sizeof c);
      c.addr = u[k].addr;
      c.size = u[k].size;
      r = d->df.MemCreate(&c.h, c.size, &prop, 0);
      if (r == CUDA_SUCCESS) {
        c.created = 1;
        r = d->df.MemMap(c.addr, c.size, 0, c.h, 0);
      }
      if (r == CUDA_SUCCESS) {
        c.mapped = 1;
        r = d->df.MemSetAccess(c.addr, c.size, &acc, 1);
      }
      if (r != CUDA_SUCCESS) {
        CUCAP_WARN("replay: cannot back 0x%llx+0x%llx with device memory "
                   "(%s); relocating allocations there",
                   (unsigned long long)c.addr, (unsigned long long)c.size,
                   rp_cu_err(d, r));
        rp_chunk_undo(d, &c);
        failed++;
        continue;
      }
      m->chunks[m->nchunks++] = c;
      *bytes += c.size;
    }
  }
  free(u);
  return failed;
}

int rp_mem_is_fixed(const rp_mem *m, uint64_t addr, uint64_t size) {
  size_t lo = 0, hi = m->nchunks;
  while (lo < hi) { /* chunks[] is sorted and disjoint */
    size_t mid = (lo + hi) / 2;
    const rp_chunk *c = &m->chunks[mid];
    if (addr < c->addr)
      hi = mid;
    else if (addr >= c->addr + c->size)
      lo = mid + 1;
    else
      return addr + size <= c->addr + c->size;
  }
  return 0;
}

int rp_mem_is_recorded(const rp_mem *m, uint64_t addr) {
  size_t lo = 0, hi = m->nrecorded;
  while (lo < hi) { /* recorded[] is a sorted union after place_fixed */
    size_t mid = (lo + hi) / 2;
    const rp_range *r = &m->recorded[mid];
    if (addr < r->addr)
      hi = mid;
    else if (addr >= r->addr + r->size)
      lo = mid + 1;
    else
      return 1;
  }
  return 0;
}

int rp_mem_add_reloc(rp_mem *m, uint64_t addr, uint64_t size, uint64_t live,
                     int owned) {
  /* drop entries this range overlaps (address reuse after a free) */
  for (size_t i = 0; i < m->nreloc;) {
    rp_reloc *r = &m->reloc[i];
    if (r->addr < addr + size && addr < r->addr + r->size && !r->owned) {
      m->reloc[i] = m->reloc[--m->nreloc];
      continue;
    }
    i++;
  }
  if (m->nreloc == m->capreloc) {
    size_t nc = m->capreloc ? m->capreloc * 2 : 32;
    rp_reloc *n = realloc(m->reloc, nc * sizeof *n);
    if (!n)
      return 0;
    m->reloc = n;
    m->capreloc = nc;
  }
  /* newest first wins on lookup: append and search from the end */
  rp_reloc *r = &m->reloc[m->nreloc++];
  r->addr = addr;
  r->size = size;
  r->live = live;
  r->owned = owned;
  return 1;
}

uint64_t rp_mem_del_reloc(rp_mem *m, uint64_t addr) {
  for (size_t i = m->nreloc; i-- > 0;) {
    if (m->reloc[i].addr == addr) {
      uint64_t live = m->reloc[i].owned ? m->reloc[i].live : 0;
      memmove(&m->reloc[i], &m->reloc[i + 1],
              (m->nreloc - i - 1) * sizeof *m->reloc);
      m->nreloc--;
      return live;
    }
  }
  return 0;
}

CUresult rp_mem_zero(const rp_mem *m, const rp_driver *d) {
  CUresult r = CUDA_SUCCESS;
  for (size_t i = 0; i < m->nchunks && r == CUDA_SUCCESS; i++)
    if (m->chunks[i].mapped)
      r = d->df.MemsetD8Async(m->chunks[i].addr, 0, m->chunks[i].size, NULL);
  if (m->nchunks && r == CUDA_SUCCESS)
    r = d->df.StreamSynchronize(NULL);
  return r;
}

void rp_mem_release(rp_mem *m, rp_driver *d) {
  for (size_t i = 0; i < m->nreloc; i++)
    if (m->reloc[i].owned && d->df.MemFree)
      d->df.MemFree(m->reloc[i].live);
  for (size_t i = 0; i < m->nchunks; i++)
    rp_chunk_undo(d, &m->chunks[i]);
  for (size_t i = 0; i < m->nfixed; i++) {
    rp_fixed *f = &m->fixed[i];
    if (f->reserved && d->df.MemAddressFree)
      d->df.MemAddressFree(f->addr, f->size);
    rp_unguard(f);
  }
  free(m->recorded);
  free(m->fixed);
  free(m->chunks);
  free(m->reloc);
  memset(m, 0, sizeof *m);
}
