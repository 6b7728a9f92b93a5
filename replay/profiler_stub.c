/* profiler_stub.c - the profiling backend when cucap is built without the
 * CUPTI backend (cucap_profiler.h): it collects nothing, and every section
 * it owns says so and what to do. `cucap replay --profile` then still gives
 * the CUDA-event timeline and the program diagnosis. The CUPTI backend
 * (replay/profile_cupti*.c) implements the same functions and replaces this
 * file. */
#include <stdio.h>
#include <string.h>

#include "cucap_profiler.h"

#define NOT_BUILT "the CUPTI profiling backend is not built into this cucap"

const char *cucap_profiler_backend_name(void) { return "none"; }

cucap_status cucap_profiler_create(const cucap_profiler_options *o, cucap_profile *out,
                                   cucap_profiler **prof) {
  *prof = NULL;
  char cupti[512] = "";
  int found = cucap_profiler_find_cupti(o->libcupti, cupti, sizeof cupti, NULL, 0) == CUCAP_OK;
  char have[600];
  snprintf(have, sizeof have, "%s%s%s", found ? " (libcupti is there: " : "",
           found ? cupti : "", found ? ")" : "");
  if (o->timeline)
    cucap_profile_set_section(out, CUCAP_PROFILE_TIMELINE, CUCAP_PROFILE_UNAVAILABLE, "",
                              "%s%s: use a cucap built with replay/profile_cupti*.c for "
                              "CUPTI activity timing", NOT_BUILT, have);
  if (o->metric_set != CUCAP_METRICS_NONE)
    cucap_profile_set_section(out, CUCAP_PROFILE_METRICS, CUCAP_PROFILE_UNAVAILABLE, "",
                              "%s%s: hardware metrics need it (use a cucap built with "
                              "replay/profile_cupti*.c)", NOT_BUILT, have);
  if (o->pc_sampling || o->sass_metrics)
    cucap_profile_set_section(out, CUCAP_PROFILE_PCSAMPLING, CUCAP_PROFILE_UNAVAILABLE, "",
                              "%s%s: PC sampling needs it (use a cucap built with "
                              "replay/profile_cupti*.c)", NOT_BUILT, have);
  return CUCAP_ERR_UNSUPPORTED;
}

const cucap_replay_observer *cucap_profiler_observer(cucap_profiler *prof) {
  (void)prof;
  return NULL;
}

cucap_status cucap_profiler_finish(cucap_profiler *prof) {
  (void)prof;
  return CUCAP_ERR_UNSUPPORTED;
}

void cucap_profiler_destroy(cucap_profiler *prof) { (void)prof; }

cucap_status cucap_profiler_probe_run(const cucap_profiler_probe_options *o,
                                      cucap_profiler_probe *out) {
  (void)o;
  memset(out, 0, sizeof *out);
  snprintf(out->activity_msg, sizeof out->activity_msg, "not checked: %s", NOT_BUILT);
  snprintf(out->counters_msg, sizeof out->counters_msg, "not checked: %s", NOT_BUILT);
  snprintf(out->pc_sampling_msg, sizeof out->pc_sampling_msg, "not checked: %s", NOT_BUILT);
  snprintf(out->sass_metrics_msg, sizeof out->sass_metrics_msg, "not checked: %s", NOT_BUILT);
  return CUCAP_OK;
}
