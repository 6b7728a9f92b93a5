/* Stream-ordered entry points of the mock driver. This file is compiled twice
 * (see CMakeLists.txt): plainly, which defines the legacy-default-stream
 * symbols (cuMemcpyHtoD_v2, cuLaunchKernel, ...) and mock_procs_legacy, and
 * with CUDA_API_PER_THREAD_DEFAULT_STREAM, where cuda.h's macros turn the very
 * same definitions into cuMemcpyHtoD_v2_ptds, cuLaunchKernel_ptsz, ... and the
 * table into mock_procs_pt. Everything executes synchronously, so the two
 * variants behave identically. */
#include <stdint.h>
#include "mock_cuda_internal.h"

#include <string.h>

#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
#define MOCK_PROCS mock_procs_pt
#define MOCK_PT_BUILD 1
#else
#define MOCK_PROCS mock_procs_legacy
#define MOCK_PT_BUILD 0
#endif

static int real_stream(CUstream s) { return s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD; }

/* ---- copies --------------------------------------------------------------- */
/* sync: a synchronous copy call (potentially unsafe during capture: it is
 * issued to the legacy stream). */
static CUresult copy_1d(void *dst, const void *src, size_t n, CUstream s, int dst_dev, int src_dev) {
  MOCK_TRY(mock_check_stream(s));
  MOCK_TRY(mock_legacy_check(s, MOCK_PT_BUILD));
  if (n == 0) return CUDA_SUCCESS;
  if (!dst || !src) return CUDA_ERROR_INVALID_VALUE;
  if (dst_dev && !mock_dev_range_ok((CUdeviceptr)(uintptr_t)dst, n)) return CUDA_ERROR_INVALID_VALUE;
  if (src_dev && !mock_dev_range_ok((CUdeviceptr)(uintptr_t)src, n)) return CUDA_ERROR_INVALID_VALUE;
  mock_op op = {0};
  op.kind = MOCK_OP_COPY;
  op.dst = dst;
  op.src = src;
  op.width = n;
  op.height = 1;
  /* asynchronous mode: a copy between device and pageable host memory
   * completes before the call returns (the driver stages it) */
  if (mock_async() && real_stream(s) && !s->capture &&
      ((!dst_dev && mock_mem_type(dst) == 0) || (!src_dev && mock_mem_type(src) == 0))) {
    mock_drain_stream(s);
    return mock_run_op(&op);
  }
  return mock_submit(s, &op);
}

#define DP(p) ((void *)(uintptr_t)(p))

CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy_1d(DP(dst), DP(src), n, NULL, 0, 0); }
CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return copy_1d(DP(dst), DP(src), n, s, 0, 0);
}
CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n) { return copy_1d(DP(dst), src, n, NULL, 1, 0); }
CUresult CUDAAPI cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) { return copy_1d(dst, DP(src), n, NULL, 0, 1); }
CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy_1d(DP(dst), DP(src), n, NULL, 1, 1); }
CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
  return copy_1d(DP(dst), src, n, s, 1, 0);
}
CUresult CUDAAPI cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream s) {
  return copy_1d(dst, DP(src), n, s, 0, 1);
}
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return copy_1d(DP(dst), DP(src), n, s, 1, 1);
}


/* Defined once: this file is compiled a second time for the per-thread
 * variants, which share the plain build's helper. A 2D copy is a 3D copy of
 * depth 1 (mock_copy3d_op, mock_cuda_array.c: host, device, unified and
 * array sides). */
