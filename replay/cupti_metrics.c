/* cupti_metrics.c - hardware metrics per kernel execution: the Profiler
 * Host API (cupti_profiler_host.h) validates the names and builds the
 * config image; the Range Profiler (cupti_range_profiler.h) collects in
 * user replay with auto ranges (one range per kernel; CUPTI serializes the
 * kernels and synchronizes after each one), the replayer providing one pass
 * per counter pass (Start at the window's first op, Stop after its last,
 * until Stop reports every pass submitted), then DecodeData and
 * EvaluateToGpuValues per range.
 *
 * Attribution: auto ranges come in kernel execution order. The first
 * timeline pass fixed which kernels every op runs (E->kern, in record
 * order); the kernels of a window in the replay's primary context, in that
 * order, are the expected ranges. With --cache=flush a memset precedes each
 * profiled op; should the memset itself form a range, the ranges are matched
 * with those memsets interleaved. Any other count fails the window loudly
 * (no metrics for it, the note says expected vs got). gpu__time_duration is
 * compared with the timeline as a sanity check of the order. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_log.h"
#include "cupti_internal.h"

struct ck_metrics {
  CUpti_Profiler_Host_Object *host;
  uint8_t *avail;             /* counter availability image: the host object
                                 keeps a pointer to it (freed with it) */
  uint8_t *config;
  size_t config_size;
  uint8_t *counter;
  size_t counter_size;
  size_t max_ranges;          /* per window, flush ranges included */
  CUpti_RangeProfiler_Object *rp;
  int stopped;                /* this pass reached Stop */
  int all_submitted;
  int dead;                   /* stop collecting (note set) */
  unsigned window_passes;
  uint64_t *flushed;          /* ops flushed this pass (rec_index) */
  size_t nflushed, capflushed;
  size_t attributed, failed_windows, time_outliers;
  char fail_note[640];
};

/* ------------------------------------------------------------ begin */

static int ck_name_known(ck_engine *E, const char *name) {
  CUpti_Profiler_Host_GetMetricProperties_Params p;
  memset(&p, 0, sizeof p);
  p.structSize = CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE;
  p.pHostObject = E->m->host;
  p.pMetricName = name;
  int q = E->quiet;
  E->quiet = 1;
  int ok = CK_CALL(E, cuptiProfilerHostGetMetricProperties, &p);
  E->quiet = q;
  return ok;
}

static const char *ck_privilege_hint(void) {
  return "hardware counters are restricted to administrators on this machine "
         "(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES): run as root, or allow every "
         "user with `options nvidia NVreg_RestrictProfilingToAdminUsers=0` in "
         "/etc/modprobe.d/ and reload the nvidia module (see "
         "https://developer.nvidia.com/ERR_NVGPUCTRPERM); the timeline is "
         "unaffected";
}

