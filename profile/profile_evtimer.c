/* profile_evtimer.c - the CUDA-event timeline (cucap_profiler.h): a replay
 * observer that brackets every launch, copy, memset and graph launch with
 * two events on the operation's own stream and reads their elapsed times at
 * the end of each pass (the replayer has synchronised the context then).
 * Used when the profiling backend gives no timeline (no CUPTI). An event on
 * the op's own stream orders exactly like the op, so it adds no dependency
 * the capture did not have; nothing is recorded on a capturing stream. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cucap_clock.h"
#include "cucap_profiler.h"
#include "cucap_schema.h"
#include "cucap_vec.h"

#define EVT_MAX_EVENTS (1u << 20) /* events per pass (two per op) */

typedef CUresult (*ev_create_fn)(CUevent *, unsigned);
typedef CUresult (*ev_record_fn)(CUevent, CUstream);
typedef CUresult (*ev_elapsed_fn)(float *, CUevent, CUevent);
typedef CUresult (*ev_destroy_fn)(CUevent);
typedef CUresult (*ctx_get_fn)(CUcontext *);
typedef CUresult (*ctx_set_fn)(CUcontext);

typedef struct evpair {
  cucap_profile_activity act; /* kind 0: a launch (key in act.seq's place: see key) */
  uint64_t key;
  uint32_t a, b;
} evpair;

struct cucap_evtimer {
  cucap_profile *p;
  cucap_replay_observer ob;
  ev_create_fn create;
  ev_record_fn record;
  ev_elapsed_fn elapsed;
  ev_destroy_fn destroy;
  ctx_get_fn ctx_get;
  ctx_set_fn ctx_set;
  void *primary;
  CUevent *pool;
  size_t npool, next;
  CUevent ev0;
  int ev0_ok;
  evpair *pairs;
  size_t np, capp;
  int open;
  evpair cur;
  CUstream cur_stream;
  uint64_t base_ns;
  uint64_t timed, failed, exhausted;
  unsigned passes;
  int disabled;
  char why[200];
};

/* One more event, created in the primary context (the current one is put
 * back). NULL when the pool is full or creation fails. */
static CUevent pool_get(cucap_evtimer *t) {
  if (t->next < t->npool)
    return t->pool[t->next++];
  if (t->npool >= EVT_MAX_EVENTS) {
    t->exhausted++;
    return NULL;
  }
  size_t nc = t->npool ? t->npool * 2 : 1024;
  CUevent *np = realloc(t->pool, nc * sizeof *np);
  if (!np)
    return NULL;
  t->pool = np;
  CUcontext cur = NULL;
  int switched = 0;
  if (t->ctx_get && t->ctx_set && t->ctx_get(&cur) == CUDA_SUCCESS && cur != t->primary &&
      t->ctx_set(t->primary) == CUDA_SUCCESS)
    switched = 1;
  while (t->npool < nc) {
    CUevent e = NULL;
    if (t->create(&e, CU_EVENT_DEFAULT) != CUDA_SUCCESS)
      break;
    t->pool[t->npool++] = e;
  }
  if (switched)
    t->ctx_set(cur);
  return t->next < t->npool ? t->pool[t->next++] : NULL;
}

typedef CUresult (*dev_name_fn)(char *, int, CUdevice);
typedef CUresult (*dev_attr_fn)(int *, CUdevice_attribute, CUdevice);
typedef CUresult (*drv_ver_fn)(int *);

/* the replay device into the profile info, unless a backend filled it */
static void device_info(cucap_evtimer *t, cucap_replay_session *s) {
  cucap_profile_info in = *cucap_profile_info_get(t->p);
  if (in.device[0])
    return;
  dev_name_fn name = (dev_name_fn)cucap_replay_session_proc(s, "cuDeviceGetName", 2000);
  dev_attr_fn attr = (dev_attr_fn)cucap_replay_session_proc(s, "cuDeviceGetAttribute", 2000);
  drv_ver_fn ver = (drv_ver_fn)cucap_replay_session_proc(s, "cuDriverGetVersion", 2020);
  CUdevice d = cucap_replay_session_device(s);
  if (name && name(in.device, (int)sizeof in.device, d) != CUDA_SUCCESS)
    in.device[0] = 0;
  if (attr) {
    attr(&in.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d);
    attr(&in.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d);
    attr(&in.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d);
  }
  if (ver)
    ver(&in.driver_version);
  cucap_profile_set_info(t->p, &in);
}

