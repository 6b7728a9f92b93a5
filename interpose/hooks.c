/* hooks.c - libcucap's entry-path plumbing:
 *  (a) the exported cu* wrappers (generated/wrappers.c) call
 *      cucap_call_enter/cucap_call_exit defined here;
 *  (b) dlsym is interposed: a lookup of a cu* name we wrap returns our
 *      wrapper, from any handle;
 *  (c) cuGetProcAddress / cuGetProcAddress_v2 map the real pointer back to the
 *      exported symbol and return our wrapper for it (including the
 *      self-lookup cudart does); cuGetExportTable is passed through and noted.
 * The real libcuda is dlopen'ed (never linked). See interpose_internal.h.
 *
 * CUPTI (ours for --audit, or the app's own) reaches the driver through
 * dlsym too: a cu* lookup made from inside libcupti* gets the *real* entry
 * point, so CUPTI's internal driver calls are never recorded as the app's
 * and never re-enter the recorder while it is being set up. */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_knobs.h"
#include "cucap_sort.h"
#include "cucap_hash.h"
#include "cucap_log.h"
#include "cucap_rec_query.h"
#include "interpose_internal.h"

#define CUCAP_EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------ real dlsym */

typedef void *(*dlsym_fn)(void *, const char *);
/* Read by the dlsym trampoline below (hence not static). */
__attribute__((visibility("hidden"))) dlsym_fn cucap_g_real_dlsym;
#define g_real_dlsym cucap_g_real_dlsym

/* dlsym runs before sanitizer runtimes have initialised (ASan and TSan
 * resolve their interceptors with it): the functions on its path must not be
 * instrumented (TSan's function-entry hook crashed there). */
#define CUCAP_NO_SANITIZE __attribute__((no_sanitize("address", "undefined", "thread")))

CUCAP_NO_SANITIZE static void init_real_dlsym(void) {
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


/* 1 if the return address ra lies in a libcupti* object. dladdr takes the
 * loader lock (recursive) - fine: only for cu* names we wrap, not hot. */
static int caller_is_cupti(const void *ra) {
  Dl_info di;
  if (!dladdr(ra, &di) || !di.dli_fname)
    return 0;
  const char *base = strrchr(di.dli_fname, '/');
  base = base ? base + 1 : di.dli_fname;
  return strncmp(base, "libcupti", 8) == 0;
}

/* The exported dlsym is a trampoline. dlsym(RTLD_NEXT, ...) must resolve
 * relative to the *caller's* object, which glibc finds from its return
 * address: RTLD_NEXT lookups therefore jump (not call) into the real dlsym,
 * which sees the original caller. That path allocates nothing and opens
 * nothing, because it runs very early (sanitizer runtimes look up their
 * interceptors' targets with it during start-up, before any constructor of
 * ours). Every other lookup jumps into cucap_dlsym_impl, where
 * __builtin_return_address(0) is still the original caller. Consequence:
 * dlsym(RTLD_NEXT, "cu...") returns the next definition, never our wrapper. */
__attribute__((visibility("hidden"), used)) void cucap_dlsym_init(void);
__attribute__((visibility("hidden"), used)) void *
cucap_dlsym_impl(void *handle, const char *name);

CUCAP_NO_SANITIZE void cucap_dlsym_init(void) { init_real_dlsym(); }

__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        ".p2align 4\n"
        "dlsym:\n"
        "  cmpq $-1, %rdi\n" /* RTLD_NEXT == (void *)-1 */
        "  jne cucap_dlsym_impl\n"
        "  movq cucap_g_real_dlsym(%rip), %rax\n"
        "  testq %rax, %rax\n"
        "  jnz 1f\n"
        "  pushq %rdi\n"
        "  pushq %rsi\n"
        "  subq $8, %rsp\n" /* keep the ABI's 16-byte alignment for the call */
        "  call cucap_dlsym_init\n"
        "  addq $8, %rsp\n"
        "  popq %rsi\n"
        "  popq %rdi\n"
        "  movq cucap_g_real_dlsym(%rip), %rax\n"
        "  testq %rax, %rax\n"
        "  jz 2f\n"
        "1:\n"
        "  jmp *%rax\n"
        "2:\n"
        "  xorl %eax, %eax\n"
        "  ret\n"
        ".size dlsym, .-dlsym\n");

