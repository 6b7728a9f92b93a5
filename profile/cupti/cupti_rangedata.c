/* cupti_rangedata.c - what a window of the Range Profiler measured
 * (cupti_ranges.c runs the passes): after its last pass, DecodeData, then
 * each range evaluated (EvaluateToGpuValues) and attributed - auto ranges
 * to the window's kernels in execution order, with the L2 flushes that
 * form ranges of their own interleaved (ck_metrics_attribute), user
 * ranges to the graph launches they were pushed around (by name). Values
 * go to E->mvals (per kernel), E->gmet (per graph launch) or, in a
 * duration pass, m->dvals (one sample per kernel and pass). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_log.h"
#include "cupti_internal.h"

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
      if (f < nf && E->m->flushed[f] == E->tl.kern[k].rec_index &&
          (k == w->k_lo || E->tl.kern[k - 1].rec_index != E->tl.kern[k].rec_index)) {
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
    snprintf(E->m->win_note, sizeof E->m->win_note,
             "the range profiler returned %zu ranges, the timeline has %zu "
             "kernel executions there%s; ranges cannot be attributed to "
             "launches", n_ranges, nk, nf ? " (plus L2 flushes)" : "");
  return -1;
}

static int ck_eval(ck_engine *E, size_t r, double *vals) {
  ck_metrics *m = E->m;
  CUpti_Profiler_Host_EvaluateToGpuValues_Params ev;
  memset(&ev, 0, sizeof ev);
  ev.structSize = CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE;
  ev.pHostObject = m->dur_phase ? m->dhost : m->host;
  ev.pCounterDataImage = m->counter;
  ev.counterDataImageSize = m->counter_size;
  ev.rangeIndex = r;
  ev.ppMetricNames = ck_pass_names(E, &ev.numMetrics);
  ev.pMetricValues = vals;
  return CK_CALL(E, cuptiProfilerHostEvaluateToGpuValues, &ev);
}

static const char *ck_range_name(ck_engine *E, size_t r) {
  if (!E->api.cuptiRangeProfilerCounterDataGetRangeInfo)
    return NULL;
  CUpti_RangeProfiler_CounterData_GetRangeInfo_Params ri;
  memset(&ri, 0, sizeof ri);
  ri.structSize = CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE;
  ri.pCounterDataImage = E->m->counter;
  ri.counterDataImageSize = E->m->counter_size;
  ri.rangeIndex = r;
  ri.rangeDelimiter = "/";
  int q = E->quiet;
  E->quiet = 1;
  int ok = CK_CALL(E, cuptiRangeProfilerCounterDataGetRangeInfo, &ri);
  E->quiet = q;
  return ok ? ri.rangeName : NULL;
}

/* Auto ranges of the current window -> its kernels. 0: window failed. */
static int ck_collect_auto(ck_engine *E, const ck_window *w, size_t n,
                           double *vals) {
  ck_metrics *m = E->m;
  int64_t *seq = calloc(n ? n : 1, sizeof *seq);
  if (!seq || ck_metrics_attribute(E, w, n, seq, n) < 0) {
    if (!seq)
      snprintf(m->win_note, sizeof m->win_note, "out of memory");
    free(seq);
    return 0;
  }
  int tcol = -1;
  for (size_t j = 0; j < E->mt.nmnames; j++)
    if (!strcmp(E->mt.mnames[j], "gpu__time_duration.sum"))
      tcol = (int)j;
  for (size_t r = 0; r < n; r++) {
    if (seq[r] < 0)
      continue;
    if (r < 3) {
      const char *nm = ck_range_name(E, r);
      CUCAP_DEBUG("profile: window %zu range %zu is named \"%s\" -> %s",
                  E->mt.cur_win, r, nm ? nm : "", E->tl.kern[seq[r]].name);
    }
    if (!ck_eval(E, r, vals))
      continue;
    if (m->dur_phase) { /* one sample of the duration (ck_dur_finish) */
      m->dvals[(size_t)seq[r] * m->dur_reps + m->dur_rep] = vals[0];
      continue;
    }
    memcpy(E->mt.mvals + (size_t)seq[r] * E->mt.nmnames, vals,
           E->mt.nmnames * sizeof *vals);
    m->attributed++;
    if (tcol >= 0) {
      double t = vals[tcol], tl = E->tl.kern[seq[r]].dur_median_ns;
      if (!isnan(tl) && fabs(t - tl) > 20000.0 && (t > 3 * tl || tl > 3 * t))
        m->time_outliers++;
    }
  }
  free(seq);
  return 1;
}

