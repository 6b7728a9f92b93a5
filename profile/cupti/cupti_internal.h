/* cupti_internal.h - state shared by the CUPTI engine's files (profile/cupti/cupti_*.c):
 * the dlopen'ed CUPTI entry points, the pass plan, what each pass collected.
 * Internal: only profile/cupti/cupti_*.c include it. The public side is
 * cucap_cupti.h. */
#ifndef CUCAP_CUPTI_INTERNAL_H
#define CUCAP_CUPTI_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda.h>
#include <cupti.h>
#include <cupti_pcsampling.h>
#include <cupti_profiler_host.h> /* C++ <string> include: profile/cupti/cupti_shim */
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_sass_metrics.h>
#include <cupti_target.h>

#include "cucap_clock.h"
#include "cucap_cupti.h"
#include "cucap_hash.h"
#include "cucap_stacktab.h"
#include "cucap_vec.h"
#include "cupti_disasm.h"
#include <cuda.h>
#include <cudaTypedefs.h>

#include "cucap_map.h"

/* ---- the CUDA driver of the probes (cupti_probe.c, cupti_clock.c) ------ */

/* The few driver entry points `cupti probe` and the clock reset call
 * outside a replay (cucap_getproc.h); NULL where the driver lacks one. */
typedef struct ck_drv {
  void *lib;
  PFN_cuInit_v2000 Init;
  PFN_cuDriverGetVersion_v2020 DriverGetVersion;
  PFN_cuGetErrorName_v6000 GetErrorName;
  PFN_cuDeviceGet_v2000 DeviceGet;
  PFN_cuDeviceGetCount_v2000 DeviceGetCount;
  PFN_cuDeviceGetName_v2000 DeviceGetName;
  PFN_cuDeviceGetAttribute_v2000 DeviceGetAttribute;
  PFN_cuDevicePrimaryCtxRetain_v7000 DevicePrimaryCtxRetain;
  PFN_cuDevicePrimaryCtxRelease_v11000 DevicePrimaryCtxRelease;
  PFN_cuCtxSetCurrent_v4000 CtxSetCurrent;
  PFN_cuCtxSynchronize_v2000 CtxSynchronize;
} ck_drv;
/* dlopens libname (NULL: libcuda.so.1; never closed: the driver keeps
 * process-wide state). CUCAP_ERR_ENV with msg when it cannot be loaded or
 * lacks cuInit/cuDeviceGet/cuDevicePrimaryCtxRetain/cuCtxSetCurrent. */
cucap_status ck_drv_load(ck_drv *d, const char *libname, char *msg, size_t msg_size);
const char *ck_drv_err(const ck_drv *d, CUresult r); /* static name, never NULL */

/* ---- CUPTI entry points ------------------------------------------------ */

/* X(name, group): group says which feature needs it. A missing CORE entry
 * means the library is unusable; a missing entry of another group turns
 * that section off with the name in its note. */
