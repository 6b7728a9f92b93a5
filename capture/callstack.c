/* callstack.c - host callstack capture, dedup and module maps. See cucap_callstack.h.
 *
 * Fast path (a stack seen before on this thread): walk + XXH3-64 of the
 * frames + probe of a thread-local direct-mapped cache. Slow path (new on
 * this thread): a global hash table under a mutex; a stack new to the process
 * also emits its Callstack record (and a ModuleMap first when needed). */
#include "cucap_callstack.h"

#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <unwind.h>

#include "cucap_hash.h"
#include "cucap_log.h"
#include "cucap_rec_stats.h"
#include "cucap_recorder.h"
#include "cucap_schema.h"

/* ---------------------------------------------------------- own object */

/* Address range of the shared object holding this code (libcucap.so), so
 * the innermost frames (our wrapper and hook) can be dropped. Left empty when
 * we are linked into the main executable (unit tests): nothing is skipped. */
static uintptr_t g_self_lo, g_self_hi;
static pthread_once_t g_self_once = PTHREAD_ONCE_INIT;

static int self_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  uintptr_t me = (uintptr_t)arg;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD)
      continue;
    uintptr_t s = info->dlpi_addr + ph->p_vaddr, e = s + ph->p_memsz;
    if (s < lo)
      lo = s;
    if (e > hi)
      hi = e;
  }
  if (me >= lo && me < hi) {
    if (info->dlpi_name && info->dlpi_name[0]) { /* "" = main executable */
      g_self_lo = lo;
      g_self_hi = hi;
    }
    return 1;
  }
  return 0;
}

static void self_init(void) {
  dl_iterate_phdr(self_cb, (void *)(uintptr_t)&self_init);
}

static inline int in_self(uintptr_t pc) { return pc >= g_self_lo && pc < g_self_hi; }

/* ---------------------------------------------------------------- walks */

static __thread uintptr_t t_stack_hi; /* 0 = unknown, 1 = unavailable */

static uintptr_t stack_hi(void) {
  if (t_stack_hi)
    return t_stack_hi;
  pthread_attr_t a;
  void *addr = NULL;
  size_t sz = 0;
  t_stack_hi = 1;
  if (pthread_getattr_np(pthread_self(), &a) == 0) {
    if (pthread_attr_getstack(&a, &addr, &sz) == 0 && addr)
      t_stack_hi = (uintptr_t)addr + sz;
    pthread_attr_destroy(&a);
  }
  return t_stack_hi;
}

__attribute__((noinline)) static size_t walk_fp(uint64_t *frames, size_t max) {
  uintptr_t hi = stack_hi();
  if (hi <= 1)
    return 0;
  uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
  uintptr_t lo = fp;
  size_t n = 0;
  int skipping = 1;
  for (size_t guard = 0; n < max && guard < 256; guard++) {
    /* every frame lies between our own frame and the top of the stack, and
     * frames only go up: a broken chain (code without frame pointers) stops
     * the walk instead of reading wild memory */
    if (fp < lo || fp > hi - 2 * sizeof(uintptr_t) || (fp & 7))
      break;
    uintptr_t next = ((const uintptr_t *)fp)[0];
    uintptr_t ret = ((const uintptr_t *)fp)[1];
    if (ret < 4096)
      break;
    if (skipping && !in_self(ret))
      skipping = 0;
    if (!skipping)
      frames[n++] = ret;
    if (next <= fp)
      break;
    fp = next;
  }
  return n;
}

typedef struct uw_state {
  uint64_t *frames;
  size_t n, max;
  int skipping;
} uw_state;

static _Unwind_Reason_Code uw_cb(struct _Unwind_Context *ctx, void *arg) {
  uw_state *s = arg;
  uintptr_t ip = _Unwind_GetIP(ctx);
  if (!ip)
    return _URC_END_OF_STACK;
  if (s->skipping && !in_self(ip))
    s->skipping = 0;
  if (!s->skipping) {
    if (s->n >= s->max)
      return _URC_END_OF_STACK;
    s->frames[s->n++] = ip;
  }
  return _URC_NO_REASON;
}

__attribute__((noinline)) static size_t walk_unwind(uint64_t *frames, size_t max) {
  uw_state s = {frames, 0, max, 1};
  _Unwind_Backtrace(uw_cb, &s);
  /* the first frame is walk_unwind's caller inside us when not skipped */
  return s.n;
}

size_t cucap_callstack_walk(int mode, uint64_t *frames, size_t max) {
  pthread_once(&g_self_once, self_init);
  if (!frames || !max)
    return 0;
  if (max > CUCAP_CALLSTACK_MAX_DEPTH)
    max = CUCAP_CALLSTACK_MAX_DEPTH;
  if (mode == CUCAP_REC_STACK_UNWIND)
    return walk_unwind(frames, max);
  if (mode == CUCAP_REC_STACK_FP)
    return walk_fp(frames, max);
  return 0;
}

/* ------------------------------------------------------------ module map */

typedef struct obj_range {
  uintptr_t lo, hi;
} obj_range;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static obj_range *g_objs; /* under g_mu */
static size_t g_nobjs;
static int g_map_emitted;