int ck_metrics_begin(ck_engine *E, char *msg, size_t msg_size) {
  if (!(E->api.groups & CK_PROF)) {
    ck_section(E, CUCAP_CUPTI_METRICS, CUCAP_CUPTI_UNAVAILABLE,
               "%s has no Range Profiler / Profiler Host API (missing: %s)",
               E->api.path, E->api.missing);
    return 0;
  }
  E->m = calloc(1, sizeof *E->m);
  if (!E->m)
    return 0;
  /* names */
  const char *const *set = cucap_cupti_metric_set(E->o.metrics);
  const char *list[256];
  size_t nlist = 0;
  int raw = !set;
  if (set) {
    for (size_t i = 0; set[i] && nlist < 256; i++)
      list[nlist++] = set[i];
  } else {
    const char *p = E->o.metrics;
    while (*p && nlist < 256) {
      const char *c = strchr(p, ',');
      size_t l = c ? (size_t)(c - p) : strlen(p);
      list[nlist++] = ck_intern_n(&E->str, p, l);
      p += l + (c ? 1 : 0);
    }
  }
  if (!ck_prof_init(E)) {
    ck_section(E, CUCAP_CUPTI_METRICS, CUCAP_CUPTI_UNAVAILABLE, "%s",
               E->last_msg);
    return 0;
  }
  /* counter availability: where a restricted driver says no */
  CUpti_Profiler_GetCounterAvailability_Params ap;
  memset(&ap, 0, sizeof ap);
  ap.structSize = CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE;
  ap.ctx = E->ctx;
  uint8_t *avail = NULL;
  int ok = CK_CALL(E, cuptiProfilerGetCounterAvailability, &ap);
  if (ok && ap.counterAvailabilityImageSize) {
    avail = malloc(ap.counterAvailabilityImageSize);
    ap.pCounterAvailabilityImage = avail;
    ok = avail && CK_CALL(E, cuptiProfilerGetCounterAvailability, &ap);
  }
  if (!ok) {
    free(avail);
    if (E->last == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES ||
        E->last == CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES) {
      E->env.counters_allowed = 0;
      ck_section(E, CUCAP_CUPTI_METRICS, CUCAP_CUPTI_UNAVAILABLE, "%s",
                 ck_privilege_hint());
    } else {
      ck_section(E, CUCAP_CUPTI_METRICS, CUCAP_CUPTI_UNAVAILABLE, "%s",
                 E->last_msg);
    }
    return 0;
  }
  E->env.counters_allowed = 1;
  CUpti_Profiler_Host_Initialize_Params hp;
  memset(&hp, 0, sizeof hp);
  hp.structSize = CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE;
  hp.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  hp.pChipName = E->env.chip;
  hp.pCounterAvailabilityImage = avail;
  ok = CK_CALL(E, cuptiProfilerHostInitialize, &hp);
  /* The host object refers to the image after Initialize (CUPTI's own
   * samples keep it for the object's lifetime): freed in ck_metrics_free.
   * Freed here, ConfigAddMetrics crashed inside libnvperf_host (H100). */
  E->m->avail = avail;
  if (!ok) {
    ck_section(E, CUCAP_CUPTI_METRICS, CUCAP_CUPTI_UNAVAILABLE, "%s",
               E->last_msg);
    return 0;
  }
  E->m->host = hp.pHostObject;
  /* validate: a set drops what this chip lacks; raw names must all exist */
  E->mnames = calloc(nlist ? nlist : 1, sizeof *E->mnames);
  if (!E->mnames)
    return 0;
  char dropped[256] = "";
  size_t dl = 0;
  for (size_t i = 0; i < nlist; i++) {
    if (!list[i])
      continue;
    if (ck_name_known(E, list[i])) {
      int dup = 0;
      for (size_t j = 0; j < E->nmnames; j++)
        dup |= !strcmp(E->mnames[j], list[i]);
      if (!dup)
        E->mnames[E->nmnames++] = ck_intern(&E->str, list[i]);
      continue;
    }
    if (raw && !E->o.drop_unknown_metrics) {
      snprintf(msg, msg_size,
               "metric '%s' is not known to CUPTI for chip %s (%s); list the "
               "chip's metrics with `cucap cupti-probe --list-metrics`",
               list[i], E->env.chip, E->last_msg);
      return -1;
    }
    if (dl < sizeof dropped)
      dl += (size_t)snprintf(dropped + dl, sizeof dropped - dl, "%s%s",
                             dl ? ", " : "", list[i]);
  }
  if (dropped[0]) {
    CUCAP_INFO("profile: metrics not available on %s, left out: %s",
               E->env.chip, dropped);
    if (raw) /* asked for by name: the section says which are missing */
      snprintf(E->mdropped, sizeof E->mdropped, "%s", dropped);
  }
  if (!E->nmnames) {
    ck_section(E, CUCAP_CUPTI_METRICS, CUCAP_CUPTI_UNAVAILABLE,
               "none of the requested metrics exists on %s", E->env.chip);
    return 0;
  }
  CUpti_Profiler_Host_ConfigAddMetrics_Params am;
  memset(&am, 0, sizeof am);
  am.structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE;
  am.pHostObject = E->m->host;
  am.ppMetricNames = E->mnames;
  am.numMetrics = E->nmnames;
  CUpti_Profiler_Host_GetConfigImageSize_Params cs;
  memset(&cs, 0, sizeof cs);
  cs.structSize = CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE;
  cs.pHostObject = E->m->host;
  if (!CK_CALL(E, cuptiProfilerHostConfigAddMetrics, &am) ||
      !CK_CALL(E, cuptiProfilerHostGetConfigImageSize, &cs) ||
      !cs.configImageSize) {
    ck_section(E, CUCAP_CUPTI_METRICS, CUCAP_CUPTI_UNAVAILABLE, "%s",
               E->last_msg);
    return 0;
  }
  E->m->config = malloc(cs.configImageSize);
  E->m->config_size = cs.configImageSize;
  CUpti_Profiler_Host_GetConfigImage_Params ci;
  memset(&ci, 0, sizeof ci);
  ci.structSize = CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE;
  ci.pHostObject = E->m->host;
  ci.configImageSize = cs.configImageSize;
  ci.pConfigImage = E->m->config;
  CUpti_Profiler_Host_GetNumOfPasses_Params np;
  memset(&np, 0, sizeof np);
  np.structSize = CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE;
  np.configImageSize = cs.configImageSize;
  np.pConfigImage = E->m->config;
  if (!E->m->config || !CK_CALL(E, cuptiProfilerHostGetConfigImage, &ci) ||
      !CK_CALL(E, cuptiProfilerHostGetNumOfPasses, &np)) {
    ck_section(E, CUCAP_CUPTI_METRICS, CUCAP_CUPTI_UNAVAILABLE, "%s",
               E->last_msg[0] ? E->last_msg : "out of memory");
    return 0;
  }
  E->env.metric_passes = (unsigned)np.numOfPasses;
  CUCAP_INFO("profile: %zu metric(s) on %s need %zu counter pass(es)",
             E->nmnames, E->env.chip, np.numOfPasses);
  return 1;
}