enum { CK_CORE = 1, CK_PROF = 2, CK_PCS = 4, CK_SASS = 8, CK_OPT = 16 };
#define CK_CUPTI_FNS(X)                                                        \
  X(cuptiGetVersion, CK_CORE)                                                  \
  X(cuptiGetResultString, CK_CORE)                                             \
  X(cuptiGetErrorMessage, CK_OPT)                                              \
  X(cuptiSubscribe, CK_CORE)                                                   \
  X(cuptiUnsubscribe, CK_CORE)                                                 \
  X(cuptiEnableDomain, CK_CORE)                                                \
  X(cuptiEnableCallback, CK_OPT)                                               \
  X(cuptiGetCallbackName, CK_OPT)                                              \
  X(cuptiActivityEnableDriverApi, CK_OPT)                                      \
  X(cuptiActivityRegisterCallbacks, CK_CORE)                                   \
  X(cuptiActivityEnable, CK_CORE)                                              \
  X(cuptiActivityDisable, CK_CORE)                                             \
  X(cuptiActivityFlushAll, CK_CORE)                                            \
  X(cuptiActivityGetNextRecord, CK_CORE)                                       \
  X(cuptiActivityGetNumDroppedRecords, CK_OPT)                                 \
  X(cuptiGetContextId, CK_OPT)                                                 \
  X(cuptiProfilerInitialize, CK_PROF)                                          \
  X(cuptiProfilerDeInitialize, CK_PROF)                                        \
  X(cuptiDeviceGetChipName, CK_PROF)                                           \
  X(cuptiProfilerGetCounterAvailability, CK_PROF)                              \
  X(cuptiProfilerDeviceSupported, CK_OPT)                                      \
  X(cuptiProfilerHostInitialize, CK_PROF)                                      \
  X(cuptiProfilerHostDeinitialize, CK_PROF)                                    \
  X(cuptiProfilerHostGetBaseMetrics, CK_OPT)                                   \
  X(cuptiProfilerHostGetMetricProperties, CK_PROF)                             \
  X(cuptiProfilerHostConfigAddMetrics, CK_PROF)                                \
  X(cuptiProfilerHostGetConfigImageSize, CK_PROF)                              \
  X(cuptiProfilerHostGetConfigImage, CK_PROF)                                  \
  X(cuptiProfilerHostGetNumOfPasses, CK_PROF)                                  \
  X(cuptiProfilerHostEvaluateToGpuValues, CK_PROF)                             \
  X(cuptiProfilerHostGetMaxNumHardwareMetricsPerPass, CK_OPT)                  \
  X(cuptiRangeProfilerEnable, CK_PROF)                                         \
  X(cuptiRangeProfilerDisable, CK_PROF)                                        \
  X(cuptiRangeProfilerStart, CK_PROF)                                          \
  X(cuptiRangeProfilerStop, CK_PROF)                                           \
  X(cuptiRangeProfilerPushRange, CK_OPT)                                       \
  X(cuptiRangeProfilerPopRange, CK_OPT)                                        \
  X(cuptiRangeProfilerSetConfig, CK_PROF)                                      \
  X(cuptiRangeProfilerDecodeData, CK_PROF)                                     \
  X(cuptiRangeProfilerGetCounterDataSize, CK_PROF)                             \
  X(cuptiRangeProfilerCounterDataImageInitialize, CK_PROF)                     \
  X(cuptiRangeProfilerGetCounterDataInfo, CK_PROF)                             \
  X(cuptiRangeProfilerCounterDataGetRangeInfo, CK_OPT)                         \
  X(cuptiPCSamplingEnable, CK_PCS)                                             \
  X(cuptiPCSamplingDisable, CK_PCS)                                            \
  X(cuptiPCSamplingStart, CK_PCS)                                              \
  X(cuptiPCSamplingStop, CK_PCS)                                               \
  X(cuptiPCSamplingGetData, CK_PCS)                                            \
  X(cuptiPCSamplingSetConfigurationAttribute, CK_PCS)                          \
  X(cuptiPCSamplingGetNumStallReasons, CK_PCS)                                 \
  X(cuptiPCSamplingGetStallReasons, CK_PCS)                                    \
  X(cuptiGetSassToSourceCorrelation, CK_OPT)                                   \
  X(cuptiGetCubinCrc, CK_OPT)                                                  \
  X(cuptiSassMetricsGetProperties, CK_SASS)                                    \
  X(cuptiSassMetricsGetNumOfMetrics, CK_OPT)                                   \
  X(cuptiSassMetricsGetMetrics, CK_OPT)                                        \
  X(cuptiSassMetricsSetConfig, CK_SASS)                                        \
  X(cuptiSassMetricsUnsetConfig, CK_SASS)                                      \
  X(cuptiSassMetricsEnable, CK_SASS)                                           \
  X(cuptiSassMetricsDisable, CK_SASS)                                          \
  X(cuptiSassMetricsGetDataProperties, CK_SASS)                                \
  X(cuptiSassMetricsFlushData, CK_SASS)

typedef struct ck_api {
  void *lib;
  char path[512];
  unsigned groups;           /* CK_* groups with every entry present */
  char missing[256];         /* first missing entry per group, for notes */
  char dir[512];             /* the library's directory (nvperf preload) */
  pthread_t preload;         /* libnvperf preload (cupti_load.c) */
  enum { CK_PRELOAD_NONE, CK_PRELOAD_RUNNING, CK_PRELOAD_DONE } preload_state;
#define CK_X_FIELD(name, grp) __typeof__(&name) name;
  CK_CUPTI_FNS(CK_X_FIELD)
#undef CK_X_FIELD
} ck_api;

/* cupti_load.c: dlopen + dlsym (path NULL: search). 0 with msg filled when
 * no usable library was found. */
int ck_api_load(ck_api *a, const char *path, char *msg, size_t msg_size);
void ck_api_unload(ck_api *a);
/* Starts preloading libnvperf_host and libnvperf_target from CUPTI's
 * directory (so that the Profiler Host API finds them) on a thread of its
 * own; once, and only where the library has the Profiler API. Called after
 * cuptiSubscribe: see cupti_load.c. */
void ck_api_nvperf_start(ck_api *a);
/* Waits for that preload (or preloads in line if it was never started):
 * called before the first Profiler (Host) API call. */
void ck_api_nvperf_wait(ck_api *a);
/* "CUPTI_ERROR_X (n): message" into buf (always terminated). */
const char *ck_strerror(const ck_api *a, CUptiResult r, char *buf, size_t n);

/* Checked calls: CK_CALL(E, fn, args...) evaluates to 1 when the call
 * returned CUPTI_SUCCESS; else logs "cupti: fn failed: ..." (at the level
 * E->quiet_level, warn by default), keeps the result in E->last and the
 * message in E->last_msg, and evaluates to 0. A missing entry point is a
 * failure with CUPTI_ERROR_API_NOT_IMPLEMENTED. Once CUPTI is known to be
 * unusable (E->dead, see ck_cupti_alive) nothing is called any more: the
 * call fails with CUPTI_ERROR_NOT_INITIALIZED and E->dead_why. */
