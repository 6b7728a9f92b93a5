/* mock_cupti.c - a stand-in libcupti.so.13 for CI: the subset of CUPTI the
 * profiling engine (profile/cupti/cupti_*.c) uses, driven by the mock libcuda's
 * tool hook (mock_tool.h), so that the engine's pass logic, correlation,
 * attribution and writers run without a GPU. Built from the real CUPTI
 * headers (exact struct layouts). Not a model of CUPTI's numbers: durations
 * are the mock's host execution times, metric values are synthetic
 * (documented in mock_cuda.md).
 *
 * Behaviour: every stream submission fires a DRIVER_API callback (API enter)
 * with a new correlation id; each executed kernel/copy/memset becomes an
 * activity record with that id when its kind is enabled, a range while the
 * range profiler is started (auto range: kernels only), three PC records
 * while PC sampling is started, and SASS metric records while enabled.
 * Module loads fire the RESOURCE MODULE_LOADED callback with the code.
 *
 * It lets one of range profiler, PC sampling and SASS metrics be set up at
 * a time (stricter than CUPTI may be): the engine must release one before
 * the next.
 *
 * Knobs (environment): MOCK_CUPTI_ATTACH_FAIL=1 (subscribe fails),
 * MOCK_CUPTI_NO_COUNTERS=1 (counters need privileges), MOCK_CUPTI_PASSES=N
 * (counter passes, default 2), MOCK_CUPTI_EXTRA_RANGE=1 (one range too many
 * per pass), MOCK_CUPTI_MEMSET_RANGES=1 (memsets form ranges too),
 * MOCK_CUPTI_NO_PCS=1 (no PC sampling), MOCK_CUPTI_CORR_NEEDS_API=1
 * (correlation ids only while DRIVER activity is enabled),
 * MOCK_CUPTI_PCS_DETACH=1 (what the H100 did while another process profiled
 * the GPU: cuptiPCSamplingGetData fails with CUPTI_ERROR_UNKNOWN and CUPTI
 * detaches itself: no more callbacks, and any later call into it aborts, as
 * the real one crashed in cuptiActivityDisable), MOCK_CUPTI_GRAPH_AUTO_FAIL=1
 * (auto range over kernels of a graph launch: cuptiRangeProfilerStop fails
 * with CUPTI_ERROR_UNKNOWN; user ranges around graph launches work),
 * MOCK_CUPTI_HW_BUSY=1 (another process holds the GPU's counters:
 * cuptiProfilerGetCounterAvailability fails with CUPTI_ERROR_HARDWARE_BUSY),
 * MOCK_CUPTI_NO_SCOPE=1 (an older CUPTI: no cuptiGetCallbackName, so the
 * engine takes the whole driver domain), MOCK_CUPTI_SCOPE_ONLY=1 (enabling
 * the whole driver domain fails: only per-cbid callbacks and
 * cuptiActivityEnableDriverApi records work, which proves the engine uses
 * them), MOCK_CUPTI_ALONE_SHORT_NS=N (a range of a config holding the
 * duration alone is N ns shorter, at least 1 ns, as short kernels' are on
 * the H200), MOCK_CUPTI_REFUSE_METRIC=name (adding that metric to a config
 * fails with CUPTI_ERROR_INVALID_METRIC_NAME).
 *
 * Strict where CUPTI's rules are easy to break: disabling an activity kind
 * that is not enabled aborts (enable/disable must pair up). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>
#include <cupti_pcsampling.h>
#include <cupti_sass_metrics.h>
#include <cupti_target.h>

#include "mock_cupti_internal.h"
#include "mock_tool.h"

pthread_mutex_t mcu_mu = PTHREAD_MUTEX_INITIALIZER;

/* --clock-control: each kernel is reported to the stand-in libnvperf_target
 * (mock_nvperf.c), which knows whether the clocks are locked; it is looked
 * for until the engine has loaded it */
static void mcu_clock_count(int timeline) {
  static void (*fn)(int);
  if (!fn)
    fn = (void (*)(int))dlsym(RTLD_DEFAULT, "mock_nvperf_count_kernel");
  if (fn)
    fn(timeline);
}
int mcu_env_on(const char *n) {
  const char *v = getenv(n);
  return v && *v && *v != '0';
}

