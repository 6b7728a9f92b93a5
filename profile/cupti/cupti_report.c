/* cupti_report.c - what the CUPTI engine hands out: host callstacks of the
 * capture (symbolized like `cucap dump`), per-kernel summaries (diagnosis
 * inputs: time, top stall reasons, hottest source lines), and the engine's
 * own writers: a terminal table, one JSON object and folded stacks
 * `host frames;kernel;source lines;pc sass count`. */
#include <dlfcn.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_sort.h"
#include "cucap_json.h"
#include "cucap_log.h"
#include "cucap_schema.h"
#include "cupti_internal.h"

/* ------------------------------------------------------------ stacks */

/* The engine's report part (ck_report in cupti_internal.h). */
struct ck_report {
  /* host callstacks: the first pass feeds the Callstack and ModuleMap
   * records to a stack table (cucap_stacktab.h), which copies them and
   * symbolizes a stack when it is first asked for: symbolizing inside the
   * timeline pass put ~0.5 s of host gaps between its launches (torch_mlp,
   * 104 stacks, run Q). After that pass a thread of its own symbolizes
   * every stack while the other passes run (ck_stacks_warm_start); the
   * stack table is touched by nothing else until ck_stacks_warm_join. */
  cucap_stacktab *stab;
  uint32_t *stack_ids;       /* the ids fed, in file order (JSON) */
  size_t nstack_ids, capstack_ids;
  pthread_t warm_th;
  int warm_on;               /* warm_th runs or has not been joined */
  double warm_s;             /* its wall time */

  /* summaries (built lazily) */
  cucap_cupti_kernel_summary *sum;
  size_t nsum;
};

/* E's report part, made on first use; NULL when memory ran out. */
static ck_report *ck_rep(ck_engine *E) {
  if (!E->rep)
    E->rep = calloc(1, sizeof *E->rep);
  return E->rep;
}

void ck_stack_feed(ck_engine *E, const void *record) {
  ck_report *R = ck_rep(E);
  if (!R)
    return;
  if (!R->stab && cucap_stacktab_create(1, &R->stab) != CUCAP_OK)
    return;
  const cucap_fb_record *rec = record;
  const cucap_fb_callstack *cs =
      cucap_fb_record_body_type(rec) == CUCAP_FB_BODY_CALLSTACK
          ? cucap_fb_record_body_as_callstack(rec)
          : NULL;
  uint32_t id = cs ? cucap_fb_callstack_id(cs) : 0;
  int had = id && cucap_stacktab_known(R->stab, id);
  cucap_stacktab_feed(R->stab, record);
  if (!id || had || !cucap_stacktab_known(R->stab, id))
    return;
  /* formatted with the module map of the moment the stack was recorded */
  cucap_stacktab_use(R->stab, id);
  if (cucap_vec_reserve(&R->stack_ids, &R->capstack_ids, R->nstack_ids + 1, sizeof *R->stack_ids, 16))
    R->stack_ids[R->nstack_ids++] = id;
}

static void *ck_stacks_warm_main(void *u) {
  ck_report *R = u;
  double t0 = cucap_clock_now_s();
  for (size_t i = 0; i < R->nstack_ids; i++) {
    size_t n = 0;
    (void)cucap_stacktab_frames(R->stab, R->stack_ids[i], &n, NULL);
  }
  R->warm_s = cucap_clock_now_s() - t0;
  return NULL;
}

void ck_stacks_warm_start(ck_engine *E) {
  ck_report *R = E->rep;
  if (!R || R->warm_on || !R->stab || !R->nstack_ids)
    return;
  R->warm_on = pthread_create(&R->warm_th, NULL, ck_stacks_warm_main, R) == 0;
}

void ck_stacks_warm_join(ck_engine *E) {
  ck_report *R = E->rep;
  if (!R || !R->warm_on)
    return;
  double t0 = cucap_clock_now_s();
  pthread_join(R->warm_th, NULL);
  R->warm_on = 0;
  CUCAP_DEBUG("profile: %zu host callstack(s) symbolized in %.3f s beside the "
              "passes (%.3f s waited for at the end)", R->nstack_ids,
              R->warm_s, cucap_clock_now_s() - t0);
}

size_t cucap_cupti_callstack(cucap_cupti *e, uint32_t id,
                             const char *const **out) {
  size_t n = 0;
  ck_stacks_warm_join(e);
  *out = e->rep && e->rep->stab
             ? cucap_stacktab_frames(e->rep->stab, id, &n, NULL)
             : NULL;
  return *out ? n : 0;
}

