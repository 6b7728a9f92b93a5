/* custom_graph.c - stream capture and CUDA graph hooks.
 *
 * The graph's full topology is recorded where it becomes fixed: at
 * cuStreamEndCapture (Stream{EndCapture, graph} + a Graph{Create, nodes}
 * record) and at every cuGraphInstantiate* (Graph{Instantiate, nodes}).
 * Kernel nodes carry their argument block laid out like launches. Child
 * graphs are referenced by handle, not expanded. Memcpy nodes carry geometry
 * but no payload (host data is read at graph launch). The same walk serves
 * graphs built with the explicit API (cuGraphCreate + cuGraphAdd*Node): the
 * replayer rebuilds those from the Instantiate record (replay_graph.c). */
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cucap_format.h"
#include "custom_internal.h"

static cucap_fb_ref node_launch(cucap_fbb *b, CUgraphNode node) {
  CUDA_KERNEL_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  if (!cucap_real.cuGraphKernelNodeGetParams_v2 ||
      cucap_real.cuGraphKernelNodeGetParams_v2(node, &p) != CUDA_SUCCESS)
    return 0;
  return cx_kernel_params_body(b, &p);
}

cucap_fb_ref cx_kernel_params_body(cucap_fbb *b, const CUDA_KERNEL_NODE_PARAMS *pp) {
  const CUDA_KERNEL_NODE_PARAMS p = *pp;
  uint64_t fh = p.func ? CX_U64(p.func) : CX_U64(p.kern);
  const cucap_tracked_fn *f = cx_function_for_launch(fh);
  cx_args a;
  cx_launch_args(b, f, p.kernelParams, p.extra, &a);
  cucap_fb_dim3 grid = {p.gridDimX, p.gridDimY, p.gridDimZ};
  cucap_fb_dim3 block = {p.blockDimX, p.blockDimY, p.blockDimZ};
  cucap_fb_launch_start(b);
  cucap_fb_launch_add_kind(b, CUCAP_FB_LAUNCHKIND_KERNEL);
  cucap_fb_launch_add_function(b, fh);
  cucap_fb_launch_add_grid(b, &grid);
  cucap_fb_launch_add_block(b, &block);
  cucap_fb_launch_add_shared_mem(b, p.sharedMemBytes);
  if (a.vec)
    cucap_fb_launch_add_args(b, a.vec);
  if (a.has_blob) {
    cucap_fb_launch_add_args_blob(b, &a.blob);
    cucap_fb_launch_add_has_args_blob(b, 1);
  }
  if (a.from_extra)
    cucap_fb_launch_add_from_extra(b, 1);
  return cucap_fb_launch_end(b);
}

static cucap_fb_ref node_memset(cucap_fbb *b, CUgraphNode node) {
  CUDA_MEMSET_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  if (!cucap_real.cuGraphMemsetNodeGetParams ||
      cucap_real.cuGraphMemsetNodeGetParams(node, &p) != CUDA_SUCCESS)
    return 0;
  return cx_memset_params_body(b, &p);
}

cucap_fb_ref cx_memset_params_body(cucap_fbb *b, const CUDA_MEMSET_NODE_PARAMS *pp) {
  const CUDA_MEMSET_NODE_PARAMS p = *pp;
  cucap_fb_memset_start(b);
  cucap_fb_memset_add_dst(b, p.dst);
  cucap_fb_memset_add_value(b, p.value);
  cucap_fb_memset_add_elem_size(b, (uint8_t)p.elementSize);
  cucap_fb_memset_add_count(b, p.width);
  cucap_fb_memset_add_height(b, p.height);
  cucap_fb_memset_add_pitch(b, p.pitch);
  return cucap_fb_memset_end(b);
}

static cucap_fb_ref node_memcpy(cucap_fbb *b, CUgraphNode node) {
  CUDA_MEMCPY3D p;
  memset(&p, 0, sizeof p);
  if (!cucap_real.cuGraphMemcpyNodeGetParams ||
      cucap_real.cuGraphMemcpyNodeGetParams(node, &p) != CUDA_SUCCESS)
    return 0;
  return cx_memcpy3d_node_body(b, &p);
}

