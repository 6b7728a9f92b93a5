/* cucap_profile.h - the profile of a replayed capture: what `cucap replay
 * --profile` measures, keyed to the capture's launches, and its outputs
 * (terminal report, JSON, folded stacks, profile file).
 *
 * A profile holds
 *   - per kernel launch (key = the capture's launch_index; kernels run by a
 *     graph launch get CUCAP_PROFILE_GRAPH_KEY): kernel name, grid/block,
 *     recorded stream and host callstack, GPU start/end per replay pass
 *     (median, min, max, spread over passes), metrics (name -> value), the
 *     bottleneck class computed from them, PC samples per instruction and
 *     stall reason, SASS metrics per instruction;
 *   - per copy/memset/graph launch: timeline entries (GPU start/end);
 *   - the program findings of `cucap analyze` (cucap_analyze.h) with the
 *     symbolized host callstacks they and the launches refer to;
 *   - per section (timeline, metrics, PC sampling, analysis): whether it was
 *     collected, by what, and if not, why and what to change.
 *
 * Filling (the profiling backend, cucap_profiler.h, and the CLI): the add_*
 * and set_* functions below are THREAD-SAFE (an internal mutex), so a
 * backend may call them from CUPTI's buffer-completion thread. Everything
 * else (finalize, queries, writers, save/load) must be called by one thread
 * once filling is over.
 *
 * Reading: cucap_profile_finalize computes the per-launch statistics, the
 * bottleneck classes and the per-kernel aggregates; queries and writers
 * call it themselves when something was added since.
 *
 * Ownership: the profile copies every string and struct it is given. Strings
 * and pointers it returns are owned by it and stay valid until the next
 * add or set call or cucap_profile_destroy. */
#ifndef CUCAP_PROFILE_H
#define CUCAP_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cucap_analyze.h"
#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cucap_profile cucap_profile;
typedef struct cucap_json cucap_json;

/* Kernels run by a graph launch have no launch_index: their key is the
 * graph launch record's seq and the kernel's position among the kernels the
 * launch ran (0-based, in GPU start order). Bit 63 tells them apart. */
#define CUCAP_PROFILE_GRAPH_KEY(seq, node)                                     \
  ((1ull << 63) | (((uint64_t)(seq) & 0x7FFFFFFFFFFull) << 20) |              \
   ((uint64_t)(node) & 0xFFFFFull))
#define CUCAP_PROFILE_KEY_IS_GRAPH(key) (((key) >> 63) != 0)
#define CUCAP_PROFILE_KEY_SEQ(key) (((key) >> 20) & 0x7FFFFFFFFFFull)
#define CUCAP_PROFILE_KEY_NODE(key) ((key) & 0xFFFFFull)

/* ---- metric names (CUPTI / Nsight Compute names) ----------------------- */
#define CUCAP_METRIC_DURATION "gpu__time_duration.sum"
#define CUCAP_METRIC_SM "sm__throughput.avg.pct_of_peak_sustained_elapsed"
#define CUCAP_METRIC_MEMORY "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
#define CUCAP_METRIC_DRAM "dram__throughput.avg.pct_of_peak_sustained_elapsed"
#define CUCAP_METRIC_L2 "lts__throughput.avg.pct_of_peak_sustained_elapsed"
#define CUCAP_METRIC_L1 "l1tex__throughput.avg.pct_of_peak_sustained_active"
#define CUCAP_METRIC_OCCUPANCY "sm__warps_active.avg.pct_of_peak_sustained_active"
#define CUCAP_METRIC_TENSOR_HMMA "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
/* Every tensor instruction (HMMA, Hopper's GMMA - wgmma - IMMA, DMMA):
 * the GMMA name the sets had before (sm__pipe_tensor_op_gmma_cycles_active)
 * is not a CUPTI metric on any chip (CUPTI 13.0's Profiler Host API for
 * GA100, GH100, AD102, GB100, GB202), so Hopper's wgmma GEMMs showed no
 * tensor use; this one exists on all five and adds no counter pass to
 * `sol` (9) or `full` (14) on GH100. */
#define CUCAP_METRIC_TENSOR "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"

/* The Speed Of Light inputs of the bottleneck class (profile_finalize.c
 * looks them up by these names), first in the `sol` and `full` sets
 * (profiler_common.c, their one definition), in this order. A
 * comma-separated list, for array initializers. */
