/* profile_cupti.c - the CUPTI profiling backend of `cucap replay --profile`
 * (cucap_profiler.h): a thin adapter from the CUPTI engine (cucap_cupti.h,
 * profile/cupti/cupti_*.c) to the profile (cucap_profile.h). It replaces
 * profiler_stub.c.
 *
 * The engine runs its passes as a replay observer; when the replay is over,
 * finish() hands its results to the profile: kernel executions keyed by
 * launch_index (graph kernels by CUCAP_PROFILE_GRAPH_KEY(seq, position)),
 * their GPU start/end per timeline pass, copies/memsets/graph launches as
 * activities, metrics by name, PC samples per instruction and stall reason,
 * SASS metrics, and the section states with the engine's notes.
 *
 * Choices: the timeline covers the whole capture and the launch range
 * restricts metrics and PC sampling (the engine profiles one contiguous
 * window of launches); a kernel:REGEX range profiles every launch and keeps
 * the matching ones. Metric names the chip lacks are dropped (section
 * PARTIAL, named). When CUPTI cannot attach to the driver the replay goes
 * on with the CUDA-event timeline (cucap_evtimer) in the engine's place.
 * SASS metrics are summed over the window per instruction and attached to
 * the first sampled execution of that instruction's kernel. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_cupti.h"
#include "cucap_profiler.h"

struct cucap_profiler {
  cucap_replay_observer ob;      /* forwards to the engine or the fallback */
  cucap_cupti *e;
  const cucap_replay_observer *eo;
  cucap_evtimer *evt;            /* CUPTI could not attach: event timeline */
  const cucap_replay_observer *to;
  const cucap_replay_observer *cur;
  cucap_profile *p;
  cucap_profile_range *range;
  int metrics, pcs, sass;
  char *metrics_csv;
};

const char *cucap_profiler_backend_name(void) { return "cupti"; }

/* ---- the observer: the engine, or the event timer once attach failed --- */

static cucap_status pc_attach(void *u, cucap_replay_session *s) {
  cucap_profiler *P = u;
  cucap_status st = P->eo->attach(P->eo->user, s);
  if (st != CUCAP_OK || cucap_cupti_attached(P->e)) {
    P->cur = P->eo;
    return st;
  }
  /* soft attach failure: the engine noted why; time with CUDA events */
  if (cucap_evtimer_create(P->p, &P->evt) == CUCAP_OK) {
    P->to = cucap_evtimer_observer(P->evt);
    P->cur = P->to;
    if (P->to->attach)
      return P->to->attach(P->to->user, s);
  }
  return CUCAP_OK;
}
static cucap_status pc_begin(void *u, cucap_replay_session *s) {
  cucap_profiler *P = u;
  return P->cur && P->cur->begin ? P->cur->begin(P->cur->user, s) : CUCAP_OK;
}
static void pc_pass_begin(void *u, cucap_replay_session *s, unsigned pass) {
  cucap_profiler *P = u;
  if (P->cur && P->cur->pass_begin)
    P->cur->pass_begin(P->cur->user, s, pass);
}
static void pc_op_before(void *u, cucap_replay_session *s, const cucap_replay_op *op) {
  cucap_profiler *P = u;
  if (P->cur && P->cur->op_before)
    P->cur->op_before(P->cur->user, s, op);
}
static void pc_op_after(void *u, cucap_replay_session *s, const cucap_replay_op *op) {
  cucap_profiler *P = u;
  if (P->cur && P->cur->op_after)
    P->cur->op_after(P->cur->user, s, op);
}
static int pc_pass_end(void *u, cucap_replay_session *s, unsigned pass) {
  cucap_profiler *P = u;
  return P->cur && P->cur->pass_end ? P->cur->pass_end(P->cur->user, s, pass) : 0;
}
static void pc_end(void *u, cucap_replay_session *s, cucap_replay_report *rep) {
  cucap_profiler *P = u;
  /* the engine releases CUPTI here even when the fallback timed the run */
  if (P->eo->end)
    P->eo->end(P->eo->user, s, rep);
  if (P->cur == P->to && P->to && P->to->end)
    P->to->end(P->to->user, s, rep);
}

