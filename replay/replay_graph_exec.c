/* replay_graph_exec.c - instantiating recorded graphs and replaying what the
 * program did to an instantiated graph.
 *
 * At Instantiate the live graph is the re-captured one when its recorded
 * topology is unchanged since the capture (signature of the EndCapture
 * topology = that of the Instantiate topology), else the graph is rebuilt
 * from the Instantiate record (replay_graph.c) and kept until the exec is
 * destroyed: later updates name its nodes. Each exec keeps recorded node ->
 * live node and recorded conditional handle -> live handle.
 *  - ExecSetParams (cuGraphExec{Kernel,Memset,Memcpy,ChildGraph}NodeSetParams,
 *    cuGraphExecNodeSetParams, cuGraphExecEvent*NodeSetEvent,
 *    cuGraphNodeSetEnabled): the same call on the live node, parameters
 *    rebuilt like a rebuild's (relocation, handles);
 *  - ExecUpdate: the recorded new graph is rebuilt and cuGraphExecUpdate
 *    applied; its nodes then map to the exec's by position (the driver pairs
 *    them the same way). If the driver refuses the update here, the exec is
 *    instantiated again from the new graph (same effect on later launches);
 *  - Upload (and cuGraphInstantiateWithParams' upload flag): cuGraphUpload. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_log.h"
#include "cucap_vec.h"
#include "replay_graph.h"

static rp_gx *gx_find(rp_state *R, uint64_t rec_exec) {
  uint64_t i = 0;
  rp_graphs *gs = R->gs;
  if (!gs || !cucap_map_get(&gs->gx_of, rec_exec, &i) || !i)
    return NULL;
  return &gs->gx[i - 1];
}

static void gx_clear(rp_state *R, rp_gx *x) {
  if (x->own_graph && x->graph && R->d.df.GraphDestroy)
    R->d.df.GraphDestroy(x->graph);
  cucap_map_free(&x->nodes);
  cucap_map_free(&x->handles);
  free(x->hb); /* the buffers themselves are in R->cx.keep */
  free(x->hd);
  memset(x, 0, sizeof *x);
}

/* A fresh (or reused) entry for rec_exec; NULL on OOM. */
static rp_gx *gx_new(rp_state *R, uint64_t rec_exec) {
  rp_graphs *gs = rp_graphs_get(R);
  if (!gs)
    return NULL;
  rp_gx *x = gx_find(R, rec_exec);
  if (x) {
    gx_clear(R, x);
    x->rec_exec = rec_exec;
    return x;
  }
  size_t i = 0;
  while (i < gs->ngx && gs->gx[i].rec_exec) /* a free slot */
    i++;
  if (i == gs->ngx) {
    if (!CUCAP_VEC_RESERVE(gs->gx, gs->capgx, gs->ngx + 1, 8))
      return NULL;
    gs->ngx++;
  }
  x = &gs->gx[i];
  memset(x, 0, sizeof *x);
  x->rec_exec = rec_exec;
  if (!cucap_map_put(&gs->gx_of, rec_exec, i + 1))
    return NULL;
  return x;
}

const void *rp_graph_host_dst(rp_state *R, uint64_t rec_exec, uint64_t dst, uint64_t size) {
  rp_gx *x = gx_find(R, rec_exec);
  for (size_t i = 0; x && i < x->nhd; i++)
    if (x->hd[i].dst == dst && x->hd[i].size == size)
      return x->hd[i].buf;
  return NULL;
}

void rp_graph_exec_destroyed(rp_state *R, uint64_t rec_exec) {
  rp_gx *x = gx_find(R, rec_exec);
  if (!x)
    return;
  gx_clear(R, x);
  cucap_map_del(&R->gs->gx_of, rec_exec, NULL);
}

void rp_graphs_reset(rp_state *R, int all) {
  rp_graphs *gs = R->gs;
  if (!gs)
    return;
  for (size_t i = 0; i < gs->ngx; i++)
    gx_clear(R, &gs->gx[i]);
  gs->ngx = 0;
  cucap_map_free(&gs->gx_of);
  cucap_map_free(&gs->sig);
  cucap_map_free(&gs->dry);
  cucap_map_free(&gs->dry_events);
  cucap_map_free(&gs->capturing);
  gs->nstash = 0;
  if (!all)
    return;
  free(gs->gx);
  free(gs->stash);
  cucap_map_free(&gs->dry_begin);
  cucap_map_free(&gs->scan_open);
  cucap_map_free(&gs->scan_added);
  cucap_map_free(&gs->scan_rebuild);
  cucap_map_free(&gs->exec_payloads);
  free(gs);
  R->gs = NULL;
}