#define CUCAP_METRICS_SOL_INPUTS \
  CUCAP_METRIC_DURATION, CUCAP_METRIC_SM, CUCAP_METRIC_MEMORY, CUCAP_METRIC_DRAM, \
  CUCAP_METRIC_L2, CUCAP_METRIC_L1, CUCAP_METRIC_OCCUPANCY, CUCAP_METRIC_TENSOR_HMMA, \
  CUCAP_METRIC_TENSOR

/* Warp stall reasons, each per issued instruction: the `full` metric set
 * (profiler_common.c) lists all of them, in
 * this order. A comma-separated list, for array initializers. */
#define CUCAP_METRICS_WARP_STALLS \
  "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio", \
  "smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio", \
  "smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio", \
  "smsp__average_warps_issue_stalled_drain_per_issue_active.ratio", \
  "smsp__average_warps_issue_stalled_imc_miss_per_issue_active.ratio", \
  "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio", \
  "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", \
  "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio", \
  "smsp__average_warps_issue_stalled_membar_per_issue_active.ratio", \
  "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio", \
  "smsp__average_warps_issue_stalled_misc_per_issue_active.ratio", \
  "smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio", \
  "smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio", \
  "smsp__average_warps_issue_stalled_selected_per_issue_active.ratio", \
  "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio", \
  "smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio", \
  "smsp__average_warps_issue_stalled_tex_throttle_per_issue_active.ratio", \
  "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"

/* ---- bottleneck classification (profile_classify.c; docs/design.md) ---- */
/* A unit at or above this % of its peak bounds the kernel. */
#define CUCAP_CLASSIFY_BOUND_PCT 60.0
/* Both units bound and within this many points of each other: mixed. */
#define CUCAP_CLASSIFY_BALANCE_PTS 20.0
/* A unit at or above this % of its peak is saturated (Nsight Compute's
 * "high throughput" line): when only one unit is, it bounds the kernel
 * even if the other is bound and within the balance points. */
#define CUCAP_CLASSIFY_SATURATED_PCT 80.0
/* Tensor pipes at or above this % of peak name a compute bound "tensor". */
#define CUCAP_CLASSIFY_TENSOR_PCT 50.0
/* Latency hints: achieved occupancy below this %, grid below one wave. */
#define CUCAP_CLASSIFY_LOW_OCCUPANCY_PCT 25.0

typedef enum cucap_bottleneck {
  CUCAP_BOTTLENECK_UNKNOWN = 0, /* SOL metrics missing */
  CUCAP_BOTTLENECK_COMPUTE = 1,
  CUCAP_BOTTLENECK_MEMORY = 2,
  CUCAP_BOTTLENECK_LATENCY = 3,
  CUCAP_BOTTLENECK_MIXED = 4
} cucap_bottleneck;

/* "unknown", "compute", "memory", "latency", "mixed" (static) */
const char *cucap_bottleneck_name(cucap_bottleneck b);

/* SOL inputs in % of peak; a negative value means "not measured". */
typedef struct cucap_sol {
  double sm_pct, memory_pct, dram_pct, l2_pct, l1_pct, occupancy_pct, tensor_pct;
  uint64_t blocks;   /* grid size in blocks (0 unknown) */
  int sm_count;      /* SMs of the device (0 unknown) */
} cucap_sol;

typedef struct cucap_classification {
  cucap_bottleneck cls;
  char unit[16];     /* compute: "tensor" or "sm"; memory: "dram", "l2", "l1"
                        or "memory"; latency/mixed/unknown: "" */
  char reason[200];  /* the rule that fired, with the numbers */
} cucap_classification;

void cucap_sol_init(cucap_sol *s); /* everything "not measured" */
void cucap_classify(const cucap_sol *in, cucap_classification *out);

/* ---- sections ------------------------------------------------------------ */

typedef enum cucap_profile_section {
  CUCAP_PROFILE_TIMELINE = 0,   /* GPU start/end of launches, copies, memsets */
  CUCAP_PROFILE_METRICS = 1,    /* hardware counters per launch */
  CUCAP_PROFILE_PCSAMPLING = 2, /* instruction-level samples, SASS metrics */
  CUCAP_PROFILE_ANALYSIS = 3,   /* program diagnosis from the capture */
  CUCAP_PROFILE_NSECTIONS = 4
} cucap_profile_section;

typedef enum cucap_profile_state {
  CUCAP_PROFILE_NOT_REQUESTED = 0,
  CUCAP_PROFILE_OK = 1,
  CUCAP_PROFILE_PARTIAL = 2,     /* collected for part of the launches/metrics */
  CUCAP_PROFILE_UNAVAILABLE = 3  /* not collected: the message says why and
                                    what to change */
} cucap_profile_state;