/* User ranges of a graph window -> its graph launches (range names say
 * which; without names, their order). 0: window failed. */
static int ck_collect_user(ck_engine *E, const ck_window *w, size_t n,
                           double *vals) {
  ck_metrics *m = E->m;
  if (n != w->nops) {
    snprintf(m->win_note, sizeof m->win_note,
             "%zu user ranges for %zu graph launches", n, w->nops);
    return 0;
  }
  size_t r = 0;
  for (size_t k = w->k_lo; k < w->k_hi && r < n;) {
    size_t j = k;
    uint32_t nk = 0;
    while (j < w->k_hi && E->tl.kern[j].rec_index == E->tl.kern[k].rec_index)
      nk += (uint32_t)ck_kernel_profiled(E, j++);
    if (!nk) {
      k = j;
      continue;
    }
    const char *nm = ck_range_name(E, r);
    char want[48];
    snprintf(want, sizeof want, "cucap:%" PRIu64, E->tl.kern[k].rec_index);
    if (nm && strcmp(nm, want)) {
      snprintf(m->win_note, sizeof m->win_note,
               "user range %zu is named \"%.60s\", expected \"%s\"", r, nm, want);
      return 0;
    }
    double *v = malloc(E->mt.nmnames * sizeof *v);
    if (v && ck_eval(E, r, vals) &&
        cucap_vec_reserve(&E->mt.gmet, &E->mt.capgmet, E->mt.ngmet + 1, sizeof *E->mt.gmet, 16)) {
      memcpy(v, vals, E->mt.nmnames * sizeof *v);
      E->mt.gmet[E->mt.ngmet++] = (cucap_cupti_graph_metric){
          E->tl.kern[k].rec_index, E->tl.kern[k].seq, nk, v};
      v = NULL;
    }
    free(v);
    r++;
    k = j;
  }
  m->graph_user_windows++;
  return 1;
}

/* Decode + evaluate the current window; 0 with m->win_note on failure. */
int ck_window_collect(ck_engine *E) {
  ck_metrics *m = E->m;
  const ck_window *w = &E->mt.win[E->mt.cur_win];
  double t0 = cucap_clock_now_s();
  CUpti_RangeProfiler_DecodeData_Params dp;
  memset(&dp, 0, sizeof dp);
  dp.structSize = CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE;
  dp.pRangeProfilerObject = m->rp;
  int ok = 0;
  if (!CK_CALL(E, cuptiRangeProfilerDecodeData, &dp)) {
    snprintf(m->win_note, sizeof m->win_note, "%s", E->last_msg);
  } else if (dp.numOfRangeDropped) {
    /* which ranges were dropped is not known: none can be matched */
    snprintf(m->win_note, sizeof m->win_note,
             "CUPTI dropped %zu range(s) (the counter data image holds %zu); "
             "ranges cannot be attributed to launches", dp.numOfRangeDropped,
             m->max_ranges);
  } else {
    CUpti_RangeProfiler_GetCounterDataInfo_Params gi;
    memset(&gi, 0, sizeof gi);
    gi.structSize = CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE;
    gi.pCounterDataImage = m->counter;
    gi.counterDataImageSize = m->counter_size;
    size_t nv = E->mt.nmnames > m->ndnames ? E->mt.nmnames : m->ndnames;
    double *vals = calloc(nv ? nv : 1, sizeof *vals);
    if (!CK_CALL(E, cuptiRangeProfilerGetCounterDataInfo, &gi))
      snprintf(m->win_note, sizeof m->win_note, "%s", E->last_msg);
    else if (!vals)
      snprintf(m->win_note, sizeof m->win_note, "out of memory");
    else
      ok = w->mode == CK_WIN_USER
               ? ck_collect_user(E, w, gi.numTotalRanges, vals)
               : ck_collect_auto(E, w, gi.numTotalRanges, vals);
    free(vals);
  }
  E->tm.decode_s += cucap_clock_now_s() - t0;
  return ok;
}