/* ---- create --------------------------------------------------------------- */

static void unavailable(const cucap_profiler_options *o, cucap_profile *out,
                        const char *why) {
  if (o->timeline)
    cucap_profile_set_section(out, CUCAP_PROFILE_TIMELINE, CUCAP_PROFILE_UNAVAILABLE, "",
                              "%s", why);
  if (o->metric_set != CUCAP_METRICS_NONE)
    cucap_profile_set_section(out, CUCAP_PROFILE_METRICS, CUCAP_PROFILE_UNAVAILABLE, "",
                              "%s", why);
  if (o->pc_sampling || o->sass_metrics)
    cucap_profile_set_section(out, CUCAP_PROFILE_PCSAMPLING, CUCAP_PROFILE_UNAVAILABLE, "",
                              "%s", why);
}

cucap_status cucap_profiler_create(const cucap_profiler_options *o, cucap_profile *out,
                                   cucap_profiler **prof) {
  *prof = NULL;
  char path[1024], tried[1024], msg[600];
  if (cucap_profiler_find_cupti(o->libcupti, path, sizeof path, tried, sizeof tried) !=
      CUCAP_OK) {
    snprintf(msg, sizeof msg, "CUPTI (libcupti.so) not found (looked in: %.400s): install "
             "the CUDA toolkit's CUPTI or pass --cupti /path/to/libcupti.so", tried);
    unavailable(o, out, msg);
    return CUCAP_ERR_UNSUPPORTED;
  }
  cucap_profiler *P = calloc(1, sizeof *P);
  if (!P)
    return CUCAP_ERR_NOMEM;
  P->p = out;
  P->range = o->range;
  P->metrics = o->metric_set != CUCAP_METRICS_NONE && o->nmetrics;
  P->pcs = o->pc_sampling;
  P->sass = o->sass_metrics;
  /* a named set goes to the engine by name, so both commands treat it
   * alike (names the chip lacks left out with a note); a list as names */
  const char *set = P->metrics ? cucap_metric_set_name(o->metric_set) : NULL;
  if (P->metrics && !set) {
    size_t len = 1;
    for (size_t i = 0; i < o->nmetrics; i++)
      len += strlen(o->metrics[i]) + 1;
    P->metrics_csv = malloc(len);
    if (!P->metrics_csv) {
      free(P);
      return CUCAP_ERR_NOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < o->nmetrics; i++)
      k += (size_t)sprintf(P->metrics_csv + k, "%s%s", i ? "," : "", o->metrics[i]);
  }
  cucap_cupti_options co;
  cucap_cupti_options_init(&co);
  co.library = path;
  co.timeline_passes = o->loops ? o->loops : 1;
  co.metrics = set ? set : P->metrics_csv;
  co.cache_flush = o->cache_flush;
  co.clock_control = o->clock_none ? CUCAP_CUPTI_CLOCK_NONE : CUCAP_CUPTI_CLOCK_BASE;
  co.pc_sampling = o->pc_sampling;
  co.sass_metrics = o->sass_metrics;
  co.timeline_all = 1;
  co.drop_unknown_metrics = 1;
  co.soft_attach = 1;
  if (o->range && o->range->kind == CUCAP_RANGE_LAUNCHES) {
    co.first_launch = o->range->first;
    co.launch_count = o->range->last == UINT64_MAX ? CUCAP_CUPTI_ALL_LAUNCHES
                                                   : o->range->last - o->range->first + 1;
  }
  cucap_status st = cucap_cupti_create(&co, &P->e, msg, sizeof msg);
  if (st == CUCAP_OK)
    st = cucap_cupti_load(P->e, msg, sizeof msg);
  if (st != CUCAP_OK) {
    unavailable(o, out, msg[0] ? msg : cucap_status_str(st));
    cucap_profiler_destroy(P);
    return CUCAP_ERR_UNSUPPORTED;
  }
  P->eo = cucap_cupti_observer(P->e);
  P->ob.name = "profile";
  P->ob.user = P;
  P->ob.attach = pc_attach;
  P->ob.begin = pc_begin;
  P->ob.pass_begin = pc_pass_begin;
  P->ob.op_before = pc_op_before;
  P->ob.op_after = pc_op_after;
  P->ob.pass_end = pc_pass_end;
  P->ob.end = pc_end;
  cucap_profile_set_section(out, CUCAP_PROFILE_TIMELINE, CUCAP_PROFILE_OK, "cupti-activity",
                            "CUPTI activity records (%s)", path);
  if (P->metrics)
    cucap_profile_set_section(out, CUCAP_PROFILE_METRICS, CUCAP_PROFILE_OK,
                              "cupti-range-profiler", "to be collected");
  if (P->pcs || P->sass)
    cucap_profile_set_section(out, CUCAP_PROFILE_PCSAMPLING, CUCAP_PROFILE_OK,
                              "cupti-pc-sampling", "to be collected");
  *prof = P;
  return CUCAP_OK;
}

