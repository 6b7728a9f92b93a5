/* custom_deferred.c - results of asynchronous copies into host memory, read
 * without adding a synchronisation.
 *
 * A DtoH copy enqueued with cuMemcpyDtoHAsync (and the AtoH, 2D/3D and UVA
 * forms with a host destination) has not landed when the call returns. The
 * recorder never synchronises the program's stream to read it. Instead:
 *
 *  - Pageable destination: the driver stages the copy through its own
 *    pinned buffer and returns once the bytes are in the destination
 *    ("API synchronization behavior" in the driver API reference: async
 *    copies between device and pageable host memory "might be synchronous";
 *    measured synchronous for DtoH on every driver we know). That is not
 *    taken on trust: a recorder event is recorded after the copy and
 *    queried at once (no waiting); when it has fired the payload goes into
 *    the Memcpy record as for a synchronous copy.
 *  - Pinned destination (or the event had not fired): the recorder event
 *    recorded after the copy on the same stream (cuEventRecord: no GPU
 *    stall, unlike a host function, which holds the stream until the host
 *    thread has run it) is queried at the program's own synchronisations
 *    (stream/event/context synchronize, successful stream/event queries,
 *    synchronous copies; cx_deferred_poll). Once it has fired the bytes are
 *    read - before control returns to the program, so the program has not
 *    had a chance to reuse the buffer - and written as Snapshot{CopyResult,
 *    copy_seq = the Memcpy record's seq}; the Memcpy record itself has no
 *    payload. The replayer verifies the copy against it.
 *  - At exit, before a context dies and before pinned memory is freed the
 *    remaining reads are drained (waiting on the recorder's events only at
 *    exit and at context destruction, which waits for the context's work
 *    anyway).
 *  - A capturing stream: nothing runs now. The copy is remembered with the
 *    graph being captured; when an instance of that graph is launched on a
 *    stream that is not capturing, an event after the launch reads the
 *    destination once it has fired: Snapshot{CopyResult, copy_seq = the
 *    captured Memcpy record}, after the cuGraphLaunch record.
 *
 * Every driver call here is made in RELAXED capture mode and never touches
 * a capturing stream (custom_capture.c). Events come from a per-context
 * pool (CU_EVENT_DISABLE_TIMING). This file owns the pending list, the
 * captured-copy list and the event pools. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "custom_internal.h"

#define CX_POOL_CTXS 16
#define CX_POOL_EVENTS 64
#define CX_MAX_PENDING 65536
#define CX_MAX_CAPCOPIES 4096
#define CX_MAX_EXECS 4096

typedef struct pend {
  struct pend *next;
  uint64_t seq;         /* copy_seq */
  int seq_state;        /* 0: record not appended yet (after_append still
                           points here: never freed then), 1: known,
                           -1: no record was appended */
  int dropped;          /* its memory is being freed: do not read */
  CUevent ev;
  uint64_t ctx;
  cx_rows rows;
} pend;

typedef struct capcopy { /* a DtoH copy captured into a graph */
  struct capcopy *next;
  uint64_t graph;       /* the graph being captured into */
  uint64_t stream;      /* the stream it was enqueued on */
  int open;             /* capture not ended yet */
  int dead;             /* graph destroyed (instances may still run it) */
  uint64_t seq;
  int seq_state;
  uint64_t ctx;
  cx_rows rows;
} capcopy;

typedef struct ev_pool {
  uint64_t ctx;
  int n;
  CUevent ev[CX_POOL_EVENTS];
} ev_pool;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pend *g_pend;
static atomic_int g_npend;
static capcopy *g_cap;
static int g_ncap;
static struct { uint64_t exec, graph; } g_exec[CX_MAX_EXECS];
static int g_nexec;
static ev_pool g_pools[CX_POOL_CTXS];
static pthread_once_t g_exit_once = PTHREAD_ONCE_INIT;

/* ---------------------------------------------------------------- events */

