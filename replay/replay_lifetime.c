/* replay_lifetime.c - what dies with a context, during replay; owns
 * rp_state's contexts-and-lifetimes part (rp_ctxs, replay_state.h).
 *
 * cuCtxDestroy frees everything created in that context: streams, events,
 * modules (and their functions), graph execs, device and page-locked host
 * allocations. A replayer that keeps using such a handle afterwards (a
 * module unloaded at the end of the run, a staging event recorded again, a
 * pinned staging buffer written) touches freed driver memory: on the real
 * driver an intermittent crash. So:
 *  - every live object the executor creates is noted with the context that
 *    was current (rp_owned); before a recorded cuCtxDestroy is replayed,
 *    rp_ctx_dying drops that context's objects from the handle maps (the
 *    driver frees them), marks functions of its modules dead and forgets the
 *    relocated allocations made in it;
 *  - the replayer's own staging events live in the context they were created
 *    in and are destroyed here while it still exists;
 *    CUDA arrays, mipmapped arrays and texture/surface objects are noted
 *    with their context by replay_object.c and dropped there
 *    (rp_object_context_gone);
 *  - the replayer's own host buffers are allocated in the primary context,
 *    which the replayer retains for the whole run (rp_host_buf_alloc), the
 *    page-locked buffers of copies captured into graphs included
 *    (rp_capture_host_buffer): the verify observer compares them after the
 *    graph ran, maybe after the program destroyed the capture's context;
 *  - a CUfunction obtained for a CUkernel is per context: rp_func_fn gets it
 *    again when the current context changed. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_log.h"
#include "replay_graph.h"
#include "replay_state.h"

void rp_owned(rp_state *R, uint64_t live) {
  if (live && R->cx.cur)
    cucap_map_put(&R->cx.owner, live, (uint64_t)(uintptr_t)R->cx.cur);
}

CUcontext rp_owner_of(rp_state *R, uint64_t live) {
  uint64_t c = 0;
  return cucap_map_get(&R->cx.owner, live, &c) ? (CUcontext)(uintptr_t)c : NULL;
}

/* Removes from m every entry whose live value the dying context owned. */
static size_t rp_forget_owned(rp_state *R, cucap_map *m, uint64_t ctx) {
  size_t n = 0, pos = 0;
  uint64_t k = 0, v = 0;
  while (cucap_map_next(m, &pos, &k, &v)) {
    uint64_t o = 0;
    if (cucap_map_get(&R->cx.owner, v, &o) && o == ctx) {
      cucap_map_del(m, k, NULL);
      n++;
    }
  }
  return n;
}

void rp_ctx_dying(rp_state *R, CUcontext live) {
  uint64_t c = (uint64_t)(uintptr_t)live;
  if (!live)
    return;
  /* our staging copies in it must be done before its events go */
  CUcontext prev = R->cx.cur;
  if (R->d.df.CtxSetCurrent(live) == CUDA_SUCCESS) {
    /* a capture still open on one of its streams ends here, its graph
     * dropped (fuzz_replay: the graph outlived the context) */
    rp_captures_close_ctx(R, live);
    R->d.df.CtxSynchronize();
    rp_stage_ctx_gone(R, live);
    if (prev && prev != live)
      R->d.df.CtxSetCurrent(prev);
  }
  /* graph execs the program left in it are destroyed here, with their
   * rebuilt graphs, rather than left to cuCtxDestroy (found by fuzz_replay:
   * an exec instantiated in a context the capture then created again under
   * the same handle stayed alive after the run) */
  {
    size_t gp = 0;
    uint64_t gk = 0, gv = 0, go = 0;
    while (cucap_map_next(&R->cx.gexec, &gp, &gk, &gv))
      if (cucap_map_get(&R->cx.owner, gv, &go) && go == c) {
        if (R->d.df.GraphExecDestroy)
          R->d.df.GraphExecDestroy((CUgraphExec)(uintptr_t)gv);
        cucap_map_del(&R->cx.gexec, gk, NULL);
        rp_graph_exec_destroyed(R, gk);
      }
  }
  /* the program's other objects in it: the driver frees them with it */
  rp_modkeep_ctx_gone(R, live);
  size_t n = rp_object_context_gone(R, c); /* arrays, textures, surfaces */
  cucap_map *maps[] = {&R->cx.stream, &R->cx.event, &R->code.module, &R->code.libmod, &R->cx.gexec};
  for (size_t m = 0; m < sizeof maps / sizeof *maps; m++)
    n += rp_forget_owned(R, maps[m], c);
  for (size_t i = 0; i < R->code.nfuncs; i++) {
    rp_func *fi = &R->code.funcs[i];
    uint64_t o = 0;
    if (fi->live && cucap_map_get(&R->cx.owner, fi->live, &o) && o == c) {
      fi->live = fi->live_fn = 0; /* its module is gone */
      n++;
    }
    if (fi->live_fn && fi->live_fn_ctx == c)
      fi->live_fn = fi->kind == CUCAP_FB_FUNCTIONKIND_KERNEL ? 0 : fi->live_fn;
  }
  for (size_t i = 0; i < R->mem.nreloc;) {
    rp_reloc *r = &R->mem.reloc[i];
    uint64_t o = 0;
    if (r->owned && cucap_map_get(&R->cx.owner, r->live, &o) && o == c) {
      memmove(r, r + 1, (R->mem.nreloc - i - 1) * sizeof *r);
      R->mem.nreloc--;
      n++;
      continue;
    }
    i++;
  }
  size_t pos = 0;
  uint64_t ok = 0, ov = 0;
  while (cucap_map_next(&R->cx.owner, &pos, &ok, &ov))
    if (ov == c)
      cucap_map_del(&R->cx.owner, ok, NULL);
  for (size_t i = 0; i < R->cx.nctx_stack; i++)
    if (R->cx.ctx_stack[i] == c)
      R->cx.ctx_stack[i] = (uint64_t)(uintptr_t)R->cx.primary;
  R->cx.last_stream_rec = R->cx.last_ctx_rec = R->code.last_fn_idx = 0;
  if (n)
    CUCAP_DEBUG("replay: context %p destroyed with %zu object(s) of the "
                "program still in it", (void *)live, n);
}