static cucap_fb_ref node_alloc(cucap_fbb *b, CUgraphNode node) {
  CUDA_MEM_ALLOC_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  if (!cucap_real.cuGraphMemAllocNodeGetParams ||
      cucap_real.cuGraphMemAllocNodeGetParams(node, &p) != CUDA_SUCCESS)
    return 0;
  cucap_fb_alloc_start(b);
  cucap_fb_alloc_add_kind(b, CUCAP_FB_ALLOCKIND_ASYNC);
  cucap_fb_alloc_add_address(b, p.dptr);
  cucap_fb_alloc_add_size(b, p.bytesize);
  cucap_fb_alloc_add_device(b, p.poolProps.location.id);
  return cucap_fb_alloc_end(b);
}

/* What a host node's code can reach (format 1.4 GraphNode.host_refs): its
 * userData, then the 8-byte words of the first 64 bytes userData points to
 * - the usual argument is a struct holding the pointers the callback
 * writes through (simpleCudaGraphs: {name, &result}). Read with
 * process_vm_readv: a pointer that is not readable memory is an error here,
 * never a fault in the program. 0 when the driver gives no parameters. */
static cucap_fb_ref node_host_refs(cucap_fbb *b, CUgraphNode node) {
  CUDA_HOST_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  if (!cucap_real.cuGraphHostNodeGetParams ||
      cucap_real.cuGraphHostNodeGetParams(node, &p) != CUDA_SUCCESS)
    return 0;
  uint64_t refs[9] = {CX_U64(p.userData)};
  size_t n = 1;
  if (p.userData) {
    uint64_t words[8];
    struct iovec local = {words, sizeof words}, remote = {p.userData, sizeof words};
    ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    for (ssize_t i = 0; got > 0 && i < got / 8; i++)
      refs[n++] = words[i];
  }
  return cucap_fb_graph_node_create_host_refs(b, refs, n);
}

/* A node's dependencies and the data of each edge. cuda.h (12.3+) maps
 * cuGraphNodeGetDependencies to _v2; asked without edge data, _v2 (and v1)
 * fail with CUDA_ERROR_LOSSY_QUERY as soon as one edge is not a default
 * one - a programmatic edge, which stream capture makes of kernels launched
 * with programmatic stream serialization (cuBLASLt and XLA on Hopper). Such
 * a node recorded from the lossy query would have no dependencies at all,
 * and its graph would be rebuilt with kernels racing each other. Should
 * the count query be refused as lossy too, the buffers grow until the list fits. Returns the number of
 * dependencies (*dv and *ev malloc'ed, the caller frees both; *ev is NULL
 * without _v2) or 0 with nothing allocated. */
static size_t node_deps(CUgraphNode node, CUgraphNode **dv, CUgraphEdgeData **ev) {
  *dv = NULL;
  *ev = NULL;
  size_t n = 0;
  if (cucap_real.cuGraphNodeGetDependencies_v2) {
    CUresult r = cucap_real.cuGraphNodeGetDependencies_v2(node, NULL, NULL, &n);
    size_t cap = r == CUDA_SUCCESS ? n : r == CUDA_ERROR_LOSSY_QUERY ? 16 : 0;
    while (cap && cap < (1u << 20)) {
      CUgraphNode *d = calloc(cap, sizeof *d);
      CUgraphEdgeData *e = calloc(cap, sizeof *e);
      size_t got = cap;
      if (!d || !e ||
          cucap_real.cuGraphNodeGetDependencies_v2(node, d, e, &got) != CUDA_SUCCESS) {
        free(d);
        free(e);
        return 0;
      }
      /* a full buffer may have been too small (the driver fills what fits) */
      if (got < cap || (r == CUDA_SUCCESS && got == n)) {
        *dv = d;
        *ev = e;
        return got;
      }
      free(d);
      free(e);
      cap *= 2;
    }
    return 0;
  }
  if (!cucap_real.cuGraphNodeGetDependencies ||
      cucap_real.cuGraphNodeGetDependencies(node, NULL, &n) != CUDA_SUCCESS || !n ||
      n >= (1u << 20) || !(*dv = malloc(n * sizeof **dv)))
    return 0;
  if (cucap_real.cuGraphNodeGetDependencies(node, *dv, &n) != CUDA_SUCCESS) {
    free(*dv);
    *dv = NULL;
    return 0;
  }
  return n;
}

