/* analyze_report.c - the analysis as text and as JSON (cucap_analyze.h).
 * Text: a header (capture, device, window, link, caveats) and the ranked
 * findings with their numbers, estimate, callsites and advice. JSON: the
 * same as one object; keys documented in docs/design.md. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analyze_internal.h"
#include "cucap_json.h"
#include "cucap_units.h"

#define SITE_FRAMES 4 /* frames per callsite in the text report */

/* a number in the units the reader wants: ns as ms/us, GB/s, %, bytes with
 * their size in KiB..TiB */
static void fmt_num(const cucap_finding_number *n, char *out, size_t len) {
  double v = n->value;
  if (!strcmp(n->unit, "ns")) {
    if (v >= 1e6)
      snprintf(out, len, "%.3f ms", v / 1e6);
    else
      snprintf(out, len, "%.1f us", v / 1e3);
  } else if (!strcmp(n->unit, "GB/s")) {
    snprintf(out, len, "%.2f GB/s", v);
  } else if (!strcmp(n->unit, "%")) {
    snprintf(out, len, "%.1f%%", v);
  } else if (!strcmp(n->unit, "/s")) {
    snprintf(out, len, "%.1f/s", v);
  } else if (!strcmp(n->unit, "bytes") && v >= 0 && v < 9e15) {
    cucap_bytes_exact((uint64_t)(v + 0.5), out, len); /* the raw count stays (exact, greppable) */
  } else if (v == floor(v) && fabs(v) < 9e15) {
    snprintf(out, len, "%.0f", v);
  } else {
    snprintf(out, len, "%.3g", v);
  }
}

static void print_line(FILE *out, const char *s) { /* one line whatever s holds */
  for (; *s; s++)
    fputc((unsigned char)*s < 0x20 ? ' ' : *s, out);
}

static const char *const *analysis_stack(void *ctx, uint32_t id, size_t *n, size_t *first) {
  return cucap_analysis_stack(ctx, id, n, first);
}

static void print_site(cucap_finding_stack_fn stk, void *ctx, FILE *out, const cucap_finding_site *st) {
  fprintf(out, "      at (%" PRIu64 " call%s", st->count, st->count == 1 ? "" : "s");
  if (st->time_ns)
    fprintf(out, ", %.3f ms", (double)st->time_ns / 1e6);
  fputs("): ", out);
  size_t n = 0, first = 0;
  const char *const *fr = st->stack ? stk(ctx, st->stack, &n, &first) : NULL;
  if (!st->stack) {
    fputs("(no callstack recorded)\n", out);
    return;
  }
  if (!fr || !n) {
    fprintf(out, "(callstack %u not recorded)\n", (unsigned)st->stack);
    return;
  }
  for (size_t i = first, k = 0; i < n && k < SITE_FRAMES; i++, k++) {
    if (k)
      fputs(" <- ", out);
    print_line(out, fr[i]);
  }
  if (n - first > SITE_FRAMES)
    fprintf(out, " <- ... (%zu frames)", n);
  fputc('\n', out);
}

void cucap_finding_print(FILE *out, const cucap_finding *f, size_t rank, cucap_finding_stack_fn stk,
                      void *ctx) {
  fprintf(out, "%2zu. [%s] %s: ", rank, cucap_severity_name(f->severity), f->id);
  print_line(out, f->title);
  fputc('\n', out);
  if (f->estimated)
    fprintf(out, "      recoverable ~%.3f ms (%.2f%% of the window): %s\n",
            (double)f->recoverable_ns / 1e6, f->recoverable_pct, f->estimate);
  else
    fprintf(out, "      %s\n", f->estimate);
  fputs("      numbers:", out);
  unsigned col = 14;
  for (unsigned k = 0; k < f->nnumbers; k++) {
    char v[48], item[96];
    fmt_num(&f->numbers[k], v, sizeof v);
    int len = snprintf(item, sizeof item, " %s=%s", f->numbers[k].name, v);
    if (col + (unsigned)len > 100) {
      fputs("\n             ", out);
      col = 13;
    }
    fputs(item, out);
    col += (unsigned)len;
  }
  fputc('\n', out);
  for (unsigned k = 0; k < f->nsites; k++)
    print_site(stk, ctx, out, &f->sites[k]);
  fprintf(out, "      advice: %s\n", f->advice);
}