/* Recorded node -> live node for a graph that was not rebuilt here (a
 * re-captured one): the recorded topology lists the nodes in the order the
 * driver returned them, and a faithful re-capture creates them in the same
 * order; types must agree, else nothing is mapped. */
static void gx_pair(rp_state *R, rp_gx *x, const cucap_fb_graph *g) {
  const rg_fns *f = rp_graph_fns(R);
  size_t nn = cucap_fb_graph_nodes_len(g), n = 0;
  if (!f || !f->GetNodes || !nn || f->GetNodes(x->graph, NULL, &n) != CUDA_SUCCESS || n != nn)
    return;
  CUgraphNode *v = malloc(n * sizeof *v);
  if (!v || f->GetNodes(x->graph, v, &n) != CUDA_SUCCESS || n != nn) {
    free(v);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    CUgraphNodeType t = (CUgraphNodeType)255;
    if (f->NodeGetType)
      f->NodeGetType(v[i], &t);
    if ((unsigned)t != cucap_fb_graph_node_type(cucap_fb_graph_nodes_at(g, i))) {
      cucap_map_free(&x->nodes);
      break;
    }
    cucap_map_put(&x->nodes, cucap_fb_graph_node_handle(cucap_fb_graph_nodes_at(g, i)),
               (uint64_t)(uintptr_t)v[i]);
  }
  free(v);
}

static void gx_upload(rp_state *R, const cucap_fb_record *rec, CUgraphExec ex, uint64_t rec_stream) {
  const rg_fns *f = rp_graph_fns(R);
  int pt = cucap_fb_record_variant(rec) != CUCAP_FB_CALLVARIANT_DEFAULT;
  CUstream st = rp_stream(R, rec_stream);
  if (!f || !(pt ? f->UploadPt : f->Upload)) {
    R->rep->ignored++; /* an optimisation only */
    return;
  }
  rp_cu(R, pt ? f->UploadPt(ex, st) : f->Upload(ex, st), "cuGraphUpload");
}

static void gx_instantiate(rp_state *R, const cucap_fb_record *rec, const cucap_fb_graph *g) {
  uint64_t live = 0, sig = 0;
  uint64_t rg = cucap_fb_graph_graph(g);
  /* a successful cuGraphInstantiate never returns a NULL exec, and a slot
   * of the exec table with recorded exec 0 reads as free (gx_new): a
   * rebuilt graph kept there would never be destroyed */
  if (!cucap_fb_graph_exec(g)) {
    rp_skip(R, "cuGraphInstantiate (recorded exec handle 0)");
    return;
  }
  if (!R->d.df.GraphInstantiateWithFlags) {
    rp_skip(R, "cuGraphInstantiate (driver lacks it)");
    return;
  }
  rp_gx *x = gx_new(R, cucap_fb_graph_exec(g));
  if (!x) {
    rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
    return;
  }
  /* the re-captured graph, unless the program changed it since (its
   * topology at instantiation differs from the captured one) */
  int use_live = cucap_map_get(&R->cx.graph, rg, &live) && live;
  if (use_live && cucap_fb_graph_nodes_len(g) && R->gs &&
      cucap_map_get(&R->gs->sig, rg, &sig) && sig != rp_graph_signature(g)) {
    CUCAP_DEBUG("replay: graph 0x%" PRIx64 " changed after its capture; rebuilt from its "
                "topology at instantiation", rg);
    use_live = 0;
  }
  if (use_live) {
    x->graph = (CUgraph)(uintptr_t)live;
    gx_pair(R, x, g);
  } else {
    CUgraph rebuilt = NULL;
    R->gs->building = x;
    const char *why = rp_graph_rebuild(R, g, &rebuilt, &x->nodes, &x->handles);
    R->gs->building = NULL;
    if (!rebuilt) {
      rp_graph_exec_destroyed(R, cucap_fb_graph_exec(g));
      if (why)
        rp_skip(R, why);
      return;
    }
    x->graph = rebuilt;
    x->own_graph = 1;
  }
  /* UPLOAD (cuGraphInstantiateWithParams) needs its stream: done below */
  unsigned long long fl = cucap_fb_graph_flags(g);
  CUgraphExec ex = NULL;
  if (!rp_cu(R, R->d.df.GraphInstantiateWithFlags(
                    &ex, x->graph, fl & ~(unsigned long long)CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD),
             "cuGraphInstantiate")) {
    rp_graph_exec_destroyed(R, cucap_fb_graph_exec(g));
    return;
  }
  if (rp_live_put(R, &R->cx.gexec, cucap_fb_graph_exec(g), (uint64_t)(uintptr_t)ex) != CUCAP_OK)
    return;
  rp_owned(R, (uint64_t)(uintptr_t)ex);
  if (fl & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)
    gx_upload(R, rec, ex, cucap_fb_graph_stream(g));
  R->rep->executed++;
}