#define CK_CALL(E, fn, ...)                                                    \
  ((E)->dead       ? ck_skip((E), #fn)                                         \
   : (E)->api.fn ? ck_check((E), (E)->api.fn(__VA_ARGS__), #fn)                \
                 : ck_missing((E), #fn))

/* ---- collected data ----------------------------------------------------- */

/* An interned string table (strings owned by it). */
typedef struct ck_strtab {
  char **s;
  size_t n, cap;
  cucap_map idx;                /* hash (+ probe) -> index + 1 */
} ck_strtab;
const char *ck_intern(ck_strtab *t, const char *s);
const char *ck_intern_n(ck_strtab *t, const char *s, size_t len);
void ck_strtab_free(ck_strtab *t);

/* One GPU activity record copied out of a CUPTI buffer (worker thread). */
typedef struct ck_act {
  uint8_t kind;              /* CUPTI_ACTIVITY_KIND_* (kernel/memcpy/memset) */
  uint8_t copy_kind;
  uint32_t corr, stream, ctx;
  uint64_t start, end, bytes;
  int32_t grid[3], block[3];
  uint32_t regs, ssmem, dsmem;
  char *name;                /* malloc'ed copy (kernels) */
} ck_act;

/* A GPU-work op of the current pass, as driver-API callbacks saw it. */
typedef struct ck_op {
  uint64_t rec_index, seq, launch_index;
  uint64_t stream;           /* recorded stream handle */
  uint32_t callstack;
  int body;
  int copy_kind;             /* Memcpy records: cucap.fb.MemcpyKind; else -1 */
} ck_op;

typedef struct ck_corr {
  uint32_t corr;
  uint32_t op;               /* index into ops */
} ck_corr;

/* Internal side of a kernel entry (parallel to E->kern). */
typedef struct ck_kx {
  double *durs;              /* per timeline pass */
  cucap_cupti_time *t;       /* the same measurements: pass, start, end */
  unsigned ndurs;
  uint32_t context_id;
} ck_kx;

typedef struct ck_cx {
  double *durs;
  cucap_cupti_time *t;
  unsigned ndurs;
} ck_cx;

/* One L2 flusher (cupti_flush.c): a buffer twice the L2 size and the
 * kernel that reads it (mod/fn NULL: a memset of it instead). */
typedef struct ck_flusher {
  CUcontext ctx;     /* NULL: the profiled context; else the side context
                        created for it (destroyed with it), or the green
                        context's CUcontext handle */
  CUgreenCtx green;  /* the green context ctx stands for (destroyed with
                        it), NULL for a side context */
  CUdeviceptr buf;
  CUmodule mod;
  CUfunction fn;
} ck_flusher;

/* Where the counter passes flush from (CUCAP_PROFILE_FLUSH_CTX) */
typedef enum {
  CK_FLUSH_CTX_SIDE = 0,     /* the duration passes from the side context
                                (default) */
  CK_FLUSH_CTX_GREEN,        /* the duration passes from a green context of
                                the primary one, else from the side context */
  CK_FLUSH_CTX_ALL,          /* every counter pass from the side context */
  CK_FLUSH_CTX_OWN           /* none: all flush in the profiled context */
} ck_flush_ctx_mode;

/* A cubin CUPTI loaded (module-loaded callback) or one extracted from the
 * capture's images. */
typedef struct ck_cubin {
  void *data;
  size_t size;
  uint64_t crc;              /* cuptiGetCubinCrc; 0 until computed */
  uint64_t hash;             /* content hash (dedupe) */
  int disasm_done;
} ck_cubin;

/* One profiled window of the metrics phase: kernels [k_lo, k_hi) of E->kern
 * (sorted by record), submitted by records [rec_lo, rec_hi]. A window holds
 * either plain launches or graph launches, never both: a CUPTI failure on
 * graph launches must not cost the plain launches their metrics. */
enum { CK_WIN_AUTO = 0, CK_WIN_USER = 1 }; /* range mode of a window */
typedef struct ck_window {
  uint64_t rec_lo, rec_hi;
  size_t k_lo, k_hi;
  int graph;                 /* its ops are graph launches */
  int mode;                  /* CK_WIN_AUTO: one range per kernel;
                                CK_WIN_USER: one range per graph launch */
  size_t nops;               /* ops with kernels in the window */
} ck_window;


/* Where the engine's wall time went (seconds; the JSON's "timing" object
 * and an info line at the end). Replay passes are timed from pass_begin to
 * pass_end; "between" is the replayer's own work between two passes
 * (objects destroyed, memory zeroed and restored), charged to the phase of
 * the pass that follows. */
typedef struct ck_timing {
  double attach_s;           /* CUPTI loaded, subscribed, activity set up */
  double begin_s;            /* device queries, profiler host, metric config */
  double pass_s[CUCAP_CUPTI_NSECTIONS];
  double between_s[CUCAP_CUPTI_NSECTIONS];
  double window_s;           /* metrics: from Start to Stop, summed */
  double rp_startstop_s;     /* metrics: in cuptiRangeProfilerStart and Stop */
  double rp_stop_s;          /* metrics: the Stop part of rp_startstop_s */
  double rp_setup_s;         /* metrics: range profiler enable, counter image,
                                config, per window */
  double decode_s;           /* metrics: decode + evaluate */
  double pcs_drain_s;        /* PC sampling: syncs + GetData */
  double resolve_s;          /* sampled instructions: CRCs, lines, SASS */
  double source_s;           /* of which cuptiGetSassToSourceCorrelation */
  double nvdisasm_s;         /* of which nvdisasm (wall, runs in parallel) */
  unsigned nvdisasm_runs, source_calls;
  double sass_collect_s;     /* SASS metrics: flush + join */
  double t_last_pass_end;    /* internal: when the previous pass ended */
} ck_timing;

typedef enum ck_phase {
  CK_PH_TIMELINE = 0,
  CK_PH_METRICS,
  CK_PH_PCSAMP,
  CK_PH_SASS,
  CK_PH_DONE
} ck_phase;

/* The metrics phase (cupti_metrics.c: names, config, windows;
 * cupti_ranges.c: the range profiler through the passes). */
typedef struct ck_metrics {
  CUpti_Profiler_Host_Object *host;
  uint8_t *avail;             /* counter availability image: the host object
                                 keeps a pointer to it (freed with it) */
  uint8_t *config;
  size_t config_size;
  uint8_t *counter;           /* counter data image of the current object */
  size_t counter_size;
  size_t max_ranges;          /* per window, flush ranges included */
  /* gpu__time_duration.sum from a counter pass of its own (cupti_metrics.c
   * ck_dur_config): dhost/dconfig NULL when the main config is that metric
   * alone, or when the own config could not be made */
  CUpti_Profiler_Host_Object *dhost;
  uint8_t *dconfig;
  size_t dconfig_size;
  int dur_col;                /* its column in E->mnames, -1: not asked */
  const char *dnames[8];      /* the duration pass's metrics: [0] the
                                 duration, then its companions (interned) */
  size_t ndnames;
  int dur_phase;              /* the current window runs the duration config */
  unsigned dur_reps;          /* duration passes per window (median of them) */
  unsigned dur_rep;           /* the current one, 0-based */
  double *dvals;              /* per kernel, dur_reps values (NAN: none yet) */
  size_t dur_attributed;      /* kernels whose duration came from it */
  char dur_note[256];         /* why a duration pass failed (first one) */
  CUpti_RangeProfiler_Object *rp; /* the current window's (NULL: none) */
  int rp_dur;                 /* rp was set up for the duration config */
  int started;                /* between Start and Stop */
  int stopped;                /* this pass reached Stop */
  int all_submitted;
  int win_failed;             /* the current window failed (win_note) */
  int rp_mode;                /* range mode (ck_window.mode) rp was set up for */
  int rp_broken;              /* a range profiler call itself failed (not a
                                 pass count): CUPTI is not asked again */
  int in_range;               /* a user range is pushed, not popped yet */
  int over;                   /* no more windows: the phase is over */
  unsigned window_passes;
  double t_start;             /* when Start returned (timing) */
  uint64_t *flushed;          /* ops flushed this pass (rec_index) */
  size_t nflushed, capflushed;
  size_t attributed, failed_windows, time_outliers;
  size_t graph_user_windows;  /* graph windows measured per graph launch */
  char win_note[1024];        /* why the current window failed */
  char fail_note[1200];       /* the first failed window's note */
  char graph_note[1024];       /* why graph launches are measured in user ranges */
} ck_metrics;
typedef struct ck_pcs ck_pcs;         /* cupti_pcsamp.c */

/* ---- the engine's parts ------------------------------------------------
 * Each part is filled by the file(s) named above it, which also free it
 * (cucap_cupti_destroy calls their ck_*_free); the others only read it. */

/* The driver entry points the engine calls itself (flush kernels, side and
 * green contexts, synchronizing), looked up at attach (cupti_engine.c). */
typedef struct ck_cu {
  CUresult (*CtxSynchronize)(void);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*MemAlloc)(CUdeviceptr *, size_t);
  CUresult (*MemFree)(CUdeviceptr);
  CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
  CUresult (*CtxGetCurrent)(CUcontext *);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*CtxCreate)(CUcontext *, unsigned, CUdevice);
  CUresult (*CtxDestroy)(CUcontext);
  CUresult (*CtxPushCurrent)(CUcontext);
  CUresult (*CtxPopCurrent)(CUcontext *);
  CUresult (*DriverGetVersion)(int *);
  CUresult (*ModuleLoadData)(CUmodule *, const void *);
  CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*ModuleUnload)(CUmodule);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                           unsigned, unsigned, unsigned, CUstream, void **,
                           void **);
  CUresult (*DeviceGetDevResource)(CUdevice, CUdevResource *, CUdevResourceType);
  CUresult (*DevResourceGenerateDesc)(CUdevResourceDesc *, CUdevResource *,
                                      unsigned);
  CUresult (*GreenCtxCreate)(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned);
  CUresult (*GreenCtxDestroy)(CUgreenCtx);
  CUresult (*CtxFromGreenCtx)(CUcontext *, CUgreenCtx);
} ck_cu;