void cucap_analysis_print_findings(cucap_analysis *a, FILE *out,
                                   cucap_severity min_severity, unsigned max_findings) {
  unsigned shown = 0;
  for (size_t i = 0; i < a->nfind; i++) {
    const cucap_finding *f = &a->findings[i];
    if (f->severity < min_severity)
      continue;
    if (max_findings && shown >= max_findings)
      break;
    shown++;
    cucap_finding_print(out, f, i + 1, analysis_stack, a);
  }
  if (!shown)
    fputs("  (no findings)\n", out);
}

void cucap_analysis_print(cucap_analysis *a, FILE *out, cucap_severity min_severity) {
  const cucap_analysis_summary *s = &a->sum;
  fprintf(out,
          "capture: %" PRIu64 " records, %" PRIu64 " driver calls, %" PRIu64 " launches (%" PRIu64
          " graph), %" PRIu64 " copies, %" PRIu64 " memsets, %.6f s\n",
          s->records, s->calls, s->launches, s->graph_launches, s->copies, s->memsets,
          (double)s->duration_ns / 1e9);
  if (s->device[0])
    fprintf(out, "device: %s (sm_%d%d, %d SMs), driver %d.%d\n", s->device, s->cc_major,
            s->cc_minor, s->sm_count, s->driver_version / 1000, (s->driver_version % 1000) / 10);
  else
    fputs("device: not recorded\n", out);
  fprintf(out, "window: %s\n", s->window_reason);
  fprintf(out, "        %" PRIu64 " launches, %.6f s to %.6f s (%.6f s)\n", s->window_launches,
          (double)s->window_start_ns / 1e9, (double)s->window_end_ns / 1e9,
          (double)(s->window_end_ns - s->window_start_ns) / 1e9);
  fprintf(out, "link: %.2f GB/s per direction, %s\n", s->link_gbps, s->link_name);
  if (s->gpu_times)
    fprintf(out, "gpu durations: %" PRIu64 " operations measured by a profile\n", s->gpu_times);
  else
    fputs("gpu durations: none (host timestamps only; `cucap replay --profile` measures "
          "them)\n", out);
  for (unsigned i = 0; i < s->ncaveats; i++)
    fprintf(out, "caveat: %s\n", s->caveats[i]);
  fputs("\nfindings (ranked by estimated recoverable time; estimates may overlap):\n", out);
  cucap_analysis_print_findings(a, out, min_severity, 0);
}

/* integral values as integers, the rest as doubles */
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

static void json_site(cucap_finding_stack_fn stk, void *ctx, cucap_json *w, const cucap_finding_site *st) {
  cucap_json_object_begin(w);
  cucap_json_key(w, "stack");
  cucap_json_uint(w, st->stack);
  cucap_json_key(w, "count");
  cucap_json_uint(w, st->count);
  cucap_json_key(w, "time_ns");
  cucap_json_uint(w, st->time_ns);
  size_t n = 0, first = 0;
  const char *const *fr = st->stack ? stk(ctx, st->stack, &n, &first) : NULL;
  if (fr) {
    cucap_json_key(w, "first_app_frame");
    cucap_json_uint(w, first);
    cucap_json_key(w, "frames");
    cucap_json_array_begin(w);
    for (size_t i = 0; i < n; i++)
      cucap_json_string(w, fr[i]);
    cucap_json_array_end(w);
  }
  cucap_json_object_end(w);
}