/* ------------------------------------------------------------ windows */

/* In the range profiler's view: the replay's primary context (the range
 * profiler object is per context) and the launch window. */
static int ck_kernel_profiled(const ck_engine *E, size_t k) {
  return (!E->ctx_id || E->kx[k].context_id == E->ctx_id) &&
         ck_in_window(E, E->kern[k].rec_index);
}

static int ck_counter_image_init(ck_engine *E) {
  ck_metrics *m = E->m;
  CUpti_RangeProfiler_CounterDataImage_Initialize_Params ip;
  memset(&ip, 0, sizeof ip);
  ip.structSize = CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE;
  ip.pRangeProfilerObject = m->rp;
  ip.counterDataSize = m->counter_size;
  ip.pCounterData = m->counter;
  if (!CK_CALL(E, cuptiRangeProfilerCounterDataImageInitialize, &ip))
    return 0;
  CUpti_RangeProfiler_SetConfig_Params sc;
  memset(&sc, 0, sizeof sc);
  sc.structSize = CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE;
  sc.pRangeProfilerObject = m->rp;
  sc.configSize = m->config_size;
  sc.pConfig = m->config;
  sc.counterDataImageSize = m->counter_size;
  sc.pCounterDataImage = m->counter;
  sc.range = CUPTI_AutoRange;
  sc.replayMode = CUPTI_UserReplay;
  sc.maxRangesPerPass = m->max_ranges;
  sc.numNestingLevels = 1;
  sc.minNestingLevel = 1;
  sc.passIndex = 0;
  sc.targetNestingLevel = 1;
  return CK_CALL(E, cuptiRangeProfilerSetConfig, &sc);
}

