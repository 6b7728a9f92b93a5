/* profile_report.c - the profile as a terminal report and as JSON
 * (cucap_profile.h). The report never leaves a section silently empty: a
 * section that was not collected prints its state and the message saying
 * what to change. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cucap_schema.h"
#include "cucap_json.h"
#include "profile_internal.h"

void cucap_profile_print_options_init(cucap_profile_print_options *o) {
  memset(o, 0, sizeof *o);
  o->top_kernels = 20;
}

static const char *const *profile_stack(void *ctx, uint32_t id, size_t *n, size_t *first) {
  return cucap_profile_stack(ctx, id, n, first);
}

/* "smsp__pcsamp_warps_issue_stalled_long_scoreboard" -> "long_scoreboard" */
static const char *stall_short(const char *s) {
  static const char *const pre[] = {"smsp__pcsamp_warps_issue_stalled_",
                                    "smsp__pcsamp_warps_issue_", "stalled_"};
  if (!s)
    return "";
  for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++)
    if (!strncmp(s, pre[i], strlen(pre[i])))
      return s + strlen(pre[i]);
  return s;
}

static void pct_col(FILE *out, double v) {
  if (v >= 0)
    fprintf(out, " %5.1f", v);
  else
    fputs("     -", out);
}

static void print_sections(cucap_profile *p, FILE *out) {
  fputs("sections:\n", out);
  for (int s = 0; s < CUCAP_PROFILE_NSECTIONS; s++) {
    cucap_profile_state st;
    const char *src, *msg;
    cucap_profile_get_section(p, (cucap_profile_section)s, &st, &src, &msg);
    fprintf(out, "  %-12s %-13s %-22s %s\n", cucap_profile_section_name((cucap_profile_section)s),
            cucap_profile_state_name(st), src[0] ? src : "-",
            msg[0] ? msg : (st == CUCAP_PROFILE_NOT_REQUESTED ? "(not requested)" : ""));
  }
}

