/* analyze.c - the analysis API of cucap_analyze.h: options, the window the
 * findings cover (steady state), running and ranking the findings, and the
 * accessors. The model is built by analyze_scan.c, the findings by
 * analyze_find.c and analyze_launch.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze_internal.h"
#include "cucap_reader.h"

/* ------------------------------------------------------------ window */

static int is_launch_ev(const az_ev *e) {
  return (e->kind == AZ_LAUNCH || e->kind == AZ_GRAPH) && !(e->flags & AZF_CAPTURED);
}

void az_window(cucap_analysis *a) {
  cucap_analysis_summary *sm = &a->sum;
  size_t n = 0;
  for (size_t i = 0; i < a->nev; i++)
    n += is_launch_ev(&a->ev[i]);
  size_t *pos = malloc((n ? n : 1) * sizeof *pos);
  uint8_t *seen = calloc(a->names.n ? a->names.n : 1, 1);
  uint32_t *suffix_new = calloc(n + 1, sizeof *suffix_new);
  size_t w = 0, k = 0;
  int steady = 0;
  if (!pos || !seen || !suffix_new) {
    snprintf(sm->window_reason, sizeof sm->window_reason, "whole capture (out of memory)");
    goto done;
  }
  for (size_t i = 0; i < a->nev; i++)
    if (is_launch_ev(&a->ev[i]))
      pos[k++] = i;
  if (a->o.window == CUCAP_ANALYZE_WINDOW_ALL) {
    snprintf(sm->window_reason, sizeof sm->window_reason, "whole capture (--window=all)");
  } else if (a->o.warmup_pct >= 0) {
    double p = a->o.warmup_pct > 100 ? 100 : a->o.warmup_pct;
    w = (size_t)floor((double)n * p / 100.0);
    if (w >= n)
      w = n ? n - 1 : 0;
    steady = n > 0;
    snprintf(sm->window_reason, sizeof sm->window_reason,
             "after the first %g%% of the launches (--warmup)", p);
  } else if (n < CUCAP_ANALYZE_STEADY_MIN_LAUNCHES) {
    snprintf(sm->window_reason, sizeof sm->window_reason,
             "whole capture: %zu launches are too few to tell a steady state (< %d)", n,
             CUCAP_ANALYZE_STEADY_MIN_LAUNCHES);
  } else {
    uint8_t *isnew = malloc(n);
    if (isnew) {
      size_t distinct = 0;
      for (size_t i = 0; i < n; i++) {
        uint32_t nm = a->ev[pos[i]].name;
        isnew[i] = !seen[nm];
        distinct += isnew[i];
        seen[nm] = 1;
      }
      for (size_t i = n; i-- > 0;)
        suffix_new[i] = suffix_new[i + 1] + isnew[i];
      size_t last = n - (size_t)ceil((double)n * CUCAP_ANALYZE_STEADY_MIN_TAIL_PCT / 100.0);
      size_t found = SIZE_MAX;
      for (size_t i = 0; i <= last; i++)
        if ((double)suffix_new[i] * 100.0 <= CUCAP_ANALYZE_STEADY_NEW_PCT * (double)(n - i)) {
          found = i;
          break;
        }
      if (found == SIZE_MAX) {
        snprintf(sm->window_reason, sizeof sm->window_reason,
                 "whole capture: no steady state (%zu distinct kernels in %zu launches "
                 "keep appearing)", distinct, n);
      } else {
        w = found;
        steady = 1;
        snprintf(sm->window_reason, sizeof sm->window_reason,
                 "steady state: from launch %zu of %zu, where at most %g%% of the "
                 "remaining launches run a kernel never launched before", w, n,
                 CUCAP_ANALYZE_STEADY_NEW_PCT);
      }
      free(isnew);
    }
  }
done:
  sm->steady = steady;
  if (steady && n) {
    const az_ev *e = &a->ev[pos[w]];
    a->window_t0 = e->t0;
    a->window_ev0 = pos[w];
    sm->window_first_launch = e->kind == AZ_LAUNCH ? a->launches[e->launch].launch_index : w;
    sm->window_launches = n - w;
  } else {
    a->window_t0 = 0;
    a->window_ev0 = 0;
    sm->window_first_launch = 0;
    sm->window_launches = n;
  }
  a->window_t1 = sm->duration_ns > a->window_t0 ? sm->duration_ns : a->window_t0;
  sm->window_start_ns = a->window_t0;
  sm->window_end_ns = a->window_t1;
  free(pos);
  free(seen);
  free(suffix_new);
}