/* Static strings: "timeline", ...; "ok", ... */
const char *cucap_profile_section_name(cucap_profile_section s);
const char *cucap_profile_state_name(cucap_profile_state s);

/* ---- what was profiled ------------------------------------------------- */

typedef struct cucap_profile_info {
  char capture_path[512];
  uint8_t capture_id[16];    /* XXH3-128 of the capture's FileHeader buffer
                                (cucap_profile_capture_id): same capture */
  uint64_t capture_records, capture_launches;
  char device[96];           /* the replay device */
  int cc_major, cc_minor, sm_count, driver_version;
  char backend[64];          /* "cupti", "cuda-events", "none" */
  unsigned cupti_version;    /* cuptiGetVersion, 0 if none */
  char metric_set[512];      /* "sol", "full" or the names given */
  char cache_mode[8];        /* "flush" or "keep" */
  char range[128];           /* "" = every launch */
  unsigned loops;            /* timing passes asked (--loop) */
  unsigned passes;           /* replay passes run in all */
  uint64_t created_ns;       /* CLOCK_REALTIME when profiled */
} cucap_profile_info;

/* ---- filling (thread-safe) --------------------------------------------- */

cucap_status cucap_profile_create(cucap_profile **out);
void cucap_profile_destroy(cucap_profile *p); /* accepts NULL */

/* The info is copied in; read it back with cucap_profile_info_get. */
cucap_status cucap_profile_set_info(cucap_profile *p, const cucap_profile_info *info);
const cucap_profile_info *cucap_profile_info_get(const cucap_profile *p);
/* Identity of a capture: XXH3-128 of its FileHeader buffer. */
void cucap_profile_capture_id(cucap_reader *r, uint8_t out[16]);

/* State of a section; source names what collected it ("cupti-activity",
 * "cuda-events", "cupti-range-profiler", "cupti-pc-sampling", "capture").
 * The message (printf format) says what was not collected and, for
 * PARTIAL/UNAVAILABLE, exactly what to change. The last call wins. */