static CUevent event_get_locked(uint64_t ctx) {
  for (int i = 0; i < CX_POOL_CTXS; i++)
    if (g_pools[i].ctx == ctx && g_pools[i].n > 0)
      return g_pools[i].ev[--g_pools[i].n];
  CUevent e = NULL;
  if (!cucap_real.cuEventCreate ||
      cucap_real.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
    return NULL;
  return e;
}

static void event_put_locked(uint64_t ctx, CUevent e) {
  if (!e)
    return;
  ev_pool *free_slot = NULL;
  for (int i = 0; i < CX_POOL_CTXS; i++) {
    if (g_pools[i].ctx == ctx && g_pools[i].n < CX_POOL_EVENTS) {
      g_pools[i].ev[g_pools[i].n++] = e;
      return;
    }
    if (!free_slot && g_pools[i].n == 0)
      free_slot = &g_pools[i];
  }
  if (free_slot) {
    free_slot->ctx = ctx;
    free_slot->ev[free_slot->n++] = e;
    return;
  }
  if (cucap_real.cuEventDestroy_v2)
    (void)cucap_real.cuEventDestroy_v2(e);
}

/* ---------------------------------------------------------------- output */

/* Copies rows into one packed buffer (malloc'ed) unless they are already
 * contiguous (*owned = 0, points into the program's memory). */
static const void *rows_bytes(const cx_rows *r, size_t *n, void **owned) {
  *owned = NULL;
  size_t nrows = r->height * r->depth;
  *n = r->width * nrows;
  if (nrows <= 1 || (r->pitch == r->width && (r->depth <= 1 || r->slice == r->width * r->height)))
    return r->base;
  if (!r->width || nrows > SIZE_MAX / r->width)
    return NULL;
  uint8_t *buf = malloc(*n);
  if (!buf)
    return NULL;
  size_t o = 0;
  for (size_t k = 0; k < r->depth; k++)
    for (size_t j = 0; j < r->height; j++) {
      memcpy(buf + o, r->base + k * r->slice + j * r->pitch, r->width);
      o += r->width;
    }
  *owned = buf;
  return buf;
}

static void emit_result(uint64_t seq, const cx_rows *r) {
  size_t n = 0;
  void *owned = NULL;
  const void *bytes = rows_bytes(r, &n, &owned);
  cucap_fb_hash128 h;
  if (!bytes || !n || !cx_blob(bytes, n, &h)) {
    free(owned);
    return;
  }
  free(owned);
  cucap_fbb *b = cucap_fbb_create(256);
  if (!b)
    return;
  cucap_fb_mem_region_start(b);
  cucap_fb_mem_region_add_address(b, CX_U64(r->base));
  cucap_fb_mem_region_add_size(b, n);
  cucap_fb_mem_region_add_data(b, &h);
  cucap_fb_ref reg = cucap_fb_mem_region_end(b);
  cucap_fb_ref regs = cucap_fbb_vector_refs(b, &reg, 1);
  cucap_fb_snapshot_start(b);
  cucap_fb_snapshot_add_reason(b, CUCAP_FB_SNAPSHOTREASON_COPYRESULT);
  cucap_fb_snapshot_add_regions(b, regs);
  cucap_fb_snapshot_add_copy_seq(b, seq);
  cucap_fb_ref body = cucap_fb_snapshot_end(b);
  cucap_status st = cucap_rec_emit(b, CUCAP_FB_BODY_SNAPSHOT, body, 0);
  if (st != CUCAP_OK && st != CUCAP_ERR_STATE)
    CUCAP_DEBUG("copy result of seq %llu not recorded: %s", (unsigned long long)seq,
                cucap_status_str(st));
  cucap_fbb_destroy(b);
}

/* ---------------------------------------------------------------- pending */

static void drain_all(void) { cx_deferred_context_loss(0); }
static void at_exit_drain(void) { cx_guarded(drain_all); }
static void register_exit(void) { atexit(at_exit_drain); }

static void pend_set_seq(void *arg, uint64_t seq) {
  pend *p = arg;
  pthread_mutex_lock(&g_mu);
  p->seq = seq;
  p->seq_state = seq ? 1 : -1;
  pthread_mutex_unlock(&g_mu);
}

static void capcopy_set_seq(void *arg, uint64_t seq) {
  capcopy *p = arg;
  pthread_mutex_lock(&g_mu);
  p->seq = seq;
  p->seq_state = seq ? 1 : -1;
  pthread_mutex_unlock(&g_mu);
}

/* Records a recorder event after the work just enqueued on s. */
static CUevent record_after(uint64_t ctx, CUstream s, int variant) {
  CUresult (*rec)(CUevent, CUstream) = cucap_real.cuEventRecord;
  if (variant == CUCAP_FB_CALLVARIANT_PTSZ && cucap_real.cuEventRecord_ptsz)
    rec = cucap_real.cuEventRecord_ptsz;
  if (!rec)
    return NULL;
  pthread_mutex_lock(&g_mu);
  CUevent e = event_get_locked(ctx);
  pthread_mutex_unlock(&g_mu);
  if (!e)
    return NULL;
  if (rec(e, s) != CUDA_SUCCESS) {
    pthread_mutex_lock(&g_mu);
    event_put_locked(ctx, e);
    pthread_mutex_unlock(&g_mu);
    return NULL;
  }
  return e;
}

static void note_capture(cucap_call *c, CUstream s, const cx_rows *rows) {
  CUgraph g = NULL;
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  CUresult r = CUDA_ERROR_NOT_FOUND;
  if (c->variant == CUCAP_FB_CALLVARIANT_PTSZ && cucap_real.cuStreamGetCaptureInfo_v3_ptsz)
    r = cucap_real.cuStreamGetCaptureInfo_v3_ptsz(s, &st, &id, &g, NULL, NULL, NULL);
  else if (cucap_real.cuStreamGetCaptureInfo_v3)
    r = cucap_real.cuStreamGetCaptureInfo_v3(s, &st, &id, &g, NULL, NULL, NULL);
  else if (cucap_real.cuStreamGetCaptureInfo_v2)
    r = cucap_real.cuStreamGetCaptureInfo_v2(s, &st, &id, &g, NULL, NULL);
  if (r != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_ACTIVE || !g)
    return;
  capcopy *p = calloc(1, sizeof *p);
  if (!p)
    return;
  p->graph = CX_U64(g);
  p->stream = CX_U64(s);
  p->open = 1;
  p->ctx = cx_current_ctx();
  p->rows = *rows;
  pthread_mutex_lock(&g_mu);
  if (g_ncap >= CX_MAX_CAPCOPIES) {
    pthread_mutex_unlock(&g_mu);
    free(p);
    return;
  }
  p->next = g_cap;
  g_cap = p;
  g_ncap++;
  pthread_mutex_unlock(&g_mu);
  c->after_append = capcopy_set_seq;
  c->after_arg = p;
}

int cx_deferred_copy(cucap_call *c, CUstream s, const cx_rows *rows) {
  if (!rows->base || !rows->width)
    return 0;
  cx_relaxed rx;
  cx_relax_begin(&rx);
  int now = 0;
  if (cx_stream_capturing(s, c->variant)) {
    note_capture(c, s, rows);
    goto out;
  }
  uint64_t ctx = cx_current_ctx();
  CUevent e = record_after(ctx, s, c->variant);
  if (!e)
    goto out; /* cannot tell when it completes: no payload (unverifiable) */
  cucap_tracked_alloc a;
  int pinned = cucap_tracker_alloc_find(cx_tracker(), CX_U64(rows->base), &a);
  if (!pinned && cucap_real.cuEventQuery && cucap_real.cuEventQuery(e) == CUDA_SUCCESS) {
    /* pageable: the driver completed it before returning */
    pthread_mutex_lock(&g_mu);
    event_put_locked(ctx, e);
    pthread_mutex_unlock(&g_mu);
    now = 1;
    goto out;
  }
  pend *p = calloc(1, sizeof *p);
  if (!p) {
    pthread_mutex_lock(&g_mu);
    event_put_locked(ctx, e);
    pthread_mutex_unlock(&g_mu);
    goto out;
  }
  p->ev = e;
  p->ctx = ctx;
  p->rows = *rows;
  pthread_once(&g_exit_once, register_exit);
  pthread_mutex_lock(&g_mu);
  if (atomic_load(&g_npend) >= CX_MAX_PENDING) {
    event_put_locked(ctx, e);
    pthread_mutex_unlock(&g_mu);
    free(p);
    CUCAP_DEBUG("too many pending copy results: one left unverified");
    goto out;
  }
  p->next = g_pend;
  g_pend = p;
  atomic_fetch_add(&g_npend, 1);
  pthread_mutex_unlock(&g_mu);
  c->after_append = pend_set_seq;
  c->after_arg = p;
out:
  cx_relax_end(&rx);
  return now;
}

/* Takes the entries that are complete (or, with wait, waits for them) off
 * the list and writes their results. ctx_only 0: every context. */
static void collect(int wait, uint64_t ctx_only) {
  if (!atomic_load(&g_npend))
    return;
  pend *ready = NULL;
  cx_relaxed rx;
  cx_relax_begin(&rx);
  pthread_mutex_lock(&g_mu);
  for (pend **pp = &g_pend; *pp;) {
    pend *p = *pp;
    int take = 0, drop = 0;
    if (ctx_only && p->ctx != ctx_only) {
      pp = &p->next;
      continue;
    }
    if (p->seq_state == 0) {
      /* its call is still being recorded on another thread */
    } else if (p->seq_state < 0 || p->dropped) {
      drop = 1;
    } else {
      CUresult r = cucap_real.cuEventQuery ? cucap_real.cuEventQuery(p->ev)
                                           : CUDA_ERROR_NOT_FOUND;
      if (r == CUDA_ERROR_NOT_READY && wait && cucap_real.cuEventSynchronize)
        r = cucap_real.cuEventSynchronize(p->ev);
      take = r == CUDA_SUCCESS;
      drop = !take && (r != CUDA_ERROR_NOT_READY || wait);
    }
    if (!take && !drop) {
      pp = &p->next;
      continue;
    }
    *pp = p->next;
    atomic_fetch_sub(&g_npend, 1);
    event_put_locked(p->ctx, p->ev);
    if (take) {
      p->next = ready;
      ready = p;
    } else {
      free(p);
    }
  }
  pthread_mutex_unlock(&g_mu);
  cx_relax_end(&rx);
  while (ready) {
    pend *p = ready;
    ready = p->next;
    emit_result(p->seq, &p->rows);
    free(p);
  }
}

void cx_deferred_poll(void) { collect(0, 0); }

void cx_deferred_context_loss(uint64_t ctx) {
  collect(1, ctx);
  /* the context's events die with it */
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < CX_POOL_CTXS; i++)
    if (ctx == 0 || g_pools[i].ctx == ctx)
      g_pools[i].n = 0;
  pthread_mutex_unlock(&g_mu);
}

