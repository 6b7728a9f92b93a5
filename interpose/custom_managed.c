/* custom_managed.c - what a program reads and writes through managed memory.
 *
 * Managed memory (cuMemAllocManaged, cudaMallocManaged) moves between host
 * and device without a copy call, so neither what the host wrote before a
 * kernel nor what the program read back after it appears in a Memcpy. This
 * file records both, as Snapshot records (capture/ format 1.2):
 *
 *  - HostWrite, before GPU work: a managed range the GPU has not touched
 *    since the program last synchronised with it ("host state") may have
 *    been written by the host. Before a launch, its contents are read and
 *    hashed; when they differ from what the replay will have there (the
 *    last snapshot of it), the bytes are stored and the replayer uploads
 *    them at that point. Every host-state range is checked once per host
 *    epoch (between two synchronisations), those a launch's parameters point
 *    into before every such launch.
 *  - SyncPoint, after the program's own synchronisations: ranges written by
 *    GPU work that the synchronisation covers are read and, when their
 *    contents changed since the last snapshot (XXH3-128), stored; the
 *    replayer verifies them at the same point. cuCtxSynchronize covers every
 *    range; cuStreamSynchronize / successful cuStreamQuery of stream s the
 *    ranges only s wrote; cuEventSynchronize / successful cuEventQuery of e
 *    the ranges the stream e was recorded on wrote before it. Ranges written
 *    by work whose accesses are unknown (graph launches) or by several
 *    streams wait for a context synchronisation or exit.
 *  - At exit, ranges still written by unsynchronised GPU work are snapshot
 *    after a context synchronisation (the program has finished; nothing of
 *    it can observe that).
 *
 * Which ranges a launch writes: 8-byte words of its parameter block that
 * point into a managed range (pointers stored elsewhere, e.g. inside device
 * structures, are caught by the context-wide checks).
 *
 * Reading: a device-side copy of the managed range into a pinned staging
 * buffer on a recorder-owned non-blocking stream (cuMemcpyDtoHAsync +
 * cuStreamSynchronize of that stream only: no wait on the program's
 * streams, and no page migration, which a host-side read of device-resident
 * pages would cause). The cost is one copy of each dirty range per
 * synchronisation (pinned DtoH, at the host link's bandwidth) plus one hash;
 * unchanged ranges store nothing. Nothing here runs while the launch's
 * stream is capturing, or when no managed allocation exists (one atomic
 * load per launch/copy/sync). All driver calls run in RELAXED capture mode.
 * This file owns the range list, the staging buffer and the streams. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_vec.h"
#include "custom_internal.h"

#define CX_STAGING (8u << 20)
#define CX_EVENTS 1024
#define CX_STREAMS 16

typedef struct mrange {
  uint64_t addr, size;
  int gpu;              /* GPU work may have written it since the last covering sync */
  int multi;            /* ... on several streams, or accesses unknown */
  uint64_t stream;      /* the stream that did (when !multi) */
  uint64_t tick;        /* g_tick when it was last written */
  uint64_t epoch;       /* host epoch of the last HostWrite check */
  int has_hash;
  cucap_hash128 hash;   /* contents the replay has there after the last snapshot */
} mrange;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static mrange *g_r;           /* sorted by addr */
static size_t g_n, g_cap;
static atomic_int g_count;
static uint64_t g_tick, g_epoch = 1;
static int g_unknown;         /* GPU work with unknown managed accesses since the last ctx sync */
static struct { uint64_t ev, stream, tick; } g_ev[CX_EVENTS];
static size_t g_nev, g_ev_next;
static struct { uint64_t ctx; CUstream s; } g_streams[CX_STREAMS];
static void *g_stage;
static int g_stage_pageable;
static pthread_once_t g_exit_once = PTHREAD_ONCE_INIT;

int cx_managed_any(void) { return atomic_load_explicit(&g_count, memory_order_relaxed) != 0; }

static uint64_t skey(CUstream s) {
  uint64_t k = CX_U64(s);
  return k == CX_U64(CU_STREAM_LEGACY) ? 0 : k;
}