uint64_t mcu_fnv64(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 1099511628211ull;
  return h ? h : 1;
}

/* names handed out (kernel records, PC records): kept for the process */
static char **names;
static size_t nnames;
static const char *keep_name(const char *s) {
  for (size_t i = 0; i < nnames; i++)
    if (!strcmp(names[i], s))
      return names[i];
  char **nn = realloc(names, (nnames + 1) * sizeof *nn);
  if (!nn)
    return "?";
  names = nn;
  names[nnames] = strdup(s);
  return names[nnames] ? names[nnames++] : "?";
}

/* ---- subscription and callbacks ---------------------------------------- */

static CUpti_CallbackFunc sub_cb;
static void *sub_user;
/* per-cbid driver callbacks and API records (cuptiEnableCallback,
 * cuptiActivityEnableDriverApi); the mock's submissions are cuLaunchKernel,
 * its other calls cuCtxGetCurrent */
static unsigned char drv_cb[CUPTI_DRIVER_TRACE_CBID_SIZE];
static unsigned char drv_api[CUPTI_DRIVER_TRACE_CBID_SIZE];

static int dom_driver, dom_resource, subscribed;
static uint32_t corr_next = 100, corr_cur;

/* MOCK_CUPTI_PCS_DETACH: CUPTI tore itself down; a call into it crashes */
int mcu_detached;
void mcu_detach(void) {
  mcu_detached = 1;
  sub_cb = NULL;
  dom_driver = dom_resource = subscribed = 0;
}
void mcu_alive_or_die(const char *fn) {
  if (mcu_detached) {
    fprintf(stderr, "mock CUPTI: %s called after CUPTI detached itself (the "
                    "real CUPTI crashes here)\n", fn);
    abort();
  }
}

/* ---- activity ----------------------------------------------------------- */
static unsigned act_kinds; /* bit per kind */
static CUpti_BuffersCallbackRequestFunc act_req;
static CUpti_BuffersCallbackCompleteFunc act_done;
static uint8_t *pend;
static size_t npend, cappend;

static void act_push(const void *rec, size_t size) {
  if (npend + size > cappend) {
    size_t nc = cappend ? cappend * 2 : 1 << 16;
    while (nc < npend + size)
      nc *= 2;
    uint8_t *np = realloc(pend, nc);
    if (!np)
      return;
    pend = np;
    cappend = nc;
  }
  memcpy(pend + npend, rec, size);
  npend += size;
}

static size_t rec_size(CUpti_ActivityKind k) {
  switch (k) {
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
  case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
  case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
  default: return 0;
  }
}