int ck_metrics_plan(ck_engine *E) {
  ck_metrics *m = E->m;
  if (!m || !E->nmnames)
    return 0;
  /* windows of at most max_ranges profiled kernels, cut between ops; a
   * window spans the records of its first and last profiled kernel */
  size_t biggest = 0, other_ctx = 0, i = 0;
  size_t cnt = 0, lo = SIZE_MAX, last_k = 0;
  uint64_t rec_lo = 0, rec_hi = 0;
  while (i <= E->nkern) {
    size_t j = i, c = 0;
    uint64_t r = i < E->nkern ? E->kern[i].rec_index : UINT64_MAX;
    while (j < E->nkern && E->kern[j].rec_index == r) {
      int prof = ck_kernel_profiled(E, j);
      c += prof;
      other_ctx += !prof && ck_in_window(E, r);
      j++;
    }
    /* close the window before this op if it would overflow, or at the end */
    if (cnt && (i == E->nkern || cnt + c > E->o.max_ranges)) {
      if (!ck_grow((void **)&E->win, &E->capwin, E->nwin + 1, sizeof *E->win))
        return 0;
      E->win[E->nwin++] = (ck_window){rec_lo, rec_hi, lo, last_k};
      if (cnt > biggest)
        biggest = cnt;
      cnt = 0;
      lo = SIZE_MAX;
    }
    if (i == E->nkern)
      break;
    if (c) {
      if (!cnt) {
        rec_lo = r;
        lo = i;
      }
      cnt += c;
      rec_hi = r;
      last_k = j;
    }
    i = j;
  }
  E->cur_win = 0;
  if (!E->nwin) {
    ck_section(E, CUCAP_CUPTI_METRICS, CUCAP_CUPTI_UNAVAILABLE,
               "no kernel ran in the profiled window");
    return 0;
  }
  if (other_ctx)
    CUCAP_WARN("profile: %zu kernel execution(s) ran in contexts other than "
               "the primary one: no metrics for them", other_ctx);
  /* room for twice the kernels: flush memsets that form ranges, or ranges
   * nobody expected, are then counted (and fail the window loudly) rather
   * than dropped silently */
  m->max_ranges = 2 * biggest + 16;
  /* values: NAN until a range fills them */
  E->mvals = malloc(E->nkern * E->nmnames * sizeof *E->mvals);
  if (!E->mvals)
    return 0;
  for (size_t k = 0; k < E->nkern * E->nmnames; k++)
    E->mvals[k] = NAN;
  for (size_t k = 0; k < E->nkern; k++)
    E->kern[k].metrics = E->mvals + k * E->nmnames;
  CUpti_RangeProfiler_Enable_Params ep;
  memset(&ep, 0, sizeof ep);
  ep.structSize = CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE;
  ep.ctx = E->ctx;
  if (!CK_CALL(E, cuptiRangeProfilerEnable, &ep)) {
    ck_section(E, CUCAP_CUPTI_METRICS,
               E->last == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES
                   ? CUCAP_CUPTI_UNAVAILABLE : CUCAP_CUPTI_FAILED,
               "%s", E->last == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES
                         ? ck_privilege_hint() : E->last_msg);
    return 0;
  }
  m->rp = ep.pRangeProfilerObject;
  CUpti_RangeProfiler_GetCounterDataSize_Params gs;
  memset(&gs, 0, sizeof gs);
  gs.structSize = CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE;
  gs.pRangeProfilerObject = m->rp;
  gs.pMetricNames = E->mnames;
  gs.numMetrics = E->nmnames;
  gs.maxNumOfRanges = m->max_ranges;
  gs.maxNumRangeTreeNodes = (uint32_t)m->max_ranges;
  if (!CK_CALL(E, cuptiRangeProfilerGetCounterDataSize, &gs) ||
      !gs.counterDataSize) {
    ck_section(E, CUCAP_CUPTI_METRICS, CUCAP_CUPTI_FAILED, "%s", E->last_msg);
    return 0;
  }
  m->counter = calloc(1, gs.counterDataSize);
  m->counter_size = gs.counterDataSize;
  if (!m->counter || !ck_counter_image_init(E)) {
    ck_section(E, CUCAP_CUPTI_METRICS, CUCAP_CUPTI_FAILED, "%s",
               m->counter ? E->last_msg : "out of memory");
    return 0;
  }
  CUCAP_INFO("profile: metrics: %zu window(s), up to %zu ranges each, "
             "counter data image %zu KiB, %u counter pass(es) per window",
             E->nwin, m->max_ranges, m->counter_size >> 10,
             E->env.metric_passes);
  if (E->o.cache_flush && E->env.l2_bytes && E->cu.MemAlloc &&
      E->cu.MemsetD8Async && !E->flush_buf) {
    E->own_call = 1;
    CUresult r = E->cu.MemAlloc(&E->flush_buf, 2 * E->env.l2_bytes);
    E->own_call = 0;
    if (r == CUDA_SUCCESS) {
      E->flush_bytes = 2 * E->env.l2_bytes;
    } else {
      E->flush_buf = 0;
      CUCAP_WARN("profile: --cache=flush: cannot allocate the %" PRIu64
                 " MiB flush buffer (CUresult %d); L2 is not flushed",
                 (2 * E->env.l2_bytes) >> 20, (int)r);
    }
  }
  return 1;
}