void ck_report_free(ck_engine *E) {
  ck_report *R = E->rep;
  if (!R)
    return;
  ck_stacks_warm_join(E);
  cucap_stacktab_destroy(R->stab);
  free(R->stack_ids);
  free(R->sum);
  free(R);
  E->rep = NULL;
}

/* ------------------------------------------------------------ summaries */

typedef char *(*ck_demangle_fn)(const char *, char *, size_t *, int *);

/* libstdc++'s demangler when the process has it (CUPTI pulls it in);
 * the mangled name otherwise. */
static const char *ck_pretty(ck_engine *E, const char *name) {
  static ck_demangle_fn dm;
  static int looked;
  if (!looked) {
    dm = (ck_demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
    looked = 1;
  }
  if (!dm || !name || name[0] != '_' || name[1] != 'Z')
    return name;
  int st = 0;
  char *d = dm(name, NULL, NULL, &st);
  if (!d || st)
    return name;
  const char *r = ck_intern(&E->str, d);
  free(d);
  return r ? r : name;
}

static int ck_hot_cmp(const void *a, const void *b) {
  const cucap_cupti_hot *x = a, *y = b;
  return x->samples < y->samples ? 1 : x->samples > y->samples ? -1 : 0;
}

static int ck_sum_cmp(const void *a, const void *b) {
  const cucap_cupti_kernel_summary *x = a, *y = b;
  return x->total_ns < y->total_ns ? 1 : x->total_ns > y->total_ns ? -1 : 0;
}

/* Keeps the CUCAP_CUPTI_TOP largest of a (what -> samples) tally. */
static void ck_top(cucap_cupti_hot *all, size_t n, cucap_cupti_hot *out,
                   unsigned *nout) {
  cucap_sort(all, n, sizeof *all, ck_hot_cmp);
  *nout = 0;
  for (size_t i = 0; i < n && *nout < CUCAP_CUPTI_TOP; i++)
    if (all[i].samples)
      out[(*nout)++] = all[i];
}

/* cucap_cupti_summaries: the hottest source lines of each of the ns
 * summaries (kslot: the summary of each kernel). */
static void ck_sum_lines(ck_engine *E, cucap_cupti_kernel_summary *sum,
                         size_t ns, const uint32_t *kslot) {
  /* lines: tally per (summary, "file:line") */
  cucap_map lines;
  memset(&lines, 0, sizeof lines);
  cucap_cupti_hot *lt = calloc(E->pc.nsamp + 1, sizeof *lt);
  uint32_t *lsl = calloc(E->pc.nsamp + 1, sizeof *lsl);
  size_t nl = 0;
  for (size_t i = 0; lt && lsl && i < E->pc.nsamp; i++) {
    const cucap_cupti_pc_sample *s = &E->pc.samp[i];
    if (s->kernel >= E->tl.nkern || s->site >= E->pc.nsite)
      continue;
    const cucap_cupti_pc_site *st = &E->pc.site[s->site];
    if (!st->file)
      continue;
    char buf[1200];
    snprintf(buf, sizeof buf, "%s:%u", st->file, st->line);
    const char *key = ck_intern(&E->str, buf);
    uint32_t sl = kslot[s->kernel];
    uint64_t h = ((uint64_t)(uintptr_t)key) * 31 + sl, v = 0;
    if (!cucap_map_get(&lines, h, &v)) {
      lt[nl] = (cucap_cupti_hot){key, 0};
      lsl[nl] = sl;
      v = ++nl;
      cucap_map_put(&lines, h, v);
    }
    lt[v - 1].samples += s->count;
  }
  if (lt && lsl) {
    cucap_cupti_hot *buf = calloc(nl + 1, sizeof *buf);
    for (size_t sl = 0; buf && sl < ns; sl++) {
      size_t n = 0;
      for (size_t j = 0; j < nl; j++)
        if (lsl[j] == sl)
          buf[n++] = lt[j];
      ck_top(buf, n, sum[sl].lines, &sum[sl].nlines);
    }
    free(buf);
  }
  cucap_map_free(&lines);
  free(lt);
  free(lsl);
}

size_t cucap_cupti_summaries(cucap_cupti *E,
                             const cucap_cupti_kernel_summary **out) {
  ck_report *R = ck_rep(E);
  *out = NULL;
  if (!R)
    return 0;
  if (R->sum) {
    *out = R->sum;
    return R->nsum;
  }
  cucap_map byname;
  memset(&byname, 0, sizeof byname);
  cucap_cupti_kernel_summary *sum = calloc(E->tl.nkern ? E->tl.nkern : 1, sizeof *sum);
  uint32_t *kslot = calloc(E->tl.nkern ? E->tl.nkern : 1, sizeof *kslot);
  if (!sum || !kslot) {
    free(sum);
    free(kslot);
    return 0;
  }
  size_t ns = 0;
  for (size_t k = 0; k < E->tl.nkern; k++) {
    uint64_t v = 0;
    const char *nm = E->tl.kern[k].name;
    if (!cucap_map_get(&byname, (uint64_t)(uintptr_t)nm, &v)) {
      v = ++ns;
      cucap_map_put(&byname, (uint64_t)(uintptr_t)nm, v);
      sum[v - 1].name = nm;
    }
    kslot[k] = (uint32_t)(v - 1);
    sum[v - 1].executions++;
    if (!isnan(E->tl.kern[k].dur_median_ns))
      sum[v - 1].total_ns += E->tl.kern[k].dur_median_ns;
  }
  /* stalls and lines per summary */
  size_t ntal = E->pc.nstall + 1;
  uint64_t *stall = calloc(ns * ntal + 1, sizeof *stall);
  cucap_cupti_hot *tmp = calloc(E->pc.nstall + E->pc.nsite + 1, sizeof *tmp);
  if (stall && tmp) {
    for (size_t i = 0; i < E->pc.nsamp; i++) {
      const cucap_cupti_pc_sample *s = &E->pc.samp[i];
      if (s->kernel >= E->tl.nkern)
        continue;
      uint32_t sl = kslot[s->kernel];
      sum[sl].samples += s->count;
      if (s->stall < E->pc.nstall)
        stall[(size_t)sl * ntal + s->stall] += s->count;
    }
    for (size_t sl = 0; sl < ns; sl++) {
      size_t n = 0;
      for (size_t j = 0; j < E->pc.nstall; j++)
        tmp[n++] = (cucap_cupti_hot){E->pc.stall[j], stall[sl * ntal + j]};
      ck_top(tmp, n, sum[sl].stalls, &sum[sl].nstalls);
    }
    ck_sum_lines(E, sum, ns, kslot);
  }
  free(stall);
  free(tmp);
  free(kslot);
  cucap_map_free(&byname);
  cucap_sort(sum, ns, sizeof *sum, ck_sum_cmp);
  R->sum = sum;
  R->nsum = ns;
  *out = sum;
  return ns;
}

/* ------------------------------------------------------------ text */

static int ck_metric_col(const ck_engine *E, const char *name) {
  if (!E->mt.mvals)
    return -1;
  for (size_t j = 0; j < E->mt.nmnames; j++)
    if (!strcmp(E->mt.mnames[j], name))
      return (int)j;
  return -1;
}

static const char *ck_state_name(int st) {
  static const char *const n[] = {"not requested", "collected", "partial",
                                  "unavailable", "failed"};
  return st >= 0 && st <= 4 ? n[st] : "?";
}

void cucap_cupti_print_report(cucap_cupti *E, FILE *f, unsigned top) {
  const cucap_cupti_env *env = &E->env;
  fprintf(f, "profile: CUPTI %u (%s)%s%s, counters %s%s%s\n", env->version,
          env->library[0] ? env->library : "not loaded",
          env->chip[0] ? ", chip " : "", env->chip,
          env->counters_allowed < 0 ? "not checked"
          : env->counters_allowed ? "allowed" : "REFUSED",
          env->clocks[0] ? ", clocks " : "", env->clocks);
  for (int i = 0; i < CUCAP_CUPTI_NSECTIONS; i++) {
    const cucap_cupti_section *sc = &E->sec[i];
    if (sc->state == CUCAP_CUPTI_NOT_REQUESTED && !sc->passes)
      continue;
    fprintf(f, "  %-12s %-11s %u pass(es) %.3f s  %s\n",
            cucap_cupti_section_name((cucap_cupti_section_id)i),
            ck_state_name(sc->state), sc->passes, sc->wall_s, sc->note);
  }
  if (E->mt.ngmet)
    fprintf(f, "  %zu CUDA graph launch(es) measured as a whole (metrics per "
            "graph launch: --json graph_launches)\n", E->mt.ngmet);
  const cucap_cupti_kernel_summary *sum = NULL;
  size_t ns = cucap_cupti_summaries(E, &sum);
  double total = 0;
  for (size_t i = 0; i < ns; i++)
    total += sum[i].total_ns;
  int c_sm = ck_metric_col(E, "sm__throughput.avg.pct_of_peak_sustained_elapsed");
  int c_dr = ck_metric_col(E, "dram__throughput.avg.pct_of_peak_sustained_elapsed");
  int c_oc = ck_metric_col(E, "sm__warps_active.avg.pct_of_peak_sustained_active");
  if (!ns)
    return;
  fprintf(f, "\n%6s %7s %11s %10s %6s %6s %6s  %-24s %s\n", "time%", "execs",
          "total_us", "avg_us", "SM%", "DRAM%", "occ%", "top stall", "kernel");
  for (size_t i = 0; i < ns && i < top; i++) {
    /* metric averages over the kernel's executions */
    double sm = 0, dr = 0, oc = 0;
    unsigned nm = 0;
    for (size_t k = 0; k < E->tl.nkern; k++) {
      if (E->tl.kern[k].name != sum[i].name || !E->tl.kern[k].metrics)
        continue;
      const double *m = E->tl.kern[k].metrics;
      if (c_sm >= 0 && !isnan(m[c_sm])) {
        sm += m[c_sm];
        dr += c_dr >= 0 && !isnan(m[c_dr]) ? m[c_dr] : 0;
        oc += c_oc >= 0 && !isnan(m[c_oc]) ? m[c_oc] : 0;
        nm++;
      }
    }
    char smb[16] = "-", drb[16] = "-", ocb[16] = "-";
    if (nm) {
      snprintf(smb, sizeof smb, "%.1f", sm / nm);
      if (c_dr >= 0)
        snprintf(drb, sizeof drb, "%.1f", dr / nm);
      if (c_oc >= 0)
        snprintf(ocb, sizeof ocb, "%.1f", oc / nm);
    }
    const char *stall = sum[i].nstalls ? sum[i].stalls[0].what : "-";
    const char *pfx = "smsp__pcsamp_warps_issue_stalled_";
    if (!strncmp(stall, pfx, strlen(pfx)))
      stall += strlen(pfx);
    const char *pretty = ck_pretty(E, sum[i].name);
    fprintf(f, "%6.1f %7" PRIu64 " %11.1f %10.2f %6s %6s %6s  %-24.24s %.100s\n",
            total > 0 ? 100.0 * sum[i].total_ns / total : 0.0,
            sum[i].executions, sum[i].total_ns / 1e3,
            sum[i].executions ? sum[i].total_ns / 1e3 / (double)sum[i].executions
                              : 0.0,
            smb, drb, ocb, stall, pretty);
    if (sum[i].nlines)
      fprintf(f, "%47s hottest line %s (%" PRIu64 " samples)\n", "",
              sum[i].lines[0].what, sum[i].lines[0].samples);
  }
}

/* ------------------------------------------------------------ timing */

void ck_timing_log(ck_engine *E) {
  const ck_timing *t = &E->tm;
  char b[1024];
  size_t l = (size_t)snprintf(b, sizeof b, "attach %.3f s, begin %.3f s",
                              t->attach_s, t->begin_s);
  for (int i = 0; i < CUCAP_CUPTI_NSECTIONS && l < sizeof b; i++)
    if (E->sec[i].passes)
      l += (size_t)snprintf(b + l, sizeof b - l,
                            "; %s %u pass(es) %.3f s + %.3f s between passes",
                            cucap_cupti_section_name((cucap_cupti_section_id)i),
                            E->sec[i].passes, t->pass_s[i], t->between_s[i]);
  if (E->sec[CUCAP_CUPTI_METRICS].passes && l < sizeof b)
    l += (size_t)snprintf(b + l, sizeof b - l,
                          " (range profiler setup %.3f s, start+stop %.3f s, "
                          "windows %.3f s, decode+evaluate %.3f s)", t->rp_setup_s,
                          t->rp_startstop_s, t->window_s, t->decode_s);
  if (E->sec[CUCAP_CUPTI_PCSAMPLING].passes && l < sizeof b)
    l += (size_t)snprintf(b + l, sizeof b - l,
                          " (PC drains %.3f s; instructions resolved in %.3f "
                          "s: %u source-line queries %.3f s, %u nvdisasm "
                          "run(s) %.3f s)", t->pcs_drain_s, t->resolve_s,
                          t->source_calls, t->source_s, t->nvdisasm_runs,
                          t->nvdisasm_s);
  if (E->sec[CUCAP_CUPTI_SASS].passes && l < sizeof b)
    snprintf(b + l, sizeof b - l, " (SASS metrics flush+join %.3f s)",
             t->sass_collect_s);
  CUCAP_INFO("profile: timing: %s", b);
}

/* ------------------------------------------------------------ JSON */

static void ck_jnum(cucap_json *w, const char *k, double v) {
  cucap_json_key(w, k);
  if (isnan(v))
    cucap_json_null(w);
  else
    cucap_json_double(w, v);
}

/* "env" and "sections" */
static void ck_json_env(cucap_json *w, cucap_cupti *E) {
  cucap_json_key(w, "env");
  cucap_json_object_begin(w);
  cucap_json_key(w, "library");
  cucap_json_string(w, E->env.library);
  cucap_json_key(w, "version");
  cucap_json_uint(w, E->env.version);
  cucap_json_key(w, "chip");
  cucap_json_string(w, E->env.chip);
  cucap_json_key(w, "counters_allowed");
  cucap_json_int(w, E->env.counters_allowed);
  cucap_json_key(w, "clocks");
  cucap_json_string(w, E->env.clocks);
  cucap_json_key(w, "metric_passes");
  cucap_json_uint(w, E->env.metric_passes);
  cucap_json_key(w, "stall_reasons");
  cucap_json_uint(w, E->env.stall_reasons);
  cucap_json_object_end(w);
  cucap_json_key(w, "sections");
  cucap_json_object_begin(w);
  for (int i = 0; i < CUCAP_CUPTI_NSECTIONS; i++) {
    cucap_json_key(w, cucap_cupti_section_name((cucap_cupti_section_id)i));
    cucap_json_object_begin(w);
    cucap_json_key(w, "state");
    cucap_json_string(w, ck_state_name(E->sec[i].state));
    cucap_json_key(w, "passes");
    cucap_json_uint(w, E->sec[i].passes);
    cucap_json_key(w, "wall_s");
    cucap_json_double(w, E->sec[i].wall_s);
    cucap_json_key(w, "note");
    cucap_json_string(w, E->sec[i].note);
    cucap_json_object_end(w);
  }
  cucap_json_object_end(w);
}

/* "timing": ck_timing */
static void ck_json_timing(cucap_json *w, cucap_cupti *E) {
  const ck_timing *t = &E->tm;
  cucap_json_key(w, "timing");
  cucap_json_object_begin(w);
  ck_jnum(w, "attach_s", t->attach_s);
  ck_jnum(w, "begin_s", t->begin_s);
  cucap_json_key(w, "sections");
  cucap_json_object_begin(w);
  for (int i = 0; i < CUCAP_CUPTI_NSECTIONS; i++) {
    cucap_json_key(w, cucap_cupti_section_name((cucap_cupti_section_id)i));
    cucap_json_object_begin(w);
    ck_jnum(w, "passes_s", t->pass_s[i]);
    ck_jnum(w, "between_passes_s", t->between_s[i]);
    cucap_json_object_end(w);
  }
  cucap_json_object_end(w);
  ck_jnum(w, "range_profiler_setup_s", t->rp_setup_s);
  ck_jnum(w, "metrics_windows_s", t->window_s);
  ck_jnum(w, "range_profiler_start_stop_s", t->rp_startstop_s);
  ck_jnum(w, "range_profiler_stop_s", t->rp_stop_s);
  ck_jnum(w, "decode_evaluate_s", t->decode_s);
  ck_jnum(w, "pc_drain_s", t->pcs_drain_s);
  ck_jnum(w, "resolve_s", t->resolve_s);
  ck_jnum(w, "source_lines_s", t->source_s);
  cucap_json_key(w, "source_line_queries");
  cucap_json_uint(w, t->source_calls);
  ck_jnum(w, "nvdisasm_s", t->nvdisasm_s);
  cucap_json_key(w, "nvdisasm_runs");
  cucap_json_uint(w, t->nvdisasm_runs);
  ck_jnum(w, "sass_collect_s", t->sass_collect_s);
  cucap_json_object_end(w);
}

/* "graph_launches": nm metric values each */
static void ck_json_graphs(cucap_json *w, cucap_cupti *E, size_t nm) {
  cucap_json_key(w, "graph_launches");
  cucap_json_array_begin(w);
  for (size_t i = 0; i < E->mt.ngmet; i++) {
    const cucap_cupti_graph_metric *g = &E->mt.gmet[i];
    cucap_json_object_begin(w);
    cucap_json_key(w, "rec_index");
    cucap_json_uint(w, g->rec_index);
    cucap_json_key(w, "seq");
    cucap_json_uint(w, g->seq);
    cucap_json_key(w, "kernels");
    cucap_json_uint(w, g->kernels);
    cucap_json_key(w, "metrics");
    cucap_json_array_begin(w);
    for (size_t j = 0; j < nm; j++)
      if (isnan(g->metrics[j]))
        cucap_json_null(w);
      else
        cucap_json_double(w, g->metrics[j]);
    cucap_json_array_end(w);
    cucap_json_object_end(w);
  }
  cucap_json_array_end(w);
}

/* "kernels": the timeline's kernel table with nm metric values each */
static void ck_json_kernels(cucap_json *w, cucap_cupti *E, size_t nm) {
  cucap_json_key(w, "kernels");
  cucap_json_array_begin(w);
  for (size_t k = 0; k < E->tl.nkern; k++) {
    const cucap_cupti_kernel *kk = &E->tl.kern[k];
    cucap_json_object_begin(w);
    cucap_json_key(w, "rec_index");
    cucap_json_uint(w, kk->rec_index);
    cucap_json_key(w, "seq");
    cucap_json_uint(w, kk->seq);
    cucap_json_key(w, "launch_index");
    if (kk->launch_index == CUCAP_REPLAY_NO_LAUNCH)
      cucap_json_null(w);
    else
      cucap_json_uint(w, kk->launch_index);
    cucap_json_key(w, "sub");
    cucap_json_uint(w, kk->sub);
    cucap_json_key(w, "name");
    cucap_json_string(w, kk->name);
    cucap_json_key(w, "callstack");
    cucap_json_uint(w, kk->callstack);
    cucap_json_key(w, "stream");
    cucap_json_uint(w, kk->stream);
    cucap_json_key(w, "cupti_stream");
    cucap_json_uint(w, kk->stream_id);
    cucap_json_key(w, "grid");
    cucap_json_array_begin(w);
    for (int d = 0; d < 3; d++)
      cucap_json_uint(w, kk->grid[d]);
    cucap_json_array_end(w);
    cucap_json_key(w, "block");
    cucap_json_array_begin(w);
    for (int d = 0; d < 3; d++)
      cucap_json_uint(w, kk->block[d]);
    cucap_json_array_end(w);
    cucap_json_key(w, "registers");
    cucap_json_uint(w, kk->registers);
    cucap_json_key(w, "shared_bytes");
    cucap_json_uint(w, (uint64_t)kk->static_smem + kk->dynamic_smem);
    ck_jnum(w, "start_ns", kk->start_ns);
    cucap_json_key(w, "ntimes");
    cucap_json_uint(w, kk->ntimes);
    ck_jnum(w, "dur_median_ns", kk->dur_median_ns);
    ck_jnum(w, "dur_min_ns", kk->dur_min_ns);
    ck_jnum(w, "dur_max_ns", kk->dur_max_ns);
    if (kk->metrics) {
      cucap_json_key(w, "metrics");
      cucap_json_array_begin(w);
      for (size_t j = 0; j < nm; j++)
        if (isnan(kk->metrics[j]))
          cucap_json_null(w);
        else
          cucap_json_double(w, kk->metrics[j]);
      cucap_json_array_end(w);
    }
    cucap_json_object_end(w);
  }
  cucap_json_array_end(w);
}

/* "copies" */
static void ck_json_copies(cucap_json *w, cucap_cupti *E) {
  cucap_json_key(w, "copies");
  cucap_json_array_begin(w);
  for (size_t i = 0; i < E->tl.ncopy; i++) {
    const cucap_cupti_copy *c = &E->tl.copy[i];
    cucap_json_object_begin(w);
    cucap_json_key(w, "rec_index");
    cucap_json_uint(w, c->rec_index);
    cucap_json_key(w, "kind");
    cucap_json_string(w, c->is_memset ? "memset" : "memcpy");
    cucap_json_key(w, "copy_kind");
    cucap_json_int(w, c->copy_kind);
    cucap_json_key(w, "bytes");
    cucap_json_uint(w, c->bytes);
    cucap_json_key(w, "stream");
    cucap_json_uint(w, c->stream);
    cucap_json_key(w, "cupti_stream");
    cucap_json_uint(w, c->stream_id);
    ck_jnum(w, "start_ns", c->start_ns);
    ck_jnum(w, "dur_median_ns", c->dur_median_ns);
    cucap_json_object_end(w);
  }
  cucap_json_array_end(w);
}

/* "stall_reasons", "pc_sites" and "pc_samples" */
static void ck_json_pcsamp(cucap_json *w, cucap_cupti *E) {
  cucap_json_key(w, "stall_reasons");
  cucap_json_array_begin(w);
  for (size_t i = 0; i < E->pc.nstall; i++)
    cucap_json_string(w, E->pc.stall[i]);
  cucap_json_array_end(w);
  cucap_json_key(w, "pc_sites");
  cucap_json_array_begin(w);
  for (size_t i = 0; i < E->pc.nsite; i++) {
    const cucap_cupti_pc_site *s = &E->pc.site[i];
    cucap_json_object_begin(w);
    cucap_json_key(w, "crc");
    cucap_json_uint(w, s->cubin_crc);
    cucap_json_key(w, "function");
    cucap_json_string(w, s->function);
    cucap_json_key(w, "pc");
    cucap_json_uint(w, s->pc_offset);
    cucap_json_key(w, "sass");
    cucap_json_string(w, s->sass);
    cucap_json_key(w, "file");
    cucap_json_string(w, s->file);
    cucap_json_key(w, "line");
    cucap_json_uint(w, s->line);
    cucap_json_key(w, "inline");
    cucap_json_string(w, s->inline_chain);
    if (s->inst_executed != UINT64_MAX) {
      cucap_json_key(w, "inst_executed");
      cucap_json_uint(w, s->inst_executed);
    }
    if (s->thread_inst_executed != UINT64_MAX) {
      cucap_json_key(w, "thread_inst_executed");
      cucap_json_uint(w, s->thread_inst_executed);
    }
    if (s->mem_sectors != UINT64_MAX) {
      cucap_json_key(w, "global_sectors");
      cucap_json_uint(w, s->mem_sectors);
    }
    cucap_json_object_end(w);
  }
  cucap_json_array_end(w);
  /* [kernel, site, stall, count] rows */
  cucap_json_key(w, "pc_samples");
  cucap_json_array_begin(w);
  for (size_t i = 0; i < E->pc.nsamp; i++) {
    cucap_json_array_begin(w);
    cucap_json_uint(w, E->pc.samp[i].kernel);
    cucap_json_uint(w, E->pc.samp[i].site);
    cucap_json_uint(w, E->pc.samp[i].stall);
    cucap_json_uint(w, E->pc.samp[i].count);
    cucap_json_array_end(w);
  }
  cucap_json_array_end(w);
}

/* "kernel_summaries" */
static void ck_json_summaries(cucap_json *w, cucap_cupti *E) {
  const cucap_cupti_kernel_summary *sum = NULL;
  size_t ns = cucap_cupti_summaries(E, &sum);
  cucap_json_key(w, "kernel_summaries");
  cucap_json_array_begin(w);
  for (size_t i = 0; i < ns; i++) {
    cucap_json_object_begin(w);
    cucap_json_key(w, "name");
    cucap_json_string(w, sum[i].name);
    cucap_json_key(w, "demangled");
    cucap_json_string(w, ck_pretty(E, sum[i].name));
    cucap_json_key(w, "executions");
    cucap_json_uint(w, sum[i].executions);
    ck_jnum(w, "total_ns", sum[i].total_ns);
    cucap_json_key(w, "samples");
    cucap_json_uint(w, sum[i].samples);
    cucap_json_key(w, "top_stalls");
    cucap_json_object_begin(w);
    for (unsigned j = 0; j < sum[i].nstalls; j++) {
      cucap_json_key(w, sum[i].stalls[j].what);
      cucap_json_uint(w, sum[i].stalls[j].samples);
    }
    cucap_json_object_end(w);
    cucap_json_key(w, "hot_lines");
    cucap_json_object_begin(w);
    for (unsigned j = 0; j < sum[i].nlines; j++) {
      cucap_json_key(w, sum[i].lines[j].what);
      cucap_json_uint(w, sum[i].lines[j].samples);
    }
    cucap_json_object_end(w);
    cucap_json_object_end(w);
  }
  cucap_json_array_end(w);
}

/* "callstacks": the frames of every stack fed, by id */
static void ck_json_callstacks(cucap_json *w, cucap_cupti *E) {
  cucap_json_key(w, "callstacks");
  cucap_json_object_begin(w);
  const ck_report *R = E->rep;
  for (size_t i = 0; R && i < R->nstack_ids; i++) {
    const char *const *fr = NULL;
    size_t nf = cucap_cupti_callstack(E, R->stack_ids[i], &fr);
    if (!fr)
      continue;
    char id[16];
    snprintf(id, sizeof id, "%u", R->stack_ids[i]);
    cucap_json_key(w, id);
    cucap_json_array_begin(w);
    for (size_t j = 0; j < nf; j++)
      cucap_json_string(w, fr[j]);
    cucap_json_array_end(w);
  }
  cucap_json_object_end(w);
}

cucap_status cucap_cupti_write_json(cucap_cupti *E, FILE *out) {
  cucap_json *w = cucap_json_create_file(out, 0);
  if (!w)
    return CUCAP_ERR_NOMEM;
  cucap_json_object_begin(w);
  ck_json_env(w, E);
  ck_json_timing(w, E);
  const char *const *mn = NULL;
  size_t nm = cucap_cupti_metric_names(E, &mn);
  ck_json_graphs(w, E, nm);
  cucap_json_key(w, "metric_names");
  cucap_json_array_begin(w);
  for (size_t j = 0; j < nm; j++)
    cucap_json_string(w, mn[j]);
  cucap_json_array_end(w);
  ck_json_kernels(w, E, nm);
  ck_json_copies(w, E);
  ck_json_pcsamp(w, E);
  ck_json_summaries(w, E);
  ck_json_callstacks(w, E);
  cucap_json_object_end(w);
  cucap_json_newline(w);
  cucap_status st = cucap_json_status(w);
  cucap_json_destroy(w);
  if (st == CUCAP_OK && (fflush(out) != 0 || ferror(out)))
    st = CUCAP_ERR_IO;
  return st;
}

/* ------------------------------------------------------------ folded */

typedef struct ck_fold {
  uint32_t callstack;
  uint32_t site;
  const char *kernel;
  uint64_t count;
} ck_fold;

static void ck_fold_frame(FILE *f, const char *s) {
  for (; *s; s++)
    fputc(*s == ';' ? ':' : *s == '\n' ? ' ' : *s, f);
}

cucap_status cucap_cupti_write_folded(cucap_cupti *E, FILE *f, size_t *distinct) {
  cucap_map idx;
  memset(&idx, 0, sizeof idx);
  ck_fold *fo = calloc(E->pc.nsamp + 1, sizeof *fo);
  size_t n = 0;
  if (!fo)
    return CUCAP_ERR_NOMEM;
  for (size_t i = 0; i < E->pc.nsamp; i++) {
    const cucap_cupti_pc_sample *s = &E->pc.samp[i];
    if (s->kernel >= E->tl.nkern || s->site >= E->pc.nsite)
      continue;
    const cucap_cupti_kernel *k = &E->tl.kern[s->kernel];
    uint64_t h = ((uint64_t)k->callstack << 32 | s->site) * 0x9e3779b97f4a7c15ull ^
                 (uint64_t)(uintptr_t)k->name, v = 0;
    for (;; h++) {
      if (!cucap_map_get(&idx, h, &v)) {
        fo[n] = (ck_fold){k->callstack, s->site, k->name, 0};
        v = ++n;
        cucap_map_put(&idx, h, v);
        break;
      }
      const ck_fold *c = &fo[v - 1];
      if (c->callstack == k->callstack && c->site == s->site &&
          c->kernel == k->name)
        break;
    }
    fo[v - 1].count += s->count;
  }
  for (size_t i = 0; i < n; i++) {
    const char *const *fr = NULL;
    size_t nf = cucap_cupti_callstack(E, fo[i].callstack, &fr);
    for (size_t j = nf; j-- > 0;) { /* outermost first */
      ck_fold_frame(f, fr[j]);
      fputc(';', f);
    }
    ck_fold_frame(f, ck_pretty(E, fo[i].kernel));
    const cucap_cupti_pc_site *s = &E->pc.site[fo[i].site];
    if (s->inline_chain) { /* "in <- out <- ...": print outermost first */
      const char *c = s->inline_chain;
      const char *parts[64];
      size_t np = 0;
      parts[np++] = c;
      for (const char *t = strstr(c, " <- "); t && np < 64; t = strstr(t + 4, " <- "))
        parts[np++] = t + 4;
      for (size_t j = np; j-- > 0;) {
        const char *e = strstr(parts[j], " <- ");
        size_t l = e ? (size_t)(e - parts[j]) : strlen(parts[j]);
        fputc(';', f);
        fprintf(f, "%.*s", (int)l, parts[j]);
      }
    } else if (s->file) {
      fprintf(f, ";%s:%u", s->file, s->line);
    } else {
      fputs(";[no line info]", f);
    }
    fprintf(f, ";0x%04" PRIx64 " ", s->pc_offset);
    if (s->sass)
      ck_fold_frame(f, s->sass);
    else
      fputs("?", f);
    fprintf(f, " %" PRIu64 "\n", fo[i].count);
  }
  cucap_map_free(&idx);
  free(fo);
  if (distinct)
    *distinct = n;
  return ferror(f) ? CUCAP_ERR_IO : CUCAP_OK;
}