static void on_event(void *user, const mock_tool_event *ev) {
  (void)user;
  pthread_mutex_lock(&mcu_mu);
  if (ev->what == MOCK_TOOL_SUBMIT) {
    corr_cur = corr_next++;
    /* MOCK_CUPTI_CORR_NEEDS_API: no correlation ids unless DRIVER activity
     * is enabled (what CUPTI's documentation says) */
    if (mcu_env_on("MOCK_CUPTI_CORR_NEEDS_API") &&
        !(act_kinds & (1u << CUPTI_ACTIVITY_KIND_DRIVER)) &&
        !drv_api[CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel])
      corr_cur = 0;
    CUpti_CallbackFunc cb =
        dom_driver || drv_cb[CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel] ? sub_cb : NULL;
    pthread_mutex_unlock(&mcu_mu);
    if (cb) {
      CUpti_CallbackData d;
      memset(&d, 0, sizeof d);
      d.callbackSite = CUPTI_API_ENTER;
      d.functionName = "cuMockSubmit";
      d.correlationId = corr_cur;
      cb(sub_user, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
         &d);
    }
    return;
  }
  if (ev->what == MOCK_TOOL_CALL) { /* a driver call without GPU work */
    uint32_t corr = corr_next++;
    CUpti_CallbackFunc cb =
        dom_driver || drv_cb[CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent] ? sub_cb : NULL;
    pthread_mutex_unlock(&mcu_mu);
    if (cb) {
      CUpti_CallbackData d;
      memset(&d, 0, sizeof d);
      d.callbackSite = CUPTI_API_ENTER;
      d.functionName = "cuCtxGetCurrent";
      d.correlationId = corr;
      cb(sub_user, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent,
         &d);
    }
    return;
  }
  if (ev->what == MOCK_TOOL_MODULE) {
    CUpti_CallbackFunc cb = dom_resource ? sub_cb : NULL;
    pthread_mutex_unlock(&mcu_mu);
    if (cb) {
      CUpti_ModuleResourceData md = {1, ev->image_size, (const char *)ev->image};
      CUpti_ResourceData rd;
      memset(&rd, 0, sizeof rd);
      rd.resourceDescriptor = &md;
      cb(sub_user, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED, &rd);
    }
    return;
  }
  uint64_t end = ev->end_ns > ev->start_ns + 1000 ? ev->end_ns : ev->start_ns + 1000;
  if (ev->kind == MOCK_TOOL_KERNEL) {
    mcu_clock_count((act_kinds >> CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) & 1);
    if (act_kinds & (1u << CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) {
      CUpti_ActivityKernel10 k;
      memset(&k, 0, sizeof k);
      k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
      k.start = ev->start_ns;
      k.end = end;
      k.contextId = mcu_ctx_id(ev->ctx);
      k.streamId = ev->stream ? 7 : 1;
      k.gridX = (int32_t)ev->grid[0], k.gridY = (int32_t)ev->grid[1], k.gridZ = (int32_t)ev->grid[2];
      k.blockX = (int32_t)ev->block[0], k.blockY = (int32_t)ev->block[1], k.blockZ = (int32_t)ev->block[2];
      k.registersPerThread = 32;
      k.correlationId = corr_cur;
      k.name = keep_name(ev->kernel ? ev->kernel : "?");
      act_push(&k, sizeof k);
    }
    mcu_rp_kernel(ev->ctx, (double)(end - ev->start_ns), ev->graph);
    uint64_t crc = ev->image ? mcu_fnv64(ev->image, ev->image_size) : 1;
    const char *fn = keep_name(ev->kernel ? ev->kernel : "?");
    mcu_pcs_kernel(ev->ctx, corr_cur, crc, fn);
    mcu_sass_kernel(ev->ctx, (uint32_t)crc, fn);
  } else {
    int set = ev->kind == MOCK_TOOL_SET;
    CUpti_ActivityKind kind = set ? CUPTI_ACTIVITY_KIND_MEMSET : CUPTI_ACTIVITY_KIND_MEMCPY;
    if (act_kinds & (1u << kind)) {
      if (set) {
        CUpti_ActivityMemset4 m;
        memset(&m, 0, sizeof m);
        m.kind = kind;
        m.bytes = ev->bytes;
        m.start = ev->start_ns;
        m.end = end;
        m.contextId = mcu_ctx_id(ev->ctx);
        m.streamId = ev->stream ? 7 : 1;
        m.correlationId = corr_cur;
        act_push(&m, sizeof m);
      } else {
        CUpti_ActivityMemcpy6 m;
        memset(&m, 0, sizeof m);
        m.kind = kind;
        m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
        m.bytes = ev->bytes;
        m.start = ev->start_ns;
        m.end = end;
        m.contextId = mcu_ctx_id(ev->ctx);
        m.streamId = ev->stream ? 7 : 1;
        m.correlationId = corr_cur;
        act_push(&m, sizeof m);
      }
    }
    if (set)
      mcu_rp_memset(ev->ctx, (double)(end - ev->start_ns));
  }
  pthread_mutex_unlock(&mcu_mu);
}

/* ---- general ------------------------------------------------------------ */

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t *version) {
  if (!version)
    return CUPTI_ERROR_INVALID_PARAMETER;
  *version = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult r, const char **str) {
  static char buf[64];
  if (!str)
    return CUPTI_ERROR_INVALID_PARAMETER;
  switch (r) {
  case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
  case CUPTI_ERROR_INVALID_PARAMETER: *str = "CUPTI_ERROR_INVALID_PARAMETER"; break;
  case CUPTI_ERROR_NOT_INITIALIZED: *str = "CUPTI_ERROR_NOT_INITIALIZED"; break;
  case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: *str = "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"; break;
  case CUPTI_ERROR_INVALID_METRIC_NAME: *str = "CUPTI_ERROR_INVALID_METRIC_NAME"; break;
  case CUPTI_ERROR_NOT_SUPPORTED: *str = "CUPTI_ERROR_NOT_SUPPORTED"; break;
  case CUPTI_ERROR_MAX_LIMIT_REACHED: *str = "CUPTI_ERROR_MAX_LIMIT_REACHED"; break;
  case CUPTI_ERROR_INVALID_OPERATION: *str = "CUPTI_ERROR_INVALID_OPERATION"; break;
  case CUPTI_ERROR_HARDWARE_BUSY: *str = "CUPTI_ERROR_HARDWARE_BUSY"; break;
  case CUPTI_ERROR_UNKNOWN: *str = "CUPTI_ERROR_UNKNOWN"; break;
  default:
    snprintf(buf, sizeof buf, "CUPTI_ERROR_%d", (int)r);
    *str = buf;
  }
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb,
                                    void *user) {
  if (!s || !cb)
    return CUPTI_ERROR_INVALID_PARAMETER;
  if (mcu_env_on("MOCK_CUPTI_ATTACH_FAIL"))
    return CUPTI_ERROR_NOT_INITIALIZED;
  if (subscribed)
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  mock_tool_hook_fn hook = cu ? (mock_tool_hook_fn)dlsym(cu, "cuMockToolHook") : NULL;
  if (!hook)
    return CUPTI_ERROR_NOT_INITIALIZED; /* not the mock driver */
  hook(on_event, NULL);
  sub_cb = cb;
  sub_user = user;
  subscribed = 1;
  *s = (CUpti_SubscriberHandle)&sub_cb;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle s) {
  (void)s;
  mcu_alive_or_die("cuptiUnsubscribe");
  subscribed = dom_driver = dom_resource = 0;
  memset(drv_cb, 0, sizeof drv_cb);
  sub_cb = NULL;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle s,
                                       CUpti_CallbackDomain d) {
  mcu_alive_or_die("cuptiEnableDomain");
  if (!s || !subscribed)
    return CUPTI_ERROR_INVALID_PARAMETER;
  if (d == CUPTI_CB_DOMAIN_DRIVER_API) {
    if (enable && mcu_env_on("MOCK_CUPTI_SCOPE_ONLY"))
      return CUPTI_ERROR_NOT_SUPPORTED;
    dom_driver = enable != 0;
    if (!enable)
      memset(drv_cb, 0, sizeof drv_cb);
  } else if (d == CUPTI_CB_DOMAIN_RESOURCE)
    dom_resource = enable != 0;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle s,
                                         CUpti_CallbackDomain d, CUpti_CallbackId id) {
  mcu_alive_or_die("cuptiEnableCallback");
  if (!s || !subscribed)
    return CUPTI_ERROR_INVALID_PARAMETER;
  /* the engine asks for module loads only: that is all the mock delivers */
  if (d == CUPTI_CB_DOMAIN_RESOURCE && id == CUPTI_CBID_RESOURCE_MODULE_LOADED)
    dom_resource = enable != 0;
  else if (d == CUPTI_CB_DOMAIN_DRIVER_API && id < CUPTI_DRIVER_TRACE_CBID_SIZE)
    drv_cb[id] = enable != 0;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain d, uint32_t id,
                                          const char **name) {
  static const struct { uint32_t id; const char *name; } names[] = {
      {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel"},
      {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, "cuLaunchKernel_ptsz"},
      {CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, "cuCtxGetCurrent"},
      {CUPTI_DRIVER_TRACE_CBID_cuDriverGetVersion, "cuDriverGetVersion"},
      {CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, "cuMemAlloc_v2"},
      {CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, "cuMemcpyHtoD_v2"},
      {CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2, "cuMemsetD8_v2"},
      {CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, "cuGraphLaunch"},
      {CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, "cuStreamSynchronize"},
  };
  mcu_alive_or_die("cuptiGetCallbackName");
  if (mcu_env_on("MOCK_CUPTI_NO_SCOPE"))
    return CUPTI_ERROR_NOT_SUPPORTED;
  if (!name || d != CUPTI_CB_DOMAIN_DRIVER_API)
    return CUPTI_ERROR_INVALID_PARAMETER;
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (names[i].id == id) {
      *name = names[i].name;
      return CUPTI_SUCCESS;
    }
  return CUPTI_ERROR_INVALID_PARAMETER;
}

CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId id, uint8_t enable) {
  mcu_alive_or_die("cuptiActivityEnableDriverApi");
  if (id >= CUPTI_DRIVER_TRACE_CBID_SIZE)
    return CUPTI_ERROR_INVALID_PARAMETER;
  drv_api[id] = enable != 0;
  return CUPTI_SUCCESS;
}

