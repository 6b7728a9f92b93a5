/* custom_graph_nodes.c - graph construction and exec-update hooks.
 *
 * The driver has no query for a conditional node's parameters (handle, type,
 * body graphs) nor for a conditional handle's default value, so they are
 * remembered here when the program creates them (cuGraphConditionalHandleCreate,
 * cuGraphAddNode) and added by the graph walk (custom_graph.c) to the
 * GraphNode of every conditional node, with its body graphs walked in turn
 * (child graphs too). Changes to an instantiated graph are recorded with
 * their parameters: cuGraphExec*SetParams / cuGraphExecNodeSetParams /
 * cuGraphNodeSetEnabled as Graph{ExecSetParams, exec, nodes: [the node]},
 * cuGraphExecUpdate as Graph{ExecUpdate, exec, graph, nodes: the new graph's
 * topology}. cuStreamBeginCaptureToGraph (custom_capture.c) is a
 * Stream{BeginCapture} that names the graph captured into. The replayer
 * rebuilds from these
 * (replay/replay_graph*.c). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cucap_vec.h"
#include "custom_internal.h"

/* Walks nest: conditional bodies inside bodies, child graphs inside them. */
#define CX_GRAPH_MAX_DEPTH 8

/* ---- what the driver cannot tell afterwards ------------------------------- */
typedef struct cx_cond_node {
  uint64_t node, graph;        /* the conditional node and the graph it is in */
  uint64_t handle;
  uint8_t type;
  uint32_t size;
  uint64_t *bodies;            /* size body graphs (driver-owned) */
} cx_cond_node;

typedef struct cx_cond_handle {
  uint64_t graph, handle;
  uint32_t def, flags;
} cx_cond_handle;

static pthread_mutex_t cx_cond_lock = PTHREAD_MUTEX_INITIALIZER;
static cx_cond_node *cx_nodes;
static size_t cx_nnodes, cx_capnodes;
static cx_cond_handle *cx_handles;
static size_t cx_nhandles, cx_caphandles;

static void cond_handle_put(uint64_t graph, uint64_t handle, uint32_t def, uint32_t flags) {
  pthread_mutex_lock(&cx_cond_lock);
  size_t i = 0;
  while (i < cx_nhandles && !(cx_handles[i].graph == graph && cx_handles[i].handle == handle))
    i++;
  if (i == cx_nhandles && !CUCAP_VEC_RESERVE(cx_handles, cx_caphandles, cx_nhandles + 1, 16)) {
    pthread_mutex_unlock(&cx_cond_lock);
    return;
  }
  if (i == cx_nhandles)
    cx_nhandles++;
  cx_handles[i] = (cx_cond_handle){graph, handle, def, flags};
  pthread_mutex_unlock(&cx_cond_lock);
}

static void cond_node_put(uint64_t node, uint64_t graph, const CUDA_CONDITIONAL_NODE_PARAMS *p) {
  uint64_t *bodies = calloc(p->size ? p->size : 1, sizeof *bodies);
  if (!bodies)
    return;
  for (unsigned i = 0; i < p->size && p->phGraph_out; i++)
    bodies[i] = CX_U64(p->phGraph_out[i]);
  pthread_mutex_lock(&cx_cond_lock);
  size_t i = 0;
  while (i < cx_nnodes && cx_nodes[i].node != node) /* a reused handle: replaced */
    i++;
  if (i == cx_nnodes && !CUCAP_VEC_RESERVE(cx_nodes, cx_capnodes, cx_nnodes + 1, 16)) {
    pthread_mutex_unlock(&cx_cond_lock);
    free(bodies);
    return;
  }
  if (i == cx_nnodes)
    cx_nnodes++;
  else
    free(cx_nodes[i].bodies);
  cx_nodes[i] = (cx_cond_node){node, graph, p->handle, (uint8_t)p->type, p->size, bodies};
  pthread_mutex_unlock(&cx_cond_lock);
}

/* Copies the entry of node (in graph g) into *out; bodies malloc'd (caller
 * frees). 0 if unknown. */