/* The node's dependency vectors, built before its table; 0 where there is
 * none. */
static void node_dep_refs(cucap_fbb *b, CUgraphNode node, cucap_fb_ref *deps,
                          cucap_fb_ref *edges) {
  *deps = *edges = 0;
  /* dependencies, and the data of their edges when one is not default */
  CUgraphNode *dv = NULL;
  CUgraphEdgeData *ev = NULL;
  size_t nd = node_deps(node, &dv, &ev);
  uint64_t *du = nd ? malloc(nd * sizeof *du) : NULL;
  uint32_t *eu = nd && ev ? malloc(nd * sizeof *eu) : NULL;
  if (du) {
    int any = 0;
    for (size_t k = 0; k < nd; k++) {
      du[k] = CX_U64(dv[k]);
      if (eu) {
        eu[k] = cucap_edge_pack(ev[k].from_port, ev[k].to_port, ev[k].type);
        any |= eu[k] != 0;
      }
    }
    *deps = cucap_fb_graph_node_create_dependencies(b, du, nd);
    if (any)
      *edges = cucap_fb_graph_node_create_dependency_edges(b, eu, nd);
  }
  free(dv);
  free(ev);
  free(du);
  free(eu);
}

/* What a node of each type refers to (its body table, child graph or
 * event). */
typedef struct cx_node_parts {
  cucap_fb_ref launch, mcpy, mset, alloc, host_refs;
  uint64_t child, event;
} cx_node_parts;

static void node_parts(cucap_fbb *b, CUgraphNode node, CUgraphNodeType type,
                       cx_node_parts *pt) {
  memset(pt, 0, sizeof *pt);
  switch (type) {
  case CU_GRAPH_NODE_TYPE_KERNEL:
    pt->launch = node_launch(b, node);
    break;
  case CU_GRAPH_NODE_TYPE_MEMCPY:
    pt->mcpy = node_memcpy(b, node);
    break;
  case CU_GRAPH_NODE_TYPE_MEMSET:
    pt->mset = node_memset(b, node);
    break;
  case CU_GRAPH_NODE_TYPE_HOST:
    pt->host_refs = node_host_refs(b, node);
    break;
  case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
    pt->alloc = node_alloc(b, node);
    break;
  case CU_GRAPH_NODE_TYPE_GRAPH: {
    CUgraph cg = NULL;
    if (cucap_real.cuGraphChildGraphNodeGetGraph &&
        cucap_real.cuGraphChildGraphNodeGetGraph(node, &cg) == CUDA_SUCCESS)
      pt->child = CX_U64(cg);
    break;
  }
  case CU_GRAPH_NODE_TYPE_WAIT_EVENT: {
    CUevent e = NULL;
    if (cucap_real.cuGraphEventWaitNodeGetEvent &&
        cucap_real.cuGraphEventWaitNodeGetEvent(node, &e) == CUDA_SUCCESS)
      pt->event = CX_U64(e);
    break;
  }
  case CU_GRAPH_NODE_TYPE_EVENT_RECORD: {
    CUevent e = NULL;
    if (cucap_real.cuGraphEventRecordNodeGetEvent &&
        cucap_real.cuGraphEventRecordNodeGetEvent(node, &e) == CUDA_SUCCESS)
      pt->event = CX_U64(e);
    break;
  }
  default:
    break;
  }
}

