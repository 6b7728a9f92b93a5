/* cupti_sets.c - the metric sets of the CUPTI engine (`--metrics=sol`,
 * `full`: names checked against the chip at run time, unknown ones left out
 * with a note) and the Profiler API's process-wide initialization with the
 * chip name, which the metrics and SASS-metrics passes share. */
#include <stdio.h>
#include <string.h>

#include "cucap_profile.h"
#include "cupti_internal.h"

/* Metric names that exist on sm_90 (checked against the chip at begin:
 * names CUPTI does not know there are dropped with a note). */
static const char *const ck_set_sol[] = {
    CUCAP_METRICS_SOL_INPUTS,
    "sm__cycles_elapsed.avg.per_second",
    "dram__bytes.sum",
    NULL};

static const char *const ck_set_full_extra[] = {
    /* cache hit rates and traffic */
    "lts__t_sector_hit_rate.pct",
    "l1tex__t_sector_hit_rate.pct",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__t_bytes.sum",
    "l1tex__t_bytes.sum",
    /* warp states: stalls per issued instruction */
    CUCAP_METRICS_WARP_STALLS,
    /* instruction mix and issue */
    "smsp__inst_executed.sum",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "smsp__warps_eligible.avg.per_cycle_active",
    "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
    /* shared memory bank conflicts */
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
    NULL};

const char *const *cucap_cupti_metric_set(const char *name) {
  static const char *full[sizeof ck_set_sol / sizeof *ck_set_sol +
                          sizeof ck_set_full_extra / sizeof *ck_set_full_extra];
  if (!name)
    return NULL;
  if (!strcmp(name, "sol"))
    return ck_set_sol;
  if (!strcmp(name, "full")) {
    if (!full[0]) {
      size_t n = 0;
      for (size_t i = 0; ck_set_sol[i]; i++)
        full[n++] = ck_set_sol[i];
      for (size_t i = 0; ck_set_full_extra[i]; i++)
        full[n++] = ck_set_full_extra[i];
      full[n] = NULL;
    }
    return full;
  }
  return NULL;
}

int ck_prof_init(ck_engine *E) {
  if (E->prof_init)
    return 1;
  if (!(E->api.groups & CK_PROF)) {
    snprintf(E->last_msg, sizeof E->last_msg, "%.240s lacks %.240s",
             E->api.path, E->api.missing);
    return 0;
  }
  ck_api_nvperf_wait(&E->api);
  CUpti_Profiler_Initialize_Params ip = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE, NULL};
  if (!CK_CALL(E, cuptiProfilerInitialize, &ip))
    return 0;
  E->prof_init = 1;
  CUpti_Device_GetChipName_Params cp;
  memset(&cp, 0, sizeof cp);
  cp.structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE;
  cp.deviceIndex = (size_t)E->device;
  if (!CK_CALL(E, cuptiDeviceGetChipName, &cp) || !cp.pChipName)
    return 0;
  snprintf(E->env.chip, sizeof E->env.chip, "%s", cp.pChipName);
  return 1;
}

void ck_prof_deinit(ck_engine *E) {
  if (!E->prof_init)
    return;
  CUpti_Profiler_DeInitialize_Params di = {CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE, NULL};
  int q = E->quiet;
  E->quiet = 1;
  CK_CALL(E, cuptiProfilerDeInitialize, &di);
  E->quiet = q;
  E->prof_init = 0;
}

