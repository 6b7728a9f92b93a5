/* replay_graph.c - rebuilds CUDA graphs from their recorded topology.
 *
 * The recorder writes a graph's topology where it becomes fixed
 * (interpose/custom_graph.c, custom_graph_nodes.c). This file re-adds the
 * nodes in dependency order:
 *  - kernel: mapped function, recorded argument block, relocated pointers,
 *    conditional handles mapped to the ones created here;
 *  - memcpy: device sides translated; a host side (HOST, or UNIFIED naming
 *    host memory) is a page-locked buffer of the replayer: a source takes the
 *    payload a dry capture kept (replay_capture.c) or the bytes recorded with
 *    each launch, a destination is noted with the exec for verify;
 *  - memset, empty: as recorded;
 *  - conditional (IF/WHILE/SWITCH): the handle is created on the rebuilt
 *    graph with its recorded default and flags, the node added with
 *    cuGraphAddNode, each body graph filled the same way;
 *  - child graph: rebuilt into a temporary graph the node copies;
 *  - event record / wait: on the replayed event;
 *  - memory alloc / free: where the recorded range is placed at its address
 *    (replay_memory.c backs it), an empty node stands in and kernels use the
 *    recorded address; otherwise a real alloc node, whose new address
 *    relocates every later use of the recorded one;
 *  - host: an empty node in its place (its host side is the program's),
 *    reported as skipped with a substitute.
 * Anything else (external semaphores, batch memory ops, arrays, conditional
 * nodes without their bodies) makes the graph skipped, by name. */
#include "replay_graph.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_format.h"
#include "cucap_getproc.h"
#include "cucap_log.h"

rp_graphs *rp_graphs_get(rp_state *R) {
  if (!R->gs)
    R->gs = calloc(1, sizeof *R->gs);
  return R->gs;
}

const rg_fns *rp_graph_fns(rp_state *R) {
  rp_graphs *gs = rp_graphs_get(R);
  if (!gs)
    return NULL;
  if (gs->loaded)
    return gs->loaded > 0 ? &gs->f : NULL;
  rg_fns *f = &gs->f;
  void *lib = R->d.lib;
#define RG(field, type, name, ver, exported) field = (type)cucap_getproc(lib, name, ver, exported, 0)
  RG(f->Create, PFN_cuGraphCreate_v10000, "cuGraphCreate", 10000, "cuGraphCreate");
  RG(f->AddKernel, PFN_cuGraphAddKernelNode_v12000, "cuGraphAddKernelNode", 12000, "cuGraphAddKernelNode_v2");
  RG(f->AddMemcpy, PFN_cuGraphAddMemcpyNode_v10000, "cuGraphAddMemcpyNode", 10000, "cuGraphAddMemcpyNode");
  RG(f->AddMemset, PFN_cuGraphAddMemsetNode_v10000, "cuGraphAddMemsetNode", 10000, "cuGraphAddMemsetNode");
  RG(f->AddEmpty, PFN_cuGraphAddEmptyNode_v10000, "cuGraphAddEmptyNode", 10000, "cuGraphAddEmptyNode");
  RG(f->AddChild, PFN_cuGraphAddChildGraphNode_v10000, "cuGraphAddChildGraphNode", 10000,
     "cuGraphAddChildGraphNode");
  RG(f->AddEventRecord, PFN_cuGraphAddEventRecordNode_v11010, "cuGraphAddEventRecordNode", 11010,
     "cuGraphAddEventRecordNode");
  RG(f->AddEventWait, PFN_cuGraphAddEventWaitNode_v11010, "cuGraphAddEventWaitNode", 11010,
     "cuGraphAddEventWaitNode");
  RG(f->AddMemAlloc, PFN_cuGraphAddMemAllocNode_v11040, "cuGraphAddMemAllocNode", 11040,
     "cuGraphAddMemAllocNode");
  RG(f->AddMemFree, PFN_cuGraphAddMemFreeNode_v11040, "cuGraphAddMemFreeNode", 11040,
     "cuGraphAddMemFreeNode");
  RG(f->AddNode, PFN_cuGraphAddNode_v12030, "cuGraphAddNode", 12030, "cuGraphAddNode_v2");
  RG(f->AddDepsEdge, PFN_cuGraphAddDependencies_v12030, "cuGraphAddDependencies", 12030,
     "cuGraphAddDependencies_v2");
  RG(f->CondHandleCreate, PFN_cuGraphConditionalHandleCreate_v12030, "cuGraphConditionalHandleCreate",
     12030, "cuGraphConditionalHandleCreate");
  RG(f->GetNodes, PFN_cuGraphGetNodes_v10000, "cuGraphGetNodes", 10000, "cuGraphGetNodes");
  RG(f->NodeGetType, PFN_cuGraphNodeGetType_v10000, "cuGraphNodeGetType", 10000, "cuGraphNodeGetType");
  RG(f->ExecUpdate, PFN_cuGraphExecUpdate_v12000, "cuGraphExecUpdate", 12000, "cuGraphExecUpdate_v2");
  RG(f->ExecKernel, PFN_cuGraphExecKernelNodeSetParams_v12000, "cuGraphExecKernelNodeSetParams", 12000,
     "cuGraphExecKernelNodeSetParams_v2");
  RG(f->ExecMemcpy, PFN_cuGraphExecMemcpyNodeSetParams_v10020, "cuGraphExecMemcpyNodeSetParams", 10020,
     "cuGraphExecMemcpyNodeSetParams");
  RG(f->ExecMemset, PFN_cuGraphExecMemsetNodeSetParams_v10020, "cuGraphExecMemsetNodeSetParams", 10020,
     "cuGraphExecMemsetNodeSetParams");
  RG(f->ExecChild, PFN_cuGraphExecChildGraphNodeSetParams_v11010, "cuGraphExecChildGraphNodeSetParams",
     11010, "cuGraphExecChildGraphNodeSetParams");
  RG(f->ExecEventRecord, PFN_cuGraphExecEventRecordNodeSetEvent_v11010,
     "cuGraphExecEventRecordNodeSetEvent", 11010, "cuGraphExecEventRecordNodeSetEvent");
  RG(f->ExecEventWait, PFN_cuGraphExecEventWaitNodeSetEvent_v11010, "cuGraphExecEventWaitNodeSetEvent",
     11010, "cuGraphExecEventWaitNodeSetEvent");
  RG(f->NodeSetEnabled, PFN_cuGraphNodeSetEnabled_v11060, "cuGraphNodeSetEnabled", 11060,
     "cuGraphNodeSetEnabled");
  RG(f->Upload, PFN_cuGraphUpload_v11010, "cuGraphUpload", 11010, "cuGraphUpload");
#undef RG
  f->UploadPt = (PFN_cuGraphUpload_v11010_ptsz)cucap_getproc(
      lib, "cuGraphUpload", 11010, "cuGraphUpload", 1);
  gs->loaded = f->Create && f->AddKernel && f->AddMemcpy && f->AddMemset && f->AddEmpty ? 1 : -1;
  return gs->loaded > 0 ? f : NULL;
}

