/* cucap_profiler.h - the profiling backend of `cucap replay --profile`, and
 * what every backend shares (metric sets, launch ranges, finding CUPTI, the
 * CUDA-event fallback timeline).
 *
 * A backend is a replay observer (cucap_replay_observer.h) that fills a
 * cucap_profile (cucap_profile.h). This tree has two implementations of the
 * BACKEND FUNCTIONS below, exactly one of which is compiled in:
 *   profile/profiler_stub.c  - no CUPTI: every section it owns says "CUPTI
 *                             profiling backend not built" and what to do;
 *   profile/cupti/profile_cupti*.c - the CUPTI backend (dlopen'ed libcupti; never
 *                             linked). Adding it replaces profiler_stub.c.
 *
 * The CLI (tools/cmd_replay.c) drives a profile run like this:
 *   1. cucap_analysis_create + cucap_profile_add_analysis: every launch of
 *      the capture is declared (key = launch_index) with its kernel name,
 *      grid/block, recorded stream and symbolized host callstack, and the
 *      program findings are in the profile;
 *   2. cucap_profiler_create(&opts, profile, &prof);
 *   3. cucap_replay_run with cucap_profiler_observer(prof) (plus, when the
 *      backend set no timeline, the CUDA-event timeline below) and
 *      replay loops = opts.loops;
 *   4. cucap_profiler_finish(prof), cucap_profiler_destroy(prof);
 *   5. the analysis is re-run with the measured GPU durations, then the
 *      report/JSON/folded stacks/profile file are written.
 *
 * WHAT A BACKEND MUST DO
 *  - create: load CUPTI (cucap_profiler_find_cupti, opts->libcupti), decide
 *    what it can collect and set the TIMELINE, METRICS and PCSAMPLING
 *    sections (cucap_profile_set_section): OK = will collect, NOT_REQUESTED
 *    = not asked, UNAVAILABLE = cannot, with the exact change that would
 *    make it work (e.g. "GPU performance counters are restricted to admin
 *    users: run as root, or add `options nvidia
 *    NVreg_RestrictProfilingToAdminUsers=0` to /etc/modprobe.d/nvidia.conf
 *    and reload the nvidia module"). Return CUCAP_OK when anything asked
 *    can be collected; CUCAP_ERR_UNSUPPORTED with *out NULL when nothing
 *    can (the sections already say why). Never abort, never exit.
 *  - observer.attach (driver loaded, before cuInit): subscribe CUPTI to the
 *    session's driver (cucap_replay_session_driver); enable activity kinds
 *    (CONCURRENT_KERNEL, MEMCPY, MEMSET) for the timeline.
 *  - observer.op_before: for a launch (op->launch_index !=
 *    CUCAP_REPLAY_NO_LAUNCH) the next driver launch call's correlation id
 *    (CUPTI driver-API callback, enter) belongs to that launch_index: keep
 *    correlation id -> launch key. For a graph launch (op->body_type ==
 *    CUCAP_FB_BODY_GRAPH) the kernels it runs get CUCAP_PROFILE_GRAPH_KEY(
 *    cucap_fb_record_seq(op->record), n) in GPU start order; declare them
 *    with cucap_profile_add_launch (kernel name from the activity record).
 *    Copies/memsets: correlation id -> (op->rec_index, Record.seq) for
 *    cucap_profile_add_activity. Skip ops with op->capturing (they only
 *    record into a graph).
 *  - timing: cucap_profile_add_kernel_timing(p, key, pass, start, end) for
 *    every kernel activity record of the timing passes: the first
 *    opts->loops passes the replayer runs (pass = op->pass, 0-based).
 *    Counters must not be collected in them, and timings of the extra
 *    passes asked for counters must not be added (they would perturb the
 *    medians).
 *  - metrics: with the Range Profiler / Profiler Host API in user-replay
 *    mode, one range per kernel, the replayer re-running the capture for
 *    each counter pass (return non-zero from pass_end to get another pass;
 *    every pass starts from the capture's initial memory); only launches in
 *    opts->range (cucap_profile_range_match); flush L2 before each profiled
 *    kernel when opts->cache_flush; cucap_profile_add_metric(p, key, name,
 *    value) with the names asked (opts->metrics). A metric the chip does
 *    not have is dropped and named in the METRICS section message (PARTIAL).
 *  - PC sampling (opts->pc_sampling): kernel-serialized, so every sample
 *    belongs to one launch; join each PC to its SASS instruction (nvdisasm
 *    when present), source file:line and inline chain
 *    (cuptiGetSassToSourceCorrelation); cucap_profile_add_pc_sample(p, key,
 *    &pc, stall_reason_name, count). SASS metrics (opts->sass_metrics):
 *    cucap_profile_add_sass_metric. The host callstack is already in the
 *    profile (the launch's callstack).
 *  - finish: flush CUPTI buffers (cuptiActivityFlushAll), add what is
 *    left, set final section states (PARTIAL + which launches/metrics are
 *    missing), fill info.backend ("cupti"), info.cupti_version,
 *    info.passes and, when empty, the replay device (info.device, cc_major,
 *    cc_minor, sm_count, driver_version) - cucap_profile_set_info on a copy
 *    of cucap_profile_info_get. The CLI fills the capture fields.
 *  - probe: the same checks as create, cheaply, for `cucap doctor`
 *    (counters allowed for this user? PC sampling works?).
 *
 * THREADING: observer callbacks run on the replayer's thread. The profile's
 * add_* functions are thread-safe, so activity buffers may be handed over
 * from CUPTI's buffer-completion thread. create/finish/destroy/probe run on
 * the caller's thread. One profiler per process at a time.
 *
 * OWNERSHIP: the backend keeps `out` (owned by the caller) until destroy;
 * the observer returned is owned by the profiler, valid until destroy;
 * options (and the strings/range they point to) stay valid until destroy. */
