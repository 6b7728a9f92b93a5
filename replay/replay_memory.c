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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cucap_sort.h"
#include "cucap_log.h"
#include "cucap_vec.h"
#include "replay_internal.h"
#include "replay_state.h"

#define RP_MIN_ALIGN ((uint64_t)2 << 20)

int rp_mem_add_recorded(rp_mem *m, uint64_t addr, uint64_t size) {
  if (!size || addr + size < addr)
    return 1;
  if (!CUCAP_VEC_RESERVE(m->recorded, m->caprecorded, m->nrecorded + 1, 64))
    return 0;
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
  cucap_sort(r, n, sizeof *r, rp_range_cmp);
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

void rp_mem_host_unguard(rp_mem *m) {
  for (size_t i = 0; i < m->nfixed; i++)
    rp_unguard(&m->fixed[i]);
}

static void rp_chunk_undo(rp_driver *d, rp_chunk *c) {
  if (c->mapped && d->df.MemUnmap)
    d->df.MemUnmap(c->addr, c->size);
  if (c->created && d->df.MemRelease)
    d->df.MemRelease(c->h);
  c->mapped = c->created = 0;
}

int rp_mem_add_pin(rp_mem *m, uint64_t addr, uint64_t size) {
  if (!size || addr + size < addr)
    return 1;
  if (!CUCAP_VEC_RESERVE(m->pins, m->cappins, m->npins + 1, 16))
    return 0;
  m->pins[m->npins].addr = addr;
  m->pins[m->npins].size = size;
  m->npins++;
  return 1;
}

int rp_mem_near_fixed(rp_mem *m, uint64_t addr, uint64_t size, uint64_t margin) {
  if (!rp_mem_plan(m))
    return 0;
  for (size_t i = 0; i < m->nfixed; i++) {
    uint64_t s = m->fixed[i].addr > margin ? m->fixed[i].addr - margin : 0;
    uint64_t e = m->fixed[i].addr + m->fixed[i].size + margin;
    if (addr < e && s < addr + size)
      return 1;
  }
  return 0;
}

void rp_mem_describe_va(uint64_t addr, uint64_t size, char *buf, size_t n) {
  snprintf(buf, n, "nothing mapped there in this process");
  FILE *fp = fopen("/proc/self/maps", "r");
  if (!fp)
    return;
  char line[512];
  while (fgets(line, sizeof line, fp)) {
    unsigned long long s = 0, e = 0;
    char perms[8] = "", path[400] = "";
    if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %399[^\n]", &s, &e, perms,
               path) < 3)
      continue;
    if (s < addr + size && addr < e) {
      const char *name = path;
      while (*name == ' ')
        name++;
      snprintf(buf, n, "0x%llx-0x%llx %s %s is mapped there", s, e, perms,
               *name ? name : "[anonymous]");
      break;
    }
  }
  fclose(fp);
}

/* Reserves [a, a+size) at exactly a; 1 on success (added to m->resv). */
static int rp_reserve_at(rp_mem *m, rp_driver *d, uint64_t a, uint64_t size,
                         int warn) {
  CUdeviceptr p = 0;
  CUresult r = d->df.MemAddressReserve(&p, size, 0, a, 0);
  if (r == CUDA_SUCCESS && p == a) {
    /* grown by doubling: blocks come by the thousand */
    if (!CUCAP_VEC_RESERVE(m->resv, m->capresv, m->nresv + 1, 16)) {
      if (d->df.MemAddressFree)
        d->df.MemAddressFree(p, size);
      return 0;
    }
    m->resv[m->nresv].addr = a;
    m->resv[m->nresv].size = size;
    m->nresv++;
    return 1;
  }
  if (r == CUDA_SUCCESS && p && d->df.MemAddressFree)
    d->df.MemAddressFree(p, size);
  if (warn) {
    char what[512];
    rp_mem_describe_va(a, size, what, sizeof what);
    CUCAP_WARN("replay: cannot reserve 0x%llx+0x%llx (32 MiB-aligned "
               "range) at its recorded address (%s, got 0x%llx; %s)",
               (unsigned long long)a, (unsigned long long)size,
               r == CUDA_SUCCESS ? "other address" : rp_cu_err(d, r),
               (unsigned long long)p, what);
  }
  return 0;
}

