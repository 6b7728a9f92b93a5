/* cupti_load.c - finds and dlopens libcupti for the CUPTI engine and
 * resolves its entry points (CK_CUPTI_FNS). CUPTI is never linked: a replay
 * that does not profile never loads it.
 *
 * Search order: the given path; CUCAP_CUPTI (else CUCAP_CUPTI_LIB); for $CUDA_HOME and
 * /usr/local/cuda: lib64/, targets/x86_64-linux/lib/ and extras/CUPTI/lib64/
 * (libcupti.so.13, then libcupti.so); then the loader's search path. The
 * Profiler Host API dlopens libnvperf_host.so itself; CUPTI's own directory
 * is not always on the loader's path (the GPU machine has no
 * extras/CUPTI), so both nvperf libraries are preloaded from there first.
 * The preload is slow (large libraries, a noticeable share of a profile's
 * attach time) and runs on a thread of its own, started once CUPTI has
 * subscribed (ck_api_nvperf_start), so that it overlaps cuInit: started
 * here, at load, it would hold the loader's lock while cuptiSubscribe
 * waits for it, so the subscription would only happen after both libraries
 * are in. The "attach" figure of the timing breakdown (CUCAP_LOG_LEVEL=info)
 * shows the cost; docs/bench-log.md, "nvperf preload". Whatever needs
 * the Profiler Host API waits for it first (ck_api_nvperf_wait), and does
 * it in line if it was never started. */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_getproc.h"
#include "cucap_knobs.h"
#include "cucap_log.h"
#include "cupti_internal.h"

static void *ck_try(const char *path, char *why, size_t why_size) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h && why && why_size && !why[0]) {
    const char *e = dlerror();
    snprintf(why, why_size, "%s", e ? e : path);
  }
  return h;
}

/* The directory of the loaded library (for the nvperf preload). */
static void ck_lib_dir(void *h, char *dir, size_t size, char *path,
                       size_t path_size) {
  struct link_map *lm = NULL;
  dir[0] = 0;
  if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_name)
    return;
  snprintf(path, path_size, "%s", lm->l_name);
  snprintf(dir, size, "%s", lm->l_name);
  char *slash = strrchr(dir, '/');
  if (slash)
    *slash = 0;
  else
    dir[0] = 0;
}

static void ck_preload_nvperf(const char *dir);

/* The preload thread: arg is the ck_api's dir, which outlives it (the
 * thread is joined by ck_api_unload at the latest). */
static void *ck_preload_main(void *arg) {
  ck_preload_nvperf(arg);
  return NULL;
}

/* libcupti loaded, with the Profiler API: the preload is wanted */
static int ck_has_prof(const ck_api *a) {
  return a->lib && (a->groups & CK_PROF);
}

static void ck_preload_join(ck_api *a) {
  if (a->preload_state == CK_PRELOAD_RUNNING) {
    pthread_join(a->preload, NULL);
    a->preload_state = CK_PRELOAD_DONE;
  }
}

void ck_api_nvperf_start(ck_api *a) {
  if (!ck_has_prof(a) || a->preload_state != CK_PRELOAD_NONE)
    return;
  if (pthread_create(&a->preload, NULL, ck_preload_main, a->dir) == 0) {
    a->preload_state = CK_PRELOAD_RUNNING;
    return;
  }
  ck_preload_nvperf(a->dir); /* no thread: in line */
  a->preload_state = CK_PRELOAD_DONE;
}

void ck_api_nvperf_wait(ck_api *a) {
  ck_preload_join(a);
  if (a->preload_state == CK_PRELOAD_NONE && ck_has_prof(a))
    ck_preload_nvperf(a->dir);
  a->preload_state = CK_PRELOAD_DONE;
}

static void ck_preload_nvperf(const char *dir) {
  static const char *const libs[] = {"libnvperf_host.so", "libnvperf_target.so"};
  for (size_t i = 0; i < 2; i++) {
    char p[1024];
    void *h = NULL;
    if (dir[0]) {
      snprintf(p, sizeof p, "%s/%s", dir, libs[i]);
      h = dlopen(p, RTLD_NOW | RTLD_GLOBAL);
    }
    if (!h)
      h = dlopen(libs[i], RTLD_NOW | RTLD_GLOBAL);
    /* kept loaded for the life of the process, like CUPTI keeps them */
    CUCAP_DEBUG("cupti: %s %s", libs[i],
                h ? "preloaded" : "not found next to libcupti (the Profiler "
                                  "Host API will look for it itself)");
  }
}

