/* replay_driver.c - loads the CUDA driver for replay.
 *
 * libcuda is never linked: it is dlopen'ed at replay time (the mock
 * tests/mock/libcuda.so.1 in CI via LD_LIBRARY_PATH, the real driver on the
 * GPU machine). cuGetProcAddress_v2 gives the versioned variant matching the
 * PFN type we call through (e.g. cuMemAlloc at 3020 = cuMemAlloc_v2); entries
 * with a per-thread-default-stream variant are fetched a second time with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM for Ptsz/Ptds records. When
 * cuGetProcAddress_v2 is absent or refuses a name we fall back to dlsym of
 * the exported symbol. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_getproc.h"
#include "cucap_log.h"
#include "replay_internal.h"

/* The last table loaded: a process that replays again (--loop callers,
 * fuzz_replay) skips ~140 cuGetProcAddress lookups. Valid for the life of
 * the process because the library is never unloaded (rp_driver_unload).
 * One replay per process at a time (cucap_replay.h): no lock. */
static rp_driver g_last;
static char g_last_name[4096];

cucap_status rp_driver_load(rp_driver *d, const char *libname, char *msg,
                            size_t msg_size) {
  memset(d, 0, sizeof *d);
  if (!libname)
    libname = "libcuda.so.1";
  if (g_last.lib && strcmp(libname, g_last_name) == 0) {
    *d = g_last;
    return CUCAP_OK;
  }
  d->lib = dlopen(libname, RTLD_NOW | RTLD_LOCAL);
  if (!d->lib) {
    snprintf(msg, msg_size, "cannot load the CUDA driver (%s): %s", libname,
             dlerror());
    return CUCAP_ERR_ENV;
  }
  if (!dlsym(d->lib, "cuGetProcAddress_v2"))
    CUCAP_WARN("replay: %s has no cuGetProcAddress_v2; using dlsym", libname);
#define RP_X_LOAD(f, n, v, t, e, ptsz)                                         \
  d->df.f = (t)cucap_getproc(d->lib, n, v, e, 0);                              \
  if (ptsz)                                                                    \
    d->pt.f = (t)cucap_getproc(d->lib, n, v, e, 1);                            \
  if (!d->pt.f)                                                                \
    d->pt.f = d->df.f;
  CUCAP_REPLAY_DRIVER_FNS(RP_X_LOAD)
#undef RP_X_LOAD
  d->have_pt = 1;
  /* the minimum without which nothing can be replayed */
  if (!d->df.Init || !d->df.DeviceGet || !d->df.DevicePrimaryCtxRetain ||
      !d->df.CtxSetCurrent || !d->df.MemcpyHtoDAsync ||
      !d->df.MemcpyDtoHAsync || !d->df.LaunchKernel ||
      !d->df.CtxSynchronize || !d->df.StreamSynchronize) {
    snprintf(msg, msg_size, "%s lacks basic driver entry points", libname);
    rp_driver_unload(d);
    return CUCAP_ERR_ENV;
  }
  if (strlen(libname) < sizeof g_last_name) {
    g_last = *d;
    snprintf(g_last_name, sizeof g_last_name, "%s", libname);
  }
  return CUCAP_OK;
}

void *rp_driver_proc(const rp_driver *d, const char *name, int cuda_version) {
  if (!d->lib || !name)
    return NULL;
  return cucap_getproc(d->lib, name, cuda_version, name, 0);
}

/* The library is never dlclose'd: the driver keeps process-wide state
 * (threads, the mock's registries) that does not survive an unload, and a
 * second replay in the same process must find it intact. dlopen again on the
 * next load just bumps the reference count. */
void rp_driver_unload(rp_driver *d) {
  if (d)
    memset(d, 0, sizeof *d);
}

const char *rp_cu_err(const rp_driver *d, CUresult r) {
  const char *s = NULL;
  if (d->df.GetErrorName && d->df.GetErrorName(r, &s) == CUDA_SUCCESS && s)
    return s;
  return "CUDA error";
}