/* ------------------------------------------------------------ passes */

void ck_metrics_op_before(ck_engine *E, const cucap_replay_op *op) {
  ck_metrics *m = E->m;
  if (!m || m->dead || E->cur_win >= E->nwin)
    return;
  const ck_window *w = &E->win[E->cur_win];
  if (op->rec_index < w->rec_lo || op->rec_index > w->rec_hi)
    return;
  if (op->rec_index == w->rec_lo && !E->rp_started && !m->stopped) {
    if (op->capturing)
      CUCAP_WARN("profile: metrics window starts while a stream is being "
                 "captured (record %" PRIu64 ")", op->rec_index);
    CUpti_RangeProfiler_Start_Params sp;
    memset(&sp, 0, sizeof sp);
    sp.structSize = CUpti_RangeProfiler_Start_Params_STRUCT_SIZE;
    sp.pRangeProfilerObject = m->rp;
    if (!CK_CALL(E, cuptiRangeProfilerStart, &sp)) {
      m->dead = 1;
      snprintf(m->fail_note, sizeof m->fail_note, "%s",
               E->last == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES
                   ? ck_privilege_hint() : E->last_msg);
      return;
    }
    E->rp_started = 1;
    m->nflushed = 0;
  }
  if (!E->rp_started || !E->flush_buf || op->capturing ||
      ck_kernel_find(E, op->rec_index, 0) < 0)
    return;
  /* flush L2 on the op's stream, right before its kernels */
  E->own_call = 1;
  CUresult r = E->cu.MemsetD8Async(E->flush_buf, 0, E->flush_bytes,
                                   (CUstream)(uintptr_t)op->stream);
  E->own_call = 0;
  if (r != CUDA_SUCCESS) {
    CUCAP_WARN("profile: L2 flush memset failed (CUresult %d); no more flushes",
               (int)r);
    E->own_call = 1;
    E->cu.MemFree(E->flush_buf);
    E->own_call = 0;
    E->flush_buf = 0;
    return;
  }
  if (ck_grow((void **)&m->flushed, &m->capflushed, m->nflushed + 1,
              sizeof *m->flushed))
    m->flushed[m->nflushed++] = op->rec_index;
}

static void ck_rp_stop(ck_engine *E) {
  ck_metrics *m = E->m;
  CUpti_RangeProfiler_Stop_Params sp;
  memset(&sp, 0, sizeof sp);
  sp.structSize = CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE;
  sp.pRangeProfilerObject = m->rp;
  E->rp_started = 0;
  m->stopped = 1;
  if (!CK_CALL(E, cuptiRangeProfilerStop, &sp)) {
    m->dead = 1;
    snprintf(m->fail_note, sizeof m->fail_note, "%s", E->last_msg);
    return;
  }
  m->all_submitted = sp.isAllPassSubmitted;
  CUCAP_DEBUG("profile: metrics window %zu: pass %u stopped, next pass index "
              "%zu, all submitted %d", E->cur_win, m->window_passes + 1,
              sp.passIndex, (int)sp.isAllPassSubmitted);
}