static int rp_range_cmp_addr(const void *a, const void *b) {
  return rp_range_cmp(a, b);
}

/* rp_mem_place_fixed, phase 1: the allocation properties of this GPU's
 * device memory and the alignment of its pieces (the VMM granularity when
 * it is a power of two above RP_MIN_ALIGN). */
static uint64_t rp_place_granularity(rp_driver *d, CUdevice dev,
                                     CUmemAllocationProp *prop) {
  memset(prop, 0, sizeof *prop);
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop->location.id = dev;
  size_t gran = 0;
  uint64_t align = RP_MIN_ALIGN;
  if (d->df.MemGetAllocationGranularity &&
      d->df.MemGetAllocationGranularity(&gran, prop,
                                        CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
          CUDA_SUCCESS &&
      gran > align && (gran & (gran - 1)) == 0)
    align = gran;
  return align;
}

/* rp_mem_place_fixed, phase 2: the pieces to back (malloc'ed, *nu of them,
 * merged at align); NULL when out of memory. */
static rp_range *rp_place_pieces(rp_mem *m, uint64_t align, size_t *nu_out) {
  /* The pieces to back: the recorded device ranges, plus the parts of
   * recorded page-locked host ranges that fall inside a super-range (the
   * driver put pinned host memory next to device memory: inside our
   * reservation it cannot be host memory again, so device memory stands in
   * for it - kernels see the same addresses; host-side contents are not
   * part of a replay anyway). */
  size_t cap = m->nrecorded + m->npins * (m->nfixed ? 2 : 1) + 1;
  rp_range *u = malloc(cap * sizeof *u);
  if (!u)
    return NULL;
  memcpy(u, m->recorded, m->nrecorded * sizeof *u);
  size_t nu = m->nrecorded;
  for (size_t i = 0; i < m->npins; i++) {
    const rp_range *p = &m->pins[i];
    for (size_t k = 0; k < m->nfixed && nu < cap; k++) {
      const rp_fixed *f = &m->fixed[k];
      uint64_t s = p->addr > f->addr ? p->addr : f->addr;
      uint64_t e = p->addr + p->size < f->addr + f->size ? p->addr + p->size
                                                         : f->addr + f->size;
      if (s < e) {
        u[nu].addr = s;
        u[nu].size = e - s;
        nu++;
      }
    }
  }
  *nu_out = rp_union(u, nu, align);
  return u;
}

/* rp_mem_place_fixed, phase 3: the reservations of the super-ranges
 * (counted in *ranges), sorted by address. */
static void rp_place_reserve(rp_mem *m, rp_driver *d, CUdevice dev,
                             const rp_range *u, size_t nu, uint64_t salign,
                             uint64_t *ranges) {
  /* reservations: each super-range whole, else each of its salign blocks
   * that holds something (one collision then costs one block, not all).
   * Blocks one by one are worth only what device memory can back: pieces
   * that fit in it use at most total / salign blocks plus two per piece
   * (its ends). Past that budget the rest is relocated; without it, an
   * absurd recorded size cost one driver call per 32 MiB block (and as
   * many failing cuMemCreate calls after). */
  size_t total = 0;
  if (!d->df.DeviceTotalMem || d->df.DeviceTotalMem(&total, dev) != CUDA_SUCCESS)
    total = 0;
  uint64_t budget = total / salign + 2 * (uint64_t)nu + 1;
  size_t ui = 0;
  for (size_t i = 0; i < m->nfixed; i++) {
    rp_fixed *f = &m->fixed[i];
    size_t u0 = ui;
    while (ui < nu && u[ui].addr < f->addr + f->size)
      ui++;
    rp_unguard(f); /* give the range back to the kernel for the driver */
    if (rp_reserve_at(m, d, f->addr, f->size, 0)) {
      f->reserved = 1;
      (*ranges)++;
      continue;
    }
    size_t nb = 0, okb = 0;
    int over = 0;
    for (uint64_t b = f->addr; b < f->addr + f->size; b += salign) {
      int used = 0;
      for (size_t k = u0; k < ui && !used; k++)
        used = u[k].addr < b + salign && b < u[k].addr + u[k].size;
      if (!used)
        continue;
      if (!budget) {
        over = 1;
        break;
      }
      budget--;
      nb++;
      if (f->size > salign && rp_reserve_at(m, d, b, salign, 0))
        okb++;
    }
    if (okb < nb || over) {
      char what[512];
      rp_mem_describe_va(f->addr, f->size, what, sizeof what);
      CUCAP_WARN("replay: cannot reserve 0x%llx+0x%llx (32 MiB-aligned "
                 "super-range) at its recorded address; %zu of %s%zu used "
                 "32 MiB block(s) reserved one by one%s, allocations in the "
                 "others are relocated (%s)",
                 (unsigned long long)f->addr, (unsigned long long)f->size, okb,
                 over ? "the first " : "its ", nb,
                 over ? " (more than device memory could back)" : "", what);
    }
    *ranges += okb;
    f->reserved = okb > 0;
  }
  /* m->resv is still NULL when no reservation was made */
  if (m->nresv > 1)
    cucap_sort(m->resv, m->nresv, sizeof *m->resv, rp_range_cmp_addr);
}

/* rp_mem_place_fixed, phase 4: device memory behind every piece, clipped to
 * the reservations (bytes in *bytes). Returns the pieces not wholly backed,
 * or (size_t)-1 when out of memory for the chunk table. */
static size_t rp_place_back(rp_mem *m, rp_driver *d,
                            const CUmemAllocationProp *prop, const rp_range *u,
                            size_t nu, uint64_t *bytes) {
  /* back every piece, clipped to the reservations */
  m->chunks = calloc(nu + m->nresv + 1, sizeof *m->chunks);
  if (!m->chunks)
    return (size_t)-1;
  CUmemAccessDesc acc;
  memset(&acc, 0, sizeof acc);
  acc.location = prop->location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  size_t cap_chunks = nu + m->nresv + 1;
  size_t failed = 0;
  for (size_t k = 0; k < nu; k++) {
    uint64_t ps = u[k].addr, pe = u[k].addr + u[k].size, covered = 0;
    for (size_t j = 0; j < m->nresv; j++) {
      uint64_t s = ps > m->resv[j].addr ? ps : m->resv[j].addr;
      uint64_t e = pe < m->resv[j].addr + m->resv[j].size
                       ? pe : m->resv[j].addr + m->resv[j].size;
      if (s >= e)
        continue;
      if (!CUCAP_VEC_RESERVE(m->chunks, cap_chunks, m->nchunks + 1, 1))
        break;
      rp_chunk c;
      memset(&c, 0, sizeof c);
      c.addr = s;
      c.size = e - s;
      CUresult r = d->df.MemCreate(&c.h, c.size, prop, 0);
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
        continue;
      }
      m->chunks[m->nchunks++] = c;
      *bytes += c.size;
      covered += c.size;
    }
    if (covered < pe - ps)
      failed++;
  }
  return failed;
}