/* cupti_correlate.c: the current pass's GPU-work ops and the correlation
 * ids of their driver calls; cupti_engine.c moves cur/cur_op around each
 * op, cupti_lookup.c searches corr. Reset at every pass begin. */
typedef struct ck_op_state {
  /* per-pass op and correlation tables (driver-API callbacks) */
  int in_op;                 /* between op_before and op_after */
  const cucap_replay_op *cur;
  int64_t cur_op;            /* index into ops for the current op, -1 */
  ck_op *ops;
  size_t nops, capops;
  ck_corr *corr;
  size_t ncorr, capcorr;
  int corr_unsorted;
} ck_op_state;

/* cupti_timeline.c: the activity records and what the timeline passes
 * made of them. kern/nkern (sorted by record) is the kernel table every
 * later phase indexes. */
typedef struct ck_timeline_state {
  /* The driver calls that put work on the GPU (launches, copies, memsets,
   * graph launches) and the probe's two calls: the only ones the engine
   * takes callbacks and API records for (ck_work_cbids_init). n == 0: the
   * whole driver domain and the DRIVER activity kind, as before CUPTI
   * could select (or CUCAP_CUPTI_API_SCOPE=all). */
  uint32_t *work_cbid;
  size_t nwork_cbid, cap_work_cbid;
  int api_recs_on;           /* per-cbid API records currently enabled */

  /* activity records from CUPTI's buffers (any thread; under mu) */
  pthread_mutex_t mu;
  ck_act *pend;
  size_t npend, cappend;
  uint64_t act_dropped;      /* cuptiActivityGetNumDroppedRecords */
  uint64_t unattributed;     /* records whose correlation id matched no op */

  /* timeline results */
  cucap_cupti_kernel *kern;
  ck_kx *kx;
  size_t nkern, capkern, capkx;
  cucap_cupti_copy *copy;
  ck_cx *cx;
  size_t ncopy, capcopy, capcx;
  uint64_t t_origin;         /* first record start of timeline pass 1 */
  uint64_t timeline_mismatch;/* kernels a later pass saw differently */
} ck_timeline_state;

