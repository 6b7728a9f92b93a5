/* replay_exec.c - executes one record on the live driver.
 *
 * Handles map recorded -> live objects (contexts per recording thread,
 * streams, events, modules/libraries, functions, graphs); every async op
 * runs on its replayed stream with the recorded variant (legacy or
 * per-thread default stream); device addresses go through the relocation
 * table (identity at fixed addresses). The driver of the whole run is
 * replay_run.c; verification is an observer (verify_observer.c), which sees
 * the bytes of every copy to the host through op->host_data. This file
 * holds the handles, the classification of records, the context, stream,
 * event and graph ops and the dispatch (rp_execute); the code ops are in
 * replay_exec_kernel.c, the memory ops in replay_exec_copy.c. */
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

void rp_set_error(rp_state *R, cucap_status st, const char *fmt, ...) {
  if (R->rep->error[0])
    return; /* keep the first */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(R->rep->error, sizeof R->rep->error, fmt, ap);
  va_end(ap);
  R->rep->status = st;
  R->failed = 1;
}

/* A driver call failed during replay: stop with a precise message. */
int rp_cu(rp_state *R, CUresult r, const char *call) {
  if (r == CUDA_SUCCESS)
    return 1;
  rp_set_error(R, CUCAP_ERR_CUDA,
               "record %" PRIu64 " (seq %" PRIu64 "): %s failed: %s (%d)",
               R->rec_index, R->cur_seq, call, rp_cu_err(&R->d, r), (int)r);
  return 0;
}

/* Grows a host buffer, pinned when possible (DMA at full speed). */
cucap_status rp_grow(void **buf, size_t *cap, size_t need, int *pinned, rp_state *R) {
  if (need <= *cap && *buf)
    return CUCAP_OK;
  /* a corrupt size: no op moves more than the GPU holds */
  CUCAP_RETURN_IF(need > ((size_t)1 << 40) || (R->dev_mem && need > R->dev_mem + 4096),
                  CUCAP_ERR_TOO_LARGE);
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
  CUCAP_RETURN_IF(!p, CUCAP_ERR_NOMEM);
  *buf = p;
  *cap = nc;
  return CUCAP_OK;
}

/* ---------------------------------------------------------------- handles */

static cucap_status rp_ctx_use(rp_state *R, uint64_t rec_ctx) {
  if (!rec_ctx)
    return CUCAP_OK;
  uint64_t live = 0;
  if (rec_ctx == R->cx.last_ctx_rec && (CUcontext)(uintptr_t)R->cx.last_ctx_live == R->cx.cur)
    return CUCAP_OK; /* same context as the previous op: nothing to do */
  if (!cucap_map_get(&R->cx.ctx, rec_ctx, &live)) {
    if (!R->cx.warned_ctx++)
      CUCAP_INFO("replay: context 0x%" PRIx64 " not created by a recorded "
                 "call; using the primary context", rec_ctx);
    live = (uint64_t)(uintptr_t)R->cx.primary;
    cucap_map_put(&R->cx.ctx, rec_ctx, live);
  }
  if ((CUcontext)(uintptr_t)live != R->cx.cur) {
    CUCAP_RETURN_IF(!rp_cu(R, R->d.df.CtxSetCurrent((CUcontext)(uintptr_t)live),
                           "cuCtxSetCurrent"),
                    CUCAP_ERR_CUDA);
    R->cx.cur = (CUcontext)(uintptr_t)live;
  }
  R->cx.last_ctx_rec = rec_ctx;
  R->cx.last_ctx_live = live;
  return CUCAP_OK;
}

static cucap_status rp_ctx_switch(rp_state *R, CUcontext live) {
  if (live && live != R->cx.cur) {
    CUCAP_RETURN_IF(!rp_cu(R, R->d.df.CtxSetCurrent(live), "cuCtxSetCurrent"), CUCAP_ERR_CUDA);
    R->cx.cur = live;
  }
  return CUCAP_OK;
}

/* The context an op of this record runs in: Record.context when the
 * recorder set it, else the current context of the recording thread as
 * replayed so far (SetCurrent/Push/Pop/Create per tid). */
cucap_status rp_ctx_rec(rp_state *R, const cucap_fb_record *rec) {
  uint64_t c = cucap_fb_record_context(rec), live;
  if (c)
    return rp_ctx_use(R, c);
  if (cucap_map_get(&R->cx.tid_ctx, cucap_fb_record_tid(rec), &live))
    return rp_ctx_switch(R, (CUcontext)(uintptr_t)live);
  return CUCAP_OK;
}

void rp_ctx_set_tid(rp_state *R, const cucap_fb_record *rec,
                    CUcontext live) {
  cucap_map_put(&R->cx.tid_ctx, cucap_fb_record_tid(rec), (uint64_t)(uintptr_t)live);
}