#ifndef CUCAP_PROFILER_H
#define CUCAP_PROFILER_H

#include <regex.h>
#include <stddef.h>
#include <stdint.h>

#include "cucap_profile.h"
#include "cucap_replay_observer.h"
#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- metric sets (profiler_common.c) ----------------------------------- */

typedef enum cucap_metric_set {
  CUCAP_METRICS_NONE = 0,  /* timeline only */
  CUCAP_METRICS_SOL = 1,   /* Speed Of Light: what the bottleneck class needs */
  CUCAP_METRICS_FULL = 2,  /* + caches, warp stalls, instruction mix, bank conflicts */
  CUCAP_METRICS_LIST = 3   /* the names given */
} cucap_metric_set;

/* The metric names of a set: the one definition of `sol` and `full`, which
 * the CUPTI engine looks up by name too (cucap_cupti_metric_set). Static,
 * valid for the process, never freed; NULL-terminated, *n not counting the
 * NULL. NULL and *n = 0 for NONE and LIST. */
const char *const *cucap_metric_set_names(cucap_metric_set s, size_t *n);

/* The set a `--metrics` word names: "sol", "full", "none"; LIST for any
 * other string (a list of metric names) and for NULL. */
cucap_metric_set cucap_metric_set_from_name(const char *name);

/* The word of a set: "sol", "full", "none" (static); NULL for LIST. */
const char *cucap_metric_set_name(cucap_metric_set s);

/* ---- launch ranges (--range) ------------------------------------------- */

typedef enum cucap_range_kind {
  CUCAP_RANGE_ALL = 0,
  CUCAP_RANGE_LAUNCHES = 1, /* launch:A-B (launch_index, inclusive; "A" alone = A-A,
                               "A-" = to the end) */
  CUCAP_RANGE_KERNEL = 2    /* kernel:REGEX (POSIX extended, searched in the mangled
                               and the demangled name) */
} cucap_range_kind;

typedef struct cucap_profile_range {
  cucap_range_kind kind;
  uint64_t first, last;
  char spec[256];           /* as given */
  regex_t re;               /* KERNEL */
  void *cache;              /* kernel name -> match, owned */
} cucap_profile_range;

/* Parses "launch:A-B" or "kernel:REGEX" (NULL/"" = all). On error msg says
 * why (INVALID_ARG). Free with cucap_profile_range_free. */
cucap_status cucap_profile_range_parse(const char *spec, cucap_profile_range *out, char *msg,
                                       size_t msg_size);
/* 1 if the launch is in the range. Graph kernels (graph keys) match a
 * launch range never, a kernel range by name. Not thread-safe (caches). */
int cucap_profile_range_match(cucap_profile_range *r, uint64_t key, const char *kernel);
void cucap_profile_range_free(cucap_profile_range *r);

/* ---- finding CUPTI (profiler_common.c) ---------------------------------- */

