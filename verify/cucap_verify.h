/* cucap_verify.h - `replay --verify`: an observer of the replay
 * (cucap_replay_observer.h) that compares what the replay copies back and
 * snapshots with what the recording holds, and tells nondeterministic bytes
 * (they differ between replays) from real differences. Its verdict is its
 * own report (cucap_verify_report), never the replay's.
 *
 * The caller creates the verifier, puts its observer first in
 * cucap_replay_options.observers and runs the replay; the verdict is in
 * cucap_verify_get_report once the run is over. cucap_verify_replay_run
 * does all three. Ownership: the verifier is the caller's
 * (cucap_verify_destroy, NULL ok); its observer and its report stay valid
 * until then. The options are copied at create. */
#ifndef CUCAP_VERIFY_H
#define CUCAP_VERIFY_H

#include <stdint.h>
#include <stdio.h>

#include "cucap_replay.h"
#include "cucap_replay_observer.h"
#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cucap_verify_mode {
  CUCAP_VERIFY_NONE = 0,
  CUCAP_VERIFY_COPIES = 1, /* --verify: DtoH payloads + exit snapshot */
  CUCAP_VERIFY_LAUNCH = 2  /* --verify=launch: + LaunchHash records */
} cucap_verify_mode;

/* passes verification may add, beyond the planned ones, while bytes that
 * differ from the recording have agreed in every pass */
#define CUCAP_VERIFY_MAX_EXTRA 4

typedef struct cucap_verify_options {
  cucap_verify_mode mode;
  /* --verify-passes N: how many replays verification compares to tell
   * nondeterministic bytes (they differ between replays: clock values,
   * atomics order, floating-point atomics) from real differences.
   * 0 (default): one pass when it matches the recording; when it does not,
   * a second pass, then up to CUCAP_VERIFY_MAX_EXTRA more while some
   * differing byte has agreed in every pass, then one diagnostic pass that
   * names the kernels writing the nondeterministic bytes. 1: a single pass,
   * every difference is a mismatch. N >= 2: at least N passes, then as for 0.
   * Every pass (--loop included) is compared. */
  unsigned passes;
  int strict;            /* --strict: host-written differences are mismatches */
  unsigned loops;        /* the replay's --loop (0 or 1 = once): passes it
                            runs anyway, which are never perturbed */
  int shared;            /* other observers watch the same run: no perturbed
                            passes (they would see the spin kernel) */
} cucap_verify_options;

/* All zero: no verification (mode CUCAP_VERIFY_NONE), passes as for 0. */
void cucap_verify_options_init(cucap_verify_options *o);

typedef struct cucap_verify_report {
  int mode;                  /* cucap_verify_mode (0: no verification ran) */
  uint64_t copies_checked, copies_unverifiable, bytes_checked, bytes_matched;
  uint64_t snapshot_regions_checked;
  uint64_t launch_hashes_checked;
  uint64_t mismatches;
  char first_mismatch[512];  /* "" if none */
  /* nondeterminism (more than one pass compared): bytes that differed
   * between replays of this run, counted once per recorded copy / region;
   * not mismatches. bytes_matched excludes them. */
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
} cucap_verify_report;

typedef struct cucap_verify cucap_verify;

/* NULL when out of memory. */
cucap_verify *cucap_verify_create(const cucap_verify_options *o);
const cucap_replay_observer *cucap_verify_observer(cucap_verify *v);
/* The verdict, final once the replay it watched has returned. Owned by the
 * verifier, valid until cucap_verify_destroy. */
const cucap_verify_report *cucap_verify_get_report(const cucap_verify *v);
void cucap_verify_destroy(cucap_verify *v);

/* CUCAP_ERR_MISMATCH when the report counts a mismatch, else CUCAP_OK. */
cucap_status cucap_verify_status(const cucap_verify_report *vr);

/* Prints the report as text (json = 0: the "verify:" line and the lines
 * after it; nothing when vr->mode is 0) or as JSON members from "verify" to
 * "host_written", each preceded by a comma (json = 1; printed for mode 0
 * too, with zeros), for the object cucap_replay_report_print's members are
 * in. */
void cucap_verify_report_print(const cucap_verify_report *vr, FILE *out, int json);

/* cucap_replay_run with a verifier first among ro's observers when
 * vo->mode is set (else a plain cucap_replay_run, *vrep zeroed); the
 * verifier's loops and shared come from ro, strict from either vo or ro
 * (the options of one command line). Fills *rep
 * as cucap_replay_run and *vrep with the verdict (vrep may be NULL).
 * Returns the replay's status, or CUCAP_ERR_MISMATCH when the replay ran
 * without an error and the verdict counts a mismatch. */
cucap_status cucap_verify_replay_run(const char *path, const cucap_replay_options *ro,
                                     const cucap_verify_options *vo,
                                     cucap_replay_report *rep, cucap_verify_report *vrep);

#ifdef __cplusplus
}
#endif
#endif