void cucap_finding_write_json(cucap_json *w, const cucap_finding *f, size_t rank, cucap_finding_stack_fn stk,
                     void *ctx) {
  cucap_json_object_begin(w);
  cucap_json_key(w, "rank");
  cucap_json_uint(w, rank);
  cucap_json_key(w, "id");
  cucap_json_string(w, f->id);
  cucap_json_key(w, "severity");
  cucap_json_string(w, cucap_severity_name(f->severity));
  cucap_json_key(w, "title");
  cucap_json_string(w, f->title);
  cucap_json_key(w, "estimated");
  cucap_json_bool(w, f->estimated);
  cucap_json_key(w, "recoverable_ns");
  cucap_json_uint(w, f->recoverable_ns);
  cucap_json_key(w, "recoverable_pct");
  json_num(w, f->recoverable_pct);
  cucap_json_key(w, "estimate");
  cucap_json_string(w, f->estimate);
  cucap_json_key(w, "numbers");
  cucap_json_object_begin(w);
  for (unsigned k = 0; k < f->nnumbers; k++) {
    cucap_json_key(w, f->numbers[k].name);
    json_num(w, f->numbers[k].value);
  }
  cucap_json_object_end(w);
  cucap_json_key(w, "units");
  cucap_json_object_begin(w);
  for (unsigned k = 0; k < f->nnumbers; k++)
    if (f->numbers[k].unit[0]) {
      cucap_json_key(w, f->numbers[k].name);
      cucap_json_string(w, f->numbers[k].unit);
    }
  cucap_json_object_end(w);
  cucap_json_key(w, "callsites");
  cucap_json_array_begin(w);
  for (unsigned k = 0; k < f->nsites; k++)
    json_site(stk, ctx, w, &f->sites[k]);
  cucap_json_array_end(w);
  cucap_json_key(w, "advice");
  cucap_json_string(w, f->advice);
  cucap_json_object_end(w);
}

void cucap_analysis_write_json(cucap_analysis *a, cucap_json *w) {
  const cucap_analysis_summary *s = &a->sum;
  cucap_json_object_begin(w);
  cucap_json_key(w, "capture");
  cucap_json_object_begin(w);
  static const char *const ck[] = {"records", "calls", "launches", "graph_launches", "copies",
                                   "memsets", "duration_ns"};
  const uint64_t cv[] = {s->records, s->calls,  s->launches,   s->graph_launches,
                         s->copies,  s->memsets, s->duration_ns};
  for (size_t i = 0; i < sizeof ck / sizeof ck[0]; i++) {
    cucap_json_key(w, ck[i]);
    cucap_json_uint(w, cv[i]);
  }
  cucap_json_key(w, "device");
  cucap_json_string(w, s->device[0] ? s->device : NULL);
  cucap_json_key(w, "cc");
  cucap_json_int(w, s->cc_major * 10 + s->cc_minor);
  cucap_json_key(w, "sm_count");
  cucap_json_int(w, s->sm_count);
  cucap_json_key(w, "driver_version");
  cucap_json_int(w, s->driver_version);
  cucap_json_key(w, "record_options");
  cucap_json_string(w, s->options);
  cucap_json_key(w, "complete");
  cucap_json_bool(w, s->read_status == CUCAP_OK);
  cucap_json_key(w, "problem");
  cucap_json_string(w, s->problem[0] ? s->problem : NULL);
  cucap_json_object_end(w);
  cucap_json_key(w, "window");
  cucap_json_object_begin(w);
  cucap_json_key(w, "steady_state");
  cucap_json_bool(w, s->steady);
  cucap_json_key(w, "reason");
  cucap_json_string(w, s->window_reason);
  cucap_json_key(w, "first_launch");
  cucap_json_uint(w, s->window_first_launch);
  cucap_json_key(w, "launches");
  cucap_json_uint(w, s->window_launches);
  cucap_json_key(w, "start_ns");
  cucap_json_uint(w, s->window_start_ns);
  cucap_json_key(w, "end_ns");
  cucap_json_uint(w, s->window_end_ns);
  cucap_json_object_end(w);
  cucap_json_key(w, "link");
  cucap_json_object_begin(w);
  cucap_json_key(w, "gbps");
  json_num(w, s->link_gbps);
  cucap_json_key(w, "assumed");
  cucap_json_string(w, s->link_name);
  cucap_json_object_end(w);
  cucap_json_key(w, "gpu_durations");
  cucap_json_uint(w, s->gpu_times);
  cucap_json_key(w, "caveats");
  cucap_json_array_begin(w);
  for (unsigned i = 0; i < s->ncaveats; i++)
    cucap_json_string(w, s->caveats[i]);
  cucap_json_array_end(w);
  cucap_json_key(w, "findings");
  cucap_json_array_begin(w);
  for (size_t i = 0; i < a->nfind; i++)
    cucap_finding_write_json(w, &a->findings[i], i + 1, analysis_stack, a);
  cucap_json_array_end(w);
  cucap_json_object_end(w);
}
