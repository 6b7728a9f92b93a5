/* cupti_ranges.c - the Range Profiler (cupti_range_profiler.h) through the
 * metrics passes, one window (cupti_metrics.c) at a time, in user replay:
 * the replayer provides one pass per counter pass; Start at the window's
 * first op, Stop after its last, until Stop reports every pass submitted;
 * then DecodeData and EvaluateToGpuValues per range. Windows in the same
 * range mode share a range profiler object (counter data image and
 * SetConfig per window); a change of mode, or a window that did not end
 * cleanly, gets a new object with an image of its own (ck_rp_reusable).
 *
 * Range modes. Plain launches: auto range, one range per kernel (CUPTI
 * serializes the kernels and synchronizes after each one). Graph launches:
 * one user range around each graph launch (Push before, Pop after, the
 * context idle at both ends): metrics per graph launch instead of per
 * kernel, said so in the section note (ck_metrics_plan). When a range
 * profiler call itself fails (Stop: CUPTI_ERROR_UNKNOWN on auto ranges over
 * graph launches, H100) nothing more is asked of the range profiler in this
 * run (rp_broken): re-enabling it then crashed libcupti. A window that
 * fails costs only its own kernels, and those of the windows after a failed
 * call, their metrics.
 *
 * Attribution of auto ranges (done in cupti_rangedata.c once a window's
 * passes are over): they come in kernel execution order. The
 * first timeline pass fixed which kernels every op runs (E->kern, in record
 * order); the kernels of a window in the profiled context, in that
 * order, are the expected ranges. With --cache=flush a flush (cupti_flush.c)
 * precedes each profiled op; when it forms a range of its own (the flush
 * kernel does; a memset may), the ranges are matched with those flushes
 * interleaved. Any other count fails the window loudly
 * (no metrics for it, the note says expected vs got). gpu__time_duration is
 * compared with the timeline as a sanity check of the order. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cucap_knobs.h"
#include "cucap_log.h"
#include "cupti_internal.h"

/* ------------------------------------------------------------ object */

void ck_rp_release(ck_engine *E) {
  ck_metrics *m = E->m;
  if (!m || !m->rp)
    return;
  int q = E->quiet;
  E->quiet = 1;
  if (m->in_range) {
    CUpti_RangeProfiler_PopRange_Params pp;
    memset(&pp, 0, sizeof pp);
    pp.structSize = CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE;
    pp.pRangeProfilerObject = m->rp;
    CK_CALL(E, cuptiRangeProfilerPopRange, &pp);
    m->in_range = 0;
  }
  if (m->started) {
    CUpti_RangeProfiler_Stop_Params sp;
    memset(&sp, 0, sizeof sp);
    sp.structSize = CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE;
    sp.pRangeProfilerObject = m->rp;
    CK_CALL(E, cuptiRangeProfilerStop, &sp);
    m->started = 0;
  }
  CUpti_RangeProfiler_Disable_Params dp;
  memset(&dp, 0, sizeof dp);
  dp.structSize = CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE;
  dp.pRangeProfilerObject = m->rp;
  CK_CALL(E, cuptiRangeProfilerDisable, &dp);
  E->quiet = q;
  m->rp = NULL;
}

/* Windows in the same range mode share one range profiler object (a fresh
 * counter data image initialization and SetConfig per window); a new
 * object - enabled when the mode changes, after a window that did not end
 * cleanly, or for every window with CUCAP_CUPTI_RP_PER_WINDOW=1 - gets a
 * counter data image of its own, sized by GetCounterDataSize of that object
 * and newly allocated. With CUPTI 13.0:
 *  - a second object initializing the image sized for the first crashes
 *    inside libcupti (SIGSEGV in cuptiRangeProfilerCounterDataImageInitialize;
 *    drv_library, torch_cudagraph), as it does after a failed Stop; with
 *    an image per object every window runs (tests/mock/mock_cupti_rp.c
 *    crashes the same way);
 *  - an object set up for auto ranges, given a user-range config, refuses
 *    cuptiRangeProfilerPushRange (CUPTI_ERROR_INVALID_PARAMETER).
 * The duration passes (ck_dur_config) get an object of their own too. Its
 * first Start is as slow as the main object's first, but one object given
 * the duration config after the main one (a new image sized for it,
 * SetConfig) keeps the main config's pass count: every duration pass
 * would take as many passes as the main config (the pass counts in the
 * timing breakdown, CUCAP_LOG_LEVEL=info, show it). Figures:
 * docs/bench-log.md, "Range profiler objects". */