static int cond_node_get(uint64_t node, uint64_t g, cx_cond_node *out, uint32_t *def,
                         uint32_t *flags) {
  int found = 0;
  pthread_mutex_lock(&cx_cond_lock);
  for (size_t i = 0; i < cx_nnodes && !found; i++) {
    if (cx_nodes[i].node != node || cx_nodes[i].graph != g)
      continue;
    *out = cx_nodes[i];
    out->bodies = malloc((out->size ? out->size : 1) * sizeof *out->bodies);
    if (!out->bodies)
      break;
    memcpy(out->bodies, cx_nodes[i].bodies, out->size * sizeof *out->bodies);
    found = 1;
  }
  *def = *flags = 0;
  /* the handle belongs to the graph that holds the node, or to an
   * enclosing graph (a loop body sets its parent's condition) */
  for (size_t i = 0; found && i < cx_nhandles; i++)
    if (cx_handles[i].handle == out->handle && cx_handles[i].graph == g) {
      *def = cx_handles[i].def;
      *flags = cx_handles[i].flags;
    }
  pthread_mutex_unlock(&cx_cond_lock);
  return found;
}

void cx_graph_forget(uint64_t g) {
  pthread_mutex_lock(&cx_cond_lock);
  /* g's conditional nodes, then those of their bodies (destroyed with
   * them), until nothing is left that lives in a dropped graph */
  uint64_t *gone = malloc(sizeof *gone);
  size_t ngone = gone ? 1 : 0, capgone = 1;
  if (gone)
    gone[0] = g;
  for (size_t k = 0; k < ngone; k++) {
    for (size_t i = 0; i < cx_nnodes;) {
      if (cx_nodes[i].graph != gone[k]) {
        i++;
        continue;
      }
      for (uint32_t j = 0; j < cx_nodes[i].size; j++) {
        if (!CUCAP_VEC_RESERVE(gone, capgone, ngone + 1, 1))
          break;
        gone[ngone++] = cx_nodes[i].bodies[j];
      }
      free(cx_nodes[i].bodies);
      cx_nodes[i] = cx_nodes[--cx_nnodes];
    }
    for (size_t i = 0; i < cx_nhandles;) {
      if (cx_handles[i].graph == gone[k])
        cx_handles[i] = cx_handles[--cx_nhandles];
      else
        i++;
    }
  }
  free(gone);
  pthread_mutex_unlock(&cx_cond_lock);
}

/* ---- the walk's additions -------------------------------------------------- */
static cucap_fb_ref body_graph(cucap_fbb *b, uint64_t g, int depth) {
  cucap_fb_ref nodes = depth < CX_GRAPH_MAX_DEPTH ? cx_graph_nodes(b, (CUgraph)(uintptr_t)g, depth + 1) : 0;
  cucap_fb_graph_start(b);
  cucap_fb_graph_add_op(b, CUCAP_FB_GRAPHOP_CREATE);
  cucap_fb_graph_add_graph(b, g);
  if (nodes)
    cucap_fb_graph_add_nodes(b, nodes);
  return cucap_fb_graph_end(b);
}

void cx_graph_node_ext(cucap_fbb *b, CUgraph g, CUgraphNode node, CUgraphNodeType type,
                       uint64_t child, int depth, cx_node_ext *out) {
  memset(out, 0, sizeof *out);
  if (type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
    cx_cond_node e;
    uint32_t def = 0, flags = 0;
    if (!cond_node_get(CX_U64(node), CX_U64(g), &e, &def, &flags))
      return; /* made by a clone (no query gives its bodies): left bare */
    out->is_cond = 1;
    out->cond_handle = e.handle;
    out->cond_type = e.type;
    out->cond_size = e.size;
    out->cond_default = def;
    out->cond_flags = flags;
    cucap_fb_ref *refs = malloc((e.size ? e.size : 1) * sizeof *refs);
    if (refs) {
      for (uint32_t i = 0; i < e.size; i++)
        refs[i] = body_graph(b, e.bodies[i], depth);
      out->bodies = cucap_fbb_vector_refs(b, refs, e.size);
      free(refs);
    }
    free(e.bodies);
  } else if (type == CU_GRAPH_NODE_TYPE_GRAPH && child) {
    cucap_fb_ref r = body_graph(b, child, depth);
    out->bodies = cucap_fbb_vector_refs(b, &r, 1);
  } else if (type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
    CUdeviceptr d = 0;
    if (cucap_real.cuGraphMemFreeNodeGetParams &&
        cucap_real.cuGraphMemFreeNodeGetParams(node, &d) == CUDA_SUCCESS) {
      cucap_fb_alloc_start(b);
      cucap_fb_alloc_add_kind(b, CUCAP_FB_ALLOCKIND_ASYNC);
      cucap_fb_alloc_add_address(b, d);
      out->alloc = cucap_fb_alloc_end(b);
    }
  }
}