static void gx_update(rp_state *R, const cucap_fb_graph *g) {
  uint64_t live = 0;
  rp_gx *x = gx_find(R, cucap_fb_graph_exec(g));
  const rg_fns *f = rp_graph_fns(R);
  if (!x || !cucap_map_get(&R->cx.gexec, cucap_fb_graph_exec(g), &live)) {
    rp_skip(R, "cuGraphExecUpdate (graph not replayed)");
    return;
  }
  cucap_map nodes = {0}, handles = {0};
  CUgraph ng = NULL;
  R->gs->building = x; /* the new graph's host sources are the exec's */
  const char *why = rp_graph_rebuild(R, g, &ng, &nodes, &handles);
  R->gs->building = NULL;
  if (!ng) {
    cucap_map_free(&nodes);
    cucap_map_free(&handles);
    if (why)
      rp_skip(R, why);
    return;
  }
  CUgraphExecUpdateResultInfo info;
  memset(&info, 0, sizeof info);
  CUresult r = f && f->ExecUpdate ? f->ExecUpdate((CUgraphExec)(uintptr_t)live, ng, &info)
                                  : CUDA_ERROR_NOT_SUPPORTED;
  if (r == CUDA_SUCCESS) {
    /* the driver pairs the nodes of both graphs in order: the new graph's
     * recorded nodes now name the exec's */
    size_t nn = cucap_fb_graph_nodes_len(g), n = 0;
    CUgraphNode *v = NULL;
    if (f->GetNodes && f->GetNodes(x->graph, NULL, &n) == CUDA_SUCCESS && n == nn &&
        (v = malloc((n ? n : 1) * sizeof *v)) && f->GetNodes(x->graph, v, &n) == CUDA_SUCCESS)
      for (size_t i = 0; i < n && i < nn; i++)
        cucap_map_put(&x->nodes, cucap_fb_graph_node_handle(cucap_fb_graph_nodes_at(g, i)),
                   (uint64_t)(uintptr_t)v[i]);
    free(v);
    size_t hpos = 0; /* the new graph's handles, as kernels see them (1 included) */
    uint64_t hk = 0, hv = 0;
    while (cucap_map_next(&handles, &hpos, &hk, &hv))
      cucap_map_put(&x->handles, hk, hv);
    if (R->d.df.GraphDestroy)
      R->d.df.GraphDestroy(ng);
    cucap_map_free(&nodes);
    cucap_map_free(&handles);
    R->rep->executed++;
    return;
  }
  /* refused here (it was accepted when recorded): a new exec from the new
   * graph has the same effect on later launches */
  CUCAP_INFO("replay: cuGraphExecUpdate refused here (%s, result %d); the exec is "
             "instantiated again from the new graph", rp_cu_err(&R->d, r), (int)info.result);
  CUgraphExec ex = NULL;
  if (!rp_cu(R, R->d.df.GraphInstantiateWithFlags(&ex, ng, 0), "cuGraphInstantiate (update)")) {
    if (R->d.df.GraphDestroy)
      R->d.df.GraphDestroy(ng);
    cucap_map_free(&nodes);
    cucap_map_free(&handles);
    return;
  }
  R->d.df.GraphExecDestroy((CUgraphExec)(uintptr_t)live);
  cucap_map_put(&R->cx.gexec, cucap_fb_graph_exec(g), (uint64_t)(uintptr_t)ex);
  rp_owned(R, (uint64_t)(uintptr_t)ex);
  if (x->own_graph && x->graph && R->d.df.GraphDestroy)
    R->d.df.GraphDestroy(x->graph);
  cucap_map_free(&x->nodes);
  cucap_map_free(&x->handles);
  x->graph = ng;
  x->own_graph = 1;
  x->nodes = nodes;
  x->handles = handles;
  R->rep->executed++;
}

/* gx_set_params, a child graph node: its body rebuilt and given to the
 * exec. 0 when skipped. */
