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
 *  - Pinned destination (or the event had not fired): the copy is pending,
 *    with a recorder event recorded after it on the same stream
 *    (cuEventRecord: no GPU stall). Its bytes must be read after the copy
 *    completed and before any later work of the program overwrites them:
 *     * at the program's own synchronisations (stream/event/context
 *       synchronize, successful stream/event queries, synchronous copies;
 *       cx_deferred_poll) the pending events are queried (never waited
 *       for); those that fired are read before control returns to the
 *       program, which has therefore not touched the buffer since;
 *     * before the program enqueues more work that writes host memory
 *       overlapping a pending destination (another copy to the host, a
 *       synchronous copy, a relaunch of a graph holding such a copy;
 *       cx_deferred_before_host_write, from the pre hooks in
 *       custom_hostwrite.c): if the pending copy's event has fired, it is
 *       read now; otherwise a host function is enqueued on the new work's
 *       stream, before the new work (cuLaunchHostFunc, real entry point).
 *       The host function copies the destination's bytes into recorder
 *       memory and queues them; hashing and the record are made later, at
 *       the next collection, on a program thread. Ordering argument: the
 *       new work W can only overwrite the destination after the pending
 *       copy P if the program ordered W after P (same stream, an event
 *       wait, or the legacy stream's implicit ordering); the host function
 *       sits on W's stream just before W, so it runs after everything W
 *       waits for (P included) and W starts only after it returned. If the
 *       program did not order W after P, its own bytes race too. A host
 *       function holds W's stream for the driver's callback latency
 *       (expected ~5-20 us per use on a discrete GPU, bench line
 *       hostfn_us), only when a buffer is reused before the program
 *       synchronised (NVIDIA's simpleStreams pattern), never otherwise.
 *    Either way the result is written as Snapshot{CopyResult, copy_seq =
 *    the Memcpy record's seq} (the Memcpy record has no payload), in the
 *    order the copies were made.
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
 * pool (CU_EVENT_DISABLE_TIMING). This file owns the pending results and the
 * event pools; custom_deferred_graph.c the copies captured into graphs. Host functions touch nothing but
 * their entry and the lock-free ready stack (the mock's asynchronous mode
 * runs them inside driver calls the recorder makes while holding g_mu). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cucap_sort.h"
#include "cucap_rec_query.h"
#include "cucap_vec.h"
#include "custom_internal.h"

#define CX_POOL_CTXS 16
#define CX_POOL_EVENTS 64
#define CX_MAX_PENDING 65536

enum { P_EVENT = 0, P_HOSTFN = 1, P_DONE = 2 };

typedef struct pend {
  uint64_t ord;         /* creation order: results are written in it */
  uint64_t seq;         /* copy_seq */
  int seq_state;        /* 0: record not appended yet (after_append still
                           points here: never freed then), 1: known,
                           -1: no record was appended */
  int dropped;          /* its memory is being freed: do not read */
  int lseq_known;       /* 0: a graph launch whose record is being appended */
  uint64_t launch_seq;  /* a copy captured into a graph: its launch's seq */
  int state;            /* P_*, under g_mu */
  atomic_int hf_ran;    /* P_HOSTFN: the host function has run */
  CUevent ev;           /* P_EVENT: fires when the copy has completed */
  uint64_t ctx;
  cx_rows rows;
  uint8_t *bytes;       /* the destination's bytes once read (owned) */
  size_t nbytes;
} pend;

typedef struct ev_pool {
  uint64_t ctx;
  int n;
  CUevent ev[CX_POOL_EVENTS];
} ev_pool;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
/* Pending results (every state), sorted by destination address so that the
 * pre hook of a copy to the host finds the overlapping ones in O(log n):
 * under g_mu. g_maxspan: the longest destination span since the array was
 * last empty. */
static pend **g_pend;
static size_t g_npend_n, g_pend_cap;
static uint64_t g_maxspan;
static atomic_int g_npend;      /* entries not yet written */
static atomic_uint_fast64_t g_ord;
static atomic_uint_fast64_t g_hostfns; /* host functions enqueued (logged once) */
static ev_pool g_pools[CX_POOL_CTXS];
static pthread_once_t g_exit_once = PTHREAD_ONCE_INIT;
/* Results taken off the list whose destination is still being read (outside
 * g_mu, by whichever thread took them). Another thread's synchronisation may
 * be the one that lets the program reuse or free that destination (thread A
 * copies into its buffer; thread B's sync point finds A's copy complete and
 * reads it; A's own sync then finds nothing pending): a sync point returns
 * to the program only once no read is in progress (reads_wait). Raised
 * under g_mu before the entries leave the list, so a thread that sees them
 * gone sees the count. */
static atomic_int g_reading;
static pthread_mutex_t g_rd_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_rd_cv = PTHREAD_COND_INITIALIZER;

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

/* The destination's bytes into recorder memory (a host function; also used
 * when they must be kept past the moment they are read). */
static void read_into(pend *p) {
  size_t n = 0;
  void *owned = NULL;
  const void *b = rows_bytes(&p->rows, &n, &owned);
  if (b && !owned && n) {
    owned = malloc(n);
    if (owned)
      memcpy(owned, b, n);
  }
  p->bytes = owned;
  p->nbytes = owned ? n : 0;
}

/* Writes the result of p: the bytes read earlier, else the destination
 * now (the copy has completed and the program has not run since). */
static void emit_result(pend *p) {
  size_t n = p->nbytes;
  void *owned = NULL;
  const void *bytes = p->bytes ? p->bytes : rows_bytes(&p->rows, &n, &owned);
  cucap_fb_hash128 h;
  int ok = bytes && n && cx_blob(bytes, n, &h);
  free(owned);
  if (!ok)
    return;
  cucap_fbb *b = cucap_fbb_create(256);
  if (!b)
    return;
  cucap_fb_mem_region_start(b);
  cucap_fb_mem_region_add_address(b, CX_U64(p->rows.base));
  cucap_fb_mem_region_add_size(b, n);
  cucap_fb_mem_region_add_data(b, &h);
  cucap_fb_ref reg = cucap_fb_mem_region_end(b);
  cucap_fb_ref regs = cucap_fbb_vector_refs(b, &reg, 1);
  cucap_fb_snapshot_start(b);
  cucap_fb_snapshot_add_reason(b, CUCAP_FB_SNAPSHOTREASON_COPYRESULT);
  cucap_fb_snapshot_add_regions(b, regs);
  cucap_fb_snapshot_add_copy_seq(b, p->seq);
  if (p->launch_seq)
    cucap_fb_snapshot_add_launch_seq(b, p->launch_seq);
  cucap_fb_ref body = cucap_fb_snapshot_end(b);
  cucap_status st = cucap_rec_emit(b, CUCAP_FB_BODY_SNAPSHOT, body, 0);
  if (st != CUCAP_OK && st != CUCAP_ERR_STATE)
    CUCAP_DEBUG("copy result of seq %llu not recorded: %s", (unsigned long long)p->seq,
                cucap_status_str(st));
  cucap_fbb_destroy(b);
}

/* Its call (or graph launch) is still being recorded on some thread. */
static int pend_recording(const pend *p) { return p->seq_state == 0 || !p->lseq_known; }

static void pend_free(pend *p) {
  free(p->bytes);
  free(p);
}

static uint64_t rows_span(const cx_rows *r) {
  return (r->depth ? r->depth - 1 : 0) * r->slice + (r->height ? r->height - 1 : 0) * r->pitch +
         r->width;
}

/* First index whose destination starts at or above a (g_mu held). */
static size_t pend_lower(uint64_t a) {
  size_t lo = 0, hi = g_npend_n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (CX_U64(g_pend[mid]->rows.base) < a)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Adds p (g_mu held); 0 when full or out of memory. */
static int pend_insert(pend *p) {
  if (g_npend_n >= CX_MAX_PENDING)
    return 0;
  if (!CUCAP_VEC_RESERVE(g_pend, g_pend_cap, g_npend_n + 1, 64))
    return 0;
  uint64_t a = CX_U64(p->rows.base), span = rows_span(&p->rows);
  size_t i = pend_lower(a + 1); /* after those at the same address: creation order */
  memmove(g_pend + i + 1, g_pend + i, (g_npend_n - i) * sizeof *g_pend);
  g_pend[i] = p;
  g_npend_n++;
  if (span > g_maxspan)
    g_maxspan = span;
  atomic_store(&g_npend, (int)g_npend_n);
  return 1;
}

/* Drops the entries marked gone[i] (g_mu held). */
static void pend_compact(const unsigned char *gone) {
  size_t j = 0;
  for (size_t i = 0; i < g_npend_n; i++)
    if (!gone[i])
      g_pend[j++] = g_pend[i];
  g_npend_n = j;
  if (!j)
    g_maxspan = 0;
  atomic_store(&g_npend, (int)g_npend_n);
}

/* ---------------------------------------------------------------- pending */

/* At exit. Not in a fork()ed child: its recorder is inert, the parent's
 * events are not its own, and a read another parent thread had in flight
 * at the fork would hold g_reading up for ever (reads_wait). */
static void drain_all(void) {
  if (!cucap_rec_is_forked_child())
    cx_deferred_context_loss(0);
}
static void at_exit_drain(void) { cx_guarded(drain_all); }
static void register_exit(void) { atexit(at_exit_drain); }

static void pend_set_seq(void *arg, uint64_t seq) {
  pend *p = arg;
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

int cx_deferred_copy(cucap_call *c, CUstream s, const cx_rows *rows) {
  if (!rows->base || !rows->width)
    return 0;
  cx_relaxed rx;
  cx_relax_begin(&rx);
  int now = 0;
  if (cx_stream_capturing(s, c->variant)) {
    cx_deferred_note_capture(c, s, rows); /* custom_deferred_graph.c */
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
  p->ord = atomic_fetch_add(&g_ord, 1);
  p->lseq_known = 1;
  pthread_once(&g_exit_once, register_exit);
  pthread_mutex_lock(&g_mu);
  if (!pend_insert(p)) {
    event_put_locked(ctx, e);
    pthread_mutex_unlock(&g_mu);
    free(p);
    CUCAP_DEBUG("too many pending copy results: one left unverified");
    goto out;
  }
  pthread_mutex_unlock(&g_mu);
  c->after_append = pend_set_seq;
  c->after_arg = p;
out:
  cx_relax_end(&rx);
  return now;
}

/* Waits (bounded) until p's host function ran: on the event recorded after
 * it, else by polling. Only at exit, context loss and host frees. */
static int hostfn_wait(pend *p) {
  if (atomic_load_explicit(&p->hf_ran, memory_order_acquire))
    return 1;
  if (p->ev && cucap_real.cuEventSynchronize)
    (void)cucap_real.cuEventSynchronize(p->ev);
  for (int i = 0; i < 20000 && !atomic_load_explicit(&p->hf_ran, memory_order_acquire); i++) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  return atomic_load_explicit(&p->hf_ran, memory_order_acquire);
}

static int cmp_ord(const void *a, const void *b) {
  const pend *x = *(pend *const *)a, *y = *(pend *const *)b;
  return x->ord < y->ord ? -1 : x->ord > y->ord;
}

static void reads_begin_locked(size_t n) {
  if (n)
    atomic_fetch_add(&g_reading, 1);
}

static void reads_end(void) {
  pthread_mutex_lock(&g_rd_mu);
  if (atomic_fetch_sub(&g_reading, 1) == 1)
    pthread_cond_broadcast(&g_rd_cv);
  pthread_mutex_unlock(&g_rd_mu);
}

/* Until no thread is reading a destination it took off the list. */
static void reads_wait(void) {
  if (!atomic_load(&g_reading))
    return;
  pthread_mutex_lock(&g_rd_mu);
  while (atomic_load(&g_reading))
    pthread_cond_wait(&g_rd_cv, &g_rd_mu);
  pthread_mutex_unlock(&g_rd_mu);
}

/* Writes the results of ready[0..n) in the order the copies were made and
 * frees them (and the array when owned); ends the reads reads_begin_locked
 * counted for them. */
static void emit_all(pend **ready, size_t n, int owned) {
  cucap_sort(ready, n, sizeof *ready, cmp_ord);
  for (size_t i = 0; i < n; i++) {
    emit_result(ready[i]);
    pend_free(ready[i]);
  }
  if (owned)
    free(ready);
  if (n)
    reads_end();
}

/* Takes the entries whose copy is complete (or, with wait, waits for them)
 * off the list and writes their results in the order the copies were made.
 * ctx_only 0: every context. */
static void collect(int wait, uint64_t ctx_only) {
  if (!atomic_load(&g_npend))
    return;
  cx_relaxed rx;
  cx_relax_begin(&rx);
  pthread_mutex_lock(&g_mu);
  size_t n = g_npend_n, nready = 0;
  /* few pending results: no allocation */
  unsigned char gone_small[64];
  pend *ready_small[64];
  unsigned char *gone = n <= 64 ? gone_small : calloc(n, 1);
  pend **ready = n <= 64 ? ready_small : malloc(n * sizeof *ready);
  if (n <= 64)
    memset(gone_small, 0, n);
  if (!gone || !ready) {
    pthread_mutex_unlock(&g_mu);
    cx_relax_end(&rx);
    if (n > 64) {
      free(gone);
      free(ready);
    }
    return;
  }
  for (size_t i = 0; i < n; i++) {
    pend *p = g_pend[i];
    int take = 0, drop = 0;
    if ((ctx_only && p->ctx != ctx_only) || (pend_recording(p) && !wait))
      continue; /* (its call is still being recorded on another thread) */
    if (p->state == P_HOSTFN) {
      /* the host function writes p->bytes: p lives until it has run */
      int ran = atomic_load_explicit(&p->hf_ran, memory_order_acquire) ||
                (wait && hostfn_wait(p));
      if (!ran) {
        if (wait)
          CUCAP_WARN("a host function reading a copy result never ran: left unverified");
        continue;
      }
      p->state = P_DONE;
    }
    if (p->seq_state < 0 || p->dropped) {
      drop = 1;
    } else if (pend_recording(p)) {
      continue; /* waited for, still being recorded: next time */
    } else if (p->state == P_DONE) {
      take = 1;
    } else {
      CUresult r = cucap_real.cuEventQuery ? cucap_real.cuEventQuery(p->ev)
                                           : CUDA_ERROR_NOT_FOUND;
      if (r == CUDA_ERROR_NOT_READY && wait && cucap_real.cuEventSynchronize)
        r = cucap_real.cuEventSynchronize(p->ev);
      take = r == CUDA_SUCCESS;
      drop = !take && (r != CUDA_ERROR_NOT_READY || wait);
    }
    if (!take && !drop)
      continue;
    gone[i] = 1;
    event_put_locked(p->ctx, p->ev);
    if (take)
      ready[nready++] = p;
    else
      pend_free(p);
  }
  reads_begin_locked(nready);
  pend_compact(gone);
  pthread_mutex_unlock(&g_mu);
  cx_relax_end(&rx);
  if (n > 64)
    free(gone);
  emit_all(ready, nready, n > 64);
}

/* A synchronisation of the program: what completed is read, and control
 * returns only once no other thread is still reading a destination. */
void cx_deferred_poll(void) {
  collect(0, 0);
  reads_wait();
}

void cx_deferred_context_loss(uint64_t ctx) {
  collect(1, ctx);
  reads_wait();
  /* the context's events die with it */
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < CX_POOL_CTXS; i++)
    if (ctx == 0 || g_pools[i].ctx == ctx)
      g_pools[i].n = 0;
  pthread_mutex_unlock(&g_mu);
}

static int rows_overlap(const cx_rows *a, uint64_t lo, uint64_t hi) {
  uint64_t b = CX_U64(a->base);
  return b < hi && lo < b + rows_span(a);
}

void cx_deferred_host_free(uint64_t p, uint64_t size) {
  if (atomic_load(&g_npend))
    collect(0, 0);
  reads_wait(); /* another thread may be reading this memory */
  if (!atomic_load(&g_npend))
    return;
  uint64_t hi = p + (size ? size : 1);
  cx_relaxed rx;
  cx_relax_begin(&rx);
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_npend_n; i++) {
    pend *q = g_pend[i];
    if (!rows_overlap(&q->rows, p, hi))
      continue;
    q->dropped = 1; /* still in flight into memory being freed */
    /* a host function must not read the memory once it is gone */
    if (q->state == P_HOSTFN)
      (void)hostfn_wait(q);
  }
  pthread_mutex_unlock(&g_mu);
  cx_relax_end(&rx);
}

/* ---------------------------------------------------------------- reuse */

/* cuLaunchHostFunc callback: runs on the driver's callback thread once the
 * work before it on its stream (the pending copy included) has completed
 * and before the work after it starts. No CUDA calls, no recorder lock. */
static void CUDA_CB hostfn_read(void *arg) {
  pend *p = arg;
  read_into(p);
  atomic_store_explicit(&p->hf_ran, 1, memory_order_release);
}

/* Enqueues hostfn_read(p) on s, then re-records p's event after it (so that
 * waiting for p waits for the host function). 1 on success. */
static int hostfn_enqueue(pend *p, CUstream s, int variant) {
  int pt = variant == CUCAP_FB_CALLVARIANT_PTSZ || variant == CUCAP_FB_CALLVARIANT_PTDS;
  CUresult (*launch)(CUstream, CUhostFn, void *) =
      pt && cucap_real.cuLaunchHostFunc_ptsz ? cucap_real.cuLaunchHostFunc_ptsz
                                             : cucap_real.cuLaunchHostFunc;
  CUresult (*rec)(CUevent, CUstream) =
      pt && cucap_real.cuEventRecord_ptsz ? cucap_real.cuEventRecord_ptsz : cucap_real.cuEventRecord;
  uint64_t t0 = cucap_rec_stats_on ? cucap_rec_stats_clock() : 0;
  if (!launch || launch(s, hostfn_read, p) != CUDA_SUCCESS)
    return 0;
  if (cucap_rec_stats_on)
    cucap_rec_stats_add(CUCAP_STATS_HOSTFN, cucap_rec_stats_clock() - t0);
  if (atomic_fetch_add(&g_hostfns, 1) == 0)
    CUCAP_INFO("copy results: a buffer is reused before the program synchronised; "
               "its pending result is read by a host function on the new copy's stream");
  if (!rec || rec(p->ev, s) != CUDA_SUCCESS)
    CUCAP_DEBUG("copy result: event after the host function not recorded");
  return 1;
}

void cx_deferred_before_host_write(cucap_call *c, CUstream s, const cx_rows *w) {
  if (!atomic_load(&g_npend) || !w->base || !w->width)
    return;
  uint64_t lo = CX_U64(w->base), hi = lo + rows_span(w);
  cx_relaxed rx;
  cx_relax_begin(&rx);
  if (cx_stream_capturing(s, c->variant)) {
    cx_relax_end(&rx); /* the new work runs when its graph runs, not now */
    return;
  }
  pend **now = NULL, *hf[64];
  size_t nnow = 0;
  int nhf = 0;
  pthread_mutex_lock(&g_mu);
  size_t i0 = pend_lower(lo > g_maxspan ? lo - g_maxspan : 0), i1 = i0;
  while (i1 < g_npend_n && CX_U64(g_pend[i1]->rows.base) < hi)
    i1++;
  unsigned char *gone = i1 > i0 ? calloc(g_npend_n, 1) : NULL;
  if (gone)
    now = malloc((i1 - i0) * sizeof *now);
  for (size_t i = i0; now && i < i1; i++) {
    pend *p = g_pend[i];
    if (p->state != P_EVENT || p->dropped || !rows_overlap(&p->rows, lo, hi))
      continue;
    CUresult r = cucap_real.cuEventQuery ? cucap_real.cuEventQuery(p->ev) : CUDA_ERROR_NOT_FOUND;
    if (r == CUDA_SUCCESS && !pend_recording(p)) {
      /* complete: read it now, before the new work is enqueued */
      gone[i] = 1;
      event_put_locked(p->ctx, p->ev);
      now[nnow++] = p;
    } else if (r == CUDA_SUCCESS) {
      read_into(p); /* its record is still being appended: keep the bytes */
      p->state = P_DONE;
    } else if (r == CUDA_ERROR_NOT_READY && nhf < 64) {
      p->state = P_HOSTFN;
      hf[nhf++] = p;
    } else {
      p->dropped = 1; /* cannot be read in time: unverified */
    }
  }
  if (nnow) {
    reads_begin_locked(nnow);
    pend_compact(gone);
  }
  pthread_mutex_unlock(&g_mu);
  free(gone);
  for (int i = 0; i < nhf; i++) {
    if (hostfn_enqueue(hf[i], s, c->variant))
      continue;
    CUCAP_DEBUG("copy result: cuLaunchHostFunc failed; the result is left unverified");
    pthread_mutex_lock(&g_mu);
    hf[i]->state = P_EVENT;
    hf[i]->dropped = 1;
    pthread_mutex_unlock(&g_mu);
  }
  cx_relax_end(&rx);
  if (now)
    emit_all(now, nnow, 1);
}

void cx_sync_point(int kind, uint64_t handle, int variant) {
  (void)variant;
  cucap_rec_query_flush_self(); /* this thread's pure-query counts */
  cx_deferred_poll();
  if (cx_managed_any())
    cx_managed_sync(kind, handle);
}

/* ------------------------------------------- for custom_deferred_graph.c */

int cx_deferred_pending(void) { return atomic_load(&g_npend) != 0; }

void *cx_deferred_pend_after(cucap_call *c, CUstream s, uint64_t ctx, const cx_rows *rows,
                             uint64_t copy_seq) {
  CUevent e = record_after(ctx, s, c->variant);
  if (!e)
    return NULL;
  pend *q = calloc(1, sizeof *q);
  if (!q) {
    pthread_mutex_lock(&g_mu);
    event_put_locked(ctx, e);
    pthread_mutex_unlock(&g_mu);
    return NULL;
  }
  q->ev = e;
  q->ctx = ctx;
  q->rows = *rows;
  q->seq = copy_seq;
  q->seq_state = 1;
  q->ord = atomic_fetch_add(&g_ord, 1);
  pthread_once(&g_exit_once, register_exit);
  pthread_mutex_lock(&g_mu);
  if (!pend_insert(q)) {
    event_put_locked(ctx, e);
    pthread_mutex_unlock(&g_mu);
    free(q);
    return NULL;
  }
  pthread_mutex_unlock(&g_mu);
  return q;
}

void cx_deferred_pend_launch_seq(void *const *pends, int n, uint64_t launch_seq) {
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < n; i++) {
    pend *p = pends[i];
    p->launch_seq = launch_seq;
    p->lseq_known = 1;
  }
  pthread_mutex_unlock(&g_mu);
}