/* cupti_metrics.c (names, windows planned), cupti_ranges.c (the current
 * window) and cupti_rangedata.c (values, graph metrics): the metrics
 * phase's results, kept after the phase state (ck_metrics) is released. */
typedef struct ck_metric_tab {
  const char **mnames;       /* the metric names (interned) */
  char mdropped[256];        /* names asked for that the chip lacks */
  size_t nmnames;
  double *mvals;             /* nkern x nmnames */
  ck_window *win;
  size_t nwin, capwin, cur_win;
  cucap_cupti_graph_metric *gmet; /* graph launches measured as a whole;
                                     each metrics array malloc'ed */
  size_t ngmet, capgmet;
} ck_metric_tab;

/* cupti_flush.c: --cache=flush (cupti_ranges.c reads flush_sync and
 * whether a flusher exists). */
typedef struct ck_flush_state {
  ck_flusher flush[2];       /* cupti_flush.c: [0] in the profiled context,
                                [1] the duration passes' (a context of
                                its own, or with CUCAP_PROFILE_FLUSH_CTX=
                                green a green context of the primary one);
                                unused: all zero */
  size_t flush_bytes;
  ck_flush_ctx_mode flush_mode;
  int flush_sync;            /* wait for idle after each flush (cupti_ranges.c) */
} ck_flush_state;

/* cupti_pcsamp.c: PC sampling (sites are resolved by cupti_sass.c and
 * written by cupti_report.c). */
typedef struct ck_pcsamp_state {
  ck_pcs *pcs;
  const char **stall;        /* stall reason names (interned) */
  size_t nstall;
  cucap_cupti_pc_site *site;
  size_t nsite, capsite;
  cucap_map site_idx;
  cucap_cupti_pc_sample *samp;
  size_t nsamp, capsamp;
} ck_pcsamp_state;

/* cupti_sass.c: SASS metrics (opaque: only cupti_sass.c touches them;
 * NULL until first needed). */
typedef struct ck_sass_state ck_sass_state;

/* cupti_sass.c (cubins kept, extracted, disassembled) and
 * cupti_disasm_early.c (early): the code the sampled PCs lie in. */
typedef struct ck_cubin_state {
  /* cubins, and the capture's module images (first pass) as a fallback */
  ck_cubin *cubin;
  size_t ncubin, capcubin;
  cucap_hash128 *images;
  size_t nimages, capimages;
  pthread_mutex_t cubin_mu;  /* the module callback may run on any thread */

  /* nvdisasm on the window's kernels, run beside the counter passes
   * (cupti_disasm_early.c); NULL until the timeline pass ends */
  struct ck_disasm_early *early;
} ck_cubin_state;

/* cupti_clock.c: --clock-control. */
typedef struct ck_clock_state {
  int tried;                 /* cupti_clock.c: the lock was attempted */
  int ok;                    /* ... and took */
} ck_clock_state;

/* cupti_report.c: host callstacks and the summaries (opaque: only
 * cupti_report.c touches them; NULL until first needed). */
typedef struct ck_report ck_report;