static int ck_rp_reusable(const ck_metrics *m, int mode) {
  return m->rp && m->rp_mode == mode && m->rp_dur == m->dur_phase &&
         !m->started && !m->in_range &&
         !cucap_knob_flag(CUCAP_KNOB(CUCAP_CUPTI_RP_PER_WINDOW));
}

/* The metric names the current pass measures (cupti_internal.h). */
const char **ck_pass_names(const ck_engine *E, size_t *n) {
  if (E->m->dur_phase) {
    *n = E->m->ndnames;
    return (const char **)E->m->dnames;
  }
  *n = E->mt.nmnames;
  return (const char **)E->mt.mnames;
}

int ck_win_setup(ck_engine *E) {
  ck_metrics *m = E->m;
  const ck_window *w = &E->mt.win[E->mt.cur_win];
  double t0 = cucap_clock_now_s();
  int reuse = ck_rp_reusable(m, w->mode);
  if (!reuse)
    ck_rp_release(E);
  m->started = m->stopped = m->all_submitted = m->win_failed = 0;
  m->in_range = 0;
  m->window_passes = 0;
  m->win_note[0] = 0;
  if (!reuse) {
    CUpti_RangeProfiler_Enable_Params ep;
    memset(&ep, 0, sizeof ep);
    ep.structSize = CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE;
    ep.ctx = E->ctx;
    if (!CK_CALL(E, cuptiRangeProfilerEnable, &ep))
      return 0;
    m->rp = ep.pRangeProfilerObject;
    CUCAP_DEBUG("profile: setup: range profiler enabled");
    m->rp_mode = w->mode;
    m->rp_dur = m->dur_phase;
    /* the image belongs to the object: a new one for a new object */
    free(m->counter);
    m->counter = NULL;
    CUpti_RangeProfiler_GetCounterDataSize_Params gs;
    memset(&gs, 0, sizeof gs);
    gs.structSize = CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE;
    gs.pRangeProfilerObject = m->rp;
    gs.pMetricNames = ck_pass_names(E, &gs.numMetrics);
    gs.maxNumOfRanges = m->max_ranges;
    gs.maxNumRangeTreeNodes = (uint32_t)m->max_ranges;
    if (!CK_CALL(E, cuptiRangeProfilerGetCounterDataSize, &gs))
      return 0;
    if (!gs.counterDataSize || !(m->counter = calloc(1, gs.counterDataSize))) {
      snprintf(E->last_msg, sizeof E->last_msg,
               "cannot allocate the %zu-byte counter data image",
               gs.counterDataSize);
      return 0;
    }
    m->counter_size = gs.counterDataSize;
    CUCAP_DEBUG("profile: setup: %zu KiB counter data image allocated",
                m->counter_size >> 10);
  }
  CUpti_RangeProfiler_CounterDataImage_Initialize_Params ip;
  memset(&ip, 0, sizeof ip);
  ip.structSize = CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE;
  ip.pRangeProfilerObject = m->rp;
  ip.counterDataSize = m->counter_size;
  ip.pCounterData = m->counter;
  if (!CK_CALL(E, cuptiRangeProfilerCounterDataImageInitialize, &ip))
    return 0;
  CUCAP_DEBUG("profile: setup: counter data image initialized");
  CUpti_RangeProfiler_SetConfig_Params sc;
  memset(&sc, 0, sizeof sc);
  sc.structSize = CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE;
  sc.pRangeProfilerObject = m->rp;
  sc.configSize = m->dur_phase ? m->dconfig_size : m->config_size;
  sc.pConfig = m->dur_phase ? m->dconfig : m->config;
  sc.counterDataImageSize = m->counter_size;
  sc.pCounterDataImage = m->counter;
  sc.range = w->mode == CK_WIN_USER ? CUPTI_UserRange : CUPTI_AutoRange;
  sc.replayMode = CUPTI_UserReplay;
  sc.maxRangesPerPass = m->max_ranges;
  sc.numNestingLevels = 1;
  sc.minNestingLevel = 1;
  sc.passIndex = 0;
  sc.targetNestingLevel = 1;
  if (!CK_CALL(E, cuptiRangeProfilerSetConfig, &sc))
    return 0;
  E->tm.rp_setup_s += cucap_clock_now_s() - t0;
  CUCAP_DEBUG("profile: metrics window %zu of %zu%s: records %" PRIu64 "..%" PRIu64
              ", %zu op(s) of %s, %s range", E->mt.cur_win + 1, E->mt.nwin,
              m->dur_phase ? " (duration pass)" : "", w->rec_lo,
              w->rec_hi, w->nops, w->graph ? "graph launches" : "plain launches",
              w->mode == CK_WIN_USER ? "user (one per graph launch)"
                                     : "auto (one per kernel)");
  return 1;
}