#ifndef CUDA_API_PER_THREAD_DEFAULT_STREAM
CUresult mock_copy2d_op(const CUDA_MEMCPY2D *c, mock_op *op, int *empty) {
  CUDA_MEMCPY3D c3;
  memset(&c3, 0, sizeof c3);
  c3.srcXInBytes = c->srcXInBytes; c3.srcY = c->srcY;
  c3.srcMemoryType = c->srcMemoryType; c3.srcHost = c->srcHost; c3.srcDevice = c->srcDevice;
  c3.srcArray = c->srcArray; c3.srcPitch = c->srcPitch;
  c3.dstXInBytes = c->dstXInBytes; c3.dstY = c->dstY;
  c3.dstMemoryType = c->dstMemoryType; c3.dstHost = c->dstHost; c3.dstDevice = c->dstDevice;
  c3.dstArray = c->dstArray; c3.dstPitch = c->dstPitch;
  c3.WidthInBytes = c->WidthInBytes; c3.Height = c->Height; c3.Depth = 1;
  return mock_copy3d_op(&c3, op, empty);
}
#endif

static CUresult mock_copy2d(const CUDA_MEMCPY2D *c, CUstream s) {
  MOCK_TRY(mock_check_stream(s));
  MOCK_TRY(mock_legacy_check(s, MOCK_PT_BUILD));
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  mock_op op;
  int empty;
  MOCK_TRY(mock_copy2d_op(c, &op, &empty));
  return empty ? CUDA_SUCCESS : mock_submit(s, &op);
}

static CUresult mock_copy3d(const CUDA_MEMCPY3D *c, CUstream s) {
  MOCK_TRY(mock_check_stream(s));
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  mock_op op;
  int empty;
  MOCK_TRY(mock_copy3d_op(c, &op, &empty));
  return empty ? CUDA_SUCCESS : mock_submit(s, &op);
}

CUresult CUDAAPI cuMemcpy3D(const CUDA_MEMCPY3D *c) { return mock_copy3d(c, NULL); }
CUresult CUDAAPI cuMemcpy3DAsync(const CUDA_MEMCPY3D *c, CUstream s) { return mock_copy3d(c, s); }

/* 1D array copies (offsets in bytes into the array's data) */
CUresult CUDAAPI cuMemcpyHtoA(CUarray dst, size_t off, const void *src, size_t n) {
  return mock_array_copy1d(NULL, dst, off, src, NULL, 0, n, 0, 0, NULL);
}
CUresult CUDAAPI cuMemcpyHtoAAsync(CUarray dst, size_t off, const void *src, size_t n, CUstream s) {
  return mock_array_copy1d(NULL, dst, off, src, NULL, 0, n, 0, 0, s);
}
CUresult CUDAAPI cuMemcpyAtoH(void *dst, CUarray src, size_t off, size_t n) {
  return mock_array_copy1d(dst, NULL, 0, NULL, src, off, n, 0, 0, NULL);
}
CUresult CUDAAPI cuMemcpyAtoHAsync(void *dst, CUarray src, size_t off, size_t n, CUstream s) {
  return mock_array_copy1d(dst, NULL, 0, NULL, src, off, n, 0, 0, s);
}
CUresult CUDAAPI cuMemcpyDtoA(CUarray dst, size_t off, CUdeviceptr src, size_t n) {
  return mock_array_copy1d(NULL, dst, off, DP(src), NULL, 0, n, 0, 1, NULL);
}
CUresult CUDAAPI cuMemcpyAtoD(CUdeviceptr dst, CUarray src, size_t off, size_t n) {
  return mock_array_copy1d(DP(dst), NULL, 0, NULL, src, off, n, 1, 0, NULL);
}
CUresult CUDAAPI cuMemcpyAtoA(CUarray dst, size_t doff, CUarray src, size_t soff, size_t n) {
  return mock_array_copy1d(NULL, dst, doff, NULL, src, soff, n, 0, 0, NULL);
}

CUresult CUDAAPI cuMemcpy2D(const CUDA_MEMCPY2D *c) { return mock_copy2d(c, NULL); }
CUresult CUDAAPI cuMemcpy2DUnaligned(const CUDA_MEMCPY2D *c) { return mock_copy2d(c, NULL); }
CUresult CUDAAPI cuMemcpy2DAsync(const CUDA_MEMCPY2D *c, CUstream s) { return mock_copy2d(c, s); }