struct cucap_cupti {
  cucap_replay_observer obs;
  cucap_cupti_options o;
  char *metrics_opt;         /* owned copy of o.metrics */
  char *nvdisasm_opt;
  ck_api api;
  cucap_cupti_env env;
  cucap_cupti_section sec[CUCAP_CUPTI_NSECTIONS];
  CUptiResult last;
  char last_msg[1024];
  int quiet;                 /* log CUPTI failures at debug level */
  /* CUPTI's own health. CUPTI can tear itself down after an internal error
   * (seen on the H100 while another process profiled the GPU: PC sampling
   * calls failed with CUPTI_ERROR_UNKNOWN, CUPTI dropped its subscribers and
   * the next cuptiActivityDisable dereferenced a freed table). ck_cupti_alive
   * tells it apart from an ordinary failure by whether driver callbacks
   * still arrive; once dead, the engine calls CUPTI no more. */
  int dead;
  char dead_why[1024];
  volatile int probing;      /* ck_cupti_alive: count driver callbacks */
  volatile unsigned probe_hits;
  unsigned act_on;           /* activity kinds this engine enabled (bit k) */
  ck_timing tm;

  /* replay side */
  cucap_replay_session *s;
  CUcontext ctx;             /* the profiled context: the replay's primary
                                context, or one the program created
                                (cuCtxCreate) if the window's kernels ran
                                there (ck_pick_ctx) */
  uint32_t ctx_id;           /* its CUPTI context id (0: unknown) */
  int device;
  int cc;                    /* compute capability, e.g. 90 */
  int prof_init;             /* cuptiProfilerInitialize done */
  int attached;              /* subscribed, activity callbacks registered */
  CUpti_SubscriberHandle sub;
  ck_cu cu;
  /* contexts the first pass ran launches in, with their CUPTI ids: the
   * profiled one (ctx) is where most kernels of the window ran */
#define CK_MAX_CTXS 16
  struct { CUcontext ctx; uint32_t id; } ctxs[CK_MAX_CTXS];
  size_t nctxs;
  CUcontext primary;         /* the replay's primary context */

  /* pass plan */
  ck_phase phase;
  unsigned phase_pass;       /* passes done in this phase */
  unsigned pass;             /* replay pass being executed */
  double pass_t0;

  /* the profiled window (records), found in the first pass */
  uint64_t win_lo, win_hi;   /* UINT64_MAX until seen */
  uint64_t launches_in_window;

  int own_call;              /* the engine itself calls the driver */

  /* the parts */
  ck_op_state op;            /* cupti_correlate.c */
  ck_timeline_state tl;      /* cupti_timeline.c */
  ck_metrics *m;             /* the metrics phase: cupti_metrics.c,
                                cupti_ranges.c */
  ck_metric_tab mt;          /* cupti_metrics.c, cupti_ranges.c,
                                cupti_rangedata.c */
  ck_flush_state fl;         /* cupti_flush.c */
  ck_pcsamp_state pc;        /* cupti_pcsamp.c */
  ck_sass_state *sm;         /* cupti_sass.c */
  ck_cubin_state cb;         /* cupti_sass.c, cupti_disasm_early.c */
  ck_clock_state clk;        /* cupti_clock.c */
  ck_report *rep;            /* cupti_report.c */

  ck_strtab str;
};

typedef struct cucap_cupti ck_engine;

/* cupti_engine.c */
int ck_check(ck_engine *E, CUptiResult r, const char *fn);
int ck_missing(ck_engine *E, const char *fn);
int ck_skip(ck_engine *E, const char *fn);   /* CUPTI is dead: not called */
/* After CUPTI failed in `fn` with an error that may mean it tore itself
 * down: makes a driver call of its own and checks that CUPTI's driver
 * callback still fires. 0 (and E->dead set, E->dead_why filled, CUPTI's
 * buffer callbacks unhooked) when it does not. Never call from a CUPTI
 * callback. 1 when alive or when it cannot tell (not attached yet). */
int ck_cupti_alive(ck_engine *E, const char *fn);
/* Enables/disables one activity kind, tracking what this engine enabled:
 * a kind is enabled at most once and disabled only if this engine enabled
 * it. 1 on success (or nothing to do). */
