/* cupti_probe.c - `cucap cupti-probe`: what CUPTI offers on this machine,
 * one "probe: <key>: <value>" line per fact, so that a failing profile can
 * be diagnosed from one run's output: the driver and device, the CUPTI
 * library and version, whether the callback and activity APIs attach,
 * profiler support per API (cuptiProfilerDeviceSupported), counter
 * permission, the metric sets validated against the chip with their pass
 * counts, PC sampling stall reasons, SASS metrics, and nvdisasm. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cucap_log.h"
#include "cupti_internal.h"

#define P(f, key, ...)                                                         \
  do {                                                                         \
    if (f) {                                                                   \
      fprintf((f), "probe: %s: ", (key));                                      \
      fprintf((f), __VA_ARGS__);                                               \
      fputc('\n', (f));                                                        \
    }                                                                          \
  } while (0)
/* the outcome of one check into the result (when there is one) */
#define R(r, field, st, ...)                                                   \
  do {                                                                         \
    if (r) {                                                                   \
      (r)->field = (st);                                                       \
      snprintf((r)->field##_msg, sizeof (r)->field##_msg, __VA_ARGS__);        \
    }                                                                          \
  } while (0)

static void CUPTIAPI ck_probe_cb(void *u, CUpti_CallbackDomain d,
                                 CUpti_CallbackId id, const void *x) {
  (void)d, (void)id, (void)x;
  (*(uint64_t *)u)++;
}

static const char *ck_support(CUpti_Profiler_Support_Level l) {
  switch (l) {
  case CUPTI_PROFILER_CONFIGURATION_SUPPORTED: return "supported";
  case CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED: return "UNSUPPORTED";
  case CUPTI_PROFILER_CONFIGURATION_DISABLED: return "DISABLED";
  default: return "unknown";
  }
}

/* Validates names against a fresh host object and counts their passes. */
static void ck_probe_set(ck_engine *E, FILE *f, const char *label,
                         const char *const *names, size_t n,
                         const uint8_t *avail) {
  char key[64];
  snprintf(key, sizeof key, "metrics %s", label);
  CUpti_Profiler_Host_Object *host = ck_host_new(E, avail);
  if (!host) {
    P(f, key, "host initialize failed: %s", E->last_msg);
    return;
  }
  const char **ok = calloc(n ? n : 1, sizeof *ok);
  size_t nok = 0;
  char missing[2048] = "";
  size_t ml = 0;
  E->quiet = 1;
  for (size_t i = 0; ok && i < n; i++) {
    CUpti_Profiler_Host_GetMetricProperties_Params mp;
    memset(&mp, 0, sizeof mp);
    mp.structSize = CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE;
    mp.pHostObject = host;
    mp.pMetricName = names[i];
    if (CK_CALL(E, cuptiProfilerHostGetMetricProperties, &mp))
      ok[nok++] = names[i];
    else if (ml < sizeof missing)
      ml += (size_t)snprintf(missing + ml, sizeof missing - ml, "%s%s",
                             ml ? " " : "", names[i]);
  }
  E->quiet = 0;
  P(f, key, "%zu of %zu known on %s%s%s", nok, n, E->env.chip,
    missing[0] ? "; unknown: " : "", missing);
  CUpti_Profiler_Host_ConfigAddMetrics_Params am;
  memset(&am, 0, sizeof am);
  am.structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE;
  am.pHostObject = host;
  am.ppMetricNames = ok;
  am.numMetrics = nok;
  CUpti_Profiler_Host_GetConfigImageSize_Params cs;
  memset(&cs, 0, sizeof cs);
  cs.structSize = CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE;
  cs.pHostObject = host;
  if (nok && CK_CALL(E, cuptiProfilerHostConfigAddMetrics, &am) &&
      CK_CALL(E, cuptiProfilerHostGetConfigImageSize, &cs) && cs.configImageSize) {
    uint8_t *img = malloc(cs.configImageSize);
    CUpti_Profiler_Host_GetConfigImage_Params ci;
    memset(&ci, 0, sizeof ci);
    ci.structSize = CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE;
    ci.pHostObject = host;
    ci.configImageSize = cs.configImageSize;
    ci.pConfigImage = img;
    CUpti_Profiler_Host_GetNumOfPasses_Params np;
    memset(&np, 0, sizeof np);
    np.structSize = CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE;
    np.configImageSize = cs.configImageSize;
    np.pConfigImage = img;
    if (img && CK_CALL(E, cuptiProfilerHostGetConfigImage, &ci) &&
        CK_CALL(E, cuptiProfilerHostGetNumOfPasses, &np))
      P(f, key, "%zu counter pass(es), config image %zu bytes", np.numOfPasses,
        cs.configImageSize);
    else
      P(f, key, "config image failed: %s", E->last_msg);
    free(img);
  } else if (nok) {
    P(f, key, "config failed: %s", E->last_msg);
  }
  free(ok);
  CUpti_Profiler_Host_Deinitialize_Params hd;
  memset(&hd, 0, sizeof hd);
  hd.structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE;
  hd.pHostObject = host;
  CK_CALL(E, cuptiProfilerHostDeinitialize, &hd);
}

static void ck_probe_list(ck_engine *E, FILE *f, const uint8_t *avail) {
  CUpti_Profiler_Host_Object *host = ck_host_new(E, avail);
  if (!host)
    return;
  static const char *const tn[] = {"counter", "ratio", "throughput"};
  for (int t = 0; t < 3; t++) {
    CUpti_Profiler_Host_GetBaseMetrics_Params bp;
    memset(&bp, 0, sizeof bp);
    bp.structSize = CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE;
    bp.pHostObject = host;
    bp.metricType = (CUpti_MetricType)t;
    if (!CK_CALL(E, cuptiProfilerHostGetBaseMetrics, &bp))
      continue;
    P(f, "base metrics", "%zu of type %s", bp.numMetrics, tn[t]);
    for (size_t i = 0; i < bp.numMetrics; i++)
      fprintf(f, "metric: %s %s\n", tn[t], bp.ppMetricNames[i]);
  }
  CUpti_Profiler_Host_Deinitialize_Params hd;
  memset(&hd, 0, sizeof hd);
  hd.structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE;
  hd.pHostObject = host;
  CK_CALL(E, cuptiProfilerHostDeinitialize, &hd);
}

/* cuptiProfilerDeviceSupported for each profiler API (when CUPTI has it). */
static void ck_probe_support(ck_engine *E, FILE *f, CUdevice dev) {
  if (E->api.cuptiProfilerDeviceSupported) {
    static const struct { CUpti_Profiler_API api; const char *n; } apis[] = {
        {CUPTI_PROFILER_RANGE_PROFILING, "range profiling"},
        {CUPTI_PROFILER_PC_SAMPLING, "pc sampling"},
        {CUPTI_PROFILER_SASS_METRICS, "sass metrics"}};
    for (size_t i = 0; i < 3; i++) {
      CUpti_Profiler_DeviceSupported_Params sp;
      memset(&sp, 0, sizeof sp);
      sp.structSize = CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE;
      sp.cuDevice = dev;
      sp.api = apis[i].api;
      char key[64];
      snprintf(key, sizeof key, "support %s", apis[i].n);
      if (CK_CALL(E, cuptiProfilerDeviceSupported, &sp))
        P(f, key, "%s (arch %s, vGPU %s, confidential compute %s, CMP %s, "
          "WSL %s)", ck_support(sp.isSupported), ck_support(sp.architecture),
          ck_support(sp.vGpu), ck_support(sp.confidentialCompute),
          ck_support(sp.cmp), ck_support(sp.wsl));
      else
        P(f, key, "query failed: %s", E->last_msg);
    }
  }
}

/* Counter permission on the profiled context, then the metric sets (and
 * the requested metrics) validated against the chip. */
static void ck_probe_counters(ck_engine *E, FILE *f, cucap_cupti_check *r,
                              const char *metrics, int list_metrics) {
  /* counters */
  uint8_t *avail = NULL;
  if (ck_prof_init(E)) {
    P(f, "chip", "%s", E->env.chip);
    CUpti_Profiler_GetCounterAvailability_Params ap;
    memset(&ap, 0, sizeof ap);
    ap.structSize = CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE;
    ap.ctx = E->ctx;
    int ok = CK_CALL(E, cuptiProfilerGetCounterAvailability, &ap);
    if (ok && ap.counterAvailabilityImageSize) {
      avail = malloc(ap.counterAvailabilityImageSize);
      ap.pCounterAvailabilityImage = avail;
      ok = avail && CK_CALL(E, cuptiProfilerGetCounterAvailability, &ap);
    }
    if (ok) {
      P(f, "counters", "allowed (availability image %zu bytes)",
        ap.counterAvailabilityImageSize);
      R(r, counters, CUCAP_CUPTI_CHECK_OK, "hardware counters allowed (chip %s)",
        E->env.chip);
    } else {
      int denied = E->last == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES ||
                   E->last == CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES;
      P(f, "counters", "REFUSED: %s%s", E->last_msg,
        denied ? " (NVreg_RestrictProfilingToAdminUsers=1: run as root or set it "
                 "to 0)" : "");
      R(r, counters, denied ? CUCAP_CUPTI_CHECK_DENIED : CUCAP_CUPTI_CHECK_UNAVAILABLE,
        "%.150s%s", E->last_msg,
        denied ? ": run as root, or set `options nvidia "
                 "NVreg_RestrictProfilingToAdminUsers=0` in /etc/modprobe.d and "
                 "reload the nvidia module" : "");
    }
    if (ok) {
      CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params mp;
      memset(&mp, 0, sizeof mp);
      mp.structSize =
          CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params_STRUCT_SIZE;
      mp.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
      mp.pChipName = E->env.chip;
      mp.pCounterAvailabilityImage = avail;
      if (E->api.cuptiProfilerHostGetMaxNumHardwareMetricsPerPass &&
          CK_CALL(E, cuptiProfilerHostGetMaxNumHardwareMetricsPerPass, &mp))
        P(f, "max hardware metrics per pass", "%zu", mp.maxMetricsPerPass);
      static const char *const sets[] = {"sol", "full"};
      for (int i = 0; i < 2; i++) {
        const char *const *names = cucap_cupti_metric_set(sets[i]);
        size_t n = 0;
        while (names[n])
          n++;
        ck_probe_set(E, f, sets[i], names, n, avail);
      }
      if (metrics && *metrics && !cucap_cupti_metric_set(metrics)) {
        const char *list[256];
        size_t n = 0;
        for (const char *p = metrics; *p && n < 256;) {
          const char *c = strchr(p, ',');
          size_t l = c ? (size_t)(c - p) : strlen(p);
          list[n++] = ck_intern_n(&E->str, p, l);
          p += l + (c ? 1 : 0);
        }
        ck_probe_set(E, f, "requested", list, n, avail);
      }
      if (list_metrics)
        ck_probe_list(E, f, avail);
    }
  } else {
    P(f, "profiler", "FAILED: %s", E->last_msg);
    R(r, counters, CUCAP_CUPTI_CHECK_UNAVAILABLE, "profiler: %.250s", E->last_msg);
  }
  free(avail);
}

/* PC sampling: enable on the context and read its stall reasons. */
static void ck_probe_pcsamp(ck_engine *E, FILE *f, cucap_cupti_check *r) {
  /* PC sampling */
  CUpti_PCSamplingEnableParams pe;
  memset(&pe, 0, sizeof pe);
  pe.size = CUpti_PCSamplingEnableParamsSize;
  pe.ctx = E->ctx;
  if (CK_CALL(E, cuptiPCSamplingEnable, &pe)) {
    size_t n = 0;
    CUpti_PCSamplingGetNumStallReasonsParams np;
    memset(&np, 0, sizeof np);
    np.size = CUpti_PCSamplingGetNumStallReasonsParamsSize;
    np.ctx = E->ctx;
    np.numStallReasons = &n;
    if (CK_CALL(E, cuptiPCSamplingGetNumStallReasons, &np)) {
      P(f, "pc sampling", "enabled, %zu stall reasons", n);
      R(r, pc_sampling, CUCAP_CUPTI_CHECK_OK, "PC sampling works (%zu stall reasons)", n);
      char **names = calloc(n ? n : 1, sizeof *names);
      uint32_t *idx = calloc(n ? n : 1, sizeof *idx);
      int okn = names && idx;
      for (size_t i = 0; okn && i < n; i++)
        okn = (names[i] = calloc(1, CUPTI_STALL_REASON_STRING_SIZE)) != NULL;
      CUpti_PCSamplingGetStallReasonsParams sp;
      memset(&sp, 0, sizeof sp);
      sp.size = CUpti_PCSamplingGetStallReasonsParamsSize;
      sp.ctx = E->ctx;
      sp.numStallReasons = n;
      sp.stallReasonIndex = idx;
      sp.stallReasons = names;
      if (okn && CK_CALL(E, cuptiPCSamplingGetStallReasons, &sp) && f)
        for (size_t i = 0; i < n; i++) /* f is NULL for cucap doctor */
          fprintf(f, "stall: %u %s\n", idx[i], names[i]);
      for (size_t i = 0; names && i < n; i++)
        free(names[i]);
      free(names);
      free(idx);
    } else {
      P(f, "pc sampling", "stall reasons FAILED: %s", E->last_msg);
      R(r, pc_sampling, CUCAP_CUPTI_CHECK_UNAVAILABLE, "%.250s", E->last_msg);
    }
    CUpti_PCSamplingDisableParams pd;
    memset(&pd, 0, sizeof pd);
    pd.size = CUpti_PCSamplingDisableParamsSize;
    pd.ctx = E->ctx;
    CK_CALL(E, cuptiPCSamplingDisable, &pd);
  } else {
    int denied = E->last == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES;
    P(f, "pc sampling", "FAILED: %s", E->last_msg);
    R(r, pc_sampling, denied ? CUCAP_CUPTI_CHECK_DENIED : CUCAP_CUPTI_CHECK_UNAVAILABLE,
      "%.250s", E->last_msg);
  }
}

/* SASS metrics: the chip's count and the three the engine collects. */
static void ck_probe_sass(ck_engine *E, FILE *f, cucap_cupti_check *r) {
  /* SASS metrics */
  if (E->env.chip[0] && E->api.cuptiSassMetricsGetNumOfMetrics) {
    CUpti_SassMetrics_GetNumOfMetrics_Params gn;
    memset(&gn, 0, sizeof gn);
    gn.structSize = CUpti_SassMetrics_GetNumOfMetrics_Params_STRUCT_SIZE;
    gn.pChipName = E->env.chip;
    if (CK_CALL(E, cuptiSassMetricsGetNumOfMetrics, &gn))
      P(f, "sass metrics", "%zu on %s", gn.numOfMetrics, E->env.chip);
    else
      P(f, "sass metrics", "FAILED: %s", E->last_msg);
    static const char *const want[] = {"smsp__sass_inst_executed",
                                       "smsp__sass_thread_inst_executed",
                                       "smsp__sass_sectors_mem_global"};
    for (int i = 0; i < 3; i++) {
      CUpti_SassMetrics_GetProperties_Params gp;
      memset(&gp, 0, sizeof gp);
      gp.structSize = CUpti_SassMetrics_GetProperties_Params_STRUCT_SIZE;
      gp.pChipName = E->env.chip;
      gp.pMetricName = want[i];
      E->quiet = 1;
      int ok = CK_CALL(E, cuptiSassMetricsGetProperties, &gp);
      E->quiet = 0;
      P(f, "sass metric", "%s %s", want[i], ok ? "ok" : E->last_msg);
      if (i == 0)
        R(r, sass_metrics, ok ? CUCAP_CUPTI_CHECK_OK : CUCAP_CUPTI_CHECK_UNAVAILABLE,
          "%s: %.200s", want[i], ok ? "available" : E->last_msg);
    }
  }
}

/* ck_probe_impl: cuInit, the device and what it is; CUCAP_ERR_ENV when
 * there is no such CUDA device. */
static cucap_status ck_probe_device(const ck_drv *d, int device, FILE *f,
                                    cucap_cupti_check *r, CUdevice *devp,
                                    int *ccp) {
  int drv = 0;
  if (d->DriverGetVersion)
    d->DriverGetVersion(&drv);
  CUresult cr = d->Init(0);
  if (cr == CUDA_SUCCESS)
    cr = d->DeviceGet(devp, device);
  if (cr != CUDA_SUCCESS) {
    P(f, "driver", "FAILED: cuInit/cuDeviceGet: %s", ck_drv_err(d, cr));
    R(r, activity, CUCAP_CUPTI_CHECK_UNKNOWN, "not checked: no CUDA device (%s)",
      ck_drv_err(d, cr));
    return CUCAP_ERR_ENV;
  }
  char name[256] = "";
  int ma = 0, mi = 0;
  if (d->DeviceGetName)
    d->DeviceGetName(name, sizeof name, *devp);
  if (d->DeviceGetAttribute) {
    d->DeviceGetAttribute(&ma, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, *devp);
    d->DeviceGetAttribute(&mi, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, *devp);
  }
  P(f, "driver", "version %d, device %d \"%s\" sm_%d%d", drv, device, name, ma, mi);
  *ccp = ma * 10 + mi;
  return CUCAP_OK;
}

static cucap_status ck_probe_impl(const char *libcuda, const char *library,
                                  int device, const char *metrics,
                                  int list_metrics, FILE *f,
                                  cucap_cupti_check *r) {
  ck_drv d;
  char msg[512];
  if (r) {
    memset(r, 0, sizeof *r);
    snprintf(r->activity_msg, sizeof r->activity_msg, "not checked");
    snprintf(r->counters_msg, sizeof r->counters_msg, "not checked");
    snprintf(r->pc_sampling_msg, sizeof r->pc_sampling_msg, "not checked");
    snprintf(r->sass_metrics_msg, sizeof r->sass_metrics_msg, "not checked");
  }
  cucap_status st = ck_drv_load(&d, libcuda, msg, sizeof msg);
  if (st != CUCAP_OK) {
    P(f, "driver", "FAILED: %s", msg);
    R(r, activity, CUCAP_CUPTI_CHECK_UNKNOWN, "not checked: %.200s", msg);
    return st;
  }
  ck_engine *E = calloc(1, sizeof *E);
  if (!E) {
    return CUCAP_ERR_NOMEM;
  }
  pthread_mutex_init(&E->tl.mu, NULL);
  pthread_mutex_init(&E->cb.cubin_mu, NULL);
  CUdevice dev = 0;
  int cc = 0;
  st = ck_probe_device(&d, device, f, r, &dev, &cc);
  if (st != CUCAP_OK)
    goto out;
  if (!ck_api_load(&E->api, library, msg, sizeof msg)) {
    P(f, "cupti", "FAILED: %s", msg);
    R(r, activity, CUCAP_CUPTI_CHECK_UNAVAILABLE, "%.250s", msg);
    st = CUCAP_ERR_ENV;
    goto out;
  }
  E->quiet = f == NULL;
  uint32_t v = 0;
  CK_CALL(E, cuptiGetVersion, &v);
  if (r)
    r->version = v;
  P(f, "cupti", "%s, API version %u (cucap built against %u)%s%s", E->api.path,
    v, (unsigned)CUPTI_API_VERSION, E->api.missing[0] ? "; missing: " : "",
    E->api.missing);
  /* callbacks and activity must attach before the context exists */
  uint64_t calls = 0;
  CUpti_SubscriberHandle sub = NULL;
  int attached = 0;
  if (CK_CALL(E, cuptiSubscribe, &sub, (CUpti_CallbackFunc)ck_probe_cb, &calls) &&
      CK_CALL(E, cuptiEnableDomain, 1, sub, CUPTI_CB_DOMAIN_DRIVER_API)) {
    P(f, "callbacks", "ok");
    attached = 1;
  } else {
    P(f, "callbacks", "FAILED: %s", E->last_msg);
    R(r, activity, CUCAP_CUPTI_CHECK_UNAVAILABLE, "CUPTI cannot attach: %.200s",
      E->last_msg);
    st = CUCAP_ERR_ENV;
  }
  E->device = device;
  E->cc = cc;
  if (d.DevicePrimaryCtxRetain(&E->ctx, dev) != CUDA_SUCCESS ||
      d.CtxSetCurrent(E->ctx) != CUDA_SUCCESS) {
    P(f, "context", "FAILED");
    st = CUCAP_ERR_ENV;
    goto out_sub;
  }
  if (d.CtxSynchronize)
    d.CtxSynchronize();
  P(f, "callbacks", "%" PRIu64 " driver call(s) seen", calls);
  if (CK_CALL(E, cuptiActivityEnable, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) {
    P(f, "activity", "CONCURRENT_KERNEL can be enabled");
    if (attached)
      R(r, activity, CUCAP_CUPTI_CHECK_OK, "CUPTI %u: callbacks and kernel "
        "activity records work", v);
    CK_CALL(E, cuptiActivityDisable, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  } else {
    P(f, "activity", "FAILED: %s", E->last_msg);
    R(r, activity, CUCAP_CUPTI_CHECK_UNAVAILABLE, "%.250s", E->last_msg);
  }
  ck_probe_support(E, f, dev);
  ck_probe_counters(E, f, r, metrics, list_metrics);
  ck_probe_pcsamp(E, f, r);
  ck_probe_sass(E, f, r);
  {
    char buf[1024];
    const char *home = getenv("CUDA_HOME");
    snprintf(buf, sizeof buf, "%s/bin/nvdisasm", home && *home ? home : "/usr/local/cuda");
    P(f, "nvdisasm", "%s", access(buf, X_OK) == 0 ? buf : "not found (no SASS text)");
  }
  P(f, "result", "%s", attached ? "CUPTI attached"
                                 : "CUPTI did NOT attach (see callbacks)");
  if (d.DevicePrimaryCtxRelease)
    d.DevicePrimaryCtxRelease(dev);
out_sub:
  ck_prof_deinit(E);
  if (sub)
    CK_CALL(E, cuptiUnsubscribe, sub);
out:
  ck_strtab_free(&E->str);
  pthread_mutex_destroy(&E->tl.mu);
  pthread_mutex_destroy(&E->cb.cubin_mu);
  free(E);
  /* the driver stays loaded: CUPTI keeps hooks into it */
  return st;
}

cucap_status cucap_cupti_probe(const char *libcuda, const char *library,
                               int device, const char *metrics,
                               int list_metrics, FILE *f) {
  return ck_probe_impl(libcuda, library, device, metrics, list_metrics, f, NULL);
}

cucap_status cucap_cupti_check_run(const char *libcuda, const char *library,
                                   int device, cucap_cupti_check *out) {
  ck_probe_impl(libcuda, library, device, NULL, 0, NULL, out);
  return CUCAP_OK;
}