const cucap_replay_observer *cucap_profiler_observer(cucap_profiler *P) {
  return P ? &P->ob : NULL;
}

/* ---- finish: the engine's results into the profile ------------------------ */

static uint64_t key_of(const cucap_cupti_kernel *k) {
  return k->launch_index != CUCAP_REPLAY_NO_LAUNCH ? k->launch_index
                                                   : CUCAP_PROFILE_GRAPH_KEY(k->seq, k->sub);
}

static void section(cucap_profiler *P, cucap_profile_section their,
                    cucap_cupti_section_id mine, const char *source, const char *extra) {
  const cucap_cupti_section *sc = cucap_cupti_section_get(P->e, mine);
  cucap_profile_state st;
  switch (sc->state) {
  case CUCAP_CUPTI_COLLECTED: st = CUCAP_PROFILE_OK; break;
  case CUCAP_CUPTI_PARTIAL: st = CUCAP_PROFILE_PARTIAL; break;
  case CUCAP_CUPTI_NOT_REQUESTED: return; /* what the CLI set stays */
  default: st = CUCAP_PROFILE_UNAVAILABLE; break;
  }
  cucap_profile_set_section(P->p, their, st, source, "%s%s", sc->note, extra ? extra : "");
}

/* "in.cuh:7 <- a.cu:42" (innermost first) -> "in.cuh:7;a.cu:42" */
static void chain(const char *in, char *out, size_t n) {
  size_t k = 0;
  out[0] = 0;
  for (const char *c = in; c && *c && k + 1 < n;) {
    if (!strncmp(c, " <- ", 4)) {
      out[k++] = ';';
      c += 4;
    } else {
      out[k++] = *c++;
    }
  }
  if (n)
    out[k < n ? k : n - 1] = 0;
}

static int wanted(cucap_profiler *P, uint64_t key, const char *name) {
  return !P->range || P->range->kind != CUCAP_RANGE_KERNEL ||
         cucap_profile_range_match(P->range, key, name);
}

static void fill_pc(const cucap_cupti_pc_site *s, cucap_profile_pc *pc, char *buf, size_t n) {
  memset(pc, 0, sizeof *pc);
  pc->function = s->function;
  pc->module_id = s->cubin_crc;
  pc->pc_offset = s->pc_offset;
  pc->sass = s->sass;
  pc->file = s->file;
  pc->line = s->line;
  if (s->inline_chain) {
    chain(s->inline_chain, buf, n);
    pc->inlined = buf;
  }
}

/* Every kernel of the engine's table: its launch, its timings per pass, and
 * its metrics where the range asks for it. */