int ck_api_load(ck_api *a, const char *path, char *msg, size_t msg_size) {
  memset(a, 0, sizeof *a);
  char why[512] = "";
  void *h = NULL;
  if (path && *path) {
    h = ck_try(path, why, sizeof why);
  } else {
    /* CUCAP_CUPTI (cucap doctor, replay --profile), CUCAP_CUPTI_LIB (record
     * --audit) */
    const char *env = cucap_knob_str(CUCAP_KNOB(CUCAP_CUPTI));
    if (!env || !*env)
      env = cucap_knob_str(CUCAP_KNOB(CUCAP_CUPTI_LIB));
    if (env && *env)
      h = ck_try(env, why, sizeof why);
    const char *home = getenv("CUDA_HOME");
    const char *homes[] = {home, "/usr/local/cuda"};
    const char *dirs[] = {"lib64", "targets/x86_64-linux/lib", "extras/CUPTI/lib64"};
    const char *names[] = {"libcupti.so.13", "libcupti.so"};
    for (size_t i = 0; !h && !(env && *env) && i < 2; i++) {
      if (!homes[i] || !*homes[i])
        continue;
      for (size_t j = 0; !h && j < 3; j++)
        for (size_t k = 0; !h && k < 2; k++) {
          char p[1024];
          snprintf(p, sizeof p, "%s/%s/%s", homes[i], dirs[j], names[k]);
          h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
        }
    }
    if (!h && !(env && *env))
      h = ck_try("libcupti.so.13", why, sizeof why);
    if (!h && !(env && *env))
      h = dlopen("libcupti.so", RTLD_NOW | RTLD_LOCAL);
  }
  if (!h) {
    snprintf(msg, msg_size,
             "cannot load CUPTI (%s); install the CUDA toolkit's CUPTI or set "
             "CUCAP_CUPTI=/path/to/libcupti.so",
             why[0] ? why : "libcupti.so.13 not found");
    return 0;
  }
  a->lib = h;
  ck_lib_dir(h, a->dir, sizeof a->dir, a->path, sizeof a->path);
  if (!a->path[0])
    snprintf(a->path, sizeof a->path, "%s", path && *path ? path : "libcupti");
  unsigned missing = 0;
#define CK_X_LOAD(name, grp)                                                   \
  a->name = (__typeof__(a->name))dlsym(h, #name);                              \
  if (!a->name) {                                                              \
    missing |= (grp);                                                          \
    size_t l = strlen(a->missing);                                             \
    if (l + sizeof #name + 2 < sizeof a->missing)                              \
      snprintf(a->missing + l, sizeof a->missing - l, "%s%s", l ? " " : "",    \
               #name);                                                         \
  }
  CK_CUPTI_FNS(CK_X_LOAD)
#undef CK_X_LOAD
  a->groups = (CK_CORE | CK_PROF | CK_PCS | CK_SASS) & ~missing;
  if (!(a->groups & CK_CORE)) {
    snprintf(msg, msg_size,
             "%s is not a usable CUPTI: missing entry points (%s)", a->path,
             a->missing);
    dlclose(h);
    a->lib = NULL;
    return 0;
  }
  if (a->missing[0])
    CUCAP_INFO("cupti: %s lacks %s", a->path, a->missing);
  return 1;
}

void ck_api_unload(ck_api *a) {
  ck_preload_join(a); /* started, perhaps not waited for */
  /* libcupti is not unloaded: CUPTI keeps worker threads and driver hooks
   * that outlive the unsubscribe (unloading it under them crashes). */
  a->lib = NULL;
}

const char *ck_strerror(const ck_api *a, CUptiResult r, char *buf, size_t n) {
  const char *name = NULL, *text = NULL;
  if (a->cuptiGetResultString &&
      a->cuptiGetResultString(r, &name) != CUPTI_SUCCESS)
    name = NULL;
  if (a->cuptiGetErrorMessage &&
      a->cuptiGetErrorMessage(r, &text) != CUPTI_SUCCESS)
    text = NULL;
  if (text && name && !strcmp(text, name))
    text = NULL;
  snprintf(buf, n, "%s (%d)%s%s", name ? name : "CUPTI error", (int)r,
           text ? ": " : "", text ? text : "");
  return buf;
}

/* ---- the CUDA driver of the probes ------------------------------------- */

cucap_status ck_drv_load(ck_drv *d, const char *libname, char *msg, size_t msg_size) {
  memset(d, 0, sizeof *d);
  if (!libname)
    libname = "libcuda.so.1";
  d->lib = dlopen(libname, RTLD_NOW | RTLD_LOCAL);
  if (!d->lib) {
    snprintf(msg, msg_size, "cannot load the CUDA driver (%s): %s", libname, dlerror());
    return CUCAP_ERR_ENV;
  }
#define CK_DRV(f, name, ver, exported) d->f = (PFN_##name##_v##ver)cucap_getproc(d->lib, #name, ver, exported, 0)
  CK_DRV(Init, cuInit, 2000, "cuInit");
  CK_DRV(DriverGetVersion, cuDriverGetVersion, 2020, "cuDriverGetVersion");
  CK_DRV(GetErrorName, cuGetErrorName, 6000, "cuGetErrorName");
  CK_DRV(DeviceGet, cuDeviceGet, 2000, "cuDeviceGet");
  CK_DRV(DeviceGetCount, cuDeviceGetCount, 2000, "cuDeviceGetCount");
  CK_DRV(DeviceGetName, cuDeviceGetName, 2000, "cuDeviceGetName");
  CK_DRV(DeviceGetAttribute, cuDeviceGetAttribute, 2000, "cuDeviceGetAttribute");
  CK_DRV(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, "cuDevicePrimaryCtxRetain");
  CK_DRV(DevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 11000, "cuDevicePrimaryCtxRelease_v2");
  CK_DRV(CtxSetCurrent, cuCtxSetCurrent, 4000, "cuCtxSetCurrent");
  CK_DRV(CtxSynchronize, cuCtxSynchronize, 2000, "cuCtxSynchronize");
#undef CK_DRV
  if (!d->Init || !d->DeviceGet || !d->DevicePrimaryCtxRetain || !d->CtxSetCurrent) {
    snprintf(msg, msg_size, "%s lacks basic driver entry points", libname);
    memset(d, 0, sizeof *d);
    return CUCAP_ERR_ENV;
  }
  return CUCAP_OK;
}

const char *ck_drv_err(const ck_drv *d, CUresult r) {
  const char *s = NULL;
  if (d->GetErrorName && d->GetErrorName(r, &s) == CUDA_SUCCESS && s)
    return s;
  return "CUDA error";
}
