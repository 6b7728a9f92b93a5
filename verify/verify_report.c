/* verify_report.c - prints a cucap_verify_report: the "verify:" line of
 * `cucap replay --verify` and its members of the replay's JSON object. */
#include <inttypes.h>
#include <stdio.h>

#include "cucap_json.h"
#include "cucap_verify.h"

void cucap_verify_report_print(const cucap_verify_report *p, FILE *f, int json) {
  if (json) {
    fprintf(f, ",\"verify\":%d,\"copies_checked\":%" PRIu64
            ",\"copies_unverifiable\":%" PRIu64 ",\"bytes_checked\":%" PRIu64
            ",\"bytes_matched\":%" PRIu64 ",\"snapshot_regions_checked\":%" PRIu64
            ",\"launch_hashes_checked\":%" PRIu64 ",\"mismatches\":%" PRIu64
            ",\"first_mismatch\":",
            p->mode, p->copies_checked, p->copies_unverifiable,
            p->bytes_checked, p->bytes_matched, p->snapshot_regions_checked,
            p->launch_hashes_checked, p->mismatches);
    cucap_json_fputs_string(f, p->first_mismatch);
    fprintf(f, ",\"verify_passes\":%u,\"nondeterministic_bytes\":%" PRIu64
            ",\"nondeterministic_copies\":%" PRIu64
            ",\"nondeterministic_regions\":%" PRIu64
            ",\"reordered_bytes\":%" PRIu64
            ",\"nondeterministic_kernels\":",
            p->verify_passes, p->nondet_bytes, p->nondet_copies,
            p->nondet_regions, p->reordered_bytes);
    cucap_json_fputs_string(f, p->nondet_kernels);
    fprintf(f, ",\"nondeterministic\":");
    cucap_json_fputs_string(f, p->nondet_detail);
    fprintf(f, ",\"relocated_pointer_words\":%" PRIu64 ",\"relocated_pointer_offsets\":",
            p->reloc_ptr_words);
    cucap_json_fputs_string(f, p->reloc_ptr_offsets);
    fprintf(f, ",\"perturbed_passes\":%u,\"perturbed_launches\":%" PRIu64
            ",\"perturb_note\":", p->perturbed_passes, p->perturbed_launches);
    cucap_json_fputs_string(f, p->perturb_note);
    fprintf(f, ",\"host_written_bytes\":%" PRIu64 ",\"host_written_checks\":%" PRIu64
            ",\"host_written\":", p->host_written_bytes, p->host_written_checks);
    cucap_json_fputs_string(f, p->host_written_detail);
    return;
  }
  if (p->mode) {
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
}