cucap_fb_ref cx_graph_node(cucap_fbb *b, CUgraph g, CUgraphNode node, int depth) {
  CUgraphNodeType type = (CUgraphNodeType)255;
  if (cucap_real.cuGraphNodeGetType)
    (void)cucap_real.cuGraphNodeGetType(node, &type);
  cucap_fb_ref deps, edges;
  node_dep_refs(b, node, &deps, &edges);
  cx_node_parts pt;
  node_parts(b, node, type, &pt);
  /* conditional parameters, body and child graphs, freed addresses
   * (custom_graph_nodes.c) */
  cx_node_ext ext;
  cx_graph_node_ext(b, g, node, type, pt.child, depth, &ext);
  if (ext.alloc)
    pt.alloc = ext.alloc;
  cucap_fb_graph_node_start(b);
  cucap_fb_graph_node_add_handle(b, CX_U64(node));
  cucap_fb_graph_node_add_type(b, (unsigned)type <= 13 ? (uint8_t)type
                                                       : CUCAP_FB_GRAPHNODETYPE_UNKNOWN);
  if (deps)
    cucap_fb_graph_node_add_dependencies(b, deps);
  if (edges)
    cucap_fb_graph_node_add_dependency_edges(b, edges);
  if (pt.launch)
    cucap_fb_graph_node_add_launch(b, pt.launch);
  if (pt.mcpy)
    cucap_fb_graph_node_add_memcpy(b, pt.mcpy);
  if (pt.mset)
    cucap_fb_graph_node_add_memset(b, pt.mset);
  if (pt.child)
    cucap_fb_graph_node_add_child_graph(b, pt.child);
  if (pt.event)
    cucap_fb_graph_node_add_event(b, pt.event);
  if (pt.alloc)
    cucap_fb_graph_node_add_alloc(b, pt.alloc);
  if (pt.host_refs)
    cucap_fb_graph_node_add_host_refs(b, pt.host_refs);
  cx_graph_node_ext_add(b, &ext);
  return cucap_fb_graph_node_end(b);
}

/* Vector of GraphNode tables for graph g, built with b (0 on failure). */
cucap_fb_ref cx_graph_nodes(cucap_fbb *b, CUgraph g, int depth) {
  size_t n = 0;
  if (!g || !cucap_real.cuGraphGetNodes ||
      cucap_real.cuGraphGetNodes(g, NULL, &n) != CUDA_SUCCESS || n == 0 || n > (1u << 20))
    return 0;
  CUgraphNode *nodes = malloc(n * sizeof *nodes);
  cucap_fb_ref *refs = malloc(n * sizeof *refs);
  cucap_fb_ref out = 0;
  if (!nodes || !refs || cucap_real.cuGraphGetNodes(g, nodes, &n) != CUDA_SUCCESS)
    goto done;
  for (size_t i = 0; i < n; i++)
    refs[i] = cx_graph_node(b, g, nodes[i], depth);
  out = cucap_fbb_vector_refs(b, refs, n);
done:
  free(nodes);
  free(refs);
  return out;
}

typedef struct graph_desc {
  uint8_t op;
  uint64_t graph, exec, stream, flags;
  int walk;
} graph_desc;

static cucap_fb_ref graph_body(cucap_fbb *b, const graph_desc *d) {
  cucap_fb_ref nodes = 0, payloads = 0;
  if (d->walk) { /* queries only, in RELAXED mode: other streams may capture */
    cx_relaxed rx;
    cx_relax_begin(&rx);
    nodes = cx_graph_nodes(b, (CUgraph)(uintptr_t)d->graph, 0);
    if (d->op == CUCAP_FB_GRAPHOP_INSTANTIATE && d->exec)
      cx_graph_exec_sources(d->exec, (CUgraph)(uintptr_t)d->graph);
    cx_relax_end(&rx);
  }
  if (d->op == CUCAP_FB_GRAPHOP_LAUNCH) /* host bytes its copy nodes read */
    payloads = cx_graph_launch_payloads(b, d->exec);
  cucap_fb_graph_start(b);
  cucap_fb_graph_add_op(b, d->op);
  if (d->graph)
    cucap_fb_graph_add_graph(b, d->graph);
  if (d->exec)
    cucap_fb_graph_add_exec(b, d->exec);
  if (d->op == CUCAP_FB_GRAPHOP_LAUNCH || d->op == CUCAP_FB_GRAPHOP_UPLOAD || d->stream)
    cucap_fb_graph_add_stream(b, d->stream);
  if (d->flags)
    cucap_fb_graph_add_flags(b, d->flags);
  if (nodes)
    cucap_fb_graph_add_nodes(b, nodes);
  if (payloads)
    cucap_fb_graph_add_payloads(b, payloads);
  return cucap_fb_graph_end(b);
}

