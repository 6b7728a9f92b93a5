/* replay_driver.c - loads the CUDA driver for replay.
 *
 * libcuda is never linked: it is dlopen'ed at replay time (the mock
 * tests/mock/libcuda.so.1 in CI via LD_LIBRARY_PATH, the real driver on the
 * GPU machine). cuGetProcAddress_v2 gives the versioned variant matching the
 * PFN type we call through (e.g. cuMemAlloc at 3020 = cuMemAlloc_v2); entries
 * with a per-thread-default-stream variant are fetched a second time with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM for Ptsz/Ptds records. When
 * cuGetProcAddress_v2 is absent or refuses a name we fall back to dlsym of
 * the exported symbol. Also: the tiny hash map used for handle maps. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_log.h"
#include "replay_internal.h"

typedef CUresult (*rp_getproc_fn)(const char *, void **, int, cuuint64_t,
                                  CUdriverProcAddressQueryResult *);

static void *rp_lookup(void *lib, rp_getproc_fn gp, const char *name, int ver,
                       const char *exported, int per_thread) {
  void *p = NULL;
  if (gp) {
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SUCCESS;
    cuuint64_t flags = per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                  : CU_GET_PROC_ADDRESS_DEFAULT;
    if (gp(name, &p, ver, flags, &q) != CUDA_SUCCESS ||
        q != CU_GET_PROC_ADDRESS_SUCCESS)
      p = NULL;
  }
  if (!p && exported) {
    char buf[128];
    if (per_thread) {
      /* exported per-thread names: <name>[_v2]_ptsz */
      snprintf(buf, sizeof buf, "%s_ptsz", exported);
      p = dlsym(lib, buf);
    }
    if (!p)
      p = dlsym(lib, exported);
  }
  return p;
}

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
  rp_getproc_fn gp = (rp_getproc_fn)dlsym(d->lib, "cuGetProcAddress_v2");
  if (!gp)
    CUCAP_WARN("replay: %s has no cuGetProcAddress_v2; using dlsym", libname);
#define RP_X_LOAD(f, n, v, t, e, ptsz)                                         \
  d->df.f = (t)rp_lookup(d->lib, gp, n, v, e, 0);                              \
  if (ptsz)                                                                    \
    d->pt.f = (t)rp_lookup(d->lib, gp, n, v, e, 1);                            \
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
  rp_getproc_fn gp = (rp_getproc_fn)dlsym(d->lib, "cuGetProcAddress_v2");
  return rp_lookup(d->lib, gp, name, cuda_version, name, 0);
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

/* ---- hash map: open addressing, key 0 is stored out of band ---------- */
static size_t rp_hash(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return (size_t)k;
}

#define RP_EMPTY 0
#define RP_TOMB 1 /* keys 0 and 1 go to the side slots */

static int rp_map_grow(rp_map *m) {
  size_t ncap = m->cap ? m->cap * 2 : 64;
  /* slot ncap holds the side values for keys 0/1 */
  uint64_t *nk = calloc(ncap + 2, sizeof *nk), *nv = calloc(ncap + 2, sizeof *nv);
  if (!nk || !nv) {
    free(nk);
    free(nv);
    return 0;
  }
  size_t live = 0;
  if (m->cap) {
    for (size_t i = 0; i < m->cap; i++) {
      uint64_t k = m->keys[i];
      if (k == RP_EMPTY || k == RP_TOMB)
        continue;
      size_t j = rp_hash(k) & (ncap - 1);
      while (nk[j] != RP_EMPTY)
        j = (j + 1) & (ncap - 1);
      nk[j] = k;
      nv[j] = m->vals[i];
      live++;
    }
    live += (m->keys[m->cap] & 1) + ((m->keys[m->cap] >> 1) & 1);
    /* side slots: keys[cap] = flags, vals[cap], vals[cap+1] */
    nk[ncap] = m->keys[m->cap];
    nv[ncap] = m->vals[m->cap];
    nv[ncap + 1] = m->vals[m->cap + 1];
  }
  free(m->keys);
  free(m->vals);
  m->keys = nk;
  m->vals = nv;
  m->cap = ncap;
  m->count = live; /* count = live entries + tombstones (reset here) */
  return 1;
}

int rp_map_put(rp_map *m, uint64_t k, uint64_t v) {
  if ((m->count + 1) * 2 > m->cap && !rp_map_grow(m))
    return 0;
  if (k <= 1) {
    if (!(m->keys[m->cap] & (1u << k)))
      m->count++;
    m->keys[m->cap] |= 1u << k;
    m->vals[m->cap + k] = v;
    return 1;
  }
  size_t j = rp_hash(k) & (m->cap - 1), tomb = (size_t)-1;
  while (m->keys[j] != RP_EMPTY) {
    if (m->keys[j] == k) {
      m->vals[j] = v;
      return 1;
    }
    if (m->keys[j] == RP_TOMB && tomb == (size_t)-1)
      tomb = j;
    j = (j + 1) & (m->cap - 1);
  }
  if (tomb != (size_t)-1) {
    j = tomb;
    m->count--; /* reusing a counted tombstone */
  }
  m->keys[j] = k;
  m->vals[j] = v;
  m->count++;
  return 1;
}

static size_t rp_map_find(const rp_map *m, uint64_t k) {
  if (!m->cap)
    return (size_t)-1;
  size_t j = rp_hash(k) & (m->cap - 1);
  for (size_t n = 0; n < m->cap && m->keys[j] != RP_EMPTY; n++) {
    if (m->keys[j] == k)
      return j;
    j = (j + 1) & (m->cap - 1);
  }
  return (size_t)-1;
}

int rp_map_get(const rp_map *m, uint64_t k, uint64_t *v) {
  if (!m->cap)
    return 0;
  if (k <= 1) {
    if (!(m->keys[m->cap] & (1u << k)))
      return 0;
    if (v)
      *v = m->vals[m->cap + k];
    return 1;
  }
  size_t j = rp_map_find(m, k);
  if (j == (size_t)-1)
    return 0;
  if (v)
    *v = m->vals[j];
  return 1;
}

int rp_map_del(rp_map *m, uint64_t k, uint64_t *old) {
  if (!m->cap)
    return 0;
  if (k <= 1) {
    if (!(m->keys[m->cap] & (1u << k)))
      return 0;
    m->keys[m->cap] &= ~(uint64_t)(1u << k);
    if (old)
      *old = m->vals[m->cap + k];
    m->count--;
    return 1;
  }
  size_t j = rp_map_find(m, k);
  if (j == (size_t)-1)
    return 0;
  if (old)
    *old = m->vals[j];
  m->keys[j] = RP_TOMB; /* stays counted until the next grow */
  return 1;
}

int rp_map_next(const rp_map *m, size_t *pos, uint64_t *k, uint64_t *v) {
  if (!m->cap || !m->keys)
    return 0;
  for (size_t i = *pos; i < m->cap + 2; i++) {
    uint64_t key;
    if (i < m->cap) {
      key = m->keys[i];
      if (key == RP_EMPTY || key == RP_TOMB)
        continue;
    } else { /* side slots: keys 0 and 1 */
      key = i - m->cap;
      if (!(m->keys[m->cap] & (1u << key)))
        continue;
    }
    *pos = i + 1;
    if (k)
      *k = key;
    if (v)
      *v = m->vals[i];
    return 1;
  }
  *pos = m->cap + 2;
  return 0;
}

void rp_map_free(rp_map *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}