void cx_deferred_host_free(uint64_t p, uint64_t size) {
  if (!atomic_load(&g_npend))
    return;
  collect(0, 0);
  pthread_mutex_lock(&g_mu);
  for (pend *q = g_pend; q; q = q->next) {
    uint64_t a = CX_U64(q->rows.base);
    if (a >= p && a - p < (size ? size : 1))
      q->dropped = 1; /* still in flight into memory being freed */
  }
  pthread_mutex_unlock(&g_mu);
}

void cx_sync_point(int kind, uint64_t handle, int variant) {
  (void)variant;
  cx_deferred_poll();
  if (cx_managed_any())
    cx_managed_sync(kind, handle);
}

/* ---------------------------------------------------------------- graphs */

static int exec_of_graph_locked(uint64_t graph) {
  for (int i = 0; i < g_nexec; i++)
    if (g_exec[i].graph == graph)
      return 1;
  return 0;
}

/* Frees the entries matching (under g_mu); never one whose record has not
 * been appended yet (its after_append still points at it). */
static void capcopy_remove_locked(int (*match)(const capcopy *, uint64_t), uint64_t key) {
  for (capcopy **pp = &g_cap; *pp;) {
    capcopy *p = *pp;
    if (p->seq_state != 0 && match(p, key)) {
      *pp = p->next;
      g_ncap--;
      free(p);
    } else {
      pp = &p->next;
    }
  }
}