cucap_status cucap_profile_set_section(cucap_profile *p, cucap_profile_section s,
                                       cucap_profile_state state, const char *source,
                                       const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

typedef struct cucap_profile_launch_desc {
  uint64_t key;          /* launch_index, or CUCAP_PROFILE_GRAPH_KEY */
  uint64_t seq;          /* Record.seq of the launch / graph launch call */
  const char *kernel;    /* mangled name (NULL = "") */
  uint32_t grid[3], block[3];
  uint32_t shared_mem;
  uint64_t stream;       /* recorded stream handle (0 NULL stream) */
  uint32_t callstack;    /* recorded host callstack id (0 none) */
} cucap_profile_launch_desc;

/* Declares a launch. A key declared twice keeps the first description. */
cucap_status cucap_profile_add_launch(cucap_profile *p, const cucap_profile_launch_desc *d);
/* Declares every launch of the capture from an analysis of it, adds its
 * findings and the symbolized callstacks of launches and findings. */
cucap_status cucap_profile_add_analysis(cucap_profile *p, cucap_analysis *a);

/* Symbolized frames of a recorded callstack id (innermost first; first_app
 * = first frame outside the CUDA stack). Replaces an earlier set. */
cucap_status cucap_profile_set_stack(cucap_profile *p, uint32_t id, const char *const *frames,
                                     size_t n, size_t first_app);

/* GPU start/end (ns, any one clock per profile; only differences and order
 * are used) of a launch in replay pass `pass`. NOT_FOUND: key undeclared. */
cucap_status cucap_profile_add_kernel_timing(cucap_profile *p, uint64_t key, unsigned pass,
                                             uint64_t start_ns, uint64_t end_ns);

typedef enum cucap_profile_activity_kind {
  CUCAP_PROFILE_ACT_MEMCPY = 1,
  CUCAP_PROFILE_ACT_MEMSET = 2,
  CUCAP_PROFILE_ACT_GRAPH = 3   /* a whole graph launch */
} cucap_profile_activity_kind;

typedef struct cucap_profile_activity {
  cucap_profile_activity_kind kind;
  uint64_t seq;          /* Record.seq of the recorded call */
  uint64_t rec_index;    /* its position in the capture (op->rec_index) */
  unsigned pass;
  uint64_t start_ns, end_ns;
  uint64_t bytes;
  int copy_kind;         /* CUCAP_FB_MEMCPYKIND_* for copies, -1 otherwise */
  uint64_t stream;       /* recorded stream handle */
} cucap_profile_activity;

cucap_status cucap_profile_add_activity(cucap_profile *p, const cucap_profile_activity *a);

/* A metric value of a launch; a later value of the same name replaces it.
 * NOT_FOUND: key undeclared. */
cucap_status cucap_profile_add_metric(cucap_profile *p, uint64_t key, const char *name,
                                      double value);

/* One instruction. Strings are copied; NULL = unknown. */
typedef struct cucap_profile_pc {
  const char *function;  /* mangled name of the function holding the PC */
  uint64_t module_id;    /* cubin CRC or other id of the module image */
  uint64_t pc_offset;    /* offset of the instruction in the function */
  const char *sass;      /* instruction text ("FFMA R0, R1, R2, R3") */
  const char *file;      /* source file when the module has line info */
  uint32_t line;         /* 0 unknown */
  const char *inlined;   /* inline chain, outermost last ("f@a.cu:3;g@b.h:9") */
} cucap_profile_pc;

/* PC samples of a launch at one instruction with one stall reason (CUPTI's
 * stall reason name, e.g. "smsp__pcsamp_warps_issue_stalled_long_scoreboard";
 * NULL = "none"); counts add up. NOT_FOUND: key undeclared. */
cucap_status cucap_profile_add_pc_sample(cucap_profile *p, uint64_t key,
                                         const cucap_profile_pc *pc, const char *stall,
                                         uint64_t samples);
/* A SASS metric (cupti_sass_metrics.h, e.g. "smsp__sass_inst_executed") of a
 * launch at one instruction; values add up. */
cucap_status cucap_profile_add_sass_metric(cucap_profile *p, uint64_t key,
                                           const cucap_profile_pc *pc, const char *name,
                                           double value);

/* A program finding (copied; its callsite stacks should be set with
 * cucap_profile_set_stack). */
cucap_status cucap_profile_add_finding(cucap_profile *p, const cucap_finding *f);
/* Forgets the findings (before adding those of an analysis re-run with the
 * profile's GPU durations). */
void cucap_profile_clear_findings(cucap_profile *p);

/* ---- reading (one thread, after filling) ------------------------------- */

cucap_status cucap_profile_finalize(cucap_profile *p);

void cucap_profile_get_section(const cucap_profile *p, cucap_profile_section s,
                               cucap_profile_state *state, const char **source,
                               const char **message);

typedef struct cucap_profile_timing {
  unsigned pass;
  uint64_t start_ns, end_ns;
} cucap_profile_timing;

typedef struct cucap_profile_top {
  const char *name;      /* stall reason, or "file:line" */
  uint64_t samples;
  double pct;            /* of the samples of the launch/kernel */
} cucap_profile_top;

#define CUCAP_PROFILE_TOP 3

typedef struct cucap_profile_launch {
  uint64_t key, seq;
  const char *kernel;        /* mangled */
  const char *demangled;     /* or the mangled name if it does not demangle */
  const char *short_name;    /* demangled, no parameters, long templates cut */
  uint32_t grid[3], block[3], shared_mem;
  uint64_t stream;
  uint32_t callstack;
  size_t ntimings;
  const cucap_profile_timing *timings;  /* by pass */
  uint64_t median_ns, min_ns, max_ns;   /* of end-start over passes; 0 none */
  double spread_pct;                    /* (max-min)/median*100 */
  size_t nmetrics;
  const uint32_t *metric_ids;           /* cucap_profile_metric_name() */
  const double *metric_values;
  cucap_classification cls;
  uint64_t samples;                     /* PC samples */
  cucap_profile_top stalls[CUCAP_PROFILE_TOP], lines[CUCAP_PROFILE_TOP];
} cucap_profile_launch;

typedef struct cucap_profile_kernel {
  const char *kernel, *demangled, *short_name;
  uint64_t launches, timed;
  uint64_t total_ns;         /* sum of the launches' medians */
  uint64_t median_ns;        /* median of the launches' medians */
  double share_pct;          /* of all kernels' total_ns */
  double spread_pct;         /* median over its launches of their spread */
  /* time-weighted means over the launches that have them (<0: none) */
  double sm_pct, memory_pct, dram_pct, occupancy_pct, tensor_pct;
  cucap_classification cls;  /* from those means */
  uint64_t samples;
  cucap_profile_top stalls[CUCAP_PROFILE_TOP], lines[CUCAP_PROFILE_TOP];
} cucap_profile_kernel;

size_t cucap_profile_launch_count(cucap_profile *p);
const cucap_profile_launch *cucap_profile_launch_at(cucap_profile *p, size_t i); /* key order */
const cucap_profile_launch *cucap_profile_launch_find(cucap_profile *p, uint64_t key);
/* A launch's metric by name; returns 0 and leaves *v alone if absent. */
int cucap_profile_launch_metric(cucap_profile *p, const cucap_profile_launch *l,
                                const char *name, double *v);
const char *cucap_profile_metric_name(const cucap_profile *p, uint32_t id);

size_t cucap_profile_kernel_count(cucap_profile *p);
/* By total time, largest first (then name). */
const cucap_profile_kernel *cucap_profile_kernel_at(cucap_profile *p, size_t i);

size_t cucap_profile_activity_count(const cucap_profile *p);
const cucap_profile_activity *cucap_profile_activity_at(const cucap_profile *p, size_t i);

size_t cucap_profile_finding_count(const cucap_profile *p);
const cucap_finding *cucap_profile_finding_at(const cucap_profile *p, size_t i);

/* Frames of a stack id (NULL if not set). */
const char *const *cucap_profile_stack(const cucap_profile *p, uint32_t id, size_t *n,
                                       size_t *first_app);

/* PC sample rows, in a stable order (launch key, instruction, stall). */
typedef struct cucap_profile_sample_row {
  uint64_t key;
  const cucap_profile_pc *pc;  /* strings owned by the profile */
  const char *stall;
  uint64_t samples;
} cucap_profile_sample_row;
size_t cucap_profile_sample_count(cucap_profile *p);
cucap_status cucap_profile_sample_at(cucap_profile *p, size_t i, cucap_profile_sample_row *out);

typedef struct cucap_profile_sass_row {
  uint64_t key;
  const cucap_profile_pc *pc;
  const char *metric;
  double value;
} cucap_profile_sass_row;
size_t cucap_profile_sass_count(cucap_profile *p);
cucap_status cucap_profile_sass_at(cucap_profile *p, size_t i, cucap_profile_sass_row *out);

/* 1 if both profiles are of the same capture (same capture_id). */
int cucap_profile_same_capture(const cucap_profile *a, const cucap_profile *b);

/* ---- outputs (profile_report.c, profile_folded.c, profile_file.c) ------ */

typedef struct cucap_profile_print_options {
  unsigned top_kernels;      /* rows of the kernel table (default 20) */
  unsigned max_findings;     /* 0 = all */
  cucap_severity min_severity;
} cucap_profile_print_options;
void cucap_profile_print_options_init(cucap_profile_print_options *o);

/* Terminal report: sections (with what to change), the top kernels table
 * (time share, median, spread, class, SM/memory/DRAM/occupancy %, top
 * stall), then the findings. o may be NULL. */
void cucap_profile_print(cucap_profile *p, FILE *out, const cucap_profile_print_options *o);
/* Everything as one JSON object (keys in docs/design.md). */
cucap_status cucap_profile_write_json(cucap_profile *p, cucap_json *w);
/* Folded stacks, one line per distinct stack:
 *   host frames (outermost first);kernel;source file:line;PC SASS COUNT
 * (flamegraph.pl, speedscope, inferno). Without PC samples: one line per
 * launch site "host frames;kernel GPU_NS" (time in ns). Returns the number of
 * lines in *lines (may be NULL). */
cucap_status cucap_profile_write_folded(cucap_profile *p, FILE *out, size_t *lines);

/* The profile file (format in docs/design.md, schema/cucap.fbs ProfileFile):
 * a 32-byte preamble and one zstd frame holding a ProfileFile FlatBuffer. */
#define CUCAP_PROFILE_MAGIC "\x89" "CUPRF\r\n"
#define CUCAP_PROFILE_FORMAT_MAJOR 1
#define CUCAP_PROFILE_FORMAT_MINOR 0
cucap_status cucap_profile_save(cucap_profile *p, const char *path);
/* Reads a profile file; on error *out is NULL and msg (if not NULL) says
 * why. BAD_MAGIC, VERSION (unknown major), CORRUPT/VERIFY/TRUNCATED, IO. */
cucap_status cucap_profile_load(const char *path, cucap_profile **out, char *msg,
                                size_t msg_size);
cucap_status cucap_profile_load_memory(const void *data, size_t size, cucap_profile **out,
                                       char *msg, size_t msg_size);

#ifdef __cplusplus
}
#endif
#endif
