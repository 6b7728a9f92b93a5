/* cupti_metrics.c - hardware metrics per kernel execution, the host side:
 * the Profiler Host API (cupti_profiler_host.h) validates the names and
 * builds the config image; the kernels the first timeline pass saw are cut
 * into windows (at most max_ranges kernels, plain launches and graph
 * launches never in the same window). cupti_ranges.c drives the Range
 * Profiler through the passes and attributes the ranges. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_knobs.h"
#include "cucap_log.h"
#include "cupti_internal.h"

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

const char *ck_privilege_hint(void) {
  return "hardware counters are restricted to administrators on this machine "
         "(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES): run as root, or allow every "
         "user with `options nvidia NVreg_RestrictProfilingToAdminUsers=0` in "
         "/etc/modprobe.d/ and reload the nvidia module (see "
         "https://developer.nvidia.com/ERR_NVGPUCTRPERM); the timeline is "
         "unaffected";
}

/* The config image of `names` on the host object `host`: 1 with *config
 * (malloc'ed, the caller frees it), *size and *passes (counter passes it
 * needs); 0 with E->last_msg set (empty: out of memory) and *config NULL. */
static int ck_host_config(ck_engine *E, CUpti_Profiler_Host_Object *host,
                          const char **names, size_t n, uint8_t **config,
                          size_t *size, size_t *passes) {
  *config = NULL;
  E->last_msg[0] = 0;
  CUpti_Profiler_Host_ConfigAddMetrics_Params am;
  memset(&am, 0, sizeof am);
  am.structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE;
  am.pHostObject = host;
  am.ppMetricNames = names;
  am.numMetrics = n;
  CUpti_Profiler_Host_GetConfigImageSize_Params cs;
  memset(&cs, 0, sizeof cs);
  cs.structSize = CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE;
  cs.pHostObject = host;
  if (!CK_CALL(E, cuptiProfilerHostConfigAddMetrics, &am) ||
      !CK_CALL(E, cuptiProfilerHostGetConfigImageSize, &cs) ||
      !cs.configImageSize || !(*config = malloc(cs.configImageSize)))
    return 0;
  *size = cs.configImageSize;
  CUpti_Profiler_Host_GetConfigImage_Params ci;
  memset(&ci, 0, sizeof ci);
  ci.structSize = CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE;
  ci.pHostObject = host;
  ci.configImageSize = cs.configImageSize;
  ci.pConfigImage = *config;
  CUpti_Profiler_Host_GetNumOfPasses_Params np;
  memset(&np, 0, sizeof np);
  np.structSize = CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE;
  np.configImageSize = cs.configImageSize;
  np.pConfigImage = *config;
  if (!CK_CALL(E, cuptiProfilerHostGetConfigImage, &ci) ||
      !CK_CALL(E, cuptiProfilerHostGetNumOfPasses, &np)) {
    free(*config);
    *config = NULL;
    return 0;
  }
  *passes = np.numOfPasses;
  return 1;
}

CUpti_Profiler_Host_Object *ck_host_new(ck_engine *E, const uint8_t *avail) {
  CUpti_Profiler_Host_Initialize_Params hp;
  ck_api_nvperf_wait(&E->api);
  memset(&hp, 0, sizeof hp);
  hp.structSize = CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE;
  hp.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  hp.pChipName = E->env.chip;
  hp.pCounterAvailabilityImage = avail;
  return CK_CALL(E, cuptiProfilerHostInitialize, &hp) ? hp.pHostObject : NULL;
}

/* Deinitialises *host (quietly: at teardown) and clears it; NULL accepted. */
static void ck_host_delete(ck_engine *E, CUpti_Profiler_Host_Object **host) {
  if (!*host)
    return;
  CUpti_Profiler_Host_Deinitialize_Params hd;
  memset(&hd, 0, sizeof hd);
  hd.structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE;
  hd.pHostObject = *host;
  int q = E->quiet;
  E->quiet = 1;
  CK_CALL(E, cuptiProfilerHostDeinitialize, &hd);
  E->quiet = q;
  *host = NULL;
}

/* ck_metrics_begin: the names asked for (a set's, or the raw list of
 * --metrics, interned) into list (room for 256); returns their count. */