/* ---- memset --------------------------------------------------------------- */
static CUresult mock_memset(CUdeviceptr dst, size_t pitch, uint32_t value, unsigned elem, size_t width, size_t height,
                     CUstream s) {
  MOCK_TRY(mock_check_stream(s));
  MOCK_TRY(mock_legacy_check(s, MOCK_PT_BUILD));
  if (width == 0 || height == 0) return CUDA_SUCCESS;
  if (dst % elem) return CUDA_ERROR_INVALID_VALUE;
  if (!pitch) pitch = width * elem;
  if (width > SIZE_MAX / elem || pitch < width * elem) return CUDA_ERROR_INVALID_VALUE;
  if (height > 1 && (height - 1) > (SIZE_MAX - width * elem) / pitch) return CUDA_ERROR_INVALID_VALUE;
  if (!mock_dev_range_ok(dst, (height - 1) * pitch + width * elem)) return CUDA_ERROR_INVALID_VALUE;
  mock_op op = {0};
  op.kind = MOCK_OP_SET;
  op.dst = DP(dst);
  op.dpitch = pitch;
  op.value = value;
  op.elem = elem;
  op.width = width;
  op.height = height;
  return mock_submit(s, &op);
}

CUresult CUDAAPI cuMemsetD8(CUdeviceptr d, unsigned char v, size_t n) { return mock_memset(d, 0, v, 1, n, 1, NULL); }
CUresult CUDAAPI cuMemsetD16(CUdeviceptr d, unsigned short v, size_t n) { return mock_memset(d, 0, v, 2, n, 1, NULL); }
CUresult CUDAAPI cuMemsetD32(CUdeviceptr d, unsigned int v, size_t n) { return mock_memset(d, 0, v, 4, n, 1, NULL); }
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) { return mock_memset(d, 0, v, 1, n, 1, s); }
CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s) { return mock_memset(d, 0, v, 2, n, 1, s); }
CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream s) { return mock_memset(d, 0, v, 4, n, 1, s); }
CUresult CUDAAPI cuMemsetD2D8(CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h) { return mock_memset(d, p, v, 1, w, h, NULL); }
CUresult CUDAAPI cuMemsetD2D16(CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h) { return mock_memset(d, p, v, 2, w, h, NULL); }
CUresult CUDAAPI cuMemsetD2D32(CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h) { return mock_memset(d, p, v, 4, w, h, NULL); }
CUresult CUDAAPI cuMemsetD2D8Async(CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h, CUstream s) { return mock_memset(d, p, v, 1, w, h, s); }
CUresult CUDAAPI cuMemsetD2D16Async(CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h, CUstream s) { return mock_memset(d, p, v, 2, w, h, s); }
CUresult CUDAAPI cuMemsetD2D32Async(CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h, CUstream s) { return mock_memset(d, p, v, 4, w, h, s); }

/* ---- stream-ordered allocation -------------------------------------------- */
/* Inside a capture they become memory alloc/free nodes, as on the driver
 * (the allocation lives as long as its graph: mock_cuda_graph.c). */
CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s) {
  MOCK_TRY(mock_check_stream(s));
  MOCK_TRY(mock_legacy_check(s, MOCK_PT_BUILD));
  struct mock_graph *cg = mock_stream_capture_graph(s);
  if (cg) {
    if (cg->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    CUDA_MEM_ALLOC_NODE_PARAMS a;
    memset(&a, 0, sizeof a);
    a.bytesize = n;
    a.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    a.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUgraphNode node, tail = (CUgraphNode)cg->cap_tail;
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    MOCK_TRY(cuGraphAddMemAllocNode(&node, (CUgraph)cg, tail ? &tail : NULL, tail ? 1 : 0, &a));
    cg->cap_tail = mock_node_of(node);
    *p = a.dptr;
    return CUDA_SUCCESS;
  }
  return mock_alloc_device(p, n);
}
CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr p, CUstream s) {
  MOCK_TRY(mock_check_stream(s));
  MOCK_TRY(mock_legacy_check(s, MOCK_PT_BUILD));
  struct mock_graph *cg = mock_stream_capture_graph(s);
  if (cg) {
    if (cg->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    CUgraphNode node, tail = (CUgraphNode)cg->cap_tail;
    MOCK_TRY(cuGraphAddMemFreeNode(&node, (CUgraph)cg, tail ? &tail : NULL, tail ? 1 : 0, p));
    cg->cap_tail = mock_node_of(node);
    return CUDA_SUCCESS;
  }
  mock_drain_stream(s);
  return mock_free_device(p);
}

/* ---- streams and events ---------------------------------------------------- */
/* Synchronising or querying a capturing stream conflicts with the capture
 * in every mode: it fails and invalidates it. */
static CUresult capturing_conflict(CUstream s) {
  if (real_stream(s) && s->capture) {
    mock_capture_invalidate(s->capture);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return mock_legacy_check(s, MOCK_PT_BUILD);
}
CUresult CUDAAPI cuStreamQuery(CUstream s) {
  MOCK_TRY(mock_check_stream(s));
  MOCK_TRY(capturing_conflict(s));
  MOCK_TRY(mock_unsafe());
  if (!mock_async()) return CUDA_SUCCESS;
  int pending = real_stream(s) ? mock_stream_pending(s) : 0;
  if (real_stream(s)) mock_drain_stream(s);
  else mock_drain_all(1);
  return pending ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamSynchronize(CUstream s) {
  mock_count_sync(MOCK_SYNC_STREAM);
  MOCK_TRY(mock_check_stream(s));
  MOCK_TRY(capturing_conflict(s));
  MOCK_TRY(mock_unsafe());
  if (real_stream(s)) mock_drain_stream(s);
  else if (s != CU_STREAM_PER_THREAD) mock_drain_all(1);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags) {
  (void)flags;
  return mock_stream_wait_event(s, e);
}
CUresult CUDAAPI cuStreamGetPriority(CUstream s, int *p) {
  MOCK_TRY(mock_check_stream(s));
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  *p = real_stream(s) ? s->priority : 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamGetFlags(CUstream s, unsigned int *f) {
  MOCK_TRY(mock_check_stream(s));
  if (!f) return CUDA_ERROR_INVALID_VALUE;
  *f = real_stream(s) ? s->flags : 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamGetId(CUstream s, unsigned long long *id) {
  MOCK_TRY(mock_check_stream(s));
  if (!id) return CUDA_ERROR_INVALID_VALUE;
  *id = real_stream(s) ? s->id : (s == CU_STREAM_PER_THREAD ? 2 : 1);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamGetCtx(CUstream s, CUcontext *c) {
  MOCK_TRY(mock_check_stream(s));
  return cuCtxGetCurrent(c);
}
CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) { return mock_event_record(e, s); }
CUresult CUDAAPI cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int flags) {
  (void)flags;
  return mock_event_record(e, s);
}

/* ---- launches ------------------------------------------------------------- */
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void **params,
                                void **extra) {
  return mock_launch(f, (mock_dim3){gx, gy, gz}, (mock_dim3){bx, by, bz}, shmem, s, params, extra);
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
  return mock_launch_ex(c, f, params, extra);
}

CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                           unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                                           CUstream s, void **params) {
  return mock_launch(f, (mock_dim3){gx, gy, gz}, (mock_dim3){bx, by, bz}, shmem, s, params, NULL);
}

CUresult CUDAAPI cuLaunchHostFunc(CUstream s, CUhostFn fn, void *user) {
  MOCK_TRY(mock_check_stream(s));
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  mock_op op = {0};
  op.kind = MOCK_OP_HOST;
  op.fn = fn;
  op.user = user;
  return mock_submit(s, &op);
}

CUresult CUDAAPI cuStreamAddCallback(CUstream s, CUstreamCallback cb, void *user, unsigned int flags) {
  if (!cb || flags) return CUDA_ERROR_INVALID_VALUE;
  MOCK_TRY(mock_check_stream(s));
  if (real_stream(s) && s->capture) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  cb(s, CUDA_SUCCESS, user);
  return CUDA_SUCCESS;
}

/* ---- capture and graphs ----------------------------------------------------- */
CUresult CUDAAPI cuStreamBeginCapture(CUstream s, CUstreamCaptureMode mode) { return mock_begin_capture(s, mode); }
CUresult CUDAAPI cuStreamEndCapture(CUstream s, CUgraph *g) { return mock_end_capture(s, g); }
static CUstreamCaptureStatus capture_status(CUstream s) {
  if (!real_stream(s) || !s->capture) return CU_STREAM_CAPTURE_STATUS_NONE;
  return s->capture->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
}
/* Legal during capture in every mode; on the legacy stream while a blocking
 * stream captures: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (nothing invalidated). */
static CUresult legacy_query_check(CUstream s) {
  int legacy = s == CU_STREAM_LEGACY || (s == NULL && !MOCK_PT_BUILD);
  if (!legacy || !mock_capture_any()) return CUDA_SUCCESS;
  for (CUstream t = mock_all_streams; t; t = t->next)
    if (t->capture && t->capture_origin && !(t->flags & CU_STREAM_NON_BLOCKING))
      return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *st) {
  MOCK_TRY(mock_check_stream(s));
  if (!st) return CUDA_ERROR_INVALID_VALUE;
  MOCK_TRY(legacy_query_check(s));
  *st = capture_status(s);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
                                        const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *nd) {
  MOCK_TRY(mock_check_stream(s));
  if (!st) return CUDA_ERROR_INVALID_VALUE;
  MOCK_TRY(legacy_query_check(s));
  *st = capture_status(s);
  int on = *st != CU_STREAM_CAPTURE_STATUS_NONE;
  if (id) *id = on ? s->capture->cap_id : 0;
  if (g) *g = on ? (CUgraph)s->capture : NULL;
  /* the mock's captures are a chain: the one dependency is the tail (the
   * node the next captured one depends on: mock_capture_set_deps) */
  if (deps) *deps = on && s->capture->cap_tail ? (const CUgraphNode *)&s->capture->cap_tail : NULL;
  if (edges) *edges = NULL;
  if (nd) *nd = on && s->capture->cap_tail ? 1 : 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode *deps,
                                             const CUgraphEdgeData *edges, size_t nd, CUstreamCaptureMode mode) {
  (void)edges;
  MOCK_TRY(mock_begin_capture_to(s, mock_graph_of(g), mode));
  CUresult rc = mock_capture_set_deps(s, (CUgraphNode *)deps, nd, CU_STREAM_SET_CAPTURE_DEPENDENCIES);
  if (rc != CUDA_SUCCESS) { CUgraph tmp; mock_end_capture(s, &tmp); }
  return rc;
}
CUresult CUDAAPI cuStreamUpdateCaptureDependencies(CUstream s, CUgraphNode *deps, const CUgraphEdgeData *edges,
                                                   size_t nd, unsigned int flags) {
  (void)edges;
  return mock_capture_set_deps(s, deps, nd, flags);
}
/* the older signatures, exported under their own names */
#if MOCK_PT_BUILD
#define MOCK_CAPINFO_V2 "cuStreamGetCaptureInfo_v2_ptsz"
#define MOCK_CAPINFO_V1 "cuStreamGetCaptureInfo_ptsz"
#else
#define MOCK_CAPINFO_V2 "cuStreamGetCaptureInfo_v2"
#define MOCK_CAPINFO_V1 "cuStreamGetCaptureInfo"
#endif
CUresult CUDAAPI mock_capture_info_v2(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
                                      const CUgraphNode **deps, size_t *nd) __asm__(MOCK_CAPINFO_V2);
CUresult CUDAAPI mock_capture_info_v1(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id) __asm__(MOCK_CAPINFO_V1);
CUresult CUDAAPI mock_capture_info_v2(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
                                      const CUgraphNode **deps, size_t *nd) {
  return cuStreamGetCaptureInfo(s, st, id, g, deps, NULL, nd);
}
CUresult CUDAAPI mock_capture_info_v1(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id) {
  return cuStreamGetCaptureInfo(s, st, id, NULL, NULL, NULL, NULL);
}
CUresult CUDAAPI cuGraphLaunch(CUgraphExec g, CUstream s) {
  MOCK_TRY(mock_legacy_check(s, MOCK_PT_BUILD));
  mock_drain_stream(s); /* asynchronous mode: graphs run synchronously after s's work */
  return mock_graph_launch(g, s);
}
CUresult CUDAAPI cuGraphUpload(CUgraphExec g, CUstream s) {
  MOCK_TRY(mock_check_stream(s));
  return mock_exec_of(g) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec *pe, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p) {
  CUresult rc = cuGraphInstantiateWithFlags(pe, g, p ? p->flags : 0);
  if (p) p->result_out = rc == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
  return rc;
}

#define P(name, ver) {#name, ver, (void *)name}
const mock_proc MOCK_PROCS[] = {
  P(cuMemcpy, 4000), P(cuMemcpyAsync, 4000), P(cuMemcpyHtoD, 3020), P(cuMemcpyDtoH, 3020), P(cuMemcpyDtoD, 3020),
  P(cuMemcpyHtoDAsync, 3020), P(cuMemcpyDtoHAsync, 3020), P(cuMemcpyDtoDAsync, 3020), P(cuMemcpy2D, 3020),
  P(cuMemcpy2DUnaligned, 3020), P(cuMemcpy2DAsync, 3020), P(cuMemcpy3D, 3020), P(cuMemcpy3DAsync, 3020),
  P(cuMemcpyHtoA, 3020), P(cuMemcpyHtoAAsync, 3020), P(cuMemcpyAtoH, 3020), P(cuMemcpyAtoHAsync, 3020),
  P(cuMemcpyDtoA, 3020), P(cuMemcpyAtoD, 3020), P(cuMemcpyAtoA, 3020),
  P(cuMemsetD8, 3020), P(cuMemsetD16, 3020), P(cuMemsetD32, 3020), P(cuMemsetD8Async, 3020),
  P(cuMemsetD16Async, 3020), P(cuMemsetD32Async, 3020), P(cuMemsetD2D8, 3020), P(cuMemsetD2D16, 3020),
  P(cuMemsetD2D32, 3020), P(cuMemsetD2D8Async, 3020), P(cuMemsetD2D16Async, 3020), P(cuMemsetD2D32Async, 3020),
  P(cuMemAllocAsync, 11020), P(cuMemFreeAsync, 11020),
  P(cuStreamQuery, 2000), P(cuStreamSynchronize, 2000), P(cuStreamWaitEvent, 3020), P(cuStreamGetPriority, 5050),
  P(cuStreamGetFlags, 5050), P(cuStreamGetId, 12000), P(cuStreamGetCtx, 9020), P(cuEventRecord, 2000),
  P(cuEventRecordWithFlags, 11010),
  P(cuLaunchKernel, 4000), P(cuLaunchKernelEx, 11060), P(cuLaunchCooperativeKernel, 9000),
  P(cuLaunchHostFunc, 10000), P(cuStreamAddCallback, 5000),
  P(cuStreamBeginCapture, 10010), P(cuStreamEndCapture, 10000), P(cuStreamIsCapturing, 10000),
  P(cuStreamBeginCaptureToGraph, 12030), P(cuStreamUpdateCaptureDependencies, 12030),
  {"cuStreamGetCaptureInfo", 10010, (void *)mock_capture_info_v1},
  {"cuStreamGetCaptureInfo", 11030, (void *)mock_capture_info_v2}, P(cuStreamGetCaptureInfo, 12030),
  P(cuGraphLaunch, 10000), P(cuGraphUpload, 11010), P(cuGraphInstantiateWithParams, 12000),
  {NULL, 0, NULL}};
#undef P