/* Where libcupti is: `explicit_path` if given (must exist), else
 * $CUDA_HOME, $CUDA_PATH, /usr/local/cuda, each in lib64/,
 * targets/<arch>-linux/lib/ and extras/CUPTI/lib64/, then the
 * LD_LIBRARY_PATH directories, then the loader's own search for the
 * soname; libcupti.so.13 before libcupti.so in each place. Writes the path
 * (or the soname when only the loader found it) and returns CUCAP_OK;
 * NOT_FOUND with `tried` listing the places looked at (either may be NULL). */
cucap_status cucap_profiler_find_cupti(const char *explicit_path, char *path, size_t path_size,
                                       char *tried, size_t tried_size);

/* ---- the backend --------------------------------------------------------- */

typedef struct cucap_profiler_options {
  const char *libcupti;          /* explicit libcupti path (--cupti), NULL = search */
  cucap_metric_set metric_set;
  const char *const *metrics;    /* names to collect (the set's, or --metrics=a,b) */
  size_t nmetrics;
  int cache_flush;               /* 1: flush L2 before each profiled kernel */
  int clock_none;                /* 1: --clock-control=none (GPU clocks left
                                    alone); 0: locked to base for the passes
                                    after the timeline (cucap_cupti.h) */
  cucap_profile_range *range;    /* launches to profile (metrics, PC sampling) */
  unsigned loops;                /* timing passes (>= 1) */
  int timeline;                  /* 1: collect the timeline */
  int pc_sampling;               /* 1: PC sampling joined to SASS and source */
  int sass_metrics;              /* 1: per-instruction SASS metrics */
  int device;                    /* replay device ordinal */
  uint64_t launches;             /* launches in the capture (sizing hint) */
} cucap_profiler_options;

void cucap_profiler_options_init(cucap_profiler_options *o); /* SOL, flush, 1 loop, timeline */

typedef struct cucap_profiler cucap_profiler;

/* BACKEND FUNCTIONS (profiler_stub.c or the CUPTI backend) */
const char *cucap_profiler_backend_name(void); /* "cupti", "none" (static) */
cucap_status cucap_profiler_create(const cucap_profiler_options *o, cucap_profile *out,
                                   cucap_profiler **prof);
const cucap_replay_observer *cucap_profiler_observer(cucap_profiler *prof);
cucap_status cucap_profiler_finish(cucap_profiler *prof);
void cucap_profiler_destroy(cucap_profiler *prof); /* accepts NULL */

/* Environment probe for `cucap doctor`. */
typedef enum cucap_probe_state {
  CUCAP_PROBE_UNKNOWN = 0,      /* not checked (say why in the message) */
  CUCAP_PROBE_OK = 1,
  CUCAP_PROBE_DENIED = 2,       /* permission (counters restricted, ...) */
  CUCAP_PROBE_UNAVAILABLE = 3   /* not supported here / failed */
} cucap_probe_state;

const char *cucap_probe_state_name(cucap_probe_state s); /* "unknown", "ok", ... */

typedef struct cucap_profiler_probe {
  cucap_probe_state activity, counters, pc_sampling, sass_metrics;
  char activity_msg[256], counters_msg[320], pc_sampling_msg[256], sass_metrics_msg[256];
  unsigned cupti_version;       /* cuptiGetVersion, 0 unknown */
} cucap_profiler_probe;

typedef struct cucap_profiler_probe_options {
  const char *libcuda;          /* NULL = "libcuda.so.1" */
  const char *libcupti;         /* as found by cucap_profiler_find_cupti */
  int device;
} cucap_profiler_probe_options;

/* Fills *out; CUCAP_OK even when things are missing (states say so). */
cucap_status cucap_profiler_probe_run(const cucap_profiler_probe_options *o,
                                      cucap_profiler_probe *out);

/* ---- fallback timeline: CUDA events (profile_evtimer.c) ----------------- */

/* When the backend gives no timeline, an observer that records a CUDA
 * event right before and after every launch, copy, memset and graph launch
 * on its own stream (never on a capturing stream), and reads the elapsed
 * times at the end of each pass. Sets the TIMELINE section (source
 * "cuda-events"). The times include any gap between the two submissions
 * when the GPU was idle: an upper bound of the kernel's duration. */
typedef struct cucap_evtimer cucap_evtimer;
cucap_status cucap_evtimer_create(cucap_profile *p, cucap_evtimer **out);
const cucap_replay_observer *cucap_evtimer_observer(cucap_evtimer *t);
cucap_status cucap_evtimer_finish(cucap_evtimer *t);
void cucap_evtimer_destroy(cucap_evtimer *t); /* accepts NULL */

#ifdef __cplusplus
}
#endif
#endif
