/* export_chrome.c - the timeline model in the Chrome JSON trace event format
 * ({"traceEvents": [...], "displayTimeUnit": "ns"}): every track is a
 * thread of the recorded process (host threads by their OS tid, streams,
 * NVTX lanes and counters by pseudo tids named with "M" thread_name
 * events), slices are complete events ("X", ts/dur in microseconds),
 * instants "i", counters "C", flows "s"/"f" (binding to the enclosing
 * slices). Events are written in time order. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_json.h"
#include "cucap_sort.h"
#include "export_internal.h"

static void us(FILE *f, uint64_t ns) { fprintf(f, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000)); }

static uint32_t tid_of(const xp_track *t, size_t index) {
  return t->type == XT_THREAD ? t->tid : (uint32_t)(1000000 + index);
}

static int ev_cmp(const void *a, const void *b) {
  const xp_event *x = *(const xp_event *const *)a, *y = *(const xp_event *const *)b;
  if (x->ts != y->ts)
    return x->ts < y->ts ? -1 : 1;
  if (x->dur != y->dur) /* outer slices first */
    return x->dur > y->dur ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

cucap_status xp_write_chrome(const xp_model *m, FILE *f) {
  const xp_event **ev = malloc((m->events.n + 1) * sizeof *ev);
  if (!ev)
    return CUCAP_ERR_NOMEM;
  for (size_t i = 0; i < m->events.n; i++)
    ev[i] = sh_vec_at(&m->events, i);
  cucap_sort(ev, m->events.n, sizeof *ev, ev_cmp);
  fputs("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"cucap export\"},\"traceEvents\":[\n", f);
  fprintf(f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"tid\":0,\"args\":{\"name\":", m->pid);
  cucap_json_fputs_string(f, xp_s(m, m->process_name));
  fputs("}}", f);
  for (size_t i = 1; i < m->tracks.n; i++) {
    const xp_track *t = sh_vec_at(&m->tracks, i);
    if (t->type == XT_COUNTER)
      continue; /* counters are named by their events */
    fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,\"args\":{\"name\":",
            m->pid, tid_of(t, i));
    cucap_json_fputs_string(f, xp_s(m, t->name));
    fprintf(f, "}},\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%u,\"tid\":%u,"
               "\"args\":{\"sort_index\":%zu}}",
            m->pid, tid_of(t, i), t->type == XT_THREAD ? i : 1000 + i);
  }
  for (size_t i = 0; i < m->events.n; i++) {
    const xp_event *e = ev[i];
    const xp_track *t = sh_vec_at(&m->tracks, e->track);
    uint32_t tid = tid_of(t, e->track);
    if (e->kind == XE_COUNTER) {
      fputs(",\n{\"ph\":\"C\",\"name\":", f);
      cucap_json_fputs_string(f, xp_s(m, t->name));
      fprintf(f, ",\"pid\":%u,\"tid\":0,\"ts\":", m->pid);
      us(f, e->ts);
      if (e->int_value)
        fprintf(f, ",\"args\":{\"value\":%.0f}}", e->value);
      else
        fprintf(f, ",\"args\":{\"value\":%.6g}}", e->value);
      continue;
    }
    fprintf(f, ",\n{\"ph\":\"%s\",\"name\":", e->kind == XE_INSTANT ? "i" : "X");
    cucap_json_fputs_string(f, xp_s(m, e->name));
    fputs(",\"cat\":", f);
    cucap_json_fputs_string(f, e->cat ? xp_s(m, e->cat) : "cuda");
    fprintf(f, ",\"pid\":%u,\"tid\":%u,\"ts\":", m->pid, tid);
    us(f, e->ts);
    if (e->kind == XE_SLICE) {
      fputs(",\"dur\":", f);
      us(f, e->dur);
    } else {
      fputs(",\"s\":\"t\"", f);
    }
    fputs(",\"args\":{", f);
    for (int k = 0; k < e->nargs; k++) {
      if (k)
        fputc(',', f);
      cucap_json_fputs_string(f, xp_s(m, e->args[k].key));
      fputc(':', f);
      if (e->args[k].is_str)
        cucap_json_fputs_string(f, xp_s(m, (uint32_t)e->args[k].u));
      else
        fprintf(f, "%" PRIu64, e->args[k].u);
    }
    fputs("}}", f);
    /* flows bind to the slices that enclose their timestamps */
    if (e->flow_out) {
      fprintf(f, ",\n{\"ph\":\"s\",\"name\":\"launch\",\"cat\":\"flow\",\"id\":%" PRIu64
                 ",\"pid\":%u,\"tid\":%u,\"ts\":",
              e->flow_out, m->pid, tid);
      us(f, e->ts);
      fputc('}', f);
    }
    if (e->flow_in) {
      fprintf(f, ",\n{\"ph\":\"f\",\"bp\":\"e\",\"name\":\"launch\",\"cat\":\"flow\",\"id\":%" PRIu64
                 ",\"pid\":%u,\"tid\":%u,\"ts\":",
              e->flow_in, m->pid, tid);
      us(f, e->ts);
      fputc('}', f);
    }
  }
  fputs("\n]}\n", f);
  free(ev);
  return ferror(f) || fflush(f) != 0 ? CUCAP_ERR_IO : CUCAP_OK;
}
