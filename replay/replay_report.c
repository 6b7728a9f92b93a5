/* replay_report.c - prints a cucap_replay_report as text or JSON (the
 * report of `cucap replay`, filled by the replayer and its observers). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cucap_replay.h"
#include "cucap_status.h"

/* ---------------------------------------------------------------- report */

static void rp_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

void cucap_replay_report_print(const cucap_replay_report *p, FILE *f,
                               int json) {
  if (json) {
    fprintf(f, "{\"status\":");
    rp_json_str(f, cucap_status_name(p->status));
    fprintf(f, ",\"exit_code\":%d,\"error\":", p->exit_code);
    rp_json_str(f, p->error);
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
      rp_json_str(f, p->skip_name[i]);
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
      rp_json_str(f, p->subst_name[i]);
      fprintf(f, ":%" PRIu64, p->subst_count[i]);
    }
    fputc('}', f);
    fprintf(f, ",\"replay_wall_s\":%.6f,\"gpu_time_s\":%.6f"
            ",\"recorded_wall_s\":%.6f,\"ratio\":%.3f",
            p->replay_wall_s, p->gpu_time_s, p->recorded_wall_s, p->ratio);
    fprintf(f, ",\"verify\":%d,\"copies_checked\":%" PRIu64
            ",\"copies_unverifiable\":%" PRIu64 ",\"bytes_checked\":%" PRIu64
            ",\"bytes_matched\":%" PRIu64 ",\"snapshot_regions_checked\":%" PRIu64
            ",\"launch_hashes_checked\":%" PRIu64 ",\"mismatches\":%" PRIu64
            ",\"first_mismatch\":",
            p->verify_mode, p->copies_checked, p->copies_unverifiable,
            p->bytes_checked, p->bytes_matched, p->snapshot_regions_checked,
            p->launch_hashes_checked, p->mismatches);
    rp_json_str(f, p->first_mismatch);
    fprintf(f, ",\"verify_passes\":%u,\"nondeterministic_bytes\":%" PRIu64
            ",\"nondeterministic_copies\":%" PRIu64
            ",\"nondeterministic_regions\":%" PRIu64
            ",\"reordered_bytes\":%" PRIu64
            ",\"nondeterministic_kernels\":",
            p->verify_passes, p->nondet_bytes, p->nondet_copies,
            p->nondet_regions, p->reordered_bytes);
    rp_json_str(f, p->nondet_kernels);
    fprintf(f, ",\"nondeterministic\":");
    rp_json_str(f, p->nondet_detail);
    fprintf(f, ",\"relocated_pointer_words\":%" PRIu64 ",\"relocated_pointer_offsets\":",
            p->reloc_ptr_words);
    rp_json_str(f, p->reloc_ptr_offsets);
    fprintf(f, ",\"perturbed_passes\":%u,\"perturbed_launches\":%" PRIu64
            ",\"perturb_note\":", p->perturbed_passes, p->perturbed_launches);
    rp_json_str(f, p->perturb_note);
    fprintf(f, ",\"host_written_bytes\":%" PRIu64 ",\"host_written_checks\":%" PRIu64
            ",\"host_written\":", p->host_written_bytes, p->host_written_checks);
    rp_json_str(f, p->host_written_detail);
    fprintf(f, "}\n");
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
  if (p->verify_mode) {
    /* one line with everything (tests/gpu/run.sh and the corpus logs show
     * it), then the first mismatch and where the nondeterministic bytes are */
    int nd = p->nondet_copies || p->nondet_regions;
    fprintf(f, "verify: %" PRIu64 " copies, %" PRIu64
            " snapshot regions, %" PRIu64 " launch hashes checked; %" PRIu64
            " of %" PRIu64 " bytes matched",
            p->copies_checked, p->snapshot_regions_checked,
            p->launch_hashes_checked, p->bytes_matched, p->bytes_checked);
    if (nd) {
      fprintf(f, ", %" PRIu64 " bytes nondeterministic (differ between "
              "replays; in %" PRIu64 " copies", p->nondet_bytes, p->nondet_copies);
      if (p->nondet_regions)
        fprintf(f, " and %" PRIu64 " regions", p->nondet_regions);
      if (p->reordered_bytes)
        fprintf(f, "; %" PRIu64 " of them the same in every replay but in another order "
                "than the recording", p->reordered_bytes);
      if (p->nondet_kernels[0])
        fprintf(f, ", written by kernels %s", p->nondet_kernels);
      fputc(')', f);
    }
    if (p->reloc_ptr_words)
      fprintf(f, ", %" PRIu64 " words are relocated pointers (driver-placed memory "
              "at another address: %s)", p->reloc_ptr_words, p->reloc_ptr_offsets);
    if (p->host_written_bytes)
      fprintf(f, ", %" PRIu64 " bytes written by the program's host code (not "
              "reproducible by a replay; in %" PRIu64 " copies/regions)",
              p->host_written_bytes, p->host_written_checks);
    int hw = p->host_written_bytes != 0;
    fprintf(f, "; %" PRIu64 " unverifiable; %s", p->copies_unverifiable,
            p->mismatches ? "MISMATCH"
            : nd && hw    ? "all deterministic bytes a replay reproduces matched"
            : nd          ? "all deterministic bytes matched"
            : hw          ? "all bytes a replay reproduces matched"
                          : "all bytes matched");
    if (p->verify_passes > 1 && p->perturbed_passes)
      fprintf(f, " (%u passes, %u perturbed)", p->verify_passes, p->perturbed_passes);
    else if (p->verify_passes > 1)
      fprintf(f, " (%u passes)", p->verify_passes);
    fputc('\n', f);
    if (p->first_mismatch[0])
      fprintf(f, "  %s\n", p->first_mismatch);
    if (p->perturb_note[0])
      fprintf(f, "  perturbed passes unavailable: %s\n", p->perturb_note);
    if (p->nondet_detail[0])
      fputs(p->nondet_detail, f);
    if (p->host_written_detail[0])
      fputs(p->host_written_detail, f);
  }
  if (p->error[0] && p->loops) /* the caller reports the error itself */
    fprintf(f, "stopped: %s\n", p->error);
}
