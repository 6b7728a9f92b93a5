/* replay_paycache.c - copy payloads kept in page-locked memory across passes.
 *
 * A copy to the device replays its payload from the capture: the blob is
 * decompressed into a staging buffer and copied from there, in every pass.
 * A profile runs the same window 10-15 times, and a program that uploads a
 * large input before it pays that each time, which can be a large share
 * of a `--metrics=full` profile (rt_profile's 256 MiB upload shows it;
 * CUCAP_REPLAY_PAYLOAD_CACHE_MB=0 turns the cache off to compare;
 * docs/bench-log.md, "Payload cache").
 *
 * In a multi-pass run (the same rule as kept modules: --loop N, an observer
 * that keeps contexts, or a pass after the first) a copy of at least
 * a MiB or more keeps its payload, decompressed and with its
 * pointers relocated (rp_patch_payload), in a page-locked buffer of its own,
 * keyed by the copy's record index (the same in every pass). Later passes
 * copy from that buffer: one DMA, no decompression, no staging wait. The
 * relocation of pointers inside the payload depends on where this pass
 * placed things: the entry remembers a hash of the relocation table it was
 * patched with, and a pass whose table differs reads and patches it again.
 * Payloads that hold texture/surface handles (R->obj: handles are new in
 * each pass) and copies inside a stream capture take the staging path.
 *
 * Budget: CUCAP_REPLAY_PAYLOAD_CACHE_MB (default: a quarter of physical
 * memory, at most 8 GiB; 0 turns it off); past it, copies stage as before.
 *
 * Device copies: in a pass whose observers measure kernels only
 * (cucap_replay_session_device_uploads: the profiler's counter, PC and
 * SASS passes), a cached payload also gets a copy in device memory, made
 * at its first such use, and the upload becomes a device-to-device copy
 * on the same stream (device memory is far faster than the host link;
 * CUCAP_REPLAY_PAYLOAD_DEVICE_MB=0 turns it off to compare). The device
 * copy lives in the context of the copy's first such use, which must last the run
 * (the primary context, or any with cucap_replay_session_keep_contexts);
 * a copy in another context uses the host copy. Budget:
 * CUCAP_REPLAY_PAYLOAD_DEVICE_MB, default a quarter of the free device
 * memory at the first device copy, at most 8 GiB; 0 turns it off.
 *
 * Owns: the cache table (R->buf.pc) and its page-locked buffers, freed at the
 * end of the run (rp_paycache_free, while the primary context lives). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cucap_knobs.h"
#include "cucap_log.h"
#include "cucap_vec.h"
#include "replay_state.h"

/* smaller copies decompress in microseconds; CUCAP_REPLAY_PAYLOAD_CACHE_MIN
 * (bytes) overrides it for tests */
static uint64_t pc_min(void) {
  return cucap_knob_u64(CUCAP_KNOB(CUCAP_REPLAY_PAYLOAD_CACHE_MIN));
}

typedef struct pc_ent {
  void *buf;           /* page-locked, the patched payload */
  uint64_t size;       /* bytes copied */
  uint64_t reloc_key;  /* relocation table it was patched with */
  uint64_t patched;    /* pointers rewritten in it (for the report) */
  CUdeviceptr dev;     /* device copy of buf (0: none yet) */
  CUcontext dev_ctx;   /* where dev was allocated */
  uint64_t dev_key;    /* reloc_key of buf when dev was filled */
} pc_ent;

struct rp_paycache {
  pc_ent *e;
  size_t n, cap;
  cucap_map by_rec; /* copy record index -> slot + 1 */
  uint64_t bytes, budget, min;
  uint64_t hits, hit_bytes;
  int full_noted;
  uint64_t dev_bytes, dev_budget, dev_hits, dev_hit_bytes;
  int dev_budget_set, dev_full_noted;
};