/* ---- node parameters ------------------------------------------------------ */

void rg_kparams_free(rg_kparams *k) {
  free(k->args);
  free(k->kp);
  memset(k, 0, sizeof *k);
}

const char *rg_kparams_make(rp_state *R, const cucap_fb_launch *l, const cucap_map *handles,
                            rg_kparams *out) {
  memset(out, 0, sizeof *out);
  uint64_t idx;
  if (!l)
    return "graph: kernel node without parameters";
  if (!cucap_map_get(&R->code.func, cucap_fb_launch_function(l), &idx))
    return "graph: kernel node of an unknown function";
  rp_func *fi = &R->code.funcs[idx];
  CUfunction fn = rp_func_fn(R, fi);
  if (!fn)
    return R->failed ? NULL : "graph: kernel node of an unloaded module";
  rp_func_layout(R, fi);
  uint64_t n64 = 0;
  if (cucap_reader_launch_args_size(R->r, l, &n64) != CUCAP_OK || n64 > RP_MAX_PARAM_BYTES)
    return "graph: kernel argument block missing or larger than 1 MiB";
  size_t n = (size_t)n64;
  size_t need = n > fi->layout_bytes ? n : fi->layout_bytes;
  out->args = calloc(1, need + 8);
  if (!out->args) {
    rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
    return NULL;
  }
  if (cucap_reader_launch_args_read(R->r, l, out->args, n) != CUCAP_OK) {
    rg_kparams_free(out);
    return "graph: kernel argument blob missing";
  }
  /* 8-byte parameters: pointers into moved ranges, conditional handles */
  size_t np = fi->nparams ? fi->nparams : n / 8;
  for (size_t i = 0; i < np; i++) {
    uint32_t off = fi->nparams ? fi->params[i].offset : (uint32_t)(i * 8);
    if (fi->nparams && fi->params[i].size > 8) { /* a struct parameter */
      if (R->mem.nreloc)
        R->rep->patched_params +=
            rp_mem_patch_struct(&R->mem, out->args, n, off, fi->params[i].size);
      continue;
    }
    if (fi->nparams && (fi->params[i].size != 8 || off % 8))
      continue;
    if (off + 8 > n)
      continue;
    uint64_t v, nv;
    memcpy(&v, out->args + off, 8);
    if (handles && handles->count && cucap_map_get(handles, v, &nv)) {
      if (nv != v) {
        memcpy(out->args + off, &nv, 8);
        R->rep->patched_params++;
      }
      continue;
    }
    int rel = 0;
    nv = R->mem.nreloc ? rp_mem_translate(&R->mem, v, &rel) : v;
    if (rel) {
      memcpy(out->args + off, &nv, 8);
      R->rep->patched_params++;
    }
  }
  out->argsize = n;
  out->extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
  out->extra[1] = out->args;
  out->extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
  out->extra[3] = &out->argsize;
  out->extra[4] = CU_LAUNCH_PARAM_END;
  CUDA_KERNEL_NODE_PARAMS *p = &out->p;
  if (fi->nparams) {
    out->kp = malloc(fi->nparams * sizeof *out->kp);
    if (!out->kp) {
      rg_kparams_free(out);
      rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
      return NULL;
    }
    for (size_t i = 0; i < fi->nparams; i++) {
      uint32_t off = fi->params[i].offset;
      out->kp[i] = off < need ? out->args + off : out->args;
    }
    p->kernelParams = out->kp;
  } else if (n) {
    p->extra = out->extra;
  }
  const cucap_fb_dim3 *gd = cucap_fb_launch_grid(l), *bd = cucap_fb_launch_block(l);
  p->func = fn;
  p->gridDimX = gd ? gd->x : 1, p->gridDimY = gd ? gd->y : 1, p->gridDimZ = gd ? gd->z : 1;
  p->blockDimX = bd ? bd->x : 1, p->blockDimY = bd ? bd->y : 1, p->blockDimZ = bd ? bd->z : 1;
  p->sharedMemBytes = cucap_fb_launch_shared_mem(l);
  return NULL;
}

