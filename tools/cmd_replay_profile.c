/* cmd_replay_profile.c - `cucap replay --profile`: runs the replay with the
 * profiling backend (profile/cucap_profiler.h) and writes the profile
 * (profile/cucap_profile.h): terminal report, --json, --folded, --profile-out.
 * The program diagnosis (cucap analyze) is part of every profile; without
 * a backend the CUDA-event timeline stands in, and every section that
 * could not be collected says why and what to change. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cucap_analyze.h"
#include "cucap_cli.h"
#include "cucap_json.h"
#include "cucap_profile.h"
#include "cucap_profiler.h"
#include "cucap_replay.h"
#include "cucap_verify.h"
#include "cucap_replay_observer.h"

typedef struct seq_dur {
  uint64_t seq, d;
} seq_dur;

static int cmp_seq_dur(const void *x, const void *y) {
  const seq_dur *a = x, *b = y;
  if (a->seq != b->seq)
    return a->seq < b->seq ? -1 : 1;
  return a->d < b->d ? -1 : a->d > b->d;
}

/* median GPU duration per seq of the copies/memsets/graph launches */
static void activity_times(cucap_profile *p, cucap_analysis *a) {
  size_t n = cucap_profile_activity_count(p);
  seq_dur *v = malloc((n ? n : 1) * sizeof *v);
  if (!v)
    return;
  for (size_t i = 0; i < n; i++) {
    const cucap_profile_activity *x = cucap_profile_activity_at(p, i);
    v[i] = (seq_dur){x->seq, x->end_ns - x->start_ns};
  }
  qsort(v, n, sizeof *v, cmp_seq_dur);
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && v[j].seq == v[i].seq)
      j++;
    cucap_analysis_set_gpu_time(a, v[i].seq, v[i + (j - i) / 2].d ? v[i + (j - i) / 2].d : 1);
    i = j;
  }
  free(v);
}

/* the analysis again with the measured GPU durations, into the profile */
static void reanalyse(cucap_profile *p, cucap_analysis *a) {
  size_t nl = cucap_profile_launch_count(p);
  for (size_t i = 0; i < nl; i++) {
    const cucap_profile_launch *l = cucap_profile_launch_at(p, i);
    if (l->ntimings && !CUCAP_PROFILE_KEY_IS_GRAPH(l->key))
      cucap_analysis_set_gpu_time(a, l->seq, l->median_ns ? l->median_ns : 1);
  }
  activity_times(p, a);
  if (cucap_analysis_summary_get(a)->gpu_times) {
    cucap_analysis_run(a);
    cucap_profile_clear_findings(p);
    cucap_profile_add_analysis(p, a);
  }
}

static int parse_metrics(const char *s, cucap_profiler_options *po, char ***owned) {
  *owned = NULL;
  po->metric_set = cucap_metric_set_from_name(s);
  if (po->metric_set != CUCAP_METRICS_LIST) {
    po->metrics = cucap_metric_set_names(po->metric_set, &po->nmetrics);
    return 0;
  }
  size_t n = 1;
  for (const char *c = s; *c; c++)
    n += *c == ',';
  char **v = calloc(n + 1, sizeof *v);
  char *copy = strdup(s);
  if (!v || !copy) {
    free(v);
    free(copy);
    return -1;
  }
  size_t k = 0;
  char *save = NULL;
  for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
    if (*t && !(v[k++] = strdup(t)))
      break;
  free(copy);
  if (!k) {
    free(v);
    return -1;
  }
  po->metric_set = CUCAP_METRICS_LIST;
  po->metrics = (const char *const *)v;
  po->nmetrics = k;
  *owned = v;
  return 0;
}

