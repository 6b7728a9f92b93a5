/* cucap_derive.h - smaller captures made from a capture: `cucap trim` (a
 * range of it) and `cucap extract` (one kernel launch), plus the C program
 * `extract --emit-c` writes.
 *
 * A derived capture starts with a state prefix: the records of the source
 * that create every object still live at the cut (contexts, the modules and
 * functions the kept records use, allocations, streams, events, instantiated
 * graphs, module-global uploads, callstacks, module maps, device
 * properties), followed by one HtoD upload per device region with its
 * contents at the cut. Those contents come from a Snapshot record of the
 * source taken there (`cucap record --snapshot=range:NAME` or `launch:N`) or,
 * with `replay`, from replaying the source up to the cut on a GPU
 * (cucap_state_observer.h). Then come the kept records of the source,
 * unchanged (same seq, tid, times, handles, addresses). FileHeader.origin
 * says which command made the file, from what, which part, where the
 * contents came from and how many records form the state prefix.
 *
 * Module globals: uploads into them before the cut are kept; values that
 * kernels stored there are not (no snapshot covers them). Pinned host memory
 * is re-created by the replayer but its contents at the cut are not stored.
 *
 * Dependencies: reads with replay/ (cucap_reader.h, and cucap_replay.h for
 * `replay`), writes with capture/ (cucap_writer.h): share/ sits above both,
 * like tools/ (docs/design.md). Not thread-safe; one call at a time per
 * reader. Everything is written to out_path; nothing is returned that needs
 * freeing. */
#ifndef CUCAP_DERIVE_H
#define CUCAP_DERIVE_H

#include <stddef.h>
#include <stdint.h>

#include "cucap_range.h"
#include "cucap_reader.h"
#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cucap_derive_options {
  const char *source_path; /* the source file (Origin.source; needed by replay) */
  const char *selection;   /* Origin.selection as the user wrote it (NULL: canonical) */
  int replay;              /* contents at the cut by replaying the source */
  const char *libcuda;     /* replay: driver library (NULL: libcuda.so.1) */
  int device;              /* replay: device ordinal */
  int minimal;             /* extract: only the allocations that pointer
                              parameters of the launch point into */
  int level;               /* zstd level of the output (0: default) */
  int keep_all_archs;      /* module images copied whole; by default a
                              fatbin keeps only the SASS the recorded
                              devices run and the PTX of the highest
                              virtual architecture <= theirs (for newer
                              GPUs to JIT); see derive_image.c */
  const struct cucap_replay_observer *watch; /* replay: one more observer of
                              it, after the one reading the state (the
                              CLI's progress line); NULL: none */
} cucap_derive_options;

void cucap_derive_options_init(cucap_derive_options *o);

typedef struct cucap_derive_report {
  int state;                   /* cucap.fb.StateSource of the contents */
  uint64_t source_records;     /* records in the source */
  uint64_t cut;                /* source record where the state was taken */
  uint64_t first_record, last_record; /* source records kept (inclusive) */
  uint64_t records_written;
  uint64_t state_records;      /* of those, the state prefix */
  uint64_t regions, region_bytes; /* device regions uploaded */
  uint64_t launches, launch_first, launch_last; /* launches kept */
  uint64_t modules_live, modules_kept;
  uint64_t images, images_reduced;     /* module images written / of those, reduced */
  uint64_t image_bytes_in, image_bytes_out; /* their sizes in the source / the output */
  char archs[64];              /* what was kept, e.g. "sm_90 + PTX <= compute_90" */
  uint64_t out_bytes;          /* size of the file written */
  /* extract */
  uint64_t launch_index;
  char kernel[256];            /* mangled name of the extracted kernel */
  int have_expected;           /* an expected result is stored */
  uint64_t expected_regions;
  uint64_t expected_checksum;  /* FNV-1a 64 of the result regions, in address
                                  order (what the emitted program prints) */
  /* failure */
  char error[512];
  cucap_status status;         /* what the failure is to the user (what
                                  `cucap trim/extract` exit with is tools/'
                                  business): CUCAP_OK; CUCAP_ERR_INVALID_ARG
                                  the selection is not in the capture or no
                                  contents source; CUCAP_ERR_CORRUPT damaged
                                  input; CUCAP_ERR_IO / NOMEM the machine;
                                  CUCAP_ERR_ENV / UNSUPPORTED / CUDA the
                                  replay (--replay) */
} cucap_derive_report;

/* Writes the part `range` of src to out_path. */
cucap_status cucap_trim(cucap_reader *src, const cucap_range_spec *range,
                        const char *out_path, const cucap_derive_options *o,
                        cucap_derive_report *rep);

/* Which launch `extract` takes: launch_index, or the nth (0-based) launch of
 * the kernel named `kernel` (compared by match(), default strcmp == 0 on the
 * mangled name). */
typedef struct cucap_launch_select {
  uint64_t launch_index;
  const char *kernel;    /* NULL: by launch_index */
  uint64_t nth;
  int (*match)(void *user, const char *mangled, const char *pattern);
  void *match_user;
} cucap_launch_select;

/* Writes a standalone capture of one launch to out_path: its module, the
 * memory it can read, the launch, and the memory after it as an Exit
 * snapshot (the expected result; from a recorded AfterLaunch snapshot or
 * the replay) so that `cucap replay --verify` checks it. */
cucap_status cucap_extract(cucap_reader *src, const cucap_launch_select *sel,
                           const char *out_path, const cucap_derive_options *o,
                           cucap_derive_report *rep);

/* Writes DIR/repro.c, DIR/Makefile and the data files (module image,
 * argument block, memory before the launch) of an extracted capture: a
 * program that needs only cuda.h and libcuda, places the memory at the
 * recorded addresses (or relocates pointer parameters), launches the kernel
 * and prints "checksum 0x%016llx" of the result regions and whether it
 * matches the recorded one. msg receives the reason on failure. */
cucap_status cucap_emit_c(cucap_reader *extracted, const char *dir, char *msg,
                          size_t msg_size);

#ifdef __cplusplus
}
#endif
#endif
