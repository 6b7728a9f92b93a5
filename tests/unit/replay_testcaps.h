/* replay_testcaps.h - small captures for the replayer's unit tests, built
 * with the writer and the generated builders (replay_testcaps.c). Shared by
 * test_replay.c and test_replay_observer.c. */
#ifndef CUCAP_REPLAY_TESTCAPS_H
#define CUCAP_REPLAY_TESTCAPS_H

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
#endif
