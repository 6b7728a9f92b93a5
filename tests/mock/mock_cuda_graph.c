/* CUDA graphs of the mock driver: graphs built by stream capture
 * (mock_graph_append, called from mock_submit) and by the explicit API
 * (cuGraphCreate + cuGraphAdd{Kernel,Memcpy,Memset,Empty}Node +
 * cuGraphAddDependencies), the node queries a recorder uses (cuGraphGetNodes,
 * cuGraphNodeGetType, cuGraph*NodeGetParams, cuGraphNodeGetDependencies),
 * and instantiate/launch. A graph owns its nodes; node handles stay valid
 * until cuGraphDestroy. Instantiation copies the nodes' ops in a topological
 * order (Kahn, ties broken by insertion order) into the exec, which
 * cuGraphLaunch runs synchronously. Owner: tests/mock. */
#include "mock_cuda_internal.h"

#include <stdlib.h>
#include <string.h>

/* top-level execs (not the bodies inside them), under mock_lock; dead ones
 * keep their shell for the use check */
static struct mock_graph *all_execs, *dead_execs;

static struct mock_graph *graph_of(void *h, uint32_t magic) {
  struct mock_graph *g = h;
  if (g && g->magic == MOCK_MAGIC_DEAD) mock_dead_use("graph exec", g);
  return g && g->magic == magic ? g : NULL;
}

struct mock_graph *mock_exec_of(void *h) { return graph_of(h, MOCK_MAGIC_GEXEC); }

void mock_graphs_ctx_destroyed(CUcontext c) {
  pthread_mutex_lock(&mock_lock);
  for (struct mock_graph **pp = &all_execs; *pp;) {
    struct mock_graph *x = *pp;
    if (x->exec_owner != c) { pp = &x->next_exec; continue; }
    *pp = x->next_exec;
    for (size_t i = 0; i < x->nops; i++) { /* what graph_free frees, but the shell */
      free(x->ops[i].argbuf);
      for (unsigned k = 0; k < x->ops[i].nsubs; k++) mock_graph_free(x->ops[i].subs[k]);
      free(x->ops[i].subs);
    }
    free(x->ops);
    x->ops = NULL;
    x->nops = 0;
    x->magic = MOCK_MAGIC_DEAD;
    x->next_exec = dead_execs;
    dead_execs = x;
  }
  pthread_mutex_unlock(&mock_lock);
}

struct mock_graph *mock_graph_of(void *h) { return graph_of(h, MOCK_MAGIC_GRAPH); }

static struct mock_node *node_of(CUgraphNode h) {
  struct mock_node *n = (struct mock_node *)h;
  return n && n->magic == MOCK_MAGIC_NODE ? n : NULL;
}

struct mock_node *mock_node_of(CUgraphNode h) { return node_of(h); }

static void graph_free(struct mock_graph *g);

static void node_free(struct mock_node *n) {
  free(n->op.argbuf);
  free(n->deps);
  free(n->edges);
  free(n->kparams);
  for (unsigned i = 0; i < n->nbodies; i++)
    if (n->bodies[i]) graph_free(n->bodies[i]);
  free(n->bodies);
  /* a graph allocation lives as long as its graph here (the real driver
   * keeps it until it is freed; nothing in the mock's users needs more) */
  if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && n->alloc.dptr) mock_free_device(n->alloc.dptr);
  n->magic = 0;
  free(n);
}

static void graph_free(struct mock_graph *g) {
  MOCK_LIVE(g->magic == MOCK_MAGIC_GEXEC ? MOCK_LIVE_GEXEC : MOCK_LIVE_GRAPH, -1);
  for (size_t i = 0; i < g->nops; i++) {
    free(g->ops[i].argbuf);
    for (unsigned k = 0; k < g->ops[i].nsubs; k++) graph_free(g->ops[i].subs[k]);
    free(g->ops[i].subs);
  }
  for (size_t i = 0; i < g->nnodes; i++) node_free(g->nodes[i]);
  free(g->ops);
  free(g->nodes);
  g->magic = 0;
  free(g);
}

void mock_graph_free(struct mock_graph *g) {
  if (g) graph_free(g);
}

