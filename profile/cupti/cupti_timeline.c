/* cupti_timeline.c - the timeline passes of the CUPTI engine: Activity
 * records of kernels (CONCURRENT_KERNEL: kernels keep running concurrently,
 * unlike KIND_KERNEL which serializes them), memcpys and memsets, joined to
 * the ops through the correlation map (cupti_engine.c), numbered within
 * their op by start time (sub), and with --loop N the per-execution median
 * and spread over N passes.
 *
 * CUPTI hands filled buffers to a callback without a user pointer, on its
 * own worker thread or inside cuptiActivityFlushAll: the records of
 * interest are copied out under E->mu and joined on the replayer's thread
 * at pass_end, after the context was synchronized and the buffers flushed.
 * The record layouts read here (Kernel10, Memcpy6, Memset4) only use fields
 * that have kept their offsets since CUDA 11. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_knobs.h"
#include "cucap_sort.h"
#include "cucap_log.h"
#include "cupti_internal.h"

#define CK_ACT_BUF_SIZE ((size_t)8 << 20)

/* CUPTI's buffer callbacks carry no user pointer: the engine that
 * registered them (one per process, as CUPTI allows one subscriber). The
 * pointer is read by CUPTI's worker thread: g_timeline_mu keeps the engine
 * alive while a buffer is being read (never held across a CUPTI call, which
 * may deliver a buffer on the calling thread). */
static ck_engine *g_timeline_engine;
static pthread_mutex_t g_timeline_mu = PTHREAD_MUTEX_INITIALIZER;

static void CUPTIAPI ck_buf_request(uint8_t **buffer, size_t *size,
                                    size_t *max_records) {
  *buffer = aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, CK_ACT_BUF_SIZE);
  *size = *buffer ? CK_ACT_BUF_SIZE : 0;
  *max_records = 0;
}

static void ck_keep(ck_engine *E, const CUpti_Activity *r) {
  ck_act a;
  memset(&a, 0, sizeof a);
  a.kind = (uint8_t)r->kind;
  switch (r->kind) {
  case CUPTI_ACTIVITY_KIND_KERNEL:
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
    const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
    a.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    a.corr = k->correlationId;
    a.stream = k->streamId;
    a.ctx = k->contextId;
    a.start = k->start;
    a.end = k->end;
    a.grid[0] = k->gridX, a.grid[1] = k->gridY, a.grid[2] = k->gridZ;
    a.block[0] = k->blockX, a.block[1] = k->blockY, a.block[2] = k->blockZ;
    a.regs = k->registersPerThread;
    a.ssmem = (uint32_t)k->staticSharedMemory;
    a.dsmem = (uint32_t)k->dynamicSharedMemory;
    if (k->name) {
      size_t n = strlen(k->name) + 1;
      a.name = malloc(n);
      if (a.name)
        memcpy(a.name, k->name, n);
    }
    break;
  }
  case CUPTI_ACTIVITY_KIND_MEMCPY: {
    const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)r;
    a.corr = m->correlationId;
    a.stream = m->streamId;
    a.ctx = m->contextId;
    a.start = m->start;
    a.end = m->end;
    a.bytes = m->bytes;
    a.copy_kind = m->copyKind;
    break;
  }
  case CUPTI_ACTIVITY_KIND_MEMSET: {
    const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)r;
    a.corr = m->correlationId;
    a.stream = m->streamId;
    a.ctx = m->contextId;
    a.start = m->start;
    a.end = m->end;
    a.bytes = m->bytes;
    break;
  }
  default:
    return;
  }
  if (!cucap_vec_reserve(&E->tl.pend, &E->tl.cappend, E->tl.npend + 1, sizeof *E->tl.pend, 16)) {
    free(a.name);
    return;
  }
  E->tl.pend[E->tl.npend++] = a;
}

