/* cucap_analyze.h - diagnosis of a program from its capture alone (`cucap
 * analyze`, and the program section of `cucap replay --profile`).
 *
 * The analysis reads every record once (host timestamps t_enter/t_exit,
 * streams, sizes, host callstacks) and reports findings: allocation churn,
 * small transfers, pageable host memory in copies, synchronisation and the
 * GPU idle time it causes, launch overhead / launch-bound phases, work
 * imbalance across streams, legacy default-stream serialization. Each
 * finding has a severity, its numbers, the host callstacks responsible and an
 * estimate of the time recoverable; findings are ranked by that estimate.
 * docs/design.md ("Program analysis") gives every definition, estimate and
 * threshold; the constants below are the thresholds.
 *
 * GPU durations are not in a capture. When a profile measured them (`cucap
 * replay --profile`), cucap_analysis_set_gpu_time gives them per record and
 * cucap_analysis_run recomputes the findings that use them (launch-bound
 * phases, stream imbalance, default-stream serialization).
 *
 * Ownership: the analysis owns everything it returns (findings, frames,
 * summary); pointers stay valid until the next cucap_analysis_run or
 * cucap_analysis_destroy. Not thread-safe: one thread at a time. */
#ifndef CUCAP_ANALYZE_H
#define CUCAP_ANALYZE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cucap_reader cucap_reader;
typedef struct cucap_json cucap_json;
typedef struct cucap_analysis cucap_analysis;

/* ---- thresholds (docs/design.md "Program analysis") -------------------- */
/* Severity from the estimated recoverable time as a share of the window. */
#define CUCAP_ANALYZE_HIGH_PCT 10.0
#define CUCAP_ANALYZE_MEDIUM_PCT 3.0
#define CUCAP_ANALYZE_LOW_PCT 0.5
/* Steady state: starts where at most this % of the remaining launches run a
 * kernel never launched before, and holds at least MIN_TAIL_PCT % of them. */
#define CUCAP_ANALYZE_STEADY_NEW_PCT 1.0
#define CUCAP_ANALYZE_STEADY_MIN_TAIL_PCT 20.0
#define CUCAP_ANALYZE_STEADY_MIN_LAUNCHES 20
/* A host<->device copy below this many bytes is "small". */
#define CUCAP_ANALYZE_SMALL_COPY 65536u
/* Copies at least this large give the achieved bandwidth figures. */
#define CUCAP_ANALYZE_BW_MIN_COPY (1u << 20)
/* Launch-bound phase: at least this many launches between two syncs with
 * the GPU (modelled from measured durations) idle at least this % of it. */
#define CUCAP_ANALYZE_PHASE_MIN_LAUNCHES 8
#define CUCAP_ANALYZE_PHASE_IDLE_PCT 50.0
/* Without GPU durations: host time in launch calls at or above this % of
 * the window makes the launch-overhead finding "low" (else "info"). */
#define CUCAP_ANALYZE_LAUNCH_HOST_PCT 30.0
/* Stream imbalance is "low" when the busiest stream holds this % of work. */
#define CUCAP_ANALYZE_IMBALANCE_PCT 90.0

typedef enum cucap_severity {
  CUCAP_SEVERITY_INFO = 0,
  CUCAP_SEVERITY_LOW = 1,
  CUCAP_SEVERITY_MEDIUM = 2,
  CUCAP_SEVERITY_HIGH = 3
} cucap_severity;

/* "info", "low", "medium", "high" (static). */
const char *cucap_severity_name(cucap_severity s);
/* Parses those names; -1 if none. */
int cucap_severity_parse(const char *s);

typedef enum cucap_analyze_window {
  CUCAP_ANALYZE_WINDOW_STEADY = 0, /* steady state when found, else all */
  CUCAP_ANALYZE_WINDOW_ALL = 1
} cucap_analyze_window;

typedef struct cucap_analyze_options {
  cucap_analyze_window window;
  /* >= 0: the steady state starts after this % of the launches (no
   * detection); < 0 (default): detected */
  double warmup_pct;
  /* > 0: peak host<->device bandwidth to assume, GB/s per direction;
   * 0 (default): from the recorded device (docs/design.md) */
  double link_gbps;
  int symbolize;     /* 1 (default): name frames from the object files */
  unsigned max_sites; /* callsites kept per finding (default 5, max 16) */
  /* 1: the analysis is part of `cucap replay --profile`, whose GPU times it
   * gets: text that lacks GPU durations says so instead of advising to run
   * the command already running. 0 (default): `cucap analyze`. */
  int in_profile;
} cucap_analyze_options;

void cucap_analyze_options_init(cucap_analyze_options *o);

/* ---- findings ---------------------------------------------------------- */

#define CUCAP_FINDING_MAX_NUMBERS 24
#define CUCAP_FINDING_MAX_SITES 16

typedef struct cucap_finding_number {
  char name[40];  /* snake_case key, stable across versions */
  char unit[12];  /* "", "ns", "bytes", "/s", "%", "GB/s" */
  double value;
} cucap_finding_number;

/* Where in the program: a recorded host callstack (Record.stack) and what
 * the finding counted there. */
typedef struct cucap_finding_site {
  uint32_t stack;    /* callstack id in the capture (0: calls without one) */
  uint64_t count;
  uint64_t time_ns;  /* the finding's time measure attributed to this site */
} cucap_finding_site;