/* ------------------------------------------------------------ passes */

/* The current window failed in this pass (m->win_note says why): nothing
 * more is collected in it; the pass ends after this op. */
static void ck_win_fail_now(ck_engine *E, const char *what) {
  ck_metrics *m = E->m;
  if (!m->win_failed)
    snprintf(m->win_note, sizeof m->win_note, "%s%s", what ? what : "",
             E->last_msg);
  m->win_failed = 1;
  int q = E->quiet;
  E->quiet = 1;
  if (m->rp && m->in_range) {
    CUpti_RangeProfiler_PopRange_Params pp;
    memset(&pp, 0, sizeof pp);
    pp.structSize = CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE;
    pp.pRangeProfilerObject = m->rp;
    CK_CALL(E, cuptiRangeProfilerPopRange, &pp);
  }
  if (m->rp && m->started) {
    CUpti_RangeProfiler_Stop_Params sp;
    memset(&sp, 0, sizeof sp);
    sp.structSize = CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE;
    sp.pRangeProfilerObject = m->rp;
    CK_CALL(E, cuptiRangeProfilerStop, &sp);
  }
  E->quiet = q;
  m->in_range = 0;
  m->started = 0;
  m->stopped = 1;
}

static double ck_tv_s(const struct timeval *tv) {
  return (double)tv->tv_sec + (double)tv->tv_usec * 1e-6;
}

static void ck_own_sync(ck_engine *E) {
  if (!E->cu.CtxSynchronize)
    return;
  E->own_call = 1;
  CUresult r = E->cu.CtxSynchronize();
  E->own_call = 0;
  if (r != CUDA_SUCCESS)
    CUCAP_WARN("profile: cuCtxSynchronize in the metrics pass failed (%d)", (int)r);
}

