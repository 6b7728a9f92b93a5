/* hooks.c - libcucap's entry-path plumbing (owner: helper "interpose"):
 *  (a) the exported cu* wrappers (generated/wrappers.c) call
 *      cucap_call_enter/cucap_call_exit defined here;
 *  (b) dlsym is interposed: a lookup of a cu* name we wrap returns our
 *      wrapper, from any handle;
 *  (c) cuGetProcAddress / cuGetProcAddress_v2 map the real pointer back to the
 *      exported symbol and return our wrapper for it (including the
 *      self-lookup cudart does); cuGetExportTable is passed through and noted.
 * The real libcuda is dlopen'ed (never linked). See interpose_internal.h. */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_log.h"
#include "interpose_internal.h"

#define CUCAP_EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------ real dlsym */

typedef void *(*dlsym_fn)(void *, const char *);
static dlsym_fn g_real_dlsym;

static void init_real_dlsym(void) {
  if (g_real_dlsym)
    return;
  dlsym_fn f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (!f)
    f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  g_real_dlsym = f;
}

void *cucap_real_dlsym(void *handle, const char *name) {
  init_real_dlsym();
  return g_real_dlsym ? g_real_dlsym(handle, name) : NULL;
}

/* RTLD_NEXT must be resolved relative to the *caller's* object, which glibc
 * finds from the return address - that would be us. Walk the link map from
 * the caller's object instead: the first later object that itself defines
 * the symbol wins (as for RTLD_NEXT). Link-map entries are not valid dlsym
 * handles, so each object is re-opened with RTLD_NOLOAD. */
