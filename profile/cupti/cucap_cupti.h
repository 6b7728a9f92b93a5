/* cucap_cupti.h - the CUPTI engine behind `cucap replay --profile`: an
 * observer of the replay (cucap_replay_observer.h) that asks the replayer
 * for one pass per measurement and joins everything to the capture's
 * records and launches.
 *
 * Passes, in this order (each pass re-executes the capture from its initial
 * state; the engine asks for the next one from pass_end):
 *   1. timeline x N (N = timeline_passes, --loop): CUPTI Activity records of
 *      kernels (CONCURRENT_KERNEL), copies and memsets; every record is
 *      joined to the op that submitted it through the correlation id that a
 *      driver-API callback reports while the op is being executed. Pass 1
 *      also counts the kernels each op runs: the later passes check against
 *      it.
 *   2. metrics: the Range Profiler (cupti_range_profiler.h) in user replay
 *      with auto ranges (one range per kernel), configured through the
 *      Profiler Host API; one replay pass per counter pass, in windows of at
 *      most max_ranges kernels. Ranges come in kernel order and are matched
 *      to the kernels pass 1 saw; a count that differs fails the section
 *      loudly. Optional L2 flush before each profiled launch.
 *   3. PC sampling (cupti_pcsampling.h) in KERNEL_SERIALIZED mode, one pass:
 *      each sample carries the correlation id of its launch.
 *   4. SASS metrics (cupti_sass_metrics.h), one pass, aggregated per
 *      instruction over the window (optional).
 * Samples are joined to their SASS instruction (cubins seen by CUPTI's
 * module-loaded callback; cuptiGetCubinCrc; cuptiGetSassToSourceCorrelation
 * for file:line; `nvdisasm -c -gi` once per cubin for the opcode text and
 * the inline chain) and to the host callstack recorded at the launch.
 *
 * libcupti is dlopen'ed when the engine attaches (CUCAP_CUPTI or CUCAP_CUPTI_LIB, else
 * $CUDA_HOME and /usr/local/cuda library directories, else the loader's
 * search path); a replay without the engine never loads it. Every CUPTI
 * call's status is checked and logged with the function name and CUPTI's
 * error string; a section that cannot be collected is marked with the
 * reason (cucap_cupti_section) instead of failing the replay, except when
 * CUPTI cannot be loaded or attached at all (attach fails with
 * CUCAP_ERR_ENV: `cucap replay` exits 3 with the message).
 *
 * Ownership: cucap_cupti_create returns an engine the caller destroys with
 * cucap_cupti_destroy (after cucap_replay_run returned). Every pointer the
 * result accessors return points into the engine and stays valid until it
 * is destroyed. Not thread-safe: one engine per replay, one replay per
 * process (CUPTI allows one subscriber per process). */
#ifndef CUCAP_CUPTI_H
#define CUCAP_CUPTI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cucap_replay_observer.h"
#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUCAP_CUPTI_ALL_LAUNCHES UINT64_MAX

typedef struct cucap_cupti_options {
  const char *library;       /* libcupti path; NULL: search (see above) */
  unsigned timeline_passes;  /* >= 1 (0 is taken as 1) */
  const char *metrics;       /* NULL or "": none; "sol", "full", or metric
                                names separated by commas */
  int cache_flush;           /* 1: flush L2 before each profiled launch in
                                the metrics passes (--cache=flush) */
  int pc_sampling;           /* 1: one PC sampling pass */
  unsigned pc_period;        /* log2 of the sampling period in cycles,
                                5..31; 0: CUCAP_CUPTI_PC_PERIOD_DEFAULT */
  int sass_metrics;          /* 1: one SASS metrics pass */
  uint64_t first_launch;     /* profiled launches: [first, first + count) */
  uint64_t launch_count;     /* CUCAP_CUPTI_ALL_LAUNCHES (or 0): all */
  unsigned max_ranges;       /* kernels per range-profiler window; 0: 4096 */
  const char *nvdisasm;      /* NULL: $CUDA_HOME/bin, /usr/local/cuda/bin,
                                PATH; "": never run it */
  int timeline_all;          /* 1: the timeline covers the whole capture and
                                the launch range restricts metrics, PC
                                sampling and SASS metrics only */
  int drop_unknown_metrics;  /* 1: names CUPTI does not know on this chip are
                                left out (named in the metrics note, section
                                PARTIAL); 0: raw names must all exist */
  int soft_attach;           /* 1: when CUPTI cannot be loaded or attached,
                                the sections say why and the replay goes on
                                without the engine (its observer does
                                nothing); 0: the replay stops (exit 3) */
  int clock_control;         /* CUCAP_CUPTI_CLOCK_BASE (0, the default): the
                                GPU's clocks
                                locked to base for every pass after the
                                timeline, as ncu's --clock-control base;
                                CUCAP_CUPTI_CLOCK_NONE: left alone */
} cucap_cupti_options;

