/* replay_modkeep.c - module images kept loaded across replay passes.
 *
 * A multi-pass replay (--loop N, verify's extra passes, and above all
 * --profile, whose metric, PC-sampling and SASS passes re-run the same
 * window) would otherwise unload every module at the end of a pass and load
 * it again in the next: for a framework program reloading its modules is
 * most of a `replay --loop 3`, and a profile would pay again, in every
 * pass, for the lazy loading of each kernel at its first launch.
 * CUCAP_REPLAY_KEEP_MODULES=0 turns keeping off, to measure the difference
 * (`cucap replay --loop 3` wall time; docs/bench-log.md, "Kept modules").
 *
 * Here a module or library loaded by the load record at file index i stays
 * loaded for the run; the same record in a later pass gets the same handle
 * back. What a fresh load would give that a kept module does not is its
 * variables' load-time contents (kernels write __device__ variables, the
 * program writes __constant__ ones): they are read once, right after the
 * first load, for every variable of the code the driver loads
 * (cucap_image_foreach_variable: the ELF symbol table) and written back at
 * the start of every later pass, before any record runs. So every pass still
 * starts from the state a fresh load gives.
 *
 * Kept only when that is exact:
 *  - the image has SASS for this GPU (a PTX-only image is JIT-compiled and its
 *    variables are unknown without compiling: reloaded every pass as before);
 *  - every variable was found and read (else: reloaded every pass);
 *  - it was loaded in a context that lives across passes (the primary
 *    context, or a program context kept by cucap_replay_session_keep_contexts);
 *    a program context re-created in every pass takes its modules along.
 * The program's unload record only drops the handle from the pass's maps;
 * the kept module is unloaded at the end of the run (rp_modkeep_release) or
 * when its context is destroyed (rp_modkeep_ctx_gone). Function attributes
 * set on its functions persist into the next pass, where the program's own
 * calls set them again. An observer can ask for one pass with fresh loads
 * (cucap_replay_session_fresh_modules: the CUPTI engine's PC-sampling and
 * SASS-metrics passes, which see only functions loaded after they were set
 * up): the kept modules are unloaded
 * at that pass's start and no module is kept from then on.
 * On by default; CUCAP_REPLAY_KEEP_MODULES=0 turns it off (every pass loads
 * its modules again, as before).
 *
 * Owns: the kept-module table (R->code.mk) and the held unloads (R->code.held: with
 * cucap_replay_session_hold_unloads, every unload the replay would make -
 * the program's unload records, a pass's teardown, the drop for fresh
 * modules - waits for the end of the run, so that no two loads of the run
 * share a handle); the executor (replay_exec_kernel.c) asks it at each
 * module load and unload, the pass loop (replay_run.c) at pass start and at
 * the end of the run. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_fatbin.h"
#include "cucap_knobs.h"
#include "cucap_log.h"
#include "cucap_vec.h"
#include "replay_state.h"

typedef struct mk_var {
  CUdeviceptr addr;
  size_t size;
  size_t off; /* into mk_mod.init */
} mk_var;

typedef struct mk_mod {
  uint64_t rec_index; /* the load record (same in every pass) */
  uint64_t live;      /* CUmodule or CUlibrary */
  int library;
  CUcontext ctx; /* where it was loaded */
  mk_var *vars;
  size_t nvars;
  uint8_t *init; /* load-time contents of the variables */
  size_t init_bytes;
} mk_mod;

struct rp_modkeep {
  mk_mod *m;
  size_t n, cap;
  cucap_map by_rec;  /* load record index -> slot + 1 */
  cucap_map by_live; /* live handle -> slot + 1 */
  uint64_t restored_bytes;
  size_t dropped; /* modules unloaded for cucap_replay_session_fresh_modules */
};

/* On unless CUCAP_REPLAY_KEEP_MODULES=0. Under ASan, the mock's
 * drv_graph_explicit profile with PC sampling and SASS metrics can end in a
 * LeakSanitizer tracer crash: a sanitizer runtime bug, not this file's (see
 * cucap_main.c's __asan_default_options). */
static int mk_enabled(void) {
  return cucap_knob_flag(CUCAP_KNOB(CUCAP_REPLAY_KEEP_MODULES));
}

int rp_multipass(const rp_state *R) {
  /* loops asked for, an observer that profiles, or a pass after the first
   * (verify's extra passes) */
  unsigned loops = R->o->loops ? R->o->loops : 1;
  return loops > 1 || R->cx.keep_ctx || R->run.pass > 0;
}

