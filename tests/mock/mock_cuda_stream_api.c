/* Stream-ordered entry points of the mock driver. This file is compiled twice
 * (see CMakeLists.txt): plainly, which defines the legacy-default-stream
 * symbols (cuMemcpyHtoD_v2, cuLaunchKernel, ...) and mock_procs_legacy, and
 * with CUDA_API_PER_THREAD_DEFAULT_STREAM, where cuda.h's macros turn the very
 * same definitions into cuMemcpyHtoD_v2_ptds, cuLaunchKernel_ptsz, ... and the
 * table into mock_procs_pt. Everything executes synchronously, so the two
 * variants behave identically. */
#include "mock_cuda_internal.h"

#include <string.h>

#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
#define MOCK_PROCS mock_procs_pt
#else
#define MOCK_PROCS mock_procs_legacy
#endif

/* ---- copies --------------------------------------------------------------- */
static CUresult copy_1d(void *dst, const void *src, size_t n, CUstream s, int dst_dev, int src_dev) {
  MOCK_TRY(mock_check_stream(s));
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
 * variants, which share the plain build's helper. */
#ifndef CUDA_API_PER_THREAD_DEFAULT_STREAM
static const void *side_ptr(CUmemorytype t, const void *host, CUdeviceptr dev, int *is_dev) {
  *is_dev = 0;
  switch (t) {
  case CU_MEMORYTYPE_HOST: return host;
  case CU_MEMORYTYPE_DEVICE: *is_dev = 1; return DP(dev);
  case CU_MEMORYTYPE_UNIFIED: *is_dev = mock_mem_type(DP(dev)) == CU_MEMORYTYPE_DEVICE; return DP(dev);
  default: return NULL; /* arrays are not supported */
  }
}

CUresult mock_copy2d_op(const CUDA_MEMCPY2D *c, mock_op *op, int *empty) {
  int sd, dd;
  const uint8_t *src = side_ptr(c->srcMemoryType, c->srcHost, c->srcDevice, &sd);
  uint8_t *dst = (uint8_t *)side_ptr(c->dstMemoryType, c->dstHost, c->dstDevice, &dd);
  if (c->srcMemoryType == CU_MEMORYTYPE_ARRAY || c->dstMemoryType == CU_MEMORYTYPE_ARRAY) return CUDA_ERROR_NOT_SUPPORTED;
  if (!src || !dst) return CUDA_ERROR_INVALID_VALUE;
  memset(op, 0, sizeof *op);
  *empty = c->Height == 0 || c->WidthInBytes == 0;
  if (*empty) return CUDA_SUCCESS;
  size_t sp = c->srcPitch ? c->srcPitch : c->WidthInBytes, dp = c->dstPitch ? c->dstPitch : c->WidthInBytes;
  if (sp < c->WidthInBytes || dp < c->WidthInBytes) return CUDA_ERROR_INVALID_VALUE;
  src += c->srcY * sp + c->srcXInBytes;
  dst += c->dstY * dp + c->dstXInBytes;
  size_t sspan = (c->Height - 1) * sp + c->WidthInBytes, dspan = (c->Height - 1) * dp + c->WidthInBytes;
  if (sd && !mock_dev_range_ok((CUdeviceptr)(uintptr_t)src, sspan)) return CUDA_ERROR_INVALID_VALUE;
  if (dd && !mock_dev_range_ok((CUdeviceptr)(uintptr_t)dst, dspan)) return CUDA_ERROR_INVALID_VALUE;
  op->kind = MOCK_OP_COPY;
  op->dst = dst;
  op->src = src;
  op->width = c->WidthInBytes;
  op->height = c->Height;
  op->dpitch = dp;
  op->spitch = sp;
  return CUDA_SUCCESS;
}
#endif

static CUresult mock_copy2d(const CUDA_MEMCPY2D *c, CUstream s) {
  MOCK_TRY(mock_check_stream(s));
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  mock_op op;
  int empty;
  MOCK_TRY(mock_copy2d_op(c, &op, &empty));
  return empty ? CUDA_SUCCESS : mock_submit(s, &op);
}

CUresult CUDAAPI cuMemcpy2D(const CUDA_MEMCPY2D *c) { return mock_copy2d(c, NULL); }
CUresult CUDAAPI cuMemcpy2DUnaligned(const CUDA_MEMCPY2D *c) { return mock_copy2d(c, NULL); }
CUresult CUDAAPI cuMemcpy2DAsync(const CUDA_MEMCPY2D *c, CUstream s) { return mock_copy2d(c, s); }

/* ---- memset --------------------------------------------------------------- */
static CUresult mock_memset(CUdeviceptr dst, size_t pitch, uint32_t value, unsigned elem, size_t width, size_t height,
                     CUstream s) {
  MOCK_TRY(mock_check_stream(s));
  if (width == 0 || height == 0) return CUDA_SUCCESS;
  if (dst % elem) return CUDA_ERROR_INVALID_VALUE;
  if (!pitch) pitch = width * elem;
  if (pitch < width * elem) return CUDA_ERROR_INVALID_VALUE;
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
/* Inside a capture they become memory alloc/free nodes, as on the driver. */
CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s) {
  MOCK_TRY(mock_check_stream(s));
  struct mock_graph *cg = mock_stream_capture_graph(s);
  if (cg) {
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
  struct mock_graph *cg = mock_stream_capture_graph(s);
  if (cg) {
    CUgraphNode node, tail = (CUgraphNode)cg->cap_tail;
    MOCK_TRY(cuGraphAddMemFreeNode(&node, (CUgraph)cg, tail ? &tail : NULL, tail ? 1 : 0, p));
    cg->cap_tail = mock_node_of(node);
    return CUDA_SUCCESS;
  }
  return mock_free_device(p);
}

/* ---- streams and events ---------------------------------------------------- */
static int real_stream(CUstream s) { return s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD; }

CUresult CUDAAPI cuStreamQuery(CUstream s) { return mock_check_stream(s); }
CUresult CUDAAPI cuStreamSynchronize(CUstream s) {
  MOCK_TRY(mock_check_stream(s));
  return real_stream(s) && s->capture ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
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
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  return mock_launch(f, (mock_dim3){c->gridDimX, c->gridDimY, c->gridDimZ},
                     (mock_dim3){c->blockDimX, c->blockDimY, c->blockDimZ}, c->sharedMemBytes, c->hStream, params,
                     extra);
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
CUresult CUDAAPI cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *st) {
  MOCK_TRY(mock_check_stream(s));
  if (!st) return CUDA_ERROR_INVALID_VALUE;
  *st = real_stream(s) && s->capture ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
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
CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
                                        const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *nd) {
  if (edges) *edges = NULL;
  return mock_capture_info(s, st, id, g, deps, nd);
}
CUresult CUDAAPI cuStreamUpdateCaptureDependencies(CUstream s, CUgraphNode *deps, const CUgraphEdgeData *edges,
                                                   size_t nd, unsigned int flags) {
  (void)edges;
  return mock_capture_set_deps(s, deps, nd, flags);
}
CUresult CUDAAPI cuGraphLaunch(CUgraphExec g, CUstream s) { return mock_graph_launch(g, s); }
CUresult CUDAAPI cuGraphUpload(CUgraphExec g, CUstream s) {
  MOCK_TRY(mock_check_stream(s));
  return g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
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
  P(cuMemcpy2DUnaligned, 3020), P(cuMemcpy2DAsync, 3020),
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
  P(cuStreamBeginCaptureToGraph, 12030), P(cuStreamGetCaptureInfo, 12030),
  P(cuStreamUpdateCaptureDependencies, 12030),
  P(cuGraphLaunch, 10000), P(cuGraphUpload, 11010), P(cuGraphInstantiateWithParams, 12000),
  {NULL, 0, NULL}};
#undef P