enum { CUCAP_CUPTI_CLOCK_BASE = 0, CUCAP_CUPTI_CLOCK_NONE = 1 };

/* The clock lock outlives the process that made it; this restores the
 * default if the engine holds one (best effort, for a fatal-signal handler:
 * NVPW_Device_SetClockSetting is not async-signal-safe, but a GPU left at
 * base clocks for every later user is worse). Normal ends, exit() and
 * SIGINT/SIGTERM/SIGHUP/SIGQUIT restore without it. */
void cucap_cupti_clocks_emergency_restore(void);
/* Puts device `device`'s clocks back to their default through
 * libnvperf_target next to libcupti (library: as in the options; libcuda:
 * NULL for the default driver): what a profile killed by SIGKILL leaves
 * locked. CUCAP_OK with msg saying which device; CUCAP_ERR_ENV with msg
 * saying why not. */
cucap_status cucap_cupti_reset_clocks(const char *libcuda, const char *library,
                                      int device, char *msg, size_t msg_size);

#define CUCAP_CUPTI_PC_PERIOD_DEFAULT 10

void cucap_cupti_options_init(cucap_cupti_options *o);

typedef struct cucap_cupti cucap_cupti;

/* Validates the options (metric-set syntax, ranges); the metric names
 * themselves are checked against CUPTI when the replay begins.
 * CUCAP_ERR_INVALID_ARG with msg filled on bad options. */
cucap_status cucap_cupti_create(const cucap_cupti_options *o, cucap_cupti **out,
                                char *msg, size_t msg_size);
void cucap_cupti_destroy(cucap_cupti *e); /* accepts NULL */

/* The observer to put in cucap_replay_options.observers (owned by e). */
const cucap_replay_observer *cucap_cupti_observer(cucap_cupti *e);

/* Loads libcupti now (no driver needed) instead of at attach, so that a
 * missing or unusable library is known before the replay; ENV with msg
 * filled if it cannot be. Optional. */
cucap_status cucap_cupti_load(cucap_cupti *e, char *msg, size_t msg_size);
/* 1 once the observer attached CUPTI to the replay's driver. */
int cucap_cupti_attached(const cucap_cupti *e);

/* ---- results (valid after cucap_replay_run returned) ------------------- */

/* Where a section stands. state: */
enum {
  CUCAP_CUPTI_NOT_REQUESTED = 0,
  CUCAP_CUPTI_COLLECTED = 1,   /* complete */
  CUCAP_CUPTI_PARTIAL = 2,     /* some of it; note says what is missing */
  CUCAP_CUPTI_UNAVAILABLE = 3, /* nothing; note says why and what to change */
  CUCAP_CUPTI_FAILED = 4       /* collection or attribution failed; note */
};

typedef struct cucap_cupti_section {
  int state;
  unsigned passes;   /* replay passes it used */
  double wall_s;     /* wall time of those passes */
  char note[1024];
} cucap_cupti_section;

typedef enum cucap_cupti_section_id {
  CUCAP_CUPTI_TIMELINE = 0,
  CUCAP_CUPTI_METRICS = 1,
  CUCAP_CUPTI_PCSAMPLING = 2,
  CUCAP_CUPTI_SASS = 3,
  CUCAP_CUPTI_NSECTIONS = 4
} cucap_cupti_section_id;

/* Owned by the engine, valid until cucap_cupti_destroy. */
const cucap_cupti_section *cucap_cupti_section_get(const cucap_cupti *e,
                                                   cucap_cupti_section_id id);
/* A static string ("timeline", "metrics", "pc-sampling", "sass-metrics"). */
const char *cucap_cupti_section_name(cucap_cupti_section_id id);

/* Environment as CUPTI reported it (filled at begin). */
typedef struct cucap_cupti_env {
  char library[512];      /* path of the libcupti loaded */
  uint32_t version;       /* cuptiGetVersion */
  char chip[64];          /* cuptiDeviceGetChipName, e.g. "GH100" */
  int counters_allowed;   /* 1 yes, 0 refused (privileges), -1 unknown */
  unsigned metric_passes; /* counter passes for the requested metrics */
  size_t stall_reasons;   /* PC sampling stall reasons (0: unknown) */
  uint64_t l2_bytes;      /* L2 size (flush buffer is twice that) */
  char device[96];        /* the replay device */
  int cc_major, cc_minor, sm_count, driver_version;
  char clocks[192];       /* the clocks of the passes after the timeline:
                             "locked to base ...", "not locked: why",
                             "not controlled (--clock-control=none)" */
} cucap_cupti_env;
const cucap_cupti_env *cucap_cupti_env_get(const cucap_cupti *e);