static uint64_t pc_budget(void) {
  if (cucap_knob_given(CUCAP_KNOB(CUCAP_REPLAY_PAYLOAD_CACHE_MB)))
    return cucap_knob_u64(CUCAP_KNOB(CUCAP_REPLAY_PAYLOAD_CACHE_MB)) << 20;
  long pages = sysconf(_SC_PHYS_PAGES), pg = sysconf(_SC_PAGESIZE);
  uint64_t quarter = pages > 0 && pg > 0 ? (uint64_t)pages * (uint64_t)pg / 4 : 0;
  uint64_t cap = (uint64_t)8 << 30;
  return quarter < cap ? quarter : cap;
}

/* FNV-1a over the relocation table: equal tables patch equally. */
static uint64_t pc_reloc_key(const rp_state *R) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < R->mem.nreloc; i++) {
    const rp_reloc *r = &R->mem.reloc[i];
    uint64_t w[3] = {r->addr, r->size, r->live};
    const uint8_t *p = (const uint8_t *)w;
    for (size_t k = 0; k < sizeof w; k++)
      h = (h ^ p[k]) * 1099511628211ull;
  }
  return h;
}

void *rp_paycache_get(rp_state *R, const cucap_fb_memcpy *c, uint64_t size,
                      uint64_t dst, const cucap_fb_copy_geometry *g) {
  if (R->capturing || R->obj || !rp_multipass(R))
    return NULL;
  if (!R->buf.pc) {
    uint64_t b = pc_budget();
    if (!b || !(R->buf.pc = calloc(1, sizeof *R->buf.pc)))
      return NULL;
    R->buf.pc->budget = b;
    R->buf.pc->min = pc_min();
  }
  if (size < R->buf.pc->min)
    return NULL;
  struct rp_paycache *P = R->buf.pc;
  cucap_hash128 h = rp_h(cucap_fb_memcpy_payload(c));
  uint64_t bsz = 0;
  if (cucap_reader_blob_size(R->r, h, &bsz) != CUCAP_OK || bsz < size)
    return NULL;
  uint64_t key = pc_reloc_key(R), slot = 0;
  pc_ent *e = NULL;
  if (cucap_map_get(&P->by_rec, R->rec_index, &slot)) {
    e = &P->e[slot - 1];
    if (e->size != bsz)
      return NULL; /* not the same copy (cannot happen in file order) */
    if (e->reloc_key == key) {
      P->hits++;
      P->hit_bytes += bsz;
      R->rep->patched_pointers += e->patched;
      return e->buf;
    }
  } else {
    if (P->bytes + bsz > P->budget) {
      if (!P->full_noted++)
        CUCAP_INFO("replay: payload cache full (%" PRIu64 " MiB): larger copies "
                   "are read from the capture in every pass", P->budget >> 20);
      return NULL;
    }
    if (!CUCAP_VEC_RESERVE(P->e, P->cap, P->n + 1, 16))
      return NULL;
    void *buf = rp_host_buf_alloc(R, bsz);
    if (!buf)
      return NULL;
    if (!cucap_map_put(&P->by_rec, R->rec_index, P->n + 1)) {
      rp_host_buf_free(R, buf);
      return NULL;
    }
    e = &P->e[P->n++];
    memset(e, 0, sizeof *e);
    e->buf = buf;
    e->size = bsz;
    P->bytes += bsz;
  }
  /* first use, or the relocations moved: read and patch it again (the
   * previous pass's copies from it finished at that pass's end) */
  if (cucap_reader_blob_read(R->r, h, e->buf, bsz) != CUCAP_OK) {
    e->reloc_key = ~key; /* never a hit */
    return NULL;
  }
  uint64_t before = R->rep->patched_pointers;
  rp_patch_payload(R, e->buf, size, dst, g);
  e->patched = R->rep->patched_pointers - before;
  e->reloc_key = key;
  return e->buf;
}

