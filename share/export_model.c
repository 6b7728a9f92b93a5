/* export_model.c - builds the timeline of a capture (export_internal.h):
 * tracks and events from the records, in two passes (names and GPU times
 * first, then the events). See cucap_export.h for what is shown. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti_driver_cbid.h>

#include "cucap_sort.h"
#include "cucap_vec.h"
#include "export_internal.h"

/* ---------------------------------------------------------------- strings */

static uint64_t str_hash(const char *s) {
  return sh_fnv1a(SH_FNV_INIT, s, strlen(s)) | 1;
}

uint32_t xp_str(xp_model *m, const char *s) {
  if (!s)
    s = "";
  uint64_t h = str_hash(s), id;
  /* linear probing on the hash value itself for collisions */
  for (uint64_t k = h; cucap_map_get(&m->str_ids, k, &id); k = k * 31 + 7)
    if (!strcmp(m->strings + id - 1, s))
      return (uint32_t)id;
  if (!(id = sh_strings_add(&m->strings, &m->nstr, &m->capstr, s)))
    return 0;
  uint64_t k = h;
  while (cucap_map_get(&m->str_ids, k, NULL))
    k = k * 31 + 7;
  if (!sh_map_put(&m->str_ids, k, id))
    return 0;
  return (uint32_t)id;
}

const char *xp_s(const xp_model *m, uint32_t id) {
  return id && id <= m->nstr ? m->strings + id - 1 : "";
}