/* One kernel execution in the profiled window. A plain launch runs one
 * kernel (sub 0); a graph launch runs one per kernel node (sub = position
 * in start-time order within that launch). */
typedef struct cucap_cupti_kernel {
  uint64_t rec_index;      /* record that submitted it (Launch or Graph) */
  uint64_t seq;            /* recorded sequence number of that record */
  uint64_t launch_index;   /* recorded launch number; CUCAP_REPLAY_NO_LAUNCH
                              for a kernel of a graph launch */
  uint32_t sub;
  uint32_t callstack;      /* recorded host callstack id (0: none) */
  const char *name;        /* mangled, as CUPTI reports it */
  uint32_t stream_id;      /* CUPTI stream id (first timeline pass) */
  uint64_t stream;         /* recorded stream handle (0: NULL stream) */
  uint32_t grid[3], block[3];
  uint32_t registers, static_smem, dynamic_smem;
  double start_ns;         /* first timeline pass, from its first record */
  unsigned ntimes;         /* timeline passes that measured it */
  double dur_median_ns, dur_min_ns, dur_max_ns, dur_mean_ns;
  const double *metrics;   /* cucap_cupti_metric_names() values (NAN: not
                              collected); NULL without metrics */
} cucap_cupti_kernel;

/* The kernels in launch order ((rec_index, sub)); *out valid until destroy. */
size_t cucap_cupti_kernels(const cucap_cupti *e, const cucap_cupti_kernel **out);

/* One measurement of a kernel or copy: GPU start/end (CUPTI timestamps, ns)
 * in replay pass `pass` (a timeline pass). */
typedef struct cucap_cupti_time {
  unsigned pass;
  uint64_t start_ns, end_ns;
} cucap_cupti_time;
/* Measurements of kernel k / copy c (index into cucap_cupti_kernels /
 * cucap_cupti_copies); *out valid until destroy. */
size_t cucap_cupti_kernel_times(const cucap_cupti *e, size_t k,
                                const cucap_cupti_time **out);
size_t cucap_cupti_copy_times(const cucap_cupti *e, size_t c,
                              const cucap_cupti_time **out);

typedef struct cucap_cupti_copy {
  uint64_t rec_index, seq;
  uint32_t sub;            /* position within its record (start order) */
  int is_memset;           /* 0 memcpy, 1 memset */
  int copy_kind;           /* CUpti_ActivityMemcpyKind (memcpy) */
  int rec_copy_kind;       /* the record's cucap.fb.MemcpyKind; -1 memset */
  uint64_t bytes;
  uint32_t stream_id;
  uint64_t stream;         /* recorded stream handle */
  double start_ns;
  unsigned ntimes;
  double dur_median_ns, dur_min_ns, dur_max_ns;
} cucap_cupti_copy;
size_t cucap_cupti_copies(const cucap_cupti *e, const cucap_cupti_copy **out);

/* Metric names in the order of cucap_cupti_kernel.metrics. */
size_t cucap_cupti_metric_names(const cucap_cupti *e, const char *const **out);

/* A CUDA graph launch measured as a whole. When CUPTI's auto range (one
 * range per kernel) fails on the kernels of graph launches, the engine
 * measures each graph launch of that window in a user range of its own:
 * metrics per graph launch instead of per kernel (the kernels of those
 * launches keep NAN metrics; the metrics section note says so). */
typedef struct cucap_cupti_graph_metric {
  uint64_t rec_index, seq; /* the graph launch record */
  uint32_t kernels;        /* kernels the timeline saw it run */
  const double *metrics;   /* cucap_cupti_metric_names() values */
} cucap_cupti_graph_metric;
/* *out valid until destroy. */
size_t cucap_cupti_graph_metrics(const cucap_cupti *e,
                                 const cucap_cupti_graph_metric **out);

/* ---- instruction level -------------------------------------------------- */

/* One SASS instruction that was sampled. */
typedef struct cucap_cupti_pc_site {
  uint64_t cubin_crc;
  const char *function;    /* mangled */
  uint64_t pc_offset;
  const char *sass;        /* instruction text (nvdisasm), NULL if unknown */
  const char *file;        /* source file (dir/file), NULL without line info */
  uint32_t line;
  const char *inline_chain;/* "a.cu:10 <- b.cuh:42" innermost first (nvdisasm
                              -gi), NULL when not inlined or unknown */
  /* SASS metrics over the window (UINT64_MAX: not collected) */
  uint64_t inst_executed, thread_inst_executed, mem_sectors;
} cucap_cupti_pc_site;
size_t cucap_cupti_pc_sites(const cucap_cupti *e, const cucap_cupti_pc_site **out);

