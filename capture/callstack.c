/* callstack.c - host callstack capture and dedup. See cucap_callstack.h;
 * the module map is callstack_map.c.
 *
 * Fast path (a stack seen before on this thread): walk + XXH3-64 of the
 * frames + probe of a thread-local direct-mapped cache. Slow path (new on
 * this thread): a global hash table under a mutex; a stack new to the process
 * also emits its Callstack record (and a ModuleMap first when needed).
 *
 * The frame-pointer walk accepts a return address only inside an executable
 * segment of a loaded object (g_xmap, an immutable sorted snapshot swapped
 * atomically at each module-map scan) and stops at the first one outside:
 * code built without frame pointers (libcudart, libtorch) leaves %rbp
 * holding a stack address, whose "frames" carry data words (heap pointers,
 * counters) as return addresses. Kept, they made nearly every PyTorch launch
 * a new stack (slow path, a Callstack record each, an order of magnitude
 * slower per walk than a program with real frame pointers; the classes
 * launch and launch_junk of bench/bench_record_mock.c show the two). A
 * walk stopped by an unknown address asks the loader whether objects were
 * added (dlopen) when its stack is new, and every 1024th time on a thread
 * otherwise; a changed loader state rescans the map and walks again. */
#include "cucap_sort.h"
#include "cucap_callstack.h"

#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <unwind.h>

#include "callstack_internal.h"
#include "cucap_hash.h"
#include "cucap_lines.h"
#include "cucap_log.h"
#include "cucap_rec_stats.h"
#include "cucap_recorder.h"
#include "cucap_schema.h"
#include "cucap_vec.h"

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

/* ------------------------------------------------------ executable map */

typedef struct xmap {
  struct xmap *older; /* superseded maps stay valid (walks may hold them) */
  uint64_t gen;       /* 1, 2, ...: tags the per-thread page cache */
  size_t n;
  uintptr_t r[]; /* n pairs lo, hi: executable segments, sorted by lo */
} xmap;

static _Atomic(xmap *) g_xmap;

typedef struct xscan {
  uintptr_t *r;
  size_t n, cap;
  int failed;
} xscan;

static int xscan_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  xscan *x = arg;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || !ph->p_memsz)
      continue;
    /* x->r holds [start, end) pairs: cap counts pairs */
    if (!cucap_vec_reserve(&x->r, &x->cap, x->n + 1, 2 * sizeof *x->r, 256)) {
      x->failed = 1;
      return 1;
    }
    x->r[2 * x->n] = info->dlpi_addr + ph->p_vaddr;
    x->r[2 * x->n + 1] = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
    x->n++;
  }
  return 0;
}

