/* cucap_doctor.h - the environment check behind `cucap doctor` (like
 * `nsys status -e`): what replay and `replay --profile` need, what is there,
 * and exactly what to change when something is missing.
 *
 * Checks (name: needed for):
 *   driver       replay   libcuda loads, cuDriverGetVersion
 *   gpu          replay   cuInit succeeds, devices (name, sm_XY, SMs, memory)
 *   backend      profile  the CUPTI profiling backend is built in
 *   cupti        profile  libcupti found (cucap_profiler_find_cupti), its API
 *                         version, libnvperf_host/target next to it
 *   counters     profile  GPU performance counters allowed for this user
 *                         (/proc/driver/nvidia/params RmProfilingAdminOnly,
 *                         then the backend's probe through CUPTI)
 *   pc_sampling  profile  PC sampling works (backend probe)
 *   perf_event   -        /proc/sys/kernel/perf_event_paranoid (host sampling)
 *   nvdisasm     -        SASS text for PC samples
 *   libdw        -        source lines of host frames
 * Without a GPU the driver/gpu checks fail cleanly with the reason.
 * Besides the checks, the report lists the CUCAP_* variables set in the
 * environment with their doc from the knob registry (cucap_knobs.h); a name
 * the registry lacks is flagged unknown (a typo, or one only tests read).
 *
 * Exit code (cucap_doctor_report.exit_code): 0 everything --profile needs is
 * there; 1 replay works but --profile would lack sections (a "profile"
 * check failed); 3 replay itself cannot run here (driver or gpu failed).
 *
 * Ownership: the report is a caller-owned struct of fixed-size strings. */
#ifndef CUCAP_DOCTOR_H
#define CUCAP_DOCTOR_H

#include <stddef.h>
#include <stdio.h>

#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cucap_json cucap_json;

typedef enum cucap_check_state {
  CUCAP_CHECK_OK = 0,
  CUCAP_CHECK_WARN = 1,   /* optional, or could not be checked */
  CUCAP_CHECK_FAIL = 2,   /* needed and missing */
  CUCAP_CHECK_SKIP = 3    /* not checked (an earlier check failed) */
} cucap_check_state;

/* "ok", "warn", "fail", "skip": static strings. */
const char *cucap_check_state_name(cucap_check_state s);

enum { CUCAP_NEED_NONE = 0, CUCAP_NEED_REPLAY = 1, CUCAP_NEED_PROFILE = 2 };

#define CUCAP_DOCTOR_MAX_CHECKS 16
#define CUCAP_DOCTOR_MAX_KNOBS 64

/* A CUCAP_* variable set in the environment (names sorted). */
typedef struct cucap_doctor_knob {
  char name[64];
  char value[256];       /* truncated when longer */
  const char *doc;       /* the registry's doc (static); NULL: unknown name */
} cucap_doctor_knob;

typedef struct cucap_doctor_check {
  char name[16];
  cucap_check_state state;
  int need;              /* CUCAP_NEED_* */
  char value[400];       /* what was found */
  char fix[512];         /* what to change ("" when nothing to do) */
} cucap_doctor_check;

typedef struct cucap_doctor_report {
  unsigned n;
  cucap_doctor_check checks[CUCAP_DOCTOR_MAX_CHECKS];
  int can_replay, can_profile;
  int exit_code;         /* 0, 1 or 3 (see above) */
  unsigned nknobs;       /* CUCAP_* variables set (at most CUCAP_DOCTOR_MAX_KNOBS) */
  cucap_doctor_knob knobs[CUCAP_DOCTOR_MAX_KNOBS];
} cucap_doctor_report;

typedef struct cucap_doctor_options {
  const char *libcuda;   /* NULL = "libcuda.so.1" (--libcuda) */
  const char *libcupti;  /* NULL = searched (--cupti) */
  const char *proc_root; /* NULL = "/proc" (tests point it at a fake tree) */
  int device;
  int assume_non_root;   /* tests: judge permissions as for a non-root user */
  char *const *env;      /* NULL = this process's environ (tests pass their own) */
} cucap_doctor_options;

/* Runs every check. Loads libcuda (and calls cuInit) and libcupti into this
 * process with dlopen; they stay loaded. */
cucap_status cucap_doctor_run(const cucap_doctor_options *o, cucap_doctor_report *out);
void cucap_doctor_print(const cucap_doctor_report *r, FILE *out);
void cucap_doctor_write_json(const cucap_doctor_report *r, cucap_json *w);

#ifdef __cplusplus
}
#endif
#endif