void cucap_profile_print(cucap_profile *p, FILE *out, const cucap_profile_print_options *o) {
  cucap_profile_print_options dflt;
  if (!o) {
    cucap_profile_print_options_init(&dflt);
    o = &dflt;
  }
  cucap_profile_finalize(p);
  const cucap_profile_info *in = &p->info;
  fprintf(out, "cucap profile: %s\n", in->capture_path[0] ? in->capture_path : "?");
  fprintf(out, "replay: %s", in->device[0] ? in->device : "device unknown");
  if (in->cc_major)
    fprintf(out, " (sm_%d%d)", in->cc_major, in->cc_minor);
  fprintf(out, ", backend %s", in->backend[0] ? in->backend : "none");
  if (in->cupti_version)
    fprintf(out, " (CUPTI API %u)", in->cupti_version);
  fprintf(out, ", metrics %s, cache %s, %u timing pass%s, %u pass%s in all%s%s\n",
          in->metric_set[0] ? in->metric_set : "-", in->cache_mode[0] ? in->cache_mode : "-",
          in->loops, in->loops == 1 ? "" : "es", in->passes, in->passes == 1 ? "" : "es",
          in->range[0] ? ", range " : "", in->range);
  print_sections(p, out);

  uint64_t total = 0, launches = 0, timed = 0;
  for (size_t k = 0; k < p->nk; k++) {
    total += p->K[k].pub.total_ns;
    launches += p->K[k].pub.launches;
    timed += p->K[k].pub.timed;
  }
  fprintf(out, "\ntop kernels (by GPU time; %zu kernels, %" PRIu64 " launches, %" PRIu64
               " timed, %.3f ms):\n",
          p->nk, launches, timed, (double)total / 1e6);
  if (!p->nk) {
    fputs("  (no launches in the capture)\n", out);
  } else {
    fputs("   #  time%   total ms  launches  median us spread  class           SM%  Mem%"
          " DRAM%  Occ%  top stall             kernel\n", out);
    for (size_t k = 0; k < p->nk && k < o->top_kernels; k++) {
      const cucap_profile_kernel *K = &p->K[k].pub;
      char cls[32];
      if (K->cls.cls == CUCAP_BOTTLENECK_UNKNOWN)
        snprintf(cls, sizeof cls, "-");
      else
        snprintf(cls, sizeof cls, "%s%s%s", cucap_bottleneck_name(K->cls.cls),
                 K->cls.unit[0] ? "/" : "", K->cls.unit);
      char stall[40] = "-";
      if (K->stalls[0].name)
        snprintf(stall, sizeof stall, "%.14s %.0f%%", stall_short(K->stalls[0].name),
                 K->stalls[0].pct);
      if (K->timed)
        fprintf(out, "  %2zu %5.1f%% %10.3f %9" PRIu64 " %10.1f %5.1f%%", k + 1, K->share_pct,
                (double)K->total_ns / 1e6, K->launches, (double)K->median_ns / 1e3, K->spread_pct);
      else
        fprintf(out, "  %2zu      -          - %9" PRIu64 "          -      -", k + 1,
                K->launches);
      fprintf(out, "  %-14s", cls);
      pct_col(out, K->sm_pct);
      pct_col(out, K->memory_pct);
      pct_col(out, K->dram_pct);
      pct_col(out, K->occupancy_pct);
      fprintf(out, "  %-20s  %s\n", stall, K->short_name);
    }
    if (p->nk > o->top_kernels)
      fprintf(out, "  ... %zu more kernels (--json has all)\n", p->nk - o->top_kernels);
  }
  cucap_profile_state st;
  const char *src, *msg;
  for (int s = 0; s < 3; s++) {
    cucap_profile_get_section(p, (cucap_profile_section)s, &st, &src, &msg);
    if (st == CUCAP_PROFILE_UNAVAILABLE || st == CUCAP_PROFILE_PARTIAL)
      fprintf(out, "note: %s %s: %s\n", cucap_profile_section_name((cucap_profile_section)s),
              cucap_profile_state_name(st), msg);
  }
  /* the hottest lines of the top kernel, when PC samples exist */
  for (size_t k = 0; k < p->nk && k < 3; k++) {
    const cucap_profile_kernel *K = &p->K[k].pub;
    if (!K->samples)
      continue;
    fprintf(out, "\n%s: %" PRIu64 " PC samples\n", K->short_name, K->samples);
    for (int i = 0; i < CUCAP_PROFILE_TOP && K->stalls[i].name; i++)
      fprintf(out, "  stall %-28s %5.1f%%\n", stall_short(K->stalls[i].name), K->stalls[i].pct);
    for (int i = 0; i < CUCAP_PROFILE_TOP && K->lines[i].name; i++)
      fprintf(out, "  line  %-28s %5.1f%%\n", K->lines[i].name, K->lines[i].pct);
  }
  fputs("\nprogram findings (from the capture; ranked by estimated recoverable time):\n", out);
  unsigned shown = 0;
  for (size_t i = 0; i < p->nf; i++) {
    if (p->F[i].severity < o->min_severity)
      continue;
    if (o->max_findings && shown >= o->max_findings)
      break;
    shown++;
    cucap_finding_print(out, &p->F[i], i + 1, profile_stack, p);
  }
  if (!shown) {
    cucap_profile_get_section(p, CUCAP_PROFILE_ANALYSIS, &st, &src, &msg);
    fprintf(out, "  %s\n", st == CUCAP_PROFILE_OK ? "(no findings)" : msg[0] ? msg : "(not run)");
  }
}

/* ------------------------------------------------------------ JSON */

static void json_num(cucap_json *w, double v) {
  if (v == floor(v) && fabs(v) < 9e15) {
    if (v < 0)
      cucap_json_int(w, (int64_t)v);
    else
      cucap_json_uint(w, (uint64_t)v);
  } else {
    cucap_json_double(w, v);
  }
}

static void json_pct_or_null(cucap_json *w, const char *key, double v) {
  cucap_json_key(w, key);
  if (v >= 0)
    json_num(w, v);
  else
    cucap_json_null(w);
}

static void json_dim(cucap_json *w, const char *key, const uint32_t d[3]) {
  cucap_json_key(w, key);
  cucap_json_array_begin(w);
  for (int i = 0; i < 3; i++)
    cucap_json_uint(w, d[i]);
  cucap_json_array_end(w);
}

static void json_cls(cucap_json *w, const cucap_classification *c) {
  cucap_json_key(w, "class");
  cucap_json_object_begin(w);
  cucap_json_key(w, "class");
  cucap_json_string(w, cucap_bottleneck_name(c->cls));
  cucap_json_key(w, "unit");
  cucap_json_string(w, c->unit);
  cucap_json_key(w, "reason");
  cucap_json_string(w, c->reason);
  cucap_json_object_end(w);
}