static size_t ck_metric_list(ck_engine *E, const char **list) {
  const char *const *set = cucap_cupti_metric_set(E->o.metrics);
  size_t nlist = 0;
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
  return nlist;
}

/* ck_metrics_begin: the counter availability image of the profiled
 * context into *out (malloc'ed; NULL when CUPTI gives an empty one); 0
 * with the section off when counters are not allowed or cannot be read. */
static int ck_counter_avail(ck_engine *E, uint8_t **out) {
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
  *out = avail;
  return 1;
}

/* ck_metrics_begin: keeps those of list[0..nlist) that the chip knows in
 * E->mt.mnames. 1: some are left; 0: none (section off) or out of memory;
 * -1: a raw name is unknown (msg filled). */
static int ck_metric_validate(ck_engine *E, const char *const *list,
                              size_t nlist, int raw, char *msg,
                              size_t msg_size) {
  /* validate: a set drops what this chip lacks; raw names must all exist */
  E->mt.mnames = calloc(nlist ? nlist : 1, sizeof *E->mt.mnames);
  if (!E->mt.mnames)
    return 0;
  char dropped[256] = "";
  size_t dl = 0;
  for (size_t i = 0; i < nlist; i++) {
    if (!list[i])
      continue;
    if (ck_name_known(E, list[i])) {
      int dup = 0;
      for (size_t j = 0; j < E->mt.nmnames; j++)
        dup |= !strcmp(E->mt.mnames[j], list[i]);
      if (!dup)
        E->mt.mnames[E->mt.nmnames++] = ck_intern(&E->str, list[i]);
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
      snprintf(E->mt.mdropped, sizeof E->mt.mdropped, "%s", dropped);
  }
  if (!E->mt.nmnames) {
    ck_section(E, CUCAP_CUPTI_METRICS, CUCAP_CUPTI_UNAVAILABLE,
               "none of the requested metrics exists on %s", E->env.chip);
    return 0;
  }
  return 1;
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
  E->m->dur_col = -1;
  /* names */
  const char *list[256];
  int raw = !cucap_cupti_metric_set(E->o.metrics);
  size_t nlist = ck_metric_list(E, list);
  if (!ck_prof_init(E)) {
    ck_section(E, CUCAP_CUPTI_METRICS, CUCAP_CUPTI_UNAVAILABLE, "%s",
               E->last_msg);
    return 0;
  }
  CUCAP_DEBUG("profile: setup: profiler initialised, chip %s", E->env.chip);
  uint8_t *avail = NULL;
  if (!ck_counter_avail(E, &avail))
    return 0;
  E->env.counters_allowed = 1;
  CUCAP_DEBUG("profile: setup: counter availability read");
  E->m->host = ck_host_new(E, avail);
  /* The host object refers to the image after Initialize (CUPTI's own
   * samples keep it for the object's lifetime): freed in ck_metrics_free.
   * Freed here, ConfigAddMetrics crashed inside libnvperf_host (H100). */
  E->m->avail = avail;
  if (!E->m->host) {
    ck_section(E, CUCAP_CUPTI_METRICS, CUCAP_CUPTI_UNAVAILABLE, "%s",
               E->last_msg);
    return 0;
  }
  CUCAP_DEBUG("profile: setup: profiler host object made");
  int v = ck_metric_validate(E, list, nlist, raw, msg, msg_size);
  if (v <= 0)
    return v;
  CUCAP_DEBUG("profile: setup: metric names checked");
  size_t passes = 0;
  if (!ck_host_config(E, E->m->host, (const char **)E->mt.mnames, E->mt.nmnames,
                      &E->m->config, &E->m->config_size, &passes)) {
    ck_section(E, CUCAP_CUPTI_METRICS, CUCAP_CUPTI_UNAVAILABLE, "%s",
               E->last_msg[0] ? E->last_msg : "out of memory");
    return 0;
  }
  E->env.metric_passes = (unsigned)passes;
  CUCAP_INFO("profile: %zu metric(s) on %s need %zu counter pass(es)",
             E->mt.nmnames, E->env.chip, passes);
  ck_dur_config(E, avail);
  return 1;
}

/* gpu__time_duration.sum in a pass of its own. In a pass that also
 * collects the other metrics the range of a short kernel is longer than
 * ncu's (the SOL counters add set-up inside the range), so microsecond
 * kernels come out several % long. So when the duration is asked with
 * other metrics, each window of plain launches gets one more pass with a
 * config of its own, and the kernels' gpu__time_duration.sum comes from
 * there (the section note says so).
 *
 * That config is not the duration alone: with no other counter in the
 * pass, CUPTI's range around a short kernel is shorter than ncu's, whose
 * duration does not change with the counters it collects (its
 * duration-only runs agree with its four-metric runs). One cycle counter
 * beside it (ck_dur_with, sm__cycles_elapsed.max) gives the range ncu's
 * length; more counters, or the SOL counters themselves, do no better and
 * cost passes. So the pass holds ck_dur_with
 * (CUCAP_PROFILE_DURATION_WITH=a,b names others, "none" the duration
 * alone); should the chip refuse them, the duration alone. One such pass is one noisy sample, so it is run
 * CUCAP_PROFILE_DURATION_PASSES times (default 3; 0: none, the main
 * config's value) and the median kept.
 * bench/profile_vs_ncu.sh measures the agreement with ncu for any setting
 * of these two knobs; docs/bench-log.md, "Duration pass", has the figures
 * behind the defaults. */
const char *const ck_dur_name[1] = {"gpu__time_duration.sum"};
static const char ck_dur_with[] = "sm__cycles_elapsed.max";

/* m->dnames = the duration, then the companions named by with (NULL or
 * "none": none); names interned in the engine's table. */
static void ck_dur_names(ck_engine *E, const char *with) {
  ck_metrics *m = E->m;
  m->dnames[0] = ck_dur_name[0];
  m->ndnames = 1;
  if (!with || !strcmp(with, "none"))
    return;
  const size_t cap = sizeof m->dnames / sizeof m->dnames[0];
  for (const char *p = with; *p && m->ndnames < cap;) {
    size_t n = strcspn(p, ",");
    const char *nm = n ? ck_intern_n(&E->str, p, n) : NULL;
    if (nm && strcmp(nm, ck_dur_name[0]))
      m->dnames[m->ndnames++] = nm;
    p += n + (p[n] == ',');
  }
}

const char *ck_dur_beside(const ck_metrics *m, char *buf, size_t n) {
  size_t l = 0;
  buf[0] = 0;
  for (size_t i = 1; i < m->ndnames && l < n; i++)
    l += (size_t)snprintf(buf + l, n - l, "%s%s", i == 1 ? ", beside " : ", ",
                          m->dnames[i]);
  return buf;
}

/* The duration passes' host object and config image, for m->dnames; 0
 * with E->last_msg set (what was made is freed by ck_dur_free). */
static int ck_dur_host(ck_engine *E, const uint8_t *avail, size_t *passes) {
  ck_metrics *m = E->m;
  m->dhost = ck_host_new(E, avail); /* avail: kept by m->avail */
  return m->dhost && ck_host_config(E, m->dhost, m->dnames, m->ndnames,
                                    &m->dconfig, &m->dconfig_size, passes);
}

void ck_dur_config(ck_engine *E, const uint8_t *avail) {
  ck_metrics *m = E->m;
  m->dur_col = -1;
  for (size_t i = 0; i < E->mt.nmnames; i++)
    if (!strcmp(E->mt.mnames[i], ck_dur_name[0]))
      m->dur_col = (int)i;
  long reps = cucap_knob_long(CUCAP_KNOB(CUCAP_PROFILE_DURATION_PASSES));
  /* raw: an empty value asks for the duration alone, as "none" does */
  const char *with = cucap_knob_raw(CUCAP_KNOB(CUCAP_PROFILE_DURATION_WITH));
  ck_dur_names(E, with ? with : ck_dur_with);
  /* asked alone, the duration is the main config's unless companions
   * make the duration pass's range a different one */
  if (m->dur_col < 0 || reps <= 0 || (E->mt.nmnames < 2 && m->ndnames < 2))
    return;
  m->dur_reps = reps > 9 ? 9 : (unsigned)reps;
  size_t passes = 0;
  int ok = ck_dur_host(E, avail, &passes);
  if (!ok && m->ndnames > 1) {
    CUCAP_WARN("profile: the duration pass cannot hold %s (%s): "
               "gpu__time_duration.sum is measured alone, which gives "
               "short kernels shorter ranges than ncu's", m->dnames[1],
               E->last_msg);
    ck_dur_free(E);
    ck_dur_names(E, NULL);
    ok = ck_dur_host(E, avail, &passes);
  }
  if (ok) {
    char beside[256];
    CUCAP_INFO("profile: gpu__time_duration.sum is measured %u time(s) per "
               "window in %zu counter pass(es) of its own%s (the median is "
               "kept)", m->dur_reps, passes,
               ck_dur_beside(m, beside, sizeof beside));
    return;
  }
  CUCAP_WARN("profile: no separate duration pass (%s): gpu__time_duration.sum "
             "comes from the passes of the other metrics", E->last_msg);
  ck_dur_free(E);
}

void ck_dur_free(ck_engine *E) {
  ck_metrics *m = E->m;
  ck_host_delete(E, &m->dhost);
  free(m->dconfig);
  m->dconfig = NULL;
  m->dconfig_size = 0;
  free(m->dvals);
  m->dvals = NULL;
}

/* ------------------------------------------------------------ windows */

/* In the range profiler's view: the profiled context (ck_pick_ctx) and the
 * launch window. */
int ck_kernel_profiled(const ck_engine *E, size_t k) {
  return (!E->ctx_id || E->tl.kx[k].context_id == E->ctx_id) &&
         ck_in_window(E, E->tl.kern[k].rec_index);
}

static int ck_win_push(ck_engine *E, const ck_window *w) {
  if (!cucap_vec_reserve(&E->mt.win, &E->mt.capwin, E->mt.nwin + 1, sizeof *E->mt.win, 16))
    return 0;
  E->mt.win[E->mt.nwin++] = *w;
  return 1;
}

/* Windows of at most max_ranges profiled kernels, cut between ops, holding
 * either plain launches or graph launches (a window spans the records of
 * its first and last profiled kernel). */
/* ck_metrics_plan: cuts the kernel table into windows (ck_win_push): the
 * most ranges a window holds into *biggestp, the window's kernels that ran
 * outside the profiled context into *other_ctxp. 0 when memory ran out. */
static int ck_win_cut(ck_engine *E, size_t *biggestp, size_t *other_ctxp) {
  size_t biggest = 0, other_ctx = 0, i = 0;
  ck_window cur;
  memset(&cur, 0, sizeof cur);
  size_t cnt = 0;
  while (i <= E->tl.nkern) {
    size_t j = i, c = 0;
    uint64_t r = i < E->tl.nkern ? E->tl.kern[i].rec_index : UINT64_MAX;
    int g = i < E->tl.nkern && E->tl.kern[i].launch_index == CUCAP_REPLAY_NO_LAUNCH;
    while (j < E->tl.nkern && E->tl.kern[j].rec_index == r) {
      int prof = ck_kernel_profiled(E, j);
      c += prof;
      other_ctx += !prof && ck_in_window(E, r);
      j++;
    }
    /* close the window before this op: at the end, when it would overflow,
     * or when the op is of the other kind (graph vs plain launch) */
    if (cnt && (i == E->tl.nkern ||
                (c && (g != cur.graph || cnt + c > E->o.max_ranges)))) {
      if (!ck_win_push(E, &cur))
        return 0;
      if (cnt > biggest)
        biggest = cnt;
      cnt = 0;
    }
    if (i == E->tl.nkern)
      break;
    if (c) {
      if (!cnt) {
        memset(&cur, 0, sizeof cur);
        cur.rec_lo = r;
        cur.k_lo = i;
        cur.graph = g;
        /* graph launches: one user range per launch (where CUPTI has
         * user ranges). With auto range cuptiRangeProfilerStop fails with
         * CUPTI_ERROR_UNKNOWN on a window of graph launches (H100, CUPTI
         * 13.0), and the range profiler cannot be used again in that run
         * (cupti_ranges.c). */
        cur.mode = g && E->api.cuptiRangeProfilerPushRange &&
                           E->api.cuptiRangeProfilerPopRange
                       ? CK_WIN_USER
                       : CK_WIN_AUTO;
      }
      cnt += c;
      cur.nops++;
      cur.rec_hi = r;
      cur.k_hi = j;
    }
    i = j;
  }
  *biggestp = biggest;
  *other_ctxp = other_ctx;
  return 1;
}

int ck_metrics_plan(ck_engine *E) {
  ck_metrics *m = E->m;
  if (!m || !E->mt.nmnames)
    return 0;
  size_t biggest = 0, other_ctx = 0;
  if (!ck_win_cut(E, &biggest, &other_ctx))
    return 0;
  E->mt.cur_win = 0;
  if (!E->mt.nwin) {
    if (other_ctx)
      ck_section(E, CUCAP_CUPTI_METRICS, CUCAP_CUPTI_UNAVAILABLE,
                 "the %zu kernel execution(s) of the window ran outside "
                 "the profiled context (CUPTI could not tell which context "
                 "they ran in), so they get no metrics", other_ctx);
    else
      ck_section(E, CUCAP_CUPTI_METRICS, CUCAP_CUPTI_UNAVAILABLE,
                 "no kernel ran in the profiled window");
    return 0;
  }
  if (other_ctx)
    CUCAP_WARN("profile: %zu kernel execution(s) ran in contexts other than "
               "the profiled one: no metrics for them (CUPTI's range "
               "profiler measures one context)", other_ctx);
  /* room for twice the kernels: flush memsets that form ranges, or ranges
   * nobody expected, are then counted (and fail the window loudly) rather
   * than dropped silently */
  m->max_ranges = 2 * biggest + 16;
  /* values: NAN until a range fills them */
  E->mt.mvals = malloc(E->tl.nkern * E->mt.nmnames * sizeof *E->mt.mvals);
  if (!E->mt.mvals)
    return 0;
  for (size_t k = 0; k < E->tl.nkern * E->mt.nmnames; k++)
    E->mt.mvals[k] = NAN;
  for (size_t k = 0; k < E->tl.nkern; k++)
    E->tl.kern[k].metrics = E->mt.mvals + k * E->mt.nmnames;
  size_t ngraph = 0;
  for (size_t w = 0; w < E->mt.nwin; w++)
    ngraph += E->mt.win[w].graph;
  if (ngraph)
    snprintf(m->graph_note, sizeof m->graph_note, "cuptiRangeProfilerStop "
             "fails with CUPTI_ERROR_UNKNOWN on auto ranges over graph "
             "launches (H100, CUPTI 13.0)");
  if (!ck_win_setup(E)) {
    int denied = E->last == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES;
    ck_section(E, CUCAP_CUPTI_METRICS,
               denied ? CUCAP_CUPTI_UNAVAILABLE : CUCAP_CUPTI_FAILED, "%s",
               denied ? ck_privilege_hint() : E->last_msg);
    return 0;
  }
  CUCAP_INFO("profile: metrics: %zu window(s) (%zu of graph launches), up "
             "to %zu ranges each, counter data image %zu KiB, %u counter "
             "pass(es) per window", E->mt.nwin, ngraph, m->max_ranges,
             m->counter_size >> 10, E->env.metric_passes);
  ck_flush_setup(E); /* one flush buffer for the whole phase */
  return 1;
}

void ck_metrics_free(ck_engine *E) {
  ck_metrics *m = E->m;
  if (!m)
    return;
  int q = E->quiet;
  E->quiet = 1;
  ck_rp_release(E);
  ck_dur_free(E);
  ck_host_delete(E, &m->host);
  free(m->avail); /* after the host object that refers to it */
  m->avail = NULL;
  E->quiet = q;
  free(m->config);
  free(m->counter);
  free(m->flushed);
  free(m);
  E->m = NULL;
}

void ck_metric_tab_free(ck_engine *E) {
  free(E->mt.mnames);
  free(E->mt.mvals);
  free(E->mt.win);
  for (size_t i = 0; i < E->mt.ngmet; i++)
    free((double *)E->mt.gmet[i].metrics);
  free(E->mt.gmet);
}

size_t cucap_cupti_metric_names(const cucap_cupti *e, const char *const **out) {
  *out = (const char *const *)e->mt.mnames;
  return e->mt.mvals ? e->mt.nmnames : 0;
}

size_t cucap_cupti_graph_metrics(const cucap_cupti *e,
                                 const cucap_cupti_graph_metric **out) {
  *out = (const cucap_cupti_graph_metric *)e->mt.gmet;
  return e->mt.ngmet;
}