static void CUPTIAPI ck_buf_complete(CUcontext ctx, uint32_t stream_id,
                                     uint8_t *buffer, size_t size,
                                     size_t valid) {
  (void)size;
  pthread_mutex_lock(&g_timeline_mu);
  ck_engine *E = g_timeline_engine;
  if (E && buffer && valid) {
    pthread_mutex_lock(&E->tl.mu);
    CUpti_Activity *r = NULL;
    for (;;) {
      CUptiResult st = E->api.cuptiActivityGetNextRecord(buffer, valid, &r);
      if (st != CUPTI_SUCCESS) {
        if (st != CUPTI_ERROR_MAX_LIMIT_REACHED)
          CUCAP_DEBUG("cupti: cuptiActivityGetNextRecord stopped with %d", (int)st);
        break;
      }
      ck_keep(E, r);
    }
    size_t dropped = 0;
    if (E->api.cuptiActivityGetNumDroppedRecords &&
        E->api.cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) ==
            CUPTI_SUCCESS)
      E->tl.act_dropped += dropped;
    pthread_mutex_unlock(&E->tl.mu);
  }
  pthread_mutex_unlock(&g_timeline_mu);
  free(buffer);
}

static const CUpti_ActivityKind ck_kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET};

int ck_timeline_attach(ck_engine *E) {
  pthread_mutex_lock(&g_timeline_mu);
  int busy = g_timeline_engine && g_timeline_engine != E;
  if (!busy)
    g_timeline_engine = E;
  pthread_mutex_unlock(&g_timeline_mu);
  if (busy) {
    snprintf(E->last_msg, sizeof E->last_msg,
             "another profiling engine is active in this process");
    return 0;
  }
  if (!CK_CALL(E, cuptiActivityRegisterCallbacks, ck_buf_request,
               ck_buf_complete))
    return 0;
  for (size_t i = 0; i < sizeof ck_kinds / sizeof *ck_kinds; i++)
    if (!ck_act_set(E, ck_kinds[i], 1))
      return 0;
  ck_api_records(E, 1);
  return 1;
}

/* The driver calls the engine joins by correlation id: every entry point
 * whose name starts with one of these (all versions and _ptsz/_ptds forms),
 * plus the two ck_cupti_alive calls. Names come from CUPTI itself
 * (cuptiGetCallbackName), so a newer CUPTI's new launch or copy entry
 * points are included without a rebuild. */
static int ck_work_name(const char *n) {
  static const char *const pre[] = {"cuLaunch", "cuMemcpy", "cuMemset",
                                    "cuGraphLaunch"};
  for (size_t i = 0; i < sizeof pre / sizeof *pre; i++)
    if (!strncmp(n, pre[i], strlen(pre[i])))
      return 1;
  return !strcmp(n, "cuCtxGetCurrent") || !strcmp(n, "cuDriverGetVersion");
}

int ck_work_cbids_init(ck_engine *E) {
  const char *sc = cucap_knob_str(CUCAP_KNOB(CUCAP_CUPTI_API_SCOPE));
  E->tl.nwork_cbid = 0;
  if ((sc && !strcmp(sc, "all")) || !E->api.cuptiEnableCallback ||
      !E->api.cuptiGetCallbackName)
    return 0;
  /* ids past this build's header come from a newer CUPTI: keep asking
   * until names stop for a while */
  unsigned misses = 0;
  for (uint32_t id = 1; id < 65536 && (id < CUPTI_DRIVER_TRACE_CBID_SIZE || misses < 256);
       id++) {
    const char *name = NULL;
    if (E->api.cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, id, &name) !=
            CUPTI_SUCCESS || !name) {
      misses++;
      continue;
    }
    misses = 0;
    if (!ck_work_name(name))
      continue;
    if (!cucap_vec_reserve(&E->tl.work_cbid, &E->tl.cap_work_cbid, E->tl.nwork_cbid + 1, sizeof *E->tl.work_cbid, 16))
      return 0;
    E->tl.work_cbid[E->tl.nwork_cbid++] = id;
  }
  CUCAP_DEBUG("profile: driver callbacks and API records for %zu entry points",
              E->tl.nwork_cbid);
  return E->tl.nwork_cbid > 2;
}

/* CUPTI documents correlation ids as generated only while an API activity
 * kind is enabled: API records are switched on for the passes that join by
 * correlation id (timeline, PC sampling) and dropped on arrival. With a
 * work set (ck_work_cbids_init) and cuptiActivityEnableDriverApi, only the
 * work calls produce records; otherwise the whole DRIVER kind does. Every
 * kind switch goes through ck_act_set (enabled once, disabled only when
 * this engine enabled it, never once CUPTI is dead).
 * CUCAP_CUPTI_NO_API_RECORDS=1 leaves them off (to measure whether the
 * callbacks' ids are enough, and what the records cost). */