void rg_memset_params(rp_state *R, const cucap_fb_memset *m, CUDA_MEMSET_NODE_PARAMS *p) {
  memset(p, 0, sizeof *p);
  p->dst = (CUdeviceptr)rp_tr(R, cucap_fb_memset_dst(m));
  p->pitch = cucap_fb_memset_pitch(m);
  p->value = cucap_fb_memset_value(m);
  p->elementSize = cucap_fb_memset_elem_size(m);
  p->width = cucap_fb_memset_count(m);
  p->height = cucap_fb_memset_height(m) ? cucap_fb_memset_height(m) : 1;
}

/* The rebuilt exec's node writing host memory at recorded address dst
 * (packed size bytes): the verify observer compares its buffer with the
 * result the recorder read after each launch (cucap_replay_session_graph_host_buffer). */
static void rg_note_dst(rp_state *R, uint64_t dst, uint64_t size, void *buf) {
  rp_gx *x = R->gs ? R->gs->building : NULL;
  if (!x)
    return;
  for (size_t i = 0; i < x->nhd; i++)
    if (x->hd[i].dst == dst && x->hd[i].size == size) {
      x->hd[i].buf = buf; /* new parameters of the same node */
      return;
    }
  rp_hostdst *n = realloc(x->hd, (x->nhd + 1) * sizeof *n);
  if (!n)
    return;
  x->hd = n;
  x->hd[x->nhd++] = (rp_hostdst){dst, size, buf};
}

const char *rg_memcpy_params(rp_state *R, const cucap_fb_memcpy *c, CUDA_MEMCPY3D *p) {
  const cucap_fb_copy_geometry *g = cucap_fb_memcpy_geometry(c);
  memset(p, 0, sizeof *p);
  if (!g)
    return "graph: memcpy node without geometry";
  unsigned st = cucap_fb_copy_geometry_src_memory_type(g);
  unsigned dt = cucap_fb_copy_geometry_dst_memory_type(g);
  if (st == CU_MEMORYTYPE_ARRAY || dt == CU_MEMORYTYPE_ARRAY)
    return "graph: memcpy node with a CUDA array (not rebuilt)";
  int sh = cucap_memcpy_side_host(c, 0), dh = cucap_memcpy_side_host(c, 1);
  uint64_t w = cucap_fb_copy_geometry_width_bytes(g);
  uint64_t h = cucap_fb_copy_geometry_height(g) ? cucap_fb_copy_geometry_height(g) : 1;
  uint64_t d = cucap_fb_copy_geometry_depth(g) ? cucap_fb_copy_geometry_depth(g) : 1;
  uint64_t src = cucap_fb_memcpy_src(c), dst = cucap_fb_memcpy_dst(c);
  uint64_t total = w * h * d;
  if (total > ((uint64_t)1 << 34))
    return "graph: memcpy node from/to host memory too large (not rebuilt)";
  /* a host side is packed into a page-locked buffer of the replayer (like
   * the program's, which the driver copies from/to): the bytes the program
   * had there (source), or what the node writes (destination, compared by
   * verify with the result the recorder read after each launch) */
  if (sh) {
    const rp_stash *sp = rp_capture_stash_find(R, src, total);
    void *b = NULL;
    rp_gx *x = R->gs ? R->gs->building : NULL;
    if (sp) { /* the bytes captured with the copy */
      b = rp_capture_host_buffer(R, sp->size);
      if (!b || cucap_reader_blob_read(R->r, sp->data, b, sp->size) != CUCAP_OK)
        return "graph: memcpy node from host memory (payload missing)";
      if (!dh)
        rp_patch_payload(R, b, total, dst, NULL);
    } else if (x && cucap_map_get(&R->gs->exec_payloads, x->rec_exec, NULL)) {
      /* the bytes come with each launch (rp_graph_launch_payloads) */
      rp_hostbuf *n = realloc(x->hb, (x->nhb + 1) * sizeof *n);
      if (!n || !(b = rp_capture_host_buffer(R, total))) {
        if (n)
          x->hb = n;
        return "graph: memcpy node from host memory (out of memory)";
      }
      x->hb = n;
      memset(&x->hb[x->nhb], 0, sizeof *x->hb);
      x->hb[x->nhb].src = cucap_memcpy_side_addr(c, 0);
      x->hb[x->nhb].size = total;
      x->hb[x->nhb].dst = dh ? 0 : dst;
      x->hb[x->nhb].buf = b;
      x->nhb++;
    } else {
      return "graph: memcpy node from host, bytes not recorded";
    }
    p->srcMemoryType = CU_MEMORYTYPE_HOST;
    p->srcHost = b;
    p->srcPitch = w;
    p->srcHeight = h;
  } else {
    rp_copy3d_src_dev(p, g, rp_tr(R, src));
  }
  if (dh) {
    /* a copy a dry capture swallowed: the buffer the observers were given
     * with it (verified at its CopyResult); else a buffer of this exec */
    const rp_stash *dry = !sh ? rp_capture_dtoh_find(R, src, dst, total) : NULL;
    void *b = dry && dry->host ? dry->host : rp_capture_host_buffer(R, total);
    if (!b)
      return "graph: memcpy node to host memory (out of memory)";
    rg_note_dst(R, cucap_memcpy_side_addr(c, 1), total, b);
    p->dstMemoryType = CU_MEMORYTYPE_HOST;
    p->dstHost = b;
    p->dstPitch = w;
    p->dstHeight = h;
  } else {
    rp_copy3d_dst_dev(p, g, rp_tr(R, dst));
  }
  p->WidthInBytes = w;
  p->Height = h;
  p->Depth = d;
  return NULL;
}

