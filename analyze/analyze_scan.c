/* analyze_scan.c - builds the analysis model (analyze_internal.h) from a
 * capture in one pass over the records: events of interest with their host
 * times, streams, sizes and callstacks; which copies use pinned memory;
 * which syncs leave the GPU empty. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_sort.h"
#include "analyze_internal.h"
#include "cucap_reader.h"
#include "cucap_schema.h"
#include "cucap_vec.h"

/* ------------------------------------------------------------ scan state */

typedef struct pin_range {
  uint64_t lo, hi;
} pin_range;

typedef struct scan {
  cucap_analysis *a;
  cucap_map fn_name;     /* function/kernel handle -> name id */
  cucap_map event_stream; /* event -> stream it was last recorded on */
  cucap_map capturing;   /* streams in stream capture */
  cucap_map pending;     /* stream -> work items not yet synchronised */
  uint64_t pend_blocking, pend_nonblocking;
  pin_range *pins;    /* sorted by lo */
  size_t npins, cappins;
  int no_dtoh_payload;
  uint64_t max_t;
} scan;

static int non_blocking(const scan *S, uint64_t stream) {
  uint64_t f = 0;
  return stream > 2 && cucap_map_get(&S->a->stream_flags, stream, &f) && (f & 1);
}

static void pend_add(scan *S, uint64_t stream) {
  uint64_t c = 0;
  cucap_map_get(&S->pending, stream, &c);
  cucap_map_put(&S->pending, stream, c + 1);
  if (non_blocking(S, stream))
    S->pend_nonblocking++;
  else
    S->pend_blocking++;
}

static void pend_clear(scan *S, uint64_t stream) {
  uint64_t c = 0;
  if (!cucap_map_get(&S->pending, stream, &c) || !c)
    return;
  cucap_map_put(&S->pending, stream, 0);
  uint64_t *bucket = non_blocking(S, stream) ? &S->pend_nonblocking : &S->pend_blocking;
  *bucket -= c < *bucket ? c : *bucket; /* flags of a reused handle may differ */
}

/* the legacy default stream waits for every blocking stream */
static void pend_clear_blocking(scan *S) {
  cucap_map *m = &S->pending;
  uint64_t left = 0, k, v;
  for (size_t pos = 0; cucap_map_next(m, &pos, &k, &v);)
    if (!non_blocking(S, k))
      *cucap_map_slot(m, k, 0) = 0;
    else
      left += v;
  S->pend_blocking = 0;
  S->pend_nonblocking = left;
}

static void pend_clear_all(scan *S) {
  cucap_map *m = &S->pending;
  uint64_t k;
  for (size_t pos = 0; cucap_map_next(m, &pos, &k, NULL);)
    *cucap_map_slot(m, k, 0) = 0;
  S->pend_blocking = S->pend_nonblocking = 0;
}

static void pin_add(scan *S, uint64_t lo, uint64_t size) {
  if (!lo || !size)
    return;
  if (!CUCAP_VEC_RESERVE(S->pins, S->cappins, S->npins + 1, 16))
    return;
  size_t i = S->npins;
  while (i > 0 && S->pins[i - 1].lo > lo) {
    S->pins[i] = S->pins[i - 1];
    i--;
  }
  S->pins[i] = (pin_range){lo, lo + size};
  S->npins++;
}

static void pin_del(scan *S, uint64_t lo) {
  for (size_t i = 0; i < S->npins; i++)
    if (S->pins[i].lo == lo) {
      memmove(&S->pins[i], &S->pins[i + 1], (S->npins - i - 1) * sizeof *S->pins);
      S->npins--;
      return;
    }
}