static cucap_status ev_begin(void *u, cucap_replay_session *s) {
  cucap_evtimer *t = u;
  t->create = (ev_create_fn)cucap_replay_session_proc(s, "cuEventCreate", 2000);
  t->record = (ev_record_fn)cucap_replay_session_proc(s, "cuEventRecord", 2000);
  t->elapsed = (ev_elapsed_fn)cucap_replay_session_proc(s, "cuEventElapsedTime", 12080);
  if (!t->elapsed)
    t->elapsed = (ev_elapsed_fn)cucap_replay_session_proc(s, "cuEventElapsedTime", 2000);
  t->destroy = (ev_destroy_fn)cucap_replay_session_proc(s, "cuEventDestroy", 4000);
  t->ctx_get = (ctx_get_fn)cucap_replay_session_proc(s, "cuCtxGetCurrent", 4000);
  t->ctx_set = (ctx_set_fn)cucap_replay_session_proc(s, "cuCtxSetCurrent", 4000);
  t->primary = cucap_replay_session_context(s);
  device_info(t, s);
  if (!t->create || !t->record || !t->elapsed || !t->destroy) {
    t->disabled = 1;
    snprintf(t->why, sizeof t->why, "the driver has no cuEventCreate/Record/ElapsedTime");
  }
  return CUCAP_OK; /* never stops the replay */
}

static void ev_pass_begin(void *u, cucap_replay_session *s, unsigned pass) {
  cucap_evtimer *t = u;
  (void)s;
  (void)pass;
  t->next = 0;
  t->np = 0;
  t->open = 0;
  t->ev0_ok = 0;
  t->passes++;
  if (t->disabled)
    return;
  t->ev0 = pool_get(t);
  t->base_ns = cucap_clock_now_ns();
  t->ev0_ok = t->ev0 && t->record(t->ev0, NULL) == CUDA_SUCCESS;
}

/* the live stream an op runs on, and what to file it under */
static int op_target(cucap_evtimer *t, cucap_replay_session *s, const cucap_replay_op *op,
                     CUstream *st, evpair *pr) {
  const cucap_fb_record *rec = op->record;
  int pt = cucap_fb_record_variant(rec) != CUCAP_FB_CALLVARIANT_DEFAULT;
  uint64_t rs = 0;
  memset(pr, 0, sizeof *pr);
  pr->act.seq = op->seq;
  pr->act.rec_index = op->rec_index;
  pr->act.copy_kind = -1;
  (void)t;
  if (op->launch_index != CUCAP_REPLAY_NO_LAUNCH) {
    pr->key = op->launch_index;
    *st = (CUstream)(uintptr_t)op->stream;
    return 1;
  }
  switch (op->body_type) {
  case CUCAP_FB_BODY_MEMCPY: {
    const cucap_fb_memcpy *m = cucap_fb_record_body_as_memcpy(rec);
    if (!m || cucap_fb_memcpy_kind(m) == CUCAP_FB_MEMCPYKIND_PREFETCH)
      return 0;
    pr->act.kind = CUCAP_PROFILE_ACT_MEMCPY;
    pr->act.bytes = cucap_fb_memcpy_size(m);
    pr->act.copy_kind = cucap_fb_memcpy_kind(m);
    rs = cucap_fb_memcpy_async(m) ? cucap_fb_memcpy_stream(m) : 0;
    break;
  }
  case CUCAP_FB_BODY_MEMSET: {
    const cucap_fb_memset *m = cucap_fb_record_body_as_memset(rec);
    if (!m)
      return 0;
    uint64_t h = cucap_fb_memset_height(m);
    pr->act.kind = CUCAP_PROFILE_ACT_MEMSET;
    pr->act.bytes = cucap_fb_memset_count(m) * cucap_fb_memset_elem_size(m) * (h ? h : 1);
    rs = cucap_fb_memset_async(m) ? cucap_fb_memset_stream(m) : 0;
    break;
  }
  case CUCAP_FB_BODY_GRAPH: {
    const cucap_fb_graph *g = cucap_fb_record_body_as_graph(rec);
    if (!g || cucap_fb_graph_op(g) != CUCAP_FB_GRAPHOP_LAUNCH)
      return 0;
    pr->act.kind = CUCAP_PROFILE_ACT_GRAPH;
    rs = cucap_fb_graph_stream(g);
    break;
  }
  default:
    return 0;
  }
  pr->act.stream = rs;
  if (rs == 0 && pt)
    *st = CU_STREAM_PER_THREAD;
  else
    *st = (CUstream)(uintptr_t)cucap_replay_session_stream(s, rs);
  return 1;
}

static void ev_before(void *u, cucap_replay_session *s, const cucap_replay_op *op) {
  cucap_evtimer *t = u;
  t->open = 0;
  if (t->disabled || op->capturing || !t->ev0_ok)
    return;
  evpair pr;
  CUstream st;
  if (!op_target(t, s, op, &st, &pr))
    return;
  size_t mark = t->next;
  CUevent a = pool_get(t);
  if (!a)
    return;
  if (t->record(a, st) != CUDA_SUCCESS) {
    t->failed++;
    t->next = mark;
    return;
  }
  pr.a = (uint32_t)(t->next - 1);
  t->cur = pr;
  t->cur_stream = st;
  t->open = 1;
}