static void json_tops(cucap_json *w, const char *key, const cucap_profile_top *t) {
  cucap_json_key(w, key);
  cucap_json_array_begin(w);
  for (int i = 0; i < CUCAP_PROFILE_TOP && t[i].name; i++) {
    cucap_json_object_begin(w);
    cucap_json_key(w, "name");
    cucap_json_string(w, t[i].name);
    cucap_json_key(w, "samples");
    cucap_json_uint(w, t[i].samples);
    cucap_json_key(w, "pct");
    json_num(w, t[i].pct);
    cucap_json_object_end(w);
  }
  cucap_json_array_end(w);
}

static void json_key(cucap_json *w, uint64_t key) {
  if (CUCAP_PROFILE_KEY_IS_GRAPH(key)) {
    cucap_json_key(w, "graph_launch_seq");
    cucap_json_uint(w, CUCAP_PROFILE_KEY_SEQ(key));
    cucap_json_key(w, "graph_node");
    cucap_json_uint(w, CUCAP_PROFILE_KEY_NODE(key));
  } else {
    cucap_json_key(w, "launch_index");
    cucap_json_uint(w, key);
  }
}

static void json_pc(cucap_json *w, const cucap_profile_pc *pc) {
  cucap_json_key(w, "function");
  cucap_json_string(w, pc->function);
  cucap_json_key(w, "module_id");
  cucap_json_uint(w, pc->module_id);
  cucap_json_key(w, "pc_offset");
  cucap_json_uint(w, pc->pc_offset);
  cucap_json_key(w, "sass");
  cucap_json_string(w, pc->sass);
  cucap_json_key(w, "file");
  cucap_json_string(w, pc->file);
  cucap_json_key(w, "line");
  cucap_json_uint(w, pc->line);
  if (pc->inlined) {
    cucap_json_key(w, "inlined");
    cucap_json_string(w, pc->inlined);
  }
}

static void json_info(cucap_profile *p, cucap_json *w) {
  const cucap_profile_info *in = &p->info;
  char ver[16];
  snprintf(ver, sizeof ver, "%d.%d", CUCAP_PROFILE_FORMAT_MAJOR, CUCAP_PROFILE_FORMAT_MINOR);
  cucap_json_key(w, "profile_format");
  cucap_json_string(w, ver);
  cucap_json_key(w, "capture");
  cucap_json_object_begin(w);
  cucap_json_key(w, "path");
  cucap_json_string(w, in->capture_path);
  cucap_json_key(w, "id");
  cucap_json_hex(w, in->capture_id, 16);
  cucap_json_key(w, "records");
  cucap_json_uint(w, in->capture_records);
  cucap_json_key(w, "launches");
  cucap_json_uint(w, in->capture_launches);
  cucap_json_object_end(w);
  cucap_json_key(w, "replay");
  cucap_json_object_begin(w);
  cucap_json_key(w, "device");
  cucap_json_string(w, in->device);
  cucap_json_key(w, "cc");
  /* 64-bit: the fields come from the file as it was read, any int. */
  cucap_json_int(w, (int64_t)in->cc_major * 10 + in->cc_minor);
  cucap_json_key(w, "sm_count");
  cucap_json_int(w, in->sm_count);
  cucap_json_key(w, "driver_version");
  cucap_json_int(w, in->driver_version);
  cucap_json_key(w, "backend");
  cucap_json_string(w, in->backend);
  cucap_json_key(w, "cupti_version");
  cucap_json_uint(w, in->cupti_version);
  cucap_json_key(w, "metric_set");
  cucap_json_string(w, in->metric_set);
  cucap_json_key(w, "cache");
  cucap_json_string(w, in->cache_mode);
  cucap_json_key(w, "range");
  cucap_json_string(w, in->range);
  cucap_json_key(w, "loops");
  cucap_json_uint(w, in->loops);
  cucap_json_key(w, "passes");
  cucap_json_uint(w, in->passes);
  cucap_json_key(w, "created_ns");
  cucap_json_uint(w, in->created_ns);
  cucap_json_object_end(w);
  cucap_json_key(w, "sections");
  cucap_json_object_begin(w);
  for (int s = 0; s < CUCAP_PROFILE_NSECTIONS; s++) {
    cucap_profile_state st;
    const char *src, *msg;
    cucap_profile_get_section(p, (cucap_profile_section)s, &st, &src, &msg);
    cucap_json_key(w, cucap_profile_section_name((cucap_profile_section)s));
    cucap_json_object_begin(w);
    cucap_json_key(w, "state");
    cucap_json_string(w, cucap_profile_state_name(st));
    cucap_json_key(w, "source");
    cucap_json_string(w, src);
    cucap_json_key(w, "message");
    cucap_json_string(w, msg);
    cucap_json_object_end(w);
  }
  cucap_json_object_end(w);
}