CUfunction rp_func_fn(rp_state *R, rp_func *fi) {
  if (!fi->live)
    return NULL; /* its module was unloaded with its context */
  uint64_t cur = (uint64_t)(uintptr_t)R->cx.cur;
  if (fi->live_fn && (fi->kind != CUCAP_FB_FUNCTIONKIND_KERNEL || fi->live_fn_ctx == cur))
    return (CUfunction)(uintptr_t)fi->live_fn;
  if (fi->kind != CUCAP_FB_FUNCTIONKIND_KERNEL) /* a CUfunction already */
    return (CUfunction)(uintptr_t)(fi->live_fn = fi->live);
  CUfunction f = NULL;
  if (!R->d.df.KernelGetFunction) {
    rp_set_error(R, CUCAP_ERR_CUDA,
                 "record %" PRIu64 " (seq %" PRIu64 "): driver lacks "
                 "cuKernelGetFunction", R->rec_index, R->cur_seq);
    return NULL;
  }
  if (!rp_cu(R, R->d.df.KernelGetFunction(&f, (CUkernel)(uintptr_t)fi->live),
             "cuKernelGetFunction"))
    return NULL;
  fi->live_fn = (uint64_t)(uintptr_t)f;
  fi->live_fn_ctx = cur;
  return f;
}

/* Page-locked, portable, allocated in the primary context. NULL on failure. */
static void *host_buf_alloc(rp_state *R, size_t size) {
  void *p = NULL;
  if (!R->cx.primary || (!R->d.df.MemHostAlloc && !R->d.df.MemAllocHost))
    return NULL;
  CUcontext prev = R->cx.cur;
  if (prev != R->cx.primary && R->d.df.CtxSetCurrent(R->cx.primary) != CUDA_SUCCESS)
    return NULL;
  /* portable: pinned for every context, freed only by us */
  CUresult r = R->d.df.MemHostAlloc
                   ? R->d.df.MemHostAlloc(&p, size, CU_MEMHOSTALLOC_PORTABLE)
                   : R->d.df.MemAllocHost(&p, size);
  if (prev != R->cx.primary)
    R->d.df.CtxSetCurrent(prev);
  return r == CUDA_SUCCESS ? p : NULL;
}

void *rp_host_buf_alloc(rp_state *R, size_t size) {
  if (R->capturing) /* see rp_grow: it would invalidate the capture */
    return NULL;
  return host_buf_alloc(R, size);
}

/* A host buffer for a copy to the host captured into a graph: the driver
 * only takes page-locked memory for memcpy nodes, and allocating it during a
 * global-mode capture would invalidate the capture, so the allocation runs
 * with this thread's capture mode relaxed (restored after). Like every
 * replayer buffer it lives in the primary context, so a program context
 * destroyed before the graph's results are compared (the verify observer
 * keeps the pointer until the CopyResult snapshot) does not take it along.
 * Kept until the end of the pass (the graph may run many times). NULL on
 * failure. */
void *rp_capture_host_buffer(rp_state *R, size_t size) {
  CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
  int exchanged = R->d.df.ThreadExchangeStreamCaptureMode &&
                  R->d.df.ThreadExchangeStreamCaptureMode(&m) == CUDA_SUCCESS;
  void *p = host_buf_alloc(R, size ? size : 1);
  if (exchanged)
    R->d.df.ThreadExchangeStreamCaptureMode(&m);
  int pinned = p != NULL;
  if (!p)
    p = malloc(size ? size : 1); /* the driver may still take it */
  if (p && rp_keep_as(R, p, pinned) != CUCAP_OK) {
    if (pinned)
      rp_host_buf_free(R, p);
    else
      free(p);
    p = NULL;
  }
  return p;
}