void ck_api_records(ck_engine *E, int on) {
  const char *no = cucap_knob_str(CUCAP_KNOB(CUCAP_CUPTI_NO_API_RECORDS));
  if (no && *no && *no != '0')
    return;
  int q = E->quiet;
  E->quiet = !on;
  if (E->tl.nwork_cbid && E->api.cuptiActivityEnableDriverApi && !E->dead) {
    if (!!E->tl.api_recs_on != !!on) {
      /* every id is switched (a partial failure leaves none behind on the
       * way off); records for every driver call if one cannot be on */
      int all = 1;
      for (size_t i = 0; i < E->tl.nwork_cbid; i++)
        all &= CK_CALL(E, cuptiActivityEnableDriverApi,
                       (CUpti_CallbackId)E->tl.work_cbid[i], (uint8_t)!!on);
      E->tl.api_recs_on = on;
      if (on && !all)
        ck_act_set(E, CUPTI_ACTIVITY_KIND_DRIVER, 1);
    }
    if (!on)
      ck_act_set(E, CUPTI_ACTIVITY_KIND_DRIVER, 0);
  } else if (!ck_act_set(E, CUPTI_ACTIVITY_KIND_DRIVER, on)) {
    CUCAP_DEBUG("profile: driver API activity records %s: %s",
                on ? "not enabled" : "not disabled", E->last_msg);
  }
  E->quiet = q;
}