void cx_graph_node_ext_add(cucap_fbb *b, const cx_node_ext *e) {
  if (e->is_cond) {
    cucap_fb_graph_node_add_cond_handle(b, e->cond_handle);
    cucap_fb_graph_node_add_cond_type(b, e->cond_type);
    cucap_fb_graph_node_add_cond_size(b, e->cond_size);
    cucap_fb_graph_node_add_cond_default(b, e->cond_default);
    cucap_fb_graph_node_add_cond_flags(b, e->cond_flags);
  }
  if (e->bodies)
    cucap_fb_graph_node_add_bodies(b, e->bodies);
}

/* ---- host memory read by copy nodes, at launch ------------------------------------
 * A copy node from host memory reads it when the graph runs, not when it is
 * built: the bytes are stored with every cuGraphLaunch of an exec that has
 * such nodes (packed, like HtoD payloads), and the replay refills its copy
 * of the source before launching. */
typedef struct cx_src {
  uint64_t addr;               /* first byte */
  uint64_t w, h, d, pitch, height; /* geometry of the source side */
} cx_src;

typedef struct cx_exec_srcs {
  uint64_t exec;
  cx_src *v;
  size_t n;
} cx_exec_srcs;

static cx_exec_srcs *cx_srcs;
static size_t cx_nsrcs, cx_capsrcs;

static cx_exec_srcs *srcs_of(uint64_t exec, int create) {
  for (size_t i = 0; i < cx_nsrcs; i++)
    if (cx_srcs[i].exec == exec)
      return &cx_srcs[i];
  if (!create)
    return NULL;
  if (!CUCAP_VEC_RESERVE(cx_srcs, cx_capsrcs, cx_nsrcs + 1, 8))
    return NULL;
  cx_srcs[cx_nsrcs] = (cx_exec_srcs){exec, NULL, 0};
  return &cx_srcs[cx_nsrcs++];
}

static void srcs_add(cx_exec_srcs *e, const CUDA_MEMCPY3D *p) {
  /* host memory: HOST, or UNIFIED naming a host pointer (cudaMemcpyDefault,
   * copies captured from cuMemcpyAsync: simpleCudaGraphs' clone) */
  const void *host = p->srcMemoryType == CU_MEMORYTYPE_HOST ? p->srcHost
                     : p->srcMemoryType == CU_MEMORYTYPE_UNIFIED && p->srcDevice &&
                             !cx_ptr_is_device(p->srcDevice)
                         ? (const void *)(uintptr_t)p->srcDevice
                         : NULL;
  if (!host || !p->WidthInBytes)
    return;
  cx_src s;
  s.w = p->WidthInBytes;
  s.h = p->Height ? p->Height : 1;
  s.d = p->Depth ? p->Depth : 1;
  s.pitch = p->srcPitch ? p->srcPitch : s.w;
  s.height = p->srcHeight ? p->srcHeight : s.h;
  s.addr = CX_U64(host) + p->srcXInBytes + p->srcY * s.pitch + p->srcZ * s.pitch * s.height;
  if (s.w * s.h * s.d > ((uint64_t)1 << 32))
    return; /* not a copy node's source worth storing at every launch */
  for (size_t i = 0; i < e->n; i++) /* the same source twice: once */
    if (e->v[i].addr == s.addr && e->v[i].w * e->v[i].h * e->v[i].d == s.w * s.h * s.d)
      return;
  cx_src *n = realloc(e->v, (e->n + 1) * sizeof *n);
  if (!n)
    return;
  e->v = n;
  e->v[e->n++] = s;
}

