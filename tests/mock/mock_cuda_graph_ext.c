/* CUDA graph features of the mock driver beyond kernel/memcpy/memset/empty
 * nodes: conditional handles and IF/WHILE/SWITCH nodes (evaluated on the
 * host when the exec runs), memory alloc/free nodes, host nodes, child graph
 * nodes, event record/wait nodes, the generic cuGraphAddNode(_v2),
 * cuGraphClone, cuGraphExecUpdate, cuGraphExec*SetParams,
 * cuGraphNodeSetEnabled and cuGraphKernelNodeSetParams, and capture into an
 * existing graph (cuStreamBeginCaptureToGraph, cuStreamGetCaptureInfo_v3,
 * cuStreamUpdateCaptureDependencies_v2 live in mock_cuda_stream_api.c on top
 * of mock_begin_capture_to / mock_capture_set_deps in mock_cuda_core.c). See
 * mock_cuda.md. */
#include "mock_cuda_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- conditional handles ----------------------------------------------------
 * Handle values are small integers counted from 1 for the whole process
 * (the real driver's look similar); a replay that creates more handles than
 * the recording gets other values, which is what the replayer must map. */
#define MOCK_MAX_CONDS 4096
static struct {
  unsigned value, def, flags;
} conds[MOCK_MAX_CONDS];
static unsigned nconds;

void mock_cond_set(unsigned long long h, unsigned value) {
  if (h && h <= nconds) conds[h - 1].value = value;
}

unsigned mock_cond_get(unsigned long long h) { return h && h <= nconds ? conds[h - 1].value : 0; }

void mock_cond_reset(const struct mock_graph *x) {
  for (size_t i = 0; i < x->nops; i++) {
    const mock_op *op = &x->ops[i];
    if (op->kind == MOCK_OP_COND && op->cond && op->cond <= nconds &&
        (conds[op->cond - 1].flags & CU_GRAPH_COND_ASSIGN_DEFAULT))
      conds[op->cond - 1].value = conds[op->cond - 1].def;
    for (unsigned k = 0; k < op->nsubs; k++) mock_cond_reset(op->subs[k]);
  }
}

CUresult CUDAAPI cuGraphConditionalHandleCreate(CUgraphConditionalHandle *ph, CUgraph g, CUcontext ctx,
                                                unsigned int def, unsigned int flags) {
  (void)ctx;
  MOCK_TRY(mock_need_ctx());
  if (!ph || !mock_graph_of(g) || (flags & ~CU_GRAPH_COND_ASSIGN_DEFAULT)) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mock_lock);
  CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
  if (nconds < MOCK_MAX_CONDS) {
    conds[nconds].value = conds[nconds].def = def;
    conds[nconds].flags = flags;
    *ph = ++nconds;
    rc = CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&mock_lock);
  return rc;
}

/* ---- node kinds --------------------------------------------------------------- */
static CUresult add_empty_typed(CUgraphNode *pn, CUgraph h, const CUgraphNode *deps, size_t nd,
                                CUgraphNodeType type, struct mock_node **out) {
  MOCK_TRY(mock_need_ctx());
  struct mock_graph *g = mock_graph_of(h);
  if (!g || !pn) return CUDA_ERROR_INVALID_VALUE;
  mock_op op = {0};
  op.kind = MOCK_OP_EMPTY;
  struct mock_node *n;
  MOCK_TRY(mock_graph_add(g, &op, type, deps, nd, &n));
  *pn = (CUgraphNode)n;
  if (out) *out = n;
  return CUDA_SUCCESS;
}