/* ---- topology ---------------------------------------------------------------- */

static uint64_t rg_mix(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; i++, v >>= 8)
    h = (h ^ (v & 0xff)) * 1099511628211ull;
  return h;
}

static uint64_t rg_sig_bytes(uint64_t h, const uint8_t *p, size_t n) {
  for (size_t i = 0; p && i < n; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return rg_mix(h, n);
}

uint64_t rp_graph_signature(const cucap_fb_graph *g) {
  uint64_t h = 1469598103934665603ull;
  size_t nn = cucap_fb_graph_nodes_len(g);
  h = rg_mix(h, nn);
  for (size_t i = 0; i < nn; i++) {
    const cucap_fb_graph_node *n = cucap_fb_graph_nodes_at(g, i);
    h = rg_mix(h, cucap_fb_graph_node_type(n));
    h = rg_mix(h, cucap_fb_graph_node_handle(n));
    size_t nd = 0;
    const uint64_t *dv = cucap_fb_graph_node_dependencies(n, &nd);
    h = rg_sig_bytes(h, (const uint8_t *)dv, nd * 8);
    size_t ne = 0;
    const uint32_t *ev = cucap_fb_graph_node_dependency_edges(n, &ne);
    h = rg_sig_bytes(h, (const uint8_t *)ev, ne * 4);
    const cucap_fb_launch *l = cucap_fb_graph_node_launch(n);
    if (l) {
      size_t na = 0;
      const uint8_t *a = cucap_fb_launch_args(l, &na);
      h = rg_sig_bytes(h, a, na);
      cucap_hash128 bh = rp_h(cucap_fb_launch_args_blob(l));
      h = rg_mix(rg_mix(h, bh.lo), bh.hi);
      h = rg_mix(h, cucap_fb_launch_function(l));
      const cucap_fb_dim3 *gd = cucap_fb_launch_grid(l), *bd = cucap_fb_launch_block(l);
      h = rg_sig_bytes(h, (const uint8_t *)gd, gd ? sizeof *gd : 0);
      h = rg_sig_bytes(h, (const uint8_t *)bd, bd ? sizeof *bd : 0);
      h = rg_mix(h, cucap_fb_launch_shared_mem(l));
    }
    const cucap_fb_memset *m = cucap_fb_graph_node_memset(n);
    if (m) {
      h = rg_mix(h, cucap_fb_memset_dst(m));
      h = rg_mix(h, cucap_fb_memset_value(m));
      h = rg_mix(h, cucap_fb_memset_count(m));
      h = rg_mix(h, cucap_fb_memset_height(m));
    }
    const cucap_fb_memcpy *c = cucap_fb_graph_node_memcpy(n);
    if (c) {
      h = rg_mix(h, cucap_fb_memcpy_src(c));
      h = rg_mix(h, cucap_fb_memcpy_dst(c));
      h = rg_mix(h, cucap_fb_memcpy_size(c));
    }
    h = rg_mix(h, cucap_fb_graph_node_event(n));
    h = rg_mix(h, cucap_fb_graph_node_cond_handle(n));
    for (size_t k = 0; k < cucap_fb_graph_node_bodies_len(n); k++)
      h = rg_mix(h, rp_graph_signature(cucap_fb_graph_node_bodies_at(n, k)));
  }
  return h;
}

/* ---- rebuilding ----------------------------------------------------------------- */

typedef struct rg_ctx {
  rp_state *R;
  const rg_fns *f;
  CUcontext ctx;
  cucap_map *handles;             /* recorded conditional handle -> live */
} rg_ctx;

#define RG_MAX_DEPTH 16

/* Why the topology cannot be rebuilt, or NULL: checked before any driver call. */
static const char *rg_check(rg_ctx *c, const cucap_fb_graph *g, int depth) {
  if (depth > RG_MAX_DEPTH)
    return "graph: nested too deep (not rebuilt)";
  size_t nn = cucap_fb_graph_nodes_len(g);
  for (size_t i = 0; i < nn; i++) {
    const cucap_fb_graph_node *n = cucap_fb_graph_nodes_at(g, i);
    switch (cucap_fb_graph_node_type(n)) {
    case CUCAP_FB_GRAPHNODETYPE_KERNEL:
      if (!cucap_fb_graph_node_launch(n))
        return "graph: kernel node without parameters";
      break;
    case CUCAP_FB_GRAPHNODETYPE_MEMSET:
      if (!cucap_fb_graph_node_memset(n))
        return "graph: memset node without parameters";
      break;
    case CUCAP_FB_GRAPHNODETYPE_MEMCPY: {
      const cucap_fb_memcpy *m = cucap_fb_graph_node_memcpy(n);
      const cucap_fb_copy_geometry *geo = m ? cucap_fb_memcpy_geometry(m) : NULL;
      if (!geo)
        return "graph: memcpy node without geometry";
      unsigned st = cucap_fb_copy_geometry_src_memory_type(geo);
      unsigned dt = cucap_fb_copy_geometry_dst_memory_type(geo);
      if (st == CU_MEMORYTYPE_ARRAY || dt == CU_MEMORYTYPE_ARRAY)
        return "graph: memcpy node with a CUDA array (not rebuilt)";
      rp_gx *x = c->R->gs ? c->R->gs->building : NULL;
      if (cucap_memcpy_side_host(m, 0) &&
          !(x && cucap_map_get(&c->R->gs->exec_payloads, x->rec_exec, NULL))) {
        uint64_t w = cucap_fb_copy_geometry_width_bytes(geo);
        uint64_t h = cucap_fb_copy_geometry_height(geo) ? cucap_fb_copy_geometry_height(geo) : 1;
        uint64_t d = cucap_fb_copy_geometry_depth(geo) ? cucap_fb_copy_geometry_depth(geo) : 1;
        if (!rp_capture_stash_find(c->R, cucap_fb_memcpy_src(m), w * h * d))
          return "graph: memcpy node from host, bytes not recorded";
      }
      break;
    }
    case CUCAP_FB_GRAPHNODETYPE_EMPTY:
    case CUCAP_FB_GRAPHNODETYPE_HOST:
    case CUCAP_FB_GRAPHNODETYPE_WAITEVENT:
    case CUCAP_FB_GRAPHNODETYPE_EVENTRECORD:
      break;
    case CUCAP_FB_GRAPHNODETYPE_MEMALLOC:
    case CUCAP_FB_GRAPHNODETYPE_MEMFREE:
      if (!cucap_fb_graph_node_alloc(n))
        return "graph: memory node without its address";
      if (!c->f->AddMemAlloc || !c->f->AddMemFree)
        return "graph: driver lacks memory nodes";
      break;
    case CUCAP_FB_GRAPHNODETYPE_GRAPH: {
      if (cucap_fb_graph_node_bodies_len(n) != 1)
        return "graph: child graph node without its graph";
      if (!c->f->AddChild)
        return "graph: driver lacks child graph nodes";
      const char *why = rg_check(c, cucap_fb_graph_node_bodies_at(n, 0), depth + 1);
      if (why)
        return why;
      break;
    }
    case CUCAP_FB_GRAPHNODETYPE_CONDITIONAL: {
      size_t nb = cucap_fb_graph_node_bodies_len(n);
      if (!cucap_fb_graph_node_cond_size(n) || nb != cucap_fb_graph_node_cond_size(n))
        return "graph: conditional node without its bodies";
      if (!c->f->AddNode || !c->f->CondHandleCreate)
        return "graph: driver lacks conditional nodes";
      for (size_t k = 0; k < nb; k++) {
        const char *why = rg_check(c, cucap_fb_graph_node_bodies_at(n, k), depth + 1);
        if (why)
          return why;
      }
      break;
    }
    case CUCAP_FB_GRAPHNODETYPE_EXTSEMASSIGNAL:
    case CUCAP_FB_GRAPHNODETYPE_EXTSEMASWAIT:
      return "graph: external semaphore node (not rebuilt)";
    case CUCAP_FB_GRAPHNODETYPE_BATCHMEMOP:
      return "graph: batch memory op node (not rebuilt)";
    default:
      return "graph: unknown node type (not rebuilt)";
    }
  }
  return NULL;
}

static const char *rg_fill(rg_ctx *c, CUgraph gr, const cucap_fb_graph *g, cucap_map *nodes,
                           int depth);

/* A graph built from topology t into a new live graph (child graph nodes). */
static const char *rg_fill_new(rg_ctx *c, const cucap_fb_graph *t, CUgraph *out, int depth) {
  *out = NULL;
  if (!rp_cu(c->R, c->f->Create(out, 0), "cuGraphCreate"))
    return NULL;
  const char *why = rg_fill(c, *out, t, NULL, depth);
  if (why || c->R->failed) {
    if (c->R->d.df.GraphDestroy)
      c->R->d.df.GraphDestroy(*out);
    *out = NULL;
  }
  return why;
}

/* rg_add, an event record or wait node (an empty node where the event is
 * unknown). */
static const char *rg_add_event(rg_ctx *c, CUgraph gr, const cucap_fb_graph_node *n,
                                const CUgraphNode *deps, size_t nd, CUgraphNode *out) {
  rp_state *R = c->R;
  const rg_fns *f = c->f;
  int rec = cucap_fb_graph_node_type(n) == CUCAP_FB_GRAPHNODETYPE_EVENTRECORD;
  uint64_t ev = 0;
  if (!cucap_map_get(&R->cx.event, cucap_fb_graph_node_event(n), &ev) ||
      !(rec ? f->AddEventRecord : f->AddEventWait)) {
    rp_substitute(R, "graph event node, unknown event (empty node)");
    if (R->failed)
      return NULL;
    rp_cu(R, f->AddEmpty(out, gr, deps, nd), "cuGraphAddEmptyNode");
    return NULL;
  }
  if (rec)
    rp_cu(R, f->AddEventRecord(out, gr, deps, nd, (CUevent)(uintptr_t)ev),
          "cuGraphAddEventRecordNode");
  else
    rp_cu(R, f->AddEventWait(out, gr, deps, nd, (CUevent)(uintptr_t)ev),
          "cuGraphAddEventWaitNode");
  return NULL;
}

/* rg_add, a memory allocation node: an empty node where the recorded
 * address is backed for the whole run, else a new allocation that later
 * uses of the address are relocated to. */
static const char *rg_add_mem_alloc(rg_ctx *c, CUgraph gr, const cucap_fb_graph_node *n,
                                    const CUgraphNode *deps, size_t nd, CUgraphNode *out) {
  rp_state *R = c->R;
  const rg_fns *f = c->f;
  const cucap_fb_alloc *a = cucap_fb_graph_node_alloc(n);
  uint64_t addr = cucap_fb_alloc_address(a), size = cucap_fb_alloc_size(a);
  int rel = 0;
  (void)rp_mem_translate(&R->mem, addr, &rel);
  if (rp_mem_is_fixed(&R->mem, addr, size) && !rel) {
    /* backed at its recorded address for the whole run: the node's
     * ordering stays, the memory is ours */
    rp_cu(R, f->AddEmpty(out, gr, deps, nd), "cuGraphAddEmptyNode");
    return NULL;
  }
  CUDA_MEM_ALLOC_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.poolProps.location.id = R->dev;
  p.bytesize = size;
  if (!rp_cu(R, f->AddMemAlloc(out, gr, deps, nd, &p), "cuGraphAddMemAllocNode"))
    return NULL;
  /* every later use of the recorded address goes to the new one */
  if (!rp_mem_add_reloc(&R->mem, addr, size, p.dptr, 0))
    rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
  R->rep->relocated_allocs++;
  return NULL;
}

/* rg_add, a memory free node (empty where the memory is ours). */
static const char *rg_add_mem_free(rg_ctx *c, CUgraph gr, const cucap_fb_graph_node *n,
                                   const CUgraphNode *deps, size_t nd, CUgraphNode *out) {
  rp_state *R = c->R;
  const rg_fns *f = c->f;
  uint64_t addr = cucap_fb_alloc_address(cucap_fb_graph_node_alloc(n));
  int rel = 0;
  uint64_t live = rp_mem_translate(&R->mem, addr, &rel);
  if (!rel && rp_mem_is_fixed(&R->mem, addr, 1)) {
    rp_cu(R, f->AddEmpty(out, gr, deps, nd), "cuGraphAddEmptyNode");
    return NULL;
  }
  rp_cu(R, f->AddMemFree(out, gr, deps, nd, (CUdeviceptr)live), "cuGraphAddMemFreeNode");
  return NULL;
}

/* rg_add, a conditional node with its body graphs filled. */
static const char *rg_add_conditional(rg_ctx *c, CUgraph gr, const cucap_fb_graph_node *n,
                                      const CUgraphNode *deps, size_t nd, CUgraphNode *out,
                                      int depth) {
  rp_state *R = c->R;
  const rg_fns *f = c->f;
  uint64_t live_h = 0;
  if (!cucap_map_get(c->handles, cucap_fb_graph_node_cond_handle(n), &live_h))
    return "graph: conditional handle not created";
  CUgraphNodeParams p;
  memset(&p, 0, sizeof p);
  p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  p.conditional.handle = live_h;
  p.conditional.type = (CUgraphConditionalNodeType)cucap_fb_graph_node_cond_type(n);
  p.conditional.size = cucap_fb_graph_node_cond_size(n);
  p.conditional.ctx = c->ctx;
  if (!rp_cu(R, f->AddNode(out, gr, deps, NULL, nd, &p), "cuGraphAddNode (conditional)"))
    return NULL;
  for (unsigned k = 0; k < p.conditional.size; k++) {
    if (!p.conditional.phGraph_out || !p.conditional.phGraph_out[k])
      return "graph: driver gave no conditional body graph";
    const char *why = rg_fill(c, p.conditional.phGraph_out[k],
                              cucap_fb_graph_node_bodies_at(n, k), NULL, depth + 1);
    if (why || R->failed)
      return why;
  }
  return NULL;
}

static const char *rg_add(rg_ctx *c, CUgraph gr, const cucap_fb_graph_node *n,
                          const CUgraphNode *deps, size_t nd, CUgraphNode *out, int depth) {
  rp_state *R = c->R;
  const rg_fns *f = c->f;
  switch (cucap_fb_graph_node_type(n)) {
  case CUCAP_FB_GRAPHNODETYPE_KERNEL: {
    rg_kparams k;
    const char *why = rg_kparams_make(R, cucap_fb_graph_node_launch(n), c->handles, &k);
    if (why || R->failed)
      return why;
    CUresult r = f->AddKernel(out, gr, deps, nd, &k.p);
    rg_kparams_free(&k);
    rp_cu(R, r, "cuGraphAddKernelNode");
    return NULL;
  }
  case CUCAP_FB_GRAPHNODETYPE_MEMSET: {
    CUDA_MEMSET_NODE_PARAMS p;
    rg_memset_params(R, cucap_fb_graph_node_memset(n), &p);
    rp_cu(R, f->AddMemset(out, gr, deps, nd, &p, c->ctx), "cuGraphAddMemsetNode");
    return NULL;
  }
  case CUCAP_FB_GRAPHNODETYPE_MEMCPY: {
    CUDA_MEMCPY3D p;
    const char *why = rg_memcpy_params(R, cucap_fb_graph_node_memcpy(n), &p);
    if (why)
      return why;
    rp_cu(R, f->AddMemcpy(out, gr, deps, nd, &p, c->ctx), "cuGraphAddMemcpyNode");
    return NULL;
  }
  case CUCAP_FB_GRAPHNODETYPE_HOST:
    rp_substitute(R, "graph host node (an empty node runs instead)");
    if (R->failed)
      return NULL;
    /* an empty node keeps the dependencies */
    __attribute__((fallthrough));
  case CUCAP_FB_GRAPHNODETYPE_EMPTY:
    rp_cu(R, f->AddEmpty(out, gr, deps, nd), "cuGraphAddEmptyNode");
    return NULL;
  case CUCAP_FB_GRAPHNODETYPE_WAITEVENT:
  case CUCAP_FB_GRAPHNODETYPE_EVENTRECORD:
    return rg_add_event(c, gr, n, deps, nd, out);
  case CUCAP_FB_GRAPHNODETYPE_MEMALLOC:
    return rg_add_mem_alloc(c, gr, n, deps, nd, out);
  case CUCAP_FB_GRAPHNODETYPE_MEMFREE:
    return rg_add_mem_free(c, gr, n, deps, nd, out);
  case CUCAP_FB_GRAPHNODETYPE_GRAPH: {
    CUgraph child = NULL;
    const char *why = rg_fill_new(c, cucap_fb_graph_node_bodies_at(n, 0), &child, depth + 1);
    if (!child)
      return why;
    CUresult r = f->AddChild(out, gr, deps, nd, child); /* the node takes a copy */
    if (R->d.df.GraphDestroy)
      R->d.df.GraphDestroy(child);
    rp_cu(R, r, "cuGraphAddChildGraphNode");
    return NULL;
  }
  case CUCAP_FB_GRAPHNODETYPE_CONDITIONAL:
    return rg_add_conditional(c, gr, n, deps, nd, out, depth);
  default:
    return "graph: unknown node type (not rebuilt)";
  }
}

/* rg_fill, first: conditional handles belong to the graph that holds their
 * node: made first, kernels before the node may set them. 0 when failed
 * (reported). */
static cucap_status rg_fill_handles(rg_ctx *c, CUgraph gr, const cucap_fb_graph *g) {
  rp_state *R = c->R;
  size_t nn = cucap_fb_graph_nodes_len(g);
  for (size_t i = 0; i < nn; i++) {
    const cucap_fb_graph_node *n = cucap_fb_graph_nodes_at(g, i);
    if (cucap_fb_graph_node_type(n) != CUCAP_FB_GRAPHNODETYPE_CONDITIONAL)
      continue;
    uint64_t rh = cucap_fb_graph_node_cond_handle(n);
    CUgraphConditionalHandle lh = 0;
    CUCAP_RETURN_IF(!rp_cu(R, c->f->CondHandleCreate(&lh, gr, c->ctx,
                                                     cucap_fb_graph_node_cond_default(n),
                                                     cucap_fb_graph_node_cond_flags(n)),
                           "cuGraphConditionalHandleCreate"),
                    CUCAP_ERR_CUDA);
    if (!cucap_map_put(c->handles, rh, lh)) {
      rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
      return CUCAP_ERR_NOMEM;
    }
  }
  return CUCAP_OK;
}

/* rg_fill, per node: the live nodes of its nd recorded dependencies dv
 * (edge data ev, or NULL), split into plain ones (deps) and edges with
 * data added after the node (late, late_e). 0 while a dependency is not
 * added yet. */
static int rg_node_deps(rg_ctx *c, const cucap_map *live, const uint64_t *dv,
                        const uint32_t *ev, size_t nd, CUgraphNode *deps,
                        size_t *nplain_out, CUgraphNode *late,
                        CUgraphEdgeData *late_e, size_t *nlate_out) {
  size_t nplain = 0, nlate = 0;
  for (size_t k = 0; k < nd; k++) {
    uint64_t rec_dep, v;
    uint32_t e = 0;
    memcpy(&rec_dep, dv + k, sizeof rec_dep);
    if (ev)
      memcpy(&e, ev + k, sizeof e);
    if (!cucap_map_get(live, rec_dep, &v)) {
      return 0;
    } else if (e && c->f->AddDepsEdge) {
      /* added once the node exists: cuGraphAdd*Node takes default
       * edges only */
      late[nlate] = (CUgraphNode)(uintptr_t)v;
      memset(&late_e[nlate], 0, sizeof late_e[nlate]);
      cucap_edge_unpack(e, &late_e[nlate].from_port, &late_e[nlate].to_port,
                        &late_e[nlate].type);
      nlate++;
    } else {
      /* a driver without edge data: a full dependency, stricter than
       * the recorded one, never a race */
      deps[nplain++] = (CUgraphNode)(uintptr_t)v;
    }
  }
  *nplain_out = nplain;
  *nlate_out = nlate;
  return 1;
}

/* rg_fill, after adding node: its dependencies with edge data. 0 when
 * failed (reported). */
static cucap_status rg_add_late_edges(rg_ctx *c, CUgraph gr, CUgraphNode node,
                             CUgraphNode *late, CUgraphEdgeData *late_e,
                             size_t nlate) {
  for (size_t k = 0; k < nlate; k++) {
    CUresult r = c->f->AddDepsEdge(gr, &late[k], &node, &late_e[k], 1);
    if (r != CUDA_SUCCESS) {
      /* the driver refuses this kind of edge here: keep the order */
      CUCAP_DEBUG("replay: graph edge with data (port %u->%u, type %u) "
                  "refused (CUresult %d): added as a full dependency",
                  late_e[k].from_port, late_e[k].to_port, late_e[k].type, (int)r);
      CUCAP_RETURN_IF(!rp_cu(c->R, c->f->AddDepsEdge(gr, &late[k], &node, NULL, 1),
                             "cuGraphAddDependencies"),
                      CUCAP_ERR_CUDA);
    }
  }
  return CUCAP_OK;
}

/* Adds the nodes of topology g to the live graph gr, dependencies first
 * (one pass when the recorder listed them topologically). */
static const char *rg_fill(rg_ctx *c, CUgraph gr, const cucap_fb_graph *g, cucap_map *nodes,
                           int depth) {
  rp_state *R = c->R;
  size_t nn = cucap_fb_graph_nodes_len(g);
  if (rg_fill_handles(c, gr, g) != CUCAP_OK)
    return NULL;
  cucap_map local = {0}, *live = nodes ? nodes : &local; /* recorded node -> live */
  unsigned char *done = calloc(nn ? nn : 1, 1);
  size_t maxd = 1;
  for (size_t i = 0; i < nn; i++) {
    size_t d = cucap_fb_graph_node_dependencies_len(cucap_fb_graph_nodes_at(g, i));
    if (d > maxd)
      maxd = d;
  }
  CUgraphNode *deps = malloc(maxd * sizeof *deps);
  CUgraphNode *late = malloc(maxd * sizeof *late); /* edges with data */
  CUgraphEdgeData *late_e = malloc(maxd * sizeof *late_e);
  const char *why = NULL;
  if (!done || !deps || !late || !late_e) {
    rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
    goto out;
  }
  size_t added = 0;
  while (added < nn) {
    size_t before = added;
    for (size_t i = 0; i < nn; i++) {
      if (done[i])
        continue;
      const cucap_fb_graph_node *n = cucap_fb_graph_nodes_at(g, i);
      size_t nd = 0, ne = 0;
      const uint64_t *dv = cucap_fb_graph_node_dependencies(n, &nd);
      const uint32_t *ev = cucap_fb_graph_node_dependency_edges(n, &ne);
      if (ne != nd)
        ev = NULL; /* not parallel to the dependencies: all default */
      size_t nplain = 0, nlate = 0;
      if (!rg_node_deps(c, live, dv, ev, nd, deps, &nplain, late, late_e, &nlate))
        continue;
      CUgraphNode node = NULL;
      why = rg_add(c, gr, n, deps, nplain, &node, depth);
      if (why || R->failed)
        goto out;
      if (rg_add_late_edges(c, gr, node, late, late_e, nlate) != CUCAP_OK)
        goto out;
      if (!cucap_map_put(live, cucap_fb_graph_node_handle(n), (uint64_t)(uintptr_t)node)) {
        rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
        goto out;
      }
      done[i] = 1;
      added++;
    }
    if (added == before) { /* a dependency outside the graph, or a cycle */
      why = "graph: dependencies not resolvable (not rebuilt)";
      goto out;
    }
  }
out:
  free(done);
  free(deps);
  free(late);
  free(late_e);
  cucap_map_free(&local);
  return why;
}

const char *rp_graph_rebuild(rp_state *R, const cucap_fb_graph *g, CUgraph *out,
                             cucap_map *nodes, cucap_map *handles) {
  *out = NULL;
  /* no topology: the recorder could not walk the graph (or it was empty,
   * where skipping loses nothing) */
  if (cucap_fb_graph_nodes_len(g) == 0)
    return "graph: topology not recorded (not rebuilt)";
  rg_ctx c = {R, rp_graph_fns(R), NULL, handles};
  if (!c.f)
    return "graph: driver lacks the graph construction API";
  const char *why = rg_check(&c, g, 0); /* everything checked before any driver call */
  if (why)
    return why;
  if (R->d.df.CtxGetCurrent)
    (void)R->d.df.CtxGetCurrent(&c.ctx);
  cucap_map own = {0};
  if (!c.handles)
    c.handles = &own;
  CUgraph gr = NULL;
  if (!rp_cu(R, c.f->Create(&gr, 0), "cuGraphCreate")) {
    cucap_map_free(&own);
    return NULL;
  }
  why = rg_fill(&c, gr, g, nodes, 0);
  cucap_map_free(&own);
  if (why || R->failed) {
    if (R->d.df.GraphDestroy)
      R->d.df.GraphDestroy(gr);
    return why;
  }
  *out = gr;
  return NULL;
}