struct mock_graph *mock_graph_new(void) {
  struct mock_graph *g = calloc(1, sizeof *g);
  if (g) {
    g->magic = MOCK_MAGIC_GRAPH;
    MOCK_LIVE(MOCK_LIVE_GRAPH, 1);
  }
  return g;
}

static CUresult node_add_dep_e(struct mock_node *n, struct mock_node *d, const CUgraphEdgeData *e) {
  for (size_t i = 0; i < n->ndeps; i++)
    if (n->deps[i] == d) return CUDA_ERROR_INVALID_VALUE; /* duplicate edge */
  if (n->ndeps == n->capdeps) {
    size_t nc = n->capdeps ? n->capdeps * 2 : 4;
    struct mock_node **p = realloc(n->deps, nc * sizeof *p);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    n->deps = p;
    CUgraphEdgeData *q = realloc(n->edges, nc * sizeof *q);
    if (!q) return CUDA_ERROR_OUT_OF_MEMORY;
    n->edges = q;
    n->capdeps = nc;
  }
  if (e) n->edges[n->ndeps] = *e;
  else memset(&n->edges[n->ndeps], 0, sizeof n->edges[n->ndeps]);
  n->deps[n->ndeps++] = d;
  return CUDA_SUCCESS;
}

static CUresult node_add_dep(struct mock_node *n, struct mock_node *d) {
  return node_add_dep_e(n, d, NULL);
}

/* The parameters a recorder reads back, for ops that came from capture. */
static void node_describe(struct mock_node *n) {
  const mock_op *op = &n->op;
  if (op->kind == MOCK_OP_COPY) {
    CUDA_MEMCPY3D *c = &n->copy;
    memset(c, 0, sizeof *c);
    c->srcMemoryType = mock_mem_type(op->src) == CU_MEMORYTYPE_DEVICE ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    if (c->srcMemoryType == CU_MEMORYTYPE_DEVICE) c->srcDevice = (CUdeviceptr)(uintptr_t)op->src;
    else c->srcHost = op->src;
    c->dstMemoryType = mock_mem_type(op->dst) == CU_MEMORYTYPE_DEVICE ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    if (c->dstMemoryType == CU_MEMORYTYPE_DEVICE) c->dstDevice = (CUdeviceptr)(uintptr_t)op->dst;
    else c->dstHost = op->dst;
    c->srcPitch = op->spitch ? op->spitch : op->width;
    c->dstPitch = op->dpitch ? op->dpitch : op->width;
    c->srcHeight = c->dstHeight = op->height;
    c->WidthInBytes = op->width;
    c->Height = op->height;
    c->Depth = 1;
  } else if (op->kind == MOCK_OP_SET) {
    CUDA_MEMSET_NODE_PARAMS *m = &n->set;
    memset(m, 0, sizeof *m);
    m->dst = (CUdeviceptr)(uintptr_t)op->dst;
    m->pitch = op->dpitch;
    m->value = op->value;
    m->elementSize = op->elem;
    m->width = op->width;
    m->height = op->height;
  }
}

static CUgraphNodeType type_of(mock_op_kind k) {
  switch (k) {
  case MOCK_OP_KERNEL: return CU_GRAPH_NODE_TYPE_KERNEL;
  case MOCK_OP_COPY: return CU_GRAPH_NODE_TYPE_MEMCPY;
  case MOCK_OP_SET: return CU_GRAPH_NODE_TYPE_MEMSET;
  case MOCK_OP_HOST: return CU_GRAPH_NODE_TYPE_HOST;
  case MOCK_OP_COND: return CU_GRAPH_NODE_TYPE_CONDITIONAL;
  case MOCK_OP_CHILD: return CU_GRAPH_NODE_TYPE_GRAPH;
  case MOCK_OP_EVENT: return CU_GRAPH_NODE_TYPE_EVENT_RECORD;
  case MOCK_OP_EMPTY: case MOCK_OP_MARK: break;
  }
  return CU_GRAPH_NODE_TYPE_EMPTY;
}

/* Adds a node running *op (argbuf taken on success) after deps[0..nd). */
static CUresult graph_add(struct mock_graph *g, const mock_op *op, const CUgraphNode *deps, size_t nd,
                          struct mock_node **out);

