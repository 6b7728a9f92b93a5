/* cucap_range.h - the part of a capture a command works on (`cucap trim
 * --range=...`): a range of kernel launches, an NVTX range, a profiler range
 * (cuProfilerStart .. cuProfilerStop) or a time window.
 *
 * Syntax (case-sensitive):
 *   launch:N | launch:A-B     launch indices (0-based, inclusive, A <= B)
 *   nvtx:NAME | nvtx:NAME@K   the K-th (0-based, default 0) NVTX range whose
 *                             push/start message is NAME (any domain)
 *   profiler | profiler@K     the K-th cuProfilerStart .. next cuProfilerStop
 *   time:T0-T1                records that start in [T0, T1]; each time is a
 *                             number (decimals allowed) with a unit ns, us, ms
 *                             or s (default ms), from the start of the capture
 * Parsing touches nothing but its arguments; no allocation. */
#ifndef CUCAP_RANGE_H
#define CUCAP_RANGE_H

#include <stddef.h>
#include <stdint.h>

#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cucap_range_kind {
  CUCAP_RANGE_LAUNCH = 1,
  CUCAP_RANGE_NVTX = 2,
  CUCAP_RANGE_PROFILER = 3,
  CUCAP_RANGE_TIME = 4
} cucap_range_kind;

#define CUCAP_RANGE_NAME_MAX 128

typedef struct cucap_range_spec {
  cucap_range_kind kind;
  uint64_t first, last;             /* LAUNCH: launch indices; TIME: ns */
  char name[CUCAP_RANGE_NAME_MAX];  /* NVTX: the message */
  uint64_t nth;                     /* NVTX, PROFILER: occurrence */
} cucap_range_spec;

/* Parses s into *out. CUCAP_ERR_INVALID_ARG with a one-line explanation in
 * msg (msg_size bytes, may be NULL) when s is not a range. */
cucap_status cucap_range_parse(const char *s, cucap_range_spec *out, char *msg,
                               size_t msg_size);

/* Writes the canonical text of r ("nvtx:step@3") into buf (snprintf
 * semantics); returns what snprintf returns. */
int cucap_range_format(const cucap_range_spec *r, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