static void *dlsym_next_from(const void *caller, const char *name) {
  Dl_info info;
  struct link_map *lm = NULL;
  if (!dladdr1(caller, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
    return NULL;
  for (struct link_map *l = lm->l_next; l; l = l->l_next) {
    if (!l->l_name || !l->l_name[0])
      continue;
    void *h = dlopen(l->l_name, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
      continue;
    void *p = g_real_dlsym(h, name);
    dlclose(h);
    struct link_map *def = NULL;
    if (p && dladdr1(p, &info, (void **)&def, RTLD_DL_LINKMAP) && def == l)
      return p;
  }
  return NULL;
}

CUCAP_EXPORT void *dlsym(void *handle, const char *name) {
  init_real_dlsym();
  if (!g_real_dlsym)
    return NULL;
  /* glibc declares name nonnull; an app may still pass NULL: test it via a
   * volatile copy so the check is not optimised away. */
  const char *volatile vname = name;
  if (vname && name[0] == 'c' && name[1] == 'u') {
    void *w = cucap_wrapper_lookup(name);
    if (w)
      return w;
  }
  if (handle == RTLD_NEXT)
    return dlsym_next_from(__builtin_return_address(0), name);
  return g_real_dlsym(handle, name);
}

/* ------------------------------------------------------------ real libcuda */

static atomic_int g_real_ready;
static pthread_once_t g_real_once = PTHREAD_ONCE_INIT;
static __thread int t_in_real_init;
static void *g_libcuda;

/* real function pointer -> api index, sorted by pointer (built once). */
typedef struct ptr_api {
  uintptr_t p;
  uint32_t api;
} ptr_api;
static ptr_api g_ptrmap[CUCAP_API_COUNT];
static size_t g_nptrmap;

static int cmp_ptr_api(const void *a, const void *b) {
  const ptr_api *x = a, *y = b;
  if (x->p != y->p)
    return x->p < y->p ? -1 : 1;
  return x->api < y->api ? -1 : (x->api > y->api);
}

static void real_init_once(void) {
  init_real_dlsym();
  const char *name = getenv("CUCAP_REAL_LIBCUDA");
  if (!name || !*name)
    name = "libcuda.so.1";
  void *h = dlopen(name, RTLD_NOW | RTLD_NOLOAD);
  if (!h)
    h = dlopen(name, RTLD_NOW);
  if (!h) {
    CUCAP_ERROR("cannot load the real %s: %s (CUDA calls will fail)", name, dlerror());
  } else if (g_real_dlsym) {
    void **slots = CUCAP_REAL_SLOTS;
    for (size_t i = 0; i < CUCAP_API_COUNT; i++) {
      void *p = g_real_dlsym(h, cucap_api_table[i].symbol);
      /* A libcuda that lacks the symbol may resolve to ours through its
       * dependencies' scope: never call ourselves. */
      if (p == cucap_wrapper_ptrs[i])
        p = NULL;
      slots[i] = p;
      if (p) {
        g_ptrmap[g_nptrmap].p = (uintptr_t)p;
        g_ptrmap[g_nptrmap].api = (uint32_t)i;
        g_nptrmap++;
      }
    }
    qsort(g_ptrmap, g_nptrmap, sizeof g_ptrmap[0], cmp_ptr_api);
  }
  g_libcuda = h;
  atomic_store_explicit(&g_real_ready, 1, memory_order_release);
}

void cucap_real_init(void) {
  if (atomic_load_explicit(&g_real_ready, memory_order_acquire) || t_in_real_init)
    return;
  t_in_real_init = 1;
  pthread_once(&g_real_once, real_init_once);
  t_in_real_init = 0;
}

static int real_ptr_to_api(const void *p) {
  size_t lo = 0, hi = g_nptrmap;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (g_ptrmap[mid].p < (uintptr_t)p)
      lo = mid + 1;
    else
      hi = mid;
  }
  /* aliases: the first (lowest api index) entry with this address */
  return lo < g_nptrmap && g_ptrmap[lo].p == (uintptr_t)p ? (int)g_ptrmap[lo].api : -1;
}

void *cucap_wrapper_lookup(const char *symbol) {
  int i = cucap_api_find(symbol);
  return i >= 0 ? cucap_wrapper_ptrs[i] : NULL;
}

/* ------------------------------------------------------------ per call */

int cucap_call_enter(cucap_call *c, uint32_t api) {
  if (__builtin_expect(!atomic_load_explicit(&g_real_ready, memory_order_acquire), 0))
    cucap_real_init();
  if (!cucap_rec_active())
    return 0;
  cucap_rec_thread *th = cucap_rec_thread_get();
  if (!th || th->depth)
    return 0;
  th->depth = 1;
  c->th = th;
  c->api = api;
  c->cbid = cucap_api_table[api].cbid;
  c->variant = cucap_api_table[api].variant;
  c->nargs = 0;
  c->b = th->call_b;
  cucap_fbb_reset(c->b);
  c->body_type = 0;
  c->body = 0;
  c->stack = 0;
  c->drop = 0;
  th->audit_expect = c->cbid;
  c->t_enter = cucap_rec_now();
  return 1;
}

static atomic_int g_build_errors;

void cucap_call_exit(cucap_call *c, CUresult r) {
  uint64_t t_exit = cucap_rec_now();
  if (!c->drop) {
    cucap_fbb *b = c->b;
    uint32_t n = c->nargs > CUCAP_MAX_ARGS ? CUCAP_MAX_ARGS : c->nargs;
    cucap_fb_ref args = n ? cucap_fbb_vector(b, c->args, n, 8, 8) : 0;
    cucap_fb_record_start(b);
    cucap_fb_record_add_seq(b, 0); /* patched by cucap_rec_append_call */
    cucap_fb_record_add_tid(b, c->th->tid);
    cucap_fb_record_add_t_enter(b, c->t_enter);
    cucap_fb_record_add_t_exit(b, t_exit);
    cucap_fb_record_add_call(b, c->cbid);
    if (c->variant)
      cucap_fb_record_add_variant(b, c->variant);
    cucap_fb_record_add_result(b, (int32_t)r);
    if (args)
      cucap_fb_record_add_args(b, args);
    if (c->stack)
      cucap_fb_record_add_stack(b, c->stack);
    if (c->body_type && c->body)
      cucap_fb_record_add_body(b, c->body_type, c->body);
    cucap_fb_ref rec = cucap_fb_record_end(b);
    size_t size = 0;
    uint8_t *buf = (uint8_t *)cucap_fbb_finish(b, rec, 1, &size);
    cucap_status st = buf ? cucap_rec_append_call(buf, size, c->cbid, NULL) : CUCAP_ERR_NOMEM;
    if (st != CUCAP_OK && st != CUCAP_ERR_STATE && atomic_fetch_add(&g_build_errors, 1) < 3)
      CUCAP_ERROR("recording %s failed: %s", cucap_api_table[c->api].symbol,
                  cucap_status_str(st));
  }
  c->th->depth = 0;
}

/* ------------------------------------------------------------ hooks */

/* custom_table.txt: cuInit post=cucap_fw_init_post. The FileHeader is
 * written before the driver is up: note the driver version once. */
void cucap_fw_init_post(cucap_call *c, CUresult r, unsigned int Flags) {
  (void)c;
  (void)Flags;
  int v = 0;
  if (r == CUDA_SUCCESS && cucap_real.cuDriverGetVersion &&
      cucap_real.cuDriverGetVersion(&v) == CUDA_SUCCESS)
    cucap_rec_set_driver_version(v);
}

static atomic_int g_unwrapped;

static void *map_proc(const char *symbol, void *real) {
  if (!real)
    return real;
  int i = real_ptr_to_api(real);
  if (i < 0) {
    Dl_info di;
    if (dladdr(real, &di) && di.dli_sname && di.dli_saddr == real)
      i = cucap_api_find(di.dli_sname);
  }
  if (i >= 0)
    return cucap_wrapper_ptrs[i];
  int n = atomic_fetch_add(&g_unwrapped, 1);
  if (n < 16)
    CUCAP_DEBUG("cuGetProcAddress(%s): returning the real entry point unwrapped",
                symbol ? symbol : "(null)");
  if (cucap_rec_active())
    cucap_rec_note("unwrapped", symbol, (uint64_t)(uintptr_t)real, NULL, 0);
  return real;
}

CUCAP_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn,
                                                  int cudaVersion, cuuint64_t flags,
                                                  CUdriverProcAddressQueryResult *symbolStatus) {
  cucap_call c;
  int rec = cucap_call_enter(&c, CUCAP_API_cuGetProcAddress_v2);
  CUresult r = cucap_real.cuGetProcAddress_v2
                   ? cucap_real.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus)
                   : CUDA_ERROR_NOT_FOUND;
  if (r == CUDA_SUCCESS && pfn)
    *pfn = map_proc(symbol, *pfn);
  if (rec) {
    c.args[0] = (uint64_t)(uintptr_t)symbol;
    c.args[1] = (uint64_t)(uintptr_t)pfn;
    c.args[2] = (uint64_t)cudaVersion;
    c.args[3] = (uint64_t)flags;
    c.args[4] = (uint64_t)(uintptr_t)symbolStatus;
    c.nargs = 5;
    cucap_call_exit(&c, r);
  }
  return r;
}