int rp_modkeep_wanted(const rp_state *R) {
  if (!mk_enabled() || R->code.mk_off || R->capturing || !rp_multipass(R))
    return 0;
  if (R->cx.cur == R->cx.primary)
    return 1;
  size_t pos = 0;
  uint64_t v = 0;
  while (cucap_map_next(&R->cx.ctx_kept, &pos, NULL, &v))
    if ((CUcontext)(uintptr_t)v == R->cx.cur)
      return 1;
  return 0;
}

uint64_t rp_modkeep_get(rp_state *R, uint64_t rec_index, int library) {
  uint64_t slot = 0;
  if (!R->code.mk || !cucap_map_get(&R->code.mk->by_rec, rec_index, &slot))
    return 0;
  mk_mod *m = &R->code.mk->m[slot - 1];
  if (m->library != library || m->ctx != R->cx.cur)
    return 0;
  return m->live;
}

int rp_modkeep_has(const rp_state *R, uint64_t live) {
  return R->code.mk && live && cucap_map_get(&R->code.mk->by_live, live, NULL);
}

typedef struct mk_scan {
  rp_state *R;
  uint64_t live;
  int library;
  mk_mod *m;
  int failed;
} mk_scan;

static int mk_var_add(const char *name, uint64_t size, void *user) {
  mk_scan *s = user;
  rp_state *R = s->R;
  CUdeviceptr addr = 0;
  size_t got = 0;
  CUresult r = CUDA_ERROR_NOT_FOUND;
  if (s->library && R->d.df.LibraryGetGlobal)
    r = R->d.df.LibraryGetGlobal(&addr, &got, (CUlibrary)(uintptr_t)s->live, name);
  else if (!s->library && R->d.df.ModuleGetGlobal)
    r = R->d.df.ModuleGetGlobal(&addr, &got, (CUmodule)(uintptr_t)s->live, name);
  if (r != CUDA_SUCCESS || !addr || !got) {
    CUCAP_DEBUG("replay: module variable %s (%" PRIu64 " bytes) not found "
                "(CUresult %d): module reloaded in every pass", name, size, (int)r);
    return s->failed = 1;
  }
  mk_mod *m = s->m;
  for (size_t i = 0; i < m->nvars; i++)
    if (m->vars[i].addr == addr)
      return 0; /* the same variable under another symbol */
  if (m->nvars % 16 == 0) {
    mk_var *nv = realloc(m->vars, (m->nvars + 16) * sizeof *nv);
    if (!nv)
      return s->failed = 1;
    m->vars = nv;
  }
  m->vars[m->nvars++] = (mk_var){addr, got, m->init_bytes};
  m->init_bytes += got;
  return 0;
}

static void mk_mod_free(mk_mod *m) {
  free(m->vars);
  free(m->init);
  memset(m, 0, sizeof *m);
}

void rp_modkeep_add(rp_state *R, uint64_t rec_index, int library, uint64_t live,
                    const void *img, size_t isz) {
  if (!live || !rp_modkeep_wanted(R) || !R->d.df.MemcpyDtoHAsync ||
      !R->d.df.MemcpyHtoDAsync)
    return;
  if (!R->code.mk && !(R->code.mk = calloc(1, sizeof *R->code.mk)))
    return;
  struct rp_modkeep *K = R->code.mk;
  if (cucap_map_get(&K->by_rec, rec_index, NULL))
    return; /* kept in another context already: this one is per pass */
  mk_mod m = {rec_index, live, library, R->cx.cur, NULL, 0, NULL, 0};
  mk_scan s = {R, live, library, &m, 0};
  cucap_status st = cucap_image_foreach_variable(img, isz, (unsigned)R->cc,
                                                 mk_var_add, &s);
  if (st != CUCAP_OK || s.failed) {
    if (st != CUCAP_OK)
      CUCAP_DEBUG("replay: load record %" PRIu64 ": variables not known (%s): "
                  "module reloaded in every pass", rec_index, cucap_status_str(st));
    mk_mod_free(&m);
    return;
  }
  if (m.init_bytes && !(m.init = malloc(m.init_bytes))) {
    mk_mod_free(&m);
    return;
  }
  /* pageable host memory: each copy is done when the call returns; the
   * stream synchronisation below makes sure of it */
  for (size_t i = 0; i < m.nvars; i++)
    if (R->d.df.MemcpyDtoHAsync(m.init + m.vars[i].off, m.vars[i].addr,
                                m.vars[i].size, NULL) != CUDA_SUCCESS) {
      mk_mod_free(&m);
      return;
    }
  if (m.nvars && R->d.df.StreamSynchronize(NULL) != CUDA_SUCCESS) {
    mk_mod_free(&m);
    return;
  }
  if (!CUCAP_VEC_RESERVE(K->m, K->cap, K->n + 1, 16)) {
    mk_mod_free(&m);
    return;
  }
  if (!cucap_map_put(&K->by_rec, rec_index, K->n + 1) ||
      !cucap_map_put(&K->by_live, live, K->n + 1)) {
    cucap_map_del(&K->by_rec, rec_index, NULL);
    mk_mod_free(&m);
    return;
  }
  K->m[K->n++] = m;
}