static void json_launch(cucap_profile *p, cucap_json *w, const cucap_profile_launch *l) {
  cucap_json_object_begin(w);
  json_key(w, l->key);
  cucap_json_key(w, "seq");
  cucap_json_uint(w, l->seq);
  cucap_json_key(w, "kernel");
  cucap_json_string(w, l->kernel);
  cucap_json_key(w, "demangled");
  cucap_json_string(w, l->demangled);
  json_dim(w, "grid", l->grid);
  json_dim(w, "block", l->block);
  cucap_json_key(w, "shared_mem");
  cucap_json_uint(w, l->shared_mem);
  cucap_json_key(w, "stream");
  cucap_json_uint(w, l->stream);
  cucap_json_key(w, "callstack");
  cucap_json_uint(w, l->callstack);
  cucap_json_key(w, "timings");
  cucap_json_array_begin(w);
  for (size_t i = 0; i < l->ntimings; i++) {
    cucap_json_object_begin(w);
    cucap_json_key(w, "pass");
    cucap_json_uint(w, l->timings[i].pass);
    cucap_json_key(w, "start_ns");
    cucap_json_uint(w, l->timings[i].start_ns);
    cucap_json_key(w, "end_ns");
    cucap_json_uint(w, l->timings[i].end_ns);
    cucap_json_object_end(w);
  }
  cucap_json_array_end(w);
  if (l->ntimings) {
    cucap_json_key(w, "median_ns");
    cucap_json_uint(w, l->median_ns);
    cucap_json_key(w, "min_ns");
    cucap_json_uint(w, l->min_ns);
    cucap_json_key(w, "max_ns");
    cucap_json_uint(w, l->max_ns);
    cucap_json_key(w, "spread_pct");
    json_num(w, l->spread_pct);
  }
  cucap_json_key(w, "metrics");
  cucap_json_object_begin(w);
  for (size_t i = 0; i < l->nmetrics; i++) {
    cucap_json_key(w, cucap_profile_metric_name(p, l->metric_ids[i]));
    json_num(w, l->metric_values[i]);
  }
  cucap_json_object_end(w);
  json_cls(w, &l->cls);
  cucap_json_key(w, "samples");
  cucap_json_uint(w, l->samples);
  json_tops(w, "stalls", l->stalls);
  json_tops(w, "lines", l->lines);
  cucap_json_object_end(w);
}

static void json_kernel(cucap_json *w, const cucap_profile_kernel *K) {
  cucap_json_object_begin(w);
  cucap_json_key(w, "kernel");
  cucap_json_string(w, K->kernel);
  cucap_json_key(w, "demangled");
  cucap_json_string(w, K->demangled);
  cucap_json_key(w, "short_name");
  cucap_json_string(w, K->short_name);
  cucap_json_key(w, "launches");
  cucap_json_uint(w, K->launches);
  cucap_json_key(w, "timed");
  cucap_json_uint(w, K->timed);
  cucap_json_key(w, "total_ns");
  cucap_json_uint(w, K->total_ns);
  cucap_json_key(w, "median_ns");
  cucap_json_uint(w, K->median_ns);
  cucap_json_key(w, "share_pct");
  json_num(w, K->share_pct);
  cucap_json_key(w, "spread_pct");
  json_num(w, K->spread_pct);
  json_pct_or_null(w, "sm_pct", K->sm_pct);
  json_pct_or_null(w, "memory_pct", K->memory_pct);
  json_pct_or_null(w, "dram_pct", K->dram_pct);
  json_pct_or_null(w, "occupancy_pct", K->occupancy_pct);
  json_pct_or_null(w, "tensor_pct", K->tensor_pct);
  json_cls(w, &K->cls);
  cucap_json_key(w, "samples");
  cucap_json_uint(w, K->samples);
  json_tops(w, "stalls", K->stalls);
  json_tops(w, "lines", K->lines);
  cucap_json_object_end(w);
}