static void finish_kernels(cucap_profiler *P, const cucap_cupti_kernel *K, size_t nk) {
  cucap_profile *p = P->p;
  const char *const *mn = NULL;
  size_t nm = cucap_cupti_metric_names(P->e, &mn);
  for (size_t i = 0; i < nk; i++) {
    const cucap_cupti_kernel *k = &K[i];
    uint64_t key = key_of(k);
    cucap_profile_launch_desc d;
    memset(&d, 0, sizeof d);
    d.key = key;
    d.seq = k->seq;
    d.kernel = k->name;
    memcpy(d.grid, k->grid, sizeof d.grid);
    memcpy(d.block, k->block, sizeof d.block);
    d.shared_mem = k->static_smem + k->dynamic_smem;
    d.stream = k->stream;
    d.callstack = k->callstack;
    cucap_profile_add_launch(p, &d); /* launches were declared: kept as is */
    const cucap_cupti_time *t = NULL;
    size_t nt = cucap_cupti_kernel_times(P->e, i, &t);
    for (size_t j = 0; j < nt; j++)
      cucap_profile_add_kernel_timing(p, key, t[j].pass, t[j].start_ns, t[j].end_ns);
    if (k->metrics && wanted(P, key, k->name))
      for (size_t j = 0; j < nm; j++)
        if (!isnan(k->metrics[j]))
          cucap_profile_add_metric(p, key, mn[j], k->metrics[j]);
  }
}

static void finish_graphs(cucap_profiler *P, const cucap_cupti_kernel *K, size_t nk) {
  cucap_profile *p = P->p;
  /* graph launches as a whole: first start to last end of their kernels */
  for (size_t i = 0; i < nk;) {
    size_t j = i;
    while (j < nk && K[j].rec_index == K[i].rec_index)
      j++;
    if (K[i].launch_index == CUCAP_REPLAY_NO_LAUNCH) {
      for (unsigned pass = 0; pass < CUCAP_REPLAY_MAX_PASSES; pass++) {
        uint64_t s = UINT64_MAX, e = 0;
        for (size_t x = i; x < j; x++) {
          const cucap_cupti_time *t = NULL;
          size_t nt = cucap_cupti_kernel_times(P->e, x, &t);
          for (size_t y = 0; y < nt; y++)
            if (t[y].pass == pass) {
              s = t[y].start_ns < s ? t[y].start_ns : s;
              e = t[y].end_ns > e ? t[y].end_ns : e;
            }
        }
        if (s == UINT64_MAX)
          break; /* timeline passes are the first ones */
        cucap_profile_activity a = {CUCAP_PROFILE_ACT_GRAPH, K[i].seq, K[i].rec_index,
                                    pass, s, e, 0, -1, K[i].stream};
        cucap_profile_add_activity(p, &a);
      }
    }
    i = j;
  }
}

/* Memcpy and memset activities, one per time measured. */
static void finish_copies(cucap_profiler *P) {
  cucap_profile *p = P->p;
  const cucap_cupti_copy *C = NULL;
  size_t nc = cucap_cupti_copies(P->e, &C);
  for (size_t i = 0; i < nc; i++) {
    const cucap_cupti_time *t = NULL;
    size_t nt = cucap_cupti_copy_times(P->e, i, &t);
    for (size_t j = 0; j < nt; j++) {
      cucap_profile_activity a = {
          C[i].is_memset ? CUCAP_PROFILE_ACT_MEMSET : CUCAP_PROFILE_ACT_MEMCPY,
          C[i].seq, C[i].rec_index, t[j].pass, t[j].start_ns, t[j].end_ns, C[i].bytes,
          C[i].is_memset ? -1 : C[i].rec_copy_kind, C[i].stream};
      cucap_profile_add_activity(p, &a);
    }
  }
}

/* PC samples and SASS metrics; returns the number of sampled instructions
 * that have SASS metrics. */