typedef struct cucap_finding {
  char id[32];       /* stable: alloc_churn, small_transfers, pageable_copies,
                        sync_calls, launch_overhead, launch_bound,
                        stream_imbalance, default_stream */
  char title[200];   /* one line with the key numbers */
  cucap_severity severity;
  int estimated;            /* 1: recoverable_ns is an estimate; 0: none
                               (severity from counts, see the design) */
  uint64_t recoverable_ns;
  double recoverable_pct;   /* of the window */
  char estimate[240];       /* how recoverable_ns was estimated */
  char advice[320];         /* what to change */
  unsigned nnumbers;
  cucap_finding_number numbers[CUCAP_FINDING_MAX_NUMBERS];
  unsigned nsites;          /* by time, then count */
  cucap_finding_site sites[CUCAP_FINDING_MAX_SITES];
} cucap_finding;

/* ---- summary ----------------------------------------------------------- */

typedef struct cucap_analysis_summary {
  /* the capture */
  uint64_t records, calls, launches, graph_launches, copies, memsets;
  uint64_t duration_ns;       /* first to last recorded call */
  char device[96];            /* "" if not recorded */
  int cc_major, cc_minor, sm_count;
  int driver_version;
  char options[128];          /* record options ("" default) */
  /* the window the findings cover */
  int steady;                 /* 1: steady state found (or forced) */
  char window_reason[200];
  uint64_t window_start_ns, window_end_ns; /* capture time base */
  uint64_t window_first_launch;            /* launch_index */
  uint64_t window_launches;
  /* host <-> device link assumed for bandwidth figures */
  double link_gbps;
  char link_name[64];         /* "PCIe Gen5 x16 (assumed from sm_90)" */
  /* measurement caveats (one line each; "" if none) */
  uint64_t recorder_synced_dtoh; /* async DtoH the recorder synchronised */
  char caveats[4][200];
  unsigned ncaveats;
  /* gpu times given through cucap_analysis_set_gpu_time */
  uint64_t gpu_times;
  /* reading */
  cucap_status read_status;   /* CUCAP_OK, or why reading stopped early */
  char problem[256];
} cucap_analysis_summary;

/* One kernel launch of the capture (what a profile keys its records to). */
typedef struct cucap_analysis_launch {
  uint64_t launch_index;
  uint64_t seq, rec_index;
  uint64_t t_enter, t_exit;   /* host, capture time base */
  const char *kernel;         /* mangled name, or "" if its Function record is missing */
  uint32_t grid[3], block[3];
  uint32_t shared_mem;
  uint64_t stream;            /* recorded handle (0 NULL stream) */
  uint32_t stack;             /* callstack id (0 none) */
  uint32_t tid;
} cucap_analysis_launch;

/* ---- API ---------------------------------------------------------------- */

/* Reads the whole capture through r (rewound first; left at its end) and
 * runs the analysis. o may be NULL. A capture that cannot be read to its end
 * is analysed as far as it was read: summary.read_status says why it stopped
 * (the call still returns CUCAP_OK). Errors: NOMEM, INVALID_ARG. */
cucap_status cucap_analysis_create(cucap_reader *r, const cucap_analyze_options *o,
                                   cucap_analysis **out);
void cucap_analysis_destroy(cucap_analysis *a); /* accepts NULL */

/* GPU duration of the work of the recorded call with this sequence number
 * (a launch, graph launch, copy or memset), e.g. from a profile's timeline
 * median. NOT_FOUND if no such work record. Call cucap_analysis_run after. */
cucap_status cucap_analysis_set_gpu_time(cucap_analysis *a, uint64_t seq, uint64_t gpu_ns);
/* Recomputes the findings (after set_gpu_time). */
cucap_status cucap_analysis_run(cucap_analysis *a);

const cucap_analysis_summary *cucap_analysis_summary_get(const cucap_analysis *a);
size_t cucap_analysis_finding_count(const cucap_analysis *a);
/* Ranked: estimated time first (largest first), then severity, then id. */
const cucap_finding *cucap_analysis_finding(const cucap_analysis *a, size_t i);

/* One finding as text or as a JSON object (the analysis's and the profile
 * report's findings alike). stk gives the frames of a callsite's stack id
 * (frames[first..n) are the program's own; NULL when unknown); the arrays it
 * returns are the caller's and need stay valid only during the call. */
typedef const char *const *(*cucap_finding_stack_fn)(void *ctx, uint32_t id, size_t *n,
                                                     size_t *first);
typedef struct cucap_json cucap_json;
void cucap_finding_print(FILE *out, const cucap_finding *f, size_t rank,
                         cucap_finding_stack_fn stk, void *ctx);
void cucap_finding_write_json(cucap_json *w, const cucap_finding *f, size_t rank,
                              cucap_finding_stack_fn stk, void *ctx);

/* Symbolized frames of a recorded callstack id, innermost first (NULL if
 * unknown); *first_app: first frame outside the CUDA stack/cucap. */
const char *const *cucap_analysis_stack(cucap_analysis *a, uint32_t stack, size_t *n,
                                        size_t *first_app);

size_t cucap_analysis_launch_count(const cucap_analysis *a);
/* Launches in file order; NOT_FOUND past the end. */
cucap_status cucap_analysis_launch_get(const cucap_analysis *a, size_t i,
                                       cucap_analysis_launch *out);

/* Text report (findings at or above min_severity; 0 = all) and JSON (one
 * object: summary, window, findings with symbolized callsites). */
void cucap_analysis_print(cucap_analysis *a, FILE *out, cucap_severity min_severity);
void cucap_analysis_write_json(cucap_analysis *a, cucap_json *w);
/* Text of findings only (used inside the profile report). */
void cucap_analysis_print_findings(cucap_analysis *a, FILE *out,
                                   cucap_severity min_severity, unsigned max_findings);

#ifdef __cplusplus
}
#endif
#endif