static const void *ctx_seen[256];
static size_t nctx_seen;

uint32_t mcu_ctx_id(const void *ctx) {
  for (size_t i = 0; i < nctx_seen; i++)
    if (ctx_seen[i] == ctx)
      return (uint32_t)i + 1;
  if (nctx_seen == sizeof ctx_seen / sizeof *ctx_seen)
    return 0;
  ctx_seen[nctx_seen++] = ctx;
  return (uint32_t)nctx_seen;
}

CUptiResult CUPTIAPI cuptiGetContextId(CUcontext ctx, uint32_t *id) {
  if (!id || !ctx)
    return CUPTI_ERROR_INVALID_PARAMETER;
  pthread_mutex_lock(&mcu_mu);
  *id = mcu_ctx_id(ctx);
  pthread_mutex_unlock(&mcu_mu);
  return CUPTI_SUCCESS;
}

/* ---- activity ----------------------------------------------------------- */

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc rq,
                                                    CUpti_BuffersCallbackCompleteFunc done) {
  if (!rq || !done)
    return CUPTI_ERROR_INVALID_PARAMETER;
  act_req = rq;
  act_done = done;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind k) {
  mcu_alive_or_die("cuptiActivityEnable");
  if (!subscribed && mcu_env_on("MOCK_CUPTI_ATTACH_FAIL"))
    return CUPTI_ERROR_NOT_INITIALIZED;
  if (!rec_size(k) && k != CUPTI_ACTIVITY_KIND_DRIVER) /* DRIVER: no records */
    return CUPTI_ERROR_NOT_COMPATIBLE;
  act_kinds |= 1u << k;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind k) {
  mcu_alive_or_die("cuptiActivityDisable");
  if ((unsigned)k >= 32 || !(act_kinds & (1u << k))) {
    fprintf(stderr, "mock CUPTI: cuptiActivityDisable(%d) of a kind that is "
                    "not enabled\n", (int)k);
    abort();
  }
  act_kinds &= ~(1u << k);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  (void)flag;
  mcu_alive_or_die("cuptiActivityFlushAll");
  pthread_mutex_lock(&mcu_mu);
  size_t off = 0;
  while (off < npend && act_req && act_done) {
    uint8_t *buf = NULL;
    size_t size = 0, maxrec = 0;
    act_req(&buf, &size, &maxrec);
    if (!buf || !size)
      break;
    size_t used = 0;
    while (off < npend) {
      CUpti_Activity *a = (CUpti_Activity *)(pend + off);
      size_t rs = rec_size(a->kind);
      if (used + rs > size)
        break;
      memcpy(buf + used, pend + off, rs);
      used += rs;
      off += rs;
    }
    pthread_mutex_unlock(&mcu_mu);
    act_done(NULL, 0, buf, size, used);
    pthread_mutex_lock(&mcu_mu);
    if (!used)
      break;
  }
  npend = 0;
  pthread_mutex_unlock(&mcu_mu);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid,
                                                CUpti_Activity **record) {
  if (!buffer || !record)
    return CUPTI_ERROR_INVALID_PARAMETER;
  size_t off = 0;
  if (*record) {
    size_t rs = rec_size((*record)->kind);
    if (!rs)
      return CUPTI_ERROR_INVALID_KIND;
    off = (size_t)((uint8_t *)*record - buffer) + rs;
  }
  if (off >= valid)
    return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = (CUpti_Activity *)(buffer + off);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext c, uint32_t s, size_t *d) {
  (void)c, (void)s;
  if (d)
    *d = 0;
  return CUPTI_SUCCESS;
}