static void graph_emit(cucap_call *c, const graph_desc *d) {
  c->stack = cucap_rec_stack_id();
  c->body = graph_body(c->b, d);
  c->body_type = CUCAP_FB_BODY_GRAPH;
}

/* ---- stream capture ---- */

static void capture_emit(cucap_call *c, uint8_t op, CUstream s, int mode, uint64_t graph) {
  c->stack = cucap_rec_stack_id();
  cucap_fbb *b = c->b;
  cucap_fb_stream_start(b);
  cucap_fb_stream_add_op(b, op);
  cucap_fb_stream_add_handle(b, CX_U64(s));
  if (op == CUCAP_FB_STREAMOP_BEGINCAPTURE)
    cucap_fb_stream_add_capture_mode(b, mode);
  if (graph)
    cucap_fb_stream_add_graph(b, graph);
  c->body = cucap_fb_stream_end(b);
  c->body_type = CUCAP_FB_BODY_STREAM;
}

void custom_stream_begin_capture(cucap_call *c, CUresult r, CUstream s) {
  if (r == CUDA_SUCCESS)
    cx_capture_begin(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
  capture_emit(c, CUCAP_FB_STREAMOP_BEGINCAPTURE, s, CU_STREAM_CAPTURE_MODE_GLOBAL, 0);
}

void custom_stream_begin_capture_v2(cucap_call *c, CUresult r, CUstream s,
                                    CUstreamCaptureMode mode) {
  if (r == CUDA_SUCCESS)
    cx_capture_begin(s, (int)mode);
  capture_emit(c, CUCAP_FB_STREAMOP_BEGINCAPTURE, s, (int)mode, 0);
}

void custom_stream_end_capture(cucap_call *c, CUresult r, CUstream s, CUgraph *pg) {
  uint64_t g = r == CUDA_SUCCESS && pg ? CX_U64(*pg) : 0;
  if (g) {
    /* the captured topology as its own record, before the call's record */
    cucap_fbb *b = cucap_rec_builder();
    if (b) {
      cucap_fbb_reset(b);
      graph_desc d = {CUCAP_FB_GRAPHOP_CREATE, g, 0, 0, 0, 1};
      cucap_fb_ref body = graph_body(b, &d);
      (void)cucap_rec_emit(b, CUCAP_FB_BODY_GRAPH, body, 0);
    }
  }
  capture_emit(c, CUCAP_FB_STREAMOP_ENDCAPTURE, s, 0, g);
  /* ended (also when it failed: an invalidated capture ends here) */
  cx_capture_end(s, c->variant);
  cx_deferred_graph_end_capture(CX_U64(s), g);
}

/* ---- graphs ---- */

void custom_graph_create(cucap_call *c, CUresult r, CUgraph *pg, unsigned int flags) {
  graph_desc d = {CUCAP_FB_GRAPHOP_CREATE, r == CUDA_SUCCESS && pg ? CX_U64(*pg) : 0, 0, 0,
                  flags, 0};
  graph_emit(c, &d);
}

static void instantiated(cucap_call *c, CUresult r, CUgraphExec *pe, CUgraph g,
                         uint64_t flags) {
  graph_desc d = {CUCAP_FB_GRAPHOP_INSTANTIATE, CX_U64(g),
                  r == CUDA_SUCCESS && pe ? CX_U64(*pe) : 0, 0, flags, r == CUDA_SUCCESS};
  graph_emit(c, &d);
  if (d.exec)
    cx_deferred_graph_instantiate(c, d.graph, d.exec);
}

void custom_graph_instantiate(cucap_call *c, CUresult r, CUgraphExec *pe, CUgraph g,
                              CUgraphNode *err_node, char *log, size_t log_size) {
  (void)err_node, (void)log, (void)log_size;
  instantiated(c, r, pe, g, 0);
}

void custom_graph_instantiate_flags(cucap_call *c, CUresult r, CUgraphExec *pe, CUgraph g,
                                    unsigned long long flags) {
  instantiated(c, r, pe, g, flags);
}

void custom_graph_instantiate_params(cucap_call *c, CUresult r, CUgraphExec *pe, CUgraph g,
                                     CUDA_GRAPH_INSTANTIATE_PARAMS *p) {
  /* the upload stream goes in `stream` (replayed as cuGraphUpload) */
  graph_desc d = {CUCAP_FB_GRAPHOP_INSTANTIATE, CX_U64(g),
                  r == CUDA_SUCCESS && pe ? CX_U64(*pe) : 0,
                  p && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) ? CX_U64(p->hUploadStream) : 0,
                  p ? p->flags : 0, r == CUDA_SUCCESS};
  graph_emit(c, &d);
  if (d.exec) /* its copies to the host, like any instantiation's */
    cx_deferred_graph_instantiate(c, d.graph, d.exec);
}

