/* mock_cupti_pcs.c - the stand-in libcupti's PC sampling and SASS metrics
 * (see mock_cupti.c): three PC records per kernel executed while sampling
 * is started, SASS records per instruction while enabled, CRCs and source
 * lines made up from the cubin bytes and offsets. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>
#include <cupti_pcsampling.h>
#include <cupti_sass_metrics.h>

#include "mock_cupti_internal.h"

/* ---- PC sampling -------------------------------------------------------- */
typedef struct pcrec {
  uint32_t corr;
  uint64_t crc, pc;
  const char *fn;
  uint32_t counts[3];
} pcrec;
static int pcs_enabled, pcs_started;
static CUpti_PCSamplingData *pcs_cfg_buf;
static pcrec *pcs_pend;
static size_t pcs_n, pcs_cap;
static const uint32_t stall_idx[3] = {11, 22, 33};
static const char *const stall_name[3] = {
    "smsp__pcsamp_warps_issue_stalled_long_scoreboard",
    "smsp__pcsamp_warps_issue_stalled_math_pipe_throttle",
    "smsp__pcsamp_warps_issue_stalled_selected"};

/* ---- SASS metrics ------------------------------------------------------- */
typedef struct sassrec {
  uint32_t crc;
  const char *fn;
  uint32_t pc;
  uint64_t v[3];
} sassrec;
static int sass_config, sass_enabled;
static sassrec *sass;
static size_t nsass, capsass;
static const char *const sass_names[3] = {"smsp__sass_inst_executed",
                                          "smsp__sass_thread_inst_executed",
                                          "smsp__sass_sectors_mem_global"};

int mcu_pcs_busy(void) { return pcs_enabled || sass_config; }

static const void *pcs_ctx, *sass_ctx;

void mcu_pcs_kernel(const void *ctx, uint32_t corr, uint64_t crc, const char *fn) {
  if (pcs_started && ctx == pcs_ctx) {
    if (pcs_n + 3 > pcs_cap) {
      size_t nc = pcs_cap ? pcs_cap * 2 : 64;
      pcrec *np = realloc(pcs_pend, nc * sizeof *np);
      if (np) {
        pcs_pend = np;
        pcs_cap = nc;
      }
    }
    for (int i = 0; i < 3 && pcs_n < pcs_cap; i++) {
      pcrec *r = &pcs_pend[pcs_n++];
      r->corr = corr;
      r->crc = crc;
      r->fn = fn;
      r->pc = 0x10u * (unsigned)(i + 1);
      r->counts[0] = 3u * (unsigned)(i + 1);
      r->counts[1] = (unsigned)i;
      r->counts[2] = 1;
    }
  }
}

void mcu_sass_kernel(const void *ctx, uint32_t crc, const char *fn) {
  if (sass_enabled && ctx == sass_ctx) {
    for (uint32_t pc = 0x10; pc <= 0x30; pc += 0x10) {
      size_t i = 0;
      while (i < nsass && !(sass[i].crc == crc && sass[i].fn == fn &&
                            sass[i].pc == pc))
        i++;
      if (i == nsass) {
        if (nsass == capsass) {
          size_t nc = capsass ? capsass * 2 : 64;
          sassrec *ns = realloc(sass, nc * sizeof *ns);
          if (!ns)
            break;
          sass = ns;
          capsass = nc;
        }
        sass[nsass++] = (sassrec){crc, fn, pc, {0, 0, 0}};
      }
      sass[i].v[0] += 4;
      sass[i].v[1] += 128;
      sass[i].v[2] += 2;
    }
  }
}

/* ---- PC sampling ------------------------------------------------------- */

