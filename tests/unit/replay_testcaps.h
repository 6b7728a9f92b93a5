/* replay_testcaps.h - small captures for the replayer's unit tests, built
 * with the writer and the generated builders (replay_testcaps.c), and the
 * helpers they are written with, for tests that write captures of their
 * own. Linked into every test_replay*, test_profiler and test_share. */
#ifndef CUCAP_REPLAY_TESTCAPS_H
#define CUCAP_REPLAY_TESTCAPS_H

#include "cucap_schema.h"
#include "cucap_writer.h"

#define N 1024                    /* elements of each vec_add buffer */
#define W2 256                    /* write_capture2: bytes per row */
#define H2 4                      /* write_capture2: rows */
#if defined(__SANITIZE_THREAD__)
#define PIN_FREE 0x7f1200001000ULL /* inside ThreadSanitizer's application window */
#else
#define PIN_FREE 0x6e1200001000ULL /* CAP_PINNED: the placeable host range */
#endif

/* write_capture flags */
enum { CAP_CORRUPT_DTOH = 1, CAP_HOSTFUNC = 2, CAP_SM100 = 4, CAP_GRAPH = 8,
       CAP_PINNED = 16, CAP_ATTR_LATE = 32 };
/* CAP_ATTR_LATE: the launch uses 96 KiB of dynamic shared memory, and the
 * cuFuncSetAttribute that allows it comes before the function's record (a
 * handle the recorder learned late): the replay applies it at the launch */
#define SMEM_BIG (96 * 1024)

/* launches of vec_add in write_capture (default 1) */
extern long NLAUNCH;
/* write_capture's module image when set (a fatbin holding vec_add) instead
 * of its PTX; the caller owns it */
extern const void *TC_IMAGE;
extern size_t TC_IMAGE_SIZE;

/* A PTX vec_add module, three device buffers at fixed addresses, HtoD,
 * NLAUNCH launches, DtoH, exit snapshot (plus what the flags add). Exits the
 * process on failure (TU_REQUIRE). */
void write_capture(const char *path, int flags);
/* A library kernel via cuLaunchKernelEx, streams/events, memset, 2D copies
 * on the per-thread stream, a Unified DtoH. */
void write_capture2(const char *path);
/* write_capture_nondet flags */
enum { NONDET_FLIP = 1 };
/* vec_add and a clock-like `stamp` kernel (the mock writes a monotonic
 * clock), DtoH of its nondeterministic output and of deterministic data,
 * Manual / AfterLaunch / Exit snapshots and LaunchHash records; NONDET_FLIP
 * flips a recorded byte of the deterministic copy. */
void write_capture_nondet(const char *path, int flags);

/* Writing a capture by hand: tables are built on the caller's builder b,
 * records appended to its writer w. Each exits the process on failure
 * (TU_REQUIRE). */
/* Finishes the FileHeader table hdr built on b, creates path with it as
 * the header, and resets b for the records. */
cucap_writer *tc_capture_create(const char *path, cucap_fbb *b, cucap_fb_ref hdr);
/* A new builder *b, and path created with a header of the current format
 * (major and minor) and nothing else. */
cucap_writer *tc_capture_open(const char *path, cucap_fbb **b);
/* Ends the Record table started on b, appends it to w and resets b. */
void tc_record_append(cucap_fbb *b, cucap_writer *w);
/* Stores p[0, n) in w as a blob; its hash as the schema's struct. */
cucap_fb_hash128 tc_blob_put(cucap_writer *w, const void *p, size_t n);
/* Closes the capture, destroys the writer and the builder (both set NULL). */
void tc_capture_close(cucap_fbb **b, cucap_writer **w);
#endif