static uint64_t pc_dev_budget(rp_state *R) {
  if (cucap_knob_given(CUCAP_KNOB(CUCAP_REPLAY_PAYLOAD_DEVICE_MB)))
    return cucap_knob_u64(CUCAP_KNOB(CUCAP_REPLAY_PAYLOAD_DEVICE_MB)) << 20;
  size_t fr = 0, tot = 0;
  if (!R->d.df.MemGetInfo || R->d.df.MemGetInfo(&fr, &tot) != CUDA_SUCCESS)
    return 0;
  uint64_t q = (uint64_t)fr / 4, cap = (uint64_t)8 << 30;
  return q < cap ? q : cap;
}

CUdeviceptr rp_paycache_device(rp_state *R, const void *hb) {
  struct rp_paycache *P = R->buf.pc;
  uint64_t slot = 0;
  if (!P || !hb || !R->cx.cur || (R->cx.cur != R->cx.primary && !R->cx.keep_ctx) ||
      !R->d.df.MemAlloc || !R->d.df.MemcpyDtoDAsync || !cucap_map_get(&P->by_rec, R->rec_index, &slot))
    return 0;
  pc_ent *e = &P->e[slot - 1];
  if (e->buf != hb || (e->dev && e->dev_ctx != R->cx.cur))
    return 0;
  if (e->dev && e->dev_key == e->reloc_key) {
    P->dev_hits++;
    P->dev_hit_bytes += e->size;
    return e->dev;
  }
  if (!e->dev) {
    if (!P->dev_budget_set) {
      P->dev_budget = pc_dev_budget(R);
      P->dev_budget_set = 1;
    }
    if (P->dev_bytes + e->size > P->dev_budget) {
      if (P->dev_budget && !P->dev_full_noted++)
        CUCAP_INFO("replay: device payload budget full (%" PRIu64 " MiB): larger "
                   "uploads come from host memory", P->dev_budget >> 20);
      return 0;
    }
    if (R->d.df.MemAlloc(&e->dev, e->size) != CUDA_SUCCESS) {
      e->dev = 0;
      P->dev_budget = P->dev_bytes; /* no more tries */
      return 0;
    }
    P->dev_bytes += e->size;
    e->dev_ctx = R->cx.cur;
  }
  /* fill (or refill after the relocations moved) from the host copy; the
   * NULL stream orders it before this pass's later work in the context */
  if (R->d.df.MemcpyHtoDAsync(e->dev, e->buf, e->size, NULL) != CUDA_SUCCESS ||
      R->d.df.StreamSynchronize(NULL) != CUDA_SUCCESS)
    return 0;
  e->dev_key = e->reloc_key;
  return e->dev;
}

void rp_paycache_free_device(rp_state *R) {
  struct rp_paycache *P = R->buf.pc;
  if (!P)
    return;
  if (P->dev_hits)
    CUCAP_INFO("replay: %" PRIu64 " uploads (%" PRIu64 " MiB) replayed from "
               "device copies of their payloads (%" PRIu64 " MiB of device "
               "memory)", P->dev_hits, P->dev_hit_bytes >> 20, P->dev_bytes >> 20);
  P->dev_hits = 0;
  for (size_t i = 0; i < P->n; i++) {
    if (P->e[i].dev && R->d.df.MemFree)
      R->d.df.MemFree(P->e[i].dev); /* any context current: UVA */
    P->e[i].dev = 0;
  }
  P->dev_bytes = 0;
}

void rp_paycache_free(rp_state *R) {
  struct rp_paycache *P = R->buf.pc;
  if (!P)
    return;
  if (P->hits)
    CUCAP_INFO("replay: %" PRIu64 " copies (%" PRIu64 " MiB) replayed from %zu "
               "cached payload(s) (%" PRIu64 " MiB page-locked)", P->hits,
               P->hit_bytes >> 20, P->n, P->bytes >> 20);
  if (R->d.lib)
    rp_paycache_free_device(R);
  for (size_t i = 0; i < P->n; i++)
    if (R->d.lib)
      rp_host_buf_free(R, P->e[i].buf);
  free(P->e);
  cucap_map_free(&P->by_rec);
  free(P);
  R->buf.pc = NULL;
}
