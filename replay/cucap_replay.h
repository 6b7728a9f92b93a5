/* cucap_replay.h - re-executes the GPU work of a capture without the program. Used by `cucap replay` (tools/).
 *
 * The replayer loads libcuda.so.1 with dlopen at run time (never linked) and
 * fetches every entry point through cuGetProcAddress_v2. It first places the
 * recorded device allocations at their recorded virtual addresses
 * (cuMemAddressReserve of 32 MiB-aligned super-ranges with the start as
 * hint - the real driver ignores hints with less alignment - then
 * cuMemCreate/cuMemMap over the 2 MiB-aligned union of the ranges; the
 * super-ranges are held with PROT_NONE host mappings from before libcuda is
 * loaded until their reservation) so argument blocks and pointers stored
 * in device memory stay valid; ranges that cannot be had are relocated
 * (pointer-sized kernel parameters are patched). Then it executes the records
 * in file order on one host thread; observers (verify, profile) watch it.
 *
 * Ownership: cucap_replay_run fills a caller-owned cucap_replay_report; it
 * holds no pointers that need freeing (fixed-size strings). Not thread-safe:
 * one replay per process at a time (the driver state is process-wide). */
#ifndef CUCAP_REPLAY_H
#define CUCAP_REPLAY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cucap_replay_options {
  unsigned loops;        /* --loop N; 0 or 1 = once */
  int sync_each;         /* --sync: synchronize after every op */
  int device;            /* --device N */
  int relocate;          /* --relocate: never place at fixed addresses */
  int strict;            /* --strict: refuse captures with unreplayable calls */
  int allow_partial;     /* --allow-partial: replay what a damaged file holds */
  const char *libcuda;   /* NULL = "libcuda.so.1" (dlopen search path) */
  /* The caller's process exits soon after cucap_replay_run returns (the
   * command-line tool's profiles): the driver's costly releases - module
   * unloads, page-locked host buffers and the primary context, most of a
   * profile's teardown - are left to the process exit, which releases
   * them at once. Every other object, and all of the replayer's
   * own host memory, is released as usual. */
  int exit_after;
  /* Observers of the run (cucap_replay_observer.h), called in this order.
   * Owned by the caller; must stay valid during cucap_replay_run. */
  const struct cucap_replay_observer *const *observers;
  size_t nobservers;
} cucap_replay_options;

void cucap_replay_options_init(cucap_replay_options *o);

#define CUCAP_REPLAY_MAX_SKIP_NAMES 16

typedef struct cucap_replay_report {
  /* what was done */
  uint64_t records;          /* records read (per loop) */
  uint64_t executed;         /* ops executed (all loops) */
  uint64_t skipped;          /* ops that could not be replayed (all loops) */
  uint64_t launches;         /* kernel + graph launches executed (all loops) */
  uint64_t ignored;          /* informational records (callstacks, ...) */
  uint64_t bodyless_calls;   /* of those: driver calls recorded without a
                                body (queries; nothing to replay) */
  unsigned loops;
  int partial;               /* capture was damaged; replayed what was recovered */
  char partial_problem[256];
  /* skipped ops by name (first CUCAP_REPLAY_MAX_SKIP_NAMES distinct names) */
  unsigned skip_kinds;
  char skip_name[CUCAP_REPLAY_MAX_SKIP_NAMES][48];
  uint64_t skip_count[CUCAP_REPLAY_MAX_SKIP_NAMES];
  /* memory placement */
  int fixed_address;         /* 1: recorded VAs placed at their addresses */
  uint64_t fixed_ranges, fixed_bytes;  /* super-ranges reserved, bytes
                                          mapped at fixed VAs */
  uint64_t relocated_allocs;           /* allocations replayed elsewhere */
  uint64_t patched_params;             /* kernel params rewritten (relocation,
                                          texture/surface handles) */
  uint64_t patched_handles;            /* texture/surface handle values
                                          rewritten in uploaded host data */
  uint64_t pinned_host_ranges;         /* page-locked host ranges re-created at
                                          their recorded addresses */
  uint64_t pinned_host_failed;         /* ... that could not be */
  uint64_t pinned_host_device_backed;  /* ... inside a reserved device range:
                                          device memory stands in for them */
  uint64_t patched_pointers;           /* 8-byte values inside uploaded data
                                          (HtoD payloads) that pointed into a
                                          relocated range, rewritten */
  uint64_t found_by_name;              /* functions whose module or CUkernel
                                          the capture never defined, found by
                                          name in a loaded library/module */
  /* ops replayed with a stand-in (a host node as an empty node, ...), by
   * name; refused with --strict like skipped ones */
  uint64_t substituted;
  unsigned subst_kinds;
  char subst_name[CUCAP_REPLAY_MAX_SKIP_NAMES][64];
  uint64_t subst_count[CUCAP_REPLAY_MAX_SKIP_NAMES];
  /* copies from arrays to host memory captured into a graph (all passes):
   * they run when the graph does, into a buffer no observer is shown, so
   * their bytes cannot be compared (verify counts them as unverifiable) */
  uint64_t captured_host_reads;
  /* environment */
  int env_warnings;
  /* timing */
  double replay_wall_s;      /* all loops */
  double gpu_time_s;         /* event-measured GPU span, all loops (-1: unknown) */
  double recorded_wall_s;    /* recorded program (header start -> end) */
  double ratio;              /* recorded_wall / (replay_wall / loops) */
  /* failure */
  cucap_status status;       /* what stopped the replay (CUCAP_OK: nothing) */
  char error[512];           /* "" if none */
} cucap_replay_report;

/* Replays `path`. Always fills *rep. Returns CUCAP_OK when everything
 * replayed, or the error that stopped the replay (rep->status; rep->error
 * says why). Verdicts of observers (verify's mismatches) are theirs: they
 * never change the status. Progress and warnings go to cucap_log. */
cucap_status cucap_replay_run(const char *path,
                              const cucap_replay_options *opts,
                              cucap_replay_report *rep);

/* Prints the report. Text (json = 0): the "replay:", "memory:" and "time:"
 * lines. JSON (json = 1): the report's members from "error" to "ratio",
 * each preceded by a comma, for an object the caller opens (with "status"
 * and whatever it adds first) and closes, so that observers' reports
 * (cucap_verify_report_print) can follow in the same object. The "stopped:"
 * line of a run that failed after it began is the caller's too. */
void cucap_replay_report_print(const cucap_replay_report *rep, FILE *out,
                               int json);

#ifdef __cplusplus
}
#endif
#endif