/* ------------------------------------------------------------ API */

void cucap_analyze_options_init(cucap_analyze_options *o) {
  memset(o, 0, sizeof *o);
  o->window = CUCAP_ANALYZE_WINDOW_STEADY;
  o->warmup_pct = -1;
  o->symbolize = 1;
  o->max_sites = 5;
}

const char *cucap_severity_name(cucap_severity s) {
  switch (s) {
  case CUCAP_SEVERITY_HIGH: return "high";
  case CUCAP_SEVERITY_MEDIUM: return "medium";
  case CUCAP_SEVERITY_LOW: return "low";
  default: return "info";
  }
}

int cucap_severity_parse(const char *s) {
  for (int i = 0; i <= 3; i++)
    if (s && !strcmp(s, cucap_severity_name((cucap_severity)i)))
      return i;
  return -1;
}

static void link_assumption(cucap_analysis *a) {
  cucap_analysis_summary *sm = &a->sum;
  if (a->o.link_gbps > 0) {
    sm->link_gbps = a->o.link_gbps;
    snprintf(sm->link_name, sizeof sm->link_name, "given (--link-gbps)");
    return;
  }
  /* Theoretical per-direction x16 figures; achievable is ~80-90% of them. */
  const char *gen;
  double gbps;
  int cc = sm->cc_major * 10 + sm->cc_minor;
  if (strstr(sm->device, "GH200") || strstr(sm->device, "GB200")) {
    gen = "NVLink-C2C";
    gbps = 450.0;
  } else if (sm->cc_major == 10) {
    gen = "PCIe Gen6 x16";
    gbps = 121.0;
  } else if (sm->cc_major >= 9) {
    gen = "PCIe Gen5 x16";
    gbps = 63.0;
  } else if (cc >= 80) {
    gen = "PCIe Gen4 x16";
    gbps = 31.5;
  } else if (sm->cc_major > 0) {
    gen = "PCIe Gen3 x16";
    gbps = 15.75;
  } else {
    gen = "PCIe Gen4 x16 (device unknown)";
    gbps = 31.5;
  }
  sm->link_gbps = gbps;
  if (sm->cc_major > 0)
    snprintf(sm->link_name, sizeof sm->link_name, "%s (assumed from sm_%d%d)", gen,
             sm->cc_major, sm->cc_minor);
  else
    snprintf(sm->link_name, sizeof sm->link_name, "%s", gen);
}

static void caveats(cucap_analysis *a) {
  cucap_analysis_summary *sm = &a->sum;
  sm->ncaveats = 0;
  if (sm->recorder_synced_dtoh)
    snprintf(sm->caveats[sm->ncaveats++], sizeof sm->caveats[0],
             "%llu async DtoH copies were synchronised by the recorder to store "
             "their results: their host time is not the program's (record with "
             "CUCAP_OPTIONS=no_dtoh_payload for timing)",
             (unsigned long long)sm->recorder_synced_dtoh);
  if (strstr(sm->options, "hash_launches") || strstr(sm->options, "snapshot=launch"))
    snprintf(sm->caveats[sm->ncaveats++], sizeof sm->caveats[0],
             "recorded with launch hashing/snapshots: the device was synchronised "
             "by the recorder, host timing is not representative");
  if (sm->read_status != CUCAP_OK)
    snprintf(sm->caveats[sm->ncaveats++], sizeof sm->caveats[0],
             "the capture is damaged or truncated: analysed up to where reading "
             "stopped");
}