CUstream rp_stream(rp_state *R, uint64_t h) {
  if (h <= 2) /* NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD */
    return (CUstream)(uintptr_t)h;
  uint64_t v;
  if (h == R->cx.last_stream_rec)
    return (CUstream)(uintptr_t)R->cx.last_stream_live;
  if (cucap_map_get(&R->cx.stream, h, &v)) {
    R->cx.last_stream_rec = h;
    R->cx.last_stream_live = v;
    return (CUstream)(uintptr_t)v;
  }
  if (!R->cx.warned_stream++)
    CUCAP_WARN("replay: stream 0x%" PRIx64 " unknown (created before the "
               "capture started?); using the default stream", h);
  return NULL;
}

static CUevent rp_event(rp_state *R, uint64_t h) {
  uint64_t v = 0;
  if (!cucap_map_get(&R->cx.event, h, &v))
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
  if ((CUcontext)(uintptr_t)live == R->cx.cur) {
    R->d.df.CtxSetCurrent(R->cx.primary);
    R->cx.cur = R->cx.primary;
  }
  for (size_t i = 0; i < R->cx.tid_ctx.cap + 2; i++)
    if (R->cx.tid_ctx.vals && R->cx.tid_ctx.vals[i] == live)
      R->cx.tid_ctx.vals[i] = (uint64_t)(uintptr_t)R->cx.primary;
  for (size_t i = 0; i < R->cx.nctx_stack; i++)
    if (R->cx.ctx_stack[i] == live)
      R->cx.ctx_stack[i] = (uint64_t)(uintptr_t)R->cx.primary;
  R->cx.last_ctx_rec = 0;
}

static void rp_ctx_destroy_created(rp_state *R, uint64_t h) {
  uint64_t live;
  if (R->cx.keep_ctx)
    rp_ctx_kept_release(R, h);
  if (!cucap_map_del(&R->cx.ctx_created, h, &live))
    return;
  cucap_map_del(&R->cx.ctx, h, NULL);
  rp_ctx_unref(R, live);
  rp_ctx_dying(R, (CUcontext)(uintptr_t)live); /* and its arrays, textures */
  if (R->d.df.CtxDestroy)
    R->d.df.CtxDestroy((CUcontext)(uintptr_t)live);
}