/* Writes every kept module's variables back to their load-time contents (at
 * pass start). The copies go to the legacy stream, which the program's
 * non-blocking streams do not wait for: each context is synchronised after
 * its copies, so they are done before any record of the pass runs. */
void rp_modkeep_restore(rp_state *R) {
  struct rp_modkeep *K = R->code.mk;
  if (!K || !K->n)
    return;
  CUcontext prev = R->cx.cur;
  for (size_t i = 0; i < K->n; i++) {
    mk_mod *m = &K->m[i];
    if (!m->live || !m->nvars)
      continue;
    if (m->ctx != R->cx.cur) {
      if (R->d.df.CtxSynchronize() != CUDA_SUCCESS ||
          R->d.df.CtxSetCurrent(m->ctx) != CUDA_SUCCESS)
        continue;
      R->cx.cur = m->ctx;
    }
    int failed = 0;
    for (size_t v = 0; v < m->nvars && !failed; v++) {
      failed = !rp_cu(R, R->d.df.MemcpyHtoDAsync(m->vars[v].addr,
                                                 m->init + m->vars[v].off,
                                                 m->vars[v].size, NULL),
                      "cuMemcpyHtoDAsync (module variables, pass start)");
      if (!failed)
        K->restored_bytes += m->vars[v].size;
    }
    if (failed)
      break; /* the run stops (rp_cu set the error); the caller's context back first */
  }
  if (!R->failed)
    rp_cu(R, R->d.df.CtxSynchronize(), "cuCtxSynchronize (module variables)");
  if (prev && R->cx.cur != prev && R->d.df.CtxSetCurrent(prev) == CUDA_SUCCESS)
    R->cx.cur = prev;
}

/* ---- held unloads (cucap_replay_session_hold_unloads) ----
 * CUPTI's SASS metrics give no record for kernels of modules the replay
 * has unloaded and loaded again in an earlier pass, and all of them when
 * no replay module was ever unloaded (docs/bench-log.md, "SASS records"); the
 * driver hands a new load the handle of one just unloaded. Held, every load
 * of the run gets a handle of its own. */
typedef struct rp_held_mod {
  uint64_t live;
  int library;
  CUcontext ctx; /* the module's context; NULL for a library */
} rp_held_mod;

struct rp_held {
  rp_held_mod *m;
  size_t n, cap;
  size_t total; /* held over the run */
};

static void rp_unload_now(rp_state *R, uint64_t live, int library) {
  if (R->run.leave_to_exit)
    return; /* the process exit unloads it */
  if (library) {
    if (R->d.df.LibraryUnload)
      R->d.df.LibraryUnload((CUlibrary)(uintptr_t)live);
  } else if (R->d.df.ModuleUnload) {
    R->d.df.ModuleUnload((CUmodule)(uintptr_t)live);
  }
}

static int rp_hold(rp_state *R, uint64_t live, int library, CUcontext ctx) {
  if (!R->code.hold_unloads || !live)
    return 0;
  struct rp_held *H = R->code.held;
  if (!H && !(H = R->code.held = calloc(1, sizeof *H)))
    return 0;
  if (H->n == H->cap) {
    size_t nc = H->cap ? 2 * H->cap : 64;
    rp_held_mod *nm = realloc(H->m, nc * sizeof *nm);
    if (!nm)
      return 0; /* unloaded now, as without holding */
    H->m = nm;
    H->cap = nc;
  }
  H->m[H->n++] = (rp_held_mod){live, library, library ? NULL : ctx};
  H->total++;
  return 1;
}