static int gx_set_child(rp_state *R, const rg_fns *f, rp_gx *x,
                        const cucap_fb_graph_node *n, CUgraphExec ex,
                        CUgraphNode ln, CUresult *r, const char **what) {
  if (cucap_fb_graph_node_bodies_len(n) != 1 || !f->ExecChild) {
    rp_skip(R, "cuGraphExecChildGraphNodeSetParams (child graph not recorded)");
    return 0;
  }
  CUgraph child = NULL;
  const char *why = rp_graph_rebuild(R, cucap_fb_graph_node_bodies_at(n, 0), &child, NULL,
                                     &x->handles);
  if (!child) {
    if (why)
      rp_skip(R, why);
    return 0;
  }
  *what = "cuGraphExecChildGraphNodeSetParams";
  *r = f->ExecChild(ex, ln, child);
  if (R->d.df.GraphDestroy)
    R->d.df.GraphDestroy(child);
  return 1;
}

/* gx_set, a node's new parameters by its type, given to the exec. */
static void gx_set_params(rp_state *R, const rg_fns *f, rp_gx *x,
                          const cucap_fb_graph_node *n, CUgraphExec ex,
                          CUgraphNode ln) {
  CUcontext ctx = R->cx.cur;
  CUresult r = CUDA_SUCCESS;
  const char *what = "graph exec parameter update";
  switch (cucap_fb_graph_node_type(n)) {
  case CUCAP_FB_GRAPHNODETYPE_KERNEL: {
    rg_kparams k;
    const char *why = rg_kparams_make(R, cucap_fb_graph_node_launch(n), &x->handles, &k);
    if (why || R->failed) {
      if (why)
        rp_skip(R, why);
      return;
    }
    what = "cuGraphExecKernelNodeSetParams";
    r = f->ExecKernel ? f->ExecKernel(ex, ln, &k.p) : CUDA_ERROR_NOT_SUPPORTED;
    rg_kparams_free(&k);
    break;
  }
  case CUCAP_FB_GRAPHNODETYPE_MEMSET: {
    const cucap_fb_memset *m = cucap_fb_graph_node_memset(n);
    if (!m) {
      rp_skip(R, "cuGraphExecMemsetNodeSetParams without parameters");
      return;
    }
    CUDA_MEMSET_NODE_PARAMS p;
    rg_memset_params(R, m, &p);
    what = "cuGraphExecMemsetNodeSetParams";
    r = f->ExecMemset ? f->ExecMemset(ex, ln, &p, ctx) : CUDA_ERROR_NOT_SUPPORTED;
    break;
  }
  case CUCAP_FB_GRAPHNODETYPE_MEMCPY: {
    CUDA_MEMCPY3D p;
    const cucap_fb_memcpy *c = cucap_fb_graph_node_memcpy(n);
    R->gs->building = x;
    const char *why = c ? rg_memcpy_params(R, c, &p) : "cuGraphExecMemcpyNodeSetParams without parameters";
    R->gs->building = NULL;
    if (why) {
      rp_skip(R, why);
      return;
    }
    what = "cuGraphExecMemcpyNodeSetParams";
    r = f->ExecMemcpy ? f->ExecMemcpy(ex, ln, &p, ctx) : CUDA_ERROR_NOT_SUPPORTED;
    break;
  }
  case CUCAP_FB_GRAPHNODETYPE_GRAPH:
    if (!gx_set_child(R, f, x, n, ex, ln, &r, &what))
      return;
    break;
  case CUCAP_FB_GRAPHNODETYPE_EVENTRECORD:
  case CUCAP_FB_GRAPHNODETYPE_WAITEVENT: {
    int rec = cucap_fb_graph_node_type(n) == CUCAP_FB_GRAPHNODETYPE_EVENTRECORD;
    uint64_t ev = 0;
    if (!cucap_map_get(&R->cx.event, cucap_fb_graph_node_event(n), &ev) ||
        !(rec ? f->ExecEventRecord : f->ExecEventWait)) {
      rp_skip(R, "graph exec event update (event not replayed)");
      return;
    }
    what = rec ? "cuGraphExecEventRecordNodeSetEvent" : "cuGraphExecEventWaitNodeSetEvent";
    r = rec ? f->ExecEventRecord(ex, ln, (CUevent)(uintptr_t)ev)
            : f->ExecEventWait(ex, ln, (CUevent)(uintptr_t)ev);
    break;
  }
  case CUCAP_FB_GRAPHNODETYPE_HOST:
    R->rep->ignored++; /* host nodes run as empty nodes in a replay */
    return;
  default:
    rp_skip(R, "graph exec parameter update of this node type");
    return;
  }
  if (rp_cu(R, r, what))
    R->rep->executed++;
}