/* What the phases of a profiled replay share, freed by profile_run_free. */
typedef struct profile_run {
  cucap_analysis *a;
  cucap_profile *p;
  cucap_profiler *prof;
  cucap_evtimer *evt;
  char **owned; /* --metrics=a,b,c names */
  cucap_profile_range range;
  const cucap_replay_observer *obs[4]; /* the verifier's goes first, the progress line's last */
  size_t nobs;
  unsigned loops;    /* the profile's passes over the capture (--loop, at least 1) */
  uint64_t launches; /* in the capture */
} profile_run;

/* 1. the capture: launches, callstacks, program findings. Returns
 * CUCAP_EXIT_OK or the exit code (after the error line). */
static int profile_from_capture(profile_run *s, const char *path,
                                const cucap_replay_options *ro,
                                const cucap_cli_profile_args *pa) {
  cucap_reader *r = NULL;
  int rc = cucap_cli_open("replay", path, &r);
  if (rc != CUCAP_EXIT_OK)
    return rc;
  cucap_analyze_options ao;
  cucap_analyze_options_init(&ao);
  ao.in_profile = 1;
  cucap_status st = cucap_analysis_create(r, &ao, &s->a);
  if (st == CUCAP_OK)
    st = cucap_profile_create(&s->p);
  if (st == CUCAP_OK)
    st = cucap_profile_add_analysis(s->p, s->a);
  if (st != CUCAP_OK) {
    cucap_cli_error("replay", path, "profile: %s", cucap_status_str(st));
    cucap_reader_destroy(r);
    return cucap_cli_exit_code(st);
  }
  cucap_profile_info in = *cucap_profile_info_get(s->p);
  const cucap_analysis_summary *sm = cucap_analysis_summary_get(s->a);
  snprintf(in.capture_path, sizeof in.capture_path, "%s", path);
  cucap_profile_capture_id(r, in.capture_id);
  in.capture_records = sm->records;
  in.capture_launches = sm->launches;
  in.loops = ro->loops ? ro->loops : 1;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  in.created_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  snprintf(in.cache_mode, sizeof in.cache_mode, "%s", pa->cache_keep ? "keep" : "flush");
  snprintf(in.metric_set, sizeof in.metric_set, "%s", pa->metrics ? pa->metrics : "sol");
  snprintf(in.range, sizeof in.range, "%s", pa->range ? pa->range : "");
  cucap_profile_set_info(s->p, &in);
  s->loops = in.loops;
  s->launches = sm->launches;
  cucap_reader_destroy(r);
  return CUCAP_EXIT_OK;
}

/* 2. the backend, and the CUDA-event timeline when it has none; sets the
 * replay's observers. Returns CUCAP_EXIT_OK or CUCAP_EXIT_USAGE (bad
 * --metrics or --range, after the error line). */
static int profile_backend(profile_run *s, cucap_replay_options *ro,
                           const cucap_cli_profile_args *pa) {
  cucap_profile *p = s->p;
  cucap_profiler_options po;
  cucap_profiler_options_init(&po);
  char msg[300];
  if (pa->metrics && parse_metrics(pa->metrics, &po, &s->owned) != 0) {
    cucap_cli_error("replay", NULL, "--metrics=%s: expected sol, full, none or a,b,c",
                    pa->metrics);
    return CUCAP_EXIT_USAGE;
  }
  if (cucap_profile_range_parse(pa->range, &s->range, msg, sizeof msg) != CUCAP_OK) {
    cucap_cli_error("replay", NULL, "%s", msg);
    return CUCAP_EXIT_USAGE;
  }
  po.libcupti = pa->cupti;
  po.cache_flush = !pa->cache_keep;
  po.clock_none = pa->clock_none;
  po.range = &s->range;
  po.loops = s->loops;
  po.pc_sampling = pa->pc_sampling;
  po.sass_metrics = pa->sass_metrics;
  po.device = ro->device;
  po.launches = s->launches;
  if (po.metric_set == CUCAP_METRICS_NONE)
    cucap_profile_set_section(p, CUCAP_PROFILE_METRICS, CUCAP_PROFILE_NOT_REQUESTED, "",
                              "--metrics=none");
  if (!po.pc_sampling && !po.sass_metrics)
    cucap_profile_set_section(p, CUCAP_PROFILE_PCSAMPLING, CUCAP_PROFILE_NOT_REQUESTED, "",
                              "add --pc-sampling for instruction-level stacks");
  if (cucap_profiler_create(&po, p, &s->prof) == CUCAP_OK && s->prof)
    s->obs[s->nobs++] = cucap_profiler_observer(s->prof);
  cucap_profile_state tl;
  cucap_profile_get_section(p, CUCAP_PROFILE_TIMELINE, &tl, NULL, NULL);
  if (tl != CUCAP_PROFILE_OK) { /* no backend timeline: CUDA events */
    const char *why;
    cucap_profile_get_section(p, CUCAP_PROFILE_TIMELINE, NULL, NULL, &why);
    if (why && *why)
      fprintf(stderr, "cucap replay: profile: %s\n", why);
    if (cucap_evtimer_create(p, &s->evt) == CUCAP_OK)
      s->obs[s->nobs++] = cucap_evtimer_observer(s->evt);
  }
  ro->observers = s->obs;
  ro->nobservers = s->nobs;
  if (!ro->loops)
    ro->loops = 1;
  return CUCAP_EXIT_OK;
}

