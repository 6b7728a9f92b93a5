/* replay_exec.c - executes one record on the live driver.
 *
 * Handles map recorded -> live objects (contexts per recording thread,
 * streams, events, modules/libraries, functions, graphs); every async op
 * runs on its replayed stream with the recorded variant (legacy or
 * per-thread default stream); device addresses go through the relocation
 * table (identity at fixed addresses). The driver of the whole run is
 * replay_run.c; verification is an observer (verify_observer.c), which sees
 * the bytes of every copy to the host through op->host_data. */
#include <cupti_driver_cbid.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_hash.h"
#include "cucap_log.h"
#include "replay_state.h"
#include "replay_graph.h"

cucap_hash128 rp_h(const cucap_fb_hash128 *h) {
  cucap_hash128 x = {0, 0};
  if (h) {
    x.lo = h->lo;
    x.hi = h->hi;
  }
  return x;
}

void rp_set_error(rp_state *R, cucap_status st, int code, const char *fmt,
                  ...) {
  if (R->rep->error[0])
    return; /* keep the first */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(R->rep->error, sizeof R->rep->error, fmt, ap);
  va_end(ap);
  R->rep->status = st;
  R->rep->exit_code = code;
  R->failed = 1;
}

/* A driver call failed during replay: stop with a precise message. */
int rp_cu(rp_state *R, CUresult r, const char *call) {
  if (r == CUDA_SUCCESS)
    return 1;
  rp_set_error(R, CUCAP_ERR_CUDA, CUCAP_REPLAY_EXIT_FAILED,
               "record %" PRIu64 " (seq %" PRIu64 "): %s failed: %s (%d)",
               R->rec_index, R->cur_seq, call, rp_cu_err(&R->d, r), (int)r);
  return 0;
}

/* Grows a host buffer, pinned when possible (DMA at full speed). */
int rp_grow(void **buf, size_t *cap, size_t need, int *pinned, rp_state *R) {
  if (need <= *cap && *buf)
    return 1;
  if (need > ((size_t)1 << 40) || (R->dev_mem && need > R->dev_mem + 4096))
    return 0; /* a corrupt size: no op moves more than the GPU holds */
  size_t nc = *cap ? *cap : (size_t)1 << 20;
  while (nc < need)
    nc *= 2;
  if (*buf) {
    if (*pinned)
      rp_host_buf_free(R, *buf);
    else
      free(*buf);
    *buf = NULL;
    *cap = 0;
  }
  /* never cuMemAllocHost while a stream captures: it is an unsafe call in
   * CU_STREAM_CAPTURE_MODE_GLOBAL and invalidates the capture (seen on the
   * GPU as CUDA_ERROR_STREAM_CAPTURE_INVALIDATED at the next launch);
   * allocated in the primary context, which outlives the program's own */
  void *p = rp_host_buf_alloc(R, nc);
  *pinned = p != NULL;
  if (!p)
    p = malloc(nc);
  if (!p)
    return 0;
  *buf = p;
  *cap = nc;
  return 1;
}

/* ---------------------------------------------------------------- handles */

static int rp_ctx_use(rp_state *R, uint64_t rec_ctx) {
  if (!rec_ctx)
    return 1;
  uint64_t live = 0;
  if (rec_ctx == R->last_ctx_rec && (CUcontext)(uintptr_t)R->last_ctx_live == R->cur)
    return 1; /* same context as the previous op: nothing to do */
  if (!rp_map_get(&R->ctx, rec_ctx, &live)) {
    if (!R->warned_ctx++)
      CUCAP_INFO("replay: context 0x%" PRIx64 " not created by a recorded "
                 "call; using the primary context", rec_ctx);
    live = (uint64_t)(uintptr_t)R->primary;
    rp_map_put(&R->ctx, rec_ctx, live);
  }
  if ((CUcontext)(uintptr_t)live != R->cur) {
    if (!rp_cu(R, R->d.df.CtxSetCurrent((CUcontext)(uintptr_t)live),
               "cuCtxSetCurrent"))
      return 0;
    R->cur = (CUcontext)(uintptr_t)live;
  }
  R->last_ctx_rec = rec_ctx;
  R->last_ctx_live = live;
  return 1;
}

static int rp_ctx_switch(rp_state *R, CUcontext live) {
  if (live && live != R->cur) {
    if (!rp_cu(R, R->d.df.CtxSetCurrent(live), "cuCtxSetCurrent"))
      return 0;
    R->cur = live;
  }
  return 1;
}

/* The context an op of this record runs in: Record.context when the
 * recorder set it, else the current context of the recording thread as
 * replayed so far (SetCurrent/Push/Pop/Create per tid). */
int rp_ctx_rec(rp_state *R, const cucap_fb_record *rec) {
  uint64_t c = cucap_fb_record_context(rec), live;
  if (c)
    return rp_ctx_use(R, c);
  if (rp_map_get(&R->tid_ctx, cucap_fb_record_tid(rec), &live))
    return rp_ctx_switch(R, (CUcontext)(uintptr_t)live);
  return 1;
}

void rp_ctx_set_tid(rp_state *R, const cucap_fb_record *rec,
                    CUcontext live) {
  rp_map_put(&R->tid_ctx, cucap_fb_record_tid(rec), (uint64_t)(uintptr_t)live);
}

CUstream rp_stream(rp_state *R, uint64_t h) {
  if (h <= 2) /* NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD */
    return (CUstream)(uintptr_t)h;
  uint64_t v;
  if (h == R->last_stream_rec)
    return (CUstream)(uintptr_t)R->last_stream_live;
  if (rp_map_get(&R->stream, h, &v)) {
    R->last_stream_rec = h;
    R->last_stream_live = v;
    return (CUstream)(uintptr_t)v;
  }
  if (!R->warned_stream++)
    CUCAP_WARN("replay: stream 0x%" PRIx64 " unknown (created before the "
               "capture started?); using the default stream", h);
  return NULL;
}

static CUevent rp_event(rp_state *R, uint64_t h) {
  uint64_t v = 0;
  if (!rp_map_get(&R->event, h, &v))
    return NULL;
  return (CUevent)(uintptr_t)v;
}

const rp_fns *rp_fn(rp_state *R, const cucap_fb_record *rec) {
  return cucap_fb_record_variant(rec) != CUCAP_FB_CALLVARIANT_DEFAULT
             ? &R->d.pt
             : &R->d.df;
}

uint64_t rp_tr(rp_state *R, uint64_t addr) {
  return rp_mem_translate(&R->mem, addr, NULL);
}

/* ---------------------------------------------------------------- classify */

/* Successful calls that change GPU state but that the recorder stores only as
 * a generic call (no body): replaying without them would silently diverge,
 * so they are reported by name as skipped (refused with --strict). */
static const char *rp_unhooked_work(const cucap_fb_record *rec) {
  if (cucap_fb_record_result(rec) != 0)
    return NULL;
  switch (cucap_fb_record_call(rec)) {
#define RP_WORK(fn)                                                            \
  case CUPTI_DRIVER_TRACE_CBID_##fn:                                           \
    return #fn;
    RP_WORK(cuMemcpy3DPeer)
    RP_WORK(cuMemcpy3DPeerAsync)
    RP_WORK(cuMemcpy3DPeer_ptds)
    RP_WORK(cuMemcpy3DPeerAsync_ptsz)
    RP_WORK(cuMemcpyBatchAsync)
    RP_WORK(cuMemcpyBatchAsync_ptsz)
    RP_WORK(cuMemcpy3DBatchAsync)
    RP_WORK(cuMemcpy3DBatchAsync_ptsz)
    RP_WORK(cuStreamBatchMemOp)
    RP_WORK(cuStreamBatchMemOp_v2)
    RP_WORK(cuStreamBatchMemOp_ptsz)
    RP_WORK(cuStreamBatchMemOp_v2_ptsz)
    RP_WORK(cuIpcOpenMemHandle)
    RP_WORK(cuIpcOpenMemHandle_v2)
    RP_WORK(cuIpcOpenEventHandle)
    RP_WORK(cuImportExternalMemory)
    RP_WORK(cuExternalMemoryGetMappedBuffer)
    RP_WORK(cuSignalExternalSemaphoresAsync)
    RP_WORK(cuWaitExternalSemaphoresAsync)
    RP_WORK(cuGraphicsMapResources)
    RP_WORK(cuLaunch)
    RP_WORK(cuLaunchGrid)
    RP_WORK(cuLaunchGridAsync)
    RP_WORK(cuGraphExecKernelNodeSetParams)
    RP_WORK(cuGraphExecKernelNodeSetParams_v2)
    RP_WORK(cuGraphExecMemcpyNodeSetParams)
    RP_WORK(cuGraphExecMemsetNodeSetParams)
    RP_WORK(cuGraphExecNodeSetParams)
    RP_WORK(cuGraphExecChildGraphNodeSetParams)
    RP_WORK(cuGraphExecUpdate)
    RP_WORK(cuGraphExecUpdate_v2)
#undef RP_WORK
  default:
    return NULL;
  }
}