void rp_unload(rp_state *R, uint64_t live, int library) {
  if (!rp_hold(R, live, library, library ? NULL : rp_owner_of(R, live)))
    rp_unload_now(R, live, library);
}

void rp_held_release(rp_state *R) {
  struct rp_held *H = R->code.held;
  if (!H)
    return;
  R->code.hold_unloads = 0;
  CUcontext prev = R->cx.cur;
  for (size_t i = 0; R->d.lib && !R->run.leave_to_exit && i < H->n; i++) {
    rp_held_mod *m = &H->m[i];
    if (m->ctx && m->ctx != R->cx.cur) {
      if (R->d.df.CtxSetCurrent(m->ctx) != CUDA_SUCCESS)
        continue;
      R->cx.cur = m->ctx;
    }
    rp_unload_now(R, m->live, m->library);
  }
  if (prev && R->cx.cur != prev && R->d.lib && R->d.df.CtxSetCurrent(prev) == CUDA_SUCCESS)
    R->cx.cur = prev;
  if (H->total)
    CUCAP_INFO("replay: %zu module(s) and librar(ies) held loaded to the end of the run "
               "instead of unloaded (cucap_replay_session_hold_unloads)", H->total);
  free(H->m);
  free(H);
  R->code.held = NULL;
}

static void mk_unload(rp_state *R, mk_mod *m) {
  if (!rp_hold(R, m->live, m->library, m->ctx))
    rp_unload_now(R, m->live, m->library);
}

static void mk_forget(struct rp_modkeep *K, mk_mod *m) {
  cucap_map_del(&K->by_rec, m->rec_index, NULL);
  cucap_map_del(&K->by_live, m->live, NULL);
  mk_mod_free(m); /* the slot stays, empty (live 0) */
}

void rp_modkeep_ctx_gone(rp_state *R, CUcontext ctx) {
  struct rp_modkeep *K = R->code.mk;
  for (size_t i = 0; K && i < K->n; i++)
    if (K->m[i].live && K->m[i].ctx == ctx)
      mk_forget(K, &K->m[i]); /* the driver frees it with the context */
  struct rp_held *H = R->code.held;
  for (size_t i = 0; H && i < H->n;) /* held modules go with it too */
    if (H->m[i].ctx == ctx)
      H->m[i] = H->m[--H->n];
    else
      i++;
}

/* Unloads every kept module in its context (when the driver is there) and
 * empties the table; returns how many there were. */
static size_t mk_unload_all(rp_state *R, struct rp_modkeep *K) {
  size_t kept = 0;
  CUcontext prev = R->cx.cur;
  for (size_t i = 0; i < K->n; i++) {
    mk_mod *m = &K->m[i];
    if (!m->live)
      continue;
    kept++;
    if (R->d.lib && !R->run.leave_to_exit && (m->ctx == R->cx.cur ||
                     R->d.df.CtxSetCurrent(m->ctx) == CUDA_SUCCESS)) {
      R->cx.cur = m->ctx;
      mk_unload(R, m);
    }
    mk_mod_free(m);
  }
  K->n = 0;
  cucap_map_free(&K->by_rec);
  cucap_map_free(&K->by_live);
  /* the caller's context current again: a kept context left current here
   * would be destroyed next, leaving none for the memory release after it */
  if (prev && R->cx.cur != prev && R->d.lib &&
      R->d.df.CtxSetCurrent(prev) == CUDA_SUCCESS)
    R->cx.cur = prev;
  return kept;
}

void rp_modkeep_drop(rp_state *R) {
  /* from here on every pass loads its modules, as a single pass does: the
   * observer's passes that need fresh loads are its last ones */
  if (R->code.mk)
    R->code.mk->dropped += mk_unload_all(R, R->code.mk);
  R->code.mk_off = 1;
}

void rp_modkeep_release(rp_state *R) {
  struct rp_modkeep *K = R->code.mk;
  if (!K)
    return;
  size_t kept = mk_unload_all(R, K);
  if (kept || K->dropped)
    CUCAP_INFO("replay: %zu module(s) kept loaded across passes, %" PRIu64
               " byte(s) of their variables restored%s", kept, K->restored_bytes,
               K->dropped ? " (loaded again once, on an observer's request)" : "");
  free(K->m);
  free(K);
  R->code.mk = NULL;
}
