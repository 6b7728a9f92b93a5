/* cucap_diff.h - where two captures of the same program differ (`cucap
 * diff A B`).
 *
 * Handles, host pointers, thread ids and times differ between any two runs,
 * so nothing is compared by value that a rerun changes:
 *   * API sequence: per thread (threads paired in order of first
 *     appearance), the calls as (name, result, what they did: body kind,
 *     kernel name, copy kind and size, allocation size); the first
 *     divergence is reported;
 *   * launches: aligned by kernel name and host callstack (object + offset
 *     of each frame, stable across runs of the same binaries), the k-th of
 *     each in A with the k-th in B; grid, block, shared memory and the
 *     argument block are compared: every 8-aligned word inside a parameter
 *     that points into a live device or pinned host allocation or a module
 *     global as (ordinal by creation order / global name, offset), host
 *     addresses of the same kind of region in both (stack, heap, anonymous
 *     memory, a file, driver-mapped device memory; from the ModuleMaps'
 *     address ranges) and stale pointer halves in padding counted apart
 *     (host_words), everything else byte for byte (docs/design.md, "Diff");
 *     unmatched launches are listed;
 *   * memory at verify points: the k-th DtoH copy of each thread (size and
 *     payload, with the first differing offset) and snapshot regions
 *     (aligned by reason, launch and allocation ordinal);
 *   * with two GPU timings tables (cucap_profile_table.h): per-kernel total
 *     time and mean metrics in A and B, the largest changes first
 *     (informational: times never make captures "differ").
 * The report is text, one finding per line, at most max_items per section.
 * Ownership: nothing returned needs freeing. */
#ifndef CUCAP_DIFF_H
#define CUCAP_DIFF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cucap_profile_table.h"
#include "cucap_reader.h"
#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cucap_diff_options {
  const cucap_profile_table *profile_a, *profile_b; /* both or neither */
  const char *(*call_name)(unsigned cbid);          /* NULL: "cbid N" */
  const char *(*kernel_name)(const char *mangled, char *buf, size_t size); /* NULL: as is */
  size_t max_items;                                 /* 0: 10 */
} cucap_diff_options;

typedef struct cucap_diff_report {
  int same;                      /* 1: no difference found */
  uint64_t calls_a, calls_b;
  int api_diverged;
  uint64_t launches_a, launches_b, launches_matched, launches_differ, launches_unmatched;
  uint64_t copies_compared, copies_differ;
  uint64_t regions_compared, regions_differ;
  uint64_t host_words;           /* argument words that differ only as host addresses */
  uint64_t host_launches;        /* launches (otherwise equal) holding them */
  uint64_t noeffect_launches;    /* launches whose argument bytes differ (no pointer
                                    into recorded memory among them) while the
                                    memory after them is the same in both
                                    captures (LaunchHash: record --hash-launches) */
  uint64_t kernels_profiled;
  char error[256];
} cucap_diff_report;

/* Compares a and b and writes the findings to out. Errors: a damaged
 * capture (its status; the report says which), CUCAP_ERR_NOMEM, CUCAP_ERR_IO. */
cucap_status cucap_diff(cucap_reader *a, cucap_reader *b, FILE *out,
                        const cucap_diff_options *o, cucap_diff_report *rep);

#ifdef __cplusplus
}
#endif
#endif