void ck_metrics_op_before(ck_engine *E, const cucap_replay_op *op) {
  ck_metrics *m = E->m;
  if (!m || m->over || !m->rp || m->win_failed || E->dead || E->mt.cur_win >= E->mt.nwin)
    return;
  const ck_window *w = &E->mt.win[E->mt.cur_win];
  if (op->rec_index < w->rec_lo || op->rec_index > w->rec_hi)
    return;
  if (op->rec_index == w->rec_lo && !m->started && !m->stopped) {
    if (op->capturing)
      CUCAP_WARN("profile: metrics window starts while a stream is being "
                 "captured (record %" PRIu64 ")", op->rec_index);
    CUpti_RangeProfiler_Start_Params sp;
    memset(&sp, 0, sizeof sp);
    sp.structSize = CUpti_RangeProfiler_Start_Params_STRUCT_SIZE;
    sp.pRangeProfilerObject = m->rp;
    /* A window's first Start is slow, a large part of a second (and again
     * for the duration passes' own object): at debug level the process's
     * CPU time around it says whether that is work on this host or
     * waiting for the driver. */
    int dbg = CUCAP_LOG_ENABLED(CUCAP_LOG_DEBUG);
    struct rusage ru0, ru1;
    dbg = dbg && getrusage(RUSAGE_SELF, &ru0) == 0;
    double ts = cucap_clock_now_s();
    int ok = CK_CALL(E, cuptiRangeProfilerStart, &sp);
    double dt = cucap_clock_now_s() - ts;
    E->tm.rp_startstop_s += dt;
    if (dbg && dt > 0.01 && getrusage(RUSAGE_SELF, &ru1) == 0)
      CUCAP_DEBUG("profile: metrics window %zu%s: cuptiRangeProfilerStart %.3f s "
                  "(process CPU: user %.3f s, system %.3f s)", E->mt.cur_win,
                  m->dur_phase ? " (duration pass)" : "", dt,
                  ck_tv_s(&ru1.ru_utime) - ck_tv_s(&ru0.ru_utime),
                  ck_tv_s(&ru1.ru_stime) - ck_tv_s(&ru0.ru_stime));
    if (!ok) {
      ck_win_fail_now(E, "");
      if (E->last == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
        snprintf(m->win_note, sizeof m->win_note, "%s", ck_privilege_hint());
      return;
    }
    m->started = 1;
    m->nflushed = 0;
    m->t_start = cucap_clock_now_s();
    CUCAP_DEBUG("profile: metrics window %zu: range profiler started",
                E->mt.cur_win);
  }
  if (!m->started || op->capturing)
    return;
  int64_t k0 = ck_kernel_find(E, op->rec_index, 0);
  if (k0 < 0)
    return; /* no kernel of this op: nothing to flush or to range */
  int graph_op = E->tl.kern[k0].launch_index == CUCAP_REPLAY_NO_LAUNCH;
  /* flush L2 right before the op's kernels: on its stream (ordered with
   * them); a graph launch's stream is not known here, so the flush goes to
   * the NULL stream and the context is synchronized after it */
  if (ck_flush_run(E, (CUstream)(uintptr_t)op->stream)) {
    /* The profiled kernel's range starts on an idle GPU, as under ncu (which
     * waits for idle around every kernel it measures): queued right behind
     * the flush kernel, an auto range measures microsecond kernels a
     * fraction of a microsecond longer than ncu does (bench/profile_vs_ncu.sh
     * shows it; docs/bench-log.md, "Flush wait"). CUCAP_PROFILE_FLUSH_SYNC=0:
     * no wait (except for graph
     * launches on the NULL stream, which need it for ordering). */
    if (w->mode != CK_WIN_USER && (E->fl.flush_sync || (graph_op && !op->stream)))
      ck_own_sync(E);
    if (cucap_vec_reserve(&m->flushed, &m->capflushed, m->nflushed + 1,
                          sizeof *m->flushed, 16))
      m->flushed[m->nflushed++] = op->rec_index;
  }
  if (w->mode == CK_WIN_USER) {
    ck_own_sync(E); /* the range starts with the context idle */
    char name[48];
    snprintf(name, sizeof name, "cucap:%" PRIu64, op->rec_index);
    CUpti_RangeProfiler_PushRange_Params pp;
    memset(&pp, 0, sizeof pp);
    pp.structSize = CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE;
    pp.pRangeProfilerObject = m->rp;
    pp.pRangeName = ck_intern(&E->str, name); /* lives as long as the engine */
    if (!CK_CALL(E, cuptiRangeProfilerPushRange, &pp)) {
      ck_win_fail_now(E, "user range: ");
      return;
    }
    m->in_range = 1;
  }
}

static void ck_rp_stop(ck_engine *E) {
  ck_metrics *m = E->m;
  CUpti_RangeProfiler_Stop_Params sp;
  memset(&sp, 0, sizeof sp);
  sp.structSize = CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE;
  sp.pRangeProfilerObject = m->rp;
  m->started = 0;
  m->stopped = 1;
  double ts = cucap_clock_now_s();
  E->tm.window_s += ts - m->t_start;
  int ok = CK_CALL(E, cuptiRangeProfilerStop, &sp);
  double dt = cucap_clock_now_s() - ts;
  E->tm.rp_startstop_s += dt;
  E->tm.rp_stop_s += dt;
  if (!ok) {
    if (!m->win_failed)
      snprintf(m->win_note, sizeof m->win_note, "%s", E->last_msg);
    m->win_failed = 1;
    m->rp_broken = 1;
    return;
  }
  m->all_submitted = sp.isAllPassSubmitted;
  CUCAP_DEBUG("profile: metrics window %zu: pass %u stopped, next pass index "
              "%zu, all submitted %d", E->mt.cur_win, m->window_passes + 1,
              sp.passIndex, (int)sp.isAllPassSubmitted);
}

int ck_metrics_window_stopped(const ck_engine *E) {
  return E->m && E->m->stopped && !E->m->started;
}

void ck_metrics_op_after(ck_engine *E, const cucap_replay_op *op) {
  ck_metrics *m = E->m;
  if (!m || !m->started || E->dead || E->mt.cur_win >= E->mt.nwin)
    return;
  const ck_window *w = &E->mt.win[E->mt.cur_win];
  if (m->in_range && !op->capturing && op->rec_index >= w->rec_lo &&
      op->rec_index <= w->rec_hi) {
    ck_own_sync(E); /* the launch's kernels are inside the range */
    CUpti_RangeProfiler_PopRange_Params pp;
    memset(&pp, 0, sizeof pp);
    pp.structSize = CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE;
    pp.pRangeProfilerObject = m->rp;
    m->in_range = 0;
    if (!CK_CALL(E, cuptiRangeProfilerPopRange, &pp)) {
      ck_win_fail_now(E, "user range: ");
      return;
    }
  }
  if (op->rec_index == w->rec_hi)
    ck_rp_stop(E);
}

/* ------------------------------------------------------------ pass end */

static void ck_metrics_final(ck_engine *E) {
  ck_metrics *m = E->m;
  size_t total = 0, ngraph_k = 0;
  for (size_t k = 0; k < E->tl.nkern; k++) {
    total += ck_kernel_profiled(E, k);
    ngraph_k += ck_kernel_profiled(E, k) &&
                E->tl.kern[k].launch_index == CUCAP_REPLAY_NO_LAUNCH;
  }
  char extra[1400] = "";
  size_t l = 0;
  if (m->time_outliers)
    l += (size_t)snprintf(extra + l, sizeof extra - l,
                          "; %zu kernel(s) with gpu__time_duration more than "
                          "3x off the timeline (check the attribution)",
                          m->time_outliers);
  if (E->mt.ngmet && l < sizeof extra)
    l += (size_t)snprintf(extra + l, sizeof extra - l,
                          "; %zu CUDA graph launch(es) measured as a whole "
                          "(one user range per graph launch: metrics per "
                          "graph launch, not per kernel) because CUPTI's auto "
                          "range does not work on graph launches: %.300s", E->mt.ngmet,
                          m->graph_note);
  if (m->failed_windows && l < sizeof extra)
    l += (size_t)snprintf(extra + l, sizeof extra - l,
                          "; %zu of %zu window(s) failed, first: %.500s",
                          m->failed_windows, E->mt.nwin, m->fail_note);
  char beside[256];
  if (m->dur_attributed && l < sizeof extra)
    l += (size_t)snprintf(extra + l, sizeof extra - l,
                          "; gpu__time_duration.sum of %zu kernel(s): the "
                          "median of %u pass(es) of its own%s",
                          m->dur_attributed, m->dur_reps,
                          ck_dur_beside(m, beside, sizeof beside));
  if (m->dur_note[0] && l < sizeof extra)
    l += (size_t)snprintf(extra + l, sizeof extra - l,
                          "; a duration pass failed: %.250s", m->dur_note);
  if (E->fl.flush[0].buf && l < sizeof extra)
    l += (size_t)snprintf(extra + l, sizeof extra - l,
                          "; L2 flushed before each launch%s",
                          ck_flush_where(E));
  if (l < sizeof extra)
    l += (size_t)snprintf(extra + l, sizeof extra - l, "%s", ck_clock_note(E));
  if (E->mt.mdropped[0] && l < sizeof extra)
    snprintf(extra + l, sizeof extra - l, "; not on this chip: %.200s",
             E->mt.mdropped);
  int st = m->attributed == total && !E->mt.mdropped[0] && !m->failed_windows
               ? CUCAP_CUPTI_COLLECTED
           : m->attributed || E->mt.ngmet ? CUCAP_CUPTI_PARTIAL
           : E->env.counters_allowed == 0 ? CUCAP_CUPTI_UNAVAILABLE
                                          : CUCAP_CUPTI_FAILED;
  (void)ngraph_k;
  ck_section(E, CUCAP_CUPTI_METRICS, st,
             "%zu metric(s) for %zu of %zu kernel executions, %u counter "
             "pass(es) x %zu window(s)%s", E->mt.nmnames, m->attributed, total,
             E->env.metric_passes, E->mt.nwin, extra);
}

/* The current window's duration passes are over: each of its kernels
 * measured at least once gets the median of its samples. */
static void ck_dur_finish(ck_engine *E) {
  ck_metrics *m = E->m;
  const ck_window *w = &E->mt.win[E->mt.cur_win];
  double v[9];
  for (size_t k = w->k_lo; k < w->k_hi; k++) {
    size_t n = 0;
    for (unsigned r = 0; r < m->dur_reps; r++) {
      double x = m->dvals[k * m->dur_reps + r];
      if (!isnan(x))
        v[n++] = x;
    }
    if (!n)
      continue;
    double lo, hi;
    ck_stats(v, (unsigned)n, &E->mt.mvals[k * E->mt.nmnames + (size_t)m->dur_col], &lo, &hi,
             NULL);
    m->dur_attributed++;
  }
}

/* Moves to the next window that can be set up; 0 when none is left (the
 * section note is then final). */
static int ck_win_next(ck_engine *E) {
  ck_metrics *m = E->m;
  if (m->dur_phase) {
    /* the window's next duration pass, or the median of those done */
    if (!m->win_failed && !m->rp_broken && !E->dead &&
        m->dur_rep + 1 < m->dur_reps) {
      m->dur_rep++;
      if (ck_win_setup(E))
        return 1;
      if (!m->dur_note[0])
        snprintf(m->dur_note, sizeof m->dur_note, "%.250s", E->last_msg);
    }
    ck_dur_finish(E);
  } else if (m->dhost && !m->rp_broken && !E->dead && E->mt.cur_win < E->mt.nwin &&
             E->mt.win[E->mt.cur_win].mode == CK_WIN_AUTO && !m->win_failed) {
    /* a window of plain launches measured with the main config: its
     * duration passes next (ck_dur_config), the same window again */
    if (!m->dvals) {
      size_t nv = E->tl.nkern * m->dur_reps;
      m->dvals = malloc((nv ? nv : 1) * sizeof *m->dvals);
      for (size_t i = 0; m->dvals && i < nv; i++)
        m->dvals[i] = NAN;
    }
    m->dur_phase = 1;
    m->dur_rep = 0;
    if (m->dvals && ck_win_setup(E))
      return 1;
    if (!m->dur_note[0])
      snprintf(m->dur_note, sizeof m->dur_note, "%.250s",
               m->dvals ? E->last_msg : "out of memory");
    CUCAP_WARN("profile: metrics window %zu: the duration pass cannot be set "
               "up (%s); its gpu__time_duration.sum comes from the other "
               "metrics' passes", E->mt.cur_win + 1, m->dur_note);
  }
  m->dur_phase = 0;
  if (m->rp_broken && E->mt.cur_win + 1 < E->mt.nwin) {
    size_t left = E->mt.nwin - E->mt.cur_win - 1;
    m->failed_windows += left;
    CUCAP_ERROR("profile: the range profiler failed (%s): the %zu metrics window(s) left "
                "are not measured in this run (their kernels get no metrics; timeline "
                "and PC sampling go on)", m->win_note[0] ? m->win_note : E->last_msg, left);
    E->mt.cur_win = E->mt.nwin - 1;
  }
  for (E->mt.cur_win++; E->mt.cur_win < E->mt.nwin && !E->dead; E->mt.cur_win++) {
    if (ck_win_setup(E))
      return 1;
    m->failed_windows++;
    if (!m->fail_note[0])
      snprintf(m->fail_note, sizeof m->fail_note, "window %zu: %.1100s",
               E->mt.cur_win + 1, E->last_msg);
    if (E->last == CUPTI_ERROR_HARDWARE_BUSY ||
        E->last == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) {
      /* the same would happen to every window left */
      m->failed_windows += E->mt.nwin - E->mt.cur_win - 1;
      break;
    }
  }
  m->over = 1;
  ck_rp_release(E);
  if (E->dead)
    ck_section(E, CUCAP_CUPTI_METRICS,
               m->attributed || E->mt.ngmet ? CUCAP_CUPTI_PARTIAL
                                         : CUCAP_CUPTI_FAILED,
               "%s%s", m->attributed || E->mt.ngmet
                           ? "metrics collected before the failure kept; " : "",
               E->dead_why);
  else
    ck_metrics_final(E);
  return 0;
}

static int ck_metrics_pass_end_inner(ck_engine *E) {
  ck_metrics *m = E->m;
  if (!m || m->over || E->mt.cur_win >= E->mt.nwin)
    return 0;
  if (E->dead)
    return ck_win_next(E);
  if (m->in_range || m->started) { /* the window's last op did not run */
    if (m->in_range) {
      CUpti_RangeProfiler_PopRange_Params pp;
      memset(&pp, 0, sizeof pp);
      pp.structSize = CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE;
      pp.pRangeProfilerObject = m->rp;
      m->in_range = 0;
      CK_CALL(E, cuptiRangeProfilerPopRange, &pp);
    }
    if (m->started)
      ck_rp_stop(E);
  }
  ck_window *w = &E->mt.win[E->mt.cur_win];
  if (!m->stopped && !m->win_failed) {
    m->win_failed = 1;
    snprintf(m->win_note, sizeof m->win_note,
             "its first record %" PRIu64 " was not executed in this pass",
             w->rec_lo);
  }
  m->window_passes++;
  unsigned limit = E->env.metric_passes ? 2 * E->env.metric_passes + 4 : 64;
  if (!m->win_failed && !m->all_submitted && m->window_passes >= limit) {
    m->win_failed = 1;
    snprintf(m->win_note, sizeof m->win_note,
             "CUPTI still asks for passes after %u (the config needs %u)",
             m->window_passes, E->env.metric_passes);
  }
  if (E->dead)
    return ck_win_next(E);
  if (!m->win_failed) {
    if (!m->all_submitted) {
      m->stopped = 0;
      return 1; /* the same window again: next counter pass */
    }
    if (!ck_window_collect(E))
      m->win_failed = 1;
  }
  if (m->win_failed && m->dur_phase && !E->dead) {
    /* the main config's values stay; only the duration is not its own */
    if (!m->dur_note[0])
      snprintf(m->dur_note, sizeof m->dur_note, "%.250s", m->win_note);
    CUCAP_WARN("profile: metrics window %zu: the duration pass failed (%s); "
               "its gpu__time_duration.sum comes from the other metrics' "
               "passes", E->mt.cur_win + 1, m->win_note);
  } else if (m->win_failed && !E->dead) {
    m->failed_windows++;
    if (!m->fail_note[0])
      snprintf(m->fail_note, sizeof m->fail_note,
               "window %zu (records %" PRIu64 "..%" PRIu64 "%s): %.1000s",
               E->mt.cur_win + 1, w->rec_lo, w->rec_hi,
               w->graph ? ", CUDA graph launches" : "", m->win_note);
    CUCAP_ERROR("profile: metrics window %zu (records %" PRIu64 "..%" PRIu64
                "%s) failed, its kernels get no metrics: %s", E->mt.cur_win + 1,
                w->rec_lo, w->rec_hi, w->graph ? ", CUDA graph launches" : "",
                m->win_note);
  }
  return ck_win_next(E);
}

/* The metrics phase is over: the range profiler object, the host object and
 * the flush buffer go before PC sampling is enabled (both use the GPU's
 * profiling hardware). */
void ck_metrics_done(ck_engine *E) {
  ck_metrics_free(E);
  CUCAP_DEBUG("profile: setup: range profiler and host objects released");
  ck_flush_free(E);
  CUCAP_DEBUG("profile: setup: flushers released");
}

int ck_metrics_pass_end(ck_engine *E) {
  int more = ck_metrics_pass_end_inner(E);
  if (!more)
    ck_metrics_done(E);
  return more;
}