static void srcs_walk(cx_exec_srcs *e, CUgraph g, int depth) {
  size_t n = 0;
  if (depth > CX_GRAPH_MAX_DEPTH || !g || !cucap_real.cuGraphGetNodes ||
      cucap_real.cuGraphGetNodes(g, NULL, &n) != CUDA_SUCCESS || !n || n > (1u << 20))
    return;
  CUgraphNode *v = malloc(n * sizeof *v);
  if (!v || cucap_real.cuGraphGetNodes(g, v, &n) != CUDA_SUCCESS) {
    free(v);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    CUgraphNodeType t = (CUgraphNodeType)255;
    if (cucap_real.cuGraphNodeGetType)
      (void)cucap_real.cuGraphNodeGetType(v[i], &t);
    if (t == CU_GRAPH_NODE_TYPE_MEMCPY && cucap_real.cuGraphMemcpyNodeGetParams) {
      CUDA_MEMCPY3D p;
      memset(&p, 0, sizeof p);
      if (cucap_real.cuGraphMemcpyNodeGetParams(v[i], &p) == CUDA_SUCCESS)
        srcs_add(e, &p);
    } else if (t == CU_GRAPH_NODE_TYPE_GRAPH && cucap_real.cuGraphChildGraphNodeGetGraph) {
      CUgraph cg = NULL;
      if (cucap_real.cuGraphChildGraphNodeGetGraph(v[i], &cg) == CUDA_SUCCESS)
        srcs_walk(e, cg, depth + 1);
    } else if (t == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
      cx_cond_node c;
      uint32_t def, flags;
      if (cond_node_get(CX_U64(v[i]), CX_U64(g), &c, &def, &flags)) {
        for (uint32_t k = 0; k < c.size; k++)
          srcs_walk(e, (CUgraph)(uintptr_t)c.bodies[k], depth + 1);
        free(c.bodies);
      }
    }
  }
  free(v);
}

void cx_graph_exec_sources(uint64_t exec, CUgraph g) {
  pthread_mutex_lock(&cx_cond_lock);
  cx_exec_srcs *e = srcs_of(exec, 1);
  pthread_mutex_unlock(&cx_cond_lock);
  if (!e)
    return;
  /* (cond_node_get takes the lock itself; the table entry is only touched
   * by this exec's own calls, which the program serialises) */
  free(e->v);
  e->v = NULL;
  e->n = 0;
  srcs_walk(e, g, 0);
}

void cx_graph_exec_forget(uint64_t exec) {
  pthread_mutex_lock(&cx_cond_lock);
  for (size_t i = 0; i < cx_nsrcs; i++)
    if (cx_srcs[i].exec == exec) {
      free(cx_srcs[i].v);
      cx_srcs[i] = cx_srcs[--cx_nsrcs];
      break;
    }
  pthread_mutex_unlock(&cx_cond_lock);
}

/* Copies the source rows packed into buf; 0 if the memory cannot be read
 * (process_vm_readv: a bad pointer is an error, never a fault in the app). */
static int src_read(const cx_src *s, uint8_t *buf) {
  for (uint64_t z = 0; z < s->d; z++)
    for (uint64_t y = 0; y < s->h; y++) {
      struct iovec local = {buf + (z * s->h + y) * s->w, s->w};
      struct iovec remote = {(void *)(uintptr_t)(s->addr + (z * s->height + y) * s->pitch), s->w};
      if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)s->w)
        return 0;
    }
  return 1;
}

cucap_fb_ref cx_graph_launch_payloads(cucap_fbb *b, uint64_t exec) {
  pthread_mutex_lock(&cx_cond_lock);
  cx_exec_srcs *e = srcs_of(exec, 0);
  size_t n = e ? e->n : 0;
  cx_src *v = n ? malloc(n * sizeof *v) : NULL;
  if (v)
    memcpy(v, e->v, n * sizeof *v);
  pthread_mutex_unlock(&cx_cond_lock);
  if (!v)
    return 0;
  cucap_fb_ref *refs = malloc(n * sizeof *refs);
  size_t nr = 0;
  for (size_t i = 0; refs && i < n; i++) {
    uint64_t size = v[i].w * v[i].h * v[i].d;
    uint8_t *buf = malloc(size ? size : 1);
    cucap_fb_hash128 h;
    if (buf && src_read(&v[i], buf) && cx_blob(buf, size, &h)) {
      cucap_fb_mem_region_start(b);
      cucap_fb_mem_region_add_address(b, v[i].addr);
      cucap_fb_mem_region_add_size(b, size);
      cucap_fb_mem_region_add_data(b, &h);
      refs[nr++] = cucap_fb_mem_region_end(b);
    }
    free(buf);
  }
  cucap_fb_ref out = nr ? cucap_fbb_vector_refs(b, refs, nr) : 0;
  free(refs);
  free(v);
  return out;
}