int ck_act_set(ck_engine *E, CUpti_ActivityKind kind, int on);
void ck_section(ck_engine *E, cucap_cupti_section_id id, int state,
                const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* cupti_lookup.c */
/* The op (ops index) that a correlation id of this pass belongs to, -1. */
int64_t ck_corr_op(ck_engine *E, uint32_t corr);
/* Kernel index for (rec_index, sub), -1. */
int64_t ck_kernel_find(const ck_engine *E, uint64_t rec_index, uint32_t sub);
/* Kernel of op rec_index whose name is `name` (graph launches), -1. */
int64_t ck_kernel_by_name(const ck_engine *E, uint64_t rec_index,
                          const char *name);
/* 1 if record rec_index lies in the profiled window. */
int ck_in_window(const ck_engine *E, uint64_t rec_index);

/* cupti_timeline.c */
/* Median, minimum, maximum and (mean != NULL) mean of d[0..n); NAN for
 * n == 0. d is not modified. */
void ck_stats(const double *d, unsigned n, double *med, double *mn, double *mx,
              double *mean);
int ck_timeline_attach(ck_engine *E);        /* register buffers, enable kinds */
void ck_timeline_disable(ck_engine *E);
void ck_timeline_forget(ck_engine *E);       /* no CUPTI call: unhook only */
void ck_api_records(ck_engine *E, int on);   /* DRIVER activity (corr ids) */
int ck_work_cbids_init(ck_engine *E);        /* cupti_timeline.c */
/* After a timeline pass (context synchronized): flush, join, store. */
void ck_timeline_pass_end(ck_engine *E, unsigned tpass);
void ck_timeline_finish(ck_engine *E);       /* medians, spreads */
void ck_act_free(ck_engine *E);
/* cucap_cupti_destroy: each part's tables, freed by the part's owner */
void ck_timeline_free(ck_engine *E);         /* E->tl's tables */
void ck_ops_free(ck_engine *E);              /* cupti_correlate.c: E->op */
void ck_metric_tab_free(ck_engine *E);       /* cupti_metrics.c: E->mt */
void ck_pcs_results_free(ck_engine *E);      /* cupti_pcsamp.c: E->pc's tables */
void ck_sass_free(ck_engine *E);             /* cupti_sass.c: E->sm */

/* cupti_sets.c: cuptiProfilerInitialize + chip name (env.chip), once; 0 on
 * failure. */
int ck_prof_init(ck_engine *E);
void ck_prof_deinit(ck_engine *E);

/* cupti_metrics.c */
/* A range-profiler host object for this chip, on the counter availability
 * image avail (which it refers to until it is deinitialised: the caller's,
 * with cuptiProfilerHostDeinitialize); NULL with E->last_msg set. Waits for
 * the libnvperf preload first. */
CUpti_Profiler_Host_Object *ck_host_new(ck_engine *E, const uint8_t *avail);
/* the duration passes' config (cupti_metrics.c: gpu__time_duration.sum and
 * the companions that give its range ncu's length): made at begin, freed
 * with the metrics state */
extern const char *const ck_dur_name[1]; /* {"gpu__time_duration.sum"} */
void ck_dur_config(ck_engine *E, const uint8_t *avail);
/* ", beside a, b" naming the duration passes' companions ("" when the
 * duration is alone) in buf, which it returns (truncated to n bytes) */
const char *ck_dur_beside(const ck_metrics *m, char *buf, size_t n);
void ck_dur_free(ck_engine *E);
void ck_metrics_free(ck_engine *E);
const char *ck_privilege_hint(void);
/* Kernel k is measured by the range profiler: in the replay's primary
 * context (the range profiler object is per context) and in the window. */
int ck_kernel_profiled(const ck_engine *E, size_t k);
/* At begin: counters allowed? names valid? config image, pass count.
 * Returns 0 when the metrics section is off (note set). Fatal user errors
 * (unknown raw metric names) return -1 with msg filled. */
int ck_metrics_begin(ck_engine *E, char *msg, size_t msg_size);
/* Plans the windows after the timeline (E->kern final); 0: nothing to do. */
int ck_metrics_plan(ck_engine *E);
void ck_metrics_op_before(ck_engine *E, const cucap_replay_op *op);
void ck_metrics_op_after(ck_engine *E, const cucap_replay_op *op);
/* The current window's Stop ran in this pass (the rest of it is idle). */
int ck_metrics_window_stopped(const ck_engine *E);
/* Releases the range profiler, host object and flush buffer (values kept). */
void ck_metrics_done(ck_engine *E);
/* cupti_ranges.c: sets up the current window (E->cur_win): a fresh range
 * profiler object, the counter data image, the config in the window's
 * range mode. 0 with E->last_msg on failure. */
int ck_win_setup(ck_engine *E);
/* Releases the range profiler object (no CUPTI call once CUPTI is dead). */
void ck_rp_release(ck_engine *E);
/* End of a metrics pass: 1 when another metrics pass is needed. */
int ck_metrics_pass_end(ck_engine *E);
/* The metric names the current pass measures: the duration config's (the
 * duration and its companions, m->dnames) in a duration pass
 * (ck_dur_config), else the requested ones; the engine owns them. */
const char **ck_pass_names(const ck_engine *E, size_t *n);

/* cupti_correlate.c: the callback cuptiSubscribe gets (user: the engine);
 * records (correlation id -> op) for the driver calls of the current op
 * and keeps the cubins of module loads when PC sampling or SASS metrics
 * are asked for. */
void CUPTIAPI ck_callback(void *user, CUpti_CallbackDomain dom,
                          CUpti_CallbackId cbid, const void *data);

/* cupti_rangedata.c */
/* Decode + evaluate the current window into the engine's tables; 0 with
 * m->win_note set when it failed. */
int ck_window_collect(ck_engine *E);
/* Matches a window's ranges to its kernels: exposed for tests. Ranges
 * n_ranges; seq lists, per range position, the kernel index or -1 for a
 * flush memset range. Returns the number of kernels attributed, or -1 when
 * the count does not fit either layout (note set). */
long ck_metrics_attribute(ck_engine *E, const ck_window *w, size_t n_ranges,
                          int64_t *seq, size_t seq_cap);

/* cupti_pcsamp.c */
void ck_pcs_free(ck_engine *E);
size_t ck_ctx_kernels(const ck_engine *E);
/* cupti_clock.c: --clock-control. ck_clock_lock locks the GPU's clocks to
 * base once, before the first pass after the timeline (a failure is a
 * warning and env.clocks says why); ck_clock_restore puts the default back
 * if this process holds a lock (ck_end, cucap_cupti_destroy; one engine per
 * process); ck_clock_note is the metrics section's words for it (static). */
void ck_clock_lock(ck_engine *E);
void ck_clock_restore(void);
const char *ck_clock_note(const ck_engine *E);

/* cupti_flush.c: --cache=flush. setup allocates the buffer and loads the
 * flush kernel in the profiled context, and when duration passes are
 * planned a second set in a context of its own (nothing when not asked for
 * or already done); run enqueues one flush on stream (the profiled context
 * current) or, in a duration pass, runs one in the side context and waits
 * for it; 0 when there is none (or it failed: no more then); free releases
 * everything, the side context included. */
void ck_flush_setup(ck_engine *E);
int ck_flush_run(ck_engine *E, CUstream stream);
void ck_flush_free(ck_engine *E);
/* where the flushes run, for messages: "" (the profiled context), or a
 * phrase naming the side context (a string literal) */
const char *ck_flush_where(const ck_engine *E);
int ck_pcs_setup(ck_engine *E);              /* before the PC pass */
void ck_pcs_op_before(ck_engine *E, const cucap_replay_op *op);
void ck_pcs_op_after(ck_engine *E, const cucap_replay_op *op);
void ck_pcs_pass_end(ck_engine *E);
/* Adds samples of one PC record (exposed for tests). */
void ck_pcs_add(ck_engine *E, int64_t kernel, uint64_t crc,
                const char *function, uint64_t pc, uint32_t stall_index,
                uint32_t count);
int ck_stall_slot(ck_engine *E, uint32_t cupti_index);

/* cupti_sass.c */
void ck_cubin_add(ck_engine *E, const void *data, size_t size);
void ck_cubins_from_image(ck_engine *E, const void *image, size_t size);
void ck_cubin_free(ck_engine *E);
/* Fills file/line/sass/inline chain of every site (after the PC pass). */
void ck_sites_resolve(ck_engine *E);
/* cupti_sass.c: "i,j,k", the symbol-table indices (what nvdisasm -fun
 * takes) of those of names[0..n) that cb's symbol table has, in the order
 * given; when found is not NULL their names go to found[0..*nfound) (room
 * for n). NULL (and *nfound 0) when none is there or memory ran out; the
 * caller frees the string. */
char *ck_cubin_fun_indices(const ck_cubin *cb, const char *const *names,
                           size_t n, const char **found, size_t *nfound);
/* cupti_sass.c: the nvdisasm to run (E->o.nvdisasm, $CUDA_HOME/bin,
 * /usr/local/cuda/bin, PATH), written into buf; NULL when none. */
const char *ck_nvdisasm_path(ck_engine *E, char *buf, size_t n);

/* cupti_disasm_early.c: after the timeline pass, nvdisasm on the kernels
 * that ran, on a thread of its own (CUCAP_PROFILE_EARLY_DISASM=0: not). */
typedef struct ck_disasm_early ck_disasm_early;
void ck_disasm_early_start(ck_engine *E);
/* Joins that thread (once), then: the listing kept for E->cubin[cubin] and
 * the kernel names it covers (sorted by pointer, interned in E->str), or
 * NULL. Owned by the engine, valid until ck_disasm_early_free. */
const char *ck_disasm_early_listing(ck_engine *E, size_t cubin, size_t *len,
                                    const char *const **names, size_t *nnames);
/* 1 when the interned `name` is among names[0..n) (sorted by pointer). */
int ck_disasm_early_has(const char *const *names, size_t n, const char *name);
/* Joins the thread and frees its listings; accepts an engine with none. */
void ck_disasm_early_free(ck_engine *E);
int ck_sass_setup(ck_engine *E);
void ck_sass_op_before(ck_engine *E, const cucap_replay_op *op);
void ck_sass_op_after(ck_engine *E, const cucap_replay_op *op);
void ck_sass_pass_end(ck_engine *E);
/* The SASS metrics state: 0 off, 1 configured, 2 enabled, 3 collected,
 * 4 enable failed. */
int ck_sass_state_of(const ck_engine *E);


/* cupti_report.c */
void ck_stack_feed(ck_engine *E, const void *record); /* Callstack/ModuleMap */
/* symbolize every fed stack on a thread of its own (after the first pass:
 * nothing is fed later); join waits for it (no-op when none runs) */
void ck_stacks_warm_start(ck_engine *E);
void ck_stacks_warm_join(ck_engine *E);
void ck_report_free(ck_engine *E);
void ck_timing_log(ck_engine *E); /* the timing breakdown, at info level */

#endif