static CUresult add_conditional(CUgraphNode *pn, CUgraph h, const CUgraphNode *deps, size_t nd,
                                CUDA_CONDITIONAL_NODE_PARAMS *c) {
  MOCK_TRY(mock_need_ctx());
  struct mock_graph *g = mock_graph_of(h);
  if (!g || !pn || !c || !c->handle || c->handle > nconds) return CUDA_ERROR_INVALID_VALUE;
  unsigned want = c->type == CU_GRAPH_COND_TYPE_WHILE ? 1 : c->type == CU_GRAPH_COND_TYPE_IF ? 2 : 0;
  if (c->type > CU_GRAPH_COND_TYPE_SWITCH || c->size == 0 || (want && c->size > want))
    return CUDA_ERROR_INVALID_VALUE;
  struct mock_graph **bodies = calloc(c->size, sizeof *bodies);
  if (!bodies) return CUDA_ERROR_OUT_OF_MEMORY;
  for (unsigned i = 0; i < c->size; i++)
    if (!(bodies[i] = mock_graph_new())) {
      for (unsigned k = 0; k < i; k++) mock_graph_free(bodies[k]);
      free(bodies);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  mock_op op = {0};
  op.kind = MOCK_OP_COND;
  op.cond = c->handle;
  op.cond_type = (int)c->type;
  struct mock_node *n;
  CUresult rc = mock_graph_add(g, &op, CU_GRAPH_NODE_TYPE_CONDITIONAL, deps, nd, &n);
  if (rc != CUDA_SUCCESS) {
    for (unsigned k = 0; k < c->size; k++) mock_graph_free(bodies[k]);
    free(bodies);
    return rc;
  }
  n->bodies = bodies;
  n->nbodies = c->size;
  c->phGraph_out = (CUgraph *)n->bodies; /* driver-owned, valid while the node lives */
  *pn = (CUgraphNode)n;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphAddMemAllocNode(CUgraphNode *pn, CUgraph h, const CUgraphNode *deps, size_t nd,
                                        CUDA_MEM_ALLOC_NODE_PARAMS *p) {
  if (!p || !p->bytesize) return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr d = 0;
  MOCK_TRY(mock_alloc_device(&d, p->bytesize)); /* the address is fixed at creation */
  struct mock_node *n;
  CUresult rc = add_empty_typed(pn, h, deps, nd, CU_GRAPH_NODE_TYPE_MEM_ALLOC, &n);
  if (rc != CUDA_SUCCESS) {
    mock_free_device(d);
    return rc;
  }
  p->dptr = d;
  n->alloc = *p;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphMemAllocNodeGetParams(CUgraphNode h, CUDA_MEM_ALLOC_NODE_PARAMS *p) {
  struct mock_node *n = mock_node_of(h);
  if (!n || !p || n->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) return CUDA_ERROR_INVALID_VALUE;
  *p = n->alloc;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphAddMemFreeNode(CUgraphNode *pn, CUgraph h, const CUgraphNode *deps, size_t nd,
                                       CUdeviceptr d) {
  if (!mock_dev_range_ok(d, 1)) return CUDA_ERROR_INVALID_VALUE;
  struct mock_node *n;
  MOCK_TRY(add_empty_typed(pn, h, deps, nd, CU_GRAPH_NODE_TYPE_MEM_FREE, &n));
  n->free_ptr = d;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphMemFreeNodeGetParams(CUgraphNode h, CUdeviceptr *d) {
  struct mock_node *n = mock_node_of(h);
  if (!n || !d || n->type != CU_GRAPH_NODE_TYPE_MEM_FREE) return CUDA_ERROR_INVALID_VALUE;
  *d = n->free_ptr;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphAddHostNode(CUgraphNode *pn, CUgraph h, const CUgraphNode *deps, size_t nd,
                                    const CUDA_HOST_NODE_PARAMS *p) {
  MOCK_TRY(mock_need_ctx());
  struct mock_graph *g = mock_graph_of(h);
  if (!g || !pn || !p || !p->fn) return CUDA_ERROR_INVALID_VALUE;
  mock_op op = {0};
  op.kind = MOCK_OP_HOST;
  op.fn = p->fn;
  op.user = p->userData;
  struct mock_node *n;
  MOCK_TRY(mock_graph_add(g, &op, CU_GRAPH_NODE_TYPE_HOST, deps, nd, &n));
  n->host = *p;
  *pn = (CUgraphNode)n;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphHostNodeGetParams(CUgraphNode h, CUDA_HOST_NODE_PARAMS *p) {
  struct mock_node *n = mock_node_of(h);
  if (!n || !p || n->type != CU_GRAPH_NODE_TYPE_HOST) return CUDA_ERROR_INVALID_VALUE;
  p->fn = n->op.fn;
  p->userData = n->op.user;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphAddChildGraphNode(CUgraphNode *pn, CUgraph h, const CUgraphNode *deps, size_t nd,
                                          CUgraph child) {
  MOCK_TRY(mock_need_ctx());
  struct mock_graph *g = mock_graph_of(h), *c = mock_graph_of(child);
  if (!g || !c || !pn || g == c) return CUDA_ERROR_INVALID_VALUE;
  struct mock_graph **b = calloc(1, sizeof *b);
  if (!b || !(b[0] = mock_graph_clone(c))) { /* the node owns a copy, as on the driver */
    free(b);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  mock_op op = {0};
  op.kind = MOCK_OP_CHILD;
  struct mock_node *n;
  CUresult rc = mock_graph_add(g, &op, CU_GRAPH_NODE_TYPE_GRAPH, deps, nd, &n);
  if (rc != CUDA_SUCCESS) {
    mock_graph_free(b[0]);
    free(b);
    return rc;
  }
  n->bodies = b;
  n->nbodies = 1;
  *pn = (CUgraphNode)n;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphChildGraphNodeGetGraph(CUgraphNode h, CUgraph *out) {
  struct mock_node *n = mock_node_of(h);
  if (!n || !out || n->type != CU_GRAPH_NODE_TYPE_GRAPH || !n->nbodies) return CUDA_ERROR_INVALID_VALUE;
  *out = (CUgraph)n->bodies[0];
  return CUDA_SUCCESS;
}

static CUresult add_event_node(CUgraphNode *pn, CUgraph h, const CUgraphNode *deps, size_t nd, CUevent e,
                               int record) {
  MOCK_TRY(mock_need_ctx());
  struct mock_graph *g = mock_graph_of(h);
  if (!g || !pn || !e || e->magic != MOCK_MAGIC_EVENT) return CUDA_ERROR_INVALID_VALUE;
  mock_op op = {0};
  op.kind = record ? MOCK_OP_EVENT : MOCK_OP_EMPTY; /* a wait is ordering only here */
  op.event = e;
  struct mock_node *n;
  MOCK_TRY(mock_graph_add(g, &op, record ? CU_GRAPH_NODE_TYPE_EVENT_RECORD : CU_GRAPH_NODE_TYPE_WAIT_EVENT,
                          deps, nd, &n));
  *pn = (CUgraphNode)n;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphAddEventRecordNode(CUgraphNode *pn, CUgraph h, const CUgraphNode *deps, size_t nd,
                                           CUevent e) {
  return add_event_node(pn, h, deps, nd, e, 1);
}
CUresult CUDAAPI cuGraphAddEventWaitNode(CUgraphNode *pn, CUgraph h, const CUgraphNode *deps, size_t nd,
                                         CUevent e) {
  return add_event_node(pn, h, deps, nd, e, 0);
}
static CUresult node_event(CUgraphNode h, CUevent *e, CUgraphNodeType t) {
  struct mock_node *n = mock_node_of(h);
  if (!n || !e || n->type != t) return CUDA_ERROR_INVALID_VALUE;
  *e = n->op.event;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphEventRecordNodeGetEvent(CUgraphNode h, CUevent *e) {
  return node_event(h, e, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}
CUresult CUDAAPI cuGraphEventWaitNodeGetEvent(CUgraphNode h, CUevent *e) {
  return node_event(h, e, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

/* ---- cuGraphAddNode: the generic form ------------------------------------------ */
CUresult CUDAAPI cuGraphAddNode(CUgraphNode *pn, CUgraph h, const CUgraphNode *deps,
                                const CUgraphEdgeData *edges, size_t nd, CUgraphNodeParams *p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; edges && i < nd; i++)
    if (edges[i].from_port || edges[i].to_port || edges[i].type) return CUDA_ERROR_NOT_SUPPORTED;
  switch (p->type) {
  case CU_GRAPH_NODE_TYPE_KERNEL: {
    CUDA_KERNEL_NODE_PARAMS k;
    memset(&k, 0, sizeof k);
    k.func = p->kernel.func;
    k.gridDimX = p->kernel.gridDimX, k.gridDimY = p->kernel.gridDimY, k.gridDimZ = p->kernel.gridDimZ;
    k.blockDimX = p->kernel.blockDimX, k.blockDimY = p->kernel.blockDimY, k.blockDimZ = p->kernel.blockDimZ;
    k.sharedMemBytes = p->kernel.sharedMemBytes;
    k.kernelParams = p->kernel.kernelParams;
    k.extra = p->kernel.extra;
    k.kern = p->kernel.kern;
    k.ctx = p->kernel.ctx;
    return cuGraphAddKernelNode(pn, h, deps, nd, &k);
  }
  case CU_GRAPH_NODE_TYPE_MEMSET: {
    CUDA_MEMSET_NODE_PARAMS m;
    memset(&m, 0, sizeof m);
    m.dst = p->memset.dst, m.pitch = p->memset.pitch, m.value = p->memset.value;
    m.elementSize = p->memset.elementSize, m.width = p->memset.width, m.height = p->memset.height;
    return cuGraphAddMemsetNode(pn, h, deps, nd, &m, p->memset.ctx);
  }
  case CU_GRAPH_NODE_TYPE_MEMCPY:
    return cuGraphAddMemcpyNode(pn, h, deps, nd, &p->memcpy.copyParams, p->memcpy.copyCtx);
  case CU_GRAPH_NODE_TYPE_EMPTY:
    return cuGraphAddEmptyNode(pn, h, deps, nd);
  case CU_GRAPH_NODE_TYPE_HOST: {
    CUDA_HOST_NODE_PARAMS hp = {p->host.fn, p->host.userData};
    return cuGraphAddHostNode(pn, h, deps, nd, &hp);
  }
  case CU_GRAPH_NODE_TYPE_GRAPH:
    return cuGraphAddChildGraphNode(pn, h, deps, nd, p->graph.graph);
  case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
    return cuGraphAddEventWaitNode(pn, h, deps, nd, p->eventWait.event);
  case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    return cuGraphAddEventRecordNode(pn, h, deps, nd, p->eventRecord.event);
  case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
    CUDA_MEM_ALLOC_NODE_PARAMS a;
    memset(&a, 0, sizeof a);
    a.poolProps = p->alloc.poolProps;
    a.bytesize = p->alloc.bytesize;
    CUresult rc = cuGraphAddMemAllocNode(pn, h, deps, nd, &a);
    if (rc == CUDA_SUCCESS) p->alloc.dptr = a.dptr;
    return rc;
  }
  case CU_GRAPH_NODE_TYPE_MEM_FREE:
    return cuGraphAddMemFreeNode(pn, h, deps, nd, p->free.dptr);
  case CU_GRAPH_NODE_TYPE_CONDITIONAL:
    return add_conditional(pn, h, deps, nd, &p->conditional);
  default:
    return CUDA_ERROR_NOT_SUPPORTED;
  }
}
/* 12.2 signature (no edge data), exported as `cuGraphAddNode` */
CUresult CUDAAPI mock_graph_add_node_v1(CUgraphNode *pn, CUgraph h, const CUgraphNode *deps, size_t nd,
                                        CUgraphNodeParams *p) __asm__("cuGraphAddNode");
CUresult CUDAAPI mock_graph_add_node_v1(CUgraphNode *pn, CUgraph h, const CUgraphNode *deps, size_t nd,
                                        CUgraphNodeParams *p) {
  return cuGraphAddNode(pn, h, deps, NULL, nd, p);
}

/* ---- clone ------------------------------------------------------------------------ */
static void clone_node_fields(struct mock_node *dst, const struct mock_node *src) {
  dst->type = src->type;
  dst->copy = src->copy;
  dst->set = src->set;
  dst->host = src->host;
  dst->free_ptr = src->free_ptr;
  dst->cloned_from = src;
}

struct mock_graph *mock_graph_clone(const struct mock_graph *g) {
  struct mock_graph *c = mock_graph_new();
  if (!c) return NULL;
  for (size_t i = 0; i < g->nnodes; i++) {
    const struct mock_node *n = g->nodes[i];
    mock_op op = n->op;
    op.argbuf = NULL;
    if (n->op.argbuf) {
      size_t sz = n->op.func->param_bytes;
      if (!(op.argbuf = malloc(sz ? sz : 1))) goto fail;
      memcpy(op.argbuf, n->op.argbuf, sz);
    }
    CUgraphNode deps[64];
    size_t nd = n->ndeps < 64 ? n->ndeps : 64;
    for (size_t k = 0; k < nd; k++) deps[k] = (CUgraphNode)c->nodes[n->deps[k]->idx]; /* deps come first */
    struct mock_node *m;
    if (mock_graph_add(c, &op, n->type, deps, nd, &m) != CUDA_SUCCESS) {
      free(op.argbuf);
      goto fail;
    }
    clone_node_fields(m, n);
    if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) { /* a clone allocates its own */
      m->alloc = n->alloc;
      if (mock_alloc_device(&m->alloc.dptr, n->alloc.bytesize) != CUDA_SUCCESS) {
        m->alloc.dptr = 0;
        goto fail;
      }
    }
    if (n->nbodies) {
      if (!(m->bodies = calloc(n->nbodies, sizeof *m->bodies))) goto fail;
      m->nbodies = n->nbodies;
      for (unsigned k = 0; k < n->nbodies; k++)
        if (!(m->bodies[k] = mock_graph_clone(n->bodies[k]))) goto fail;
    }
  }
  return c;
fail:
  mock_graph_free(c);
  return NULL;
}

CUresult CUDAAPI cuGraphClone(CUgraph *out, CUgraph h) {
  MOCK_TRY(mock_need_ctx());
  struct mock_graph *g = mock_graph_of(h);
  if (!g || !out) return CUDA_ERROR_INVALID_VALUE;
  /* nodes are cloned in index order: a dependency always has a lower index
   * than its dependents in graphs built by the mock's API */
  struct mock_graph *c = mock_graph_clone(g);
  if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
  *out = (CUgraph)c;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphNodeFindInClone(CUgraphNode *out, CUgraphNode orig, CUgraph clone) {
  struct mock_graph *c = mock_graph_of(clone);
  struct mock_node *o = mock_node_of(orig);
  if (!c || !o || !out) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < c->nnodes; i++)
    if (c->nodes[i]->cloned_from == o) {
      *out = (CUgraphNode)c->nodes[i];
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_VALUE;
}

/* ---- updating an exec ------------------------------------------------------------- */
static mock_op *exec_op(struct mock_graph *x, const struct mock_node *n) {
  for (size_t i = 0; i < x->nops; i++)
    if (x->ops[i].node == n) return &x->ops[i];
  return NULL;
}

static CUresult exec_lookup(CUgraphExec hx, CUgraphNode hn, struct mock_graph **px, mock_op **pop) {
  MOCK_TRY(mock_need_ctx());
  struct mock_graph *x = mock_exec_of(hx);
  struct mock_node *n = mock_node_of(hn);
  if (!x || !n) return CUDA_ERROR_INVALID_VALUE;
  mock_op *op = exec_op(x, n);
  if (!op) return CUDA_ERROR_INVALID_VALUE;
  *px = x;
  *pop = op;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec hx, CUgraphNode hn, const CUDA_KERNEL_NODE_PARAMS *p) {
  struct mock_graph *x;
  mock_op *op;
  MOCK_TRY(exec_lookup(hx, hn, &x, &op));
  if (!p || op->kind != MOCK_OP_KERNEL || !p->func) return CUDA_ERROR_INVALID_VALUE;
  mock_op nop;
  MOCK_TRY(mock_kernel_op(p->func, (mock_dim3){p->gridDimX, p->gridDimY, p->gridDimZ},
                          (mock_dim3){p->blockDimX, p->blockDimY, p->blockDimZ}, p->sharedMemBytes, p->kernelParams,
                          p->extra, &nop));
  free(op->argbuf);
  op->func = nop.func;
  op->grid = nop.grid;
  op->block = nop.block;
  op->shmem = nop.shmem;
  op->argbuf = nop.argbuf;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecMemsetNodeSetParams(CUgraphExec hx, CUgraphNode hn, const CUDA_MEMSET_NODE_PARAMS *m,
                                                CUcontext ctx) {
  (void)ctx;
  struct mock_graph *x;
  mock_op *op;
  MOCK_TRY(exec_lookup(hx, hn, &x, &op));
  if (!m || op->kind != MOCK_OP_SET) return CUDA_ERROR_INVALID_VALUE;
  unsigned e = m->elementSize;
  size_t pitch = m->height > 1 ? m->pitch : m->width * e;
  if ((e != 1 && e != 2 && e != 4) || !m->width || !m->height ||
      !mock_dev_range_ok(m->dst, (m->height - 1) * pitch + m->width * e))
    return CUDA_ERROR_INVALID_VALUE;
  op->dst = (void *)(uintptr_t)m->dst;
  op->dpitch = pitch;
  op->value = m->value;
  op->elem = e;
  op->width = m->width;
  op->height = m->height;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecMemcpyNodeSetParams(CUgraphExec hx, CUgraphNode hn, const CUDA_MEMCPY3D *c,
                                                CUcontext ctx) {
  (void)ctx;
  struct mock_graph *x;
  mock_op *op;
  MOCK_TRY(exec_lookup(hx, hn, &x, &op));
  if (!c || op->kind != MOCK_OP_COPY || c->Depth > 1) return CUDA_ERROR_INVALID_VALUE;
  CUDA_MEMCPY2D c2 = {
      .srcXInBytes = c->srcXInBytes, .srcY = c->srcY, .srcMemoryType = c->srcMemoryType,
      .srcHost = c->srcHost, .srcDevice = c->srcDevice, .srcPitch = c->srcPitch,
      .dstXInBytes = c->dstXInBytes, .dstY = c->dstY, .dstMemoryType = c->dstMemoryType,
      .dstHost = c->dstHost, .dstDevice = c->dstDevice, .dstPitch = c->dstPitch,
      .WidthInBytes = c->WidthInBytes, .Height = c->Height};
  mock_op nop;
  int empty;
  MOCK_TRY(mock_copy2d_op(&c2, &nop, &empty));
  if (empty) return CUDA_ERROR_INVALID_VALUE;
  op->dst = nop.dst, op->src = nop.src, op->width = nop.width, op->height = nop.height;
  op->dpitch = nop.dpitch, op->spitch = nop.spitch;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecEventRecordNodeSetEvent(CUgraphExec hx, CUgraphNode hn, CUevent e) {
  struct mock_graph *x;
  mock_op *op;
  MOCK_TRY(exec_lookup(hx, hn, &x, &op));
  if (!e || e->magic != MOCK_MAGIC_EVENT || op->kind != MOCK_OP_EVENT) return CUDA_ERROR_INVALID_VALUE;
  op->event = e;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecEventWaitNodeSetEvent(CUgraphExec hx, CUgraphNode hn, CUevent e) {
  struct mock_graph *x;
  mock_op *op;
  MOCK_TRY(exec_lookup(hx, hn, &x, &op));
  if (!e || e->magic != MOCK_MAGIC_EVENT || op->node->type != CU_GRAPH_NODE_TYPE_WAIT_EVENT)
    return CUDA_ERROR_INVALID_VALUE;
  op->event = e;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphNodeSetEnabled(CUgraphExec hx, CUgraphNode hn, unsigned int on) {
  struct mock_graph *x;
  mock_op *op;
  MOCK_TRY(exec_lookup(hx, hn, &x, &op));
  op->disabled = !on;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecNodeSetParams(CUgraphExec hx, CUgraphNode hn, CUgraphNodeParams *p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  switch (p->type) {
  case CU_GRAPH_NODE_TYPE_KERNEL: {
    CUDA_KERNEL_NODE_PARAMS k;
    memset(&k, 0, sizeof k);
    k.func = p->kernel.func;
    k.gridDimX = p->kernel.gridDimX, k.gridDimY = p->kernel.gridDimY, k.gridDimZ = p->kernel.gridDimZ;
    k.blockDimX = p->kernel.blockDimX, k.blockDimY = p->kernel.blockDimY, k.blockDimZ = p->kernel.blockDimZ;
    k.sharedMemBytes = p->kernel.sharedMemBytes;
    k.kernelParams = p->kernel.kernelParams;
    k.extra = p->kernel.extra;
    return cuGraphExecKernelNodeSetParams(hx, hn, &k);
  }
  case CU_GRAPH_NODE_TYPE_MEMSET: {
    CUDA_MEMSET_NODE_PARAMS m;
    memset(&m, 0, sizeof m);
    m.dst = p->memset.dst, m.pitch = p->memset.pitch, m.value = p->memset.value;
    m.elementSize = p->memset.elementSize, m.width = p->memset.width, m.height = p->memset.height;
    return cuGraphExecMemsetNodeSetParams(hx, hn, &m, p->memset.ctx);
  }
  case CU_GRAPH_NODE_TYPE_MEMCPY:
    return cuGraphExecMemcpyNodeSetParams(hx, hn, &p->memcpy.copyParams, p->memcpy.copyCtx);
  default:
    return CUDA_ERROR_NOT_SUPPORTED;
  }
}

/* Same topology (node count, types, dependencies by index): the exec takes
 * the new graph's parameters; else CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED. */
CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hx, CUgraph h, CUgraphExecUpdateResultInfo *info) {
  MOCK_TRY(mock_need_ctx());
  struct mock_graph *x = mock_exec_of(hx), *g = mock_graph_of(h);
  if (info) memset(info, 0, sizeof *info);
  if (!x || !g) return CUDA_ERROR_INVALID_VALUE;
  struct mock_graph *nx = NULL;
  int same = g->nnodes == x->nops;
  for (size_t i = 0; same && i < g->nnodes; i++) {
    const struct mock_node *a = g->nodes[i], *b = NULL;
    for (size_t k = 0; k < x->nops; k++)
      if (x->ops[k].node && x->ops[k].node->idx == i) b = x->ops[k].node;
    same = b && a->type == b->type && a->ndeps == b->ndeps;
  }
  if (!same) {
    if (info) info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
  }
  MOCK_TRY(mock_graph_instantiate(g, &nx));
  /* swap the contents; the exec keeps answering to the original nodes */
  for (size_t i = 0; i < nx->nops; i++) {
    for (size_t k = 0; k < x->nops; k++)
      if (x->ops[k].node && x->ops[k].node->idx == nx->ops[i].node->idx) {
        nx->ops[i].node = x->ops[k].node;
        break;
      }
  }
  mock_op *t = x->ops;
  size_t tn = x->nops;
  x->ops = nx->ops;
  x->nops = nx->nops;
  nx->ops = t;
  nx->nops = tn;
  mock_graph_free(nx);
  if (info) info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
  return CUDA_SUCCESS;
}
/* pre-12.0 signature, exported as `cuGraphExecUpdate` */
CUresult CUDAAPI mock_graph_exec_update_v1(CUgraphExec hx, CUgraph h, CUgraphNode *err,
                                           CUgraphExecUpdateResult *res) __asm__("cuGraphExecUpdate");
CUresult CUDAAPI mock_graph_exec_update_v1(CUgraphExec hx, CUgraph h, CUgraphNode *err,
                                           CUgraphExecUpdateResult *res) {
  CUgraphExecUpdateResultInfo info;
  CUresult rc = cuGraphExecUpdate(hx, h, &info);
  if (err) *err = info.errorNode;
  if (res) *res = info.result;
  return rc;
}

/* cuGraphKernelNodeSetParams on a graph node: later instantiations use it. */
CUresult CUDAAPI cuGraphKernelNodeSetParams(CUgraphNode hn, const CUDA_KERNEL_NODE_PARAMS *p) {
  MOCK_TRY(mock_need_ctx());
  struct mock_node *n = mock_node_of(hn);
  if (!n || !p || n->type != CU_GRAPH_NODE_TYPE_KERNEL || !p->func) return CUDA_ERROR_INVALID_VALUE;
  mock_op nop;
  MOCK_TRY(mock_kernel_op(p->func, (mock_dim3){p->gridDimX, p->gridDimY, p->gridDimZ},
                          (mock_dim3){p->blockDimX, p->blockDimY, p->blockDimZ}, p->sharedMemBytes, p->kernelParams,
                          p->extra, &nop));
  void **kp = NULL;
  if (nop.func->nparams > 0) {
    kp = calloc((size_t)nop.func->nparams, sizeof *kp);
    if (!kp) {
      free(nop.argbuf);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (int i = 0; i < nop.func->nparams; i++) kp[i] = nop.argbuf + nop.func->params[i].offset;
  }
  free(n->op.argbuf);
  free(n->kparams);
  n->op.func = nop.func, n->op.grid = nop.grid, n->op.block = nop.block, n->op.shmem = nop.shmem;
  n->op.argbuf = nop.argbuf;
  n->kparams = kp;
  return CUDA_SUCCESS;
}

/* ---- capture into an existing graph ------------------------------------------------ */
struct mock_graph *mock_stream_capture_graph(CUstream s) {
  return s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD ? s->capture : NULL;
}

#define P(name, ver) {#name, ver, (void *)name}
const mock_proc mock_procs_graph_ext[] = {
  P(cuGraphConditionalHandleCreate, 12030),
  {"cuGraphAddNode", 12020, (void *)mock_graph_add_node_v1}, P(cuGraphAddNode, 12030),
  P(cuGraphAddMemAllocNode, 11040), P(cuGraphMemAllocNodeGetParams, 11040), P(cuGraphAddMemFreeNode, 11040),
  P(cuGraphMemFreeNodeGetParams, 11040), P(cuGraphAddHostNode, 10000), P(cuGraphHostNodeGetParams, 10000),
  P(cuGraphAddChildGraphNode, 10000), P(cuGraphChildGraphNodeGetGraph, 10000),
  P(cuGraphAddEventRecordNode, 11010), P(cuGraphAddEventWaitNode, 11010),
  P(cuGraphEventRecordNodeGetEvent, 11010), P(cuGraphEventWaitNodeGetEvent, 11010),
  P(cuGraphClone, 10000), P(cuGraphNodeFindInClone, 10000),
  {"cuGraphExecKernelNodeSetParams", 10010, (void *)cuGraphExecKernelNodeSetParams},
  P(cuGraphExecKernelNodeSetParams, 12000), P(cuGraphExecMemsetNodeSetParams, 10020),
  P(cuGraphExecMemcpyNodeSetParams, 10020), P(cuGraphExecEventRecordNodeSetEvent, 11010),
  P(cuGraphExecEventWaitNodeSetEvent, 11010), P(cuGraphNodeSetEnabled, 11060), P(cuGraphExecNodeSetParams, 12020),
  {"cuGraphExecUpdate", 10020, (void *)mock_graph_exec_update_v1}, P(cuGraphExecUpdate, 12000),
  {"cuGraphKernelNodeSetParams", 10000, (void *)cuGraphKernelNodeSetParams},
  P(cuGraphKernelNodeSetParams, 12000),
  {NULL, 0, NULL}};
#undef P
