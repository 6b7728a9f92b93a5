/* mock_cupti_rp.c - the stand-in libcupti's counters: the profiler host
 * API (metric configs and their pass counts, evaluation) and the range
 * profiler (auto and user ranges over the kernels mock_cupti.c reports).
 * Test code only; the knobs are listed in mock_cupti.c. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include "mock_cupti_internal.h"

int mcu_rp_enabled;
static int rp_started, rp_configured;
static const void *rp_ctx; /* the context the range profiler measures */
static size_t rp_passes_done, rp_max_ranges;
/* of the SetConfig image: passes, metrics, and metrics that are neither
 * the duration nor a cycle count (0: the engine's duration config) */
static size_t rp_cfg_passes = 1, rp_cfg_metrics, rp_cfg_heavy;
static size_t rp_dur_configs; /* SetConfig calls with a duration config */
static uint8_t *rp_image;
static size_t rp_image_size;
static double *rp_durs; /* this pass */
static size_t rp_n, rp_cap;
static int rp_obj_token, host_obj_token;
static int rp_user;         /* CUPTI_UserRange configured */
static int rp_sized;        /* GetCounterDataSize was asked of this object */
static int rp_mode_set = -1; /* the range mode this object was first set to */
static int rp_open;         /* a user range is pushed */
static int rp_graph_bad;    /* MOCK_CUPTI_GRAPH_AUTO_FAIL tripped this pass */
static char *rp_names[4096];/* user range names of this pass */

static size_t passes_wanted(void) {
  const char *v = getenv("MOCK_CUPTI_PASSES");
  int n = v ? atoi(v) : 2;
  return n > 0 ? (size_t)n : 1;
}

static void rp_add(double dur);
static void rp_kernel(double dur, int graph) {
  if (rp_user) {
    if (rp_open && rp_n)
      rp_durs[rp_n - 1] += dur; /* inside the pushed range */
    return;
  }
  if (graph && mcu_env_on("MOCK_CUPTI_GRAPH_AUTO_FAIL"))
    rp_graph_bad = 1;
  rp_add(dur);
}

static void rp_add(double dur) {
  if (rp_n == rp_cap) {
    size_t nc = rp_cap ? rp_cap * 2 : 64;
    double *nd = realloc(rp_durs, nc * sizeof *nd);
    if (!nd)
      return;
    rp_durs = nd;
    rp_cap = nc;
  }
  /* MOCK_CUPTI_COUNTER_OVERHEAD_NS: a range collecting more counters than
   * the duration alone is that much longer (as short kernels are on the
   * H100) */
  const char *o = getenv("MOCK_CUPTI_COUNTER_OVERHEAD_NS");
  if (o && *o && rp_cfg_heavy)
    dur += atof(o);
  const char *a = getenv("MOCK_CUPTI_ALONE_SHORT_NS");
  if (a && *a && rp_cfg_metrics == 1)
    dur = dur - atof(a) < 1 ? 1 : dur - atof(a);
  /* MOCK_CUPTI_DURATION_ONLY_NS="a,b,c": a range of a duration config (the
   * engine's duration passes) lasts a in the first such config, b in the
   * second, ... (cycling): the engine must keep their median */
  const char *d1 = getenv("MOCK_CUPTI_DURATION_ONLY_NS");
  if (d1 && *d1 && !rp_cfg_heavy) {
    size_t n = 1;
    for (const char *c = d1; *c; c++)
      n += *c == ',';
    size_t want = (rp_dur_configs - 1) % n;
    const char *c = d1;
    for (size_t i = 0; i < want; i++)
      c = strchr(c, ',') + 1;
    dur = atof(c);
  }
  rp_durs[rp_n++] = dur;
}

void mcu_rp_kernel(const void *ctx, double dur, int graph) {
  if (!rp_started || ctx != rp_ctx)
    return;
  rp_kernel(dur, graph);
  if (mcu_env_on("MOCK_CUPTI_EXTRA_RANGE") && rp_n == 1 && !rp_user)
    rp_add(1.0);
}