CUCAP_NO_SANITIZE void *cucap_dlsym_impl(void *handle, const char *name) {
  init_real_dlsym();
  if (!g_real_dlsym)
    return NULL;
  /* glibc declares name nonnull; an app may still pass NULL: test it via a
   * volatile copy so the check is not optimised away. */
  const char *volatile vname = name;
  if (vname && name[0] == 'c' && name[1] == 'u') {
    void *w = cucap_wrapper_lookup(name);
    if (w && !caller_is_cupti(__builtin_return_address(0)))
      return w;
  }
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
  const char *name = cucap_knob_str(CUCAP_KNOB(CUCAP_REAL_LIBCUDA));
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
    cucap_sort(g_ptrmap, g_nptrmap, sizeof g_ptrmap[0], cmp_ptr_api);
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

/* Starts the call's overhead statistics when they are on. */
static void call_stats_start(cucap_call *c) {
  c->stats = cucap_rec_stats_on;
  if (__builtin_expect(c->stats, 0)) {
    c->st0 = cucap_rec_stats_clock();
    c->st_real0 = c->st_real1 = 0;
  }
}

/* A thread's first intercepted call: resolves the real entry points and
 * creates the thread's state; the first call of the process also opens
 * the capture. NULL when not recording. */
static cucap_rec_thread *thread_first_call(void) {
  if (!atomic_load_explicit(&g_real_ready, memory_order_acquire))
    cucap_real_init();
  if (!cucap_rec_active() && !cucap_rec_activate())
    return NULL;
  return cucap_rec_thread_get();
}

int cucap_call_enter_at(cucap_call *c, uint32_t api, uintptr_t call_site) {
  call_stats_start(c);
  cucap_rec_thread *th = cucap_rec_tls; /* lean: recording, state exists */
  if (__builtin_expect(!th || !cucap_rec_lean_on(), 0))
    th = cucap_rec_thread_peek();
  if (__builtin_expect(!th, 0) && !(th = thread_first_call()))
    return 0;
  if (th->depth)
    return 0;
  th->depth = 1;
  th->call_site = call_site;
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
  c->after_append = NULL;
  th->audit_expect = c->cbid;
  c->t_enter = cucap_rec_now();
  cucap_rec_query_tick(th, c->t_enter);
  return 1;
}

int cucap_query_enter(cucap_call *c, uint32_t api) {
  call_stats_start(c);
  cucap_rec_thread *th = cucap_rec_thread_peek();
  if (__builtin_expect(!th, 0) && !(th = thread_first_call()))
    return 0;
  if (th->depth)
    return 0;
  th->depth = 1;
  th->audit_expect = cucap_api_table[api].cbid;
  c->th = th;
  c->api = api;
  return 1;
}

int cucap_query_exit(cucap_call *c, CUresult r) {
  cucap_rec_thread *th = c->th;
  if (__builtin_expect(cucap_rec_query_count(th, c->api, (int)r), 1)) {
    if (__builtin_expect(c->stats, 0)) {
      uint64_t total = cucap_rec_stats_clock() - c->st0;
      uint64_t real = c->st_real1 > c->st_real0 ? c->st_real1 - c->st_real0 : 0;
      cucap_rec_stats_call(c->api, total > real ? total - real : 0, 0);
    }
    th->depth = 0;
    return 1;
  }
  /* not countable: the caller records it (cucap_call_exit) */
  cucap_query_to_call(c);
  return 0;
}

void cucap_query_to_call(cucap_call *c) {
  cucap_rec_thread *th = c->th;
  c->cbid = cucap_api_table[c->api].cbid;
  c->variant = cucap_api_table[c->api].variant;
  c->nargs = 0;
  c->b = th->call_b;
  cucap_fbb_reset(c->b);
  c->body_type = 0;
  c->body = 0;
  c->stack = 0;
  c->drop = 0;
  c->after_append = NULL;
  c->t_enter = cucap_rec_now();
  cucap_rec_query_tick(th, c->t_enter);
}

static atomic_int g_build_errors;
static atomic_int g_devices_done;
/* CUCAP_SLOW_RECORDS=1: build every Record with the generic builder (tests
 * compare both paths). Read once by the constructor. */
static int g_slow_records;

/* One Devices record (format 1.1) after the first successful cuInit: the
 * FileHeader is written before the driver is up. Queried through cucap_real
 * (guard held: nothing is recorded, --audit does not count them). Any query
 * that fails leaves its field absent. */
static void emit_devices(void) {
  if (atomic_exchange(&g_devices_done, 1))
    return;
  cucap_fbb *b = cucap_rec_builder();
  if (!b)
    return;
  cucap_fbb_reset(b);
  int ver = 0, n = 0;
  int have_ver = cucap_real.cuDriverGetVersion &&
                 cucap_real.cuDriverGetVersion(&ver) == CUDA_SUCCESS;
  if (!cucap_real.cuDeviceGetCount || cucap_real.cuDeviceGetCount(&n) != CUDA_SUCCESS)
    n = 0;
  enum { MAXDEV = 64 };
  if (n > MAXDEV)
    n = MAXDEV;
  cucap_fb_ref refs[MAXDEV];
  size_t nref = 0;
  for (int i = 0; i < n; i++) {
    CUdevice d = 0;
    if (!cucap_real.cuDeviceGet || cucap_real.cuDeviceGet(&d, i) != CUDA_SUCCESS)
      continue;
    char name[256] = "", pci[64] = "";
    cucap_fb_ref name_r = 0, pci_r = 0, uuid_r = 0;
    if (cucap_real.cuDeviceGetName &&
        cucap_real.cuDeviceGetName(name, (int)sizeof name - 1, d) == CUDA_SUCCESS)
      name_r = cucap_fbb_string(b, name, strnlen(name, sizeof name - 1));
    if (cucap_real.cuDeviceGetPCIBusId &&
        cucap_real.cuDeviceGetPCIBusId(pci, (int)sizeof pci - 1, d) == CUDA_SUCCESS)
      pci_r = cucap_fbb_string(b, pci, strnlen(pci, sizeof pci - 1));
    CUuuid uuid;
    if ((cucap_real.cuDeviceGetUuid_v2 &&
         cucap_real.cuDeviceGetUuid_v2(&uuid, d) == CUDA_SUCCESS) ||
        (cucap_real.cuDeviceGetUuid && cucap_real.cuDeviceGetUuid(&uuid, d) == CUDA_SUCCESS))
      uuid_r = cucap_fbb_vector(b, uuid.bytes, sizeof uuid.bytes, 1, 1);
    int maj = -1, min = -1, sms = -1;
    if (cucap_real.cuDeviceGetAttribute) {
      if (cucap_real.cuDeviceGetAttribute(&maj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d))
        maj = -1;
      if (cucap_real.cuDeviceGetAttribute(&min, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d))
        min = -1;
      if (cucap_real.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d))
        sms = -1;
    }
    size_t mem = 0, gran = 0;
    int have_mem = cucap_real.cuDeviceTotalMem_v2 &&
                   cucap_real.cuDeviceTotalMem_v2(&mem, d) == CUDA_SUCCESS;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = d;
    int have_gran = cucap_real.cuMemGetAllocationGranularity &&
                    cucap_real.cuMemGetAllocationGranularity(
                        &gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS;
    cucap_fb_device_props_start(b);
    cucap_fb_device_props_add_ordinal(b, i);
    if (name_r)
      cucap_fb_device_props_add_name(b, name_r);
    if (uuid_r)
      cucap_fb_device_props_add_uuid(b, uuid_r);
    if (maj >= 0)
      cucap_fb_device_props_add_cc_major(b, maj);
    if (min >= 0)
      cucap_fb_device_props_add_cc_minor(b, min);
    if (have_mem)
      cucap_fb_device_props_add_total_mem(b, (uint64_t)mem);
    if (sms >= 0)
      cucap_fb_device_props_add_sm_count(b, sms);
    if (pci_r)
      cucap_fb_device_props_add_pci_bus_id(b, pci_r);
    if (have_gran)
      cucap_fb_device_props_add_va_granularity(b, (uint64_t)gran);
    refs[nref++] = cucap_fb_device_props_end(b);
  }
  cucap_fb_ref dv = cucap_fbb_vector_refs(b, refs, nref);
  cucap_fb_devices_start(b);
  if (have_ver)
    cucap_fb_devices_add_driver_version(b, ver);
  cucap_fb_devices_add_devices(b, dv);
  cucap_fb_ref body = cucap_fb_devices_end(b);
  cucap_status st = cucap_rec_emit(b, CUCAP_FB_BODY_DEVICES, body, 0);
  if (st != CUCAP_OK && st != CUCAP_ERR_STATE) /* STATE: reported by the recorder */
    CUCAP_ERROR("recording the Devices record failed: %s", cucap_status_str(st));
  cucap_fbb_reset(b);
}

/* Fast path for the common Record without a body: the size-prefixed
 * FlatBuffer is laid out by hand (front to back) instead of through the
 * generic builder (~700 -> ~60 instructions per call). Any valid layout is
 * fine: readers go through the verifier and field accessors. Layout (offsets
 * from the size prefix; everything 8-aligned as the writer requires):
 *    0 u32 size-4 | 4 u32 root uoffset (-> 40) | 8 vtable: u16 vsize=28,
 *   u16 tsize=64, u16 off[12] (0 = absent) | 36 pad | 40 table: i32 soffset
 *   (=32) | 44 tid | 48 seq | 56 t_enter | 64 t_exit | 72 context | 80 call |
 *   84 result | 88 args uoffset | 92 stack | 96 variant | 97 pad |
 *   104 pad | 108 u32 nargs | 112 args[nargs] (u64). */
enum {
  FR_T = 40, FR_TSIZE = 64, FR_VEC = 108, FR_ELEMS = 112,
  FR_MAX = FR_ELEMS + 8 * CUCAP_MAX_ARGS
};

static size_t fast_record(uint8_t *buf, const cucap_call *c, uint64_t t_exit,
                          CUresult r, uint64_t ctx) {
  uint32_t n = c->nargs > CUCAP_MAX_ARGS ? CUCAP_MAX_ARGS : c->nargs;
  size_t size = n ? FR_ELEMS + 8 * (size_t)n : FR_VEC - 4;
  memset(buf, 0, FR_ELEMS);
  uint32_t u32;
  int32_t i32;
  uint16_t vt[14] = {28, FR_TSIZE,
                     /* seq */ 48 - FR_T, /* tid */ 44 - FR_T,
                     /* t_enter */ 56 - FR_T, /* t_exit */ 64 - FR_T,
                     /* call */ 80 - FR_T, /* variant */ c->variant ? 96 - FR_T : 0,
                     /* result */ 84 - FR_T, /* args */ n ? 88 - FR_T : 0,
                     /* stack */ c->stack ? 92 - FR_T : 0, /* body_type */ 0,
                     /* body */ 0, /* context */ ctx ? 72 - FR_T : 0};
  u32 = (uint32_t)(size - 4);
  memcpy(buf, &u32, 4);
  u32 = FR_T - 4;
  memcpy(buf + 4, &u32, 4);
  memcpy(buf + 8, vt, sizeof vt);
  i32 = FR_T - 8;
  memcpy(buf + FR_T, &i32, 4);
  memcpy(buf + 44, &c->th->tid, 4);
  /* seq (48) stays 0: patched by cucap_rec_append_call */
  memcpy(buf + 56, &c->t_enter, 8);
  memcpy(buf + 64, &t_exit, 8);
  memcpy(buf + 72, &ctx, 8);
  memcpy(buf + 80, &c->cbid, 4);
  i32 = (int32_t)r;
  memcpy(buf + 84, &i32, 4);
  if (n) {
    u32 = FR_VEC - 88; /* uoffset from the field to the vector's length */
    memcpy(buf + 88, &u32, 4);
    memcpy(buf + FR_VEC, &n, 4);
    memcpy(buf + FR_ELEMS, c->args, 8 * (size_t)n);
  }
  memcpy(buf + 92, &c->stack, 4);
  buf[96] = c->variant;
  return size;
}

void cucap_call_exit(cucap_call *c, CUresult r) {
  uint64_t t_exit = cucap_rec_now();
  uint64_t seq = 0;
  int slow = 0;
  if (!c->drop) {
    /* Record.context: the thread's current context after the call (for
     * cuCtxSetCurrent/Push/Pop/Create: the new one). A TLS read in the
     * driver; not an app call, so --audit must not count it. */
    CUcontext ctx = NULL;
    c->th->audit_expect = 0;
    if (cucap_real.cuCtxGetCurrent)
      cucap_real.cuCtxGetCurrent(&ctx);
    if (!(c->body_type && c->body) && !g_slow_records) {
      _Alignas(8) uint8_t fbuf[FR_MAX];
      size_t fsize = fast_record(fbuf, c, t_exit, r, (uint64_t)(uintptr_t)ctx);
      cucap_status st = cucap_rec_append_call_at(fbuf, fsize, 48, c->cbid, &seq);
      if (st != CUCAP_OK && st != CUCAP_ERR_STATE && atomic_fetch_add(&g_build_errors, 1) < 3)
        CUCAP_ERROR("recording %s failed: %s", cucap_api_table[c->api].symbol,
                    cucap_status_str(st));
      if (st != CUCAP_OK)
        seq = 0;
      goto done;
    }
    slow = 1;
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
    if (ctx)
      cucap_fb_record_add_context(b, (uint64_t)(uintptr_t)ctx);
    cucap_fb_ref rec = cucap_fb_record_end(b);
    size_t size = 0;
    uint8_t *buf = (uint8_t *)cucap_fbb_finish(b, rec, 1, &size);
    cucap_status st = buf ? cucap_rec_append_call(buf, size, c->cbid, &seq) : CUCAP_ERR_NOMEM;
    if (st != CUCAP_OK)
      seq = 0;
    if (st != CUCAP_OK && st != CUCAP_ERR_STATE && atomic_fetch_add(&g_build_errors, 1) < 3)
      CUCAP_ERROR("recording %s failed: %s", cucap_api_table[c->api].symbol,
                  cucap_status_str(st));
  }
done:
  if (c->after_append)
    c->after_append(c->after_arg, seq);
  /* after the cuInit Record, so the Devices record follows it in the file */
  if (__builtin_expect(c->api == CUCAP_API_cuInit, 0) && r == CUDA_SUCCESS)
    emit_devices();
  if (__builtin_expect(c->stats, 0)) {
    uint64_t total = cucap_rec_stats_clock() - c->st0;
    uint64_t real = c->st_real1 > c->st_real0 ? c->st_real1 - c->st_real0 : 0;
    cucap_rec_stats_call(c->api, total > real ? total - real : 0, slow);
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

/* The wrapper for a pointer the real cuGetProcAddress returned, or the
 * pointer itself (*unwrapped = 1) when it maps to no exported symbol. */
static void *map_proc(const char *symbol, void *real, int *unwrapped) {
  *unwrapped = 0;
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
  *unwrapped = 1;
  int n = atomic_fetch_add(&g_unwrapped, 1);
  if (n < 16)
    CUCAP_DEBUG("cuGetProcAddress(%s): returning the real entry point unwrapped",
                symbol ? symbol : "(null)");
  return real;
}

/* Lookups already recorded, by (name, cudaVersion, flags, result, what the
 * app got back): cudart, cuBLAS and cuDNN each resolve hundreds of entry
 * points, some again and again; a repeated lookup is counted (QueryCounts)
 * instead of recorded - its Record would say nothing new (the name is in the
 * first one's Note). Lock-free set of 64-bit keys; full: recorded. A key
 * collision (2^-64 per pair) only means one lookup counted that should have
 * been recorded: what the app gets back never depends on this set. */
#define PROC_SEEN 4096
static _Atomic uint64_t g_proc_seen[PROC_SEEN];

static uint64_t proc_key(const char *symbol, int version, cuuint64_t flags, CUresult r,
                         void **pfn, const CUdriverProcAddressQueryResult *status) {
  uint64_t v[5] = {(uint64_t)(uint32_t)version, (uint64_t)flags,
                   (uint64_t)(uint32_t)r | (status ? (uint64_t)(uint32_t)*status << 32 : 0),
                   pfn && r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pfn : 0,
                   symbol ? cucap_hash64_of(symbol, strnlen(symbol, 256)) : 0};
  uint64_t k = cucap_hash64_of(v, sizeof v);
  return k ? k : 1;
}

/* 1 if key was in the set; else adds it (when there is room) and returns 0. */
static int proc_seen(uint64_t key) {
  size_t j = (size_t)(key >> 20) & (PROC_SEEN - 1);
  for (size_t i = 0; i < 64; i++, j = (j + 1) & (PROC_SEEN - 1)) {
    uint64_t k = atomic_load_explicit(&g_proc_seen[j], memory_order_relaxed);
    if (k == key)
      return 1;
    if (k == 0) {
      if (atomic_compare_exchange_strong(&g_proc_seen[j], &k, key))
        return 0;
      if (k == key)
        return 1;
    }
  }
  return 0;
}

/* The looked-up name as the call's body, Note {kind "proc", text = symbol,
 * value = cudaVersion}, so that dumps can say what was asked for. */
static void proc_note(cucap_call *c, const char *symbol, int version) {
  if (!symbol)
    return;
  cucap_fbb *b = c->b;
  cucap_fb_ref k = cucap_fbb_string(b, "proc", 4);
  cucap_fb_ref t = cucap_fbb_string(b, symbol, strnlen(symbol, 256));
  cucap_fb_note_start(b);
  cucap_fb_note_add_kind(b, k);
  cucap_fb_note_add_text(b, t);
  cucap_fb_note_add_value(b, (uint64_t)(int64_t)version);
  c->body = cucap_fb_note_end(b);
  c->body_type = CUCAP_FB_BODY_NOTE;
}

/* After the real lookup (guard held, entered like a pure query): 1 when it
 * was counted; else c is ready for cucap_call_exit with the Note body. */
static int proc_after(cucap_call *c, const char *symbol, void **pfn, int version,
                      cuuint64_t flags, const CUdriverProcAddressQueryResult *status,
                      CUresult r, int unwrapped) {
  if (proc_seen(proc_key(symbol, version, flags, r, pfn, status)) && cucap_query_end(c, r))
    return 1;
  cucap_query_to_call(c);
  if (unwrapped)
    cucap_rec_note("unwrapped", symbol, (uint64_t)(uintptr_t)*pfn, NULL, 0);
  c->args[0] = (uint64_t)(uintptr_t)symbol;
  c->args[1] = (uint64_t)(uintptr_t)pfn;
  c->args[2] = (uint64_t)version;
  c->args[3] = (uint64_t)flags;
  c->nargs = 4;
  proc_note(c, symbol, version);
  return 0;
}

CUCAP_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn,
                                                  int cudaVersion, cuuint64_t flags,
                                                  CUdriverProcAddressQueryResult *symbolStatus) {
  cucap_call c;
  int rec = cucap_query_begin(&c, CUCAP_API_cuGetProcAddress_v2);
  if (rec)
    CUCAP_REAL_BEGIN(&c);
  CUresult r = cucap_real.cuGetProcAddress_v2
                   ? cucap_real.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus)
                   : CUDA_ERROR_NOT_FOUND;
  if (rec)
    CUCAP_REAL_END(&c);
  int unwrapped = 0;
  if (r == CUDA_SUCCESS && pfn)
    *pfn = map_proc(symbol, *pfn, &unwrapped);
  if (rec && !proc_after(&c, symbol, pfn, cudaVersion, flags, symbolStatus, r, unwrapped)) {
    c.args[4] = (uint64_t)(uintptr_t)symbolStatus;
    c.nargs = 5;
    cucap_call_exit(&c, r);
  }
  return r;
}

CUCAP_EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn,
                                               int cudaVersion, cuuint64_t flags) {
  cucap_call c;
  int rec = cucap_query_begin(&c, CUCAP_API_cuGetProcAddress);
  if (rec)
    CUCAP_REAL_BEGIN(&c);
  CUresult r = cucap_real.cuGetProcAddress
                   ? cucap_real.cuGetProcAddress(symbol, pfn, cudaVersion, flags)
                   : CUDA_ERROR_NOT_FOUND;
  if (rec)
    CUCAP_REAL_END(&c);
  int unwrapped = 0;
  if (r == CUDA_SUCCESS && pfn)
    *pfn = map_proc(symbol, *pfn, &unwrapped);
  if (rec && !proc_after(&c, symbol, pfn, cudaVersion, flags, NULL, r, unwrapped))
    cucap_call_exit(&c, r);
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

static const char *api_name(size_t i) {
  return i < CUCAP_API_COUNT ? cucap_api_table[i].symbol : NULL;
}

__attribute__((constructor)) static void cucap_interpose_init(void) {
  init_real_dlsym();
  /* Arms only: the capture (and, with --audit, the CUPTI subscription) is
   * set up at the process's first intercepted CUDA call, before that call
   * reaches the driver. */
  g_slow_records = cucap_knob_flag(CUCAP_KNOB(CUCAP_SLOW_RECORDS));
  cucap_rec_start("libcucap", CUDA_VERSION);
  if (cucap_rec_opts()->audit)
    cucap_rec_on_activate(cucap_audit_start);
  /* pure queries: per-thread counts (cucap_rec_query.h) */
  static uint32_t cbids[CUCAP_API_COUNT];
  static uint8_t variants[CUCAP_API_COUNT];
  for (size_t i = 0; i < CUCAP_API_COUNT; i++) {
    cbids[i] = cucap_api_table[i].cbid;
    variants[i] = cucap_api_table[i].variant;
  }
  cucap_rec_query_init(CUCAP_API_COUNT, cbids, variants);
  if (cucap_knob_raw(CUCAP_KNOB(CUCAP_OUTPUT)) &&
      (cucap_rec_opts()->stats || cucap_knob_flag(CUCAP_KNOB(CUCAP_STATS)))) {
    cucap_rec_stats_init(1, CUCAP_API_COUNT, api_name);
    cucap_rec_at_exit(cucap_rec_stats_report);
  }
}

__attribute__((destructor)) static void cucap_interpose_fini(void) {
  cucap_rec_shutdown();
}
