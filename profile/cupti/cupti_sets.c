/* cupti_sets.c - the CUPTI engine's lookup of a metric set by name
 * (`--metrics=sol`, `full`: profiler_common.c defines them; names are
 * checked against the chip at run time, unknown ones left out with a note)
 * and the Profiler API's process-wide initialization with the chip name,
 * which the metrics and SASS-metrics passes share. */
#include <stdio.h>
#include <string.h>

#include "cucap_profile.h"
#include "cucap_profiler.h"
#include "cupti_internal.h"

const char *const *cucap_cupti_metric_set(const char *name) {
  size_t n; /* NULL for "none" and for a list of names */
  return cucap_metric_set_names(cucap_metric_set_from_name(name), &n);
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