void mcu_rp_memset(const void *ctx, double dur) {
  if (rp_started && ctx == rp_ctx && !rp_user &&
      mcu_env_on("MOCK_CUPTI_MEMSET_RANGES"))
    rp_add(dur);
}

/* ---- profiler host + target --------------------------------------------- */

CUptiResult CUPTIAPI cuptiProfilerInitialize(CUpti_Profiler_Initialize_Params *p) {
  return p ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}
CUptiResult CUPTIAPI cuptiProfilerDeInitialize(CUpti_Profiler_DeInitialize_Params *p) {
  return p ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}
CUptiResult CUPTIAPI cuptiDeviceGetChipName(CUpti_Device_GetChipName_Params *p) {
  if (!p)
    return CUPTI_ERROR_INVALID_PARAMETER;
  p->pChipName = "MOCK90";
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiProfilerGetCounterAvailability(
    CUpti_Profiler_GetCounterAvailability_Params *p) {
  if (!p)
    return CUPTI_ERROR_INVALID_PARAMETER;
  if (mcu_env_on("MOCK_CUPTI_NO_COUNTERS"))
    return CUPTI_ERROR_INSUFFICIENT_PRIVILEGES;
  if (mcu_env_on("MOCK_CUPTI_HW_BUSY"))
    return CUPTI_ERROR_HARDWARE_BUSY;
  if (!p->pCounterAvailabilityImage)
    p->counterAvailabilityImageSize = 16;
  else
    memset(p->pCounterAvailabilityImage, 0xA5, p->counterAvailabilityImageSize);
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiProfilerDeviceSupported(CUpti_Profiler_DeviceSupported_Params *p) {
  if (!p)
    return CUPTI_ERROR_INVALID_PARAMETER;
  p->isSupported = p->architecture = p->sli = p->vGpu = p->confidentialCompute =
      p->cmp = p->wsl = CUPTI_PROFILER_CONFIGURATION_SUPPORTED;
  return CUPTI_SUCCESS;
}

static int metric_known(const char *n) {
  return n && !strstr(n, "bogus");
}

typedef struct host_obj {
  int token;
  size_t nmetrics, nheavy; /* nheavy: neither the duration nor cycles */
} host_obj;
/* a few host objects (the engine makes one for its metrics and one for the
 * duration-only config), handed out round-robin */
static host_obj g_hosts[4];
static unsigned g_nhosts;

CUptiResult CUPTIAPI cuptiProfilerHostInitialize(CUpti_Profiler_Host_Initialize_Params *p) {
  if (!p || !p->pChipName)
    return CUPTI_ERROR_INVALID_PARAMETER;
  host_obj *h = &g_hosts[g_nhosts++ % 4];
  h->token = ++host_obj_token;
  h->nmetrics = h->nheavy = 0;
  p->pHostObject = (CUpti_Profiler_Host_Object *)h;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiProfilerHostDeinitialize(CUpti_Profiler_Host_Deinitialize_Params *p) {
  return p ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}
CUptiResult CUPTIAPI cuptiProfilerHostGetMetricProperties(
    CUpti_Profiler_Host_GetMetricProperties_Params *p) {
  if (!p || !p->pHostObject)
    return CUPTI_ERROR_INVALID_PARAMETER;
  if (!metric_known(p->pMetricName))
    return CUPTI_ERROR_INVALID_METRIC_NAME;
  p->pDescription = "mock metric";
  p->pHwUnit = "mock";
  p->pDimUnit = "";
  p->metricType = CUPTI_METRIC_TYPE_COUNTER;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiProfilerHostGetBaseMetrics(CUpti_Profiler_Host_GetBaseMetrics_Params *p) {
  static const char *list[] = {"gpu__time_duration", "sm__throughput"};
  if (!p)
    return CUPTI_ERROR_INVALID_PARAMETER;
  p->ppMetricNames = list;
  p->numMetrics = 2;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiProfilerHostConfigAddMetrics(
    CUpti_Profiler_Host_ConfigAddMetrics_Params *p) {
  if (!p || !p->pHostObject)
    return CUPTI_ERROR_INVALID_PARAMETER;
  const char *refuse = getenv("MOCK_CUPTI_REFUSE_METRIC");
  for (size_t i = 0; i < p->numMetrics; i++)
    if (!metric_known(p->ppMetricNames[i]) ||
        (refuse && *refuse && !strcmp(refuse, p->ppMetricNames[i])))
      return CUPTI_ERROR_INVALID_METRIC_NAME;
  host_obj *h = (host_obj *)p->pHostObject;
  h->nmetrics += p->numMetrics;
  for (size_t i = 0; i < p->numMetrics; i++)
    h->nheavy += strcmp(p->ppMetricNames[i], "gpu__time_duration.sum") &&
                 !strstr(p->ppMetricNames[i], "cycles_elapsed");
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiProfilerHostGetConfigImageSize(
    CUpti_Profiler_Host_GetConfigImageSize_Params *p) {
  if (!p)
    return CUPTI_ERROR_INVALID_PARAMETER;
  p->configImageSize = 32;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiProfilerHostGetConfigImage(CUpti_Profiler_Host_GetConfigImage_Params *p) {
  if (!p || !p->pConfigImage || p->configImageSize < 32)
    return CUPTI_ERROR_INVALID_PARAMETER;
  memset(p->pConfigImage, 0, p->configImageSize);
  /* image: [size_t passes][size_t metrics][size_t heavy]; the duration
   * and cycle counts alone (the engine's duration config) need one pass */
  const host_obj *h = (const host_obj *)p->pHostObject;
  size_t nm = h ? h->nmetrics : 2, nh = h ? h->nheavy : 2;
  size_t n = nh ? passes_wanted() : 1;
  memcpy(p->pConfigImage, &n, sizeof n);
  memcpy(p->pConfigImage + sizeof n, &nm, sizeof nm);
  memcpy(p->pConfigImage + 2 * sizeof n, &nh, sizeof nh);
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiProfilerHostGetNumOfPasses(CUpti_Profiler_Host_GetNumOfPasses_Params *p) {
  if (!p || !p->pConfigImage)
    return CUPTI_ERROR_INVALID_PARAMETER;
  memcpy(&p->numOfPasses, p->pConfigImage, sizeof p->numOfPasses);
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiProfilerHostGetMaxNumHardwareMetricsPerPass(
    CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params *p) {
  if (!p)
    return CUPTI_ERROR_INVALID_PARAMETER;
  p->maxMetricsPerPass = 100;
  return CUPTI_SUCCESS;
}

/* counter data image: [u64 capacity][u64 n][double dur * n] */
CUptiResult CUPTIAPI cuptiProfilerHostEvaluateToGpuValues(
    CUpti_Profiler_Host_EvaluateToGpuValues_Params *p) {
  if (!p || !p->pCounterDataImage || !p->pMetricValues)
    return CUPTI_ERROR_INVALID_PARAMETER;
  uint64_t n;
  memcpy(&n, p->pCounterDataImage + 8, 8);
  if (p->rangeIndex >= n)
    return CUPTI_ERROR_INVALID_PARAMETER;
  double dur;
  memcpy(&dur, p->pCounterDataImage + 16 + 8 * p->rangeIndex, 8);
  for (size_t j = 0; j < p->numMetrics; j++) {
    const char *m = p->ppMetricNames[j];
    if (!metric_known(m))
      return CUPTI_ERROR_INVALID_METRIC_NAME;
    if (!strcmp(m, "gpu__time_duration.sum"))
      p->pMetricValues[j] = dur;
    else if (strstr(m, "pct"))
      p->pMetricValues[j] = 10.0 + (double)(p->rangeIndex % 80);
    else
      p->pMetricValues[j] = (double)(p->rangeIndex * 1000 + j);
  }
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiRangeProfilerEnable(CUpti_RangeProfiler_Enable_Params *p) {
  mcu_alive_or_die("cuptiRangeProfilerEnable");
  if (!p || !p->ctx)
    return CUPTI_ERROR_INVALID_PARAMETER;
  if (mcu_pcs_busy())
    return CUPTI_ERROR_INVALID_OPERATION;
  mcu_rp_enabled = 1;
  rp_sized = 0;
  rp_mode_set = -1;
  rp_ctx = p->ctx;
  p->pRangeProfilerObject = (CUpti_RangeProfiler_Object *)&rp_obj_token;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiRangeProfilerDisable(CUpti_RangeProfiler_Disable_Params *p) {
  mcu_alive_or_die("cuptiRangeProfilerDisable");
  if (!p || !mcu_rp_enabled)
    return CUPTI_ERROR_INVALID_OPERATION;
  mcu_rp_enabled = rp_started = rp_configured = rp_open = 0;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiRangeProfilerGetCounterDataSize(
    CUpti_RangeProfiler_GetCounterDataSize_Params *p) {
  if (!p || !mcu_rp_enabled || !p->maxNumOfRanges || p->maxNumRangeTreeNodes < p->maxNumOfRanges)
    return CUPTI_ERROR_INVALID_PARAMETER;
  p->counterDataSize = 16 + 8 * p->maxNumOfRanges;
  rp_sized = 1;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiRangeProfilerCounterDataImageInitialize(
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params *p) {
  if (!p || !p->pCounterData || p->counterDataSize < 16)
    return CUPTI_ERROR_INVALID_PARAMETER;
  /* CUPTI 13.0 crashes here (SIGSEGV, cupti_ranges.c) for a
   * second object whose image had been sized for the first one (no
   * GetCounterDataSize of its own): the mock aborts likewise */
  if (mcu_rp_enabled && !rp_sized) {
    fprintf(stderr, "mock CUPTI: cuptiRangeProfilerCounterDataImageInitialize for an "
                    "object whose counter data size was never asked (CUPTI crashed)\n");
    abort();
  }
  memset(p->pCounterData, 0, p->counterDataSize);
  uint64_t cap = (p->counterDataSize - 16) / 8;
  memcpy(p->pCounterData, &cap, 8);
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiRangeProfilerSetConfig(CUpti_RangeProfiler_SetConfig_Params *p) {
  if (!p || !mcu_rp_enabled || !p->pConfig || !p->pCounterDataImage)
    return CUPTI_ERROR_INVALID_PARAMETER;
  if ((p->range != CUPTI_AutoRange && p->range != CUPTI_UserRange) ||
      p->replayMode != CUPTI_UserReplay)
    return CUPTI_ERROR_NOT_SUPPORTED;
  if (p->range == CUPTI_UserRange && (p->numNestingLevels != 1 ||
                                      p->minNestingLevel != 1))
    return CUPTI_ERROR_INVALID_PARAMETER;
  /* an object set up for auto ranges refuses user ranges later (CUPTI
   * 13.0: cuptiRangeProfilerPushRange fails with INVALID_PARAMETER, run
   * V): the mock refuses the config */
  if (rp_mode_set >= 0 && rp_mode_set != (int)p->range)
    return CUPTI_ERROR_INVALID_OPERATION;
  rp_mode_set = (int)p->range;
  rp_user = p->range == CUPTI_UserRange;
  rp_image = p->pCounterDataImage;
  rp_image_size = p->counterDataImageSize;
  rp_max_ranges = p->maxRangesPerPass;
  rp_passes_done = p->passIndex;
  memcpy(&rp_cfg_passes, p->pConfig, sizeof rp_cfg_passes);
  memcpy(&rp_cfg_metrics, (const uint8_t *)p->pConfig + sizeof rp_cfg_passes,
         sizeof rp_cfg_metrics);
  memcpy(&rp_cfg_heavy, (const uint8_t *)p->pConfig + 2 * sizeof rp_cfg_passes,
         sizeof rp_cfg_heavy);
  rp_dur_configs += !rp_cfg_heavy;
  rp_configured = 1;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiRangeProfilerStart(CUpti_RangeProfiler_Start_Params *p) {
  if (!p || !rp_configured)
    return CUPTI_ERROR_INVALID_OPERATION;
  if (mcu_env_on("MOCK_CUPTI_NO_COUNTERS"))
    return CUPTI_ERROR_INSUFFICIENT_PRIVILEGES;
  pthread_mutex_lock(&mcu_mu);
  rp_started = 1;
  rp_n = 0;
  rp_graph_bad = 0;
  rp_open = 0;
  pthread_mutex_unlock(&mcu_mu);
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiRangeProfilerPushRange(CUpti_RangeProfiler_PushRange_Params *p) {
  mcu_alive_or_die("cuptiRangeProfilerPushRange");
  if (!p || !rp_started || !rp_user || rp_open || !p->pRangeName)
    return CUPTI_ERROR_INVALID_OPERATION;
  pthread_mutex_lock(&mcu_mu);
  if (rp_n < sizeof rp_names / sizeof *rp_names) {
    free(rp_names[rp_n]);
    rp_names[rp_n] = strdup(p->pRangeName);
  }
  rp_add(0.0);
  rp_open = 1;
  pthread_mutex_unlock(&mcu_mu);
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiRangeProfilerPopRange(CUpti_RangeProfiler_PopRange_Params *p) {
  mcu_alive_or_die("cuptiRangeProfilerPopRange");
  if (!p || !rp_open)
    return CUPTI_ERROR_INVALID_OPERATION;
  rp_open = 0;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiRangeProfilerStop(CUpti_RangeProfiler_Stop_Params *p) {
  mcu_alive_or_die("cuptiRangeProfilerStop");
  if (!p || !rp_started || rp_open)
    return CUPTI_ERROR_INVALID_OPERATION;
  pthread_mutex_lock(&mcu_mu);
  rp_started = 0;
  if (rp_graph_bad) { /* what rt_graph got on the H100 */
    rp_graph_bad = 0;
    pthread_mutex_unlock(&mcu_mu);
    return CUPTI_ERROR_UNKNOWN;
  }
  rp_passes_done++;
  p->passIndex = rp_passes_done;
  p->targetNestingLevel = 1;
  p->isAllPassSubmitted = rp_passes_done >= rp_cfg_passes;
  pthread_mutex_unlock(&mcu_mu);
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiRangeProfilerDecodeData(CUpti_RangeProfiler_DecodeData_Params *p) {
  if (!p || !rp_image)
    return CUPTI_ERROR_INVALID_OPERATION;
  uint64_t cap;
  memcpy(&cap, rp_image, 8);
  uint64_t n = rp_n < cap ? rp_n : cap;
  memcpy(rp_image + 8, &n, 8);
  memcpy(rp_image + 16, rp_durs, n * 8);
  p->numOfRangeDropped = rp_n - n;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiRangeProfilerGetCounterDataInfo(
    CUpti_RangeProfiler_GetCounterDataInfo_Params *p) {
  if (!p || !p->pCounterDataImage || p->counterDataImageSize < 16)
    return CUPTI_ERROR_INVALID_PARAMETER;
  uint64_t n;
  memcpy(&n, p->pCounterDataImage + 8, 8);
  p->numTotalRanges = n;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiRangeProfilerCounterDataGetRangeInfo(
    CUpti_RangeProfiler_CounterData_GetRangeInfo_Params *p) {
  static char name[32];
  if (!p)
    return CUPTI_ERROR_INVALID_PARAMETER;
  if (rp_user && p->rangeIndex < sizeof rp_names / sizeof *rp_names &&
      rp_names[p->rangeIndex]) {
    p->rangeName = rp_names[p->rangeIndex];
    return CUPTI_SUCCESS;
  }
  snprintf(name, sizeof name, "%zu", p->rangeIndex);
  p->rangeName = name;
  return CUPTI_SUCCESS;
}
