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
 * in file order on one host thread and optionally verifies results.
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

/* Process exit codes used by `cucap replay` (cucap_replay_exit_code). */
#define CUCAP_REPLAY_EXIT_OK 0
#define CUCAP_REPLAY_EXIT_MISMATCH 1 /* --verify found a difference */
#define CUCAP_REPLAY_EXIT_USAGE 2
#define CUCAP_REPLAY_EXIT_INPUT 3    /* bad capture, no code for this GPU, --strict refusal, no driver */
#define CUCAP_REPLAY_EXIT_FAILED 4   /* a driver call failed during replay; also
                                        the capture cannot be read (I/O, as
                                        every cucap command: CUCAP_EXIT_IO) */

typedef enum cucap_replay_verify_mode {
  CUCAP_REPLAY_VERIFY_NONE = 0,
  CUCAP_REPLAY_VERIFY_COPIES = 1, /* --verify: DtoH payloads + exit snapshot */
  CUCAP_REPLAY_VERIFY_LAUNCH = 2  /* --verify=launch: + LaunchHash records */
} cucap_replay_verify_mode;

typedef struct cucap_replay_options {
  cucap_replay_verify_mode verify;
  /* --verify-passes N: how many replays verification compares to tell
   * nondeterministic bytes (they differ between replays: clock values,
   * atomics order, floating-point atomics) from real differences.
   * 0 (default): one pass when it matches the recording; when it does not,
   * a second pass, then up to CUCAP_REPLAY_VERIFY_MAX_EXTRA more while some
   * differing byte has agreed in every pass, then one diagnostic pass that
   * names the kernels writing the nondeterministic bytes. 1: a single pass,
   * every difference is a mismatch. N >= 2: at least N passes, then as for 0.
   * Every pass (--loop included) is compared. */
  unsigned verify_passes;
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
/* passes verification may add, beyond the planned ones, while bytes that
 * differ from the recording have agreed in every pass */
#define CUCAP_REPLAY_VERIFY_MAX_EXTRA 4

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
  /* environment */
  int env_warnings;
  /* timing */
  double replay_wall_s;      /* all loops */
  double gpu_time_s;         /* event-measured GPU span, all loops (-1: unknown) */
  double recorded_wall_s;    /* recorded program (header start -> end) */
  double ratio;              /* recorded_wall / (replay_wall / loops) */
  /* verification */
  int verify_mode;
  uint64_t copies_checked, copies_unverifiable, bytes_checked, bytes_matched;
  uint64_t snapshot_regions_checked;
  uint64_t launch_hashes_checked;
  uint64_t mismatches;
  char first_mismatch[512];  /* "" if none */
  /* nondeterminism (--verify with more than one pass compared): bytes that
   * differed between replays of this run, counted once per recorded copy /
   * region; not mismatches. bytes_matched excludes them. */
  unsigned verify_passes;        /* passes compared (0: no verification ran) */
  uint64_t nondet_bytes;
  uint64_t reordered_bytes;      /* of nondet_bytes: the same in every pass, unlike the
                                    recording, in a copy that differs only in the order
                                    of its values (verify/verify_order.c) */
  uint64_t nondet_copies, nondet_regions; /* copies / snapshot or hash regions holding them */
  char nondet_kernels[256];      /* "k1, k2": kernels that wrote them ("" if none) */
  char nondet_detail[1024];      /* one line per copy/region ("  nondeterministic: ...\n") */
  /* bytes the recording may hold from the program's host code, which a
   * replay does not run: a copy's result read after a graph host node that
   * may run after the copy, managed memory the host code could write while
   * GPU work on it was in flight (see docs/design.md, "Verify"). Where such
   * bytes differ from the recording in every pass they are counted here,
   * not as mismatches (--strict: mismatches); bytes_matched excludes them. */
  /* perturbed passes (verify/verify_perturb.c): passes after the first
   * that verify asked for ran with a cucap spin kernel occupying SMs before
   * launches, so that scheduling-dependent bytes are seen to vary */
  unsigned perturbed_passes;
  uint64_t perturbed_launches;   /* launches preceded by the spin kernel, all passes */
  char perturb_note[128];        /* why none was possible ("" if it was, or was not needed) */
  /* relocated pointers (verify/verify_reloc.c): 8-byte words pointing into
   * driver-placed memory (device heap) that the replay has at another
   * address, all words of one segment off by the same distance; not
   * mismatches, not matched */
  uint64_t reloc_ptr_words;
  char reloc_ptr_offsets[160];   /* "+0x4000000 (12 words), ..." */
  uint64_t host_written_bytes;
  uint64_t host_written_checks;  /* copies / regions holding them */
  char host_written_detail[768]; /* one line per copy/region ("  host-written: ...\n") */
  /* failure */
  cucap_status status;
  int exit_code;             /* CUCAP_REPLAY_EXIT_* */
  char error[512];           /* "" if none */
} cucap_replay_report;

/* Replays `path`. Always fills *rep (rep->exit_code is what `cucap replay`
 * returns). Returns CUCAP_OK when everything replayed and verified,
 * CUCAP_ERR_MISMATCH on a verification difference, or the error that stopped
 * the replay (rep->error says why). Progress and warnings go to cucap_log. */
cucap_status cucap_replay_run(const char *path,
                              const cucap_replay_options *opts,
                              cucap_replay_report *rep);

/* Prints the report as text (json = 0) or one JSON object (json = 1). */
void cucap_replay_report_print(const cucap_replay_report *rep, FILE *out,
                               int json);

#ifdef __cplusplus
}
#endif
#endif