static int cmp_range(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

/* Builds a new executable map and publishes it (callers serialise). */
static void xmap_rebuild(void) {
  xscan x = {NULL, 0, 0, 0};
  dl_iterate_phdr(xscan_cb, &x);
  xmap *m = x.failed ? NULL : malloc(sizeof *m + x.n * 2 * sizeof(uintptr_t));
  if (m) {
    m->n = x.n;
    if (x.n)
      memcpy(m->r, x.r, x.n * 2 * sizeof(uintptr_t));
    cucap_sort(m->r, m->n, 2 * sizeof(uintptr_t), cmp_range);
    m->older = atomic_load_explicit(&g_xmap, memory_order_relaxed);
    m->gen = m->older ? m->older->gen + 1 : 1;
    atomic_store_explicit(&g_xmap, m, memory_order_release);
  }
  free(x.r);
}

static pthread_mutex_t g_xmu = PTHREAD_MUTEX_INITIALIZER;

void cs_xmap_rescan(void) {
  pthread_mutex_lock(&g_xmu);
  xmap_rebuild();
  pthread_mutex_unlock(&g_xmu);
}

static const xmap *xmap_get(void) {
  xmap *m = atomic_load_explicit(&g_xmap, memory_order_acquire);
  if (__builtin_expect(m != NULL, 1))
    return m;
  pthread_mutex_lock(&g_xmu);
  if (!atomic_load_explicit(&g_xmap, memory_order_acquire))
    xmap_rebuild();
  pthread_mutex_unlock(&g_xmu);
  return atomic_load_explicit(&g_xmap, memory_order_acquire);
}

/* Pages found executable: (page << 16) | (map gen & 0xffff), direct-mapped.
 * A walk checks a handful of return addresses, mostly on the same few pages.
 * Shared by all threads (a thread-local array costs a __tls_get_addr per
 * access in a shared object); written only on a miss, relaxed: a lost or
 * stale entry only costs a binary search. */
#define XPAGES 256
static _Atomic uint64_t g_xpage[XPAGES];

/* 1 if pc lies in an executable segment; *hint: the index that matched last
 * (frames of one stack cluster in a few objects). */
static inline int xmap_has(const xmap *m, uintptr_t pc, size_t *hint) {
  uint64_t tag = ((uint64_t)(pc >> 12) << 16) | (m->gen & 0xffff);
  _Atomic uint64_t *slot = &g_xpage[(pc >> 12) & (XPAGES - 1)];
  if (atomic_load_explicit(slot, memory_order_relaxed) == tag)
    return 1;
  size_t h = *hint;
  if (h < m->n && pc >= m->r[2 * h] && pc < m->r[2 * h + 1]) {
    atomic_store_explicit(slot, tag, memory_order_relaxed);
    return 1;
  }
  size_t lo = 0, hi = m->n;
  while (lo < hi) { /* last range starting at or below pc */
    size_t mid = (lo + hi) / 2;
    if (m->r[2 * mid] <= pc)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo && pc < m->r[2 * (lo - 1) + 1]) {
    *hint = lo - 1;
    atomic_store_explicit(slot, tag, memory_order_relaxed);
    return 1;
  }
  return 0;
}

/* ---------------------------------------------------------------- walks */

/* 0 = unknown, 1 = unavailable; initial-exec: read by every walk */
static __thread uintptr_t t_stack_hi __attribute__((tls_model("initial-exec")));

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

/* How a frame-pointer walk ended (what the chain cache must reproduce). */
enum {
  END_BOUNDS = 0, /* the next frame address left [start, stack top) or was misaligned */
  END_LOW = 1,    /* the last frame read held a return address below 4096 */
  END_CODE = 2,   /* ... one outside every executable segment (*unknown) */
  END_UP = 3,     /* ... a next-frame link that does not go up */
  END_MAX = 4,    /* the frame limit was reached */
  END_GUARD = 5   /* 256 frames read (never cached) */
};

/* The frames a walk read: per frame its two words (next-frame link, return
 * address), in walk order, plus how it ended. Filled by walk_fp when asked
 * (the thread's chain cache, below). */
#define SC_VIS 48 /* frames read (ours included) a cached chain may hold */
typedef struct fp_chain {
  size_t nvis;      /* frames read; more than SC_VIS: not cacheable */
  int end;          /* END_* */
  uintptr_t v[2 * SC_VIS];
} fp_chain;

/* *unknown: the walk stopped at a return address outside every executable
 * segment known to g_xmap. prev[0..nprev): the thread's previous stack, whose
 * frames need no check where they recur at the same depth; *same: the walk
 * found exactly prev. fp0: the first frame read (0: walk_fp's own). */
/* Not instrumented: the walk reads stack words of frames it cannot know
 * (code without frame pointers may leave %rbp anywhere in the stack, e.g.
 * in a sanitizer's redzone); bounds are checked against the thread's stack. */
__attribute__((noinline, no_sanitize("address"))) static size_t walk_fp(
    uintptr_t fp0, uint64_t *frames, size_t max, int *unknown, const uint64_t *prev,
    size_t nprev, int *same, fp_chain *ch) {
  uintptr_t hi = stack_hi();
  if (hi <= 1)
    return 0;
  const xmap *xm = xmap_get();
  *same = 1;
  uintptr_t fp = fp0 ? fp0 : (uintptr_t)__builtin_frame_address(0);
  uintptr_t lo = fp;
  size_t n = 0, hint = 0, v = 0;
  int skipping = 1, end = END_GUARD;
  for (size_t guard = 0; guard < 256; guard++) {
    if (n >= max) {
      end = END_MAX;
      break;
    }
    /* every frame lies between our own frame and the top of the stack, and
     * frames only go up: a broken chain (code without frame pointers) stops
     * the walk instead of reading wild memory */
    if (fp < lo || fp > hi - 2 * sizeof(uintptr_t) || (fp & 7)) {
      end = END_BOUNDS;
      break;
    }
    uintptr_t next = ((const uintptr_t *)fp)[0];
    uintptr_t ret = ((const uintptr_t *)fp)[1];
    if (ch && v < SC_VIS) {
      ch->v[2 * v] = next;
      ch->v[2 * v + 1] = ret;
    }
    v++;
    if (ret < 4096) {
      end = END_LOW;
      break;
    }
    if (skipping && !in_self(ret))
      skipping = 0;
    if (!skipping && !(n < nprev && prev[n] == ret)) {
      *same = 0;
      if (xm && !xmap_has(xm, ret, &hint)) {
        *unknown = 1; /* a data word, or code loaded since the last scan */
        end = END_CODE;
        break;
      }
    }
    if (!skipping)
      frames[n++] = ret;
    if (next <= fp) {
      end = END_UP;
      break;
    }
    fp = next;
  }
  if (n != nprev)
    *same = 0;
  if (ch) {
    ch->nvis = v;
    ch->end = end;
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

static size_t walk(int mode, uintptr_t fp0, uint64_t *frames, size_t max, int *unknown,
                   const uint64_t *prev, size_t nprev, int *same, fp_chain *ch) {
  pthread_once(&g_self_once, self_init);
  *unknown = *same = 0;
  if (ch)
    ch->nvis = SC_VIS + 1; /* not cacheable unless walk_fp says otherwise */
  if (!frames || !max)
    return 0;
  if (max > CUCAP_CALLSTACK_MAX_DEPTH)
    max = CUCAP_CALLSTACK_MAX_DEPTH;
  if (mode == CUCAP_REC_STACK_UNWIND)
    return walk_unwind(frames, max);
  if (mode == CUCAP_REC_STACK_FP)
    return walk_fp(fp0, frames, max, unknown, prev, nprev, same, ch);
  return 0;
}

size_t cucap_callstack_walk(int mode, uint64_t *frames, size_t max) {
  int unknown, same;
  return walk(mode, 0, frames, max, &unknown, NULL, 0, &same, NULL);
}

/* ----------------------------------------------------------------- dedup */

typedef struct id_slot {
  uint64_t hash; /* 0 = empty (a zero hash is remapped to 1) */
  uint32_t id;
} id_slot;

static id_slot *g_ids; /* under cs_mu, open addressing */
static size_t g_ids_cap, g_ids_used;
static uint32_t g_next_id = 1;

#define TCACHE 256

/* cs_mu held. Returns the id and sets *is_new; 0 on OOM. */
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

/* The thread's previous stack and its id: a launch loop repeats it, and a
 * walk that finds it again needs no executable-map check, hash or cache
 * probe. */
typedef struct last_stack {
  size_t n;
  uint32_t id;
  unsigned unknown_walks; /* walks stopped by an unknown address */
  uint64_t frames[CUCAP_CALLSTACK_MAX_DEPTH];
} last_stack;

/* ---- the thread's chain cache ----
 *
 * A frame-pointer walk is a chain of dependent loads through the stack: on
 * a deep Python/PyTorch stack that is a cache miss per frame once the
 * stack lines have left L1 (the program runs between two launches; the
 * class launch_cold of bench/bench_record_mock.c, under
 * bench/record_cost_mock.sh, counts the misses). A chain
 * seen before is instead *verified*: a cached entry holds, for each frame the
 * walk read, the frame's address and its two words (next-frame link, return
 * address); the same words at the same addresses, from the same starting
 * frame, make the walk's result identical - the walk reads nothing else and
 * decides everything from these words, the thread's stack bounds, the
 * executable map (its generation is part of the entry) and the frame limit.
 * The addresses come from the entry, not from the loads, so the loads are
 * independent and overlap instead of chasing each other. Where the walk
 * stopped at a return address that is no code (END_LOW/END_CODE: a data
 * word left in %rbp by code without frame pointers, different at every
 * call), that last word is checked for the same verdict instead of equality.
 * Exact: a hit returns the id the walk would have produced; any difference
 * falls back to the walk, which then replaces an entry of the set. Entries
 * are found by the starting frame's address and the program's call site of
 * the wrapped call; 4 ways per set. */
#define SC_SETS 32
#define SC_WAYS 4
/* A set's tags share one cache line; the chain is read only on a tag match. */
typedef struct sc_tag {
  uintptr_t fp0;      /* first frame read (stack_id's); 0 = empty */
  uint32_t id;        /* the stack's id */
  uint32_t use;       /* last use (the thread's counter): replacement */
} sc_tag;
typedef struct sc_entry {
  uint64_t gen;       /* executable map generation the walk checked against */
  uint32_t max;       /* frame limit of the walk */
  uint16_t nvis;      /* frames read */
  uint8_t end;        /* END_* */
  uint8_t unknown;    /* the walk stopped at an unknown address */
  uintptr_t v[2 * SC_VIS]; /* per frame read: next link, return address */
} sc_entry;

/* Per-thread state of this module: heap-allocated (TLS arrays in a shared
 * object cost a __tls_get_addr call per access), reached through one
 * initial-exec pointer, freed at thread exit. */
typedef struct sc_thread {
  _Alignas(64) sc_tag tags[SC_SETS][SC_WAYS];
  sc_entry sets[SC_SETS][SC_WAYS];
  last_stack last;
  uint32_t clock;
  id_slot tcache[TCACHE];
} sc_thread;

static __thread sc_thread *t_sc __attribute__((tls_model("initial-exec")));
static __thread int t_sc_dead __attribute__((tls_model("initial-exec")));
static pthread_key_t g_sc_key;
static pthread_once_t g_sc_once = PTHREAD_ONCE_INIT;
static int g_sc_key_ok;

static void sc_free(void *p) {
  t_sc = NULL;
  t_sc_dead = 1;
  free(p);
}
static void sc_key_init(void) { g_sc_key_ok = pthread_key_create(&g_sc_key, sc_free) == 0; }

static sc_thread *sc_get(void) {
  sc_thread *t = t_sc;
  if (__builtin_expect(t != NULL, 1) || t_sc_dead)
    return t;
  pthread_once(&g_sc_once, sc_key_init);
  if (!g_sc_key_ok || !(t = cucap_lines_alloc(sizeof *t)))
    return NULL;
  t_sc = t;
  pthread_setspecific(g_sc_key, t);
  return t;
}

/* The set of the chain starting at fp0: from that position and the
 * program's call site of the wrapped call (cucap_rec_thread.call_site, set
 * by the wrapper; a hint: the chain's verification decides). */
static size_t sc_set_of(uintptr_t fp0) {
  cucap_rec_thread *th = cucap_rec_tls;
  uint64_t k = (uint64_t)fp0 * 0x9E3779B97F4A7C15ull + (th ? (uint64_t)th->call_site : 0);
  k = (k ^ (k >> 29)) * 0xBF58476D1CE4E5B9ull;
  return (size_t)(k >> 59) & (SC_SETS - 1);
}

/* 1 if the walk from fp0 would read exactly e's chain now (see above). */
__attribute__((no_sanitize("address"))) static int sc_match(const sc_entry *e, uintptr_t fp0,
                                                           const xmap *xm) {
  size_t nv = e->nvis;
  size_t full = e->end == END_LOW || e->end == END_CODE ? nv - 1 : nv;
  const uintptr_t *v = e->v;
  uintptr_t fp = fp0, diff = 0;
  for (size_t i = 0; i < full; i++) {
    const uintptr_t *f = (const uintptr_t *)fp;
    diff |= (f[0] ^ v[2 * i]) | (f[1] ^ v[2 * i + 1]);
    fp = v[2 * i]; /* the cached link: the next load does not wait for this one */
  }
  if (diff)
    return 0;
  if (full == nv)
    return 1;
  uintptr_t ret = ((const uintptr_t *)fp)[1];
  if (e->end == END_LOW)
    return ret < 4096;
  size_t hint = 0;
  return ret >= 4096 && !in_self(ret) && xm && !xmap_has(xm, ret, &hint);
}

static void sc_install(sc_thread *T, size_t set, uintptr_t fp0, uint64_t gen, size_t max,
                       const fp_chain *ch, int unknown, uint32_t id) {
  if (!id || ch->nvis == 0 || ch->nvis > SC_VIS || ch->end == END_GUARD)
    return;
  sc_tag *tg = T->tags[set];
  int k = 0;
  for (int i = 0; i < SC_WAYS; i++) { /* an empty way, else the least recently used */
    if (!tg[i].fp0) {
      k = i;
      break;
    }
    if (tg[i].use < tg[k].use)
      k = i;
  }
  sc_entry *e = &T->sets[set][k];
  tg[k].fp0 = fp0;
  tg[k].id = id;
  tg[k].use = ++T->clock;
  e->gen = gen;
  e->max = (uint32_t)max;
  e->nvis = (uint16_t)ch->nvis;
  e->end = (uint8_t)ch->end;
  e->unknown = (uint8_t)(unknown != 0);
  memcpy(e->v, ch->v, 2 * sizeof(uintptr_t) * ch->nvis);
}

static uint32_t stack_id_walk(last_stack *L, id_slot *tcache, const cucap_rec_options *o,
                              uintptr_t fp0, fp_chain *ch, int *cacheable);

/* noinline: its frame is where walks and cached chains start (fp0), the same
 * for every call from the same path. */
__attribute__((noinline)) static uint32_t stack_id(void) {
  if (!cucap_rec_active())
    return 0;
  const cucap_rec_options *o = cucap_rec_opts();
  if (o->stack == CUCAP_REC_STACK_OFF)
    return 0;
  if (__builtin_expect(!atomic_load_explicit(&cs_map_emitted, memory_order_acquire), 0)) {
    /* the first stack: the ModuleMap record, and the map the walk checks */
    pthread_mutex_lock(&cs_mu);
    if (!atomic_load(&cs_map_emitted))
      cs_rescan_locked();
    pthread_mutex_unlock(&cs_mu);
  }
  sc_thread *T = sc_get();
  if (!T)
    return 0;
  uintptr_t fp0 = (uintptr_t)__builtin_frame_address(0);
  size_t max = o->stack_depth > 0 ? (size_t)o->stack_depth : 32;
  if (max > CUCAP_CALLSTACK_MAX_DEPTH)
    max = CUCAP_CALLSTACK_MAX_DEPTH;
  if (o->stack != CUCAP_REC_STACK_FP) {
    int c;
    return stack_id_walk(&T->last, T->tcache, o, 0, NULL, &c);
  }
  pthread_once(&g_self_once, self_init);
  uintptr_t hi = stack_hi();
  if (hi <= 1)
    return 0;
  const xmap *xm = xmap_get();
  uint64_t gen = xm ? xm->gen : 0;
  size_t set = sc_set_of(fp0);
  sc_tag *tg = T->tags[set];
  for (int i = 0; i < SC_WAYS; i++) {
    if (tg[i].fp0 != fp0)
      continue;
    const sc_entry *e = &T->sets[set][i];
    if (e->gen != gen || e->max != max || !sc_match(e, fp0, xm))
      continue;
    if (e->unknown && (++T->last.unknown_walks & 1023) == 0) {
      /* a stopped walk, now and then, asks the loader (as in the walk) */
      pthread_mutex_lock(&cs_mu);
      int changed = cs_loader_changed_locked();
      if (changed)
        cs_rescan_locked();
      pthread_mutex_unlock(&cs_mu);
      if (changed) { /* a new map generation: every entry misses */
        xm = xmap_get();
        gen = xm ? xm->gen : 0;
        break;
      }
    }
    tg[i].use = ++T->clock;
    return tg[i].id;
  }
  fp_chain ch;
  int cacheable = 0;
  uint32_t id = stack_id_walk(&T->last, T->tcache, o, fp0, &ch, &cacheable);
  if (cacheable)
    sc_install(T, set, fp0, gen, max, &ch, ch.end == END_CODE, id);
  return id;
}

/* The walk and the thread-local and global dedup. *cacheable: the id is
 * that of the chain in *ch (no rescan changed the walk). */
static uint32_t stack_id_walk(last_stack *L, id_slot *tcache, const cucap_rec_options *o,
                              uintptr_t fp0, fp_chain *ch, int *cacheable) {
  uint64_t frames[CUCAP_CALLSTACK_MAX_DEPTH];
  size_t max = o->stack_depth > 0 ? (size_t)o->stack_depth : 32;
  int unknown = 0, same = 0;
  size_t n = walk(o->stack, fp0, frames, max, &unknown, L->frames, L->n, &same, ch);
  *cacheable = 1;
  if (unknown && (++L->unknown_walks & 1023) == 0) {
    /* a stopped walk, now and then: code dlopen'ed since the last scan? */
    pthread_mutex_lock(&cs_mu);
    int changed = cs_loader_changed_locked();
    if (changed)
      cs_rescan_locked();
    pthread_mutex_unlock(&cs_mu);
    if (changed) {
      n = walk(o->stack, fp0, frames, max, &unknown, NULL, 0, &same, NULL);
      *cacheable = 0;
    }
  }
  if (n == 0)
    return 0;
  if (same && L->id)
    return L->id;
  uint64_t h = cucap_hash64_of(frames, n * sizeof frames[0]);
  if (!h)
    h = 1;
  id_slot *c = &tcache[(h >> 7) & (TCACHE - 1)];
  uint32_t id = 0;
  if (c->hash == h) {
    id = c->id;
    goto done;
  }

  pthread_mutex_lock(&cs_mu);
  int is_new = 0;
  id = intern_locked(h, &is_new);
  if (id && is_new) {
    /* a new stack: a frame outside every known object (unwind mode) or a
     * walk stopped by an unknown address, and the loader's set changed:
     * something was dlopen'ed - rescan (and walk again: its frames
     * continue into the new code). The id stays that of the stack seen. */
    for (size_t i = 0; i < n && !unknown; i++)
      unknown = !cs_known_frame_locked((uintptr_t)frames[i]);
    if (unknown && cs_loader_changed_locked()) {
      cs_rescan_locked();
      *cacheable = 0;
      int u2 = 0, s2 = 0;
      size_t n2 = walk(o->stack, fp0, frames, max, &u2, NULL, 0, &s2, NULL);
      uint64_t h2 = n2 ? cucap_hash64_of(frames, n2 * sizeof frames[0]) : 0;
      if (n2 && h2 && h2 != h) {
        int new2 = 0;
        uint32_t id2 = intern_locked(h2, &new2);
        if (id2 && !new2) { /* seen before under its full form */
          pthread_mutex_unlock(&cs_mu);
          id = id2;
          n = n2;
          goto done;
        }
        if (id2) {
          id = id2;
          h = h2;
          n = n2;
          c = &tcache[(h >> 7) & (TCACHE - 1)];
        }
      }
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
  pthread_mutex_unlock(&cs_mu);
  if (id) {
    c->hash = h;
    c->id = id;
  }
done:
  if (id) {
    L->n = n;
    L->id = id;
    memcpy(L->frames, frames, n * sizeof frames[0]);
  }
  return id;
}