static int m_open_stream(const capcopy *p, uint64_t s) { return p->open && p->stream == s; }
static int m_dead_graph(const capcopy *p, uint64_t g) { return p->dead && p->graph == g; }

void cx_deferred_graph_end_capture(uint64_t stream, uint64_t graph) {
  pthread_mutex_lock(&g_mu);
  if (graph) {
    for (capcopy *p = g_cap; p; p = p->next)
      if (p->graph == graph)
        p->open = 0;
  } else { /* the capture failed: its graph is gone */
    capcopy_remove_locked(m_open_stream, stream);
  }
  pthread_mutex_unlock(&g_mu);
}

void cx_deferred_graph_instantiate(uint64_t graph, uint64_t exec) {
  if (!graph || !exec)
    return;
  pthread_mutex_lock(&g_mu);
  int have = 0;
  for (capcopy *p = g_cap; p && !have; p = p->next)
    have = p->graph == graph;
  if (have) {
    int i;
    for (i = 0; i < g_nexec && g_exec[i].exec != exec; i++)
      ;
    if (i < CX_MAX_EXECS) {
      g_exec[i].exec = exec;
      g_exec[i].graph = graph;
      if (i == g_nexec)
        g_nexec++;
    }
  }
  pthread_mutex_unlock(&g_mu);
}