/* Samples of one stall reason at one instruction of one kernel execution. */
typedef struct cucap_cupti_pc_sample {
  uint32_t kernel;         /* index into cucap_cupti_kernels */
  uint32_t site;           /* index into cucap_cupti_pc_sites */
  uint32_t stall;          /* index into cucap_cupti_stall_names */
  uint32_t count;
} cucap_cupti_pc_sample;
size_t cucap_cupti_pc_samples(const cucap_cupti *e,
                              const cucap_cupti_pc_sample **out);
size_t cucap_cupti_stall_names(const cucap_cupti *e, const char *const **out);

/* Host frames of a recorded callstack, innermost first, symbolized like
 * `cucap dump` does ("fn+0x1a (lib.so+0x11a3a)"). *out valid until destroy;
 * 0 when the id is unknown. */
size_t cucap_cupti_callstack(cucap_cupti *e, uint32_t id,
                             const char *const **out);

/* Per-kernel diagnosis inputs: the kernels (by name) with their total
 * time, the largest stall reasons and the hottest source lines over all
 * their executions. */
typedef struct cucap_cupti_hot {
  const char *what;        /* stall reason name, or "file:line" */
  uint64_t samples;
} cucap_cupti_hot;
#define CUCAP_CUPTI_TOP 5
typedef struct cucap_cupti_kernel_summary {
  const char *name;
  uint64_t executions;
  double total_ns;         /* sum of median durations */
  uint64_t samples;        /* PC samples */
  cucap_cupti_hot stalls[CUCAP_CUPTI_TOP];
  cucap_cupti_hot lines[CUCAP_CUPTI_TOP];
  unsigned nstalls, nlines;
} cucap_cupti_kernel_summary;
/* Sorted by total time, largest first; *out valid until destroy. */
size_t cucap_cupti_summaries(cucap_cupti *e,
                             const cucap_cupti_kernel_summary **out);

/* ---- writers (the engine's own simple outputs) -------------------------- */

/* Terminal table: sections, top kernels with time share and SOL metrics,
 * top stall reasons and lines. */
void cucap_cupti_print_report(cucap_cupti *e, FILE *out, unsigned top);
/* Everything above as one JSON object. CUCAP_ERR_IO on a write error. */
cucap_status cucap_cupti_write_json(cucap_cupti *e, FILE *out);
/* Folded stacks "host;...;kernel;file:line;pc sass count" (flame graphs,
 * speedscope); *distinct receives the number of distinct stacks. */
cucap_status cucap_cupti_write_folded(cucap_cupti *e, FILE *out,
                                      size_t *distinct);

/* ---- probe --------------------------------------------------------------- */

/* Standalone check of what CUPTI offers on this machine: loads libcuda
 * (libcuda: NULL = libcuda.so.1) and CUPTI, creates a context on device
 * `device`, and prints version, chip, counter permission, validity and
 * pass counts of the sol/full sets (and of `metrics` if given), the PC
 * sampling stall reasons and SASS metrics; with list_metrics every base
 * metric of the chip. One "probe: <key>: <value>" line per fact.
 * Returns CUCAP_OK when CUPTI attached (even if counters are refused). */
cucap_status cucap_cupti_probe(const char *libcuda, const char *library,
                               int device, const char *metrics,
                               int list_metrics, FILE *out);

/* The same checks without printing, as states for `cucap doctor`. */
enum {
  CUCAP_CUPTI_CHECK_UNKNOWN = 0,     /* not checked (message says why) */
  CUCAP_CUPTI_CHECK_OK = 1,
  CUCAP_CUPTI_CHECK_DENIED = 2,      /* permission */
  CUCAP_CUPTI_CHECK_UNAVAILABLE = 3  /* not supported here / failed */
};
typedef struct cucap_cupti_check {
  int activity, counters, pc_sampling, sass_metrics;
  char activity_msg[256], counters_msg[320], pc_sampling_msg[256],
      sass_metrics_msg[256];
  uint32_t version;
} cucap_cupti_check;
/* Always CUCAP_OK; the states say what works. Loads the driver and CUPTI
 * into this process (they stay loaded). */
cucap_status cucap_cupti_check_run(const char *libcuda, const char *library,
                                   int device, cucap_cupti_check *out);

/* The metric names of a set ("sol", "full"); NULL for other names. The
 * array is static and NULL-terminated. */
const char *const *cucap_cupti_metric_set(const char *name);

#ifdef __cplusplus
}
#endif
#endif