/* ---- records ---------------------------------------------------------------- */
static void graph_record(cucap_call *c, uint8_t op, uint64_t graph, uint64_t exec,
                         cucap_fb_ref nodes) {
  c->stack = cucap_rec_stack_id();
  cucap_fb_graph_start(c->b);
  cucap_fb_graph_add_op(c->b, op);
  if (graph)
    cucap_fb_graph_add_graph(c->b, graph);
  if (exec)
    cucap_fb_graph_add_exec(c->b, exec);
  if (nodes)
    cucap_fb_graph_add_nodes(c->b, nodes);
  c->body = cucap_fb_graph_end(c->b);
  c->body_type = CUCAP_FB_BODY_GRAPH;
}

void custom_graph_cond_handle(cucap_call *c, CUresult r, CUgraphConditionalHandle *ph, CUgraph g,
                              CUcontext ctx, unsigned int def, unsigned int flags) {
  (void)ctx;
  if (r != CUDA_SUCCESS || !ph)
    return;
  cond_handle_put(CX_U64(g), *ph, def, flags);
  c->stack = cucap_rec_stack_id();
  cucap_fb_graph_start(c->b);
  cucap_fb_graph_add_op(c->b, CUCAP_FB_GRAPHOP_CONDHANDLE);
  cucap_fb_graph_add_graph(c->b, CX_U64(g));
  cucap_fb_graph_add_flags(c->b, flags);
  cucap_fb_graph_add_cond_handle(c->b, *ph);
  cucap_fb_graph_add_cond_default(c->b, def);
  c->body = cucap_fb_graph_end(c->b);
  c->body_type = CUCAP_FB_BODY_GRAPH;
}