typedef struct scan_ctx {
  cucap_fbb *b;
  cucap_fb_ref *refs;
  size_t n, cap;
  obj_range *ranges;
  int failed;
} scan_ctx;

static size_t build_id_of(const struct dl_phdr_info *info, const uint8_t **out) {
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE)
      continue;
    const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
    size_t off = 0, len = ph->p_memsz;
    while (off + sizeof(ElfW(Nhdr)) <= len) {
      ElfW(Nhdr) nh;
      memcpy(&nh, p + off, sizeof nh);
      size_t name_off = off + sizeof nh;
      size_t desc_off = name_off + ((nh.n_namesz + 3) & ~(size_t)3);
      size_t next = desc_off + ((nh.n_descsz + 3) & ~(size_t)3);
      if (next > len || next <= off)
        break;
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
          memcmp(p + name_off, "GNU", 4) == 0) {
        *out = p + desc_off;
        return nh.n_descsz;
      }
      off = next;
    }
  }
  return 0;
}

static int scan_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  scan_ctx *s = arg;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD)
      continue;
    uintptr_t a = info->dlpi_addr + ph->p_vaddr, e = a + ph->p_memsz;
    if (a < lo)
      lo = a;
    if (e > hi)
      hi = e;
  }
  if (hi == 0)
    return 0;
  if (s->n == s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 64;
    cucap_fb_ref *nr = realloc(s->refs, nc * sizeof *nr);
    obj_range *no = realloc(s->ranges, nc * sizeof *no);
    if (nr)
      s->refs = nr;
    if (no)
      s->ranges = no;
    if (!nr || !no) {
      s->failed = 1;
      return 1;
    }
    s->cap = nc;
  }
  char exe[4096];
  const char *path = info->dlpi_name;
  if (!path || !path[0]) {
    ssize_t r = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[r > 0 ? r : 0] = 0;
    path = exe;
  }
  const uint8_t *bid = NULL;
  size_t bidn = build_id_of(info, &bid);
  cucap_fb_ref ps = cucap_fbb_string(s->b, path, strlen(path));
  cucap_fb_ref bs = bidn ? cucap_fb_loaded_object_create_build_id(s->b, bid, bidn) : 0;
  cucap_fb_loaded_object_start(s->b);
  cucap_fb_loaded_object_add_path(s->b, ps);
  if (bs)
    cucap_fb_loaded_object_add_build_id(s->b, bs);
  cucap_fb_loaded_object_add_base(s->b, info->dlpi_addr);
  cucap_fb_loaded_object_add_start(s->b, lo);
  cucap_fb_loaded_object_add_end(s->b, hi);
  s->refs[s->n] = cucap_fb_loaded_object_end(s->b);
  s->ranges[s->n] = (obj_range){lo, hi};
  s->n++;
  return 0;
}

/* The loader's load/unload counters: the module map only needs re-scanning
 * when they moved. Frames outside every known object are usually not new
 * libraries but garbage from a frame-pointer walk through code built without
 * frame pointers (libpython, libtorch); re-emitting the map for each of those
 * cost PyTorch a third of its step time. */
static unsigned long long g_map_adds = ~0ull, g_map_subs = ~0ull;

static int loader_counts_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  unsigned long long *v = arg;
  if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
    v[0] = info->dlpi_adds;
    v[1] = info->dlpi_subs;
  }
  return 1; /* the counters are global: the first object is enough */
}

static void loader_counts(unsigned long long v[2]) {
  v[0] = v[1] = ~0ull - 1; /* unknown: never equal to a recorded value */
  dl_iterate_phdr(loader_counts_cb, v);
}

/* g_mu held */
static cucap_status emit_map_locked(void) {
  unsigned long long counts[2];
  loader_counts(counts);
  cucap_fbb *b = cucap_fbb_create(16384);
  CUCAP_RETURN_IF(!b, CUCAP_ERR_NOMEM);
  scan_ctx s = {b, NULL, 0, 0, NULL, 0};
  dl_iterate_phdr(scan_cb, &s);
  cucap_status st = CUCAP_ERR_NOMEM;
  if (!s.failed) {
    cucap_fb_ref v = cucap_fbb_vector_refs(b, s.refs, s.n);
    cucap_fb_module_map_start(b);
    cucap_fb_module_map_add_objects(b, v);
    cucap_fb_ref mm = cucap_fb_module_map_end(b);
    st = cucap_rec_emit(b, CUCAP_FB_BODY_MODULEMAP, mm, 0);
    free(g_objs);
    g_objs = s.ranges;
    g_nobjs = s.n;
    s.ranges = NULL;
    g_map_emitted = 1;
    g_map_adds = counts[0];
    g_map_subs = counts[1];
  }
  free(s.refs);
  free(s.ranges);
  cucap_fbb_destroy(b);
  return st;
}