/* 3. the replay, with the verifier when asked for; then the profile's passes
 * and backend, and the findings again with the measured GPU times. */
static cucap_status profile_replay(profile_run *s, const char *path, cucap_replay_options *ro,
                                   const cucap_verify_options *vo, cucap_replay_report *rep,
                                   cucap_verify_report *vr, int quiet) {
  memset(vr, 0, sizeof *vr);
  cucap_verify *ver = NULL;
  cucap_cli_progress *prog = cucap_cli_progress_create("replay --profile", quiet);
  if (cucap_cli_verify_attach(ro, vo, s->obs, &ver) == CUCAP_OK) {
    /* last, after the verifier counted the observers it shares the run
     * with; no pass count: the profiler plans its passes as it goes */
    if (prog)
      s->obs[ro->nobservers++] = cucap_cli_progress_observer(prog, 0);
    ro->observers = s->obs;
    cucap_replay_run(path, ro, rep);
  } else {
    cucap_cli_replay_nomem(rep, vr, vo);
  }
  cucap_cli_progress_destroy(prog);
  if (ver)
    *vr = *cucap_verify_get_report(ver);
  cucap_verify_destroy(ver);
  cucap_status rst = cucap_cli_replay_status(rep, vr);
  if (s->prof)
    cucap_profiler_finish(s->prof);
  if (s->evt)
    cucap_evtimer_finish(s->evt);
  cucap_profile_info in = *cucap_profile_info_get(s->p);
  if (!in.passes)
    in.passes = rep->loops;
  if (!strcmp(in.backend, "none") && s->evt)
    snprintf(in.backend, sizeof in.backend, "%s", s->prof ? cucap_profiler_backend_name()
                                                          : "cuda-events");
  cucap_profile_set_info(s->p, &in);
  reanalyse(s->p, s->a);
  return rst;
}

/* 4. outputs: the report (text or --json), --folded, --profile-out; returns
 * the exit code. */
