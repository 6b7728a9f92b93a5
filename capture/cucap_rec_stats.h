/* cucap_rec_stats.h - what recording costs, per driver entry point (issue 10:
 * "profile the recorder on the slow programs first").
 *
 * Off by default. Enabled by CUCAP_OPTIONS=stats (`cucap record --stats`) or
 * CUCAP_STATS=1 in the environment. When enabled, every recorded call adds
 * to per-thread counters (no lock, no allocation after the thread's first
 * call): calls, time spent in the wrapper outside the real driver call, and
 * calls that took the slow path (the generic FlatBuffers builder instead of a
 * hand-laid record). Also counted: callstack walks (time, including the
 * Callstack records of new stacks), module-map rescans, and the time spent
 * appending call records (the writer's record lock, waits included, and
 * the copy into its chunk). Time is read with rdtsc on x86-64
 * (converted to ns with a rate calibrated against CLOCK_MONOTONIC between
 * enabling and the report), clock_gettime elsewhere. When disabled the cost
 * is one load of cucap_rec_stats_on and an untaken branch per call.
 *
 * At shutdown (cucap_rec_stats_report, from the recorder's exit functions)
 * the table is written into the capture as a Note {kind "stats", text} and
 * logged at info level through the log sink; never to stdout. `cucap record
 * --stats` prints the Note after the program has exited.
 *
 * Thread-safe. Per-thread blocks are kept until process exit (threads that
 * exited still count). */
#ifndef CUCAP_REC_STATS_H
#define CUCAP_REC_STATS_H

#include <stddef.h>
#include <stdint.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "cucap_clock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when enabled (set once by cucap_rec_stats_init, read on the hot path). */
extern int cucap_rec_stats_on;

/* rdtsc on x86-64, not cucap_clock_now_ns: it is read twice per recorded
 * call, and a TSC read costs a fraction of clock_gettime. */
static inline uint64_t cucap_rec_stats_clock(void) {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return cucap_clock_now_ns();
#endif
}

/* Enables the counters for `napis` entry points when `enable` (called once,
 * at start, by the interposer); name(i) gives entry point i's name for the
 * report (a static string). */
void cucap_rec_stats_init(int enable, size_t napis, const char *(*name)(size_t api));

/* One recorded call of entry point api: `overhead` clock ticks outside the
 * real call; slow: it took the generic (slow) recording path. */
void cucap_rec_stats_call(uint32_t api, uint64_t overhead, int slow);

enum {
  CUCAP_STATS_STACK_WALK = 0,  /* cucap_rec_stack_id */
  CUCAP_STATS_MODMAP_SCAN = 1, /* module-map rescans */
  CUCAP_STATS_APPEND_LOCK = 2, /* appending a call record: the writer's
                                  record lock (waits included) + the copy */
  CUCAP_STATS_HOSTFN = 3,      /* host functions enqueued to read a copy result
                                  before the program reused its buffer */
  CUCAP_STATS_NEXTRA = 4
};
/* One event of kind `what` that took `ticks`. */
void cucap_rec_stats_add(int what, uint64_t ticks);

/* Writes the report (Note + info log). Idempotent. */
void cucap_rec_stats_report(void);

#ifdef __cplusplus
}
#endif
#endif