/* g_mu held: a module-map (re)scan, timed for --stats */
static cucap_status emit_map_timed_locked(void) {
  if (__builtin_expect(!cucap_rec_stats_on, 1))
    return emit_map_locked();
  uint64_t t0 = cucap_rec_stats_clock();
  cucap_status st = emit_map_locked();
  cucap_rec_stats_add(CUCAP_STATS_MODMAP_SCAN, cucap_rec_stats_clock() - t0);
  return st;
}

cucap_status cucap_callstack_emit_module_map(void) {
  pthread_mutex_lock(&g_mu);
  cucap_status st = emit_map_timed_locked();
  pthread_mutex_unlock(&g_mu);
  return st;
}

static int known_frame(uintptr_t pc) {
  for (size_t i = 0; i < g_nobjs; i++)
    if (pc >= g_objs[i].lo && pc < g_objs[i].hi)
      return 1;
  return 0;
}

/* ----------------------------------------------------------------- dedup */

typedef struct id_slot {
  uint64_t hash; /* 0 = empty (a zero hash is remapped to 1) */
  uint32_t id;
} id_slot;

static id_slot *g_ids; /* under g_mu, open addressing */
static size_t g_ids_cap, g_ids_used;
static uint32_t g_next_id = 1;

#define TCACHE 256
static __thread id_slot t_cache[TCACHE];

/* g_mu held. Returns the id and sets *is_new; 0 on OOM. */
static uint32_t intern_locked(uint64_t h, int *is_new) {
  *is_new = 0;
  if ((g_ids_used + 1) * 2 > g_ids_cap) {
    size_t nc = g_ids_cap ? g_ids_cap * 2 : 1024;
    id_slot *n = calloc(nc, sizeof *n);
    if (!n)
      return 0;
    for (size_t i = 0; i < g_ids_cap; i++) {
      if (!g_ids[i].hash)
        continue;
      size_t j = (size_t)g_ids[i].hash & (nc - 1);
      while (n[j].hash)
        j = (j + 1) & (nc - 1);
      n[j] = g_ids[i];
    }
    free(g_ids);
    g_ids = n;
    g_ids_cap = nc;
  }
  size_t j = (size_t)h & (g_ids_cap - 1);
  while (g_ids[j].hash) {
    if (g_ids[j].hash == h)
      return g_ids[j].id;
    j = (j + 1) & (g_ids_cap - 1);
  }
  g_ids[j].hash = h;
  g_ids[j].id = g_next_id++;
  g_ids_used++;
  *is_new = 1;
  return g_ids[j].id;
}

static uint32_t stack_id(void);

uint32_t cucap_rec_stack_id(void) {
  if (__builtin_expect(!cucap_rec_stats_on, 1))
    return stack_id();
  uint64_t t0 = cucap_rec_stats_clock();
  uint32_t id = stack_id();
  cucap_rec_stats_add(CUCAP_STATS_STACK_WALK, cucap_rec_stats_clock() - t0);
  return id;
}

static uint32_t stack_id(void) {
  if (!cucap_rec_active())
    return 0;
  const cucap_rec_options *o = cucap_rec_opts();
  if (o->stack == CUCAP_REC_STACK_OFF)
    return 0;
  uint64_t frames[CUCAP_CALLSTACK_MAX_DEPTH];
  size_t max = o->stack_depth > 0 ? (size_t)o->stack_depth : 32;
  size_t n = cucap_callstack_walk(o->stack, frames, max);
  if (n == 0)
    return 0;
  uint64_t h = cucap_hash64_of(frames, n * sizeof frames[0]);
  if (!h)
    h = 1;
  id_slot *c = &t_cache[(h >> 7) & (TCACHE - 1)];
  if (c->hash == h)
    return c->id;

  pthread_mutex_lock(&g_mu);
  int is_new = 0;
  uint32_t id = intern_locked(h, &is_new);
  if (id && is_new) {
    int unknown = !g_map_emitted;
    for (size_t i = 0; i < n && !unknown; i++)
      unknown = !known_frame((uintptr_t)frames[i]);
    if (unknown && g_map_emitted) {
      unsigned long long now[2];
      loader_counts(now);
      unknown = now[0] != g_map_adds || now[1] != g_map_subs;
    }
    if (unknown) {
      /* a frame outside every known object and the loader's set changed:
       * something was dlopen'ed */
      if (emit_map_timed_locked() != CUCAP_OK)
        CUCAP_DEBUG("callstack: module map not recorded");
    }
    cucap_fbb *b = cucap_fbb_create(64 + n * 8);
    if (b) {
      cucap_fb_ref fr = cucap_fb_callstack_create_frames(b, frames, n);
      cucap_fb_callstack_start(b);
      cucap_fb_callstack_add_id(b, id);
      cucap_fb_callstack_add_frames(b, fr);
      cucap_fb_ref cs = cucap_fb_callstack_end(b);
      if (cucap_rec_emit(b, CUCAP_FB_BODY_CALLSTACK, cs, 0) != CUCAP_OK)
        CUCAP_DEBUG("callstack: record not emitted");
      cucap_fbb_destroy(b);
    }
  }
  pthread_mutex_unlock(&g_mu);
  if (id) {
    c->hash = h;
    c->id = id;
  }
  return id;
}