/* index of the range containing p, or -1 (g_mu held) */
static long find_locked(uint64_t p) {
  size_t lo = 0, hi = g_n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (g_r[mid].addr <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return -1;
  const mrange *r = &g_r[lo - 1];
  return p - r->addr < r->size ? (long)(lo - 1) : -1;
}

static void at_exit_managed(void) { cx_guarded(cx_managed_exit); }
static void register_exit(void) { atexit(at_exit_managed); }

void cx_managed_add(uint64_t addr, uint64_t size) {
  if (!addr || !size)
    return;
  pthread_once(&g_exit_once, register_exit);
  pthread_mutex_lock(&g_mu);
  if (!CUCAP_VEC_RESERVE(g_r, g_cap, g_n + 1, 16)) {
    pthread_mutex_unlock(&g_mu);
    CUCAP_WARN("managed memory tracking: out of memory");
    return;
  }
  size_t i = g_n;
  while (i > 0 && g_r[i - 1].addr > addr) {
    g_r[i] = g_r[i - 1];
    i--;
  }
  memset(&g_r[i], 0, sizeof g_r[i]);
  g_r[i].addr = addr;
  g_r[i].size = size;
  g_n++;
  atomic_store(&g_count, (int)g_n);
  pthread_mutex_unlock(&g_mu);
}

void cx_managed_remove(uint64_t addr) {
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_n; i++)
    if (g_r[i].addr == addr) {
      memmove(&g_r[i], &g_r[i + 1], (g_n - i - 1) * sizeof *g_r);
      g_n--;
      break;
    }
  atomic_store(&g_count, (int)g_n);
  pthread_mutex_unlock(&g_mu);
}

/* ---------------------------------------------------------------- reading */