void xp_free(xp_model *m) {
  sh_vec_free(&m->tracks);
  sh_vec_free(&m->events);
  free(m->strings);
  cucap_map_free(&m->str_ids);
  memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------- state */

typedef struct nv_open {
  uint64_t ts;
  uint32_t name, cat;
} nv_open;

typedef struct nv_stack {      /* push/pop ranges of one thread and domain */
  uint32_t tid;
  uint64_t domain;
  uint32_t track;
  nv_open *v;
  size_t n, cap;
} nv_stack;

typedef struct gpu_time {
  uint64_t start, end;
} gpu_time;

typedef struct xb {
  xp_model *m;
  const cucap_export_options *o;
  cucap_export_report *rep;
  cucap_map fn_name;      /* function handle -> string id */
  cucap_map dom_name;     /* domain handle -> string id */
  cucap_map thr_name;     /* tid + 1 -> string id */
  cucap_map kt;           /* launch_index + 1 -> index + 1 into ktimes */
  sh_vec ktimes;       /* gpu_time from KernelTiming records */
  int64_t offset;      /* GPU clock -> capture clock */
  int have_offset;
  cucap_map thread_track, stream_track, child_track; /* key -> track index + 1 */
  cucap_map stream_busy;  /* stream + 1 -> ns until which it is busy */
  cucap_map capturing;    /* stream + 1 -> 1 while in stream capture */
  cucap_map alloc_size;   /* address -> size */
  uint64_t mem_in_use;
  uint32_t mem_track, bw_track, prof_track;
  sh_vec lanes;        /* uint64_t end time per async NVTX lane */
  sh_vec lane_track;   /* uint32_t track per lane */
  sh_vec stacks;       /* nv_stack */
  cucap_map ranges;       /* range id -> index + 1 into range_open */
  sh_vec range_open;   /* nv_open + domain */
  uint64_t prof_open;  /* ts + 1 of an open profiler range */
  uint64_t t_end;
  uint64_t order;
  uint32_t s_cuda, s_kernel, s_memcpy, s_memset, s_graph, s_nvtx, s_seq, s_result,
      s_kernel_key, s_bytes, s_timing, s_host, s_launch_index;
} xb;

typedef struct range_rec {
  uint64_t ts, domain;
  uint32_t name;
} range_rec;

static uint32_t add_track(xb *b, int type, uint64_t parent, uint32_t tid, const char *name) {
  xp_track *t = sh_vec_push(&b->m->tracks);
  if (!t)
    return 0;
  t->type = type;
  t->uuid = 0x100 + b->m->tracks.n; /* process track: 0x100 + 1 */
  t->parent = parent;
  t->tid = tid;
  t->name = xp_str(b->m, name);
  return (uint32_t)b->m->tracks.n - 1;
}

static uint64_t process_uuid(xb *b) {
  return ((xp_track *)sh_vec_at(&b->m->tracks, 0))->uuid;
}

static xp_event *add_event(xb *b, int kind, uint32_t track, uint64_t ts, uint64_t dur,
                           uint32_t name, uint32_t cat) {
  xp_event *e = sh_vec_push(&b->m->events);
  if (!e)
    return NULL;
  e->kind = kind;
  e->track = track;
  e->ts = ts;
  e->dur = kind == XE_SLICE && dur == 0 ? 1 : dur;
  e->name = name;
  e->cat = cat;
  e->order = b->order++;
  if (ts + e->dur > b->t_end)
    b->t_end = ts + e->dur;
  return e;
}

static void arg_u(xp_event *e, uint32_t key, uint64_t v) {
  if (e && e->nargs < XP_MAX_ARGS)
    e->args[e->nargs++] = (xp_arg){key, 0, v};
}

static void arg_s(xp_event *e, uint32_t key, uint32_t str) {
  if (e && e->nargs < XP_MAX_ARGS)
    e->args[e->nargs++] = (xp_arg){key, 1, str};
}

static uint32_t thread_track(xb *b, uint32_t tid) {
  uint64_t t1;
  if (cucap_map_get(&b->thread_track, (uint64_t)tid + 1, &t1))
    return (uint32_t)t1 - 1;
  uint64_t nm;
  char buf[64];
  snprintf(buf, sizeof buf, "thread %u", tid);
  uint32_t t = add_track(b, XT_THREAD, process_uuid(b), tid,
                         cucap_map_get(&b->thr_name, (uint64_t)tid + 1, &nm)
                             ? xp_s(b->m, (uint32_t)nm) : buf);
  (void)sh_map_put(&b->thread_track, (uint64_t)tid + 1, (uint64_t)t + 1);
  b->rep->threads++;
  return t;
}

/* A stream's track; with GPU times in use, ops that have none (copies,
 * memsets, graphs: host times) get a track of their own next to it, since
 * the two time bases cannot share one lane. */
static uint32_t stream_track(xb *b, uint64_t stream, int host_timed) {
  uint64_t t1, key = (stream + 1) ^ (host_timed ? (1ull << 63) : 0);
  if (cucap_map_get(&b->stream_track, key, &t1))
    return (uint32_t)t1 - 1;
  char buf[120];
  const char *suffix = host_timed ? " (host times)" : "";
  if (stream == 0 || stream == 1)
    snprintf(buf, sizeof buf, "GPU: default stream%s", suffix);
  else if (stream == 2)
    snprintf(buf, sizeof buf, "GPU: per-thread default stream%s", suffix);
  else
    snprintf(buf, sizeof buf, "GPU: stream 0x%" PRIx64 "%s", stream, suffix);
  uint32_t t = add_track(b, XT_STREAM, process_uuid(b),
                         (uint32_t)(1000000 + b->rep->streams), buf);
  (void)sh_map_put(&b->stream_track, key, (uint64_t)t + 1);
  b->rep->streams++;
  return t;
}

static uint32_t child_track(xb *b, uint32_t tid, uint64_t domain) {
  uint64_t key = sh_fnv1a(sh_fnv1a(SH_FNV_INIT, &tid, 4), &domain, 8) | 1, t1;
  if (cucap_map_get(&b->child_track, key, &t1))
    return (uint32_t)t1 - 1;
  uint32_t parent = thread_track(b, tid);
  uint64_t dn;
  char buf[300];
  snprintf(buf, sizeof buf, "NVTX %s",
           cucap_map_get(&b->dom_name, domain, &dn) ? xp_s(b->m, (uint32_t)dn) : "domain");
  uint32_t t = add_track(b, XT_CHILD, ((xp_track *)sh_vec_at(&b->m->tracks, parent))->uuid,
                         tid, buf);
  (void)sh_map_put(&b->child_track, key, (uint64_t)t + 1);
  return t;
}

/* An async lane free at ts (NVTX start/end ranges may overlap). */
static uint32_t lane_for(xb *b, uint64_t ts, uint64_t end) {
  for (size_t i = 0; i < b->lanes.n; i++) {
    uint64_t *le = sh_vec_at(&b->lanes, i);
    if (*le <= ts) {
      *le = end;
      return *(uint32_t *)sh_vec_at(&b->lane_track, i);
    }
  }
  char buf[64];
  snprintf(buf, sizeof buf, "NVTX ranges%s%zu", b->lanes.n ? " " : "", b->lanes.n ? b->lanes.n + 1 : 0);
  if (!b->lanes.n)
    snprintf(buf, sizeof buf, "NVTX ranges");
  uint32_t t = add_track(b, XT_ASYNC, process_uuid(b), 0, buf);
  uint64_t *le = sh_vec_push(&b->lanes);
  uint32_t *lt = sh_vec_push(&b->lane_track);
  if (le && lt) {
    *le = end;
    *lt = t;
  }
  return t;
}

static const char *call_name(xb *b, unsigned cbid, char *buf, size_t n) {
  const char *s = b->o->call_name ? b->o->call_name(cbid) : NULL;
  if (s)
    return s;
  snprintf(buf, n, "cbid %u", cbid);
  return buf;
}

/* ---------------------------------------------------------------- pass 1 */

static int pass1(xb *b, const cucap_fb_record *rec) {
  switch (cucap_fb_record_body_type(rec)) {
  case CUCAP_FB_BODY_FUNCTION: {
    const cucap_fb_function *f = cucap_fb_record_body_as_function(rec);
    const char *nm = cucap_fb_function_name(f);
    uint64_t id;
    if (!nm) {
      if (cucap_map_get(&b->fn_name, cucap_fb_function_module(f), &id))
        return sh_map_put(&b->fn_name, cucap_fb_function_handle(f), id);
      return 1;
    }
    char buf[2048];
    const char *rd = b->o->kernel_name ? b->o->kernel_name(nm, buf, sizeof buf) : nm;
    uint32_t s = xp_str(b->m, rd ? rd : nm);
    return s && sh_map_put(&b->fn_name, cucap_fb_function_handle(f), s);
  }
  case CUCAP_FB_BODY_NVTX: {
    const cucap_fb_nvtx *nv = cucap_fb_record_body_as_nvtx(rec);
    const char *msg = cucap_fb_nvtx_message(nv);
    if (cucap_fb_nvtx_op(nv) == CUCAP_FB_NVTXOP_DOMAINCREATE && msg)
      return sh_map_put(&b->dom_name, cucap_fb_nvtx_domain(nv), xp_str(b->m, msg));
    if (cucap_fb_nvtx_op(nv) == CUCAP_FB_NVTXOP_NAMETHREAD && msg) {
      uint64_t tid = cucap_fb_nvtx_value(nv) ? cucap_fb_nvtx_value(nv) : cucap_fb_record_tid(rec);
      return sh_map_put(&b->thr_name, tid + 1, xp_str(b->m, msg));
    }
    return 1;
  }
  case CUCAP_FB_BODY_KERNELTIMING: {
    const cucap_fb_kernel_timing *k = cucap_fb_record_body_as_kernel_timing(rec);
    uint64_t li = cucap_fb_kernel_timing_launch_index(k);
    if (cucap_map_get(&b->kt, li + 1, NULL) || cucap_fb_kernel_timing_end_ns(k) < cucap_fb_kernel_timing_start_ns(k))
      return 1;
    gpu_time *g = sh_vec_push(&b->ktimes);
    if (!g)
      return 0;
    g->start = cucap_fb_kernel_timing_start_ns(k);
    g->end = cucap_fb_kernel_timing_end_ns(k);
    return sh_map_put(&b->kt, li + 1, b->ktimes.n);
  }
  default:
    return 1;
  }
}

/* GPU time of a launch from the profile or KernelTiming records. */
static const gpu_time *timed(xb *b, uint64_t li, gpu_time *tmp) {
  if (b->o->profile) {
    const cucap_profile_row *r = cucap_profile_table_find(b->o->profile, li);
    if (!r)
      return NULL;
    tmp->start = r->start_ns;
    tmp->end = r->end_ns;
    return tmp;
  }
  uint64_t k1;
  return cucap_map_get(&b->kt, li + 1, &k1) ? sh_vec_at(&b->ktimes, k1 - 1) : NULL;
}

/* Offset so that no timed kernel starts before its launch call entered. */
static void align(xb *b, const cucap_fb_record *rec) {
  if (cucap_fb_record_body_type(rec) != CUCAP_FB_BODY_LAUNCH)
    return;
  gpu_time tmp;
  const gpu_time *g = timed(b, cucap_fb_launch_launch_index(cucap_fb_record_body_as_launch(rec)), &tmp);
  if (!g)
    return;
  int64_t need = (int64_t)cucap_fb_record_t_enter(rec) - (int64_t)g->start;
  if (!b->have_offset || need > b->offset)
    b->offset = need;
  b->have_offset = 1;
}

/* ---------------------------------------------------------------- pass 2 */

#define XP_NONE SIZE_MAX

/* The event at index i (XP_NONE: NULL). Events are referred to by index:
 * adding one may move them all. */
static xp_event *ev_at(xb *b, size_t i) {
  return i == XP_NONE ? NULL : sh_vec_at(&b->m->events, i);
}

/* Places one op on its stream: GPU times when known, else after the call
 * that submitted it and after the stream's previous op. Returns the event's
 * index (XP_NONE when the op is not GPU work now or on OOM). */
static size_t gpu_op(xb *b, const cucap_fb_record *rec, uint64_t stream, uint32_t name,
                     uint32_t cat, const gpu_time *g) {
  uint64_t s1;
  if (cucap_map_get(&b->capturing, stream + 1, &s1) && s1)
    return XP_NONE; /* captured into a graph: runs at cuGraphLaunch */
  int mixed = !g && (b->o->profile || b->ktimes.n);
  uint32_t t = stream_track(b, stream, mixed);
  uint64_t ts, dur;
  if (g) {
    int64_t v = (int64_t)g->start + b->offset;
    ts = v < 0 ? 0 : (uint64_t)v;
    dur = g->end - g->start;
  } else {
    uint64_t busy = 0;
    cucap_map_get(&b->stream_busy, (stream + 1) ^ (mixed ? (1ull << 63) : 0), &busy);
    ts = cucap_fb_record_t_enter(rec);
    if (busy > ts)
      ts = busy;
    dur = cucap_fb_record_t_exit(rec) - cucap_fb_record_t_enter(rec);
  }
  if (!g) /* timed ops keep their own times; host-timed ones queue */
    (void)sh_map_put(&b->stream_busy, (stream + 1) ^ (mixed ? (1ull << 63) : 0),
                     ts + (dur ? dur : 1));
  xp_event *e = add_event(b, XE_SLICE, t, ts, dur, name, cat);
  if (!e)
    return XP_NONE;
  if (!g)
    arg_s(e, b->s_timing, b->s_host);
  b->rep->gpu_ops++;
  return b->m->events.n - 1;
}

static void counter(xb *b, uint32_t track, uint64_t ts, double v, int integer) {
  xp_event *e = add_event(b, XE_COUNTER, track, ts, 0, 0, 0);
  if (e) {
    e->value = v;
    e->int_value = integer;
    b->rep->counters++;
  }
}

static nv_stack *stack_of(xb *b, uint32_t tid, uint64_t domain) {
  for (size_t i = 0; i < b->stacks.n; i++) {
    nv_stack *s = sh_vec_at(&b->stacks, i);
    if (s->tid == tid && s->domain == domain)
      return s;
  }
  nv_stack *s = sh_vec_push(&b->stacks);
  if (!s)
    return NULL;
  s->tid = tid;
  s->domain = domain;
  s->track = domain ? child_track(b, tid, domain) : thread_track(b, tid);
  return s;
}

static uint32_t nvtx_cat(xb *b, uint64_t domain) {
  uint64_t dn;
  if (!domain || !cucap_map_get(&b->dom_name, domain, &dn))
    return b->s_nvtx;
  char buf[300];
  snprintf(buf, sizeof buf, "nvtx.%s", xp_s(b->m, (uint32_t)dn));
  return xp_str(b->m, buf);
}

static int nvtx_event(xb *b, const cucap_fb_record *rec) {
  const cucap_fb_nvtx *nv = cucap_fb_record_body_as_nvtx(rec);
  uint32_t tid = cucap_fb_record_tid(rec);
  uint64_t ts = cucap_fb_record_t_enter(rec), dom = cucap_fb_nvtx_domain(nv);
  const char *msg = cucap_fb_nvtx_message(nv);
  switch (cucap_fb_nvtx_op(nv)) {
  case CUCAP_FB_NVTXOP_PUSH: {
    nv_stack *s = stack_of(b, tid, dom);
    if (!s)
      return 0;
    if (!CUCAP_VEC_RESERVE(s->v, s->cap, s->n + 1, 8))
      return 0;
    s->v[s->n++] = (nv_open){ts, xp_str(b->m, msg ? msg : "(range)"), nvtx_cat(b, dom)};
    return 1;
  }
  case CUCAP_FB_NVTXOP_POP: {
    nv_stack *s = stack_of(b, tid, dom);
    if (!s || !s->n)
      return 1; /* pushed before the capture started */
    nv_open o = s->v[--s->n];
    add_event(b, XE_SLICE, s->track, o.ts, ts - o.ts, o.name, o.cat);
    b->rep->nvtx_ranges++;
    return 1;
  }
  case CUCAP_FB_NVTXOP_RANGESTART: {
    range_rec *r = sh_vec_push(&b->range_open);
    if (!r)
      return 0;
    r->ts = ts;
    r->domain = dom;
    r->name = xp_str(b->m, msg ? msg : "(range)");
    return sh_map_put(&b->ranges, cucap_fb_nvtx_range_id(nv), b->range_open.n);
  }
  case CUCAP_FB_NVTXOP_RANGEEND: {
    uint64_t i1;
    if (!cucap_map_del(&b->ranges, cucap_fb_nvtx_range_id(nv), &i1))
      return 1;
    range_rec *r = sh_vec_at(&b->range_open, i1 - 1);
    add_event(b, XE_SLICE, lane_for(b, r->ts, ts), r->ts, ts - r->ts, r->name,
              nvtx_cat(b, r->domain));
    b->rep->nvtx_ranges++;
    return 1;
  }
  case CUCAP_FB_NVTXOP_MARK:
    add_event(b, XE_INSTANT, dom ? child_track(b, tid, dom) : thread_track(b, tid), ts, 0,
              xp_str(b->m, msg ? msg : "(mark)"), nvtx_cat(b, dom));
    return 1;
  default:
    return 1;
  }
}

static void call_slice(xb *b, const cucap_fb_record *rec, size_t *out) {
  char buf[32];
  uint32_t call = cucap_fb_record_call(rec);
  uint64_t t0 = cucap_fb_record_t_enter(rec), t1 = cucap_fb_record_t_exit(rec);
  xp_event *e = add_event(b, XE_SLICE, thread_track(b, cucap_fb_record_tid(rec)), t0,
                          t1 > t0 ? t1 - t0 : 0, xp_str(b->m, call_name(b, call, buf, sizeof buf)),
                          b->s_cuda);
  arg_u(e, b->s_seq, cucap_fb_record_seq(rec));
  if (cucap_fb_record_result(rec))
    arg_u(e, b->s_result, (uint64_t)(int64_t)cucap_fb_record_result(rec));
  b->rep->calls++;
  *out = e ? b->m->events.n - 1 : XP_NONE;
}

/* A launch on its stream's GPU track, joined by a flow to its API call
 * (api). */
static void launch_event(xb *b, const cucap_fb_record *rec, size_t api) {
  const cucap_fb_launch *l = cucap_fb_record_body_as_launch(rec);
  if (cucap_fb_launch_kind(l) == CUCAP_FB_LAUNCHKIND_HOSTFUNC)
    return;
  uint64_t li = cucap_fb_launch_launch_index(l), nm = 0;
  cucap_map_get(&b->fn_name, cucap_fb_launch_function(l), &nm);
  uint32_t name = nm ? (uint32_t)nm : xp_str(b->m, "(kernel)");
  gpu_time tmp;
  const gpu_time *g = timed(b, li, &tmp);
  xp_event *e = ev_at(b, gpu_op(b, rec, cucap_fb_launch_stream(l), name, b->s_kernel, g));
  b->rep->launches++;
  if (g)
    b->rep->kernels_timed++;
  if (e) {
    uint64_t flow = li + 1;
    e->flow_in = flow;
    arg_u(e, b->s_launch_index, li);
    xp_event *a = ev_at(b, api);
    if (a) {
      a->flow_out = flow;
      arg_s(a, b->s_kernel_key, name);
    }
  }
}

/* A copy on its stream's GPU track and the bandwidth counter. */
static void memcpy_event(xb *b, const cucap_fb_record *rec, size_t api) {
  const cucap_fb_memcpy *m = cucap_fb_record_body_as_memcpy(rec);
  int k = cucap_fb_memcpy_kind(m);
  if (k == CUCAP_FB_MEMCPYKIND_HTOH || k == CUCAP_FB_MEMCPYKIND_PREFETCH)
    return;
  char buf[96];
  uint64_t size = cucap_fb_memcpy_size(m);
  const char *kn = cucap_fb_memcpy_kind_name(k);
  snprintf(buf, sizeof buf, "memcpy %s", kn ? kn : "?");
  xp_event *e = ev_at(b, gpu_op(b, rec, cucap_fb_memcpy_stream(m), xp_str(b->m, buf),
                                b->s_memcpy, NULL));
  if (e) {
    arg_u(e, b->s_bytes, size);
    uint64_t ts = e->ts, dur = e->dur; /* counter() may move e */
    double gbs = (double)size / (double)(dur ? dur : 1); /* bytes/ns = GB/s */
    counter(b, b->bw_track, ts, gbs, 0);
    counter(b, b->bw_track, ts + dur, 0, 0);
  }
  arg_u(ev_at(b, api), b->s_bytes, size);
}

/* cuProfilerStart opens a profiler range, cuProfilerStop closes it as a
 * slice on its own track. */
static void profiler_range(xb *b, const cucap_fb_record *rec, uint32_t call) {
  if (call == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart && !b->prof_open)
    b->prof_open = cucap_fb_record_t_exit(rec) + 1;
  if (call == CUPTI_DRIVER_TRACE_CBID_cuProfilerStop && b->prof_open) {
    if (!b->prof_track)
      b->prof_track = add_track(b, XT_ASYNC, process_uuid(b), 0, "profiler ranges");
    uint64_t t0 = b->prof_open - 1;
    add_event(b, XE_SLICE, b->prof_track, t0, cucap_fb_record_t_enter(rec) - t0,
              xp_str(b->m, "cuProfilerStart..Stop"), b->s_cuda);
    b->prof_open = 0;
  }
}

static int pass2(xb *b, const cucap_fb_record *rec) {
  size_t api = XP_NONE;
  uint32_t call = cucap_fb_record_call(rec);
  if (call && cucap_fb_record_seq(rec))
    call_slice(b, rec, &api);
  int ok = cucap_fb_record_result(rec) == 0;
  switch (cucap_fb_record_body_type(rec)) {
  case CUCAP_FB_BODY_LAUNCH:
    if (ok)
      launch_event(b, rec, api);
    break;
  case CUCAP_FB_BODY_MEMCPY:
    if (ok)
      memcpy_event(b, rec, api);
    break;
  case CUCAP_FB_BODY_MEMSET: {
    const cucap_fb_memset *m = cucap_fb_record_body_as_memset(rec);
    if (!ok)
      break;
    xp_event *e = ev_at(b, gpu_op(b, rec, cucap_fb_memset_stream(m), xp_str(b->m, "memset"),
                                  b->s_memset, NULL));
    uint64_t bytes = cucap_fb_memset_count(m) * cucap_fb_memset_elem_size(m) *
                     (cucap_fb_memset_height(m) ? cucap_fb_memset_height(m) : 1);
    arg_u(e, b->s_bytes, bytes);
    break;
  }
  case CUCAP_FB_BODY_GRAPH: {
    const cucap_fb_graph *g = cucap_fb_record_body_as_graph(rec);
    if (!ok || !cucap_fb_record_seq(rec) || cucap_fb_graph_op(g) != CUCAP_FB_GRAPHOP_LAUNCH)
      break;
    char buf[64];
    snprintf(buf, sizeof buf, "graph 0x%" PRIx64, cucap_fb_graph_exec(g));
    gpu_op(b, rec, cucap_fb_graph_stream(g), xp_str(b->m, buf), b->s_graph, NULL);
    break;
  }
  case CUCAP_FB_BODY_STREAM: {
    const cucap_fb_stream *s = cucap_fb_record_body_as_stream(rec);
    uint64_t h = cucap_fb_stream_handle(s);
    if (ok && cucap_fb_stream_op(s) == CUCAP_FB_STREAMOP_BEGINCAPTURE)
      return sh_map_put(&b->capturing, h + 1, 1);
    if (ok && cucap_fb_stream_op(s) == CUCAP_FB_STREAMOP_ENDCAPTURE)
      cucap_map_del(&b->capturing, h + 1, NULL);
    break;
  }
  case CUCAP_FB_BODY_ALLOC: {
    const cucap_fb_alloc *a = cucap_fb_record_body_as_alloc(rec);
    if (!ok || !sh_alloc_is_device(cucap_fb_alloc_kind(a)))
      break;
    uint64_t size = sh_alloc_size(a), old;
    if (cucap_map_get(&b->alloc_size, cucap_fb_alloc_address(a), &old))
      b->mem_in_use -= old;
    if (!sh_map_put(&b->alloc_size, cucap_fb_alloc_address(a), size))
      return 0;
    b->mem_in_use += size;
    counter(b, b->mem_track, cucap_fb_record_t_exit(rec), (double)b->mem_in_use, 1);
    break;
  }
  case CUCAP_FB_BODY_FREE: {
    uint64_t old;
    if (ok && cucap_map_del(&b->alloc_size, cucap_fb_free_address(cucap_fb_record_body_as_free(rec)), &old)) {
      b->mem_in_use -= old;
      counter(b, b->mem_track, cucap_fb_record_t_exit(rec), (double)b->mem_in_use, 1);
    }
    break;
  }
  case CUCAP_FB_BODY_NVTX:
    return nvtx_event(b, rec);
  default:
    break;
  }
  if (ok)
    profiler_range(b, rec, call);
  return 1;
}

static int u64_cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Ranges still open at the end are closed there, in the order they were
 * opened (their lanes and the order of equal events depend on it). 0 on
 * OOM. */
static int close_open(xb *b) {
  for (size_t i = 0; i < b->stacks.n; i++) {
    nv_stack *s = sh_vec_at(&b->stacks, i);
    while (s->n) {
      nv_open o = s->v[--s->n];
      add_event(b, XE_SLICE, s->track, o.ts, b->t_end > o.ts ? b->t_end - o.ts : 0, o.name, o.cat);
      b->rep->nvtx_ranges++;
    }
    free(s->v);
    s->v = NULL;
  }
  size_t n = 0;
  uint64_t *open1 = malloc((cucap_map_size(&b->ranges) + 1) * sizeof *open1), v;
  if (!open1)
    return 0;
  for (size_t pos = 0; cucap_map_next(&b->ranges, &pos, NULL, &v);)
    open1[n++] = v;
  cucap_sort(open1, n, sizeof *open1, u64_cmp);
  for (size_t i = 0; i < n; i++) {
    range_rec *r = sh_vec_at(&b->range_open, open1[i] - 1);
    uint64_t end = b->t_end > r->ts ? b->t_end : r->ts;
    add_event(b, XE_SLICE, lane_for(b, r->ts, end), r->ts, end - r->ts, r->name,
              nvtx_cat(b, r->domain));
    b->rep->nvtx_ranges++;
  }
  free(open1);
  return 1;
}

cucap_status xp_build(cucap_reader *r, const cucap_export_options *o, xp_model *m,
                      cucap_export_report *rep) {
  memset(m, 0, sizeof *m);
  sh_vec_init(&m->tracks, sizeof(xp_track));
  sh_vec_init(&m->events, sizeof(xp_event));
  xb b;
  memset(&b, 0, sizeof b);
  b.m = m;
  b.o = o;
  b.rep = rep;
  sh_vec_init(&b.ktimes, sizeof(gpu_time));
  sh_vec_init(&b.lanes, sizeof(uint64_t));
  sh_vec_init(&b.lane_track, sizeof(uint32_t));
  sh_vec_init(&b.stacks, sizeof(nv_stack));
  sh_vec_init(&b.range_open, sizeof(range_rec));
  const cucap_fb_file_header *h = cucap_reader_header(r);
  m->pid = h ? cucap_fb_file_header_pid(h) : 0;
  char pname[512] = "cucap capture";
  if (h && cucap_fb_file_header_argv_len(h)) {
    const char *a0 = cucap_fb_file_header_argv_at(h, 0);
    const char *base = a0 ? strrchr(a0, '/') : NULL;
    snprintf(pname, sizeof pname, "%s", base ? base + 1 : a0 ? a0 : "?");
  }
  add_track(&b, XT_PROCESS, 0, m->pid, pname);
  m->process_name = ((xp_track *)sh_vec_at(&m->tracks, 0))->name;
  b.s_cuda = xp_str(m, "cuda");
  b.s_kernel = xp_str(m, "kernel");
  b.s_memcpy = xp_str(m, "memcpy");
  b.s_memset = xp_str(m, "memset");
  b.s_graph = xp_str(m, "graph");
  b.s_nvtx = xp_str(m, "nvtx");
  b.s_seq = xp_str(m, "seq");
  b.s_result = xp_str(m, "result");
  b.s_kernel_key = xp_str(m, "kernel");
  b.s_bytes = xp_str(m, "bytes");
  b.s_timing = xp_str(m, "timing");
  b.s_host = xp_str(m, "host");
  b.s_launch_index = xp_str(m, "launch_index");
  b.mem_track = add_track(&b, XT_COUNTER, process_uuid(&b), 0, "device memory in use");
  ((xp_track *)sh_vec_at(&m->tracks, b.mem_track))->unit_bytes = 1;
  b.bw_track = add_track(&b, XT_COUNTER, process_uuid(&b), 0, "copy bandwidth (GB/s)");
  cucap_status st = CUCAP_OK;
  const void *rv, *buf;
  size_t size;
  /* 1: names and KernelTiming records; 2: GPU clock alignment (when there
   * are GPU times); 3: the events */
  for (int pass = 1; pass <= 3 && st == CUCAP_OK; pass++) {
    if (pass == 2 && !o->profile && !b.ktimes.n)
      continue;
    if ((st = cucap_reader_rewind(r)) != CUCAP_OK)
      break;
    while ((st = cucap_reader_next(r, &rv, &buf, &size)) == CUCAP_OK) {
      const cucap_fb_record *rec = rv;
      int ok = 1;
      if (pass == 1) {
        ok = pass1(&b, rec);
        rep->records++;
      } else if (pass == 2) {
        align(&b, rec);
      } else {
        ok = pass2(&b, rec);
      }
      if (!ok) {
        st = CUCAP_ERR_NOMEM;
        break;
      }
    }
    if (st == CUCAP_END)
      st = CUCAP_OK;
  }
  if (st == CUCAP_OK) {
    cucap_reader_recovery rv2;
    cucap_reader_recovery_get(r, &rv2);
    if (!rv2.complete)
      st = CUCAP_ERR_TRUNCATED;
  }
  if (st == CUCAP_OK && !close_open(&b))
    st = CUCAP_ERR_NOMEM;
  rep->gpu_times = o->profile ? "profile" : b.ktimes.n ? "capture" : "host";
  cucap_map *maps[] = {&b.fn_name, &b.dom_name, &b.thr_name, &b.kt, &b.thread_track,
                    &b.stream_track, &b.child_track, &b.stream_busy, &b.capturing,
                    &b.alloc_size, &b.ranges};
  for (size_t i = 0; i < sizeof maps / sizeof *maps; i++)
    cucap_map_free(maps[i]);
  for (size_t i = 0; i < b.stacks.n; i++)
    free(((nv_stack *)sh_vec_at(&b.stacks, i))->v);
  sh_vec *vecs[] = {&b.ktimes, &b.lanes, &b.lane_track, &b.stacks, &b.range_open};
  for (size_t i = 0; i < sizeof vecs / sizeof *vecs; i++)
    sh_vec_free(vecs[i]);
  return st;
}

cucap_status cucap_export(cucap_reader *r, FILE *out, const cucap_export_options *o,
                          cucap_export_report *rep) {
  memset(rep, 0, sizeof *rep);
  xp_model m;
  cucap_status st = xp_build(r, o, &m, rep);
  if (st == CUCAP_OK)
    st = o->format == CUCAP_EXPORT_CHROME_JSON ? xp_write_chrome(&m, out)
                                               : xp_write_perfetto(&m, out);
  if (st != CUCAP_OK && !rep->error[0])
    snprintf(rep->error, sizeof rep->error, "%s", cucap_status_str(st));
  xp_free(&m);
  return st;
}