void cx_deferred_graph_launch(cucap_call *c, uint64_t exec, CUstream s) {
  if (!g_nexec)
    return; /* benign race: a graph instantiated concurrently is missed */
  uint64_t graph = 0;
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < g_nexec; i++)
    if (g_exec[i].exec == exec)
      graph = g_exec[i].graph;
  pthread_mutex_unlock(&g_mu);
  if (!graph)
    return;
  cx_relaxed rx;
  cx_relax_begin(&rx);
  if (cx_stream_capturing(s, c->variant)) { /* a graph launched into a capture */
    cx_relax_end(&rx);
    return;
  }
  uint64_t ctx = cx_current_ctx();
  pthread_mutex_lock(&g_mu);
  size_t n = 0;
  for (capcopy *p = g_cap; p; p = p->next)
    n += p->graph == graph && p->seq_state > 0;
  pthread_mutex_unlock(&g_mu);
  /* one event per copy (a graph holds few host-bound copies) */
  for (size_t k = 0; k < n; k++) {
    capcopy snap;
    int found = 0;
    pthread_mutex_lock(&g_mu);
    size_t j = 0;
    for (capcopy *p = g_cap; p && !found; p = p->next)
      if (p->graph == graph && p->seq_state > 0 && j++ == k) {
        snap = *p;
        found = 1;
      }
    pthread_mutex_unlock(&g_mu);
    if (!found)
      break;
    CUevent e = record_after(ctx, s, c->variant);
    if (!e)
      break;
    pend *q = calloc(1, sizeof *q);
    if (!q) {
      pthread_mutex_lock(&g_mu);
      event_put_locked(ctx, e);
      pthread_mutex_unlock(&g_mu);
      break;
    }
    q->ev = e;
    q->ctx = ctx;
    q->rows = snap.rows;
    q->seq = snap.seq;
    q->seq_state = 1;
    pthread_once(&g_exit_once, register_exit);
    pthread_mutex_lock(&g_mu);
    q->next = g_pend;
    g_pend = q;
    atomic_fetch_add(&g_npend, 1);
    pthread_mutex_unlock(&g_mu);
  }
  cx_relax_end(&rx);
}

void cx_deferred_graph_forget(uint64_t graph, uint64_t exec) {
  pthread_mutex_lock(&g_mu);
  if (exec) {
    for (int i = 0; i < g_nexec; i++)
      if (g_exec[i].exec == exec) {
        graph = graph ? graph : g_exec[i].graph;
        g_exec[i] = g_exec[--g_nexec];
        break;
      }
  }
  if (graph) {
    /* cuGraphDestroy marks; the copies go once no instance can run them */
    if (!exec)
      for (capcopy *p = g_cap; p; p = p->next)
        if (p->graph == graph)
          p->dead = 1;
    if (!exec_of_graph_locked(graph))
      capcopy_remove_locked(m_dead_graph, graph);
  }
  pthread_mutex_unlock(&g_mu);
}