/* The recorder's own non-blocking stream of the current context (g_mu held). */
static CUstream own_stream_locked(void) {
  uint64_t ctx = cx_current_ctx();
  if (!ctx)
    return NULL;
  for (int i = 0; i < CX_STREAMS; i++)
    if (g_streams[i].ctx == ctx)
      return g_streams[i].s;
  CUstream s = NULL;
  if (!cucap_real.cuStreamCreate ||
      cucap_real.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
    return NULL;
  for (int i = 0; i < CX_STREAMS; i++)
    if (!g_streams[i].ctx) {
      g_streams[i].ctx = ctx;
      g_streams[i].s = s;
      return s;
    }
  return s; /* table full: used once, leaked with its context */
}

/* Reads [addr, addr+size) into out (malloc'ed by the caller) and hashes it.
 * g_mu held (serialises the staging buffer). */
static int read_range_locked(uint64_t addr, uint64_t size, uint8_t *out, cucap_hash128 *h) {
  if (!g_stage) {
    if (!cucap_real.cuMemHostAlloc ||
        cucap_real.cuMemHostAlloc(&g_stage, CX_STAGING, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS) {
      g_stage = malloc(CX_STAGING);
      g_stage_pageable = 1;
    }
    if (!g_stage)
      return 0;
  }
  CUstream s = own_stream_locked();
  if (!s || !cucap_real.cuMemcpyDtoHAsync_v2 || !cucap_real.cuStreamSynchronize)
    return 0;
  for (uint64_t off = 0; off < size;) {
    size_t n = size - off > CX_STAGING ? CX_STAGING : (size_t)(size - off);
    if (cucap_real.cuMemcpyDtoHAsync_v2(g_stage, (CUdeviceptr)(addr + off), n, s) !=
            CUDA_SUCCESS ||
        cucap_real.cuStreamSynchronize(s) != CUDA_SUCCESS)
      return 0;
    memcpy(out + off, g_stage, n);
    off += n;
  }
  *h = cucap_hash128_of(out, (size_t)size);
  return 1;
}

typedef struct region_out {
  uint64_t addr, size;
  cucap_fb_hash128 data;
} region_out;

/* Reads the ranges with sel[i] set; those whose contents differ from their
 * last hash are stored and written as one Snapshot of `reason` (g_mu held
 * on entry and exit; dropped around the blob stores). */
static void snapshot_locked(const char *sel, uint8_t reason) {
  region_out *outs = calloc(g_n ? g_n : 1, sizeof *outs);
  if (!outs)
    return;
  size_t k = 0;
  for (size_t i = 0; i < g_n; i++) {
    if (!sel[i] || g_r[i].size > SIZE_MAX)
      continue;
    uint8_t *buf = malloc((size_t)g_r[i].size);
    cucap_hash128 h;
    if (!buf || !read_range_locked(g_r[i].addr, g_r[i].size, buf, &h)) {
      free(buf);
      CUCAP_DEBUG("managed range 0x%llx not read", (unsigned long long)g_r[i].addr);
      continue;
    }
    if (!g_r[i].has_hash || !cucap_hash128_eq(h, g_r[i].hash)) {
      if (cx_blob(buf, (size_t)g_r[i].size, &outs[k].data)) {
        outs[k].addr = g_r[i].addr;
        outs[k].size = g_r[i].size;
        k++;
        g_r[i].hash = h;
        g_r[i].has_hash = 1;
      }
    }
    free(buf);
  }
  if (k) {
    cucap_fbb *b = cucap_fbb_create(256 + k * 64);
    cucap_fb_ref *refs = malloc(k * sizeof *refs);
    if (b && refs) {
      for (size_t j = 0; j < k; j++) {
        cucap_fb_mem_region_start(b);
        cucap_fb_mem_region_add_address(b, outs[j].addr);
        cucap_fb_mem_region_add_size(b, outs[j].size);
        cucap_fb_mem_region_add_data(b, &outs[j].data);
        refs[j] = cucap_fb_mem_region_end(b);
      }
      cucap_fb_ref v = cucap_fbb_vector_refs(b, refs, k);
      cucap_fb_snapshot_start(b);
      cucap_fb_snapshot_add_reason(b, reason);
      cucap_fb_snapshot_add_regions(b, v);
      cucap_fb_ref body = cucap_fb_snapshot_end(b);
      (void)cucap_rec_emit(b, CUCAP_FB_BODY_SNAPSHOT, body, 0);
    }
    free(refs);
    cucap_fbb_destroy(b);
  }
  free(outs);
}

/* ---------------------------------------------------------------- launches */

/* Host-state ranges not checked in this epoch (and those in `ref`) are
 * checked for host writes (g_mu held). */
static void host_writes_locked(const char *ref) {
  char *sel = calloc(g_n ? g_n : 1, 1);
  if (!sel)
    return;
  int any = 0;
  for (size_t i = 0; i < g_n; i++)
    if (!g_r[i].gpu && (g_r[i].epoch != g_epoch || (ref && ref[i]))) {
      sel[i] = 1;
      g_r[i].epoch = g_epoch;
      any = 1;
    }
  if (any)
    snapshot_locked(sel, CUCAP_FB_SNAPSHOTREASON_HOSTWRITE);
  free(sel);
}

static void mark_locked(size_t i, uint64_t stream, int unknown) {
  mrange *r = &g_r[i];
  if (unknown || (r->gpu && r->stream != stream))
    r->multi = 1;
  else if (!r->gpu)
    r->multi = 0;
  r->gpu = 1;
  r->stream = stream;
  r->tick = ++g_tick;
}

void cx_managed_before_launch(uint64_t f, CUstream s, int variant, void **params,
                              void **extra) {
  if (!cx_managed_any())
    return;
  cx_relaxed rx;
  cx_relax_begin(&rx);
  if (cx_stream_capturing(s, variant)) {
    cx_relax_end(&rx);
    return;
  }
  /* the parameter block as the launch lays it out */
  const cucap_tracked_fn *fn = cx_function_for_launch(f);
  const uint8_t *blk = NULL;
  size_t nblk = 0;
  uint8_t *own = NULL;
  if (!params && extra) {
    const void *p;
    size_t n;
    if (cx_extra_buffer(extra, &p, &n) && p && n <= CX_MAX_PARAM_BYTES) {
      blk = p;
      nblk = n;
    }
  } else if (params && fn && fn->nparams && fn->param_bytes) {
    own = calloc(1, fn->param_bytes);
    if (own) {
      for (uint32_t i = 0; i < fn->nparams; i++) {
        const cucap_param_layout *pl = &fn->params[i];
        if (params[i] && pl->offset <= fn->param_bytes &&
            pl->size <= fn->param_bytes - pl->offset)
          memcpy(own + pl->offset, params[i], pl->size);
      }
      blk = own;
      nblk = fn->param_bytes;
    }
  }
  pthread_mutex_lock(&g_mu);
  char *ref = calloc(g_n ? g_n : 1, 1);
  if (ref) {
    for (size_t o = 0; o + 8 <= nblk; o += 8) {
      uint64_t v;
      memcpy(&v, blk + o, 8);
      long i = find_locked(v);
      if (i >= 0)
        ref[i] = 1;
    }
    host_writes_locked(ref);
    for (size_t i = 0; i < g_n; i++)
      if (ref[i])
        mark_locked(i, skey(s), 0);
    free(ref);
  }
  pthread_mutex_unlock(&g_mu);
  free(own);
  cx_relax_end(&rx);
}

void cx_managed_before_unknown(CUstream s, int variant) {
  if (!cx_managed_any())
    return;
  cx_relaxed rx;
  cx_relax_begin(&rx);
  if (!cx_stream_capturing(s, variant)) {
    pthread_mutex_lock(&g_mu);
    host_writes_locked(NULL);
    for (size_t i = 0; i < g_n; i++)
      mark_locked(i, skey(s), 1);
    g_unknown = 1;
    pthread_mutex_unlock(&g_mu);
  }
  cx_relax_end(&rx);
}

void cx_managed_written(uint64_t dst, uint64_t size, CUstream s, int async) {
  (void)size;
  pthread_mutex_lock(&g_mu);
  long i = find_locked(dst);
  if (i >= 0) {
    /* contents now come from a recorded copy/memset: whatever the host had
     * written there before is overwritten (the replay does the same) */
    g_r[i].epoch = g_epoch;
    if (async)
      mark_locked((size_t)i, skey(s), 0);
    else
      g_r[i].has_hash = 0; /* completed: next snapshot stores it */
  }
  pthread_mutex_unlock(&g_mu);
}

void cx_managed_event_record(uint64_t event, CUstream s) {
  pthread_mutex_lock(&g_mu);
  size_t slot = g_nev;
  for (size_t i = 0; i < g_nev; i++)
    if (g_ev[i].ev == event)
      slot = i;
  if (slot == g_nev) {
    if (g_nev < CX_EVENTS)
      g_nev++;
    else
      slot = g_ev_next++ % CX_EVENTS; /* forget the oldest-ish */
  }
  g_ev[slot].ev = event;
  g_ev[slot].stream = skey(s);
  g_ev[slot].tick = g_tick;
  pthread_mutex_unlock(&g_mu);
}

/* ---------------------------------------------------------------- syncs */

void cx_managed_sync(int kind, uint64_t handle) {
  cx_relaxed rx;
  cx_relax_begin(&rx);
  pthread_mutex_lock(&g_mu);
  uint64_t stream = 0, tick = UINT64_MAX;
  int known = 1;
  if (kind == CX_SYNC_STREAM) {
    stream = skey((CUstream)(uintptr_t)handle);
  } else if (kind == CX_SYNC_EVENT) {
    known = 0;
    for (size_t i = 0; i < g_nev; i++)
      if (g_ev[i].ev == handle) {
        stream = g_ev[i].stream;
        tick = g_ev[i].tick;
        known = 1;
      }
  }
  char *sel = calloc(g_n ? g_n : 1, 1);
  int any = 0;
  if (sel && known) {
    for (size_t i = 0; i < g_n; i++) {
      mrange *r = &g_r[i];
      int covered = kind == CX_SYNC_CTX
                        ? (r->gpu || g_unknown)
                        : (r->gpu && !r->multi && r->stream == stream && r->tick <= tick);
      if (covered) {
        sel[i] = 1;
        r->gpu = 0;
        r->multi = 0;
        any = 1;
      }
    }
    if (kind == CX_SYNC_CTX)
      g_unknown = 0;
    if (any)
      snapshot_locked(sel, CUCAP_FB_SNAPSHOTREASON_SYNCPOINT);
  }
  /* the host may write managed memory from here on */
  g_epoch++;
  free(sel);
  pthread_mutex_unlock(&g_mu);
  cx_relax_end(&rx);
}

void cx_managed_exit(void) {
  if (!cx_managed_any() || !cucap_rec_active())
    return;
  int dirty = 0;
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_n; i++)
    dirty |= g_r[i].gpu;
  pthread_mutex_unlock(&g_mu);
  if (!dirty)
    return;
  /* the program has finished: waiting for its GPU work changes nothing it
   * can observe */
  cx_relaxed rx;
  cx_relax_begin(&rx);
  if (cx_current_ctx() && cucap_real.cuCtxSynchronize)
    (void)cucap_real.cuCtxSynchronize();
  cx_relax_end(&rx);
  cx_managed_sync(CX_SYNC_CTX, 0);
}