/* Name of an op that cannot be replayed, or NULL if it can (or is only
 * informational). Used by the --strict pre-check and by the executor. */
const char *rp_unreplayable(const cucap_fb_record *rec) {
  switch (cucap_fb_record_body_type(rec)) {
  case CUCAP_FB_BODY_LAUNCH: {
    int k = cucap_fb_launch_kind(cucap_fb_record_body_as_launch(rec));
    if (k == CUCAP_FB_LAUNCHKIND_HOSTFUNC)
      return "cuLaunchHostFunc";
    if (k == CUCAP_FB_LAUNCHKIND_COOPERATIVEMULTIDEVICE)
      return "cuLaunchCooperativeKernelMultiDevice";
    return NULL;
  }
  case CUCAP_FB_BODY_MEMCPY: /* array copies: replay_array.c */
  case CUCAP_FB_BODY_ALLOC:
  case CUCAP_FB_BODY_OBJECT:      /* format 1.2: replay_object.c */
  case CUCAP_FB_BODY_QUERYCOUNTS: /* format 1.3: pure queries, nothing to run */
    return NULL;
  case CUCAP_FB_BODY_STREAM: {
    int op = cucap_fb_stream_op(cucap_fb_record_body_as_stream(rec));
    if (op == CUCAP_FB_STREAMOP_WAITVALUE)
      return "cuStreamWaitValue";
    if (op == CUCAP_FB_STREAMOP_WRITEVALUE)
      return "cuStreamWriteValue";
    return NULL;
  }
  case CUCAP_FB_BODY_GRAPH:
    /* construction calls are informational (graphs are rebuilt from the
     * topology recorded at instantiation), the rest is replayed
     * (replay_graph*.c); what cannot be is skipped there, by name */
    return NULL;
  case CUCAP_FB_BODY_NOTE: {
    const char *k = cucap_fb_note_kind(cucap_fb_record_body_as_note(rec));
    if (k && !strcmp(k, "unsupported"))
      return "unsupported call (recorder note)";
    return NULL;
  }
  case CUCAP_FB_BODY_NONE: {
    const char *w = rp_unhooked_work(rec);
    return w ? w : rp_attr_unreplayable(rec);
  }
  default:
    /* Devices (format 1.1), Nvtx (1.2): informational */
    if (cucap_fb_record_body_type(rec) > CUCAP_FB_BODY_NVTX)
      return "unknown record body";
    return NULL;
  }
}

/* Kinds whose [address, address+size) holds device data. A VMM reservation
 * itself does not (it may be huge and mostly unmapped): its cuMemMap ranges
 * do, and those are what gets placed or relocated. */
int rp_alloc_is_device(int k) {
  return k == CUCAP_FB_ALLOCKIND_DEVICE || k == CUCAP_FB_ALLOCKIND_PITCH ||
         k == CUCAP_FB_ALLOCKIND_MANAGED || k == CUCAP_FB_ALLOCKIND_ASYNC ||
         k == CUCAP_FB_ALLOCKIND_FROMPOOL || k == CUCAP_FB_ALLOCKIND_VMMMAP;
}

uint64_t rp_alloc_size(const cucap_fb_alloc *a) {
  uint64_t s = cucap_fb_alloc_size(a);
  if (cucap_fb_alloc_kind(a) == CUCAP_FB_ALLOCKIND_PITCH) {
    uint64_t ps = cucap_fb_alloc_pitch(a) * cucap_fb_alloc_height(a);
    if (ps > s)
      s = ps;
  }
  return s;
}

/* ---------------------------------------------------------------- ops */

/* Destroys the context created for recorded handle h, if any; whatever
 * referred to it (current context, recording threads, the push stack) falls
 * back to the primary context. */
void rp_ctx_unref(rp_state *R, uint64_t live) {
  if ((CUcontext)(uintptr_t)live == R->cur) {
    R->d.df.CtxSetCurrent(R->primary);
    R->cur = R->primary;
  }
  for (size_t i = 0; i < R->tid_ctx.cap + 2; i++)
    if (R->tid_ctx.vals && R->tid_ctx.vals[i] == live)
      R->tid_ctx.vals[i] = (uint64_t)(uintptr_t)R->primary;
  for (size_t i = 0; i < R->nctx_stack; i++)
    if (R->ctx_stack[i] == live)
      R->ctx_stack[i] = (uint64_t)(uintptr_t)R->primary;
  R->last_ctx_rec = 0;
}

static void rp_ctx_destroy_created(rp_state *R, uint64_t h) {
  uint64_t live;
  if (R->keep_ctx)
    rp_ctx_kept_release(R, h);
  if (!rp_map_del(&R->ctx_created, h, &live))
    return;
  rp_map_del(&R->ctx, h, NULL);
  rp_ctx_unref(R, live);
  rp_ctx_dying(R, (CUcontext)(uintptr_t)live); /* and its arrays, textures */
  if (R->d.df.CtxDestroy)
    R->d.df.CtxDestroy((CUcontext)(uintptr_t)live);
}

static void rp_op_context(rp_state *R, const cucap_fb_record *rec,
                          const cucap_fb_context *c) {
  uint64_t h = cucap_fb_context_handle(c);
  R->last_ctx_rec = 0; /* the recorded -> live mapping may change */
  switch (cucap_fb_context_op(c)) {
  case CUCAP_FB_CONTEXTOP_CREATE: {
    CUcontext nc = NULL;
    if (!R->d.df.CtxCreate) {
      rp_skip(R, "cuCtxCreate (driver lacks it)");
      rp_map_put(&R->ctx, h, (uint64_t)(uintptr_t)R->primary);
      return;
    }
    if (R->keep_ctx && rp_ctx_kept_reuse(R, rec, h))
      break;
    /* a handle still mapped was destroyed without a record (or reused) */
    rp_ctx_destroy_created(R, h);
    if (!rp_cu(R, R->d.df.CtxCreate(&nc, cucap_fb_context_flags(c), R->dev),
               "cuCtxCreate"))
      return;
    /* cuCtxCreate pushes it on this thread's context stack; the replay
     * switches contexts with cuCtxSetCurrent (which replaces the top), so
     * the push would stay behind for every replayed create (64 --loop
     * passes overflowed the mock's stack): pop it, make it current. */
    CUcontext top = NULL;
    if (R->d.df.CtxPopCurrent && R->d.df.CtxPopCurrent(&top) == CUDA_SUCCESS && top == nc)
      R->d.df.CtxSetCurrent(nc);
    R->cur = nc; /* cuCtxCreate makes it current */
    if (!rp_map_put(R->keep_ctx ? &R->ctx_kept : &R->ctx_created, h,
                    (uint64_t)(uintptr_t)nc)) {
      R->d.df.CtxDestroy(nc);
      R->d.df.CtxSetCurrent(R->primary);
      R->cur = R->primary;
      rp_set_error(R, CUCAP_ERR_NOMEM, CUCAP_REPLAY_EXIT_FAILED, "out of memory");
      return;
    }
    rp_map_put(&R->ctx, h, (uint64_t)(uintptr_t)nc);
    rp_ctx_set_tid(R, rec, nc);
    break;
  }
  case CUCAP_FB_CONTEXTOP_DESTROY:
    rp_ctx_destroy_created(R, h);
    break;
  case CUCAP_FB_CONTEXTOP_PRIMARYRETAIN:
    rp_map_put(&R->ctx, h, (uint64_t)(uintptr_t)R->primary);
    break;
  case CUCAP_FB_CONTEXTOP_SETCURRENT:
  case CUCAP_FB_CONTEXTOP_PUSH: {
    uint64_t live = 0, prev = 0;
    if (h && !rp_ctx_use(R, h))
      return;
    if (h)
      rp_map_get(&R->ctx, h, &live);
    if (cucap_fb_context_op(c) == CUCAP_FB_CONTEXTOP_PUSH &&
        R->nctx_stack < RP_CTX_STACK) {
      rp_map_get(&R->tid_ctx, cucap_fb_record_tid(rec), &prev);
      R->ctx_stack[R->nctx_stack++] = prev;
    }
    rp_ctx_set_tid(R, rec, (CUcontext)(uintptr_t)live);
    break;
  }
  case CUCAP_FB_CONTEXTOP_POP: {
    uint64_t prev = R->nctx_stack ? R->ctx_stack[--R->nctx_stack] : 0;
    rp_ctx_set_tid(R, rec, (CUcontext)(uintptr_t)prev);
    if (prev)
      rp_ctx_switch(R, (CUcontext)(uintptr_t)prev);
    break;
  }
  case CUCAP_FB_CONTEXTOP_SYNCHRONIZE:
    if (h)
      rp_ctx_use(R, h);
    else
      rp_ctx_rec(R, rec);
    rp_cu(R, R->d.df.CtxSynchronize(), "cuCtxSynchronize");
    break;
  default: /* release/reset/flags/pop: our own retain keeps memory alive */
    R->rep->ignored++;
    return;
  }
  R->rep->executed++;
}