static void gx_set(rp_state *R, const cucap_fb_graph *g) {
  uint64_t live = 0, node = 0;
  rp_gx *x = gx_find(R, cucap_fb_graph_exec(g));
  const rg_fns *f = rp_graph_fns(R);
  const cucap_fb_graph_node *n = cucap_fb_graph_nodes_at(g, 0);
  if (!x || !f || !n || !cucap_map_get(&R->cx.gexec, cucap_fb_graph_exec(g), &live)) {
    rp_skip(R, "graph exec parameter update (graph not replayed)");
    return;
  }
  if (!cucap_map_get(&x->nodes, cucap_fb_graph_node_handle(n), &node)) {
    rp_skip(R, "graph exec parameter update of a node not replayed");
    return;
  }
  CUgraphExec ex = (CUgraphExec)(uintptr_t)live;
  CUgraphNode ln = (CUgraphNode)(uintptr_t)node;
  unsigned en = cucap_fb_graph_node_set_enabled(n);
  if (en) {
    if (!f->NodeSetEnabled) {
      rp_skip(R, "cuGraphNodeSetEnabled (driver lacks it)");
      return;
    }
    if (rp_cu(R, f->NodeSetEnabled(ex, ln, en == 1), "cuGraphNodeSetEnabled"))
      R->rep->executed++;
    return;
  }
  gx_set_params(R, f, x, n, ex, ln);
}

void rp_graph_launch_payloads(rp_state *R, const cucap_fb_graph *g) {
  size_t np = cucap_fb_graph_payloads_len(g);
  rp_gx *x = np ? gx_find(R, cucap_fb_graph_exec(g)) : NULL;
  int synced = 0;
  for (size_t i = 0; x && i < np; i++) {
    const cucap_fb_mem_region *m = cucap_fb_graph_payloads_at(g, i);
    cucap_hash128 h = rp_h(cucap_fb_mem_region_data(m));
    uint64_t a = cucap_fb_mem_region_address(m), size = cucap_fb_mem_region_size(m);
    for (size_t k = 0; k < x->nhb; k++) {
      rp_hostbuf *b = &x->hb[k];
      if (b->src != a || b->size != size)
        continue;
      if (b->filled && b->last.lo == h.lo && b->last.hi == h.hi)
        continue; /* the same bytes as last time: nothing to wait for */
      if (b->filled && !synced++) /* an earlier launch may still read it */
        rp_cu(R, R->d.df.CtxSynchronize(), "cuCtxSynchronize (graph host source)");
      if (cucap_reader_blob_read(R->r, h, b->buf, size) != CUCAP_OK) {
        rp_skip(R, "graph launch host payload missing");
        continue;
      }
      if (b->dst)
        rp_patch_payload(R, b->buf, size, b->dst, NULL);
      b->last = h;
      b->filled = 1;
    }
  }
}

void rp_graph_op(rp_state *R, const cucap_fb_record *rec, const cucap_fb_graph *g) {
  if (cucap_fb_record_seq(rec) == 0) {
    /* the topology noted at cuStreamEndCapture: kept as a signature to see
     * later whether the program changed the graph before instantiating */
    rp_graphs *gs = rp_graphs_get(R);
    if (gs && cucap_fb_graph_graph(g))
      cucap_map_put(&gs->sig, cucap_fb_graph_graph(g), rp_graph_signature(g));
    R->rep->ignored++;
    return;
  }
  uint64_t live = 0;
  switch (cucap_fb_graph_op(g)) {
  case CUCAP_FB_GRAPHOP_INSTANTIATE:
    gx_instantiate(R, rec, g);
    return;
  case CUCAP_FB_GRAPHOP_UPLOAD:
    if (!cucap_map_get(&R->cx.gexec, cucap_fb_graph_exec(g), &live)) {
      R->rep->ignored++;
      return;
    }
    gx_upload(R, rec, (CUgraphExec)(uintptr_t)live, cucap_fb_graph_stream(g));
    R->rep->executed++;
    return;
  case CUCAP_FB_GRAPHOP_EXECUPDATE:
    gx_update(R, g);
    return;
  case CUCAP_FB_GRAPHOP_EXECSETPARAMS:
    gx_set(R, g);
    return;
  default: /* create, add node, clone, conditional handles: the topology
              recorded at instantiation carries their effect */
    R->rep->ignored++;
    return;
  }
}