void custom_graph_add_node(cucap_call *c, CUresult r, CUgraphNode *pn, CUgraph g,
                           const CUgraphNode *deps, const CUgraphEdgeData *edges, size_t nd,
                           CUgraphNodeParams *p) {
  (void)deps, (void)edges, (void)nd;
  if (r != CUDA_SUCCESS || !pn || !p)
    return;
  if (p->type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
    cond_node_put(CX_U64(*pn), CX_U64(g), &p->conditional);
  /* the node as the walk sees it (informational: graphs are rebuilt from
   * the topology recorded at instantiate) */
  cx_relaxed rx; /* queries only, in RELAXED mode: other streams may capture */
  cx_relax_begin(&rx);
  cucap_fb_ref node = cx_graph_node(c->b, g, *pn, CX_GRAPH_MAX_DEPTH);
  cx_relax_end(&rx);
  graph_record(c, CUCAP_FB_GRAPHOP_ADDNODE, CX_U64(g), 0, cucap_fbb_vector_refs(c->b, &node, 1));
}

void custom_graph_add_node_v1(cucap_call *c, CUresult r, CUgraphNode *pn, CUgraph g,
                              const CUgraphNode *deps, size_t nd, CUgraphNodeParams *p) {
  custom_graph_add_node(c, r, pn, g, deps, NULL, nd, p);
}

static void exec_update(cucap_call *c, CUresult r, CUgraphExec x, CUgraph g) {
  if (r != CUDA_SUCCESS)
    return;
  cx_relaxed rx; /* queries only, in RELAXED mode: other streams may capture */
  cx_relax_begin(&rx);
  cucap_fb_ref nodes = cx_graph_nodes(c->b, g, 0);
  graph_record(c, CUCAP_FB_GRAPHOP_EXECUPDATE, CX_U64(g), CX_U64(x), nodes);
  cx_graph_exec_sources(CX_U64(x), g); /* the new graph's copy sources */
  cx_relax_end(&rx);
  /* the instance now runs g's copies to the host (custom_deferred.c) */
  cx_deferred_graph_forget(0, CX_U64(x));
  cx_deferred_graph_instantiate(c, CX_U64(g), CX_U64(x));
}

void custom_graph_exec_update(cucap_call *c, CUresult r, CUgraphExec x, CUgraph g,
                              CUgraphExecUpdateResultInfo *info) {
  (void)info;
  exec_update(c, r, x, g);
}

void custom_graph_exec_update_v1(cucap_call *c, CUresult r, CUgraphExec x, CUgraph g,
                                 CUgraphNode *err, CUgraphExecUpdateResult *res) {
  (void)err, (void)res;
  exec_update(c, r, x, g);
}

/* One GraphNode {handle, type, the new parameters} as an ExecSetParams record. */
typedef struct set_desc {
  uint8_t type;
  cucap_fb_ref launch, mcpy, mset, bodies;
  uint64_t child, event;
  uint8_t set_enabled;
} set_desc;

static void exec_set(cucap_call *c, CUresult r, CUgraphExec x, CUgraphNode node, const set_desc *d) {
  if (r != CUDA_SUCCESS)
    return;
  cucap_fbb *b = c->b;
  cucap_fb_graph_node_start(b);
  cucap_fb_graph_node_add_handle(b, CX_U64(node));
  cucap_fb_graph_node_add_type(b, d->type);
  if (d->launch)
    cucap_fb_graph_node_add_launch(b, d->launch);
  if (d->mcpy)
    cucap_fb_graph_node_add_memcpy(b, d->mcpy);
  if (d->mset)
    cucap_fb_graph_node_add_memset(b, d->mset);
  if (d->child)
    cucap_fb_graph_node_add_child_graph(b, d->child);
  if (d->event)
    cucap_fb_graph_node_add_event(b, d->event);
  if (d->bodies)
    cucap_fb_graph_node_add_bodies(b, d->bodies);
  if (d->set_enabled)
    cucap_fb_graph_node_add_set_enabled(b, d->set_enabled);
  cucap_fb_ref n = cucap_fb_graph_node_end(b);
  graph_record(c, CUCAP_FB_GRAPHOP_EXECSETPARAMS, 0, CX_U64(x), cucap_fbb_vector_refs(b, &n, 1));
}

void custom_graph_exec_kernel(cucap_call *c, CUresult r, CUgraphExec x, CUgraphNode node,
                              const CUDA_KERNEL_NODE_PARAMS *p) {
  if (r != CUDA_SUCCESS || !p)
    return;
  set_desc d = {.type = CUCAP_FB_GRAPHNODETYPE_KERNEL};
  d.launch = cx_kernel_params_body(c->b, p);
  exec_set(c, r, x, node, &d);
}

void custom_graph_exec_kernel_v1(cucap_call *c, CUresult r, CUgraphExec x, CUgraphNode node,
                                 const CUDA_KERNEL_NODE_PARAMS_v1 *p) {
  if (r != CUDA_SUCCESS || !p)
    return;
  CUDA_KERNEL_NODE_PARAMS k;
  memset(&k, 0, sizeof k);
  k.func = p->func;
  k.gridDimX = p->gridDimX, k.gridDimY = p->gridDimY, k.gridDimZ = p->gridDimZ;
  k.blockDimX = p->blockDimX, k.blockDimY = p->blockDimY, k.blockDimZ = p->blockDimZ;
  k.sharedMemBytes = p->sharedMemBytes;
  k.kernelParams = p->kernelParams;
  k.extra = p->extra;
  custom_graph_exec_kernel(c, r, x, node, &k);
}

void custom_graph_exec_memset(cucap_call *c, CUresult r, CUgraphExec x, CUgraphNode node,
                              const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx) {
  (void)ctx;
  if (r != CUDA_SUCCESS || !p)
    return;
  set_desc d = {.type = CUCAP_FB_GRAPHNODETYPE_MEMSET};
  d.mset = cx_memset_params_body(c->b, p);
  exec_set(c, r, x, node, &d);
}

void custom_graph_exec_memcpy(cucap_call *c, CUresult r, CUgraphExec x, CUgraphNode node,
                              const CUDA_MEMCPY3D *p, CUcontext ctx) {
  (void)ctx;
  if (r != CUDA_SUCCESS || !p)
    return;
  set_desc d = {.type = CUCAP_FB_GRAPHNODETYPE_MEMCPY};
  d.mcpy = cx_memcpy3d_node_body(c->b, p);
  pthread_mutex_lock(&cx_cond_lock);
  cx_exec_srcs *e = srcs_of(CX_U64(x), 1);
  if (e)
    srcs_add(e, p);
  pthread_mutex_unlock(&cx_cond_lock);
  exec_set(c, r, x, node, &d);
}

void custom_graph_exec_child(cucap_call *c, CUresult r, CUgraphExec x, CUgraphNode node,
                             CUgraph child) {
  if (r != CUDA_SUCCESS)
    return;
  set_desc d = {.type = CUCAP_FB_GRAPHNODETYPE_GRAPH, .child = CX_U64(child)};
  cx_relaxed rx;
  cx_relax_begin(&rx);
  cucap_fb_ref g = body_graph(c->b, CX_U64(child), 0);
  cx_relax_end(&rx);
  d.bodies = cucap_fbb_vector_refs(c->b, &g, 1);
  exec_set(c, r, x, node, &d);
}

void custom_graph_exec_event_record(cucap_call *c, CUresult r, CUgraphExec x, CUgraphNode node,
                                    CUevent e) {
  set_desc d = {.type = CUCAP_FB_GRAPHNODETYPE_EVENTRECORD, .event = CX_U64(e)};
  exec_set(c, r, x, node, &d);
}

void custom_graph_exec_event_wait(cucap_call *c, CUresult r, CUgraphExec x, CUgraphNode node,
                                  CUevent e) {
  set_desc d = {.type = CUCAP_FB_GRAPHNODETYPE_WAITEVENT, .event = CX_U64(e)};
  exec_set(c, r, x, node, &d);
}

void custom_graph_exec_enable(cucap_call *c, CUresult r, CUgraphExec x, CUgraphNode node,
                              unsigned int on) {
  /* the node's type as the driver reports it (for the replay's mapping) */
  CUgraphNodeType t = (CUgraphNodeType)255;
  cx_relaxed rx;
  cx_relax_begin(&rx);
  if (cucap_real.cuGraphNodeGetType)
    (void)cucap_real.cuGraphNodeGetType(node, &t);
  cx_relax_end(&rx);
  set_desc d = {.type = (unsigned)t <= 13 ? (uint8_t)t : CUCAP_FB_GRAPHNODETYPE_UNKNOWN,
                .set_enabled = on ? 1 : 2};
  exec_set(c, r, x, node, &d);
}

void custom_graph_exec_node(cucap_call *c, CUresult r, CUgraphExec x, CUgraphNode node,
                            CUgraphNodeParams *p) {
  if (r != CUDA_SUCCESS || !p)
    return;
  switch (p->type) {
  case CU_GRAPH_NODE_TYPE_KERNEL: {
    CUDA_KERNEL_NODE_PARAMS k;
    memset(&k, 0, sizeof k);
    k.func = p->kernel.func;
    k.kern = p->kernel.kern;
    k.gridDimX = p->kernel.gridDimX, k.gridDimY = p->kernel.gridDimY, k.gridDimZ = p->kernel.gridDimZ;
    k.blockDimX = p->kernel.blockDimX, k.blockDimY = p->kernel.blockDimY, k.blockDimZ = p->kernel.blockDimZ;
    k.sharedMemBytes = p->kernel.sharedMemBytes;
    k.kernelParams = p->kernel.kernelParams;
    k.extra = p->kernel.extra;
    custom_graph_exec_kernel(c, r, x, node, &k);
    return;
  }
  case CU_GRAPH_NODE_TYPE_MEMSET: {
    CUDA_MEMSET_NODE_PARAMS m;
    memset(&m, 0, sizeof m);
    m.dst = p->memset.dst, m.pitch = p->memset.pitch, m.value = p->memset.value;
    m.elementSize = p->memset.elementSize, m.width = p->memset.width, m.height = p->memset.height;
    custom_graph_exec_memset(c, r, x, node, &m, p->memset.ctx);
    return;
  }
  case CU_GRAPH_NODE_TYPE_MEMCPY:
    custom_graph_exec_memcpy(c, r, x, node, &p->memcpy.copyParams, p->memcpy.copyCtx);
    return;
  case CU_GRAPH_NODE_TYPE_GRAPH:
    custom_graph_exec_child(c, r, x, node, p->graph.graph);
    return;
  case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    custom_graph_exec_event_record(c, r, x, node, p->eventRecord.event);
    return;
  case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
    custom_graph_exec_event_wait(c, r, x, node, p->eventWait.event);
    return;
  default: { /* host nodes and others: the type only (the replay says what it skipped) */
    set_desc d = {.type = (unsigned)p->type <= 13 ? (uint8_t)p->type : CUCAP_FB_GRAPHNODETYPE_UNKNOWN};
    exec_set(c, r, x, node, &d);
    return;
  }
  }
}

void custom_graph_clone(cucap_call *c, CUresult r, CUgraph *pc, CUgraph orig) {
  if (r != CUDA_SUCCESS || !pc)
    return;
  /* conditional nodes of the clone: same parameters; their body graphs are
   * the clone's own, which no query returns, so they stay unknown (the walk
   * leaves such a node bare and the replay refuses to rebuild the graph) */
  (void)orig;
  graph_record(c, CUCAP_FB_GRAPHOP_CLONE, CX_U64(*pc), 0, 0);
}