CUCAP_EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn,
                                               int cudaVersion, cuuint64_t flags) {
  cucap_call c;
  int rec = cucap_call_enter(&c, CUCAP_API_cuGetProcAddress);
  CUresult r = cucap_real.cuGetProcAddress
                   ? cucap_real.cuGetProcAddress(symbol, pfn, cudaVersion, flags)
                   : CUDA_ERROR_NOT_FOUND;
  if (r == CUDA_SUCCESS && pfn)
    *pfn = map_proc(symbol, *pfn);
  if (rec) {
    c.args[0] = (uint64_t)(uintptr_t)symbol;
    c.args[1] = (uint64_t)(uintptr_t)pfn;
    c.args[2] = (uint64_t)cudaVersion;
    c.args[3] = (uint64_t)flags;
    c.nargs = 4;
    cucap_call_exit(&c, r);
  }
  return r;
}

CUCAP_EXPORT CUresult CUDAAPI cuGetExportTable(const void **ppExportTable,
                                               const CUuuid *pExportTableId) {
  cucap_call c;
  int rec = cucap_call_enter(&c, CUCAP_API_cuGetExportTable);
  CUresult r = cucap_real.cuGetExportTable
                   ? cucap_real.cuGetExportTable(ppExportTable, pExportTableId)
                   : CUDA_ERROR_NOT_FOUND;
  if (rec) {
    if (pExportTableId)
      cucap_rec_note("export_table", NULL,
                     ppExportTable ? (uint64_t)(uintptr_t)*ppExportTable : 0,
                     pExportTableId->bytes, sizeof pExportTableId->bytes);
    c.args[0] = (uint64_t)(uintptr_t)ppExportTable;
    c.args[1] = (uint64_t)(uintptr_t)pExportTableId;
    c.nargs = 2;
    cucap_call_exit(&c, r);
  }
  return r;
}

/* ------------------------------------------------------------ lifetime */

__attribute__((constructor)) static void cucap_interpose_init(void) {
  init_real_dlsym();
  cucap_rec_start("libcucap", CUDA_VERSION);
  if (cucap_rec_active() && cucap_rec_opts()->audit) {
    /* CUPTI's own driver calls during setup are not the app's */
    cucap_rec_thread *th = cucap_rec_thread_get();
    if (th)
      th->depth++;
    cucap_audit_start();
    if (th)
      th->depth--;
  }
}

__attribute__((destructor)) static void cucap_interpose_fini(void) {
  cucap_rec_shutdown();
}