void ck_timeline_disable(ck_engine *E) {
  pthread_mutex_lock(&g_timeline_mu);
  int mine = g_timeline_engine == E;
  pthread_mutex_unlock(&g_timeline_mu);
  if (!mine)
    return;
  int q = E->quiet;
  E->quiet = 1;
  for (size_t i = 0; i < sizeof ck_kinds / sizeof *ck_kinds; i++)
    ck_act_set(E, ck_kinds[i], 0);
  ck_api_records(E, 0);
  CK_CALL(E, cuptiActivityFlushAll, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  E->quiet = q;
  ck_timeline_forget(E);
  ck_act_free(E);
}

void ck_timeline_forget(ck_engine *E) {
  pthread_mutex_lock(&g_timeline_mu);
  if (g_timeline_engine == E)
    g_timeline_engine = NULL;
  pthread_mutex_unlock(&g_timeline_mu);
}

void ck_act_free(ck_engine *E) {
  pthread_mutex_lock(&E->tl.mu);
  for (size_t i = 0; i < E->tl.npend; i++)
    free(E->tl.pend[i].name);
  free(E->tl.pend);
  E->tl.pend = NULL;
  E->tl.npend = E->tl.cappend = 0;
  pthread_mutex_unlock(&E->tl.mu);
}

void ck_timeline_free(ck_engine *E) {
  for (size_t i = 0; i < E->tl.nkern; i++) {
    free(E->tl.kx[i].durs);
    free(E->tl.kx[i].t);
  }
  for (size_t i = 0; i < E->tl.ncopy; i++) {
    free(E->tl.cx[i].durs);
    free(E->tl.cx[i].t);
  }
  free(E->tl.kern);
  free(E->tl.kx);
  free(E->tl.copy);
  free(E->tl.cx);
  free(E->tl.work_cbid);
}

/* ------------------------------------------------------------ joining */

typedef struct ck_tl {
  uint64_t rec_index, start;
  size_t act;
  int64_t op;
} ck_tl;

static int ck_tl_cmp(const void *a, const void *b) {
  const ck_tl *x = a, *y = b;
  if (x->rec_index != y->rec_index)
    return x->rec_index < y->rec_index ? -1 : 1;
  if (x->start != y->start)
    return x->start < y->start ? -1 : 1;
  return x->act < y->act ? -1 : x->act > y->act;
}

/* One measurement: its duration (for the statistics) and its GPU start and
 * end in replay pass `pass` (for the profile's per-pass timings). */
static int ck_add_time(double **d, cucap_cupti_time **t, unsigned *n,
                       unsigned pass, const ck_act *a) {
  if (!a->start || a->end < a->start)
    return 1; /* no timestamps (CUPTI lacked device memory): not measured */
  double *nd = realloc(*d, (*n + 1) * sizeof *nd);
  if (!nd)
    return 0;
  *d = nd;
  cucap_cupti_time *nt = realloc(*t, (*n + 1) * sizeof *nt);
  if (!nt)
    return 0;
  *t = nt;
  nd[*n] = (double)(a->end - a->start);
  nt[*n] = (cucap_cupti_time){pass, a->start, a->end};
  (*n)++;
  return 1;
}

/* ck_timeline_pass_end: sorts the pass's records that belong to an op of
 * the window into kernels (kt) and copies/memsets (ct), each by record;
 * the first pass also sets the time origin. */
static void ck_tl_attribute(ck_engine *E, unsigned tpass, const ck_act *acts,
                            size_t nacts, ck_tl *kt, size_t *nkp, ck_tl *ct,
                            size_t *ncp) {
  size_t nk = 0, nc = 0;
  uint64_t unattr = 0, unattr_k = 0, t0 = UINT64_MAX;
  for (size_t i = 0; i < nacts; i++) {
    int64_t op = ck_corr_op(E, acts[i].corr);
    if (op < 0) {
      unattr++;
      unattr_k += acts[i].kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
      continue;
    }
    uint64_t ri = E->op.ops[op].rec_index;
    if (!E->o.timeline_all && !ck_in_window(E, ri))
      continue;
    if (acts[i].start && acts[i].start < t0)
      t0 = acts[i].start;
    ck_tl t = {ri, acts[i].start, i, op};
    if (acts[i].kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
      kt[nk++] = t;
    else
      ct[nc++] = t;
  }
  *nkp = nk;
  *ncp = nc;
  cucap_sort(kt, nk, sizeof *kt, ck_tl_cmp);
  cucap_sort(ct, nc, sizeof *ct, ck_tl_cmp);
  /* copies outside any op are the replayer's own (restoring memory between
   * passes); a kernel outside any op is a real attribution problem */
  E->tl.unattributed += unattr;
  if (unattr_k)
    CUCAP_WARN("profile: timeline pass %u: %" PRIu64 " kernel record(s) "
               "matched no replayed op (correlation id unknown)", tpass + 1,
               unattr_k);
  else if (unattr)
    CUCAP_DEBUG("profile: timeline pass %u: %" PRIu64 " copy/memset "
                "record(s) outside the capture's ops", tpass + 1, unattr);
  if (tpass == 0)
    E->tl.t_origin = t0 == UINT64_MAX ? 0 : t0;
}

/* ck_timeline_pass_end: the first pass makes the kernel table from kt,
 * later passes add their times to it. 0 when memory ran out (section
 * failed). */
static int ck_tl_kernels(ck_engine *E, unsigned tpass, const ck_act *acts,
                         const ck_tl *kt, size_t nk) {
  uint32_t sub = 0;
  for (size_t i = 0; i < nk; i++) {
    sub = (i && kt[i].rec_index == kt[i - 1].rec_index) ? sub + 1 : 0;
    const ck_act *a = &acts[kt[i].act];
    if (tpass == 0) {
      if (!cucap_vec_reserve(&E->tl.kern, &E->tl.capkern, E->tl.nkern + 1, sizeof *E->tl.kern, 16) ||
          !cucap_vec_reserve(&E->tl.kx, &E->tl.capkx, E->tl.nkern + 1, sizeof *E->tl.kx, 16)) {
        ck_section(E, CUCAP_CUPTI_TIMELINE, CUCAP_CUPTI_FAILED, "out of memory");
        return 0;
      }
      const ck_op *o = &E->op.ops[kt[i].op];
      cucap_cupti_kernel *k = &E->tl.kern[E->tl.nkern];
      ck_kx *x = &E->tl.kx[E->tl.nkern];
      memset(k, 0, sizeof *k);
      memset(x, 0, sizeof *x);
      k->rec_index = o->rec_index;
      k->seq = o->seq;
      k->launch_index = o->launch_index;
      k->sub = sub;
      k->callstack = o->callstack;
      k->name = ck_intern(&E->str, a->name ? a->name : "?");
      k->stream_id = a->stream;
      k->stream = o->stream;
      for (int d = 0; d < 3; d++) {
        k->grid[d] = (uint32_t)a->grid[d];
        k->block[d] = (uint32_t)a->block[d];
      }
      k->registers = a->regs;
      k->static_smem = a->ssmem;
      k->dynamic_smem = a->dsmem;
      k->start_ns = a->start >= E->tl.t_origin ? (double)(a->start - E->tl.t_origin) : 0;
      x->context_id = a->ctx;
      ck_add_time(&x->durs, &x->t, &x->ndurs, E->pass, a);
      E->tl.nkern++;
    } else {
      int64_t ki = ck_kernel_find(E, kt[i].rec_index, sub);
      const char *nm = a->name ? a->name : "?";
      if (ki < 0 || strcmp(E->tl.kern[ki].name, nm)) {
        E->tl.timeline_mismatch++;
        continue;
      }
      ck_add_time(&E->tl.kx[ki].durs, &E->tl.kx[ki].t, &E->tl.kx[ki].ndurs, E->pass, a);
    }
  }
  if (tpass > 0) {
    /* kernels the first pass saw and this one did not */
    for (size_t i = 0; i < E->tl.nkern; i++)
      if (E->tl.kx[i].ndurs < tpass)
        E->tl.timeline_mismatch++;
  }
  return 1;
}

/* ck_timeline_pass_end: the same for copies and memsets (ct). */
static void ck_tl_copies(ck_engine *E, unsigned tpass, const ck_act *acts,
                         const ck_tl *ct, size_t nc) {
  uint32_t sub = 0;
  for (size_t i = 0; i < nc; i++) {
    sub = (i && ct[i].rec_index == ct[i - 1].rec_index) ? sub + 1 : 0;
    const ck_act *a = &acts[ct[i].act];
    if (tpass == 0) {
      if (!cucap_vec_reserve(&E->tl.copy, &E->tl.capcopy, E->tl.ncopy + 1, sizeof *E->tl.copy, 16) ||
          !cucap_vec_reserve(&E->tl.cx, &E->tl.capcx, E->tl.ncopy + 1, sizeof *E->tl.cx, 16))
        break;
      int64_t op = ct[i].op;
      cucap_cupti_copy *c = &E->tl.copy[E->tl.ncopy];
      ck_cx *x = &E->tl.cx[E->tl.ncopy];
      memset(c, 0, sizeof *c);
      memset(x, 0, sizeof *x);
      c->rec_index = E->op.ops[op].rec_index;
      c->seq = E->op.ops[op].seq;
      c->sub = sub;
      c->is_memset = a->kind == CUPTI_ACTIVITY_KIND_MEMSET;
      c->copy_kind = a->copy_kind;
      c->rec_copy_kind = E->op.ops[op].copy_kind;
      c->bytes = a->bytes;
      c->stream_id = a->stream;
      c->stream = E->op.ops[op].stream;
      c->start_ns = a->start >= E->tl.t_origin ? (double)(a->start - E->tl.t_origin) : 0;
      ck_add_time(&x->durs, &x->t, &x->ndurs, E->pass, a);
      E->tl.ncopy++;
    } else {
      /* copies are matched by (record, position) like kernels */
      size_t lo = 0, hi = E->tl.ncopy;
      while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const cucap_cupti_copy *c = &E->tl.copy[mid];
        if (c->rec_index < ct[i].rec_index ||
            (c->rec_index == ct[i].rec_index && c->sub < sub))
          lo = mid + 1;
        else
          hi = mid;
      }
      if (lo < E->tl.ncopy && E->tl.copy[lo].rec_index == ct[i].rec_index &&
          E->tl.copy[lo].sub == sub) {
        ck_add_time(&E->tl.cx[lo].durs, &E->tl.cx[lo].t, &E->tl.cx[lo].ndurs, E->pass, a);
      } else {
        E->tl.timeline_mismatch++;
      }
    }
  }
}

void ck_timeline_pass_end(ck_engine *E, unsigned tpass) {
  CK_CALL(E, cuptiActivityFlushAll, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  pthread_mutex_lock(&E->tl.mu);
  ck_act *acts = E->tl.pend;
  size_t nacts = E->tl.npend;
  E->tl.pend = NULL;
  E->tl.npend = E->tl.cappend = 0;
  pthread_mutex_unlock(&E->tl.mu);

  ck_tl *kt = calloc(nacts ? nacts : 1, sizeof *kt);
  ck_tl *ct = calloc(nacts ? nacts : 1, sizeof *ct);
  size_t nk = 0, nc = 0;
  if (!kt || !ct) {
    ck_section(E, CUCAP_CUPTI_TIMELINE, CUCAP_CUPTI_FAILED, "out of memory");
    goto out;
  }
  ck_tl_attribute(E, tpass, acts, nacts, kt, &nk, ct, &nc);

  if (!ck_tl_kernels(E, tpass, acts, kt, nk))
    goto out;
  ck_tl_copies(E, tpass, acts, ct, nc);
out:
  for (size_t i = 0; i < nacts; i++)
    free(acts[i].name);
  free(acts);
  free(kt);
  free(ct);
}

static int ck_dcmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

void ck_stats(const double *d, unsigned n, double *med, double *mn, double *mx,
              double *mean) {
  if (!n) {
    *med = *mn = *mx = NAN;
    if (mean)
      *mean = NAN;
    return;
  }
  double *t = malloc(n * sizeof *t);
  double sum = 0;
  for (unsigned i = 0; i < n; i++)
    sum += d[i];
  if (t) {
    memcpy(t, d, n * sizeof *t);
    cucap_sort(t, n, sizeof *t, ck_dcmp);
    *med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    *mn = t[0];
    *mx = t[n - 1];
    free(t);
  } else {
    *med = *mn = *mx = d[0];
  }
  if (mean)
    *mean = sum / n;
}

void ck_timeline_finish(ck_engine *E) {
  for (size_t i = 0; i < E->tl.nkern; i++) {
    cucap_cupti_kernel *k = &E->tl.kern[i];
    k->ntimes = E->tl.kx[i].ndurs;
    ck_stats(E->tl.kx[i].durs, E->tl.kx[i].ndurs, &k->dur_median_ns, &k->dur_min_ns,
             &k->dur_max_ns, &k->dur_mean_ns);
  }
  for (size_t i = 0; i < E->tl.ncopy; i++) {
    cucap_cupti_copy *c = &E->tl.copy[i];
    c->ntimes = E->tl.cx[i].ndurs;
    ck_stats(E->tl.cx[i].durs, E->tl.cx[i].ndurs, &c->dur_median_ns, &c->dur_min_ns,
             &c->dur_max_ns, NULL);
  }
  if (E->sec[CUCAP_CUPTI_TIMELINE].state != CUCAP_CUPTI_NOT_REQUESTED)
    return; /* a failure was already noted */
  char extra[256] = "";
  size_t l = 0;
  if (E->tl.unattributed)
    l += (size_t)snprintf(extra + l, sizeof extra - l,
                          "; %" PRIu64 " records outside the capture's ops",
                          E->tl.unattributed);
  if (E->tl.act_dropped && l < sizeof extra)
    l += (size_t)snprintf(extra + l, sizeof extra - l,
                          "; CUPTI dropped %" PRIu64 " records", E->tl.act_dropped);
  if (E->tl.timeline_mismatch && l < sizeof extra)
    snprintf(extra + l, sizeof extra - l,
             "; %" PRIu64 " kernel executions differed between passes",
             E->tl.timeline_mismatch);
  int partial = E->tl.act_dropped || E->tl.timeline_mismatch;
  ck_section(E, CUCAP_CUPTI_TIMELINE,
             partial ? CUCAP_CUPTI_PARTIAL : CUCAP_CUPTI_COLLECTED,
             "%zu kernel executions, %zu copies/memsets over %u pass(es), %"
             PRIu64 " launches in the window%s", E->tl.nkern, E->tl.ncopy,
             E->sec[CUCAP_CUPTI_TIMELINE].passes, E->launches_in_window, extra);
}

size_t cucap_cupti_kernels(const cucap_cupti *e, const cucap_cupti_kernel **out) {
  *out = e->tl.kern;
  return e->tl.nkern;
}

size_t cucap_cupti_copies(const cucap_cupti *e, const cucap_cupti_copy **out) {
  *out = e->tl.copy;
  return e->tl.ncopy;
}

size_t cucap_cupti_kernel_times(const cucap_cupti *e, size_t k,
                                const cucap_cupti_time **out) {
  *out = NULL;
  if (k >= e->tl.nkern)
    return 0;
  *out = e->tl.kx[k].t;
  return e->tl.kx[k].ndurs;
}

size_t cucap_cupti_copy_times(const cucap_cupti *e, size_t c,
                              const cucap_cupti_time **out) {
  *out = NULL;
  if (c >= e->tl.ncopy)
    return 0;
  *out = e->tl.cx[c].t;
  return e->tl.cx[c].ndurs;
}