/* A graph's managed-memory accesses are unknown (custom_managed.c); its
 * copies to the host may overwrite pending copy results (custom_deferred.c). */
void custom_graph_launch_pre(cucap_call *c, CUgraphExec e, CUstream s) {
  cx_deferred_graph_before_launch(c, CX_U64(e), s);
  if (cx_managed_any())
    cx_managed_before_unknown(s, c->variant);
}

void custom_graph_launch(cucap_call *c, CUresult r, CUgraphExec e, CUstream s) {
  graph_desc d = {CUCAP_FB_GRAPHOP_LAUNCH, 0, CX_U64(e), CX_U64(s), 0, 0};
  graph_emit(c, &d);
  /* host results of DtoH copies captured into the graph (custom_deferred.c) */
  if (r == CUDA_SUCCESS)
    cx_deferred_graph_launch(c, CX_U64(e), s);
}

void custom_graph_upload(cucap_call *c, CUresult r, CUgraphExec e, CUstream s) {
  (void)r;
  graph_desc d = {CUCAP_FB_GRAPHOP_UPLOAD, 0, CX_U64(e), CX_U64(s), 0, 0};
  graph_emit(c, &d);
}

void custom_graph_exec_destroy(cucap_call *c, CUresult r, CUgraphExec e) {
  if (r == CUDA_SUCCESS) {
    cx_graph_exec_forget(CX_U64(e));
    cx_deferred_graph_forget(0, CX_U64(e));
  }
  graph_desc d = {CUCAP_FB_GRAPHOP_EXECDESTROY, 0, CX_U64(e), 0, 0, 0};
  graph_emit(c, &d);
}

void custom_graph_destroy(cucap_call *c, CUresult r, CUgraph g) {
  if (r == CUDA_SUCCESS) {
    cx_graph_forget(CX_U64(g)); /* its conditional nodes' bookkeeping */
    cx_deferred_graph_forget(CX_U64(g), 0);
  }
  graph_desc d = {CUCAP_FB_GRAPHOP_DESTROY, CX_U64(g), 0, 0, 0, 0};
  graph_emit(c, &d);
}

/* the _ptsz exports name their parameter differently (hGraphExec), which the
 * generator treats as a different parameter list */
void custom_graph_launch_ptsz(cucap_call *c, CUresult r, CUgraphExec e, CUstream s) {
  custom_graph_launch(c, r, e, s);
}
void custom_graph_launch_ptsz_pre(cucap_call *c, CUgraphExec e, CUstream s) {
  custom_graph_launch_pre(c, e, s);
}
void custom_graph_upload_ptsz(cucap_call *c, CUresult r, CUgraphExec e, CUstream s) {
  custom_graph_upload(c, r, e, s);
}