static int profile_outputs(profile_run *s, const char *path, const cucap_cli_profile_args *pa,
                           const cucap_replay_report *rep, const cucap_verify_report *vr,
                           cucap_status rst) {
  cucap_profile *p = s->p;
  int rc = cucap_cli_exit_code(rst);
  if (pa->json) {
    fputs("{\"replay\":", stdout);
    cucap_cli_replay_print(rep, vr, rst, stdout, 1);
    fputs(",\"profile\":", stdout);
    cucap_json *w = cucap_json_create_file(stdout, 0);
    if (!w || cucap_profile_write_json(p, w) != CUCAP_OK)
      rc = CUCAP_EXIT_IO;
    cucap_json_destroy(w);
    fputs("}\n", stdout);
  } else if (!pa->quiet) {
    if (rep->loops || !rep->error[0])
      cucap_cli_replay_print(rep, vr, rst, stdout, 0);
    fputc('\n', stdout);
    cucap_profile_print_options popt;
    cucap_profile_print_options_init(&popt);
    if (pa->top)
      popt.top_kernels = pa->top;
    cucap_profile_print(p, stdout, &popt);
  }
  if (pa->folded) {
    /* written beside the old file and renamed over it once complete */
    cucap_cli_output tmp;
    FILE *f = NULL;
    size_t lines = 0;
    int orc = cucap_cli_output_begin("replay", pa->folded, &tmp);
    if (orc == CUCAP_EXIT_OK && (!(f = fdopen(dup(tmp.fd), "w")) ||
                                 cucap_profile_write_folded(p, f, &lines) != CUCAP_OK ||
                                 fclose(f) != 0)) {
      cucap_cli_error("replay", pa->folded, "cannot write the folded stacks");
      cucap_cli_output_abort(&tmp);
      orc = CUCAP_EXIT_IO;
    } else if (orc == CUCAP_EXIT_OK) {
      orc = cucap_cli_output_commit("replay", pa->folded, &tmp);
    }
    if (orc != CUCAP_EXIT_OK) {
      rc = CUCAP_EXIT_IO;
    } else if (!pa->quiet && !pa->json) {
      printf("folded stacks: %s (%zu lines)\n", pa->folded, lines);
    }
  }
  if (pa->out) {
    cucap_cli_output tmp;
    int orc = cucap_cli_output_begin("replay", pa->out, &tmp);
    if (orc == CUCAP_EXIT_OK) {
      cucap_status st = cucap_profile_save(p, tmp.tmp);
      if (st != CUCAP_OK) {
        cucap_cli_error("replay", pa->out, "cannot write the profile: %s", cucap_status_str(st));
        cucap_cli_output_abort(&tmp);
        orc = CUCAP_EXIT_IO;
      } else {
        orc = cucap_cli_output_commit("replay", pa->out, &tmp);
      }
    }
    if (orc != CUCAP_EXIT_OK) {
      rc = CUCAP_EXIT_IO;
    } else if (!pa->quiet && !pa->json) {
      printf("profile: %s\n", pa->out);
    }
  }
  if (fflush(stdout) != 0 || ferror(stdout))
    rc = CUCAP_EXIT_IO;
  if (rep->error[0])
    cucap_cli_error("replay", path, "%s", rep->error);
  else if (vr->mismatches)
    cucap_cli_error("replay", path, "verification failed: %s", vr->first_mismatch);
  return rc;
}

static void profile_run_free(profile_run *s) {
  cucap_profiler_destroy(s->prof);
  cucap_evtimer_destroy(s->evt);
  cucap_profile_range_free(&s->range);
  if (s->owned) {
    for (size_t i = 0; s->owned[i]; i++)
      free(s->owned[i]);
    free(s->owned);
  }
  cucap_profile_destroy(s->p);
  cucap_analysis_destroy(s->a);
}

int cucap_cli_replay_profile(const char *path, cucap_replay_options *ro,
                             const cucap_verify_options *vo, const cucap_cli_profile_args *pa) {
  profile_run s;
  memset(&s, 0, sizeof s);
  int rc = profile_from_capture(&s, path, ro, pa);
  if (rc == CUCAP_EXIT_OK)
    rc = profile_backend(&s, ro, pa);
  if (rc == CUCAP_EXIT_OK) {
    cucap_replay_report rep;
    cucap_verify_report vr;
    cucap_status rst = profile_replay(&s, path, ro, vo, &rep, &vr, pa->quiet);
    rc = profile_outputs(&s, path, pa, &rep, &vr, rst);
    cucap_cli_replay_warn(path, vo, &rep, &vr);
  }
  profile_run_free(&s);
  return rc;
}