int ck_metrics_window_stopped(const ck_engine *E) {
  return E->m && E->m->stopped && !E->rp_started;
}

void ck_metrics_op_after(ck_engine *E, const cucap_replay_op *op) {
  ck_metrics *m = E->m;
  if (!m || m->dead || !E->rp_started || E->cur_win >= E->nwin)
    return;
  if (op->rec_index == E->win[E->cur_win].rec_hi)
    ck_rp_stop(E);
}

long ck_metrics_attribute(ck_engine *E, const ck_window *w, size_t n_ranges,
                          int64_t *seq, size_t seq_cap) {
  size_t nk = 0;
  for (size_t k = w->k_lo; k < w->k_hi; k++)
    nk += ck_kernel_profiled(E, k);
  size_t nf = E->m ? E->m->nflushed : 0;
  size_t pos = 0;
  if (n_ranges == nk) {
    for (size_t k = w->k_lo; k < w->k_hi && pos < seq_cap; k++)
      if (ck_kernel_profiled(E, k))
        seq[pos++] = (int64_t)k;
    return (long)pos;
  }
  if (nf && n_ranges == nk + nf) {
    size_t f = 0;
    for (size_t k = w->k_lo; k < w->k_hi && pos < seq_cap; k++) {
      if (!ck_kernel_profiled(E, k))
        continue;
      if (f < nf && E->m->flushed[f] == E->kern[k].rec_index &&
          (k == w->k_lo || E->kern[k - 1].rec_index != E->kern[k].rec_index)) {
        seq[pos++] = -1;
        f++;
        if (pos >= seq_cap)
          break;
      }
      seq[pos++] = (int64_t)k;
    }
    return pos == n_ranges ? (long)nk : -1;
  }
  if (E->m)
    snprintf(E->m->fail_note, sizeof E->m->fail_note,
             "window %zu (records %" PRIu64 "..%" PRIu64 "): the range "
             "profiler returned %zu ranges, the timeline has %zu kernel "
             "executions there%s; ranges cannot be attributed to launches",
             (size_t)(w - E->win), w->rec_lo, w->rec_hi, n_ranges, nk,
             nf ? " (plus L2 flush memsets)" : "");
  return -1;
}