cucap_status rp_keep_as(rp_state *R, void *p, int pinned) {
  if (R->cx.nkeep == R->cx.capkeep) {
    size_t nc = R->cx.capkeep ? R->cx.capkeep * 2 : 16;
    void **n = realloc(R->cx.keep, nc * sizeof *n);
    CUCAP_RETURN_IF(!n, CUCAP_ERR_NOMEM);
    R->cx.keep = n;
    unsigned char *np = realloc(R->cx.keep_pinned, nc);
    CUCAP_RETURN_IF(!np, CUCAP_ERR_NOMEM);
    R->cx.keep_pinned = np;
    R->cx.capkeep = nc;
  }
  R->cx.keep_pinned[R->cx.nkeep] = (unsigned char)pinned;
  R->cx.keep[R->cx.nkeep++] = p;
  return CUCAP_OK;
}

cucap_status rp_keep(rp_state *R, void *p) { return rp_keep_as(R, p, 0); }

void rp_keep_free(rp_state *R) {
  for (size_t i = 0; i < R->cx.nkeep; i++) {
    if (R->cx.keep_pinned[i])
      rp_host_buf_free(R, R->cx.keep[i]);
    else
      free(R->cx.keep[i]);
  }
  R->cx.nkeep = 0;
}

void rp_host_buf_free(rp_state *R, void *p) {
  if (!p || !R->d.df.MemFreeHost || R->run.leave_to_exit)
    return; /* leave_to_exit: the process exit frees it */
  CUcontext prev = R->cx.cur;
  int sw = R->cx.primary && prev != R->cx.primary &&
           R->d.df.CtxSetCurrent(R->cx.primary) == CUDA_SUCCESS;
  R->d.df.MemFreeHost(p);
  if (sw)
    R->d.df.CtxSetCurrent(prev);
}

int rp_lib_option_safe(int opt) {
  /* CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE is a pointer into the
   * recorded process (the driver would read it); CU_LIBRARY_BINARY_IS_PRESERVED
   * would let the driver keep reading our image buffer instead of copying it */
  return opt != CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE &&
         opt != CU_LIBRARY_BINARY_IS_PRESERVED && opt >= 0 &&
         opt < CU_LIBRARY_NUM_OPTIONS;
}

/* ------------------------------------------------------- kept contexts */

/* Profiling keeps the contexts a program creates for the whole run: CUPTI's
 * range profiler, PC sampling and SASS metrics are bound to one context and
 * collect over several passes, which a context re-created in every pass
 * would lose. Their objects still go between passes (rp_destroy_live
 * unloads, destroys and frees what the maps hold, in the owning context), so
 * every pass still starts from the same state. */
int rp_ctx_kept_reuse(rp_state *R, const cucap_fb_record *rec, uint64_t h) {
  uint64_t live = 0;
  if (!cucap_map_get(&R->cx.ctx_kept, h, &live))
    return 0;
  if (R->d.df.CtxSetCurrent((CUcontext)(uintptr_t)live) != CUDA_SUCCESS)
    return 0;
  R->cx.cur = (CUcontext)(uintptr_t)live;
  cucap_map_put(&R->cx.ctx, h, live);
  rp_ctx_set_tid(R, rec, R->cx.cur);
  return 1;
}

void rp_ctx_kept_release(rp_state *R, uint64_t h) {
  uint64_t live = 0, mapped = 0;
  if (!cucap_map_get(&R->cx.ctx_kept, h, &live) || !cucap_map_get(&R->cx.ctx, h, &mapped) ||
      mapped != live)
    return;
  /* cuCtxDestroy waits for the context's work: so does this */
  if (R->d.df.CtxSetCurrent((CUcontext)(uintptr_t)live) == CUDA_SUCCESS) {
    R->cx.cur = (CUcontext)(uintptr_t)live;
    R->d.df.CtxSynchronize();
  }
  cucap_map_del(&R->cx.ctx, h, NULL);
  rp_ctx_unref(R, live); /* the primary context current again */
}

void rp_ctx_kept_sync(rp_state *R) {
  size_t pos = 0;
  uint64_t v = 0;
  while (cucap_map_next(&R->cx.ctx_kept, &pos, NULL, &v)) {
    if (R->d.df.CtxSetCurrent((CUcontext)(uintptr_t)v) != CUDA_SUCCESS)
      continue;
    R->cx.cur = (CUcontext)(uintptr_t)v;
    rp_cu(R, R->d.df.CtxSynchronize(), "cuCtxSynchronize (end of pass)");
  }
}

void rp_ctx_destroy_all(rp_state *R, cucap_map *m) {
  size_t pos = 0;
  uint64_t v = 0;
  while (R->d.df.CtxDestroy && cucap_map_next(m, &pos, NULL, &v)) {
    CUcontext c = (CUcontext)(uintptr_t)v;
    rp_ctx_dying(R, c);
    R->d.df.CtxDestroy(c);
    if (R->cx.cur == c)
      R->cx.cur = NULL;
  }
  cucap_map_free(m);
}