cucap_status cucap_analysis_run(cucap_analysis *a) {
  for (size_t i = 0; i < a->nfind; i++)
    memset(&a->findings[i], 0, sizeof a->findings[i]);
  a->nfind = 0;
  link_assumption(a);
  caveats(a);
  az_find_memory(a);
  az_find_sync(a);
  az_find_launch(a);
  /* rank: estimated time, severity, id */
  for (size_t i = 1; i < a->nfind; i++) {
    cucap_finding f = a->findings[i];
    size_t j = i;
    while (j > 0) {
      const cucap_finding *p = &a->findings[j - 1];
      int before = f.recoverable_ns != p->recoverable_ns ? f.recoverable_ns > p->recoverable_ns
                   : f.severity != p->severity           ? f.severity > p->severity
                                                         : strcmp(f.id, p->id) < 0;
      if (!before)
        break;
      a->findings[j] = a->findings[j - 1];
      j--;
    }
    a->findings[j] = f;
  }
  return CUCAP_OK;
}

cucap_status cucap_analysis_create(cucap_reader *r, const cucap_analyze_options *o,
                                   cucap_analysis **out) {
  if (!out || !r)
    return CUCAP_ERR_INVALID_ARG;
  *out = NULL;
  cucap_analysis *a = calloc(1, sizeof *a);
  if (!a)
    return CUCAP_ERR_NOMEM;
  if (o)
    a->o = *o;
  else
    cucap_analyze_options_init(&a->o);
  if (a->o.max_sites == 0 || a->o.max_sites > CUCAP_FINDING_MAX_SITES)
    a->o.max_sites = a->o.max_sites ? CUCAP_FINDING_MAX_SITES : 5;
  cucap_status st = cucap_stacktab_create(a->o.symbolize, &a->stacks);
  if (st == CUCAP_OK)
    st = az_scan(a, r);
  if (st == CUCAP_OK) {
    az_window(a);
    st = cucap_analysis_run(a);
  }
  if (st != CUCAP_OK) {
    cucap_analysis_destroy(a);
    return st;
  }
  *out = a;
  return CUCAP_OK;
}

void cucap_analysis_destroy(cucap_analysis *a) {
  if (!a)
    return;
  free(a->ev);
  free(a->launches);
  free(a->work_by_t0);
  cucap_map_free(&a->seq_ev);
  cucap_map_free(&a->stream_flags);
  cucap_strs_free(&a->names);
  cucap_stacktab_destroy(a->stacks);
  free(a->findings);
  free(a);
}

cucap_status cucap_analysis_set_gpu_time(cucap_analysis *a, uint64_t seq, uint64_t gpu_ns) {
  uint64_t v = 0;
  if (!seq || !cucap_map_get(&a->seq_ev, seq, &v) || !v)
    return CUCAP_ERR_NOT_FOUND;
  az_ev *e = &a->ev[v - 1];
  if (!e->gpu_ns && gpu_ns)
    a->sum.gpu_times++;
  e->gpu_ns = gpu_ns;
  return CUCAP_OK;
}

const cucap_analysis_summary *cucap_analysis_summary_get(const cucap_analysis *a) {
  return &a->sum;
}

size_t cucap_analysis_finding_count(const cucap_analysis *a) { return a->nfind; }

const cucap_finding *cucap_analysis_finding(const cucap_analysis *a, size_t i) {
  return i < a->nfind ? &a->findings[i] : NULL;
}

const char *const *cucap_analysis_stack(cucap_analysis *a, uint32_t stack, size_t *n,
                                        size_t *first_app) {
  return cucap_stacktab_frames(a->stacks, stack, n, first_app);
}

size_t cucap_analysis_launch_count(const cucap_analysis *a) { return a->nlaunch; }

cucap_status cucap_analysis_launch_get(const cucap_analysis *a, size_t i,
                                       cucap_analysis_launch *out) {
  if (i >= a->nlaunch)
    return CUCAP_ERR_NOT_FOUND;
  const az_launch *L = &a->launches[i];
  const az_ev *e = &a->ev[L->ev];
  memset(out, 0, sizeof *out);
  out->launch_index = L->launch_index;
  out->seq = L->seq;
  out->rec_index = L->rec_index;
  out->t_enter = e->t0;
  out->t_exit = e->t1;
  out->kernel = az_name(a, L->name);
  memcpy(out->grid, L->grid, sizeof out->grid);
  memcpy(out->block, L->block, sizeof out->block);
  out->shared_mem = L->smem;
  out->stream = e->stream == 1 && (e->flags & AZF_LEGACY) ? 0 : e->stream;
  out->stack = e->stack;
  out->tid = e->tid;
  return CUCAP_OK;
}