static void rp_op_context(rp_state *R, const cucap_fb_record *rec,
                          const cucap_fb_context *c) {
  uint64_t h = cucap_fb_context_handle(c);
  R->cx.last_ctx_rec = 0; /* the recorded -> live mapping may change */
  switch (cucap_fb_context_op(c)) {
  case CUCAP_FB_CONTEXTOP_CREATE: {
    CUcontext nc = NULL;
    if (!R->d.df.CtxCreate) {
      rp_skip(R, "cuCtxCreate (driver lacks it)");
      cucap_map_put(&R->cx.ctx, h, (uint64_t)(uintptr_t)R->cx.primary);
      return;
    }
    if (R->cx.keep_ctx && rp_ctx_kept_reuse(R, rec, h))
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
    R->cx.cur = nc; /* cuCtxCreate makes it current */
    if (!cucap_map_put(R->cx.keep_ctx ? &R->cx.ctx_kept : &R->cx.ctx_created, h,
                    (uint64_t)(uintptr_t)nc)) {
      R->d.df.CtxDestroy(nc);
      R->d.df.CtxSetCurrent(R->cx.primary);
      R->cx.cur = R->cx.primary;
      rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
      return;
    }
    cucap_map_put(&R->cx.ctx, h, (uint64_t)(uintptr_t)nc);
    rp_ctx_set_tid(R, rec, nc);
    break;
  }
  case CUCAP_FB_CONTEXTOP_DESTROY:
    rp_ctx_destroy_created(R, h);
    break;
  case CUCAP_FB_CONTEXTOP_PRIMARYRETAIN:
    cucap_map_put(&R->cx.ctx, h, (uint64_t)(uintptr_t)R->cx.primary);
    break;
  case CUCAP_FB_CONTEXTOP_SETCURRENT:
  case CUCAP_FB_CONTEXTOP_PUSH: {
    uint64_t live = 0, prev = 0;
    if (h && rp_ctx_use(R, h) != CUCAP_OK)
      return;
    if (h)
      cucap_map_get(&R->cx.ctx, h, &live);
    if (cucap_fb_context_op(c) == CUCAP_FB_CONTEXTOP_PUSH &&
        R->cx.nctx_stack < RP_CTX_STACK) {
      cucap_map_get(&R->cx.tid_ctx, cucap_fb_record_tid(rec), &prev);
      R->cx.ctx_stack[R->cx.nctx_stack++] = prev;
    }
    rp_ctx_set_tid(R, rec, (CUcontext)(uintptr_t)live);
    break;
  }
  case CUCAP_FB_CONTEXTOP_POP: {
    uint64_t prev = R->cx.nctx_stack ? R->cx.ctx_stack[--R->cx.nctx_stack] : 0;
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

static void rp_op_stream(rp_state *R, const cucap_fb_record *rec,
                         const cucap_fb_stream *s) {
  const rp_fns *fn = rp_fn(R, rec);
  uint64_t h = cucap_fb_stream_handle(s), live;
  if (rp_ctx_rec(R, rec) != CUCAP_OK)
    return;
  switch (cucap_fb_stream_op(s)) {
  case CUCAP_FB_STREAMOP_CREATE: {
    CUstream ns = NULL;
    if (!rp_cu(R, R->d.df.StreamCreateWithPriority(&ns, cucap_fb_stream_flags(s),
                                                   cucap_fb_stream_priority(s)),
               "cuStreamCreateWithPriority"))
      return;
    if (rp_live_put(R, &R->cx.stream, h, (uint64_t)(uintptr_t)ns) != CUCAP_OK)
      return;
    rp_owned(R, (uint64_t)(uintptr_t)ns);
    R->cx.last_stream_rec = 0;
    break;
  }
  case CUCAP_FB_STREAMOP_DESTROY:
    R->cx.last_stream_rec = 0;
    if (cucap_map_del(&R->cx.stream, h, &live))
      rp_live_destroy(R, &R->cx.stream, live);
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
    if (rp_live_put(R, &R->cx.graph, cucap_fb_stream_graph(s), (uint64_t)(uintptr_t)gr) != CUCAP_OK)
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
  if (rp_ctx_rec(R, rec) != CUCAP_OK)
    return;
  switch (cucap_fb_event_op(e)) {
  case CUCAP_FB_EVENTOP_CREATE: {
    CUevent ne = NULL;
    if (!rp_cu(R, R->d.df.EventCreate(&ne, cucap_fb_event_flags(e)), "cuEventCreate"))
      return;
    if (rp_live_put(R, &R->cx.event, h, (uint64_t)(uintptr_t)ne) != CUCAP_OK)
      return;
    rp_owned(R, (uint64_t)(uintptr_t)ne);
    break;
  }
  case CUCAP_FB_EVENTOP_DESTROY:
    if (cucap_map_del(&R->cx.event, h, &live))
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
  if (rp_ctx_rec(R, rec) != CUCAP_OK)
    return;
  switch (cucap_fb_record_seq(rec) ? cucap_fb_graph_op(g) : -1) {
  case CUCAP_FB_GRAPHOP_LAUNCH:
    if (!cucap_map_get(&R->cx.gexec, cucap_fb_graph_exec(g), &live)) {
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
    if (cucap_map_del(&R->cx.gexec, cucap_fb_graph_exec(g), &live))
      R->d.df.GraphExecDestroy((CUgraphExec)(uintptr_t)live);
    rp_graph_exec_destroyed(R, cucap_fb_graph_exec(g)); /* and its rebuilt graph */
    break;
  case CUCAP_FB_GRAPHOP_DESTROY:
    if (cucap_map_del(&R->cx.graph, cucap_fb_graph_graph(g), &live))
      R->d.df.GraphDestroy((CUgraph)(uintptr_t)live);
    break;
  default: /* instantiate, updates, upload, topology notes (replay_graph_exec.c) */
    rp_graph_op(R, rec, g);
    return;
  }
  R->rep->executed++;
}

/* rp_dispatch, a record of no op of its own: an attribute or limit call,
 * a skip with its reason, or nothing to replay. */
static void rp_op_other(rp_state *R, const cucap_fb_record *rec) {
  if (cucap_fb_record_body_type(rec) == CUCAP_FB_BODY_NONE && rp_attr_execute(R, rec))
    return; /* attribute/limit calls, replayed from Record.args */
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
}

/* rp_execute, the op of the record by its body. */
static void rp_dispatch(rp_state *R, const cucap_fb_record *rec, int body) {
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
  default:
    rp_op_other(R, rec);
    break;
  }
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
  rp_dispatch(R, rec, body);
  if (R->o->sync_each && R->rep->executed != before && !R->failed &&
      !R->capturing)
    rp_cu(R, R->d.df.CtxSynchronize(), "cuCtxSynchronize (--sync)");
  if (watched && R->obs.op_announced)
    rp_obs_op_after(R, R->failed ? -1 : R->rep->skipped != skipped ? 1 : 0);
}
