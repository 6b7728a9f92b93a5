/* tracker.c - live driver object tables.
 * See cucap_tracker.h for the concurrency model: lock-free reads of handle
 * maps, writers under one mutex, retired memory freed at destroy. */
#include "cucap_tracker.h"
#include "cucap_vec.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ handle map */

typedef struct hslot {
  _Atomic uint64_t key;   /* 0 = empty (handles are never 0) */
  _Atomic uintptr_t val;  /* 0 = absent (tombstone once key set) */
} hslot;

typedef struct htab {
  size_t cap;   /* power of two */
  size_t used;  /* slots with a key (live + tombstones); writer-only */
  hslot slots[];
} htab;

typedef struct hmap {
  _Atomic(htab *) tab;
} hmap;

typedef struct retired {
  struct retired *next;
  void *p;
} retired;

struct cucap_tracker {
  pthread_mutex_t wmu;      /* serialises all handle-map writers */
  hmap fns, mods, streams, events;
  retired *retired;         /* freed at destroy */
  pthread_rwlock_t alock;   /* allocation intervals */
  cucap_tracked_alloc *allocs;
  size_t nallocs, capallocs;
};

static size_t hidx(uint64_t key, size_t cap) {
  return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

static htab *htab_new(size_t cap) {
  htab *t = calloc(1, sizeof *t + cap * sizeof(hslot));
  if (t)
    t->cap = cap;
  return t;
}

/* writer holds wmu */
static int retire(cucap_tracker *t, void *p) {
  if (!p)
    return 1;
  retired *r = malloc(sizeof *r);
  if (!r)
    return 0; /* leak rather than free under a possible reader */
  r->p = p;
  r->next = t->retired;
  t->retired = r;
  return 1;
}

static uintptr_t hmap_get(hmap *m, uint64_t key) {
  htab *tb = atomic_load_explicit(&m->tab, memory_order_acquire);
  if (!tb || !key)
    return 0;
  for (size_t i = hidx(key, tb->cap), n = 0; n < tb->cap; i = (i + 1) & (tb->cap - 1), n++) {
    uint64_t k = atomic_load_explicit(&tb->slots[i].key, memory_order_acquire);
    if (k == key)
      return atomic_load_explicit(&tb->slots[i].val, memory_order_acquire);
    if (k == 0)
      return 0;
  }
  return 0;
}

/* writer holds wmu. Inserts/replaces; returns the previous value (0 if none)
 * through *old. val 0 removes. */
static cucap_status hmap_put(cucap_tracker *t, hmap *m, uint64_t key,
                             uintptr_t val, uintptr_t *old) {
  *old = 0;
  CUCAP_RETURN_IF(!key, CUCAP_ERR_INVALID_ARG);
  htab *tb = atomic_load_explicit(&m->tab, memory_order_relaxed);
  if (!tb || (val && (tb->used + 1) * 4 > tb->cap * 3)) {
    /* grow (or compact tombstones) into a fresh table, then publish */
    size_t live = 0;
    if (tb)
      for (size_t i = 0; i < tb->cap; i++)
        live += atomic_load_explicit(&tb->slots[i].val, memory_order_relaxed) != 0;
    size_t cap = 64;
    while (cap < (live + 1) * 4)
      cap *= 2;
    htab *nt = htab_new(cap);
    CUCAP_RETURN_IF(!nt, CUCAP_ERR_NOMEM);
    if (tb) {
      for (size_t i = 0; i < tb->cap; i++) {
        uint64_t k = atomic_load_explicit(&tb->slots[i].key, memory_order_relaxed);
        uintptr_t v = atomic_load_explicit(&tb->slots[i].val, memory_order_relaxed);
        if (!k || !v)
          continue;
        size_t j = hidx(k, cap);
        while (atomic_load_explicit(&nt->slots[j].key, memory_order_relaxed))
          j = (j + 1) & (cap - 1);
        atomic_store_explicit(&nt->slots[j].val, v, memory_order_relaxed);
        atomic_store_explicit(&nt->slots[j].key, k, memory_order_relaxed);
        nt->used++;
      }
      if (!retire(t, tb)) {
        free(nt);
        return CUCAP_ERR_NOMEM;
      }
    }
    atomic_store_explicit(&m->tab, nt, memory_order_release);
    tb = nt;
  }
  size_t i = hidx(key, tb->cap);
  for (size_t n = 0; n < tb->cap; n++, i = (i + 1) & (tb->cap - 1)) {
    uint64_t k = atomic_load_explicit(&tb->slots[i].key, memory_order_relaxed);
    if (k == key) {
      *old = atomic_exchange_explicit(&tb->slots[i].val, val, memory_order_acq_rel);
      return CUCAP_OK;
    }
    if (k == 0) {
      if (!val)
        return CUCAP_OK;
      /* value first, then key: a reader that sees the key sees the value */
      atomic_store_explicit(&tb->slots[i].val, val, memory_order_release);
      atomic_store_explicit(&tb->slots[i].key, key, memory_order_release);
      tb->used++;
      return CUCAP_OK;
    }
  }
  return CUCAP_ERR_INTERNAL; /* unreachable: load factor <= 3/4 */
}

static void hmap_free(hmap *m, int free_vals) {
  htab *tb = atomic_load(&m->tab);
  if (!tb)
    return;
  if (free_vals)
    for (size_t i = 0; i < tb->cap; i++)
      free((void *)atomic_load(&tb->slots[i].val));
  free(tb);
}

/* ------------------------------------------------------------- lifecycle */

cucap_tracker *cucap_tracker_create(void) {
  cucap_tracker *t = calloc(1, sizeof *t);
  if (!t)
    return NULL;
  pthread_mutex_init(&t->wmu, NULL);
  pthread_rwlock_init(&t->alock, NULL);
  return t;
}

typedef struct mod_entry {
  cucap_tracked_module m;
  void *image; /* malloc'ed copy or NULL */
} mod_entry;

void cucap_tracker_destroy(cucap_tracker *t) {
  if (!t)
    return;
  hmap_free(&t->fns, 1);
  htab *mt = atomic_load(&t->mods.tab);
  if (mt)
    for (size_t i = 0; i < mt->cap; i++) {
      mod_entry *e = (mod_entry *)atomic_load(&mt->slots[i].val);
      if (e) {
        free(e->image);
        free(e);
      }
    }
  hmap_free(&t->mods, 0);
  hmap_free(&t->streams, 0);
  hmap_free(&t->events, 0);
  for (retired *r = t->retired, *n; r; r = n) {
    n = r->next;
    free(r->p);
    free(r);
  }
  free(t->allocs);
  pthread_rwlock_destroy(&t->alock);
  pthread_mutex_destroy(&t->wmu);
  free(t);
}

static cucap_tracker *g_tracker;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void g_init(void) { g_tracker = cucap_tracker_create(); }

cucap_tracker *cucap_tracker_global(void) {
  pthread_once(&g_once, g_init);
  return g_tracker;
}

/* ----------------------------------------------------------- allocations */

/* first index with address >= a */
static size_t alloc_lower(const cucap_tracker *t, uint64_t a) {
  size_t lo = 0, hi = t->nallocs;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->allocs[mid].address < a)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

cucap_status cucap_tracker_alloc_add(cucap_tracker *t, const cucap_tracked_alloc *a) {
  CUCAP_RETURN_IF(!t || !a, CUCAP_ERR_INVALID_ARG);
  cucap_status st = CUCAP_OK;
  pthread_rwlock_wrlock(&t->alock);
  size_t i = alloc_lower(t, a->address);
  if (i < t->nallocs && t->allocs[i].address == a->address) {
    t->allocs[i] = *a;
  } else {
    if (!CUCAP_VEC_RESERVE(t->allocs, t->capallocs, t->nallocs + 1, 64)) {
      st = CUCAP_ERR_NOMEM;
      goto out;
    }
    memmove(t->allocs + i + 1, t->allocs + i, (t->nallocs - i) * sizeof *t->allocs);
    t->allocs[i] = *a;
    t->nallocs++;
  }
out:
  pthread_rwlock_unlock(&t->alock);
  return st;
}

int cucap_tracker_alloc_remove(cucap_tracker *t, uint64_t address,
                               cucap_tracked_alloc *out) {
  if (!t)
    return 0;
  int found = 0;
  pthread_rwlock_wrlock(&t->alock);
  size_t i = alloc_lower(t, address);
  if (i < t->nallocs && t->allocs[i].address == address) {
    if (out)
      *out = t->allocs[i];
    memmove(t->allocs + i, t->allocs + i + 1, (t->nallocs - i - 1) * sizeof *t->allocs);
    t->nallocs--;
    found = 1;
  }
  pthread_rwlock_unlock(&t->alock);
  return found;
}

size_t cucap_tracker_alloc_remove_context(cucap_tracker *t, uint64_t context) {
  if (!t)
    return 0;
  pthread_rwlock_wrlock(&t->alock);
  size_t j = 0, n = t->nallocs;
  for (size_t i = 0; i < n; i++)
    if (t->allocs[i].context != context)
      t->allocs[j++] = t->allocs[i];
  t->nallocs = j;
  pthread_rwlock_unlock(&t->alock);
  return n - j;
}

int cucap_tracker_alloc_find(cucap_tracker *t, uint64_t address,
                             cucap_tracked_alloc *out) {
  if (!t)
    return 0;
  int found = 0;
  pthread_rwlock_rdlock(&t->alock);
  size_t i = alloc_lower(t, address + 1); /* first start > address */
  if (i > 0) {
    const cucap_tracked_alloc *a = &t->allocs[i - 1];
    if (address >= a->address && address - a->address < (a->size ? a->size : 1)) {
      if (out)
        *out = *a;
      found = 1;
    }
  }
  pthread_rwlock_unlock(&t->alock);
  return found;
}

cucap_status cucap_tracker_alloc_list_device(cucap_tracker *t,
                                             cucap_tracked_alloc **out,
                                             size_t *count) {
  CUCAP_RETURN_IF(!t || !out || !count, CUCAP_ERR_INVALID_ARG);
  *out = NULL;
  *count = 0;
  pthread_rwlock_rdlock(&t->alock);
  cucap_tracked_alloc *v = malloc((t->nallocs ? t->nallocs : 1) * sizeof *v);
  size_t n = 0;
  if (v)
    for (size_t i = 0; i < t->nallocs; i++)
      if (t->allocs[i].device_memory)
        v[n++] = t->allocs[i];
  pthread_rwlock_unlock(&t->alock);
  CUCAP_RETURN_IF(!v, CUCAP_ERR_NOMEM);
  *out = v;
  *count = n;
  return CUCAP_OK;
}

/* ------------------------------------------------------------- functions */

cucap_status cucap_tracker_fn_add(cucap_tracker *t, uint64_t handle,
                                  uint64_t module, uint8_t kind,
                                  const char *name,
                                  const cucap_param_layout *params,
                                  uint32_t nparams, uint32_t param_bytes,
                                  uint8_t param_source) {
  CUCAP_RETURN_IF(!t || !handle || (nparams && !params), CUCAP_ERR_INVALID_ARG);
  CUCAP_RETURN_IF(nparams > 65536, CUCAP_ERR_TOO_LARGE);
  size_t nl = name ? strlen(name) : 0;
  size_t sz = sizeof(cucap_tracked_fn) + nparams * sizeof(cucap_param_layout);
  cucap_tracked_fn *f = malloc(sz + nl + 1);
  CUCAP_RETURN_IF(!f, CUCAP_ERR_NOMEM);
  f->handle = handle;
  f->module = module;
  f->kind = kind;
  f->param_source = param_source;
  atomic_init(&f->own_function_recorded, 0);
  f->nparams = nparams;
  f->param_bytes = param_bytes;
  if (nparams)
    memcpy(f->params, params, nparams * sizeof *params);
  char *nm = (char *)f + sz;
  if (nl)
    memcpy(nm, name, nl);
  nm[nl] = 0;
  f->name = nm;
  pthread_mutex_lock(&t->wmu);
  uintptr_t old;
  cucap_status st = hmap_put(t, &t->fns, handle, (uintptr_t)f, &old);
  if (st == CUCAP_OK)
    retire(t, (void *)old);
  pthread_mutex_unlock(&t->wmu);
  if (st != CUCAP_OK)
    free(f);
  return st;
}

const cucap_tracked_fn *cucap_tracker_fn_find(cucap_tracker *t, uint64_t handle) {
  return t ? (const cucap_tracked_fn *)hmap_get(&t->fns, handle) : NULL;
}

void cucap_tracker_fn_mark_own_function(cucap_tracker *t, uint64_t handle) {
  cucap_tracked_fn *f = t ? (cucap_tracked_fn *)hmap_get(&t->fns, handle) : NULL;
  if (f)
    atomic_store_explicit(&f->own_function_recorded, 1, memory_order_relaxed);
}

/* Removes the functions of module, and the functions obtained from those
 * (cuKernelGetFunction: module = the CUkernel), so that a handle value the
 * driver reuses after an unload is learned again. */
static void fn_remove_module_locked(cucap_tracker *t, uint64_t module) {
  htab *tb = atomic_load_explicit(&t->fns.tab, memory_order_relaxed);
  if (!tb)
    return;
  uint64_t *gone = NULL;
  size_t ngone = 0, cgone = 0;
  for (size_t i = 0; i < tb->cap; i++) {
    const cucap_tracked_fn *f =
        (const cucap_tracked_fn *)atomic_load_explicit(&tb->slots[i].val, memory_order_relaxed);
    if (f && f->module == module) {
      /* on OOM the functions obtained from this one stay */
      (void)CUCAP_VEC_RESERVE(gone, cgone, ngone + 1, 64);
      if (ngone < cgone)
        gone[ngone++] = f->handle;
      atomic_store_explicit(&tb->slots[i].val, 0, memory_order_release);
      retire(t, (void *)f);
    }
  }
  for (size_t i = 0; ngone && i < tb->cap; i++) {
    const cucap_tracked_fn *f =
        (const cucap_tracked_fn *)atomic_load_explicit(&tb->slots[i].val, memory_order_relaxed);
    for (size_t k = 0; f && k < ngone; k++)
      if (f->module == gone[k]) {
        atomic_store_explicit(&tb->slots[i].val, 0, memory_order_release);
        retire(t, (void *)f);
        break;
      }
  }
  free(gone);
}

void cucap_tracker_fn_remove_module(cucap_tracker *t, uint64_t module) {
  if (!t)
    return;
  pthread_mutex_lock(&t->wmu);
  fn_remove_module_locked(t, module);
  pthread_mutex_unlock(&t->wmu);
}

/* --------------------------------------------------------------- modules */

cucap_status cucap_tracker_module_add(cucap_tracker *t,
                                      const cucap_tracked_module *m,
                                      const void *image) {
  CUCAP_RETURN_IF(!t || !m || !m->handle, CUCAP_ERR_INVALID_ARG);
  mod_entry *e = calloc(1, sizeof *e);
  CUCAP_RETURN_IF(!e, CUCAP_ERR_NOMEM);
  e->m = *m;
  if (image && m->image_size) {
    e->image = malloc(m->image_size);
    if (!e->image) {
      free(e);
      return CUCAP_ERR_NOMEM;
    }
    memcpy(e->image, image, m->image_size);
  }
  pthread_mutex_lock(&t->wmu);
  uintptr_t old;
  cucap_status st = hmap_put(t, &t->mods, m->handle, (uintptr_t)e, &old);
  pthread_mutex_unlock(&t->wmu);
  if (st != CUCAP_OK) {
    free(e->image);
    free(e);
  } else if (old) {
    /* module entries are only read under wmu, so they can go right away */
    free(((mod_entry *)old)->image);
    free((void *)old);
  }
  return st;
}

int cucap_tracker_module_find(cucap_tracker *t, uint64_t handle,
                              cucap_tracked_module *out) {
  if (!t)
    return 0;
  pthread_mutex_lock(&t->wmu);
  const mod_entry *e = (const mod_entry *)hmap_get(&t->mods, handle);
  if (e && out)
    *out = e->m;
  pthread_mutex_unlock(&t->wmu);
  return e != NULL;
}

cucap_status cucap_tracker_module_params(cucap_tracker *t, uint64_t module,
                                         const char *kernel,
                                         cucap_param_layout *out, size_t max,
                                         size_t *count, uint32_t *total_bytes) {
  CUCAP_RETURN_IF(!t || !kernel, CUCAP_ERR_INVALID_ARG);
  cucap_status st = CUCAP_ERR_NOT_FOUND;
  pthread_mutex_lock(&t->wmu);
  const mod_entry *e = (const mod_entry *)hmap_get(&t->mods, module);
  if (e && e->image)
    st = cucap_image_kernel_params(e->image, e->m.image_size, kernel, out, max,
                                   count, total_bytes);
  pthread_mutex_unlock(&t->wmu);
  return st;
}

void cucap_tracker_module_remove(cucap_tracker *t, uint64_t handle) {
  if (!t || !handle)
    return;
  pthread_mutex_lock(&t->wmu);
  uintptr_t old = 0;
  (void)hmap_put(t, &t->mods, handle, 0, &old);
  fn_remove_module_locked(t, handle);
  pthread_mutex_unlock(&t->wmu);
  if (old) {
    free(((mod_entry *)old)->image);
    free((void *)old);
  }
}

/* ------------------------------------------------------- streams, events */

#define FLAGS_PRESENT ((uintptr_t)1 << 40)

static cucap_status flags_add(cucap_tracker *t, hmap *m, uint64_t h, uint32_t flags) {
  CUCAP_RETURN_IF(!t, CUCAP_ERR_INVALID_ARG);
  pthread_mutex_lock(&t->wmu);
  uintptr_t old;
  cucap_status st = hmap_put(t, m, h, FLAGS_PRESENT | flags, &old);
  pthread_mutex_unlock(&t->wmu);
  return st;
}

static int flags_find(cucap_tracker *t, hmap *m, uint64_t h, uint32_t *flags) {
  if (!t)
    return 0;
  uintptr_t v = hmap_get(m, h);
  if (v && flags)
    *flags = (uint32_t)v;
  return v != 0;
}

static void flags_remove(cucap_tracker *t, hmap *m, uint64_t h) {
  if (!t || !h)
    return;
  pthread_mutex_lock(&t->wmu);
  uintptr_t old;
  (void)hmap_put(t, m, h, 0, &old);
  pthread_mutex_unlock(&t->wmu);
}

cucap_status cucap_tracker_stream_add(cucap_tracker *t, uint64_t h, uint32_t flags) {
  return t ? flags_add(t, &t->streams, h, flags) : CUCAP_ERR_INVALID_ARG;
}
int cucap_tracker_stream_find(cucap_tracker *t, uint64_t h, uint32_t *flags) {
  return t ? flags_find(t, &t->streams, h, flags) : 0;
}
void cucap_tracker_stream_remove(cucap_tracker *t, uint64_t h) {
  if (t)
    flags_remove(t, &t->streams, h);
}
cucap_status cucap_tracker_event_add(cucap_tracker *t, uint64_t h, uint32_t flags) {
  return t ? flags_add(t, &t->events, h, flags) : CUCAP_ERR_INVALID_ARG;
}
int cucap_tracker_event_find(cucap_tracker *t, uint64_t h, uint32_t *flags) {
  return t ? flags_find(t, &t->events, h, flags) : 0;
}
void cucap_tracker_event_remove(cucap_tracker *t, uint64_t h) {
  if (t)
    flags_remove(t, &t->events, h);
}