size_t rp_mem_place_fixed(rp_mem *m, rp_driver *d, CUdevice dev,
                          uint64_t *ranges, uint64_t *bytes) {
  *bytes = 0;
  *ranges = 0;
  m->pins_backed = 0;
  if (!m->nrecorded)
    return 0;
  if (!d->df.MemAddressReserve || !d->df.MemCreate || !d->df.MemMap ||
      !d->df.MemSetAccess) {
    CUCAP_WARN("replay: driver lacks VMM entry points; relocating");
    rp_mem_sort_recorded(m);
    return m->nrecorded;
  }
  CUmemAllocationProp prop;
  uint64_t align = rp_place_granularity(d, dev, &prop);
  if (!rp_mem_plan(m))
    return m->nrecorded;
  uint64_t salign = rp_super_align(align);
  if (salign != RP_VA_HINT_ALIGN) {
    /* granularity above 32 MiB: re-plan (no host guard then) */
    for (size_t i = 0; i < m->nfixed; i++)
      rp_unguard(&m->fixed[i]);
    if (!rp_plan_align(m, salign))
      return m->nrecorded;
  }
  size_t nu = 0;
  rp_range *u = rp_place_pieces(m, align, &nu);
  if (!u)
    return m->nrecorded;
  rp_place_reserve(m, d, dev, u, nu, salign, ranges);
  size_t failed = rp_place_back(m, d, &prop, u, nu, bytes);
  free(u);
  if (failed == (size_t)-1)
    return m->nrecorded;
  for (size_t i = 0; i < m->npins; i++)
    if (rp_mem_is_fixed(m, m->pins[i].addr, m->pins[i].size))
      m->pins_backed++;
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
    else {
      /* covered by this chunk and the ones that follow it without a gap
       * (a piece split at a reservation boundary) */
      uint64_t end = c->addr + c->size;
      for (size_t k = mid + 1; end < addr + size && k < m->nchunks &&
                               m->chunks[k].addr == end; k++)
        end = m->chunks[k].addr + m->chunks[k].size;
      return addr + size <= end;
    }
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
  if (!CUCAP_VEC_RESERVE(m->reloc, m->capreloc, m->nreloc + 1, 32))
    return 0;
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

size_t rp_mem_patch_row(const rp_mem *m, uint8_t *buf, uint64_t n,
                        uint64_t dev) {
  if (!m->nreloc || !n)
    return 0;
  /* cheap filter first: most words of real data (floats, small integers)
   * are nowhere near the recorded ranges */
  uint64_t lo = UINT64_MAX, hi = 0;
  for (size_t i = 0; i < m->nreloc; i++) {
    if (m->reloc[i].addr < lo)
      lo = m->reloc[i].addr;
    if (m->reloc[i].addr + m->reloc[i].size > hi)
      hi = m->reloc[i].addr + m->reloc[i].size;
  }
  size_t patched = 0;
  /* pointers are 8-aligned in device memory: start at the first offset
   * whose device address is */
  for (uint64_t off = (8 - (dev & 7)) & 7; off + 8 <= n; off += 8) {
    uint64_t v;
    memcpy(&v, buf + off, 8);
    if (v - lo >= hi - lo)
      continue;
    int rel = 0;
    uint64_t nv = rp_mem_translate(m, v, &rel);
    if (rel && nv != v) {
      memcpy(buf + off, &nv, 8);
      patched++;
    }
  }
  return patched;
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
  for (size_t i = 0; i < m->nresv; i++)
    if (d->df.MemAddressFree)
      d->df.MemAddressFree(m->resv[i].addr, m->resv[i].size);
  for (size_t i = 0; i < m->nfixed; i++)
    rp_unguard(&m->fixed[i]);
  free(m->resv);
  free(m->pins);
  free(m->recorded);
  free(m->fixed);
  free(m->chunks);
  free(m->reloc);
  memset(m, 0, sizeof *m);
}

void rp_patch_payload(rp_state *R, void *hb, uint64_t size, uint64_t dst,
                      const cucap_fb_copy_geometry *g) {
  if (!R->mem.nreloc || !hb)
    return;
  uint8_t *b = hb;
  if (!g) {
    R->rep->patched_pointers += rp_mem_patch_row(&R->mem, b, size, dst);
    return;
  }
  /* packed rows of width bytes; row (y, z) lands at its pitched address */
  uint64_t w = cucap_fb_copy_geometry_width_bytes(g);
  uint64_t h = cucap_fb_copy_geometry_height(g) ? cucap_fb_copy_geometry_height(g) : 1;
  uint64_t dd = cucap_fb_copy_geometry_depth(g) ? cucap_fb_copy_geometry_depth(g) : 1;
  uint64_t pitch = cucap_fb_copy_geometry_dst_pitch(g);
  uint64_t dh = cucap_fb_copy_geometry_dst_height(g);
  uint64_t x0 = cucap_fb_copy_geometry_dst_x_bytes(g), y0 = cucap_fb_copy_geometry_dst_y(g);
  uint64_t z0 = cucap_fb_copy_geometry_dst_z(g);
  /* rows of 0 bytes hold no pointer (and never run past the payload: a
   * recorded 2^32 x 2^32 of them was a fuzz_replay timeout) */
  if (!w)
    return;
  for (uint64_t z = 0; z < dd; z++)
    for (uint64_t y = 0; y < h; y++) {
      uint64_t off = (z * h + y) * w;
      if (off + w > size)
        return;
      uint64_t dev = dst + x0 + (y0 + y) * pitch + (z0 + z) * pitch * dh;
      R->rep->patched_pointers += rp_mem_patch_row(&R->mem, b + off, w, dev);
    }
}