static void ev_after(void *u, cucap_replay_session *s, const cucap_replay_op *op) {
  cucap_evtimer *t = u;
  (void)s;
  if (!t->open || op->rec_index != t->cur.act.rec_index)
    return;
  t->open = 0;
  if (op->status != 0 || op->capturing)
    return;
  CUevent b = pool_get(t);
  if (!b)
    return;
  if (t->record(b, t->cur_stream) != CUDA_SUCCESS) {
    t->failed++;
    return;
  }
  t->cur.b = (uint32_t)(t->next - 1);
  if (!CUCAP_VEC_RESERVE(t->pairs, t->capp, t->np + 1, 1024))
    return;
  t->pairs[t->np++] = t->cur;
}

static int ev_pass_end(void *u, cucap_replay_session *s, unsigned pass) {
  cucap_evtimer *t = u;
  (void)s;
  for (size_t i = 0; i < t->np && t->ev0_ok; i++) {
    evpair *pr = &t->pairs[i];
    float ms0 = 0, ms = 0;
    if (t->elapsed(&ms0, t->ev0, t->pool[pr->a]) != CUDA_SUCCESS ||
        t->elapsed(&ms, t->pool[pr->a], t->pool[pr->b]) != CUDA_SUCCESS) {
      t->failed++;
      continue;
    }
    uint64_t start = t->base_ns + (uint64_t)((double)(ms0 > 0 ? ms0 : 0) * 1e6);
    uint64_t end = start + (uint64_t)((double)(ms > 0 ? ms : 0) * 1e6);
    cucap_status st;
    if (pr->act.kind == 0) {
      st = cucap_profile_add_kernel_timing(t->p, pr->key, pass, start, end);
    } else {
      pr->act.pass = pass;
      pr->act.start_ns = start;
      pr->act.end_ns = end;
      st = cucap_profile_add_activity(t->p, &pr->act);
    }
    if (st == CUCAP_OK)
      t->timed++;
    else
      t->failed++;
  }
  t->np = 0;
  return 0;
}

/* The driver is unloaded after the run: its events go now. */
static void ev_end(void *u, cucap_replay_session *s, cucap_replay_report *rep) {
  cucap_evtimer *t = u;
  (void)s;
  (void)rep;
  if (t->destroy)
    for (size_t i = 0; i < t->npool; i++)
      t->destroy(t->pool[i]);
  t->npool = t->next = 0;
  t->destroy = NULL;
  t->disabled = 1;
}

cucap_status cucap_evtimer_create(cucap_profile *p, cucap_evtimer **out) {
  *out = NULL;
  cucap_evtimer *t = calloc(1, sizeof *t);
  if (!t)
    return CUCAP_ERR_NOMEM;
  t->p = p;
  t->ob.name = "profile-events";
  t->ob.user = t;
  t->ob.begin = ev_begin;
  t->ob.pass_begin = ev_pass_begin;
  t->ob.op_before = ev_before;
  t->ob.op_after = ev_after;
  t->ob.pass_end = ev_pass_end;
  t->ob.end = ev_end;
  *out = t;
  return CUCAP_OK;
}

const cucap_replay_observer *cucap_evtimer_observer(cucap_evtimer *t) { return &t->ob; }

cucap_status cucap_evtimer_finish(cucap_evtimer *t) {
  if (!t->passes)
    return cucap_profile_set_section(t->p, CUCAP_PROFILE_TIMELINE, CUCAP_PROFILE_UNAVAILABLE,
                                     "cuda-events", "the replay stopped before its first pass");
  if ((t->disabled && !t->timed && t->why[0]) || (!t->timed && t->failed))
    return cucap_profile_set_section(
        t->p, CUCAP_PROFILE_TIMELINE, CUCAP_PROFILE_UNAVAILABLE, "cuda-events",
        "CUDA-event timing failed (%s%s%llu operations could not be timed)", t->why,
        t->why[0] ? "; " : "", (unsigned long long)t->failed);
  if (t->failed || t->exhausted)
    return cucap_profile_set_section(
        t->p, CUCAP_PROFILE_TIMELINE, CUCAP_PROFILE_PARTIAL, "cuda-events",
        "%llu operations timed with CUDA events, %llu could not be%s (times are upper "
        "bounds; CUPTI activity gives exact kernel times)",
        (unsigned long long)t->timed, (unsigned long long)(t->failed + t->exhausted),
        t->exhausted ? ", the event pool was exhausted" : "");
  return cucap_profile_set_section(
      t->p, CUCAP_PROFILE_TIMELINE, CUCAP_PROFILE_OK, "cuda-events",
      "%llu operations timed with CUDA events (upper bounds: they include submission gaps "
      "when the GPU was idle; CUPTI activity gives exact kernel times)",
      (unsigned long long)t->timed);
}

void cucap_evtimer_destroy(cucap_evtimer *t) {
  if (!t)
    return;
  free(t->pool); /* the events themselves went in ev_end */
  free(t->pairs);
  free(t);
}
