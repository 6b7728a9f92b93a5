/* cucap_clock.h - the monotonic clock of cucap: CLOCK_MONOTONIC read as ns
 * (timestamps, deadlines, durations kept as integers) or as seconds (wall
 * times in reports). Header-only and allocation-free, so that the recorder
 * and the interposer (inside the recorded app) call it without a link
 * dependency; thread-safe (clock_gettime). Returns values, nothing to free. */
#ifndef CUCAP_CLOCK_H
#define CUCAP_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Clock id in seconds, as tv_sec + tv_nsec * 1e-9. */
static inline double cucap_clock_read_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CLOCK_MONOTONIC in seconds (differences are durations). */
static inline double cucap_clock_now_s(void) { return cucap_clock_read_s(CLOCK_MONOTONIC); }

/* CLOCK_MONOTONIC in ns. */
static inline uint64_t cucap_clock_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
