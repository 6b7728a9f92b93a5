/* callstack_map.c - the module map of the host callstacks (see
 * cucap_callstack.h): the loaded objects (path, build id, load base, extent)
 * and the address space, emitted as a ModuleMap record at the first stack,
 * again when the loader's object set changed, and at exit; the object
 * ranges a walk's frames are checked against when it looks for new
 * libraries. The stack walks, their caches and the stack table live in
 * callstack.c, which calls in here under cs_mu (callstack_internal.h). */
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "callstack_internal.h"
#include "cucap_vec.h"
#include "cucap_addrspace.h"
#include "cucap_callstack.h"
#include "cucap_log.h"
#include "cucap_rec_stats.h"
#include "cucap_recorder.h"
#include "cucap_schema.h"

typedef struct obj_range {
  uintptr_t lo, hi;
} obj_range;

pthread_mutex_t cs_mu = PTHREAD_MUTEX_INITIALIZER;
static obj_range *g_objs; /* under cs_mu */
static size_t g_nobjs;
atomic_int cs_map_emitted;

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
  if (s->n == s->cap) { /* two arrays, one capacity: it grows once both did */
    size_t cr = s->cap, co = s->cap;
    if (!CUCAP_VEC_RESERVE(s->refs, cr, s->n + 1, 64) ||
        !CUCAP_VEC_RESERVE(s->ranges, co, s->n + 1, 64)) {
      s->failed = 1;
      return 1;
    }
    s->cap = cr; /* both grew alike */
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

static void final_map(void);

/* cs_mu held */
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
    cucap_fb_ref ranges = cucap_addrspace_build(b); /* 0: unreadable, left out */
    cucap_fb_module_map_start(b);
    cucap_fb_module_map_add_objects(b, v);
    if (ranges)
      cucap_fb_module_map_add_ranges(b, ranges);
    cucap_fb_ref mm = cucap_fb_module_map_end(b);
    st = cucap_rec_emit(b, CUCAP_FB_BODY_MODULEMAP, mm, 0);
    free(g_objs);
    g_objs = s.ranges;
    g_nobjs = s.n;
    s.ranges = NULL;
    if (!atomic_exchange(&cs_map_emitted, 1))
      cucap_rec_at_exit(final_map); /* the address space at the end, too */
    g_map_adds = counts[0];
    g_map_subs = counts[1];
  }
  cs_xmap_rescan(); /* the walks' executable map follows the same scan */
  free(s.refs);
  free(s.ranges);
  cucap_fbb_destroy(b);
  return st;
}

/* cs_mu held: a module-map (re)scan, timed for --stats */
static cucap_status emit_map_timed_locked(void) {
  if (__builtin_expect(!cucap_rec_stats_on, 1))
    return emit_map_locked();
  uint64_t t0 = cucap_rec_stats_clock();
  cucap_status st = emit_map_locked();
  cucap_rec_stats_add(CUCAP_STATS_MODMAP_SCAN, cucap_rec_stats_clock() - t0);
  return st;
}

/* At exit: one more map, so that memory mapped after the last scan (the
 * driver's device ranges, arenas of a long run) is in the capture's address
 * space (format 1.4 ranges; `cucap diff`). Stacks are all emitted by then:
 * no Callstack is symbolized with it. */
static void final_map(void) {
  if (cucap_callstack_emit_module_map() != CUCAP_OK)
    CUCAP_DEBUG("callstack: final module map not recorded");
}

cucap_status cucap_callstack_emit_module_map(void) {
  pthread_mutex_lock(&cs_mu);
  cucap_status st = emit_map_timed_locked();
  pthread_mutex_unlock(&cs_mu);
  return st;
}

int cs_known_frame_locked(uintptr_t pc) {
  for (size_t i = 0; i < g_nobjs; i++)
    if (pc >= g_objs[i].lo && pc < g_objs[i].hi)
      return 1;
  return 0;
}

/* cs_mu held: 1 if objects were loaded or unloaded since the last scan. */
int cs_loader_changed_locked(void) {
  unsigned long long now[2];
  loader_counts(now);
  return now[0] != g_map_adds || now[1] != g_map_subs;
}

/* cs_mu held: rescans the module map (and the executable map). */
void cs_rescan_locked(void) {
  if (emit_map_timed_locked() != CUCAP_OK)
    CUCAP_DEBUG("callstack: module map not recorded");
}