static size_t finish_pcs(cucap_profiler *P, const cucap_cupti_kernel *K, size_t nk) {
  cucap_profile *p = P->p;
  /* PC samples; the first sampled execution of each instruction */
  const cucap_cupti_pc_site *S = NULL;
  size_t ns = cucap_cupti_pc_sites(P->e, &S);
  const cucap_cupti_pc_sample *R = NULL;
  size_t nr = cucap_cupti_pc_samples(P->e, &R);
  const char *const *stall = NULL;
  size_t nstall = cucap_cupti_stall_names(P->e, &stall);
  uint64_t *first = malloc((ns ? ns : 1) * sizeof *first);
  for (size_t i = 0; first && i < ns; i++)
    first[i] = UINT64_MAX;
  char ibuf[1024];
  for (size_t i = 0; i < nr; i++) {
    if (R[i].kernel >= nk || R[i].site >= ns)
      continue;
    uint64_t key = key_of(&K[R[i].kernel]);
    if (!wanted(P, key, K[R[i].kernel].name))
      continue;
    cucap_profile_pc pc;
    fill_pc(&S[R[i].site], &pc, ibuf, sizeof ibuf);
    cucap_profile_add_pc_sample(p, key, &pc, R[i].stall < nstall ? stall[R[i].stall] : NULL,
                                R[i].count);
    if (first && first[R[i].site] == UINT64_MAX)
      first[R[i].site] = key;
  }
  size_t sass_sites = 0;
  for (size_t i = 0; first && i < ns; i++) {
    if (first[i] == UINT64_MAX || S[i].inst_executed == UINT64_MAX)
      continue;
    cucap_profile_pc pc;
    fill_pc(&S[i], &pc, ibuf, sizeof ibuf);
    cucap_profile_add_sass_metric(p, first[i], &pc, "smsp__sass_inst_executed",
                                  (double)S[i].inst_executed);
    if (S[i].thread_inst_executed != UINT64_MAX)
      cucap_profile_add_sass_metric(p, first[i], &pc, "smsp__sass_thread_inst_executed",
                                    (double)S[i].thread_inst_executed);
    if (S[i].mem_sectors != UINT64_MAX)
      cucap_profile_add_sass_metric(p, first[i], &pc, "smsp__sass_sectors_mem_global",
                                    (double)S[i].mem_sectors);
    sass_sites++;
  }
  free(first);
  return sass_sites;
}

static void finish_sections(cucap_profiler *P, size_t sass_sites) {
  cucap_profile *p = P->p;
  /* sections */
  section(P, CUCAP_PROFILE_TIMELINE, CUCAP_CUPTI_TIMELINE, "cupti-activity", NULL);
  section(P, CUCAP_PROFILE_METRICS, CUCAP_CUPTI_METRICS, "cupti-range-profiler", NULL);
  const cucap_cupti_section *ps = cucap_cupti_section_get(P->e, CUCAP_CUPTI_PCSAMPLING);
  const cucap_cupti_section *ss = cucap_cupti_section_get(P->e, CUCAP_CUPTI_SASS);
  char extra[1200] = "";
  if (P->sass)
    snprintf(extra, sizeof extra, "; SASS metrics (%zu sampled instructions, summed over "
             "the window, on each instruction's first sampled launch): %s", sass_sites,
             ss->note);
  if (P->pcs) {
    section(P, CUCAP_PROFILE_PCSAMPLING, CUCAP_CUPTI_PCSAMPLING, "cupti-pc-sampling", extra);
    if (P->sass && ps->state == CUCAP_CUPTI_COLLECTED && ss->state != CUCAP_CUPTI_COLLECTED)
      cucap_profile_set_section(p, CUCAP_PROFILE_PCSAMPLING, CUCAP_PROFILE_PARTIAL,
                                "cupti-pc-sampling", "%s%s", ps->note, extra);
  } else if (P->sass) {
    section(P, CUCAP_PROFILE_PCSAMPLING, CUCAP_CUPTI_SASS, "cupti-sass-metrics",
            sass_sites ? NULL : " (SASS metrics are joined to PC samples: add --pc-sampling)");
  }
}