static int pinned(const scan *S, uint64_t addr) {
  size_t lo = 0, hi = S->npins; /* last range with lo <= addr */
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (S->pins[mid].lo <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (size_t i = lo; i-- > 0;) { /* ranges may nest (register inside alloc) */
    if (addr < S->pins[i].hi)
      return 1;
    if (lo - i > 8)
      break;
  }
  return 0;
}

static az_ev *ev_new(scan *S, const cucap_fb_record *rec, az_kind kind) {
  cucap_analysis *a = S->a;
  if (!CUCAP_VEC_RESERVE(a->ev, a->capev, a->nev + 1, 1024))
    return NULL;
  az_ev *e = &a->ev[a->nev++];
  memset(e, 0, sizeof *e);
  e->t0 = cucap_fb_record_t_enter(rec);
  e->t1 = cucap_fb_record_t_exit(rec);
  if (e->t1 < e->t0)
    e->t1 = e->t0;
  e->seq = cucap_fb_record_seq(rec);
  e->tid = cucap_fb_record_tid(rec);
  e->stack = cucap_fb_record_stack(rec);
  e->kind = (uint8_t)kind;
  return e;
}

/* canonical stream: legacy default -> 1, per-thread default -> 2 */
static uint64_t canon_stream(const cucap_fb_record *rec, uint64_t s, uint16_t *flags) {
  int pt = cucap_fb_record_variant(rec) != CUCAP_FB_CALLVARIANT_DEFAULT;
  if (s == 2 || (s == 0 && pt)) {
    *flags |= AZF_PTDS;
    return 2;
  }
  if (s <= 1) {
    *flags |= AZF_LEGACY;
    return 1;
  }
  return s;
}

/* work submitted to a stream: pending until a sync covers it */
static void work(scan *S, az_ev *e) {
  if (cucap_map_get(&S->capturing, e->stream, NULL))
    e->flags |= AZF_CAPTURED;
  else
    pend_add(S, e->stream);
}

static void on_launch(scan *S, const cucap_fb_record *rec, const cucap_fb_launch *l,
                      uint64_t rec_index) {
  cucap_analysis *a = S->a;
  int hostfn = cucap_fb_launch_kind(l) == CUCAP_FB_LAUNCHKIND_HOSTFUNC;
  az_ev *e = ev_new(S, rec, hostfn ? AZ_HOSTFN : AZ_LAUNCH);
  if (!e)
    return;
  e->stream = canon_stream(rec, cucap_fb_launch_stream(l), &e->flags);
  if (hostfn) {
    work(S, e);
    return;
  }
  uint64_t nm = 0;
  cucap_map_get(&S->fn_name, cucap_fb_launch_function(l), &nm);
  e->name = (uint32_t)nm;
  work(S, e);
  if (!CUCAP_VEC_RESERVE(a->launches, a->caplaunch, a->nlaunch + 1, 256))
    return;
  az_launch *L = &a->launches[a->nlaunch];
  memset(L, 0, sizeof *L);
  L->launch_index = cucap_fb_launch_launch_index(l);
  L->seq = e->seq;
  L->rec_index = rec_index;
  L->ev = (uint32_t)(a->nev - 1);
  L->name = e->name;
  const cucap_fb_dim3 *g = cucap_fb_launch_grid(l), *b = cucap_fb_launch_block(l);
  if (g) {
    L->grid[0] = g->x;
    L->grid[1] = g->y;
    L->grid[2] = g->z;
  }
  if (b) {
    L->block[0] = b->x;
    L->block[1] = b->y;
    L->block[2] = b->z;
  }
  L->smem = cucap_fb_launch_shared_mem(l);
  e->launch = (uint32_t)a->nlaunch++;
}

static void on_copy(scan *S, const cucap_fb_record *rec, const cucap_fb_memcpy *m) {
  uint8_t k = cucap_fb_memcpy_kind(m);
  if (k == CUCAP_FB_MEMCPYKIND_PREFETCH)
    return;
  az_ev *e = ev_new(S, rec, AZ_COPY);
  if (!e)
    return;
  e->bytes = cucap_fb_memcpy_size(m);
  int async = cucap_fb_memcpy_async(m);
  if (async)
    e->flags |= AZF_ASYNC;
  e->stream = canon_stream(rec, async ? cucap_fb_memcpy_stream(m) : 0, &e->flags);
  uint64_t host = 0;
  switch (k) {
  case CUCAP_FB_MEMCPYKIND_HTOD:
  case CUCAP_FB_MEMCPYKIND_HTOA:
    e->sub = AZ_DIR_H2D;
    host = cucap_fb_memcpy_src(m);
    break;
  case CUCAP_FB_MEMCPYKIND_DTOH:
  case CUCAP_FB_MEMCPYKIND_ATOH:
    e->sub = AZ_DIR_D2H;
    host = cucap_fb_memcpy_dst(m);
    break;
  case CUCAP_FB_MEMCPYKIND_DTOD:
  case CUCAP_FB_MEMCPYKIND_DTOA:
  case CUCAP_FB_MEMCPYKIND_ATOD:
  case CUCAP_FB_MEMCPYKIND_ATOA:
  case CUCAP_FB_MEMCPYKIND_PEER:
    e->sub = AZ_DIR_D2D;
    break;
  default:
    e->sub = AZ_DIR_NONE;
    break;
  }
  e->addr = host;
  if (host)
    e->flags |= pinned(S, host) ? AZF_PINNED : AZF_PAGEABLE;
  if (!async) {
    /* a synchronous copy runs on the default stream: it waits for the work
     * queued there (and, legacy, on every blocking stream) */
    if (!S->pend_blocking)
      e->flags |= AZF_CLEAN;
    if (cucap_map_get(&S->capturing, e->stream, NULL))
      e->flags |= AZF_CAPTURED;
    pend_clear_blocking(S);
    if (!S->pend_nonblocking)
      e->flags |= AZF_DRAINED;
    return;
  }
  work(S, e);
  if (e->sub == AZ_DIR_D2H && cucap_fb_memcpy_has_payload(m) && !S->no_dtoh_payload &&
      !(e->flags & AZF_CAPTURED)) {
    e->flags |= AZF_RECSYNC; /* the recorder synchronised the stream */
    S->a->sum.recorder_synced_dtoh++;
    pend_clear(S, e->stream);
  }
}

static void on_memset(scan *S, const cucap_fb_record *rec, const cucap_fb_memset *m) {
  az_ev *e = ev_new(S, rec, AZ_MEMSET);
  if (!e)
    return;
  uint64_t h = cucap_fb_memset_height(m);
  e->bytes = cucap_fb_memset_count(m) * cucap_fb_memset_elem_size(m) * (h ? h : 1);
  int async = cucap_fb_memset_async(m);
  if (async)
    e->flags |= AZF_ASYNC;
  e->stream = canon_stream(rec, async ? cucap_fb_memset_stream(m) : 0, &e->flags);
  work(S, e);
}

static int host_kind(uint8_t k) {
  return k == CUCAP_FB_ALLOCKIND_HOST || k == CUCAP_FB_ALLOCKIND_HOSTALLOC ||
         k == CUCAP_FB_ALLOCKIND_HOSTREGISTER;
}

static void on_alloc(scan *S, const cucap_fb_record *rec, const cucap_fb_alloc *al) {
  uint8_t k = cucap_fb_alloc_kind(al);
  if (k == CUCAP_FB_ALLOCKIND_VMMSETACCESS || k == CUCAP_FB_ALLOCKIND_POOL)
    return; /* configuration, not an allocation */
  az_ev *e = ev_new(S, rec, AZ_ALLOC);
  if (!e)
    return;
  e->sub = k;
  e->bytes = cucap_fb_alloc_size(al);
  e->addr = cucap_fb_alloc_address(al);
  if (host_kind(k)) {
    e->flags |= AZF_HOSTMEM;
    uint64_t h = cucap_fb_alloc_host_address(al);
    pin_add(S, h ? h : cucap_fb_alloc_address(al), e->bytes);
  }
  if (k == CUCAP_FB_ALLOCKIND_ASYNC || k == CUCAP_FB_ALLOCKIND_FROMPOOL)
    e->stream = cucap_fb_alloc_stream(al);
}

static void on_free(scan *S, const cucap_fb_record *rec, const cucap_fb_free *f) {
  uint8_t k = cucap_fb_free_kind(f);
  if (k == CUCAP_FB_ALLOCKIND_VMMSETACCESS || k == CUCAP_FB_ALLOCKIND_POOL)
    return;
  az_ev *e = ev_new(S, rec, AZ_FREE);
  if (!e)
    return;
  e->sub = k;
  e->bytes = cucap_fb_free_size(f);
  e->addr = cucap_fb_free_address(f);
  if (host_kind(k)) {
    e->flags |= AZF_HOSTMEM;
    pin_del(S, cucap_fb_free_address(f));
  }
}

static void on_sync(scan *S, const cucap_fb_record *rec, az_kind kind, uint64_t stream) {
  az_ev *e = ev_new(S, rec, kind);
  if (!e)
    return;
  e->stream = stream;
  if (kind == AZ_SYNC_CTX) {
    pend_clear_all(S);
  } else {
    pend_clear(S, stream);
    if (stream == 1) /* the legacy stream also waits for blocking streams */
      pend_clear_blocking(S);
  }
  if (!S->pend_blocking && !S->pend_nonblocking)
    e->flags |= AZF_DRAINED;
}

static void on_devices(scan *S, const cucap_fb_record *rec) {
  const cucap_fb_devices *d = cucap_fb_record_body_as_devices(rec);
  cucap_analysis_summary *sm = &S->a->sum;
  if (d && !sm->device[0] && cucap_fb_devices_devices_len(d)) {
    const cucap_fb_device_props *p = cucap_fb_devices_devices_at(d, 0);
    const char *nm = p ? cucap_fb_device_props_name(p) : NULL;
    snprintf(sm->device, sizeof sm->device, "%s", nm ? nm : "?");
    sm->cc_major = p ? cucap_fb_device_props_cc_major(p) : 0;
    sm->cc_minor = p ? cucap_fb_device_props_cc_minor(p) : 0;
    sm->sm_count = p ? cucap_fb_device_props_sm_count(p) : 0;
  }
  if (d && !sm->driver_version)
    sm->driver_version = cucap_fb_devices_driver_version(d);
}

/* A graph launch: one unit of work on its stream. */
static void on_graph_launch(scan *S, const cucap_fb_record *rec, const cucap_fb_graph *g) {
  az_ev *e = ev_new(S, rec, AZ_GRAPH);
  if (e) {
    char nm[48];
    snprintf(nm, sizeof nm, "(graph 0x%llx)", (unsigned long long)cucap_fb_graph_exec(g));
    e->name = cucap_strs_intern(&S->a->names, nm);
    e->stream = canon_stream(rec, cucap_fb_graph_stream(g), &e->flags);
    work(S, e);
  }
}

/* Stream creation flags, synchronisation, queries and capture. */
static void on_stream(scan *S, const cucap_fb_record *rec, const cucap_fb_stream *s, int ok) {
  uint16_t fl = 0;
  uint64_t h = canon_stream(rec, cucap_fb_stream_handle(s), &fl);
  switch (cucap_fb_stream_op(s)) {
  case CUCAP_FB_STREAMOP_CREATE:
    if (ok)
      cucap_map_put(&S->a->stream_flags, h, cucap_fb_stream_flags(s) | 0x100u);
    break;
  case CUCAP_FB_STREAMOP_SYNCHRONIZE:
    if (ok)
      on_sync(S, rec, AZ_SYNC_STREAM, h);
    break;
  case CUCAP_FB_STREAMOP_QUERY: {
    az_ev *e = ev_new(S, rec, AZ_QUERY);
    if (e)
      e->stream = h;
    if (ok) /* CUDA_SUCCESS: everything queued there is done */
      pend_clear(S, h);
    break;
  }
  case CUCAP_FB_STREAMOP_BEGINCAPTURE:
    if (ok)
      cucap_map_put(&S->capturing, h, 1);
    break;
  case CUCAP_FB_STREAMOP_ENDCAPTURE:
    cucap_map_del(&S->capturing, h, NULL);
    break;
  default:
    break;
  }
}

/* Which stream an event was recorded on, and waits and queries on it. */
static void on_event(scan *S, const cucap_fb_record *rec, const cucap_fb_event *ev, int ok) {
  uint64_t h = cucap_fb_event_handle(ev), es = 0;
  switch (cucap_fb_event_op(ev)) {
  case CUCAP_FB_EVENTOP_RECORD:
    if (ok) {
      uint16_t fl = 0;
      es = canon_stream(rec, cucap_fb_event_stream(ev), &fl);
      cucap_map_put(&S->event_stream, h, es);
      az_ev *e = ev_new(S, rec, AZ_EVENT_RECORD);
      if (e) {
        e->stream = es;
        e->flags |= fl;
      }
    }
    break;
  case CUCAP_FB_EVENTOP_SYNCHRONIZE:
    if (ok) {
      cucap_map_get(&S->event_stream, h, &es);
      on_sync(S, rec, AZ_SYNC_EVENT, es);
    }
    break;
  case CUCAP_FB_EVENTOP_QUERY: {
    cucap_map_get(&S->event_stream, h, &es);
    az_ev *e = ev_new(S, rec, AZ_QUERY);
    if (e)
      e->stream = es;
    if (ok)
      pend_clear(S, es);
    break;
  }
  default:
    break;
  }
}

/* The calls a QueryCounts record stands for. */
static void on_query_counts(scan *S, const cucap_fb_record *rec) {
  const cucap_fb_query_counts *qc = cucap_fb_record_body_as_query_counts(rec);
  size_t nq = qc ? cucap_fb_query_counts_entries_len(qc) : 0;
  for (size_t i = 0; i < nq; i++) {
    const cucap_fb_query_count *e = cucap_fb_query_counts_entries_at(qc, i);
    S->a->sum.calls += e ? cucap_fb_query_count_count(e) : 0;
  }
}

static void on_record(scan *S, const cucap_fb_record *rec, uint64_t rec_index) {
  uint8_t bt = cucap_fb_record_body_type(rec);
  if (bt == CUCAP_FB_BODY_CALLSTACK || bt == CUCAP_FB_BODY_MODULEMAP) {
    cucap_stacktab_feed(S->a->stacks, rec);
    return;
  }
  if (bt == CUCAP_FB_BODY_DEVICES) { /* not a call (seq 0), written after cuInit */
    on_devices(S, rec);
    return;
  }
  if (cucap_fb_record_call(rec)) /* bodies below only come with calls */
    S->a->sum.calls++;
  if (bt == CUCAP_FB_BODY_QUERYCOUNTS) { /* format 1.3: pure queries, aggregated */
    on_query_counts(S, rec);
    return;
  }
  uint64_t te = cucap_fb_record_t_exit(rec);
  if (te > S->max_t)
    S->max_t = te;
  uint32_t st = cucap_fb_record_stack(rec);
  if (st)
    cucap_stacktab_use(S->a->stacks, st);
  int ok = cucap_fb_record_result(rec) == 0;
  switch (bt) {
  case CUCAP_FB_BODY_FUNCTION: {
    const cucap_fb_function *f = cucap_fb_record_body_as_function(rec);
    if (f && ok)
      cucap_map_put(&S->fn_name, cucap_fb_function_handle(f),
                 cucap_strs_intern(&S->a->names, cucap_fb_function_name(f)));
    break;
  }
  case CUCAP_FB_BODY_LAUNCH: {
    const cucap_fb_launch *l = cucap_fb_record_body_as_launch(rec);
    if (l && ok)
      on_launch(S, rec, l, rec_index);
    break;
  }
  case CUCAP_FB_BODY_GRAPH: {
    const cucap_fb_graph *g = cucap_fb_record_body_as_graph(rec);
    if (g && ok && cucap_fb_graph_op(g) == CUCAP_FB_GRAPHOP_LAUNCH)
      on_graph_launch(S, rec, g);
    break;
  }
  case CUCAP_FB_BODY_MEMCPY: {
    const cucap_fb_memcpy *m = cucap_fb_record_body_as_memcpy(rec);
    if (m && ok)
      on_copy(S, rec, m);
    break;
  }
  case CUCAP_FB_BODY_MEMSET: {
    const cucap_fb_memset *m = cucap_fb_record_body_as_memset(rec);
    if (m && ok)
      on_memset(S, rec, m);
    break;
  }
  case CUCAP_FB_BODY_ALLOC: {
    const cucap_fb_alloc *al = cucap_fb_record_body_as_alloc(rec);
    if (al && ok)
      on_alloc(S, rec, al);
    break;
  }
  case CUCAP_FB_BODY_FREE: {
    const cucap_fb_free *f = cucap_fb_record_body_as_free(rec);
    if (f && ok)
      on_free(S, rec, f);
    break;
  }
  case CUCAP_FB_BODY_CONTEXT: {
    const cucap_fb_context *c = cucap_fb_record_body_as_context(rec);
    if (c && ok && cucap_fb_context_op(c) == CUCAP_FB_CONTEXTOP_SYNCHRONIZE)
      on_sync(S, rec, AZ_SYNC_CTX, 0);
    break;
  }
  case CUCAP_FB_BODY_STREAM: {
    const cucap_fb_stream *s = cucap_fb_record_body_as_stream(rec);
    if (s)
      on_stream(S, rec, s, ok);
    break;
  }
  case CUCAP_FB_BODY_EVENT: {
    const cucap_fb_event *ev = cucap_fb_record_body_as_event(rec);
    if (ev)
      on_event(S, rec, ev, ok);
    break;
  }
  default:
    break;
  }
}

static void header_info(cucap_analysis *a, const cucap_fb_file_header *h, scan *S) {
  cucap_analysis_summary *sm = &a->sum;
  const char *o = cucap_fb_file_header_options(h);
  snprintf(sm->options, sizeof sm->options, "%s", o ? o : "");
  S->no_dtoh_payload = o && strstr(o, "no_dtoh_payload") != NULL;
  sm->driver_version = cucap_fb_file_header_driver_version(h);
  if (cucap_fb_file_header_devices_len(h)) {
    const cucap_fb_device_props *p = cucap_fb_file_header_devices_at(h, 0);
    const char *nm = p ? cucap_fb_device_props_name(p) : NULL;
    if (p) {
      snprintf(sm->device, sizeof sm->device, "%s", nm ? nm : "?");
      sm->cc_major = cucap_fb_device_props_cc_major(p);
      sm->cc_minor = cucap_fb_device_props_cc_minor(p);
      sm->sm_count = cucap_fb_device_props_sm_count(p);
    }
  }
}

static int cmp_t0(const void *x, const void *y, void *ctx) {
  const az_ev *ev = ctx;
  const az_ev *a = &ev[*(const uint32_t *)x], *b = &ev[*(const uint32_t *)y];
  if (a->t0 != b->t0)
    return a->t0 < b->t0 ? -1 : 1;
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static const az_ev *g_sort_ev; /* qsort has no context argument */
static int cmp_t0_q(const void *x, const void *y) { return cmp_t0(x, y, (void *)g_sort_ev); }

cucap_status az_scan(cucap_analysis *a, cucap_reader *r) {
  scan S;
  memset(&S, 0, sizeof S);
  S.a = a;
  header_info(a, cucap_reader_header(r), &S);
  unsigned fmaj = 0, fmin = 0;
  cucap_reader_version(r, &fmaj, &fmin);
  if (fmaj > 1 || fmin >= 2) /* format 1.2 recorders never synchronise */
    S.no_dtoh_payload = 1;
  cucap_status st = cucap_reader_rewind(r);
  uint64_t idx = 0;
  while (st == CUCAP_OK) {
    const void *rv = NULL, *buf = NULL;
    size_t size = 0;
    st = cucap_reader_next(r, &rv, &buf, &size);
    if (st != CUCAP_OK)
      break;
    a->sum.records++;
    on_record(&S, rv, idx++);
  }
  if (st == CUCAP_END)
    st = CUCAP_OK;
  a->sum.read_status = st;
  if (st != CUCAP_OK) {
    const char *why = cucap_reader_last_error(r);
    snprintf(a->sum.problem, sizeof a->sum.problem, "%s%s%s", cucap_status_str(st),
             why && *why ? ": " : "", why ? why : "");
  }
  a->sum.duration_ns = S.max_t;
  for (size_t i = 0; i < a->nev; i++) {
    const az_ev *e = &a->ev[i];
    if (e->kind == AZ_LAUNCH)
      a->sum.launches++;
    else if (e->kind == AZ_GRAPH)
      a->sum.graph_launches++;
    else if (e->kind == AZ_COPY)
      a->sum.copies++;
    else if (e->kind == AZ_MEMSET)
      a->sum.memsets++;
  }
  /* work events by t0 (the "next submission" after a time) and by seq */
  size_t nw = 0;
  for (size_t i = 0; i < a->nev; i++) {
    uint8_t k = a->ev[i].kind;
    nw += k == AZ_LAUNCH || k == AZ_GRAPH || k == AZ_COPY || k == AZ_MEMSET;
  }
  a->work_by_t0 = malloc((nw ? nw : 1) * sizeof *a->work_by_t0);
  cucap_status out = a->work_by_t0 ? CUCAP_OK : CUCAP_ERR_NOMEM;
  if (a->work_by_t0) {
    for (size_t i = 0; i < a->nev; i++) {
      uint8_t k = a->ev[i].kind;
      if (k == AZ_LAUNCH || k == AZ_GRAPH || k == AZ_COPY || k == AZ_MEMSET) {
        a->work_by_t0[a->nwork++] = (uint32_t)i;
        if (a->ev[i].seq && !cucap_map_put(&a->seq_ev, a->ev[i].seq, i + 1))
          out = CUCAP_ERR_NOMEM;
      }
    }
    g_sort_ev = a->ev;
    cucap_sort(a->work_by_t0, a->nwork, sizeof *a->work_by_t0, cmp_t0_q);
  }
  cucap_map_free(&S.fn_name);
  cucap_map_free(&S.event_stream);
  cucap_map_free(&S.capturing);
  cucap_map_free(&S.pending);
  free(S.pins);
  return out;
}