static void ck_window_collect(ck_engine *E) {
  ck_metrics *m = E->m;
  const ck_window *w = &E->win[E->cur_win];
  CUpti_RangeProfiler_DecodeData_Params dp;
  memset(&dp, 0, sizeof dp);
  dp.structSize = CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE;
  dp.pRangeProfilerObject = m->rp;
  if (!CK_CALL(E, cuptiRangeProfilerDecodeData, &dp)) {
    m->failed_windows++;
    snprintf(m->fail_note, sizeof m->fail_note, "%s", E->last_msg);
    return;
  }
  if (dp.numOfRangeDropped) {
    /* which ranges were dropped is not known: none can be matched */
    m->failed_windows++;
    snprintf(m->fail_note, sizeof m->fail_note,
             "window %zu (records %" PRIu64 "..%" PRIu64 "): CUPTI dropped %zu "
             "range(s) (the counter data image holds %zu); ranges cannot be "
             "attributed to launches", E->cur_win, w->rec_lo, w->rec_hi,
             dp.numOfRangeDropped, m->max_ranges);
    CUCAP_ERROR("profile: %s", m->fail_note);
    return;
  }
  CUpti_RangeProfiler_GetCounterDataInfo_Params gi;
  memset(&gi, 0, sizeof gi);
  gi.structSize = CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE;
  gi.pCounterDataImage = m->counter;
  gi.counterDataImageSize = m->counter_size;
  if (!CK_CALL(E, cuptiRangeProfilerGetCounterDataInfo, &gi)) {
    m->failed_windows++;
    snprintf(m->fail_note, sizeof m->fail_note, "%s", E->last_msg);
    return;
  }
  size_t n = gi.numTotalRanges;
  int64_t *seq = calloc(n ? n : 1, sizeof *seq);
  double *vals = calloc(E->nmnames, sizeof *vals);
  long got = seq && vals ? ck_metrics_attribute(E, w, n, seq, n) : -1;
  if (got < 0) {
    m->failed_windows++;
    CUCAP_ERROR("profile: %s", m->fail_note);
    free(seq);
    free(vals);
    return;
  }
  int tcol = -1;
  for (size_t j = 0; j < E->nmnames; j++)
    if (!strcmp(E->mnames[j], "gpu__time_duration.sum"))
      tcol = (int)j;
  for (size_t r = 0; r < n; r++) {
    if (seq[r] < 0)
      continue;
    if (r < 3 && E->api.cuptiRangeProfilerCounterDataGetRangeInfo) {
      CUpti_RangeProfiler_CounterData_GetRangeInfo_Params ri;
      memset(&ri, 0, sizeof ri);
      ri.structSize = CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE;
      ri.pCounterDataImage = m->counter;
      ri.counterDataImageSize = m->counter_size;
      ri.rangeIndex = r;
      ri.rangeDelimiter = "/";
      int q = E->quiet;
      E->quiet = 1;
      if (CK_CALL(E, cuptiRangeProfilerCounterDataGetRangeInfo, &ri))
        CUCAP_DEBUG("profile: window %zu range %zu is named \"%s\" -> %s",
                    E->cur_win, r, ri.rangeName ? ri.rangeName : "",
                    E->kern[seq[r]].name);
      E->quiet = q;
    }
    CUpti_Profiler_Host_EvaluateToGpuValues_Params ev;
    memset(&ev, 0, sizeof ev);
    ev.structSize = CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE;
    ev.pHostObject = m->host;
    ev.pCounterDataImage = m->counter;
    ev.counterDataImageSize = m->counter_size;
    ev.rangeIndex = r;
    ev.ppMetricNames = E->mnames;
    ev.numMetrics = E->nmnames;
    ev.pMetricValues = vals;
    if (!CK_CALL(E, cuptiProfilerHostEvaluateToGpuValues, &ev))
      continue;
    memcpy(E->mvals + (size_t)seq[r] * E->nmnames, vals,
           E->nmnames * sizeof *vals);
    m->attributed++;
    if (tcol >= 0) {
      double t = vals[tcol], tl = E->kern[seq[r]].dur_median_ns;
      if (!isnan(tl) && fabs(t - tl) > 20000.0 && (t > 3 * tl || tl > 3 * t))
        m->time_outliers++;
    }
  }
  free(seq);
  free(vals);
}

static int ck_metrics_pass_end_inner(ck_engine *E);

/* The metrics phase is over: the range profiler object, the host object and
 * the flush buffer go before PC sampling is enabled (both use the GPU's
 * profiling hardware). */
void ck_metrics_done(ck_engine *E) {
  ck_metrics_free(E);
  if (E->flush_buf && E->cu.MemFree) {
    E->own_call = 1;
    E->cu.MemFree(E->flush_buf);
    E->own_call = 0;
    E->flush_buf = 0;
  }
}

int ck_metrics_pass_end(ck_engine *E) {
  int more = ck_metrics_pass_end_inner(E);
  if (!more)
    ck_metrics_done(E);
  return more;
}