static int rp_jit_option_scalar(int opt) {
  switch (opt) {
  case CU_JIT_WALL_TIME:
  case CU_JIT_INFO_LOG_BUFFER:
  case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
  case CU_JIT_ERROR_LOG_BUFFER:
  case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
  case CU_JIT_GLOBAL_SYMBOL_NAMES:
  case CU_JIT_GLOBAL_SYMBOL_ADDRESSES:
  case CU_JIT_GLOBAL_SYMBOL_COUNT:
  case CU_JIT_REFERENCED_KERNEL_NAMES:
  case CU_JIT_REFERENCED_KERNEL_COUNT:
  case CU_JIT_REFERENCED_VARIABLE_NAMES:
  case CU_JIT_REFERENCED_VARIABLE_COUNT:
    return 0; /* pointers/buffers (not stored) or counts that go with them */
  default:
    return opt >= 0 && opt < CU_JIT_NUM_OPTIONS;
  }
}

#define RP_MAX_JIT 32
static void rp_op_module(rp_state *R, const cucap_fb_record *rec,
                         const cucap_fb_module *m) {
  uint64_t h = cucap_fb_module_handle(m);
  int kind = cucap_fb_module_kind(m);
  switch (cucap_fb_module_op(m)) {
  case CUCAP_FB_MODULEOP_LOAD: {
    int library = kind == CUCAP_FB_MODULEKIND_LIBRARY;
    if (R->mk) { /* loaded by this record in an earlier pass and kept */
      if (!rp_ctx_rec(R, rec))
        return;
      uint64_t kept = rp_modkeep_get(R, R->rec_index, library);
      if (kept) {
        if (!rp_live_put(R, library ? &R->library : &R->module, h, kept))
          return;
        if (!library)
          rp_owned(R, kept);
        break;
      }
    }
    if (!cucap_fb_module_image(m)) {
      rp_skip(R, "module load without stored image");
      return;
    }
    const void *img = NULL;
    uint64_t isz = 0;
    if (cucap_reader_blob_map(R->r, rp_h(cucap_fb_module_image(m)), &img,
                              &isz) != CUCAP_OK) {
      rp_skip(R, "module load (image blob missing)");
      return;
    }
    const char *why = NULL;
    void *copy = NULL;
    if (!(img = rp_image_for_driver(img, isz, &copy, &why))) {
      if (why)
        rp_skip(R, why);
      else
        rp_set_error(R, CUCAP_ERR_NOMEM, CUCAP_REPLAY_EXIT_FAILED, "out of memory");
      return;
    }
    if (copy && !rp_keep(R, copy)) {
      free(copy);
      rp_set_error(R, CUCAP_ERR_NOMEM, CUCAP_REPLAY_EXIT_FAILED, "out of memory");
      return;
    }
    CUjit_option jo[RP_MAX_JIT], lo[RP_MAX_JIT];
    void *jv[RP_MAX_JIT], *lv[RP_MAX_JIT];
    unsigned nj = 0, nl = 0;
    for (size_t i = 0; i < cucap_fb_module_jit_options_len(m) && nj < RP_MAX_JIT; i++) {
      const cucap_fb_jit_option *o = cucap_fb_module_jit_options_at(m, i);
      int opt = cucap_fb_jit_option_option(o);
      if (!rp_jit_option_scalar(opt))
        continue;
      jo[nj] = (CUjit_option)opt;
      jv[nj++] = (void *)(uintptr_t)cucap_fb_jit_option_value(o);
    }
    for (size_t i = 0; i < cucap_fb_module_library_options_len(m) && nl < RP_MAX_JIT; i++) {
      const cucap_fb_jit_option *o = cucap_fb_module_library_options_at(m, i);
      if (!rp_lib_option_safe(cucap_fb_jit_option_option(o)))
        continue;
      lo[nl] = (CUjit_option)cucap_fb_jit_option_option(o);
      lv[nl++] = (void *)(uintptr_t)cucap_fb_jit_option_value(o);
    }
    if (!rp_ctx_rec(R, rec))
      return;
    if (kind == CUCAP_FB_MODULEKIND_LIBRARY) {
      CUlibrary lib = NULL;
      if (!R->d.df.LibraryLoadData) {
        rp_skip(R, "cuLibraryLoadData (driver lacks it)");
        return;
      }
      if (!rp_cu(R, R->d.df.LibraryLoadData(&lib, img, nj ? jo : NULL,
                                            nj ? jv : NULL, nj,
                                            (CUlibraryOption *)(nl ? lo : NULL),
                                            nl ? lv : NULL, nl),
                 "cuLibraryLoadData"))
        return;
      if (!rp_live_put(R, &R->library, h, (uint64_t)(uintptr_t)lib))
        return;
      rp_modkeep_add(R, R->rec_index, 1, (uint64_t)(uintptr_t)lib, img, isz);
    } else {
      CUmodule mod = NULL;
      if (!rp_cu(R, R->d.df.ModuleLoadDataEx(&mod, img, nj, nj ? jo : NULL,
                                             nj ? jv : NULL),
                 "cuModuleLoadDataEx"))
        return;
      if (!rp_live_put(R, &R->module, h, (uint64_t)(uintptr_t)mod))
        return;
      rp_owned(R, (uint64_t)(uintptr_t)mod);
      rp_modkeep_add(R, R->rec_index, 0, (uint64_t)(uintptr_t)mod, img, isz);
    }
    break;
  }
  case CUCAP_FB_MODULEOP_LIBRARYMODULE:
    rp_op_library_module(R, rec, m);
    return;
  case CUCAP_FB_MODULEOP_UNLOAD: {
    uint64_t live;
    rp_ctx_rec(R, rec);
    if (rp_map_del(&R->libmod, h, NULL)) {
      /* a library's module: the library owns it */
    } else if (rp_map_del(&R->library, h, &live)) {
      if (R->d.df.LibraryUnload && !rp_modkeep_has(R, live))
        R->d.df.LibraryUnload((CUlibrary)(uintptr_t)live);
    } else if (rp_map_del(&R->module, h, &live)) {
      if (!rp_modkeep_has(R, live))
        R->d.df.ModuleUnload((CUmodule)(uintptr_t)live);
    }
    break;
  }
  default: /* cuLink*: the linked cubin is loaded by a later Module record */
    R->rep->ignored++;
    return;
  }
  R->rep->executed++;
}

static void rp_op_global(rp_state *R, const cucap_fb_record *rec,
                         const cucap_fb_global *g) {
  uint64_t mh = cucap_fb_global_module(g), live = 0;
  const char *name = cucap_fb_global_name(g);
  CUdeviceptr addr = 0;
  size_t size = 0;
  CUresult r = CUDA_ERROR_NOT_FOUND;
  if (!name)
    return;
  rp_ctx_rec(R, rec);
  if (rp_map_get(&R->library, mh, &live) && R->d.df.LibraryGetGlobal)
    r = R->d.df.LibraryGetGlobal(&addr, &size, (CUlibrary)(uintptr_t)live,
                                 name);
  else if (rp_module_live(R, mh, &live) && R->d.df.ModuleGetGlobal)
    r = R->d.df.ModuleGetGlobal(&addr, &size, (CUmodule)(uintptr_t)live, name);
  if (r != CUDA_SUCCESS) {
    rp_skip(R, "module global lookup");
    return;
  }
  uint64_t rec_addr = cucap_fb_global_address(g);
  if (addr != rec_addr) {
    /* module globals are placed by the loader: relocate references */
    uint64_t rsz = cucap_fb_global_size(g) ? cucap_fb_global_size(g) : size;
    if (!R->warned_global++)
      CUCAP_WARN("replay: module global %s is at 0x%llx, recorded at 0x%" PRIx64
                 " (the driver places globals); kernel parameters and copies "
                 "are relocated, its address stored in device memory is not",
                 name, (unsigned long long)addr, rec_addr);
    else
      CUCAP_INFO("replay: global %s at 0x%llx, recorded at 0x%" PRIx64
                 "; relocating references", name, (unsigned long long)addr,
                 rec_addr);
    rp_mem_add_reloc(&R->mem, rec_addr, rsz, addr, 0);
  }
  R->rep->executed++;
}

