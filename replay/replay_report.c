/* replay_report.c - prints a cucap_replay_report as text or as members of
 * the JSON object of `cucap replay` (the caller opens and closes it). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cucap_json.h"
#include "cucap_replay.h"
#include "cucap_status.h"

/* ---------------------------------------------------------------- report */

void cucap_replay_report_print(const cucap_replay_report *p, FILE *f,
                               int json) {
  if (json) {
    fprintf(f, ",\"error\":");
    cucap_json_fputs_string(f, p->error);
    fprintf(f, ",\"records\":%" PRIu64 ",\"loops\":%u,\"executed\":%" PRIu64
            ",\"skipped\":%" PRIu64 ",\"ignored\":%" PRIu64
            ",\"bodyless_calls\":%" PRIu64
            ",\"launches\":%" PRIu64 ",\"partial\":%s",
            p->records, p->loops, p->executed, p->skipped, p->ignored,
            p->bodyless_calls, p->launches, p->partial ? "true" : "false");
    fprintf(f, ",\"skipped_ops\":{");
    for (unsigned i = 0; i < p->skip_kinds; i++) {
      if (i)
        fputc(',', f);
      cucap_json_fputs_string(f, p->skip_name[i]);
      fprintf(f, ":%" PRIu64, p->skip_count[i]);
    }
    fprintf(f, "},\"fixed_address\":%s,\"fixed_ranges\":%" PRIu64
            ",\"fixed_bytes\":%" PRIu64 ",\"relocated_allocs\":%" PRIu64
            ",\"patched_params\":%" PRIu64 ",\"patched_handles\":%" PRIu64
            ",\"pinned_host_ranges\":%" PRIu64
            ",\"pinned_host_failed\":%" PRIu64 ",\"env_warnings\":%d",
            p->fixed_address ? "true" : "false", p->fixed_ranges,
            p->fixed_bytes, p->relocated_allocs, p->patched_params,
            p->patched_handles, p->pinned_host_ranges, p->pinned_host_failed,
            p->env_warnings);
    fprintf(f, ",\"pinned_host_device_backed\":%" PRIu64
            ",\"patched_pointers\":%" PRIu64 ",\"found_by_name\":%" PRIu64
            ",\"substituted\":%" PRIu64 ",\"substituted_ops\":{",
            p->pinned_host_device_backed, p->patched_pointers, p->found_by_name,
            p->substituted);
    for (unsigned i = 0; i < p->subst_kinds; i++) {
      if (i)
        fputc(',', f);
      cucap_json_fputs_string(f, p->subst_name[i]);
      fprintf(f, ":%" PRIu64, p->subst_count[i]);
    }
    fputc('}', f);
    fprintf(f, ",\"replay_wall_s\":%.6f,\"gpu_time_s\":%.6f"
            ",\"recorded_wall_s\":%.6f,\"ratio\":%.3f",
            p->replay_wall_s, p->gpu_time_s, p->recorded_wall_s, p->ratio);
    return;
  }
  fprintf(f, "replay: %" PRIu64 " records x %u loop(s): %" PRIu64
          " ops executed (%" PRIu64 " launches), %" PRIu64 " skipped, %" PRIu64
          " informational (%" PRIu64 " calls without a body)\n",
          p->records, p->loops, p->executed, p->launches, p->skipped,
          p->ignored, p->bodyless_calls);
  if (p->partial)
    fprintf(f, "  capture damaged, replayed what was recovered: %s\n",
            p->partial_problem);
  for (unsigned i = 0; i < p->skip_kinds; i++)
    fprintf(f, "  skipped: %s x%" PRIu64 "\n", p->skip_name[i],
            p->skip_count[i]);
  for (unsigned i = 0; i < p->subst_kinds; i++)
    fprintf(f, "  skipped with a substitute: %s x%" PRIu64 "\n",
            p->subst_name[i], p->subst_count[i]);
  fprintf(f, "memory: %s; %" PRIu64 " range(s), %" PRIu64
          " MiB at recorded addresses; %" PRIu64
          " allocation(s) relocated, %" PRIu64 " kernel parameter(s) patched",
          p->fixed_address ? "fixed addresses"
          : p->fixed_ranges ? "partly fixed addresses"
                            : "relocated",
          p->fixed_ranges, p->fixed_bytes >> 20, p->relocated_allocs,
          p->patched_params);
  if (p->patched_handles)
    fprintf(f, ", %" PRIu64 " texture/surface handle(s) rewritten in uploaded data",
            p->patched_handles);
  if (p->patched_pointers)
    fprintf(f, ", %" PRIu64 " pointer(s) in uploaded data patched",
            p->patched_pointers);
  if (p->found_by_name)
    fprintf(f, ", %" PRIu64 " function(s) found by name (module not in the capture)",
            p->found_by_name);
  if (p->pinned_host_ranges || p->pinned_host_failed || p->pinned_host_device_backed)
    fprintf(f, "; %" PRIu64 " pinned host range(s) at recorded addresses, %" PRIu64
            " not placed", p->pinned_host_ranges, p->pinned_host_failed);
  if (p->pinned_host_device_backed)
    fprintf(f, ", %" PRIu64 " backed by device memory inside reserved ranges",
            p->pinned_host_device_backed);
  fputc('\n', f);
  fprintf(f, "time: replay %.6f s", p->replay_wall_s);
  if (p->gpu_time_s >= 0)
    fprintf(f, ", GPU (events) %.6f s", p->gpu_time_s);
  fprintf(f, ", recorded program %.6f s", p->recorded_wall_s);
  if (p->ratio > 0)
    fprintf(f, ", ratio recorded/replay %.2fx", p->ratio);
  fprintf(f, "\n");
}