CUresult mock_graph_add(struct mock_graph *g, const mock_op *op, CUgraphNodeType type,
                        const CUgraphNode *deps, size_t nd, struct mock_node **out) {
  struct mock_node *n = NULL;
  MOCK_TRY(graph_add(g, op, deps, nd, &n));
  if (op->kind == MOCK_OP_EMPTY) n->type = type;
  if (out) *out = n;
  return CUDA_SUCCESS;
}

static CUresult graph_add(struct mock_graph *g, const mock_op *op, const CUgraphNode *deps, size_t nd,
                          struct mock_node **out) {
  if (nd && !deps) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < nd; i++) {
    struct mock_node *d = node_of(deps[i]);
    if (!d || d->graph != g) return CUDA_ERROR_INVALID_VALUE;
  }
  if (g->nnodes == g->capnodes) {
    size_t nc = g->capnodes ? g->capnodes * 2 : 16;
    struct mock_node **p = realloc(g->nodes, nc * sizeof *p);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    g->nodes = p;
    g->capnodes = nc;
  }
  struct mock_node *n = calloc(1, sizeof *n);
  if (!n) return CUDA_ERROR_OUT_OF_MEMORY;
  n->magic = MOCK_MAGIC_NODE;
  n->op = *op;
  n->type = type_of(op->kind);
  n->graph = g;
  for (size_t i = 0; i < nd; i++) {
    CUresult rc = node_add_dep(n, node_of(deps[i]));
    if (rc != CUDA_SUCCESS) {
      n->op.argbuf = NULL; /* still the caller's */
      node_free(n);
      return rc;
    }
  }
  if (op->kind == MOCK_OP_KERNEL && op->func->nparams > 0) {
    n->kparams = calloc((size_t)op->func->nparams, sizeof *n->kparams);
    if (!n->kparams) {
      n->op.argbuf = NULL;
      node_free(n);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (int i = 0; i < op->func->nparams; i++) n->kparams[i] = n->op.argbuf + op->func->params[i].offset;
  }
  node_describe(n);
  n->idx = g->nnodes;
  g->nodes[g->nnodes++] = n;
  if (out) *out = n;
  return CUDA_SUCCESS;
}