cucap_status cucap_profiler_finish(cucap_profiler *P) {
  if (!P)
    return CUCAP_ERR_INVALID_ARG;
  cucap_profile *p = P->p;
  cucap_profile_info in = *cucap_profile_info_get(p);
  const cucap_cupti_env *env = cucap_cupti_env_get(P->e);
  in.cupti_version = env->version;
  unsigned passes = 0;
  for (int i = 0; i < CUCAP_CUPTI_NSECTIONS; i++)
    passes += cucap_cupti_section_get(P->e, (cucap_cupti_section_id)i)->passes;
  if (passes)
    in.passes = passes;
  if (!in.device[0] && env->device[0]) { /* the replay device, when unknown */
    snprintf(in.device, sizeof in.device, "%s", env->device);
    in.cc_major = env->cc_major;
    in.cc_minor = env->cc_minor;
    in.sm_count = env->sm_count;
    in.driver_version = env->driver_version;
  }
  if (P->evt) { /* CUPTI did not attach: the event timer timed the run */
    cucap_evtimer_finish(P->evt);
    snprintf(in.backend, sizeof in.backend, "cuda-events");
    cucap_profile_set_info(p, &in);
    const char *why = cucap_cupti_section_get(P->e, CUCAP_CUPTI_TIMELINE)->note;
    if (P->metrics)
      cucap_profile_set_section(p, CUCAP_PROFILE_METRICS, CUCAP_PROFILE_UNAVAILABLE, "",
                                "%s", why);
    if (P->pcs || P->sass)
      cucap_profile_set_section(p, CUCAP_PROFILE_PCSAMPLING, CUCAP_PROFILE_UNAVAILABLE, "",
                                "%s", why);
    return CUCAP_OK;
  }
  snprintf(in.backend, sizeof in.backend, "cupti");
  cucap_profile_set_info(p, &in);

  const cucap_cupti_kernel *K = NULL;
  size_t nk = cucap_cupti_kernels(P->e, &K);
  finish_kernels(P, K, nk);
  finish_graphs(P, K, nk);
  finish_copies(P);
  size_t sass_sites = finish_pcs(P, K, nk);
  finish_sections(P, sass_sites);
  return CUCAP_OK;
}

void cucap_profiler_destroy(cucap_profiler *P) {
  if (!P)
    return;
  cucap_cupti_destroy(P->e);
  cucap_evtimer_destroy(P->evt);
  free(P->metrics_csv);
  free(P);
}

/* ---- doctor --------------------------------------------------------------- */

static cucap_probe_state probe_state(int s) {
  switch (s) {
  case CUCAP_CUPTI_CHECK_OK: return CUCAP_PROBE_OK;
  case CUCAP_CUPTI_CHECK_DENIED: return CUCAP_PROBE_DENIED;
  case CUCAP_CUPTI_CHECK_UNAVAILABLE: return CUCAP_PROBE_UNAVAILABLE;
  default: return CUCAP_PROBE_UNKNOWN;
  }
}

cucap_status cucap_profiler_probe_run(const cucap_profiler_probe_options *o,
                                      cucap_profiler_probe *out) {
  memset(out, 0, sizeof *out);
  cucap_cupti_check c;
  cucap_cupti_check_run(o ? o->libcuda : NULL, o ? o->libcupti : NULL, o ? o->device : 0, &c);
  out->activity = probe_state(c.activity);
  out->counters = probe_state(c.counters);
  out->pc_sampling = probe_state(c.pc_sampling);
  out->sass_metrics = probe_state(c.sass_metrics);
  snprintf(out->activity_msg, sizeof out->activity_msg, "%s", c.activity_msg);
  snprintf(out->counters_msg, sizeof out->counters_msg, "%s", c.counters_msg);
  snprintf(out->pc_sampling_msg, sizeof out->pc_sampling_msg, "%s", c.pc_sampling_msg);
  snprintf(out->sass_metrics_msg, sizeof out->sass_metrics_msg, "%s", c.sass_metrics_msg);
  out->cupti_version = c.version;
  return CUCAP_OK;
}