CUptiResult CUPTIAPI cuptiPCSamplingEnable(CUpti_PCSamplingEnableParams *p) {
  mcu_alive_or_die("cuptiPCSamplingEnable");
  if (!p)
    return CUPTI_ERROR_INVALID_PARAMETER;
  if (mcu_env_on("MOCK_CUPTI_NO_PCS"))
    return CUPTI_ERROR_NOT_SUPPORTED;
  if (mcu_rp_enabled || sass_config) /* one at a time (see mock_cupti.c) */
    return CUPTI_ERROR_INVALID_OPERATION;
  pcs_enabled = 1;
  pcs_ctx = p->ctx;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiPCSamplingGetNumStallReasons(CUpti_PCSamplingGetNumStallReasonsParams *p) {
  if (!p || !p->numStallReasons || !pcs_enabled)
    return CUPTI_ERROR_INVALID_OPERATION;
  *p->numStallReasons = 3;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiPCSamplingGetStallReasons(CUpti_PCSamplingGetStallReasonsParams *p) {
  if (!p || p->numStallReasons < 3 || !p->stallReasons || !p->stallReasonIndex)
    return CUPTI_ERROR_INVALID_PARAMETER;
  for (int i = 0; i < 3; i++) {
    p->stallReasonIndex[i] = stall_idx[i];
    snprintf(p->stallReasons[i], CUPTI_STALL_REASON_STRING_SIZE, "%s", stall_name[i]);
  }
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiPCSamplingSetConfigurationAttribute(
    CUpti_PCSamplingConfigurationInfoParams *p) {
  if (!p || !pcs_enabled)
    return CUPTI_ERROR_INVALID_OPERATION;
  for (size_t i = 0; i < p->numAttributes; i++) {
    CUpti_PCSamplingConfigurationInfo *a = &p->pPCSamplingConfigurationInfo[i];
    a->attributeStatus = CUPTI_SUCCESS;
    if (a->attributeType == CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER)
      pcs_cfg_buf = a->attributeData.samplingDataBufferData.samplingDataBuffer;
    if (a->attributeType == CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD &&
        (a->attributeData.samplingPeriodData.samplingPeriod < 5 ||
         a->attributeData.samplingPeriodData.samplingPeriod > 31))
      a->attributeStatus = CUPTI_ERROR_INVALID_PARAMETER;
  }
  for (size_t i = 0; i < p->numAttributes; i++)
    if (p->pPCSamplingConfigurationInfo[i].attributeStatus != CUPTI_SUCCESS)
      return CUPTI_ERROR_INVALID_PARAMETER;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiPCSamplingStart(CUpti_PCSamplingStartParams *p) {
  mcu_alive_or_die("cuptiPCSamplingStart");
  if (!p || !pcs_enabled)
    return CUPTI_ERROR_INVALID_OPERATION;
  pcs_started = 1;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiPCSamplingStop(CUpti_PCSamplingStopParams *p) {
  mcu_alive_or_die("cuptiPCSamplingStop");
  if (!p || !pcs_started)
    return CUPTI_ERROR_INVALID_OPERATION;
  pcs_started = 0;
  return CUPTI_SUCCESS;
}

static void pcs_fill(CUpti_PCSamplingData *d) {
  size_t k = 0;
  uint64_t total = 0;
  while (k < d->collectNumPcs && k < pcs_n) {
    CUpti_PCSamplingPCData *o = &d->pPcData[k];
    const pcrec *r = &pcs_pend[k];
    o->cubinCrc = r->crc;
    o->pcOffset = r->pc;
    o->functionIndex = 0;
    o->functionName = strdup(r->fn); /* the client frees it */
    o->correlationId = r->corr;
    o->stallReasonCount = 0;
    for (int j = 0; j < 3; j++)
      if (r->counts[j]) {
        o->stallReason[o->stallReasonCount].pcSamplingStallReasonIndex = stall_idx[j];
        o->stallReason[o->stallReasonCount].samples = r->counts[j];
        o->stallReasonCount++;
        total += r->counts[j];
      }
    k++;
  }
  memmove(pcs_pend, pcs_pend + k, (pcs_n - k) * sizeof *pcs_pend);
  pcs_n -= k;
  d->totalNumPcs = k;
  d->remainingNumPcs = pcs_n;
  d->totalSamples = total;
  d->droppedSamples = 0;
  d->nonUsrKernelsTotalSamples = 0;
  d->hardwareBufferFull = 0;
}

CUptiResult CUPTIAPI cuptiPCSamplingGetData(CUpti_PCSamplingGetDataParams *p) {
  mcu_alive_or_die("cuptiPCSamplingGetData");
  if (!p || !p->pcSamplingData || !pcs_enabled)
    return CUPTI_ERROR_INVALID_OPERATION;
  if (mcu_env_on("MOCK_CUPTI_PCS_DETACH")) {
    mcu_detach();
    return CUPTI_ERROR_UNKNOWN;
  }
  if (p->pcSamplingData == pcs_cfg_buf)
    return CUPTI_ERROR_INVALID_PARAMETER; /* CUPTI's known pitfall */
  pthread_mutex_lock(&mcu_mu);
  pcs_fill(p->pcSamplingData);
  pthread_mutex_unlock(&mcu_mu);
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiPCSamplingDisable(CUpti_PCSamplingDisableParams *p) {
  mcu_alive_or_die("cuptiPCSamplingDisable");
  if (!p || !pcs_enabled)
    return CUPTI_ERROR_INVALID_OPERATION;
  pthread_mutex_lock(&mcu_mu);
  if (pcs_cfg_buf)
    pcs_fill(pcs_cfg_buf);
  pcs_n = 0;
  pthread_mutex_unlock(&mcu_mu);
  pcs_enabled = pcs_started = 0;
  pcs_cfg_buf = NULL;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiGetCubinCrc(CUpti_GetCubinCrcParams *p) {
  mcu_alive_or_die("cuptiGetCubinCrc");
  if (!p || !p->cubin || !p->cubinSize)
    return CUPTI_ERROR_INVALID_PARAMETER;
  p->cubinCrc = mcu_fnv64(p->cubin, p->cubinSize);
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiGetSassToSourceCorrelation(CUpti_GetSassToSourceCorrelationParams *p) {
  mcu_alive_or_die("cuptiGetSassToSourceCorrelation");
  if (!p || !p->cubin || !p->functionName || !p->cubinSize)
    return CUPTI_ERROR_INVALID_PARAMETER;
  p->fileName = strdup("mock_kernels.cu");
  p->dirName = strdup("/mock");
  p->lineNumber = 10 + (uint32_t)(p->pcOffset / 16);
  return CUPTI_SUCCESS;
}

/* ---- SASS metrics ------------------------------------------------------- */

CUptiResult CUPTIAPI cuptiSassMetricsGetProperties(CUpti_SassMetrics_GetProperties_Params *p) {
  if (!p || !p->pMetricName)
    return CUPTI_ERROR_INVALID_PARAMETER;
  for (int i = 0; i < 3; i++)
    if (!strcmp(p->pMetricName, sass_names[i])) {
      p->metric.metricId = 101 + (uint64_t)i;
      p->metric.pMetricName = sass_names[i];
      p->metric.pMetricDescription = "mock";
      return CUPTI_SUCCESS;
    }
  return CUPTI_ERROR_INVALID_METRIC_NAME;
}
CUptiResult CUPTIAPI cuptiSassMetricsGetNumOfMetrics(CUpti_SassMetrics_GetNumOfMetrics_Params *p) {
  if (!p)
    return CUPTI_ERROR_INVALID_PARAMETER;
  p->numOfMetrics = 3;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiSassMetricsSetConfig(CUpti_SassMetricsSetConfig_Params *p) {
  mcu_alive_or_die("cuptiSassMetricsSetConfig");
  if (!p || !p->numOfMetricConfig)
    return CUPTI_ERROR_INVALID_PARAMETER;
  if (sass_config || mcu_rp_enabled || pcs_enabled)
    return CUPTI_ERROR_INVALID_OPERATION;
  sass_config = 1;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiSassMetricsUnsetConfig(CUpti_SassMetricsUnsetConfig_Params *p) {
  mcu_alive_or_die("cuptiSassMetricsUnsetConfig");
  if (!p || !sass_config)
    return CUPTI_ERROR_INVALID_OPERATION;
  sass_config = 0;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiSassMetricsEnable(CUpti_SassMetricsEnable_Params *p) {
  mcu_alive_or_die("cuptiSassMetricsEnable");
  if (!p || !sass_config || sass_enabled)
    return CUPTI_ERROR_INVALID_OPERATION;
  sass_enabled = 1;
  sass_ctx = p->ctx;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiSassMetricsDisable(CUpti_SassMetricsDisable_Params *p) {
  mcu_alive_or_die("cuptiSassMetricsDisable");
  if (!p || !sass_enabled)
    return CUPTI_ERROR_INVALID_OPERATION;
  sass_enabled = 0;
  p->numOfDroppedRecords = 0;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiSassMetricsGetDataProperties(
    CUpti_SassMetricsGetDataProperties_Params *p) {
  if (!p || !sass_enabled)
    return CUPTI_ERROR_INVALID_OPERATION;
  p->numOfPatchedInstructionRecords = nsass * 3; /* one per (pc, metric) */
  p->numOfInstances = 1;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiSassMetricsFlushData(CUpti_SassMetricsFlushData_Params *p) {
  if (!p || !sass_enabled || !p->pMetricsData || p->numOfInstances != 1 ||
      p->numOfPatchedInstructionRecords > nsass * 3)
    return CUPTI_ERROR_INVALID_OPERATION;
  for (size_t r = 0; r < p->numOfPatchedInstructionRecords; r++) {
    CUpti_SassMetrics_Data *d = &p->pMetricsData[r];
    const sassrec *s = &sass[r / 3];
    d->cubinCrc = s->crc;
    d->functionIndex = 0;
    d->functionName = s->fn;
    d->pcOffset = s->pc;
    d->pInstanceValues[0].metricId = 101 + r % 3;
    d->pInstanceValues[0].value = s->v[r % 3];
  }
  nsass = 0;
  return CUPTI_SUCCESS;
}