CUresult mock_graph_append(struct mock_graph *g, const mock_op *op) {
  CUgraphNode prev = (CUgraphNode)g->cap_tail;
  struct mock_node *n = NULL;
  MOCK_TRY(graph_add(g, op, prev ? &prev : NULL, prev ? 1 : 0, &n));
  g->cap_tail = n;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphCreate(CUgraph *pg, unsigned int flags) {
  MOCK_TRY(mock_need_ctx());
  if (!pg || flags) return CUDA_ERROR_INVALID_VALUE;
  struct mock_graph *g = calloc(1, sizeof *g);
  if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
  g->magic = MOCK_MAGIC_GRAPH;
  MOCK_LIVE(MOCK_LIVE_GRAPH, 1);
  *pg = (CUgraph)g;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph h) {
  MOCK_TRY(mock_need_ctx());
  struct mock_graph *g = graph_of(h, MOCK_MAGIC_GRAPH);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  graph_free(g);
  return CUDA_SUCCESS;
}

/* ---- explicit construction ------------------------------------------------ */
CUresult CUDAAPI cuGraphAddKernelNode(CUgraphNode *pn, CUgraph h, const CUgraphNode *deps, size_t nd,
                                      const CUDA_KERNEL_NODE_PARAMS *p) {
  MOCK_TRY(mock_need_ctx());
  struct mock_graph *g = graph_of(h, MOCK_MAGIC_GRAPH);
  if (!g || !pn || !p) return CUDA_ERROR_INVALID_VALUE;
  /* func NULL: the CUkernel `kern` (the mock's CUkernel is its function) */
  CUfunction fn = p->func ? p->func : (CUfunction)p->kern;
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  mock_op op;
  MOCK_TRY(mock_kernel_op(fn, (mock_dim3){p->gridDimX, p->gridDimY, p->gridDimZ},
                          (mock_dim3){p->blockDimX, p->blockDimY, p->blockDimZ}, p->sharedMemBytes, p->kernelParams,
                          p->extra, &op));
  struct mock_node *n;
  CUresult rc = graph_add(g, &op, deps, nd, &n);
  if (rc != CUDA_SUCCESS) { free(op.argbuf); return rc; }
  *pn = (CUgraphNode)n;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphAddMemcpyNode(CUgraphNode *pn, CUgraph h, const CUgraphNode *deps, size_t nd,
                                      const CUDA_MEMCPY3D *c, CUcontext ctx) {
  (void)ctx;
  MOCK_TRY(mock_need_ctx());
  struct mock_graph *g = graph_of(h, MOCK_MAGIC_GRAPH);
  if (!g || !pn || !c) return CUDA_ERROR_INVALID_VALUE;
  /* Same checks and error codes as before the 2D path was shared with
   * cuMemcpy2D: unknown/array memory and 3D copies are not supported, empty
   * copies are invalid for a node. */
  for (int side = 0; side < 2; side++) {
    CUmemorytype t = side ? c->dstMemoryType : c->srcMemoryType;
    if (t != CU_MEMORYTYPE_HOST && t != CU_MEMORYTYPE_DEVICE && t != CU_MEMORYTYPE_UNIFIED)
      return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (c->Depth > 1 || c->srcZ || c->dstZ) return CUDA_ERROR_NOT_SUPPORTED; /* 3D: not in the mock */
  if (!c->WidthInBytes || !c->Height || !c->Depth) return CUDA_ERROR_INVALID_VALUE;
  CUDA_MEMCPY2D c2 = {
      .srcXInBytes = c->srcXInBytes, .srcY = c->srcY, .srcMemoryType = c->srcMemoryType,
      .srcHost = c->srcHost, .srcDevice = c->srcDevice, .srcPitch = c->srcPitch,
      .dstXInBytes = c->dstXInBytes, .dstY = c->dstY, .dstMemoryType = c->dstMemoryType,
      .dstHost = c->dstHost, .dstDevice = c->dstDevice, .dstPitch = c->dstPitch,
      .WidthInBytes = c->WidthInBytes, .Height = c->Height};
  mock_op op;
  int empty;
  MOCK_TRY(mock_copy2d_op(&c2, &op, &empty));
  struct mock_node *n;
  MOCK_TRY(graph_add(g, &op, deps, nd, &n));
  n->copy = *c; /* report the parameters as given */
  *pn = (CUgraphNode)n;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphAddMemsetNode(CUgraphNode *pn, CUgraph h, const CUgraphNode *deps, size_t nd,
                                      const CUDA_MEMSET_NODE_PARAMS *m, CUcontext ctx) {
  (void)ctx;
  MOCK_TRY(mock_need_ctx());
  struct mock_graph *g = graph_of(h, MOCK_MAGIC_GRAPH);
  if (!g || !pn || !m) return CUDA_ERROR_INVALID_VALUE;
  unsigned e = m->elementSize;
  if ((e != 1 && e != 2 && e != 4) || !m->width || !m->height || m->dst % e) return CUDA_ERROR_INVALID_VALUE;
  size_t pitch = m->height > 1 ? m->pitch : m->width * e;
  if (pitch < m->width * e || !mock_dev_range_ok(m->dst, (m->height - 1) * pitch + m->width * e))
    return CUDA_ERROR_INVALID_VALUE;
  mock_op op = {0};
  op.kind = MOCK_OP_SET;
  op.dst = (void *)(uintptr_t)m->dst;
  op.dpitch = pitch;
  op.value = m->value;
  op.elem = e;
  op.width = m->width;
  op.height = m->height;
  struct mock_node *n;
  MOCK_TRY(graph_add(g, &op, deps, nd, &n));
  n->set = *m;
  *pn = (CUgraphNode)n;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode *pn, CUgraph h, const CUgraphNode *deps, size_t nd) {
  MOCK_TRY(mock_need_ctx());
  struct mock_graph *g = graph_of(h, MOCK_MAGIC_GRAPH);
  if (!g || !pn) return CUDA_ERROR_INVALID_VALUE;
  mock_op op = {0};
  op.kind = MOCK_OP_EMPTY;
  struct mock_node *n;
  MOCK_TRY(graph_add(g, &op, deps, nd, &n));
  *pn = (CUgraphNode)n;
  return CUDA_SUCCESS;
}

static int edge_default(const CUgraphEdgeData *e) {
  return !e || (!e->from_port && !e->to_port && !e->type);
}

CUresult CUDAAPI cuGraphAddDependencies(CUgraph h, const CUgraphNode *from, const CUgraphNode *to,
                                        const CUgraphEdgeData *edges, size_t n) {
  MOCK_TRY(mock_need_ctx());
  struct mock_graph *g = graph_of(h, MOCK_MAGIC_GRAPH);
  if (!g || (n && (!from || !to))) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < n; i++) {
    struct mock_node *a = node_of(from[i]), *b = node_of(to[i]);
    if (!a || !b || a->graph != g || b->graph != g || a == b) return CUDA_ERROR_INVALID_VALUE;
    /* what the driver accepts: programmatic edges from a kernel node to a
     * kernel node (the mock runs them as full dependencies) */
    if (edges && !edge_default(&edges[i]) &&
        (a->type != CU_GRAPH_NODE_TYPE_KERNEL || b->type != CU_GRAPH_NODE_TYPE_KERNEL ||
         edges[i].to_port || edges[i].type != CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC))
      return CUDA_ERROR_NOT_SUPPORTED;
  }
  for (size_t i = 0; i < n; i++)
    MOCK_TRY(node_add_dep_e(node_of(to[i]), node_of(from[i]), edges ? &edges[i] : NULL));
  return CUDA_SUCCESS;
}
/* pre-12.3 signature (no edge data), exported as `cuGraphAddDependencies` */
CUresult CUDAAPI mock_graph_add_deps_v1(CUgraph h, const CUgraphNode *from, const CUgraphNode *to, size_t n)
    __asm__("cuGraphAddDependencies");
CUresult CUDAAPI mock_graph_add_deps_v1(CUgraph h, const CUgraphNode *from, const CUgraphNode *to, size_t n) {
  return cuGraphAddDependencies(h, from, to, NULL, n);
}

/* ---- queries ---------------------------------------------------------------- */
CUresult CUDAAPI cuGraphGetNodes(CUgraph h, CUgraphNode *nodes, size_t *n) {
  MOCK_TRY(mock_need_ctx());
  struct mock_graph *g = graph_of(h, MOCK_MAGIC_GRAPH);
  if (!g || !n) return CUDA_ERROR_INVALID_VALUE;
  if (nodes) {
    for (size_t i = 0; i < *n; i++) nodes[i] = i < g->nnodes ? (CUgraphNode)g->nodes[i] : NULL;
    if (*n > g->nnodes) *n = g->nnodes;
    return CUDA_SUCCESS;
  }
  *n = g->nnodes;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode h, CUgraphNodeType *t) {
  struct mock_node *n = node_of(h);
  if (!n || !t) return CUDA_ERROR_INVALID_VALUE;
  *t = n->type;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphKernelNodeGetParams(CUgraphNode h, CUDA_KERNEL_NODE_PARAMS *p) {
  struct mock_node *n = node_of(h);
  if (!n || !p) return CUDA_ERROR_INVALID_VALUE;
  if (n->type != CU_GRAPH_NODE_TYPE_KERNEL) return CUDA_ERROR_INVALID_VALUE;
  memset(p, 0, sizeof *p);
  p->func = n->op.func;
  p->gridDimX = n->op.grid.x, p->gridDimY = n->op.grid.y, p->gridDimZ = n->op.grid.z;
  p->blockDimX = n->op.block.x, p->blockDimY = n->op.block.y, p->blockDimZ = n->op.block.z;
  p->sharedMemBytes = n->op.shmem;
  p->kernelParams = n->kparams; /* valid while the node lives, as on the real driver */
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphMemcpyNodeGetParams(CUgraphNode h, CUDA_MEMCPY3D *p) {
  struct mock_node *n = node_of(h);
  if (!n || !p || n->type != CU_GRAPH_NODE_TYPE_MEMCPY) return CUDA_ERROR_INVALID_VALUE;
  *p = n->copy;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphMemsetNodeGetParams(CUgraphNode h, CUDA_MEMSET_NODE_PARAMS *p) {
  struct mock_node *n = node_of(h);
  if (!n || !p || n->type != CU_GRAPH_NODE_TYPE_MEMSET) return CUDA_ERROR_INVALID_VALUE;
  *p = n->set;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphNodeGetDependencies(CUgraphNode h, CUgraphNode *deps, CUgraphEdgeData *edges, size_t *nd) {
  struct mock_node *n = node_of(h);
  if (!n || !nd) return CUDA_ERROR_INVALID_VALUE;
  if (!deps) {
    /* MOCK_LOSSY_COUNT=1: the count query is refused as lossy too */
    if (!edges && getenv("MOCK_LOSSY_COUNT"))
      for (size_t i = 0; i < n->ndeps; i++)
        if (!edge_default(&n->edges[i])) return CUDA_ERROR_LOSSY_QUERY;
    *nd = n->ndeps;
    return CUDA_SUCCESS;
  }
  /* a non-default edge cannot be returned without its data */
  if (!edges)
    for (size_t i = 0; i < n->ndeps && i < *nd; i++)
      if (!edge_default(&n->edges[i])) return CUDA_ERROR_LOSSY_QUERY;
  for (size_t i = 0; i < *nd; i++) {
    deps[i] = i < n->ndeps ? (CUgraphNode)n->deps[i] : NULL;
    if (edges) {
      if (i < n->ndeps) edges[i] = n->edges[i];
      else memset(&edges[i], 0, sizeof edges[i]);
    }
  }
  if (*nd > n->ndeps) *nd = n->ndeps;
  return CUDA_SUCCESS;
}
/* pre-12.3 signature, exported as `cuGraphNodeGetDependencies` */
CUresult CUDAAPI mock_node_get_deps_v1(CUgraphNode h, CUgraphNode *deps, size_t *nd)
    __asm__("cuGraphNodeGetDependencies");
CUresult CUDAAPI mock_node_get_deps_v1(CUgraphNode h, CUgraphNode *deps, size_t *nd) {
  return cuGraphNodeGetDependencies(h, deps, NULL, nd);
}

/* ---- instantiate / launch ----------------------------------------------------- */
/* The exec's copy of a node's op: kernel arguments copied, conditional
 * bodies and child graphs instantiated (owned by the exec op). */
static CUresult op_copy(mock_op *dst, const struct mock_node *n) {
  const mock_op *src = &n->op;
  *dst = *src;
  dst->argbuf = NULL;
  dst->subs = NULL;
  dst->nsubs = 0;
  dst->node = n;
  if (src->argbuf) {
    size_t sz = src->func->param_bytes;
    dst->argbuf = malloc(sz ? sz : 1);
    if (!dst->argbuf) return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(dst->argbuf, src->argbuf, sz);
  }
  if (n->nbodies && (src->kind == MOCK_OP_COND || src->kind == MOCK_OP_CHILD)) {
    dst->subs = calloc(n->nbodies, sizeof *dst->subs);
    if (!dst->subs) return CUDA_ERROR_OUT_OF_MEMORY;
    for (unsigned i = 0; i < n->nbodies; i++) {
      MOCK_TRY(mock_graph_instantiate(n->bodies[i], &dst->subs[i]));
      dst->nsubs++;
    }
  }
  return CUDA_SUCCESS;
}

CUresult mock_graph_instantiate(struct mock_graph *g, struct mock_graph **out) {
  struct mock_graph *x = calloc(1, sizeof *x);
  unsigned char *placed = calloc(g->nnodes ? g->nnodes : 1, 1);
  if (!x || !placed) { free(x); free(placed); return CUDA_ERROR_OUT_OF_MEMORY; }
  x->magic = MOCK_MAGIC_GEXEC;
  x->ops = calloc(g->nnodes ? g->nnodes : 1, sizeof *x->ops);
  if (!x->ops) { free(placed); free(x); return CUDA_ERROR_OUT_OF_MEMORY; }
  MOCK_LIVE(MOCK_LIVE_GEXEC, 1);
  /* Kahn: each round places the first unplaced node whose dependencies are
   * all placed, so a graph built in order keeps its order */
  CUresult rc = CUDA_SUCCESS;
  while (x->nops < g->nnodes && rc == CUDA_SUCCESS) {
    size_t pick = g->nnodes;
    for (size_t i = 0; i < g->nnodes && pick == g->nnodes; i++) {
      if (placed[i]) continue;
      int ready = 1;
      for (size_t k = 0; k < g->nodes[i]->ndeps && ready; k++) ready = placed[g->nodes[i]->deps[k]->idx];
      if (ready) pick = i;
    }
    if (pick == g->nnodes) { rc = CUDA_ERROR_INVALID_VALUE; break; } /* cycle */
    placed[pick] = 1;
    rc = op_copy(&x->ops[x->nops], g->nodes[pick]);
    x->nops++; /* counted even when half-made: graph_free frees what is there */
  }
  free(placed);
  if (rc != CUDA_SUCCESS) { graph_free(x); return rc; }
  *out = x;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *pe, CUgraph h, unsigned long long flags) {
  (void)flags;
  MOCK_TRY(mock_need_ctx());
  struct mock_graph *g = graph_of(h, MOCK_MAGIC_GRAPH);
  if (!g || !pe) return CUDA_ERROR_INVALID_VALUE;
  struct mock_graph *x = NULL;
  MOCK_TRY(mock_graph_instantiate(g, &x));
  x->exec_owner = mock_current_ctx();
  pthread_mutex_lock(&mock_lock);
  x->next_exec = all_execs;
  all_execs = x;
  pthread_mutex_unlock(&mock_lock);
  *pe = (CUgraphExec)x;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec h) {
  MOCK_TRY(mock_need_ctx());
  struct mock_graph *x = graph_of(h, MOCK_MAGIC_GEXEC);
  if (!x) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mock_lock);
  for (struct mock_graph **pp = &all_execs; *pp; pp = &(*pp)->next_exec)
    if (*pp == x) { *pp = x->next_exec; break; }
  pthread_mutex_unlock(&mock_lock);
  graph_free(x);
  return CUDA_SUCCESS;
}

CUresult mock_graph_run(const struct mock_graph *x) {
  for (size_t i = 0; i < x->nops; i++)
    if (!x->ops[i].disabled) MOCK_TRY(mock_run_op(&x->ops[i]));
  return CUDA_SUCCESS;
}

CUresult mock_graph_launch(CUgraphExec h, CUstream s) {
  MOCK_TRY(mock_check_stream(s));
  struct mock_graph *x = graph_of(h, MOCK_MAGIC_GEXEC);
  if (!x) return CUDA_ERROR_INVALID_VALUE;
  if (s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD && s->capture)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* graph-in-graph capture: not in the mock */
  if (mock_async() && (!s || s == CU_STREAM_LEGACY)) mock_drain_all(1);
  mock_cond_reset(x);
  mock_tool_graph = 1;
  mock_tool_submit(s, 0);
  CUresult rc = CUDA_SUCCESS;
  for (size_t i = 0; i < x->nops && rc == CUDA_SUCCESS; i++) /* conditional bodies and child graphs run inside their op */
    if (!x->ops[i].disabled) rc = mock_run_op_traced(&x->ops[i], s);
  mock_tool_graph = 0;
  return rc;
}

#define P(name, ver) {#name, ver, (void *)name}
const mock_proc mock_procs_graph[] = {
  P(cuGraphCreate, 10000), P(cuGraphDestroy, 10000), P(cuGraphGetNodes, 10000),
  {"cuGraphInstantiateWithFlags", 11040, (void *)cuGraphInstantiate}, P(cuGraphInstantiate, 12000),
  P(cuGraphExecDestroy, 10000),
  P(cuGraphAddKernelNode, 12000), P(cuGraphAddMemcpyNode, 10000), P(cuGraphAddMemsetNode, 10000),
  P(cuGraphAddEmptyNode, 10000),
  {"cuGraphAddDependencies", 10000, (void *)mock_graph_add_deps_v1}, P(cuGraphAddDependencies, 12030),
  P(cuGraphNodeGetType, 10000), P(cuGraphKernelNodeGetParams, 12000), P(cuGraphMemcpyNodeGetParams, 10000),
  P(cuGraphMemsetNodeGetParams, 10000),
  {"cuGraphNodeGetDependencies", 10000, (void *)mock_node_get_deps_v1}, P(cuGraphNodeGetDependencies, 12030),
  {NULL, 0, NULL}};
#undef P