static int ck_metrics_pass_end_inner(ck_engine *E) {
  ck_metrics *m = E->m;
  if (!m)
    return 0;
  if (E->rp_started)
    ck_rp_stop(E); /* the window's last op did not run: stop here */
  if (!m->dead && !m->stopped) {
    m->dead = 1;
    snprintf(m->fail_note, sizeof m->fail_note,
             "window %zu: its first record %" PRIu64 " was not executed in "
             "this pass", E->cur_win, E->win[E->cur_win].rec_lo);
  }
  m->window_passes++;
  unsigned limit = E->env.metric_passes ? 2 * E->env.metric_passes + 4 : 64;
  if (!m->dead && !m->all_submitted && m->window_passes >= limit) {
    m->dead = 1;
    snprintf(m->fail_note, sizeof m->fail_note,
             "window %zu: CUPTI still asks for passes after %u (the config "
             "needs %u)", E->cur_win, m->window_passes, E->env.metric_passes);
  }
  if (m->dead) {
    int any = m->attributed > 0;
    ck_section(E, CUCAP_CUPTI_METRICS,
               any ? CUCAP_CUPTI_PARTIAL
               : E->env.counters_allowed == 0 ? CUCAP_CUPTI_UNAVAILABLE
                                              : CUCAP_CUPTI_FAILED,
               "%s", m->fail_note);
    return 0;
  }
  m->stopped = 0;
  if (!m->all_submitted)
    return 1; /* the same window again: next counter pass */
  ck_window_collect(E);
  m->all_submitted = 0;
  m->window_passes = 0;
  E->cur_win++;
  if (E->cur_win < E->nwin) {
    if (!ck_counter_image_init(E)) {
      ck_section(E, CUCAP_CUPTI_METRICS,
                 m->attributed ? CUCAP_CUPTI_PARTIAL : CUCAP_CUPTI_FAILED,
                 "window %zu: %s", E->cur_win, E->last_msg);
      return 0;
    }
    return 1;
  }
  size_t total = 0;
  for (size_t k = 0; k < E->nkern; k++)
    total += ck_kernel_profiled(E, k);
  char extra[384] = "";
  if (m->time_outliers)
    snprintf(extra, sizeof extra, "; %zu kernel(s) with gpu__time_duration "
             "more than 3x off the timeline (check the attribution)",
             m->time_outliers);
  if (m->failed_windows)
    ck_section(E, CUCAP_CUPTI_METRICS,
               m->attributed ? CUCAP_CUPTI_PARTIAL : CUCAP_CUPTI_FAILED,
               "%zu of %zu window(s) failed: %s", m->failed_windows, E->nwin,
               m->fail_note);
  else
    ck_section(E, CUCAP_CUPTI_METRICS,
               m->attributed == total && !E->mdropped[0] ? CUCAP_CUPTI_COLLECTED
                                                         : CUCAP_CUPTI_PARTIAL,
               "%zu metric(s) for %zu of %zu kernel executions, %u counter "
               "pass(es) x %zu window(s)%s%s%s%.200s", E->nmnames,
               m->attributed, total, E->env.metric_passes, E->nwin,
               E->flush_buf ? ", L2 flushed before each launch" : "", extra,
               E->mdropped[0] ? "; not on this chip: " : "", E->mdropped);
  return 0;
}

void ck_metrics_free(ck_engine *E) {
  ck_metrics *m = E->m;
  if (!m)
    return;
  int q = E->quiet;
  E->quiet = 1;
  if (m->rp) {
    if (E->rp_started)
      ck_rp_stop(E);
    CUpti_RangeProfiler_Disable_Params dp;
    memset(&dp, 0, sizeof dp);
    dp.structSize = CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE;
    dp.pRangeProfilerObject = m->rp;
    CK_CALL(E, cuptiRangeProfilerDisable, &dp);
    m->rp = NULL;
  }
  if (m->host) {
    CUpti_Profiler_Host_Deinitialize_Params hd;
    memset(&hd, 0, sizeof hd);
    hd.structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE;
    hd.pHostObject = m->host;
    CK_CALL(E, cuptiProfilerHostDeinitialize, &hd);
    m->host = NULL;
  }
  free(m->avail); /* after the host object that refers to it */
  m->avail = NULL;
  E->quiet = q;
  free(m->config);
  free(m->counter);
  free(m->flushed);
  free(m);
  E->m = NULL;
}

size_t cucap_cupti_metric_names(const cucap_cupti *e, const char *const **out) {
  *out = (const char *const *)e->mnames;
  return e->mvals ? e->nmnames : 0;
}