static void rp_op_function(rp_state *R, const cucap_fb_record *rec,
                           const cucap_fb_function *f) {
  uint64_t h = cucap_fb_function_handle(f), mh = cucap_fb_function_module(f);
  const char *name = cucap_fb_function_name(f);
  int kind = cucap_fb_function_kind(f);
  uint64_t mlive = 0, idx;
  void *live = NULL;
  CUcontext mod_owner = NULL; /* a module's function lives and dies with its module's context */
  rp_ctx_rec(R, rec);
  if (kind == CUCAP_FB_FUNCTIONKIND_KERNELFUNCTION) {
    /* module field = the CUkernel */
    if (rp_map_get(&R->func, mh, &idx) && R->d.df.KernelGetFunction) {
      CUfunction fn = NULL;
      if (!rp_cu(R, R->d.df.KernelGetFunction(
                        &fn, (CUkernel)(uintptr_t)R->funcs[idx].live),
                 "cuKernelGetFunction"))
        return;
      live = fn;
    }
  } else if (name && kind == CUCAP_FB_FUNCTIONKIND_KERNEL) {
    if (rp_map_get(&R->library, mh, &mlive) && R->d.df.LibraryGetKernel) {
      CUkernel k = NULL;
      if (!rp_cu(R, R->d.df.LibraryGetKernel(&k, (CUlibrary)(uintptr_t)mlive,
                                             name),
                 "cuLibraryGetKernel"))
        return;
      live = k;
    }
  } else if (name && rp_module_live(R, mh, &mlive)) {
    mod_owner = rp_owner_of(R, mlive);
    CUfunction fn = NULL;
    if (!rp_cu(R, R->d.df.ModuleGetFunction(&fn, (CUmodule)(uintptr_t)mlive,
                                            name),
               "cuModuleGetFunction"))
      return;
    live = fn;
  }
  if (!live && name) {
    /* its module or CUkernel was never defined in the capture */
    uint64_t flive = 0, fmod = 0;
    int how = rp_func_by_name(R, name, &flive, &fmod);
    if (how == 1 && kind == CUCAP_FB_FUNCTIONKIND_KERNELFUNCTION) {
      CUfunction fn = NULL;
      if (!rp_cu(R, R->d.df.KernelGetFunction(&fn, (CUkernel)(uintptr_t)flive),
                 "cuKernelGetFunction"))
        return;
      live = fn;
    } else if (how == 1) {
      live = (void *)(uintptr_t)flive;
      kind = CUCAP_FB_FUNCTIONKIND_KERNEL; /* launched through the CUkernel */
    } else if (how == 2) {
      live = (void *)(uintptr_t)flive;
      mod_owner = rp_owner_of(R, fmod);
      if (kind == CUCAP_FB_FUNCTIONKIND_KERNEL)
        kind = CUCAP_FB_FUNCTIONKIND_FUNCTION;
    }
    if (live) {
      R->rep->found_by_name++;
      if (R->pass == 0)
        CUCAP_INFO("replay: kernel %s (record %" PRIu64 ") found by name in a "
                   "%s the capture loaded: its own module was never recorded",
                   name, R->rec_index, how == 1 ? "library" : "module");
    }
  }
  if (!live) {
    rp_skip(R, "function lookup (module not loaded)");
    return;
  }
  rp_func *fi;
  const char *inherit = NULL;
  if (kind == CUCAP_FB_FUNCTIONKIND_KERNELFUNCTION && !name &&
      rp_map_get(&R->func, mh, &idx))
    inherit = R->funcs[idx].name; /* the CUkernel's name */
  char *nm = strdup(name ? name : inherit ? inherit : "?");
  if (!nm) {
    rp_set_error(R, CUCAP_ERR_NOMEM, CUCAP_REPLAY_EXIT_FAILED, "out of memory");
    return;
  }
  if (rp_map_get(&R->func, h, &idx)) {
    fi = &R->funcs[idx];
    free(fi->params);
    free(fi->name);
  } else {
    if (R->nfuncs == R->capfuncs) {
      size_t nc = R->capfuncs ? R->capfuncs * 2 : 32;
      rp_func *n = realloc(R->funcs, nc * sizeof *n);
      if (!n) {
        free(nm);
        rp_set_error(R, CUCAP_ERR_NOMEM, CUCAP_REPLAY_EXIT_FAILED,
                     "out of memory");
        return;
      }
      R->funcs = n;
      R->capfuncs = nc;
    }
    idx = R->nfuncs++;
    rp_map_put(&R->func, h, idx);
    fi = &R->funcs[idx];
  }
  memset(fi, 0, sizeof *fi);
  fi->handle = h;
  fi->live = (uint64_t)(uintptr_t)live;
  /* A module's function belongs to the module's context, which need not be
   * the current one (a capture may look a function up with another context
   * current: found by fuzz_replay, the function outlived its module's
   * context and a launch used it); a cuKernelGetFunction result belongs to
   * the current context. */
  if (mod_owner)
    rp_map_put(&R->owner, fi->live, (uint64_t)(uintptr_t)mod_owner);
  else if (kind != CUCAP_FB_FUNCTIONKIND_KERNEL)
    rp_owned(R, fi->live);
  fi->live_fn = kind == CUCAP_FB_FUNCTIONKIND_KERNEL ? 0 : fi->live;
  fi->kind = kind;
  fi->name = nm;
  size_t np = 0;
  const cucap_fb_param_info *pp = cucap_fb_function_params(f, &np);
  if (pp && np) {
    fi->params = malloc(np * sizeof *fi->params);
    if (fi->params) {
      memcpy(fi->params, pp, np * sizeof *fi->params);
      fi->nparams = np;
    }
  }
  fi->param_bytes = cucap_fb_function_param_bytes(f);
  fi->layout_bytes = fi->param_bytes; /* end of the last parameter */
  for (size_t i = 0; i < fi->nparams; i++) {
    size_t end = (size_t)fi->params[i].offset + fi->params[i].size;
    if (end > fi->layout_bytes)
      fi->layout_bytes = end;
  }
  if (fi->layout_bytes > RP_MAX_PARAM_BYTES) {
    /* no kernel takes that much (the driver's limit is 32 KiB): a damaged
     * capture (fuzz_replay: a 4 GB layout sized a graph node's block); the
     * recorded argument block alone is launched */
    free(fi->params);
    fi->params = NULL;
    fi->nparams = 0;
    fi->param_bytes = 0;
    fi->layout_bytes = 0;
  }
  R->last_fn_idx = 0; /* funcs[] may have moved or changed */
  R->rep->executed++;
}

static void rp_op_alloc(rp_state *R, const cucap_fb_record *rec,
                        const cucap_fb_alloc *a) {
  int k = cucap_fb_alloc_kind(a);
  uint64_t addr = cucap_fb_alloc_address(a), size = rp_alloc_size(a);
  if (k == CUCAP_FB_ALLOCKIND_VMMCREATE || k == CUCAP_FB_ALLOCKIND_VMMSETACCESS ||
      k == CUCAP_FB_ALLOCKIND_POOL || !rp_alloc_is_device(k)) {
    R->rep->ignored++; /* host memory: payloads are in the capture */
    return;
  }
  if (rp_mem_is_fixed(&R->mem, addr, size)) {
    R->rep->executed++; /* already backed at its recorded address */
    return;
  }
  rp_ctx_rec(R, rec);
  CUdeviceptr p = 0;
  if (!rp_cu(R, R->d.df.MemAlloc(&p, size ? size : 1), "cuMemAlloc"))
    return;
  /* zero-filled like the fixed-address ranges at each pass start
   * (replay_run.c): a pass must not see what an earlier one left there */
  if (!R->capturing && size &&
      (!rp_cu(R, R->d.df.MemsetD8Async(p, 0, size, NULL), "cuMemsetD8 (new allocation)") ||
       !rp_cu(R, R->d.df.StreamSynchronize(NULL), "cuStreamSynchronize")))
    return;
  if (!rp_mem_add_reloc(&R->mem, addr, size, p, 1)) {
    R->d.df.MemFree(p);
    rp_set_error(R, CUCAP_ERR_NOMEM, CUCAP_REPLAY_EXIT_FAILED, "out of memory");
    return;
  }
  rp_owned(R, p);
  R->rep->relocated_allocs++;
  if (!R->warned_reloc_ptr++)
    CUCAP_WARN("replay: relocating device allocations: pointers in kernel "
               "parameters, graph nodes and uploaded data (HtoD payloads) are "
               "patched; pointers a kernel computes and stores in device "
               "memory cannot be");
  R->rep->executed++;
}

static void rp_op_free(rp_state *R, const cucap_fb_record *rec,
                       const cucap_fb_free *f) {
  int k = cucap_fb_free_kind(f);
  if (!rp_alloc_is_device(k)) {
    R->rep->ignored++;
    return;
  }
  uint64_t live = rp_mem_del_reloc(&R->mem, cucap_fb_free_address(f));
  if (live) {
    rp_ctx_rec(R, rec);
    if (!R->capturing) /* a sync during a capture would invalidate it */
      R->d.df.CtxSynchronize(); /* the program's free was ordered after use */
    R->d.df.MemFree(live);
  }
  R->rep->executed++;
}

/* Next staging slot, at least `size` bytes, safe to overwrite. */
static void *rp_stage(rp_state *R, size_t size, unsigned *slot) {
  unsigned s = R->stage_next;
  R->stage_next = (s + 1) % RP_STAGING_SLOTS;
  if (R->stage_used[s] && R->stage_ev[s])
    R->d.df.EventSynchronize(R->stage_ev[s]);
  R->stage_used[s] = 0;
  if (!rp_grow(&R->stage[s], &R->stage_cap[s], size, &R->stage_pinned[s], R))
    return NULL;
  *slot = s;
  return R->stage[s];
}