cucap_status cucap_profile_write_json(cucap_profile *p, cucap_json *w) {
  CUCAP_FORWARD(cucap_profile_finalize(p));
  cucap_json_object_begin(w);
  json_info(p, w);
  cucap_json_key(w, "kernels");
  cucap_json_array_begin(w);
  for (size_t k = 0; k < p->nk; k++)
    json_kernel(w, &p->K[k].pub);
  cucap_json_array_end(w);
  cucap_json_key(w, "launches");
  cucap_json_array_begin(w);
  for (size_t i = 0; i < p->nl; i++)
    json_launch(p, w, &p->L[i].pub);
  cucap_json_array_end(w);
  cucap_json_key(w, "activities");
  cucap_json_array_begin(w);
  static const char *const kinds[] = {"?", "memcpy", "memset", "graph"};
  for (size_t i = 0; i < p->nact; i++) {
    const cucap_profile_activity *a = &p->act[i];
    cucap_json_object_begin(w);
    cucap_json_key(w, "kind");
    cucap_json_string(w, (unsigned)a->kind < 4 ? kinds[a->kind] : "?");
    cucap_json_key(w, "seq");
    cucap_json_uint(w, a->seq);
    cucap_json_key(w, "rec_index");
    cucap_json_uint(w, a->rec_index);
    cucap_json_key(w, "pass");
    cucap_json_uint(w, a->pass);
    cucap_json_key(w, "start_ns");
    cucap_json_uint(w, a->start_ns);
    cucap_json_key(w, "end_ns");
    cucap_json_uint(w, a->end_ns);
    cucap_json_key(w, "bytes");
    cucap_json_uint(w, a->bytes);
    if (a->kind == CUCAP_PROFILE_ACT_MEMCPY) {
      const char *kn = cucap_fb_memcpy_kind_name(a->copy_kind);
      cucap_json_key(w, "copy_kind");
      cucap_json_string(w, kn ? kn : "?");
    }
    cucap_json_key(w, "stream");
    cucap_json_uint(w, a->stream);
    cucap_json_object_end(w);
  }
  cucap_json_array_end(w);
  cucap_json_key(w, "pc_samples");
  cucap_json_array_begin(w);
  for (size_t i = 0; i < p->samples.n; i++) {
    const pf_row *r = &p->samples.r[i];
    cucap_json_object_begin(w);
    json_key(w, r->key);
    json_pc(w, &p->pcs[r->pc].view);
    cucap_json_key(w, "stall");
    cucap_json_string(w, pf_s(p, r->what));
    cucap_json_key(w, "samples");
    cucap_json_uint(w, r->count);
    cucap_json_object_end(w);
  }
  cucap_json_array_end(w);
  cucap_json_key(w, "sass_metrics");
  cucap_json_array_begin(w);
  for (size_t i = 0; i < p->sass.n; i++) {
    const pf_row *r = &p->sass.r[i];
    cucap_json_object_begin(w);
    json_key(w, r->key);
    json_pc(w, &p->pcs[r->pc].view);
    cucap_json_key(w, "metric");
    cucap_json_string(w, pf_s(p, r->what));
    cucap_json_key(w, "value");
    json_num(w, r->value);
    cucap_json_object_end(w);
  }
  cucap_json_array_end(w);
  cucap_json_key(w, "stacks");
  cucap_json_object_begin(w);
  for (size_t i = 0; i < p->nstk; i++) {
    char id[16];
    snprintf(id, sizeof id, "%u", (unsigned)p->stk[i].id);
    cucap_json_key(w, id);
    cucap_json_object_begin(w);
    cucap_json_key(w, "first_app_frame");
    cucap_json_uint(w, p->stk[i].first_app);
    cucap_json_key(w, "frames");
    cucap_json_array_begin(w);
    for (size_t k = 0; k < p->stk[i].n; k++)
      cucap_json_string(w, p->stk[i].frames[k]);
    cucap_json_array_end(w);
    cucap_json_object_end(w);
  }
  cucap_json_object_end(w);
  cucap_json_key(w, "findings");
  cucap_json_array_begin(w);
  for (size_t i = 0; i < p->nf; i++)
    cucap_finding_write_json(w, &p->F[i], i + 1, profile_stack, p);
  cucap_json_array_end(w);
  cucap_json_object_end(w);
  return cucap_json_status(w);
}