void rp_stage_done(rp_state *R, unsigned slot, CUstream st,
                   const rp_fns *fn) {
  if (R->stage_ev[slot] && R->stage_ev_ctx[slot] != R->cur) {
    /* events are per context: this one (idle, rp_stage waited) goes */
    R->d.df.EventDestroy(R->stage_ev[slot]);
    R->stage_ev[slot] = NULL;
  }
  if (!R->stage_ev[slot] && R->d.df.EventCreate &&
      R->d.df.EventCreate(&R->stage_ev[slot], CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS)
    R->stage_ev_ctx[slot] = R->cur;
  if (R->stage_ev[slot] && fn->EventRecord(R->stage_ev[slot], st) == CUDA_SUCCESS)
    R->stage_used[slot] = 1;
  else
    fn->StreamSynchronize(st);
}

/* Host buffer holding the payload; *owned: caller must keep/free it. */
void *rp_payload(rp_state *R, const cucap_fb_memcpy *c, uint64_t size,
                 unsigned *slot, int *kept) {
  cucap_hash128 h = rp_h(cucap_fb_memcpy_payload(c));
  uint64_t bsz = 0;
  if (cucap_reader_blob_size(R->r, h, &bsz) != CUCAP_OK || bsz < size)
    return NULL;
  void *dst;
  *kept = 0;
  if (R->capturing) { /* the copy runs when the graph launches */
    dst = malloc(bsz ? bsz : 1);
    if (!dst || !rp_keep(R, dst)) {
      free(dst);
      return NULL;
    }
    *kept = 1;
  } else {
    dst = rp_stage(R, bsz, slot);
  }
  if (!dst || cucap_reader_blob_read(R->r, h, dst, bsz) != CUCAP_OK)
    return NULL;
  return dst;
}

void rp_copy2d_src_dev(CUDA_MEMCPY2D *p, const cucap_fb_copy_geometry *g, uint64_t dev) {
  p->srcMemoryType = CU_MEMORYTYPE_DEVICE;
  p->srcDevice = dev;
  p->srcXInBytes = cucap_fb_copy_geometry_src_x_bytes(g);
  p->srcY = cucap_fb_copy_geometry_src_y(g);
  p->srcPitch = cucap_fb_copy_geometry_src_pitch(g);
}

void rp_copy2d_dst_dev(CUDA_MEMCPY2D *p, const cucap_fb_copy_geometry *g, uint64_t dev) {
  p->dstMemoryType = CU_MEMORYTYPE_DEVICE;
  p->dstDevice = dev;
  p->dstXInBytes = cucap_fb_copy_geometry_dst_x_bytes(g);
  p->dstY = cucap_fb_copy_geometry_dst_y(g);
  p->dstPitch = cucap_fb_copy_geometry_dst_pitch(g);
}

void rp_copy3d_src_dev(CUDA_MEMCPY3D *p, const cucap_fb_copy_geometry *g, uint64_t dev) {
  p->srcMemoryType = CU_MEMORYTYPE_DEVICE;
  p->srcDevice = dev;
  p->srcXInBytes = cucap_fb_copy_geometry_src_x_bytes(g);
  p->srcY = cucap_fb_copy_geometry_src_y(g);
  p->srcZ = cucap_fb_copy_geometry_src_z(g);
  p->srcPitch = cucap_fb_copy_geometry_src_pitch(g);
  p->srcHeight = cucap_fb_copy_geometry_src_height(g);
}

void rp_copy3d_dst_dev(CUDA_MEMCPY3D *p, const cucap_fb_copy_geometry *g, uint64_t dev) {
  p->dstMemoryType = CU_MEMORYTYPE_DEVICE;
  p->dstDevice = dev;
  p->dstXInBytes = cucap_fb_copy_geometry_dst_x_bytes(g);
  p->dstY = cucap_fb_copy_geometry_dst_y(g);
  p->dstZ = cucap_fb_copy_geometry_dst_z(g);
  p->dstPitch = cucap_fb_copy_geometry_dst_pitch(g);
  p->dstHeight = cucap_fb_copy_geometry_dst_height(g);
}

int rp_geometry_fits(const cucap_fb_copy_geometry *g, uint64_t size) {
  uint64_t w = cucap_fb_copy_geometry_width_bytes(g), h = cucap_fb_copy_geometry_height(g);
  uint64_t d = cucap_fb_copy_geometry_depth(g), rows;
  if (!h)
    h = 1;
  if (!d)
    d = 1;
  return !__builtin_mul_overflow(h, d, &rows) && (!w || rows <= size / w);
}

static void rp_copy2d(const cucap_fb_copy_geometry *g, int dtoh,
                      uint64_t dev, void *host, CUstream st, const rp_fns *fn,
                      CUresult *res) {
  uint64_t depth = cucap_fb_copy_geometry_depth(g);
  uint64_t w = cucap_fb_copy_geometry_width_bytes(g);
  uint64_t hgt = cucap_fb_copy_geometry_height(g);
  if (depth > 1 || cucap_fb_copy_geometry_src_z(g) ||
      cucap_fb_copy_geometry_dst_z(g)) {
    CUDA_MEMCPY3D p;
    memset(&p, 0, sizeof p);
    p.WidthInBytes = w;
    p.Height = hgt;
    p.Depth = depth;
    if (dtoh) {
      rp_copy3d_src_dev(&p, g, dev);
      p.dstMemoryType = CU_MEMORYTYPE_HOST;
      p.dstHost = host;
      p.dstPitch = w;
      p.dstHeight = hgt;
    } else {
      rp_copy3d_dst_dev(&p, g, dev);
      p.srcMemoryType = CU_MEMORYTYPE_HOST;
      p.srcHost = host;
      p.srcPitch = w;
      p.srcHeight = hgt;
    }
    *res = fn->Memcpy3DAsync ? fn->Memcpy3DAsync(&p, st) : CUDA_ERROR_NOT_SUPPORTED;
    return;
  }
  CUDA_MEMCPY2D p;
  memset(&p, 0, sizeof p);
  p.WidthInBytes = w;
  p.Height = hgt;
  if (dtoh) {
    rp_copy2d_src_dev(&p, g, dev);
    p.dstMemoryType = CU_MEMORYTYPE_HOST;
    p.dstHost = host;
    p.dstPitch = w;
  } else {
    rp_copy2d_dst_dev(&p, g, dev);
    p.srcMemoryType = CU_MEMORYTYPE_HOST;
    p.srcHost = host;
    p.srcPitch = w;
  }
  *res = fn->Memcpy2DAsync ? fn->Memcpy2DAsync(&p, st) : CUDA_ERROR_NOT_SUPPORTED;
}

static void rp_op_memcpy(rp_state *R, const cucap_fb_record *rec,
                         const cucap_fb_memcpy *c) {
  int k = cucap_fb_memcpy_kind(c);
  uint64_t dst = cucap_fb_memcpy_dst(c), src = cucap_fb_memcpy_src(c);
  uint64_t size = cucap_fb_memcpy_size(c);
  int async = cucap_fb_memcpy_async(c);
  const rp_fns *fn = rp_fn(R, rec);
  if (k == CUCAP_FB_MEMCPYKIND_UNIFIED) {
    int dd = rp_mem_is_recorded(&R->mem, dst), sd = rp_mem_is_recorded(&R->mem, src);
    k = dd && sd ? CUCAP_FB_MEMCPYKIND_DTOD
        : dd     ? CUCAP_FB_MEMCPYKIND_HTOD
        : sd     ? CUCAP_FB_MEMCPYKIND_DTOH
                 : CUCAP_FB_MEMCPYKIND_HTOH;
  }
  if (k == CUCAP_FB_MEMCPYKIND_PEER)
    k = CUCAP_FB_MEMCPYKIND_DTOD;
  if (k == CUCAP_FB_MEMCPYKIND_HTOH || k == CUCAP_FB_MEMCPYKIND_PREFETCH) {
    R->rep->ignored++;
    return;
  }
  if (!size) { /* XLA's InitializeTypedBuffer copies 0 bytes: nothing to do */
    R->rep->executed++;
    return;
  }
  const char *bad = rp_unreplayable(rec);
  if (bad) {
    rp_skip(R, bad);
    return;
  }
  const cucap_fb_copy_geometry *g = cucap_fb_memcpy_geometry(c);
  if (g && (k == CUCAP_FB_MEMCPYKIND_HTOD || k == CUCAP_FB_MEMCPYKIND_DTOH) &&
      !rp_geometry_fits(g, size)) {
    rp_skip(R, "copy whose geometry exceeds its size");
    return;
  }
  if (!rp_ctx_rec(R, rec))
    return;
  CUstream st = rp_stream(R, cucap_fb_memcpy_stream(c));
  CUresult res = CUDA_SUCCESS;
  if (k == CUCAP_FB_MEMCPYKIND_HTOD) {
    if (!cucap_fb_memcpy_has_payload(c)) {
      rp_skip(R, "HtoD copy without stored payload");
      return;
    }
    unsigned slot = 0;
    int kept = 0;
    void *hb = rp_paycache_get(R, c, size, dst, g); /* patched already */
    int cached = hb != NULL;
    if (!cached && (hb = rp_payload(R, c, size, &slot, &kept)))
      rp_patch_payload(R, hb, size, dst, g); /* pointers into moved ranges */
    if (!hb) {
      rp_skip(R, "HtoD copy (payload blob missing)");
      return;
    }
    uint64_t d = rp_tr(R, dst);
    if (R->obj) /* texture/surface handles stored in device memory */
      rp_object_patch_upload(R, hb, size, g ? dst + cucap_fb_copy_geometry_dst_x_bytes(g) : dst,
                             g ? cucap_fb_copy_geometry_width_bytes(g) : 0);
    if (g)
      rp_copy2d(g, 0, d, hb, st, fn, &res);
    else
      res = fn->MemcpyHtoDAsync(d, hb, size, st);
    if (!rp_cu(R, res, "cuMemcpyHtoD"))
      return;
    if (!kept && !cached)
      rp_stage_done(R, slot, st, fn);
    /* a synchronous copy completes before the call returns (errors too) */
    if (!async && !R->capturing &&
        !rp_cu(R, fn->StreamSynchronize(st), "cuStreamSynchronize (synchronous HtoD)"))
      return;
  } else if (k == CUCAP_FB_MEMCPYKIND_DTOH) {
    void *hb;
    if (R->skip_host_reads && R->o->verify == CUCAP_REPLAY_VERIFY_NONE && !R->capturing) {
      R->host_reads_skipped++; /* nothing on the device reads the bytes */
      R->rep->executed++;
      return;
    }
    if (R->dev_mem && size > R->dev_mem) {
      rp_set_error(R, CUCAP_ERR_CORRUPT, CUCAP_REPLAY_EXIT_INPUT,
                   "record %" PRIu64 " (seq %" PRIu64 "): a DtoH copy of %" PRIu64
                   " bytes is larger than this GPU's memory (%" PRIu64 " bytes)",
                   R->rec_index, R->cur_seq, size, R->dev_mem);
      return;
    }
    if (R->capturing) {
      hb = rp_capture_host_buffer(R, size);
      if (!hb) {
        rp_set_error(R, CUCAP_ERR_NOMEM, CUCAP_REPLAY_EXIT_FAILED, "out of memory");
        return;
      }
    } else {
      if (!rp_grow(&R->scratch, &R->scratch_cap, size, &R->scratch_pinned, R)) {
        rp_set_error(R, CUCAP_ERR_NOMEM, CUCAP_REPLAY_EXIT_FAILED, "out of memory");
        return;
      }
      hb = R->scratch;
    }
    uint64_t s = rp_tr(R, src);
    if (g)
      rp_copy2d(g, 1, s, hb, st, fn, &res);
    else
      res = fn->MemcpyDtoHAsync(hb, s, size, st);
    if (!rp_cu(R, res, "cuMemcpyDtoH"))
      return;
    if (R->capturing) {
      /* runs at graph launch: the bytes land in hb then (kept until the end
       * of the pass); its CopyResult snapshot follows the graph launch */
      R->op.host_data = hb;
      R->op.host_size = size;
    } else {
      if (!rp_cu(R, fn->StreamSynchronize(st), "cuStreamSynchronize"))
        return;
      R->op.host_data = hb; /* for observers (verify) */
      R->op.host_size = size;
    }
  } else { /* DtoD */
    uint64_t d = rp_tr(R, dst), s = rp_tr(R, src);
    if (g) {
      CUDA_MEMCPY2D p;
      memset(&p, 0, sizeof p);
      p.WidthInBytes = cucap_fb_copy_geometry_width_bytes(g);
      p.Height = cucap_fb_copy_geometry_height(g);
      rp_copy2d_src_dev(&p, g, s);
      rp_copy2d_dst_dev(&p, g, d);
      res = fn->Memcpy2DAsync(&p, st);
    } else {
      res = fn->MemcpyDtoDAsync(d, s, size, st);
    }
    if (!rp_cu(R, res, "cuMemcpyDtoD"))
      return;
  }
  R->rep->executed++;
}

static void rp_op_memset(rp_state *R, const cucap_fb_record *rec,
                         const cucap_fb_memset *m) {
  const rp_fns *fn = rp_fn(R, rec);
  if (!rp_ctx_rec(R, rec))
    return;
  CUstream st = rp_stream(R, cucap_fb_memset_stream(m));
  uint64_t d = rp_tr(R, cucap_fb_memset_dst(m));
  uint32_t v = cucap_fb_memset_value(m);
  uint64_t n = cucap_fb_memset_count(m), h = cucap_fb_memset_height(m);
  uint64_t pitch = cucap_fb_memset_pitch(m);
  int es = cucap_fb_memset_elem_size(m);
  CUresult r;
  if (h > 1) {
    r = es == 4   ? fn->MemsetD2D32Async(d, pitch, v, n, h, st)
        : es == 2 ? fn->MemsetD2D16Async(d, pitch, (unsigned short)v, n, h, st)
                  : fn->MemsetD2D8Async(d, pitch, (unsigned char)v, n, h, st);
  } else {
    r = es == 4   ? fn->MemsetD32Async(d, v, n, st)
        : es == 2 ? fn->MemsetD16Async(d, (unsigned short)v, n, st)
                  : fn->MemsetD8Async(d, (unsigned char)v, n, st);
  }
  if (!rp_cu(R, r, "cuMemset"))
    return;
  R->rep->executed++;
}

#define RP_MAX_ATTRS 32

static void rp_op_launch(rp_state *R, const cucap_fb_record *rec,
                         const cucap_fb_launch *l) {
  const char *bad = rp_unreplayable(rec);
  if (bad) {
    rp_skip(R, bad);
    return;
  }
  const rp_fns *fn = rp_fn(R, rec);
  uint64_t idx, fh = cucap_fb_launch_function(l);
  if (R->last_fn_idx && R->last_fn_handle == fh) {
    idx = R->last_fn_idx - 1; /* loops launch the same kernel again and again */
  } else {
    if (!rp_map_get(&R->func, fh, &idx)) {
      rp_skip(R, "launch of an unknown function");
      return;
    }
    R->last_fn_handle = fh;
    R->last_fn_idx = idx + 1;
  }
  rp_func *fi = &R->funcs[idx];
  if (!rp_ctx_rec(R, rec))
    return;
  if (!rp_func_fn(R, fi)) {
    if (!R->failed)
      rp_skip(R, "launch of a function whose module was unloaded");
    return;
  }
  rp_func_layout(R, fi);
  /* argument block: inline or a blob; copied so it can be patched */
  size_t n = 0;
  const uint8_t *inl = cucap_fb_launch_args(l, &n);
  uint8_t *args = NULL;
  if (cucap_fb_launch_has_args_blob(l)) {
    cucap_hash128 h = rp_h(cucap_fb_launch_args_blob(l));
    uint64_t bsz = 0;
    if (cucap_reader_blob_size(R->r, h, &bsz) != CUCAP_OK ||
        !rp_grow(&R->expect, &R->expect_cap, bsz + 8, &R->expect_pinned, R) ||
        cucap_reader_blob_read(R->r, h, R->expect, bsz) != CUCAP_OK) {
      rp_skip(R, "launch (argument blob missing)");
      return;
    }
    n = bsz;
    args = R->expect;
  } else {
    if (!rp_grow(&R->expect, &R->expect_cap, n + 8, &R->expect_pinned, R)) {
      rp_set_error(R, CUCAP_ERR_NOMEM, CUCAP_REPLAY_EXIT_FAILED, "out of memory");
      return;
    }
    if (n)
      memcpy(R->expect, inl, n);
    args = R->expect;
  }
  /* the driver reads every parameter at its offset: make sure the block
   * covers the recorded layout (zero-filled past what was stored) */
  size_t need = n;
  if (fi->layout_bytes > need)
    need = fi->layout_bytes;
  if (need > n) {
    if (!rp_grow(&R->expect, &R->expect_cap, need + 8, &R->expect_pinned, R)) {
      rp_skip(R, "launch (parameter layout too large)");
      return;
    }
    args = R->expect; /* rp_grow does not keep contents: copy again */
    if (cucap_fb_launch_has_args_blob(l)) {
      if (cucap_reader_blob_read(R->r, rp_h(cucap_fb_launch_args_blob(l)),
                                 args, n) != CUCAP_OK) {
        rp_skip(R, "launch (argument blob missing)");
        return;
      }
    } else if (n) {
      memcpy(args, inl, n);
    }
    memset(args + n, 0, need - n);
  }
  /* relocation: patch 8-byte parameters that point into moved ranges */
  if (R->mem.nreloc) {
    if (fi->nparams) {
      for (size_t i = 0; i < fi->nparams; i++) {
        uint32_t off = fi->params[i].offset, psz = fi->params[i].size;
        if (psz > 8) {
          /* a struct parameter (CUTLASS/cuBLAS Params, cublasSplitKParams
           * with its alpha/beta pointers into cuBLAS's deviceConstants) */
          R->rep->patched_params += rp_mem_patch_struct(&R->mem, args, n, off, psz);
        } else if (psz == 8 && off % 8 == 0 && off + 8 <= n) {
          uint64_t v;
          memcpy(&v, args + off, 8);
          int rel = 0;
          uint64_t nv = rp_mem_translate(&R->mem, v, &rel);
          if (rel) {
            memcpy(args + off, &nv, 8);
            R->rep->patched_params++;
          }
        }
      }
    } else {
      for (size_t off = 0; off + 8 <= n; off += 8) {
        uint64_t v;
        memcpy(&v, args + off, 8);
        int rel = 0;
        uint64_t nv = rp_mem_translate(&R->mem, v, &rel);
        if (rel) {
          memcpy(args + off, &nv, 8);
          R->rep->patched_params++;
        }
      }
    }
  }
  if (R->obj)
    rp_object_patch_params(R, fi, args, n);
  void *kp[RP_MAX_PARAMS];
  void **kparams = NULL, **extra = NULL;
  size_t argsize = n;
  void *extra_buf[5] = {CU_LAUNCH_PARAM_BUFFER_POINTER, args,
                        CU_LAUNCH_PARAM_BUFFER_SIZE, &argsize,
                        CU_LAUNCH_PARAM_END};
  if (fi->nparams && fi->nparams <= RP_MAX_PARAMS) {
    /* kernelParams: no size limit on the parameter block (CUDA 12.1+) */
    for (size_t i = 0; i < fi->nparams; i++) {
      uint32_t off = fi->params[i].offset;
      kp[i] = off < need ? args + off : args; /* args holds need bytes */
    }
    kparams = kp;
  } else if (n) {
    extra = extra_buf;
  }
  const cucap_fb_dim3 *gd = cucap_fb_launch_grid(l), *bd = cucap_fb_launch_block(l);
  cucap_fb_dim3 one = {1, 1, 1};
  if (!gd)
    gd = &one;
  if (!bd)
    bd = &one;
  CUstream st = rp_stream(R, cucap_fb_launch_stream(l));
  CUfunction f = (CUfunction)(uintptr_t)fi->live_fn;
  unsigned shm = cucap_fb_launch_shared_mem(l);
  if (R->attr) /* attributes set before the function was known */
    rp_attr_before_launch(R, fi);
  CUresult r;
  if (R->o->nobservers) { /* observers see the launch exactly around the call */
    R->op.launch_index = cucap_fb_launch_launch_index(l);
    R->op.kernel = fi->name;
    R->op.function = (uint64_t)(uintptr_t)f;
    R->op.stream = (uint64_t)(uintptr_t)st;
    R->op.context = (uint64_t)(uintptr_t)R->cur;
    R->op.callstack = cucap_fb_record_stack(rec);
    rp_obs_op_before(R);
  }
  int k = cucap_fb_launch_kind(l);
  if (k == CUCAP_FB_LAUNCHKIND_KERNELEX && fn->LaunchKernelEx) {
    CUlaunchAttribute at[RP_MAX_ATTRS];
    unsigned na = rp_attr_launch_attrs(R, l, at, RP_MAX_ATTRS);
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = gd->x;
    cfg.gridDimY = gd->y;
    cfg.gridDimZ = gd->z;
    cfg.blockDimX = bd->x;
    cfg.blockDimY = bd->y;
    cfg.blockDimZ = bd->z;
    cfg.sharedMemBytes = shm;
    cfg.hStream = st;
    cfg.attrs = na ? at : NULL;
    cfg.numAttrs = na;
    r = fn->LaunchKernelEx(&cfg, f, kparams, extra);
  } else if (k == CUCAP_FB_LAUNCHKIND_COOPERATIVE && fn->LaunchCooperativeKernel) {
    if (!kparams && n) { /* no extra path for cooperative launches */
      rp_skip(R, "cooperative launch without parameter layout");
      return;
    }
    r = fn->LaunchCooperativeKernel(f, gd->x, gd->y, gd->z, bd->x, bd->y, bd->z,
                                    shm, st, kparams);
  } else {
    r = fn->LaunchKernel(f, gd->x, gd->y, gd->z, bd->x, bd->y, bd->z, shm, st,
                         kparams, extra);
  }
  if (r != CUDA_SUCCESS) { /* message formatted only on failure */
    char what[200];
    snprintf(what, sizeof what, "launch of %s (launch %" PRIu64 ")", fi->name,
             cucap_fb_launch_launch_index(l));
    rp_cu(R, r, what);
    return;
  }
  if (!R->capturing) /* captured: runs (and counts) at cuGraphLaunch */
    R->rep->launches++;
  R->rep->executed++;
}

static void rp_op_stream(rp_state *R, const cucap_fb_record *rec,
                         const cucap_fb_stream *s) {
  const rp_fns *fn = rp_fn(R, rec);
  uint64_t h = cucap_fb_stream_handle(s), live;
  if (!rp_ctx_rec(R, rec))
    return;
  switch (cucap_fb_stream_op(s)) {
  case CUCAP_FB_STREAMOP_CREATE: {
    CUstream ns = NULL;
    if (!rp_cu(R, R->d.df.StreamCreateWithPriority(&ns, cucap_fb_stream_flags(s),
                                                   cucap_fb_stream_priority(s)),
               "cuStreamCreateWithPriority"))
      return;
    if (!rp_live_put(R, &R->stream, h, (uint64_t)(uintptr_t)ns))
      return;
    rp_owned(R, (uint64_t)(uintptr_t)ns);
    R->last_stream_rec = 0;
    break;
  }
  case CUCAP_FB_STREAMOP_DESTROY:
    R->last_stream_rec = 0;
    if (rp_map_del(&R->stream, h, &live))
      rp_live_destroy(R, &R->stream, live);
    break;
  case CUCAP_FB_STREAMOP_SYNCHRONIZE:
    if (!rp_cu(R, fn->StreamSynchronize(rp_stream(R, h)), "cuStreamSynchronize"))
      return;
    break;
  case CUCAP_FB_STREAMOP_WAITEVENT: {
    CUevent e = rp_event(R, cucap_fb_stream_event(s));
    if (!e) {
      rp_skip(R, "cuStreamWaitEvent (unknown event)");
      return;
    }
    if (!rp_cu(R, fn->StreamWaitEvent(rp_stream(R, h), e, 0), "cuStreamWaitEvent"))
      return;
    break;
  }
  case CUCAP_FB_STREAMOP_BEGINCAPTURE:
    if (!fn->StreamBeginCapture) {
      rp_skip(R, "cuStreamBeginCapture (driver lacks it)");
      return;
    }
    if (rp_capture_begin_dry(R, rec, s))
      break; /* its graph is rebuilt at instantiation (replay_capture.c) */
    if (!rp_cu(R, fn->StreamBeginCapture(rp_stream(R, h),
                                         (CUstreamCaptureMode)cucap_fb_stream_capture_mode(s)),
               "cuStreamBeginCapture"))
      return;
    rp_capture_open(R, h, rp_stream(R, h));
    R->capturing++;
    break;
  case CUCAP_FB_STREAMOP_ENDCAPTURE: {
    CUgraph gr = NULL;
    switch (rp_capture_end_dry(R, s)) {
    case 1:
      R->rep->executed++;
      return;
    case 2:
      return;
    default:
      break;
    }
    if (!fn->StreamEndCapture) {
      rp_skip(R, "cuStreamEndCapture (driver lacks it)");
      return;
    }
    if (!rp_cu(R, fn->StreamEndCapture(rp_stream(R, h), &gr), "cuStreamEndCapture"))
      return;
    rp_capture_closed(R, h);
    if (R->capturing)
      R->capturing--;
    if (!rp_live_put(R, &R->graph, cucap_fb_stream_graph(s), (uint64_t)(uintptr_t)gr))
      return;
    break;
  }
  case CUCAP_FB_STREAMOP_QUERY:
    /* A query that succeeded told the program the stream's work was done,
     * and what it did next may rely on it (XLA's and PyTorch's allocators
     * reuse memory on another stream after it, with no event between): the
     * replay waits there. (Failed queries never reach the executor.) */
    if (R->capturing) {
      R->rep->ignored++;
      return;
    }
    if (!rp_cu(R, fn->StreamSynchronize(rp_stream(R, h)), "cuStreamSynchronize (cuStreamQuery)"))
      return;
    break;
  case CUCAP_FB_STREAMOP_WAITVALUE:
  case CUCAP_FB_STREAMOP_WRITEVALUE:
    rp_skip(R, rp_unreplayable(rec));
    return;
  default: /* set attribute */
    R->rep->ignored++;
    return;
  }
  R->rep->executed++;
}

static void rp_op_event(rp_state *R, const cucap_fb_record *rec,
                        const cucap_fb_event *e) {
  const rp_fns *fn = rp_fn(R, rec);
  uint64_t h = cucap_fb_event_handle(e), live;
  if (!rp_ctx_rec(R, rec))
    return;
  switch (cucap_fb_event_op(e)) {
  case CUCAP_FB_EVENTOP_CREATE: {
    CUevent ne = NULL;
    if (!rp_cu(R, R->d.df.EventCreate(&ne, cucap_fb_event_flags(e)), "cuEventCreate"))
      return;
    if (!rp_live_put(R, &R->event, h, (uint64_t)(uintptr_t)ne))
      return;
    rp_owned(R, (uint64_t)(uintptr_t)ne);
    break;
  }
  case CUCAP_FB_EVENTOP_DESTROY:
    if (rp_map_del(&R->event, h, &live))
      R->d.df.EventDestroy((CUevent)(uintptr_t)live);
    break;
  case CUCAP_FB_EVENTOP_RECORD: {
    CUevent ev = rp_event(R, h);
    if (!ev) {
      rp_skip(R, "cuEventRecord (unknown event)");
      return;
    }
    if (!rp_cu(R, fn->EventRecord(ev, rp_stream(R, cucap_fb_event_stream(e))),
               "cuEventRecord"))
      return;
    break;
  }
  case CUCAP_FB_EVENTOP_SYNCHRONIZE: {
    CUevent ev = rp_event(R, h);
    if (ev && !rp_cu(R, R->d.df.EventSynchronize(ev), "cuEventSynchronize"))
      return;
    break;
  }
  case CUCAP_FB_EVENTOP_QUERY: { /* succeeded: the work before it was done (as above) */
    CUevent ev = R->capturing ? NULL : rp_event(R, h);
    if (!ev) {
      R->rep->ignored++;
      return;
    }
    if (!rp_cu(R, R->d.df.EventSynchronize(ev), "cuEventSynchronize (cuEventQuery)"))
      return;
    break;
  }
  default:
    R->rep->ignored++;
    return;
  }
  R->rep->executed++;
}

static void rp_op_graph(rp_state *R, const cucap_fb_record *rec,
                        const cucap_fb_graph *g) {
  const rp_fns *fn = rp_fn(R, rec);
  uint64_t live;
  if (!rp_ctx_rec(R, rec))
    return;
  switch (cucap_fb_record_seq(rec) ? cucap_fb_graph_op(g) : -1) {
  case CUCAP_FB_GRAPHOP_LAUNCH:
    if (!rp_map_get(&R->gexec, cucap_fb_graph_exec(g), &live)) {
      rp_skip(R, "cuGraphLaunch (graph not rebuilt)");
      return;
    }
    rp_graph_launch_payloads(R, g); /* host bytes its copy nodes read */
    if (!rp_cu(R, fn->GraphLaunch((CUgraphExec)(uintptr_t)live,
                                  rp_stream(R, cucap_fb_graph_stream(g))),
               "cuGraphLaunch"))
      return;
    R->rep->launches++;
    break;
  case CUCAP_FB_GRAPHOP_EXECDESTROY:
    if (rp_map_del(&R->gexec, cucap_fb_graph_exec(g), &live))
      R->d.df.GraphExecDestroy((CUgraphExec)(uintptr_t)live);
    rp_graph_exec_destroyed(R, cucap_fb_graph_exec(g)); /* and its rebuilt graph */
    break;
  case CUCAP_FB_GRAPHOP_DESTROY:
    if (rp_map_del(&R->graph, cucap_fb_graph_graph(g), &live))
      R->d.df.GraphDestroy((CUgraph)(uintptr_t)live);
    break;
  default: /* instantiate, updates, upload, topology notes (replay_graph_exec.c) */
    rp_graph_op(R, rec, g);
    return;
  }
  R->rep->executed++;
}

void rp_execute(rp_state *R, const cucap_fb_record *rec) {
  R->cur_seq = cucap_fb_record_seq(rec);
  if (cucap_fb_record_result(rec) != 0) {
    R->rep->ignored++; /* the call failed in the program */
    return;
  }
  if (R->gs && rp_capture_swallow(R, rec)) {
    R->rep->ignored++; /* captured into a graph that is rebuilt instead */
    return;
  }
  uint64_t before = R->rep->executed, skipped = R->rep->skipped;
  int body = cucap_fb_record_body_type(rec);
  int watched = R->o->nobservers != 0;
  if (watched)
    rp_obs_op_start(R, rec); /* launches: announced in rp_op_launch */
  switch (body) {
  case CUCAP_FB_BODY_CONTEXT:
    rp_op_context(R, rec, cucap_fb_record_body_as_context(rec));
    break;
  case CUCAP_FB_BODY_MODULE:
    rp_op_module(R, rec, cucap_fb_record_body_as_module(rec));
    break;
  case CUCAP_FB_BODY_GLOBAL:
    rp_op_global(R, rec, cucap_fb_record_body_as_global(rec));
    break;
  case CUCAP_FB_BODY_FUNCTION:
    rp_op_function(R, rec, cucap_fb_record_body_as_function(rec));
    break;
  case CUCAP_FB_BODY_ALLOC: {
    const cucap_fb_alloc *a = cucap_fb_record_body_as_alloc(rec);
    if (cucap_fb_alloc_kind(a) == CUCAP_FB_ALLOCKIND_ARRAY)
      rp_array_alloc(R, rec, a);
    else
      rp_op_alloc(R, rec, a);
    break;
  }
  case CUCAP_FB_BODY_FREE: {
    const cucap_fb_free *f = cucap_fb_record_body_as_free(rec);
    if (cucap_fb_free_kind(f) == CUCAP_FB_ALLOCKIND_ARRAY)
      rp_array_free(R, rec, f);
    else
      rp_op_free(R, rec, f);
    break;
  }
  case CUCAP_FB_BODY_MEMCPY: {
    const cucap_fb_memcpy *c = cucap_fb_record_body_as_memcpy(rec);
    if (rp_array_is_copy(c))
      rp_array_memcpy(R, rec, c);
    else
      rp_op_memcpy(R, rec, c);
    break;
  }
  case CUCAP_FB_BODY_OBJECT:
    rp_object_execute(R, rec, cucap_fb_record_body_as_object(rec));
    break;
  case CUCAP_FB_BODY_MEMSET:
    rp_op_memset(R, rec, cucap_fb_record_body_as_memset(rec));
    break;
  case CUCAP_FB_BODY_LAUNCH:
    rp_op_launch(R, rec, cucap_fb_record_body_as_launch(rec));
    break;
  case CUCAP_FB_BODY_STREAM:
    rp_op_stream(R, rec, cucap_fb_record_body_as_stream(rec));
    break;
  case CUCAP_FB_BODY_EVENT:
    rp_op_event(R, rec, cucap_fb_record_body_as_event(rec));
    break;
  case CUCAP_FB_BODY_GRAPH:
    rp_op_graph(R, rec, cucap_fb_record_body_as_graph(rec));
    break;
  case CUCAP_FB_BODY_SNAPSHOT: {
    /* replay input: managed memory the program wrote on the host; every
     * other reason is checked by the verify observer */
    const cucap_fb_snapshot *sn = cucap_fb_record_body_as_snapshot(rec);
    if (cucap_fb_snapshot_reason(sn) == CUCAP_FB_SNAPSHOTREASON_HOSTWRITE)
      rp_host_write(R, sn);
    else
      R->rep->ignored++;
    break;
  }
  case CUCAP_FB_BODY_LAUNCHHASH:
    R->rep->ignored++;
    break;
  default: {
    if (cucap_fb_record_body_type(rec) == CUCAP_FB_BODY_NONE && rp_attr_execute(R, rec))
      break; /* attribute/limit calls, replayed from Record.args */
    const char *bad = rp_unreplayable(rec);
    if (bad) {
      if (cucap_fb_record_body_type(rec) == CUCAP_FB_BODY_NOTE) {
        const char *t = cucap_fb_note_text(cucap_fb_record_body_as_note(rec));
        rp_skip(R, t && *t ? t : bad);
      } else {
        rp_skip(R, bad);
      }
    } else {
      R->rep->ignored++; /* callstacks, module maps, timings, notes, ... */
      if (cucap_fb_record_body_type(rec) == CUCAP_FB_BODY_NONE &&
          cucap_fb_record_call(rec))
        R->rep->bodyless_calls++; /* queries etc. (or an older recorder) */
    }
    break;
  }
  }
  if (R->o->sync_each && R->rep->executed != before && !R->failed &&
      !R->capturing)
    rp_cu(R, R->d.df.CtxSynchronize(), "cuCtxSynchronize (--sync)");
  if (watched && R->op_announced)
    rp_obs_op_after(R, R->failed ? -1 : R->rep->skipped != skipped ? 1 : 0);
}
